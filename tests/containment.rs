//! Containment under hostile tasks, for both launchers: as root the memory and process limits
//! are cgroup v1 (and their hits are detected); as uid 65534 they are rlimits (RLIMIT_DATA,
//! RLIMIT_NPROC; a hit is not detected, `limit_hit` stays null). Fork, memory, disk and output
//! bombs, timeouts, CPU and file-size limits, daemons, a task attacking its own init, 200
//! concurrent sandboxes and 200 launchers SIGKILLed at random moments.
//!
//! After every run: nothing of the task survives on the host, no `airlock-*` cgroup of the run
//! is left, and the host can still fork, allocate and write. Every child is bounded: spawned,
//! polled with try_wait against a deadline, killed and the test failed if the deadline passes.

mod common;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// In every task's command line, so that whatever of it survives can be found on the host.
/// One per test (`MARK/test name/`), so tests running in parallel do not see each other's.
const MARK: &str = "airlock-containment-mark";

const POLL: Duration = Duration::from_millis(5);
const SECS_30: Duration = Duration::from_secs(30);

fn mark(test: &str) -> String {
    format!("{MARK}/{test}/")
}

// ---------------------------------------------------------------------------------------------
// Bounded runs
// ---------------------------------------------------------------------------------------------

/// A finished run.
struct Run {
    what: String,
    /// The launcher's pid (setpriv execs airlock: the same process).
    pid: u32,
    out: Output,
    took: Duration,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    fn report(&self) -> Value {
        report(&self.out)
    }

    fn show(&self) -> String {
        format!(
            "{}: status={:?} took={:?}\nstdout={}\nstderr={}",
            self.what,
            self.out.status,
            self.took,
            cut(&stdout(&self.out)),
            cut(&stderr(&self.out))
        )
    }
}

fn cut(s: &str) -> String {
    if s.len() <= 3000 {
        return s.to_string();
    }
    let mut end = 3000;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

/// A started run whose stdout and stderr go to unnamed temporary files (no pipe to drain, so
/// a hundred of them can run at once).
struct Pending {
    what: String,
    child: Child,
    out: File,
    err: File,
    start: Instant,
}

fn spawn(mut cmd: Command, what: String) -> Pending {
    let out = tempfile::tempfile().unwrap();
    let err = tempfile::tempfile().unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap());
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    Pending {
        what,
        child,
        out,
        err,
        start,
    }
}

fn read_all(f: &mut File) -> Vec<u8> {
    let mut v = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut v).unwrap();
    v
}

/// A run abandoned by a failing test is killed, not left behind.
impl Drop for Pending {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pending {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn collect(&mut self, status: ExitStatus) -> Run {
        Run {
            what: self.what.clone(),
            pid: self.child.id(),
            took: self.start.elapsed(),
            out: Output {
                status,
                stdout: read_all(&mut self.out),
                stderr: read_all(&mut self.err),
            },
        }
    }

    fn try_finish(&mut self) -> Option<Run> {
        let status = self.child.try_wait().unwrap()?;
        Some(self.collect(status))
    }

    /// Kill (SIGKILL) and reap; what it printed so far.
    fn kill(&mut self) -> Run {
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        self.collect(status)
    }

    /// Wait for the exit; past `limit` (from the spawn) kill it and fail the test.
    fn finish(mut self, limit: Duration) -> Run {
        loop {
            if let Some(run) = self.try_finish() {
                return run;
            }
            if self.start.elapsed() > limit {
                let run = self.kill();
                panic!("still running after {limit:?}, killed: {}", run.show());
            }
            std::thread::sleep(POLL);
        }
    }
}

/// `airlock run FLAGS -- ARGV` as `who`, not yet waited for.
fn start(who: Launcher, flags: &[&str], argv: &[&str]) -> Pending {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(argv);
    spawn(airlock(who, &args), format!("{who:?} airlock {args:?}"))
}

/// `airlock run FLAGS -- ARGV` as `who`, bounded by `limit`; afterwards no cgroup of it is
/// left.
fn run(who: Launcher, flags: &[&str], argv: &[&str], limit: Duration) -> Run {
    let r = start(who, flags, argv).finish(limit);
    assert_no_cgroup_of(&[r.pid], &r.what);
    r
}

/// `airlock run --json FLAGS -- sh -c SCRIPT`, bounded, with its report.
fn json_sh(who: Launcher, flags: &[&str], script: &str, limit: Duration) -> (Run, Value) {
    let mut f = vec!["--json"];
    f.extend_from_slice(flags);
    let r = run(who, &f, &["sh", "-c", script], limit);
    let rep = r.report();
    (r, rep)
}

/// `json_sh` with --cpu-time 1s and a 60 s timeout, bounded at 90 s. A busy loop gets its CPU
/// seconds slowly on a loaded 2-core host (the 200 sandboxes of a parallel test are 200
/// sessions, each with a share of the CPU as large as its own): the timeout only bounds a run
/// the limit failed to end, which `limit_hit` tells apart.
fn json_sh_cpu_1s(who: Launcher, script: &str) -> (Run, Value) {
    json_sh(
        who,
        &["--cpu-time", "1s", "--timeout", "60s"],
        script,
        Duration::from_secs(90),
    )
}

// ---------------------------------------------------------------------------------------------
// Report assertions
// ---------------------------------------------------------------------------------------------

/// How the run ended, as both the exit status and the report tell it.
struct End {
    code: i32,
    exit_code: Value,
    signal: Value,
    timed_out: bool,
    limit_hit: Value,
}

fn exited(code: i32, limit_hit: Value) -> End {
    End {
        code,
        exit_code: json!(code),
        signal: Value::Null,
        timed_out: false,
        limit_hit,
    }
}

fn signaled(sig: i32, limit_hit: Value) -> End {
    End {
        code: 128 + sig,
        exit_code: Value::Null,
        signal: json!(sig),
        timed_out: false,
        limit_hit,
    }
}

fn assert_end(r: &Run, rep: &Value, e: End) {
    let show = r.show();
    assert_eq!(r.code(), Some(e.code), "exit status\n{show}");
    assert_eq!(rep["exit_code"], e.exit_code, "exit_code\n{show}");
    assert_eq!(rep["signal"], e.signal, "signal\n{show}");
    assert_eq!(rep["timed_out"], json!(e.timed_out), "timed_out\n{show}");
    assert_eq!(rep["limit_hit"], e.limit_hit, "limit_hit\n{show}");
}

/// The `limits` object: each mechanism as src/limits.rs documents it for this launcher, and
/// `requested` = `applied` = the given value for the named limits.
fn assert_limits(r: &Run, rep: &Value, who: Launcher, values: &[(&str, u64)]) {
    let (memory, pids) = match who {
        Launcher::Root => ("cgroup v1", "cgroup v1"),
        Launcher::Unprivileged => (
            "rlimit (RLIMIT_DATA, per process)",
            "rlimit (RLIMIT_NPROC, per sandbox user)",
        ),
    };
    let expected = [
        ("memory", memory),
        ("pids", pids),
        ("cpu_time_ms", "rlimit (RLIMIT_CPU, per process)"),
        ("file_size", "rlimit (RLIMIT_FSIZE)"),
        ("nofile", "rlimit (RLIMIT_NOFILE)"),
        ("scratch_size", "tmpfs size"),
    ];
    let limits = &rep["limits"];
    for (key, mech) in expected {
        assert_eq!(
            limits[key]["mechanism"],
            json!(mech),
            "limits.{key}.mechanism\n{}",
            r.show()
        );
    }
    for (key, v) in values {
        assert_eq!(
            limits[*key]["requested"],
            json!(v),
            "limits.{key}\n{}",
            r.show()
        );
        assert_eq!(
            limits[*key]["applied"],
            json!(v),
            "limits.{key}\n{}",
            r.show()
        );
    }
}

fn duration_ms(rep: &Value) -> u64 {
    rep["duration_ms"].as_u64().expect("duration_ms")
}

// ---------------------------------------------------------------------------------------------
// Host state: processes, cgroups, mounts, health
// ---------------------------------------------------------------------------------------------

/// Where airlock's cgroups go: the v1 memory and pids roots, searched to depth 3, plus this
/// process's own cgroup in each (the parent airlock uses) in case it is deeper.
fn cgroup_search_roots() -> Vec<(PathBuf, usize)> {
    let mut roots = vec![
        (PathBuf::from("/sys/fs/cgroup/memory"), 3),
        (PathBuf::from("/sys/fs/cgroup/pids"), 3),
    ];
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for l in own.lines() {
        let mut parts = l.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        for c in ["memory", "pids"] {
            if ctrls.split(',').any(|x| x == c) {
                let p = Path::new("/sys/fs/cgroup")
                    .join(c)
                    .join(path.trim_start_matches('/'));
                roots.push((p, 1));
            }
        }
    }
    roots
}

fn walk_cgroups(dir: &Path, depth: usize, found: &mut BTreeSet<PathBuf>) {
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = e.path();
        if e.file_name().to_string_lossy().starts_with("airlock-") {
            found.insert(path);
        } else {
            walk_cgroups(&path, depth - 1, found);
        }
    }
}

/// Every `airlock-*` cgroup directory on the host (any session's).
fn airlock_cgroups() -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for (root, depth) in cgroup_search_roots() {
        walk_cgroups(&root, depth, &mut found);
    }
    found
}

/// The launcher pid in an `airlock-PID-START-PIDNS-N` name.
fn cgroup_pid(p: &Path) -> Option<u32> {
    p.file_name()?
        .to_str()?
        .strip_prefix("airlock-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// No cgroup made by any of these launchers remains. (Other sessions may run airlock on this
/// machine at the same time: only the directories named after our launchers are ours.)
/// Only cgroups made in the last 10 minutes can be those of the launchers `pids` (every test
/// here runs well within that): one an older launcher of a reused pid left (a SIGKILLed one
/// under another caller's cgroup, which that caller's next run sweeps) is not theirs.
fn assert_no_cgroup_of(pids: &[u32], context: &str) {
    let recent = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < Duration::from_secs(600)))
    };
    let left: Vec<PathBuf> = airlock_cgroups()
        .into_iter()
        .filter(|p| cgroup_pid(p).is_some_and(|pid| pids.contains(&pid)) && recent(p))
        .collect();
    assert!(left.is_empty(), "{context}: cgroups left behind: {left:?}");
}

fn mount_lines() -> BTreeSet<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn assert_no_new_mounts(before: &BTreeSet<String>, context: &str) {
    let after = mount_lines();
    let extra: Vec<&String> = after.difference(before).collect();
    assert!(extra.is_empty(), "{context}: new host mounts: {extra:#?}");
}

/// The control: the host can still fork (`true`), allocate (64 MiB, every page touched) and
/// write (1 MiB to a temporary file).
fn assert_host_healthy(context: &str) {
    let start = Instant::now();
    let mut child = Command::new("true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{context}: the host can no longer fork: {e}"));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{context}: `true` did not exit within 10 s");
        }
        std::thread::sleep(POLL);
    };
    assert!(status.success(), "{context}: `true` failed: {status:?}");

    let mut v: Vec<u8> = Vec::new();
    v.resize(64 << 20, 0xa5);
    assert!(
        std::hint::black_box(&v)
            .iter()
            .step_by(4096)
            .all(|b| *b == 0xa5),
        "{context}: 64 MiB allocation"
    );
    drop(v);

    let mut f = tempfile::NamedTempFile::new()
        .unwrap_or_else(|e| panic!("{context}: cannot create a temp file: {e}"));
    f.write_all(&vec![0x5a; 1 << 20])
        .and_then(|_| f.as_file().sync_all())
        .unwrap_or_else(|e| panic!("{context}: cannot write 1 MiB: {e}"));
    assert_eq!(f.as_file().metadata().unwrap().len(), 1 << 20, "{context}");
}

/// After each scenario: no process of it, no cgroup of it, a healthy host.
fn assert_clean(needle: &str, pids: &[u32], context: &str) {
    assert_none_left(needle, Duration::ZERO, context);
    assert_no_orphaned_init(Duration::from_secs(2), context);
    assert_no_cgroup_of(pids, context);
    assert_host_healthy(context);
}

// ---------------------------------------------------------------------------------------------
// Fork bombs
// ---------------------------------------------------------------------------------------------

/// Forks until fork fails (each child sleeps 60 s, holding its slot), prints how many children
/// it made and the errno, then exits 0: the task ends by itself, at the limit.
fn python_bomb(m: &str) -> String {
    format!(
        "# {m}
import os, time
kids = 0
err = None
for _ in range(4096):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids += 1
print(kids, err)
"
    )
}

#[test]
fn fork_bomb_python_stops_at_the_pids_limit() {
    let m = mark("fork_bomb_python_stops_at_the_pids_limit");
    for who in BOTH {
        let r = run(
            who,
            &["--json", "--pids", "64", "--timeout", "20s"],
            &["python3", "-c", &python_bomb(&m)],
            SECS_30,
        );
        let rep = r.report();
        // Root: cgroup v1 pids.max = 64 (init + python + 62 children), pids.events counts the
        // refused fork. Unprivileged: RLIMIT_NPROC = 64, counted per user namespace (one per
        // sandbox): fork fails the same way, but nothing records it, so limit_hit is null.
        let hit = match who {
            Launcher::Root => json!("pids"),
            Launcher::Unprivileged => Value::Null,
        };
        assert_end(&r, &rep, exited(0, hit));
        assert_limits(&r, &rep, who, &[("pids", 64)]);
        let (kids, errno) = rep["stdout"]
            .as_str()
            .unwrap()
            .trim()
            .split_once(' ')
            .unwrap_or_else(|| panic!("bomb output\n{}", r.show()));
        let kids: u32 = kids.parse().unwrap();
        // 64 = the init + python + 62 children.
        assert_eq!(kids, 62, "children made\n{}", r.show());
        assert_eq!(errno, libc::EAGAIN.to_string(), "fork errno\n{}", r.show());
        assert!(r.took < Duration::from_secs(10), "{}", r.show());
        eprintln!(
            "python fork bomb as {who:?}: {kids} children, then EAGAIN; {:?}",
            r.took
        );
        assert_clean(&m, &[r.pid], &format!("python fork bomb as {who:?}"));
    }
}

