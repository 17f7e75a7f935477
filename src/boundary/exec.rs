//! The end of the steps: capabilities dropped (step 12), and the task's side of step 13:
//! signals, stdio, descriptors, the seccomp filter last, then execve and the command search.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::stat::Mode;
use nix::unistd::{AccessFlags, Pid};

use crate::channel::{self, Msg};
use crate::spec::{self, Seccomp, Spec};
use crate::sys::{self, SysError, io_err, named};

use super::{Inherited, NetworkSet, StepError, session_in_task};

/// bwrap's --block-fd: wait until the descriptor has data (or is closed).
/// A non-blocking descriptor is waited on with poll, and a signal does not end the wait. A
/// write-only one, or one that is not open, is not waited on (bubblewrap's read fails at once).
fn wait_on_fd(fd: i32) -> Result<(), SysError> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // bubblewrap's read(2) fails at once on a descriptor that is not open, and it goes on.
    let f = match sys::dup_fd(fd) {
        Err(e) if e.errno == Errno::EBADF => return Ok(()),
        f => f?,
    };
    let fl = named(nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETFL), || {
        format!("fcntl(--block-fd {fd}, F_GETFL)")
    })?;
    if fl & libc::O_ACCMODE == libc::O_WRONLY {
        return Ok(());
    }
    loop {
        let mut fds = [PollFd::new(f.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(e) => return named(Err(e), || format!("poll(--block-fd {fd})")),
            Ok(_) => break,
        }
    }
    // Consume the byte that ended the wait, as bubblewrap does (EOF or EAGAIN: nothing to).
    let _ = nix::unistd::read(&f, &mut [0u8; 1]);
    Ok(())
}

fn install_seccomp(s: &Seccomp) -> Result<(), SysError> {
    match s {
        Seccomp::Policy => crate::seccomp::install(),
        Seccomp::None => Ok(()),
        Seccomp::Fds(fds) => {
            for fd in fds {
                let mut data = Vec::new();
                // Named as the read it stands for (bwrap mode says "Can't read seccomp data",
                // as bubblewrap does of a descriptor it cannot read).
                let mut f = File::from(sys::dup_fd(*fd).map_err(|e| SysError {
                    call: format!("read(seccomp fd {fd})"),
                    errno: e.errno,
                })?);
                std::io::Read::read_to_end(&mut f, &mut data)
                    .map_err(|e| io_err(e, || format!("read(seccomp fd {fd})")))?;
                crate::seccomp::install_program(&data).map_err(|mut e| {
                    e.call = format!("{} from fd {fd}", e.call);
                    e
                })?;
            }
            Ok(())
        }
    }
}

pub(super) fn drop_caps_except(keep: &[caps::Capability]) -> Result<(), SysError> {
    use caps::{CapSet, CapsHashSet};
    let kept: CapsHashSet = keep.iter().copied().collect();
    // The caps crate keeps only the text of a failure; errno still holds the failed call's
    // (read before anything else runs), unless the failure was no call's (EINVAL then).
    let fail = |set: CapSet, e: caps::errors::CapsError| {
        let errno = match Errno::last() {
            Errno::UnknownErrno => Errno::EINVAL,
            errno => errno,
        };
        SysError {
            call: format!("capset/prctl setting {set:?} to {kept:?} ({e})"),
            errno,
        }
    };
    for cap in caps::all() {
        if !kept.contains(&cap) {
            caps::drop(None, CapSet::Bounding, cap).map_err(|e| fail(CapSet::Bounding, e))?;
        }
    }
    // Those of a newer kernel than the crate knows (caps 0.5 names 0-40) too.
    let known = caps::all().iter().map(|c| c.index()).max().unwrap_or(0);
    sys::drop_bounding_from(u32::from(known) + 1)?;
    caps::clear(None, CapSet::Ambient).map_err(|e| fail(CapSet::Ambient, e))?;
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::set(None, set, &kept).map_err(|e| fail(set, e))?;
    }
    // Kept capabilities survive execve as a non-root user only through the ambient set.
    for cap in &kept {
        caps::raise(None, CapSet::Ambient, *cap).map_err(|e| fail(CapSet::Ambient, e))?;
    }
    Ok(())
}

