//! The boundary: the code that runs in the sandbox's first process (pid 1 of the new pid
//! namespace) and isolates the task. It is the only code an auditor must read to judge
//! isolation, and it reads top to bottom in kernel order; the step numbers match the README.
//!
//! The launcher (`launch.rs`) has already created every namespace with one clone3 call (step 1)
//! but the network one, which it makes in this side's user namespace while steps 2-9 run and
//! hands over for step 10. For a root caller it writes the id maps (step 2) while this side
//! waits; an unprivileged caller's maps are written by this side. If any step fails, the
//! error (naming the step, the syscall, its path and the errno) goes to the launcher and the
//! task never runs.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::MsFlags;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{AccessFlags, Gid, Pid, Uid};

use crate::channel::{self, Handed, Msg};
use crate::spec::{
    self, Access, FsOp, InputSource, Output, OverlayUpper, SANDBOX_GID, SANDBOX_UID, SCRATCH,
    Seccomp, Spec,
};
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
    /// The task's ends of the pipes the launcher relays a streamed run's regular-file streams
    /// through (`relay.rs`), put on fds 0-2 at step 13; `None`: the stream as it is.
    pub relayed: [Option<OwnedFd>; 3],
    /// The launcher runs as root: the task must still be unprivileged on the host.
    pub caller_is_root: bool,
    /// The uid and gid maps this init writes for itself (an unprivileged caller maps only its
    /// own ids, which a process may do for its own new user namespace); `None`: the launcher
    /// writes them and says so on the channel.
    pub own_maps: Option<(String, String)>,
    /// The launcher is making a cgroup v1 for this run and will hand over its `tasks` files;
    /// this init joins it before it starts the task.
    pub cgroup_v1: bool,
    /// The launcher makes the network namespace (in this init's user namespace, which it opens
    /// through /proc) and hands it over; this init joins it at step 10.
    pub net_by_launcher: bool,
    /// Resource limits set before the task starts (inherited by all its processes).
    pub rlimits: Vec<(nix::sys::resource::Resource, u64, u64)>,
    /// The signals the caller had blocked: bwrap mode's task starts with them blocked.
    pub caller_mask: SigSet,
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

/// Host files of `/etc` that appear only with the host's network (--share-net), bound as
/// ETC_FROM_HOST's are: the resolver's configuration, so that names resolve through DNS as on
/// the host (a symlink, as systemd-resolved's into /run, is followed and what it leads to is
/// bound; absent or dangling, nothing is). Without --share-net the sandbox has only loopback,
/// no server to ask, and no resolv.conf.
const ETC_WITH_SHARED_NET: &[&str] = &["resolv.conf"];

/// The names of the host's /etc entries taken into a sandbox (each only if the host has it)
/// whose network is the host's (`shared_net`) or its own.
pub fn etc_from_host(shared_net: bool) -> impl Iterator<Item = &'static str> {
    let with_net: &[&str] = if shared_net { ETC_WITH_SHARED_NET } else { &[] };
    ETC_FROM_HOST.iter().chain(with_net).copied()
}

/// The generated nsswitch.conf's `hosts:` sources. Other names than /etc/hosts's are looked up
/// through DNS only with the host's network, where the host's resolv.conf is bound: with glibc's
/// own `dns` module (part of libc since 2.34), not the host's hosts line, whose modules
/// (resolve, mymachines, mdns) ask daemons through sockets under /run that the sandbox does
/// not have. (musl reads resolv.conf without nsswitch.)
pub fn hosts_sources(shared_net: bool) -> &'static str {
    if shared_net { "files dns" } else { "files" }
}

/// Device nodes bound from the host (the kernel refuses to let a user namespace create them).
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

pub const DEV_LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("ptmx", "pts/ptmx"),
    ("core", "/proc/kcore"),
];

/// The entry point of the sandbox's init after clone3. Never returns.
pub fn init(inh: Inherited) -> ! {
    // The task can read this process's /proc/1/cmdline: it is not to show the caller's line.
    sys::blank_argv();
    let sock = inh.sock.as_fd();
    if let Some(fd) = inh.spec.bwrap.as_ref().and_then(|b| b.userns_fd) {
        // Returns only in the new init, inside the joined and created namespaces.
        if let Err(e) = join_namespaces(&inh, fd) {
            let text = crate::bwrap::message(&e);
            let _ = channel::send(sock, &Msg::SetupFailed(text));
            sys::exit_now(spec::exit::SETUP_FAILED)
        }
    }
    match build(&inh) {
        Ok(task) => supervise(task, sock, inh.spec.bwrap.is_none()),
        Err(e) => {
            let text = match inh.spec.bwrap {
                Some(_) => crate::bwrap::message(&e),
                None => e.to_string(),
            };
            let _ = channel::send(sock, &Msg::SetupFailed(text));
            sys::exit_now(spec::exit::SETUP_FAILED)
        }
    }
}

