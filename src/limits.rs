//! Resource limits: what was asked, what was applied, and by which mechanism.
//!
//! Memory and process count go to a cgroup when one can be had: a delegated cgroup v2 subtree
//! (the parent of the caller's own cgroup already enables the `memory` and `pids` controllers
//! for its children and is writable, and the caller's own sets no tighter limit: the run's cgroup goes
//! beside the caller's), else cgroup v1 `memory` and `pids` hierarchies when airlock runs
//! as root, else rlimits (RLIMIT_DATA and RLIMIT_NPROC, per process / per sandbox user). CPU
//! time, file size and open files are rlimits; the scratch size is the tmpfs `size=`. Every
//! cgroup airlock creates is removed after the run; one left by a SIGKILLed airlock is removed
//! by the next run that uses the same parent.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::sys::{SysError, io_err};

/// The defaults never break ordinary work (pip installing a large wheel, a compiler, a JIT)
/// yet stop a bomb: see the README's "Limits" section for the reasoning.
pub const DEFAULT_MEMORY: u64 = 4 << 30;
pub const DEFAULT_PIDS: u64 = 1024;
pub const DEFAULT_CPU_TIME: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_FILE_SIZE: u64 = 4 << 30;
pub const DEFAULT_NOFILE: u64 = 8192;
pub const DEFAULT_SCRATCH: u64 = 2 << 30;

/// The task's RLIMIT_SIGPENDING and RLIMIT_MSGQUEUE (see `rlimits`): signals queued at once in
/// the whole sandbox (each POSIX timer holds one), and bytes of POSIX message queues (one
/// queue of the default 10 messages of 8192 bytes takes 82,720).
pub const SIGPENDING: u64 = 1024;
pub const MSGQUEUE: u64 = 200 << 10;
/// The task's RLIMIT_MEMLOCK, per process: the kernel's default before 5.16, enough for the
/// secure memory of gpg-agent and libgcrypt (32 KiB).
pub const MEMLOCK: u64 = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory: u64,
    pub pids: u64,
    pub cpu_time: Duration,
    pub file_size: u64,
    pub nofile: u64,
    pub scratch_size: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory: DEFAULT_MEMORY,
            pids: DEFAULT_PIDS,
            cpu_time: DEFAULT_CPU_TIME,
            file_size: DEFAULT_FILE_SIZE,
            nofile: DEFAULT_NOFILE,
            scratch_size: DEFAULT_SCRATCH,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    CgroupV2,
    CgroupV1,
    Rlimit,
}

impl Mechanism {
    pub fn describe(self) -> &'static str {
        match self {
            Mechanism::CgroupV2 => "cgroup v2",
            Mechanism::CgroupV1 => "cgroup v1",
            Mechanism::Rlimit => "rlimit",
        }
    }
}

/// This process's hard limit of `r` (the sandbox's init inherits it): no limit if unreadable.
fn caller_hard(r: nix::sys::resource::Resource) -> u64 {
    nix::sys::resource::getrlimit(r).map_or(u64::MAX, |(_, hard)| hard)
}

/// This process's soft limit of `r` raised to its hard one. airlock run sets the task's own
/// rlimits at step 12 (at most the caller's hard limits), so a caller's lower soft limit must
/// not stop the launcher or the init before then: `ulimit -S -f 0` failed step 7 with EFBIG,
/// and the soft 1024 open files most sessions have failed `--input` number 1021 with EMFILE.
/// Where the soft limit is already the hard one (a file size limit usually is: unlimited),
/// nothing is set. Returns the soft and hard limits as they were, to be given back.
pub fn raise_soft_to_hard(r: nix::sys::resource::Resource) -> Result<(u64, u64), SysError> {
    use nix::sys::resource::{getrlimit, setrlimit};
    let (soft, hard) = crate::sys::named(getrlimit(r), || format!("getrlimit({r:?})"))?;
    if soft != hard {
        crate::sys::named(setrlimit(r, hard, hard), || {
            format!("setrlimit({r:?}, {hard}, {hard})")
        })?;
    }
    Ok((soft, hard))
}

/// The limits as they apply: the sandbox's init has no privilege over the host, so it can
/// lower an rlimit but never raise it above the caller's own hard limit. Each rlimit the run
/// sets is therefore at most the caller's (a cgroup's memory and pids limits are not
/// rlimits). `RLIMIT_CPU` counts whole seconds: the CPU time applies rounded down to them
/// (1999 ms is 1 s). The report shows both what was asked and this.
pub fn applicable(l: &Limits, mech: Mechanism) -> Limits {
    use nix::sys::resource::Resource;
    let at_most = |v: u64, r| v.min(caller_hard(r));
    let cpu_hard = caller_hard(Resource::RLIMIT_CPU);
    let mut a = Limits {
        cpu_time: Duration::from_secs(l.cpu_time.as_secs().max(1).min(cpu_hard.max(1))),
        file_size: at_most(l.file_size, Resource::RLIMIT_FSIZE),
        nofile: at_most(l.nofile, Resource::RLIMIT_NOFILE),
        ..*l
    };
    if mech == Mechanism::Rlimit {
        a.memory = at_most(l.memory, Resource::RLIMIT_DATA);
        a.pids = at_most(l.pids, Resource::RLIMIT_NPROC);
    }
    // The kernel keeps both in whole pages: tmpfs rounds its size up, a v1 memory limit is
    // rounded down (a v2 one is, in `Plan::bounded`).
    let page = page_size();
    a.scratch_size = l.scratch_size.div_ceil(page) * page;
    if mech == Mechanism::CgroupV1 {
        a.memory = kept_memory(l.memory, page);
    }
    a
}

/// A cgroup memory limit of `bytes` as the kernel keeps it: in whole pages, rounded down, and
/// at most PAGE_COUNTER_MAX of them (LONG_MAX / page size: 2^63 bytes or more read as that).
fn kept_memory(bytes: u64, page: u64) -> u64 {
    (bytes / page).min(i64::MAX as u64 / page) * page
}