/// Where glibc's execvp looks for a command when the environment has no PATH (its
/// `_CS_PATH`), as bubblewrap's does: `--clearenv` leaves sbin and /usr/local out.
const GLIBC_DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The task's argv, environment and PATH, made before fork.
pub(super) struct ExecPlan {
    argv: Vec<CString>,
    argv0: Option<CString>,
    envp: Vec<CString>,
    path: String,
    /// bwrap mode looks the command up as glibc's execvp(3), bubblewrap's, does, and reports
    /// its errno alone; `airlock run` as bash does, saying why execve refused a file it found
    /// (a directory, no execute bit).
    as_execvp: bool,
}

impl ExecPlan {
    /// Takes step 10's proof that the network is set: no way to the task skips it.
    pub(super) fn new(spec: &Spec, cwd: PathBuf, _network: NetworkSet) -> ExecPlan {
        let mut env = spec.env.clone();
        if spec.bwrap.is_some() {
            // bwrap sets PWD to the directory it entered (setenv(3): in place if it is set).
            crate::spec::set_env(&mut env, "PWD".into(), cwd.display().to_string());
        }
        ExecPlan {
            argv: spec.argv.iter().map(|a| sys::cstring(a)).collect(),
            argv0: spec
                .bwrap
                .as_ref()
                .and_then(|b| b.argv0.as_deref())
                .map(sys::cstring),
            envp: env
                .iter()
                .map(|(n, v)| sys::cstring(&format!("{n}={v}")))
                .collect(),
            path: env
                .iter()
                .find(|(n, _)| n == "PATH")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| match spec.bwrap {
                    // Without PATH bubblewrap's execvp searches glibc's default path alone.
                    Some(_) => GLIBC_DEFAULT_PATH.into(),
                    None => spec::SAFE_PATH.into(),
                }),
            as_execvp: spec.bwrap.is_some(),
        }
    }
}