/// Steps 3 to 13, in order. Returns the pid of the running task.
fn build(inh: &Inherited) -> Result<Pid, StepError> {
    let spec = inh.spec;
    let sock = inh.sock.as_fd();

    // 3. Sanitize descriptors; die with the launcher. Only the channel, the input files, the
    //    capture pipes and the descriptors the command line names stay open.
    //    PR_SET_PDEATHSIG is set, then the launcher is checked still alive (it may have died
    //    before the call: its end of the channel is then closed).
    sanitize_fds(inh).step("3 sanitize descriptors")?;
    die_with_launcher(sock).step("3 die with the launcher")?;

    // 2 (this side). Write our own uid/gid maps, or wait until the launcher has written them.
    match &inh.own_maps {
        Some((uid_map, gid_map)) => {
            write_maps("/proc/self", uid_map, gid_map, true).step("2 write id maps")?
        }
        None => match channel::recv(sock, false, channel::SMALL).step("2 wait for id maps")? {
            Some(Msg::MapsReady) => {}
            _ => return Err(lost("2 wait for id maps")),
        },
    }

    // 4. Make every mount private, so nothing done here propagates to the host and no host
    //    mount event reaches the sandbox.
    named(
        nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        ),
        || "mount(\"/\", MS_REC|MS_PRIVATE)".into(),
    )
    .step("4 make mounts private")?;

    //    The sandbox's own files (the root's directories, /etc, /dev, scratch, the inputs,
    //    bwrap's --dir and --file) get the modes airlock gives them whatever the caller's
    //    umask (under 0377 the task could not even read /etc); the task gets the caller's
    //    umask back at step 12. bwrap mode builds under umask 0, as bubblewrap does (its
    //    --dir is 0755 and its --file 0666 under any umask).
    let build_umask = if spec.bwrap.is_some() { 0 } else { 0o022 };
    let caller_umask = nix::sys::stat::umask(Mode::from_bits_truncate(build_umask));

    // 5. Take detached copies of every host tree the sandbox will see, while we still hold the
    //    caller's identity (a root caller can name paths the sandbox user could not reach).
    //    Each copy gets its mount flags (read-only, nosuid, nodev unless asked otherwise),
    //    submounts included, before it is attached anywhere.
    let prepared = spec
        .fs
        .iter()
        .map(|op| prepare(op, spec, inh.caller_is_root))
        .collect::<Result<Vec<_>, _>>()
        .step("5 copy host paths")?;

    // 6. Become the sandbox user (on the host: the caller's uid, or an unprivileged uid when
    //    the caller is root). This clears PR_SET_PDEATHSIG, so it is set again. Non-dumpable
    //    keeps every other process (the task, other processes of the same host uid) out of
    //    this init's /proc/PID/{environ,mem,fd}: set here for a root caller, whose init holds
    //    trees it opened as root. An unprivileged caller's init, which runs as the caller's
    //    own uid and holds nothing the caller could not open, stays dumpable until step 10 if
    //    the launcher is making the network namespace: the launcher opens this user namespace
    //    through /proc, which an unprivileged process may do only to a dumpable one.
    become_sandbox_user(spec, inh.caller_is_root).step("6 become the sandbox user")?;
    die_with_launcher(sock).step("6 die with the launcher")?;
    let dumpable_until_10 = !inh.caller_is_root && inh.net_by_launcher;
    if !dumpable_until_10 {
        non_dumpable().step("6 non-dumpable")?;
    }

    // 7. Build the new root. A scaffold tmpfs is entered first with pivot_root, and the host,
    //    moved to /oldroot, is covered by an empty directory before any operation of the plan
    //    runs: a path the plan writes through (an absolute symlink planted in a writable bind,
    //    say) resolves inside the scaffold, never to a host directory. The host stays in the
    //    mount namespace, unreachable, until step 8 detaches it with the scaffold; meanwhile
    //    its /proc is what lets the plan mount a new one (the kernel lets a user namespace
    //    mount proc only while a fully visible one exists in the mount namespace).
    //    The sandbox's root is a second tmpfs at /newroot, filled by the plan in order.
    let disable_userns = spec.bwrap.as_ref().is_some_and(|b| b.disable_userns);
    enter_scaffold(disable_userns).step("7 new root")?;
    let mut scratch = None;
    for (op, prep) in spec.fs.iter().zip(prepared) {
        apply(op, prep, inh, &mut scratch).map_err(|err| StepError {
            step: "7 build the filesystem",
            err,
        })?;
    }

    // 8. pivot_root into the new root and detach the scaffold with the host under it: nothing
    //    else stays reachable.
    enter_new_root().step("8 pivot_root")?;

    // 9. The root itself becomes read-only in airlock run (scratch, /dev/shm and /dev/pts are
    //    separate, writable mounts), and the task's directory is entered.
    if spec.root_readonly {
        sys::set_mount_attrs(
            open_path("/").step("9 read-only root")?.as_fd(),
            "",
            sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            false,
            Path::new("/"),
        )
        .step("9 read-only root")?;
    }
    let cwd = enter_cwd(spec).step("9 enter the working directory")?;

    // 10. Hostname and network: loopback up, nothing else exists in a new net namespace.
    if let (true, Some(name)) = (spec.ns.uts, &spec.hostname) {
        named(nix::unistd::sethostname(name), || {
            format!("sethostname({name:?})")
        })
        .step("10 hostname")?;
    }
    //     The launcher made the network namespace (loopback up) meanwhile, in this user
    //     namespace, unless clone3 made it with the others.
    let network = set_network(inh)?;
    //     The init left dumpable at step 6 becomes non-dumpable now; nothing but this init
    //     runs in the sandbox before step 13.
    if dumpable_until_10 {
        non_dumpable().step("10 non-dumpable")?;
    }

    // 11. Hand the launcher a descriptor of scratch so it can collect result files after the
    //     whole sandbox is gone (the descriptor keeps the tmpfs alive; nothing is on disk).
    if let (Output::Json { .. }, Some((fd, handed))) = (spec.output, scratch) {
        channel::send(sock, &Msg::Scratch(fd, handed)).step("11 hand over scratch")?;
    }
    // bwrap's --lock-file: held by this init for the sandbox's lifetime.
    let locks = take_locks(spec).step("11 lock files")?;

    // 12. Lock down the init, in this order: the run's cgroup (v1: the launcher made it
    //     meanwhile and hands over its tasks files) and resource limits; capabilities dropped in every
    //     set (bounding, ambient, inheritable, permitted, effective) but those kept on
    //     purpose; no_new_privs (so exec can never add privilege, setuid bits included, and so
    //     an unprivileged process may install seccomp); a new session with no controlling
    //     terminal (TIOCSTI injection, CVE-2017-5226) when the task has this init as reaper.
    //     The seccomp filters come last, in the task (step 13), because they deny calls the
    //     steps before need.
    if inh.cgroup_v1 {
        join_cgroup(sock)?;
    }
    for (res, soft, hard) in &inh.rlimits {
        named(nix::sys::resource::setrlimit(*res, *soft, *hard), || {
            format!("setrlimit({res:?}, {soft}, {hard})")
        })
        .step("12 resource limits")?;
    }
    if let Some(fd) = spec.bwrap.as_ref().and_then(|b| b.userns2_fd) {
        sys::join_namespace(fd, libc::CLONE_NEWUSER).step("12 enter the second user namespace")?;
    }
    nix::sys::stat::umask(caller_umask);
    drop_caps_except(&spec.lockdown.keep_caps).step("12 drop capabilities")?;
    named(nix::sys::prctl::set_no_new_privs(), || {
        "prctl(PR_SET_NO_NEW_PRIVS, 1)".into()
    })
    .step("12 no_new_privs")?;
    if spec.lockdown.new_session && !session_in_task(spec) {
        named(nix::unistd::setsid(), || "setsid()".into()).step("12 new session")?;
    }

    // 13. Start the task as pid 2; this init stays as its reaper and waits for signals with
    //     SIGCHLD blocked (SIGINT, SIGTERM and SIGHUP arrive blocked from the launcher). With
    //     as_pid_1 (bwrap mode only) the task replaces this init instead. The task's last
    //     steps (new session, descriptors, seccomp) are in `exec_task`.
    let exec = ExecPlan::new(spec, cwd, network);
    if spec.lockdown.as_pid_1 {
        exec_task(inh, &exec, None);
    }
    let mut blocked = SigSet::empty();
    blocked.add(Signal::SIGCHLD);
    named(
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None),
        || "sigprocmask(SIG_BLOCK, SIGCHLD)".into(),
    )
    .step("13 start task")?;
    let init_pid = nix::unistd::getpid();
    // The task shares this init's memory until its execve (no copy of the init's pages), unless
    // it may wait before it (bwrap's --block-fd, filters read from descriptors): the init must
    // then keep running meanwhile, to pass on a SIGINT.
    let may_wait = spec.bwrap.as_ref().is_some_and(|b| b.block_fd.is_some())
        || matches!(spec.lockdown.seccomp, Seccomp::Fds(_));
    let how = if may_wait {
        sys::Start::Fork
    } else {
        sys::Start::SharedMemory
    };
    let pid = sys::start_task(how, &mut || exec_task(inh, &exec, Some(init_pid)))
        .step("13 start task")?;
    std::mem::forget(locks);
    Ok(pid)
}

fn non_dumpable() -> Result<(), SysError> {
    named(nix::sys::prctl::set_dumpable(false), || {
        "prctl(PR_SET_DUMPABLE, 0)".into()
    })
}

/// Proof that step 10 set the task's network up: the task is only ever started with one, so no
/// path to it can skip joining the namespace the launcher made.
pub struct NetworkSet(());

/// Step 10's network part: join the network namespace the launcher made (or fail with the
/// call that failed making it), bring up the loopback of the one clone3 made, or keep the
/// host's (`--share-net`, bwrap without `--unshare-net`).
fn set_network(inh: &Inherited) -> Result<NetworkSet, StepError> {
    if inh.net_by_launcher {
        let step = "10 network namespace";
        match channel::recv(inh.sock.as_fd(), false, channel::SMALL).step(step)? {
            Some(Msg::NetNs(Ok(net))) => {
                sys::join_namespace(net.as_raw_fd(), libc::CLONE_NEWNET).step(step)?
            }
            Some(Msg::NetNs(Err(err))) => return Err(StepError { step, err }),
            _ => return Err(lost(step)),
        }
    } else if inh.spec.ns.net {
        sys::loopback_up().step("10 loopback")?;
    }
    Ok(NetworkSet(()))
}

/// bwrap's --userns (step 1 for this case): enter the caller's user namespace (and pid
/// namespace, with --pidns), create the other namespaces inside it, then fork the init that
/// builds the sandbox. This process stays only to wait for that init and exit as it did. A
/// pipe tells the init if this process died before its parent-death signal was set.
fn join_namespaces(inh: &Inherited, userns: i32) -> Result<(), StepError> {
    let spec = inh.spec;
    let io = spec.bwrap.as_ref().expect("--userns is a bwrap option");
    sanitize_fds(inh).step("1 sanitize descriptors")?;
    die_with_launcher(inh.sock.as_fd()).step("1 die with the launcher")?;
    sys::join_namespace(userns, libc::CLONE_NEWUSER).step("1 enter the user namespace")?;
    if let Some(fd) = io.pidns_fd {
        sys::join_namespace(fd, libc::CLONE_NEWPID).step("1 enter the pid namespace")?;
    }
    let ns = &spec.ns;
    let mut flags = libc::CLONE_NEWNS;
    for (on, flag) in [
        (ns.ipc, libc::CLONE_NEWIPC),
        (ns.uts, libc::CLONE_NEWUTS),
        (ns.cgroup, libc::CLONE_NEWCGROUP),
        (ns.net, libc::CLONE_NEWNET),
    ] {
        if on {
            flags |= flag;
        }
    }
    sys::unshare_namespaces(flags).step("1 create namespaces")?;
    // A new pid namespace comes with a clone, and not from a process that has joined another
    // pid namespace with setns (the kernel refuses): then a first child, born in the joined
    // one, makes the clone.
    if io.pidns_fd.is_some() && ns.pid {
        fork_stage(0)?;
    }
    fork_stage(if ns.pid { libc::CLONE_NEWPID as u64 } else { 0 })
}

/// Fork (with `flags`); the parent waits for the child and exits as it did, the child returns.
/// A pipe tells the child whether the parent died before its parent-death signal was set.
fn fork_stage(flags: u64) -> Result<(), StepError> {
    let (alive_r, alive_w) =
        named(nix::unistd::pipe2(OFlag::O_CLOEXEC), || "pipe2()".into()).step("1 fork init")?;
    let child = match sys::clone_process(flags, None).step("1 fork init")? {
        sys::Forked::Child => None,
        sys::Forked::Parent { pid, .. } => Some(pid),
    };
    let Some(child) = child else {
        drop(alive_w);
        named(nix::sys::prctl::set_pdeathsig(Signal::SIGKILL), || {
            "prctl(PR_SET_PDEATHSIG, SIGKILL)".into()
        })
        .step("1 die with the launcher")?;
        let mut fds = [nix::poll::PollFd::new(
            alive_r.as_fd(),
            nix::poll::PollFlags::empty(),
        )];
        named(
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
            || "poll(<parent alive pipe>)".into(),
        )
        .step("1 die with the launcher")?;
        if fds[0]
            .revents()
            .is_some_and(|r| r.intersects(nix::poll::PollFlags::POLLHUP))
        {
            sys::exit_now(spec::exit::SETUP_FAILED);
        }
        return Ok(());
    };
    drop(alive_r);
    match waitpid(child, None) {
        Ok(WaitStatus::Exited(_, code)) => sys::exit_now(code),
        Ok(WaitStatus::Signaled(_, sig, _)) => {
            // Die of the same signal, so the launcher reads the same end.
            sys::reset_signal_dispositions();
            let _ = nix::sys::signal::sigprocmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            );
            let _ = kill(nix::unistd::getpid(), sig);
            sys::exit_now(128 + sig as i32)
        }
        _ => sys::exit_now(spec::exit::SETUP_FAILED),
    }
}

