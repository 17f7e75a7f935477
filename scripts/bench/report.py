#!/usr/bin/python3
"""Turn the raw results of scripts/bench.sh into a table (stdout) and BENCHMARKS.md.

Usage: report.py ROOT_OUT_DIR UNPRIV_OUT_DIR MARKDOWN_PATH   (metadata in BENCH_* variables)

It reports figures; it never judges them.
"""
import glob
import json
import os
import statistics
import sys


def pct(xs, p):
    """Percentile by linear interpolation between closest ranks."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def hyperfine_times(out, name):
    """label -> all run times in ms, merged over the rounds of hyperfine export files."""
    times = {}
    for path in sorted(glob.glob(os.path.join(out, f"{name}.r*.json"))):
        with open(path) as f:
            for r in json.load(f)["results"]:
                times.setdefault(r["command"], []).extend(t * 1000.0 for t in r["times"])
    return times


def read_tsv(path):
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def load(out):
    d = {
        "lat": hyperfine_times(out, "lat"),
        "big": {**hyperfine_times(out, "bignull"), **hyperfine_times(out, "big")},
        "files": hyperfine_times(out, "files"),
        "binds": hyperfine_times(out, "binds"),
        "tput": {},
        "rss": {},
        "big_rss": {},
    }
    for label, _round, count, fails, us in read_tsv(os.path.join(out, "tput.tsv")):
        t = d["tput"].setdefault(label, [0, 0, 0])
        t[0] += int(count)
        t[1] += int(fails)
        t[2] += int(us)
    for row in read_tsv(os.path.join(out, "rss.tsv")):
        d["rss"].setdefault(row[0], []).append(int(row[1]))
    for row in read_tsv(os.path.join(out, "big_rss.tsv")):
        d["big_rss"].setdefault(row[0], []).append(int(row[1]))
    d["cpu"] = {row[0]: float(row[1]) for row in read_tsv(os.path.join(out, "cpu.tsv"))}
    d["mcpu"] = {row[0]: float(row[1]) for row in read_tsv(os.path.join(out, "mcpu.tsv"))}
    with open(os.path.join(out, "sanity.txt")) as f:
        d["sanity"] = f.read().strip().splitlines()
    d["commands"] = read_tsv(os.path.join(out, "commands.tsv"))
    return d


def fmt_ms(x):
    if x != x:
        return "n/a"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def cell_spread(times, label):
    """'median (p10-p90)' of one label's run times, in ms."""
    t = times.get(label)
    if not t:
        return "n/a"
    return f"{fmt_ms(statistics.median(t))} ({fmt_ms(pct(t, 10))}-{fmt_ms(pct(t, 90))})"


def ratio(a, b):
    if a is None or b is None or b == 0 or a != a or b != b:
        return "n/a"
    return f"{a / b:.2f}x"


