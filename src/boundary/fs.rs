//! The sandbox's filesystem, steps 5, 7 and 8 of `build` (mod.rs): the detached copies of
//! host trees taken while the caller's identity is held (`prepare`), the kernel's own
//! filesystems found in a writable copy (from /proc/self/mountinfo) and kept read-only, the
//! scaffold and the new root, and each operation of the plan applied in order (`apply`).

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::MsFlags;
use nix::sys::stat::Mode;

use crate::channel::Handed;
use crate::spec::{Access, FsOp, Output, OverlayUpper, Spec};
use crate::sys::{self, SysError, io_err, named};

use super::Inherited;
use super::contents::{
    DEVICES, EtcEntry, etc_entry, etc_from_host, make_dev, make_scratch, stdout_terminal,
    write_file_from_fd, write_generated_etc,
};

/// What step 5 took for one filesystem operation.
pub(super) enum Prepared {
    Nothing,
    Tree {
        fd: OwnedFd,
        is_dir: bool,
    },
    /// A writable copy, with the mounts of the kernel's interfaces inside it (KERNEL_FS, made
    /// read-only once attached).
    WritableTree {
        fd: OwnedFd,
        is_dir: bool,
        kernel_fs: Vec<PathBuf>,
    },
    Link(PathBuf),
    /// The host's /proc (no new pid namespace), with read-only copies of its knobs.
    HostProc {
        fd: OwnedFd,
        knobs: Vec<(&'static str, OwnedFd)>,
    },
    Etc(Vec<(PathBuf, EtcEntry)>),
    Dev(Vec<(&'static str, OwnedFd)>),
    /// Read-only copies of an overlay's sources (lowest first) and, for a host upper layer,
    /// writable copies of the upper and work directories.
    Overlay {
        lower: Vec<OwnedFd>,
        /// The common parent of the upper and work directories, and its host path.
        upper: Option<(OwnedFd, PathBuf)>,
    },
}

pub(super) const RO: u64 = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;

/// Parts of proc that reach the whole kernel rather than the sandbox's own processes.
const PROC_KNOBS: &[&str] = &["sys", "sysrq-trigger", "irq", "bus"];

/// The kernel's own interfaces, by mountinfo type and statfs magic: their files are knobs of
/// the whole host (sysctls, cgroups, tracing, EFI variables, ...) rather than storage, and
/// their permission checks are mostly the file's owner and mode alone, which a task that is
/// the host's uid 0 passes.
const KERNEL_FS: &[(&str, i64)] = &[
    ("proc", 0x9fa0),
    ("sysfs", 0x6265_6572),
    ("cgroup", 0x0027_e0eb),
    ("cgroup2", 0x6367_7270),
    ("tracefs", 0x7472_6163),
    ("debugfs", 0x6462_6720),
    ("securityfs", 0x7363_6673),
    ("bpf", 0xcafe_4a11),
    ("configfs", 0x6265_6570),
    ("pstore", 0x6165_676c),
    ("efivarfs", 0xde5e_81e4),
    ("binfmt_misc", 0x4249_4e4d),
    ("fusectl", 0x6573_5543),
    ("selinuxfs", 0xf97c_ff8c),
    ("smackfs", 0x4341_5d53),
];

/// Mounts of the kernel's interfaces (KERNEL_FS) in a copy of the host tree at `src`, relative
/// to `src` ("" for the tree's own root, when `src` lies inside one): a writable copy keeps
/// these read-only whole. (A host proc too: as the host's uid 0 a root caller's task could
/// otherwise write other host processes' files, such as their oom_score_adj, and the host's
/// sysctls.) The source is canonicalized first (a /proc/self/root path, say), and an
/// unreadable mount table is an error, not an empty answer.
fn kernel_fs_under(src: &Path, tree: &OwnedFd) -> Result<Vec<PathBuf>, SysError> {
    let mut found = Vec::new();
    let st = named(nix::sys::statfs::fstatfs(tree), || {
        format!("fstatfs(<tree of {src:?}>)")
    })?;
    let magic = st.filesystem_type().0 as i64;
    if KERNEL_FS.iter().any(|&(_, m)| m == magic) {
        found.push(PathBuf::new());
    }
    let src = std::fs::canonicalize(src).map_err(|e| io_err(e, || format!("realpath({src:?})")))?;
    // Bytes, not text: a mount point need not be UTF-8.
    let table = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| io_err(e, || "read(\"/proc/self/mountinfo\")".into()))?;
    let mounts: Vec<Mount> = table
        .split(|&b| b == b'\n')
        .filter_map(Mount::parse)
        .collect();
    for m in &mounts {
        if !KERNEL_FS
            .iter()
            .any(|&(name, _)| name.as_bytes() == m.fstype)
        {
            continue;
        }
        let Ok(rel) = m.path.strip_prefix(&src) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        // What the path reaches: this mount, or one that covers it (mounted over it or over
        // a directory above it; what its deepest existing part reaches, where the cover
        // lacks the rest). A covered mount is unreachable in the copy too (the kernel locks
        // such covers in a copy made for another user namespace), and no path there names it.
        let mut reached = None;
        for p in m.path.ancestors() {
            if let Some(id) = mount_id(p)? {
                reached = Some(id);
                break;
            }
        }
        match reached {
            Some(id) if id == m.id => found.push(rel.to_path_buf()),
            Some(id) if !m.below(&mounts).contains(&id.as_slice()) => {}
            // Reached one it is mounted on: the table changed under us (a directory above
            // it renamed?). Left writable it could be reachable in the copy: stop.
            _ => {
                return Err(SysError {
                    call: format!("open({:?}): not the kernel mount listed there", m.path),
                    errno: Errno::ESTALE,
                });
            }
        }
    }
    Ok(found)
}

/// A line of /proc/self/mountinfo: the mount's id, its parent's, where it is and its type.
struct Mount<'a> {
    id: &'a [u8],
    parent: &'a [u8],
    path: PathBuf,
    fstype: &'a [u8],
}

impl<'a> Mount<'a> {
    fn parse(line: &'a [u8]) -> Option<Mount<'a>> {
        let sep = line.windows(3).position(|w| w == b" - ")?;
        let mut fields = line[..sep].split(|&b| b == b' ');
        let (id, parent) = (fields.next()?, fields.next()?);
        // mountinfo escapes space, tab, newline and backslash as octal.
        let path = PathBuf::from(OsString::from_vec(unescape_mountinfo(fields.nth(2)?)));
        let fstype = line[sep + 3..].split(|&b| b == b' ').next()?;
        Some(Mount {
            id,
            parent,
            path,
            fstype,
        })
    }

    /// This mount's id and those of the mounts it sits on, down to the root.
    fn below<'b>(&self, all: &[Mount<'b>]) -> Vec<&'b [u8]>
    where
        'a: 'b,
    {
        let mut below: Vec<&[u8]> = vec![self.id];
        while let Some(m) = all.iter().find(|m| m.id == below[below.len() - 1]) {
            if below.contains(&m.parent) {
                break;
            }
            below.push(m.parent);
        }
        below
    }
}

