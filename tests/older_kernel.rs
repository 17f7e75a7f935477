//! The boundary on an older kernel, in a virtual machine. airlock is developed on Linux 6.18;
//! its users run distribution kernels (Debian 12's 6.1, Ubuntu 22.04's 5.15, RHEL 9's 5.14).
//! The guest (tests/common/vm.rs) boots Debian 12's own 6.1 kernel with busybox and this
//! airlock binary as its whole userland, plants secrets where a host keeps them, serves HTTP
//! on its loopback and listens on an abstract unix socket, then runs probes in `airlock run`
//! and in bwrap mode, as root and as uid 65534 (busybox's `su`), for the README's claims:
//!
//! - no host file outside the read-only system paths, no network but the sandbox's loopback,
//!   no capabilities, `no_new_privs` and a seccomp filter, a fresh `/proc` whose pid 1 is
//!   airlock's (non-dumpable) init, an environment built from nothing;
//! - namespace, mount and the other refused calls refused (through the i386 and x32 entry
//!   points too, which Debian's kernel has), terminal injection refused (on /dev/null and on
//!   the guest's console, a real terminal);
//! - an input copied in and a result handed back; a timeout and a SIGKILLed launcher each
//!   leave no process and no mount (bwrap mode's launcher too, with `--die-with-parent`);
//! - `--pids` under rlimits (RLIMIT_NPROC per user namespace) and both limits under cgroup v1;
//! - what 6.1 lacks: Landlock's ABI there is 2, below the 6 that scopes abstract unix
//!   sockets, so `--share-net` must say the host's are in reach (and they are);
//! - each of clone3, close_range, openat2 and the mount API's calls answering ENOSYS (as
//!   before the kernel had it, or under a container's filter): the run fails closed, naming
//!   the step, the call and its path, with a hint. (Debian's own switch for unprivileged user
//!   namespaces, which the dev VM's kernel lacks, is tests/userns_disabled.rs's.)
//!
//! The probes that busybox cannot make come from tests/fixtures/kernel_probe.c, built with
//! `musl-gcc -static` (scripts/test.sh installs musl-tools; tests/common/guest_probe.rs builds it
//! and holds the guest's setup and the probes it shares with tests/ubuntu_kernels.rs). The guest
//! boots once; each test
//! reads its lines of the guest's console.

mod common;

use std::sync::OnceLock;

use common::guest_probe::{INSIDE, SETUP, probe, results};
use common::vm::{self, Entry, line};
use serde_json::Value;

/// The two callers each case runs as.
const WHO: [&str; 2] = ["root", "nobody"];

/// Four sleeping processes, one of them orphaned (reparented to the sandbox's init).
const SPIN: &str = "#!/bin/sh\nsleep 732 & sleep 732 & (sleep 732 &); sleep 732\n";

/// Tries to start 60 sleeping processes (a shell that cannot fork exits), then counts the
/// sandbox's processes without forking.
const FORKS: &str = "#!/bin/sh
sh -c 'i=0; while [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); done' 2>/dev/null
set -- /proc/[0-9]*; echo procs=$#
";

/// What a `--share-net` task reaches of the guest's own loopback and abstract sockets.
const SHARED: &str = r#"#!/bin/sh
kernel_probe connect hostsock
kernel_probe tcp 8080
"#;

/// A typical bubblewrap line, as an agent framework writes it.
const BWRAP_LINE: &str = r#"#!/bin/sh
exec bwrap --ro-bind /usr /usr --symlink usr/bin /bin --proc /proc --dev /dev --unshare-all \
  --die-with-parent -- sh -c '
echo "@@in id $(id -u)"
echo "@@in found $(find / -path /proc -prune -o -name "*secret*" -print 2>/dev/null | tr "\n" " ")"
echo "@@in netdev $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ")"
echo "@@in status $(grep -E "^(CapEff|NoNewPrivs)" /proc/self/status | tr -s "\t " " " | tr "\n" ";")"
echo "@@in hostabs $(kernel_probe connect hostsock 2>&1)"
echo "@@in pids $(ls /proc | grep -E "^[0-9]+$" | tr "\n" " ")"
'
"#;

