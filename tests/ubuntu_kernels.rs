//! The boundary on Ubuntu's kernels, in virtual machines (tests/common/vm.rs): Ubuntu 22.04's
//! generic 5.15 and Ubuntu 24.04's generic 6.8 (scripts/vm.sh fetches both), each booted once
//! with busybox and this airlock binary, as tests/older_kernel.rs boots Debian 12's 6.1, with
//! its guest setup and probes (tests/common/guest_probe.rs): the key claims hold as root and
//! as uid 65534. On 24.04, Ubuntu's AppArmor switch for unprivileged user namespaces is turned
//! on, then off again.

mod common;

use std::sync::OnceLock;

use common::guest_probe::{INSIDE, SETUP, assert_key_claims, probe};
use common::vm::{self, Entry, assert_json_setup_failed, assert_ran, assert_stopped, line};
use serde_json::Value;

/// `@@in WHO-NAME ...` (the probes) and `@@json WHO REPORT` per caller; where the AppArmor
/// switch exists, `@@apparmor NAME ...` (what the kernel has and does), and per run
/// `@@status NAME CODE`, `@@err NAME STDERR` (lines joined by `|`), `@@json NAME REPORT`, and
/// `@@ran NAME yes` only when the task ran (it prints `task-ran`).
const CASES: &str = r#"
echo "@@kernel release $(uname -r)"
ln -s airlock /usr/bin/bwrap
for who in root nobody; do
  as_$who "airlock run -- inside" 2>&1 | sed "s/^@@in /@@in $who-/"
  echo "@@json $who $(as_$who 'airlock run --json --input in.txt=/tmp/in.txt -- sh -c "tr a-z A-Z < in.txt > out.txt"')"
done
sysctl=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
if [ -e $sysctl ]; then
  mkdir -p /sys/kernel/security; mount -t securityfs none /sys/kernel/security
  echo "@@apparmor lsm $(cat /sys/kernel/security/lsm)"
  echo "@@apparmor boot $(cat $sysctl)"
  echo "@@apparmor profiles $(cat /sys/kernel/security/apparmor/profiles 2>&1 | wc -l)"
  echo 1 > $sysctl
  echo "@@apparmor unshare $(as_nobody 'unshare -U sh -c "grep -E ^CapEff /proc/self/status; echo deny > /proc/self/setgroups && echo setgroups-ok; echo 0 65534 1 > /proc/self/uid_map && echo map-ok"' 2>&1 | tr '\n' ';')"
  for who in nobody root; do
    try restrict_$who as_$who "airlock run -- echo task-ran"
    try restrict_json_$who as_$who "airlock run --json -- echo task-ran"
    try restrict_bwrap_$who as_$who "bwrap --ro-bind / / --unshare-user -- echo task-ran"
  done
  echo 0 > $sysctl
  for who in nobody root; do
    try open_$who as_$who "airlock run -- echo task-ran"
  done
  if aa_parser -K -a /usr/lib/aa/unprivileged_userns > /tmp/aaout 2>&1; then
    echo "@@apparmor loaded $(cat /sys/kernel/security/apparmor/profiles | tr '\n' ';')"
    echo 1 > $sysctl
    echo "@@apparmor unshare_policy $(as_nobody 'unshare -U sh -c "grep -E ^CapEff /proc/self/status; cat /proc/self/attr/current; echo deny > /proc/self/setgroups && echo setgroups-ok; echo 0 65534 1 > /proc/self/uid_map && echo map-ok"' 2>&1 | tr '\n' ';')"
    for who in nobody root; do
      try policy_$who as_$who "airlock run -- echo task-ran"
      try policy_json_$who as_$who "airlock run --json -- echo task-ran"
      try policy_bwrap_$who as_$who "bwrap --ro-bind / / --unshare-user -- echo task-ran"
    done
    echo 0 > $sysctl
  else
    echo "@@apparmor loaded failed $(tr '\n' ';' < /tmp/aaout)"
  fi
