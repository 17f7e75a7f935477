//! The standard streams of a streamed `airlock run` that the task must not hold as they are.
//!
//! A task can reopen any descriptor it holds through /proc/self/fd/N, and the kernel then
//! checks only the file's own permissions against the task's host uid: a stdin redirected
//! read-only from a file reopens for writing, an append-only stdout (a log, with what it held
//! before) reopens for reading or to truncate, and a directory on a stream is a path into the
//! host's tree. So:
//! - a stdin that is a regular file or a block device reaches the task as a pipe that a thread
//!   of the launcher feeds (a read of the file may block: a FUSE or network file, a tracefs
//!   pipe; the launcher's own loop must not). It reads at its own offset (pread), and once
//!   the sandbox is gone the launcher moves the caller's offset by what the task took out of
//!   the pipe: a `while read` loop around airlock keeps its place, as it does with the file
//!   itself;
//! - a stdout or stderr that is a regular file reaches the task as a pipe the launcher drains
//!   into it when the file holds anything already (bytes, or an offset past its start) or is
//!   open for appending: the task could otherwise read what the caller wrote before it (as
//!   `{ echo token; airlock run ...; } > log` or `exec >> log` leave it), overwrite it or
//!   truncate it. The launcher writes no further than the task's --file-size would let the
//!   task write: what goes past it is dropped, the sandbox is killed and the run ends as if
//!   the writer had died of SIGXFSZ (128+25), with a message. An empty file not open for
//!   appending (a fresh `>`) holds nothing the task did not write, and goes through as it is,
//!   seekable, if the task's host uid may open it for writing and does not own it; one it may
//!   not open (a root caller's fresh file: the task is another uid) is relayed too, so that
//!   the task can still write to /dev/stdout and /dev/stderr, as every shell script's `>&2`
//!   spelled `> /dev/stderr` does, and so is one it owns (an unprivileged caller's fresh
//!   file): the owner may fchmod the file through its descriptor, and a task made the
//!   caller's output setuid and world-executable (04755, a program any local user then runs
//!   as the caller), or world-writable;
//! - a pipe (or FIFO) reaches the task as a pipe of the launcher's, which the task's host
//!   uid owns. The caller's own, reopened the other way, would take writes into what the
//!   caller reads next (injected lines in a `while read` loop) through stdin, and give up
//!   what others wrote into it before through stdout, when the task's host uid may open it
//!   (an unprivileged caller's pipes); when it may not (a root caller's, 0600), /dev/stdin,
//!   /dev/stdout and /dev/stderr would not open at all. An
//!   output pipe is moved with splice, waiting for room as the task would have; a stdin pipe
//!   is copied with tee and taken out of the caller's pipe only as far as the task has read,
//!   so the rest stays for the caller, as with the pipe itself. (A task that writes into its
//!   own stdin pipe, reopened for writing, makes that count come out low, never high: the
//!   caller may read again what the task read, but loses nothing and gets nothing it wrote.)
//! - a socket reaches the task as a pipe of the launcher's too. It cannot be reopened, but the
//!   task would hold the caller's socket itself: its shutdown() or setsockopt() outlived the
//!   run, a unix socket carried descriptors (SCM_RIGHTS) both ways, SO_PEERCRED and
//!   getpeername named the caller's peer. Output is read from the pipe and sent with
//!   MSG_DONTWAIT (the socket's O_NONBLOCK is the caller's, not ours to set), a full socket
//!   waited for as a full pipe; a stdin socket is peeked at (MSG_PEEK), copied into the
//!   task's pipe and taken out of the socket only as far as the task has read, as a stdin
//!   pipe is, with no control buffer, so descriptors in flight are closed by the kernel. A
//!   listening socket is refused (exit 2): a pipe cannot accept connections;
//! - a character device other than a terminal or /dev/null reaches the task as a pipe too: it
//!   would reopen with whatever access the device's permissions give the task's host uid (a
//!   caller's write-only `2>/dev/kmsg` reopened for reading gave the host's kernel log, which
//!   the policy's refusal of `syslog` keeps from the task). A stdin device is read as it comes
//!   (what the task did not read of the last chunk is lost, as a device's reads cannot be put
//!   back); an output device is written as a file is, without --file-size, which the kernel
//!   applies to regular files only;
//! - a directory on any stream is refused (exit 2).
//!
//! Terminals and /dev/null are not relayed: /dev/null gives nothing, and a terminal is the
//! caller's own (README, "Known limits"). Each reaches the task as an open file of its own
//! where one can be had (own_description), but a terminal on stdin, which goes as it is.
//! bwrap mode passes every stream through, as bubblewrap does.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::SFlag;
use nix::unistd::{Gid, Uid};

use crate::launch::Failure;
use crate::sys::std_stream;

const CHUNK: usize = 64 * 1024;
/// A relayed pipe stream grows its pipes to PIPE_SIZE (the most an unprivileged process may
/// ask by default: /proc/sys/fs/pipe-max-size) once GROW_AFTER bytes went through: fewer
/// hand-overs per megabyte for a stream (1 GB in 0.33-0.56 s instead of 1.7 s for a stdin,
/// whose copies are as large as the caller's pipe holds). Not at once: the kernel counts a
/// pipe's size against its user's pipe-user-pages-soft (64 MiB), past which every new pipe of
/// that user gets 8 KiB, and an agent's many small runs in parallel would get there.
pub const PIPE_SIZE: i32 = 1 << 20;
const GROW_AFTER: u64 = 4 << 20;

