//! The front ends that build no sandbox of their own, driven through the real binary:
//! `demo`, `audit docker|bwrap`, `docker-args`, `explain`, and the command-line surface
//! (`--help`, unknown subcommands and flags). The per-rule audit findings are pinned by the
//! unit tests in src/audit.rs; here each front end is checked end to end: exit status, exact
//! output, and the hand-offs between them (docker-args into audit, shell quoting into sh).

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{BOTH, Launcher, airlock, landlock_abi, stderr, stdout};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The usual shortcut an agent framework writes, as an argument vector.
const SHORTCUT: &[&str] = &[
    "docker",
    "run",
    "-e",
    "AWS_SECRET_ACCESS_KEY",
    "-v",
    "/home/dev/project:/work",
    "-w",
    "/work",
    "python:3.12-slim",
    "python",
    "probe.py",
];

/// The shortcut's five findings, in order, as `audit docker` prints them.
const SHORTCUT_FINDING_LINES: &[&str] = &[
    "finding: forwards host environment variables (-e AWS_SECRET_ACCESS_KEY)",
    "finding: network is not none",
    "finding: mounts /home/dev/project read-write (-v /home/dev/project:/work)",
    "finding: runs as root inside the container",
    "finding: root filesystem is writable",
];

const SHORTCUT_RULES: &[&str] = &[
    "env-forwarded",
    "network-not-none",
    "host-mount-rw",
    "root-user",
    "rootfs-writable",
];

const SHORTCUT_MESSAGES: &[&str] = &[
    "forwards host environment variables",
    "network is not none",
    "mounts /home/dev/project read-write",
    "runs as root inside the container",
    "root filesystem is writable",
];

const DEFAULT_DOCKER_LINE: &str = "docker run --rm --network none --read-only \
    --tmpfs /tmp:rw,noexec,nosuid,size=64m --cap-drop ALL --security-opt no-new-privileges \
    --user 65534:65534 --pids-limit 256 --memory 512m -v /tmp/airlock-scratch:/work:rw \
    -w /work python:3.12-slim";

const CLEAN_LINE: &str = "clean: no way for the host to leak in was found";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Run `cmd` with stdin closed; kill it and fail if it has not finished within `limit`.
fn output_within(cmd: &mut Command, limit: Duration, what: &str) -> (Output, Duration) {
    let start = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: spawn: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => (out.unwrap(), start.elapsed()),
        Err(_) => {
            // Our own child, not yet reaped (the waiting thread is still blocked on it).
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{what} did not finish within {limit:?}");
        }
    }
}

/// Run `cmd` with `input` on its stdin.
fn with_stdin(cmd: &mut Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sink = child.stdin.take().unwrap();
    let data = input.to_string();
    let writer = std::thread::spawn(move || {
        // A child that stops reading early (a parse error) may close the pipe: not our failure.
        let _ = sink.write_all(data.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `airlock ARGS` as root with stdin closed.
fn root(args: &[&str]) -> Output {
    airlock(Launcher::Root, args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `airlock ARGS` as root with `input` on stdin.
fn root_stdin(args: &[&str], input: &str) -> Output {
    with_stdin(&mut airlock(Launcher::Root, args), input)
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn show(o: &Output) -> String {
    format!(
        "status={:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", show(o)))
}

/// The argument vector printed by `docker-args --json`.
fn json_argv(o: &Output) -> Vec<String> {
    json_of(o)
        .as_array()
        .unwrap_or_else(|| panic!("not a JSON array:\n{}", show(o)))
        .iter()
        .map(|v| v.as_str().expect("a JSON string").to_string())
        .collect()
}

fn lines_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// A world-readable file holding `text` (the unprivileged launcher may read it too).
fn readable_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .prefix("airlock-frontends")
        .tempfile()
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.flush().unwrap();
    std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    f
}

// ---------------------------------------------------------------------------------------------
// 1. demo
// ---------------------------------------------------------------------------------------------

/// The demo's temp dirs live in /tmp under this prefix (`airlock-demo-home…`, `airlock-demo-cwd…`).
const DEMO_PREFIX: &str = "airlock-demo";
const DEMO_DEADLINE: Duration = Duration::from_secs(5);

/// The demos in this file run one at a time so the /tmp listings compare cleanly.
static DEMO_LOCK: Mutex<()> = Mutex::new(());

fn demo_dirs() -> BTreeSet<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(DEMO_PREFIX))
        .collect()
}

/// Fail if a demo dir that did not exist in `before` still exists. A dir seen only briefly
/// may belong to someone else's demo running at the same time: one that leaked stays.
fn assert_no_new_demo_dirs(before: &BTreeSet<String>, what: &str) {
    let mut new: Vec<String> = demo_dirs().difference(before).cloned().collect();
    let give_up = Instant::now() + Duration::from_secs(3);
    while !new.is_empty() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
        new.retain(|n| std::path::Path::new("/tmp").join(n).exists());
    }
    assert!(new.is_empty(), "{what}: temp dirs left in /tmp: {new:?}");
}

/// `airlock demo [--json]` as `who`, under the deadline, with the /tmp leak check around it.
fn run_demo(who: Launcher, json: bool) -> Output {
    let _serial = DEMO_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = demo_dirs();
    let args: &[&str] = if json { &["demo", "--json"] } else { &["demo"] };
    let what = format!("{who:?} airlock {}", args.join(" "));
    let mut cmd = airlock(who, args);
    // The check below looks in /tmp: make sure that is where the demo makes its dirs.
    cmd.env("TMPDIR", "/tmp");
    let (out, took) = output_within(&mut cmd, DEMO_DEADLINE, &what);
    eprintln!("{what}: {took:?}");
    assert_eq!(code(&out), Some(0), "{what}:\n{}", show(&out));
    assert_no_new_demo_dirs(&before, &what);
    out
}

/// The demo's temp dirs in `dir`.
fn demo_dirs_in(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(DEMO_PREFIX))
        .collect()
}

/// A demo killed before it removed its temp dirs (SIGKILL here; a SIGTERM or Ctrl-C, whose
/// default action skips the removal, alike) left them in /tmp, its fake credentials among
/// them, for good. The next demo removes those of demos that no longer run, and keeps those
/// of one that still runs (stopped here). Each demo runs with a TMPDIR of its own, 1777 as
/// /tmp is: no other test's demo shares it.
#[test]
fn a_killed_demos_temp_dirs_are_removed_by_the_next_demo() {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::Pid;
    for who in BOTH {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let demo = || {
            let mut cmd = airlock(who, &["demo"]);
            cmd.env("TMPDIR", tmp.path());
            cmd
        };
        // Stop a demo once its home exists (it may have finished first: try again, bounded).
        let mut stopped = None;
        for _ in 0..20 {
            let mut child = demo()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let pid = Pid::from_raw(child.id() as i32);
            let give_up = Instant::now() + DEMO_DEADLINE;
            while demo_dirs_in(tmp.path()).is_empty() && Instant::now() < give_up {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
            }
            // Listed once it has stopped: it may have been removing them.
            let _ = kill(pid, Signal::SIGSTOP);
            match waitpid(pid, Some(WaitPidFlag::WUNTRACED)) {
                Ok(WaitStatus::Stopped(..)) if !demo_dirs_in(tmp.path()).is_empty() => {
                    stopped = Some(child);
                    break;
                }
                Ok(WaitStatus::Stopped(..)) => {
                    let _ = kill(pid, Signal::SIGKILL);
                    let _ = child.wait();
                }
                _ => {} // it ended first, and is reaped
            }
        }
        let mut child =
            stopped.unwrap_or_else(|| panic!("{who:?}: no demo was caught with its dirs"));
        let left = demo_dirs_in(tmp.path());
        let what = format!("{who:?} demo beside a stopped one");
        let (out, _) = output_within(&mut demo(), DEMO_DEADLINE, &what);
        assert_eq!(code(&out), Some(0), "{what}:\n{}", show(&out));
        assert_eq!(demo_dirs_in(tmp.path()), left, "{what}: a live demo's dirs");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            demo_dirs_in(tmp.path()),
            left,
            "{who:?}: the killed demo's dirs"
        );
        let what = format!("{who:?} demo after a killed one");
        let (out, _) = output_within(&mut demo(), DEMO_DEADLINE, &what);
        assert_eq!(code(&out), Some(0), "{what}:\n{}", show(&out));
        let now = demo_dirs_in(tmp.path());
        assert!(now.is_empty(), "{what}: left {now:?}");
    }
}

/// One demo block as printed: its heading, the probe lines observed, and the `why` notes.
#[derive(Debug)]
struct DemoBlock {
    heading: String,
    observed: Vec<String>,
    why: Vec<String>,
}

impl DemoBlock {
    fn line(&self, pred: impl Fn(&str) -> bool, what: &str) -> &str {
        self.observed
            .iter()
            .find(|l| pred(l))
            .unwrap_or_else(|| panic!("block {:?}: no line {what}: {self:#?}", self.heading))
    }

    fn saw(&self, needle: &str) -> bool {
        self.observed.iter().any(|l| l.contains(needle))
    }
}

fn parse_demo_text(text: &str) -> Vec<DemoBlock> {
    let mut blocks: Vec<DemoBlock> = Vec::new();
    let mut expect_command = false;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("== ") {
            blocks.push(DemoBlock {
                heading: heading.to_string(),
                observed: vec![],
                why: vec![],
            });
            expect_command = true;
            continue;
        }
        let body = line.trim();
        if body.is_empty() {
            continue;
        }
        let block = blocks
            .last_mut()
            .unwrap_or_else(|| panic!("text before the first heading: {line:?}"));
        if expect_command {
            assert!(
                body.starts_with("$ "),
                "block {:?}: the line after the heading is not the command: {line:?}",
                block.heading
            );
            expect_command = false;
        } else if let Some(note) = body.strip_prefix("why: ") {
            block.why.push(note.to_string());
        } else {
            block.observed.push(body.to_string());
        }
    }
    blocks
}

fn check_demo_blocks(blocks: &[DemoBlock], what: &str) {
    let headings: Vec<&str> = blocks.iter().map(|b| b.heading.as_str()).collect();
    assert_eq!(blocks.len(), 4, "{what}: headings {headings:?}");
    for (i, b) in blocks.iter().enumerate() {
        assert!(
            b.heading.starts_with(&format!("{}. ", i + 1)),
            "{what}: heading {i} out of order: {headings:?}"
        );
    }

    // 1. On the host: everything leaks.
    let b = &blocks[0];
    let creds = b.line(|l| l.contains(": readable, "), "'readable, N bytes'");
    let n: u64 = creds
        .split(": readable, ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" bytes"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: not 'readable, N bytes': {creds:?}"));
    assert!(n > 0, "{what}: {creds:?}");
    b.line(
        |l| l.starts_with("AWS_SECRET_ACCESS_KEY: present"),
        "AWS_SECRET_ACCESS_KEY: present",
    );
    b.line(
        |l| l.starts_with("fetch ") && l.ends_with(": reached, status 200"),
        "'reached, status 200'",
    );

    // 2. Inside airlock run: nothing does, and the result file comes back.
    let b = &blocks[1];
    b.line(
        |l| l.starts_with("credentials ") && l.ends_with(": no such file"),
        "credentials: no such file",
    );
    b.line(
        |l| l == "AWS_SECRET_ACCESS_KEY: absent",
        "AWS_SECRET_ACCESS_KEY: absent",
    );
    b.line(
        |l| l.starts_with("fetch ") && l.contains(": refused"),
        "fetch: refused",
    );
    b.line(
        |l| l.starts_with("returned file result.txt"),
        "returned file result.txt",
    );
    assert!(
        !b.saw("present") && !b.saw("readable") && !b.saw("reached") && !b.saw("warned"),
        "{what}: something leaked into block 2, or airlock warned of it: {b:#?}"
    );

    // 3. The secret forwarded on purpose crosses, and airlock says so; the file and the
    // server still do not.
    let b = &blocks[2];
    b.line(
        |l| l.starts_with("airlock warned: AWS_SECRET_ACCESS_KEY crosses into the sandbox"),
        "airlock warned: AWS_SECRET_ACCESS_KEY crosses",
    );
    b.line(
        |l| l.starts_with("AWS_SECRET_ACCESS_KEY: present"),
        "AWS_SECRET_ACCESS_KEY: present",
    );
    b.line(
        |l| l.starts_with("credentials ") && l.ends_with(": no such file"),
        "credentials: no such file",
    );
    b.line(
        |l| l.starts_with("fetch ") && l.contains(": refused"),
        "fetch: refused",
    );
    // The audit of the same line names the forwarded secret before anything runs.
    b.line(
        |l| l == "airlock audit airlock of that line: 1 finding",
        "airlock audit airlock of that line: 1 finding",
    );
    b.line(
        |l| {
            l.trim_start().starts_with(
                "audit finding: forwards AWS_SECRET_ACCESS_KEY, a credential by its name",
            )
        },
        "audit finding: forwards AWS_SECRET_ACCESS_KEY",
    );
    assert!(
        !b.saw("readable") && !b.saw("reached"),
        "{what}: the file or the server leaked into block 3: {b:#?}"
    );
    assert_eq!(b.why.len(), 3, "{what}: block 3 'why:' lines: {b:#?}");

    // 4. The docker policy line and the audit of the shortcut.
    let b = &blocks[3];
    b.line(
        |l| l == "audit of that line: 0 findings",
        "audit of that line: 0 findings",
    );
    b.line(
        |l| l == "audit of the shortcut: 5 findings",
        "audit of the shortcut: 5 findings",
    );
    let findings: Vec<&str> = b
        .observed
        .iter()
        .filter_map(|l| l.trim_start().strip_prefix("finding: "))
        .collect();
    assert_eq!(findings, SHORTCUT_MESSAGES, "{what}: {b:#?}");
}

#[test]
fn demo_text_passes_for_both_launchers() {
    for who in BOTH {
        let out = run_demo(who, false);
        let text = stdout(&out);
        // The four headings, each once, in order.
        let starts: Vec<usize> = (1..=4)
            .map(|i| {
                let h = format!("== {i}.");
                assert_eq!(text.matches(&h).count(), 1, "{who:?}: {h}:\n{text}");
                text.find(&h).unwrap()
            })
            .collect();
        assert!(starts.windows(2).all(|w| w[0] < w[1]), "{who:?}:\n{text}");
        check_demo_blocks(&parse_demo_text(&text), &format!("{who:?} demo"));
    }
}