/// The page size (4096 where sysconf cannot tell).
fn page_size() -> u64 {
    use nix::unistd::{SysconfVar, sysconf};
    sysconf(SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map_or(4096, |p| p as u64)
}

/// RLIMIT_CPU's hard limit for limits `applicable` returned, in seconds: at which the kernel
/// kills a process with SIGKILL.
pub fn cpu_hard_secs(l: &Limits) -> u64 {
    let cpu = l.cpu_time.as_secs().max(1);
    (cpu + 2)
        .min(caller_hard(nix::sys::resource::Resource::RLIMIT_CPU))
        .max(cpu)
}

/// The rlimits the sandbox's init sets before it starts the task (inherited by every process
/// of the task), as (resource, soft, hard), from limits `applicable` returned. Memory and
/// process count are here only when no cgroup holds them. The CPU hard limit sits 2 s above
/// the soft one (where the caller's own allows), so the kernel's SIGXCPU (which names the
/// cause) comes before its SIGKILL.
pub fn rlimits(l: &Limits, mech: Mechanism) -> Vec<(nix::sys::resource::Resource, u64, u64)> {
    use nix::sys::resource::Resource;
    let cpu = l.cpu_time.as_secs().max(1);
    let cpu_hard = cpu_hard_secs(l);
    let core = caller_hard(Resource::RLIMIT_CORE).min(1);
    // A limit of the run's own, soft and hard, at most the caller's hard limit.
    let fixed = |r, v: u64| {
        let v = v.min(caller_hard(r));
        (r, v, v)
    };
    let mut v = vec![
        (Resource::RLIMIT_CPU, cpu, cpu_hard),
        (Resource::RLIMIT_FSIZE, l.file_size, l.file_size),
        (Resource::RLIMIT_NOFILE, l.nofile, l.nofile),
        // 1 byte, not 0: the kernel ignores RLIMIT_CORE when core_pattern pipes to a helper
        // (systemd-coredump, apport), which then runs as root on the host and stores the
        // task's memory outside the sandbox; 1 is the value at which it starts no helper
        // (fs/coredump.c, coredump_pipe) and writes no file (1 byte is below one page); the
        // policy answers the task's changes of it 0 and makes none (seccomp/README.md). A
        // caller whose own hard limit is 0 cannot raise it: its task keeps 0.
        (Resource::RLIMIT_CORE, core, core),
        // Queued signals and POSIX message queue bytes count against the sandbox's user
        // namespace and, up the chain, against its creator on the host (root for a root
        // caller), up to the creator's own limit; the task's rlimit caps the sandbox's share.
        // Left at the caller's (96369 signals and 819200 bytes on the dev VM), a root caller's
        // task queueing signals to itself until EAGAIN made every timer_create(2) and
        // sigqueue(3) of host root fail with EAGAIN, and one filling message queues made host
        // root's mq_open(O_CREAT) fail with EMFILE, until the run ended.
        fixed(Resource::RLIMIT_SIGPENDING, SIGPENDING),
        fixed(Resource::RLIMIT_MSGQUEUE, MSGQUEUE),
        // Locked pages of a file mapping are the page cache's: those the host had cached stay
        // charged to whatever cgroup read them first, not to the sandbox's, and cannot be
        // reclaimed. At the caller's 8 MiB per process, 40 processes of a root caller's task
        // under --memory 128m held 300 MiB of /usr locked while its cgroup counted 25 MiB (1024
        // processes: 8 GiB); under the rlimit fallback RLIMIT_DATA counts no file mapping.
        fixed(Resource::RLIMIT_MEMLOCK, MEMLOCK),
        // Step 12 drops a real-time policy or negative nice the task would inherit; these keep
        // it from taking them itself where the caller's own limits would allow it (limits.conf
        // gives rtprio 95 to the audio group on some desktops): no real-time priority, and nice
        // no lower than 0 (RLIMIT_NICE 20; a caller's lower limit stays).
        (Resource::RLIMIT_RTPRIO, 0, 0),
        nice_at_most_0(),
    ];
    if mech == Mechanism::Rlimit {
        v.push((Resource::RLIMIT_DATA, l.memory, l.memory));
        v.push((Resource::RLIMIT_NPROC, l.pids, l.pids));
    }
    v
}

/// RLIMIT_NICE, soft and hard, at most 20 (nice 0 the lowest value allowed) and at most the
/// caller's: a task cannot undo the caller's positive nice where the caller could not either.
fn nice_at_most_0() -> (nix::sys::resource::Resource, u64, u64) {
    use nix::sys::resource::Resource;
    let (soft, hard) = nix::sys::resource::getrlimit(Resource::RLIMIT_NICE).unwrap_or((0, 0));
    (Resource::RLIMIT_NICE, soft.min(20), hard.min(20))
}

/// A cgroup made for one run (one directory for v2; memory and pids directories for v1).
#[derive(Debug)]
pub struct Cgroup {
    pub mech: Mechanism,
    dirs: Vec<PathBuf>,
    /// v2: a descriptor of the directory, for clone3(CLONE_INTO_CGROUP).
    pub v2_fd: Option<OwnedFd>,
    /// v1: the `tasks` files, opened here by the launcher (the kernel checks the opener's
    /// credentials) and handed to the sandbox's init, which writes "0" to each to move itself
    /// in before it starts the task. Moving oneself as a single thread avoids the global lock
    /// a write of another pid to cgroup.procs takes, which costs a whole RCU grace period
    /// (about 12 ms here) when launches are spaced.
    pub v1_tasks: Vec<OwnedFd>,
    /// v2: where the cgroup2 is mounted, as far up as [`Cgroup::bounded`] looks.
    v2_mount: Option<PathBuf>,
}

fn write(path: &Path, text: &str) -> Result<(), SysError> {
    fs::write(path, text).map_err(|e| io_err(e, || format!("write({path:?}, {text:?})")))
}

/// A run's cgroup: 0755, or less by the caller's umask (a red team: under `umask 0` it was
/// 0777, and any host user could make a cgroup in it that airlock's rmdir then could not
/// remove, left behind for good).
fn make_dir(path: &Path) -> Result<(), SysError> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .mode(0o755)
        .create(path)
        .map_err(|e| io_err(e, || format!("mkdir({path:?}, 0755)")))
}

