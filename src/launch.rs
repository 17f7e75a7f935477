//! The launcher's side: create the namespaces (one clone3 call, and the network namespace in
//! parallel with the init's setup), write the id maps, then
//! supervise the sandbox (signals, timeout, captured output) until its init has exited, and
//! collect the results. It never touches the sandbox's filesystem except through the scratch
//! descriptor the init hands over.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::boundary::{self, Inherited};
use crate::channel::{self, Msg};
use crate::limits::{self, Cgroup, Mechanism};
use crate::relay;
use crate::report::{self, Capture, Files, Pipe};
use crate::spec::{Access, FsOp, Input, InputSource, Output, Spec};
use crate::sys::{self, Forked, SysError, named};

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signaled(i32),
    /// The deadline passed and the whole sandbox was killed.
    TimedOut,
    /// The sandbox's init died without reporting the task's end (the task killed it, or it
    /// was killed from outside): everything in the sandbox died with it.
    InitKilled(i32),
}

#[derive(Debug)]
pub struct Outcome {
    pub end: End,
    /// Which limit ended the task, if one did.
    pub limit_hit: Option<&'static str>,
    /// How memory and pids were limited.
    pub mechanism: Mechanism,
    pub limits: Option<limits::Limits>,
    /// `limits` as they applied: rlimits at most the caller's own hard limits.
    pub applied_limits: Option<limits::Limits>,
    pub duration: Duration,
    pub stdout: Capture,
    pub stderr: Capture,
    pub files: Files,
    /// A streamed run: writing the task's output to the caller's stdout or stderr failed (a
    /// full disk, an I/O error), so not all of it was delivered (relay.rs said what failed).
    pub output_lost: bool,
    /// A signal asked the run to end, and the sandbox was killed when the task had not ended
    /// TERM_GRACE later: said so (a report's `signal` 9 alone looks like any other kill).
    pub killed_after_grace: Option<String>,
}

/// A run that did not start the task.
#[derive(Debug)]
pub enum Failure {
    /// Bad input discovered while preparing (exit 2).
    Usage(String),
    /// An isolation step failed (exit 125).
    Setup(String),
    /// The timeout fired before the task started (exit 124): setup, which copies the
    /// inputs, took longer.
    SetupTimedOut(String),
    /// A signal that asks the run to end (SIGINT, SIGTERM, SIGHUP, SIGQUIT) came before the
    /// task started (exit 128+N): setup was ended, and the task never ran.
    Cancelled(Signal, String),
    /// The command could not be executed (126) or was not found (127).
    Exec(i32, String),
}

/// The clone3 flags for a spec: user and mount namespaces always, the others as asked.
fn namespace_flags(spec: &Spec) -> u64 {
    (libc::CLONE_NEWUSER | libc::CLONE_NEWNS | spec.ns.flags()) as u64
}

/// The signals besides SIGINT, SIGTERM and SIGHUP whose default action ends airlock (and
/// bubblewrap's launcher), sent by another process rather than by a fault. Not SIGPIPE or
/// SIGXFSZ, which airlock's own writes may raise (they return EPIPE or EFBIG instead;
/// bubblewrap does not write the task's output), nor the real-time signals. airlock run
/// forwards them to the task (SIGQUIT backed by the kill after TERM_GRACE, as SIGTERM; the
/// others the task's to handle: dd's SIGUSR1); bwrap mode waits for the sandbox before dying
/// of them, as bubblewrap's task outlives it.
pub(crate) const ALSO_ENDING: [Signal; 10] = [
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGVTALRM,
    Signal::SIGPROF,
    Signal::SIGIO,
    Signal::SIGPWR,
    Signal::SIGXCPU,
    Signal::SIGSTKFLT,
];

/// The signals airlock run forwards that ask the run to end; before the task starts they
/// cancel it (boundary::cancel_if_asked).
pub(crate) const ASKING_TO_END: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Whether a signal airlock run forwards asks the run to end (ASKING_TO_END): the others of
/// ALSO_ENDING are the task's to handle, and neither end the sandbox nor cut the delivery of
/// its output short.
pub(crate) fn asks_to_end(sig: Signal) -> bool {
    ASKING_TO_END.contains(&sig)
}

/// Grace between forwarding SIGTERM/SIGHUP and killing the whole sandbox.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// A SIGINT this soon after the one before is Ctrl-C pressed again, which ends the sandbox as
/// SIGTERM does; a later one is a first again: the user of a REPL or shell in the sandbox
/// presses Ctrl-C now and then, and the second of a session had killed it.
const INTERRUPT_AGAIN: Duration = Duration::from_secs(5);

