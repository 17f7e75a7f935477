//! The standard streams of a streamed `airlock run` that the task must not hold as they are.
//!
//! A task can reopen any descriptor it holds through /proc/self/fd/N, and the kernel then
//! checks only the file's own permissions against the task's host uid: a stdin redirected
//! read-only from a file reopens for writing, an append-only stdout (a log, with what it held
//! before) reopens for reading or to truncate, and a directory on a stream is a path into the
//! host's tree. So:
//! - a stdin that is a regular file or a block device reaches the task as a pipe the launcher
//!   feeds. It reads at its own offset (splice or pread), and once the sandbox is gone it moves
//!   the caller's offset by what the task took out of the pipe: a `while read` loop around
//!   airlock keeps its place, as it does with the file itself;
//! - a stdout or stderr that is a regular file opened for appending reaches the task as a
//!   pipe the launcher drains into it. Its writes then carry the task's --file-size: the
//!   launcher's own RLIMIT_FSIZE is lowered to it (see `limit_writes`). A file opened to be
//!   written from its start (`>`) holds nothing the task did not write, and goes through as
//!   it is;
//! - a directory on any stream is refused (exit 2).
//!
//! Pipes, sockets and character devices (terminals, /dev/null) go through as they are:
//! reopening one gives nothing the descriptor did not. bwrap mode passes every stream through,
//! as bubblewrap does.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl};
use nix::poll::{PollFd, PollFlags};
use nix::sys::stat::SFlag;
use nix::unistd::{Gid, Uid};

use crate::launch::Failure;
use crate::sys::std_stream;

const CHUNK: usize = 64 * 1024;

/// One relayed stream, the launcher's side.
pub struct Relay {
    /// 0, 1 or 2: the caller's descriptor the data comes from or goes to.
    stream: i32,
    /// The launcher's end of the pipe (non-blocking): the write end for stdin, else the read
    /// end. Dropped once the relay is done.
    pipe: Option<OwnedFd>,
    /// stdin: the caller's file as read so far.
    input: Option<Input>,
}

/// What a stdin relay keeps to give the caller's file offset back at the end.
struct Input {
    /// Where the caller's offset stood; None for a file without one (a block device that
    /// refuses lseek): then it is read as it comes, and the offset moves as it does.
    start: Option<i64>,
    /// The next byte to read (from `start`).
    next: i64,
    /// Read from the file, not yet in the pipe (the read/write fallback).
    pending: Vec<u8>,
    /// A read end of the pipe kept for FIONREAD: how much the task has not taken yet.
    peek: OwnedFd,
}

/// What to do with the caller's streams: the launcher's relays, and for each of fds 0-2 the
/// descriptor the task gets instead (`None`: the stream as it is).
pub struct Plan {
    pub relays: Vec<Relay>,
    pub task_ends: [Option<OwnedFd>; 3],
}

const NAMES: [&str; 3] = ["stdin", "stdout", "stderr"];

