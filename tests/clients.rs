//! Real clients of bubblewrap against airlock's drop-in `bwrap`, as a user would run them: the
//! bwrap from `airlock install-bwrap DIR` first on PATH, as root and as uid 65534.
//!
//! - Anthropic's sandbox runtime: `srt --settings FILE -c CMD` (bwrap from PATH, socat relays
//!   for its proxy, its own `apply-seccomp` helper inside; `--args FD` once the command line
//!   passes about 124 KiB).
//! - OpenAI's Codex CLI: `codex sandbox -c 'sandbox_mode="workspace-write"' -- CMD` (the first
//!   bwrap on PATH, canonicalized; one under /tmp, $TMPDIR or the workspace is skipped in favour
//!   of the bwrap bundled in its package, so the drop-in goes under the clients' prefix).
//! - Debian's ansible-runner: `ansible-runner run DIR -p PLAYBOOK --process-isolation
//!   --process-isolation-executable bwrap` (bwrap from PATH, on a pty; a line with no `--`,
//!   /usr, /etc, /opt and /bin read-only, an empty /tmp, the private data directory writable,
//!   hidden paths covered by what it makes in /tmp). As Debian ships it (2.3.1) nothing runs in
//!   it on Debian 12; the runs that must succeed take upstream's one-line fix in a private
//!   mount namespace (see `ansible_with_lib_fix`).
//!
//! The clients are installed by scripts/clients.sh into /opt/airlock-clients (or
//! AIRLOCK_CLIENTS_PREFIX); a test whose client cannot be installed says so and passes, unless
//! AIRLOCK_CLIENTS_REQUIRED is set. Every run is traced (`strace -ff -e trace=execve`), and each
//! test asserts that airlock's bwrap is the only bwrap that ran.
//!
//! The bwrap command lines the clients passed are kept in tests/fixtures/clients/ (captured by
//! `AIRLOCK_CLIENTS_CAPTURE=1 cargo test --release --test clients`, with the run's own paths and
//! tokens replaced by `@NAME@` placeholders). The replay tests run each of them, with a probe
//! as the command, through airlock's bwrap and through /usr/bin/bwrap, and compare what the
//! probe sees; they need no client (REPLAY_SHOW=1 prints what the probe saw under airlock).

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

use common::{Launcher, assert_none_left, remove_left_by_dead_processes, stderr, stdout};

const DEFAULT_PREFIX: &str = "/opt/airlock-clients";
/// Seconds one client run may take (killed by `timeout` after that).
const CLIENT_DEADLINE: &str = "120";
/// Seconds one replayed bwrap command line may take.
const REPLAY_DEADLINE: &str = "60";
const NOBODY: u32 = 65534;
const SYSTEM_BWRAP: &str = "/usr/bin/bwrap";

// ---------------------------------------------------------------------------------------------
// Setup: the clients, airlock's bwrap, a sandbox directory per run
// ---------------------------------------------------------------------------------------------

fn prefix() -> PathBuf {
    std::env::var_os("AIRLOCK_CLIENTS_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PREFIX))
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures_dir() -> PathBuf {
    repo().join("tests/fixtures/clients")
}

fn capturing() -> bool {
    std::env::var_os("AIRLOCK_CLIENTS_CAPTURE").is_some()
}

fn clients_check() -> bool {
    Command::new("bash")
        .arg(repo().join("scripts/clients.sh"))
        .arg("--check")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The clients' prefix once scripts/clients.sh has installed them (run at most once, bounded).
fn clients() -> Result<PathBuf, String> {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            assert!(
                nix::unistd::geteuid().is_root(),
                "the client tests run the clients as root and as uid 65534: run them as root"
            );
            if !clients_check() {
                let out = Command::new("timeout")
                    .args(["-k", "10", "300", "bash"])
                    .arg(repo().join("scripts/clients.sh"))
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("scripts/clients.sh: {e}"))?;
                if !out.status.success() || !clients_check() {
                    return Err(format!(
                        "scripts/clients.sh could not install the clients ({}): {}",
                        out.status,
                        stderr(&out).trim()
                    ));
                }
            }
            Ok(prefix())
        })
        .clone()
}

/// The clients' prefix, or None (with a note) when they cannot be had here.
fn need_clients(test: &str) -> Option<PathBuf> {
    match clients() {
        Ok(p) => Some(p),
        Err(e) if std::env::var_os("AIRLOCK_CLIENTS_REQUIRED").is_none() => {
            eprintln!("SKIP {test}: {e}");
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

fn chown_nobody(p: &Path) {
    nix::unistd::chown(
        p,
        Some(nix::unistd::Uid::from_raw(NOBODY)),
        Some(nix::unistd::Gid::from_raw(NOBODY)),
    )
    .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
}

/// A 0755 directory under the clients' prefix for this test process, removing those of test
/// processes that are gone. Not under /tmp: Codex skips a bwrap there.
fn run_dir(name: &str) -> PathBuf {
    let run = prefix().join("run");
    std::fs::create_dir_all(&run).unwrap();
    chmod(&run, 0o755);
    if let Ok(entries) = std::fs::read_dir(&run) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let pid = n.rsplit('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = run.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    dir
}

/// The directory holding airlock's `bwrap`, put there by `airlock install-bwrap DIR`.
fn airlock_bwrap_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = run_dir("airlock-bwrap");
        let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("install-bwrap")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "install-bwrap: {}", stderr(&out));
        let bwrap = dir.join("bwrap");
        chmod(&bwrap, 0o755);
        let version = Command::new(&bwrap).arg("--version").output().unwrap();
        assert!(
            stdout(&version).contains("airlock"),
            "{} --version: {:?}",
            bwrap.display(),
            stdout(&version)
        );
        dir
    })
}

/// A directory whose `bwrap` is Debian's (for capturing what a client passes to bubblewrap).
fn system_bwrap_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = run_dir("system-bwrap");
        std::os::unix::fs::symlink(SYSTEM_BWRAP, dir.join("bwrap")).unwrap();
        dir
    })
}

/// One run's directory: `ws` (the workspace and working directory), `home`, `outside` (world
/// writable on the host, outside the workspace). Under /var/tmp: Codex makes /tmp writable.
/// `opt`: a directory under /opt, for ansible-runner's runs (its sandbox binds /opt).
struct Sandbox {
    dir: tempfile::TempDir,
    opt: Option<tempfile::TempDir>,
}

impl Sandbox {
    fn new(who: Launcher) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("airlock-clients-")
            .tempdir_in("/var/tmp")
            .unwrap();
        chmod(dir.path(), 0o755);
        let sb = Sandbox { dir, opt: None };
        for d in ["ws", "home", "outside"] {
            std::fs::create_dir(sb.path().join(d)).unwrap();
            if who == Launcher::Unprivileged {
                chown_nobody(&sb.path().join(d));
            }
        }
        chmod(&sb.outside(), 0o777);
        sb
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn ws(&self) -> PathBuf {
        self.path().join("ws")
    }
    fn home(&self) -> PathBuf {
        self.path().join("home")
    }
    fn outside(&self) -> PathBuf {
        self.path().join("outside")
    }
    fn write(&self, name: &str, text: &str, mode: u32) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, text).unwrap();
        chmod(&p, mode);
        p
    }
}

fn who_name(who: Launcher) -> &'static str {
    match who {
        Launcher::Root => "root",
        Launcher::Unprivileged => "uid 65534",
    }
}

fn who_tag(who: Launcher) -> &'static str {
    match who {
        Launcher::Root => "root",
        Launcher::Unprivileged => "65534",
    }
}

// ---------------------------------------------------------------------------------------------
// strace: which programs ran, with which argv, and what bwrap read from its --args descriptor
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Exec {
    pid: u32,
    path: String,
    argv: Vec<String>,
    /// `--args FD`: the descriptor and the NUL-separated words read from it.
    args_fd: Option<(i32, Vec<String>)>,
}

/// The `"\xHH..."` strings of a line printed by `strace -xx`, in order.
fn hex_strings(s: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut v = Vec::new();
        while i < b.len() && b[i] != b'"' {
            if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 3 < b.len() {
                let h = std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("00");
                v.push(u8::from_str_radix(h, 16).unwrap_or(0));
                i += 4;
            } else {
                v.push(b[i]);
                i += 1;
            }
        }
        i += 1;
        out.push(v);
    }
    out
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// `name(args) = ret`, with strace's unfinished/resumed halves joined by the caller.
fn syscall(line: &str) -> Option<(&str, &str, &str)> {
    let open = line.find('(')?;
    let name = &line[..open];
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    // strace pads short calls: `close(3)                = 0`.
    let (args, ret) = line[open + 1..].rsplit_once(" = ")?;
    let args = args.trim_end().strip_suffix(')')?;
    Some((name, args, ret.trim()))
}

fn first_int(s: &str) -> Option<i32> {
    s.split([',', ')']).next()?.trim().parse().ok()
}

fn ret_int(ret: &str) -> Option<i64> {
    ret.split_whitespace().next()?.parse().ok()
}