/// The id (as /proc/self/mountinfo shows it) of the mount `path` reaches, or None if there is
/// no such path. No symlink is followed (mountinfo's paths hold none): one put in since, by
/// whoever owns a directory on the way, could lead the path to another mount and have this
/// one taken for covered; it fails the step instead (ELOOP).
fn mount_id(path: &Path) -> Result<Option<Vec<u8>>, SysError> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how) {
        Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
        r => named(r, || {
            format!("openat2({path:?}, O_PATH, RESOLVE_NO_SYMLINKS)")
        })?,
    };
    let info = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
    let text = std::fs::read(&info).map_err(|e| io_err(e, || format!("read({info:?})")))?;
    let id = text
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"mnt_id:"))
        .map(|v| v.trim_ascii().to_vec());
    match id {
        Some(id) => Ok(Some(id)),
        None => Err(SysError {
            call: format!("read({info:?}): no mnt_id"),
            errno: Errno::EIO,
        }),
    }
}

fn unescape_mountinfo(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if b[i] == b'\\'
            && let Some(d) = octal
        {
            out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// A writable copy of a host tree for a root caller keeps the mounts of the kernel's
/// interfaces in it (KERNEL_FS: proc, sysfs, cgroupfs, ...) read-only: only a root caller's
/// task can be the host's uid 0, the owner of their knobs.
fn guard_kernel_fs(
    copy: Prepared,
    src: &Path,
    access: Access,
    caller_is_root: bool,
) -> Result<Prepared, SysError> {
    match copy {
        Prepared::Tree { fd, is_dir } if access != Access::ReadOnly && caller_is_root => {
            let kernel_fs = kernel_fs_under(src, &fd)?;
            Ok(Prepared::WritableTree {
                fd,
                is_dir,
                kernel_fs,
            })
        }
        other => Ok(other),
    }
}

pub(super) fn access_attrs(a: Access) -> u64 {
    match a {
        Access::ReadOnly => RO,
        Access::ReadWrite => sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        Access::Devices => sys::MOUNT_ATTR_NOSUID,
    }
}

/// Whether the sandbox's pid namespace is its own (new, or joined with bwrap's --pidns), so a
/// new proc can be mounted for it.
pub(super) fn own_pid_ns(spec: &Spec) -> bool {
    spec.ns.pid || spec.bwrap.as_ref().is_some_and(|b| b.pidns_fd.is_some())
}

pub(super) fn prepare(op: &FsOp, spec: &Spec, caller_is_root: bool) -> Result<Prepared, SysError> {
    Ok(match op {
        FsOp::SystemPath(path) => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = named(nix::fcntl::readlink(path.as_path()), || {
                    format!("readlink({path:?})")
                })?;
                Prepared::Link(target.into())
            }
            Ok(m) if m.is_dir() => tree(path, RO)?,
            Ok(_) => Prepared::Nothing,
            // Absent from this host (as /lib32 on most): nothing to bind. Any other error is
            // the step's, as /etc's entries: a system path the host has but could not be
            // looked at is not silently left out.
            Err(e)
                if path != Path::new("/usr")
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
            {
                Prepared::Nothing
            }
            Err(e) => return Err(io_err(e, || format!("lstat({path:?})"))),
        },
        FsOp::MinimalEtc => {
            let mut v = Vec::new();
            for name in etc_from_host(!spec.ns.net) {
                if let Some(entry) = etc_entry(&Path::new("/etc").join(name))? {
                    v.push((PathBuf::from(name), entry));
                }
            }
            Prepared::Etc(v)
        }
        FsOp::Dev(_) => {
            let mut nodes: Vec<(&'static str, PathBuf)> = DEVICES
                .iter()
                .map(|dev| (*dev, Path::new("/dev").join(dev)))
                .collect();
            // As bubblewrap: a terminal on stdout is bound at /dev/console, where ttyname(3)
            // finds it (the host's /dev/pts/N is not in the sandbox's devpts). A streamed
            // `airlock run` passes a terminal through as it is: there too `tty` would otherwise
            // say "not a tty" of the terminal the task writes to, and the node opens no more
            // than /proc/self/fd/1 reopens, with the same permission check. A JSON run's
            // streams are pipes and /dev/null: the task holds no terminal, and must not be
            // handed the caller's (an unprivileged caller's task, its owner, read what was
            // typed in it and wrote into it).
            if matches!(spec.output, Output::Stream)
                && let Some(tty) = stdout_terminal()
            {
                nodes.push(("console", tty));
            }
            let mut v = Vec::new();
            // Device nodes must not be nodev; they are nosuid, noexec and read-only: that does
            // not stop writing to a device, only touch and chmod, which a root caller's bwrap
            // task (the host's uid 0, their owner) could otherwise apply to the host's nodes
            // and to the caller's terminal at /dev/console (bubblewrap lets it).
            let attrs = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC;
            for (name, host) in nodes {
                let fd = sys::clone_tree(&host)?;
                sys::set_mount_attrs(fd.as_fd(), "", attrs, true, &host)?;
                v.push((name, fd));
            }
            Prepared::Dev(v)
        }
        FsOp::Bind {
            src,
            access,
            optional,
            ..
        } => match if spec.bwrap.is_none() {
            run_bind_tree(src, access_attrs(*access))
        } else {
            tree(src, access_attrs(*access))
        } {
            // Only a source that does not exist is skipped, as bubblewrap skips one: a path
            // through a file (ENOTDIR), a loop or a denied directory fails.
            Err(e) if *optional && e.errno == Errno::ENOENT => Prepared::Nothing,
            Ok(copy) => guard_kernel_fs(copy, src, *access, caller_is_root)?,
            Err(e) => return Err(e),
        },
        FsOp::Proc(_) if !own_pid_ns(spec) => {
            let Prepared::Tree { fd, .. } = tree(
                Path::new("/proc"),
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
            )?
            else {
                unreachable!("tree() returns a Tree")
            };
            // A root caller's task may be the host's uid 0: the kernel-wide knobs of the host's
            // proc go over the copy read-only.
            let mut knobs = Vec::new();
            if caller_is_root {
                for knob in PROC_KNOBS {
                    let p = Path::new("/proc").join(knob);
                    if present(&p)? {
                        let t = sys::clone_tree(&p)?;
                        sys::set_mount_attrs(t.as_fd(), "", RO | sys::MOUNT_ATTR_NOEXEC, true, &p)?;
                        knobs.push((*knob, t));
                    }
                }
            }
            Prepared::HostProc { fd, knobs }
        }
        FsOp::BindFd { fd, access, .. } => {
            // The descriptor's mount belongs to the launcher's mount namespace, which this one
            // copied; its path names the same tree here. The path may have been swapped (for a
            // symlink, say) since the caller opened the descriptor, so the copy must be the
            // very directory the descriptor refers to (CVE-2024-42472 in flatpak).
            let link = format!("/proc/self/fd/{fd}");
            let path = named(nix::fcntl::readlink(link.as_str()), || {
                format!("readlink({link:?})")
            })?;
            // A pipe or socket (`pipe:[N]`) has no path to bind, as bubblewrap's realpath finds.
            if !path.as_encoded_bytes().starts_with(b"/") {
                return Err(SysError {
                    call: format!("readlink({link:?})"),
                    errno: Errno::ENOENT,
                });
            }
            let copy = tree(Path::new(&path), access_attrs(*access))?;
            let Prepared::Tree { fd: ref t, .. } = copy else {
                unreachable!("tree() returns a Tree")
            };
            let held = sys::dup_fd(*fd)?;
            let same = |a: &OwnedFd, b: &OwnedFd| {
                matches!((nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)),
                    (Ok(x), Ok(y)) if x.st_dev == y.st_dev && x.st_ino == y.st_ino)
            };
            if !same(t, &held) {
                return Err(SysError {
                    call: format!("Race condition binding dirfd {fd} ({path:?})"),
                    errno: Errno::EXDEV,
                });
            }
            guard_kernel_fs(copy, Path::new(&path), *access, caller_is_root)?
        }
        FsOp::Overlay { sources, upper, .. } => {
            let copy = |p: &Path, attrs| -> Result<OwnedFd, SysError> {
                let fd = sys::clone_tree(p)?;
                sys::set_mount_attrs(fd.as_fd(), "", attrs, true, p)?;
                Ok(fd)
            };
            let lower = sources
                .iter()
                .map(|p| copy(p, RO))
                .collect::<Result<Vec<_>, _>>()?;
            let upper = match upper {
                OverlayUpper::Host { upper, work } => {
                    // overlayfs wants upper and work on one mount: copy their common parent.
                    let common = common_parent(upper, work);
                    let tree = copy(&common, access_attrs(Access::ReadWrite))?;
                    Some((tree, common))
                }
                _ => None,
            };
            Prepared::Overlay { lower, upper }
        }
        _ => Prepared::Nothing,
    })
}