pub fn run(spec: &Spec) -> Result<Outcome, Failure> {
    let start = Instant::now();
    let caller_is_root = nix::unistd::geteuid().is_root();
    // airlock run holds one descriptor per --input, here and in the init until scratch is
    // filled: the caller's soft limit of open files (often 1024) is raised to its hard one,
    // as the task's own is set at step 12. bwrap mode keeps the caller's, as bubblewrap does
    // (its init raises it for the build alone: boundary::build, step 4).
    if spec.bwrap.is_none() {
        limits::raise_soft_to_hard(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_err(|e| Failure::Setup(format!("step 1: {e}")))?;
    }
    let inputs = open_inputs(spec)?;
    let routed = match spec.bwrap {
        None => routed_binds(spec)?,
        Some(_) => None,
    };
    let spec = routed.as_ref().unwrap_or(spec);
    if spec.bwrap.is_none() {
        check_binds_and_inputs(spec, &inputs)?;
    }
    let setup = |e: SysError| Failure::Setup(format!("step 1: {e}"));
    // The cgroup for memory and pids: a v2 one must exist before clone3 puts the init in it;
    // a v1 one is made after clone3, while the init builds the sandbox (by the network
    // namespace's helper, on the other core, when there is one), and joined by the init
    // before it starts the task.
    let plan = spec.limits.map(|l| limits::detect(caller_is_root, &l));
    let mechanism = plan.as_ref().map_or(Mechanism::Rlimit, |p| p.mechanism());
    // What the limits come to under the caller's own rlimits (the report shows both).
    let applied = spec.limits.map(|l| limits::applicable(&l, mechanism));
    let cgroup_parents = plan.as_ref().map(|p| p.parents()).unwrap_or_default();
    let live_siblings = plan.as_ref().map_or(0, |p| p.live_siblings());
    let launcher = std::process::id();
    let make_cgroup = |plan, l| {
        Cgroup::create(plan, l, launcher)
            .map_err(|e| Failure::Setup(format!("step 1 create cgroup: {e}")))
    };
    let (mut cgroup, v1_plan) = match (plan, &spec.limits) {
        (Some(p @ limits::Plan::V1 { .. }), Some(_)) => (None, Some(p)),
        (Some(p), Some(l)) => (make_cgroup(p, l)?, None),
        _ => (None, None),
    };
    let (parent_sock, child_sock) = channel::pair().map_err(setup)?;
    // The task's ends of the pipes made here belong to its host uid, as pipes its caller made
    // would: so it can reopen them too (/dev/stdout, /dev/stdin), which it could not were they
    // root's.
    let owner = (caller_is_root && !spec.identity_map).then_some((spec.host_uid, spec.host_gid));
    let capture = match spec.output {
        Output::Json { .. } => Some((relay::pipe(owner, true)?, relay::pipe(owner, true)?)),
        Output::Stream => None,
    };
    // A streamed run's standard streams that are files reach the task as relayed pipes
    // (relay.rs); bwrap mode passes them as they are, as bubblewrap does.
    let relay::Plan {
        mut relays,
        mut feed,
        task_ends,
        relayed,
    } = match (&spec.output, &spec.bwrap) {
        (Output::Stream, None) => relay::plan(owner, applied.map(|l| l.file_size))?,
        _ => relay::Plan::none(),
    };
    // The streams the task gets as they are share their file status flags with the caller;
    // those the task changed are put back once the sandbox is gone (bwrap mode: as bubblewrap,
    // not).
    let stream_flags = (matches!(spec.output, Output::Stream) && spec.bwrap.is_none())
        .then(|| relay::StreamFlags::save(&relayed));

    // An ignored SIGCHLD (inherited from the caller) would make the kernel reap the task
    // without telling the sandbox's init; the init inherits this default.
    sys::default_sigchld();
    // SIGINT, SIGTERM, SIGHUP and every other signal whose default action would end airlock
    // (ALSO_ENDING: Ctrl-\'s SIGQUIT, a SIGUSR1) are read from a signalfd and forwarded to
    // the task, so that the run is still reported (bwrap mode: they end airlock once the
    // sandbox has, as they end bubblewrap); the sandbox's init inherits them blocked and
    // waits for them the same way. One the caller ignores (nohup) stays ignored: it never
    // arrives. bwrap mode leaves one the caller blocked blocked, as bubblewrap never unblocks
    // it. (Read in bwrap mode only: airlock run forwards them whatever the caller blocked.)
    let caller_blocked = match spec.bwrap {
        Some(_) => SigSet::thread_get_mask().unwrap_or_else(|_| SigSet::empty()),
        None => SigSet::empty(),
    };
    let mut forwarded = SigSet::empty();
    for &s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP]
        .iter()
        .chain(&ALSO_ENDING)
    {
        let blocked = caller_blocked.contains(s);
        if !sys::is_ignored(s) && !blocked {
            forwarded.add(s);
        }
    }
    // Ctrl-Z (airlock run): the task's session is its own, out of the terminal's reach, so
    // a SIGTSTP would stop the launcher alone, and the task would run on past --timeout
    // unwatched. It is read instead: the sandbox is stopped, then the launcher, and a
    // SIGCONT (fg, bg) continues both (Supervisor::wait). bwrap mode leaves them, as
    // bubblewrap does.
    if spec.bwrap.is_none() && !sys::is_ignored(Signal::SIGTSTP) {
        forwarded.add(Signal::SIGTSTP);
        forwarded.add(Signal::SIGCONT);
    }
    // A resized window (airlock run): the terminal sends SIGWINCH to its foreground process
    // group, which holds this launcher but not the task, in its own session: read, and
    // forwarded to every process of the sandbox, as Ctrl-C is. bwrap mode leaves it, as
    // bubblewrap does (its task, unless in a new session, is in that group already).
    if spec.bwrap.is_none() && !sys::is_ignored(Signal::SIGWINCH) {
        forwarded.add(Signal::SIGWINCH);
    }
    // The caller's own mask comes back with it: bwrap mode gives it to the task, as
    // bubblewrap's exec does.
    let mut caller_mask = SigSet::empty();
    named(
        sigprocmask(
            SigmaskHow::SIG_BLOCK,
            Some(&forwarded),
            Some(&mut caller_mask),
        ),
        || "sigprocmask(SIG_BLOCK)".into(),
    )
    .map_err(setup)?;
    let sigfd = named(
        SignalFd::with_flags(&forwarded, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK),
        || "signalfd(SIGINT|SIGTERM|SIGHUP|SIGQUIT...)".into(),
    )
    .map_err(setup)?;

    // 1. Every namespace at once: user, mount, pid, ipc, uts, cgroup, and network unless the
    //    caller shares it on purpose (bwrap mode: only those the command line unshares); the
    //    network one is usually made in parallel instead, and with a cgroup the cgroup one at
    //    step 12 (both below).
    // bwrap's --userns: the sandbox's first process joins that user namespace and creates the
    // others inside it (boundary::join_namespaces), so clone3 creates none here. --pidns
    // without it: this launcher joins the pid namespace, and its child is born there.
    let io = spec.bwrap.as_ref();
    let joins = io.is_some_and(|b| b.userns_fd.is_some());
    if let (false, Some(fd)) = (joins, io.and_then(|b| b.pidns_fd)) {
        sys::join_namespace(fd, libc::CLONE_NEWPID).map_err(|e| {
            // bubblewrap's words (only its --pidns joins).
            Failure::Setup(format!(
                "Setting pidns failed: {}",
                crate::sys::errno_text(e.errno)
            ))
        })?;
    }
    // Each --proc of a joined pid namespace (without a new one in it): the sandbox's user
    // namespace has no capability over it, so its procs are made here, by a helper born in it
    // with the caller's (root's) credentials, and the init moves them into place.
    let joined_procs = match io.and_then(|b| b.pidns_fd) {
        Some(_) if !joins && !spec.ns.pid => {
            let procs = spec
                .fs
                .iter()
                .filter(|op| matches!(op, crate::spec::FsOp::Proc(_)))
                .count();
            match procs {
                0 => Vec::new(),
                n => sys::procs_of_joined_pid_ns(n).map_err(|e| {
                    // The helper's own birth there failing (a pid namespace whose last
                    // process has ended): bubblewrap's words for its fork there.
                    let what = match e.call.starts_with("clone(") {
                        true => "Can't fork for --pidns",
                        false => "Can't mount proc on /newroot/proc",
                    };
                    Failure::Setup(format!("{what}: {}", crate::sys::errno_text(e.errno)))
                })?,
            }
        }
        _ => Vec::new(),
    };
    // An unprivileged caller's init maps its own ids (saves a round trip through the
    // launcher), unless bwrap's --userns-block-fd asks the maps to wait for the caller, or
    // --info-fd/--json-status-fd want the namespaces read from /proc/PID/ns while the init
    // still waits (it becomes non-dumpable at step 6 or 10, and the reading would race it).
    let launcher_maps = io.is_some_and(|b| {
        b.userns_block_fd.is_some() || b.info_fd.is_some() || b.json_status_fd.is_some()
    });
    let own_maps = (!caller_is_root && !joins && !launcher_maps).then(|| {
        let (euid, egid) = (nix::unistd::geteuid(), nix::unistd::getegid());
        id_maps(spec, euid.as_raw(), egid.as_raw())
    });
    let maps_by_init = own_maps.is_some();
    // An init that waits for the maps starts on another CPU than this launcher's, where it
    // gets the maps without waiting for this process to sleep, and gets back the caller's CPU
    // affinity with them (step 2). Launched on the same CPU, it started a median 97 us after
    // clone3 (this process ran on until the helper's vfork), and this process later woke there
    // too, taking the init's CPU on its way.
    let caller_cpus = if maps_by_init {
        None
    } else {
        nix::sched::sched_getaffinity(Pid::from_raw(0)).ok()
    };
    // The network namespace is the dearest to create (about 0.5 ms): the launcher makes it in
    // the sandbox's user namespace while the init builds the filesystem, and hands it over for
    // step 10. Not when it must exist at clone3 (bwrap's status descriptors report it), when
    // the init creates the namespaces itself (--userns), or when this launcher has joined
    // another pid namespace (--pidns): its helper would be born there, visible to it.
    let pidns_joined = io.is_some_and(|b| b.pidns_fd.is_some());
    let net_by_launcher = spec.ns.net && !joins && !launcher_maps && !pidns_joined;
    // With a cgroup, the init makes the cgroup namespace once it is in the run's cgroup (step
    // 12), so that the namespace is rooted there.
    let cgroup_ns_in_cgroup = spec.ns.cgroup && (v1_plan.is_some() || cgroup.is_some());
    let flags = match (joins, net_by_launcher) {
        (true, _) => 0,
        (false, false) => namespace_flags(spec),
        (false, true) => namespace_flags(spec) & !(libc::CLONE_NEWNET as u64),
    } & !(if cgroup_ns_in_cgroup {
        libc::CLONE_NEWCGROUP as u64
    } else {
        0
    });
    // bwrap's --userns-block-fd: the caller writes the maps (below) and may deny setgroups
    // in them, so a root caller's supplementary groups are dropped here, where the init
    // would drop them at step 6.
    if caller_is_root && io.is_some_and(|b| b.userns_block_fd.is_some()) {
        boundary::drop_groups()
            .map_err(|e| Failure::Setup(format!("step 1: setgroups([]): {e}")))?;
    }
    let into = cgroup
        .as_ref()
        .and_then(|c| c.v2_fd.as_ref())
        .map(|fd| fd.as_fd());
    // The init reads the launcher's liveness from this pidfd (steps 3 and 6), not from the
    // channel: the network namespace's helper shares this process's descriptors, so the
    // channel's end stays open while it runs, a launcher killed before the init's
    // PR_SET_PDEATHSIG unseen (a review found the task then started and ran on unsupervised).
    let launcher_pidfd = sys::pidfd_self().map_err(|e| Failure::Setup(format!("step 1: {e}")))?;
    // A new pid namespace inside a joined one: made from a first child born in the joined one.
    let forked = match pidns_joined && spec.ns.pid && !joins {
        true => sys::clone_process_from_joined(flags, into),
        false => sys::clone_process(flags, into),
    }
    .map_err(|e| {
        let hint = boundary::hint(&e)
            .map(|h| format!("; hint: {h}"))
            .unwrap_or_default();
        // A pid namespace whose last process has ended takes no new one: bubblewrap's words
        // for its fork there.
        if pidns_joined && !joins && e.errno == nix::errno::Errno::ENOMEM {
            return Failure::Setup(format!("Can't fork for --pidns: {}", crate::sys::errno_text(e.errno)));
        }
        if spec.bwrap.is_some() {
            let failed = crate::bwrap::new_namespace_failed(e.errno);
            return Failure::Setup(match e.errno {
                nix::errno::Errno::EPERM => format!("No permissions to create a new namespace, likely because the kernel does not allow non-privileged user namespaces{hint}"),
                // bubblewrap's own words name the limits.
                nix::errno::Errno::ENOSPC => failed,
                _ => format!("{failed}{hint}"),
            });
        }
        Failure::Setup(format!("step 1 create namespaces: {e}{hint}"))
    })?;
    let (pid, pidfd) = match forked {
        Forked::Child => {
            drop(parent_sock);
            boundary::init(Inherited {
                spec,
                sock: child_sock,
                launcher: launcher_pidfd,
                inputs,
                capture: capture.map(|((_, ow), (_, ew))| (ow, ew)),
                relayed: task_ends,
                caller_is_root,
                own_maps,
                cgroup_v1: v1_plan.is_some(),
                cgroup_ns_in_cgroup,
                net_by_launcher,
                rlimits: applied
                    .as_ref()
                    .map(|l| limits::rlimits(l, mechanism))
                    .unwrap_or_default(),
                caller_mask,
                backstop: spec.timeout.map(|t| start + t + TERM_GRACE),
                caller_group: None,
                caller_cpus,
                joined_procs: std::cell::RefCell::new(joined_procs),
            })
        }
        Forked::Parent { pid, pidfd } => {
            drop(launcher_pidfd);
            if let Some(cpus) = &caller_cpus {
                sys::start_elsewhere(pid, cpus);
            }
            (pid, pidfd)
        }
    };
    // The init's end of the channel stays open here too until the handovers below are sent,
    // so that no send meets that end as the kernel releases it. An init failing in setup
    // as the launcher sent lost its report so on Debian 11's 5.10 (CI read `sendmsg(<channel>,
    // 'n'): ENOTCONN` for step 5's failure; 3 runs in 1000 there, loaded): now its report
    // stays queued here, and the sends go to a live socket.
    let mut init_end = Some(child_sock);
    drop(inputs);
    drop(joined_procs);
    drop(task_ends);
    if let Some(feed) = &mut feed
        && let Err(e) = feed.start()
    {
        let _ = kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
        return Err(Failure::Setup(format!("step 1 start the stdin relay: {e}")));
    }
    // The init's user namespace, for the network namespace's helper (below). Opening it takes
    // ptrace-mode access to the init, which holds now: it is dumpable until step 10, which
    // waits for that namespace, and a root caller's init waits for the id maps at step 2.
    let userns = net_by_launcher.then(|| {
        let path = format!("/proc/{pid}/ns/user");
        named(
            nix::fcntl::open(
                path.as_str(),
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            ),
            || format!("open({path:?})"),
        )
    });
    // The write ends belong to the sandbox alone: dropping ours lets the pipes reach EOF.
    let (out_r, err_r) = match capture {
        Some(((or, ow), (er, ew))) => {
            drop((ow, ew));
            (Some(or), Some(er))
        }
        None => (None, None),
    };

    // bwrap's --info-fd and --json-status-fd: the sandbox's pid and namespaces, before the
    // --userns-block-fd wait (the caller reads the pid to act on it, then lets the maps go).
    // With --userns, this child joins and makes the namespaces, then forks the init that is in
    // them all: that init names itself on the channel first (unless setup failed, which the
    // channel then says, read below), and is the one announced.
    let announced =
        match joins && io.is_some_and(|b| b.info_fd.is_some() || b.json_status_fd.is_some()) {
            true => match joined_init(parent_sock.as_fd(), init_end.take()) {
                Ok(init) => init,
                // It named itself, but not in a way read here: the run ends before the task,
                // as bubblewrap's does when it cannot write the info document.
                Err(e) => {
                    let _ = kill(pid, Signal::SIGKILL);
                    let _ = waitpid(pid, None);
                    return Err(Failure::Setup(format!("step 1 read the init's pid: {e}")));
                }
            },
            false => Some(pid),
        };
    let status_fds = bwrap_status::Pending(
        spec.bwrap
            .as_ref()
            .zip(announced)
            .and_then(|(b, pid)| bwrap_status::announce(pid, b, spec)),
    );
    // 2. The id maps: the task is uid/gid 1000 inside; on the host it is the caller, or an
    //    unprivileged id when the caller is root.
    // bwrap's --userns-block-fd: the caller writes the maps itself (newuidmap, from the pid
    // --info-fd gave it), then writes to the descriptor; airlock waits for that and writes
    // none, as bubblewrap. SIGINT, SIGTERM and SIGHUP (blocked, for the signalfd) still end
    // airlock meanwhile, as they end bubblewrap: the init is killed and reaped first.
    let block = spec.bwrap.as_ref().and_then(|b| b.userns_block_fd);
    if let Some(fd) = block
        && let Ok(f) = sys::dup_fd(fd)
    {
        if let Some(sig) = readable_or_signal(f.as_fd(), &sigfd) {
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
            sys::die_by(sig);
        }
        let _ = nix::unistd::read(&f, &mut [0u8; 1]);
    }
    let prepared = if joins || maps_by_init || block.is_some() {
        Ok(())
    } else {
        write_id_maps(pid, spec, caller_is_root).map_err(|e| ("write id maps", e))
    };
    if let Err((step, e)) = prepared {
        let _ = kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
        let hint = boundary::hint(&e)
            .map(|h| format!("; hint: {h}"))
            .unwrap_or_default();
        if spec.bwrap.is_some() {
            return Err(Failure::Setup(format!(
                "setting up uid map: {}{hint}",
                e.errno.desc()
            )));
        }
        return Err(Failure::Setup(format!("step 2 {step}: {e}{hint}")));
    }
    // Sent to an init that already ended, this stays queued at its end (held open above), and
    // the wait below reads its report. A failed send leaves the init waiting for the maps
    // forever: it is ended, and the run fails with the send's error (unless the init reported
    // first) rather than hang.
    let mut handover_failed = None;
    if !maps_by_init && let Err(e) = channel::send(parent_sock.as_fd(), &Msg::MapsReady) {
        let _ = kill(pid, Signal::SIGKILL);
        handover_failed = Some(("the id maps", e));
    }
    // 1 (this side): the network namespace, made in the init's user namespace while the init
    // runs steps 2-9, and sent to it by the helper that made it. A failure goes to the init
    // from here, which stops at step 10 with it. A root caller's cgroup v1 is made by the
    // helper first, before it enters that namespace: made here once the helper is done, it
    // took the init's core (this process wakes where it slept) for about 0.18 ms.
    let mut v1_plan = v1_plan;
    let mut by_helper = None;
    if let Some(userns) = userns {
        let sock = parent_sock.as_fd();
        let (mut plan, limits) = (v1_plan.take(), spec.limits.as_ref());
        let had_plan = plan.is_some();
        // Written by the helper, then published by `made` (Release); a helper killed before
        // that leaves the slot unread, and leaked rather than dropped.
        let mut slot = std::mem::ManuallyDrop::new(None);
        let made = std::sync::atomic::AtomicBool::new(false);
        let mut first = || {
            if let (Some(plan), Some(l)) = (plan.take(), limits) {
                *slot = Some(make_cgroup(plan, l));
                made.store(true, std::sync::atomic::Ordering::Release);
            }
        };
        let sent = userns
            .and_then(|u| sys::new_net_namespace(u.as_fd(), sock, channel::NETNS, &mut first));
        // How the helper ended, should it have ended before it reported the cgroup.
        let helper_failed = sent.as_ref().err().map(ToString::to_string);
        if let Err(e) = sent.or_else(|e| channel::send(sock, &Msg::NetNs(Err(e)))) {
            // The init would wait for it forever: end it. If it had already failed, its own
            // report, read below, says why.
            let _ = kill(pid, Signal::SIGKILL);
            handover_failed = Some(("the network namespace", e));
        }
        if made.load(std::sync::atomic::Ordering::Acquire) {
            by_helper = std::mem::ManuallyDrop::into_inner(slot);
        } else if plan.is_some() {
            // The helper never started: made below, as without one.
            v1_plan = plan;
        } else if had_plan {
            // The helper took the plan and ended before it published what it made: what it
            // made of the cgroup (named after this process, empty) is removed here.
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
            for parent in &cgroup_parents {
                limits::remove_own(parent, launcher);
            }
            let why = helper_failed.unwrap_or_else(|| {
                "the network namespace's helper ended before it reported".into()
            });
            return Err(Failure::Setup(format!("step 1 create cgroup: {why}")));
        }
    }
    let cgroup_made = by_helper.or_else(|| match (v1_plan, &spec.limits) {
        (Some(plan), Some(l)) => Some(make_cgroup(plan, l)),
        _ => None,
    });
    if let Some(made) = cgroup_made {
        match made {
            Ok(mut cg) => {
                // The init refuses any other count than one tasks file per hierarchy.
                let tasks = cg.as_mut().map(|c| std::mem::take(&mut c.v1_tasks));
                let msg = Msg::JoinCgroup(tasks.unwrap_or_default());
                cgroup = cg;
                if let Err(e) = channel::send(parent_sock.as_fd(), &msg) {
                    let _ = kill(pid, Signal::SIGKILL);
                    handover_failed = Some(("the cgroup", e));
                }
            }
            Err(e) => {
                let _ = kill(pid, Signal::SIGKILL);
                let _ = waitpid(pid, None);
                return Err(e);
            }
        }
    }

    // Handed over: an init that ends now closes the channel, which the wait below sees.
    drop(init_end);

    // Cgroups left by launchers killed mid-run are removed now, while the sandbox finishes
    // its setup, rather than on the way to it.
    for parent in &cgroup_parents {
        limits::remove_stale(parent, live_siblings);
    }
    let mut sup = Supervisor::new(pid, spec);
    let deadline = spec.timeout.map(|t| start + t);
    let timed_out = sup.wait(
        &pidfd,
        &parent_sock,
        &sigfd,
        [out_r.as_ref(), err_r.as_ref()],
        &mut relays,
        deadline,
    );
    let init_status = waitpid(pid, None);
    // The sandbox is gone: Ctrl-Z stops airlock alone again, by its default action (a pending
    // one now), while it still delivers output to a reader that may have stopped with it
    // (`| less`); read from the signalfd, it would be dropped, and the job never stop.
    if forwarded.contains(Signal::SIGTSTP) {
        let job_control: SigSet = [Signal::SIGTSTP, Signal::SIGCONT].into_iter().collect();
        let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&job_control), None);
    }
    // Everything in the sandbox is gone now: the streams' flags are put back, and what is left
    // in the channel and pipes is read.
    if let Some(flags) = &stream_flags {
        flags.restore();
    }
    sup.drain_channel(&parent_sock);
    // Output the caller's full pipe did not take by the deadline, or before a signal, ends
    // the run as that would have ended a task still blocked writing it.
    let undelivered = relay::finish(&mut relays, deadline, &sigfd, sup.forwarded);
    if let Some(feed) = &feed {
        feed.finish();
    }
    let cut = relays.iter().any(relay::Relay::cut);
    let output_lost = relays.iter().any(relay::Relay::failed);
    for (fd, cap) in [(&out_r, &mut sup.stdout), (&err_r, &mut sup.stderr)] {
        if let Some(fd) = fd {
            while cap.read_from(fd.as_fd()) == Pipe::Open {}
        }
    }
    let duration = start.elapsed();

    if let Some(msg) = sup.setup_failed {
        return Err(Failure::Setup(msg));
    }
    let copies = match spec.inputs.len() {
        0 => String::new(),
        1 => ", which copies the input into scratch,".into(),
        n => format!(", which copies the {n} inputs into scratch,"),
    };
    if let (Some(sig), None, None) = (sup.cancelled, &sup.exec_failed, &sup.task_end) {
        return Err(Failure::Cancelled(
            sig,
            format!(
                "{sig} came before the task started: setup{copies} was ended, and the task never ran"
            ),
        ));
    }
    // A task's end, read after the deadline's look for a child, wins: an init whose task has
    // ended has no child either (the backstop's kill, a task ending at the deadline).
    if sup.setup_timed_out && sup.exec_failed.is_none() && sup.task_end.is_none() {
        return Err(Failure::SetupTimedOut(format!(
            "the timeout ({:?}) fired before the task started: setup{copies} took longer; \
             the whole sandbox was killed",
            spec.timeout.unwrap_or_default()
        )));
    }
    if let Some((what, e)) = handover_failed {
        return Err(Failure::Setup(format!("step 1 hand over {what}: {e}")));
    }
    if let Some((code, why)) = sup.exec_failed {
        // airlock run names the command here, as bash does (`NAME: command not found`);
        // bwrap.rs words bwrap mode's failure as execvp's.
        let msg = match spec.bwrap {
            Some(_) => why,
            // Not in a JSON report: its reader may be the request's author, a hostile tool
            // call whose hint would tell it which host files exist (as the caller sees them:
            // root's /root/.bashrc), as a red team found.
            None if code == crate::spec::exit::NOT_FOUND
                && spec.output == crate::spec::Output::Stream =>
            {
                let hint = not_found_hint(spec).map(|h| format!("; hint: {h}"));
                format!("{}: {why}{}", spec.argv[0], hint.unwrap_or_default())
            }
            None => format!("{}: {why}", spec.argv[0]),
        };
        return Err(Failure::Exec(code, msg));
    }
    let end = if timed_out || sup.backstop_fired || undelivered == Some(relay::Stop::Deadline) {
        End::TimedOut
    } else if let Some(relay::Stop::Signal(sig)) = undelivered {
        End::Signaled(sig as i32)
    } else if cut {
        // The kernel would have killed the writer with SIGXFSZ (see relay.rs).
        End::Signaled(libc::SIGXFSZ)
    } else if let Some(end) = sup.task_end {
        end
    } else if spec.lockdown.as_pid_1 {
        // The task was the sandbox's pid 1 itself.
        match init_status {
            Ok(WaitStatus::Exited(_, code)) => End::Exited(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => End::Signaled(sig as i32),
            other => {
                return Err(Failure::Setup(format!(
                    "the sandbox's init ended unexpectedly: {other:?}"
                )));
            }
        }
    } else {
        match init_status {
            Ok(WaitStatus::Signaled(_, sig, _)) => End::InitKilled(sig as i32),
            Ok(WaitStatus::Exited(_, code)) if code == crate::spec::exit::SETUP_FAILED => {
                return Err(Failure::Setup(
                    "the sandbox's init exited during setup without a report".into(),
                ));
            }
            Ok(WaitStatus::Exited(_, code)) => {
                return Err(Failure::Setup(format!(
                    "the sandbox's init ended (exit status {code}) without reporting the \
                     task's end"
                )));
            }
            other => {
                return Err(Failure::Setup(format!(
                    "the sandbox's init ended unexpectedly: {other:?}"
                )));
            }
        }
    };
    status_fds.finish(&end);
    if let (Some(flags), false) = (&stream_flags, matches!(end, End::Exited(_))) {
        flags.restore_terminal();
    }
    let scratch_full = sup.scratch_full
        || (sup.scratch.as_ref()).is_some_and(|(fd, _)| crate::report::full(fd.as_fd()));
    // Which limit ended the task: the timeout; the cgroup's own counters (OOM kill, refused
    // fork); RLIMIT_CPU (SIGXCPU, or SIGKILL at the hard limit, with the CPU time to show for
    // it); RLIMIT_FSIZE (SIGXFSZ, or a shell's 128+SIGXFSZ report of it); a full scratch.
    //    The CPU time known is the whole tree's, where the kernel counts each process's: a
    //    SIGKILL reads as the limit's only once the tree has used the hard limit's (a review
    //    saw an unrelated `kill -9` after the soft limit's worth blamed on --cpu-time).
    //    The kernel samples a process's time at its ticks, and the rusage read back falls
    //    short of the limit it acted on by up to about 20 ms (2982-3002 ms for a 3 s hard
    //    limit): 500 ms of slack, a quarter of the 2 s between the two limits.
    //    (The hard limit is worked out only for a SIGKILL end: it asks the caller's own.)
    let cpu_over = |hard: bool| {
        applied.is_some_and(|l| {
            let secs = match hard {
                true => crate::limits::cpu_hard_secs(&l),
                false => l.cpu_time.as_secs().max(1),
            };
            sup.task_cpu_ms + 500 >= secs.saturating_mul(1000)
        })
    };
    let (signal, code) = match end {
        End::Signaled(s) => (Some(s), None),
        End::Exited(c) => (None, Some(c)),
        _ => (None, None),
    };
    let by_signal = |sig: i32| signal == Some(sig) || code == Some(128 + sig);
    // The cgroup's counters are read for the JSON report, and for a streamed run only when
    // the task did not exit 0 (airlock then says on stderr which limit it ran into).
    let reported = matches!(spec.output, Output::Json { .. }) || end != End::Exited(0);
    let limit_hit = if end == End::TimedOut {
        Some("timeout")
    } else if let Some(hit) = cgroup
        .as_ref()
        .filter(|_| reported)
        .and_then(|c| c.limit_hit())
    {
        Some(hit)
    } else if (by_signal(libc::SIGKILL) && cpu_over(true))
        || (by_signal(libc::SIGXCPU) && !sup.sent_xcpu && cpu_over(false))
    {
        Some("cpu")
    } else if by_signal(libc::SIGXFSZ) {
        Some("file_size")
    } else {
        scratch_full.then_some("scratch_full")
    };
    // What bounded memory and pids, for the report: the run's cgroup v2 and those above it.
    let applied = match (&cgroup, &spec.output) {
        (Some(c), Output::Json { .. }) => applied.map(|a| c.bounded(a)),
        _ => applied,
    };
    drop(cgroup);
    let files = match (&spec.output, sup.scratch.take()) {
        (Output::Json { max }, Some((fd, handed))) => {
            let bound: Vec<&std::ffi::OsStr> = spec
                .binds()
                .filter_map(|(_, dest, _)| dest.strip_prefix(crate::spec::SCRATCH).ok())
                .filter(|rest| rest.components().count() == 1)
                .map(|rest| rest.as_os_str())
                .collect();
            report::collect_files(fd.as_fd(), &handed, &bound, *max)
        }
        _ => Files::default(),
    };
    Ok(Outcome {
        end,
        limit_hit,
        mechanism,
        limits: spec.limits,
        applied_limits: applied,
        duration,
        stdout: sup.stdout,
        stderr: sup.stderr,
        files,
        output_lost,
        killed_after_grace: sup.grace_ran_out,
    })
}

