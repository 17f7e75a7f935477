//! The seccomp policy compiler: turns `seccomp/<arch>.json` (seccompiler's JSON format) into
//! one classic-BPF program. build.rs runs it at build time, so no launch parses or compiles
//! anything; the unit tests below prove the program decides every syscall exactly as
//! seccompiler's own programs for the same file, installed one after the other, would.
//!
//! Why not install seccompiler's programs as they are: they test the syscall number against
//! every rule in turn (a `deny` of 70 rules is 384 instructions), and the kernel pays for that
//! at install time, when it runs the program for every syscall number to build its cache of
//! always-allowed calls, and again on every syscall of the task that takes arguments it checks.
//! Here all filters of the file become one program that finds the syscall number by binary
//! search, then tests only that syscall's rules:
//!
//! ```text
//!   A = arch; if A != AUDIT_ARCH: kill the process      (as seccompiler's programs do)
//!   A = nr;   if A > NEWEST_REVIEWED: ENOSYS             (newer calls, and x86_64's x32 ABI)
//!   binary search on A over the named syscalls           (jge splits, jeq leaves)
//!   per syscall: its rules in order, each an AND of argument tests; first match returns
//!   anything else: ALLOW
//! ```
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

/// The policy's filters, in the order their rules take precedence when two would answer the
/// same call differently (the later one wins, as if installed after).
pub const FILTERS: &[&str] = &["noop", "deny", "enosys"];

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
}

/// One argument test: a 32-bit half of argument `index` (the low one, as `dword` tests; the
/// high one only for a `qword` test's second half) against `val`.
#[derive(Debug, Clone, Copy)]
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
        (JGT_K, 0, 1, newest),
        (RET_K, 0, 0, RET_ERRNO | ENOSYS),
    ];
    let keys: Vec<u32> = table.keys().copied().collect();
    p.extend(search(&keys, &table)?);
    let p = share_returns(&p);
    if p.len() > 4096 {
        return Err(format!(
            "the program has {} instructions (kernel limit 4096)",
            p.len()
        ));
    }
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
            Some("ne") => Ok(vec![vec![half(false, Op::Ne)], vec![half(true, Op::Ne)]]),
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

/// Code that finds A (the syscall number) among `keys` and runs its entry; ALLOW if absent.
/// Every jump is forward; a jump too long for the 8-bit offsets goes through a `ja`.
fn search(keys: &[u32], table: &BTreeMap<u32, Entry>) -> Result<Vec<Insn>, String> {
    const LEAF: usize = 4;
    if keys.len() <= LEAF {
        // jeq per key to its handler, then ALLOW, then the handlers.
        let handlers = keys
            .iter()
            .map(|k| handler(&table[k]))
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            // From the instruction after this jeq to the handler: the jeqs left, the ALLOW,
            // the handlers before this one.
            let jt = keys.len() - i + handlers[..i].iter().map(Vec::len).sum::<usize>();
            out.push((JEQ_K, jump(jt)?, 0, *k));
        }
        out.push((RET_K, 0, 0, RET_ALLOW));
        for h in handlers {
            out.extend(h);
        }
        return Ok(out);
    }
    let mid = keys.len() / 2;
    let left = search(&keys[..mid], table)?;
    let right = search(&keys[mid..], table)?;
    let mut out = Vec::new();
    if left.len() <= 255 {
        out.push((JGE_K, jump(left.len())?, 0, keys[mid]));
    } else {
        // if A >= k: fall into the ja to the right half; else skip it.
        out.push((JGE_K, 0, 1, keys[mid]));
        out.push((JA, 0, 0, left.len() as u32));
    }
    out.extend(left);
    out.extend(right);
    Ok(out)
}