/// This process's cgroup path in the hierarchy with the given v1 controller, or the v2 one
/// (`controller` = "").
fn own_cgroup(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = if controller.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_string())
    })
}

/// A kernel-generated text file (procfs, cgroupfs), which reports no size: read with one
/// page-sized buffer first rather than std's small growing reads (seven calls for mountinfo).
fn read_text(path: &Path) -> Option<String> {
    read_text_or_absent(path).ok().flatten()
}

/// [`read_text`], telling a file that does not exist (None) from one that cannot be read.
fn read_text_or_absent(path: &Path) -> Result<Option<String>, ()> {
    use std::io::Read;
    let mut file = match fs::File::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        f => f.map_err(drop)?,
    };
    let mut text = String::with_capacity(4096);
    file.read_to_string(&mut text).map_err(drop)?;
    Ok(Some(text))
}

/// Where the cgroup v2 hierarchy is mounted: at one of the usual places (pure v2 or hybrid),
/// told by the filesystem's magic with one statfs each, else as the mount table says.
fn v2_mount() -> Option<PathBuf> {
    for p in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if nix::sys::statfs::statfs(p)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
        {
            return Some(PathBuf::from(p));
        }
    }
    let text = read_text(Path::new("/proc/self/mountinfo"))?;
    text.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mount_point = pre.split(' ').nth(4)?;
        (post.split(' ').next()? == "cgroup2").then(|| PathBuf::from(mount_point))
    })
}

fn joined(base: &Path, rel: &str) -> PathBuf {
    base.join(rel.trim_start_matches('/'))
}

fn writable(p: &Path) -> bool {
    nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Whether `p` is the caller's alone: owned by its effective uid and writable by no group or
/// other user. Root may write a parent delegated to another user, who could then remove the
/// run's empty cgroup between its mkdir and the writes of its limits, make one of the same
/// name (whose files would be that user's), and raise the limits root wrote; or move the
/// task's processes out to a cgroup of its own through the parent's `cgroup.procs`.
fn callers(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(p)
        .is_ok_and(|m| m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o022 == 0)
}

/// A process's start time (clock ticks since boot), which tells a live launcher from a later
/// process that reuses its pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = read_text(Path::new(&format!("/proc/{pid}/stat")))?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// Remove cgroups left by airlock processes that no longer exist (SIGKILLed mid-run). A
/// cgroup is named airlock-PID-START-PIDNS-N after the launcher that made it. The launcher
/// calls this once its own sandbox is set up, while the task runs, not on the way to it.
///
/// A cgroup directory's link count is 2 plus its subdirectories (the kernel keeps it so):
/// when `parent` holds no subdirectory but this run's own cgroup and `live` others known to
/// be in use (under cgroup v2, the caller's own leaf beside it: 1), there is nothing to list.
/// The listing, and its competition with the sandbox's start for two cores, cost a launch of
/// `/bin/true` about 0.13 ms (500 interleaved launches as root). A link count the filesystem
/// does not keep (1) or anything larger means a listing, as before.
pub fn remove_stale(parent: &Path, live: u64) {
    use std::os::unix::fs::MetadataExt;
    if fs::metadata(parent).is_ok_and(|m| (2..=3 + live).contains(&m.nlink())) {
        return;
    }
    remove_named(parent, |name, path| {
        name.strip_prefix("airlock-")
            .is_some_and(|tagged| left_behind(tagged, path))
    });
}

/// PID-START-PIDNS for the process `pid` of this process's pid namespace: what names a thing
/// after the process that made it (cgroups here, the demo's temporary directories). START
/// tells it from a later process that reuses the pid; PIDNS (the namespace's inode number)
/// tells whose pid it is, as launchers in other pid namespaces (containers) may share a cgroup
/// parent or a temporary directory with this one.
pub fn owner_tag(pid: u32) -> String {
    format!("{pid}-{}-{}", start_time(pid).unwrap_or(0), own_pidns())
}

/// This process's pid namespace: the inode number of `/proc/self/ns/pid` (0 if unreadable).
fn own_pidns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// How long a thing tagged by a process of another pid namespace must have gone unchanged
/// before it counts as left behind. Its pid means nothing here, so its age decides: a
/// launcher's cgroup is empty only from its mkdir until the sandbox's init joins it (a few
/// milliseconds), and a demo's directories live for its few seconds. A launcher stopped for
/// longer between the two fails closed when its init cannot join.
const FOREIGN_STALE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the process an [`owner_tag`] at the start of `tagged` (PID-START-PIDNS-...) names
/// has ended, for a thing at `path` named after it (a text that is not a tag: no). A start of
/// 0 counts as ended: it is what a root launcher's helper writes when the launcher was
/// SIGKILLed before the helper read its start time, and no live process starts at 0. A tag
/// from another pid namespace (or from an airlock before the namespace was in the tag) counts
/// as ended once `path` has not changed for [`FOREIGN_STALE`].
pub fn left_behind(tagged: &str, path: &Path) -> bool {
    let mut parts = tagged.split('-').map(str::parse::<u64>);
    let (Some(Ok(pid)), Some(Ok(start)), Some(Ok(pidns))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if pidns == own_pidns() {
        return u32::try_from(pid).map_or(true, |pid| start_time(pid) != Some(start));
    }
    fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().is_ok_and(|age| age >= FOREIGN_STALE))
}

/// Remove the directories in `parent` that `doomed` picks by name and path (a cgroup holding
/// a process refuses, and stays).
fn remove_named(parent: &Path, doomed: impl Fn(&str, &Path) -> bool) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if e.file_name().to_str().is_some_and(|n| doomed(n, &path)) {
            let _ = fs::remove_dir(path);
        }
    }
}

