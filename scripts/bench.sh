#!/usr/bin/env bash
# Benchmark airlock against bubblewrap with comparable isolation, as root and as an
# unprivileged user (uid/gid 65534). Prints a table and writes BENCHMARKS.md at the repo root.
#
#   sudo scripts/bench.sh
#
# Measured (each for airlock and bwrap, plus the airlock/bwrap ratio):
#   1. launch latency of /bin/true (hyperfine, launch by launch interleaved), also for issue 7's floor
#      (scripts/bench/floor.c, built static with musl: namespaces, id maps, tmpfs root,
#      pivot_root, fork, exec), and for the floor's own sandbox built by airlock's bwrap front
#      end (the same namespaces, mounts and one-instruction filter: what airlock's launch
#      machinery costs, apart from what `airlock run` puts in its sandbox), and for
#      `airlock run --json` (the agent frameworks' form: output captured, a report written)
#   2. launches per second with 2 parallel workers
#   3. peak RSS (GNU time %M) for /bin/true
#   4. a task writing 1 GiB to stdout: captured (--json, capped) and streamed
#   5. collecting 1000 small result files
# The script reports what it measures; it never judges a figure.
#
# Internal: `bench.sh --measure BIN_DIR WORK_DIR` runs the measurements as the calling user
# and writes raw results to WORK_DIR/out (the main script runs it once as root and once as
# uid 65534, from a 0755 copy of everything that user needs).
set -euo pipefail
export LC_ALL=C

# ---------------------------------------------------------------------------------------------
# Parameters (edit here; BENCHMARKS.md records them).
LAT_ROUNDS=300    # hyperfine rounds for launch latency: each command once per round, the order
LAT_RUNS=1        # reversed every other round, so that the machine's slow and fast phases fall
LAT_WARMUP=1      # on every command alike (blocks of 100-150 runs of one command and then the
                  # next showed 5-6% between two builds that were within 0.4% launch by launch);
                  # one warmup launch of the same command before each measured one
TPUT_ROUNDS=2     # throughput rounds, order alternating
TPUT_SECS=2.5     # seconds per launcher per round (2 x 2.5 = 5 s per launcher)
RSS_RUNS=15       # /usr/bin/time runs per launcher (median reported)
CPU_LAUNCHES=200  # launches per launcher counted by perf stat (CPU time per launch)
BIG_ROUNDS=3      # hyperfine rounds for the 1 GiB task
BIG_RUNS=4        # runs per command per round (through a pipe, and --json)
BIG_NULL_RUNS=36  # runs per command streamed to /dev/null (the issue's target row), one at a
                  # time and interleaved: about 0.1 s each, with a spread as wide as the
                  # difference measured, and a block of 12 runs of one command after another's
                  # biased it by up to 0.2x
FILES_ROUNDS=2    # hyperfine rounds for the 1000-file task
FILES_RUNS=10     # runs per command per round
BINDS_ROUNDS=2    # hyperfine rounds for the 2000-bind bwrap line
BINDS_RUNS=5      # runs per command per round
UNPRIV_ID=65534

# ---------------------------------------------------------------------------------------------
# Measurement phase (runs as root and as the unprivileged user).

# Shell-quote the arguments into one string, POSIX style (single quotes), readable in
# BENCHMARKS.md; hyperfine --shell=none splits it the same way a shell would.
q() {
    local out="" a sq="'\\''"
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
            out+="${out:+ }$a"
        else
            out+="${out:+ }'${a//\'/$sq}'"
        fi
    done
    printf '%s' "$out"
}

now_us() { local t=${EPOCHREALTIME/[.,]/}; printf '%s' "$((10#$t))"; }

log() { printf '  [%s] %s\n' "$WHO" "$*" >&2; }

