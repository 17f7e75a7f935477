//! airlock: run a command inside a boundary that starts with nothing, held by the kernel.
//!
//! Front ends (the `run` flags, a JSON request) produce a `spec::Spec`; `launch` and `boundary`
//! build the sandbox from it; `report` hands the results back.
//!
//! There is no std runtime start-up (`no_main`): the C runtime calls `sys::main` directly, which
//! (in `sys`) does the two parts of that start-up airlock needs (`sys::process_start`) and skips the rest
//! (a guard-page probe that parses /proc/self/maps, an alternate signal stack): that start-up
//! is about 20 system calls and 100 KiB of code pages on every launch.

#![cfg_attr(not(test), no_main)]

/// Print a line on airlock's stderr, as eprintln! does, but a write that fails (a full disk, a
/// file past the caller's RLIMIT_FSIZE, a closed pipe) is ignored: eprintln! would panic, and
/// airlock (built with panic=abort) would end with SIGABRT in place of its exit status.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // One write for the whole line: stderr is unbuffered, and writeln! writes each piece
        // on its own, so a line could come out in parts between a task's own lines.
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

mod audit;
mod boundary;
mod bwrap;
mod channel;
mod demo;
mod explain;
mod launch;
mod limits;
#[cfg(test)]
mod policy;
mod relay;
mod report;
mod request;
mod seccomp;
mod spec;
mod sys;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use spec::{Draft, UsageError, exit};

/// Small blocks from a region in .bss, the rest from the C library (see sys/heap.rs). Unit
/// tests run under it too: one of them claims the region for its thread.
#[global_allocator]
static HEAP: sys::heap::Heap = sys::heap::Heap;

