//! bwrap's --userns and --pidns: the sandbox's first process joins the caller's namespaces and
//! creates the others inside them, then forks the init that builds the sandbox (step 1 for
//! this case; `launch.rs` makes the others with clone3).

use std::os::fd::AsFd;

use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};

use super::{Inherited, Step, StepError, die_with_launcher, sanitize_fds};
use crate::spec;
use crate::sys::{self, named};

/// bwrap's --userns (step 1 for this case): enter the caller's user namespace (and pid
/// namespace, with --pidns), create the other namespaces inside it, then fork the init that
/// builds the sandbox. This process stays only to wait for that init and exit as it did. A
/// pipe tells the init if this process died before its parent-death signal was set.
pub(super) fn join_namespaces(inh: &Inherited, userns: i32) -> Result<(), StepError> {
    let spec = inh.spec;
    let io = spec.bwrap.as_ref().expect("--userns is a bwrap option");
    sanitize_fds(inh).step("1 sanitize descriptors")?;
    die_with_launcher(inh).step("1 die with the launcher")?;
    sys::join_namespace(userns, libc::CLONE_NEWUSER).step("1 enter the user namespace")?;
    // Entering a user namespace that the caller's namespace is not the parent of, or whose
    // owner is not the caller's uid (root joining a user's), clears PR_SET_PDEATHSIG
    // (`commit_creds`: the new credentials are no subset of the old): set again.
    die_with_launcher(inh).step("1 die with the launcher")?;
    if let Some(fd) = io.pidns_fd {
        sys::join_namespace(fd, libc::CLONE_NEWPID).step("1 enter the pid namespace")?;
    }
    let ns = &spec.ns;
    // The pid namespace comes with the fork below.
    let flags = libc::CLONE_NEWNS | (ns.flags() & !libc::CLONE_NEWPID);
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
