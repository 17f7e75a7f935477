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
//! - uid 65534 under a parent it may not write, and root under one that enables `memory` but not
//!   `pids`: rlimits, as the README says;
//! - a launcher SIGKILLed mid-run: its cgroup is removed by the next run.
//!
//! The guest is booted once, runs every case and powers off; each test reads its lines of the
//! guest's console. scripts/vm.sh installs QEMU, busybox-static and the kernel (into
//! /opt/airlock-vm, or AIRLOCK_VM_PREFIX); without them these tests say so and pass, unless
//! AIRLOCK_VM_REQUIRED is set (scripts/test.sh sets it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

/// The guest's first stage: the initramfs is the kernel's rootfs, which pivot_root refuses to
/// leave (airlock's step 7 says EINVAL there), so the guest moves into a tmpfs first.
const STAGE1: &str = r#"#!/usr/bin/busybox sh
/usr/bin/busybox --install -s
mkdir -p /newroot
mount -t tmpfs -o mode=0755 root /newroot
cp -a /usr /etc /bin /sbin /cases /newroot/
mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/tmp
exec switch_root /newroot /cases
"#;

/// A task that starts 60 processes (more than `--pids 20` allows) and exits.
const BOMB: &str = "#!/bin/sh\ni=0\nwhile [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); done\n";
/// A task whose one string doubles until its memory runs out.
const HOG: &str = "#!/bin/sh\nx=aaaaaaaa\nwhile :; do x=$x$x; done\n";

/// The cases. `@@report NAME JSON` is airlock's report of a run; `@@left NAME PATHS` the
/// `airlock-*` cgroups in the guest after it; `@@where NAME PATH` where a running task's
/// cgroup was made.
const CASES: &str = r#"#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
chmod 1777 /tmp
cd /tmp
CG=/sys/fs/cgroup
mount -t cgroup2 none $CG
echo "+memory +pids" > $CG/cgroup.subtree_control
left() { echo "@@left $1 $(find $CG -name 'airlock-*' -type d | tr '\n' ' ')"; }
report() { name=$1; shift; echo "@@at $(cut -d" " -f1 /proc/uptime)"; echo "@@report $name $("$@")"; left $name; }
as_nobody() { su -s /bin/sh nobody -c "$*"; }
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
run_as_root() { sh -c "$*"; }

report root_cgroup_pids airlock run --json --pids 20 -- bomb

mkdir -p $CG/a/leaf
echo "+memory +pids" > $CG/a/cgroup.subtree_control
echo $$ > $CG/a/leaf/cgroup.procs
report root_leaf_pids airlock run --json --pids 20 -- bomb
report root_leaf_memory airlock run --json --memory 32m -- hog
report root_leaf_cgroupns airlock run --json -- cat /proc/self/cgroup
kill_and_sweep root_leaf run_as_root

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

mkdir -p $CG/c/leaf
echo "+memory" > $CG/c/cgroup.subtree_control
echo $$ > $CG/c/leaf/cgroup.procs
report root_no_pids_controller airlock run --json --pids 20 -- bomb

echo "@@done"
poweroff -f
"#;

struct Vm {
    qemu: PathBuf,
    kernel: PathBuf,
    busybox: PathBuf,
}

fn vm() -> Result<Vm, String> {
    let prefix = std::env::var_os("AIRLOCK_VM_PREFIX").unwrap_or("/opt/airlock-vm".into());
    let vm = Vm {
        qemu: "/usr/bin/qemu-system-x86_64".into(),
        kernel: Path::new(&prefix).join("vmlinuz"),
        busybox: "/bin/busybox".into(),
    };
    for p in [&vm.qemu, &vm.kernel, &vm.busybox] {
        if !p.exists() {
            return Err(format!("{} is missing: run scripts/vm.sh", p.display()));
        }
    }
    Ok(vm)
}

/// Whether an ELF file asks for a program interpreter (is dynamically linked).
fn dynamic(elf: &[u8]) -> bool {
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3 // PT_INTERP
    })
}