/// The same program with one `ret` per distinct action, at its end, which every jump that
/// led to a `ret` now reaches directly; the `ret`s no longer reached are dropped. The kernel
/// converts, checks and JIT-compiles every instruction at each install, and 91 of the
/// program's 220 were returns (x86_64.json: 220 -> 130 instructions; an install took 89-90
/// -> 64-72 µs, medians of 2000 on the 2-core dev VM). Should a jump to the shared returns
/// not fit its 8-bit offset, the program not come out shorter, or hold an instruction or
/// a jump this compiler does not emit, it is returned as it was.
pub fn share_returns(p: &[Insn]) -> Vec<Insn> {
    let is_cond = |code: u16| matches!(code, JEQ_K | JGE_K | JGT_K | JSET_K);
    let in_range = |i: usize, off: u32| i + 1 + (off as usize) < p.len();
    let known = p
        .iter()
        .enumerate()
        .all(|(i, &(code, jt, jf, k))| match code {
            LD_W_ABS | AND_K | RET_K => true,
            JA => in_range(i, k),
            c if is_cond(c) => in_range(i, jt.into()) && in_range(i, jf.into()),
            _ => false,
        });
    if !known {
        return p.to_vec();
    }
    let mut rets: Vec<u32> = Vec::new();
    for &(code, _, _, k) in p {
        if code == RET_K && !rets.contains(&k) {
            rets.push(k);
        }
    }
    // Where each jump goes: an instruction of `p`, or (as p.len() + n) the n-th shared ret.
    let retarget = |t: usize| match p[t] {
        (RET_K, _, _, k) => p.len() + rets.iter().position(|r| *r == k).unwrap_or(0),
        _ => t,
    };
    let targets: Vec<Vec<usize>> = (0..p.len())
        .map(|i| {
            let (code, jt, jf, k) = p[i];
            match code {
                JA => vec![retarget(i + 1 + k as usize)],
                c if is_cond(c) => {
                    vec![retarget(i + 1 + jt as usize), retarget(i + 1 + jf as usize)]
                }
                _ => vec![],
            }
        })
        .collect();
    // A ret stays only where it is still reached: first, or after an instruction that is not
    // a jump or a ret (a load, as in an empty policy's program).
    let keep: Vec<bool> = (0..p.len())
        .map(|i| {
            p[i].0 != RET_K || i == 0 || !(is_cond(p[i - 1].0) || matches!(p[i - 1].0, JA | RET_K))
        })
        .collect();
    let mut new_index = vec![0; p.len() + rets.len()];
    let mut n = 0;
    for i in 0..p.len() {
        new_index[i] = n;
        n += keep[i] as usize;
    }
    for r in 0..rets.len() {
        new_index[p.len() + r] = n + r;
    }
    let mut out = Vec::with_capacity(n + rets.len());
    for i in (0..p.len()).filter(|&i| keep[i]) {
        let (code, jt, jf, k) = p[i];
        let off = |t: usize| new_index[t] - new_index[i] - 1;
        out.push(match code {
            JA => (JA, 0, 0, off(targets[i][0]) as u32),
            c if is_cond(c) => {
                let (Ok(jt), Ok(jf)) = (
                    u8::try_from(off(targets[i][0])),
                    u8::try_from(off(targets[i][1])),
                ) else {
                    return p.to_vec();
                };
                (code, jt, jf, k)
            }
            _ => (code, jt, jf, k),
        });
    }
    out.extend(rets.iter().map(|&k| (RET_K, 0, 0, k)));
    if out.len() >= p.len() {
        return p.to_vec();
    }
    out
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
                    if matches!(c.op, Op::MaskedEq(_)) {
                        3
                    } else {
                        2
                    }
                })
                .collect();
            let total: usize = sizes.iter().sum::<usize>() + 1; // + the ret
            let mut done = 0;
            for (c, size) in conds.iter().zip(&sizes) {
                done += size;
                let fail = jump(total - done)?;
                // seccomp_data.args[index], little-endian on both architectures.
                out.push((LD_W_ABS, 0, 0, 16 + 8 * c.index as u32 + 4 * c.high as u32));
                if let Op::MaskedEq(m) = c.op {
                    out.push((AND_K, 0, 0, m));
                }
                out.push(match c.op {
                    Op::Eq | Op::MaskedEq(_) => (JEQ_K, 0, fail, c.val),
                    Op::Ne => (JEQ_K, fail, 0, c.val),
                    Op::Gt => (JGT_K, 0, fail, c.val),
                    Op::Ge => (JGE_K, 0, fail, c.val),
                    Op::Lt => (JGE_K, fail, 0, c.val),
                    Op::Le => (JGT_K, fail, 0, c.val),
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