/// The task (pid 2, or pid 1 under bwrap's --as-pid-1): its signals (default, or bwrap mode's
/// as the caller left them), its stdio, airlock's own descriptors closed at exec (in airlock
/// run, every other one; bwrap mode leaves the caller's to the task, as bubblewrap does), then
/// execve with the environment built from nothing. Never returns.
pub(super) fn exec_task(inh: &Inherited, plan: &ExecPlan, init: Option<Pid>) -> ! {
    let sock = inh.sock.as_fd();
    let spec = inh.spec;
    let fail = |e: String| -> ! {
        let _ = channel::send(sock, &Msg::SetupFailed(e));
        sys::exit_now(spec::exit::SETUP_FAILED)
    };
    // airlock run starts the task with every signal at its default and none blocked; bwrap
    // mode leaves the ones its caller ignored ignored and blocked blocked, as bubblewrap's
    // exec does (nohup, a script's background job).
    let mask = if spec.bwrap.is_some() {
        sys::caller_signal_dispositions();
        inh.caller_mask
    } else {
        sys::reset_signal_dispositions();
        SigSet::empty()
    };
    if let Err(e) = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&mask), None) {
        fail(format!("step 13: sigprocmask(SIG_SETMASK): {e}"));
    }
    // The task dies with its init (which dies with the launcher); checked after setting, as
    // the init may already be gone (without a pid namespace the task would be reparented).
    if let Some(init) = init {
        if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
            fail(format!("step 13: prctl(PR_SET_PDEATHSIG, SIGKILL): {e}"));
        }
        if nix::unistd::getppid() != init {
            sys::exit_now(spec::exit::SETUP_FAILED);
        }
    }
    if let Some((out, err)) = &inh.capture {
        let ok = named(
            nix::fcntl::open("/dev/null", OFlag::O_RDONLY, Mode::empty()),
            || "open(\"/dev/null\", O_RDONLY)".into(),
        )
        .and_then(|null| {
            named(nix::unistd::dup2_stdin(null), || {
                "dup2(/dev/null, 0)".into()
            })
        })
        .and_then(|_| {
            named(nix::unistd::dup2_stdout(out), || {
                "dup2(<stdout pipe>, 1)".into()
            })
        })
        .and_then(|_| {
            named(nix::unistd::dup2_stderr(err), || {
                "dup2(<stderr pipe>, 2)".into()
            })
        });
        if let Err(e) = ok {
            fail(format!("step 13: {e}"));
        }
    }
    for (stream, end) in inh.relayed.iter().enumerate() {
        let dup2_to = |fd: &OwnedFd, n: usize| match n {
            0 => nix::unistd::dup2_stdin(fd),
            1 => nix::unistd::dup2_stdout(fd),
            _ => nix::unistd::dup2_stderr(fd),
        };
        if let Some(end) = end
            && let Err(e) = named(dup2_to(end, stream), || {
                format!("dup2(<the task's stream: a relay's pipe, or its own open file>, {stream})")
            })
        {
            fail(format!("step 13: {e}"));
        }
    }
    // Back to the caller's process group, which the init left (boundary::init): a signal to
    // the group reaches the task, as bubblewrap's, and the init does not pass it on again.
    if let Some(group) = inh.caller_group
        && let Err(e) = nix::unistd::setpgid(Pid::from_raw(0), group)
    {
        fail(format!("step 13: setpgid(0, {group}): {e}"));
    }
    // A new session with no controlling terminal (TIOCSTI injection, CVE-2017-5226): made
    // here when the task has no reaper of its own in a new pid namespace, else by the init
    // (where bubblewrap makes it too).
    if spec.lockdown.new_session
        && session_in_task(spec)
        && let Err(e) = nix::unistd::setsid()
    {
        fail(format!("step 13: setsid(): {e}"));
    }
    // Every descriptor but 0-2 closes at exec, the channel included. bwrap mode, as
    // bubblewrap: those the caller left open reach the task, but for those an option names
    // (airlock's own are all close-on-exec).
    let closed = match &spec.bwrap {
        None => sys::cloexec_from(3),
        Some(b) => b
            .named_fds
            .iter()
            .filter(|&&fd| !(spec.lockdown.as_pid_1 && b.sync_fd == Some(fd)))
            .try_for_each(|&fd| sys::set_cloexec(fd)),
    };
    if let Err(e) = closed {
        fail(format!("step 13: {e}"));
    }
    if let Some(fd) = spec.bwrap.as_ref().and_then(|b| b.block_fd)
        && let Err(e) = wait_on_fd(fd)
    {
        fail(format!("step 13: {e}"));
    }
    // The seccomp filter last, because it denies calls the steps above need.
    if let Err(e) = install_seccomp(&spec.lockdown.seccomp) {
        let err = StepError {
            step: "13 seccomp",
            err: e,
        };
        fail(match spec.bwrap {
            Some(_) => crate::bwrap::message(&err),
            None => err.to_string(),
        });
    }
    let (code, msg) = match plan.as_execvp {
        // bubblewrap's child dies with 1 when execvp fails; bwrap.rs says its errno.
        true => (1, sys::errno_text(execvp(plan)).to_string()),
        false => exec_search(plan),
    };
    let _ = channel::send(sock, &Msg::ExecFailed(code, msg));
    sys::exit_now(code)
}

/// Why a file that is there could not be started: execve's ENOENT for an existing file.
const NO_INTERPRETER: &str =
    "the interpreter its #! line names (or its ELF loader) is not in the sandbox";

/// What the existing `file` execve answered ENOENT for names to start it with: the
/// interpreter of its #! line, quoted as the kernel reads it (the first word, at most 255
/// bytes of the line), or its ELF loader.
fn missing_interpreter(file: &CStr) -> String {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(std::ffi::OsStr::from_bytes(file.to_bytes()))
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let head = &head[..n];
    match head.strip_prefix(b"#!") {
        Some(line) => {
            let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
            let word = (line.split(|&b| b == b' ' || b == b'\t'))
                .find(|w| !w.is_empty())
                .unwrap_or_default();
            format!(
                "the interpreter its #! line names, {:?}, is not in the sandbox",
                String::from_utf8_lossy(word)
            )
        }
        None if head.starts_with(b"\x7fELF") => "its ELF loader is not in the sandbox".into(),
        None => NO_INTERPRETER.into(),
    }
}

/// The argv execve is given: bwrap's --argv0 names the program started, looked up by its
/// real name.
fn task_argv(plan: &ExecPlan) -> Vec<CString> {
    let mut argv = plan.argv.clone();
    if let Some(a0) = &plan.argv0 {
        argv[0] = a0.clone();
    }
    argv
}

