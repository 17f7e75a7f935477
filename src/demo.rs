//! `airlock demo`: the boundary made visible. A throwaway host home with cloud credentials, a
//! secret in the environment and a local HTTP server standing in for the internet; one probe
//! (`airlock demo-probe`, this binary) run four ways. Every probe line printed is what that run
//! really observed. The demo builds no sandbox of its own: it runs `airlock run` as a child.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::audit;

const SECRET_NAME: &str = "AWS_SECRET_ACCESS_KEY";
const SECRET_VALUE: &str = "demo-secret-wJalrXUtnFEMI";
const PROBE_PATH: &str = "/opt/airlock/probe";
const RESULT_FILE: &str = "result.txt";

/// The probe, run as the task: each check prints one line of what it observed.
pub fn probe(url: &str) -> i32 {
    let home = std::env::var("HOME").unwrap_or_default();
    let creds = Path::new(&home).join(".aws/credentials");
    let mut lines = Vec::new();
    lines.push(match std::fs::read(&creds) {
        Ok(b) => format!(
            "credentials {}: readable, {} bytes",
            creds.display(),
            b.len()
        ),
        Err(e) => format!("credentials {}: {}", creds.display(), describe(&e)),
    });
    lines.push(match std::env::var(SECRET_NAME) {
        Ok(v) => format!("{SECRET_NAME}: present ({}...)", &v[..v.len().min(11)]),
        Err(_) => format!("{SECRET_NAME}: absent"),
    });
    lines.push(format!("fetch {url}: {}", fetch(url)));
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut names: Vec<String> = std::fs::read_dir(".")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    lines.push(format!("cwd {cwd}: {} entries {names:?}", names.len()));
    lines.push(
        match std::fs::write(RESULT_FILE, "probe finished: exfiltration attempts done\n") {
            Ok(()) => format!("wrote {RESULT_FILE}"),
            Err(e) => format!("write {RESULT_FILE}: {}", describe(&e)),
        },
    );
    let mut out = std::io::stdout().lock();
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    0
}

fn describe(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn fetch(url: &str) -> String {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let Ok(sock) = addr.parse() else {
        return format!("bad url {url}");
    };
    match TcpStream::connect_timeout(&sock, Duration::from_secs(2)) {
        Ok(mut s) => {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
            let mut first = String::new();
            let _ = BufReader::new(s).read_line(&mut first);
            match first.split_whitespace().nth(1) {
                Some(code) => format!("reached, status {code}"),
                None => "connected, no HTTP answer".into(),
            }
        }
        Err(e) => match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => "refused (connection refused)".into(),
            Some(libc::ENETUNREACH) => "refused (network unreachable)".into(),
            _ => format!("failed ({e})"),
        },
    }
}

/// The stand-in for the internet: answers every request with 200 until the demo ends.
fn serve() -> std::io::Result<String> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/", l.local_addr()?);
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let _ = s.read(&mut buf);
            let _ = s
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 22\r\n\r\nthe internet was here\n");
        }
    });
    Ok(url)
}

struct Block {
    heading: &'static str,
    command: Vec<String>,
    lines: Vec<String>,
    notes: Vec<String>,
    exit_code: Option<i32>,
}

impl Block {
    fn saw(&self, needle: &str) -> bool {
        self.lines.iter().any(|l| l.contains(needle))
    }
}

pub fn run(json_out: bool) -> i32 {
    match demo(json_out) {
        Ok(code) => code,
        Err(e) => {
            crate::say!("airlock demo: {e}");
            crate::spec::exit::SETUP_FAILED
        }
    }
}

/// The kinds of temporary directory a demo makes: a host home holding the credentials, and
/// the working directory of its first probe.
const DEMO_DIRS: [&str; 2] = ["home", "cwd"];