/// Whether the sandbox's pid namespace is its own (new, or joined with bwrap's --pidns), so a
/// new proc can be mounted for it.
fn own_pid_ns(spec: &Spec) -> bool {
    spec.ns.pid || spec.bwrap.as_ref().is_some_and(|b| b.pidns_fd.is_some())
}

/// Whether the task itself calls setsid: when no init of a new pid namespace reaps for it.
fn session_in_task(spec: &Spec) -> bool {
    !spec.ns.pid || spec.lockdown.as_pid_1
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

/// Step 3's descriptors: airlock run closes all but those it uses (kept_fds). bwrap mode keeps
/// the caller's, which reach the task as under bubblewrap; the launcher's copies here are all
/// close-on-exec, and its end of the channel was dropped at clone3, so the launcher's death
/// still shows on this side's end. But it closes those only the launcher uses (--info-fd,
/// --json-status-fd, --userns-block-fd): their readers and writers see the launcher's close
/// alone, as under bubblewrap (the info document's reader its end at once).
fn sanitize_fds(inh: &Inherited) -> Result<(), SysError> {
    let Some(b) = &inh.spec.bwrap else {
        return sys::close_fds_except(&kept_fds(inh));
    };
    let kept = kept_fds(inh);
    [b.info_fd, b.json_status_fd, b.userns_block_fd]
        .into_iter()
        .flatten()
        .filter(|fd| !kept.contains(fd))
        .for_each(sys::close_fd);
    Ok(())
}

/// The descriptors init keeps across step 3.
fn kept_fds(inh: &Inherited) -> Vec<i32> {
    let mut keep = vec![inh.sock.as_raw_fd()];
    keep.extend(inh.inputs.iter().flatten().map(|f| f.as_raw_fd()));
    if let Some((o, e)) = &inh.capture {
        keep.extend([o.as_raw_fd(), e.as_raw_fd()]);
    }
    keep.extend(inh.relayed.iter().flatten().map(|f| f.as_raw_fd()));
    for op in &inh.spec.fs {
        if let FsOp::BindFd { fd, .. } | FsOp::File { fd, .. } = op {
            keep.push(*fd);
        }
    }
    if let Seccomp::Fds(fds) = &inh.spec.lockdown.seccomp {
        keep.extend(fds);
    }
    if let Some(fd) = inh.spec.bwrap.as_ref().and_then(|b| b.block_fd) {
        keep.push(fd);
    }
    if let Some(b) = &inh.spec.bwrap {
        keep.extend(
            [b.userns_fd, b.userns2_fd, b.pidns_fd]
                .into_iter()
                .flatten(),
        );
    }
    keep
}

/// Move this (single-threaded) process into the run's cgroup v1 hierarchies, whose `tasks`
/// files the launcher hands over (it made the cgroup while this init built the sandbox), by
/// writing "0" to each.
fn join_cgroup(sock: BorrowedFd) -> Result<(), StepError> {
    const STEP: &str = "12 join the cgroup";
    let Some(Msg::JoinCgroup(tasks)) = channel::recv(sock, false, channel::SMALL).step(STEP)?
    else {
        return Err(lost(STEP));
    };
    // One tasks file per hierarchy (memory, pids): fewer would leave the task outside a limit
    // the report says applied, with no rlimit in its place.
    if tasks.len() != 2 {
        return Err(StepError {
            step: STEP,
            err: SysError {
                call: format!(
                    "recvmsg(<channel>): {} cgroup tasks descriptors, not 2",
                    tasks.len()
                ),
                errno: Errno::EBADMSG,
            },
        });
    }
    for f in tasks {
        named(nix::unistd::write(&f, b"0"), || {
            "write(<cgroup tasks file>, \"0\")".into()
        })
        .step(STEP)?;
    }
    Ok(())
}

/// Write the id maps of the process whose proc directory is `proc_dir` (`/proc/self` when the
/// init maps itself, `/proc/PID` when the launcher does). An unprivileged caller may map only
/// its own ids, and only with setgroups denied first, which `deny_setgroups` does.
pub fn write_maps(
    proc_dir: &str,
    uid_map: &str,
    gid_map: &str,
    deny_setgroups: bool,
) -> Result<(), SysError> {
    let setgroups = deny_setgroups.then_some(("setgroups", "deny"));
    for (file, text) in setgroups
        .into_iter()
        .chain([("uid_map", uid_map), ("gid_map", gid_map)])
    {
        let path = format!("{proc_dir}/{file}");
        std::fs::write(&path, text)
            .map_err(|e| io_err(e, || format!("write({path:?}, {:?})", text.trim_end())))?;
    }
    Ok(())
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

/// One host entry of the minimal /etc, bound read-only as it is: a file, or a directory with
/// what is mounted under it. (Copying the small files instead was dearer, measured at d3aa6dd:
/// a tmpfs inode and page for each, made and torn down at every launch, cost more than the
/// mounts: 52 us per launch of `airlock run --share-net -- /bin/true` with the nine files of
/// at most a page copied.)
struct EtcEntry {
    fd: OwnedFd,
    is_dir: bool,
}

/// The minimal /etc's entry for `host`: `None` when it does not exist. Symlinks are followed,
/// as a bind of the path would follow them.
fn etc_entry(host: &Path) -> Result<Option<EtcEntry>, SysError> {
    match tree(host, RO) {
        Ok(Prepared::Tree { fd, is_dir }) => Ok(Some(EtcEntry { fd, is_dir })),
        Ok(_) => Ok(None),
        Err(e) if matches!(e.errno, Errno::ENOENT | Errno::ENOTDIR) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The path of the terminal on stdout, found as ttyname(3) finds it: the name /proc/self/fd/1
/// gives, if that is the same terminal, else the first character device in /dev/pts or /dev
/// that is (inside another sandbox the name may be absent, or another terminal's). None when
/// stdout is no terminal or none is found.
fn stdout_terminal() -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let stdout = sys::std_stream(1);
    if !nix::unistd::isatty(stdout).unwrap_or(false) {
        return None;
    }
    let st = nix::sys::stat::fstat(stdout).ok()?;
    // The same inode, not only the same device number: each devpts instance numbers its
    // terminals from 0.
    // The node itself, not a link to it (/dev/stdout and /dev/fd lead there too).
    let same = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            m.file_type().is_char_device()
                && (m.rdev(), m.dev(), m.ino()) == (st.st_rdev, st.st_dev, st.st_ino)
        })
    };
    if let Ok(named) = std::fs::read_link("/proc/self/fd/1")
        && named.starts_with("/dev/")
        && same(&named)
    {
        return Some(named);
    }
    ["/dev/pts", "/dev"].into_iter().find_map(|dir| {
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| same(p))
    })
}

/// Create a file that must not exist yet (in a directory that does), with permission bits
/// `mode`.
fn create_new(path: &Path, mode: u32) -> Result<File, SysError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| io_err(e, || format!("open({path:?}, O_CREAT|O_EXCL)")))
}

/// Create a file that must not exist yet holding `data`.
fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<(), SysError> {
    create_new(path, mode)?
        .write_all(data)
        .map_err(|e| io_err(e, || format!("write({path:?})")))
}

