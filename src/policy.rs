//! The seccomp policy compiler: turns `seccomp/<arch>.json` (seccompiler's JSON format) into
//! one classic-BPF program. build.rs runs it at build time, so no launch parses or compiles
//! anything; the unit tests below prove the program decides every syscall exactly as
//! seccompiler's own programs for the same file, installed one after the other, would.
//!
//! Why not install seccompiler's programs as they are: they test the syscall number against
//! every rule in turn (x86_64's `deny` is 832 instructions today), and the kernel pays for that
//! at install time, when it runs the program for every syscall number to build its cache of
//! always-allowed calls, and again on every syscall of the task that takes arguments it checks.
//! Here all filters of the file become one program that finds the syscall number by binary
//! search, then tests only that syscall's rules:
//!
//! ```text
//!   A = arch; if A != AUDIT_ARCH: kill the process      (as seccompiler's programs do)
//!   A = nr;   binary search on A over runs of numbers that answer alike (jge splits, each
//!             where the numbers on either side are closest to half); the run above
//!             NEWEST_REVIEWED answers ENOSYS (newer calls, and x86_64's x32 ABI)
//!   per run:  ALLOW, one answer, or one syscall's rules in order, each an AND of argument
//!             tests; first match returns, else ALLOW
//! ```
//!
//! Then two passes over the program: every `ret` becomes one shared `ret` per answer at the
//! end (`share_returns`), and a load of the word A already holds is dropped (`drop_reloads`).
//! Within a syscall's rules, one-bit `masked_eq` tests of one word with the same answer are
//! one `jset` (`clone`'s namespace flags), and a 64-bit `ne` is one test of both halves.
//! What the kernel pays per install grows with the instructions (it converts and JIT-compiles
//! each) and with the steps the program takes for each syscall number (it runs it for every
//! number to build its cache). x86_64.json: 193 instructions and 5885 steps for the 463
//! numbers before these changes, 131 and 4277 after; an install 76.4 -> 60.0 µs (medians of
//! 2000 in a C loop, each in a fresh fork; 13.4 µs for a one-instruction program). With the
//! O_ASYNC and F_SETSIG rules added since: 139 instructions, the same 4277 steps; with the
//! rules on internet sockets' protocols and socket filters, 164 instructions; 278 today
//! (aarch64: 257), with the rules seccomp/README.md lists added since.
//!
//! Used from build.rs (`#[path]`) and from the crate's tests; it needs a resolver from
//! syscall names to numbers, which build.rs takes from seccompiler's table for the target.

use std::collections::BTreeMap;

/// One classic-BPF instruction: (code, jt, jf, k).
pub type Insn = (u16, u8, u8, u32);

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JGT_K: u16 = 0x25;
const JSET_K: u16 = 0x45;
const JA: u16 = 0x05;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

pub const RET_ALLOW: u32 = 0x7fff_0000;
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_TRAP: u32 = 0x0003_0000;
const RET_ERRNO: u32 = 0x0005_0000;
/// The same number on x86_64 and aarch64.
const ENOSYS: u32 = 38;

/// The newest syscall this policy has been reviewed against. Every syscall number above its
/// number answers ENOSYS ("not on this kernel", which libcs and runtimes take as a cue to fall
/// back), so a call a newer kernel adds is out of the sandbox's reach until someone reads it
/// and moves this line. On x86_64 that also answers every x32-ABI call (bit 0x40000000: the
/// x32 ABI reports the same AUDIT_ARCH_X86_64 with other numbers, through which `mount` or
/// `unshare` could otherwise be reached). Both architectures number new syscalls alike since
/// 5.1, so one name serves both.
pub const NEWEST_REVIEWED: &str = "mseal";

/// About how many syscall numbers above NEWEST_REVIEWED the kernel has (469 on x86_64 with
/// 6.18 against mseal's 462): it runs the program for each number it has at every install, so
/// this weighs the ENOSYS run in the search tree. It shapes the tree only, never a decision.
const NEWER_IN_CACHE: u32 = 8;

/// The policy's filters, in the order their rules take precedence when two would answer the
/// same call differently (the later one wins, as if installed after).
pub const FILTERS: &[&str] = &["noop", "deny", "enosys"];