/// One file of a cpio archive in the kernel's initramfs format ("newc").
enum Entry<'a> {
    Dir,
    File(u32, &'a [u8]),
    Link(&'a str),
}

fn cpio(entries: &[(&str, Entry)]) -> Vec<u8> {
    let mut out = Vec::new();
    let pad = |out: &mut Vec<u8>| out.resize(out.len().next_multiple_of(4), 0);
    let trailer = ("TRAILER!!!", Entry::File(0, &[]));
    for (i, (name, entry)) in entries.iter().chain([&trailer]).enumerate() {
        let (mode, data): (u32, &[u8]) = match entry {
            Entry::Dir => (0o040755, &[]),
            Entry::File(mode, data) => (0o100000 | mode, data),
            Entry::Link(target) => (0o120777, target.as_bytes()),
        };
        let nlink = if matches!(entry, Entry::Dir) { 2 } else { 1 };
        let fields = [
            i as u32 + 1,
            mode,
            0,
            0,
            nlink,
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
        ];
        out.extend_from_slice(b"070701");
        for f in fields.iter().chain(&[name.len() as u32 + 1, 0]) {
            out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        pad(&mut out);
        out.extend_from_slice(data);
        pad(&mut out);
    }
    out
}

/// The guest's console, once it has run every case; None when the VM's parts are missing and
/// not required.
fn console() -> Option<&'static str> {
    static OUT: OnceLock<Result<String, String>> = OnceLock::new();
    let out = OUT.get_or_init(|| {
        let vm = vm()?;
        let airlock = std::fs::read(env!("CARGO_BIN_EXE_airlock")).unwrap();
        assert!(
            !dynamic(&airlock),
            "the guest has no libraries: airlock must be linked statically (scripts/target.sh)"
        );
        let busybox = std::fs::read(&vm.busybox).unwrap();
        assert!(!dynamic(&busybox), "{} is not busybox-static's", vm.busybox.display());
        let initramfs = cpio(&[
            ("usr", Entry::Dir),
            ("usr/bin", Entry::Dir),
            ("usr/sbin", Entry::Dir),
            ("bin", Entry::Link("usr/bin")),
            ("sbin", Entry::Link("usr/sbin")),
            ("etc", Entry::Dir),
            ("proc", Entry::Dir),
            ("sys", Entry::Dir),
            ("dev", Entry::Dir),
            ("usr/bin/busybox", Entry::File(0o755, &busybox)),
            ("usr/bin/airlock", Entry::File(0o755, &airlock)),
            ("usr/bin/bomb", Entry::File(0o755, BOMB.as_bytes())),
            ("usr/bin/hog", Entry::File(0o755, HOG.as_bytes())),
            (
                "etc/passwd",
                Entry::File(
                    0o644,
                    b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
                ),
            ),
            ("etc/group", Entry::File(0o644, b"root:x:0:\nnogroup:x:65534:\n")),
            ("init", Entry::File(0o755, STAGE1.as_bytes())),
            ("cases", Entry::File(0o755, CASES.as_bytes())),
        ]);
        let dir = common::tmpdir();
        let image = dir.path().join("initramfs.cpio");
        std::fs::write(&image, initramfs).unwrap();
        let mut qemu = Command::new(&vm.qemu);
        qemu.args(["-accel", "tcg", "-m", "512", "-smp", "2", "-no-reboot"])
            .args(["-display", "none", "-serial", "stdio", "-monitor", "none"])
            .arg("-kernel")
            .arg(&vm.kernel)
            .arg("-initrd")
            .arg(&image)
            .args(["-append", "console=ttyS0 quiet loglevel=1 panic=-1"]);
        let run = common::run_bounded(qemu, None, Duration::from_secs(600));
        let text = common::stdout(&run.out).replace('\r', "");
        if std::env::var_os("AIRLOCK_VM_SHOW").is_some() {
            eprintln!("the guest's console ({:?}):\n{text}", run.took);
        }
        assert!(
            text.lines().any(|l| l == "@@done"),
            "the guest did not run every case:\n{}",
            run.show()
        );
        Ok(text)
    });
    match out {
        Ok(text) => Some(text),
        Err(e) if std::env::var_os("AIRLOCK_VM_REQUIRED").is_none() => {
            eprintln!("SKIP: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The rest of the guest's line `@@KIND NAME ...`.
fn line(text: &str, kind: &str, name: &str) -> String {
    let head = format!("@@{kind} {name}");
    let l = text
        .lines()
        .find(|l| l.starts_with(&(head.clone() + " ")) || *l == head)
        .unwrap_or_else(|| panic!("no line {head:?} in the guest's console:\n{text}"));
    l[head.len()..].trim().to_string()
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
    for name in ["user_not_delegated", "root_no_pids_controller"] {
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
