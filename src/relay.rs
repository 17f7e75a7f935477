//! The standard streams of a streamed `airlock run` that the task must not hold as they are.
//!
//! A task can reopen any descriptor it holds through /proc/self/fd/N, and the kernel then
//! checks only the file's own permissions against the task's host uid: a stdin redirected
//! read-only from a file reopens for writing, an append-only stdout reopens to truncate, and
//! a directory on a stream is a path into the host's tree. So a stream that is a regular file
//! or a block device reaches the task as a pipe, which the launcher relays to or from the
//! caller's descriptor; a directory is refused. Pipes, sockets and character devices
//! (terminals, /dev/null) go through as they are: reopening one gives nothing the descriptor
//! did not. bwrap mode passes every stream through, as bubblewrap does.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl};
use nix::poll::{PollFd, PollFlags};
use nix::sys::stat::SFlag;
use nix::unistd::{Gid, Uid};

use crate::launch::Failure;
use crate::sys::std_stream;

/// One relayed stream, the launcher's side.
pub struct Relay {
    /// 0, 1 or 2: the caller's descriptor the data comes from or goes to.
    stream: i32,
    /// The launcher's end of the pipe (non-blocking): the write end for stdin, else the read
    /// end. Dropped once the relay is done.
    pipe: Option<OwnedFd>,
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
        let st = named(nix::sys::stat::fstat(std_stream(stream)), "fstat")?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFDIR {
            return Err(Failure::Usage(format!(
                "{} is a directory: airlock run takes files, pipes, sockets and terminals as \
                 standard streams",
                NAMES[i]
            )));
        }
        if kind != SFlag::S_IFREG && kind != SFlag::S_IFBLK {
            continue;
        }
        ids[i] = Some((st.st_dev, st.st_ino));
        // stdout and stderr on one file (2>&1): one pipe, so their order is the task's.
        if stream == 2
            && ids[1] == ids[2]
            && let Some(out) = &task_ends[1]
        {
            task_ends[2] = Some(named(out.try_clone().map_err(errno), "dup")?);
            continue;
        }
        let (ours, theirs) = pipe(owner, stream != 0)?;
        relays.push(Relay {
            stream,
            pipe: Some(ours),
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
    /// side.
    pub fn pump(&mut self) {
        const CHUNK: usize = 64 * 1024;
        let Some(pipe) = self.pipe.as_ref() else {
            return;
        };
        let caller = std_stream(self.stream);
        let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
        loop {
            let moved = if self.feeds() {
                nix::fcntl::splice(caller, None, pipe.as_fd(), None, CHUNK, flags)
            } else {
                match nix::fcntl::splice(pipe.as_fd(), None, caller, None, CHUNK, flags) {
                    // A file opened O_APPEND takes no splice: copy through a buffer.
                    Err(Errno::EINVAL) => copy(pipe.as_fd(), caller),
                    other => other,
                }
            };
            match moved {
                Ok(0) => break,
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return,
                Err(_) => break,
            }
        }
        self.pipe = None;
    }
}

/// One read() from the pipe, all of it write()n to `to`.
fn copy(from: BorrowedFd, to: BorrowedFd) -> nix::Result<usize> {
    let mut buf = vec![0u8; 64 * 1024];
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

/// After the sandbox is gone: move what is left in the task's output pipes. Their write ends
/// are all closed by then, so each reads to its end; a pipe still empty but open (a writer
/// outside the sandbox, which nothing should be) is left rather than waited for.
pub fn drain(relays: &mut [Relay]) {
    for r in relays.iter_mut().filter(|r| !r.feeds()) {
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
