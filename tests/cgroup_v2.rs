//! Limits under cgroup v2, in a virtual machine. Most hosts now give the `memory` and `pids`
//! controllers to cgroup v2; the dev VM binds them to cgroup v1 and its v2 hierarchy has none,
//! so this path is shown in a guest: QEMU (its CPU emulator, no /dev/kvm) boots Debian 12's
//! kernel with busybox and this airlock binary as its whole userland, mounts cgroup v2 with
//! both controllers, and runs airlock in the places a caller can be:
//!
//! - root in the root cgroup: the run's cgroup goes below it;
//! - root, then uid 65534, in a leaf of a subtree delegated to it (the parent enables both
//!   controllers and is the caller's to write): the run's cgroup goes beside the leaf, since a
//!   v2 cgroup that holds processes cannot enable controllers for its children;
//! - uid 65534 under a parent it may not write (neither a directory there nor its
//!   `cgroup.procs`, or only one of the two), and root under one that enables `memory` but not
//!   `pids`, or under one delegated to another user (uid 65534): rlimits, as the README says;
//! - a caller in a cgroup namespace: root in the root cgroup's own; root and uid 65534 in a
//!   container's (its cgroup2 mounted inside, its processes in a leaf), where the run's cgroup
//!   goes beside that leaf; root in one made in a leaf under the host's mount, whose paths
//!   start above the namespace's root: rlimits;
//! - root in a leaf whose parent's `memory.max` and `pids.max` are below what the run asks:
//!   the report's `applied` (and `airlock explain`'s) is the parent's;
//! - root in a leaf whose own `pids.max` is below the run's: rlimits, the task kept in the
//!   leaf; above it: the run's cgroup beside the leaf;
//! - an OOM in the run under a parent that kills as a group: one process of the task killed,
//!   the caller untouched; a parent at its `cgroup.max.descendants`: the run fails closed;
//! - 20 concurrent runs in one parent beside a longer one: each its own cgroup, the longer
//!   one's never swept, nothing left;
//! - a launcher SIGKILLed mid-run: its cgroup is removed by the next run.
//!
//! cgroup2 is mounted as systemd mounts it (`nsdelegate,memory_recursiveprot`).
//!
//! The guest (tests/common/vm.rs) is booted once, runs every case and powers off; each test
//! reads its lines of the guest's console.

mod common;

use std::path::Path;
use std::sync::OnceLock;

use common::vm::{self, Entry, line};
use serde_json::Value;

/// A task that starts 60 processes (more than `--pids 20` allows) and exits.
const BOMB: &str = "#!/bin/sh\ni=0\nwhile [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); done\n";
/// A task whose one string doubles until its memory runs out.
const HOG: &str = "#!/bin/sh\nx=aaaaaaaa\nwhile :; do x=$x$x; done\n";

/// The cases. `@@report NAME JSON` is airlock's report of a run; `@@left NAME PATHS` the
/// `airlock-*` cgroups in the guest after it; `@@where NAME PATH` where a running task's
/// cgroup was made.
const CASES: &str = r#"
CG=/sys/fs/cgroup
# As systemd mounts it: a cgroup namespace is a delegation boundary (nsdelegate).
mount -t cgroup2 -o nsdelegate,memory_recursiveprot none $CG
# util-linux's unshare, as unshare-ul (-C: a cgroup namespace; busybox's has none), and its
# libraries.
ln -s usr/lib64 /lib64
ln -s usr/lib /lib
echo "+memory +pids" > $CG/cgroup.subtree_control
left() { echo "@@left $1 $(find $CG -name 'airlock-*' -type d | tr '\n' ' ')"; }
report() { name=$1; shift; echo "@@at $(cut -d" " -f1 /proc/uptime)"; echo "@@report $name $("$@")"; left $name; }
# The run's cgroup while its task sleeps; then its launcher is SIGKILLed, and the next run
# (as $1) removes what it left.
kill_and_sweep() {
  name=$1; shift
  "$@" "airlock run -- sleep 60" &
  for i in $(seq 200); do
    where=$(find $CG -name 'airlock-*' -type d)
    [ -n "$where" ] && break
    sleep 0.1
  done
  echo "@@where $name $where"
  launcher=$(pidof airlock | tr ' ' '\n' | sort -n | head -n 1)
  kill -9 $launcher
  wait
  left $name-killed
  "$@" "airlock run -- true"
  left $name
}