/// The canonical sources of an `airlock run`'s writable binds (those that resolve).
pub fn writable_sources(spec: &Spec) -> Vec<PathBuf> {
    spec.binds()
        .filter(|(_, _, access)| *access == Access::ReadWrite)
        .filter_map(|(src, _, _)| std::fs::canonicalize(src).ok())
        .collect()
}

/// Follow the absolute path `src` name by name, as the kernel resolves it, with each symlink
/// read and followed (`..` taken lexically, as after a link's target): `seen(dir, next,
/// is_link)` is told of each name looked up, in `dir`, as the path `next`. Returns where the
/// route ends, with no symlink left in it; a name that does not exist is an error (lstat's),
/// and so are more than 40 links (ELOOP).
pub fn walk_route(
    src: &Path,
    mut seen: impl FnMut(&Path, &Path, bool),
) -> Result<PathBuf, SysError> {
    fn push(todo: &mut Vec<OsString>, p: &Path) {
        use std::path::Component;
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => todo.push(n.to_owned()),
                Component::ParentDir => todo.push("..".into()),
                _ => {}
            }
        }
    }
    let mut todo = Vec::new();
    push(&mut todo, src);
    let mut at = PathBuf::from("/");
    let mut links = 0;
    // The text of the /proc/PID/fd link just followed: an open pipe's (`pipe:[N]`) or a
    // deleted file's (`PATH (deleted)`) names nothing to look up, which the error then says.
    let mut proc_text: Option<PathBuf> = None;
    while let Some(c) = todo.pop() {
        if c == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&c);
        let m = std::fs::symlink_metadata(&next).map_err(|e| {
            io_err(e, || match &proc_text {
                Some(text) => format!(
                    "{src:?} names an open file by its /proc link, whose text {text:?} is no \
                     path to it (a pipe, a socket, a deleted file; copy it to a file first): \
                     lstat({next:?})"
                ),
                None => format!("lstat({next:?})"),
            })
        })?;
        let is_link = m.file_type().is_symlink();
        seen(&at, &next, is_link);
        if !is_link {
            at = next;
            continue;
        }
        links += 1;
        if links > 40 {
            return Err(SysError {
                call: format!("resolve {src:?}"),
                errno: Errno::ELOOP,
            });
        }
        let target =
            std::fs::read_link(&next).map_err(|e| io_err(e, || format!("readlink({next:?})")))?;
        let fd_link = next.starts_with("/proc") && at.file_name() == Some("fd".as_ref());
        proc_text = fd_link.then(|| target.clone());
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        push(&mut todo, &target);
    }
    Ok(at)
}

/// Where a bind source of `airlock run` leads, with no symlink left in it; or, as the inner
/// `Err`, why it is refused: its way goes through a symlink that lies inside a writable
/// bind's source (`writable`, canonical) and leads out of that source. A task of an earlier
/// run may have left such a link, to aim the bind at any host path the caller may read:
/// `--bind ~/proj:/w --ro-bind ~/proj/cache:/c`, where the task made `cache` a link to
/// `~/.ssh`, bound the caller's ssh keys at `/c` (bubblewrap follows it as well; `audit
/// bwrap` calls it `source-in-writable-bind`). A link that stays inside its source is the
/// task's own tree either way and is followed.
pub fn bind_source_route(
    src: &Path,
    writable: &[PathBuf],
) -> Result<Result<PathBuf, String>, SysError> {
    let mut inside = Vec::new();
    let at = walk_route(src, |_, next, is_link| {
        // With the innermost writable source that holds it, which it may lead out of.
        let holding = writable.iter().filter(|w| next.starts_with(w));
        if let (true, Some(root)) = (is_link, holding.max_by_key(|w| w.as_os_str().len())) {
            inside.push((next.to_path_buf(), root));
        }
    })?;
    // A link is followed when one writable source holds both it and where the route ends
    // (whatever the order of the binds: with nested writable sources, the outer one does).
    for (link, root) in inside {
        if !writable
            .iter()
            .any(|w| link.starts_with(w) && at.starts_with(w))
        {
            return Ok(Err(format!(
                "{} is a symlink inside the writable bind {} that leads out of it, to {} (a \
                 task of an earlier run may have left it there): name the path it leads to if \
                 that is what the task is to see",
                link.display(),
                root.display(),
                at.display()
            )));
        }
    }
    Ok(Ok(at))
}

/// [`tree`] of an `airlock run` bind source, opened with no symlink followed. The launcher
/// has replaced the source by its route ([`bind_source_route`], `launch::routed_binds`), a
/// path that held no link when it looked and led where the kernel's own resolution did: a
/// link found in it now was swapped in since (by a running task, or by another user who may
/// write a directory on the way), and fails the copy (ELOOP) rather than redirecting it.
/// Walking the route again here followed such a link when it lay outside a writable bind
/// (found by a race review: a root caller bound a directory of a 0700 tree that way).
fn run_bind_tree(src: &Path, attrs: u64) -> Result<Prepared, SysError> {
    tree_of(sys::clone_tree_without_links(src)?, src, attrs)
}

