//! Audits of sandbox command lines written for other tools (`docker run`, `bwrap`).
//!
//! Everything here is a pure function over argument vectors: nothing is spawned and no
//! syscall is made. The audit answers one question: "how can the host leak into this
//! sandbox?". Each answer is a [`Finding`] with a stable rule id. Missing hardening that does
//! not by itself let the host in is reported separately as advice and never makes a line
//! unclean.
//!
//! The option tables below are the parsers' only knowledge of each tool. They are data on
//! purpose: a reviewer checks them against `docker run --help` and `man bwrap` line by line.
//! An option the table does not know is never silently skipped in `bwrap` (it is an error);
//! `docker` follows its own parser's rule, stated where it is applied.

use std::path::PathBuf;

use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Findings
// ---------------------------------------------------------------------------------------------

/// One way the host leaks into the sandbox (or, in [`Audit::advice`], one missing hardening).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Stable short id, e.g. `env-forwarded`.
    pub rule: &'static str,
    /// Human text, e.g. `mounts /home/dev/project read-write`.
    pub message: String,
    /// The offending argument(s) as written, or `""` when the finding is about something missing.
    pub arg: String,
}

/// The result of auditing one command line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Audit {
    /// Ways the host leaks into the sandbox. Any finding makes the line unclean.
    pub findings: Vec<Finding>,
    /// Missing hardening that does not itself leak the host. Never makes the line unclean.
    pub advice: Vec<Finding>,
}

impl Audit {
    fn finding(&mut self, rule: &'static str, message: impl Into<String>, arg: impl Into<String>) {
        self.findings.push(Finding {
            rule,
            message: message.into(),
            arg: arg.into(),
        });
    }

    fn advise(&mut self, rule: &'static str, message: impl Into<String>, arg: impl Into<String>) {
        self.advice.push(Finding {
            rule,
            message: message.into(),
            arg: arg.into(),
        });
    }
}

/// `{"findings": [{"rule", "message", "arg"}...], "advice": [...], "clean": bool}`.
/// `clean` is true when there are no findings; advice does not count.
pub fn to_json(a: &Audit) -> Value {
    let list = |items: &[Finding]| -> Vec<Value> {
        items
            .iter()
            .map(|f| json!({"rule": f.rule, "message": f.message, "arg": f.arg}))
            .collect()
    };
    json!({
        "findings": list(&a.findings),
        "advice": list(&a.advice),
        "clean": a.findings.is_empty(),
    })
}

/// One line per finding (`finding: <message> (<arg>)`), or a single `clean:` line when there
/// is none, then one `advice:` line per piece of advice. The `(<arg>)` part is left out when
/// the finding is about something missing.
pub fn render_text(a: &Audit) -> String {
    let mut out = String::new();
    for f in &a.findings {
        out.push_str(&render_line("finding", f));
    }
    if a.findings.is_empty() {
        out.push_str("clean: no way for the host to leak in was found\n");
    }
    for f in &a.advice {
        out.push_str(&render_line("advice", f));
    }
    out
}

fn render_line(kind: &str, f: &Finding) -> String {
    let (message, arg) = (one_line(&f.message), one_line(&f.arg));
    if arg.is_empty() {
        format!("{kind}: {message}\n")
    } else {
        format!("{kind}: {message} ({arg})\n")
    }
}

/// `text` with each control character written as its escape (`\n`, `\u{1b}`), for output read
/// line by line: a path, value or argument holding a newline (a legal file name) must not
/// start a line of its own, where it would read as a finding, a mount or a variable that is
/// not there (`-v "$(printf '/x\nadvice: ok')":/y`). So are Unicode's line and paragraph
/// separators, which editors and viewers break lines at, and the bidirectional controls,
/// which show a line's text in another order than it has (U+202E; the security-team review).
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
            )
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    match text.contains(escaped) {
        false => text.into(),
        true => text
            .chars()
            .map(|c| match escaped(c) {
                true => c.escape_default().to_string(),
                false => c.to_string(),
            })
            .collect::<String>()
            .into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a command line
// ---------------------------------------------------------------------------------------------

/// Splits a command line into arguments.
///
/// A text whose first non-blank character is `[` is read as a JSON array of strings. Anything
/// else is read as one POSIX shell command made of plain words, single quotes, double quotes
/// and backslashes. Constructs whose meaning depends on running a shell are refused rather
/// than guessed at: command substitution, pipes, lists, redirections, subshells, a second
/// command on a new line, and the expansions that can change how many words there are
/// (unquoted `$VAR`, globs, braces). A quoted `"$NAME"` is one word and is kept literally:
/// the audit sees `$HOME`, not its value.
pub fn parse_command_line(text: &str) -> Result<Vec<String>, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('[') {
        return parse_json_argv(trimmed);
    }
    ShellLexer::new(text).run()
}

fn parse_json_argv(text: &str) -> Result<Vec<String>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("invalid JSON argument array: {e}"))?;
    let items = value
        .as_array()
        .ok_or_else(|| "a JSON command line must be an array of strings".to_string())?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let arg = item
                .as_str()
                .ok_or_else(|| format!("JSON argument {i} is not a string: {item}"))?;
            // An argument vector holds C strings: a NUL ends one.
            match arg.contains('\0') {
                true => Err(format!(
                    "JSON argument {i} holds a NUL byte, which no argument can"
                )),
                false => Ok(arg.to_string()),
            }
        })
        .collect()
}

fn refuse(construct: &str) -> String {
    format!(
        "refusing shell construct {construct}: only plain words, quotes and backslashes are \
         understood (give the arguments as a JSON array instead)"
    )
}

struct ShellLexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    words: Vec<String>,
    word: String,
    /// A word has begun (it may still be empty, as in `''`).
    in_word: bool,
    /// An unescaped newline came after at least one word: the command is over.
    command_ended: bool,
}

impl<'a> ShellLexer<'a> {
    fn new(text: &'a str) -> Self {
        ShellLexer {
            chars: text.chars().peekable(),
            words: Vec::new(),
            word: String::new(),
            in_word: false,
            command_ended: false,
        }
    }

    fn run(mut self) -> Result<Vec<String>, String> {
        while let Some(c) = self.chars.next() {
            match c {
                // CR counts as a blank so that a file saved with CRLF reads the same.
                ' ' | '\t' | '\r' => self.end_word(),
                '\n' => {
                    self.end_word();
                    if !self.words.is_empty() {
                        self.command_ended = true;
                    }
                }
                '#' if !self.in_word => self.skip_comment(),
                '\\' => self.backslash()?,
                '\'' => self.single_quoted()?,
                '"' => self.double_quoted()?,
                '$' => self.unquoted_dollar()?,
                '`' => return Err(refuse("'`' (command substitution)")),
                '*' | '?' | '[' => return Err(refuse(&format!("'{c}' (pathname expansion)"))),
                '{' => return Err(refuse("'{' (brace expansion)")),
                '|' => return Err(refuse("'|' (pipe)")),
                ';' => return Err(refuse("';' (command list)")),
                '&' => return Err(refuse("'&' (background or '&&' list)")),
                '<' => return Err(refuse("'<' (redirection)")),
                '>' => return Err(refuse("'>' (redirection)")),
                '(' | ')' => return Err(refuse("'(' or ')' (subshell)")),
                _ => {
                    self.begin_word()?;
                    self.word.push(c);
                }
            }
        }
        self.end_word();
        Ok(self.words)
    }

    /// An unquoted `$` is literal only when nothing the shell would expand follows it.
    /// An unquoted variable is refused because the shell splits its value into any number of
    /// words (none, if it is empty), so its position among the options cannot be known;
    /// inside double quotes it is one word and is kept literally.
    fn unquoted_dollar(&mut self) -> Result<(), String> {
        match self.chars.peek() {
            Some('(') => Err(refuse("'$(' (command substitution)")),
            Some('\'' | '"') => Err(refuse("$'...' or $\"...\" quoting")),
            Some(&c) if c.is_ascii_alphanumeric() || "_{@*#?$!-".contains(c) => Err(refuse(
                &format!("'${c}' (unquoted parameter expansion; write \"${c}...\" instead)"),
            )),
            _ => {
                self.begin_word()?;
                self.word.push('$');
                Ok(())
            }
        }
    }

    fn begin_word(&mut self) -> Result<(), String> {
        if !self.in_word {
            if self.command_ended {
                // The shell would run what follows as a second command; auditing it as more
                // arguments of the first would be wrong either way.
                return Err(
                    "a newline ends the command and more words follow: join the lines with \
                     a backslash, or give one command"
                        .to_string(),
                );
            }
            self.in_word = true;
        }
        Ok(())
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.words.push(std::mem::take(&mut self.word));
            self.in_word = false;
        }
    }

    fn skip_comment(&mut self) {
        while let Some(&c) = self.chars.peek() {
            if c == '\n' {
                break;
            }
            self.chars.next();
        }
    }

    /// Outside quotes: backslash-newline joins lines; a backslash before anything else makes
    /// that character literal.
    fn backslash(&mut self) -> Result<(), String> {
        match self.chars.next() {
            Some('\n') => Ok(()),
            Some(c) => {
                self.begin_word()?;
                self.word.push(c);
                Ok(())
            }
            None => Err("a backslash ends the input with nothing to escape".to_string()),
        }
    }

    fn single_quoted(&mut self) -> Result<(), String> {
        self.begin_word()?;
        loop {
            match self.chars.next() {
                Some('\'') => return Ok(()),
                Some(c) => self.word.push(c),
                None => return Err("unterminated single quote".to_string()),
            }
        }
    }

    /// Inside double quotes a backslash escapes only `"`, `\`, `$`, `` ` `` and newline; before
    /// any other character it stays. Command substitution is live inside double quotes, so it
    /// is refused here too.
    fn double_quoted(&mut self) -> Result<(), String> {
        self.begin_word()?;
        loop {
            match self.chars.next() {
                Some('"') => return Ok(()),
                Some('\\') => match self.chars.peek() {
                    Some(&c) if matches!(c, '"' | '\\' | '$' | '`') => {
                        self.chars.next();
                        self.word.push(c);
                    }
                    Some('\n') => {
                        self.chars.next();
                    }
                    _ => self.word.push('\\'),
                },
                Some('`') => return Err(refuse("'`' (command substitution) inside double quotes")),
                Some('$') if self.chars.peek() == Some(&'(') => {
                    return Err(refuse("'$(' (command substitution) inside double quotes"));
                }
                Some(c) => self.word.push(c),
                None => return Err("unterminated double quote".to_string()),
            }
        }
    }
}

/// Joins arguments into one line for POSIX `sh`; [`parse_command_line`] reads it back to the
/// same arguments. Words made only of `[A-Za-z0-9_@%+=:,./-]` stay bare; anything else is
/// single-quoted, with `'` written as `'\''`.
pub fn shell_quote(args: &[String]) -> String {
    args.iter()
        .map(|a| quote_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote_word(word: &str) -> String {
    let is_safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if word.is_empty() {
        "''".to_string()
    } else if word.chars().all(is_safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// Lexical normalisation: collapses `//`, drops `.`, resolves `..` and trailing slashes.
/// Symlinks cannot be known from an argument vector; this only stops `/tmp/x/../../home`
/// from hiding what it names.
fn normalize_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_string()
    } else {
        joined
    }
}

/// True when the normalised absolute `path` is `tree` or lies below it.
fn is_at_or_below(path: &str, tree: &str) -> bool {
    tree == "/"
        || path
            .strip_prefix(tree)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The first `n` words of a line for an error message, each cut at its first `=`: the rest
/// of the line, and a variable's value (`TOKEN=... bwrap`), may be a credential.
fn first_words(argv: &[String], n: usize) -> String {
    let words: Vec<String> = argv
        .iter()
        .take(n)
        .map(|word| match word.split_once('=') {
            Some((name, _)) => format!("{name}=..."),
            None => word.clone(),
        })
        .collect();
    shell_quote(&words)
}

/// True when `arg` names the program `name`, bare or as a path (`/usr/bin/docker`).
fn is_program(arg: &str, name: &str) -> bool {
    arg == name || arg.ends_with(&format!("/{name}"))
}

/// sudo's options (1.9) that take a value, short and long; the others it runs a command with
/// are flags. Those that make it run none (`-e`, `-l`, `-v`, ...) are not here.
const SUDO_VALUED: &[&str] = &[
    // Not `-h`: alone it is --help, and a host only with a value; refused as unknown.
    "-C",
    "-D",
    "-g",
    "-p",
    "-R",
    "-r",
    "-t",
    "-T",
    "-U",
    "-u",
    "--close-from",
    "--chdir",
    "--group",
    "--host",
    "--prompt",
    "--chroot",
    "--role",
    "--type",
    "--command-timeout",
    "--other-user",
    "--user",
];
const SUDO_FLAGS: &[&str] = &[
    "-A",
    "-B",
    "-b",
    "-E",
    "-H",
    "-i",
    "-K",
    "-k",
    "-N",
    "-n",
    "-P",
    "-S",
    "-s",
    "--askpass",
    "--background",
    "--bell",
    "--preserve-env",
    "--set-home",
    "--login",
    "--reset-timestamp",
    "--remove-timestamp",
    "--no-update",
    "--non-interactive",
    "--preserve-groups",
    "--stdin",
    "--shell",
];

/// The options a program reads before the command it runs or the subcommand it is given
/// (`sudo -E -u dev CMD`, `docker --context ci run`): getopt's and pflag's common ground.
struct CommandOptions {
    program: &'static str,
    /// Options that take a value: written in the same word (`--user=dev`, `-udev`) or in the
    /// next one. Short options are `-X`, long ones `--name`.
    valued: &'static [&'static str],
    flags: &'static [&'static str],
}

impl CommandOptions {
    /// The words after the options (and after a `--` that ends them). `seen` is given each
    /// option and its value: a valued option's always; a flag's where written `--flag=v`
    /// (`seen` refuses that where it means nothing). An option not listed is refused: what
    /// follows it could not be told apart.
    fn skip<'a>(
        &self,
        mut rest: &'a [String],
        mut seen: impl FnMut(&str, Option<&str>) -> Result<(), String>,
    ) -> Result<&'a [String], String> {
        let program = self.program;
        let unknown =
            |option: &str| format!("{program} option {option} is not one this audit reads");
        while let Some((arg, tail)) = rest.split_first() {
            if !arg.starts_with('-') || arg == "-" {
                break;
            }
            rest = tail;
            if arg == "--" {
                break;
            }
            // A valued option's value: `inline` where written in the same word (`--user=`
            // is an empty one, as getopt reads it), else the next word.
            let mut value = |option: &str, inline: Option<&'a str>| -> Result<&'a str, String> {
                if let Some(inline) = inline {
                    return Ok(inline);
                }
                let (next, tail) = rest
                    .split_first()
                    .ok_or_else(|| format!("{program} option {option} needs a value"))?;
                rest = tail;
                Ok(next.as_str())
            };
            if arg.starts_with("--") {
                let (name, inline) = match arg.split_once('=') {
                    Some((name, inline)) => (name, Some(inline)),
                    None => (arg.as_str(), None),
                };
                if self.valued.contains(&name) {
                    seen(name, Some(value(name, inline)?))?;
                } else if self.flags.contains(&name) {
                    seen(name, inline)?;
                } else {
                    return Err(unknown(name));
                }
                continue;
            }
            // A cluster of letters, `-En`, the last of which may take a value (`-Eu dev`).
            for (i, letter) in arg.char_indices().skip(1) {
                let option = format!("-{letter}");
                if self.valued.contains(&option.as_str()) {
                    let inline = &arg[i + letter.len_utf8()..];
                    seen(
                        &option,
                        Some(value(&option, (!inline.is_empty()).then_some(inline))?),
                    )?;
                    break;
                }
                if !self.flags.contains(&option.as_str()) {
                    return Err(unknown(&option));
                }
                seen(&option, None)?;
            }
        }
        Ok(rest)
    }
}

/// A line led by `sudo` and its options (`sudo -E docker run ...`): the command sudo runs,
/// and whether it runs it as root (no `-u`/`--user`, or root's). `None` where no sudo leads.
/// An option this does not know, a variable set on sudo's line (`sudo TOKEN=... docker`,
/// not printed) or an option that runs no command is refused: what follows could not be
/// told apart.
pub fn after_sudo(argv: &[String]) -> Result<(&[String], Option<bool>), String> {
    let Some((first, rest)) = argv.split_first().filter(|(f, _)| is_program(f, "sudo")) else {
        return Ok((argv, None));
    };
    let mut user: Option<String> = None;
    let mut group = false;
    let options = CommandOptions {
        program: "sudo",
        valued: SUDO_VALUED,
        flags: SUDO_FLAGS,
    };
    let rest = options.skip(rest, |name, value| {
        match (name, value) {
            ("-u" | "--user", Some(v)) => user = Some(v.to_string()),
            ("-g" | "--group", _) => group = true,
            // A flag written with a value: only `--preserve-env=LIST` is one.
            (name, Some(_)) if SUDO_FLAGS.contains(&name) && name != "--preserve-env" => {
                return Err(format!("sudo option {name} is not one this audit reads"));
            }
            _ => {}
        }
        Ok(())
    })?;
    match rest.first() {
        Some(next) if next.contains('=') => Err(format!(
            "not a command line this audit reads: sudo sets a variable ({}=...) for it",
            next.split('=').next().unwrap_or("")
        )),
        Some(_) => {
            // sudo's target: root unless -u names another; with -g alone, the caller itself
            // (sudo(8)), who this audit does not know. `#N` is a uid, `#00` root's too.
            let is_root = |u: &str| {
                u == "root"
                    || u.strip_prefix('#')
                        .is_some_and(|n| n.parse::<u64>() == Ok(0))
            };
            let root = match user {
                Some(u) => is_root(&u),
                None => !group,
            };
            Ok((rest, Some(root)))
        }
        None => Err(format!("{first} runs no command")),
    }
}

/// Go's `strconv.ParseBool`, which docker uses for `--flag=value`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// docker run
// ---------------------------------------------------------------------------------------------

/// `docker run` / `docker create` options that take a value (long names, without `--`).
#[rustfmt::skip]
const DOCKER_VALUED_OPTIONS: &[&str] = &[
    // Environment, identity, working directory, entry point.
    "env", "env-file", "user", "group-add", "workdir", "entrypoint", "name", "hostname",
    "domainname", "label", "label-file", "annotation", "platform", "pull", "runtime",
    "isolation", "cidfile",
    // Filesystem.
    "volume", "volume-driver", "volumes-from", "mount", "tmpfs", "storage-opt", "shm-size",
    // Network.
    "network", "network-alias", "publish", "expose", "ip", "ip6", "mac-address", "link",
    "link-local-ip", "add-host", "dns", "dns-option", "dns-search",
    // Namespaces.
    "pid", "ipc", "uts", "userns", "cgroupns", "cgroup-parent",
    // Privileges and devices.
    "cap-add", "cap-drop", "security-opt", "sysctl", "device", "device-cgroup-rule", "gpus",
    // Resources.
    "memory", "memory-reservation", "memory-swap", "memory-swappiness", "kernel-memory",
    "pids-limit", "ulimit", "oom-score-adj", "cpus", "cpu-shares", "cpu-period", "cpu-quota",
    "cpu-rt-period", "cpu-rt-runtime", "cpuset-cpus", "cpuset-mems", "cpu-count",
    "cpu-percent", "blkio-weight", "blkio-weight-device", "device-read-bps",
    "device-read-iops", "device-write-bps", "device-write-iops", "io-maxbandwidth",
    "io-maxiops",
    // Lifecycle, health, logging, terminal.
    "restart", "stop-signal", "stop-timeout", "health-cmd", "health-interval",
    "health-retries", "health-start-interval", "health-start-period", "health-timeout",
    "log-driver", "log-opt", "attach", "detach-keys",
];

/// `docker run` / `docker create` boolean flags. Docker also accepts `--flag=true|false`.
#[rustfmt::skip]
const DOCKER_FLAGS: &[&str] = &[
    "detach", "interactive", "tty", "rm", "init", "read-only", "privileged",
    "use-api-socket", "publish-all", "sig-proxy", "oom-kill-disable", "no-healthcheck",
    "disable-content-trust", "quiet", "help",
];

/// Other spellings of a long option, mapped to the name used in the tables.
const DOCKER_ALIASES: &[(&str, &str)] = &[
    ("net", "network"),
    ("net-alias", "network-alias"),
    ("dns-opt", "dns-option"),
];

/// One-letter options and the long option each stands for.
const DOCKER_SHORT_OPTIONS: &[(char, &str)] = &[
    ('a', "attach"),
    ('c', "cpu-shares"),
    ('d', "detach"),
    ('e', "env"),
    ('h', "hostname"),
    ('i', "interactive"),
    ('l', "label"),
    ('m', "memory"),
    ('p', "publish"),
    ('P', "publish-all"),
    ('q', "quiet"),
    ('t', "tty"),
    ('u', "user"),
    ('v', "volume"),
    ('w', "workdir"),
];

/// Where the Docker daemon's socket lives on the host (also under `/var/run`, see
/// `sockets_in`), and a rootless daemon's in its user's runtime directory (its
/// `DOCKER_HOST`). A mount of it, or of a directory above it, hands the container the daemon.
const DOCKER_SOCKETS: &[&str] = &["/run/docker.sock", "/run/user/*/docker.sock"];

/// Host sockets besides Docker's whose connect(2) reaches a service that acts outside the
/// sandbox, and what each is. In a pattern a trailing `*` ends a name (`ssh-*`) and a lone
/// `*` is any one name (a uid); a directory stands for the sockets in it. Not exhaustive: a
/// reviewer adds the daemons their hosts run.
const HOST_SOCKETS: &[(&str, &str)] = &[
    // Every system service. A root caller's task is root to the bus (the bus trusts the
    // peer's uid), and systemd starts what root asks (StartTransientUnit).
    ("/run/dbus/system_bus_socket", "the D-Bus system bus"),
    ("/run/systemd/private", "systemd's private socket"),
    // The user's systemd, reached through the session bus, starts what the user asks.
    ("/run/user/*/bus", "a D-Bus session bus"),
    ("/run/user/*/systemd/private", "a user's systemd"),
    // Container and machine managers start privileged containers and machines.
    // containerd's socket and its shims', and dockerd's own containerd (Docker in Docker).
    ("/run/containerd", "containerd"),
    ("/run/docker/containerd", "containerd"),
    ("/run/podman/podman.sock", "Podman"),
    ("/run/user/*/podman/podman.sock", "Podman"),
    ("/run/libvirt/libvirt-sock", "libvirt"),
    ("/run/snapd.socket", "snapd"),
    ("/run/crio/crio.sock", "CRI-O"),
    ("/run/k3s/containerd/containerd.sock", "containerd"),
    ("/run/buildkit/buildkitd.sock", "BuildKit"),
    ("/var/snap/lxd/common/lxd/unix.socket", "LXD"),
    ("/var/lib/lxd/unix.socket", "LXD"),
    ("/var/lib/incus/unix.socket", "Incus"),
    ("/run/incus/unix.socket", "Incus"),
    ("/var/lib/kubelet/pod-resources", "the kubelet"),
    // Services that act as the peer's uid, which a root caller's task has: the journal takes
    // log lines as any unit's, Tailscale's daemon reconfigures the host's network.
    ("/run/systemd/journal", "the systemd journal"),
    ("/run/tailscale/tailscaled.sock", "tailscaled"),
    // An X server takes keystrokes for the caller's terminals (a local user is often let in
    // by uid, `xhost +SI:localuser:NAME`); an agent signs with the caller's keys.
    ("/tmp/.X11-unix", "an X server"),
    ("/tmp/ssh-*", "an ssh-agent"),
    ("/run/user/*/ssh-agent.socket", "an ssh-agent"),
    ("/run/user/*/gcr", "an ssh-agent"),
    ("/run/user/*/gnupg", "gpg-agent"),
    ("/run/user/*/keyring", "GNOME Keyring's agents"),
    // The desktop's display and media servers: a Wayland compositor shows the client's
    // windows over the user's and hands it the clipboard; PulseAudio and PipeWire the
    // microphone, and PipeWire cameras and screen casts too.
    ("/run/user/*/wayland-*", "a Wayland compositor"),
    ("/run/user/*/pulse", "PulseAudio"),
    ("/run/user/*/pipewire-*", "PipeWire"),
    // A source spelt as the variable that names an agent's socket (`--ro-bind
    // "$SSH_AUTH_SOCK" /agent`, `-v $SSH_AUTH_SOCK:/agent`) is that socket.
    ("$SSH_AUTH_SOCK", "an ssh-agent"),
];

/// Credentials kept in a home directory, by their place in it, and what each is: a mount of
/// one, of a directory holding one, or of a home or a tree above the homes (`/home`, `/`)
/// hands the task what it needs to act as the user elsewhere (push to their repositories,
/// reach their cloud accounts, log in to their servers); read-only is enough, and its
/// output carries them back. Not exhaustive: a reviewer adds what their users log in with.
const HOME_CREDENTIALS: &[(&str, &str)] = &[
    (".ssh", "ssh keys"),
    (".gnupg", "gpg keys"),
    (".aws", "AWS credentials"),
    (".azure", "Azure credentials"),
    (".config/gcloud", "Google Cloud credentials"),
    (".kube", "Kubernetes credentials"),
    (".docker/config.json", "Docker registry logins"),
    (".netrc", "netrc passwords"),
    (".git-credentials", "git credentials"),
    (".config/gh", "GitHub CLI tokens"),
    (".npmrc", "npm tokens"),
    (".pypirc", "PyPI tokens"),
    (".cargo/credentials.toml", "crates.io tokens"),
    (".cargo/credentials", "crates.io tokens"),
    (".terraform.d/credentials.tfrc.json", "Terraform tokens"),
    (".vault-token", "a Vault token"),
    (".password-store", "a pass password store"),
    (".local/share/keyrings", "GNOME Keyring's keyrings"),
    (".pgpass", "PostgreSQL passwords"),
    (".my.cnf", "MySQL passwords"),
    // The security-team review's finds: registry, build-tool and cloud tools' logins.
    (".config/containers/auth.json", "Podman registry logins"),
    (".m2/settings.xml", "Maven repository passwords"),
    (".gradle/gradle.properties", "Gradle credentials"),
    (".s3cfg", "S3 credentials"),
    (".boto", "cloud storage credentials"),
    (".oci", "Oracle Cloud credentials"),
    (".config/rclone/rclone.conf", "rclone remotes' credentials"),
    (".config/doctl", "DigitalOcean tokens"),
    (".minikube", "minikube cluster keys"),
    // Agents' and package tools' logins (the security-team review's).
    (".claude", "Claude Code's login"),
    (".claude.json", "Claude Code's login"),
    (".codex/auth.json", "Codex's login"),
    (".cache/huggingface/token", "Hugging Face tokens"),
    (".huggingface", "Hugging Face tokens"),
    (".config/hub", "GitHub tokens"),
    (".composer/auth.json", "Composer repository passwords"),
    (".config/helm", "Helm repository passwords"),
];

/// Files in a credentials directory of HOME_CREDENTIALS that hold nothing secret: a mount of
/// one of them alone is none of the credentials' (`~/.ssh/known_hosts` for a task that runs
/// ssh or git, a public key). `*` ends a name as in the socket tables. Not `authorized_keys`
/// or `config`: these hold no key either, but written (a writable bind, which these checks
/// do not tell from a read-only one) the first lets the task log in as the user and the
/// second runs its `ProxyCommand`, so they stay with the keys.
const PUBLIC_BESIDE_CREDENTIALS: &[(&str, &[&str])] =
    &[(".ssh", &["known_hosts", "known_hosts.old", "*.pub"])];

/// Whether `path` names one file of PUBLIC_BESIDE_CREDENTIALS, by its last two names. A path
/// written with a trailing `/` names a directory (`~/.ssh/keys.pub/`), which may hold keys.
fn is_public_beside_credentials(path: &str) -> bool {
    if path.ends_with('/') {
        return false;
    }
    let mut names = path.rsplit('/');
    let (Some(file), Some(dir)) = (names.next(), names.next()) else {
        return false;
    };
    PUBLIC_BESIDE_CREDENTIALS.iter().any(|(d, files)| {
        *d == dir
            && files.iter().any(|f| match f.strip_prefix('*') {
                Some(suffix) => file.ends_with(suffix) && file.len() > suffix.len(),
                None => *f == file,
            })
    })
}

/// Where homes are: every user's under `/home`, and root's.
const HOMES: &[&str] = &["/home/*", "/root"];

/// HOME_CREDENTIALS in every home, as patterns of the socket tables' form.
fn home_credentials() -> impl Iterator<Item = (String, &'static str)> {
    HOMES.iter().flat_map(|home| {
        HOME_CREDENTIALS
            .iter()
            .map(move |(place, what)| (format!("{home}/{place}"), *what))
    })
}

/// The credentials of HOME_CREDENTIALS a mount source holds or is, each with where it lies
/// inside the tree (see `socket_in`). A source in the caller's home (`~/.aws`, `$HOME`) is
/// taken to be in any user's; one this audit cannot know, as `held_tree` takes it.
fn credentials_in(source: &str) -> Held {
    if is_public_beside_credentials(source) {
        return Vec::new();
    }
    let widest = without_trailing_variables(source).unwrap_or_else(|| source.to_string());
    let tree = match host_path(&widest) {
        HostPath::InHome(below) => format!("/home/*{below}"),
        _ => match held_tree(source) {
            Some(tree) => tree,
            None => return Vec::new(),
        },
    };
    grouped(
        home_credentials().filter_map(|(pattern, what)| Some((what, socket_in(&tree, &pattern)?))),
    )
}

/// Variables whose value names a socket, and what it is: a line that sets one in the sandbox
/// (`--setenv SSH_AUTH_SOCK /agent`) says where the task finds it, so a mount that lands
/// there, or of a host tree holding that path, hands it over (see `sockets_named_by`).
const SOCKET_VARIABLES: &[(&str, &str)] = &[("SSH_AUTH_SOCK", "an ssh-agent")];

/// One option of a parsed `docker run` line.
#[derive(Debug)]
struct DockerOption {
    /// Long name without `--`, aliases resolved (`net` becomes `network`).
    name: String,
    /// The value, for valued options; for flags, the `=value` if one was written.
    value: Option<String>,
    /// The option as written, with its value when that was a separate argument.
    raw: String,
}

impl DockerOption {
    fn value(&self) -> &str {
        self.value.as_deref().unwrap_or("")
    }

    /// For a flag: set, unless written `--flag=false` (values were checked while parsing).
    fn is_on(&self) -> bool {
        self.value
            .as_deref()
            .is_none_or(|v| parse_bool(v) == Some(true))
    }
}

/// The options of a `docker run` line. The image and the container's command are not kept:
/// nothing after the image is ever audited.
#[derive(Debug)]
struct DockerRun {
    options: Vec<DockerOption>,
}

impl DockerRun {
    fn all<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s DockerOption> + 's {
        self.options.iter().filter(move |o| o.name == name)
    }

    /// Docker keeps the last value of a single-valued option.
    fn last(&self, name: &str) -> Option<&DockerOption> {
        self.options.iter().rev().find(|o| o.name == name)
    }
}

fn docker_long_name(name: &str) -> &str {
    DOCKER_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, long)| long)
}

/// `Some(true)` for a valued option, `Some(false)` for a flag, `None` when unknown.
fn docker_takes_value(long_name: &str) -> Option<bool> {
    if DOCKER_VALUED_OPTIONS.contains(&long_name) {
        Some(true)
    } else if DOCKER_FLAGS.contains(&long_name) {
        Some(false)
    } else {
        None
    }
}

/// docker's own options (docker 24-27), before its subcommand: they choose the daemon and how
/// the client reaches it (`docker --context ci run`, `-H ssh://build`), never what a container
/// gets. The findings are about the host of whichever daemon that is.
const DOCKER_GLOBAL: CommandOptions = CommandOptions {
    program: "docker",
    valued: &[
        "-c",
        "--context",
        "--config",
        "-H",
        "--host",
        "-l",
        "--log-level",
        "--tlscacert",
        "--tlscert",
        "--tlskey",
    ],
    flags: &["-D", "--debug", "--tls", "--tlsverify"],
};

/// Strips `docker` (optional) and the subcommand; the rest are `run` options, image, command.
fn docker_run_args(argv: &[String]) -> Result<&[String], String> {
    // docker's daemon runs every container alike, whoever its client is.
    let (argv, _) = after_sudo(argv)?;
    let rest = match argv.split_first() {
        Some((first, rest)) if is_program(first, "docker") => {
            DOCKER_GLOBAL.skip(rest, |name, value| match (name, value) {
                (flag, Some(v))
                    if DOCKER_GLOBAL.flags.contains(&flag) && parse_bool(v).is_none() =>
                {
                    Err(format!("docker option {flag}: {v:?} is not true or false"))
                }
                _ => Ok(()),
            })?
        }
        _ => argv,
    };
    let is_run = |s: &String| s == "run" || s == "create";
    match rest {
        [sub, tail @ ..] if is_run(sub) => Ok(tail),
        [group, sub, tail @ ..] if group == "container" && is_run(sub) => Ok(tail),
        _ => Err(format!(
            "not a docker run/create command line: it starts with {}",
            first_words(argv, 2)
        )),
    }
}

/// Parses `docker run` options the way docker's own parser (pflag, not interspersed) does:
/// options stop at `--` or at the first argument not starting with `-`, which is the image;
/// everything after the image is the container's command and is never read as options.
/// An unknown long option is taken as valued if written `--opt=value` and as a flag
/// otherwise; an unknown letter in a short cluster is taken as a flag.
fn parse_docker_run(args: &[String]) -> Result<DockerRun, String> {
    let mut options = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (long, None),
            };
            let name = docker_long_name(name).to_string();
            match (docker_takes_value(&name), inline) {
                (Some(true), None) => {
                    let value = args
                        .get(i)
                        .ok_or_else(|| format!("option {arg} needs a value"))?;
                    i += 1;
                    options.push(DockerOption {
                        name,
                        value: Some(value.clone()),
                        raw: format!("{arg} {value}"),
                    });
                }
                (Some(false), Some(value)) if parse_bool(&value).is_none() => {
                    return Err(format!("option {arg}: {value:?} is not true or false"));
                }
                (_, inline) => options.push(DockerOption {
                    name,
                    value: inline,
                    raw: arg.clone(),
                }),
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            i = parse_docker_short_cluster(args, i, &mut options)?;
        } else {
            i -= 1;
            break;
        }
    }
    if i >= args.len() {
        return Err("docker run line has no image".to_string());
    }
    Ok(DockerRun { options })
}

/// Parses `args[next - 1]`, a cluster of one-letter options such as `-it`, `-eFOO`, `-ite FOO`.
/// A valued letter takes the rest of the cluster (minus a leading `=`) or, when the cluster
/// ends there, the next argument. Returns the index of the next unread argument.
fn parse_docker_short_cluster(
    args: &[String],
    mut next: usize,
    options: &mut Vec<DockerOption>,
) -> Result<usize, String> {
    let arg = &args[next - 1];
    let cluster = &arg[1..];
    for (pos, letter) in cluster.char_indices() {
        let rest = &cluster[pos + letter.len_utf8()..];
        let name = DOCKER_SHORT_OPTIONS
            .iter()
            .find(|(short, _)| *short == letter)
            .map_or_else(|| letter.to_string(), |(_, long)| long.to_string());
        if docker_takes_value(&name) == Some(true) {
            let (value, raw) = if rest.is_empty() {
                let value = args
                    .get(next)
                    .ok_or_else(|| format!("option -{letter} (in {arg}) needs a value"))?;
                next += 1;
                (value.clone(), format!("{arg} {value}"))
            } else {
                let value = rest.strip_prefix('=').unwrap_or(rest);
                (value.to_string(), arg.clone())
            };
            options.push(DockerOption {
                name,
                value: Some(value),
                raw,
            });
            return Ok(next);
        }
        if let Some(value) = rest.strip_prefix('=') {
            if parse_bool(value).is_none() {
                return Err(format!("option {arg}: {value:?} is not true or false"));
            }
            options.push(DockerOption {
                name,
                value: Some(value.to_string()),
                raw: arg.clone(),
            });
            return Ok(next);
        }
        options.push(DockerOption {
            name,
            value: None,
            raw: arg.clone(),
        });
    }
    Ok(next)
}