report root_cgroup_pids airlock run --json --pids 20 -- bomb

mkdir -p $CG/a/leaf
echo "+memory +pids" > $CG/a/cgroup.subtree_control
echo $$ > $CG/a/leaf/cgroup.procs
report root_leaf_pids airlock run --json --pids 20 -- bomb
report root_leaf_memory airlock run --json --memory 32m -- hog
report root_leaf_cgroupns airlock run --json -- cat /proc/self/cgroup
kill_and_sweep root_leaf as_root

# A cgroup namespace made in the leaf (unshare -C) under the host's mount: the caller's own
# cgroup reads "/", and the mount starts above the namespace's root.
report cgroupns_host_mount unshare-ul -C airlock run --json --pids 20 -- bomb
mount -o remount none $CG
report cgroupns_host_mount_no_nsdelegate unshare-ul -C airlock run --json --pids 20 -- bomb
mount -o remount,nsdelegate,memory_recursiveprot none $CG
# The root cgroup's own namespace: the host's mount starts at its root.
echo $$ > $CG/cgroup.procs
report cgroupns_at_root unshare-ul -C airlock run --json --pids 20 -- bomb
# A container: a cgroup namespace rooted at its cgroup, cgroup2 mounted inside it, its
# processes moved to a leaf, the controllers enabled for its children; airlock as root, then
# as uid 65534 once the container's cgroups are that user's.
mkdir $CG/box
sh -c 'echo $$ > /sys/fs/cgroup/box/cgroup.procs && exec "$@"' sh unshare-ul -Cm sh -c '
    umount /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup || exit
    mkdir /sys/fs/cgroup/init && echo $$ > /sys/fs/cgroup/init/cgroup.procs || exit
    echo "+memory +pids" > /sys/fs/cgroup/cgroup.subtree_control || exit
    echo "@@report container_root $(airlock run --json --pids 20 -- bomb)"
    chown 65534 /sys/fs/cgroup /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/init/cgroup.procs
    echo "@@report container_user $(su -s /bin/sh nobody -c "airlock run --json --pids 20 -- bomb")"'
left container_root
left container_user
echo $$ > $CG/a/leaf/cgroup.procs