fi
"#;

/// A stand-in for the profile Ubuntu 24.04's AppArmor policy loads under that name: with it
/// loaded, the kernel lets an unprivileged caller make its user namespace, confined by the
/// profile, which denies every capability (written for Debian 12's apparmor_parser, 3.0).
const PROFILE: &str = "profile unprivileged_userns {
  file,
  network,
  signal,
  ptrace,
  unix,
  mount,
  umount,
  pivot_root,
  audit deny capability,
}
";

/// apparmor_parser, through the host's loader and libc (it needs no other library).
const AA: &str = "#!/bin/sh
exec /usr/lib/aa/ld-linux-x86-64.so.2 --library-path /usr/lib/aa /usr/lib/aa/apparmor_parser \"$@\"
";

fn boot(kernel: &str) -> Result<String, String> {
    let probe = probe()?;
    let ld = std::fs::read("/lib64/ld-linux-x86-64.so.2").unwrap();
    let libc = std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
    let parser = std::fs::read(vm::part("apparmor_parser")?).unwrap();
    vm::boot_kernel(
        kernel,
        &format!("{SETUP}{CASES}"),
        &[
            ("usr/bin/inside", Entry::File(0o755, INSIDE.as_bytes())),
            ("usr/bin/kernel_probe", Entry::File(0o755, &probe)),
            ("usr/lib", Entry::Dir),
            ("usr/lib/aa", Entry::Dir),
            ("usr/lib/aa/ld-linux-x86-64.so.2", Entry::File(0o755, &ld)),
            ("usr/lib/aa/libc.so.6", Entry::File(0o755, &libc)),
            ("usr/lib/aa/apparmor_parser", Entry::File(0o755, &parser)),
            (
                "usr/lib/aa/unprivileged_userns",
                Entry::File(0o644, PROFILE.as_bytes()),
            ),
            ("usr/bin/aa_parser", Entry::File(0o755, AA.as_bytes())),
        ],
    )
}

fn jammy() -> Option<&'static str> {
    static BOOT: OnceLock<Result<String, String>> = OnceLock::new();
    vm::console(BOOT.get_or_init(|| boot("ubuntu2204")))
}

fn noble() -> Option<&'static str> {
    static BOOT: OnceLock<Result<String, String>> = OnceLock::new();
    vm::console(BOOT.get_or_init(|| boot("ubuntu2404")))
}

/// airlock run works, as root and as uid 65534, and the key claims hold; an input goes in and a
/// result comes back.
fn assert_the_boundary_holds(text: &str, release: &str) {
    let k = line(text, "kernel", "release");
    assert!(
        k.starts_with(release) && k.ends_with("-generic"),
        "the guest's kernel: {k}"
    );
    // The controls the network claims rest on: the guest reaches its own server and socket.
    assert_eq!(line(text, "guest", "tcp"), "tcp ok");
    assert_eq!(line(text, "guest", "hostabs"), "connect ok");
    for who in ["root", "nobody"] {
        assert_key_claims(text, who);
        let r: Value = serde_json::from_str(&line(text, "json", who)).unwrap();
        assert_eq!(r["exit_code"], 0, "{who}: {r}");
        assert_eq!(r["files"]["out.txt"], "INPUT-DATA\n", "{who}: {r}");
    }
}

/// airlock's hint where Ubuntu's AppArmor switch restricts unprivileged user namespaces.
const APPARMOR_HINT: &str = "hint: AppArmor restricts unprivileged user namespaces \
                             (kernel.apparmor_restrict_unprivileged_userns=1)";

#[test]
fn the_boundary_holds_on_ubuntu_22_04s_kernel_5_15() {
    let Some(text) = jammy() else { return };
    assert_the_boundary_holds(text, "5.15.");
    // Ubuntu 22.04's kernel has no AppArmor switch for user namespaces.
    assert!(!text.contains("@@apparmor"), "{text}");
}