const CASES: &str = r#"
echo "@@kernel release $(uname -r)"
sleepers() { ps | grep -c '[s]leep 732'; }
mounts() { cat /proc/mounts /proc/self/mountinfo | md5sum | cut -d' ' -f1; }
mntns() { for p in /proc/[0-9]*; do readlink $p/ns/mnt; done 2>/dev/null | sort -u | wc -l; }
echo "@@guest mntns $(mntns)"
# The launcher ($3, the name it runs as) of a run ($2) of spin is SIGKILLed once the four
# sleepers run; then no process of the run, and no mount, may be left.
kill_launcher() {
  m0=$(mounts)
  as_${1#bwrap-} "$2" &
  job=$!
  for i in $(seq 200); do [ $(sleepers) -ge 4 ] && break; sleep 0.1; done
  running=$(sleepers)
  launcher=$(pidof $3 | tr ' ' '\n' | sort -n | head -n 1)
  kill -9 $launcher
  wait $job
  for i in $(seq 100); do ps | grep -qE "[s]leep 732|[a]irlock|[b]wrap" || break; sleep 0.1; done
  echo "@@kill $1 running=$running mntns=$(mntns) mounts_same=$([ "$m0" = "$(mounts)" ] && echo yes || echo no) left=$(ps | grep -E "[s]leep 732|[a]irlock|[b]wrap" | tr '\n' ';')"
}
for who in root nobody; do
  as_$who "airlock run -- inside" 2>&1 | sed "s/^@@in /@@in $who-/"
  as_$who "bwrap_line" 2>&1 | sed "s/^@@in /@@bwrap $who-/"
  echo "@@sharenet $who $(as_$who 'airlock run --share-net -- shared' 2>&1 | tr '\n' ';')"
  echo "@@sharenet-report $who $(as_$who 'airlock run --json --share-net -- true')"
  echo "@@sharenet-explain $who $(as_$who 'airlock explain --share-net -- true' | grep -c 'its abstract unix sockets too (no Landlock ABI 6 here')"
  echo "@@json $who $(as_$who 'airlock run --json --input in.txt=/tmp/in.txt -- sh -c "tr a-z A-Z < in.txt > out.txt"')"
  m0=$(mounts)
  msg=$(as_$who "airlock run --timeout 2s -- spin" 2>&1); rc=$?
  echo "@@timeout $who rc=$rc left=$(sleepers) mounts_same=$([ "$m0" = "$(mounts)" ] && echo yes || echo no) $msg"
  kill_launcher $who "airlock run -- spin" airlock
  # Streams on the guest's console (ttyS0), a terminal: the task writes its line there itself.
  as_$who "airlock run -- sh -c 'echo \"@@tty $who \$(tty) \$(kernel_probe terminal | tr \"\\n\" \";\")\"'" </dev/console >/dev/console 2>&1
  kill_launcher bwrap-$who "bwrap --ro-bind /usr /usr --symlink usr/bin /bin --proc /proc --dev /dev --unshare-all --die-with-parent -- spin" bwrap
done
# A call of the mount API, clone3, close_range or openat2 missing, as on kernels before them
# (a seccomp filter of the probe's answers ENOSYS to it).
for nr in 428 429 435 436 437 442; do
  for who in root nobody; do
    run="kernel_probe enosys $nr -- airlock run --ro-bind /srv:/data -- true"
    echo "@@enosys $who-$nr $(as_$who "$run" 2>&1 | tr '\n' ' ') rc=$(as_$who "$run" >/dev/null 2>&1; echo $?)"
  done
done
# Without Landlock's calls, --share-net goes on and says what it could not scope.
echo "@@enosys landlock $(as_nobody "kernel_probe enosys 444 -- airlock run --share-net -- kernel_probe connect hostsock" 2>&1 | tr '\n' ' ')"
# Limits by rlimits (no cgroup mounted yet): RLIMIT_NPROC counts the sandbox user's processes.
for who in root nobody; do
  echo "@@rlimit $who $(as_$who "airlock run --json --pids 20 --memory 64m -- forks")"
done
# Limits by cgroup v1, as a host booted with it has them (root callers only).
mount -t tmpfs -o mode=0755 cgroups /sys/fs/cgroup
mkdir /sys/fs/cgroup/memory /sys/fs/cgroup/pids
mount -t cgroup -o memory none /sys/fs/cgroup/memory
mount -t cgroup -o pids none /sys/fs/cgroup/pids
echo "@@v1 pids $(airlock run --json --pids 20 -- sh -c 'i=0; while [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); done')"
echo "@@v1 memory $(airlock run --json --memory 32m -- sh -c 'x=aaaaaaaa; while :; do x=$x$x; done')"
echo "@@v1 cgroup $(airlock run --json -- cat /proc/self/cgroup)"
airlock run --memory 64m -- sleep 30 &
job=$!
for i in $(seq 200); do tcp=$(cat /sys/fs/cgroup/memory/airlock-*/memory.kmem.tcp.limit_in_bytes 2>/dev/null) && break; sleep 0.1; done
echo "@@v1 tcp $tcp"
kill $job; wait $job
echo "@@v1 left $(find /sys/fs/cgroup -name 'airlock-*' -type d | tr '\n' ' ')"
"#;

/// The guest's console, once it has run every case (None: the VM's parts are missing).
fn console() -> Option<&'static str> {
    static BOOT: OnceLock<Result<String, String>> = OnceLock::new();
    vm::console(BOOT.get_or_init(|| {
        let probe = probe()?;
        vm::boot(
            &format!("{SETUP}{CASES}"),
            &[
                ("usr/bin/inside", Entry::File(0o755, INSIDE.as_bytes())),
                ("usr/bin/spin", Entry::File(0o755, SPIN.as_bytes())),
                ("usr/bin/forks", Entry::File(0o755, FORKS.as_bytes())),
                ("usr/bin/shared", Entry::File(0o755, SHARED.as_bytes())),
                (
                    "usr/bin/bwrap_line",
                    Entry::File(0o755, BWRAP_LINE.as_bytes()),
                ),
                ("usr/bin/kernel_probe", Entry::File(0o755, &probe)),
                ("usr/bin/bwrap", Entry::Link("airlock")),
            ],
        )
    }))
}