# The leaf's parent bounds the run lower than it asks: 48 MiB of memory, 10 processes.
echo 48M > $CG/a/memory.max
echo 10 > $CG/a/pids.max
report parent_bound_pids airlock run --json --memory 1g --pids 20 -- bomb
report parent_bound_memory airlock run --json --memory 1g --pids 20 -- hog
echo "@@explain parent_bound $(airlock explain --memory 1g --pids 20 -- true | grep -E '^  (memory|pids):' | tr '\n' ' ')"
echo max > $CG/a/memory.max
echo max > $CG/a/pids.max
# The caller's own leaf bounds itself tighter than the run asks (a scope's TasksMax=20 under
# --pids 100): a cgroup beside the leaf would escape that, so the run takes rlimits and its task
# stays in the leaf, whose limit it hits.
echo 20 > $CG/a/leaf/pids.max
report leaf_bound_pids airlock run --json --pids 100 -- bomb
echo "@@leaf leaf_bound_pids $(grep '^max ' $CG/a/leaf/pids.events)"
# A leaf bound looser than the run's (systemd's default TasksMax= of a scope): beside it.
echo 200 > $CG/a/leaf/pids.max
report leaf_looser_pids airlock run --json --pids 20 -- bomb
echo max > $CG/a/leaf/pids.max
# A limit the run's cgroup does not set: the leaf's huge pages (systemd has no setting for it,
# a delegated manager may write it). Unset, the run goes beside the leaf (the control); bound,
# it would escape it there, so it takes rlimits.
echo "+hugetlb" > $CG/cgroup.subtree_control
echo "+hugetlb" > $CG/a/cgroup.subtree_control
echo "@@leaf controllers $(cat $CG/a/leaf/cgroup.controllers)"
report leaf_hugetlb_unset airlock run --json --pids 20 -- bomb
echo 0 > $CG/a/leaf/hugetlb.2MB.max
echo "@@leaf hugetlb $(cat $CG/a/leaf/hugetlb.2MB.max)"
report leaf_hugetlb_bound airlock run --json -- true
echo max > $CG/a/leaf/hugetlb.2MB.max
echo "-hugetlb" > $CG/a/cgroup.subtree_control
# The leaf's CPU and I/O shares (a scope's CPUWeight= and IOWeight=): a run's cgroup beside it
# takes them, not a new cgroup's defaults (100).
echo "+cpu +io" > $CG/cgroup.subtree_control
echo "+cpu +io" > $CG/a/cgroup.subtree_control
echo 20 > $CG/a/leaf/cpu.weight
echo "default 30" > $CG/a/leaf/io.weight
echo "@@shares leaf $(cat $CG/a/leaf/cpu.weight) $(head -n1 $CG/a/leaf/io.weight)"
airlock run --json -- sleep 600 > /tmp/shares.json &
sharer=$!
for i in $(seq 200); do
  where=$(find $CG/a -maxdepth 1 -name 'airlock-*' -type d)
  [ -n "$where" ] && break
  sleep 0.1
done
echo "@@shares run $(cat $where/cpu.weight) $(head -n1 $where/io.weight)"
kill $sharer
wait $sharer
echo "@@report shares $(cat /tmp/shares.json)"
echo 100 > $CG/a/leaf/cpu.weight
echo "default 100" > $CG/a/leaf/io.weight
echo "-cpu -io" > $CG/a/cgroup.subtree_control
left shares
# A limit that is not whole pages: memory.max keeps whole pages, and both say so.
report pages airlock run --json --memory 20000001 -- true
echo "@@explain pages $(airlock explain --memory 20000001 -- true | grep -E '^  memory:')"

# An OOM in the run, under a parent that kills as a group (systemd's OOMPolicy=kill): the
# largest process is killed, the task's shell goes on, and the caller (in the parent) lives.
echo 1 > $CG/a/memory.oom.group
report child_oom airlock run --json --memory 32m -- sh -c 'hog; echo $?'
echo "@@alive child_oom $$"
echo 0 > $CG/a/memory.oom.group
# A parent that takes no more cgroups: the run fails closed, naming the step, call and path.
echo 1 > $CG/a/cgroup.max.descendants
report max_descendants airlock run --json -- true
echo max > $CG/a/cgroup.max.descendants
# 20 runs at once beside a longer one (a live neighbour, never swept), each in a cgroup of its
# own; nothing is left once all have ended (the neighbour ends by SIGTERM once they have).
# Beside them, two empty cgroups named as a launcher names its own: one after this shell,
# alive (as a launcher's before its init joins: the sweep must leave it), one after a
# process gone (this pid, another start time: the sweep must remove it).
start=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20)
pidns=$(readlink /proc/$$/ns/pid | tr -dc 0-9)
fake_live=$CG/a/airlock-$$-$start-$pidns-9
fake_gone=$CG/a/airlock-$$-1-$pidns-9
mkdir $fake_live $fake_gone
echo "@@fake live $fake_live"
airlock run -- sleep 600 &
neighbour=$!
for i in $(seq 200); do
  where=$(find $CG -name 'airlock-*' -type d | grep -v -- '-9$')
  [ -n "$where" ] && break
  sleep 0.1