/// A demo's temporary directory of `kind`, named after this process:
/// airlock-demo-KIND-PID-START-PIDNS-XXXXXX (see [`crate::limits::owner_tag`]).
fn demo_tempdir(kind: &str) -> std::io::Result<tempfile::TempDir> {
    let tag = crate::limits::owner_tag(std::process::id());
    tempfile::Builder::new()
        .prefix(&format!("airlock-demo-{kind}-{tag}-"))
        .tempdir()
}

/// Remove the temporary directories of demos that no longer run: a demo removes its own when
/// it returns, but one killed (SIGKILL, or a Ctrl-C or SIGTERM, whose default action skips
/// that) left them, the fake credentials among them. Only this user's directories are
/// removed, without following a link.
fn remove_left_by_dead_demos() {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| {
            DEMO_DIRS
                .iter()
                .find_map(|k| n.strip_prefix(&format!("airlock-demo-{k}-")))
        }) else {
            continue;
        };
        let path = e.path();
        if !crate::limits::left_behind(rest, &path) {
            continue;
        }
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn demo(json_out: bool) -> Result<i32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let exe_s = exe.display().to_string();
    remove_left_by_dead_demos();
    let home = demo_tempdir("home").map_err(|e| format!("temp home: {e}"))?;
    let aws = home.path().join(".aws");
    std::fs::create_dir(&aws).map_err(|e| e.to_string())?;
    std::fs::write(
        aws.join("credentials"),
        format!(
            "[default]\naws_access_key_id = AKIADEMO0000EXAMPLE\n{} = {SECRET_VALUE}\n",
            SECRET_NAME.to_lowercase()
        ),
    )
    .map_err(|e| e.to_string())?;
    let url = serve().map_err(|e| format!("local server: {e}"))?;
    let home_s = home.path().display().to_string();

    // The probe as a task: this binary, bound read-only into the sandbox.
    let probe_bind = format!("{exe_s}:{PROBE_PATH}");
    let run_args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["run".into(), "--json".into()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend([
            "--ro-bind".into(),
            probe_bind.clone(),
            "--".into(),
            PROBE_PATH.into(),
            "demo-probe".into(),
            url.clone(),
        ]);
        v
    };

    let mut blocks = Vec::new();

    // 1. On the host, as an agent's shell tool would run it.
    let scratch = demo_tempdir("cwd").map_err(|e| e.to_string())?;
    let out = Command::new(&exe)
        .args(["demo-probe", &url])
        .current_dir(scratch.path())
        .env("HOME", &home_s)
        .env(SECRET_NAME, SECRET_VALUE)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run probe: {e}"))?;
    let mut b = Block {
        heading: "1. On the host, no boundary (what an agent's shell tool does today)",
        command: vec![exe_s.clone(), "demo-probe".into(), url.clone()],
        lines: text_lines(&String::from_utf8_lossy(&out.stdout)),
        notes: vec![],
        exit_code: out.status.code(),
    };
    if b.saw("readable") && b.saw("present") && b.saw("reached") {
        b.notes
            .push("the task had every credential and the whole network of the caller".into());
    }
    blocks.push(b);

    // 2. Inside airlock run.
    blocks.push(sandboxed(
        &exe,
        "2. Inside airlock run",
        run_args(&[]),
        &home_s,
    )?);

    // 3. Inside airlock run with HOME and the secret forwarded by mistake, and what a
    // security team's audit of that line says before it runs.
    let mistake = run_args(&["--env", "HOME", "--env", SECRET_NAME]);
    let mistake_audit = crate::audit_airlock_line(&mistake)?;
    let mut b = sandboxed(
        &exe,
        "3. Inside airlock run, HOME and the secret forwarded by mistake",
        mistake,
        &home_s,
    )?;
    b.lines.push(format!(
        "airlock audit airlock of that line: {}",
        findings(mistake_audit.findings.len())
    ));
    for f in &mistake_audit.findings {
        b.lines.push(format!("  audit finding: {}", f.message));
    }
    if b.saw("present") {
        b.notes
            .push("the secret crossed because the caller forwarded it on purpose (--env)".into());
    }
    if b.saw("credentials") && b.saw("no such file") {
        b.notes.push(format!(
            "the credentials file is still unreachable: {home_s} does not exist in the \
             sandbox's root, which holds only system paths and scratch"
        ));
    }
    if b.saw("refused") {
        b.notes.push(
            "the server is still unreachable: the sandbox's network namespace has only its own \
             loopback, so 127.0.0.1 inside is not the host's"
                .into(),
        );
    }
    blocks.push(b);

    // 4. The same policy for docker, and the audit of the usual shortcut.
    let policy = audit::docker_args(&audit::DockerOpts {
        command: vec!["python".into(), "probe.py".into()],
        ..Default::default()
    });
    let shortcut: Vec<String> = [
        "docker",
        "run",
        "-e",
        SECRET_NAME,
        "-v",
        "/home/dev/project:/work",
        "-w",
        "/work",
        "python:3.12-slim",
        "python",
        "probe.py",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let policy_audit = audit::audit_docker(&policy)?;
    let shortcut_audit = audit::audit_docker(&shortcut)?;
    let mut lines = vec![
        format!("airlock docker-args: {}", audit::shell_quote(&policy)),
        format!(
            "audit of that line: {}",
            findings(policy_audit.findings.len())
        ),
        format!("the usual shortcut: {}", audit::shell_quote(&shortcut)),
        format!(
            "audit of the shortcut: {}",
            findings(shortcut_audit.findings.len())
        ),
    ];
    for f in &shortcut_audit.findings {
        lines.push(format!("  finding: {}", f.message));
    }
    blocks.push(Block {
        heading: "4. The same policy as a docker command line, and the usual shortcut audited",
        command: vec![exe_s.clone(), "audit".into(), "docker".into()],
        lines,
        notes: vec![],
        exit_code: None,
    });

    drop(scratch);
    drop(home);
    let text = if json_out {
        let doc: Vec<Value> = blocks
            .iter()
            .map(|b| {
                json!({"heading": b.heading, "command": b.command, "observed": b.lines,
                       "why": b.notes, "exit_code": b.exit_code})
            })
            .collect();
        format!("{}\n", json!({"demo": doc, "url": url}))
    } else {
        let mut text = String::new();
        for b in &blocks {
            text += &format!("== {}\n   $ {}\n", b.heading, b.command.join(" "));
            for l in &b.lines {
                text += &format!("   {l}\n");
            }
            for n in &b.notes {
                text += &format!("   why: {n}\n");
            }
            text += "\n";
        }
        text
    };
    Ok(crate::out(&text, 0))
}