fn inside(text: &str, who: &str, name: &str) -> String {
    line(text, "in", &format!("{who}-{name}"))
}

fn json(text: &str, kind: &str, who: &str) -> Value {
    let l = line(text, kind, who);
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("{kind} {who}: {e}: {l:?}"))
}

#[test]
fn the_guest_runs_debian_12s_kernel_6_1() {
    let Some(text) = console() else { return };
    let k = line(text, "kernel", "release");
    assert!(k.starts_with("6.1."), "the guest's kernel: {k}");
    // The controls the network cases rest on: the guest reaches its own server and socket.
    assert_eq!(line(text, "guest", "tcp"), "tcp ok");
    assert_eq!(line(text, "guest", "hostabs"), "connect ok");
}

#[test]
fn host_files_outside_the_system_paths_are_out_of_sight() {
    let Some(text) = console() else { return };
    for who in WHO {
        assert_eq!(inside(text, who, "found"), "", "{who}: the guest's secrets");
        assert_eq!(
            inside(text, who, "write"),
            "/work/x",
            "{who}: what is writable"
        );
    }
}

#[test]
fn the_network_is_the_sandboxs_own_loopback() {
    let Some(text) = console() else { return };
    for who in WHO {
        assert_eq!(inside(text, who, "netdev"), "lo", "{who}: /proc/net/dev");
        assert_eq!(inside(text, who, "iplink"), "lo", "{who}: ip link");
        assert_eq!(
            inside(text, who, "tcp"),
            "tcp ECONNREFUSED",
            "{who}: the guest's server on its loopback"
        );
        assert_eq!(
            inside(text, who, "hostabs"),
            "connect ECONNREFUSED",
            "{who}: the guest's abstract socket"
        );
    }
}

#[test]
fn no_capabilities_no_new_privs_and_a_seccomp_filter() {
    let Some(text) = console() else { return };
    for who in WHO {
        let status = results(&inside(text, who, "status"));
        let get = |k: &str| {
            status
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{who}: no {k} in {status:?}"))
        };
        for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            assert_eq!(get(set), "0000000000000000", "{who}: {set}");
        }
        assert_eq!(get("NoNewPrivs:"), "1", "{who}");
        assert_eq!(get("Seccomp:"), "2", "{who}");
        assert_eq!(inside(text, who, "id"), "1000", "{who}: the task's uid");
    }
}

#[test]
fn a_fresh_proc_whose_pid_1_is_airlocks_init() {
    let Some(text) = console() else { return };
    for who in WHO {
        assert_eq!(inside(text, who, "pid1"), "airlock", "{who}");
        assert_ne!(
            inside(text, who, "init_environ"),
            "rc=0",
            "{who}: the init's environ is readable (it is dumpable)"
        );
        assert_eq!(
            inside(text, who, "keys"),
            "0 0 2",
            "{who}: /proc/keys and /proc/key-users covered by empty files"
        );
        assert_eq!(
            inside(text, who, "inotify"),
            "16 16384",
            "{who}: the user namespace's inotify caps"
        );
    }
}