/// Count `n` more bytes moved through a stream's pipes, and grow them (see PIPE_SIZE) once
/// GROW_AFTER went through; never shrink one (the caller's stdin pipe outlives the run). A
/// refusal leaves them as they are.
pub fn grow_after(moved: &mut u64, n: usize, pipes: &[BorrowedFd]) {
    if *moved >= GROW_AFTER {
        return;
    }
    *moved += n as u64;
    if *moved < GROW_AFTER {
        return;
    }
    for p in pipes {
        if fcntl(p, FcntlArg::F_GETPIPE_SZ).is_ok_and(|n| n < PIPE_SIZE) {
            let _ = fcntl(p, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
        }
    }
}

/// A relayed stdout or stderr, the launcher's side.
pub struct Relay {
    /// 1 or 2: the caller's descriptor the task's output goes to.
    stream: i32,
    /// The read end of the pipe (non-blocking). Dropped once the relay is done.
    pipe: Option<OwnedFd>,
    /// The caller's file was opened for appending: the task's writes land at its end, not at
    /// the descriptor's offset.
    append: bool,
    /// The caller's stream is a pipe (or FIFO), not a file: moved with splice, and it may be
    /// full.
    to_pipe: bool,
    /// The caller's stream is a socket: read from the pipe into `buf` and sent without
    /// waiting (see `pump_to_socket`).
    to_sock: bool,
    /// The caller's pipe or socket was full at the last move: wait until it has room.
    blocked: bool,
    /// A socket relay: the bytes of `buf` read from the pipe and not yet sent (from, to).
    held: (usize, usize),
    /// A socket relay: the most bytes one send() may carry. A message socket (SOCK_SEQPACKET,
    /// SOCK_DGRAM) refuses a message larger than its send buffer (EMSGSIZE), and this is
    /// halved until one fits.
    most: usize,
    /// Bytes moved into the caller's pipe (up to GROW_AFTER, when the pipe grows).
    moved: u64,
    /// The task's --file-size: the file is not written past it.
    max: Option<u64>,
    /// The output went past `max`, and the rest was dropped.
    cut: bool,
    /// Writing to the caller's stream failed (a full disk, an I/O error, a device that takes
    /// nothing): what the task wrote after it was not delivered.
    failed: bool,
    buf: Vec<u8>,
}

/// A relayed stdin, the launcher's side: the thread that feeds the pipe, once started, and
/// what it takes to give the caller's file offset back at the end.
pub struct Feed {
    /// Where the caller's offset stood; None for a file without one (a block device that
    /// refuses lseek): then it is read as it comes, and the offset moves as it does.
    start: Option<i64>,
    /// The caller's stdin is a pipe (or FIFO): copied with tee, and taken out of it only as
    /// far as the task has read (see `feed_pipe`).
    from_pipe: bool,
    /// The caller's stdin is a socket: peeked at, and taken out of it only as far as the task
    /// has read (see `feed_socket`).
    from_sock: bool,
    /// The write end of the pipe, until the thread takes it.
    pipe: Option<OwnedFd>,
    /// A read end of the pipe kept for FIONREAD: how much the task has not taken yet.
    peek: OwnedFd,
    progress: Arc<Mutex<Progress>>,
}

/// How far the feeding thread has gone: the next byte to read (from `start`), and how many of
/// the bytes read are not in the pipe yet. Changed only with the lock held, after the read or
/// write it counts, so the two always agree with the pipe.
#[derive(Default)]
struct Progress {
    next: i64,
    pending: usize,
    /// A pipe source: bytes copied into the task's pipe and not yet taken out of the caller's.
    given: usize,
    /// The sandbox is gone: a pipe source's thread takes nothing more out of the caller's pipe.
    stop: bool,
}

/// What to do with the caller's streams: the launcher's relays, and for each of fds 0-2 the
/// descriptor the task gets instead (`None`: the stream as it is), and whether that is a
/// relay's pipe (else the task still reaches the caller's file).
pub struct Plan {
    pub relays: Vec<Relay>,
    pub feed: Option<Feed>,
    pub task_ends: [Option<OwnedFd>; 3],
    pub relayed: [bool; 3],
}

impl Plan {
    /// Every stream as it is (bwrap mode, JSON mode).
    pub fn none() -> Plan {
        Plan {
            relays: Vec::new(),
            feed: None,
            task_ends: [None, None, None],
            relayed: [false; 3],
        }
    }
}

const NAMES: [&str; 3] = ["stdin", "stdout", "stderr"];

/// Decide for each stream. A directory on a stream is refused (bad input, exit 2). `owner`:
/// as for `pipe`; `max`: the task's --file-size.
pub fn plan(owner: Option<(u32, u32)>, max: Option<u64>) -> Result<Plan, Failure> {
    let task = owner.unwrap_or_else(|| {
        let (u, g) = (nix::unistd::geteuid(), nix::unistd::getegid());
        (u.as_raw(), g.as_raw())
    });
    let mut plan = Plan::none();
    let mut ids = [None; 3];
    for stream in 0..3 {
        let i = stream as usize;
        let fd = std_stream(stream);
        let st = named(nix::sys::stat::fstat(fd), "fstat")?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        // An O_PATH descriptor names a file without opening it: the task could not read or
        // write it, but could open its file through /proc/self/fd.
        if crate::sys::path_only_at_start(stream) {
            return Err(Failure::Usage(format!(
                "{} is an O_PATH descriptor, which can be neither read nor written: give the \
                 task a file opened for {}, a pipe, a socket or a terminal",
                NAMES[i],
                ["reading", "writing", "writing"][i]
            )));
        }
        if kind == SFlag::S_IFDIR {
            return Err(Failure::Usage(format!(
                "{} is a directory: airlock run takes files, pipes, sockets and terminals as \
                 standard streams",
                NAMES[i]
            )));
        }
        // A pipe the task's host uid may open (an unprivileged caller's) would reopen the
        // other way: a stdin to write into what the caller reads next (the rest of a `while
        // read` loop's input), a stdout to read what others wrote to it. One it may not (a
        // root caller's, 0600) would not reopen at all: no /dev/stdout, /dev/stderr.
        let to_pipe = kind == SFlag::S_IFIFO;
        // A socket, which cannot be reopened, is still the caller's own socket, not only a
        // descriptor of it: the task's shutdown() or setsockopt() on it outlived the run, a
        // unix socket carries descriptors (SCM_RIGHTS) both ways, and SO_PEERCRED or
        // getpeername name the caller's peer. A listening one (socket activation) would let
        // the task accept connections its network namespace keeps from it; it cannot be
        // relayed, and is refused.
        let sock = kind == SFlag::S_IFSOCK;
        // A character device but a terminal or /dev/null (see the module's comment).
        let device = kind == SFlag::S_IFCHR
            && st.st_rdev != nix::sys::stat::makedev(1, 3)
            && !nix::unistd::isatty(fd).unwrap_or(false);
        if sock
            && nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::AcceptConn)
                .unwrap_or(false)
        {
            return Err(Failure::Usage(format!(
                "{} is a listening socket: airlock run relays a socket on a standard stream \
                 through a pipe, which cannot accept connections (give the task `{}`, or use \
                 bwrap mode, which passes every stream as it is)",
                NAMES[i],
                ["< /dev/null", "> /dev/null", "2> /dev/null"][i]
            )));
        }
        let mut append = false;
        let relayed = match stream {
            _ if to_pipe || sock || device => true,
            0 => kind == SFlag::S_IFREG || kind == SFlag::S_IFBLK,
            _ if kind != SFlag::S_IFREG => false,
            _ => {
                let flags = named(fcntl(fd, FcntlArg::F_GETFL), "fcntl(F_GETFL)")?;
                append = OFlag::from_bits_truncate(flags).contains(OFlag::O_APPEND);
                // The file's owner may also change its mode, owner group, ACL and inode flags
                // through the descriptor: a task of that uid could make the caller's output
                // setuid and world-executable, a program any local user then runs as the
                // caller. Such a file is relayed too (an unprivileged caller's own `>`).
                append
                    || st.st_size > 0
                    || position(fd) > 0
                    || !may_write(&st, task)
                    || st.st_uid == task.0
            }
        };
        if !relayed {
            plan.task_ends[i] = own_description(stream, fd, &st);
            continue;
        }
        plan.relayed[i] = true;
        ids[i] = Some((st.st_dev, st.st_ino));
        // stdout and stderr on one file (>>f 2>&1): one pipe, so their order is the task's.
        if stream == 2
            && ids[1] == ids[2]
            && let Some(out) = &plan.task_ends[1]
        {
            plan.task_ends[2] = Some(named(
                out.try_clone().map_err(|e| crate::sys::errno_of(&e)),
                "dup",
            )?);
            continue;
        }
        let (ours, theirs) = pipe(owner, stream != 0)?;
        if stream == 0 {
            let start = match to_pipe || sock || device {
                true => None,
                false => nix::unistd::lseek(fd, 0, nix::unistd::Whence::SeekCur).ok(),
            };
            plan.feed = Some(Feed {
                start,
                from_pipe: to_pipe,
                from_sock: sock,
                peek: named(
                    theirs.try_clone().map_err(|e| crate::sys::errno_of(&e)),
                    "dup",
                )?,
                pipe: Some(ours),
                progress: Arc::new(Mutex::new(Progress {
                    next: start.unwrap_or(0),
                    ..Progress::default()
                })),
            });
        } else {
            plan.relays.push(Relay {
                stream,
                pipe: Some(ours),
                append,
                to_pipe,
                to_sock: sock,
                blocked: false,
                held: (0, 0),
                most: usize::MAX,
                moved: 0,
                max: max.filter(|_| !device),
                cut: false,
                failed: false,
                buf: Vec::new(),
            });
        }
        plan.task_ends[i] = Some(theirs);
    }
    Ok(plan)
}