/// Parse one `strace -ff -xx -o PREFIX` file.
fn parse_trace(pid: u32, text_: &str, execs: &mut Vec<Exec>) {
    let mut pending: Option<String> = None;
    let mut current: Option<usize> = None;
    let mut fds: HashSet<i32> = HashSet::new();
    let mut data: Vec<u8> = Vec::new();
    let finish = |current: Option<usize>, data: &mut Vec<u8>, execs: &mut Vec<Exec>| {
        if let Some(i) = current
            && let Some((_, words)) = execs[i].args_fd.as_mut()
        {
            *words = data
                .split(|&b| b == 0)
                .filter(|w| !w.is_empty())
                .map(text)
                .collect();
        }
        data.clear();
    };
    for raw in text_.lines() {
        let line: String = if let Some(head) = raw.strip_suffix(" <unfinished ...>") {
            pending = Some(head.to_string());
            continue;
        } else if raw.starts_with("<... ") {
            match (pending.take(), raw.split_once("resumed>")) {
                (Some(head), Some((_, tail))) => format!("{head}{tail}"),
                _ => continue,
            }
        } else {
            raw.to_string()
        };
        let Some((name, args, ret)) = syscall(&line) else {
            continue;
        };
        let ok = ret_int(ret).is_some_and(|r| r >= 0);
        match name {
            "execve" if ok => {
                finish(current, &mut data, execs);
                let (head, rest) = match args.find(", [") {
                    Some(i) => (&args[..i], &args[i + 2..]),
                    None => continue,
                };
                let path = hex_strings(head)
                    .first()
                    .map(|p| text(p))
                    .unwrap_or_default();
                let list = rest.split(']').next().unwrap_or("");
                let argv: Vec<String> = hex_strings(list).iter().map(|a| text(a)).collect();
                fds.clear();
                let args_fd = argv
                    .iter()
                    .position(|a| a == "--args")
                    .and_then(|i| argv.get(i + 1))
                    .and_then(|fd| fd.parse::<i32>().ok());
                if let Some(fd) = args_fd {
                    fds.insert(fd);
                }
                execs.push(Exec {
                    pid,
                    path,
                    argv,
                    args_fd: args_fd.map(|fd| (fd, Vec::new())),
                });
                current = Some(execs.len() - 1);
            }
            "fcntl" | "dup" | "dup2" | "dup3" if ok => {
                let from = first_int(args);
                let to = ret_int(ret).map(|r| r as i32);
                let dups = name != "fcntl" || args.contains("F_DUPFD");
                if let (true, Some(f), Some(t)) = (dups, from, to)
                    && fds.contains(&f)
                {
                    fds.insert(t);
                }
            }
            "read" if ok => {
                if first_int(args).is_some_and(|fd| fds.contains(&fd))
                    && let Some(buf) = hex_strings(args).into_iter().next()
                {
                    data.extend_from_slice(&buf);
                }
            }
            "close" => {
                if let Some(fd) = first_int(args) {
                    fds.remove(&fd);
                }
            }
            _ => {}
        }
    }
    finish(current, &mut data, execs);
}

/// Every successful execve under `dir` (files `t.PID`), by pid.
fn read_traces(dir: &Path) -> Vec<Exec> {
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let pid = n.strip_prefix("t.")?.parse().ok()?;
            Some((pid, e.path()))
        })
        .collect();
    files.sort();
    let mut execs = Vec::new();
    for (pid, f) in files {
        let t = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        parse_trace(pid, &t, &mut execs);
    }
    execs
}

// ---------------------------------------------------------------------------------------------
// Running a client
// ---------------------------------------------------------------------------------------------

struct Traced {
    out: Output,
    execs: Vec<Exec>,
}

impl Traced {
    /// The execs of a program named bwrap (by path or argv[0]) or of a bundled bwrap.
    fn bwraps(&self) -> Vec<&Exec> {
        self.execs
            .iter()
            .filter(|e| {
                let name = |p: &str| Path::new(p).file_name().is_some_and(|n| n == "bwrap");
                name(&e.path)
                    || e.argv.first().is_some_and(|a| name(a))
                    || e.path.contains("codex-resources")
            })
            .collect()
    }

    /// The bwrap execs that started a sandbox (not a `--help`/`--version` probe).
    fn sandboxes(&self) -> Vec<&Exec> {
        self.bwraps()
            .into_iter()
            .filter(|e| command_start(&e.argv).is_some())
            .collect()
    }

    fn show(&self) -> String {
        let mut s = format!(
            "status {}\nstdout:\n{}\nstderr:\n{}\nbwrap execs:\n",
            self.out.status,
            stdout(&self.out),
            stderr(&self.out)
        );
        for e in self.bwraps() {
            s.push_str(&format!(
                "  [{}] {} {:?}\n",
                e.pid,
                e.path,
                abbreviate(&e.argv)
            ));
        }
        s
    }
}

fn abbreviate(argv: &[String]) -> Vec<String> {
    argv.iter()
        .map(|a| {
            if a.chars().count() > 120 {
                format!("{}...", a.chars().take(120).collect::<String>())
            } else {
                a.clone()
            }
        })
        .collect()
}

/// How many values a bwrap option takes (bubblewrap 0.11's vocabulary).
fn option_values(opt: &str) -> usize {
    match opt {
        "--help"
        | "--version"
        | "--level-prefix"
        | "--unshare-all"
        | "--share-net"
        | "--unshare-user"
        | "--unshare-user-try"
        | "--unshare-ipc"
        | "--unshare-pid"
        | "--unshare-net"
        | "--unshare-uts"
        | "--unshare-cgroup"
        | "--unshare-cgroup-try"
        | "--disable-userns"
        | "--assert-userns-disabled"
        | "--clearenv"
        | "--new-session"
        | "--die-with-parent"
        | "--as-pid-1" => 0,
        "--setenv" | "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--ro-bind"
        | "--ro-bind-try" | "--bind-fd" | "--ro-bind-fd" | "--file" | "--bind-data"
        | "--ro-bind-data" | "--symlink" | "--chmod" => 2,
        "--overlay" => 3,
        _ => 1,
    }
}

/// Where the command starts in a bwrap argv (argv[0] is the program): after `--`, or at the
/// first word that is not an option or an option's value, as bubblewrap reads it (ansible-runner
/// passes no `--`). None for a line without a command (`bwrap --version`).
fn command_start(argv: &[String]) -> Option<usize> {
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].as_str();
        if a == "--" {
            return (i + 1 < argv.len()).then_some(i + 1);
        }
        if !a.starts_with("--") {
            return Some(i);
        }
        i += 1 + option_values(a);
    }
    None
}

/// Run `client ARGS...` as `who` under strace, from the workspace, with `bwrap_dir` first on
/// PATH and a clean environment. `reads` also traces what bwrap reads from `--args FD`.
fn run_client(
    who: Launcher,
    sb: &Sandbox,
    bwrap_dir: &Path,
    cmd: &[String],
    reads: bool,
) -> Traced {
    run_client_through(who, sb, bwrap_dir, cmd, reads, &[])
}

/// [`run_client`], started through `through` (a command run as root that ends by running its
/// arguments: strace, then the client).
fn run_client_through(
    who: Launcher,
    sb: &Sandbox,
    bwrap_dir: &Path,
    cmd: &[String],
    reads: bool,
    through: &[String],
) -> Traced {
    let prefix = prefix();
    remove_dead_srt_sockets();
    let trace = sb.path().join(format!("trace-{}", rand_tag()));
    std::fs::create_dir(&trace).unwrap();
    chmod(&trace, 0o700);
    let events = if reads {
        "trace=execve,read,fcntl,dup,dup2,dup3,close"
    } else {
        "trace=execve"
    };
    let mut c = Command::new("timeout");
    c.args(["-k", "5", CLIENT_DEADLINE])
        .args(through)
        .args(["strace", "-ff", "-xx", "-qq"])
        .args(["-s", "1000000", "-e", events, "-e", "signal=none", "-o"])
        .arg(trace.join("t"));
    if who == Launcher::Unprivileged {
        c.args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]);
    }
    // PYTHONDONTWRITEBYTECODE: a Python client (ansible-runner) run as root would otherwise
    // write the bytecode of a module it found changed into the host's /usr.
    c.args(["env", "-i", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"])
        .arg(format!("HOME={}", sb.home().display()))
        .arg(format!(
            "PATH={}:{}/bin:/usr/local/bin:/usr/bin:/bin",
            bwrap_dir.display(),
            prefix.display()
        ))
        .args(cmd)
        .current_dir(sb.ws())
        .stdin(Stdio::null());
    let out = c.output().expect("timeout/strace");
    let execs = read_traces(&trace);
    let _ = std::fs::remove_dir_all(&trace);
    Traced { out, execs }
}

/// srt leaves its socket `$TMPDIR/srt-mux-PID-N.sock` behind, and a later srt that gets the
/// same pid fails with EADDRINUSE. Remove those whose process is gone (a live run keeps its).
fn remove_dead_srt_sockets() {
    remove_left_by_dead_processes(Path::new("/tmp"), "srt-mux-");
}

fn rand_tag() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Assert that every bwrap that ran is airlock's, and that one started a sandbox.
fn assert_airlock_ran(t: &Traced) {
    let ours = std::fs::canonicalize(airlock_bwrap_dir().join("bwrap")).unwrap();
    let bwraps = t.bwraps();
    assert!(!bwraps.is_empty(), "no bwrap ran:\n{}", t.show());
    for e in &bwraps {
        assert_eq!(
            Path::new(&e.path),
            ours,
            "a bwrap other than airlock's ran:\n{}",
            t.show()
        );
    }
    assert!(
        !t.sandboxes().is_empty(),
        "airlock's bwrap only answered probes, no sandbox:\n{}",
        t.show()
    );
}

/// The probe the clients run inside: `probe:KEY=VALUE` lines.
fn probe_script(sb: &Sandbox, port: u16) -> PathBuf {
    let outside = sb.outside().display().to_string();
    let text = format!(
        r#"#!/bin/bash
echo "probe:hi"
echo "probe:uid=$(id -u)"
if touch ./probe-in-workspace 2>/dev/null; then echo "probe:workspace-write=ok"; else echo "probe:workspace-write=denied"; fi
if (echo x > '{outside}/probe-outside') 2>/dev/null; then echo "probe:outside-write=ok"; else echo "probe:outside-write=denied"; fi
if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo "probe:loopback-tcp=connected"; else echo "probe:loopback-tcp=failed"; fi
echo "probe:netdevs=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')"
if [ -n "$HTTP_PROXY" ] && command -v curl >/dev/null; then
  # The client starts its proxy bridge in the background just before this script: until it
  # listens, curl gets no answer (000). Retry for up to 15 s.
  code=000; start=$SECONDS
  while [ "$code" = 000 ] && [ $((SECONDS - start)) -lt 15 ]; do
    code=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 http://example.com/)
    [ "$code" = 000 ] && sleep 0.1
  done
  echo "probe:proxy-denied-domain=$code"
fi
n=0
for p in /proc/[0-9]*; do case "$(tr '\0' ' ' 2>/dev/null < $p/cmdline)" in socat*) n=$((n+1));; esac; done
echo "probe:helpers-visible=$n"
"#
    );
    sb.write("probe.sh", &text, 0o755)
}