#[test]
fn the_boundary_holds_on_ubuntu_24_04s_kernel_6_8() {
    let Some(text) = noble() else { return };
    assert_the_boundary_holds(text, "6.8.");
}

/// Ubuntu 24.04's `kernel.apparmor_restrict_unprivileged_userns=1` (its userland sets it; the
/// kernel boots with 0), with AppArmor on and no policy loaded: an unprivileged caller's new
/// user namespace is refused outright (EACCES; with Ubuntu's policy loaded, its
/// `unprivileged_userns` profile would take the namespace's capabilities instead). airlock
/// stops at step 1 naming the switch, in JSON and bwrap mode too; root is not restricted; with
/// the switch at 0 the same line runs.
#[test]
fn apparmors_userns_restriction_stops_an_unprivileged_caller_naming_it() {
    let Some(text) = noble() else { return };
    assert!(
        line(text, "apparmor", "lsm")
            .split(',')
            .any(|l| l == "apparmor"),
        "AppArmor is not on"
    );
    assert_eq!(line(text, "apparmor", "boot"), "0");
    assert_eq!(
        line(text, "apparmor", "profiles"),
        "0",
        "a policy is loaded"
    );
    // The control: the kernel itself refuses busybox's unshare.
    assert_eq!(
        line(text, "apparmor", "unshare"),
        "unshare: unshare(0x10000000): Permission denied;"
    );
    assert_stopped(
        text,
        "restrict_nobody",
        "125",
        "airlock: setup failed: step 1 create namespaces: clone3(",
        &["EACCES", APPARMOR_HINT],
    );
    assert_json_setup_failed(text, "restrict_json_nobody", &[APPARMOR_HINT]);
    assert_stopped(
        text,
        "restrict_bwrap_nobody",
        "1",
        "bwrap: Creating new namespace failed: Permission denied",
        &[APPARMOR_HINT],
    );
    assert_ran(
        text,
        &[
            "restrict_root",
            "restrict_bwrap_root",
            "open_nobody",
            "open_root",
        ],
    );
    let json: Value = serde_json::from_str(&line(text, "json", "restrict_json_root")).unwrap();
    assert_eq!(json["stdout"], "task-ran\n", "{json}");
}

/// The same switch with the stand-in for Ubuntu's `unprivileged_userns` profile loaded, as on
/// Ubuntu 24.04 as shipped: the unprivileged caller's user namespace is made, but confined and
/// without capabilities its id maps cannot be written (the kernel refuses even opening
/// `setgroups`: EACCES). airlock stops at step 2 with the same hint, in JSON mode too; bwrap
/// mode keeps bubblewrap's words ("setting up uid map: Permission denied", which clients match)
/// and adds the hint. Root is not restricted.
#[test]
fn with_ubuntus_unprivileged_userns_profile_the_maps_fail_naming_the_switch() {
    let Some(text) = noble() else { return };
    assert_eq!(
        line(text, "apparmor", "loaded"),
        "unprivileged_userns (enforce);"
    );
    // The control: busybox's unshare gets the confined namespace, and no map.
    let unshare = line(text, "apparmor", "unshare_policy");
    assert!(
        unshare.starts_with("CapEff:")
            && unshare.contains("0000000000000000;unprivileged_userns (enforce);")
            && !unshare.contains("map-ok"),
        "{unshare}"
    );
    assert_stopped(
        text,
        "policy_nobody",
        "125",
        "airlock: setup failed: step 2 write id maps: ",
        &[APPARMOR_HINT],
    );
    assert_json_setup_failed(text, "policy_json_nobody", &[APPARMOR_HINT]);
    assert_stopped(
        text,
        "policy_bwrap_nobody",
        "1",
        "bwrap: setting up uid map: Permission denied; ",
        &[APPARMOR_HINT],
    );
    assert_ran(text, &["policy_root", "policy_bwrap_root"]);
}
