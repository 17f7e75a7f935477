//! The validated, immutable description of one sandbox. Every front end (the `run` flags, a JSON
//! request) only produces a `Spec`; the boundary only reads one. Nothing here makes a syscall.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::limits::Limits;

/// Where the one writable scratch directory appears inside; it is the cwd, HOME and TMPDIR.
pub const SCRATCH: &str = "/work";
/// The task's identity inside the sandbox: an ordinary user, never uid 0.
pub const SANDBOX_UID: u32 = 1000;
pub const SANDBOX_GID: u32 = 1000;
pub const SANDBOX_USER: &str = "airlock";
/// The host uid/gid a root caller's task runs as, unless `--host-uid/--host-gid` say otherwise.
pub const DEFAULT_HOST_ID: u32 = 65534;
pub const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// In --json / --request mode: the default timeout and output cap.
pub const JSON_DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const JSON_DEFAULT_MAX_OUTPUT: usize = 8000;
/// The largest --max-output (max_output): airlock holds each stream's kept bytes, and the
/// report's text of them can be 6 times longer (a control byte is `\u0000`), so an unbounded
/// cap let a task that writes gigabytes grow airlock past the machine's memory (300 MB of
/// NULs took it to 2.3 GB) and lose the report. 64 MiB, as a request.
pub const MAX_OUTPUT_CEILING: usize = 64 << 20;
/// Result files: at most this many directory entries are examined, besides the inputs left as
/// handed (report::collect_files passes them over first); of the entries past that,
/// the first MAX_SKIPPED_LISTED are listed as skipped ("count limit") and the rest counted in
/// one entry named "*". At most MAX_RESULT_BYTES of file text come back in all; files past
/// that budget are skipped ("total size limit"), so the report stays bounded.
pub const MAX_RESULT_ENTRIES: usize = 1000;
pub const MAX_SKIPPED_LISTED: usize = 100;
pub const MAX_RESULT_BYTES: usize = 1 << 20;

/// airlock's own exit codes (the task's exit code passes through otherwise).
pub mod exit {
    pub const USAGE: i32 = 2;
    pub const TIMEOUT: i32 = 124;
    pub const SETUP_FAILED: i32 = 125;
    pub const NOT_EXECUTABLE: i32 = 126;
    pub const NOT_FOUND: i32 = 127;
}

/// A host path made visible inside. Read-only unless `writable` is set on purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub src: PathBuf,
    pub dest: PathBuf,
    pub writable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSource {
    /// A host file, opened by the launcher with the caller's rights and copied in.
    HostFile(PathBuf),
    /// Text given in a JSON request.
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub name: String,
    pub source: InputSource,
}

/// How the task's stdout/stderr reach the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The task writes straight to airlock's own stdout/stderr.
    Stream,
    /// airlock captures up to `max` bytes of each stream and of each result file and prints
    /// one JSON report.
    Json { max: usize },
}

/// How a host path is made visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// read-only, nosuid, nodev (the default everywhere)
    ReadOnly,
    /// writable, nosuid, nodev: a channel out of the sandbox
    ReadWrite,
    /// writable and device nodes usable (bwrap's --dev-bind only)
    Devices,
}

/// One step of building the sandbox's filesystem, applied in order on a fresh tmpfs root. A
/// later step at the same or a parent path covers an earlier one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsOp {
    /// A system path as the host has it: a directory is bound read-only, a symlink (usr-merge)
    /// is recreated; absent is skipped (except /usr).
    SystemPath(PathBuf),
    /// /etc with only the host files programs need, plus generated passwd, group, hosts.
    MinimalEtc,
    /// A host path; `optional` skips a missing source.
    Bind {
        src: PathBuf,
        dest: PathBuf,
        access: Access,
        optional: bool,
    },
    /// The tree an open descriptor refers to (bwrap's --bind-fd / --ro-bind-fd).
    BindFd {
        fd: i32,
        dest: PathBuf,
        access: Access,
    },
    Tmpfs {
        dest: PathBuf,
        perms: Option<u32>,
        size: Option<u64>,
    },
    /// A new proc of the sandbox's pid namespace, read-only.
    Proc(PathBuf),
    /// A minimal /dev: null zero full random urandom tty, pts, shm, fd and std links, and a
    /// terminal on stdout at console.
    Dev(PathBuf),
    Mqueue(PathBuf),
    Dir {
        dest: PathBuf,
        perms: Option<u32>,
    },
    Symlink {
        target: PathBuf,
        dest: PathBuf,
    },
    /// A file filled from a descriptor; with `bind`, bound over `dest` with that access
    /// (bwrap's --file, --bind-data, --ro-bind-data).
    File {
        fd: i32,
        dest: PathBuf,
        perms: Option<u32>,
        bind: Option<Access>,
    },
    Chmod {
        path: PathBuf,
        perms: u32,
    },
    RemountRo(PathBuf),
    /// The writable scratch tmpfs with the inputs copied in (airlock run).
    Scratch(PathBuf),
    /// An overlay of host directories (`sources`, lowest first) at `dest` (bwrap's --overlay,
    /// --tmp-overlay, --ro-overlay).
    Overlay {
        sources: Vec<PathBuf>,
        upper: OverlayUpper,
        dest: PathBuf,
    },
}

/// Where an overlay's writes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayUpper {
    /// Host directories: the upper layer and overlayfs's work directory.
    Host { upper: PathBuf, work: PathBuf },
    /// An invisible tmpfs, gone with the sandbox.
    Tmpfs,
    /// None: the overlay is read-only.
    ReadOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespaces {
    pub net: bool,
    pub pid: bool,
    pub ipc: bool,
    pub uts: bool,
    pub cgroup: bool,
}

impl Namespaces {
    pub const ALL: Namespaces = Namespaces {
        net: true,
        pid: true,
        ipc: true,
        uts: true,
        cgroup: true,
    };

