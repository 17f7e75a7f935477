//! Fail closed where the kernel refuses user namespaces, with the hint that names the switch.
//! The dev VM's kernel has no `kernel.unprivileged_userns_clone` (a Debian and Ubuntu patch),
//! and turning `user.max_user_namespaces` off there would change the host under every other
//! test, so both are shown in a guest (tests/common/vm.rs) running Debian 12's own kernel:
//! each switch is turned off, airlock is run as uid 65534 and as root, in its own mode and
//! JSON mode and as bwrap, and the switch is turned back on.

mod common;

use std::sync::OnceLock;

use common::vm::{self, assert_json_setup_failed, assert_ran, assert_stopped, line};
use serde_json::Value;

/// Each run through the prelude's `try` (tests/common/vm.rs).
const CASES: &str = r#"
ln -s airlock /usr/bin/bwrap
for who in nobody root; do
  if [ $who = nobody ]; then as=as_nobody; else as="sh -c"; fi
  echo 0 > /proc/sys/kernel/unprivileged_userns_clone
  try clone_$who $as "airlock run -- echo task-ran"
  try clone_json_$who $as "airlock run --json -- echo task-ran"
  try clone_bwrap_$who $as "bwrap --ro-bind / / --unshare-user -- echo task-ran"
  echo 1 > /proc/sys/kernel/unprivileged_userns_clone
  echo 0 > /proc/sys/user/max_user_namespaces
  try max_$who $as "airlock run -- echo task-ran"
  echo 10000 > /proc/sys/user/max_user_namespaces
  try again_$who $as "airlock run -- echo task-ran"
done
"#;

fn console() -> Option<&'static str> {
    static BOOT: OnceLock<Result<String, String>> = OnceLock::new();
    vm::console(BOOT.get_or_init(|| vm::boot(CASES, &[])))
}

/// The run failed at step 1 before its task, naming the call and the switch.
fn assert_refused(text: &str, name: &str, switch: &str) {
    let start = "airlock: setup failed: step 1 create namespaces: clone3(";
    assert_stopped(text, name, "125", start, &[switch]);
}

#[test]
fn unprivileged_userns_clone_off_stops_an_unprivileged_caller_naming_it() {
    let Some(text) = console() else { return };
    let switch = "kernel.unprivileged_userns_clone=0";
    assert_refused(text, "clone_nobody", switch);
    assert_json_setup_failed(text, "clone_json_nobody", &[switch]);
    // bwrap mode: a failure before the task, with the same cause named.
    assert_stopped(text, "clone_bwrap_nobody", "1", "bwrap: ", &[switch]);
    // Root may still make user namespaces: the switch is about unprivileged callers.
    assert_ran(text, &["clone_root", "clone_bwrap_root"]);
    let json: Value = serde_json::from_str(&line(text, "json", "clone_json_root")).unwrap();
    assert_eq!(
        (&json["exit_code"], &json["stdout"]),
        (&0.into(), &"task-ran\n".into())
    );
}

#[test]
fn max_user_namespaces_zero_stops_every_caller_naming_it() {
    let Some(text) = console() else { return };
    for who in ["nobody", "root"] {
        assert_refused(text, &format!("max_{who}"), "user.max_user_namespaces=0");
        // The control: with the switch back on, the same line runs its task.
        assert_ran(text, &[&format!("again_{who}")]);
    }
}