/// A description of the task's own for a stream it gets unrelayed, where one can be had: its
/// file status flags, locks and owner (F_SETOWN) are then the task's alone, and end with it.
/// /dev/null is opened afresh, with the caller's access mode (a task's `flock` on the caller's
/// /dev/null outlived the run, and every host process locking /dev/null then waited). A
/// terminal on stdout or stderr is reopened write-only through /proc/self/fd: a shell opens its
/// terminal read-write and copies it to 0-2, so the task read what was typed there, before
/// the shell could, through `read(1, ...)` or `read(2, ...)`. One the launcher cannot reopen
/// (another uid's console) goes as it is, as stdin's terminal does, and so do the device
/// numbers that stand for another terminal at each open (INDIRECT): opened again, /dev/ptmx
/// makes a new pty (the output would go nowhere), and /dev/tty, /dev/tty0 and /dev/console
/// lead to whatever terminal the launcher controls, or the kernel's console is, by then (the
/// sign-off review: a caller's `>/dev/tty` fd, opened before a `script` session, sent the
/// task's output into that session's log). None: the stream as it is.
fn own_description(stream: i32, fd: BorrowedFd, st: &libc::stat) -> Option<OwnedFd> {
    use nix::sys::stat::makedev;
    const INDIRECT: [(u64, u64); 4] = [(5, 0), (5, 1), (5, 2), (4, 0)];
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFCHR
        || INDIRECT
            .iter()
            .any(|&(major, minor)| st.st_rdev == makedev(major, minor))
    {
        return None;
    }
    let access = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).ok()?) & OFlag::O_ACCMODE;
    let open = |path: &str, flags: OFlag| {
        let flags = flags | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty()).ok()
    };
    // /dev/null, the plain launch's streams: one open, nothing to check.
    if st.st_rdev == makedev(1, 3) {
        return open("/dev/null", access);
    }
    if stream == 0 || access == OFlag::O_RDONLY || !nix::unistd::isatty(fd).unwrap_or(false) {
        return None;
    }
    // O_NONBLOCK: a serial line without carrier (modem control on) would hold the open; the
    // task gets the description blocking, as the caller's was.
    let own = open(
        &format!("/proc/self/fd/{stream}"),
        OFlag::O_WRONLY | OFlag::O_NONBLOCK,
    )?;
    fcntl(&own, FcntlArg::F_SETFL(OFlag::empty())).ok()?;
    // The same device, or the stream as it is.
    let same = nix::sys::stat::fstat(&own).is_ok_and(|o| o.st_rdev == st.st_rdev);
    same.then_some(own)
}

