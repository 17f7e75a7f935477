//! The boundary: the code that runs in the sandbox's first process (pid 1 of the new pid
//! namespace) and isolates the task. It is the only code an auditor must read to judge
//! isolation, and it reads top to bottom in kernel order; the step numbers match the README.
//!
//! The launcher (`launch.rs`) has already created every namespace with one clone3 call (step 1)
//! and writes the id maps (step 2) while this side waits. If any step fails, the error (naming
//! the step, the syscall, its path and the errno) goes to the launcher and the task never runs.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};

use crate::channel::{self, Handed, Msg};
use crate::spec::{self, InputSource, Output, SANDBOX_GID, SANDBOX_UID, SCRATCH, Spec};
use crate::sys::{self, SysError, named};

/// Everything the sandbox's init inherits from the launcher across clone3.
pub struct Inherited<'a> {
    pub spec: &'a Spec,
    /// The child's end of the channel.
    pub sock: OwnedFd,
    /// Input files opened by the launcher with the caller's rights, in `spec.inputs` order
    /// (`None` for inputs given as text).
    pub inputs: Vec<Option<File>>,
    /// Write ends of the stdout/stderr pipes in JSON mode.
    pub capture: Option<(OwnedFd, OwnedFd)>,
    /// The launcher runs as root: the task must still be unprivileged on the host.
    pub caller_is_root: bool,
    /// Resource limits set before the task starts (inherited by all its processes).
    pub rlimits: Vec<(nix::sys::resource::Resource, u64, u64)>,
}

/// A failed step: which one, what failed, and a hint when one exists.
#[derive(Debug)]
pub struct StepError {
    pub step: &'static str,
    pub err: SysError,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {}", self.step, self.err)?;
        if let Some(h) = hint(&self.err) {
            write!(f, "; hint: {h}")?;
        }
        Ok(())
    }
}

trait Step<T> {
    fn step(self, step: &'static str) -> Result<T, StepError>;
}

impl<T> Step<T> for Result<T, SysError> {
    fn step(self, step: &'static str) -> Result<T, StepError> {
        self.map_err(|err| StepError { step, err })
    }
}

/// System paths bound read-only (as the host has them: a real directory is bound, a usr-merge
/// symlink is recreated as the same symlink). `/usr` must exist; the others are optional.
pub const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The only host files of `/etc` that appear inside (read-only, each only if the host has it):
/// what the dynamic loader, Debian's program alternatives, TLS, time zones, locales, and name
/// lookups of services and protocols need. Everything else of /etc (shadow, ssh keys, pip and
/// git configuration that may hold tokens) stays out. passwd, group, hosts, nsswitch.conf and
/// hostname are generated for the sandbox instead.
pub const ETC_FROM_HOST: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "services",
    "protocols",
    "mime.types",
    "magic",
    "terminfo",
    "inputrc",
    "os-release",
    "debian_version",
];

/// Device nodes bound from the host (the kernel refuses to let a user namespace create them).
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

pub const DEV_LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("ptmx", "pts/ptmx"),
];

/// Where the new root is built before pivot_root: a tmpfs mounted over /tmp in this (private)
/// mount namespace only.
const NEW_ROOT: &str = "/tmp";

/// The entry point of the sandbox's init after clone3. Never returns.
pub fn init(inh: Inherited) -> ! {
    let sock = inh.sock.as_fd();
    match build(&inh) {
        Ok(task) => supervise(task, sock),
        Err(e) => {
            let _ = channel::send(sock, &Msg::SetupFailed(e.to_string()));
            sys::exit_now(spec::exit::SETUP_FAILED)
        }
    }
}

