//! The runner contract of `airlock run`, end to end, for both launchers (root and uid 65534):
//! what a hostile task can learn and leave behind, how bad input is refused, how hostile
//! results in scratch come back, timeouts, output floods, and that killing airlock at any
//! moment leaves nothing running on the host.
//!
//! Every child is bounded: it is spawned, polled with a deadline, killed and the test failed if
//! the deadline passes.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Bounded runs
// ---------------------------------------------------------------------------------------------

impl Run {
    /// A refusal in JSON mode: exit 2 and the failure report saying so (error_kind usage,
    /// exit_code 2). Returns the report's message.
    fn usage_error(&self, ctx: &str) -> String {
        assert_eq!(self.code(), Some(2), "{ctx}: {}", self.show());
        let rep = self.report();
        assert_eq!(rep["error_kind"], json!("usage"), "{ctx}: {rep}");
        assert_eq!(rep["exit_code"], json!(2), "{ctx}: {rep}");
        match rep["error"].as_str() {
            Some(msg) => msg.to_string(),
            None => panic!("{ctx}: no error text: {rep}"),
        }
    }

    /// A run refused before its task: exit `code`, nothing on stdout, and stderr starting with
    /// `says`. Returns stderr.
    fn refused(&self, code: i32, says: &str, ctx: &str) -> String {
        assert_eq!(self.code(), Some(code), "{ctx}: {}", self.show());
        assert_eq!(stdout(&self.out), "", "{ctx}: the task ran");
        let err = stderr(&self.out);
        assert!(err.starts_with(says), "{ctx}: {}", self.show());
        err
    }

    /// A plain run of `sh -c 'echo RAN'` that is refused as bad usage saying `says` (exit 2,
    /// the message on stderr, the command never ran), or, for None, that runs (exit 0, `RAN`).
    fn refused_or_ran(&self, says: Option<&str>, ctx: &str) {
        match says {
            Some(says) => {
                assert_eq!(self.code(), Some(2), "{ctx}: {}", self.show());
                assert!(stderr(&self.out).contains(says), "{ctx}: {}", self.show());
                assert!(!stdout(&self.out).contains("RAN"), "{ctx}");
            }
            None => {
                assert_eq!(self.code(), Some(0), "{ctx}: {}", self.show());
                assert_eq!(stdout(&self.out), "RAN\n", "{ctx}");
            }
        }
    }
}

/// `airlock ARGS` as `who`, bounded.
fn al(who: Launcher, args: &[&str], limit: Duration) -> Run {
    run_bounded(airlock(who, args), None, limit)
}

/// `airlock ARGS` as `who` with `input` on stdin, bounded.
fn al_stdin(who: Launcher, args: &[&str], input: &[u8], limit: Duration) -> Run {
    run_bounded(airlock(who, args), Some(input), limit)
}

/// `airlock run --json FLAGS -- sh -c SCRIPT`, bounded, with its parsed report.
fn json_sh(who: Launcher, flags: &[&str], script: &str, limit: Duration) -> (Run, Value) {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let run = al(who, &args, limit);
    let rep = run.report();
    (run, rep)
}

const SECS_10: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Host state: processes, mounts, temporary directories
// ---------------------------------------------------------------------------------------------

fn mount_lines() -> BTreeSet<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A constant of src/spec.rs, read from the source so the tests follow the documented limit.
fn spec_const(name: &str) -> usize {
    let prefix = format!("pub const {name}: usize = ");
    include_str!("../src/spec.rs")
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim_end_matches(';').replace('_', "").trim().parse().ok())
        .unwrap_or_else(|| panic!("src/spec.rs: no `{prefix}N;`"))
}

// ---------------------------------------------------------------------------------------------
// A. The probe a hostile setup script runs
// ---------------------------------------------------------------------------------------------

const PYTHON: &str = "/usr/bin/python3";

/// Reads ~/.aws/credentials, looks for the secret, fetches the URL in argv[1], lists its cwd
/// and leaves result.json behind.
const PROBE: &str = r#"import json, os, sys, urllib.request

path = os.path.expanduser("~/.aws/credentials")
try:
    with open(path, "rb") as f:
        data = f.read()
    print(f"credentials: readable, {len(data)} bytes")
except FileNotFoundError:
    print("credentials: no such file")
except OSError as e:
    print(f"credentials: error ({e})")

print("secret: present" if os.environ.get("AWS_SECRET_ACCESS_KEY") else "secret: absent")

try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        r.read()
        print(f"network: reached, status {r.status}")
except Exception as e:
    print(f"network: refused ({e})")

print("cwd: " + json.dumps(sorted(os.listdir("."))))

with open("result.json", "w") as f:
    json.dump({"answer": 42}, f)
"#;

const SECRET: &str = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY-runner-secret";
const CRED_TOKEN: &str = "AKIA-RUNNER-CREDENTIAL-TOKEN-7f3a";

/// The probe's world: a fake HOME with world-readable credentials, the probe script, and the
/// host's HTTP server.
struct Probe {
    home: tempfile::TempDir,
    creds_len: usize,
    _dir: tempfile::TempDir,
    script: PathBuf,
    server: Server,
}

impl Probe {
    fn new() -> Probe {
        assert!(
            Path::new(PYTHON).exists(),
            "{PYTHON} is needed by the probe (pyenv's python is not visible inside)"
        );
        let home = tmpdir();
        let aws = home.path().join(".aws");
        std::fs::create_dir(&aws).unwrap();
        std::fs::set_permissions(&aws, std::fs::Permissions::from_mode(0o755)).unwrap();
        let creds = format!(
            "[default]\naws_access_key_id = {CRED_TOKEN}\naws_secret_access_key = {SECRET}\n"
        );
        write_file(&aws.join("credentials"), creds.as_bytes(), 0o644);
        let dir = tmpdir();
        let script = write_file(&dir.path().join("probe.py"), PROBE.as_bytes(), 0o644);
        Probe {
            home,
            creds_len: creds.len(),
            _dir: dir,
            script,
            server: Server::start(Duration::from_secs(120)),
        }
    }

    fn home(&self) -> &str {
        self.home.path().to_str().unwrap()
    }

    /// Run the probe on the host as `who` in a fresh directory holding only probe.py, with HOME
    /// and the secret set: it must see everything. Returns nothing; asserts.
    fn host_control(&self, who: Launcher) {
        let cwd = tmpdir();
        write_file(&cwd.path().join("probe.py"), PROBE.as_bytes(), 0o644);
        if who == Launcher::Unprivileged {
            std::os::unix::fs::chown(cwd.path(), Some(65534), Some(65534)).unwrap();
        }
        let hits = self.server.hits();
        let mut c = host_command(who, PYTHON);
        c.arg("probe.py")
            .arg(&self.server.url)
            .current_dir(cwd.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.home())
            .env("AWS_SECRET_ACCESS_KEY", SECRET);
        let run = run_bounded(c, None, SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?} host control: {}", run.show());
        assert_eq!(
            stdout(&run.out),
            format!(
                "credentials: readable, {} bytes\nsecret: present\nnetwork: reached, status 200\n\
                 cwd: [\"probe.py\"]\n",
                self.creds_len
            ),
            "{who:?} host control: {}",
            run.show()
        );
        assert_eq!(
            self.server.hits(),
            hits + 1,
            "{who:?}: the server was not reached"
        );
        assert_eq!(
            std::fs::read_to_string(cwd.path().join("result.json")).unwrap(),
            "{\"answer\": 42}"
        );
    }

    /// `airlock ARGS` as `who`, with the caller's HOME and secret set in airlock's own
    /// environment.
    fn airlock(&self, who: Launcher, args: &[&str], input: Option<&[u8]>) -> Run {
        let mut c = airlock(who, args);
        c.env("HOME", self.home())
            .env("AWS_SECRET_ACCESS_KEY", SECRET);
        run_bounded(c, input, Duration::from_secs(20))
    }

    /// A sandboxed probe run: it sees `secret`, never the credentials nor the network, lists
    /// only probe.py, and hands back exactly result.json.
    fn assert_contained(&self, who: Launcher, what: &str, run: &Run, secret: &str) {
        assert_eq!(run.code(), Some(0), "{who:?} {what}: {}", run.show());
        let rep = run.report();
        let out = rep["stdout"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{who:?} {what}: {out:?}");
        assert_eq!(lines[0], "credentials: no such file", "{who:?} {what}");
        assert_eq!(lines[1], format!("secret: {secret}"), "{who:?} {what}");
        assert!(
            lines[2].starts_with("network: refused ("),
            "{who:?} {what}: {:?}",
            lines[2]
        );
        assert_eq!(lines[3], "cwd: [\"probe.py\"]", "{who:?} {what}");
        assert_eq!(
            rep["files"],
            json!({"result.json": "{\"answer\": 42}"}),
            "{who:?} {what}"
        );
        assert_eq!(rep["exit_code"], json!(0), "{who:?} {what}");
        assert_eq!(rep["timed_out"], json!(false), "{who:?} {what}");
        assert_eq!(rep["signal"], Value::Null, "{who:?} {what}");
        assert_eq!(rep["stderr"], json!(""), "{who:?} {what}");
        assert_eq!(rep["files_skipped"], json!([]), "{who:?} {what}");
        assert_eq!(rep["files_truncated"], json!([]), "{who:?} {what}");
        let raw = stdout(&run.out);
        assert!(
            !raw.contains(CRED_TOKEN),
            "{who:?} {what}: credentials leaked"
        );
        if secret == "absent" {
            assert!(!raw.contains(SECRET), "{who:?} {what}: secret leaked");
        }
    }
}

#[test]
fn probe_host_control_sees_credentials_secret_and_network() {
    let p = Probe::new();
    for who in BOTH {
        p.host_control(who);
    }
}

#[test]
fn probe_in_sandbox_sees_no_credentials_secret_or_network() {
    let p = Probe::new();
    let input = format!("probe.py={}", p.script.display());
    for who in BOTH {
        p.host_control(who);
        let hits = p.server.hits();
        let args = [
            "run",
            "--json",
            "--input",
            &input,
            "--",
            "python3",
            "probe.py",
            &p.server.url,
        ];
        let run = p.airlock(who, &args, None);
        p.assert_contained(who, "plain", &run, "absent");
        assert_eq!(
            p.server.hits(),
            hits,
            "{who:?}: the sandbox reached the host"
        );
        // The input was copied, not shared: the host file is as it was.
        assert_eq!(std::fs::read_to_string(&p.script).unwrap(), PROBE);
    }
}

#[test]
fn probe_with_forwarded_home_and_secret_still_sees_no_credentials_or_network() {
    let p = Probe::new();
    let input = format!("probe.py={}", p.script.display());
    for who in BOTH {
        p.host_control(who);
        let hits = p.server.hits();
        let args = [
            "run",
            "--json",
            "--env",
            "HOME",
            "--env",
            "AWS_SECRET_ACCESS_KEY",
            "--input",
            &input,
            "--",
            "python3",
            "probe.py",
            &p.server.url,
        ];
        let run = p.airlock(who, &args, None);
        p.assert_contained(
            who,
            "--env HOME --env AWS_SECRET_ACCESS_KEY",
            &run,
            "present",
        );
        assert_eq!(
            p.server.hits(),
            hits,
            "{who:?}: the sandbox reached the host"
        );
    }
}

#[test]
fn probe_via_request_on_stdin() {
    let p = Probe::new();
    for who in BOTH {
        p.host_control(who);
        let hits = p.server.hits();
        let bare = json!({
            "command": "python3",
            "args": ["probe.py", p.server.url],
            "inputs": {"probe.py": PROBE},
        });
        let run = p.airlock(
            who,
            &["run", "--request", "-"],
            Some(bare.to_string().as_bytes()),
        );
        p.assert_contained(who, "--request - (no env)", &run, "absent");

        let with_env = json!({
            "command": "python3",
            "args": ["probe.py", p.server.url],
            "inputs": {"probe.py": PROBE},
            "env": {"HOME": p.home(), "AWS_SECRET_ACCESS_KEY": SECRET},
            "timeout_ms": 15000,
        });
        let run = p.airlock(
            who,
            &["run", "--request", "-"],
            Some(with_env.to_string().as_bytes()),
        );
        p.assert_contained(who, "--request - (env HOME, secret)", &run, "present");
        assert_eq!(
            p.server.hits(),
            hits,
            "{who:?}: the sandbox reached the host"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// B. Bad input is refused before anything runs
// ---------------------------------------------------------------------------------------------

/// The command each refused run would have started: in plain mode its output would reach
/// airlock's stdout.
const WOULD_RUN: [&str; 4] = ["--", "sh", "-c", "echo RAN-MARKER"];

/// `flags` must be refused with exit 2 and a message containing every needle, in plain mode
/// (message on stderr, nothing on stdout) and in --json mode (exactly {error, error_kind:
/// "usage", exit_code: 2} on stdout). Each run has a 10 s deadline: a FIFO must not block.
fn assert_refused(who: Launcher, flags: &[&str], needles: &[&str]) {
    for json_mode in [false, true] {
        let mut args = vec!["run"];
        if json_mode {
            args.push("--json");
        }
        args.extend_from_slice(flags);
        args.extend_from_slice(&WOULD_RUN);
        let run = al(who, &args, SECS_10);
        assert_eq!(run.code(), Some(2), "{who:?} {args:?}: {}", run.show());
        assert!(
            run.took < Duration::from_secs(5),
            "{who:?} {args:?}: {}",
            run.show()
        );
        let message = if json_mode {
            let rep = run.report();
            let obj = rep.as_object().unwrap();
            let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                ["error", "error_kind", "exit_code"],
                "{who:?} {args:?}"
            );
            assert_eq!(rep["error_kind"], json!("usage"), "{who:?} {args:?}");
            assert_eq!(rep["exit_code"], json!(2), "{who:?} {args:?}");
            rep["error"].as_str().unwrap().to_string()
        } else {
            assert_eq!(stdout(&run.out), "", "{who:?} {args:?}: {}", run.show());
            let err = stderr(&run.out);
            assert!(err.starts_with("airlock: "), "{who:?} {args:?}: {err:?}");
            err
        };
        assert!(!stdout(&run.out).contains("RAN-MARKER"), "{who:?} {args:?}");
        for n in needles {
            assert!(
                message.contains(n),
                "{who:?} {args:?}: {message:?} lacks {n:?}"
            );
        }
    }
}

#[test]
fn bad_input_names_are_refused() {
    let dir = tmpdir();
    let file = write_file(&dir.path().join("data.txt"), b"data\n", 0o644);
    let f = file.display();
    let suggested = format!("as in --input data.txt={f}");
    for who in BOTH {
        for (arg, needles) in [
            (
                format!("a/b={f}"),
                vec!["input name \"a/b\"", "contains '/'"],
            ),
            (
                format!("../x={f}"),
                vec!["input name \"../x\"", "contains '/'"],
            ),
            (
                format!(".={f}"),
                vec!["input name \".\"", "directory reference"],
            ),
            (
                format!("..={f}"),
                vec!["input name \"..\"", "directory reference"],
            ),
            (format!("={f}"), vec!["input name \"\"", "is empty"]),
            (
                "data.txt".to_string(),
                vec!["--input \"data.txt\"", "expected NAME=PATH"],
            ),
            // A path alone: the message shows the spelling that hands it in.
            (f.to_string(), vec!["expected NAME=PATH", &suggested]),
            (
                "data.txt=".to_string(),
                vec!["--input data.txt", "empty path"],
            ),
        ] {
            assert_refused(who, &["--input", &arg], &needles);
        }
    }
}

/// An input name is a plain file name, and one that begins with `-` is one too: the next
/// argument is `--input`'s value whatever it begins with, as getopt reads an option's
/// argument (clap had taken `-1.txt=PATH` for a flag: "unexpected argument '-1'", the
/// JSON-contract review). Binds and `--env` read their values the same way, and so refuse
/// such a value for what it is. Control: the task reads both files under their names.
#[test]
fn input_names_beginning_with_a_dash_are_plain_names() {
    let dir = tmpdir();
    let file = write_file(&dir.path().join("data.txt"), b"data\n", 0o644);
    let f = file.display();
    let (dash, dashes) = (format!("-1.txt={f}"), format!("--={f}"));
    for who in BOTH {
        let args = [
            "run", "--input", &dash, "--input", &dashes, "--", "cat", "--", "-1.txt", "--",
        ];
        let run = al(who, &args, SECS_10);
        assert_eq!(stdout(&run.out), "data\ndata\n", "{who:?}: {}", run.show());
        // One of run's own flags taken as the value (an empty variable before it) is refused,
        // not copied in as an input named `--ro-bind` with the bind left out.
        assert_refused(
            who,
            &["--input", "--ro-bind=/etc/hostname"],
            &["that is airlock run's flag --ro-bind", "value is missing"],
        );
        assert_refused(
            who,
            &["--env", "-X"],
            &["--env \"-X\"", "not a valid variable name"],
        );
        assert_refused(
            who,
            &["--ro-bind", "-x"],
            &["\"-x\" must be an absolute path"],
        );
    }
}

/// A FIFO named `fifo` in `dir`, open to every user (mode 0666 whatever the umask).
fn fifo_in(dir: &std::path::Path) -> std::path::PathBuf {
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
    fifo
}

#[test]
fn missing_fifo_directory_and_unreadable_inputs_are_refused_without_blocking() {
    let dir = tmpdir();
    let fifo = fifo_in(dir.path());
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let missing = dir.path().join("no-such-file");
    let private = write_file(&dir.path().join("private.txt"), b"root only\n", 0o600);
    // A unix socket does not open (ENXIO): said as what it is, not "No such device or address".
    let sock = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (fifo, sub, missing, sock) = (
        fifo.to_str().unwrap(),
        sub.to_str().unwrap(),
        missing.to_str().unwrap(),
        sock.to_str().unwrap(),
    );
    for who in BOTH {
        assert_refused(
            who,
            &["--input", &format!("in.txt={missing}")],
            &[
                "input in.txt",
                "cannot open",
                missing,
                "No such file or directory",
            ],
        );
        assert_refused(
            who,
            &["--input", &format!("pipe.txt={fifo}")],
            &["input pipe.txt", fifo, "not a regular file"],
        );
        assert_refused(
            who,
            &["--input", &format!("dir.txt={sub}")],
            &["input dir.txt", sub, "not a regular file"],
        );
        assert_refused(
            who,
            &["--input", &format!("sock.txt={sock}")],
            &["input sock.txt", sock, "not a regular file"],
        );
        // A trailing / names a directory: a file so named is ENOTDIR, as `cat FILE/` and a
        // bind source get (it was copied in until a review).
        let slashed = format!("{}/", private.display());
        assert_refused(
            who,
            &["--input", &format!("s.txt={slashed}")],
            &["input s.txt", "cannot open", &slashed, "Not a directory"],
        );
        let sub_slash = format!("{sub}/");
        assert_refused(
            who,
            &["--input", &format!("d.txt={sub_slash}")],
            &["input d.txt", &sub_slash, "not a regular file"],
        );
    }
    // Inputs are opened with the caller's rights: uid 65534 cannot hand in root's 0600 file.
    let p = private.to_str().unwrap();
    assert_refused(
        Launcher::Unprivileged,
        &["--input", &format!("p.txt={p}")],
        &["input p.txt", "cannot open", p, "Permission denied"],
    );
}

/// A FIFO named as an input is refused without being opened: its open (O_NONBLOCK, for reading)
/// let a host writer blocked opening it go on, so the writer's data went into airlock's end and
/// was lost when airlock refused the input, and the FIFO's real reader then found nothing.
/// Devices the same: their open acts (a tape rewinds, a serial line raises DTR, a watchdog
/// starts), and no device here is one a test may open.
#[test]
fn an_input_fifo_is_refused_without_opening_it() {
    let dir = tmpdir();
    let fifo = fifo_in(dir.path());
    let f = fifo.to_str().unwrap();
    for who in BOTH {
        // A host writer blocked opening the FIFO, as a reader's peer waits there.
        let mut writer = Command::new("timeout")
            .args(["20", "sh", "-c", &format!("exec printf data > {f}")])
            .spawn()
            .unwrap();
        let sh_pid = {
            // timeout's child: the shell, blocked in the FIFO's open.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let children = std::fs::read_to_string(format!(
                    "/proc/{}/task/{}/children",
                    writer.id(),
                    writer.id()
                ))
                .unwrap_or_default();
                let blocked = children.split_whitespace().find(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                        .is_ok_and(|w| w == "wait_for_partner")
                });
                if let Some(pid) = blocked {
                    break pid.to_string();
                }
                assert!(
                    Instant::now() < deadline,
                    "the writer never blocked in open"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let run = al(
            who,
            &["run", "--input", &format!("x={f}"), "--", "true"],
            SECS_10,
        );
        assert_eq!(run.code(), Some(2), "{who:?}: {}", run.show());
        assert!(
            stderr(&run.out).contains("not a regular file"),
            "{who:?}: {}",
            run.show()
        );
        // The writer still waits for a reader, and the reader gets its data.
        let wchan = std::fs::read_to_string(format!("/proc/{sh_pid}/wchan")).unwrap_or_default();
        let read = Command::new("timeout")
            .args(["5", "cat", f])
            .output()
            .unwrap();
        let _ = writer.kill();
        let _ = writer.wait();
        assert_eq!(
            (wchan.as_str(), stdout(&read).as_str()),
            ("wait_for_partner", "data"),
            "{who:?}: airlock's open of the FIFO took the writer's data"
        );
    }
}

/// An argument that is not UTF-8 is refused with a message naming it, before anything runs
/// (std's own argument parsing would panic on it). The same bytes reach a
/// command on the host, so the refusal is airlock's.
#[test]
fn a_non_utf8_argument_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let host = Command::new("/bin/echo").arg(bad).output().unwrap();
    assert_eq!(host.stdout, b"caf\xe9\n", "the host's echo takes the bytes");
    for who in BOTH {
        // Each front end refuses in its own format: airlock's exits 2, bwrap's as bubblewrap
        // fails (exit 1, `bwrap:` and --level-prefix's `<3>`).
        let fronts: [(&[&str], i32, &str); 3] = [
            (
                &["run", "--", "/bin/echo"],
                2,
                "airlock: argument 4 is not valid UTF-8",
            ),
            (
                &["bwrap", "/bin/echo"],
                1,
                "bwrap: argument 3 is not valid UTF-8",
            ),
            (
                &["bwrap", "--level-prefix", "/bin/echo"],
                1,
                "<3>bwrap: argument 4",
            ),
        ];
        for (front, code, message) in fronts {
            let mut cmd = airlock(who, front);
            cmd.arg(bad);
            let run = run_bounded(cmd, None, SECS_10);
            let err = run.refused(code, message, &format!("{who:?} {front:?}"));
            assert!(!err.contains("panicked"), "{who:?}: {}", run.show());
        }
    }
}

/// bwrap mode's `--args` data is text too: a byte that is not UTF-8 is refused as on the command
/// line. airlock had read it as U+FFFD, so a `--tmpfs` meant to mask a directory went to
/// another path, made on the host through `--bind / /`, and the directory stayed readable.
#[test]
fn a_non_utf8_argument_read_from_args_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    for who in BOTH {
        let dir = writable_tmpdir();
        let secret = dir.path().join(std::ffi::OsStr::from_bytes(b"sec\xe9"));
        std::fs::create_dir(&secret).unwrap();
        let mut data = b"--tmpfs\0".to_vec();
        data.extend_from_slice(secret.as_os_str().as_bytes());
        data.push(0);
        let line = [
            "bwrap",
            "--bind",
            "/",
            "/",
            "--args",
            "0",
            "--",
            "/bin/echo",
            "ran",
        ];
        let run = run_bounded(airlock(who, &line), Some(&data), SECS_10);
        let says = "bwrap: an argument read from --args is not valid UTF-8";
        run.refused(1, says, &format!("{who:?}"));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            [secret.file_name().unwrap()],
            "{who:?}: made on the host"
        );
        // Control: the same line with the path's bytes as UTF-8 runs the task.
        let utf8 = format!("--tmpfs\0{}\0", dir.path().join("sec\u{e9}").display());
        let run = run_bounded(airlock(who, &line), Some(utf8.as_bytes()), SECS_10);
        assert_eq!(stdout(&run.out), "ran\n", "{who:?}: {}", run.show());
    }
}