#[test]
fn the_environment_is_built_from_nothing() {
    let Some(text) = console() else { return };
    for who in WHO {
        let env = inside(text, who, "env");
        let vars: Vec<&str> = env.split(' ').collect();
        assert!(vars.contains(&"HOME=/work"), "{who}: {env}");
        assert!(vars.contains(&"TMPDIR=/work"), "{who}: {env}");
        let names: Vec<&str> = vars.iter().filter_map(|v| v.split('=').next()).collect();
        let known = [
            "HOME", "LANG", "LOGNAME", "PATH", "PWD", "SHLVL", "TMPDIR", "USER",
        ];
        assert!(
            names.iter().all(|n| known.contains(n)),
            "{who}: a variable from outside: {env}"
        );
    }
}

#[test]
fn namespace_mount_and_terminal_calls_are_refused() {
    let Some(text) = console() else { return };
    for who in WHO {
        // The control: the same probe from the guest, outside any sandbox, makes namespaces
        // and mounts, as the same user (the later calls run chrooted into /work, where a new
        // user namespace, ptrace of pid 1 and the rest are not the boundary's doing).
        let outside = results(&line(text, "guest", &format!("escape-{who}")));
        for call in [
            "unshare_user",
            "unshare_mount",
            "unshare_net",
            "mount_tmpfs",
            "remount_root_rw",
            "chroot",
            "fsopen",
        ] {
            assert!(
                outside.iter().any(|(c, r)| c == call && r == "ok"),
                "{who}: {call} did not succeed outside the sandbox: {outside:?}"
            );
        }
        let escape = results(&inside(text, who, "escape"));
        assert_eq!(escape.len(), 22, "{who}: {escape:?}");
        for (call, r) in &escape {
            assert_ne!(r, "ok", "{who}: {call} succeeded in the sandbox");
        }
        assert_eq!(inside(text, who, "bb_unshare"), "rc=1", "{who}");
        assert_ne!(inside(text, who, "bb_mount"), "rc=0", "{who}");
        // i386's int 0x80 is killed by the filter's architecture check; x32's numbers refused.
        let abis = results(&inside(text, who, "abis"));
        assert_eq!(
            abis,
            [
                ("int80_unshare".to_string(), "signal31".to_string()),
                ("x32_unshare".to_string(), abis[1].1.clone()),
            ],
            "{who}"
        );
        assert_ne!(abis[1].1, "ok", "{who}: x32 unshare");
        // stdin is /dev/null: ENOTTY would mean the ioctl reached the kernel.
        assert_eq!(
            inside(text, who, "terminal"),
            "tiocsti EPERM;tioclinux EPERM;",
            "{who}"
        );
        // On the guest's console, a real terminal the task finds by its name.
        assert_eq!(
            line(text, "tty", who),
            "/dev/console tiocsti EPERM;tioclinux EPERM;",
            "{who}"
        );
    }
}

#[test]
fn an_input_goes_in_and_a_result_file_comes_back() {
    let Some(text) = console() else { return };
    for who in WHO {
        let r = json(text, "json", who);
        assert_eq!(r["exit_code"], 0, "{who}: {r}");
        assert_eq!(r["files"]["out.txt"], "INPUT-DATA\n", "{who}: {r}");
    }
}

#[test]
fn a_timeout_kills_a_tree_of_background_processes() {
    let Some(text) = console() else { return };
    for who in WHO {
        let l = line(text, "timeout", who);
        assert!(
            l.starts_with("rc=124 left=0 mounts_same=yes ") && l.contains("timeout (2s) fired"),
            "{who}: {l}"
        );
    }
}

#[test]
fn a_sigkilled_launcher_leaves_no_process_and_no_mount() {
    let Some(text) = console() else { return };
    let before = line(text, "guest", "mntns");
    for who in ["root", "nobody", "bwrap-root", "bwrap-nobody"] {
        let l = line(text, "kill", who);
        assert_eq!(
            l,
            format!("running=4 mntns={before} mounts_same=yes left="),
            "{who}"
        );
    }
}

#[test]
fn bwrap_mode_runs_a_typical_line() {
    let Some(text) = console() else { return };
    for (who, uid) in [("root", "0"), ("nobody", "65534")] {
        let b = |name: &str| line(text, "bwrap", &format!("{who}-{name}"));
        assert_eq!(b("id"), uid, "{who}");
        assert_eq!(b("found"), "", "{who}: the guest's secrets");
        assert_eq!(b("netdev"), "lo", "{who}");
        assert_eq!(
            b("status"),
            "CapEff: 0000000000000000;NoNewPrivs: 1;",
            "{who}"
        );
        assert_eq!(b("hostabs"), "connect ECONNREFUSED", "{who}");
        assert_eq!(
            b("pids").split(' ').next(),
            Some("1"),
            "{who}: a pid namespace"
        );
    }
}