/// Steps 3 to 12, in order. Returns the pid of the running task.
fn build(inh: &Inherited) -> Result<Pid, StepError> {
    let spec = inh.spec;
    let sock = inh.sock.as_fd();

    // 3. Sanitize descriptors; die with the launcher. Only the channel, the input files and
    //    the capture pipes stay open. PR_SET_PDEATHSIG is set, then the launcher is checked
    //    still alive (it may have died before the call: its end of the channel is then closed).
    let mut keep = vec![sock.as_raw_fd()];
    keep.extend(inh.inputs.iter().flatten().map(|f| f.as_raw_fd()));
    if let Some((o, e)) = &inh.capture {
        keep.extend([o.as_raw_fd(), e.as_raw_fd()]);
    }
    sys::close_fds_except(&keep).step("3 sanitize descriptors")?;
    die_with_launcher(sock).step("3 die with the launcher")?;

    // 2 (this side). Wait until the launcher has written our uid/gid maps.
    match channel::recv(sock, false).step("2 wait for id maps")? {
        Some(Msg::MapsReady) => {}
        _ => return Err(lost("2 wait for id maps")),
    }

    // 4. Make every mount private, so nothing done here propagates to the host and no host
    //    mount event reaches the sandbox.
    named(
        nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
            None::<&str>,
        ),
        || "mount(\"/\", MS_REC|MS_PRIVATE)".into(),
    )
    .step("4 make mounts private")?;

    // 5. Take detached copies of every host tree the sandbox will see, while we still hold the
    //    caller's identity (a root caller can name paths the sandbox user could not reach).
    //    Each copy is made read-only, nosuid, nodev, submounts included, before it is
    //    attached anywhere.
    let trees = clone_host_trees(spec).step("5 copy host paths")?;

    // 6. Become the sandbox user (uid/gid 1000 inside; on the host, the caller's uid, or an
    //    unprivileged uid when the caller is root). This clears PR_SET_PDEATHSIG and the
    //    dumpable flag, so both are set again: non-dumpable keeps the task out of
    //    /proc/1/{environ,mem,fd} of this init.
    become_sandbox_user(inh.caller_is_root).step("6 become the sandbox user")?;
    die_with_launcher(sock).step("6 die with the launcher")?;
    named(nix::sys::prctl::set_dumpable(false), || {
        "prctl(PR_SET_DUMPABLE, 0)".into()
    })
    .step("6 become the sandbox user")?;

    // 7. Build the new root on a fresh tmpfs: system paths, a minimal /etc, /dev, /proc,
    //    the scratch directory with the inputs copied in.
    let root = make_tmpfs_root().step("7 new root")?;
    let root = root.as_fd();
    attach_host_trees(root, &trees).step("7 attach host paths")?;
    write_generated_etc().step("7 write /etc")?;
    make_dev(root, &trees).step("7 make /dev")?;
    mount_fs(
        "proc",
        "proc",
        "proc",
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC
            | nix::mount::MsFlags::MS_RDONLY,
        None,
    )
    .step("7 mount /proc")?;
    attach_user_binds(root, &trees).step("7 attach binds")?;
    let (scratch, handed) = make_scratch(inh).step("7 scratch directory")?;

    // 8. pivot_root into the new root and detach the old one: no host path stays reachable.
    enter_new_root().step("8 pivot_root")?;

    // 9. The root itself becomes read-only (scratch, /dev/shm and /dev/pts are separate,
    //    writable mounts).
    let new_root = named(
        nix::fcntl::open(
            "/",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || "open(\"/\", O_PATH)".into(),
    )
    .step("9 read-only root")?;
    sys::set_mount_attrs(
        new_root.as_fd(),
        "",
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        false,
        Path::new("/"),
    )
    .step("9 read-only root")?;
    named(nix::unistd::chdir(SCRATCH), || {
        format!("chdir({SCRATCH:?})")
    })
    .step("9 enter scratch")?;

    // 10. Hostname and network: loopback up, nothing else exists in the new net namespace.
    named(nix::unistd::sethostname("airlock"), || {
        "sethostname(\"airlock\")".into()
    })
    .step("10 hostname")?;
    if !spec.share_net {
        sys::loopback_up().step("10 loopback")?;
    }

    // 11. Hand the launcher a descriptor of scratch so it can collect result files after the
    //     whole sandbox is gone (the descriptor keeps the tmpfs alive; nothing is on disk).
    if let Output::Json { .. } = spec.output {
        channel::send(sock, &Msg::Scratch(scratch, handed)).step("11 hand over scratch")?;
    } else {
        drop(scratch);
    }

    // 12. Lock down, in this order: capabilities dropped in every set (bounding, ambient,
    //     inheritable, permitted, effective); no_new_privs (so exec can never add privilege,
    //     setuid bits included, and so an unprivileged process may install seccomp); a new
    //     session with no controlling terminal (TIOCSTI injection, CVE-2017-5226); the
    //     seccomp filters last, because they deny calls the steps above need.
    for (res, soft, hard) in &inh.rlimits {
        named(nix::sys::resource::setrlimit(*res, *soft, *hard), || {
            format!("setrlimit({res:?}, {soft}, {hard})")
        })
        .step("12 resource limits")?;
    }
    drop_all_caps().step("12 drop capabilities")?;
    named(nix::sys::prctl::set_no_new_privs(), || {
        "prctl(PR_SET_NO_NEW_PRIVS, 1)".into()
    })
    .step("12 no_new_privs")?;
    named(nix::unistd::setsid(), || "setsid()".into()).step("12 new session")?;
    crate::seccomp::install().step("12 seccomp")?;

    // 13. Start the task as pid 2; this init stays as its reaper and waits for signals with
    //     SIGCHLD blocked (SIGINT, SIGTERM and SIGHUP arrive blocked from the launcher).
    let mut blocked = SigSet::empty();
    blocked.add(Signal::SIGCHLD);
    named(
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None),
        || "sigprocmask(SIG_BLOCK, SIGCHLD)".into(),
    )
    .step("13 start task")?;
    let argv: Vec<CString> = spec.argv.iter().map(|a| sys::cstring(a)).collect();
    let envp: Vec<CString> = spec
        .env
        .iter()
        .map(|(n, v)| sys::cstring(&format!("{n}={v}")))
        .collect();
    let path_var = spec
        .env
        .iter()
        .find(|(n, _)| n == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    match sys::fork_process().step("13 start task")? {
        None => exec_task(inh, &argv, &envp, &path_var),
        Some(pid) => Ok(pid),
    }
}