#[test]
fn pids_limit_is_per_sandbox() {
    let m = mark("pids_limit_is_per_sandbox");
    // Three bombs at once per launcher: each sandbox has its own count (root: its own cgroup;
    // uid 65534: RLIMIT_NPROC counted in the sandbox's own user namespace), so each makes
    // its 62 children whatever the others do.
    for who in BOTH {
        let runs: Vec<Pending> = (0..3)
            .map(|_| {
                start(
                    who,
                    &["--json", "--pids", "64", "--timeout", "20s"],
                    &["python3", "-c", &python_bomb(&m)],
                )
            })
            .collect();
        let pids: Vec<u32> = runs.iter().map(Pending::pid).collect();
        for p in runs {
            let r = p.finish(SECS_30);
            let rep = r.report();
            assert_eq!(rep["exit_code"], json!(0), "{}", r.show());
            assert_eq!(
                rep["stdout"],
                json!(format!("62 {}\n", libc::EAGAIN)),
                "{}",
                r.show()
            );
        }
        assert_clean(&m, &pids, &format!("3 concurrent bombs as {who:?}"));
    }
}

#[test]
fn fork_bomb_shell_stops_at_the_pids_limit() {
    let m = mark("fork_bomb_shell_stops_at_the_pids_limit");
    // The classic bomb, started from a subshell, then `exec sleep 2`: no fork, so the task
    // surely outlives the bomb's first refused fork and then ends by itself (exit 0); its end
    // tears the pid namespace down with every bomb process in it. The subshell is the task's
    // only fork, made before any bomb process exists: with `b; exec sleep 2` the top shell
    // forked the pipeline's second half itself, and when the first half's descendants had
    // filled the limit by then, it said "Cannot fork" and exited 2 (CI, once, in 26 ms).
    let script = format!(": {m}; b(){{ b | b & }}; (b); exec sleep 2");
    for who in BOTH {
        let (r, rep) = json_sh(who, &["--pids", "64", "--timeout", "20s"], &script, SECS_30);
        let hit = match who {
            Launcher::Root => json!("pids"),
            Launcher::Unprivileged => Value::Null,
        };
        assert_end(&r, &rep, exited(0, hit));
        assert_limits(&r, &rep, who, &[("pids", 64)]);
        assert!(r.took < Duration::from_secs(10), "{}", r.show());
        eprintln!("shell fork bomb (2 s) as {who:?}: {:?}", r.took);
        assert_clean(&m, &[r.pid], &format!("shell fork bomb as {who:?}"));
    }
}