/// How the names of the launcher `pid`'s cgroups begin: airlock-PID-START-PIDNS-.
fn name_prefix(pid: u32) -> String {
    format!("airlock-{}-", owner_tag(pid))
}

/// The cgroup's name, after the launcher `pid`: given, since a root launcher's helper (another
/// process) makes its cgroup v1.
fn unique_name(pid: u32) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{}{}", name_prefix(pid), N.fetch_add(1, Ordering::Relaxed))
}

/// Remove the cgroups in `parent` named after the launcher `pid` (this process, alive): what a
/// helper that ended before it reported may have made (no process is in them yet).
pub fn remove_own(parent: &Path, pid: u32) {
    let prefix = name_prefix(pid);
    remove_named(parent, |name, _| name.starts_with(&prefix));
}

/// Where memory and pids limits can go for this caller.
pub enum Plan {
    /// A delegated v2 cgroup (the parent of the caller's own, or the root) enabling memory and
    /// pids for its children, in the cgroup2 mounted at `mount`; `beside`: the caller's own
    /// cgroup is one of those children (not the root itself), whose CPU and I/O shares the
    /// run's cgroup takes: `shares` (see [`leaf_shares`]).
    V2 {
        parent: PathBuf,
        mount: PathBuf,
        beside: bool,
        shares: Shares,
    },
    /// v1 memory and pids hierarchies (root only).
    V1 {
        memory: PathBuf,
        pids: PathBuf,
    },
    Rlimits,
}

impl Plan {
    /// How many subdirectories of [`Plan::parents`] other than the run's own are known to be
    /// live: the caller's own cgroup, when the run's goes beside it (see [`remove_stale`]).
    pub fn live_siblings(&self) -> u64 {
        match self {
            Plan::V2 { beside: true, .. } => 1,
            _ => 0,
        }
    }

    /// The directories this plan makes its cgroups in.
    pub fn parents(&self) -> Vec<PathBuf> {
        match self {
            Plan::V2 { parent, .. } => vec![parent.clone()],
            Plan::V1 { memory, pids } => vec![memory.clone(), pids.clone()],
            Plan::Rlimits => vec![],
        }
    }

