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
        let child = c.args(["-c", script]).stdin(Stdio::null()).spawn().unwrap();
        Holder::started(child, marker)
    }

    /// Waits for `child` to run `sleep MARKER`.
    fn started(mut child: Child, marker: &str) -> Holder {
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

    /// A sleep as uid 5 of a user namespace nested in another, whose shell (the sleep's
    /// parent) stays in the outer one, so both can be joined through /proc.
    fn nested(who: Launcher, marker: &str) -> Holder {
        let script = format!(
            "exec unshare -U -r sh -c 'unshare -U --map-user=5 --map-group=5 sleep {marker}; :'"
        );
        Holder::new(who, &script, marker)
    }

    /// As root: a sleep in a user namespace that uid 65534 made inside one it made too, in
    /// which root wrote root's map (`0 0 1`, and uid 1 for 65534): namespaces whose owner is
    /// not the caller. Entering one clears the caller's parent-death signal.
    fn foreign(marker: &str) -> Holder {
        let script = format!(
            "until read l </proc/self/uid_map; do sleep 0.05; done; unshare -U sleep {marker}; :"
        );
        let child = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["unshare", "-U", "sh", "-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let ours = std::fs::read_link("/proc/self/ns/user").unwrap();
        let outer = format!("/proc/{}", child.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_link(format!("{outer}/ns/user")).ok().as_ref() == Some(&ours)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        for map in ["gid_map", "uid_map"] {
            std::fs::write(format!("{outer}/{map}"), "0 0 1\n1 65534 1\n").unwrap();
        }
        Holder::started(child, marker)
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

/// `bash -c LINE` as `who`, stdin from /dev/null.
fn bash_as(who: Launcher, line: &str) -> Command {
    let mut c = Command::new("env");
    c.args(as_user(who))
        .args(["bash", "-c", line])
        .stdin(Stdio::null());
    c
}

/// Whether `done` holds within 5 s (asked every 20 ms).
fn within_5s(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
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
        // The joined user namespace is the caller's own: its inotify caps are left as they are,
        // as bubblewrap leaves them (airlock caps only a user namespace it makes).
        let script = "id -u; cat /proc/self/uid_map; echo pid $$; \
                      cat /proc/sys/user/max_inotify_instances; exit 5";
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
        // Refused combinations, with bubblewrap's exit status and words.
        let (code, text) = run(who, &ours(), &ns, &ns, "--userns 5 --unshare-user", "true");
        assert_eq!(code, 1, "{text}");
        assert!(
            text.contains("--userns not compatible --unshare-user"),
            "{text}"
        );
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

/// --pidns without --userns: bubblewrap joins from inside the user namespace it has just
/// made, so the kernel refuses (its first line: "Setting pidns failed: Operation not
/// permitted"), for a line that unshares the user namespace and for every unprivileged
/// caller; only a root caller that made no user namespace joins. airlock used to join with
/// the launcher's credentials: `--unshare-user --pidns` of the host's pid namespace put the
/// task in it. Checked by the host's pid namespace of a sandbox's task and a holder's.
#[test]
fn joining_a_pid_namespace_from_a_new_user_namespace_is_refused_as_by_bubblewrap() {
    let denied = "bwrap: Setting pidns failed: Operation not permitted";
    let script = "readlink /proc/self/ns/pid";
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("32.{i}2");
        let h = Holder::new(who, &format!("exec unshare -U -r -p -f sleep {m}"), &m);
        let holder = format!("/proc/{}/ns/pid", h.pid);
        for target in [holder.as_str(), "/proc/self/ns/pid"] {
            let mut lines = vec!["--unshare-user --pidns 6", "--unshare-all --pidns 6"];
            if who == Launcher::Unprivileged {
                lines.push("--pidns 6");
            }
            for args in lines {
                for bwrap in ["/usr/bin/bwrap", &ours()] {
                    let (code, text) = run(who, bwrap, "/dev/null", target, args, script);
                    assert_eq!(code, 1, "{who:?} {bwrap} {args} {target}: {text}");
                    assert_eq!(
                        text.lines().next(),
                        Some(denied),
                        "{who:?} {bwrap} {args} {target}"
                    );
                }
            }
        }
        // A root caller without a user namespace joins, in both.
        if who == Launcher::Root {
            let want = std::fs::read_link(&holder).unwrap();
            for bwrap in ["/usr/bin/bwrap", &ours()] {
                let args = "--pidns 6 --ro-bind /proc /proc";
                let (code, text) = run(who, bwrap, "/dev/null", &holder, args, script);
                assert_eq!((code, text.trim()), (0, want.to_str().unwrap()), "{bwrap}");
            }
        }
    }
}

#[test]
fn switching_to_a_second_user_namespace_matches_bubblewrap() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("33.{i}1");
        let h = Holder::nested(who, &m);
        let outer = format!("/proc/{}/ns/user", h.parent());
        let inner = format!("/proc/{}/ns/user", h.pid);
        let args = "--userns 5 --userns2 6 --unshare-pid --proc /proc";
        let script = "id -u; cat /proc/self/uid_map";
        same(who, &outer, &inner, args, script);
        // Joining the second namespace fills the init's bounding set again (setns gives a
        // full set): the task's is empty all the same. (bubblewrap 0.8 empties it before the
        // join and leaves the task a full one.)
        let caps = "grep -E \"^Cap(Bnd|Eff|Prm)\" /proc/self/status";
        let (code, text) = run(who, &ours(), &outer, &inner, args, caps);
        assert_eq!(
            text.matches(":\t0000000000000000").count(),
            3,
            "{who:?}: {text}"
        );
        assert_eq!(code, 0, "{text}");
        // Not a shared failure: the task runs as uid 5 of the second namespace.
        let (code, text) = run(who, &ours(), &outer, &inner, args, script);
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!((code, words), (0, vec!["5", "5", "0", "1"]), "{who:?}");
        let (code, text) = run(who, &ours(), &outer, &inner, "--userns2 6", "true");
        assert_eq!(code, 1, "{text}");
        assert!(text.contains("--userns2 requires --userns"), "{text}");
    }
}

/// --userns2 switches the sandbox's init to a second user namespace at step 12, a change of
/// credentials (which may clear a parent-death signal): the sandbox must still die with airlock.
/// airlock is killed (SIGKILL) while its task sleeps; the task must be gone soon after.
#[test]
fn a_sandbox_switched_to_a_second_user_namespace_dies_with_airlock() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("34.{i}1");
        let h = Holder::nested(who, &m);
        dies_with_airlock(who, &h, "--userns 5 --userns2 6", &format!("35.{i}1"));
    }
}

