mod common;
use common::*;

#[test]
fn harness_runs_both_launchers() {
    for who in BOTH {
        let o = sh(who, &[], "exit 3");
        assert_eq!(o.status.code(), Some(3), "{who:?}: {}", stderr(&o));
    }
}