/// A request's caller hands in bytes JSON text cannot carry (not UTF-8, a NUL) by `--input`
/// beside `--request`, as the README says to; clap had refused the two together (a framework
/// review). An input named both in the request and by the flag is refused.
#[test]
fn inputs_beside_a_request_are_copied_in_with_its_own() {
    let dir = tmpdir();
    let data = write_file(&dir.path().join("bin.dat"), b"\xff\x00\xfe", 0o644);
    let flag = format!("b={}", data.display());
    for who in BOTH {
        let request = br#"{"command": "sh", "args": ["-c", "od -An -tx1 b; cat t"], "inputs": {"t": "text"}}"#;
        let args = ["run", "--request", "-", "--input", &flag];
        let run = al_stdin(who, &args, request, SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        assert_eq!(run.report()["stdout"], json!(" ff 00 fe\ntext"), "{who:?}");
        let request = br#"{"command": "true", "inputs": {"b": "x"}}"#;
        let run = al_stdin(who, &args, request, SECS_10);
        let msg = run.usage_error(&format!("{who:?} b twice"));
        assert!(
            msg.contains("input \"b\" is given twice"),
            "{who:?}: {msg:?}"
        );
    }
}

/// A command the sandbox lacks but the caller's host has (a script of the caller's working
/// directory, a tool on the caller's PATH) is still not found, with a hint saying how to hand
/// it in; the hint's way runs it. A name the host lacks too gets none.
#[test]
fn a_command_the_host_has_is_not_found_with_a_hint() {
    for who in BOTH {
        let dir = writable_tmpdir();
        let script = write_file(&dir.path().join("tool"), b"#!/bin/sh\necho RAN $0\n", 0o755);
        let host = script.display().to_string();
        let dir_s = dir.path().display().to_string();
        let path = format!("{dir_s}:/usr/bin:/bin");
        for (cwd_name, hint) in [
            ("./tool", "copy it in with --input tool=./tool".to_string()),
            (
                host.as_str(),
                format!("bind its directory (--ro-bind {dir_s})"),
            ),
            ("tool", format!("tool is {host} on the host")),
        ] {
            let mut cmd = airlock(who, &["run", "--", cwd_name]);
            cmd.current_dir(dir.path()).env("PATH", &path);
            let run = run_bounded(cmd, None, SECS_10);
            assert_eq!(run.code(), Some(127), "{who:?} {cwd_name}: {}", run.show());
            let err = stderr(&run.out);
            assert!(
                err.contains("command not found; hint: ") && err.contains(&hint),
                "{who:?} {cwd_name}: {err}"
            );
            // A JSON report gives none: its reader may be a hostile request's author, whom
            // the hint would tell which host files exist (a red team: root's /root/.bashrc).
            let mut cmd = airlock(who, &["run", "--json", "--", cwd_name]);
            cmd.current_dir(dir.path()).env("PATH", &path);
            let run = run_bounded(cmd, None, SECS_10);
            assert_eq!(run.code(), Some(127), "{who:?} {cwd_name}: {}", run.show());
            let error = run.report()["error"].clone();
            assert_eq!(
                error,
                json!(format!("{cwd_name}: command not found")),
                "{who:?}"
            );
        }
        // Each way the hints name runs it.
        for line in [
            &["run", "--input", "tool=./tool", "--", "./tool"][..],
            &["run", "--ro-bind", &dir_s, "--", &host],
        ] {
            let mut cmd = airlock(who, line);
            cmd.current_dir(dir.path());
            let run = run_bounded(cmd, None, SECS_10);
            assert!(
                stdout(&run.out).starts_with("RAN "),
                "{who:?} {line:?}: {}",
                run.show()
            );
        }
        let mut cmd = airlock(who, &["run", "--", "airlock-no-such-tool"]);
        cmd.env("PATH", &path);
        let run = run_bounded(cmd, None, SECS_10);
        assert!(stderr(&run.out).ends_with("airlock-no-such-tool: command not found\n"));
        // Where the sandbox holds the file already, the cause is another: no hint (the
        // sign-off review: `ls` under a task's PATH of nothing was told to bind /usr/bin).
        for line in [
            &["run", "--env", "PATH=/nonexistent", "--", "ls"][..],
            &["run", "--chdir", "/usr", "--", "./tool"],
            &["run", "--input", "tool=./tool", "--", &host],
        ] {
            let mut cmd = airlock(who, line);
            cmd.current_dir(dir.path());
            let run = run_bounded(cmd, None, SECS_10);
            assert_eq!(run.code(), Some(127), "{who:?} {line:?}: {}", run.show());
            assert!(
                !stderr(&run.out).contains("hint"),
                "{who:?} {line:?}: {}",
                run.show()
            );
        }
    }
}

/// A setup step stopped by one of the caller's own limits says which, and how to get past it
/// (an operator review: each said only its errno). Control: the same line without the limit
/// runs.
#[test]
fn a_step_stopped_by_the_callers_own_limit_says_which() {
    let bin = binary().display().to_string();
    for who in BOTH {
        let cases = [
            (
                "--fsize=0:0",
                "",
                "the caller's hard file size limit (ulimit -Hf) is 0 bytes",
            ),
            (
                "",
                "--scratch-size 1M --input k=/proc/kallsyms",
                "scratch is full: the inputs take more than --scratch-size leaves",
            ),
            (
                "",
                "--chdir /airlock-no-such-dir",
                "--chdir (a request's \"chdir\") names a directory inside the sandbox, where \
                 this one is missing",
            ),
            // Root's forks pass RLIMIT_NPROC by its capabilities.
            (
                "--nproc=1:1",
                "",
                "the caller's process limit (ulimit -u) is 1",
            ),
        ];
        for (limit, args, hint) in cases {
            if limit.starts_with("--nproc") && who == Launcher::Root {
                continue;
            }
            let prlimit = match limit {
                "" => String::new(),
                limit => format!("prlimit {limit} "),
            };
            let line = format!("{prlimit}{bin} run {args} -- true 2>&1");
            let out = host_sh(who, &line);
            assert_eq!(
                out.status.code(),
                Some(125),
                "{who:?} {line}: {}",
                stdout(&out)
            );
            assert!(
                stdout(&out).contains(&format!("; hint: {hint}")),
                "{who:?} {line}: {}",
                stdout(&out)
            );
            let out = host_sh(who, &format!("{bin} run -- true 2>&1"));
            assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stdout(&out));
        }
    }
}

