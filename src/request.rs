//! The JSON request front end: `airlock run --request FILE` reads one JSON object describing the
//! run and turns it into the same `Draft` the flags produce.
//!
//! The text is read straight into the `Draft`, value by value, with serde's visitor API: no
//! tree of the whole request is built (serde_json's `Value` takes 32 bytes or more for each
//! element, so a 64 MiB request of empty strings grew airlock to 2.2 GB). What the parser
//! keeps is bounded as it reads: the command, its arguments and its environment by what
//! execve could ever take, the inputs by the channel that hands them over (step 11) and by
//! the request's own size.

use std::collections::HashSet;
use std::fmt;

use serde_core::de::{
    self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor,
};

use crate::spec::{Draft, Input, InputSource, UsageError, check_handed, check_input_name, quoted};

/// Each key, and what it takes.
pub const KEYS: &[(&str, &str)] = &[
    (
        "command",
        "a non-empty string, required: the program to run",
    ),
    ("args", "an array of strings: its arguments"),
    (
        "inputs",
        "an object of file name -> text, written into scratch",
    ),
    (
        "env",
        "an object of name -> value, set in the task's environment",
    ),
    ("timeout_ms", "an integer > 0, at most 10^12: default 10000"),
    (
        "max_output",
        "bytes (an integer >= 0, or a string like \"64K\"): kept of stdout, stderr and each \
         file; default 8000, at most 64 MiB",
    ),
    (
        "memory",
        "bytes (an integer, or a string like \"512M\"; at least 16 MiB): memory cap",
    ),
    ("pids", "an integer >= 2: maximum processes and threads"),
    (
        "cpu_time_ms",
        "an integer >= 1000, at most 10^12: CPU time per process",
    ),
    (
        "file_size",
        "bytes (an integer >= 1, or a string like \"512M\"): largest file",
    ),
    ("nofile", "an integer >= 16: open files per process"),
    (
        "chdir",
        "a string: an absolute path inside the sandbox where the task starts; default /work",
    ),
    (
        "scratch_size",
        "bytes (an integer, or a string like \"512M\"; at least 1 MiB): size of scratch",
    ),
];

/// The keys that take a number (some also a string of bytes, `"512M"`).
const NUMBER_KEYS: &[&str] = &[
    "timeout_ms",
    "max_output",
    "memory",
    "pids",
    "cpu_time_ms",
    "file_size",
    "nofile",
    "scratch_size",
];

/// What execve takes of argv and envp together, whatever the stack limit: `_STK_LIM / 4 * 3`
/// in the kernel's fs/exec.c (bprm_stack_limits), each string counted with its NUL and its
/// 8-byte pointer. A request asking for more could never start.
const EXEC_ROOM: usize = 6 << 20;

/// The longest single string execve takes, its NUL included: MAX_ARG_STRLEN, 32 pages.
fn exec_string_max() -> usize {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE);
    32 * page.ok().flatten().map_or(4096, |p| p as usize)
}

/// Where the request's object closes, found as its bytes arrive, so that its reader knows the
/// request is whole before its input ends. Only braces and brackets outside strings count;
/// text that is no object never closes here and is read to its end (the parser refuses it).
#[derive(Default)]
pub struct ObjectEnd {
    depth: usize,
    opened: bool,
    in_string: bool,
    escaped: bool,
}

impl ObjectEnd {
    /// Read the next bytes: the offset just past the closing brace, when it is among them.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
        for (i, &b) in bytes.iter().enumerate() {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    self.opened = true;
                }
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

pub fn parse(text: &str) -> Result<Draft, UsageError> {
    // A byte order mark, which RFC 8259 lets a parser ignore: some editors and Windows
    // PowerShell write one before UTF-8 text.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Any(Whole)
        .deserialize(&mut de)
        .and_then(|d| de.end().map(|()| d));
    parsed.map_err(|e| match e.classify() {
        serde_json::error::Category::Data => UsageError(format!("request: {e}")),
        _ => UsageError(format!("request: not valid JSON: {e}")),
    })
}

/// A visitor handed the next value whatever its kind: serde_json reads by what the text
/// holds, and each visitor refuses the kinds its key does not take.
struct Any<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Any<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        de.deserialize_any(self.0)
    }
}

/// The whole request: one object of the keys in [`KEYS`].
struct Whole;

