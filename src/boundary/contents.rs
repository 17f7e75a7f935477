//! What the sandbox's own files hold (step 7): the host's /etc entries taken and the files
//! generated for the sandbox, the device nodes and links of /dev, scratch with the inputs
//! copied in (never bound), and the contents bwrap's --file and --bind-data give.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::MsFlags;
use nix::sys::stat::Mode;

use crate::channel::{self, Handed};
use crate::spec::{self, Access, InputSource, SANDBOX_GID, SANDBOX_UID, SCRATCH};
use crate::sys::{self, SysError, io_err, named};

use super::Inherited;
use super::fs::{
    Prepared, RO, access_attrs, at, attach, make_dirs, make_file, mount_fs, mount_tmpfs, tree,
};

/// The only host files of `/etc` that appear inside (read-only, each only if the host has it):
/// what the dynamic loader, Debian's program alternatives, TLS, time zones, locales, and name
/// lookups of services and protocols need. Everything else of /etc (shadow, ssh keys, pip and
/// git configuration that may hold tokens) stays out. passwd, group, hosts, nsswitch.conf and
/// hostname are generated for the sandbox instead.
pub const ETC_FROM_HOST: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "services",
    "protocols",
    "mime.types",
    "magic",
    "terminfo",
    "inputrc",
    "os-release",
    "debian_version",
];

/// Host files of `/etc` that appear only with the host's network (--share-net), bound as
/// ETC_FROM_HOST's are: the resolver's configuration, so that names resolve through DNS as on
/// the host (a symlink, as systemd-resolved's into /run, is followed and what it leads to is
/// bound; absent or dangling, nothing is). Without --share-net the sandbox has only loopback,
/// no server to ask, and no resolv.conf.
const ETC_WITH_SHARED_NET: &[&str] = &["resolv.conf"];

/// The names of the host's /etc entries taken into a sandbox (each only if the host has it)
/// whose network is the host's (`shared_net`) or its own.
pub fn etc_from_host(shared_net: bool) -> impl Iterator<Item = &'static str> {
    let with_net: &[&str] = if shared_net { ETC_WITH_SHARED_NET } else { &[] };
    ETC_FROM_HOST.iter().chain(with_net).copied()
}

/// The generated nsswitch.conf's `hosts:` sources. Other names than /etc/hosts's are looked up
/// through DNS only with the host's network, where the host's resolv.conf is bound: with glibc's
/// own `dns` module (part of libc since 2.34), not the host's hosts line, whose modules
/// (resolve, mymachines, mdns) ask daemons through sockets under /run that the sandbox does
/// not have. (musl reads resolv.conf without nsswitch.)
pub fn hosts_sources(shared_net: bool) -> &'static str {
    if shared_net { "files dns" } else { "files" }
}

/// Device nodes bound from the host (the kernel refuses to let a user namespace create them).
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

pub const DEV_LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("ptmx", "pts/ptmx"),
    ("core", "/proc/kcore"),
];

/// One host entry of the minimal /etc, bound read-only as it is: a file, or a directory with
/// what is mounted under it. (Copying the small files instead was dearer, measured at d3aa6dd:
/// a tmpfs inode and page for each, made and torn down at every launch, cost more than the
/// mounts: 52 us per launch of `airlock run --share-net -- /bin/true` with the nine files of
/// at most a page copied.)
pub(super) struct EtcEntry {
    pub(super) fd: OwnedFd,
    pub(super) is_dir: bool,
}

/// The minimal /etc's entry for `host`: `None` when it does not exist. Symlinks are followed,
/// as a bind of the path would follow them.
pub(super) fn etc_entry(host: &Path) -> Result<Option<EtcEntry>, SysError> {
    match tree(host, RO) {
        Ok(Prepared::Tree { fd, is_dir }) => Ok(Some(EtcEntry { fd, is_dir })),
        Ok(_) => Ok(None),
        Err(e) if matches!(e.errno, Errno::ENOENT | Errno::ENOTDIR) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The path of the terminal on stdout, found as ttyname(3) finds it: the name /proc/self/fd/1
/// gives, if that is the same terminal, else the first character device in /dev/pts or /dev
/// that is (inside another sandbox the name may be absent, or another terminal's). None when
/// stdout is no terminal or none is found.
pub(super) fn stdout_terminal() -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let stdout = sys::std_stream(1);
    if !nix::unistd::isatty(stdout).unwrap_or(false) {
        return None;
    }
    let st = nix::sys::stat::fstat(stdout).ok()?;
    // The same inode, not only the same device number: each devpts instance numbers its
    // terminals from 0.
    // The node itself, not a link to it (/dev/stdout and /dev/fd lead there too).
    let same = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            m.file_type().is_char_device()
                && (m.rdev(), m.dev(), m.ino()) == (st.st_rdev, st.st_dev, st.st_ino)
        })
    };
    if let Ok(named) = std::fs::read_link("/proc/self/fd/1")
        && named.starts_with("/dev/")
        && same(&named)
    {
        return Some(named);
    }
    ["/dev/pts", "/dev"].into_iter().find_map(|dir| {
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| same(p))
    })
}

