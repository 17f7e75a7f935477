//! `airlock explain`: print, without running anything, the boundary `airlock run` would build
//! for the same options. It reads the Spec and the same tables the boundary uses, so what it
//! prints cannot drift from what runs.

use std::fmt::Write as _;

use serde_json::Value;

use crate::audit::one_line;
use crate::boundary::{DEV_LINKS, DEVICES, etc_from_host, hosts_sources};
use crate::spec::SYSTEM_PATHS;
use crate::spec::{Output, SANDBOX_GID, SANDBOX_UID, SCRATCH, Spec};

const POLICY_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/seccomp/",
    env!("AIRLOCK_ARCH"),
    ".json"
));

/// Group ids with this host's names, `42 (shadow) 100 (users)`.
fn group_names(gids: &[u32]) -> String {
    let named = gids.iter().map(|&g| match crate::audit::group_name(g) {
        Some(name) => format!("{g} ({})", one_line(&name)),
        None => g.to_string(),
    });
    named.collect::<Vec<_>>().join(" ")
}

/// What `spec` builds, for a caller whose effective ids are `caller_uid` and `caller_gid`.
pub fn explain(spec: &Spec, caller_uid: u32, caller_gid: u32) -> String {
    let caller_is_root = caller_uid == 0;
    let task_ids = spec.task_host_ids(caller_uid, caller_gid);
    let mut s = String::new();
    let w = &mut s;
    // An unprivileged caller's task keeps the caller's gid and supplementary groups on the
    // host: a user namespace's process may not drop them (setgroups is denied there), and
    // inside they show as the overflow gid (the explain review: "no supplementary groups"
    // was said of a caller in `shadow`, whose task read /etc/shadow).
    let caller_groups: Vec<u32> = match caller_is_root {
        true => Vec::new(),
        false => nix::unistd::getgroups()
            .unwrap_or_default()
            .into_iter()
            .map(|g| g.as_raw())
            .collect(),
    };
    // The task's gid on the host: --host-gid's, or the caller's own.
    let (_, task_gid) = task_ids;
    let host_id = if caller_is_root {
        format!(
            "uid {} gid {}, no supplementary groups (the caller is root; the task never is)",
            spec.host_uid, spec.host_gid
        )
    } else {
        let groups = match caller_groups.is_empty() {
            true => "no supplementary groups".to_string(),
            false => format!(
                "supplementary groups {} (the caller's, which a user namespace cannot drop)",
                group_names(&caller_groups)
            ),
        };
        format!("uid {caller_uid} gid {task_gid} (the caller's own), {groups}")
    };
    let inside_groups = match caller_groups.is_empty() {
        true => "no supplementary groups",
        false => "the caller's supplementary groups, shown as 65534 (unmapped)",
    };
    // A group that reads host secrets by their modes (shadow, ssl-cert).
    let secrets: Vec<&str> = caller_groups
        .iter()
        .chain([&task_gid])
        .flat_map(|g| crate::audit::secrets_read_by_group(&g.to_string()))
        .collect();
    let _ = writeln!(w, "command: {:?}", spec.argv);
    let plan = crate::limits::detect(caller_is_root, &spec.limits.unwrap_or_default());
    let mech = plan.mechanism();
    let mut made = vec!["one clone3"];
    if spec.ns.net {
        made.push("the network one made alongside, joined at step 10");
    }
    // launch.rs: with a cgroup, clone3 leaves the cgroup namespace out for the init to make.
    if mech != crate::limits::Mechanism::Rlimit {
        made.push("the cgroup one at step 12, in the run's cgroup");
    }
    let _ = writeln!(w, "\nnamespaces ({}):", made.join("; "));
    let net = match (spec.ns.net, spec.lockdown.scope_abstract_sockets) {
        (true, _) => "network: new, loopback only",
        (false, true) => {
            "network: SHARED with the host (--share-net); its abstract unix sockets out of \
             reach (a Landlock scope, step 12), though a name the task binds is the host's"
        }
        (false, false) => {
            "network: SHARED with the host (--share-net), its abstract unix sockets too (no \
             Landlock ABI 6 here to scope them)"
        }
    };
    let _ = writeln!(
        w,
        "  user, mount, pid, ipc, uts (hostname \"airlock\"), cgroup; {net}"
    );
    let _ = writeln!(w, "\nidentity:");
    let _ = writeln!(
        w,
        "  inside: uid {SANDBOX_UID} gid {SANDBOX_GID} (airlock), {inside_groups}"
    );
    let _ = writeln!(w, "  on the host: {host_id}");
    if !secrets.is_empty() {
        let _ = writeln!(
            w,
            "  WARNING: a group of the task's on the host reads {} by their modes: through \
             any bind that holds them, read-only or not",
            secrets.join(" and ")
        );
    }
    if spec.cwd.as_path() != std::path::Path::new(SCRATCH) {
        let _ = writeln!(
            w,
            "  starts in: {} (--chdir; entered at step 9, inside the new root)",
            one_line(&spec.cwd.to_string_lossy())
        );
    }
    let _ = writeln!(
        w,
        "  capabilities: none in any set; no_new_privs; new session (no terminal)"
    );
    let _ = writeln!(
        w,
        "\nmounts (root: a new tmpfs entered with pivot_root; the old root detached):"
    );
    let _ = writeln!(
        w,
        "  /                 tmpfs, read-only after setup, nosuid, nodev"
    );
    for p in SYSTEM_PATHS {
        let host = std::path::Path::new(p);
        match std::fs::symlink_metadata(host) {
            Ok(m) if m.file_type().is_symlink() => {
                let t = std::fs::read_link(host).unwrap_or_default();
                let _ = writeln!(w, "  {p:<17} symlink -> {} (as on the host)", t.display());
            }
            Ok(m) if m.is_dir() => {
                let _ = writeln!(
                    w,
                    "  {p:<17} host bind, read-only, nosuid, nodev, submounts included"
                );
            }
            _ => {}
        }
    }
    // The host's resolver configuration comes in only with its network.
    let shared_net = !spec.ns.net;
    let etc: Vec<&str> = etc_from_host(shared_net)
        .filter(|n| std::path::Path::new("/etc").join(n).exists())
        .collect();
    let hosts = hosts_sources(shared_net);
    let _ = writeln!(
        w,
        "  /etc              tmpfs dir: generated passwd, group, hosts, nsswitch.conf (hosts: \
         {hosts}), hostname;"
    );
    let _ = writeln!(
        w,
        "                    bound read-only from the host: {}",
        etc.join(", ")
    );
    let _ = writeln!(
        w,
        "  /dev              root dir: {} (host nodes, read-only binds, nosuid, noexec), and \
         console when a streamed run's stdout is a terminal (that terminal, bound the same \
         way); links {}; /dev/pts (devpts, new instance, at most 64 terminals); /dev/shm \
         (tmpfs, writable, the size and inode cap of {SCRATCH})",
        DEVICES.join(" "),
        DEV_LINKS
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(
        w,
        "  /proc             new proc of the sandbox's pid namespace, read-only, nosuid, nodev, noexec \
         (keys and key-users covered by an empty file)"
    );
    let scratch_size = spec.limits.unwrap_or_default().scratch_size;
    // HOME and TMPDIR point here unless --env moved them.
    let mut roles: Vec<&str> = (spec.cwd.as_path() == std::path::Path::new(SCRATCH))
        .then_some("cwd")
        .into_iter()
        .collect();
    roles.extend(
        ["HOME", "TMPDIR"]
            .into_iter()
            .filter(|r| spec.env.iter().any(|(n, v)| n == r && v == SCRATCH)),
    );
    // A bind at /var covers the /var/tmp link with its own tmp (the explain review).
    let links = match spec
        .binds()
        .any(|(_, dest, _)| dest == std::path::Path::new("/var"))
    {
        true => "/tmp links here; /var/tmp is the /var bind's own",
        false => "/tmp and /var/tmp link here",
    };
    let _ = writeln!(
        w,
        "  {SCRATCH:<17} tmpfs, WRITABLE, nosuid, nodev, size {scratch_size} bytes, at most {} \
         inodes (one per {} bytes, at least {}): {}({links})",
        crate::spec::tmpfs_inodes(scratch_size),
        crate::spec::TMPFS_BYTES_PER_INODE,
        crate::spec::TMPFS_MIN_INODES,
        match roles.is_empty() {
            true => String::new(),
            false => format!("{} ", roles.join(", ")),
        },
    );
    for i in &spec.inputs {
        let _ = writeln!(
            w,
            "  {:<17} input, copied in (never bound)",
            format!("{SCRATCH}/{}", one_line(&i.name))
        );
        if let crate::spec::InputSource::HostFile(path) = &i.source
            && let Some(warning) = crate::audit::input_warning(path, &i.name, task_ids)
        {
            let _ = writeln!(w, "  {:<17} warning: {}", "", one_line(&warning));
        }
    }
    for (src, dest, access) in spec.binds() {
        let _ = writeln!(
            w,
            "  {:<17} host bind of {}, {}",
            one_line(&dest.to_string_lossy()),
            one_line(&src.to_string_lossy()),
            if access != crate::spec::Access::ReadOnly {
                "WRITABLE (a channel out), nosuid, nodev"
            } else {
                "read-only, nosuid, nodev"
            }
        );
        for warning in crate::audit::bind_warnings(src, dest) {
            let _ = writeln!(w, "  {:<17} warning: {}", "", one_line(&warning));
        }
    }
    let _ = writeln!(w, "\nenvironment (built from nothing):");
    // A credential is named, never shown: this text may end up in a log (as the audits').
    for (n, v) in &spec.env {
        match crate::audit::credential_warning(n, v) {
            Some(warning) => {
                let _ = writeln!(w, "  {n}=<{} bytes, not shown>", v.len());
                let _ = writeln!(w, "  {:<17} warning: {warning}", "");
            }
            None => {
                let _ = writeln!(w, "  {n}={}", one_line(v));
            }
        }
    }
    let _ = writeln!(w, "\nlimits:");
    let limits = spec.limits.unwrap_or_default();
    let applied = plan.bounded(crate::limits::applicable(&limits, mech));
    if let Some(obj) = crate::limits::to_json(&limits, &applied, mech).as_object() {
        for (name, v) in obj {
            let _ = writeln!(
                w,
                "  {name}: {} ({})",
                v["applied"],
                v["mechanism"].as_str().unwrap_or("")
            );
        }
    }
    match spec.timeout {
        Some(t) => {
            // Below a millisecond as it is given (`--timeout 0.0001`: 100µs, not "0 ms").
            let shown = match t.as_millis() {
                0 => format!("{t:?}"),
                ms => format!("{ms} ms"),
            };
            let _ = writeln!(w, "  timeout: {shown}, then the whole sandbox is killed");
        }
        None => {
            let _ = writeln!(w, "  timeout: none");
        }
    }
    match spec.output {
        Output::Json { max } => {
            let _ = writeln!(
                w,
                "  output: captured, {max} bytes kept of stdout, stderr and each result file"
            );
        }
        Output::Stream => {
            let _ = writeln!(w, "  output: streamed to airlock's stdout/stderr");
        }
    }
    let _ = writeln!(
        w,
        "\nseccomp (from {}, compiled at build time into one program of {} instructions):",
        crate::seccomp::POLICY_FILE,
        crate::seccomp::PROGRAM.len()
    );
    for line in seccomp_summary() {
        let _ = writeln!(w, "  {line}");
    }
    s
}

/// An argument condition as its comment in the policy states it, without the comment's
/// explanation: "domain != AF_UNIX 1" of "domain != AF_UNIX 1", "request == TIOCSTI 0x5412"
/// of "request == TIOCSTI 0x5412 (decimal 21522); dword because ...".
fn condition(comment: &str) -> &str {
    let end = [";", ", ", " (decimal", " (the ", " (unchanged"]
        .iter()
        .filter_map(|cut| comment.find(cut))
        .min()
        .unwrap_or(comment.len());
    &comment[..end]
}

/// The policy grouped by the group name each rule's comment starts with; a rule with
/// argument conditions is shown with them (`socket(domain == AF_INET 2 and ...)`), rules
/// apart by "; ".
fn seccomp_summary() -> Vec<String> {
    let v: Value = serde_json::from_str(POLICY_JSON).unwrap_or(Value::Null);
    let mut out = Vec::new();
    for (filter, action) in [
        ("deny", "EPERM"),
        ("enosys", "ENOSYS"),
        ("noop", "0 (nothing done)"),
    ] {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for rule in v[filter]["filter"].as_array().into_iter().flatten() {
            let name = rule["syscall"].as_str().unwrap_or("?");
            let comment = rule["comment"].as_str().unwrap_or("");
            let group = comment
                .split_once(':')
                .map(|(g, _)| g)
                .unwrap_or("other")
                .to_string();
            let conditions: Vec<&str> = (rule["args"].as_array().into_iter().flatten())
                .map(|arg| condition(arg["comment"].as_str().unwrap_or("?")))
                .collect();
            let label = if conditions.is_empty() {
                name.to_string()
            } else {
                format!("{name}({})", conditions.join(" and "))
            };
            match groups.iter_mut().find(|(g, _)| *g == group) {
                Some((_, names)) => {
                    if !names.contains(&label) {
                        names.push(label)
                    }
                }
                None => groups.push((group, vec![label])),
            }
        }
        for (g, names) in groups {
            out.push(format!("{action} {g}: {}", names.join("; ")));
        }
    }
    let (name, nr) = crate::seccomp::NEWEST_REVIEWED;
    let x32 = if cfg!(target_arch = "x86_64") {
        ", every x32-ABI one among them"
    } else {
        ""
    };
    out.push(format!(
        "ENOSYS newer: every syscall number above {nr} ({name}, the newest the policy was \
         reviewed against){x32}"
    ));
    out.push("everything else: allowed".into());
    out
}