#[test]
fn fork_bomb_shell_verbatim_ends_at_once() {
    let m = mark("fork_bomb_shell_verbatim_ends_at_once");
    // `b(){ b | b & }; b` exactly: the task (the top sh) returns as soon as the first
    // background pipeline is started, so the whole namespace is killed within milliseconds.
    // Whether the bomb reached the cgroup limit before that is a race (both seen as root:
    // "pids" and null), so only the end, the time and the cleanup are exact here.
    let script = format!(": {m}; b(){{ b | b & }}; b");
    for who in BOTH {
        let (r, rep) = json_sh(who, &["--pids", "64", "--timeout", "20s"], &script, SECS_30);
        let hit = rep["limit_hit"].clone();
        match who {
            Launcher::Root => assert!(
                hit.is_null() || hit == json!("pids"),
                "limit_hit {hit}\n{}",
                r.show()
            ),
            Launcher::Unprivileged => assert!(hit.is_null(), "limit_hit {hit}\n{}", r.show()),
        }
        // The top shell returns 0, or 2 when its own fork already found the limit reached
        // ("Cannot fork"): both end the bomb at once; seen both under load.
        let code = rep["exit_code"].as_i64();
        assert!(
            code == Some(0) || code == Some(2),
            "exit_code\n{}",
            r.show()
        );
        assert_end(&r, &rep, exited(code.unwrap() as i32, hit.clone()));
        assert_limits(&r, &rep, who, &[("pids", 64)]);
        assert!(r.took < Duration::from_secs(5), "{}", r.show());
        eprintln!(
            "verbatim shell fork bomb as {who:?}: {:?}, limit_hit {hit}",
            r.took
        );
        assert_clean(
            &m,
            &[r.pid],
            &format!("verbatim shell fork bomb as {who:?}"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Memory, disk, output
// ---------------------------------------------------------------------------------------------

#[test]
fn memory_bomb_is_stopped() {
    let m = mark("memory_bomb_is_stopped");
    // One 1 GiB bytes object, every page written.
    let script = format!("# {m}\nb = b'\\x01' * (1 << 30)\nprint(len(b))\n");
    for who in BOTH {
        let r = run(
            who,
            &["--json", "--memory", "128M", "--timeout", "20s"],
            &["python3", "-c", &script],
            SECS_30,
        );
        let rep = r.report();
        match who {
            // cgroup v1 memory.limit_in_bytes: the OOM killer ends the task with SIGKILL and
            // memory.oom_control counts it.
            Launcher::Root => assert_end(&r, &rep, signaled(libc::SIGKILL, json!("memory"))),
            // RLIMIT_DATA: the allocation itself fails; Python raises MemoryError and exits 1.
            // Not detected as a limit (documented: rlimit hits other than CPU/file size are not).
            Launcher::Unprivileged => {
                assert_end(&r, &rep, exited(1, Value::Null));
                assert!(
                    rep["stderr"].as_str().unwrap().contains("MemoryError"),
                    "{}",
                    r.show()
                );
            }
        }
        assert_eq!(rep["stdout"], json!(""), "{}", r.show());
        assert_limits(&r, &rep, who, &[("memory", 128 << 20)]);
        eprintln!("memory bomb as {who:?}: {:?}", r.took);
        assert_clean(&m, &[r.pid], &format!("memory bomb as {who:?}"));
    }
}

/// Fills loopback sockets whose reader never reads (TCP connections, then UDP sockets), until
/// the machine's memory of that protocol (its counter in /proc/net/sockstat, in pages, one
/// for all network namespaces: net.ipv4.tcp_mem, udp_mem) has grown by 384 MiB or 120 sockets
/// are filled; prints the growth of each in MiB, as `TCP N UDP N`.
const SOCKET_FILL: &str = r#"
import socket
def pages(proto):
    for l in open('/proc/net/sockstat'):
        if l.startswith(proto + ':'):
            return int(l.split()[-1])
def fill(proto, one):
    start, keep = pages(proto), []
    for _ in range(120):
        keep += one()
        if (pages(proto) - start) * 4096 >= 384 << 20:
            break
    return (pages(proto) - start) * 4096 >> 20
def tcp():
    c = socket.create_connection(srv.getsockname())
    a, _ = srv.accept()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
    c.setblocking(False)
    try:
        while c.send(b'x' * (1 << 20)):
            pass
    except OSError:
        pass
    return [c, a]
def udp():
    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
    r.bind(('127.0.0.1', 0))
    for _ in range(2000):
        try:
            tx.sendto(b'x' * 60000, r.getsockname())
        except OSError:
            break
    return [r]
srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen(256)
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setblocking(False)
print('TCP', fill('TCP', tcp), 'UDP', fill('UDP', udp))
"#;

/// Socket buffers count against `--memory`: the machine's TCP memory is one pool
/// (net.ipv4.tcp_mem, 2.2 GiB on the dev VM), and past it every socket of the host is held to
/// its minimum buffers (UDP's, udp_mem, likewise). cgroup v1 charges socket buffers to a
/// cgroup only once its own TCP limit is set (then UDP's too): without one, a task holding its
/// loopback connections full took 643 MiB of the pool under `--memory 256m`. Root only: an
/// unprivileged caller's rlimits count no socket buffers (README, Known limits). The control:
/// the same probe on the host, outside any limit, holds the 384 MiB it aims for, of each.
#[test]
fn socket_buffers_count_against_the_memory_limit() {
    let m = mark("socket_buffers_count_against_the_memory_limit");
    let probe = format!("# {m}\n{SOCKET_FILL}");
    let held = |o: &str| -> Vec<(String, u64)> {
        let w: Vec<&str> = o.split_whitespace().collect();
        let figures: Option<Vec<(String, u64)>> = w
            .chunks(2)
            .map(|p| Some((p.first()?.to_string(), p.get(1)?.parse().ok()?)))
            .collect();
        match figures {
            Some(f) if f.len() == 2 => f,
            _ => panic!("no figures from the probe: {o:?}"),
        }
    };
    let host = Command::new("python3")
        .args(["-c", &probe])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(host.status.success(), "host control: {}", stderr(&host));
    for (proto, mib) in held(&stdout(&host)) {
        assert!(mib >= 384, "host control held only {mib} MiB of {proto}");
    }

    let r = run(
        Launcher::Root,
        &["--json", "--memory", "128M", "--timeout", "20s"],
        &["python3", "-c", &probe],
        SECS_30,
    );
    let rep = r.report();
    assert_eq!(rep["exit_code"], json!(0), "{}", r.show());
    let mechanism = rep["limits"]["memory"]["mechanism"].as_str().unwrap_or("");
    assert!(mechanism.starts_with("cgroup"), "{}", r.show());
    for (proto, mib) in held(rep["stdout"].as_str().unwrap()) {
        // 128 MiB, and room for the other sockets of the host meanwhile.
        assert!(
            mib <= 160,
            "the task held {mib} MiB of {proto} memory under --memory 128M"
        );
    }
    assert_clean(&m, &[r.pid], "socket buffers");
}

#[test]
fn scratch_fill_is_reported() {
    let m = mark("scratch_fill_is_reported");
    let script = format!(": {m}; dd if=/dev/zero of=big bs=1M count=64");
    for who in BOTH {
        let (r, rep) = json_sh(who, &["--scratch-size", "8M"], &script, SECS_30);
        // dd fails with ENOSPC (exit 1); the scratch tmpfs is full.
        assert_end(&r, &rep, exited(1, json!("scratch_full")));
        assert_limits(&r, &rep, who, &[("scratch_size", 8 << 20)]);
        assert!(
            rep["stderr"]
                .as_str()
                .unwrap()
                .contains("No space left on device"),
            "{}",
            r.show()
        );
        // The report is whole: every key, the file cut at the cap and listed as cut.
        for key in [
            "exit_code",
            "signal",
            "timed_out",
            "duration_ms",
            "stdout",
            "stderr",
            "stdout_truncated",
            "stderr_truncated",
            "files",
            "files_truncated",
            "files_skipped",
            "utf8_replaced",
            "limit_hit",
            "limits",
            "warnings",
        ] {
            assert!(rep.get(key).is_some(), "missing {key}\n{}", r.show());
        }
        assert_eq!(rep["files_truncated"], json!(["big"]), "{}", r.show());
        assert_eq!(rep["files_skipped"], json!([]), "{}", r.show());
        assert_eq!(
            rep["files"]["big"].as_str().map(str::len),
            Some(8000),
            "{}",
            r.show()
        );
        assert_clean(&m, &[r.pid], &format!("scratch fill as {who:?}"));

        // Streamed, airlock says so on stderr after the task's own words, as it does for
        // the other limits (it said nothing until a review: only a JSON run's launcher held
        // scratch to look at). Control: a task that fills scratch and empties it again.
        for (script, said) in [
            (script.as_str(), true),
            ("head -c 9M /dev/zero > big; rm big", false),
        ] {
            let r = run(
                who,
                &["--scratch-size", "8M"],
                &["sh", "-c", script],
                SECS_30,
            );
            assert_eq!(
                r.out.status.code(),
                Some(if said { 1 } else { 0 }),
                "{}",
                r.show()
            );
            assert_eq!(
                stderr(&r.out).contains("airlock: scratch or /dev/shm is full (--scratch-size)"),
                said,
                "{}",
                r.show()
            );
        }
    }
}

/// Empty files take no block of a tmpfs, only an inode (about 1 KiB of kernel memory each,
/// which neither the tmpfs's size nor RLIMIT_DATA counts). Scratch and /dev/shm hold one
/// inode per 8 KiB of --scratch-size, at least 4096 (src/spec.rs, `tmpfs_inodes`): a task
/// making empty files in each gets ENOSPC once the cap is reached, and statvfs inside reports
/// the cap. Before the cap, tmpfs's default (half the RAM pages, 3 million on the dev VM)
/// applied whatever the size: 200,000 empty files in a 1 MiB scratch as uid 65534 with
/// --memory 64m took 200 MB of slab (a root caller's cgroup charges the slab and OOM-kills
/// such a task; the rlimits of uid 65534 do not count it). The default --memory is kept here so
/// that, without the cap, the loop runs to its bound and the check on the count fails. Each
/// loop is bounded at 100,000 files, far above the caps tried and far below that default.
#[test]
fn empty_files_stop_at_the_inode_cap_of_scratch_and_dev_shm() {
    let m = mark("empty_files_stop_at_the_inode_cap_of_scratch_and_dev_shm");
    let script = format!(
        "# {m}
import errno, os
for d in ('/work', '/dev/shm'):
    st = os.statvfs(d)
    made, err = 0, None
    try:
        for i in range(100000):
            os.close(os.open('%s/e%06d' % (d, i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            made += 1
    except OSError as e:
        err = errno.errorcode[e.errno]
    print('%s files=%d free=%d made=%d err=%s' % (d, st.f_files, st.f_ffree, made, err))
"
    );
    // Control: a 1 MiB tmpfs mounted on the host without nr_inodes (in a mount namespace of
    // its own, as root and as uid 65534 in a user namespace) offers far more inodes than the
    // cap, so the cap inside is airlock's.
    for (who, pre) in [(Launcher::Root, ""), (Launcher::Unprivileged, "-r ")] {
        let line = format!(
            "unshare {pre}-m sh -c 'mount -t tmpfs -o size=1M none /mnt && \
             python3 -c \"import os; print(os.statvfs(\\\"/mnt\\\").f_files)\"'"
        );
        let host = host_sh(who, &line);
        let files: u64 = stdout(&host).trim().parse().unwrap_or(0);
        assert!(
            files > 100_000,
            "host control as {who:?}: {}{}",
            stdout(&host),
            stderr(&host)
        );
    }
    // (--scratch-size, the cap): the floor, then the ratio.
    for (size, cap) in [("1M", 4096u64), ("64M", 8192)] {
        for who in BOTH {
            let r = run(
                who,
                &["--scratch-size", size, "--timeout", "20s"],
                &["python3", "-c", &script],
                SECS_30,
            );
            let ctx = format!("--scratch-size {size} as {who:?}");
            assert_eq!(r.code(), Some(0), "{ctx}\n{}", r.show());
            let out = stdout(&r.out);
            for dir in ["/work", "/dev/shm"] {
                let line = out
                    .lines()
                    .find(|l| l.starts_with(&format!("{dir} ")))
                    .unwrap_or_else(|| panic!("{ctx}: no line for {dir}\n{}", r.show()));
                let field = |k: &str| -> String {
                    line.split(' ')
                        .find_map(|f| f.strip_prefix(&format!("{k}=")))
                        .unwrap_or_else(|| panic!("{ctx}: no {k} in {line:?}"))
                        .to_string()
                };
                let num = |k: &str| field(k).parse::<u64>().unwrap();
                assert_eq!(num("files"), cap, "{ctx}: statvfs f_files of {dir}: {line}");
                assert_eq!(field("err"), "ENOSPC", "{ctx}: {line}");
                // Every free inode, and only those, became a file: the root directory (and
                // nothing else of an empty scratch) holds one.
                assert_eq!(num("made"), num("free"), "{ctx}: {line}");
                assert!(
                    num("made") <= cap && num("made") >= cap - 8,
                    "{ctx}: {line}"
                );
            }
            eprintln!("{ctx}: {:?}", r.took);
            assert_clean(&m, &[r.pid], &ctx);
        }
    }
    // /dev/shm has scratch's size: filling it is the same limit (it had read null, the
    // kill-storm review). Control: the same writer stopped short of the size.
    for (count, hit) in [(64, json!("scratch_full")), (2, Value::Null)] {
        let script = format!(": {m}; dd if=/dev/zero of=/dev/shm/big bs=1M count={count}");
        for who in BOTH {
            let (r, rep) = json_sh(who, &["--scratch-size", "8M"], &script, SECS_30);
            let code = i32::from(count > 8);
            assert_end(&r, &rep, exited(code, hit.clone()));
            assert_clean(&m, &[r.pid], &format!("/dev/shm, {who:?}"));
        }
    }
    // Out of inodes with blocks to spare is a full scratch to the report too.
    let script =
        format!(": {m}; i=0; while : > /work/f$i 2>/dev/null; do i=$((i+1)); done; exit 1");
    for who in BOTH {
        let (r, rep) = json_sh(who, &["--scratch-size", "1M"], &script, SECS_30);
        assert_eq!(
            rep["limit_hit"],
            json!("scratch_full"),
            "{who:?}\n{}",
            r.show()
        );
        assert_clean(&m, &[r.pid], &format!("inodes, {who:?}"));
    }
}

#[test]
fn stdout_flood_of_1_gib_is_capped_in_bounded_memory() {
    let m = mark("stdout_flood_of_1_gib_is_capped_in_bounded_memory");
    let time = Path::new("/usr/bin/time");
    assert!(
        time.exists(),
        "/usr/bin/time is needed to measure peak RSS: scripts/test.sh installs Debian's `time`"
    );
    let script = format!(": {m}; head -c 1073741824 /dev/zero");
    for who in BOTH {
        let rss_file = tempfile::NamedTempFile::new().unwrap();
        let inner = airlock(
            who,
            &[
                "run",
                "--json",
                "--timeout",
                "60s",
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        let mut cmd = Command::new(time);
        cmd.arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(rss_file.path())
            .arg(inner.get_program())
            .args(inner.get_args());
        let mut p = spawn(cmd, format!("{who:?} 1 GiB stdout flood"));
        // /usr/bin/time forks the launcher: find it (its only child) while it runs, to check
        // its cgroups afterwards.
        let mut launcher = None;
        while launcher.is_none() && p.start.elapsed() < Duration::from_secs(10) {
            launcher = processes()
                .into_iter()
                .find(|q| q.ppid == p.pid())
                .map(|q| q.pid);
            if p.child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let launcher = launcher.expect("airlock under /usr/bin/time not seen running");
        let r = p.finish(Duration::from_secs(90));
        let rep = r.report();
        assert_end(&r, &rep, exited(0, Value::Null));
        assert_eq!(rep["stdout_truncated"], json!(true), "{}", r.show());
        assert_eq!(
            rep["stdout"].as_str().map(str::len),
            Some(8000),
            "{}",
            r.show()
        );
        assert_limits(&r, &rep, who, &[]);
        // ru_maxrss (KiB) of airlock, which includes its reaped descendants (the init and the
        // task): the largest of them.
        let rss_kib: u64 = std::fs::read_to_string(rss_file.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("/usr/bin/time output: {e}\n{}", r.show()));
        eprintln!(
            "1 GiB stdout flood as {who:?}: {:?} (report {} ms), peak RSS {rss_kib} KiB",
            r.took,
            duration_ms(&rep)
        );
        assert!(
            rss_kib < 16 * 1024,
            "airlock's peak RSS {rss_kib} KiB >= 16 MiB\n{}",
            r.show()
        );
        assert_clean(&m, &[launcher], &format!("stdout flood as {who:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

#[test]
fn timeout_kills_a_task_ignoring_sigterm() {
    let m = mark("timeout_kills_a_task_ignoring_sigterm");
    let script = format!(": {m}; trap '' TERM; sleep 30");
    for who in BOTH {
        let (r, rep) = json_sh(who, &["--timeout", "1s"], &script, SECS_30);
        assert_end(
            &r,
            &rep,
            End {
                code: 124,
                exit_code: Value::Null,
                signal: json!(libc::SIGKILL),
                timed_out: true,
                limit_hit: json!("timeout"),
            },
        );
        assert_limits(&r, &rep, who, &[]);
        // The deadline counts from airlock's start, so a setup slowed by a loaded host (a
        // run of load_200_concurrent_sandboxes took 2.6 s to echo a line) comes on top of it:
        // the bounds prove the timeout ended the run, well before `sleep 30` would have.
        let ms = duration_ms(&rep);
        assert!(
            (1000..15_000).contains(&ms),
            "duration_ms {ms}\n{}",
            r.show()
        );
        assert!(r.took < Duration::from_secs(20), "{}", r.show());
        eprintln!("timeout 1s as {who:?}: {:?} (report {ms} ms)", r.took);
        assert_clean(&m, &[r.pid], &format!("timeout as {who:?}"));
    }
}

/// A root caller's `umask 0` does not make its run's cgroups writable to every host user (a
/// red team: they were 0777, and uid 65534 made a cgroup in one that airlock could then not
/// remove, left behind for good). Control: a directory the same shell makes is 0777.
#[test]
fn a_run_s_cgroups_are_not_writable_to_others_under_umask_0() {
    let m = mark("a_run_s_cgroups_are_not_writable");
    let dir = tmpdir();
    let control = dir.path().join("control");
    let script = format!(
        "umask 0; mkdir {}; exec \"$0\" run -- sh -c ': {m}; sleep 30.77; :'",
        control.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]).arg(binary());
    let p = spawn(cmd, "airlock under umask 0".into());
    wait_for_process("sleep 30.77", Duration::from_secs(10));
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&control), 0o777, "control: umask 0 not in effect");
    let ours: Vec<PathBuf> = airlock_cgroups()
        .into_iter()
        .filter(|c| cgroup_pid(c) == Some(p.pid()))
        .collect();
    assert!(!ours.is_empty(), "no cgroup of the run found");
    for c in &ours {
        assert_eq!(mode(c), 0o755, "{c:?}");
    }
    let pid = p.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    p.finish(SECS_30);
    assert_clean(&m, &[pid], "umask 0");
    assert_clean("sleep 30.77", &[], "umask 0");
}

/// A task that exits 0 before its deadline is reported as exiting 0, even when the kernel's
/// teardown of what it left (here 20 processes of 60,000 shared mappings each: 1.3 s on this
/// VM) runs past the deadline. A red team saw such runs reported as killed by the timeout,
/// `exit_code` null, because the deadline still fired while airlock waited for the init's exit.
/// As root only: the launcher's bookkeeping is the same for both callers, and the leftovers
/// take 1.5 GB of kernel memory for that second.
#[test]
fn a_task_ended_before_its_deadline_is_not_timed_out_by_its_teardown() {
    let m = mark("a_task_ended_before_its_deadline_is_not_timed_out");
    let dir = tmpdir();
    let program = c_fixture("many_mappings", dir.path()).unwrap();
    let input = format!("mm={}", program.display());
    // The task exits 4 s after its own start, 1 s before the deadline.
    let r = run(
        Launcher::Root,
        &["--json", "--timeout", "5s", "--input", &input],
        &["./mm", "20", "60000", "4", &m],
        SECS_30,
    );
    let rep = r.report();
    let out = rep["stdout"].as_str().unwrap_or_default();
    let exited_at: Option<f64> = out
        .lines()
        .find_map(|l| l.strip_prefix("exits 0 at "))
        .and_then(|t| t.trim_end_matches(" s").parse().ok());
    // A host so loaded that the task itself came near its deadline proves nothing either way.
    if exited_at.is_none_or(|t| t > 4.5) {
        eprintln!("inconclusive: the task was late ({out:?}): {}", r.show());
        return;
    }
    assert_end(&r, &rep, exited(0, Value::Null));
    eprintln!(
        "exited before its deadline: {out:?}, report {} ms",
        duration_ms(&rep)
    );
    assert_clean(&m, &[r.pid], "teardown past the deadline");
}

/// `airlock run --json` of `sh -c SCRIPT`, sent `sig` once the process `sleeper` runs: the
/// run, its report and airlock's pid.
fn signaled_json_run(
    who: Launcher,
    script: &str,
    sleeper: &str,
    sig: nix::sys::signal::Signal,
) -> (Run, Value, u32) {
    let p = start(who, &["--json", "--timeout", "20s"], &["sh", "-c", script]);
    wait_for_process(sleeper, Duration::from_secs(10));
    let pid = p.pid();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
    let r = p.finish(SECS_30);
    let rep = r.report();
    (r, rep, pid)
}

/// SIGINT and SIGHUP sent to airlock are forwarded to the task: its trap ends it with 7. Were
/// they not, the task would wait until the 20 s timeout. Control: the same script on the host,
/// sent the signal directly, ends with 7.
#[test]
fn sigint_and_sighup_to_airlock_reach_the_task() {
    let m = mark("sigint_and_sighup_to_airlock_reach_the_task");
    // Each round has its own sleeper, and the sleeper must be the script's child: a sleeper
    // still dying from the round before must not let the signal go out before the trap is set.
    for (j, (sig, name)) in [
        (nix::sys::signal::Signal::SIGINT, "INT"),
        (nix::sys::signal::Signal::SIGHUP, "HUP"),
    ]
    .into_iter()
    .enumerate()
    {
        let sleeper = format!("sleep 9.7{j}");
        let script = format!("trap 'exit 7' {name}; {sleeper} & wait");
        // A caller that ignores SIGINT (a background job of a script) would pass that on, and
        // a trap cannot undo it; airlock's task starts with default dispositions.
        let mut host = Command::new("env")
            .args(["--default-signal=INT,HUP", "sh", "-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let left = wait_for_process(&sleeper, Duration::from_secs(10));
        assert_eq!(left.ppid, host.id(), "host control: {left:?}");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(host.id() as i32), sig).unwrap();
        let code = host.wait().unwrap().code();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(left.pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        assert_eq!(
            code,
            Some(7),
            "host control: SIG{name} to the script itself"
        );
        assert_none_left(&sleeper, Duration::from_secs(5), "host control");
    }
    for (i, who) in BOTH.into_iter().enumerate() {
        for (j, (sig, name)) in [
            (nix::sys::signal::Signal::SIGINT, "INT"),
            (nix::sys::signal::Signal::SIGHUP, "HUP"),
        ]
        .into_iter()
        .enumerate()
        {
            let sleeper = format!("sleep 9.8{i}{j}");
            let script = format!(": {m}; trap 'exit 7' {name}; {sleeper} & wait");
            let (r, rep, pid) = signaled_json_run(who, &script, &sleeper, sig);
            assert_end(&r, &rep, exited(7, Value::Null));
            let ctx = format!("SIG{name} to airlock as {who:?}");
            assert_clean(&m, &[pid], &ctx);
            assert_clean(&sleeper, &[], &ctx);
        }
    }
}

/// The other signals whose default action would end airlock, sent by another process
/// (SIGQUIT, Ctrl-\\ at a terminal; SIGUSR1, SIGALRM and the like), are forwarded to the task
/// too, and the run is reported: they ended airlock with no report (its sandbox with it). A
/// task that traps SIGQUIT ends as its trap says; SIGQUIT, like SIGTERM, is backed by the kill
/// after the grace. SIGUSR1 is the task's to handle (dd's progress): a trap that goes on
/// runs to its own end, past the 2 s grace. An SIGALRM or SIGXCPU the task does not trap ends
/// it, and the report says so (SIGXCPU: with no `limit_hit`, the task's CPU limit untouched). Control: the same scripts on the host, sent the signal directly.
#[test]
fn the_other_ending_signals_to_airlock_reach_the_task_and_the_run_is_reported() {
    use nix::sys::signal::Signal;
    use std::os::unix::process::ExitStatusExt;
    let m = mark("the_other_ending_signals_to_airlock_reach_the_task_and_the_run_is_reported");
    let cases = |tag: &str| {
        [
            (
                Signal::SIGQUIT,
                format!("trap 'echo quit; exit 7' QUIT; sleep 9.6{tag}1 & wait"),
                format!("sleep 9.6{tag}1"),
                exited(7, Value::Null),
                "quit\n",
            ),
            (
                Signal::SIGUSR1,
                format!(
                    "trap 'echo usr1' USR1; sleep 9.6{tag}2 & wait; kill $!; sleep 2.5; echo after"
                ),
                format!("sleep 9.6{tag}2"),
                exited(0, Value::Null),
                "usr1\nafter\n",
            ),
            (
                Signal::SIGALRM,
                format!("sleep 9.6{tag}3 & wait"),
                format!("sleep 9.6{tag}3"),
                signaled(libc::SIGALRM, Value::Null),
                "",
            ),
            // A SIGXCPU sent to airlock ends the task as it would, but is no CPU time limit
            // the task ran into (no core file from it, on the host or in scratch).
            (
                Signal::SIGXCPU,
                format!("ulimit -c 0; sleep 9.6{tag}4 & wait"),
                format!("sleep 9.6{tag}4"),
                signaled(libc::SIGXCPU, Value::Null),
                "",
            ),
        ]
    };
    for (sig, script, sleeper, end, out) in cases("9") {
        let host = Command::new("env")
            .args(["--default-signal", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let left = wait_for_process(&sleeper, Duration::from_secs(10));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(host.id() as i32), sig).unwrap();
        let o = host.wait_with_output().unwrap();
        let _ =
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(left.pid as i32), Signal::SIGKILL);
        let how = match o.status.code() {
            Some(c) => json!(c),
            None => json!(-o.status.signal().unwrap()),
        };
        let want = match end.exit_code {
            Value::Null => json!(-(end.code - 128)),
            ref c => c.clone(),
        };
        assert_eq!(how, want, "host control: {sig:?} to the script itself");
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            out,
            "host control: {sig:?}"
        );
        assert_none_left(&sleeper, Duration::from_secs(5), "host control");
    }
    for (i, who) in BOTH.into_iter().enumerate() {
        for (sig, script, sleeper, end, out) in cases(&i.to_string()) {
            let script = format!(": {m}; {script}");
            let (r, rep, pid) = signaled_json_run(who, &script, &sleeper, sig);
            assert_end(&r, &rep, end);
            assert_eq!(
                rep["stdout"],
                json!(out),
                "{sig:?} as {who:?}\n{}",
                r.show()
            );
            eprintln!("{sig:?} to airlock as {who:?}: {:?}", r.took);
            let ctx = format!("{sig:?} to airlock as {who:?}");
            assert_clean(&m, &[pid], &ctx);
            assert_clean(&sleeper, &[], &ctx);
        }
    }
}

/// SIGINT to airlock is Ctrl-C, and reaches every process of the sandbox, as a terminal's
/// reaches the whole foreground process group: a shell waiting for its child holds a SIGINT
/// sent to it alone until that child ends (dash and bash do), so sent to the task alone it
/// left `sh -c 'sleep 9; echo after'` running to the end. Control: on the host, the same
/// script sent SIGINT alone is still running a second later, and SIGINT to its process group
/// ends it at once.
#[test]
fn sigint_to_airlock_reaches_the_children_of_a_waiting_shell() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::os::unix::process::CommandExt;
    let m = mark("sigint_to_airlock_reaches_the_children_of_a_waiting_shell");
    let sleeper = "sleep 9.59";
    let mut host = Command::new("env")
        .args(["--default-signal=INT", "sh", "-c"])
        .arg(format!("{sleeper}; echo after"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for_process(sleeper, Duration::from_secs(10));
    let shell = Pid::from_raw(host.id() as i32);
    kill(shell, Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        host.try_wait().unwrap().is_none(),
        "host control: a shell sent SIGINT alone ended before its child"
    );
    let sent = Instant::now();
    kill(Pid::from_raw(-shell.as_raw()), Signal::SIGINT).unwrap();
    let status = host.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGINT),
        "host control: {status:?}"
    );
    // (Well before the sleeper's own end: a loaded host may take a while to run the exits.)
    assert!(sent.elapsed() < Duration::from_secs(8), "host control");
    assert_none_left(sleeper, Duration::from_secs(5), "host control");
    for (i, who) in BOTH.into_iter().enumerate() {
        let sleeper = format!("sleep 9.6{i}");
        let script = format!(": {m}; {sleeper}; echo after");
        let p = start(who, &["--json", "--timeout", "20s"], &["sh", "-c", &script]);
        wait_for_process(&sleeper, Duration::from_secs(10));
        let pid = p.pid();
        let sent = Instant::now();
        kill(Pid::from_raw(pid as i32), Signal::SIGINT).unwrap();
        let r = p.finish(SECS_30);
        let rep = r.report();
        assert_end(&r, &rep, signaled(libc::SIGINT, Value::Null));
        // Before the sleeper, started before the signal, would have ended by itself.
        assert!(
            sent.elapsed() < Duration::from_secs(8),
            "ended {:?} after SIGINT\n{}",
            sent.elapsed(),
            r.show()
        );
        assert_eq!(rep["stdout"], json!(""), "{}", r.show());
        let ctx = format!("SIGINT to airlock as {who:?}");
        assert_clean(&m, &[pid], &ctx);
        assert_clean(&sleeper, &[], &ctx);
    }
}

/// Ctrl-Z: a SIGTSTP to airlock stops every process of the sandbox, then airlock, as a
/// terminal stops a job; a SIGCONT (fg, bg) continues them. The task's session is its own,
/// out of the terminal's reach: airlock had stopped alone, and the task spun on past
/// --timeout, unwatched (the soak review). Control: the spinners run before the SIGTSTP and
/// again after the SIGCONT. A caller that ignores SIGTSTP leaves it ignored: there the same
/// SIGTSTP stops neither airlock nor the spinners.
#[test]
fn sigtstp_to_airlock_stops_the_whole_sandbox_and_sigcont_continues_it() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let m = mark("sigtstp_to_airlock_stops_the_whole_sandbox_and_sigcont_continues_it");
    let ticks = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        // utime and stime, fields 14 and 15: the 12th and 13th words after the name.
        let f: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| {
            f.get(n - 3)
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0)
        };
        field(14) + field(15)
    };
    let spinners = |m: &str| -> Vec<Proc> {
        procs_with(m)
            .into_iter()
            .filter(|p| p.cmdline.starts_with("sh"))
            .collect()
    };
    for (who, ignored) in BOTH.into_iter().flat_map(|w| [(w, false), (w, true)]) {
        let script = format!(": {m}; (while :; do :; done) & while :; do :; done");
        let args = ["run", "--timeout", "20s", "--", "sh", "-c", &script];
        // A caller that ignores SIGTSTP (`env --ignore-signal=TSTP`) leaves it ignored.
        let p = match ignored {
            false => start(who, &args[1..3], &args[4..]),
            true => {
                let mut c = Command::new("env");
                c.arg("--ignore-signal=TSTP")
                    .args(as_user(who))
                    .arg(binary())
                    .args(args);
                spawn(c, format!("{who:?} airlock, SIGTSTP ignored"))
            }
        };
        let pid = p.pid();
        let deadline = Instant::now() + Duration::from_secs(10);
        while spinners(&m).len() < 2 {
            assert!(Instant::now() < deadline, "no two spinners as {who:?}");
            std::thread::sleep(POLL);
        }
        let spin: Vec<u32> = spinners(&m).iter().map(|p| p.pid).collect();
        let before: Vec<u64> = spin.iter().map(|&s| ticks(s)).collect();
        std::thread::sleep(Duration::from_millis(300));
        let ran = spin.iter().zip(&before).any(|(&s, &b)| ticks(s) > b);
        assert!(
            ran,
            "control: the spinners run before the SIGTSTP, as {who:?}"
        );

        kill(Pid::from_raw(pid as i32), Signal::SIGTSTP).unwrap();
        let stopped = |p: u32| state_of(p).starts_with('T');
        if ignored {
            let held: Vec<u64> = spin.iter().map(|&s| ticks(s)).collect();
            std::thread::sleep(Duration::from_millis(500));
            assert!(
                !stopped(pid),
                "as {who:?}: an ignored SIGTSTP stopped airlock"
            );
            let ran = spin.iter().zip(&held).any(|(&s, &h)| ticks(s) > h);
            assert!(ran, "as {who:?}: an ignored SIGTSTP stopped the sandbox");
        } else {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !(stopped(pid) && spin.iter().all(|&s| stopped(s))) {
                assert!(
                    Instant::now() < deadline,
                    "as {who:?}: after SIGTSTP, airlock stopped {}, the spinners {:?}",
                    stopped(pid),
                    spinners(&m)
                );
                std::thread::sleep(POLL);
            }
            let held: Vec<u64> = spin.iter().map(|&s| ticks(s)).collect();
            std::thread::sleep(Duration::from_millis(500));
            let now: Vec<u64> = spin.iter().map(|&s| ticks(s)).collect();
            assert_eq!(held, now, "as {who:?}: a stopped spinner ran");

            kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let after: Vec<u64> = spin.iter().map(|&s| ticks(s)).collect();
            assert!(
                after.iter().zip(&now).any(|(a, n)| a > n),
                "as {who:?}: the spinners did not run again after SIGCONT"
            );
        }
        kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
        let r = p.finish(SECS_30);
        assert_eq!(
            r.out.status.code(),
            Some(128 + libc::SIGTERM),
            "{}",
            r.show()
        );
        let ctx = format!("SIGTSTP to airlock as {who:?} (ignored: {ignored})");
        assert_clean(&m, &[pid], &ctx);
    }
}

/// Once the sandbox is gone, Ctrl-Z stops airlock itself while it still hands the task's
/// output to a reader that takes none (`| less`, stopped with it): the signal had been read
/// and dropped there, so the job never stopped and the terminal hung (the sign-off review).
/// Continued, airlock delivers the rest once the reader reads, and exits 0. Control: a plain
/// `head` left with the same bytes for the same pipe, started the same way, stops on the
/// same SIGTSTP.
#[test]
fn sigtstp_to_airlock_delivering_to_a_full_pipe_stops_it() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    // 100,000 bytes: more than the caller's pipe holds, less than it and the task's do, so
    // the task ends and airlock waits on the caller's pipe.
    let head = ["head", "-c", "100000", "/dev/zero"];
    let mut host = Command::new(head[0]);
    host.args(&head[1..]);
    let runs = std::iter::once(("host control".to_string(), host)).chain(BOTH.map(|who| {
        let args = [&["run", "--timeout", "20s", "--"][..], &head[..]].concat();
        (format!("airlock as {who:?}"), airlock(who, &args))
    }));
    for (what, mut cmd) in runs {
        // In a process group of its own whose parent is in another group of the same
        // session, as a shell's job is: the kernel ignores a SIGTSTP's default stop in an
        // orphaned group (a CI runner's, say), and once the sandbox is gone airlock leaves it
        // to that default.
        let mut child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let state = || state_of(pid).chars().next().unwrap_or('-');
        let deadline = Instant::now() + Duration::from_secs(10);
        // The sandbox is gone once airlock has no child left.
        while !children(pid).is_empty() || state() != 'S' {
            assert!(
                Instant::now() < deadline,
                "{what}: the writer did not block"
            );
            std::thread::sleep(POLL);
        }
        kill(Pid::from_raw(pid as i32), Signal::SIGTSTP).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while state() != 'T' {
            if Instant::now() >= deadline {
                let was = state_of(pid);
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: did not stop on SIGTSTP, state {was}");
            }
            std::thread::sleep(POLL);
        }
        kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
        let mut out = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{what}");
        assert_eq!(out.len(), 100_000, "{what}");
    }
}

/// SIGSTOP, which no process can catch, stops airlock alone, and airlock enforces the
/// timeout: the task ran on unbounded until airlock was continued (the soak review). The
/// sandbox's init now ends it itself at its backstop, the deadline plus the 2 s grace, and
/// airlock, continued, reports the run as timed out (124; in JSON, `timed_out` true and the
/// output captured). Control: right after the SIGSTOP the spinner still runs.
#[test]
fn a_stopped_airlock_does_not_hold_the_timeout() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let m = mark("a_stopped_airlock_does_not_hold_the_timeout");
    for who in BOTH {
        for json in [false, true] {
            let script = format!(": {m}; echo early; while :; do :; done");
            let flags: &[&str] = match json {
                true => &["--json", "--timeout", "2s"],
                false => &["--timeout", "2s"],
            };
            let p = start(who, flags, &["sh", "-c", &script]);
            let pid = p.pid();
            let spinner = |m: &str| {
                procs_with(m)
                    .into_iter()
                    .find(|p| p.cmdline.starts_with("sh"))
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            let spin = loop {
                if let Some(s) = spinner(&m) {
                    break s.pid;
                }
                assert!(Instant::now() < deadline, "no spinner as {who:?}");
                std::thread::sleep(POLL);
            };
            kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();
            let stopped = Instant::now();
            std::thread::sleep(Duration::from_millis(100));
            let state = state_of(spin);
            assert_eq!(
                state, "R (running)",
                "control as {who:?}: the spinner runs on past airlock's SIGSTOP"
            );
            // The backstop comes 4 s after the start; allow for a loaded host.
            while spinner(&m).is_some() {
                if stopped.elapsed() > Duration::from_secs(20) {
                    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
                    panic!("as {who:?} (json {json}): the task outlived its timeout by 20 s");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
            let r = p.finish(SECS_30);
            assert_eq!(r.out.status.code(), Some(124), "{}", r.show());
            if json {
                let rep = r.report();
                assert_eq!(rep["timed_out"], json!(true), "{}", r.show());
                assert_eq!(rep["stdout"], json!("early\n"), "{}", r.show());
            } else {
                assert_eq!(r.out.stdout, b"early\n", "{}", r.show());
            }
            assert_clean(&m, &[pid], &format!("SIGSTOP to airlock as {who:?}"));
        }
    }
}

#[test]
fn sigterm_to_airlock_kills_a_task_ignoring_it_after_the_grace() {
    let m = mark("sigterm_to_airlock_kills_a_task_ignoring_it_after_the_grace");
    // SIGTERM to airlock is forwarded; the task ignores it; 2 s later (TERM_GRACE) airlock
    // kills the sandbox's init, which src/launch.rs reports as End::InitKilled(SIGKILL).
    for (i, who) in BOTH.into_iter().enumerate() {
        let sleeper = format!("sleep 9.9{i}");
        let script = format!(": {m}; trap '' TERM; {sleeper}; :");
        let p = start(who, &["--json", "--timeout", "20s"], &["sh", "-c", &script]);
        wait_for_process(&sleeper, Duration::from_secs(10));
        let sent = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let pid = p.pid();
        let r = p.finish(SECS_30);
        let after_term = sent.elapsed();
        let rep = r.report();
        assert_end(&r, &rep, signaled(libc::SIGKILL, Value::Null));
        assert!(
            after_term >= Duration::from_millis(1900) && after_term < Duration::from_secs(8),
            "ended {after_term:?} after SIGTERM\n{}",
            r.show()
        );
        eprintln!("SIGTERM to airlock as {who:?}: ended {after_term:?} after it");
        assert_clean(&m, &[pid], &format!("SIGTERM grace as {who:?}"));
        assert_clean(&sleeper, &[], &format!("SIGTERM grace as {who:?}"));
    }
}

/// A first SIGINT to airlock is only forwarded: a task that ignores it keeps running (6 s
/// later, past the 2 s grace, it still does; the control). So is one long after the last
/// (here 6 s): the user of a REPL or shell in the sandbox presses Ctrl-C now and then, and the
/// second of a session (20 s apart in the terminal review) had killed it. One soon after the
/// last, Ctrl-C pressed again, ends the sandbox as SIGTERM does: 2 s later, killed, with
/// nothing left, and airlock says so on stderr.
#[test]
fn a_second_sigint_to_airlock_ends_a_task_ignoring_it_after_the_grace() {
    let m = mark("a_second_sigint_to_airlock_ends_a_task_ignoring_it");
    let int = |pid: u32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap()
    };
    for (i, who) in BOTH.into_iter().enumerate() {
        let sleeper = format!("sleep 29.4{i}");
        let script = format!(": {m}; trap '' INT; {sleeper}; :");
        let mut p = start(who, &["--json", "--timeout", "40s"], &["sh", "-c", &script]);
        wait_for_process(&sleeper, Duration::from_secs(10));
        // The second past the 5 s in which it would count as Ctrl-C pressed again; both
        // past the 2 s grace.
        for wait in [6000, 2500] {
            int(p.pid());
            std::thread::sleep(Duration::from_millis(wait));
            assert!(
                p.try_finish().is_none(),
                "{who:?}: a first SIGINT (or one 6 s after it) ended a task that ignores it"
            );
        }
        let sent = Instant::now();
        int(p.pid());
        let pid = p.pid();
        let r = p.finish(SECS_30);
        let after = sent.elapsed();
        assert_end(&r, &r.report(), signaled(libc::SIGKILL, Value::Null));
        assert!(
            after >= Duration::from_millis(1900) && after < Duration::from_secs(8),
            "ended {after:?} after the SIGINT pressed again\n{}",
            r.show()
        );
        let said = "airlock: the task had not ended 2 s after a second SIGINT; the whole \
                    sandbox was killed\n";
        assert_eq!(String::from_utf8_lossy(&r.out.stderr), said, "{}", r.show());
        // The report says it too: its signal 9 alone looks like any other kill (a framework
        // review).
        let said = said.trim_start_matches("airlock: ").trim_end();
        assert_eq!(r.report()["warnings"], json!([said]), "{}", r.show());
        assert_clean(&m, &[pid], &format!("second SIGINT as {who:?}"));
        assert_clean(&sleeper, &[], &format!("second SIGINT as {who:?}"));
    }
}

#[test]
fn cpu_time_limit_ends_a_busy_loop() {
    let m = mark("cpu_time_limit_ends_a_busy_loop");
    let script = format!(": {m}; while :; do :; done");
    for who in BOTH {
        let (r, rep) = json_sh_cpu_1s(who, &script);
        // RLIMIT_CPU soft 1 s: SIGXCPU (24) ends the shell.
        assert_end(&r, &rep, signaled(libc::SIGXCPU, json!("cpu")));
        assert_limits(&r, &rep, who, &[("cpu_time_ms", 1000)]);
        let ms = duration_ms(&rep);
        assert!(
            (900..60_000).contains(&ms),
            "duration_ms {ms}\n{}",
            r.show()
        );
        eprintln!("--cpu-time 1s as {who:?}: {:?} (report {ms} ms)", r.took);
        assert_clean(&m, &[r.pid], &format!("cpu time as {who:?}"));
    }
}

#[test]
fn cpu_time_hard_limit_kill_is_attributed() {
    let m = mark("cpu_time_hard_limit_kill_is_attributed");
    // A task that ignores SIGXCPU runs on to the hard limit (soft + 2 s), where the kernel
    // SIGKILLs it. The CPU limit ended the task, so `limit_hit` must say "cpu" (README:
    // "`limit_hit` names the limit the task ran into ... or is null").
    let script = format!(": {m}; trap '' XCPU; while :; do :; done");
    let mut seen = Vec::new();
    for who in BOTH {
        let (r, rep) = json_sh_cpu_1s(who, &script);
        assert_limits(&r, &rep, who, &[("cpu_time_ms", 1000)]);
        let ms = duration_ms(&rep);
        assert!(
            (2500..60_000).contains(&ms),
            "duration_ms {ms}\n{}",
            r.show()
        );
        eprintln!(
            "--cpu-time 1s, SIGXCPU ignored, as {who:?}: status {:?}, signal {}, limit_hit {} \
             after {ms} ms",
            r.code(),
            rep["signal"],
            rep["limit_hit"]
        );
        assert_clean(&m, &[r.pid], &format!("cpu hard limit as {who:?}"));
        seen.push((r, rep));
    }
    for (r, rep) in &seen {
        assert_end(r, rep, signaled(libc::SIGKILL, json!("cpu")));
    }
}

/// RLIMIT_CPU counts each process's CPU time; airlock knows the whole tree's. A SIGKILL that
/// no limit sent, after two children had used 0.7 s of CPU each (1.4 s in all, past the 1 s
/// soft limit, below the 3 s hard one), was reported as `cpu` (a review), and so was a SIGXCPU
/// the task sent itself without using any (the sign-off review). Controls: the same kill after
/// no spinning; the limits' own ends (`cpu_time_limit_ends_a_busy_loop`,
/// `cpu_time_hard_limit_kill_is_attributed`). The children count CPU time, not wall time, so
/// that a loaded machine cannot make the tree's total fall short of the old threshold.
#[test]
fn a_signal_no_cpu_limit_sent_is_not_blamed_on_it() {
    let m = mark("a_signal_no_cpu_limit_sent_is_not_blamed_on_it");
    let spin = "python3 -c 'import time\nwhile time.process_time() < 0.7: pass'";
    for (spins, sig, what) in [
        (2, libc::SIGKILL, "kill -9 after two children spun"),
        (0, libc::SIGKILL, "control: kill -9 alone"),
        (0, libc::SIGXCPU, "the task's own SIGXCPU"),
    ] {
        let script = format!(
            ": {m}; for i in $(seq {spins}); do {spin}; done; sh -c 'kill -{sig} $PPID'; sleep 5"
        );
        for who in BOTH {
            let (r, rep) = json_sh_cpu_1s(who, &script);
            assert_end(&r, &rep, signaled(sig, Value::Null));
            assert_clean(&m, &[r.pid], &format!("{what} as {who:?}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

#[test]
fn file_size_limit_stops_a_writer() {
    let m = mark("file_size_limit_stops_a_writer");
    let script = format!(": {m}; head -c 4096 /dev/zero > f");
    for who in BOTH {
        let (r, rep) = json_sh(who, &["--file-size", "1K"], &script, SECS_30);
        // head is killed by SIGXFSZ (25); sh (dash forks the last command) exits 128+25, which
        // src/limits.rs reads as the file size limit.
        assert_end(&r, &rep, exited(128 + libc::SIGXFSZ, json!("file_size")));
        assert_limits(&r, &rep, who, &[("file_size", 1024)]);
        assert_eq!(
            rep["files"]["f"].as_str().map(str::len),
            Some(1024),
            "the file stops at the limit\n{}",
            r.show()
        );
        assert_eq!(rep["files_truncated"], json!([]), "{}", r.show());
        assert_clean(&m, &[r.pid], &format!("file size as {who:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Processes that try to outlive the task
// ---------------------------------------------------------------------------------------------

#[test]
fn double_forked_daemon_dies_with_the_task() {
    let script = "(setsid sleep 33.3 &) ; exit 0";
    for who in BOTH {
        // JSON mode.
        let (r, rep) = json_sh(who, &[], script, SECS_30);
        assert_end(&r, &rep, exited(0, Value::Null));
        assert_limits(&r, &rep, who, &[]);
        // Right away: the init's exit took the whole pid namespace with it before airlock's
        // wait returned.
        assert_clean("sleep 33.3", &[r.pid], &format!("daemon (json) as {who:?}"));

        // Streaming mode: the daemon would hold airlock's own stdout; it must reach EOF.
        let mut c = airlock(who, &["run", "--", "sh", "-c", script]);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let begin = Instant::now();
        let mut child = c.spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if begin.elapsed() > SECS_30 {
                let _ = child.kill();
                let _ = child.wait();
                panic!("daemon (stream) as {who:?}: airlock still running after 30 s");
            }
            std::thread::sleep(POLL);
        };
        assert_eq!(status.code(), Some(0), "daemon (stream) as {who:?}");
        let eof_by = Instant::now() + Duration::from_secs(3);
        while !reader.is_finished() {
            assert!(
                Instant::now() < eof_by,
                "daemon (stream) as {who:?}: stdout still open 3 s after airlock exited: {:?}",
                procs_with("sleep 33.3")
            );
            std::thread::sleep(POLL);
        }
        reader.join().unwrap();
        assert_clean(
            "sleep 33.3",
            &[child.id()],
            &format!("daemon (stream) as {who:?}"),
        );
    }
}

#[test]
fn task_cannot_kill_its_init() {
    let m = mark("task_cannot_kill_its_init");
    // The kernel drops SIGKILL sent to a pid namespace's init from inside it: kill(1) succeeds
    // silently, the init lives, sleep 5 runs, the task exits 0 (End::InitKilled is not
    // reachable from inside).
    let script = format!(": {m}; kill -9 1; sleep 5");
    for who in BOTH {
        let (r, rep) = json_sh(who, &[], &script, SECS_30);
        assert_end(&r, &rep, exited(0, Value::Null));
        assert_eq!(rep["stderr"], json!(""), "{}", r.show());
        let ms = duration_ms(&rep);
        // (The upper bound leaves room for a setup slowed by a loaded host.)
        assert!(
            (5000..25_000).contains(&ms),
            "duration_ms {ms}: sleep 5 should have run in full\n{}",
            r.show()
        );
        eprintln!("kill -9 1 as {who:?}: exit 0 after {ms} ms");
        assert_clean(&m, &[r.pid], &format!("kill -9 1 as {who:?}"));
    }
}

#[test]
fn init_killed_from_outside_is_reported_and_nothing_is_left() {
    let m = mark("init_killed_from_outside_is_reported_and_nothing_is_left");
    // What End::InitKilled covers: the init dies without reporting the task's end (here: root
    // on the host SIGKILLs it). Everything in the sandbox dies with it.
    for (i, who) in BOTH.into_iter().enumerate() {
        let sleeper = format!("sleep 7.7{i}");
        let script = format!(": {m}; {sleeper}; :");
        let p = start(who, &["--json", "--timeout", "20s"], &["sh", "-c", &script]);
        wait_for_process(&sleeper, Duration::from_secs(10));
        // The init, not the network namespace's helper, which may still be a zombie the
        // launcher has yet to reap on a loaded host (seen once in CI as uid 65534).
        let init: Vec<Proc> = processes()
            .into_iter()
            .filter(|q| q.ppid == p.pid() && q.cmdline.starts_with("airlock-init"))
            .collect();
        assert_eq!(init.len(), 1, "airlock's children: {init:#?}");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(init[0].pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let pid = p.pid();
        let r = p.finish(SECS_30);
        let rep = r.report();
        assert_end(&r, &rep, signaled(libc::SIGKILL, Value::Null));
        assert_limits(&r, &rep, who, &[]);
        assert_clean(&sleeper, &[pid], &format!("init killed as {who:?}"));
        assert_clean(&m, &[pid], &format!("init killed as {who:?}"));
    }
}

/// What the task left must be gone when airlock returns, not only dying: the leftover here
/// holds 1000 MiB, whose teardown takes tens of milliseconds after its SIGKILL, and its /proc
/// entry (found by pid and start time: a dying process's command line reads empty) lasts until
/// it is reaped. (The init's exit, as pid 1, ends it; airlock waits for that exit.) The report
/// is the task's, and (root) the run's cgroups are gone too.
#[test]
fn what_the_task_left_is_gone_when_airlock_returns() {
    let m = mark("what_the_task_left_is_gone_when_airlock_returns");
    let hog = format!(
        "import time; b = b'x' * (1000 << 20); print('ready', flush=True); time.sleep(60) # {m}"
    );
    let script = format!(
        ": {m}; python3 -c \"{hog}\" > ready & \
         until grep -q ready ready 2>/dev/null; do sleep 0.01; done; sleep 0.3; echo done; exit 5"
    );
    let start_time = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        after_name.split(' ').nth(19).map(str::to_string)
    };
    for who in BOTH {
        let p = start(who, &["--json", "--timeout", "30s"], &["sh", "-c", &script]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let hog_pid = loop {
            let found = procs_with(&m)
                .into_iter()
                .find(|q| q.cmdline.starts_with("python3 -c import time"));
            match found {
                Some(q) => break q.pid,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                None => panic!("{who:?}: the leftover never started"),
            }
        };
        let born = start_time(hog_pid).expect("the leftover's start time");
        let r = p.finish(SECS_30);
        let left = start_time(hog_pid).filter(|t| *t == born);
        assert_eq!(left, None, "{who:?}: the leftover {hog_pid} is still there");
        let rep = r.report();
        assert_end(&r, &rep, exited(5, Value::Null));
        assert_eq!(rep["stdout"], json!("done\n"), "{}", r.show());
        assert_clean(&m, &[r.pid], &format!("leftover as {who:?}"));
    }
}

/// A leftover this init may not signal (bwrap mode as root with CAP_SETUID kept: the task starts
/// a sleeper as another uid, and the init, without CAP_KILL, cannot kill it) does not hold the
/// answer back: the init exits once the task has, its exit as pid 1 ends the sleeper whatever
/// the rights, and airlock returns the task's status well before the sleeper would have ended
/// by itself (30 s).
/// Control: the sleeper runs, as uid 1234, while the task is still there.
#[test]
fn a_leftover_the_init_cannot_signal_does_not_hold_the_answer() {
    let sleeper = "sleep 30.6543";
    let script = format!("setpriv --reuid=1234 {sleeper} & sleep 1; exit 3");
    let args = [
        "bwrap",
        "--unshare-pid",
        "--cap-add",
        "CAP_SETUID",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let p = spawn(airlock(Launcher::Root, &args), format!("airlock {args:?}"));
    let seen = wait_for_process(sleeper, Duration::from_secs(10));
    let uid = std::fs::read_to_string(format!("/proc/{}/status", seen.pid)).unwrap_or_default();
    assert!(
        uid.lines().any(|l| l.starts_with("Uid:\t1234\t")),
        "control: the sleeper runs as uid 1234: {uid}"
    );
    let r = p.finish(Duration::from_secs(15));
    assert_eq!(r.code(), Some(3), "{}", r.show());
    assert_none_left(sleeper, Duration::ZERO, "a leftover of another uid");
    assert_no_orphaned_init(Duration::from_secs(2), "a leftover of another uid");
}

/// Every sandbox's init is reaped by airlock itself: a caller that is a child subreaper and
/// never reaps what it did not start (a container's pid 1, an agent's runner) inherits no
/// zombie from a run. Control: under the same caller, a command that leaves an orphan leaves
/// it a zombie there, so the count can see one. Every run must exit 0 (check=True), so a
/// count of 0 cannot come from runs that never started a sandbox.
#[test]
fn the_init_is_reaped_by_airlock_not_left_to_the_caller() {
    let harness = "import ctypes, os, subprocess, sys, time\n\
        assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER\n\
        for _ in range(5):\n\
        \x20   subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)\n\
        time.sleep(0.3)\n\
        me = os.getpid()\n\
        print(len(open(f'/proc/{me}/task/{me}/children').read().split()))\n";
    let count = |who: Launcher, argv: &[&str]| -> usize {
        let mut c = match as_user(who).split_first() {
            None => Command::new("/usr/bin/python3"),
            Some((prog, rest)) => {
                let mut c = Command::new(prog);
                c.args(rest).arg("/usr/bin/python3");
                c
            }
        };
        c.args(["-c", harness]).args(argv);
        let r = spawn(c, format!("subreaper harness {argv:?}")).finish(SECS_30);
        assert!(r.out.status.success(), "{}", r.show());
        let text = String::from_utf8_lossy(&r.out.stdout).trim().to_string();
        text.parse()
            .unwrap_or_else(|_| panic!("harness printed {text:?}"))
    };
    for who in BOTH {
        let orphan = count(who, &["sh", "-c", "(sleep 0 &); true"]);
        assert!(
            orphan >= 1,
            "control as {who:?}: an orphan is seen ({orphan})"
        );
        let bin = binary().to_str().unwrap();
        let runs = count(who, &[bin, "run", "--", "/bin/true"]);
        assert_eq!(
            runs, 0,
            "as {who:?}: children left to the subreaping caller"
        );
    }
}

/// The CPU time a report compares with --cpu-time is the task's: what it leaves behind, killed
/// by the init after the task's end, is not counted. Here the task starts 4 busy loops (up to
/// 1.8 s of CPU between them on 2 cores, under 1 s each) and SIGKILLs itself: no limit ended
/// it.
#[test]
fn cpu_time_of_what_the_task_left_is_not_the_tasks() {
    let m = mark("cpu_time_of_what_the_task_left_is_not_the_tasks");
    let script = format!(
        ": {m}; for i in 1 2 3 4; do sh -c ': {m}; while :; do :; done' & done; sleep 0.9; kill -9 $$"
    );
    for who in BOTH {
        let (r, rep) = json_sh_cpu_1s(who, &script);
        assert_end(&r, &rep, signaled(libc::SIGKILL, Value::Null));
        assert_clean(&m, &[r.pid], &format!("cpu time of leftovers as {who:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Cgroups
// ---------------------------------------------------------------------------------------------

/// As root on this cgroup v1 host, the task runs inside the run's own memory and pids cgroups
/// (made by the launcher's helper while the init builds the sandbox, joined by the init before
/// it starts the task): seen from the host, both lines of its /proc/PID/cgroup name
/// airlock-PID-START-PIDNS-N, PID the launcher's (the helper's would read as a dead launcher's to the
/// next run's sweep of stale cgroups).
/// Its cgroup namespace is rooted there, so the task itself reads "/" in both lines and learns
/// neither the name nor the launcher's host pid in it. Controls: the same lines of a host
/// process name no such cgroup; the task's own lines, read from the host, name its cgroup.
#[test]
fn root_task_runs_in_the_runs_own_cgroups_and_sees_it_as_its_root() {
    let lines_of = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                let ctrls = l.split(':').nth(1).unwrap_or("");
                ctrls == "memory" || ctrls == "pids"
            })
            .map(str::to_string)
            .collect()
    };
    let host = lines_of(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    assert_eq!(host.len(), 2, "host control: {host:?}");
    assert!(!host.iter().any(|l| l.contains("airlock-")), "{host:?}");

    // The task prints its own view, then waits on stdin while the host reads its cgroups.
    let marker = format!("cgroup-probe-{}", std::process::id());
    let script = format!("cat /proc/self/cgroup; read x; exit 0 # {marker}");
    let mut child = airlock(Launcher::Root, &["run", "--", "/bin/sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    let task = loop {
        if let Some(p) = procs_with(&marker)
            .into_iter()
            .find(|p| p.cmdline.starts_with("/bin/sh -c"))
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the task never appeared");
        std::thread::sleep(Duration::from_millis(10));
    };
    let outside = lines_of(&std::fs::read_to_string(format!("/proc/{}/cgroup", task.pid)).unwrap());
    drop(child.stdin.take());
    let status = wait_until(&mut child, Instant::now() + Duration::from_secs(10));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{out}");

    assert_eq!(outside.len(), 2, "{outside:?}");
    for l in &outside {
        let name = l.rsplit('/').next().unwrap();
        let parts: Vec<&str> = name.split('-').collect();
        assert!(
            parts.len() == 5
                && parts[0] == "airlock"
                && parts[1..].iter().all(|p| p.parse::<u64>().is_ok()),
            "the task's cgroup line {l:?}, read from the host, names no run cgroup"
        );
        assert_eq!(
            parts[1], launcher,
            "the cgroup {l:?} is not named after its launcher"
        );
    }
    let inside = lines_of(&out);
    assert_eq!(inside.len(), 2, "{out}");
    for l in &inside {
        assert!(
            l.ends_with(":/"),
            "the task reads its cgroup as {l:?}, not its root"
        );
    }
}

/// As root, the run's cgroups v1 go below the caller's own only where those are root's alone.
/// In cgroups delegated to another user (chowned to uid 65534, as a session's are), that user
/// could remove the run's empty cgroup between its mkdir and the writes of its limits and make
/// one of its own in its place: there the limits are rlimits, as the report says. Control: the
/// same cgroups owned by root get cgroup v1.
#[test]
fn root_in_cgroups_delegated_to_another_user_gets_rlimits() {
    struct Dirs(Vec<PathBuf>);
    impl Drop for Dirs {
        fn drop(&mut self) {
            for d in &self.0 {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
    for (owner, memory, pids) in [
        (0, "cgroup v1", "cgroup v1"),
        (
            65534,
            "rlimit (RLIMIT_DATA, per process)",
            "rlimit (RLIMIT_NPROC, per sandbox user)",
        ),
    ] {
        let name = format!("delegated-test-{}-{owner}", std::process::id());
        let dirs = Dirs(
            ["memory", "pids"]
                .iter()
                .map(|c| Path::new("/sys/fs/cgroup").join(c).join(&name))
                .collect(),
        );
        for d in &dirs.0 {
            std::fs::create_dir(d).unwrap();
            for p in [d.clone(), d.join("cgroup.procs"), d.join("tasks")] {
                std::os::unix::fs::chown(&p, Some(owner), Some(owner)).unwrap();
            }
        }
        // The shell joins both cgroups, then becomes the launcher.
        let script = format!(
            "for d in {} {}; do echo $$ > $d/cgroup.procs || exit 99; done; \
             exec {} run --json --memory 64m --pids 50 -- true",
            dirs.0[0].display(),
            dirs.0[1].display(),
            binary().display()
        );
        let out = Command::new("sh").args(["-c", &script]).output().unwrap();
        let what = format!("owner {owner}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{what}");
        let rep = report(&out);
        assert_eq!(
            rep["limits"]["memory"]["mechanism"],
            json!(memory),
            "{what}\n{rep}"
        );
        assert_eq!(
            rep["limits"]["pids"]["mechanism"],
            json!(pids),
            "{what}\n{rep}"
        );
    }
}

/// A run sweeps the empty cgroups of launchers that are gone from its cgroup parent, and only
/// those. A name carries the launcher's pid namespace: a pid from another namespace (a launcher
/// in another container sharing the parent) means nothing here, so such a cgroup goes only
/// once 60 s old; before, a live launcher's empty cgroup there, named after a pid this
/// namespace reads as gone, was removed under it. Controls: a gone launcher of this
/// namespace's cgroup goes, a live one's stays.
#[test]
fn the_sweep_removes_gone_launchers_cgroups_and_leaves_other_pid_namespaces_young_ones() {
    use std::os::unix::fs::MetadataExt;
    struct Dirs(Vec<PathBuf>);
    impl Drop for Dirs {
        fn drop(&mut self) {
            for d in self.0.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
    let start_of = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(19).unwrap().parse().unwrap()
    };
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    let me = std::process::id();
    let not_pid1s = start_of(1) + 12345;
    let name = format!("sweep-test-{me}");
    let parents: Vec<PathBuf> = ["memory", "pids"]
        .iter()
        .map(|c| Path::new("/sys/fs/cgroup").join(c).join(&name))
        .collect();
    let mut dirs = Dirs(parents.clone());
    for d in &parents {
        std::fs::create_dir(d).unwrap();
    }
    let fakes = [
        (
            "gone here",
            format!("airlock-1-{not_pid1s}-{ns}-9"),
            false,
            false,
        ),
        (
            "live here",
            format!("airlock-{me}-{}-{ns}-9", start_of(me)),
            false,
            true,
        ),
        (
            "another namespace's, young",
            format!("airlock-1-{not_pid1s}-{}-9", ns + 1),
            false,
            true,
        ),
        (
            "another namespace's, 2 minutes old",
            format!("airlock-1-{not_pid1s}-{}-8", ns + 1),
            true,
            false,
        ),
    ];
    for (_, fake, old, _) in &fakes {
        let d = parents[0].join(fake);
        std::fs::create_dir(&d).unwrap();
        if *old {
            let touched = Command::new("touch")
                .args(["-d", "-120 seconds"])
                .arg(&d)
                .status()
                .unwrap();
            assert!(touched.success());
        }
        dirs.0.push(d);
    }
    // The shell joins both parents, then becomes the launcher.
    let script = format!(
        "for d in {} {}; do echo $$ > $d/cgroup.procs || exit 99; done; \
         exec {} run --json -- true",
        parents[0].display(),
        parents[1].display(),
        binary().display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let what = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}");
    assert_eq!(
        report(&out)["limits"]["memory"]["mechanism"],
        json!("cgroup v1"),
        "{what}"
    );
    let found: Vec<String> = fakes
        .iter()
        .map(|(what, fake, _, stays)| {
            let there = parents[0].join(fake).exists();
            format!(
                "{what}: {}",
                if there == *stays {
                    "as expected"
                } else if there {
                    "STAYED"
                } else {
                    "REMOVED"
                }
            )
        })
        .collect();
    assert!(
        found.iter().all(|f| f.ends_with("as expected")),
        "after a run's sweep: {found:?}"
    );
}

#[test]
fn root_cgroups_are_removed_after_every_kind_of_end() {
    let m = mark("root_cgroups_are_removed_after_every_kind_of_end");
    let sh = |script: &str| -> Vec<String> {
        vec!["sh".into(), "-c".into(), format!(": {m}; {script}")]
    };
    let bomb = vec!["python3".to_string(), "-c".into(), python_bomb(&m)];
    let missing = vec![format!("/nonexistent-{m}")];
    let cases: Vec<(&[&str], Vec<String>, Value)> = vec![
        (&[], sh("exit 0"), json!(0)),
        (&[], sh("exit 7"), json!(7)),
        (&[], sh("kill -9 $$"), json!(137)),
        (&["--timeout", "300ms"], sh("sleep 10"), json!(124)),
        (
            &["--memory", "64M"],
            vec![
                "python3".into(),
                "-c".into(),
                format!("# {m}\nb = b'x' * (256 << 20)"),
            ],
            json!(137),
        ),
        (&["--pids", "16"], bomb, json!(0)),
        // airlock's own failure (command not found), after the cgroup was made.
        (&[], missing, json!(127)),
    ];
    let before = mount_lines();
    for (flags, argv, code) in &cases {
        let mut f = vec!["--json"];
        f.extend_from_slice(flags);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let r = run(Launcher::Root, &f, &argv, SECS_30);
        let rep = r.report();
        assert_eq!(json!(r.code()), *code, "{}", r.show());
        if rep.get("error").is_none() {
            assert_limits(&r, &rep, Launcher::Root, &[]);
        }
        eprintln!(
            "root run {flags:?}: status {:?}, limit_hit {}",
            r.code(),
            rep["limit_hit"]
        );
        assert_clean(&m, &[r.pid], &format!("{flags:?} {argv:?}"));
    }
    assert_no_new_mounts(&before, "root cgroup cases");
}

/// As root, the network namespace's helper killed while it makes the run's cgroup v1 (strace
/// injects SIGKILL into its second mkdir, the pids cgroup's, after it made the memory one) ends
/// the run at step 1: exit 125, the task not run, and no cgroup of the launcher left, for the
/// launcher removes what the helper made. Controls: the same run untraced writes the task's
/// file; the trace shows the memory cgroup made by another process than the launcher, and that
/// process killed.
#[test]
fn root_cgroup_half_made_by_a_killed_helper_is_removed() {
    let m = mark("root_cgroup_half_made_by_a_killed_helper_is_removed");
    let dir = writable_tmpdir();
    let log = dir.path().join("trace");
    let ran = dir.path().join("ran");
    let before = mount_lines();
    let argv = [
        "sh".to_string(),
        "-c".into(),
        format!(": {m}; touch /mnt/m/ran"),
    ];
    let bind = format!("{}:/mnt/m", dir.path().display());
    let control = run(
        Launcher::Root,
        &["--bind", &bind],
        &[&argv[0], &argv[1], &argv[2]],
        SECS_30,
    );
    control_left_marker(control.code(), &control.show(), &ran, "root");
    let mut c = Command::new("strace");
    c.args(["-f", "-o"])
        .arg(&log)
        .args([
            "-e",
            "trace=mkdir",
            "-e",
            "inject=mkdir:signal=SIGKILL:when=2",
        ])
        .arg(binary())
        .args(["run", "--bind", &bind, "--"])
        .args(&argv);
    let r = spawn(c, "strace airlock run (helper killed at mkdir)".into()).finish(SECS_30);
    let trace = std::fs::read_to_string(&log).unwrap();
    // The memory cgroup the helper made: "HELPER mkdir(\".../airlock-LAUNCHER-START-N\", ...) = 0".
    let made = trace
        .lines()
        .find(|l| l.contains("/airlock-") && l.ends_with(" = 0"))
        .unwrap_or_else(|| panic!("no cgroup made in the trace:\n{trace}"));
    let helper = made.split(' ').next().unwrap();
    let launcher: u32 = made
        .split("/airlock-")
        .nth(1)
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(helper, launcher.to_string(), "{made}");
    // strace pads the pid column to 5 characters.
    assert!(
        trace
            .lines()
            .any(|l| l.split_once(' ').is_some_and(|(pid, rest)| {
                pid == helper && rest.trim_start() == "+++ killed by SIGKILL +++"
            })),
        "the helper was not killed:\n{trace}"
    );
    let err = stderr(&r.out);
    assert_eq!(r.code(), Some(125), "{}", r.show());
    assert!(err.contains("step 1 create cgroup"), "{}", r.show());
    assert!(err.contains("killed by SIGKILL"), "{}", r.show());
    assert!(!ran.exists(), "the task ran: {}", r.show());
    assert_clean(&m, &[launcher], "a helper killed while it made the cgroup");
    assert_no_new_mounts(&before, "a helper killed while it made the cgroup");
}

/// The network namespace's helper hands the root cgroup's tasks files to the init right after
/// the namespace, as its second message. That send failing (EIO, injected by strace into the
/// second sendmsg of each process: the launcher sends only one) must stop the run before the
/// task, name the step, and leave no cgroup.
#[test]
fn root_cgroup_handover_that_fails_stops_the_run() {
    let m = mark("root_cgroup_handover_that_fails_stops_the_run");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trace");
    let argv = ["sh".to_string(), "-c".into(), format!(": {m}; echo ran")];
    let mut c = Command::new("strace");
    c.args(["-f", "-o"])
        .arg(&log)
        .args([
            "-e",
            "trace=sendmsg",
            "-e",
            "inject=sendmsg:error=EIO:when=2",
        ])
        .arg(binary())
        .args(["run", "--"])
        .args(&argv);
    let r = spawn(c, "strace airlock run (second sendmsg fails)".into()).finish(SECS_30);
    let trace = std::fs::read_to_string(&log).unwrap();
    // The failed send carries the tasks files: "PID sendmsg(3, ... "C" ...) = -1 EIO (...) (INJECTED)".
    assert!(
        trace
            .lines()
            .any(|l| l.contains("\"C\"") && l.contains("EIO") && l.contains("INJECTED")),
        "the cgroup's handover was not the failed send:\n{trace}"
    );
    let err = stderr(&r.out);
    assert_eq!(r.code(), Some(125), "{}", r.show());
    assert!(err.contains("hand over the cgroup"), "{}", r.show());
    assert!(
        !stdout(&r.out).contains("ran"),
        "the task ran: {}",
        r.show()
    );
    let launcher: u32 = trace.split_whitespace().next().unwrap().parse().unwrap();
    assert_clean(&m, &[launcher], "a failed handover of the cgroup");
}

// ---------------------------------------------------------------------------------------------
// Load and faults
// ---------------------------------------------------------------------------------------------

#[test]
fn load_200_concurrent_sandboxes() {
    let m = mark("load_200_concurrent_sandboxes");
    let before = mount_lines();
    let load_mark = m.clone();
    // A gate, so that the 200 launchers really start at once: each is `sh` blocked reading
    // one line from a FIFO, then exec'ing the launcher (same pid). This process holds the
    // FIFO open read-write so no open ever blocks, and writes the 200 lines once every sh
    // has it open.
    let gate_dir = tempfile::tempdir().unwrap();
    let fifo = gate_dir.path().join("gate");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut gate = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let begin = Instant::now();
    let mut pending: Vec<(Launcher, u64, Pending)> = Vec::new();
    for i in 0..200u64 {
        let who = if i % 2 == 0 {
            Launcher::Root
        } else {
            Launcher::Unprivileged
        };
        let n = 1000 + i;
        let script = format!(": {load_mark}; echo $(({n}*{n}))");
        let inner = airlock(who, &["run", "--json", "--", "sh", "-c", &script]);
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("read _ < \"$0\"; exec \"$@\"")
            .arg(&fifo)
            .arg(inner.get_program())
            .args(inner.get_args());
        pending.push((who, n, spawn(c, format!("{who:?} load N={n}"))));
    }
    let waiting = loop {
        let waiting = pending
            .iter()
            .filter(|(_, _, p)| {
                std::fs::read_link(format!("/proc/{}/fd/0", p.pid())).is_ok_and(|l| l == fifo)
            })
            .count();
        if waiting == pending.len() {
            break waiting;
        }
        if begin.elapsed() > Duration::from_secs(60) {
            for (_, _, p) in pending.iter_mut() {
                p.kill();
            }
            panic!("only {waiting} of 200 launchers reached the gate within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let spawned = begin.elapsed();
    gate.write_all(&[b'\n'; 200]).unwrap();
    let begin = Instant::now();
    let pids: Vec<u32> = pending.iter().map(|(_, _, p)| p.pid()).collect();
    let mut done: Vec<Option<Run>> = (0..pending.len()).map(|_| None).collect();
    let deadline = Duration::from_secs(120);
    loop {
        for (i, (_, _, p)) in pending.iter_mut().enumerate() {
            if done[i].is_none() {
                done[i] = p.try_finish();
            }
        }
        if done.iter().all(Option::is_some) {
            break;
        }
        if begin.elapsed() > deadline {
            let left = done.iter().filter(|d| d.is_none()).count();
            for (i, (_, _, p)) in pending.iter_mut().enumerate() {
                if done[i].is_none() {
                    p.kill();
                }
            }
            panic!("{left} of 200 sandboxes still running after {deadline:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let wall = begin.elapsed();
    let mut slowest = Duration::ZERO;
    let mut max_ms = 0;
    let mut failures = Vec::new();
    for ((who, n, _), r) in pending.iter().zip(done.iter()) {
        let r = r.as_ref().unwrap();
        slowest = slowest.max(r.took);
        let rep: Value = match serde_json::from_slice(&r.out.stdout) {
            Ok(v) => v,
            Err(_) => {
                failures.push(format!("{who:?} N={n}: no report\n{}", r.show()));
                continue;
            }
        };
        max_ms = max_ms.max(rep["duration_ms"].as_u64().unwrap_or(0));
        let want = format!("{}\n", n * n);
        if r.code() != Some(0) || rep["exit_code"] != json!(0) || rep["stdout"] != json!(want) {
            failures.push(format!("{who:?} N={n}: expected {want:?}\n{}", r.show()));
            continue;
        }
        let mech = match who {
            Launcher::Root => "cgroup v1",
            Launcher::Unprivileged => "rlimit (RLIMIT_NPROC, per sandbox user)",
        };
        if rep["limits"]["pids"]["mechanism"] != json!(mech) {
            failures.push(format!("{who:?} N={n}: mechanism\n{}", r.show()));
        }
    }
    eprintln!(
        "200 concurrent sandboxes (100 root, 100 uid 65534): {waiting} at the gate after \
         {spawned:?}; all done {wall:?} after the gate opened; slowest run (spawn to exit) \
         {slowest:?}; largest duration_ms {max_ms}"
    );
    assert!(
        failures.is_empty(),
        "{} of 200 runs failed:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
    assert_none_left(&load_mark, Duration::from_secs(2), "load");
    let u65534: Vec<Proc> = procs_with(&load_mark)
        .into_iter()
        .filter(|p| p.uid == 65534)
        .collect();
    assert!(u65534.is_empty(), "{u65534:#?}");
    assert_no_new_mounts(&before, "load");
    assert_no_cgroup_of(&pids, "load");
    drop(gate);
    assert_host_healthy("load");
}

/// The children of `pid` (its main thread's).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A fixed-seed linear congruential generator (Knuth's MMIX constants).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn sigkill_at_random_moments_leaves_nothing() {
    let before = mount_lines();
    let begin = Instant::now();
    let mut lcg = Lcg(0x00c0_ffee_d15e_a5e5);
    let mut pids = Vec::new();
    let mut statuses = [0usize; 3]; // killed, exited by itself, other
    let mut stages = [0usize; 3];
    for i in 0..200 {
        let who = if i % 2 == 0 {
            Launcher::Root
        } else {
            Launcher::Unprivileged
        };
        let delay = Duration::from_millis(lcg.next() % 31);
        let mut c = airlock(
            who,
            &["run", "--json", "--", "sh", "-c", "sleep 44.4 & sleep 44.4"],
        );
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        pids.push(child.id());
        std::thread::sleep(delay);
        // How far the run got (for the figures): no sandbox yet, being built, task started.
        let inits = children(child.id());
        stages[match inits.first() {
            None => 0,
            Some(init) if children(*init).is_empty() => 1,
            Some(_) => 2,
        }] += 1;
        let _ = child.kill();
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "run {i}: SIGKILLed launcher not reaped"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        use std::os::unix::process::ExitStatusExt;
        match (status.signal(), status.code()) {
            (Some(9), _) => statuses[0] += 1,
            (None, Some(_)) => statuses[1] += 1,
            _ => statuses[2] += 1,
        }
        // (Measured 30 s with two busy loops beside it: bounded, generously, so that a hang
        // fails rather than holds the suite.)
        assert!(
            begin.elapsed() < Duration::from_secs(150),
            "200 kills are taking too long: {i} done in {:?}",
            begin.elapsed()
        );
    }
    let killing = begin.elapsed();

    // Nothing of any run survives its launcher (the init has PR_SET_PDEATHSIG; its death
    // takes the pid namespace).
    let settle = Instant::now();
    assert_none_left("44.4", Duration::from_secs(5), "after 200 SIGKILLs");
    assert_no_orphaned_init(Duration::from_secs(5), "after 200 SIGKILLs");
    let settled = settle.elapsed();
    assert_no_new_mounts(&before, "after 200 SIGKILLs");

    // Stale cgroups may remain right after a SIGKILL; the next root run removes those whose
    // launcher is dead (in the parent it uses, which is ours).
    let stale: Vec<PathBuf> = airlock_cgroups()
        .into_iter()
        .filter(|p| cgroup_pid(p).is_some_and(|pid| pids.contains(&pid)))
        .collect();
    let r = run(Launcher::Root, &[], &["true"], SECS_30);
    assert_eq!(r.code(), Some(0), "{}", r.show());
    let ours_left: Vec<PathBuf> = airlock_cgroups()
        .into_iter()
        .filter(|p| cgroup_pid(p).is_some_and(|pid| pids.contains(&pid)))
        .collect();
    assert!(
        ours_left.is_empty(),
        "cgroups of SIGKILLed launchers still there after a normal run: {ours_left:?}"
    );
    // Any dead launcher's cgroup in the parents our runs use is gone too. (Elsewhere on the
    // machine, other sessions' cgroups are their next run's business: listed, not failed.)
    let own_parents: Vec<PathBuf> = cgroup_search_roots()
        .into_iter()
        .filter(|(_, d)| *d == 1)
        .map(|(p, _)| p)
        .collect();
    let dead: Vec<PathBuf> = airlock_cgroups()
        .into_iter()
        .filter(|p| cgroup_pid(p).is_some_and(|pid| !alive(pid)))
        .collect();
    let dead_here: Vec<&PathBuf> = dead
        .iter()
        .filter(|p| own_parents.iter().any(|o| p.parent() == Some(o.as_path())))
        .collect();
    assert!(
        dead_here.is_empty(),
        "dead launchers' cgroups in our parents: {dead_here:?}"
    );
    let total = begin.elapsed();
    eprintln!(
        "200 SIGKILLs at 0..30 ms: {killing:?} (killed {}, exited first {}, other {}; at the \
         kill: no sandbox yet {}, sandbox being built {}, task started {}); settled in {settled:?}; {} stale cgroup dirs of ours before the cleanup run, 0 after; \
         elsewhere, dead launchers' cgroups not ours: {:?}; total {total:?}",
        statuses[0],
        statuses[1],
        statuses[2],
        stages[0],
        stages[1],
        stages[2],
        stale.len(),
        dead.iter()
            .filter(|p| !own_parents.iter().any(|o| p.parent() == Some(o.as_path())))
            .collect::<Vec<_>>()
    );
    assert!(total < Duration::from_secs(180), "took {total:?}");
    assert_host_healthy("after 200 SIGKILLs");
}

/// The sandbox's init can lower an rlimit but never raise it above the caller's own hard
/// limit: a limit above the caller's applies at the caller's (the report says so) instead of
/// failing the run at step 12.
#[test]
fn the_callers_lower_hard_rlimits_cap_the_runs() {
    let bin = binary().display().to_string();
    for who in BOTH {
        // Control: the defaults apply when the caller's limits allow them.
        let run = format!("{bin} run --json -- sh -c 'ulimit -Hn; ulimit -Ht'");
        let out = host_sh(who, &run);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rep["stdout"], json!("8192\n1802\n"), "{who:?}: {rep}");
        assert_eq!(rep["limits"]["nofile"]["applied"], json!(8192), "{who:?}");

        let out = host_sh(
            who,
            &format!("prlimit --nofile=1024:4096 --cpu=100:100 {run}"),
        );
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rep["stdout"], json!("4096\n100\n"), "{who:?}: {rep}");
        let limits = &rep["limits"];
        assert_eq!(limits["nofile"]["requested"], json!(8192), "{who:?}: {rep}");
        assert_eq!(limits["nofile"]["applied"], json!(4096), "{who:?}: {rep}");
        assert_eq!(
            limits["cpu_time_ms"]["requested"],
            json!(1_800_000),
            "{who:?}"
        );
        assert_eq!(limits["cpu_time_ms"]["applied"], json!(100_000), "{who:?}");
        // The scratch tmpfs's size is whole pages, rounded up (stat -f inside agrees), and a
        // cgroup v1 memory limit rounded down; an rlimit is taken as it is. The report said
        // the request for both until a review.
        let run = format!(
            "{bin} run --json --scratch-size 5000000 --memory 20000001 -- \
             stat -f -c %b*%S /work"
        );
        let rep: Value = serde_json::from_slice(&host_sh(who, &run).stdout).unwrap();
        let memory = match who {
            Launcher::Root => 19_996_672,
            Launcher::Unprivileged => 20_000_001,
        };
        assert_eq!(
            (
                &rep["stdout"],
                &rep["limits"]["scratch_size"]["applied"],
                &rep["limits"]["memory"]["applied"]
            ),
            (&json!("1221*4096\n"), &json!(5_001_216), &json!(memory)),
            "{who:?}: {rep}"
        );
        // A cgroup keeps at most PAGE_COUNTER_MAX pages (LONG_MAX / 4096): a request of 2^64-1
        // bytes applies as that under v1; RLIMIT_DATA takes it as it is (unlimited). The
        // report said 2^64-1 rounded down to pages until a review.
        let run = format!("{bin} run --json --memory 18446744073709551615 -- true");
        let rep: Value = serde_json::from_slice(&host_sh(who, &run).stdout).unwrap();
        let memory = match who {
            Launcher::Root => 9_223_372_036_854_771_712_u64,
            Launcher::Unprivileged => u64::MAX,
        };
        assert_eq!(
            rep["limits"]["memory"]["applied"],
            json!(memory),
            "{who:?}: {rep}"
        );
        // RLIMIT_CPU counts whole seconds: a request applies rounded down, and the report says
        // what applies (it said the request, 1999 and 5500, until a review).
        for (limit, asked, applied, seen) in [
            ("", "1999ms", 1000, "1\n"),
            ("prlimit --cpu=5:5 ", "5500ms", 5000, "5\n"),
        ] {
            let run = format!("{limit}{bin} run --json --cpu-time {asked} -- sh -c 'ulimit -St'");
            let out = host_sh(who, &run);
            let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                (&rep["stdout"], &rep["limits"]["cpu_time_ms"]["applied"]),
                (&json!(seen), &json!(applied)),
                "{who:?} {run}: {rep}"
            );
        }
    }
}

/// A caller's low soft limits do not stop the run: the sandbox's own files (`/etc/passwd`, the
/// inputs) are written under the caller's hard file size limit, the launcher and the init hold
/// one descriptor per `--input` under its hard limit of open files, and the task gets its
/// `--file-size` and `--nofile` as ever. airlock had stopped at step 7 under a soft file size
/// of 0 (`write("/newroot/etc/passwd"): EFBIG`, exit 125), and at the 1021st input under the
/// soft 1024 open files most sessions have (EMFILE, exit 2). Controls: the soft limits are in
/// force for a host process, and a lower hard limit still caps the task's.
#[test]
fn a_callers_low_soft_limits_do_not_stop_the_run() {
    let bin = binary().display().to_string();
    let dir = tmpdir();
    let input = write_file(&dir.path().join("in"), &[b'x'; 3000], 0o644);
    let many: String = (0..1100)
        .map(|i| {
            let f = write_file(&dir.path().join(format!("f{i}")), b"x", 0o644);
            format!(" --input f{i}={}", f.display())
        })
        .collect();
    for who in BOTH {
        let out = host_sh(
            who,
            "f=$(mktemp); prlimit --fsize=0:unlimited sh -c \"printf x > $f\"; echo $?; rm $f",
        );
        let sigxfsz = format!("{}\n", 128 + libc::SIGXFSZ);
        assert_eq!(
            stdout(&out),
            sigxfsz,
            "{who:?}: the host writer's soft limit"
        );
        let out = host_sh(who, "prlimit --nofile=1024:4096 sh -c 'ulimit -Sn'");
        assert_eq!(stdout(&out), "1024\n", "{who:?}: the host's soft limit");

        let run = |limit: &str, inputs: &str| {
            let out = host_sh(
                who,
                &format!(
                    "prlimit {limit} {bin} run --json --input in={}{inputs} \
                     -- sh -c 'ulimit -f; ulimit -n; wc -c < in; ls | wc -l'",
                    input.display()
                ),
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{who:?} {limit}: {}",
                stdout(&out)
            );
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        };
        let rep = run("--fsize=0:unlimited", "");
        assert_eq!(
            rep["stdout"],
            json!("8388608\n8192\n3000\n1\n"),
            "{who:?}: {rep}"
        );
        let rep = run("--nofile=1024:16384", &many);
        assert_eq!(
            rep["stdout"],
            json!("8388608\n8192\n3000\n1101\n"),
            "{who:?}: {rep}"
        );
        let rep = run("--fsize=1:8192 --nofile=64:4096", "");
        assert_eq!(
            rep["stdout"],
            json!("16\n4096\n3000\n1\n"),
            "{who:?}: {rep}"
        );
        assert_eq!(
            rep["limits"]["file_size"]["applied"],
            json!(8192),
            "{who:?}"
        );
        assert_eq!(rep["limits"]["nofile"]["applied"], json!(4096), "{who:?}");
    }
}

/// airlock SIGKILLed before the sandbox's init watches it (PR_SET_PDEATHSIG, step 3) leaves no
/// task running: the init finds the launcher gone and ends. It had looked for the launcher's
/// end of the channel closed, but the network namespace's helper shares the launcher's
/// descriptors, so while the helper ran the dead launcher went unseen, the helper handed over
/// the namespace, and the task started with no one to end it (the boundary review: 12 of
/// 2000 runs killed 0-6 ms in, as uid 65534). strace widens the window deterministically: the
/// init's first `close_range` (step 3) takes 0.6 s and each process's first `setns` 2 s, the
/// helper's among them; airlock is killed 0.3 s in. Control: the same run, not killed, starts
/// the task, which writes its marker through a bind. As root the cgroup v1's handover from
/// the launcher also stops such an init (step 12).
#[test]
fn a_launcher_killed_before_the_init_watches_it_leaves_no_task_running() {
    let m = mark("a_launcher_killed_before_the_init_watches_it");
    for who in BOTH {
        let dir = writable_tmpdir();
        let started = dir.path().join("started");
        let bind = format!("{}:/mnt/m", dir.path().display());
        let traced = || {
            let mut c = Command::new("strace");
            c.args([
                "-f",
                "-qq",
                "-o",
                "/dev/null",
                "-e",
                "trace=close_range,setns",
            ])
            .args(["-e", "inject=close_range:delay_enter=600000:when=1"])
            .args(["-e", "inject=setns:delay_enter=2000000:when=1"])
            .args(as_user(who))
            .arg(binary())
            .args(["run", "--bind", &bind, "--", "sh", "-c"])
            .arg(format!(": {m}; touch /mnt/m/started"));
            spawn(c, format!("{who:?}: strace airlock run"))
        };
        let control = traced().finish(SECS_30);
        let ctx = format!("{who:?}");
        control_left_marker(control.code(), &control.show(), &started, &ctx);

        let killed = traced();
        std::thread::sleep(Duration::from_millis(300));
        let strace = killed.pid();
        let children = std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children"));
        let launcher: i32 = children.unwrap().trim().parse().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(launcher),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // strace follows every process of the run, and ends once they have all ended.
        let r = killed.finish(SECS_30);
        assert!(!started.exists(), "{who:?}: the task ran: {}", r.show());
        // The task would have started 4-5 s in (the control's time).
        let waited = Duration::from_secs(8).saturating_sub(r.took);
        std::thread::sleep(waited);
        assert!(
            !started.exists(),
            "{who:?}: the task ran after strace ended"
        );
    }
}
