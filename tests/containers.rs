//! airlock inside a container: rootful podman (runc) running a Debian 12 image built by
//! scripts/containers.sh, with this airlock binary bound read-only at /usr/local/bin/airlock.
//! Agent frameworks often run their tools so. podman's default confinement has two parts that
//! stop airlock's boundary, each failing closed (exit 125) with a hint naming the container
//! option that lifts it:
//!
//! - the masked paths over /proc (/proc/kcore, /proc/keys...): the kernel refuses the
//!   sandbox's new /proc (step 7), as it refuses bubblewrap's `--proc` with the same message;
//! - the default seccomp profile, which refuses sethostname (step 10) to a container without
//!   CAP_SYS_ADMIN (it allows clone3, unshare and the mount calls).
//!
//! A profile shaped as Docker's (clone3 answering ENOSYS, unshare and the mount calls EPERM;
//! written here, Docker's own is not installed) stops airlock at step 1, naming the filter.
//!
//! With `--security-opt unmask=/proc/*` and either `--security-opt seccomp=unconfined` (root)
//! or `--cap-add SYS_ADMIN` (a non-root container user), a run works and its boundary holds:
//! the container's files outside the system paths are not seen, only a loopback, no
//! capabilities, no_new_privs, a seccomp filter, airlock's init as pid 1, the container's
//! environment not passed, limits by rlimits (the container's cgroup v1 is read-only) and
//! nothing left in the container.
//!
//! Six containers, one at a time, about 5 s in all. Without podman or the image the tests
//! say so and pass, unless AIRLOCK_CONTAINERS_REQUIRED is set (scripts/test.sh sets it).

mod common;

use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const IMAGE: &str = "localhost/airlock-bookworm:latest";

