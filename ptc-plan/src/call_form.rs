//! What a `tool/call` form asks for, read once for both readers: the program host reads the
//! values a running program passes, the pre-check reads the literals written in its text. Both
//! spellings — `(tool/call 'server/tool {:arg value})` and
//! `(tool/call {:server "server" :tool "tool" :args {...}})` — and the one conversion of a Lisp
//! argument value to JSON live here.

use ptc_lisp::{LiteralArg, Value};
use serde_json::{Map, Value as Json};

/// How to write a call, for every message about a malformed one.
const USAGE: &str = "use (tool/call 'server/tool {:arg value}) or \
                     (tool/call {:server \"server\" :tool \"tool\" :args {:arg value}})";

/// Nesting allowed in an argument value.
pub const MAX_ARG_DEPTH: usize = 256;

/// One argument of a `tool/call` form: a value at run time, or a literal (possibly computed)
/// before the program runs.
pub trait FormArg: Sized + Clone {
    /// `None` when the argument is computed at run time, so nothing can be said of it yet.
    fn value(&self) -> Option<&Value>;
    /// The entries of a map written literally whose parts may be computed; `None` otherwise.
    fn literal_entries(&self) -> Option<Vec<(Self, Self)>>;
    /// An argument holding `v`.
    fn of(v: &Value) -> Self;
}

impl FormArg for Value {
    fn value(&self) -> Option<&Value> {
        Some(self)
    }
    fn literal_entries(&self) -> Option<Vec<(Self, Self)>> {
        None
    }
    fn of(v: &Value) -> Self {
        v.clone()
    }
}

impl FormArg for LiteralArg {
    fn value(&self) -> Option<&Value> {
        match self {
            LiteralArg::Const(v) => Some(v),
            LiteralArg::Map(_) | LiteralArg::Data(_) | LiteralArg::Dynamic => None,
        }
    }
    fn literal_entries(&self) -> Option<Vec<(Self, Self)>> {
        match self {
            LiteralArg::Map(entries) => Some(entries.clone()),
            _ => None,
        }
    }
    fn of(v: &Value) -> Self {
        LiteralArg::Const(v.clone())
    }
}

/// Why a form could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum FormError {
    /// A part is computed at run time: only running the program can tell.
    Computed,
    /// The form is wrong whatever runs: the message names the mistake and the usage.
    Wrong(String),
}

/// A `tool/call` form, read.
#[derive(Debug)]
pub struct CallForm<A> {
    pub server: String,
    pub tool: String,
    /// The arguments map as written; `None` when none was given.
    pub args: Option<A>,
}

fn wrong<T>(message: String) -> Result<T, FormError> {
    Err(FormError::Wrong(message))
}

/// How a literal call site reads as a `tool/call`: the site's head and written arguments (as
/// [`ptc_lisp::uses`] finds them) to whether it pages and the call's arguments. `tool/pages`
/// takes the call's two parts, then its options; `(server/tool {...})` stands for
/// `(tool/call 'server/tool {...})`.
pub fn site_args(head: &str, written: &[LiteralArg]) -> (bool, Vec<LiteralArg>) {
    match head {
        "tool/call" => (false, written.to_vec()),
        "tool/pages" => (true, written.iter().take(2).cloned().collect()),
        _ => (
            false,
            std::iter::once(LiteralArg::Const(Value::Symbol(head.into())))
                .chain(written.iter().cloned())
                .collect(),
        ),
    }
}

/// Whether `name`, read in a program, is a call the host checks: `tool/call`, `tool/pages`, or
/// a tool of one of `servers` by its qualified name.
pub fn is_call_head(name: &str, servers: &[&str]) -> bool {
    matches!(name, "tool/call" | "tool/pages")
        || name
            .split_once('/')
            .is_some_and(|(ns, _)| servers.contains(&ns))
}

/// The text of a string, symbol or keyword argument.
fn name_text<A: FormArg>(a: &A) -> Result<Option<String>, FormError> {
    match a.value() {
        None if a.literal_entries().is_some() => Ok(None),
        None => Err(FormError::Computed),
        Some(Value::Str(s) | Value::Symbol(s) | Value::Keyword(s)) => Ok(Some(s.to_string())),
        Some(_) => Ok(None),
    }
}

/// A map argument's entries (a literal map's parts, or a map value's); `None` when it is not a
/// map.
fn entries<A: FormArg>(a: &A) -> Result<Option<Vec<(A, A)>>, FormError> {
    if let Some(e) = a.literal_entries() {
        return Ok(Some(e));
    }
    match a.value() {
        None => Err(FormError::Computed),
        Some(Value::Map(m)) => Ok(Some(m.iter().map(|(k, v)| (A::of(k), A::of(v))).collect())),
        Some(_) => Ok(None),
    }
}