fn probe_values(out: &Output) -> BTreeMap<String, String> {
    stdout(out)
        .lines()
        .filter_map(|l| l.strip_prefix("probe:"))
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// The probe on the host, as `who`, from the workspace: the positive control.
fn host_probe(who: Launcher, sb: &Sandbox, probe: &Path) -> BTreeMap<String, String> {
    let mut c = match who {
        Launcher::Root => Command::new("bash"),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
            c
        }
    };
    let out = c
        .arg(probe)
        .current_dir(sb.ws())
        .env_remove("HTTP_PROXY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v = probe_values(&out);
    assert_eq!(v.get("workspace-write").map(String::as_str), Some("ok"));
    assert_eq!(v.get("outside-write").map(String::as_str), Some("ok"));
    assert_eq!(
        v.get("loopback-tcp").map(String::as_str),
        Some("connected"),
        "host control: {v:?}"
    );
    let _ = std::fs::remove_file(sb.ws().join("probe-in-workspace"));
    let _ = std::fs::remove_file(sb.outside().join("probe-outside"));
    v
}

fn expect(v: &BTreeMap<String, String>, key: &str, want: &str, t: &Traced) {
    assert_eq!(
        v.get(key).map(String::as_str),
        Some(want),
        "probe {key}:\n{}",
        t.show()
    );
}

fn srt_settings(sb: &Sandbox, deny_read: &[String]) -> PathBuf {
    let settings = json!({
        "network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": deny_read, "allowWrite": ["."], "denyWrite": []}
    });
    sb.write("srt-settings.json", &settings.to_string(), 0o644)
}

fn srt_cmd(prefix: &Path, settings: &Path, script: &str) -> Vec<String> {
    vec![
        prefix.join("bin/srt").display().to_string(),
        "--settings".into(),
        settings.display().to_string(),
        "-c".into(),
        script.into(),
    ]
}

fn codex_cmd(prefix: &Path, probe: &Path) -> Vec<String> {
    vec![
        prefix.join("bin/codex").display().to_string(),
        "sandbox".into(),
        "-c".into(),
        "sandbox_mode=\"workspace-write\"".into(),
        "--".into(),
        "/bin/bash".into(),
        probe.display().to_string(),
    ]
}

fn client_version(prefix: &Path, client: &str) -> String {
    let out = Command::new(prefix.join("bin").join(client))
        .arg("--version")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    let v = stdout(&out).trim().to_string();
    if v.starts_with(client) {
        v
    } else {
        format!("{client} {v}")
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures: the command lines the clients passed, with the run's own names replaced
// ---------------------------------------------------------------------------------------------

fn setenv_value<'a>(argv: &'a [String], name: &str) -> Option<&'a String> {
    argv.windows(3)
        .find(|w| w[0] == "--setenv" && w[1] == name)
        .map(|w| &w[2])
}

/// The run-specific strings in the command lines, longest first, and their placeholders.
fn learn_names(execs: &[&Exec], sb: &Sandbox) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = Vec::new();
    let mut add = |from: String, to: &str| {
        if !from.is_empty() && !names.iter().any(|(f, _)| *f == from) {
            names.push((from, to.to_string()));
        }
    };
    for e in execs {
        let all = e
            .argv
            .iter()
            .chain(e.args_fd.iter().flat_map(|(_, w)| w.iter()));
        for a in all {
            if a.starts_with("/tmp/claude-http-") && a.ends_with(".sock") {
                add(a.clone(), "@SRT_SOCKET@");
            }
            if a.starts_with("/tmp/claude-empty-") {
                add(a.clone(), "@SRT_EMPTY_DIR@");
            }
            // ansible-runner's per-run directory, holding what it binds over hidden paths.
            if let Some(rest) = a.strip_prefix("/tmp/ansible_runner_pi_") {
                let end = rest.find('/').unwrap_or(rest.len());
                add(
                    format!("/tmp/ansible_runner_pi_{}", &rest[..end]),
                    "@ANSIBLE_PI_DIR@",
                );
            }
            if let Some(i) = a.find("/codex-arg0") {
                let end = a[i + 1..].find('/').map_or(a.len(), |j| i + 1 + j);
                let start = a[..i].rfind(|c: char| c.is_whitespace() || c == '=' || c == ':');
                add(
                    a[start.map_or(0, |s| s + 1)..end].to_string(),
                    "@CODEX_ARG0_DIR@",
                );
            }
        }
        if let Some(pw) = setenv_value(&e.argv, "CLOUDSDK_PROXY_PASSWORD") {
            add(pw.clone(), "@SRT_PROXY_TOKEN@");
        }
        if let Some(user) = setenv_value(&e.argv, "CLOUDSDK_PROXY_USERNAME") {
            add(user.replace('=', "%3D"), "@SRT_PROXY_USER@");
            add(user.clone(), "@SRT_PROXY_USER@");
        }
    }
    if let Some(opt) = &sb.opt {
        add(opt.path().display().to_string(), "@ANSIBLE_OPT_DIR@");
    }
    add(sb.path().display().to_string(), "@BASE@");
    names.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
    names
}

fn normalize(s: &str, names: &[(String, String)]) -> String {
    let mut s = s.to_string();
    for (from, to) in names {
        s = s.replace(from.as_str(), to);
    }
    s
}

/// Write the fixture for one traced run: every bwrap exec, normalized.
fn save_fixture(
    name: &str,
    t: &Traced,
    sb: &Sandbox,
    client: &str,
    command: &[String],
    who: Launcher,
    bwrap: &str,
) {
    let execs = t.bwraps();
    let names = learn_names(&execs, sb);
    // Random proxy ports srt passes in the environment: placeholders by position.
    let mut out_execs = Vec::new();
    for e in &execs {
        let mut argv: Vec<String> = e.argv.iter().map(|a| normalize(a, &names)).collect();
        // Codex names the bwrap by its path when it asks `--help`: this run's directory.
        if argv.first().is_some_and(|a| *a == e.path) {
            argv[0] = "@BWRAP@".into();
        }
        for w in 0..argv.len().saturating_sub(2) {
            if argv[w] == "--setenv" && argv[w + 1].starts_with("CLAUDE_CODE_HOST_") {
                argv[w + 2] = "@SRT_HOST_PORT@".into();
            }
        }
        let mut entry = json!({ "argv": argv });
        if let Some((fd, words)) = &e.args_fd {
            let words: Vec<String> = words.iter().map(|a| normalize(a, &names)).collect();
            entry["args_fd"] = json!(fd);
            // One line: srt's --args files hold thousands of words.
            entry["args_fd_words"] = json!(serde_json::to_string(&words).unwrap());
        }
        out_execs.push(entry);
    }
    let command: Vec<String> = command.iter().map(|a| normalize(a, &names)).collect();
    let used = serde_json::to_string(&out_execs).unwrap() + &command.join(" ");
    let placeholders: BTreeMap<&str, &str> = [
        ("@BWRAP@", "the bwrap the client found on PATH, named by its path (argv[0])"),
        ("@BASE@", "the run's directory: @BASE@/ws is the workspace and working directory, @BASE@/home is HOME"),
        ("@SRT_SOCKET@", "srt's HTTP/SOCKS bridge socket (/tmp/claude-http-HEX.sock)"),
        ("@SRT_EMPTY_DIR@", "srt's empty directory (/tmp/claude-empty-XXXXXX)"),
        ("@SRT_PROXY_USER@", "srt's proxy user name (srt.BASE64-OF-THE-COMMAND)"),
        ("@SRT_PROXY_TOKEN@", "srt's per-run proxy password"),
        ("@SRT_HOST_PORT@", "srt's host proxy port"),
        ("@CODEX_ARG0_DIR@", "Codex's per-run helper directory under $CODEX_HOME/tmp/arg0-linux"),
        ("@ANSIBLE_PI_DIR@", "ansible-runner's per-run directory (/tmp/ansible_runner_pi_XXXXXXXX), holding what it binds over the hidden paths"),
        ("@ANSIBLE_OPT_DIR@", "the run's directory under /opt (ansible-runner binds /opt read-only): public.txt, and secret-dir/key and secret-file, which the run hides"),
    ]
    .into_iter()
    .filter(|(k, _)| used.contains(k))
    .collect();
    let mut fixture = json!({
        "client": client,
        "command": command,
        "who": who_name(who),
        "bwrap": bwrap,
        "placeholders": placeholders,
        "execs": out_execs,
    });
    // A client run that failed (ansible-runner as Debian ships it): the replay expects its
    // bwrap line to fail too, alike under both.
    if !t.out.status.success() {
        fixture["client_status"] = json!(t.out.status.code());
    }
    let dir = fixtures_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.json"));
    // The args words were stored as one JSON string: unquote them into a one-line array.
    let mut text = serde_json::to_string_pretty(&fixture).unwrap();
    for e in fixture["execs"].as_array().unwrap() {
        if let Some(words) = e["args_fd_words"].as_str() {
            text = text.replace(&serde_json::to_string(words).unwrap(), words);
        }
    }
    std::fs::write(&file, text + "\n").unwrap();
    eprintln!("captured {}", file.display());
}

/// Run `cmd` once more with Debian's bwrap first on PATH and save that fixture too.
fn capture_with_system_bwrap(
    name: &str,
    who: Launcher,
    sb_for: impl Fn() -> (Sandbox, Vec<String>),
    client: &str,
    reads: bool,
) {
    if !Path::new(SYSTEM_BWRAP).exists() {
        return;
    }
    let (sb, cmd) = sb_for();
    let t = run_client(who, &sb, system_bwrap_dir(), &cmd, reads);
    assert!(
        t.out.status.success(),
        "{name} with {SYSTEM_BWRAP}:\n{}",
        t.show()
    );
    let version = Command::new(SYSTEM_BWRAP)
        .arg("--version")
        .output()
        .unwrap();
    let label = format!("{} ({SYSTEM_BWRAP})", stdout(&version).trim());
    save_fixture(name, &t, &sb, client, &cmd, who, &label);
}

// ---------------------------------------------------------------------------------------------
// srt (Anthropic's sandbox runtime)
// ---------------------------------------------------------------------------------------------