/// Entering a user namespace whose owner is not the caller (root joining a user's) clears
/// PR_SET_PDEATHSIG; airlock sets it again after each (a review found the init and task
/// running on, unsupervised, as host root, once the launcher was killed). bubblewrap, whose
/// --die-with-parent is set before it joins, leaves them running too.
#[test]
fn a_sandbox_in_a_user_namespace_of_another_owner_dies_with_airlock() {
    for (i, args) in ["--userns 5", "--userns 5 --userns2 6"]
        .into_iter()
        .enumerate()
    {
        let h = Holder::foreign(&format!("34.{i}2"));
        dies_with_airlock(Launcher::Root, &h, args, &format!("35.{i}2"));
    }
}

/// Runs `sleep TASK` in airlock's bwrap mode as `who` with fds 5 and 6 on the user
/// namespaces of `h`'s outer shell and its sleep, kills airlock once the task runs, and
/// requires the task gone within 5 s.
fn dies_with_airlock(who: Launcher, h: &Holder, args: &str, task: &str) {
    let line = format!(
        "exec 5</proc/{}/ns/user 6</proc/{}/ns/user; exec {} {args} \
         --unshare-pid --proc /proc {} -- sleep {task}",
        h.parent(),
        h.pid,
        ours(),
        MIN_ROOT.join(" ")
    );
    let mut airlock = bash_as(who, &line).spawn().unwrap();
    let started = within_5s(|| find_sleep(task).is_some());
    airlock.kill().unwrap();
    let _ = airlock.wait();
    assert!(started, "{who:?}: the task did not start");
    within_5s(|| find_sleep(task).is_none());
    let left = find_sleep(task);
    if let Some(pid) = left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert_eq!(left, None, "{who:?}: the task outlived airlock");
}