const EXIT_CODES: &str = "\
Exit status:
  N        the task's own exit status
  128+N    the task was killed by signal N (or killed the sandbox's init with it); or a
           SIGINT, SIGTERM, SIGHUP or SIGQUIT came before the task started, which never
           ran (airlock says so)
  2        bad usage: unknown flag, an argument or forwarded variable that is not UTF-8,
           bad input name, malformed request, unreadable input or one that is not a
           regular file, a bind source that does not exist, a bind source or destination
           that is not absolute, a bind source or input led out of a writable bind's
           source by a link in it, a bind destination airlock manages or one the kernel
           cannot take (a name past 255 bytes, a path past 4087), a bind inside a host
           tree whose mount point that tree does not hold, a directory bound over a
           system path that is a symlink (/bin) or over a file or link of the sandbox
           (/dev/null, /etc/passwd), a bind below one or in /dev/pts, a file bound over a
           directory or a directory over a file, inputs larger than scratch (in bytes,
           pages or inodes), --host-uid/--host-gid naming another id from a caller other
           than root, a directory, an O_PATH descriptor or a listening socket on a standard
           stream, a closed stdout under --json; or the JSON report, or a streamed run's
           output, could not be written whole (airlock says so on stderr, with the run's
           status)
  124      the timeout fired; the whole sandbox was killed (before the task started
           if setup, which copies the inputs, took the whole timeout: airlock says so)
  125      an isolation step failed (the message names the step, the syscall, the path and
           the errno); the task never ran. Rarely: airlock ran out of memory, or the
           sandbox's init ended without reporting the task's end (airlock says which)
  126      the command was found but cannot be executed, or a path to it (one with a /)
           cannot be followed: a file where a directory should be, a symlink loop, a name
           past 255 bytes, a directory it may not search (as bash says)
  127      the command was not found (on PATH, an entry that is missing, a file, a loop or
           too long is passed over); also a command name past 255 bytes";

const REPORT_KEYS: &str = "\
JSON report (--json, --request), every key present every time:
  exit_code         int, or null if the task was killed by a signal
  signal            int (the signal that ended the task), or null
  timed_out         bool
  duration_ms       int
  stdout, stderr    text (capped at --max-output bytes)
  stdout_truncated, stderr_truncated    bool
  files             object: name -> text of each regular file directly in scratch that the
                    task created or changed (inputs left as handed are not listed)
  files_truncated   names of files cut at the cap (or where the 1 MiB of file text ran out)
  files_skipped     list of {name, reason}: directory, symlink, fifo, socket, device,
                    bind (a --ro-bind/--bind mounted in scratch), name not UTF-8,
                    unreadable, count limit (1000 entries are examined, inputs left as
                    handed aside; the next 100 are listed, the rest counted in one entry
                    named \"*\"), total size limit
                    (1 MiB of file text in all), scratch unreadable (name \".\")
  utf8_replaced     fields whose bytes were not UTF-8 and were replaced (\"stdout\",
                    \"stderr\", \"files/NAME\")
  limit_hit         the limit the task ran into (read it with exit_code: it may not
                    have ended the task): memory, pids, cpu, file_size, scratch_full,
                    timeout; or null
  limits            for each of memory, pids, cpu_time_ms, file_size, nofile,
                    scratch_size: {requested, applied, mechanism}
  warnings          what the command line opened in the boundary (a variable that looks
                    like a credential, a writable bind, a bound socket or a bind holding
                    host sockets, a bind holding a home's credentials or the host's
                    /proc, an --input of a home's credentials, --share-net and what of
                    the host it hands over), as said on stderr
On airlock's own failure: {\"error\": TEXT, \"error_kind\": KIND, \"exit_code\": N},
KIND one of usage, setup, setup_timeout, cancelled, command_not_found, command_not_executable,
out_of_memory (airlock's own; the task may have run).

JSON request (--request FILE, - for stdin):
  {\"command\": \"python3\", \"args\": [\"probe.py\"], \"inputs\": {\"probe.py\": \"...\"},
   \"env\": {\"NAME\": \"value\"}, \"timeout_ms\": 10000, \"max_output\": 8000}
  Also the limits (\"memory\", \"pids\", \"cpu_time_ms\", \"file_size\", \"nofile\",
  \"scratch_size\") and \"chdir\"; sizes in bytes or as text (\"512M\").
  Unknown keys, wrong types and keys given twice are refused (exit 2) with a message
  naming the key.";

#[derive(Parser)]
#[command(
    name = "airlock",
    version,
    about = "Run a command inside a kernel-enforced boundary that starts with nothing.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run COMMAND in a new sandbox: new user, mount, pid, network, ipc, uts and cgroup
    /// namespaces; a read-only tmpfs root with the system paths; one writable scratch dir
    /// (/work); no capabilities; no_new_privs; seccomp.
    #[command(after_help = format!("{EXIT_CODES}\n\n{REPORT_KEYS}"))]
    Run(RunArgs),
    /// Print the boundary `airlock run` would build with the same options, without running
    /// anything: namespaces, every mount with its flags, the environment, the identity inside
    /// and on the host, the limits and the seccomp policy by group.
    #[command(
        after_help = "The options are run's, described rather than run: with --json or \
                            --request, explain describes that JSON run (its timeout and output \
                            cap) and prints text, never a report. Exit 0, or 2 for options run \
                            refuses (explain opens no host path, so a missing bind source or \
                            input is listed, not refused)."
    )]
    Explain(RunArgs),
    /// Show the boundary at work: a probe tries to read credentials, find a secret and reach
    /// a server, on the host, inside airlock, and inside airlock with a forwarding mistake.
    Demo {
        /// Print the same as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// The demo's probe (run as the task). Not for direct use; named so that clap's "a
    /// similar subcommand exists" does not offer it for a short typo (`frob`).
    #[command(hide = true, name = "demo-probe")]
    Probe { url: String },
    /// Audit a docker, bwrap or airlock command line: name each way the host leaks in.
    /// Exit 0 when clean, 1 when there are findings, 2 when the input cannot be parsed.
    Audit {
        #[command(subcommand)]
        kind: AuditKind,
    },
    /// Print the docker run command that expresses airlock's policy.
    DockerArgs(DockerArgs),
    /// Write the seccomp program `airlock run` installs (compiled from seccomp/<arch>.json),
    /// less its rules on RLIMIT_CORE changes, to stdout as raw `struct sock_filter`
    /// instructions, the form bubblewrap's `--seccomp FD` reads: `bwrap --seccomp 9 ... 9<
    /// <(airlock seccomp-bpf)`.
    #[command(
        after_help = "Exit 0; 2 when stdout is a terminal (the program is binary: redirect \
                      it) or cannot take it whole. The instructions are in this machine's \
                      byte order; the program checks the architecture first and kills a \
                      process that calls in with another's numbers."
    )]
    SeccompBpf,
    /// Put a file named `bwrap` in DIR (a hard link to this binary, or a copy across
    /// filesystems): pipelines that run `bwrap` from PATH then run airlock.
    InstallBwrap {
        /// The directory to put `bwrap` in (e.g. /usr/local/bin or ~/.local/bin).
        dir: PathBuf,
        /// Replace an existing DIR/bwrap.
        #[arg(long)]
        force: bool,
    },
    /// Run bubblewrap's command line (the same as starting airlock as `bwrap`).
    #[command(disable_help_flag = true)]
    Bwrap {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum AuditKind {
    /// Audit a `docker run` command line.
    Docker(AuditArgs),
    /// Audit a `bwrap` command line.
    Bwrap(AuditArgs),
    /// Audit an `airlock run` command line: `run` (or `explain`) and its options, which
    /// `airlock` or a path to it may lead.
    Airlock(AuditArgs),
}

#[derive(Args)]
struct AuditArgs {
    /// Read the command line from FILE (- for stdin): a JSON array of strings or a
    /// shell-quoted line (audit airlock: also a JSON request, as `run --request` reads it).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    /// The command line to audit (after --).
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
}

#[derive(Args)]
struct DockerArgs {
    #[arg(long, default_value = "python:3.12-slim")]
    image: String,
    #[arg(long, default_value = "512m")]
    memory: String,
    #[arg(long, default_value_t = 256)]
    pids: u32,
    /// The host directory mounted as the only writable volume, at /work.
    #[arg(long, default_value = "/tmp/airlock-scratch")]
    scratch: String,
    #[arg(long, default_value = "65534:65534")]
    user: String,
    /// Print the argument vector as a JSON array.
    #[arg(long)]
    json: bool,
    /// The command to run in the container (after --).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Args, Debug, Default)]
struct RunArgs {
    /// Forward the caller's variable NAME, or set NAME=VALUE (repeatable: a name given again
    /// takes the later value). Nothing else of the caller's environment crosses.
    #[arg(long = "env", value_name = "NAME[=VALUE]", allow_hyphen_values = true)]
    env: Vec<String>,
    /// Copy the host file PATH into scratch as NAME (a plain file name, which may begin with
    /// `-`; one with `=` in it only through --request; repeatable).
    #[arg(long = "input", value_name = "NAME=PATH", allow_hyphen_values = true)]
    input: Vec<String>,
    /// Make a host path visible read-only at DEST (default: the same path).
    #[arg(
        long = "ro-bind",
        value_name = "SRC[:DEST]",
        allow_hyphen_values = true
    )]
    ro_bind: Vec<String>,
    /// Make a host path visible and WRITABLE: a channel out of the sandbox.
    #[arg(long = "bind", value_name = "SRC[:DEST]", allow_hyphen_values = true)]
    bind: Vec<String>,
    /// Keep the host's network (no network namespace). Dangerous.
    #[arg(long)]
    share_net: bool,
    /// When airlock runs as root: the task's uid on the host (never 0). Any other caller's
    /// task runs as the caller: another uid is refused.
    #[arg(long, value_name = "UID", allow_negative_numbers = true)]
    host_uid: Option<u32>,
    /// When airlock runs as root: the task's gid on the host (never 0). Any other caller's
    /// task runs as the caller: another gid is refused.
    #[arg(long, value_name = "GID", allow_negative_numbers = true)]
    host_gid: Option<u32>,
    /// Kill the whole sandbox after DURATION (500ms, 10s, 2m, 1h; a bare number is seconds).
    /// Default: none, or 10s with --json/--request.
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    timeout: Option<String>,
    /// Cap on stdout, stderr and each result file in the JSON report, with --json or
    /// --request only (default 8000, at most 64M).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    max_output: Option<String>,
    /// Capture output and print one JSON report instead of streaming.
    #[arg(long)]
    json: bool,
    /// Memory cap for the whole sandbox (cgroup) or per process (rlimit fallback). Default 4G,
    /// at least 16M.
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    memory: Option<String>,
    /// Maximum number of processes and threads. Default 1024, at least 2.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pids: Option<u64>,
    /// CPU time per process (RLIMIT_CPU), e.g. 30s, 10m (a bare number is seconds). Default
    /// 30m, at least 1s.
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    cpu_time: Option<String>,
    /// Largest file the task may write (RLIMIT_FSIZE). Default 4G.
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    file_size: Option<String>,
    /// Open files per process (RLIMIT_NOFILE). Default 8192, at least 16.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    nofile: Option<u64>,
    /// Size of the writable scratch tmpfs (and of /dev/shm). Default 2G, at least 1M.
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    scratch_size: Option<String>,
    /// Start the task in DIR, an absolute path inside the sandbox (default: /work, scratch).
    #[arg(long, value_name = "DIR")]
    chdir: Option<String>,
    /// Read the run as a JSON request from FILE (- for stdin); prints the JSON report.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["command", "json"])]
    request: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

// Under test the harness provides the entry point; this keeps airlock_main (and what only it
// reaches) counted as used.
#[cfg(test)]
const _: fn(Vec<std::ffi::OsString>) -> i32 = airlock_main;

/// The randomized unit tests' generator: xorshift64 from a fixed `seed`, each call an index
/// below `n`, so that a failing line is the same line on every run.
#[cfg(test)]
fn picker(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    }
}

/// airlock's main, called by `sys::main` (the process entry point) with the command line;
/// returns the exit code.
fn airlock_main(args: Vec<std::ffi::OsString>) -> i32 {
    // A setuid or setgid install would let any local user act as the root caller airlock
    // trusts (identity map, root's right to bind any host path). Refuse it outright.
    if nix::unistd::getuid() != nix::unistd::geteuid()
        || nix::unistd::getgid() != nix::unistd::getegid()
    {
        crate::say!("airlock: refusing to run setuid or setgid: install it as an ordinary binary");
        return exit::SETUP_FAILED;
    }
    // Started as `bwrap` (a link or copy of that name), or as `airlock bwrap ARGS...`: the
    // bubblewrap front end reads the whole command line itself.
    let lossy: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let name = lossy.first().map(|a| a.rsplit('/').next().unwrap_or(a));
    let bwrap_args = match (name, lossy.get(1).map(String::as_str)) {
        // Also a name bubblewrap is installed under beside its users: flatpak's bundled
        // `flatpak-bwrap`, the Steam runtime's `srt-bwrap`.
        (Some(n), _) if n == "bwrap" || n.ends_with("-bwrap") => Some(1),
        (_, Some("bwrap")) => Some(2),
        _ => None,
    };
    // Every front end takes UTF-8 only. The refusal is in the front end's own format: the
    // bwrap one's is bubblewrap's (exit 1, `bwrap:`, with --level-prefix's `<3>`).
    if let Some((i, arg)) = args.iter().enumerate().find(|(_, a)| a.to_str().is_none()) {
        let msg = format!("argument {i} is not valid UTF-8: {arg:?}");
        return match bwrap_args {
            Some(_) => {
                let level = lossy.iter().any(|a| a == "--level-prefix");
                crate::say!("{}bwrap: {msg}", if level { "<3>" } else { "" });
                1
            }
            None => fail(json_run(&lossy), &launch::Failure::Usage(msg)),
        };
    }
    let args = lossy; // all UTF-8, so nothing was lost
    sys::heap::report_out_of_memory_as_json(bwrap_args.is_none() && json_run(&args));
    if let Some(skip) = bwrap_args {
        return bwrap::main(&args[skip..]).clamp(0, 255);
    }
    if let Some(a) = quick_run(&args).or_else(|| parse_run(&args)) {
        return run(a).clamp(0, 255);
    }
    let cli = match Cli::try_parse_from(&args).map_err(|e| command_tip(e, &args)) {
        Ok(cli) => cli,
        // A run that asked for JSON gets clap's refusal as the JSON failure report too, on
        // stdout (clap's own message still goes to stderr).
        Err((e, tip)) if e.use_stderr() && json_run(&args) => {
            let _ = e.print();
            let mut msg = clap_message(&e.to_string());
            if let Some(tip) = tip {
                msg = format!("{msg}: {tip}");
            }
            return fail(true, &launch::Failure::Usage(msg));
        }
        // Help and version on stdout, checked as any output is (clap's own exit would drop
        // a failed write).
        Err((e, _)) if !e.use_stderr() => {
            let printed = e.print().and_then(|()| std::io::stdout().flush());
            return output_written(printed, 0);
        }
        // Plain-mode refusals: as clap prints and exits them.
        Err((e, _)) => e.exit(),
    };
    let code = match cli.command {
        Command::Run(args) => run(args),
        Command::Explain(args) => explain(args),
        Command::Demo { json } => demo::run(json),
        Command::Probe { url } => demo::probe(&url),
        Command::Audit { kind } => run_audit(kind),
        Command::DockerArgs(a) => docker_args(a),
        Command::SeccompBpf => seccomp_bpf(),
        Command::InstallBwrap { dir, force } => install_bwrap(&dir, force),
        Command::Bwrap { args } => bwrap::main(&args),
    };
    code.clamp(0, 255)
}

/// A command given without `--` before it (`airlock run python3 x.py`, as bubblewrap takes it)
/// is clap's unexpected argument: its refusal gets a tip with the spelling `run` takes, also
/// returned for the JSON report.
fn command_tip(mut e: clap::Error, args: &[String]) -> (clap::Error, Option<String>) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let sub = args.get(1).map(String::as_str).unwrap_or_default();
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) if !arg.starts_with('-') => arg.clone(),
        _ => return (e, None),
    };
    if e.kind() != ErrorKind::UnknownArgument || !matches!(sub, "run" | "explain") {
        return (e, None);
    }
    let tip = format!("the command goes after '--': airlock {sub} [OPTIONS] -- {arg} ...");
    e.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.clone().into()]),
    );
    (e, Some(tip))
}