#[test]
fn demo_json_has_four_blocks_for_both_launchers() {
    for who in BOTH {
        let out = run_demo(who, true);
        let doc = json_of(&out);
        let demo = doc["demo"]
            .as_array()
            .unwrap_or_else(|| panic!("{who:?}: no \"demo\" array: {doc}"));
        assert_eq!(demo.len(), 4, "{who:?}: {doc}");
        let mut blocks = Vec::new();
        for (i, b) in demo.iter().enumerate() {
            let obj = b.as_object().unwrap_or_else(|| panic!("{who:?}: {b}"));
            for key in ["heading", "command", "observed", "why", "exit_code"] {
                assert!(
                    obj.contains_key(key),
                    "{who:?}: block {i} has no {key:?}: {b}"
                );
            }
            let texts = |key: &str| -> Vec<String> {
                b[key]
                    .as_array()
                    .unwrap_or_else(|| panic!("{who:?}: block {i} {key:?} not an array: {b}"))
                    .iter()
                    .map(|v| v.as_str().expect("string").to_string())
                    .collect()
            };
            assert!(!texts("command").is_empty(), "{who:?}: {b}");
            // Blocks 1-3 ran the probe (exit 0); block 4 ran nothing.
            let want = if i < 3 { Value::from(0) } else { Value::Null };
            assert_eq!(b["exit_code"], want, "{who:?}: block {i}: {b}");
            blocks.push(DemoBlock {
                heading: b["heading"].as_str().expect("heading").to_string(),
                observed: texts("observed"),
                why: texts("why"),
            });
        }
        check_demo_blocks(&blocks, &format!("{who:?} demo --json"));
    }
}

// ---------------------------------------------------------------------------------------------
// 2. audit docker
// ---------------------------------------------------------------------------------------------

fn assert_shortcut_text(o: &Output, what: &str) {
    assert_eq!(code(o), Some(1), "{what}:\n{}", show(o));
    let text = stdout(o);
    assert_eq!(
        lines_starting(&text, "finding:"),
        SHORTCUT_FINDING_LINES,
        "{what}:\n{text}"
    );
    assert!(
        lines_starting(&text, "clean:").is_empty(),
        "{what}:\n{text}"
    );
}

#[test]
fn audit_docker_pins_the_usual_shortcut_in_every_input_form() {
    // After --.
    let mut args = vec!["audit", "docker", "--"];
    args.extend_from_slice(SHORTCUT);
    let after = root(&args);
    assert_shortcut_text(&after, "after --");

    // A JSON array in a file.
    let file = readable_file(&Value::from(strings(SHORTCUT)).to_string());
    let path = file.path().to_str().unwrap();
    let from_file = root(&["audit", "docker", "--file", path]);
    assert_shortcut_text(&from_file, "--file JSON");

    // A shell-quoted line on stdin, quoted in several ways that mean the same words.
    let line = "docker run -e 'AWS_SECRET_ACCESS_KEY' -v \"/home/dev/project:/work\" \
                -w /wo\\rk python:3.12-slim python probe.py\n";
    let from_stdin = root_stdin(&["audit", "docker", "--file", "-"], line);
    assert_shortcut_text(&from_stdin, "--file - shell line");

    // The three forms are the same audit.
    assert_eq!(stdout(&after), stdout(&from_file));
    assert_eq!(stdout(&after), stdout(&from_stdin));
    // The JSON array works on stdin too, and the unprivileged caller reads the file.
    let json_stdin = root_stdin(
        &["audit", "docker", "--file", "-"],
        &Value::from(strings(SHORTCUT)).to_string(),
    );
    assert_eq!(stdout(&json_stdin), stdout(&after));
    let unpriv = airlock(Launcher::Unprivileged, &["audit", "docker", "--file", path])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&unpriv), stdout(&after), "{}", show(&unpriv));
    assert_eq!(code(&unpriv), Some(1));
}

#[test]
fn audit_docker_json_names_the_rules() {
    let mut args = vec!["audit", "docker", "--json", "--"];
    args.extend_from_slice(SHORTCUT);
    let out = root(&args);
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let v = json_of(&out);
    assert_eq!(v["clean"], Value::Bool(false), "{v}");
    let findings = v["findings"].as_array().expect("findings array");
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    let messages: Vec<&str> = findings
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert_eq!(rules, SHORTCUT_RULES, "{v}");
    assert_eq!(messages, SHORTCUT_MESSAGES, "{v}");
    assert_eq!(findings[0]["arg"], "-e AWS_SECRET_ACCESS_KEY");
    assert_eq!(findings[2]["arg"], "-v /home/dev/project:/work");
    assert!(v["advice"].is_array(), "{v}");
}

#[test]
fn audit_docker_accepts_docker_args_output() {
    // The text line.
    let line = root(&["docker-args"]);
    assert_eq!(code(&line), Some(0), "{}", show(&line));
    let audited = root_stdin(&["audit", "docker", "--file", "-"], &stdout(&line));
    assert_eq!(code(&audited), Some(0), "{}", show(&audited));
    assert_eq!(stdout(&audited), format!("{CLEAN_LINE}\n"));
    assert!(lines_starting(&stdout(&audited), "advice:").is_empty());

    // The JSON array.
    let array = root(&["docker-args", "--json"]);
    assert_eq!(code(&array), Some(0), "{}", show(&array));
    let audited = root_stdin(&["audit", "docker", "--file", "-"], &stdout(&array));
    assert_eq!(code(&audited), Some(0), "{}", show(&audited));
    assert_eq!(stdout(&audited), format!("{CLEAN_LINE}\n"));

    // With a command after the image (which is the container's business, not docker's).
    let with_cmd = root(&["docker-args", "--", "python", "probe.py", "--privileged"]);
    let audited = root_stdin(&["audit", "docker", "--file", "-"], &stdout(&with_cmd));
    assert_eq!(code(&audited), Some(0), "{}", show(&audited));
    assert_eq!(stdout(&audited), format!("{CLEAN_LINE}\n"));

    // And as JSON: clean, nothing found, nothing advised.
    let audited = root_stdin(
        &["audit", "docker", "--json", "--file", "-"],
        &stdout(&array),
    );
    assert_eq!(code(&audited), Some(0), "{}", show(&audited));
    assert_eq!(
        json_of(&audited),
        serde_json::json!({"findings": [], "advice": [], "clean": true})
    );

    // A scratch the audit would refuse for more than being writable is refused before any
    // line is printed (stop 47's fuzzing: `--scratch /` printed a line that mounts the Docker
    // socket). Control: a directory of its own is printed.
    for (scratch, rule) in [
        ("/", "would mount the host's / (and /usr in it) read-write"),
        ("/var/run", "(docker-socket: "),
    ] {
        let out = root(&["docker-args", "--scratch", scratch]);
        assert_eq!(code(&out), Some(2), "{scratch}: {}", show(&out));
        assert!(
            stdout(&out).is_empty() && stderr(&out).contains(rule),
            "{scratch}: {}",
            show(&out)
        );
    }
    // Nor the host's system trees or homes, or what holds them, which the audit has no rule
    // for (the sign-off review). Controls: a job directory under /var or /home is printed.
    for scratch in [
        "/etc",
        "/usr/local/x",
        "/var",
        "/home",
        "/boot",
        "/srv/../etc",
    ] {
        let out = root(&["docker-args", "--scratch", scratch]);
        assert_eq!(code(&out), Some(2), "{scratch}: {}", show(&out));
        assert!(stdout(&out).is_empty(), "{scratch}: {}", show(&out));
    }
    // Each named as what it is: a tree, a part of one (a review's mutant named /etc as
    // "/etc (and /etc in it)").
    for (scratch, says) in [
        ("/etc", "would mount the host's /etc read-write"),
        (
            "/usr/local/x",
            "would mount the host's /usr (a part of it) read-write",
        ),
    ] {
        let out = root(&["docker-args", "--scratch", scratch]);
        assert!(stderr(&out).contains(says), "{scratch}: {}", show(&out));
    }
    for scratch in ["/srv/job-1", "/var/lib/ci/job-1", "/home/ci/job-1"] {
        let out = root(&["docker-args", "--scratch", scratch]);
        assert_eq!(code(&out), Some(0), "control {scratch}: {}", show(&out));
    }
}

#[test]
fn audit_docker_refuses_unparsable_input() {
    for (input, why) in [
        ("docker run 'alpine\n", "unterminated quote"),
        ("docker run \"alpine\n", "unterminated double quote"),
        ("docker run $(evil)\n", "command substitution"),
        ("docker run `evil`\n", "backquote substitution"),
        ("docker run alpine | sh\n", "pipe"),
        ("ls -l\n", "not docker"),
        ("[\"docker\", \"run\", 7]", "JSON array with a non-string"),
        ("[\"docker\", \"run\"", "broken JSON"),
    ] {
        let out = root_stdin(&["audit", "docker", "--file", "-"], input);
        assert_eq!(code(&out), Some(2), "{why}: {input:?}:\n{}", show(&out));
        assert!(
            stderr(&out).starts_with("airlock audit: "),
            "{why}: {input:?}:\n{}",
            show(&out)
        );
        assert!(stdout(&out).is_empty(), "{why}:\n{}", show(&out));
    }
    // The same refusals after --.
    let out = root(&["audit", "docker", "--", "ls", "-l"]);
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    assert!(stderr(&out).contains("ls -l"), "{}", show(&out));
    // The specific refusals name what was wrong.
    let out = root_stdin(&["audit", "docker", "--file", "-"], "docker run $(evil)");
    assert!(stderr(&out).contains("$("), "{}", show(&out));
    let out = root_stdin(&["audit", "docker", "--file", "-"], "docker run 'x");
    assert!(stderr(&out).contains("unterminated"), "{}", show(&out));
    // An empty input (an unset variable, a template that rendered to nothing) says so; it
    // said "it starts with " and nothing after (bwrap: "has no command to run").
    for (kind, input) in [("docker", ""), ("bwrap", " \n"), ("docker", "[]")] {
        let out = root_stdin(&["audit", kind, "--file", "-"], input);
        assert_eq!(code(&out), Some(2), "{kind} {input:?}: {}", show(&out));
        let says = "airlock audit: -: holds no command line\n";
        assert_eq!(stderr(&out), says, "{kind} {input:?}: {}", show(&out));
    }

    // With --json the error is a JSON object on stdout, still exit 2.
    let out = root_stdin(&["audit", "docker", "--json", "--file", "-"], "ls -l");
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    let v = json_of(&out);
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("ls -l")),
        "{v}"
    );
}

#[test]
fn audit_needs_exactly_one_command_line() {
    for kind in ["docker", "bwrap", "airlock"] {
        let out = root(&["audit", kind]);
        assert_eq!(code(&out), Some(2), "{kind}:\n{}", show(&out));
        assert!(
            stderr(&out).contains("no command line given"),
            "{kind}:\n{}",
            show(&out)
        );
        // Both --file and words after --: ambiguous.
        let out = root(&["audit", kind, "--file", "-", "--", kind, "x"]);
        assert_eq!(code(&out), Some(2), "{kind}:\n{}", show(&out));
        assert!(!stderr(&out).is_empty());
        // A file that cannot be read.
        let out = root(&["audit", kind, "--file", "/nonexistent/airlock-frontends"]);
        assert_eq!(code(&out), Some(2), "{kind}:\n{}", show(&out));
        assert!(
            stderr(&out).contains("/nonexistent/airlock-frontends"),
            "{kind}:\n{}",
            show(&out)
        );
    }
}

