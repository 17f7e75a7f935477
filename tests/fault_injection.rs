//! Fail closed, shown by fault injection. Every system call airlock makes while it builds a
//! sandbox is made to fail, one at a time: strace's `-e inject=NAME:error=EPERM:when=N` fails
//! the Nth call of NAME in each process airlock starts, and `-b execve` lets go of the task
//! when it execs, so the task itself runs undisturbed. The calls and their counts come from an
//! undisturbed run traced first, as root and as uid 65534 (about 500 each).
//!
//! Whatever fails, one of two things must be true:
//! - the task never ran, and airlock exited 125 saying which step failed (or 126 when the
//!   exec itself was failed, or 2 when a usage check's own call was: a bind source it could
//!   not look at);
//! - the task ran, and a probe inside found the same sandbox as in the undisturbed run
//!   (namespaces, ids, capabilities, no_new_privs, seccomp, network, mounts, root, /dev,
//!   environment, limits: rlimits in place of a root caller's cgroup are the documented
//!   fallback), and its output arrived, or airlock said it did not (exit 2).
//!
//! And never a panic, a crash, a hang, or a process of the run left on the host. Found by it
//! and fixed: a system path the host has but that lstat failed on was left out of the sandbox
//! in silence; a failed reap in the sandbox's init waited for good; a failed allocation
//! aborted (134, and no JSON): it is now said, and exits 125.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the probe prints of the sandbox it runs in. `$1` holds the host's namespace links.
const PROBE: &str = r#"
set -- $1
for ns in user mnt net pid ipc uts cgroup; do
  if [ "$(readlink /proc/self/ns/$ns)" = "$1" ]; then echo "ns $ns HOST"; else echo "ns $ns new"; fi
  shift
done
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status
echo maps; cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups
echo net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
echo mounts; awk '{print $5, $6, $9, $10, $11}' /proc/self/mountinfo
echo root; ls -a /
echo dev; ls -la /dev | awk '{print $1, $NF}'
echo host; hostname
echo env; env | sort
echo pid1; tr '\0' ' ' < /proc/1/cmdline; echo
echo rofs; for d in /usr /etc /proc/sys /dev /; do touch $d/fi-x 2>/dev/null && echo "WROTE $d"; done
echo work; touch /work/fi-x && echo writable; pwd; umask; id
echo limits; ulimit -a
"#;

/// Calls not failed, and why: the kernel never fails them (or only for a caller's bug, EFAULT
/// or EINVAL; `brk` answers the old break), or a failure is one no program survives.
/// `close` of a directory fails only for a descriptor not open, which std's directory reader
/// asserts against. The calls of the C library's start, before airlock's own code, are left
/// out too (see `calls`): it crashes when it cannot set up thread-local storage or protect
/// its relocations.
const NOT_FAILED: &[&str] = &[
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getpid",
    "getppid",
    "gettid",
    "umask",
    "set_tid_address",
    "brk",
    "rt_sigreturn",
    "exit",
    "exit_group",
    "close",
];

struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    /// The probe's view, if the task ran.
    view: Option<String>,
    /// Still running after 30 s (ended then).
    hung: bool,
}

impl Outcome {
    /// A JSON run's outcome as a streamed one's reads: the task's stdout from the report, an
    /// error object's text as airlock's stderr line, whose exit code it must carry. Output
    /// that is no JSON object stays as it is, and fails the judgement unless airlock said the
    /// report could not be written (exit 2).
    fn read_report(&mut self) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&self.stdout) else {
            if !(self.code == Some(2) && self.stderr.contains("could not be written")) {
                self.stderr = format!("no JSON on stdout: {:?}; {}", self.stdout, self.stderr);
                self.code = Some(-1);
            }
            return;
        };
        let carried = v["exit_code"].as_i64().map(|c| c as i32);
        match v["error"].as_str() {
            Some(error) if carried == self.code => {
                let kind = v["error_kind"].as_str().unwrap_or("");
                self.stdout.clear();
                self.stderr = match kind {
                    "setup" => format!("airlock: setup failed: {error}\n{}", self.stderr),
                    _ => format!("airlock: {error}\n{}", self.stderr),
                };
            }
            Some(_) => {
                self.stderr = format!("an error object whose exit_code is not airlock's: {v}");
                self.code = Some(-1);
            }
            None => match v["stdout"].as_str() {
                Some(out) if carried == self.code || carried.is_none() => {
                    self.stdout = out.to_string();
                }
                _ => {
                    self.stderr = format!("a report that is not the run's: {v}");
                    self.code = Some(-1);
                }
            },
        }
    }
}