/// Inputs are opened here, with the caller's rights, and copied in by the init; a FIFO, a
/// device or a socket is refused without being opened (open_regular).
fn open_inputs(spec: &Spec) -> Result<Vec<Option<File>>, Failure> {
    // An input below a writable bind's source may be a link a task of an earlier run left
    // there, as a bind source may (check_binds_and_inputs): it is refused, and the file is
    // opened on its route with no link followed.
    let writable = crate::boundary::writable_sources(spec);
    spec.inputs
        .iter()
        .map(|input| match &input.source {
            InputSource::Bytes(_) => Ok(None),
            InputSource::HostFile(path) => {
                let not_regular = || {
                    Failure::Usage(format!(
                        "input {}: {path:?} is not a regular file",
                        input.name
                    ))
                };
                // A trailing / names a directory, which the route below, walked by
                // components, would drop: the kernel's answer is asked for (ENOTDIR for a
                // file, as `cat f/` and a bind source get; a directory is not regular).
                if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
                    let e = match nix::sys::stat::stat(path.as_path()) {
                        Ok(_) => return Err(not_regular()),
                        Err(e) => crate::sys::errno_text(e),
                    };
                    return Err(Failure::Usage(format!(
                        "input {}: cannot open {path:?}: stat: {e}",
                        input.name
                    )));
                }
                let flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
                // A route that cannot be walked fails the open: opening the path as given
                // instead would follow a link a running task swaps in meanwhile.
                let route = std::path::absolute(path)
                    .map_err(|e| std::io::Error::other(e.to_string()))
                    .and_then(|p| {
                        crate::boundary::bind_source_route(&p, &writable)
                            .map_err(|e| std::io::Error::other(e.to_string()))
                    });
                match route {
                    Ok(Err(why)) => {
                        return Err(Failure::Usage(format!("input {}: {why}", input.name)));
                    }
                    Ok(Ok(route)) => open_regular(&route, flags).and_then(|f| {
                        f.map(|f| same_as_the_kernel_finds(path, f).map(Some))
                            .transpose()
                            .map(Option::flatten)
                    }),
                    Err(e) => Err(e),
                }
                .map_err(|e| {
                    Failure::Usage(format!("input {}: cannot open {path:?}: {e}", input.name))
                })?
                .map(Some)
                .ok_or_else(not_regular)
            }
        })
        .collect()
}

