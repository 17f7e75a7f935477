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
    if err.call.starts_with("seccomp(") && err.call.ends_with(&format!("(errno {ENOTSUPP})")) {
        return Some(
            "the kernel could not compile the filter (ENOTSUPP): its BPF JIT pool \
             (net.core.bpf_jit_limit) is likely used up by other processes' filters, and frees \
             as they exit"
                .into(),
        );
    }
    if err.errno == Errno::EMFILE && err.call.starts_with("open_tree(") {
        return Some(
            "more binds than the hard limit of open files (ulimit -Hn) allows: airlock holds a \
             descriptor for each bind until the sandbox is built; raise that limit, or bind a \
             common parent directory once"
                .into(),
        );
    }
    if (err.errno == Errno::ENOSYS || err.errno == Errno::EPERM) && under_seccomp_filter() {
        return Some(
            "airlock was started under a seccomp filter (Seccomp: 2 in /proc/self/status), \
             which may refuse the call: a container runtime's default profile refuses clone3, \
             unshare and the mount calls to a container without CAP_SYS_ADMIN; run airlock \
             where they are allowed"
                .into(),
        );
    }
    if err.errno == Errno::ENOSYS {
        return Some("airlock needs Linux 5.12 or newer (clone3, open_tree, mount_setattr)".into());
    }
    None
}

/// Whether this process runs under a seccomp filter, read before airlock installs its own (the
/// last step before the task): one its caller started it under.
fn under_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}