/// A detached copy of a host tree with the given mount attributes.
pub(super) fn tree(path: &Path, attrs: u64) -> Result<Prepared, SysError> {
    // A path through a magic link (/proc/self/fd/N) reaches a mount of the namespace the
    // descriptor was opened in, the caller's, which open_tree cannot clone from this one
    // (EINVAL); the path it resolves to names the same tree in this namespace's copy, as
    // bubblewrap resolves bind sources before its namespaces exist.
    // The copy must be of the file the magic link names: its text (`FILE (deleted)` once
    // FILE is removed) is a name others may create, so the tree cloned is checked against the
    // kernel's own resolution of the link.
    let fd = match sys::clone_tree(path) {
        Err(e) if e.errno == Errno::EINVAL => match std::fs::canonicalize(path) {
            Ok(real) if real != path => {
                let fd = sys::clone_tree(&real).map_err(|_| e.clone())?;
                let id = |st: nix::sys::stat::FileStat| (st.st_dev, st.st_ino);
                let kernel = nix::sys::stat::stat(path).map(id);
                if kernel.is_err() || kernel != nix::sys::stat::fstat(&fd).map(id) {
                    return Err(SysError {
                        call: format!(
                            "bind source {path:?}: its link's text leads to {real:?}, which \
                             is not the file it names (moved or deleted)"
                        ),
                        errno: Errno::EXDEV,
                    });
                }
                fd
            }
            _ => return Err(e),
        },
        r => r?,
    };
    tree_of(fd, path, attrs)
}

fn tree_of(fd: OwnedFd, path: &Path, attrs: u64) -> Result<Prepared, SysError> {
    sys::set_mount_attrs(fd.as_fd(), "", attrs, true, path)?;
    let is_dir = nix::sys::stat::fstat(&fd)
        .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        .map_err(|errno| SysError {
            call: format!("fstat(<tree of {path:?}>)"),
            errno,
        })?;
    Ok(Prepared::Tree { fd, is_dir })
}

pub(super) fn mount_fs(
    src: &str,
    target: &Path,
    fstype: &str,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), SysError> {
    named(
        nix::mount::mount(Some(src), target, Some(fstype), flags, data),
        || format!("mount({src:?}, {target:?}, {fstype:?}, {flags:?}, {data:?})"),
    )
}

/// A tmpfs (nosuid, nodev) at `target` with the given options (mode, size).
pub(super) fn mount_tmpfs(target: &Path, opts: &str) -> Result<(), SysError> {
    mount_fs(
        "tmpfs",
        target,
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts),
    )
}

pub(super) fn open_path(p: &str) -> Result<OwnedFd, SysError> {
    named(
        nix::fcntl::open(
            p,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        || format!("open({p:?}, O_PATH)"),
    )
}

/// The scaffold: a tmpfs over /tmp (in this mount namespace only) entered with pivot_root,
/// with the sandbox's root tmpfs at /newroot. pivot_root moves the host to /oldroot, which an
/// empty directory of the scaffold covers at once: no path resolves into the host while the
/// plan runs. The host is detached with the scaffold at step 8, in the same detach, so the
/// launch waits for one RCU grace period there instead of two. Its /proc stays in this mount
/// namespace until then, which is what lets the plan mount a new proc (the kernel refuses
/// one in a user namespace unless a fully visible proc exists in the mount namespace).
/// `max_userns`: bwrap's --disable-userns, the user namespaces this one may still hold: "1"
/// where step 12 makes the task's nested one (a namespace made inside that counts here too,
/// up the chain, and is refused), else "0".
pub(super) fn enter_scaffold(max_userns: Option<&str>) -> Result<(), SysError> {
    let base = Path::new(SCAFFOLD);
    mount_tmpfs(base, "mode=0755")?;
    named(nix::unistd::chdir(base), || format!("chdir({SCAFFOLD:?})"))?;
    for dir in ["newroot", "oldroot", "cover"] {
        make_dirs(Path::new(dir))?;
    }
    named(nix::unistd::pivot_root(".", "oldroot"), || {
        format!("pivot_root({SCAFFOLD:?}, \"oldroot\")")
    })?;
    named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())?;
    mount_tmpfs(Path::new(NEWROOT), "mode=0755")?;
    if let Some(max) = max_userns {
        // user.* limits are per user namespace, written in the writer's.
        std::fs::write("/oldroot/proc/sys/user/max_user_namespaces", max).map_err(|e| {
            io_err(e, || {
                format!("write(\"/proc/sys/user/max_user_namespaces\", {max:?})")
            })
        })?;
    }
    mount_fs("/cover", Path::new("/oldroot"), "", MsFlags::MS_BIND, None)
}

pub(super) fn enter_new_root() -> Result<(), SysError> {
    named(nix::unistd::chdir(NEWROOT), || {
        format!("chdir({NEWROOT:?})")
    })?;
    // pivot_root(".", "."): the scaffold, with the covered host under it, ends up stacked on
    // the new root and is detached at once, so nothing but the new root remains.
    named(nix::unistd::pivot_root(".", "."), || {
        format!("pivot_root({NEWROOT:?}, {NEWROOT:?})")
    })?;
    named(
        nix::mount::umount2(".", nix::mount::MntFlags::MNT_DETACH),
        || "umount2(<scaffold>, MNT_DETACH)".into(),
    )?;
    named(nix::unistd::chdir("/"), || "chdir(\"/\")".into())
}

const SCAFFOLD: &str = "/tmp";
const NEWROOT: &str = "/newroot";

/// An absolute path inside the sandbox, as seen from the scaffold. A trailing `/` is kept (a
/// `PathBuf` would drop it): it names a directory, so a file or link asked for there fails as
/// the kernel fails it (EISDIR, EEXIST), as under bubblewrap, and messages show the path as
/// given.
pub(super) fn at(p: &Path) -> PathBuf {
    // An empty destination is the root, named without a `/` so messages show it as given.
    if p.as_os_str().is_empty() {
        return PathBuf::from(NEWROOT);
    }
    let inside = Path::new(NEWROOT).join(p.strip_prefix("/").unwrap_or(p));
    if !names_a_directory(p) || inside == Path::new(NEWROOT) {
        return inside;
    }
    let mut s = inside.into_os_string();
    s.push("/");
    s.into()
}

/// Whether `p` ends with `/`.
fn names_a_directory(p: &Path) -> bool {
    p.as_os_str().as_bytes().ends_with(b"/")
}

/// mkdir -p (under the scaffold, where every path resolves inside it). Something other than
/// a directory already at `path` is ENOTDIR, as bubblewrap reports it (mkdir's EEXIST would
/// read as if the directory were there).
pub(super) fn make_dirs(path: &Path) -> Result<(), SysError> {
    mkdir_p(path, 0o755).map_err(|errno| SysError {
        call: format!("mkdir -p {path:?}"),
        errno,
    })
}