/// A host path mounted into the container.
struct HostMount {
    source: String,
    read_only: bool,
    /// A read-only mount whose submounts stay writable (docker's `bind-recursive=writable`).
    writable_below: bool,
}

/// A `-v` source names a host path when it is absolute, relative (`.`), under a home (`~`),
/// a shell variable or command the shell would expand to a path (`$PWD`, `` `pwd` ``), or
/// contains a slash. Anything
/// else is the name of a docker volume.
fn is_host_path(source: &str) -> bool {
    source.starts_with(['/', '.', '~', '$', '`']) || source.contains('/')
}

/// `-v SRC:DST[:OPTS]`. `None` for an anonymous volume (`-v /data`) or a named volume.
fn volume_host_mount(spec: &str) -> Result<Option<HostMount>, String> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (source, opts) = match parts.as_slice() {
        [_] => return Ok(None),
        [source, _] => (*source, ""),
        [source, _, opts] => (*source, *opts),
        _ => return Err(format!("invalid volume specification {spec:?}")),
    };
    if !is_host_path(source) {
        return Ok(None);
    }
    let read_only = opts.split(',').any(|o| o == "ro" || o == "readonly");
    Ok(Some(HostMount {
        source: source.to_string(),
        read_only,
        writable_below: false,
    }))
}

/// The fields of a `--mount` value, read as docker reads it: one record of Go's
/// `encoding/csv` (fields split at commas; a field that starts with `"` is quoted, a comma in
/// it is kept and `""` is one `"`; the record ends at a newline).
fn csv_fields(spec: &str) -> Result<Vec<String>, String> {
    // The spec is not printed: it may hold a volume driver's password (the security-team
    // review found this message printing one).
    let bad = || "--mount value: a misplaced '\"'".to_string();
    let mut fields = Vec::new();
    let mut chars = spec.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err(bad()),
                }
            }
            if !matches!(chars.peek(), None | Some(',' | '\n' | '\r')) {
                return Err(bad());
            }
        } else {
            while let Some(&c) = chars.peek() {
                match c {
                    ',' | '\n' | '\r' => break,
                    '"' => return Err(bad()),
                    c => field.push(c),
                }
                chars.next();
            }
        }
        fields.push(field);
        if chars.next() != Some(',') {
            return Ok(fields);
        }
    }
}

/// `--mount type=bind,source=SRC,target=DST[,readonly]`. A `type=volume` mount is a host
/// mount too when the local driver is told to bind a host directory
/// (`volume-opt=o=bind,volume-opt=device=/path`). docker lowercases the type (`type=BIND`).
fn mount_host_mount(spec: &str) -> Result<Option<HostMount>, String> {
    let mut kind = "volume".to_string();
    let mut source = None;
    let mut read_only = false;
    let mut writable_below = false;
    let mut driver_binds = false;
    let mut driver_device = None;
    for field in &csv_fields(spec)? {
        let (key, value) = match field.split_once('=') {
            Some((key, value)) => (key.to_ascii_lowercase(), Some(value)),
            None => (field.to_ascii_lowercase(), None),
        };
        match (key.as_str(), value) {
            ("type", Some(v)) => kind = v.to_ascii_lowercase(),
            ("source" | "src", Some(v)) => source = Some(v.to_string()),
            ("bind-recursive", Some(v)) => writable_below = v.eq_ignore_ascii_case("writable"),
            ("readonly" | "ro", None) => read_only = true,
            ("readonly" | "ro", Some(v)) => {
                read_only = parse_bool(v)
                    // The field alone: the rest of the spec may hold a volume driver's
                    // password (`volume-opt=o=...,password=...`), never printed.
                    .ok_or_else(|| format!("--mount: {field:?} is not true or false"))?;
            }
            ("volume-opt", Some(opt)) => match opt.split_once('=') {
                Some(("o", o)) => {
                    driver_binds = o.split(',').any(|x| x == "bind" || x == "rbind");
                }
                Some(("device", device)) => driver_device = Some(device.to_string()),
                _ => {}
            },
            _ => {}
        }
    }
    let host_source = match kind.as_str() {
        "bind" => source,
        "volume" if driver_binds => driver_device,
        _ => None,
    };
    Ok(host_source.map(|source| HostMount {
        source,
        read_only,
        writable_below: read_only && writable_below,
    }))
}

/// The scratch directory is the one writable channel an airlock sandbox is meant to have.
/// By convention its final path component starts with `airlock-scratch`
/// (e.g. `/tmp/airlock-scratch`, `/tmp/airlock-scratch-4711`), and a read-write bind of such a
/// directory is not reported. The path is normalised first, so `airlock-scratch/..` does not
/// qualify.
fn is_airlock_scratch(source: &str) -> bool {
    let normalized = normalize_path(source);
    normalized
        .rsplit('/')
        .next()
        .is_some_and(|last| last.starts_with("airlock-scratch"))
}

/// Host trees whose writable mount lets the task change the host's system (configuration,
/// programs, boot files, state and sockets, kernel interfaces, other processes' shared memory
/// and message queues), not a project. (The devices in `/dev` are left to `dev-bind-dev`:
/// binding `/dev/null` writable is common and harmless.)
#[rustfmt::skip]
const SYSTEM_PATHS: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/boot",
    "/var", "/run", "/proc", "/sys", "/dev/shm", "/dev/mqueue",
];

/// A mount source whose writing changes more than a project: a system tree or anything in
/// one, a directory holding one, or a dot entry of a home (`~/.ssh`, `~/.bashrc`,
/// `~/.config`: keys, and what the host runs at the next login). A source this audit cannot
/// know is taken to be `/`.
fn is_sensitive_host_path(source: &str) -> bool {
    let path = match host_path(source) {
        HostPath::Known(path) => path,
        HostPath::InHome(below) => return below.starts_with("/."),
        HostPath::Unknown(_) => return true,
    };
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    let home_dot_entry = match parts.as_slice() {
        ["home", _, entry, ..] | ["root", entry, ..] => entry.starts_with('.'),
        _ => false,
    };
    home_dot_entry
        || SYSTEM_PATHS
            .iter()
            .any(|tree| is_at_or_below(&path, tree) || is_at_or_below(tree, &path))
}

/// The host tree a mount source names, to find what lies in it: an absolute path this audit
/// cannot follow (`/proc/PID/root`, a process's `/`) is taken to be `/`. `None` for a path in
/// a home or a relative one.
fn host_tree(source: &str) -> Option<String> {
    match host_path(source) {
        HostPath::Known(path) => Some(path),
        HostPath::InHome(_) => None,
        HostPath::Unknown(_) => source.starts_with('/').then(|| "/".to_string()),
    }
}

/// Where a socket pattern (see HOST_SOCKETS) lies inside the host `tree`, relative to it and
/// cut before its first `*`: `""` when the tree is the socket, or lies in a directory of
/// sockets; `None` when the tree does not hold it.
fn socket_in(tree: &str, socket: &str) -> Option<String> {
    let (tree_parts, socket_parts) = (path_parts(tree), path_parts(socket));
    if !parts_match(&tree_parts, &socket_parts) {
        return None;
    }
    let below = socket_parts.get(tree_parts.len()..).unwrap_or(&[]);
    let named: Vec<&str> = below
        .iter()
        .take_while(|part| !part.contains('*'))
        .copied()
        .collect();
    Some(named.join("/"))
}

/// The names along a path.
fn path_parts(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}

/// True when the names two paths share match, a pattern's names ending in `*` (`ssh-*`, or
/// a lone `*`: any name) matching by prefix.
fn parts_match(names: &[&str], patterns: &[&str]) -> bool {
    names
        .iter()
        .zip(patterns)
        .all(|(name, pattern)| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        })
}

/// Host devices whose `--dev-bind` (a mount that keeps device access) hands the task the host
/// below its own permissions, and what each is; a directory stands for the devices in it,
/// and a name pattern ends in `*`.
const HOST_DEVICES: &[(&str, &str)] = &[
    // Block devices: every file on the host's disks, read and written below the filesystem.
    ("/dev/sd*", "a disk"),
    ("/dev/vd*", "a disk"),
    ("/dev/xvd*", "a disk"),
    ("/dev/hd*", "a disk"),
    ("/dev/nvme*", "a disk"),
    ("/dev/mmcblk*", "a disk"),
    ("/dev/loop*", "a disk"),
    ("/dev/nbd*", "a disk"),
    ("/dev/dm-*", "a disk"),
    ("/dev/md*", "a disk"),
    ("/dev/zram*", "a disk"),
    ("/dev/mapper", "a disk"),
    ("/dev/disk", "a disk"),
    // Network, replicated, RAM, persistent-memory, userspace and flash block devices, and
    // the links udev and distributions keep to disks (`/dev/root`, `/dev/cdrom`). An LVM
    // volume group's links (`/dev/ubuntu-vg/ubuntu-lv`) are named by the host: a source
    // that is a block device on this host is found as one (`host_device`).
    ("/dev/rbd*", "a disk"),
    ("/dev/drbd*", "a disk"),
    ("/dev/ram*", "a disk"),
    ("/dev/pmem*", "a disk"),
    ("/dev/ublk*", "a disk"),
    ("/dev/mtd*", "a disk"),
    ("/dev/ubi*", "a disk"),
    ("/dev/root", "a disk"),
    ("/dev/cdrom", "a disk"),
    ("/dev/dvd", "a disk"),
    // udev's links to every block device by number (`/dev/block/8:0` is `/dev/sda`): a bind
    // resolves its source, so the link binds the device itself.
    ("/dev/block", "a disk"),
    // Block SG nodes send SCSI commands to the disks; optical drives.
    ("/dev/bsg", "a disk"),
    ("/dev/sr*", "a disk"),
    // The machine's memory and I/O ports.
    ("/dev/mem", "memory"),
    ("/dev/kmem", "memory"),
    ("/dev/port", "I/O ports"),
    // Model-specific registers of each CPU (`/dev/cpu/0/msr`).
    ("/dev/cpu", "CPU registers"),
    // udev's links to every character device by number (`/dev/char/1:1` is `/dev/mem`).
    ("/dev/char", "a device by its number"),
    // Keyboards and mice: the host user's keystrokes, and input injected as theirs.
    ("/dev/input", "input devices"),
    ("/dev/uinput", "input devices"),
    ("/dev/hidraw*", "input devices"),
    // What the virtual consoles show, and the host's pseudo-terminals: what other sessions
    // show and read, written and read from the sandbox.
    ("/dev/vcs*", "a console's screen"),
    ("/dev/pts", "the host's terminals"),
    // The virtual consoles and serial lines themselves, and the console: a task writes to
    // the screen someone logs in at (a fake login prompt) and reads the keys typed there.
    // (`/dev/tty` alone is the caller's own terminal, see `host_device`.)
    ("/dev/tty*", "a host terminal"),
    ("/dev/console", "a host terminal"),
    // SCSI generic nodes (`/dev/sg0`, not `/dev/sgx_enclave`) send raw commands to disks;
    // USB devices, raw.
    ("/dev/sg0*", "a disk"),
    ("/dev/sg1*", "a disk"),
    ("/dev/sg2*", "a disk"),
    ("/dev/sg3*", "a disk"),
    ("/dev/sg4*", "a disk"),
    ("/dev/sg5*", "a disk"),
    ("/dev/sg6*", "a disk"),
    ("/dev/sg7*", "a disk"),
    ("/dev/sg8*", "a disk"),
    ("/dev/sg9*", "a disk"),
    ("/dev/bus", "USB devices"),
    // The kernel's log (read where dmesg is restricted, and written as the kernel), a
    // watchdog that reboots the machine once opened and left, firmware's memory.
    ("/dev/kmsg", "the kernel's log"),
    ("/dev/watchdog*", "the machine's watchdog"),
    ("/dev/nvram", "firmware memory"),
    // The TPM unseals what the host sealed to its state (a disk's key); the BMC's IPMI
    // powers the machine off and adds its users; I2C and SMBus reach firmware chips and
    // sensors; Intel's ME runs below the kernel; the framebuffer holds the screen's
    // contents.
    ("/dev/tpm*", "the TPM"),
    ("/dev/ipmi*", "the BMC (IPMI)"),
    ("/dev/i2c-*", "an I2C bus"),
    ("/dev/mei*", "Intel's Management Engine"),
    ("/dev/fb*", "the screen's contents"),
];

/// What host device a `--dev-bind` source is, if HOST_DEVICES lists it or a directory of it,
/// or it is a block device on this host (through its links: an LVM volume's name). A source
/// this audit cannot know (`/proc/PID/root/dev/sda`, `/dev/fd/5`, a variable) may be any
/// device. `/dev/tty` is none: it opens the opener's own controlling terminal, the caller's,
/// which the task reaches through its standard streams anyway.
fn host_device(source: &str) -> Option<&'static str> {
    let path = match host_path(source) {
        HostPath::Known(path) => path,
        HostPath::Unknown(_) => return Some("any device: the audit cannot know which"),
        HostPath::InHome(_) => return None,
    };
    if path == "/dev/tty" {
        return None;
    }
    let names = path_parts(&path);
    HOST_DEVICES
        .iter()
        .find_map(|(device, what)| {
            let patterns = path_parts(device);
            (names.len() >= patterns.len() && parts_match(&names, &patterns)).then_some(*what)
        })
        .or_else(|| {
            use std::os::unix::fs::FileTypeExt;
            std::fs::metadata(&path)
                .is_ok_and(|m| m.file_type().is_block_device())
                .then_some("a disk")
        })
}

/// Where any of `sockets` lies inside the host tree a mount source names, relative to it
/// (`""`: the source is one); empty when it holds none. A socket is also looked for through
/// the HOST_LINKS that lead to it (see `host_spellings`).
fn sockets_in(source: &str, sockets: &[&str]) -> Vec<String> {
    let spelt = variable_spelling(source);
    let tree = held_tree(source);
    let mut found: Vec<String> = Vec::new();
    // A socket named by a variable is in no host path, and a host path in no variable.
    for socket in sockets {
        let tree = match socket.starts_with('$') {
            true => spelt.as_ref(),
            false => tree.as_ref(),
        };
        let Some(tree) = tree else {
            continue;
        };
        for path in host_spellings(socket, tree) {
            if let Some(inside) = socket_in(tree, &path)
                && !found.contains(&inside)
            {
                found.push(inside);
            }
        }
    }
    found
}

/// The host tree a mount source may show, to find what it holds (sockets, credentials, the
/// host's proc): `host_tree`'s, and where that cannot be known, the widest it may be. A
/// source that ends in variables is taken to be what is left when they are empty (`"/$DIR"`
/// is `/`, `"$HOME/$SUB"` the home); one whose whole value this audit cannot know is `/`: `.`
/// and `..` (the caller's working directory, or above it), a lone variable other than
/// `$HOME` (`"$PWD"`, `"$FOO"`; not one that names a socket, SOCKET_VARIABLES), as
/// `host_tree` takes `/proc/PID/root`. A variable of KNOWN_VARIABLES stands for its place
/// (`"$XDG_RUNTIME_DIR/bus"` is `/run/user/*/bus`). `None` for a home (see
/// `credentials_in`) and for a path below an unknown place (`src`, `"$FOO/cache"`).
fn held_tree(source: &str) -> Option<String> {
    if substituted_whole(source) {
        return Some("/".to_string());
    }
    let source = without_trailing_variables(source).unwrap_or_else(|| source.to_string());
    if let Some(spelt) = variable_spelling(&source) {
        let (name, rest) = spelt[1..].split_once('/').unwrap_or((&spelt[1..], ""));
        if let Some((_, place)) = KNOWN_VARIABLES.iter().find(|(n, _)| *n == name) {
            return Some(normalize_path(&format!("{place}/{rest}")));
        }
        if SOCKET_VARIABLES.iter().any(|(n, _)| *n == name) {
            return None;
        }
    }
    // What host_tree leaves out of an unknown source: one whose whole value is unknown.
    host_tree(&source).or_else(|| {
        let HostPath::Unknown(_) = host_path(&source) else {
            return None;
        };
        let n = normalize_path(&source);
        let lone_variable = variable_spelling(&source).is_some_and(|v| !v[1..].contains('/'));
        (n == "." || n == ".." || n.starts_with("../") || lone_variable).then(|| "/".to_string())
    })
}

/// Whether the whole of `source` is filled in from outside the line by a substitution (a CI
/// system's `${{ inputs.dir }}`, a command's `$(pwd)` or backquotes), a trailing `/` aside: a
/// `workflow_dispatch` input may be `/` (the security-team review: taken for no host path, it
/// passed where `"$DIR"` is taken to be `/`).
fn substituted_whole(source: &str) -> bool {
    let end = if let Some(rest) = source.strip_prefix("${{") {
        rest.find("}}").map(|i| 3 + i + 2)
    } else if let Some(rest) = source.strip_prefix("$(") {
        rest.find(')').map(|i| 2 + i + 1)
    } else if let Some(rest) = source.strip_prefix('`') {
        rest.find('`').map(|i| 1 + i + 1)
    } else {
        None
    };
    end.is_some_and(|end| source[end..].trim_end_matches('/').is_empty())
}

/// A mount source as a finding names it: with the tree it is taken to be where `held_tree`
/// widens it, and why (`$PWD (taken to be /: its value comes from the caller's
/// environment)`).
fn shown_source(source: &str) -> String {
    if let Some(widest) = without_trailing_variables(source) {
        return format!("{source} (taken to be {widest}: the variable it ends in may be empty)");
    }
    let held = held_tree(source);
    let Some(tree) = held.as_ref().filter(|_| held != host_tree(source)) else {
        return source.to_string();
    };
    let known = variable_spelling(source).is_some_and(|v| {
        let name = v[1..].split('/').next().unwrap_or("");
        KNOWN_VARIABLES.iter().any(|(n, _)| *n == name)
    });
    let why = match host_path(source) {
        _ if known => "the variable names that place",
        HostPath::Unknown(why) => why,
        _ => "this audit cannot know it",
    };
    format!("{source} (taken to be {tree}: {why})")
}

/// Variables whose value is a known place on every host that sets them, for `held_tree`:
/// the user's runtime directory (the XDG base directory specification; systemd-logind's).
const KNOWN_VARIABLES: &[(&str, &str)] = &[("XDG_RUNTIME_DIR", "/run/user/*")];

/// A source that starts with a variable, spelt `$NAME/rest` (`${NAME}` unbraced), normalised,
/// to find the sockets HOST_SOCKETS names by a variable.
fn variable_spelling(source: &str) -> Option<String> {
    let rest = source.strip_prefix('$')?;
    let (name, rest) = match rest.strip_prefix('{') {
        Some(braced) => braced.split_once('}')?,
        None => rest.split_at(rest.find('/').unwrap_or(rest.len())),
    };
    Some(normalize_path(&format!("${name}/{rest}")))
}

/// Symlinks every usual Linux host has (FHS 3.0; systemd requires them), and where each
/// points from its directory. Debian and Ubuntu spell `/var/run` as `/run`, Fedora as `../run`:
/// under bubblewrap the relative form leads where this table says, and the absolute one is
/// resolved outside the new root, so a mount through it fails and the sandbox never runs.
const HOST_LINKS: &[(&str, &str)] = &[("/var/run", "../run"), ("/var/lock", "../run/lock")];

/// Where a link at `place` leads, read as relative to its directory (see HOST_LINKS).
fn link_target(place: &str, relative: &str) -> String {
    let parent = place.rsplit_once('/').map_or("", |(parent, _)| parent);
    normalize_path(&format!("{parent}/{relative}"))
}

/// What is left of `path` below `tree` (`""` when it is `tree`), if it lies there.
fn rest_below<'p>(path: &'p str, tree: &str) -> Option<&'p str> {
    is_at_or_below(path, tree).then(|| path[tree.len()..].trim_start_matches('/'))
}

/// `path` and its spellings through the HOST_LINKS that lead to it, as a bind of host `tree`
/// can hand it over. bubblewrap resolves a bind's source on the host, so a tree at or below a
/// link (`/var/run/docker.sock`) is what the link leads to; a tree above one (`/`, `/var`)
/// shows the link itself, which leads to the sandbox's own target, not into this mount: what
/// is there is handed over by whatever mount is there.
fn host_spellings(path: &str, tree: &str) -> Vec<String> {
    let through_links = HOST_LINKS.iter().filter_map(|(link, relative)| {
        let rest = rest_below(path, &link_target(link, relative))?;
        is_at_or_below(tree, link).then(|| normalize_path(&format!("{link}/{rest}")))
    });
    std::iter::once(path.to_string())
        .chain(through_links)
        .collect()
}

/// Where the Docker sockets lie inside the host tree a mount source names (see `sockets_in`).
fn docker_sockets_in(source: &str) -> Vec<String> {
    sockets_in(source, DOCKER_SOCKETS)
}

/// The host services whose sockets a bind of the host path `source` hands the task, as the
/// audits know them (DOCKER_SOCKETS and HOST_SOCKETS), with the socket or directory of
/// sockets found on this host: at or below `source` (a bind of `/run`), or holding it (a bind
/// of one socket in `/tmp/.X11-unix`). `airlock run` warns of these; the audits report what a
/// line names, whatever the host holds. Only patterns whose names agree with `source`'s are
/// looked for on disk.
pub fn services_a_bind_reaches(source: &std::path::Path) -> Vec<(&'static str, PathBuf)> {
    let docker = DOCKER_SOCKETS
        .iter()
        .map(|s| (s.to_string(), "the Docker daemon (root on the host)"));
    let others = HOST_SOCKETS.iter().map(|(p, what)| (p.to_string(), *what));
    on_host_around(source, docker.chain(others), may_hold_a_socket)
}

/// The credentials of HOME_CREDENTIALS a bind of the host path `source` hands the task, with
/// where each is on this host: at or below `source` (a bind of a home), or holding it (a bind
/// of `~/.aws/credentials`). The homes are this host's (HOMES) and the caller's (`$HOME`: a
/// service account's `/var/lib/jenkins`, a CI runner's), each by the path its links lead to,
/// as `source` is taken by its own: where `/home` is a link (`/home -> var/home`), a bind of
/// `/home/dev/.ssh` is one of `/var/home/dev/.ssh`. Only the homes' parents are resolved, not
/// every home under them: that listed `/home` and resolved each user's home (on autofs,
/// mounting it) for every bind and input of every run. A home that is a link of its own
/// (`/home/dev -> /data/dev`) is found by its name only, but for the caller's.
pub fn credentials_a_bind_reaches(source: &std::path::Path) -> Vec<(&'static str, PathBuf)> {
    let real = |path: &std::path::Path| {
        let path = std::fs::canonicalize(path).ok()?;
        path.to_str().map(|p| p.trim_end_matches('/').to_string())
    };
    // Only a regular file of that name, and of one name: a directory `keys.pub` may hold
    // keys, and a second name of `id_rsa` (a hard link `id_rsa.pub`) is the key itself.
    let public_file = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(source).is_ok_and(|m| m.is_file() && m.nlink() == 1)
    };
    if real(source).is_some_and(|s| is_public_beside_credentials(&s)) && public_file() {
        return Vec::new();
    }
    let caller = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let mut homes: Vec<String> = HOMES
        .iter()
        .filter_map(|home| match home.strip_suffix("/*") {
            Some(parent) => real(std::path::Path::new(parent)).map(|p| format!("{p}/*")),
            None => real(std::path::Path::new(home)),
        })
        .chain(caller.as_deref().and_then(real))
        .collect();
    homes.sort();
    homes.dedup();
    let table = homes.iter().flat_map(|home| {
        HOME_CREDENTIALS
            .iter()
            .map(move |(place, what)| (format!("{home}/{place}"), *what))
    });
    on_host_around(source, table, |_| true)
}

/// The places on this host that a table of patterns (as HOST_SOCKETS) names, kept by `keep`,
/// that lie at or below `source` or hold it, through symlinks, with what each is. Only
/// patterns whose names agree with `source`'s are looked for on disk.
fn on_host_around(
    source: &std::path::Path,
    table: impl Iterator<Item = (String, &'static str)>,
    keep: fn(&std::path::Path) -> bool,
) -> Vec<(&'static str, PathBuf)> {
    let Some(real) = std::fs::canonicalize(source)
        .ok()
        .and_then(|p| p.to_str().map(str::to_string))
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (pattern, what) in table {
        if !pattern.starts_with('/') || !parts_match(&path_parts(&real), &path_parts(&pattern)) {
            continue;
        }
        for place in host_paths_matching(&pattern)
            .into_iter()
            .filter(|p| keep(p))
        {
            if place.starts_with(&real) || std::path::Path::new(&real).starts_with(&place) {
                found.push((what, place));
            }
        }
    }
    found
}

/// What `airlock run` (and `explain`) says of a bind from `src` to `dest`: the host sockets,
/// the host's /proc and the credentials it hands the task, where it hands any.
pub fn bind_warnings(src: &std::path::Path, dest: &std::path::Path) -> Vec<String> {
    let credentials: Vec<String> = credentials_a_bind_reaches(src)
        .iter()
        .map(|(what, at)| format!("{what} at {}", at.display()))
        .collect();
    let credentials = (!credentials.is_empty()).then(|| {
        format!(
            "{} (inside at {}) reaches credentials the task can read, read-only or not, and \
             hand back in its output: {}",
            src.display(),
            dest.display(),
            credentials.join(", ")
        )
    });
    // The audits' host-proc check, on the path the bind resolves to.
    let proc = std::fs::canonicalize(src)
        .ok()
        .as_deref()
        .and_then(std::path::Path::to_str)
        .is_some_and(|real| !host_proc_in(real).is_empty())
        .then(|| {
            format!(
                "{} (inside at {}) holds the host's /proc: the task reads every host process's \
                 command line, status and mount table",
                src.display(),
                dest.display()
            )
        });
    socket_warning(src, dest)
        .into_iter()
        .chain(proc)
        .chain(credentials)
        .collect()
}

/// What `airlock run` (and `explain`) says of an input copied in from the host file `path`
/// as `name`, when the file is one of a home's credentials on this host, or one the task's
/// host identity `task` (uid, gid) could not read (see `kept_from`) that is another user's
/// or one of the host's own secrets (SYSTEM_SECRETS).
pub fn input_warning(path: &std::path::Path, name: &str, task: (u32, u32)) -> Option<String> {
    let held = credentials_a_bind_reaches(path);
    if let Some((what, at)) = held.first() {
        return Some(format!(
            "{} (copied in as {name}) is {what} at {}: the task reads it, and can hand it back \
             in its output",
            path.display(),
            at.display()
        ));
    }
    // A file of the host's /proc is the caller's own, yet none it keeps on purpose:
    // /proc/self/environ is the whole environment airlock keeps from the task (stop 47's
    // fuzzing copied `SECRET_TOKEN=...` in so, with no word said).
    let on_proc = nix::sys::statfs::statfs(path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
    if on_proc {
        return Some(format!(
            "{} (copied in as {name}) is a file of the host's /proc (a process's environment, \
             command line or memory map there): the task reads its copy, and can hand it back \
             in its output",
            path.display()
        ));
    }
    let meta = std::fs::metadata(path).ok()?;
    let kept = kept_from(&meta, Some(task))?;
    // A file the caller cannot read is not copied in either: run refuses it (EACCES). Asked
    // with the caller's effective rights, its capabilities among them (CAP_DAC_READ_SEARCH
    // opens what the mode refuses: the sign-off review).
    nix::unistd::faccessat(
        nix::fcntl::AT_FDCWD,
        path,
        nix::unistd::AccessFlags::R_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    )
    .ok()?;
    // The caller's own file (a framework's 0600 temporary file) is handed over on purpose;
    // another user's, or a system secret, is what the warning is for.
    let owner = std::os::unix::fs::MetadataExt::uid(&meta);
    let secret = || {
        let real = std::fs::canonicalize(path).ok();
        (real.as_deref().and_then(std::path::Path::to_str))
            .is_some_and(|real| !system_secrets_in(real).is_empty())
    };
    if owner == nix::unistd::geteuid().as_raw() && !secret() {
        return None;
    }
    Some(format!(
        "{} (copied in as {name}) is {kept}: the task reads its copy, and can hand it back in \
         its output",
        path.display()
    ))
}

/// The host's own secrets, by place (a file or a tree; a name pattern ends in `*`), and what
/// each is. Kept from other users by their modes, so they leak where root reads them: a
/// container run as root, an input a root caller copies in. Not exhaustive: a reviewer adds
/// what their hosts keep.
const SYSTEM_SECRETS: &[(&str, &str)] = &[
    ("/etc/shadow", "the host's password hashes"),
    ("/etc/shadow-", "the host's password hashes"),
    ("/etc/gshadow", "the host's password hashes"),
    ("/etc/gshadow-", "the host's password hashes"),
    ("/etc/ssh/ssh_host_*", "the host's ssh host keys"),
    ("/etc/ssl/private", "TLS private keys"),
    ("/etc/pki/tls/private", "TLS private keys"),
    ("/etc/letsencrypt", "TLS private keys"),
    ("/etc/krb5.keytab", "the host's Kerberos keys"),
    ("/etc/wireguard", "WireGuard private keys"),
    (
        "/etc/NetworkManager/system-connections",
        "Wi-Fi and VPN passwords",
    ),
    ("/etc/kubernetes", "Kubernetes cluster credentials"),
    ("/etc/rancher/k3s", "k3s cluster credentials"),
    ("/var/lib/rancher/k3s/server", "k3s cluster credentials"),
    // The security-team review's: CI runners', clusters', mail and VPN daemons' secrets, and
    // other containers' settings (their environments).
    ("/etc/gitlab-runner", "GitLab runner tokens"),
    ("/var/lib/jenkins/secrets", "Jenkins secrets"),
    (
        "/var/lib/docker/containers",
        "other containers' environments",
    ),
    ("/var/lib/kubelet/pki", "Kubernetes cluster credentials"),
    ("/var/lib/etcd", "Kubernetes cluster credentials"),
    ("/etc/rancher/rke2", "RKE2 cluster credentials"),
    ("/var/lib/rancher/rke2/server", "RKE2 cluster credentials"),
    ("/etc/mysql/debian.cnf", "MySQL's maintenance password"),
    ("/etc/ipsec.secrets", "VPN keys"),
    ("/etc/openvpn", "VPN keys"),
    ("/var/lib/tailscale", "VPN keys"),
    ("/etc/wpa_supplicant", "Wi-Fi and VPN passwords"),
    ("/etc/netplan", "Wi-Fi and VPN passwords"),
    ("/etc/postfix/sasl_passwd", "mail relay passwords"),
    ("/etc/dovecot/private", "TLS private keys"),
];

/// The host secrets of SYSTEM_SECRETS a mount source holds or is, each with where it lies
/// inside the tree (see `socket_in`), the tree taken as `held_tree` takes it.
fn system_secrets_in(source: &str) -> Held {
    // A host key's public half alone.
    if source.ends_with(".pub") {
        return Vec::new();
    }
    let Some(tree) = held_tree(source) else {
        return Vec::new();
    };
    grouped(
        SYSTEM_SECRETS
            .iter()
            .filter_map(|&(place, what)| Some((what, socket_in(&tree, place)?))),
    )
}

/// How the host file `meta` describes (its links followed) is kept from the task's host
/// identity `task` (uid, gid; the task has no other group), if it is: a regular file that
/// identity may not read by
/// its mode (`/etc/shadow`, 0640 root:shadow; an ssh host key, 0600). The launcher opens an
/// input with the caller's rights, a root caller's all of them, and copies it into scratch,
/// where the task reads it whatever the host's mode said: a bind of the same file would have
/// left it unreadable to the task (a root caller's is uid 65534 on the host). An unprivileged
/// caller's task is the caller, so its own files (a 0600 temporary file) are not kept from
/// it. `None` (the audit, which does not know who runs the line): kept from other users.
fn kept_from(meta: &std::fs::Metadata, task: Option<(u32, u32)>) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let readable = match task {
        Some((uid, _)) if meta.uid() == uid => meta.mode() & 0o400 != 0,
        Some((_, gid)) if meta.gid() == gid => meta.mode() & 0o040 != 0,
        _ => meta.mode() & 0o004 != 0,
    };
    let whom = match task {
        Some((uid, _)) => format!("the task's host identity (uid {uid}) on this host"),
        None => "other users on this host".into(),
    };
    (meta.is_file() && !readable).then(|| {
        format!(
            "kept from {whom} (mode {:04o}, owner uid {})",
            meta.mode() & 0o7777,
            meta.uid()
        )
    })
}

/// What `airlock run` (and `explain`) says of a variable that crosses into the sandbox and
/// looks like a credential: named, never its value (the text may end up in a log).
pub fn credential_warning(name: &str, value: &str) -> Option<String> {
    // The variables every sandbox starts with are airlock's own, never a caller's credential.
    if crate::spec::FIXED_ENV.contains(&(name, value)) {
        return None;
    }
    credential_in(name, value).map(|by| {
        format!(
            "{name} crosses into the sandbox and looks like a credential (by its {by}): the task \
             can read it, and hand it back in its output or result files"
        )
    })
}

/// What `airlock run` (and `explain`) says of a bind from `src` to `dest` that hands the task a
/// socket: connect(2) crosses any bind, read-only or not, to whatever listens on it.
fn socket_warning(src: &std::path::Path, dest: &std::path::Path) -> Option<String> {
    let reached = services_a_bind_reaches(src);
    let is_socket = || {
        std::fs::metadata(src)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
    };
    let (src, dest) = (src.display(), dest.display());
    if !reached.is_empty() {
        let list: Vec<String> = reached
            .iter()
            .map(|(what, at)| format!("{what} at {}", at.display()))
            .collect();
        return Some(format!(
            "{src} (inside at {dest}) reaches host sockets the task can connect to, read-only \
             or not: {}",
            list.join(", ")
        ));
    }
    is_socket().then(|| {
        format!(
            "{src} is a unix socket, inside at {dest}: the task can connect to whatever listens \
             on it, read-only or not"
        )
    })
}

/// Whether `place`, a path a socket table names, is a socket or a directory holding one (or
/// one this process cannot list), through symlinks: a plain directory that happens to match a pattern
/// (`/tmp/ssh-notes`), or a compositor's `wayland-0.lock` beside its socket, hands over no
/// service.
fn may_hold_a_socket(place: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Ok(m) = std::fs::metadata(place) else {
        return false;
    };
    if m.file_type().is_socket() {
        return true;
    }
    if !m.is_dir() {
        return false;
    }
    match std::fs::read_dir(place) {
        Ok(entries) => entries
            .flatten()
            .any(|e| e.file_type().is_ok_and(|t| t.is_socket())),
        Err(_) => true,
    }
}

/// The paths on this host that a pattern of the socket tables names (a name ending in `*`
/// matches by prefix).
fn host_paths_matching(pattern: &str) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from("/")];
    for part in path_parts(pattern) {
        paths = paths
            .into_iter()
            .flat_map(|dir| match part.strip_suffix('*') {
                None => vec![dir.join(part)],
                Some(prefix) => std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_str()
                            .is_some_and(|n| n.starts_with(prefix))
                    })
                    .map(|e| e.path())
                    .collect(),
            })
            .collect();
    }
    paths.retain(|p| p.symlink_metadata().is_ok());
    paths
}

