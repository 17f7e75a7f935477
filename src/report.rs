//! Results handed back as text, without trusting the task: captured output (capped, memory
//! bounded however much the task writes) and the files it left in scratch (read through the
//! scratch descriptor only, never following a link, never blocking on a FIFO, never reading
//! past the cap).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, SpliceFFlags, open, splice};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};
use serde_json::{Value, json};

use crate::launch::{End, Failure, Outcome};
use crate::relay::{PIPE_SIZE, grow_after};
use crate::spec::{MAX_RESULT_BYTES, MAX_RESULT_ENTRIES, MAX_SKIPPED_LISTED};

/// One captured stream: the first `max` bytes, and how many there were in all.
#[derive(Debug, Default)]
pub struct Capture {
    pub data: Vec<u8>,
    pub total: u64,
    max: usize,
    /// /dev/null, once the cap is reached: the rest is spliced into it, never copied here.
    /// None before, or where it cannot be opened or spliced into (then read and dropped).
    sink: Option<OwnedFd>,
    /// The sink was opened (or tried): once only.
    sink_tried: bool,
    /// Bytes dropped, until the pipe grows (relay::grow_after).
    dropped: u64,
}

impl Capture {
    pub fn new(max: usize) -> Capture {
        Capture {
            max,
            ..Capture::default()
        }
    }

    /// Read what is available from a non-blocking pipe. Bytes past the cap are dropped (see
    /// `sink`), so a flood never blocks the task nor grows this process: 1 GiB past the cap
    /// takes about 0.23 s instead of 0.80 s read and dropped through a 64 KiB pipe.
    pub fn read_from(&mut self, fd: BorrowedFd) -> Pipe {
        let room = self.max.saturating_sub(self.data.len());
        if room == 0 && !std::mem::replace(&mut self.sink_tried, true) {
            self.sink = null_sink("/dev/null");
        }
        let got = match &self.sink {
            Some(sink) => {
                let r = splice(
                    fd,
                    None,
                    sink,
                    None,
                    PIPE_SIZE as usize,
                    SpliceFFlags::SPLICE_F_NONBLOCK,
                );
                if r.is_err_and(|e| e != Errno::EAGAIN && e != Errno::EINTR) {
                    // Read and drop from here on.
                    self.sink = None;
                    return Pipe::Open;
                }
                r
            }
            // Below the cap: read into the kept bytes' own room (at most 64 KiB a call), with
            // no 64 KiB buffer to clear at every call and copy through.
            None if room > 0 => {
                let at = self.data.len();
                self.data.resize(at + room.min(64 * 1024), 0);
                let r = nix::unistd::read(fd, &mut self.data[at..]);
                self.data.truncate(at + r.unwrap_or(0));
                r
            }
            // Past the cap with no sink: read and dropped. A small buffer: it is on the
            // launcher's stack, which the caller's stack limit may keep small (`ulimit -s 64`).
            None => nix::unistd::read(fd, &mut [0u8; 4096]),
        };
        match got {
            Ok(0) => Pipe::Closed,
            Ok(n) => {
                self.total += n as u64;
                if room == 0 {
                    grow_after(&mut self.dropped, n, &[fd]);
                }
                Pipe::Open
            }
            Err(Errno::EINTR) => Pipe::Open,
            Err(Errno::EAGAIN) => Pipe::Empty,
            Err(_) => Pipe::Closed,
        }
    }

    pub fn truncated(&self) -> bool {
        self.total > self.data.len() as u64
    }
}