/// Why a path's links' text and the kernel's resolution can part.
const ELSEWHERE: &str = "a link changed meanwhile, or a /proc link names a file that was moved \
                         or deleted, or one of another mount namespace or root";

/// `f`, the file a path's route (each link read and followed by airlock) led to, if it is
/// the one the kernel finds at `path` now (an O_PATH open: no FIFO's or device's open runs).
/// A link's text is not always where it leads: `/proc/self/fd/3`'s reads `FILE (deleted)`
/// once FILE is removed, a name anyone who may write its directory can create, as a link
/// to a file they could not read; and the kernel's own rules for following links
/// (`fs.protected_symlinks`) are the kernel's to apply. Found by a race review: a root
/// caller's `--input x=/proc/self/fd/3` copied in another user's planted file.
fn same_as_the_kernel_finds(path: &std::path::Path, f: File) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    let flags = nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC;
    let kernel = nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty())?;
    let found = nix::sys::stat::fstat(&kernel)?;
    let m = f.metadata()?;
    if (found.st_dev, found.st_ino) != (m.dev(), m.ino()) {
        return Err(std::io::Error::other(format!(
            "the file its path leads to by its links' text is not the one the kernel opens \
             there ({ELSEWHERE})"
        )));
    }
    Ok(f)
}