/// --pidns as root without a user namespace, as bubblewrap runs it: airlock's sandbox still
/// has its own (identity-mapped) user namespace, which has no capability over the joined pid
/// namespace (the host's user namespace owns it), so it could not mount that namespace's proc
/// ("Can't mount proc on /newroot/proc: Operation not permitted"); and its launcher, having
/// joined with setns, could not make a new pid namespace inside it for --unshare-pid
/// ("Creating new namespace failed: Invalid argument"). Every line is bounded by `timeout`.
#[test]
fn joining_a_pid_namespace_as_root_without_a_user_namespace_matches_bubblewrap() {
    let who = Launcher::Root;
    let m = "36.01";
    let h = Holder::new(
        who,
        &format!("exec unshare -p -f --mount-proc sleep {m}"),
        m,
    );
    let holder = format!("/proc/{}/ns/pid", h.pid);
    let id = std::fs::read_link(&holder).unwrap();
    let id = id.to_str().unwrap();
    let (theirs, mine) = (
        "timeout 20 /usr/bin/bwrap",
        format!("timeout 20 {}", ours()),
    );
    // Joined as is: the proc is the holder's namespace's (its pid 1 is the holder's sleep).
    let joined = "readlink /proc/self/ns/pid; tr \"\\0\" \" \" </proc/1/cmdline; echo; \
                  grep -c \"^[0-9]* [0-9]* [0-9:]* / /proc rw,nosuid,nodev,noexec.* - proc proc \" \
                  /proc/self/mountinfo";
    let want = format!("{id}\nsleep {m} \n1\n");
    // Nested: a new pid namespace inside the joined one (not the holder's), whose proc shows
    // only the sandbox (its init, sh and ls).
    let nested = format!(
        "echo pid $$; [ \"$(readlink /proc/self/ns/pid)\" != \"{id}\" ] && echo new; \
         p=$(ls /proc); echo \"$p\" | grep -c \"^[0-9]*$\""
    );
    for (args, script, want) in [
        ("--pidns 6 --proc /proc", joined, Some(want.as_str())),
        ("--pidns 6 --proc /proc --dev /dev", joined, Some(&want)),
        ("--pidns 6 --unshare-pid", &nested, None),
        ("--pidns 6 --unshare-pid --proc /proc", &nested, None),
        (
            "--pidns 6 --unshare-pid --unshare-net --proc /proc --dev /dev",
            &nested,
            None,
        ),
    ] {
        let t = run(who, theirs, "/dev/null", &holder, args, script);
        let o = run(who, &mine, "/dev/null", &holder, args, script);
        assert_eq!(o, t, "{args}");
        if let Some(want) = want {
            assert_eq!(o, (0, want.to_string()), "{args}");
        }
    }
    // The nested namespace's pid 1 is airlock's init, a child of airlock (not of the first
    // child that made it, which is gone).
    let script = "echo pid $$; cat /proc/1/comm";
    let o = run(
        who,
        &mine,
        "/dev/null",
        &holder,
        "--pidns 6 --unshare-pid --proc /proc",
        script,
    );
    assert_eq!(o, (0, "pid 2\nairlock\n".to_string()));
    // The root caller's proc keeps the host's kernel-wide knobs read-only, as any other.
    let script = "grep -c \" /proc/sys ro,\" /proc/self/mountinfo";
    let o = run(
        who,
        &mine,
        "/dev/null",
        &holder,
        "--pidns 6 --proc /proc",
        script,
    );
    assert_eq!(o, (0, "1\n".to_string()));
}

/// --pidns as root of a pid namespace whose last process has ended: the kernel lets no new
/// process in, and bubblewrap's fork there fails first ("Can't fork for --pidns: Cannot
/// allocate memory"). airlock failed with its clone's words, or its proc helper's.
#[test]
fn joining_an_ended_pid_namespace_fails_as_in_bubblewrap() {
    let first = "bwrap: Can't fork for --pidns: Cannot allocate memory";
    for args in [
        "--pidns 6",
        "--pidns 6 --proc /proc",
        "--pidns 6 --unshare-pid --proc /proc",
    ] {
        for bwrap in ["/usr/bin/bwrap".to_string(), ours()] {
            // The holder's sleep is its pid namespace's only process: once it is killed and
            // reaped, the descriptor still names the namespace, which has ended.
            let line = format!(
                "unshare -p -f sleep 36.02 2>/dev/null & h=$!; for i in $(seq 100); do \
                 p=$(pgrep -P $h) && break; sleep 0.05; done; exec 6</proc/$p/ns/pid; \
                 kill -9 $p; wait $h; exec timeout 20 {bwrap} {args} {} -- true",
                MIN_ROOT.join(" ")
            );
            let o = Command::new("bash")
                .args(["-c", &line])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(1), "{bwrap} {args}");
            assert_eq!(stderr(&o).lines().next(), Some(first), "{bwrap} {args}");
        }
    }
}