/// The file status flags (`O_NONBLOCK`, `O_APPEND`, `O_ASYNC`, `O_DIRECT`, `O_NOATIME`) and
/// the permission bits and group of the standard streams the task gets as they are. The flags
/// belong to the open file description, which the task shares with the caller: a task's
/// `fcntl(1, F_SETFL, O_NONBLOCK)` on the caller's terminal (or socket, before sockets were
/// relayed) outlived the run, and the caller's next writes there failed with EAGAIN ("write
/// error: Resource temporarily unavailable"); an `O_DIRECT` on a fresh `>` file made its next
/// unaligned writes fail with EINVAL. The mode and group belong to the file itself, which a task of its owner's uid may
/// fchmod and chgrp (to its own group): an unprivileged caller's terminal, left 0666 or 04777
/// by a task, stayed open to every local user after the run. All are put back once the
/// sandbox is gone. So is the position in a regular file, which the open file description
/// holds too: one the task left past the file's end (`lseek` is not bound by --file-size) would
/// put the caller's next write there, after a hole: under `--file-size 1M` a task made the
/// caller's `echo after` write at 1 TiB.
///
/// The modes of a terminal among them are kept too, for a task that dies by a signal: a shell
/// puts its terminal's modes back after a job killed so, not after one that exits, and
/// airlock exits (128+N) where its task was killed, so a REPL killed in raw mode (a second
/// Ctrl-C, Ctrl-\, the timeout) left the caller's terminal without echo or line editing.
pub struct StreamFlags {
    saved: [Option<(OFlag, Option<ModeGroup>)>; 3],
    terminal: Option<(i32, nix::sys::termios::Termios)>,
}

/// The permission bits (and setuid, setgid, sticky) and the group of a file.
type ModeGroup = (u32, u32);

/// The permission bits and the group of a descriptor's file.
fn mode_of(fd: BorrowedFd) -> Option<ModeGroup> {
    nix::sys::stat::fstat(fd).ok().as_ref().map(mode_group)
}

fn mode_group(st: &libc::stat) -> ModeGroup {
    (st.st_mode & 0o7777, st.st_gid)
}

impl StreamFlags {
    /// Read the flags, mode and group of each stream the task reaches unrelayed (`relayed`
    /// false), as it is or through a description of its own: the mode and group, and a
    /// terminal's modes, belong to the file.
    pub fn save(relayed: &[bool; 3]) -> StreamFlags {
        let mut saved = [None; 3];
        let mut terminal = None;
        for (i, relayed) in relayed.iter().enumerate() {
            if !relayed {
                let fd = std_stream(i as i32);
                let st = nix::sys::stat::fstat(fd).ok();
                saved[i] = fcntl(fd, FcntlArg::F_GETFL)
                    .ok()
                    .map(|f| (OFlag::from_bits_retain(f), st.as_ref().map(mode_group)));
                // Only a character device but /dev/null may be a terminal: no ioctl for the
                // pipes, files and /dev/null of most launches.
                let device = st.is_some_and(|st| {
                    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFCHR
                        && st.st_rdev != nix::sys::stat::makedev(1, 3)
                });
                if terminal.is_none() && device {
                    terminal = nix::sys::termios::tcgetattr(fd).ok().map(|t| (i as i32, t));
                }
            }
        }
        StreamFlags { saved, terminal }
    }

    /// Put back the terminal's modes after a task that died by a signal, as a shell does
    /// after such a job; only while airlock is in the terminal's foreground (a background
    /// process that sets them is stopped by SIGTTOU), and only where they changed.
    pub fn restore_terminal(&self) {
        use nix::sys::termios::{SetArg, tcgetattr, tcsetattr};
        let Some((i, modes)) = &self.terminal else {
            return;
        };
        let fd = std_stream(*i);
        let foreground = nix::unistd::tcgetpgrp(fd).is_ok_and(|g| g == nix::unistd::getpgrp());
        if foreground && tcgetattr(fd).is_ok_and(|now| now != *modes) {
            let _ = tcsetattr(fd, SetArg::TCSADRAIN, modes);
        }
    }

    /// Put back the flags, group and mode of each stream where the task changed them. A failure
    /// (a flag the kernel no longer lets this process set) leaves that stream as the task left
    /// it, but for the group: a caller outside the file's old group (a terminal's `tty`) cannot
    /// give it back, and the file then loses its group's permissions instead.
    pub fn restore(&self) {
        for (i, saved) in self.saved.iter().enumerate() {
            let Some((flags, meta)) = saved else { continue };
            let fd = std_stream(i as i32);
            if fcntl(fd, FcntlArg::F_GETFL).map(OFlag::from_bits_retain) != Ok(*flags) {
                let _ = fcntl(fd, FcntlArg::F_SETFL(*flags));
            }
            let Ok(st) = nix::sys::stat::fstat(fd) else {
                continue;
            };
            move_back_to_the_end(fd, &st);
            let Some((mut mode, gid)) = *meta else {
                continue;
            };
            let mut now = st.st_mode & 0o7777;
            if st.st_gid != gid {
                match nix::unistd::fchown(fd, None, Some(Gid::from_raw(gid))) {
                    // fchown may have cleared the setuid and setgid bits: read them afresh.
                    Ok(()) => now = mode_of(fd).map_or(now, |(m, _)| m),
                    Err(_) => mode &= !0o070,
                }
            }
            if now != mode {
                let _ = nix::sys::stat::fchmod(fd, nix::sys::stat::Mode::from_bits_retain(mode));
            }
        }
    }
}

/// Move the position in a regular file (`st`, its status) that lies past the file's end back
/// to the end (a terminal, socket or device has none to move).
fn move_back_to_the_end(fd: BorrowedFd, st: &libc::stat) {
    use nix::unistd::{Whence, lseek};
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return;
    }
    if lseek(fd, 0, Whence::SeekCur).is_ok_and(|pos| pos > st.st_size) {
        let _ = lseek(fd, 0, Whence::SeekEnd);
    }
}