def rows_for(d):
    """[(measure, airlock, bwrap+seccomp, ratio, bwrap no seccomp, floor, airlock/floor,
    no sandbox)]"""
    rows = []
    lat = d["lat"]

    def med(times, label):
        t = times.get(label)
        return statistics.median(t) if t else None

    def cell_lat(label):
        return cell_spread(lat, label)

    n_lat = len(lat.get("airlock", []))
    rows.append((
        f"launch /bin/true, ms: median (p10-p90), n={n_lat}",
        cell_lat("airlock"), cell_lat("bwrap+seccomp"),
        ratio(med(lat, "airlock"), med(lat, "bwrap+seccomp")),
        cell_lat("bwrap"), cell_lat("floor"),
        ratio(med(lat, "airlock"), med(lat, "floor")), cell_lat("none"),
    ))

    # The same measure for floor.c's sandbox built by airlock's bwrap front end: its ratio to
    # the floor is airlock's launch machinery alone; `airlock run` puts more in its sandbox.
    rows.append((
        "launch /bin/true, floor.c's own sandbox built by airlock's bwrap front end, ms: "
        "median (p10-p90)",
        cell_lat("airlock, floor's sandbox"), "", "", "", cell_lat("floor"),
        ratio(med(lat, "airlock, floor's sandbox"), med(lat, "floor")), "",
    ))

    # The agent frameworks' form: the JSON report on stdout, the task's output captured.
    rows.append((
        "launch /bin/true, airlock run --json (the report written to stdout), ms: "
        "median (p10-p90)",
        cell_lat("airlock --json"), cell_lat("bwrap+seccomp"),
        ratio(med(lat, "airlock --json"), med(lat, "bwrap+seccomp")), "", cell_lat("floor"),
        ratio(med(lat, "airlock --json"), med(lat, "floor")), "",
    ))

    def sd(label):
        t = lat.get(label)
        return fmt_ms(statistics.stdev(t)) if t and len(t) > 1 else "n/a"

    rows.append(("launch /bin/true, ms: stddev", sd("airlock"), sd("bwrap+seccomp"), "",
                 sd("bwrap"), sd("floor"), "", sd("none")))

    def cpu(label):
        return d["cpu"].get(label)

    def cell_cpu(label):
        v = cpu(label)
        return "n/a" if v is None else fmt_ms(v)

    rows.append(("launch /bin/true, CPU ms per launch (perf task-clock, whole tree)",
                 cell_cpu("airlock"), cell_cpu("bwrap+seccomp"),
                 ratio(cpu("airlock"), cpu("bwrap+seccomp")), cell_cpu("bwrap"),
                 cell_cpu("floor"), ratio(cpu("airlock"), cpu("floor")), cell_cpu("none")))

    def mcpu(label):
        return d["mcpu"].get(label)

    def cell_mcpu(label):
        v = mcpu(label)
        return "n/a" if v is None else fmt_ms(v)

    rows.append(("launch /bin/true, machine CPU ms per launch (all cores, /proc/stat, "
                 "deferred kernel work included)",
                 cell_mcpu("airlock"), cell_mcpu("bwrap+seccomp"),
                 ratio(mcpu("airlock"), mcpu("bwrap+seccomp")), cell_mcpu("bwrap"),
                 cell_mcpu("floor"), ratio(mcpu("airlock"), mcpu("floor")), cell_mcpu("none")))

    def rate(label):
        t = d["tput"].get(label)
        if not t or t[2] == 0:
            return None
        return t[0] / (t[2] / 1e6)

    def cell_rate(label):
        r = rate(label)
        if r is None:
            return "n/a"
        fails = d["tput"][label][1]
        return f"{r:.0f}" + (f" ({fails} failed)" if fails else "")

    rows.append((
        "launches/s, 2 parallel workers (higher is better)",
        cell_rate("airlock"), cell_rate("bwrap+seccomp"),
        ratio(rate("airlock"), rate("bwrap+seccomp")),
        cell_rate("bwrap"), cell_rate("floor"), ratio(rate("airlock"), rate("floor")),
        cell_rate("none"),
    ))

    def rss(table, label):
        v = d[table].get(label)
        return statistics.median(v) if v else None

    def cell_rss(table, label):
        v = rss(table, label)
        return "n/a" if v is None else f"{v:.0f}"

    rows.append((
        f"peak RSS, /bin/true, KiB (median of {len(d['rss'].get('airlock', []))})",
        cell_rss("rss", "airlock"), cell_rss("rss", "bwrap+seccomp"),
        ratio(rss("rss", "airlock"), rss("rss", "bwrap+seccomp")),
        cell_rss("rss", "bwrap"), cell_rss("rss", "floor"),
        ratio(rss("rss", "airlock"), rss("rss", "floor")), cell_rss("rss", "none"),
    ))

    big = d["big"]

    def cell_big(label):
        return cell_spread(big, label)

    n_null = len(big.get("airlock stream >null", []))
    n_big = len(big.get("airlock stream |cat", []))
    rows.append((
        f"1 GiB to stdout, streamed to /dev/null, ms: median (p10-p90), n={n_null}",
        cell_big("airlock stream >null"), cell_big("bwrap+seccomp stream >null"),
        ratio(med(big, "airlock stream >null"), med(big, "bwrap+seccomp stream >null")),
        "", "", "", cell_big("none >null"),
    ))
    rows.append((
        f"1 GiB to stdout, streamed through a pipe to cat, ms: median (p10-p90), n={n_big}",
        cell_big("airlock stream |cat"), cell_big("bwrap+seccomp stream |cat"),
        ratio(med(big, "airlock stream |cat"), med(big, "bwrap+seccomp stream |cat")),
        "", "", "", cell_big("none |cat"),
    ))
    rows.append((
        f"1 GiB to stdout, airlock --json --max-output 8000 (capped), ms: median (p10-p90), n={n_big}",
        cell_big("airlock json capped"), "", "", "", "", "", cell_big("none |cat"),
    ))
    rows.append((
        "peak RSS, 1 GiB task streamed, KiB (median of 3)",
        cell_rss("big_rss", "airlock stream >null"),
        cell_rss("big_rss", "bwrap+seccomp stream >null"),
        ratio(rss("big_rss", "airlock stream >null"), rss("big_rss", "bwrap+seccomp stream >null")),
        "", "", "", "",
    ))
    rows.append((
        "peak RSS, 1 GiB task, airlock --json capped, KiB (median of 3)",
        cell_rss("big_rss", "airlock json capped"), "", "", "", "", "", "",
    ))

    files = d["files"]

    def cell_files(label):
        return cell_spread(files, label)

    rows.append((
        f"1000 files of 10 B written and collected, ms: median (p10-p90), "
        f"n={len(files.get('airlock', []))}",
        cell_files("airlock"), cell_files("bwrap+seccomp"),
        ratio(med(files, "airlock"), med(files, "bwrap+seccomp")),
        "", "", "", cell_files("none"),
    ))

    binds = d["binds"]
    rows.append((
        f"bwrap mode, 2000 --ro-bind-try of existing files, ms: median (p10-p90), "
        f"n={len(binds.get('airlock bwrap', []))}",
        cell_spread(binds, "airlock bwrap"), cell_spread(binds, "bwrap"),
        ratio(med(binds, "airlock bwrap"), med(binds, "bwrap")),
        "", "", "", "",
    ))

    derived = [
        ("airlock streaming / no sandbox (1 GiB to /dev/null)",
         ratio(med(big, "airlock stream >null"), med(big, "none >null"))),
        ("bwrap+seccomp streaming / no sandbox (1 GiB to /dev/null)",
         ratio(med(big, "bwrap+seccomp stream >null"), med(big, "none >null"))),
        ("airlock streaming / no sandbox (1 GiB through a pipe to cat)",
         ratio(med(big, "airlock stream |cat"), med(big, "none |cat"))),
        ("airlock --json capped / no sandbox through a pipe to cat (1 GiB)",
         ratio(med(big, "airlock json capped"), med(big, "none |cat"))),
        ("airlock launch median minus floor, ms",
         fmt_ms(med(lat, "airlock") - med(lat, "floor"))
         if med(lat, "airlock") and med(lat, "floor") else "n/a"),
        ("bwrap+seccomp launch median minus floor, ms",
         fmt_ms(med(lat, "bwrap+seccomp") - med(lat, "floor"))
         if med(lat, "bwrap+seccomp") and med(lat, "floor") else "n/a"),
        ("airlock run minus airlock building floor.c's sandbox, ms (airlock run's larger "
         "sandbox: /dev, the minimal /etc, scratch, limits, its seccomp policy, uts and cgroup "
         "namespaces)",
         fmt_ms(med(lat, "airlock") - med(lat, "airlock, floor's sandbox"))
         if med(lat, "airlock") and med(lat, "airlock, floor's sandbox") else "n/a"),
        ("airlock building floor.c's sandbox minus floor, ms (airlock's launch machinery)",
         fmt_ms(med(lat, "airlock, floor's sandbox") - med(lat, "floor"))
         if med(lat, "airlock, floor's sandbox") and med(lat, "floor") else "n/a"),
        ("(airlock - floor) / (bwrap+seccomp - floor), launch",
         ratio(med(lat, "airlock") - med(lat, "floor"),
               med(lat, "bwrap+seccomp") - med(lat, "floor"))
         if med(lat, "airlock") and med(lat, "floor") and med(lat, "bwrap+seccomp") else "n/a"),
    ]
    return rows, derived


