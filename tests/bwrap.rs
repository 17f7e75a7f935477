//! Differential tests of the drop-in `bwrap` mode: the same command line runs under Debian's
//! bubblewrap (/usr/bin/bwrap, 0.8.0) and under airlock started as `bwrap` (a copy of the
//! binary of that name, so argv[0] dispatch is exercised; one test uses `airlock bwrap ARGS`),
//! as root and as uid 65534, and what a probe inside observes is compared.
//!
//! What legitimately differs is normalised, never compared: pids, inode numbers, mount ids and
//! source devices (only mountinfo fields 5 and 6 are printed, and of field 6 only
//! ro/rw/nosuid/nodev), times, and the middle column of the id maps (airlock maps an
//! unprivileged caller's uid directly, `UID UID 1`, where bubblewrap may nest a second user
//! namespace; only the first column and the count are compared).
//!
//! Where airlock differs on purpose (the holes bubblewrap leaves open, a user namespace for a
//! root caller, `--die-with-parent` always on) both behaviours are asserted side by side.
//!
//! Every run is bounded: a test-side deadline kills the launcher and fails the test.

mod common;

use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{BOTH, Launcher};

const BUBBLEWRAP: &str = "/usr/bin/bwrap";
const NOBODY: &str = "setpriv --reuid=65534 --regid=65534 --clear-groups";
const PYTHON: &str = "/usr/bin/python3";
const DEADLINE: Duration = Duration::from_secs(20);
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A root filesystem with nothing but /usr and the usr-merge links.
const MIN: &[&str] = common::MIN_ROOT;

/// A line on which bubblewrap runs the task in a user namespace nested in the sandbox's (a
/// sandbox uid other than 0 with --dev), as airlock has since 44138b5.
const NESTED_BY_DEV: &[&str] = &[
    "--unshare-all",
    "--dev",
    "/dev",
    "--uid",
    "1000",
    "--gid",
    "1000",
];

// ---------------------------------------------------------------------------------------------
// Running one command line under one implementation

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Imp {
    /// Debian's bubblewrap.
    Bubblewrap,
    /// airlock started under the name `bwrap`.
    Airlock,
    /// `airlock bwrap ARGS...`.
    AirlockSub,
}

const IMPS: [Imp; 2] = [Imp::Bubblewrap, Imp::Airlock];

/// The words that start `imp` as `who` (the script's `$BW`).
fn launcher_words(imp: Imp, who: Launcher) -> String {
    let bin = match imp {
        Imp::Bubblewrap => BUBBLEWRAP.to_string(),
        Imp::Airlock => common::bwrap_binary().display().to_string(),
        Imp::AirlockSub => format!("{} bwrap", common::binary().display()),
    };
    match who {
        Launcher::Root => bin,
        Launcher::Unprivileged => format!("{NOBODY} {bin}"),
    }
}

#[derive(Debug, Clone)]
struct Res {
    /// The exit code, or 128+N for signal N.
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Res {
    fn show(&self) -> String {
        format!(
            "exit {} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

/// A command line and how it is started: a bash script run as root (so descriptors can be
/// opened at fixed numbers before the launcher starts) in which `$BW` starts the launcher as
/// the chosen user and `"$@"` are the arguments.
#[derive(Clone)]
struct Case {
    script: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    deadline: Duration,
}

fn case(args: &[&str]) -> Case {
    Case {
        script: r#"exec $BW "$@""#.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        cwd: "/".into(),
        deadline: DEADLINE,
    }
}

impl Case {
    /// Lines run before `exec $BW "$@"` (descriptor redirections).
    fn pre(mut self, lines: &str) -> Case {
        self.script = format!("{lines}\nexec $BW \"$@\"");
        self
    }
    /// A whole script; `$BW` is the launcher.
    fn script(mut self, s: &str) -> Case {
        self.script = s.into();
        self
    }
    fn arg(mut self, more: &[&str]) -> Case {
        self.args.extend(more.iter().map(|s| s.to_string()));
        self
    }
    /// `-- sh -c SCRIPT`.
    fn sh(self, script: &str) -> Case {
        self.arg(&["--", "sh", "-c", script])
    }
    fn env(mut self, k: &str, v: &str) -> Case {
        self.env.push((k.into(), v.into()));
        self
    }
    fn cwd(mut self, p: &Path) -> Case {
        self.cwd = p.into();
        self
    }
    fn deadline(mut self, d: Duration) -> Case {
        self.deadline = d;
        self
    }

    fn run(&self, imp: Imp, who: Launcher) -> Res {
        let _steady = common::host_mounts_steady();
        self.run_unguarded(imp, who)
    }

    /// [`Case::run`] for a test that holds [`common::change_host_mounts`] itself.
    fn run_unguarded(&self, imp: Imp, who: Launcher) -> Res {
        let mut c = Command::new("bash");
        c.arg("-c")
            .arg(format!(
                "BW=${{AIRLOCK_TEST_BW}}; unset AIRLOCK_TEST_BW\n{}",
                self.script
            ))
            .arg("bash")
            .args(&self.args)
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8")
            .env("HOST_NS", host_namespaces())
            .env("AIRLOCK_TEST_BW", launcher_words(imp, who))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd);
        run_bounded(c, self.deadline)
    }

    fn run_all(&self, who: Launcher) -> [Res; 2] {
        IMPS.map(|imp| self.run(imp, who))
    }
}

fn drain<R: Read + Send + 'static>(mut r: R) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    rx
}

/// Spawn, wait until `limit` (killing the launcher then), read what it printed.
fn run_bounded(mut c: Command, limit: Duration) -> Res {
    let start = Instant::now();
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let deadline = start + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("deadline of {limit:?} passed: the launcher was killed");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = start.elapsed();
    // Whatever the sandbox left behind may still hold the pipes: wait a bounded time.
    let text = |rx: mpsc::Receiver<Vec<u8>>| {
        let v = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| b"<pipe still open after exit>".to_vec());
        String::from_utf8_lossy(&v).into_owned()
    };
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Res {
        code,
        stdout: text(out),
        stderr: text(err),
        took,
    }
}

/// The test process's namespaces, `net:[4026531840] ...`: the probe prints "host" for a link
/// it finds here and "new" otherwise.
fn host_namespaces() -> &'static str {
    static NS: OnceLock<String> = OnceLock::new();
    NS.get_or_init(|| {
        ["cgroup", "ipc", "mnt", "net", "pid", "uts", "user"]
            .iter()
            .map(|n| {
                std::fs::read_link(format!("/proc/self/ns/{n}"))
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join(" ")
    })
}

// ---------------------------------------------------------------------------------------------
// Probes (sh scripts run inside) and normalisation

/// What every namespace test prints.
const PROBE: &str = r###"
echo "## id"; id
echo "## hostname"; uname -n
echo "## maps"
for f in uid_map gid_map; do while read a b c; do echo "$f $a $c"; done < /proc/self/$f; done
echo "## namespaces"
for n in cgroup ipc mnt net pid uts user; do
  l=$(readlink /proc/self/ns/$n)
  case " $HOST_NS " in *" $l "*) echo "$n host";; *) echo "$n new";; esac
done
echo "## interfaces"; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort
echo "## processes"
n=$(ls /proc | grep -cE '^[0-9]+$'); if [ "$n" -le 5 ]; then echo few; else echo many; fi
echo "## env"; env | grep -vE '^(PWD|SHLVL|_|OLDPWD)=' | sort
echo "## pwd"; pwd; echo "PWD=$PWD"
echo "## ls /"; find / -maxdepth 1 -printf '%M %u %g %p -> %l\n' | sort
echo "## writable"
for d in / /tmp /etc; do e=$(touch $d/.wprobe 2>&1 && rm -f $d/.wprobe); case "$e" in "") echo "$d W";; *Read-only*) echo "$d RO";; *) echo "$d other";; esac; done
echo "## mounts"; cut -d' ' -f5,6 /proc/self/mountinfo | grep -E '^/(proc|sys|tmp|etc|usr)? ' | sort
"###;

/// Owners and permissions of each directory's entries (no times, sizes or link counts).
fn ls(dirs: &[&str]) -> String {
    let mut s = String::new();
    for d in dirs {
        let _ = writeln!(
            s,
            "echo '## ls {d}'; find {d} -maxdepth 1 -printf '%M %u %g %p -> %l\\n' 2>&1 | sort"
        );
    }
    s
}

/// `PATH W` when a file can be created in directory PATH (or PATH itself, a file, appended
/// to), else `PATH RO` (read-only file system), `PATH DENIED` (permission) or the message.
fn writable(paths: &[&str]) -> String {
    let mut s = String::from("echo '## writable'\n");
    for p in paths {
        let _ = writeln!(
            s,
            r#"if [ -d {p} ]; then e=$(touch {p}/.wprobe 2>&1 && rm -f {p}/.wprobe); else e=$( (: >> {p}) 2>&1); fi
case "$e" in "") echo "{p} W";; *Read-only*) echo "{p} RO";; *denied*|*"not permitted"*) echo "{p} DENIED";; *) echo "{p} ERR $e";; esac"#
        );
    }
    s
}