/// Whether the task's host (uid, gid) may open the file for writing, by its mode bits (an ACL
/// that grants more makes a relay that was not needed, never a missing one).
fn may_write(st: &libc::stat, (uid, gid): (u32, u32)) -> bool {
    let bit = match () {
        _ if st.st_uid == uid => 0o200,
        _ if st.st_gid == gid => 0o020,
        _ => 0o002,
    };
    st.st_mode & bit != 0
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
        nix::unistd::fchown(&ours, uid, gid).map_err(|errno| {
            let hint = match errno {
                Errno::EINVAL => format!(
                    "; hint: the task's host uid and gid ({}:{}, --host-uid and --host-gid) are \
                     not both mapped in the user namespace airlock runs in (/proc/self/uid_map \
                     and gid_map), as under `unshare -r`",
                    uid.map_or(0, |u| u.as_raw()),
                    gid.map_or(0, |g| g.as_raw())
                ),
                _ => String::new(),
            };
            Failure::Setup(format!("step 1: fchown(<pipe>): {errno}{hint}"))
        })?;
    }
    Ok((ours, theirs))
}

/// The descriptor's offset; 0 for one that has none (lseek refused).
fn position(fd: BorrowedFd) -> i64 {
    nix::unistd::lseek(fd, 0, nix::unistd::Whence::SeekCur).unwrap_or(0)
}

fn named<T>(r: nix::Result<T>, call: &str) -> Result<T, Failure> {
    r.map_err(|e| Failure::Setup(format!("step 1: {call}: {e}")))
}

impl Relay {
    /// What to poll for, while the relay moves data: the task's output, or room in the
    /// caller's pipe once it was full.
    pub fn poll_fd(&self) -> Option<PollFd<'_>> {
        let pipe = self.pipe.as_ref()?;
        Some(match self.blocked {
            true => PollFd::new(std_stream(self.stream), PollFlags::POLLOUT),
            false => PollFd::new(pipe.as_fd(), PollFlags::POLLIN),
        })
    }

    /// The task's output went past its --file-size.
    pub fn cut(&self) -> bool {
        self.cut
    }

    /// Writing the task's output to the caller's stream failed (not a reader that left).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Move what is ready (up to 1 MiB), without blocking on the pipe. The relay is done (its pipe end
    /// dropped) at the pipe's end (every writer in the sandbox gone), at the --file-size cut,
    /// or on an error writing the caller's file; those two are reported on airlock's stderr.
    pub fn pump(&mut self) {
        if self.to_pipe {
            return self.pump_to_pipe();
        }
        if self.buf.is_empty() {
            self.buf = vec![0u8; CHUNK];
        }
        if self.to_sock {
            return self.pump_to_socket();
        }
        let Some(pipe) = self.pipe.as_ref() else {
            return;
        };
        let to = std_stream(self.stream);
        let name = NAMES[self.stream as usize];
        // At most 1 MiB a call, so that a writer as fast as the file does not keep the
        // launcher's loop from its signals and deadline.
        for _ in 0..16 {
            match copy_out(pipe.as_fd(), to, &mut self.buf, self.max, self.append) {
                Ok(0) => {}
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return,
                Err(Errno::EFBIG) => {
                    self.cut = true;
                    // The task's --file-size, or the caller's own soft limit where that is
                    // lower: this launcher writes under it (the task's is set from the hard
                    // one), and had named the larger one it did not reach.
                    let own =
                        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE)
                            .map_or(u64::MAX, |(soft, _)| soft);
                    let max = Some(self.max.map_or(own, |m| m.min(own)))
                        .filter(|&m| m != u64::MAX)
                        .map(|m| format!(" ({m} bytes)"))
                        .unwrap_or_default();
                    say_if_room(&format!(
                        "airlock: {name} of the task: its file reached the file size limit{max}: \
                         the rest was not written, and the sandbox was stopped\n"
                    ));
                }
                Err(e) => {
                    self.failed = true;
                    say_if_room(&format!(
                        "airlock: {name} of the task: writing its file failed: {}\n",
                        e.desc()
                    ));
                }
            }
            self.pipe = None;
            return;
        }
    }
}

impl Relay {
    /// [`Relay::pump`] into the caller's pipe: splice, which never blocks on either pipe
    /// (the caller's may be shared, so its O_NONBLOCK is not ours to set). A full caller's
    /// pipe is waited for by poll; a caller's pipe with no reader left ends the relay, and
    /// the task's next write fails with EPIPE, as it would have.
    fn pump_to_pipe(&mut self) {
        let Some(pipe) = self.pipe.as_ref() else {
            return;
        };
        let to = std_stream(self.stream);
        // At most 16 moves a call, as pump: the launcher's loop keeps its signals and deadline.
        for moves in 1.. {
            let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
            match nix::fcntl::splice(pipe, None, to, None, PIPE_SIZE as usize, flags) {
                Ok(0) => break,
                Ok(n) => {
                    self.blocked = false;
                    grow_after(&mut self.moved, n, &[pipe.as_fd()]);
                    if moves == 16 {
                        return;
                    }
                }
                Err(Errno::EINTR) => {}
                // Nothing to move, or no room: which one, the task's pipe tells. An empty
                // pipe with no writer left is at its end: splice checks the caller's pipe for
                // room before it returns that end, so a full one gives EAGAIN there too, and
                // polling the task's pipe (POLLHUP at once) would spin.
                Err(Errno::EAGAIN) => {
                    let hung_up = crate::sys::hung_up(pipe.as_fd());
                    let unread = crate::sys::unread_bytes(pipe).unwrap_or(0);
                    if hung_up && unread == 0 {
                        break;
                    }
                    self.blocked = unread > 0;
                    return;
                }
                Err(Errno::EPIPE) => break,
                Err(e) => {
                    self.failed = true;
                    say_if_room(&format!(
                        "airlock: {} of the task: writing to its pipe failed: {}\n",
                        NAMES[self.stream as usize],
                        e.desc()
                    ));
                    break;
                }
            }
        }
        self.pipe = None;
    }
}

