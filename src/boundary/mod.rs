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
//!
//! Where each part is, in `src/boundary/`:
//!
//! - `mod.rs` (this file): `init` and `build`, which list steps 3 to 13 in kernel order, one
//!   call and one comment per step; the functions that are a step by themselves (descriptors,
//!   parent death, id maps, the sandbox user, the working directory, the network, the
//!   cgroup, lock files); and `supervise`, init's loop while the task runs.
//! - `userns.rs`: step 1 when bwrap's --userns names a user namespace to join: the
//!   namespaces are made in it, and the init forked there.
//! - `fs.rs`: steps 5, 7 and 8: the detached copies of host trees (`prepare`), the kernel's
//!   filesystems kept read-only in a writable copy (mountinfo read), the scaffold and the new
//!   root, and each filesystem operation of the plan applied in order (`apply`).
//! - `contents.rs`: what the sandbox's own files are: the minimal /etc (the host entries
//!   bound, the files generated), /dev, scratch with the inputs copied in, and bwrap's --file
//!   and --bind-data contents.
//! - `exec.rs`: step 12's capability drop and the task's side of step 13: signals, stdio,
//!   descriptors, bwrap's --block-fd, the seccomp filter last, then execve and the command
//!   search.
//! - `hint.rs`: the hint added to a failure whose usual cause is known.
//!
//! None of them makes a raw call: the crate's lints (Cargo.toml) refuse those everywhere but in
//! `src/sys.rs` (with its parts in `src/sys/`), which names the syscall and its arguments in
//! each error.

mod contents;
mod exec;
mod fs;
mod hint;
mod userns;

pub use contents::{DEV_LINKS, DEVICES, GENERATED_ETC, etc_from_host, hosts_sources};
pub use fs::{bind_source_route, walk_route, writable_sources};
#[cfg(test)]
pub use hint::ENOTSUPP;
pub use hint::hint;

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::MsFlags;
use nix::sys::resource::Resource;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};

use crate::channel::{self, Msg};
use crate::spec::{self, FsOp, Output, Seccomp, Spec};
use crate::sys::{self, SysError, io_err, named};

use exec::{ExecPlan, drop_caps_except, exec_task};
use fs::{apply, enter_new_root, enter_scaffold, open_path, prepare};

/// Everything the sandbox's init inherits from the launcher across clone3.
pub struct Inherited<'a> {
    pub spec: &'a Spec,
    /// The child's end of the channel.
    pub sock: OwnedFd,
    /// A pidfd of the launcher, readable once it has ended (steps 3 and 6).
    pub launcher: OwnedFd,
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
    /// The launcher (or its network namespace's helper) is making a cgroup v1 for this run, and
    /// the launcher will hand over its `tasks` files; this init joins it before it starts the
    /// task.
    pub cgroup_v1: bool,
    /// The run has a cgroup (v1 or v2) and asked for a cgroup namespace, which clone3 left out:
    /// this init makes it at step 12, once it is in the run's cgroup, so that the namespace is
    /// rooted there.
    pub cgroup_ns_in_cgroup: bool,
    /// The launcher makes the network namespace (in this init's user namespace, which it opens
    /// through /proc) and hands it over; this init joins it at step 10.
    pub net_by_launcher: bool,
    /// The run's deadline plus the launcher's grace: should the launcher not have ended the
    /// sandbox by then (stopped by SIGSTOP, traced), this init ends it itself (supervise).
    pub backstop: Option<std::time::Instant>,
    /// Resource limits set before the task starts (inherited by all its processes).
    pub rlimits: Vec<(nix::sys::resource::Resource, u64, u64)>,
    /// The signals the caller had blocked: bwrap mode's task starts with them blocked.
    pub caller_mask: SigSet,
    /// bwrap mode without a pid namespace: the caller's process group, which this init has
    /// left (`init`) and the task goes back to before its execve. Set by the init; the
    /// launcher leaves it None.
    pub caller_group: Option<Pid>,
    /// The caller's CPU affinity, when this init waits for the launcher's id maps: the
    /// launcher starts it on another CPU than its own (`sys::start_elsewhere`), and it takes
    /// the caller's back once the maps are written (step 2).
    pub caller_cpus: Option<nix::sched::CpuSet>,
    /// bwrap's --pidns as root, without a new pid namespace: a proc of the joined pid
    /// namespace for each --proc (detached mounts the launcher had made there, in --proc
    /// order), which this init's user namespace could not mount.
    pub joined_procs: std::cell::RefCell<Vec<OwnedFd>>,
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