fn lost(step: &'static str) -> StepError {
    StepError {
        step,
        err: SysError {
            call: "recvmsg(<channel>): launcher went away".into(),
            errno: Errno::EPIPE,
        },
    }
}

fn die_with_launcher(sock: BorrowedFd) -> Result<(), SysError> {
    named(nix::sys::prctl::set_pdeathsig(Signal::SIGKILL), || {
        "prctl(PR_SET_PDEATHSIG, SIGKILL)".into()
    })?;
    // getppid() is 0 in a new pid namespace, so the launcher's liveness is read from the
    // channel: if its end is closed, it died before PR_SET_PDEATHSIG took effect.
    let mut fds = [nix::poll::PollFd::new(sock, nix::poll::PollFlags::empty())];
    named(
        nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
        || "poll(<channel>)".into(),
    )?;
    let gone = fds[0]
        .revents()
        .is_some_and(|r| r.intersects(nix::poll::PollFlags::POLLHUP));
    if gone {
        sys::exit_now(spec::exit::SETUP_FAILED);
    }
    Ok(())
}

/// The detached host trees, taken in step 5.
struct Trees {
    /// (path inside, tree) for system paths that are real directories.
    system: Vec<(PathBuf, OwnedFd)>,
    /// (path inside, symlink target) for usr-merge symlinks.
    links: Vec<(PathBuf, PathBuf)>,
    /// (name under /etc, tree, is_dir)
    etc: Vec<(PathBuf, OwnedFd, bool)>,
    /// (name under /dev, tree)
    devices: Vec<(&'static str, OwnedFd)>,
    /// (dest inside, tree, is_dir) in the order given.
    binds: Vec<(PathBuf, OwnedFd, bool)>,
}

fn clone_host_trees(spec: &Spec) -> Result<Trees, SysError> {
    let ro = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let mut t = Trees {
        system: vec![],
        links: vec![],
        etc: vec![],
        devices: vec![],
        binds: vec![],
    };
    for p in SYSTEM_PATHS {
        let path = Path::new(p);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = named(nix::fcntl::readlink(path), || format!("readlink({p:?})"))?;
                t.links.push((path.into(), target.into()));
            }
            Ok(m) if m.is_dir() => t.system.push((path.into(), clone_with(path, ro)?)),
            Ok(_) => {}
            Err(_) if *p != "/usr" => {}
            Err(e) => {
                return Err(SysError {
                    call: format!("lstat({p:?})"),
                    errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
                });
            }
        }
    }
    for name in ETC_FROM_HOST {
        let host = Path::new("/etc").join(name);
        match clone_with(&host, ro) {
            Ok(fd) => {
                let is_dir = host.is_dir();
                t.etc.push((PathBuf::from(name), fd, is_dir));
            }
            Err(e) if e.errno == Errno::ENOENT => {}
            Err(e) => return Err(e),
        }
    }
    for dev in DEVICES {
        // Device nodes must not be nodev; they are read-only (which does not stop writing to a
        // device) and nosuid, noexec.
        let fd = clone_with(
            &Path::new("/dev").join(dev),
            sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
        )?;
        t.devices.push((dev, fd));
    }
    for b in &spec.binds {
        let attrs = if b.writable {
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV
        } else {
            ro
        };
        let fd = clone_with(&b.src, attrs)?;
        t.binds.push((b.dest.clone(), fd, b.src.is_dir()));
    }
    Ok(t)
}