impl Relay {
    /// [`Relay::pump`] into the caller's socket: read from the pipe into `buf`, then sent
    /// with MSG_DONTWAIT (the socket's own O_NONBLOCK is the caller's, shared, and not ours
    /// to set: splice into a blocking socket would block the launcher's loop) and
    /// MSG_NOSIGNAL. What a partial send left is kept for the next call; a full socket is
    /// waited for by poll, as a full pipe. A message socket gets messages no larger than it
    /// takes (`most`). A socket whose peer is gone (EPIPE, ECONNRESET)
    /// ends the relay, and the task's next write fails with EPIPE, as with a pipe; the
    /// --file-size cut does not apply, as it does not to a pipe.
    fn pump_to_socket(&mut self) {
        use nix::sys::socket::{MsgFlags, send};
        let Some(pipe) = self.pipe.as_ref() else {
            return;
        };
        let to = std_stream(self.stream);
        let name = NAMES[self.stream as usize];
        // At most 16 reads a call, as pump: the launcher's loop keeps its signals and deadline.
        let mut reads = 0;
        loop {
            if self.held.0 == self.held.1 {
                if reads == 16 {
                    return;
                }
                reads += 1;
                match nix::unistd::read(pipe, &mut self.buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        self.held = (0, n);
                        grow_after(&mut self.moved, n, &[pipe.as_fd()]);
                        if self.moved >= GROW_AFTER && self.buf.len() < PIPE_SIZE as usize / 4 {
                            self.buf.resize(PIPE_SIZE as usize / 4, 0);
                        }
                    }
                    Err(Errno::EINTR) => continue,
                    Err(Errno::EAGAIN) => {
                        self.blocked = false;
                        return;
                    }
                    Err(e) => {
                        say_if_room(&format!(
                            "airlock: {name} of the task: reading its pipe failed: {}\n",
                            e.desc()
                        ));
                        break;
                    }
                }
            }
            let (from, upto) = self.held;
            let upto = upto.min(from.saturating_add(self.most));
            let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
            match send(to.as_raw_fd(), &self.buf[from..upto], flags) {
                Ok(m) => {
                    self.held.0 += m;
                    self.blocked = false;
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => {
                    self.blocked = true;
                    return;
                }
                // A message socket's message is larger than its send buffer: send less.
                Err(Errno::EMSGSIZE) if upto - from > 1 => self.most = (upto - from) / 2,
                Err(Errno::EPIPE | Errno::ECONNRESET) => break,
                Err(e) => {
                    self.failed = true;
                    say_if_room(&format!(
                        "airlock: {name} of the task: writing to its socket failed: {}\n",
                        e.desc()
                    ));
                    break;
                }
            }
        }
        self.held = (0, 0);
        self.pipe = None;
    }
}