/// The entry point of the sandbox's init after clone3. Never returns.
pub fn init(mut inh: Inherited) -> ! {
    // The task can read this process's /proc/1/cmdline: it is not to show the caller's line.
    sys::blank_argv();
    let sock = inh.sock.as_fd();
    if let Some(fd) = inh.spec.bwrap.as_ref().and_then(|b| b.userns_fd) {
        // Returns only in the new init, inside the joined and created namespaces.
        if let Err(e) = userns::join_namespaces(&inh, fd) {
            let text = crate::bwrap::message(&e);
            let _ = channel::send(sock, &Msg::SetupFailed(text));
            sys::exit_now(spec::exit::SETUP_FAILED)
        }
        // --info-fd and --json-status-fd name this process and its namespaces, which the
        // launcher reads once it is here (its own child made them, and is not in all).
        let b = inh.spec.bwrap.as_ref();
        if b.is_some_and(|b| b.info_fd.is_some() || b.json_status_fd.is_some())
            && let Err(e) = sys::announce_self(sock, channel::JOINED)
        {
            let _ = channel::send(sock, &Msg::SetupFailed(e.to_string()));
            sys::exit_now(spec::exit::SETUP_FAILED)
        }
    }
    // bwrap mode without a pid namespace: bubblewrap's --info-fd child-pid is its task, so a
    // signal sent to that pid reaches the task; here it reaches this init, which passes it on
    // (supervise). A signal to the caller's process group (Ctrl-C, a CI job's cancel) reaches
    // the task itself, so this init leaves that group first, not to pass it on a second time;
    // the task goes back to it before its execve (exec_task). With a pid namespace the pid is
    // a reaper that passes nothing on, under bubblewrap as here.
    let spec = inh.spec;
    // (With --userns, this is the init that named itself to the launcher for child-pid.)
    if spec.bwrap.is_some() && !spec.ns.pid && !spec.lockdown.as_pid_1 {
        let group = nix::unistd::getpgrp();
        if nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0)).is_ok() {
            inh.caller_group = Some(group);
        }
    }
    let inh = inh;
    let sock = inh.sock.as_fd();
    let forward = inh.spec.bwrap.is_none() || inh.caller_group.is_some();
    match build(&inh) {
        Ok((task, scratch)) => {
            // airlock run's Ctrl-Z and its continue (bwrap mode leaves them, as bubblewrap).
            let job_control = inh.spec.bwrap.is_none();
            supervise(task, sock, forward, job_control, scratch, inh.backstop)
        }
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

/// Steps 3 to 13, in order (the init's half of step 2, its id maps, comes after step 3:
/// descriptors are sanitized before anything else). Returns the pid of the running task, and a streamed run's
/// scratch (the launcher holds a JSON run's), whose fullness the task's end reports.
fn build(inh: &Inherited) -> Result<(Pid, Option<OwnedFd>), StepError> {
    let spec = inh.spec;
    let sock = inh.sock.as_fd();

    // 3. Sanitize descriptors; die with the launcher. Only the channel, the input files, the
    //    capture pipes and the descriptors the command line names stay open.
    //    PR_SET_PDEATHSIG is set, then the launcher is checked still alive (it may have died
    //    before the call: its pidfd then polls readable).
    sanitize_fds(inh).step("3 sanitize descriptors")?;
    die_with_launcher(inh).step("3 die with the launcher")?;

    // 2 (this side). Write our own uid/gid maps, or wait until the launcher has written them.
    match &inh.own_maps {
        Some((uid_map, gid_map)) => {
            write_maps(None, "/proc/self", uid_map, gid_map, true).step("2 write id maps")?
        }
        None => match channel::recv(sock, false, channel::SMALL).step("2 wait for id maps")? {
            Some(Msg::MapsReady) => {
                if let Some(cpus) = &inh.caller_cpus {
                    named(
                        nix::sched::sched_setaffinity(Pid::from_raw(0), cpus),
                        || "sched_setaffinity(0, <the caller's CPUs>)".into(),
                    )
                    .step("2 restore the caller's CPU affinity")?;
                }
            }
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
    //    Cap the inotify counts of this user namespace while the init holds CAP_SYS_RESOURCE in
    //    it (see USERNS_CAPS): the kernel charges each instance and watch made inside to the
    //    namespace's creator too (the caller; root for a root caller), up to the creator's own
    //    limit, so uncapped a task could take every inotify instance of host root. Written
    //    here through the host's /proc only where the plan mounts no /proc of its own (see
    //    caps_via).
    if caps_via(spec) == CapsVia::HostProc {
        cap_user_namespace(Path::new("/proc"), spec.bwrap.is_some())
            .step("4 cap the user namespace's counts")?;
    }

    //    The sandbox's own files (the root's directories, /etc, /dev, scratch, the inputs,
    //    bwrap's --dir and --file) get the modes airlock gives them whatever the caller's
    //    umask (under 0377 the task could not even read /etc); the task gets the caller's
    //    umask back at step 12. bwrap mode builds under umask 0, as bubblewrap does (its
    //    --dir is 0755 and its --file 0666 under any umask).
    let build_umask = if spec.bwrap.is_some() { 0 } else { 0o022 };
    let caller_umask = nix::sys::stat::umask(Mode::from_bits_truncate(build_umask));
    //    Likewise the caller's soft file size limit: airlock run sets the task's own at step
    //    12 (at most the caller's hard limit), so the files written here (/etc/passwd, the
    //    inputs) may take up to the hard one. Under `ulimit -S -f 0` the run had stopped at
    //    step 7 with EFBIG. bwrap mode keeps the caller's limits, as bubblewrap does.
    if spec.bwrap.is_none() {
        crate::limits::raise_soft_to_hard(Resource::RLIMIT_FSIZE)
            .step("4 file size limit for the build")?;
    }
    //    Step 5 holds a descriptor for each bind until step 7 mounts it (bubblewrap mounts
    //    each as it goes), so in bwrap mode the caller's soft limit of open files is raised to
    //    its hard one for the build, and the caller's soft and hard limits are set again at
    //    step 12, before the task starts. (airlock run raised it in the launcher, step 1.)
    let caller_nofile = match spec.bwrap {
        Some(_) => Some(
            crate::limits::raise_soft_to_hard(Resource::RLIMIT_NOFILE)
                .step("4 open-file limit for the build")?,
        )
        // Nothing to give back where the soft limit already was the hard one.
        .filter(|(soft, hard)| soft != hard),
        None => None,
    };

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
    die_with_launcher(inh).step("6 die with the launcher")?;
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
    //    bwrap's --disable-userns caps the user namespaces made in this one (see step 12).
    //    Where step 12 nests the task's user namespace, this init's /proc directory is opened
    //    now, while the host's /proc is in reach: the nested maps are written through it.
    let nested = spec.bwrap.as_ref().is_some_and(|b| b.nested_userns);
    let max_userns = match spec.bwrap.as_ref().is_some_and(|b| b.disable_userns) {
        true if nested => Some("1"),
        true => Some("0"),
        false => None,
    };
    let proc_self = match nested {
        true => Some(
            named(
                nix::fcntl::open(
                    "/proc/self",
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                ),
                || "open(\"/proc/self\", O_PATH|O_DIRECTORY)".into(),
            )
            .step("7 open this init's /proc directory")?,
        ),
        false => None,
    };
    enter_scaffold(max_userns).step("7 new root")?;
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
    let scratch = match (spec.output, scratch) {
        (Output::Json { .. }, Some((fd, handed))) => {
            channel::send(sock, &Msg::Scratch(fd, handed)).step("11 hand over scratch")?;
            None
        }
        (_, scratch) => scratch.map(|(fd, _)| fd),
    };
    // bwrap's --lock-file: held by this init for the sandbox's lifetime.
    let locks = take_locks(spec).step("11 lock files")?;

    // 12. Lock down the init, in this order: the run's cgroup (v1: the launcher, or its
    //     helper, made it meanwhile and the launcher hands over its tasks files), the cgroup
    //     namespace rooted there, and resource limits (bwrap mode: the caller's open-file
    //     limits, as they were before step 4); capabilities dropped in every
    //     set (bounding, ambient, inheritable, permitted, effective) but those kept on
    //     purpose; no_new_privs (so exec can never add privilege, setuid bits included, and so
    //     an unprivileged process may install seccomp and Landlock); with the host's network
    //     shared in airlock run, a Landlock domain that scopes abstract unix sockets to the
    //     sandbox (the launcher checked the kernel has it); a new session with no controlling
    //     terminal (TIOCSTI injection, CVE-2017-5226) when the task has this init as reaper.
    //     The seccomp filters come last, in the task (step 13), because they deny calls the
    //     steps before need.
    if inh.cgroup_v1 {
        join_cgroup(sock)?;
    }
    // Made in clone3, the cgroup namespace would be rooted at the caller's cgroup, and the
    // task would read the run's host-side cgroup (airlock-<launcher's host pid>-...) in
    // /proc/self/cgroup; made here, in the run's cgroup, it reads "/", as the caller's own.
    if inh.cgroup_ns_in_cgroup {
        sys::unshare_namespaces(libc::CLONE_NEWCGROUP).step("12 create the cgroup namespace")?;
    }
    let caller_limits = caller_nofile.map(|(soft, hard)| (Resource::RLIMIT_NOFILE, soft, hard));
    for (res, soft, hard) in caller_limits.iter().chain(&inh.rlimits) {
        named(nix::sys::resource::setrlimit(*res, *soft, *hard), || {
            format!("setrlimit({res:?}, {soft}, {hard})")
        })
        .step("12 resource limits")?;
    }
    // airlock run: a real-time policy or negative nice value of the caller's is not handed to
    // the task, which would take the CPUs from the host's own processes, nor a personality
    // that turns off address space randomization or maps page 0 (bwrap mode passes them on,
    // as bubblewrap does).
    if spec.bwrap.is_none() {
        sys::drop_raised_priority().step("12 drop a raised scheduling priority")?;
        sys::clear_weakening_personality().step("12 clear weakening personality flags")?;
    }
    if let Some(fd) = spec.bwrap.as_ref().and_then(|b| b.userns2_fd) {
        sys::join_namespace(fd, libc::CLONE_NEWUSER).step("12 enter the second user namespace")?;
        // As at step 1: the new credentials are no subset of the old, which clears
        // PR_SET_PDEATHSIG.
        die_with_launcher(inh).step("12 die with the launcher")?;
    }
    //    bwrap mode, as bubblewrap: with --dev and a sandbox uid or gid other than 0, or with
    //    --disable-userns, the task runs in a user namespace nested in the sandbox's, which
    //    owns none of the sandbox's namespaces: capabilities kept with --cap-add do not let it
    //    mount, unmount or remount there, configure its network or set its hostname.
    //    An unprivileged caller's init, which may write only files it owns, is dumpable
    //    while it writes the maps (a non-dumpable process's /proc files are host root's); it
    //    holds nothing then that the caller could not open, and no process of the sandbox
    //    runs yet.
    if let Some(proc_self) = &proc_self {
        let dumpable = !inh.caller_is_root;
        enter_nested_userns(proc_self, spec.uid, spec.gid, dumpable)
            .step("12 enter a nested user namespace")?;
    }
    drop(proc_self);
    //    bwrap's --disable-userns and --assert-userns-disabled: the user namespace the task
    //    will be in must refuse a nested one now, while nothing can have changed that yet.
    if spec
        .bwrap
        .as_ref()
        .is_some_and(|b| b.disable_userns || b.assert_userns_disabled)
    {
        nested_userns_refused().step(NESTED_USERNS_STEP)?;
    }
    nix::sys::stat::umask(caller_umask);
    drop_caps_except(&spec.lockdown.keep_caps).step("12 drop capabilities")?;
    // bwrap mode, an unprivileged caller: bubblewrap enters the working directory with the
    // task's own capabilities, so one the task may not enter is an error (--chdir) or passed
    // over (the caller's directory, then $HOME). (A root caller's bubblewrap task keeps root's
    // capabilities; airlock's has none, and stays where step 9 entered.)
    //    From the root, as bubblewrap resolves it after pivot_root: a relative path is not
    //    taken from the directory step 9 entered.
    let cwd = match spec.bwrap.is_some() && !inh.caller_is_root {
        true => named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())
            .and_then(|()| enter_cwd(spec))
            .step("12 enter the working directory")?,
        false => cwd,
    };
    named(nix::sys::prctl::set_no_new_privs(), || {
        "prctl(PR_SET_NO_NEW_PRIVS, 1)".into()
    })
    .step("12 no_new_privs")?;
    if spec.lockdown.scope_abstract_sockets {
        sys::landlock_scope_abstract_sockets().step("12 scope abstract unix sockets")?;
    }
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
    // bwrap mode's init that is --info-fd's child-pid (no pid namespace) takes these to pass
    // on (supervise): a SIGTSTP there had stopped the init, not the task (a review).
    if inh.caller_group.is_some() {
        PASSED_AS_THEY_ARE.iter().for_each(|&s| blocked.add(s));
    }
    named(
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None),
        || format!("sigprocmask(SIG_BLOCK, {blocked:?})"),
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
    cancel_if_asked(inh);
    let pid = sys::start_task(how, &mut || exec_task(inh, &exec, Some(init_pid)))
        .step("13 start task")?;
    std::mem::forget(locks);
    Ok((pid, scratch))
}

/// The limits written into the sandbox's own user namespace (`sys/user/` of a /proc, which
/// reads and writes the values of the writer's user namespace): at step 4 in bwrap mode, at
/// step 7 in airlock run. Each inotify instance and watch made in a user namespace counts in
/// it and, up the chain, in its creator's counts in the parent namespace, against the
/// parent's limit: without these caps a root caller's task could
/// hold all 128 inotify instances of host root (`fs.inotify.max_user_instances`), and then no
/// root daemon of the host could start watching a file until the run ended. With them a run
/// takes at most this much of its creator's pool. File watchers need one instance each and a
/// watch per directory watched.
pub const USERNS_CAPS: [(&str, u32); 2] = [
    ("sys/user/max_inotify_instances", 16),
    ("sys/user/max_inotify_watches", 16384),
];

/// Where the user namespace's caps (USERNS_CAPS) are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CapsVia {
    /// At step 7, through the new /proc the plan mounts (airlock run always; bwrap mode with
    /// --proc in a pid namespace of its own), right after it is mounted: there each file's
    /// lookup takes a few µs, where in the host's /proc/sys/user it took 30-40 µs per file in
    /// a new user namespace on the dev VM (the dentry cache walks a chain of same-named
    /// entries).
    OwnProc,
    /// At step 4, through the host's /proc (bwrap mode without a new /proc).
    HostProc,
    /// Not at all: a user namespace bwrap's --userns names is the caller's own.
    Nowhere,
}

pub(super) fn caps_via(spec: &Spec) -> CapsVia {
    if spec.bwrap.as_ref().is_some_and(|b| b.userns_fd.is_some()) {
        CapsVia::Nowhere
    } else if spec
        .fs
        .iter()
        .any(|op| matches!(op, FsOp::Proc(_)) && fs::own_pid_ns(spec))
    {
        CapsVia::OwnProc
    } else {
        CapsVia::HostProc
    }
}

/// The caps on the user namespace's counts (USERNS_CAPS), written through the /proc at
/// `proc`. A failure stops the launch, with one exception: bwrap mode where the host's
/// /proc/sys is mounted read-only (a container runtime's) runs without them, as bubblewrap
/// always does (`bwrap_mode`; README, bwrap section).
pub(super) fn cap_user_namespace(proc: &Path, bwrap_mode: bool) -> Result<(), SysError> {
    for (name, max) in USERNS_CAPS {
        let path = proc.join(name);
        match std::fs::write(&path, max.to_string()) {
            Ok(()) => {}
            Err(e) if bwrap_mode && e.raw_os_error() == Some(libc::EROFS) => return Ok(()),
            Err(e) => return Err(io_err(e, || format!("write({path:?}, \"{max}\")"))),
        }
    }
    Ok(())
}

/// Step 12's check that no nested user namespace can be made here (bwrap mode words its
/// failure as bubblewrap does).
pub const NESTED_USERNS_STEP: &str = "12 nested user namespaces refused";

/// Try to create a user namespace: the kernel's refusal (any errno) is the answer wanted. Should
/// the kernel allow it, this init has left the sandbox's user namespace for the new one, and
/// the launch stops with the error.
fn nested_userns_refused() -> Result<(), SysError> {
    match sys::unshare_namespaces(libc::CLONE_NEWUSER) {
        Err(_) => Ok(()),
        Ok(()) => Err(SysError {
            call: "unshare(CLONE_NEWUSER) succeeded: user namespaces were to be disabled".into(),
            errno: Errno::EEXIST,
        }),
    }
}

/// Step 12's nested user namespace (`BwrapIo::nested_userns`): this init leaves the sandbox's
/// user namespace for a new one inside it, mapping the sandbox's uid and gid to themselves.
/// Without capabilities in the parent namespace a process may map only its own ids, with
/// setgroups denied first (bubblewrap's inner namespace denies it too). The files are opened
/// from `proc_self`, this init's /proc directory opened at step 7 (the sandbox may have no
/// /proc), after the unshare: a map file writes the namespace its process was in when opened.
fn enter_nested_userns(
    proc_self: &OwnedFd,
    uid: u32,
    gid: u32,
    dumpable: bool,
) -> Result<(), SysError> {
    if dumpable {
        named(nix::sys::prctl::set_dumpable(true), || {
            "prctl(PR_SET_DUMPABLE, 1)".into()
        })?;
    }
    sys::unshare_namespaces(libc::CLONE_NEWUSER)?;
    let (uid_map, gid_map) = (format!("{uid} {uid} 1"), format!("{gid} {gid} 1"));
    write_maps(
        Some(proc_self.as_fd()),
        "/proc/self",
        &uid_map,
        &gid_map,
        true,
    )?;
    non_dumpable()
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
    let mut keep = vec![inh.sock.as_raw_fd(), inh.launcher.as_raw_fd()];
    keep.extend(inh.inputs.iter().flatten().map(|f| f.as_raw_fd()));
    if let Some((o, e)) = &inh.capture {
        keep.extend([o.as_raw_fd(), e.as_raw_fd()]);
    }
    keep.extend(inh.relayed.iter().flatten().map(|f| f.as_raw_fd()));
    keep.extend(inh.joined_procs.borrow().iter().map(|f| f.as_raw_fd()));
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
    for (f, hierarchy) in tasks.iter().zip(["memory", "pids"]) {
        named(nix::unistd::write(f, b"0"), || {
            format!("write(<the {hierarchy} hierarchy's tasks file>, \"0\")")
        })
        .step(STEP)?;
    }
    Ok(())
}

/// Write the id maps of the process whose proc directory is `proc_dir` (`/proc/self` when the
/// init maps itself, `/proc/PID` when the launcher does), or, with `dir`, the directory that
/// descriptor holds (`proc_dir` then only names it in errors: step 12's nested namespace,
/// where the sandbox may have no /proc). An unprivileged caller may map only its own ids, and
/// only with setgroups denied first, which `deny_setgroups` does.
pub fn write_maps(
    dir: Option<BorrowedFd>,
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
        let call = || format!("write({path:?}, {:?})", text.trim_end());
        match dir {
            None => std::fs::write(&path, text).map_err(|e| io_err(e, call))?,
            Some(dir) => {
                let flags = OFlag::O_WRONLY | OFlag::O_CLOEXEC;
                let fd = named(nix::fcntl::openat(dir, file, flags, Mode::empty()), call)?;
                std::io::Write::write_all(&mut std::fs::File::from(fd), text.as_bytes())
                    .map_err(|e| io_err(e, call))?;
            }
        }
    }
    Ok(())
}