/// `path` opened for writing if it is the null device (character device 1:3), the only sink
/// output past the cap goes to: on a host where /dev/null is a regular file, splicing into it
/// would fill its disk.
fn null_sink(path: &str) -> Option<OwnedFd> {
    let flags = OFlag::O_WRONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    let fd = open(path, flags, Mode::empty()).ok()?;
    let st = fstat(&fd).ok()?;
    let null = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFCHR
        && st.st_rdev == nix::sys::stat::makedev(1, 3);
    null.then_some(fd)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipe {
    /// Data was read; there may be more.
    Open,
    /// Nothing to read right now.
    Empty,
    /// End of file.
    Closed,
}

/// The result files found in scratch.
#[derive(Debug, Default)]
pub struct Files {
    pub text: BTreeMap<String, Vec<u8>>,
    pub truncated: Vec<String>,
    pub skipped: Vec<(String, String)>,
}

/// Collect every regular file directly in scratch that is not an input left as handed.
/// `handed`: (name, size, hash) of each input as copied in. An input left as handed is passed
/// over before the count limit, and takes none of the MAX_RESULT_ENTRIES examined: a run
/// handed that many inputs had no entry left for the task's own files, which then came back
/// as "count limit" (or not at all) while unchanged inputs were listed in their place.
/// `bound`: names of binds mounted directly in scratch; through `scratch` this side sees only
/// their empty mount points, never what the task saw there, so they are skipped ("bind"), not
/// reported as results.
pub fn collect_files(
    scratch: BorrowedFd,
    handed: &[(String, u64, u64)],
    bound: &[&OsStr],
    max: usize,
) -> Files {
    let mut files = Files::default();
    let mut dir = match Dir::openat(
        scratch,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(d) => d,
        Err(e) => {
            files
                .skipped
                .push((".".into(), format!("scratch unreadable: {e}")));
            return files;
        }
    };
    let handed: std::collections::HashMap<&str, (u64, u64)> = handed
        .iter()
        .map(|(n, size, hash)| (n.as_str(), (*size, *hash)))
        .collect();
    let mut seen = 0usize;
    let mut listed = 0usize;
    let mut not_listed = 0usize;
    let mut budget = MAX_RESULT_BYTES;
    for entry in dir.iter() {
        let Ok(entry) = entry else { break };
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        // The caller's inputs bound this work (their number and sizes), not the task.
        if let Some(&(size, hash)) = std::str::from_utf8(raw).ok().and_then(|n| handed.get(n))
            && left_as_handed(scratch, OsStr::from_bytes(raw), size, hash)
        {
            continue;
        }
        let name = String::from_utf8_lossy(raw).into_owned();
        seen += 1;
        if seen > MAX_RESULT_ENTRIES {
            if listed < MAX_SKIPPED_LISTED {
                files.skipped.push((name, "count limit".into()));
                listed += 1;
            } else {
                not_listed += 1;
            }
            continue;
        }
        if bound.contains(&OsStr::from_bytes(raw)) {
            files.skipped.push((name, "bind".into()));
            continue;
        }
        // A JSON key is text: names differing only in bytes that are not UTF-8 would collapse
        // into one key (and one could pass for an input left as handed), so such a file is
        // named, with U+FFFD, among the skipped rather than reported under a name it lacks.
        if std::str::from_utf8(raw).is_err() {
            files.skipped.push((name, "name not UTF-8".into()));
            continue;
        }
        match read_one(scratch, OsStr::from_bytes(raw), max.min(budget)) {
            Ok(_) if budget == 0 => {
                files.skipped.push((name, "total size limit".into()));
            }
            Ok((data, truncated)) => {
                budget -= data.len();
                if truncated {
                    files.truncated.push(name.clone());
                }
                files.text.insert(name, data);
            }
            Err(reason) => files.skipped.push((name, reason)),
        }
    }
    if not_listed > 0 {
        files.skipped.push((
            "*".into(),
            format!("count limit: {not_listed} more entries not listed"),
        ));
    }
    files
}

/// The regular file `name` in `dir`, opened without following a link or blocking on a FIFO,
/// and checked to be the file stat saw: even if the entry were swapped for a link or a FIFO
/// after the stat, the open neither follows nor blocks, and fstat tells.
fn open_regular(dir: BorrowedFd, name: &OsStr) -> Result<(std::fs::File, u64), String> {
    let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| format!("stat: {e}"))?;
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    let reason = match kind {
        SFlag::S_IFREG => None,
        SFlag::S_IFDIR => Some("directory"),
        SFlag::S_IFLNK => Some("symlink"),
        SFlag::S_IFIFO => Some("fifo"),
        SFlag::S_IFSOCK => Some("socket"),
        SFlag::S_IFCHR | SFlag::S_IFBLK => Some("device"),
        _ => Some("not a regular file"),
    };
    if let Some(r) = reason {
        return Err(r.into());
    }
    let fd = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("unreadable: {e}"))?;
    let st2 = fstat(&fd).map_err(|e| format!("stat: {e}"))?;
    if st2.st_ino != st.st_ino || st2.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFREG.bits() {
        return Err("changed while being read".into());
    }
    Ok((std::fs::File::from(fd), st2.st_size as u64))
}