/// The mounts at exactly these mount points, `POINT OPTIONS` (fields 5 and 6).
fn mounts(points: &[&str]) -> String {
    let alts = points
        .iter()
        .map(|p| p.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join("|");
    format!(
        "echo '## mounts'; cut -d' ' -f5,6 /proc/self/mountinfo | grep -E '^({alts}) ' | sort\n"
    )
}

/// Keep only ro/rw/nosuid/nodev of each mount's options.
fn normalise(stdout: &str) -> String {
    let mut in_mounts = false;
    let mut out = String::new();
    for line in stdout.lines() {
        if line.starts_with("## ") {
            in_mounts = line == "## mounts";
            out.push_str(line);
        } else if in_mounts {
            let (point, opts) = line.split_once(' ').unwrap_or((line, ""));
            let kept: Vec<&str> = opts
                .split(',')
                .filter(|o| matches!(*o, "ro" | "rw" | "nosuid" | "nodev"))
                .collect();
            out.push_str(&format!("{point} {}", kept.join(",")));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Run under both and assert the same exit code, stdout (normalised) and stderr.
fn same(c: &Case, who: Launcher) -> [Res; 2] {
    let [b, a] = c.run_all(who);
    let ctx = || {
        format!(
            "as {who:?}, args {:?}\n=== bubblewrap: {}\n=== airlock: {}",
            c.args,
            b.show(),
            a.show()
        )
    };
    assert_eq!(b.code, a.code, "exit codes differ {}", ctx());
    assert_eq!(
        normalise(&b.stdout),
        normalise(&a.stdout),
        "stdout differs {}",
        ctx()
    );
    assert_eq!(b.stderr, a.stderr, "stderr differs {}", ctx());
    [b, a]
}

fn tmpdir(mode: u32) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("bwrap-diff")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// A host directory to bind writable: subdirectories `dirs` (0755), files `files` ("old\n",
/// 0644) and symlinks `links` (name, target) in it, all owned by the launching user (uid
/// 65534 for an unprivileged launch), so that its sandbox may write there.
fn host_tree(
    who: Launcher,
    dirs: &[&str],
    files: &[&str],
    links: &[(&str, &str)],
) -> tempfile::TempDir {
    let d = tmpdir(0o755);
    for name in dirs {
        std::fs::create_dir(d.path().join(name)).unwrap();
        std::fs::set_permissions(d.path().join(name), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    for name in files {
        write(&d.path().join(name), b"old\n", 0o644);
    }
    for (name, target) in links {
        std::os::unix::fs::symlink(target, d.path().join(name)).unwrap();
    }
    if who == Launcher::Unprivileged {
        let names = dirs.iter().chain(files).chain(links.iter().map(|(n, _)| n));
        for p in std::iter::once(d.path().to_path_buf()).chain(names.map(|n| d.path().join(n))) {
            std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
        }
    }
    d
}

fn write(path: &Path, text: &[u8], mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    let mut v = base.to_vec();
    v.extend_from_slice(more);
    v
}

/// The `## NAME` section of a probe's output.
fn section(stdout: &str, name: &str) -> String {
    let head = format!("## {name}");
    stdout
        .split("\n## ")
        .map(|s| s.trim_start_matches("## "))
        .find(|s| s.lines().next() == Some(&head[3..]))
        .map(|s| s.lines().skip(1).collect::<Vec<_>>().join("\n"))
        .unwrap_or_else(|| panic!("no section {name} in {stdout:?}"))
}

// ---------------------------------------------------------------------------------------------
// Namespaces

/// Each namespace option, alone and combined, as root and as uid 65534: identity, hostname,
/// id maps, which namespaces are new, interfaces, process count, environment, cwd.
#[test]
fn namespaces_match_bubblewrap() {
    let sets: &[&[&str]] = &[
        &[],
        &["--unshare-user"],
        &["--unshare-pid"],
        &["--unshare-pid", "--proc", "/proc"],
        &["--unshare-net"],
        &["--unshare-uts", "--hostname", "sbx"],
        &["--unshare-ipc"],
        &["--unshare-cgroup"],
        &["--unshare-all", "--proc", "/proc"],
        &["--unshare-all", "--share-net"],
        // --share-net before --unshare-all: the later option wins, the network is new.
        &["--share-net", "--unshare-all"],
        &["--unshare-user", "--uid", "1234", "--gid", "5678"],
        &[
            "--unshare-user",
            "--unshare-uts",
            "--hostname",
            "h2",
            "--uid",
            "0",
        ],
    ];
    for who in BOTH {
        for set in sets {
            let c = case(&with(&["--ro-bind", "/", "/"], set)).sh(PROBE);
            let [b, a] = c.run_all(who);
            let ctx = || format!("as {who:?} {set:?}\n{}\n{}", b.show(), a.show());
            assert_eq!((b.code, a.code), (0, 0), "{}", ctx());
            let asks_userns = set
                .iter()
                .any(|o| *o == "--unshare-user" || *o == "--unshare-all");
            let (mut bo, ao) = (normalise(&b.stdout), normalise(&a.stdout));
            if who == Launcher::Root && !asks_userns {
                // Documented: airlock always creates a user namespace; for a root caller
                // that did not ask for one every id maps to itself (`0 0 4294967295`).
                assert!(bo.contains("user host\n"), "{}", ctx());
                assert!(ao.contains("user new\n"), "{}", ctx());
                assert!(
                    ao.contains("uid_map 0 4294967295\n") && bo.contains("uid_map 0 4294967295\n"),
                    "{}",
                    ctx()
                );
                bo = bo.replace("user host\n", "user new\n");
            }
            assert_eq!(bo, ao, "probe output differs {}", ctx());
            assert_eq!(b.stderr, a.stderr, "{}", ctx());
        }
    }
}

/// --disable-userns: no nested user namespace can be created inside, in both (each caps
/// user.max_user_namespaces at 1 in the sandbox's user namespace, the task's nested one
/// reading 2147483647; airlock had written 0 in the task's own, which it read).
/// Both want --unshare-user itself, also from an unprivileged caller (whose user namespace is
/// implied) and with --unshare-all (which may skip it): airlock had accepted both.
#[test]
fn disable_userns() {
    let probe = "unshare --user true 2>/dev/null && echo nested-ok || echo nested-refused
cat /proc/sys/user/max_user_namespaces";
    for who in BOTH {
        let c = case(&[
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-user",
            "--disable-userns",
        ])
        .sh(probe);
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "nested-refused\n2147483647\n");
        let c = case(&["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-user"]).sh(probe);
        let [b, _] = same(&c, who);
        assert!(b.stdout.starts_with("nested-ok\n"), "{}", b.show());
        for set in [&[][..], &["--unshare-all"][..]] {
            let args = with(
                &with(&["--ro-bind", "/", "/"], set),
                &["--disable-userns", "true"],
            );
            let [b, _] = same(&case(&args), who);
            assert_eq!(
                (b.code, b.stderr.as_str()),
                (1, "bwrap: --disable-userns requires --unshare-user\n")
            );
        }
    }
}

/// A mount the host makes after the sandbox started does not reach it. bubblewrap makes its
/// mounts slaves of the host's, so a filesystem mounted later below a bound path appears in
/// its sandbox with the host mount's own flags: under `--ro-bind / /` its task wrote to it.
/// airlock's mounts are private copies, read-only, nosuid and nodev as set up. (The host's
/// unmounts do not reach it either; a sandbox keeps what it was given until it ends.)
#[test]
fn a_host_mount_made_after_the_start_does_not_reach_the_sandbox() {
    let shared = tmpdir(0o755);
    let out = tmpdir(0o755);
    let d = shared.path().display().to_string();
    let script = r#"mount -t tmpfs -o mode=755 none "$D" && mount --make-shared "$D" && mkdir "$D/sub" || exit 90
$BW --ro-bind / / --dev /dev --proc /proc -- sh -c '
  echo started
  i=0; while [ ! -e "$D/ready" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
  [ -e "$D/sub/marker" ] && echo seen || echo "not seen"
  touch "$D/sub/x" 2>/dev/null && echo written || echo "not written"' > "$O/out" &
i=0; while ! grep -q started "$O/out" && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
mount -t tmpfs -o mode=1777 none "$D/sub" && touch "$D/sub/marker" "$D/ready" || exit 91
wait $!
code=$?
cat "$O/out"
umount "$D/sub"; umount "$D"
exit $code"#;
    let c = case(&[])
        .script(script)
        .env("D", &d)
        .env("O", &out.path().display().to_string());
    for who in BOTH {
        let [b, a] = common::change_host_mounts(|| IMPS.map(|imp| c.run_unguarded(imp, who)));
        assert_eq!(
            (b.code, b.stdout.as_str()),
            (0, "started\nseen\nwritten\n"),
            "{who:?} bubblewrap (the control)\n{}",
            b.show()
        );
        assert_eq!(
            (a.code, a.stdout.as_str()),
            (0, "started\nnot seen\nnot written\n"),
            "{who:?} airlock\n{}",
            a.show()
        );
    }
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(&d),
        "the test's mounts are gone"
    );
}

/// Capabilities --cap-add keeps act only on what the sandbox's own namespaces hold, never on
/// the host's (airlock always makes a user namespace; the README's list of differences). As
/// root without --unshare-user, bubblewrap's task (the control: the same probe, same line)
/// binds a port below 1024 on the host's loopback with CAP_NET_BIND_SERVICE and makes a
/// device node with CAP_MKNOD; airlock's gets EACCES and EPERM.
#[test]
fn kept_capabilities_never_act_on_the_host() {
    // A port below 1024 free on the host's loopback now (bound and closed at once).
    let port = (600..1000)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("no free port below 1024 on loopback");
    let bind = format!(
        "import socket\n\
         s = socket.socket()\n\
         try:\n    s.bind(('127.0.0.1', {port})); print('bound')\n\
         except OSError as e:\n    print('bind', e.errno)\n\
         s.close()"
    );
    let line = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--cap-drop",
        "ALL",
    ];
    let cases = [
        (
            "CAP_NET_BIND_SERVICE",
            format!("python3 -c \"{bind}\""),
            "bound\n",
            "bind 13\n",
        ),
        (
            "CAP_MKNOD",
            "mknod /tmp/n c 1 3 2>/dev/null && echo made || echo refused".to_string(),
            "made\n",
            "refused\n",
        ),
    ];
    for (cap, probe, under_bwrap, under_airlock) in cases {
        let c = case(&with(&line, &["--cap-add", cap])).sh(&probe);
        let [b, a] = c.run_all(Launcher::Root);
        assert_eq!(
            (b.code, b.stdout.as_str()),
            (0, under_bwrap),
            "bubblewrap (the control), {cap}\n{}",
            b.show()
        );
        assert_eq!(
            (a.code, a.stdout.as_str()),
            (0, under_airlock),
            "airlock, {cap}\n{}",
            a.show()
        );
    }
}

/// The capabilities --cap-add keeps reach what bubblewrap's reach, never more. bubblewrap
/// runs the task in a user namespace nested in the sandbox's where it mapped the caller to
/// root to mount --dev's devpts (a sandbox uid or gid other than 0 with --dev: uid 65534's
/// default, or root's --uid 1000) and with --disable-userns; there CAP_SYS_ADMIN and
/// CAP_NET_ADMIN cannot mount, configure the network or set the hostname. airlock's task had
/// kept them over the sandbox's own namespaces and did all three. Without --dev, or mapped
/// to 0, both tasks may (the probe can succeed).
#[test]
fn kept_capabilities_reach_no_further_than_under_bubblewrap() {
    let probe = r#"for t in "/usr/bin/mount -t tmpfs none /tmp" "/usr/sbin/ip link set lo down" \
  "/usr/bin/hostname other" "/usr/bin/unshare --user true"; do
  sh -c "$t" >/dev/null 2>&1 && echo "ok: ${t%% *}" || echo "refused: ${t%% *}"
done"#;
    let caps = ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN"];
    let nested = "refused: /usr/bin/mount\nrefused: /usr/sbin/ip\nrefused: /usr/bin/hostname\n";
    let cases: &[(Launcher, &[&str], &str)] = &[
        (Launcher::Unprivileged, &["--dev", "/dev"], nested),
        (
            Launcher::Unprivileged,
            &["--dev", "/dev", "--proc", "/proc"],
            nested,
        ),
        (
            Launcher::Root,
            &["--dev", "/dev", "--uid", "1000", "--gid", "1000"],
            nested,
        ),
        (
            Launcher::Root,
            &["--dev", "/dev", "--uid", "0", "--gid", "5"],
            nested,
        ),
        (
            Launcher::Unprivileged,
            &["--unshare-user", "--disable-userns"],
            nested,
        ),
        (
            Launcher::Root,
            &["--unshare-user", "--disable-userns"],
            nested,
        ),
        (
            Launcher::Unprivileged,
            &["--dev", "/dev", "--uid", "0", "--gid", "0"],
            "ok: /usr/bin/mount\nok: /usr/sbin/ip\nok: /usr/bin/hostname\n",
        ),
        (
            Launcher::Unprivileged,
            &["--dev-bind", "/dev/null", "/dev/null"],
            "ok: /usr/bin/mount\nok: /usr/sbin/ip\nok: /usr/bin/hostname\n",
        ),
        (
            Launcher::Root,
            &["--dev", "/dev"],
            "ok: /usr/bin/mount\nok: /usr/sbin/ip\nok: /usr/bin/hostname\n",
        ),
    ];
    for (who, set, want) in cases {
        let args = with(&with(&["--ro-bind", "/", "/", "--unshare-all"], set), &caps);
        let [b, _] = same(&case(&args).sh(probe), *who);
        let ctx = || format!("as {who:?} {set:?}\n{}", b.show());
        assert_eq!(b.code, 0, "{}", ctx());
        assert!(b.stdout.starts_with(want), "{}", ctx());
        let nested_userns = if set.contains(&"--disable-userns") {
            "refused"
        } else {
            "ok"
        };
        assert!(
            b.stdout
                .ends_with(&format!("{nested_userns}: /usr/bin/unshare\n")),
            "{}",
            ctx()
        );
    }
}

/// Each check of `every_capability_reaches_no_further_than_under_bubblewrap`, run in a child
/// of its own (a process's namespaces and ids stay as they were for the next): NAME ok, or
/// NAME refused. Those that could change the host where a root caller's bubblewrap task is
/// the host's root (the network, the hostname) write the value already there, and run only
/// where the command line unshares that namespace.
const REACH_PROBE: &str = r#"
import ctypes, fcntl, os, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
def call(r):
    if r != 0:
        raise OSError(ctypes.get_errno(), "")
def lo():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = fcntl.ioctl(s, 0x8913, struct.pack("16sh22x", b"lo", 0))  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, req)  # SIOCSIFFLAGS, the same flags
def hostname():
    name = socket.gethostname().encode()
    call(libc.sethostname(name, len(name)))
def setns(path):
    call(libc.setns(os.open(path, os.O_RDONLY), 0))
def ptrace_pid1():
    call(libc.ptrace(0x4206, 1, None, None))  # PTRACE_SEIZE
checks = [
    ("mount", lambda: call(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))),
    ("remount-rw", lambda: call(libc.mount(None, b"/", None, 32 | 4096, None))),
    ("network", lo),
    ("hostname", hostname),
    ("raw-socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1).close()),
    ("chroot", lambda: os.chroot("/")),
    ("setuid-other", lambda: os.setresuid(4242, 4242, 4242)),
    ("setgid-other", lambda: os.setresgid(4242, 4242, 4242)),
    ("pid1-environ", lambda: open("/proc/1/environ", "rb").read()),
    ("pid1-root", lambda: os.listdir("/proc/1/root/")),
    ("pid1-mnt-ns", lambda: setns("/proc/1/ns/mnt")),
    ("pid1-net-ns", lambda: setns("/proc/1/ns/net")),
    ("pid1-ptrace", ptrace_pid1),
    ("new-userns", lambda: call(libc.unshare(0x10000000))),
]
for name, check in checks:
    pid = os.fork()
    if pid == 0:
        try:
            check()
            os._exit(0)
        except Exception:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    print(name, "ok" if status == 0 else "refused", flush=True)
"#;

/// With every capability kept (`--cap-add ALL`), airlock's task does nothing bubblewrap's
/// refuses, on each line that either user namespace layout or the sandbox's own pid 1 could
/// change: mounting, the network, the hostname, other ids, pid 1's files, namespaces and
/// ptrace, a nested user namespace. Where they differ airlock is the stricter (its pid 1 is
/// not dumpable; a root caller's task without --unshare-user has no capability on the host),
/// so each "ok" of airlock's must be bubblewrap's "ok" too. airlock's task had mounted and
/// set the network up with --dev as uid 65534 (fixed in 44138b5); this sweeps the uid, gid,
/// --dev, --disable-userns, --as-pid-1, --share-net and --unshare-user-try combinations.
/// (setgroups is left out: a root caller's user namespace allows it in airlock, which drops
/// root's supplementary groups itself, and with only the sandbox's gid mapped it changes
/// nothing the task can reach; README, "Differences".)
#[test]
fn every_capability_reaches_no_further_than_under_bubblewrap() {
    let all: &[&[&str]] = &[
        &["--unshare-all"],
        &["--unshare-all", "--dev", "/dev"],
        &["--unshare-all", "--dev", "/dev", "--uid", "0", "--gid", "0"],
        &["--unshare-all", "--uid", "1000", "--gid", "1000"],
        NESTED_BY_DEV,
        &[
            "--unshare-all",
            "--dev",
            "/dev",
            "--uid",
            "0",
            "--gid",
            "1000",
        ],
        &["--unshare-all", "--as-pid-1", "--dev", "/dev"],
        &["--unshare-all", "--share-net"],
        &[
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--disable-userns",
        ],
        &[
            "--unshare-user-try",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--dev",
            "/dev",
        ],
    ];
    // A root caller without --unshare-user: bubblewrap's task is the host's root.
    let root_only: &[&[&str]] = &[
        &[
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
        ],
        &[
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--dev",
            "/dev",
        ],
    ];
    let names = [
        "mount",
        "remount-rw",
        "network",
        "hostname",
        "raw-socket",
        "chroot",
        "setuid-other",
        "setgid-other",
        "pid1-environ",
        "pid1-root",
        "pid1-mnt-ns",
        "pid1-net-ns",
        "pid1-ptrace",
        "new-userns",
    ];
    let runs = BOTH
        .iter()
        .flat_map(|who| all.iter().map(move |set| (*who, *set)))
        .chain(root_only.iter().map(|set| (Launcher::Root, *set)));
    let mut airlock_oks = 0;
    // Per check, whether bubblewrap's task ever did it: each probe's own control.
    let mut bubblewrap_did = vec![false; names.len()];
    for (who, set) in runs {
        let args = with(
            &with(&["--ro-bind", "/", "/", "--proc", "/proc"], set),
            &["--cap-add", "ALL", "--", PYTHON, "-c", REACH_PROBE],
        );
        let [b, a] = case(&args).run_all(who);
        let ctx = || {
            format!(
                "as {who:?} {set:?}\n=== bubblewrap: {}\n=== airlock: {}",
                b.show(),
                a.show()
            )
        };
        assert_eq!((b.code, a.code), (0, 0), "{}", ctx());
        let lines = |r: &Res| -> Vec<(String, bool)> {
            r.stdout
                .lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(n, v)| (n.to_string(), v == "ok"))
                .collect()
        };
        let (theirs, ours) = (lines(&b), lines(&a));
        let listed = |v: &[(String, bool)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(listed(&theirs), names, "{}", ctx());
        assert_eq!(listed(&ours), names, "{}", ctx());
        for (i, ((name, theirs_ok), (_, ours_ok))) in theirs.iter().zip(&ours).enumerate() {
            assert!(
                !ours_ok || *theirs_ok,
                "airlock's task may {name}, bubblewrap's may not: {}",
                ctx()
            );
            airlock_oks += usize::from(*ours_ok);
            bubblewrap_did[i] |= *theirs_ok;
        }
    }
    // Each probe can see a permission (a check that always fails would pass the comparison
    // above whatever airlock allowed): bubblewrap's task did each somewhere in the sweep, and
    // airlock's task does what its capabilities reach.
    let never: Vec<&str> = names
        .iter()
        .zip(&bubblewrap_did)
        .filter(|(_, did)| !**did)
        .map(|(n, _)| *n)
        .collect();
    assert!(
        never.is_empty(),
        "checks bubblewrap's task never passed: {never:?}"
    );
    assert!(airlock_oks > 0, "no check ever succeeded under airlock");
}

/// --assert-userns-disabled checks, it does not disable: inside a user namespace that still
/// allows a nested one (a new one, or none for a root caller) the launch fails with
/// bubblewrap's words, with or without --unshare-user; joined with --userns to a sandbox made
/// with --disable-userns (the same implementation's), it runs. airlock had disabled nested
/// user namespaces itself and run, as root refusing it without --unshare-user.
#[test]
fn assert_userns_disabled_checks_and_does_not_disable() {
    let refused = "bwrap: creation of new user namespaces was not disabled as requested\n";
    for who in BOTH {
        for set in [&[][..], &["--unshare-user"][..]] {
            let args = with(
                &with(&["--ro-bind", "/", "/"], set),
                &["--assert-userns-disabled", "true"],
            );
            let [b, _] = same(&case(&args), who);
            assert_eq!((b.code, b.stderr.as_str()), (1, refused));
        }
        let args = [
            "--ro-bind",
            "/",
            "/",
            "--unshare-user",
            "--disable-userns",
            "--assert-userns-disabled",
            "true",
        ];
        let [b, _] = same(&case(&args), who);
        assert_eq!(b.code, 0, "{}", b.show());
    }
    // The sandbox to join: made with --disable-userns, its child-pid read from --info-fd.
    let d = tmpdir(0o755);
    let info = d.path().join("info");
    let script = format!(
        r#"exec 3>{info}
$BW --unshare-user --disable-userns --unshare-pid --die-with-parent --ro-bind / / \
  --info-fd 3 sleep 10 >/dev/null 2>&1 &
outer=$!
exec 3>&-
for _ in $(seq 500); do grep -q child-pid {info} && break; sleep 0.01; done
pid=$(sed -n 's/.*"child-pid": \([0-9]*\).*/\1/p' {info})
exec 5</proc/$pid/ns/user
$BW --userns 5 "$@"; echo "exit $?"
$BW --userns 5 --ro-bind / / unshare --user true 2>/dev/null; echo "control exit $?"
{{ kill $outer; wait $outer; }} 2>/dev/null"#,
        info = info.display()
    );
    let c = case(&["--assert-userns-disabled", "--ro-bind", "/", "/", "true"]).script(&script);
    let [b, _] = same(&c, Launcher::Root);
    assert_eq!(b.stdout, "exit 0\ncontrol exit 1\n", "{}", b.show());
}

#[test]
fn namespace_option_errors_match() {
    for who in BOTH {
        for set in [
            &["--hostname", "x"][..],
            &["--unshare-pid", "--as-pid-1", "--hostname", "x"][..],
            &["--as-pid-1"][..],
        ] {
            let [b, a] = same(
                &case(&with(&["--ro-bind", "/", "/"], set)).arg(&["true"]),
                who,
            );
            assert_eq!(b.code, 1);
            assert!(a.stderr.starts_with("bwrap: Specifying --"), "{}", a.show());
        }
    }
    // --uid without a user namespace, as root.
    let [b, _] = same(
        &case(&["--ro-bind", "/", "/", "--uid", "5", "true"]),
        Launcher::Root,
    );
    assert_eq!(
        b.stderr,
        "bwrap: Specifying --uid requires --unshare-user or --userns\n"
    );
}

/// bubblewrap refuses --uid/--gid without a user namespace only when they differ from the
/// caller's ids: `--uid 0 --gid 0` as root is accepted and runs as uid 0.
#[test]
fn uid_equal_to_the_callers_needs_no_user_namespace() {
    let c = case(&[
        "--ro-bind",
        "/",
        "/",
        "--uid",
        "0",
        "--gid",
        "0",
        "id",
        "-u",
    ]);
    let [b, a] = same(&c, Launcher::Root);
    assert_eq!((b.code, b.stdout.as_str()), (0, "0\n"), "{}", b.show());
    let _ = a;
}

// ---------------------------------------------------------------------------------------------
// Environment and working directory

#[test]
fn environment_options_apply_in_argument_order() {
    let sets: &[&[&str]] = &[
        &[
            "--clearenv",
            "--setenv",
            "A",
            "1",
            "--unsetenv",
            "A",
            "--setenv",
            "B",
            "2",
        ],
        &["--setenv", "A", "1", "--clearenv", "--setenv", "B", "2"],
        &[
            "--setenv",
            "A",
            "1",
            "--setenv",
            "A",
            "3",
            "--unsetenv",
            "HOME",
        ],
        &["--unsetenv", "NOT_SET", "--setenv", "PATH", "/usr/bin"],
    ];
    for who in BOTH {
        for set in sets {
            let c = case(&with(&["--ro-bind", "/", "/"], set))
                .env("CALLER_VAR", "kept")
                .sh("echo PATH=$PATH; /usr/bin/env | /usr/bin/sort");
            let [b, _] = same(&c, who);
            assert_eq!(b.code, 0);
        }
    }
}

/// The task's environment keeps the caller's order, as bubblewrap's setenv(3) does: a
/// `--setenv` of a variable already set, and the PWD set to the directory entered, stay in
/// place, a new variable goes at the end (env(1) prints them unsorted here). airlock had moved
/// each to the end.
#[test]
fn environment_keeps_the_callers_order() {
    let sets: &[&[&str]] = &[
        &[],
        &["--setenv", "HOME", "/elsewhere", "--setenv", "NEW", "1"],
        &["--chdir", "/usr", "--setenv", "CALLER_VAR", "changed"],
        &["--unsetenv", "PWD", "--setenv", "A", "1"],
    ];
    for who in BOTH {
        for set in sets {
            let c = case(&with(
                &with(&["--ro-bind", "/", "/"], set),
                &["/usr/bin/env"],
            ))
            .env("CALLER_VAR", "kept");
            let [b, _] = same(&c, who);
            assert_eq!(b.code, 0);
        }
    }
}

/// The working directory is entered with the task's own capabilities, as bubblewrap enters it
/// after dropping the others: for an unprivileged caller a --chdir the task may not search
/// (0600) fails ("Can't chdir to /p: Permission denied") unless --cap-add keeps
/// CAP_DAC_OVERRIDE; airlock had entered it with the setup's capabilities. (bubblewrap run
/// by root keeps root's capabilities and enters it.)
#[test]
fn working_directory_is_entered_with_the_tasks_capabilities() {
    let base = with(MIN, &["--perms", "0600", "--dir", "/p", "--unshare-user"]);
    for who in BOTH {
        for more in [
            &["--uid", "5", "--chdir", "/p"][..],
            &["--chdir", "/p"],
            &["--cap-add", "CAP_DAC_OVERRIDE", "--chdir", "/p"],
        ] {
            let [b, _] = same(&case(&with(&with(&base, more), &["pwd"])), who);
            let denied = who == Launcher::Unprivileged && more[0] != "--cap-add";
            match denied {
                true => assert_eq!(b.stderr, "bwrap: Can't chdir to /p: Permission denied\n"),
                false => assert_eq!(b.stdout, "/p\n", "{}", b.show()),
            }
        }
        // A relative --chdir is taken from the root, also when entered again after the
        // capabilities are dropped (taken from the first entry, it had led to /w/a/w/a).
        let rel = [
            "--unshare-user",
            "--tmpfs",
            "/w",
            "--dir",
            "/w/a",
            "--dir",
            "/w/a/w/a",
            "--chdir",
            "w/a",
            "pwd",
        ];
        let [b, _] = same(&case(&with(MIN, &rel)), who);
        assert_eq!(b.stdout, "/w/a\n", "{}", b.show());
    }
}

#[test]
fn chdir_and_default_working_directory() {
    let d = tmpdir(0o755);
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let probe = "pwd; echo PWD=$PWD";
    for who in BOTH {
        // The caller's cwd exists inside: it is kept.
        same(&case(&["--ro-bind", "/", "/"]).sh(probe).cwd(&sub), who);
        // It does not: $HOME, then /.
        same(
            &case(MIN).sh(probe).cwd(&sub).env("HOME", "/usr/share"),
            who,
        );
        same(
            &case(MIN).sh(probe).cwd(&sub).env("HOME", "/nonexistent"),
            who,
        );
        // HOME as the final environment has it (--setenv before the fallback).
        same(
            &case(&with(MIN, &["--setenv", "HOME", "/usr/lib"]))
                .sh(probe)
                .cwd(&sub),
            who,
        );
        // --chdir.
        let [b, _] = same(&case(&with(MIN, &["--chdir", "/usr/share"])).sh(probe), who);
        assert_eq!(b.stdout, "/usr/share\nPWD=/usr/share\n");
        let [b, _] = same(
            &case(&with(MIN, &["--chdir", "/nonexistent"])).sh(probe),
            who,
        );
        assert_eq!(b.code, 1);
        assert!(b.stderr.contains("bwrap: Can't chdir to /nonexistent"));
    }
}

/// Documented: a root caller's supplementary groups never reach the task, with or without a
/// user namespace it asked for; bubblewrap keeps them (shown as the overflow gid in a user
/// namespace it makes).
#[test]
fn a_root_callers_supplementary_groups_do_not_reach_the_task() {
    let probe = "id -G";
    let c = |more: &[&str]| {
        case(&with(MIN, more))
            .sh(probe)
            .script(r#"exec setpriv --groups 4,24 $BW "$@""#)
    };
    for (more, bubblewrap) in [(&[][..], "0 4 24\n"), (&["--unshare-user"], "0 65534\n")] {
        let [b, a] = c(more).run_all(Launcher::Root);
        assert_eq!(b.stdout, bubblewrap, "{}", b.show());
        assert_eq!(a.stdout, "0\n", "{}", a.show());
    }
}

/// The root of a user namespace that maps two ranges (`0 0 1` and `1000 1000 1`, as a
/// rootless container with subordinate ids has) sees a file of uid 1000 in a bind as uid 1000,
/// as under bubblewrap: every range of its map is mirrored, not the first alone (a review's
/// mutant, which the one-range test above could not tell).
#[test]
fn the_root_of_a_two_range_user_namespace_keeps_both_ranges() {
    let dir = tmpdir(0o755);
    let file = dir.path().join("f");
    write(&file, b"x", 0o644);
    std::os::unix::fs::chown(&file, Some(1000), Some(1000)).unwrap();
    // The caller's namespace: its maps written by its parent, root, once it exists.
    let script = format!(r#"exec {PYTHON} -c "$IN_USERNS" $'0 0 1\n1000 1000 1\n' allow $BW "$@""#);
    let c = case(&with(
        MIN,
        &["--ro-bind", &dir.path().display().to_string(), "/d"],
    ))
    .sh("stat -c '%u %g' /d/f")
    .env("IN_USERNS", common::IN_USERNS)
    .script(&script);
    let [b, _] = same(&c, Launcher::Root);
    assert_eq!(b.stdout, "1000 1000\n", "{}", b.show());
}

/// A root caller that may not drop its supplementary groups (no CAP_SETGID, where setgroups
/// is allowed) is refused when the launcher must drop them (--userns-block-fd: the caller
/// writes the maps), rather than handing the task root's groups: EPERM passes only where
/// the namespace denies setgroups to everyone (a review's mutant that took any EPERM kept
/// them, and no test saw it). bubblewrap fails this line too, later.
#[test]
fn a_root_caller_that_cannot_drop_its_groups_is_refused() {
    let c = case(&["--unshare-user", "--userns-block-fd", "6", "--info-fd", "5"])
        .arg(&["--ro-bind", "/", "/", "id"])
        .script(r#"exec 6</dev/null 5>/dev/null; exec setpriv --bounding-set=-setgid $BW "$@""#);
    let a = c.run(Imp::Airlock, Launcher::Root);
    assert_eq!(a.code, 1, "{}", a.show());
    assert_eq!(
        a.stderr,
        "bwrap: step 1: setgroups([]): EPERM: Operation not permitted\n",
        "{}",
        a.show()
    );
}

/// The root of a user namespace that maps one id and denies setgroups (`unshare -r`, as a
/// rootless container's build step is) runs lines as under bubblewrap. Every one had failed:
/// without --unshare-user at the identity map (`0 0 4294967295`, ids the caller's namespace
/// lacks), with it at `setgroups([])`, which that namespace refuses everyone (a review).
#[test]
fn the_root_of_a_one_id_user_namespace_runs_lines() {
    // `unshare -r` between the caller's identity (setpriv) and the launcher.
    let script = r#"read -ra w <<< "$BW"; exec "${w[@]:0:${#w[@]}-1}" unshare -r "${w[-1]}" "$@""#;
    for who in BOTH {
        for more in [
            &[][..],
            &["--unshare-pid"],
            &["--unshare-user"],
            &["--unshare-all"],
        ] {
            let c = case(&with(MIN, more)).sh("id -u; id -g").script(script);
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, "0\n0\n", "{who:?} {more:?}: {}", b.show());
        }
    }
}

/// The caller's directory is named as bubblewrap names it (glibc's get_current_dir_name, once
/// the options have changed the environment): `$PWD` when it leads to the same directory, so
/// a project entered through a symlink (a usr-merged `/lib`, or `/home` as a link to
/// `var/home`) is entered by that name inside, where only that name may be bound. airlock had
/// taken the kernel's name (getcwd), missing from the sandbox, and fallen back to `$HOME` or
/// `/`. bubblewrap reads it with its scaffold tmpfs on /tmp, so a `$PWD` under /tmp is not
/// taken, nor one --clearenv removed.
#[test]
fn the_callers_directory_is_named_as_its_pwd_names_it() {
    let mut dirs = vec![];
    for parent in ["/var/tmp", "/tmp"] {
        let d = tempfile::Builder::new()
            .prefix("bwrap-diff")
            .tempdir_in(parent)
            .unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(d.path().join("real")).unwrap();
        std::fs::set_permissions(
            d.path().join("real"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
        dirs.push(d);
    }
    let probe = "pwd; echo PWD=$PWD";
    let link = |d: &tempfile::TempDir| d.path().join("link").display().to_string();
    let (link, in_tmp) = (link(&dirs[0]), link(&dirs[1]));
    for who in BOTH {
        // Only the link's name is bound (its source resolved on the host).
        let bound = |l: &str, more: &[&str]| {
            case(&with(&with(MIN, more), &["--ro-bind", l, l]))
                .sh(probe)
                .pre(&format!("cd {l}"))
        };
        let [b, _] = same(&bound(&link, &[]), who);
        assert_eq!(b.stdout, format!("{link}\nPWD={link}\n"), "{}", b.show());
        // Without PWD: the kernel's name, not bound.
        let [b, _] = same(&bound(&link, &["--clearenv"]), who);
        assert_eq!(b.stdout, "/\nPWD=/\n", "{}", b.show());
        // Under /tmp: bubblewrap's scaffold hides it.
        let [b, _] = same(&bound(&in_tmp, &[]), who);
        assert_eq!(b.stdout, "/\nPWD=/\n", "{}", b.show());
        // The host seen whole: the link is entered, not what it names.
        let [b, _] = same(
            &case(&["--ro-bind", "/", "/"]).sh(probe).pre("cd /lib"),
            who,
        );
        assert_eq!(b.stdout, "/lib\nPWD=/lib\n", "{}", b.show());
        // A $PWD that names another directory is not taken.
        let [b, _] = same(
            &case(MIN)
                .sh(probe)
                .pre("cd /usr/share; export PWD=/usr/lib"),
            who,
        );
        assert_eq!(b.stdout, "/usr/share\nPWD=/usr/share\n", "{}", b.show());
    }
}

// ---------------------------------------------------------------------------------------------
// Filesystem

/// The Codex shape: the host read-only, the workspace writable, its .git a read-only tmpfs.
#[test]
fn codex_shape_read_only_root_writable_workspace_read_only_git() {
    let d = tmpdir(0o755);
    let w = d.path().join("ws");
    std::fs::create_dir_all(w.join(".git")).unwrap();
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o777)).unwrap();
    write(&w.join("file"), b"x", 0o666);
    let w = w.display().to_string();
    let git = format!("{w}/.git");
    let args = [
        "--ro-bind",
        "/",
        "/",
        "--bind",
        &w,
        &w,
        "--tmpfs",
        &git,
        "--remount-ro",
        &git,
        "--unshare-pid",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ];
    let probe = format!(
        "{}{}{}",
        writable(&[
            "/",
            "/etc",
            "/tmp",
            &w,
            &git,
            &format!("{w}/file"),
            "/dev/null"
        ]),
        mounts(&["/", &w, &git, "/proc", "/dev"]),
        ls(&[&w])
    );
    for who in BOTH {
        let [b, _] = same(&case(&args).sh(&probe), who);
        let m = section(&normalise(&b.stdout), "mounts");
        assert!(m.contains(&format!("{git} ro,nosuid,nodev")), "{m}");
        let wr = section(&b.stdout, "writable");
        assert!(wr.contains(&format!("{w} W\n{git} RO")), "{wr}");
    }
}

#[test]
fn try_binds_skip_a_missing_source_and_plain_binds_fail() {
    let probe =
        "for p in /a /b /c /d; do [ -e $p ] && echo \"$p exists\" || echo \"$p absent\"; done";
    for who in BOTH {
        let c = case(&with(
            MIN,
            &[
                "--ro-bind-try",
                "/nonexistent-1",
                "/a",
                "--bind-try",
                "/nonexistent-2",
                "/b",
                "--dev-bind-try",
                "/nonexistent-3",
                "/c",
                "--ro-bind-try",
                "/etc",
                "/d",
            ],
        ))
        .sh(probe);
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "/a absent\n/b absent\n/c absent\n/d exists\n");
        for op in ["--ro-bind", "--bind", "--dev-bind"] {
            let [b, _] = same(
                &case(&with(MIN, &[op, "/nonexistent-4", "/a"])).sh("true"),
                who,
            );
            assert_eq!(b.code, 1);
            assert_eq!(
                b.stderr,
                "bwrap: Can't find source path /nonexistent-4: No such file or directory\n"
            );
            // A -try bind skips only a source that does not exist: one whose path goes
            // through a file fails as a plain bind does (airlock had skipped it too).
            let try_op = format!("{op}-try");
            let [b, _] = same(
                &case(&with(MIN, &[&try_op, "/etc/hostname/x", "/a"])).sh("true"),
                who,
            );
            assert_eq!(b.code, 1);
            assert_eq!(
                b.stderr,
                "bwrap: Can't find source path /etc/hostname/x: Not a directory\n"
            );
        }
    }
}

#[test]
fn dev_bind_of_the_host_dev() {
    let probe = format!(
        "{}{}{}",
        writable(&["/dev/null", "/dev/zero"]),
        "echo '## devices'; for d in null zero full random urandom tty; do [ -c /dev/$d ] && echo $d; done\n\
         head -c 4 /dev/zero | od -An -tx1\n",
        mounts(&["/dev"])
    );
    for who in BOTH {
        same(
            &case(&with(MIN, &["--dev-bind", "/dev", "/dev"])).sh(&probe),
            who,
        );
    }
}

/// --tmpfs with --perms and --size, --dir with --perms, --symlink, --chmod, missing parents
/// created, in argument order.
#[test]
fn created_paths_have_the_asked_permissions() {
    let args = with(
        MIN,
        &[
            "--unshare-pid",
            "--proc",
            "/proc",
            "--perms",
            "0700",
            "--size",
            "1048576",
            "--tmpfs",
            "/t",
            "--tmpfs",
            "/deep/er/tmp",
            "--dir",
            "/plain/dir",
            "--perms",
            "0750",
            "--dir",
            "/plain/dir/sub",
            "--symlink",
            "/plain/dir",
            "/plain/s",
            "--symlink",
            "relative/target",
            "/plain/r",
            "--chmod",
            "0711",
            "/plain/dir",
            "--tmpfs",
            "/chm",
            "--chmod",
            "1777",
            "/chm",
            "--perms",
            "0777",
            "--dir",
            "/open",
        ],
    );
    let probe = format!(
        "echo '## stat'; stat -c '%n %a %F' /t /deep /deep/er /deep/er/tmp /plain /plain/dir /plain/dir/sub /chm /open\n\
         echo '## size'; stat -f -c '%b %S' /t\n{}{}{}",
        ls(&["/", "/plain"]),
        writable(&["/", "/t", "/plain/dir/sub", "/chm", "/open"]),
        mounts(&["/", "/t", "/deep/er/tmp", "/chm", "/usr", "/proc"])
    );
    for who in BOTH {
        let [b, _] = same(&case(&args).sh(&probe), who);
        assert!(b.stdout.contains("/t 700 directory\n"), "{}", b.show());
        assert!(
            b.stdout.contains("/plain/dir/sub 750 directory\n"),
            "{}",
            b.show()
        );
        assert!(
            b.stdout.contains("/plain/dir 711 directory\n"),
            "{}",
            b.show()
        );
        assert!(b.stdout.contains("/open 777 directory\n"), "{}", b.show());
        assert!(b.stdout.contains("## size\n256 4096\n"), "{}", b.show());
    }
}

/// A file bound where nothing was makes an empty file to mount on, and in a writable bind
/// that file stays on the host after the run (GNOME's thumbnailer binds its input into its
/// output directory this way): bubblewrap makes it 0444, and so must airlock (it made 0644).
/// Control: the file the run's own `--bind` exposes is written through, under both.
#[test]
fn a_file_mount_point_left_in_a_writable_bind_has_bubblewraps_mode() {
    let input = tmpdir(0o755);
    write(&input.path().join("in.txt"), b"data\n", 0o644);
    let src = input.path().join("in.txt");
    for who in BOTH {
        let modes = IMPS.map(|imp| {
            let out = host_tree(who, &[], &["kept.txt"], &[]);
            let od = out.path().to_str().unwrap().to_string();
            let args = with(
                MIN,
                &[
                    "--bind",
                    &od,
                    "/od",
                    "--ro-bind",
                    src.to_str().unwrap(),
                    "/od/file-to-thumbnail.txt",
                ],
            );
            let r = case(&args)
                .sh("cat /od/file-to-thumbnail.txt && echo new > /od/kept.txt")
                .run(imp, who);
            assert_eq!(
                (r.code, r.stdout.as_str()),
                (0, "data\n"),
                "{imp:?} {who:?}: {}",
                r.show()
            );
            assert_eq!(
                std::fs::read(out.path().join("kept.txt")).unwrap(),
                b"new\n"
            );
            let left = std::fs::symlink_metadata(out.path().join("file-to-thumbnail.txt")).unwrap();
            assert_eq!(left.len(), 0, "{imp:?} {who:?}");
            left.permissions().mode() & 0o7777
        });
        assert_eq!(
            modes[0] & 0o222,
            0,
            "bubblewrap's mount point is read-only: {:o}",
            modes[0]
        );
        assert_eq!(
            modes[0], modes[1],
            "as {who:?}: bubblewrap {:o}, airlock {:o}",
            modes[0], modes[1]
        );
    }
}

/// The caller's umask shapes only the task: under umask 0377 bubblewrap still makes --dir
/// 0755, --tmpfs 0755 and --file 0666 (and their parents), and the task runs with 0377.
/// airlock had applied the umask to what it made (a --dir was 0400). Control: the task's own
/// mkdir inside gets 0400 under both.
#[test]
fn the_callers_umask_shapes_only_the_task() {
    let args = with(
        MIN,
        &[
            "--tmpfs",
            "/t",
            "--dir",
            "/t/d",
            "--dir",
            "/new/parent/d",
            "--file",
            "5",
            "/t/f",
        ],
    );
    let probe =
        "umask; mkdir /t/own; stat -c '%n %a' /t /t/d /new /new/parent /new/parent/d /t/f /t/own";
    for who in BOTH {
        let c = case(&args).pre("umask 0377\nexec 5</dev/null").sh(probe);
        let [b, _] = same(&c, who);
        assert!(b.stdout.starts_with("0377\n"), "{}", b.show());
        assert!(b.stdout.contains("/t/d 755\n"), "{}", b.show());
        assert!(b.stdout.contains("/t/f 666\n"), "{}", b.show());
        assert!(b.stdout.contains("/t/own 400\n"), "{}", b.show());
    }
}

/// The parents bubblewrap creates for an entry whose --perms deny group or other access deny
/// that access too ("least astonishment": 0755 without the group bits, the other bits, or
/// both); airlock creates every parent 0755.
#[test]
fn parents_of_a_restricted_entry_are_restricted() {
    let d = tmpdir(0o755);
    let data = d.path().join("data");
    write(&data, b"secret\n", 0o600);
    let args = with(
        MIN,
        &[
            "--perms",
            "0750",
            "--dir",
            "/a/b/c",
            "--perms",
            "0600",
            "--file",
            "5",
            "/f/g/file",
            "--perms",
            "0700",
            "--tmpfs",
            "/h/t",
            "--perms",
            "0704",
            "--dir",
            "/o/p",
        ],
    );
    let probe = "stat -c '%n %a' /a /a/b /a/b/c /f /f/g /f/g/file /h /h/t /o /o/p";
    for who in BOTH {
        let [b, _] = same(
            &case(&args)
                .pre(&format!("exec 5<{}", data.display()))
                .sh(probe),
            who,
        );
        assert_eq!(
            b.stdout,
            "/a 750\n/a/b 750\n/a/b/c 750\n/f 700\n/f/g 700\n/f/g/file 600\n/h 700\n/h/t 700\n/o 705\n/o/p 704\n"
        );
    }
}

/// bubblewrap makes the missing parents of every destination before the operation, 0755 less
/// what the entry's own mode withholds, and an operation without a mode (a bind, --bind-fd,
/// --proc, --dev, --mqueue, --symlink) counts as mode 0: its parents are 0700, as are those of
/// a --bind-data (0600 by default); a --dir, --tmpfs (0755) or --file (0666) gets 0755.
/// airlock had made them all 0755. A parent that cannot be made is bubblewrap's "Can't mkdir
/// parents for DEST" (a file on the way, a read-only mount).
#[test]
fn missing_parents_get_bubblewraps_modes() {
    let args = with(
        MIN,
        &[
            "--unshare-ipc",
            "--ro-bind",
            "/etc",
            "/b/b/etc",
            "--ro-bind",
            "/etc/hostname",
            "/f/f/hostname",
            "--bind-fd",
            "5",
            "/fd/fd/x",
            "--proc",
            "/p/p/proc",
            "--dev",
            "/d/d/dev",
            "--mqueue",
            "/m/m/mq",
            "--symlink",
            "target",
            "/s/s/link",
            "--bind-data",
            "6",
            "/bd/bd/data",
            "--file",
            "7",
            "/fi/fi/file",
            "--dir",
            "/di/di/dir",
            "--tmpfs",
            "/t/t/tmp",
        ],
    );
    let probe = "stat -c '%n %a' /b /b/b /f /f/f /fd /fd/fd /p /p/p /d /d/d /m /m/m /s /s/s \
                 /bd /bd/bd /fi /fi/fi /di /di/di /t /t/t";
    let pre = "exec 5</usr 6<<<data 7<<<file";
    for who in BOTH {
        let [b, _] = same(&case(&args).pre(pre).sh(probe), who);
        assert_eq!(
            b.stdout,
            "/b 700\n/b/b 700\n/f 700\n/f/f 700\n/fd 700\n/fd/fd 700\n/p 700\n/p/p 700\n\
             /d 700\n/d/d 700\n/m 700\n/m/m 700\n/s 700\n/s/s 700\n/bd 700\n/bd/bd 700\n\
             /fi 755\n/fi/fi 755\n/di 755\n/di/di 755\n/t 755\n/t/t 755\n",
            "{}",
            b.show()
        );
    }
    let base = [
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/etc/hostname",
        "/h",
    ];
    let mut wrong = vec![];
    for more in [
        &["--ro-bind", "/usr", "/h/x"][..],
        &["--dir", "/h/x"],
        &["--symlink", "a", "/h/x"],
        &["--tmpfs", "/h/x"],
        &["--file", "7", "/h/x"],
        &["--perms", "0600", "--file", "7", "/h/x"],
        &["--ro-bind", "/etc", "/usr/nx/y"],
        &["--symlink", "a", "/usr/nx/y"],
        &["--perms", "0700", "--dir", "/usr/nx/y"],
    ] {
        for who in BOTH {
            let c = case(&with(&with(&base, more), &["/usr/bin/true"])).pre(pre);
            let (b, differs) = word_for_word(&c, who);
            assert!(
                b.stderr.starts_with("bwrap: Can't mkdir parents for "),
                "{}",
                b.show()
            );
            wrong.extend(differs);
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// A --dir gets the mode mkdir(2) gives (bubblewrap makes it so): set-user-ID and
/// set-group-ID from --perms are dropped, the sticky bit kept, and a set-group-ID inherited
/// from a parent that has it (a bound host directory) stays. airlock had applied --perms whole
/// with chmod (04755, 02750).
#[test]
fn dir_modes_are_mkdirs() {
    let args = with(
        MIN,
        &[
            "--perms", "04755", "--dir", "/u", "--perms", "02750", "--dir", "/g", "--perms",
            "01777", "--dir", "/t",
        ],
    );
    for who in BOTH {
        let sg = host_tree(who, &[], &[], &[]);
        std::fs::set_permissions(sg.path(), std::fs::Permissions::from_mode(0o2775)).unwrap();
        let sg_path = sg.path().display().to_string();
        let args = with(
            &args,
            &[
                "--bind", &sg_path, "/sg", "--perms", "0750", "--dir", "/sg/d",
            ],
        );
        let [b, _] = same(&case(&args).sh("stat -c '%n %a' /u /g /t /sg/d"), who);
        assert_eq!(
            b.stdout,
            "/u 755\n/g 750\n/t 1777\n/sg/d 2750\n",
            "{}",
            b.show()
        );
    }
}

/// --remount-ro of a file bound on its own makes that bind read-only, as bubblewrap does
/// (airlock had opened the path as a directory and failed: "Not a directory").
#[test]
fn remount_ro_of_a_file_bind() {
    for who in BOTH {
        let d = host_tree(who, &[], &["f"], &[]);
        let f = d.path().join("f").display().to_string();
        let c = case(&with(MIN, &["--bind", &f, "/h", "--remount-ro", "/h"]))
            .sh("echo new >> /h 2>/dev/null; echo $?; cat /h");
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "2\nold\n", "{}", b.show());
    }
}

/// Without PATH (`--clearenv`, `--unsetenv PATH`) the command is looked up as glibc's execvp
/// looks it up for bubblewrap, in /bin:/usr/bin alone: not in /usr/local/bin (which would
/// come first and shadow /usr/bin) nor in sbin. airlock had searched its own default path.
#[test]
fn a_command_without_path_is_found_as_execvp_finds_it() {
    let pre = "exec 5< <(printf '#!/bin/sh\\necho local\\n')";
    let local = with(
        MIN,
        &[
            "--tmpfs",
            "/usr/local/bin",
            "--perms",
            "0755",
            "--ro-bind-data",
            "5",
            "/usr/local/bin/true",
        ],
    );
    for who in BOTH {
        for unset in [&["--clearenv"][..], &["--unsetenv", "PATH"]] {
            // /usr/local/bin's `true` does not shadow /usr/bin's.
            let args = with(&with(&local, unset), &["true"]);
            let [b, _] = same(&case(&args).pre(pre), who);
            assert_eq!((b.code, b.stdout.as_str()), (0, ""), "{}", b.show());
            // sbin is not searched.
            let args = with(&with(MIN, unset), &["sysctl", "-n", "kernel.ostype"]);
            let [b, _] = same(&case(&args), who);
            assert_eq!(
                b.stderr,
                "bwrap: execvp sysctl: No such file or directory\n"
            );
        }
    }
}

/// A descriptor is read once: bubblewrap closes what --args and --add-seccomp-fd read as it
/// parses, what --file, --bind-data, --ro-bind-data and --bind-fd use as it sets up (in
/// argument order), then reads --seccomp's; a later option naming one of them fails with
/// EBADF in bubblewrap's words. airlock had read it again from where the first read stopped
/// (an empty second file, an empty filter refused with EINVAL).
#[test]
fn a_descriptor_is_read_once_as_bubblewrap_closes_it() {
    let d = tmpdir(0o755);
    let allow = d.path().join("allow.bpf");
    // One instruction: return SECCOMP_RET_ALLOW.
    write(&allow, &[6, 0, 0, 0, 0, 0, 0xff, 0x7f], 0o644);
    let pre = format!("exec 5<{}", allow.display());
    let pairs: &[(&[&str], &[&str])] = &[
        (&["--file", "5", "/f"], &["--file", "5", "/g"]),
        (&["--bind-data", "5", "/f"], &["--ro-bind-data", "5", "/g"]),
        (&["--file", "5", "/f"], &["--seccomp", "5"]),
        (&["--seccomp", "5"], &["--file", "5", "/f"]),
        (&["--file", "5", "/f"], &["--add-seccomp-fd", "5"]),
        (&["--add-seccomp-fd", "5"], &["--add-seccomp-fd", "5"]),
        (&["--add-seccomp-fd", "5"], &["--args", "5"]),
        (&["--args", "5"], &["--file", "5", "/f"]),
        (&["--args", "5"], &["--seccomp", "5"]),
        (&["--bind-fd", "5", "/b"], &["--file", "5", "/f"]),
        (&["--ro-bind-fd", "5", "/b"], &["--seccomp", "5"]),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (first, then) in pairs {
            let args = with(&with(&with(MIN, first), then), &["true"]);
            let (b, differs) = word_for_word(&case(&args).pre(&pre), who);
            assert_eq!(b.code, 1, "{}", b.show());
            assert!(b.stderr.contains("Bad file descriptor"), "{}", b.show());
            wrong.extend(differs);
        }
        // Options that only hold or wait on a descriptor leave it to a later reader.
        for other in [&["--sync-fd", "5"][..], &["--block-fd", "5"]] {
            let args = with(&with(MIN, &["--file", "5", "/f"]), other);
            let [b, _] = same(&case(&args).pre(&pre).arg(&["wc", "-c", "/f"]), who);
            assert_eq!(b.stdout, "8 /f\n", "{}", b.show());
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// A descriptor the caller does not have open fails as bubblewrap's does (EBADF in its words;
/// --block-fd goes on), whatever number it is: airlock's own descriptors, opened as it
/// launches, take the lowest free numbers, and an option naming one read or waited on
/// airlock's (`--file 4 /f` and `--seccomp 4` waited on the channel to the init forever,
/// `--block-fd 5` on a signalfd; `--ro-bind-fd 3` named airlock's root). Each of 3-9 is
/// closed first. The words are bubblewrap's for 9, where it holds nothing of its own (at the
/// lowest numbers it has the same flaw: as root, `--ro-bind-fd 3 /b` bound its /proc
/// descriptor and `--bind-data 4 /f` read one of its own).
#[test]
fn a_descriptor_the_caller_does_not_have_is_not_airlocks_own() {
    let pre = "exec 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-";
    let ebadf = |what: &str| format!("bwrap: {what}: Bad file descriptor\n");
    let mut wrong = vec![];
    for who in BOTH {
        for n in ["3", "4", "5", "6", "7", "9"] {
            let cases: [(&[&str], i32, &str, String); 7] = [
                (
                    &["--file", n, "/f"],
                    1,
                    "",
                    ebadf("Can't write data to file /f"),
                ),
                (
                    &["--bind-data", n, "/f"],
                    1,
                    "",
                    ebadf("Can't write data to file /f"),
                ),
                (&["--seccomp", n], 1, "", ebadf("Can't read seccomp data")),
                (
                    &["--add-seccomp-fd", n],
                    1,
                    "",
                    ebadf("Can't read seccomp data"),
                ),
                (&["--block-fd", n], 0, "ran\n", String::new()),
                (
                    &["--userns", n],
                    1,
                    "",
                    ebadf("Joining specified user namespace failed"),
                ),
                (
                    &["--ro-bind-fd", n, "/b"],
                    1,
                    "",
                    format!(
                        "bwrap: Can't find source path /proc/self/fd/{n}: No such file or \
                         directory\n"
                    ),
                ),
            ];
            for (opt, code, stdout, stderr) in cases {
                let args = with(&with(MIN, opt), &["echo", "ran"]);
                let c = case(&args).pre(pre).deadline(Duration::from_secs(10));
                let a = c.run(Imp::Airlock, who);
                assert_eq!(
                    (a.code, a.stdout.as_str(), a.stderr.as_str()),
                    (code, stdout, stderr.as_str()),
                    "as {who:?} {opt:?}: {}",
                    a.show()
                );
                if n == "9" {
                    wrong.extend(word_for_word(&c, who).1);
                }
            }
        }
    }
    assert!(wrong.is_empty(), "differs:\n{}", wrong.join("\n"));
}

/// --file, --bind-data and --ro-bind-data read their content from a descriptor.
#[test]
fn data_from_descriptors() {
    let d = tmpdir(0o755);
    let data = d.path().join("data");
    write(&data, b"hello from fd\n", 0o600);
    let pre = format!(
        "exec 5<{0} 6<{0} 7<{0}\nexec 8< <(printf 'from a pipe\\n')",
        data.display()
    );
    let args = with(
        MIN,
        &[
            "--unshare-pid",
            "--proc",
            "/proc",
            "--file",
            "5",
            "/f/file",
            "--perms",
            "0600",
            "--bind-data",
            "6",
            "/f/bd",
            "--perms",
            "0640",
            "--ro-bind-data",
            "7",
            "/f/rbd",
            "--perms",
            "0755",
            "--file",
            "8",
            "/g/piped",
        ],
    );
    let probe = format!(
        "cat /f/file /f/bd /f/rbd /g/piped\n{}{}{}",
        ls(&["/f", "/g"]),
        writable(&["/f/file", "/f/bd", "/f/rbd", "/f", "/g/piped"]),
        mounts(&["/", "/f/bd", "/f/rbd"])
    );
    for who in BOTH {
        let [b, _] = same(&case(&args).pre(&pre).sh(&probe), who);
        assert!(
            b.stdout
                .starts_with("hello from fd\nhello from fd\nhello from fd\nfrom a pipe\n"),
            "{}",
            b.show()
        );
    }
}

/// Without --perms, bubblewrap creates --bind-data and --ro-bind-data files 0600 (mkstemp's
/// mode, kept on purpose) and --file files 0666; airlock makes all three 0666.
#[test]
fn default_modes_of_data_files() {
    let d = tmpdir(0o755);
    let data = d.path().join("data");
    write(&data, b"x", 0o600);
    let pre = format!("exec 5<{0} 6<{0} 7<{0}", data.display());
    let args = with(
        MIN,
        &[
            "--file",
            "5",
            "/file",
            "--bind-data",
            "6",
            "/bd",
            "--ro-bind-data",
            "7",
            "/rbd",
        ],
    );
    for who in BOTH {
        let [b, _] = same(
            &case(&args).pre(&pre).sh("stat -c '%n %a' /file /bd /rbd"),
            who,
        );
        assert_eq!(b.stdout, "/file 666\n/bd 600\n/rbd 600\n");
    }
}

/// --bind-fd and --ro-bind-fd: the tree an open descriptor (here a directory and a file opened
/// by the caller's shell) refers to. airlock fails with `open_tree(fd 5, ...): Invalid
/// argument`: its init calls open_tree on the caller's descriptor after clone3 put it in a new
/// mount namespace, and the kernel refuses to copy a mount of another namespace (bubblewrap
/// resolves /proc/self/fd/N to a path and binds that path).
#[test]
fn bind_fd_and_ro_bind_fd() {
    let d = tmpdir(0o755);
    let dir = d.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    write(&dir.join("inside"), b"in the dir\n", 0o666);
    let file = d.path().join("file");
    write(&file, b"a file\n", 0o666);
    let pre = format!("exec 5<{} 6<{}", dir.display(), file.display());
    let args = with(
        MIN,
        &[
            "--unshare-pid",
            "--proc",
            "/proc",
            "--ro-bind-fd",
            "5",
            "/ro",
            "--bind-fd",
            "6",
            "/rw/file",
        ],
    );
    let probe = format!(
        "ls /ro; cat /ro/inside /rw/file\n{}{}",
        writable(&["/ro", "/rw/file"]),
        mounts(&["/ro", "/rw/file"])
    );
    for who in BOTH {
        let [b, _] = same(&case(&args).pre(&pre).sh(&probe), who);
        assert!(
            b.stdout.starts_with("inside\nin the dir\na file\n"),
            "{}",
            b.show()
        );
    }
}

/// --argv0 (bubblewrap 0.9): airlock runs the program under that name; bubblewrap 0.8 does
/// not know the option.
#[test]
fn argv0() {
    let c = case(&[
        "--ro-bind",
        "/",
        "/",
        "--argv0",
        "renamed",
        "sh",
        "-c",
        "echo $0",
    ]);
    for who in BOTH {
        let [b, a] = c.run_all(who);
        assert_eq!(
            (b.code, b.stderr.as_str()),
            (1, "bwrap: Unknown option --argv0\n")
        );
        assert_eq!(
            (a.code, a.stdout.as_str()),
            (0, "renamed\n"),
            "{}",
            a.show()
        );
    }
}

/// Documented: airlock mounts --mqueue nosuid,nodev,noexec (bubblewrap 0.8: none of them) and
/// --proc noexec also without --unshare-pid, where bubblewrap binds the host's /proc with its
/// flags (this host's has no noexec); with --unshare-pid both mount proc noexec. What noexec
/// there could cost, running /proc/self/exe or /proc/self/fd/N, works in both.
#[test]
fn proc_and_mqueue_are_noexec_and_their_exec_links_run() {
    // The mqueue mount, then the topmost /proc (the host's, under --ro-bind / /, is below).
    let probe = r#"awk '$5=="/proc"||$5=="/dev/mqueue"{n=split($6,o,",");f="";
  for(i=1;i<=n;i++)if(o[i]=="noexec")f=" noexec";m[$5]=$5 f}
  END{print m["/dev/mqueue"];print m["/proc"]}' /proc/self/mountinfo
/proc/self/exe -c 'echo exe-runs'
exec 7</usr/bin/true; /proc/self/fd/7 && echo fd-runs"#;
    let base = [
        "--ro-bind",
        "/",
        "/",
        "--unshare-ipc",
        "--dev",
        "/dev",
        "--mqueue",
        "/dev/mqueue",
    ];
    for (pid, who) in [
        (true, Launcher::Root),
        (true, Launcher::Unprivileged),
        (false, Launcher::Root),
    ] {
        let pid_ns: &[&str] = if pid { &["--unshare-pid"] } else { &[] };
        let args = with(&with(&base, pid_ns), &["--proc", "/proc"]);
        let [b, a] = case(&args).sh(probe).run_all(who);
        let ctx = || format!("as {who:?} pid ns {pid}\n{}\n{}", b.show(), a.show());
        let b_proc = if pid { "/proc noexec" } else { "/proc" };
        assert_eq!(
            b.stdout,
            format!("/dev/mqueue\n{b_proc}\nexe-runs\nfd-runs\n"),
            "{}",
            ctx()
        );
        assert_eq!(
            a.stdout,
            "/dev/mqueue noexec\n/proc noexec\nexe-runs\nfd-runs\n",
            "{}",
            ctx()
        );
    }
}

/// --proc, --dev and --mqueue in their own namespaces.
#[test]
fn proc_dev_and_mqueue() {
    let args = with(
        MIN,
        &[
            "--unshare-pid",
            "--unshare-ipc",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--mqueue",
            "/dev/mqueue",
        ],
    );
    let probe = format!(
        "echo '## pids'; for p in 1 2; do [ -d /proc/$p ] && echo \"pid $p\"; done; echo \"task $$\"\n{}{}{}\
         echo '## dev'; head -c 3 /dev/zero | od -An -tx1; echo hi > /dev/null && echo null-ok\n",
        ls(&["/dev", "/dev/pts"]),
        writable(&["/", "/proc", "/dev", "/dev/shm", "/dev/mqueue", "/dev/pts"]),
        mounts(&["/", "/proc", "/dev", "/dev/pts", "/dev/mqueue"])
    );
    for who in BOTH {
        let [b, a] = case(&args).sh(&probe).run_all(who);
        let ctx = || format!("as {who:?}\n{}\n{}", b.show(), a.show());
        assert_eq!((b.code, a.code), (0, 0), "{}", ctx());
        assert_eq!(b.stderr, a.stderr, "{}", ctx());
        // Documented in the source (boundary/contents.rs, make_dev), not in the README: airlock's
        // /dev/shm is a tmpfs of its own, mode 1777 (bubblewrap: a 0755 directory of the /dev
        // tmpfs, writable only by the sandbox's uid), and its mqueue is nosuid,nodev,noexec
        // (bubblewrap: none of these). The device nodes are bound read-only and noexec
        // (bubblewrap: read-write); not printed here, writing /dev/null works in both.
        let shm_b = "drwxr-xr-x 0 0 /dev/shm -> ";
        let shm_a = "drwxrwxrwt 0 0 /dev/shm -> ";
        let (shm_b, shm_a) = match who {
            Launcher::Root => (shm_b.to_string(), shm_a.to_string()),
            Launcher::Unprivileged => (
                shm_b.replace("0 0", "65534 65534"),
                shm_a.replace("0 0", "65534 65534"),
            ),
        };
        assert!(b.stdout.lines().any(|l| l == shm_b), "{}", ctx());
        assert!(a.stdout.lines().any(|l| l == shm_a), "{}", ctx());
        let (nb, na) = (normalise(&b.stdout), normalise(&a.stdout));
        assert!(nb.contains("\n/dev/mqueue rw\n"), "{}", ctx());
        assert!(na.contains("\n/dev/mqueue rw,nosuid,nodev\n"), "{}", ctx());
        let strip = |s: &str| {
            s.lines()
                .filter(|l| !l.ends_with(" /dev/shm -> ") && !l.starts_with("/dev/mqueue rw"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&nb), strip(&na), "{}", ctx());
    }
}

/// bubblewrap without --unshare-pid binds the host's /proc for --proc (a new proc of a pid
/// namespace the caller does not own cannot be mounted). The task reads the same /proc under
/// airlock, as root and as uid 65534: the probe's output is compared with bubblewrap's.
#[test]
fn proc_without_a_pid_namespace() {
    let probe = format!(
        "n=$(ls /proc | grep -cE '^[0-9]+$'); [ $n -gt 5 ] && echo many || echo few\n\
         [ -n \"$(readlink /proc/self/ns/pid)\" ] && echo self-ok\n{}",
        mounts(&["/proc"])
    );
    for who in BOTH {
        let [b, _] = same(&case(&with(MIN, &["--proc", "/proc"])).sh(&probe), who);
        assert_eq!(b.code, 0, "{}", b.show());
    }
}

/// --mqueue without --unshare-ipc: bubblewrap as root mounts it in the host's IPC namespace;
/// airlock (always in a user namespace) cannot, and neither can bubblewrap as uid 65534.
#[test]
fn mqueue_without_an_ipc_namespace() {
    let c = case(&with(MIN, &["--mqueue", "/mq"])).sh("echo mounted");
    let [b, a] = c.run_all(Launcher::Root);
    assert_eq!(
        (b.code, b.stdout.as_str()),
        (0, "mounted\n"),
        "{}",
        b.show()
    );
    assert_eq!(a.code, 1, "{}", a.show());
    let refused = "bwrap: Can't mount mqueue on /newroot/mq: Operation not permitted\n";
    assert_eq!(a.stderr, refused, "{}", a.show());
    let [b, _] = same(&c, Launcher::Unprivileged);
    assert_eq!(b.stderr, refused);
}

/// A later mount at the same path (or a parent) covers an earlier one.
#[test]
fn later_mounts_cover_earlier_ones() {
    let d = tmpdir(0o755);
    let data = d.path().join("data");
    write(&data, b"data\n", 0o644);
    let pre = format!("exec 5<{}", data.display());
    let args = with(
        MIN,
        &[
            "--ro-bind",
            "/usr/share",
            "/x",
            "--tmpfs",
            "/x",
            "--tmpfs",
            "/y",
            "--ro-bind",
            "/usr/lib",
            "/y",
            "--dir",
            "/z/inner",
            "--tmpfs",
            "/z",
            "--file",
            "5",
            "/f",
            "--ro-bind",
            "/etc/hostname",
            "/f",
            "--tmpfs",
            "/p/q",
            "--ro-bind",
            "/usr/share",
            "/p",
        ],
    );
    let probe = format!(
        "for p in /x /y /z /f /p; do echo \"$p $(ls -A $p 2>&1 | head -3 | tr '\\n' ' ')\"; done\n{}",
        mounts(&["/x", "/y", "/z", "/f", "/p", "/p/q"])
    );
    for who in BOTH {
        let [b, _] = same(&case(&args).pre(&pre).sh(&probe), who);
        assert!(b.stdout.starts_with("/x \n"), "{}", b.show());
    }
}

// ---------------------------------------------------------------------------------------------
// Lockdown

/// --new-session (TIOCSTI, CVE-2017-5226): the task has no controlling terminal in both.
/// Whether the shell leads its session and process group is read from a child's
/// /proc/self/stat (ppid, pgrp, session), valid with and without a pid namespace. Without
/// --unshare-pid bubblewrap calls setsid() in the process that becomes the task, which then
/// leads its session; airlock calls it in its init before starting the task, so the task is
/// in a new session without leading it. With --unshare-pid both call it in pid 1.
#[test]
fn new_session() {
    let probe = r#"set -- $(cat /proc/self/stat)
[ "$6" = "$4" ] && echo session-leader || echo not-session-leader
[ "$5" = "$4" ] && echo group-leader || echo not-group-leader
echo tty_nr=$7"#;
    for who in BOTH {
        for set in [
            &[][..],
            &["--unshare-pid"][..],
            &["--new-session", "--unshare-pid"][..],
            &["--new-session", "--unshare-pid", "--proc", "/proc"][..],
            &["--new-session", "--unshare-pid", "--as-pid-1"][..],
            &["--new-session"][..],
        ] {
            let [b, _] = same(&case(&with(&["--ro-bind", "/", "/"], set)).sh(probe), who);
            assert!(b.stdout.ends_with("tty_nr=0\n"), "{}", b.show());
        }
    }
}

/// A token unique to this test process and call, for finding what a run left behind. It is
/// also a duration (`sleep TOKEN`): 40 s, well past what die_with_parent's script waits
/// (started within 3 s, then 100 rounds of pgrep), so that a sandbox that survives is still
/// there to be seen on a loaded machine, where 4 s (the old token) ran out while pgrep
/// looped and bubblewrap's surviving control read as gone. kill_leftovers ends it.
fn token() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("40.{:06}{:03}", std::process::id() % 1_000_000, n % 1000)
}

/// SIGKILL, by pid, each process whose command line is exactly `argv` (processes these tests
/// started with a unique token, left behind on purpose or by a failure).
fn kill_leftovers(argv: &[&str]) {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// `started` once the task runs, then `gone` or `alive` after SIGKILL of the launcher
/// (KILL=launcher) or of the launcher's parent (KILL=parent).
const DIE_SCRIPT: &str = r#"
T=$TOKEN
if [ "$KILL" = parent ]; then
  ( $BW "$@" sleep $T >/dev/null 2>&1 & wait ) &
else
  $BW "$@" sleep $T >/dev/null 2>&1 &
fi
p=$!
for i in $(seq 300); do pgrep -f "^sleep $T\$" >/dev/null && break; sleep 0.01; done
pgrep -f "^sleep $T\$" >/dev/null && echo started
kill -9 $p; wait $p 2>/dev/null
for i in $(seq 100); do pgrep -f "^sleep $T\$" >/dev/null || break; sleep 0.01; done
pgrep -f "^sleep $T\$" >/dev/null && echo alive || echo gone
"#;

fn die_run(imp: Imp, who: Launcher, args: &[&str], kill: &str) -> Res {
    let t = token();
    let r = case(args)
        .script(DIE_SCRIPT)
        .env("TOKEN", &t)
        .env("KILL", kill)
        .run(imp, who);
    kill_leftovers(&["sleep", &t]);
    r
}

/// Killing the launcher, or its parent, kills the sandbox with --die-with-parent; without the
/// option bubblewrap's sandbox survives the launcher, airlock's is meant to die with it
/// always (README: "--die-with-parent is always in effect"). Without a pid namespace airlock's
/// task (forked by its init, PR_SET_PDEATHSIG not inherited) outlives the launcher, and
/// nothing ties the launcher to its own parent. The init whose task runs in a nested user
/// namespace (--dev with a uid other than 0, --disable-userns) changed credentials at step 12,
/// which may clear a parent-death signal: it must die with the launcher too.
#[test]
fn die_with_parent() {
    let mut wrong = vec![];
    for who in BOTH {
        for (set, kill) in [
            (&["--unshare-pid"][..], "launcher"),
            (&[][..], "launcher"),
            (&["--unshare-pid"][..], "parent"),
            (&[][..], "parent"),
            (NESTED_BY_DEV, "launcher"),
            (&["--unshare-user", "--disable-userns"][..], "launcher"),
        ] {
            let args = with(&["--ro-bind", "/", "/", "--die-with-parent"], set);
            for imp in IMPS {
                let r = die_run(imp, who, &args, kill);
                if r.stdout != "started\ngone\n" {
                    wrong.push(format!(
                        "{imp:?} as {who:?} {set:?}, killing the {kill}: {:?}",
                        r.stdout
                    ));
                }
            }
        }
        let args = ["--ro-bind", "/", "/", "--unshare-pid"];
        let b = die_run(Imp::Bubblewrap, who, &args, "launcher");
        assert_eq!(b.stdout, "started\nalive\n", "{}", b.show());
        let a = die_run(Imp::Airlock, who, &args, "launcher");
        if a.stdout != "started\ngone\n" {
            wrong.push(format!(
                "Airlock as {who:?} without the option: {:?}",
                a.stdout
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the sandbox outlived its launcher:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn as_pid_1() {
    for who in BOTH {
        for set in [
            &["--unshare-pid", "--as-pid-1"][..],
            &["--unshare-pid"][..],
            &["--as-pid-1", "--unshare-pid"][..],
        ] {
            let c = case(&with(&["--ro-bind", "/", "/"], set)).sh("echo $$; exit 7");
            let [b, _] = same(&c, who);
            assert_eq!(b.code, 7);
        }
        let c = case(&["--ro-bind", "/", "/", "--unshare-pid", "--as-pid-1"]).sh("echo $$");
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "1\n");
    }
}

/// The capability sets inside, for --cap-add/--cap-drop in order.
#[test]
fn capabilities() {
    let probe = "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status";
    let sets: &[&[&str]] = &[
        &["--unshare-user"],
        &["--unshare-user", "--cap-add", "CAP_NET_RAW"],
        &[
            "--unshare-user",
            "--cap-add",
            "cap_net_raw",
            "--cap-add",
            "CAP_CHOWN",
        ],
        &[
            "--unshare-user",
            "--cap-add",
            "CAP_NET_RAW",
            "--cap-drop",
            "ALL",
        ],
        &[
            "--unshare-user",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_NET_RAW",
        ],
        &["--unshare-user", "--uid", "5", "--cap-add", "CAP_SYS_ADMIN"],
    ];
    for set in sets {
        same(
            &case(&with(&["--ro-bind", "/", "/"], set)).sh(probe),
            Launcher::Unprivileged,
        );
    }
    let [b, _] = same(
        &case(&["--ro-bind", "/", "/", "--cap-add", "CAP_NET_RAW"])
            .sh("grep CapEff /proc/self/status"),
        Launcher::Unprivileged,
    );
    assert_eq!(b.stdout, "CapEff:\t0000000000002000\n");
    // An unknown name, and a name without its CAP_ prefix (which libcap does not read as a
    // name; airlock took it until a differential review found it): the same refusal.
    for name in ["CAP_BOGUS", "net_raw", "NET_RAW"] {
        let [b, a] = case(&["--ro-bind", "/", "/", "--cap-add", name, "true"])
            .run_all(Launcher::Unprivileged);
        assert_eq!(
            (b.code, b.stderr.as_str()),
            (1, format!("bwrap: unknown cap: {name}\n").as_str())
        );
        assert_eq!(
            (a.code, a.stderr.to_lowercase()),
            (1, b.stderr.to_lowercase()),
            "{}",
            a.show()
        );
    }
    // A number, as libcap reads it (strtoul in base 0, digits up to the first other
    // character, below 64; 41 to 63 name no capability): airlock had refused every number.
    let mut wrong = vec![];
    for n in [
        "12",
        "0x0d",
        "013",
        "08",
        "12abc",
        "40",
        "41",
        "63",
        "64",
        "99999999999999999999",
    ] {
        let c = case(&["--ro-bind", "/", "/", "--unshare-user", "--cap-add", n])
            .sh("grep CapEff /proc/self/status");
        wrong.extend(word_for_word(&c, Launcher::Unprivileged).1);
    }
    assert!(
        wrong.is_empty(),
        "numbers read differently:\n{}",
        wrong.join("\n")
    );
    // As root, explicit sets match: --cap-drop ALL then an add. (The bounding set is not
    // compared: bubblewrap started by root without a user namespace leaves it whole, airlock
    // reduces it to the kept capabilities.)
    let probe = "grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status";
    for set in [
        &["--cap-drop", "ALL"][..],
        &["--cap-drop", "ALL", "--cap-add", "CAP_NET_RAW"][..],
        &["--cap-add", "CAP_NET_RAW", "--cap-drop", "ALL"][..],
        &[
            "--unshare-user",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_NET_RAW",
        ][..],
    ] {
        same(
            &case(&with(&["--ro-bind", "/", "/"], set)).sh(probe),
            Launcher::Root,
        );
    }
}

/// bubblewrap started by root keeps root's capabilities by default ("If our uid is 0, default
/// to inheriting all caps; the caller can drop them via --cap-drop", used by rpm-ostree), and
/// --cap-drop removes from that set. airlock starts from none: the README's "uid 0 with no
/// capabilities, as under bubblewrap" is not what bubblewrap does.
#[test]
fn root_capabilities_by_default() {
    let host = std::fs::read_to_string("/proc/self/status").unwrap();
    let host_eff = host
        .lines()
        .find(|l| l.starts_with("CapEff:"))
        .unwrap()
        .to_string();
    for set in [
        &[][..],
        &["--unshare-user"][..],
        &["--cap-drop", "CAP_SYS_ADMIN"][..],
    ] {
        let c = case(&with(&["--ro-bind", "/", "/"], set)).sh("grep CapEff /proc/self/status");
        let [b, a] = c.run_all(Launcher::Root);
        if set.is_empty() || set == ["--unshare-user"] {
            assert_eq!(b.stdout.trim_end(), host_eff, "{}", b.show());
        } else {
            assert_ne!(b.stdout, "CapEff:\t0000000000000000\n", "{}", b.show());
        }
        assert_eq!(a.stdout, "CapEff:\t0000000000000000\n", "{}", a.show());
    }
}

/// A classic BPF program: on x86_64, the listed syscalls return `errno`; the rest are allowed.
fn bpf_deny(nrs: &[u32], errno: u32) -> Vec<u8> {
    const LD_ABS: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const RET: u16 = 0x06;
    let n = nrs.len() as u8;
    let mut prog: Vec<(u16, u8, u8, u32)> = vec![
        (LD_ABS, 0, 0, 4),
        (JEQ, 0, n + 2, 0xC000_003E),
        (LD_ABS, 0, 0, 0),
    ];
    for (i, nr) in nrs.iter().enumerate() {
        let i = i as u8;
        let last = i == n - 1;
        prog.push((JEQ, n - 1 - i, if last { 1 } else { 0 }, *nr));
    }
    prog.push((RET, 0, 0, 0x0005_0000 | errno));
    prog.push((RET, 0, 0, 0x7fff_0000));
    let mut v = Vec::new();
    for (code, jt, jf, k) in prog {
        v.extend_from_slice(&code.to_le_bytes());
        v.extend_from_slice(&[jt, jf]);
        v.extend_from_slice(&k.to_le_bytes());
    }
    v
}

#[test]
fn seccomp_programs_from_descriptors() {
    let d = tmpdir(0o755);
    let no_mkdir = d.path().join("no-mkdir.bpf");
    let no_symlink = d.path().join("no-symlink.bpf");
    // mkdir, mkdirat -> EPERM; symlink, symlinkat -> EACCES.
    write(&no_mkdir, &bpf_deny(&[83, 258], 1), 0o600);
    write(&no_symlink, &bpf_deny(&[88, 266], 13), 0o600);
    let pre = format!(
        "exec 5<{0} 6<{1} 7<{0}",
        no_mkdir.display(),
        no_symlink.display()
    );
    let probe = "cd /tmp; mkdir d && echo mkdir-ok; ln -s x l && echo ln-ok; echo after";
    let base = with(MIN, &["--tmpfs", "/tmp"]);
    for who in BOTH {
        let [b, _] = same(&case(&base).pre(&pre).sh(probe), who);
        assert_eq!(b.stdout, "mkdir-ok\nln-ok\nafter\n");
        let [b, _] = same(
            &case(&with(&base, &["--seccomp", "5"])).pre(&pre).sh(probe),
            who,
        );
        assert_eq!(b.stdout, "ln-ok\nafter\n");
        assert!(b.stderr.contains("Operation not permitted"), "{}", b.show());
        let [b, _] = same(
            &case(&with(
                &base,
                &["--add-seccomp-fd", "5", "--add-seccomp-fd", "6"],
            ))
            .pre(&pre)
            .sh(probe),
            who,
        );
        assert_eq!(b.stdout, "after\n");
        assert!(b.stderr.contains("Permission denied"), "{}", b.show());
    }
}

/// Programs are installed with prctl(PR_SET_SECCOMP), as bubblewrap installs them: a first
/// program that refuses seccomp(2), as an outer sandbox's may, lets the next one in, and one
/// that refuses prctl stops the next with bubblewrap's words. airlock had used seccomp(2),
/// and failed the first line (a drop-in review).
#[test]
fn seccomp_programs_are_installed_as_bubblewrap_installs_them() {
    let d = tmpdir(0o755);
    let no_seccomp = d.path().join("no-seccomp.bpf");
    let no_prctl = d.path().join("no-prctl.bpf");
    let no_mkdir = d.path().join("no-mkdir.bpf");
    write(&no_seccomp, &bpf_deny(&[317], 1), 0o600);
    write(&no_prctl, &bpf_deny(&[157], 1), 0o600);
    write(&no_mkdir, &bpf_deny(&[83, 258], 1), 0o600);
    let pre = format!(
        "exec 5<{} 6<{} 7<{}",
        no_seccomp.display(),
        no_prctl.display(),
        no_mkdir.display()
    );
    let probe = "mkdir /tmp/d || echo refused";
    let base = with(MIN, &["--tmpfs", "/tmp"]);
    for who in BOTH {
        let stacked = with(&base, &["--add-seccomp-fd", "5", "--add-seccomp-fd", "7"]);
        let [b, _] = same(&case(&stacked).pre(&pre).sh(probe), who);
        assert_eq!(
            (b.code, b.stdout.as_str()),
            (0, "refused\n"),
            "{}",
            b.show()
        );
        let stopped = with(&base, &["--add-seccomp-fd", "6", "--add-seccomp-fd", "7"]);
        let [b, _] = same(&case(&stopped).pre(&pre).sh(probe), who);
        assert_eq!(b.code, 1, "{}", b.show());
        assert_eq!(
            b.stderr,
            "bwrap: prctl(PR_SET_SECCOMP): Operation not permitted\n"
        );
    }
}

/// `airlock seccomp-bpf`'s program (whole 8-byte instructions), in a file of a new 0755
/// directory (removed when the first half is dropped), and the line that opens it on
/// descriptor 5 for [`under_the_program`].
fn seccomp_bpf_file() -> (tempfile::TempDir, String) {
    let d = tmpdir(0o755);
    let policy = d.path().join("policy.bpf");
    let out = Command::new(common::binary())
        .arg("seccomp-bpf")
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let n = out.stdout.len();
    assert!(n > 0 && n.is_multiple_of(8), "{n} bytes");
    write(&policy, &out.stdout, 0o644);
    let opens = format!("exec 5<{}", policy.display());
    (d, opens)
}

/// The Python `probe` under both bwraps given the program on descriptor 5 (`pre` opens it), as
/// `same` compares them, and what `airlock run`'s task prints running it (stdout).
fn under_the_program(who: Launcher, pre: &str, probe: &str) -> (Res, String) {
    let with_policy = with(MIN, &["--seccomp", "5"]);
    let [b, _] = same(
        &case(&with_policy)
            .pre(pre)
            .arg(&["--", PYTHON, "-c", probe]),
        who,
    );
    let run = common::airlock(who, &["run", "--", PYTHON, "-c", probe])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (b, common::stdout(&run))
}

/// `airlock seccomp-bpf` writes the program `airlock run` installs (less its core limit rules),
/// for `--seccomp FD`: under bubblewrap and under airlock's bwrap alike it refuses what
/// `airlock run`'s task is refused, with the same errno, where the same sandbox without it
/// allows the calls (the control).
#[test]
fn airlocks_own_policy_given_to_bwrap_with_seccomp() {
    let (_policy, opens) = seccomp_bpf_file();
    // unshare and ptrace (the deny group: EPERM), clone3 (ENOSYS, so that callers fall back
    // to clone), and getpid, which every policy allows.
    let probe = concat!(
        "import ctypes, os\n",
        "libc = ctypes.CDLL(None, use_errno=True)\n",
        "for name, nr, args in [('unshare', 272, (0x10000000,)), ('ptrace', 101, (0, 0, 0, 0)),\n",
        "                       ('clone3', 435, (0, 0)), ('getpid', 39, ())]:\n",
        "    r = libc.syscall(nr, *args)\n",
        "    print(name, 'ok' if r >= 0 else os.strerror(ctypes.get_errno()))\n",
    );
    let refused = "unshare Operation not permitted\nptrace Operation not permitted\n\
                   clone3 Function not implemented\ngetpid ok\n";
    for who in BOTH {
        // The control: the same sandbox with no program lets unshare and ptrace through
        // (clone3 with a null argument is EFAULT's, not the policy's).
        let [b, _] = same(&case(MIN).arg(&["--", PYTHON, "-c", probe]), who);
        assert!(
            b.stdout.starts_with("unshare ok\nptrace ok\n"),
            "as {who:?}: {}",
            b.show()
        );
        let (b, run) = under_the_program(who, &opens, probe);
        assert_eq!(b.stdout, refused, "as {who:?}: {}", b.show());
        assert_eq!(run, refused, "airlock run as {who:?}");
    }
}

/// `airlock seccomp-bpf`'s program leaves a task's core limit to the task, as bubblewrap does:
/// a program that lowers it to 0 before it holds keys (gpg-agent) has it at 0. With airlock
/// run's rules on it, which answer a change 0 and keep the limit (airlock run's 1 byte, which
/// dumps nothing), the task under bwrap was told it had lowered the caller's unlimited limit
/// and kept it, and a crash then wrote its memory to a core file in its working directory.
/// airlock run's task (the control) still keeps its 1 byte.
#[test]
fn the_program_for_bwrap_leaves_the_core_limit_to_the_task() {
    let (_policy, opens) = seccomp_bpf_file();
    let probe = concat!(
        "import resource as r\n",
        "r.setrlimit(r.RLIMIT_CORE, (0, 0))\n",
        "print(*r.getrlimit(r.RLIMIT_CORE))\n",
    );
    // The caller's limit, unlimited, is the task's to start with under bwrap.
    let pre = format!("ulimit -c unlimited\n{opens}");
    for who in BOTH {
        let (b, run) = under_the_program(who, &pre, probe);
        assert_eq!(b.stdout, "0 0\n", "as {who:?}: {}", b.show());
        assert_eq!(run, "1 1\n", "airlock run as {who:?}");
    }
}

/// More binds than the caller's soft limit of open files: airlock's init holds a descriptor
/// for each from step 5 to step 7, where bubblewrap mounts each as it goes, and 400 binds
/// under `ulimit -Sn 256` failed with EMFILE. The init raises its soft limit to the hard one
/// for the build, and the task still has the caller's soft and hard limits, as bubblewrap's.
/// Past the hard limit airlock still fails (bubblewrap does not): at once, saying why.
#[test]
fn more_binds_than_the_soft_open_file_limit_allows() {
    let dests: Vec<String> = (0..400).map(|i| format!("/h{i}")).collect();
    let mut args = MIN.to_vec();
    for d in &dests {
        args.extend(["--ro-bind", "/etc/hostname", d]);
    }
    let probe = "ulimit -Sn; ulimit -Hn; ls / | grep -c '^h[0-9]'";
    args.extend(["--", "/bin/sh", "-c", probe]);
    for who in BOTH {
        for (soft, hard) in [(256, 4096), (128, 512)] {
            let c = case(&args).pre(&format!("ulimit -Sn {soft}; ulimit -Hn {hard}"));
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, format!("{soft}\n{hard}\n400\n"), "{}", b.show());
        }
        // Control: the same line under limits that hold it runs alike (and the same limits).
        let c = case(&args).pre("ulimit -Sn 4096; ulimit -Hn 8192");
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "4096\n8192\n400\n", "{}", b.show());
        // Past the hard limit: bubblewrap runs it; airlock fails step 5 with a hint.
        let c = case(&args).pre("ulimit -Sn 256; ulimit -Hn 256");
        let [b, a] = c.run_all(who);
        assert_eq!(b.stdout, "256\n256\n400\n", "{}", b.show());
        assert_eq!(a.code, 1, "{}", a.show());
        let says = "bwrap: Can't find source path /etc/hostname: Too many open files; hint: \
                    more host paths to mount than the hard limit of open files (ulimit -Hn) \
                    allows";
        assert!(a.stderr.starts_with(says), "{}", a.show());
    }
}

/// A command execve refuses is reported with execvp's errno, as bubblewrap reports it: EPERM
/// (or ENOMEM, E2BIG) from a filter on execve, not always "Permission denied" as airlock had
/// said; a file the kernel cannot start with no /bin/sh to run it is execvp's ENOENT.
#[test]
fn exec_failures_name_execvps_errno() {
    let d = tmpdir(0o755);
    for (name, errno) in [("eperm", 1), ("eacces", 13), ("enomem", 12), ("e2big", 7)] {
        // execve -> errno.
        write(&d.path().join(name), &bpf_deny(&[59], errno), 0o644);
    }
    let script = d.path().join("script");
    write(&script, b"echo hi\n", 0o755);
    let script = script.display().to_string();
    let mut wrong = vec![];
    for who in BOTH {
        for name in ["eperm", "eacces", "enomem", "e2big"] {
            for cmd in ["true", "/usr/bin/true"] {
                let c = case(&with(MIN, &["--seccomp", "5", cmd]))
                    .pre(&format!("exec 5<{}/{name}", d.path().display()));
                let (b, differs) = word_for_word(&c, who);
                assert_eq!(b.code, 1, "{}", b.show());
                wrong.extend(differs);
            }
        }
        // A name past NAME_MAX: glibc's execvp refuses it before it searches; a path holding
        // one fails in execve. Both ENAMETOOLONG. A path is not searched for, so its length
        // alone says nothing: one whose first directory is missing fails with ENOENT before
        // execve reaches the long name (airlock had said ENAMETOOLONG).
        let long = "a".repeat(300);
        for (cmd, why) in [
            (long.clone(), "File name too long"),
            (format!("/{long}/x"), "File name too long"),
            (format!("nope/{long}"), "No such file or directory"),
            // Past PATH_MAX (4096), of short names: execve's ENAMETOOLONG.
            (format!("/{}x", "a/".repeat(2100)), "File name too long"),
            (
                format!("/usr/{}bin/true", "../usr/".repeat(700)),
                "File name too long",
            ),
        ] {
            let (b, differs) = word_for_word(&case(&with(MIN, &[&cmd])), who);
            let says = format!("bwrap: execvp {cmd}: {why}\n");
            assert_eq!(b.stderr, says, "{}", b.show());
            wrong.extend(differs);
        }
        let (b, differs) = word_for_word(&case(&["--ro-bind", &script, "/s", "/s"]), who);
        assert_eq!(
            b.stderr,
            "bwrap: execvp /s: No such file or directory\n",
            "{}",
            b.show()
        );
        wrong.extend(differs);
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// The PATH search goes on, as glibc's execvp (bubblewrap's) does, past a directory without
/// the file (ENOENT, ENOTDIR) or a file it may not run (EACCES, which is reported if nothing
/// runs), and stops at any other errno: an entry with a name past 255 bytes, a symlink loop,
/// a file open for writing (ETXTBSY), each before a /usr/bin holding the command. airlock
/// had gone on and run /usr/bin's. When nothing runs the last entry's errno is reported
/// (ENOTDIR when it is a file, also after a script /bin/sh is missing to run), EACCES before
/// a file whose #! interpreter is missing, and a path with a file for a directory is ENOTDIR;
/// airlock had said ENOENT of each. An entry longer than PATH_MAX - 1 is passed over, and
/// glibc tries the working directory in its place.
#[test]
fn the_path_search_stops_where_execvps_does() {
    let d = tmpdir(0o755);
    for sub in ["busy", "acc", "noint", "script", "cwd"] {
        std::fs::create_dir(d.path().join(sub)).unwrap();
    }
    write(
        &d.path().join("busy/true"),
        b"#!/bin/sh\necho busy\n",
        0o755,
    );
    write(&d.path().join("acc/x"), b"#!/bin/sh\necho acc\n", 0o644);
    write(
        &d.path().join("noint/x"),
        b"#!/no/such/interpreter\n",
        0o755,
    );
    write(&d.path().join("script/x"), b"echo script\n", 0o755);
    write(
        &d.path().join("cwd/x"),
        b"#!/bin/sh\necho from-cwd\n",
        0o755,
    );
    let dir = |sub: &str| d.path().join(sub).display().to_string();
    let (busy, acc, noint, script, cwd) = (
        dir("busy"),
        dir("acc"),
        dir("noint"),
        dir("script"),
        dir("cwd"),
    );
    let long = format!("/{}:/usr/bin", "a".repeat(300));
    let longest = format!("/{}:/usr/bin", "b".repeat(4100));
    // A root without /bin/sh, for the script execvp hands to it.
    let no_sh = [
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib64",
        "/lib64",
    ];
    let path = |root: &[&str], path: &str, more: &[&str]| {
        let mut args: Vec<String> = root.iter().map(|a| a.to_string()).collect();
        args.extend(["--setenv", "PATH", path].map(String::from));
        args.extend(more.iter().map(|a| a.to_string()));
        case(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let cases = [
        (
            path(MIN, &long, &["true"]),
            "bwrap: execvp true: File name too long\n",
        ),
        (
            path(
                MIN,
                "/loop:/usr/bin",
                &["--symlink", "loop", "/loop", "true"],
            ),
            "bwrap: execvp true: Too many levels of symbolic links\n",
        ),
        (
            path(MIN, "/d:/usr/bin", &["--ro-bind", &busy, "/d", "true"])
                .pre(&format!("exec 7>>{busy}/true")),
            "bwrap: execvp true: Text file busy\n",
        ),
        (
            path(
                MIN,
                "/n:/a",
                &["--ro-bind", &noint, "/n", "--ro-bind", &acc, "/a", "x"],
            ),
            "bwrap: execvp x: Permission denied\n",
        ),
        (
            path(MIN, "/no/such:/usr/bin/env", &["nosuch"]),
            "bwrap: execvp nosuch: Not a directory\n",
        ),
        (
            case(&with(MIN, &["/usr/bin/env/x"])),
            "bwrap: execvp /usr/bin/env/x: Not a directory\n",
        ),
        (
            path(
                &no_sh,
                "/s:/usr/bin/env",
                &["--ro-bind", &script, "/s", "x"],
            ),
            "bwrap: execvp x: Not a directory\n",
        ),
        (
            path(
                MIN,
                &longest,
                &["--ro-bind", &cwd, "/c", "--chdir", "/c", "x"],
            ),
            "",
        ),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (c, says) in &cases {
            let (b, differs) = word_for_word(c, who);
            assert_eq!(
                b.stderr,
                *says,
                "bubblewrap as {who:?} {:?}: {}",
                c.args,
                b.show()
            );
            let out = if says.is_empty() { "from-cwd\n" } else { "" };
            assert_eq!(
                b.stdout,
                out,
                "bubblewrap as {who:?} {:?}: {}",
                c.args,
                b.show()
            );
            wrong.extend(differs);
        }
    }
    assert!(wrong.is_empty(), "airlock differs:\n{}", wrong.join("\n"));
}

/// --seccomp with --add-seccomp-fd is refused in either order, each order with its own
/// message; a repeated --seccomp warns and the last one applies. airlock accepts both
/// combinations (installing every filter) and refuses a repeated --seccomp.
#[test]
fn seccomp_option_combinations() {
    let d = tmpdir(0o755);
    let no_mkdir = d.path().join("no-mkdir.bpf");
    let no_symlink = d.path().join("no-symlink.bpf");
    write(&no_mkdir, &bpf_deny(&[83, 258], 1), 0o600);
    write(&no_symlink, &bpf_deny(&[88, 266], 13), 0o600);
    let pre = format!(
        "exec 5<{0} 6<{1} 7<{0}",
        no_mkdir.display(),
        no_symlink.display()
    );
    let probe = "cd /tmp; mkdir d && echo mkdir-ok; ln -s x l && echo ln-ok; echo after";
    let base = with(MIN, &["--tmpfs", "/tmp"]);
    for who in BOTH {
        for (set, message) in [
            (
                &["--seccomp", "5", "--add-seccomp-fd", "6"][..],
                "bwrap: --add-seccomp-fd cannot be combined with --seccomp\n",
            ),
            (
                &["--add-seccomp-fd", "6", "--seccomp", "7"][..],
                "bwrap: --seccomp cannot be combined with --add-seccomp-fd\n",
            ),
        ] {
            let [b, _] = same(&case(&with(&base, set)).pre(&pre).sh(probe), who);
            assert_eq!((b.code, b.stderr.as_str()), (1, message));
        }
        let [b, _] = same(
            &case(&with(&base, &["--seccomp", "6", "--seccomp", "5"]))
                .pre(&pre)
                .sh(probe),
            who,
        );
        assert_eq!(b.stdout, "ln-ok\nafter\n");
        assert!(
            b.stderr
                .starts_with("bwrap: Only the last --seccomp option will take effect\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Monitoring

fn json_docs(text: &str) -> Vec<serde_json::Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<serde_json::Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn info_fd_and_json_status_fd() {
    let d = tmpdir(0o755);
    let (info, status) = (d.path().join("info"), d.path().join("status"));
    let pre = format!("exec 8>{} 9>{}", info.display(), status.display());
    for who in BOTH {
        for set in [
            &["--unshare-pid", "--unshare-net"][..],
            &["--unshare-all"][..],
            &[][..],
        ] {
            let args = with(
                &with(
                    &[
                        "--ro-bind",
                        "/",
                        "/",
                        "--info-fd",
                        "8",
                        "--json-status-fd",
                        "9",
                    ],
                    set,
                ),
                &["sh", "-c", "exit 3"],
            );
            let mut seen = vec![];
            let mut layout = vec![];
            for imp in IMPS {
                let r = case(&args).pre(&pre).run(imp, who);
                assert_eq!(r.code, 3, "{imp:?} {}", r.show());
                let (it, st) = (
                    std::fs::read_to_string(&info).unwrap(),
                    std::fs::read_to_string(&status).unwrap(),
                );
                // Laid out alike, to the byte once numbers are set aside (scrapers).
                let digitless = |t: &str| t.replace(|c: char| c.is_ascii_digit(), "");
                layout.push((digitless(&it), digitless(&st)));
                let i = json_docs(&it);
                let s = json_docs(&st);
                assert_eq!(i.len(), 1, "{imp:?} {i:?}");
                assert_eq!(s.len(), 2, "{imp:?} {s:?}");
                assert!(i[0]["child-pid"].as_i64().unwrap() > 1);
                assert_eq!(i[0], s[0], "{imp:?}");
                assert_eq!(s[1], serde_json::json!({"exit-code": 3}), "{imp:?}");
                seen.push(keys(&i[0]));
            }
            assert_eq!(seen[0], seen[1], "as {who:?} {set:?}");
            assert_eq!(layout[0], layout[1], "as {who:?} {set:?}");
        }
    }
}

/// The writes of --json-status-fd as a reader sees them: the descriptor is a packet pipe
/// (pipe2 with O_DIRECT), so each write(2) is read back as one packet. bubblewrap writes the
/// exit-code line in one write, and a monitor that parses each read as a document relies on
/// it; airlock had written it in three (`{ "exit-code": `, `3`, ` }\n`).
#[test]
fn json_status_exit_code_line_is_one_write() {
    let script = format!(
        r#"{PYTHON} - "$BW" "$@" <<'EOF'
import os, subprocess, sys
r, w = os.pipe2(os.O_DIRECT)
os.dup2(w, 9)
os.close(w)
code = subprocess.run(sys.argv[1].split() + sys.argv[2:], pass_fds=(9,)).returncode
os.close(9)
while True:
    packet = os.read(r, 65536)
    if not packet:
        break
    print(repr(packet))
print("exit", code)
EOF"#
    );
    for who in BOTH {
        for set in [&["--unshare-pid"][..], &[][..]] {
            let c = case(&with(
                &with(&["--ro-bind", "/", "/", "--json-status-fd", "9"], set),
                &["sh", "-c", "exit 3"],
            ))
            .script(&script);
            for imp in IMPS {
                let r = c.run(imp, who);
                let tail: Vec<&str> = r.stdout.lines().rev().take(2).collect();
                assert_eq!(
                    tail,
                    ["exit 3", r#"b'{ "exit-code": 3 }\n'"#],
                    "{imp:?} as {who:?} {set:?}: {}",
                    r.show()
                );
            }
        }
    }
}

/// A sandbox that fails after the announcement (a missing --lock-file, a command execvp
/// cannot run) still ends its --json-status-fd document with `{ "exit-code": 1 }`, the exit
/// status, so a monitor never mistakes it for one still running or killed. bubblewrap 0.8
/// writes that line only sometimes (its monitor races the failing child), so bubblewrap is
/// held to the same exit status and to "1 if it says anything".
#[test]
fn json_status_fd_reports_setup_and_exec_failures() {
    let d = tmpdir(0o755);
    let status = d.path().join("status");
    let pre = format!("exec 9>{}", status.display());
    for who in BOTH {
        for tail in [
            &["--lock-file", "/nonexistent-lock", "true"][..],
            &["/nonexistent-command"][..],
        ] {
            let args = with(
                &[
                    "--ro-bind",
                    "/",
                    "/",
                    "--unshare-pid",
                    "--json-status-fd",
                    "9",
                ],
                tail,
            );
            for imp in IMPS {
                let r = case(&args).pre(&pre).run(imp, who);
                assert_eq!(r.code, 1, "{imp:?} {tail:?} {}", r.show());
                let s = json_docs(&std::fs::read_to_string(&status).unwrap());
                assert!(s[0]["child-pid"].as_i64().unwrap() > 1, "{imp:?} {s:?}");
                let end = serde_json::json!({"exit-code": 1});
                match imp {
                    Imp::Airlock => assert_eq!(s[1..], [end], "{who:?} {tail:?}"),
                    _ => assert!(s[1..].iter().all(|v| *v == end), "{who:?} {s:?}"),
                }
            }
        }
    }
}

/// bubblewrap fails when the --info-fd descriptor is not open (exit 1, "Write to info_fd"; its
/// sandbox process is then left behind, blocked: killed here by its unique command line), and
/// so does airlock, before the launch. The same for a descriptor open for reading only, where
/// airlock had run the command and written nothing.
#[test]
fn info_fd_not_open_is_an_error() {
    let d = tmpdir(0o755);
    for (who, open) in BOTH
        .into_iter()
        .flat_map(|w| [(w, ""), (w, "exec 8</dev/null; ")])
    {
        let script = format!(
            r#"{open}$BW "$@" >{0}/out 2>{0}/err; echo "exit $?"; cat {0}/err"#,
            d.path().display()
        );
        let mut seen = vec![];
        for imp in IMPS {
            let t = token();
            let r = case(&["--ro-bind", "/", "/", "--info-fd", "8", "echo", &t])
                .script(&script)
                .run(imp, who);
            kill_leftovers(&[
                BUBBLEWRAP,
                "--ro-bind",
                "/",
                "/",
                "--info-fd",
                "8",
                "echo",
                &t,
            ]);
            seen.push(r);
        }
        let [b, a] = [&seen[0], &seen[1]];
        assert_eq!(
            b.stdout,
            "exit 1\nbwrap: Write to info_fd: Bad file descriptor\n",
            "{}",
            b.show()
        );
        assert_eq!(a.stdout, b.stdout, "as {who:?} ({open}): {}", a.show());
    }
}

/// A descriptor an earlier --bind-fd, --file or --bind-data consumed cannot be bound again:
/// bubblewrap resolves every source before it sets anything up and checks each bind against
/// its descriptor afterwards, which fails (`Can't stat fd 3: Bad file descriptor`, exit 1),
/// where airlock had bound the directory a second time. A pipe has no path to bind: bubblewrap
/// names `/proc/self/fd/3` as the source it cannot find, where airlock had named `pipe:[N]`.
#[test]
fn a_descriptor_consumed_before_cannot_be_bound_again() {
    let d = tmpdir(0o755);
    let dir = format!("exec 3<{}", d.path().display());
    let file = "exec 3</etc/hostname";
    let lines: [(&[&str], &str); 5] = [
        (
            &["--ro-bind-fd", "3", "/a", "--ro-bind-fd", "3", "/b"],
            &dir,
        ),
        (&["--bind-fd", "3", "/a", "--ro-bind-fd", "3", "/b"], &dir),
        (&["--file", "3", "/a", "--ro-bind-fd", "3", "/b"], file),
        (&["--bind-data", "3", "/a", "--ro-bind-fd", "3", "/b"], file),
        (&["--ro-bind-fd", "3", "/b"], "exec 3< <(echo x)"),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (opts, pre) in lines {
            let c = case(&with(&with(MIN, opts), &["echo", "ran"])).pre(pre);
            let (b, differs) = word_for_word(&c, who);
            assert_eq!(b.code, 1, "{}", b.show());
            wrong.extend(differs);
        }
    }
    assert!(wrong.is_empty(), "differs:\n{}", wrong.join("\n"));
}

/// The --info-fd and --json-status-fd descriptors belong to bubblewrap's launcher: its sandbox
/// closes them before reading --file and --seccomp data, which then fail as from a closed
/// descriptor (EBADF), and one --args read is closed before the launcher writes to it
/// (`Write to info_fd: Bad file descriptor`; bubblewrap leaves its sandbox behind, killed here
/// by its unique command line). airlock had read the data and written the status there.
/// (--bind-data from the same descriptor runs in both.)
#[test]
fn status_descriptors_are_not_the_sandboxs_to_read() {
    let d = tmpdir(0o755);
    let f = d.path().join("rw");
    // Output through files: bubblewrap's sandbox left behind holds the launcher's pipes.
    let script = format!(
        r#"exec 3<>{f}; $BW "$@" >{d}/out 2>{d}/err; echo "exit $?"; cat {d}/out {d}/err"#,
        f = f.display(),
        d = d.path().display()
    );
    let mut wrong = vec![];
    for who in BOTH {
        for (opts, says) in [
            (
                &["--file", "3", "/a", "--info-fd", "3"][..],
                "exit 1\nbwrap: Can't write data to file /a: Bad file descriptor\n",
            ),
            (
                &["--json-status-fd", "3", "--file", "3", "/a"][..],
                "exit 1\nbwrap: Can't write data to file /a: Bad file descriptor\n",
            ),
            (
                &["--seccomp", "3", "--info-fd", "3"][..],
                "exit 1\nbwrap: Can't read seccomp data: Bad file descriptor\n",
            ),
            (
                &["--args", "3", "--info-fd", "3"][..],
                "exit 1\nbwrap: Write to info_fd: Bad file descriptor\n",
            ),
            (
                &["--bind-data", "3", "/a", "--info-fd", "3"][..],
                "exit 0\nran\n",
            ),
        ] {
            let t = token();
            let args = with(&with(MIN, opts), &["sh", "-c", "echo ran", &t]);
            let mut seen = vec![];
            for imp in IMPS {
                write(&f, b"", 0o666);
                seen.push(case(&args).script(&script).run(imp, who));
                kill_leftovers(&with(&[BUBBLEWRAP], &args));
            }
            let [b, a] = [&seen[0], &seen[1]];
            assert_eq!(b.stdout, says, "{who:?} {opts:?}: {}", b.show());
            if a.stdout != b.stdout {
                wrong.push(format!("{who:?} {opts:?}: {}", a.show()));
            }
        }
    }
    assert!(wrong.is_empty(), "differs:\n{}", wrong.join("\n"));
}

/// The --sync-fd pipe reaches EOF only once the sandbox has ended.
#[test]
fn sync_fd() {
    let script = r#"$BW "$@" 3> >(cat; echo sync-closed) ; echo launcher-exited"#;
    for who in BOTH {
        let c = case(&["--ro-bind", "/", "/", "--sync-fd", "3"])
            .sh("sleep 0.3; echo task-done")
            .script(script);
        // bubblewrap's sandbox init holds the descriptor, airlock's launcher does: the pipe
        // closes as the sandbox ends in both, racing the script's next line either way.
        for r in c.run_all(who) {
            assert_eq!(r.code, 0, "{}", r.show());
            let mut lines: Vec<&str> = r.stdout.lines().collect();
            assert_eq!(
                lines.first(),
                Some(&"task-done"),
                "the pipe closed early: {}",
                r.show()
            );
            lines.sort();
            assert_eq!(
                lines,
                ["launcher-exited", "sync-closed", "task-done"],
                "{}",
                r.show()
            );
        }
    }
}

/// --block-fd: nothing runs until a byte arrives.
#[test]
fn block_fd() {
    let d = tmpdir(0o755);
    let fifo = d.path().join("fifo");
    let script = format!(
        r#"mkfifo {f}; exec 4<>{f}
t0=$(date +%s%N)
( sleep 0.4; echo released; echo x > {f} ) &
$BW "$@"
t1=$(date +%s%N); [ $(( (t1 - t0) / 1000000 )) -ge 350 ] && echo waited || echo "did not wait"
rm -f {f}"#,
        f = fifo.display()
    );
    for who in BOTH {
        for set in [&[][..], &["--unshare-pid"][..]] {
            let c = case(&with(&["--ro-bind", "/", "/", "--block-fd", "4"], set))
                .sh("echo task-runs")
                .script(&script);
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, "released\ntask-runs\nwaited\n", "{}", b.show());
        }
        // A descriptor that is not open (or is write-only) is not waited on: bubblewrap's
        // read fails and the task runs (airlock had failed: "step 13: fcntl(9, ...)").
        for (fd, pre) in [("9", ""), ("5", "exec 5>/dev/null")] {
            let c = case(&["--ro-bind", "/", "/", "--block-fd", fd])
                .pre(pre)
                .sh("echo task-runs");
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, "task-runs\n", "{}", b.show());
        }
    }
}

/// An option that names one descriptor, given twice: the last one applies, and bubblewrap
/// leaves the earlier one open, an ordinary descriptor the task inherits (airlock had closed
/// it: the differential review). Both launchers compared, fd 7 then fd 8 each time.
#[test]
fn a_replaced_descriptor_option_leaves_the_earlier_one_to_the_task() {
    let d = tmpdir(0o755);
    let allow = d.path().join("no-mkdir.bpf");
    write(&allow, &bpf_deny(&[83, 258], 1), 0o644);
    let probe = "for f in 7 8; do [ -e /proc/self/fd/$f ] && echo open-$f; done; echo end";
    let read_both = "exec 7</dev/zero 8</dev/zero";
    let write_both = "exec 7>/dev/null 8>/dev/null";
    let seccomp = format!("exec 7<{0} 8<{0}", allow.display());
    for who in BOTH {
        for (opt, pre) in [
            ("--sync-fd", read_both),
            ("--block-fd", read_both),
            ("--info-fd", write_both),
            ("--json-status-fd", write_both),
            ("--seccomp", seccomp.as_str()),
        ] {
            let c = case(&["--ro-bind", "/", "/", opt, "7", opt, "8"])
                .pre(pre)
                .sh(probe);
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, "open-7\nend\n", "{opt}: {}", b.show());
        }
    }
}

/// --lock-file: a read lock on the file is held while the sandbox runs (bubblewrap's pid 1
/// holds it; airlock's init does, from boundary::build to its exit), and released once it
/// has ended: an exclusive lock is refused while the task runs and taken after. Both launchers
/// are compared (`same`), with and without a pid namespace.
#[test]
fn lock_file_is_held_while_the_sandbox_runs() {
    let d = tmpdir(0o777);
    let lock = d.path().join("lock");
    write(&lock, b"", 0o644);
    let script = format!(
        r#"D={d}; L=$D/lock; rm -f $D/up $D/checked
check() {{ {py} -c 'import fcntl,sys
f=open(sys.argv[1],"r+")
try:
    fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB); print("free")
except OSError: print("locked")' $L; }}
$BW "$@" &
p=$!
for i in $(seq 300); do [ -e $D/up ] && break; sleep 0.01; done
check
: > $D/checked
wait $p; echo "exit $?"
check"#,
        d = d.path().display(),
        py = PYTHON
    );
    let dp = d.path().display().to_string();
    let lp = lock.display().to_string();
    for who in BOTH {
        for set in [&[][..], &["--unshare-pid"][..]] {
            let c = case(&with(
                &[
                    "--ro-bind",
                    "/",
                    "/",
                    "--bind",
                    &dp,
                    &dp,
                    "--lock-file",
                    &lp,
                ],
                set,
            ))
            // The task runs until the check is done (10 s at most): a fixed 0.5 s was a race
            // with the check's python, which took 0.2-0.35 s to start beside two busy loops.
            .sh(&format!(
                "touch {dp}/up; i=0; while [ ! -e {dp}/checked ] && [ $i -lt 1000 ]; do \
                 sleep 0.01; i=$((i+1)); done"
            ))
            .script(&script);
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, "locked\nexit 0\nfree\n", "{}", b.show());
        }
    }
}

/// --args FD is read up to 16 MiB: bubblewrap reads any amount, and on an endless descriptor
/// (`5</dev/zero`) grew by gigabytes a second, as airlock did before (the fuzzing of stop 47:
/// 7.8 GB in 6 s). Each over-long descriptor is refused at once, with its reason; a control
/// of 900 words (300 `--setenv`s) is read and runs.
#[test]
fn args_from_a_descriptor_are_bounded() {
    let d = tmpdir(0o755);
    let bytes = d.path().join("bytes");
    write(&bytes, &vec![b'a'; (16 << 20) + 1], 0o644);
    let under = d.path().join("under");
    write(&under, &b"--setenv\0X\0y\0".repeat(300), 0o644);
    // `--ro-bind / / --args 5 TAIL...` with descriptor 5 opened by `pre`, as `who`.
    let run = |who: Launcher, pre: &str, tail: &[&str]| {
        let args = with(&["--ro-bind", "/", "/", "--args", "5"], tail);
        let c = case(&args).pre(pre).deadline(Duration::from_secs(20));
        c.run(Imp::Airlock, who)
    };
    for who in BOTH {
        for pre in [
            "exec 5</dev/zero".to_string(),
            format!("exec 5<{}", bytes.display()),
        ] {
            let a = run(who, &pre, &["true"]);
            assert_eq!(
                (a.code, a.stderr.as_str()),
                (1, "bwrap: Can't read --args data: more than 16 MiB\n"),
                "{who:?} {pre}: {}",
                a.show()
            );
        }
        let pre = format!("exec 5<{}", under.display());
        let a = run(who, &pre, &["--", "sh", "-c", "echo X=$X"]);
        assert_eq!(
            (a.code, a.stdout.as_str()),
            (0, "X=y\n"),
            "control, {who:?}: {}",
            a.show()
        );
    }
}

/// --args FD: NUL-separated arguments read in place of the option.
#[test]
fn args_from_a_descriptor_parsed_in_place() {
    let d = tmpdir(0o755);
    let file = d.path().join("args");
    write(
        &file,
        b"--setenv\0X\0from-args\0--chdir\0/usr\0--setenv\0SPACED\0a b  c\0",
        0o600,
    );
    let pre = format!("exec 5<{}", file.display());
    let probe = "echo X=$X Y=$Y SPACED=\"$SPACED\"; pwd";
    for who in BOTH {
        let c = case(&[
            "--ro-bind",
            "/",
            "/",
            "--setenv",
            "X",
            "before",
            "--args",
            "5",
            "--setenv",
            "Y",
            "after",
        ])
        .pre(&pre)
        .sh(probe);
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "X=from-args Y=after SPACED=a b  c\n/usr\n");
        let c = case(&[
            "--ro-bind",
            "/",
            "/",
            "--args",
            "5",
            "--setenv",
            "X",
            "after",
        ])
        .pre(&pre)
        .sh(probe);
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "X=after Y= SPACED=a b  c\n/usr\n");
    }
    // --args inside an --args file is refused (airlock had read it); two on the command line
    // are both read.
    let nested = d.path().join("nested");
    write(&nested, b"--args\x006\0", 0o600);
    let more = d.path().join("more");
    write(&more, b"--setenv\0Y\0from-more\0", 0o600);
    // Also as a file's last word, its descriptor the caller's next argument (airlock had
    // counted a file's last word as the caller's own).
    let last = d.path().join("last");
    write(&last, b"--args\0", 0o600);
    let pre = format!(
        "exec 5<{} 6<{} 7<{} 8<{}",
        file.display(),
        more.display(),
        nested.display(),
        last.display()
    );
    for who in BOTH {
        for line in [&["--args", "7"][..], &["--args", "8", "6"]] {
            let c = case(&with(&["--ro-bind", "/", "/"], line))
                .pre(&pre)
                .sh(probe);
            let [b, _] = same(&c, who);
            assert_eq!(b.stderr, "bwrap: --args not supported in arguments file\n");
        }
        let c = case(&["--ro-bind", "/", "/", "--args", "5", "--args", "6"])
            .pre(&pre)
            .sh(probe);
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "X=from-args Y=from-more SPACED=a b  c\n/usr\n");
        // bubblewrap closes a descriptor once it has read it: named again, it is not open
        // (airlock had read it again, finding nothing, and run).
        let c = case(&["--ro-bind", "/", "/", "--args", "6", "--args", "6"])
            .pre(&pre)
            .sh(probe);
        let [b, _] = same(&c, who);
        assert_eq!(
            (b.code, b.stderr.as_str()),
            (1, "bwrap: Can't read --args data: Bad file descriptor\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// General

#[test]
fn help_and_version() {
    let [b, a] = case(&["--help"]).run_all(Launcher::Unprivileged);
    assert_eq!((b.code, a.code), (0, 0), "{}\n{}", b.show(), a.show());
    for opt in ["--as-pid-1", "--perms", "--argv0", "--ro-bind-fd"] {
        assert!(
            a.stdout.contains(&format!("    {opt} ")),
            "{opt}: {}",
            a.show()
        );
    }
    // Every option bubblewrap 0.8 lists, airlock lists too.
    for line in b.stdout.lines() {
        if let Some(opt) = line.trim_start().strip_prefix("--") {
            let opt = opt.split_whitespace().next().unwrap();
            assert!(
                a.stdout.contains(&format!("    --{opt} ")),
                "--{opt} missing from airlock's help"
            );
        }
    }
    let [b, a] = case(&["--version"]).run_all(Launcher::Root);
    assert_eq!((b.code, a.code), (0, 0));
    assert!(b.stdout.starts_with("bubblewrap "), "{}", b.show());
    assert!(a.stdout.starts_with("bubblewrap "), "{}", a.show());
}

#[test]
fn usage_errors() {
    for who in BOTH {
        let [b, _] = same(
            &case(&["--ro-bind", "/", "/", "--frobnicate", "--", "true"]),
            who,
        );
        assert_eq!(b.code, 1);
        assert_eq!(b.stderr, "bwrap: Unknown option --frobnicate\n");
        // No command: both exit 1; bubblewrap prints its usage to stderr, airlock a message.
        let [b, a] = case(&["--ro-bind", "/", "/"]).run_all(who);
        assert_eq!((b.code, a.code), (1, 1), "{}\n{}", b.show(), a.show());
        assert!(b.stderr.starts_with("usage: "), "{}", b.show());
        assert_eq!(a.stderr, "bwrap: No command specified\n");
        let [b, a] = case(&["--ro-bind", "/", "/", "--"]).run_all(who);
        assert_eq!((b.code, a.code), (1, 1), "{}\n{}", b.show(), a.show());
        // A command that does not exist.
        let [b, _] = same(&case(&["--ro-bind", "/", "/", "/nonexistent-cmd"]), who);
        assert_eq!(b.code, 1);
        assert_eq!(
            b.stderr,
            "bwrap: execvp /nonexistent-cmd: No such file or directory\n"
        );
        // An option missing its argument.
        let [b, a] = case(&["--ro-bind", "/"]).run_all(who);
        assert_eq!((b.code, a.code), (1, 1), "{}\n{}", b.show(), a.show());
        assert_eq!(b.stderr, "bwrap: --ro-bind takes two arguments\n");
        assert_eq!(a.stderr, b.stderr);
    }
}

/// Run `c` under bubblewrap and airlock as `who`: bubblewrap's result, and how airlock's exit
/// status, stdout or stderr differ from it, if they do.
fn word_for_word(c: &Case, who: Launcher) -> (Res, Option<String>) {
    let [b, a] = c.run_all(who);
    let differs = ((b.code, &b.stdout, &b.stderr) != (a.code, &a.stdout, &a.stderr)).then(|| {
        format!(
            "as {who:?} {:?}\n  bubblewrap: exit {} {:?} {:?}\n  airlock:    exit {} {:?} {:?}",
            c.args, b.code, b.stdout, b.stderr, a.code, a.stdout, a.stderr
        )
    });
    (b, differs)
}

/// Mistakes in the command line, each word for word as bubblewrap prints it (tools and their
/// users quote these: "--size takes a non-zero number of bytes"), and the warning for an
/// option given twice, with the same exit status.
#[test]
fn usage_errors_read_word_for_word_as_bubblewraps() {
    let ro = ["--ro-bind", "/", "/"];
    let lines: Vec<Vec<&str>> = vec![
        with(&ro, &["--unshare-user", "--uid", "abc", "true"]),
        with(&ro, &["--unshare-user", "--uid", "-1", "true"]),
        with(&ro, &["--unshare-user", "--uid", "2147483648", "true"]),
        with(&ro, &["--unshare-user", "--uid", " 5", "id", "-u"]),
        with(&ro, &["--unshare-user", "--gid", "12x", "true"]),
        with(&ro, &["--perms", "999", "--dir", "/x", "true"]),
        with(&ro, &["--chmod", "abc", "/tmp", "true"]),
        with(&ro, &["--size", "0", "--tmpfs", "/x", "true"]),
        with(&ro, &["--size", "1k", "--tmpfs", "/x", "true"]),
        with(
            &ro,
            &["--size", "9223372036854775808", "--tmpfs", "/x", "true"],
        ),
        with(&ro, &["--unshare-user", "--cap-add", "CAP_FOO", "true"]),
        with(&ro, &["--cap-drop", "NOPE", "true"]),
        with(&ro, &["--bind", "/usr"]),
        with(&ro, &["--setenv", "A"]),
        with(&ro, &["--symlink", "a"]),
        with(&ro, &["--file", "3"]),
        with(&ro, &["--bind-fd", "x"]),
        with(&ro, &["--chdir"]),
        with(&ro, &["--remount-ro"]),
        with(&ro, &["--tmpfs"]),
        with(&ro, &["--lock-file", "/nonexistent", "true"]),
        with(&ro, &["--exec-label", "x", "true"]),
        with(&ro, &["--chdir", "/", "--chdir", "/tmp", "pwd"]),
        with(
            &ro,
            &[
                "--unshare-uts",
                "--hostname",
                "a",
                "--hostname",
                "b",
                "uname",
                "-n",
            ],
        ),
        with(
            &ro,
            &["--unshare-user", "--uid", "5", "--uid", "6", "id", "-u"],
        ),
        // Nothing could write the maps: without --info-fd the caller never learns whose.
        // (airlock ran, waiting on the descriptor, or failed setting up with no maps.)
        with(&ro, &["--userns-block-fd", "6", "true"]),
        with(&ro, &["--unshare-all", "--userns-block-fd", "6", "true"]),
        with(&ro, &["--unshare-user", "--userns-block-fd", "6", "true"]),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for args in &lines {
            wrong.extend(word_for_word(&case(args).pre("exec 6</dev/null"), who).1);
        }
    }
    // Only a root caller can be without a user namespace.
    for args in [
        with(&ro, &["--gid", "5", "true"]),
        with(&ro, &["--disable-userns", "true"]),
    ] {
        let [b, a] = same(&case(&args), Launcher::Root);
        assert_eq!(b.code, 1, "{}", a.show());
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// Command lines bubblewrap 0.8 refuses and airlock had run, or refused in words of its own:
/// a --setenv or --unsetenv name setenv(3) refuses (empty, or holding `=`), a --size given
/// twice, --as-pid-1 with --lock-file, --userns beside --unshare-user or the --unshare-user-try
/// of --unshare-all, --disable-userns with --userns-block-fd; and a line without a command
/// whose namespace options conflict, which bubblewrap reports before the missing command.
#[test]
fn command_lines_bubblewrap_refuses_are_refused_in_its_words() {
    let ro = ["--ro-bind", "/", "/"];
    let lines: Vec<Vec<&str>> = vec![
        with(&ro, &["--setenv", "A=B", "C", "true"]),
        with(&ro, &["--setenv", "", "C", "true"]),
        with(&ro, &["--clearenv", "--setenv", "=", "", "env"]),
        with(&ro, &["--unsetenv", "A=B", "true"]),
        with(&ro, &["--unsetenv", "", "true"]),
        with(&ro, &["--setenv", "A=B", "C", "--frobnicate", "true"]),
        with(
            &ro,
            &[
                "--size", "4096", "--size", "8192", "--tmpfs", "/tmp", "true",
            ],
        ),
        with(
            &ro,
            &[
                "--unshare-pid",
                "--as-pid-1",
                "--lock-file",
                "/etc/hostname",
                "true",
            ],
        ),
        with(&ro, &["--unshare-user", "--userns", "6", "true"]),
        with(&ro, &["--unshare-all", "--userns", "6", "true"]),
        with(
            &ro,
            &[
                "--unshare-user",
                "--disable-userns",
                "--info-fd",
                "7",
                "--userns-block-fd",
                "6",
                "true",
            ],
        ),
        with(&ro, &["--disable-userns"]),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for args in &lines {
            let c = case(args).pre("exec 6</dev/null 7>/dev/null");
            let (b, differs) = word_for_word(&c, who);
            assert_eq!(b.code, 1, "{}", b.show());
            wrong.extend(differs);
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// Setup failures a user meets, whole messages compared: a descriptor named but not open, a
/// source path in a symlink loop, a file bound onto a directory and the reverse, a seccomp
/// program of the wrong length, a file that cannot be created, --remount-ro of a path that is
/// missing, not resolvable (a symlink loop) or not a mount point, a --chmod that fails (its mode printed as C's "%#o"), a file
/// asked for at an empty destination, an empty command, a --userns-block-fd released with no
/// id maps written. Errno texts are glibc's, as
/// bubblewrap's are ("Bad file descriptor", "Too many levels of symbolic links").
#[test]
fn setup_failures_read_word_for_word_as_bubblewraps() {
    let d = tmpdir(0o755);
    let file = d.path().join("file");
    write(&file, b"x", 0o644);
    let loop_link = d.path().join("loop");
    std::os::unix::fs::symlink("loop", &loop_link).unwrap();
    write(&d.path().join("seven.bpf"), b"1234567", 0o644);
    write(&d.path().join("empty.bpf"), b"", 0o644);
    let (file, loop_link) = (file.display().to_string(), loop_link.display().to_string());
    let base = ["--ro-bind", "/usr", "/usr", "--tmpfs", "/tmp"];
    let lines: Vec<Vec<&str>> = vec![
        with(&base, &["--file", "42", "/x"]),
        with(&base, &["--bind-data", "42", "/x"]),
        with(&base, &["--ro-bind-data", "42", "/x"]),
        with(&base, &["--bind-fd", "42", "/x"]),
        with(&base, &["--seccomp", "42"]),
        with(&base, &["--add-seccomp-fd", "42"]),
        with(&base, &["--args", "42"]),
        with(&base, &["--ro-bind", &loop_link, "/x"]),
        with(&base, &["--ro-bind", &file, "/tmp"]),
        with(
            &base,
            &["--ro-bind", &file, "/h", "--ro-bind", "/usr", "/h"],
        ),
        with(&base, &["--ro-bind", &file, "/h", "--dir", "/h"]),
        with(&base, &["--seccomp", "7"]),
        with(&base, &["--seccomp", "8"]),
        with(&base, &["--file", "9", "/usr/x"]),
        with(&base, &["--file", "9", "/tmp"]),
        with(&base, &["--bind-data", "9", "/usr/x"]),
        with(&base, &["--ro-bind", &file, "/usr/x"]),
        with(&base, &["--remount-ro", "/nx"]),
        with(&base, &["--dir", "/d", "--remount-ro", "/d"]),
        // A path that does not resolve for another reason (ELOOP) is realpath's failure in
        // bubblewrap's words too (airlock had named only ENOENT so).
        with(
            &base,
            &["--symlink", "l", "/tmp/l", "--remount-ro", "/tmp/l"],
        ),
        // The mode as "%#o" prints it (airlock had printed 0000, 0005).
        with(&base, &["--chmod", "0", "/nx"]),
        with(&base, &["--chmod", "5", "/nx"]),
        with(&base, &["--chmod", "4755", "/nx"]),
        // An empty destination is named as given (airlock had printed "/").
        with(&base, &["--file", "9", ""]),
        with(&base, &["--ro-bind-data", "9", ""]),
        with(&base, &["--ro-bind", &file, ""]),
        with(&base, &["--", ""]),
        with(
            &base,
            &["--unshare-user", "--info-fd", "5", "--userns-block-fd", "6"],
        ),
    ];
    let pre = format!(
        "exec 5>/dev/null 6</dev/null 7<{0}/seven.bpf 8<{0}/empty.bpf 9<{0}/file",
        d.path().display()
    );
    let mut wrong = vec![];
    for who in BOTH {
        for args in &lines {
            let (b, differs) = word_for_word(&case(&with(args, &["true"])).pre(&pre), who);
            assert_eq!(b.code, 1, "{}", b.show());
            wrong.extend(differs);
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// Failures to join a namespace a descriptor names, or to set the hostname, in bubblewrap's
/// words: "Joining specified user namespace failed: ERRNO" unless the kernel says EINVAL (the
/// "might not be a descendant" sentence airlock had printed for every errno), "Setting pidns
/// failed: ERRNO" (airlock: "Can't enter pid namespace"), "Can't set hostname to NAME: ERRNO"
/// (airlock: "sethostname: ERRNO"). bubblewrap adds a second line after a failed --pidns
/// ("Unexpected short read from pid socket"): only its first is compared.
#[test]
fn join_and_hostname_failures_read_as_bubblewraps() {
    let long = "x".repeat(70);
    let lines: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--unshare-uts", "--hostname", &long], ""),
        (vec!["--userns", "9"], ""),
        (vec!["--userns", "5"], "exec 5</dev/null"),
        (vec!["--userns", "5"], "exec 5</proc/self/ns/user"),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (args, pre) in &lines {
            let c = case(&with(&with(MIN, args), &["true"])).pre(pre);
            let (b, differs) = word_for_word(&c, who);
            assert_eq!(b.code, 1, "{}", b.show());
            wrong.extend(differs);
        }
    }
    // As uid 65534 too, where airlock refuses the join before the launch: bubblewrap's setns
    // checks the descriptor first (EBADF, EINVAL for one that is not a pid namespace), where
    // airlock had said EPERM for every descriptor.
    let joins = [
        ("9", ""),
        ("5", "exec 5</dev/null"),
        ("5", "exec 5</proc/self/ns/net"),
    ];
    for (who, (fd, pre)) in BOTH.into_iter().flat_map(|w| joins.map(|j| (w, j))) {
        let c = case(&with(MIN, &["--pidns", fd, "true"])).pre(pre);
        let [b, a] = c.run_all(who);
        let first = |r: &Res| r.stderr.lines().next().unwrap_or("").to_string();
        assert!(
            first(&b).starts_with("bwrap: Setting pidns failed: "),
            "{}",
            b.show()
        );
        if (b.code, first(&b)) != (a.code, a.stderr.trim_end().to_string()) {
            wrong.push(format!(
                "{who:?} --pidns {fd} ({pre}):\n{}\n{}",
                b.show(),
                a.show()
            ));
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// A destination that ends with `/` names a directory, as bubblewrap makes its parents: every
/// name before a `/` is made a directory. A file (a bind of one, --file, --bind-data,
/// --bind-fd) or a symlink asked for there fails (EISDIR, EEXIST), where airlock had dropped
/// the `/` and run; a file already at that name stops every operation that makes parents,
/// --remount-ro included, and --chmod fails with the kernel's ENOTDIR. Messages show the path
/// as given. A directory destination or a source with a trailing `/` runs in both.
#[test]
fn a_destination_ending_with_a_slash_names_a_directory() {
    let base = with(
        MIN,
        &[
            "--tmpfs",
            "/tmp",
            "--ro-bind",
            "/etc/hostname",
            "/tmp/f",
            "--dir",
            "/tmp/d",
        ],
    );
    let lines: Vec<(Vec<&str>, i32)> = vec![
        (vec!["--ro-bind", "/etc/hostname", "/tmp/h/"], 1),
        (vec!["--ro-bind-try", "/etc/hostname", "/tmp/h/"], 1),
        (vec!["--ro-bind", "/etc/hostname", "/tmp/d/"], 1),
        (vec!["--bind-fd", "5", "/tmp/h/"], 1),
        (vec!["--file", "5", "/tmp/h/"], 1),
        (vec!["--bind-data", "5", "/tmp/h/"], 1),
        (vec!["--ro-bind-data", "5", "/tmp/h/"], 1),
        (vec!["--symlink", "a", "/tmp/h/"], 1),
        (vec!["--ro-bind", "/etc/hostname", "/tmp/f/"], 1),
        (vec!["--ro-bind", "/usr", "/tmp/f/"], 1),
        (vec!["--dir", "/tmp/f/"], 1),
        (vec!["--tmpfs", "/tmp/f/"], 1),
        (vec!["--remount-ro", "/tmp/f/"], 1),
        (vec!["--remount-ro", "/tmp/d/"], 1),
        (vec!["--chmod", "0700", "/tmp/f/"], 1),
        (vec!["--ro-bind", "/usr/", "/tmp/u/"], 0),
        (vec!["--dir", "/tmp/x//"], 0),
        (vec!["--tmpfs", "/tmp/t/"], 0),
        (vec!["--ro-bind-try", "/nonexistent/", "/tmp/n/"], 0),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (args, code) in &lines {
            let c = case(&with(&with(&base, args), &["true"])).pre("exec 5</etc/hostname");
            let (b, differs) = word_for_word(&c, who);
            assert_eq!(b.code, *code, "{}", b.show());
            wrong.extend(differs);
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// A symlink that leads nowhere, at a destination or on its path (`/var/run` is `/run`, which
/// a `--ro-bind / /` line may not have): bubblewrap's mkdir passes over it and the operation
/// fails where bubblewrap's does, in its words (ENOENT from the name under it or from the
/// mount on it). airlock had stopped at the link, `Can't mkdir parents for /t/l/x: Not a
/// directory`. A --dir on such a link, or a --remount-ro or --chmod of it, reads the same
/// too.
#[test]
fn a_symlink_leading_nowhere_on_a_destination_fails_in_bubblewraps_words() {
    let base = with(MIN, &["--tmpfs", "/t", "--symlink", "a", "/t/l"]);
    let lines: Vec<(Vec<&str>, i32)> = vec![
        (vec!["--tmpfs", "/t/l"], 1),
        (vec!["--tmpfs", "/t/l/x"], 1),
        (vec!["--perms", "0700", "--tmpfs", "/t/l/x/y"], 1),
        (vec!["--dir", "/t/l/x"], 1),
        (vec!["--ro-bind", "/etc", "/t/l/x"], 1),
        (vec!["--ro-bind", "/etc/hostname", "/t/l/x"], 1),
        (vec!["--file", "5", "/t/l/x"], 1),
        (vec!["--ro-bind-data", "5", "/t/l/x"], 1),
        (vec!["--symlink", "b", "/t/l/x"], 1),
        (vec!["--dev", "/t/l"], 1),
        (vec!["--unshare-ipc", "--mqueue", "/t/l"], 1),
        (vec!["--dir", "/t/l"], 0),
        (vec!["--remount-ro", "/t/l"], 1),
        (vec!["--chmod", "0700", "/t/l"], 1),
        (vec!["--tmpfs", "/t/l/"], 1),
        // A link to itself.
        (vec!["--symlink", "m", "/t/m", "--tmpfs", "/t/m"], 1),
        (vec!["--symlink", "m", "/t/m", "--dir", "/t/m/x"], 1),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (args, code) in &lines {
            let c = case(&with(&with(&base, args), &["true"])).pre("exec 5</etc/hostname");
            let (b, differs) = word_for_word(&c, who);
            assert_eq!(b.code, *code, "{}", b.show());
            wrong.extend(differs);
        }
        // (On a host where /var/run is the absolute link to /run.)
        if std::fs::read_link("/var/run").ok() != Some(PathBuf::from("/run")) {
            continue;
        }
        let c = case(&with(
            MIN,
            &[
                "--ro-bind",
                "/",
                "/",
                "--tmpfs",
                "/run",
                "--tmpfs",
                "/var/run/x",
                "true",
            ],
        ));
        let (b, differs) = word_for_word(&c, who);
        assert_eq!(
            b.stderr,
            "bwrap: Can't mkdir /var/run/x: No such file or directory\n",
            "{}",
            b.show()
        );
        wrong.extend(differs);
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// Setup failures: `bwrap: ` and bubblewrap's key phrase, exit 1.
#[test]
fn setup_failure_wording() {
    let d = tmpdir(0o700);
    let hidden = d.path().join("hidden");
    write(&hidden, b"x", 0o600);
    let hidden = hidden.display().to_string();
    let ro = ["--ro-bind", "/", "/"];
    let cases: Vec<(Launcher, Vec<&str>, String)> = vec![
        (
            Launcher::Root,
            with(&ro, &["--dir", "/nx/y"]),
            "bwrap: Can't mkdir".into(),
        ),
        (
            Launcher::Root,
            with(&ro, &["--symlink", "foo", "/nx"]),
            "bwrap: Can't make symlink at /nx: Read-only file system".into(),
        ),
        (
            Launcher::Root,
            with(&ro, &["--remount-ro", "/nx"]),
            "bwrap: Can't remount readonly on /newroot/nx".into(),
        ),
        (
            Launcher::Root,
            with(&ro, &["--chmod", "0755", "/nx"]),
            "bwrap: Can't chmod 0755 /nx: No such file or directory".into(),
        ),
        (
            Launcher::Unprivileged,
            with(&ro, &["--ro-bind", &hidden, "/r"]),
            format!("bwrap: Can't find source path {hidden}: Permission denied"),
        ),
        (
            Launcher::Unprivileged,
            with(&ro, &["--perms", "0700", "--perms", "0600", "--dir", "/x"]),
            "bwrap: --perms given twice for the same action".into(),
        ),
    ];
    let mut wrong = vec![];
    for (who, args, phrase) in &cases {
        let [b, a] = case(&with(args, &["true"])).run_all(*who);
        assert_eq!(b.code, 1, "{}", b.show());
        assert!(b.stderr.starts_with(phrase.as_str()), "{}", b.show());
        if a.code != 1 || !a.stderr.starts_with(phrase.as_str()) {
            wrong.push(format!(
                "{args:?}: want {phrase:?}, airlock exit {} {:?}",
                a.code, a.stderr
            ));
        }
    }
    assert!(wrong.is_empty(), "wording differs:\n{}", wrong.join("\n"));
}

/// The GNOME thumbnailer style (no `--` before the command) and the exit status of a task
/// killed by a signal (128+N).
#[test]
fn command_without_double_dash_and_signal_status() {
    for who in BOTH {
        let [b, _] = same(
            &case(&[
                "--ro-bind",
                "/",
                "/",
                "--unshare-all",
                "--die-with-parent",
                "sh",
                "-c",
                "echo thumb $0 $1",
                "a",
                "--b",
            ]),
            who,
        );
        assert_eq!(b.stdout, "thumb a --b\n");
        for set in [&[][..], &["--unshare-pid"][..]] {
            for (sig, code) in [("TERM", 143), ("KILL", 137), ("SEGV", 139)] {
                let c = case(&with(&["--ro-bind", "/", "/"], set))
                    .sh(&format!("kill -{sig} $$; sleep 5"));
                let [b, _] = same(&c, who);
                assert_eq!(b.code, code, "{set:?} {sig}");
            }
        }
        // As pid 1 the task ignores a signal it sends itself (no handler), in both.
        let c = case(&["--ro-bind", "/", "/", "--unshare-pid", "--as-pid-1"])
            .sh("kill -TERM $$; echo survived; exit 3");
        let [b, _] = same(&c, who);
        assert_eq!((b.code, b.stdout.as_str()), (3, "survived\n"));
        let [b, _] = same(&case(&["--ro-bind", "/", "/"]).sh("exit 42"), who);
        assert_eq!(b.code, 42);
    }
}

/// A symlink on the way to a destination, in a root filesystem the caller binds (one a task
/// may have written in an earlier run), cannot move a mount or the covers that keep the
/// kernel's knobs read-only away from each other:
/// - a bind onto a symlink fails (move_mount does not follow it; bubblewrap's mount(2) does:
///   a difference kept on purpose);
/// - links that route the path through the directory a writable tree lands on
///   (`ct -> d/newroot/proc/self/root/newroot/..`, each of proc, self, root, newroot a `.`
///   there) would lead, once the tree holding a live proc is there, through that proc to the
///   scaffold: the bind is refused, where airlock at fbe44b4 left the host's /proc/sys
///   writable;
/// - a --proc through them: the host's /proc keeps its covers (they are found from the proc
///   tree itself), and a new proc whose covers would be found by path again is refused.
#[test]
fn a_symlink_on_a_destinations_path_cannot_misplace_a_mount_or_its_covers() {
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = common::change_host_mounts(|| {
                Command::new("umount").arg("-l").arg(&self.0).status()
            });
        }
    }
    let d = tmpdir(0o755);
    let img = d.path().join("img");
    let t = d.path().join("t");
    for dir in ["d/newroot", "usr", "proc", "dev", "x/sys", "tt"] {
        std::fs::create_dir_all(img.join(dir)).unwrap();
    }
    std::fs::create_dir_all(t.join("proc")).unwrap();
    for n in ["proc", "self", "root", "newroot"] {
        std::os::unix::fs::symlink(".", img.join("d/newroot").join(n)).unwrap();
    }
    for (link, target) in [
        ("ct", "d/newroot/proc/self/root/newroot/.."),
        ("escape", "../../x"),
        ("abs", "/tt"),
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
    ] {
        std::os::unix::fs::symlink(target, img.join(link)).unwrap();
    }
    let mounted = common::change_host_mounts(|| {
        Command::new("mount")
            .args(["-t", "proc", "proc"])
            .arg(t.join("proc"))
            .status()
            .unwrap()
    });
    assert!(mounted.success());
    let _unmount = Unmount(t.join("proc"));
    let (img, t) = (img.to_str().unwrap(), t.to_str().unwrap());
    // The probe writes a knob's own value back: should a cover be missing, nothing on the
    // host changes.
    let knob = "kernel/printk_ratelimit";
    let probe = format!(
        "for p in /d/newroot/sys /d/newroot/proc/sys; do f=$p/{knob}; v=$(cat $f); \
         echo $v 2>/dev/null > $f || echo REFUSED; done"
    );
    let probe = probe.as_str();
    // The control: as root on the host, the knob of T's live proc takes the same write.
    let host = Command::new("sh")
        .args([
            "-c",
            &format!("f={t}/proc/sys/{knob}; echo $(cat $f) > $f && echo WROTE"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&host.stdout),
        "WROTE\n",
        "host control: {host:?}"
    );
    let run = |who: Launcher, args: &[&str]| {
        let o = Command::new("sh")
            .args(["-c", "exec $0 \"$@\""])
            .arg(launcher_words(Imp::Airlock, who))
            .args([
                "--ro-bind",
                img,
                "/",
                "--ro-bind",
                "/usr",
                "/usr",
                "--dev",
                "/dev",
            ])
            .args(args)
            .args(["--", "sh", "-c", probe])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            o,
        )
    };
    for who in BOTH {
        for args in [
            &["--ro-bind", t, "/bin"][..],
            &["--ro-bind", t, "/escape"][..],
            &["--ro-bind", t, "/abs"][..],
            &["--proc", "/proc", "--bind", t, "/ct/newroot"][..],
            &["--unshare-pid", "--proc", "/ct/newroot"][..],
        ] {
            let (code, out, o) = run(who, args);
            // uid 65534 cannot make the host's /proc or a proc in a writable tree writable
            // anyway; the new proc's path check is a root caller's only.
            if who == Launcher::Unprivileged && args[0] == "--unshare-pid" {
                continue;
            }
            assert_eq!(
                (code, out.as_str()),
                (Some(1), ""),
                "{who:?} {args:?}: {o:?}"
            );
        }
        // The host's /proc through the links (no pid namespace): it keeps its covers.
        let (code, out, o) = run(who, &["--proc", "/ct/newroot"]);
        assert_eq!(code, Some(0), "{who:?}: {o:?}");
        assert_eq!(out, "REFUSED\nREFUSED\n", "{who:?}: {o:?}");
    }
}

/// `bw` (a launcher's words) runs a task that traps `sig` (counting deliveries), says it is
/// ready, ends on its own about 1.2 s later and writes the count to DIR/marker; once it is
/// ready, `sig` goes to the launcher's whole process group. Returns what the script printed
/// (`status=N`, the launcher's) and the marker's text ("" if none was written within 2 s).
fn signal_the_process_group(bw: &str, dir: &str, flags: &str, sig: &str) -> (String, String) {
    let marker = format!("{dir}/marker");
    let ready = format!("{dir}/ready");
    let _ = std::fs::remove_file(&marker);
    let _ = std::fs::remove_file(&ready);
    let task = format!(
        "n=0; trap \"n=\\$((n+1))\" {sig}; : > {ready}; i=0; \
         while [ $i -lt 12 ]; do sleep 0.1; i=$((i+1)); done; \
         echo cleaned $n > {marker}; exit 3"
    );
    let script = format!(
        "set -m; {bw} --ro-bind / / --bind {dir} {dir} {flags} -- sh -c '{task}' & \
         p=$!; i=0; while [ ! -e {ready} ] && [ $i -lt 100 ]; do sleep 0.05; \
         i=$((i+1)); done; kill -{sig} -- -$p; wait $p; echo status=$?; \
         i=0; while [ ! -e {marker} ] && [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let o = Command::new("bash")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let got = std::fs::read_to_string(&marker).unwrap_or_default();
    (String::from_utf8_lossy(&o.stdout).into_owned(), got)
}

/// A SIGTERM to the launcher's process group (a CI job cancelled, `kill -- -PGID`): without
/// --die-with-parent bubblewrap dies of it while its task, which got it too, cleans up; airlock
/// forwards nothing either, waits for the sandbox to end (at most 2 s), then dies of the
/// signal. With --die-with-parent both end the sandbox at once: no clean-up.
#[test]
fn a_signal_to_the_process_group_lets_the_task_clean_up() {
    let d = tmpdir(0o777);
    let dir = d.path().display().to_string();
    for who in BOTH {
        for imp in IMPS {
            for (flags, cleaned) in [("", "cleaned 1\n"), ("--die-with-parent", "")] {
                let bw = launcher_words(imp, who);
                let (out, got) = signal_the_process_group(&bw, &dir, flags, "TERM");
                let ctx = format!("{who:?} {imp:?} [{flags}]: {out:?}");
                assert_eq!(out, "status=143\n", "{ctx}");
                assert_eq!(got, cleaned, "{ctx}");
            }
        }
    }
}

/// The other signals whose default action ends bubblewrap's launcher act as SIGTERM does
/// above: Ctrl-\\'s SIGQUIT to the process group, or a SIGUSR1 or SIGALRM to it, ends the
/// launcher by that signal while the task, which got it too, handles it and ends on its own.
/// airlock used to die of them at once, its sandbox with it, the task's clean-up lost.
#[test]
fn other_ending_signals_to_the_process_group_let_the_task_clean_up() {
    let d = tmpdir(0o777);
    let dir = d.path().display().to_string();
    for who in BOTH {
        for imp in IMPS {
            for (sig, status) in [("QUIT", 131), ("USR1", 138), ("ALRM", 142)] {
                let bw = launcher_words(imp, who);
                let (out, got) = signal_the_process_group(&bw, &dir, "", sig);
                let ctx = format!("{who:?} {imp:?} SIG{sig}: {out:?}");
                assert_eq!(out, format!("status={status}\n"), "{ctx}");
                assert_eq!(got, "cleaned 1\n", "{ctx}");
            }
        }
    }
}

/// Without a pid namespace the task is in the caller's process group, as bubblewrap's, so a
/// signal to that group reaches it; airlock's init, which passes on what is sent to its pid
/// (--info-fd's child-pid), has left that group, or the task would get a group's signal twice
/// (once from the group, once from the init). A shell's trap cannot count that second one (it
/// lands while the first is still pending), so the groups are read: the task's, and its
/// parent's. Control: bubblewrap's parent (bubblewrap itself, which passes nothing on) is in
/// the group, so the probe sees a parent there.
#[test]
fn without_a_pid_namespace_only_the_task_is_in_the_callers_process_group() {
    use std::os::unix::process::CommandExt;
    let probe = "import os; print(os.getpgrp(), os.getpgid(os.getppid()))";
    for who in BOTH {
        for imp in IMPS {
            let words = launcher_words(imp, who);
            let mut argv = words.split(' ');
            let mut c = Command::new(argv.next().unwrap());
            c.args(argv)
                .args(["--ro-bind", "/", "/", "--", PYTHON, "-c", probe])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            let child = c.spawn().unwrap();
            let group = child.id();
            let o = child.wait_with_output().unwrap();
            let ctx = format!("{who:?} {imp:?} (group {group}): {o:?}");
            let out = String::from_utf8_lossy(&o.stdout);
            let parent_in_group = matches!(imp, Imp::Bubblewrap);
            let got: Vec<u32> = out
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            assert_eq!(got.len(), 2, "{ctx}");
            assert_eq!(got[0], group, "the task in the caller's group: {ctx}");
            assert_eq!(
                got[1] == group,
                parent_in_group,
                "its parent in the group: {ctx}"
            );
        }
    }
}

/// A signal the caller left blocked stays blocked in the launcher, as bubblewrap never
/// unblocks one: a SIGTERM or SIGUSR1 sent to it then does not end it, and the task's
/// status is the launcher's. (The child says when its mask is set, so that the signals never
/// race it; they come 0.3 s later, while the launcher runs.)
#[test]
fn signals_the_caller_blocked_do_not_end_the_launcher() {
    for who in BOTH {
        for imp in IMPS {
            let words = launcher_words(imp, who);
            let argv: Vec<&str> = words
                .split(' ')
                .chain(["--ro-bind", "/", "/", "sh", "-c", "sleep 0.6; exit 3"])
                .collect();
            let prog = format!(
                "import os, signal, sys, time\n\
                 argv = {argv:?}\n\
                 r, w = os.pipe()\n\
                 pid = os.fork()\n\
                 if pid == 0:\n\
                 \x20   signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM, signal.SIGUSR1}})\n\
                 \x20   os.write(w, b'x')\n\
                 \x20   os.execvp(argv[0], argv)\n\
                 os.close(w)\n\
                 os.read(r, 1)\n\
                 time.sleep(0.3)\n\
                 os.kill(pid, signal.SIGUSR1)\n\
                 os.kill(pid, signal.SIGTERM)\n\
                 print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
            );
            let o = Command::new(PYTHON)
                .args(["-c", &prog])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let ctx = format!("{who:?} {imp:?}: {o:?}");
            assert_eq!(String::from_utf8_lossy(&o.stdout), "3\n", "{ctx}");
        }
    }
}

/// `airlock bwrap ARGS...` behaves as airlock started under the name `bwrap`.
#[test]
fn airlock_bwrap_subcommand() {
    for who in BOTH {
        let c = case(&[
            "--ro-bind",
            "/",
            "/",
            "--unshare-all",
            "--hostname",
            "sub",
            "--proc",
            "/proc",
            "--setenv",
            "V",
            "1",
        ])
        .sh(PROBE);
        let b = c.run(Imp::Bubblewrap, who);
        let s = c.run(Imp::AirlockSub, who);
        assert_eq!((b.code, s.code), (0, 0), "{}\n{}", b.show(), s.show());
        assert_eq!(
            normalise(&b.stdout),
            normalise(&s.stdout),
            "{}\n{}",
            b.show(),
            s.show()
        );
        let v = case(&["--version"]).run(Imp::AirlockSub, who);
        assert!(v.stdout.starts_with("bubblewrap "), "{}", v.show());
    }
}

// ---------------------------------------------------------------------------------------------
// Holes bubblewrap leaves open, closed by airlock

/// As root, a writable /proc/sys: bubblewrap lets the task write the host's sysctls (here the
/// current value of vm.overcommit_ratio back), airlock refuses (read-only file system).
#[test]
fn host_sysctls_are_read_only_for_a_root_caller() {
    let probe = "v=$(cat /proc/sys/vm/overcommit_ratio) && echo $v > /proc/sys/vm/overcommit_ratio && echo WROTE || echo REFUSED";
    for set in [
        &["--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc"][..],
        &["--bind", "/", "/"][..],
        &["--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc"][..],
        &["--ro-bind", "/", "/", "--proc", "/proc"][..],
    ] {
        let [b, a] = case(set).sh(probe).run_all(Launcher::Root);
        assert_eq!(b.stdout, "WROTE\n", "{set:?} {}", b.show());
        assert_eq!(a.stdout, "REFUSED\n", "{set:?} {}", a.show());
        assert!(a.stderr.contains("Read-only file system"), "{}", a.show());
    }
    // uid 65534 can write neither.
    let [b, a] = case(&["--bind", "/", "/"])
        .sh(probe)
        .run_all(Launcher::Unprivileged);
    assert_eq!(
        (b.stdout.as_str(), a.stdout.as_str()),
        ("REFUSED\n", "REFUSED\n")
    );
}

/// As root, the kernel's interfaces in a writable copy of a host tree stay read-only however
/// the copy is named: a proc handed over as a descriptor (--bind-fd), a cgroup hierarchy,
/// tracefs or bpffs bound directly, a file of one bound by itself (which failed the setup, ENOTDIR, until
/// stop 47's fuzzing). bubblewrap lets the task write them (each probe writes a file's
/// current value back), processes' files in a bound host proc included (oom_score_adj: as
/// the host's uid 0 the task could raise any host process's).
#[test]
fn kernel_interfaces_in_writable_copies_are_read_only_for_a_root_caller() {
    let back = |f: &str| format!("v=$(cat {f}) && echo $v > {f} && echo WROTE || echo REFUSED");
    let base = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin"];
    let base = base.iter().chain(["--symlink", "usr/lib", "/lib"].iter());
    let base: Vec<&str> = base
        .chain(["--symlink", "usr/lib64", "/lib64"].iter())
        .copied()
        .collect();
    let fd_proc = case(&base)
        .pre("exec 5</proc")
        .arg(&["--bind-fd", "5", "/hostproc"]);
    let cgroup = case(&base).arg(&["--bind", "/sys/fs/cgroup/pids", "/k"]);
    // The host's /sys/kernel/tracing may be an empty directory (tracefs not mounted there):
    // the test mounts one of its own.
    let tracefs = common::Tracefs::mount();
    let tracing = case(&base).arg(&["--bind", tracefs.path(), "/k"]);
    let sysctl = case(&base).arg(&["--bind", "/proc/sys/vm/overcommit_ratio", "/k"]);
    // bpffs: a root caller's task could unpin the host's BPF objects (stop 47's mutation
    // testing dropped it from the list unnoticed). An empty one of the test's own.
    let bpffs = common::Tracefs::of_type("bpf");
    let pins = case(&base).arg(&["--bind", bpffs.path(), "/k"]);
    let mkdir = "mkdir /k/pin && rmdir /k/pin && echo WROTE || echo REFUSED";
    let [b, a] = pins.sh(mkdir).run_all(Launcher::Root);
    assert_eq!(b.stdout, "WROTE\n", "bpffs {}", b.show());
    assert_eq!(a.stdout, "REFUSED\n", "bpffs {}", a.show());
    assert!(a.stderr.contains("Read-only file system"), "{}", a.show());
    for (c, file) in [
        (sysctl, "/k"),
        (fd_proc.clone(), "/hostproc/sys/vm/overcommit_ratio"),
        (cgroup, "/k/cgroup.clone_children"),
        (tracing, "/k/tracing_on"),
    ] {
        let [b, a] = c.sh(&back(file)).run_all(Launcher::Root);
        assert_eq!(b.stdout, "WROTE\n", "{file} {}", b.show());
        assert_eq!(a.stdout, "REFUSED\n", "{file} {}", a.show());
        assert!(a.stderr.contains("Read-only file system"), "{}", a.show());
    }
    for c in [
        fd_proc.sh(&back("/hostproc/self/oom_score_adj")),
        case(&["--bind", "/", "/"]).sh(&back("/proc/self/oom_score_adj")),
    ] {
        let [b, a] = c.run_all(Launcher::Root);
        assert_eq!(
            (b.stdout.as_str(), a.stdout.as_str()),
            ("WROTE\n", "REFUSED\n"),
            "{}\n{}",
            b.show(),
            a.show()
        );
    }
}

/// As root, a --proc's knobs beside /proc/sys (PROC_KNOBS: irq, bus, sysrq-trigger) are
/// read-only, with a pid namespace and without one: the task is the host's uid 0 there, which
/// could steer the host's interrupts (stop 47's mutation testing dropped `irq` from the list
/// unnoticed). Each file is opened for writing, never written; bubblewrap covers the same
/// ones. Control: on the host, root opens each.
#[test]
fn proc_knobs_beside_sys_are_read_only_for_a_root_caller() {
    let mut knobs: Vec<String> = ["/proc/irq/default_smp_affinity", "/proc/sysrq-trigger"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let pci = std::fs::read_dir("/proc/bus/pci")
        .into_iter()
        .flatten()
        .flatten();
    let bus = pci.filter(|e| e.path().is_dir()).find_map(|d| {
        let files = std::fs::read_dir(d.path()).ok()?.flatten();
        files.map(|f| f.path()).find(|f| f.is_file())
    });
    knobs.extend(bus.map(|f| f.display().to_string()));
    knobs.retain(|k| Path::new(k).exists());
    assert!(!knobs.is_empty(), "no knob to try on this host");
    // Each file's answer: OPENED, or the error's text (sh: ...: Read-only file system).
    let probe = format!(
        "for f in {}; do if e=$( (exec 3>>\"$f\") 2>&1 ); then echo \"$f OPENED\"; \
         else echo \"$f ${{e##*: }}\"; fi; done",
        knobs.join(" ")
    );
    let host = Command::new("sh").args(["-c", &probe]).output().unwrap();
    let opened: String = knobs.iter().map(|k| format!("{k} OPENED\n")).collect();
    assert_eq!(String::from_utf8_lossy(&host.stdout), opened, "control");
    let refused: String = knobs
        .iter()
        .map(|k| format!("{k} Read-only file system\n"))
        .collect();
    let base = with(MIN, &["--proc", "/proc"]);
    for pidns in [&[][..], &["--unshare-pid"]] {
        let c = case(&with(&base, pidns)).sh(&probe);
        let [b, a] = c.run_all(Launcher::Root);
        assert_eq!(a.stdout, refused, "{pidns:?} {}", a.show());
        assert_eq!(b.stdout, refused, "bubblewrap, {pidns:?} {}", b.show());
    }
}

/// A bind source named through a descriptor's magic link (/proc/self/fd/N) is the directory
/// the descriptor holds, as under bubblewrap, read-only and writable alike.
#[test]
fn a_bind_source_through_proc_self_fd_is_the_descriptors_directory() {
    for who in BOTH {
        let d = host_tree(who, &[], &["f"], &[]);
        let pre = format!("exec 5<{}", d.path().display());
        for bind in ["--ro-bind", "--bind"] {
            let args = with(MIN, &[bind, "/proc/self/fd/5", "/mnt", "cat", "/mnt/f"]);
            let [b, _] = same(&case(&args).pre(&pre), who);
            assert_eq!(b.stdout, "old\n", "{who:?} {bind} {}", b.show());
        }
    }
}

/// As root, the search for kernel interfaces in a writable copy reads any mount table: a mount
/// point that is not UTF-8, and a proc covered by a later mount (no path reaches it, in the
/// host or the copy) fail neither launcher. Control: a proc mounted again over that cover is
/// found and kept read-only (bubblewrap lets the task write the host's sysctl through it).
/// Each case runs in a mount namespace of its own (unshare -m), leaving the host's as it was.
#[test]
fn unusual_mount_tables_do_not_fail_a_writable_copy() {
    // (Inside bash -c '...' and sh -c "...", each \$ is left for the task's shell.)
    let write_back = "f=\\$1/p/sys/vm/overcommit_ratio; v=\\$(cat \\$f 2>/dev/null) && \
                      echo \\$v > \\$f 2>/dev/null && echo WROTE || echo no";
    for (setup, want_b, want_a) in [
        (
            "n=$(printf \"\\\\377\"); mkdir -p $1/$n; mount -t tmpfs t $1/$n; \
             grep -c \"$n\" /proc/self/mountinfo >/dev/null || exit 9",
            "no",
            "no",
        ),
        (
            "mkdir -p $1/p; mount -t proc proc $1/p; mount -t tmpfs t $1",
            "no",
            "no",
        ),
        (
            "mkdir -p $1/p; mount -t proc proc $1/p; mount -t tmpfs t $1; mkdir -p $1/p; \
             mount -t proc proc $1/p",
            "WROTE",
            "no",
        ),
    ] {
        let d = tmpdir(0o755);
        let dir = d.path().display().to_string();
        let script = format!(
            "exec unshare -m --propagation private bash -c '{setup}\n\
             $0 --bind / / --dev /dev -- sh -c \"echo ran; {write_back}\" sh $1' \"$BW\" {dir}"
        );
        let [b, a] = case(&[]).script(&script).run_all(Launcher::Root);
        assert_eq!(
            b.stdout,
            format!("ran\n{want_b}\n"),
            "bubblewrap {}",
            b.show()
        );
        assert_eq!(a.stdout, format!("ran\n{want_a}\n"), "airlock {}", a.show());
    }
}

/// bubblewrap's pid 1 (its reaper) carries the caller's environment and the task can read it
/// in /proc/1/environ; airlock's init is not dumpable. With --unshare-net the launcher makes
/// the network namespace while the init builds the sandbox, and an unprivileged caller's init
/// becomes non-dumpable only at step 10: checked both ways.
#[test]
fn the_launchers_environment_is_not_readable_from_pid_1() {
    let probe = r#"if e=$(tr '\0' '\n' < /proc/1/environ 2>/dev/null); then echo "$e" | grep '^SECRET_TOKEN=' || echo no-secret; else echo unreadable; fi"#;
    for (who, net) in BOTH
        .into_iter()
        .flat_map(|w| [(w, None), (w, Some("--unshare-net"))])
    {
        let mut args = vec![
            "--ro-bind",
            "/",
            "/",
            "--unshare-pid",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--clearenv",
        ];
        args.extend(net);
        let base = case(&args).env("SECRET_TOKEN", "hunter2");
        let [b, a] = base.clone().sh(probe).run_all(who);
        assert_eq!(
            b.stdout,
            "SECRET_TOKEN=hunter2\n",
            "{who:?} {net:?} {}",
            b.show()
        );
        assert_eq!(a.stdout, "unreadable\n", "{who:?} {net:?} {}", a.show());
        // The task's own environment is as asked in both.
        let [b, _] = same(&base.sh("env | grep -c SECRET_TOKEN"), who);
        assert_eq!(b.stdout, "0\n");
    }
}

/// A descriptor the caller left open (fd 7, named by no option) reaches the task, as under
/// bubblewrap (`cmd <&3`, a make jobserver, socket activation); those an option names (the
/// data of --file, --sync-fd) do not, under either, but for --sync-fd with --as-pid-1.
#[test]
fn descriptors_the_caller_left_open_reach_the_task_as_under_bubblewrap() {
    let d = tmpdir(0o755);
    let f = d.path().join("secret");
    write(&f, b"left open\n", 0o600);
    // The whole list too: a descriptor of airlock's own that was not close-on-exec would
    // show as one more than bubblewrap's.
    let probe = "if [ -e /proc/self/fd/7 ]; then echo visible; cat <&7; else echo absent; fi; \
                 for n in 8 9; do [ -e /proc/self/fd/$n ] && echo fd $n open; done; \
                 echo $(ls /proc/self/fd)";
    for who in BOTH {
        for set in [
            &[][..],
            &["--unshare-pid"][..],
            &["--unshare-pid", "--as-pid-1"][..],
        ] {
            let c = case(&with(&["--ro-bind", "/", "/", "--tmpfs", "/tmp"], set))
                .arg(&["--file", "8", "/tmp/data", "--sync-fd", "9"])
                .pre(&format!("exec 7<{} 8</dev/null 9</dev/null", f.display()))
                .sh(probe);
            let [b, a] = c.run_all(who);
            // With --as-pid-1 no init holds --sync-fd: the task does.
            // (The list holds whatever the test runner itself left open, for both.)
            let want = match set.contains(&"--as-pid-1") {
                true => "visible\nleft open\nfd 9 open\n",
                false => "visible\nleft open\n",
            };
            assert!(b.stdout.starts_with(want), "{who:?} {set:?} {}", b.show());
            assert_eq!(a.stdout, b.stdout, "{who:?} {set:?} {}", a.show());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scale

#[test]
fn two_thousand_optional_binds() {
    let mut args: Vec<String> = MIN.iter().map(|s| s.to_string()).collect();
    for i in 0..2000 {
        args.extend([
            "--ro-bind-try".into(),
            format!("/nonexistent-{i}"),
            format!("/x-{i}"),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for who in BOTH {
        let c = case(&args)
            .deadline(Duration::from_secs(60))
            .sh("ls / | wc -l; echo ok");
        let [b, a] = same(&c, who);
        assert_eq!(b.stdout, "5\nok\n");
        eprintln!(
            "2000 binds as {who:?}: bubblewrap {:?}, airlock {:?}",
            b.took, a.took
        );
    }
}

/// bubblewrap caps the command line at 9000 arguments; airlock accepts more.
#[test]
fn more_than_nine_thousand_arguments() {
    let mut args: Vec<String> = vec!["--ro-bind".into(), "/".into(), "/".into()];
    for i in 0..4600 {
        args.extend(["--unsetenv".into(), format!("V{i}")]);
    }
    args.extend(["sh".into(), "-c".into(), "echo ran".into()]);
    assert!(args.len() > 9000);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for who in BOTH {
        let [b, a] = case(&args).run_all(who);
        assert_eq!(b.code, 1, "{}", b.show());
        assert!(
            b.stderr.contains("Exceeded maximum number of arguments"),
            "{}",
            b.show()
        );
        assert_eq!((a.code, a.stdout.as_str()), (0, "ran\n"), "{}", a.show());
    }
    // Below the cap, the same.
    let few: Vec<&str> = args[..3]
        .iter()
        .chain(&args[3..3 + 8000])
        .chain(&args[args.len() - 3..])
        .copied()
        .collect();
    same(&case(&few), Launcher::Unprivileged);
}

/// A program file with no `#!` line is a shell script to execvp(3), which bubblewrap uses:
/// /bin/sh runs it with its path as $0 (CI steps that ship such scripts depend on it). One
/// whose `#!` line names a missing interpreter fails as execvp's ENOENT, as bubblewrap says.
#[test]
fn a_script_without_an_interpreter_line_runs_under_sh() {
    let d = tmpdir(0o755);
    write(&d.path().join("s.sh"), b"echo ran $0 $1\n", 0o755);
    write(
        &d.path().join("b"),
        b"#!/no/such/interpreter\necho ran\n",
        0o755,
    );
    let src = d.path().to_str().unwrap();
    for who in BOTH {
        let args = with(MIN, &["--ro-bind", src, "/w", "--", "/w/s.sh", "arg1"]);
        let [b, _] = same(&case(&args), who);
        assert_eq!(b.stdout, "ran /w/s.sh arg1\n", "{}", b.show());
        let args = with(MIN, &["--ro-bind", src, "/w", "--", "/w/b"]);
        let [b, _] = same(&case(&args), who);
        assert_eq!(
            b.stderr,
            "bwrap: execvp /w/b: No such file or directory\n",
            "{}",
            b.show()
        );
    }
}

/// --perms applies to what --dir and --file make; an existing directory or file keeps its
/// mode (bubblewrap's manual), above all a host one seen through a writable bind.
#[test]
fn perms_leave_an_existing_directory_or_file_as_it_is() {
    for who in BOTH {
        let d = host_tree(who, &["sub"], &["f"], &[]);
        let src = d.path().to_str().unwrap();
        let args = with(
            MIN,
            &[
                "--bind", src, "/h", "--perms", "0777", "--dir", "/h/sub", "--perms", "0600",
                "--file", "5", "/h/f", "--perms", "0700", "--dir", "/h/new",
            ],
        );
        let c = case(&args)
            .pre("exec 5< <(printf 'new\\n')")
            .sh("stat -c '%n %a' /h/sub /h/f /h/new; cat /h/f");
        let [b, _] = same(&c, who);
        assert_eq!(
            b.stdout,
            "/h/sub 755\n/h/f 644\n/h/new 700\nnew\n",
            "{}",
            b.show()
        );
        let mode = |p: &str| {
            std::fs::metadata(d.path().join(p))
                .unwrap()
                .permissions()
                .mode()
        };
        assert_eq!(mode("sub") & 0o7777, 0o755, "{who:?}: the host's directory");
        assert_eq!(mode("f") & 0o7777, 0o644, "{who:?}: the host's file");
    }
}

/// In --args, an empty argument is a lone NUL: it stays, or every argument after it shifts.
#[test]
fn empty_arguments_in_an_args_descriptor_are_kept() {
    for who in BOTH {
        let c = case(&["--args", "5", "--", "sh", "-c", "echo \"[$E]\""])
            .pre("exec 5< <(printf -- '--setenv\\0E\\0\\0--ro-bind\\0/\\0/\\0')");
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "[]\n", "{}", b.show());
    }
}

/// --dev with a terminal on stdout: the terminal is bound at /dev/console, where tty(1) and
/// ttyname(3) find it, as under bubblewrap (the host's /dev/pts/N is not in the sandbox's own
/// devpts), also inside another sandbox. Without a terminal there is no /dev/console.
#[test]
fn a_terminal_on_stdout_is_the_sandboxs_console() {
    let probe = "tty; test -c /dev/console && echo console || echo no-console";
    let in_pty = case(&[]).script(&format!(
        "script -qec \"$BW --ro-bind / / --dev /dev sh -c '{probe}'\" /dev/null"
    ));
    // Inside another sandbox (bubblewrap's, root, with its own devpts) the terminal's name
    // /dev/pts/0 names no file, or (once a terminal is opened there) another terminal: the
    // terminal is found as ttyname(3) finds it, at the outer /dev/console, the node itself.
    let nested = case(&[]).script(&format!(
        "f=$(mktemp); cat > $f <<EOF\n$1\n$BW --ro-bind / / --dev /dev sh -c '{probe}'\nEOF\n\
         script -qec \"/usr/bin/bwrap --bind / / --dev /dev --proc /proc --cap-add ALL \
         bash $f\" /dev/null; rm -f $f"
    ));
    let no_tty = case(&["--ro-bind", "/", "/", "--dev", "/dev"]).sh(probe);
    let console = "/dev/console\nconsole\n";
    // A link to the terminal made after the console (listed first in the tmpfs /dev) is not
    // the node: airlock still finds the console; bubblewrap (glibc's ttyname, which follows
    // it) takes the link and fails to bind it, which shows the link is seen first.
    let link = nested.clone().arg(&["ln -s /proc/self/fd/1 /dev/tty-link"]);
    let link_b = "bwrap: Can't bind mount /oldroot/dev/tty-link on /newroot/dev/console: \
                  Unable to mount source on destination: No such file or directory\n";
    for who in BOTH {
        for (c, want_b, want_a) in [
            (in_pty.clone(), console, console),
            (nested.clone(), console, console),
            (nested.clone().arg(&["exec 5<>/dev/ptmx"]), console, console),
            (link.clone(), link_b, console),
            (
                no_tty.clone(),
                "not a tty\nno-console\n",
                "not a tty\nno-console\n",
            ),
        ] {
            let [b, a] = c.run_all(who).map(|mut r| {
                r.stdout = r.stdout.replace('\r', "");
                r
            });
            assert_eq!(b.stdout, want_b, "{who:?} bubblewrap {}", b.show());
            assert_eq!(a.stdout, want_a, "{who:?} airlock {}", a.show());
        }
    }
}

/// As root, --dev's device nodes are read-only mounts, so the task (the host's uid 0, their
/// owner) cannot chmod or touch the host's nodes; bubblewrap lets it (the probe sets /dev/full's
/// mode to what it is, 0666). Writing to a device still works under both.
#[test]
fn dev_nodes_cannot_be_chmodded_by_a_root_callers_task() {
    let c = case(&["--ro-bind", "/", "/", "--dev", "/dev"])
        .sh("chmod 0666 /dev/full && echo chmodded; echo data > /dev/null && echo written");
    let [b, a] = c.run_all(Launcher::Root);
    assert_eq!(b.stdout, "chmodded\nwritten\n", "bubblewrap {}", b.show());
    assert_eq!(a.stdout, "written\n", "airlock {}", a.show());
    assert!(a.stderr.contains("Read-only file system"), "{}", a.show());
}

/// Values read as bubblewrap reads them: --size in C's base 0 (0100000 is octal, 32 KiB;
/// 0x100000 hexadecimal, 1 MiB), a --perms or --size left over before the command ignored,
/// and an empty PATH entry (leading or trailing) naming the working directory, as to execvp.
#[test]
fn option_values_read_as_bubblewrap_reads_them() {
    let d = tmpdir(0o755);
    write(&d.path().join("x"), b"#!/bin/sh\necho ran-x\n", 0o755);
    let dir = d.path().to_str().unwrap();
    let sizes = case(&[
        "--ro-bind",
        "/",
        "/",
        "--size",
        "0100000",
        "--tmpfs",
        "/tmp",
    ])
    .arg(&["--size", "0x100000", "--tmpfs", "/mnt"])
    .sh("grep -E ' /(tmp|mnt) ' /proc/self/mountinfo | grep -o 'size=[0-9a-z]*'");
    for who in BOTH {
        for (c, want) in [
            (sizes.clone(), "size=32k\nsize=1024k\n"),
            (
                case(&["--ro-bind", "/", "/", "--perms", "0755", "echo", "p"]),
                "p\n",
            ),
            (
                case(&["--ro-bind", "/", "/", "--size", "100", "echo", "s"]),
                "s\n",
            ),
            (
                case(&["--ro-bind", "/", "/", "--setenv", "PATH", ":/usr/bin"])
                    .arg(&["--chdir", dir, "x"]),
                "ran-x\n",
            ),
            (
                case(&["--ro-bind", "/", "/", "--setenv", "PATH", "/usr/bin:"])
                    .arg(&["--chdir", dir, "x"]),
                "ran-x\n",
            ),
        ] {
            let [b, a] = c.run_all(who);
            assert_eq!(b.stdout, want, "{who:?} bubblewrap {}", b.show());
            assert_eq!(a.stdout, want, "{who:?} airlock {}", a.show());
            assert_eq!(
                (b.code, a.code),
                (0, 0),
                "{who:?} {}\n{}",
                b.show(),
                a.show()
            );
        }
    }
}

/// Signals as under bubblewrap: one the caller ignores (nohup, a script's background job)
/// stays ignored in the task and does not end the run, one it blocks stays blocked; SIGTERM or SIGHUP to the launcher ends
/// it at once with 128+N (SIGINT too, but a script's background job has it ignored), the sandbox with it (bubblewrap's --die-with-parent), and is not
/// handed to a task that would catch it.
#[test]
fn signals_to_the_launcher_act_as_under_bubblewrap() {
    let ignored = case(&["--ro-bind", "/", "/", "--dev", "/dev"])
        .script(
            "trap '' HUP INT QUIT; $BW \"$@\" & p=$!; sleep 0.5; kill -HUP $p; kill -INT $p; \
             wait $p; echo rc=$?",
        )
        .sh(
            "sleep 1; echo survived; m=$(awk '/^SigIgn/ {print $2}' /proc/self/status); \
             echo HUP INT QUIT PIPE ignored: $(( 0x$m >> 0 & 1 )) $(( 0x$m >> 1 & 1 )) \
             $(( 0x$m >> 2 & 1 )) $(( 0x$m >> 12 & 1 ))",
        );
    let ends = |sig: &str| {
        case(&["--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent"])
            .script(&format!(
                "$BW \"$@\" & p=$!; sleep 0.5; kill -{sig} $p; wait $p; echo rc=$?"
            ))
            .sh("trap 'echo caught; exit 7' HUP TERM; sleep 5 & wait; sleep 1")
    };
    // Blocked ones stay blocked in the task too (SIGUSR1 and SIGALRM: bits 9 and 13; awk
    // reads its own mask, as a shell would clear it).
    let blocked = case(&["--ro-bind", "/", "/"])
        .script(
            "exec python3 -c 'import os, signal, sys; \
             signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGALRM}); \
             os.execvp(sys.argv[1], sys.argv[1:])' $BW \"$@\"",
        )
        .arg(&["--", "awk", "/^SigBlk/ {print $2}", "/proc/self/status"]);
    for who in BOTH {
        for (c, want) in [
            (
                ignored.clone(),
                "survived\nHUP INT QUIT PIPE ignored: 1 1 1 0\nrc=0\n",
            ),
            (blocked.clone(), "0000000000002200\n"),
            (ends("TERM"), "rc=143\n"),
            (ends("HUP"), "rc=129\n"),
        ] {
            let [b, a] = c.run_all(who);
            assert_eq!(b.stdout, want, "{who:?} bubblewrap {}", b.show());
            assert_eq!(a.stdout, want, "{who:?} airlock {}", a.show());
        }
    }
}

/// The --info-fd reader sees the document's end as soon as it is written, while the sandbox
/// still runs, as under bubblewrap: here the task waits for that reader's word through a FIFO,
/// so a descriptor left open in the sandbox would hang both until the deadline.
#[test]
fn the_info_fd_reader_sees_its_end_while_the_sandbox_runs() {
    let script = "d=$(mktemp -d); chmod 755 $d; mkfifo -m 666 $d/go\n\
                  { $BW --ro-bind $d $d \"$@\" $d/go 3>&1 1>&4 | \
                  { cat >/dev/null; timeout 5 sh -c \"echo go > $d/go\"; }; } 4>&1\n\
                  echo rc=$?; rm -rf $d";
    for who in BOTH {
        for pid in [&[][..], &["--unshare-pid"][..]] {
            let args = with(
                &with(MIN, pid),
                &[
                    "--info-fd",
                    "3",
                    "timeout",
                    "5",
                    "sh",
                    "-c",
                    "read x < \"$0\"; echo task got $x",
                ],
            );
            // The task and the FIFO's writer are bounded by `timeout` (not the launcher: a
            // `timeout` around it would hold the info pipe itself): a regression ends in 5 s
            // and leaves nothing.
            let c = case(&args).script(script).deadline(Duration::from_secs(20));
            let [b, _] = same(&c, who);
            assert_eq!(b.stdout, "task got go\nrc=0\n", "{}", b.show());
        }
    }
}

/// A standard stream an option names is used and closed like any other named descriptor: the
/// task of `--file 0` finds no stdin, as under bubblewrap.
#[test]
fn a_standard_stream_named_by_an_option_does_not_reach_the_task() {
    let probe = "cat /tmp/x 2>/dev/null; for n in 0 1; do \
                 [ -e /proc/self/fd/$n ] && echo $n open >&2 || echo $n closed >&2; done";
    let base = ["--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/tmp"];
    for who in BOTH {
        for (named, pre, closed) in [
            (
                &["--file", "0", "/tmp/x"][..],
                "exec 0< <(echo hi)",
                "0 closed",
            ),
            (&["--info-fd", "1"][..], "", "1 closed"),
        ] {
            // (The info document's numbers differ: stdout is not compared.)
            let [b, a] = case(&with(&base, named)).pre(pre).sh(probe).run_all(who);
            assert!(b.stderr.contains(closed), "{}", b.show());
            assert_eq!(a.stderr, b.stderr, "{}", a.show());
        }
    }
}

/// --userns-block-fd as bubblewrap's own demo uses it: the info document comes first, the
/// client reads the sandbox's pid from it, writes the id maps itself, then lets the sandbox go
/// on by writing to the block fd; the launcher writes no map of its own.
#[test]
fn a_client_writes_the_maps_before_releasing_userns_block_fd() {
    let script = "d=$(mktemp -d); mkfifo $d/b $d/i; exec 8<>$d/b\n\
                  $BW \"$@\" 7>$d/i &\n\
                  pid=$(timeout 5 cat $d/i | sed -n '/child-pid/s/[^0-9]//gp')\n\
                  u=$(stat -c %u /proc/$pid); g=$(stat -c %g /proc/$pid)\n\
                  echo \"0 $u 1\" > /proc/$pid/uid_map; echo deny > /proc/$pid/setgroups\n\
                  echo \"0 $g 1\" > /proc/$pid/gid_map\n\
                  echo go >&8; wait $!; echo rc=$?; rm -rf $d";
    for (who, id) in [(Launcher::Root, 0), (Launcher::Unprivileged, 65534)] {
        let args = [
            "--ro-bind",
            "/",
            "/",
            "--unshare-user",
            "--userns-block-fd",
            "8",
            "--info-fd",
            "7",
            "sh",
            "-c",
            "id -u; cat /proc/self/uid_map; grep ^Groups: /proc/self/status",
        ];
        let [b, _] = same(&case(&args).script(script), who);
        let map = format!("0 {id} 1");
        let words: Vec<&str> = b.stdout.split_whitespace().collect();
        assert_eq!(
            words.join(" "),
            format!("0 {map} Groups: rc=0"),
            "{}",
            b.show()
        );
    }
}

/// While airlock waits on --userns-block-fd, SIGTERM still ends it, as it ends bubblewrap (a
/// job's timeout or cancel must not hang on a descriptor nobody writes). A launcher that
/// ignores SIGTERM gets SIGKILL a second later (rc=137), so a failure leaves nothing behind.
#[test]
fn sigterm_ends_the_wait_on_userns_block_fd() {
    let script = "d=$(mktemp -d); mkfifo $d/f; exec 8<>$d/f; rm -rf $d\n\
                  timeout -k 1 2 $BW \"$@\" 7>/dev/null; echo rc=$?";
    for who in BOTH {
        let args = with(
            MIN,
            &[
                "--unshare-user",
                "--userns-block-fd",
                "8",
                "--info-fd",
                "7",
                "true",
            ],
        );
        let [b, a] = same(&case(&args).script(script), who);
        assert_eq!(b.stdout, "rc=124\n", "{}", b.show());
        assert!(a.took < Duration::from_secs(6), "{who:?}: {}", a.show());
    }
}

/// A symlink already at a --dir destination inside a writable bind (the host's, pointing at a
/// host directory beside it) is left as it is, as bubblewrap leaves it: --perms never reaches
/// the directory it names. Control: --perms does set the mode of a directory made here.
#[test]
fn perms_never_follow_a_symlink_at_a_dir_destination() {
    for who in BOTH {
        let d = host_tree(who, &["sub"], &[], &[("link", "sub")]);
        let src = d.path().to_str().unwrap();
        let args = with(
            MIN,
            &[
                "--bind", src, "/h", "--perms", "0700", "--dir", "/h/link", "--perms", "0700",
                "--dir", "/h/new",
            ],
        );
        let c = case(&args).sh("stat -c '%n %a' /h/sub /h/new; readlink /h/link");
        let [b, _] = same(&c, who);
        assert_eq!(b.stdout, "/h/sub 755\n/h/new 700\nsub\n", "{}", b.show());
        let sub = std::fs::metadata(d.path().join("sub")).unwrap();
        assert_eq!(
            sub.permissions().mode() & 0o7777,
            0o755,
            "{who:?}: the host's directory"
        );
        let link = std::fs::symlink_metadata(d.path().join("link")).unwrap();
        assert!(link.file_type().is_symlink(), "{who:?}: the host's symlink");
    }
}

/// A symlink already at a --file destination inside a writable bind is not followed: airlock
/// refuses the step (its descriptor is opened with O_NOFOLLOW) and the host file it names
/// keeps its content and mode. (bubblewrap writes through the link: no differential here.)
/// Control: the same line with a plain new name makes the file with --perms' mode.
#[test]
fn a_file_destination_that_is_a_symlink_is_refused_not_followed() {
    for who in BOTH {
        let d = host_tree(who, &[], &["f"], &[("flink", "f")]);
        let src = d.path().to_str().unwrap();
        let line = |dest: &'static str| {
            with(
                MIN,
                &["--bind", src, "/h", "--perms", "0777", "--file", "5", dest],
            )
        };
        let new = case(&line("/h/new"))
            .pre("exec 5< <(printf 'new\\n')")
            .sh("stat -c '%n %a' /h/new; cat /h/new");
        let a = new.run(Imp::Airlock, who);
        assert_eq!(
            (a.code, a.stdout.as_str()),
            (0, "/h/new 777\nnew\n"),
            "{}",
            a.show()
        );
        let planted = case(&line("/h/flink"))
            .pre("exec 5< <(printf 'new\\n')")
            .sh("echo task ran");
        let a = planted.run(Imp::Airlock, who);
        assert_ne!(a.code, 0, "{who:?}: {}", a.show());
        assert!(!a.stdout.contains("task ran"), "{who:?}: {}", a.show());
        assert_eq!(
            std::fs::read(d.path().join("f")).unwrap(),
            b"old\n",
            "{who:?}"
        );
        let f = std::fs::metadata(d.path().join("f")).unwrap();
        assert_eq!(
            f.permissions().mode() & 0o7777,
            0o644,
            "{who:?}: the host's file"
        );
    }
}

/// A file bound (`--ro-bind FILE`, `--bind-data`) onto a dangling symlink in a writable bind.
/// bubblewrap follows the link: for a relative target it makes the missing file (0444) in the
/// host directory and mounts there; for an absolute one it makes it outside the new root, so
/// the mount is lost and the path stays dangling (exit 0 all the same). airlock covers the
/// link itself, as for a link that names a file: the path shows the bound content in both
/// cases and the host directory is left as it was. (Until this test airlock refused both
/// with "Can't create file at ...: File exists".)
#[test]
fn a_file_bound_onto_a_dangling_symlink_covers_the_link() {
    for who in BOTH {
        let rel = |imp: Imp| {
            let d = host_tree(who, &[], &["f"], &[("link", "nope")]);
            let src = d.path().to_str().unwrap().to_string();
            let f = format!("{src}/f");
            let args = with(MIN, &["--bind", &src, "/h", "--ro-bind", &f, "/h/link"]);
            let r = case(&args).sh("cat /h/link").run(imp, who);
            let left = d.path().join("nope");
            (r, left.exists(), d.path().join("link").is_symlink())
        };
        let (b, b_made, _) = rel(Imp::Bubblewrap);
        let (a, a_made, a_link) = rel(Imp::Airlock);
        assert_eq!((b.code, b.stdout.as_str()), (0, "old\n"), "{}", b.show());
        assert_eq!((a.code, a.stdout.as_str()), (0, "old\n"), "{}", a.show());
        assert!(
            b_made,
            "{who:?}: bubblewrap makes the link's target on the host"
        );
        assert!(
            !a_made && a_link,
            "{who:?}: airlock leaves the host directory as it was"
        );

        let abs = |imp: Imp| {
            let d = host_tree(who, &[], &[], &[("link", "/nowhere")]);
            let src = d.path().to_str().unwrap().to_string();
            let args = with(MIN, &["--bind", &src, "/h", "--bind-data", "5", "/h/link"]);
            let c = case(&args)
                .pre("exec 5< <(printf 'new\\n')")
                .sh("cat /h/link || echo lost");
            (c.run(imp, who), d.path().join("link").is_symlink())
        };
        let (b, _) = abs(Imp::Bubblewrap);
        let (a, a_link) = abs(Imp::Airlock);
        assert_eq!((b.code, b.stdout.as_str()), (0, "lost\n"), "{}", b.show());
        assert_eq!((a.code, a.stdout.as_str()), (0, "new\n"), "{}", a.show());
        assert!(a_link, "{who:?}: the host's link is left as it was");
    }
}

/// A directory bound onto a symlink: where the link leads nowhere in bubblewrap's view (a
/// dangling link, or an absolute one, which bubblewrap follows outside the sandbox being
/// built) both fail word for word as bubblewrap's mount(2) does (`Can't bind mount /oldroot/SRC
/// on /newroot/DEST: Unable to mount source on destination: No such file or directory`), where
/// airlock had said `Can't mkdir /y: Not a directory`, or named its own move_mount for the
/// form with a trailing `/`. A relative link to a directory, which bubblewrap follows and
/// airlock refuses on purpose, is refused in the same words (ELOOP), not as a bare
/// `move_mount(<tree>, "/y"): Invalid argument`.
#[test]
fn a_directory_bound_onto_a_symlink_fails_in_bubblewraps_words() {
    let fails = |dest: &str| {
        format!(
            "bwrap: Can't bind mount /oldroot/usr/share on /newroot{dest}: Unable to mount source \
             on destination: No such file or directory\n"
        )
    };
    let lines: [(&[&str], String); 4] = [
        (
            &["--symlink", "nope", "/y", "--ro-bind", "/usr/share", "/y"],
            fails("/y"),
        ),
        (
            &["--symlink", "/nope", "/y", "--ro-bind", "/usr/share", "/y"],
            fails("/y"),
        ),
        (
            &[
                "--dir",
                "/t",
                "--symlink",
                "/t",
                "/y",
                "--ro-bind",
                "/usr/share",
                "/y",
            ],
            fails("/y"),
        ),
        (
            &["--symlink", "nope", "/y", "--ro-bind", "/usr/share", "/y/"],
            fails("/y/"),
        ),
    ];
    let mut wrong = vec![];
    for who in BOTH {
        for (opts, says) in &lines {
            let c = case(&with(&with(MIN, opts), &["echo", "ran"]));
            let (b, differs) = word_for_word(&c, who);
            assert_eq!((b.code, &b.stderr), (1, says), "{}", b.show());
            wrong.extend(differs);
        }
        let c = case(&with(
            MIN,
            &[
                "--dir",
                "/t",
                "--symlink",
                "t",
                "/y",
                "--ro-bind",
                "/usr/share",
                "/y",
            ],
        ))
        .sh("echo ran");
        let [b, a] = c.run_all(who);
        assert_eq!((b.code, b.stdout.as_str()), (0, "ran\n"), "{}", b.show());
        assert_eq!(
            (a.code, a.stderr.as_str()),
            (
                1,
                "bwrap: Can't bind mount /oldroot/usr/share on /newroot/y: Unable to mount \
                 source on destination: Too many levels of symbolic links\n"
            ),
            "{}",
            a.show()
        );
    }
    assert!(wrong.is_empty(), "differs:\n{}", wrong.join("\n"));
}

/// --dir onto a symlink already there: a link that leads to a directory or to nothing is left
/// as it is, a link to a file is "Not a directory", word for word as bubblewrap reports it
/// (airlock accepted it before, leaving a file where a directory was asked for).
#[test]
fn dir_onto_a_symlink_to_a_file_is_not_a_directory() {
    for who in BOTH {
        let d = host_tree(who, &["sub"], &["f"], &[("lf", "f"), ("dang", "nope")]);
        let src = d.path().to_str().unwrap();
        let file = case(&with(MIN, &["--bind", src, "/h", "--dir", "/h/lf"])).sh("echo ran");
        let [b, _] = same(&file, who);
        assert_eq!(
            (b.code, b.stdout.as_str(), b.stderr.as_str()),
            (1, "", "bwrap: Can't mkdir /h/lf: Not a directory\n"),
            "{}",
            b.show()
        );
        let dangling = case(&with(MIN, &["--bind", src, "/h", "--dir", "/h/dang"]))
            .sh("readlink /h/dang; test -e /h/dang || echo dangling");
        let [b, _] = same(&dangling, who);
        assert_eq!(
            (b.code, b.stdout.as_str()),
            (0, "nope\ndangling\n"),
            "{}",
            b.show()
        );
        let f = std::fs::symlink_metadata(d.path().join("f")).unwrap();
        assert!(f.is_file(), "{who:?}: the host's file");
    }
}

/// --remount-ro makes the mount nodev (and nosuid) as well as read-only, as bubblewrap's does:
/// after `--dev-bind /dev /dev --remount-ro /dev` the host's device nodes there can no longer
/// be opened, and mountinfo shows `ro,nosuid,nodev`. (airlock kept device access before, so a
/// line that relied on it to shut devices off left them open.)
#[test]
fn remount_ro_also_makes_the_mount_nodev() {
    let probe = format!(
        "if (echo x > /dev/null) 2>&-; then echo wrote; else echo refused; fi\n{}",
        mounts(&["/dev"])
    );
    for who in BOTH {
        let args = with(
            MIN,
            &[
                "--unshare-pid",
                "--proc",
                "/proc",
                "--dev-bind",
                "/dev",
                "/dev",
                "--remount-ro",
                "/dev",
            ],
        );
        let [b, _] = same(&case(&args).sh(&probe), who);
        assert_eq!(
            normalise(&b.stdout),
            "refused\n## mounts\n/dev ro,nosuid,nodev\n",
            "{}",
            b.show()
        );
    }
}

/// bubblewrap reads the words of an --args descriptor as options only: the first word that
/// is not one (an empty word, `--`, a command) ends them, the descriptor's remaining words
/// unread, and the caller's own arguments go on; an option there takes its values from the
/// descriptor alone. airlock had spliced the words into the command line: a stray empty word
/// (a generated list's missing option) became the command (`execvp : No such file or
/// directory`), a command in the descriptor ran in place of the caller's, and an option's
/// value was taken from the caller's arguments.
#[test]
fn args_descriptor_words_are_options_only() {
    let probe = "echo \"X=$X Z=$Z caller\"";
    let cases: [(&str, &[&str]); 5] = [
        (r"--setenv\0X\0y\0\0--setenv\0Z\0z\0", &["sh", "-c", probe]),
        (r"--setenv\0X\0y\0sh\0-c\0echo file\0", &["sh", "-c", probe]),
        (
            r"--\0--setenv\0Z\0z\0",
            &["--setenv", "X", "x", "sh", "-c", probe],
        ),
        (r"--setenv\0X\0", &["y", "sh", "-c", probe]),
        (r"--chdir\0", &["/usr", "sh", "-c", probe]),
    ];
    let want = [
        ("X=y Z= caller\n", ""),
        ("X=y Z= caller\n", ""),
        ("X=x Z= caller\n", ""),
        ("", "bwrap: --setenv takes two arguments\n"),
        ("", "bwrap: --chdir takes one argument\n"),
    ];
    for who in BOTH {
        for ((file, tail), (out, err)) in cases.iter().zip(want) {
            let c = case(&with(&["--ro-bind", "/", "/", "--args", "5"], tail))
                .pre(&format!("exec 5< <(printf -- '{file}')"));
            let [b, _] = same(&c, who);
            assert_eq!((b.stdout.as_str(), b.stderr.as_str()), (out, err), "{file}");
        }
    }
}

/// A script that starts the launcher (`$BW "$@"`) with `--info-fd 8`, reads the info to its
/// end, and runs the Python lines `then` with the launcher `p` and the info's child-pid `pid`.
fn child_pid_script(then: &str) -> String {
    format!(
        r#"{PYTHON} - "$BW" "$@" <<'EOF'
import json, os, signal, subprocess, sys, time
r, w = os.pipe()
os.dup2(w, 8)
os.close(w)
p = subprocess.Popen(sys.argv[1].split() + ["--info-fd", "8"] + sys.argv[2:], pass_fds=(8,))
os.close(8)
info = b""
while chunk := os.read(r, 4096):
    info += chunk
pid = json.loads(info)["child-pid"]
{then}
EOF"#
    )
}

/// A signal sent to the `child-pid` of --info-fd. Without a pid namespace bubblewrap's pid is
/// the task itself, which the signal ends (143 for SIGTERM, 138 for SIGUSR1); airlock's is
/// its init, which has left the caller's process group and passes the signal on to the task
/// (it used to pass none on, and the task ran to its end). With --unshare-pid both pids are a
/// pid 1 that passes nothing on, and the task runs to its end.
#[test]
fn sigterm_to_the_info_fd_child_pid() {
    for (sig, ended) in [("SIGTERM", "exit 143\n"), ("SIGUSR1", "exit 138\n")] {
        let script = child_pid_script(&format!(
            "time.sleep(0.2)\nos.kill(pid, signal.{sig})\nprint(\"exit\", p.wait())"
        ));
        for who in BOTH {
            for (set, want) in [(&[][..], ended), (&["--unshare-pid"][..], "exit 0\n")] {
                let c = case(&with(
                    &with(&["--ro-bind", "/", "/"], set),
                    &["sleep", "0.8"],
                ))
                .script(&script);
                let [b, a] = c.run_all(who);
                assert_eq!(b.stdout, want, "{sig} as {who:?} {set:?}: {}", b.show());
                assert_eq!(a.stdout, want, "{sig} as {who:?} {set:?}: {}", a.show());
            }
        }
    }
}

/// The other signals a program handles, sent to the `child-pid` of --info-fd without a pid
/// namespace: bubblewrap's is the task, which traps each; airlock's init passes them on as
/// they came. It had passed none of them on: SIGTSTP, SIGTTIN and SIGTTOU stopped the init
/// (the task ran on, and the launcher would wait at its end for a SIGCONT), and the others
/// did nothing (a review).
#[test]
fn other_signals_to_the_info_fd_child_pid_reach_the_task() {
    let signals = ["TSTP", "TTIN", "TTOU", "CONT", "WINCH", "URG", "PIPE"];
    // The task says when its traps are set, and waits (at most 20 s) until every signal has
    // been sent: nothing here hangs on a loaded host's timing.
    let task = format!(
        "for s in {}; do trap \"echo got $s\" $s; done; touch \"$D/ready\"; i=0; \
         while [ ! -e \"$D/sent\" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        signals.join(" ")
    );
    let script = child_pid_script(&format!(
        r#"d = os.environ["D"]
for _ in range(400):
    if os.path.exists(d + "/ready"):
        break
    time.sleep(0.05)
for s in "{}".split():
    os.kill(pid, getattr(signal, "SIG" + s))
    time.sleep(0.1)
open(d + "/sent", "w").close()
print("exit", p.wait())"#,
        signals.join(" ")
    ));
    // A shell runs traps that were pending together in signal-number order: sorted lines.
    let lines = |out: &str| {
        let mut l: Vec<String> = out.lines().map(String::from).collect();
        l.sort();
        l
    };
    let mut want: Vec<String> = signals.iter().map(|s| format!("got {s}")).collect();
    want.push("exit 0".into());
    want.sort();
    for who in BOTH {
        let dir = tmpdir(0o777);
        let d = dir.path().display().to_string();
        let c = case(&["--ro-bind", "/", "/", "--bind", &d, &d, "bash", "-c", &task])
            .env("D", &d)
            .script(&script);
        for imp in IMPS {
            for f in ["ready", "sent"] {
                let _ = std::fs::remove_file(dir.path().join(f));
            }
            let r = c.run(imp, who);
            assert_eq!(lines(&r.stdout), want, "{imp:?} as {who:?}: {}", r.show());
        }
    }
}

/// --perms' setuid and setgid bits on a file written from a descriptor (--file,
/// --ro-bind-data): bubblewrap gives the file its mode, then writes, so an unprivileged
/// caller's write clears the setuid bit and, on a group-executable file, the setgid bit (as
/// the kernel does for a writer without CAP_FSETID); root's keep them, and so does an empty
/// file. airlock wrote first and set the mode after: uid 65534's 04755 file read 4755 where
/// bubblewrap's read 755, until a review.
#[test]
fn perms_setid_bits_on_written_files_follow_bubblewrap() {
    let mut extra: Vec<String> = Vec::new();
    let mut fd = 3;
    for perms in ["04755", "02755", "07777", "02745"] {
        for (opt, dest) in [("--file", "/f"), ("--ro-bind-data", "/d")] {
            extra.extend(
                [
                    "--perms",
                    perms,
                    opt,
                    &fd.to_string(),
                    &format!("{dest}{fd}"),
                ]
                .map(String::from),
            );
            fd += 1;
        }
    }
    extra.extend(["--perms", "06755", "--file", "11", "/empty"].map(String::from));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let probe = "stat -c '%n %a' /f3 /d4 /f5 /d6 /f7 /d8 /f9 /d10 /empty";
    let pre = "exec 3<<<hi 4<<<hi 5<<<hi 6<<<hi 7<<<hi 8<<<hi 9<<<hi 10<<<hi 11</dev/null";
    for who in BOTH {
        let c = case(&with(MIN, &extra)).pre(pre).sh(probe);
        let [b, _] = same(&c, who);
        let want = match who {
            Launcher::Root => {
                "/f3 4755\n/d4 4755\n/f5 2755\n/d6 2755\n/f7 7777\n/d8 7777\n\
                               /f9 2745\n/d10 2745\n/empty 6755\n"
            }
            Launcher::Unprivileged => {
                "/f3 755\n/d4 755\n/f5 755\n/d6 755\n/f7 1777\n\
                                       /d8 1777\n/f9 2745\n/d10 2745\n/empty 6755\n"
            }
        };
        assert_eq!(b.stdout, want, "{who:?}: {}", b.show());
    }
}

/// --level-prefix is read where bubblewrap (0.9 and later; 0.8 lacks it) reads it, among the
/// options: the messages after it carry their syslog level, `<4>` the warning that only the
/// last --chdir counts, `<3>` an error. In the command's own arguments it is the command's
/// word, and prefixes nothing: the differential half, where bubblewrap 0.8 takes it as the
/// task's too. airlock had looked for it in every argument (an `echo --level-prefix` task's
/// failure came out as `<3>bwrap: ...`) and printed the warning without its level, until a
/// review.
#[test]
fn level_prefix_is_read_among_the_options() {
    for who in BOTH {
        let missing = case(&[
            "--ro-bind",
            "/no-such-src",
            "/x",
            "--",
            "echo",
            "--level-prefix",
        ]);
        let [_, a] = same(&missing, who);
        assert!(a.stderr.starts_with("bwrap: Can't find"), "{}", a.show());

        let args = with(MIN, &["--level-prefix", "--chdir", "/", "--chdir", "/usr"]);
        let a = case(&args)
            .arg(&["--", "/no/such/command"])
            .run(Imp::Airlock, who);
        assert_eq!(
            a.stderr,
            "<4>bwrap: Only the last --chdir option will take effect\n\
             <3>bwrap: execvp /no/such/command: No such file or directory\n",
            "{who:?}: {}",
            a.show()
        );
    }
}