    /// The clone flags of the namespaces asked for, besides the user and mount namespaces
    /// every sandbox gets (which the caller adds).
    pub fn flags(&self) -> libc::c_int {
        [
            (self.pid, libc::CLONE_NEWPID),
            (self.ipc, libc::CLONE_NEWIPC),
            (self.uts, libc::CLONE_NEWUTS),
            (self.cgroup, libc::CLONE_NEWCGROUP),
            (self.net, libc::CLONE_NEWNET),
        ]
        .into_iter()
        .filter(|&(on, _)| on)
        .fold(0, |f, (_, flag)| f | flag)
    }
}

/// Which seccomp filters the task gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seccomp {
    /// airlock's policy (seccomp/*.json).
    Policy,
    /// Compiled BPF programs read from these descriptors (bwrap's --seccomp, --add-seccomp-fd).
    Fds(Vec<i32>),
    /// None (bwrap's default when no filter is given).
    None,
}

/// The last steps before exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockdown {
    pub seccomp: Seccomp,
    /// setsid: no controlling terminal (TIOCSTI, CVE-2017-5226).
    pub new_session: bool,
    /// Capabilities kept (bwrap's --cap-add); none in airlock run.
    pub keep_caps: Vec<caps::Capability>,
    /// The task is the sandbox's pid 1 (no reaper).
    pub as_pid_1: bool,
    /// A Landlock domain scopes abstract unix sockets to the sandbox: airlock run with the
    /// host's network shared, where the kernel has the scope (the launcher decides); never in
    /// bwrap mode, as bubblewrap.
    pub scope_abstract_sockets: bool,
}

/// bwrap's monitoring descriptors and options (None outside bwrap mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BwrapIo {
    pub info_fd: Option<i32>,
    pub json_status_fd: Option<i32>,
    pub block_fd: Option<i32>,
    pub userns_block_fd: Option<i32>,
    pub lock_files: Vec<PathBuf>,
    pub argv0: Option<String>,
    /// Without --chdir: the caller's cwd, then $HOME, then / (the first that exists inside).
    pub cwd_fallback: Vec<PathBuf>,
    /// --disable-userns: the sandbox may create no further user namespace.
    pub disable_userns: bool,
    /// The task runs in a user namespace nested in the sandbox's, as bubblewrap's does when
    /// it maps the caller to root first to mount --dev's devpts (a sandbox uid or gid other
    /// than 0 with --dev) and with --disable-userns: the task's capabilities then reach none
    /// of the sandbox's namespaces (its mounts, network, hostname), only new ones it makes.
    pub nested_userns: bool,
    /// --assert-userns-disabled: the launch fails unless creating a user namespace inside the
    /// sandbox is already refused (by the caller's own setup: a seccomp filter, a limit).
    pub assert_userns_disabled: bool,
    /// --die-with-parent: the launcher also dies with its own parent.
    pub die_with_parent: bool,
    /// --userns: join this user namespace instead of creating one (the other namespaces are
    /// then created inside it); --userns2: switch to this one before exec; --pidns: join this
    /// pid namespace (as the parent of a new one with --unshare-pid).
    pub userns_fd: Option<i32>,
    pub userns2_fd: Option<i32>,
    pub pidns_fd: Option<i32>,
    /// --uid / --gid were given (with --userns, an id not given stays as the namespace maps
    /// the caller).
    pub explicit_uid: bool,
    pub explicit_gid: bool,
    /// Every descriptor an option names (--args, --file, --sync-fd, ...): airlock uses them,
    /// and they never reach the task. Any other descriptor the caller left open does, as
    /// under bubblewrap.
    pub named_fds: Vec<i32>,
    /// --sync-fd: held open by airlock until the sandbox is gone; with --as-pid-1 (no init to
    /// hold it) the task holds it, as under bubblewrap.
    pub sync_fd: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// argv of the task; argv[0] is looked up in the task's PATH inside when it has no '/'.
    pub argv: Vec<String>,
    /// The task's whole environment.
    pub env: Vec<(String, String)>,
    /// The filesystem, built in this order on a fresh tmpfs root.
    pub fs: Vec<FsOp>,
    /// The root tmpfs is made read-only once built (airlock run).
    pub root_readonly: bool,
    /// Where the task starts (bwrap mode may fall back through `BwrapIo::cwd_fallback`).
    pub cwd: PathBuf,
    /// user and mount namespaces are always new; these are the others.
    pub ns: Namespaces,
    /// The task's uid/gid inside.
    pub uid: u32,
    pub gid: u32,
    /// The host identity of the task when airlock runs as root.
    pub host_uid: u32,
    pub host_gid: u32,
    /// bwrap mode, root caller, no --unshare-user: every id maps to itself, so the task keeps
    /// the identity bwrap would give it (uid 0, no capabilities).
    pub identity_map: bool,
    pub hostname: Option<String>,
    pub lockdown: Lockdown,
    pub inputs: Vec<Input>,
    pub timeout: Option<Duration>,
    pub output: Output,
    /// None: no limits (bwrap mode).
    pub limits: Option<Limits>,
    pub bwrap: Option<BwrapIo>,
}

impl Spec {
    /// The user binds, for warnings and explain.
    pub fn binds(&self) -> impl Iterator<Item = (&Path, &Path, Access)> {
        self.fs.iter().filter_map(|op| match op {
            FsOp::Bind {
                src, dest, access, ..
            } => Some((src.as_path(), dest.as_path(), *access)),
            _ => None,
        })
    }

    /// The task's identity on the host (uid, gid) for a caller whose effective ids are `euid`
    /// and `egid`: `host_uid`/`host_gid` under a root caller, or the task's own ids where a
    /// root caller's bwrap line maps every id to itself (`identity_map`); the caller's own
    /// under any other caller, whose user namespace can map no other id.
    pub fn task_host_ids(&self, euid: u32, egid: u32) -> (u32, u32) {
        match (euid == 0, self.identity_map) {
            (true, true) => (self.uid, self.gid),
            (true, false) => (self.host_uid, self.host_gid),
            (false, _) => (euid, egid),
        }
    }
}