/// clap's refusal as one line: its first paragraph, whose later lines (the arguments a
/// conflict names, after "cannot be used with:") are joined to the first, not dropped.
fn clap_message(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).take_while(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let rest: Vec<&str> = lines.collect();
    match rest.is_empty() {
        true => first.to_string(),
        false => format!("{first} {}", rest.join(", ")),
    }
}

/// `airlock run` asked to report in JSON (--json or --request before any `--`).
fn json_run<S: AsRef<str>>(args: &[S]) -> bool {
    args.get(1).is_some_and(|a| a.as_ref() == "run")
        && args[2..]
            .iter()
            .map(AsRef::as_ref)
            .take_while(|a| *a != "--")
            .any(|a| {
                // `--json=true` is refused (the flag takes no value), but as the JSON run's
                // failure: its caller reads stdout for a report.
                a == "--json"
                    || a.starts_with("--json=")
                    || a == "--request"
                    || a.starts_with("--request=")
            })
}

/// `airlock run ...` read without clap, for the lines launchers send on every call: clap's
/// run-only parser still builds run's 18 argument definitions first (96 µs of a launch, median
/// of 200, against 1-2 µs here). Only a line clap reads one way for certain comes back: each
/// flag spelled out once (the repeatable ones any number of times), its value after `=` or
/// as the next argument, not starting with `-`, numbers in plain digits, and
/// the command after `--`. Anything else (help, --request, an unknown or repeated flag, any
/// value clap might read otherwise or refuse) returns None and goes to clap, whose reading
/// and messages are the reference; a unit test compares the two on random lines.
fn quick_run(args: &[String]) -> Option<RunArgs> {
    if args.get(1)? != "run" {
        return None;
    }
    let mut a = RunArgs::default();
    let mut rest = args[2..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            a.command = rest.cloned().collect();
            return Some(a);
        }
        let (name, inline) = match arg.strip_prefix("--")?.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (&arg[2..], None),
        };
        let switch = match name {
            "json" => &mut a.json,
            "share-net" => &mut a.share_net,
            _ => {
                let value = match inline {
                    Some(v) => v,
                    None => rest.next()?,
                };
                if value.starts_with('-') {
                    return None;
                }
                let text = || Some(value.to_string());
                match name {
                    "env" => a.env.push(value.to_string()),
                    "input" => a.input.push(value.to_string()),
                    "ro-bind" => a.ro_bind.push(value.to_string()),
                    "bind" => a.bind.push(value.to_string()),
                    "timeout" => set_once(&mut a.timeout, text())?,
                    "max-output" => set_once(&mut a.max_output, text())?,
                    "memory" => set_once(&mut a.memory, text())?,
                    "cpu-time" => set_once(&mut a.cpu_time, text())?,
                    "file-size" => set_once(&mut a.file_size, text())?,
                    "scratch-size" => set_once(&mut a.scratch_size, text())?,
                    "chdir" => set_once(&mut a.chdir, text())?,
                    "host-uid" => set_once(&mut a.host_uid, digits(value))?,
                    "host-gid" => set_once(&mut a.host_gid, digits(value))?,
                    "pids" => set_once(&mut a.pids, digits(value))?,
                    "nofile" => set_once(&mut a.nofile, digits(value))?,
                    _ => return None,
                }
                continue;
            }
        };
        if inline.is_some() || *switch {
            return None;
        }
        *switch = true;
    }
    // No `--`: clap refuses a bare command, and `run` alone is left to it too.
    None
}

/// Fill `slot` with `value`; None if it was filled already (clap refuses a repeated flag) or
/// there is no value.
fn set_once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value?);
            Some(())
        }
    }
}

/// A number written in plain decimal digits that fits T.
fn digits<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse().ok())
        .flatten()
}

/// `airlock run ...` parsed with the run subcommand's own definition alone. clap builds every
/// subcommand's arguments before it reads the command line, and for a launch that was the
/// largest part of its start-up: 254 µs, against 87 µs for `run`'s arguments alone (medians
/// of 200 launches). Only a command line that `run` accepts as it is comes back parsed;
/// anything else (`--help`, an unknown flag, a bad value, a conflict) returns None and goes
/// through the whole parser, whose messages name the whole command. The values cannot
/// differ from the whole parser's: `Cli` adds nothing to `run` but help texts (the test
/// below compares the two).
fn parse_run(args: &[String]) -> Option<RunArgs> {
    use clap::FromArgMatches;
    if args.get(1).map(String::as_str) != Some("run") {
        return None;
    }
    let matches = RunArgs::augment_args(clap::Command::new("run"))
        .try_get_matches_from(&args[1..])
        .ok()?;
    RunArgs::from_arg_matches(&matches).ok()
}

/// An option's value that is one of `airlock run`'s own flags (`--input --ro-bind=/x`: an
/// empty unquoted variable before it) is refused: taken as the value, the flag after it would
/// silently not apply (the sign-off review). A value may begin with `-` otherwise (an input
/// named `-1.txt`).
fn flag_as_value(option: &str, value: &str) -> Result<(), UsageError> {
    use clap::Args;
    let flag = value.split('=').next().unwrap_or(value);
    let Some(name) = flag.strip_prefix("--") else {
        return Ok(());
    };
    let run = RunArgs::augment_args(clap::Command::new("run"));
    match run.get_arguments().any(|a| a.get_long() == Some(name)) {
        true => Err(UsageError(format!(
            "{option} {value:?}: that is airlock run's flag {flag}: {option}'s own value is \
             missing before it"
        ))),
        false => Ok(()),
    }
}