/// What step 5 took for one filesystem operation.
enum Prepared {
    Nothing,
    Tree {
        fd: OwnedFd,
        is_dir: bool,
    },
    /// A writable copy, with the proc and sysfs mounts inside it (made read-only once attached).
    WritableTree {
        fd: OwnedFd,
        is_dir: bool,
        kernel_fs: Vec<PathBuf>,
    },
    Link(PathBuf),
    /// The host's /proc (no new pid namespace), with read-only copies of its knobs.
    HostProc {
        fd: OwnedFd,
        knobs: Vec<(&'static str, OwnedFd)>,
    },
    Etc(Vec<(PathBuf, EtcEntry)>),
    Dev(Vec<(&'static str, OwnedFd)>),
    /// Read-only copies of an overlay's sources (lowest first) and, for a host upper layer,
    /// writable copies of the upper and work directories.
    Overlay {
        lower: Vec<OwnedFd>,
        /// The common parent of the upper and work directories, and its host path.
        upper: Option<(OwnedFd, PathBuf)>,
    },
}

const RO: u64 = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;

/// Parts of proc that reach the whole kernel rather than the sandbox's own processes.
const PROC_KNOBS: &[&str] = &["sys", "sysrq-trigger", "irq", "bus"];

/// The kernel's own interfaces, by mountinfo type and statfs magic: their files are knobs of
/// the whole host (sysctls, cgroups, tracing, EFI variables, ...) rather than storage, and
/// their permission checks are mostly the file's owner and mode alone, which a task that is
/// the host's uid 0 passes.
const KERNEL_FS: &[(&str, i64)] = &[
    ("proc", 0x9fa0),
    ("sysfs", 0x6265_6572),
    ("cgroup", 0x0027_e0eb),
    ("cgroup2", 0x6367_7270),
    ("tracefs", 0x7472_6163),
    ("debugfs", 0x6462_6720),
    ("securityfs", 0x7363_6673),
    ("bpf", 0xcafe_4a11),
    ("configfs", 0x6265_6570),
    ("pstore", 0x6165_676c),
    ("efivarfs", 0xde5e_81e4),
    ("binfmt_misc", 0x4249_4e4d),
    ("fusectl", 0x6573_5543),
    ("selinuxfs", 0xf97c_ff8c),
    ("smackfs", 0x4341_5d53),
];

/// Mounts of the kernel's interfaces (KERNEL_FS) in a copy of the host tree at `src`, relative
/// to `src` ("" for the tree's own root, when `src` lies inside one): a writable copy keeps
/// these read-only whole. (A host proc too: as the host's uid 0 a root caller's task could
/// otherwise write other host processes' files, such as their oom_score_adj, and the host's
/// sysctls.) The source is canonicalized first (a /proc/self/root path, say), and an
/// unreadable mount table is an error, not an empty answer.
fn kernel_fs_under(src: &Path, tree: &OwnedFd) -> Result<Vec<PathBuf>, SysError> {
    let mut found = Vec::new();
    let st = named(nix::sys::statfs::fstatfs(tree), || {
        format!("fstatfs(<tree of {src:?}>)")
    })?;
    let magic = st.filesystem_type().0 as i64;
    if KERNEL_FS.iter().any(|&(_, m)| m == magic) {
        found.push(PathBuf::new());
    }
    let src = std::fs::canonicalize(src).map_err(|e| io_err(e, || format!("realpath({src:?})")))?;
    // Bytes, not text: a mount point need not be UTF-8.
    let table = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| io_err(e, || "read(\"/proc/self/mountinfo\")".into()))?;
    let mounts: Vec<Mount> = table
        .split(|&b| b == b'\n')
        .filter_map(Mount::parse)
        .collect();
    for m in &mounts {
        if !KERNEL_FS
            .iter()
            .any(|&(name, _)| name.as_bytes() == m.fstype)
        {
            continue;
        }
        let Ok(rel) = m.path.strip_prefix(&src) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        // What the path reaches: this mount, or one that covers it (mounted over it or over
        // a directory above it; what its deepest existing part reaches, where the cover
        // lacks the rest). A covered mount is unreachable in the copy too (the kernel locks
        // such covers in a copy made for another user namespace), and no path there names it.
        let mut reached = None;
        for p in m.path.ancestors() {
            if let Some(id) = mount_id(p)? {
                reached = Some(id);
                break;
            }
        }
        match reached {
            Some(id) if id == m.id => found.push(rel.to_path_buf()),
            Some(id) if !m.below(&mounts).contains(&id.as_slice()) => {}
            // Reached one it is mounted on: the table changed under us (a directory above
            // it renamed?). Left writable it could be reachable in the copy: stop.
            _ => {
                return Err(SysError {
                    call: format!("open({:?}): not the kernel mount listed there", m.path),
                    errno: Errno::ESTALE,
                });
            }
        }
    }
    Ok(found)
}

/// A line of /proc/self/mountinfo: the mount's id, its parent's, where it is and its type.
struct Mount<'a> {
    id: &'a [u8],
    parent: &'a [u8],
    path: PathBuf,
    fstype: &'a [u8],
}

impl<'a> Mount<'a> {
    fn parse(line: &'a [u8]) -> Option<Mount<'a>> {
        let sep = line.windows(3).position(|w| w == b" - ")?;
        let mut fields = line[..sep].split(|&b| b == b' ');
        let (id, parent) = (fields.next()?, fields.next()?);
        // mountinfo escapes space, tab, newline and backslash as octal.
        let path = PathBuf::from(OsString::from_vec(unescape_mountinfo(fields.nth(2)?)));
        let fstype = line[sep + 3..].split(|&b| b == b' ').next()?;
        Some(Mount {
            id,
            parent,
            path,
            fstype,
        })
    }

    /// This mount's id and those of the mounts it sits on, down to the root.
    fn below<'b>(&self, all: &[Mount<'b>]) -> Vec<&'b [u8]>
    where
        'a: 'b,
    {
        let mut below: Vec<&[u8]> = vec![self.id];
        while let Some(m) = all.iter().find(|m| m.id == below[below.len() - 1]) {
            if below.contains(&m.parent) {
                break;
            }
            below.push(m.parent);
        }
        below
    }
}

/// The id (as /proc/self/mountinfo shows it) of the mount `path` reaches, or None if there is
/// no such path. No symlink is followed (mountinfo's paths hold none): one put in since, by
/// whoever owns a directory on the way, could lead the path to another mount and have this
/// one taken for covered; it fails the step instead (ELOOP).
fn mount_id(path: &Path) -> Result<Option<Vec<u8>>, SysError> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how) {
        Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
        r => named(r, || {
            format!("openat2({path:?}, O_PATH, RESOLVE_NO_SYMLINKS)")
        })?,
    };
    let info = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
    let text = std::fs::read(&info).map_err(|e| io_err(e, || format!("read({info:?})")))?;
    let id = text
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"mnt_id:"))
        .map(|v| v.trim_ascii().to_vec());
    match id {
        Some(id) => Ok(Some(id)),
        None => Err(SysError {
            call: format!("read({info:?}): no mnt_id"),
            errno: Errno::EIO,
        }),
    }
}

fn unescape_mountinfo(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if b[i] == b'\\'
            && let Some(d) = octal
        {
            out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// A writable copy of a host tree for a root caller keeps the proc and sysfs mounts in it
/// read-only: only a root caller's task can be the host's uid 0, the owner of their knobs.
/// Whether the tree was named by path or handed over as a descriptor.
fn guard_kernel_fs(
    copy: Prepared,
    src: &Path,
    access: Access,
    caller_is_root: bool,
) -> Result<Prepared, SysError> {
    match copy {
        Prepared::Tree { fd, is_dir } if access != Access::ReadOnly && caller_is_root => {
            let kernel_fs = kernel_fs_under(src, &fd)?;
            Ok(Prepared::WritableTree {
                fd,
                is_dir,
                kernel_fs,
            })
        }
        other => Ok(other),
    }
}

fn access_attrs(a: Access) -> u64 {
    match a {
        Access::ReadOnly => RO,
        Access::ReadWrite => sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        Access::Devices => sys::MOUNT_ATTR_NOSUID,
    }
}

fn prepare(op: &FsOp, spec: &Spec, caller_is_root: bool) -> Result<Prepared, SysError> {
    Ok(match op {
        FsOp::SystemPath(path) => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = named(nix::fcntl::readlink(path.as_path()), || {
                    format!("readlink({path:?})")
                })?;
                Prepared::Link(target.into())
            }
            Ok(m) if m.is_dir() => tree(path, RO)?,
            Ok(_) => Prepared::Nothing,
            Err(_) if path != Path::new("/usr") => Prepared::Nothing,
            Err(e) => return Err(io_err(e, || format!("lstat({path:?})"))),
        },
        FsOp::MinimalEtc => {
            let mut v = Vec::new();
            for name in etc_from_host(!spec.ns.net) {
                if let Some(entry) = etc_entry(&Path::new("/etc").join(name))? {
                    v.push((PathBuf::from(name), entry));
                }
            }
            Prepared::Etc(v)
        }
        FsOp::Dev(_) => {
            let mut nodes: Vec<(&'static str, PathBuf)> = DEVICES
                .iter()
                .map(|dev| (*dev, Path::new("/dev").join(dev)))
                .collect();
            // bwrap mode, as bubblewrap: a terminal on stdout is bound at /dev/console, where
            // ttyname(3) finds it (the host's /dev/pts/N is not in the sandbox's devpts).
            if spec.bwrap.is_some()
                && let Some(tty) = stdout_terminal()
            {
                nodes.push(("console", tty));
            }
            let mut v = Vec::new();
            // Device nodes must not be nodev; they are nosuid, noexec and read-only: that does
            // not stop writing to a device, only touch and chmod, which a root caller's bwrap
            // task (the host's uid 0, their owner) could otherwise apply to the host's nodes
            // and to the caller's terminal at /dev/console (bubblewrap lets it).
            let attrs = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC;
            for (name, host) in nodes {
                let fd = sys::clone_tree(&host)?;
                sys::set_mount_attrs(fd.as_fd(), "", attrs, true, &host)?;
                v.push((name, fd));
            }
            Prepared::Dev(v)
        }
        FsOp::Bind {
            src,
            access,
            optional,
            ..
        } => match tree(src, access_attrs(*access)) {
            Err(e) if *optional && (e.errno == Errno::ENOENT || e.errno == Errno::ENOTDIR) => {
                Prepared::Nothing
            }
            Ok(copy) => guard_kernel_fs(copy, src, *access, caller_is_root)?,
            Err(e) => return Err(e),
        },
        FsOp::Proc(_) if !own_pid_ns(spec) => {
            let Prepared::Tree { fd, .. } = tree(
                Path::new("/proc"),
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
            )?
            else {
                unreachable!("tree() returns a Tree")
            };
            // A root caller's task may be the host's uid 0: the kernel-wide knobs of the host's
            // proc go over the copy read-only.
            let mut knobs = Vec::new();
            if caller_is_root {
                for knob in PROC_KNOBS {
                    let p = Path::new("/proc").join(knob);
                    if present(&p)? {
                        let t = sys::clone_tree(&p)?;
                        sys::set_mount_attrs(t.as_fd(), "", RO | sys::MOUNT_ATTR_NOEXEC, true, &p)?;
                        knobs.push((*knob, t));
                    }
                }
            }
            Prepared::HostProc { fd, knobs }
        }
        FsOp::BindFd { fd, access, .. } => {
            // The descriptor's mount belongs to the launcher's mount namespace, which this one
            // copied; its path names the same tree here. The path may have been swapped (for a
            // symlink, say) since the caller opened the descriptor, so the copy must be the
            // very directory the descriptor refers to (CVE-2024-42472 in flatpak).
            let link = format!("/proc/self/fd/{fd}");
            let path = named(nix::fcntl::readlink(link.as_str()), || {
                format!("readlink({link:?})")
            })?;
            let copy = tree(Path::new(&path), access_attrs(*access))?;
            let Prepared::Tree { fd: ref t, .. } = copy else {
                unreachable!("tree() returns a Tree")
            };
            let held = sys::dup_fd(*fd)?;
            let same = |a: &OwnedFd, b: &OwnedFd| {
                matches!((nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)),
                    (Ok(x), Ok(y)) if x.st_dev == y.st_dev && x.st_ino == y.st_ino)
            };
            if !same(t, &held) {
                return Err(SysError {
                    call: format!("Race condition binding dirfd {fd} ({path:?})"),
                    errno: Errno::EXDEV,
                });
            }
            guard_kernel_fs(copy, Path::new(&path), *access, caller_is_root)?
        }
        FsOp::Overlay { sources, upper, .. } => {
            let copy = |p: &Path, attrs| -> Result<OwnedFd, SysError> {
                let fd = sys::clone_tree(p)?;
                sys::set_mount_attrs(fd.as_fd(), "", attrs, true, p)?;
                Ok(fd)
            };
            let lower = sources
                .iter()
                .map(|p| copy(p, RO))
                .collect::<Result<Vec<_>, _>>()?;
            let upper = match upper {
                OverlayUpper::Host { upper, work } => {
                    // overlayfs wants upper and work on one mount: copy their common parent.
                    let common = common_parent(upper, work);
                    let tree = copy(&common, access_attrs(Access::ReadWrite))?;
                    Some((tree, common))
                }
                _ => None,
            };
            Prepared::Overlay { lower, upper }
        }
        _ => Prepared::Nothing,
    })
}