#[test]
fn unknown_flag_and_missing_command_are_refused() {
    for who in BOTH {
        // clap refuses: exit 2, its message on stderr; in JSON mode (--json, --request) the
        // JSON failure report on stdout too, as for airlock's other failures.
        for front in [&[][..], &["--json"][..], &["--request", "-"][..]] {
            let mut args = vec!["run"];
            args.extend_from_slice(front);
            args.push("--no-such-flag");
            args.extend_from_slice(&WOULD_RUN);
            let run = al_stdin(who, &args, br#"{"command": "true"}"#, SECS_10);
            assert_eq!(run.code(), Some(2), "{who:?} {args:?}: {}", run.show());
            assert!(
                stderr(&run.out).contains("unexpected argument '--no-such-flag'"),
                "{who:?}: {}",
                run.show()
            );
            if front.is_empty() {
                assert_eq!(stdout(&run.out), "", "{who:?} {args:?}");
                continue;
            }
            let msg = run.usage_error(&format!("{who:?} {args:?}"));
            assert!(
                msg.contains("'--no-such-flag'"),
                "{who:?} {args:?}: {msg:?}"
            );
        }
        // The command without `--` before it, as bubblewrap takes it: the refusal says where
        // it goes (clap said only "unexpected argument"), in plain and JSON mode.
        for front in [&[][..], &["--json"][..]] {
            let mut args = vec!["run"];
            args.extend_from_slice(front);
            args.extend(["sh", "-c", "echo RAN"]);
            let run = al(who, &args, SECS_10);
            assert_eq!(run.code(), Some(2), "{who:?} {args:?}: {}", run.show());
            let tip = "the command goes after '--': airlock run [OPTIONS] -- sh ...";
            assert!(stderr(&run.out).contains(tip), "{who:?}: {}", run.show());
            if !front.is_empty() {
                let msg = run.usage_error(&format!("{who:?} {args:?}"));
                assert!(msg.contains(tip), "{who:?} {args:?}: {msg:?}");
            }
        }
        // explain takes the command the same way, and says so the same way.
        {
            let args = ["explain", "sh", "-c", "echo RAN"];
            let run = al(who, &args, SECS_10);
            assert_eq!(run.code(), Some(2), "{who:?} {args:?}: {}", run.show());
            let tip = "the command goes after '--': airlock explain [OPTIONS] -- sh ...";
            assert!(stderr(&run.out).contains(tip), "{who:?}: {}", run.show());
        }
        // A conflict with several arguments: clap lists them on the lines after its first,
        // and the report names them all (it ended at "cannot be used with:").
        {
            let args = ["run", "--request", "-", "--json", "--", "true"];
            let run = al_stdin(who, &args, br#"{"command": "true"}"#, SECS_10);
            let msg = run.usage_error(&format!("{who:?} {args:?}"));
            assert!(
                msg.contains("cannot be used with") && msg.contains("--json"),
                "{who:?} {args:?}: {msg:?}"
            );
            assert!(msg.contains("[COMMAND]"), "{who:?} {args:?}: {msg:?}");
        }
        // Non-UTF-8 arguments: refused the same way.
        {
            use std::os::unix::ffi::OsStrExt;
            let mut c = airlock(who, &["run", "--json", "--", "echo"]);
            c.arg(std::ffi::OsStr::from_bytes(b"caf\xe9"));
            let run = run_bounded(c, None, SECS_10);
            let msg = run.usage_error(&format!("{who:?} non-UTF-8 argument"));
            assert!(msg.contains("not valid UTF-8"), "{who:?}: {msg:?}");
        }
        for args in [&["run"][..], &["run", "--"][..]] {
            let run = al(who, args, SECS_10);
            run.refused(2, "airlock: no command given", &format!("{who:?} {args:?}"));
        }
        for args in [&["run", "--json"][..], &["run", "--json", "--"][..]] {
            let run = al(who, args, SECS_10);
            let msg = run.usage_error(&format!("{who:?} {args:?}"));
            assert!(
                msg.contains("no command given"),
                "{who:?} {args:?}: {msg:?}"
            );
        }
    }
}

#[test]
fn command_not_found_and_not_executable() {
    let dir = tmpdir();
    let script = write_file(
        &dir.path().join("s.sh"),
        b"#!/bin/sh\necho RAN-MARKER\n",
        0o644,
    );
    let input = format!("s.sh={}", script.display());
    let bad = write_file(
        &dir.path().join("b"),
        b"#!/no/such/interpreter\necho RAN\n",
        0o755,
    );
    let shebang = format!("b={}", bad.display());
    // /bin/true with its loader's name changed, length kept, to one nowhere.
    let elf = std::fs::read("/bin/true").unwrap();
    let loader = b"/lib64/ld-linux-x86-64.so.2";
    let at = (elf.windows(loader.len()).position(|w| w == loader))
        .or_else(|| {
            let arm = b"/lib/ld-linux-aarch64.so.1";
            elf.windows(arm.len()).position(|w| w == arm)
        })
        .expect("/bin/true names its loader");
    let mut elf = elf;
    elf[at + 1] = b'X';
    let no_loader = write_file(&dir.path().join("e"), &elf, 0o755);
    let no_loader = format!("e={}", no_loader.display());
    let exe = write_file(&dir.path().join("x.sh"), b"#!/bin/sh\necho RAN-X\n", 0o755);
    let exe = format!("x.sh={}", exe.display());
    let request = br##"{"command": "./run.sh", "inputs": {"run.sh": "#!/bin/sh\necho RAN"}}"##;
    for who in BOTH {
        let run = al(
            who,
            &["run", "--json", "--", "no-such-command-xyz", "a"],
            SECS_10,
        );
        assert_eq!(run.code(), Some(127), "{who:?}: {}", run.show());
        assert_eq!(
            run.report(),
            json!({
                "error": "no-such-command-xyz: command not found",
                "error_kind": "command_not_found",
                "exit_code": 127,
            }),
            "{who:?}"
        );

        let run = al(who, &["run", "--", "no-such-command-xyz"], SECS_10);
        let says = "airlock: no-such-command-xyz: command not found";
        run.refused(127, says, &format!("{who:?}"));

        // Found, but execve refuses it (EACCES): 126, saying why, where execve alone does
        // not. A directory; a file without an execute bit, which every input given as text
        // is (a framework's `./run.sh` handed in by a request said only "Permission denied").
        let not_executable = |run: &Run| {
            assert_eq!(run.code(), Some(126), "{who:?}: {}", run.show());
            let rep = run.report();
            let kind = &rep["error_kind"];
            assert_eq!(kind, &json!("command_not_executable"), "{who:?}");
            assert_eq!(rep["exit_code"], json!(126), "{who:?}");
            rep["error"].as_str().unwrap().to_string()
        };
        for dir in ["/usr", "/work", "./"] {
            let run = al(who, &["run", "--json", "--", dir], SECS_10);
            let says = format!("{dir}: cannot execute: Permission denied (it is a directory)");
            assert_eq!(not_executable(&run), says, "{who:?}");
        }
        let no_x_bit = "cannot execute: Permission denied (its mode, 0644, has no execute bit: \
                        an input is copied executable only when its host file is, a request's \
                        never; run it through its interpreter (sh NAME) or chmod +x it first)";
        let run = al(
            who,
            &["run", "--json", "--input", &input, "--", "./s.sh"],
            SECS_10,
        );
        assert_eq!(
            not_executable(&run),
            format!("./s.sh: {no_x_bit}"),
            "{who:?}"
        );
        let run = al_stdin(who, &["run", "--request", "-"], request, SECS_10);
        assert_eq!(
            not_executable(&run),
            format!("./run.sh: {no_x_bit}"),
            "{who:?}"
        );
        // A file of a host tree is no input: its mode alone.
        let run = al(who, &["run", "--json", "--", "/etc/passwd"], SECS_10);
        let says = "/etc/passwd: cannot execute: Permission denied (its mode, 0644, has no \
                    execute bit)";
        assert_eq!(not_executable(&run), says, "{who:?}");
        // The control: an input whose host file is executable is copied executable, and runs.
        let run = al(
            who,
            &["run", "--json", "--input", &exe, "--", "./x.sh"],
            SECS_10,
        );
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        assert_eq!(run.report()["stdout"], json!("RAN-X\n"), "{who:?}");
        // bwrap mode keeps bubblewrap's execvp words.
        let run = al(
            who,
            &["bwrap", "--ro-bind", "/", "/", "--", "/usr"],
            SECS_10,
        );
        assert_eq!(run.code(), Some(1), "{who:?}: {}", run.show());
        let says = "bwrap: execvp /usr: Permission denied\n";
        assert_eq!(stderr(&run.out), says, "{who:?}");

        // Found and executable, but what starts it is not in the sandbox: the interpreter its
        // #! line names (a venv's script naming a host python), or an ELF file's loader
        // (PT_INTERP). 126 too, saying which; not "not found".
        for (input, cmd, why) in [
            (
                &shebang,
                "./b",
                "the interpreter its #! line names, \"/no/such/interpreter\", is not in the \
                 sandbox",
            ),
            (&no_loader, "./e", "its ELF loader is not in the sandbox"),
        ] {
            let run = al(
                who,
                &["run", "--json", "--input", input, "--", cmd],
                SECS_10,
            );
            assert_eq!(run.code(), Some(126), "{who:?}: {}", run.show());
            assert_eq!(
                run.report(),
                json!({
                    "error": format!("{cmd}: cannot execute: {why}"),
                    "error_kind": "command_not_executable",
                    "exit_code": 126,
                }),
                "{who:?}"
            );
        }
    }
}

/// A command name past 255 bytes (NAME_MAX), which no file can have, is not found (127), as
/// bash finds it; a path holding such a name exists or not, and bash cannot execute it (126).
/// Both say the kernel's words (airlock had said "cannot execute" of the bare name). So does
/// a path past PATH_MAX (4096) made of short names: airlock's message, name first, had been
/// cut at the channel's cap before the reason (`/a/a/.../a/a` and nothing after).
#[test]
fn a_command_name_past_255_bytes_exits_as_bash_does() {
    let long = "a".repeat(300);
    let cases = [
        (long.clone(), 127),
        (format!("/{long}/x"), 126),
        (format!("/tmp/{long}"), 126),
        (format!("/{}x", "a/".repeat(2100)), 126),
    ];
    for (cmd, code) in &cases {
        let bash = Command::new("bash")
            .args(["-c", r#""$@""#, "bash", cmd])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(bash.code(), Some(*code), "bash {cmd}");
    }
    for who in BOTH {
        for (cmd, code) in &cases {
            let run = al(who, &["run", "--json", "--", cmd], SECS_10);
            assert_eq!(run.code(), Some(*code), "{who:?} {cmd}: {}", run.show());
            let rep = run.report();
            let (says, kind) = match code {
                127 => ("command not found: File name too long", "command_not_found"),
                _ => (
                    "cannot execute: File name too long",
                    "command_not_executable",
                ),
            };
            assert_eq!(
                rep,
                json!({"error": format!("{cmd}: {says}"), "error_kind": kind, "exit_code": code}),
                "{who:?}"
            );
        }
    }
}

/// A command path that cannot be followed to a file is refused as bash refuses it: 126,
/// saying the kernel's words, for a file where a directory should be (ENOTDIR: airlock had
/// said "command not found", 127, as dash does), a symlink loop, a directory it may not
/// search; 127 only where nothing is there (ENOENT). On PATH, bash's search passes over an
/// entry that loops, and a name found nowhere else is not found (127; airlock had said
/// "cannot execute", 126). Each code is checked against bash's on the host, run as uid
/// 65534 (as root it could search the directory of mode 0).
#[test]
fn a_command_path_that_cannot_be_followed_exits_as_bash_does() {
    let dir = tmpdir();
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    let closed = dir.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
    let host = dir.path().display().to_string();
    let bind = format!("{host}:/h");
    let slash = [
        ("/etc/passwd/x", 126, "cannot execute: Not a directory"),
        (
            "/h/loop/x",
            126,
            "cannot execute: Too many levels of symbolic links",
        ),
        (
            "/h/loop",
            126,
            "cannot execute: Too many levels of symbolic links",
        ),
        (
            "/h/closed/x",
            126,
            "cannot execute: Permission denied (a directory on its path may not be searched \
             by the task: mode 0700 on the host, say; give it an execute bit for others)",
        ),
        ("/h/no-such/x", 127, "command not found"),
    ];
    let on_path = [
        ("/h/loop", "x", 127, "command not found"),
        ("/h", "loop", 127, "command not found"),
    ];
    let bash = |path: &str, cmd: &str| {
        Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["/usr/bin/bash", "-c", r#""$@""#, "bash", cmd])
            .env_clear()
            .env("PATH", path)
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .code()
    };
    for (cmd, code, _) in &slash {
        let on_host = cmd.replace("/h/", &format!("{host}/"));
        assert_eq!(bash("/usr/bin", &on_host), Some(*code), "bash {on_host}");
    }
    for (path, cmd, code, _) in &on_path {
        let on_host = path.replace("/h", &host);
        assert_eq!(
            bash(&on_host, cmd),
            Some(*code),
            "bash PATH={on_host} {cmd}"
        );
    }
    let kind = |code: i32| match code {
        127 => "command_not_found",
        _ => "command_not_executable",
    };
    for who in BOTH {
        for (cmd, code, says) in &slash {
            let run = al(
                who,
                &["run", "--json", "--ro-bind", &bind, "--", cmd],
                SECS_10,
            );
            assert_eq!(run.code(), Some(*code), "{who:?} {cmd}: {}", run.show());
            assert_eq!(
                run.report(),
                json!({"error": format!("{cmd}: {says}"), "error_kind": kind(*code),
                       "exit_code": code}),
                "{who:?}"
            );
        }
        for (path, cmd, code, says) in &on_path {
            let env = format!("PATH={path}");
            let args = [
                "run",
                "--json",
                "--ro-bind",
                &bind,
                "--env",
                &env,
                "--",
                cmd,
            ];
            let run = al(who, &args, SECS_10);
            assert_eq!(
                run.code(),
                Some(*code),
                "{who:?} {env} {cmd}: {}",
                run.show()
            );
            assert_eq!(
                run.report(),
                json!({"error": format!("{cmd}: {says}"), "error_kind": kind(*code),
                       "exit_code": code}),
                "{who:?} {env}"
            );
        }
    }
}

/// The caller's own mistakes are bad usage (exit 2, a message naming the flag), found before
/// anything is built: not an isolation step that failed (125). A bind source that does not
/// exist; inputs larger than scratch. The run never starts.
#[test]
fn caller_mistakes_are_bad_usage_not_failed_steps() {
    let dir = tmpdir();
    let big = write_file(&dir.path().join("big"), &vec![b'x'; 2 << 20], 0o644);
    let input = format!("big={}", big.display());
    for who in BOTH {
        for (args, says) in [
            (
                vec![
                    "run",
                    "--ro-bind",
                    "/no/such/path",
                    "--",
                    "sh",
                    "-c",
                    "echo RAN",
                ],
                "--ro-bind /no/such/path: stat(\"/no/such/path\"): ENOENT: No such file or directory",
            ),
            // A negative number is the flag's value, refused as such: clap took it for a flag
            // and said to write `-- -1`, which makes it the command.
            (
                vec!["run", "--host-uid", "-1", "--", "sh", "-c", "echo RAN"],
                "invalid value '-1' for '--host-uid <UID>'",
            ),
            (
                vec!["run", "--timeout", "-5", "--", "sh", "-c", "echo RAN"],
                "--timeout: duration \"-5\": expected",
            ),
            (
                vec!["run", "--bind", "/no/such:/x", "--", "sh", "-c", "echo RAN"],
                "--bind /no/such: stat(\"/no/such\"): ENOENT: No such file or directory",
            ),
            (
                vec![
                    "run",
                    "--scratch-size",
                    "1M",
                    "--input",
                    &input,
                    "--",
                    "sh",
                    "-c",
                    "echo RAN",
                ],
                "the inputs hold 2097152 bytes, more than scratch holds (--scratch-size 1048576)",
            ),
        ] {
            let run = al(who, &args, SECS_10);
            assert_eq!(run.code(), Some(2), "{who:?} {args:?}: {}", run.show());
            let err = stderr(&run.out);
            assert!(err.contains(says), "{who:?} {args:?}: {}", run.show());
            assert!(!stdout(&run.out).contains("RAN"), "{who:?} {args:?}");
        }
    }
}

/// A bind destination the kernel cannot take, a name past 255 bytes or a path past 4087
/// (PATH_MAX less the scaffold's `/newroot` it is made under), is bad usage, exit 2, naming
/// it in a line; it failed at step 7 (125, "setup failed", ENAMETOOLONG, with all 4 KiB of the
/// path). Control: a 255-byte name and a 4087-byte path are bound.
#[test]
fn bind_destinations_past_the_kernels_lengths_are_bad_usage() {
    let path = |len: usize| {
        let mut p = String::new();
        while p.len() < len {
            p += &format!("/{}", "a".repeat(200.min(len - p.len() - 1)));
        }
        p
    };
    let name = |len: usize| format!("/{}", "n".repeat(len));
    for who in BOTH {
        for (dest, says) in [
            (name(255), None),
            (name(256), Some("holds a name longer than 255 bytes")),
            (path(4087), None),
            (path(4088), Some("(4088 bytes) is longer than 4087 bytes")),
        ] {
            let bind = format!("/usr:{dest}");
            let run = al(
                who,
                &["run", "--ro-bind", &bind, "--", "sh", "-c", "echo RAN"],
                SECS_10,
            );
            let ctx = format!("{who:?}: a destination of {} bytes", dest.len());
            run.refused_or_ran(says, &ctx);
            // The message is a line, not the whole 4 KiB path.
            let err = stderr(&run.out);
            assert!(says.is_none() || err.len() < 500, "{ctx}: {err}");
        }
    }
}

/// A trailing `/` on a bind destination does not change where the bind lands in airlock run:
/// a file bound to `/data/` is read at `/data` (with bwrap mode's trailing-slash rule shared
/// by airlock run for a moment, that was step 7's ENOENT from `mknod("/newroot/data/")`, exit
/// 125), and a directory bound to `/docs//` is listed at `/docs`.
#[test]
fn a_trailing_slash_on_a_bind_destination_names_the_same_place() {
    let dir = tmpdir();
    let file = dir.path().join("f");
    std::fs::write(&file, "contents\n").unwrap();
    let bind = format!("{}:/data/", file.display());
    for who in BOTH {
        let run = al(
            who,
            &[
                "run",
                "--ro-bind",
                &bind,
                "--ro-bind",
                "/usr/share:/docs//",
                "--",
                "sh",
                "-c",
                "cat /data && test -d /docs/doc && echo listed",
            ],
            SECS_10,
        );
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        assert_eq!(stdout(&run.out), "contents\nlisted\n", "{who:?}");
    }
}

/// A bind inside another host tree needs its mount point there: inside a read-only one
/// (`/usr`, another --ro-bind) it cannot be made (step 7 failed, 125, EROFS), inside a
/// writable --bind it was made on the host and left there after the run (exit 0, an empty
/// file in the caller's directory). Both are bad usage now, exit 2, and nothing is made; a
/// directory bound over a system path that is a symlink (`/bin -> usr/bin`) too (it was
/// EINVAL, 125), and over a file or link of the sandbox's /dev or /etc, or below one, and a
/// file over a directory, or a directory over a file, of the sandbox or a host tree. Controls:
/// a mount point that exists in the host tree, and one in the sandbox's own /etc and /dev, are
/// bound.
#[test]
fn bind_mount_points_missing_in_a_host_tree_are_bad_usage() {
    let dir = tmpdir();
    let ro = dir.path().join("ro");
    let rw = dir.path().join("rw");
    for d in [&ro, &rw] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let file = write_file(&ro.join("file"), b"x\n", 0o644);
    std::fs::create_dir(ro.join("sub")).unwrap();
    write_file(&rw.join("there"), b"", 0o644);
    let (ro, rw, file) = (ro.display(), rw.display(), file.display());
    let mut cases: Vec<(Vec<String>, Option<&str>)> = vec![
        (
            vec!["--ro-bind".into(), format!("{ro}:/usr/airlock-no-such-dir")],
            Some(
                "does not exist on the host: it is inside /usr (the host's /usr), a read-only tree",
            ),
        ),
        (
            vec![
                "--ro-bind".into(),
                format!("{ro}:/srv"),
                "--ro-bind".into(),
                format!("{file}:/srv/new"),
            ],
            Some("a read-only tree, where it cannot be made"),
        ),
        (
            vec![
                "--bind".into(),
                format!("{rw}:/srv"),
                "--ro-bind".into(),
                format!("{file}:/srv/new"),
            ],
            Some(
                "a writable bind, where it would be made on the host and left there; make it on \
                 the host first, or bind elsewhere",
            ),
        ),
        (
            vec![
                "--bind".into(),
                format!("{rw}:/srv"),
                "--ro-bind".into(),
                format!("{file}:/srv/there"),
            ],
            None,
        ),
        (vec!["--ro-bind".into(), format!("{file}:/etc/new")], None),
        // What step 7 makes in /dev and /etc that is not a directory takes no directory over
        // it and holds no mount point, nor does the sandbox's devpts: each was a failed step
        // 7 (125, ENOTDIR or EACCES). Controls: a file over /dev/null, a directory in /dev.
        (
            vec!["--ro-bind".into(), format!("{ro}:/dev/null")],
            Some("/dev/null is a file or link in the sandbox (a directory cannot be bound"),
        ),
        (
            vec!["--ro-bind".into(), format!("{ro}:/etc/passwd")],
            Some("/etc/passwd is a file or link in the sandbox (a directory cannot be bound"),
        ),
        (
            vec!["--ro-bind".into(), format!("{file}:/dev/fd/new")],
            Some("/dev/fd is a file or link in the sandbox (nothing can be made below it)"),
        ),
        (
            vec!["--ro-bind".into(), format!("{file}:/dev/pts/new")],
            Some("is inside /dev/pts, the sandbox's own devpts"),
        ),
        (vec!["--ro-bind".into(), format!("{file}:/dev/null")], None),
        (vec!["--ro-bind".into(), format!("{ro}:/dev/new")], None),
        // Nor does a file go over a directory there, or in a host tree, or a directory over
        // a host tree's file (each was a failed step 7 too: EISDIR from mknod, ENOTDIR).
        (
            vec!["--ro-bind".into(), format!("{file}:/usr")],
            Some("/usr is a directory in the sandbox, and a file cannot be bound over"),
        ),
        (
            vec!["--ro-bind".into(), format!("{file}:/dev/shm")],
            Some("/dev/shm is a directory in the sandbox, and a file cannot be bound over"),
        ),
        // The directories step 7 makes itself (EISDIR from mknod, 125, as well).
        (
            vec!["--ro-bind".into(), format!("{file}:/etc")],
            Some("/etc is a directory in the sandbox, and a file cannot be bound over"),
        ),
        (
            vec!["--bind".into(), format!("{file}:/var")],
            Some("/var is a directory in the sandbox, and a file cannot be bound over"),
        ),
        (
            vec![
                "--ro-bind".into(),
                format!("{ro}:/srv"),
                "--ro-bind".into(),
                format!("{file}:/srv/sub"),
            ],
            Some("/srv/sub is a directory in the sandbox, and a file cannot be bound over"),
        ),
        (
            vec![
                "--ro-bind".into(),
                format!("{ro}:/srv"),
                "--ro-bind".into(),
                format!("{rw}:/srv/file"),
            ],
            Some("is not a directory, and a directory cannot be bound over it"),
        ),
    ];
    // An /etc entry bound read-only from the host is such a tree too (it was EROFS, 125).
    if Path::new("/etc/ssl/certs").is_dir() {
        cases.push((
            vec![
                "--ro-bind".into(),
                format!("{file}:/etc/ssl/certs/airlock-no-such.pem"),
            ],
            Some("inside /etc/ssl/certs (the host's /etc/ssl/certs), a read-only tree"),
        ));
    }
    // The host's /etc entries the sandbox takes: a directory does not go over one that is a
    // file, nor a file over one that is a directory (each was a failed step 7, 125).
    // and the directory step 7 makes above one (/etc/ssl for ssl/certs).
    if Path::new("/etc/ssl/certs").exists() {
        cases.push((
            vec!["--ro-bind".into(), format!("{file}:/etc/ssl")],
            Some("/etc/ssl is a directory in the sandbox, and a file cannot be bound over"),
        ));
    }
    if std::fs::metadata("/etc/ld.so.cache").is_ok_and(|m| m.is_file()) {
        cases.push((
            vec!["--ro-bind".into(), format!("{ro}:/etc/ld.so.cache")],
            Some("/etc/ld.so.cache is a file or link in the sandbox (a directory cannot be"),
        ));
    }
    if Path::new("/etc/ld.so.conf.d").is_dir() {
        cases.push((
            vec!["--ro-bind".into(), format!("{file}:/etc/ld.so.conf.d")],
            Some("/etc/ld.so.conf.d is a directory in the sandbox, and a file cannot be bound"),
        ));
    }
    if Path::new("/bin").read_link().is_ok() {
        cases.push((
            vec!["--ro-bind".into(), format!("{ro}:/bin")],
            Some("bind destination /bin is a symlink in the sandbox"),
        ));
    }
    for who in BOTH {
        for (flags, says) in &cases {
            let mut args: Vec<&str> = vec!["run"];
            args.extend(flags.iter().map(String::as_str));
            args.extend(["--", "sh", "-c", "echo RAN"]);
            let run = al(who, &args, SECS_10);
            let ctx = format!("{who:?} {flags:?}");
            run.refused_or_ran(*says, &ctx);
            let left: Vec<_> = std::fs::read_dir(rw.to_string())
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(left, ["there"], "{ctx}: made in the caller's directory");
        }
    }
}

/// The mount point check above looks only at the system paths a bind lands in: a run with no
/// bind below one makes no call on them (it had lstat'ed all seven on every launch). Control:
/// the same trace of a run with a bind below /usr shows the launcher looking at /usr.
#[test]
fn the_mount_point_check_looks_only_at_system_paths_a_bind_lands_in() {
    let dir = tmpdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let traced = |flags: &[String]| {
        let log = dir.path().join("trace");
        let out = Command::new("strace")
            .args([
                "-o",
                log.to_str().unwrap(),
                "-e",
                "trace=%stat,%lstat,%fstat,statx,readlink",
            ])
            .arg(binary())
            .arg("run")
            .args(flags)
            .args(["--", "/bin/true"])
            .output()
            .expect("strace");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&log).unwrap();
        let looked: Vec<String> = text
            .lines()
            .filter(|l| {
                [
                    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                ]
                .iter()
                .any(|p| l.contains(&format!("\"{p}\"")))
            })
            .map(str::to_string)
            .collect();
        looked
    };
    let control = traced(&["--ro-bind".into(), format!("{}:/usr/share", data.display())]);
    assert!(
        control.iter().any(|l| l.contains("\"/usr\"")),
        "the control's trace shows no look at /usr: {control:?}"
    );
    let plain = traced(&["--ro-bind".into(), format!("{}:/data", data.display())]);
    assert!(
        plain.is_empty(),
        "a run with no bind below a system path looked at: {plain:?}"
    );
}

/// Inputs that fit scratch by bytes can still fill it: the tmpfs gives each file whole pages
/// and an inode. 257 one-byte inputs (257 pages) in `--scratch-size 1M` (256 of 4 KiB), and 4096
/// empty ones against its 4096 inodes (scratch itself takes one) are bad usage, exit 2, said
/// before anything is built, as inputs larger than scratch are; they failed at step 7 (125,
/// "setup failed", ENOSPC). Control: 256 and 4095 of them run.
#[test]
fn inputs_past_scratch_pages_or_inodes_are_bad_usage() {
    let dir = tmpdir();
    let one = write_file(&dir.path().join("one"), b"x", 0o644);
    let empty = write_file(&dir.path().join("empty"), b"", 0o644);
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .unwrap()
        .unwrap() as usize;
    let pages = (1 << 20) / page + 1;
    let inputs = |n: usize, path: &Path| -> Vec<String> {
        (0..n)
            .flat_map(|i| ["--input".to_string(), format!("n{i}={}", path.display())])
            .collect()
    };
    for who in BOTH {
        for (n, path, says) in [
            (
                pages,
                &one,
                format!("the inputs take {pages} pages of {page} bytes"),
            ),
            (
                4096,
                &empty,
                "4096 inputs are more files than scratch holds".into(),
            ),
        ] {
            for (count, refused) in [(n - 1, false), (n, true)] {
                let mut args = vec!["run".to_string(), "--scratch-size".into(), "1M".into()];
                args.extend(inputs(count, path));
                args.extend(["--", "sh", "-c", "echo RAN"].map(String::from));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let run = al(who, &args, SECS_10);
                let ctx = format!("{who:?}: {count} inputs of {}", path.display());
                run.refused_or_ran(refused.then_some(says.as_str()), &ctx);
            }
        }
    }
}

/// A JSON report airlock cannot write whole (stdout a full device, or a file past the caller's
/// own file size limit, whose SIGXFSZ would have killed airlock halfway through the report) is
/// said on stderr with the run's status, and the run exits 2: never a silent 0, nor 153 with
/// half a report. A reader that closes its end early (`| head`) keeps the status.
#[test]
fn a_report_that_cannot_be_written_is_said_not_lost() {
    let dir = tmpdir();
    let script = "head -c 4000 /dev/zero | tr '\\0' a";
    for who in BOTH {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let file = std::fs::File::create(dir.path().join("report.json")).unwrap();
        for (stdout, fsize) in [(full, "unlimited"), (file, "1")] {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("ulimit -f {fsize}; exec \"$@\""), "sh"])
                .args(as_user(who))
                .arg(binary())
                .args(["run", "--json", "--", "sh", "-c", script]);
            let o = c.stdout(stdout).stderr(Stdio::piped()).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{who:?} {fsize}: {o:?}");
            assert!(
                err.contains("the JSON report could not be written to stdout")
                    && err.contains("(the run's exit status was 0)"),
                "{who:?} {fsize}: {err}"
            );
        }
        // The reader is gone before the report is written: EPIPE, and the task's status.
        assert_reader_gone_keeps_the_status(who, &["--json"]);
    }
}

/// `airlock run FLAGS -- sh -c 'sleep 0.5; echo hi; exit 3' | true`: the reader is gone before
/// anything is written, which is no failure: airlock exits 3, the task's status, silently.
fn assert_reader_gone_keeps_the_status(who: Launcher, flags: &[&str]) {
    let o = Command::new("bash")
        .args(["-c", "\"$@\" | true; echo ${PIPESTATUS[0]}", "bash"])
        .args(as_user(who))
        .arg(binary())
        .arg("run")
        .args(flags)
        .args(["--", "sh", "-c", "sleep 0.5; echo hi; exit 3"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "3\n", "{who:?}: {o:?}");
    assert!(o.stderr.is_empty(), "{who:?}: {o:?}");
}

/// A streamed run whose output cannot be written to the caller's stdout (a full device or
/// disk: the relay's write fails) says so on stderr with the run's status and exits 2, as a
/// JSON report that cannot be written does: never a silent 0 with the output lost. (On
/// /dev/full, which airlock passed through until a review, the task's own write failed.) A
/// reader that left (`| true`) is no failure: the task's own status stays.
#[test]
fn streamed_output_that_cannot_be_written_is_said_not_lost() {
    for who in BOTH {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = airlock(who, &["run", "--", "sh", "-c", "echo hi"])
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{who:?}: {err}");
        assert!(
            err.contains("stdout of the task: writing its file failed: No space left on device")
                && err.contains("not delivered whole (the run's exit status was 0)"),
            "{who:?}: {err}"
        );
        assert_reader_gone_keeps_the_status(who, &[]);
    }
}

/// A character device on a standard stream, other than a terminal or /dev/null, reaches the
/// task as a relayed pipe, as a file does: the task could otherwise reopen it through
/// /proc/self/fd/N with whatever its permissions give (a write-only `2>/dev/kmsg` reopened for
/// reading gave the host's kernel log where `dmesg_restrict` is 0). Here stdin is /dev/zero
/// and stderr /dev/zero opened write-only: the task's stdin is a pipe, and its stderr reopened
/// for reading gives nothing (before: /dev/zero itself, and 3 bytes read from it).
#[test]
fn a_character_device_on_a_stream_is_relayed() {
    let script = "import os\n\
        print(os.readlink('/proc/self/fd/0')[:6])\n\
        fd = os.open('/proc/self/fd/2', os.O_RDONLY | os.O_NONBLOCK)\n\
        try:\n    print(len(os.read(fd, 3)))\n\
        except BlockingIOError:\n    print('nothing')\n";
    for who in BOTH {
        // The same probe on the host, same streams (the control): the device itself, read.
        let run = |mut c: Command| {
            let zero_w = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/zero")
                .unwrap();
            let o = c
                .stdin(std::fs::File::open("/dev/zero").unwrap())
                .stderr(zero_w)
                .output()
                .unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
        };
        let mut host = Command::new("setpriv");
        host.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["/usr/bin/python3", "-c", script]);
        assert_eq!(run(host), (Some(0), "/dev/z\n3\n".into()), "host control");
        assert_eq!(
            run(airlock(who, &["run", "--", "python3", "-c", script])),
            (Some(0), "pipe:[\nnothing\n".into()),
            "{who:?}"
        );
    }
}

/// Whether airlock (`pid`) still has a child: the sandbox's init, until it is reaped.
fn has_child(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| {
            std::fs::read_to_string(t.path().join("children")).is_ok_and(|c| !c.trim().is_empty())
        })
}

/// `airlock run --json` of `sh -c SCRIPT` with a cap large enough for a report of 300,000
/// bytes of stdout, more than a pipe holds (64 KiB).
fn big_report_args(script: &str) -> [&str; 8] {
    [
        "run",
        "--json",
        "--max-output",
        "400000",
        "--",
        "sh",
        "-c",
        script,
    ]
}

/// A caller that never reads its pipe leaves airlock blocked writing a report larger than the
/// pipe (the sandbox is gone by then). SIGTERM, SIGINT, SIGHUP, or another signal whose
/// default action ends a process (SIGQUIT, SIGUSR1; during the run airlock forwards them), to
/// airlock must end that wait, as they end any writer blocked there (a framework's `terminate()` after its own
/// timeout), not leave airlock until the caller reads or closes its end: airlock dies of the
/// signal. Control: a caller that reads gets the whole report.
#[test]
fn a_signal_ends_airlock_blocked_on_a_report_its_caller_does_not_read() {
    use nix::sys::signal::Signal;
    // 300,000 bytes of stdout, more than a pipe holds (64 KiB); the sleep tells when the task
    // is gone.
    let args = big_report_args("head -c 300000 /dev/zero | tr '\\0' a; sleep 0.731");
    for who in BOTH {
        let run = al(who, &args, SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?} control: {}", run.show());
        assert_eq!(
            run.report()["stdout"],
            json!("a".repeat(300_000)),
            "{who:?}"
        );
        for sig in [
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGQUIT,
            Signal::SIGUSR1,
        ] {
            let mut cmd = airlock(who, &args);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let mut child = cmd.spawn().unwrap();
            let pid = child.id();
            // The sandbox ends and is reaped; airlock then writes its report and waits.
            wait_for_process("sleep 0.731", SECS_10);
            let begin = Instant::now();
            let sleeping = || {
                procs_with("sleep 0.731")
                    .iter()
                    .any(|p| p.cmdline == "sleep 0.731")
            };
            while (has_child(pid) || sleeping()) && begin.elapsed() < SECS_10 {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(200));
            if child.try_wait().unwrap().is_some() || has_child(pid) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{who:?} {sig}: airlock was not waiting on its unread report");
            }
            signal_pid(pid, sig);
            let status = wait_until(&mut child, Instant::now() + Duration::from_secs(3));
            drop(child.stdout.take());
            let Some(status) = status else {
                panic!("{who:?}: airlock still blocked on its report 3 s after {sig}: killed");
            };
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                status.signal(),
                Some(sig as i32),
                "{who:?} {sig}: {status:?}"
            );
        }
    }
}