/// airlock run: a signal asking the run to end (SIGINT, SIGTERM, SIGHUP, SIGQUIT), which the
/// launcher passes on and this init holds blocked, ends setup here, before the task starts:
/// the launcher reports the run cancelled (the task never ran), not a task killed by it.
/// Asked between the inputs' copies and before step 13's start. bwrap mode passes none on.
pub(super) fn cancel_if_asked(inh: &Inherited) {
    if inh.spec.bwrap.is_some() {
        return;
    }
    let ending: SigSet = crate::launch::ASKING_TO_END.into_iter().collect();
    if let Ok(Some((sig, _))) = sys::wait_signal(&ending, Some(std::time::Instant::now())) {
        let _ = channel::send(inh.sock.as_fd(), &Msg::Cancelled(sig as i32));
        sys::exit_now(spec::exit::SETUP_FAILED);
    }
}

fn die_with_launcher(inh: &Inherited) -> Result<(), SysError> {
    let launcher = inh.launcher.as_fd();
    named(nix::sys::prctl::set_pdeathsig(Signal::SIGKILL), || {
        "prctl(PR_SET_PDEATHSIG, SIGKILL)".into()
    })?;
    // getppid() is 0 in a new pid namespace, so the launcher's liveness is read from its
    // pidfd: readable, it ended before PR_SET_PDEATHSIG took effect. (Not from the channel:
    // the network namespace's helper holds the launcher's end open while it runs.)
    let mut fds = [nix::poll::PollFd::new(
        launcher,
        nix::poll::PollFlags::POLLIN,
    )];
    named(
        nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
        || "poll(<launcher's pidfd>)".into(),
    )?;
    let gone = fds[0].revents().is_some_and(|r| !r.is_empty());
    if gone {
        sys::exit_now(spec::exit::SETUP_FAILED);
    }
    Ok(())
}