/// What the sockets of `table` (as HOST_SOCKETS) a mount source holds are, each with where
/// they lie inside the host tree it names (see `sockets_in`).
fn host_sockets_in(source: &str, table: &[(&str, &'static str)]) -> Held {
    grouped(table.iter().flat_map(|&(socket, what)| {
        sockets_in(source, &[socket])
            .into_iter()
            .map(move |place| (what, place))
    }))
}

/// What a mount holds of a table: each kind once, with the places it lies inside the mount.
type Held = Vec<(&'static str, Vec<String>)>;

/// `(what, place)` pairs as each `what` once, in order, with its places, each once.
fn grouped(pairs: impl Iterator<Item = (&'static str, String)>) -> Held {
    let mut held: Held = Vec::new();
    for (what, place) in pairs {
        match held.iter_mut().find(|(w, _)| *w == what) {
            Some((_, places)) if places.contains(&place) => {}
            Some((_, places)) => places.push(place),
            None => held.push((what, vec![place])),
        }
    }
    held
}

/// The sockets the line's own `--setenv`s of SOCKET_VARIABLES name, as `(path, what)`: an
/// absolute path, normalised (where the task will look for it).
fn sockets_named_by(options: &[BwrapOption]) -> Vec<(String, &'static str)> {
    options
        .iter()
        .filter(|option| option.name == "--setenv" && option.args[1].starts_with('/'))
        .filter_map(|option| {
            let (_, what) = SOCKET_VARIABLES
                .iter()
                .find(|(name, _)| *name == option.args[0])?;
            Some((normalize_path(&option.args[1]), *what))
        })
        .collect()
}

/// Each of `items` once, in order.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// The options of `(source, raw)` pairs as written, each once, in order.
fn distinct_raws(through: &[(String, String)]) -> Vec<&str> {
    distinct(through.iter().map(|(_, raw)| raw.as_str()))
}

/// One `host-proc` finding for every mount that shows the host's proc, given as
/// `(source, raw)`.
fn report_host_proc(through: &[(String, String)], audit: &mut Audit) {
    if !through.is_empty() {
        audit.finding(
            "host-proc",
            "mounts the host's /proc: every host process's command line, status and mount \
             table can be read",
            distinct_raws(through).join(" "),
        );
    }
}

/// One `host-socket` finding for every mount that hands over a host service's socket, given
/// as `(source, raw)`, naming what they hold.
fn report_host_socket(through: &[(String, String)], held: &[&str], audit: &mut Audit) {
    report_held("host-socket", through, held, audit, |mounts, held| {
        format!(
            "{mounts} the socket of {}: a connect(2) reaches a host service that acts outside \
             the sandbox",
            held.join(", ")
        )
    });
}

/// One `host-credentials` finding for every mount that hands over credentials of a home,
/// given as `(source, raw)`, naming what they hold (the first few, when a whole home is).
fn report_host_credentials(through: &[(String, String)], held: &[&str], audit: &mut Audit) {
    report_held("host-credentials", through, held, audit, |mounts, held| {
        format!(
            "{mounts} {}: the task reads them, read-only or not, and can hand them back in its \
             output",
            kinds_named(held)
        )
    });
}

/// The kinds of secrets a mount holds, as a finding names them: the first few.
fn kinds_named(held: &[&str]) -> String {
    match held {
        [first @ .., last] if held.len() <= 4 && !first.is_empty() => {
            format!("{} and {last}", first.join(", "))
        }
        [one] => one.to_string(),
        _ => format!(
            "{} and {} more kinds of credentials",
            held[..3].join(", "),
            held.len() - 3
        ),
    }
}

/// One `host-secrets` finding for the mounts (`(mount, raw, _)` as `report_host_mounts`
/// takes them) that hold the host's own secrets (SYSTEM_SECRETS), of a line whose task reads
/// them, `whom` saying why: a docker container run as root, their owner (their modes keep
/// them from other users, not from their owner, capabilities dropped or not), or in a group
/// their modes let read `only` some kinds of them.
fn report_host_secrets(
    mounts: &[(HostMount, String, bool)],
    whom: &str,
    only: Option<&[&str]>,
    audit: &mut Audit,
) {
    let mut through: Vec<(String, String)> = Vec::new();
    let mut whats: Vec<&str> = Vec::new();
    for (mount, raw, _) in mounts {
        let mut held = system_secrets_in(&mount.source);
        held.retain(|(what, _)| only.is_none_or(|only| only.contains(what)));
        if !held.is_empty() {
            through.push((mount.source.clone(), raw.clone()));
            whats.extend(held.iter().map(|(what, _)| *what));
        }
    }
    let held = distinct(whats.into_iter());
    report_held("host-secrets", &through, &held, audit, |mounts, held| {
        format!(
            "{mounts} {}: {whom}, so it reads them, read-only or not, and can hand them back \
             in its output",
            kinds_named(held)
        )
    });
}

/// What docker's daemon may change of who a container is to the host's files.
const REMAP: &str = " (unless the daemon remaps users, userns-remap)";

/// Groups that read some of the host's secrets by their modes on Debian and Ubuntu, and what.
const SECRET_GROUPS: [(&str, &str); 2] = [
    // /etc/shadow and /etc/gshadow: root:shadow 0640.
    ("shadow", "the host's password hashes"),
    // /etc/ssl/private (0710) and its keys (0640): root:ssl-cert.
    ("ssl-cert", "TLS private keys"),
];

/// The name `/etc/group` gives `gid`. The file itself, not NSS's getgrgid: a static glibc
/// build's NSS loads modules it cannot, and crashed (SIGSEGV) on a gid the file lacks; the
/// groups that read host secrets are local ones.
pub fn group_name(gid: u32) -> Option<String> {
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse::<u32>() == Ok(gid)).then(|| name.to_string())
    })
}

/// What a container's group (a name, or a number this host names) reads of the host's secrets
/// by their modes (SECRET_GROUPS); a group filled in from outside the line may be any of them.
pub fn secrets_read_by_group(group: &str) -> Vec<&'static str> {
    let name = match group.parse::<u32>() {
        Ok(gid) => group_name(gid),
        Err(_) => Some(group.to_string()),
    };
    let unseen = expands_a_variable(group);
    SECRET_GROUPS
        .iter()
        .filter(|(g, _)| unseen || name.as_deref() == Some(*g))
        .map(|(_, what)| *what)
        .collect()
}

/// One finding of `rule` for every mount of `through` (`(source, raw)`) that holds something
/// of `held`; `say` words it after "mounts SOURCES, which hold(s)".
fn report_held(
    rule: &'static str,
    through: &[(String, String)],
    held: &[&str],
    audit: &mut Audit,
    say: impl Fn(&str, &[&str]) -> String,
) {
    let sources = distinct(through.iter().map(|(source, _)| source.as_str()));
    let verb = if sources.len() == 1 { "holds" } else { "hold" };
    if !held.is_empty() {
        let shown: Vec<String> = sources.iter().map(|s| shown_source(s)).collect();
        let mounts = format!("mounts {}, which {verb}", shown.join(", "));
        audit.finding(rule, say(&mounts, held), distinct_raws(through).join(" "));
    }
}

/// One `docker-socket` finding for every mount that hands over the socket, given as
/// `(source, raw)`: it is one way out, however many options open it.
fn report_docker_socket(through: &[(String, String)], audit: &mut Audit) {
    let sources = distinct(through.iter().map(|(source, _)| source.as_str()));
    let raws = distinct_raws(through);
    let is_socket = |source: &&str| normalize_path(source).ends_with("docker.sock");
    let message = match sources.as_slice() {
        [] => return,
        all if all.iter().all(is_socket) => "mounts the Docker socket".to_string(),
        [one] => format!(
            "mounts {}, which holds the Docker socket",
            shown_source(one)
        ),
        many => format!("mounts the Docker socket through {}", many.join(", ")),
    };
    audit.finding("docker-socket", message, raws.join(" "));
}

/// Which writable host mounts an audit counts as a leak.
#[derive(Clone, Copy)]
enum WritableLeak {
    /// Any but the scratch directory (docker: a container needs no other host path written).
    AnyButScratch,
    /// Sensitive paths only, scratch aside (bwrap: binding a project writable is its use;
    /// `/` and the homes themselves are reported as `writable-home-or-root`).
    Sensitive,
}

/// The `host-mount-rw` finding of one host path mounted into the sandbox, for docker and bwrap
/// alike.
fn check_writable_host_mount(mount: &HostMount, raw: &str, leak: WritableLeak, audit: &mut Audit) {
    let writable_leaks = match leak {
        WritableLeak::AnyButScratch => true,
        WritableLeak::Sensitive => {
            is_sensitive_host_path(&mount.source) && home_or_root(&mount.source).is_none()
        }
    };
    if !writable_leaks || is_airlock_scratch(&mount.source) {
        return;
    }
    if !mount.read_only {
        audit.finding(
            "host-mount-rw",
            format!("mounts {} read-write", mount.source),
            raw,
        );
        return;
    }
    let below = left_writable_by_remount(&mount.source);
    if mount.writable_below && !below.is_empty() {
        audit.finding(
            "host-mount-rw",
            format!(
                "mounts {} read-only but its submounts writable (bind-recursive=writable): \
                 the host's mounts below it ({} on most hosts) stay writable",
                mount.source,
                below.join(", ")
            ),
            raw,
        );
    }
}

fn is_root_user(user: &str) -> bool {
    let name = user.split(':').next().unwrap_or("");
    // As moby reads a uid (Go's Atoi): `-0` and `+0` are 0 too.
    name.is_empty() || name == "root" || name.parse::<i64>() == Ok(0)
}

/// What a `--security-opt` value turns off, if it turns confinement off.
fn unconfined_by(security_opt: &str) -> Option<&'static str> {
    let (key, value) = security_opt
        .split_once(['=', ':'])
        .unwrap_or((security_opt, ""));
    match (key, value) {
        ("seccomp", "unconfined") => Some("seccomp"),
        ("apparmor", "unconfined") => Some("AppArmor"),
        ("label", "disable") => Some("SELinux labels"),
        // Unconfined SELinux domains: spc_t ("super privileged container") and the user's.
        ("label", "type:spc_t" | "type:unconfined_t") => Some("SELinux confinement"),
        ("systempaths", "unconfined") => Some("masking of /proc and /sys paths"),
        _ => None,
    }
}

/// `Some(on)` when a `--security-opt` value is about no-new-privileges.
fn no_new_privileges_setting(security_opt: &str) -> Option<bool> {
    match security_opt.strip_prefix("no-new-privileges")? {
        "" => Some(true),
        rest => rest
            .strip_prefix([':', '='])
            .map(|v| parse_bool(v) == Some(true)),
    }
}

/// What a line's recursive host mounts open, read-only ones included (connect(2) needs no
/// write access), for docker and airlock lines alike: each `(mount, raw, checked)` as
/// written, its writing checked by `leak` where `checked`; then one finding per rule for the
/// line, naming every option that opens it.
fn report_host_mounts(mounts: &[(HostMount, String, bool)], leak: WritableLeak, audit: &mut Audit) {
    // (rule, (source, raw))
    let mut opened: Vec<(&str, (String, String))> = Vec::new();
    for (mount, raw, checked) in mounts {
        if *checked {
            check_writable_host_mount(mount, raw, leak, audit);
        }
        for (rule, holds) in [
            (
                "docker-socket",
                !docker_sockets_in(&mount.source).is_empty(),
            ),
            (
                "host-socket",
                !host_sockets_in(&mount.source, HOST_SOCKETS).is_empty(),
            ),
            ("host-proc", !host_proc_in(&mount.source).is_empty()),
            (
                "host-credentials",
                !credentials_in(&mount.source).is_empty(),
            ),
        ] {
            if holds {
                opened.push((rule, (mount.source.clone(), raw.clone())));
            }
        }
    }
    let opened_by = |rule: &str| -> Vec<(String, String)> {
        opened
            .iter()
            .filter(|(r, _)| *r == rule)
            .map(|(_, through)| through.clone())
            .collect()
    };
    report_docker_socket(&opened_by("docker-socket"), audit);
    // What the mounts of one rule hold together, each once.
    let held = |through: &[(String, String)], holds: fn(&str) -> Held| {
        let whats = through.iter().flat_map(|(source, _)| holds(source));
        distinct(whats.map(|(what, _)| what).collect::<Vec<_>>().into_iter())
    };
    let host_sockets = opened_by("host-socket");
    let sockets = held(&host_sockets, |source| {
        host_sockets_in(source, HOST_SOCKETS)
    });
    report_host_socket(&host_sockets, &sockets, audit);
    report_host_proc(&opened_by("host-proc"), audit);
    let credentials = opened_by("host-credentials");
    report_host_credentials(&credentials, &held(&credentials, credentials_in), audit);
}

/// Where an audited airlock run was written.
pub enum Written {
    /// An `airlock run` command line, and the `--request` FILE it names, read only at run
    /// time.
    CommandLine { request: Option<String> },
    /// A JSON request (`airlock run --request`).
    Request,
}

/// Audits an `airlock run` line or JSON request, read by `run`'s own parsers into `line`.
/// airlock's defaults are the safe ones, so only what the run opens is reported: the network,
/// binds (as `audit bwrap` judges them: binding a project writable is their use, and is
/// advice), credentials in the environment or handed in as inputs.
pub fn audit_airlock(line: &crate::spec::Draft, written: &Written) -> Audit {
    let mut audit = Audit::default();
    if line.share_net {
        audit.finding(
            "network-shared",
            "network is shared with the host",
            "--share-net",
        );
    }
    let mut mounts: Vec<(HostMount, String, bool)> = Vec::new();
    let mut writable: Vec<(String, String, String)> = Vec::new();
    for bind in &line.binds {
        let src = bind.src.to_string_lossy().into_owned();
        let dest = bind.dest.to_string_lossy().into_owned();
        let flag = if bind.writable { "--bind" } else { "--ro-bind" };
        let value = if src == dest {
            src.clone()
        } else {
            format!("{src}:{dest}")
        };
        let raw = shell_quote(&[flag.to_string(), value]);
        if bind.writable {
            match home_or_root(&src) {
                Some(why) => audit.finding(
                    "writable-home-or-root",
                    format!("binds {src} writable{why}"),
                    &raw,
                ),
                None if !is_sensitive_host_path(&src) => {
                    writable.push((src.clone(), dest, raw.clone()))
                }
                None => {}
            }
        }
        let mount = HostMount {
            source: src,
            read_only: !bind.writable,
            writable_below: false,
        };
        mounts.push((mount, raw, true));
    }
    report_host_mounts(&mounts, WritableLeak::Sensitive, &mut audit);
    // A root caller's task is --host-gid on the host: a group that reads host secrets by
    // their modes (42, shadow on Debian) reads them through any bind, read-only or not (the
    // explain review: `--host-gid 42 --ro-bind /etc:/e` passed clean and read /e/shadow).
    if let Some(gid) = line.host_gid {
        let read = secrets_read_by_group(&gid.to_string());
        if !read.is_empty() {
            let whom = format!(
                "the task's group on the host, --host-gid {gid}, reads them by their modes on \
                 this host, as Debian and Ubuntu set them"
            );
            report_host_secrets(&mounts, &whom, Some(&read), &mut audit);
        }
    }
    // A value is never printed: the report may end up in a log.
    for variable in &line.env {
        let (name, value) = match variable.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (variable.as_str(), None),
        };
        let Some(why) = credential_in_line(name, value.unwrap_or("")) else {
            continue;
        };
        let (message, arg) = match value {
            None => (
                format!(
                    "forwards {name}, a credential by its name, from the caller's environment \
                     into the sandbox"
                ),
                shell_quote(&["--env".to_string(), name.to_string()]),
            ),
            Some(_) => (
                match written {
                    Written::CommandLine { .. } => format!(
                        "sets {name}, a credential by its {why}, in the sandbox; the value is \
                         also on airlock's command line, which host processes can read \
                         (/proc/PID/cmdline)"
                    ),
                    Written::Request => {
                        format!("sets {name}, a credential by its {why}, in the sandbox")
                    }
                },
                match written {
                    Written::CommandLine { .. } => format!(
                        "{}=***",
                        shell_quote(&["--env".to_string(), name.to_string()])
                    ),
                    Written::Request => format!("\"env\": {{{}: ***}}", json!(name)),
                },
            ),
        };
        audit.finding("env-credential", message, arg);
    }
    for input in &line.inputs {
        let crate::spec::InputSource::HostFile(path) = &input.source else {
            continue;
        };
        let path = path.to_string_lossy();
        // A home's credentials, or the host's own secrets by their place (the security-team
        // review: judged by the auditing host's files alone, a kube admin file absent there
        // passed, to leak on the node that runs the line).
        let held: Vec<&str> = credentials_in(&path)
            .into_iter()
            .chain(system_secrets_in(&path))
            .map(|(what, _)| what)
            .collect();
        let arg = || shell_quote(&["--input".to_string(), format!("{}={path}", input.name)]);
        if !held.is_empty() {
            audit.finding(
                "input-credentials",
                format!(
                    "copies {path}, which holds {}, into the sandbox as {}: the task reads it, \
                     and can hand it back in its output",
                    held.join(", "),
                    input.name
                ),
                arg(),
            );
        } else if let Some(kept) = std::fs::metadata(&*path)
            .ok()
            .and_then(|meta| kept_from(&meta, None))
        {
            audit.finding(
                "input-credentials",
                format!(
                    "copies {path}, {kept}, into the sandbox as {}: the task reads its copy, \
                     and can hand it back in its output",
                    input.name
                ),
                arg(),
            );
        }
    }
    for (src, dest, raw) in writable {
        audit.advise(
            "writable-bind",
            format!(
                "binds {src} writable at {dest}: what the task leaves there, the host reads or \
                 runs later (a git hook, a Makefile, an .envrc)"
            ),
            raw,
        );
    }
    if let Written::CommandLine {
        request: Some(file),
    } = written
    {
        audit.advise(
            "request-unseen",
            "the request is read at run time: its command, inputs, environment and timeout are \
             not audited here (audit the request itself with --file)",
            shell_quote(&["--request".to_string(), file.clone()]),
        );
    } else if line.timeout.is_none() && !line.json && matches!(written, Written::CommandLine { .. })
    {
        audit.advise(
            "no-timeout",
            "no --timeout: a streamed run has no time limit (--json and --request stop at 10s \
             unless told otherwise)",
            "",
        );
    }
    audit
}

/// Audits a `docker run` (or `docker create`, `docker container run`) argument vector.
/// `argv` may start with `docker` or a path to it. Errors if it is not such a line or the
/// options cannot be parsed.
pub fn audit_docker(argv: &[String]) -> Result<Audit, String> {
    let run = parse_docker_run(docker_run_args(argv)?)?;
    let mut audit = Audit::default();

    // An option this audit does not know, written without `=value`, is read as a flag; were
    // it valued, its value would be the image, and the options after it (`--privileged`)
    // the container's command: unread. Said, not passed clean.
    for o in run.options.iter() {
        if o.value.is_none() && docker_takes_value(&o.name).is_none() {
            audit.finding(
                "unknown-option",
                format!(
                    "{} is no docker run option this audit knows: read as a flag, so were it to \
                     take a value, the image and the options after it would be read wrong",
                    o.raw
                ),
                o.raw.clone(),
            );
        }
    }

    // `-e NAME` and `--env-file` hand the container the host's values; `-e NAME=VALUE` sets
    // one written on the line, a finding only where it looks like a credential (`-e
    // LANG=C.UTF-8` is none). A value is never printed: the report may end up in a log.
    let mut forwarded: Vec<String> = Vec::new();
    let mut credentials: Vec<(String, String, &str)> = Vec::new();
    for o in run.options.iter() {
        match (o.name.as_str(), o.value().split_once('=')) {
            ("env", Some((name, value))) => {
                let written = match o.raw.strip_suffix(o.value()) {
                    Some(written) => format!("{written}{name}=***"),
                    None => format!("--env {name}=***"),
                };
                // `-e "FOO=$SECRET"`: the shell that runs the line puts the host's value
                // there (the lexer keeps a quoted expansion as written).
                if expands_a_variable(value) {
                    forwarded.push(written);
                } else if let Some(why) = credential_in(name, value) {
                    credentials.push((name.to_string(), written, why));
                }
            }
            // A forward's name; what is no name may be a value put where a name belongs (a
            // wrapper rendering `-e "$TOKEN"`): not printed.
            ("env", None)
                if !crate::spec::valid_env_name(o.value())
                    || credential_in("", o.value()).is_some() =>
            {
                let written = o.raw.strip_suffix(o.value()).unwrap_or("--env ");
                forwarded.push(format!("{written}***"));
            }
            ("env" | "env-file", _) => forwarded.push(o.raw.clone()),
            _ => {}
        }
    }
    if !forwarded.is_empty() {
        audit.finding(
            "env-forwarded",
            "forwards host environment variables",
            forwarded.join(" "),
        );
    }
    for (name, written, why) in credentials {
        audit.finding(
            "env-credential",
            format!(
                "sets {name}, a credential by its {why}, in the container; the value is also on \
                 docker's command line, which host processes can read (/proc/PID/cmdline)"
            ),
            written,
        );
    }

    let networks: Vec<&DockerOption> = run.all("network").collect();
    let open_networks: Vec<&str> = networks
        .iter()
        .filter(|o| o.value() != "none")
        .map(|o| o.raw.as_str())
        .collect();
    if networks.is_empty() || !open_networks.is_empty() {
        audit.finding(
            "network-not-none",
            "network is not none",
            open_networks.join(" "),
        );
    }

    // docker binds recursively, so a bind of / holds the host's proc.
    let mut mounts: Vec<(HostMount, String, bool)> = Vec::new();
    for option in &run.options {
        let mount = match option.name.as_str() {
            "volume" => volume_host_mount(option.value())?,
            "mount" => mount_host_mount(option.value())?,
            // Docker mounts its own socket into the container, read-only as far as the
            // audit's checks go.
            "use-api-socket" if option.is_on() => Some(HostMount {
                source: "/var/run/docker.sock".to_string(),
                read_only: true,
                writable_below: false,
            }),
            _ => None,
        };
        if let Some(mount) = mount {
            let checked = option.name != "use-api-socket";
            mounts.push((mount, option.raw.clone(), checked));
        }
    }
    report_host_mounts(&mounts, WritableLeak::AnyButScratch, &mut audit);
    // Who the container is to the host's files. A user filled in from outside the line
    // (`--user "$(id -u)"`, `$UID`) may be root: a root-run CI runner's is (the security-team
    // review: taken for another user, it passed clean).
    let user = run.last("user");
    let unseen_user = user.is_some_and(|u| expands_a_variable(u.value()));
    let root = user.is_none_or(|u| is_root_user(u.value())) || unseen_user;
    // Groups that read the host's secrets by their modes: the user's own (`--user 1000:42`)
    // and `--group-add`'s.
    let groups = (user.and_then(|u| u.value().split_once(':')).map(|(_, g)| g))
        .into_iter()
        .chain(run.all("group-add").map(DockerOption::value));
    let by_group: Vec<(&str, Vec<&str>)> = groups
        .map(|g| (g, secrets_read_by_group(g)))
        .filter(|(_, read)| !read.is_empty())
        .collect();
    if root {
        let whom = match unseen_user {
            true => {
                "the container may run as root, their owner on the host (its user comes \
                     from outside the line)"
            }
            false => "the container runs as root, their owner on the host",
        };
        report_host_secrets(&mounts, &format!("{whom}{REMAP}"), None, &mut audit);
    } else if let Some((group, read)) = by_group.first() {
        let whom = match expands_a_variable(group) {
            true => format!(
                "the container's group {group}, filled in from outside the line, may be one \
                 that reads them by their modes, as Debian and Ubuntu set them"
            ),
            false => format!(
                "the container's group {group} reads them by their modes, as Debian and Ubuntu \
                 set them"
            ),
        };
        report_host_secrets(&mounts, &format!("{whom}{REMAP}"), Some(read), &mut audit);
    }

    match user {
        None => audit.finding("root-user", "runs as root inside the container", ""),
        Some(user) if is_root_user(user.value()) => {
            audit.finding("root-user", "runs as root inside the container", &user.raw)
        }
        Some(user) if unseen_user => audit.finding(
            "root-user",
            "may run as root inside the container: its user comes from outside the line",
            &user.raw,
        ),
        Some(_) => {}
    }

    match run.last("read-only") {
        None => audit.finding("rootfs-writable", "root filesystem is writable", ""),
        Some(read_only) if !read_only.is_on() => audit.finding(
            "rootfs-writable",
            "root filesystem is writable",
            &read_only.raw,
        ),
        Some(_) => {}
    }

    if let Some(privileged) = run.last("privileged").filter(|o| o.is_on()) {
        audit.finding(
            "privileged",
            "runs privileged: every capability and every host device",
            &privileged.raw,
        );
    }

    for cap in run.all("cap-add") {
        audit.finding(
            "cap-add",
            format!("adds capability {}", cap.value()),
            &cap.raw,
        );
    }

    for opt in run.all("security-opt") {
        if let Some(what) = unconfined_by(opt.value()) {
            audit.finding("unconfined", format!("turns off {what}"), &opt.raw);
        }
    }

    // `--network host` is left to network-not-none: one finding per leak.
    for option in &run.options {
        let namespace = match option.name.as_str() {
            "pid" | "ipc" | "uts" | "userns" | "cgroupns" => option.name.as_str(),
            _ => continue,
        };
        if let Some(other) = option.value().strip_prefix("container:") {
            // As a --pidns or --userns descriptor in a bwrap line: another's, unseen.
            audit.finding(
                "host-namespace",
                format!(
                    "joins the {namespace} namespace of container {other}, which this audit \
                     cannot see (it may be the host's)"
                ),
                &option.raw,
            );
        }
        if option.value() == "host" {
            audit.finding(
                "host-namespace",
                format!("shares the host's {namespace} namespace"),
                &option.raw,
            );
        }
    }

    // Another container's mounts come along unseen: a bind of / or the Docker socket there
    // is one here too.
    for option in run.all("volumes-from") {
        audit.finding(
            "volumes-from",
            format!(
                "mounts the volumes of container {}, which this audit cannot see (they may be \
                 host paths, / or the Docker socket)",
                option.value()
            ),
            &option.raw,
        );
    }

    for option in &run.options {
        let message = match option.name.as_str() {
            "device" => format!("passes host device {}", option.value()),
            "device-cgroup-rule" => format!("allows host devices by rule {}", option.value()),
            "gpus" => format!("passes host GPUs ({})", option.value()),
            _ => continue,
        };
        audit.finding("device", message, &option.raw);
    }

    audit_docker_advice(&run, &mut audit);
    Ok(audit)
}

fn audit_docker_advice(run: &DockerRun, audit: &mut Audit) {
    match run.last("memory") {
        None => audit.advise("no-memory-limit", "no memory limit (--memory)", ""),
        Some(m) if m.value() == "0" => {
            audit.advise("no-memory-limit", "no memory limit (--memory)", &m.raw)
        }
        Some(_) => {}
    }

    match run.last("pids-limit") {
        None => audit.advise("no-pids-limit", "no process count limit (--pids-limit)", ""),
        Some(p) if p.value().parse::<i64>().is_ok_and(|n| n <= 0) => audit.advise(
            "no-pids-limit",
            "no process count limit (--pids-limit)",
            &p.raw,
        ),
        Some(_) => {}
    }

    let no_new_privileges = run
        .options
        .iter()
        .rev()
        .filter(|o| o.name == "security-opt")
        .find_map(|o| no_new_privileges_setting(o.value()));
    if no_new_privileges != Some(true) {
        audit.advise(
            "no-new-privileges",
            "no-new-privileges is not set (--security-opt no-new-privileges)",
            "",
        );
    }

    let drops_all = run
        .all("cap-drop")
        .any(|o| o.value().eq_ignore_ascii_case("all"));
    if !drops_all {
        audit.advise(
            "no-cap-drop",
            "capabilities are not dropped (--cap-drop ALL)",
            "",
        );
    }
}

// ---------------------------------------------------------------------------------------------
// bwrap
// ---------------------------------------------------------------------------------------------

/// Every bubblewrap 0.11 option and how many arguments follow it (`man bwrap`).
/// bwrap has no `--opt=value` form; an option not listed here is an error.
const BWRAP_OPTIONS: &[(&str, usize)] = &[
    // General.
    ("--help", 0),
    ("--version", 0),
    ("--args", 1),
    ("--argv0", 1),
    ("--level-prefix", 0),
    // Namespaces.
    ("--unshare-all", 0),
    ("--share-net", 0),
    ("--unshare-user", 0),
    ("--unshare-user-try", 0),
    ("--unshare-ipc", 0),
    ("--unshare-pid", 0),
    ("--unshare-net", 0),
    ("--unshare-uts", 0),
    ("--unshare-cgroup", 0),
    ("--unshare-cgroup-try", 0),
    ("--userns", 1),
    ("--userns2", 1),
    ("--disable-userns", 0),
    ("--assert-userns-disabled", 0),
    ("--pidns", 1),
    ("--uid", 1),
    ("--gid", 1),
    ("--hostname", 1),
    // Environment.
    ("--chdir", 1),
    ("--setenv", 2),
    ("--unsetenv", 1),
    ("--clearenv", 0),
    // Monitoring.
    ("--lock-file", 1),
    ("--sync-fd", 1),
    // Filesystem.
    ("--perms", 1),
    ("--size", 1),
    ("--bind", 2),
    ("--bind-try", 2),
    ("--dev-bind", 2),
    ("--dev-bind-try", 2),
    ("--ro-bind", 2),
    ("--ro-bind-try", 2),
    ("--bind-fd", 2),
    ("--ro-bind-fd", 2),
    ("--remount-ro", 1),
    ("--overlay-src", 1),
    ("--overlay", 3),
    ("--tmp-overlay", 1),
    ("--ro-overlay", 1),
    ("--proc", 1),
    ("--dev", 1),
    ("--tmpfs", 1),
    ("--mqueue", 1),
    ("--dir", 1),
    ("--file", 2),
    ("--bind-data", 2),
    ("--ro-bind-data", 2),
    ("--symlink", 2),
    ("--chmod", 2),
    // Lockdown.
    ("--seccomp", 1),
    ("--add-seccomp-fd", 1),
    ("--exec-label", 1),
    ("--file-label", 1),
    ("--block-fd", 1),
    ("--userns-block-fd", 1),
    ("--info-fd", 1),
    ("--json-status-fd", 1),
    ("--new-session", 0),
    ("--die-with-parent", 0),
    ("--as-pid-1", 0),
    ("--cap-add", 1),
    ("--cap-drop", 1),
];

struct BwrapOption<'a> {
    name: &'a str,
    args: &'a [String],
}

impl BwrapOption<'_> {
    /// The option and its arguments as written.
    fn raw(&self) -> String {
        let mut words = vec![self.name.to_string()];
        words.extend(self.args.iter().cloned());
        shell_quote(&words)
    }
}

/// Parses bwrap options the way bwrap does: `--` ends them, and so does the first argument
/// not starting with `-`; that is where the sandboxed command begins and is never audited.
fn parse_bwrap(args: &[String]) -> Result<Vec<BwrapOption<'_>>, String> {
    let mut options = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            i += 1;
            break;
        }
        if !arg.starts_with('-') {
            break;
        }
        let arity = BWRAP_OPTIONS
            .iter()
            .find(|(name, _)| *name == arg)
            .map(|(_, arity)| *arity)
            .ok_or_else(|| format!("unknown bwrap option {arg}"))?;
        let values = args.get(i + 1..i + 1 + arity).ok_or_else(|| {
            format!("bwrap option {arg} needs {arity} argument(s), the line ends first")
        })?;
        // bubblewrap refuses such a name (setenv(3) does: `bwrap: setenv failed`). Not printed:
        // `--setenv GITHUB_TOKEN=ghp_... 1`, a docker-style slip, holds the value.
        if matches!(arg, "--setenv" | "--unsetenv")
            && (values[0].is_empty() || values[0].contains('='))
        {
            return Err(format!(
                "bwrap option {arg} takes a name that is empty or holds '=', which bubblewrap \
                 refuses (setenv failed); it is not printed, as it may hold a value"
            ));
        }
        options.push(BwrapOption {
            name: arg,
            args: values,
        });
        i += 1 + arity;
    }
    if i >= args.len() {
        return Err("bwrap line has no command to run".to_string());
    }
    Ok(options)
}

