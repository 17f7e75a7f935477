//! Shared harness for the integration tests: start the real airlock binary as root and as an
//! unprivileged user (uid 65534 through setpriv), from a 0755 copy that user can reach.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod bounded;
#[allow(unused_imports)] // not every test file runs programs bounded
pub use bounded::*;
pub mod guest_probe;
pub mod vm;

/// Who launches airlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Root,
    /// uid/gid 65534, no supplementary groups.
    Unprivileged,
}

pub const BOTH: [Launcher; 2] = [Launcher::Root, Launcher::Unprivileged];

/// Remove the entries of `dir` named PREFIX + PID + ("-" or "." and anything) whose process
/// PID no longer runs: what test processes, or the tools they ran, left when they ended.
pub fn remove_left_by_dead_processes(dir: &Path, prefix: &str) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split(['-', '.']).next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let path = e.path();
            let _ = match e.file_type().is_ok_and(|t| t.is_dir()) {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
        }
    }
}

/// A new directory in the temporary directory, 0755 so that uid 65534 can reach what is in
/// it, named PREFIX-PID-XXXXXX. Those of test processes that no longer run are removed first,
/// and scripts/test.sh removes them all once the suite is over: a test binary has no hook at
/// its exit (the harness's lints forbid the unsafe call that would register one).
fn own_dir(prefix: &str) -> PathBuf {
    let tmp = std::env::temp_dir();
    remove_left_by_dead_processes(&tmp, &format!("{prefix}-"));
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-{}-", std::process::id()))
        .tempdir_in(&tmp)
        .unwrap()
        .keep();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

/// Runs argv[3:] as uid 0 of a new user namespace whose uid and gid maps are argv[1] (its
/// lines: inside, outside, count) and whose setgroups is argv[2] (`allow` or `deny`), written
/// by this script's parent, host root (`python3 -c IN_USERNS MAP SETGROUPS COMMAND...`).
pub const IN_USERNS: &str = "import ctypes, os, sys
r, w = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    assert ctypes.CDLL(None).unshare(0x10000000) == 0
    os.write(w2, b'x'); os.read(r, 1)
    os.setgid(0); os.setuid(0)
    os.execvp(sys.argv[3], sys.argv[3:])
os.read(r2, 1)
for f, text in (('setgroups', sys.argv[2]), ('uid_map', sys.argv[1]), ('gid_map', sys.argv[1])):
    open(f'/proc/{pid}/{f}', 'w').write(text)
os.write(w, b'x')
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))";

/// tests/fixtures/NAME.c built static (a sandbox or a guest has no C library of its own to
/// lend it) into `dir`: the program's path.
pub fn c_fixture(name: &str, dir: &Path) -> Result<PathBuf, String> {
    let out = dir.join(name);
    let src = format!("{}/tests/fixtures/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let built = Command::new("musl-gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&out)
        .arg(src)
        .output()
        .map_err(|e| format!("musl-gcc: {e}: install musl-tools (scripts/test.sh does)"))?;
    assert!(
        built.status.success(),
        "musl-gcc failed: {}",
        stderr(&built)
    );
    Ok(out)
}

/// The binary under test, copied once into a world-readable directory.
pub fn binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        assert!(
            nix::unistd::geteuid().is_root(),
            "the integration tests launch airlock both as root and as uid 65534: run them as root"
        );
        let dest = own_dir("airlock-test-bin").join("airlock");
        copy_executable(Path::new(env!("CARGO_BIN_EXE_airlock")), &dest);
        dest
    })
}

/// Copy a program by `cp`, so that the copy's writable descriptor lives in cp's process alone:
/// a copy made here would be inherited by a child another test thread forks meanwhile, and an
/// exec of the copy before that child's own exec fails with ETXTBSY.
fn copy_executable(from: &Path, to: &Path) {
    let st = Command::new("cp").arg(from).arg(to).status().unwrap();
    assert!(st.success(), "cp {from:?} {to:?}: {st}");
}

/// The command prefix that runs a program as `who` (empty for root).
pub fn as_user(who: Launcher) -> &'static [&'static str] {
    match who {
        Launcher::Root => &[],
        Launcher::Unprivileged => &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
    }
}

/// A Command that runs `airlock ARGS...` as `who`.
pub fn airlock(who: Launcher, args: &[&str]) -> Command {
    let mut c = match as_user(who).split_first() {
        None => Command::new(binary()),
        Some((prog, rest)) => {
            let mut c = Command::new(prog);
            c.args(rest).arg(binary());
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
        let dest = own_dir("airlock-test-bwrap").join("bwrap");
        copy_executable(binary(), &dest);
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

// Host processes, for checks that nothing of a sandbox is left.

/// A host process, as /proc shows it.
#[derive(Debug)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub uid: u32,
    /// Shown in failure messages (a zombie or a live process).
    #[allow(dead_code)]
    pub state: String,
    pub cmdline: String,
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim_start_matches(':').trim())
}

/// The State of process `pid` (`R (running)`, `T (stopped)`...), empty once it is gone.
#[allow(dead_code)]
pub fn state_of(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status_field(&status, "State").unwrap_or("").to_string()
}

/// Every host process but this one.
pub fn processes() -> Vec<Proc> {
    let me = std::process::id();
    let mut v = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let (Ok(status), Ok(raw)) = (
            std::fs::read_to_string(format!("/proc/{pid}/status")),
            std::fs::read(format!("/proc/{pid}/cmdline")),
        ) else {
            continue;
        };
        let num = |key: &str| {
            status_field(&status, key)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|s| s.parse().ok())
                .unwrap_or(u32::MAX)
        };
        v.push(Proc {
            pid,
            ppid: num("PPid"),
            uid: num("Uid"),
            state: status_field(&status, "State").unwrap_or("").to_string(),
            cmdline: String::from_utf8_lossy(&raw)
                .replace('\0', " ")
                .trim_end()
                .to_string(),
        });
    }
    v
}