/// One read() from the pipe, written to `to`: as much of it as keeps the writes within `max`
/// (counted from where each write lands, as RLIMIT_FSIZE counts them: the file's end for an
/// appending writer, the descriptor's offset for another), and EFBIG if that was not all.
fn copy_out(
    from: BorrowedFd,
    to: BorrowedFd,
    buf: &mut [u8],
    max: Option<u64>,
    append: bool,
) -> nix::Result<usize> {
    let n = nix::unistd::read(from, buf)?;
    let room = match max {
        Some(max) if n > 0 => {
            let at = match append {
                true => nix::sys::stat::fstat(to)?.st_size,
                false => nix::unistd::lseek(to, 0, nix::unistd::Whence::SeekCur)?,
            };
            max.saturating_sub(at as u64)
        }
        _ => u64::MAX,
    };
    let keep = n.min(usize::try_from(room).unwrap_or(usize::MAX));
    let mut done = 0;
    while done < keep {
        match nix::unistd::write(to, &buf[done..keep]) {
            Ok(m) => done += m,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    if keep < n {
        return Err(Errno::EFBIG);
    }
    Ok(n)
}

impl Feed {
    /// Start the thread that feeds the task's stdin (after clone3). It blocks on the caller's
    /// file and on the pipe as it must, and ends at the file's end (the task then reads the end
    /// of its input), on an error, or with the launcher.
    pub fn start(&mut self) -> std::io::Result<()> {
        let (Some(pipe), start) = (self.pipe.take(), self.start) else {
            return Ok(());
        };
        let progress = Arc::clone(&self.progress);
        let (from_pipe, from_sock) = (self.from_pipe, self.from_sock);
        std::thread::Builder::new()
            .spawn(move || match (from_pipe, from_sock) {
                (true, _) => feed_pipe(pipe, &progress),
                (_, true) => feed_socket(pipe, &progress),
                _ => feed(pipe, start, &progress),
            })
            .map(drop)
    }

    /// After the sandbox is gone: move the caller's stdin offset by what the task took, that
    /// is what was read from the file, less what is still in the pipe or was never written to
    /// it.
    pub fn finish(&self) {
        if self.from_pipe || self.from_sock {
            // What the task read of the last copy comes out of the caller's pipe or socket;
            // the thread takes nothing more.
            let mut p = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            p.stop = true;
            if let Ok(unread) = crate::sys::unread_bytes(&self.peek) {
                let n = p.given.saturating_sub(unread);
                take_out(n, &mut vec![0u8; CHUNK], self.from_sock);
            }
            return;
        }
        let Some(start) = self.start else {
            return;
        };
        let p = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        if let Ok(unread) = crate::sys::unread_bytes(&self.peek) {
            let taken = p.next - start - (p.pending + unread) as i64;
            let _ = nix::unistd::lseek(
                std_stream(0),
                start + taken.max(0),
                nix::unistd::Whence::SeekSet,
            );
        }
    }
}

/// The feeding thread: read a chunk at the relay's own offset (or as it comes, without one),
/// then write it into the pipe as the task makes room.
fn feed(pipe: OwnedFd, start: Option<i64>, progress: &Mutex<Progress>) {
    let from = std_stream(0);
    let mut buf = vec![0u8; CHUNK];
    let mut next = start.unwrap_or(0);
    loop {
        let read = match start {
            Some(_) => nix::sys::uio::pread(from, &mut buf, next),
            None => nix::unistd::read(from, &mut buf),
        };
        let n = match read {
            Ok(0) => return,
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(_) => return,
        };
        next += n as i64;
        let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
        (p.next, p.pending) = (next, n);
        drop(p);
        let mut done = 0;
        while done < n {
            let mut room = [PollFd::new(pipe.as_fd(), PollFlags::POLLOUT)];
            let _ = nix::poll::poll(&mut room, PollTimeout::NONE);
            let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
            match nix::unistd::write(&pipe, &buf[done..n]) {
                Ok(m) => {
                    done += m;
                    p.pending -= m;
                }
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    }
}

/// Wait for data in the caller's stdin `from`, then for room in the task's `pipe`; false on
/// an error that ends the feed.
fn ready_to_copy(from: BorrowedFd, pipe: BorrowedFd) -> bool {
    for (fd, events) in [(from, PollFlags::POLLIN), (pipe, PollFlags::POLLOUT)] {
        let mut ready = [PollFd::new(fd, events)];
        match nix::poll::poll(&mut ready, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Wait until the task has read all its `pipe` holds: checked every 20 µs while it reads, up
/// to every 20 ms while it does not. False on an error that ends the feed.
fn read_by_the_task(pipe: &OwnedFd) -> bool {
    let (mut nap, mut last) = (Duration::from_micros(20), usize::MAX);
    loop {
        match crate::sys::unread_bytes(pipe) {
            Ok(0) => return true,
            Ok(left) => {
                nap = match left < last {
                    true => Duration::from_micros(20),
                    false => (nap * 2).min(Duration::from_millis(20)),
                };
                last = left;
                std::thread::sleep(nap);
            }
            Err(_) => return false,
        }
    }
}

/// The feeding thread for a pipe: tee copies what the caller's pipe holds into the task's
/// pipe without taking it out; once the task has read all of it, as much is taken out of the
/// caller's pipe and the next copy is made. So the caller's pipe loses exactly what the task
/// read, and the rest stays for whoever reads it next (a `while read` loop around airlock), as
/// with the pipe itself. One copy (up to 64 KiB) at a time waits in the task's pipe.
fn feed_pipe(pipe: OwnedFd, progress: &Mutex<Progress>) {
    let from = std_stream(0);
    feed_copies(pipe, progress, false, |pipe, _buf| {
        nix::fcntl::tee(
            from,
            pipe,
            PIPE_SIZE as usize,
            SpliceFFlags::SPLICE_F_NONBLOCK,
        )
    })
}

/// The feeding thread for a socket, as [`feed_pipe`] for a pipe: recv(MSG_PEEK) shows the
/// head of what the socket holds without taking it; as much of it as the task's pipe has
/// room for (all of it: the pipe is empty then) is written there; once the task has read all
/// of it, as much is taken out of the socket, and the next head is peeked at. So the caller's
/// socket loses exactly what the task read. Nothing is received with a control buffer:
/// descriptors a unix socket's peer sent (SCM_RIGHTS) are dropped by the kernel with the
/// bytes they came with, never installed anywhere; nor are credentials asked for.
fn feed_socket(pipe: OwnedFd, progress: &Mutex<Progress>) {
    use nix::sys::socket::{MsgFlags, recv};
    let from = std_stream(0);
    feed_copies(pipe, progress, true, |pipe, buf| {
        let room = fcntl(pipe, FcntlArg::F_GETPIPE_SZ)
            .map_or(CHUNK, |n| n as usize)
            .clamp(CHUNK, PIPE_SIZE as usize);
        if buf.len() < room {
            buf.resize(room, 0);
        }
        // EAGAIN: another reader of the socket took it meanwhile (wait again); another error:
        // not connected, or the connection failed (the task reads the end).
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        match recv(from.as_raw_fd(), &mut buf[..room], flags)? {
            0 => Ok(0),
            n => nix::unistd::write(pipe, &buf[..n]),
        }
    })
}

/// The loop both feeding threads share: wait for data and room, `copy` the caller's head into
/// the task's pipe without taking it out (the bytes given, 0 at the end), wait until the task
/// has read all of it, then take as much out of the caller's stdin (`sock`: a socket, whose
/// buffer is not grown as a pipe's is). Counted under the lock with the copy, so finish()
/// never misses a copy the task may have read from.
fn feed_copies(
    pipe: OwnedFd,
    progress: &Mutex<Progress>,
    sock: bool,
    mut copy: impl FnMut(&OwnedFd, &mut Vec<u8>) -> Result<usize, Errno>,
) {
    let from = std_stream(0);
    let mut buf = vec![0u8; CHUNK];
    let mut copied = 0u64;
    loop {
        // Data in the caller's stream, then room in the task's pipe: a task that filled its
        // own stdin pipe (reopened for writing) makes tee fail with EAGAIN, which must not spin.
        if !ready_to_copy(from, pipe.as_fd()) {
            return;
        }
        {
            let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
            if p.stop {
                return;
            }
            match copy(&pipe, &mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    p.given = n;
                    let grow = [from, pipe.as_fd()];
                    grow_after(&mut copied, n, &grow[sock as usize..]);
                }
                Err(Errno::EAGAIN | Errno::EINTR) => continue,
                Err(_) => return,
            }
        }
        if !read_by_the_task(&pipe) {
            return;
        }
        let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
        if p.stop {
            return;
        }
        take_out(p.given, &mut buf, sock);
        p.given = 0;
    }
}

/// Take `n` bytes out of the caller's stdin pipe or socket, which holds them (tee copied them
/// from its head, or recv peeked at them); should another reader have taken some meanwhile,
/// stop at what is there. A socket's are received with no control buffer: descriptors that
/// came with them are closed by the kernel.
fn take_out(mut n: usize, buf: &mut [u8], sock: bool) {
    use nix::sys::socket::{MsgFlags, recv};
    let from = std_stream(0);
    let most = buf.len();
    while n > 0 {
        let mut ready = [PollFd::new(from, PollFlags::POLLIN)];
        if nix::poll::poll(&mut ready, PollTimeout::ZERO) != Ok(1) {
            return;
        }
        let got = match sock {
            true => recv(
                from.as_raw_fd(),
                &mut buf[..n.min(most)],
                MsgFlags::MSG_DONTWAIT,
            ),
            false => nix::unistd::read(from, &mut buf[..n.min(most)]),
        };
        match got {
            Ok(0) => return,
            Ok(m) => n -= m,
            Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// Why [`finish`] left output undelivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The run's deadline passed while a caller's pipe stayed full.
    Deadline,
    /// airlock was sent this signal meanwhile.
    Signal(nix::sys::signal::Signal),
}

/// After the sandbox is gone: move what is left in the task's output pipes (their write ends
/// are all closed by then, so each reads to its end; a pipe still empty but open, a writer
/// outside the sandbox, which nothing should be, is left rather than waited for). A caller's
/// pipe that is full is waited for, as the task would have waited for it: until the run's
/// deadline or a signal to airlock (`sigfd`), which end the wait as they would have ended a
/// task blocked on it; what was not delivered is then said on stderr. After a signal that was
/// already forwarded to the sandbox (`signaled`), nothing is waited for. Only the signals that
/// ask the run to end (`launch::asks_to_end`) end the wait: a SIGUSR1 was the task's to handle,
/// and the task is gone.
pub fn finish(
    relays: &mut [Relay],
    deadline: Option<std::time::Instant>,
    sigfd: &nix::sys::signalfd::SignalFd,
    signaled: Option<nix::sys::signal::Signal>,
) -> Option<Stop> {
    // All relays at once: a reader may take stderr before stdout, and waiting on a full
    // stdout alone would keep from it what it waits for.
    loop {
        let blocked = relays.iter().any(|r| r.pipe.is_some() && r.blocked);
        // (The task's end stands: the signal reached it already.)
        if let (true, Some(sig)) = (blocked, signaled) {
            relays.iter_mut().for_each(|r| r.abandon(Stop::Signal(sig)));
            return None;
        }
        let wait = match (blocked, deadline) {
            (false, _) => PollTimeout::ZERO,
            (true, None) => PollTimeout::NONE,
            (true, Some(d)) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                PollTimeout::try_from(left.as_millis().min(i32::MAX as u128) as i32)
                    .unwrap_or(PollTimeout::ZERO)
            }
        };
        let mut fds: Vec<PollFd> = relays.iter().filter_map(Relay::poll_fd).collect();
        if fds.is_empty() {
            return None;
        }
        // Signals matter only while waiting for a caller's reader.
        let events = match blocked {
            true => PollFlags::POLLIN,
            false => PollFlags::empty(),
        };
        fds.push(PollFd::new(sigfd.as_fd(), events));
        let _ = nix::poll::poll(&mut fds, wait);
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|e| !e.is_empty()))
            .collect();
        drop(fds);
        let (moved, signal) = (&ready[..ready.len() - 1], blocked && ready[ready.len() - 1]);
        let stop = if signal {
            match sigfd.read_signal() {
                Ok(Some(info)) => match nix::sys::signal::Signal::try_from(info.ssi_signo as i32) {
                    Ok(sig) if crate::launch::asks_to_end(sig) => Some(Stop::Signal(sig)),
                    // SIGUSR1 and the like were the task's to handle, and the task has ended
                    // (by itself, or by one of them): its output is still delivered.
                    _ => continue,
                },
                _ => None,
            }
        } else if moved.iter().any(|&m| m) {
            // The relays that polled, in order, are those with a pipe.
            let mut flags = moved.iter();
            for r in relays.iter_mut().filter(|r| r.pipe.is_some()) {
                if flags.next() == Some(&true) {
                    r.pump();
                }
            }
            continue;
        } else if blocked {
            // Nothing ready and no deadline passed: an interrupted poll, say after a SIGSTOP
            // and SIGCONT: wait again.
            deadline
                .is_some_and(|d| std::time::Instant::now() >= d)
                .then_some(Stop::Deadline)
        } else {
            return None;
        };
        if let Some(stop) = stop {
            relays.iter_mut().for_each(|r| r.abandon(stop));
            return Some(stop);
        }
    }
}

impl Relay {
    /// Give up on what is left in the pipe, saying so.
    fn abandon(&mut self, why: Stop) {
        let Some(pipe) = self.pipe.take() else {
            return;
        };
        let left = crate::sys::unread_bytes(&pipe).unwrap_or(0) + (self.held.1 - self.held.0);
        if left > 0 {
            let why = match why {
                Stop::Deadline => "the timeout".to_string(),
                Stop::Signal(sig) => format!("{sig}"),
            };
            say_if_room(&format!(
                "airlock: {} of the task: {left} bytes were not delivered: its reader took no \
                 more before {why}\n",
                NAMES[self.stream as usize]
            ));
        }
    }
}

/// Say `line` on airlock's stderr only if it has room now, in one write (the line is shorter
/// than PIPE_BUF, which a pipe that polls writable takes without blocking): the caller's
/// stderr may be the very pipe whose reader took no more (a caller that reads neither
/// stream), and a write blocked there would hold airlock past the run's deadline for good,
/// SIGINT, SIGTERM and SIGHUP being still blocked.
pub fn say_if_room(line: &str) {
    let stderr = std::io::stderr();
    let mut room = [PollFd::new(stderr.as_fd(), PollFlags::POLLOUT)];
    let writable = nix::poll::poll(&mut room, PollTimeout::ZERO).is_ok_and(|n| n > 0)
        && room[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLOUT));
    if writable {
        let _ = nix::unistd::write(stderr.as_fd(), line.as_bytes());
    }
}