/// Landlock ABI 2 on 6.1: no scope for abstract sockets. The task reaches the guest's, and
/// airlock says so, on stderr, in the report and in explain.
#[test]
fn share_net_says_the_hosts_abstract_sockets_are_in_reach_below_landlock_abi_6() {
    let Some(text) = console() else { return };
    for who in WHO {
        let l = line(text, "sharenet", who);
        assert!(
            l.contains("the host's abstract unix sockets included (no Landlock ABI 6 here")
                && l.contains("connect ok;tcp ok;"),
            "{who}: {l}"
        );
        let r = json(text, "sharenet-report", who);
        let warnings = r["warnings"].to_string();
        assert!(
            warnings.contains("abstract unix sockets included"),
            "{who}: {r}"
        );
        assert_eq!(line(text, "sharenet-explain", who), "1", "{who}");
    }
}

/// A call airlock needs, answered ENOSYS by a filter around it (a container's profile, say):
/// the run stops at the step that made the call, naming it and its path, and the hint says
/// the kernel has it (6.1 has every call since 5.12) rather than that it needs a newer kernel.
#[test]
fn a_call_refused_with_enosys_fails_closed_blaming_the_filter_not_the_kernel() {
    let Some(text) = console() else { return };
    let kernel = line(text, "kernel", "release");
    for (nr, failed) in [
        (435, "step 1 create namespaces: clone3(flags="),
        (436, "step 3 sanitize descriptors: close_range("),
        (437, "step 5 copy host paths: openat2(\"/srv\", "),
        (428, "step 5 copy host paths: open_tree(\"/usr\", "),
        (442, "step 5 copy host paths: mount_setattr(\"/usr\", "),
        (
            429,
            "step 7 build the filesystem: move_mount(<tree>, \"/newroot/usr\")",
        ),
    ] {
        for who in WHO {
            let l = line(text, "enosys", &format!("{who}-{nr}"));
            let hint = format!("hint: this kernel ({kernel}) has the call, but a seccomp filter");
            assert!(
                l.starts_with(&format!("airlock: setup failed: {failed}"))
                    && l.contains("ENOSYS")
                    && l.contains(&hint)
                    && !l.contains("needs Linux")
                    && l.ends_with("rc=125"),
                "{who}, syscall {nr}: {l}"
            );
        }
    }
    // Landlock's calls refused: --share-net goes on, saying the host's sockets are in reach.
    let l = line(text, "enosys", "landlock");
    assert!(
        l.contains("abstract unix sockets included") && l.ends_with("connect ok"),
        "{l}"
    );
}

/// Under rlimits (no cgroup), `--pids` bounds the sandbox's processes (RLIMIT_NPROC, counted
/// per user namespace since 5.14); under cgroup v1 (a root caller), the run's cgroups hold
/// both limits, its cgroup namespace is rooted in them, and they go with the run.
#[test]
fn limits_hold_by_rlimits_and_by_cgroup_v1() {
    let Some(text) = console() else { return };
    for who in WHO {
        let r = json(text, "rlimit", who);
        assert_eq!(
            r["limits"]["pids"]["mechanism"], "rlimit (RLIMIT_NPROC, per sandbox user)",
            "{who}: {r}"
        );
        let procs: u32 = r["stdout"]
            .as_str()
            .and_then(|s| s.trim().strip_prefix("procs="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{who}: {r}"));
        assert!(
            (10..=20).contains(&procs),
            "{who}: {procs} processes under --pids 20"
        );
    }
    for (name, hit) in [("pids", "pids"), ("memory", "memory")] {
        let r = json(text, "v1", name);
        assert_eq!(r["limits"]["memory"]["mechanism"], "cgroup v1", "{r}");
        assert_eq!(r["limits"]["pids"]["mechanism"], "cgroup v1", "{r}");
        assert_eq!(r["limit_hit"], hit, "{r}");
    }
    let r = json(text, "v1", "cgroup");
    let own = r["stdout"].as_str().unwrap_or_default();
    assert!(
        own.lines().count() == 2 && own.lines().all(|l| l.ends_with(":/")),
        "the task's cgroups are its namespace's roots: {r}"
    );
    // Socket buffers count against --memory under v1 too: the run's own TCP limit is set.
    assert_eq!(
        line(text, "v1", "tcp"),
        "67108864",
        "memory.kmem.tcp.limit_in_bytes"
    );
    assert_eq!(line(text, "v1", "left"), "", "cgroups left after the runs");
}