measure() {
    local BIN=$1 W=$2
    WHO=$(id -un 2>/dev/null || id -u)
    A=$BIN/airlock
    WF=$BIN/withfd
    FL=$BIN/floor         # scripts/bench/floor.c: issue 7's floor
    BLOB=$BIN/seccomp.bpf
    ONE=$BIN/allow.bpf    # one instruction, "allow": floor.c's filter
    S=$W/scratch          # the directory bwrap binds at /work
    OUT=$W/out
    mkdir -p "$S" "$OUT"
    local HLOG=$OUT/hyperfine.log
    : >"$HLOG"

    # bwrap with the isolation airlock applies (new user, mount, pid, net, ipc, uts, cgroup
    # namespaces; a new session; no environment; no capabilities; system paths read-only;
    # one writable directory at /work).
    BW=("$(command -v bwrap)" --unshare-all --die-with-parent --new-session --clearenv --cap-drop ALL
        --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib
        --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --ro-bind /etc /etc
        --proc /proc --dev /dev --tmpfs /tmp --bind "$S" /work --chdir /work)
    BWS=("${BW[@]}" --seccomp 9)     # FD 9: the filter blob (opened by withfd or 9<)
    # floor.c's sandbox, built by airlock's bwrap front end: the same five namespaces, a tmpfs
    # root with read-only /usr and /etc, the usr-merge links, /proc, /work as the working
    # directory, no capabilities, no_new_privs and the one-instruction filter on FD 9.
    FSB=("$A" bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --cap-drop ALL
        --ro-bind /usr /usr --ro-bind /etc /etc --symlink usr/bin /bin --symlink usr/lib /lib
        --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc --dir /work
        --chdir /work --seccomp 9)

    local BIG='head -c 1G /dev/zero'
    local TASK='i=0; while [ $i -lt 1000 ]; do printf 0123456789 > f$i; i=$((i+1)); done'

    # -- sanity: every launcher runs, the filter is real, the capture caps, the files arrive
    "$A" run -- /bin/true
    "$FL" /bin/true
    "${BWS[@]}" -- /bin/true 9<"$BLOB"
    "${BW[@]}" -- /bin/true
    local r
    r=$("${BWS[@]}" -- /bin/sh -c 'unshare -U true 2>&1; echo "rc=$?"' 9<"$BLOB" | tail -1)
    [[ $r == rc=1 ]] || { echo "bench: bwrap's seccomp filter did not deny unshare ($r)" >&2; exit 1; }
    local fsb
    fsb=$("${FSB[@]}" -- /bin/sh -c 'grep -E "^(CapEff|NoNewPrivs|Seccomp_filters)" /proc/self/status
        echo / $(ls /); pwd' 9<"$ONE" | tr -s '\n\t' '  ')
    [[ $fsb == "CapEff: 0000000000000000 NoNewPrivs: 1 Seccomp_filters: 1 / bin etc lib lib64 proc sbin usr work /work " ]] ||
        { echo "bench: airlock did not build floor.c's sandbox: $fsb" >&2; exit 1; }
    {
        echo "bwrap+seccomp: unshare -U inside -> $r (EPERM from the filter)"
        echo "airlock: $("$A" run -- /bin/sh -c 'unshare -U true 2>&1; echo "rc=$?"' | tail -1) for unshare -U inside"
        echo "airlock, floor's sandbox (bwrap front end): $fsb"
        echo "airlock --json capped 1 GiB: $("$A" run --json --max-output 8000 --timeout 120s -- sh -c "$BIG" \
            | jq -c '{exit_code, stdout_len: (.stdout|length), stdout_truncated}')"
        echo "airlock --json 1000 files: $("$A" run --json -- sh -c "$TASK" \
            | jq -c '{exit_code, files: (.files|length), files_skipped: (.files_skipped|length)}')"
        # The piped and sh-wrapped forms used below, with the byte count checked.
        local n
        n=$(sh -c "$(q sh -c "$BIG") | wc -c")
        echo "no sandbox | wc -c: $n bytes"
        n=$(sh -c "$(q "$A" run -- sh -c "$BIG") | wc -c")
        echo "airlock stream | wc -c: $n bytes"
        n=$(sh -c "$(q "${BWS[@]}" -- sh -c "$BIG") 9<$(q "$BLOB") | wc -c")
        echo "bwrap+seccomp stream | wc -c: $n bytes"
        [[ $n == 1073741824 ]] || { echo "bench: bwrap pipeline wrote $n bytes" >&2; exit 1; }
        rm -rf "$S"; mkdir "$S"
        sh -c "$(q "${BWS[@]}" -- sh -c "$TASK") 9<$(q "$BLOB")"
        echo "bwrap+seccomp 1000 files: $(cat "$S"/* | wc -c) bytes read back from $(ls "$S" | wc -l) files"
        rm -rf "$S"; mkdir "$S"
    } >"$OUT/sanity.txt"

    # hyperfine in ROUNDS rounds, alternating the command order; results merged by report.py.
    #   hf NAME ROUNDS RUNS WARMUP [hyperfine options...] -- LABEL CMD [LABEL CMD...]
    hf() {
        local name=$1 rounds=$2 runs=$3 warmup=$4
        shift 4
        local -a extra=() labels=() cmds=()
        while [[ $1 != -- ]]; do extra+=("$1"); shift; done
        shift
        while (($#)); do labels+=("$1"); cmds+=("$2"); shift 2; done
        local i n=${#labels[@]} rr
        for i in "${!labels[@]}"; do
            printf '%s\t%s\t%s\n' "$name" "${labels[$i]}" "${cmds[$i]}" >>"$OUT/commands.tsv"
        done
        if ((${#extra[@]})); then
            printf '%s\t%s\t%s\n' "$name" "(hyperfine options)" "$(q "${extra[@]}")" >>"$OUT/commands.tsv"
        fi
        for ((rr = 1; rr <= rounds; rr++)); do
            local -a args=()
            for ((i = 0; i < n; i++)); do
                local j=$i
                ((rr % 2 == 0)) && j=$((n - 1 - i))
                args+=(-n "${labels[$j]}" "${cmds[$j]}")
            done
            ((rounds <= 10 || rr % 50 == 1)) &&
                log "$name: hyperfine round $rr/$rounds (${n} commands x $runs runs)"
            if ! hyperfine -N --style basic --warmup "$warmup" --runs "$runs" "${extra[@]}" \
                --export-json "$OUT/$name.r$rr.json" "${args[@]}" >>"$HLOG" 2>&1; then
                tail -30 "$HLOG" >&2
                exit 1
            fi
        done
    }

    # -- 1. launch latency of /bin/true
    : >"$OUT/commands.tsv"
    hf lat "$LAT_ROUNDS" "$LAT_RUNS" "$LAT_WARMUP" -- \
        none "$(q "$WF" 9 "$BLOB" /bin/true)" \
        floor "$(q "$WF" 9 "$BLOB" "$FL" /bin/true)" \
        airlock "$(q "$WF" 9 "$BLOB" "$A" run -- /bin/true)" \
        "airlock --json" "$(q "$WF" 9 "$BLOB" "$A" run --json -- /bin/true)" \
        "airlock, floor's sandbox" "$(q "$WF" 9 "$ONE" "${FSB[@]}" -- /bin/true)" \
        bwrap+seccomp "$(q "$WF" 9 "$BLOB" "${BWS[@]}" -- /bin/true)" \
        bwrap "$(q "$WF" 9 "$BLOB" "${BW[@]}" -- /bin/true)"

    # -- 2. launches per second, 2 parallel workers, each a loop of launches
    bw_sec() { "${BWS[@]}" -- "$@" 9<"$BLOB"; }
    worker() { # END_US CMD... -> prints "completions failures" (the clock is read without a fork)
        local end=$1 n=0 f=0
        shift
        while ((${EPOCHREALTIME/[.,]/} < end)); do
            if "$@" </dev/null >/dev/null 2>&1; then n=$((n + 1)); else f=$((f + 1)); fi
        done
        echo "$n $f"
    }
    local -a TP_LABELS=(none floor airlock bwrap+seccomp bwrap)
    tput_cmd() {
        case $1 in
            none) echo /bin/true ;;
            floor) echo "$FL" /bin/true ;;
            airlock) echo "$A" run -- /bin/true ;;
            bwrap+seccomp) echo "${BWS[*]} -- /bin/true 9<$BLOB" ;;
            bwrap) echo "${BW[*]} -- /bin/true" ;;
        esac
    }
    for l in "${TP_LABELS[@]}"; do
        printf '%s\t%s\t%s\n' tput "$l" "$(tput_cmd "$l")" >>"$OUT/commands.tsv"
    done
    : >"$OUT/tput.tsv"
    local secs_us
    secs_us=$(awk -v s="$TPUT_SECS" 'BEGIN { printf "%d", s * 1000000 }')
    for ((rr = 1; rr <= TPUT_ROUNDS; rr++)); do
        local -a order=("${TP_LABELS[@]}")
        ((rr % 2 == 0)) && order=(bwrap bwrap+seccomp airlock floor none)
        for l in "${order[@]}"; do
            log "tput: round $rr/$TPUT_ROUNDS $l (2 workers, ${TPUT_SECS}s)"
            # Let deferred teardown of the previous launcher's namespaces (network namespaces
            # are destroyed by a kernel worker) finish before this launcher's clock starts.
            sleep 1
            local -a cmd
            case $l in
                none) cmd=(/bin/true) ;;
                floor) cmd=("$FL" /bin/true) ;;
                airlock) cmd=("$A" run -- /bin/true) ;;
                bwrap+seccomp) cmd=(bw_sec /bin/true) ;;
                bwrap) cmd=("${BW[@]}" -- /bin/true) ;;
            esac
            local t0 end p1 p2
            t0=$(now_us)
            end=$((t0 + secs_us))
            worker "$end" "${cmd[@]}" >"$OUT/w1" &
            p1=$!
            worker "$end" "${cmd[@]}" >"$OUT/w2" &
            p2=$!
            wait "$p1" "$p2"
            local t1 a1 f1 a2 f2
            t1=$(now_us)
            read -r a1 f1 <"$OUT/w1"
            read -r a2 f2 <"$OUT/w2"
            printf '%s\t%d\t%d\t%d\t%d\n' "$l" "$rr" "$((a1 + a2))" "$((f1 + f2))" "$((t1 - t0))" \
                >>"$OUT/tput.tsv"
        done
    done
    rm -f "$OUT/w1" "$OUT/w2"

    # -- 3. peak RSS (GNU time %M: ru_maxrss from wait4, KiB)
    : >"$OUT/rss.tsv"
    log "rss: $RSS_RUNS runs per launcher"
    local k
    for ((k = 0; k < RSS_RUNS; k++)); do
        /usr/bin/time -f "none	%M" -a -o "$OUT/rss.tsv" /bin/true
        /usr/bin/time -f "floor	%M" -a -o "$OUT/rss.tsv" "$FL" /bin/true
        /usr/bin/time -f "airlock	%M" -a -o "$OUT/rss.tsv" "$A" run -- /bin/true
        /usr/bin/time -f "bwrap+seccomp	%M" -a -o "$OUT/rss.tsv" "${BWS[@]}" -- /bin/true 9<"$BLOB"
        /usr/bin/time -f "bwrap	%M" -a -o "$OUT/rss.tsv" "${BW[@]}" -- /bin/true
    done
    printf '%s\t%s\t%s\n' rss none "/usr/bin/time -f %M /bin/true" \
        rss floor "/usr/bin/time -f %M $FL /bin/true" \
        rss airlock "/usr/bin/time -f %M $A run -- /bin/true" \
        rss bwrap+seccomp "/usr/bin/time -f %M ${BWS[*]} -- /bin/true 9<BLOB" \
        rss bwrap "/usr/bin/time -f %M ${BW[*]} -- /bin/true" >>"$OUT/commands.tsv"

    # A bash loop of $CPU_LAUNCHES launches of /bin/true by launcher $1 (3b, 3c).
    launch_loop() {
        local one
        case $1 in
            none) one='/bin/true' ;;
            floor) one="$(q "$FL" /bin/true)" ;;
            airlock) one="$(q "$A" run -- /bin/true)" ;;
            bwrap+seccomp) one="$(q "${BWS[@]}" -- /bin/true) 9<$(q "$BLOB")" ;;
            bwrap) one="$(q "${BW[@]}" -- /bin/true)" ;;
        esac
        printf '%s' "for ((i = 0; i < $CPU_LAUNCHES; i++)); do $one >/dev/null; done"
    }

    # -- 3b. CPU time per launch: perf stat's task-clock follows every descendant, reaped or
    #    not (bwrap's outer process exits without reaping the sandbox's pid 1, so rusage-based
    #    figures such as hyperfine's user/sys would miss bwrap's sandbox side).
    : >"$OUT/cpu.tsv"
    if perf stat -x, -e task-clock -o /dev/null -- /bin/true >/dev/null 2>&1; then
        log "cpu: perf stat over $CPU_LAUNCHES launches per launcher"
        local loop
        for l in none floor airlock bwrap+seccomp bwrap; do
            loop=$(launch_loop "$l")
            printf '%s\t%s\t%s\n' cpu "$l" "perf stat -x, -e task-clock -- bash -c $(q "$loop")" \
                >>"$OUT/commands.tsv"
            perf stat -x, -e task-clock -o "$OUT/perf.txt" -- bash -c "$loop"
            awk -F, -v l="$l" -v n="$CPU_LAUNCHES" '$3 ~ /^task-clock/ { printf "%s\t%.4f\n", l, $1 / n }' \
                "$OUT/perf.txt" >>"$OUT/cpu.tsv"
        done
        rm -f "$OUT/perf.txt"
    else
        log "cpu: perf stat unavailable; CPU time per launch not measured"
    fi

    # -- 3c. The whole machine's CPU per launch: every core's busy time in /proc/stat (user,
    #    nice, system, irq, softirq) over the same loop and one second after it, so the
    #    kernel's deferred work (a network namespace's cleanup in a kworker, RCU callbacks, a
    #    memory cgroup's release) counts, less the machine's idle-time background (measured
    #    over 2 s first). With 2 workers on 2 cores this is what bounds launches/s.
    busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
    local hz b0 b1 t0 t1 bg
    hz=$(getconf CLK_TCK)
    b0=$(busy_ticks) t0=$(now_us)
    sleep 2
    b1=$(busy_ticks) t1=$(now_us)
    bg=$(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN { print b / hz / (t / 1e6) }')
    : >"$OUT/mcpu.tsv"
    log "machine cpu: /proc/stat over $CPU_LAUNCHES launches per launcher (background $bg cores)"
    for l in none floor airlock bwrap+seccomp bwrap; do
        local loop
        loop=$(launch_loop "$l")
        printf '%s\t%s\t%s\n' mcpu "$l" "busy time in /proc/stat around: bash -c $(q "$loop"); sleep 1" \
            >>"$OUT/commands.tsv"
        sleep 1
        b0=$(busy_ticks) t0=$(now_us)
        bash -c "$loop"
        sleep 1
        b1=$(busy_ticks) t1=$(now_us)
        awk -v l="$l" -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v hz="$hz" -v bg="$bg" \
            -v n="$CPU_LAUNCHES" 'BEGIN { printf "%s\t%.4f\n", l, (b / hz - bg * t / 1e6) * 1000 / n }' \
            >>"$OUT/mcpu.tsv"
    done

    # -- 4. 1 GiB to stdout. hyperfine sends each command's stdout to /dev/null.
    hf bignull "$BIG_NULL_RUNS" 1 0 -- \
        "none >null" "$(q "$WF" 9 "$BLOB" /bin/sh -c "$BIG")" \
        "airlock stream >null" "$(q "$WF" 9 "$BLOB" "$A" run -- sh -c "$BIG")" \
        "bwrap+seccomp stream >null" "$(q "$WF" 9 "$BLOB" "${BWS[@]}" -- sh -c "$BIG")"
    hf big "$BIG_ROUNDS" "$BIG_RUNS" 1 -- \
        "none |cat" "$(q sh -c "$(q sh -c "$BIG") | cat >/dev/null")" \
        "airlock stream |cat" "$(q sh -c "$(q "$A" run -- sh -c "$BIG") | cat >/dev/null")" \
        "bwrap+seccomp stream |cat" "$(q sh -c "$(q "${BWS[@]}" -- sh -c "$BIG") 9<$(q "$BLOB") | cat >/dev/null")" \
        "airlock json capped" "$(q "$WF" 9 "$BLOB" "$A" run --json --max-output 8000 --timeout 120s -- sh -c "$BIG")"
    : >"$OUT/big_rss.tsv"
    log "big: peak RSS"
    for ((k = 0; k < 3; k++)); do
        /usr/bin/time -f "airlock json capped	%M	%e" -a -o "$OUT/big_rss.tsv" \
            "$A" run --json --max-output 8000 --timeout 120s -- sh -c "$BIG" >/dev/null
        /usr/bin/time -f "airlock stream >null	%M	%e" -a -o "$OUT/big_rss.tsv" \
            "$A" run -- sh -c "$BIG" >/dev/null
        /usr/bin/time -f "bwrap+seccomp stream >null	%M	%e" -a -o "$OUT/big_rss.tsv" \
            "${BWS[@]}" -- sh -c "$BIG" >/dev/null 9<"$BLOB"
    done

    # -- 5. 1000 result files of 10 bytes. airlock collects them into its JSON report (it
    #    examines at most 1000 entries); with bwrap the task writes them into the bound
    #    directory and the caller reads them back with cat. The bound directory is emptied
    #    by --prepare (not timed); airlock's scratch tmpfs is freed inside the timed run.
    hf files "$FILES_ROUNDS" "$FILES_RUNS" 2 --prepare "$(q sh -c "rm -rf $(q "$S") && mkdir $(q "$S")")" -- \
        "none" "$(q sh -c "cd $(q "$S") && { $TASK; } && cat $(q "$S")/* >/dev/null")" \
        "airlock" "$(q sh -c "exec $(q "$A" run --json -- sh -c "$TASK") >/dev/null")" \
        "bwrap+seccomp" "$(q sh -c "$(q "${BWS[@]}" -- sh -c "$TASK") 9<$(q "$BLOB") && cat $(q "$S")/* >/dev/null")"
    # -- 6. bwrap mode: 2000 --ro-bind-try of existing files (a client's long line), passed by
    #    --args on FD 9, under airlock's bwrap and under bubblewrap. bubblewrap re-reads the
    #    mount table for each read-only bind, so its setup grows quadratically.
    local ARGSF=$W/binds.args
    mapfile -t UB < <(ls /usr/bin | head -500)
    {
        printf '%s\0' --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
            --symlink usr/lib64 /lib64 --unshare-all
        for ((i = 0; i < 2000; i++)); do
            printf '%s\0' --ro-bind-try "/usr/bin/${UB[$((i % ${#UB[@]}))]}" "/b/$i"
        done
    } >"$ARGSF"
    hf binds "$BINDS_ROUNDS" "$BINDS_RUNS" 1 -- \
        "airlock bwrap" "$(q "$WF" 9 "$ARGSF" "$A" bwrap --args 9 -- /bin/true)" \
        "bwrap" "$(q "$WF" 9 "$ARGSF" "${BW[0]}" --args 9 -- /bin/true)"
    rm -rf "$S"
    log "done"
}

if [[ ${1:-} == --measure ]]; then
    measure "$2" "$3"
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Main: install, build, prepare a directory the unprivileged user can reach, measure twice,
# report.

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
T_START=$(date +%s)

if [[ $(id -u) != 0 ]]; then
    echo "bench.sh: run as root (it measures as root and as uid $UNPRIV_ID)" >&2
    exit 1
fi

echo "== airlock benchmark" >&2
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v hyperfine >/dev/null || missing+=(hyperfine)
[[ -x /usr/bin/time ]] || missing+=(time)
command -v jq >/dev/null || missing+=(jq)
command -v gcc >/dev/null || missing+=(gcc)
[[ -e /usr/include/linux/filter.h ]] || missing+=(linux-libc-dev libc6-dev)
[[ -x /usr/bin/python3 ]] || missing+=(python3)
command -v setpriv >/dev/null || missing+=(util-linux)
if ((${#missing[@]})); then
    echo "-- installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >&2
fi
# Optional packages: the run goes on without them and says what it lost.
#   optional COMMAND PACKAGE WHAT-IS-LOST
optional() {
    command -v "$1" >/dev/null && return
    echo "-- installing $2 (optional)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >&2 ||
        echo "-- $2 not installed; $3" >&2
}
optional musl-gcc musl-tools "the floor will be built with glibc (the 'floor build' row says so)"
optional perf linux-perf "CPU time per launch will not be measured"
if ! hyperfine --help | grep -q -- '--shell'; then
    echo "bench.sh: this hyperfine has no --shell=none (-N); need hyperfine >= 1.13" >&2
    exit 1
fi

if ! command -v cargo >/dev/null && [[ -x $HOME/.cargo/bin/cargo ]]; then
    PATH=$HOME/.cargo/bin:$PATH
fi
source "$REPO/scripts/target.sh"
echo "-- cargo build --release (target $AIRLOCK_TARGET)" >&2
built=0
for attempt in 1 2 3 4 5; do
    if (cd "$REPO" && cargo build --release --quiet); then
        built=1
        break
    fi
    echo "-- build failed (attempt $attempt; maybe a concurrent edit); retrying in 60 s" >&2
    sleep 60
done
((built)) || { echo "bench.sh: cargo build --release keeps failing" >&2; exit 1; }

# Built for an explicit target (scripts/target.sh), so the binary is under target/<target>/.
OUT_REL=${CARGO_TARGET_DIR:-$REPO/target}/$AIRLOCK_TARGET/release

BIN_DIR=$(mktemp -d /tmp/airlock-bench-bin.XXXXXX)
if [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs && -w /dev/shm ]]; then
    WORK_DIR=$(mktemp -d /dev/shm/airlock-bench.XXXXXX)
else
    WORK_DIR=$(mktemp -d /tmp/airlock-bench.XXXXXX)
fi
cleanup() { rm -rf "$BIN_DIR" "$WORK_DIR"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 0755 "$BIN_DIR" "$WORK_DIR"

# Everything the unprivileged user runs, in a 0755 directory.
install -m 0755 "$OUT_REL/airlock" "$BIN_DIR/airlock"
install -m 0755 "${BASH_SOURCE[0]}" "$BIN_DIR/bench.sh"
# withfd without a C library where it can be (x86-64): the harness's own exec then costs about
# 0.05 ms instead of glibc's start-up of about 1 ms, which would be added to every row.
if [[ $(uname -m) == x86_64 ]]; then
    gcc -O2 -Wall -static -nostdlib -ffreestanding -fno-tree-loop-distribute-patterns \
        -fno-stack-protector -DWITHFD_NOLIBC -o "$BIN_DIR/withfd" "$HERE/bench/withfd.c"
else
    gcc -O2 -Wall -o "$BIN_DIR/withfd" "$HERE/bench/withfd.c"
fi
# The floor is built static with musl, as airlock is: a glibc build would add glibc's start-up
# (about 1.2 ms on this VM, CPUID probing) to the floor and flatter every airlock/floor ratio.
# The kernel's uapi headers come from the host's include directories, after musl's own.
if command -v musl-gcc >/dev/null &&
    musl-gcc -O2 -Wall -static -idirafter /usr/include \
        -idirafter "/usr/include/$(gcc -dumpmachine)" \
        -o "$BIN_DIR/floor" "$HERE/bench/floor.c"; then
    FLOOR_BUILD="static, $(dpkg-query -W -f='musl ${Version}' musl-dev 2>/dev/null || echo musl)"
else
    echo "-- musl-gcc failed or is missing: the floor is built with glibc" >&2
    gcc -O2 -Wall -o "$BIN_DIR/floor" "$HERE/bench/floor.c"
    FLOOR_BUILD="dynamic, glibc: its start-up (about 1 ms here) is part of every floor figure"
fi
# bubblewrap runs under airlock's own program as written by `airlock seccomp-bpf` (8 bytes an
# instruction): the one `airlock run` installs, less its rules on core limit changes.
"$BIN_DIR/airlock" seccomp-bpf >"$BIN_DIR/seccomp.bpf"
BLOB_INSNS=$(($(stat -c %s "$BIN_DIR/seccomp.bpf") / 8))
# floor.c's filter as a program for --seccomp: one struct sock_filter, BPF_RET|BPF_K (code 6)
# returning SECCOMP_RET_ALLOW (0x7fff0000), little-endian as on x86-64 and aarch64.
printf '\x06\x00\x00\x00\x00\x00\xff\x7f' >"$BIN_DIR/allow.bpf"
chmod 0644 "$BIN_DIR/seccomp.bpf" "$BIN_DIR/allow.bpf"

# The hot-code layout (build.rs): how many of the functions src/hot-code/<target>.order lists the
# binary holds, and within how much of it (a stale list or a default link spreads them).
LAYOUT="src/hot-code/$AIRLOCK_TARGET.order: $(python3 "$HERE/bench/layout.py" "$BIN_DIR/airlock" "$REPO/src/hot-code/$AIRLOCK_TARGET.order")"

mkdir -m 0755 "$WORK_DIR/root" "$WORK_DIR/unpriv"
chown "$UNPRIV_ID:$UNPRIV_ID" "$WORK_DIR/unpriv"

# The kernel finishes tearing namespaces down in the background: right after a burst of
# sandboxes (a test run, say) every launch, the floor's included, is 2-4x slower for a minute
# or two. Wait (at most 3 minutes) until two probes of 20 floor launches, 10 s apart, agree
# within 10% before measuring.
settle() {
    local prev=0 cur i k t0 t1
    for ((i = 0; i < 18; i++)); do
        local -a ms=()
        for ((k = 0; k < 20; k++)); do
            t0=$(date +%s%N)
            "$BIN_DIR/floor" /bin/true
            t1=$(date +%s%N)
            ms+=($(((t1 - t0) / 1000)))
        done
        cur=$(printf '%s\n' "${ms[@]}" | sort -n | sed -n 10p)
        if ((prev > 0 && cur * 10 < prev * 11 && cur * 10 > prev * 9)); then
            echo "-- settled: floor launch ${cur} us" >&2
            return
        fi
        prev=$cur
        sleep 10
    done
    echo "-- the machine did not settle (floor launch ${cur} us); measuring anyway" >&2
}

settle
export BENCH_LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
echo "-- measuring as root" >&2
bash "$BIN_DIR/bench.sh" --measure "$BIN_DIR" "$WORK_DIR/root"
settle
echo "-- measuring as uid $UNPRIV_ID" >&2
(cd / && setpriv --reuid="$UNPRIV_ID" --regid="$UNPRIV_ID" --clear-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/ LC_ALL=C \
    bash "$BIN_DIR/bench.sh" --measure "$BIN_DIR" "$WORK_DIR/unpriv")

export BENCH_LOADAVG_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
# Metadata for the report.
rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    rev="$rev + uncommitted changes"
fi
export BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
export BENCH_KERNEL="$(uname -r) ($(uname -m))"
export BENCH_CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
export BENCH_AIRLOCK_REV=$rev
export BENCH_AIRLOCK_VERSION=$("$BIN_DIR/airlock" --version 2>/dev/null || echo unknown)
export BENCH_BWRAP_VERSION=$(bwrap --version)
export BENCH_HYPERFINE_VERSION=$(hyperfine --version)
export BENCH_RUSTC=$(rustc --version 2>/dev/null || echo unknown)
export BENCH_TARGET=$AIRLOCK_TARGET
export BENCH_BLOB_INSNS=$BLOB_INSNS
export BENCH_LAYOUT=$LAYOUT
export BENCH_FLOOR_BUILD=$FLOOR_BUILD
export BENCH_BIN_DIR=$BIN_DIR
export BENCH_WORK_DIR=$WORK_DIR
export BENCH_UNPRIV_ID=$UNPRIV_ID
export BENCH_PARAMS="latency: $LAT_ROUNDS rounds x $LAT_RUNS runs (+$LAT_WARMUP warmup each); throughput: $TPUT_ROUNDS rounds x ${TPUT_SECS}s per launcher; RSS: $RSS_RUNS runs; 1 GiB: $BIG_NULL_RUNS runs to /dev/null interleaved one by one, $BIG_ROUNDS rounds x $BIG_RUNS runs through a pipe and --json (+1 warmup); files: $FILES_ROUNDS rounds x $FILES_RUNS runs (+2 warmup); 2000 binds: $BINDS_ROUNDS rounds x $BINDS_RUNS runs"
export BENCH_SECONDS=$(($(date +%s) - T_START))

/usr/bin/python3 "$HERE/bench/report.py" "$WORK_DIR/root/out" "$WORK_DIR/unpriv/out" \
    "$REPO/BENCHMARKS.md"