/// An `--input` of a file its owner keeps from other users is named, by `audit airlock` and by
/// the run's own warning, and the run shows why: a root caller's launcher opens the input with
/// root's rights and copies it into scratch, where the task reads it (the security-team
/// review: `--input s=/etc/shadow` audited clean). Controls: the same file bound read-only
/// stays unreadable to the task (uid 65534 on the host); a world-readable input is named by
/// neither; the caller's own 0600 file (a framework's temporary file) is not warned of, as
/// root or as uid 65534 (the sign-off review: every call had warned), but `/etc/shadow` is,
/// root's own as it is.
#[test]
fn an_input_kept_from_other_users_is_named_and_the_copy_shows_why() {
    let dir = common::tmpdir();
    // Another user's private file.
    let kept = common::write_file(&dir.path().join("kept"), b"ROOTONLY\n", 0o600);
    nix::unistd::chown(&kept, Some(nix::unistd::Uid::from_raw(1234)), None).unwrap();
    let open = common::write_file(&dir.path().join("open"), b"OPEN\n", 0o644);
    for (file, named) in [(&kept, true), (&open, false)] {
        let input = format!("s={}", file.display());
        let audit = root(&[
            "audit",
            "airlock",
            "--",
            "airlock",
            "run",
            "--timeout",
            "5s",
            "--input",
            &input,
            "--",
            "cat",
            "s",
        ]);
        assert_eq!(code(&audit), Some(i32::from(named)), "{}", show(&audit));
        assert_eq!(
            stdout(&audit).contains("kept from other users on this host (mode 0600"),
            named,
            "{}",
            show(&audit)
        );
        let run = root(&["run", "--json", "--input", &input, "--", "cat", "s"]);
        let report = json_of(&run);
        let warned = report["warnings"]
            .to_string()
            .contains("kept from the task's host identity (uid 65534)");
        assert_eq!(warned, named, "{}", show(&run));
        assert!(report["stdout"] == "ROOTONLY\n" || !named, "{}", show(&run));
    }
    // The caller's own 0600 file (a temporary file, as mkstemp makes them) is handed over on
    // purpose: root's is not warned of (the audit, which cannot know the caller, names it);
    // an unprivileged caller's task is the caller, which reads it anyway.
    let own = common::write_file(&dir.path().join("own"), b"OWN\n", 0o600);
    let input = format!("s={}", own.display());
    let run = root(&["run", "--json", "--input", &input, "--", "cat", "s"]);
    assert_eq!(
        json_of(&run)["warnings"],
        serde_json::json!([]),
        "{}",
        show(&run)
    );
    // A file of the host's /proc is, the caller's own as it is: /proc/self/environ is the
    // environment airlock keeps from the task (stop 47's fuzzing). Both callers; the copy
    // does hold the variable (the warning is no false alarm).
    for who in BOTH {
        let args = [
            "run",
            "--json",
            "--input",
            "e=/proc/self/environ",
            "--",
            "cat",
            "e",
        ];
        let out = airlock(who, &args)
            .env("SECRET_TOKEN", "x1")
            .output()
            .unwrap();
        let report = json_of(&out);
        assert!(
            report["stdout"]
                .as_str()
                .unwrap()
                .contains("SECRET_TOKEN=x1")
                && report["warnings"]
                    .to_string()
                    .contains("/proc/self/environ (copied in as e) is a file of the host's /proc"),
            "{who:?}: {}",
            show(&out)
        );
    }
    // A system secret is, root's own as it is.
    let run = root(&["run", "--json", "--input", "s=/etc/shadow", "--", "true"]);
    let warned = json_of(&run)["warnings"].to_string();
    assert!(
        warned.contains("/etc/shadow (copied in as s) is kept"),
        "{}",
        show(&run)
    );
    nix::unistd::chown(&own, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let input = format!("s={}", own.display());
    let args = ["run", "--json", "--input", &input, "--", "cat", "s"];
    let out = airlock(Launcher::Unprivileged, &args).output().unwrap();
    let report = json_of(&out);
    assert_eq!(report["stdout"], "OWN\n", "{}", show(&out));
    assert_eq!(report["warnings"], serde_json::json!([]), "{}", show(&out));
    // A file the caller cannot read is not copied in (run refuses it): `explain` does not
    // warn of it (the operator review), where a root caller's does (its control above).
    let args = ["explain", "--input", "s=/etc/shadow", "--", "true"];
    let out = airlock(Launcher::Unprivileged, &args).output().unwrap();
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert!(!show(&out).contains("warning"), "{}", show(&out));
    let bind = format!("{}:/x", kept.display());
    let run = root(&["run", "--json", "--ro-bind", &bind, "--", "cat", "/x"]);
    let report = json_of(&run);
    assert_eq!(report["exit_code"], 1, "{}", show(&run));
    assert!(
        report["stderr"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{}",
        show(&run)
    );
}

/// `audit airlock` names what an `airlock run` line opens, and each finding is shown real by
/// running the same line: a bind of a home hands the task its AWS key, `--env` of a token
/// hands it the token, an `--input` of the key file hands it the key. The control: the line
/// without them is clean, and the same probe finds nothing. Root and uid 65534 run the line
/// (the home and its key are world-readable, so both can read them through the bind).
#[test]
fn audit_airlock_names_what_a_run_line_opens_and_the_run_shows_it() {
    let home = common::tmpdir_named(std::path::Path::new("/home"), "airlock-test-audit");
    let aws = home.path().join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::set_permissions(&aws, std::fs::Permissions::from_mode(0o755)).unwrap();
    common::write_file(&aws.join("credentials"), b"HOSTKEY\n", 0o644);
    let (bind, key) = (
        format!("{}:/h", home.path().display()),
        format!("creds={}/credentials", aws.display()),
    );
    let probe = "cat /h/.aws/credentials 2>/dev/null || echo no-home; \
                 echo ${GITHUB_TOKEN:-no-token}; cat creds 2>/dev/null || echo no-input";
    let opened: &[&str] = &["--ro-bind", &bind, "--env", "GITHUB_TOKEN", "--input", &key];
    fn line<'a>(extra: &[&'a str], probe: &'a str) -> Vec<&'a str> {
        let mut line = vec!["run", "--json", "--timeout", "10s"];
        line.extend_from_slice(extra);
        line.extend_from_slice(&["--", "sh", "-c", probe]);
        line
    }
    for (extra, rules, seen) in [
        (
            opened,
            &["host-credentials", "env-credential", "input-credentials"][..],
            "HOSTKEY\nghp_audittoken\nHOSTKEY\n",
        ),
        (&[][..], &[][..], "no-home\nno-token\nno-input\n"),
    ] {
        let mut args = vec!["audit", "airlock", "--json", "--", "airlock"];
        args.extend(line(extra, probe));
        let out = root(&args);
        let findings = json_of(&out)["findings"].clone();
        let found: Vec<&str> = findings
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap())
            .collect();
        assert_eq!(found, rules, "{}", show(&out));
        assert_eq!(code(&out), Some(i32::from(!rules.is_empty())));
        for who in BOTH {
            let out = airlock(who, &line(extra, probe))
                .env("GITHUB_TOKEN", "ghp_audittoken")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(json_of(&out)["stdout"], seen, "{who:?}: {}", show(&out));
        }
    }
    // Named, never shown: a value set on the line is not printed.
    let out = root(&[
        "audit",
        "airlock",
        "--",
        "run",
        "--share-net",
        "--env",
        "API_KEY=sk-notprinted",
        "--",
        "true",
    ]);
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    assert!(!show(&out).contains("sk-notprinted"), "{}", show(&out));
    assert_eq!(
        lines_starting(&stdout(&out), "finding: ").len(),
        2,
        "{}",
        show(&out)
    );
}

/// `audit airlock` reads a line with `run`'s own parser and checks: what `run` refuses, the
/// audit refuses with the same words (exit 2), and a line that is not `airlock run` is
/// refused saying so. A JSON request given with --file is audited as `run --request` reads
/// it: a credential in its env is named, its value never printed, and an unknown key is
/// refused as `run` refuses it.
#[test]
fn audit_airlock_refuses_what_run_refuses_and_reads_requests() {
    for bad in [
        &["--bogus", "--", "true"][..],
        &["--input", "../x", "--", "true"],
        &["--ro-bind", ":/x", "--", "true"],
        &["--timeout", "soon", "--", "true"],
        // What `run` refuses once the line is read (Draft::build), not by its parsers.
        &[],
        &["--ro-bind", "/usr:/x", "--ro-bind", "/etc:/x", "--", "true"],
        &["--env", "1BAD=sk-notprinted", "--", "true"],
        &[
            "--input",
            "a=/etc/hostname",
            "--input",
            "a=/etc/hostname",
            "--",
            "true",
        ],
        &["--timeout", "0", "--", "true"],
    ] {
        let mut run = vec!["run"];
        run.extend_from_slice(bad);
        let ran = root(&run);
        let mut args = vec!["audit", "airlock", "--", "airlock"];
        args.extend(&run);
        let audited = root(&args);
        assert_eq!(code(&audited), Some(2), "{bad:?}: {}", show(&audited));
        assert_eq!(code(&ran), Some(2), "{bad:?}: {}", show(&ran));
        // A value refused with its variable's name is not said: it may be a credential.
        for said in [&audited, &ran] {
            assert!(!show(said).contains("sk-notprinted"), "{}", show(said));
        }
        let first_line = |o: &Output| stderr(o).lines().next().unwrap_or("").to_string();
        let why = first_line(&ran);
        let why = why
            .trim_start_matches("error: ")
            .trim_start_matches("airlock: ");
        assert!(
            first_line(&audited).ends_with(why),
            "{bad:?}:\n{}\n{}",
            show(&audited),
            show(&ran)
        );
    }
    // A line with --request takes its command and JSON mode from the request, unseen here.
    let out = root(&[
        "audit",
        "airlock",
        "--",
        "run",
        "--request",
        "/r.json",
        "--max-output",
        "5",
    ]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert!(
        stdout(&out).contains("request is read at run time"),
        "{}",
        show(&out)
    );
    let out = root(&["audit", "airlock", "--", "docker", "run", "x"]);
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    assert!(
        stderr(&out).contains("not an airlock run line"),
        "{}",
        show(&out)
    );

    let request =
        r#"{"command": "python3", "env": {"OPENAI_API_KEY": "sk-notprinted", "LANG": "C"}}"#;
    let out = root_stdin(&["audit", "airlock", "--json", "--file", "-"], request);
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let v = json_of(&out);
    assert_eq!(v["findings"][0]["rule"], "env-credential", "{v}");
    assert_eq!(v["findings"].as_array().unwrap().len(), 1, "{v}");
    assert!(!show(&out).contains("sk-notprinted"), "{}", show(&out));
    let out = root_stdin(
        &["audit", "airlock", "--file", "-"],
        r#"{"command": "python3", "bogus": 1}"#,
    );
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    assert!(
        stderr(&out).contains("unknown key \"bogus\""),
        "{}",
        show(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// 3. audit bwrap
// ---------------------------------------------------------------------------------------------

const CLEAN_BWRAP: &[&str] = &[
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/usr",
    "/usr",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--",
    "/bin/true",
];

const LEAKY_BWRAP: &[&str] = &[
    "bwrap",
    "--bind",
    "/",
    "/",
    "--dev-bind",
    "/dev",
    "/dev",
    "--",
    "sh",
];

/// What `audit bwrap` prints for a clean line: the advice every bwrap line gets follows.
const CLEAN_BWRAP_REPORT: &str = "clean: no way for the host to leak in was found
advice: when root runs bubblewrap, the task is the host's uid 0 to every file it is given, \
in a user namespace too and whatever --uid says (bubblewrap maps the sandbox's uid to its \
caller's): it reads root-only files, /etc/shadow under --ro-bind /etc /etc, and writes root's \
files in a writable bind, with every capability dropped; run bubblewrap as an unprivileged user
";

#[test]
fn audit_bwrap_clean_line() {
    let mut args = vec!["audit", "bwrap", "--"];
    args.extend_from_slice(CLEAN_BWRAP);
    let out = root(&args);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), CLEAN_BWRAP_REPORT);

    // Same line on stdin, shell-quoted.
    let out = root_stdin(&["audit", "bwrap", "--file", "-"], &CLEAN_BWRAP.join(" "));
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), CLEAN_BWRAP_REPORT);
}

/// Run by root, the task of real bubblewrap is the host's uid 0 to the files it is given
/// whatever the line says: with every capability dropped it reads /etc/shadow (0640 root)
/// through `--ro-bind /etc /etc` without a user namespace, in one (`--unshare-all`), and in one
/// with `--uid 65534` (its uid_map sends 65534 to the caller's 0). Run by uid 65534, the same
/// lines cannot. The audit gives every line the `host-root-if-run-as-root` advice.
#[test]
fn audit_bwrap_host_root_if_run_as_root() {
    let probe = "id -u; head -c1 /etc/shadow >/dev/null 2>&1 && echo read || echo refused";
    let no_user_namespace =
        base_bwrap_unsharing(&["--unshare-pid", "--unshare-net", "--unshare-ipc"]);
    let ro_etc = ["--cap-drop", "ALL", "--ro-bind", "/etc", "/etc"];
    for (line, uid_as_root) in [
        ([&base_bwrap()[..], &ro_etc].concat(), "0"),
        (
            [
                &base_bwrap()[..],
                &ro_etc,
                &["--uid", "65534", "--gid", "65534"],
            ]
            .concat(),
            "65534",
        ),
        ([&no_user_namespace[..], &ro_etc].concat(), "0"),
    ] {
        // A caller other than root is its own uid inside unless --uid says otherwise.
        for (who, uid, access) in [
            (Launcher::Root, uid_as_root, "read"),
            (Launcher::Unprivileged, "65534", "refused"),
        ] {
            let out = real_bwrap_line_as(who, &line, &["sh", "-c", probe]);
            let want = format!("{uid}\n{access}\n");
            assert_eq!(stdout(&out), want, "{who:?} {line:?}: {}", show(&out));
        }
        let advice = audited_json_of(&line, "advice");
        assert_eq!(advice.len(), 1, "{line:?}: {advice:?}");
        assert_eq!(advice[0]["rule"], "host-root-if-run-as-root");
    }
}