/// A detached copy of a host tree with the given mount attributes.
fn tree(path: &Path, attrs: u64) -> Result<Prepared, SysError> {
    // A path through a magic link (/proc/self/fd/N) reaches a mount of the namespace the
    // descriptor was opened in, the caller's, which open_tree cannot clone from this one
    // (EINVAL); the path it resolves to names the same tree in this namespace's copy, as
    // bubblewrap resolves bind sources before its namespaces exist.
    let fd = match sys::clone_tree(path) {
        Err(e) if e.errno == Errno::EINVAL => match std::fs::canonicalize(path) {
            Ok(real) if real != path => sys::clone_tree(&real).map_err(|_| e)?,
            _ => return Err(e),
        },
        r => r?,
    };
    sys::set_mount_attrs(fd.as_fd(), "", attrs, true, path)?;
    let is_dir = nix::sys::stat::fstat(&fd)
        .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        .map_err(|errno| SysError {
            call: format!("fstat(<tree of {path:?}>)"),
            errno,
        })?;
    Ok(Prepared::Tree { fd, is_dir })
}

fn become_sandbox_user(spec: &Spec, caller_is_root: bool) -> Result<(), SysError> {
    if let Some(io) = &spec.bwrap
        && (io.userns_fd.is_some() || io.userns_block_fd.is_some())
    {
        // A joined user namespace maps the caller as it was made to, and so does one whose
        // maps the caller wrote (--userns-block-fd; the launcher dropped a root caller's
        // supplementary groups before clone3): an id changes only if asked.
        if io.explicit_gid {
            let gid = Gid::from_raw(spec.gid);
            named(nix::unistd::setresgid(gid, gid, gid), || {
                format!("setresgid({gid})")
            })?;
        }
        if io.explicit_uid {
            let uid = Uid::from_raw(spec.uid);
            named(nix::unistd::setresuid(uid, uid, uid), || {
                format!("setresuid({uid})")
            })?;
        }
        return Ok(());
    } else if caller_is_root {
        // A root caller's supplementary groups (root, disk, ...) must not follow the task.
        named(nix::unistd::setgroups(&[]), || "setgroups([])".into())?;
    }
    let (uid, gid) = (Uid::from_raw(spec.uid), Gid::from_raw(spec.gid));
    named(nix::unistd::setresgid(gid, gid, gid), || {
        format!("setresgid({gid})")
    })?;
    named(nix::unistd::setresuid(uid, uid, uid), || {
        format!("setresuid({uid})")
    })
}

fn mount_fs(
    src: &str,
    target: &Path,
    fstype: &str,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), SysError> {
    named(
        nix::mount::mount(Some(src), target, Some(fstype), flags, data),
        || format!("mount({src:?}, {target:?}, {fstype:?}, {flags:?}, {data:?})"),
    )
}

/// A tmpfs (nosuid, nodev) at `target` with the given options (mode, size).
fn mount_tmpfs(target: &Path, opts: &str) -> Result<(), SysError> {
    mount_fs(
        "tmpfs",
        target,
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts),
    )
}

fn open_path(p: &str) -> Result<OwnedFd, SysError> {
    named(
        nix::fcntl::open(
            p,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || format!("open({p:?}, O_PATH)"),
    )
}

/// The scaffold: a tmpfs over /tmp (in this mount namespace only) entered with pivot_root,
/// with the sandbox's root tmpfs at /newroot. pivot_root moves the host to /oldroot, which an
/// empty directory of the scaffold covers at once: no path resolves into the host while the
/// plan runs. The host is detached with the scaffold at step 8, in the same detach, so the
/// launch waits for one RCU grace period there instead of two. Its /proc stays in this mount
/// namespace until then, which is what lets the plan mount a new proc (the kernel refuses
/// one in a user namespace unless a fully visible proc exists in the mount namespace).
fn enter_scaffold(disable_userns: bool) -> Result<(), SysError> {
    let base = Path::new(SCAFFOLD);
    mount_tmpfs(base, "mode=0755")?;
    named(nix::unistd::chdir(base), || format!("chdir({SCAFFOLD:?})"))?;
    for dir in ["newroot", "oldroot", "cover"] {
        make_dirs(Path::new(dir))?;
    }
    named(nix::unistd::pivot_root(".", "oldroot"), || {
        format!("pivot_root({SCAFFOLD:?}, \"oldroot\")")
    })?;
    named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())?;
    mount_tmpfs(Path::new(NEWROOT), "mode=0755")?;
    if disable_userns {
        // user.* limits are per user namespace: 0 here refuses every nested one.
        std::fs::write("/oldroot/proc/sys/user/max_user_namespaces", "0").map_err(|e| {
            io_err(e, || {
                "write(\"/proc/sys/user/max_user_namespaces\", \"0\")".into()
            })
        })?;
    }
    mount_fs("/cover", Path::new("/oldroot"), "", MsFlags::MS_BIND, None)
}

fn enter_new_root() -> Result<(), SysError> {
    named(nix::unistd::chdir(NEWROOT), || {
        format!("chdir({NEWROOT:?})")
    })?;
    // pivot_root(".", "."): the scaffold, with the covered host under it, ends up stacked on
    // the new root and is detached at once, so nothing but the new root remains.
    named(nix::unistd::pivot_root(".", "."), || {
        format!("pivot_root({NEWROOT:?}, {NEWROOT:?})")
    })?;
    named(
        nix::mount::umount2(".", nix::mount::MntFlags::MNT_DETACH),
        || "umount2(<scaffold>, MNT_DETACH)".into(),
    )?;
    named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())
}

const SCAFFOLD: &str = "/tmp";
const NEWROOT: &str = "/newroot";

/// An absolute path inside the sandbox, as seen from the scaffold.
fn at(p: &Path) -> PathBuf {
    Path::new(NEWROOT).join(p.strip_prefix("/").unwrap_or(p))
}

/// mkdir -p (under the scaffold, where every path resolves inside it). Something other than
/// a directory already at `path` is ENOTDIR, as bubblewrap reports it (mkdir's EEXIST would
/// read as if the directory were there).
fn make_dirs(path: &Path) -> Result<(), SysError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => SysError {
                call: format!("mkdir -p {path:?}"),
                errno: Errno::ENOTDIR,
            },
            _ => io_err(e, || format!("mkdir -p {path:?}")),
        })
}

