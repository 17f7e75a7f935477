//! The JSON request front end: `airlock run --request FILE` reads one JSON object describing the
//! run and turns it into the same `Draft` the flags produce.

use serde_json::Value;

use crate::spec::{Draft, Input, InputSource, UsageError, check_input_name};

pub const KEYS: &[(&str, &str)] = &[
    ("command", "string, required: the program to run"),
    ("args", "array of strings: its arguments"),
    ("inputs", "object: file name -> text, written into scratch"),
    (
        "env",
        "object: name -> value, set in the task's environment",
    ),
    ("timeout_ms", "integer > 0: default 10000"),
    (
        "max_output",
        "integer >= 0: bytes kept of stdout, stderr and each file; default 8000",
    ),
    (
        "memory",
        "bytes (integer, or a string like \"512M\"): memory cap",
    ),
    ("pids", "integer: maximum processes and threads"),
    ("cpu_time_ms", "integer: CPU time per process"),
    ("file_size", "bytes (integer or string): largest file"),
    ("nofile", "integer: open files per process"),
    ("scratch_size", "bytes (integer or string): size of scratch"),
];

/// A size given as an integer of bytes or a string such as "512M".
fn size(obj: &serde_json::Map<String, Value>, key: &str) -> Result<Option<u64>, UsageError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| UsageError(format!("request: key {key:?} must be a byte count >= 0"))),
        Some(Value::String(s)) => crate::spec::parse_size(s)
            .map(Some)
            .map_err(|e| UsageError(format!("request: key {key:?}: {e}"))),
        Some(_) => bad(format!(
            "key {key:?} must be a byte count or a string like \"512M\""
        )),
    }
}

fn count(obj: &serde_json::Map<String, Value>, key: &str) -> Result<Option<u64>, UsageError> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| UsageError(format!("request: key {key:?} must be an integer >= 0"))),
    }
}

fn bad<T>(msg: String) -> Result<T, UsageError> {
    Err(UsageError(format!("request: {msg}")))
}

pub fn parse(text: &str) -> Result<Draft, UsageError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| UsageError(format!("request: not valid JSON: {e}")))?;
    let Value::Object(obj) = v else {
        return bad("must be a JSON object".into());
    };
    let mut d = Draft {
        json: true,
        ..Default::default()
    };
    for (key, _) in &obj {
        if !KEYS.iter().any(|(k, _)| k == key) {
            let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return bad(format!("unknown key {key:?} (known: {})", known.join(", ")));
        }
    }
    match obj.get("command") {
        Some(Value::String(c)) if !c.is_empty() => d.argv.push(c.clone()),
        Some(_) => return bad("key \"command\" must be a non-empty string".into()),
        None => return bad("key \"command\" is required".into()),
    }
    if let Some(args) = obj.get("args") {
        let Value::Array(items) = args else {
            return bad("key \"args\" must be an array of strings".into());
        };
        for a in items {
            match a {
                Value::String(s) => d.argv.push(s.clone()),
                _ => return bad("key \"args\" must be an array of strings".into()),
            }
        }
    }
    if let Some(inputs) = obj.get("inputs") {
        let Value::Object(m) = inputs else {
            return bad("key \"inputs\" must be an object of name -> text".into());
        };
        for (name, content) in m {
            check_input_name(name)?;
            let Value::String(text) = content else {
                return bad(format!("key \"inputs\": {name:?} must be a string"));
            };
            d.inputs.push(Input {
                name: name.clone(),
                source: InputSource::Bytes(text.clone().into_bytes()),
            });
        }
    }
    if let Some(env) = obj.get("env") {
        let Value::Object(m) = env else {
            return bad("key \"env\" must be an object of name -> string".into());
        };
        for (name, value) in m {
            let Value::String(v) = value else {
                return bad(format!("key \"env\": {name:?} must be a string"));
            };
            if !crate::spec::valid_env_name(name) {
                return bad(format!(
                    "key \"env\": {name:?} is not a valid variable name"
                ));
            }
            if v.contains('\0') {
                return bad(format!(
                    "key \"env\": the value of {name:?} contains a NUL byte"
                ));
            }
            d.env.push(format!("{name}={v}"));
        }
    }
    if let Some(t) = obj.get("timeout_ms") {
        match t.as_u64() {
            Some(ms) if ms > 0 => d.timeout = Some(std::time::Duration::from_millis(ms)),
            _ => return bad("key \"timeout_ms\" must be an integer > 0".into()),
        }
    }
    if let Some(m) = obj.get("max_output") {
        match m.as_u64() {
            Some(n) => d.max_output = Some(n as usize),
            None => return bad("key \"max_output\" must be an integer >= 0".into()),
        }
    }
    let l = &mut d.limits;
    if let Some(v) = size(&obj, "memory")? {
        l.memory = v;
    }
    if let Some(v) = count(&obj, "pids")? {
        l.pids = v;
    }
    if let Some(v) = count(&obj, "cpu_time_ms")? {
        l.cpu_time = std::time::Duration::from_millis(v);
    }
    if let Some(v) = size(&obj, "file_size")? {
        l.file_size = v;
    }
    if let Some(v) = count(&obj, "nofile")? {
        l.nofile = v;
    }
    if let Some(v) = size(&obj, "scratch_size")? {
        l.scratch_size = v;
    }
    Ok(d)
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
    }

    #[test]
    fn refusals_name_the_key() {
        let cases = [
            (r#"{"command": "x", "comand": 1}"#, "\"comand\""),
            (r#"{"args": []}"#, "\"command\""),
            (r#"{"command": 3}"#, "\"command\""),
            (r#"{"command": "x", "args": "a b"}"#, "\"args\""),
            (r#"{"command": "x", "args": [1]}"#, "\"args\""),
            (r#"{"command": "x", "inputs": {"a": 1}}"#, "\"inputs\""),
            (r#"{"command": "x", "inputs": {"../a": "t"}}"#, "input name"),
            (r#"{"command": "x", "env": {"A": 1}}"#, "\"env\""),
            (r#"{"command": "x", "timeout_ms": "10"}"#, "\"timeout_ms\""),
            (r#"{"command": "x", "timeout_ms": 0}"#, "\"timeout_ms\""),
            (r#"{"command": "x", "max_output": -1}"#, "\"max_output\""),
            (r#"{"command": "x", "memory": "lots"}"#, "\"memory\""),
            (r#"{"command": "x", "pids": "9"}"#, "\"pids\""),
            (r#"[1]"#, "object"),
            (r#"{"#, "not valid JSON"),
        ];
        for (text, needle) in cases {
            let err = parse(text).unwrap_err().0;
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