#[test]
fn audit_bwrap_leaky_line() {
    let mut args = vec!["audit", "bwrap", "--json", "--"];
    args.extend_from_slice(LEAKY_BWRAP);
    let out = root(&args);
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let v = json_of(&out);
    assert_eq!(v["clean"], Value::Bool(false), "{v}");
    let findings = v["findings"].as_array().expect("findings");
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "network-shared",
            "writable-home-or-root",
            "host-mount-rw",
            "docker-socket",
            "host-socket",
            "host-proc",
            "host-credentials",
            "env-not-cleared",
            "tiocsti",
            "no-die-with-parent",
            "dev-bind-dev",
            "root-caps-kept",
            "no-user-namespace",
            "no-pid-namespace",
            "no-ipc-namespace",
            "no-cgroup-namespace",
        ],
        "{v}"
    );
    let arg_of = |rule: &str| {
        findings
            .iter()
            .find(|f| f["rule"] == rule)
            .map(|f| f["arg"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(arg_of("writable-home-or-root"), "--bind / /");
    assert_eq!(arg_of("dev-bind-dev"), "--dev-bind /dev /dev");

    // Text form: one finding line per rule, exit 1.
    let mut args = vec!["audit", "bwrap", "--"];
    args.extend_from_slice(LEAKY_BWRAP);
    let out = root(&args);
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    assert_eq!(lines_starting(&stdout(&out), "finding: ").len(), 16);
    assert!(lines_starting(&stdout(&out), "finding: binds / writable (--bind / /)").len() == 1);
}

/// The README's base line: every namespace, a new session, no environment, a root of /usr
/// and the usr-merge links, a new proc and dev.
fn base_bwrap() -> Vec<&'static str> {
    let mut line = vec![
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ];
    line.extend_from_slice(common::MIN_ROOT);
    line.extend_from_slice(&["--proc", "/proc", "--dev", "/dev"]);
    line
}

/// The base line with only `namespaces` unshared instead of `--unshare-all`, and every
/// capability dropped.
fn base_bwrap_unsharing(namespaces: &[&'static str]) -> Vec<&'static str> {
    base_bwrap()
        .into_iter()
        .filter(|a| *a != "--unshare-all")
        .chain(namespaces.iter().copied())
        .chain(["--cap-drop", "ALL"])
        .collect()
}

/// `bwrap` (the real one at /usr/bin/bwrap, or airlock's `bwrap` subcommand) as root with the
/// base line, then `extra`, then `-- sh -c SCRIPT`.
fn run_bwrap_line(real: bool, extra: &[&str], script: &str) -> Output {
    if real {
        return real_bwrap_as(Launcher::Root, extra, &["sh", "-c", script]);
    }
    let mut cmd = airlock(Launcher::Root, &["bwrap"]);
    cmd.env_clear()
        .args(base_bwrap())
        .args(extra)
        .args(["--", "sh", "-c", script]);
    let what = format!("airlock bwrap {extra:?}");
    output_within(&mut cmd, Duration::from_secs(20), &what).0
}

/// The real bubblewrap run by `who` with the base line, then `extra`, then `-- COMMAND`.
fn real_bwrap_as(who: Launcher, extra: &[&str], command: &[&str]) -> Output {
    real_bwrap_line_as(who, &[&base_bwrap()[..], extra].concat(), command)
}

/// The real bubblewrap run by `who` with `options`, then `-- COMMAND`.
fn real_bwrap_line_as(who: Launcher, options: &[&str], command: &[&str]) -> Output {
    let mut cmd = Command::new("env");
    cmd.args(common::as_user(who))
        .arg("/usr/bin/bwrap")
        .args(options)
        .arg("--")
        .args(command);
    let what = format!("bwrap as {who:?} {options:?}");
    output_within(&mut cmd, Duration::from_secs(20), &what).0
}

/// The rules `airlock audit bwrap --json` reports for the base line plus `extra`.
fn audited_rules(extra: &[&str]) -> Vec<String> {
    let mut options = base_bwrap();
    options.extend_from_slice(extra);
    audited_rules_of(&options)
}

/// Whether `airlock audit bwrap` reports `rule` for the base line plus `extra`.
fn audit_reports(extra: &[&str], rule: &str) -> bool {
    audited_rules(extra).iter().any(|r| r == rule)
}

/// The rules `airlock audit bwrap --json` reports for `bwrap OPTIONS -- sh`.
fn audited_rules_of(options: &[&str]) -> Vec<String> {
    audited_json_of(options, "findings")
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}

/// The findings `airlock audit bwrap --json` reports for the base line plus `extra`.
fn audited_findings(extra: &[&str]) -> Vec<Value> {
    let mut options = base_bwrap();
    options.extend_from_slice(extra);
    audited_json_of(&options, "findings")
}

/// The `findings` or `advice` of `airlock audit bwrap --json` for `bwrap OPTIONS -- sh`.
fn audited_json_of(options: &[&str], kind: &str) -> Vec<Value> {
    let mut args = vec!["audit", "bwrap", "--json", "--", "bwrap"];
    args.extend_from_slice(options);
    args.extend_from_slice(&["--", "sh"]);
    let out = root(&args);
    json_of(&out)[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no {kind}:\n{}", show(&out)))
        .clone()
}

/// Without `--cap-drop ALL`, bubblewrap 0.8 run by root leaves the task root's capabilities
/// (CapEff as the host's root), so `mount -o remount,bind,rw /usr` succeeds; the audit says
/// so. With `--cap-drop ALL` (also after a `--cap-add`), the set is empty and the audit is
/// clean. airlock bwrap leaves none either way.
#[test]
fn audit_bwrap_root_capabilities_match_real_bubblewrap() {
    let probe = "grep CapEff /proc/self/status; \
        mount -o remount,bind,ro /usr 2>/dev/null && echo can-remount || echo cannot-remount";
    let kept = run_bwrap_line(true, &[], probe);
    assert_eq!(code(&kept), Some(0), "{}", show(&kept));
    assert_ne!(stdout(&kept), "CapEff:\t0000000000000000\ncannot-remount\n");
    assert!(stdout(&kept).ends_with("can-remount\n"), "{}", show(&kept));
    assert_eq!(audited_rules(&[]), ["root-caps-kept"]);

    for dropped in [
        &["--cap-drop", "ALL"][..],
        &["--cap-add", "CAP_SYS_ADMIN", "--cap-drop", "ALL"][..],
    ] {
        let out = run_bwrap_line(true, dropped, probe);
        assert_eq!(
            stdout(&out),
            "CapEff:\t0000000000000000\ncannot-remount\n",
            "{dropped:?}: {}",
            show(&out)
        );
        assert!(audited_rules(dropped).is_empty(), "{dropped:?}");
    }
    // A later add is kept, and reported.
    let added = &["--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN"][..];
    let out = run_bwrap_line(true, added, probe);
    assert!(stdout(&out).ends_with("\ncan-remount\n"), "{}", show(&out));
    assert_eq!(audited_rules(added), ["cap-add"]);

    let airlock_bwrap = run_bwrap_line(false, &[], probe);
    assert_eq!(
        stdout(&airlock_bwrap),
        "CapEff:\t0000000000000000\ncannot-remount\n",
        "{}",
        show(&airlock_bwrap)
    );
}

/// `--remount-ro DEST` makes read-only the one mount on DEST (bubblewrap 0.8: "without
/// changing any other mount point under the specified path"). Under real bubblewrap, run by
/// root and by uid 65534 with every capability dropped, a bind of a host system directory
/// (a directory in /var/tmp) remounted read-only cannot be written, a line's own bind below
/// it can, and so can the host's own mounts below a remounted bind of / (/dev/shm); the
/// audit reports exactly the writable ones. A task that keeps root's capabilities remounts
/// the bind writable again, and the audit keeps reporting it.
#[test]
fn audit_bwrap_remount_ro_matches_real_bubblewrap() {
    let dir = tempfile::Builder::new()
        .prefix("airlock-remount-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    // Writable by both callers: the task of root's bubblewrap holds no capability to pass
    // the permission bits.
    for path in [dir.path().to_path_buf(), dir.path().join("sub")] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let src = dir.path().display().to_string();
    let sub = format!("{src}/sub");
    let shm = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let probe = format!(
        "for f in /x/f /x/sub/f /h/dev/shm/{shm}; do \
         (echo x > $f) 2>/dev/null && echo wrote $f || echo cannot $f; done"
    );
    let dropped = |extra: &[&str]| -> Vec<String> {
        let mut line = vec!["--cap-drop".to_string(), "ALL".to_string()];
        line.extend(
            extra
                .iter()
                .map(|a| a.replace("SRC", &src).replace("SUB", &sub)),
        );
        line
    };
    let shm_line = format!("cannot /x/f\ncannot /x/sub/f\nwrote /h/dev/shm/{shm}\n");
    // (line after SRC and SUB are filled in, what the task wrote, the options reported).
    for (extra, wrote, reported) in [
        (
            &["--bind", "SRC", "/x"][..],
            "wrote /x/f\nwrote /x/sub/f\n",
            "--bind SRC /x",
        ),
        (
            &["--bind", "SRC", "/x", "--remount-ro", "/x"],
            "cannot /x/f\ncannot /x/sub/f\n",
            "",
        ),
        (
            &[
                "--bind",
                "SRC",
                "/x",
                "--bind",
                "SUB",
                "/x/sub",
                "--remount-ro",
                "/x",
            ],
            "cannot /x/f\nwrote /x/sub/f\n",
            "--bind SUB /x/sub",
        ),
        (
            &[
                "--bind",
                "SRC",
                "/x",
                "--remount-ro",
                "/x",
                "--bind",
                "SUB",
                "/x/sub",
            ],
            "cannot /x/f\nwrote /x/sub/f\n",
            "--bind SUB /x/sub",
        ),
    ] {
        let line = dropped(extra);
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        for who in BOTH {
            let out = real_bwrap_as(who, &line, &["sh", "-c", &probe]);
            let seen = stdout(&out).replace(&format!("cannot /h/dev/shm/{shm}\n"), "");
            assert_eq!(seen, wrote, "{who:?} {line:?}: {}", show(&out));
            let _ = std::fs::remove_file(dir.path().join("f"));
            let _ = std::fs::remove_file(dir.path().join("sub/f"));
        }
        let found: Vec<String> = audited_findings(&line)
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f["rule"].as_str().unwrap(),
                    f["arg"].as_str().unwrap()
                )
            })
            .collect();
        let want: Vec<String> = Some(reported)
            .filter(|r| !r.is_empty())
            .map(|r| {
                format!(
                    "host-mount-rw {}",
                    r.replace("SRC", &src).replace("SUB", &sub)
                )
            })
            .into_iter()
            .collect();
        assert_eq!(found, want, "{line:?}");
    }
    // The host's /dev/shm is a mount of its own below /: it stays writable.
    let line = [
        "--cap-drop",
        "ALL",
        "--bind",
        "/",
        "/h",
        "--remount-ro",
        "/h",
    ];
    for who in BOTH {
        let out = real_bwrap_as(who, &line, &["sh", "-c", &probe]);
        assert_eq!(stdout(&out), shm_line, "{who:?}: {}", show(&out));
        std::fs::remove_file(format!("/dev/shm/{shm}")).unwrap();
    }
    let found = audited_findings(&line);
    assert_eq!(found[0]["rule"], "writable-home-or-root");
    assert!(
        found[0]["message"].as_str().unwrap().contains("/dev/shm"),
        "{found:?}"
    );
    // With root's capabilities kept, the task remounts the bind writable.
    let kept = ["--bind", &src, "/x", "--remount-ro", "/x"];
    let remount = "mount -o remount,bind,rw /x && echo x > /x/f && echo wrote";
    let out = real_bwrap_as(Launcher::Root, &kept, &["sh", "-c", remount]);
    assert_eq!(stdout(&out), "wrote\n", "{}", show(&out));
    assert_eq!(audited_rules(&kept), ["host-mount-rw", "root-caps-kept"]);
}

/// A seccomp filter is not TIOCSTI protection: with an allow-all program on descriptor 3 and
/// no `--new-session`, the task of real bubblewrap (as root, all capabilities dropped) pushes
/// input into the terminal it was started on (a new pty, from script(1)); with
/// `--new-session` it cannot. The audit reports the first line (`tiocsti`, and the filter as
/// unseen) and not the second's terminal.
#[test]
fn audit_bwrap_seccomp_is_not_tiocsti_protection() {
    let mut bpf = tempfile::NamedTempFile::new().unwrap();
    // One instruction: BPF_RET | BPF_K, SECCOMP_RET_ALLOW.
    bpf.write_all(&[0x06, 0, 0, 0, 0x00, 0x00, 0xff, 0x7f])
        .unwrap();
    bpf.flush().unwrap();
    let probe = "import fcntl, termios\n\
        try:\n    fcntl.ioctl(0, termios.TIOCSTI, b' '); print('pushed')\n\
        except OSError as e: print('refused', e.errno)";
    let options = |new_session: bool| {
        let mut o: Vec<&str> = base_bwrap()
            .into_iter()
            .filter(|a| new_session || *a != "--new-session")
            .collect();
        o.extend_from_slice(&["--cap-drop", "ALL", "--seccomp", "3"]);
        o
    };
    for (new_session, want) in [(false, "pushed"), (true, "refused 1")] {
        let line = format!(
            "/usr/bin/bwrap {} -- python3 -c \"$PROBE\" 3<{}",
            options(new_session).join(" "),
            bpf.path().display()
        );
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .env("SHELL", "/bin/sh")
            .env("PROBE", probe);
        let (out, _) = output_within(&mut cmd, Duration::from_secs(20), "script bwrap");
        let text = stdout(&out).replace('\r', "");
        assert_eq!(
            text.trim_start().lines().last(),
            Some(want),
            "new session: {new_session}\n{}",
            show(&out)
        );
    }
    assert_eq!(
        audited_rules_of(&options(false)),
        ["tiocsti", "seccomp-from-fd"]
    );
    assert_eq!(audited_rules_of(&options(true)), ["seccomp-from-fd"]);
}

/// Sources that name / or a home without spelling it: run from `/` by real bubblewrap (bound
/// read-only here), with `/` open on its standard input and descriptor 5 (`bwrap ... </
/// 5</`), each shows the host's `/` or `/root`; the audit reports each, bound writable, as
/// `writable-home-or-root`.
#[test]
fn audit_bwrap_sources_that_reach_root_or_a_home() {
    let names = |dir: &str| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    for (source, host_dir) in [
        (".", "/"),
        ("root", "/root"),
        ("/proc/self/root", "/"),
        ("/dev/stdin", "/"),
        ("/dev/fd/5", "/"),
    ] {
        let mut cmd = Command::new("sh");
        cmd.current_dir("/")
            .args(["-c", "exec /usr/bin/bwrap \"$@\" </ 5</", "sh"])
            .args(base_bwrap())
            .args(["--cap-drop", "ALL", "--ro-bind", source, "/host"])
            .args(["--", "ls", "-A", "/host"]);
        let (out, _) = output_within(&mut cmd, Duration::from_secs(20), source);
        assert_eq!(code(&out), Some(0), "{source}: {}", show(&out));
        let seen: BTreeSet<String> = stdout(&out).lines().map(str::to_string).collect();
        assert_eq!(seen, names(host_dir), "{source}");
        // (`/proc/self/root`, a process's `/`, also holds the Docker socket.)
        let rules = audited_rules(&["--cap-drop", "ALL", "--bind", source, "/host"]);
        assert_eq!(rules[0], "writable-home-or-root", "{source}");
    }
}

/// A read-only bind does not stop connect(2): the task of real bubblewrap reaches a host
/// socket through `--ro-bind DIR /d`. So the audit reports read-only binds that hold the
/// Docker socket, as `audit docker` does for `-v /run:/run:ro`.
#[test]
fn audit_bwrap_read_only_binds_of_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
        got
    });
    let dir_arg = dir.path().display().to_string();
    let mut cmd = Command::new("/usr/bin/bwrap");
    cmd.args(base_bwrap())
        .args(["--cap-drop", "ALL", "--ro-bind", &dir_arg, "/d", "--", "python3", "-c"])
        .arg("import socket; s = socket.socket(socket.AF_UNIX); s.connect('/d/s'); s.sendall(b'hello'); print('sent')");
    let (out, _) = output_within(&mut cmd, Duration::from_secs(20), "connect through ro-bind");
    assert_eq!(stdout(&out), "sent\n", "{}", show(&out));
    assert_eq!(server.join().unwrap(), "hello");

    for source in ["/run", "/var/run/docker.sock", "/"] {
        assert_eq!(
            audited_rules(&["--cap-drop", "ALL", "--ro-bind", source, "/h"])[0],
            "docker-socket",
            "{source}"
        );
    }
}

/// A later mount on the same path hides an earlier one: under real bubblewrap with every
/// capability dropped, `--bind /root /mnt --tmpfs /mnt` shows an empty /mnt that cannot be
/// unmounted, and the audit is clean. A task that keeps root's capabilities unmounts the
/// tmpfs and finds /root writable beneath, and the audit reports the bind.
#[test]
fn audit_bwrap_later_mount_hides_an_earlier_one() {
    let hide = ["--bind", "/root", "/mnt", "--tmpfs", "/mnt"];
    let probe =
        "ls -A /mnt | wc -l; umount /mnt 2>/dev/null && ls -A /mnt | wc -l || echo cannot-unmount";
    let mut dropped = vec!["--cap-drop", "ALL"];
    dropped.extend(hide);
    let out = run_bwrap_line(true, &dropped, probe);
    assert_eq!(stdout(&out), "0\ncannot-unmount\n", "{}", show(&out));
    assert!(audited_rules(&dropped).is_empty());

    let out = run_bwrap_line(true, &hide, probe);
    let text = stdout(&out);
    let seen: Vec<&str> = text.lines().collect();
    assert_eq!(seen.len(), 2, "{}", show(&out));
    assert_eq!(seen[0], "0", "{}", show(&out));
    assert!(seen[1].parse::<usize>().unwrap() > 0, "{}", show(&out));
    assert_eq!(
        audited_rules(&hide),
        [
            "writable-home-or-root",
            "host-credentials",
            "root-caps-kept"
        ]
    );
}

