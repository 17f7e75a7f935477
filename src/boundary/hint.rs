//! Hints for the failures whose usual cause is known, added to a failed step's message.

use nix::errno::Errno;

use crate::sys::SysError;

/// The kernel's internal "operation not supported" (include/linux/errno.h), which seccomp
/// returns when the BPF JIT cannot take the program; libc gives it no name.
pub const ENOTSUPP: i32 = 524;

/// A hint for the failures whose usual cause is known.
pub fn hint(err: &SysError) -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if let Some(h) = limit_reached(err) {
        return Some(h);
    }
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
        return Some(PROC_HIDDEN.into());
    }
    if err.call.starts_with("prctl(PR_SET_SECCOMP")
        && err.call.ends_with(&format!("(errno {ENOTSUPP})"))
    {
        return Some(
            "the kernel could not compile the filter (ENOTSUPP): its BPF JIT pool \
             (net.core.bpf_jit_limit) is likely used up by other processes' filters, and frees \
             as they exit"
                .into(),
        );
    }
    if err.errno == Errno::EMFILE && err.call.starts_with("open_tree(") {
        return Some(
            "more host paths to mount than the hard limit of open files (ulimit -Hn) allows: \
             airlock holds a descriptor for each until the sandbox is built (about 30 of its \
             own, and one for each bind); raise that limit, or bind a common parent directory \
             once"
                .into(),
        );
    }
    if err.errno == Errno::EPERM && crate::sys::seccomp_mode() == Some(2) {
        return Some(filter_refused(&err.call));
    }
    if err.errno == Errno::ENOSYS {
        return Some(missing_call(
            &crate::sys::kernel_release().unwrap_or_default(),
            crate::sys::seccomp_mode(),
        ));
    }
    None
}

/// The hints for a step that ran into one of the caller's own limits, which the sandbox's
/// setup runs under (an operator review's list): its file size, address space and process
/// count limits, the scratch size given, and a --chdir that names a host directory.
fn limit_reached(err: &SysError) -> Option<String> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let finite = |r: Resource| {
        getrlimit(r)
            .ok()
            .map(|(_, hard)| hard)
            .filter(|&h| h != RLIM_INFINITY)
    };
    let call = err.call.as_str();
    match err.errno {
        Errno::EFBIG => finite(Resource::RLIMIT_FSIZE).map(|max| {
            format!(
                "the caller's hard file size limit (ulimit -Hf) is {max} bytes, too low for \
                 the sandbox's own files (/etc/passwd, the inputs): raise it"
            )
        }),
        Errno::ENOMEM if call.starts_with("mmap(") => finite(Resource::RLIMIT_AS).map(|max| {
            format!(
                "the caller's address space limit (ulimit -v) is {} KiB, too little for \
                 airlock's own processes: raise it",
                max / 1024
            )
        }),
        // Root passes RLIMIT_NPROC (CAP_SYS_RESOURCE): there a cgroup's pids.max is the
        // likelier cause, as it may be for anyone (the sign-off review).
        Errno::EAGAIN
            if (call.starts_with("clone") || call.starts_with("fork("))
                && !nix::unistd::geteuid().is_root() =>
        {
            finite(Resource::RLIMIT_NPROC).map(|max| {
                format!(
                    "the caller's process limit (ulimit -u) is {max}, and every process of the \
                     sandbox counts as the caller's uid on the host: if that many run, raise \
                     it or end some of them (else a cgroup's pids.max may be reached)"
                )
            })
        }
        Errno::ENOSPC if call.starts_with("copy input ") => Some(
            "scratch is full: the inputs take more than --scratch-size leaves (a file of /proc \
             reads larger than its size says); raise --scratch-size"
                .into(),
        ),
        Errno::ENOENT if call.starts_with("chdir(") => Some(format!(
            "--chdir (a request's \"chdir\") names a directory inside the sandbox, where this \
             one is missing: scratch ({}) and what is in it, a bind's destination, or a system \
             path; a host directory only once bound",
            crate::spec::SCRATCH
        )),
        _ => None,
    }
}

/// The hint for a new /proc the kernel refused (EPERM): it mounts one in a user namespace only
/// where the caller's /proc is fully visible, and a container runtime hides parts of it by
/// mounting over them (podman's masked paths: /proc/kcore, /proc/keys, /proc/timer_list...).
/// Measured with podman 4.3 (runc), rootful: its default masks gave this EPERM, with or without
/// `--security-opt seccomp=unconfined` or `--cap-add SYS_ADMIN`; `unmask=/proc/*` removed it.
const PROC_HIDDEN: &str = "the kernel refuses a new /proc where the caller's /proc is partly \
     hidden by mounts over it, as a container runtime hides parts of it (masked paths): run the \
     container with them unmasked (podman: --security-opt unmask=/proc/*; Docker: \
     --security-opt systempaths=unconfined)";