    /// `l` (memory and pids as the run's cgroup will have them: memory in whole pages, as the
    /// kernel keeps `memory.max`) bounded by the cgroups above it, for `airlock explain`: see
    /// [`Cgroup::bounded`].
    pub fn bounded(&self, l: Limits) -> Limits {
        match self {
            Plan::V2 { parent, mount, .. } => {
                let memory = kept_memory(l.memory, page_size());
                v2_bounded(parent, mount, Limits { memory, ..l })
            }
            _ => l,
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        match self {
            Plan::V2 { .. } => Mechanism::CgroupV2,
            Plan::V1 { .. } => Mechanism::CgroupV1,
            Plan::Rlimits => Mechanism::Rlimit,
        }
    }
}

/// Where a run's v2 cgroup can be made for a process in the cgroup `own`, if anywhere.
///
/// A v2 cgroup that holds processes cannot enable controllers for its children (the "no
/// internal processes" rule; only the root cgroup is exempt), so a delegated subtree puts its
/// processes in leaves: airlock's own cgroup is such a leaf, and its run's cgroup goes beside
/// it, in the parent that enables `memory` and `pids` (what `own`'s `cgroup.controllers`
/// lists). The caller must be able to make a directory there and, since the kernel checks the
/// common ancestor of the cgroups a process moves between, to write its `cgroup.procs`; both
/// must be the caller's alone ([`callers`]), not another user's it may write as root; and the
/// leaf must bound its processes no tighter than the run's cgroup will ([`no_tighter_than`]),
/// since the run's cgroup is outside it. In the
/// root cgroup the run's cgroup goes below it, where the root enables both.
///
/// `own` is a path from the root of the caller's cgroup namespace, and the mount's paths start
/// at the cgroup it was mounted from: the two agree in the initial namespace, checked only once
/// a parent is found (one stat; no cost where v2 has no controllers). Elsewhere (a container)
/// the mount table says where the mount starts: a cgroup2 mounted inside the namespace starts
/// at its root, as the paths do; one mounted outside it (`unshare -C` under the host's mount:
/// the table's root field reads `/..`) is above the namespace, where `own` names no directory
/// of the mount, and gives no parent (rlimits). Taken as a path of the mount, `own` named
/// another cgroup: with `nsdelegate` (systemd's mount) clone3 then refused it (ENOENT, exit 125),
/// without, root's run was made in the host's root cgroup, outside the namespace's.
///
/// Returns the parent, and whether the caller's cgroup is a child of it (not the root itself).
fn v2_parent(mnt: &Path, own: &str, l: &Limits) -> Option<(PathBuf, bool, Shares)> {
    let found = v2_parent_at(mnt, own, l)?;
    if in_initial_cgroup_ns() {
        return Some(found);
    }
    let inside = own_in_mount(&read_text(Path::new("/proc/self/mountinfo"))?, mnt, own)?;
    v2_parent_at(mnt, &inside, l)
}

fn v2_parent_at(mnt: &Path, own: &str, l: &Limits) -> Option<(PathBuf, bool, Shares)> {
    let own_dir = joined(mnt, own);
    let ctrls = |file: &str| read_text(&own_dir.join(file)).unwrap_or_default();
    let has_both = |ctrls: &str| {
        let has = |c: &str| offers(ctrls, c);
        has("memory") && has("pids")
    };
    if own == "/" {
        return (has_both(&ctrls("cgroup.subtree_control"))
            && writable(&own_dir)
            && callers(&own_dir))
        .then_some((own_dir, false, vec![]));
    }
    let parent = own_dir.parent()?.to_path_buf();
    let procs = parent.join("cgroup.procs");
    let controllers = ctrls("cgroup.controllers");
    (has_both(&controllers)
        && writable(&parent)
        && writable(&procs)
        && callers(&parent)
        && callers(&procs)
        && no_tighter_than(&own_dir, l, &controllers))
    .then(|| (parent, true, leaf_shares(&own_dir, &controllers)))
}

/// Whether a `cgroup.controllers` (or `cgroup.subtree_control`) text lists `controller`.
fn offers(controllers: &str, controller: &str) -> bool {
    controllers.split_whitespace().any(|x| x == controller)
}

/// Lines to write to a run's v2 cgroup's files: (file, line).
pub type Shares = Vec<(&'static str, String)>;

/// The caller's leaf `dir`'s CPU and I/O shares that differ from a new cgroup's, where its
/// `controllers` offer them: its `cpu.weight` (100 unset), `cpu.idle` (0), `cpu.uclamp.max`
/// (max), and each line of `io.weight` and `io.bfq.weight` (`default 100` alone unset; a
/// device's weight is a line of its own). A run's cgroup made beside the leaf starts with the
/// defaults, so a task launched from a low-weight or idle scope (`systemd-run --scope -p
/// CPUWeight=20`) would otherwise compete with the leaf's siblings at the default weight; the
/// run's cgroup is given these lines instead (the kernel takes one line per write). These are
/// shares, not bounds ([`no_tighter_than`] compares those): repeated rather than a reason for
/// rlimits. A file that cannot be read is left at the default.
fn leaf_shares(dir: &Path, controllers: &str) -> Shares {
    let on = |c: &str| offers(controllers, c);
    let mut shares = Vec::new();
    for (controller, file, unset) in [
        ("cpu", "cpu.weight", "100"),
        ("cpu", "cpu.idle", "0"),
        ("cpu", "cpu.uclamp.max", "max"),
        ("io", "io.weight", "default 100"),
        ("io", "io.bfq.weight", "default 100"),
    ] {
        if !on(controller) {
            continue;
        }
        if let Some(text) = read_text(&dir.join(file))
            && text.trim() != unset
        {
            shares.extend(text.lines().map(|line| (file, line.trim().to_string())));
        }
    }
    shares
}

/// Whether the caller's own cgroup `dir` bounds its processes no tighter than the run's cgroup
/// `l` asks for would: its `memory.max` and `memory.high` at least `l.memory`, its `pids.max`
/// at least `l.pids` ("max": no bound), and no CPU, I/O or CPU-set limit (`cpu.max` reads "max
/// PERIOD", `io.max` and the cpusets are empty when unset). A run's cgroup made beside the
/// caller's leaf is outside it, so a tighter limit there (`systemd-run --scope -p TasksMax=20
/// airlock run --pids 100`, `-p MemoryMax=`, `CPUQuota=`, `AllowedCPUs=`) would not bound the
/// task; under rlimits the task stays in the leaf, bounded by it. systemd's default `TasksMax=`
/// of a service or scope (15% of the kernel's pid limit) is above the default `--pids`. A file
/// absent (its controller not enabled there) sets no bound; one that cannot be read, one.
///
/// The limits the run's cgroup sets none of (`hugetlb.SIZE.max`, `misc.max`, `rdma.max`) must
/// be unset in the leaf (every value "max") where its `controllers` offer them: those are read
/// only then, the huge page sizes from a listing of the leaf.
fn no_tighter_than(dir: &Path, l: &Limits, controllers: &str) -> bool {
    // Each file, the first word it reads when unset, and the least bound it may read instead.
    let files = [
        ("memory.max", "max", Some(l.memory)),
        ("memory.high", "max", Some(l.memory)),
        ("pids.max", "max", Some(l.pids)),
        ("cpu.max", "max", None),
        ("io.max", "", None),
        ("cpuset.cpus", "", None),
        ("cpuset.mems", "", None),
    ];
    let bounded = files.iter().any(|&(file, unset, least)| {
        let loose =
            |v: &str| v == unset || least.is_some_and(|n| v.parse::<u64>().is_ok_and(|x| x >= n));
        match read_text_or_absent(&dir.join(file)) {
            Ok(Some(text)) => !loose(text.split_whitespace().next().unwrap_or("")),
            Ok(None) => false,
            Err(()) => true,
        }
    });
    if bounded {
        return false;
    }
    let on = |c: &str| offers(controllers, c);
    // Every value "max" (`KEY max`, `DEVICE hca_handle=max ...` after the key when `keyed`).
    let unset = |file: &str, keyed: bool| match read_text_or_absent(&dir.join(file)) {
        Ok(Some(text)) => text.lines().all(|line| {
            let mut words = line.split_whitespace();
            if keyed {
                words.next();
            }
            words.all(|w| w.rsplit('=').next() == Some("max"))
        }),
        Ok(None) => true,
        Err(()) => false,
    };
    let huge_pages_unset = || {
        fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().all(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                !(name.starts_with("hugetlb.") && name.ends_with(".max")) || unset(&name, false)
            })
        })
    };
    (!on("misc") || unset("misc.max", true))
        && (!on("rdma") || unset("rdma.max", true))
        && (!on("hugetlb") || huge_pages_unset())
}

/// Whether this process is in the initial cgroup namespace, whose inode number is fixed
/// (PROC_CGROUP_INIT_INO, include/linux/proc_ns.h).
fn in_initial_cgroup_ns() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/cgroup").is_ok_and(|m| m.ino() == 0xEFFF_FFFB)
}