/// setgroups([]) for a root caller of bwrap mode. Where this user namespace denies setgroups
/// to everyone (the root of `unshare -r`, or of a container made without privilege: its
/// parent wrote `deny`, and every namespace made inside inherits it), the groups cannot be
/// dropped, and stay as an unprivileged caller's do: not a failure (a review: every bwrap line
/// failed there, which bubblewrap runs, as it never tries).
pub fn drop_groups() -> nix::Result<()> {
    match nix::unistd::setgroups(&[]) {
        Err(Errno::EPERM)
            if std::fs::read_to_string("/proc/self/setgroups")
                .is_ok_and(|s| s.trim() == "deny") =>
        {
            Ok(())
        }
        other => other,
    }
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
        // bwrap mode alone lets a namespace that denies setgroups keep them, as bubblewrap
        // does; airlock run's task must not keep a root caller's groups (the sign-off: in a
        // namespace mapping 0 and 65534 with setgroups denied, it read /etc/shadow through
        // group shadow), so there it stays a failure.
        let dropped = match spec.bwrap {
            Some(_) => drop_groups(),
            None => nix::unistd::setgroups(&[]),
        };
        named(dropped, || "setgroups([])".into())?;
    }
    let (uid, gid) = (Uid::from_raw(spec.uid), Gid::from_raw(spec.gid));
    named(nix::unistd::setresgid(gid, gid, gid), || {
        format!("setresgid({gid})")
    })?;
    named(nix::unistd::setresuid(uid, uid, uid), || {
        format!("setresuid({uid})")
    })
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