/// The calls whose rules stand only beside the 1-byte `RLIMIT_CORE` that `airlock run`'s init
/// sets (src/limits.rs): `noop` answers a change of that limit 0 and leaves it, and `deny`
/// refuses a change that also reads the old one. Under another launcher (bubblewrap given
/// `airlock seccomp-bpf`'s program) the limit is the caller's, and those rules would freeze it:
/// a program that lowers it to 0 before it holds keys (gpg-agent, ssh-agent) would be told it
/// had, and a crash would write its memory in a core file (in its working directory, a bind of
/// the host's, under the default `core_pattern`). That program is compiled without them.
pub const CORE_LIMIT_CALLS: [&str; 2] = ["setrlimit", "prlimit64"];

/// The policy `text` with every rule of `calls` taken out, in every filter.
pub fn without_rules_of(text: &str, calls: &[&str]) -> Result<String, String> {
    let mut v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let filters = v.as_object_mut().ok_or("the policy is not a JSON object")?;
    for (name, filter) in filters.iter_mut() {
        let rules = (filter.get_mut("filter").and_then(|r| r.as_array_mut()))
            .ok_or_else(|| format!("filter {name:?} has no rule list"))?;
        rules.retain(|r| !r["syscall"].as_str().is_some_and(|s| calls.contains(&s)));
    }
    Ok(v.to_string())
}

/// The target architecture, as the kernel reports it in `seccomp_data.arch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    pub fn audit(self) -> u32 {
        match self {
            Arch::X86_64 => 0xc000_003e,
            Arch::Aarch64 => 0xc000_00b7,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    MaskedEq(u32),
    /// Any bit of the mask set: several one-bit `masked_eq` rules of one group, merged.
    AnyBit(u32),
    /// A `qword` `ne`: the whole argument differs from (this high half, `val` low half).
    Ne64(u32),
}

/// One argument test: a 32-bit half of argument `index` (the low one, as `dword` tests; the
/// high one only for a `qword` test's second half) against `val`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cond {
    index: u8,
    high: bool,
    op: Op,
    val: u32,
}

/// What one syscall answers: groups of rules, in the order the kernel's precedence between
/// filters would pick them; within a group, any rule (an AND of conditions) matching returns
/// the group's action.
#[derive(Debug, Default)]
struct Entry {
    groups: Vec<(u32, Vec<Vec<Cond>>)>,
}