/// The run the flags describe, with the limit flags applied over `limits`.
fn draft_from_flags(a: &RunArgs, limits: limits::Limits) -> Result<Draft, UsageError> {
    let mut binds = Vec::new();
    for b in &a.ro_bind {
        binds.push(spec::parse_bind(b, false)?);
    }
    for b in &a.bind {
        binds.push(spec::parse_bind(b, true)?);
    }
    Ok(Draft {
        argv: a.command.clone(),
        env: a.env.clone(),
        binds,
        inputs: a
            .input
            .iter()
            .map(|i| {
                flag_as_value("--input", i)?;
                spec::parse_input(i)
            })
            .collect::<Result<_, _>>()?,
        share_net: a.share_net,
        host_uid: a.host_uid,
        host_gid: a.host_gid,
        timeout: (a.timeout.as_deref())
            .map(|t| spec::parse_duration(t).map_err(for_flag("--timeout")))
            .transpose()?,
        max_output: (a.max_output.as_deref())
            .map(|s| spec::parse_size(s).map(|n| n as usize))
            .transpose()
            .map_err(for_flag("--max-output"))?,
        json: a.json,
        limits: limits_from_flags(a, limits)?,
        chdir: a.chdir.as_ref().map(PathBuf::from),
    })
}

/// Apply the limit flags over `base` (the defaults, or what a request asked).
fn limits_from_flags(a: &RunArgs, base: limits::Limits) -> Result<limits::Limits, UsageError> {
    let mut l = base;
    let size = |flag, v: &str| spec::parse_size(v).map_err(for_flag(flag));
    if let Some(m) = &a.memory {
        l.memory = size("--memory", m)?;
    }
    if let Some(p) = a.pids {
        l.pids = p;
    }
    if let Some(c) = &a.cpu_time {
        l.cpu_time = spec::parse_duration(c).map_err(for_flag("--cpu-time"))?;
    }
    if let Some(f) = &a.file_size {
        l.file_size = size("--file-size", f)?;
    }
    if let Some(n) = a.nofile {
        l.nofile = n;
    }
    if let Some(s) = &a.scratch_size {
        l.scratch_size = size("--scratch-size", s)?;
    }
    Ok(l)
}

/// A value's error, as the flag it was given to says it.
fn for_flag(flag: &'static str) -> impl Fn(UsageError) -> UsageError {
    move |e| UsageError(format!("{flag}: {}", e.0))
}

/// The most a JSON request or an audited command line may hold: what a caller means fits
/// (inputs larger than this go as host files, by `run --input NAME=PATH`), and
/// `--request /dev/zero` is an error, not all of the machine's memory.
const TEXT_MAX: u64 = 64 << 20;

/// The text of the file at `path`, or of stdin for `-`: UTF-8, at most [`TEXT_MAX`] bytes.
fn read_text(path: &Path) -> std::io::Result<String> {
    let from: Box<dyn Read> = match path.as_os_str() == "-" {
        true => Box::new(std::io::stdin()),
        false => Box::new(std::fs::File::open(path)?),
    };
    let mut text = String::new();
    from.take(TEXT_MAX + 1).read_to_string(&mut text)?;
    if text.len() as u64 > TEXT_MAX {
        return Err(std::io::Error::other(format!(
            "longer than {} MiB",
            TEXT_MAX >> 20
        )));
    }
    Ok(text)
}

/// How long a request's input may stay open once its object has closed. The request is the
/// whole input, so all that may follow is white space and the end; a caller that writes the
/// request and never closes its end (Node's `stdin.write` without `end()`, a Python `Popen`
/// whose stdin is left open) is told so after this, rather than waiting on it forever. The
/// time starts at the closing brace: a writer, however slow, is never cut off mid-request.
const REQUEST_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The text of a request from the file at `path`, or stdin for `-`: UTF-8, at most
/// [`TEXT_MAX`] bytes, read to its end, or to [`REQUEST_CLOSE_WAIT`] past its object's close.
fn read_request_text(path: &Path) -> std::io::Result<String> {
    use std::io::ErrorKind;
    use std::os::fd::AsFd;
    // Stdin is read through descriptor 0 itself, not a copy: a caller whose open-file limit
    // leaves none to spare (`ulimit -n 3`) has its request read, and its run's report says
    // what then failed.
    let opened = match path.as_os_str() == "-" {
        true => None,
        false => Some(std::fs::File::open(path).map_err(|e| named_io("open", e))?),
    };
    let from = opened.as_ref().map_or(sys::std_stream(0), |f| f.as_fd());
    let mut text = Vec::new();
    let mut chunk = vec![0; 64 << 10];
    let mut end = request::ObjectEnd::default();
    let mut closed_at: Option<std::time::Instant> = None;
    loop {
        if let Some(at) = closed_at {
            let left = REQUEST_CLOSE_WAIT.saturating_sub(at.elapsed());
            if !sys::wait_readable(from, Some(left)).map_err(std::io::Error::other)? {
                return Err(std::io::Error::other(format!(
                    "the request's object closed, but its input stayed open {} s after it: \
                     close it once the request is written (the request is all of it)",
                    REQUEST_CLOSE_WAIT.as_secs()
                )));
            }
        }
        let n = match nix::unistd::read(from, &mut chunk).map_err(std::io::Error::from) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // A descriptor the caller left non-blocking.
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                sys::wait_readable(from, None).map_err(std::io::Error::other)?;
                continue;
            }
            Err(e) => return Err(named_io("read", e)),
        };
        if (text.len() + n) as u64 > TEXT_MAX {
            return Err(std::io::Error::other(format!(
                "longer than {} MiB",
                TEXT_MAX >> 20
            )));
        }
        let got = &chunk[..n];
        text.extend_from_slice(got);
        match closed_at {
            None => {
                if let Some(at) = end.feed(got) {
                    closed_at = Some(std::time::Instant::now());
                    // Anything but white space after it: the parser says what is wrong.
                    if !got[at..].iter().all(u8::is_ascii_whitespace) {
                        break;
                    }
                }
            }
            Some(_) if !got.iter().all(u8::is_ascii_whitespace) => break,
            Some(_) => {}
        }
    }
    String::from_utf8(text).map_err(|e| {
        let bytes = e.as_bytes();
        let why = match bytes.starts_with(b"\xff\xfe") || bytes.starts_with(b"\xfe\xff") {
            // Windows PowerShell's `>` writes UTF-16.
            true => "not UTF-8: it starts with a UTF-16 byte order mark (write it as UTF-8)".into(),
            false => format!(
                "not UTF-8: byte {} (offset {}) starts no UTF-8 character",
                bytes
                    .get(e.utf8_error().valid_up_to())
                    .map_or("?".into(), |b| format!("{b:#04x}")),
                e.utf8_error().valid_up_to()
            ),
        };
        std::io::Error::new(ErrorKind::InvalidData, why)
    })
}

/// An I/O error of `call` on the request, said with the call: `read: Is a directory`.
fn named_io(call: &str, e: std::io::Error) -> std::io::Error {
    let text = match e.raw_os_error() {
        Some(n) => sys::errno_text(nix::errno::Errno::from_raw(n)).to_string(),
        None => e.to_string(),
    };
    std::io::Error::new(e.kind(), format!("{call}: {text}"))
}

fn read_request(path: &Path) -> Result<Draft, UsageError> {
    let text = read_request_text(path).map_err(|e| UsageError(format!("request {path:?}: {e}")))?;
    request::parse(&text)
}

/// --host-uid/--host-gid choose the host identity of a root caller's task. An unprivileged
/// caller's task is the caller itself (its user namespace can map no other id), so another id
/// asked for is refused rather than ignored: the task would run, and own what it writes
/// through a bind, as an id the caller did not name. Its own id is accepted.
fn check_host_ids(args: &RunArgs) -> Result<(), UsageError> {
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    if uid.is_root() {
        return Ok(());
    }
    let asked = [
        ("--host-uid", args.host_uid, uid.as_raw()),
        ("--host-gid", args.host_gid, gid.as_raw()),
    ];
    for (flag, asked, own) in asked {
        if let Some(n) = asked.filter(|&n| n != own) {
            return Err(UsageError(format!(
                "{flag} {n}: only a root caller chooses the task's host identity; this \
                 caller's task runs as its own ({own})"
            )));
        }
    }
    Ok(())
}