done
echo "@@neighbour before $where"
runs=
for i in $(seq 20); do
  { airlock run -- sh -c 'cat /proc/self/cgroup >/dev/null' || echo "@@failed concurrent $i"; } &
  runs="$runs $!"
done
wait $runs
echo "@@neighbour during $(find $CG -name 'airlock-*' -type d | grep -v -- '-9$')"
echo "@@fake after $(find $CG -name 'airlock-*-9' -type d | tr '\n' ' ')"
kill $neighbour
wait
rmdir $fake_live $fake_gone 2>/dev/null
left concurrent

# A parent delegated to another user (uid 65534), which root may write: that user could
# replace the run's cgroup before its limits are written, or move its processes out.
mkdir -p $CG/f/leaf
echo "+memory +pids" > $CG/f/cgroup.subtree_control
chown 65534 $CG/f $CG/f/cgroup.procs
echo $$ > $CG/f/leaf/cgroup.procs
report root_other_users_parent airlock run --json --pids 20 -- bomb

mkdir -p $CG/d
chown 65534:65534 $CG/d $CG/d/cgroup.procs $CG/d/cgroup.subtree_control $CG/d/cgroup.threads
echo "+memory +pids" > $CG/d/cgroup.subtree_control
mkdir -p $CG/d/leaf
chown 65534:65534 $CG/d/leaf $CG/d/leaf/cgroup.procs
echo $$ > $CG/d/leaf/cgroup.procs
report user_leaf_pids as_nobody airlock run --json --pids 20 -- bomb
report user_leaf_memory as_nobody airlock run --json --memory 32m -- hog
kill_and_sweep user_leaf as_nobody

mkdir -p $CG/b/leaf
echo "+memory +pids" > $CG/b/cgroup.subtree_control
echo $$ > $CG/b/leaf/cgroup.procs
report user_not_delegated as_nobody airlock run --json --pids 20 -- bomb
# Half delegated: uid 65534 may write the parent's cgroup.procs but not make a directory
# there, then the other way round.
chown 65534 $CG/b/cgroup.procs
report user_procs_only as_nobody airlock run --json --pids 20 -- bomb
chown 0 $CG/b/cgroup.procs
chown 65534 $CG/b
report user_dir_only as_nobody airlock run --json --pids 20 -- bomb
chown 0 $CG/b

mkdir -p $CG/c/leaf
echo "+memory" > $CG/c/cgroup.subtree_control
echo $$ > $CG/c/leaf/cgroup.procs
report root_no_pids_controller airlock run --json --pids 20 -- bomb
"#;

const LD: &str = "/lib64/ld-linux-x86-64.so.2";
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// A file of the host's, for the guest.
fn host(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The guest's console, once it has run every case (None: the VM's parts are missing).
fn console() -> Option<&'static str> {
    static BOOT: OnceLock<Result<String, String>> = OnceLock::new();
    vm::console(BOOT.get_or_init(|| {
        vm::boot(
            CASES,
            &[
                ("usr/bin/bomb", Entry::File(0o755, BOMB.as_bytes())),
                ("usr/bin/hog", Entry::File(0o755, HOG.as_bytes())),
                (
                    "usr/bin/unshare-ul",
                    Entry::File(0o755, &host("/usr/bin/unshare")),
                ),
                ("usr/lib64", Entry::Dir),
                (
                    "usr/lib64/ld-linux-x86-64.so.2",
                    Entry::File(0o755, &host(LD)),
                ),
                ("usr/lib", Entry::Dir),
                ("usr/lib/x86_64-linux-gnu", Entry::Dir),
                (
                    "usr/lib/x86_64-linux-gnu/libc.so.6",
                    Entry::File(0o755, &host(LIBC)),
                ),
            ],
        )
    }))
}

