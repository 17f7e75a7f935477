//! The thin layer over raw system calls: the only module allowed to hold `unsafe`.
//!
//! Every call here returns a [`SysError`] that names the syscall and its arguments, so the
//! boundary's code never formats an error by hand and an auditor sees exactly what failed:
//! `mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV): EPERM: Operation not permitted`.
#![allow(unsafe_code)]

pub mod heap;
#[cfg(all(target_env = "musl", target_arch = "x86_64"))]
mod mem;

use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::signal::{SigHandler, Signal};
use nix::unistd::Pid;

/// A failed system call: what was called, with which arguments, and the errno.
#[derive(Debug, Clone)]
pub struct SysError {
    pub call: String,
    pub errno: Errno,
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.call, self.errno)
    }
}

impl std::error::Error for SysError {}

pub type SysResult<T> = Result<T, SysError>;

/// Attach the call's description to a nix result (the one place errors get their names).
pub fn named<T>(r: nix::Result<T>, call: impl FnOnce() -> String) -> SysResult<T> {
    r.map_err(|errno| SysError {
        call: call(),
        errno,
    })
}

/// The errno a std I/O error carries (EIO for one that carries none).
pub fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// A failed std I/O call with the call's description: [`named`] for `std::io` results.
pub fn io_err(e: std::io::Error, call: impl FnOnce() -> String) -> SysError {
    SysError {
        call: call(),
        errno: errno_of(&e),
    }
}

fn last(call: impl FnOnce() -> String) -> SysError {
    SysError {
        call: call(),
        errno: Errno::last(),
    }
}

fn cstr(p: &Path) -> SysResult<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| SysError {
        call: format!("path {p:?} contains a NUL byte"),
        errno: Errno::EINVAL,
    })
}

// ---------------------------------------------------------------------------------------------
// Processes

const CLONE_PIDFD: u64 = 0x1000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of clone3(2), version 2 (with `cgroup`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

pub enum Forked {
    Child,
    Parent { pid: Pid, pidfd: OwnedFd },
}

/// clone3 with fork semantics (the child continues on a copy of this stack), creating the
/// namespaces in `flags` and, if given, starting the child inside the cgroup `cgroup`.
///
/// Callers must be single-threaded: airlock never starts a thread before it launches.
pub fn clone_process(flags: u64, cgroup: Option<BorrowedFd>) -> SysResult<Forked> {
    clone3(flags, cgroup, libc::SIGCHLD as u64)
}

fn clone3(flags: u64, cgroup: Option<BorrowedFd>, exit_signal: u64) -> SysResult<Forked> {
    let mut pidfd: RawFd = -1;
    let mut args = CloneArgs {
        flags: flags | CLONE_PIDFD,
        pidfd: &mut pidfd as *mut RawFd as u64,
        exit_signal,
        ..Default::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd.as_raw_fd() as u64;
    }
    // SAFETY: `args` is a valid clone_args of the size passed; no stack is given, so the child
    // runs on a copy-on-write copy of this single-threaded process, exactly as after fork(2).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match ret {
        -1 => Err(last(|| format!("clone3(flags={:#x})", args.flags))),
        0 => {
            heap::not_the_reporting_process();
            Ok(Forked::Child)
        }
        pid => Ok(Forked::Parent {
            pid: Pid::from_raw(pid as i32),
            // SAFETY: the kernel stored a fresh pidfd that nothing else owns.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
        }),
    }
}

/// [`clone_process`] for a process that has joined another pid namespace (setns) and asks for
/// a new one in `flags`, nested in the joined one. The kernel makes a new pid namespace only
/// for a process whose own pid namespace is the one its children are born in, which setns
/// does not change: a first child, born in the joined namespace, makes the clone with
/// CLONE_PARENT (so the new process is this one's child, as clone_process's is, and signals
/// its end here), hands its pidfd back and exits.
pub fn clone_process_from_joined(flags: u64, cgroup: Option<BorrowedFd>) -> SysResult<Forked> {
    let (mine, theirs) = named(
        nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        ),
        || "socketpair(AF_UNIX, SOCK_SEQPACKET)".into(),
    )?;
    let first = match clone_process(0, None)? {
        Forked::Child => {
            drop(mine);
            // clone3 refuses an exit signal with CLONE_PARENT: the child gets this one's.
            match clone3(flags | libc::CLONE_PARENT as u64, cgroup, 0) {
                Ok(Forked::Child) => {
                    drop(theirs);
                    return Ok(Forked::Child);
                }
                Ok(Forked::Parent { pidfd, .. }) => {
                    let sent = send_fd(theirs.as_raw_fd(), b'P', pidfd.as_raw_fd());
                    exit_now(sent.map_or_else(|e| e as i32, |()| 0))
                }
                Err(e) => exit_now(e.errno as i32),
            }
        }
        Forked::Parent { pid, .. } => pid,
    };
    drop(theirs);
    let failed = |errno| SysError {
        call: format!("clone3(flags={:#x}) from the joined pid namespace", flags),
        errno,
    };
    match named(nix::sys::wait::waitpid(first, None), || {
        format!("waitpid({first}) for the first child in the joined pid namespace")
    })? {
        nix::sys::wait::WaitStatus::Exited(_, 0) => {}
        nix::sys::wait::WaitStatus::Exited(_, e) => return Err(failed(Errno::from_raw(e))),
        _ => return Err(failed(Errno::ECHILD)),
    }
    let pidfd = recv_fd(mine.as_fd()).map_err(failed)?;
    let pid = pid_of_pidfd(pidfd.as_fd())?;
    Ok(Forked::Parent { pid, pidfd })
}

/// One descriptor sent by [`send_fd`].
pub fn recv_fd(sock: BorrowedFd) -> Result<OwnedFd, Errno> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let m = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = m.cmsgs()?.filter_map(|c| match c {
        ControlMessageOwned::ScmRights(raw) => Some(raw),
        _ => None,
    });
    let raw = fds.next().unwrap_or_default();
    // SAFETY: descriptors the kernel just installed in this process, owned by nothing else.
    let mut owned: Vec<OwnedFd> = raw
        .into_iter()
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    owned.pop().ok_or(Errno::EBADMSG)
}

/// Send a pidfd of this process on `sock`, tagged `tag`: the receiver learns its pid in its own
/// pid namespace ([`pid_of_pidfd`]).
pub fn announce_self(sock: BorrowedFd, tag: u8) -> SysResult<()> {
    let fd = pidfd_self()?;
    named(send_fd(sock.as_raw_fd(), tag, fd.as_raw_fd()), || {
        "sendmsg(<channel>, <pidfd>)".into()
    })
}

/// Drop every capability numbered `first` or above from the bounding set, up to the last the
/// kernel knows (`cap_last_cap`): the first number it refuses (EINVAL) ends the drops.
pub fn drop_bounding_from(first: u32) -> SysResult<()> {
    for cap in first..64 {
        // SAFETY: prctl with integer arguments only.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
        if r == -1 {
            return match Errno::last() {
                Errno::EINVAL => Ok(()),
                _ => Err(last(|| format!("prctl(PR_CAPBSET_DROP, {cap})"))),
            };
        }
    }
    Ok(())
}