/// mkdir -p as bubblewrap's mkdir_with_parents and ensure_dir make directories: an entry
/// that is there and leads to a directory is taken, one that leads to anything else is
/// ENOTDIR, and one mkdir finds there but that leads nowhere (a dangling symlink) is passed
/// over, so that the next step fails where bubblewrap's does (the name under it, or the mount
/// on it: ENOENT). Tries the whole path first: the common case is one mkdir.
fn mkdir_p(path: &Path, mode: u32) -> Result<(), Errno> {
    match nix::unistd::mkdir(path, Mode::from_bits_truncate(mode)) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => there(path),
        Err(Errno::ENOENT) => {
            match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() && parent != path => {
                    mkdir_p(parent, mode)?
                }
                _ => return Err(Errno::ENOENT),
            }
            match nix::unistd::mkdir(path, Mode::from_bits_truncate(mode)) {
                Ok(()) => Ok(()),
                Err(Errno::EEXIST) => there(path),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// What mkdir found already at `path`, looked up as bubblewrap looks up each name it makes
/// (without a trailing `/`): a directory, or a symlink that leads nowhere, is passed over;
/// anything else (a file) is ENOTDIR.
fn there(path: &Path) -> Result<(), Errno> {
    let bytes = path.as_os_str().as_bytes();
    let name = match bytes.iter().rposition(|&b| b != b'/') {
        Some(end) => Path::new(std::ffi::OsStr::from_bytes(&bytes[..=end])),
        None => Path::new("/"),
    };
    match nix::sys::stat::stat(name) {
        Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => Err(Errno::ENOTDIR),
        _ => Ok(()),
    }
}

/// bwrap's modes for what an operation makes when `--perms` does not give one: 0755 for a
/// --tmpfs or --dir, 0666 for a --file, 0600 for the bind-data variants.
fn made_mode(perms: Option<u32>, file_bind: Option<bool>) -> u32 {
    perms.unwrap_or(match file_bind {
        None => 0o755,
        Some(false) => 0o666,
        Some(true) => 0o600,
    })
}

/// The mode bubblewrap gives an operation's destination when it makes the missing parents of
/// every destination, before the operation itself: the entry's own mode, or 0 for one that
/// has none (a bind, --proc, --dev, --mqueue, a symlink, an overlay), so that their parents
/// are 0700. None: no parents are made (a `-try` bind whose source is missing, --chmod, the
/// other front ends' operations).
fn bwrap_parent_perms<'a>(op: &'a FsOp, prep: &Prepared) -> Option<(&'a Path, u32)> {
    match op {
        FsOp::Bind { dest, .. } | FsOp::BindFd { dest, .. } => {
            (!matches!(prep, Prepared::Nothing)).then_some((dest, 0))
        }
        FsOp::Proc(dest) | FsOp::Dev(dest) | FsOp::Mqueue(dest) => Some((dest, 0)),
        FsOp::Symlink { dest, .. } | FsOp::Overlay { dest, .. } => Some((dest, 0)),
        // bubblewrap makes them for --remount-ro too, though it then wants a mount there.
        FsOp::RemountRo(dest) => Some((dest, 0)),
        FsOp::Tmpfs { dest, perms, .. } | FsOp::Dir { dest, perms } => {
            Some((dest, made_mode(*perms, None)))
        }
        FsOp::File {
            dest, perms, bind, ..
        } => Some((dest, made_mode(*perms, Some(bind.is_some())))),
        _ => None,
    }
}

/// Create the missing parents of `dest` (inside) with no more access than `perms` gives: group
/// and others keep read and search only where `perms` grants them anything (bwrap's rule).
/// Something other than a directory on the way is ENOTDIR, as bubblewrap reports it.
fn make_parents(dest: &Path, perms: u32) -> Result<(), SysError> {
    let mut mode = 0o700;
    if perms & 0o070 != 0 {
        mode |= 0o050;
    }
    if perms & 0o007 != 0 {
        mode |= 0o005;
    }
    // The new root itself is always there (a destination directly under `/` has no parent
    // to make): not asked again for every operation. A destination that ends with `/` is a
    // parent itself (bubblewrap's mkdir of every name before a `/`): made a directory, before
    // the operation tries to put a file or link there.
    let inside = at(dest);
    let parent = match names_a_directory(dest) {
        true => Some(inside.as_path()),
        false => inside.parent(),
    };
    let Some(parent) = parent.filter(|p| *p != Path::new(NEWROOT)) else {
        return Ok(());
    };
    mkdir_p(parent, mode).map_err(|errno| SysError {
        call: format!("mkdir parents for {dest:?}"),
        errno,
    })
}

pub(super) fn make_file(path: &Path, mode: u32) -> Result<File, SysError> {
    if let Some(parent) = path.parent() {
        make_dirs(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io_err(e, || format!("open({path:?}, O_CREAT)")))
}

/// Attach a prepared tree at `dest` (inside), creating the mount point.
pub(super) fn attach(tree: &OwnedFd, dest: &Path, is_dir: bool) -> Result<(), SysError> {
    let path = at(dest);
    if is_dir {
        make_dirs(&path)?;
    } else {
        ensure_file(&path)?;
    }
    sys::attach_tree(tree.as_fd(), &path).map_err(|e| {
        // A symlink that leads nowhere, which make_dirs passes over (bubblewrap's mount
        // follows it and fails there): not a directory to mount on.
        let dangling =
            path.symlink_metadata().is_ok_and(|m| m.is_symlink()) && path.metadata().is_err();
        match is_dir && dangling {
            true => SysError {
                call: format!("mkdir -p {path:?}"),
                errno: Errno::ENOTDIR,
            },
            false => e,
        }
    })
}

/// [`attach`] for a bind the caller asked for, then a check that the destination's path now
/// leads to the root of the tree just attached. A symlink on the way (in a root filesystem
/// the caller binds, which a task may have written) can route the path through the directory
/// the tree lands on, so that once the tree is there the same path leads elsewhere: the
/// steps after it that name paths under the destination (a --tmpfs mask, --remount-ro, a
/// nested bind) would then act somewhere else and leave this tree as it is. bubblewrap makes
/// the same check against its mount table.
fn attach_bind(tree: &OwnedFd, src: &Path, dest: &Path, is_dir: bool) -> Result<(), SysError> {
    let path = at(dest);
    attach(tree, dest, is_dir).map_err(|e| {
        // A directory onto a symlink (the name itself, also when given with a trailing `/`):
        // bubblewrap's mount(2) follows it and fails where it leads nowhere (ENOENT);
        // move_mount does not follow one that leads somewhere (refused).
        let bytes = path.as_os_str().as_bytes();
        let link = Path::new(std::ffi::OsStr::from_bytes(
            bytes.strip_suffix(b"/").unwrap_or(bytes),
        ));
        match is_dir && link.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
            true => SysError {
                call: format!("bind mount {src:?} on {dest:?}"),
                errno: match path.metadata() {
                    Err(_) => Errno::ENOENT,
                    Ok(_) => Errno::ELOOP,
                },
            },
            false => e,
        }
    })?;
    let id = |st: nix::sys::stat::FileStat| (st.st_dev, st.st_ino);
    let now = named(nix::sys::stat::stat(&path), || {
        format!("stat({path:?}) after the bind")
    })?;
    let root = named(nix::sys::stat::fstat(tree), || {
        format!("fstat(<tree bound at {dest:?}>)")
    })?;
    if id(now) != id(root) {
        return Err(SysError {
            call: format!(
                "the path {dest:?} no longer leads to the tree just bound there (a symlink on \
                 the way passes through it)"
            ),
            errno: Errno::ELOOP,
        });
    }
    Ok(())
}

/// A bind's source as bubblewrap names it: the path given, or the descriptor's proc link.
fn bind_source(op: &FsOp) -> PathBuf {
    match op {
        FsOp::Bind { src, .. } => src.clone(),
        FsOp::BindFd { fd, .. } => PathBuf::from(format!("/proc/self/fd/{fd}")),
        _ => PathBuf::new(),
    }
}

/// A directory under an attached or detached tree, reached from the tree itself (never from a
/// path that a symlink could send elsewhere): no symlink followed, nothing above the tree.
fn under_tree(tree: &OwnedFd, rel: &Path, name: &Path) -> Result<OwnedFd, SysError> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let rel = match rel.as_os_str().is_empty() {
        true => Path::new("."),
        false => rel,
    };
    named(nix::fcntl::openat2(tree.as_fd(), rel, how), || {
        format!("openat2(<tree>, {name:?}, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)")
    })
}