/// The system paths programs need, bound as the host has them.
pub const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Why a request was refused before anything ran (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// What the front ends hand in; `build` validates it into a `Spec`.
#[derive(Debug, Default, Clone)]
pub struct Draft {
    pub argv: Vec<String>,
    /// `NAME` (forward from the caller) or `NAME=VALUE` (set), in order.
    pub env: Vec<String>,
    pub binds: Vec<Bind>,
    pub inputs: Vec<Input>,
    pub share_net: bool,
    pub host_uid: Option<u32>,
    pub host_gid: Option<u32>,
    pub timeout: Option<Duration>,
    pub max_output: Option<usize>,
    pub json: bool,
    pub limits: Limits,
    /// Where the task starts (`--chdir`, the request's `chdir`): an absolute path inside the
    /// sandbox; scratch when None.
    pub chdir: Option<PathBuf>,
}

impl Draft {
    /// Validate. `caller_env` is consulted only for the names forwarded on purpose.
    pub fn build(self, caller_env: &dyn Fn(&str) -> Option<String>) -> Result<Spec, UsageError> {
        if self.argv.is_empty() {
            // Said by run and explain alike: the usage names neither.
            return usage("no command given: the command and its arguments go after --");
        }
        if self.argv[0].is_empty() {
            return usage("the command's name is empty (the first word after --)");
        }
        if let Some(a) = self.argv.iter().find(|a| a.contains('\0')) {
            return usage(format!(
                "command argument {} contains a NUL byte",
                quoted(a)
            ));
        }
        let env = build_env(&self.env, caller_env)?;
        let mut names = std::collections::HashSet::new();
        for input in &self.inputs {
            check_input_name(&input.name)?;
            if !names.insert(input.name.as_str()) {
                return usage(format!("input {:?} is given twice", input.name));
            }
        }
        let handed: usize = self.inputs.iter().map(|i| handed_size(&i.name)).sum();
        check_handed(self.inputs.len(), handed)?;
        for b in &self.binds {
            check_bind(b)?;
        }
        if let Some(dir) = &self.chdir {
            check_chdir(dir)?;
        }
        // /tmp and /var/tmp are links to the scratch dir, so a destination under either is
        // placed there, where the task finds it through the link (`--ro-bind /tmp/x` shows the
        // host's /tmp/x at /tmp/x, as under bubblewrap). A bind inside scratch is not a result
        // file.
        let binds: Vec<Bind> = (self.binds.into_iter())
            .map(|mut b| {
                if let Some(rest) = SCRATCH_LINKS
                    .iter()
                    .find_map(|l| b.dest.strip_prefix(l).ok())
                {
                    b.dest = Path::new(SCRATCH).join(rest);
                }
                b
            })
            .collect();
        for (i, b) in binds.iter().enumerate() {
            check_dest_length(&b.dest)?;
            if binds[..i].iter().any(|o| o.dest == b.dest) {
                return usage(format!("bind destination {:?} is given twice", b.dest));
            }
        }
        // An input and a bind at the same name in scratch: one would hide the other, or the
        // bind's mount point could not be made.
        for b in &binds {
            let first = b
                .dest
                .strip_prefix(SCRATCH)
                .ok()
                .and_then(|r| r.iter().next());
            if let Some(i) = self
                .inputs
                .iter()
                .find(|i| first == Some(OsStr::new(&i.name)))
            {
                return usage(format!(
                    "input {:?} and the bind at {:?} would meet at the same path in scratch",
                    i.name, b.dest
                ));
            }
        }
        let host_uid = self.host_uid.unwrap_or(DEFAULT_HOST_ID);
        let host_gid = self.host_gid.unwrap_or(DEFAULT_HOST_ID);
        for (flag, id) in [("--host-uid", host_uid), ("--host-gid", host_gid)] {
            if id == 0 {
                let whom = match flag {
                    "--host-uid" => "as root",
                    _ => "in root's group",
                };
                return usage(format!("{flag} 0 would run the task {whom} on the host"));
            }
            // (uid_t)-1 is no id: the kernel refuses it in an id map.
            if id == u32::MAX {
                return usage(format!("{flag} {id} is not a valid id"));
            }
        }
        if self.timeout == Some(Duration::ZERO) {
            return usage("--timeout must be greater than zero");
        }
        let (timeout, output) = if self.json {
            let max = self.max_output.unwrap_or(JSON_DEFAULT_MAX_OUTPUT);
            if max > MAX_OUTPUT_CEILING {
                return usage(format!(
                    "--max-output (max_output) {max} is above the maximum {MAX_OUTPUT_CEILING}"
                ));
            }
            (
                Some(self.timeout.unwrap_or(JSON_DEFAULT_TIMEOUT)),
                Output::Json { max },
            )
        } else {
            if self.max_output.is_some() {
                return usage("--max-output applies to captured output: add --json");
            }
            (self.timeout, Output::Stream)
        };
        let mut fs: Vec<FsOp> = SYSTEM_PATHS
            .iter()
            .map(|p| FsOp::SystemPath(PathBuf::from(p)))
            .collect();
        fs.extend([
            FsOp::MinimalEtc,
            FsOp::Dev("/dev".into()),
            FsOp::Proc("/proc".into()),
            FsOp::Scratch(SCRATCH.into()),
            FsOp::Dir {
                dest: "/var".into(),
                perms: Some(0o755),
            },
        ]);
        fs.extend(SCRATCH_LINKS.iter().map(|l| FsOp::Symlink {
            target: SCRATCH.into(),
            dest: l.into(),
        }));
        // A bind covers what was bound before it at the same or a deeper path, so parents go
        // first whatever the flags' order: a --ro-bind inside a --bind stays read-only.
        let mut binds = binds;
        binds.sort_by_key(|b| b.dest.components().count());
        fs.extend(binds.into_iter().map(|b| FsOp::Bind {
            src: b.src,
            dest: b.dest,
            access: if b.writable {
                Access::ReadWrite
            } else {
                Access::ReadOnly
            },
            optional: false,
        }));
        let mut ns = Namespaces::ALL;
        ns.net = !self.share_net;
        Ok(Spec {
            argv: self.argv,
            env,
            fs,
            root_readonly: true,
            cwd: self.chdir.unwrap_or_else(|| SCRATCH.into()),
            ns,
            uid: SANDBOX_UID,
            gid: SANDBOX_GID,
            host_uid,
            host_gid,
            identity_map: false,
            hostname: Some("airlock".into()),
            lockdown: Lockdown {
                seccomp: Seccomp::Policy,
                new_session: true,
                keep_caps: vec![],
                as_pid_1: false,
                scope_abstract_sockets: self.share_net,
            },
            inputs: self.inputs,
            timeout,
            output,
            limits: Some(check_limits(self.limits)?),
            bwrap: None,
        })
    }
}

/// What the inputs' hand-over (step 11) may take: well under the 208 KiB a unix socket's
/// default send buffer holds in one message.
const MAX_HANDED: usize = 128 << 10;

/// What one input takes of the hand-over: its name, size and hash.
pub fn handed_size(name: &str) -> usize {
    17 + name.len()
}

/// The init hands every input's name, size and hash back in one channel message (step 11),
/// which the socket's buffer bounds: `count` inputs taking `handed` bytes of it are refused
/// here rather than failing there.
pub fn check_handed(count: usize, handed: usize) -> Result<(), UsageError> {
    if handed > MAX_HANDED {
        return usage(format!(
            "{count} inputs are more than one run carries: their names and sizes take {handed} \
             bytes, at most {MAX_HANDED} (17 per input plus its name)"
        ));
    }
    Ok(())
}

/// Each limit's bounds. A message names the flag and the request's key, as a limit may come
/// from either.
fn check_limits(l: Limits) -> Result<Limits, UsageError> {
    let checks = [
        ("--memory (memory)", l.memory, 16 << 20),
        ("--pids (pids)", l.pids, 2),
        ("--file-size (file_size)", l.file_size, 1),
        ("--nofile (nofile)", l.nofile, 16),
        ("--scratch-size (scratch_size)", l.scratch_size, 1 << 20),
    ];
    for (flag, v, min) in checks {
        if v < min {
            return usage(format!("{flag} {v} is below the minimum {min}"));
        }
    }
    // The kernel's own ceilings: pids.max takes at most PID_MAX_LIMIT (4194304), and tmpfs
    // rounds size= up to whole pages, so a size near 2^64 wraps to 0: no limit at all.
    let ceilings = [
        ("--pids (pids)", l.pids, 1 << 22),
        ("--scratch-size (scratch_size)", l.scratch_size, 1 << 62),
    ];
    for (flag, v, max) in ceilings {
        if v > max {
            return usage(format!("{flag} {v} is above the maximum {max}"));
        }
    }
    if l.cpu_time < Duration::from_secs(1) {
        return usage("--cpu-time (cpu_time_ms) must be at least 1 s");
    }
    Ok(l)
}

/// A writable tmpfs of airlock run (scratch, and /dev/shm, which gets the scratch budget)
/// holds at most one inode per TMPFS_BYTES_PER_INODE of its size, and at least
/// TMPFS_MIN_INODES. Without `nr_inodes` tmpfs allows half the machine's RAM pages (3 million
/// on the 24 GiB dev VM) whatever `size=` says, and an empty file, directory or symlink takes
/// no block but about 1 KiB of kernel memory (inode and dentry: 200 MB of slab for 200,000
/// empty files, measured), which neither `size=` nor RLIMIT_DATA counts. With the cap that
/// memory stays near an eighth of the size; the default 2 GiB holds 262,144 inodes, room for a
/// node_modules tree of 100,000 files, and files that average 8 KiB or more fill the blocks
/// before the inodes.
pub const TMPFS_BYTES_PER_INODE: u64 = 8 << 10;
pub const TMPFS_MIN_INODES: u64 = 4096;

/// The `nr_inodes` of a writable tmpfs of `size` bytes (see TMPFS_BYTES_PER_INODE).
pub fn tmpfs_inodes(size: u64) -> u64 {
    (size / TMPFS_BYTES_PER_INODE).max(TMPFS_MIN_INODES)
}

/// Set `name` as setenv(3) does: a variable already there keeps its place in the
/// environment, a new one goes at the end.
pub fn set_env(env: &mut Vec<(String, String)>, name: String, value: String) {
    match env.iter_mut().find(|(n, _)| *n == name) {
        Some(e) => e.1 = value,
        None => env.push((name, value)),
    }
}

/// A variable name as a shell takes it: letters, digits and `_`, not starting with a digit.
pub fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The links to scratch in the sandbox's root: where programs look for a temporary directory
/// when TMPDIR is not theirs to read (`mktemp -p /var/tmp`, a cache kept across reboots).
pub const SCRATCH_LINKS: [&str; 2] = ["/tmp", "/var/tmp"];

/// The variables every sandbox starts with; the caller's `--env` and request add to them.
pub const FIXED_ENV: [(&str, &str); 6] = [
    ("PATH", SAFE_PATH),
    ("HOME", SCRATCH),
    ("TMPDIR", SCRATCH),
    ("LANG", "C.UTF-8"),
    // The name the generated /etc/passwd gives the task's uid, as login(1) sets them: scripts
    // under `set -u` and tools that name their user ($USER in paths, commit authors) read them.
    ("USER", SANDBOX_USER),
    ("LOGNAME", SANDBOX_USER),
];

/// The environment starts from nothing: a fixed PATH, HOME and TMPDIR in scratch, a UTF-8
/// locale, USER and LOGNAME. `--env NAME` forwards the caller's value (one the caller lacks keeps the sandbox's
/// own, if any); `--env NAME=VALUE` sets one. Later entries win, and a variable stands where it was last set.
fn build_env(
    requested: &[String],
    caller_env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, UsageError> {
    let mut set: Vec<(String, Option<String>)> = (FIXED_ENV.iter())
        .map(|(n, v)| (n.to_string(), Some(v.to_string())))
        .collect();
    for item in requested {
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (item.clone(), None),
        };
        if !valid_env_name(&name) {
            // Named without its value: a mistyped name may hold a credential.
            return usage(format!(
                "--env {name:?}: not a valid variable name (letters, digits and _, not starting \
                 with a digit)"
            ));
        }
        if value.as_deref().is_some_and(|v| v.contains('\0')) {
            return usage(format!("--env {name}: value contains a NUL byte"));
        }
        // A forward of a variable the caller lacks changes nothing: the sandbox keeps its own
        // (`--env HOME` from a cron job without HOME leaves HOME in scratch, not unset).
        let value = match value {
            Some(v) => Some(v),
            None => match caller_env(&name) {
                Some(v) => Some(v),
                None => continue,
            },
        };
        set.push((name, value));
    }
    // Keep each name's last entry, in one pass from the end (a request can set 500,000).
    let mut seen = std::collections::HashSet::new();
    let mut env: Vec<(String, String)> = (set.into_iter().rev())
        .filter(|(n, _)| seen.insert(n.clone()))
        .filter_map(|(n, v)| Some((n, v?)))
        .collect();
    env.reverse();
    Ok(env)
}

/// A name as a refusal quotes it: at most 64 characters, as a name can be megabytes long.
pub fn quoted(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((end, _)) => format!("{:?}... ({} bytes)", &s[..end], s.len()),
        None => format!("{s:?}"),
    }
}