/// What the host path a bind source names is, as far as the argument shows.
#[derive(Debug, PartialEq)]
enum HostPath {
    /// An absolute path, normalised.
    Known(String),
    /// A path in the caller's home (`$HOME`, `~`, `~user`): the rest below it, normalised
    /// (`""` for the home itself).
    InHome(String),
    /// A path this audit cannot know, and why: it is taken to be `/`.
    Unknown(&'static str),
}

/// Reads a bind source. A relative source depends on the caller's working directory, a
/// variable other than `HOME` on the caller's environment, `..` above a home leaves it, and
/// `/proc/PID/root`, `cwd` or `fd` lead into another process's view of the host; none of these
/// can be known from the argument vector, and `normalize_path` alone would hide them
/// (`$HOME/..` becomes `.`).
fn host_path(source: &str) -> HostPath {
    let (first, rest) = source.split_once('/').unwrap_or((source, ""));
    if matches!(first, "$HOME" | "${HOME}") || first.starts_with('~') {
        let below = normalize_path(rest);
        return match below.as_str() {
            "." => HostPath::InHome(String::new()),
            b if b == ".." || b.starts_with("../") => {
                HostPath::Unknown("it climbs out of the home with ..")
            }
            b => HostPath::InHome(format!("/{b}")),
        };
    }
    if first.starts_with('$') {
        return HostPath::Unknown("its value comes from the caller's environment");
    }
    if !source.starts_with('/') {
        return HostPath::Unknown("a relative path depends on the caller's working directory");
    }
    let normalized = normalize_path(source);
    let parts: Vec<&str> = normalized.split('/').skip(1).collect();
    // `/dev/fd` and `/dev/stdin` (`stdout`, `stderr`) are links into `/proc/self/fd`:
    // bubblewrap follows them to whatever its caller left open there (`5</`).
    if let ["proc", _, "root" | "cwd" | "fd", ..]
    | ["proc", _, "task", _, "root" | "cwd" | "fd", ..]
    | ["dev", "fd", _, ..]
    | ["dev", "stdin" | "stdout" | "stderr", ..] = parts.as_slice()
    {
        return HostPath::Unknown(
            "it leads through a process's root, working directory or descriptors",
        );
    }
    HostPath::Known(normalized)
}

/// Why a bind source hands the sandbox the caller's files, if it does: it is `/`, `/home`,
/// one user's home directly under `/home`, `/root`, the home spelt as the shell does
/// (`$HOME`, `~`, `~user`), or a path this audit cannot know (taken to be `/`).
///
/// A source that ends in variables (`/$DIR`, `"$HOME/$SUB"`) is also what is left without
/// them: an empty or unset variable leaves its parent.
fn home_or_root(source: &str) -> Option<String> {
    let found = match host_path(source) {
        HostPath::Known(path) => {
            let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            matches!(parts.as_slice(), [] | ["root"] | ["home"] | ["home", _]).then(String::new)
        }
        HostPath::InHome(below) => below.is_empty().then(String::new),
        HostPath::Unknown(why) => Some(format!(": {why}, so it may be / or a home")),
    };
    found.or_else(|| {
        let parent = without_trailing_variables(source)?;
        home_or_root(&parent)?;
        Some(format!(
            ": the variable it ends in may be empty, so it may be {parent}"
        ))
    })
}

/// `source` without the variables (`$NAME`, `${NAME}`) that make up its last names, when it
/// ends in one: what it names when they are empty (`/` for `/$DIR`).
fn without_trailing_variables(source: &str) -> Option<String> {
    let mut names: Vec<&str> = source.split('/').collect();
    let mut dropped = false;
    while let Some(last) = names.last() {
        match *last {
            "" | "." => {}
            name if name.starts_with('$') && names.len() > 1 => dropped = true,
            _ => break,
        }
        names.pop();
    }
    if !dropped {
        return None;
    }
    let parent = names.join("/");
    Some(if parent.is_empty() {
        "/".to_string()
    } else {
        parent
    })
}

/// The option whose mount puts option `i`'s source in the sandbox: itself, or for
/// `--overlay-src` the overlay option that takes it (`None` when none follows).
fn placing_mount(options: &[BwrapOption], i: usize) -> Option<usize> {
    if options[i].name != "--overlay-src" {
        return Some(i);
    }
    (i + 1..options.len()).find(|&j| {
        matches!(
            options[j].name,
            "--overlay" | "--tmp-overlay" | "--ro-overlay"
        )
    })
}

/// Where mount option `i` mounts in the sandbox, normalised. `None` for an option that mounts
/// nothing, and for a destination with `..` (bubblewrap prefixes `/newroot/`, so `..` can
/// leave the new root).
/// Where each mount option really lands in the sandbox: its destination, or what that leads
/// to when it passes through a host link an earlier bind shows there (`--ro-bind / /
/// --tmpfs /var/run` mounts on `/run`, or fails where the link is absolute; either way
/// `/run`'s content is gone). `None` as for `mount_destination`, and for options that mount
/// nothing.
///
/// One pass in argument order: the places where earlier binds of a host tree above a link
/// show that link are kept, each until a later mount at or above it covers it. (Worked out
/// anew for every option and every exposure, this took a line of 1000 binds of `/` past 20
/// seconds.)
fn sandbox_places(options: &[BwrapOption]) -> Vec<Option<String>> {
    let mut shown: Vec<Vec<String>> = vec![Vec::new(); HOST_LINKS.len()];
    let mut places = Vec::with_capacity(options.len());
    for (i, option) in options.iter().enumerate() {
        let dest = mount_destination(options, i);
        let through_link = dest.as_ref().and_then(|dest| {
            HOST_LINKS
                .iter()
                .zip(&shown)
                .find_map(|((_, relative), shown)| {
                    shown.iter().find_map(|place| {
                        let rest = rest_below(dest, place)?;
                        let target = link_target(place, relative);
                        Some(normalize_path(&format!("{target}/{rest}")))
                    })
                })
        });
        places.push(through_link.or_else(|| dest.clone()));
        let Some(dest) = dest else { continue };
        for shown in &mut shown {
            shown.retain(|place| !is_at_or_below(place, &dest));
        }
        if !matches!(option.name, "--bind" | "--ro-bind" | "--dev-bind") {
            continue;
        }
        let Some(tree) = host_tree(&option.args[0]) else {
            continue;
        };
        for ((link, _), shown) in HOST_LINKS.iter().zip(&mut shown) {
            if let Some(inside) = rest_below(link, &tree).filter(|rest| !rest.is_empty()) {
                shown.push(normalize_path(&format!("{dest}/{inside}")));
            }
        }
    }
    places
}

fn mount_destination(options: &[BwrapOption], i: usize) -> Option<String> {
    let option = &options[i];
    let dest = match option.name {
        "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--ro-bind"
        | "--ro-bind-try" | "--bind-fd" | "--ro-bind-fd" | "--bind-data" | "--ro-bind-data" => {
            &option.args[1]
        }
        "--overlay" => &option.args[2],
        "--tmp-overlay" | "--ro-overlay" | "--proc" | "--dev" | "--tmpfs" | "--mqueue" => {
            &option.args[0]
        }
        _ => return None,
    };
    sandbox_path(dest)
}

/// A destination as bubblewrap reaches it under the new root, normalised; `None` for one with
/// `..` (bubblewrap prefixes `/newroot/`, so `..` can leave the new root).
fn sandbox_path(dest: &str) -> Option<String> {
    if dest.split('/').any(|part| part == "..") {
        return None;
    }
    Some(normalize_path(&format!("/{dest}")))
}

/// Host paths that are mounts of their own on most Linux hosts (a lone `*` is any one name).
/// bubblewrap binds recursively, so a bind of a tree above one brings that mount along, and
/// `--remount-ro` of the bind leaves it writable (see `left_writable_by_remount`).
const HOST_MOUNT_POINTS: &[&str] = &[
    // Kernel interfaces and device trees.
    "/proc",
    "/sys",
    "/dev",
    "/dev/shm",
    "/dev/pts",
    "/dev/mqueue",
    // tmpfs mounts of a systemd host: state and sockets, each user's runtime directory, and
    // (Fedora, Arch, Debian 13) /tmp.
    "/run",
    "/run/lock",
    "/run/user/*",
    "/tmp",
    // Partitions of their own in many installs.
    "/boot",
    "/boot/efi",
    "/home",
];

/// The HOST_MOUNT_POINTS strictly below the host tree a mount source names (all of them for
/// a source this audit cannot know): `--remount-ro` of its bind makes only the bind's top
/// mount read-only (`man bwrap`: "without changing any other mount point under the specified
/// path"), so these stay as writable as they are on the host.
fn left_writable_by_remount(source: &str) -> Vec<&'static str> {
    let tree = match host_path(source) {
        HostPath::Known(path) => path,
        HostPath::InHome(_) => return Vec::new(),
        HostPath::Unknown(_) => "/".to_string(),
    };
    let tree_parts = path_parts(&tree);
    HOST_MOUNT_POINTS
        .iter()
        .copied()
        .filter(|mount| {
            let mount_parts = path_parts(mount);
            mount_parts.len() > tree_parts.len() && parts_match(&tree_parts, &mount_parts)
        })
        .collect()
}

/// A finding about what one mount option hands the sandbox, and the sandbox paths where that
/// lands (`None`: a place this audit cannot name).
struct Exposure {
    /// The option whose mount puts it there (see `placing_mount`).
    option: usize,
    /// The host source as written.
    source: String,
    lands_at: Vec<Option<String>>,
    finding: Finding,
}

impl Exposure {
    /// True when every place it lands is hidden by a later mount on the same path or a
    /// directory above it: bubblewrap mounts in argument order. A `-try` bind mounts nothing
    /// when its source is missing, so it hides nothing for certain; any other mount that
    /// fails ends bubblewrap before the command runs.
    fn hidden_by_later_mount(&self, options: &[BwrapOption], places: &[Option<String>]) -> bool {
        let later_mounts: Vec<&str> = (self.option + 1..options.len())
            .filter(|&j| !options[j].name.ends_with("-try"))
            .filter_map(|j| places[j].as_deref())
            .collect();
        self.lands_at.iter().all(|path| {
            path.as_ref()
                .is_some_and(|path| later_mounts.iter().any(|dest| is_at_or_below(path, dest)))
        })
    }

    /// The `--remount-ro` that makes this exposure's mount read-only, if one does: a later one
    /// on its destination, with no other mount on that destination between them (bubblewrap
    /// remounts the top mount there, and fails when the destination is no mount point).
    fn remounted_read_only_by<'o>(
        &self,
        options: &'o [BwrapOption],
    ) -> Option<&'o BwrapOption<'o>> {
        let dest = mount_destination(options, self.option)?;
        options[self.option + 1..]
            .iter()
            .enumerate()
            .map(|(k, option)| (self.option + 1 + k, option))
            .take_while(|&(j, _)| mount_destination(options, j).as_ref() != Some(&dest))
            .map(|(_, option)| option)
            .find(|option| {
                option.name == "--remount-ro"
                    && sandbox_path(&option.args[0]).as_ref() == Some(&dest)
            })
    }
}

/// A writable-mount finding after any `--remount-ro` of its mount: gone when the remount
/// leaves nothing of the host writable, kept and told what stays writable when the host's
/// own mounts below the source do. `None` when the finding is gone.
fn after_remount_ro(exposure: Exposure, options: &[BwrapOption]) -> Option<Exposure> {
    if !matches!(
        exposure.finding.rule,
        "writable-home-or-root" | "host-mount-rw"
    ) {
        return Some(exposure);
    }
    let Some(remount) = exposure.remounted_read_only_by(options) else {
        return Some(exposure);
    };
    let below = left_writable_by_remount(&exposure.source);
    if below.is_empty() {
        return None;
    }
    let mut kept = exposure;
    kept.finding.message = format!(
        "{}; {} makes only its top mount read-only: the host's mounts below it ({} on most \
         hosts) stay writable",
        kept.finding.message,
        remount.raw(),
        below.join(", ")
    );
    Some(kept)
}

/// Hands `expose` a finding of `rule` about `option`, seen at the paths `inside` its mount,
/// when there are any (its message is written when the line's findings are joined).
fn expose_inside(
    expose: &mut impl FnMut(Audit, &[String]),
    option: &BwrapOption,
    rule: &'static str,
    inside: &[String],
) {
    if !inside.is_empty() {
        let mut found = Audit::default();
        found.finding(rule, "", option.raw());
        expose(found, inside);
    }
}

/// Where the host's proc lies inside the host tree a mount source names, relative to it: a
/// source above `/proc` (`/`, or a path this audit cannot follow, taken to be `/`) holds it
/// at `proc`; `/proc` itself, or one process's directory in it (`/proc/1`, `/proc/self`:
/// bubblewrap's own), is it. Empty for any other source, `/proc/cpuinfo` or `/proc/sys`
/// included: they show the machine, not its processes.
fn host_proc_in(source: &str) -> Vec<String> {
    let Some(tree) = held_tree(source) else {
        return Vec::new();
    };
    if let Some(rest) = rest_below("/proc", &tree) {
        return vec![rest.to_string()];
    }
    let process = |name: &str| {
        name == "self" || name == "thread-self" || name.bytes().all(|b| b.is_ascii_digit())
    };
    match tree.split('/').skip(1).collect::<Vec<&str>>().as_slice() {
        ["proc", name, ..] if process(name) => vec![String::new()],
        _ => Vec::new(),
    }
}

/// Parts of a variable name that mark it a credential, found anywhere in the upper-cased name
/// (`PGPASSWORD`, `AWS_SECRET_ACCESS_KEY`, `OPENAI_API_KEY`).
const CREDENTIAL_NAME_PARTS: &[&str] = &[
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "ACCESSTOKEN",
    // npm's `_authToken` (NPM_CONFIG__AUTHTOKEN), ngrok's.
    "AUTHTOKEN",
];

/// Runs of whole words (split at `_`) that mark a name a credential wherever they stand:
/// `AWS_ACCESS_KEY_ID`, `RAILS_MASTER_KEY`, but not `ACCESS_KEYPAD` or `SSH_KEYSCAN_HOSTS`.
const CREDENTIAL_NAME_RUNS: &[&[&str]] = &[
    &["ACCESS", "KEY"],
    &["MASTER", "KEY"],
    &["STORAGE", "KEY"],
    &["DEPLOY", "KEY"],
    &["SSH", "KEY"],
    &["CONNECTION", "STRING"],
    // GitLab's registry login (docker's config.json, whole).
    &["AUTH", "CONFIG"],
    // The Bitwarden CLI's unlocked vault, and Vercel's and Terraform Cloud's logins.
    &["BW", "SESSION"],
    &["BASIC", "AUTH"],
    &["VERCEL", "TOKEN"],
];

/// Words that mark a name a credential as its last word only (a version after it aside,
/// `CI_JOB_JWT_V2`): `DB_PASS`, `MYSQL_PWD`, `CI_JOB_JWT`, `AWS_CREDS`, `PGPASS`, `SENTRY_DSN`,
/// `OPENAI_KEY`, but not `PASS_THROUGH`, `JWT_ISSUER` or `PWD` alone (the working directory).
const CREDENTIAL_NAME_LAST_WORDS: &[&str] = &[
    "PASS",
    "PGPASS",
    "PWD",
    "CREDS",
    "JWT",
    "DSN",
    "KEY",
    "AUTHORIZATION",
];

/// Of those, the ones that are a credential's name alone too (`JWT`, `CREDS`, an HTTP
/// header's `AUTHORIZATION`; not `PWD`, the working directory, nor `PASS`, `KEY`). `AUTH` is
/// none, alone or last (`SMTP_AUTH=login`, `PROXY_AUTH=basic`: the sign-off review), but
/// npm's `_auth` setting is (NPM_CONFIG__AUTH, base64 of user:password), and `BASIC_AUTH`.
const CREDENTIAL_NAMES_ALONE: &[&str] = &["JWT", "CREDS", "AUTHORIZATION"];

/// Words before a last `KEY` that make it no credential: a database's or a cache's key.
const KEYS_THAT_ARE_NO_SECRET: &[&str] = &[
    "SORT",
    "CACHE",
    "PRIMARY",
    "PARTITION",
    "FOREIGN",
    "ROUTING",
    "SHARD",
    "LOOKUP",
    "PUBLIC",
    "IDEMPOTENCY",
    "GROUP",
    "HOT",
    "MAP",
];

/// Words of a variable name (split at `_`, and where camelCase turns upper) that mark it a
/// credential: whole words only, so `GITHUB_TOKEN`, `githubToken` and `GH_PAT` count and
/// `TOKENIZERS_PARALLELISM`, `PATH` and a model's token counts (`MAX_TOKENS`, `OUTPUT_TOKENS`)
/// do not.
const CREDENTIAL_NAME_WORDS: &[&str] = &["TOKEN", "PAT", "WEBHOOK"];

/// Last words of a name that is about a credential, not one: where it is (`SECRET_PATH`,
/// `PASSWORD_FILE`, docker's `_FILE` convention, `TOKEN_URL`), what it is called
/// (`SECRET_NAME`, `SECRET_ARN`), or how it is made or used (`TOKEN_TTL`,
/// `PASSWORD_MIN_LENGTH`, `TOKEN_LIMIT`, `SSH_KEY_TYPE`, `SECRETS_BACKEND`). Not `ID`
/// (Vault's `SECRET_ID` logs in) nor `KEY`; and a webhook's URL is its secret.
const NAMES_ABOUT_A_CREDENTIAL: &[&str] = &[
    "NAME",
    "NAMES",
    "ARN",
    "PATH",
    "FILE",
    "DIR",
    "REF",
    "VERSION",
    "REGION",
    "URL",
    "TTL",
    "LENGTH",
    "LIMIT",
    "COUNT",
    "BUDGET",
    "AUDIENCE",
    "ISSUER",
    "PERMISSIONS",
    "TYPE",
    "BACKEND",
    "PROVIDER",
    "EXPIRY",
    "LIFETIME",
];

/// Well-known credential formats: a value that starts with the prefix, is at least this long,
/// and holds nothing but letters, digits, `_` and `-`.
const CREDENTIAL_VALUE_PREFIXES: &[(&str, usize)] = &[
    // GitHub: personal (classic), OAuth, user-to-server, server-to-server, refresh tokens
    // (prefix and 36 characters), and fine-grained personal tokens.
    ("ghp_", 40),
    ("gho_", 40),
    ("ghu_", 40),
    ("ghs_", 40),
    ("ghr_", 40),
    ("github_pat_", 40),
    // GitLab personal access token (prefix and 20 characters).
    ("glpat-", 26),
    // Slack bot, user, app and refresh tokens.
    ("xoxb-", 20),
    ("xoxp-", 20),
    ("xoxa-", 20),
    ("xoxr-", 20),
    // OpenAI and Anthropic (`sk-ant-`) secret keys.
    ("sk-", 40),
    // Google API key (prefix and 35 characters).
    ("AIza", 39),
    // npm access token (prefix and 36 characters).
    ("npm_", 40),
    // PyPI API token (a macaroon, well over 100 characters).
    ("pypi-", 60),
    // Hugging Face access token (prefix and 34 characters).
    ("hf_", 37),
    // AWS access key ids, long-lived and temporary (prefix and 16 characters); Stripe's
    // live secret and restricted keys.
    ("AKIA", 20),
    ("ASIA", 20),
    ("sk_live_", 30),
    ("rk_live_", 30),
    // The security-team review's: DigitalOcean personal tokens, GitLab runner, deploy and
    // trigger tokens, Atlassian API tokens.
    ("dop_v1_", 64),
    ("glrt-", 25),
    ("gldt-", 25),
    ("glptt-", 26),
    ("ATATT", 60),
];

/// The values a switch is set to, as configuration libraries read them.
const SWITCH_VALUES: &[&str] = &[
    "0", "1", "true", "false", "yes", "no", "y", "n", "on", "off", "none", "enabled", "disabled",
];

/// Why a `--setenv NAME VALUE` looks like a credential (`"name"` or `"value"`), if it does:
/// a credential's name, a well-known token format or a JSON Web Token anywhere in the value
/// (`Bearer ghp_...`, `https://ghp_...@github.com/o/r`, a token with a space after it), a PEM
/// private key, or a URL with a password (`postgres://user:pw@host`).
fn credential_in(name: &str, value: &str) -> Option<&'static str> {
    // camelCase's words as `_`'s: `githubToken` is GITHUB_TOKEN.
    let mut upper = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if prev_lower && c.is_ascii_uppercase() {
            upper.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        upper.push(c.to_ascii_uppercase());
    }
    let all: Vec<&str> = upper.split('_').filter(|w| !w.is_empty()).collect();
    // A version after the name's words (`CI_JOB_JWT_V2`) is no word of its own.
    let is_version =
        |w: &str| w.len() > 1 && w.starts_with('V') && w[1..].bytes().all(|b| b.is_ascii_digit());
    let words = match all.split_last() {
        Some((last, rest)) if is_version(last) && !rest.is_empty() => rest,
        _ => &all[..],
    };
    let last = words.last().copied().unwrap_or("");
    let before_last = words.len().checked_sub(2).map_or("", |i| words[i]);
    let about_a_credential = words.len() > 1 && NAMES_ABOUT_A_CREDENTIAL.contains(&last);
    let last_word = words.len() > 1
        && CREDENTIAL_NAME_LAST_WORDS.contains(&last)
        && !(last == "KEY" && KEYS_THAT_ARE_NO_SECRET.contains(&before_last));
    let by_name = CREDENTIAL_NAME_PARTS
        .iter()
        .any(|part| upper.contains(part))
        || words
            .iter()
            .any(|word| CREDENTIAL_NAME_WORDS.contains(word))
        || CREDENTIAL_NAME_RUNS
            .iter()
            .any(|run| words.windows(run.len()).any(|w| w == *run))
        || last_word
        || (words.len() == 1 && CREDENTIAL_NAMES_ALONE.contains(&last))
        || upper.ends_with("__AUTH")
        || upper == "PGPASS";
    let webhook = words.contains(&"WEBHOOK");
    // A switch's value (`HF_HUB_DISABLE_TOKEN=1`, `PASSWORD_AUTH=false`) is no credential,
    // whatever the name says. An empty one may be a forward's: the name is all there is.
    let switch = SWITCH_VALUES.iter().any(|w| value.eq_ignore_ascii_case(w));
    if by_name && !switch && (!about_a_credential || webhook) {
        return Some("name");
    }
    // The value's words: runs of the characters a token is made of (a JWT's also `.` and `=`).
    let words = |more: &'static [u8]| {
        value.split(move |c: char| {
            !(c.is_ascii_alphanumeric()
                || c == '_'
                || c == '-'
                || (c.is_ascii() && more.contains(&(c as u8))))
        })
    };
    let known_format = words(b"").any(|word| {
        CREDENTIAL_VALUE_PREFIXES
            .iter()
            .any(|(prefix, len)| word.starts_with(prefix) && word.len() >= *len)
    });
    let private_key = value.contains("-----BEGIN") && value.contains("PRIVATE KEY");
    // An HTTP authorization's scheme and its token (`Bearer abc123...`, `Basic dXNlcjpw...`,
    // alone or in a header): a token is made of base64's and a JWT's characters and has a
    // digit, `+`, `/`, `=` or a capital past its first letter, where a word of prose (`Basic
    // usage`, `basic read-only access`) has none.
    let http_auth = value
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| {
            (w[0].eq_ignore_ascii_case("bearer") || w[0].eq_ignore_ascii_case("basic"))
                && w[1].len() >= 8
                && w[1]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+/=-._~".contains(c))
                && w[1].char_indices().any(|(i, c)| {
                    c.is_ascii_digit() || "+/=".contains(c) || (i > 0 && c.is_ascii_uppercase())
                })
        });
    let jwt = words(b".=")
        .any(|word| word.starts_with("eyJ") && word.split('.').count() == 3 && word.len() >= 30);
    let url_password = value.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    });
    (known_format || private_key || jwt || url_password || http_auth).then_some("value")
}

/// As [`credential_in`], for a value as a line is written, before the shell that runs it
/// expands it: one that expands a variable named like a credential (`--setenv TOKEN
/// "$GITHUB_TOKEN"`, `--env "X=${AWS_SECRET_ACCESS_KEY}"`) hands the sandbox the host's
/// credential.
fn credential_in_line(name: &str, value: &str) -> Option<&'static str> {
    credential_in(name, value)
        .or_else(|| {
            expansions(value)
                .any(|var| credential_in(var, "") == Some("name"))
                .then_some("value, a shell variable named like one")
        })
        .or_else(|| {
            substitutes_a_secret(value).then_some("value, a CI system's secret substituted in")
        })
}

/// The parameters a shell would expand in `value` as written, each by what follows the `$`
/// (and a `{`): a name (`$NAME`, `${NAME:-x}`: `NAME`), or a special one's character (`$1`,
/// `$@`, `$$`). A `$` before anything else (`'$ '`) expands nothing.
fn expansions(value: &str) -> impl Iterator<Item = &str> {
    value.split('$').skip(1).filter_map(|after| {
        let after = after.strip_prefix('{').unwrap_or(after);
        let name = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let special = after.chars().next().is_some_and(|c| "@*#?$!-".contains(c));
        match (name, special) {
            (0, false) => None,
            (0, true) => Some(&after[..1]),
            (n, _) => Some(&after[..n]),
        }
    })
}

/// Whether `value` as written is filled in from outside the line: a parameter a shell would
/// expand (`$NAME`, `${NAME}`, `$1`, `$@`), a command's output (`$(cat /run/secrets/x)`,
/// backquotes), or a CI system's substitution made before any shell runs (GitHub Actions'
/// `${{ secrets.NPM_TOKEN }}`, Azure Pipelines' `$(System.AccessToken)`). A value set on a
/// line that way is a forward of what the host holds.
fn expands_a_variable(value: &str) -> bool {
    expansions(value).next().is_some() || substitutes(value)
}

/// Whether `value` holds a command substitution (or Azure Pipelines' macro, written alike),
/// or a CI system's substitution of a secret (`${{ github.sha }}` is none: the sign-off
/// review).
fn substitutes(value: &str) -> bool {
    value.contains("$(") || value.contains('`') || substitutes_a_secret(value)
}

/// Whether `value` names a CI system's secret: GitHub Actions' `${{ secrets.NAME }}` (and
/// Gitea's and Forgejo's, which read it alike), or a substitution of a variable named like a
/// credential (`$(System.AccessToken)`, `${{ env.NPM_TOKEN }}`).
fn substitutes_a_secret(value: &str) -> bool {
    let inner = value
        .split("${{")
        .skip(1)
        .chain(value.split("$(").skip(1))
        .map(|after| after.split(['}', ')']).next().unwrap_or(""));
    inner.into_iter().any(|words| {
        words
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .any(|w| {
                w.starts_with("secrets.")
                    || w.rsplit('.').next().is_some_and(|last| {
                        !last.is_empty() && credential_in(last, "") == Some("name")
                    })
            })
    })
}

/// CAP_SYS_ADMIN's number (`linux/capability.h`).
const CAP_SYS_ADMIN: u64 = 21;

/// True when a `--cap-add` argument gives CAP_SYS_ADMIN: `ALL` (any case), or the capability
/// libcap's `cap_from_name`, which bubblewrap calls, reads it as. That reads a leading number
/// as C's `strtoul` with base 0 does (`21`, `0x15`, `025`; `021` is 17) and a name without
/// regard to case, each only up to the first character that cannot continue it, so `21x`,
/// `cap_sys_admin+ep` and `CAP_SYS_ADMIN,CAP_NET_RAW` all add CAP_SYS_ADMIN (bubblewrap 0.8).
fn adds_sys_admin(cap: &str) -> bool {
    if cap.eq_ignore_ascii_case("ALL") {
        return true;
    }
    if cap.starts_with(|c: char| c.is_ascii_digit()) {
        let (digits, radix) = match cap.strip_prefix("0x").or_else(|| cap.strip_prefix("0X")) {
            Some(hex) => (hex, 16),
            None if cap.starts_with('0') => (cap, 8),
            None => (cap, 10),
        };
        let mut value: u64 = 0;
        for digit in digits.chars().map_while(|c| c.to_digit(radix)) {
            match value
                .checked_mul(u64::from(radix))
                .and_then(|v| v.checked_add(u64::from(digit)))
            {
                Some(v) => value = v,
                None => return false,
            }
        }
        return value == CAP_SYS_ADMIN;
    }
    let name: String = cap
        .chars()
        .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
        .collect();
    name.eq_ignore_ascii_case("CAP_SYS_ADMIN")
}

/// The path a setup operation that writes the filesystem creates or changes: `--file`'s
/// content, `--chmod`'s mode, a `--dir` or a `--symlink` (bubblewrap 0.8 follows symlinks on
/// the way, and for `--file` and `--chmod` at the end too: a probe's `--chmod` and `--file`
/// through a link to `/oldroot/...` changed the host file, `--dir` and `--symlink` made theirs
/// in the host directory a link above them led to).
fn setup_destination<'a>(option: &'a BwrapOption) -> Option<&'a str> {
    match option.name {
        "--file" | "--chmod" | "--symlink" => Some(&option.args[1]),
        "--dir" => Some(&option.args[0]),
        _ => None,
    }
}

/// The writable host bind that setup option `i` writes inside, if any: the last mount made
/// before it on a directory above its destination, when that is a writable bind of a host
/// tree (`--bind`, `--dev-bind`, their `-try`, `--bind-fd`, an `--overlay`'s upper layer),
/// whose content a task of an earlier run may have changed. A `-try` mount may be skipped,
/// so the search goes on below one.
fn writable_bind_holding<'o>(
    options: &'o [BwrapOption<'o>],
    i: usize,
) -> Option<&'o BwrapOption<'o>> {
    let dest = sandbox_path(setup_destination(&options[i])?)?;
    for option in options[..i].iter().rev() {
        let Some(at) = sandbox_path_of_mount(option) else {
            continue;
        };
        if !is_at_or_below(&dest, &at) {
            continue;
        }
        let writable = matches!(
            option.name,
            "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--bind-fd" | "--overlay"
        );
        // `--dir` and `--symlink` do not follow a link at the end of the path: one above it
        // must lie inside the bind.
        let follows_last = matches!(options[i].name, "--file" | "--chmod");
        let inside = rest_below(&dest, &at).unwrap_or("");
        if writable && ((follows_last && !inside.is_empty()) || inside.contains('/')) {
            return Some(option);
        }
        if !option.name.ends_with("-try") {
            return None;
        }
    }
    None
}

/// The options that hand the sandbox a host tree to write: a writable bind, or an overlay's
/// upper layer.
fn is_writable_host_mount(option: &BwrapOption) -> bool {
    matches!(
        option.name,
        "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--overlay"
    )
}

/// A writable mount whose host source lies inside another writable mount's source: a task
/// that leaves a symlink on that path (in an earlier run, or while another runs) makes
/// bubblewrap, which resolves a source on the host, mount whatever host path the link names
/// there instead, `/` included (a probe's bind of a link a first run left bound its target
/// writable). Both sources must be spelt alike (absolute, or in the home) to be compared.
/// Not reported: an outer source that is `/` or a home (`writable-home-or-root` says more),
/// an outer mount a later `--remount-ro` of its destination makes read-only, and an inner
/// one whose path from the outer source is pinned: a mount made after the outer one (the
/// inner one itself, or one above it such as `--ro-bind proj/.git` above `proj/.git/hooks`)
/// sits where the outer shows the first name of that path (a mount point cannot be removed or
/// renamed where it is mounted; a `-try` one pins nothing where its source is missing, and a
/// task can put a link there). What lies below a pinning mount is that mount's to guard: a
/// read-only bind or a tmpfs keeps it, a writable bind is judged as an outer mount of its
/// own.
fn report_source_in_writable_bind(options: &[BwrapOption], audit: &mut Audit) {
    let tree = |option: &BwrapOption| match host_path(&option.args[0]) {
        HostPath::Known(path) => Some(path),
        HostPath::InHome(below) => Some(format!("~{below}")),
        HostPath::Unknown(_) => None,
    };
    // A read-only mount of any host path shows nothing new where the line binds all of `/`.
    let binds_root = options.iter().any(|option| {
        matches!(option.name, "--bind" | "--ro-bind" | "--dev-bind")
            && tree(option).as_deref() == Some("/")
    });
    let mounts: Vec<(usize, &BwrapOption, String)> = options
        .iter()
        .enumerate()
        .filter(|(_, option)| {
            is_writable_host_mount(option)
                || (!binds_root && matches!(option.name, "--ro-bind" | "--ro-bind-try"))
        })
        .filter_map(|(i, option)| Some((i, option, tree(option)?)))
        .collect();
    let writable: Vec<&(usize, &BwrapOption, String)> = mounts
        .iter()
        .filter(|(_, option, _)| is_writable_host_mount(option))
        .collect();
    let remounted = |i: usize| {
        let dest = mount_destination(options, i);
        options[i + 1..].iter().any(|option| {
            option.name == "--remount-ro" && dest.is_some() && sandbox_path(&option.args[0]) == dest
        })
    };
    // A mount made after the writable mount `j` (of host `outer_tree`) sits where `j` shows
    // the host path one name below `outer_tree` on the way to `inner_tree`.
    let pinned = |j: usize, outer_tree: &str, inner_tree: &str| {
        let first = rest_below(inner_tree, outer_tree).and_then(|r| r.split('/').next());
        let shown_at = mount_destination(options, j)
            .zip(first.filter(|f| !f.is_empty()))
            .map(|(dest, first)| normalize_path(&format!("{dest}/{first}")));
        shown_at.is_some()
            && (j + 1..options.len()).any(|m| {
                !options[m].name.ends_with("-try") && mount_destination(options, m) == shown_at
            })
    };
    for (_, inner, inner_tree) in &mounts {
        let outer = writable.iter().find(|(j, outer, outer_tree)| {
            rest_below(inner_tree, outer_tree).is_some_and(|r| !r.is_empty())
                && home_or_root(&outer.args[0]).is_none()
                && !remounted(*j)
                && !pinned(*j, outer_tree, inner_tree)
        });
        if let Some((_, outer, _)) = outer {
            let how = if is_writable_host_mount(inner) {
                "writable"
            } else {
                "read-only"
            };
            audit.finding(
                "source-in-writable-bind",
                format!(
                    "mounts {} {how}, a path inside {}, which {} makes writable: a task \
                     that leaves a symlink there (in an earlier run) makes bubblewrap mount \
                     the host path it names instead, / included",
                    inner.args[0],
                    outer.args[0],
                    outer.raw()
                ),
                inner.raw(),
            );
        }
    }
}

/// Where a mount option mounts, normalised (see `mount_destination`).
fn sandbox_path_of_mount(option: &BwrapOption) -> Option<String> {
    mount_destination(std::slice::from_ref(option), 0)
}