/// A pidfd of this process (close-on-exec, as every pidfd): it polls readable once the
/// process has ended, whoever else holds its descriptors.
pub fn pidfd_self() -> SysResult<OwnedFd> {
    // SAFETY: plain syscall on integers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd == -1 {
        return Err(last(|| "pidfd_open(<self>)".into()));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The pid (in this process's pid namespace, as its /proc shows it) of the process a pidfd
/// refers to, from the pidfd's fdinfo.
pub fn pid_of_pidfd(pidfd: BorrowedFd) -> SysResult<Pid> {
    let path = format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd());
    let text = std::fs::read_to_string(&path).map_err(|e| SysError {
        call: format!("read({path:?})"),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|&p| p > 0)
        .map(Pid::from_raw)
        .ok_or_else(|| SysError {
            call: format!("read({path:?}): no pid in this namespace"),
            errno: Errno::ESRCH,
        })
}

/// `count` new instances of proc for the pid namespace this process has joined (setns), each a
/// detached mount (nosuid, nodev, noexec) for move_mount. A proc shows the pid namespace its
/// maker is in, which setns does not change for this process: a helper born in the joined
/// namespace makes them, with this process's credentials, into the descriptor table it
/// shares with this one.
pub fn procs_of_joined_pid_ns(count: usize) -> SysResult<Vec<OwnedFd>> {
    use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    const CALLS: [&str; 4] = [
        "fsopen(\"proc\")",
        "fsconfig(<proc>, FSCONFIG_SET_STRING, \"source\", \"proc\")",
        "fsconfig(<proc>, FSCONFIG_CMD_CREATE)",
        "fsmount(<proc>, MOUNT_ATTR_NOSUID|MOUNT_ATTR_NODEV|MOUNT_ATTR_NOEXEC)",
    ];
    let made: Vec<AtomicI32> = (0..count).map(|_| AtomicI32::new(-1)).collect();
    let (failed, errno) = (AtomicUsize::new(usize::MAX), AtomicI32::new(0));
    let helper = start_task(Start::SharedMemoryAndFiles, &mut || {
        let fail = |call: usize, fs: libc::c_long| {
            failed.store(call, Ordering::Relaxed);
            errno.store(Errno::last_raw(), Ordering::Relaxed);
            if fs >= 0 {
                // SAFETY: the context this helper opened, in the table it shares.
                unsafe { libc::close(fs as i32) };
            }
            exit_now(0)
        };
        for slot in &made {
            // SAFETY: plain syscalls on integers and a static NUL-terminated name.
            let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), FSOPEN_CLOEXEC) };
            if fs == -1 {
                fail(0, -1);
            }
            let null = std::ptr::null::<libc::c_char>();
            let (key, value) = (c"source".as_ptr(), c"proc".as_ptr());
            // SAFETY: as above; the source named as mount(2)'s "proc" names it (mountinfo).
            if unsafe { libc::syscall(libc::SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0) }
                == -1
            {
                fail(1, fs);
            }
            // SAFETY: as above.
            if unsafe { libc::syscall(libc::SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, null, null, 0) }
                == -1
            {
                fail(2, fs);
            }
            let attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
            // SAFETY: as above.
            let mnt = unsafe { libc::syscall(libc::SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs) };
            if mnt == -1 {
                fail(3, fs);
            }
            // SAFETY: as above (the context is done with once mounted).
            unsafe { libc::close(fs as i32) };
            slot.store(mnt as i32, Ordering::Relaxed);
        }
        exit_now(0)
    })?;
    named(nix::sys::wait::waitpid(helper, None), || {
        format!("waitpid({helper}) for the proc helper")
    })?;
    // SAFETY: descriptors the helper made in the table this process shares, owned by nothing
    // else (taken here even on failure, so they are closed).
    let fds: Vec<OwnedFd> = made
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .filter(|&fd| fd >= 0)
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    if let Some(call) = CALLS.get(failed.load(Ordering::Relaxed)) {
        return Err(SysError {
            call: (*call).into(),
            errno: Errno::from_raw(errno.load(Ordering::Relaxed)),
        });
    }
    if fds.len() != count {
        return Err(SysError {
            call: "the proc helper ended before it made every proc".into(),
            errno: Errno::ECANCELED,
        });
    }
    Ok(fds)
}

/// How the task's process is made (see [`start_task`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: no page tables copied, no page
    /// copied on write; this process sleeps until the child has exec'd or exited.
    SharedMemory,
    /// The same, and the child shares this process's descriptor table (CLONE_FILES): what it
    /// opens stays open here. For a helper that exits instead of exec'ing.
    SharedMemoryAndFiles,
    /// fork(2): for a child that may wait before it execs (this process keeps running).
    Fork,
}