/// Make sure something exists at `path` to mount a file on: an empty file is created (with
/// its parents) unless an entry is already there, which is left as it is. The common case,
/// a new file in an existing directory, costs one mknod (no descriptor to open and close).
/// Mode 0444, bubblewrap's: in a writable bind the file stays on the host after the run.
fn ensure_file(path: &Path) -> Result<(), SysError> {
    let make = || {
        nix::sys::stat::mknod(
            path,
            nix::sys::stat::SFlag::S_IFREG,
            Mode::from_bits_truncate(0o444),
            0,
        )
    };
    let err = |e: Errno| SysError {
        call: format!("mknod({path:?}, S_IFREG)"),
        errno: e,
    };
    match make() {
        Ok(()) => Ok(()),
        Err(Errno::ENOENT) => {
            if let Some(parent) = path.parent() {
                make_dirs(parent)?;
            }
            make().map_err(err)
        }
        // A directory cannot take a file: bubblewrap's error for the file it would create.
        Err(Errno::EEXIST) if path.symlink_metadata().is_ok_and(|m| m.is_dir()) => Err(SysError {
            call: format!("mknod({path:?}, S_IFREG)"),
            errno: Errno::EISDIR,
        }),
        // A file or a symlink already there, dangling or not: the mount decides (it covers
        // a link itself, never what the link names).
        Err(Errno::EEXIST) if path.symlink_metadata().is_ok() => Ok(()),
        Err(e) => Err(err(e)),
    }
}

fn symlink(target: &Path, dest: &Path) -> Result<(), SysError> {
    let path = at(dest);
    let make = || std::os::unix::fs::symlink(target, &path);
    let err = |e: std::io::Error| io_err(e, || format!("symlink({target:?}, {dest:?})"));
    match make() {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                make_dirs(parent)?;
            }
            make().map_err(err)
        }
        // Already there: fine if it is the same link.
        Err(e) => match std::fs::read_link(&path) {
            Ok(existing) if existing == target => Ok(()),
            _ => Err(err(e)),
        },
    }
}

/// Set the mode of a directory this step just made, through a descriptor that does not
/// follow a symlink: one planted at the path meanwhile (through a writable bind) is refused,
/// not followed to whatever it names. `as_mkdir`: the mode mkdir(2) would have given it, as
/// bubblewrap makes a --dir: set-user-ID and set-group-ID are not taken from `perms`, and a
/// set-group-ID inherited from the parent stays.
fn chmod_made_dir(path: &Path, perms: u32, as_mkdir: bool) -> Result<(), SysError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir = named(nix::fcntl::open(path, flags, Mode::empty()), || {
        format!("open({path:?}, O_DIRECTORY|O_NOFOLLOW)")
    })?;
    let perms = match as_mkdir {
        true => {
            let now = named(nix::sys::stat::fstat(&dir), || format!("fstat({path:?})"))?;
            (perms & 0o1777) | (now.st_mode & 0o2000)
        }
        false => perms,
    };
    named(
        nix::sys::stat::fchmod(&dir, Mode::from_bits_retain(perms)),
        || format!("fchmod({path:?}, {perms:04o})"),
    )
}

fn chmod(path: &Path, perms: u32) -> Result<(), SysError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(perms))
        .map_err(|e| io_err(e, || format!("chmod({path:?}, {perms:04o})")))
}