fn srt_workspace(who: Launcher) {
    let test = format!("srt as {}", who_name(who));
    let Some(prefix) = need_clients(&test) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let setup = || {
        let sb = Sandbox::new(who);
        let probe = probe_script(&sb, port);
        let settings = srt_settings(&sb, &[]);
        let cmd = srt_cmd(
            &prefix,
            &settings,
            &format!("/bin/bash {}", probe.display()),
        );
        (sb, cmd)
    };
    let (sb, cmd) = setup();
    host_probe(who, &sb, &sb.path().join("probe.sh"));
    let t = run_client(who, &sb, airlock_bwrap_dir(), &cmd, false);
    assert!(t.out.status.success(), "{test}:\n{}", t.show());
    assert_airlock_ran(&t);
    let v = probe_values(&t.out);
    expect(&v, "hi", "", &t);
    expect(
        &v,
        "uid",
        if who == Launcher::Root { "0" } else { "65534" },
        &t,
    );
    expect(&v, "workspace-write", "ok", &t);
    expect(&v, "outside-write", "denied", &t);
    expect(&v, "loopback-tcp", "failed", &t);
    expect(&v, "netdevs", "lo", &t);
    // The proxy chain works: socat inside on port 3128, the bound Unix socket, srt's proxy on
    // the host, which refuses a domain that is not allowed (no request leaves the machine).
    if Path::new("/usr/bin/curl").exists() {
        expect(&v, "proxy-denied-domain", "403", &t);
    }
    assert!(sb.ws().join("probe-in-workspace").exists());
    assert!(!sb.outside().join("probe-outside").exists());
    // srt's line: the whole filesystem read-only, the workspace writable, no network.
    let s = t.sandboxes()[0];
    for want in [
        &["--ro-bind", "/", "/"][..],
        &["--unshare-net"],
        &["--cap-drop", "ALL"],
    ] {
        assert!(
            s.argv.windows(want.len()).any(|w| w == want),
            "srt's line lacks {want:?}: {:?}",
            s.argv
        );
    }
    let ws = sb.ws().display().to_string();
    assert!(
        s.argv.windows(3).any(|w| w == ["--bind", &ws, &ws]),
        "srt's line does not bind the workspace: {:?}",
        s.argv
    );
    if capturing() {
        let name = format!("srt-workspace-{}", who_tag(who));
        let client = client_version(&prefix, "srt");
        save_fixture(
            &format!("{name}-airlock"),
            &t,
            &sb,
            &client,
            &cmd,
            who,
            "airlock",
        );
        capture_with_system_bwrap(&format!("{name}-bubblewrap"), who, setup, &client, false);
    }
}

#[test]
fn srt_runs_under_airlock_as_root() {
    srt_workspace(Launcher::Root);
}

#[test]
fn srt_runs_under_airlock_as_uid_65534() {
    srt_workspace(Launcher::Unprivileged);
}

/// A settings file whose denyRead list makes srt's bwrap line longer than one argument may be:
/// srt then moves the mounts into an unnamed file read through `--args 9`.
fn srt_args_fd(who: Launcher) {
    let test = format!("srt --args as {}", who_name(who));
    let Some(prefix) = need_clients(&test) else {
        return;
    };
    let setup = || {
        let sb = Sandbox::new(who);
        let secrets = sb.path().join("secrets");
        std::fs::create_dir(&secrets).unwrap();
        chmod(&secrets, 0o755);
        let deny: Vec<String> = (0..1200)
            .map(|i| {
                let p = secrets.join(format!("secret-{i:05}-{}", "padding-".repeat(8)));
                std::fs::write(&p, "TOPSECRET\n").unwrap();
                chmod(&p, 0o644);
                p.display().to_string()
            })
            .collect();
        let settings = srt_settings(&sb, &deny);
        let script = format!(
            "echo hi; cat {} {}; touch ./in-workspace && echo workspace-write-ok",
            deny[7], deny[1199]
        );
        (sb, srt_cmd(&prefix, &settings, &script), deny)
    };
    let (sb, cmd, deny) = setup();
    let t = run_client(who, &sb, airlock_bwrap_dir(), &cmd, true);
    assert!(t.out.status.success(), "{test}:\n{}", t.show());
    assert_airlock_ran(&t);
    let out = stdout(&t.out);
    assert!(out.contains("hi\n"), "{}", t.show());
    assert!(out.contains("workspace-write-ok"), "{}", t.show());
    assert!(
        !out.contains("TOPSECRET"),
        "a denied file was read:\n{}",
        t.show()
    );
    let s = t.sandboxes()[0];
    let (fd, words) = s
        .args_fd
        .as_ref()
        .unwrap_or_else(|| panic!("srt did not use --args:\n{}", t.show()));
    assert_eq!(*fd, 9);
    assert!(
        words.iter().any(|w| *w == deny[1199]) && words.len() > 3600,
        "--args 9 held {} words",
        words.len()
    );
    if capturing() {
        let name = format!("srt-argsfd-{}", who_tag(who));
        let client = client_version(&prefix, "srt");
        save_fixture(
            &format!("{name}-airlock"),
            &t,
            &sb,
            &client,
            &cmd,
            who,
            "airlock",
        );
    }
}

#[test]
fn srt_args_fd_under_airlock_as_root() {
    srt_args_fd(Launcher::Root);
}

#[test]
fn srt_args_fd_under_airlock_as_uid_65534() {
    srt_args_fd(Launcher::Unprivileged);
}

/// srt's `apply-seccomp` helper puts the command in a nested user, pid and mount namespace and
/// mounts a new /proc there, so that the command cannot see or reach the processes that run
/// without its seccomp filter (bwrap's init, the shell wrapper, the two socat relays). Under
/// bubblewrap run by an unprivileged user that works; under airlock the helper's
/// `mount("proc", "/proc")` fails with EPERM (it goes on without it) and the command sees the
/// relays. Cause: airlock's `--proc` always covers /proc/sys, /proc/sysrq-trigger, /proc/irq
/// and /proc/bus with read-only bind mounts, so the sandbox's proc is no longer "fully visible"
/// and the kernel refuses a new proc mount in any user namespace nested inside (bubblewrap only
/// covers those it can write to, none for an unprivileged caller).
#[test]
fn srt_command_cannot_see_unfiltered_helpers_as_uid_65534() {
    let who = Launcher::Unprivileged;
    let Some(prefix) = need_clients("srt nested proc") else {
        return;
    };
    let run = |dir: &Path| {
        let sb = Sandbox::new(who);
        let probe = probe_script(&sb, 1);
        let settings = srt_settings(&sb, &[]);
        let cmd = srt_cmd(
            &prefix,
            &settings,
            &format!("/bin/bash {}", probe.display()),
        );
        run_client(who, &sb, dir, &cmd, false)
    };
    if Path::new(SYSTEM_BWRAP).exists() {
        let t = run(system_bwrap_dir());
        expect(&probe_values(&t.out), "helpers-visible", "0", &t);
    }
    let t = run(airlock_bwrap_dir());
    assert_airlock_ran(&t);
    assert!(t.out.status.success(), "{}", t.show());
    let seen = probe_values(&t.out)
        .get("helpers-visible")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        seen,
        "0",
        "under airlock's bwrap the command srt sandboxes sees {seen} socat relays of srt's that \
         run without its seccomp filter: apply-seccomp could not mount its own /proc \
         (mount(\"proc\", \"/proc\") = EPERM, see nested_proc_mount_works_like_bubblewrap_as_uid_65534)\n{}",
        t.show()
    );
}

// ---------------------------------------------------------------------------------------------
// codex sandbox (OpenAI's Codex CLI)
// ---------------------------------------------------------------------------------------------

/// The directories Codex makes for itself in the host's /tmp (the workspace-write sandbox
/// binds it), named by the uid it runs as: removed when the test ends, pass or fail, unless
/// they were there before it, so a test run leaves /tmp as it found it.
struct CodexHostState(Vec<PathBuf>);

impl CodexHostState {
    fn new(who: Launcher) -> CodexHostState {
        let uid = if who == Launcher::Root { 0 } else { 65534 };
        let made = ["codex-daemon", "codex-bwrap-synthetic-mount-targets"]
            .iter()
            .map(|name| PathBuf::from(format!("/tmp/{name}-{uid}")))
            .filter(|p| !p.exists())
            .collect();
        CodexHostState(made)
    }
}