/// A bind of the host's `/` or `/proc` brings the host's processes along: the task of real
/// bubblewrap (its own pid namespace, every capability dropped) reads the host's pid 1
/// command line under /host/proc, and the audit reports `host-proc`. A fresh `--proc` over
/// the place shows the sandbox's own pid 1, and the audit says nothing of it.
#[test]
fn audit_bwrap_host_proc() {
    let host_init = std::fs::read("/proc/1/cmdline").unwrap();
    for (extra, leaks) in [
        (&["--ro-bind", "/", "/host"][..], true),
        (&["--ro-bind", "/proc", "/host/proc"], true),
        (&["--ro-bind", "/", "/host", "--proc", "/host/proc"], false),
    ] {
        let mut options = vec!["--cap-drop", "ALL"];
        options.extend(extra);
        let out = run_bwrap_line(true, &options, "cat /host/proc/1/cmdline");
        assert_eq!(code(&out), Some(0), "{extra:?}: {}", show(&out));
        assert!(!out.stdout.is_empty(), "{extra:?}: {}", show(&out));
        assert_eq!(out.stdout == host_init, leaks, "{extra:?}: {}", show(&out));
        assert_eq!(audit_reports(&options, "host-proc"), leaks, "{extra:?}");
    }
}

/// A credential given with `--setenv` reaches the task of real bubblewrap, and any host user
/// reads it in the launcher's /proc/PID/cmdline while the sandbox runs. The audit reports the
/// name (`env-credential`) and never prints the value.
#[test]
fn audit_bwrap_credential_in_setenv() {
    let value = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let mut options = base_bwrap();
    options.extend(["--cap-drop", "ALL", "--setenv", "GITHUB_TOKEN", value]);
    let mut child = Command::new("/usr/bin/bwrap")
        .args(&options)
        .args(["--", "sh", "-c", "echo \"$GITHUB_TOKEN\"; exec sleep 20"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen_inside = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut seen_inside,
    )
    .unwrap();
    let host_user = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "cat",
        ])
        .arg(format!("/proc/{}/cmdline", child.id()))
        .output()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(seen_inside, format!("{value}\n"));
    assert!(
        String::from_utf8_lossy(&host_user.stdout).contains(value),
        "{}",
        show(&host_user)
    );

    let mut args = vec!["audit", "bwrap", "--json", "--", "bwrap"];
    args.extend_from_slice(&options);
    args.extend_from_slice(&["--", "sh"]);
    let out = root(&args);
    assert!(!stdout(&out).contains(value), "{}", show(&out));
    let v = json_of(&out);
    assert_eq!(v["findings"][0]["rule"], "env-credential", "{v}");
    assert_eq!(v["findings"][0]["arg"], "--setenv GITHUB_TOKEN ***", "{v}");
    assert_eq!(v["findings"].as_array().unwrap().len(), 1, "{v}");
}

/// Without `--unshare-ipc` the task of real bubblewrap (its own user, pid and network
/// namespaces, every capability dropped) sees a System V shared memory segment the host made,
/// and the audit reports `no-ipc-namespace`; with it, the segment is not there.
#[test]
fn audit_bwrap_host_ipc() {
    let made = Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
    assert_eq!(code(&made), Some(0), "{}", show(&made));
    let id = stdout(&made).rsplit(' ').next().unwrap().trim().to_string();
    // Columns of /proc/sysvipc/shm: key, shmid, ...
    let probe = format!(
        "seen=not-seen; while read -r key shmid rest; do \
         [ \"$shmid\" = {id} ] && seen=seen; done </proc/sysvipc/shm; echo $seen"
    );
    let own = base_bwrap_unsharing(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-cgroup",
    ]);
    let mut results = Vec::new();
    for ipc in [&[][..], &["--unshare-ipc"]] {
        let options = [&own[..], ipc].concat();
        let mut cmd = Command::new("/usr/bin/bwrap");
        cmd.args(&options).args(["--", "sh", "-c", &probe]);
        let (out, _) = output_within(&mut cmd, Duration::from_secs(20), "ipc probe");
        results.push((stdout(&out), audited_rules_of(&options)));
    }
    let removed = Command::new("ipcrm").args(["-m", &id]).output().unwrap();
    assert_eq!(code(&removed), Some(0), "{}", show(&removed));
    assert_eq!(
        results[0],
        ("seen\n".to_string(), vec!["no-ipc-namespace".to_string()])
    );
    assert_eq!(results[1], ("not-seen\n".to_string(), vec![]));
}

/// Without a cgroup namespace the task of real bubblewrap (its own user, pid, network and IPC
/// namespaces, every capability dropped) reads its host cgroup path: started in a new child
/// cgroup, it sees that cgroup's name in /proc/self/cgroup, and the audit reports
/// `no-cgroup-namespace`; with `--unshare-cgroup` (or `-try`, or `--unshare-all`) it sees `/`
/// and the audit is clean.
#[test]
fn audit_bwrap_host_cgroup() {
    // The pids controller's (cgroup v1) or the unified hierarchy's (v2) line.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let (line, hierarchy) = own
        .lines()
        .find_map(|l| l.split_once(":pids:").map(|(_, p)| (l, format!("pids{p}"))))
        .or_else(|| {
            own.lines()
                .find_map(|l| Some((l, l.strip_prefix("0::/")?.to_string())))
        })
        .expect("a pids or unified cgroup line");
    let prefix = line.split(':').take(2).collect::<Vec<_>>().join(":");
    let name = format!("airlock-audit-cgroup-{}", std::process::id());
    let dir = std::path::Path::new("/sys/fs/cgroup")
        .join(hierarchy.trim_matches('/'))
        .join(&name);
    std::fs::create_dir(&dir).unwrap();
    // Removed however the test ends: a cgroup left beside airlock's own makes every later
    // root launch list the parent for stale ones (limits::remove_stale), and one left at
    // 15:35 one day was still there at 22:10, under every benchmark and test run between.
    let cgroup = RemovedCgroup(dir.clone());
    let probe = format!("grep '^{prefix}:' /proc/self/cgroup");
    let unshared = base_bwrap_unsharing(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
    ]);
    let mut results = Vec::new();
    for (cgroup, options) in [
        ("", unshared.clone()),
        (
            "--unshare-cgroup",
            [&unshared[..], &["--unshare-cgroup"]].concat(),
        ),
        (
            "--unshare-cgroup-try",
            [&unshared[..], &["--unshare-cgroup-try"]].concat(),
        ),
        (
            "--unshare-all",
            [&base_bwrap()[..], &["--cap-drop", "ALL"]].concat(),
        ),
    ] {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo $$ > \"$0\"/cgroup.procs && exec \"$@\""])
            .arg(&dir)
            .arg("/usr/bin/bwrap")
            .args(&options)
            .args(["--", "sh", "-c", &probe]);
        let (out, _) = output_within(&mut cmd, Duration::from_secs(20), "cgroup probe");
        let seen = stdout(&out);
        // The cgroup the test made, as the host names it, or the namespace's root.
        let host_path = seen.trim().ends_with(&format!("/{name}"));
        let ns_root = seen.trim() == format!("{prefix}:/");
        results.push((cgroup, host_path, ns_root, audited_rules_of(&options)));
    }
    assert!(
        cgroup.remove(),
        "the test's cgroup {dir:?} stayed busy for 2 s"
    );
    let leak = vec!["no-cgroup-namespace".to_string()];
    assert_eq!(
        results,
        [
            ("", true, false, leak),
            ("--unshare-cgroup", false, true, vec![]),
            ("--unshare-cgroup-try", false, true, vec![]),
            ("--unshare-all", false, true, vec![]),
        ]
    );
}

/// A cgroup directory a test made, removed when the test ends, passed or panicked.
struct RemovedCgroup(std::path::PathBuf);

impl RemovedCgroup {
    /// Remove it, waiting up to 2 s for its last process (bubblewrap's last process may
    /// still count in it for a moment after bwrap exits); whether it is gone.
    fn remove(&self) -> bool {
        (0..200).any(|_| {
            std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        })
    }
}

impl Drop for RemovedCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The task of real bubblewrap reaches an agent's socket in the host's /tmp (an ssh-agent's
/// `/tmp/ssh-XXXX/agent.N`) through `--ro-bind /tmp /host-tmp`, and the audit reports
/// `host-socket`; a later `--tmpfs /host-tmp` hides it, and the audit says nothing of it.
#[test]
fn audit_bwrap_host_socket() {
    let dir = tempfile::Builder::new()
        .prefix("ssh-")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = dir.path().join("agent.1");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let inside = format!(
        "/host-tmp/{}",
        socket.strip_prefix("/tmp").unwrap().display()
    );
    let probe = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\n\
         try:\n    s.connect('{inside}'); print('connected')\n\
         except OSError as e: print('refused', e.errno)"
    );
    for (extra, reaches) in [
        (&["--ro-bind", "/tmp", "/host-tmp"][..], true),
        (
            &["--ro-bind", "/tmp", "/host-tmp", "--tmpfs", "/host-tmp"],
            false,
        ),
    ] {
        let options = [&["--cap-drop", "ALL"][..], extra].concat();
        let out = real_bwrap_as(Launcher::Root, &options, &["python3", "-c", &probe]);
        let want = if reaches {
            "connected\n"
        } else {
            "refused 2\n"
        };
        assert_eq!(stdout(&out), want, "{extra:?}: {}", show(&out));
        assert_eq!(audit_reports(&options, "host-socket"), reaches, "{extra:?}");
    }
    assert!(listener.accept().is_ok(), "the agent saw no connection");
}

/// `/var/run` is the host's link to `/run` (Debian: an absolute one). Under real bubblewrap
/// (run by root, every capability dropped) a session bus socket in the host's /run is reached
/// through `--ro-bind / /` at both spellings, and a later `--tmpfs /run` hides it at both: the
/// sandbox shows the host's link. A `--tmpfs /var/run` there goes through the absolute link
/// and bubblewrap fails before the command runs. Where the line itself puts /run at /var/run,
/// or shows no link (`/h/var/run` leads to the sandbox's own /run; `/var` alone holds the link
/// and nothing of /run), `--tmpfs` on the other spelling hides nothing. The audit reports
/// `host-socket` exactly where the socket is reached.
#[test]
fn audit_bwrap_var_run_is_the_host_link_to_run() {
    let runtime = run_user_dir();
    let socket = format!("{}/bus", runtime.path().display());
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let inside = socket.strip_prefix("/run/").unwrap();
    let probe = format!(
        "import socket\n\
         for p in ['/run', '/var/run', '/h/run', '/h/var/run']:\n    \
         s = socket.socket(socket.AF_UNIX)\n    \
         try: s.connect(p + '/{inside}'); print('reached', p)\n    \
         except OSError: pass"
    );
    let mut results = Vec::new();
    for extra in [
        &["--ro-bind", "/", "/", "--tmpfs", "/tmp"][..],
        &["--ro-bind", "/", "/", "--tmpfs", "/tmp", "--tmpfs", "/run"],
        &[
            "--ro-bind",
            "/",
            "/",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/var/run",
        ],
        &["--ro-bind", "/run", "/var/run", "--tmpfs", "/run"],
        &["--ro-bind", "/run", "/run", "--tmpfs", "/var/run"],
        &[
            "--ro-bind",
            "/",
            "/h",
            "--tmpfs",
            "/h/tmp",
            "--tmpfs",
            "/h/run",
        ],
        &["--ro-bind", "/var", "/var"],
    ] {
        let options = [&["--cap-drop", "ALL"][..], extra].concat();
        let out = real_bwrap_as(Launcher::Root, &options, &["python3", "-c", &probe]);
        let ran = if code(&out) == Some(0) {
            stdout(&out)
        } else {
            format!("failed: {}", stderr(&out))
        };
        // The bus this probe reaches, of the sockets the audit names (a bind of / also holds
        // the places other hosts keep LXD's and the kubelet's in /var).
        let names_the_bus = audited_findings(&options).iter().any(|f| {
            f["rule"] == "host-socket"
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("a D-Bus session bus"))
        });
        results.push((ran, names_the_bus));
    }
    drop(listener);
    let failed =
        "failed: bwrap: Can't mount tmpfs on /newroot/var/run: No such file or directory\n";
    let results: Vec<(&str, bool)> = results.iter().map(|(r, a)| (r.as_str(), *a)).collect();
    assert_eq!(
        results,
        [
            ("reached /run\nreached /var/run\n", true),
            ("", false),
            (failed, false),
            ("reached /var/run\n", true),
            ("reached /run\n", true),
            ("", false),
            ("", false),
        ]
    );
}