/// Apply one filesystem operation; Scratch leaves its descriptor in `scratch`.
pub(super) fn apply(
    op: &FsOp,
    prep: Prepared,
    inh: &Inherited,
    scratch: &mut Option<(OwnedFd, Handed)>,
) -> Result<(), SysError> {
    let ro_tmpfs = inh.spec.root_readonly;
    // bwrap mode: the destination's missing parents, with bubblewrap's modes, once and here
    // for every operation (--tmpfs, --dir and --file included); each arm below makes its
    // destination alone.
    if inh.spec.bwrap.is_some()
        && let Some((dest, perms)) = bwrap_parent_perms(op, &prep)
    {
        make_parents(dest, perms)?;
    }
    match (op, prep) {
        (FsOp::SystemPath(p), Prepared::Tree { fd, .. }) => attach(&fd, p, true),
        (FsOp::SystemPath(p), Prepared::Link(target)) => symlink(&target, p),
        (FsOp::MinimalEtc, Prepared::Etc(entries)) => {
            make_dirs(&at(Path::new("/etc")))?;
            for (name, entry) in entries {
                let dest = Path::new("/etc").join(&name);
                attach(&entry.fd, &dest, entry.is_dir)?;
            }
            write_generated_etc(!inh.spec.ns.net)
        }
        (FsOp::Bind { dest, .. } | FsOp::BindFd { dest, .. }, Prepared::Tree { fd, is_dir }) => {
            attach_bind(&fd, &bind_source(op), dest, is_dir)
        }
        (
            FsOp::Bind { dest, .. } | FsOp::BindFd { dest, .. },
            Prepared::WritableTree {
                fd,
                is_dir,
                kernel_fs,
            },
        ) => {
            attach_bind(&fd, &bind_source(op), dest, is_dir)?;
            // A writable host tree keeps the kernel's interfaces (KERNEL_FS) read-only, each
            // reached from the tree itself.
            // The bind's own root (a source on one, a file of /proc say) is the tree itself.
            for rel in kernel_fs {
                let p = at(dest).join(&rel);
                let sub = match rel.as_os_str().is_empty() {
                    true => None,
                    false => Some(under_tree(&fd, &rel, &p)?),
                };
                let mount = sub.as_ref().map_or(fd.as_fd(), |s| s.as_fd());
                sys::set_mount_attrs(mount, "", sys::MOUNT_ATTR_RDONLY, true, &p)?;
            }
            Ok(())
        }
        (FsOp::Tmpfs { dest, perms, size }, _) => {
            let path = at(dest);
            make_dirs(&path)?;
            let mut opts = format!("mode={:o}", made_mode(*perms, None));
            if let Some(size) = size {
                opts.push_str(&format!(",size={size}"));
            }
            mount_tmpfs(&path, &opts)
        }
        (FsOp::Proc(dest), Prepared::HostProc { fd, knobs }) => {
            // No new pid namespace (bwrap mode): the host's /proc, as a new proc of the host's
            // pid namespace would show it.
            attach(&fd, dest, true)?;
            // Each knob's cover goes where the knob is in this /proc, reached from it.
            for (knob, t) in knobs {
                let p = at(dest).join(knob);
                let target = under_tree(&fd, Path::new(knob), &p)?;
                sys::attach_tree_at(t.as_fd(), target.as_fd(), &p)?;
            }
            Ok(())
        }
        (FsOp::Proc(dest), _) => {
            let path = at(dest);
            make_dirs(&path)?;
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            if ro_tmpfs {
                // airlock run: this proc is the user namespace's caps' way in (CapsVia);
                // then it is read-only, the mount and proc's superblock both, as the rest of
                // the root is.
                new_proc(inh, &path, flags)?;
                cap_through(inh, &path)?;
                let ro = flags | MsFlags::MS_RDONLY | MsFlags::MS_REMOUNT;
                named(
                    nix::mount::mount(None::<&str>, &path, None::<&str>, ro, None::<&str>),
                    || format!("mount({path:?}, MS_REMOUNT|MS_RDONLY)"),
                )?;
                return mask_proc_files(&path);
            }
            // A writable proc (bwrap mode) keeps the kernel's global knobs read-only when the
            // task may be the host's uid 0 (a root caller): it must not write the host's
            // sysctls or trigger sysrq. For any other caller the kernel already refuses, and
            // covering them would stop a nested proc mount (the kernel wants proc fully
            // visible), so they are left as bubblewrap leaves them.
            if !inh.caller_is_root {
                new_proc(inh, &path, flags)?;
                return cap_through(inh, &path);
            }
            // The covers find the new proc by its path again: a symlink on the way could
            // route that path through the directory proc lands on and send them elsewhere, so
            // the path must hold none.
            {
                use nix::fcntl::{OpenHow, ResolveFlag};
                let how = OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
                    .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
                named(
                    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, &path, how),
                    || format!("openat2({dest:?}, RESOLVE_NO_SYMLINKS) for --proc"),
                )?;
            }
            new_proc(inh, &path, flags)?;
            cap_through(inh, &path)?;
            protect_proc_knobs(&path)
        }
        (FsOp::Dev(dest), Prepared::Dev(nodes)) => {
            let shm = inh.spec.limits.map(|l| l.scratch_size);
            make_dev(dest, nodes, ro_tmpfs, shm)
        }
        (FsOp::Mqueue(dest), _) => {
            let path = at(dest);
            make_dirs(&path)?;
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            mount_fs("mqueue", &path, "mqueue", flags, None)
        }
        (FsOp::Dir { dest, perms }, _) => {
            let path = at(dest);
            // As bubblewrap: an existing directory keeps its mode (--perms is for one made
            // here; through a writable bind it would be the host's), and a symlink already
            // there is left as it is, unless it leads to something other than a directory
            // (a dangling one is left too): that is ENOTDIR, as a file there is.
            match path.symlink_metadata() {
                Ok(m) if m.is_dir() => return Ok(()),
                Ok(m) if m.file_type().is_symlink() => {
                    return match path.metadata() {
                        Ok(to) if !to.is_dir() => Err(SysError {
                            call: format!("mkdir -p {path:?}"),
                            errno: Errno::ENOTDIR,
                        }),
                        _ => Ok(()),
                    };
                }
                _ => {}
            }
            make_dirs(&path)?;
            match perms {
                Some(p) => chmod_made_dir(&path, *p, inh.spec.bwrap.is_some()),
                None => Ok(()),
            }
        }
        (FsOp::Symlink { target, dest }, _) => symlink(target, dest),
        (
            FsOp::File {
                fd,
                dest,
                perms,
                bind,
            },
            _,
        ) => {
            let mode = made_mode(*perms, Some(bind.is_some()));
            write_file_from_fd(*fd, dest, mode, *bind, inh.caller_is_root)
        }
        (FsOp::Chmod { path, perms }, _) => chmod(&at(path), *perms),
        (FsOp::RemountRo(dest), _) => {
            // A file bound on its own is a mount too (bubblewrap remounts it). As under
            // bubblewrap the mount also becomes nosuid and nodev: device nodes below a
            // remounted --dev-bind can no longer be opened. A path that does not resolve fails
            // in the open, named apart: bubblewrap's realpath() fails there, whatever the errno.
            let path = at(dest);
            let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
            let fd = nix::fcntl::open(&path, flags, Mode::empty()).map_err(|errno| SysError {
                call: format!("open({path:?}, O_PATH) to remount it RDONLY"),
                errno,
            })?;
            sys::set_mount_attrs(fd.as_fd(), "", RO, false, dest).map_err(|e| SysError {
                // bwrap mode words it as bubblewrap's "Can't remount readonly" by this call.
                call: format!("mount_setattr({path:?}, RDONLY)"),
                errno: e.errno,
            })
        }
        (FsOp::Overlay { upper, dest, .. }, Prepared::Overlay { lower, upper: host }) => {
            mount_overlay(dest, lower, upper, host)
        }
        (FsOp::Scratch(dest), _) => {
            *scratch = Some(make_scratch(inh, dest)?);
            Ok(())
        }
        // A system path or optional bind the host does not have.
        (_, Prepared::Nothing) => Ok(()),
        (op, _) => Err(SysError {
            call: format!("internal: {op:?} was not prepared"),
            errno: Errno::EINVAL,
        }),
    }
}

/// A new proc at `path`: the next one the launcher made of a joined pid namespace (bwrap's
/// --pidns), or one mounted here.
fn new_proc(inh: &Inherited, path: &Path, flags: MsFlags) -> Result<(), SysError> {
    let made = {
        let mut procs = inh.joined_procs.borrow_mut();
        (!procs.is_empty()).then(|| procs.remove(0))
    };
    match made {
        Some(fd) => sys::attach_tree(fd.as_fd(), path),
        None => mount_fs("proc", path, "proc", flags, None),
    }
}

/// The user namespace's caps, through the new /proc at `proc` where they go that way (CapsVia;
/// a second --proc writes the same values again).
fn cap_through(inh: &Inherited, proc: &Path) -> Result<(), SysError> {
    match super::caps_via(inh.spec) {
        super::CapsVia::OwnProc => super::cap_user_namespace(proc, false),
        _ => Ok(()),
    }
}