impl Drop for CodexHostState {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

fn codex_workspace(who: Launcher) {
    let test = format!("codex sandbox as {}", who_name(who));
    let Some(prefix) = need_clients(&test) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let setup = || {
        let sb = Sandbox::new(who);
        let probe = probe_script(&sb, port);
        let cmd = codex_cmd(&prefix, &probe);
        (sb, cmd)
    };
    // One Codex run at a time: each makes mount points in the shared /tmp (/tmp/.git, ...) and
    // removes afterwards those it believes it made, so root's and uid 65534's runs at once
    // collide ("failed to remove synthetic bubblewrap mount target /tmp/.agents: Operation
    // not permitted"), whatever the bwrap.
    static CODEX: Mutex<()> = Mutex::new(());
    let _one = CODEX.lock().unwrap_or_else(|e| e.into_inner());
    let _state = CodexHostState::new(who);
    let (sb, cmd) = setup();
    host_probe(who, &sb, &sb.path().join("probe.sh"));
    let t = run_client(who, &sb, airlock_bwrap_dir(), &cmd, false);
    assert!(t.out.status.success(), "{test}:\n{}", t.show());
    // Codex falls back to the bwrap in its package, silently, when it rejects the one on PATH.
    assert_airlock_ran(&t);
    let v = probe_values(&t.out);
    expect(&v, "hi", "", &t);
    expect(
        &v,
        "uid",
        if who == Launcher::Root { "0" } else { "65534" },
        &t,
    );
    expect(&v, "workspace-write", "ok", &t);
    expect(&v, "outside-write", "denied", &t);
    expect(&v, "loopback-tcp", "failed", &t);
    expect(&v, "netdevs", "lo", &t);
    assert!(sb.ws().join("probe-in-workspace").exists());
    assert!(!sb.outside().join("probe-outside").exists());
    // Codex asks `bwrap --help` what it supports: airlock lists --argv0, so Codex starts its
    // helper under that name instead of through a symlink.
    assert!(
        t.bwraps()
            .iter()
            .any(|e| e.argv.get(1).is_some_and(|a| a == "--help")),
        "{}",
        t.show()
    );
    let s = t.sandboxes().last().copied().unwrap();
    let ws = sb.ws().display().to_string();
    for want in [
        vec!["--ro-bind", "/", "/"],
        vec!["--bind", &ws, &ws],
        vec!["--unshare-net"],
        vec!["--cap-drop", "ALL"],
        vec!["--argv0", "codex-linux-sandbox"],
    ] {
        assert!(
            s.argv.windows(want.len()).any(|w| w == want),
            "Codex's line lacks {want:?}: {:?}",
            s.argv
        );
    }
    if capturing() {
        let name = format!("codex-workspace-{}", who_tag(who));
        let client = client_version(&prefix, "codex");
        save_fixture(
            &format!("{name}-airlock"),
            &t,
            &sb,
            &client,
            &cmd,
            who,
            "airlock",
        );
        capture_with_system_bwrap(&format!("{name}-bubblewrap"), who, setup, &client, false);
    }
}

#[test]
fn codex_sandbox_runs_under_airlock_as_root() {
    codex_workspace(Launcher::Root);
}

#[test]
fn codex_sandbox_runs_under_airlock_as_uid_65534() {
    codex_workspace(Launcher::Unprivileged);
}

// ---------------------------------------------------------------------------------------------
// ansible-runner (Debian's python3-ansible-runner)
// ---------------------------------------------------------------------------------------------

const ANSIBLE_RUNNER: &str = "/usr/bin/ansible-runner";
/// The module of Debian's ansible-runner that builds its bwrap line.
const ANSIBLE_RUNNER_CONFIG: &str =
    "/usr/lib/python3/dist-packages/ansible_runner/config/runner.py";
/// The entry of that line that links /lib64, and the one ansible-runner 2.4 adds before it.
const ANSIBLE_LIB64_LINK: &str = "'--symlink', 'usr/lib64', '/lib64',";
const ANSIBLE_LIB_LINK: &str = "'--symlink', 'usr/lib', '/lib',";

/// Whether the host's loader is reachable only through /lib (Debian 12's libc6 makes
/// /lib64/ld-linux-x86-64.so.2 an absolute link to /lib/x86_64-linux-gnu/): then a sandbox
/// holding /usr and a /lib64 link, but no /lib, can run no dynamically linked program.
fn loader_needs_lib() -> bool {
    std::fs::read_link("/usr/lib64/ld-linux-x86-64.so.2").is_ok_and(|t| t.starts_with("/lib/"))
}

/// ansible-runner 2.3.1 (Debian 12's) links /lib64 in its sandbox but not /lib, so on Debian's
/// own layout nothing runs in it, under bubblewrap as under airlock (`bwrap: execvp
/// ansible-playbook: No such file or directory`; ansible-runner issue #1310, fixed in 2.4 by
/// adding `--symlink usr/lib /lib`). The runs that must succeed take that fix: a copy of
/// Debian's module with the one entry added, bound over the module in a private mount
/// namespace (the host's file is untouched). The command that does so, or none when the
/// installed module links /lib already.
fn ansible_with_lib_fix() -> Vec<String> {
    static THROUGH: OnceLock<Vec<String>> = OnceLock::new();
    THROUGH
        .get_or_init(|| {
            let text = std::fs::read_to_string(ANSIBLE_RUNNER_CONFIG)
                .unwrap_or_else(|e| panic!("{ANSIBLE_RUNNER_CONFIG}: {e}"));
            if text.contains(ANSIBLE_LIB_LINK) {
                return Vec::new();
            }
            let line = text
                .lines()
                .find(|l| l.trim() == ANSIBLE_LIB64_LINK)
                .unwrap_or_else(|| panic!("{ANSIBLE_RUNNER_CONFIG} has no {ANSIBLE_LIB64_LINK}"));
            let indent = &line[..line.len() - line.trim_start().len()];
            let fixed = text.replacen(line, &format!("{indent}{ANSIBLE_LIB_LINK}\n{line}"), 1);
            let file = run_dir("ansible-runner-lib-fix").join("runner.py");
            std::fs::write(&file, fixed).unwrap();
            chmod(&file, 0o644);
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                r#"mount --bind -o ro "$1" "$2" && shift 2 && exec "$@""#,
                "sh",
            ]
            .into_iter()
            .map(String::from)
            .chain([
                file.display().to_string(),
                ANSIBLE_RUNNER_CONFIG.to_string(),
            ])
            .collect()
        })
        .clone()
}

/// The directory the runs' /opt directories go in: the clients' run directory when it is
/// under /opt, else /opt itself.
fn ansible_opt_parent() -> PathBuf {
    let run = prefix().join("run");
    if run.starts_with("/opt") {
        std::fs::create_dir_all(&run).unwrap();
        run
    } else {
        PathBuf::from("/opt")
    }
}

/// A 0755 directory under /opt, seen read-only in ansible-runner's sandbox: `public.txt`, and
/// `secret-dir/key` and `secret-file`, readable by everyone on the host, which the runs hide.
fn ansible_opt_dir(who: Launcher) -> tempfile::TempDir {
    let opt = tempfile::Builder::new()
        .prefix(&format!("ansible-{}-{}-", who_tag(who), std::process::id()))
        .tempdir_in(ansible_opt_parent())
        .unwrap();
    chmod(opt.path(), 0o755);
    let file = |name: &str, text: &str| {
        let p = opt.path().join(name);
        std::fs::write(&p, text).unwrap();
        chmod(&p, 0o644);
    };
    file("public.txt", "PUBLIC\n");
    std::fs::create_dir(opt.path().join("secret-dir")).unwrap();
    chmod(&opt.path().join("secret-dir"), 0o755);
    file("secret-dir/key", "TOPSECRET-DIR\n");
    file("secret-file", "TOPSECRET-FILE\n");
    opt
}

/// The probe the playbook runs: `probe:KEY=VALUE` lines.
fn ansible_probe_text(opt: &Path, outside: &Path) -> String {
    let host_pidns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    format!(
        r#"#!/bin/bash
opt='{opt}'
r() {{ if [ -e "$1" ]; then c=$(cat "$1" 2>/dev/null) && echo "read:$c" || echo denied; else echo absent; fi; }}
w() {{ test -w "$1" && echo ok || echo denied; }}
echo "probe:hi"
echo "probe:uid=$(id -u)"
echo "probe:host-pidns=$(test "$(readlink /proc/self/ns/pid)" = '{pidns}' && echo yes || echo no)"
echo "probe:public=$(r "$opt/public.txt")"
echo "probe:public-write=$(w "$opt/public.txt")"
echo "probe:secret-dir=$(ls -A "$opt/secret-dir" 2>&1 | tr '\n' ' ')"
echo "probe:secret-dir-key=$(r "$opt/secret-dir/key")"
echo "probe:secret-file=$(r "$opt/secret-file")"
echo "probe:shadow=$(if [ ! -e /etc/shadow ]; then echo absent; elif n=$(wc -c < /etc/shadow 2>/dev/null); then echo "bytes:$n"; else echo denied; fi)"
echo "probe:etc-write=$(w /etc)"
echo "probe:outside=$(r '{outside}/note')"
echo "probe:home-entries=$(ls -A /home 2>/dev/null | wc -l)"
echo "probe:runner-tmp=$(ls -d /tmp/ansible_runner_pi_* 2>/dev/null | wc -l)"
echo "probe:private-data-write=$(touch ../probe-touch 2>/dev/null && echo ok || echo denied)"
"#,
        opt = opt.display(),
        pidns = host_pidns.display(),
        outside = outside.display(),
    )
}

/// A playbook for localhost, run with a local connection: the probe, its output kept in the
/// private data directory by ansible's own `copy`.
const ANSIBLE_PLAYBOOK: &str = r#"- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: probe the sandbox
      ansible.builtin.command: /bin/bash probe.sh
      args:
        chdir: "{{ playbook_dir }}"
      register: probe
    - name: keep what the probe saw in the private data directory
      ansible.builtin.copy:
        dest: "{{ playbook_dir }}/../probe.out"
        content: "{{ probe.stdout }}\n"
"#;

/// A run's private data directory (the workspace: `project/site.yml`, `project/probe.sh`,
/// `inventory/hosts`), its /opt directory, and the command line: ansible-runner with bwrap from
/// PATH, hiding the /opt secrets and /etc/shadow.
fn ansible_setup(who: Launcher) -> (Sandbox, Vec<String>) {
    let mut sb = Sandbox::new(who);
    let opt = ansible_opt_dir(who);
    let pdd = sb.ws();
    for d in ["project", "inventory"] {
        std::fs::create_dir(pdd.join(d)).unwrap();
        if who == Launcher::Unprivileged {
            chown_nobody(&pdd.join(d));
        }
    }
    let note = sb.outside().join("note");
    std::fs::write(&note, "OUTSIDE\n").unwrap();
    chmod(&note, 0o644);
    let files = [
        ("project/site.yml", ANSIBLE_PLAYBOOK.to_string()),
        (
            "project/probe.sh",
            ansible_probe_text(opt.path(), &sb.outside()),
        ),
        (
            "inventory/hosts",
            "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
                .to_string(),
        ),
    ];
    for (name, text) in files {
        let p = pdd.join(name);
        std::fs::write(&p, text).unwrap();
        chmod(&p, 0o644);
    }
    let cmd = [
        ANSIBLE_RUNNER,
        "run",
        &pdd.display().to_string(),
        "-p",
        "site.yml",
        "--ident",
        "airlock",
        "--process-isolation",
        "--process-isolation-executable",
        "bwrap",
        "--process-isolation-hide-paths",
        &opt.path().join("secret-dir").display().to_string(),
        &opt.path().join("secret-file").display().to_string(),
        "/etc/shadow",
    ]
    .map(String::from)
    .to_vec();
    sb.opt = Some(opt);
    (sb, cmd)
}

/// What ansible-runner recorded: `artifacts/airlock/{status,rc}`.
fn ansible_artifacts(sb: &Sandbox) -> (String, String) {
    let dir = sb.ws().join("artifacts/airlock");
    let read = |n: &str| {
        std::fs::read_to_string(dir.join(n))
            .unwrap_or_else(|e| format!("({n}: {e})"))
            .trim()
            .to_string()
    };
    (read("status"), read("rc"))
}

fn ansible_probe_values(sb: &Sandbox) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(sb.ws().join("probe.out")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("probe:"))
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

fn ansible_label(fixed: bool) -> String {
    let v = Command::new(ANSIBLE_RUNNER)
        .arg("--version")
        .output()
        .map(|o| stdout(&o).trim().to_string())
        .unwrap_or_default();
    let deb = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "python3-ansible-runner"])
        .output()
        .map(|o| stdout(&o).trim().to_string())
        .unwrap_or_default();
    let fix = if fixed {
        ", with 2.4's --symlink usr/lib /lib (issue #1310)"
    } else {
        ", as Debian ships it"
    };
    format!("ansible-runner {v} (Debian {deb}){fix}")
}

