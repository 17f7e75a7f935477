//! A virtual machine for what the dev VM cannot show (cgroup v2 owning the memory and pids
//! controllers; another kernel): QEMU, with its own CPU emulator (TCG, no /dev/kvm: the dev
//! VM's hangs in early boot), boots Debian 12's kernel with an initramfs written here that
//! holds busybox (static), this airlock binary (static) and a script of cases. The guest runs
//! the script as root and powers off; the test reads what it printed on the console.
//!
//! scripts/vm.sh installs the parts (into /opt/airlock-vm, or AIRLOCK_VM_PREFIX); without
//! them a test says so and passes, unless AIRLOCK_VM_REQUIRED is set (scripts/test.sh sets it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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

/// What the cases' script starts with, in the guest's tmpfs root: the mounts, and the shell
/// functions the cases share.
const PRELUDE: &str = r#"#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
chmod 1777 /tmp
cd /tmp
as_nobody() { su -s /bin/sh nobody -c "$*"; }
as_root() { sh -c "$*"; }
# try NAME CMD...: `@@status NAME CODE`, `@@err NAME STDERR` (lines joined by |), `@@ran NAME
# yes` when the task printed a line `task-ran`, and `@@json NAME REPORT` for a JSON line.
try() {
  name=$1; shift
  "$@" > /tmp/out 2> /tmp/err
  echo "@@status $name $?"
  echo "@@err $name $(tr '\n' '|' < /tmp/err)"
  grep -q '^task-ran$' /tmp/out && echo "@@ran $name yes"
  grep '^{' /tmp/out | sed "s/^/@@json $name /"
}
"#;

/// Printed once every case has run.
const DONE: &str = "@@done";