/// Compile the filters named in `order` (install order: a later filter wins a tie, as in the
/// kernel) from the policy `text` into one program.
pub fn compile(
    text: &str,
    order: &[&str],
    arch: Arch,
    resolve: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<Insn>, String> {
    let p = unshared(text, order, arch, resolve)?;
    let p = drop_reloads(&share_returns(&p));
    if p.len() > 4096 {
        return Err(format!(
            "the program has {} instructions (kernel limit 4096)",
            p.len()
        ));
    }
    Ok(p)
}

/// [`compile`]'s program before its two passes: every return where its rule put it, every
/// load made (the tests check what `share_returns` left in place against this).
pub fn unshared(
    text: &str,
    order: &[&str],
    arch: Arch,
    resolve: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<Insn>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let obj = v.as_object().ok_or("the policy is not a JSON object")?;
    for name in obj.keys() {
        if !order.contains(&name.as_str()) {
            return Err(format!(
                "filter {name:?} is not one airlock installs ({order:?})"
            ));
        }
    }
    let newest = resolve(NEWEST_REVIEWED)
        .ok_or_else(|| format!("the newest reviewed syscall {NEWEST_REVIEWED:?} has no number"))?;
    let mut table: BTreeMap<u32, Entry> = BTreeMap::new();
    // The kernel runs the newest filter first and keeps the first of equal precedence.
    for name in order.iter().rev() {
        let f = obj
            .get(*name)
            .ok_or_else(|| format!("no filter named {name:?}"))?;
        if f["mismatch_action"] != "allow" {
            return Err(format!("{name}: mismatch_action must be \"allow\""));
        }
        let action = action(&f["filter_action"]).map_err(|e| format!("{name}: {e}"))?;
        let rules = f["filter"]
            .as_array()
            .ok_or_else(|| format!("{name}: \"filter\" is not a list"))?;
        for (i, rule) in rules.iter().enumerate() {
            let ctx = |e: String| format!("{name} rule {i}: {e}");
            let sys = rule["syscall"]
                .as_str()
                .ok_or_else(|| ctx("no \"syscall\" name".into()))?;
            let nr = resolve(sys).ok_or_else(|| ctx(format!("unknown syscall {sys:?}")))?;
            if nr > newest {
                return Err(ctx(format!(
                    "{sys} ({nr}) is newer than {NEWEST_REVIEWED} ({newest}), past which every \
                     call answers ENOSYS: review it and move NEWEST_REVIEWED"
                )));
            }
            // The rule as rules of 32-bit tests, any of which matching matches it: one, unless
            // a qword `ne` splits it in two (either half differs).
            let mut alternatives: Vec<Vec<Cond>> = vec![vec![]];
            let tests = match rule.get("args") {
                None => vec![],
                Some(a) => a
                    .as_array()
                    .ok_or_else(|| ctx("\"args\" is not a list".into()))?
                    .iter()
                    .map(cond)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(ctx)?,
            };
            for any_of in tests {
                alternatives = alternatives
                    .iter()
                    .flat_map(|all| {
                        any_of.iter().map(move |c| {
                            let mut all = all.clone();
                            all.extend_from_slice(c);
                            all
                        })
                    })
                    .collect();
            }
            let groups = &mut table.entry(nr).or_default().groups;
            match groups.iter_mut().find(|(a, _)| *a == action) {
                Some((_, rs)) => rs.extend(alternatives),
                None => groups.push((action, alternatives)),
            }
        }
    }
    // Precedence across actions: the lowest signed action value wins (kill before trap
    // before errno before allow); the sort is stable, so equal actions keep install order.
    for e in table.values_mut() {
        e.groups.sort_by_key(|(a, _)| (a & 0xffff_0000) as i32);
    }

    let mut p: Vec<Insn> = vec![
        (LD_W_ABS, 0, 0, 4),
        (JEQ_K, 1, 0, arch.audit()),
        (RET_K, 0, 0, RET_KILL_PROCESS),
        (LD_W_ABS, 0, 0, 0),
    ];
    for e in table.values_mut() {
        for (_, rules) in &mut e.groups {
            merge_bit_rules(rules);
        }
    }
    let mut runs = intervals(&table, newest)?;
    runs.push((newest + 1, vec![(RET_K, 0, 0, RET_ERRNO | ENOSYS)]));
    p.extend(search(&runs, newest + 1 + NEWER_IN_CACHE)?);
    Ok(p)
}

fn action(v: &serde_json::Value) -> Result<u32, String> {
    if let Some(n) = v.get("errno").and_then(|n| n.as_u64()) {
        return u32::try_from(n)
            .ok()
            .filter(|n| *n <= 0xffff)
            .map(|n| RET_ERRNO | n)
            .ok_or_else(|| format!("errno {n} out of range"));
    }
    match v.as_str() {
        Some("kill_process") => Ok(RET_KILL_PROCESS),
        Some("trap") => Ok(RET_TRAP),
        _ => Err(format!(
            "filter_action {v} is not one airlock compiles (errno, kill_process, trap)"
        )),
    }
}

/// One argument test as 32-bit tests: any of the returned lists matching (all of its tests)
/// matches it. A `dword` test is one test of the low half; a `qword` test, `eq` or `ne` only,
/// is both halves equal, or either half different.
fn cond(c: &serde_json::Value) -> Result<Vec<Vec<Cond>>, String> {
    let index = c["index"]
        .as_u64()
        .filter(|i| *i < 6)
        .ok_or_else(|| format!("bad argument index {}", c["index"]))? as u8;
    if c["type"] == "qword" {
        let val = c["val"]
            .as_u64()
            .ok_or_else(|| format!("{} is not a 64-bit value", c["val"]))?;
        let half = |high: bool, op: Op| Cond {
            index,
            high,
            op,
            val: if high { (val >> 32) as u32 } else { val as u32 },
        };
        return match c["op"].as_str() {
            Some("eq") => Ok(vec![vec![half(false, Op::Eq), half(true, Op::Eq)]]),
            Some("ne") => Ok(vec![vec![half(false, Op::Ne64((val >> 32) as u32))]]),
            _ => Err(format!(
                "only \"eq\" and \"ne\" qword tests are compiled, not {}",
                c["op"]
            )),
        };
    }
    if c["type"] != "dword" {
        return Err(format!(
            "only \"dword\" and \"qword\" argument tests are compiled, not {}",
            c["type"]
        ));
    }
    let word = |v: &serde_json::Value| {
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("{v} is not a 32-bit value"))
    };
    let val = word(&c["val"])?;
    let op = match &c["op"] {
        serde_json::Value::String(s) => match s.as_str() {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "lt" => Op::Lt,
            "le" => Op::Le,
            "gt" => Op::Gt,
            "ge" => Op::Ge,
            other => return Err(format!("unknown op {other:?}")),
        },
        o => Op::MaskedEq(word(&o["masked_eq"])?),
    };
    Ok(vec![vec![Cond {
        index,
        high: false,
        op,
        val,
    }]])
}