/// Init's loop: reap every process, forward SIGINT/SIGTERM/SIGHUP and the other signals the
/// launcher blocked (`launch::ALSO_ENDING`; airlock run, to whom `interrupted` says; bwrap
/// mode without a pid namespace, to the task), with `job_control` (airlock run) stop and
/// continue the sandbox on the launcher's SIGTSTP and SIGCONT and pass on its SIGWINCH, and
/// report the task's end (and, airlock run, whether its `/dev/shm`, sized as scratch, is
/// full). When init exits,
/// the kernel kills whatever else is left in the pid namespace. The launcher enforces the
/// timeout; at `backstop`, past it, this init kills the sandbox itself, as a launcher that
/// SIGSTOP stopped (no process can catch it) would leave the task running on unbounded.
/// bwrap mode without a pid namespace: --info-fd's child-pid is this init where it is
/// bubblewrap's task itself, so besides the ending signals the init passes these on to the
/// task as they came: job control (the task stops, not the init) and the rest a program
/// handles (a window resized, out-of-band data, a broken pipe).
const PASSED_AS_THEY_ARE: [Signal; 7] = [
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGCONT,
    Signal::SIGWINCH,
    Signal::SIGURG,
    Signal::SIGPIPE,
];

fn supervise(
    task: Pid,
    sock: BorrowedFd,
    forward: bool,
    job_control: bool,
    scratch: Option<OwnedFd>,
    mut backstop: Option<std::time::Instant>,
) -> ! {
    let mut stopped_it = false;
    let own_pid_ns = nix::unistd::getpid().as_raw() == 1;
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
    ] {
        set.add(s);
    }
    // Only those blocked: the launcher blocked them (bwrap mode: with the ones the caller had
    // blocked, which stay blocked there, SIGTSTP, SIGCONT and SIGWINCH too), or step 13 did
    // (bwrap mode's child-pid init).
    let job = [Signal::SIGTSTP, Signal::SIGCONT, Signal::SIGWINCH];
    let as_they_are = forward && !job_control;
    if let Ok(mask) = SigSet::thread_get_mask() {
        for &s in crate::launch::ALSO_ENDING
            .iter()
            .chain(job.iter().filter(|_| job_control))
            .chain(PASSED_AS_THEY_ARE.iter().filter(|_| as_they_are))
        {
            if mask.contains(s) {
                set.add(s);
            }
        }
    }
    loop {
        let sig = match sys::wait_signal(&set, backstop) {
            // A process of the sandbox signalling its pid 1 (`kill -TSTP 1` stopped the whole
            // sandbox until the timeout: a red team's): nothing is passed on, as bubblewrap's
            // pid 1, which the kernel shields from its namespace's signals, passes nothing.
            // Only as pid 1: an init in the caller's pid namespace (bwrap mode without
            // --unshare-pid) takes the host's signals to its pid (--info-fd's child-pid).
            Ok(Some((s, sys::Sender::Inside))) if s != Signal::SIGCHLD && own_pid_ns => {
                continue;
            }
            Ok(Some((s, _))) => s,
            // The task's end is reported as the kill's; the launcher, once it runs again,
            // finds its deadline past and reports the run as timed out.
            Ok(None) => {
                backstop = None;
                stopped_it = true;
                let _ = kill(everyone(task), Signal::SIGKILL);
                continue;
            }
            Err(_) => continue,
        };
        // airlock run: the launcher's forwarded signal, for the task in its own session.
        // bwrap mode forwards nothing, as bubblewrap: a task in the caller's process group
        // already got what the group got (Ctrl-C), and must not get it twice.
        if sig != Signal::SIGCHLD {
            if forward {
                let _ = match sig {
                    // The launcher's Ctrl-Z, and its continue: every process of the sandbox
                    // (kill(-1) from its pid 1). SIGSTOP, not SIGTSTP: the task's session has
                    // no terminal, so the kernel drops a SIGTSTP to its orphaned groups.
                    Signal::SIGTSTP if job_control => kill(everyone(task), Signal::SIGSTOP),
                    Signal::SIGCONT if job_control => kill(everyone(task), Signal::SIGCONT),
                    _ => kill(interrupted(task, sig), sig),
                };
            }
            continue;
        }
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == task => {
                    report_end(sock, false, code, scratch.as_ref(), job_control, stopped_it)
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == task => report_end(
                    sock,
                    true,
                    sig as i32,
                    scratch.as_ref(),
                    job_control,
                    stopped_it,
                ),
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => {}
                // No child left (ECHILD) with the task's end unseen, or an error waitpid
                // should never give: the end can no longer be learned, and no SIGCHLD would
                // come to wait for. Exit, and the launcher reports that the init ended before
                // the task's end (found by fault injection: tests/fault_injection.rs).
                Err(_) => sys::exit_now(1),
            }
        }
    }
}