/// `own` (a path from the root of this process's cgroup namespace) as a path of the cgroup2
/// mount at `mnt`, from the root field of its line in `mountinfo` (the last one there, on
/// top): None when the mount starts above the namespace's root (`/..`) or off `own`'s way, or
/// `own` is above that root itself (a process moved out of it: `/../x`).
fn own_in_mount(mountinfo: &str, mnt: &Path, own: &str) -> Option<String> {
    own_in_mount_of(mountinfo, "cgroup2", mnt, own)
}

/// [`own_in_mount`] for a mount of the filesystem type `fstype` (`cgroup` for a v1 hierarchy).
fn own_in_mount_of(mountinfo: &str, fstype: &str, mnt: &Path, own: &str) -> Option<String> {
    let root = mountinfo.lines().rev().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut f = pre.split(' ');
        let (root, at) = (f.nth(3)?, f.next()?);
        (post.split(' ').next()? == fstype && Path::new(at) == mnt).then_some(root)
    })?;
    let up = |p: &str| p.split('/').any(|c| c == "..");
    if up(root) || up(own) {
        return None;
    }
    let rest = own.strip_prefix(root.trim_end_matches('/'))?;
    match rest {
        "" => Some("/".into()),
        r if r.starts_with('/') => Some(r.into()),
        _ => None,
    }
}

/// Where the limits `l` can go for this caller.
pub fn detect(caller_is_root: bool, l: &Limits) -> Plan {
    // /proc/self/cgroup is read once per launch; mountinfo only when there is a v2 path.
    let cgroups = read_text(Path::new("/proc/self/cgroup")).unwrap_or_default();
    if let Some(own) = own_cgroup(&cgroups, "")
        && let Some(mnt) = v2_mount()
        && let Some((parent, beside, shares)) = v2_parent(&mnt, &own, l)
    {
        return Plan::V2 {
            parent,
            mount: mnt,
            beside,
            shares,
        };
    }
    if caller_is_root {
        // The caller's cgroup in a v1 hierarchy: its path under the hierarchy's mount, or,
        // where the mount's root is below the hierarchy's (a container's bind of its own
        // cgroup, as podman's under cgroup v1, where /proc/self/cgroup still names it from the
        // host's root), the path from the mount's root (mountinfo read only then).
        let v1 = |ctrl: &str, file: &str| -> Option<PathBuf> {
            let base = Path::new("/sys/fs/cgroup").join(ctrl);
            let own = own_cgroup(&cgroups, ctrl)?;
            let direct = joined(&base, &own);
            if direct.join(file).exists() {
                return Some(direct);
            }
            let mountinfo = read_text(Path::new("/proc/self/mountinfo"))?;
            let inside = joined(&base, &own_in_mount_of(&mountinfo, "cgroup", &base, &own)?);
            inside.join(file).exists().then_some(inside)
        };
        // Root of another user namespace (a rootless container's) passes the check above but
        // may not write the host's hierarchies: for it, as for any other caller, rlimits. So
        // for root in cgroups delegated to another user, who could replace the run's cgroup
        // (made below the caller's) between its mkdir and its limits ([`callers`]).
        if let (Some(memory), Some(pids)) = (
            v1("memory", "memory.limit_in_bytes"),
            v1("pids", "cgroup.procs"),
        ) && writable(&memory)
            && writable(&pids)
            && callers(&memory)
            && callers(&pids)
        {
            return Plan::V1 { memory, pids };
        }
    }
    Plan::Rlimits
}

impl Cgroup {
    /// Create the cgroup `plan` names for this run of the launcher `pid`, or None when only
    /// rlimits are available. A cgroup that is available but cannot be set up is an error
    /// (fail closed).
    pub fn create(plan: Plan, l: &Limits, pid: u32) -> Result<Option<Cgroup>, SysError> {
        match plan {
            Plan::V2 {
                parent,
                mount,
                shares,
                ..
            } => {
                let dir = parent.join(unique_name(pid));
                make_dir(&dir)?;
                let mut cg = Cgroup {
                    mech: Mechanism::CgroupV2,
                    dirs: vec![dir.clone()],
                    v2_fd: None,
                    v1_tasks: vec![],
                    v2_mount: Some(mount),
                };
                write(&dir.join("memory.max"), &l.memory.to_string())?;
                // No swap beyond the limit; the file is absent only without swap accounting.
                match write(&dir.join("memory.swap.max"), "0") {
                    Err(e) if e.errno != nix::errno::Errno::ENOENT => return Err(e),
                    _ => {}
                }
                write(&dir.join("pids.max"), &l.pids.to_string())?;
                for (file, line) in &shares {
                    write(&dir.join(file), line)?;
                }
                let flags = nix::fcntl::OFlag::O_PATH
                    | nix::fcntl::OFlag::O_DIRECTORY
                    | nix::fcntl::OFlag::O_CLOEXEC;
                let fd = nix::fcntl::open(&dir, flags, nix::sys::stat::Mode::empty()).map_err(
                    |errno| SysError {
                        call: format!("open({dir:?}, O_PATH)"),
                        errno,
                    },
                )?;
                cg.v2_fd = Some(fd);
                Ok(Some(cg))
            }
            Plan::V1 { memory, pids } => {
                let name = unique_name(pid);
                let (mdir, pdir) = (memory.join(&name), pids.join(&name));
                let mut cg = Cgroup {
                    mech: Mechanism::CgroupV1,
                    dirs: vec![],
                    v2_fd: None,
                    v1_tasks: vec![],
                    v2_mount: None,
                };
                make_dir(&mdir)?;
                cg.dirs.push(mdir.clone());
                make_dir(&pdir)?;
                cg.dirs.push(pdir.clone());
                let memory = l.memory.to_string();
                write(&mdir.join("memory.limit_in_bytes"), &memory)?;
                // Where the kernel offers the file: with swap accounting, swap counts too; and
                // socket buffers, which v1 charges to a cgroup only once its own TCP limit is
                // set (v2 counts them in memory.max). Without that one, a task's loopback
                // connections held 643 MiB of the machine's one TCP pool (net.ipv4.tcp_mem)
                // under --memory 256m, and at 2.2 GiB every host socket is under its hard limit.
                for optional in [
                    "memory.memsw.limit_in_bytes",
                    "memory.kmem.tcp.limit_in_bytes",
                ] {
                    let file = mdir.join(optional);
                    if file.exists() {
                        write(&file, &memory)?;
                    }
                }
                write(&pdir.join("pids.max"), &l.pids.to_string())?;
                for d in [&mdir, &pdir] {
                    let tasks = d.join("tasks");
                    let f = fs::OpenOptions::new()
                        .write(true)
                        .open(&tasks)
                        .map_err(|e| io_err(e, || format!("open({tasks:?}, O_WRONLY)")))?;
                    cg.v1_tasks.push(OwnedFd::from(f));
                }
                Ok(Some(cg))
            }
            Plan::Rlimits => Ok(None),
        }
    }