/// Create the missing parents of `dest` (inside) with no more access than `perms` gives: group
/// and others keep read and search only where `perms` grants them anything (bwrap's rule).
fn make_parents(dest: &Path, perms: u32) -> Result<(), SysError> {
    let mut mode = 0o700;
    if perms & 0o070 != 0 {
        mode |= 0o050;
    }
    if perms & 0o007 != 0 {
        mode |= 0o005;
    }
    let Some(parent) = at(dest).parent().map(Path::to_path_buf) else {
        return Ok(());
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(&parent)
        .map_err(|e| io_err(e, || format!("mkdir -p {parent:?}")))
}

fn make_file(path: &Path, mode: u32) -> Result<File, SysError> {
    if let Some(parent) = path.parent() {
        make_dirs(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io_err(e, || format!("open({path:?}, O_CREAT)")))
}

fn io_err(e: std::io::Error, call: impl FnOnce() -> String) -> SysError {
    SysError {
        call: call(),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// Attach a prepared tree at `dest` (inside), creating the mount point.
fn attach(tree: &OwnedFd, dest: &Path, is_dir: bool) -> Result<(), SysError> {
    let path = at(dest);
    if is_dir {
        make_dirs(&path)?;
    } else {
        ensure_file(&path)?;
    }
    sys::attach_tree(tree.as_fd(), &path)
}

/// [`attach`] for a bind the caller asked for, then a check that the destination's path now
/// leads to the root of the tree just attached. A symlink on the way (in a root filesystem
/// the caller binds, which a task may have written) can route the path through the directory
/// the tree lands on, so that once the tree is there the same path leads elsewhere: the
/// steps after it that name paths under the destination (a --tmpfs mask, --remount-ro, a
/// nested bind) would then act somewhere else and leave this tree as it is. bubblewrap makes
/// the same check against its mount table.
fn attach_bind(tree: &OwnedFd, dest: &Path, is_dir: bool) -> Result<(), SysError> {
    attach(tree, dest, is_dir)?;
    let path = at(dest);
    let id = |st: nix::sys::stat::FileStat| (st.st_dev, st.st_ino);
    let now = named(nix::sys::stat::stat(&path), || {
        format!("stat({path:?}) after the bind")
    })?;
    let root = named(nix::sys::stat::fstat(tree), || {
        format!("fstat(<tree bound at {dest:?}>)")
    })?;
    if id(now) != id(root) {
        return Err(SysError {
            call: format!(
                "the path {dest:?} no longer leads to the tree just bound there (a symlink on \
                 the way passes through it)"
            ),
            errno: Errno::ELOOP,
        });
    }
    Ok(())
}

/// A directory under an attached or detached tree, reached from the tree itself (never from a
/// path that a symlink could send elsewhere): no symlink followed, nothing above the tree.
fn under_tree(tree: &OwnedFd, rel: &Path, name: &Path) -> Result<OwnedFd, SysError> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let rel = match rel.as_os_str().is_empty() {
        true => Path::new("."),
        false => rel,
    };
    named(nix::fcntl::openat2(tree.as_fd(), rel, how), || {
        format!("openat2(<tree>, {name:?}, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)")
    })
}

/// Make sure something exists at `path` to mount a file on: an empty file is created (with
/// its parents) unless an entry is already there, which is left as it is. The common case,
/// a new file in an existing directory, costs one mknod (no descriptor to open and close).
fn ensure_file(path: &Path) -> Result<(), SysError> {
    let make = || {
        nix::sys::stat::mknod(
            path,
            nix::sys::stat::SFlag::S_IFREG,
            Mode::from_bits_truncate(0o644),
            0,
        )
    };
    let err = |e: Errno| SysError {
        call: format!("mknod({path:?}, S_IFREG)"),
        errno: e,
    };
    match make() {
        Ok(()) => Ok(()),
        Err(Errno::ENOENT) => {
            if let Some(parent) = path.parent() {
                make_dirs(parent)?;
            }
            make().map_err(err)
        }
        // A directory cannot take a file: bubblewrap's error for the file it would create.
        Err(Errno::EEXIST) if path.symlink_metadata().is_ok_and(|m| m.is_dir()) => Err(SysError {
            call: format!("mknod({path:?}, S_IFREG)"),
            errno: Errno::EISDIR,
        }),
        // A file, or a symlink to something, already there: the mount decides.
        Err(Errno::EEXIST) if path.exists() => Ok(()),
        Err(e) => Err(err(e)),
    }
}

fn symlink(target: &Path, dest: &Path) -> Result<(), SysError> {
    let path = at(dest);
    let make = || std::os::unix::fs::symlink(target, &path);
    let err = |e: std::io::Error| io_err(e, || format!("symlink({target:?}, {dest:?})"));
    match make() {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                make_dirs(parent)?;
            }
            make().map_err(err)
        }
        // Already there: fine if it is the same link.
        Err(e) => match std::fs::read_link(&path) {
            Ok(existing) if existing == target => Ok(()),
            _ => Err(err(e)),
        },
    }
}

/// Set the mode of a directory this step just made, through a descriptor that does not
/// follow a symlink: one planted at the path meanwhile (through a writable bind) is refused,
/// not followed to whatever it names.
fn chmod_made_dir(path: &Path, perms: u32) -> Result<(), SysError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir = named(nix::fcntl::open(path, flags, Mode::empty()), || {
        format!("open({path:?}, O_DIRECTORY|O_NOFOLLOW)")
    })?;
    named(
        nix::sys::stat::fchmod(&dir, Mode::from_bits_retain(perms)),
        || format!("fchmod({path:?}, {perms:04o})"),
    )
}

fn chmod(path: &Path, perms: u32) -> Result<(), SysError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(perms))
        .map_err(|e| io_err(e, || format!("chmod({path:?}, {perms:04o})")))
}

/// Apply one filesystem operation; Scratch leaves its descriptor in `scratch`.
fn apply(
    op: &FsOp,
    prep: Prepared,
    inh: &Inherited,
    scratch: &mut Option<(OwnedFd, Handed)>,
) -> Result<(), SysError> {
    let ro_tmpfs = inh.spec.root_readonly;
    match (op, prep) {
        (FsOp::SystemPath(p), Prepared::Tree { fd, .. }) => attach(&fd, p, true),
        (FsOp::SystemPath(p), Prepared::Link(target)) => symlink(&target, p),
        (FsOp::MinimalEtc, Prepared::Etc(entries)) => {
            make_dirs(&at(Path::new("/etc")))?;
            for (name, entry) in entries {
                let dest = Path::new("/etc").join(&name);
                attach(&entry.fd, &dest, entry.is_dir)?;
            }
            write_generated_etc(!inh.spec.ns.net)
        }
        (FsOp::Bind { dest, .. } | FsOp::BindFd { dest, .. }, Prepared::Tree { fd, is_dir }) => {
            attach_bind(&fd, dest, is_dir)
        }
        (
            FsOp::Bind { dest, .. } | FsOp::BindFd { dest, .. },
            Prepared::WritableTree {
                fd,
                is_dir,
                kernel_fs,
            },
        ) => {
            attach_bind(&fd, dest, is_dir)?;
            // A writable host tree keeps the kernel's interfaces (KERNEL_FS) read-only, each
            // reached from the tree itself.
            for rel in kernel_fs {
                let p = at(dest).join(&rel);
                let sub = under_tree(&fd, &rel, &p)?;
                sys::set_mount_attrs(sub.as_fd(), "", sys::MOUNT_ATTR_RDONLY, true, &p)?;
            }
            Ok(())
        }
        (FsOp::Tmpfs { dest, perms, size }, _) => {
            let path = at(dest);
            if let Some(p) = perms {
                make_parents(dest, *p)?;
            }
            make_dirs(&path)?;
            let mut opts = format!("mode={:o}", perms.unwrap_or(0o755));
            if let Some(size) = size {
                opts.push_str(&format!(",size={size}"));
            }
            mount_tmpfs(&path, &opts)
        }
        (FsOp::Proc(dest), Prepared::HostProc { fd, knobs }) => {
            // No new pid namespace (bwrap mode): the host's /proc, as a new proc of the host's
            // pid namespace would show it.
            attach(&fd, dest, true)?;
            // Each knob's cover goes where the knob is in this /proc, reached from it.
            for (knob, t) in knobs {
                let p = at(dest).join(knob);
                let target = under_tree(&fd, Path::new(knob), &p)?;
                sys::attach_tree_at(t.as_fd(), target.as_fd(), &p)?;
            }
            Ok(())
        }
        (FsOp::Proc(dest), _) => {
            let path = at(dest);
            make_dirs(&path)?;
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            if ro_tmpfs {
                return mount_fs("proc", &path, "proc", flags | MsFlags::MS_RDONLY, None);
            }
            // A writable proc (bwrap mode) keeps the kernel's global knobs read-only when the
            // task may be the host's uid 0 (a root caller): it must not write the host's
            // sysctls or trigger sysrq. For any other caller the kernel already refuses, and
            // covering them would stop a nested proc mount (the kernel wants proc fully
            // visible), so they are left as bubblewrap leaves them.
            if !inh.caller_is_root {
                return mount_fs("proc", &path, "proc", flags, None);
            }
            // The covers find the new proc by its path again: a symlink on the way could
            // route that path through the directory proc lands on and send them elsewhere, so
            // the path must hold none.
            {
                use nix::fcntl::{OpenHow, ResolveFlag};
                let how = OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
                    .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
                named(
                    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, &path, how),
                    || format!("openat2({dest:?}, RESOLVE_NO_SYMLINKS) for --proc"),
                )?;
            }
            mount_fs("proc", &path, "proc", flags, None)?;
            protect_proc_knobs(&path)
        }
        (FsOp::Dev(dest), Prepared::Dev(nodes)) => {
            let shm = inh.spec.limits.map(|l| l.scratch_size);
            make_dev(dest, nodes, ro_tmpfs, shm)
        }
        (FsOp::Mqueue(dest), _) => {
            let path = at(dest);
            make_dirs(&path)?;
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            mount_fs("mqueue", &path, "mqueue", flags, None)
        }
        (FsOp::Dir { dest, perms }, _) => {
            let path = at(dest);
            // As bubblewrap: an existing directory keeps its mode (--perms is for one made
            // here; through a writable bind it would be the host's), and a symlink already
            // there is left as it is.
            match path.symlink_metadata() {
                Ok(m) if m.is_dir() || m.file_type().is_symlink() => return Ok(()),
                _ => {}
            }
            if let Some(p) = perms {
                make_parents(dest, *p)?;
            }
            make_dirs(&path)?;
            match perms {
                Some(p) => chmod_made_dir(&path, *p),
                None => Ok(()),
            }
        }
        (FsOp::Symlink { target, dest }, _) => symlink(target, dest),
        (
            FsOp::File {
                fd,
                dest,
                perms,
                bind,
            },
            _,
        ) => {
            // bwrap's defaults: 0666 for --file, 0600 for the bind-data variants.
            let default = if bind.is_some() { 0o600 } else { 0o666 };
            if let Some(p) = perms {
                make_parents(dest, *p)?;
            }
            write_file_from_fd(*fd, dest, perms.unwrap_or(default), *bind)
        }
        (FsOp::Chmod { path, perms }, _) => chmod(&at(path), *perms),
        (FsOp::RemountRo(dest), _) => {
            let remount = |errno| SysError {
                call: format!("mount_setattr({:?}, RDONLY)", at(dest)),
                errno,
            };
            let fd = open_path(&at(dest).to_string_lossy()).map_err(|e| remount(e.errno))?;
            sys::set_mount_attrs(fd.as_fd(), "", sys::MOUNT_ATTR_RDONLY, false, dest)
                .map_err(|e| remount(e.errno))
        }
        (FsOp::Overlay { upper, dest, .. }, Prepared::Overlay { lower, upper: host }) => {
            mount_overlay(dest, lower, upper, host)
        }
        (FsOp::Scratch(dest), _) => {
            *scratch = Some(make_scratch(inh, dest)?);
            Ok(())
        }
        // A system path or optional bind the host does not have.
        (_, Prepared::Nothing) => Ok(()),
        (op, _) => Err(SysError {
            call: format!("internal: {op:?} was not prepared"),
            errno: Errno::EINVAL,
        }),
    }
}