/// A test that passes when any bit of its mask is set in the word: a one-bit `masked_eq`
/// (`flags & BIT == BIT`) or bits already merged.
fn bit_test(c: &Cond) -> Option<u32> {
    match c.op {
        Op::MaskedEq(m) if m == c.val && m.is_power_of_two() => Some(m),
        Op::AnyBit(m) => Some(m),
        _ => None,
    }
}

/// One group's rules with every two rules that differ only in a bit test of the same argument
/// word folded into one rule that tests any of their bits, where the first stood, until no two
/// such rules are left: the group answers the same action for any of its rules, so their order
/// within it does not matter, and (A and x & B1) or (A and x & B2) is A and x & (B1 | B2).
/// `clone`'s seven namespace flags become one load and one `jset` instead of seven loads,
/// `and`s and `jeq`s; `openat`'s four rules (`O_CREAT` or `O_TMPFILE`, with `S_ISUID` or
/// `S_ISGID`) become one rule of two `jset`s.
fn merge_bit_rules(rules: &mut Vec<Vec<Cond>>) {
    'again: loop {
        for j in 1..rules.len() {
            for i in 0..j {
                let Some(k) = differs_in_one_bit_test(&rules[i], &rules[j]) else {
                    continue;
                };
                let mask =
                    bit_test(&rules[i][k]).unwrap_or(0) | bit_test(&rules[j][k]).unwrap_or(0);
                rules[i][k].op = Op::AnyBit(mask);
                rules[i][k].val = mask;
                rules.remove(j);
                continue 'again;
            }
        }
        return;
    }
}

/// The one place where two rules' tests differ, when there is exactly one and both tests there
/// are bit tests of the same argument word.
fn differs_in_one_bit_test(a: &[Cond], b: &[Cond]) -> Option<usize> {
    if a.len() != b.len() {
        return None;
    }
    let mut differ = (0..a.len()).filter(|&k| a[k] != b[k]);
    let k = differ.next()?;
    let (x, y) = (&a[k], &b[k]);
    let same_word = (x.index, x.high) == (y.index, y.high);
    (differ.next().is_none() && same_word && bit_test(x).is_some() && bit_test(y).is_some())
        .then_some(k)
}

/// The syscall numbers 0..=`newest` as runs of neighbours that answer alike: (first number,
/// the code that decides them). A syscall no filter names is ALLOW; neighbours whose rules
/// compile to the same code share one run (the mount family, 163-173 on x86_64, is one).
fn intervals(table: &BTreeMap<u32, Entry>, newest: u32) -> Result<Vec<(u32, Vec<Insn>)>, String> {
    let allow = vec![(RET_K, 0, 0, RET_ALLOW)];
    let mut runs: Vec<(u32, Vec<Insn>)> = Vec::new();
    let push = |runs: &mut Vec<(u32, Vec<Insn>)>, from: u32, code: Vec<Insn>| {
        if runs.last().is_none_or(|(_, last)| *last != code) {
            runs.push((from, code));
        }
    };
    let mut next = 0;
    for (&nr, e) in table.range(..=newest) {
        if nr > next {
            push(&mut runs, next, allow.clone());
        }
        push(&mut runs, nr, handler(e)?);
        next = nr + 1;
    }
    if next <= newest {
        push(&mut runs, next, allow);
    }
    Ok(runs)
}