fn spec_from_args(args: &RunArgs) -> Result<spec::Spec, UsageError> {
    check_host_ids(args)?;
    let draft = match &args.request {
        Some(path) => read_request(path).and_then(|mut d| {
            // Flags beside a request add to it (environment, inputs, binds, the network) and
            // override its keys (timeout_ms, max_output, the limits). clap refuses the flags
            // that only say what a request says (the command, --json). --input is how a
            // request's caller hands in bytes JSON text cannot carry, or more than a request
            // holds (a framework review: the README said so, and --input was refused here).
            let f = draft_from_flags(args, d.limits)?;
            d.env.extend(f.env);
            d.inputs.extend(f.inputs);
            d.binds.extend(f.binds);
            d.share_net |= f.share_net;
            d.host_uid = f.host_uid;
            d.host_gid = f.host_gid;
            d.timeout = f.timeout.or(d.timeout);
            d.max_output = f.max_output.or(d.max_output);
            d.limits = f.limits;
            d.chdir = f.chdir.or(d.chdir);
            Ok(d)
        }),
        None => draft_from_flags(args, limits::Limits::default()),
    };
    draft.and_then(|d| {
        // A forwarded variable crosses as text: one whose value is not UTF-8 is refused, not
        // dropped (the task would find it unset with no word why).
        let not_text = |n: &&String| {
            !n.contains('=') && std::env::var_os(n.as_str()).is_some_and(|v| v.to_str().is_none())
        };
        if let Some(n) = d.env.iter().find(not_text) {
            return Err(UsageError(format!(
                "--env {n}: the caller's value is not UTF-8"
            )));
        }
        d.build(&|n| std::env::var(n).ok())
    })
}

/// --share-net: the host's abstract unix sockets (an X server's, a container shim's) belong to
/// its network namespace, so a Landlock scope keeps them out of reach where the kernel has one
/// (decided here, applied by the init at step 12). Returns the words that say which applied.
fn scope_abstract_sockets(spec: &mut spec::Spec) -> &'static str {
    spec.lockdown.scope_abstract_sockets = spec.lockdown.scope_abstract_sockets
        && sys::landlock_abi().is_some_and(|v| v >= sys::LANDLOCK_ABI_SCOPE);
    match spec.lockdown.scope_abstract_sockets {
        true => {
            "; Landlock keeps the host's abstract unix sockets out of its reach, but a name it \
             binds in their namespace is one host programs can connect to"
        }
        false => {
            ", the host's abstract unix sockets included (no Landlock ABI 6 here to scope \
             them: it needs Linux 6.12 with Landlock enabled and not refused to airlock)"
        }
    }
}

fn explain(args: RunArgs) -> i32 {
    match spec_from_args(&args) {
        Ok(mut spec) => {
            scope_abstract_sockets(&mut spec);
            let uid = nix::unistd::geteuid();
            out(
                &explain::explain(&spec, uid.as_raw(), nix::unistd::getegid().as_raw()),
                0,
            )
        }
        Err(e) => fail(false, &launch::Failure::Usage(e.0)),
    }
}

fn run_audit(kind: AuditKind) -> i32 {
    type AuditLine = fn(&[String]) -> Result<audit::Audit, String>;
    let (a, audit_line, is_airlock): (_, AuditLine, _) = match kind {
        AuditKind::Docker(a) => (a, audit::audit_docker, false),
        AuditKind::Bwrap(a) => (a, audit::audit_bwrap, false),
        AuditKind::Airlock(a) => (a, audit_airlock_line, true),
    };
    let argv = match (&a.file, a.args.is_empty()) {
        (Some(path), true) => match read_text(path) {
            // A JSON request, as `airlock run --request` reads it.
            Ok(text) if is_airlock && text.trim_start().starts_with('{') => {
                let request = request::parse(&text).map_err(|e| e.0);
                let audited = request.and_then(|d| {
                    refused_as_run(&d, false)?;
                    Ok(audit::audit_airlock(&d, &audit::Written::Request))
                });
                return print_audit(audited, a.json);
            }
            Ok(text) => audit::parse_command_line(&text).and_then(|argv| match argv.is_empty() {
                true => Err(format!("{}: holds no command line", path.display())),
                false => Ok(argv),
            }),
            Err(e) if e.raw_os_error().is_some() => {
                Err(sys::io_err(e, || format!("read({path:?})")).to_string())
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        },
        (None, false) => Ok(a.args.clone()),
        (Some(_), false) => Err("give the command line either after -- or with --file".into()),
        (None, true) => Err("no command line given (after -- or with --file FILE|-)".into()),
    };
    print_audit(argv.and_then(|argv| audit_line(&argv)), a.json)
}

/// Prints an audit, or why the input could not be read; returns the exit code.
fn print_audit(result: Result<audit::Audit, String>, json: bool) -> i32 {
    match result {
        Ok(report) => {
            let code = i32::from(!report.findings.is_empty());
            if json {
                out(&format!("{}\n", audit::to_json(&report)), code)
            } else {
                out(&audit::render_text(&report), code)
            }
        }
        Err(e) => {
            if json {
                return out(
                    &format!("{}\n", serde_json::json!({"error": e})),
                    exit::USAGE,
                );
            }
            crate::say!("airlock audit: {e}");
            exit::USAGE
        }
    }
}

/// Audits an `airlock run` (or `explain`) line, read by `run`'s own parser and checks, so that
/// what it refuses is refused here too: `run` or `explain` starts it, after `airlock` (or a
/// path to it) if that leads it.
/// Nothing is opened or run: the audit reads the line only.
fn audit_airlock_line(argv: &[String]) -> Result<audit::Audit, String> {
    #[derive(Parser)]
    #[command(name = "airlock run")]
    struct Line {
        #[command(flatten)]
        run: RunArgs,
    }
    // Whoever runs airlock, its task is no host root (see the README's identity section).
    let (mut rest, _) = audit::after_sudo(argv)?;
    if let [program, tail @ ..] = rest
        && (program == "airlock" || program.ends_with("/airlock"))
    {
        rest = tail;
    }
    let [_, options @ ..] = rest else {
        return Err(not_a_run_line());
    };
    if !matches!(rest[0].as_str(), "run" | "explain") {
        return Err(not_a_run_line());
    }
    let words = std::iter::once("airlock run".to_string()).chain(options.iter().cloned());
    let line = Line::try_parse_from(words).map_err(|e| clap_message(&e.to_string()))?;
    let draft = draft_from_flags(&line.run, limits::Limits::default()).map_err(|e| e.0)?;
    let request = line.run.request.map(|p| p.to_string_lossy().into_owned());
    refused_as_run(&draft, request.is_some())?;
    Ok(audit::audit_airlock(
        &draft,
        &audit::Written::CommandLine { request },
    ))
}

/// What `run` refuses of an audited line before anything runs (`Draft::build`: no command, a
/// destination or input given twice, a bad variable name, ...), as its message. A line with
/// `--request` takes its command and JSON mode from the unseen request.
fn refused_as_run(draft: &Draft, request_unseen: bool) -> Result<(), String> {
    let mut line = draft.clone();
    if request_unseen {
        line.argv = vec!["request".into()];
        line.json = true;
    }
    line.build(&|_| None).map(|_| ()).map_err(|e| e.0)
}

fn not_a_run_line() -> String {
    "not an airlock run line: expected [airlock] run [OPTIONS] -- COMMAND".to_string()
}

/// Values that would change the printed command line's meaning are refused: an image that
/// docker would read as an option, a scratch path that adds volume fields, root as the user.
fn check_docker_args(a: &DockerArgs) -> Result<(), String> {
    if a.image.is_empty() || a.image.starts_with('-') {
        return Err(format!("--image {:?} is not an image name", a.image));
    }
    let scratch = std::path::Path::new(&a.scratch);
    let plain = !scratch
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir));
    if !a.scratch.starts_with('/') || a.scratch.contains(':') || a.scratch.contains(',') || !plain {
        return Err(format!(
            "--scratch {:?} must be an absolute path without ':', ',' or '..'",
            a.scratch
        ));
    }
    // The only writable volume: never the host's system trees or homes, nor what holds them
    // (the sign-off review of stop 47: `--scratch /etc` printed a line that mounts the host's
    // /etc read-write; the audit's rules name sockets and credentials, not every system file).
    const HOST_TREES: &[&str] = &[
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/dev",
        "/proc", "/sys", "/run", "/var", "/root", "/home",
    ];
    const SYSTEM_ONLY: usize = 13; // HOST_TREES up to /run: no job's scratch is inside them.
    let holds = HOST_TREES
        .iter()
        .find(|t| std::path::Path::new(t).starts_with(scratch));
    let inside = HOST_TREES[..SYSTEM_ONLY]
        .iter()
        .find(|t| scratch.starts_with(t));
    if let Some(tree) = holds.or(inside) {
        // What holds a tree is named as itself (`/`, not the first tree it holds; a review).
        let what = match holds {
            Some(t) if std::path::Path::new(t) != scratch => {
                format!("{} (and {t} in it)", a.scratch)
            }
            Some(_) => tree.to_string(),
            None => format!("{tree} (a part of it)"),
        };
        return Err(format!(
            "--scratch {:?} would mount the host's {what} read-write: give the task a \
             directory of its own",
            a.scratch
        ));
    }
    let user = a.user.split(':').next().unwrap_or("");
    if user.is_empty() || user == "0" || user == "root" || a.user.starts_with('-') {
        return Err(format!(
            "--user {:?} would run the container as root",
            a.user
        ));
    }
    if a.pids == 0 {
        return Err("--pids 0 is no limit".into());
    }
    if spec::parse_size(&a.memory).map_or(true, |m| m == 0) {
        return Err(format!("--memory {:?} is not a size", a.memory));
    }
    Ok(())
}