/// Who a forwarded signal goes to. SIGINT is Ctrl-C, which a terminal sends to the whole
/// foreground process group (as it sends SIGWINCH, the window resized: `sh -c 'vim; ...'`'s
/// editor is the shell's child): a shell waiting for its child (`sh -c 'make; echo done'`) holds
/// it until that child ends, as dash and bash do, because the child got it too. Sent to the
/// task alone, the child never did, and nothing ends the run (SIGTERM and SIGHUP are backed by
/// the launcher's kill after its grace; SIGINT is not). So it goes to every process of the
/// sandbox: kill(-1) from the init of the sandbox's own pid namespace reaches them all but
/// this init. SIGTERM and SIGHUP go to the task alone, as `kill PID` and a service manager
/// send them.
fn interrupted(task: Pid, sig: Signal) -> Pid {
    match matches!(sig, Signal::SIGINT | Signal::SIGWINCH) {
        true => everyone(task),
        false => task,
    }
}

/// kill(-1) from the init of the sandbox's own pid namespace: every process in it but the
/// init. An init that is not pid 1 (bwrap mode without --unshare-pid) names the task alone,
/// as kill(-1) would reach the caller's every process.
fn everyone(task: Pid) -> Pid {
    match nix::unistd::getpid() == Pid::from_raw(1) {
        true => Pid::from_raw(-1),
        false => task,
    }
}

