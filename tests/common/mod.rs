//! Shared harness for the integration tests: start the real airlock binary as root and as an
//! unprivileged user (uid 65534 through setpriv), from a 0755 copy that user can reach.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// Who launches airlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Root,
    /// uid/gid 65534, no supplementary groups.
    Unprivileged,
}

pub const BOTH: [Launcher; 2] = [Launcher::Root, Launcher::Unprivileged];

/// The binary under test, copied once into a world-readable directory.
pub fn binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        assert!(
            nix::unistd::geteuid().is_root(),
            "the integration tests launch airlock both as root and as uid 65534: run them as root"
        );
        let dir = tempfile::Builder::new()
            .prefix("airlock-test-bin")
            .tempdir()
            .unwrap()
            .keep();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let dest = dir.join("airlock");
        std::fs::copy(env!("CARGO_BIN_EXE_airlock"), &dest).unwrap();
        dest
    })
}

/// A Command that runs `airlock ARGS...` as `who`.
pub fn airlock(who: Launcher, args: &[&str]) -> Command {
    let mut c = match who {
        Launcher::Root => Command::new(binary()),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(binary());
            c
        }
    };
    c.args(args);
    c
}

/// Run `airlock run [FLAGS] -- sh -c SCRIPT` and return its output.
pub fn sh(who: Launcher, flags: &[&str], script: &str) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    airlock(who, &args).stdin(Stdio::null()).output().unwrap()
}

/// Run `sh -c SCRIPT` on the host, outside any sandbox, as `who` (the positive control).
pub fn host_sh(who: Launcher, script: &str) -> Output {
    let mut c = match who {
        Launcher::Root => Command::new("sh"),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh"]);
            c
        }
    };
    c.args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parse the JSON report printed by --json / --request.
pub fn report(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): stdout={:?} stderr={:?}",
            stdout(o),
            stderr(o)
        )
    })
}

/// A 0755 temporary directory holding a copy of the binary named `bwrap` (airlock dispatches on
/// argv[0]), made once; uid 65534 can run it.
pub fn bwrap_binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("airlock-test-bwrap")
            .tempdir()
            .unwrap()
            .keep();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let dest = dir.join("bwrap");
        std::fs::copy(binary(), &dest).unwrap();
        dest
    })
}

/// bwrap-mode arguments for a root with /usr and the usr-merge links only.
pub const MIN_ROOT: &[&str] = &[
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/sbin",
    "/sbin",
];