fn clone_with(path: &Path, attrs: u64) -> Result<OwnedFd, SysError> {
    let fd = sys::clone_tree(path)?;
    sys::set_mount_attrs(fd.as_fd(), "", attrs, true, path)?;
    Ok(fd)
}

fn become_sandbox_user(caller_is_root: bool) -> Result<(), SysError> {
    if caller_is_root {
        // A root caller's supplementary groups (root, disk, ...) must not follow the task.
        named(nix::unistd::setgroups(&[]), || "setgroups([])".into())?;
    }
    let (uid, gid) = (Uid::from_raw(SANDBOX_UID), Gid::from_raw(SANDBOX_GID));
    named(nix::unistd::setresgid(gid, gid, gid), || {
        format!("setresgid({SANDBOX_GID})")
    })?;
    named(nix::unistd::setresuid(uid, uid, uid), || {
        format!("setresuid({SANDBOX_UID})")
    })
}

fn mount_fs(
    src: &str,
    target: &str,
    fstype: &str,
    flags: nix::mount::MsFlags,
    data: Option<&str>,
) -> Result<(), SysError> {
    named(
        nix::mount::mount(Some(src), target, Some(fstype), flags, data),
        || format!("mount({src:?}, {target:?}, {fstype:?}, {flags:?}, {data:?})"),
    )
}

fn make_tmpfs_root() -> Result<OwnedFd, SysError> {
    use nix::mount::MsFlags;
    mount_fs(
        "tmpfs",
        NEW_ROOT,
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )?;
    named(nix::unistd::chdir(NEW_ROOT), || {
        format!("chdir({NEW_ROOT:?})")
    })?;
    named(
        nix::fcntl::open(
            ".",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || format!("open({NEW_ROOT:?}, O_PATH)"),
    )
}

/// mkdir -p relative to the new root (the cwd).
fn make_dirs(path: &Path) -> Result<(), SysError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .map_err(|e| io_err(e, || format!("mkdir -p {path:?}")))
}