fn text_lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

fn sandboxed(
    exe: &Path,
    heading: &'static str,
    args: Vec<String>,
    home: &str,
) -> Result<Block, String> {
    let out = Command::new(exe)
        .args(&args)
        .env("HOME", home)
        .env(SECRET_NAME, SECRET_VALUE)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("airlock run: {e}"))?;
    let report: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "airlock run gave no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    if let Some(err) = report.get("error") {
        return Err(format!("airlock run failed: {err}"));
    }
    let mut lines = text_lines(report["stdout"].as_str().unwrap_or(""));
    // What airlock itself said of the line (a forwarded credential): the report's warnings.
    for w in report["warnings"].as_array().into_iter().flatten() {
        lines.push(format!("airlock warned: {}", w.as_str().unwrap_or("")));
    }
    if let Some(files) = report["files"].as_object() {
        for (name, text) in files {
            lines.push(format!(
                "returned file {name}: {:?}",
                text.as_str().unwrap_or("")
            ));
        }
    }
    let mut command = vec![exe.display().to_string()];
    command.extend(args);
    Ok(Block {
        heading,
        command,
        lines,
        notes: vec![],
        exit_code: report["exit_code"].as_i64().map(|c| c as i32),
    })
}

/// A count of audit findings, as a sentence says it.
fn findings(n: usize) -> String {
    match n {
        1 => "1 finding".into(),
        n => format!("{n} findings"),
    }
}