/// Decide for each stream. A directory on a stream is refused (bad input, exit 2). `owner`:
/// as for `pipe`.
pub fn plan(owner: Option<(u32, u32)>) -> Result<Plan, Failure> {
    let mut relays = Vec::new();
    let mut task_ends: [Option<OwnedFd>; 3] = [None, None, None];
    let mut ids = [None; 3];
    for stream in 0..3 {
        let i = stream as usize;
        let fd = std_stream(stream);
        let st = named(nix::sys::stat::fstat(fd), "fstat")?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFDIR {
            return Err(Failure::Usage(format!(
                "{} is a directory: airlock run takes files, pipes, sockets and terminals as \
                 standard streams",
                NAMES[i]
            )));
        }
        let relayed = match stream {
            0 => kind == SFlag::S_IFREG || kind == SFlag::S_IFBLK,
            _ => {
                let flags = named(fcntl(fd, FcntlArg::F_GETFL), "fcntl(F_GETFL)")?;
                kind == SFlag::S_IFREG && OFlag::from_bits_truncate(flags).contains(OFlag::O_APPEND)
            }
        };
        if !relayed {
            continue;
        }
        ids[i] = Some((st.st_dev, st.st_ino));
        // stdout and stderr on one file (>>f 2>&1): one pipe, so their order is the task's.
        if stream == 2
            && ids[1] == ids[2]
            && let Some(out) = &task_ends[1]
        {
            task_ends[2] = Some(named(out.try_clone().map_err(errno), "dup")?);
            continue;
        }
        let (ours, theirs) = pipe(owner, stream != 0)?;
        let input = match stream {
            0 => {
                let start = nix::unistd::lseek(fd, 0, nix::unistd::Whence::SeekCur).ok();
                Some(Input {
                    start,
                    next: start.unwrap_or(0),
                    pending: Vec::new(),
                    peek: named(theirs.try_clone().map_err(errno), "dup")?,
                })
            }
            _ => None,
        };
        relays.push(Relay {
            stream,
            pipe: Some(ours),
            input,
        });
        task_ends[i] = Some(theirs);
    }
    Ok(Plan { relays, task_ends })
}

/// A pipe between the launcher and the task: (the launcher's end, which never blocks; the
/// task's end). `ours_reads`: the launcher reads (the task's output) rather than writes.
/// `owner`: the task's host uid and gid when the launcher runs as root, so the task may reopen
/// its end (/dev/stdout), as it may a pipe its caller made.
pub fn pipe(owner: Option<(u32, u32)>, ours_reads: bool) -> Result<(OwnedFd, OwnedFd), Failure> {
    let (r, w) = named(nix::unistd::pipe2(OFlag::O_CLOEXEC), "pipe2(O_CLOEXEC)")?;
    let (ours, theirs) = if ours_reads { (r, w) } else { (w, r) };
    named(
        fcntl(&ours, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)),
        "fcntl(<pipe>, F_SETFL, O_NONBLOCK)",
    )?;
    if let Some((uid, gid)) = owner {
        let (uid, gid) = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)));
        named(nix::unistd::fchown(&ours, uid, gid), "fchown(<pipe>)")?;
    }
    Ok((ours, theirs))
}

/// With an output relay, the launcher writes the task's output into the caller's file, so the
/// task's --file-size (`max`) must bound the launcher's writes: its soft RLIMIT_FSIZE is
/// lowered to it, and SIGXFSZ ignored (a write past it fails with EFBIG, which ends that
/// relay, and the task's next write gets EPIPE, or SIGPIPE). Called after clone3: the sandbox
/// sets its own limits.
pub fn limit_writes(relays: &[Relay], max: Option<u64>) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if !relays.iter().any(|r| !r.feeds()) {
        return;
    }
    crate::sys::ignore_signal(nix::sys::signal::Signal::SIGXFSZ);
    if let (Some(max), Ok((soft, hard))) = (max, getrlimit(Resource::RLIMIT_FSIZE))
        && max < soft
    {
        let _ = setrlimit(Resource::RLIMIT_FSIZE, max, hard);
    }
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

fn named<T>(r: nix::Result<T>, call: &str) -> Result<T, Failure> {
    r.map_err(|e| Failure::Setup(format!("step 1: {call}: {e}")))
}

impl Relay {
    /// Whether the launcher feeds the pipe (stdin) rather than drains it.
    fn feeds(&self) -> bool {
        self.stream == 0
    }