/// Host processes whose command line contains `needle`.
pub fn procs_with(needle: &str) -> Vec<Proc> {
    processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(needle))
        .collect()
}

/// Fail unless no host process mentions `needle` within `settle` (zero: right now).
pub fn assert_none_left(needle: &str, settle: Duration, context: &str) {
    let deadline = Instant::now() + settle;
    loop {
        let left = procs_with(needle);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("{context}: still on the host after {settle:?}: {left:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fail if a sandbox's init (its command line reads "airlock-init": the task cannot see the
/// caller's) outlives its launcher for more than `settle`: alive, not a zombie, and no longer
/// the child of a process running an airlock binary (the one under test, or any copy of it: a
/// sandbox someone else runs on this host meanwhile is not an orphan). A sandbox leaked before
/// its task started carries no marker of the test, so it is found this way.
pub fn assert_no_orphaned_init(settle: Duration, context: &str) {
    let deadline = Instant::now() + settle;
    loop {
        let all = processes();
        // A launcher runs an airlock binary; a --userns stage is itself an airlock-init.
        let ours = |pid: u32| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|e| e.file_name() == binary().file_name())
                || all
                    .iter()
                    .any(|p| p.pid == pid && p.cmdline.starts_with("airlock-init"))
        };
        let orphans: Vec<&Proc> = all
            .iter()
            .filter(|p| p.cmdline.starts_with("airlock-init") && !p.state.starts_with('Z'))
            .filter(|p| !ours(p.ppid))
            .collect();
        if orphans.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("{context}: a sandbox's init outlived its launcher: {orphans:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait for a host process whose command line is exactly `cmdline`.
pub fn wait_for_process(cmdline: &str, within: Duration) -> Proc {
    let deadline = Instant::now() + within;
    loop {
        if let Some(p) = procs_with(cmdline)
            .into_iter()
            .find(|p| p.cmdline == cmdline)
        {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "no process {cmdline:?} appeared within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tests of one binary run in parallel, and bubblewrap's `--bind / /` (or `--ro-bind / /`)
/// copies the host's mount tree and then remounts each of its mounts read-only by path: a
/// mount another test adds or removes meanwhile makes it fail ("Unable to apply mount flags:
/// remount ...: No such file or directory", seen once in CI). A launcher run holds
/// [`host_mounts_steady`] throughout; a test changes the host's mounts only inside
/// [`change_host_mounts`], which waits for those runs to end and holds new ones back.
static HOST_MOUNTS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held while a launcher runs: no test mounts or unmounts on the host meanwhile.
pub fn host_mounts_steady() -> std::sync::RwLockReadGuard<'static, ()> {
    HOST_MOUNTS.read().unwrap_or_else(|e| e.into_inner())
}

/// Run `change` (a mount or unmount on the host) while no launcher runs in this test binary.
pub fn change_host_mounts<T>(change: impl FnOnce() -> T) -> T {
    let _only = HOST_MOUNTS.write().unwrap_or_else(|e| e.into_inner());
    change()
}

/// A tracefs mounted (as root) on a 0700 temporary directory, unmounted (lazily) when dropped:
/// the host's /sys/kernel/tracing may be an empty directory, nothing having mounted it there.
pub struct Tracefs(tempfile::TempDir);

impl Tracefs {
    pub fn mount() -> Tracefs {
        Tracefs::of_type("tracefs")
    }

    /// A new mount of the kernel filesystem `fstype` (bpf, say) in a directory of its own,
    /// unmounted when dropped.
    pub fn of_type(fstype: &str) -> Tracefs {
        let d = tempfile::Builder::new()
            .prefix(&format!("airlock-{fstype}-"))
            .tempdir_in("/tmp")
            .unwrap();
        change_host_mounts(|| {
            run_ok(
                Command::new("mount")
                    .args(["-t", fstype, "nodev"])
                    .arg(d.path()),
            )
        });
        Tracefs(d)
    }

    pub fn path(&self) -> &str {
        self.0.path().to_str().unwrap()
    }

    /// A tracing instance of this test's own (instances/NAME-PID: an empty buffer, tracing
    /// on), removed when dropped, a failed assertion included. Tracing instances belong to the
    /// whole machine, not to this mount: drop it before the mount.
    pub fn instance(&self, name: &str) -> TraceInstance {
        let dir = format!("{}/instances/{name}-{}", self.path(), std::process::id());
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {dir}: {e}"));
        TraceInstance(dir)
    }
}

pub struct TraceInstance(String);

impl TraceInstance {
    pub fn path(&self) -> &str {
        &self.0
    }
}

impl Drop for TraceInstance {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        let _ = change_host_mounts(|| Command::new("umount").arg("-l").arg(self.0.path()).status());
    }
}

/// Landlock's ABI version on this kernel (0 without Landlock), asked by the host's python
/// (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`).
pub fn landlock_abi() -> i64 {
    let o = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import ctypes; print(max(0, ctypes.CDLL(None).syscall(444, None, 0, 1)))",
        ])
        .output()
        .unwrap();
    stdout(&o).trim().parse().unwrap()
}

/// Run a host command the test needs (set-up, not the subject) and fail unless it succeeds.
pub fn run_ok(c: &mut Command) {
    let st = c.status().unwrap();
    assert!(st.success(), "{c:?}: {st}");
}