/// A caller's stdout may be non-blocking (O_NONBLOCK is a flag of the open file, shared with
/// whoever set it: an asyncio writer on the caller's own stdout). A report larger than what
/// the pipe has room for then meets EAGAIN: airlock must wait for room, not give up with half
/// a report and exit 2. Control: the same pipe, blocking.
#[test]
fn a_report_to_a_non_blocking_stdout_is_written_whole() {
    let script = "head -c 300000 /dev/zero | tr '\\0' a";
    for who in BOTH {
        for nonblocking in [false, true] {
            let (r, w) = nix::unistd::pipe().unwrap();
            if nonblocking {
                let flags = nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_GETFL).unwrap();
                let flags =
                    nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
                nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETFL(flags)).unwrap();
            }
            let mut cmd = airlock(who, &big_report_args(script));
            cmd.stdin(Stdio::null())
                .stdout(Stdio::from(w))
                .stderr(Stdio::piped());
            let start = Instant::now();
            let mut child = cmd.spawn().unwrap();
            drop(cmd);
            let err = drain(child.stderr.take().unwrap());
            // The reader comes late: the pipe is full when airlock writes its report.
            std::thread::sleep(Duration::from_millis(1500));
            let out = drain(std::fs::File::from(r));
            let status = wait_until(&mut child, start + SECS_10)
                .unwrap_or_else(|| panic!("{who:?} non-blocking {nonblocking}: still running"));
            let run = Run::collect(status, start.elapsed(), [out, err]);
            let ctx = format!("{who:?} non-blocking {nonblocking}");
            assert_eq!(run.code(), Some(0), "{ctx}: {}", run.show());
            assert_eq!(run.report()["stdout"], json!("a".repeat(300_000)), "{ctx}");
        }
    }
}

/// A caller whose open-file limit leaves airlock no descriptor beyond its standard streams
/// (`ulimit -n 3`) gets its run's report all the same: step 1 cannot make its descriptors
/// (exit 125, the task never ran), and the report saying so reaches stdout, though the
/// signalfd airlock watches while it writes a report cannot be made either. (Before, the
/// report was lost: exit 2, "the JSON report could not be written to stdout: No file
/// descriptors available".) `prlimit` lowers the limit just before airlock's exec, after
/// setpriv has loaded its libraries.
#[test]
fn a_caller_with_no_descriptor_to_spare_still_gets_its_report() {
    for who in BOTH {
        for args in [
            &["run", "--json", "--", "sh", "-c", "echo RAN-MARKER"][..],
            &["run", "--request", "-"][..],
        ] {
            let cmd = with_no_descriptor_to_spare(who, args);
            let input = br#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"]}"#;
            let run = run_bounded(cmd, Some(input), SECS_10);
            let ctx = format!("{who:?} {args:?}");
            assert_eq!(run.code(), Some(125), "{ctx}: {}", run.show());
            let rep = run.report();
            assert_eq!(rep["error_kind"], json!("setup"), "{ctx}: {rep}");
            assert_eq!(rep["exit_code"], json!(125), "{ctx}: {rep}");
            assert!(
                rep["error"].as_str().is_some_and(|e| e.contains("EMFILE")),
                "{ctx}: {rep}"
            );
            assert!(!rep.to_string().contains("RAN-MARKER"), "{ctx}: {rep}");
        }
    }
}

/// `airlock ARGS` as `who` under an open-file limit of 3: its standard streams and no more.
/// `prlimit` lowers it just before airlock's exec, after setpriv has loaded its libraries.
fn with_no_descriptor_to_spare(who: Launcher, args: &[&str]) -> Command {
    let mut cmd = Command::new(as_user(who).first().copied().unwrap_or("prlimit"));
    if let Some((_, rest)) = as_user(who).split_first() {
        cmd.args(rest).arg("prlimit");
    }
    cmd.arg("--nofile=3:3").arg(binary()).args(args);
    cmd
}

/// The same caller (no descriptor to spare, so no signalfd) whose stdout is a pipe already
/// full: airlock waits for room to write its report, and a SIGTERM that comes meanwhile ends
/// it by that signal, as it ends one that watches a signalfd
/// (`a_signal_ends_airlock_blocked_on_a_report_its_caller_does_not_read`). The caller starts
/// airlock with SIGTERM blocked, which `airlock run` forwards all the same: the wait must
/// unblock it, or it would hold airlock until the caller reads. Control: a caller that then
/// reads gets the report whole.
#[test]
fn a_signal_ends_a_report_wait_that_has_no_signalfd() {
    use nix::sys::signal::Signal;
    use std::os::unix::process::ExitStatusExt;
    let args = ["run", "--json", "--", "true"];
    for who in BOTH {
        for signalled in [true, false] {
            let ctx = format!("{who:?} signalled {signalled}");
            let (r, w) = nix::unistd::pipe().unwrap();
            let filler = std::fs::File::from(w.try_clone().unwrap());
            nix::fcntl::fcntl(
                &filler,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
            )
            .unwrap();
            let mut filled = 0;
            while let Ok(n) = (&filler).write(&[b'x'; 4096]) {
                filled += n;
            }
            drop(filler);
            // python3 blocks SIGTERM, then execs prlimit, which execs airlock.
            let block = "import os, signal, sys; \
                         signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); \
                         os.execvp(sys.argv[1], sys.argv[1:])";
            let mut cmd = Command::new(as_user(who).first().copied().unwrap_or(PYTHON));
            if let Some((_, rest)) = as_user(who).split_first() {
                cmd.args(rest).arg(PYTHON);
            }
            cmd.args(["-c", block, "prlimit", "--nofile=3:3"])
                .arg(binary())
                .args(args);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::from(w))
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            drop(cmd);
            let err = drain(child.stderr.take().unwrap());
            std::thread::sleep(Duration::from_millis(300));
            if child.try_wait().unwrap().is_some() {
                let status = child.wait().unwrap();
                panic!(
                    "{ctx}: airlock did not wait for room: {status:?}, stderr {:?}",
                    String::from_utf8_lossy(&err.join().unwrap())
                );
            }
            if signalled {
                signal_pid(child.id(), Signal::SIGTERM);
                let status = wait_until(&mut child, Instant::now() + Duration::from_secs(3));
                let Some(status) = status else {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{ctx}: still blocked on its report 3 s after SIGTERM: killed");
                };
                assert_eq!(status.signal(), Some(Signal::SIGTERM as i32), "{ctx}");
                continue;
            }
            let out = drain(std::fs::File::from(r));
            let status = wait_until(&mut child, Instant::now() + SECS_10)
                .unwrap_or_else(|| panic!("{ctx}: still running"));
            let got = out.join().unwrap();
            assert_eq!(status.code(), Some(125), "{ctx}");
            let report: Value = serde_json::from_slice(&got[filled..]).unwrap();
            assert_eq!(report["error_kind"], json!("setup"), "{ctx}: {report}");
        }
    }
}

/// A caller's small stack limit (`ulimit -s 64`, 64 KiB) still gets a JSON report, as it
/// gets a streamed run: the launcher's capture once kept a 64 KiB buffer on its stack for
/// output past the cap, and died of SIGSEGV (139) under that limit before the task ran. The
/// environment is cleared: its strings take the same stack.
#[test]
fn a_small_stack_limit_still_gets_a_report() {
    for who in BOTH {
        for args in [
            &["run", "--json", "--", "sh", "-c", "echo RAN"][..],
            &["run", "--", "sh", "-c", "echo RAN"][..],
        ] {
            let mut cmd = Command::new(as_user(who).first().copied().unwrap_or("prlimit"));
            if let Some((_, rest)) = as_user(who).split_first() {
                cmd.args(rest).arg("prlimit");
            }
            cmd.arg("--stack=65536")
                .arg(binary())
                .args(args)
                .env_clear()
                .env("PATH", "/usr/bin:/bin");
            let run = run_bounded(cmd, None, SECS_10);
            let ctx = format!("{who:?} {args:?}");
            assert_eq!(run.code(), Some(0), "{ctx}: {}", run.show());
            match args[1] == "--json" {
                true => assert_eq!(run.report()["stdout"], json!("RAN\n"), "{ctx}"),
                false => assert_eq!(stdout(&run.out), "RAN\n", "{ctx}"),
            }
        }
    }
}

#[test]
fn bad_requests_are_refused_naming_the_key() {
    let dir = tmpdir();
    let file = write_file(
        &dir.path().join("req.json"),
        br#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "timeout_ms": "10"}"#,
        0o644,
    );
    for who in BOTH {
        let cases: [(&str, &[&str]); 13] = [
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "comand": 1}"#,
                &["unknown key \"comand\""],
            ),
            (
                r#"{"command": "sh", "args": "-c echo RAN-MARKER"}"#,
                &["\"args\"", "array of strings"],
            ),
            (
                r#"{"command": ["sh", "-c", "echo RAN-MARKER"]}"#,
                &["\"command\"", "non-empty string"],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "env": {"A": 1}}"#,
                &["\"env\""],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "max_output": -1}"#,
                &["\"max_output\""],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "inputs": {"../x": "t"}}"#,
                &["input name \"../x\""],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"]"#,
                &["not valid JSON"],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "env": {"1A": "x"}}"#,
                &["key \"env\"", "\"1A\" is not a valid variable name"],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "env": {"A": "x\u0000"}}"#,
                &["key \"env\"", "NUL"],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "cpu_time_ms": 0}"#,
                &["cpu_time_ms"],
            ),
            // A key given twice: a reviewer reads the first, a last-wins parser runs the
            // second.
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "args": ["-c", "id"]}"#,
                &["key \"args\" is given twice"],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "env": {"A": "", "A": ""}}"#,
                &["key \"env\": \"A\" is given twice"],
            ),
            (
                r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "inputs": {"a": "", "a": ""}}"#,
                &["key \"inputs\": \"a\" is given twice"],
            ),
        ];
        for (text, needles) in cases {
            let run = al_stdin(who, &["run", "--request", "-"], text.as_bytes(), SECS_10);
            let msg = run.usage_error(&format!("{who:?} {text}"));
            for n in needles {
                assert!(msg.contains(n), "{who:?} {text}: {msg:?} lacks {n:?}");
            }
        }
        // From a file, a wrong type names the key too.
        let run = al(who, &["run", "--request", file.to_str().unwrap()], SECS_10);
        let msg = run.usage_error(&format!("{who:?} request file"));
        assert!(msg.contains("\"timeout_ms\""), "{who:?}: {msg:?}");
        // A request file that does not exist.
        let missing = dir.path().join("missing.json");
        let run = al(
            who,
            &["run", "--request", missing.to_str().unwrap()],
            SECS_10,
        );
        let msg = run.usage_error(&format!("{who:?} missing request file"));
        assert!(msg.contains("missing.json"), "{who:?}: {msg:?}");
        // A request without end is refused once past 64 MiB, not read into memory forever.
        let run = al(who, &["run", "--request", "/dev/zero"], SECS_10);
        let msg = run.usage_error(&format!("{who:?} endless request"));
        assert!(msg.contains("longer than 64 MiB"), "{who:?}: {msg:?}");
    }
}