fn make_file(path: &Path) -> Result<(), SysError> {
    if let Some(parent) = path.parent() {
        make_dirs(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
        .map(drop)
        .map_err(|e| io_err(e, || format!("open({path:?}, O_CREAT)")))
}

fn io_err(e: std::io::Error, call: impl FnOnce() -> String) -> SysError {
    SysError {
        call: call(),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// Relative form of an absolute path inside (for use under the new root, our cwd).
fn inside(p: &Path) -> PathBuf {
    p.strip_prefix("/").unwrap_or(p).to_path_buf()
}

fn attach(root: BorrowedFd, tree: &OwnedFd, dest: &Path, is_dir: bool) -> Result<(), SysError> {
    let rel = inside(dest);
    if is_dir {
        make_dirs(&rel)?;
    } else {
        make_file(&rel)?;
    }
    sys::attach_tree(tree.as_fd(), root, &rel)
}

fn attach_host_trees(root: BorrowedFd, t: &Trees) -> Result<(), SysError> {
    for (path, tree) in &t.system {
        attach(root, tree, path, true)?;
    }
    for (path, target) in &t.links {
        let rel = inside(path);
        std::os::unix::fs::symlink(target, &rel)
            .map_err(|e| io_err(e, || format!("symlink({target:?}, {path:?})")))?;
    }
    make_dirs(Path::new("etc"))?;
    for (name, tree, is_dir) in &t.etc {
        attach(root, tree, &Path::new("/etc").join(name), *is_dir)?;
    }
    Ok(())
}

fn attach_user_binds(root: BorrowedFd, t: &Trees) -> Result<(), SysError> {
    for (dest, tree, is_dir) in &t.binds {
        attach(root, tree, dest, *is_dir)?;
    }
    Ok(())
}

/// passwd and group name only the sandbox user and nobody; hosts knows only localhost.
fn write_generated_etc() -> Result<(), SysError> {
    let user = spec::SANDBOX_USER;
    let files: [(&str, String); 5] = [
        (
            "etc/passwd",
            format!(
                "{user}:x:{SANDBOX_UID}:{SANDBOX_GID}:airlock sandbox:{SCRATCH}:/bin/sh\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        (
            "etc/group",
            format!("{user}:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"),
        ),
        (
            "etc/hosts",
            "127.0.0.1\tlocalhost airlock\n::1\tlocalhost ip6-localhost ip6-loopback\n".into(),
        ),
        (
            "etc/nsswitch.conf",
            "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n\
             protocols: files\nservices: files\n"
                .into(),
        ),
        ("etc/hostname", "airlock\n".into()),
    ];
    for (path, text) in files {
        std::fs::write(path, text).map_err(|e| io_err(e, || format!("write({path:?})")))?;
    }
    Ok(())
}

fn make_dev(root: BorrowedFd, t: &Trees) -> Result<(), SysError> {
    use nix::mount::MsFlags;
    make_dirs(Path::new("dev"))?;
    for (name, tree) in &t.devices {
        attach(root, tree, &Path::new("/dev").join(name), false)?;
    }
    for (name, target) in DEV_LINKS {
        let link = Path::new("dev").join(name);
        std::os::unix::fs::symlink(target, &link)
            .map_err(|e| io_err(e, || format!("symlink({target:?}, {link:?})")))?;
    }
    make_dirs(Path::new("dev/pts"))?;
    mount_fs(
        "devpts",
        "dev/pts",
        "devpts",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )?;
    make_dirs(Path::new("dev/shm"))?;
    mount_fs(
        "tmpfs",
        "dev/shm",
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    )?;
    make_dirs(Path::new("proc"))
}

/// A tmpfs at /work owned by the sandbox user, with the inputs copied in (never bound).
fn make_scratch(inh: &Inherited) -> Result<(OwnedFd, Handed), SysError> {
    let mut handed = Vec::new();
    use nix::mount::MsFlags;
    let rel = inside(Path::new(SCRATCH));
    make_dirs(&rel)?;
    let target = rel.to_string_lossy().into_owned();
    let opts = format!("mode=0755,size={}", inh.spec.limits.scratch_size);
    mount_fs(
        "tmpfs",
        &target,
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(&opts),
    )?;
    // /tmp inside is the scratch directory, like TMPDIR.
    std::os::unix::fs::symlink(SCRATCH, "tmp")
        .map_err(|e| io_err(e, || "symlink(\"/work\", \"tmp\")".into()))?;
    for (input, file) in inh.spec.inputs.iter().zip(&inh.inputs) {
        let dest = rel.join(&input.name);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&dest)
            .map_err(|e| io_err(e, || format!("open({dest:?}, O_CREAT|O_EXCL)")))?;
        let copied = match (&input.source, file) {
            (InputSource::Bytes(b), _) => out
                .write_all(b)
                .map(|_| (b.len() as u64, channel::content_hash(b))),
            (InputSource::HostFile(_), Some(f)) => {
                if f.metadata()
                    .map(|m| m.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false)
                {
                    let _ = out.set_permissions(std::fs::Permissions::from_mode(0o755));
                }
                copy_hashing(f, &mut out)
            }
            (InputSource::HostFile(p), None) => {
                return Err(SysError {
                    call: format!("input {p:?} was not opened"),
                    errno: Errno::EBADF,
                });
            }
        };
        let (size, hash) = copied
            .map_err(|e| io_err(e, || format!("copy input {:?} into scratch", input.name)))?;
        handed.push((input.name.clone(), size, hash));
    }
    let fd = named(
        nix::fcntl::open(
            rel.as_path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || format!("open({SCRATCH:?}, O_DIRECTORY)"),
    )?;
    Ok((fd, handed))
}

/// Copy `from` into `to`, returning the size and content hash of what was copied.
fn copy_hashing(mut from: &File, to: &mut File) -> std::io::Result<(u64, u64)> {
    use std::hash::Hasher;
    use std::io::Read;
    let mut h = std::hash::DefaultHasher::new();
    let mut buf = vec![0u8; 128 * 1024];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok((total, h.finish()));
        }
        h.write(&buf[..n]);
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

fn enter_new_root() -> Result<(), SysError> {
    // pivot_root(".", "."): the old root ends up stacked on the new one and is detached at once,
    // so no directory of the host remains reachable from inside.
    named(nix::unistd::pivot_root(".", "."), || {
        format!("pivot_root({NEW_ROOT:?}, {NEW_ROOT:?})")
    })?;
    named(
        nix::mount::umount2(".", nix::mount::MntFlags::MNT_DETACH),
        || "umount2(<old root>, MNT_DETACH)".into(),
    )?;
    named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())
}

fn drop_all_caps() -> Result<(), SysError> {
    use caps::CapSet;
    for set in [
        CapSet::Bounding,
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| SysError {
            call: format!("capset/prctl clearing {set:?} ({e})"),
            errno: Errno::EPERM,
        })?;
    }
    Ok(())
}

/// The task, pid 2: default signals, its stdio, every other descriptor closed at exec, then
/// execve with the environment built from nothing. Never returns.
fn exec_task(inh: &Inherited, argv: &[CString], envp: &[CString], path: &str) -> ! {
    let sock = inh.sock.as_fd();
    sys::reset_signal_dispositions();
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    if let Some((out, err)) = &inh.capture {
        let null = nix::fcntl::open("/dev/null", OFlag::O_RDONLY, Mode::empty());
        let ok = null
            .and_then(nix::unistd::dup2_stdin)
            .and_then(|_| nix::unistd::dup2_stdout(out))
            .and_then(|_| nix::unistd::dup2_stderr(err));
        if let Err(e) = ok {
            let _ = channel::send(
                sock,
                &Msg::SetupFailed(format!("step 13: dup2 of stdio: {e}")),
            );
            sys::exit_now(spec::exit::SETUP_FAILED);
        }
    }
    if let Err(e) = sys::cloexec_from(3) {
        let _ = channel::send(sock, &Msg::SetupFailed(format!("step 13: {e}")));
        sys::exit_now(spec::exit::SETUP_FAILED);
    }
    let (code, msg) = exec_search(argv, envp, path);
    let _ = channel::send(sock, &Msg::ExecFailed(code, msg));
    sys::exit_now(code)
}

/// execve argv[0], searching `path` when it has no '/'. Returns only on failure: 127 when no
/// such command exists, 126 when one exists but cannot be executed.
fn exec_search(argv: &[CString], envp: &[CString], path: &str) -> (i32, String) {
    let name = argv[0].to_string_lossy().into_owned();
    let candidates: Vec<CString> = if name.contains('/') {
        vec![argv[0].clone()]
    } else {
        path.split(':')
            .filter(|d| !d.is_empty())
            .map(|d| sys::cstring(&format!("{d}/{name}")))
            .collect()
    };
    let mut denied: Option<Errno> = None;
    for c in &candidates {
        let e = nix::unistd::execve(c, argv, envp).unwrap_err();
        match e {
            Errno::ENOENT | Errno::ENOTDIR => {}
            other => denied = Some(denied.unwrap_or(other)),
        }
    }
    match denied {
        Some(e) => (
            spec::exit::NOT_EXECUTABLE,
            format!("{name}: cannot execute: {}", sys::errno_text(e)),
        ),
        None => (spec::exit::NOT_FOUND, format!("{name}: command not found")),
    }
}

/// Init's loop: reap every process, forward SIGINT/SIGTERM/SIGHUP to the task, and report the
/// task's end. When init exits, the kernel kills whatever else is left in the pid namespace.
fn supervise(task: Pid, sock: BorrowedFd) -> ! {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
    ] {
        set.add(s);
    }
    loop {
        let sig = match set.wait() {
            Ok(s) => s,
            Err(_) => continue,
        };
        if sig != Signal::SIGCHLD {
            let _ = kill(task, sig);
            continue;
        }
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == task => report_end(sock, false, code),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == task => {
                    report_end(sock, true, sig as i32)
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

fn report_end(sock: BorrowedFd, signaled: bool, value: i32) -> ! {
    let cpu_ms = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map(|u| {
            let ms =
                |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1000 + t.tv_usec() as u64 / 1000;
            ms(u.user_time()) + ms(u.system_time())
        })
        .unwrap_or(0);
    let _ = channel::send(
        sock,
        &Msg::TaskEnded {
            signaled,
            value,
            cpu_ms,
        },
    );
    sys::exit_now(0)
}

/// A hint for the failures whose usual cause is known.
pub fn hint(err: &SysError) -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if err.errno == Errno::EPERM || err.errno == Errno::ENOSPC || err.errno == Errno::EACCES {
        if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
            return Some("user namespaces are disabled: sysctl user.max_user_namespaces=0".into());
        }
        if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return Some(
                "unprivileged user namespaces are disabled: sysctl kernel.unprivileged_userns_clone=0"
                    .into(),
            );
        }
        if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
            return Some(
                "AppArmor restricts unprivileged user namespaces \
                 (kernel.apparmor_restrict_unprivileged_userns=1): allow airlock with an AppArmor \
                 profile that grants 'userns'"
                    .into(),
            );
        }
    }
    if err.call.starts_with("mount(\"proc\"") && err.errno == Errno::EPERM {
        return Some(
            "the kernel refuses a new /proc when the host's /proc is partly hidden \
             (as inside some containers)"
                .into(),
        );
    }
    if err.errno == Errno::ENOSYS {
        return Some("airlock needs Linux 5.12 or newer (clone3, open_tree, mount_setattr)".into());
    }
    None
}