/// The desktop's sockets in a user's runtime directory (PipeWire `pipewire-0`, PulseAudio
/// `pulse/native`, Wayland `wayland-0`), and an ssh-agent wherever the line's own
/// `--setenv SSH_AUTH_SOCK` says or bound from `"$SSH_AUTH_SOCK"`: the task of real bubblewrap
/// (run by root, every capability dropped) connects to each through the line's binds, and the
/// audit reports `host-socket` naming what it reached. Without the bind nothing is reached,
/// and the audit is clean.
#[test]
fn audit_bwrap_desktop_and_agent_sockets() {
    let runtime_dir = run_user_dir();
    let runtime = runtime_dir.path().display().to_string();
    std::fs::create_dir(format!("{runtime}/pulse")).unwrap();
    let agent_dir = tempfile::Builder::new()
        .prefix("airlock-agent-")
        .tempdir()
        .unwrap();
    let agent = agent_dir.path().join("agent.sock").display().to_string();
    let mut listeners = Vec::new();
    for socket in [
        format!("{runtime}/pipewire-0"),
        format!("{runtime}/pulse/native"),
        format!("{runtime}/wayland-0"),
        agent.clone(),
    ] {
        listeners.push(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    }
    let probe = "import os, socket\n\
        for p in ['/u/pipewire-0', '/u/pulse/native', '/u/wayland-0', os.environ.get('SSH_AUTH_SOCK', '/none')]:\n    \
        s = socket.socket(socket.AF_UNIX)\n    \
        try: s.connect(p); print('reached', p)\n    \
        except OSError: pass";
    let desktop = "a Wayland compositor, PulseAudio, PipeWire";
    // (options, with AGENT for the agent's path; whether the audit reads that path spelt as
    // the caller's shell variable, as a job template writes it; what is reached; what the
    // finding names).
    let by_agent = [
        "--ro-bind",
        "AGENT",
        "/agent",
        "--setenv",
        "SSH_AUTH_SOCK",
        "/agent",
    ];
    for (options, spelt_as_variable, reached, held) in [
        (
            &["--ro-bind", &runtime, "/u"][..],
            false,
            "reached /u/pipewire-0\nreached /u/pulse/native\nreached /u/wayland-0\n",
            desktop,
        ),
        (&by_agent, false, "reached /agent\n", "an ssh-agent"),
        (&by_agent, true, "reached /agent\n", "an ssh-agent"),
        (&by_agent[3..], false, "", ""),
    ] {
        let spelt = |agent_is: &str| -> Vec<String> {
            ["--cap-drop", "ALL"]
                .iter()
                .chain(options)
                .map(|o| if *o == "AGENT" { agent_is } else { o }.to_string())
                .collect()
        };
        let run = spelt(&agent);
        let run: Vec<&str> = run.iter().map(String::as_str).collect();
        let out = real_bwrap_as(Launcher::Root, &run, &["python3", "-c", probe]);
        assert_eq!(stdout(&out), reached, "{run:?}: {}", show(&out));
        let audited = spelt(if spelt_as_variable {
            "$SSH_AUTH_SOCK"
        } else {
            &agent
        });
        let audited: Vec<&str> = audited.iter().map(String::as_str).collect();
        let findings = audited_findings(&audited);
        // A user's runtime directory also holds a rootless Docker daemon's socket.
        let docker = findings
            .iter()
            .filter(|f| f["rule"] == "docker-socket")
            .count();
        assert_eq!(docker, usize::from(options[1] == runtime), "{audited:?}");
        let found: Vec<String> = findings
            .iter()
            .filter(|f| f["rule"] != "docker-socket")
            .map(|f| f["message"].as_str().unwrap().to_string())
            .collect();
        match held {
            "" => assert!(found.is_empty(), "{audited:?}: {found:?}"),
            held => {
                assert_eq!(found.len(), 1, "{audited:?}: {found:?}");
                assert!(
                    found[0].contains(&format!("{held}: a connect(2)")),
                    "{found:?}"
                );
            }
        }
    }
    drop(listeners);
}

/// A new directory in the host's /run/user, where a user's runtime directory lives (any name
/// there is one in the audit's tables), removed when dropped, on a failed assertion too.
fn run_user_dir() -> tempfile::TempDir {
    std::fs::create_dir_all("/run/user").unwrap();
    tempfile::Builder::new()
        .prefix("airlock-audit-")
        .tempdir_in("/run/user")
        .unwrap()
}

/// The host's /dev/shm holds other processes' shared memory: the task of real bubblewrap run
/// by root (every capability dropped) rewrites a root-owned 0600 file there through `--bind
/// /dev/shm /dev/shm`, and the audit reports `host-mount-rw`; through `--ro-bind` it cannot,
/// and the audit is clean.
#[test]
fn audit_bwrap_host_shm() {
    let file = tempfile::Builder::new()
        .prefix("airlock-audit-")
        .tempfile_in("/dev/shm")
        .unwrap();
    std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let probe = format!("echo sandbox > {} 2>/dev/null; true", file.path().display());
    for (bind, writes) in [("--bind", true), ("--ro-bind", false)] {
        std::fs::write(file.path(), "host\n").unwrap();
        let options = ["--cap-drop", "ALL", bind, "/dev/shm", "/dev/shm"];
        let out = run_bwrap_line(true, &options, &probe);
        assert_eq!(code(&out), Some(0), "{bind}: {}", show(&out));
        let now = std::fs::read_to_string(file.path()).unwrap();
        assert_eq!(now == "sandbox\n", writes, "{bind}: {now:?}");
        assert_eq!(audit_reports(&options, "host-mount-rw"), writes, "{bind}");
    }
}

/// A host block device bound with device access is the host's disk below its files'
/// permissions: the task of real bubblewrap (run by root, every capability dropped) reads a
/// loop device through `--dev-bind`, and the audit reports `host-device`; through `--ro-bind`
/// (nodev) it cannot, and the audit is clean.
#[test]
fn audit_bwrap_host_device() {
    let mut image = tempfile::NamedTempFile::new().unwrap();
    image
        .write_all(&[b"HOST-DISK-BYTES!".as_slice(), &[0; 4096]].concat())
        .unwrap();
    image.flush().unwrap();
    let attached = Command::new("losetup")
        .args(["--find", "--show"])
        .arg(image.path())
        .output()
        .unwrap();
    assert_eq!(code(&attached), Some(0), "{}", show(&attached));
    let device = stdout(&attached).trim().to_string();
    let probe = format!("head -c 16 {device} 2>/dev/null; echo");
    let mut results = Vec::new();
    for bind in ["--dev-bind", "--ro-bind"] {
        let options = ["--cap-drop", "ALL", bind, &device, &device];
        let out = run_bwrap_line(true, &options, &probe);
        results.push((bind, stdout(&out), audited_rules(&options)));
    }
    let detached = Command::new("losetup")
        .args(["-d", &device])
        .output()
        .unwrap();
    assert_eq!(code(&detached), Some(0), "{}", show(&detached));
    assert_eq!(
        results[0],
        (
            "--dev-bind",
            "HOST-DISK-BYTES!\n".to_string(),
            vec!["host-device".to_string()]
        )
    );
    assert_eq!(results[1], ("--ro-bind", "\n".to_string(), vec![]));
}

/// Data read from a descriptor is unseen by the audit and may be a host file's: the task of
/// real bubblewrap reads the host's /etc/shadow through `--ro-bind-data 3 /x ... 3<`, and the
/// audit reports `data-from-fd` rather than call the line clean.
#[test]
fn audit_bwrap_data_from_fd() {
    let options = ["--cap-drop", "ALL", "--ro-bind-data", "3", "/x"];
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec /usr/bin/bwrap \"$@\" 3</etc/shadow", "sh"])
        .args(base_bwrap())
        .args(options)
        .args(["--", "cat", "/x"]);
    let (out, _) = output_within(&mut cmd, Duration::from_secs(20), "ro-bind-data");
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(out.stdout, std::fs::read("/etc/shadow").unwrap());
    assert_eq!(audited_rules(&options), ["data-from-fd"]);
}

#[test]
fn audit_bwrap_refuses_unknown_option() {
    let out = root(&["audit", "bwrap", "--", "bwrap", "--frobnicate", "--", "sh"]);
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    assert!(stderr(&out).contains("--frobnicate"), "{}", show(&out));
    assert!(stdout(&out).is_empty(), "{}", show(&out));

    let out = root_stdin(
        &["audit", "bwrap", "--file", "-"],
        "bwrap --unshare-all --frobnicate -- sh",
    );
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    assert!(stderr(&out).contains("--frobnicate"), "{}", show(&out));
}

// ---------------------------------------------------------------------------------------------
// 4. docker-args
// ---------------------------------------------------------------------------------------------

#[test]
fn docker_args_default_line() {
    let out = root(&["docker-args"]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), format!("{DEFAULT_DOCKER_LINE}\n"));
    assert!(stderr(&out).is_empty(), "{}", show(&out));

    let out = root(&["docker-args", "--json"]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let argv = json_argv(&out);
    assert_eq!(argv.join(" "), DEFAULT_DOCKER_LINE);
    assert!(
        !argv.iter().any(|a| a == "-e" || a.starts_with("--env")),
        "{argv:?}"
    );
}

#[test]
fn docker_args_options_change_their_own_arguments() {
    let default = json_argv(&root(&["docker-args", "--json"]));
    let pos = |word: &str| default.iter().position(|a| a == word).unwrap();
    // (flag, value, index in the default vector that must change, what it must become)
    let cases: Vec<(&str, &str, usize, String)> = vec![
        ("--image", "alpine:3", default.len() - 1, "alpine:3".into()),
        ("--memory", "1g", pos("--memory") + 1, "1g".into()),
        ("--pids", "32", pos("--pids-limit") + 1, "32".into()),
        (
            "--scratch",
            "/var/tmp/airlock-scratch-7",
            pos("-v") + 1,
            "/var/tmp/airlock-scratch-7:/work:rw".into(),
        ),
        ("--user", "1000:1000", pos("--user") + 1, "1000:1000".into()),
    ];
    let mut all_args = vec!["docker-args", "--json"];
    let mut all_expected = default.clone();
    for (flag, value, index, becomes) in &cases {
        let out = root(&["docker-args", "--json", flag, value]);
        assert_eq!(code(&out), Some(0), "{flag}:\n{}", show(&out));
        let mut expected = default.clone();
        expected[*index] = becomes.clone();
        assert_eq!(json_argv(&out), expected, "{flag} {value}");
        // The text form is the same vector.
        let text = root(&["docker-args", flag, value]);
        assert_eq!(stdout(&text).trim_end(), expected.join(" "), "{flag}");
        // And it still audits clean.
        let audited = root_stdin(&["audit", "docker", "--file", "-"], &stdout(&text));
        assert_eq!(code(&audited), Some(0), "{flag}:\n{}", show(&audited));
        all_args.extend([*flag, *value]);
        all_expected[*index] = becomes.clone();
    }
    let out = root(&all_args);
    assert_eq!(json_argv(&out), all_expected, "all options at once");
    // A bad number is refused.
    let out = root(&["docker-args", "--pids", "many"]);
    assert_eq!(code(&out), Some(2), "{}", show(&out));
}

/// Arguments that a careless join would split, expand, glob or lose.
const AWKWARD: &[&str] = &[
    "python3",
    "-c",
    "print(\"a b\")",
    "it's",
    "$HOME",
    "${PATH}",
    "back\\slash",
    "",
    "two\nlines",
    "tab\there",
    "*",
    "#not-a-comment",
    "~",
    "a;b",
    "`x`",
    "'",
    "\"",
    "--privileged",
    "-e",
    "X",
];

#[test]
fn docker_args_command_round_trips_through_sh() {
    let mut args = vec!["docker-args", "--"];
    args.extend_from_slice(AWKWARD);
    let text = root(&args);
    assert_eq!(code(&text), Some(0), "{}", show(&text));
    let line = stdout(&text);
    let line = line
        .strip_suffix('\n')
        .expect("one line ending in a newline");

    let mut json_args = vec!["docker-args", "--json", "--"];
    json_args.extend_from_slice(AWKWARD);
    let argv = json_argv(&root(&json_args));
    assert_eq!(&argv[argv.len() - AWKWARD.len()..], strings(AWKWARD));

    // sh reads the line back to the same words (NUL-separated: words may hold newlines).
    let sh = Command::new("sh")
        .args(["-c", &format!("printf '%s\\0' {line}")])
        .env("HOME", "/should-not-appear")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(sh.status.success(), "{}", show(&sh));
    let mut words: Vec<String> = sh
        .stdout
        .split(|b| *b == 0)
        .map(|w| String::from_utf8(w.to_vec()).unwrap())
        .collect();
    assert_eq!(words.pop().as_deref(), Some(""), "trailing NUL");
    assert_eq!(words, argv, "sh did not read back the JSON form's argv");

    // airlock's own reader agrees, and the command after the image is not audited.
    let audited = root_stdin(&["audit", "docker", "--file", "-"], &stdout(&text));
    assert_eq!(code(&audited), Some(0), "{}", show(&audited));
    assert_eq!(stdout(&audited), format!("{CLEAN_LINE}\n"));
}

/// docker-args puts `--image` where docker reads the image, so a value starting with `-` is
/// read by docker as an option: the printed "policy" line runs a privileged container (or
/// mounts the host root), and the command still exits 0. A `--scratch` with a `:` produces a
/// volume spec docker cannot parse as intended. Each must be refused (exit 2) or, if printed,
/// still audit clean.
#[test]
fn docker_args_refuses_values_that_change_the_command_line() {
    let mut wrong = Vec::new();
    for (flag, value) in [
        ("--image", "--privileged"),
        ("--image", "-v/:/host"),
        ("--scratch", "/tmp/airlock-scratch:/host"),
    ] {
        let arg = format!("{flag}={value}");
        let out = root(&["docker-args", &arg, "--", "sh"]);
        match code(&out) {
            Some(2) => assert!(!stderr(&out).is_empty(), "{arg}:\n{}", show(&out)),
            Some(0) => {
                let audited = root_stdin(&["audit", "docker", "--file", "-"], &stdout(&out));
                if code(&audited) != Some(0) {
                    wrong.push(format!(
                        "docker-args {arg} exited 0 and printed a line that is not airlock's \
                         policy:\n  {}  audit (exit {:?}): {}{}",
                        stdout(&out),
                        code(&audited),
                        stdout(&audited),
                        stderr(&audited)
                    ));
                }
            }
            _ => panic!("{arg}:\n{}", show(&out)),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// 5. explain
// ---------------------------------------------------------------------------------------------

const POLICY_JSON: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/seccomp/x86_64.json"));

/// The deny filter's groups (each rule's comment up to the first `:`), with their syscalls.
fn deny_groups() -> Vec<(String, Vec<String>)> {
    let v: Value = serde_json::from_str(POLICY_JSON).unwrap();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for rule in v["deny"]["filter"].as_array().unwrap() {
        let name = rule["syscall"].as_str().unwrap().to_string();
        let group = rule["comment"]
            .as_str()
            .and_then(|c| c.split_once(':'))
            .map(|(g, _)| g.to_string())
            .unwrap_or_else(|| "other".into());
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, names)) => names.push(name),
            None => groups.push((group, vec![name])),
        }
    }
    groups
}

fn explain_as(who: Launcher, args: &[&str]) -> (Output, String) {
    let mut full = vec!["explain"];
    full.extend_from_slice(args);
    let what = format!("{who:?} airlock {}", full.join(" "));
    let (out, _) = output_within(&mut airlock(who, &full), Duration::from_secs(10), &what);
    let text = stdout(&out);
    (out, text)
}

fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?}:\n{text}"))
}

