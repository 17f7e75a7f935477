//! bwrap mode's overlay options (bubblewrap 0.10+; Debian's 0.8 has none, so these assert
//! bubblewrap's documented semantics rather than compare with it), as root and as uid 65534.

mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

const BASE: &[&str] = MIN_ROOT;

struct Layers {
    dir: tempfile::TempDir,
}

impl Layers {
    fn new() -> Layers {
        let dir = tempfile::Builder::new()
            .prefix("airlock-overlay")
            .tempdir_in("/var/tmp")
            .unwrap();
        for d in ["l1", "l2", "up", "work"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("l1/a"), "from l1\n").unwrap();
        std::fs::write(dir.path().join("l1/b"), "only in l1\n").unwrap();
        std::fs::write(dir.path().join("l2/a"), "from l2\n").unwrap();
        for d in ["", "l1", "l2", "up", "work", "l1/a", "l1/b", "l2/a"] {
            let p = dir.path().join(d);
            let mode = if p.is_dir() { 0o777 } else { 0o666 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        Layers { dir }
    }

    fn path(&self, p: &str) -> String {
        self.dir.path().join(p).display().to_string()
    }
}

fn bwrap(who: Launcher, args: &[String], script: &str) -> Output {
    let mut c = match who {
        Launcher::Root => Command::new(binary()),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(binary());
            c
        }
    };
    c.arg("bwrap")
        .args(BASE)
        .args(args)
        .args(["--", "sh", "-c", script]);
    c.stdin(Stdio::null()).output().unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn tmp_overlay_layers_sources_and_discards_writes() {
    for who in BOTH {
        let l = Layers::new();
        if who == Launcher::Unprivileged {
            // Copy-up keeps a file's owner, which must be mapped in the sandbox's user
            // namespace: for uid 65534, its own files (a root-owned one fails with EOVERFLOW,
            // from the kernel, as under bubblewrap).
            let st = Command::new("chown")
                .args(["-R", "65534:65534", &l.path("")])
                .status()
                .unwrap();
            assert!(st.success());
        }
        let args = strings(&[
            "--overlay-src",
            &l.path("l1"),
            "--overlay-src",
            &l.path("l2"),
            "--tmp-overlay",
            "/o",
        ]);
        let o = bwrap(
            who,
            &args,
            "cat /o/a /o/b; echo new > /o/c && cat /o/c; echo x > /o/a && cat /o/a",
        );
        // The last --overlay-src is the uppermost layer; writes land in an invisible tmpfs.
        assert_eq!(
            stdout(&o),
            "from l2\nonly in l1\nnew\nx\n",
            "{who:?}: {}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read_to_string(l.path("l2/a")).unwrap(),
            "from l2\n"
        );
        assert!(!std::path::Path::new(&l.path("l1/c")).exists());
        assert!(!std::path::Path::new(&l.path("l2/c")).exists());
    }
}

#[test]
fn ro_overlay_is_read_only_and_needs_two_sources() {
    for who in BOTH {
        let l = Layers::new();
        let args = strings(&[
            "--overlay-src",
            &l.path("l1"),
            "--overlay-src",
            &l.path("l2"),
            "--ro-overlay",
            "/o",
        ]);
        let o = bwrap(
            who,
            &args,
            "cat /o/a; echo x > /o/c 2>/dev/null && echo W || echo RO",
        );
        assert_eq!(stdout(&o), "from l2\nRO\n", "{who:?}: {}", stderr(&o));
        let args = strings(&["--overlay-src", &l.path("l1"), "--ro-overlay", "/o"]);
        let o = bwrap(who, &args, "true");
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stderr(&o).starts_with("bwrap: --ro-overlay requires at least two --overlay-src"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn overlay_with_a_host_upper_keeps_writes_there() {
    for who in BOTH {
        let l = Layers::new();
        let args = strings(&[
            "--overlay-src",
            &l.path("l1"),
            "--overlay",
            &l.path("up"),
            &l.path("work"),
            "/o",
        ]);
        let o = bwrap(who, &args, "cat /o/a; echo kept > /o/p");
        assert_eq!(stdout(&o), "from l1\n", "{who:?}: {}", stderr(&o));
        assert_eq!(std::fs::read_to_string(l.path("up/p")).unwrap(), "kept\n");
        assert!(!std::path::Path::new(&l.path("l1/p")).exists());
    }
}

/// An --overlay-src must be followed by another or by an overlay, as bubblewrap 0.10+ checks
/// once each option is done (its test suite's `--overlay-src /tmp --chdir /`): at the end of
/// the line, and before any other option (airlock checked only the end until a differential
/// review). Words an --args descriptor gives count as the --args option: they may finish the
/// overlay, and it must be finished when they end. Controls: the same lines with the overlay
/// right after its sources run.
#[test]
fn an_overlay_src_not_followed_by_an_overlay_is_refused() {
    let refused: &[(&[&str], &str)] = &[
        (&["--overlay-src", "/usr"], ""),
        (&["--overlay-src", "/usr", "--chdir", "/"], ""),
        (
            &[
                "--overlay-src",
                "/usr",
                "--setenv",
                "A",
                "b",
                "--tmp-overlay",
                "/mnt",
            ],
            "",
        ),
        (
            &[
                "--overlay-src",
                "/usr",
                "--perms",
                "0755",
                "--tmp-overlay",
                "/mnt",
            ],
            "",
        ),
        (
            &[
                "--overlay-src",
                "/usr",
                "--tmpfs",
                "/z",
                "--overlay-src",
                "/usr",
                "--ro-overlay",
                "/mnt",
            ],
            "",
        ),
        (
            &[
                "--overlay-src",
                "/usr",
                "--args",
                "0",
                "--tmp-overlay",
                "/mnt",
            ],
            "",
        ),
        (
            &["--args", "0", "--tmp-overlay", "/mnt"],
            "--overlay-src\0/usr\0",
        ),
        (&["--overlay-src", "/usr", "--args", "0"], "--chdir\0/\0"),
    ];
    let runs: &[(&[&str], &str)] = &[
        (
            &[
                "--chdir",
                "/",
                "--overlay-src",
                "/usr",
                "--tmp-overlay",
                "/mnt",
            ],
            "",
        ),
        (
            &["--overlay-src", "/usr", "--args", "0"],
            "--tmp-overlay\0/mnt\0",
        ),
    ];
    let run = |args: &[&str], words: &str| {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), words).unwrap();
        let o = Command::new(binary())
            .arg("bwrap")
            .args(BASE)
            .args(args)
            .args(["--", "true"])
            .stdin(std::fs::File::open(file.path()).unwrap())
            .output()
            .unwrap();
        (o.status.code(), stderr(&o))
    };
    let mut wrong = vec![];
    for &(args, words) in refused {
        let (code, err) = run(args, words);
        if code != Some(1) || !err.contains("bwrap: --overlay-src must be followed by another") {
            wrong.push(format!("{args:?} {words:?}: exit {code:?}, {err}"));
        }
    }
    for &(args, words) in runs {
        let (code, err) = run(args, words);
        if code != Some(0) {
            wrong.push(format!("control {args:?} {words:?}: exit {code:?}, {err}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
