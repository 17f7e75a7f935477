//! A kernel older than airlock supports, in a virtual machine: Debian 11's own 5.10
//! (scripts/vm.sh fetches it), which lacks `mount_setattr` (Linux 5.12). airlock must fail
//! closed there before the task runs (exit 125; bwrap mode 1, as bubblewrap), naming the step,
//! the call and the kernel it needs, and leave no process, mount or cgroup behind, as root and
//! as uid 65534, in its own mode, JSON mode and bwrap mode. The guest boots once
//! (tests/common/vm.rs); each test reads its lines.

mod common;

use std::sync::OnceLock;

use common::guest_probe::probe;
use common::vm::{self, Entry, assert_json_setup_failed, assert_stopped, line};

/// `@@status NAME CODE`, `@@err NAME STDERR` (lines joined by `|`), `@@json NAME REPORT`,
/// `@@ran NAME yes` only when the task ran (it prints `task-ran`), `@@left NAME ...` what the
/// run left.
const CASES: &str = r#"
echo "@@kernel release $(uname -r)"
ln -s airlock /usr/bin/bwrap
# cgroup v2 with the memory and pids controllers for children, so that a root run with limits
# makes a cgroup of its own, which must go with it.
mkdir -p /sys/fs/cgroup
mount -t cgroup2 none /sys/fs/cgroup
echo "+memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
echo "@@guest controllers $(cat /sys/fs/cgroup/cgroup.subtree_control)"
echo "@@guest plan $(airlock explain --memory 64m -- true | grep -E '^  memory: ')"
mounts() { cat /proc/mounts /proc/self/mountinfo | md5sum | cut -d' ' -f1; }
mntns() { for p in /proc/[0-9]*; do readlink $p/ns/mnt; done 2>/dev/null | sort -u | wc -l; }
cgroups() { find /sys/fs/cgroup -mindepth 1 -type d | tr '\n' ' '; }
# The prelude's try, and then what the run left: `@@left NAME ...`.
try_left() {
  m0=$(mounts); n0=$(mntns); c0=$(cgroups)
  try "$@"
  echo "@@left $name procs=$(ps | grep -cE '[a]irlock|[b]wrap') mounts_same=$([ "$m0" = "$(mounts)" ] && echo yes || echo no) mntns_same=$([ "$n0" = "$(mntns)" ] && echo yes || echo no) cgroups=$(cgroups)"
}
for who in root nobody; do
  if [ $who = nobody ]; then as=as_nobody; else as="sh -c"; fi
  try_left run_$who $as "airlock run -- echo task-ran"
  try_left limits_$who $as "airlock run --memory 64m --pids 50 -- echo task-ran"
  try_left json_$who $as "airlock run --json -- echo task-ran"
  try_left bwrap_$who $as "bwrap --ro-bind / / --unshare-all --die-with-parent -- echo task-ran"
  try_left bwrap_plain_$who $as "bwrap --ro-bind / / -- echo task-ran"
  # The launcher held for 300 ms as it starts its network namespace's helper: the init has
  # failed and ended before the launcher's handovers (the id maps, the namespace).
  try_left late_$who $as "kernel_probe late_helper 300 -- airlock run --memory 64m --pids 50 -- echo task-ran"
  try_left bwrap_late_$who $as "kernel_probe late_helper 300 -- bwrap --ro-bind / / --unshare-all -- echo task-ran"
done
"#;

fn console() -> Option<&'static str> {
    static BOOT: OnceLock<Result<String, String>> = OnceLock::new();
    vm::console(BOOT.get_or_init(|| {
        let probe = probe()?;
        vm::boot_kernel(
            "debian11",
            CASES,
            &[("usr/bin/kernel_probe", Entry::File(0o755, &probe))],
        )
    }))
}

/// The run stopped with `code` and these words before its task ran, and left nothing.
fn assert_failed_closed(text: &str, name: &str, code: &str, words: &[&str]) {
    assert_stopped(text, name, code, "", words);
    assert_eq!(
        line(text, "left", name),
        "procs=0 mounts_same=yes mntns_same=yes cgroups=",
        "{name}: what the run left"
    );
}

#[test]
fn the_guest_runs_debian_11s_kernel_5_10() {
    let Some(text) = console() else { return };
    let k = line(text, "kernel", "release");
    assert!(k.starts_with("5.10."), "the guest's kernel: {k}");
    // The control for the cgroup case: a root run with limits plans a cgroup v2 of its own.
    assert_eq!(line(text, "guest", "controllers"), "memory pids");
    assert_eq!(line(text, "guest", "plan"), "memory: 67108864 (cgroup v2)");
}

/// mount_setattr (5.12) answers ENOSYS at step 5, the first call 5.10 lacks: the message
/// names the step, the call and the kernel airlock needs, for every caller and with limits (a
/// root caller's cgroup, made at step 1, goes with the run), and also when the init has ended
/// before the launcher hands it the network namespace (`late_`: the report it left is read).
#[test]
fn airlock_run_fails_closed_naming_the_step_the_call_and_the_kernel_it_needs() {
    let Some(text) = console() else { return };
    let kernel = line(text, "kernel", "release");
    let this = format!("this kernel is {kernel}");
    let words = [
        "airlock: setup failed: step 5 copy host paths: mount_setattr(",
        "ENOSYS",
        "hint: airlock needs Linux 5.12 or newer",
        &this,
    ];
    for who in ["root", "nobody"] {
        assert_failed_closed(text, &format!("run_{who}"), "125", &words);
        assert_failed_closed(text, &format!("limits_{who}"), "125", &words);
        assert_failed_closed(text, &format!("late_{who}"), "125", &words);
        let name = format!("json_{who}");
        assert_failed_closed(text, &name, "125", &[]);
        let json = assert_json_setup_failed(text, &name, &["needs Linux 5.12 or newer", &this]);
        assert!(
            json["error"]
                .as_str()
                .unwrap()
                .starts_with("step 5 copy host paths: mount_setattr("),
            "{json}"
        );
    }
}

/// bubblewrap itself runs on 5.10; airlock's bwrap builds the same boundary as airlock run and
/// so needs 5.12 too: it fails before the task (bubblewrap's status 1), saying why.
#[test]
fn bwrap_mode_fails_closed_with_the_same_hint() {
    let Some(text) = console() else { return };
    let kernel = line(text, "kernel", "release");
    let this = format!("this kernel is {kernel}");
    let words = [
        "bwrap: mount_setattr(",
        "Function not implemented; hint: airlock needs Linux 5.12 or newer",
        &this,
    ];
    for who in ["root", "nobody"] {
        assert_failed_closed(text, &format!("bwrap_{who}"), "1", &words);
        assert_failed_closed(text, &format!("bwrap_plain_{who}"), "1", &words);
        assert_failed_closed(text, &format!("bwrap_late_{who}"), "1", &words);
    }
}