/// The regular file at `route` (a path that must hold no link), opened for reading with
/// `flags`; None if it is anything else. It is looked at through an O_PATH descriptor first,
/// which runs no open of a FIFO, device or socket: a FIFO's open let a host writer blocked in
/// it hand its data to airlock, which refused the input and lost it, and a device's open acts
/// (a tape rewinds, a serial line raises DTR, a watchdog starts counting). The file then opened
/// must be the one looked at.
fn open_regular(route: &std::path::Path, flags: i32) -> std::io::Result<Option<File>> {
    let io = |e: SysError| std::io::Error::other(e.to_string());
    let id = |st: &nix::sys::stat::FileStat| (st.st_dev, st.st_ino);
    let at = sys::open_without_links(route, libc::O_PATH | libc::O_CLOEXEC).map_err(io)?;
    let seen = nix::sys::stat::fstat(&at)?;
    if seen.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Ok(None);
    }
    let f = sys::open_without_links(route, flags).map_err(io)?;
    let opened = nix::sys::stat::fstat(&f)?;
    if id(&opened) != id(&seen) {
        return Err(std::io::Error::other("it was replaced while it was opened"));
    }
    Ok(Some(File::from(f)))
}

/// airlock run: the bind sources by their routes (boundary::bind_source_route), resolved
/// here, in the caller: a copy of `spec` with each source that holds a link replaced by the
/// path it leads to, or None where none does. A source reached through a link that a task may
/// have left in a writable bind's source (an earlier run's), out of it, is refused (exit 2);
/// step 5 copies the route with no link followed (a link there now fails it). Resolved by
/// the init instead, `/proc/self/fd/3` named the init's descriptor 3 (the host's `/`), not
/// the caller's file.
fn routed_binds(spec: &Spec) -> Result<Option<Spec>, Failure> {
    let writable = crate::boundary::writable_sources(spec);
    let mut routed: Option<Spec> = None;
    for (i, op) in spec.fs.iter().enumerate() {
        let FsOp::Bind { src, access, .. } = op else {
            continue;
        };
        let flag = match access {
            Access::ReadOnly => "--ro-bind",
            _ => "--bind",
        };
        let refused = |why: String| Failure::Usage(format!("{flag} {}: {why}", src.display()));
        std::fs::metadata(src).map_err(|e| {
            let errno = crate::sys::errno_of(&e);
            refused(format!("stat({src:?}): {errno}"))
        })?;
        let route = match crate::boundary::bind_source_route(src, &writable) {
            Ok(Ok(route)) => route,
            Ok(Err(why)) => return Err(refused(why)),
            Err(e) => return Err(refused(e.to_string())),
        };
        // Where the links' text leads must be what the kernel finds (see
        // same_as_the_kernel_finds: `/proc/self/fd/3` of a deleted directory).
        let id = |m: &std::fs::Metadata| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        };
        let kernel = std::fs::metadata(src)
            .map_err(|e| refused(format!("stat({src:?}): {}", crate::sys::errno_of(&e))))?;
        let ended = std::fs::symlink_metadata(&route)
            .map_err(|e| refused(format!("lstat({route:?}): {}", crate::sys::errno_of(&e))))?;
        if id(&kernel) != id(&ended) {
            return Err(refused(format!(
                "the path its links' text leads to, {route:?}, is not what the kernel finds \
                 at {src:?} ({ELSEWHERE})"
            )));
        }
        if route != *src {
            let copy = routed.get_or_insert_with(|| spec.clone());
            if let FsOp::Bind { src, .. } = &mut copy.fs[i] {
                *src = route;
            }
        }
    }
    Ok(routed)
}

/// airlock run: the caller's own mistakes are bad usage (exit 2), said before anything is
/// built, rather than a failed isolation step (125) once the init meets them: a mount point a
/// bind cannot have, inputs that cannot fit in scratch.
fn check_binds_and_inputs(spec: &Spec, inputs: &[Option<File>]) -> Result<(), Failure> {
    let size = |(input, file): (&Input, &Option<File>)| match (&input.source, file) {
        (InputSource::Bytes(b), _) => b.len() as u64,
        (_, Some(f)) => f.metadata().map_or(0, |m| m.len()),
        _ => 0,
    };
    check_mount_points(spec)?;
    let sizes: Vec<u64> = spec.inputs.iter().zip(inputs).map(size).collect();
    let total: u64 = sizes.iter().sum();
    let Some(l) = spec.limits else {
        return Ok(());
    };
    if total > l.scratch_size {
        return Err(Failure::Usage(format!(
            "the inputs hold {total} bytes, more than scratch holds (--scratch-size {})",
            l.scratch_size
        )));
    }
    // The scratch tmpfs gives each file whole pages and one inode (scratch itself takes one,
    // and so does each mount point a bind makes in it), so inputs that fit by bytes can still
    // fill it: 300 one-byte inputs take 300 of --scratch-size 1M's 256 pages, 5000 empty ones
    // more than its 4096 inodes.
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map_or(4096, |p| p as u64);
    let pages: u64 = sizes.iter().map(|s| s.div_ceil(page)).sum();
    let room = l.scratch_size.div_ceil(page);
    if pages > room {
        return Err(Failure::Usage(format!(
            "the inputs take {pages} pages of {page} bytes (each file whole pages), more than \
             scratch holds (--scratch-size {}: {room} pages)",
            l.scratch_size
        )));
    }
    let mut in_scratch = std::collections::BTreeSet::new();
    for (_, dest, _) in spec.binds() {
        if let Ok(rest) = dest.strip_prefix(crate::spec::SCRATCH) {
            in_scratch.extend(rest.ancestors().filter(|a| !a.as_os_str().is_empty()));
        }
    }
    let files = spec.inputs.len() as u64 + in_scratch.len() as u64 + 1;
    let inodes = crate::spec::tmpfs_inodes(l.scratch_size);
    if files > inodes {
        return Err(Failure::Usage(format!(
            "{} inputs are more files than scratch holds (--scratch-size {}: {inodes} \
             inodes, one for scratch itself and one for each bind's mount point in it)",
            spec.inputs.len(),
            l.scratch_size
        )));
    }
    Ok(())
}

/// The file or link step 7 makes in /dev or /etc (a device node, a link, a generated file, a
/// host /etc entry that is a file, followed as its bind is) that `dest` is or lies below.
/// Only a destination in /dev or /etc costs anything; only a host entry above it is looked at.
fn sandbox_file_above(dest: &std::path::Path, shared_net: bool) -> Option<std::path::PathBuf> {
    use crate::boundary::{DEV_LINKS, DEVICES, GENERATED_ETC, etc_from_host};
    use std::path::Path;
    if let Ok(rest) = dest.strip_prefix("/dev") {
        let name = rest.components().next()?.as_os_str();
        let mut made = DEVICES.iter().chain(DEV_LINKS.iter().map(|(link, _)| link));
        return made
            .find(|n| name == **n)
            .map(|n| Path::new("/dev").join(n));
    }
    let etc = Path::new("/etc");
    if !dest.starts_with(etc) {
        return None;
    }
    let is_file = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_dir());
    GENERATED_ETC
        .iter()
        .map(|n| etc.join(n))
        .find(|f| dest.starts_with(f))
        .or_else(|| {
            etc_from_host(shared_net)
                .map(|n| etc.join(n))
                .find(|f| dest.starts_with(f) && is_file(f))
        })
}