/// execve `file`; a file the kernel cannot start (ENOEXEC: no #! line) is a shell script to
/// execvp(3), which /bin/sh runs with its path as $0. The errno of the last execve.
fn execve_or_sh(file: &CString, argv: &[CString], envp: &[CString]) -> Errno {
    match nix::unistd::execve(file, argv, envp).unwrap_err() {
        Errno::ENOEXEC => sh_script(file, argv, envp),
        e => e,
    }
}

/// execve /bin/sh with `file` as its script and argv's arguments after it.
fn sh_script(file: &CString, argv: &[CString], envp: &[CString]) -> Errno {
    let mut sh = vec![sys::cstring("/bin/sh"), file.clone()];
    sh.extend(argv.iter().skip(1).cloned());
    nix::unistd::execve(&sh[0], &sh, envp).unwrap_err()
}

/// bwrap mode: execve argv[0] as glibc's execvp(3) finds it (bubblewrap calls it), returning
/// only on failure, with the errno execvp fails with. An empty name is ENOENT; a name with a
/// '/' is tried alone; a name past NAME_MAX is ENAMETOOLONG before any search. On PATH, a
/// file missing or denied (ENOENT, ENOTDIR, ESTALE, ENODEV, ETIMEDOUT; EACCES, remembered)
/// sends the search on to the next entry; any other errno (ELOOP, ENAMETOOLONG of an entry,
/// ETXTBSY, E2BIG, a filter's EPERM) ends it and is the answer. Past the last entry the
/// answer is EACCES if any entry denied it, else the last entry's errno (ENOTDIR where that
/// entry is a file). An entry longer than a PATH capped at PATH_MAX - 1 bytes could be is
/// not tried, and glibc tries the working directory in its place if more entries follow.
fn execvp(plan: &ExecPlan) -> Errno {
    let (envp, name) = (&plan.envp, plan.argv[0].as_bytes());
    let argv = task_argv(plan);
    if name.is_empty() {
        return Errno::ENOENT;
    }
    if name.contains(&b'/') {
        return execve_or_sh(&plan.argv[0], &argv, envp);
    }
    if name.len() > libc::NAME_MAX as usize {
        return Errno::ENAMETOOLONG;
    }
    let path = plan.path.as_bytes();
    let room = path.len().min(libc::PATH_MAX as usize - 1) + 1;
    let entries: Vec<&[u8]> = path.split(|&b| b == b':').collect();
    let (mut denied, mut last) = (false, None);
    for (i, dir) in entries.iter().enumerate() {
        let dir: &[u8] = match dir.len() >= room {
            true if i + 1 == entries.len() => break,
            true => b"",
            false => dir,
        };
        let mut file = dir.to_vec();
        if !dir.is_empty() {
            file.push(b'/');
        }
        file.extend_from_slice(name);
        // PATH and the name come from C strings; an entry no file could have is passed over
        // (this runs in the task, where nothing may panic).
        let Ok(file) = CString::new(file) else {
            continue;
        };
        let e = execve_or_sh(&file, &argv, envp);
        match e {
            Errno::EACCES => denied = true,
            Errno::ENOENT | Errno::ESTALE | Errno::ENOTDIR | Errno::ENODEV | Errno::ETIMEDOUT => {}
            other => return other,
        }
        last = Some(e);
    }
    match (denied, last) {
        (true, _) => Errno::EACCES,
        (false, Some(e)) => e,
        // Nothing tried (PATH one entry too long): glibc leaves errno as it was.
        (false, None) => Errno::ENOENT,
    }
}