/// Whether `p` exists: an error other than ENOENT is an error, not "absent" (a knob that
/// could not be looked at must not be left writable).
fn present(p: &Path) -> Result<bool, SysError> {
    p.try_exists()
        .map_err(|e| io_err(e, || format!("stat({p:?})")))
}

/// Files of proc that list the host's kernel objects by their owner's uid rather than by pid:
/// /proc/keys shows every key its reader's host uid may view, whatever the namespace (an
/// unprivileged caller's own keys, a root caller's --host-uid's), each with its description
/// (a Kerberos cache's principal, say), and /proc/key-users their counts. keyctl is refused,
/// so only these would show them.
const PROC_MASKED: &[&str] = &["keys", "key-users"];

/// Cover each of PROC_MASKED in the proc at `path` with an empty read-only file of the
/// scaffold (airlock run's proc; bwrap mode's, as bubblewrap's, shows them).
fn mask_proc_files(path: &Path) -> Result<(), SysError> {
    let empty = Path::new("/proc-masked");
    drop(make_file(empty, 0o444)?);
    for name in PROC_MASKED {
        let dest = path.join(name);
        if present(&dest)? {
            let t = sys::clone_tree(empty)?;
            sys::set_mount_attrs(t.as_fd(), "", RO | sys::MOUNT_ATTR_NOEXEC, true, &dest)?;
            sys::attach_tree(t.as_fd(), &dest)?;
        }
    }
    Ok(())
}

/// Bind each of proc's kernel-wide knobs read-only over itself in the proc at `path`.
fn protect_proc_knobs(path: &Path) -> Result<(), SysError> {
    for knob in PROC_KNOBS {
        let (src, dest) = (path.join(knob), path.join(knob));
        if present(&src)? {
            let t = sys::clone_tree(&src)?;
            sys::set_mount_attrs(t.as_fd(), "", RO | sys::MOUNT_ATTR_NOEXEC, true, &src)?;
            sys::attach_tree(t.as_fd(), &dest)?;
        }
    }
    Ok(())
}

/// An overlay at `dest`: its layers are attached in the scaffold (/layers/N/...), which is
/// detached with the scaffold once the overlay holds them.
fn mount_overlay(
    dest: &Path,
    lower: Vec<OwnedFd>,
    upper: &OverlayUpper,
    host: Option<(OwnedFd, PathBuf)>,
) -> Result<(), SysError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = PathBuf::from(format!(
        "/layers/{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut lowers = Vec::new();
    for (i, fd) in lower.iter().enumerate() {
        let p = base.join(format!("lower{i}"));
        make_dirs(&p)?;
        sys::attach_tree(fd.as_fd(), &p)?;
        lowers.push(p.display().to_string());
    }
    // overlayfs lists the uppermost lower layer first; the last --overlay-src is uppermost.
    lowers.reverse();
    let mut opts = format!("lowerdir={},userxattr", lowers.join(":"));
    let rw = match (upper, host) {
        (OverlayUpper::Host { upper, work }, Some((tree, common))) => {
            let rwdir = base.join("rw");
            make_dirs(&rwdir)?;
            sys::attach_tree(tree.as_fd(), &rwdir)?;
            let inside = |p: &Path| rwdir.join(p.strip_prefix(&common).unwrap_or(p));
            opts.push_str(&format!(
                ",upperdir={},workdir={}",
                inside(upper).display(),
                inside(work).display()
            ));
            true
        }
        (OverlayUpper::Tmpfs, _) => {
            let t = base.join("tmp");
            make_dirs(&t)?;
            mount_tmpfs(&t, "mode=0755")?;
            make_dirs(&t.join("upper"))?;
            make_dirs(&t.join("work"))?;
            opts.push_str(&format!(
                ",upperdir={0}/upper,workdir={0}/work",
                t.display()
            ));
            true
        }
        _ => false,
    };
    let path = at(dest);
    make_dirs(&path)?;
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if !rw {
        flags |= MsFlags::MS_RDONLY;
    }
    mount_fs("overlay", &path, "overlay", flags, Some(&opts))
}

/// The deepest directory containing both paths.
fn common_parent(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Mount;

    /// The mounts a mount sits on, as the search for kernel interfaces tells a covered one
    /// (the path reaches a mount not among them) from a stale table (it reaches one of them).
    #[test]
    fn a_mount_sits_on_its_parents_down_to_the_root() {
        let table = b"1 0 0:1 / / rw - ext4 /dev/root rw\n\
                      2 1 0:2 / /m/p rw - proc proc rw\n\
                      3 1 0:3 / /m rw - tmpfs t rw\n\
                      4 3 0:4 / /m/p rw - proc proc rw\n\
                      5 1 0:5 / /x\\040y/p rw - proc proc rw\n";
        let all: Vec<Mount> = table
            .split(|&b| b == b'\n')
            .filter_map(Mount::parse)
            .collect();
        assert_eq!(all.len(), 5);
        assert_eq!(all[4].path, std::path::Path::new("/x y/p"));
        assert_eq!(all[1].fstype, b"proc");
        let below = |i: usize| all[i].below(&all);
        // (The root's parent, 0 here, is outside the table and ends the walk.)
        assert_eq!(below(1), [b"2", b"1", b"0"]);
        assert_eq!(below(3), [b"4", b"3", b"1", b"0"]);
        // /m/p reaches 4 (the later proc, on the tmpfs): not under 2, so 2 is covered.
        assert!(!below(1).contains(&&b"4"[..]));
    }

    /// A link in nested writable sources that leads out of the inner one but stays in the
    /// outer one is followed whatever the order of the binds; one that leads out of both is
    /// refused in either order.
    #[test]
    fn nested_writable_sources_judge_a_link_alike_in_either_order() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let proj = std::fs::canonicalize(dir.path()).unwrap().join("proj");
        let (a, b) = (proj.join("a"), proj.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        symlink("../b", a.join("l")).unwrap();
        symlink("/etc", a.join("out")).unwrap();
        for writable in [[proj.clone(), a.clone()], [a.clone(), proj.clone()]] {
            let route = super::bind_source_route(&a.join("l"), &writable).unwrap();
            assert_eq!(route, Ok(b.clone()), "{writable:?}");
            let why = super::bind_source_route(&a.join("out"), &writable)
                .unwrap()
                .unwrap_err();
            assert!(
                why.contains(&format!("inside the writable bind {} that", a.display())),
                "{writable:?}: {why}"
            );
        }
    }

    /// A route through a loop of links ends (ELOOP, naming the source) rather than walking
    /// forever: a task may leave one in a writable bind's source for a later run to meet.
    #[test]
    fn a_loop_of_links_ends_the_route() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let proj = std::fs::canonicalize(dir.path()).unwrap();
        symlink("b", proj.join("a")).unwrap();
        symlink("a", proj.join("b")).unwrap();
        let src = proj.join("a/f");
        let e = super::bind_source_route(&src, std::slice::from_ref(&proj)).unwrap_err();
        assert_eq!(e.errno, nix::errno::Errno::ELOOP, "{e}");
        assert!(e.to_string().contains(&format!("{src:?}")), "{e}");
    }
}