/// How a part is shown in a message: its type and printed form.
fn shown<A: FormArg>(a: &A) -> String {
    match a.value() {
        Some(v) => format!("{} {v}", v.type_name()),
        None => "a map".to_string(),
    }
}

/// `:server` / `:tool` in the map form.
fn name_of<A: FormArg>(v: &A, what: &str) -> Result<String, FormError> {
    match name_text(v)? {
        Some(s) => Ok(s),
        None => wrong(format!(
            "tool/call: :{what} must be a string, got {}",
            shown(v)
        )),
    }
}

/// Reads a `tool/call` form's arguments.
pub fn read<A: FormArg>(args: &[A]) -> Result<CallForm<A>, FormError> {
    match args {
        [only]
            if only.literal_entries().is_some() || matches!(only.value(), Some(Value::Map(_))) =>
        {
            let mut server = None;
            let mut tool = None;
            let mut call_args = None;
            for (k, v) in entries(only)?.unwrap_or_default() {
                let key = match k.value() {
                    Some(Value::Keyword(s) | Value::Str(s)) => s.to_string(),
                    Some(other) => {
                        return wrong(format!(
                            "tool/call: unexpected key {other} in the call map; {USAGE}"
                        ));
                    }
                    None => return Err(FormError::Computed),
                };
                match key.as_str() {
                    "server" => server = Some(name_of(&v, "server")?),
                    "tool" => tool = Some(name_of(&v, "tool")?),
                    "args" => call_args = Some(v),
                    other => {
                        return wrong(format!(
                            "tool/call: unknown key :{other} in the call map (keys are \
                             :server :tool :args); {USAGE}"
                        ));
                    }
                }
            }
            let Some(server) = server else {
                return wrong(format!("tool/call: the call map has no :server; {USAGE}"));
            };
            let Some(tool) = tool else {
                return wrong(format!("tool/call: the call map has no :tool; {USAGE}"));
            };
            Ok(CallForm {
                server,
                tool,
                args: call_args,
            })
        }
        [target] | [target, _] => {
            let name = match target.value() {
                None => return Err(FormError::Computed),
                Some(Value::Symbol(s) | Value::Str(s)) => s.to_string(),
                Some(other) => {
                    return wrong(format!(
                        "tool/call: expected a quoted server/tool symbol, got {} {other}; {USAGE}",
                        other.type_name()
                    ));
                }
            };
            let Some((server, tool)) = name.split_once('/') else {
                return wrong(format!(
                    "tool/call: `{name}` is not qualified with its upstream; write \
                     'server/{name} (list upstreams with (tool/servers))"
                ));
            };
            Ok(CallForm {
                server: server.to_string(),
                tool: tool.to_string(),
                args: args.get(1).cloned(),
            })
        }
        _ => wrong(format!(
            "tool/call: takes 1 or 2 arguments, got {}; {USAGE}",
            args.len()
        )),
    }
}

/// One argument of the arguments map: its wire name (when its key is known) and its value as
/// JSON (when its value is known).
pub type ArgEntry = (Option<String>, Option<Result<Json, String>>);

impl<A: FormArg> CallForm<A> {
    /// The arguments map's entries; nil or no map is no arguments.
    pub fn arg_entries(&self) -> Result<Vec<ArgEntry>, FormError> {
        let Some(a) = &self.args else {
            return Ok(Vec::new());
        };
        if matches!(a.value(), Some(Value::Nil)) {
            return Ok(Vec::new());
        }
        let Some(list) = entries(a)? else {
            return wrong(format!(
                "tool/call '{}/{}: args must be a map like {{:arg value}}, got {}",
                self.server,
                self.tool,
                shown(a)
            ));
        };
        Ok(list
            .iter()
            .map(|(k, v)| (k.value().map(key_text), v.value().map(|v| to_json(v, 0))))
            .collect())
    }
}

impl CallForm<Value> {
    /// The arguments as the JSON object the executor takes.
    pub fn json_args(&self) -> Result<Map<String, Json>, FormError> {
        let mut out = Map::new();
        for (key, value) in self.arg_entries()? {
            // Every key and value of a run-time map is known.
            let key = key.unwrap_or_default();
            match value {
                Some(Ok(v)) => {
                    out.insert(key, v);
                }
                Some(Err(why)) => {
                    return wrong(format!(
                        "tool/call '{}/{}: argument {key} cannot be sent: {why}",
                        self.server, self.tool
                    ));
                }
                None => return Err(FormError::Computed),
            }
        }
        Ok(out)
    }
}

/// A map key as a JSON object key: names for keywords, strings and symbols, printed otherwise.
/// An argument key as the call sends it (a keyword, string or symbol by its name).
pub fn key_text(k: &Value) -> String {
    match k {
        Value::Keyword(s) | Value::Str(s) | Value::Symbol(s) => s.to_string(),
        other => other.to_string(),
    }
}