#[test]
fn explain_describes_the_boundary_for_both_launchers() {
    for who in BOTH {
        let (out, text) = explain_as(
            who,
            &[
                "--ro-bind",
                "/srv:/data",
                "--env",
                "FOO=bar",
                "--timeout",
                "5s",
                "--",
                "python3",
                "x.py",
            ],
        );
        assert_eq!(code(&out), Some(0), "{who:?}:\n{}", show(&out));
        assert!(
            text.starts_with("command: [\"python3\", \"x.py\"]\n"),
            "{who:?}:\n{text}"
        );

        let ns = line_with(&text, "uts");
        for n in [
            "user",
            "mount",
            "pid",
            "ipc",
            "uts",
            "cgroup",
            "network: new",
        ] {
            assert!(ns.contains(n), "{who:?}: namespace {n} missing: {ns}");
        }
        let usr = line_with(&text, "  /usr ");
        assert!(usr.contains("read-only"), "{who:?}: {usr}");
        let work = line_with(&text, "  /work ");
        assert!(work.contains("WRITABLE"), "{who:?}: {work}");
        // The default 2 GiB scratch: one inode per 8 KiB (src/spec.rs, tmpfs_inodes).
        assert!(work.contains("at most 262144 inodes"), "{who:?}: {work}");
        let data = line_with(&text, "  /data ");
        assert!(
            data.contains("host bind of /srv") && data.contains("read-only"),
            "{who:?}: {data}"
        );
        assert!(!data.contains("WRITABLE"), "{who:?}: {data}");
        assert!(
            text.lines().any(|l| l.trim() == "FOO=bar"),
            "{who:?}:\n{text}"
        );
        assert!(
            line_with(&text, "timeout:").contains("timeout: 5000 ms"),
            "{who:?}:\n{text}"
        );
        assert!(
            line_with(&text, "inside:").contains("uid 1000"),
            "{who:?}:\n{text}"
        );
        let host = line_with(&text, "on the host:").trim();
        match who {
            Launcher::Root => assert_eq!(
                host,
                "on the host: uid 65534 gid 65534, no supplementary groups (the caller is root; \
                 the task never is)"
            ),
            Launcher::Unprivileged => assert_eq!(
                host,
                "on the host: uid 65534 gid 65534 (the caller's own), no supplementary groups"
            ),
        }

        // The seccomp section: from the policy file, one EPERM line per deny group naming
        // every syscall of the group, and no EPERM line for a group the file does not have.
        assert!(
            text.contains("seccomp (from seccomp/x86_64.json"),
            "{who:?}:\n{text}"
        );
        let eperm: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("EPERM "))
            .collect();
        let groups = deny_groups();
        assert_eq!(eperm.len(), groups.len(), "{who:?}: {eperm:#?}");
        for (group, names) in &groups {
            let prefix = format!("EPERM {group}: ");
            let line = eperm
                .iter()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("{who:?}: no line {prefix:?}: {eperm:#?}"));
            let listed: Vec<&str> = line[prefix.len()..]
                .split("; ")
                .map(|n| n.split('(').next().unwrap_or(n))
                .collect();
            for n in names {
                assert!(listed.contains(&n.as_str()), "{who:?}: {n} not in {line}");
            }
        }
        // A rule's argument conditions are shown as the policy states them, so that the
        // auditor sees which calls of a syscall are refused.
        for rule in [
            "socket(domain == AF_INET 2 and type & SOCK_TYPE_MASK 0xf == SOCK_PACKET 10)",
            "ioctl(request == TIOCSTI 0x5412)",
            "chown(owner != -1 and owner != 1000)",
        ] {
            assert!(
                eperm.iter().any(|l| l
                    .split(": ")
                    .nth(1)
                    .is_some_and(|r| r.split("; ").any(|r| r == rule))),
                "{who:?}: no rule {rule}: {eperm:#?}"
            );
        }
        assert!(
            text.lines().any(|l| l.trim() == "everything else: allowed"),
            "{who:?}:\n{text}"
        );
    }
}

/// The host's resolv.conf and DNS in nsswitch.conf come with --share-net only, and explain says
/// so (the same functions of src/boundary/contents.rs choose them for the sandbox), and whether
/// the host's abstract unix sockets come with the network.
#[test]
fn explain_names_the_resolver_only_with_share_net() {
    for who in BOTH {
        for (flags, shared) in [(&["--share-net"][..], true), (&[][..], false)] {
            let mut args = flags.to_vec();
            args.extend(["--", "true"]);
            let (out, text) = explain_as(who, &args);
            assert_eq!(code(&out), Some(0), "{args:?}:\n{}", show(&out));
            let net = match (shared, landlock_abi() >= 6) {
                (false, _) => "network: new, loopback only",
                (true, true) => {
                    "its abstract unix sockets out of reach (a Landlock scope, step 12)"
                }
                (true, false) => {
                    "its abstract unix sockets too (no Landlock ABI 6 here to scope them)"
                }
            };
            assert!(
                line_with(&text, "user, mount, pid").contains(net),
                "{args:?}:\n{text}"
            );
            // The header names the network namespace's making only where one is made (it had
            // said so under --share-net too).
            let made = line_with(&text, "namespaces (");
            assert_eq!(
                made.contains("network one made"),
                !shared,
                "{args:?}: {made}"
            );
            let hosts = if shared { "files dns" } else { "files" };
            assert!(
                line_with(&text, "  /etc ").contains(&format!("nsswitch.conf (hosts: {hosts})")),
                "{args:?}:\n{text}"
            );
            let bound = line_with(&text, "bound read-only from the host:");
            let listed = bound
                .split(": ")
                .nth(1)
                .unwrap()
                .split(", ")
                .any(|n| n == "resolv.conf");
            let host_has = std::path::Path::new("/etc/resolv.conf").exists();
            assert_eq!(listed, shared && host_has, "{args:?}: {bound}");
        }
    }
}

/// With a cgroup (the limits say cgroup v1 or v2), clone3 leaves the cgroup namespace out and
/// the init makes it at step 12, in the run's cgroup: the namespaces header says so, and only
/// then (it said "one clone3" for every namespace). Root and uid 65534 are the two sides here
/// wherever root has a cgroup and uid 65534 none.
#[test]
fn explain_says_where_the_cgroup_namespace_is_made() {
    for who in BOTH {
        let (out, text) = explain_as(who, &["--", "true"]);
        assert_eq!(code(&out), Some(0), "{who:?}:\n{}", show(&out));
        let cgroup = line_with(&text, "  memory: ").contains("(cgroup v");
        let header = line_with(&text, "namespaces (");
        assert_eq!(
            header.contains("the cgroup one at step 12, in the run's cgroup"),
            cgroup,
            "{who:?}:\n{text}"
        );
    }
}

#[test]
fn explain_says_what_var_tmp_is_under_a_bind_of_var() {
    let probe = "[ -L /var/tmp ] && echo link || echo dir";
    for (args, said, seen) in [
        (
            &["--ro-bind", "/var:/var"][..],
            "/var/tmp is the /var bind's own",
            "dir\n",
        ),
        (&[][..], "/tmp and /var/tmp link here", "link\n"),
    ] {
        let mut line = args.to_vec();
        line.extend(["--", "sh", "-c", probe]);
        let (out, text) = explain_as(Launcher::Root, &line);
        assert_eq!(code(&out), Some(0), "{}", show(&out));
        assert!(line_with(&text, "tmpfs, WRITABLE").contains(said), "{text}");
        let mut run = vec!["run"];
        run.extend(line);
        let out = airlock(Launcher::Root, &run).output().unwrap();
        assert_eq!(stdout(&out), seen, "{}", show(&out));
    }
}