/// A request of 64 MiB (the cap) made of tiny elements is read in memory bounded by a small
/// multiple of its size, and what execve or the inputs' hand-over could never take is refused
/// (exit 2) as it is read: parsed into a tree first, 64 MiB of empty strings took 2.2 GB. The
/// bound is the launcher's address space, 4 times the cap; the control is a request of the
/// same size that runs whole under it.
#[test]
fn a_request_of_tiny_elements_is_read_in_bounded_memory() {
    const CAP: usize = 64 << 20;
    let dir = tmpdir();
    /// `{"command": "true", KEY: OPEN ITEM,ITEM,... CLOSE}` filling the cap, item i from `item`.
    fn fill(key: &str, open: &str, close: &str, item: impl Fn(usize) -> String) -> Vec<u8> {
        let mut t = format!(r#"{{"command": "true", "{key}": {open}"#);
        let end = format!("{close}}}");
        for i in 0.. {
            let it = item(i);
            if t.len() + it.len() + 1 + end.len() > CAP {
                break;
            }
            if i > 0 {
                t.push(',');
            }
            t.push_str(&it);
        }
        t.push_str(&end);
        t.into_bytes()
    }
    // A distinct short name for each i: A, B, ..., Z, BA, BB, ...
    let name = |mut i: usize| {
        let mut n = Vec::new();
        loop {
            n.push(b'A' + (i % 26) as u8);
            i /= 26;
            if i == 0 {
                break;
            }
        }
        String::from_utf8(n.into_iter().rev().collect()).unwrap()
    };
    let cases = [
        ("args", fill("args", "[", "]", |_| r#""""#.into()), "execve"),
        (
            "env",
            fill("env", "{", "}", |i| format!(r#""{}":"""#, name(i))),
            "execve",
        ),
        (
            "inputs",
            fill("inputs", "{", "}", |i| format!(r#""{}":"""#, name(i))),
            "inputs are more",
        ),
    ];
    let bounded = |who, path: &Path| {
        let mut c = host_command(who, "prlimit");
        c.arg(format!("--as={}", 4 * CAP)).arg(binary());
        c.args(["run", "--request", path.to_str().unwrap()]);
        run_bounded(c, None, SECS_10)
    };
    for (key, text, needle) in cases {
        assert!(text.len() > CAP - 16, "{key}: {} bytes", text.len());
        let path = write_file(&dir.path().join(format!("{key}.json")), &text, 0o644);
        for who in BOTH {
            let msg = bounded(who, &path).usage_error(&format!("{who:?} {key}"));
            assert!(msg.contains(needle), "{who:?} {key}: {msg:?}");
        }
    }
    // Control: a request as large, one input of 60 MiB and many arguments, runs whole.
    let big = "x".repeat(60 << 20);
    let args = r#", """#.repeat(100_000);
    let text = format!(
        r#"{{"command": "sh", "args": ["-c", "wc -c < big"{args}], "inputs": {{"big": "{big}"}}}}"#
    );
    let path = write_file(&dir.path().join("control.json"), text.as_bytes(), 0o644);
    for who in BOTH {
        let run = bounded(who, &path);
        let rep = run.report();
        assert_eq!(
            rep["stdout"],
            json!(format!("{}\n", 60 << 20)),
            "{who:?}: {}",
            run.show()
        );
    }
}

/// `--request -` reads stdin to its end, but a caller that writes the request and never
/// closes stdin is refused (exit 2) 5 s after the request's closing brace instead of holding
/// airlock forever; a writer that pauses mid-request for longer, or closes a moment after the
/// brace, runs as before.
#[test]
fn a_request_whose_stdin_stays_open_is_refused_not_waited_on_forever() {
    const REQ: &str = r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"]}"#;
    /// Write `first`, wait `pause`, write `rest`, hold stdin open `hold`, then close it.
    fn written(who: Launcher, first: &str, pause: Duration, rest: &str, hold: Duration) -> Run {
        let (first, rest) = (first.to_string(), rest.to_string());
        let feed = Box::new(move |mut w: ChildStdin| {
            let _ = w.write_all(first.as_bytes()).and_then(|()| w.flush());
            std::thread::sleep(pause);
            let _ = w.write_all(rest.as_bytes()).and_then(|()| w.flush());
            std::thread::sleep(hold);
        });
        run_fed(
            airlock(who, &["run", "--request", "-"]),
            Some(feed),
            SECS_10 * 2,
        )
    }
    let ran = |run: &Run, ctx: &str| {
        assert_eq!(run.code(), Some(0), "{ctx}: {}", run.show());
        assert_eq!(run.report()["stdout"], json!("RAN-MARKER\n"), "{ctx}");
    };
    std::thread::scope(|s| {
        for who in BOTH {
            s.spawn(move || {
                let secs = Duration::from_secs;
                // The request whole at once, stdin held open 12 s (the 5 s count from the
                // brace airlock read, after a start a loaded host may slow by seconds).
                let run = written(who, REQ, Duration::ZERO, "\n", secs(12));
                let msg = run.usage_error(&format!("{who:?} stdin held open"));
                assert!(msg.contains("stayed open 5 s"), "{who:?}: {msg:?}");
                assert!(
                    run.took >= secs(4) && run.took < secs(11),
                    "{who:?}: refused after {:?}",
                    run.took
                );
                // Control: a writer pausing 6 s mid-request is waited for.
                let (head, tail) = REQ.split_at(30);
                ran(
                    &written(who, head, secs(6), tail, Duration::ZERO),
                    "slow writer",
                );
                // Control: stdin closed 1 s after the brace.
                ran(
                    &written(who, REQ, Duration::ZERO, " ", secs(1)),
                    "late close",
                );
            });
        }
    });
}

/// A request as Python or Node may write it runs: a byte order mark before it, whole numbers
/// written as floats (Python's `5000.0`), null for a key left out (Python's None). A fraction
/// (however small: `1e-400` had been taken as 0), and a request in UTF-16 (Windows PowerShell's `>`), are refused saying what is wrong.
#[test]
fn a_request_as_python_or_node_writes_it_runs() {
    let dir = tmpdir();
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend(r#"{"command": "true"}"#.encode_utf16().flat_map(u16::to_le_bytes));
    let utf16 = write_file(&dir.path().join("utf16.json"), &utf16, 0o644);
    let text = "\u{feff}{\"command\": \"sh\", \"args\": [\"-c\", \"echo RAN-MARKER\"], \
                \"cpu_time_ms\": 2000.0, \"timeout_ms\": 5e3, \"env\": null, \"memory\": null}";
    for who in BOTH {
        let run = al_stdin(who, &["run", "--request", "-"], text.as_bytes(), SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        let rep = run.report();
        assert_eq!(rep["stdout"], json!("RAN-MARKER\n"), "{who:?}: {rep}");
        assert_eq!(
            rep["limits"]["cpu_time_ms"]["requested"],
            json!(2000),
            "{who:?}"
        );
        // A number that is not exactly a whole number >= 0 is refused, judged on its text: a
        // float would make 0 of `1e-400` (taken as "keep no output") and 1 of the last.
        for (key, number) in [
            ("timeout_ms", "1.5"),
            ("max_output", "1e-400"),
            ("max_output", "0.5"),
            ("pids", "100.00000000000000000001"),
            ("nofile", "-1e2"),
            ("cpu_time_ms", "18446744073709551616"),
        ] {
            let text = format!(
                r#"{{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "{key}": {number}}}"#
            );
            let run = al_stdin(who, &["run", "--request", "-"], text.as_bytes(), SECS_10);
            let msg = run.usage_error(&format!("{who:?} {key} {number}"));
            let says = format!("the number `{number}`, expected key \"{key}\"");
            assert!(msg.contains(&says), "{who:?}: {msg:?} lacks {says:?}");
        }
        // Control: a whole number written as a float is that number.
        for number in ["4", "4.0", "4e0", "0.04e2"] {
            let text = format!(
                r#"{{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "max_output": {number}}}"#
            );
            let run = al_stdin(who, &["run", "--request", "-"], text.as_bytes(), SECS_10);
            assert_eq!(run.code(), Some(0), "{who:?} {number}: {}", run.show());
            assert_eq!(run.report()["stdout"], json!("RAN-"), "{who:?} {number}");
        }
        let run = al(who, &["run", "--request", utf16.to_str().unwrap()], SECS_10);
        let msg = run.usage_error(&format!("{who:?} UTF-16"));
        assert!(msg.contains("UTF-16"), "{msg:?}");
    }
}

/// The output cap has a ceiling of 64 MiB: airlock holds what it keeps, and the report's text
/// can be 6 times longer, so a cap of "everything" let a task writing gigabytes grow airlock
/// past the machine's memory and lose the report. Above it: exit 2, before anything runs.
#[test]
fn an_output_cap_past_its_ceiling_is_refused() {
    for who in BOTH {
        let huge =
            r#"{"command": "sh", "args": ["-c", "echo RAN-MARKER"], "max_output": 1099511627776}"#;
        let run = al_stdin(who, &["run", "--request", "-"], huge.as_bytes(), SECS_10);
        let msg = run.usage_error(&format!("{who:?} request"));
        assert!(msg.contains("max_output"), "{who:?}: {msg:?}");
        let run = al(
            who,
            &["run", "--json", "--max-output", "1T", "--", "true"],
            SECS_10,
        );
        let msg = run.usage_error(&format!("{who:?} flag"));
        assert!(msg.contains("--max-output"), "{who:?}: {msg:?}");
        // Control: the ceiling itself is taken.
        let (run, rep) = json_sh(who, &["--max-output", "64M"], "echo RAN-MARKER", SECS_10);
        assert_eq!(
            rep["stdout"],
            json!("RAN-MARKER\n"),
            "{who:?}: {}",
            run.show()
        );
    }
}

/// `--env NAME` forwards the caller's value as text: one that is not UTF-8 is refused (exit 2,
/// naming it), never silently dropped.
#[test]
fn a_forwarded_variable_that_is_not_utf8_is_refused_not_dropped() {
    use std::os::unix::ffi::OsStrExt;
    let not_text = std::ffi::OsStr::from_bytes(b"x\xffy");
    for who in BOTH {
        let script = ["sh", "-c", "echo ${TEXT-unset} ${NOT_TEXT-unset}"];
        let mut args = vec!["run", "--json", "--env", "TEXT", "--env", "NOT_TEXT", "--"];
        args.extend(script);
        let mut c = airlock(who, &args);
        c.env("NOT_TEXT", not_text).env("TEXT", "ok");
        let run = run_bounded(c, None, SECS_10);
        let msg = run.usage_error(&format!("{who:?} --env NOT_TEXT"));
        assert!(msg.contains("--env NOT_TEXT"), "{who:?}: {msg:?}");
        // Control: the same caller, forwarding only the text one.
        let mut args = vec!["run", "--json", "--env", "TEXT", "--"];
        args.extend(script);
        let mut c = airlock(who, &args);
        c.env("NOT_TEXT", not_text).env("TEXT", "ok");
        let run = run_bounded(c, None, SECS_10);
        assert_eq!(
            run.report()["stdout"],
            json!("ok unset\n"),
            "{who:?}: {}",
            run.show()
        );
    }
}

/// Flags beside `--request` are not dropped: binds add to the request, `--timeout` and
/// `--max-output` override its keys (a caller's safety bound must hold whatever the request
/// says).
#[test]
fn flags_beside_a_request_add_to_it_and_override_its_keys() {
    let dir = tmpdir();
    write_file(&dir.path().join("mark"), b"MARK\n", 0o644);
    let bind = format!("{}:/hostdir", dir.path().display());
    for who in BOTH {
        let text = r#"{"command": "sh", "max_output": 50,
            "args": ["-c", "cat /hostdir/mark && head -c 100 /dev/zero | tr '\\0' x"]}"#;
        let flags = [
            "run",
            "--request",
            "-",
            "--max-output",
            "10",
            "--ro-bind",
            &bind,
        ];
        let run = al_stdin(who, &flags, text.as_bytes(), SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        let rep = run.report();
        assert_eq!(rep["stdout"], json!("MARK\nxxxxx"), "{who:?}: {rep}");
        assert_eq!(rep["stdout_truncated"], json!(true), "{who:?}: {rep}");
        // The request's own key applies when no flag overrides it.
        let run = al_stdin(
            who,
            &["run", "--request", "-", "--ro-bind", &bind],
            text.as_bytes(),
            SECS_10,
        );
        assert_eq!(
            run.report()["stdout"].as_str().map(str::len),
            Some(50),
            "{who:?}: {}",
            run.show()
        );
        // Control: without the bind, the request alone does not see the host directory.
        let run = al_stdin(who, &["run", "--request", "-"], text.as_bytes(), SECS_10);
        let rep = run.report();
        assert_ne!(rep["exit_code"], json!(0), "{who:?}: {rep}");
        assert_eq!(rep["stdout"], json!(""), "{who:?}: {rep}");

        let sleeper = br#"{"command": "sleep", "args": ["20"], "timeout_ms": 15000}"#;
        let run = al_stdin(
            who,
            &["run", "--request", "-", "--timeout", "300ms"],
            sleeper,
            SECS_10,
        );
        assert_eq!(run.code(), Some(124), "{who:?}: {}", run.show());
        // (Not the request's 15 s: room for a start a loaded host slows.)
        assert!(run.took < Duration::from_secs(8), "{who:?}: {}", run.show());
        assert_eq!(run.report()["timed_out"], json!(true), "{who:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// C. Hostile results in scratch
// ---------------------------------------------------------------------------------------------

fn skipped(rep: &Value) -> BTreeSet<(String, String)> {
    rep["files_skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn assert_clean_exit(who: Launcher, run: &Run, rep: &Value) {
    assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
    assert_eq!(rep["exit_code"], json!(0), "{who:?}");
    assert_eq!(rep["signal"], Value::Null, "{who:?}");
    assert_eq!(rep["timed_out"], json!(false), "{who:?}");
}

/// File names that are not UTF-8 cannot be JSON keys: two that differ only in such bytes must
/// not collapse into one reported file, nor pass for an input left as handed.
#[test]
fn files_named_in_bytes_that_are_not_utf8_are_skipped_not_merged() {
    for who in BOTH {
        let text = r#"{"command": "sh", "inputs": {"a\ufffd": "same"}, "args": ["-c",
            "printf one > \"$(printf 'a\\377')\"; printf same > \"$(printf 'a\\376')\"; printf three > b"]}"#;
        let run = al_stdin(who, &["run", "--request", "-"], text.as_bytes(), SECS_10);
        let rep = run.report();
        assert_clean_exit(who, &run, &rep);
        // The input was left as handed; the one file with a UTF-8 name is reported.
        assert_eq!(rep["files"], json!({"b": "three"}), "{who:?}: {rep}");
        assert_eq!(
            skipped(&rep),
            pairs(&[("a\u{fffd}", "name not UTF-8")]),
            "{who:?}: {rep}"
        );
        assert_eq!(
            rep["files_skipped"].as_array().unwrap().len(),
            2,
            "{who:?}: {rep}"
        );
    }
}

/// A task that makes scratch unreadable to its host uid leaves the report one entry, named
/// `.`, saying so (README, files_skipped), not an empty report that reads as "no files". An
/// unprivileged caller's launcher is that uid; a root caller's still reads it. Control: the
/// same file is reported when scratch stays readable.
#[test]
fn scratch_made_unreadable_is_reported_as_such() {
    for who in BOTH {
        for lock in [false, true] {
            let script = format!("echo x > f; {}", if lock { "chmod 000 /work" } else { ":" });
            let (run, rep) = json_sh(who, &[], &script, SECS_10);
            assert_clean_exit(who, &run, &rep);
            let locked_out = lock && who == Launcher::Unprivileged;
            let want = if locked_out {
                json!({})
            } else {
                json!({"f": "x\n"})
            };
            assert_eq!(rep["files"], want, "{who:?} {lock}: {rep}");
            let reasons = skipped(&rep);
            let said = reasons
                .iter()
                .any(|(n, r)| n == "." && r.starts_with("scratch unreadable: EACCES"));
            assert_eq!(said, locked_out, "{who:?} {lock}: {rep}");
            assert_eq!(
                reasons.len(),
                usize::from(locked_out),
                "{who:?} {lock}: {rep}"
            );
        }
    }
}

/// At most 1 MiB of file text comes back in all: the file that reaches it is cut there and
/// named in files_truncated, and the files after it are listed as `total size limit`
/// (README, "The JSON report"). Control: two such files, 800,000 bytes, come back whole.
#[test]
fn file_text_stops_at_one_mib_in_all() {
    for who in BOTH {
        for n in [2, 4] {
            let script = format!(
                "for i in $(seq {n}); do head -c 400000 /dev/zero | tr '\\0' a > f$i; done"
            );
            let (run, rep) = json_sh(who, &["--max-output", "1M"], &script, SECS_10);
            assert_clean_exit(who, &run, &rep);
            let files = rep["files"].as_object().unwrap();
            let total: usize = files.values().map(|t| t.as_str().unwrap().len()).sum();
            let truncated = rep["files_truncated"].as_array().unwrap();
            let over = skipped(&rep);
            if n == 2 {
                assert_eq!((files.len(), total), (2, 800_000), "{who:?}: {rep}");
                assert!(truncated.is_empty() && over.is_empty(), "{who:?}: {rep}");
                continue;
            }
            assert_eq!((files.len(), total), (3, 1 << 20), "{who:?}: {rep}");
            assert_eq!(truncated.len(), 1, "{who:?}: {rep}");
            let cut = truncated[0].as_str().unwrap();
            assert_eq!(files[cut].as_str().unwrap().len(), (1 << 20) - 800_000);
            assert_eq!(over.len(), 1, "{who:?}: {rep}");
            assert!(
                over.iter().all(|(_, r)| r == "total size limit"),
                "{who:?}: {rep}"
            );
        }
    }
}

#[test]
fn symlinks_out_of_scratch_are_skipped_and_never_followed() {
    let dir = tmpdir();
    let creds = write_file(
        &dir.path().join("credentials"),
        format!("[default]\naws_secret_access_key = {CRED_TOKEN}\n").as_bytes(),
        0o644,
    );
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap();
    let script = format!(
        "ln -s {} result.txt && ln -s /etc/shadow shadow && \
         ln -s ../../../../../../etc/shadow relshadow && ln -s /proc/1/environ environ",
        creds.display()
    );
    for who in BOTH {
        let (run, rep) = json_sh(who, &["--max-output", "4096"], &script, SECS_10);
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["files"], json!({}), "{who:?}");
        assert_eq!(
            skipped(&rep),
            pairs(&[
                ("result.txt", "symlink"),
                ("shadow", "symlink"),
                ("relshadow", "symlink"),
                ("environ", "symlink"),
            ]),
            "{who:?}"
        );
        let raw = stdout(&run.out);
        assert!(
            !raw.contains(CRED_TOKEN),
            "{who:?}: credentials leaked: {raw}"
        );
        for line in shadow.lines().filter(|l| !l.is_empty()) {
            assert!(!raw.contains(line), "{who:?}: /etc/shadow leaked: {raw}");
        }
    }
}

#[test]
fn fifo_directory_and_socket_are_skipped_promptly() {
    let script = "mkfifo fifo && mkdir d && echo inner > d/inner.txt && \
         python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")' && \
         echo ok > ok.txt";
    for who in BOTH {
        let (run, rep) = json_sh(who, &["--max-output", "100"], script, SECS_10);
        assert_clean_exit(who, &run, &rep);
        // A FIFO opened for reading would block for good: bounded with room for a loaded host.
        assert!(run.took < Duration::from_secs(8), "{who:?}: {}", run.show());
        assert_eq!(rep["files"], json!({"ok.txt": "ok\n"}), "{who:?}");
        assert_eq!(
            skipped(&rep),
            pairs(&[("fifo", "fifo"), ("d", "directory"), ("sock", "socket")]),
            "{who:?}"
        );
        assert_eq!(rep["files_truncated"], json!([]), "{who:?}");
    }
}

#[test]
fn huge_sparse_file_comes_back_capped_quickly() {
    // The default --file-size (4 GiB, RLIMIT_FSIZE) would refuse the 100G size itself: raise
    // it so the hostile file really exists in scratch.
    for who in BOTH {
        let (run, rep) = json_sh(
            who,
            &["--max-output", "64", "--file-size", "200G"],
            "truncate -s 100G big && test $(stat -c %s big) = 107374182400",
            SECS_10,
        );
        assert_clean_exit(who, &run, &rep);
        // Reading the 100 GiB would take minutes: bounded with room for a loaded host.
        assert!(run.took < Duration::from_secs(8), "{who:?}: {}", run.show());
        assert_eq!(rep["files"], json!({"big": "\0".repeat(64)}), "{who:?}");
        assert_eq!(rep["files_truncated"], json!(["big"]), "{who:?}");
        assert_eq!(rep["files_skipped"], json!([]), "{who:?}");
        assert_eq!(rep["utf8_replaced"], json!([]), "{who:?}");
    }
}

/// Observed with 5000 files: 1000 entries are examined (the 1000 files come back), the next
/// 1100 are listed by name as "count limit" and one summary entry {"name": "*", "reason":
/// "count limit: 2900 more entries not listed"} counts the rest; the report is about 59 KB.
/// The names listed should stop at MAX_SKIPPED_LISTED (100): src/report.rs bounds
/// `files.skipped.len()` by MAX_RESULT_ENTRIES + MAX_SKIPPED_LISTED instead, and that vector
/// is still empty when every examined entry was a regular file.
#[test]
fn a_flood_of_files_is_bounded_by_the_documented_limits() {
    let examined = spec_const("MAX_RESULT_ENTRIES");
    let listed_max = spec_const("MAX_SKIPPED_LISTED");
    let total = 5000;
    let script =
        format!("i=0; while [ $i -lt {total} ]; do echo x > f$i; i=$((i+1)); done; echo done");
    for who in BOTH {
        let (run, rep) = json_sh(who, &[], &script, Duration::from_secs(30));
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["stdout"], json!("done\n"), "{who:?}");
        let size = run.out.stdout.len();
        assert!(size < 2 << 20, "{who:?}: report is {size} bytes");
        let files = rep["files"].as_object().unwrap();
        assert_eq!(files.len(), examined, "{who:?}");
        assert!(files.values().all(|v| v == "x\n"), "{who:?}");
        let entries = rep["files_skipped"].as_array().unwrap();
        let (summary, listed): (Vec<&Value>, Vec<&Value>) =
            entries.iter().partition(|e| e["name"] == "*");
        assert!(
            listed.iter().all(|e| e["reason"] == "count limit"),
            "{who:?}: {entries:?}"
        );
        assert_eq!(summary.len(), 1, "{who:?}: no summary entry");
        let reason = summary[0]["reason"].as_str().unwrap();
        let not_listed: usize = reason
            .strip_prefix("count limit: ")
            .and_then(|r| r.strip_suffix(" more entries not listed"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{who:?}: summary {reason:?}"));
        let names: BTreeSet<&str> = files
            .keys()
            .map(String::as_str)
            .chain(listed.iter().map(|e| e["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names.len(),
            files.len() + listed.len(),
            "{who:?}: a name is both returned and skipped, or listed twice"
        );
        eprintln!(
            "{who:?}: {} files, {} listed as count limit, {not_listed} more not listed, \
             report {size} bytes",
            files.len(),
            listed.len()
        );
        // Every entry is accounted for exactly once.
        assert_eq!(files.len() + listed.len() + not_listed, total, "{who:?}");
        // At most MAX_SKIPPED_LISTED names are listed for the count limit.
        assert!(
            listed.len() <= listed_max,
            "{who:?}: {} entries listed as \"count limit\", MAX_SKIPPED_LISTED is {listed_max}",
            listed.len()
        );
    }
}

/// A report is one line of JSON whatever names the task gives its files: a quote, a
/// backslash, a newline and a control byte in a name are escaped (the report is written by
/// hand around serde_json's strings since it streams; a review's mutant that wrote names
/// unescaped let a task's file name add keys to the report, and no test saw it). Its keys
/// come in their order, as before, and it ends in one newline.
#[test]
fn a_report_is_one_line_of_json_whatever_the_file_names() {
    let names = ["a\"b", "a\\b", "a\nb", "a\u{1b}b", "x\",\"y"];
    let script = "for n in 'a\"b' 'a\\b' \"$(printf 'a\\nb')\" \"$(printf 'a\\033b')\" 'x\",\"y'; \
                  do echo ok > \"$n\"; done";
    for who in BOTH {
        let (run, rep) = json_sh(who, &[], script, SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        let text = stdout(&run.out);
        assert!(
            text.ends_with("}\n") && text.matches('\n').count() == 1,
            "{who:?}: {text}"
        );
        let files = rep["files"].as_object().unwrap();
        let mut want: Vec<&str> = names.to_vec();
        want.sort();
        assert_eq!(files.keys().collect::<Vec<_>>(), want, "{who:?}: {text}");
        assert!(files.values().all(|v| v == "ok\n"), "{who:?}: {text}");
        // The keys in the order they have always come: sorted.
        let at: Vec<usize> = KEY_ORDER
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{who:?}: {text}");
    }
}

/// The report's keys, in the order the report gives them.
const KEY_ORDER: [&str; 15] = [
    "duration_ms",
    "exit_code",
    "files",
    "files_skipped",
    "files_truncated",
    "limit_hit",
    "limits",
    "signal",
    "stderr",
    "stderr_truncated",
    "stdout",
    "stdout_truncated",
    "timed_out",
    "utf8_replaced",
    "warnings",
];

#[test]
fn invalid_utf8_is_replaced_and_reported() {
    let script = "printf 'a\\377b' > bad.txt; printf 'x\\376y'; printf 'ok' > good.txt";
    for who in BOTH {
        let (run, rep) = json_sh(who, &[], script, SECS_10);
        assert_clean_exit(who, &run, &rep);
        assert_eq!(
            rep["files"],
            json!({"bad.txt": "a\u{fffd}b", "good.txt": "ok"}),
            "{who:?}"
        );
        assert_eq!(rep["stdout"], json!("x\u{fffd}y"), "{who:?}");
        assert_eq!(
            rep["utf8_replaced"],
            json!(["stdout", "files/bad.txt"]),
            "{who:?}"
        );
        // A character cut by the cap is dropped, not reported as invalid: "abé" capped at 3.
        let (run, rep) = json_sh(
            who,
            &["--max-output", "3"],
            "printf 'ab\\303\\251'",
            SECS_10,
        );
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["stdout"], json!("ab"), "{who:?}");
        assert_eq!(rep["stdout_truncated"], json!(true), "{who:?}");
        assert_eq!(rep["utf8_replaced"], json!([]), "{who:?}");
        // The README's way to hand bytes back whole: the task encodes them.
        let (run, rep) = json_sh(who, &[], "printf 'a\\377b' | base64", SECS_10);
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["stdout"], json!("Yf9i\n"), "{who:?}");
    }
}

#[test]
fn stdout_past_the_cap_is_truncated_to_exactly_the_cap() {
    let script = "head -c 5000 /dev/zero | tr '\\0' x; echo err >&2; head -c 300 /dev/zero > f";
    for who in BOTH {
        let (run, rep) = json_sh(who, &["--max-output", "100"], script, SECS_10);
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["stdout"], json!("x".repeat(100)), "{who:?}");
        assert_eq!(rep["stdout_truncated"], json!(true), "{who:?}");
        assert_eq!(rep["stderr"], json!("err\n"), "{who:?}");
        assert_eq!(rep["stderr_truncated"], json!(false), "{who:?}");
        assert_eq!(rep["files"], json!({"f": "\0".repeat(100)}), "{who:?}");
        assert_eq!(rep["files_truncated"], json!(["f"]), "{who:?}");
    }
}

#[test]
fn only_inputs_the_task_changed_come_back() {
    let dir = tmpdir();
    let a = write_file(&dir.path().join("a"), b"hello\n", 0o644);
    let b = write_file(&dir.path().join("b"), b"keep\n", 0o644);
    let c = write_file(&dir.path().join("c"), b"same\n", 0o644);
    let d = write_file(&dir.path().join("d"), b"gone\n", 0o644);
    let e = write_file(&dir.path().join("e"), b"pipe\n", 0o644);
    let inputs = [
        format!("a.txt={}", a.display()),
        format!("b.txt={}", b.display()),
        format!("c.txt={}", c.display()),
        format!("d.txt={}", d.display()),
        format!("e.txt={}", e.display()),
    ];
    // a: appended; b: untouched; c: same size, other bytes; d: deleted; e: replaced by a FIFO.
    let script = "echo more >> a.txt && printf 'SAME\\n' > c.txt && rm d.txt && \
                  rm e.txt && mkfifo e.txt && cat b.txt && echo new > n.txt";
    for who in BOTH {
        let mut flags = Vec::new();
        for i in &inputs {
            flags.extend_from_slice(&["--input", i.as_str()]);
        }
        let (run, rep) = json_sh(who, &flags, script, SECS_10);
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["stdout"], json!("keep\n"), "{who:?}");
        assert_eq!(
            rep["files"],
            json!({"a.txt": "hello\nmore\n", "c.txt": "SAME\n", "n.txt": "new\n"}),
            "{who:?}"
        );
        assert_eq!(skipped(&rep), pairs(&[("e.txt", "fifo")]), "{who:?}");
        // The host files were copied in, never shared.
        assert_eq!(std::fs::read(&a).unwrap(), b"hello\n");
        assert_eq!(std::fs::read(&c).unwrap(), b"same\n");
        assert_eq!(std::fs::read(&d).unwrap(), b"gone\n");
    }
}

/// Inputs left as handed are no results, and take none of the MAX_RESULT_ENTRIES entries
/// examined. They took them: with 1100 inputs, the task's file that the directory listed after
/// 1000 of them came back as neither a result nor a name (counted in "*"), while 100 unchanged
/// inputs were listed as "count limit". The task copies the inputs back over themselves
/// (same bytes: left as handed) between its two files, so that whichever order the kernel
/// lists scratch in (newest or oldest first), one of its files comes after them.
#[test]
fn inputs_left_as_handed_take_none_of_the_entries_examined() {
    let count = spec_const("MAX_RESULT_ENTRIES") + 100;
    let inputs: serde_json::Map<String, Value> = (0..count)
        .map(|i| (format!("in{i:05}"), json!("x")))
        .collect();
    let request = json!({
        "command": "sh",
        "args": ["-c", "echo 1 > first.txt && mkdir d && cp in* d/ && mv d/* . && rmdir d \
                        && echo 2 > last.txt && ls | wc -l"],
        "inputs": inputs,
    })
    .to_string();
    for who in BOTH {
        let run = al_stdin(
            who,
            &["run", "--request", "-"],
            request.as_bytes(),
            Duration::from_secs(30),
        );
        let rep = run.report();
        assert_clean_exit(who, &run, &rep);
        assert_eq!(rep["stdout"], json!(format!("{}\n", count + 2)), "{who:?}");
        assert_eq!(
            rep["files"],
            json!({"first.txt": "1\n", "last.txt": "2\n"}),
            "{who:?}: {}",
            rep["files_skipped"]
        );
        assert_eq!(rep["files_skipped"], json!([]), "{who:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// D. Timeouts
// ---------------------------------------------------------------------------------------------

/// Measured here: 0.50-0.52 s from spawn to exit for --timeout 500ms.
#[test]
fn timeout_kills_a_task_that_ignores_term() {
    for who in BOTH {
        let (run, rep) = json_sh(
            who,
            &["--timeout", "500ms"],
            "trap '' TERM; sleep 30",
            SECS_10,
        );
        eprintln!("{who:?}: --timeout 500ms returned after {:?}", run.took);
        assert_eq!(run.code(), Some(124), "{who:?}: {}", run.show());
        // The deadline counts from airlock's start: a setup a loaded host slows comes on top.
        // The bounds prove the timeout ended it, long before `sleep 30` would have.
        assert!(run.took < Duration::from_secs(8), "{who:?}: {}", run.show());
        assert!(
            run.took >= Duration::from_millis(500),
            "{who:?}: {}",
            run.show()
        );
        assert_eq!(rep["timed_out"], json!(true), "{who:?}");
        assert_eq!(rep["exit_code"], Value::Null, "{who:?}");
        assert_eq!(rep["signal"], json!(9), "{who:?}");
        assert_eq!(rep["stdout"], json!(""), "{who:?}");
        let ms = rep["duration_ms"].as_u64().unwrap();
        assert!((500..8000).contains(&ms), "{who:?}: duration_ms {ms}");
    }
}

#[test]
fn timeout_kills_a_double_forked_daemon() {
    for who in BOTH {
        let (run, rep) = json_sh(
            who,
            &["--timeout", "1s"],
            "(setsid sh -c 'sleep 40.5' &) ; sleep 30",
            SECS_10,
        );
        assert_eq!(run.code(), Some(124), "{who:?}: {}", run.show());
        assert!(run.took < Duration::from_secs(8), "{who:?}: {}", run.show());
        assert_eq!(rep["timed_out"], json!(true), "{who:?}");
        assert_eq!(rep["exit_code"], Value::Null, "{who:?}");
        assert_none_left("sleep 40.5", Duration::from_secs(3), &format!("{who:?}"));
    }
}

#[test]
fn timeout_in_plain_mode_exits_124() {
    for who in BOTH {
        let run = al(
            who,
            &["run", "--timeout", "300ms", "--", "sleep", "10.25"],
            SECS_10,
        );
        assert_eq!(run.code(), Some(124), "{who:?}: {}", run.show());
        assert!(run.took < Duration::from_secs(8), "{who:?}: {}", run.show());
        assert_eq!(stdout(&run.out), "", "{who:?}");
        assert_eq!(
            stderr(&run.out),
            "airlock: the timeout (300ms) fired; the whole sandbox was killed\n",
            "{who:?}"
        );
        assert_none_left("sleep 10.25", Duration::from_secs(3), &format!("{who:?}"));
    }
}

/// A streamed run whose task ran into a limit says which on stderr, in one line naming the
/// flag: its exit status alone (137, 152, 153) would not. The memory limit is read from the
/// cgroup's counters (root's cgroup v1 here; uid 65534's rlimit fallback fails the allocation
/// and detects no hit, as the JSON report's `limit_hit`). Control: a task that exits 3 by
/// itself, or is killed by a SIGKILL of its own, gets no line.
#[test]
fn a_streamed_run_says_which_limit_its_task_ran_into() {
    let memory = "b = b'\\x01' * (1 << 30)";
    for who in BOTH {
        let cases: [(&[&str], &[&str], i32, &str); 5] = [
            (
                &["--cpu-time", "1"],
                &["sh", "-c", "while :; do :; done"],
                128 + libc::SIGXCPU,
                "airlock: the task ran into its CPU time limit (--cpu-time)\n",
            ),
            (
                &["--file-size", "1M"],
                &["sh", "-c", "exec head -c 2M /dev/zero > /work/big"],
                128 + libc::SIGXFSZ,
                "airlock: the task ran into its file size limit (--file-size)\n",
            ),
            (
                &["--memory", "128M"],
                &["python3", "-c", memory],
                if who == Launcher::Root { 137 } else { 1 },
                if who == Launcher::Root {
                    "airlock: the task ran into its memory limit (--memory): the kernel killed a process\n"
                } else {
                    "MemoryError"
                },
            ),
            (&[], &["sh", "-c", "exit 3"], 3, ""),
            (&[], &["sh", "-c", "kill -9 $$"], 137, ""),
        ];
        for (flags, command, code, said) in cases {
            let mut args = vec!["run", "--timeout", "20s"];
            args.extend_from_slice(flags);
            args.push("--");
            args.extend_from_slice(command);
            let run = al(who, &args, Duration::from_secs(30));
            let ctx = format!("{who:?} {args:?}: {}", run.show());
            assert_eq!(run.code(), Some(code), "{ctx}");
            let err = stderr(&run.out);
            match said {
                "MemoryError" => {
                    assert!(err.contains(said), "{ctx}");
                    assert!(!err.contains("airlock:"), "{ctx}");
                }
                _ => assert_eq!(err, said, "{ctx}"),
            }
        }
    }
}

/// A streamed run reads the cgroup's counters only when its task did not exit 0: a task that
/// met its process limit (a fork refused) and still exits 0 gets no line, the same task
/// exiting 1 gets the line naming --pids. Control: the JSON report of the same run says
/// `"limit_hit":"pids"`, so the limit was met. Root only: uid 65534's rlimit fallback detects
/// no hit (a_streamed_run_says_which_limit_its_task_ran_into).
#[test]
fn a_streamed_run_that_exits_0_says_no_limit() {
    let forks = |code: &str| {
        format!(
            "sh -c 'for i in 1 2 3 4 5 6 7 8; do sleep 0.2 & done; wait' 2>/dev/null; exit {code}"
        )
    };
    let ok = forks("0");
    let json = al(
        Launcher::Root,
        &["run", "--json", "--pids", "4", "--", "sh", "-c", &ok],
        Duration::from_secs(30),
    );
    assert!(
        stdout(&json.out).contains("\"limit_hit\":\"pids\"")
            && stdout(&json.out).contains("\"exit_code\":0"),
        "control: {}",
        json.show()
    );
    for (code, said) in [
        (0, ""),
        (
            1,
            "airlock: the task ran into its process limit (--pids): a fork was refused\n",
        ),
    ] {
        let command = forks(&code.to_string());
        let args = [
            "run",
            "--timeout",
            "20s",
            "--pids",
            "4",
            "--",
            "sh",
            "-c",
            &command,
        ];
        let run = al(Launcher::Root, &args, Duration::from_secs(30));
        assert_eq!(run.code(), Some(code), "{}", run.show());
        assert_eq!(stderr(&run.out), said, "exit {code}: {}", run.show());
    }
}

/// A caller that reads neither stream (Popen with two pipes, then a wait): at the deadline the
/// relays give up on what its full pipes did not take and the run ends as a timeout (124).
/// Saying so on a stderr that is itself the full pipe must not hold airlock past its deadline
/// (it did, for good, with SIGTERM blocked): the line is said only where there is room.
/// Control: a caller that reads stderr alone gets the line for stdout, and the same 124.
#[test]
fn a_caller_reading_neither_stream_still_gets_the_timeout() {
    let script = "head -c 200000 /dev/zero >&2 & head -c 200000 /dev/zero; wait";
    let args = ["run", "--timeout", "1s", "--", "sh", "-c", script];
    for who in BOTH {
        for reads_stderr in [true, false] {
            let ctx = format!("{who:?}, stderr read: {reads_stderr}");
            let mut cmd = airlock(who, &args);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let start = Instant::now();
            let mut child = cmd.spawn().unwrap();
            let err = reads_stderr.then(|| drain(child.stderr.take().unwrap()));
            let status = wait_until(&mut child, start + Duration::from_secs(15));
            let took = start.elapsed();
            let out = drain(child.stdout.take().unwrap());
            let err = err.unwrap_or_else(|| drain(child.stderr.take().unwrap()));
            let Some(status) = status else {
                panic!("{ctx}: airlock still running 15 s into a 1 s timeout: killed");
            };
            let run = Run::collect(status, took, [out, err]);
            assert_eq!(run.code(), Some(124), "{ctx}: {}", run.show());
            // Held for good once: bounded with room for a start a loaded host slows.
            assert!(run.took < Duration::from_secs(10), "{ctx}: {}", run.show());
            if reads_stderr {
                assert!(
                    stderr(&run.out).contains("airlock: stdout of the task: ")
                        && stderr(&run.out).contains(
                            "bytes were not delivered: its reader took no more before the timeout"
                        )
                        && stderr(&run.out)
                            .contains("airlock: the timeout (1s) fired; the whole sandbox"),
                    "{ctx}: {}",
                    run.show()
                );
            }
        }
    }
}

/// A caller's pipe already full when the run starts, and never read: a task that writes nothing
/// has nothing to deliver there, and airlock returns its status at once. It spun instead, at a
/// whole CPU, past its --timeout and deaf to SIGTERM: splice looks for room in the caller's
/// pipe before it reports the end of the task's, so it said EAGAIN, and the task's empty,
/// hung-up pipe polled ready again at once (found by a review of odd caller environments).
/// Control: a task that outlives its --timeout under the same full pipe still gets 124.
#[test]
fn a_full_caller_pipe_with_nothing_to_deliver_does_not_hold_airlock() {
    use std::os::fd::OwnedFd;
    // A pipe filled to the brim, its read end kept and never read.
    let full_pipe = || -> (OwnedFd, OwnedFd) {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let (r, w) = nix::unistd::pipe().unwrap();
        fcntl(&w, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
        while nix::unistd::write(&w, &[b'x'; 4096]).is_ok() {}
        fcntl(&w, FcntlArg::F_SETFL(OFlag::empty())).unwrap();
        (r, w)
    };
    let cases: [(&[&str], i32); 2] = [
        (&["run", "--timeout", "1s", "--", "true"], 0),
        (&["run", "--timeout", "1s", "--", "sleep", "30"], 124),
    ];
    for who in BOTH {
        for stream in ["stdout", "stderr"] {
            for (args, code) in cases {
                let ctx = format!("{who:?}, a full {stream}, {args:?}");
                let (_kept, w) = full_pipe();
                let mut cmd = airlock(who, args);
                cmd.stdin(Stdio::null());
                match stream {
                    "stdout" => cmd.stdout(Stdio::from(w)).stderr(Stdio::null()),
                    _ => cmd.stderr(Stdio::from(w)).stdout(Stdio::null()),
                };
                let start = Instant::now();
                let mut child = cmd.spawn().unwrap();
                drop(cmd);
                let status = wait_until(&mut child, start + Duration::from_secs(15));
                let Some(status) = status else {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{ctx}: airlock still running after 15 s: killed");
                };
                assert_eq!(status.code(), Some(code), "{ctx}: {status:?}");
            }
        }
    }
}

/// A SIGUSR1 that comes while airlock still delivers the output of a task that has ended, to
/// a caller's pipe that is full, does not cut the delivery short: it was the task's to handle,
/// and the task is gone (it exited 0). It ended the wait (exit 138, "not delivered ... before
/// SIGUSR1"), as SIGTERM still does (control: 143, part of the output).
#[test]
fn a_sigusr1_after_the_task_ended_does_not_cut_its_output_short() {
    use nix::sys::signal::Signal;
    // Whether the process-directed signal `sig` waits for `pid` (blocked, not yet read).
    let pending = |pid: u32, sig: Signal| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("ShdPnd:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & (1 << (sig as u64 - 1)) != 0)
    };
    // airlock's children (the sandbox's init until it is reaped).
    let children = |pid: u32| -> String {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        tasks
            .flatten()
            .map(|t| std::fs::read_to_string(t.path().join("children")).unwrap_or_default())
            .collect()
    };
    let until = |what: &str, mut done: Box<dyn FnMut() -> bool + '_>| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within 20 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    for (i, who) in BOTH.into_iter().enumerate() {
        for (j, (sig, code)) in [(Signal::SIGUSR1, 0), (Signal::SIGTERM, 143)]
            .into_iter()
            .enumerate()
        {
            let ctx = format!("{sig:?} as {who:?}");
            // 100000 bytes: more than the caller's pipe takes, less than it and the relay's.
            let sleeper = format!("sleep 1.3{i}{j}");
            let script = format!("head -c 100000 /dev/zero; exec {sleeper}");
            let mut cmd = airlock(who, &["run", "--timeout", "60s", "--", "sh", "-c", &script]);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            let pid = child.id();
            // The task has written all and ended, and its sandbox is gone: airlock waits for
            // the caller to read the rest.
            wait_for_process(&sleeper, Duration::from_secs(20));
            let gone = || procs_with(&sleeper).iter().all(|p| p.cmdline != sleeper);
            until(&ctx, Box::new(gone));
            until(&ctx, Box::new(|| children(pid).trim().is_empty()));
            signal_pid(pid, sig);
            until(&ctx, Box::new(|| !pending(pid, sig)));
            let err = drain(child.stderr.take().unwrap());
            let out = drain(child.stdout.take().unwrap());
            let status = wait_until(&mut child, Instant::now() + Duration::from_secs(20));
            let (out, err) = (out.join().unwrap(), err.join().unwrap());
            let err = String::from_utf8_lossy(&err);
            assert_eq!(status.and_then(|s| s.code()), Some(code), "{ctx}: {err}");
            match code {
                0 => assert_eq!((out.len(), err.as_ref()), (100000, ""), "{ctx}"),
                _ => assert!(
                    out.len() < 100000 && err.contains("were not delivered"),
                    "{ctx}: {} bytes, {err}",
                    out.len()
                ),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// E. Output floods
// ---------------------------------------------------------------------------------------------

/// Peak RSS of a run in KiB: from GNU time when installed (its figure is ru_maxrss of the
/// waited process, which also covers the descendants it reaped: an upper bound for airlock
/// itself), else VmHWM of the airlock process polled during the run.
fn run_measuring_rss(cmd: Command, limit: Duration) -> (Run, u64) {
    if Path::new("/usr/bin/time").exists() {
        let out = tempfile::NamedTempFile::new().unwrap();
        let mut timed = Command::new("/usr/bin/time");
        timed
            .arg("-v")
            .arg("-o")
            .arg(out.path())
            .arg(cmd.get_program())
            .args(cmd.get_args());
        let run = run_bounded(timed, None, limit);
        let text = std::fs::read_to_string(out.path()).unwrap();
        let kib = text
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no maximum RSS in /usr/bin/time output: {text}"));
        return (run, kib);
    }
    let mut cmd = cmd;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let mut peak = 0u64;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(v) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        {
            peak = peak.max(v);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = start.elapsed();
    let run = Run {
        out: Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        },
        took,
    };
    (run, peak)
}

/// Measured here (debug build, 2 vCPUs): 1 GiB of stdout in 0.3-0.5 s; peak RSS 4.9-5.1 MiB
/// for both launchers (GNU time's figure, which covers the whole reaped tree).
#[test]
fn a_gibibyte_of_stdout_is_capped_in_bounded_memory() {
    for who in BOTH {
        let cmd = airlock(
            who,
            &[
                "run",
                "--json",
                "--timeout",
                "55s",
                "--",
                "sh",
                "-c",
                "head -c 1073741824 /dev/zero",
            ],
        );
        let (run, rss_kib) = run_measuring_rss(cmd, Duration::from_secs(60));
        eprintln!(
            "{who:?}: 1 GiB flood took {:?}, peak RSS {rss_kib} KiB",
            run.took
        );
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        let rep = run.report();
        assert_eq!(rep["exit_code"], json!(0), "{who:?}");
        assert_eq!(rep["timed_out"], json!(false), "{who:?}");
        assert_eq!(rep["stdout_truncated"], json!(true), "{who:?}");
        assert_eq!(rep["stdout"], json!("\0".repeat(8000)), "{who:?}");
        assert_eq!(rep["stderr"], json!(""), "{who:?}");
        assert!(rss_kib > 0, "{who:?}: no RSS measured");
        assert!(
            rss_kib < 16 * 1024,
            "{who:?}: peak RSS {rss_kib} KiB is not under 16 MiB"
        );
    }
}

/// A report is written to stdout as it is made: airlock holds the captured bytes, not a copy of
/// them nor the report's whole text, which is six times their size for NULs (`\u0000`). Built
/// whole in memory, 2 x 64 MiB of NULs took airlock to a peak RSS of 1 GB (a framework review);
/// here 16 MiB: 129 MiB before (the capture, its text, and the report's 96 MiB grown by
/// doubling), 17 MiB since.
#[test]
fn a_report_of_a_full_capture_is_written_without_being_held_whole() {
    const CAPTURE: usize = 16 << 20;
    for who in BOTH {
        let script = format!("head -c {CAPTURE} /dev/zero");
        let cmd = airlock(
            who,
            &[
                "run",
                "--json",
                "--max-output",
                "16M",
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        let (run, rss_kib) = run_measuring_rss(cmd, Duration::from_secs(60));
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        assert!(
            run.out.stdout.len() > 6 * CAPTURE,
            "{who:?}: a short report"
        );
        let rep = run.report();
        assert_eq!(rep["stdout"], json!("\0".repeat(CAPTURE)), "{who:?}");
        assert_eq!(rep["stdout_truncated"], json!(false), "{who:?}");
        assert!(
            rss_kib > 0 && rss_kib < 48 * 1024,
            "{who:?}: peak RSS {rss_kib} KiB is not under 48 MiB"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// F. Nothing left behind
// ---------------------------------------------------------------------------------------------

/// SIGKILL airlock at varied moments of its life (before, during and after the sandbox is
/// built): nothing of the sandbox may survive it, and no mount may appear on the host.
#[test]
fn sigkill_of_airlock_at_any_moment_leaves_nothing_behind() {
    let started = Instant::now();
    let mounts_before = mount_lines();
    let delays_ms = [0u64, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 75, 100, 150, 250];
    let mut runs = 0;
    let mut killed = Vec::new();
    for who in BOTH {
        for &ms in &delays_ms {
            let mut cmd = airlock(
                who,
                &[
                    "run",
                    "--json",
                    "--",
                    "sh",
                    "-c",
                    "sleep 50.25 & sleep 50.25",
                ],
            );
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = cmd.spawn().unwrap();
            killed.push(child.id());
            std::thread::sleep(Duration::from_millis(ms));
            let _ = child.kill();
            child.wait().unwrap();
            runs += 1;
            assert_none_left(
                "50.25",
                Duration::from_secs(3),
                &format!("{who:?}, SIGKILL after {ms} ms"),
            );
        }
    }
    assert_eq!(runs, 30);
    let new: Vec<String> = mount_lines().difference(&mounts_before).cloned().collect();
    assert!(new.is_empty(), "new host mounts: {new:?}");
    // A cgroup left by a SIGKILLed airlock is removed by the next run (src/limits.rs): after
    // one more run as root, none of the killed airlocks' cgroups remains.
    let run = al(Launcher::Root, &["run", "--json", "--", "true"], SECS_10);
    assert_eq!(run.code(), Some(0), "{}", run.show());
    let left = cgroups_of(&killed);
    assert!(
        left.is_empty(),
        "cgroups of SIGKILLed airlocks left: {left:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "fault injection took {:?}",
        started.elapsed()
    );
}

/// Cgroup directories named for one of the airlock processes `pids` (`airlock-PID-START-PIDNS-N`, see
/// src/limits.rs) anywhere under /sys/fs/cgroup.
fn cgroups_of(pids: &[u32]) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, pids: &[u32], found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let owner = name
                .strip_prefix("airlock-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if owner.is_some_and(|p| pids.contains(&p)) {
                found.push(e.path());
            }
            if depth > 0 {
                walk(&e.path(), depth - 1, pids, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 6, pids, &mut found);
    found
}

fn signal_pid(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// Spawn `airlock ARGS` as `who` with captured output; the caller signals it, then
/// `finish` bounds and collects the run.
fn spawn_airlock(who: Launcher, args: &[&str]) -> (Child, Instant, [JoinHandle<Vec<u8>>; 2]) {
    let mut cmd = airlock(who, args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    (child, start, [out, err])
}

/// Wait (bounded by `limit` from `from`) for the child; returns the run, `took` counted from
/// `from`.
fn finish(
    mut child: Child,
    from: Instant,
    pipes: [JoinHandle<Vec<u8>>; 2],
    limit: Duration,
) -> Run {
    let status = wait_until(&mut child, from + limit)
        .unwrap_or_else(|| panic!("airlock still running {limit:?} after the signal: killed"));
    Run::collect(status, from.elapsed(), pipes)
}

/// SIGTERM to airlock is forwarded to the task; a task that ignores it is killed with the
/// whole sandbox after the grace period (2 s in src/launch.rs TERM_GRACE), and airlock reports
/// the init killed by SIGKILL (End::InitKilled(9): exit 137, signal 9, exit_code null). A task
/// that does not ignore it dies of SIGTERM (exit 143, signal 15).
#[test]
fn sigterm_to_airlock_ends_the_task_within_the_grace_period() {
    for who in BOTH {
        let (child, _, pipes) = spawn_airlock(
            who,
            &[
                "run",
                "--json",
                "--",
                "sh",
                "-c",
                "trap '' TERM; sleep 50.75",
            ],
        );
        wait_for_process("sleep 50.75", SECS_10);
        let signalled = Instant::now();
        signal_pid(child.id(), nix::sys::signal::Signal::SIGTERM);
        let run = finish(child, signalled, pipes, Duration::from_secs(8));
        eprintln!(
            "{who:?}: SIGTERM (task ignores it) -> exit after {:?}",
            run.took
        );
        assert_eq!(run.code(), Some(137), "{who:?}: {}", run.show());
        assert!(
            run.took >= Duration::from_millis(1500),
            "{who:?}: {}",
            run.show()
        );
        let rep = run.report();
        assert_eq!(rep["signal"], json!(9), "{who:?}");
        assert_eq!(rep["exit_code"], Value::Null, "{who:?}");
        assert_eq!(rep["timed_out"], json!(false), "{who:?}");
        assert_none_left("50.75", Duration::from_secs(3), &format!("{who:?} SIGTERM"));

        let (child, _, pipes) = spawn_airlock(who, &["run", "--json", "--", "sleep", "50.75"]);
        wait_for_process("sleep 50.75", SECS_10);
        let signalled = Instant::now();
        signal_pid(child.id(), nix::sys::signal::Signal::SIGTERM);
        let run = finish(child, signalled, pipes, Duration::from_secs(8));
        assert_eq!(run.code(), Some(143), "{who:?}: {}", run.show());
        // Under the 2 s grace (airlock waits no grace for a task already dead), with room for
        // a loaded host.
        assert!(
            run.took < Duration::from_millis(1900),
            "{who:?}: {}",
            run.show()
        );
        let rep = run.report();
        assert_eq!(rep["signal"], json!(15), "{who:?}");
        assert_eq!(rep["exit_code"], Value::Null, "{who:?}");
        assert_eq!(rep["timed_out"], json!(false), "{who:?}");
        assert_none_left("50.75", Duration::from_secs(3), &format!("{who:?} SIGTERM"));
    }
}

/// A signal that asks the run to end, come while setup still copies an input, ends the run
/// before the task starts: error_kind `cancelled`, exit 128+N, and the task never ran (it
/// would leave a marker through a bind). The init had held it pending, started the task and
/// passed it on, and the report read as the task killed by it (exit_code null, signal 15): a
/// retry policy could not tell whether the task had run (the JSON-contract review). Control:
/// the same run, not signalled, runs the task, whose marker comes back (and the same signal
/// once the task runs is the task's death by it: the test above).
#[test]
fn a_signal_during_setup_cancels_the_run_before_the_task_starts() {
    use nix::sys::signal::Signal;
    let dir = writable_tmpdir();
    // 1.9 GiB, sparse: its copy into scratch takes seconds.
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1900 << 20)
        .unwrap();
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (input, bind) = (
        format!("big={}", big.display()),
        format!("{}:/mnt/out", dir.path().display()),
    );
    let args = [
        "run",
        "--json",
        "--timeout",
        "60s",
        "--input",
        &input,
        "--bind",
        &bind,
        "--",
        "touch",
        "/mnt/out/ran",
    ];
    let ran = dir.path().join("ran");
    for who in BOTH {
        // Control: the same run, not signalled, copies the input and runs the task, whose
        // marker comes back through the bind.
        let control = al(who, &args, Duration::from_secs(60));
        let ctx = format!("{who:?}");
        control_left_marker(control.code(), &control.show(), &ran, &ctx);
        for sig in [Signal::SIGTERM, Signal::SIGINT] {
            let (child, _, pipes) = spawn_airlock(who, &args);
            // The launcher blocks the signal before it starts the init: once the init is
            // there, the signal is airlock's to pass on.
            let children = format!("/proc/{0}/task/{0}/children", child.id());
            let waiting = Instant::now();
            while std::fs::read_to_string(&children)
                .unwrap_or_default()
                .is_empty()
            {
                assert!(waiting.elapsed() < SECS_10, "{who:?}: no init");
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(100));
            let signalled = Instant::now();
            signal_pid(child.id(), sig);
            let run = finish(child, signalled, pipes, Duration::from_secs(30));
            let ctx = format!("{who:?} {sig}");
            assert_eq!(run.code(), Some(128 + sig as i32), "{ctx}: {}", run.show());
            let rep = run.report();
            assert_eq!(rep["error_kind"], "cancelled", "{ctx}: {}", run.show());
            let said = format!("{sig} came before the task started: setup, which copies");
            assert!(rep["error"].as_str().unwrap().starts_with(&said), "{ctx}");
            assert!(!ran.exists(), "{ctx}: the task ran");
        }
    }
}

/// Observed: `kill -9 1` inside succeeds (status 0) but does nothing: the kernel drops
/// SIGKILL sent to a pid namespace's init from inside that namespace. The task carries on and
/// its own exit status is reported; its background process dies with the sandbox.
#[test]
fn a_task_cannot_kill_its_init_and_leaves_nothing_behind() {
    for who in BOTH {
        let (run, rep) = json_sh(
            who,
            &[],
            "sleep 51.5 & kill -9 1; echo \"kill: $?\"; sleep 0.2; echo alive; exit 7",
            SECS_10,
        );
        assert_eq!(run.code(), Some(7), "{who:?}: {}", run.show());
        assert_eq!(rep["stdout"], json!("kill: 0\nalive\n"), "{who:?}");
        assert_eq!(rep["exit_code"], json!(7), "{who:?}");
        assert_eq!(rep["signal"], Value::Null, "{who:?}");
        assert_eq!(rep["timed_out"], json!(false), "{who:?}");
        assert_none_left("51.5", Duration::from_secs(3), &format!("{who:?}"));
    }
}

/// The sandbox's init killed from outside (the host's root): End::InitKilled(9), i.e. exit
/// 137, signal 9, exit_code null, timed_out false; everything in the sandbox dies with it.
#[test]
fn init_killed_from_outside_is_reported_and_leaves_nothing_behind() {
    for who in BOTH {
        let (child, _, pipes) = spawn_airlock(
            who,
            &["run", "--json", "--", "sh", "-c", "sleep 52.5 & sleep 52.5"],
        );
        let task_sleep = wait_for_process("sleep 52.5", SECS_10).pid;
        let children = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .collect::<String>();
        let inits: Vec<u32> = children
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(inits.len(), 1, "{who:?}: airlock's children: {inits:?}");
        assert_ne!(inits[0], task_sleep);
        let nspid = std::fs::read_to_string(format!("/proc/{}/status", inits[0])).unwrap();
        assert!(
            nspid
                .lines()
                .any(|l| l.starts_with("NSpid:") && l.ends_with("\t1")),
            "{who:?}: airlock's child is not pid 1 of its namespace: {nspid}"
        );
        let signalled = Instant::now();
        signal_pid(inits[0], nix::sys::signal::Signal::SIGKILL);
        let run = finish(child, signalled, pipes, Duration::from_secs(4));
        assert_eq!(run.code(), Some(137), "{who:?}: {}", run.show());
        let rep = run.report();
        assert_eq!(rep["signal"], json!(9), "{who:?}");
        assert_eq!(rep["exit_code"], Value::Null, "{who:?}");
        assert_eq!(rep["timed_out"], json!(false), "{who:?}");
        assert_eq!(rep["files"], json!({}), "{who:?}");
        assert_none_left("52.5", Duration::from_secs(3), &format!("{who:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// G. The help documents the contract
// ---------------------------------------------------------------------------------------------

#[test]
fn run_help_documents_every_exit_code_and_report_key() {
    for who in BOTH {
        let run = al(who, &["run", "--help"], SECS_10);
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        let help = stdout(&run.out);
        for code in ["2", "124", "125", "126", "127"] {
            assert!(
                help.lines()
                    .any(|l| l.split_whitespace().next() == Some(code)),
                "{who:?}: exit code {code} not documented:\n{help}"
            );
        }
        // Each refusal the README's exit status 2 row names is in the help's too (the help
        // had fallen behind: a name past 255 bytes, a missing mount point, --host-uid).
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let two = words(
            help.split("\n  2 ")
                .nth(1)
                .and_then(|t| t.split("\n  124 ").next())
                .unwrap_or(""),
        );
        let readme = words(include_str!("../README.md"));
        let row = readme
            .split("| 2 | ")
            .nth(1)
            .and_then(|t| t.split(" | ").next())
            .unwrap_or("");
        for refusal in [
            "not UTF-8",
            "bind source that does not exist",
            "a name past 255 bytes, a path past 4087",
            "mount point",
            "a system path that is a symlink",
            "over a file or link",
            "/dev/pts",
            "a file bound over a directory",
            "pages",
            "--host-uid",
            "a directory, an O_PATH descriptor or a listening socket on a standard stream",
            "a closed stdout under",
        ] {
            let plain = |t: &str| t.replace('`', "");
            assert!(
                plain(&two).contains(refusal) && plain(row).contains(refusal),
                "{who:?}: {refusal:?} not in both the help's exit status 2 and the README's \
                 row:\n{two}\n{row}"
            );
        }
        // The help's 126 and 127, one entry each with its own lines (as 2 and 125 have),
        // name the cases the README's rows name: a path that cannot be followed is 126, as
        // bash says (the help had said only "found but cannot be executed").
        let entry = |code: &str, next: &str| {
            words(
                help.split(&format!("\n  {code} "))
                    .nth(1)
                    .and_then(|t| t.split(next).next())
                    .unwrap_or(""),
            )
        };
        let readme_row = |code: &str| {
            readme
                .split(&format!("| {code} | "))
                .nth(1)
                .and_then(|t| t.split(" | ").next())
                .unwrap_or("")
                .replace('`', "")
        };
        for (code, next, cases) in [
            (
                "126",
                "\n  127 ",
                &[
                    "cannot be executed",
                    "a file where a directory should be",
                    "a symlink loop",
                    "past 255 bytes",
                    "a directory it may not search",
                ][..],
            ),
            (
                "127",
                "\n\n",
                &["not found", "passed over", "a command name past 255 bytes"][..],
            ),
        ] {
            let (text, row) = (entry(code, next), readme_row(code));
            for case in cases {
                assert!(
                    text.contains(case) && row.contains(case),
                    "{who:?}: {case:?} not in both the help's exit status {code} and the \
                     README's row:\n{text}\n{row}"
                );
            }
        }
        let keys = [
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
            "warnings",
        ];
        let words: HashMap<&str, usize> = help
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .fold(HashMap::new(), |mut m, w| {
                *m.entry(w).or_default() += 1;
                m
            });
        for key in keys {
            assert!(
                words.contains_key(key),
                "{who:?}: report key {key} not documented:\n{help}"
            );
        }
        // Every key the report really has is documented.
        let (_, rep) = json_sh(who, &[], "true", SECS_10);
        for key in rep.as_object().unwrap().keys() {
            assert!(
                words.contains_key(key.as_str()),
                "{who:?}: report key {key} not documented"
            );
        }
    }
}

/// What the command line opens in the boundary reaches a JSON caller, which may never read
/// stderr: each warning airlock says on stderr is also in the report's `warnings`, word for
/// word. Control: a run that opens nothing has none, in either place.
#[test]
fn warnings_said_on_stderr_are_in_the_report_too() {
    let dir = tmpdir();
    let dir_text = dir.path().display().to_string();
    let bind = format!("{dir_text}:/work/out");
    for who in BOTH {
        let (run, rep) = json_sh(who, &[], "true", SECS_10);
        assert_eq!(rep["warnings"], json!([]), "{who:?}: {}", run.show());
        assert!(
            !stderr(&run.out).contains("warning"),
            "{who:?}: {}",
            run.show()
        );

        let (run, rep) = json_sh(who, &["--bind", &bind, "--share-net"], "true", SECS_10);
        assert_eq!(rep["exit_code"], json!(0), "{who:?}: {}", run.show());
        let warnings: Vec<&str> = rep["warnings"]
            .as_array()
            .unwrap_or_else(|| panic!("{who:?}: no warnings list: {rep}"))
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert_eq!(warnings.len(), 2, "{who:?}: {}", run.show());
        assert!(
            warnings[0].starts_with(&format!("{dir_text} is writable inside at /work/out")),
            "{who:?}: {}",
            run.show()
        );
        assert!(
            warnings[1].starts_with("--share-net: the task shares the host's network"),
            "{who:?}: {}",
            run.show()
        );
        let err = stderr(&run.out);
        let said: Vec<&str> = err
            .lines()
            .filter_map(|l| l.strip_prefix("airlock: warning: "))
            .collect();
        assert_eq!(said, warnings, "{who:?}: {}", run.show());
    }
}

/// A credential the caller forwards on purpose still crosses: a variable named like one
/// (AWS_SECRET_ACCESS_KEY) or holding a well-known token format under a plain name (a GitHub
/// token in GH) is warned of, on stderr and in the report, by name and never by value; the
/// task does read both (the warning's claim, shown). `explain` names them too and shows
/// neither value (it printed them, for a log to keep, before). Control: a plain variable
/// forwarded beside them warns of nothing and is shown.
#[test]
fn a_forwarded_credential_is_warned_of_by_name_never_by_value() {
    let (secret, token) = (
        "s3cr3t-value-2f9d",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    );
    let script = "printf '%s %s %s' \"$AWS_SECRET_ACCESS_KEY\" \"$GH\" \"$PLAIN\"";
    let flags = [
        "--json",
        "--env",
        "AWS_SECRET_ACCESS_KEY",
        "--env",
        "GH",
        "--env",
        "PLAIN",
        "--",
        "sh",
        "-c",
        script,
    ];
    for who in BOTH {
        let mut args = vec!["run"];
        args.extend_from_slice(&flags);
        let mut cmd = airlock(who, &args);
        cmd.env("AWS_SECRET_ACCESS_KEY", secret)
            .env("GH", token)
            .env("PLAIN", "plain");
        let run = run_bounded(cmd, None, SECS_10);
        let rep = run.report();
        assert_eq!(
            rep["stdout"],
            json!(format!("{secret} {token} plain")),
            "{who:?}: {}",
            run.show()
        );
        let tail = ": the task can read it, and hand it back in its output or result files";
        let want = [
            format!(
                "AWS_SECRET_ACCESS_KEY crosses into the sandbox and looks like a credential (by its name){tail}"
            ),
            format!("GH crosses into the sandbox and looks like a credential (by its value){tail}"),
        ];
        assert_eq!(rep["warnings"], json!(want), "{who:?}: {}", run.show());
        let err = stderr(&run.out);
        assert!(
            !err.contains(secret) && !err.contains(token),
            "{who:?}: a value on stderr: {err}"
        );
        let said: Vec<&str> = err
            .lines()
            .filter_map(|l| l.strip_prefix("airlock: warning: "))
            .collect();
        assert_eq!(said, want, "{who:?}: {err}");
        // explain names them the same way, and shows neither value.
        let mut explain = airlock(who, &["explain"]);
        explain.args(&flags[1..]);
        explain
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("GH", token)
            .env("PLAIN", "plain");
        let o = run_bounded(explain, None, SECS_10);
        let text = stdout(&o.out);
        assert!(
            !text.contains(secret) && !text.contains(token) && text.contains("PLAIN=plain\n"),
            "{who:?}: {text}"
        );
        for w in &want {
            assert!(
                text.contains(&format!("{:<19} warning: {w}\n", "")),
                "{who:?}: {text}"
            );
        }
    }
}

/// A socket's connect(2) crosses a bind, read-only or not, to whatever listens on it. A bind of
/// a unix socket, or of a directory the audits' socket tables know (here an ssh-agent's
/// `/tmp/ssh-*`), is warned of, naming the socket, and the task does connect through the
/// read-only bind (the warning's claim, shown); `explain` says the same under the bind. Control:
/// a read-only bind of a directory that holds no socket warns of nothing.
#[test]
fn a_bound_socket_is_warned_of_and_the_task_reaches_it() {
    let agent = tmpdir_named(Path::new("/tmp"), "ssh-airlock-test");
    // A socket in a plain directory, and one where an ssh-agent's would be; each answers the
    // two launchers' connections (a thread is left blocked in accept if one never comes, and
    // the test fails on that run's output meanwhile).
    let plain_dir = tmpdir();
    let serve = |sock: &std::path::Path, connections: usize| {
        let listener = std::os::unix::net::UnixListener::bind(sock).unwrap();
        std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::thread::spawn(move || {
            for mut c in listener.incoming().take(connections).flatten() {
                let _ = c.write_all(b"hello\n");
            }
        });
    };
    let (sock, agent_sock) = (plain_dir.path().join("s"), agent.path().join("agent.1"));
    serve(&sock, 2);
    serve(&agent_sock, 4);
    let connect = |path: &str| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
             s.connect('{path}'); print(s.recv(6).decode().strip())\""
        )
    };
    let (sock_text, dir_text, agent_sock_text) = (
        sock.display().to_string(),
        agent.path().display().to_string(),
        agent_sock.display().to_string(),
    );
    let cases = [
        (
            format!("{sock_text}:/agent.sock"),
            "/agent.sock",
            format!(
                "{sock_text} is a unix socket, inside at /agent.sock: the task can connect to \
                 whatever listens on it, read-only or not"
            ),
        ),
        (
            format!("{dir_text}:/agent"),
            "/agent/agent.1",
            format!(
                "{dir_text} (inside at /agent) reaches host sockets the task can connect to, \
                 read-only or not: an ssh-agent at {dir_text}"
            ),
        ),
        // A socket inside a directory the tables know is named by that directory.
        (
            format!("{agent_sock_text}:/agent.sock"),
            "/agent.sock",
            format!(
                "{agent_sock_text} (inside at /agent.sock) reaches host sockets the task can \
                 connect to, read-only or not: an ssh-agent at {dir_text}"
            ),
        ),
    ];
    let plain = tmpdir();
    let notes = tempfile::Builder::new()
        .prefix("ssh-airlock-notes")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(notes.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(notes.path().join("notes.txt"), "no agent here\n").unwrap();
    let plain_bind = format!("{}:/plain", plain.path().display());
    for who in BOTH {
        for (bind, path, warning) in &cases {
            let (run, rep) = json_sh(who, &["--ro-bind", bind], &connect(path), SECS_10);
            assert_eq!(
                rep["stdout"],
                json!("hello\n"),
                "{who:?} {bind}: {}",
                run.show()
            );
            assert_eq!(rep["warnings"], json!([warning]), "{who:?}: {}", run.show());
            // explain says it too, under the bind's line.
            assert_explain_warns(who, bind, warning);
        }
        let (run, rep) = json_sh(who, &["--ro-bind", &plain_bind], "true", SECS_10);
        assert_eq!(rep["warnings"], json!([]), "{who:?}: {}", run.show());
        // Nor does a directory whose name a table's pattern matches but that holds no socket
        // (it was called an ssh-agent).
        let bind = format!("{}:/notes", notes.path().display());
        let (run, rep) = json_sh(who, &["--ro-bind", &bind], "true", SECS_10);
        assert_eq!(rep["warnings"], json!([]), "{who:?}: {}", run.show());
        // A directory above them, through a symlink to it: the agent's directory is named
        // (with whatever else of the tables this host's /tmp holds).
        let link = plain.path().join("tmp-link");
        let _ = std::os::unix::fs::symlink("/tmp", &link);
        let bind = format!("{}:/hosttmp", link.display());
        let (run, rep) = json_sh(who, &["--ro-bind", &bind], "true", SECS_10);
        let said = rep["warnings"][0].as_str().unwrap_or("");
        assert!(
            said.starts_with(&format!(
                "{} (inside at /hosttmp) reaches host sockets",
                link.display()
            )) && said.contains(&format!("an ssh-agent at {dir_text}")),
            "{who:?}: {}",
            run.show()
        );
    }
}

/// A bind that hands the task a home's credentials (the audits' table: `~/.aws`, `~/.ssh`,
/// ...) is warned of, naming each and where it is, and the task does read them through the
/// read-only bind (the warning's claim, shown); so is a bind of the credentials file itself,
/// and `explain` says the same under the bind. Control: the same home without its `.aws`
/// warns of nothing.
#[test]
fn a_bind_that_holds_a_homes_credentials_is_warned_of_and_the_task_reads_them() {
    let home = tmpdir_named(Path::new("/home"), "airlock-test-home");
    let (home_text, aws) = (home.path().display().to_string(), home.path().join(".aws"));
    let aws_text = aws.display().to_string();
    let warning = |src: &str, dest: &str| {
        format!(
            "{src} (inside at {dest}) reaches credentials the task can read, read-only or not, \
             and hand back in its output: AWS credentials at {aws_text}"
        )
    };
    let ssh = home.path().join(".ssh");
    let ssh_text = ssh.display().to_string();
    for who in BOTH {
        let _ = std::fs::remove_dir_all(&aws);
        let _ = std::fs::remove_dir_all(&ssh);
        let bind = format!("{home_text}:/h");
        let (run, rep) = json_sh(who, &["--ro-bind", &bind], "ls -A /h", SECS_10);
        assert_eq!(rep["stdout"], json!(""), "{who:?}: {}", run.show());
        assert_eq!(rep["warnings"], json!([]), "{who:?}: {}", run.show());

        std::fs::create_dir(&aws).unwrap();
        std::fs::set_permissions(&aws, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_file(
            &aws.join("credentials"),
            b"aws_secret_access_key = HOSTKEY\n",
            0o644,
        );
        let file = format!("{aws_text}/credentials");
        for (bind, src, dest, path) in [
            (
                bind.clone(),
                home_text.as_str(),
                "/h",
                "/h/.aws/credentials",
            ),
            (format!("{file}:/c"), file.as_str(), "/c", "/c"),
        ] {
            let (run, rep) = json_sh(who, &["--ro-bind", &bind], &format!("cat {path}"), SECS_10);
            assert_eq!(
                rep["stdout"],
                json!("aws_secret_access_key = HOSTKEY\n"),
                "{who:?} {bind}: {}",
                run.show()
            );
            let warning = warning(src, dest);
            assert_eq!(rep["warnings"], json!([warning]), "{who:?}: {}", run.show());
            assert_explain_warns(who, &bind, &warning);
        }
        // Copied in as an input, the same file is warned of too.
        let input = format!("creds={file}");
        let (run, rep) = json_sh(who, &["--input", &input], "cat creds", SECS_10);
        assert_eq!(
            rep["stdout"],
            json!("aws_secret_access_key = HOSTKEY\n"),
            "{}",
            run.show()
        );
        assert_eq!(
            rep["warnings"],
            json!([format!(
                "{file} (copied in as creds) is AWS credentials at {aws_text}: the task reads \
                 it, and can hand it back in its output"
            )]),
            "{who:?}: {}",
            run.show()
        );
        // Beside ssh keys, known_hosts alone holds none (a task running git or ssh needs
        // it); a key there is one.
        std::fs::create_dir(&ssh).unwrap();
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_file(&ssh.join("known_hosts"), b"h ssh-ed25519 AAAA\n", 0o644);
        write_file(&ssh.join("id_ed25519"), b"KEY\n", 0o644);
        // Only a file of that name alone: a directory named like a public key may hold keys,
        // and a second name of a key (a hard link) is the key.
        std::fs::create_dir(ssh.join("keys.pub")).unwrap();
        std::fs::set_permissions(ssh.join("keys.pub"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        write_file(&ssh.join("keys.pub/id_rsa"), b"KEY\n", 0o644);
        std::fs::hard_link(ssh.join("id_ed25519"), ssh.join("copy.pub")).unwrap();
        for (file, said) in [
            ("known_hosts", None),
            ("id_ed25519", Some(format!("ssh keys at {ssh_text}"))),
            ("keys.pub", Some(format!("ssh keys at {ssh_text}"))),
            ("copy.pub", Some(format!("ssh keys at {ssh_text}"))),
        ] {
            let bind = format!("{ssh_text}/{file}:/k");
            let read = "cat /k 2>/dev/null || ls /k";
            let (run, rep) = json_sh(who, &["--ro-bind", &bind], read, SECS_10);
            assert_ne!(rep["stdout"], json!(""), "{who:?} {file}: {}", run.show());
            let warnings = match said {
                None => json!([]),
                Some(said) => json!([format!(
                    "{ssh_text}/{file} (inside at /k) reaches credentials the task can read, \
                     read-only or not, and hand back in its output: {said}"
                )]),
            };
            assert_eq!(rep["warnings"], warnings, "{who:?} {file}: {}", run.show());
        }
    }
}

/// The caller's home is searched for credentials wherever it is (`$HOME`, outside `/home` and
/// `/root`: a service account's, a CI runner's), and by the path its links lead to, as where
/// `/home` is a link (`/home -> var/home`): a bind of `.aws` named through the link or by its
/// real path is warned of, in `run` and `explain`, and so is an input of the file in it.
/// Controls: the task reads the file through the bind; with `HOME` elsewhere the same
/// binds warn of nothing.
#[test]
fn the_callers_credentials_are_warned_of_wherever_the_home_lies() {
    let dir = tmpdir_named(Path::new("/var/tmp"), "airlock-test-homes");
    let (real, link) = (dir.path().join("real"), dir.path().join("home"));
    std::fs::create_dir_all(real.join(".aws")).unwrap();
    std::fs::set_permissions(real.join(".aws"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_file(
        &real.join(".aws/credentials"),
        b"aws_secret = HOSTKEY\n",
        0o644,
    );
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let aws_text = real.join(".aws").display().to_string();
    for who in BOTH {
        for aws in [link.join(".aws"), real.join(".aws")] {
            let bind = format!("{}:/c", aws.display());
            let input = format!("creds={}/credentials", aws.display());
            for (home, warned) in [
                (&link, true),
                (&real, true),
                (&dir.path().to_path_buf(), false),
            ] {
                for (flag, arg, says) in [
                    ("--ro-bind", &bind, "reaches credentials the task can read"),
                    ("--input", &input, "is AWS credentials at"),
                ] {
                    let o = airlock(
                        who,
                        &["run", flag, arg, "--", "cat", "/c/credentials", "creds"],
                    )
                    .env("HOME", home)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                    let ctx = format!(
                        "{who:?} {flag} {arg} HOME={}: {}",
                        home.display(),
                        stderr(&o)
                    );
                    assert!(stdout(&o).contains("HOSTKEY"), "{ctx}");
                    let said = stderr(&o).contains(says) && stderr(&o).contains(&aws_text);
                    assert_eq!(said, warned, "{ctx}");
                    let o = airlock(who, &["explain", flag, arg, "--", "true"])
                        .env("HOME", home)
                        .output()
                        .unwrap();
                    assert_eq!(stdout(&o).contains(says), warned, "{ctx}: {}", stdout(&o));
                }
            }
        }
    }
}

/// A bind of the host's /proc (or of `/`, which holds it) is warned of, and the task does see
/// host processes through it: the host's pid 1's command line. Controls: the sandbox's own
/// /proc shows its own init as pid 1, not the host's, and a bind of /proc/sys (the machine,
/// not its processes) warns of nothing.
#[test]
fn a_bind_of_the_hosts_proc_is_warned_of_and_the_task_sees_host_processes() {
    let host_init = std::fs::read("/proc/1/cmdline").unwrap();
    let host_init = String::from_utf8_lossy(&host_init).replace('\0', " ");
    let show_init = |root: &str| format!("tr '\\0' ' ' < {root}/1/cmdline");
    for who in BOTH {
        let (run, rep) = json_sh(who, &[], &show_init("/proc"), SECS_10);
        assert_ne!(rep["stdout"], json!(host_init), "{who:?}: {}", run.show());
        for (bind, dest, root) in [
            ("/proc:/hp", "/hp", "/hp"),
            ("/:/host", "/host", "/host/proc"),
        ] {
            let (run, rep) = json_sh(who, &["--ro-bind", bind], &show_init(root), SECS_10);
            assert_eq!(
                rep["stdout"],
                json!(host_init),
                "{who:?} {bind}: {}",
                run.show()
            );
            let src = bind.split(':').next().unwrap();
            let warning = format!(
                "{src} (inside at {dest}) holds the host's /proc: the task reads every host \
                 process's command line, status and mount table"
            );
            let warnings = rep["warnings"].as_array().unwrap();
            assert!(
                warnings.contains(&json!(warning)),
                "{who:?}: {}",
                run.show()
            );
            assert_explain_warns(who, bind, &warning);
        }
        let (run, rep) = json_sh(who, &["--ro-bind", "/proc/sys:/s"], "true", SECS_10);
        assert_eq!(rep["warnings"], json!([]), "{who:?}: {}", run.show());
    }
}

/// `airlock explain --ro-bind BIND` says `warning` under the bind's line.
fn assert_explain_warns(who: Launcher, bind: &str, warning: &str) {
    let o = airlock(who, &["explain", "--ro-bind", bind, "--", "true"])
        .output()
        .unwrap();
    assert!(
        stdout(&o).contains(&format!("\n{:<19} warning: {warning}\n", "")),
        "{who:?}: {}",
        stdout(&o)
    );
}

/// A bind source named through the caller's descriptor (`--ro-bind /proc/self/fd/3:/in
/// 3<FILE`, `/dev/stdin`) is resolved in the caller, to the caller's file: resolved by the
/// init at step 5, `/proc/self` was the init, whose descriptor 3 is the host's `/`, and the
/// task was handed the whole host tree in place of the file. A descriptor that names no path
/// (a pipe) is refused as bad usage. Control: the same file bound by its path.
#[test]
fn a_bind_of_the_callers_descriptor_binds_the_callers_file() {
    let dir = tmpdir();
    let file = write_file(&dir.path().join("f"), b"CALLER-FILE\n", 0o644);
    let (bin, file) = (binary().display(), file.display());
    for who in BOTH {
        for (script, expected) in [
            (
                format!("{bin} run --ro-bind {file}:/in -- cat /in"),
                "CALLER-FILE\n",
            ),
            (
                format!("{bin} run --ro-bind /proc/self/fd/3:/in -- cat /in 3< {file}"),
                "CALLER-FILE\n",
            ),
            (
                format!("{bin} run --ro-bind /dev/stdin:/in -- cat /in < {file}"),
                "CALLER-FILE\n",
            ),
            (
                format!("echo hi | {bin} run --ro-bind /dev/stdin:/in -- cat /in; echo rc=$?"),
                "rc=2\n",
            ),
        ] {
            let o = host_sh(who, &script);
            assert_eq!(stdout(&o), expected, "{who:?} {script}: {}", stderr(&o));
        }
    }
}

/// A bind destination inside the sandbox's /proc is refused as bad usage before anything is
/// built (exit 2, nothing run), never mounted over a procfs file; the same bind elsewhere
/// runs (the control).
#[test]
fn a_bind_into_proc_is_refused_as_bad_usage() {
    let dir = tmpdir();
    write_file(&dir.path().join("f"), b"HOSTFILE\n", 0o644);
    let src = dir.path().join("f").display().to_string();
    for who in BOTH {
        for dest in ["/proc/x", "/proc/sys/kernel/x", "/proc/self/attr/current"] {
            let bind = format!("{src}:{dest}");
            let run = al(
                who,
                &["run", "--ro-bind", &bind, "--", "sh", "-c", "echo RAN"],
                SECS_10,
            );
            assert_eq!(run.code(), Some(2), "{who:?} {dest}: {}", run.show());
            assert!(
                !run.show().contains("RAN"),
                "{who:?} {dest}: {}",
                run.show()
            );
            assert!(run.show().contains("inside /proc"), "{}", run.show());
        }
        let bind = format!("{src}:/x");
        let run = al(
            who,
            &["run", "--ro-bind", &bind, "--", "cat", "/x"],
            SECS_10,
        );
        assert_eq!(run.code(), Some(0), "{who:?}: {}", run.show());
        assert!(run.show().contains("HOSTFILE"), "{}", run.show());
    }
}

/// The first fenced block of `lang` in the README's "From Python and Node" section.
fn readme_example(lang: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("\n### From Python and Node\n")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("the README's section \"From Python and Node\"");
    let fence = format!("\n```{lang}\n");
    let start = section
        .find(&fence)
        .unwrap_or_else(|| panic!("no {lang} block"))
        + fence.len();
    let len = section[start..].find("\n```\n").expect("the block's end");
    section[start..start + len + 1].to_string()
}

/// The README's Python and Node examples, run as they are written with `airlock` on PATH:
/// each sends a request with an input (Python) or a shell command (Node), and prints the
/// task's exit code, its output and the result file it wrote. Then each calls its function
/// for a command that does not exist and prints what it raised: airlock's own failure, told
/// apart from a task's; Python, in the C locale, then prints a task's non-ASCII output. A
/// change to the request or report (a key renamed, the error object) or to the examples
/// themselves fails here.
#[test]
fn the_readmes_python_and_node_examples_run_as_written() {
    let path = format!("{}:/usr/bin:/bin", binary().parent().unwrap().display());
    let cases = [
        (
            "/usr/bin/python3",
            readme_example("python"),
            "\ntry:\n    run_in_airlock('no-such-command')\nexcept RuntimeError as e:\n    print(e)\n\
             print(ascii(run_in_airlock('sh', ['-c', 'echo h\\u00e9llo'])['stdout']))\n",
        ),
        (
            "/usr/bin/node",
            readme_example("js"),
            "\ntry { runInAirlock('no-such-command'); } catch (e) { console.log(e.message); }\n",
        ),
    ];
    for who in BOTH {
        for (interpreter, example, missing) in &cases {
            let mut cmd = host_command(who, interpreter);
            cmd.env_clear().env("PATH", &path).current_dir("/");
            // The report is UTF-8 whatever the caller's locale: Python in the C locale with
            // its UTF-8 coercion off (the review found `text=True` decoding with ASCII).
            cmd.envs([
                ("LC_ALL", "C"),
                ("PYTHONCOERCECLOCALE", "0"),
                ("PYTHONUTF8", "0"),
            ]);
            let flag = if interpreter.ends_with("node") {
                "-e"
            } else {
                "-c"
            };
            cmd.arg(flag).arg(format!("{example}{missing}"));
            let run = run_bounded(cmd, None, Duration::from_secs(60));
            let ctx = format!("{who:?} {interpreter}");
            assert_eq!(run.code(), Some(0), "{ctx}: {}", run.show());
            let out = stdout(&run.out);
            let mut lines = out.lines();
            assert_eq!(lines.next(), Some("0 done 42"), "{ctx}: {}", run.show());
            let failure = lines.next().unwrap_or_default();
            assert!(
                failure.starts_with("airlock (command_not_found): "),
                "{ctx}: {}",
                run.show()
            );
            if interpreter.ends_with("python3") {
                assert_eq!(lines.next(), Some(r"'h\xe9llo\n'"), "{ctx}: {}", run.show());
            }
        }
    }
}

/// The caller of `airlock run` with standard streams airlock cannot use (python, `argv[1]`
/// airlock, `argv[2]` a directory every launcher may write): each case's task would touch a
/// file there, so the marker says whether it ran. One line per case.
const UNUSABLE_STREAMS: &str = r#"
import os, subprocess, sys
airlock, out = sys.argv[1], sys.argv[2]
path = os.open('/etc/hostname', os.O_PATH)
readable = os.open('/etc/hostname', os.O_RDONLY)
def case(name, flags, said, **kw):
    argv = [airlock, 'run'] + flags + ['--bind', f'{out}:/out', '--', 'touch', f'/out/{name}']
    p = subprocess.run(argv, stderr=subprocess.PIPE, timeout=60, **kw)
    ran = os.path.exists(os.path.join(out, name))
    print(f'{name}: status={p.returncode} said={said in p.stderr.decode()} ran={ran}')
# The control: outside the sandbox, a process given the O_PATH descriptor on stdin opens the
# file it names through /proc/self/fd and reads it, though the descriptor itself reads nothing.
reopen = 'print(open("/proc/self/fd/0").read() != "")'
p = subprocess.run([sys.executable, '-c', reopen], stdin=path, capture_output=True, timeout=60)
print(f'host-reopen: {p.stdout.decode().strip()}')
case('path-stdin', [], 'stdin is an O_PATH descriptor', stdin=path)
case('path-stdout', [], 'stdout is an O_PATH descriptor', stdout=path)
case('read-stdin', [], '', stdin=readable)
closed = lambda: os.close(1)
case('closed-json', ['--json'], 'stdout is closed: the JSON report would have nowhere to go',
     stdin=subprocess.DEVNULL, preexec_fn=closed)
case('closed-plain', [], '', stdin=subprocess.DEVNULL, preexec_fn=closed)
case('open-json', ['--json'], '', stdout=subprocess.DEVNULL)
case('path-json', ['--json'], 'stdout is an O_PATH descriptor', stdout=path)
"#;

/// Standard streams airlock cannot use are refused before the task runs (exit 2, the stream
/// named): an O_PATH descriptor (it names a file without opening it: the task could not read
/// or write it, but could open the file through /proc/self/fd) on stdin or stdout, and under
/// --json a stdout the caller closed (the report would go nowhere). Controls: on the host, a
/// process given the O_PATH descriptor opens and reads its file through /proc/self/fd; a file opened
/// for reading on stdin runs, a closed stdout without --json runs (the task's is /dev/null,
/// as documented), and --json with an open stdout runs. On the unfixed code an O_PATH stream
/// was taken for a closed one and airlock exited 125 without a word, and --json with a closed
/// stdout ran the task, wrote its report to /dev/null and exited 0.
#[test]
fn streams_airlock_cannot_use_are_refused_before_the_task_runs() {
    let bin = common::binary().display().to_string();
    for who in BOTH {
        let dir = tmpdir_named(Path::new("/var/tmp"), "airlock-streams-");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let out = dir.path().display().to_string();
        let o = host_command(who, PYTHON)
            .args(["-c", UNUSABLE_STREAMS, &bin, &out])
            .current_dir("/")
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            "host-reopen: True\n\
             path-stdin: status=2 said=True ran=False\n\
             path-stdout: status=2 said=True ran=False\n\
             read-stdin: status=0 said=True ran=True\n\
             closed-json: status=2 said=True ran=False\n\
             closed-plain: status=0 said=True ran=True\n\
             open-json: status=0 said=True ran=True\n\
             path-json: status=2 said=True ran=False\n",
            "{who:?}\n{}",
            stderr(&o)
        );
    }
}

/// The timeout counts from airlock's start, so setup is part of it: one that fires before
/// the task started (here while a 1 GiB input is copied into scratch, at about 0.4 GB/s) is
/// said to be that, not the task's (exit 124 either way): in JSON mode an error of kind
/// setup_timeout instead of a report of a task that never ran, streamed a line on stderr.
/// Control: a timeout that fires while the task runs is the task's (the report, timed_out).
/// On the unfixed code the first two read as the task's timeout: a report with timed_out,
/// signal 9, empty output, and no word on stderr.
#[test]
fn a_timeout_during_setup_is_said_to_be_setups() {
    let dir = tmpdir_named(Path::new("/var/tmp"), "airlock-setup-timeout-");
    let big = dir.path().join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(1 << 30).unwrap();
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o644)).unwrap();
    let input = format!("big={}", big.display());
    let slow = [
        "--timeout",
        "300ms",
        "--scratch-size",
        "2G",
        "--input",
        &input,
        "--",
        "echo",
        "RAN",
    ];
    for who in BOTH {
        let mut json = vec!["run", "--json"];
        json.extend_from_slice(&slow);
        let run = al(who, &json, SECS_10);
        assert_eq!(run.code(), Some(124), "{who:?}: {}", run.show());
        let rep = run.report();
        assert_eq!(rep["error_kind"], json!("setup_timeout"), "{who:?}: {rep}");
        assert_eq!(rep["exit_code"], json!(124), "{who:?}: {rep}");
        let msg = rep["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains("fired before the task started"),
            "{who:?}: {rep}"
        );

        let mut plain = vec!["run"];
        plain.extend_from_slice(&slow);
        let run = al(who, &plain, SECS_10);
        assert_eq!(run.code(), Some(124), "{who:?}: {}", run.show());
        assert_eq!(stdout(&run.out), "", "{who:?}");
        assert!(
            stderr(&run.out).contains("fired before the task started"),
            "{who:?}: {}",
            run.show()
        );

        let (run, rep) = json_sh(who, &["--timeout", "300ms"], "echo RAN; sleep 5", SECS_10);
        assert_eq!(run.code(), Some(124), "{who:?} control: {}", run.show());
        assert_eq!(rep["timed_out"], json!(true), "{who:?} control: {rep}");
        assert_eq!(rep["stdout"], json!("RAN\n"), "{who:?} control: {rep}");
    }
}

/// A request file that cannot be read is said with the call that failed, and one that is not
/// UTF-8 with the first byte that is not and where it is (the messages had been Rust's own:
/// "Is a directory (os error 21)", "stream did not contain valid UTF-8").
#[test]
fn request_file_errors_name_the_call_and_the_byte() {
    let dir = tmpdir();
    let bad = write_file(&dir.path().join("q"), b"{\"command\": \"true\xff\"}", 0o644);
    let missing = dir.path().join("none");
    let cases = [
        ("/etc".to_string(), "request \"/etc\": read: Is a directory"),
        (
            bad.display().to_string(),
            "not UTF-8: byte 0xff (offset 17) starts no UTF-8 character",
        ),
        (
            missing.display().to_string(),
            "none\": open: No such file or directory",
        ),
    ];
    for who in BOTH {
        for (path, says) in &cases {
            let run = al(who, &["run", "--request", path], SECS_10);
            let msg = run.usage_error(&format!("{who:?} {path}"));
            assert!(msg.ends_with(says), "{who:?} {path}: {msg}");
        }
    }
}

/// A writable bind whose source's way goes through a link (one a task of an earlier run may
/// have planted in a writable bind of its own) is warned of with where it leads, which is
/// what the task writes: the warning had named the link alone, until a review. Control: the
/// real directory bound itself is warned of by its name only.
#[test]
fn a_writable_bind_through_a_link_is_said_with_where_it_leads() {
    let dir = tmpdir();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("planted");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (real, link) = (real.display().to_string(), link.display().to_string());
    for who in BOTH {
        for (src, want) in [
            (
                &link,
                format!("{link} (through a link: {real}) is writable inside at /work/out:"),
            ),
            (&real, format!("{real} is writable inside at /work/out:")),
        ] {
            let bind = format!("{src}:/work/out");
            let (run, rep) = json_sh(who, &["--bind", &bind], "true", SECS_10);
            let first = rep["warnings"][0].as_str().unwrap_or_default();
            assert!(first.starts_with(&want), "{who:?}: {}", run.show());
        }
    }
}

/// airlock's own error, said on stderr, is one line whatever the path in it holds, as its
/// warnings are: a newline in a bind source is escaped (`\n`), so a log reader cannot take
/// the rest for a line of its own. It had come out on two lines, until a review.
#[test]
fn an_error_naming_a_path_with_a_newline_is_one_line() {
    for who in BOTH {
        let run = al(
            who,
            &[
                "run",
                "--ro-bind",
                "/no/such\nairlock forged:/x",
                "--",
                "true",
            ],
            SECS_10,
        );
        assert_eq!(run.code(), Some(2), "{who:?}: {}", run.show());
        let err = stderr(&run.out);
        assert_eq!(err.lines().count(), 1, "{who:?}: {}", run.show());
        assert!(
            err.contains("/no/such\\nairlock forged"),
            "{who:?}: {}",
            run.show()
        );
    }
}

/// An input named by a /proc fd link whose text is no path (a pipe on stdin:
/// `echo hi | airlock run --input x=/dev/stdin`) is refused (exit 2) saying so, where the
/// message had been a bare `lstat(".../fd/pipe:[N]"): ENOENT`. Control: a file on stdin is
/// copied in.
#[test]
fn an_input_from_a_pipe_on_stdin_is_refused_saying_why() {
    let args = ["run", "--input", "x=/dev/stdin", "--", "cat", "x"];
    for who in BOTH {
        let run = al_stdin(who, &args, b"from a pipe\n", SECS_10);
        assert_eq!(run.code(), Some(2), "{who:?}: {}", run.show());
        assert!(
            stderr(&run.out).contains("\"pipe:[")
                && stderr(&run.out).contains("is no path to it (a pipe, a socket, a deleted file; copy it to a file first): lstat("),
            "{who:?}: {}",
            run.show()
        );
        let dir = tmpdir();
        let file = write_file(&dir.path().join("in"), b"from a file\n", 0o644);
        let mut c = airlock(who, &args);
        c.stdin(std::fs::File::open(&file).unwrap());
        let o = c.output().unwrap();
        assert_eq!(
            stdout(&o),
            "from a file\n",
            "{who:?} control: {}",
            stderr(&o)
        );
    }
}

/// A caller's open file named by `/proc/self/fd/3` is that file, not where its link's text
/// leads. Once the file is deleted the text reads `PATH (deleted)`, a name anyone who may write
/// PATH's directory can create, as a link to a file only the caller may read: airlock
/// followed that text, and a root caller's `--input x=/proc/self/fd/3` copied in the planted
/// link's target (found by a race review). Now the route airlock walks must end at the file
/// the kernel opens there: refused (2, and bwrap mode's 1), for `--input`, `--ro-bind` and
/// bwrap mode's `--ro-bind`. Control: with the file still in place, each reads it.
#[test]
fn a_proc_fd_link_is_the_open_file_not_its_text() {
    let dir = tmpdir();
    let canary = write_file(&dir.path().join("canary"), b"CANARY-ONLY-ROOT\n", 0o600);
    let forms: [(&str, Vec<&str>, i32); 3] = [
        (
            "--input",
            vec!["run", "--input", "x=/proc/self/fd/3", "--", "cat", "x"],
            2,
        ),
        (
            "--ro-bind",
            vec![
                "run",
                "--ro-bind",
                "/proc/self/fd/3:/in",
                "--",
                "cat",
                "/in",
            ],
            2,
        ),
        (
            "bwrap --ro-bind",
            std::iter::once("bwrap")
                .chain(MIN_ROOT.iter().copied())
                .chain(["--ro-bind", "/proc/self/fd/3", "/in", "--", "cat", "/in"])
                .collect(),
            1,
        ),
    ];
    for (form, args, refused) in forms {
        for deleted in [false, true] {
            let ctx = format!("{form}, file deleted: {deleted}");
            let data = write_file(&dir.path().join("data"), b"the caller's file\n", 0o644);
            let planted = dir.path().join("data (deleted)");
            let _ = std::fs::remove_file(&planted);
            // Open the file as descriptor 3, then (the case) delete it and plant its text.
            let script = match deleted {
                true => r#"exec 3< "$1"; rm "$1"; ln -s "$2" "$1 (deleted)"; shift 2; exec "$@""#,
                false => r#"exec 3< "$1"; shift 2; exec "$@""#,
            };
            let mut c = Command::new("sh");
            c.args(["-c", script, "sh"])
                .arg(&data)
                .arg(&canary)
                .arg(binary())
                .args(&args);
            let run = run_bounded(c, None, SECS_10);
            assert!(
                !stdout(&run.out).contains("CANARY"),
                "{ctx}: the planted file was read: {}",
                run.show()
            );
            match deleted {
                true => {
                    assert_eq!(run.code(), Some(refused), "{ctx}: {}", run.show());
                    assert!(
                        stderr(&run.out).contains("is not what the kernel finds")
                            || stderr(&run.out).contains("is not the one the kernel opens")
                            || stderr(&run.out).contains("which is not the file it names"),
                        "{ctx}: {}",
                        run.show()
                    );
                }
                false => {
                    assert_eq!(run.code(), Some(0), "{ctx}: {}", run.show());
                    assert_eq!(stdout(&run.out), "the caller's file\n", "{ctx}");
                }
            }
        }
    }
}