/// A bind inside another host tree (a system path, an /etc entry step 7 binds from the host, or
/// another bind) is mounted on a mount point
/// in that tree, which the boundary makes when it is missing: inside a read-only tree it
/// cannot (step 7 failed, 125: `--ro-bind DIR:/usr/new`), and inside a writable bind it would
/// be made on the host and left there after the run. So the mount point must already exist in
/// the host tree it lands in; a system path that is a symlink on the host (`/bin -> usr/bin`)
/// is one in the sandbox too, and a directory cannot be bound over it.
fn check_mount_points(spec: &Spec) -> Result<(), Failure> {
    use std::path::{Path, PathBuf};
    let below = |p: &Path| spec.binds().any(|(_, d, _)| d != p && d.starts_with(p));
    // The /etc entries bound read-only from the host (step 7) are host trees too.
    // (Named first, so that a run with no bind in /etc allocates nothing here.)
    let etc: Vec<PathBuf> = crate::boundary::etc_from_host(!spec.ns.net)
        .filter(|n| {
            spec.binds()
                .filter_map(|(_, d, _)| d.strip_prefix("/etc").ok())
                .any(|r| r != Path::new(n) && r.starts_with(n))
        })
        .map(|n| Path::new("/etc").join(n))
        .collect();
    // Only the system paths a bind lands in are looked at: a run without one makes no call.
    let system = crate::spec::SYSTEM_PATHS
        .iter()
        .map(Path::new)
        .chain(etc.iter().map(PathBuf::as_path))
        .filter(|p| below(p) && p.symlink_metadata().is_ok())
        .map(|p| (p, p, true));
    let trees: Vec<(&Path, &Path, bool)> = system
        .chain(
            spec.binds()
                .map(|(src, dest, a)| (src, dest, a == Access::ReadOnly)),
        )
        .collect();
    // The tree a bind lands in is the nearest of them above its destination (the last one
    // given at a path wins): found by looking up each directory above it, where comparing
    // every pair of binds took 5000 binds 3.9 s.
    let tree_at: std::collections::HashMap<&Path, (&Path, &Path, bool)> =
        trees.iter().map(|t| (t.1, *t)).collect();
    for (src, dest, _) in spec.binds() {
        let flag = |d: &Path| format!("bind destination {}", d.display());
        // Nothing can be made below a file or link of /dev and /etc, and a directory does not
        // go over one: step 7's mkdir or mount would fail (125) on the caller's mistake.
        if let Some(file) = sandbox_file_above(dest, !spec.ns.net)
            && (dest != file.as_path() || src.is_dir())
        {
            let why = match dest == file.as_path() {
                true => "a directory cannot be bound over it",
                false => "nothing can be made below it",
            };
            return Err(Failure::Usage(format!(
                "{}: {} is a file or link in the sandbox ({why}): bind elsewhere",
                flag(dest),
                file.display()
            )));
        }
        if let Some(p) = crate::spec::SYSTEM_PATHS
            .iter()
            .map(Path::new)
            .find(|p| *p == dest)
            && let Ok(target) = p.read_link()
            && src.is_dir()
        {
            return Err(Failure::Usage(format!(
                "{} is a symlink in the sandbox (to {}, as on the host): bind the directory at \
                 its target",
                flag(dest),
                target.display()
            )));
        }
        // Nor does a file go over a directory (its mount point's mknod: EISDIR, 125): the
        // sandbox's /dev/shm and /dev/pts, a system path or an /etc entry from the host, or a
        // directory of the host tree the bind lands in (below).
        let is_dir = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_dir());
        let file_over_dir = |at: &Path| {
            Err(Failure::Usage(format!(
                "{}: {} is a directory in the sandbox, and a file cannot be bound over a \
                 directory: bind it at a path inside",
                flag(dest),
                at.display()
            )))
        };
        let host_entry = crate::spec::SYSTEM_PATHS
            .iter()
            .any(|p| dest == Path::new(p))
            || (dest.starts_with("/etc")
                && crate::boundary::etc_from_host(!spec.ns.net)
                    .any(|n| dest == Path::new("/etc").join(n)));
        // Step 7 also makes directories of its own: /etc, /var (for the /var/tmp link), and
        // each directory in /etc above an entry it binds from the host (/etc/ssl for
        // ssl/certs), made only when the host has that entry.
        let made_in_etc = dest.starts_with("/etc")
            && crate::boundary::etc_from_host(!spec.ns.net)
                .map(|n| Path::new("/etc").join(n))
                .any(|e| e != dest && e.starts_with(dest) && e.exists());
        let sandbox_dir = ["/dev/shm", "/dev/pts", "/etc", "/var"]
            .iter()
            .any(|d| dest == Path::new(d))
            || made_in_etc
            || (host_entry && is_dir(dest));
        if sandbox_dir && !src.is_dir() {
            return file_over_dir(dest);
        }
        let Some((tree_src, tree_dest, read_only)) = dest
            .ancestors()
            .skip(1)
            .find_map(|above| tree_at.get(above).copied())
        else {
            continue;
        };
        let on_host: PathBuf = tree_src.join(dest.strip_prefix(tree_dest).unwrap_or(dest));
        match std::fs::metadata(&on_host).map(|m| m.is_dir()) {
            Ok(true) if !src.is_dir() => return file_over_dir(dest),
            Ok(false) if src.is_dir() => {
                return Err(Failure::Usage(format!(
                    "{}: the host's {} is not a directory, and a directory cannot be bound \
                     over it: bind elsewhere",
                    flag(dest),
                    on_host.display()
                )));
            }
            _ => {}
        }
        // Only a mount point known to be missing: one the caller may not look at fails in the
        // boundary, with the caller's rights, as it would have.
        let missing = matches!(on_host.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR));
        if missing {
            let why = match read_only {
                true => "a read-only tree, where it cannot be made",
                false => "a writable bind, where it would be made on the host and left there",
            };
            return Err(Failure::Usage(format!(
                "{}: its mount point {} does not exist on the host: it is inside {} (the \
                 host's {}), {why}; make it on the host first, or bind elsewhere",
                flag(dest),
                on_host.display(),
                tree_dest.display(),
                tree_src.display()
            )));
        }
    }
    Ok(())
}

/// The uid/gid map lines for a spec and a caller of `euid`/`egid`: the task's id inside maps
/// to its host id (Spec::task_host_ids: the caller's own id for an unprivileged caller, an
/// unprivileged host id for a root caller in airlock run), or, in bwrap mode for a root
/// caller that did not ask for a user namespace, every id to itself.
pub fn id_maps(spec: &Spec, euid: u32, egid: u32) -> (String, String) {
    if euid == 0 && spec.identity_map {
        let all = "0 0 4294967295\n".to_string();
        return (all.clone(), all);
    }
    let (uid, gid) = spec.task_host_ids(euid, egid);
    (
        format!("{} {uid} 1\n", spec.uid),
        format!("{} {gid} 1\n", spec.gid),
    )
}

/// Every id a namespace's map (`/proc/self/uid_map`) holds, mapped to itself: its lines'
/// first and third fields. None where it cannot be read or holds nothing.
fn identity_of(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (inside, count) = (f.next()?, f.nth(1)?);
            Some(format!("{inside} {inside} {count}\n"))
        })
        .collect();
    (!lines.is_empty()).then(|| lines.concat())
}