/// An input name must be one plain file name: no '/', not '.' or '..', not empty, no NUL.
pub fn check_input_name(name: &str) -> Result<(), UsageError> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name == "." || name == ".." {
        Some("is a directory reference")
    } else if name.contains('/') {
        Some("contains '/'")
    } else if name.contains('\0') {
        Some("contains a NUL byte")
    } else if name.len() > 255 {
        Some("is longer than 255 bytes")
    } else {
        None
    };
    match why {
        Some(why) => usage(format!(
            "input name {} {why}: an input name must be a plain file name",
            quoted(name)
        )),
        None => Ok(()),
    }
}

fn check_bind(b: &Bind) -> Result<(), UsageError> {
    for (what, p) in [("source", &b.src), ("destination", &b.dest)] {
        if !p.is_absolute() {
            return usage(format!("bind {what} {p:?} must be an absolute path"));
        }
        if p.components().any(|c| c == Component::ParentDir) {
            return usage(format!("bind {what} {p:?} must not contain '..'"));
        }
    }
    let reserved = ["/", "/proc", "/dev", SCRATCH, "/tmp", "/var/tmp"];
    if reserved.iter().any(|r| b.dest == Path::new(r)) {
        return usage(format!(
            "bind destination {:?} is managed by airlock and cannot be replaced",
            b.dest
        ));
    }
    // The sandbox's /proc is a fresh procfs: nothing can be made in it, and covering one of
    // its files is how runtimes have been made to write where the kernel trusts
    // (CVE-2019-16884, /proc/self/attr), so the boundary never mounts there.
    if b.dest.starts_with("/proc") {
        return usage(format!(
            "bind destination {:?} is inside /proc, the sandbox's own procfs",
            b.dest
        ));
    }
    // The sandbox's /dev/pts is a devpts of its own, where no mount point can be made (step 7
    // failed, 125, EACCES); covering all of it is the caller's choice.
    if b.dest.starts_with("/dev/pts") && b.dest != Path::new("/dev/pts") {
        return usage(format!(
            "bind destination {:?} is inside /dev/pts, the sandbox's own devpts, where no mount \
             point can be made",
            b.dest
        ));
    }
    Ok(())
}