/// Code that finds A (the syscall number) among the `runs` (each from its first number up to
/// the next run's; the last one up from its first) by binary search and runs that run's code: a
/// `jge` at each split, the code itself at each leaf. `end` is where the last run is counted to
/// end when weighing a split. Every jump is forward; a jump too long for the 8-bit offsets goes
/// through a `ja`.
fn search(runs: &[(u32, Vec<Insn>)], end: u32) -> Result<Vec<Insn>, String> {
    let [(first, code), ..] = runs else {
        return Err("no syscall numbers to search".into());
    };
    if runs.len() == 1 {
        return Ok(code.clone());
    }
    // Split where the numbers on either side are closest to half: the kernel runs the program
    // for every number at each install, so wide runs sit near the root.
    let middle = u64::from(*first) + u64::from(end);
    let mid = (1..runs.len())
        .min_by_key(|&i| (2 * u64::from(runs[i].0)).abs_diff(middle))
        .unwrap_or(1);
    let left = search(&runs[..mid], runs[mid].0)?;
    let right = search(&runs[mid..], end)?;
    let mut out = Vec::new();
    if left.len() <= 255 {
        out.push((JGE_K, jump(left.len())?, 0, runs[mid].0));
    } else {
        // if A >= k: fall into the ja to the right half; else skip it.
        out.push((JGE_K, 0, 1, runs[mid].0));
        out.push((JA, 0, 0, left.len() as u32));
    }
    out.extend(left);
    out.extend(right);
    Ok(out)
}

/// Where instruction `i` of `p` can go next, or None for an instruction or a jump this
/// compiler does not emit, or a jump past the end.
fn successors(p: &[Insn], i: usize) -> Option<Vec<usize>> {
    let to = |off: u32| Some(i + 1 + off as usize).filter(|t| *t < p.len());
    let (code, jt, jf, k) = p[i];
    match code {
        LD_W_ABS | AND_K => to(0).map(|t| vec![t]),
        RET_K => Some(vec![]),
        JA => to(k).map(|t| vec![t]),
        JEQ_K | JGE_K | JGT_K | JSET_K => Some(vec![to(jt.into())?, to(jf.into())?]),
        _ => None,
    }
}

/// The same program without the loads that reload the word A already holds on every path
/// into them (an argument tested again by the next rule of the same syscall); jumps into a
/// dropped load go to the instruction after it. Offsets only shrink. A program holding an
/// instruction this compiler does not emit is returned as it was.
pub fn drop_reloads(p: &[Insn]) -> Vec<Insn> {
    let Some(next) = (0..p.len())
        .map(|i| successors(p, i))
        .collect::<Option<Vec<_>>>()
    else {
        return p.to_vec();
    };
    // What A holds on entry to each instruction: Some(offset) if every path into it leaves
    // the word loaded from that offset, None if unknown; jumps only go forward.
    let mut held: Vec<Option<Option<u32>>> = vec![None; p.len()];
    if !p.is_empty() {
        held[0] = Some(None);
    }
    for i in 0..p.len() {
        let here = held[i].flatten();
        let after = match p[i] {
            (LD_W_ABS, _, _, k) => Some(k),
            (AND_K, ..) => None,
            _ => here,
        };
        for &t in &next[i] {
            held[t] = match held[t] {
                None => Some(after),
                Some(h) if h == after => Some(h),
                Some(_) => Some(None),
            };
        }
    }
    let keep: Vec<bool> = (0..p.len())
        .map(|i| !(p[i].0 == LD_W_ABS && held[i] == Some(Some(p[i].3))))
        .collect();
    let mut new_index = Vec::with_capacity(p.len());
    let mut n = 0;
    for &k in &keep {
        new_index.push(n);
        n += k as usize;
    }
    let mut out = Vec::with_capacity(n);
    for i in (0..p.len()).filter(|&i| keep[i]) {
        let (code, jt, jf, k) = p[i];
        // t > i and i is kept, so the new offset is never negative, and never longer.
        let off = |o: u32| new_index[i + 1 + o as usize] - new_index[i] - 1;
        out.push(match code {
            JA => (JA, 0, 0, off(k) as u32),
            JEQ_K | JGE_K | JGT_K | JSET_K => (code, off(jt.into()) as u8, off(jf.into()) as u8, k),
            _ => (code, jt, jf, k),
        });
    }
    out
}