/// A playbook run through ansible-runner's process isolation, with airlock's bwrap and, as the
/// control, Debian's bubblewrap: the run succeeds, writes in its private data directory, reads
/// /opt but not the paths it hides there nor /etc/shadow, sees neither the host's /var/tmp,
/// /home nor its own staging directory in /tmp, runs in its own pid namespace; and the probe
/// sees the same under both.
fn ansible_runner_workspace(who: Launcher) {
    let test = format!("ansible-runner as {}", who_name(who));
    let Some(_) = need_clients(&test) else {
        return;
    };
    let through = ansible_with_lib_fix();
    // The positive control: on the host, as `who`, the probe reads what the sandbox hides.
    let (sb, _) = ansible_setup(who);
    let mut host = match who {
        Launcher::Root => Command::new("bash"),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
            c
        }
    };
    let out = host
        .arg("probe.sh")
        .current_dir(sb.ws().join("project"))
        .output()
        .unwrap();
    let h = probe_values(&out);
    let _ = std::fs::remove_file(sb.ws().join("probe-touch"));
    for (k, v) in [
        ("host-pidns", "yes"),
        ("public", "read:PUBLIC"),
        ("secret-dir-key", "read:TOPSECRET-DIR"),
        ("secret-file", "read:TOPSECRET-FILE"),
        ("outside", "read:OUTSIDE"),
        ("private-data-write", "ok"),
    ] {
        assert_eq!(h.get(k).map(String::as_str), Some(v), "host control: {h:?}");
    }
    drop(sb);

    let run = |dir: &Path| {
        let (sb, cmd) = ansible_setup(who);
        let t = run_client_through(who, &sb, dir, &cmd, false, &through);
        (sb, cmd, t)
    };
    let mut seen = Vec::new();
    let mut runs = Vec::new();
    if Path::new(SYSTEM_BWRAP).exists() {
        runs.push(("bubblewrap", system_bwrap_dir()));
    }
    runs.push(("airlock", airlock_bwrap_dir()));
    for (bwrap, dir) in runs {
        let (sb, cmd, t) = run(dir);
        let what = format!("{test}, {bwrap}'s bwrap");
        assert!(t.out.status.success(), "{what}:\n{}", t.show());
        assert_eq!(
            ansible_artifacts(&sb),
            ("successful".to_string(), "0".to_string()),
            "{what}:\n{}",
            t.show()
        );
        if bwrap == "airlock" {
            assert_airlock_ran(&t);
        }
        let v = ansible_probe_values(&sb);
        expect(&v, "hi", "", &t);
        expect(
            &v,
            "uid",
            if who == Launcher::Root { "0" } else { "65534" },
            &t,
        );
        expect(&v, "host-pidns", "no", &t);
        expect(&v, "public", "read:PUBLIC", &t);
        expect(&v, "public-write", "denied", &t);
        expect(&v, "secret-dir", "", &t);
        expect(&v, "secret-dir-key", "absent", &t);
        expect(&v, "secret-file", "read:", &t);
        expect(&v, "shadow", "bytes:0", &t);
        expect(&v, "etc-write", "denied", &t);
        expect(&v, "outside", "absent", &t);
        expect(&v, "home-entries", "0", &t);
        expect(&v, "runner-tmp", "0", &t);
        expect(&v, "private-data-write", "ok", &t);
        assert!(sb.ws().join("probe-touch").exists(), "{what}");
        let all = format!(
            "{}{}{}",
            stdout(&t.out),
            stderr(&t.out),
            std::fs::read_to_string(sb.ws().join("probe.out")).unwrap_or_default()
        );
        assert!(
            !all.contains("TOPSECRET"),
            "{what}: a hidden file was read:\n{}",
            t.show()
        );
        // ansible-runner's line: its own pid namespace, /opt read-only, the hidden paths
        // covered by what it made in its staging directory.
        let s = t.sandboxes()[0];
        let secret = sb.opt.as_ref().unwrap().path().join("secret-file");
        for want in [
            &["--unshare-pid"][..],
            &["--ro-bind", "/opt", "/opt"],
            &["--dev-bind", "/dev", "dev"],
        ] {
            assert!(
                s.argv.windows(want.len()).any(|w| w == want),
                "ansible-runner's line lacks {want:?}: {:?}",
                s.argv
            );
        }
        assert!(
            s.argv.windows(3).any(|w| w[0] == "--bind"
                && w[1].starts_with("/tmp/ansible_runner_pi_")
                && Path::new(&w[2]) == secret),
            "ansible-runner's line does not hide {}: {:?}",
            secret.display(),
            s.argv
        );
        if capturing() {
            save_fixture(
                &format!("ansible-runner-lib-fix-{}-{bwrap}", who_tag(who)),
                &t,
                &sb,
                &ansible_label(!through.is_empty()),
                &cmd,
                who,
                bwrap,
            );
        }
        seen.push((bwrap, v));
    }
    if let [(_, theirs), (_, ours)] = &seen[..] {
        assert_eq!(
            ours, theirs,
            "{test}: the probe saw under airlock's bwrap (left) what it did not under bubblewrap"
        );
    }
}

#[test]
fn ansible_runner_runs_under_airlock_as_root() {
    ansible_runner_workspace(Launcher::Root);
}

#[test]
fn ansible_runner_runs_under_airlock_as_uid_65534() {
    ansible_runner_workspace(Launcher::Unprivileged);
}

/// ansible-runner as Debian ships it, on this host: where the loader is reachable only through
/// /lib (Debian 12), its sandbox runs nothing, and airlock's bwrap fails as bubblewrap does:
/// exit 1, `bwrap: execvp ansible-playbook: No such file or directory` (in ansible-runner's
/// output, through its pty), the run recorded as failed with rc 1. Elsewhere both succeed.
fn ansible_runner_as_shipped(who: Launcher) {
    let test = format!("ansible-runner as shipped, as {}", who_name(who));
    let Some(_) = need_clients(&test) else {
        return;
    };
    let mut outcomes = Vec::new();
    let mut runs = Vec::new();
    if Path::new(SYSTEM_BWRAP).exists() {
        runs.push(("bubblewrap", system_bwrap_dir()));
    }
    runs.push(("airlock", airlock_bwrap_dir()));
    for (bwrap, dir) in runs {
        let (sb, cmd) = ansible_setup(who);
        let t = run_client(who, &sb, dir, &cmd, false);
        if bwrap == "airlock" {
            assert_airlock_ran(&t);
        }
        let (status, rc) = ansible_artifacts(&sb);
        let execvp = stdout(&t.out)
            .lines()
            .filter(|l| l.starts_with("bwrap: "))
            .map(|l| l.trim().to_string())
            .collect::<Vec<_>>();
        let what = format!("{test}, {bwrap}'s bwrap");
        if loader_needs_lib() {
            assert_eq!(
                (t.out.status.code(), status.as_str(), rc.as_str()),
                (Some(1), "failed", "1"),
                "{what}:\n{}",
                t.show()
            );
            assert_eq!(
                execvp,
                ["bwrap: execvp ansible-playbook: No such file or directory"],
                "{what}:\n{}",
                t.show()
            );
        } else {
            assert!(t.out.status.success(), "{what}:\n{}", t.show());
        }
        if capturing() {
            save_fixture(
                &format!("ansible-runner-{}-{bwrap}", who_tag(who)),
                &t,
                &sb,
                &ansible_label(false),
                &cmd,
                who,
                bwrap,
            );
        }
        outcomes.push((t.out.status.code(), status, rc, execvp));
    }
    if let [theirs, ours] = &outcomes[..] {
        assert_eq!(
            ours, theirs,
            "{test}: airlock's bwrap (left) and bubblewrap"
        );
    }
}

#[test]
fn ansible_runner_as_shipped_fails_like_bubblewrap_as_root() {
    ansible_runner_as_shipped(Launcher::Root);
}

#[test]
fn ansible_runner_as_shipped_fails_like_bubblewrap_as_uid_65534() {
    ansible_runner_as_shipped(Launcher::Unprivileged);
}

/// ansible-runner's job timeout: past `job_timeout` it SIGKILLs the process group of the bwrap it
/// started (the session leader of its pty), and records the run as timed out (rc 254). Under
/// airlock's bwrap as under bubblewrap the playbook's task (a long `sleep`, in a session of its
/// own, out of reach of that signal) must not survive it: it ends with the sandbox's pid
/// namespace (`--unshare-pid`), whose init dies with the bwrap that was killed
/// (`--die-with-parent` in bubblewrap; always in airlock).
fn ansible_runner_timeout(who: Launcher) {
    let test = format!("ansible-runner job_timeout, as {}", who_name(who));
    let Some(_) = need_clients(&test) else {
        return;
    };
    let through = ansible_with_lib_fix();
    let mut runs = Vec::new();
    if Path::new(SYSTEM_BWRAP).exists() {
        runs.push(("bubblewrap", system_bwrap_dir()));
    }
    runs.push(("airlock", airlock_bwrap_dir()));
    for (n, (bwrap, dir)) in runs.into_iter().enumerate() {
        let (sb, mut cmd) = ansible_setup(who);
        // A sleep no other run has: `sleep 2999.<who><n><pid>`.
        let marker = format!(
            "2999.{}{n}{}",
            if who == Launcher::Root { 1 } else { 2 },
            std::process::id()
        );
        let playbook = format!(
            "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n    \
             - name: outlast the job timeout\n      ansible.builtin.command: setsid --wait sleep {marker}\n"
        );
        let env = sb.ws().join("env");
        std::fs::create_dir(&env).unwrap();
        for (p, text) in [
            (sb.ws().join("project/sleep.yml"), playbook),
            (env.join("settings"), "job_timeout: 3\n".to_string()),
        ] {
            std::fs::write(&p, text).unwrap();
            chmod(&p, 0o644);
        }
        if who == Launcher::Unprivileged {
            chown_nobody(&env);
        }
        for a in cmd.iter_mut().filter(|a| *a == "site.yml") {
            *a = "sleep.yml".into();
        }
        let t = run_client_through(who, &sb, dir, &cmd, false, &through);
        let what = format!("{test}, {bwrap}'s bwrap");
        if bwrap == "airlock" {
            assert_airlock_ran(&t);
        }
        assert!(
            stdout(&t.out).contains("TASK [outlast the job timeout]"),
            "{what}: the playbook did not reach its task:\n{}",
            t.show()
        );
        assert_eq!(
            ansible_artifacts(&sb),
            ("timeout".to_string(), "254".to_string()),
            "{what}:\n{}",
            t.show()
        );
        assert_eq!(t.out.status.code(), Some(254), "{what}:\n{}", t.show());
        assert_none_left(
            &format!("sleep {marker}"),
            std::time::Duration::from_secs(10),
            &what,
        );
    }
}

