//! The bubblewrap front end: `airlock bwrap ARGS...`, or airlock started under the name `bwrap`.
//! It reads bubblewrap's command line (the 0.11 to 0.13 vocabulary) into the same `Spec` the
//! other front ends produce, with bubblewrap's defaults: only what the command line unshares
//! is unshared (a user namespace is added when the caller is not root), the root is an empty
//! tmpfs holding only what is bound, no seccomp filter unless one is given. Operations apply
//! in argument order. Setup failures print `bwrap: MESSAGE` and exit 1, as bubblewrap does.

use std::io::Read;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::boundary::StepError;
use crate::spec::{
    Access, BwrapIo, FsOp, Lockdown, Namespaces, Output, OverlayUpper, Seccomp, Spec, UsageError,
};

/// What we answer to `--version` (clients probe it).
pub const VERSION: &str = concat!(
    "bubblewrap 0.11.0 (airlock ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

/// Longest command line accepted, in arguments (bubblewrap allows 9000).
pub const MAX_ARGS: usize = 100_000;

pub const HELP: &str = "usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]

    --help                       Print this help
    --version                    Print version
    --args FD                    Parse NUL-separated args from FD
    --argv0 VALUE                Set argv[0] to the value VALUE before running the program
    --level-prefix               Prepend e.g. <3> to diagnostic messages
    --unshare-all                Unshare every namespace we support by default
    --share-net                  Retain the network namespace (can only combine with --unshare-all)
    --unshare-user               Create new user namespace (may be automatically implied if not setuid)
    --unshare-user-try           Create new user namespace if possible else continue by skipping it
    --unshare-ipc                Create new ipc namespace
    --unshare-pid                Create new pid namespace
    --unshare-net                Create new network namespace
    --unshare-uts                Create new uts namespace
    --unshare-cgroup             Create new cgroup namespace
    --unshare-cgroup-try         Create new cgroup namespace if possible else continue by skipping it
    --userns FD                  Use this user namespace (cannot combine with --unshare-user)
    --userns2 FD                 After setup switch to this user namespace, only useful with --userns
    --disable-userns             Disable further use of user namespaces inside sandbox
    --assert-userns-disabled     Fail unless further use of user namespace inside sandbox is disabled
    --pidns FD                   Use this pid namespace (as parent namespace if using --unshare-pid)
    --uid UID                    Custom uid in the sandbox (requires --unshare-user or --userns)
    --gid GID                    Custom gid in the sandbox (requires --unshare-user or --userns)
    --hostname NAME              Custom hostname in the sandbox (requires --unshare-uts)
    --chdir DIR                  Change directory to DIR
    --clearenv                   Unset all environment variables
    --setenv VAR VALUE           Set an environment variable
    --unsetenv VAR               Unset an environment variable
    --lock-file DEST             Take a lock on DEST while sandbox is running
    --sync-fd FD                 Keep this fd open while sandbox is running
    --bind SRC DEST              Bind mount the host path SRC on DEST
    --bind-try SRC DEST          Equal to --bind but ignores non-existent SRC
    --dev-bind SRC DEST          Bind mount the host path SRC on DEST, allowing device access
    --dev-bind-try SRC DEST      Equal to --dev-bind but ignores non-existent SRC
    --ro-bind SRC DEST           Bind mount the host path SRC readonly on DEST
    --ro-bind-try SRC DEST       Equal to --ro-bind but ignores non-existent SRC
    --bind-fd FD DEST            Bind open directory or path fd on DEST
    --ro-bind-fd FD DEST         Bind open directory or path fd read-only on DEST
    --remount-ro DEST            Remount DEST as readonly; does not recursively remount
    --overlay-src SRC            Read files from SRC in the following overlay
    --overlay RWSRC WORKDIR DEST Mount overlayfs on DEST, with RWSRC as the host path for writes and
                                 WORKDIR an empty directory on the same filesystem as RWSRC
    --tmp-overlay DEST           Mount overlayfs on DEST, with writes going to an invisible tmpfs
    --ro-overlay DEST            Mount overlayfs read-only on DEST
    --exec-label LABEL           Exec label for the sandbox
    --file-label LABEL           File label for temporary sandbox content
    --proc DEST                  Mount new procfs on DEST
    --dev DEST                   Mount new dev on DEST
    --tmpfs DEST                 Mount new tmpfs on DEST
    --mqueue DEST                Mount new mqueue on DEST
    --dir DEST                   Create dir at DEST
    --file FD DEST               Copy from FD to destination DEST
    --bind-data FD DEST          Copy from FD to file which is bind-mounted on DEST
    --ro-bind-data FD DEST       Copy from FD to file which is readonly bind-mounted on DEST
    --symlink SRC DEST           Create symlink at DEST with target SRC
    --seccomp FD                 Load and use seccomp rules from FD (not repeatable)
    --add-seccomp-fd FD          Load and use seccomp rules from FD (repeatable)
    --block-fd FD                Block on FD until some data to read is available
    --userns-block-fd FD         Block on FD until the user namespace is ready
    --info-fd FD                 Write information about the running container to FD
    --json-status-fd FD          Write container status to FD as multiple JSON documents
    --new-session                Create a new terminal session
    --die-with-parent            Kills with SIGKILL child process (COMMAND) when bwrap or bwrap's parent dies.
    --as-pid-1                   Do not install a reaper process with PID=1
    --cap-add CAP                Add cap CAP when running as privileged user
    --cap-drop CAP               Drop cap CAP when running as privileged user
    --perms OCTAL                Set permissions of next argument (--bind-data, --file, etc.)
    --size BYTES                 Set size of next argument (only for --tmpfs)
    --chmod OCTAL PATH           Change permissions of PATH (must already exist)
";

/// What the command line asks for besides the Spec.
pub enum Parsed {
    Help,
    Version,
    Run(Box<Spec>),
}

fn err<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// The caller's situation the defaults depend on.
pub struct Caller {
    pub is_root: bool,
    pub uid: u32,
    pub gid: u32,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

impl Caller {
    pub fn current() -> Caller {
        Caller {
            is_root: nix::unistd::geteuid().is_root(),
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            cwd: std::env::current_dir().ok(),
            env: std::env::vars_os()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect(),
        }
    }
}

/// The caller's working directory as bubblewrap names it: glibc's get_current_dir_name,
/// called once the options have changed the environment (so `--clearenv` or `--unsetenv PWD`
/// leave the kernel's name) and once bubblewrap has mounted its scaffold tmpfs on /tmp. That
/// is `pwd`, the environment's `PWD`, when it leads to the same directory as `.` (a directory
/// entered through a symlink, `/home/me/proj` where /home is a link to var/home, keeps that
/// name, the one a client binds), else `physical`, the kernel's name. A `PWD` whose lookup
/// reaches into /tmp finds bubblewrap's empty tmpfs there, and is not taken.
fn current_dir_name(pwd: Option<&str>, physical: Option<PathBuf>) -> Option<PathBuf> {
    let id = |st: nix::sys::stat::FileStat| (st.st_dev, st.st_ino);
    let same_dir = |p: &str| match (nix::sys::stat::stat("."), nix::sys::stat::stat(p)) {
        (Ok(dot), Ok(named)) => id(dot) == id(named),
        _ => false,
    };
    match pwd {
        Some(p) if same_dir(p) && !p.starts_with('/') => Some(PathBuf::from(p)),
        Some(p) if same_dir(p) && !looks_into_tmp(Path::new(p)) => Some(PathBuf::from(p)),
        _ => physical,
    }
}

/// Whether resolving the absolute path `p` (symlinks followed, on the host) looks up a name
/// inside /tmp, or ends at /tmp itself: under bubblewrap's scaffold tmpfs the one finds
/// nothing and the other is another directory. A route that cannot be followed counts as one
/// (the kernel's name is taken then).
fn looks_into_tmp(p: &Path) -> bool {
    let tmp = Path::new("/tmp");
    let mut in_tmp = false;
    let end = crate::boundary::walk_route(p, |dir, _, _| in_tmp |= dir == tmp);
    in_tmp || end.map_or(true, |at| at == tmp)
}

/// At most this much of `--args FD` is read: bubblewrap reads any amount, and `--args 5
/// 5</dev/zero` grew it (and airlock, before stop 47) by gigabytes a second until the machine
/// ran out. Real lines are kilobytes (2000 binds: about 100 KiB), and more than MAX_ARGS words
/// are refused before they are made strings.
const ARGS_BYTES: u64 = 16 << 20;

/// Read the NUL-separated arguments of `--args FD`. bubblewrap closes the descriptor once
/// read, so one named again (noted in `read`) is EBADF.
fn read_args_fd(fd: i32, read: &mut Vec<i32>) -> Result<Vec<String>, UsageError> {
    let unreadable = |errno: Errno| {
        UsageError(format!(
            "Can't read --args data: {}",
            crate::sys::errno_text(errno)
        ))
    };
    if read.contains(&fd) {
        return Err(unreadable(Errno::EBADF));
    }
    read.push(fd);
    let dup = crate::sys::dup_fd(fd).map_err(|e| unreadable(e.errno))?;
    let f = std::fs::File::from(dup);
    let mut data = Vec::new();
    f.take(ARGS_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| unreadable(crate::sys::errno_of(&e)))?;
    if data.len() as u64 > ARGS_BYTES {
        return Err(UsageError(format!(
            "Can't read --args data: more than {} MiB",
            ARGS_BYTES >> 20
        )));
    }
    if data.iter().filter(|&&b| b == 0).count() > MAX_ARGS {
        return Err(UsageError("Exceeded maximum number of arguments".into()));
    }
    // Each argument ends with a NUL; an empty argument is a lone NUL and stays (dropping it
    // would shift every argument after it). The last one may lack its NUL.
    let data = data.strip_suffix(&[0]).unwrap_or(&data);
    if data.is_empty() {
        return Ok(vec![]);
    }
    // Text only, as on the command line: a byte that is not UTF-8, turned into U+FFFD, would
    // move a `--tmpfs` mask or a bind to another path (a review's: the secret under
    // `/tmp/x/sec\xe9` stayed readable, and `/tmp/x/sec\u{fffd}` was made on the host). Such
    // a word is marked (NOT_TEXT) and refused where it is read (`refuse_marked`): words the
    // parse leaves unread, as bubblewrap leaves those after a non-option, stay unread.
    Ok(data
        .split(|&b| b == 0)
        .map(|a| match std::str::from_utf8(a) {
            Ok(text) => text.to_string(),
            Err(_) => format!("{}{NOT_TEXT}", String::from_utf8_lossy(a)),
        })
        .collect())
}

/// Ends an --args word that is not UTF-8: no word holds a NUL, which separates them.
const NOT_TEXT: char = '\0';

/// An --args word as the parse reads it (an option, or an option's value), refused when
/// NOT_TEXT marks it.
fn refuse_marked(word: String) -> Result<String, UsageError> {
    match word.strip_suffix(NOT_TEXT) {
        Some(lossy) => Err(UsageError(format!(
            "an argument read from --args is not valid UTF-8: {lossy:?}"
        ))),
        None => Ok(word),
    }
}

/// A descriptor bubblewrap reads and then closes (noted in `read`): one an earlier option
/// already read is closed, -1 here, so reading it fails with EBADF as bubblewrap's read does
/// (`Can't write data to file /b: Bad file descriptor` for `--file 5 /a --file 5 /b`).
fn read_once(fd: i32, read: &mut Vec<i32>) -> i32 {
    match read.contains(&fd) {
        true => -1,
        false => {
            read.push(fd);
            fd
        }
    }
}

/// A number as bubblewrap reads a descriptor, uid or gid: C's strtol in base 10 (leading white
/// space and a sign taken, digits to the end, a value past the range of `long` clamped to it)
/// stored in an `int`, whose low 32 bits must not be negative.
fn c_int(v: &str) -> Option<i32> {
    let t = v.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let long = match digits.parse::<i64>() {
        Ok(n) if negative => -n,
        Ok(n) => n,
        Err(_) if negative => i64::MIN,
        Err(_) => i64::MAX,
    };
    // The C conversion from long to int keeps the low 32 bits.
    Some(long as i32).filter(|&n| n >= 0)
}

/// A descriptor number an option names, noted in `named` (those never reach the task).
fn fd_arg(named: &mut Vec<i32>, v: &str) -> Result<i32, UsageError> {
    match c_int(v) {
        Some(fd) => {
            named.push(fd);
            Ok(fd)
        }
        None => err(format!("Invalid fd: {v}")),
    }
}

/// An option that names one descriptor and keeps the last one given, as bubblewrap does.
fn one_fd(
    slot: &mut Option<i32>,
    opt: &str,
    v: &str,
    named: &mut Vec<i32>,
) -> Result<(), UsageError> {
    if slot.is_some() {
        only_the_last(opt);
    }
    let fd = fd_arg(named, v)?;
    if let Some(earlier) = slot.replace(fd) {
        no_longer_named(named, earlier);
    }
    Ok(())
}

/// A descriptor an option named that a later one of the same option replaced: bubblewrap
/// leaves it open, an ordinary descriptor the task inherits (unless another option names it).
fn no_longer_named(named: &mut Vec<i32>, fd: i32) {
    if let Some(i) = named.iter().position(|&n| n == fd) {
        named.remove(i);
    }
}

/// `--uid` or `--gid` (`kind` is "uid" or "gid"), read as bubblewrap reads them.
fn id_arg(kind: &str, v: &str) -> Result<u32, UsageError> {
    match c_int(v) {
        Some(id) => Ok(id as u32),
        None => err(format!("Invalid {kind}: {v}")),
    }
}

/// How many arguments an option takes when that is more than one: bubblewrap checks the
/// count before reading any of them ("--file takes two arguments" for `--file 3` at the end).
fn arguments_of(opt: &str) -> usize {
    match opt {
        "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--ro-bind"
        | "--ro-bind-try" | "--bind-fd" | "--ro-bind-fd" | "--file" | "--bind-data"
        | "--ro-bind-data" | "--symlink" | "--setenv" | "--chmod" => 2,
        "--overlay" => 3,
        _ => 1,
    }
}

/// bubblewrap's words for an option given too few arguments.
fn too_few_arguments(opt: &str) -> UsageError {
    UsageError(match (opt, arguments_of(opt)) {
        // bubblewrap names --bind-fd for both of its bind-by-descriptor options.
        ("--ro-bind-fd", _) => "--bind-fd takes two arguments".into(),
        (_, 2) => format!("{opt} takes two arguments"),
        (_, 3) => format!("{opt} takes three arguments"),
        ("--chdir" | "--remount-ro" | "--argv0", _) => format!("{opt} takes one argument"),
        _ => format!("{opt} takes an argument"),
    })
}

/// Whether --level-prefix has been read among the options (not in the command's own
/// arguments): the messages after it start with their syslog level, as bubblewrap's do.
static LEVEL_PREFIX: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `level` ("<3>" an error, "<4>" a warning) if --level-prefix was read, else nothing.
fn level(level: &'static str) -> &'static str {
    match LEVEL_PREFIX.load(std::sync::atomic::Ordering::Relaxed) {
        true => level,
        false => "",
    }
}

/// The warning bubblewrap prints when an option that keeps one value is given again.
fn only_the_last(opt: &str) {
    crate::say!(
        "{}bwrap: Only the last {opt} option will take effect",
        level("<4>")
    );
}

/// A variable name for --setenv or --unsetenv (`call`): setenv(3) and unsetenv(3), which
/// bubblewrap calls as it reads the option, refuse one that is empty or holds `=`, and
/// bubblewrap stops there.
fn env_name(call: &str, name: String) -> Result<String, UsageError> {
    match name.is_empty() || name.contains('=') {
        true => err(format!("{call} failed")),
        false => Ok(name),
    }
}

/// --size as bubblewrap reads it (strtoull in base 0): decimal, 0x hexadecimal or 0 octal
/// digits and nothing else, starting with a digit; at least 1 and at most 2^63-1 bytes, with
/// bubblewrap's message for each way of missing that.
fn tmpfs_size(v: &str) -> Result<u64, UsageError> {
    match tmpfs_bytes(v) {
        Some(n) if n > i64::MAX as u64 => {
            err(format!("--size (for tmpfs) is limited to {}", i64::MAX))
        }
        Some(n) => Ok(n),
        None => err("--size takes a non-zero number of bytes"),
    }
}

/// The number of bytes `v` reads as (None: not a number, zero, or past 2^64-1).
fn tmpfs_bytes(v: &str) -> Option<u64> {
    let (digits, radix) = if let Some(h) = v.strip_prefix("0x").or(v.strip_prefix("0X")) {
        (h, 16)
    } else if v.len() > 1 && v.starts_with('0') {
        (&v[1..], 8)
    } else {
        (v, 10)
    };
    if !v.starts_with(|c: char| c.is_ascii_digit())
        || digits.is_empty()
        || !digits.chars().all(|c| c.is_digit(radix))
    {
        return None;
    }
    u64::from_str_radix(digits, radix).ok().filter(|&n| n > 0)
}

/// A mode as bubblewrap reads one, with C's strtoul in base 8: leading white space and a sign
/// are taken (a negative value wraps past 07777, but for -0), then octal digits to the end.
fn octal(opt: &str, v: &str) -> Result<u32, UsageError> {
    let t = v.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let parsed = match digits.starts_with(|c: char| c.is_digit(8)) {
        true => u32::from_str_radix(digits, 8).ok(),
        false => None,
    };
    match parsed {
        Some(p) if p <= 0o7777 && !(negative && p != 0) => Ok(p),
        _ => err(format!("--{opt} takes an octal argument <= 07777")),
    }
}

/// A capability as libcap's cap_from_name reads it for bubblewrap: `ALL`; a number (strtoul in
/// base 0 up to the first character that is not a digit, below 64; one the kernel does not
/// define is nothing); a name with its `CAP_`, in any case (`net_raw` is unknown there, so a
/// line that runs here runs under bubblewrap too).
fn cap_name(v: &str) -> Result<Vec<caps::Capability>, UsageError> {
    if v.eq_ignore_ascii_case("ALL") {
        return Ok(caps::all().into_iter().collect());
    }
    if v.starts_with(|c: char| c.is_ascii_digit()) {
        let (digits, radix) = match v.strip_prefix("0x").or(v.strip_prefix("0X")) {
            Some(h) if h.starts_with(|c: char| c.is_ascii_hexdigit()) => (h, 16),
            _ if v.starts_with('0') => (v, 8),
            _ => (v, 10),
        };
        let end = digits
            .find(|c: char| !c.is_digit(radix))
            .unwrap_or(digits.len());
        return match u64::from_str_radix(&digits[..end], radix) {
            Ok(n) if n < 64 => Ok(caps::all()
                .into_iter()
                .filter(|c| u64::from(c.index()) == n)
                .collect()),
            _ => err(format!("unknown cap: {v}")),
        };
    }
    let name = v.to_ascii_uppercase();
    if !name.starts_with("CAP_") {
        return err(format!("unknown cap: {v}"));
    }
    name.parse::<caps::Capability>()
        .map(|c| vec![c])
        .map_err(|_| UsageError(format!("unknown cap: {v}")))
}

const OVERLAY_SRC_WAITS: &str = "--overlay-src must be followed by another --overlay-src or one \
     of --overlay, --tmp-overlay, or --ro-overlay";

/// Parse bubblewrap's command line (without the program name).
pub fn parse(args: &[String], caller: &Caller) -> Result<Parsed, UsageError> {
    let mut queue: std::collections::VecDeque<String> = args.iter().cloned().collect();
    let mut total = args.len();
    let mut fs: Vec<FsOp> = Vec::new();
    let mut env = caller.env.clone();
    let (mut unshare_user, mut user_try) = (false, false);
    let mut ns = Namespaces {
        net: false,
        pid: false,
        ipc: false,
        uts: false,
        cgroup: false,
    };
    let (mut uid, mut gid): (Option<u32>, Option<u32>) = (None, None);
    let mut hostname = None;
    let mut chdir = None;
    let mut io = BwrapIo::default();
    let mut named = Vec::new();
    let mut seccomp_fds: Vec<i32> = Vec::new();
    let (mut have_seccomp, mut have_add_seccomp) = (false, false);
    let mut new_session = false;
    let mut as_pid_1 = false;
    let mut keep_caps: Vec<caps::Capability> = Vec::new();
    let mut perms: Option<u32> = None;
    let mut size: Option<u64> = None;
    let mut disable_userns = false;
    let mut command: Vec<String> = Vec::new();
    let mut overlay_sources: Vec<PathBuf> = Vec::new();
    // Descriptors bubblewrap reads and closes as it parses (--args, --add-seccomp-fd).
    let mut read_at_parse: Vec<i32> = Vec::new();
    // Of those, the --args descriptors.
    let mut args_fds: Vec<i32> = Vec::new();

    // The caller's own arguments still to read: the last `outer` of the queue, behind those
    // an --args descriptor gave. An option read from the descriptor takes its values from
    // there too: only the queue above `floor` is its own.
    let mut outer = args.len();
    let mut floor: usize;

    macro_rules! take {
        ($opt:expr) => {
            match queue.len() > floor {
                true => refuse_marked(queue.pop_front().unwrap_or_default())?,
                false => return Err(too_few_arguments($opt)),
            }
        };
    }

    // The option read last, and whether an --args descriptor's words are still being read.
    let mut prev = String::new();
    let mut in_args = false;
    while let Some(arg) = queue.pop_front() {
        let from_file = queue.len() + 1 > outer;
        outer = outer.min(queue.len());
        floor = if from_file { outer } else { 0 };
        // bubblewrap refuses an --overlay-src followed by anything but another or an overlay,
        // checked once each option is done; an --args is done once its descriptor's words are.
        let args_done = in_args && !from_file;
        in_args &= from_file;
        if !overlay_sources.is_empty()
            && (args_done || (prev != "--overlay-src" && prev != "--args"))
        {
            return err(OVERLAY_SRC_WAITS);
        }
        in_args |= arg == "--args";
        prev.clone_from(&arg);
        let a = arg.as_str();
        if a.starts_with("--") && queue.len() - floor < arguments_of(a) && arguments_of(a) > 1 {
            return Err(too_few_arguments(a));
        }
        // Words of an --args descriptor are options only, as bubblewrap reads them: the first
        // that is not one (`--`, an empty word, a command) ends the descriptor's words, the
        // rest of them unread, and the caller's own arguments go on.
        if from_file && (a == "--" || !a.starts_with('-')) {
            queue.drain(..queue.len() - outer);
            continue;
        }
        let arg = refuse_marked(arg.clone())?;
        let a = arg.as_str();
        // --perms and --size modify the next operation only.
        if a == "--perms" {
            if perms.is_some() {
                return err("--perms given twice for the same action");
            }
            perms = Some(octal("perms", &take!(a))?);
            continue;
        }
        if a == "--size" {
            let v = take!(a);
            if size.is_some() {
                return err("--size given twice for the same action");
            }
            size = Some(tmpfs_size(&v)?);
            continue;
        }
        let (p, sz) = (perms.take(), size.take());
        // The command's first word: a --perms or --size left over applies to nothing, and
        // bubblewrap runs the command regardless.
        let is_option = a.starts_with("--") && a != "--";
        let (p, sz) = if is_option { (p, sz) } else { (None, None) };
        let creates = matches!(
            a,
            "--bind-data" | "--ro-bind-data" | "--file" | "--dir" | "--tmpfs"
        );
        if p.is_some() && !creates {
            return err("--perms must be followed by an option that creates a file");
        }
        if sz.is_some() && a != "--tmpfs" {
            return err("--size must be followed by --tmpfs");
        }
        match a {
            "--help" => return Ok(Parsed::Help),
            "--version" => return Ok(Parsed::Version),
            "--args" => {
                if from_file {
                    return err("--args not supported in arguments file");
                }
                let fd = fd_arg(&mut named, &take!(a))?;
                args_fds.push(fd);
                let extra = read_args_fd(fd, &mut read_at_parse)?;
                total += extra.len();
                if total > MAX_ARGS {
                    return err("Exceeded maximum number of arguments");
                }
                // What is queued now is the caller's own (an --args read from a file was
                // refused above), its descriptor argument taken: the file's words go in front.
                outer = queue.len();
                for (i, x) in extra.into_iter().enumerate() {
                    queue.insert(i, x);
                }
            }
            "--argv0" => {
                let v = take!(a);
                if io.argv0.is_some() {
                    return err("--argv0 used multiple times");
                }
                io.argv0 = Some(v);
            }
            "--level-prefix" => LEVEL_PREFIX.store(true, std::sync::atomic::Ordering::Relaxed),
            "--unshare-all" => {
                user_try = true;
                ns = Namespaces::ALL;
            }
            "--share-net" => ns.net = false,
            "--unshare-user" => unshare_user = true,
            "--unshare-user-try" => user_try = true,
            "--unshare-ipc" => ns.ipc = true,
            "--unshare-pid" => ns.pid = true,
            "--unshare-net" => ns.net = true,
            "--unshare-uts" => ns.uts = true,
            "--unshare-cgroup" | "--unshare-cgroup-try" => ns.cgroup = true,
            "--userns" => one_fd(&mut io.userns_fd, a, &take!(a), &mut named)?,
            "--userns2" => one_fd(&mut io.userns2_fd, a, &take!(a), &mut named)?,
            "--pidns" => one_fd(&mut io.pidns_fd, a, &take!(a), &mut named)?,
            "--disable-userns" => disable_userns = true,
            "--assert-userns-disabled" => io.assert_userns_disabled = true,
            "--uid" => {
                let v = take!(a);
                if uid.is_some() {
                    only_the_last(a);
                }
                uid = Some(id_arg("uid", &v)?);
            }
            "--gid" => {
                let v = take!(a);
                if gid.is_some() {
                    only_the_last(a);
                }
                gid = Some(id_arg("gid", &v)?);
            }
            "--hostname" => {
                let v = take!(a);
                if hostname.is_some() {
                    only_the_last(a);
                }
                hostname = Some(v);
            }
            "--chdir" => {
                let v = take!(a);
                if chdir.is_some() {
                    only_the_last(a);
                }
                chdir = Some(PathBuf::from(v));
            }
            "--clearenv" => env.clear(),
            "--setenv" => {
                let (k, v) = (take!(a), take!(a));
                crate::spec::set_env(&mut env, env_name("setenv", k)?, v);
            }
            "--unsetenv" => {
                let k = env_name("unsetenv", take!(a))?;
                env.retain(|(n, _)| *n != k);
            }
            "--lock-file" => io.lock_files.push(PathBuf::from(take!(a))),
            "--sync-fd" => {
                // The launcher keeps it open (it inherited it) until the sandbox is gone.
                one_fd(&mut io.sync_fd, a, &take!(a), &mut named)?;
            }
            "--block-fd" => one_fd(&mut io.block_fd, a, &take!(a), &mut named)?,
            "--userns-block-fd" => one_fd(&mut io.userns_block_fd, a, &take!(a), &mut named)?,
            "--info-fd" => one_fd(&mut io.info_fd, a, &take!(a), &mut named)?,
            "--json-status-fd" => one_fd(&mut io.json_status_fd, a, &take!(a), &mut named)?,
            "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--ro-bind"
            | "--ro-bind-try" => {
                let (src, dest) = (take!(a), take!(a));
                let access = match a.trim_end_matches("-try") {
                    "--bind" => Access::ReadWrite,
                    "--dev-bind" => Access::Devices,
                    _ => Access::ReadOnly,
                };
                fs.push(FsOp::Bind {
                    src: PathBuf::from(src),
                    dest: PathBuf::from(dest),
                    access,
                    optional: a.ends_with("-try"),
                });
            }
            "--bind-fd" | "--ro-bind-fd" => {
                let fd = fd_arg(&mut named, &take!(a))?;
                fs.push(FsOp::BindFd {
                    fd,
                    dest: PathBuf::from(take!(a)),
                    access: if a == "--bind-fd" {
                        Access::ReadWrite
                    } else {
                        Access::ReadOnly
                    },
                });
            }
            "--remount-ro" => fs.push(FsOp::RemountRo(PathBuf::from(take!(a)))),
            "--overlay-src" => overlay_sources.push(PathBuf::from(take!(a))),
            "--overlay" | "--tmp-overlay" | "--ro-overlay" => {
                let upper = match a {
                    "--overlay" => {
                        let (upper, work) = (take!(a), take!(a));
                        OverlayUpper::Host {
                            upper: upper.into(),
                            work: work.into(),
                        }
                    }
                    "--tmp-overlay" => OverlayUpper::Tmpfs,
                    _ => OverlayUpper::ReadOnly,
                };
                let dest = PathBuf::from(take!(a));
                let (need, in_words) = match upper {
                    OverlayUpper::ReadOnly => (2, "two"),
                    _ => (1, "one"),
                };
                if overlay_sources.len() < need {
                    return err(format!("{a} requires at least {in_words} --overlay-src"));
                }
                fs.push(FsOp::Overlay {
                    sources: std::mem::take(&mut overlay_sources),
                    upper,
                    dest,
                });
            }
            "--exec-label" | "--file-label" => {
                let _ = take!(a);
                // bubblewrap's words where SELinux is not enabled, as here.
                return err("labeling not supported on this system");
            }
            "--proc" => fs.push(FsOp::Proc(PathBuf::from(take!(a)))),
            "--dev" => fs.push(FsOp::Dev(PathBuf::from(take!(a)))),
            "--tmpfs" => fs.push(FsOp::Tmpfs {
                dest: PathBuf::from(take!(a)),
                perms: p,
                size: sz,
            }),
            "--mqueue" => fs.push(FsOp::Mqueue(PathBuf::from(take!(a)))),
            "--dir" => fs.push(FsOp::Dir {
                dest: PathBuf::from(take!(a)),
                perms: p,
            }),
            "--file" | "--bind-data" | "--ro-bind-data" => {
                let fd = fd_arg(&mut named, &take!(a))?;
                fs.push(FsOp::File {
                    fd,
                    dest: PathBuf::from(take!(a)),
                    perms: p,
                    bind: match a {
                        "--file" => None,
                        "--bind-data" => Some(Access::ReadWrite),
                        _ => Some(Access::ReadOnly),
                    },
                });
            }
            "--symlink" => {
                let (target, dest) = (take!(a), take!(a));
                fs.push(FsOp::Symlink {
                    target: PathBuf::from(target),
                    dest: PathBuf::from(dest),
                });
            }
            "--chmod" => {
                let perms = octal("chmod", &take!(a))?;
                fs.push(FsOp::Chmod {
                    path: PathBuf::from(take!(a)),
                    perms,
                });
            }
            "--seccomp" => {
                if have_add_seccomp {
                    return err("--seccomp cannot be combined with --add-seccomp-fd");
                }
                if have_seccomp {
                    only_the_last(a);
                    for earlier in seccomp_fds.drain(..) {
                        no_longer_named(&mut named, earlier);
                    }
                }
                have_seccomp = true;
                seccomp_fds.push(fd_arg(&mut named, &take!(a))?);
            }
            "--add-seccomp-fd" => {
                if have_seccomp {
                    return err("--add-seccomp-fd cannot be combined with --seccomp");
                }
                have_add_seccomp = true;
                let fd = fd_arg(&mut named, &take!(a))?;
                seccomp_fds.push(read_once(fd, &mut read_at_parse));
            }
            "--new-session" => new_session = true,
            // airlock's sandbox always dies with its launcher; this also ties the launcher to
            // its own parent.
            "--die-with-parent" => io.die_with_parent = true,
            "--as-pid-1" => as_pid_1 = true,
            "--cap-add" => {
                for c in cap_name(&take!(a))? {
                    if !keep_caps.contains(&c) {
                        keep_caps.push(c);
                    }
                }
            }
            "--cap-drop" => {
                let drop = cap_name(&take!(a))?;
                keep_caps.retain(|c| !drop.contains(c));
            }
            "--" => {
                command.extend(queue.drain(..));
                break;
            }
            other if other.starts_with('-') => {
                return err(format!("Unknown option {other}"));
            }
            _ => {
                // The command starts at the first non-option (no "--" needed).
                command.push(arg);
                command.extend(queue.drain(..));
                break;
            }
        }
    }
    if perms.is_some() {
        return err("--perms must be followed by an option that creates a file");
    }
    if !overlay_sources.is_empty() {
        return err(OVERLAY_SRC_WAITS);
    }
    if total > MAX_ARGS {
        return err("Exceeded maximum number of arguments");
    }
    // A descriptor the caller does not have open is -1 from here on, as one already read is:
    // the launch opens descriptors of its own (the channel to the init, a signalfd) at the
    // lowest free numbers, and an option naming one of those read or waited on airlock's
    // own (`--file 4 /x`, `--block-fd 5` waited forever) where bubblewrap's fails with EBADF.
    let open = |fd: &mut i32| {
        if crate::sys::dup_fd(*fd).is_err() {
            *fd = -1;
        }
    };
    for fd in [
        &mut io.block_fd,
        &mut io.userns_block_fd,
        &mut io.userns_fd,
        &mut io.userns2_fd,
        &mut io.pidns_fd,
    ]
    .into_iter()
    .flatten()
    .chain(seccomp_fds.iter_mut())
    {
        open(fd);
    }
    // The data options read their descriptors while the sandbox is set up, in argument order,
    // and --seccomp its one after that: each closed once read. --bind-fd closes its own once
    // bound. (A --bind-fd of a descriptor closed before it is refused here, in bubblewrap's
    // words.)
    let mut read = read_at_parse.clone();
    // bubblewrap's sandbox closes the --info-fd and --json-status-fd descriptors (its launcher
    // writes them) before it reads --file and --seccomp data from its descriptors.
    let status_fds: Vec<i32> = [io.info_fd, io.json_status_fd]
        .into_iter()
        .flatten()
        .collect();
    for op in fs.iter_mut() {
        match op {
            FsOp::File { fd, bind: None, .. } if status_fds.contains(fd) => *fd = -1,
            FsOp::File { fd, .. } => {
                open(fd);
                *fd = read_once(*fd, &mut read);
            }
            FsOp::BindFd { fd, .. } if crate::sys::dup_fd(*fd).is_err() => {
                return err(format!(
                    "Can't find source path /proc/self/fd/{fd}: No such file or directory"
                ));
            }
            // bubblewrap resolves every source before it sets anything up, binds by that path,
            // then checks the bind against the descriptor: one an earlier --bind-fd, --file or
            // --bind-data closed fails that check.
            FsOp::BindFd { fd, .. } if read.contains(fd) && !read_at_parse.contains(fd) => {
                return err(format!("Can't stat fd {fd}: Bad file descriptor"));
            }
            FsOp::BindFd { fd, .. } if !read.contains(fd) => read.push(*fd),
            _ => {}
        }
    }
    if have_seccomp {
        for fd in seccomp_fds.iter_mut() {
            *fd = match status_fds.contains(fd) {
                true => -1,
                false => read_once(*fd, &mut read),
            };
        }
    }
    user_namespace_conflicts(&io, unshare_user, user_try, disable_userns)?;
    if io.userns2_fd.is_some() && io.userns_fd.is_none() {
        return err("--userns2 requires --userns");
    }
    if command.is_empty() {
        return err("No command specified");
    }
    io.explicit_uid = uid.is_some();
    io.explicit_gid = gid.is_some();
    let want_userns = unshare_user || user_try || !caller.is_root || io.userns_fd.is_some();
    if uid.is_some_and(|u| u != caller.uid) && !want_userns {
        return err("Specifying --uid requires --unshare-user or --userns");
    }
    if gid.is_some_and(|g| g != caller.gid) && !want_userns {
        return err("Specifying --gid requires --unshare-user or --userns");
    }
    if hostname.is_some() && !ns.uts {
        return err("Specifying --hostname requires --unshare-uts");
    }
    if as_pid_1 && !ns.pid {
        return err("Specifying --as-pid-1 requires --unshare-pid");
    }
    if as_pid_1 && !io.lock_files.is_empty() {
        return err("Specifying --as-pid-1 and --lock-file is not permitted");
    }
    // bubblewrap joins --pidns from inside the user namespace it has just made, whose
    // capabilities reach no namespace that existed before it: the kernel refuses any join
    // but one made with --userns, or by a root caller that made no user namespace. airlock's
    // launcher would join with the caller's credentials (the host's pid namespace included).
    if let Some(fd) = io
        .pidns_fd
        .filter(|_| want_userns && io.userns_fd.is_none())
    {
        // setns(2) checks the descriptor before the capability: one not open, or not a pid
        // namespace, fails as it does under bubblewrap.
        let errno = match crate::sys::dup_fd(fd) {
            Err(_) => Errno::EBADF,
            Ok(d) if crate::sys::ns_type(&d) != Some(libc::CLONE_NEWPID) => Errno::EINVAL,
            Ok(_) => Errno::EPERM,
        };
        return err(format!(
            "Setting pidns failed: {}",
            crate::sys::errno_text(errno)
        ));
    }
    let identity_map = caller.is_root && !want_userns && io.userns_fd.is_none();
    let (uid, gid) = match (caller.is_root, identity_map) {
        (_, true) => (0, 0),
        (true, false) => (uid.unwrap_or(0), gid.unwrap_or(0)),
        (false, _) => (uid.unwrap_or(caller.uid), gid.unwrap_or(caller.gid)),
    };
    // bubblewrap (not setuid) first maps the sandbox's ids to 0 when --dev asks for a devpts
    // (root must be mapped to mount one), then, with every mount made, puts the task in a
    // second user namespace that maps its ids back; it does the same for --disable-userns, to
    // cap the namespace count below it. The task's capabilities (--cap-add) reach only that
    // inner namespace: it cannot mount, or configure the network, in the sandbox's own.
    let has_dev = fs.iter().any(|op| matches!(op, FsOp::Dev(_)));
    io.nested_userns = want_userns
        && io.userns_fd.is_none()
        && io.userns_block_fd.is_none()
        && ((has_dev && (uid != 0 || gid != 0)) || disable_userns);
    let home = env
        .iter()
        .find(|(n, _)| n == "HOME")
        .map(|(_, v)| PathBuf::from(v));
    io.cwd_fallback = match &chdir {
        Some(_) => vec![],
        None => {
            let pwd = env
                .iter()
                .find(|(n, _)| n == "PWD")
                .map(|(_, v)| v.as_str());
            current_dir_name(pwd, caller.cwd.clone())
                .into_iter()
                .chain(home)
                .collect()
        }
    };
    // A status descriptor that --args read was closed before bubblewrap's launcher writes to
    // it. (--add-seccomp-fd's data is checked first, where airlock's boundary reads it.)
    for (which, fd) in [
        ("info_fd", io.info_fd),
        ("json_status_fd", io.json_status_fd),
    ] {
        if fd.is_some_and(|fd| args_fds.contains(&fd)) {
            return err(format!("Write to {which}: Bad file descriptor"));
        }
    }
    Ok(Parsed::Run(Box::new(Spec {
        argv: command,
        env,
        fs,
        root_readonly: false,
        cwd: chdir.clone().unwrap_or_else(|| "/".into()),
        ns,
        uid,
        gid,
        // A root caller who asked for a user namespace keeps root's ids, as bubblewrap does.
        host_uid: 0,
        host_gid: 0,
        identity_map,
        hostname,
        lockdown: Lockdown {
            seccomp: if seccomp_fds.is_empty() {
                Seccomp::None
            } else {
                Seccomp::Fds(seccomp_fds)
            },
            new_session,
            keep_caps,
            as_pid_1,
            scope_abstract_sockets: false,
        },
        inputs: vec![],
        timeout: None,
        output: Output::Stream,
        limits: None,
        bwrap: Some(BwrapIo {
            disable_userns,
            named_fds: named,
            ..io
        }),
    })))
}

/// The user namespace options that cannot go together, checked in bubblewrap's order with its
/// words. The options that make or configure a user namespace want the explicit
/// --unshare-user (not the one --unshare-all may make, nor the one an unprivileged caller
/// always gets): --userns-block-fd (whose caller writes its maps) and --disable-userns.
fn user_namespace_conflicts(
    io: &BwrapIo,
    unshare_user: bool,
    user_try: bool,
    disable_userns: bool,
) -> Result<(), UsageError> {
    let block = io.userns_block_fd.is_some();
    let join = io.userns_fd.is_some();
    let refusal = [
        (
            block && !unshare_user,
            "--userns-block-fd requires --unshare-user",
        ),
        (
            block && io.info_fd.is_none(),
            "--userns-block-fd requires --info-fd",
        ),
        (
            join && unshare_user,
            "--userns not compatible --unshare-user",
        ),
        (
            join && user_try,
            "--userns not compatible --unshare-user-try",
        ),
        (
            disable_userns && !unshare_user,
            "--disable-userns requires --unshare-user",
        ),
        // (Two spaces, as bubblewrap prints it.)
        (
            disable_userns && block,
            "--disable-userns is not compatible with  --userns-block-fd",
        ),
    ];
    match refusal.into_iter().find(|(refused, _)| *refused) {
        Some((_, words)) => err(words),
        None => Ok(()),
    }
}

/// bubblewrap's wording for a failed setup step, where clients match on it.
pub fn message(e: &StepError) -> String {
    let call = e.err.call.as_str();
    let errno = crate::sys::errno_text(e.err.errno);
    // A mount's target, as bubblewrap prints it: "/newroot/" and the destination (an empty
    // one too).
    let q = strings_in(call);
    let nth = |n: usize| q.get(n).map_or("", String::as_str);
    let target = || -> String {
        match nth(1) {
            "/newroot" => "/newroot/".into(),
            target => target.into(),
        }
    };
    if call.starts_with("mount(\"proc\"") {
        let target = target();
        return format!("Can't mount proc on {target}: {errno}");
    }
    if call.starts_with("mount(\"tmpfs\"") {
        return format!("Can't mount tmpfs on {}: {errno}", target());
    }
    if call.starts_with("mount(\"devpts\"") {
        return format!("Can't mount devpts on {}: {errno}", target());
    }
    if call.starts_with("mount(\"overlay\"") {
        return format!("Can't make overlay mount on {}: {errno}", target());
    }
    if call.starts_with("mount(\"mqueue\"") {
        return format!("Can't mount mqueue on {}: {errno}", target());
    }
    if call.starts_with("readlink(\"/proc/self/fd/") {
        let link = nth(0);
        return format!("Can't find source path {link}: {errno}");
    }
    if call.starts_with("bind mount ") {
        let (src, dest) = (nth(0), nth(1));
        // bubblewrap names the source as it resolved it (symlinks and `..` gone); the host is
        // out of reach here, so the source is named as given.
        return format!(
            "Can't bind mount /oldroot{src} on /newroot{dest}: Unable to mount source on \
             destination: {errno}"
        );
    }
    if call.starts_with("copy fd ") {
        let dest = nth(0);
        return format!("Can't write data to file {dest}: {errno}");
    }
    if call.starts_with("read(seccomp fd ") {
        return format!("Can't read seccomp data: {errno}");
    }
    if call.starts_with(crate::seccomp::NOT_WHOLE_INSTRUCTIONS) {
        return "Invalid seccomp data, must be multiple of 8".into();
    }
    if e.step.starts_with("13 seccomp") && e.err.errno == Errno::EINVAL {
        return "Unable to set up system call filtering as requested: prctl(PR_SET_SECCOMP) \
                reported EINVAL. (Hint: this requires a kernel configured with CONFIG_SECCOMP \
                and CONFIG_SECCOMP_FILTER.)"
            .into();
    }
    if e.step.starts_with("13 seccomp") && e.err.call.starts_with("prctl(PR_SET_SECCOMP") {
        return format!("prctl(PR_SET_SECCOMP): {errno}");
    }
    if call.starts_with("open_tree(") {
        let src = nth(0);
        // No bubblewrap words to keep here: bubblewrap, binding as it goes, does not fail.
        let hint = match e.err.errno {
            Errno::EMFILE | Errno::ENOSYS => {
                crate::boundary::hint(&e.err).map(|h| format!("; hint: {h}"))
            }
            _ => None,
        };
        return format!(
            "Can't find source path {src}: {errno}{}",
            hint.unwrap_or_default()
        );
    }
    // The scaffold's first directory: the first write in the new user namespace, which fails
    // when no id maps were written (a --userns-block-fd client that released without them).
    if call == "mkdir -p \"newroot\"" {
        return format!("Creating newroot failed: {errno}");
    }
    if call.starts_with("mkdir parents for ") {
        return format!("Can't mkdir parents for {}: {errno}", nth(0));
    }
    if call.starts_with("mkdir -p") {
        return format!(
            "Can't mkdir {}: {errno}",
            nth(0).trim_start_matches("/newroot")
        );
    }
    if call.starts_with("symlink(") {
        return format!("Can't make symlink at {}: {errno}", nth(1));
    }
    if call.starts_with("chmod(") {
        let path = nth(0).trim_start_matches("/newroot");
        let perms = call.rsplit(", ").next().unwrap_or("").trim_end_matches(')');
        return format!("Can't chmod {} {path}: {errno}", c_octal(perms));
    }
    // bubblewrap resolves the path, then looks it up in the mount table.
    if call.starts_with("open(") && call.ends_with("to remount it RDONLY") {
        let path = nth(0);
        return format!("Can't remount readonly on {path}: realpath(destination): {errno}");
    }
    if call.starts_with("mount_setattr(") && call.ends_with("RDONLY)") {
        let path = nth(0);
        return match e.err.errno {
            // The table is searched for the resolved path, which has no trailing '/'.
            Errno::EINVAL => format!(
                "Can't remount readonly on {path}: Unable to find \"{}\" in mount table",
                path.trim_end_matches('/')
            ),
            _ => format!("Can't remount readonly on {path}: {errno}"),
        };
    }
    // A file --file writes ("Can't create file"), and one made to mount a file on, for a
    // bind or a --bind-data ("Can't create file at"): bubblewrap words the two differently.
    let made_file = call.starts_with("open(") && call.ends_with("O_CREAT)");
    let mount_point = call.starts_with("mknod(") && call.ends_with("S_IFREG)");
    if made_file || mount_point {
        let path = nth(0).trim_start_matches("/newroot");
        let at = if mount_point { " at" } else { "" };
        return format!("Can't create file{at} {path}: {errno}");
    }
    if e.step.starts_with("11 lock files") {
        let path = nth(0);
        let what = if call.starts_with("open(") {
            "open lock file"
        } else {
            "lock file"
        };
        return format!("Unable to {what} {path}: {errno}");
    }
    if call.starts_with("setresuid(") || call.starts_with("setresgid(") {
        let kind = if call.starts_with("setresuid(") {
            "uid"
        } else {
            "gid"
        };
        let id = call
            .split_once('(')
            .map_or("", |(_, rest)| rest.trim_end_matches(')'));
        return format!("unable to switch to {kind} {id}: {errno}");
    }
    if e.step.contains("enter the user namespace") {
        if e.err.errno == Errno::EINVAL {
            return "Joining the specified user namespace failed, it might not be a descendant of \
                    the current user namespace."
                .into();
        }
        return format!("Joining specified user namespace failed: {errno}");
    }
    if e.step.contains("second user namespace") {
        return format!("Setting userns2 failed: {errno}");
    }
    if e.step.contains("enter the pid namespace") {
        return format!("Setting pidns failed: {errno}");
    }
    if call.starts_with("chdir(") {
        return format!("Can't chdir to {}: {errno}", nth(0));
    }
    if e.step == crate::boundary::NESTED_USERNS_STEP {
        return "creation of new user namespaces was not disabled as requested".into();
    }
    // bubblewrap's words, then the hint (Ubuntu 24.04's AppArmor, whose unprivileged_userns
    // profile leaves the new user namespace without the capabilities to write the maps).
    if e.step.starts_with("2 write id maps") {
        let hint = crate::boundary::hint(&e.err).map(|h| format!("; hint: {h}"));
        return format!("setting up uid map: {errno}{}", hint.unwrap_or_default());
    }
    // The launcher's helper made the namespace and brought its loopback up: bubblewrap's words
    // for whichever part failed.
    let loopback = call.starts_with("socket(") || call.starts_with("ioctl(lo");
    if e.step.starts_with("10 network namespace") && !loopback {
        return new_namespace_failed(e.err.errno);
    }
    if e.step.starts_with("10 loopback") || e.step.starts_with("10 network namespace") {
        return format!("loopback: Failed RTM_NEWADDR: {errno}");
    }
    if e.step.starts_with("10 hostname") {
        let name = call
            .strip_prefix("sethostname(\"")
            .and_then(|n| n.strip_suffix("\")"))
            .unwrap_or("");
        return format!("Can't set hostname to {name}: {errno}");
    }
    // A call bubblewrap does not make (mount_setattr, clone3, close_range: a kernel too old
    // for airlock, or a filter around it): no words of its to keep, and the hint says which.
    let hint = match e.err.errno {
        Errno::ENOSYS => crate::boundary::hint(&e.err).map(|h| format!("; hint: {h}")),
        _ => None,
    };
    format!(
        "{}: {errno}{}",
        call.replace("\"/newroot", "\""),
        hint.unwrap_or_default()
    )
}

/// The strings a call's text quotes, in order and unescaped: the text writes them with Rust's
/// `{:?}` (`mkdir -p "/newroot/a\"b"`), and bubblewrap names a path by its bytes as they are,
/// a `"`, `\\`, tab or newline in it too (a review: a path was cut at its `"`).
fn strings_in(call: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = call.chars();
    while chars.by_ref().any(|c| c == '"') {
        let mut text = String::new();
        while let Some(c) = chars.next() {
            match (c, (c == '\\').then(|| chars.next()).flatten()) {
                ('"', _) => break,
                ('\\', Some('n')) => text.push('\n'),
                ('\\', Some('t')) => text.push('\t'),
                ('\\', Some('r')) => text.push('\r'),
                ('\\', Some('0')) => text.push('\0'),
                // `\u{7f}`; `\xNN`, a byte that is no UTF-8 (none in bwrap mode's text).
                ('\\', Some('u')) => {
                    let hex: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                    let ch = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                    text.push(ch.unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                ('\\', Some('x')) => {
                    chars.by_ref().take(2).for_each(drop);
                    text.push(char::REPLACEMENT_CHARACTER);
                }
                ('\\', Some(other)) => text.push(other),
                ('\\', None) => {}
                (c, _) => text.push(c),
            }
        }
        out.push(text);
    }
    out
}

/// An octal mode (`0755`, `0000`) as C's printf prints it with "%#o", as bubblewrap names a
/// --chmod mode: a single 0 for zero, else one leading 0 (`0755`, `05`).
fn c_octal(mode: &str) -> String {
    match u32::from_str_radix(mode, 8) {
        Ok(0) => "0".into(),
        Ok(m) => format!("0{m:o}"),
        Err(_) => mode.into(),
    }
}

/// bubblewrap's words when a namespace cannot be created (ENOSPC: a limit or the nesting
/// depth).
pub fn new_namespace_failed(errno: Errno) -> String {
    if errno == Errno::ENOSPC {
        return "Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces \
                exceeded (ENOSPC)"
            .into();
    }
    format!(
        "Creating new namespace failed: {}",
        crate::sys::errno_text(errno)
    )
}

/// Run `bwrap ARGS...`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let parent = std::os::unix::process::parent_id();
    let caller = Caller::current();
    let die = |msg: &str| -> i32 {
        crate::say!("{}bwrap: {msg}", level("<3>"));
        1
    };
    match parse(args, &caller) {
        Ok(Parsed::Help) => {
            let _ = crate::write_stdout(HELP); // bubblewrap exits 0 whatever the write did
            0
        }
        Ok(Parsed::Version) => {
            let _ = crate::write_stdout(&format!("{VERSION}\n"));
            0
        }
        Ok(Parsed::Run(spec)) => {
            let io = spec.bwrap.as_ref();
            if io.is_some_and(|b| b.die_with_parent) {
                // --die-with-parent: the launcher dies with its own parent (and the sandbox with
                // the launcher); checked after setting, as the parent may already be gone.
                if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
                    return die(&format!("prctl(PR_SET_PDEATHSIG): {e}"));
                }
                if std::os::unix::process::parent_id() != parent {
                    return die("parent died before the sandbox started");
                }
            }
            for fd in io
                .iter()
                .flat_map(|b| [b.info_fd, b.json_status_fd])
                .flatten()
            {
                // bubblewrap's write to a descriptor not open for writing fails with EBADF too.
                let writable = crate::sys::dup_fd(fd).is_ok_and(|d| {
                    nix::fcntl::fcntl(&d, nix::fcntl::FcntlArg::F_GETFL)
                        .is_ok_and(|fl| fl & libc::O_ACCMODE != libc::O_RDONLY)
                });
                if !writable {
                    let which = if Some(fd) == io.and_then(|b| b.info_fd) {
                        "info_fd"
                    } else {
                        "json_status_fd"
                    };
                    return die(&format!("Write to {which}: Bad file descriptor"));
                }
            }
            run_spec(&spec, &die)
        }
        Err(e) => die(&e.0),
    }
}

fn run_spec(spec: &Spec, die: &dyn Fn(&str) -> i32) -> i32 {
    {
        match crate::launch::run(spec) {
            Ok(outcome) => outcome.exit_code(),
            // The errno glibc's execvp failed with, as bubblewrap reports it (boundary::exec
            // searches as execvp does and sends its text alone).
            Err(crate::launch::Failure::Exec(_, why)) => {
                die(&format!("execvp {}: {why}", spec.argv[0]))
            }
            Err(
                crate::launch::Failure::Setup(msg)
                | crate::launch::Failure::Usage(msg)
                | crate::launch::Failure::SetupTimedOut(msg)
                | crate::launch::Failure::Cancelled(_, msg),
            ) => die(&msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{c_int, c_octal, octal, tmpfs_size};

    /// A setup step's message names its paths as they are, whatever `{:?}` escaped in them
    /// (a review: `/u"x` was named `/u\`).
    #[test]
    fn messages_name_paths_as_they_are() {
        use crate::boundary::StepError;
        use nix::errno::Errno;
        for path in ["/u\"x", "/a\\b", "/t\tn\nr\r", "/z\u{7f}\u{200b}", "/plain"] {
            let cases = [
                (
                    format!("mkdir -p {:?}", format!("/newroot{path}")),
                    format!("Can't mkdir {path}"),
                ),
                (
                    format!("mkdir parents for {path:?}"),
                    format!("Can't mkdir parents for {path}"),
                ),
                (
                    format!("mount(\"tmpfs\", {:?}, MS_NOSUID)", path),
                    format!("Can't mount tmpfs on {path}"),
                ),
                (
                    format!("bind mount {path:?} on {:?}", "/d\""),
                    format!("Can't bind mount /oldroot{path} on /newroot/d\""),
                ),
            ];
            for (call, want) in cases {
                let e = StepError {
                    step: "7 build the root",
                    err: crate::sys::SysError {
                        call: call.clone(),
                        errno: Errno::EROFS,
                    },
                };
                let got = super::message(&e);
                assert!(got.starts_with(&want), "{call}: {got}");
            }
        }
        assert_eq!(super::strings_in("no quotes"), Vec::<String>::new());
        assert_eq!(
            super::strings_in(r#"x("a\"b", "\xe9")"#),
            ["a\"b", "\u{fffd}"]
        );
    }

    /// --size reads as C's strtoull(s, &end, 0) with bubblewrap's checks on it.
    #[test]
    fn numbers_read_as_bubblewraps_strtol_into_an_int() {
        for (v, want) in [
            ("5", Some(5)),
            (" 5", Some(5)),
            ("+5", Some(5)),
            ("-0", Some(0)),
            ("4294967301", Some(5)),
            ("2147483648", None),
            ("99999999999999999999", None),
            ("-1", None),
            ("", None),
            ("5 ", None),
            ("0x5", None),
        ] {
            assert_eq!(c_int(v), want, "{v:?}");
        }
    }

    #[test]
    fn tmpfs_size_reads_as_bubblewrap_does() {
        for (v, want) in [
            ("4096", Some(4096)),
            ("0100000", Some(32768)),
            ("0x100000", Some(1 << 20)),
            ("0X1f", Some(31)),
            ("9223372036854775807", Some(i64::MAX as u64)),
            ("9223372036854775808", None),
            ("18446744073709551616", None),
            ("0", None),
            ("00", None),
            ("0x", None),
            ("08", None),
            ("1k", None),
            (" 4096", None),
            ("+4096", None),
            ("-1", None),
            ("", None),
        ] {
            assert_eq!(tmpfs_size(v).ok(), want, "{v:?}");
        }
    }

    /// A --chmod mode in a message, as "%#o" prints it.
    #[test]
    fn modes_print_as_cs_alternate_octal() {
        for (call, want) in [
            ("0000", "0"),
            ("0005", "05"),
            ("0755", "0755"),
            ("4755", "04755"),
        ] {
            assert_eq!(c_octal(call), want);
        }
    }

    /// --perms and --chmod as strtoul(.., 8) reads them, with bubblewrap's 07777 ceiling.
    #[test]
    fn modes_read_as_bubblewrap_does() {
        for (v, want) in [
            ("755", Some(0o755)),
            ("0700", Some(0o700)),
            (" 7", Some(7)),
            ("\t+644", Some(0o644)),
            ("-0", Some(0)),
            ("7777", Some(0o7777)),
            ("10000", None),
            ("-1", None),
            ("8", None),
            ("7 ", None),
            ("+-7", None),
            (" ", None),
            ("", None),
        ] {
            assert_eq!(octal("perms", v).ok(), want, "{v:?}");
        }
    }
}