/// Create a file that must not exist yet (in a directory that does), with permission bits
/// `mode`.
fn create_new(path: &Path, mode: u32) -> Result<File, SysError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| io_err(e, || format!("open({path:?}, O_CREAT|O_EXCL)")))
}

/// Create a file that must not exist yet holding `data`.
fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<(), SysError> {
    create_new(path, mode)?
        .write_all(data)
        .map_err(|e| io_err(e, || format!("write({path:?})")))
}

/// The files of /etc that `write_generated_etc` writes, in its order.
pub const GENERATED_ETC: [&str; 5] = ["passwd", "group", "hosts", "nsswitch.conf", "hostname"];

/// passwd and group name only the sandbox user and nobody; hosts knows only localhost and the
/// sandbox's own name, and nsswitch.conf adds DNS with the host's network (`shared_net`, see
/// hosts_sources).
pub(super) fn write_generated_etc(shared_net: bool) -> Result<(), SysError> {
    let user = spec::SANDBOX_USER;
    let hosts = hosts_sources(shared_net);
    let files: [(&str, String); 5] = [
        (
            GENERATED_ETC[0],
            format!(
                "{user}:x:{SANDBOX_UID}:{SANDBOX_GID}:airlock sandbox:{SCRATCH}:/bin/sh\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        (
            GENERATED_ETC[1],
            format!("{user}:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"),
        ),
        // The sandbox's name has a line of its own, so that it is its own canonical name:
        // as an alias of `localhost`, `hostname -f` (getaddrinfo's AI_CANONNAME) printed
        // `localhost`. Listed after `localhost`, which stays 127.0.0.1's name backwards.
        (
            GENERATED_ETC[2],
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
             127.0.0.1\tairlock\n"
                .into(),
        ),
        (
            GENERATED_ETC[3],
            format!(
                "passwd: files\ngroup: files\nshadow: files\nhosts: {hosts}\nnetworks: files\n\
                 protocols: files\nservices: files\n"
            ),
        ),
        (GENERATED_ETC[4], "airlock\n".into()),
    ];
    for (path, text) in files {
        write_new(
            &at(Path::new("/etc").join(path).as_path()),
            text.as_bytes(),
            0o644,
        )?;
    }
    Ok(())
}

/// The sandbox's devpts instance. `max=` caps the terminals it may hold: every devpts instance
/// but the host's first draws from one pool of the kernel (`kernel.pty.max` less
/// `kernel.pty.reserve`, 3072 by default), so without it a task opening /dev/ptmx until ENOSPC
/// left no terminal to any other sandbox or container of the host until the run ended.
pub const DEVPTS_OPTIONS: &str = "newinstance,ptmxmode=0666,mode=620,max=64";

/// A minimal /dev: the host's harmless device nodes bound in, the usual links, a new devpts
/// instance and a tmpfs /dev/shm. In a root that becomes read-only (airlock run) /dev is a
/// directory of the root, read-only with it at step 9; otherwise (bwrap's --dev) it is a
/// tmpfs of its own, writable as bubblewrap's. (A tmpfs fewer to make, remount and tear down
/// saved 62 us per launch of `airlock run --share-net -- /bin/true`.)
pub(super) fn make_dev(
    dest: &Path,
    nodes: Vec<(&'static str, OwnedFd)>,
    in_readonly_root: bool,
    scratch_size: Option<u64>,
) -> Result<(), SysError> {
    let dev = at(dest);
    make_dirs(&dev)?;
    if !in_readonly_root {
        mount_tmpfs(&dev, "mode=0755")?;
    }
    for (name, fd) in nodes {
        attach(&fd, &dest.join(name), false)?;
    }
    for (name, target) in DEV_LINKS {
        std::os::unix::fs::symlink(target, dev.join(name))
            .map_err(|e| io_err(e, || format!("symlink({target:?}, {name:?})")))?;
    }
    let pts = dev.join("pts");
    make_dirs(&pts)?;
    mount_fs(
        "devpts",
        &pts,
        "devpts",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some(DEVPTS_OPTIONS),
    )?;
    let shm = dev.join("shm");
    make_dirs(&shm)?;
    // /dev/shm is writable memory too: in airlock run it gets the scratch budget, its size
    // and its inode cap (bwrap's --dev, as bubblewrap's, has neither).
    let shm_opts = match scratch_size {
        Some(size) => format!(
            "mode=1777,size={size},nr_inodes={}",
            spec::tmpfs_inodes(size)
        ),
        None => "mode=1777".to_string(),
    };
    mount_tmpfs(&shm, &shm_opts)
}

/// bwrap's --file, --bind-data, --ro-bind-data: the descriptor's content in a file at `dest`,
/// or in a file of the scaffold bound over `dest`. `privileged`: a root caller's, whose
/// setuid and setgid bits from --perms stay on a file written to, as bubblewrap's do.
pub(super) fn write_file_from_fd(
    fd: i32,
    dest: &Path,
    perms: u32,
    bind: Option<Access>,
    privileged: bool,
) -> Result<(), SysError> {
    let staging = match bind {
        None => at(dest),
        Some(_) => {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            PathBuf::from(format!("/bind-data-{n}"))
        }
    };
    // An existing file keeps its mode, as under bubblewrap (through a writable bind it is the
    // host's); --perms is for a file made here.
    let existed = staging.symlink_metadata().is_ok();
    let mut out = make_file(&staging, perms)?;
    let mut src = File::from(sys::dup_fd(fd).map_err(|e| SysError {
        call: format!("copy fd {fd} to {dest:?}"),
        errno: e.errno,
    })?);
    let wrote = std::io::copy(&mut src, &mut out)
        .map_err(|e| io_err(e, || format!("copy fd {fd} to {dest:?}")))?;
    // bubblewrap gives the file its mode, then writes: an unprivileged caller's write clears
    // the setuid bit, and the setgid bit of a group-executable file, as the kernel does for
    // a writer without CAP_FSETID. Written first here, the bits are cleared the same way.
    let perms = match (privileged, wrote) {
        (false, 1..) if perms & 0o010 != 0 => perms & !0o6000,
        (false, 1..) => perms & !0o4000,
        _ => perms,
    };
    // Through the descriptor opened with O_NOFOLLOW: a symlink planted at the path meanwhile
    // (through a writable bind) is not followed.
    if !existed {
        out.set_permissions(std::fs::Permissions::from_mode(perms))
            .map_err(|e| io_err(e, || format!("fchmod({staging:?}, {perms:04o})")))?;
    }
    if let Some(access) = bind {
        let t = sys::clone_tree(&staging)?;
        sys::set_mount_attrs(t.as_fd(), "", access_attrs(access), true, dest)?;
        attach(&t, dest, false)?;
    }
    Ok(())
}

/// A tmpfs owned by the sandbox user, with the inputs copied in (never bound).
pub(super) fn make_scratch(inh: &Inherited, dest: &Path) -> Result<(OwnedFd, Handed), SysError> {
    let mut handed = Vec::new();
    let path = at(dest);
    make_dirs(&path)?;
    let mut opts = "mode=0755".to_string();
    if let Some(l) = &inh.spec.limits {
        // Empty files take no block: without nr_inodes the kernel's default (half the RAM
        // pages) lets a task fill kernel memory with inodes whatever size= says.
        let inodes = spec::tmpfs_inodes(l.scratch_size);
        opts.push_str(&format!(",size={},nr_inodes={inodes}", l.scratch_size));
    }
    mount_tmpfs(&path, &opts)?;
    // A cancel (Ctrl-C, a framework's SIGTERM) ends a long copy within 8 MiB of it.
    let cancel = || super::cancel_if_asked(inh);
    for (input, file) in inh.spec.inputs.iter().zip(&inh.inputs) {
        cancel();
        let dest = path.join(&input.name);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&dest)
            .map_err(|e| io_err(e, || format!("open({dest:?}, O_CREAT|O_EXCL)")))?;
        let copied = match (&input.source, file) {
            (InputSource::Bytes(b), _) => out
                .write_all(b)
                .map(|_| (b.len() as u64, channel::content_hash(b))),
            (InputSource::HostFile(_), Some(f)) => {
                if f.metadata()
                    .map(|m| m.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false)
                {
                    let _ = out.set_permissions(std::fs::Permissions::from_mode(0o755));
                }
                copy_hashing(f, &mut out, &cancel)
            }
            (InputSource::HostFile(p), None) => {
                return Err(SysError {
                    call: format!("input {p:?} was not opened"),
                    errno: Errno::EBADF,
                });
            }
        };
        let (size, hash) = copied
            .map_err(|e| io_err(e, || format!("copy input {:?} into scratch", input.name)))?;
        handed.push((input.name.clone(), size, hash));
    }
    let fd = named(
        nix::fcntl::open(
            path.as_path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || format!("open({dest:?}, O_DIRECTORY)"),
    )?;
    Ok((fd, handed))
}

/// Copy `from` into `to`, returning the size and content hash of what was copied; `between`
/// runs every 64 reads (8 MiB).
fn copy_hashing(mut from: &File, to: &mut File, between: &dyn Fn()) -> std::io::Result<(u64, u64)> {
    use std::hash::Hasher;
    use std::io::Read;
    let mut h = std::hash::DefaultHasher::new();
    const CHUNK: usize = 128 * 1024;
    let mut buf = vec![0u8; CHUNK];
    let (mut total, mut reads) = (0u64, 0u64);
    loop {
        reads += 1;
        if reads % 64 == 0 {
            between();
        }
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok((total, h.finish()));
        }
        h.write(&buf[..n]);
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    /// The README's step 7 names every /etc entry taken from the host: the list users read is
    /// the one bound (it had pointed to a list it did not have).
    #[test]
    fn the_readme_names_every_etc_entry_from_the_host() {
        let readme = include_str!("../../README.md");
        let from = readme.find("7. **New root**").unwrap();
        let to = from + readme[from..].find("8. **pivot_root**").unwrap();
        for e in super::ETC_FROM_HOST {
            assert!(readme[from..to].contains(&format!("`{e}`")), "{e}");
        }
    }
}