/// Audits a bubblewrap argument vector. `argv` may start with `bwrap` or a path ending in
/// `/bwrap`. Errors on an unknown option, a missing option argument, or no command.
///
/// bwrap shares every namespace but the mount namespace unless told otherwise;
/// `--unshare-all` unshares them all, and a later `--share-net` shares the network again.
pub fn audit_bwrap(argv: &[String]) -> Result<Audit, String> {
    let (argv, sudo_root) = after_sudo(argv)?;
    let args = match argv.first() {
        Some(first) if is_program(first, "bwrap") => &argv[1..],
        Some(first) if !first.starts_with('-') => {
            return Err(format!(
                "not a bwrap command line: it starts with {}",
                first_words(argv, 1)
            ));
        }
        _ => argv,
    };
    let options = parse_bwrap(args)?;
    let named_sockets: Vec<(String, &str)> = sockets_named_by(&options);
    let named_sockets: Vec<(&str, &str)> = named_sockets
        .iter()
        .map(|(path, what)| (path.as_str(), *what))
        .collect();
    let line_sockets: Vec<(&str, &str)> = HOST_SOCKETS
        .iter()
        .copied()
        .chain(named_sockets.iter().copied())
        .collect();

    let mut network_unshared = false;
    let mut user_namespace = false;
    let mut joins_user_namespace = false;
    let mut pid_namespace = false;
    let mut ipc_namespace = false;
    let mut cgroup_namespace = false;
    let mut env_cleared = false;
    let mut new_session = false;
    let mut seccomp = Vec::new();
    let mut dies_with_parent = false;
    let mut exposures: Vec<Exposure> = Vec::new();
    // bubblewrap run by root starts from root's effective capabilities and applies
    // --cap-add/--cap-drop in argument order: a later `--cap-drop ALL` clears the set,
    // adds made before it included (bubblewrap.c, `parse_args`; `man bwrap`, --cap-drop).
    let mut root_caps_kept = true;
    let mut caps: Vec<&BwrapOption> = Vec::new();
    let mut hidden_args = Vec::new();
    // `--setenv`s of credentials: (name, why, still set in the sandbox's environment).
    // bubblewrap applies --setenv, --unsetenv and --clearenv in argument order.
    let mut credentials: Vec<(&str, &str, bool)> = Vec::new();
    // Setup operations that write where a task of an earlier run may have left a symlink.
    let mut setup_in_binds = Audit::default();
    let places = sandbox_places(&options);

    for (i, option) in options.iter().enumerate() {
        if let Some(bind) = writable_bind_holding(&options, i) {
            let dest = setup_destination(option).unwrap_or_default();
            setup_in_binds.finding(
                "setup-in-writable-bind",
                format!(
                    "{} writes at {dest}, inside a writable host bind ({}): bubblewrap \
                     follows a symlink a task left on that path in an earlier run out of the \
                     bind to any host path (through /oldroot), and writes there as its caller \
                     (as root when root runs it)",
                    option.name,
                    bind.raw()
                ),
                option.raw(),
            );
        }
        // What this option hands the sandbox, seen at the paths `inside` the mount where it
        // lands (`""`: the whole mount).
        let placed_by = placing_mount(&options, i);
        let dest = placed_by.and_then(|j| places[j].clone());
        let mut expose = |found: Audit, inside: &[String]| {
            let lands_at: Vec<Option<String>> = inside
                .iter()
                .map(|part| {
                    dest.as_ref()
                        .map(|d| normalize_path(&format!("{d}/{part}")))
                })
                .collect();
            exposures.extend(found.findings.into_iter().map(|finding| Exposure {
                option: placed_by.unwrap_or(i),
                source: option.args.first().cloned().unwrap_or_default(),
                lands_at: lands_at.clone(),
                finding,
            }))
        };
        let whole = [String::new()];
        match option.name {
            "--unshare-all" => {
                network_unshared = true;
                user_namespace = true;
                pid_namespace = true;
                ipc_namespace = true;
                cgroup_namespace = true;
            }
            "--unshare-net" => network_unshared = true,
            "--unshare-ipc" => ipc_namespace = true,
            // `-try` is skipped only on a kernel without cgroup namespaces (before 4.6).
            "--unshare-cgroup" | "--unshare-cgroup-try" => cgroup_namespace = true,
            "--share-net" => network_unshared = false,
            "--unshare-user" | "--unshare-user-try" => user_namespace = true,
            "--unshare-pid" => pid_namespace = true,
            "--userns" | "--userns2" => {
                user_namespace = true;
                joins_user_namespace = true;
                hidden_args.push(option);
            }
            "--pidns" => {
                pid_namespace = true;
                hidden_args.push(option);
            }
            "--bind-fd" | "--ro-bind-fd" | "--file" | "--bind-data" | "--ro-bind-data" => {
                hidden_args.push(option)
            }
            "--clearenv" => {
                env_cleared = true;
                credentials.iter_mut().for_each(|c| c.2 = false);
            }
            "--setenv" | "--unsetenv" => {
                let name = option.args[0].as_str();
                credentials
                    .iter_mut()
                    .filter(|c| c.0 == name)
                    .for_each(|c| c.2 = false);
                if let [_, value] = option.args
                    && let Some(why) = credential_in_line(name, value)
                {
                    credentials.push((name, why, true));
                }
            }
            "--new-session" => new_session = true,
            "--seccomp" | "--add-seccomp-fd" => {
                seccomp.push(option.raw());
                hidden_args.push(option);
            }
            "--die-with-parent" => dies_with_parent = true,
            // A host tree in the sandbox: bound, the lower layer of an overlay, or the upper
            // one, where writes through an overlay land on the host.
            "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" | "--ro-bind"
            | "--ro-bind-try" | "--overlay-src" | "--overlay" => {
                let source = &option.args[0];
                let read_only =
                    matches!(option.name, "--ro-bind" | "--ro-bind-try" | "--overlay-src");
                let overlay = option.name.contains("overlay");
                let mut found = Audit::default();
                if !read_only && let Some(why) = home_or_root(source) {
                    let verb = if overlay { "overlays" } else { "binds" };
                    found.finding(
                        "writable-home-or-root",
                        format!("{verb} {source} writable{why}"),
                        option.raw(),
                    );
                }
                let mount = HostMount {
                    source: source.clone(),
                    read_only,
                    writable_below: false,
                };
                check_writable_host_mount(
                    &mount,
                    &option.raw(),
                    WritableLeak::Sensitive,
                    &mut found,
                );
                // The host's /dev, or `/` with it.
                if option.name.starts_with("--dev-bind")
                    && matches!(host_path(source), HostPath::Known(p) if p == "/dev" || p == "/")
                {
                    found.finding(
                        "dev-bind-dev",
                        "binds the host's /dev with device access",
                        option.raw(),
                    );
                }
                if option.name.starts_with("--dev-bind")
                    && let Some(what) = host_device(source)
                {
                    found.finding(
                        "host-device",
                        format!("binds host device {source} ({what}) with device access"),
                        option.raw(),
                    );
                }
                expose(found, &whole);
                expose_inside(
                    &mut expose,
                    option,
                    "docker-socket",
                    &docker_sockets_in(source),
                );
                // What it is rides in the message until the line's findings are joined.
                let landing_at_named = named_sockets.iter().filter_map(|&(path, what)| {
                    let inside = rest_below(path, dest.as_deref()?)?;
                    Some((what, vec![inside.to_string()]))
                });
                let sockets = host_sockets_in(source, &line_sockets)
                    .into_iter()
                    .chain(landing_at_named.collect::<Vec<_>>())
                    .map(|(what, inside)| ("host-socket", what, inside));
                let credentials = credentials_in(source)
                    .into_iter()
                    .map(|(what, inside)| ("host-credentials", what, inside));
                for (rule, what, inside) in sockets.chain(credentials) {
                    let mut found = Audit::default();
                    found.finding(rule, what, option.raw());
                    expose(found, &inside);
                }
                // An overlay shows one filesystem, without the mounts below its sources.
                if !overlay {
                    expose_inside(&mut expose, option, "host-proc", &host_proc_in(source));
                }
            }
            "--cap-add" => caps.push(option),
            "--cap-drop" if option.args[0].eq_ignore_ascii_case("ALL") => {
                root_caps_kept = false;
                caps.clear();
            }
            "--cap-drop" => caps.retain(|add| !add.args[0].eq_ignore_ascii_case(&option.args[0])),
            "--args" => hidden_args.push(option),
            _ => {}
        }
    }

    // A task that holds CAP_SYS_ADMIN can unmount a later mount and reach what it hides.
    let can_unmount = root_caps_kept || caps.iter().any(|add| adds_sys_admin(&add.args[0]));
    // Such a task also remounts a read-only mount writable again.
    let exposed: Vec<Exposure> = exposures
        .into_iter()
        .filter(|e| can_unmount || !e.hidden_by_later_mount(&options, &places))
        .filter_map(|e| {
            if can_unmount {
                Some(e)
            } else {
                after_remount_ro(e, &options)
            }
        })
        .collect();
    let exposed_as = |rules: &[&str]| {
        exposed
            .iter()
            .filter(|e| rules.contains(&e.finding.rule))
            .map(|e| e.finding.clone())
            .collect::<Vec<Finding>>()
    };
    // What the options of one rule open together: `(source, raw)` each.
    let opened_by = |rule: &str| {
        exposed
            .iter()
            .filter(|e| e.finding.rule == rule)
            .map(|e| (e.source.clone(), e.finding.arg.clone()))
            .collect::<Vec<(String, String)>>()
    };

    let mut audit = Audit::default();
    if !network_unshared {
        audit.finding("network-shared", "network is shared with the host", "");
    }
    audit
        .findings
        .extend(exposed_as(&["writable-home-or-root"]));
    audit.findings.extend(exposed_as(&["host-mount-rw"]));
    audit.findings.extend(setup_in_binds.findings);
    report_source_in_writable_bind(&options, &mut audit);
    report_docker_socket(&opened_by("docker-socket"), &mut audit);
    // What the exposed mounts of one rule hold together: the messages, until here.
    let held = |rule: &str| {
        distinct(
            exposed
                .iter()
                .filter(|e| e.finding.rule == rule)
                .map(|e| e.finding.message.as_str()),
        )
    };
    report_host_socket(&opened_by("host-socket"), &held("host-socket"), &mut audit);
    report_host_proc(&opened_by("host-proc"), &mut audit);
    report_host_credentials(
        &opened_by("host-credentials"),
        &held("host-credentials"),
        &mut audit,
    );
    if !env_cleared {
        audit.finding(
            "env-not-cleared",
            "host environment is not cleared (no --clearenv)",
            "",
        );
    }
    // The value is never printed: the report may end up in a log.
    let mut named: Vec<&str> = Vec::new();
    for &(name, why, _) in &credentials {
        if named.contains(&name) {
            continue;
        }
        named.push(name);
        let in_sandbox = credentials.iter().any(|c| c.0 == name && c.2);
        let message = if in_sandbox {
            format!(
                "sets {name}, a credential by its {why}, in the sandbox; the value is also on \
                 bwrap's command line, which host processes can read (/proc/PID/cmdline)"
            )
        } else {
            format!(
                "puts {name}, a credential by its {why}, on bwrap's command line, which host \
                 processes can read (/proc/PID/cmdline); a later option takes it out of the \
                 sandbox's environment"
            )
        };
        let arg = format!(
            "{} ***",
            shell_quote(&["--setenv".to_string(), name.to_string()])
        );
        audit.finding("env-credential", message, arg);
    }
    // Only a new session keeps the task off the caller's terminal: a seccomp filter comes
    // from a descriptor this audit cannot read, and an allow-all one was seen to let
    // TIOCSTI through.
    if !new_session {
        let message = if seccomp.is_empty() {
            "no --new-session: the sandbox can push input into the terminal with TIOCSTI \
             (CVE-2017-5226)"
        } else {
            "no --new-session: the sandbox can push input into the terminal with TIOCSTI \
             (CVE-2017-5226); the seccomp filter's contents are unseen, so it is not taken \
             to block it"
        };
        audit.finding("tiocsti", message, seccomp.join(" "));
    }
    if !dies_with_parent {
        audit.finding(
            "no-die-with-parent",
            "the sandbox can outlive its parent (no --die-with-parent)",
            "",
        );
    }
    audit
        .findings
        .extend(exposed_as(&["dev-bind-dev", "host-device"]));
    if root_caps_kept {
        audit.finding(
            "root-caps-kept",
            "no --cap-drop ALL: when bubblewrap runs this line as root, the sandbox keeps \
             root's full capability set (it can remount read-only binds writable and write \
             /proc/sys); airlock bwrap drops them",
            "",
        );
    }
    for cap in caps {
        audit.finding(
            "cap-add",
            format!("adds capability {}", cap.args[0]),
            cap.raw(),
        );
    }
    if !user_namespace {
        audit.finding("no-user-namespace", "no user namespace", "");
    }
    if !pid_namespace {
        audit.finding(
            "no-pid-namespace",
            "no pid namespace: host processes are visible",
            "",
        );
    }
    if !ipc_namespace {
        audit.finding(
            "no-ipc-namespace",
            "no IPC namespace: the host's System V shared memory, semaphores and message \
             queues (and POSIX ones, under --mqueue) can be read and written, within their \
             permissions",
            "",
        );
    }
    if !cgroup_namespace {
        audit.finding(
            "no-cgroup-namespace",
            "no cgroup namespace: the task reads the host's cgroup paths in /proc/self/cgroup \
             (the caller's service, user slice or container id)",
            "",
        );
    }
    // What an option reads from a file descriptor is invisible to this audit; say so rather
    // than call the line clean.
    for option in hidden_args {
        let fd = &option.args[0];
        let (rule, message) = match option.name {
            "--args" => (
                "args-from-fd",
                format!(
                    "reads more options from file descriptor {fd}, which this audit cannot see"
                ),
            ),
            "--file" | "--bind-data" | "--ro-bind-data" => (
                "data-from-fd",
                format!(
                    "puts the data read from file descriptor {fd} at {}, which this audit cannot see (it may be a host file's)",
                    option.args[1]
                ),
            ),
            "--bind-fd" | "--ro-bind-fd" => (
                "bind-from-fd",
                format!(
                    "binds the directory open on file descriptor {fd}, which this audit cannot see (it may be / or a home)"
                ),
            ),
            "--seccomp" | "--add-seccomp-fd" => (
                "seccomp-from-fd",
                format!(
                    "loads a seccomp filter from file descriptor {fd}, which this audit cannot see"
                ),
            ),
            "--userns" | "--userns2" => (
                "namespace-from-fd",
                format!(
                    "joins the user namespace open on file descriptor {fd}, which this audit cannot see (it may be the host's)"
                ),
            ),
            "--pidns" => (
                "namespace-from-fd",
                format!(
                    "joins the pid namespace open on file descriptor {fd}, which this audit cannot see (it may be the host's)"
                ),
            ),
            _ => continue,
        };
        audit.finding(rule, message, option.raw());
    }
    // No option of the line changes this: bubblewrap maps the uid it gives the task (0, or
    // --uid's) to its caller's, user namespace or not, so the task of a root caller holds the
    // host's uid 0 for every file it is given. It is advice, as the line cannot know who runs
    // it, unless sudo runs it as root; a joined user namespace has its own mapping (reported
    // as unseen above).
    let as_root = "the task is the host's uid 0 to every file it is given, in a user namespace \
                   too and whatever --uid says (bubblewrap maps the sandbox's uid to its \
                   caller's): it reads root-only files, /etc/shadow under --ro-bind /etc /etc, \
                   and writes root's files in a writable bind, with every capability dropped; \
                   run bubblewrap as an unprivileged user";
    match (joins_user_namespace, sudo_root) {
        (true, _) => {}
        (false, Some(true)) => audit.finding(
            "host-root",
            format!("sudo runs bubblewrap as root, so {as_root}"),
            "sudo",
        ),
        (false, _) => audit.advise(
            "host-root-if-run-as-root",
            format!("when root runs bubblewrap, {as_root}"),
            "",
        ),
    }
    Ok(audit)
}

// ---------------------------------------------------------------------------------------------
// Building a docker line
// ---------------------------------------------------------------------------------------------

/// What [`docker_args`] needs to build a locked-down `docker run` line.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerOpts {
    pub image: String,
    pub memory: String,
    pub pids: u32,
    /// Host directory mounted read-write at `/work`: the sandbox's one writable channel.
    pub scratch: String,
    pub user: String,
    pub command: Vec<String>,
}

impl Default for DockerOpts {
    fn default() -> Self {
        DockerOpts {
            image: "python:3.12-slim".to_string(),
            memory: "512m".to_string(),
            pids: 256,
            scratch: "/tmp/airlock-scratch".to_string(),
            user: "65534:65534".to_string(),
            command: Vec::new(),
        }
    }
}