/// One file of the guest's initramfs (a cpio archive in the kernel's "newc" format).
pub enum Entry<'a> {
    Dir,
    File(u32, &'a [u8]),
    Link(&'a str),
}

fn cpio<'a>(entries: impl Iterator<Item = &'a (&'a str, Entry<'a>)>) -> Vec<u8> {
    let mut out = Vec::new();
    let pad = |out: &mut Vec<u8>| out.resize(out.len().next_multiple_of(4), 0);
    static TRAILER: (&str, Entry) = ("TRAILER!!!", Entry::File(0, &[]));
    for (i, (name, entry)) in entries.chain([&TRAILER]).enumerate() {
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

struct Parts {
    qemu: PathBuf,
    kernel: PathBuf,
    busybox: PathBuf,
}

fn parts(kernel: &str) -> Result<Parts, String> {
    let prefix = std::env::var_os("AIRLOCK_VM_PREFIX").unwrap_or("/opt/airlock-vm".into());
    let p = Parts {
        qemu: "/usr/bin/qemu-system-x86_64".into(),
        kernel: Path::new(&prefix).join(kernel),
        busybox: "/bin/busybox".into(),
    };
    for f in [&p.qemu, &p.kernel, &p.busybox] {
        if !f.exists() {
            return Err(format!("{} is missing: run scripts/vm.sh", f.display()));
        }
    }
    Ok(p)
}

/// Another file scripts/vm.sh installs (`apparmor_parser`), or Err when it is missing.
pub fn part(name: &str) -> Result<PathBuf, String> {
    let prefix = std::env::var_os("AIRLOCK_VM_PREFIX").unwrap_or("/opt/airlock-vm".into());
    let path = Path::new(&prefix).join(name);
    match path.exists() {
        true => Ok(path),
        false => Err(format!("{} is missing: run scripts/vm.sh", path.display())),
    }
}

/// Boot the guest with `files` (paths relative to its root; `/usr/bin` is on its PATH) and
/// run `cases` (shell, after `PRELUDE`) as its root; return its console once every case ran.
/// Err when the VM's parts are missing.
pub fn boot(cases: &str, files: &[(&str, Entry)]) -> Result<String, String> {
    boot_vmlinuz("vmlinuz", cases, files)
}

/// As [`boot`], with another kernel than Debian 12's: `name` is one scripts/vm.sh installs as
/// `vmlinuz-NAME` (`debian11`: Debian 11's 5.10).
pub fn boot_kernel(name: &str, cases: &str, files: &[(&str, Entry)]) -> Result<String, String> {
    boot_vmlinuz(&format!("vmlinuz-{name}"), cases, files)
}

fn boot_vmlinuz(kernel: &str, cases: &str, files: &[(&str, Entry)]) -> Result<String, String> {
    let p = parts(kernel)?;
    let airlock = std::fs::read(env!("CARGO_BIN_EXE_airlock")).unwrap();
    assert!(
        !dynamic(&airlock),
        "the guest has no libraries: airlock must be linked statically (scripts/target.sh)"
    );
    let busybox = std::fs::read(&p.busybox).unwrap();
    assert!(
        !dynamic(&busybox),
        "{} is not busybox-static's",
        p.busybox.display()
    );
    let script = format!("{PRELUDE}{cases}\necho {DONE}\npoweroff -f\n");
    let passwd =
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n";
    let entries = [
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
        ("etc/passwd", Entry::File(0o644, passwd.as_bytes())),
        (
            "etc/group",
            Entry::File(0o644, b"root:x:0:\nnogroup:x:65534:\n"),
        ),
        ("init", Entry::File(0o755, STAGE1.as_bytes())),
        ("cases", Entry::File(0o755, script.as_bytes())),
    ];
    let dir = super::tmpdir();
    let image = dir.path().join("initramfs.cpio");
    std::fs::write(&image, cpio(entries.iter().chain(files))).unwrap();
    let mut qemu = Command::new(&p.qemu);
    qemu.args(["-accel", "tcg", "-m", "512", "-smp", "2", "-no-reboot"])
        .args(["-display", "none", "-serial", "stdio", "-monitor", "none"])
        .arg("-kernel")
        .arg(&p.kernel)
        .arg("-initrd")
        .arg(&image)
        .args(["-append", "console=ttyS0 quiet loglevel=1 panic=-1"]);
    let run = super::run_bounded(qemu, None, Duration::from_secs(300));
    let text = super::stdout(&run.out).replace('\r', "");
    if std::env::var_os("AIRLOCK_VM_SHOW").is_some() {
        eprintln!("the guest's console ({:?}):\n{text}", run.took);
    }
    assert!(
        text.lines().any(|l| l == DONE),
        "the guest did not run every case:\n{}",
        run.show()
    );
    Ok(text)
}

/// The console of a boot, or None (the test passes, saying why) when the VM's parts are
/// missing and not required.
pub fn console(boot: &Result<String, String>) -> Option<&str> {
    match boot {
        Ok(text) => Some(text),
        Err(e) if std::env::var_os("AIRLOCK_VM_REQUIRED").is_none() => {
            eprintln!("SKIP: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The rest of the guest's line `@@KIND NAME ...`, trimmed.
pub fn line(text: &str, kind: &str, name: &str) -> String {
    let head = format!("@@{kind} {name}");
    let l = text
        .lines()
        .find(|l| {
            l.strip_prefix(&head)
                .is_some_and(|r| r.is_empty() || r.starts_with(' '))
        })
        .unwrap_or_else(|| panic!("no line {head:?} in the guest's console:\n{text}"));
    l[head.len()..].trim().to_string()
}

/// Whether the case `name` ran its task: the prelude's `try` prints `@@ran NAME yes` when the
/// task printed `task-ran`.
pub fn ran(text: &str, name: &str) -> bool {
    text.lines().any(|l| l == format!("@@ran {name} yes"))
}

/// Each case ended 0 and ran its task (the control of a refused case).
pub fn assert_ran(text: &str, names: &[&str]) {
    for name in names {
        let err = line(text, "err", name);
        assert_eq!(line(text, "status", name), "0", "{name}: {err}");
        assert!(ran(text, name), "{name}: the task did not run");
    }
}

/// The case ended with `code` before its task ran, its stderr beginning with `start` and
/// holding each of `words`.
pub fn assert_stopped(text: &str, name: &str, code: &str, start: &str, words: &[&str]) {
    let err = line(text, "err", name);
    assert_eq!(line(text, "status", name), code, "{name}: {err}");
    assert!(
        err.starts_with(start) && words.iter().all(|w| err.contains(w)),
        "{name}: not {start:?} with {words:?}: {err}"
    );
    assert!(!ran(text, name), "{name}: the task ran");
}

/// The case's JSON report: a setup failure (exit 125) whose error holds each of `words`.
pub fn assert_json_setup_failed(text: &str, name: &str, words: &[&str]) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_str(&line(text, "json", name)).unwrap();
    assert_eq!(json["error_kind"], "setup", "{name}: {json}");
    assert_eq!(json["exit_code"], 125, "{name}: {json}");
    let error = json["error"].as_str().unwrap_or_default();
    assert!(words.iter().all(|w| error.contains(w)), "{name}: {json}");
    json
}
