//! Bounded runs of any program, host directories every launcher can reach, and an HTTP server
//! on the host's loopback: what the tests of the runner contract and of real workloads share.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Launcher, report, stderr, stdout};
use serde_json::Value;

/// A finished, bounded run: its output and how long it took (spawn to exit).
pub struct Run {
    pub out: Output,
    pub took: Duration,
}

impl Run {
    /// The run of a process that ended with `status` after `took`, its stdout and stderr
    /// read to their end by `pipes`.
    pub fn collect(status: ExitStatus, took: Duration, pipes: [JoinHandle<Vec<u8>>; 2]) -> Run {
        let [out, err] = pipes;
        Run {
            out: Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            },
            took,
        }
    }

    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    pub fn report(&self) -> Value {
        report(&self.out)
    }

    /// Everything the run printed, for messages.
    pub fn show(&self) -> String {
        format!(
            "status={:?} took={:?}\nstdout={}\nstderr={}",
            self.out.status,
            self.took,
            truncate_for_message(&stdout(&self.out)),
            truncate_for_message(&stderr(&self.out))
        )
    }
}

/// `s` whole when short, else its first and last 1000 bytes: where a run began, and where it
/// stopped (a hang's last words).
pub fn truncate_for_message(s: &str) -> String {
    if s.len() <= 2000 {
        return s.to_string();
    }
    let (mut head, mut tail) = (1000, s.len() - 1000);
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} ... ({} bytes) ... {}", &s[..head], s.len(), &s[tail..])
}

pub fn drain<R: Read + Send + 'static>(mut r: R) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Poll `child` until it exits or `deadline` passes; on the deadline it is killed and None is
/// returned.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Run `cmd` (stdout and stderr captured, stdin from `input` or /dev/null) and fail the test
/// if it has not exited within `limit`. The output pipes must reach EOF shortly after the exit:
/// if anything still holds them, something of the run survived it.
pub fn run_bounded(cmd: Command, input: Option<&[u8]>, limit: Duration) -> Run {
    let feed = input.map(|data| {
        let data = data.to_vec();
        Box::new(move |mut w: ChildStdin| {
            let _ = w.write_all(&data);
        }) as Feed
    });
    run_fed(cmd, feed, limit)
}

/// What writes a run's stdin, on a thread of its own; the pipe closes when it returns.
pub type Feed = Box<dyn FnOnce(ChildStdin) + Send>;

/// `run_bounded` with stdin written by `feed` (or /dev/null); the run's exit is waited for,
/// then `feed`'s return.
pub fn run_fed(mut cmd: Command, feed: Option<Feed>, limit: Duration) -> Run {
    cmd.stdin(if feed.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let writer = feed.map(|feed| {
        let w = child.stdin.take().unwrap();
        std::thread::spawn(move || feed(w))
    });
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = wait_until(&mut child, start + limit);
    let took = start.elapsed();
    let pipes_deadline = Instant::now() + Duration::from_secs(3);
    while !(out.is_finished() && err.is_finished()) {
        assert!(
            Instant::now() < pipes_deadline,
            "{cmd:?} ended ({status:?}, None: killed after {limit:?}) but its stdout/stderr \
             stayed open for 3 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    if let Some(w) = writer {
        let _ = w.join();
    }
    let Some(status) = status else {
        let killed = child.wait().unwrap();
        let run = Run::collect(killed, took, [out, err]);
        panic!(
            "{cmd:?} still running after {limit:?}: killed\n{}",
            run.show()
        );
    };
    Run::collect(status, took, [out, err])
}

/// `program` run directly on the host as `who`.
pub fn host_command(who: Launcher, program: &str) -> Command {
    match who {
        Launcher::Root => Command::new(program),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", program]);
            c
        }
    }
}

/// A temporary directory every launcher can read (0755), removed at drop.
pub fn tmpdir() -> tempfile::TempDir {
    tmpdir_in(&std::env::temp_dir())
}

/// A temporary directory every launcher's task may write (0777): a bind of it carries a
/// task's marker back to the test, whoever the task is on the host. Removed at drop.
pub fn writable_tmpdir() -> tempfile::TempDir {
    let d = tmpdir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// A control run's proof that the probe works: it exited 0 (`code`) and its task left
/// `marker` (through a bind), which is removed for the run that follows. `shown` tells the
/// run on failure.
pub fn control_left_marker(code: Option<i32>, shown: &str, marker: &Path, ctx: &str) {
    assert_eq!(code, Some(0), "control, {ctx}: {shown}");
    std::fs::remove_file(marker)
        .unwrap_or_else(|e| panic!("control, {ctx}: the task's marker: {e}: {shown}"));
}

/// `tmpdir` in `parent`: a path under /tmp would name scratch inside (/tmp is a link to /work
/// there), which hides a host path for another reason than the boundary.
pub fn tmpdir_in(parent: &Path) -> tempfile::TempDir {
    tmpdir_named(parent, "airlock-test-dir-")
}

/// A temporary directory in `parent` whose name starts with `prefix`, readable by every
/// launcher (0755), removed at drop.
pub fn tmpdir_named(parent: &Path, prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Write `text` to `path` with permissions `mode`; returns the path.
pub fn write_file(path: &Path, text: &[u8], mode: u32) -> PathBuf {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_path_buf()
}

/// A new empty file at `path` (an old one removed first, so that its blocks are freed) with
/// `mode`, open for writing: a caller's fresh `>` output to hand a run.
pub fn fresh_output(path: &Path, mode: u32) -> std::fs::File {
    let _ = std::fs::remove_file(path);
    let f = std::fs::File::create(path).unwrap();
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .unwrap();
    f
}

/// An HTTP/1.0 server on the host's 127.0.0.1, for a bounded lifetime; counts the requests
/// it answered and keeps what they sent.
pub struct Server {
    pub url: String,
    hits: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(lifetime: Duration) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!(
            "http://127.0.0.1:{}/probe",
            listener.local_addr().unwrap().port()
        );
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (h, s, r) = (hits.clone(), stop.clone(), received.clone());
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + lifetime;
            while !s.load(Ordering::SeqCst) && Instant::now() < end {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                        let req = read_request(&mut conn);
                        let body = "hello from the host";
                        let _ = write!(
                            conn,
                            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\
                             Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        r.lock().unwrap().extend_from_slice(&req);
                        h.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => break,
                }
            }
        });
        Server {
            url,
            hits,
            received,
            stop,
            thread: Some(thread),
        }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Every request answered so far (head and body), one after the other, as text.
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }
}

/// One request: its head, and as much body as its Content-Length says (at most 16 KiB in all,
/// read for at most the connection's read timeout).
fn read_request(conn: &mut impl Read) -> Vec<u8> {
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    let want = |req: &[u8]| {
        let end = req.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&req[..end]).to_ascii_lowercase();
        let body = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        Some(end + body)
    };
    while want(&req).is_none_or(|n| req.len() < n) && req.len() < 16384 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    req
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