/// The longest bind destination the boundary can make: PATH_MAX (4096 with its NUL) less the
/// scaffold's `/newroot` (boundary/fs.rs), under which every destination is made.
const DEST_MAX: usize = 4095 - "/newroot".len();

/// A destination the kernel could not take (a name past NAME_MAX, a path past [`DEST_MAX`]) is
/// the caller's mistake, said before anything is built, not a failed step 7 (125).
fn check_dest_length(dest: &Path) -> Result<(), UsageError> {
    let text = dest.to_string_lossy();
    if let Some(c) = dest.components().find(|c| c.as_os_str().len() > 255) {
        return usage(format!(
            "bind destination {} holds a name longer than 255 bytes: {}",
            quoted(&text),
            quoted(&c.as_os_str().to_string_lossy())
        ));
    }
    if dest.as_os_str().len() > DEST_MAX {
        return usage(format!(
            "bind destination {} is longer than {DEST_MAX} bytes",
            quoted(&text)
        ));
    }
    Ok(())
}

/// `--chdir DIR`: a path inside the sandbox, entered at step 9 after pivot_root (so it cannot
/// lead out of the new root); one that does not exist there fails that step (125). Relative
/// paths and `..` are refused here: the task's start should read plainly on the command line.
fn check_chdir(dir: &Path) -> Result<(), UsageError> {
    let text = dir.to_string_lossy();
    if !dir.is_absolute() {
        return usage(format!(
            "--chdir (chdir) {} must be an absolute path inside the sandbox",
            quoted(&text)
        ));
    }
    if dir.components().any(|c| c == Component::ParentDir) {
        return usage(format!(
            "--chdir (chdir) {} must not contain '..'",
            quoted(&text)
        ));
    }
    if dir.as_os_str().len() > DEST_MAX || dir.as_os_str().as_encoded_bytes().contains(&0) {
        return usage(format!(
            "--chdir (chdir) {} is not a path the kernel takes",
            quoted(&text)
        ));
    }
    Ok(())
}