fn docker_args(a: DockerArgs) -> i32 {
    if let Err(e) = check_docker_args(&a) {
        crate::say!("airlock docker-args: {e}");
        return exit::USAGE;
    }
    let argv = audit::docker_args(&audit::DockerOpts {
        image: a.image,
        memory: a.memory,
        pids: a.pids,
        scratch: a.scratch,
        user: a.user,
        command: a.command,
    });
    // Never a line its own audit refuses, but for the writable scratch it is for (`--scratch
    // /` mounted the Docker socket and every home's credentials: stop 47's fuzzing).
    let refused = match audit::audit_docker(&argv) {
        Ok(a) => a.findings.into_iter().find(|f| f.rule != "host-mount-rw"),
        Err(e) => Some(audit::Finding {
            rule: "unparsable",
            message: e,
            arg: String::new(),
        }),
    };
    if let Some(f) = refused {
        crate::say!(
            "airlock docker-args: the line would fail its own audit ({}: {}): give --scratch a \
             directory of the task's own",
            f.rule,
            f.message
        );
        return exit::USAGE;
    }
    if a.json {
        out(&format!("{}\n", serde_json::Value::from(argv)), 0)
    } else {
        out(&format!("{}\n", audit::shell_quote(&argv)), 0)
    }
}

/// `airlock seccomp-bpf`: the policy's program for bwrap's --seccomp as bytes (airlock run's,
/// without the rules that need its 1-byte core limit: `policy::CORE_LIMIT_CALLS`), never to a
/// terminal.
fn seccomp_bpf() -> i32 {
    if nix::unistd::isatty(std::io::stdout()).unwrap_or(false) {
        crate::say!(
            "airlock seccomp-bpf: stdout is a terminal; the program is binary: redirect it \
             (airlock seccomp-bpf > policy.bpf) or hand it to bwrap (--seccomp 9 9< <(airlock \
             seccomp-bpf))"
        );
        return exit::USAGE;
    }
    let bytes = seccomp::program_bytes(seccomp::BWRAP_PROGRAM);
    let mut o = std::io::stdout().lock();
    output_written(o.write_all(&bytes).and_then(|_| o.flush()), 0)
}