fn report(text: &str, name: &str) -> Value {
    let json = line(text, "report", name);
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}: {json:?}"))
}

/// The mechanism the report names for memory and for pids, and the limit hit.
fn limits(r: &Value) -> (String, String, Value) {
    let mech = |k: &str| {
        r["limits"][k]["mechanism"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    (mech("memory"), mech("pids"), r["limit_hit"].clone())
}

fn assert_nothing_left(text: &str, name: &str) {
    let left = line(text, "left", name);
    assert!(left.is_empty(), "{name}: cgroups left in the guest: {left}");
}

fn assert_v2_hit(text: &str, name: &str, hit: &str) {
    let r = report(text, name);
    let v2 = "cgroup v2".to_string();
    assert_eq!(
        limits(&r),
        (v2.clone(), v2, Value::from(hit)),
        "{name}: {r}"
    );
    assert_nothing_left(text, name);
}

#[test]
fn root_in_the_root_cgroup_limits_by_cgroup_v2() {
    let Some(text) = console() else { return };
    assert_v2_hit(text, "root_cgroup_pids", "pids");
}

#[test]
fn root_in_a_leaf_limits_by_a_cgroup_v2_beside_it() {
    let Some(text) = console() else { return };
    assert_v2_hit(text, "root_leaf_pids", "pids");
    assert_v2_hit(text, "root_leaf_memory", "memory");
    let r = report(text, "root_leaf_cgroupns");
    assert_eq!(
        r["stdout"], "0::/\n",
        "the task's cgroup is its namespace's root: {r}"
    );
    let at = line(text, "where", "root_leaf");
    assert!(
        Path::new(&at).parent() == Some(Path::new("/sys/fs/cgroup/a")),
        "the run's cgroup belongs in the leaf's parent, found at {at:?}"
    );
}

#[test]
fn an_unprivileged_caller_in_a_delegated_leaf_limits_by_cgroup_v2() {
    let Some(text) = console() else { return };
    assert_v2_hit(text, "user_leaf_pids", "pids");
    assert_v2_hit(text, "user_leaf_memory", "memory");
    let at = line(text, "where", "user_leaf");
    assert!(
        Path::new(&at).parent() == Some(Path::new("/sys/fs/cgroup/d")),
        "the run's cgroup belongs in the delegated parent, found at {at:?}"
    );
}

#[test]
fn a_parent_not_delegated_or_without_pids_leaves_rlimits() {
    let Some(text) = console() else { return };
    for name in [
        "user_not_delegated",
        "user_procs_only",
        "user_dir_only",
        "root_no_pids_controller",
        "root_other_users_parent",
    ] {
        let r = report(text, name);
        let (memory, pids, hit) = limits(&r);
        assert!(
            memory.starts_with("rlimit") && pids.starts_with("rlimit") && hit.is_null(),
            "{name}: {r}"
        );
        assert_nothing_left(text, name);
    }
}

#[test]
fn a_sigkilled_launchers_cgroup_v2_is_removed_by_the_next_run() {
    let Some(text) = console() else { return };
    for name in ["root_leaf", "user_leaf"] {
        let at = line(text, "where", name);
        assert!(!at.is_empty(), "{name}: no cgroup was made for the run");
        let killed = line(text, "left", &format!("{name}-killed"));
        assert_eq!(
            killed, at,
            "{name}: the killed launcher's cgroup, before the next run"
        );
        assert_nothing_left(text, name);
    }
}

/// A caller in a cgroup namespace (a container's) names its cgroup from the namespace's root:
/// under a cgroup2 mounted inside it, as a container mounts it, the run's cgroup v2 goes
/// beside the container's leaf as on a host; under the host's mount, which starts above that
/// root, the path names another cgroup, and the run takes rlimits rather than a cgroup
/// outside its namespace (with nsdelegate, clone3 refused that one: exit 125).
#[test]
fn a_caller_in_a_cgroup_namespace_finds_its_own_cgroup() {
    let Some(text) = console() else { return };
    for name in ["cgroupns_host_mount", "cgroupns_host_mount_no_nsdelegate"] {
        let r = report(text, name);
        let (memory, pids, _) = limits(&r);
        assert!(
            r["exit_code"] != 125 && memory.starts_with("rlimit") && pids.starts_with("rlimit"),
            "{name}: {r}"
        );
        assert_nothing_left(text, name);
    }
    for name in ["cgroupns_at_root", "container_root", "container_user"] {
        assert_v2_hit(text, name, "pids");
    }
}

/// Under a parent whose `memory.max` and `pids.max` are below what the run asks (a container's
/// or a slice's limits), the report's `applied` is that bound, and the limit it hits is named.
#[test]
fn the_limits_a_parent_cgroup_v2_sets_lower_are_the_applied_ones() {
    let Some(text) = console() else { return };
    for (name, hit) in [
        ("parent_bound_pids", "pids"),
        ("parent_bound_memory", "memory"),
    ] {
        assert_v2_hit(text, name, hit);
        let r = report(text, name);
        let l = &r["limits"];
        assert_eq!(
            (&l["memory"]["requested"], &l["pids"]["requested"]),
            (&Value::from(1u64 << 30), &Value::from(20)),
            "{name}: {r}"
        );
        assert_eq!(
            (&l["memory"]["applied"], &l["pids"]["applied"]),
            (&Value::from(48u64 << 20), &Value::from(10)),
            "{name}: the parent's bounds: {r}"
        );
    }
    let r = report(text, "pages");
    assert_eq!(
        r["limits"]["memory"]["applied"], 19996672,
        "20000001 bytes are 4882 whole pages: {r}"
    );
    assert_eq!(
        line(text, "explain", "pages"),
        "memory: 19996672 (cgroup v2)"
    );
    let explained = line(text, "explain", "parent_bound");
    assert_eq!(
        explained, "memory: 50331648 (cgroup v2)   pids: 10 (cgroup v2)",
        "airlock explain shows the parent's bounds"
    );
}

/// A caller whose own cgroup bounds it tighter than the run asks (`systemd-run --scope -p
/// TasksMax=20 airlock run --pids 100`) keeps its task in it: a run's cgroup beside the leaf
/// would be bounded by none of the leaf's limits, so the run takes rlimits, and the task runs
/// into the leaf's `pids.max`. Control: a leaf bound looser than the run's leaves it beside. So
/// for a limit the run's cgroup sets none of: the leaf's `hugetlb.2MB.max` at 0 (rlimits), and
/// unset (beside).
#[test]
fn a_caller_whose_own_cgroup_v2_bounds_it_tighter_keeps_the_task_in_it() {
    let Some(text) = console() else { return };
    let r = report(text, "leaf_bound_pids");
    let (memory, pids, _) = limits(&r);
    assert!(
        memory.starts_with("rlimit") && pids.starts_with("rlimit"),
        "leaf_bound_pids: {r}"
    );
    let hits = line(text, "leaf", "leaf_bound_pids");
    assert!(
        hits.strip_prefix("max ")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0),
        "the task's forks ran into the leaf's pids.max 20: pids.events reads {hits:?}\n{r}"
    );
    assert_nothing_left(text, "leaf_bound_pids");
    assert_v2_hit(text, "leaf_looser_pids", "pids");
    // A leaf's huge pages bound, which the run's cgroup does not set: rlimits; unset, beside.
    let ctrls = line(text, "leaf", "controllers");
    assert!(ctrls.split(' ').any(|c| c == "hugetlb"), "{ctrls}");
    assert_v2_hit(text, "leaf_hugetlb_unset", "pids");
    assert_eq!(line(text, "leaf", "hugetlb"), "0");
    let r = report(text, "leaf_hugetlb_bound");
    let (memory, pids, _) = limits(&r);
    assert!(
        memory.starts_with("rlimit") && pids.starts_with("rlimit") && r["exit_code"] == 0,
        "leaf_hugetlb_bound: {r}"
    );
    assert_nothing_left(text, "leaf_hugetlb_bound");
}

/// A run's cgroup made beside the caller's leaf takes the leaf's CPU and I/O shares (a
/// scope's `CPUWeight=20`, `IOWeight=30`), not a new cgroup's defaults of 100: a task
/// launched from a low-priority scope stays low-priority. It still runs under cgroup v2.
#[test]
fn a_run_beside_the_callers_leaf_takes_its_cpu_and_io_shares() {
    let Some(text) = console() else { return };
    for (name, what) in [
        ("leaf", "the leaf, set"),
        ("run", "the run's cgroup beside it"),
    ] {
        assert_eq!(line(text, "shares", name), "20 default 30", "{what}");
    }
    let r = report(text, "shares");
    let (memory, pids, _) = limits(&r);
    assert!(memory == "cgroup v2" && pids == "cgroup v2", "shares: {r}");
    assert_nothing_left(text, "shares");
}

/// The OOM killer ends the task's largest process, not the sandbox nor anything outside it: a
/// shell whose child it killed goes on, and a parent that kills as a group on OOM
/// (`memory.oom.group`) is not touched, since the OOM is the run's cgroup's.
#[test]
fn an_oom_in_the_run_kills_one_process_of_it() {
    let Some(text) = console() else { return };
    assert_v2_hit(text, "child_oom", "memory");
    let r = report(text, "child_oom");
    assert_eq!(
        (&r["exit_code"], &r["stdout"]),
        (&Value::from(0), &Value::from("137\n")),
        "the shell saw its child killed and went on: {r}"
    );
    assert!(
        !line(text, "alive", "child_oom").is_empty(),
        "the caller outlived the OOM"
    );
}

/// A parent at its `cgroup.max.descendants` refuses the run's cgroup (mkdir: EAGAIN): the run
/// fails closed, saying the step, the call and the path, and leaves nothing.
#[test]
fn a_parent_that_takes_no_more_cgroups_fails_the_run_closed() {
    let Some(text) = console() else { return };
    let r = report(text, "max_descendants");
    let error = r["error"].as_str().unwrap_or("");
    assert!(
        r["exit_code"] == 125
            && error.starts_with("step 1 create cgroup: mkdir(\"/sys/fs/cgroup/a/airlock-")
            && error.contains("EAGAIN"),
        "{r}"
    );
    assert_nothing_left(text, "max_descendants");
}

/// Concurrent runs in one parent each get their own cgroup and remove it; the sweep of what
/// killed launchers left never takes a live neighbour's: neither the running one's (which the
/// kernel would refuse anyway: it holds a process) nor an empty one named after a live
/// process, while it removes one named after a process gone (the control).
#[test]
fn concurrent_runs_leave_nothing_and_never_sweep_a_live_neighbour() {
    let Some(text) = console() else { return };
    let before = line(text, "neighbour", "before");
    assert!(
        Path::new(&before).parent() == Some(Path::new("/sys/fs/cgroup/a")),
        "the neighbour's cgroup: {before:?}"
    );
    let during = line(text, "neighbour", "during");
    assert_eq!(
        during, before,
        "once the 20 runs had ended, only the neighbour's cgroup"
    );
    assert!(
        !text.contains("@@failed concurrent"),
        "a concurrent run failed:\n{text}"
    );
    let live = line(text, "fake", "live");
    assert!(live.starts_with("/sys/fs/cgroup/a/airlock-"), "{live:?}");
    assert_eq!(
        line(text, "fake", "after"),
        live,
        "after the sweeps: the empty cgroup of a live process stays, that of one gone goes"
    );
    assert_nothing_left(text, "concurrent");
}