/// The same program with one `ret` per distinct action, at its end, which every jump that
/// led to a `ret` now reaches directly; the `ret`s no longer reached are dropped. The kernel
/// converts, checks and JIT-compiles every instruction at each install, and 91 of the
/// program's 220 were returns (x86_64.json then: 220 -> 130 instructions; an install took
/// 89-90 -> 64-72 µs). A `ret` that a jump could not reach at the end within its 8-bit
/// offset stays where it was, for that jump (the architecture check's kill, once the program
/// passed 256 instructions). Should the program not come out shorter, or hold an instruction
/// or a jump this compiler does not emit, it is returned as it was.
pub fn share_returns(p: &[Insn]) -> Vec<Insn> {
    let is_cond = |code: u16| matches!(code, JEQ_K | JGE_K | JGT_K | JSET_K);
    let Some(next) = (0..p.len())
        .map(|i| successors(p, i))
        .collect::<Option<Vec<_>>>()
    else {
        return p.to_vec();
    };
    let mut rets: Vec<u32> = Vec::new();
    for &(code, _, _, k) in p {
        if code == RET_K && !rets.contains(&k) {
            rets.push(k);
        }
    }
    // The rets that stay where they are, grown until every jump fits. Each pass that does not
    // return keeps one more ret in place, so there are at most as many passes as instructions;
    // the bound makes a fault in that reasoning give the program back unchanged, not hang.
    let mut stay = vec![false; p.len()];
    'layout: for _ in 0..=p.len() {
        // Where each jump goes: an instruction of `p`, or (as p.len() + n) the n-th shared ret.
        let retarget = |t: usize| match p[t] {
            (RET_K, _, _, k) if !stay[t] => {
                p.len() + rets.iter().position(|r| *r == k).unwrap_or(0)
            }
            _ => t,
        };
        let targets: Vec<Vec<usize>> = next
            .iter()
            .map(|n| n.iter().map(|&t| retarget(t)).collect())
            .collect();
        // A ret is emitted where it stays, or where it is still reached: first, or after an
        // instruction that is not a jump or a ret (a load, as in an empty policy's program).
        let keep: Vec<bool> = (0..p.len())
            .map(|i| {
                p[i].0 != RET_K
                    || stay[i]
                    || i == 0
                    || !(is_cond(p[i - 1].0) || matches!(p[i - 1].0, JA | RET_K))
            })
            .collect();
        // The shared rets some emitted jump still reaches, in order, after the program.
        let used: Vec<bool> = (0..rets.len())
            .map(|r| (0..p.len()).any(|i| keep[i] && targets[i].contains(&(p.len() + r))))
            .collect();
        let mut new_index = vec![0; p.len() + rets.len()];
        let mut n = 0;
        for i in 0..p.len() {
            new_index[i] = n;
            n += keep[i] as usize;
        }
        for r in (0..rets.len()).filter(|&r| used[r]) {
            new_index[p.len() + r] = n;
            n += 1;
        }
        let mut out = Vec::with_capacity(n);
        for i in (0..p.len()).filter(|&i| keep[i]) {
            let (code, jt, jf, k) = p[i];
            let off = |t: usize| new_index[t] - new_index[i] - 1;
            out.push(match code {
                JA => (JA, 0, 0, off(targets[i][0]) as u32),
                c if is_cond(c) => {
                    let offs = [off(targets[i][0]), off(targets[i][1])];
                    match (u8::try_from(offs[0]), u8::try_from(offs[1])) {
                        (Ok(jt), Ok(jf)) => (code, jt, jf, k),
                        _ => {
                            // Too far for a shared ret: the ret it led to stays. Too far for
                            // anything else: nothing to be done.
                            let mut moved = false;
                            for side in 0..2 {
                                if offs[side] > 255 && targets[i][side] >= p.len() {
                                    stay[next[i][side]] = true;
                                    moved = true;
                                }
                            }
                            if !moved {
                                return p.to_vec();
                            }
                            continue 'layout;
                        }
                    }
                }
                _ => (code, jt, jf, k),
            });
        }
        out.extend(
            (0..rets.len())
                .filter(|&r| used[r])
                .map(|r| (RET_K, 0, 0, rets[r])),
        );
        if out.len() >= p.len() {
            return p.to_vec();
        }
        return out;
    }
    p.to_vec()
}

fn jump(n: usize) -> Result<u8, String> {
    u8::try_from(n).map_err(|_| format!("a jump of {n} instructions in a syscall's rules"))
}