#[test]
fn ansible_runner_timeout_ends_the_playbook_as_root() {
    ansible_runner_timeout(Launcher::Root);
}

#[test]
fn ansible_runner_timeout_ends_the_playbook_as_uid_65534() {
    ansible_runner_timeout(Launcher::Unprivileged);
}

// ---------------------------------------------------------------------------------------------
// Replaying the captured command lines: airlock's bwrap against /usr/bin/bwrap
// ---------------------------------------------------------------------------------------------

struct Fixture {
    name: String,
    who: Launcher,
    value: Value,
}

fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(fixtures_dir()) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files {
        if f.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let value: Value = serde_json::from_slice(&std::fs::read(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let who = match value["who"].as_str() {
            Some("root") => Launcher::Root,
            _ => Launcher::Unprivileged,
        };
        out.push(Fixture {
            name: f.file_stem().unwrap().to_string_lossy().into_owned(),
            who,
            value,
        });
    }
    out
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Options whose first value is a host path that must exist.
const SOURCE_OPTS: &[&str] = &[
    "--bind",
    "--ro-bind",
    "--dev-bind",
    "--bind-try",
    "--ro-bind-try",
    "--dev-bind-try",
];
/// Options followed by one or two values and whose last value is a path in the sandbox.
fn dest_of(opt: &str) -> Option<usize> {
    match opt {
        "--bind" | "--ro-bind" | "--dev-bind" | "--bind-try" | "--ro-bind-try"
        | "--dev-bind-try" | "--symlink" | "--file" | "--bind-data" | "--ro-bind-data" => Some(2),
        "--tmpfs" | "--dir" | "--proc" | "--dev" | "--remount-ro" | "--mqueue" => Some(1),
        _ => None,
    }
}

/// One bwrap run laid out for replay: its own directory, the fixture's paths made again, the
/// command after `--` replaced by the probe.
struct Replay {
    dir: tempfile::TempDir,
    /// The run's directory under /opt, for a line that names `@ANSIBLE_OPT_DIR@`.
    opt: Option<tempfile::TempDir>,
    argv: Vec<String>,
    profile: Option<(i32, PathBuf)>,
    dests: Vec<String>,
}

/// `own_tmp`: the line makes its own /tmp (ansible-runner's `--dir /tmp`), which stays.
fn replay_subst(s: &str, base: &Path, opt: Option<&Path>, own_tmp: bool) -> String {
    let b = base.display().to_string();
    let mut s = s
        .replace("@SRT_SOCKET@", &format!("{b}/tmp/srt-bridge.sock"))
        .replace("@SRT_EMPTY_DIR@", &format!("{b}/tmp/srt-empty"))
        .replace("@CODEX_ARG0_DIR@", &format!("{b}/codex-arg0"))
        .replace("@ANSIBLE_PI_DIR@", &format!("{b}/ansible-pi"))
        .replace("@SRT_PROXY_USER@", "user")
        .replace("@SRT_PROXY_TOKEN@", "token")
        .replace("@SRT_HOST_PORT@", "1")
        .replace("@BASE@", &b);
    if let Some(opt) = opt {
        s = s.replace("@ANSIBLE_OPT_DIR@", &opt.display().to_string());
    }
    // The host's /tmp is the run's own tmp (Codex binds /tmp and makes mount points there).
    if !own_tmp && (s == "/tmp" || s.starts_with("/tmp/")) {
        format!("{b}{s}")
    } else {
        s
    }
}

fn has_argv0(bwrap: &str) -> bool {
    Command::new(bwrap)
        .arg("--help")
        .output()
        .is_ok_and(|o| stdout(&o).contains("--argv0"))
}

fn prepare_replay(f: &Fixture, exec: &Value, strip_argv0: bool, probe: &str) -> Replay {
    let dir = tempfile::Builder::new()
        .prefix("airlock-replay-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let base = dir.path().to_path_buf();
    chmod(&base, 0o755);
    for d in ["ws", "home", "outside", "tmp", "codex-arg0"] {
        std::fs::create_dir(base.join(d)).unwrap();
        if f.who == Launcher::Unprivileged && matches!(d, "ws" | "home") {
            chown_nobody(&base.join(d));
        }
    }
    chmod(&base.join("tmp"), 0o1777);
    chmod(&base.join("outside"), 0o777);
    std::fs::write(base.join("tmp/srt-bridge.sock"), "").unwrap();
    std::fs::create_dir(base.join("tmp/srt-empty")).unwrap();
    let raw = strings(&exec["argv"]);
    let opt = raw
        .iter()
        .any(|a| a.contains("@ANSIBLE_OPT_DIR@"))
        .then(|| ansible_opt_dir(f.who));
    let own_tmp = raw
        .windows(2)
        .any(|w| matches!(w[0].as_str(), "--dir" | "--tmpfs") && w[1] == "/tmp");
    let subst = |a: &String| replay_subst(a, &base, opt.as_ref().map(|o| o.path()), own_tmp);
    let argv: Vec<String> = raw.iter().map(subst).collect();
    let start = command_start(&argv).expect("a sandbox line");
    let end = if argv[start - 1] == "--" {
        start - 1
    } else {
        start
    };
    // argv[0] is the program's name; the options follow.
    let mut line: Vec<String> = argv[1..end].to_vec();
    let words: Vec<String> = strings(&exec["args_fd_words"]).iter().map(subst).collect();
    if strip_argv0 && let Some(i) = line.iter().position(|a| a == "--argv0") {
        line.drain(i..i + 2);
    }
    // Lay out again what the client had made in the run's directory and has removed since:
    // a missing source is a directory, or an empty 0600 file when it is bound over a file
    // (ansible-runner's covers of hidden paths, as its mkstemp makes them); a missing mount
    // point outside the workspace (under a read-only bind, where bwrap cannot make it) is a
    // file holding a secret, or a directory when its source is one; a missing `--chdir`
    // directory in the run's directory is made.
    let all: Vec<&String> = line.iter().chain(words.iter()).collect();
    let mut dests = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let a = all[i].as_str();
        if SOURCE_OPTS.contains(&a)
            && let (Some(src), Some(dest)) = (all.get(i + 1), all.get(i + 2))
        {
            let (src, dest) = (Path::new(src.as_str()), Path::new(dest.as_str()));
            if !src.exists() && src.starts_with(&base) {
                if dest.is_file() {
                    std::fs::create_dir_all(src.parent().unwrap()).unwrap();
                    std::fs::write(src, "").unwrap();
                    chmod(src, 0o600);
                } else {
                    std::fs::create_dir_all(src).unwrap();
                }
                if f.who == Launcher::Unprivileged {
                    chown_nobody(src);
                }
            }
            if !dest.exists() && dest.starts_with(&base) && !dest.starts_with(base.join("ws")) {
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                if src.is_dir() {
                    std::fs::create_dir(dest).unwrap();
                } else {
                    std::fs::write(dest, "TOPSECRET\n").unwrap();
                }
            }
        }
        if a == "--chdir"
            && let Some(dir) = all.get(i + 1)
        {
            let dir = Path::new(dir.as_str());
            if !dir.exists() && dir.starts_with(&base) {
                std::fs::create_dir_all(dir).unwrap();
                if f.who == Launcher::Unprivileged {
                    chown_nobody(dir);
                }
            }
        }
        // Codex's `--tmpfs /tmp/codex-daemon-UID` comes before its `--bind /tmp /tmp`, on the
        // read-only root: the directory was there on the host.
        if a == "--tmpfs"
            && let Some(dest) = all.get(i + 1)
        {
            let dest = Path::new(dest.as_str());
            if !dest.exists() && dest.starts_with(&base) && !dest.starts_with(base.join("ws")) {
                std::fs::create_dir_all(dest).unwrap();
            }
        }
        match dest_of(a) {
            Some(n) => {
                if let Some(d) = all.get(i + n) {
                    dests.push(d.to_string());
                }
                i += n + 1;
            }
            None => i += 1,
        }
    }
    let profile = exec["args_fd"].as_i64().map(|fd| {
        let p = base.join("args-profile");
        let mut data = Vec::new();
        for w in &words {
            data.extend_from_slice(w.as_bytes());
            data.push(0);
        }
        std::fs::write(&p, data).unwrap();
        chmod(&p, 0o644);
        (fd as i32, p)
    });
    line.extend(["--", "/bin/bash", "-c", probe].map(String::from));
    // In the probe, the run's directory is "$b" and its /opt one "$o": the same probe serves
    // every replay of a line. A relative destination is the sandbox's root's
    // (ansible-runner's `--dev-bind /dev dev`).
    let b = base.display().to_string();
    let o = opt.as_ref().map(|o| o.path().display().to_string());
    let dests = dests
        .into_iter()
        .map(|d| {
            if let Some(rest) = d.strip_prefix(&b) {
                format!("@BASE@{rest}")
            } else if let Some(rest) = o.as_deref().and_then(|o| d.strip_prefix(o)) {
                format!("@OPT@{rest}")
            } else if !d.starts_with('/') {
                format!("/{d}")
            } else {
                d
            }
        })
        .collect();
    Replay {
        dir,
        opt,
        argv: line,
        profile,
        dests,
    }
}

/// Run the replayed line through `bwrap` as `who`, from the workspace, in a clean environment.
fn run_replay(who: Launcher, r: &Replay, bwrap: &Path) -> Output {
    let base = r.dir.path();
    let mut c = Command::new("timeout");
    c.args(["-k", "5", REPLAY_DEADLINE]);
    if who == Launcher::Unprivileged {
        c.args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]);
    }
    c.args(["env", "-i", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"])
        .arg(format!("HOME={}", base.join("home").display()))
        .arg(format!("REPLAY_BASE={}", base.display()));
    if let Some(opt) = &r.opt {
        c.arg(format!("REPLAY_OPT={}", opt.path().display()));
    }
    if let Some((fd, p)) = &r.profile {
        c.args([
            "sh",
            "-c",
            &format!("exec {fd}<\"$1\" && shift && exec \"$@\""),
        ])
        .arg("replay")
        .arg(p);
    }
    c.arg(bwrap)
        .args(&r.argv)
        .current_dir(base.join("ws"))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// What the replay probe reports: identity, capabilities, network, and for every path a mount
/// option named, whether it is there, its type and mode, and whether it can be written.
fn replay_probe(dests: &[String]) -> String {
    let mut s = String::from(
        r#"b="$REPLAY_BASE" o="$REPLAY_OPT"
echo "uid=$(id -u) gid=$(id -g) cwd=$(pwd)"
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr '\t' ' '
echo "netdevs=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')"
echo "dev=$(ls /dev 2>&1 | tr '\n' ' ')"
echo "own-pidns=$(test $$ -lt 10 && echo yes || echo no)"
for v in SANDBOX_RUNTIME TMPDIR HTTP_PROXY; do echo "env $v=${!v}"; done
w() { if [ -d "$1" ]; then t="$1/.replay-w.$(id -u).$RANDOM$RANDOM"; (: > "$t") 2>/dev/null && { rm -f "$t"; echo rw; } || echo ro;
      elif [ -f "$1" ]; then (: >> "$1") 2>/dev/null && echo rw || echo ro; else echo -; fi; }
r() { if [ -d "$1" ]; then ls "$1" >/dev/null 2>&1 && echo r || echo no-r; elif [ -e "$1" ]; then head -c1 "$1" >/dev/null 2>&1 && echo r || echo no-r; else echo -; fi; }
for p in "$b/ws" "$b/home" "$b/outside" /etc /usr /tmp /proc/sys; do echo "path $p: $(stat -c '%F %a' "$p" 2>&1) $(w "$p") $(r "$p")"; done
# Not its mode: bubblewrap's --dev makes /dev/shm a 0755 directory, airlock mounts a 1777 tmpfs.
# w's file is named per uid and run: with --dev-bind /dev (ansible-runner's line) /dev/shm is
# the host's, where the root and uid 65534 replays ran at once and one's file, sticky, made
# the other's write fail (read as "ro" in CI at 81323ea).
echo "path /dev/shm: $(stat -c '%F' /dev/shm 2>&1) $(w /dev/shm) $(r /dev/shm)"
"#,
    );
    // At most 100 of the mount points (srt's --args lines name 1500 files): evenly spread.
    let step = dests.len().div_ceil(100).max(1);
    let sample: BTreeSet<&String> = dests.iter().step_by(step).collect();
    for d in sample {
        let quoted = |t: &str| format!("'{}'", t.replace('\'', "'\\''"));
        let p = if let Some(rest) = d.strip_prefix("@BASE@") {
            format!("\"$b\"{}", quoted(rest))
        } else if let Some(rest) = d.strip_prefix("@OPT@") {
            format!("\"$o\"{}", quoted(rest))
        } else {
            quoted(d)
        };
        s.push_str(&format!(
            "p={p}; echo \"dest ${{p#$b}}: $(stat -c '%F %a' \"$p\" 2>&1) $(w \"$p\") $(r \"$p\")\"\n"
        ));
    }
    s
}

fn replay_fixtures(who: Launcher) {
    if capturing() {
        eprintln!("SKIP replay while capturing: the fixtures are being rewritten");
        return;
    }
    if !Path::new(SYSTEM_BWRAP).exists() && clients().is_err() {
        eprintln!("SKIP replay: no {SYSTEM_BWRAP} to compare with");
        return;
    }
    assert!(
        Path::new(SYSTEM_BWRAP).exists(),
        "scripts/clients.sh installs bubblewrap"
    );
    let fixtures: Vec<Fixture> = fixtures().into_iter().filter(|f| f.who == who).collect();
    assert!(
        !fixtures.is_empty(),
        "no fixtures in {}",
        fixtures_dir().display()
    );
    // The same line goes to both; bubblewrap 0.8 has no --argv0 (it only names the command).
    let strip_argv0 = !has_argv0(SYSTEM_BWRAP);
    let airlock = airlock_bwrap_dir().join("bwrap");
    let mut failures = Vec::new();
    let mut count = 0;
    for f in &fixtures {
        for (i, exec) in f.value["execs"].as_array().unwrap().iter().enumerate() {
            if command_start(&strings(&exec["argv"])).is_none() {
                continue;
            }
            // A line whose client run failed (ansible-runner as Debian ships it, on Debian's
            // layout) may fail here too: then its status and message are compared.
            let may_fail = f.value.get("client_status").is_some();
            count += 1;
            let dests = prepare_replay(f, exec, strip_argv0, "").dests;
            let probe = replay_probe(&dests);
            // A fresh directory for each: the first run leaves mount points behind.
            let theirs = prepare_replay(f, exec, strip_argv0, &probe);
            let ours = prepare_replay(f, exec, strip_argv0, &probe);
            let want = run_replay(who, &theirs, Path::new(SYSTEM_BWRAP));
            let got = run_replay(who, &ours, &airlock);
            let norm = |o: &Output, r: &Replay| {
                let mut s = format!("status {}\n{}", o.status, stdout(o));
                if may_fail {
                    s.push_str(&format!("stderr:\n{}", stderr(o)));
                }
                if let Some(opt) = &r.opt {
                    s = s.replace(&opt.path().display().to_string(), "@OPT@");
                }
                s.replace(&r.dir.path().display().to_string(), "@BASE@")
            };
            let (mut w, g) = (norm(&want, &theirs), norm(&got, &ours));
            // A documented difference (README, "Capabilities"): bubblewrap 0.8 started by root
            // leaves the task root's full set unless the line drops it (ansible-runner's does
            // not); airlock's task has none. Expected here: airlock's none.
            let line = strings(&exec["argv"]);
            if who == Launcher::Root && !line.windows(2).any(|p| p == ["--cap-drop", "ALL"]) {
                w = w
                    .lines()
                    .map(|l| match l.split_once(": ") {
                        Some((k @ ("CapEff" | "CapBnd"), _)) => format!("{k}: 0000000000000000"),
                        _ => l.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
                    + if w.ends_with('\n') { "\n" } else { "" };
            }
            if std::env::var_os("REPLAY_SHOW").is_some() {
                eprintln!("== {} exec {i}\n{g}", f.name);
            }
            assert!(
                may_fail || want.status.success(),
                "{} exec {i} fails under {SYSTEM_BWRAP}: {}",
                f.name,
                stderr(&want)
            );
            if w != g {
                let diff: Vec<String> = w
                    .lines()
                    .zip(g.lines())
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| format!("  bubblewrap: {a}\n  airlock:    {b}"))
                    .collect();
                failures.push(format!(
                    "{} exec {i}: airlock's bwrap differs from {SYSTEM_BWRAP} (stderr {:?}):\n{}",
                    f.name,
                    stderr(&got),
                    diff.join("\n")
                ));
            }
        }
    }
    assert!(count > 0, "no sandbox lines in the fixtures");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn captured_lines_behave_like_bubblewrap_as_root() {
    replay_fixtures(Launcher::Root);
}

#[test]
fn captured_lines_behave_like_bubblewrap_as_uid_65534() {
    replay_fixtures(Launcher::Unprivileged);
}

/// The smallest form of the srt finding above: srt's own line, as uid 65534, with the command
/// replaced by what its apply-seccomp helper does first (a nested user, pid and mount namespace
/// with a new /proc). bubblewrap: exit 0. airlock: `unshare: mount /proc failed: Operation not
/// permitted`, because of its read-only covers over /proc/sys, /proc/irq, /proc/bus.
#[test]
fn nested_proc_mount_works_like_bubblewrap_as_uid_65534() {
    if capturing() {
        eprintln!("SKIP while capturing: the fixtures are being rewritten");
        return;
    }
    if !Path::new(SYSTEM_BWRAP).exists() {
        eprintln!("SKIP: no {SYSTEM_BWRAP}");
        return;
    }
    let who = Launcher::Unprivileged;
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "srt-workspace-65534-airlock")
        .expect("the srt fixture");
    let exec = f.value["execs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| strings(&e["argv"]).iter().any(|a| a == "--"))
        .unwrap()
        .clone();
    let probe =
        "unshare --user --map-root-user --pid --fork --mount-proc /bin/true && echo nested-proc-ok";
    let theirs = prepare_replay(&f, &exec, true, probe);
    let ours = prepare_replay(&f, &exec, true, probe);
    let want = run_replay(who, &theirs, Path::new(SYSTEM_BWRAP));
    assert!(
        stdout(&want).contains("nested-proc-ok"),
        "bubblewrap: {}",
        stderr(&want)
    );
    let got = run_replay(who, &ours, &airlock_bwrap_dir().join("bwrap"));
    assert!(
        stdout(&got).contains("nested-proc-ok"),
        "airlock's bwrap refuses a nested proc mount that bubblewrap allows: {}",
        stderr(&got)
    );
}

// ---------------------------------------------------------------------------------------------
// The strace parser itself
// ---------------------------------------------------------------------------------------------

#[test]
fn strace_parser_reads_execve_and_args_fd() {
    let hex = |s: &str| s.bytes().map(|b| format!("\\x{b:02x}")).collect::<String>();
    let trace = format!(
        "execve(\"{}\", [\"{}\", \"{}\", \"{}\"], 0x7ffd /* 3 vars */) = 0\n\
         fcntl(9, F_DUPFD_CLOEXEC, 3) = 3\n\
         read(3, \"{}\", 65536) = 12\n\
         read(3, \"\", 65536) = 0\n\
         close(3) = 0\n\
         execve(\"{}\", [\"{}\"], 0x7ffd /* 3 vars */) = -1 ENOENT (No such file or directory)\n",
        hex("/x/bwrap"),
        hex("bwrap"),
        hex("--args"),
        hex("9"),
        hex("--dir\0/a\0/b\0"),
        hex("/nope"),
        hex("nope"),
    );
    let mut execs = Vec::new();
    parse_trace(7, &trace, &mut execs);
    assert_eq!(execs.len(), 1);
    assert_eq!(execs[0].path, "/x/bwrap");
    assert_eq!(execs[0].argv, ["bwrap", "--args", "9"]);
    assert_eq!(
        execs[0].args_fd,
        Some((9, vec!["--dir".into(), "/a".into(), "/b".into()]))
    );
}