    /// What to poll for, while the relay moves data.
    pub fn poll_fd(&self) -> Option<PollFd<'_>> {
        let events = if self.feeds() {
            PollFlags::POLLOUT
        } else {
            PollFlags::POLLIN
        };
        self.pipe.as_ref().map(|p| PollFd::new(p.as_fd(), events))
    }

    /// Move what is ready, without blocking on the pipe. The relay is done (its pipe end
    /// dropped) at the end of the caller's file (stdin: the task then reads the end of its
    /// input), at the pipe's end (every writer in the sandbox gone), or on an error on either
    /// side, which an output relay reports on airlock's stderr.
    pub fn pump(&mut self) {
        let Some(pipe) = self.pipe.as_ref() else {
            return;
        };
        let caller = std_stream(self.stream);
        let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
        loop {
            let moved = match &mut self.input {
                Some(input) => input.feed(caller, pipe.as_fd()),
                None => match nix::fcntl::splice(pipe.as_fd(), None, caller, None, CHUNK, flags) {
                    // A file opened O_APPEND takes no splice: copy through a buffer.
                    Err(Errno::EINVAL) => copy_out(pipe.as_fd(), caller),
                    other => other,
                },
            };
            match moved {
                Ok(0) => break,
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return,
                Err(e) => {
                    if !self.feeds() {
                        eprintln!(
                            "airlock: {} of the task: writing its file failed: {}",
                            NAMES[self.stream as usize],
                            e.desc()
                        );
                    }
                    break;
                }
            }
        }
        self.pipe = None;
    }
}

impl Input {
    /// Move one chunk from the caller's file into the pipe: the bytes moved, 0 at the file's
    /// end, EAGAIN when the pipe is full. The file is read at `next`, not at the caller's
    /// offset (splice with an offset, or pread); where splice cannot read it (some proc and
    /// sysfs files) through a buffer, which keeps what the pipe would not take.
    fn feed(&mut self, from: BorrowedFd, pipe: BorrowedFd) -> nix::Result<usize> {
        if !self.pending.is_empty() {
            let n = nix::unistd::write(pipe, &self.pending)?;
            self.pending.drain(..n);
            return Ok(n);
        }
        let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
        let spliced = match self.start {
            Some(_) => {
                let mut off = self.next;
                let r = nix::fcntl::splice(from, Some(&mut off), pipe, None, CHUNK, flags);
                self.next = off;
                r
            }
            None => nix::fcntl::splice(from, None, pipe, None, CHUNK, flags),
        };
        if spliced != Err(Errno::EINVAL) {
            return spliced;
        }
        let mut buf = vec![0u8; CHUNK];
        let n = match self.start {
            Some(_) => nix::sys::uio::pread(from, &mut buf, self.next)?,
            None => nix::unistd::read(from, &mut buf)?,
        };
        if n == 0 {
            return Ok(0);
        }
        self.next += n as i64;
        buf.truncate(n);
        self.pending = buf;
        Ok(n)
    }
}

/// One read() from the pipe, all of it write()n to `to`.
fn copy_out(from: BorrowedFd, to: BorrowedFd) -> nix::Result<usize> {
    let mut buf = vec![0u8; CHUNK];
    let n = nix::unistd::read(from, &mut buf)?;
    let mut done = 0;
    while done < n {
        match nix::unistd::write(to, &buf[done..n]) {
            Ok(m) => done += m,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// After the sandbox is gone: move what is left in the task's output pipes (their write ends
/// are all closed by then, so each reads to its end; a pipe still empty but open, a writer
/// outside the sandbox, which nothing should be, is left rather than waited for), and move
/// the caller's stdin offset by what the task took: what was read from the file, less what is
/// still in the pipe or was never written to it.
pub fn finish(relays: &mut [Relay]) {
    for r in relays.iter_mut() {
        if let Some(input) = &r.input {
            if let (Some(start), Ok(unread)) = (input.start, crate::sys::unread_bytes(&input.peek))
            {
                let taken = input.next - start - (input.pending.len() + unread) as i64;
                let _ = nix::unistd::lseek(
                    std_stream(0),
                    start + taken.max(0),
                    nix::unistd::Whence::SeekSet,
                );
            }
            continue;
        }
        loop {
            let ready = r.poll_fd().is_some_and(|mut p| {
                nix::poll::poll(std::slice::from_mut(&mut p), nix::poll::PollTimeout::ZERO) == Ok(1)
            });
            if !ready {
                break;
            }
            r.pump();
        }
    }
}