/// An argument value as JSON: keywords and symbols as their names, sets as arrays, map keys as
/// their names, non-finite floats as null. Functions cannot be sent.
pub fn to_json(v: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_ARG_DEPTH {
        return Err(format!("it is nested more than {MAX_ARG_DEPTH} deep"));
    }
    Ok(match v {
        Value::Nil => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) => Json::String(s.to_string()),
        Value::Var(s) => Json::String(format!("#'{s}")),
        Value::Regex(r) => Json::String(r.as_str().to_string()),
        Value::Vector(items) => Json::Array(
            items
                .iter()
                .map(|x| to_json(x, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Set(s) => Json::Array(
            s.sorted()
                .into_iter()
                .map(|x| to_json(x, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(m) => {
            let mut out = Map::new();
            for (k, x) in m.iter() {
                out.insert(key_text(k), to_json(x, depth + 1)?);
            }
            Json::Object(out)
        }
        Value::Func(_) => return Err("a function is not data".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A value nested `MAX_ARG_DEPTH` levels deep inside its outermost collection is sent; one
    /// level more is refused, for vectors, sets and maps alike.
    #[test]
    fn argument_values_are_sent_to_the_nesting_limit_and_refused_past_it() {
        // Built, not read: the reader's own depth limit is the same.
        type Wrap = fn(Value) -> Value;
        let wraps: [(&str, Wrap); 3] = [
            ("vector", |v| Value::vector(vec![v])),
            ("set", |v| Value::set_from(vec![v])),
            ("map", |v| Value::map_from(vec![(Value::keyword("k"), v)])),
        ];
        for (kind, wrap) in wraps {
            let nested = |levels: usize| (0..levels).fold(Value::Int(1), |v, _| wrap(v));
            assert!(to_json(&nested(MAX_ARG_DEPTH), 0).is_ok(), "{kind}");
            assert_eq!(
                to_json(&nested(MAX_ARG_DEPTH + 1), 0),
                Err(format!("it is nested more than {MAX_ARG_DEPTH} deep")),
                "{kind}"
            );
        }
    }

    /// The first `tool/call` in `src`, as the pre-check reads it.
    fn literal(src: &str) -> Result<CallForm<LiteralArg>, FormError> {
        let sites = ptc_lisp::call_sites(src, "tool/call").expect("reads");
        read(&sites[0].args)
    }

    /// `args`, as the running program passes them.
    fn running(args: &[&str]) -> Result<CallForm<Value>, FormError> {
        let values: Vec<Value> = args
            .iter()
            .map(|a| ptc_lisp::read_value(a).expect("a value"))
            .collect();
        read(&values)
    }

    fn wrong_text<A: std::fmt::Debug>(r: Result<A, FormError>) -> String {
        match r {
            Err(FormError::Wrong(m)) => m,
            other => panic!("expected a wrong form, got {other:?}"),
        }
    }

    #[test]
    fn both_spellings_name_the_same_call_to_both_readers() {
        for src in [
            "(tool/call 'obs/list-traces {:org-id \"acme\" :limit 5})",
            "(tool/call \"obs/list-traces\" {:org-id \"acme\" :limit 5})",
            "(tool/call {:server \"obs\" :tool :list-traces :args {:org-id \"acme\" :limit 5}})",
            "(tool/call {\"server\" 'obs \"tool\" \"list-traces\" :args {:org-id \"acme\" :limit 5}})",
        ] {
            let call = literal(src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
            assert_eq!(
                (call.server.as_str(), call.tool.as_str()),
                ("obs", "list-traces")
            );
            let entries = call.arg_entries().expect("literal args");
            assert_eq!(
                entries,
                vec![
                    (Some("org-id".into()), Some(Ok(json!("acme")))),
                    (Some("limit".into()), Some(Ok(json!(5)))),
                ],
                "{src}"
            );
        }
        let call = running(&["obs/list-traces", "{:org-id \"acme\" :tags #{:b :a}}"]).unwrap();
        assert_eq!(
            Json::Object(call.json_args().unwrap()),
            json!({"org-id": "acme", "tags": ["a", "b"]})
        );
        let call = running(&["{:server \"obs\" :tool \"t\"}"]).unwrap();
        assert_eq!(
            call.json_args().unwrap(),
            Map::new(),
            "no :args is no arguments"
        );
        let call = running(&["obs/t", "nil"]).unwrap();
        assert_eq!(
            call.json_args().unwrap(),
            Map::new(),
            "nil args are no arguments"
        );
    }

    #[test]
    fn computed_parts_are_left_to_the_run() {
        assert_eq!(
            literal("(tool/call t {})").unwrap_err(),
            FormError::Computed
        );
        assert_eq!(
            literal("(tool/call {:server s :tool \"t\"})").unwrap_err(),
            FormError::Computed
        );
        assert_eq!(
            literal("(tool/call {k \"obs\" :tool \"t\"})").unwrap_err(),
            FormError::Computed
        );
        // A computed args map still names its call; a computed key or value is unknown.
        let call = literal("(tool/call 'obs/t args)").unwrap();
        assert_eq!(call.server, "obs");
        assert_eq!(call.arg_entries().unwrap_err(), FormError::Computed);
        let call = literal("(tool/call 'obs/t {k 1 :b (inc 1) :c [1 (inc 1)]})").unwrap();
        assert_eq!(
            call.arg_entries().unwrap(),
            vec![
                (None, Some(Ok(json!(1)))),
                (Some("b".into()), None),
                (Some("c".into()), None)
            ]
        );
    }

    #[test]
    fn wrong_forms_are_named_whoever_reads_them() {
        let cases: [(&str, &[&str], &str); 9] = [
            (
                "(tool/call)",
                &[],
                "tool/call: takes 1 or 2 arguments, got 0",
            ),
            (
                "(tool/call 'a/b {} {})",
                &["a/b", "{}", "{}"],
                "takes 1 or 2 arguments, got 3",
            ),
            (
                "(tool/call :a/b)",
                &[":a/b"],
                "expected a quoted server/tool symbol, got keyword :a/b",
            ),
            (
                "(tool/call 'list)",
                &["list"],
                "`list` is not qualified with its upstream; write 'server/list",
            ),
            (
                "(tool/call {:server 1 :tool \"t\"})",
                &["{:server 1 :tool \"t\"}"],
                ":server must be a string, got integer 1",
            ),
            (
                "(tool/call {:server \"s\" :tool [1]})",
                &["{:server \"s\" :tool [1]}"],
                ":tool must be a string, got vector [1]",
            ),
            (
                "(tool/call {:server \"s\"})",
                &["{:server \"s\"}"],
                "the call map has no :tool",
            ),
            (
                "(tool/call {:tool \"t\"})",
                &["{:tool \"t\"}"],
                "the call map has no :server",
            ),
            (
                "(tool/call {:server \"s\" :tool \"t\" :arg {}})",
                &["{:server \"s\" :tool \"t\" :arg {}}"],
                "unknown key :arg in the call map (keys are :server :tool :args)",
            ),
        ];
        for (src, values, want) in cases {
            let from_text = wrong_text(literal(src));
            assert!(from_text.contains(want), "{src}: {from_text}");
            let from_values = wrong_text(running(values));
            assert_eq!(from_text, from_values, "{src}");
        }
        // A map written where a name goes is wrong whatever its parts compute to.
        let e = wrong_text(literal("(tool/call {:server {:a (inc 1)} :tool \"t\"})"));
        assert!(
            e.starts_with("tool/call: :server must be a string, got a map"),
            "{e}"
        );
        let e = wrong_text(literal("(tool/call {1 \"s\"})"));
        assert!(
            e.starts_with("tool/call: unexpected key 1 in the call map"),
            "{e}"
        );
        let e = wrong_text(literal("(tool/call 'obs/t [1 2])").unwrap().arg_entries());
        assert_eq!(
            e,
            "tool/call 'obs/t: args must be a map like {:arg value}, got vector [1 2]"
        );
        let e = wrong_text(running(&["obs/t", "\"x\""]).unwrap().json_args());
        assert_eq!(
            e,
            "tool/call 'obs/t: args must be a map like {:arg value}, got string \"x\""
        );
    }

    #[test]
    fn argument_values_convert_to_json_within_the_depth_limit() {
        let v = ptc_lisp::read_value("{:a [1 2.5 nil true :k sym \"s\"] 3 {:x ##Inf}}").unwrap();
        assert_eq!(
            to_json(&v, 0).unwrap(),
            json!({"a": [1, 2.5, null, true, "k", "sym", "s"], "3": {"x": null}})
        );
        let nested = |depth: usize| {
            let mut v = Value::Int(1);
            for _ in 0..depth {
                v = Value::vector(vec![v]);
            }
            v
        };
        // MAX_ARG_DEPTH nested vectors put the innermost value at depth MAX_ARG_DEPTH.
        assert!(to_json(&nested(MAX_ARG_DEPTH), 0).is_ok());
        assert_eq!(
            to_json(&nested(MAX_ARG_DEPTH + 1), 0).unwrap_err(),
            format!("it is nested more than {MAX_ARG_DEPTH} deep")
        );
        let f = ptc_lisp::Interpreter::new(ptc_lisp::Limits::default())
            .eval_str("{:f inc}")
            .unwrap();
        let call = running(&["obs/t"]).unwrap();
        let call = CallForm {
            args: Some(f),
            ..call
        };
        assert_eq!(
            wrong_text(call.json_args()),
            "tool/call 'obs/t: argument f cannot be sent: a function is not data"
        );
    }
}