struct Case {
    who: Launcher,
    /// `airlock run --json`: the outcome is read from the report (or the error object).
    json: bool,
    out: tempfile::TempDir,
    host_ns: String,
    mark: String,
}

impl Case {
    fn new(who: Launcher, json: bool) -> Case {
        let out = tmpdir();
        std::fs::set_permissions(
            out.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let host_ns = ["user", "mnt", "net", "pid", "ipc", "uts", "cgroup"]
            .iter()
            .map(|n| {
                std::fs::read_link(format!("/proc/self/ns/{n}"))
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect::<Vec<_>>()
            .join(" ");
        let mark = format!("fault-injection-{}-{who:?}-{json}", std::process::id());
        Case {
            who,
            json,
            out,
            host_ns,
            mark,
        }
    }

    /// One run of the probe under strace with `strace_args`.
    fn run(&self, strace_args: &[&str]) -> Outcome {
        use std::os::unix::process::ExitStatusExt;
        let out = self.out.path();
        for f in ["view", "view.tmp"] {
            let _ = std::fs::remove_file(out.join(f));
        }
        let script =
            format!("{{ {PROBE}\n}} > /out/view.tmp && mv /out/view.tmp /out/view && echo ran");
        let bind = format!("{}:/out", out.display());
        let mut c = host_command(self.who, "strace");
        c.args(["-f", "-qq", "-b", "execve"])
            .args(strace_args)
            .arg(binary())
            .arg("run")
            .args(self.json.then_some("--json"))
            .args(["--bind", &bind, "--", "sh", "-c", &script, "probe"])
            .args([&self.host_ns, &self.mark])
            // The launcher, its helpers and the init carry the mark in their environment.
            .env("AIRLOCK_FAULT_MARK", &self.mark)
            .stdin(Stdio::null());
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let _steady = host_mounts_steady();
        let mut child = c.spawn().unwrap();
        let pipes = [
            drain(child.stdout.take().unwrap()),
            drain(child.stderr.take().unwrap()),
        ];
        let status = wait_until(&mut child, Instant::now() + Duration::from_secs(30));
        // strace, killed, lets go of the launcher: it and its sandbox are ended here, so that
        // a hang is a finding rather than a process left for the tests that run after.
        let hung = status.is_none();
        if hung {
            self.end_left();
        }
        let [out_pipe, err_pipe] =
            pipes.map(|p| String::from_utf8_lossy(&p.join().unwrap()).into_owned());
        let mut o = Outcome {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            stdout: out_pipe,
            stderr: err_pipe,
            view: std::fs::read_to_string(out.join("view")).ok(),
            hung,
        };
        if self.json {
            o.read_report();
        }
        o
    }

    /// Kill the processes of this case left on the host; what they were.
    fn end_left(&self) -> Vec<String> {
        let left = self.left();
        for p in &left {
            let pid = p.split(' ').next().unwrap();
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        left
    }

    /// Host processes whose command line or environment holds this case's mark.
    fn left(&self) -> Vec<String> {
        let mut left = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let read = |f: &str| std::fs::read(e.path().join(f)).unwrap_or_default();
            let (cmdline, environ) = (read("cmdline"), read("environ"));
            let mark = self.mark.as_bytes();
            let holds = |b: &[u8]| b.windows(mark.len()).any(|w| w == mark);
            if holds(&cmdline) || holds(&environ) {
                left.push(format!("{name} {}", String::from_utf8_lossy(&cmdline)));
            }
        }
        left
    }
}

/// The calls of an strace log (`-f`) to fail, by name: the most any one process made, less
/// the C library's start, the launcher's calls before its first `getpid` (the first call of
/// airlock's own main, sys.rs): as the Nth call fails in every process, failing those would
/// stop every run before airlock's code.
fn calls(log: &Path) -> BTreeMap<String, (usize, usize)> {
    let mut per: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut launcher = None;
    let mut start: BTreeMap<String, usize> = BTreeMap::new();
    let mut started = false;
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let mut words = line.splitn(2, char::is_whitespace);
        let (Some(pid), Some(rest)) = (words.next(), words.next()) else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(name) = rest.split('(').next() else {
            continue;
        };
        if rest.contains('(')
            && !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            *per.entry((pid.to_string(), name.to_string())).or_default() += 1;
            let launcher = launcher.get_or_insert_with(|| pid.to_string());
            if pid == launcher && !started {
                started = name == "getpid";
                // The exec that started the launcher is strace's, not one to fail.
                if !started && name != "execve" {
                    *start.entry(name.to_string()).or_default() += 1;
                }
            }
        }
    }
    assert!(started, "no getpid by the launcher in {log:?}");
    let mut most = BTreeMap::new();
    for ((_, name), n) in per {
        let first = start.get(&name).copied().unwrap_or(0);
        let m = most.entry(name).or_insert((first, 0));
        m.1 = m.1.max(n);
    }
    most
}

/// The view without its limits, which a root caller's run may take from rlimits when its
/// cgroup cannot be made (the documented fallback).
fn without_limits(view: &str) -> &str {
    view.split("\nlimits\n").next().unwrap_or(view)
}

fn limits(view: &str) -> &str {
    view.split("\nlimits\n").nth(1).unwrap_or("")
}

fn every_failed_call_keeps_the_boundary(who: Launcher, json: bool) {
    let started = Instant::now();
    let case = Case::new(who, json);
    // The undisturbed run, traced: its view, and the calls to fail.
    let log = case.out.path().join("trace.log");
    let base = case.run(&["-o", log.to_str().unwrap()]);
    assert_eq!(
        base.code,
        Some(0),
        "{who:?}: the undisturbed run: {}",
        base.stderr
    );
    assert_eq!(base.stdout, "ran\n", "{who:?}: {}", base.stderr);
    let base_view = base.view.expect("the undisturbed run wrote no view");
    // Its positive controls: the probe sees what the boundary promises.
    for line in [
        "ns user new",
        "ns mnt new",
        "ns net new",
        "ns pid new",
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "\nlo\n",
    ] {
        assert!(
            base_view.contains(line),
            "{who:?}: {line:?} not in {base_view}"
        );
    }
    assert!(
        !base_view.contains("HOST") && !base_view.contains("WROTE"),
        "{base_view}"
    );
    // Control: the same probe run on the host (as uid 65534, which may write none of the
    // paths it tries) reads the host's namespaces, no no_new_privs and no filter: what it
    // would print of a sandbox that lacked them, so a weaker sandbox cannot pass for this one.
    let host = host_command(Launcher::Unprivileged, "sh")
        .args(["-c", PROBE, "probe", &case.host_ns])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let host_view = stdout(&host);
    for line in [
        "ns user HOST",
        "ns mnt HOST",
        "ns net HOST",
        "ns pid HOST",
        "NoNewPrivs:\t0",
        "Seccomp:\t0",
    ] {
        assert!(
            host_view.contains(line),
            "control: {line:?} not in {host_view}{}",
            stderr(&host)
        );
    }
    // An unprivileged caller's limits: what a root caller's run falls back to.
    let rlimits = match who {
        Launcher::Root => {
            let uid = Case::new(Launcher::Unprivileged, json).run(&["-o", "/dev/null"]);
            limits(&uid.view.expect("uid 65534's run wrote no view")).to_string()
        }
        Launcher::Unprivileged => limits(&base_view).to_string(),
    };
    let counts = calls(&log);
    std::fs::remove_file(&log).unwrap();
    let points: Vec<(&str, usize)> = counts
        .iter()
        .filter(|(name, _)| !NOT_FAILED.contains(&name.as_str()))
        .flat_map(|(name, &(first, n))| (first + 1..=n).map(move |i| (name.as_str(), i)))
        .collect();
    // The setup's calls, at the least: a trace that lost them would test nothing. (The
    // filter goes in by prctl(PR_SET_SECCOMP), one of the prctl calls.)
    for name in ["clone3", "mount", "pivot_root", "capset", "prctl"] {
        assert!(
            counts.contains_key(name),
            "{who:?}: no {name} traced: {counts:?}"
        );
    }
    assert!(points.len() > 300, "{who:?}: {} calls", points.len());

    let mut bad = Vec::new();
    let mut ran = 0;
    for &(name, n) in &points {
        let inject = format!("inject={name}:error=EPERM:when={n}");
        let o = case.run(&["-o", "/dev/null", "-e", &inject]);
        let mut why = Vec::new();
        if o.hung {
            why.push("still running after 30 s".to_string());
        }
        if o.stderr.contains("panicked") || o.signal.is_some() {
            why.push("a panic or a crash".to_string());
        }
        match &o.view {
            Some(view) => {
                ran += 1;
                let same = view == &base_view
                    || (without_limits(view) == without_limits(&base_view)
                        && limits(view) == rlimits);
                if !same {
                    why.push(format!("the task ran in another sandbox:\n{view}"));
                }
                let delivered = o.code == Some(0) && o.stdout == "ran\n";
                let said = match o.code {
                    Some(2) => {
                        o.stderr.contains("not delivered whole")
                            || o.stderr.contains("could not be written")
                    }
                    // The init's reap or its report of the task's end was failed, or the
                    // launcher's memory ran out (a JSON run's capture grows as it reads).
                    Some(125) => {
                        o.stderr.contains("without reporting the task's end")
                            || (name == "mmap" && o.stderr.contains("airlock: out of memory"))
                    }
                    _ => false,
                };
                if !(delivered || said) {
                    why.push("the task ran, but its output or status was lost".into());
                }
            }
            None => {
                // The Nth call fails in every process: the launcher's own may be the one
                // that carried the init's report (recvmsg) or writes the message (write).
                let said = match o.code {
                    Some(125) => {
                        o.stderr.contains("airlock: setup failed: step")
                            || (name == "mmap" && o.stderr.contains("airlock: out of memory"))
                            || (name == "recvmsg" && o.stderr.contains("without a report"))
                            || name == "write"
                    }
                    Some(126) => name == "execve",
                    Some(2) => o.stderr.contains("airlock: "),
                    _ => false,
                };
                if !said {
                    why.push("the task did not run, and airlock did not say which step".into());
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut left = case.left();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            left = case.left();
        }
        if !left.is_empty() {
            why.push(format!("left on the host: {:?}", case.end_left()));
        }
        if !why.is_empty() {
            bad.push(format!(
                "{name} #{n}: {} (exit {:?}, signal {:?})\nstderr: {}",
                why.join("; "),
                o.code,
                o.signal,
                truncate_for_message(&o.stderr)
            ));
        }
    }
    eprintln!(
        "{who:?} (--json: {json}): {} calls failed one at a time in {:?}: the task ran {ran} \
         times",
        points.len(),
        started.elapsed()
    );
    assert!(
        bad.is_empty(),
        "{who:?}, --json: {json}:\n{}",
        bad.join("\n\n")
    );
    // Both outcomes were seen: failures that stop the run, and ones it survives whole.
    assert!(
        ran > 0 && ran < points.len(),
        "{who:?}, --json: {json}: ran {ran}"
    );
}

#[test]
fn every_failed_call_keeps_the_boundary_as_root() {
    every_failed_call_keeps_the_boundary(Launcher::Root, false);
}

#[test]
fn every_failed_call_keeps_the_boundary_as_uid_65534() {
    every_failed_call_keeps_the_boundary(Launcher::Unprivileged, false);
}

/// The same for a JSON run: the launcher captures the output and writes one report, whose
/// own calls (and a failure's error object) are failed too.
#[test]
fn every_failed_call_keeps_the_boundary_as_root_in_json() {
    every_failed_call_keeps_the_boundary(Launcher::Root, true);
}

#[test]
fn every_failed_call_keeps_the_boundary_as_uid_65534_in_json() {
    every_failed_call_keeps_the_boundary(Launcher::Unprivileged, true);
}