/// Start `child` in a new process, which must end in execve or _exit (should `child` return,
/// the child exits with 125). With [`Start::SharedMemory`] the child runs on its own stack
/// (with a guard page) in this process's memory: what it changes there, this process sees as
/// after a call that never returned (its allocations and anything it holds are leaked).
/// For the clones (not `Start::Fork`), every signal is blocked around the clone, so no handler
/// of this process can run in the child; the child sets its own mask before it execs.
pub fn start_task(how: Start, child: &mut dyn FnMut()) -> SysResult<Pid> {
    if how == Start::Fork {
        // SAFETY: the caller (the sandbox's init) is single-threaded, so the child's copy of
        // the heap and of every lock is consistent; the child execs or exits.
        return match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => {
                heap::not_the_reporting_process();
                child();
                exit_now(crate::spec::exit::SETUP_FAILED)
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => Ok(child),
            Err(errno) => Err(SysError {
                call: "fork()".into(),
                errno,
            }),
        };
    }
    const STACK: usize = 256 * 1024;
    const GUARD: usize = 4096;
    extern "C" fn enter(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` points at the `&mut dyn FnMut` below, alive while the parent sleeps.
        let child = unsafe { &mut *(arg as *mut &mut dyn FnMut()) };
        child();
        exit_now(crate::spec::exit::SETUP_FAILED)
    }
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    let mut saved = SigSet::empty();
    sigprocmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut saved),
    )
    .map_err(|errno| SysError {
        call: "sigprocmask(SIG_SETMASK, <all>)".into(),
        errno,
    })?;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE;
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a fresh anonymous mapping, used only as the child's stack and unmapped below.
    let base = unsafe { libc::mmap(std::ptr::null_mut(), STACK + GUARD, prot, flags, -1, 0) };
    let result = if base == libc::MAP_FAILED {
        Err(last(|| "mmap(<stack of a child process>)".into()))
    // SAFETY: the lowest page of the mapping just made: a stack overflow faults there.
    } else if unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) } == -1 {
        Err(last(|| "mprotect(<guard page>, PROT_NONE)".into()))
    } else {
        let mut arg: &mut dyn FnMut() = child;
        let files = match how {
            Start::SharedMemoryAndFiles => libc::CLONE_FILES,
            _ => 0,
        };
        // SAFETY: with CLONE_VFORK the calling thread sleeps until the child execs or exits,
        // so of this thread's memory only the child uses it meanwhile (another thread of the
        // process, the stdin relay's, may run, and `child` shares nothing with it: see
        // new_net_namespace); it runs `enter` on its own stack (the mapping's top: stacks
        // grow down), never returns into this frame, and `arg` outlives it. SIGCHLD reports
        // its end to this process, as fork(2) would.
        let pid = unsafe {
            libc::clone(
                enter,
                base.cast::<u8>().add(STACK + GUARD).cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | files | libc::SIGCHLD,
                (&mut arg as *mut &mut dyn FnMut()).cast(),
            )
        };
        match pid {
            -1 => Err(last(|| match how {
                Start::SharedMemoryAndFiles => "clone(CLONE_VM|CLONE_VFORK|CLONE_FILES)".into(),
                _ => "clone(CLONE_VM|CLONE_VFORK)".into(),
            })),
            pid => Ok(Pid::from_raw(pid)),
        }
    };
    if base != libc::MAP_FAILED {
        // SAFETY: no child runs on the mapping any more: it has exec'd (into a new address
        // space) or exited, or was never started.
        unsafe { libc::munmap(base, STACK + GUARD) };
    }
    let restored = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&saved), None);
    let pid = result?;
    restored.map_err(|errno| SysError {
        call: "sigprocmask(SIG_SETMASK, <saved>)".into(),
        errno,
    })?;
    Ok(pid)
}

/// Wait for one of the blocked signals in `set`: sigwaitinfo, which reports a failure the
/// same way under every C library (nix's `SigSet::wait` takes glibc's sigwait, which returns
/// the error number rather than -1, for a signal, and panics on it: found by fault injection).
/// With `until`, sigtimedwait: `None` once that time has come with no signal.
pub fn wait_signal(
    set: &nix::sys::signal::SigSet,
    until: Option<std::time::Instant>,
) -> Result<Option<(Signal, Sender)>, Errno> {
    // SAFETY: siginfo_t is a plain C struct, for which all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let n = match until {
        None => {
            // SAFETY: `set` and `info` are valid for the call.
            unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) }
        }
        Some(t) => {
            let left = t.saturating_duration_since(std::time::Instant::now());
            let ts = libc::timespec {
                tv_sec: left.as_secs().min(i32::MAX as u64) as _,
                tv_nsec: left.subsec_nanos() as _,
            };
            // SAFETY: `set`, `info` and `ts` are valid for the call.
            unsafe { libc::sigtimedwait(set.as_ref(), &mut info, &ts) }
        }
    };
    // Only kill(2)'s code with a sender the receiver cannot name is from outside: a process
    // may forge sigqueue's fields (rt_sigqueueinfo: SI_QUEUE, any si_pid), never SI_USER's.
    let sender = match info.si_code {
        // SAFETY: for SI_USER the kernel filled the sender's fields (kill's layout).
        libc::SI_USER if unsafe { info.si_pid() } == 0 => Sender::Outside,
        // The kernel's own (SIGCHLD's CLD_* codes, SI_KERNEL).
        code if code > 0 => Sender::Outside,
        _ => Sender::Inside,
    };
    match n {
        -1 if Errno::last() == Errno::EAGAIN => Ok(None),
        -1 => Err(Errno::last()),
        n => Signal::try_from(n).map(|sig| Some((sig, sender))),
    }
}

/// Who sent a signal, as the receiver's pid namespace sees it: `Outside`, a process outside it
/// (kill(2), whose sender's pid reads 0 there) or the kernel; `Inside`, a process the receiver
/// can name, or one that wrote the siginfo itself (sigqueue), which may be anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    Inside,
    Outside,
}

/// Reset every catchable signal to its default action (an ignored SIGPIPE or SIGINT would
/// otherwise survive execve into the task).
pub fn reset_signal_dispositions() {
    for sig in Signal::iterator() {
        if sig == Signal::SIGKILL || sig == Signal::SIGSTOP {
            continue;
        }
        set_disposition(sig, SigHandler::SigDfl);
    }
}

/// Set `sig` to its default action or to ignored; returns the disposition it had. The one
/// place airlock changes a disposition: it installs no handler of its own.
fn set_disposition(sig: Signal, to: SigHandler) -> Option<SigHandler> {
    assert!(
        matches!(to, SigHandler::SigDfl | SigHandler::SigIgn),
        "airlock installs no signal handler"
    );
    // SAFETY: SIG_DFL and SIG_IGN (asserted above) run no code of ours in signal context.
    unsafe { nix::sys::signal::signal(sig, to) }.ok()
}

/// The process entry point, called once by the C runtime (main.rs is `no_main`). The command
/// line is read here from `argv`: under no_main, std fills `std::env::args` only on glibc
/// (from its own .init_array hook), not on musl.
// SAFETY: the only symbol named `main` in the program: std generates none under `no_main`.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    heap::claim_for_this_thread();
    heap::this_process_reports_out_of_memory();
    let args = read_argv(argc, argv);
    process_start();
    let code = crate::airlock_main(args);
    // exit flushes std's stdout buffer, as returning from std's own main would.
    std::process::exit(code)
}

/// Where the kernel put airlock's argument strings: (start address, length). Recorded by
/// `read_argv` so that the sandbox's init can blank its copy (see `blank_argv`).
static ARGV_AREA: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

/// The arguments, copied; where their strings lie is recorded in ARGV_AREA.
#[cfg(not(test))]
fn read_argv(argc: libc::c_int, argv: *const *const libc::c_char) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    if argc < 1 || argv.is_null() {
        return Vec::new();
    }
    let args = (0..argc as usize)
        .map(|i| {
            // SAFETY: the C runtime passes `argc` valid pointers to NUL-terminated strings.
            let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
            std::ffi::OsStr::from_bytes(arg.to_bytes()).to_os_string()
        })
        .collect();
    // SAFETY: the C runtime passes `argc` valid pointers to NUL-terminated strings, which the
    // kernel lays out one after the other from argv[0] (the area /proc/PID/cmdline shows).
    let (first, last) = unsafe { (*argv, *argv.add(argc as usize - 1)) };
    if last < first {
        return args;
    }
    // SAFETY: `last` is a NUL-terminated string (above).
    let end = last as usize + unsafe { libc::strlen(last) } + 1;
    let _ = ARGV_AREA.set((first as usize, end - first as usize));
    args
}

/// Blank airlock's argument strings in this process's memory: /proc/PID/cmdline of the
/// sandbox's init, which the task can read, then shows "airlock-init" instead of the caller's
/// command line (host paths of inputs and binds, --env values, a request file). Only the
/// init calls it, before the task exists; nothing reads the arguments after the clone (the
/// Spec was built from them before).
pub fn blank_argv() {
    const NAME: &[u8] = b"airlock-init\0";
    if let Some(&(start, len)) = ARGV_AREA.get() {
        // SAFETY: the area recorded by `read_argv`: this process's own writable copy of the
        // argument strings, which nothing reads any more; both writes stay within `len`.
        unsafe {
            std::ptr::write_bytes(start as *mut u8, 0, len);
            std::ptr::copy_nonoverlapping(NAME.as_ptr(), start as *mut u8, NAME.len().min(len));
        }
    }
}

/// What airlock keeps of std's runtime start-up (see main.rs): descriptors 0-2 opened on
/// /dev/null if they are closed (so no file airlock opens can become its stdout or stderr),
/// and SIGPIPE ignored; airlock also ignores SIGXFSZ (see [`SELF_IGNORED`]).
#[cfg(not(test))]
fn process_start() {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let closed = |fd: i32| {
        // SAFETY: F_GETFD on an integer descriptor reads a flag and touches no memory.
        unsafe { libc::fcntl(fd, libc::F_GETFD) == -1 }
    };
    // One poll tells which of 0-2 are closed (POLLNVAL); should it fail, ask each one.
    let std_fds = [0, 1, 2].map(|fd| {
        // SAFETY: only borrowed for the poll below, which reports POLLNVAL for a closed one.
        PollFd::new(unsafe { BorrowedFd::borrow_raw(fd) }, PollFlags::empty())
    });
    let mut polled = std_fds;
    // POLLNVAL also stands for an open O_PATH descriptor, which F_GETFD then finds open (the
    // stream checks refuse it as a stream: relay::plan).
    let nval = |p: &PollFd| p.revents().is_some_and(|r| r.contains(PollFlags::POLLNVAL));
    let is_closed: [bool; 3] = match poll(&mut polled, PollTimeout::ZERO) {
        Ok(_) => [0, 1, 2].map(|fd| {
            let path_only = nval(&polled[fd as usize]) && !closed(fd);
            if path_only {
                STD_AT_START.fetch_or(PATH_ONLY << fd, std::sync::atomic::Ordering::Relaxed);
            }
            nval(&polled[fd as usize]) && !path_only
        }),
        Err(_) => [0, 1, 2].map(closed),
    };
    for (fd, is_closed) in (0..3).zip(is_closed) {
        // The lowest free descriptor is the closed one, so the /dev/null opened now takes its
        // place (and stays open for good). Unable to make sure, airlock stops here, as std's
        // start-up would.
        if is_closed {
            let (rw, mode) = (nix::fcntl::OFlag::O_RDWR, nix::sys::stat::Mode::empty());
            match nix::fcntl::open("/dev/null", rw, mode) {
                Ok(null) if null.as_raw_fd() == fd => std::mem::forget(null),
                _ => exit_now(crate::spec::exit::SETUP_FAILED),
            }
            STD_AT_START.fetch_or(CLOSED << fd, std::sync::atomic::Ordering::Relaxed);
        }
    }
    for (sig, caller) in SELF_IGNORED.iter().zip(&CALLER_IGNORED) {
        let before = set_disposition(*sig, SigHandler::SigIgn);
        caller.store(
            matches!(before, Some(SigHandler::SigIgn)),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// What process_start found of descriptors 0-2, bit N of each group for descriptor N:
/// closed (/dev/null since), or an O_PATH descriptor.
static STD_AT_START: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
const CLOSED: u8 = 1;
const PATH_ONLY: u8 = 1 << 3;

/// Whether standard stream `fd` was closed when airlock started (it is /dev/null since).
pub fn closed_at_start(fd: i32) -> bool {
    STD_AT_START.load(std::sync::atomic::Ordering::Relaxed) & (CLOSED << fd) != 0
}

/// Whether standard stream `fd` is an O_PATH descriptor (poll finds it invalid, F_GETFD
/// open), which names a file without opening it.
pub fn path_only_at_start(fd: i32) -> bool {
    STD_AT_START.load(std::sync::atomic::Ordering::Relaxed) & (PATH_ONLY << fd) != 0
}

/// The signals airlock ignores for itself from its start: a closed output (SIGPIPE) and the
/// caller's file size limit (SIGXFSZ) are errors to report (EPIPE, EFBIG), not a silent death
/// halfway through a report or a relayed file. The task gets the caller's dispositions of
/// them back ([`caller_signal_dispositions`]) or the defaults (airlock run).
const SELF_IGNORED: [Signal; 2] = [Signal::SIGPIPE, Signal::SIGXFSZ];

/// Whether the caller had each of [`SELF_IGNORED`] ignored.
static CALLER_IGNORED: [std::sync::atomic::AtomicBool; 2] = [
    std::sync::atomic::AtomicBool::new(false),
    std::sync::atomic::AtomicBool::new(false),
];

/// Whether `sig` is ignored in this process: the caller left it so (airlock ignores only
/// [`SELF_IGNORED`] itself, and not before process_start has noted the caller's).
pub fn is_ignored(sig: Signal) -> bool {
    if let Some(i) = SELF_IGNORED.iter().position(|s| *s == sig) {
        return CALLER_IGNORED[i].load(std::sync::atomic::Ordering::Relaxed);
    }
    let mut now = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction only writes the current one into `now`.
    let r = unsafe { libc::sigaction(sig as i32, std::ptr::null(), now.as_mut_ptr()) };
    // SAFETY: zeroed, then filled by the kernel; every field is plain data.
    r == 0 && unsafe { now.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Signals as the caller left them, as a task started through exec would find them (the
/// ignored ones stay ignored): only [`SELF_IGNORED`], which airlock ignores for itself, go
/// back to their defaults unless the caller ignored them too. airlock installs no handler.
pub fn caller_signal_dispositions() {
    for sig in SELF_IGNORED {
        if !is_ignored(sig) {
            set_disposition(sig, SigHandler::SigDfl);
        }
    }
}

/// Mark `fd` close-on-exec; one that is not open is left so.
pub fn set_cloexec(fd: RawFd) -> SysResult<()> {
    // SAFETY: F_SETFD on an integer descriptor sets a flag and touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
        let e = last(|| format!("fcntl({fd}, F_SETFD, FD_CLOEXEC)"));
        if e.errno != Errno::EBADF {
            return Err(e);
        }
    }
    Ok(())
}

/// How many bytes wait in the pipe `fd` (either end) for a reader: FIONREAD.
pub fn unread_bytes(fd: &OwnedFd) -> SysResult<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which lives for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) } == -1 {
        return Err(last(|| "ioctl(<pipe>, FIONREAD)".into()));
    }
    Ok(n.max(0) as usize)
}

/// Wait until `fd` has bytes to read or is at its end, for at most `wait` (None: no bound).
/// False when the time passed first; a signal's interruption waits on for what is left.
pub fn wait_readable(fd: BorrowedFd, wait: Option<std::time::Duration>) -> SysResult<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    let deadline = wait.map(|w| std::time::Instant::now() + w);
    loop {
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(at) => {
                let left = at.saturating_duration_since(std::time::Instant::now());
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, timeout) {
            Ok(ready) => return Ok(ready > 0),
            Err(Errno::EINTR) => continue,
            Err(e) => return named(Err(e), || format!("poll({}, POLLIN)", fd.as_raw_fd())),
        }
    }
}

/// Whether the pipe `fd` (its read end) has no writer left: poll's POLLHUP, at once.
pub fn hung_up(fd: BorrowedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    nix::poll::poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLHUP))
}

/// Whether process `pid` (a child of this one) has a child of its own: its
/// /proc/PID/task/PID/children, which the kernel fills for its main thread, is not empty.
/// Unreadable, it is taken to have one.
pub fn has_children(pid: Pid) -> bool {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read(path).map_or(true, |ids| !ids.is_empty())
}

/// Descriptor 0, 1 or 2 of this process.
pub fn std_stream(n: i32) -> BorrowedFd<'static> {
    assert!((0..3).contains(&n), "not a standard stream: {n}");
    // SAFETY: process_start leaves 0-2 open, and airlock never closes them in this process.
    unsafe { BorrowedFd::borrow_raw(n) }
}

/// End this process by `sig` as its default action would (the caller then sees 128+N, as
/// for a process killed by it): the signal, read from a signalfd while blocked, is sent again
/// with its default action restored and unblocked.
pub fn die_by(sig: Signal) -> ! {
    set_disposition(sig, SigHandler::SigDfl);
    let _ = nix::sys::signal::raise(sig);
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(sig);
    let _ =
        nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_UNBLOCK, Some(&set), None);
    exit_now(128 + sig as i32)
}

/// SIGCHLD back to its default action (the caller may have left it ignored).
pub fn default_sigchld() {
    set_disposition(Signal::SIGCHLD, SigHandler::SigDfl);
}

/// Mark every descriptor from `first` up close-on-exec (close_range(2), CLOSE_RANGE_CLOEXEC).
pub fn cloexec_from(first: u32) -> SysResult<()> {
    let r = close_range(first, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    if r == -1 {
        return Err(last(|| {
            format!("close_range({first}, ~0, CLOSE_RANGE_CLOEXEC)")
        }));
    }
    Ok(())
}

/// close_range(2), by number: musl's libc has no wrapper for it.
fn close_range(first: u32, last: u32, flags: libc::c_uint) -> libc::c_long {
    // SAFETY: plain syscall on integer arguments; it touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) }
}

/// Close every descriptor from 3 up except those in `keep`.
pub fn close_fds_except(keep: &[RawFd]) -> SysResult<()> {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter(|&&fd| fd > 2)
        .map(|&fd| fd as u32)
        .collect();
    keep.sort_unstable();
    let mut next = 3u32;
    for fd in keep.into_iter().chain(std::iter::once(u32::MAX)) {
        if fd > next {
            let last_fd = if fd == u32::MAX { u32::MAX } else { fd - 1 };
            // Objects that own the descriptors closed here (the launcher's copies in the
            // child) live in a frame that never resumes: the child leaves only through _exit,
            // so none of them is ever used or dropped.
            let r = close_range(next, last_fd, 0);
            if r == -1 {
                return Err(last(|| format!("close_range({next}, {last_fd}, 0)")));
            }
        }
        next = fd.saturating_add(1);
    }
    Ok(())
}

/// Leave the process at once, without running destructors or flushing std's buffers (a forked
/// child must not flush a copy of its parent's buffers).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is always safe to call; it does not return.
    unsafe { libc::_exit(code) }
}

// ---------------------------------------------------------------------------------------------
// Mounts (new mount API, Linux >= 5.12)

pub const OPEN_TREE_CLONE: u32 = 1;
pub const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub fn attr_names(attr: u64) -> String {
    bit_names(
        attr,
        &[
            (MOUNT_ATTR_RDONLY, "RDONLY"),
            (MOUNT_ATTR_NOSUID, "NOSUID"),
            (MOUNT_ATTR_NODEV, "NODEV"),
            (MOUNT_ATTR_NOEXEC, "NOEXEC"),
        ],
    )
}

/// The names of the bits set in `bits`, joined by "|".
fn bit_names(bits: u64, names: &[(u64, &str)]) -> String {
    let set: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    set.join("|")
}

/// open_tree(AT_FDCWD, path, OPEN_TREE_CLONE|AT_RECURSIVE|OPEN_TREE_CLOEXEC): a detached copy of
/// the mount tree at `path`, submounts included.
pub fn clone_tree(path: &Path) -> SysResult<OwnedFd> {
    let c = cstr(path)?;
    let flags = OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as u32;
    // SAFETY: `c` is a valid NUL-terminated path; the call returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c.as_ptr(), flags) };
    if fd == -1 {
        return Err(last(|| {
            format!("open_tree({path:?}, OPEN_TREE_CLONE|AT_RECURSIVE)")
        }));
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// openat2(AT_FDCWD, path, flags, RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS): `path` must
/// hold no symlink at all, so a link swapped in since the path was resolved fails the open
/// (ELOOP) instead of redirecting it.
pub fn open_without_links(path: &Path, flags: i32) -> SysResult<OwnedFd> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    let c = cstr(path)?;
    let how = OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `c` is a valid NUL-terminated path and `how` an open_how of the size passed;
    // the call returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd == -1 {
        return Err(last(|| {
            format!("openat2({path:?}, {flags:#o}, RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)")
        }));
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// [`open_without_links`] with O_PATH, then open_tree(fd, "",
/// OPEN_TREE_CLONE|AT_RECURSIVE|AT_EMPTY_PATH): [`clone_tree`] of a path that must hold no
/// symlink.
pub fn clone_tree_without_links(path: &Path) -> SysResult<OwnedFd> {
    let at = open_without_links(path, libc::O_PATH | libc::O_CLOEXEC)?;
    let flags = OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | libc::O_CLOEXEC as u32;
    // SAFETY: `at` is an open descriptor and the path an empty NUL-terminated string; the
    // call returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, at.as_raw_fd(), c"".as_ptr(), flags) };
    if fd == -1 {
        return Err(last(|| {
            format!("open_tree(<{path:?}>, OPEN_TREE_CLONE|AT_RECURSIVE|AT_EMPTY_PATH)")
        }));
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// mount_setattr on a detached tree (or a mount reached by `path` under `dir`), recursively.
pub fn set_mount_attrs(
    dir: BorrowedFd,
    path: &str,
    set: u64,
    recursive: bool,
    what: &Path,
) -> SysResult<()> {
    let c = CString::new(path).map_err(|_| SysError {
        call: format!("path {path:?} contains a NUL byte"),
        errno: Errno::EINVAL,
    })?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = if path.is_empty() { AT_EMPTY_PATH } else { 0 };
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: valid fd, NUL-terminated path, and a mount_attr of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir.as_raw_fd(),
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r == -1 {
        return Err(last(|| {
            format!(
                "mount_setattr({what:?}, {}{})",
                attr_names(set),
                if recursive { ", AT_RECURSIVE" } else { "" }
            )
        }));
    }
    Ok(())
}

/// move_mount a detached tree onto `target` (which must exist).
pub fn attach_tree(tree: BorrowedFd, target: &Path) -> SysResult<()> {
    move_mount(tree, None, target)
}

/// [`attach_tree`] onto what the descriptor `at` (O_PATH) refers to; `target` names it in
/// messages.
pub fn attach_tree_at(tree: BorrowedFd, at: BorrowedFd, target: &Path) -> SysResult<()> {
    move_mount(tree, Some(at), target)
}

fn move_mount(tree: BorrowedFd, at: Option<BorrowedFd>, target: &Path) -> SysResult<()> {
    const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
    let empty = c"";
    let t = cstr(target)?;
    let (dirfd, path, flags) = match at {
        Some(fd) => (fd.as_raw_fd(), empty.as_ptr(), MOVE_MOUNT_T_EMPTY_PATH),
        None => (libc::AT_FDCWD, t.as_ptr(), 0),
    };
    // SAFETY: valid descriptors and NUL-terminated paths that live across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            dirfd,
            path,
            MOVE_MOUNT_F_EMPTY_PATH | flags,
        )
    };
    if r == -1 {
        return Err(last(|| format!("move_mount(<tree>, {target:?})")));
    }
    Ok(())
}

/// setns(2) into the namespace a descriptor the caller named refers to.
pub fn join_namespace(fd: RawFd, nstype: libc::c_int) -> SysResult<()> {
    // SAFETY: plain syscall on integers.
    let r = unsafe { libc::setns(fd, nstype) };
    if r == -1 {
        return Err(last(|| format!("setns({fd}, {nstype:#x})")));
    }
    Ok(())
}

/// Move the new process `pid` (just cloned, most likely not yet run) to the CPUs of `cpus`
/// other than the one this process runs on, if there are any: it starts there at once
/// instead of after this process sleeps. Best effort: it takes `cpus` back itself (the init,
/// at step 2, once this process has sent the id maps, so after this call).
pub fn start_elsewhere(pid: Pid, cpus: &nix::sched::CpuSet) {
    let Ok(here) = nix::sched::sched_getcpu() else {
        return;
    };
    let mut others = *cpus;
    if others.unset(here).is_ok() && others != nix::sched::CpuSet::new() {
        let _ = nix::sched::sched_setaffinity(pid, &others);
    }
}

/// The kernel's release (`uname -r`), read without a path: a failed step's hint asks for it
/// where the init's /proc is covered (steps 7-8).
pub fn kernel_release() -> Option<String> {
    let u = nix::sys::utsname::uname().ok()?;
    Some(u.release().to_string_lossy().into_owned())
}

/// Install a seccomp filter program on this thread with prctl(PR_SET_SECCOMP,
/// SECCOMP_MODE_FILTER), as bubblewrap does, not seccomp(2): the two install alike, but a
/// filter already in force (an outer sandbox's, or a caller's `--add-seccomp-fd`) may refuse
/// the one and allow the other, and bubblewrap's lines ran there. no_new_privs must be set.
pub fn install_seccomp_filter(prog: &[seccompiler::sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?,
        filter: prog.as_ptr().cast_mut().cast::<libc::sock_filter>(),
    };
    // SAFETY: `fprog` points at `prog`'s instructions, alive for the call, which the kernel
    // copies and never writes; seccompiler's sock_filter is repr(C) with libc's fields (u16,
    // u8, u8, u32).
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &fprog as *const libc::sock_fprog,
            0,
            0,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// This process's seccomp mode (0 none, 1 strict, 2 filter; PR_GET_SECCOMP), read without a
/// path as [`kernel_release`]. None when the call fails (a strict-mode process is killed by it
/// instead, and a filter may refuse it).
pub fn seccomp_mode() -> Option<u32> {
    // SAFETY: plain prctl on integers.
    let r = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    u32::try_from(r).ok()
}

/// Landlock's ABI version on this kernel (`landlock_create_ruleset` with
/// LANDLOCK_CREATE_RULESET_VERSION), or None where Landlock is absent or disabled.
pub fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute (NULL, size 0) and returns a
    // number, not a descriptor.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).ok().filter(|&v| v > 0)
}

/// The first Landlock ABI that scopes abstract unix sockets (Linux 6.12).
pub const LANDLOCK_ABI_SCOPE: u32 = 6;

/// Put this process (and what it starts) in a Landlock domain that handles no file or network
/// access and scopes abstract unix sockets: `connect` and `sendto` reach only sockets bound
/// inside the domain. Needs no_new_privs and ABI [`LANDLOCK_ABI_SCOPE`].
pub fn landlock_scope_abstract_sockets() -> SysResult<()> {
    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
        handled_access_net: u64,
        scoped: u64,
    }
    const LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1;
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET,
    };
    // SAFETY: `attr` has the layout of struct landlock_ruleset_attr (three u64, ABI 6) and lives
    // across the call, whose size argument is its own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd == -1 {
        return Err(last(|| {
            "landlock_create_ruleset(scoped=LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)".into()
        }));
    }
    // SAFETY: a fresh descriptor the kernel just returned, owned by nothing else.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: plain syscall on a descriptor we own and a zero flags word.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if r == -1 {
        return Err(last(|| "landlock_restrict_self(<ruleset>, 0)".into()));
    }
    Ok(())
}

/// The CLONE_NEW* names of `flags`, as error messages spell the call.
fn namespace_names(flags: libc::c_int) -> String {
    bit_names(
        flags as u64,
        &[
            (libc::CLONE_NEWNS as u64, "CLONE_NEWNS"),
            (libc::CLONE_NEWCGROUP as u64, "CLONE_NEWCGROUP"),
            (libc::CLONE_NEWUTS as u64, "CLONE_NEWUTS"),
            (libc::CLONE_NEWIPC as u64, "CLONE_NEWIPC"),
            (libc::CLONE_NEWUSER as u64, "CLONE_NEWUSER"),
            (libc::CLONE_NEWPID as u64, "CLONE_NEWPID"),
            (libc::CLONE_NEWNET as u64, "CLONE_NEWNET"),
        ],
    )
}

/// unshare(2) of the given namespaces.
pub fn unshare_namespaces(flags: libc::c_int) -> SysResult<()> {
    // SAFETY: plain syscall on an integer.
    let r = unsafe { libc::unshare(flags) };
    if r == -1 {
        return Err(last(|| format!("unshare({})", namespace_names(flags))));
    }
    Ok(())
}

/// Close a descriptor number the caller handed us on the command line (bwrap's --info-fd is
/// closed once written, so its reader sees EOF). A standard stream's number (`--info-fd 1`)
/// is not left free, as std_stream relies on 0-2 staying open: /dev/null takes its place,
/// close-on-exec, so the caller's pipe still ends here and the task finds the number closed
/// (as under bubblewrap for --info-fd and --json-status-fd; its --userns-block-fd 0 stays
/// open in the task, a difference older than this).
pub fn close_fd(fd: RawFd) {
    if (0..3).contains(&fd) {
        let flags = nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC;
        if let Ok(null) = nix::fcntl::open("/dev/null", flags, nix::sys::stat::Mode::empty()) {
            // SAFETY: dup3 onto a standard stream's number, which no Rust object owns (they
            // are only borrowed, std_stream); `null` stays owned and is closed at its drop.
            unsafe {
                libc::dup3(null.as_raw_fd(), fd, libc::O_CLOEXEC);
            }
            return;
        }
    }
    // SAFETY: the descriptor is not owned by any Rust object in this process (it came from
    // the caller, named on the command line); closing it only ends the caller's pipe.
    unsafe {
        libc::close(fd);
    }
}

/// A new descriptor for a descriptor number the caller named on the command line (so the
/// original stays where it is). EBADF when it is not open.
pub fn dup_fd(fd: RawFd) -> SysResult<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on an integer; the result is a fresh descriptor or -1.
    let r = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if r == -1 {
        return Err(last(|| format!("fcntl({fd}, F_DUPFD_CLOEXEC)")));
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// The type of namespace (`CLONE_NEW*`) a descriptor refers to, or None when it refers to no
/// namespace (NS_GET_NSTYPE).
pub fn ns_type(fd: &OwnedFd) -> Option<libc::c_int> {
    const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
    // SAFETY: an ioctl without argument on a descriptor we own; it only returns a value.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_NSTYPE as _) };
    (r >= 0).then_some(r)
}

// ---------------------------------------------------------------------------------------------
// Network

/// A new network namespace with its loopback up, owned by the user namespace `userns` (the
/// sandbox's, which this process's user owns), sent on `channel` as one message: the byte
/// `tag` with the namespace's descriptor (SCM_RIGHTS). A short-lived helper sharing this
/// process's memory and descriptors joins that user namespace, unshares a network namespace,
/// brings loopback up, sends the namespace itself (the receiver has it without waiting for
/// this process to wake) and exits. This process sleeps meanwhile. Nothing is sent when a
/// call fails: the error names it.
///
/// `first` runs in the helper before anything else, with this process's credentials and
/// namespaces (a root launcher makes the run's cgroup v1 there: on the other core, while the
/// init builds the filesystem, rather than in this process once it wakes, where it would take
/// the init's core). It shares this process's memory, which the calling thread leaves alone
/// while it runs (another thread, the stdin relay's, may run: `first` must share nothing with
/// it): what it writes there it must publish with a Release flag of its own, for a helper may
/// be killed at any point.
///
/// The helper's own report goes through atomics, the last one a Release flag: a helper
/// killed at any point leaves no half-written value, only a report that is missing.
pub fn new_net_namespace(
    userns: BorrowedFd,
    channel: BorrowedFd,
    tag: u8,
    first: &mut dyn FnMut(),
) -> SysResult<()> {
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
    const CALLS: [&str; 6] = [
        "setns(<user namespace of the init>, CLONE_NEWUSER)",
        "unshare(CLONE_NEWNET)",
        LO_SOCKET,
        LO_IOCTL,
        "ioctl(<socket>, SIOCGSKNS)",
        "sendmsg(<channel>, <network namespace>)",
    ];
    const SIOCGSKNS: libc::c_ulong = 0x894C;
    let (sent, failed, errno, done) = (
        AtomicBool::new(false),
        AtomicUsize::new(0),
        AtomicI32::new(0),
        AtomicBool::new(false),
    );
    let (userns, channel) = (userns.as_raw_fd(), channel.as_raw_fd());
    let helper = start_task(Start::SharedMemoryAndFiles, &mut || {
        first();
        let made = (|| {
            // SAFETY: plain syscalls on integers; errors are read from errno at once.
            if unsafe { libc::setns(userns, libc::CLONE_NEWUSER) } == -1 {
                return Err((0, Errno::last_raw()));
            }
            // SAFETY: as above.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } == -1 {
                return Err((1, Errno::last_raw()));
            }
            let sock = lo_up().map_err(|(call, e)| (2 + call, e as i32))?;
            // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor or -1.
            let netns = match unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGSKNS as _) } {
                -1 => return Err((4, Errno::last_raw())),
                // SAFETY: a fresh descriptor nothing else owns (closed when the helper ends,
                // in the descriptor table it shares with this process).
                fd => unsafe { OwnedFd::from_raw_fd(fd) },
            };
            send_fd(channel, tag, netns.as_raw_fd()).map_err(|e| (5, e as i32))
        })();
        match made {
            Ok(()) => sent.store(true, Ordering::Relaxed),
            Err((call, e)) => {
                failed.store(call, Ordering::Relaxed);
                errno.store(e, Ordering::Relaxed);
            }
        }
        done.store(true, Ordering::Release);
        exit_now(0)
    })?;
    let reaped = named(nix::sys::wait::waitpid(helper, None), || {
        format!("waitpid({helper}) for the network namespace's helper")
    })?;
    if !done.load(Ordering::Acquire) {
        let how = match reaped {
            nix::sys::wait::WaitStatus::Signaled(_, sig, _) => format!("killed by {sig}"),
            other => format!("{other:?}"),
        };
        return Err(SysError {
            call: format!("the network namespace's helper ended before it reported ({how})"),
            errno: Errno::ECANCELED,
        });
    }
    match sent.load(Ordering::Relaxed) {
        true => Ok(()),
        false => Err(SysError {
            call: CALLS[failed.load(Ordering::Relaxed)].into(),
            errno: Errno::from_raw(errno.load(Ordering::Relaxed)),
        }),
    }
}

/// One message on a SOCK_SEQPACKET socket, the byte `tag` with the descriptor `fd`
/// (SCM_RIGHTS), without allocating (the network namespace's helper sends it).
pub fn send_fd(sock: RawFd, tag: u8, fd: RawFd) -> Result<(), Errno> {
    let fd_len = std::mem::size_of::<RawFd>() as u32;
    // Room for one control message carrying one descriptor, aligned as cmsghdr is.
    let mut control = [0u64; 4];
    let mut byte = [tag];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: an all-zero msghdr is valid (no name, no control); its fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE computes a size from an integer.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(fd_len) } as _;
    // SAFETY: `control` is 32 bytes, at least CMSG_SPACE(4), 8-aligned and zeroed, so the first
    // header exists; the descriptor is written into its data, inside the buffer; `msg`,
    // `iov` and both buffers live across sendmsg.
    let r = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as _;
        libc::CMSG_DATA(cmsg).cast::<RawFd>().write_unaligned(fd);
        libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL)
    };
    match r {
        -1 => Err(Errno::last()),
        _ => Ok(()),
    }
}

const LO_SOCKET: &str = "socket(AF_INET, SOCK_DGRAM) for lo";
const LO_IOCTL: &str = "ioctl(lo, SIOCSIFFLAGS, IFF_UP|IFF_RUNNING)";

/// Bring the loopback interface of this network namespace up (SIOCSIFFLAGS with IFF_UP); the
/// kernel then assigns 127.0.0.1/8 and ::1 itself.
pub fn loopback_up() -> SysResult<()> {
    lo_up().map(drop).map_err(|(call, errno)| SysError {
        call: [LO_SOCKET, LO_IOCTL][call].into(),
        errno,
    })
}

/// [`loopback_up`] without allocating (the network namespace's helper runs it): returns the
/// socket used, which belongs to this namespace, or which call failed (0: socket, 1: ioctl).
fn lo_up() -> Result<OwnedFd, (usize, Errno)> {
    #[repr(C)]
    struct IfReqFlags {
        name: [u8; libc::IFNAMSIZ],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    // SAFETY: plain syscall; the returned descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd == -1 {
        return Err((0, Errno::last()));
    }
    // SAFETY: fresh descriptor owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: `req` has the layout of struct ifreq (name, then the flags member of the union,
    // padded to the union's 24 bytes), and lives across the call.
    let r = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCSIFFLAGS as _,
            &mut req as *mut _,
        )
    };
    if r == -1 {
        return Err((1, Errno::last()));
    }
    Ok(sock)
}

/// Take ownership of a descriptor nothing else in this process will close: one the kernel has
/// just installed (received by SCM_RIGHTS), or one inherited across clone3 whose owner lives
/// in the launcher's frame, which never resumes in the sandbox's init.
pub fn own_fd(raw: RawFd) -> OwnedFd {
    // SAFETY: callers pass only descriptors no live Rust object in this process will close.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

// ---------------------------------------------------------------------------------------------
// Strings for messages

/// An errno in the words of glibc's strerror, which bubblewrap's messages (and the tools
/// that read them) use: nix's own table words a few of them differently ("Bad file number",
/// "Too many symbolic links encountered").
pub fn errno_text(e: Errno) -> &'static str {
    match e {
        Errno::EIO => "Input/output error",
        Errno::EBADF => "Bad file descriptor",
        Errno::EAGAIN => "Resource temporarily unavailable",
        Errno::ENOMEM => "Cannot allocate memory",
        Errno::EXDEV => "Invalid cross-device link",
        Errno::ENFILE => "Too many open files in system",
        Errno::ENOTTY => "Inappropriate ioctl for device",
        Errno::EDOM => "Numerical argument out of domain",
        Errno::ERANGE => "Numerical result out of range",
        Errno::EDEADLK => "Resource deadlock avoided",
        Errno::ENOLCK => "No locks available",
        Errno::ELOOP => "Too many levels of symbolic links",
        Errno::ENETRESET => "Network dropped connection on reset",
        Errno::EBADMSG => "Bad message",
        Errno::EILSEQ => "Invalid or incomplete multibyte or wide character",
        Errno::EOPNOTSUPP => "Operation not supported",
        Errno::EDQUOT => "Disk quota exceeded",
        _ => e.desc(),
    }
}

pub fn cstring(s: &str) -> CString {
    CString::new(s).unwrap_or_else(|_| c"?".to_owned())
}

/// Clear the personality flags a caller hands on that weaken the task's memory protections:
/// ADDR_NO_RANDOMIZE (`setarch -R`, and gdb's default for what it runs: no ASLR),
/// MMAP_PAGE_ZERO (`setarch -Z`), READ_IMPLIES_EXEC and ADDR_COMPAT_LAYOUT, the set the
/// kernel itself clears on a setuid exec (PER_CLEAR_ON_SETID). The execution domain stays
/// (`linux32`'s PER_LINUX32: uname says i686, as a 32-bit build asks).
pub fn clear_weakening_personality() -> SysResult<()> {
    const QUERY: libc::c_ulong = 0xffff_ffff;
    const WEAKENING: libc::c_int = libc::ADDR_NO_RANDOMIZE
        | libc::MMAP_PAGE_ZERO
        | libc::READ_IMPLIES_EXEC
        | libc::ADDR_COMPAT_LAYOUT;
    // SAFETY: personality takes no memory; 0xffffffff only queries.
    let now = unsafe { libc::personality(QUERY) };
    if now == -1 {
        return Err(last(|| "personality(0xffffffff)".into()));
    }
    if now & WEAKENING != 0 {
        let kept = (now & !WEAKENING) as libc::c_ulong;
        // SAFETY: as above; clearing flags needs no privilege.
        if unsafe { libc::personality(kept) } == -1 {
            return Err(last(|| format!("personality({kept:#x})")));
        }
    }
    Ok(())
}

/// Give up a raised scheduling priority inherited from the caller: a real-time policy
/// (SCHED_FIFO, SCHED_RR) goes back to SCHED_OTHER, a negative nice value to 0 (a positive
/// one, a lower priority, stays), and the real-time I/O class to none (the I/O priority then
/// follows nice, as by default). Lowering one's own priority needs no privilege.
pub fn drop_raised_priority() -> SysResult<()> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_RT: libc::c_long = 1;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    // SAFETY: ioprio_get takes no memory; IOPRIO_WHO_PROCESS with 0 is the calling thread.
    let io = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
    // Any failure stops the run, ENOSYS included: a filter of the caller's answering it (a
    // container runtime's) hides the class, which may be the real-time one, and a kernel
    // without the block layer, which has none, does not run airlock's hosts.
    if io < 0 {
        return Err(last(|| "ioprio_get(IOPRIO_WHO_PROCESS, 0)".into()));
    }
    if io >> IOPRIO_CLASS_SHIFT == IOPRIO_CLASS_RT {
        // SAFETY: ioprio_set takes no memory; class none (0) needs no privilege.
        let set = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, 0) };
        if set != 0 {
            return Err(last(|| {
                "ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_NONE)".into()
            }));
        }
    }
    // By number: musl's sched_getscheduler and sched_setscheduler answer ENOSYS (POSIX means
    // the process, the kernel the thread).
    // SAFETY: sched_getscheduler(0) reads the calling thread's policy and takes no memory.
    let policy = unsafe { libc::syscall(libc::SYS_sched_getscheduler, 0) } as libc::c_int;
    if policy < 0 {
        return Err(last(|| "sched_getscheduler(0)".into()));
    }
    let policy = policy & !libc::SCHED_RESET_ON_FORK;
    if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
        // SAFETY: sched_param is plain integers (musl's has more than sched_priority), for
        // which all zeros is a valid value: priority 0, as SCHED_OTHER requires.
        let param: libc::sched_param = unsafe { std::mem::zeroed() };
        // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 is this thread.
        let set = unsafe {
            libc::syscall(
                libc::SYS_sched_setscheduler,
                0,
                libc::SCHED_OTHER,
                &param as *const libc::sched_param,
            )
        };
        if set != 0 {
            return Err(last(|| "sched_setscheduler(0, SCHED_OTHER, 0)".into()));
        }
    }
    // getpriority answers -1 for nice -1 too: errno tells it from a failure.
    Errno::clear();
    // SAFETY: getpriority takes no memory; PRIO_PROCESS with 0 is the calling process.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if nice == -1 && Errno::last_raw() != 0 {
        return Err(last(|| "getpriority(PRIO_PROCESS, 0)".into()));
    }
    // SAFETY: setpriority takes no memory; raising nice to 0 needs no privilege.
    if nice < 0 && unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 0) } != 0 {
        return Err(last(|| "setpriority(PRIO_PROCESS, 0, 0)".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// open_without_links opens a path with no symlink in it, and refuses (ELOOP) one with a
    /// symlink anywhere, leading or last, and a magic link (/proc/self/fd/N): the guard
    /// against a link swapped in after a route was walked, which no timing test catches
    /// reliably (the window is the few instructions between the walk and the open).
    #[test]
    fn open_without_links_refuses_any_symlink_in_the_path() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("d")).unwrap();
        std::fs::write(real.join("d/f"), b"x").unwrap();
        std::os::unix::fs::symlink("d", real.join("l")).unwrap();
        std::os::unix::fs::symlink("d/f", real.join("lf")).unwrap();
        let flags = libc::O_RDONLY | libc::O_CLOEXEC;
        assert!(super::open_without_links(&real.join("d/f"), flags).is_ok());
        let file = std::fs::File::open(real.join("d/f")).unwrap();
        let magic = format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd());
        for linked in [real.join("l/f"), real.join("lf"), magic.into()] {
            let e = super::open_without_links(&linked, flags).unwrap_err();
            assert_eq!(e.errno, nix::errno::Errno::ELOOP, "{linked:?}: {e}");
            assert!(e.to_string().contains("RESOLVE_NO_SYMLINKS"), "{e}");
            let e = super::clone_tree_without_links(&linked).unwrap_err();
            assert_eq!(e.errno, nix::errno::Errno::ELOOP, "{linked:?}: {e}");
        }
    }
}