/// Whether `p` exists: an error other than ENOENT is an error, not "absent" (a knob that
/// could not be looked at must not be left writable).
fn present(p: &Path) -> Result<bool, SysError> {
    p.try_exists()
        .map_err(|e| io_err(e, || format!("stat({p:?})")))
}

/// Bind each of proc's kernel-wide knobs read-only over itself in the proc at `path`.
fn protect_proc_knobs(path: &Path) -> Result<(), SysError> {
    for knob in PROC_KNOBS {
        let (src, dest) = (path.join(knob), path.join(knob));
        if present(&src)? {
            let t = sys::clone_tree(&src)?;
            sys::set_mount_attrs(t.as_fd(), "", RO | sys::MOUNT_ATTR_NOEXEC, true, &src)?;
            sys::attach_tree(t.as_fd(), &dest)?;
        }
    }
    Ok(())
}

/// An overlay at `dest`: its layers are attached in the scaffold (/layers/N/...), which is
/// detached with the scaffold once the overlay holds them.
fn mount_overlay(
    dest: &Path,
    lower: Vec<OwnedFd>,
    upper: &OverlayUpper,
    host: Option<(OwnedFd, PathBuf)>,
) -> Result<(), SysError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = PathBuf::from(format!(
        "/layers/{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut lowers = Vec::new();
    for (i, fd) in lower.iter().enumerate() {
        let p = base.join(format!("lower{i}"));
        make_dirs(&p)?;
        sys::attach_tree(fd.as_fd(), &p)?;
        lowers.push(p.display().to_string());
    }
    // overlayfs lists the uppermost lower layer first; the last --overlay-src is uppermost.
    lowers.reverse();
    let mut opts = format!("lowerdir={},userxattr", lowers.join(":"));
    let rw = match (upper, host) {
        (OverlayUpper::Host { upper, work }, Some((tree, common))) => {
            let rwdir = base.join("rw");
            make_dirs(&rwdir)?;
            sys::attach_tree(tree.as_fd(), &rwdir)?;
            let inside = |p: &Path| rwdir.join(p.strip_prefix(&common).unwrap_or(p));
            opts.push_str(&format!(
                ",upperdir={},workdir={}",
                inside(upper).display(),
                inside(work).display()
            ));
            true
        }
        (OverlayUpper::Tmpfs, _) => {
            let t = base.join("tmp");
            make_dirs(&t)?;
            mount_tmpfs(&t, "mode=0755")?;
            make_dirs(&t.join("upper"))?;
            make_dirs(&t.join("work"))?;
            opts.push_str(&format!(
                ",upperdir={0}/upper,workdir={0}/work",
                t.display()
            ));
            true
        }
        _ => false,
    };
    let path = at(dest);
    make_dirs(&path)?;
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if !rw {
        flags |= MsFlags::MS_RDONLY;
    }
    mount_fs("overlay", &path, "overlay", flags, Some(&opts))
}

/// The deepest directory containing both paths.
fn common_parent(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// passwd and group name only the sandbox user and nobody; hosts knows only localhost, and
/// nsswitch.conf adds DNS with the host's network (`shared_net`, see hosts_sources).
fn write_generated_etc(shared_net: bool) -> Result<(), SysError> {
    let user = spec::SANDBOX_USER;
    let hosts = hosts_sources(shared_net);
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
            format!(
                "passwd: files\ngroup: files\nshadow: files\nhosts: {hosts}\nnetworks: files\n\
                 protocols: files\nservices: files\n"
            ),
        ),
        ("etc/hostname", "airlock\n".into()),
    ];
    for (path, text) in files {
        write_new(
            &at(Path::new("/").join(path).as_path()),
            text.as_bytes(),
            0o644,
        )?;
    }
    Ok(())
}