/// One syscall's rules: each rule's tests in turn (a failing test jumps to the next rule),
/// the action when all pass; ALLOW after the last rule.
fn handler(e: &Entry) -> Result<Vec<Insn>, String> {
    let mut out = Vec::new();
    for (action, rules) in &e.groups {
        for conds in rules {
            if conds.is_empty() {
                out.push((RET_K, 0, 0, *action));
                return Ok(out); // nothing after an unconditional rule can be reached
            }
            // Each test is a load, maybe an AND, and one jump; `fail` counts the
            // instructions left in this rule after the jump, to skip to the next rule.
            let sizes: Vec<usize> = conds
                .iter()
                .map(|c| {
                    match c.op {
                        Op::MaskedEq(_) => 3,
                        Op::Ne64(_) => 4,
                        _ => 2, // a load and a jump; AnyBit's jump is a jset
                    }
                })
                .collect();
            let total: usize = sizes.iter().sum::<usize>() + 1; // + the ret
            let mut done = 0;
            for (c, size) in conds.iter().zip(&sizes) {
                done += size;
                let fail = jump(total - done)?;
                // seccomp_data.args[index], little-endian on both architectures.
                let word = 16 + 8 * c.index as u32 + 4 * c.high as u32;
                out.push((LD_W_ABS, 0, 0, word));
                match c.op {
                    Op::MaskedEq(m) => out.push((AND_K, 0, 0, m)),
                    // The low halves differ: the test passes (skip the high half's test).
                    Op::Ne64(_) => out.extend([(JEQ_K, 0, 2, c.val), (LD_W_ABS, 0, 0, word + 4)]),
                    _ => {}
                }
                out.push(match c.op {
                    Op::Eq | Op::MaskedEq(_) => (JEQ_K, 0, fail, c.val),
                    Op::Ne => (JEQ_K, fail, 0, c.val),
                    Op::Gt => (JGT_K, 0, fail, c.val),
                    Op::Ge => (JGE_K, 0, fail, c.val),
                    Op::Lt => (JGE_K, fail, 0, c.val),
                    Op::Le => (JGT_K, fail, 0, c.val),
                    Op::AnyBit(m) => (JSET_K, 0, fail, m),
                    Op::Ne64(high) => (JEQ_K, fail, 0, high),
                });
            }
            out.push((RET_K, 0, 0, *action));
        }
    }
    out.push((RET_K, 0, 0, RET_ALLOW));
    Ok(out)
}

/// The number seccompiler's table gives a syscall name for `arch`: read off the program it
/// compiles for a one-rule filter (its arch check, the load of the number, then the jeq).
pub fn seccompiler_nr(name: &str, arch: seccompiler::TargetArch) -> Option<u32> {
    let json = serde_json::json!({"f": {"mismatch_action": "allow", "filter_action": "trap",
        "filter": [{"syscall": name}]}});
    let map = seccompiler::compile_from_json(json.to_string().as_bytes(), arch).ok()?;
    match map.get("f")?.get(3..5)? {
        [ld, jeq] if (ld.code, ld.k, jeq.code) == (LD_W_ABS, 0, JEQ_K) => Some(jeq.k),
        _ => None,
    }
}

/// Run a classic-BPF seccomp program on (nr, arch, args), as the kernel would (the subset of
/// instructions seccompiler and this compiler emit).
pub fn run(prog: &[Insn], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
    let word = |off: u32| -> u32 {
        match off {
            0 => nr,
            4 => arch,
            o if (16..64).contains(&o) => {
                let a = args[((o - 16) / 8) as usize];
                if o % 8 == 0 {
                    a as u32
                } else {
                    (a >> 32) as u32
                }
            }
            o => panic!("load from offset {o}"),
        }
    };
    let (mut a, mut pc) = (0u32, 0usize);
    loop {
        let (code, jt, jf, k) = prog[pc];
        pc += 1;
        let cond = |taken: bool| if taken { jt as usize } else { jf as usize };
        match code {
            LD_W_ABS => a = word(k),
            AND_K => a &= k,
            JA => pc += k as usize,
            JEQ_K => pc += cond(a == k),
            JGE_K => pc += cond(a >= k),
            JGT_K => pc += cond(a > k),
            JSET_K => pc += cond(a & k != 0),
            RET_K => return k,
            other => panic!("instruction code {other:#x} at {}", pc - 1),
        }
    }
}