/// `airlock run`: execve argv[0], searching `path` when it has no '/', with bash's exit codes.
/// Returns only on failure: 127 when no such command exists, 126 when one exists but cannot
/// be executed, or a path to it cannot be followed (a file for a directory, a loop, a name
/// past 255 bytes, a directory it may not search), as bash says. The message says why, not
/// which command: the launcher puts the name before it, which a path up to PATH_MAX long
/// would otherwise push past the channel's cap on a message, cutting the reason off.
fn exec_search(plan: &ExecPlan) -> (i32, String) {
    let (envp, path) = (&plan.envp, plan.path.as_str());
    let argv = task_argv(plan);
    let name = plan.argv[0].to_string_lossy().into_owned();
    let candidates: Vec<CString> = if name.is_empty() {
        // No file has an empty name (execvp(3) fails with ENOENT rather than trying "DIR/").
        vec![]
    } else if name.contains('/') {
        vec![plan.argv[0].clone()]
    } else {
        // An empty entry is the working directory, as to execvp(3).
        path.split(':')
            .map(|d| match d {
                "" => sys::cstring(&name),
                d => sys::cstring(&format!("{d}/{name}")),
            })
            .collect()
    };
    // The first refusal, and the file it was of.
    let mut denied: Option<(Errno, &CString)> = None;
    for c in &candidates {
        let e = nix::unistd::execve(c, &argv, envp).unwrap_err();
        match e {
            // A name searched for on PATH that no directory can hold (past 255 bytes), a PATH
            // entry too long to hold any, or one whose way loops (ELOOP: a symlink to itself):
            // nothing there to run, as bash's search finds by stat (127 if nothing else is;
            // airlock had said a looping entry "cannot execute", 126). bwrap mode's execvp
            // stops at either instead.
            Errno::ENAMETOOLONG | Errno::ELOOP if !name.contains('/') => {}
            // The file is there, but what it names to start it with is not: the interpreter of
            // its #! line or its ELF loader (a venv's script naming a host python, say). It
            // cannot be executed, as a shell says (126), rather than not found.
            Errno::ENOENT if nix::unistd::access(c.as_c_str(), AccessFlags::F_OK).is_ok() => {
                denied.get_or_insert((Errno::ENOENT, c));
            }
            Errno::ENOENT => {}
            // A PATH entry that is a file: bash's search passes over it. A path whose
            // directory part is a file is refused (126, "Not a directory"), as bash does
            // (dash says not found, 127); airlock had said "command not found".
            Errno::ENOTDIR if !name.contains('/') => {}
            // A file the kernel cannot start (no #! line) is a shell script: /bin/sh runs it,
            // with its path as $0, as execvp(3) does. Without /bin/sh it cannot be executed.
            Errno::ENOEXEC => {
                let e = match sh_script(c, &argv, envp) {
                    Errno::ENOENT => Errno::ENOEXEC,
                    other => other,
                };
                denied.get_or_insert((e, c));
            }
            other => {
                denied.get_or_insert((other, c));
            }
        }
    }
    match denied {
        Some((Errno::ENOENT, file)) => (
            spec::exit::NOT_EXECUTABLE,
            format!("cannot execute: {}", missing_interpreter(file)),
        ),
        Some((e, file)) => {
            let why = match e {
                Errno::EACCES => why_not_executable(file),
                _ => String::new(),
            };
            (
                spec::exit::NOT_EXECUTABLE,
                format!("cannot execute: {}{why}", sys::errno_text(e)),
            )
        }
        // No file has a name past NAME_MAX: dash says so (bash only that it is not found). A
        // name with a '/' is a path, not searched for: its execve said why it failed.
        None if !name.contains('/') && name.len() > libc::NAME_MAX as usize => (
            spec::exit::NOT_FOUND,
            format!(
                "command not found: {}",
                sys::errno_text(Errno::ENAMETOOLONG)
            ),
        ),
        None => (spec::exit::NOT_FOUND, "command not found".into()),
    }
}

/// Why execve answered EACCES for `file`, where the file itself says (execve does not): a
/// directory, or a file without an execute bit, such as an input given as text (in scratch).
fn why_not_executable(file: &CString) -> String {
    use nix::sys::stat::stat;
    match stat(file.as_c_str()) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => " (it is a directory)".into(),
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_mode & 0o111 == 0 => {
            let input = match stat(spec::SCRATCH).is_ok_and(|s| s.st_dev == st.st_dev) {
                true => {
                    ": an input is copied executable only when its host file is, a request's \
                     never; run it through its interpreter (sh NAME) or chmod +x it first"
                }
                false => "",
            };
            format!(
                " (its mode, {:04o}, has no execute bit{input})",
                st.st_mode & 0o7777
            )
        }
        // The file cannot even be looked at: a directory on its way may not be searched by
        // the task's identity (a bound host directory of mode 0700, say).
        Err(Errno::EACCES) => " (a directory on its path may not be searched by the task: \
                               mode 0700 on the host, say; give it an execute bit for others)"
            .into(),
        _ => String::new(),
    }
}