/// Parse `SRC[:DEST]`. DEST is taken by its components: a trailing `/` (or `//`, `/./`) does
/// not change where the bind lands, whatever SRC is (bwrap mode's destinations keep theirs,
/// which there names a directory, as under bubblewrap).
pub fn parse_bind(arg: &str, writable: bool) -> Result<Bind, UsageError> {
    let (src, dest) = match arg.split_once(':') {
        Some((s, d)) => (s, d),
        None => (arg, arg),
    };
    if src.is_empty() || dest.is_empty() {
        return usage(format!("bind {arg:?}: expected SRC[:DEST]"));
    }
    Ok(Bind {
        src: PathBuf::from(src),
        dest: Path::new(dest).components().collect(),
        writable,
    })
}

/// Parse `NAME=PATH` for `--input`.
pub fn parse_input(arg: &str) -> Result<Input, UsageError> {
    let Some((name, path)) = arg.split_once('=') else {
        // A bare path is the usual slip: name the spelling that hands it in.
        let name = Path::new(arg).file_name().and_then(|n| n.to_str());
        return usage(match name.filter(|n| check_input_name(n).is_ok()) {
            Some(name) => {
                format!("--input {arg:?}: expected NAME=PATH, as in --input {name}={arg}")
            }
            None => format!("--input {arg:?}: expected NAME=PATH"),
        });
    };
    check_input_name(name)?;
    if path.is_empty() {
        return usage(format!("--input {name}: empty path"));
    }
    Ok(Input {
        name: name.to_string(),
        source: InputSource::HostFile(PathBuf::from(path)),
    })
}

/// The longest duration a flag or a request gives (`--timeout`, `timeout_ms`, `--cpu-time`,
/// `cpu_time_ms`): 10^9 s, some 31 years.
pub const MAX_DURATION_SECS: u64 = 1_000_000_000;

/// Parse a duration: `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, UsageError> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    // In integers, exactly: through f64, 99999999999ms came out 1 ms short (a review).
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return usage(format!(
            "duration {}: expected e.g. 500ms, 10s, 2m",
            quoted(s)
        ));
    }
    let unit_ns: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => {
            return usage(format!(
                "duration {}: unit must be ms, s, m or h",
                quoted(s)
            ));
        }
    };
    // The fraction's whole nanoseconds: 0.DIGITS times the unit by long multiplication from
    // the last digit, the carry out of the first (exact at any length: cut at 18 digits,
    // 0.0000000000002777777777777777778h, just over 1 ns, came out 0).
    let part = frac.bytes().rev().fold(0u128, |carry, d| {
        (u128::from(d - b'0') * unit_ns + carry) / 10
    });
    // A whole part past 20 digits is past the bound whatever its unit (and would overflow).
    let nanos = (whole.trim_start_matches('0').len() <= 20)
        .then(|| whole.parse::<u128>().unwrap_or(0) * unit_ns + part)
        .filter(|&n| n <= u128::from(MAX_DURATION_SECS) * 1_000_000_000);
    match nanos {
        Some(n) => Ok(Duration::from_nanos(n as u64)),
        None => usage(format!("duration {} is out of range", quoted(s))),
    }
}

