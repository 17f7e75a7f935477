//! The seccomp filters: compiled from `seccomp/<arch>.json` by build.rs, installed last before
//! exec. See `seccomp/README.md` for what each rule denies and why.

use crate::sys::SysError;
use nix::errno::Errno;

mod compiled {
    include!(concat!(env!("OUT_DIR"), "/seccomp_filters.rs"));
}

#[allow(unused_imports)]
pub use compiled::POLICY_FILE;

/// The x32 ABI shares AUDIT_ARCH_X86_64 but numbers its syscalls with bit 30 set, so a denylist
/// keyed on x86_64 numbers would not see them. This fixed guard answers ENOSYS to every such
/// number. It is code rather than policy because seccompiler's JSON cannot match on the
/// syscall number's bits.
#[cfg(target_arch = "x86_64")]
static X32_GUARD: &[seccompiler::sock_filter] = &[
    // A = seccomp_data.nr
    seccompiler::sock_filter {
        code: 0x20,
        jt: 0,
        jf: 0,
        k: 0,
    },
    // if (A & 0x40000000) goto deny; else goto allow
    seccompiler::sock_filter {
        code: 0x45,
        jt: 1,
        jf: 0,
        k: 0x4000_0000,
    },
    seccompiler::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    },
    seccompiler::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
    },
];

/// The filters in the order they are installed, with the names `explain` prints.
pub fn filters() -> Vec<(&'static str, &'static [seccompiler::sock_filter])> {
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, &'static [seccompiler::sock_filter])> =
        vec![("deny", compiled::DENY), ("enosys", compiled::ENOSYS)];
    #[cfg(target_arch = "x86_64")]
    v.push(("x32-guard", X32_GUARD));
    v
}

/// Install every filter on this thread (no_new_privs must already be set).
pub fn install() -> Result<(), SysError> {
    for (name, prog) in filters() {
        seccompiler::apply_filter(prog).map_err(|e| SysError {
            call: format!(
                "seccomp(SECCOMP_SET_MODE_FILTER, <{name}: {} insns>)",
                prog.len()
            ),
            errno: match e {
                seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => {
                    Errno::from_raw(io.raw_os_error().unwrap_or(0))
                }
                _ => Errno::EINVAL,
            },
        })?;
    }
    Ok(())
}

/// Install a compiled BPF program given as bytes (bwrap's --seccomp FD): a whole number of
/// 8-byte `struct sock_filter` instructions.
pub fn install_program(bytes: &[u8]) -> Result<(), SysError> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(8) || bytes.len() / 8 > u16::MAX as usize {
        return Err(SysError {
            call: format!(
                "seccomp program of {} bytes is not whole sock_filter instructions",
                bytes.len()
            ),
            errno: Errno::EINVAL,
        });
    }
    let prog: Vec<seccompiler::sock_filter> = bytes
        .chunks_exact(8)
        .map(|c| seccompiler::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    seccompiler::apply_filter(&prog).map_err(|e| SysError {
        call: format!("seccomp(SECCOMP_SET_MODE_FILTER, <{} insns>)", prog.len()),
        errno: match e {
            seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => {
                Errno::from_raw(io.raw_os_error().unwrap_or(0))
            }
            _ => Errno::EINVAL,
        },
    })
}

#[cfg(test)]
mod tests {
    use seccompiler::TargetArch;

    /// Both architectures' policies compile (build.rs compiles only the target's), each with the
    /// two filters the boundary installs, and an unknown syscall name is refused.
    #[test]
    fn every_policy_compiles_with_its_filters() {
        for (arch, target) in [
            ("x86_64", TargetArch::x86_64),
            ("aarch64", TargetArch::aarch64),
        ] {
            let path = format!("{}/seccomp/{arch}.json", env!("CARGO_MANIFEST_DIR"));
            let file = std::fs::File::open(&path).unwrap();
            let map = seccompiler::compile_from_json(file, target)
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            for name in ["deny", "enosys"] {
                assert!(
                    map.get(name).is_some_and(|p| !p.is_empty()),
                    "{path}: {name}"
                );
            }
        }
        let bad = r#"{"deny": {"mismatch_action": "allow", "filter_action": {"errno": 1},
                      "filter": [{"syscall": "no_such_call"}]}}"#;
        assert!(seccompiler::compile_from_json(bad.as_bytes(), TargetArch::x86_64).is_err());
    }

    #[test]
    fn the_policy_denies_what_the_boundary_relies_on() {
        let text = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/seccomp/x86_64.json"));
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let names: Vec<&str> = v["deny"]["filter"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["syscall"].as_str().unwrap())
            .collect();
        for must in [
            "unshare",
            "setns",
            "mount",
            "umount2",
            "pivot_root",
            "chroot",
            "ptrace",
            "bpf",
            "keyctl",
            "add_key",
            "request_key",
            "perf_event_open",
            "userfaultfd",
            "io_uring_setup",
            "open_by_handle_at",
            "fsopen",
            "move_mount",
            "open_tree",
            "mount_setattr",
            "kexec_load",
            "init_module",
            "finit_module",
            "socket",
            "socketpair",
            "ioctl",
            "personality",
            "process_vm_readv",
            "process_vm_writev",
        ] {
            assert!(names.contains(&must), "{must} is not in the deny filter");
        }
        for rule in v["deny"]["filter"].as_array().unwrap() {
            assert!(
                rule["comment"].is_string(),
                "rule without a comment: {rule}"
            );
        }
        let enosys: Vec<&str> = v["enosys"]["filter"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["syscall"].as_str().unwrap())
            .collect();
        assert_eq!(enosys, ["clone3"]);
    }
}