/// Wait until `fd` is readable (or closed): None; or until SIGINT, SIGTERM or SIGHUP arrives
/// on `sigfd`: that signal.
fn readable_or_signal(fd: std::os::fd::BorrowedFd, sigfd: &SignalFd) -> Option<Signal> {
    loop {
        let mut fds = [
            PollFd::new(fd, PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
            Ok(_) => {}
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty())
            && let Ok(Some(info)) = sigfd.read_signal()
            && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
        {
            return Some(sig);
        }
        if fds[0].revents().is_some_and(|r| !r.is_empty()) {
            return None;
        }
    }
}

fn write_id_maps(pid: Pid, spec: &Spec, caller_is_root: bool) -> Result<(), SysError> {
    let (uid_map, gid_map) = id_maps(
        spec,
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let proc_dir = format!("/proc/{pid}");
    let write = |uid_map: &str, gid_map: &str| {
        boundary::write_maps(None, &proc_dir, uid_map, gid_map, !caller_is_root)
    };
    match write(&uid_map, &gid_map) {
        // Every id to itself is every id the caller's own namespace maps: the root of
        // `unshare -r` or of a container made without privilege has fewer than all, and the
        // kernel refuses the whole range before writing any (a review: every such bwrap line
        // failed, which bubblewrap runs). Asked only then: no read on the host's own launches.
        Err(e) if e.errno == nix::errno::Errno::EPERM && caller_is_root && spec.identity_map => {
            match (
                identity_of("/proc/self/uid_map"),
                identity_of("/proc/self/gid_map"),
            ) {
                (Some(uid_map), Some(gid_map)) => write(&uid_map, &gid_map),
                _ => Err(e),
            }
        }
        other => other,
    }
}

struct Supervisor {
    pid: Pid,
    stdout: Capture,
    stderr: Capture,
    scratch: Option<(OwnedFd, channel::Handed)>,
    setup_failed: Option<String>,
    exec_failed: Option<(i32, String)>,
    task_end: Option<End>,
    task_cpu_ms: u64,
    /// Receive buffer for the init's messages (see `channel::launcher_capacity`).
    msg_capacity: usize,
    /// bwrap mode: SIGINT, SIGTERM and SIGHUP end airlock by the signal rather than being
    /// forwarded to the task, as they end bubblewrap.
    dies_by_signals: bool,
    /// bwrap mode with --die-with-parent: and the sandbox with it, at once, as bubblewrap's.
    /// Without it, bubblewrap's task outlives bubblewrap and handles what its process group
    /// got (a build step cleaning up on Ctrl-C or a CI cancel): airlock waits for the
    /// sandbox to end, at most TERM_GRACE, before it ends it and dies by the signal.
    dies_at_once: bool,
    /// The signal airlock dies by once the sandbox has ended (bwrap mode).
    dying: Option<Signal>,
    /// The first signal forwarded to the sandbox (airlock run): output still to deliver
    /// after it is not waited for.
    forwarded: Option<Signal>,
    /// When the last SIGINT was forwarded (airlock run): one within INTERRUPT_AGAIN of it
    /// starts TERM_GRACE.
    interrupted: Option<Instant>,
    /// What started TERM_GRACE (airlock run), said on stderr should the grace run out.
    grace_for: Option<String>,
    /// What was said when it ran out.
    grace_ran_out: Option<String>,
    /// A SIGXCPU was forwarded (airlock run: `kill -XCPU`, or airlock's own RLIMIT_CPU): a
    /// task it ends did not run into its CPU time limit.
    sent_xcpu: bool,
    /// The deadline fired while the init had not yet started the task.
    setup_timed_out: bool,
    /// The init ended setup on a signal asking the run to end, before it started the task
    /// (its own word, Msg::Cancelled: the only one that cannot be wrong, where "the init has
    /// no child" is true of a task that has ended too).
    cancelled: Option<Signal>,
    /// A SIGTSTP stopped the sandbox (airlock run): the next SIGCONT continues it.
    stopped: bool,
    /// The init ended the sandbox at its backstop, past the deadline (this launcher was
    /// stopped): the run timed out.
    backstop_fired: bool,
    /// The init found a streamed run's scratch full when the task ended.
    scratch_full: bool,
}

impl Supervisor {
    fn new(pid: Pid, spec: &Spec) -> Supervisor {
        let max = match spec.output {
            Output::Json { max } => max,
            Output::Stream => 0,
        };
        Supervisor {
            pid,
            stdout: Capture::new(max),
            stderr: Capture::new(max),
            scratch: None,
            setup_failed: None,
            exec_failed: None,
            task_end: None,
            task_cpu_ms: 0,
            msg_capacity: channel::launcher_capacity(spec.inputs.iter().map(|i| i.name.as_str())),
            dies_by_signals: spec.bwrap.is_some(),
            dies_at_once: spec.bwrap.as_ref().is_some_and(|b| b.die_with_parent),
            dying: None,
            forwarded: None,
            interrupted: None,
            grace_for: None,
            grace_ran_out: None,
            sent_xcpu: false,
            setup_timed_out: false,
            cancelled: None,
            stopped: false,
            backstop_fired: false,
            scratch_full: false,
        }
    }

    /// Wait for the init to exit, forwarding signals, reading captured output and enforcing
    /// the deadline. Returns whether the deadline fired.
    fn wait(
        &mut self,
        pidfd: &OwnedFd,
        sock: &OwnedFd,
        sigfd: &SignalFd,
        pipes: [Option<&OwnedFd>; 2],
        relays: &mut [relay::Relay],
        deadline: Option<Instant>,
    ) -> bool {
        let mut timed_out = false;
        let mut deadline_passed = false;
        let mut kill_at: Option<Instant> = None;
        let mut open = [pipes[0].is_some(), pipes[1].is_some()];
        let mut sock_open = true;
        let mut cut = false;
        loop {
            let now = Instant::now();
            let next = [deadline.filter(|_| !deadline_passed), kill_at]
                .into_iter()
                .flatten()
                .min();
            if let Some(t) = next
                && t <= now
            {
                // A task whose end the init has reported was not timed out, nor killed after a
                // grace: what remains is the kernel's teardown of what it left (a red team: 20
                // processes of 60,000 mappings each took 1.3 s to end, and a task that exited
                // 0 before its deadline was reported killed by it). The kill still comes: an
                // init outside a pid namespace (bwrap mode) may have been stopped by the task
                // after its report (the sign-off: the launcher then waited for a SIGCONT).
                let ended = self.task_end.is_some();
                if deadline.is_some_and(|d| d <= now) {
                    if !deadline_passed {
                        deadline_passed = true;
                        timed_out = !ended;
                        // The init starts the task as its only child (step 13): without one
                        // it is still setting up, unless the task has ended, which the report
                        // of its end, if one comes, says (run). Asked before the kill, on this
                        // path alone.
                        self.setup_timed_out = !ended && !sys::has_children(self.pid);
                    }
                } else if let Some(what) = self.grace_for.take()
                    && !ended
                {
                    let said = format!(
                        "the task had not ended {} s after {what}; the whole sandbox was killed",
                        TERM_GRACE.as_secs()
                    );
                    relay::say_if_room(&format!("airlock: {said}\n"));
                    self.grace_ran_out = Some(said);
                }
                let _ = kill(self.pid, Signal::SIGKILL);
                kill_at = None;
                continue;
            }
            let timeout = match next {
                Some(t) => {
                    PollTimeout::try_from((t - now).as_millis().clamp(1, i32::MAX as u128) as i32)
                        .unwrap_or(PollTimeout::MAX)
                }
                None => PollTimeout::NONE,
            };
            let mut fds = vec![
                PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
                PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
            ];
            let sock_idx = if sock_open {
                fds.push(PollFd::new(sock.as_fd(), PollFlags::POLLIN));
                Some(fds.len() - 1)
            } else {
                None
            };
            let mut pipe_idx = [None, None];
            for i in 0..2 {
                if let (true, Some(p)) = (open[i], pipes[i]) {
                    fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                    pipe_idx[i] = Some(fds.len() - 1);
                }
            }
            let relay_idx: Vec<(usize, usize)> = relays
                .iter()
                .enumerate()
                .filter_map(|(r, relay)| {
                    let p = relay.poll_fd()?;
                    fds.push(p);
                    Some((r, fds.len() - 1))
                })
                .collect();
            if poll(&mut fds, timeout).is_err() {
                continue;
            }
            let ready = |i: usize| fds[i].revents().is_some_and(|r| !r.is_empty());
            let init_exited = ready(0);
            let sig_ready = ready(1);
            let sock_ready = sock_idx.is_some_and(ready);
            let pipe_ready = [
                pipe_idx[0].is_some_and(ready),
                pipe_idx[1].is_some_and(ready),
            ];
            let relays_ready: Vec<usize> = relay_idx
                .into_iter()
                .filter(|&(_, i)| ready(i))
                .map(|(r, _)| r)
                .collect();
            drop(fds);
            for r in relays_ready {
                relays[r].pump();
                // Output past --file-size: the writer would have died of SIGXFSZ, and what it
                // wrote since is lost; the sandbox ends now (relay.rs).
                if relays[r].cut() && !cut {
                    cut = true;
                    let _ = kill(self.pid, Signal::SIGKILL);
                }
            }
            if sig_ready {
                while let Ok(Some(info)) = sigfd.read_signal() {
                    let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
                        continue;
                    };
                    // Ctrl-Z: the init stops every process of the sandbox, then this
                    // launcher stops, as the caller's job; continued, it continues them. The
                    // deadline keeps counting: a run continued past it ends as timed out.
                    if sig == Signal::SIGTSTP {
                        let _ = kill(self.pid, Signal::SIGTSTP);
                        self.stopped = true;
                        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
                        continue;
                    }
                    if sig == Signal::SIGCONT {
                        if std::mem::take(&mut self.stopped) {
                            let _ = kill(self.pid, Signal::SIGCONT);
                        }
                        continue;
                    }
                    if self.dies_at_once {
                        let _ = kill(self.pid, Signal::SIGKILL);
                        let _ = waitpid(self.pid, None);
                        sys::die_by(sig);
                    }
                    if self.dies_by_signals {
                        // Not forwarded: bubblewrap forwards nothing; the task gets what its
                        // process group got, once.
                        self.dying.get_or_insert(sig);
                        kill_at.get_or_insert(Instant::now() + TERM_GRACE);
                        continue;
                    }
                    let _ = kill(self.pid, sig);
                    self.sent_xcpu |= sig == Signal::SIGXCPU;
                    // SIGUSR1 and the like (ALSO_ENDING but SIGQUIT) are the task's to handle.
                    if !asks_to_end(sig) {
                        continue;
                    }
                    self.forwarded.get_or_insert(sig);
                    // A first SIGINT is the task's to handle (a tool stops its work and
                    // reports); a second soon after, Ctrl-C pressed again, ends the sandbox as
                    // SIGTERM does.
                    let again = sig == Signal::SIGINT
                        && (self.interrupted.replace(Instant::now()))
                            .is_some_and(|t| t.elapsed() <= INTERRUPT_AGAIN);
                    if (sig != Signal::SIGINT || again) && kill_at.is_none() {
                        kill_at = Some(Instant::now() + TERM_GRACE);
                        self.grace_for = Some(match again {
                            true => "a second SIGINT".into(),
                            false => format!("{sig}"),
                        });
                    }
                }
            }
            if sock_ready {
                sock_open = self.drain_channel(sock);
            }
            for i in 0..2 {
                if pipe_ready[i] {
                    let cap = if i == 0 {
                        &mut self.stdout
                    } else {
                        &mut self.stderr
                    };
                    open[i] = cap.read_from(pipes[i].unwrap().as_fd()) != Pipe::Closed;
                }
            }
            if init_exited {
                if let Some(sig) = self.dying {
                    let _ = waitpid(self.pid, None);
                    sys::die_by(sig);
                }
                return timed_out;
            }
        }
    }

    /// Read every queued message; returns false once the channel is closed.
    fn drain_channel(&mut self, sock: &OwnedFd) -> bool {
        loop {
            match channel::recv(sock.as_fd(), true, self.msg_capacity) {
                Ok(Some(msg)) => self.take(msg),
                Ok(None) => {
                    // Distinguish "nothing queued" from "closed": a closed SEQPACKET peer
                    // reads as 0 bytes, which recv reports as None too; poll tells them apart.
                    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
                    let _ = poll(&mut fds, PollTimeout::ZERO);
                    return !fds[0]
                        .revents()
                        .is_some_and(|r| r.contains(PollFlags::POLLHUP));
                }
                Err(_) => return false,
            }
        }
    }

    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Scratch(fd, handed) => self.scratch = Some((fd, handed)),
            Msg::SetupFailed(m) => {
                self.setup_failed.get_or_insert(m);
            }
            Msg::ExecFailed(code, m) => {
                self.exec_failed.get_or_insert((code, m));
            }
            Msg::Cancelled(sig) => self.cancelled = Signal::try_from(sig).ok(),
            Msg::TaskEnded {
                signaled,
                value,
                cpu_ms,
                scratch_full,
                timed_out,
            } => {
                self.task_cpu_ms = cpu_ms;
                self.scratch_full = scratch_full;
                self.backstop_fired = timed_out;
                self.task_end = Some(if signaled {
                    End::Signaled(value)
                } else {
                    End::Exited(value)
                });
            }
            // Messages of the launcher's own; dropped if the sandbox sends them.
            Msg::MapsReady | Msg::JoinCgroup(_) | Msg::NetNs(_) => {}
        }
    }
}