    /// `l` with memory and pids as the run's cgroup v2 bounds them: its own `memory.max` and
    /// `pids.max` as the kernel keeps them (memory in whole pages), or a lower one of a cgroup
    /// above it up to the mount's root (a container's or a slice's), which bounds the run as
    /// well. v1's is `l` as it is (not read: no cost on that path).
    pub fn bounded(&self, l: Limits) -> Limits {
        match (&self.v2_mount, self.dirs.first()) {
            (Some(mount), Some(dir)) => v2_bounded(dir, mount, l),
            _ => l,
        }
    }

    /// Which cgroup limit ended the task, if any: the OOM killer fired, or a fork was refused.
    pub fn limit_hit(&self) -> Option<&'static str> {
        let read = |p: PathBuf| read_text(&p).unwrap_or_default();
        let count = |text: &str, key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let (oom, pids_max) = match self.mech {
            Mechanism::CgroupV2 => {
                let d = &self.dirs[0];
                (
                    count(&read(d.join("memory.events")), "oom_kill "),
                    count(&read(d.join("pids.events")), "max "),
                )
            }
            _ => (
                count(&read(self.dirs[0].join("memory.oom_control")), "oom_kill "),
                count(&read(self.dirs[1].join("pids.events")), "max "),
            ),
        };
        if oom > 0 {
            Some("memory")
        } else if pids_max > 0 {
            Some("pids")
        } else {
            None
        }
    }

    /// Remove the cgroup (all its processes are gone by now). Once in CI the kernel still
    /// counted one of them after the init was reaped, and the removal failed (EBUSY; the
    /// cgroup stayed until the next launch's sweep of stale ones): it is tried again, 1 ms
    /// apart and then further apart, for up to 1 s in all (50 ms until stop 32, which a
    /// loaded host may outlast). A removal that succeeds at once costs nothing more.
    pub fn remove(&self) {
        let until = std::time::Instant::now() + Duration::from_secs(1);
        for d in &self.dirs {
            let mut pause = Duration::from_millis(1);
            loop {
                match fs::remove_dir(d) {
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY)
                            && std::time::Instant::now() < until =>
                    {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(50));
                    }
                    _ => break,
                }
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// `l` with memory and pids at most the `memory.max` and `pids.max` of `dir` and of each cgroup
/// above it up to `mount`, the cgroup2's root (which has neither file; "max" is no bound).
fn v2_bounded(dir: &Path, mount: &Path, mut l: Limits) -> Limits {
    let max =
        |d: &Path, file: &str| -> Option<u64> { read_text(&d.join(file))?.trim().parse().ok() };
    for d in dir.ancestors().take_while(|d| d.starts_with(mount)) {
        l.memory = l.memory.min(max(d, "memory.max").unwrap_or(u64::MAX));
        l.pids = l.pids.min(max(d, "pids.max").unwrap_or(u64::MAX));
    }
    l
}

/// The report's `limits` object: for each limit, what was asked, what was applied and how.
pub fn to_json(l: &Limits, applied: &Limits, mech: Mechanism) -> Value {
    let cg = |what: &str| match mech {
        Mechanism::Rlimit => format!("rlimit ({what})"),
        m => m.describe().to_string(),
    };
    let entry = |f: fn(&Limits) -> u64, how: String| json!({"requested": f(l), "applied": f(applied), "mechanism": how});
    json!({
        "memory": entry(|l| l.memory, cg("RLIMIT_DATA, per process")),
        "pids": entry(|l| l.pids, cg("RLIMIT_NPROC, per sandbox user")),
        "cpu_time_ms": entry(|l| l.cpu_time.as_millis() as u64, "rlimit (RLIMIT_CPU, per process)".into()),
        "file_size": entry(|l| l.file_size, "rlimit (RLIMIT_FSIZE)".into()),
        "nofile": entry(|l| l.nofile, "rlimit (RLIMIT_NOFILE)".into()),
        "scratch_size": entry(|l| l.scratch_size, "tmpfs size".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::resource::Resource;

    /// The caller's cgroup as a path of the cgroup2 mount, from a cgroup namespace: a mount
    /// made inside it starts at its root; the host's, seen from inside, above it.
    #[test]
    fn a_cgroup_namespaces_path_is_found_in_the_mount_only_below_its_root() {
        let line = |root: &str, at: &str, fs: &str| {
            format!("25 23 0:22 {root} {at} rw,relatime - {fs} none rw,nsdelegate\n")
        };
        let mnt = Path::new("/sys/fs/cgroup");
        let inside = line("/", "/sys/fs/cgroup", "cgroup2");
        // A v1 hierarchy bound from a container's own cgroup (podman under cgroup v1).
        let v1 = "97 93 0:32 /libpod_parent/libpod-ab /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let memory = Path::new("/sys/fs/cgroup/memory");
        assert_eq!(
            own_in_mount_of(v1, "cgroup", memory, "/libpod_parent/libpod-ab"),
            Some("/".into())
        );
        assert_eq!(
            own_in_mount_of(v1, "cgroup2", memory, "/libpod_parent/libpod-ab"),
            None
        );
        assert_eq!(own_in_mount(&inside, mnt, "/init"), Some("/init".into()));
        assert_eq!(own_in_mount(&inside, mnt, "/"), Some("/".into()));
        assert_eq!(own_in_mount(&inside, mnt, "/../x"), None);
        // The host's mount, under which `unshare -C` was run in /a/leaf.
        let above = line("/../..", "/sys/fs/cgroup", "cgroup2");
        assert_eq!(own_in_mount(&above, mnt, "/"), None);
        assert_eq!(own_in_mount(&above, mnt, "/leaf"), None);
        // A subtree's mount: paths below its root only; the last mount at a place counts.
        let sub = line("/c", "/sys/fs/cgroup", "cgroup2");
        assert_eq!(own_in_mount(&sub, mnt, "/c/init"), Some("/init".into()));
        assert_eq!(own_in_mount(&sub, mnt, "/c"), Some("/".into()));
        assert_eq!(own_in_mount(&sub, mnt, "/cx/init"), None);
        assert_eq!(own_in_mount(&(inside.clone() + &sub), mnt, "/init"), None);
        assert_eq!(
            own_in_mount(&(sub + &inside), mnt, "/init"),
            Some("/init".into())
        );
        // Another place or another filesystem is no answer.
        assert_eq!(
            own_in_mount(&line("/", "/mnt", "cgroup2"), mnt, "/init"),
            None
        );
        assert_eq!(
            own_in_mount(&line("/", "/sys/fs/cgroup", "tmpfs"), mnt, "/"),
            None
        );
    }

    /// A leaf's files as the kernel writes them when nothing is set (cpu.max keeps its period),
    /// or with memory and pids bounds no tighter than the run's (systemd's default TasksMax=),
    /// leave the run beside it; any tighter bound, or a CPU, I/O or CPU-set limit, as systemd's
    /// MemoryMax=, TasksMax=, CPUQuota=, IOReadBandwidthMax= or AllowedCPUs= writes it, does
    /// not; a file absent (controller off) sets no bound. Huge pages, misc and RDMA limits, which
    /// the run's cgroup sets none of, count where the leaf's controllers offer them.
    #[test]
    fn a_leaf_bounding_tighter_than_the_run_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let l = Limits {
            memory: 1 << 30,
            pids: 100,
            ..Limits::default()
        };
        // Unset, or looser than the run's, as the kernel writes them; the limits the run's
        // cgroup does not set (huge pages, misc, RDMA) unset.
        let loose = [
            ("memory.max", "max\n"),
            ("memory.high", "1073741824\n"),
            ("pids.max", "4915\n"),
            ("cpu.max", "max 100000\n"),
            ("io.max", ""),
            ("cpuset.cpus", "\n"),
            ("hugetlb.2MB.max", "max\n"),
            ("hugetlb.1GB.max", "max\n"),
            ("hugetlb.2MB.rsvd.max", "max\n"),
            ("misc.max", "sev max\nsev_es max\n"),
            ("rdma.max", "mlx5_0 hca_handle=max hca_object=max\n"),
        ];
        for (f, text) in loose {
            fs::write(dir.path().join(f), text).unwrap();
        }
        let ctrls = "cpuset cpu io memory hugetlb pids rdma misc";
        assert!(no_tighter_than(dir.path(), &l, ctrls));
        // Each tighter bound keeps the run in the leaf; `offered`: read only where the leaf's
        // controllers offer it (the limits the run's cgroup does not set).
        for (f, text, offered) in [
            ("memory.max", "536870912\n", false),
            ("memory.high", "1073737728\n", false),
            ("pids.max", "99\n", false),
            ("cpu.max", "50000 100000\n", false),
            (
                "io.max",
                "8:0 rbps=1048576 wbps=max riops=max wiops=max\n",
                false,
            ),
            ("cpuset.cpus", "0-1\n", false),
            ("cpuset.mems", "0\n", false),
            ("hugetlb.1GB.max", "0\n", true),
            ("hugetlb.2MB.rsvd.max", "4194304\n", true),
            ("misc.max", "sev 4\nsev_es max\n", true),
            ("rdma.max", "mlx5_0 hca_handle=2 hca_object=max\n", true),
        ] {
            let before = fs::read_to_string(dir.path().join(f)).ok();
            fs::write(dir.path().join(f), text).unwrap();
            assert!(!no_tighter_than(dir.path(), &l, ctrls), "{f} {text:?}");
            assert_eq!(
                no_tighter_than(dir.path(), &l, "memory pids"),
                offered,
                "{f} {text:?} without its controller"
            );
            match before {
                Some(b) => fs::write(dir.path().join(f), b).unwrap(),
                None => fs::remove_file(dir.path().join(f)).unwrap(),
            }
        }
        assert!(no_tighter_than(dir.path(), &l, ctrls));
    }

    /// The task may not raise its own scheduling priority past the host's default, whatever
    /// the caller's limits allow: RLIMIT_RTPRIO 0, RLIMIT_NICE at most 20 (nice 0).
    #[test]
    fn no_raised_priority_is_allowed_to_the_task() {
        for mech in [Mechanism::Rlimit, Mechanism::CgroupV2] {
            let v = rlimits(&Limits::default(), mech);
            let find = |r| v.iter().find(|(res, _, _)| *res == r).copied();
            assert_eq!(
                find(Resource::RLIMIT_RTPRIO),
                Some((Resource::RLIMIT_RTPRIO, 0, 0))
            );
            let (_, soft, hard) = find(Resource::RLIMIT_NICE).expect("RLIMIT_NICE set");
            assert!(soft <= 20 && hard <= 20 && soft <= hard, "{soft} {hard}");
        }
    }
}