fn install_bwrap(dir: &std::path::Path, force: bool) -> i32 {
    let result = (|| -> Result<std::path::PathBuf, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let exe = exe
            .canonicalize()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        let dest = dir.join("bwrap");
        if dest.symlink_metadata().is_ok() {
            if !force {
                return Err(format!(
                    "{} exists (use --force to replace it)",
                    dest.display()
                ));
            }
            std::fs::remove_file(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        if std::fs::hard_link(&exe, &dest).is_err() {
            std::fs::copy(&exe, &dest).map_err(|e| format!("copy to {}: {e}", dest.display()))?;
            std::fs::set_permissions(&dest, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .map_err(|e| format!("chmod {}: {e}", dest.display()))?;
        }
        Ok(dest)
    })();
    match result {
        Ok(dest) => out(&format!("{}\n", dest.display()), 0),
        Err(e) => {
            crate::say!("airlock install-bwrap: {e}");
            exit::USAGE
        }
    }
}

fn run(args: RunArgs) -> i32 {
    let json_mode = args.json || args.request.is_some();
    // Closed, stdout became /dev/null at airlock's start (sys::process_start): the report
    // would be lost without a word, so the task does not run.
    if json_mode && sys::closed_at_start(1) {
        crate::say!("airlock: stdout is closed: the JSON report would have nowhere to go");
        return exit::USAGE;
    }
    if json_mode && sys::path_only_at_start(1) {
        crate::say!(
            "airlock: stdout is an O_PATH descriptor, which cannot be written: the JSON report \
             would have nowhere to go"
        );
        return exit::USAGE;
    }
    let mut spec = match spec_from_args(&args) {
        Ok(s) => s,
        Err(e) => return fail(json_mode, &launch::Failure::Usage(e.0)),
    };
    // What the caller asked for that opens the boundary: said on stderr before the run, and
    // in the JSON report, whose readers may never see stderr.
    let mut warnings: Vec<String> = spec
        .binds()
        .filter(|(_, _, a)| *a != spec::Access::ReadOnly)
        .map(|(src, dest, _)| {
            // A source whose way goes through a link (one an earlier task may have planted in
            // a writable bind) is said with where it leads: that is what the task writes.
            let leads = std::fs::canonicalize(src)
                .ok()
                .filter(|real| std::path::absolute(src).ok().as_deref() != Some(real.as_path()))
                .map(|real| format!(" (through a link: {})", real.display()))
                .unwrap_or_default();
            format!(
                "{}{leads} is writable inside at {}: a channel out of the sandbox",
                src.display(),
                dest.display()
            )
        })
        .collect();
    warnings.extend(
        spec.binds()
            .flat_map(|(src, dest, _)| audit::bind_warnings(src, dest)),
    );
    warnings.extend(spec.inputs.iter().filter_map(|input| match &input.source {
        spec::InputSource::HostFile(path) => {
            let (euid, egid) = (nix::unistd::geteuid(), nix::unistd::getegid());
            audit::input_warning(
                path,
                &input.name,
                spec.task_host_ids(euid.as_raw(), egid.as_raw()),
            )
        }
        spec::InputSource::Bytes(_) => None,
    }));
    // A credential handed in on purpose still crosses: the task reads it, and its output and
    // result files go back to the caller (the value is never said).
    warnings.extend(
        spec.env
            .iter()
            .filter_map(|(name, value)| audit::credential_warning(name, value)),
    );
    if !spec.ns.net {
        let scope = scope_abstract_sockets(&mut spec);
        warnings.push(format!(
            "--share-net: the task shares the host's network{scope}"
        ));
    }
    // One line each, on stderr as in the report: a path may hold a newline.
    let warnings: Vec<String> = (warnings.iter())
        .map(|w| audit::one_line(w).into_owned())
        .collect();
    for w in &warnings {
        crate::say!("airlock: warning: {w}");
    }
    match launch::run(&spec) {
        Ok(outcome) if json_mode => {
            // Said on stderr as it happened; the report says it too (a framework review: a
            // cancel that ended in SIGKILL looked like any other signal 9).
            let warnings: Vec<String> = warnings
                .into_iter()
                .chain(outcome.killed_after_grace.clone())
                .collect();
            emit_report(outcome.exit_code(), |w| {
                report::write_json(&outcome, &warnings, w)
            })
        }
        Ok(outcome) => {
            // A streamed run's exit status alone would not say that a limit was the cause
            // (137 for the memory limit's kill, 124 for the timeout): one line says which,
            // where stderr has room (it may be the full pipe of a caller that reads nothing).
            if let Some(hit) = outcome.limit_hit {
                relay::say_if_room(&format!("airlock: {}\n", limit_notice(hit, spec.timeout)));
            }
            // Output that could not be written whole, as a JSON report that could not be
            // (emit_report): the caller must not take the status for delivered output.
            if outcome.output_lost {
                relay::say_if_room(&format!(
                    "airlock: the task's output was not delivered whole (the run's exit status \
                     was {})\n",
                    outcome.exit_code()
                ));
                return exit::USAGE;
            }
            outcome.exit_code()
        }
        Err(f) => fail(json_mode, &f),
    }
}

/// What a streamed run says on stderr when its task ran into a limit (the JSON report's
/// `limit_hit`), naming the flag that sets it.
fn limit_notice(hit: &str, timeout: Option<std::time::Duration>) -> String {
    match hit {
        "timeout" => format!(
            "the timeout ({}) fired; the whole sandbox was killed",
            timeout.map_or("--timeout".into(), |t| format!("{t:?}"))
        ),
        "memory" => {
            "the task ran into its memory limit (--memory): the kernel killed a process".into()
        }
        "pids" => "the task ran into its process limit (--pids): a fork was refused".into(),
        "cpu" => "the task ran into its CPU time limit (--cpu-time)".into(),
        "file_size" => "the task ran into its file size limit (--file-size)".into(),
        "scratch_full" => "scratch or /dev/shm is full (--scratch-size)".into(),
        other => format!("the task ran into a limit: {other}"),
    }
}

/// Write the JSON report to stdout and return the run's exit status. A report that cannot be
/// written whole (a full disk, the caller's file size limit, an I/O error) is said on stderr,
/// with the status, and the run exits 2: the caller must not take the status for a delivered
/// report. A reader that closed its end (`| head`) wanted no more, and the status stays.
fn emit_report(code: i32, report: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> i32 {
    let written_whole = ReportOut::new().and_then(|out| {
        // Written as it is made (report::write_json), in pieces of what one write takes: a
        // pipe's PIPE_BUF (a buffer the allocator has at hand: 64 KiB was an mmap and munmap
        // on every JSON run), 64 KiB into a regular file.
        let mut w = std::io::BufWriter::with_capacity(out.chunk.min(64 * 1024), out);
        let result = report(&mut w).and_then(|()| w.flush());
        // Taken apart, not dropped: a drop would write what a failed write left buffered,
        // and a report said not to be written whole (exit 2) would then arrive whole (fault
        // injection: a failed write or poll was followed by the whole report, exit 2).
        let _ = w.into_parts();
        result
    });
    written(written_whole, code, |e| {
        format!(
            "the JSON report could not be written to stdout: {e} (the run's exit status was {code})"
        )
    })
}

/// stdout for a JSON report, written as the caller makes room, in PIPE_BUF chunks each waited
/// for with poll (a pipe or socket that polls writable takes one without blocking):
/// - the caller's stdout may be non-blocking (O_NONBLOCK belongs to the open file, which the
///   caller shares, an asyncio writer's for one): EAGAIN waits for room, the report is not
///   cut short;
/// - a SIGINT, SIGTERM, SIGHUP or other signal whose default action ends a process
///   (`launch::ALSO_ENDING`) that comes while stdout has no room ends airlock, as it ends
///   any writer blocked there: the run left them blocked (launch.rs reads them from a
///   signalfd), and a caller that never reads its pipe could otherwise end airlock by SIGKILL
///   alone (a framework's `terminate()` after its own timeout would wait forever). While there
///   is room the report is written, whatever came.
///
/// A caller whose open-file limit leaves no descriptor for the signalfd (`ulimit -n 3`: a
/// failed run's report is written there too) still gets the report: airlock then waits for
/// room with those signals unblocked (ppoll), so that one that comes meanwhile ends it by its
/// default action, as the signalfd's reader would.
struct ReportOut {
    stdout: std::io::Stdout,
    /// The ending signals, read here; None where no descriptor was left for it.
    sigfd: Option<nix::sys::signalfd::SignalFd>,
    /// The mask to wait in when there is no signalfd: the ending signals unblocked.
    waiting: nix::sys::signal::SigSet,
    /// The most one write() takes.
    chunk: usize,
}

impl ReportOut {
    fn new() -> std::io::Result<ReportOut> {
        use nix::errno::Errno;
        use nix::sys::signal::{SigSet, Signal};
        use nix::sys::signalfd::{SfdFlags, SignalFd};
        use std::os::fd::AsFd;
        std::io::stdout().flush()?;
        let stdout = std::io::stdout();
        let mask = SigSet::thread_get_mask().unwrap_or_else(|_| SigSet::empty());
        let mut ending = SigSet::empty();
        for &s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP]
            .iter()
            .chain(&launch::ALSO_ENDING)
        {
            if mask.contains(s) {
                ending.add(s);
            }
        }
        let sigfd =
            match SignalFd::with_flags(&ending, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
                Ok(sigfd) => Some(sigfd),
                Err(Errno::EMFILE | Errno::ENFILE | Errno::ENOMEM) => None,
                Err(e) => return Err(e.into()),
            };
        let mut waiting = mask;
        for s in ending.iter() {
            waiting.remove(s);
        }
        // A regular file never makes a writer wait: one write.
        let chunk = match nix::sys::stat::fstat(stdout.as_fd()) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => usize::MAX,
            _ => libc::PIPE_BUF,
        };
        Ok(ReportOut {
            stdout,
            sigfd,
            waiting,
            chunk,
        })
    }
}

impl Write for ReportOut {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        use nix::errno::Errno;
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll, ppoll};
        use nix::sys::signal::Signal;
        use std::os::fd::AsFd;
        let fd = self.stdout.as_fd();
        loop {
            let room = match &self.sigfd {
                Some(sigfd) => {
                    let mut fds = [
                        PollFd::new(fd, PollFlags::POLLOUT),
                        PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
                    ];
                    match poll(&mut fds, PollTimeout::NONE) {
                        Err(Errno::EINTR) => continue,
                        Err(e) => return Err(e.into()),
                        Ok(_) => {}
                    }
                    fds[0].revents().is_some_and(|r| !r.is_empty())
                }
                None => {
                    // Room now (or an error the write reports) is taken before any signal.
                    let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
                    match poll(&mut fds, PollTimeout::ZERO) {
                        Ok(n) if n > 0 => true,
                        Err(e) if e != Errno::EINTR => return Err(e.into()),
                        _ => match ppoll(&mut fds, None, Some(self.waiting)) {
                            Err(Errno::EINTR) | Ok(_) => continue,
                            Err(e) => return Err(e.into()),
                        },
                    }
                }
            };
            // Room (or an error the write reports): write before looking at signals.
            if room {
                match nix::unistd::write(fd, &bytes[..bytes.len().min(self.chunk)]) {
                    Ok(n) => return Ok(n),
                    Err(Errno::EINTR | Errno::EAGAIN) => {}
                    Err(e) => return Err(e.into()),
                }
                continue;
            }
            if let Some(sigfd) = &self.sigfd
                && let Ok(Some(info)) = sigfd.read_signal()
                && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
            {
                sys::die_by(sig);
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Write `text` whole to stdout; a closed stdout (`| head`) comes back as the error (EPIPE),
/// never a panic, for the caller to weigh.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes()).and_then(|_| o.flush())
}

/// Print a command's output on stdout and return its exit status `code`. Output that stdout
/// cannot take whole (a full disk, the caller's file size limit) is not lost silently: airlock
/// says so on stderr and exits 2, naming the status it would have had. A reader that went
/// away (EPIPE, `| head`) is not an error, as for the JSON report.
pub fn out(text: &str, code: i32) -> i32 {
    output_written(write_stdout(text), code)
}

/// `code`, or exit 2 where stdout could not take a command's output whole (out()).
fn output_written(result: std::io::Result<()>, code: i32) -> i32 {
    written(result, code, |e| {
        format!(
            "stdout could not take the output whole: {e} (the exit status would have been {code})"
        )
    })
}

/// `code` when `result` wrote all (or the reader went away: EPIPE); else exit 2, after saying
/// on stderr what `said` makes of the error.
fn written(result: std::io::Result<()>, code: i32, said: impl FnOnce(&str) -> String) -> i32 {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            // Named as every other failure is (`ENOSPC: No space left on device`), not as
            // std words it (`... (os error 28)`).
            let text = match e.raw_os_error() {
                Some(_) => sys::errno_of(&e).to_string(),
                None => e.to_string(),
            };
            crate::say!("airlock: {}", said(&text));
            exit::USAGE
        }
        _ => code,
    }
}