impl End {
    /// airlock's exit code for this end: the task's code, 128+N for signal N, 124 for the
    /// timeout.
    pub fn exit_code(&self) -> i32 {
        match *self {
            End::Exited(c) => c,
            End::Signaled(s) | End::InitKilled(s) => 128 + s,
            End::TimedOut => crate::spec::exit::TIMEOUT,
        }
    }
}

impl Outcome {
    pub fn exit_code(&self) -> i32 {
        self.end.exit_code()
    }
}

/// The pid of bwrap's --userns init, once it is in the namespaces it made: from its first
/// message, a pidfd, if that is one (not consumed otherwise: Ok(None), a setup failure the
/// channel says). A pidfd message that cannot be read is an error, not an init unnamed.
fn joined_init(
    sock: std::os::fd::BorrowedFd,
    init_end: Option<OwnedFd>,
) -> Result<Option<Pid>, SysError> {
    use nix::sys::socket::{MsgFlags, recv};
    // Closed first: the read below waits for the init's message or for its end to close.
    drop(init_end);
    let mut tag = [0u8; 1];
    match recv(
        std::os::fd::AsRawFd::as_raw_fd(&sock),
        &mut tag,
        MsgFlags::MSG_PEEK,
    ) {
        Ok(1) if tag[0] == channel::JOINED => {}
        _ => return Ok(None),
    }
    let pidfd = named(sys::recv_fd(sock), || {
        "recvmsg(<channel>, <the init's pidfd>)".into()
    })?;
    sys::pid_of_pidfd(pidfd.as_fd()).map(Some)
}

/// bwrap's --info-fd and --json-status-fd: the sandbox's pid and namespaces once it exists,
/// and (json-status) its exit code at the end.
mod bwrap_status {
    use std::io::Write;
    use std::os::fd::OwnedFd;

    use nix::unistd::Pid;

    use super::End;
    use crate::spec::{BwrapIo, Spec};

    /// The child's pid, then the inode of each namespace made, in bubblewrap's order.
    fn fields(pid: Pid, spec: &Spec) -> Vec<(&'static str, u64)> {
        let mut v = vec![("child-pid", pid.as_raw() as u64)];
        let ns = &spec.ns;
        for (on, name, file) in [
            (ns.cgroup, "cgroup-namespace", "cgroup"),
            (ns.ipc, "ipc-namespace", "ipc"),
            (true, "mnt-namespace", "mnt"),
            (ns.net, "net-namespace", "net"),
            (ns.pid, "pid-namespace", "pid"),
            (ns.uts, "uts-namespace", "uts"),
        ] {
            if !on {
                continue;
            }
            if let Ok(st) = nix::sys::stat::stat(format!("/proc/{pid}/ns/{file}").as_str()) {
                v.push((name, st.st_ino));
            }
        }
        v
    }

    /// The documents laid out as bubblewrap writes them, for clients that scrape rather than
    /// parse: the info one over lines indented by four, the status ones on one line each.
    fn info_text(f: &[(&str, u64)]) -> String {
        let body: Vec<String> = f.iter().map(|(k, v)| format!("    \"{k}\": {v}")).collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }

    fn status_text(f: &[(&str, u64)]) -> String {
        let body: Vec<String> = f.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{ {} }}\n", body.join(", "))
    }

    /// Write the info document (and close the info fd); returns the json-status fd to finish.
    pub fn announce(pid: Pid, io: &BwrapIo, spec: &Spec) -> Option<OwnedFd> {
        let f = fields(pid, spec);
        if let Some(fd) = io.info_fd
            && let Ok(dup) = crate::sys::dup_fd(fd)
        {
            let _ = std::fs::File::from(dup).write_all(info_text(&f).as_bytes());
            // bwrap closes the info fd once written; the caller's reader sees EOF.
            crate::sys::close_fd(fd);
        }
        let fd = io.json_status_fd?;
        let dup = crate::sys::dup_fd(fd).ok()?;
        crate::sys::close_fd(fd);
        let mut file = std::fs::File::from(dup);
        let _ = file.write_all(status_text(&f).as_bytes());
        Some(std::os::fd::OwnedFd::from(file))
    }

    /// The json-status descriptor until its exit code is written. Dropped unwritten (a setup
    /// or exec failure after the announcement, which bwrap mode exits with 1), it says 1, as
    /// bubblewrap's monitor reports a child that died setting up or in execvp.
    pub struct Pending(pub Option<OwnedFd>);

    impl Pending {
        pub fn finish(mut self, end: &End) {
            self.write(end.exit_code());
        }

        fn write(&mut self, code: i32) {
            if let Some(fd) = self.0.take() {
                // One write, as bubblewrap's: a monitor may parse each read as a document.
                let line = format!("{{ \"exit-code\": {code} }}\n");
                let _ = std::fs::File::from(fd).write_all(line.as_bytes());
            }
        }
    }

    impl Drop for Pending {
        fn drop(&mut self) {
            self.write(1);
        }
    }
}

/// What to do about a command the sandbox did not find where the caller's host has it (looked
/// up as the caller would: a path from its working directory, a name on its PATH): the sandbox
/// holds the system's programs, scratch and the inputs, and a new operator's first run often
/// names a script of the working directory or a tool of their home. None where the sandbox
/// already holds that file (a system path, a bind's source, an input of its name: the cause
/// is another, the task's PATH or a link, as a review found), or starts elsewhere (--chdir).
fn not_found_hint(spec: &crate::spec::Spec) -> Option<String> {
    use std::path::Path;
    let name = spec.argv[0].as_str();
    let host = match name.contains('/') {
        true => Some(Path::new(name).to_path_buf()),
        false => std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        }),
    }
    .filter(|p| p.is_file())?;
    let file = host.file_name()?.to_string_lossy().into_owned();
    let real = std::fs::canonicalize(&host).ok()?;
    let held = crate::spec::SYSTEM_PATHS
        .iter()
        .map(Path::new)
        .chain(spec.binds().map(|(src, _, _)| src))
        .any(|tree| real.starts_with(tree) || host.starts_with(tree));
    let elsewhere = spec.cwd != Path::new(crate::spec::SCRATCH);
    if held || spec.inputs.iter().any(|i| i.name == file) || elsewhere {
        return None;
    }
    let run = match name {
        n if n == format!("./{file}") => String::new(),
        _ => format!(" and run ./{file}"),
    };
    Some(match (name.starts_with('/'), name.contains('/')) {
        (false, true) => format!(
            "{name} is the caller's file, but the task starts in scratch ({}), which holds only \
             the inputs: copy it in with --input {file}={name}{run}",
            crate::spec::SCRATCH
        ),
        (absolute, _) => format!(
            "{} on the host, outside what the sandbox holds (the system's programs, scratch and \
             the inputs): bind its directory (--ro-bind {}) and run it by that path, or copy it \
             in (--input {file}={}) and run ./{file}",
            match absolute {
                true => format!("{name} is"),
                false => format!("{name} is {}", host.display()),
            },
            host.parent()?.display(),
            host.display()
        ),
    })
}