/// What a case's container printed (stdout then stderr), or None when podman or the image is
/// missing and not required.
fn container(opts: &[&str], script: &str) -> Option<String> {
    let ready = Command::new("scripts/containers.sh")
        .arg("--check")
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        assert!(
            std::env::var_os("AIRLOCK_CONTAINERS_REQUIRED").is_none(),
            "podman or the image is missing: run scripts/containers.sh"
        );
        eprintln!("SKIP: podman or {IMAGE} missing (scripts/containers.sh installs them)");
        return None;
    }
    // One container at a time, so that the cgroups podman leaves behind can be removed.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "airlock-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    // podman's default rlimits (nofile and nproc at 1048576 and more) may exceed the caller's
    // hard limits, which it cannot raise: pass the caller's own.
    let hard = |flag: &str| {
        let out = Command::new("bash")
            .args(["-c", &format!("ulimit -H{flag}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // The process count is set low enough for any caller (podman's own is 4194304).
    let (nofile, nproc) = (hard("n"), "4096");
    let bind = format!("{}:/usr/local/bin/airlock:ro", common::binary().display());
    let mut args: Vec<String> = [
        "120",
        "podman",
        "run",
        "--rm",
        "--name",
        &name,
        "--runtime",
        "runc",
        // No container network: podman's bridge (netavark) turns on the host's IPv4
        // forwarding, which new network namespaces, airlock's included, inherit, and adds
        // firewall chains; airlock's sandbox has its own loopback anyway.
        "--network",
        "none",
        "--ulimit",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("nofile={nofile}:{nofile}"));
    args.push("--ulimit".into());
    args.push(format!("nproc={nproc}:{nproc}"));
    args.extend(["-v".to_string(), bind]);
    args.extend(opts.iter().map(|s| s.to_string()));
    args.extend([IMAGE, "sh", "-c", script].iter().map(|s| s.to_string()));
    let out = Command::new("timeout").args(&args).output().unwrap();
    // Whatever happened, no container of this test is left.
    let _ = Command::new("podman")
        .args(["rm", "-f", "-i", &name])
        .output();
    // podman (cgroupfs manager, cgroup v1) leaves libpod_parent and its conmon child in each
    // hierarchy of the host: removed when empty (rmdir refuses one in use).
    let _ = Command::new("sh")
        .args([
            "-c",
            "for d in /sys/fs/cgroup/*/libpod_parent; do rmdir $d/conmon $d; done 2>/dev/null",
        ])
        .status();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "podman run {opts:?}: {}\n{text}",
        out.status
    );
    Some(text)
}

/// The rest of the line `@@KEY ...`, trimmed.
fn line(text: &str, key: &str) -> String {
    let head = format!("@@{key} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&head))
        .unwrap_or_else(|| panic!("no line {head:?} in:\n{text}"))
        .trim()
        .to_string()
}

/// `airlock run` in its plain and JSON forms, then bubblewrap's and airlock's bwrap mode on the
/// same line, each with its exit status.
const FAILING: &str = r#"
airlock run -- /bin/true 2>/tmp/e; echo "@@rc $?"; echo "@@err $(cat /tmp/e)"
airlock run --json -- /bin/true >/tmp/j 2>/dev/null; echo "@@jrc $?"; echo "@@json $(cat /tmp/j)"
bwrap --unshare-all --ro-bind / / --proc /proc true 2>/tmp/b; echo "@@brc $?"; echo "@@bwrap $(cat /tmp/b)"
airlock bwrap --unshare-all --ro-bind / / --proc /proc true 2>/tmp/a; echo "@@arc $?"; echo "@@abwrap $(cat /tmp/a)"
"#;

#[test]
fn default_masked_proc_fails_closed_at_step_7_naming_the_unmask_option() {
    let Some(text) = container(&[], FAILING) else {
        return;
    };
    assert_eq!(line(&text, "rc"), "125", "{text}");
    let err = line(&text, "err");
    assert!(
        err.contains("step 7 build the filesystem: mount(\"proc\"")
            && err.contains("EPERM")
            && err.contains("--security-opt unmask=/proc/*"),
        "{err}"
    );
    assert_eq!(line(&text, "jrc"), "125", "{text}");
    let json: serde_json::Value = serde_json::from_str(&line(&text, "json")).unwrap();
    assert_eq!(json["error_kind"], "setup", "{json}");
    assert!(
        json["error"]
            .as_str()
            .is_some_and(|e| e.contains("step 7") && e.contains("unmask=/proc/*")),
        "{json}"
    );
    // bubblewrap fails the same way, with the same line.
    assert_eq!(line(&text, "brc"), "1", "{text}");
    assert_eq!(line(&text, "arc"), "1", "{text}");
    assert_eq!(line(&text, "bwrap"), line(&text, "abwrap"), "{text}");
    assert!(line(&text, "bwrap").contains("Can't mount proc"), "{text}");
}

#[test]
fn default_seccomp_profile_fails_closed_at_step_10_naming_the_options() {
    let Some(text) = container(&["--security-opt", "unmask=/proc/*"], FAILING) else {
        return;
    };
    assert_eq!(line(&text, "rc"), "125", "{text}");
    let err = line(&text, "err");
    assert!(
        err.contains("step 10 hostname: sethostname(")
            && err.contains("refuse sethostname")
            && err.contains("--security-opt seccomp=unconfined")
            && err.contains("--cap-add SYS_ADMIN"),
        "{err}"
    );
    assert_eq!(line(&text, "jrc"), "125", "{text}");
    let json: serde_json::Value = serde_json::from_str(&line(&text, "json")).unwrap();
    assert!(
        json["error"]
            .as_str()
            .is_some_and(|e| e.contains("step 10") && e.contains("seccomp=unconfined")),
        "{json}"
    );
    // bubblewrap sets no hostname without --hostname: both run.
    assert_eq!(line(&text, "brc"), "0", "{text}");
    assert_eq!(line(&text, "arc"), "0", "{text}");
}

/// A run's boundary, seen from inside, and what it leaves in the container.
const PROBES: &str = r#"
echo "@@who $(id -u)"
echo s > /tmp/container-secret
export CONTAINER_SECRET=xyz
airlock run --json -- /bin/sh -c '
for p in /tmp/container-secret /home /root /var/lib /run /etc/shadow /srv /opt; do
  [ -e "$p" ] && echo "@@seen $p"; done
echo "@@ifaces $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ")"
grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status | tr -d "\t" | tr "\n" " " | sed "s/^/@@status /"; echo
echo "@@pid1 $(cat /proc/1/comm)"
echo "@@env $(env | cut -d= -f1 | sort | tr "\n" " ")"
' >/tmp/report.json 2>/tmp/err; echo "@@rc $?"
cat /tmp/err
sed 's/\\n/\n/g' /tmp/report.json | grep -o '@@[^"]*'
echo "@@memory $(grep -o '"memory":{[^}]*}' /tmp/report.json)"
rm /tmp/report.json /tmp/err /tmp/container-secret
echo "@@left $(ls -A /tmp /dev/shm | tr "\n" " ") $(find /sys/fs/cgroup -name 'airlock-*' | tr "\n" " ")"
"#;

fn boundary_holds(text: &str, who: &str, memory: &str) {
    assert_eq!(line(text, "who"), who, "{text}");
    assert_eq!(line(text, "rc"), "0", "{text}");
    assert!(!text.contains("@@seen"), "{text}");
    assert_eq!(line(text, "ifaces"), "lo", "{text}");
    assert_eq!(
        line(text, "status"),
        "CapEff:0000000000000000 NoNewPrivs:1 Seccomp:2",
        "{text}"
    );
    assert_eq!(line(text, "pid1"), "airlock", "{text}");
    let env = line(text, "env");
    assert!(
        !env.contains("CONTAINER_SECRET") && !env.contains("HOSTNAME") && env.contains("PATH"),
        "{env}"
    );
    assert!(line(text, "memory").contains(memory), "{text}");
    let left = line(text, "left");
    assert_eq!(
        left.split_whitespace().collect::<Vec<_>>(),
        ["/dev/shm:", "/tmp:"],
        "{text}"
    );
}

#[test]
fn unmasked_and_unconfined_root_runs_inside_its_boundary() {
    let opts = [
        "--security-opt",
        "unmask=/proc/*",
        "--security-opt",
        "seccomp=unconfined",
    ];
    let Some(text) = container(&opts, PROBES) else {
        return;
    };
    // The container's cgroup v1 hierarchies are mounted read-only: rlimits.
    boundary_holds(&text, "0", "RLIMIT_DATA");
}

#[test]
fn unmasked_with_sys_admin_a_non_root_user_runs_inside_its_boundary() {
    let opts = [
        "--security-opt",
        "unmask=/proc/*",
        "--cap-add",
        "SYS_ADMIN",
        "--user",
        "1000:1000",
    ];
    let Some(text) = container(&opts, PROBES) else {
        return;
    };
    boundary_holds(&text, "1000", "RLIMIT_DATA");
}

/// A seccomp profile of the shape of Docker's default for a container without CAP_SYS_ADMIN,
/// as far as airlock's launch meets it: clone3 answers ENOSYS (so that a libc falls back to
/// clone), the namespace and mount calls EPERM.
const DOCKER_SHAPED: &str = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
  {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
  {"names": ["unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
             "mount_setattr", "fsopen", "sethostname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
]}"#;

#[test]
fn a_docker_shaped_profile_fails_closed_at_step_1_naming_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.json");
    std::fs::write(&profile, DOCKER_SHAPED).unwrap();
    let seccomp = format!("seccomp={}", profile.display());
    let opts = [
        "--security-opt",
        "unmask=/proc/*",
        "--security-opt",
        &seccomp,
    ];
    let Some(text) = container(&opts, FAILING) else {
        return;
    };
    assert_eq!(line(&text, "rc"), "125", "{text}");
    let err = line(&text, "err");
    assert!(
        err.contains("step 1 create namespaces: clone3(")
            && err.contains("ENOSYS")
            && err.contains("a seccomp filter airlock runs under refuses it")
            && err.contains("--security-opt seccomp=unconfined"),
        "{err}"
    );
    assert_eq!(line(&text, "jrc"), "125", "{text}");
    // bubblewrap (clone, not clone3) gets further and fails at its first mount call; airlock's
    // bwrap mode fails at clone3: both exit 1 before the command runs.
    assert_eq!(line(&text, "brc"), "1", "{text}");
    assert!(
        line(&text, "bwrap").contains("Operation not permitted"),
        "{text}"
    );
    assert_eq!(line(&text, "arc"), "1", "{text}");
    assert!(
        line(&text, "abwrap").contains("Creating new namespace failed"),
        "{text}"
    );
}

#[test]
fn privileged_root_gets_the_containers_own_cgroup_v1() {
    // --privileged mounts the hierarchies writable, each rooted at the container's cgroup,
    // which /proc/self/cgroup names from the host's root: airlock once took rlimits there.
    let script = format!(
        "{PROBES}\nairlock run --pids 8 -- sh -c 'i=0; while [ $i -lt 20 ]; do sleep 5 & \
         i=$((i+1)); done' 2>/tmp/e; echo \"@@pids $?\"; echo \"@@pidserr $(tr '\\n' ' ' </tmp/e)\"\n\
         echo \"@@cgleft $(find /sys/fs/cgroup -name 'airlock-*' | tr '\\n' ' ')\""
    );
    let Some(text) = container(&["--privileged"], &script) else {
        return;
    };
    boundary_holds(&text, "0", "\"mechanism\":\"cgroup v1\"");
    assert!(
        line(&text, "pidserr").contains("process limit (--pids)"),
        "{text}"
    );
    assert_eq!(line(&text, "cgleft"), "", "{text}");
}