/// --info-fd and --json-status-fd with --userns: the namespaces named are the sandbox's, as
/// the task reads them in /proc/self/ns, with bubblewrap as with airlock. airlock's launcher
/// used to read them from its child as soon as it existed, before that child had joined the
/// user namespace and made the others: it named the caller's own.
#[test]
fn the_status_fds_name_the_namespaces_made_in_a_joined_user_namespace() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("37.{i}1");
        let h = Holder::new(who, &format!("exec unshare -U -r sleep {m}"), &m);
        for bwrap in ["/usr/bin/bwrap".to_string(), ours()] {
            let info = format!("/tmp/airlock-test-info-{}-{i}", std::process::id());
            let json = format!("{info}.json");
            let line = format!(
                "exec 5</proc/{}/ns/user 7>{info} 8>{json}; exec timeout 20 {bwrap} --userns 5 \
                 --info-fd 7 --json-status-fd 8 --unshare-pid --unshare-net --unshare-ipc \
                 --unshare-uts --unshare-cgroup --proc /proc {} -- sh -c 'for n in cgroup ipc \
                 mnt net pid uts; do echo \"$n-namespace\": $(stat -Lc %i /proc/self/ns/$n); done'",
                h.pid,
                MIN_ROOT.join(" ")
            );
            let o = bash_as(who, &line).output().unwrap();
            let (info_text, json_text) = (
                std::fs::read_to_string(&info).unwrap_or_default(),
                std::fs::read_to_string(&json).unwrap_or_default(),
            );
            let _ = std::fs::remove_file(&info);
            let _ = std::fs::remove_file(&json);
            assert_eq!(o.status.code(), Some(0), "{who:?} {bwrap}: {}", stderr(&o));
            let task: Vec<(String, String)> = stdout(&o)
                .lines()
                .filter_map(|l| l.split_once(": "))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(task.len(), 6, "{who:?} {bwrap}: {}", stdout(&o));
            for (k, v) in &task {
                let field = format!("\"{k}\": {v}");
                assert!(
                    info_text.contains(&field),
                    "{who:?} {bwrap}: {field} in {info_text}"
                );
                assert!(
                    json_text.contains(&field),
                    "{who:?} {bwrap}: {field} in {json_text}"
                );
            }
        }
    }
}

/// With --userns and no pid namespace, --info-fd's child-pid is bubblewrap's task, so SIGTERM
/// to it ends the task (and bwrap with 143). airlock's child-pid is its init, which passes the
/// signal on; it used to be the first process (which made the namespaces and waits for the
/// init), which passed nothing on: the task slept on.
#[test]
fn sigterm_to_the_child_pid_of_a_joined_user_namespace_ends_the_task() {
    for (i, who) in BOTH.into_iter().enumerate() {
        let m = format!("38.{i}1");
        let h = Holder::new(who, &format!("exec unshare -U -r sleep {m}"), &m);
        for bwrap in ["/usr/bin/bwrap".to_string(), ours()] {
            let info = format!("/tmp/airlock-test-sig-{}-{i}", std::process::id());
            let line = format!(
                "exec 5</proc/{}/ns/user 7>{info}; exec timeout -s KILL 20 {bwrap} --userns 5 \
                 --info-fd 7 {} -- sleep 38.{i}2",
                h.pid,
                MIN_ROOT.join(" ")
            );
            let mut child = bash_as(who, &line).spawn().unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut pid = None;
            while pid.is_none() && Instant::now() < deadline {
                pid = std::fs::read_to_string(&info).ok().and_then(|t| {
                    let rest = t.split("\"child-pid\": ").nth(1)?;
                    rest.split(|c: char| !c.is_ascii_digit())
                        .next()?
                        .parse::<u32>()
                        .ok()
                });
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::fs::remove_file(&info);
            let Some(pid) = pid else {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{who:?} {bwrap}: no child-pid");
            };
            // The task may still be on its way to exec: the signal ends it either way.
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(143), "{who:?} {bwrap}");
        }
    }
}

/// With --userns and --info-fd, the launcher names the init from the pidfd the init sends
/// once it is in its namespaces. A pidfd message that cannot be read (EIO injected by strace
/// into the launcher's first recvmsg, which is that message) ends the run before the task,
/// as a setup step's failure (bwrap mode: exit 1), where it used to go on with no info
/// document. The control: the same line without the injection runs the task.
#[test]
fn an_unreadable_pidfd_from_a_joined_init_ends_the_run_before_its_task() {
    let m = "39.01";
    let h = Holder::new(Launcher::Root, &format!("exec unshare -U -r sleep {m}"), m);
    for inject in [false, true] {
        let strace = match inject {
            true => "strace -o /dev/null -e trace=recvmsg -e inject=recvmsg:error=EIO:when=1",
            false => "",
        };
        let line = format!(
            "exec 5</proc/{}/ns/user 7>/dev/null; exec timeout 20 {strace} {} --userns 5 \
             --info-fd 7 --ro-bind / / -- echo task ran",
            h.pid,
            ours()
        );
        let o = Command::new("bash")
            .args(["-c", &line])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let (code, out, err) = (o.status.code(), stdout(&o), stderr(&o));
        match inject {
            false => assert_eq!((code, out.as_str()), (Some(0), "task ran\n"), "{err}"),
            true => {
                assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
                assert!(
                    err.contains(
                        "read the init's pid: recvmsg(<channel>, <the init's pidfd>): EIO"
                    ),
                    "{err}"
                );
            }
        }
    }
}