/// Parse a byte count: `8000`, `64K`, `512M`, `2G` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, UsageError> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                'B' => 1,
                _ => return usage(format!("size {}: unit must be B, K, M, G or T", quoted(s))),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| {
        UsageError(
            match !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
                true => format!("size {} is out of range", quoted(s)),
                false => format!("size {}: expected e.g. 8000, 64K, 512M", quoted(s)),
            },
        )
    })?;
    n.checked_mul(mult)
        .ok_or_else(|| UsageError(format!("size {} is out of range", quoted(s))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(argv: &[&str]) -> Draft {
        Draft {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// Values the kernel would refuse (or read as "no limit") are usage errors, not failed
    /// isolation steps: the caller's mistake gets exit 2 before anything is built.
    #[test]
    fn values_beyond_what_the_kernel_takes_are_refused_up_front() {
        let refused = |f: &dyn Fn(&mut Draft), needle: &str| {
            let mut d = draft(&["true"]);
            f(&mut d);
            let e = d.build(&no_env).expect_err(needle).0;
            assert!(e.contains(needle), "{e:?} lacks {needle:?}");
        };
        refused(
            &|d| d.limits.pids = u64::MAX,
            "--pids (pids) 18446744073709551615 is above",
        );
        refused(&|d| d.limits.scratch_size = u64::MAX, "--scratch-size");
        // An empty name is said to be one (it was "no command given", after a `--`).
        refused(
            &|d| d.argv = vec![String::new()],
            "the command's name is empty",
        );
        refused(&|d| d.argv = vec![], "no command given");
        // Each refusal names the flag that was given (both were named, whichever it was).
        refused(
            &|d| d.host_uid = Some(u32::MAX),
            "--host-uid 4294967295 is not a valid id",
        );
        refused(
            &|d| d.host_gid = Some(u32::MAX),
            "--host-gid 4294967295 is not a valid id",
        );
        refused(
            &|d| d.host_uid = Some(0),
            "--host-uid 0 would run the task as root",
        );
        refused(
            &|d| d.host_gid = Some(0),
            "--host-gid 0 would run the task in root's group",
        );
        refused(
            &|d| {
                d.inputs = vec![parse_input("hn=/etc/hostname").unwrap()];
                d.binds = vec![parse_bind("/etc:/work/hn/x", false).unwrap()];
            },
            "would meet at the same path in scratch",
        );
        refused(
            &|d| {
                d.inputs = vec![parse_input("hn=/etc/hostname").unwrap()];
                d.binds = vec![parse_bind("/etc/hostname:/tmp/hn", false).unwrap()];
            },
            "would meet at the same path in scratch",
        );
        refused(
            &|d| {
                d.inputs = (0..4000)
                    .map(|i| parse_input(&format!("input-file-{i:05}.txt=/etc/hostname")).unwrap())
                    .collect();
            },
            "4000 inputs are more than one run carries",
        );
        // The ceilings themselves, and a bind beside an input, are fine.
        let mut d = draft(&["true"]);
        d.limits.pids = 1 << 22;
        d.limits.scratch_size = 1 << 62;
        d.host_uid = Some(u32::MAX - 1);
        d.inputs = vec![parse_input("hn=/etc/hostname").unwrap()];
        d.binds = vec![parse_bind("/etc:/work/hn2", false).unwrap()];
        d.build(&no_env).unwrap();
    }

    #[test]
    fn env_starts_from_nothing() {
        let spec = draft(&["true"]).build(&no_env).unwrap();
        let names: Vec<&str> = spec.env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PATH", "HOME", "TMPDIR", "LANG", "USER", "LOGNAME"]);
        assert!(spec.env.contains(&("USER".into(), "airlock".into())));
        assert!(spec.env.contains(&("HOME".into(), "/work".into())));
    }

    #[test]
    fn env_forwards_only_on_purpose() {
        let mut d = draft(&["true"]);
        d.env = vec![
            "SECRET".into(),
            "X=1".into(),
            "MISSING".into(),
            "HOME".into(),
        ];
        let caller = |n: &str| match n {
            "SECRET" => Some("s3".to_string()),
            "HOME" => Some("/home/me".to_string()),
            _ => None,
        };
        let spec = d.build(&caller).unwrap();
        assert!(spec.env.contains(&("SECRET".into(), "s3".into())));
        assert!(spec.env.contains(&("X".into(), "1".into())));
        assert!(spec.env.contains(&("HOME".into(), "/home/me".into())));
        assert!(!spec.env.iter().any(|(n, _)| n == "MISSING"));
        assert_eq!(spec.env.iter().filter(|(n, _)| n == "HOME").count(), 1);
    }

    /// A forward of a variable the caller lacks keeps the sandbox's own: HOME and TMPDIR stay
    /// in scratch, a value set before stays set.
    #[test]
    fn env_forward_of_what_the_caller_lacks_keeps_the_sandboxs_own() {
        let mut d = draft(&["true"]);
        d.env = vec!["HOME".into(), "X=1".into(), "X".into(), "TMPDIR".into()];
        let spec = d.build(&no_env).unwrap();
        assert!(spec.env.contains(&("HOME".into(), "/work".into())));
        assert!(spec.env.contains(&("TMPDIR".into(), "/work".into())));
        assert!(spec.env.contains(&("X".into(), "1".into())));
    }

    #[test]
    fn env_rejects_bad_names() {
        for bad in ["", "=x", "1A", "A-B", "A B=1"] {
            let mut d = draft(&["true"]);
            d.env = vec![bad.into()];
            assert!(d.build(&no_env).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn input_names_must_be_plain() {
        for bad in ["", ".", "..", "a/b", "/etc/passwd", "../x", "a\0b"] {
            let err = check_input_name(bad).unwrap_err();
            assert!(err.0.contains("input name"), "{err}");
        }
        for good in ["probe.py", ".hidden", "a..b", "résumé.txt"] {
            check_input_name(good).unwrap();
        }
        assert!(parse_input("a/b=/etc/passwd").is_err());
        assert!(parse_input("novalue").is_err());
        assert_eq!(
            parse_input("p.py=/tmp/p.py").unwrap().source,
            InputSource::HostFile("/tmp/p.py".into())
        );
    }

    #[test]
    fn duplicate_input_refused() {
        let mut d = draft(&["true"]);
        let i = parse_input("a=/x").unwrap();
        d.inputs = vec![i.clone(), i];
        assert!(d.build(&no_env).unwrap_err().0.contains("twice"));
    }

    #[test]
    fn tmpfs_inodes_follow_the_size_with_a_floor() {
        assert_eq!(
            tmpfs_inodes(crate::limits::Limits::default().scratch_size),
            262_144
        );
        assert_eq!(tmpfs_inodes(64 << 20), 8192);
        assert_eq!(tmpfs_inodes(1 << 20), 4096);
        assert_eq!(tmpfs_inodes(0), 4096);
        // The largest size check_limits takes stays within what tmpfs accepts for nr_inodes
        // (at most ULONG_MAX / 1024, as each inode is also counted as 1 KiB of xattr space).
        assert!(tmpfs_inodes(1 << 62) <= u64::MAX / 1024);
    }

    #[test]
    fn durations_and_sizes() {
        // Exact, in integers (through f64, 99999999999ms was 1 ms short; cut at 18 digits,
        // just over 1 ns of hours was 0).
        let ms = Duration::from_millis;
        let ns = Duration::from_nanos;
        for (text, want) in [
            ("500ms", ms(500)),
            ("10s", ms(10_000)),
            ("2m", ms(120_000)),
            ("3", ms(3000)),
            ("1h", ms(3_600_000)),
            ("99999999999ms", ms(99_999_999_999)),
            ("999999999999ms", ms(999_999_999_999)),
            ("1.0001s", ns(1_000_100_000)),
            (".5m", ms(30_000)),
            ("2.", ms(2000)),
            ("0.0000000015s", ns(1)),
            ("0.0000000001h", ns(360)),
            ("0.0000000000002777777777777777778h", ns(1)),
            ("0.0000000001s", Duration::ZERO),
            ("1000000000s", ms(1_000_000_000_000)),
        ] {
            assert_eq!(parse_duration(text).unwrap(), want, "{text}");
        }
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5y").is_err());
        for bad in [
            ".",
            "ms",
            "1.2.3s",
            "-1s",
            "1000000000.1s",
            "99999999999999999999999s",
            "1000000000000000000000000000000h",
            &format!("1{}s", "0".repeat(39)),
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_size("8000").unwrap(), 8000);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert!(parse_size("12Q").is_err());
        // Past u64 is out of range, not malformed (an operator review).
        let e = parse_size("99999999999999999999").unwrap_err().0;
        assert_eq!(e, "size \"99999999999999999999\" is out of range");
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn json_mode_defaults() {
        let mut d = draft(&["true"]);
        d.json = true;
        let s = d.build(&no_env).unwrap();
        assert_eq!(s.timeout, Some(JSON_DEFAULT_TIMEOUT));
        assert_eq!(
            s.output,
            Output::Json {
                max: JSON_DEFAULT_MAX_OUTPUT
            }
        );
        let s = draft(&["true"]).build(&no_env).unwrap();
        assert_eq!((s.timeout, s.output), (None, Output::Stream));
    }

    #[test]
    fn max_output_has_a_ceiling() {
        for (max, ok) in [(MAX_OUTPUT_CEILING, true), (MAX_OUTPUT_CEILING + 1, false)] {
            let mut d = draft(&["true"]);
            d.json = true;
            d.max_output = Some(max);
            match d.build(&no_env) {
                Ok(s) => assert!(ok && s.output == Output::Json { max }, "{max}"),
                Err(e) => assert!(!ok && e.0.contains("max_output"), "{max}: {e}"),
            }
        }
    }

    #[test]
    fn binds_validated() {
        assert_eq!(
            parse_bind("/a:/b", false).unwrap(),
            Bind {
                src: "/a".into(),
                dest: "/b".into(),
                writable: false
            }
        );
        assert_eq!(parse_bind("/a", true).unwrap().dest, PathBuf::from("/a"));
        for dest in ["/b/", "/b//", "//b/./"] {
            let b = parse_bind(&format!("/a:{dest}"), false).unwrap();
            assert_eq!(b.dest.as_os_str(), "/b", "{dest}");
        }
        for bad in [
            "rel:/x",
            "/x:rel",
            "/a/../b",
            "/x:/proc",
            "/x:/work",
            "/x:/",
            "/x:/tmp",
            "/x:/tmp/",
            "/x:/proc/sys/y",
            "/x:/proc/cpuinfo",
            "/x:/dev/pts/0",
        ] {
            let mut d = draft(&["true"]);
            d.binds = vec![parse_bind(bad, false).unwrap()];
            assert!(d.build(&no_env).is_err(), "{bad} accepted");
        }
        // Covering the whole devpts is the caller's choice.
        let mut d = draft(&["true"]);
        d.binds = vec![parse_bind("/x:/dev/pts", false).unwrap()];
        assert!(d.build(&no_env).is_ok());
        // Lengths the kernel cannot take under the scaffold; the longest it can, taken.
        let long_name = format!("/x:/{}", "n".repeat(256));
        let long_path = format!("/x:{}", "/a".repeat(DEST_MAX / 2 + 1));
        let longest = format!("/x:{}", "/a".repeat(DEST_MAX / 2));
        for (bind, ok) in [(long_name, false), (long_path, false), (longest, true)] {
            let mut d = draft(&["true"]);
            d.binds = vec![parse_bind(&bind, false).unwrap()];
            assert_eq!(d.build(&no_env).is_ok(), ok, "{} bytes", bind.len());
        }
    }

    /// /tmp and /var/tmp link to scratch: a destination under either is placed in scratch,
    /// where the task finds it through the link (one under the link itself would fail setup,
    /// the link leading nowhere in the scaffold); two that meet there are refused, and the
    /// links themselves cannot be bound over.
    #[test]
    fn binds_under_the_scratch_links_go_to_scratch() {
        for (link, other) in [("/tmp", "/var/tmp"), ("/var/tmp", "/tmp")] {
            let mut d = draft(&["true"]);
            // No DEST: the same path, placed in scratch.
            d.binds = vec![parse_bind(&format!("{link}/in"), false).unwrap()];
            let spec = d.build(&no_env).unwrap();
            let binds: Vec<_> = spec
                .binds()
                .map(|(src, dest, _)| (src.to_path_buf(), dest.to_path_buf()))
                .collect();
            let src = PathBuf::from(format!("{link}/in"));
            assert_eq!(binds, [(src, "/work/in".into())], "{link}");
            for (a, b) in [
                (format!("{link}/x"), "/work/x"),
                (format!("{link}/x"), &*format!("{other}/x")),
            ] {
                let mut d = draft(&["true"]);
                d.binds = vec![
                    parse_bind(&format!("/a:{a}"), false).unwrap(),
                    parse_bind(&format!("/b:{b}"), true).unwrap(),
                ];
                let e = d.build(&no_env).unwrap_err().0;
                assert!(e.contains("twice"), "{a} {b}: {e}");
            }
        }
        for dest in ["/var/tmp", "/var/tmp/", "/var//tmp", "/tmp"] {
            let mut d = draft(&["true"]);
            d.binds = vec![parse_bind(&format!("/srv:{dest}"), false).unwrap()];
            let e = d.build(&no_env).unwrap_err().0;
            assert!(e.contains("is managed by airlock"), "{dest}: {e}");
        }
    }

    #[test]
    fn nested_binds_apply_parents_first() {
        let mut d = draft(&["true"]);
        d.binds = vec![
            parse_bind("/srv/p/sub:/proj/sub", false).unwrap(),
            parse_bind("/srv/p:/proj", true).unwrap(),
        ];
        let spec = d.build(&no_env).unwrap();
        let dests: Vec<_> = spec
            .binds()
            .map(|(_, dest, _)| dest.to_path_buf())
            .collect();
        assert_eq!(dests, [PathBuf::from("/proj"), PathBuf::from("/proj/sub")]);
        let mut d = draft(&["true"]);
        d.binds = vec![
            parse_bind("/a:/x", false).unwrap(),
            parse_bind("/b:/x", true).unwrap(),
        ];
        assert!(d.build(&no_env).unwrap_err().0.contains("twice"));
    }

    #[test]
    fn root_host_identity_refused() {
        let mut d = draft(&["true"]);
        d.host_uid = Some(0);
        assert!(d.build(&no_env).is_err());
    }

    #[test]
    fn no_command_refused() {
        assert!(draft(&[]).build(&no_env).is_err());
        assert!(draft(&[""]).build(&no_env).is_err());
    }
}