fn fail(json_mode: bool, f: &launch::Failure) -> i32 {
    let (value, code) = report::failure_json(f);
    if json_mode {
        return emit_report(code, |w| writeln!(w, "{value}"));
    } else {
        // One line, as the warnings are: a path in the message may hold a newline.
        let msg = audit::one_line(value["error"].as_str().unwrap_or(""));
        match f {
            launch::Failure::Setup(_) => crate::say!("airlock: setup failed: {msg}"),
            _ => crate::say!("airlock: {msg}"),
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &[&str]) -> Vec<String> {
        std::iter::once("airlock")
            .chain(line.iter().copied())
            .map(String::from)
            .collect()
    }

    /// The whole parser's reading of a `run` command line, or None if it refuses it.
    fn whole(args: &[String]) -> Option<String> {
        match Cli::try_parse_from(args).ok()?.command {
            Command::Run(a) => Some(format!("{a:?}")),
            _ => None,
        }
    }

    /// `run` lines as launchers send them: every flag, both spellings of a value.
    const LAUNCH_LINES: &[&[&str]] = &[
        &["run", "--", "/bin/true"],
        &[
            "run",
            "--json",
            "--timeout",
            "5s",
            "--",
            "sh",
            "-c",
            "echo --json",
        ],
        &[
            "run",
            "--env",
            "A",
            "--env=B=c=d",
            "--input",
            "x.py=/etc/hostname",
            "--",
            "ls",
        ],
        &[
            "run",
            "--ro-bind",
            "/opt:/o",
            "--bind=/var/tmp",
            "--share-net",
            "--",
            "ls",
        ],
        &[
            "run",
            "--memory",
            "1G",
            "--pids",
            "10",
            "--cpu-time",
            "2s",
            "--",
            "ls",
        ],
        &[
            "run",
            "--file-size",
            "1M",
            "--nofile",
            "64",
            "--scratch-size",
            "8M",
            "--",
            "x",
        ],
        &[
            "run",
            "--host-uid",
            "1000",
            "--host-gid",
            "1000",
            "--max-output",
            "10",
            "--",
            "x",
        ],
        &["run", "--chdir", "/etc", "--", "x"],
        &["run", "--", "--help"],
    ];

    /// The hand reading of a `run` line is clap's whenever there is one: on 20,000 random
    /// lines mixing every flag, in both spellings, with values of every kind clap treats
    /// apart (empty, dashed, signed, too large, repeated), and on the lines launchers send,
    /// which it must read itself rather than leave to clap.
    #[test]
    fn run_read_by_hand_is_what_clap_reads() {
        for line in LAUNCH_LINES {
            let args = argv(line);
            let quick = quick_run(&args).map(|a| format!("{a:?}"));
            assert!(quick.is_some(), "{line:?}: left to clap");
            assert_eq!(
                quick,
                parse_run(&args).map(|a| format!("{a:?}")),
                "{line:?}"
            );
        }
        let flags = [
            "env",
            "input",
            "ro-bind",
            "bind",
            "share-net",
            "host-uid",
            "host-gid",
            "timeout",
            "max-output",
            "json",
            "memory",
            "pids",
            "cpu-time",
            "file-size",
            "nofile",
            "scratch-size",
            "chdir",
            "request",
            "bogus",
            "help",
            "-json",
            "Json",
        ];
        let values = [
            "A",
            "A=b",
            "x.py=/etc/hostname",
            "/opt:/o",
            "5s",
            "10",
            "0",
            "007",
            "+5",
            "-5",
            "4294967295",
            "4294967296",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "",
            "-",
            "--",
            "-x",
            "1G",
            "a b",
            "=",
            "é",
        ];
        let mut pick = crate::picker(0x2545_f491_4f6c_dd1d);
        let (mut by_hand, mut by_clap) = (0, 0);
        for _ in 0..20_000 {
            let mut line = argv(&["run"]);
            for _ in 0..pick(6) {
                let (f, v) = (flags[pick(flags.len())], values[pick(values.len())]);
                let switch = f == "json" || f == "share-net";
                match (pick(4), switch) {
                    (0, _) => line.push(format!("--{f}={v}")),
                    (1, _) | (_, true) => line.push(format!("--{f}")),
                    _ => line.extend([format!("--{f}"), v.to_string()]),
                }
            }
            if pick(5) > 0 {
                line.push("--".into());
                for _ in 0..pick(3) {
                    line.push(values[pick(values.len())].into());
                }
            }
            let clap = parse_run(&line).map(|a| format!("{a:?}"));
            by_clap += clap.is_some() as u32;
            if let Some(quick) = quick_run(&line) {
                by_hand += 1;
                assert_eq!(Some(format!("{quick:?}")), clap, "{line:?}");
            }
        }
        // Both readings are exercised, and the hand one takes most of what clap accepts.
        assert!(
            by_hand > 2_000 && by_clap > by_hand,
            "{by_hand} by hand, {by_clap} by clap"
        );
        assert!(quick_run(&argv(&["explain", "--", "ls"])).is_none());
    }

    /// The run-only parser reads every command line `run` accepts exactly as the whole parser
    /// does, and hands every one it refuses (help, unknown flags, bad values, conflicts) to
    /// the whole parser, which refuses it too.
    #[test]
    fn run_parsed_alone_reads_what_the_whole_parser_reads() {
        let extra: &[&[&str]] = &[&["run", "--request", "-"], &["run"]];
        for line in LAUNCH_LINES.iter().chain(extra) {
            let args = argv(line);
            let alone = parse_run(&args).map(|a| format!("{a:?}"));
            assert!(alone.is_some(), "{line:?}: refused by the run-only parser");
            assert_eq!(alone, whole(&args), "{line:?}");
        }
        let refused: &[&[&str]] = &[
            &["run", "--help"],
            &["run", "-h"],
            &["run", "--version"],
            &["run", "--bogus", "--", "ls"],
            &["run", "--pids", "many", "--", "ls"],
            &["run", "--timeout"],
            &["run", "--request", "r.json", "--", "ls"],
            &["run", "ls"],
        ];
        for line in refused {
            let args = argv(line);
            assert!(
                parse_run(&args).is_none(),
                "{line:?}: accepted by the run-only parser"
            );
            assert!(
                whole(&args).is_none(),
                "{line:?}: accepted by the whole parser"
            );
        }
        // Not `run`: always the whole parser.
        assert!(parse_run(&argv(&["explain", "--", "ls"])).is_none());
        assert!(parse_run(&argv(&["--version"])).is_none());
    }

    /// A run that asks for JSON, even in a spelling clap refuses (`--json=true`: the flag
    /// takes no value), gets its refusal as the JSON failure report; after `--` the words are
    /// the command's, and other subcommands print text.
    #[test]
    fn a_json_run_is_known_by_its_flags_before_the_command() {
        for line in [
            &["run", "--json", "--", "ls"][..],
            &["run", "--json=true", "--", "ls"],
            &["run", "--json=", "--", "ls"],
            &["run", "--request", "r.json"],
            &["run", "--request=r.json"],
        ] {
            assert!(json_run(&argv(line)), "{line:?}");
        }
        for line in [
            &["run", "--", "ls", "--json"][..],
            &["run", "--jsonx", "--", "ls"],
            &["explain", "--json", "--", "ls"],
        ] {
            assert!(!json_run(&argv(line)), "{line:?}");
        }
    }
}