/// A minimal /dev: the host's harmless device nodes bound in, the usual links, a new devpts
/// instance and a tmpfs /dev/shm. In a root that becomes read-only (airlock run) /dev is a
/// directory of the root, read-only with it at step 9; otherwise (bwrap's --dev) it is a
/// tmpfs of its own, writable as bubblewrap's. (A tmpfs fewer to make, remount and tear down
/// saved 62 us per launch of `airlock run --share-net -- /bin/true`.)
fn make_dev(
    dest: &Path,
    nodes: Vec<(&'static str, OwnedFd)>,
    in_readonly_root: bool,
    scratch_size: Option<u64>,
) -> Result<(), SysError> {
    let dev = at(dest);
    make_dirs(&dev)?;
    if !in_readonly_root {
        mount_tmpfs(&dev, "mode=0755")?;
    }
    for (name, fd) in nodes {
        attach(&fd, &dest.join(name), false)?;
    }
    for (name, target) in DEV_LINKS {
        std::os::unix::fs::symlink(target, dev.join(name))
            .map_err(|e| io_err(e, || format!("symlink({target:?}, {name:?})")))?;
    }
    let pts = dev.join("pts");
    make_dirs(&pts)?;
    mount_fs(
        "devpts",
        &pts,
        "devpts",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )?;
    let shm = dev.join("shm");
    make_dirs(&shm)?;
    // /dev/shm is writable memory too: in airlock run it gets the scratch budget, its size
    // and its inode cap (bwrap's --dev, as bubblewrap's, has neither).
    let shm_opts = match scratch_size {
        Some(size) => format!(
            "mode=1777,size={size},nr_inodes={}",
            spec::tmpfs_inodes(size)
        ),
        None => "mode=1777".to_string(),
    };
    mount_tmpfs(&shm, &shm_opts)
}

/// bwrap's --file, --bind-data, --ro-bind-data: the descriptor's content in a file at `dest`,
/// or in a file of the scaffold bound over `dest`.
fn write_file_from_fd(
    fd: i32,
    dest: &Path,
    perms: u32,
    bind: Option<Access>,
) -> Result<(), SysError> {
    let staging = match bind {
        None => at(dest),
        Some(_) => {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            PathBuf::from(format!("/bind-data-{n}"))
        }
    };
    // An existing file keeps its mode, as under bubblewrap (through a writable bind it is the
    // host's); --perms is for a file made here.
    let existed = staging.symlink_metadata().is_ok();
    let mut out = make_file(&staging, perms)?;
    let mut src = File::from(sys::dup_fd(fd).map_err(|e| SysError {
        call: format!("copy fd {fd} to {dest:?}"),
        errno: e.errno,
    })?);
    std::io::copy(&mut src, &mut out)
        .map_err(|e| io_err(e, || format!("copy fd {fd} to {dest:?}")))?;
    // Through the descriptor opened with O_NOFOLLOW: a symlink planted at the path meanwhile
    // (through a writable bind) is not followed.
    if !existed {
        out.set_permissions(std::fs::Permissions::from_mode(perms))
            .map_err(|e| io_err(e, || format!("fchmod({staging:?}, {perms:04o})")))?;
    }
    if let Some(access) = bind {
        let t = sys::clone_tree(&staging)?;
        sys::set_mount_attrs(t.as_fd(), "", access_attrs(access), true, dest)?;
        attach(&t, dest, false)?;
    }
    Ok(())
}

/// A tmpfs owned by the sandbox user, with the inputs copied in (never bound).
fn make_scratch(inh: &Inherited, dest: &Path) -> Result<(OwnedFd, Handed), SysError> {
    let mut handed = Vec::new();
    let path = at(dest);
    make_dirs(&path)?;
    let mut opts = "mode=0755".to_string();
    if let Some(l) = &inh.spec.limits {
        // Empty files take no block: without nr_inodes the kernel's default (half the RAM
        // pages) lets a task fill kernel memory with inodes whatever size= says.
        let inodes = spec::tmpfs_inodes(l.scratch_size);
        opts.push_str(&format!(",size={},nr_inodes={inodes}", l.scratch_size));
    }
    mount_tmpfs(&path, &opts)?;
    for (input, file) in inh.spec.inputs.iter().zip(&inh.inputs) {
        let dest = path.join(&input.name);
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
            path.as_path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || format!("open({dest:?}, O_DIRECTORY)"),
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

/// chdir to the task's directory: the spec's, or (bwrap without --chdir) the first of the
/// fallbacks that exists inside. Returns the directory entered.
fn enter_cwd(spec: &Spec) -> Result<PathBuf, SysError> {
    let fallbacks = spec
        .bwrap
        .as_ref()
        .map(|b| b.cwd_fallback.clone())
        .unwrap_or_default();
    if fallbacks.is_empty() {
        named(nix::unistd::chdir(spec.cwd.as_path()), || {
            format!("chdir({:?})", spec.cwd)
        })?;
        return Ok(spec.cwd.clone());
    }
    for dir in &fallbacks {
        if nix::unistd::chdir(dir.as_path()).is_ok() {
            return Ok(dir.clone());
        }
    }
    named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())?;
    Ok("/".into())
}

/// bwrap's --lock-file: a read lock held by init for the sandbox's lifetime.
fn take_locks(spec: &Spec) -> Result<Vec<File>, SysError> {
    let mut held = Vec::new();
    for path in spec.bwrap.iter().flat_map(|b| &b.lock_files) {
        let f = File::open(path).map_err(|e| io_err(e, || format!("open({path:?})")))?;
        named(
            nix::fcntl::fcntl(
                &f,
                nix::fcntl::FcntlArg::F_SETLK(&libc::flock {
                    l_type: libc::F_RDLCK as i16,
                    l_whence: libc::SEEK_SET as i16,
                    l_start: 0,
                    l_len: 0,
                    l_pid: 0,
                }),
            ),
            || format!("fcntl({path:?}, F_SETLK)"),
        )?;
        held.push(f);
    }
    Ok(held)
}

/// bwrap's --block-fd: wait until the descriptor has data (or is closed).
/// A non-blocking descriptor is waited on with poll, and a signal does not end the wait. A
/// write-only one is not waited on (it can never be read: bubblewrap's read fails at once).
fn wait_on_fd(fd: i32) -> Result<(), SysError> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let f = sys::dup_fd(fd)?;
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

fn drop_caps_except(keep: &[caps::Capability]) -> Result<(), SysError> {
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

/// The task's argv, environment and PATH, made before fork.
struct ExecPlan {
    argv: Vec<CString>,
    argv0: Option<CString>,
    envp: Vec<CString>,
    path: String,
}

impl ExecPlan {
    /// Takes step 10's proof that the network is set: no way to the task skips it.
    fn new(spec: &Spec, cwd: PathBuf, _network: NetworkSet) -> ExecPlan {
        let mut env = spec.env.clone();
        if spec.bwrap.is_some() {
            // bwrap sets PWD to the directory it entered.
            env.retain(|(n, _)| n != "PWD");
            env.push(("PWD".into(), cwd.display().to_string()));
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
                .unwrap_or_else(|| spec::SAFE_PATH.into()),
        }
    }
}

/// The task, pid 2: its signals (default, or bwrap mode's as the caller left them), its stdio, every other descriptor closed at exec, then
/// execve with the environment built from nothing. Never returns.
fn exec_task(inh: &Inherited, plan: &ExecPlan, init: Option<Pid>) -> ! {
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
                format!("dup2(<relay pipe>, {stream})")
            })
        {
            fail(format!("step 13: {e}"));
        }
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
    let (code, msg) = exec_search(plan);
    let _ = channel::send(sock, &Msg::ExecFailed(code, msg));
    sys::exit_now(code)
}

/// Why a file that is there could not be started: execve's ENOENT for an existing file.
pub const NO_INTERPRETER: &str =
    "the interpreter its #! line names (or its ELF loader) is not in the sandbox";

/// execve argv[0], searching `path` when it has no '/'. Returns only on failure: 127 when no
/// such command exists, 126 when one exists but cannot be executed.
fn exec_search(plan: &ExecPlan) -> (i32, String) {
    let (envp, path) = (&plan.envp, plan.path.as_str());
    // bwrap's --argv0: the program is looked up by its real name, started under another.
    let mut argv = plan.argv.clone();
    if let Some(a0) = &plan.argv0 {
        argv[0] = a0.clone();
    }
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
    let mut denied: Option<Errno> = None;
    for c in &candidates {
        let e = nix::unistd::execve(c, &argv, envp).unwrap_err();
        match e {
            // The file is there, but what it names to start it with is not: the interpreter of
            // its #! line or its ELF loader (a venv's script naming a host python, say). It
            // cannot be executed, as a shell says (126), rather than not found.
            Errno::ENOENT if nix::unistd::access(c.as_c_str(), AccessFlags::F_OK).is_ok() => {
                denied.get_or_insert(Errno::ENOENT);
            }
            Errno::ENOENT | Errno::ENOTDIR => {}
            // A file the kernel cannot start (no #! line) is a shell script to execvp(3), and so
            // to bubblewrap: /bin/sh runs it, with its path as $0.
            Errno::ENOEXEC => {
                let mut sh = vec![sys::cstring("/bin/sh"), c.clone()];
                sh.extend(argv.iter().skip(1).cloned());
                let e = nix::unistd::execve(&sh[0], &sh, envp).unwrap_err();
                denied = Some(denied.unwrap_or(match e {
                    Errno::ENOENT => Errno::ENOEXEC,
                    other => other,
                }));
            }
            other => denied = Some(denied.unwrap_or(other)),
        }
    }
    match denied {
        Some(Errno::ENOENT) => (
            spec::exit::NOT_EXECUTABLE,
            format!("{name}: cannot execute: {NO_INTERPRETER}"),
        ),
        Some(e) => (
            spec::exit::NOT_EXECUTABLE,
            format!("{name}: cannot execute: {}", sys::errno_text(e)),
        ),
        None => (spec::exit::NOT_FOUND, format!("{name}: command not found")),
    }
}

/// Init's loop: reap every process, forward SIGINT/SIGTERM/SIGHUP to the task (airlock run),
/// and report the task's end. When init exits, the kernel kills whatever else is left in the pid namespace.
fn supervise(task: Pid, sock: BorrowedFd, forward: bool) -> ! {
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
        // airlock run: the launcher's forwarded signal, for the task in its own session.
        // bwrap mode forwards nothing, as bubblewrap: a task in the caller's process group
        // already got what the group got (Ctrl-C), and must not get it twice.
        if sig != Signal::SIGCHLD {
            if forward {
                let _ = kill(task, sig);
            }
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
    if err.errno == Errno::ENOSPC
        && (err.call.starts_with("clone3(") || err.call.starts_with("unshare("))
    {
        if err.call.starts_with("unshare(CLONE_NEWNET)") {
            return Some(
                "the network namespace limit is reached: user.max_net_namespaces, on the host \
                 or in an enclosing user namespace"
                    .into(),
            );
        }
        return Some(
            "a namespace limit is reached: a user.max_*_namespaces sysctl, on the host or in an \
             enclosing user namespace, or the nesting depth of user namespaces (32)"
                .into(),
        );
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

#[cfg(test)]
mod tests {
    use super::Mount;

    /// The mounts a mount sits on, as the search for kernel interfaces tells a covered one
    /// (the path reaches a mount not among them) from a stale table (it reaches one of them).
    #[test]
    fn a_mount_sits_on_its_parents_down_to_the_root() {
        let table = b"1 0 0:1 / / rw - ext4 /dev/root rw\n\
                      2 1 0:2 / /m/p rw - proc proc rw\n\
                      3 1 0:3 / /m rw - tmpfs t rw\n\
                      4 3 0:4 / /m/p rw - proc proc rw\n\
                      5 1 0:5 / /x\\040y/p rw - proc proc rw\n";
        let all: Vec<Mount> = table
            .split(|&b| b == b'\n')
            .filter_map(Mount::parse)
            .collect();
        assert_eq!(all.len(), 5);
        assert_eq!(all[4].path, std::path::Path::new("/x y/p"));
        assert_eq!(all[1].fstype, b"proc");
        let below = |i: usize| all[i].below(&all);
        // (The root's parent, 0 here, is outside the table and ends the walk.)
        assert_eq!(below(1), [b"2", b"1", b"0"]);
        assert_eq!(below(3), [b"4", b"3", b"1", b"0"]);
        // /m/p reaches 4 (the later proc, on the tmpfs): not under 2, so 2 is covered.
        assert!(!below(1).contains(&&b"4"[..]));
    }
}