/// The hint for a call that answered EPERM while this process runs under a seccomp filter of
/// its caller's, naming the call. podman's default profile (containers-common) allows clone3,
/// unshare and the mount calls, but sethostname only to a container with CAP_SYS_ADMIN (step
/// 10 failed there); Docker's refuses unshare and the mount calls too.
fn filter_refused(call: &str) -> String {
    let name = call.split('(').next().unwrap_or(call);
    format!(
        "a seccomp filter airlock runs under (seccomp mode 2) may refuse {name}: a container \
         runtime's default profile refuses some calls (Docker's unshare and the mount calls, \
         podman's sethostname) to a container without CAP_SYS_ADMIN; run the container with \
         --security-opt seccomp=unconfined or --cap-add SYS_ADMIN (airlock drops every \
         capability before the task runs)"
    )
}

/// The first release with every call airlock's launch needs (mount_setattr; clone3, open_tree,
/// move_mount and close_range are older).
const NEEDED: (u32, u32) = (5, 12);

/// The hint for a call that answered ENOSYS, given the kernel's release and the seccomp mode of
/// this process. A kernel as new as [`NEEDED`] has every call, so there a filter of the
/// caller's answers for it (a container's profile: Docker's answers ENOSYS to clone3, as
/// airlock's own policy does to a task), and "needs a newer kernel" would send the reader the
/// wrong way.
fn missing_call(release: &str, seccomp: Option<u32>) -> String {
    let version = |r: &str| -> Option<(u32, u32)> {
        let mut parts = r.split(|c: char| !c.is_ascii_digit());
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    let needs = format!(
        "airlock needs Linux {}.{} or newer (clone3, open_tree, mount_setattr)",
        NEEDED.0, NEEDED.1
    );
    match (version(release).map(|v| v >= NEEDED), seccomp) {
        (Some(true), Some(mode)) if mode > 0 => format!(
            "this kernel ({release}) has the call, but a seccomp filter airlock runs under \
             refuses it (seccomp mode {mode}: a container's profile, or a sandbox around \
             airlock): run airlock where clone3, open_tree, move_mount, mount_setattr and \
             close_range are allowed (a container: --security-opt seccomp=unconfined)"
        ),
        (Some(true), _) => format!(
            "this kernel ({release}) answers ENOSYS to the call, though Linux {}.{} has every \
             call airlock needs (clone3, open_tree, mount_setattr): was it built without it?",
            NEEDED.0, NEEDED.1
        ),
        (Some(false), _) => format!("{needs}; this kernel is {release}"),
        (None, _) => needs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_refusing_a_call_is_named_with_the_container_options_that_allow_it() {
        // podman's default profile refuses sethostname (step 10) to a container without
        // CAP_SYS_ADMIN; the hint once named only unshare and the mount calls.
        let h = filter_refused("sethostname(\"airlock\")");
        assert!(
            h.contains("refuse sethostname:")
                && h.contains("--security-opt seccomp=unconfined")
                && h.contains("--cap-add SYS_ADMIN"),
            "{h}"
        );
        assert!(filter_refused("unshare(CLONE_NEWNS)").contains("refuse unshare:"));
        let proc = hint(&SysError {
            call: "mount(\"proc\", \"/newroot/proc\", \"proc\", MsFlags(0x0), None)".into(),
            errno: Errno::EPERM,
        })
        .unwrap_or_default();
        assert!(
            proc.contains("unmask=/proc/*") && proc.contains("systempaths=unconfined"),
            "{proc}"
        );
    }

    #[test]
    fn enosys_blames_a_filter_on_a_kernel_that_has_the_calls_and_the_kernel_otherwise() {
        let filtered = missing_call("6.1.0-57-amd64", Some(2));
        assert!(
            filtered.contains("a seccomp filter")
                && filtered.contains("--security-opt seccomp=unconfined")
                && !filtered.contains("needs Linux"),
            "{filtered}"
        );
        let old = missing_call("5.10.0-30-amd64", Some(2));
        assert!(
            old.contains("needs Linux 5.12 or newer") && old.contains("this kernel is 5.10.0"),
            "{old}"
        );
        let bare = missing_call("6.18.44", Some(0));
        assert!(
            bare.contains("(6.18.44) answers ENOSYS") && !bare.contains("seccomp"),
            "{bare}"
        );
        assert!(missing_call("", None).starts_with("airlock needs Linux 5.12"));
        // Under no filter (the test runner's case) this process reads mode 0.
        assert!(crate::sys::kernel_release().is_some_and(|r| !r.is_empty()));
    }
}