/// A `docker run` line with no network, a read-only root, no capabilities, no privilege
/// gain, an unprivileged user, resource limits, and only the scratch directory writable.
/// No environment variable is forwarded.
pub fn docker_args(o: &DockerOpts) -> Vec<String> {
    let mut args: Vec<String> = [
        "docker",
        "run",
        "--rm",
        "--network",
        "none",
        "--read-only",
        "--tmpfs",
        "/tmp:rw,noexec,nosuid,size=64m",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend([
        "--user".to_string(),
        o.user.clone(),
        "--pids-limit".to_string(),
        o.pids.to_string(),
        "--memory".to_string(),
        o.memory.clone(),
        "-v".to_string(),
        format!("{}:/work:rw", o.scratch),
        "-w".to_string(),
        "/work".to_string(),
        o.image.clone(),
    ]);
    args.extend(o.command.iter().cloned());
    args
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        parse_command_line(line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn docker(line: &str) -> Audit {
        audit_docker(&words(line)).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    fn bwrap(line: &str) -> Audit {
        audit_bwrap(&words(line)).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    fn rules(items: &[Finding]) -> Vec<&'static str> {
        items.iter().map(|f| f.rule).collect()
    }

    /// `sandbox_places` in one pass is the definition worked out for each option on its own:
    /// its destination, unless it passes through a host link that an earlier bind of a tree
    /// above the link shows, at a place no mount between them covers. Compared on random
    /// lines of binds, tmpfs and other mounts of the paths the links concern.
    #[test]
    fn sandbox_places_in_one_pass_are_each_options_own() {
        fn one(options: &[BwrapOption], i: usize) -> Option<String> {
            let dest = mount_destination(options, i)?;
            for (link, relative) in HOST_LINKS {
                for k in 0..i {
                    if !matches!(options[k].name, "--bind" | "--ro-bind" | "--dev-bind") {
                        continue;
                    }
                    let (Some(tree), Some(dest_k)) = (
                        host_tree(&options[k].args[0]),
                        mount_destination(options, k),
                    ) else {
                        continue;
                    };
                    let Some(inside) = rest_below(link, &tree).filter(|r| !r.is_empty()) else {
                        continue;
                    };
                    let place = normalize_path(&format!("{dest_k}/{inside}"));
                    let covered = (k + 1..i).any(|m| {
                        mount_destination(options, m).is_some_and(|d| is_at_or_below(&place, &d))
                    });
                    if covered {
                        continue;
                    }
                    if let Some(rest) = rest_below(&dest, &place) {
                        let target = link_target(&place, relative);
                        return Some(normalize_path(&format!("{target}/{rest}")));
                    }
                }
            }
            Some(dest)
        }
        let sources = ["/", "/var", "/run", "/var/run", "/usr", "/var/lib", "/home"];
        let dests = [
            "/",
            "/var",
            "/run",
            "/var/run",
            "/var/lock",
            "/x",
            "/x/var",
            "/run/lock",
            "/var/run/a",
            "/y/../var",
            "/x/var/run",
        ];
        let kinds = [
            "--bind",
            "--ro-bind",
            "--dev-bind",
            "--bind-try",
            "--tmpfs",
            "--proc",
        ];
        let mut next = crate::picker(0x2545_f491_4f6c_dd1d);
        let mut through_links = 0;
        for _ in 0..3000 {
            let mut argv = vec!["bwrap".to_string()];
            for _ in 0..1 + next(8) {
                let kind = kinds[next(kinds.len())];
                argv.push(kind.into());
                if matches!(kind, "--tmpfs" | "--proc") {
                    argv.push(dests[next(dests.len())].into());
                } else {
                    argv.push(sources[next(sources.len())].into());
                    argv.push(dests[next(dests.len())].into());
                }
            }
            argv.extend(["--".to_string(), "sh".to_string()]);
            let options = parse_bwrap(&argv[1..]).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let places = sandbox_places(&options);
            for (i, place) in places.iter().enumerate() {
                let expected = one(&options, i);
                through_links += usize::from(expected != mount_destination(&options, i));
                assert_eq!(*place, expected, "option {i} of {argv:?}");
            }
        }
        // The lines do take the link path, not only the plain destination.
        assert!(through_links > 50, "{through_links}");
    }

    fn count(items: &[Finding], rule: &str) -> usize {
        items.iter().filter(|f| f.rule == rule).count()
    }

    /// The clean bwrap line with `add` gives no finding of `rule`.
    fn assert_no_rule(rule: &str, add: &[&str]) {
        let audit = bwrap_variant(&[], add);
        assert_eq!(count(&audit.findings, rule), 0, "{add:?}: {audit:#?}");
    }

    fn only<'a>(items: &'a [Finding], rule: &str) -> &'a Finding {
        let matching: Vec<&Finding> = items.iter().filter(|f| f.rule == rule).collect();
        assert_eq!(matching.len(), 1, "expected one {rule} in {items:#?}");
        matching[0]
    }

    // ----- the docker baseline ---------------------------------------------------------------

    const CLEAN_DOCKER: &str = "docker run --rm --network none --read-only \
        --tmpfs /tmp:rw,noexec,nosuid,size=64m --cap-drop ALL --security-opt no-new-privileges \
        --user 65534:65534 --pids-limit 256 --memory 512m -v /tmp/airlock-scratch:/work:rw \
        -w /work python:3.12-slim python probe.py";

    const CLEAN_DOCKER_OPTIONS: &[&str] = &[
        "--rm",
        "--network none",
        "--read-only",
        "--tmpfs /tmp:rw,noexec,nosuid,size=64m",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--user 65534:65534",
        "--pids-limit 256",
        "--memory 512m",
        "-v /tmp/airlock-scratch:/work:rw",
        "-w /work",
    ];

    /// A clean line (`head`, `clean` options, `tail`) without the options in `drop`, with `add`
    /// appended to its options.
    fn variant(head: &str, clean: &[&str], tail: &str, drop: &[&str], add: &[&str]) -> String {
        for d in drop {
            assert!(clean.contains(d), "not in the clean line: {d}");
        }
        let mut line = vec![head];
        line.extend(clean.iter().filter(|o| !drop.contains(o)));
        line.extend(add);
        line.push(tail);
        line.join(" ")
    }

    fn docker_variant(drop: &[&str], add: &[&str]) -> Audit {
        let tail = "python:3.12-slim python probe.py";
        docker(&variant(
            "docker run",
            CLEAN_DOCKER_OPTIONS,
            tail,
            drop,
            add,
        ))
    }

    #[test]
    fn pinned_five_findings() {
        let audit = docker(
            "docker run -e AWS_SECRET_ACCESS_KEY -v /home/dev/project:/work -w /work \
             python:3.12-slim python probe.py",
        );
        let messages: Vec<&str> = audit.findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "forwards host environment variables",
                "network is not none",
                "mounts /home/dev/project read-write",
                "runs as root inside the container",
                "root filesystem is writable",
            ]
        );
        assert_eq!(
            rules(&audit.findings),
            [
                "env-forwarded",
                "network-not-none",
                "host-mount-rw",
                "root-user",
                "rootfs-writable"
            ]
        );
        assert_eq!(audit.findings[0].arg, "-e AWS_SECRET_ACCESS_KEY");
        assert_eq!(audit.findings[1].arg, "");
        assert_eq!(audit.findings[2].arg, "-v /home/dev/project:/work");
        assert_eq!(audit.findings[3].arg, "");
        assert_eq!(audit.findings[4].arg, "");
    }

    #[test]
    fn clean_docker_line_has_no_findings_and_no_advice() {
        let audit = docker(CLEAN_DOCKER);
        assert_eq!(audit, Audit::default());
        assert_eq!(docker_variant(&[], &[]), Audit::default());
    }

    // ----- one test per docker rule -----------------------------------------------------------

    #[test]
    fn env_forwarded() {
        for (opt, arg) in [
            ("-e FOO", "-e FOO"),
            ("--env FOO", "--env FOO"),
            ("--env=FOO", "--env=FOO"),
            ("-eFOO", "-eFOO"),
            ("-e=FOO", "-e=FOO"),
            ("--env-file ./secrets.env", "--env-file ./secrets.env"),
            ("--env-file=.env", "--env-file=.env"),
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), ["env-forwarded"], "{opt}");
            assert_eq!(
                audit.findings[0].message,
                "forwards host environment variables"
            );
            // A value given on the line is never printed.
            assert_eq!(audit.findings[0].arg, arg);
        }
        // A value filled in from outside the line: a command's output, a CI system's secret.
        for value in [
            "$(cat /run/secrets/x)",
            "`cat ~/.aws/credentials`",
            "${{ secrets.NPM_TOKEN }}",
            "$(System.AccessToken)",
        ] {
            let args = ["-e".to_string(), format!("X={value}")];
            let not_secret = shell_quote(&["-e".to_string(), "X=${{ github.sha }}".to_string()]);
            assert!(docker_variant(&[], &[&not_secret]).findings.is_empty());
            let audit = docker_variant(&[], &[&shell_quote(&args)]);
            assert_eq!(
                only(&audit.findings, "env-forwarded").arg,
                "-e X=***",
                "{value}"
            );
        }
        let both = docker_variant(&[], &["-e A", "--env-file f", "--env=B=c"]);
        assert_eq!(
            only(&both.findings, "env-forwarded").arg,
            "-e A --env-file f"
        );
        assert!(docker(CLEAN_DOCKER).findings.is_empty());
    }

    /// `-e NAME=VALUE` sets a value written on the line: no finding unless it looks like a
    /// credential, which is then named without its value.
    #[test]
    fn env_set_on_the_line_is_a_finding_only_for_a_credential() {
        for opt in [
            "-e FOO=bar",
            "-e LANG=C.UTF-8",
            "--env=PATH=/usr/bin",
            "-e 'PS1=$ '",
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert!(audit.findings.is_empty(), "{opt}: {:?}", audit.findings);
        }
        // A value the shell fills from its own variables forwards them.
        for (opt, arg) in [
            ("-e \"FOO=${AWS_SECRET_ACCESS_KEY}\"", "-e FOO=***"),
            ("--env \"X=a$GITHUB_TOKEN\"", "--env X=***"),
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert_eq!(only(&audit.findings, "env-forwarded").arg, arg, "{opt}");
        }
        for (opt, arg) in [
            ("-teGITHUB_TOKEN=ghp_x=y", "-teGITHUB_TOKEN=***"),
            ("-e X=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "-e X=***"),
            (
                "--env=AWS_SECRET_ACCESS_KEY=abc",
                "--env=AWS_SECRET_ACCESS_KEY=***",
            ),
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), ["env-credential"], "{opt}");
            let f = &audit.findings[0];
            assert_eq!(f.arg, arg, "{opt}");
            assert!(f.message.contains("a credential by its"), "{}", f.message);
            assert!(
                !f.message.contains("ghp_") && !f.arg.contains("abc"),
                "{f:?}"
            );
        }
    }

    #[test]
    fn network_not_none() {
        let missing = docker_variant(&["--network none"], &[]);
        assert_eq!(rules(&missing.findings), ["network-not-none"]);
        assert_eq!(missing.findings[0].arg, "");
        for opt in [
            "--network host",
            "--net=host",
            "--network=bridge",
            "--net mynet",
        ] {
            let audit = docker_variant(&["--network none"], &[opt]);
            assert_eq!(rules(&audit.findings), ["network-not-none"], "{opt}");
            assert_eq!(audit.findings[0].arg, opt);
        }
        let mixed = docker_variant(&[], &["--network host"]);
        assert_eq!(
            only(&mixed.findings, "network-not-none").arg,
            "--network host"
        );
        for fixed in ["--net=none", "--net none", "--network=none"] {
            assert!(
                docker_variant(&["--network none"], &[fixed])
                    .findings
                    .is_empty()
            );
        }
    }

    #[test]
    fn host_mount_rw() {
        for (opt, source) in [
            ("-v /home/dev:/work", "/home/dev"),
            ("-v ./src:/src", "./src"),
            ("-v ~/code:/code:rw", "~/code"),
            ("--volume=/etc:/host-etc:z", "/etc"),
            ("-v \"$PWD\":/work", "$PWD"),
            ("--mount type=bind,source=/srv,target=/srv", "/srv"),
            ("--mount type=bind,src=/srv,dst=/srv,ro=false", "/srv"),
            ("--mount=type=bind,src=/srv,dst=/srv,readonly=0", "/srv"),
            // docker lowercases the type and reads the value as CSV.
            ("--mount type=BIND,src=/srv,dst=/srv", "/srv"),
            ("--mount '\"type=bind\",\"src=/srv\",dst=/srv'", "/srv"),
            ("--mount 'type=bind,\"src=/a,b\",dst=/srv'", "/a,b"),
            // docker reads one record: what follows a newline is not read.
            ("--mount 'type=bind,src=/srv,dst=/srv\nreadonly'", "/srv"),
        ] {
            let audit = docker_variant(&[], &[opt]);
            // A home also hands over its credentials (read-only too: see
            // `home_credentials_read_only_too`).
            // A lone variable may be `/` (see `held_tree`): all it may hold.
            let home = match source {
                "/home/dev" => &["host-credentials"][..],
                "$PWD" => &[
                    "docker-socket",
                    "host-socket",
                    "host-proc",
                    "host-credentials",
                ][..],
                _ => &[],
            };
            assert_eq!(
                rules(&audit.findings),
                [&["host-mount-rw"][..], home].concat(),
                "{opt}"
            );
            assert_eq!(
                audit.findings[0].message,
                format!("mounts {source} read-write")
            );
            // The argument as the shell hands it over (quotes removed).
            assert_eq!(audit.findings[0].arg, words(opt).join(" "));
        }
        for fixed in [
            "-v /srv/project:/work:ro",
            "-v /srv/project:/work:ro,z",
            "-v /srv/project:/work:z,readonly",
            "--mount type=bind,source=/srv,target=/srv,readonly",
            "--mount type=bind,source=/srv,target=/srv,ro",
            "--mount type=bind,src=/srv,dst=/srv,ro=true",
            "--mount type=bind,src=/srv,dst=/srv,readonly=true",
            "-v cache:/cache",
            "-v /anonymous",
            "--mount type=volume,source=cache,target=/cache",
            "--mount source=cache,target=/cache",
            "--mount type=tmpfs,target=/scratch",
        ] {
            assert!(docker_variant(&[], &[fixed]).findings.is_empty(), "{fixed}");
        }
        // One finding per mount.
        let two = docker_variant(&[], &["-v /a:/a", "-v /b:/b"]);
        assert_eq!(count(&two.findings, "host-mount-rw"), 2);
        // A local-driver volume that binds a host directory is a host mount.
        let driver = docker_variant(
            &[],
            &[
                "--mount type=volume,dst=/d,volume-opt=type=none,volume-opt=o=bind,volume-opt=device=/home/dev",
            ],
        );
        assert_eq!(
            only(&driver.findings, "host-mount-rw").message,
            "mounts /home/dev read-write"
        );
        let rbind = docker_variant(
            &[],
            &[
                "--mount type=volume,dst=/d,volume-opt=type=none,volume-opt=o=rbind,volume-opt=device=/",
            ],
        );
        assert_eq!(
            only(&rbind.findings, "host-mount-rw").message,
            "mounts / read-write"
        );
        // Read-only on top, but the host's own mounts below it left writable.
        let below = docker_variant(
            &[],
            &["--mount type=bind,src=/,dst=/host,readonly,bind-recursive=writable"],
        );
        let finding = only(&below.findings, "host-mount-rw");
        assert!(
            finding
                .message
                .starts_with("mounts / read-only but its submounts writable"),
            "{finding:#?}"
        );
        assert!(finding.message.contains("/dev/shm"), "{finding:#?}");
        for fine in [
            "--mount type=bind,src=/srv,dst=/srv,readonly,bind-recursive=writable",
            "--mount type=bind,src=/,dst=/host,readonly,bind-recursive=readonly",
        ] {
            let audit = docker_variant(&[], &[fine]);
            assert_eq!(count(&audit.findings, "host-mount-rw"), 0, "{fine}");
        }
    }

    #[test]
    fn host_mount_rw_scratch_convention() {
        for fine in [
            "-v /tmp/airlock-scratch:/out",
            "-v /tmp/airlock-scratch-4711/:/out:rw",
            "--mount type=bind,source=/var/tmp/airlock-scratch,target=/out",
        ] {
            assert!(docker_variant(&[], &[fine]).findings.is_empty(), "{fine}");
        }
        // (`/tmp` also holds an X server's and ssh-agents' sockets.)
        for (bad, also) in [
            ("-v /tmp/airlock-scratch/..:/out", &["host-socket"][..]),
            (
                "-v /tmp/airlock-scratch/../../home/dev:/out",
                &["host-credentials"],
            ),
            ("-v /tmp/not-airlock-scratch:/out", &[]),
            (
                "--mount type=bind,source=/tmp/airlock-scratch/..,target=/out",
                &["host-socket"],
            ),
        ] {
            let audit = docker_variant(&[], &[bad]);
            assert_eq!(
                rules(&audit.findings),
                [&["host-mount-rw"][..], also].concat(),
                "{bad}"
            );
        }
    }

    #[test]
    fn docker_socket() {
        for opt in [
            "-v /var/run/docker.sock:/var/run/docker.sock:ro",
            "-v /run/docker.sock:/sock:ro",
            "--mount type=bind,src=/var/run/docker.sock,dst=/s,readonly",
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), ["docker-socket"], "{opt}");
            assert_eq!(audit.findings[0].message, "mounts the Docker socket");
            assert_eq!(audit.findings[0].arg, opt);
        }
        let rw = docker_variant(&[], &["-v /var/run/docker.sock:/var/run/docker.sock"]);
        assert_eq!(rules(&rw.findings), ["host-mount-rw", "docker-socket"]);
        let parent = docker_variant(&[], &["-v /run:/host-run:ro"]);
        assert_eq!(
            only(&parent.findings, "docker-socket").message,
            "mounts /run, which holds the Docker socket"
        );
        let proc_root = docker_variant(&[], &["-v /proc/1/root:/host:ro"]);
        assert_eq!(
            only(&proc_root.findings, "docker-socket").message,
            "mounts /proc/1/root, which holds the Docker socket"
        );
        // A rootless daemon's socket, in its user's runtime directory.
        let rootless = docker_variant(
            &[],
            &["-v /run/user/1000/docker.sock:/var/run/docker.sock:ro"],
        );
        assert_eq!(rules(&rootless.findings), ["docker-socket"]);
        let runtime_dir = docker_variant(
            &[],
            &["--mount type=bind,src=/run/user/1000,dst=/r,readonly"],
        );
        assert_eq!(
            only(&runtime_dir.findings, "docker-socket").message,
            "mounts /run/user/1000, which holds the Docker socket"
        );
        let api = docker_variant(&[], &["--use-api-socket"]);
        assert_eq!(rules(&api.findings), ["docker-socket"]);
        assert!(
            docker_variant(&[], &["--use-api-socket=false"])
                .findings
                .is_empty()
        );
        assert!(
            docker_variant(&[], &["-v /run/user/1000/x:/x:ro"])
                .findings
                .is_empty()
        );
        // One way out is one finding, naming every option that opens it.
        let many = docker_variant(
            &[],
            &[
                "-v /run:/r:ro",
                "-v /var/run/docker.sock:/s:ro",
                "--use-api-socket",
                "-v /run:/r2:ro",
            ],
        );
        let socket = only(&many.findings, "docker-socket");
        assert_eq!(
            socket.message,
            "mounts the Docker socket through /run, /var/run/docker.sock"
        );
        assert_eq!(
            socket.arg,
            "-v /run:/r:ro -v /var/run/docker.sock:/s:ro --use-api-socket -v /run:/r2:ro"
        );
        let bus = docker_variant(&[], &["-v /run/dbus:/run/dbus:ro"]);
        assert_eq!(rules(&bus.findings), ["host-socket"]);
        // The desktop's sockets, and an agent's socket spelt as its variable.
        for (opt, held) in [
            ("-v /run/user/1000/pipewire-0:/p:ro", "PipeWire"),
            ("-v /run/user/1000/pulse:/p:ro", "PulseAudio"),
            ("-v \"$SSH_AUTH_SOCK:/agent\"", "an ssh-agent"),
            (
                "--mount \"type=bind,src=${SSH_AUTH_SOCK},dst=/agent\"",
                "an ssh-agent",
            ),
        ] {
            let audit = docker_variant(&[], &[opt]);
            let found = only(&audit.findings, "host-socket");
            assert!(
                found.message.contains(&format!("socket of {held}:")),
                "{opt}"
            );
        }
        // A bind of the host's proc, or of / (docker binds recursively), shows every host
        // process.
        for opt in [
            "-v /proc:/host/proc:ro",
            "--mount type=bind,src=/proc/1,dst=/p,ro",
        ] {
            let proc = docker_variant(&[], &[opt]);
            assert_eq!(rules(&proc.findings), ["host-proc"], "{opt}");
            assert_eq!(proc.findings[0].arg, opt);
        }
        let root = docker_variant(&[], &["-v /:/host:ro"]);
        assert_eq!(
            rules(&root.findings),
            [
                "docker-socket",
                "host-socket",
                "host-proc",
                "host-credentials"
            ]
        );
        let sockets = docker_variant(&[], &["-v /run/docker.sock:/a:ro", "--use-api-socket"]);
        assert_eq!(
            only(&sockets.findings, "docker-socket").message,
            "mounts the Docker socket"
        );
    }

    #[test]
    fn root_user() {
        let missing = docker_variant(&["--user 65534:65534"], &[]);
        assert_eq!(rules(&missing.findings), ["root-user"]);
        assert_eq!(
            missing.findings[0].message,
            "runs as root inside the container"
        );
        assert_eq!(missing.findings[0].arg, "");
        for opt in [
            "-u 0",
            "--user=root",
            "--user root:root",
            "-u0:1000",
            "--user 0:0",
            // moby reads the uid with Go's Atoi: these are 0.
            "--user=-0",
            "--user +0:1000",
        ] {
            let audit = docker_variant(&["--user 65534:65534"], &[opt]);
            assert_eq!(rules(&audit.findings), ["root-user"], "{opt}");
            assert_eq!(audit.findings[0].arg, opt);
        }
        // Docker keeps the last --user.
        let last_root = docker_variant(&[], &["--user 0"]);
        assert_eq!(rules(&last_root.findings), ["root-user"]);
        for fixed in ["-u 1000", "--user=1000:0", "--user nobody"] {
            assert!(
                docker_variant(&["--user 65534:65534"], &[fixed])
                    .findings
                    .is_empty(),
                "{fixed}"
            );
        }
    }

    #[test]
    fn rootfs_writable() {
        let missing = docker_variant(&["--read-only"], &[]);
        assert_eq!(rules(&missing.findings), ["rootfs-writable"]);
        assert_eq!(missing.findings[0].message, "root filesystem is writable");
        let off = docker_variant(&["--read-only"], &["--read-only=false"]);
        assert_eq!(rules(&off.findings), ["rootfs-writable"]);
        assert_eq!(off.findings[0].arg, "--read-only=false");
        assert!(
            docker_variant(&["--read-only"], &["--read-only=true"])
                .findings
                .is_empty()
        );
    }

    #[test]
    fn privileged() {
        let audit = docker_variant(&[], &["--privileged"]);
        assert_eq!(rules(&audit.findings), ["privileged"]);
        assert_eq!(audit.findings[0].arg, "--privileged");
        assert!(
            docker_variant(&[], &["--privileged=false"])
                .findings
                .is_empty()
        );
    }

    #[test]
    fn cap_add() {
        let audit = docker_variant(&[], &["--cap-add NET_ADMIN", "--cap-add=SYS_PTRACE"]);
        assert_eq!(rules(&audit.findings), ["cap-add", "cap-add"]);
        assert_eq!(audit.findings[0].message, "adds capability NET_ADMIN");
        assert_eq!(audit.findings[0].arg, "--cap-add NET_ADMIN");
        assert_eq!(audit.findings[1].arg, "--cap-add=SYS_PTRACE");
        assert!(
            docker_variant(&[], &["--cap-drop NET_RAW"])
                .findings
                .is_empty()
        );
    }

    #[test]
    fn unconfined() {
        for opt in [
            "--security-opt seccomp=unconfined",
            "--security-opt seccomp:unconfined",
            "--security-opt apparmor=unconfined",
            "--security-opt=apparmor:unconfined",
            "--security-opt label=disable",
            "--security-opt label:disable",
            "--security-opt systempaths=unconfined",
            "--security-opt label=type:spc_t",
            "--security-opt label:type:unconfined_t",
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), ["unconfined"], "{opt}");
            assert_eq!(audit.findings[0].arg, opt);
        }
        for fine in [
            "--security-opt seccomp=/etc/profile.json",
            "--security-opt apparmor=docker-default",
            "--security-opt label=type:container_t",
        ] {
            assert!(docker_variant(&[], &[fine]).findings.is_empty(), "{fine}");
        }
    }

    #[test]
    fn host_namespace() {
        for opt in [
            "--pid=host",
            "--pid host",
            "--ipc=host",
            "--uts host",
            "--userns=host",
            "--cgroupns=host",
        ] {
            let audit = docker_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), ["host-namespace"], "{opt}");
            assert_eq!(audit.findings[0].arg, opt);
        }
        assert_eq!(
            docker_variant(&[], &["--pid=host"]).findings[0].message,
            "shares the host's pid namespace"
        );
        // --network host is one finding, under network-not-none only.
        let net = docker_variant(&["--network none"], &["--network=host"]);
        assert_eq!(rules(&net.findings), ["network-not-none"]);
        for fine in ["--ipc=private", "--cgroupns=private"] {
            assert!(docker_variant(&[], &[fine]).findings.is_empty(), "{fine}");
        }
        // Another container's, which may be the host's (a review's find: it passed clean).
        for other in ["--pid=container:other", "--ipc container:other"] {
            let audit = docker_variant(&[], &[other]);
            let found = only(&audit.findings, "host-namespace");
            assert!(
                found
                    .message
                    .contains("of container other, which this audit cannot see"),
                "{other}: {}",
                found.message
            );
        }
    }

    #[test]
    fn device() {
        let audit = docker_variant(
            &[],
            &[
                "--device /dev/fuse",
                "'--device-cgroup-rule=c 1:3 mr'",
                "--gpus all",
            ],
        );
        assert_eq!(rules(&audit.findings), ["device", "device", "device"]);
        assert_eq!(audit.findings[0].message, "passes host device /dev/fuse");
        assert_eq!(audit.findings[0].arg, "--device /dev/fuse");
        assert_eq!(audit.findings[1].arg, "--device-cgroup-rule=c 1:3 mr");
        assert!(docker(CLEAN_DOCKER).findings.is_empty());
    }

    #[test]
    fn volumes_from() {
        let audit = docker_variant(&[], &["--volumes-from dind:ro"]);
        assert_eq!(rules(&audit.findings), ["volumes-from"]);
        assert_eq!(
            audit.findings[0].message,
            "mounts the volumes of container dind:ro, which this audit cannot see (they may be \
             host paths, / or the Docker socket)"
        );
        assert_eq!(audit.findings[0].arg, "--volumes-from dind:ro");
    }

    // ----- docker advice ----------------------------------------------------------------------

    #[test]
    fn advice_no_memory_limit() {
        let audit = docker_variant(&["--memory 512m"], &[]);
        assert!(audit.findings.is_empty(), "advice is not a finding");
        assert_eq!(rules(&audit.advice), ["no-memory-limit"]);
        assert_eq!(
            rules(&docker_variant(&["--memory 512m"], &["-m 0"]).advice),
            ["no-memory-limit"]
        );
        assert!(
            docker_variant(&["--memory 512m"], &["-m1g"])
                .advice
                .is_empty()
        );
    }

    #[test]
    fn advice_no_pids_limit() {
        let audit = docker_variant(&["--pids-limit 256"], &[]);
        assert!(audit.findings.is_empty());
        assert_eq!(rules(&audit.advice), ["no-pids-limit"]);
        let unlimited = docker_variant(&["--pids-limit 256"], &["--pids-limit=-1"]);
        assert_eq!(rules(&unlimited.advice), ["no-pids-limit"]);
        assert_eq!(unlimited.advice[0].arg, "--pids-limit=-1");
        assert!(
            docker_variant(&["--pids-limit 256"], &["--pids-limit=64"])
                .advice
                .is_empty()
        );
    }

    #[test]
    fn advice_no_new_privileges() {
        let audit = docker_variant(&["--security-opt no-new-privileges"], &[]);
        assert!(audit.findings.is_empty());
        assert_eq!(rules(&audit.advice), ["no-new-privileges"]);
        let off = docker_variant(
            &["--security-opt no-new-privileges"],
            &["--security-opt no-new-privileges:false"],
        );
        assert_eq!(rules(&off.advice), ["no-new-privileges"]);
        for fixed in [
            "--security-opt no-new-privileges:true",
            "--security-opt=no-new-privileges=true",
            "--security-opt no-new-privileges",
        ] {
            assert!(
                docker_variant(&["--security-opt no-new-privileges"], &[fixed])
                    .advice
                    .is_empty(),
                "{fixed}"
            );
        }
    }

    #[test]
    fn advice_no_cap_drop() {
        let audit = docker_variant(&["--cap-drop ALL"], &[]);
        assert!(audit.findings.is_empty());
        assert_eq!(rules(&audit.advice), ["no-cap-drop"]);
        let partial = docker_variant(&["--cap-drop ALL"], &["--cap-drop NET_RAW"]);
        assert_eq!(rules(&partial.advice), ["no-cap-drop"]);
        assert!(
            docker_variant(&["--cap-drop ALL"], &["--cap-drop=all"])
                .advice
                .is_empty()
        );
    }

    #[test]
    fn bare_docker_run_reports_every_missing_thing() {
        let audit = docker("docker run alpine");
        assert_eq!(
            rules(&audit.findings),
            ["network-not-none", "root-user", "rootfs-writable"]
        );
        assert_eq!(
            rules(&audit.advice),
            [
                "no-memory-limit",
                "no-pids-limit",
                "no-new-privileges",
                "no-cap-drop"
            ]
        );
    }

    // ----- docker option parsing --------------------------------------------------------------

    #[test]
    fn docker_command_after_image_is_not_audited() {
        let audit = docker_variant(&[], &[]);
        assert!(audit.findings.is_empty());
        let line = format!(
            "{} --privileged -v /:/host -e SECRET",
            CLEAN_DOCKER.replace("python probe.py", "sh -c \"--privileged\"")
        );
        assert_eq!(docker(&line), Audit::default());
        // After `--` the next argument is the image even if it looks like an option.
        let dashdash =
            docker("docker run --rm --network none --read-only --user 1000 -- --privileged -e X");
        assert!(dashdash.findings.is_empty(), "{dashdash:#?}");
    }

    #[test]
    fn docker_short_option_clusters() {
        // -it are flags: the image is still found.
        assert_eq!(docker_variant(&[], &["-it"]), Audit::default());
        assert_eq!(docker_variant(&[], &["-itd", "--init"]), Audit::default());
        // A valued letter at the end of a cluster takes the next argument.
        let ite = docker_variant(&[], &["-ite FOO"]);
        assert_eq!(only(&ite.findings, "env-forwarded").arg, "-ite FOO");
        // ... or the rest of the cluster.
        let ie = docker_variant(&[], &["-ieFOO"]);
        assert_eq!(only(&ie.findings, "env-forwarded").arg, "-ieFOO");
        // -v inside a cluster.
        let tv = docker_variant(&[], &["-tv /srv:/srv"]);
        assert_eq!(
            only(&tv.findings, "host-mount-rw").message,
            "mounts /srv read-write"
        );
        // -u with the value glued on.
        let user = docker_variant(&["--user 65534:65534"], &["-uroot"]);
        assert_eq!(only(&user.findings, "root-user").arg, "-uroot");
    }

    #[test]
    fn docker_values_are_not_taken_for_the_image() {
        for opt in [
            "--name probe",
            "-h box",
            "--hostname=box",
            "-p 8080:80",
            "-l a=b",
            "--label=a=b",
            "--platform linux/amd64",
            "--cpus 1",
            "--ulimit nofile=64:64",
            "--restart no",
            "--entrypoint /bin/sh",
            "--health-cmd true",
            "--log-driver none",
            "--log-opt max-size=1m",
            "--stop-signal KILL",
            "--runtime runsc",
            "--group-add 100",
            "--add-host a:1.2.3.4",
            "--dns 1.1.1.1",
            "--shm-size 64m",
            "-w /elsewhere",
            "--workdir /elsewhere",
            "--cpuset-cpus 0-1",
            "--detach-keys ctrl-x",
            "--pull never",
            "--cidfile /tmp/cid",
        ] {
            assert_eq!(docker_variant(&[], &[opt]), Audit::default(), "{opt}");
        }
    }

    #[test]
    fn docker_unknown_options() {
        // Unknown with '=' is valued: the image stays in place.
        assert_eq!(docker_variant(&[], &["--future-opt=x"]), Audit::default());
        // Without, it is read as a flag, and said: were it valued, `--privileged` after it
        // would be the container's command (a review's find: `--bogus VAL --privileged`
        // passed clean).
        for (opts, unknown) in [
            (&["--future-flag"][..], "--future-flag"),
            (&["--bogus", "--privileged"], "--bogus"),
            (&["-Q"], "-Q"),
        ] {
            let audit = docker_variant(&[], opts);
            let found = only(&audit.findings, "unknown-option");
            assert_eq!(found.arg, unknown, "{opts:?}");
        }
    }

    #[test]
    fn docker_line_shapes() {
        for prefix in [
            "docker run",
            "docker create",
            "docker container run",
            "docker container create",
            "/usr/bin/docker run",
            "run",
            "container run",
        ] {
            let line = CLEAN_DOCKER.replacen("docker run", prefix, 1);
            assert_eq!(docker(&line), Audit::default(), "{prefix}");
        }
        for bad in [
            "docker ps",
            "docker",
            "",
            "docker exec box sh",
            "podman run alpine",
            "docker build .",
        ] {
            assert!(audit_docker(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn docker_parse_errors() {
        let no_image = audit_docker(&words("docker run --rm --network none")).unwrap_err();
        assert!(no_image.contains("no image"), "{no_image}");
        let no_value = audit_docker(&strings(&["docker", "run", "-e"])).unwrap_err();
        assert!(no_value.contains("-e"), "{no_value}");
        let long_no_value = audit_docker(&strings(&["docker", "run", "--network"])).unwrap_err();
        assert!(long_no_value.contains("--network"), "{long_no_value}");
        assert!(audit_docker(&words("docker run --read-only=maybe alpine")).is_err());
        assert!(audit_docker(&words("docker run -v a:b:c:d alpine")).is_err());
        assert!(
            audit_docker(&words(
                "docker run --mount type=bind,src=/a,dst=/b,ro=maybe alpine"
            ))
            .is_err()
        );
        // The message names the field, not the spec, which may hold a driver's password.
        let spec = "type=volume,src=v,dst=/d,\"volume-opt=o=username=u,password=SECRET\",ro=maybe";
        let bad = audit_docker(&strings(&["docker", "run", "--mount", spec, "alpine"]));
        let bad = bad.unwrap_err();
        assert_eq!(bad, "--mount: \"ro=maybe\" is not true or false");
        for quotes in [
            "type=bind,src=/a\"b,dst=/b",
            "\"type=bind\"x,dst=/b",
            "\"type=bind",
        ] {
            let line = strings(&["docker", "run", "--mount", quotes, "alpine"]);
            assert!(audit_docker(&line).is_err(), "{quotes}");
        }
    }

    // ----- bwrap ------------------------------------------------------------------------------

    const CLEAN_BWRAP: &str = "bwrap --unshare-all --die-with-parent --new-session --clearenv \
        --cap-drop ALL --ro-bind /usr /usr --proc /proc --dev /dev --tmpfs /tmp -- /bin/true";

    const CLEAN_BWRAP_OPTIONS: &[&str] = &[
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-drop ALL",
        "--ro-bind /usr /usr",
        "--proc /proc",
        "--dev /dev",
        "--tmpfs /tmp",
    ];

    /// For each `(options, hidden)`: the variant line with the options has one finding of
    /// `rule`, or none where later mounts hide what the earlier one showed.
    fn assert_hidden_by_later_mounts(rule: &str, cases: &[(&[&str], bool)]) {
        for (opts, hidden) in cases {
            let audit = bwrap_variant(&[], opts);
            assert_eq!(
                count(&audit.findings, rule),
                usize::from(!hidden),
                "{opts:?}"
            );
        }
    }

    /// Each of these bwrap options, alone on the variant line, brings no finding.
    fn assert_each_clean(lines: &[&str]) {
        for fine in lines {
            let audit = bwrap_variant(&[], &[fine]);
            assert!(audit.findings.is_empty(), "{fine}: {audit:#?}");
        }
    }

    fn bwrap_variant(drop: &[&str], add: &[&str]) -> Audit {
        bwrap(&variant(
            "bwrap",
            CLEAN_BWRAP_OPTIONS,
            "-- /bin/true",
            drop,
            add,
        ))
    }

    /// The audit of a clean bwrap line: no finding, and the advice every line gets.
    fn clean_bwrap_audit() -> Audit {
        let mut audit = bwrap("bwrap -- /bin/true");
        audit.findings.clear();
        audit
    }

    #[test]
    fn clean_bwrap_line() {
        assert_eq!(bwrap(CLEAN_BWRAP), clean_bwrap_audit());
        assert_eq!(bwrap_variant(&[], &[]), clean_bwrap_audit());
    }

    #[test]
    fn bwrap_network_shared() {
        let share = bwrap_variant(&[], &["--share-net"]);
        assert_eq!(rules(&share.findings), ["network-shared"]);
        assert_eq!(share.findings[0].arg, "");
        // Order matters: the last of --share-net / --unshare-net wins.
        assert!(
            bwrap_variant(&[], &["--share-net", "--unshare-net"])
                .findings
                .is_empty()
        );
        let fixed_by_hand = bwrap_variant(
            &["--unshare-all"],
            &[
                "--unshare-user",
                "--unshare-pid",
                "--unshare-net",
                "--unshare-ipc",
                "--unshare-cgroup-try",
            ],
        );
        assert!(fixed_by_hand.findings.is_empty(), "{fixed_by_hand:#?}");
    }

    /// A value where a name or a spec belongs is not printed (the security-team review): a
    /// token given as `-e TOKEN`'s name, a `--mount` spec holding a driver's password.
    /// A mount source filled in whole by a substitution (a CI system's, a command's) is taken
    /// to be `/`, as a lone variable is (the security-team review: it passed clean).
    #[test]
    fn a_substituted_source_is_taken_to_be_the_root() {
        for source in ["'${{ inputs.dir }}'", "'$(pwd)'", "'`pwd`/'", "\"$DIR\""] {
            let opt = format!("-v {source}:/x:ro");
            let audit = docker_variant(&[], &[&opt]);
            let found = rules(&audit.findings);
            assert!(
                found.contains(&"docker-socket") && found.contains(&"host-credentials"),
                "{source}: {found:?}"
            );
        }
        // Not where the substitution is only part of a path below a known place.
        let below = docker_variant(&[], &["-v '/srv/$(date +%F)':/x:ro"]);
        assert!(below.findings.is_empty(), "{below:#?}");
    }

    #[test]
    fn values_in_the_wrong_place_are_not_printed() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let audit = docker(&format!("docker run -e {token} -e HOME alpine"));
        let found = only(&audit.findings, "env-forwarded");
        assert_eq!(found.arg, "-e *** -e HOME");
        assert!(!render_text(&audit).contains(token));
        let e = audit_docker(&words(
            "docker run --mount 'type=volume,src=s,dst=/m,volume-opt=o=password=hunter2\"x' alpine",
        ))
        .unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn host_secrets_in_a_root_container() {
        let root = |mount: &str| docker_variant(&["--user 65534:65534"], &[mount]);
        let tail = ": the container runs as root, their owner on the host (unless the daemon \
                    remaps users, userns-remap), so it reads them, read-only or not, and can hand \
                    them back in its output";
        for (mount, held) in [
            (
                "-v /etc/shadow:/s:ro",
                "/etc/shadow, which holds the host's password hashes",
            ),
            (
                "-v /etc/ssh:/s:ro",
                "/etc/ssh, which holds the host's ssh host keys",
            ),
            (
                "--mount type=bind,source=/etc/kubernetes/admin.conf,target=/k,readonly",
                "/etc/kubernetes/admin.conf, which holds Kubernetes cluster credentials",
            ),
            (
                "-v /var/lib/rancher:/r:ro",
                "/var/lib/rancher, which holds k3s cluster credentials and RKE2 cluster \
                 credentials",
            ),
            (
                "-v /etc:/e:ro",
                "/etc, which holds the host's password hashes, the host's ssh host keys, TLS \
                 private keys and 10 more kinds of credentials",
            ),
        ] {
            let audit = root(mount);
            assert_eq!(
                rules(&audit.findings),
                ["host-secrets", "root-user"],
                "{mount}"
            );
            assert_eq!(audit.findings[0].message, format!("mounts {held}{tail}"));
            assert_eq!(audit.findings[0].arg, mount);
            // Run as another user, the host's modes keep them from the container.
            let user = docker_variant(&[], &[mount]);
            assert!(user.findings.is_empty(), "{mount}: {user:#?}");
        }
        // A user filled in from outside the line may be root; a group that reads some of them
        // by their modes reads those (the security-team review: all passed clean).
        let unseen = docker_variant(
            &["--user 65534:65534"],
            &["--user \"$UID\"", "-v /etc:/e:ro"],
        );
        assert_eq!(rules(&unseen.findings), ["host-secrets", "root-user"]);
        assert!(unseen.findings[0].message.contains("may run as root"));
        assert!(unseen.findings[1].message.starts_with("may run as root"));
        for (user, group) in [
            ("--user 1000", "--group-add shadow"),
            ("--user 1000:shadow", ""),
            ("--user 1000", "--group-add \"$GID\""),
        ] {
            let audit = docker_variant(&["--user 65534:65534"], &[user, group, "-v /etc:/e:ro"]);
            assert_eq!(rules(&audit.findings), ["host-secrets"], "{user} {group}");
            assert!(
                audit.findings[0]
                    .message
                    .starts_with("mounts /etc, which holds the host's password hashes")
            );
            assert!(
                !audit.findings[0].message.contains("ssh host keys"),
                "{user} {group}"
            );
        }
        let other = docker_variant(
            &["--user 65534:65534"],
            &["--user 1000", "--group-add docker", "-v /etc:/e:ro"],
        );
        assert!(other.findings.is_empty(), "{other:#?}");
        // A public key alone, and what holds none, are no finding.
        for mount in [
            "-v /etc/ssh/ssh_host_ed25519_key.pub:/k.pub:ro",
            "-v /etc/hostname:/h:ro",
            "-v /usr:/u:ro",
        ] {
            assert_eq!(rules(&root(mount).findings), ["root-user"], "{mount}");
        }
    }

    #[test]
    fn home_credentials_read_only_too() {
        let found = |opts: &[&str]| {
            let audit = bwrap_variant(&[], opts);
            assert_eq!(rules(&audit.findings), ["host-credentials"], "{opts:?}");
            audit.findings[0].clone()
        };
        let tail = ": the task reads them, read-only or not, and can hand them back in its output";
        for (opt, held) in [
            ("--ro-bind ~/.aws /a", "AWS credentials"),
            ("--ro-bind \"$HOME/.ssh\" /s", "ssh keys"),
            ("--ro-bind /home/dev/.ssh/id_ed25519 /k", "ssh keys"),
            (
                "--ro-bind /root/.config /c",
                "Google Cloud credentials, GitHub CLI tokens, Podman registry logins and 4 \
                 more kinds of credentials",
            ),
            ("--ro-bind /home/dev/.cargo /c", "crates.io tokens"),
            (
                "--ro-bind-try /home/dev/.docker/config.json /d",
                "Docker registry logins",
            ),
            ("--ro-bind /home/dev/.netrc /n", "netrc passwords"),
            ("--ro-bind /home/dev/.m2 /m", "Maven repository passwords"),
            (
                "--ro-bind /home/dev/.config/containers /c",
                "Podman registry logins",
            ),
            (
                "--ro-bind /home/dev /h",
                "ssh keys, gpg keys, AWS credentials and 31 more kinds of credentials",
            ),
        ] {
            let f = found(&[opt]);
            let source = &words(opt)[1];
            assert_eq!(
                f.message,
                format!("mounts {source}, which holds {held}{tail}"),
                "{opt}"
            );
            assert_eq!(f.arg, shell_quote(&words(opt)));
        }
        // One finding for the line, naming every option that opens one.
        let both = found(&["--ro-bind ~/.aws /a", "--ro-bind ~/.kube /k"]);
        assert_eq!(
            both.message,
            format!(
                "mounts ~/.aws, ~/.kube, which hold AWS credentials and Kubernetes credentials{tail}"
            )
        );
        assert_eq!(both.arg, "--ro-bind '~/.aws' /a --ro-bind '~/.kube' /k");
        // Hidden by later mounts over every place one lands.
        assert_hidden_by_later_mounts(
            "host-credentials",
            &[
                (&["--ro-bind / /", "--tmpfs /home"], false),
                (&["--ro-bind / /", "--tmpfs /home", "--tmpfs /root"], true),
                (&["--ro-bind /home/dev/.ssh /s", "--tmpfs /s"], true),
                (&["--ro-bind /home/dev /h", "--tmpfs /h/.ssh"], false),
            ],
        );
        // What a home holds besides credentials, and homes' look-alikes.
        assert_each_clean(&[
            "--ro-bind /home/dev/project /p",
            "--ro-bind ~/.cache/pip /pip",
            "--ro-bind /home/dev/.cargo/registry /r",
            "--ro-bind ~/.config/nvim /n",
            "--ro-bind /srv/home /x",
            "--ro-bind /home/dev/project/.ssh-notes /x",
            // What lies beside ssh keys and holds nothing secret.
            "--ro-bind ~/.ssh/known_hosts /k",
            "--ro-bind /home/dev/.ssh/id_ed25519.pub /k",
        ]);
        // But a key beside them, and a name that only ends like one, are.
        for opt in [
            "--ro-bind ~/.ssh/id_rsa /k",
            "--ro-bind /home/dev/.ssh/.pub /k",
            "--ro-bind /home/dev/.ssh/known_hosts.d /k",
            "--ro-bind /home/dev/.ssh/keys.pub/ /k",
            "--ro-bind ~/.ssh/config/ /k",
            // Written, these would let the task in as the user or run its code: they stay
            // with the keys, read-only too.
            "--ro-bind /root/.ssh/config /c",
            "--ro-bind ~/.ssh/authorized_keys /a",
        ] {
            found(&[opt]);
        }
        // docker, read-only too.
        let audit = docker_variant(&[], &["-v \"$HOME/.aws\":/root/.aws:ro"]);
        assert_eq!(rules(&audit.findings), ["host-credentials"]);
        assert_eq!(
            audit.findings[0].message,
            format!("mounts $HOME/.aws, which holds AWS credentials{tail}")
        );
    }

    #[test]
    fn bwrap_writable_home_or_root() {
        for (opt, source) in [
            ("--bind / /", "/"),
            ("--bind /home/dev /home/dev", "/home/dev"),
            ("--bind /home/dev/ /home/dev", "/home/dev/"),
            ("--bind /home /home", "/home"),
            ("--bind-try /root /root", "/root"),
            ("--dev-bind \"$HOME\" /home", "$HOME"),
            ("--dev-bind-try ~ /home", "~"),
            ("--bind /home/dev/code/.. /h", "/home/dev/code/.."),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            // `/` also holds the Docker socket, other host sockets and the host's /proc;
            // every one of them the homes' credentials.
            let root = usize::from(opt == "--bind / /");
            assert_eq!(count(&audit.findings, "docker-socket"), root, "{opt}");
            assert_eq!(count(&audit.findings, "host-socket"), root, "{opt}");
            assert_eq!(count(&audit.findings, "host-proc"), root, "{opt}");
            assert_eq!(count(&audit.findings, "host-credentials"), 1, "{opt}");
            assert_eq!(audit.findings.len(), 2 + 3 * root, "{opt}");
            assert_eq!(audit.findings[0].rule, "writable-home-or-root", "{opt}");
            assert_eq!(
                audit.findings[0].message,
                format!("binds {source} writable")
            );
            assert_eq!(audit.findings[0].arg, shell_quote(&words(opt)));
        }
        let read_only_root = bwrap_variant(&[], &["--ro-bind / /"]);
        assert_eq!(
            rules(&read_only_root.findings),
            [
                "docker-socket",
                "host-socket",
                "host-proc",
                "host-credentials"
            ]
        );
        for fine in [
            "--bind /home/dev/project /work",
            "--bind /tmp/airlock-scratch /work",
            "--bind /srv/home /x",
        ] {
            assert!(bwrap_variant(&[], &[fine]).findings.is_empty(), "{fine}");
        }
        // An empty variable at the end of a source leaves its parent.
        for (opt, parent) in [
            ("--bind \"/$DIR\" /x", "/"),
            ("--bind \"/${DIR}/\" /x", "/"),
            ("--bind \"$HOME/$SUB\" /x", "$HOME"),
            ("--bind \"$HOME/$A/$B/.\" /x", "$HOME"),
            ("--bind \"/home/dev/$SUB\" /x", "/home/dev"),
            ("--bind-try ~/\"$SUB\" /x", "~"),
            ("--overlay-src /usr --overlay \"/$UP\" /tmp/w /x", "/"),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            let found = only(&audit.findings, "writable-home-or-root");
            assert!(
                found.message.ends_with(&format!(
                    "writable: the variable it ends in may be empty, so it may be {parent}"
                )),
                "{opt}: {found:#?}"
            );
        }
        for fine in [
            "--bind \"/srv/$JOB\" /x",
            "--bind \"/home/$USER/code\" /x",
            "--bind \"/tmp/airlock-scratch-$ID\" /x",
        ] {
            let audit = bwrap_variant(&[], &[fine]);
            assert!(audit.findings.is_empty(), "{fine}: {audit:#?}");
        }
        let two = bwrap_variant(&[], &["--bind / /", "--bind /root /root"]);
        assert_eq!(count(&two.findings, "writable-home-or-root"), 2);
        // Sources that reach / or a home without spelling it are taken to be /.
        for (opt, why) in [
            ("--bind . /x", "working directory"),
            ("--bind root /root", "working directory"),
            ("--bind ../.. /x", "working directory"),
            ("--bind /proc/self/root /x", "process's root"),
            ("--bind /proc/1/root/home /x", "process's root"),
            ("--bind /proc/self/cwd /x", "process's root"),
            ("--bind /proc/1/task/1/root /x", "process's root"),
            ("--bind /proc/self/task/7/cwd/etc /x", "process's root"),
            ("--bind //proc/./42/fd/3 /x", "process's root"),
            ("--bind /dev/fd/5 /x", "process's root"),
            ("--bind /dev//fd/5/etc /x", "process's root"),
            ("--bind /dev/stdin /x", "process's root"),
            ("--dev-bind /dev/stderr /x", "process's root"),
            ("--bind \"$HOME\"/.. /x", "climbs out of the home"),
            ("--bind \"$HOME\"/code/../.. /x", "climbs out of the home"),
            ("--bind ~/.. /x", "climbs out of the home"),
            ("--bind ~dev/../.. /x", "climbs out of the home"),
            ("--bind \"$PWD\" /x", "environment"),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings)[0], "writable-home-or-root", "{opt}");
            assert_eq!(count(&audit.findings, "writable-home-or-root"), 1, "{opt}");
            let message = &audit.findings[0].message;
            assert!(message.contains(why), "{opt}: {message}");
            assert!(
                message.ends_with("so it may be / or a home"),
                "{opt}: {message}"
            );
        }
        for fine in [
            "--bind \"$HOME\"/code /x",
            "--bind ~/code/../work /x",
            "--ro-bind /proc/x /x",
            "--bind /dev/null /dev/null",
            "--bind /dev/fdx /x",
        ] {
            assert!(bwrap_variant(&[], &[fine]).findings.is_empty(), "{fine}");
        }
        let overlay = bwrap_variant(
            &[],
            &["--overlay-src /usr", "--overlay /home/dev /tmp/w /usr"],
        );
        assert_eq!(
            rules(&overlay.findings),
            ["writable-home-or-root", "host-credentials"]
        );
        // The upper layer of an overlay is written on the host: a system tree there is
        // host-mount-rw, and one holding sockets hands them over.
        let upper = |rwsrc: &str| {
            let overlay = format!("--overlay {rwsrc} /var/tmp/work /x");
            bwrap_variant(&[], &["--overlay-src /usr", &overlay])
        };
        let etc = upper("/etc");
        assert_eq!(rules(&etc.findings), ["host-mount-rw"]);
        assert_eq!(etc.findings[0].message, "mounts /etc read-write");
        assert_eq!(etc.findings[0].arg, "--overlay /etc /var/tmp/work /x");
        assert_eq!(
            rules(&upper("/run").findings),
            ["host-mount-rw", "docker-socket", "host-socket"]
        );
        assert!(upper("/home/dev/upper").findings.is_empty());
    }

    #[test]
    fn bwrap_host_mount_rw() {
        for opt in [
            "--bind /etc /etc",
            "--bind /etc/passwd /etc/passwd",
            "--bind-try /usr/local /usr/local",
            "--dev-bind /run /run",
            "--bind /var /var",
            "--bind /var/lib/docker /d",
            "--bind /proc /hostproc",
            "--bind /sys /sys",
            "--bind /boot /boot",
            "--bind /usr /usr",
            "--bind /opt/tool /opt/tool",
            "--bind ~/.ssh /home/dev/.ssh",
            "--bind \"$HOME\"/.bashrc /b",
            "--bind /home/dev/.config /c",
            "--bind /root/.ssh /s",
            "--bind /dev/shm /dev/shm",
            "--bind /dev/mqueue /dev/mqueue",
            "--bind /dev /dev",
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings)[0], "host-mount-rw", "{opt}");
            // /run also holds the Docker socket (/var only the link /var/run to the sandbox's
            // own /run).
            let socket = opt.contains(" /run ");
            assert_eq!(
                count(&audit.findings, "docker-socket"),
                usize::from(socket),
                "{opt}"
            );
            let source = &words(opt)[1];
            assert_eq!(
                audit.findings[0].message,
                format!("mounts {source} read-write")
            );
            assert_eq!(audit.findings[0].arg, shell_quote(&words(opt)));
        }
        for fine in [
            "--ro-bind /etc /etc",
            "--bind /home/dev/project /work",
            "--bind ~/code /code",
            "--bind /srv/data /data",
            "--bind /tmp/x /tmp/x",
            "--bind /var/tmp/airlock-scratch /work",
            "--bind /usr-local /x",
            "--bind /dev/null /dev/null",
            "--dev-bind /dev/kvm /dev/kvm",
        ] {
            assert!(bwrap_variant(&[], &[fine]).findings.is_empty(), "{fine}");
        }
    }

    #[test]
    fn bwrap_docker_socket() {
        for opt in [
            "--ro-bind / /",
            "--ro-bind /run /run",
            "--ro-bind-try /var/run /var/run",
            "--ro-bind /run/docker.sock /s",
            "--ro-bind /var/run/docker.sock /s",
            "--ro-bind /proc/self/root /h",
            "--ro-bind /proc/1/task/1/root /h",
            "--overlay-src /run --tmp-overlay /r",
            "--bind / /",
            // A rootless daemon's socket, in its user's runtime directory.
            "--ro-bind /run/user/1000/docker.sock /var/run/docker.sock",
            "--ro-bind /run/user/1000 /run/user/1000",
            "--ro-bind /run/user /run/user",
            // What this audit cannot know is taken to be `/` (see `held_tree`).
            "--ro-bind . /x",
            "--ro-bind .. /x",
            "--ro-bind '$PWD' /x",
            "--ro-bind '/$DIR' /x",
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            assert_eq!(count(&audit.findings, "docker-socket"), 1, "{opt}");
            let socket = only(&audit.findings, "docker-socket");
            assert!(opt.starts_with(&socket.arg), "{opt}: {}", socket.arg);
        }
        assert_eq!(
            only(
                &bwrap_variant(&[], &["--ro-bind /run /r"]).findings,
                "docker-socket"
            )
            .message,
            "mounts /run, which holds the Docker socket"
        );
        // `/var` holds the host's link `/var/run`, which leads to the sandbox's own `/run`.
        for fine in [
            "--ro-bind /run/user/1000/x /x",
            "--ro-bind /usr /usr",
            "--ro-bind ./src /x",
            "--ro-bind \"$FOO/cache\" /x",
            "--ro-bind /var /var",
            "--ro-bind /var /v",
        ] {
            let audit = bwrap_variant(&[], &[fine]);
            assert_eq!(count(&audit.findings, "docker-socket"), 0, "{fine}");
        }
        // One way out is one finding, naming every option that opens it.
        for (opts, message) in [
            (
                &["--ro-bind /run /run", "--ro-bind /var/run /var/run"][..],
                "mounts the Docker socket through /run, /var/run",
            ),
            (
                &["--ro-bind / /", "--ro-bind /run /r"],
                "mounts the Docker socket through /, /run",
            ),
            (
                &["--ro-bind /run /a", "--bind /run /b"],
                "mounts /run, which holds the Docker socket",
            ),
            (
                &[
                    "--ro-bind /run/docker.sock /a",
                    "--ro-bind /var/run/docker.sock /b",
                ],
                "mounts the Docker socket",
            ),
        ] {
            let audit = bwrap_variant(&[], opts);
            let socket = only(&audit.findings, "docker-socket");
            assert_eq!(socket.message, message, "{opts:?}");
            assert_eq!(socket.arg, shell_quote(&words(&opts.join(" "))));
        }
        // A later bind covers the socket `/` brought: it is the one way out.
        let covered = bwrap_variant(&[], &["--ro-bind / /", "--ro-bind /run /run"]);
        let socket = only(&covered.findings, "docker-socket");
        assert_eq!(socket.message, "mounts /run, which holds the Docker socket");
        assert_eq!(socket.arg, "--ro-bind /run /run");
        // It is hidden where a later mount covers every place a socket lands. `/`'s lands at
        // /run/docker.sock: the sandbox's /var/run is the host's link to it, and a mount
        // through that link lands on /run (or fails, where the link is absolute). Where the
        // line itself puts a directory at /var/run, it is no link.
        for (opts, hidden) in [
            (&["--ro-bind / /", "--tmpfs /run"][..], true),
            (&["--ro-bind / /", "--tmpfs /var/run"], true),
            (&["--ro-bind / /", "--tmpfs /run", "--tmpfs /var/run"], true),
            (&["--ro-bind / /", "--tmpfs /var/run/"], true),
            (&["--ro-bind / /h", "--tmpfs /h/run"], true),
            (&["--ro-bind / /h", "--tmpfs /h/var/run"], true),
            (&["--ro-bind / /h", "--tmpfs /var/run"], false),
            (
                &["--ro-bind / /", "--tmpfs /var", "--tmpfs /var/run"],
                false,
            ),
            (
                &["--ro-bind / /", "--ro-bind-try /x /var", "--tmpfs /var/run"],
                false,
            ),
            (&["--ro-bind-try / /", "--tmpfs /var/run"], false),
            (&["--ro-bind /run /var/run", "--tmpfs /run"], false),
            (&["--ro-bind /run /run", "--tmpfs /var/run"], false),
            (&["--ro-bind /var/run /run", "--tmpfs /var/run"], false),
            (&["--ro-bind /var/run /var/run", "--tmpfs /var/run"], true),
            (&["--ro-bind /run /r", "--ro-bind /usr /r"], true),
            (&["--ro-bind /run /r", "--tmpfs /r/docker"], false),
        ] {
            let audit = bwrap_variant(&[], opts);
            assert_eq!(
                count(&audit.findings, "docker-socket"),
                usize::from(!hidden),
                "{opts:?}"
            );
        }
    }

    #[test]
    fn bwrap_later_mounts_hide_earlier_ones() {
        // bubblewrap mounts in argument order: a later mount on the same path or a directory
        // above it hides what an earlier one brought.
        for hidden in [
            &["--bind /home /home", "--tmpfs /home"][..],
            &["--bind /home/dev /home/dev", "--tmpfs /home"],
            &["--bind /etc /x/etc", "--ro-bind /usr /x"],
            &["--bind-try /root /root", "--dir /root", "--tmpfs /root/"],
            &["--dev-bind /dev /dev", "--dev /dev"],
            &["--overlay-src /run", "--tmp-overlay /r", "--tmpfs /r"],
            &[
                "--overlay-src /usr",
                "--overlay /home/dev /tmp/w /u",
                "--tmpfs /u",
            ],
            &[
                "--bind /etc /etc",
                "--cap-add CAP_SYS_ADMIN",
                "--cap-drop ALL",
                "--tmpfs /etc",
            ],
        ] {
            let audit = bwrap_variant(&[], hidden);
            assert!(audit.findings.is_empty(), "{hidden:?}: {audit:#?}");
        }
        let twice = bwrap_variant(&[], &["--bind / /", "--ro-bind / /"]);
        assert_eq!(
            rules(&twice.findings),
            [
                "docker-socket",
                "host-socket",
                "host-proc",
                "host-credentials"
            ]
        );
        for found in &twice.findings {
            assert_eq!(found.arg, "--ro-bind / /");
        }

        // Nothing hides a mount but a later one at or above it, certain to be made.
        for kept in [
            &["--tmpfs /home", "--bind /home /home"][..],
            &["--bind /home /home", "--tmpfs /home/dev"],
            &["--bind /home /home", "--tmpfs /homes"],
            &["--bind /home /home", "--bind-try /srv/empty /home"],
            &["--bind /home /home", "--ro-bind-try /srv/empty /"],
            &["--bind /home /home", "--tmpfs /x/../home"],
            &["--bind /home /home", "--dir /home", "--symlink /x /home/y"],
            &["--bind /home /home", "--overlay-src /usr"],
        ] {
            let audit = bwrap_variant(&[], kept);
            assert_eq!(
                rules(&audit.findings),
                ["writable-home-or-root", "host-credentials"],
                "{kept:?}"
            );
        }
        // A task that keeps CAP_SYS_ADMIN unmounts the later mount and finds the earlier one.
        for (drop, add) in [
            (&["--cap-drop ALL"][..], &[][..]),
            (&[], &["--cap-add CAP_SYS_ADMIN"]),
            (&[], &["--cap-add cap_sys_admin"]),
            (&[], &["--cap-add ALL"]),
            // libcap reads these as CAP_SYS_ADMIN too (bubblewrap 0.8 was seen to grant it).
            (&[], &["--cap-add 0x15"]),
            (&[], &["--cap-add 025"]),
            (&[], &["--cap-add cap_sys_admin+ep"]),
            (&[], &["--cap-add 21x"]),
            (&[], &["--cap-add CAP_SYS_ADMIN,CAP_NET_RAW"]),
        ] {
            let mut add = add.to_vec();
            add.extend(["--bind /home /home", "--tmpfs /home"]);
            let audit = bwrap_variant(drop, &add);
            assert_eq!(
                count(&audit.findings, "writable-home-or-root"),
                1,
                "{drop:?} {add:?}"
            );
        }
    }

    #[test]
    fn bwrap_setup_in_writable_bind() {
        for (opts, bind) in [
            (
                &["--bind /srv/w /w", "--chmod 0755 /w/bin"][..],
                "--bind /srv/w /w",
            ),
            (
                &["--bind /srv/w /w", "--file 5 /w/config"],
                "--bind /srv/w /w",
            ),
            (
                &["--bind-try /srv/w /w", "--dir /w/cache/new"],
                "--bind-try /srv/w /w",
            ),
            (&["--bind-fd 4 /w", "--symlink /x /w/a/b"], "--bind-fd 4 /w"),
            (
                &[
                    "--overlay-src /usr",
                    "--overlay /srv/up /srv/wk /o",
                    "--file 5 /o/x",
                ],
                "--overlay /srv/up /srv/wk /o",
            ),
            // A -try mount in between may be skipped.
            (
                &[
                    "--bind /srv/w /w",
                    "--ro-bind-try /srv/r /w/r",
                    "--chmod 0700 /w/r/x",
                ],
                "--bind /srv/w /w",
            ),
        ] {
            let audit = bwrap_variant(&[], opts);
            let found = only(&audit.findings, "setup-in-writable-bind");
            let setup = opts.last().unwrap();
            assert_eq!(&found.arg, setup, "{opts:?}");
            assert!(
                found
                    .message
                    .contains(&format!("inside a writable host bind ({bind})")),
                "{opts:?}: {found:#?}"
            );
        }
        for fine in [
            &["--ro-bind /srv/w /w", "--chmod 0755 /w/bin"][..],
            &["--bind /srv/w /w", "--tmpfs /w/t", "--file 5 /w/t/x"],
            &["--bind /srv/w /w", "--chmod 0755 /w"],
            // The link a task could leave at the end of the path is not followed here.
            &["--bind /srv/w /w", "--dir /w/cache"],
            &["--bind /srv/w /w", "--symlink /x /w/link"],
            &["--chmod 0755 /w/bin", "--bind /srv/w /w"],
        ] {
            assert_no_rule("setup-in-writable-bind", fine);
        }
    }

    #[test]
    fn bwrap_source_in_writable_bind() {
        for (opts, inner, outer) in [
            (
                &["--bind /srv/w /w", "--bind /srv/w/cache /c"][..],
                "--bind /srv/w/cache /c",
                "--bind /srv/w /w",
            ),
            // Order does not matter: the link is left by an earlier run.
            (
                &["--bind-try /srv/w/cache /c", "--bind /srv/w/ /w"],
                "--bind-try /srv/w/cache /c",
                "--bind /srv/w/ /w",
            ),
            (
                &["--bind ~/work /w", "--dev-bind ~/work/dev /d"],
                "--dev-bind '~/work/dev' /d",
                "--bind '~/work' /w",
            ),
            (
                &[
                    "--bind /srv/w /w",
                    "--overlay-src /usr",
                    "--overlay /srv/w/up /tmp/wk /o",
                ],
                "--overlay /srv/w/up /tmp/wk /o",
                "--bind /srv/w /w",
            ),
            // Mounted in place two names down: the task renames the directory above it and
            // leaves a link in its stead (a probe did).
            (
                &["--bind /srv/w /w", "--bind /srv/w/a/b /w/a/b"],
                "--bind /srv/w/a/b /w/a/b",
                "--bind /srv/w /w",
            ),
        ] {
            let audit = bwrap_variant(&[], opts);
            let found = only(&audit.findings, "source-in-writable-bind");
            assert_eq!(found.arg, inner, "{opts:?}");
            assert!(
                found
                    .message
                    .contains(&format!("which {outer} makes writable")),
                "{opts:?}: {found:#?}"
            );
        }
        // Read-only, it shows any host path, where the line does not show all of `/` anyway.
        let read = bwrap_variant(&[], &["--bind /srv/w /w", "--ro-bind /srv/w/.cfg /cfg"]);
        assert_eq!(
            only(&read.findings, "source-in-writable-bind").message,
            "mounts /srv/w/.cfg read-only, a path inside /srv/w, which --bind /srv/w /w makes \
             writable: a task that leaves a symlink there (in an earlier run) makes bubblewrap \
             mount the host path it names instead, / included"
        );
        // Pinned only by a mount made after the outer one, and not by a `-try` one (its
        // source may be missing, and a task then puts a link in its place).
        for opts in [
            &[
                "--ro-bind /srv/w/.git /w/.git",
                "--bind /srv/w /w",
                "--ro-bind /srv/w/.git/hooks /h",
            ][..],
            &[
                "--bind /srv/w /w",
                "--ro-bind-try /srv/w/.git /w/.git",
                "--ro-bind /srv/w/.git/hooks /h",
            ],
        ] {
            let audit = bwrap_variant(&[], opts);
            assert!(
                audit
                    .findings
                    .iter()
                    .any(|f| f.rule == "source-in-writable-bind"
                        && f.arg == "--ro-bind /srv/w/.git/hooks /h"),
                "{opts:?}: {:#?}",
                audit.findings
            );
        }
        for fine in [
            &["--bind /srv/w /w", "--ro-bind /srv/w/.git /w/.git"][..],
            // The path is pinned one name below the outer source by a later mount: the
            // task cannot rename /w/.git, and below it the read-only bind or the tmpfs
            // keeps the host's files out of its reach.
            &[
                "--bind /srv/w /w",
                "--ro-bind /srv/w/.git /w/.git",
                "--ro-bind /srv/w/.git/hooks /w/.git/hooks",
            ],
            &[
                "--bind /srv/w /w",
                "--ro-bind /srv/w/.git /w/.git",
                "--ro-bind /srv/w/.git/hooks /h",
            ],
            &[
                "--bind /srv/w /w",
                "--tmpfs /w/a",
                "--ro-bind /srv/w/a/b /b",
            ],
            &[
                "--ro-bind / /",
                "--bind /srv/w /w",
                "--ro-bind /srv/w/.cfg /cfg",
            ],
            &["--bind /srv/w /w", "--bind /srv/w2 /w2"],
            &["--bind /srv/w /w", "--bind /srv/w /w2"],
            &["--ro-bind /srv/w /w", "--bind /srv/w/x /x"],
            &["--bind \"$W\" /w", "--bind /srv/x /x"],
            // A mount point cannot be removed or renamed where it is mounted.
            &["--bind /srv/w /w", "--bind /srv/w/sub /w/sub"],
            &[
                "--bind /srv/w /w",
                "--bind /srv/w/a/b /c",
                "--remount-ro /w",
            ],
            // `/` or a home is reported as writable-home-or-root.
            &["--bind / /", "--bind /srv/x /x"],
            &["--bind ~ /h", "--bind ~/x /x"],
        ] {
            assert_no_rule("source-in-writable-bind", fine);
        }
    }

    #[test]
    fn bwrap_remount_ro() {
        // `--remount-ro DEST` makes the top mount on DEST read-only, once the task cannot
        // remount it back (every capability dropped, as the variant line does).
        assert_each_clean(&[
            "--bind /etc /etc --remount-ro /etc",
            "--bind /etc /etc --remount-ro /etc/",
            "--bind /etc /x --remount-ro //x",
            "--bind /home/dev/project /p --remount-ro /p",
            "--bind /etc /etc --tmpfs /etc/ssl --remount-ro /etc",
            "--overlay-src /usr --overlay /etc /tmp/w /u --remount-ro /u",
        ]);
        // Not a later remount of that very mount: nothing changes.
        for kept in [
            &["--bind /etc /x", "--remount-ro /etc"][..],
            &["--bind /etc /etc", "--remount-ro /etc/ssl"],
            &["--remount-ro /etc", "--bind /etc /etc"],
            &[
                "--bind /etc /etc",
                "--bind-try /srv/x /etc",
                "--remount-ro /etc",
            ],
        ] {
            let audit = bwrap_variant(&[], kept);
            let found = only(&audit.findings, "host-mount-rw");
            assert!(found.arg.starts_with("--bind /etc /"), "{kept:?}");
            assert!(kept.contains(&found.arg.as_str()), "{kept:?}");
            assert_eq!(found.message, "mounts /etc read-write", "{kept:?}");
        }
        // A line's own mount below DEST stays writable, whether made before or after.
        for opts in [
            &[
                "--bind /etc /etc",
                "--bind /var /etc/v",
                "--remount-ro /etc",
            ][..],
            &[
                "--bind /etc /etc",
                "--remount-ro /etc",
                "--bind /var /etc/v",
            ],
        ] {
            let audit = bwrap_variant(&[], opts);
            assert_eq!(
                only(&audit.findings, "host-mount-rw").arg,
                "--bind /var /etc/v"
            );
        }
        // So do the host's own mounts below the source: the finding stays, and says so.
        for (opts, rule, below) in [
            (
                &["--bind / /", "--remount-ro /"][..],
                "writable-home-or-root",
                "/dev/shm",
            ),
            (
                &["--bind /run /run", "--remount-ro /run"],
                "host-mount-rw",
                "/run/user/*",
            ),
            (
                &["--dev-bind /dev /dev", "--remount-ro /dev"],
                "host-mount-rw",
                "/dev/pts",
            ),
        ] {
            let audit = bwrap_variant(&[], opts);
            let found = only(&audit.findings, rule);
            assert!(found.message.contains(below), "{opts:?}: {}", found.message);
            assert!(
                found
                    .message
                    .contains(&format!("; {} makes only its top mount", opts[1])),
                "{}",
                found.message
            );
        }
        // A task that keeps CAP_SYS_ADMIN remounts it writable.
        let caps = bwrap_variant(
            &["--cap-drop ALL"],
            &["--bind /etc /etc", "--remount-ro /etc"],
        );
        assert_eq!(rules(&caps.findings), ["host-mount-rw", "root-caps-kept"]);
    }

    #[test]
    fn bwrap_host_socket() {
        for (opt, message) in [
            (
                "--ro-bind /run/user/1000 /run/user/1000",
                "mounts /run/user/1000, which holds the socket of a D-Bus session bus, a \
                 user's systemd, Podman, an ssh-agent, gpg-agent, GNOME Keyring's agents",
            ),
            (
                "--ro-bind /run/user/1000/bus /bus",
                "mounts /run/user/1000/bus, which holds the socket of a D-Bus session bus",
            ),
            (
                "--ro-bind /var/run/dbus/system_bus_socket /s",
                "mounts /var/run/dbus/system_bus_socket, which holds the socket of the D-Bus \
                 system bus",
            ),
            (
                "--bind /tmp /tmp",
                "mounts /tmp, which holds the socket of an X server, an ssh-agent",
            ),
            (
                "--ro-bind /tmp/.X11-unix/X0 /tmp/.X11-unix/X0",
                "mounts /tmp/.X11-unix/X0, which holds the socket of an X server",
            ),
            (
                "--ro-bind /tmp/ssh-XXXXabcd/agent.42 /agent",
                "mounts /tmp/ssh-XXXXabcd/agent.42, which holds the socket of an ssh-agent",
            ),
            (
                "--ro-bind /run/containerd /c",
                "mounts /run/containerd, which holds the socket of containerd",
            ),
            // The security-team review's: dockerd's own containerd (Docker in Docker), and a
            // shim's socket.
            (
                "--ro-bind /var/run/docker/containerd/containerd.sock /c",
                "mounts /var/run/docker/containerd/containerd.sock, which holds the socket of \
                 containerd",
            ),
            (
                "--ro-bind /run/containerd/s /c",
                "mounts /run/containerd/s, which holds the socket of containerd",
            ),
            // A review's finds: managers that start privileged containers, and agents.
            (
                "--ro-bind /run/k3s/containerd/containerd.sock /c",
                "mounts /run/k3s/containerd/containerd.sock, which holds the socket of \
                 containerd",
            ),
            (
                "--ro-bind /var/snap/lxd/common/lxd/unix.socket /l",
                "mounts /var/snap/lxd/common/lxd/unix.socket, which holds the socket of LXD",
            ),
            (
                "--ro-bind /run/crio /c",
                "mounts /run/crio, which holds the socket of CRI-O",
            ),
            (
                "--ro-bind /run/user/1000/gcr/ssh /a",
                "mounts /run/user/1000/gcr/ssh, which holds the socket of an ssh-agent",
            ),
            (
                "--ro-bind '$XDG_RUNTIME_DIR/bus' /bus",
                "mounts $XDG_RUNTIME_DIR/bus (taken to be /run/user/*/bus: the variable names \
                 that place), which holds the socket of a D-Bus session bus",
            ),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            let found = only(&audit.findings, "host-socket");
            assert!(
                found.message.starts_with(message),
                "{opt}: {}",
                found.message
            );
            assert!(found.message.ends_with("acts outside the sandbox"));
            assert_eq!(found.arg, opt);
        }
        // One finding for the line, naming every option that opens one.
        let both = bwrap_variant(&[], &["--ro-bind /run /run", "--ro-bind /var/run /var/run"]);
        let found = only(&both.findings, "host-socket");
        assert!(found.message.starts_with("mounts /run, /var/run, which hold the socket of the D-Bus system bus, systemd's private socket, a D-Bus session bus"), "{}", found.message);
        assert_eq!(found.arg, "--ro-bind /run /run --ro-bind /var/run /var/run");
        // Hidden by a later mount over every place one lands; a uid's directory is any.
        assert_hidden_by_later_mounts(
            "host-socket",
            &[
                (&["--ro-bind /run/user/1000 /u", "--tmpfs /u"], true),
                (&["--ro-bind /run/user /u", "--tmpfs /u/1000"], false),
                (&["--ro-bind /run/user /u", "--tmpfs /u"], true),
                (&["--ro-bind / /", "--tmpfs /run"], false),
                (&["--ro-bind / /", "--tmpfs /run", "--tmpfs /tmp"], false),
                (
                    &[
                        "--ro-bind / /",
                        "--tmpfs /run",
                        "--tmpfs /tmp",
                        "--tmpfs /var",
                    ],
                    true,
                ),
                (
                    &[
                        "--ro-bind / /",
                        "--tmpfs /var/run",
                        "--tmpfs /tmp",
                        "--tmpfs /var/lib",
                        "--tmpfs /var/snap",
                    ],
                    true,
                ),
                (&["--ro-bind /run /var/run", "--tmpfs /run"], false),
            ],
        );
        assert_each_clean(&[
            "--ro-bind /run/user/1000/x /x",
            "--ro-bind /run/dbus/machine-id /x",
            "--ro-bind /run/systemd/resolve/stub-resolv.conf /etc/resolv.conf",
            "--bind /tmp/build /tmp/build",
            "--ro-bind /tmp/ssh_config /x",
            "--ro-bind /usr /usr",
        ]);
    }

    #[test]
    fn bwrap_desktop_and_agent_sockets() {
        for (opts, held) in [
            (&["--ro-bind /run/user/1000/pipewire-0 /p"][..], "PipeWire"),
            (
                &["--ro-bind /run/user/1000/pipewire-0-manager /p"],
                "PipeWire",
            ),
            (&["--ro-bind /run/user/1000/pulse /p"], "PulseAudio"),
            (&["--ro-bind /run/user/1000/pulse/native /p"], "PulseAudio"),
            (
                &["--ro-bind /run/user/1000/wayland-1 /w"],
                "a Wayland compositor",
            ),
            (&["--ro-bind \"$SSH_AUTH_SOCK\" /agent"], "an ssh-agent"),
            (&["--ro-bind \"${SSH_AUTH_SOCK}\" /agent"], "an ssh-agent"),
            // The line says where the task finds its agent: a bind that lands there, or of a
            // host tree holding that path, hands one over.
            (
                &[
                    "--ro-bind /home/dev/.ssh/agent.sock /agent",
                    "--setenv SSH_AUTH_SOCK /agent",
                ],
                "an ssh-agent",
            ),
            (
                &["--setenv SSH_AUTH_SOCK /a/s", "--ro-bind /srv/agents /a"],
                "an ssh-agent",
            ),
            (
                &[
                    "--ro-bind /home/dev/.1password /x",
                    "--setenv SSH_AUTH_SOCK /home/dev/.1password/agent.sock",
                ],
                "an ssh-agent",
            ),
        ] {
            let audit = bwrap_variant(&[], opts);
            let found = only(&audit.findings, "host-socket");
            assert!(
                found.message.contains(&format!("socket of {held}:")),
                "{opts:?}: {}",
                found.message
            );
            let written = |o: &&str| shell_quote(&words(o)) == found.arg;
            assert!(opts.iter().any(written), "{opts:?}: {}", found.arg);
        }
        // Every socket of a user's runtime directory, in the table's order.
        let runtime = bwrap_variant(&[], &["--ro-bind /run/user/1000 /u"]);
        assert!(only(&runtime.findings, "host-socket").message.starts_with(
            "mounts /run/user/1000, which holds the socket of a D-Bus session bus, a \
                 user's systemd, Podman, an ssh-agent, gpg-agent, GNOME Keyring's agents, a \
                 Wayland compositor, PulseAudio, PipeWire: "
        ));
        // Hidden by a later mount where it lands; a socket a cover leaves is still named,
        // and the one it hides is not.
        let covered = bwrap_variant(
            &[],
            &[
                "--ro-bind /run/user/1000 /u",
                "--tmpfs /u/pulse",
                "--tmpfs /u/bus",
            ],
        );
        let found = only(&covered.findings, "host-socket");
        assert!(!found.message.contains("PulseAudio"), "{}", found.message);
        assert!(
            !found.message.contains("D-Bus session bus"),
            "{}",
            found.message
        );
        assert!(found.message.contains("PipeWire"), "{}", found.message);
        assert_each_clean(&[
            "--ro-bind /run/user/1000/pipewire.conf /x",
            "--ro-bind /run/user/1000/pulsex /x",
            "--ro-bind \"$SSH_AUTH_SOCK_DIR/x\" /x",
            "--setenv SSH_AUTH_SOCK /agent",
            "--setenv SSH_AUTH_SOCK relative/agent",
            "--setenv SSH_AUTH_SOCKET /agent --ro-bind /srv/a /agent",
            "--ro-bind /srv/a /agent --setenv SSH_AUTH_SOCK /agent --tmpfs /agent",
            "--ro-bind /srv/a /x --setenv SSH_AUTH_SOCK /y",
        ]);
    }

    #[test]
    fn bwrap_host_proc() {
        // A bind of / (or of a source taken to be /) brings the host's /proc along unless a
        // later mount covers it; so does a bind of /proc or of one process's directory.
        for (opts, arg) in [
            (&["--ro-bind / /"][..], "--ro-bind / /"),
            (
                &["--ro-bind / /", "--proc /proc", "--ro-bind / /"],
                "--ro-bind / /",
            ),
            (&["--proc /proc", "--ro-bind / /"], "--ro-bind / /"),
            (&["--ro-bind / /host"], "--ro-bind / /host"),
            (&["--ro-bind / /host", "--tmpfs /proc"], "--ro-bind / /host"),
            (&["--ro-bind / /", "--proc /proc/1"], "--ro-bind / /"),
            (&["--ro-bind-try /proc /x"], "--ro-bind-try /proc /x"),
            (&["--ro-bind /proc/ /proc"], "--ro-bind /proc/ /proc"),
            (&["--ro-bind /proc/1 /one"], "--ro-bind /proc/1 /one"),
            (&["--ro-bind /proc/self /me"], "--ro-bind /proc/self /me"),
            (&["--ro-bind /proc/1/root /h"], "--ro-bind /proc/1/root /h"),
            (&["--dev-bind /proc /p"], "--dev-bind /proc /p"),
            (
                &["--ro-bind /proc /a", "--ro-bind / /b", "--ro-bind /proc /a"],
                "--ro-bind / /b --ro-bind /proc /a",
            ),
        ] {
            let audit = bwrap_variant(&[], opts);
            let proc = only(&audit.findings, "host-proc");
            assert_eq!(proc.arg, arg, "{opts:?}");
            assert!(
                proc.message.starts_with("mounts the host's /proc"),
                "{}",
                proc.message
            );
        }
        let writable = bwrap_variant(&[], &["--bind /proc /p"]);
        assert_eq!(rules(&writable.findings), ["host-mount-rw", "host-proc"]);
        // A fresh proc, or any later mount, over the place it lands hides it.
        for opts in [
            &["--ro-bind / /", "--proc /proc"][..],
            &["--ro-bind / /", "--tmpfs /proc"],
            &["--ro-bind / /host", "--proc /host/proc"],
            &["--ro-bind /proc /p", "--tmpfs /p"],
            &["--ro-bind /proc/1 /one", "--ro-bind /usr /"],
        ] {
            let audit = bwrap_variant(&[], opts);
            assert_eq!(count(&audit.findings, "host-proc"), 0, "{opts:?}");
        }
        // What shows the machine, not its processes, and what is no bind of the host's proc.
        assert_each_clean(&[
            "--ro-bind /proc/cpuinfo /cpuinfo",
            "--ro-bind /proc/sys /s",
            "--ro-bind /usr /proc",
            "--ro-bind src /x",
            "--ro-bind /procfs /x",
            "--overlay-src /proc --tmp-overlay /x",
        ]);
    }

    #[test]
    fn bwrap_env_not_cleared() {
        let audit = bwrap_variant(&["--clearenv"], &[]);
        assert_eq!(rules(&audit.findings), ["env-not-cleared"]);
        assert!(
            bwrap_variant(&["--clearenv"], &["--clearenv", "--setenv A b"])
                .findings
                .is_empty()
        );
    }

    #[test]
    fn bwrap_env_credential() {
        let github = format!("ghp_{}", "a1B2".repeat(9));
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        for (name, value, why) in [
            ("GITHUB_TOKEN", "x", "name"),
            ("AWS_SECRET_ACCESS_KEY", "x", "name"),
            ("OPENAI_API_KEY", "x", "name"),
            ("PGPASSWORD", "x", "name"),
            ("db_password", "x", "name"),
            ("GH_PAT", "x", "name"),
            ("NPM_TOKEN", "", "name"),
            ("GPG_PASSPHRASE", "x", "name"),
            ("DEPLOY_PRIVATE_KEY", "x", "name"),
            ("GIT_CREDENTIALS", "x", "name"),
            // The security-team review's finds.
            ("MYSQL_PWD", "x", "name"),
            ("DB_PASS", "x", "name"),
            ("AWS_ACCESS_KEY_ID", "x", "name"),
            ("RAILS_MASTER_KEY", "x", "name"),
            ("AZURE_STORAGE_CONNECTION_STRING", "x", "name"),
            ("CI_JOB_JWT", "x", "name"),
            ("AWS_CREDS", "x", "name"),
            ("PGPASS", "x", "name"),
            ("MY_SSH_KEY", "x", "name"),
            // Beside the words that make a name about a credential, or a count, not one.
            ("VAULT_SECRET_ID", "x", "name"),
            ("DJANGO_SECRET_KEY", "x", "name"),
            ("HF_TOKEN", "x", "name"),
            (
                "MAX_TOKENS",
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
                "value",
            ),
            // The sign-off's and the security-team review's: a count word elsewhere, a
            // version after the last word, camelCase, a key, a webhook, a DSN.
            ("MAX_BOT_TOKEN", "x", "name"),
            ("PER_USER_TOKEN", "x", "name"),
            ("GH_PAT_PER_REPO", "x", "name"),
            ("CI_JOB_JWT_V2", "x", "name"),
            ("githubToken", "x", "name"),
            ("OPENAI_KEY", "x", "name"),
            ("SIGNING_KEY", "x", "name"),
            ("SLACK_WEBHOOK_URL", "x", "name"),
            ("DISCORD_WEBHOOK", "x", "name"),
            ("SENTRY_DSN", "x", "name"),
            ("DOCKER_AUTH_CONFIG", "x", "name"),
            ("BW_SESSION", "x", "name"),
            // The explain review's: npm's auth settings, a header, names alone.
            ("NPM_CONFIG__AUTH", "x", "name"),
            ("NPM_CONFIG__AUTHTOKEN", "x", "name"),
            ("BASIC_AUTH", "x", "name"),
            ("HTTP_AUTHORIZATION", "x", "name"),
            ("AUTHORIZATION", "x", "name"),
            ("JWT", "x", "name"),
            ("CREDS", "x", "name"),
            ("X", "Bearer abcdef1234567890", "value"),
            ("X", "Authorization: Basic dXNlcjpwYXNz", "value"),
            ("X", "glrt-abcdefghij0123456789", "value"),
            ("X", "AKIAIOSFODNN7EXAMPLE", "value"),
            ("X", "sk_live_abcdefghijklmnopqrstuvwx", "value"),
            // Substituted by a CI system before any shell runs.
            (
                "NODE_SETTING",
                "${{ secrets.NPM_TOKEN }}",
                "value, a CI system's secret substituted in",
            ),
            (
                "SYSTEM_X",
                "$(System.AccessToken)",
                "value, a CI system's secret substituted in",
            ),
            ("HEADER", github.as_str(), "value"),
            ("X", "glpat-abcdefghij0123456789", "value"),
            (
                "X",
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
                "value",
            ),
            (
                "DATABASE_URL",
                "postgres://app:hunter2@db:5432/app",
                "value",
            ),
            ("X", jwt, "value"),
            // A token inside the value (a review's finds): after a scheme, as a URL's user,
            // with a space after it, in a header.
            ("X", &*format!("Bearer {github}"), "value"),
            ("X", &*format!("https://{github}@github.com/o/r"), "value"),
            ("X", &*format!("{github} "), "value"),
            (
                "GIT_CONFIG_VALUE_0",
                &*format!("Authorization: Bearer {jwt}"),
                "value",
            ),
            (
                "KEY",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n",
                "value",
            ),
            // Filled by the shell that runs the line from the host's credential.
            (
                "FOO",
                "$GITHUB_TOKEN",
                "value, a shell variable named like one",
            ),
            (
                "X",
                "a${AWS_SECRET_ACCESS_KEY:-}b",
                "value, a shell variable named like one",
            ),
        ] {
            let args = ["--setenv".to_string(), name.to_string(), value.to_string()];
            let line = format!(
                "bwrap {} {} -- /bin/true",
                CLEAN_BWRAP_OPTIONS.join(" "),
                shell_quote(&args)
            );
            let audit = bwrap(&line);
            let found = only(&audit.findings, "env-credential");
            assert_eq!(rules(&audit.findings), ["env-credential"], "{name}");
            assert!(
                found.message.starts_with(&format!(
                    "sets {name}, a credential by its {why}, in the sandbox"
                )),
                "{name}: {}",
                found.message
            );
            assert!(found.message.contains("/proc/PID/cmdline"));
            assert_eq!(found.arg, format!("--setenv {name} ***"));
            // The value is never printed.
            if value.len() > 1 {
                assert!(!render_text(&audit).contains(value), "{name}");
                assert!(!to_json(&audit).to_string().contains(value), "{name}");
            }
        }
        // Taken out of the sandbox later, it is still on the command line.
        for later in ["--clearenv", "--unsetenv GITHUB_TOKEN"] {
            let audit = bwrap_variant(&[], &["--setenv GITHUB_TOKEN v", later]);
            let found = only(&audit.findings, "env-credential");
            assert!(found.message.starts_with("puts GITHUB_TOKEN"), "{later}");
            assert!(found.message.contains("takes it out"), "{later}");
        }
        let set_again = bwrap_variant(
            &[],
            &["--setenv GH_PAT v", "--clearenv", "--setenv GH_PAT w"],
        );
        assert!(
            only(&set_again.findings, "env-credential")
                .message
                .starts_with("sets GH_PAT")
        );
        let other = bwrap_variant(&[], &["--setenv GH_PAT v", "--unsetenv GITHUB_TOKEN"]);
        assert!(
            only(&other.findings, "env-credential")
                .message
                .starts_with("sets GH_PAT")
        );
        assert_each_clean(&[
            "--setenv PATH /usr/bin:/bin",
            "--setenv HOME /home/dev",
            "--setenv TOKENIZERS_PARALLELISM false",
            "--setenv PWD /work",
            "--setenv PASSTHROUGH 1",
            // The sign-off review's: words that mark a credential only where they stand so.
            "--setenv JWT_ISSUER https://id.example.com",
            "--setenv PASS_THROUGH 1",
            // The JSON review's: a count of a model's tokens, a secret's name or place.
            "--setenv MAX_TOKENS 4096",
            "--setenv OPENAI_MAX_OUTPUT_TOKENS 512",
            "--setenv TOKENS_PER_MINUTE 1000",
            "--setenv CONTEXT_TOKENS 8192",
            "--setenv TOKEN_TTL 60",
            "--setenv PASSWORD_MIN_LENGTH 8",
            "--setenv TOKEN_URL https://auth.example.com/oauth/token",
            "--setenv SSH_KEY_TYPE ed25519",
            "--setenv SECRETS_BACKEND vault",
            "--setenv CACHE_KEY build-1",
            "--setenv SORT_KEY name",
            "--setenv SECRET_NAME prod/db",
            "--setenv AWS_SECRET_ARN arn:aws:secretsmanager:x",
            "--setenv DB_PASSWORD_FILE /run/secrets/db",
            "--setenv MYSQL_PWD_FILE /run/x",
            "--setenv SSH_KEYSCAN_HOSTS github.com",
            "--setenv DEPLOY_KEYWORDS a,b",
            "--setenv ACCESS_KEYPAD on",
            "--setenv PGPASSFILE /run/pgpass",
            // A switch's value, whatever the name says (the stop-45 security-team review).
            "--setenv HF_HUB_DISABLE_TOKEN 1",
            "--setenv HINT 'Basic usage: see the manual'",
            // The sign-off review's: AUTH as a setting, AUTHORIZATION as a server's, prose.
            "--setenv SMTP_AUTH login",
            "--setenv PROXY_AUTH basic",
            "--setenv AUTH none",
            "--setenv JWT disabled",
            "--setenv AUTHORIZATION_SERVER https://auth.example.com",
            "--setenv AUTHORIZATION_MODE Node,RBAC",
            "--setenv DESCRIPTION 'Implements basic read-only access'",
            "--setenv MODE 'basic non-interactive'",
            "--setenv AUTHORIZATION_URL https://auth.example.com/authorize",
            "--setenv PWD /work",
            "--setenv PASSWORD_AUTH false",
            "--setenv USE_API_KEY Yes",
            "--setenv GIT_ASKPASS_ENABLED off",
            "--setenv DIR '$(pwd)'",
            "--setenv SHA '${{ github.sha }}'",
            "--setenv GIT_AUTHOR_NAME Dev",
            "--setenv KEYMAP us",
            "--setenv URL https://example.com/a:b",
            "--setenv REPO https://git@example.com/r.git",
            "--setenv MODE sk-SK",
            "--setenv GREETING 'ghp_ is a GitHub token prefix'",
            "--setenv HOME \"$HOME\"",
            "--setenv P \"${PATH}:/opt/bin\"",
            "--setenv PRICE '$5'",
            "--unsetenv GITHUB_TOKEN",
        ]);
    }

    #[test]
    fn bwrap_tiocsti() {
        let audit = bwrap_variant(&["--new-session"], &[]);
        assert_eq!(rules(&audit.findings), ["tiocsti"]);
        assert!(audit.findings[0].message.contains("TIOCSTI"));
        assert!(audit.findings[0].message.contains("CVE-2017-5226"));
        assert_eq!(audit.findings[0].arg, "");
        // A filter from a descriptor is unseen (an allow-all one lets TIOCSTI through): it is
        // not taken as protection, and is itself reported as unseen.
        for (opt, fd) in [("--seccomp 3", "3"), ("--add-seccomp-fd 4", "4")] {
            let audit = bwrap_variant(&["--new-session"], &[opt]);
            assert_eq!(
                rules(&audit.findings),
                ["tiocsti", "seccomp-from-fd"],
                "{opt}"
            );
            assert!(audit.findings[0].message.contains("unseen"), "{opt}");
            assert_eq!(audit.findings[0].arg, opt);
            assert_eq!(
                audit.findings[1].message,
                format!(
                    "loads a seccomp filter from file descriptor {fd}, which this audit cannot see"
                )
            );
        }
        let with_session = bwrap_variant(&[], &["--seccomp 3"]);
        assert_eq!(rules(&with_session.findings), ["seccomp-from-fd"]);
    }

    #[test]
    fn bwrap_options_from_descriptors_are_not_called_clean() {
        for (opt, rule, says) in [
            (
                "--bind-fd 3 /x",
                "bind-from-fd",
                "binds the directory open on file descriptor 3",
            ),
            (
                "--ro-bind-fd 3 /",
                "bind-from-fd",
                "binds the directory open on file descriptor 3",
            ),
            (
                "--file 4 /etc/passwd",
                "data-from-fd",
                "puts the data read from file descriptor 4 at /etc/passwd",
            ),
            (
                "--bind-data 4 /x",
                "data-from-fd",
                "puts the data read from file descriptor 4 at /x",
            ),
            (
                "--ro-bind-data 4 /x",
                "data-from-fd",
                "puts the data read from file descriptor 4 at /x",
            ),
            (
                "--userns 5",
                "namespace-from-fd",
                "joins the user namespace open on file descriptor 5",
            ),
            (
                "--userns2 5",
                "namespace-from-fd",
                "joins the user namespace open on file descriptor 5",
            ),
            (
                "--pidns 6",
                "namespace-from-fd",
                "joins the pid namespace open on file descriptor 6",
            ),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), [rule], "{opt}");
            assert!(audit.findings[0].message.starts_with(says), "{opt}");
            assert!(audit.findings[0].message.contains("cannot see"), "{opt}");
            assert_eq!(audit.findings[0].arg, opt);
        }
    }

    #[test]
    fn bwrap_no_die_with_parent() {
        let audit = bwrap_variant(&["--die-with-parent"], &[]);
        assert_eq!(rules(&audit.findings), ["no-die-with-parent"]);
    }

    #[test]
    fn bwrap_dev_bind_dev() {
        for opt in ["--dev-bind /dev /dev", "--dev-bind-try /dev/ /dev"] {
            let audit = bwrap_variant(&["--dev /dev"], &[opt]);
            // Its /dev/shm is also writable.
            assert_eq!(
                rules(&audit.findings),
                ["host-mount-rw", "dev-bind-dev"],
                "{opt}"
            );
            assert_eq!(audit.findings[1].arg, shell_quote(&words(opt)));
        }
        assert!(
            bwrap_variant(&[], &["--dev-bind /dev/null /dev/null"])
                .findings
                .is_empty()
        );
        assert!(
            bwrap_variant(&["--dev /dev"], &["--ro-bind /dev /dev"])
                .findings
                .is_empty()
        );
    }

    #[test]
    fn bwrap_host_device() {
        for (opt, what) in [
            ("--dev-bind /dev/loop0 /dev/loop0", "a disk"),
            ("--dev-bind-try /dev/sda1 /dev/sda1", "a disk"),
            ("--dev-bind /dev/nvme0n1 /d", "a disk"),
            ("--dev-bind /dev/mapper /dev/mapper", "a disk"),
            ("--dev-bind /dev/disk/by-uuid/x /d", "a disk"),
            ("--dev-bind /dev/mem /dev/mem", "memory"),
            ("--dev-bind /dev/input /dev/input", "input devices"),
            ("--dev-bind /dev/input/event3 /e", "input devices"),
            ("--dev-bind /dev/uinput /dev/uinput", "input devices"),
            ("--dev-bind /dev/vcsa1 /v", "a console's screen"),
            ("--dev-bind /dev/pts /dev/pts", "the host's terminals"),
            // The same devices through udev's links by number, and the disks' other faces.
            ("--dev-bind /dev/block/8:0 /x", "a disk"),
            ("--dev-bind /dev/block /dev/block", "a disk"),
            ("--dev-bind /dev/char/1:1 /x", "a device by its number"),
            ("--dev-bind /dev/sr0 /dev/sr0", "a disk"),
            ("--dev-bind /dev/bsg/0:0:0:0 /b", "a disk"),
            ("--dev-bind /dev/cpu/0/msr /m", "CPU registers"),
            // A review's finds: a task wrote a login prompt to tty1 under bubblewrap.
            ("--dev-bind /dev/tty1 /dev/tty1", "a host terminal"),
            ("--dev-bind /dev/ttyS0 /dev/ttyS0", "a host terminal"),
            ("--dev-bind /dev/console /dev/console", "a host terminal"),
            ("--dev-bind /dev/sg0 /dev/sg0", "a disk"),
            ("--dev-bind /dev/bus/usb /dev/bus/usb", "USB devices"),
            ("--dev-bind /dev/kmsg /dev/kmsg", "the kernel's log"),
            ("--dev-bind /dev/watchdog0 /w", "the machine's watchdog"),
            ("--dev-bind /dev/nvram /n", "firmware memory"),
            // The security-team review's finds.
            ("--dev-bind /dev/tpm0 /t", "the TPM"),
            ("--dev-bind /dev/tpmrm0 /t", "the TPM"),
            ("--dev-bind /dev/ipmi0 /i", "the BMC (IPMI)"),
            ("--dev-bind /dev/i2c-0 /i", "an I2C bus"),
            ("--dev-bind /dev/mei0 /m", "Intel's Management Engine"),
            ("--dev-bind /dev/fb0 /f", "the screen's contents"),
            ("--dev-bind /dev/rbd0 /r", "a disk"),
            ("--dev-bind /dev/pmem0 /p", "a disk"),
            ("--dev-bind /dev/mtdblock0 /m", "a disk"),
            ("--dev-bind /dev/root /r", "a disk"),
            ("--dev-bind /dev/cdrom /c", "a disk"),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            assert_eq!(rules(&audit.findings), ["host-device"], "{opt}");
            let source = &words(opt)[1];
            assert_eq!(
                audit.findings[0].message,
                format!("binds host device {source} ({what}) with device access")
            );
            assert_eq!(audit.findings[0].arg, opt);
        }
        // A source the audit cannot know may be any device (besides what else it may be);
        // `/` holds the host's /dev.
        for (opt, rule, message) in [
            (
                "--dev-bind /proc/1/root/dev/sda /d",
                "host-device",
                "binds host device /proc/1/root/dev/sda (any device: the audit cannot know \
                 which) with device access",
            ),
            (
                "--dev-bind /dev/fd/5 /d",
                "host-device",
                "binds host device /dev/fd/5 (any device: the audit cannot know which) with \
                 device access",
            ),
            (
                "--dev-bind / /",
                "dev-bind-dev",
                "binds the host's /dev with device access",
            ),
        ] {
            let audit = bwrap_variant(&[], &[opt]);
            assert_eq!(only(&audit.findings, rule).message, message, "{opt}");
        }
        // A block device on this host is a disk whatever its name (an LVM volume's link).
        let disk = std::fs::read_dir("/sys/class/block")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| std::path::Path::new("/dev").join(e.file_name()))
            .find(|p| {
                use std::os::unix::fs::FileTypeExt;
                std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device())
            });
        if let Some(disk) = disk {
            let dir = tempfile::tempdir().unwrap();
            let link = dir.path().join("vg-lv");
            std::os::unix::fs::symlink(&disk, &link).unwrap();
            let opt = format!("--dev-bind {} /d", link.display());
            let audit = bwrap_variant(&[], &[&opt]);
            assert_eq!(rules(&audit.findings), ["host-device"], "{opt}");
            assert!(audit.findings[0].message.contains("(a disk)"), "{opt}");
        }
        // Without device access (`--bind`, `--ro-bind`: nodev) a device cannot be opened;
        // the everyday devices are harmless; a later mount over it hides it.
        for fine in [
            &["--ro-bind /dev/loop0 /dev/loop0"][..],
            &["--bind /dev/sda /dev/sda"],
            &["--dev-bind /dev/null /dev/null"],
            &["--dev-bind /dev/dri /dev/dri"],
            &["--dev-bind /dev/snd /dev/snd"],
            &["--dev-bind /dev/kvm /dev/kvm"],
            &["--dev-bind /dev/sgx_enclave /dev/sgx_enclave"],
            &["--dev-bind /dev/tty /dev/tty"],
            &["--dev-bind /dev/ptmx /dev/ptmx"],
            &["--dev-bind /dev/loop0 /dev/loop0", "--dev /dev"],
        ] {
            let audit = bwrap_variant(&[], fine);
            assert!(audit.findings.is_empty(), "{fine:?}: {audit:#?}");
        }
    }

    #[test]
    fn bwrap_cap_add() {
        let audit = bwrap_variant(&[], &["--cap-add CAP_NET_ADMIN", "--cap-add ALL"]);
        assert_eq!(rules(&audit.findings), ["cap-add", "cap-add"]);
        assert_eq!(audit.findings[0].message, "adds capability CAP_NET_ADMIN");
        assert_eq!(audit.findings[1].arg, "--cap-add ALL");
        assert!(bwrap_variant(&[], &["--cap-drop ALL"]).findings.is_empty());
    }

    #[test]
    fn cap_sys_admin_spellings() {
        for cap in [
            "ALL",
            "all",
            "CAP_SYS_ADMIN",
            "Cap_Sys_Admin",
            "21",
            "0x15",
            "0X15",
            "025",
            "21x",
            "cap_sys_admin+ep",
            "CAP_SYS_ADMIN1",
        ] {
            assert!(adds_sys_admin(cap), "{cap}");
        }
        // `021` is octal 17; bubblewrap refuses a name with more letters, or none of its own.
        for cap in [
            "021",
            "0x",
            "2",
            "211",
            "CAP_NET_RAW",
            "cap_sys_adminx",
            "sys_admin",
            "ALLx",
            "99999999999999999999999999",
        ] {
            assert!(!adds_sys_admin(cap), "{cap}");
        }
    }

    #[test]
    fn bwrap_root_caps_kept() {
        let audit = bwrap_variant(&["--cap-drop ALL"], &[]);
        assert_eq!(rules(&audit.findings), ["root-caps-kept"]);
        assert_eq!(audit.findings[0].arg, "");
        assert!(audit.findings[0].message.contains("as root"));
        assert!(
            audit.findings[0]
                .message
                .contains("airlock bwrap drops them")
        );
        // Dropping some capabilities leaves root the rest; case does not matter for ALL.
        let some = bwrap_variant(&["--cap-drop ALL"], &["--cap-drop CAP_SYS_ADMIN"]);
        assert_eq!(rules(&some.findings), ["root-caps-kept"]);
        assert!(
            bwrap_variant(&["--cap-drop ALL"], &["--cap-drop all"])
                .findings
                .is_empty()
        );
        // Argument order: a later --cap-drop ALL clears earlier adds; a later add stays.
        assert!(
            bwrap_variant(
                &["--cap-drop ALL"],
                &["--cap-add CAP_NET_RAW", "--cap-add ALL", "--cap-drop ALL"]
            )
            .findings
            .is_empty()
        );
        let after = bwrap_variant(
            &["--cap-drop ALL"],
            &["--cap-drop ALL", "--cap-add CAP_NET_RAW"],
        );
        assert_eq!(rules(&after.findings), ["cap-add"]);
        assert_eq!(after.findings[0].arg, "--cap-add CAP_NET_RAW");
        let dropped_again =
            bwrap_variant(&[], &["--cap-add cap_net_raw", "--cap-drop CAP_NET_RAW"]);
        assert!(dropped_again.findings.is_empty(), "{dropped_again:#?}");
    }

    /// The options that unshare each namespace `--unshare-all` does, but `missing`'s.
    fn unsharing_all_but(missing: &str) -> Vec<&'static str> {
        [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-cgroup",
        ]
        .into_iter()
        .filter(|o| *o != missing)
        .collect()
    }

    #[test]
    fn bwrap_no_user_namespace() {
        let base = unsharing_all_but("--unshare-user");
        let audit = bwrap_variant(&["--unshare-all"], &base);
        assert_eq!(rules(&audit.findings), ["no-user-namespace"]);
        for fixed in ["--unshare-user", "--unshare-user-try"] {
            let mut add = base.clone();
            add.push(fixed);
            assert!(
                bwrap_variant(&["--unshare-all"], &add).findings.is_empty(),
                "{fixed}"
            );
        }
    }

    #[test]
    fn bwrap_no_pid_namespace() {
        let base = unsharing_all_but("--unshare-pid");
        let audit = bwrap_variant(&["--unshare-all"], &base);
        assert_eq!(rules(&audit.findings), ["no-pid-namespace"]);
        let fixed = bwrap_variant(
            &["--unshare-all"],
            &[&base[..], &["--unshare-pid"]].concat(),
        );
        assert!(fixed.findings.is_empty(), "{fixed:#?}");
        // A joined pid namespace counts, but is reported as unseen.
        let joined = bwrap_variant(&["--unshare-all"], &[&base[..], &["--pidns 6"]].concat());
        assert_eq!(rules(&joined.findings), ["namespace-from-fd"]);
    }

    #[test]
    fn bwrap_no_ipc_namespace() {
        let base = unsharing_all_but("--unshare-ipc");
        let audit = bwrap_variant(&["--unshare-all"], &base);
        assert_eq!(rules(&audit.findings), ["no-ipc-namespace"]);
        assert!(audit.findings[0].message.contains("shared memory"));
        assert_eq!(audit.findings[0].arg, "");
        let fixed = bwrap_variant(
            &["--unshare-all"],
            &[&base[..], &["--unshare-ipc"]].concat(),
        );
        assert!(fixed.findings.is_empty(), "{fixed:#?}");
        // `--unshare-all` unshares it, and `--share-net` gives back only the network.
        let share_net = bwrap_variant(&[], &["--share-net"]);
        assert_eq!(rules(&share_net.findings), ["network-shared"]);
    }

    #[test]
    fn bwrap_no_cgroup_namespace() {
        let base = unsharing_all_but("--unshare-cgroup");
        let audit = bwrap_variant(&["--unshare-all"], &base);
        assert_eq!(rules(&audit.findings), ["no-cgroup-namespace"]);
        assert!(audit.findings[0].message.contains("/proc/self/cgroup"));
        assert_eq!(audit.findings[0].arg, "");
        for fixed in ["--unshare-cgroup", "--unshare-cgroup-try"] {
            let fixed = bwrap_variant(&["--unshare-all"], &[&base[..], &[fixed]].concat());
            assert!(fixed.findings.is_empty(), "{fixed:#?}");
        }
        // `--unshare-all` unshares it, and `--share-net` gives back only the network.
        let share_net = bwrap_variant(&[], &["--share-net"]);
        assert_eq!(rules(&share_net.findings), ["network-shared"]);
    }

    #[test]
    fn bwrap_args_from_fd_is_not_called_clean() {
        let audit = bwrap_variant(&[], &["--args 3"]);
        assert_eq!(rules(&audit.findings), ["args-from-fd"]);
        assert_eq!(audit.findings[0].arg, "--args 3");
    }

    #[test]
    fn bare_bwrap_reports_every_missing_thing() {
        let audit = bwrap("bwrap /bin/sh");
        assert_eq!(
            rules(&audit.findings),
            [
                "network-shared",
                "env-not-cleared",
                "tiocsti",
                "no-die-with-parent",
                "root-caps-kept",
                "no-user-namespace",
                "no-pid-namespace",
                "no-ipc-namespace",
                "no-cgroup-namespace"
            ]
        );
        assert_eq!(rules(&audit.advice), ["host-root-if-run-as-root"]);
    }

    #[test]
    fn bwrap_host_root_if_run_as_root() {
        // Every line gets it: no option stops a root caller's task being the host's uid 0.
        for line in [
            "bwrap /bin/sh",
            CLEAN_BWRAP,
            "bwrap --unshare-user --uid 65534 --gid 65534 /bin/sh",
            "bwrap --unshare-all --uid 1000 --gid 1000 /bin/sh",
        ] {
            let audit = bwrap(line);
            let advice = only(&audit.advice, "host-root-if-run-as-root");
            assert_eq!(audit.advice.len(), 1, "{line}");
            assert_eq!(advice.arg, "", "{line}");
            assert!(advice.message.contains("/etc/shadow"), "{}", advice.message);
            assert!(
                advice.message.contains("unprivileged user"),
                "{}",
                advice.message
            );
        }
        // A joined user namespace has a mapping of its own, and is reported as unseen.
        for joined in ["--userns 5", "--userns2 5"] {
            let audit = bwrap_variant(&[], &[joined]);
            assert!(audit.advice.is_empty(), "{joined}");
            assert_eq!(rules(&audit.findings), ["namespace-from-fd"], "{joined}");
        }
    }

    #[test]
    fn bwrap_arity_and_command_start() {
        // Every multi-argument option consumes its arguments: none is read as an option.
        let line = "bwrap --unshare-all --die-with-parent --new-session --clearenv \
            --setenv --bind / --symlink --share-net /x --chmod 0755 /x \
            --overlay-src /usr --overlay /a /b /c --tmp-overlay /d --ro-overlay /e \
            --bind-data 3 --bind --ro-bind-data 4 /f --file 5 /g --perms 0700 --size 10 \
            --tmpfs /t --uid 0 --gid 0 --hostname h --chdir / --argv0 x --exec-label l \
            --file-label l --userns2 7 --sync-fd 8 --lock-file /l --info-fd 9 \
            --json-status-fd 10 --block-fd 11 --userns-block-fd 12 --remount-ro / \
            --mqueue /m --dir /dd --unsetenv X --cap-drop ALL --as-pid-1 --level-prefix \
            --disable-userns --assert-userns-disabled --unshare-ipc --unshare-uts \
            --unshare-cgroup --unshare-cgroup-try --bind-fd 3 /bf --ro-bind-fd 4 /rbf \
            --ro-bind-try /opt /opt --version --help /bin/true";
        // Only the options that read a descriptor are reported, as unseen.
        assert_eq!(
            rules(&bwrap(line).findings),
            [
                "data-from-fd",
                "data-from-fd",
                "data-from-fd",
                "namespace-from-fd",
                "bind-from-fd",
                "bind-from-fd"
            ]
        );
        // The command starts at the first non-option and is never audited.
        let cmd = bwrap(&CLEAN_BWRAP.replace("-- /bin/true", "/bin/sh --bind / / --share-net"));
        assert_eq!(cmd, clean_bwrap_audit());
        let after_dashdash = bwrap(&CLEAN_BWRAP.replace("/bin/true", "--share-net"));
        assert_eq!(after_dashdash, clean_bwrap_audit());
        // A path to bwrap is accepted, and so is an argv without the program.
        let path = bwrap(&CLEAN_BWRAP.replacen("bwrap", "/usr/bin/bwrap", 1));
        assert_eq!(path, clean_bwrap_audit());
        let bare = bwrap(CLEAN_BWRAP.trim_start_matches("bwrap "));
        assert_eq!(bare, clean_bwrap_audit());
    }

    #[test]
    fn bwrap_errors() {
        let unknown = audit_bwrap(&words("bwrap --unshare-everything /bin/true")).unwrap_err();
        assert!(unknown.contains("--unshare-everything"), "{unknown}");
        assert!(audit_bwrap(&words("bwrap --bind=/ / /bin/true")).is_err());
        assert!(audit_bwrap(&words("bwrap - /bin/true")).is_err());
        let missing = audit_bwrap(&words("bwrap --bind /usr")).unwrap_err();
        assert!(missing.contains("--bind"), "{missing}");
        assert!(audit_bwrap(&words("bwrap --overlay /a /b")).is_err());
        assert!(audit_bwrap(&words("bwrap --unshare-all")).is_err());
        assert!(audit_bwrap(&words("bwrap --unshare-all --")).is_err());
        assert!(audit_bwrap(&words("firejail --net=none ls")).is_err());
        // The rest of a line that is not bwrap's, and a variable's value, are not printed.
        let prefixed = audit_bwrap(&words(
            "GITHUB_TOKEN=ghp_secret bwrap --setenv T ghp_secret -- sh",
        ))
        .unwrap_err();
        assert_eq!(
            prefixed,
            "not a bwrap command line: it starts with GITHUB_TOKEN=..."
        );
        // sudo and its options lead a line; what sudo sets or does not run is refused, its
        // variable's value not printed.
        let plain = docker("docker run -e T alpine");
        for line in [
            "sudo docker run -e T alpine",
            "sudo -E -- docker run -e T alpine",
            "/usr/bin/sudo -Eu dev --preserve-env=PATH docker run -e T alpine",
            "sudo --user dev -n docker run -e T alpine",
        ] {
            assert_eq!(docker(line), plain, "{line}");
        }
        for (line, error) in [
            (
                "sudo GITHUB_TOKEN=ghp_secret docker run alpine",
                "not a command line this audit reads: sudo sets a variable (GITHUB_TOKEN=...) \
                 for it",
            ),
            (
                "sudo -x docker run alpine",
                "sudo option -x is not one this audit reads",
            ),
            (
                "sudo -l docker run alpine",
                "sudo option -l is not one this audit reads",
            ),
            (
                "sudo --list",
                "sudo option --list is not one this audit reads",
            ),
            ("sudo --user", "sudo option --user needs a value"),
            ("sudo -E", "sudo runs no command"),
            (
                "sudo -h docker run alpine",
                "sudo option -h is not one this audit reads",
            ),
        ] {
            assert_eq!(audit_docker(&words(line)).unwrap_err(), error, "{line}");
            assert_eq!(audit_bwrap(&words(line)).unwrap_err(), error, "{line}");
        }
        // docker's own options before `run` choose the daemon, not what the container gets.
        for line in [
            "docker -H unix:///run/docker.sock run -e T alpine",
            "docker --context=ci -D container run -e T alpine",
            "sudo docker -Dc ci --tlsverify=false run -e T alpine",
            "docker --host=ssh://build -l warn -- run -e T alpine",
        ] {
            assert_eq!(docker(line), plain, "{line}");
        }
        for (line, error) in [
            ("docker -H", "docker option -H needs a value"),
            (
                "docker --tlsverify=maybe run alpine",
                "docker option --tlsverify: \"maybe\" is not true or false",
            ),
            (
                "docker --frob run alpine",
                "docker option --frob is not one this audit reads",
            ),
            (
                "docker -x run alpine",
                "docker option -x is not one this audit reads",
            ),
            (
                "docker --context ci compose run web",
                "not a docker run/create command line: it starts with docker --context",
            ),
        ] {
            assert_eq!(audit_docker(&words(line)).unwrap_err(), error, "{line}");
        }
        // bubblewrap under sudo runs as root unless sudo is told another user: a finding.
        let bwrap_line = "bwrap --unshare-all --ro-bind /usr /usr sh";
        let root = audit_bwrap(&words(&format!("sudo {bwrap_line}"))).unwrap();
        assert!(
            root.findings
                .iter()
                .any(|f| f.rule == "host-root" && f.arg == "sudo")
        );
        assert!(
            !root
                .advice
                .iter()
                .any(|f| f.rule == "host-root-if-run-as-root")
        );
        // `#00` is uid 0 too; `-g` alone runs as the caller (the sign-off review).
        for sudo in ["sudo -u '#00'", "sudo --user=root -g wheel"] {
            let audit = audit_bwrap(&words(&format!("{sudo} {bwrap_line}"))).unwrap();
            assert!(
                audit.findings.iter().any(|f| f.rule == "host-root"),
                "{sudo}"
            );
        }
        for line in [
            bwrap_line.to_string(),
            format!("sudo -u dev {bwrap_line}"),
            format!("sudo -g docker {bwrap_line}"),
        ] {
            let audit = audit_bwrap(&words(&line)).unwrap();
            assert!(
                !audit.findings.iter().any(|f| f.rule == "host-root"),
                "{line}"
            );
            assert!(
                audit
                    .advice
                    .iter()
                    .any(|f| f.rule == "host-root-if-run-as-root")
            );
        }
        assert!(audit_bwrap(&[]).is_err());
        // A name bubblewrap refuses (setenv failed), which a docker-style slip fills with the
        // value: refused, and not printed.
        for line in [
            "bwrap --setenv GITHUB_TOKEN=ghp_secret 1 -- sh",
            "bwrap --unsetenv A=ghp_secret -- sh",
            "bwrap --setenv '' x -- sh",
        ] {
            let e = audit_bwrap(&words(line)).unwrap_err();
            assert!(
                e.contains("setenv failed") && !e.contains("secret"),
                "{line}: {e}"
            );
        }
    }

    // ----- reading command lines -------------------------------------------------------------

    #[test]
    fn shell_words() {
        assert_eq!(words("a  b\tc"), ["a", "b", "c"]);
        assert_eq!(words("'a b' \"c d\" e\\ f"), ["a b", "c d", "e f"]);
        assert_eq!(words("'' \"\" x''y"), ["", "", "xy"]);
        assert_eq!(words(r#""a\"b\\c\$d\`e\nf""#), [r#"a"b\c$d`e\nf"#]);
        assert_eq!(words(r"a\'b \\"), ["a'b", "\\"]);
        assert_eq!(words("'it'\\''s'"), ["it's"]);
        assert_eq!(
            words("docker run \\\n  -it \\\n  alpine"),
            ["docker", "run", "-it", "alpine"]
        );
        assert_eq!(words("\"multi\\\nline\""), ["multiline"]);
        assert_eq!(words("'new\nline'"), ["new\nline"]);
        assert_eq!(words("a # comment | ; & ` $("), ["a"]);
        assert_eq!(words("a#b 'c#d' #e"), ["a#b", "c#d"]);
        assert_eq!(
            words("# leading comment\n\n  docker run alpine \n"),
            ["docker", "run", "alpine"]
        );
        assert_eq!(
            words("-v \"$HOME\":/h \"${X}\" $ a$ $. $/"),
            ["-v", "$HOME:/h", "${X}", "$", "a$", "$.", "$/"]
        );
        assert_eq!(
            words("'$(not run)' '`nor this`' 'a|b;c&d<e>f(g)'"),
            ["$(not run)", "`nor this`", "a|b;c&d<e>f(g)"]
        );
        assert_eq!(words("\\$\\(x\\) \\`y\\` a\\|b"), ["$(x)", "`y`", "a|b"]);
        assert_eq!(words(""), Vec::<String>::new());
        assert_eq!(words("   \n "), Vec::<String>::new());
    }

    #[test]
    fn shell_refusals_name_the_construct() {
        for (line, construct) in [
            ("echo $(id)", "$("),
            ("echo $((1+1))", "$("),
            ("echo `id`", "`"),
            ("echo \"$(id)\"", "$("),
            ("echo \"`id`\"", "`"),
            ("a | b", "|"),
            ("a; b", ";"),
            ("a && b", "&"),
            ("a &", "&"),
            ("a < f", "<"),
            ("a > f", ">"),
            ("a 2>&1", ">"),
            ("(a)", "("),
            ("-v $PWD:/w", "$P"),
            ("--user $U img", "$U"),
            ("${OPTS}", "${"),
            ("a $@", "$@"),
            ("a $1", "$1"),
            ("a $'\\x41'", "$'"),
            ("a $\"x\"", "$'"),
            ("a *.py", "*"),
            ("a file?", "?"),
            ("a [ab]", "["),
            ("--{privileged,rm}", "{"),
        ] {
            let err = parse_command_line(line).unwrap_err();
            assert!(err.contains(construct), "{line:?}: {err}");
        }
    }

    #[test]
    fn shell_syntax_errors() {
        assert!(
            parse_command_line("a 'b")
                .unwrap_err()
                .contains("single quote")
        );
        assert!(
            parse_command_line("a \"b")
                .unwrap_err()
                .contains("double quote")
        );
        assert!(
            parse_command_line("a \"b\\\"")
                .unwrap_err()
                .contains("double quote")
        );
        assert!(parse_command_line("a \\").is_err());
        // A second command on its own line is not glued onto the first.
        let err = parse_command_line("docker run alpine\nrm -rf /").unwrap_err();
        assert!(err.contains("newline"), "{err}");
    }

    #[test]
    fn json_command_lines() {
        assert_eq!(
            words(r#"  ["docker", "run", "-e", "A B", "img", "sh", "-c", "echo $(id) | x"]"#),
            [
                "docker",
                "run",
                "-e",
                "A B",
                "img",
                "sh",
                "-c",
                "echo $(id) | x"
            ]
        );
        assert_eq!(words("[]"), Vec::<String>::new());
        let not_string = parse_command_line(r#"["docker", 1]"#).unwrap_err();
        assert!(not_string.contains("not a string"), "{not_string}");
        assert!(parse_command_line(r#"["docker", null]"#).is_err());
        assert!(parse_command_line(r#"["docker", ["run"]]"#).is_err());
        assert!(parse_command_line(r#"["docker", "run""#).is_err());
        assert!(parse_command_line("[not json").is_err());
        // No argument holds a NUL byte (the security-team review: `al\0pine` was audited).
        let nul = parse_command_line(r#"["docker", "run", "al\u0000pine"]"#).unwrap_err();
        assert!(nul.contains("JSON argument 2 holds a NUL byte"), "{nul}");
        // What a reader breaks or reorders a line at is escaped like a newline.
        for (text, shown) in [
            (
                "/etc:/x\u{2028}--privileged",
                "/etc:/x\\u{2028}--privileged",
            ),
            ("a\u{202e}b", "a\\u{202e}b"),
            ("a\u{2066}b\u{2069}", "a\\u{2066}b\\u{2069}"),
            ("é plain", "é plain"),
        ] {
            assert_eq!(one_line(text), shown);
        }
        let audit = audit_docker(&words(r#"["docker","run","--privileged","alpine"]"#)).unwrap();
        assert_eq!(count(&audit.findings, "privileged"), 1);
    }

    #[test]
    fn shell_quote_output() {
        assert_eq!(
            shell_quote(&strings(&["docker", "-v", "/a:/b:ro", "a=b,c%d@e+f"])),
            "docker -v /a:/b:ro a=b,c%d@e+f"
        );
        assert_eq!(
            shell_quote(&strings(&["", "a b", "it's"])),
            r"'' 'a b' 'it'\''s'"
        );
        assert_eq!(shell_quote(&[]), "");
    }

    #[test]
    fn shell_quote_round_trips() {
        let nasty = [
            "",
            " ",
            "'",
            "''",
            "\"",
            "\\",
            "\\'",
            "'\\''",
            "a b",
            "\n",
            "line\nbreak",
            "\\\n",
            "tab\there",
            "$(rm -rf /)",
            "`id`",
            "${HOME}",
            "$HOME",
            "a;b|c&d<e>f",
            "(sub)",
            "#not-a-comment",
            "a#b",
            "~",
            "~/x",
            "*",
            "?",
            "[",
            "[\"json\"]",
            "-",
            "--",
            "--privileged",
            "é ü 日本",
            "\r\n",
            "!",
            "{a,b}",
            "x=$(y)",
            "\u{0}",
        ];
        let args = strings(&nasty);
        assert_eq!(parse_command_line(&shell_quote(&args)).unwrap(), args);
        for word in &args {
            let one = vec![word.clone()];
            assert_eq!(
                parse_command_line(&shell_quote(&one)).unwrap(),
                one,
                "{word:?}"
            );
        }
        // Every ASCII character, alone and between letters.
        for byte in 0u8..128 {
            let c = char::from(byte);
            let args = vec![c.to_string(), format!("a{c}b"), format!("{c}{c}")];
            assert_eq!(
                parse_command_line(&shell_quote(&args)).unwrap(),
                args,
                "{c:?}"
            );
        }
    }

    // ----- output -----------------------------------------------------------------------------

    #[test]
    fn json_output() {
        let audit = docker("docker run -e A alpine");
        let value = to_json(&audit);
        assert_eq!(value["clean"], false);
        assert_eq!(value["findings"][0]["rule"], "env-forwarded");
        assert_eq!(
            value["findings"][0]["message"],
            "forwards host environment variables"
        );
        assert_eq!(value["findings"][0]["arg"], "-e A");
        assert_eq!(
            value["findings"].as_array().unwrap().len(),
            audit.findings.len()
        );
        assert_eq!(value["advice"].as_array().unwrap().len(), 4);
        assert_eq!(value["advice"][0]["rule"], "no-memory-limit");

        let clean = to_json(&docker_variant(&["--memory 512m"], &[]));
        assert_eq!(clean["clean"], true, "advice does not make a line unclean");
        assert_eq!(clean["findings"], json!([]));
        assert_eq!(
            to_json(&Audit::default()),
            json!({"findings": [], "advice": [], "clean": true})
        );
    }

    #[test]
    fn text_output() {
        let audit = docker(
            "docker run -e A --user 1000 --read-only --network none --memory 1g --pids-limit 9 --cap-drop ALL alpine",
        );
        assert_eq!(
            render_text(&audit),
            "finding: forwards host environment variables (-e A)\n\
             advice: no-new-privileges is not set (--security-opt no-new-privileges)\n"
        );
        assert_eq!(
            render_text(&Audit::default()),
            "clean: no way for the host to leak in was found\n"
        );
        let pinned = docker(
            "docker run -e AWS_SECRET_ACCESS_KEY -v /home/dev/project:/work -w /work \
             python:3.12-slim python probe.py",
        );
        let text = render_text(&pinned);
        assert!(text.starts_with(
            "finding: forwards host environment variables (-e AWS_SECRET_ACCESS_KEY)\n\
             finding: network is not none\n\
             finding: mounts /home/dev/project read-write (-v /home/dev/project:/work)\n"
        ));
        assert_eq!(
            text.lines().filter(|l| l.starts_with("finding: ")).count(),
            5
        );
        assert_eq!(
            text.lines().filter(|l| l.starts_with("advice: ")).count(),
            4
        );
    }

    // ----- building a docker line -------------------------------------------------------------

    #[test]
    fn docker_args_default() {
        let args = docker_args(&DockerOpts::default());
        assert_eq!(
            shell_quote(&args),
            CLEAN_DOCKER.replace(" python probe.py", "")
        );
        assert_eq!(audit_docker(&args).unwrap(), Audit::default());
        assert!(!args.iter().any(|a| a == "-e" || a.starts_with("--env")));
    }

    #[test]
    fn docker_args_with_command() {
        let opts = DockerOpts {
            command: strings(&["python", "probe.py", "--privileged", "-e", "X"]),
            ..DockerOpts::default()
        };
        let args = docker_args(&opts);
        assert_eq!(args.last().unwrap(), "X");
        assert_eq!(audit_docker(&args).unwrap(), Audit::default());
        assert_eq!(args, words(&shell_quote(&args)));
        assert_eq!(
            audit_docker(&words(
                &(shell_quote(&docker_args(&DockerOpts::default())) + " python probe.py")
            ))
            .unwrap(),
            docker(CLEAN_DOCKER)
        );
    }

    #[test]
    fn docker_args_fields() {
        let opts = DockerOpts {
            image: "alpine:3".to_string(),
            memory: "1g".to_string(),
            pids: 32,
            scratch: "/var/tmp/airlock-scratch-7".to_string(),
            user: "1000:1000".to_string(),
            command: strings(&["true"]),
        };
        let args = docker_args(&opts);
        assert_eq!(
            shell_quote(&args),
            "docker run --rm --network none --read-only --tmpfs /tmp:rw,noexec,nosuid,size=64m \
             --cap-drop ALL --security-opt no-new-privileges --user 1000:1000 --pids-limit 32 \
             --memory 1g -v /var/tmp/airlock-scratch-7:/work:rw -w /work alpine:3 true"
        );
        assert_eq!(audit_docker(&args).unwrap(), Audit::default());
    }

    // ----- helpers ----------------------------------------------------------------------------

    #[test]
    fn option_tables_are_consistent() {
        let mut seen = std::collections::HashSet::new();
        for name in DOCKER_VALUED_OPTIONS.iter().chain(DOCKER_FLAGS) {
            assert!(seen.insert(*name), "docker option listed twice: {name}");
        }
        for (alias, long) in DOCKER_ALIASES {
            assert!(!seen.contains(alias), "alias {alias} is also a table entry");
            assert!(
                seen.contains(long),
                "alias {alias} points at unknown {long}"
            );
        }
        for (letter, long) in DOCKER_SHORT_OPTIONS {
            assert!(seen.contains(long), "-{letter} points at unknown {long}");
        }
        let mut bwrap_seen = std::collections::HashSet::new();
        for (name, arity) in BWRAP_OPTIONS {
            assert!(
                bwrap_seen.insert(*name),
                "bwrap option listed twice: {name}"
            );
            assert!(name.starts_with("--") && *arity <= 3, "{name}");
        }
    }

    #[test]
    fn path_normalisation() {
        assert_eq!(normalize_path("/"), "/");
        assert_eq!(normalize_path("//home//dev/"), "/home/dev");
        assert_eq!(normalize_path("/a/./b/../c"), "/a/c");
        assert_eq!(normalize_path("/.."), "/");
        assert_eq!(normalize_path("./x/.."), ".");
        assert_eq!(normalize_path("../x"), "../x");
        assert_eq!(normalize_path("~/"), "~");
        // What normalisation alone would hide.
        assert_eq!(normalize_path("$HOME/.."), ".");
        assert_eq!(
            host_path("$HOME/.."),
            HostPath::Unknown("it climbs out of the home with ..")
        );
        assert_eq!(host_path("~"), HostPath::InHome(String::new()));
        assert_eq!(
            host_path("${HOME}/a/./b/"),
            HostPath::InHome("/a/b".to_string())
        );
        assert_eq!(host_path("/a//b/.."), HostPath::Known("/a".to_string()));
    }
}