/// What the keys read so far have given.
struct Request {
    draft: Draft,
    command: Option<String>,
    args: Vec<String>,
    /// Bytes of argv and envp as execve counts them (see [`EXEC_ROOM`]).
    exec_used: usize,
    exec_string_max: usize,
    /// Bytes the inputs' hand-over takes (see `spec::check_handed`).
    handed: usize,
}

impl Request {
    /// Count one string of argv or envp against what execve takes.
    fn exec_take<E: de::Error>(&mut self, what: &dyn fmt::Display, len: usize) -> Result<(), E> {
        if len + 1 > self.exec_string_max {
            return Err(E::custom(format_args!(
                "{what} is {len} bytes: execve takes at most {} in one string",
                self.exec_string_max - 1
            )));
        }
        self.exec_used += len + 1 + 8;
        if self.exec_used > EXEC_ROOM {
            return Err(E::custom(format_args!(
                "the command, its arguments and its environment take more than execve takes \
                 ({} MiB, each string counted with its NUL and an 8-byte pointer), at {what}",
                EXEC_ROOM >> 20
            )));
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for Whole {
    type Value = Draft;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object (the request)")
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Draft, E> {
        Err(E::invalid_type(Unexpected::Other("a string"), &self))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Draft, A::Error> {
        let mut r = Request {
            draft: Draft {
                json: true,
                ..Default::default()
            },
            command: None,
            args: Vec::new(),
            exec_used: 0,
            exec_string_max: exec_string_max(),
            handed: 0,
        };
        // A key given twice is refused, not last-wins: a reviewer reading the request sees
        // the first.
        let mut seen = Vec::new();
        while let Some(key) = map.next_key_seed(Any(Key))? {
            if seen.contains(&key) {
                return Err(de::Error::custom(format_args!(
                    "key {key:?} is given twice"
                )));
            }
            seen.push(key);
            let field = Field { key, r: &mut r };
            if NUMBER_KEYS.contains(&key) {
                // Judged on its text: the float serde_json would make of `1e-400` is 0.
                let text: &serde_json::value::RawValue = map.next_value()?;
                field.read_number_text(text.get())?;
            } else {
                map.next_value_seed(Any(field))?;
            }
        }
        let Some(command) = r.command else {
            return Err(de::Error::custom("key \"command\" is required"));
        };
        let mut d = r.draft;
        d.argv = std::iter::once(command).chain(r.args).collect();
        Ok(d)
    }
}

/// A key of the request, as its name in [`KEYS`]; an unknown one is refused.
struct Key;

impl<'de> Visitor<'de> for Key {
    type Value = &'static str;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<&'static str, E> {
        match KEYS.iter().find(|(k, _)| *k == key) {
            Some((k, _)) => Ok(k),
            None => {
                let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
                Err(E::custom(format_args!(
                    "unknown key {} (known: {})",
                    quoted(key),
                    known.join(", ")
                )))
            }
        }
    }
}

/// One string inside `args`, `inputs` or `env`: a key or a value of theirs (then with the
/// name it is the value of, said when it is not a string: a framework review found
/// `{"env": {"A": null}}` refused as if "env" were not an object).
struct Text(&'static str, Option<String>);

impl<'de> Visitor<'de> for Text {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.1 {
            None => write!(f, "key {:?} to be {}", self.0, takes(self.0)),
            Some(name) => write!(f, "key {:?}: the value of {name} to be a string", self.0),
        }
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
        Ok(s.to_owned())
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<String, E> {
        Ok(s)
    }
}

/// What `key` takes, from [`KEYS`].
fn takes(key: &str) -> &'static str {
    let (_, what) = KEYS.iter().find(|(k, _)| *k == key).unwrap();
    what.split(':').next().unwrap()
}

/// The value of one key of the request, stored into `r` as it is read. A value of the wrong
/// kind is refused naming the key and the kind found, never quoting a string found (it may
/// be megabytes long).
struct Field<'a> {
    key: &'static str,
    r: &'a mut Request,
}

impl Field<'_> {
    fn refuse<E: de::Error>(&self, found: Unexpected) -> Result<(), E> {
        Err(E::invalid_type(found, self))
    }

    fn size<E: de::Error>(&mut self, v: u64) -> Result<(), E> {
        let l = &mut self.r.draft.limits;
        match self.key {
            "memory" => l.memory = v,
            "file_size" => l.file_size = v,
            "scratch_size" => l.scratch_size = v,
            "max_output" => {
                self.r.draft.max_output = Some(usize::try_from(v).unwrap_or(usize::MAX));
            }
            _ => unreachable!(),
        }
        Ok(())
    }
}

impl Field<'_> {
    /// The value of a key in [`NUMBER_KEYS`], from its JSON text (which serde_json has
    /// checked): a number is taken only if it is exactly a whole number >= 0 (see
    /// [`exact_integer`]); `null`, and a string where the key takes one, as ever.
    fn read_number_text<E: de::Error>(self, text: &str) -> Result<(), E> {
        match text.as_bytes()[0] {
            b'-' | b'0'..=b'9' => match exact_integer(text) {
                Some(n) => self.visit_u64(n),
                None => {
                    // The text is ASCII; a number may be megabytes long.
                    let shown = match text.get(..64) {
                        Some(head) if text.len() > 64 => {
                            format!("`{head}...` ({} bytes)", text.len())
                        }
                        _ => format!("`{text}`"),
                    };
                    let found = format!("the number {shown}");
                    Err(E::invalid_value(Unexpected::Other(&found), &self))
                }
            },
            b'"' => {
                let s: String = serde_json::from_str(text).map_err(E::custom)?;
                self.visit_str(&s)
            }
            b'n' => self.visit_unit(),
            b't' | b'f' => self.refuse(Unexpected::Bool(text == "true")),
            b'[' => self.refuse(Unexpected::Seq),
            _ => self.refuse(Unexpected::Map),
        }
    }
}

/// The whole number >= 0 that the text of a JSON number is exactly, if it is one that a u64
/// holds. JSON has one kind of number, and Python writes `5000.0` for a float that holds
/// 5000, so `5000.0`, `5e3` and `50.00e2` are 5000, and `-0` is 0. A fraction is not one,
/// however small or close to a whole number (`1.5`, `1e-400`, `1.00000000000000000001`,
/// which a float would round to 0 or 1), nor is a negative number.
fn exact_integer(text: &str) -> Option<u64> {
    let (negative, text) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text),
    };
    let (mantissa, exp) = text.split_once(['e', 'E']).unwrap_or((text, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let significant = digits.trim_end_matches('0');
    // The power of ten `significant` is multiplied by. An exponent too long for an i64 is
    // a number far from any u64's, either way.
    let exp: i64 = exp.trim_start_matches('+').parse().ok()?;
    let scale = exp
        .checked_sub(i64::try_from(frac.len()).ok()?)?
        .checked_add(i64::try_from(digits.len() - significant.len()).ok()?)?;
    if negative || scale < 0 {
        return None;
    }
    let scale = u32::try_from(scale).ok()?;
    let n: u64 = significant.parse().ok()?;
    n.checked_mul(10u64.checked_pow(scale)?)
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "key {:?} to be {}", self.key, takes(self.key))
    }

    fn visit_str<E: de::Error>(mut self, s: &str) -> Result<(), E> {
        match self.key {
            "command" if s.is_empty() => Err(E::invalid_value(Unexpected::Str(s), &self)),
            "command" => {
                self.r.exec_take(&"the command", s.len())?;
                self.r.command = Some(s.to_owned());
                Ok(())
            }
            "chdir" => {
                self.r.draft.chdir = Some(s.into());
                Ok(())
            }
            // A size as `--max-output` and the limit flags take it (an operator review:
            // "8K" was refused here alone).
            "memory" | "file_size" | "scratch_size" | "max_output" => {
                let v = crate::spec::parse_size(s)
                    .map_err(|e| E::custom(format_args!("key {:?}: {e}", self.key)))?;
                self.size(v)
            }
            _ => self.refuse(Unexpected::Other("a string")),
        }
    }

    fn visit_u64<E: de::Error>(mut self, n: u64) -> Result<(), E> {
        let d = &mut self.r.draft;
        match self.key {
            // As the flags: at most 10^9 s (the parity review: any u64 was taken here).
            "timeout_ms" | "cpu_time_ms" if n > crate::spec::MAX_DURATION_SECS * 1000 => {
                return Err(E::invalid_value(Unexpected::Unsigned(n), &self));
            }
            "timeout_ms" if n > 0 => d.timeout = Some(std::time::Duration::from_millis(n)),
            "timeout_ms" => return Err(E::invalid_value(Unexpected::Unsigned(n), &self)),
            "max_output" => d.max_output = Some(usize::try_from(n).unwrap_or(usize::MAX)),
            "pids" => d.limits.pids = n,
            "cpu_time_ms" => d.limits.cpu_time = std::time::Duration::from_millis(n),
            "nofile" => d.limits.nofile = n,
            "memory" | "file_size" | "scratch_size" => return self.size(n),
            _ => return self.refuse(Unexpected::Unsigned(n)),
        }
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        self.refuse(Unexpected::Bool(b))
    }

    /// `null` is the key left out (Python's None for an optional setting): its default.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        match self.key {
            "command" => self.refuse(Unexpected::Other("null")),
            _ => Ok(()),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.key != "args" {
            return self.refuse(Unexpected::Seq);
        }
        while let Some(arg) = seq.next_element_seed(Any(Text("args", None)))? {
            let n = self.r.args.len() + 1;
            self.r.exec_take(&format_args!("argument {n}"), arg.len())?;
            self.r.args.push(arg);
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let key = self.key;
        if key != "inputs" && key != "env" {
            return self.refuse(Unexpected::Map);
        }
        let r = self.r;
        let mut names = HashSet::new();
        while let Some(name) = map.next_key_seed(Any(Text(key, None)))? {
            let shown = quoted(&name);
            if !names.insert(name.clone()) {
                return Err(de::Error::custom(format_args!(
                    "key {key:?}: {shown} is given twice"
                )));
            }
            let value = map.next_value_seed(Any(Text(key, Some(shown.clone()))))?;
            if key == "inputs" {
                check_input_name(&name).map_err(de::Error::custom)?;
                r.handed += crate::spec::handed_size(&name);
                check_handed(r.draft.inputs.len() + 1, r.handed).map_err(de::Error::custom)?;
                r.draft.inputs.push(Input {
                    name,
                    source: InputSource::Bytes(value.into_bytes()),
                });
                continue;
            }
            if !crate::spec::valid_env_name(&name) {
                return Err(de::Error::custom(format_args!(
                    "key \"env\": {shown} is not a valid variable name"
                )));
            }
            if value.contains('\0') {
                return Err(de::Error::custom(format_args!(
                    "key \"env\": the value of {shown} contains a NUL byte"
                )));
            }
            r.exec_take(
                &format_args!("variable {shown}"),
                name.len() + 1 + value.len(),
            )?;
            r.draft.env.push(format!("{name}={value}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_request() {
        let d = parse(
            r#"{"command": "python3", "args": ["probe.py"], "inputs": {"probe.py": "print(1)"},
                "env": {"A": "b"}, "timeout_ms": 5000, "max_output": 100}"#,
        )
        .unwrap();
        assert_eq!(d.argv, ["python3", "probe.py"]);
        assert_eq!(d.inputs[0].source, InputSource::Bytes(b"print(1)".to_vec()));
        assert_eq!(d.env, ["A=b"]);
        assert_eq!(d.timeout, Some(std::time::Duration::from_millis(5000)));
        assert_eq!(d.max_output, Some(100));
        assert!(d.json);
        // A size as text, as `--max-output 8K` takes it (an operator review).
        let d = parse(r#"{"command": "x", "max_output": "8K"}"#).unwrap();
        assert_eq!(d.max_output, Some(8192));
    }

    #[test]
    fn refusals_name_the_key() {
        let cases = [
            (r#"{"command": "x", "comand": 1}"#, "\"comand\""),
            (r#"{"args": []}"#, "\"command\""),
            (r#"{"command": 3}"#, "\"command\""),
            (r#"{"command": ""}"#, "\"command\""),
            (r#"{"command": "x", "args": "a b"}"#, "\"args\""),
            (r#"{"command": "x", "args": [1]}"#, "\"args\""),
            (
                r#"{"command": "x", "inputs": {"a": 1}}"#,
                "key \"inputs\": the value of \"a\" to be a string",
            ),
            (r#"{"command": "x", "inputs": {"../a": "t"}}"#, "input name"),
            (
                r#"{"command": "x", "env": {"A": null}}"#,
                "key \"env\": the value of \"A\" to be a string",
            ),
            (r#"{"command": "x", "timeout_ms": "10"}"#, "\"timeout_ms\""),
            (r#"{"command": "x", "timeout_ms": 0}"#, "\"timeout_ms\""),
            (
                r#"{"command": "x", "timeout_ms": 1000000000001}"#,
                "\"timeout_ms\"",
            ),
            (
                r#"{"command": "x", "cpu_time_ms": 1000000000001}"#,
                "\"cpu_time_ms\"",
            ),
            (r#"{"command": "x", "max_output": -1}"#, "\"max_output\""),
            (r#"{"command": "x", "memory": "lots"}"#, "\"memory\""),
            (r#"{"command": "x", "pids": "9"}"#, "\"pids\""),
            (r#"[1]"#, "object"),
            (
                r#""{\"command\": \"x\"}""#,
                "a string, expected a JSON object",
            ),
            (r#"{"#, "not valid JSON"),
        ];
        for (text, needle) in cases {
            let err = parse(text).unwrap_err().0;
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    /// A key given twice is refused, wherever it stands and however it is escaped: JSON
    /// parsers differ on which one wins, and a reviewer reads the first.
    #[test]
    fn a_key_given_twice_is_refused() {
        let cases = [
            (
                r#"{"command": "true", "command": "curl"}"#,
                r#"key "command" is given twice"#,
            ),
            (
                r#"{"command": "true", "comm\u0061nd": "curl"}"#,
                r#"key "command""#,
            ),
            (
                r#"{"args": [], "command": "x", "args": ["a"]}"#,
                r#"key "args" is given twice"#,
            ),
            (
                r#"{"command": "x", "env": {"A": "1", "B": "", "A": "2"}}"#,
                r#"key "env": "A" is"#,
            ),
            (
                r#"{"command": "x", "inputs": {"a": "1", "\u0061": "2"}}"#,
                r#"key "inputs": "a""#,
            ),
        ];
        for (text, needle) in cases {
            let err = parse(text).unwrap_err().0;
            assert!(err.contains(needle), "{text}: {err}");
        }
        // Control: the same names in different maps, and once each, pass.
        parse(r#"{"command": "x", "env": {"A": "1"}, "inputs": {"A": "1", "command": ""}}"#)
            .unwrap();
    }

    #[test]
    fn object_end_is_found_as_bytes_arrive() {
        let text = br#"{"command": "x", "args": ["}", "\"}", "\\"], "env": {"A": "{["}} "#;
        let close = text.len() - 1;
        // Whole, or cut anywhere: the same offset.
        for cut in 0..text.len() {
            let mut end = ObjectEnd::default();
            let found = match end.feed(&text[..cut]) {
                Some(at) => Some(at),
                None => end.feed(&text[cut..]).map(|at| cut + at),
            };
            assert_eq!(found, Some(close), "cut at {cut}");
        }
        for open in [&br#"{"a": "}"#[..], br#"{"a": {}"#, br#""{}""#, b"12"] {
            assert_eq!(ObjectEnd::default().feed(open), None, "{open:?}");
        }
    }

    /// What Python and Node write for the same request reads the same: a byte order mark
    /// before it, whole numbers as floats, None for a key left out.
    #[test]
    fn other_spellings_of_the_same_request() {
        let d = parse(
            "\u{feff}{\"command\": \"x\", \"timeout_ms\": 5000.0, \"pids\": 2e2, \"memory\": null, \
             \"args\": null, \"env\": null, \"inputs\": null, \"max_output\": null}",
        )
        .unwrap();
        assert_eq!(d.argv, ["x"]);
        assert_eq!(d.timeout, Some(std::time::Duration::from_millis(5000)));
        assert_eq!(d.limits.pids, 200);
        assert_eq!(d.limits.memory, crate::limits::Limits::default().memory);
        assert_eq!(d.max_output, None);
        let cases = [
            (r#"{"command": "x", "timeout_ms": 1.5}"#, "the number `1.5`"),
            (r#"{"command": "x", "pids": -2.0}"#, "\"pids\""),
            (r#"{"command": "x", "memory": 1e300}"#, "\"memory\""),
            (
                r#"{"command": "x", "memory": 18446744073709551616}"#,
                "\"memory\"",
            ),
            (r#"{"command": null}"#, "\"command\""),
            (r#"{"command": "x", "args": [null]}"#, "\"args\""),
        ];
        for (text, needle) in cases {
            let err = parse(text).unwrap_err().0;
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    /// A number is taken when its text is exactly a whole number >= 0 that a u64 holds,
    /// whatever float it would round to.
    #[test]
    fn numbers_are_judged_on_their_text() {
        let cases = [
            ("0", Some(0)),
            ("-0", Some(0)),
            ("-0.0e-5", Some(0)),
            ("0e999999999999999999999", Some(0)),
            ("5000", Some(5000)),
            ("5000.0", Some(5000)),
            ("5e3", Some(5000)),
            ("5E+3", Some(5000)),
            ("50.00e2", Some(5000)),
            ("500000e-2", Some(5000)),
            ("9007199254740993", Some(9007199254740993)),
            ("9007199254740993.0", Some(9007199254740993)),
            ("18446744073709551615", Some(u64::MAX)),
            ("1844674407370955161.5e1", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("1e20", None),
            ("1e99999999999999999999", None),
            ("1.5", None),
            ("1e-400", None),
            ("0.5", None),
            ("1.00000000000000000001", None),
            ("5001e-1", None),
            ("-1", None),
            ("-1e2", None),
        ];
        for (text, n) in cases {
            assert_eq!(exact_integer(text), n, "{text}");
        }
        // Through the parser, for each key that takes a number.
        for key in NUMBER_KEYS {
            for text in ["1e-400", "2.5", "-3"] {
                let req = format!(r#"{{"command": "x", "{key}": {text}}}"#);
                let err = parse(&req).unwrap_err().0;
                let says = format!("invalid value: the number `{text}`, expected key {key:?}");
                assert!(err.contains(&says), "{req}: {err}");
            }
        }
        let d = parse(r#"{"command": "x", "max_output": 1.0e3, "nofile": 640e-1}"#).unwrap();
        assert_eq!((d.max_output, d.limits.nofile), (Some(1000), 64));
    }

    /// A refusal quotes at most 64 characters of what it refuses: the report carries it, and
    /// a value can be megabytes long.
    #[test]
    fn a_refusal_quotes_a_long_value_short() {
        let long = "9".repeat(100_000);
        let cases = [
            format!(r#"{{"command": "x", "memory": "{long}Q"}}"#),
            format!(r#"{{"command": "x", "memory": {long}.5}}"#),
            format!(r#"{{"command": "x", "scratch_size": "{long}"}}"#),
            format!(r#"{{"command": "x", "args": ["{long}\u0000"]}}"#),
            format!(r#"{{"command": "x", "{long}": 1}}"#),
            format!(r#"{{"command": "x", "inputs": {{"{long}": ""}}}}"#),
            format!(r#"{{"command": "x", "env": {{"A{long}-": ""}}}}"#),
            format!(r#""{long}""#),
        ];
        for text in cases {
            let err = match parse(&text) {
                Ok(d) => d.build(&|_| None).unwrap_err().0,
                Err(e) => e.0,
            };
            assert!(err.len() < 500, "{}: {err:.300}", &text[..40]);
        }
    }

    /// What execve could never take is refused while it is read: the parser's memory stays
    /// bounded by what could run.
    #[test]
    fn more_than_execve_takes_is_refused() {
        let many = format!(
            r#"{{"command": "true", "args": [{}""]}}"#,
            "\"\",".repeat(EXEC_ROOM / 9)
        );
        let err = parse(&many).unwrap_err().0;
        assert!(err.contains("more than execve takes"), "{err}");
        let long = format!(
            r#"{{"command": "true", "args": ["{}"]}}"#,
            "a".repeat(1 << 20)
        );
        let err = parse(&long).unwrap_err().0;
        assert!(err.contains("argument 1 is 1048576 bytes"), "{err}");
        let env = format!(
            r#"{{"command": "true", "env": {{"A": "{}"}}}}"#,
            "a".repeat(1 << 20)
        );
        let err = parse(&env).unwrap_err().0;
        assert!(err.contains("variable \"A\""), "{err}");
        // Control: what execve takes passes.
        let fits = format!(
            r#"{{"command": "true", "args": [{}""]}}"#,
            "\"\",".repeat(EXEC_ROOM / 9 - 100)
        );
        assert_eq!(parse(&fits).unwrap().argv.len(), EXEC_ROOM / 9 - 100 + 2);
    }
}