#[test]
fn explain_says_a_timeout_below_a_millisecond_as_given() {
    let (out, text) = explain_as(Launcher::Root, &["--timeout", "0.0001", "--", "true"]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(
        line_with(&text, "timeout:").trim(),
        "timeout: 100µs, then the whole sandbox is killed"
    );
}

#[test]
fn explain_as_root_names_the_chosen_host_identity() {
    let (out, text) = explain_as(
        Launcher::Root,
        &["--host-uid", "4321", "--host-gid", "4322", "--", "true"],
    );
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(
        line_with(&text, "on the host:").trim(),
        "on the host: uid 4321 gid 4322, no supplementary groups (the caller is root; the task \
         never is)"
    );
}

/// An unprivileged caller's task keeps the caller's supplementary groups on the host (a user
/// namespace's process may not drop them): explain had said "no supplementary groups" of a
/// caller in `shadow`, whose task read /etc/shadow through a bind (the explain review). It
/// names them now and warns of `shadow`; so it does of a root caller's `--host-gid 42`. The
/// task reads the file as said; control: the same caller without the group, and a root
/// caller's default gid.
#[test]
fn explain_names_the_groups_the_task_keeps_on_the_host() {
    let shadow = "--ro-bind /etc/shadow:/s";
    let in_shadow = "setpriv --reuid=65534 --regid=65534 --groups=42,100";
    let bin = common::binary().display().to_string();
    let run = |prefix: &str, sub: &str, extra: &str, cmd: &str| {
        let line = format!("{prefix} {bin} {sub} {extra} -- {cmd}");
        let o = Command::new("sh").args(["-c", &line]).output().unwrap();
        (code(&o), stdout(&o))
    };
    let (rc, text) = run(in_shadow, "explain", "", "true");
    assert_eq!(rc, Some(0), "{text}");
    assert_eq!(
        line_with(&text, "on the host:").trim(),
        "on the host: uid 65534 gid 65534 (the caller's own), supplementary groups 42 (shadow) \
         100 (users) (the caller's, which a user namespace cannot drop)"
    );
    assert!(
        line_with(&text, "inside:").contains("shown as 65534"),
        "{text}"
    );
    assert!(
        line_with(&text, "WARNING: a group").contains("the host's password hashes"),
        "{text}"
    );
    let (rc, _) = run(in_shadow, "run", shadow, "head -c 1 /s");
    assert_eq!(rc, Some(0), "the caller's shadow group reads it");
    let (rc, _) = run(
        &common::as_user(Launcher::Unprivileged).join(" "),
        "run",
        shadow,
        "head -c 1 /s",
    );
    assert_eq!(rc, Some(1), "control: without the group");
    let (_, text) = run("", "explain", "--host-gid 42", "true");
    assert!(text.contains("WARNING: a group"), "{text}");
    let (rc, _) = run(
        "",
        "run",
        &format!("--host-gid 42 {shadow}"),
        "head -c 1 /s",
    );
    assert_eq!(rc, Some(0), "--host-gid 42 reads it");
    let (rc, _) = run("", "run", shadow, "head -c 1 /s");
    assert_eq!(rc, Some(1), "control: the default gid");
    let (_, text) = run("", "explain", "", "true");
    assert!(!text.contains("WARNING: a group"), "{text}");
    // The audit of a root caller's line says it too; control: the default gid is clean.
    let (rc, text) = run(
        "",
        "audit airlock",
        &format!("-- run --host-gid 42 {shadow}"),
        "true",
    );
    assert_eq!(rc, Some(1), "{text}");
    assert!(
        line_with(&text, "finding: ").contains("--host-gid 42, reads them"),
        "{text}"
    );
    let (rc, text) = run("", "audit airlock", &format!("-- run {shadow}"), "true");
    assert_eq!(rc, Some(0), "{text}");
    // A gid /etc/group lacks is named by its number. The static glibc build's NSS lookup of
    // one crashed (SIGSEGV) in explain and in audit docker's `--user 1000:GID` (CI).
    let (rc, text) = run("", "explain", "--host-gid 4322", "true");
    assert_eq!(rc, Some(0), "{text}");
    let (rc, text) = run(
        in_shadow.replace("42,100", "4322").as_str(),
        "explain",
        "",
        "true",
    );
    assert_eq!(rc, Some(0), "{text}");
    assert!(
        line_with(&text, "on the host:").contains("groups 4322 (the caller's"),
        "{text}"
    );
    let docker = "docker run --network none --read-only --user 1000:4322 img";
    let (rc, text) = run("", "audit docker", "", docker);
    assert_eq!(rc, Some(0), "{text}");
    assert!(text.starts_with("clean: "), "{text}");
}

/// explain opens no host path, so what run learns from the host's files is not checked
/// (README, explain): a bind source that does not exist, and a directory bound over the
/// sandbox's /dev/null, are listed, exit 0. Control: run refuses each (exit 2).
#[test]
fn explain_lists_binds_that_run_refuses_from_the_host() {
    let dir = common::tmpdir();
    let over_null = format!("{}:/dev/null", dir.path().display());
    let missing = format!("{}/no-such:/srv/x", dir.path().display());
    for (bind, line) in [(&over_null, "  /dev/null "), (&missing, "  /srv/x ")] {
        for who in BOTH {
            let args = ["--ro-bind", bind.as_str(), "--", "true"];
            let (out, text) = explain_as(who, &args);
            assert_eq!(code(&out), Some(0), "{who:?} {bind}:\n{}", show(&out));
            assert!(line_with(&text, line).contains("host bind of"), "{text}");
            let mut run = vec!["run"];
            run.extend_from_slice(&args);
            let (ran, _) = output_within(
                &mut airlock(who, &run),
                Duration::from_secs(10),
                &format!("{who:?} run {bind}"),
            );
            assert_eq!(
                code(&ran),
                Some(2),
                "control {who:?} {bind}:\n{}",
                show(&ran)
            );
        }
    }
}

#[test]
fn explain_runs_nothing() {
    // A command that does not exist: run would exit 127; explain just describes it.
    for who in BOTH {
        let (out, text) = explain_as(who, &["--", "no-such-cmd"]);
        assert_eq!(code(&out), Some(0), "{who:?}:\n{}", show(&out));
        assert!(
            text.starts_with("command: [\"no-such-cmd\"]\n"),
            "{who:?}:\n{text}"
        );
        assert!(stderr(&out).is_empty(), "{who:?}:\n{}", show(&out));
    }

    // A writable bind would carry a marker out if the task ran: explain leaves none, while
    // run with the same options does (the positive control).
    let dir = tempfile::Builder::new()
        .prefix("airlock-frontends-out")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let bind = format!("{}:/out", dir.path().display());
    let marker = dir.path().join("marker");
    let task = ["--", "sh", "-c", "touch /out/marker"];
    let mut args = vec!["--bind", bind.as_str()];
    args.extend_from_slice(&task);
    let (out, text) = explain_as(Launcher::Root, &args);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert!(
        line_with(&text, "  /out ").contains("WRITABLE"),
        "explain should flag the writable bind:\n{text}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker.exists(), "explain ran the task");

    let mut run = vec!["run"];
    run.extend_from_slice(&args);
    let ran = root(&run);
    assert_eq!(code(&ran), Some(0), "positive control:\n{}", show(&ran));
    assert!(marker.exists(), "positive control: run left no marker");
}

/// explain's /work line says what points there as run sets it: HOME and TMPDIR by default,
/// not once --env moves HOME elsewhere (it said "cwd, HOME, TMPDIR" whatever --env said).
#[test]
fn explain_says_what_points_at_scratch_as_run_sets_it() {
    for who in BOTH {
        for (env, roles, inside) in [
            ("A=1", "cwd, HOME, TMPDIR (", "/work /work /work"),
            ("HOME=/x", "cwd, TMPDIR (", "/x /work /work"),
        ] {
            let (_, text) = explain_as(who, &["--env", env, "--", "true"]);
            let work = line_with(&text, "  /work ");
            assert!(
                work.ends_with(&format!("{roles}/tmp and /var/tmp link here)")),
                "{who:?}: {work}"
            );
            let run = common::sh(who, &["--env", env], "echo $HOME $TMPDIR $PWD");
            assert_eq!(stdout(&run), format!("{inside}\n"), "{who:?} {env}");
        }
    }
}

/// `--chdir DIR` (a request's `chdir`) starts the task in DIR inside the sandbox: a system
/// path, a bind destination, a link into scratch (entered as what it leads to). What the
/// sandbox lacks, a host directory among them, fails step 9 (125, naming the path); a relative path or one with `..` is
/// refused before anything is built (2). A flag beside a request overrides its key, as the
/// limits do. Control: with neither, the task starts in /work.
#[test]
fn chdir_starts_the_task_there() {
    let dir = common::tmpdir();
    std::fs::write(dir.path().join("marker-5521"), "x").unwrap();
    let data = format!("{}:/data", dir.path().display());
    // Under /srv: the host's, absent inside (not /tmp, which is scratch there).
    let host_only = tempfile::Builder::new()
        .prefix("airlock-chdir-")
        .tempdir_in("/srv")
        .unwrap();
    std::fs::set_permissions(host_only.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for who in BOTH {
        let cases: &[(&[&str], &str)] = &[
            (&["--", "pwd"], "/work\n"),
            (&["--chdir", "/etc", "--", "pwd"], "/etc\n"),
            (&["--chdir=/usr/bin", "--", "pwd"], "/usr/bin\n"),
            (
                &["--ro-bind", &data, "--chdir", "/data", "--", "ls"],
                "marker-5521\n",
            ),
            (&["--chdir", "/tmp", "--", "pwd", "-P"], "/work\n"),
        ];
        for (flags, want) in cases {
            let mut args = vec!["run"];
            args.extend_from_slice(flags);
            let o = airlock(who, &args).stdin(Stdio::null()).output().unwrap();
            assert_eq!(
                (code(&o), stdout(&o).as_str()),
                (Some(0), *want),
                "{who:?} {flags:?}\n{}",
                show(&o)
            );
        }
        // A host directory the sandbox lacks is not entered: it resolves in the new root.
        // Control: the same user enters it on the host.
        let host_dir = host_only.path().display().to_string();
        let host = common::host_sh(who, &format!("cd {host_dir} && pwd"));
        assert_eq!(
            stdout(&host),
            format!("{host_dir}\n"),
            "{who:?} host control"
        );
        for dir in ["/nope-7", host_dir.as_str()] {
            let o = airlock(who, &["run", "--chdir", dir, "--", "true"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(code(&o), Some(125), "{who:?} {dir}\n{}", show(&o));
            let said = format!("step 9 enter the working directory: chdir({dir:?}): ENOENT");
            assert!(stderr(&o).contains(&said), "{who:?}\n{}", show(&o));
        }
        for (bad, says) in [
            ("rel", "must be an absolute path inside the sandbox"),
            ("/a/../etc", "must not contain '..'"),
        ] {
            let o = airlock(who, &["run", "--chdir", bad, "--", "true"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(code(&o), Some(2), "{who:?} {bad}\n{}", show(&o));
            assert!(stderr(&o).contains(says), "{who:?} {bad}\n{}", show(&o));
        }
        let (_, text) = explain_as(who, &["--chdir", "/etc", "--", "true"]);
        assert!(
            text.contains("\n  starts in: /etc (--chdir"),
            "{who:?}\n{text}"
        );
        let work = line_with(&text, "  /work ");
        assert!(
            work.ends_with(": HOME, TMPDIR (/tmp and /var/tmp link here)"),
            "{who:?}: {work}"
        );
    }
    let request = r#"{"command": "pwd", "chdir": "/usr/bin"}"#;
    for (extra, want) in [
        (&[][..], "/usr/bin\n"),
        (&["--chdir", "/etc"][..], "/etc\n"),
    ] {
        let mut args = vec!["run", "--request", "-"];
        args.extend_from_slice(extra);
        let o = root_stdin(&args, request);
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["stdout"], want, "{extra:?}\n{}", show(&o));
    }
    let o = root_stdin(
        &["run", "--request", "-"],
        r#"{"command": "pwd", "chdir": 1}"#,
    );
    assert_eq!(code(&o), Some(2), "{}", show(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let error = r["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("key \"chdir\" to be a string"),
        "{}",
        show(&o)
    );
}

/// What explain, the audits and run's warnings print is read line by line, by people and by
/// grep: a value, path, input name or audited argument holding a newline (a legal file name)
/// must not start a line of its own, where it read as a variable, a mount, a finding or a
/// warning that is not there (`--env $'A=1\n  LD_PRELOAD=/work/evil.so'` showed an
/// `LD_PRELOAD=` line in explain's environment). Each control character is written as its
/// escape; the JSON outputs carry the same text.
#[test]
fn explain_audit_and_warnings_print_one_line_per_item() {
    let dir = common::tmpdir();
    let fake_mount = "  /etc              host bind of /etc, WRITABLE";
    let odd = dir.path().join(format!("x\n{fake_mount}"));
    std::fs::create_dir_all(&odd).unwrap();
    let bind = format!("{}:/data", odd.display());
    let escaped = format!("x\\n{fake_mount}");
    for who in BOTH {
        let (out, text) = explain_as(
            who,
            &[
                "--env",
                "A=1\n  LD_PRELOAD=/work/evil.so",
                "--bind",
                &bind,
                "--input",
                "i\nj=/etc/hostname",
                "--",
                "true",
            ],
        );
        assert!(out.status.success(), "{who:?}: {text}");
        for forged in ["  LD_PRELOAD=", fake_mount, "j "] {
            let hit = text.lines().find(|l| l.starts_with(forged));
            assert_eq!(hit, None, "{who:?}: {forged:?} starts a line:\n{text}");
        }
        assert!(
            text.contains("  A=1\\n  LD_PRELOAD=/work/evil.so\n"),
            "{who:?}: {text}"
        );
        assert!(
            line_with(&text, "/data").contains(&escaped),
            "{who:?}: {text}"
        );
        assert!(text.contains("/work/i\\nj "), "{who:?}: {text}");

        // run: the writable bind's warning, on stderr and in the report alike.
        let args = ["run", "--json", "--bind", &bind, "--", "true"];
        let (out, _) = output_within(&mut airlock(who, &args), Duration::from_secs(10), "run");
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", show(&out));
        let warnings = json_of(&out)["warnings"].clone();
        let err = stderr(&out);
        let said: Vec<&str> = (err.lines())
            .map(|l| l.trim_start_matches("airlock: warning: "))
            .collect();
        assert_eq!(warnings, serde_json::json!(said), "{who:?}: {}", show(&out));
        assert!(
            said.iter().all(|w| w.contains(&escaped)),
            "{who:?}: {}",
            show(&out)
        );
    }
    // The audits: every line of the text is a finding, advice or the clean line.
    let docker = [
        "audit",
        "docker",
        "--",
        "docker",
        "run",
        "--network",
        "none",
        "-v",
    ];
    let bwrap = ["audit", "bwrap", "--", "bwrap", "--bind"];
    for (line, tail) in [
        (&docker[..], &["/srv/x\nadvice: ok:/y", "img"][..]),
        (&bwrap[..], &["/usr/x\nclean: fine", "/y", "--", "sh"][..]),
    ] {
        let args: Vec<&str> = line.iter().chain(tail).copied().collect();
        let out = root(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let text = stdout(&out);
        for l in text.lines() {
            let known = ["finding: ", "advice: ", "clean: "]
                .iter()
                .any(|k| l.starts_with(k));
            assert!(known, "{args:?}: a line of its own: {l:?}\n{text}");
        }
        assert!(text.contains("\\n"), "{args:?}: {text}");
    }
}

#[test]
fn explain_refuses_a_bad_input_name() {
    for who in BOTH {
        let (out, text) = explain_as(who, &["--input", "../x=/etc/passwd", "--", "true"]);
        assert_eq!(code(&out), Some(2), "{who:?}:\n{}", show(&out));
        assert!(
            text.is_empty(),
            "{who:?}: printed a boundary anyway:\n{text}"
        );
        assert!(stderr(&out).contains("../x"), "{who:?}:\n{}", show(&out));
        // No command: said without naming `airlock run`'s usage (it did, to explain's caller).
        let (out, _) = explain_as(who, &["--"]);
        assert_eq!(code(&out), Some(2), "{who:?}:\n{}", show(&out));
        let says = "airlock: no command given: the command and its arguments go after --\n";
        assert_eq!(stderr(&out), says, "{who:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 6. The command-line surface
// ---------------------------------------------------------------------------------------------

/// Installed under a name ending in `-bwrap` (flatpak's bundled `flatpak-bwrap`, the Steam
/// runtime's `srt-bwrap`), airlock is bubblewrap, as under `bwrap` (a drop-in review: it gave
/// airlock's own usage error). Control: another name is airlock's own command line.
#[test]
fn a_bwrap_named_link_runs_the_bwrap_front_end() {
    let dir = common::tmpdir();
    for (name, bwrap_mode) in [
        ("flatpak-bwrap", true),
        ("srt-bwrap", true),
        ("bwrapper", false),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(common::binary(), &link).unwrap();
        let out = Command::new(&link)
            .args(["--ro-bind", "/", "/", "--", "/bin/echo", "in-bwrap-mode"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            stdout(&out) == "in-bwrap-mode\n",
            bwrap_mode,
            "{name}: {}",
            show(&out)
        );
    }
}

#[test]
fn help_lists_subcommands_and_exit_codes() {
    let out = root(&["--help"]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let text = stdout(&out);
    for sub in ["run", "explain", "demo", "audit", "docker-args"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{sub} "))),
            "--help does not list {sub}:\n{text}"
        );
    }
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("demo-probe")),
        "the hidden probe subcommand is listed:\n{text}"
    );
    // Nor offered for a typo (the operator review: `frob` was told of `probe`).
    let typo = Command::new(common::binary()).arg("frob").output().unwrap();
    assert_eq!(typo.status.code(), Some(2));
    assert!(!stderr(&typo).contains("probe"), "{}", stderr(&typo));
    let exit_codes = |text: &str, what: &str| {
        assert!(text.contains("Exit status:"), "{what}:\n{text}");
        for c in ["2 ", "124 ", "125 ", "126 ", "127 ", "128+N "] {
            assert!(
                text.lines().any(|l| l.trim_start().starts_with(c)),
                "{what}: exit code {c:?} missing:\n{text}"
            );
        }
    };
    exit_codes(&text, "--help");

    let out = root(&["run", "--help"]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let text = stdout(&out);
    exit_codes(&text, "run --help");
    for key in ["exit_code", "timed_out", "files_skipped", "--request"] {
        assert!(text.contains(key), "run --help lacks {key}:\n{text}");
    }

    for sub in [
        &["audit", "--help"][..],
        &["audit", "docker", "--help"],
        &["docker-args", "--help"],
        &["explain", "--help"],
        &["demo", "--help"],
    ] {
        let out = root(sub);
        assert_eq!(code(&out), Some(0), "{sub:?}:\n{}", show(&out));
        assert!(!stdout(&out).is_empty(), "{sub:?}");
    }
    // explain takes run's options, whose help says "print one JSON report": its own says
    // that it describes the JSON run in text instead.
    let out = root(&["explain", "--help"]);
    let words = stdout(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(words.contains("prints text, never a report"), "{words}");
}

#[test]
fn unknown_subcommands_and_flags_exit_2() {
    for args in [
        &["frobnicate"][..],
        &["--frobnicate"],
        &[],
        &["run", "--frobnicate", "--", "true"],
        &["explain", "--frobnicate"],
        &["demo", "--frobnicate"],
        &["audit"],
        &["audit", "podman", "--", "podman", "run", "x"],
        &["audit", "docker", "--frobnicate"],
        &["docker-args", "--frobnicate"],
    ] {
        for who in BOTH {
            let out = airlock(who, args).stdin(Stdio::null()).output().unwrap();
            assert_eq!(code(&out), Some(2), "{who:?} {args:?}:\n{}", show(&out));
            assert!(!stderr(&out).is_empty(), "{who:?} {args:?}: no message");
        }
    }
}

/// `airlock seccomp-bpf` writes its binary program to a file or pipe, never to a terminal:
/// there it exits 2 saying how to redirect it, and writes nothing (the control: into a pipe,
/// whole instructions).
#[test]
fn seccomp_bpf_refuses_a_terminal() {
    let line = format!("{} seccomp-bpf", common::binary().display());
    let o = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{shown}");
    assert!(shown.contains("stdout is a terminal"), "{shown}");
    assert!(shown.contains("redirect it"), "{shown}");
    assert!(!shown.contains('\0'), "{shown:?}");
    let o = airlock(Launcher::Root, &["seccomp-bpf"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !o.stdout.is_empty() && o.stdout.len().is_multiple_of(8),
        "{}",
        o.stdout.len()
    );
}

/// Output stdout cannot take whole is not lost silently: each command that prints (help,
/// version, `explain`, `audit`, `docker-args`, `seccomp-bpf`) into /dev/full says so on stderr and exits 2,
/// naming the status it would have had (an audit with findings: 1); they exited 0 (1) with
/// nothing said. bwrap mode's `--help` and `--version` exit 0 as bubblewrap's do (it prints
/// nothing either). Control: the same commands into a pipe exit with that status and print.
#[test]
fn output_stdout_cannot_take_is_an_error_not_lost() {
    let cases: &[(&[&str], i32)] = &[
        (&["--help"], 0),
        (&["--version"], 0),
        (&["run", "--help"], 0),
        (&["explain", "--", "true"], 0),
        (&["audit", "bwrap", "--", "--bind", "/", "/", "true"], 1),
        (
            &["audit", "bwrap", "--json", "--", "--bind", "/", "/", "true"],
            1,
        ),
        (&["docker-args", "--image", "img", "--", "true"], 0),
        (&["seccomp-bpf"], 0),
    ];
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for (args, code) in cases {
        let o = airlock(Launcher::Root, args)
            .stdout(full())
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("stdout could not take the output whole: ENOSPC: No space left on device")
                && err.contains(&format!("the exit status would have been {code})")),
            "{args:?}: {err}"
        );
        // Control.
        let o = airlock(Launcher::Root, args).output().unwrap();
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {}", stderr(&o));
        assert!(!o.stdout.is_empty(), "{args:?}");
    }
    for flag in ["--help", "--version"] {
        let o = airlock(Launcher::Root, &["bwrap", flag])
            .stdout(full())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "bwrap {flag}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "bwrap {flag}");
    }
}