HEADER = ("measure", "airlock", "bwrap+seccomp", "airlock / bwrap+seccomp",
          "bwrap, no seccomp", "floor (floor.c)", "airlock / floor", "no sandbox")


def text_table(rows):
    widths = [max(len(str(r[i])) for r in [HEADER] + rows) for i in range(len(HEADER))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(str(c).ljust(w) for c, w in zip(HEADER, widths)), line]
    for r in rows:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return "\n".join(out)


def md_table(rows):
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        out.append("| " + " | ".join(str(c) if c != "" else "" for c in r) + " |")
    return "\n".join(out)


def main():
    root_out, unpriv_out, md_path = sys.argv[1:4]
    env = os.environ.get
    bin_dir = env("BENCH_BIN_DIR", "")
    work_dir = env("BENCH_WORK_DIR", "")
    uid = env("BENCH_UNPRIV_ID", "65534")
    users = [("root", load(root_out)), (f"uid {uid} (setpriv --reuid={uid} --regid={uid} "
                                        f"--clear-groups)", load(unpriv_out))]

    def clean(s):
        s = s.replace(work_dir + "/root/scratch", "$SCRATCH").replace(
            work_dir + "/unpriv/scratch", "$SCRATCH")
        return s.replace(bin_dir, "$BIN")

    text = []
    md = []
    md.append("# airlock benchmarks\n")
    md.append("Written by `scripts/bench.sh` (run it as root; it overwrites this file). "
              "The figures are what one run measured on the machine below; they are not "
              "targets or guarantees.\n")
    meta = [
        ("date", env("BENCH_DATE", "")),
        ("kernel", env("BENCH_KERNEL", "")),
        ("CPU", env("BENCH_CPU", "")),
        ("load average", f"{env('BENCH_LOADAVG', '')} before measuring, "
                         f"{env('BENCH_LOADAVG_AFTER', '')} after (the benchmark itself loads "
                         f"both cores; anything else running adds noise)"),
        ("airlock", f"{env('BENCH_AIRLOCK_VERSION', '')}, git {env('BENCH_AIRLOCK_REV', '')}, "
                    f"release build for {env('BENCH_TARGET', '?')} ({env('BENCH_RUSTC', '')})"),
        ("code layout", env("BENCH_LAYOUT", "?")),
        ("floor build", env("BENCH_FLOOR_BUILD", "?")),
        ("bwrap", env("BENCH_BWRAP_VERSION", "")),
        ("hyperfine", env("BENCH_HYPERFINE_VERSION", "")),
        ("seccomp", f"both run airlock's policy, compiled at build time into one program of "
                    f"{env('BENCH_BLOB_INSNS', '?')} instructions (a binary search on the syscall "
                    f"number): airlock installs it, bwrap gets it from `airlock seccomp-bpf` "
                    f"through --seccomp, less its rules on core limit changes"),
        ("parameters", env("BENCH_PARAMS", "")),
        ("whole run", f"{env('BENCH_SECONDS', '?')} s (including the build)"),
    ]
    md.append("| | |\n|---|---|")
    for k, v in meta:
        md.append(f"| {k} | {v} |")
        text.append(f"{k:12} {v}")
    md.append("")
    text.append("")

    for who, d in users:
        rows, derived = rows_for(d)
        text.append(f"== launched as {who}")
        text.append(text_table(rows))
        text.append("")
        for k, v in derived:
            text.append(f"  {k}: {v}")
        text.append("")
        md.append(f"## Launched as {who}\n")
        md.append(md_table(rows))
        md.append("")
        md.append("| derived | |\n|---|---|")
        for k, v in derived:
            md.append(f"| {k} | {v} |")
        md.append("")
        md.append("Sanity checks made before measuring:\n")
        for s in d["sanity"]:
            md.append(f"- {clean(s)}")
        md.append("")

    md.append("""## What is measured

- **launch /bin/true**: hyperfine `--shell=none`, stdout to /dev/null. The commands run in
  interleaved rounds (all six commands per round, each once after one warmup launch, the
  order reversed every other round), so that the machine's slow and fast phases fall on all
  of them alike, and the rounds' runs are merged; median, 10th and 90th percentile,
  standard deviation. Every
  command is started through `withfd 9 BLOB` (scripts/bench/withfd.c), which opens the
  seccomp blob at descriptor 9 and execs the rest: bwrap's `--seccomp 9` reads that
  descriptor to its end, so each launch needs a fresh one, and hyperfine cannot redirect.
  (Descriptor 9, not 10: the `sh -c` wrappers below run dash, which redirects only 0-9.)
  airlock and plain bwrap go through the same wrapper so that all pay the same extra exec.
  **no sandbox** is `withfd 9 BLOB /bin/true`: the part of every row that is not the
  sandbox. **floor** is `withfd 9 BLOB floor /bin/true` (scripts/bench/floor.c): the least a
  launcher can do, as issue 7 defines it: one clone creating the user, mount, pid, network
  and ipc namespaces, the id maps, a tmpfs root with read-only binds of /usr and /etc, the
  usr-merge links and /proc, pivot_root, then a forked task that drops its capabilities,
  sets no_new_privs, installs a one-instruction seccomp filter and execs. No /dev, no
  loopback, no uts or cgroup namespace, no limits, no error reporting. It is built as the
  "floor build" row above says: static with musl, so that it carries no C library's
  start-up, unless musl-gcc was missing. **floor.c's own sandbox** is the same sandbox built
  by `airlock bwrap` (the same five namespaces, mounts, working directory, no capabilities,
  no_new_privs, and floor.c's one-instruction filter given with `--seccomp 9`, from
  `withfd 9 allow.bpf`): its ratio to the floor is what airlock's launch machinery costs,
  apart from what `airlock run` adds to its sandbox (/dev, the minimal /etc, scratch, limits,
  its seccomp policy, the uts and cgroup namespaces).
- **CPU ms per launch**: `perf stat -e task-clock` over a bash loop of launches, divided by
  the number of launches. task-clock is inherited by every descendant, reaped or not, so it
  covers the launcher, the sandbox's init and the task, in user and kernel mode (as uid
  65534 perf labels the event `task-clock:u`; it still counts kernel time). Work the
  kernel defers to its own threads (e.g. destroying network namespaces) is not in it.
  hyperfine's user/system figures are not used: they come from rusage of reaped children,
  and the outer bwrap process exits without reaping the sandbox's pid 1 (seen with strace),
  so they would leave out bwrap's sandbox side. no sandbox: the loop running `/bin/true`;
  floor: the loop running `floor /bin/true`.
- **machine CPU per launch**: every core's busy time from /proc/stat (user, nice, system,
  irq, softirq) over the same loop of launches and the second after it, less the machine's
  own background (its busy rate over 2 s before the first launcher, times the same span),
  divided by the launches. Unlike perf's task-clock it counts the work the kernel defers to
  its own threads (a network namespace's cleanup, RCU callbacks, a memory cgroup's release),
  which with two workers on two cores is what bounds launches/s. /proc/stat counts in
  ticks of 10 ms: about 1% of the loop's total.
- **launches/s**: two background bash loops, each launching the command back to back until a
  deadline, for 2.5 s per launcher in each of 2 rounds (order reversed in round 2, a 1 s pause
  before each launcher so deferred namespace teardown of the previous one can finish); the
  completions of both loops divided by the wall time until both loops ended. The loops'
  own fork/exec cost is included for all. bwrap+seccomp gets its descriptor with a bash
  `9<BLOB` redirection (no extra process). no sandbox: `/bin/true` itself; floor:
  `floor /bin/true`.
- **peak RSS**: GNU time `%M`, i.e. `ru_maxrss` as returned by `wait4` for the launcher:
  the largest resident set of the launcher *or of any descendant it (transitively) waited
  for*, in KiB: the peak of the single largest process, not the sum of the tree. For airlock
  that covers the launcher, its sandbox init (a copy of the launcher made by clone3) and the
  task; for bwrap only the outer bwrap process, which does not reap the sandbox's pid 1.
  Both are in practice the launcher's own peak. The no-sandbox column is `/bin/true` alone;
  the floor column is floor.c's launcher and its task.
- **1 GiB to stdout**: the task is `sh -c 'head -c 1G /dev/zero'`. Streamed: airlock (without
  `--json`) and bwrap hand the task the caller's stdout, here /dev/null (hyperfine's
  default), or a pipe to `cat >/dev/null`. Captured: `airlock run --json --max-output 8000
  --timeout 120s`: airlock reads the whole gigabyte from a pipe and keeps 8000 bytes; its
  fair no-sandbox baseline is the pipe-to-cat row. bwrap has no capture mode.
- **1000 files**: the task `i=0; while [ $i -lt 1000 ]; do printf 0123456789 > f$i;
  i=$((i+1)); done` in the sandbox's /work. airlock: `--json`, so airlock reads every file
  back into its JSON report (airlock examines at most 1000 entries of scratch, so 1000 is
  its limit). bwrap: /work is a bind of a host directory on tmpfs (/dev/shm); after bwrap
  exits, the caller reads all files back with `cat`. The directory is emptied by hyperfine
  `--prepare` (not timed), while airlock's scratch tmpfs is freed inside its timed run. Both
  commands are started by `sh -c` (airlock's with `exec`). no sandbox: the same loop and
  `cat` in that directory.
- As root, airlock runs the task as host uid 65534 (uid 1000 inside); bwrap runs it as
  uid 0 in a user namespace mapping only uid 0, with every capability dropped. As uid
  65534 both map the caller's own uid.
""")

    md.append("## Exact commands\n")
    md.append("`$BIN` is a 0755 temporary directory holding copies of `target/<host>/release/airlock`, "
              "`withfd`, `floor`, the seccomp blob `seccomp.bpf` and the one-instruction program "
              "`allow.bpf`; `$SCRATCH` is a directory owned by "
              "the launching user on /dev/shm. The same commands run as root and, under "
              f"`setpriv --reuid={uid} --regid={uid} --clear-groups`, as uid {uid}.\n")
    md.append("```")
    seen = set()
    for group, label, cmd in users[0][1]["commands"]:
        key = (group, label)
        if key in seen:
            continue
        seen.add(key)
        md.append(f"[{group}] {label}:\n  {clean(cmd)}")
    md.append("```\n")

    with open(md_path, "w") as f:
        f.write("\n".join(md))
    print("\n".join(text))
    print(f"(written to {md_path})")


if __name__ == "__main__":
    main()