fn report_end(
    sock: BorrowedFd,
    signaled: bool,
    value: i32,
    scratch: Option<&OwnedFd>,
    dev_shm: bool,
    timed_out: bool,
) -> ! {
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
            // `/dev/shm` has scratch's size and inodes (--scratch-size): full, it is the
            // limit the task ran into as a full scratch is (the kill-storm review).
            scratch_full: scratch.is_some_and(|fd| crate::report::full(fd.as_fd()))
                || (dev_shm && crate::report::full_at("/dev/shm")),
            timed_out,
        },
    );
    sys::exit_now(0)
}

#[cfg(test)]
mod tests {
    use super::{USERNS_CAPS, cap_user_namespace};
    use nix::errno::Errno;

    /// The caps go to `sys/user/` of the /proc given, each file its value; a /proc where they
    /// cannot be written (here one without the files) is an error naming the write, in airlock
    /// run and in bwrap mode alike (only bwrap mode's EROFS is let through).
    #[test]
    fn the_user_namespace_caps_are_written_or_the_launch_stops() {
        let proc = tempfile::tempdir().unwrap();
        for bwrap_mode in [false, true] {
            let e = cap_user_namespace(proc.path(), bwrap_mode).unwrap_err();
            assert_eq!(e.errno, Errno::ENOENT, "{e:?}");
            assert!(e.call.contains("sys/user/max_inotify_instances"), "{e:?}");
        }
        std::fs::create_dir_all(proc.path().join("sys/user")).unwrap();
        for (name, _) in USERNS_CAPS {
            std::fs::write(proc.path().join(name), "0").unwrap();
        }
        cap_user_namespace(proc.path(), false).unwrap();
        for (name, max) in USERNS_CAPS {
            let got = std::fs::read_to_string(proc.path().join(name)).unwrap();
            assert_eq!(got, max.to_string(), "{name}");
        }
    }
}