/// Whether `name` is still the input copied in as `size` bytes hashing to `hash`. Anything
/// that cannot be read or is not a regular file is not: read_one then says why.
fn left_as_handed(dir: BorrowedFd, name: &OsStr, size: u64, hash: u64) -> bool {
    open_regular(dir, name)
        .is_ok_and(|(mut file, now)| now == size && hash_file(&mut file) == Some(hash))
}

/// A result file's first `max` bytes, and whether it holds more. Err(reason): skipped.
fn read_one(dir: BorrowedFd, name: &OsStr, max: usize) -> Result<(Vec<u8>, bool), String> {
    let (file, size) = open_regular(dir, name)?;
    let mut data = Vec::with_capacity(max.min(size as usize) + 1);
    file.take(max as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("unreadable: {e}"))?;
    let truncated = data.len() > max;
    data.truncate(max);
    Ok((data, truncated))
}

fn hash_file(f: &mut std::fs::File) -> Option<u64> {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    let mut buf = vec![0u8; 128 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(h.finish()),
            Ok(n) => h.write(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// Text of captured bytes: invalid UTF-8 is replaced (and reported); an incomplete character
/// cut by the cap at the very end is dropped rather than reported as invalid, whatever came
/// before it (an invalid byte earlier had made it a second replacement character). Valid
/// text is the captured bytes themselves, not a copy of them.
fn text(bytes: &[u8], truncated: bool) -> (Cow<'_, str>, bool) {
    let mut b = bytes;
    // The last character's first byte: the last byte, of the final three, that does not
    // continue a character (a cut one has at most three of its four).
    let last = (b.len().saturating_sub(3)..b.len())
        .rev()
        .find(|&i| b[i] & 0xc0 != 0x80);
    if truncated
        && let Some(at) = last
        && let Err(e) = std::str::from_utf8(&b[at..])
        && e.error_len().is_none()
    {
        b = &b[..at];
    }
    match std::str::from_utf8(b) {
        Ok(s) => (Cow::Borrowed(s), false),
        Err(_) => (String::from_utf8_lossy(b), true),
    }
}

/// One value of the report: small ones made as JSON values, the captured text written from
/// where it lies.
enum Part<'a> {
    Value(Value),
    Text(&'a str),
    Files(&'a [(&'a String, Cow<'a, str>)]),
}

/// Write the JSON report (one line) to `w` as it is serialized: every key present every time,
/// in key order. The captured output and files are escaped straight into `w`, never held as a
/// second copy nor as the whole report's text, which can be six times their size (`\u0000`
/// for a NUL): two 64 MiB captures of NULs made an 805 MB report, and airlock's peak RSS was
/// 1 GB while it was built in memory. `warnings` are the launcher's, said on stderr too.
pub fn write_json(o: &Outcome, warnings: &[String], w: &mut dyn Write) -> std::io::Result<()> {
    let (exit_code, signal) = match o.end {
        End::Exited(c) => (json!(c), Value::Null),
        End::Signaled(s) | End::InitKilled(s) => (Value::Null, json!(s)),
        End::TimedOut => (Value::Null, json!(libc::SIGKILL)),
    };
    let mut replaced = Vec::new();
    let (stdout, r) = text(&o.stdout.data, o.stdout.truncated());
    if r {
        replaced.push("stdout".to_string());
    }
    let (stderr, r) = text(&o.stderr.data, o.stderr.truncated());
    if r {
        replaced.push("stderr".to_string());
    }
    let mut files = Vec::new();
    for (name, data) in &o.files.text {
        let (t, r) = text(data, o.files.truncated.contains(name));
        if r {
            replaced.push(format!("files/{name}"));
        }
        files.push((name, t));
    }
    let skipped: Vec<Value> = o
        .files
        .skipped
        .iter()
        .map(|(n, r)| json!({"name": n, "reason": r}))
        .collect();
    let limits = o.limits.as_ref().map_or(Value::Null, |l| {
        crate::limits::to_json(l, o.applied_limits.as_ref().unwrap_or(l), o.mechanism)
    });
    let parts = [
        (
            "duration_ms",
            Part::Value(json!(o.duration.as_millis() as u64)),
        ),
        ("exit_code", Part::Value(exit_code)),
        ("files", Part::Files(&files)),
        ("files_skipped", Part::Value(json!(skipped))),
        ("files_truncated", Part::Value(json!(o.files.truncated))),
        ("limit_hit", Part::Value(json!(o.limit_hit))),
        ("limits", Part::Value(limits)),
        ("signal", Part::Value(signal)),
        ("stderr", Part::Text(&stderr)),
        ("stderr_truncated", Part::Value(json!(o.stderr.truncated()))),
        ("stdout", Part::Text(&stdout)),
        ("stdout_truncated", Part::Value(json!(o.stdout.truncated()))),
        ("timed_out", Part::Value(json!(o.end == End::TimedOut))),
        ("utf8_replaced", Part::Value(json!(replaced))),
        ("warnings", Part::Value(json!(warnings))),
    ];
    let mut sep = "{";
    for (key, part) in &parts {
        write!(w, "{sep}\"{key}\":")?;
        sep = ",";
        match part {
            Part::Value(v) => serde_json::to_writer(&mut *w, v)?,
            Part::Text(t) => serde_json::to_writer(&mut *w, t)?,
            Part::Files(files) => {
                let mut sep = "{";
                for (name, t) in files.iter() {
                    w.write_all(sep.as_bytes())?;
                    sep = ",";
                    serde_json::to_writer(&mut *w, name)?;
                    w.write_all(b":")?;
                    serde_json::to_writer(&mut *w, t)?;
                }
                w.write_all(if files.is_empty() { b"{}" } else { b"}" })?;
            }
        }
    }
    w.write_all(b"}\n")
}

/// Whether the scratch tmpfs `fd` is on has no block or no inode left (a task that ran
/// into --scratch-size).
pub fn full(fd: std::os::fd::BorrowedFd) -> bool {
    nix::sys::statvfs::fstatvfs(fd).is_ok_and(|st| no_room(&st))
}

/// As [`full`], for the filesystem at `path` (the sandbox's `/dev/shm`, sized as scratch).
pub fn full_at(path: &str) -> bool {
    nix::sys::statvfs::statvfs(path).is_ok_and(|st| no_room(&st))
}

fn no_room(st: &nix::sys::statvfs::Statvfs) -> bool {
    st.blocks_available() == 0 || st.files_available() == 0
}

/// airlock's own failure in JSON mode.
pub fn failure_json(f: &Failure) -> (Value, i32) {
    use crate::spec::exit;
    let (kind, msg, code) = match f {
        Failure::Usage(m) => ("usage", m.as_str(), exit::USAGE),
        Failure::Setup(m) => ("setup", m.as_str(), exit::SETUP_FAILED),
        Failure::SetupTimedOut(m) => ("setup_timeout", m.as_str(), exit::TIMEOUT),
        Failure::Cancelled(sig, m) => ("cancelled", m.as_str(), 128 + *sig as i32),
        Failure::Exec(c, m) => (
            if *c == exit::NOT_FOUND {
                "command_not_found"
            } else {
                "command_not_executable"
            },
            m.as_str(),
            *c,
        ),
    };
    (
        json!({"error": msg, "error_kind": kind, "exit_code": code}),
        code,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_replaces_invalid_and_reports_it() {
        assert_eq!(text(b"ok", false), ("ok".into(), false));
        let (t, r) = text(b"a\xffb", false);
        assert!(r);
        assert_eq!(t, "a\u{fffd}b");
        // "é" is c3 a9: a cap that cuts after c3 is not invalid input.
        assert_eq!(text(b"ab\xc3", true), ("ab".into(), false));
        assert!(text(b"ab\xc3", false).1);
        // After an invalid byte too: one replacement, for the byte that was in the output.
        assert_eq!(text(b"\xff\xf0\x9f\x98", true), ("\u{fffd}".into(), true));
        assert_eq!(text(b"\xff\xf0\x9f", true), ("\u{fffd}".into(), true));
        // A complete last character, or an invalid one, is kept.
        assert_eq!(text(b"\xff\xc3\xa9", true), ("\u{fffd}\u{e9}".into(), true));
        assert_eq!(text(b"a\x80", true), ("a\u{fffd}".into(), true));
    }

    /// How a test sets a capture up before it reads.
    type Set = fn(&mut Capture);

    /// Capture `len` bytes written by a thread into a non-blocking pipe with cap `max`, the
    /// capture set up by `set`; the capture and the pipe's size.
    fn capture(len: usize, max: usize, set: Set) -> (Capture, i32) {
        use nix::fcntl::{FcntlArg, fcntl};
        use std::os::fd::AsFd;
        let (r, w) = nix::unistd::pipe2(OFlag::O_NONBLOCK).unwrap();
        fcntl(&w, FcntlArg::F_SETFL(OFlag::empty())).unwrap();
        let writer = std::thread::spawn(move || {
            let chunk: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut at = 0;
            while at < len {
                at += nix::unistd::write(&w, &chunk[at..]).unwrap();
            }
        });
        let mut c = Capture::new(max);
        set(&mut c);
        while c.read_from(r.as_fd()) != Pipe::Closed {}
        let size = fcntl(&r, FcntlArg::F_GETPIPE_SZ).unwrap();
        // A capture that stopped early fails the writer (EPIPE), not hangs it.
        drop(r);
        writer
            .join()
            .expect("the capture stopped before the writer's end");
        (c, size)
    }

    #[test]
    fn capture_caps_but_counts() {
        let sets: [Set; 3] = [|_| {}, no_sink, bad_sink];
        for set in sets {
            for (len, max) in [
                (1000, 10),
                (10, 10),
                (11, 10),
                (0, 10),
                (5, 0),
                (70_000, 65_536),
            ] {
                let (c, _) = capture(len, max, set);
                let kept: Vec<u8> = (0..len.min(max)).map(|i| (i % 251) as u8).collect();
                assert_eq!(c.data, kept, "{len} {max}");
                assert_eq!(c.total, len as u64, "{len} {max}");
                assert_eq!(c.truncated(), len > max, "{len} {max}");
            }
        }
    }

    /// As if /dev/null could not be opened.
    fn no_sink(c: &mut Capture) {
        c.sink_tried = true;
    }

    /// A sink splice refuses (EBADF: a read-only descriptor).
    fn bad_sink(c: &mut Capture) {
        no_sink(c);
        c.sink = open("/", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).ok();
    }

    #[test]
    fn only_the_null_device_is_a_sink() {
        assert!(null_sink("/dev/null").is_some());
        let file = tempfile::NamedTempFile::new().unwrap();
        for other in [file.path().to_str().unwrap(), "/dev/zero", "/dev/full", "/"] {
            assert!(null_sink(other).is_none(), "{other}");
        }
    }

    /// Past the cap the bytes are spliced into /dev/null, and the pipe grows once 4 MiB went
    /// through (1 GiB: 0.80 -> 0.23 s); read and dropped where the sink cannot be had or
    /// refuses the splice.
    #[test]
    fn a_flood_past_the_cap_is_spliced_away_through_a_grown_pipe() {
        let sets: [(Set, bool); 3] = [(|_| {}, true), (no_sink, false), (bad_sink, false)];
        for (set, spliced) in sets {
            let (c, size) = capture(6 << 20, 100, set);
            assert_eq!(c.sink.is_some(), spliced);
            assert_eq!((c.total, c.data.len()), (6 << 20, 100));
            assert_eq!(size, crate::relay::PIPE_SIZE);
        }
    }
}
