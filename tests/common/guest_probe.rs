//! What guests booting another kernel (tests/common/vm.rs) share: tests/fixtures/kernel_probe.c
//! built for them, the guest's setup (secrets where a host keeps them, a server on its
//! loopback, a listening abstract socket, an input file) and the probes run inside a sandbox.
//! tests/older_kernel.rs (Debian 12's 6.1) and tests/ubuntu_kernels.rs read their lines.

/// The guest's setup, run first as its root (after `as_root`/`as_nobody` are defined or not:
/// it needs neither). Prints the controls `@@guest tcp` and `@@guest hostabs`.
pub const SETUP: &str = r#"
# Secrets where a host keeps them, readable by uid 65534 too: only the boundary hides them.
mkdir -p /root /home/u /srv
for d in /root /home/u /srv /tmp /etc; do echo topsecret > $d/secret; chmod 644 $d/secret; done
chmod 755 /root
ip link set lo up
httpd -p 127.0.0.1:8080 -h /srv
kernel_probe listen hostsock /tmp/listening &
for i in $(seq 100); do [ -e /tmp/listening ] && break; sleep 0.1; done
# The controls: from the guest itself, both are reached.
echo "@@guest tcp $(kernel_probe tcp 8080)"
echo "@@guest hostabs $(kernel_probe connect hostsock)"
# The escape calls' control: from the guest, as root and as uid 65534, the probe's first user
# namespace gives it the rights the rest need (all in namespaces of its own, gone with it).
mkdir -p /work
echo "@@guest escape-root $(kernel_probe escape 2>&1 | tr '\n' ';')"
echo "@@guest escape-nobody $(su -s /bin/sh nobody -c 'kernel_probe escape' 2>&1 | tr '\n' ';')"
echo input-data > /tmp/in.txt; chmod 644 /tmp/in.txt
"#;

/// Run in `airlock run` (and in part in bwrap mode): one `@@in NAME ...` line per probe.
pub const INSIDE: &str = r#"#!/bin/sh
echo "@@in found $(find / -path /proc -prune -o -name '*secret*' -print 2>/dev/null | tr '\n' ' ')"
echo "@@in netdev $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "@@in iplink $(ip -o link 2>&1 | cut -d: -f2 | tr -d ' ' | tr '\n' ' ')"
echo "@@in tcp $(kernel_probe tcp 8080 2>&1)"
echo "@@in status $(grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status | tr -s '\t ' ' ' | tr '\n' ';')"
echo "@@in pid1 $(cat /proc/1/comm)"
cat /proc/1/environ >/dev/null 2>&1; echo "@@in init_environ rc=$?"
echo "@@in id $(id -u)"
echo "@@in env $(env | sort | tr '\n' ' ')"
echo "@@in escape $(kernel_probe escape 2>&1 | tr '\n' ';')"
echo "@@in abis $(kernel_probe other_abis 2>&1 | tr '\n' ';')"
echo "@@in terminal $(kernel_probe terminal </dev/null 2>&1 | tr '\n' ';')"
unshare -U true 2>/dev/null; echo "@@in bb_unshare rc=$?"
mkdir -p /work/m; mount -t tmpfs none /work/m 2>/dev/null; echo "@@in bb_mount rc=$?"
echo "@@in write $(for f in /usr/x /etc/x /x /dev/x /proc/x /proc/sys/user/max_inotify_instances /work/x; do touch $f 2>/dev/null && echo $f; done | tr '\n' ' ')"
echo "@@in keys $(wc -c < /proc/keys) $(wc -c < /proc/key-users) $(grep -c ' /proc/key' /proc/self/mounts)"
touch /work/s; chmod 4755 /work/s 2>/dev/null; chmod 2755 /work/s 2>/dev/null; echo "@@in setid $(stat -c %A /work/s)"
echo "@@in inotify $(cat /proc/sys/user/max_inotify_instances /proc/sys/user/max_inotify_watches | tr '\n' ' ')"
echo "@@in hostabs $(kernel_probe connect hostsock 2>&1)"
"#;

/// The probe, built for the guest (static: it has no libraries).
pub fn probe() -> Result<Vec<u8>, String> {
    let dir = super::tmpdir();
    Ok(std::fs::read(super::c_fixture("kernel_probe", dir.path())?).unwrap())
}

/// `NAME RESULT;` pairs of a probe's line.
pub fn results(l: &str) -> Vec<(String, String)> {
    l.split(';')
        .filter_map(|p| p.trim().split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The README's key claims, on `INSIDE`'s lines for `who` (`@@in WHO-NAME ...`): no guest
/// secret in sight, only the scratch writable, only the sandbox's loopback (the guest's server
/// and abstract socket out of reach), no capabilities, no_new_privs and airlock's filter,
/// airlock's non-dumpable init as pid 1, the escape calls refused.
pub fn assert_key_claims(text: &str, who: &str) {
    let inside = |name: &str| super::vm::line(text, "in", &format!("{who}-{name}"));
    assert_eq!(inside("found"), "", "{who}: the guest's secrets");
    assert_eq!(inside("write"), "/work/x", "{who}: what is writable");
    assert_eq!(inside("netdev"), "lo", "{who}: /proc/net/dev");
    assert_eq!(
        inside("tcp"),
        "tcp ECONNREFUSED",
        "{who}: the guest's server"
    );
    assert_eq!(
        inside("hostabs"),
        "connect ECONNREFUSED",
        "{who}: the guest's abstract socket"
    );
    let status = inside("status");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            status.contains(&format!("{set}: 0000000000000000;")),
            "{who}: {status}"
        );
    }
    assert!(
        status.contains("NoNewPrivs: 1;") && status.contains("Seccomp: 2;"),
        "{who}: {status}"
    );
    assert_eq!(inside("id"), "1000", "{who}: the task's uid");
    assert_eq!(inside("pid1"), "airlock", "{who}");
    assert_ne!(
        inside("init_environ"),
        "rc=0",
        "{who}: the init is dumpable"
    );
    let escape = results(&inside("escape"));
    assert_eq!(escape.len(), 22, "{who}: {escape:?}");
    for (call, r) in &escape {
        assert_ne!(r, "ok", "{who}: {call} succeeded in the sandbox");
    }
    assert_eq!(inside("bb_unshare"), "rc=1", "{who}");
    assert_eq!(
        inside("terminal"),
        "tiocsti EPERM;tioclinux EPERM;",
        "{who}"
    );
}
