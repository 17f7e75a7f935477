//! bwrap mode joining existing namespaces (--userns, --userns2, --pidns), compared with
//! Debian's bubblewrap on the same command line, as root and as uid 65534.

mod common;
use common::*;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process holding namespaces for the test (`unshare ... sleep N`), killed on drop.
struct Holder {
    child: Child,
    /// The pid of the process inside the namespaces (the sleep).
    pid: u32,
}

/// The pid of the process whose command line is `sleep MARKER`.
fn find_sleep(marker: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        (cmd == format!("sleep\0{marker}\0").as_bytes()).then_some(pid)
    })
}

impl Holder {
    fn new(who: Launcher, script: &str, marker: &str) -> Holder {
        let mut c = match who {
            Launcher::Root => Command::new("sh"),
            Launcher::Unprivileged => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh"]);
                c
            }
        };
        let mut child = c.args(["-c", script]).stdin(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(pid) = find_sleep(marker) {
                return Holder { child, pid };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("holder {marker} did not start");
    }

    fn parent(&self) -> u32 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `BWRAP ARGS -- sh -c SCRIPT` with fds 5 and 6 opened on `fd5`/`fd6`, as `who`.
fn run(
    who: Launcher,
    bwrap: &str,
    fd5: &str,
    fd6: &str,
    args: &str,
    script: &str,
) -> (i32, String) {
    let line = format!(
        "exec 5<{fd5} 6<{fd6}; exec {bwrap} {args} {} -- sh -c '{script}'",
        MIN_ROOT.join(" ")
    );
    let mut c = match who {
        Launcher::Root => Command::new("bash"),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
            c
        }
    };
    let o = c.args(["-c", &line]).stdin(Stdio::null()).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!("{}{}", stdout(&o), stderr(&o)),
    )
}

fn ours() -> String {
    format!("{} bwrap", binary().display())
}

fn same(who: Launcher, fd5: &str, fd6: &str, args: &str, script: &str) {
    let theirs = run(who, "/usr/bin/bwrap", fd5, fd6, args, script);
    let mine = run(who, &ours(), fd5, fd6, args, script);
    assert_eq!(mine, theirs, "{who:?}: {args}");
}

#[test]
fn joining_a_user_namespace_matches_bubblewrap() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("31.{i}1");
        let h = Holder::new(who, &format!("exec unshare -U -r sleep {m}"), &m);
        let ns = format!("/proc/{}/ns/user", h.pid);
        let script = "id -u; cat /proc/self/uid_map; echo pid $$; exit 5";
        same(
            who,
            &ns,
            &ns,
            "--userns 5 --unshare-pid --unshare-net --proc /proc",
            script,
        );
        same(
            who,
            &ns,
            &ns,
            "--userns 5 --uid 7 --unshare-pid --proc /proc",
            "id -u",
        );
        // Refused combinations, with bubblewrap's exit status.
        let (code, text) = run(who, &ours(), &ns, &ns, "--userns 5 --unshare-user", "true");
        assert_eq!(code, 1, "{text}");
        assert!(text.contains("mutually exclusive"), "{text}");
    }
}

#[test]
fn joining_a_pid_namespace_matches_bubblewrap() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("32.{i}1");
        let h = Holder::new(who, &format!("exec unshare -U -r -p -f sleep {m}"), &m);
        let (user, pid) = (
            format!("/proc/{}/ns/user", h.pid),
            format!("/proc/{}/ns/pid", h.pid),
        );
        // Nested: a new pid namespace inside the joined one. The listing is taken while only
        // the init, sh and ls run (in a pipeline, grep may or may not exist yet).
        same(
            who,
            &user,
            &pid,
            "--userns 5 --pidns 6 --unshare-pid --proc /proc",
            "echo pid $$; p=$(ls /proc); echo \"$p\" | grep -c \"^[0-9]*$\"",
        );
        // Joined as is: the holder's processes are visible.
        let script = "ls /proc | grep -qx 1 && echo sees-holder";
        let (code, text) = run(
            who,
            &ours(),
            &user,
            &pid,
            "--userns 5 --pidns 6 --proc /proc",
            script,
        );
        assert_eq!((code, text.as_str()), (0, "sees-holder\n"));
    }
}

#[test]
fn switching_to_a_second_user_namespace_matches_bubblewrap() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("33.{i}1");
        let h = Holder::new(
            who,
            &format!(
                "exec unshare -U -r sh -c 'exec unshare -U --map-user=5 --map-group=5 sleep {m}'"
            ),
            &m,
        );
        let outer = format!("/proc/{}/ns/user", h.parent());
        let inner = format!("/proc/{}/ns/user", h.pid);
        same(
            who,
            &outer,
            &inner,
            "--userns 5 --userns2 6 --unshare-pid --proc /proc",
            "id -u; cat /proc/self/uid_map",
        );
        let (code, text) = run(who, &ours(), &outer, &inner, "--userns2 6", "true");
        assert_eq!(code, 1, "{text}");
        assert!(text.contains("--userns2 requires --userns"), "{text}");
    }
}
