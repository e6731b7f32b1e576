//! Finding a program's literal calls of a host function (e.g. `(tool/call 'srv/tool {...})`)
//! without running it, so a host can check them against its catalog before any call is made.

use crate::error::{LispError, Pos};
use crate::limits::Limits;
use crate::read_data::form_to_value;
use crate::reader::{Form, FormKind, Reader};
use crate::value::Value;

/// An argument of a literal call, as far as it is known before the program runs.
#[derive(Clone, Debug)]
pub enum LiteralArg {
    /// A constant: a literal, a quoted form, or a vector of constants.
    Const(Value),
    /// A map literal; its keys and values each known or not.
    Map(Vec<(LiteralArg, LiteralArg)>),
    /// `data/<key>`: the request's context value `key`, known only when the program runs (a
    /// declared program's parameter).
    Data(String),
    /// Computed at run time.
    Dynamic,
}

/// One call site: `(name arg...)` written literally in the program.
#[derive(Clone, Debug)]
pub struct CallSite {
    /// Where the call starts.
    pub pos: Pos,
    /// Its arguments.
    pub args: Vec<LiteralArg>,
}

/// Heads whose step forms get an argument inserted, so a call written there is incomplete.
const THREADING: &[&str] = &[
    "->", "->>", "as->", "cond->", "cond->>", "some->", "some->>", "doto", "..",
];

/// The literal calls of `name` (a qualified symbol such as `tool/call`) in `src`, in source
/// order ([`uses`]' calls of that one name).
pub fn call_sites(src: &str, name: &str) -> Result<Vec<CallSite>, LispError> {
    Ok(uses(src, &|head| head == name)?
        .calls
        .into_iter()
        .map(|(_, site)| site)
        .collect())
}

/// The literal calls of upstream tools by their qualified names (`(server/tool {...})`, the
/// sugar for `(tool/call 'server/tool {...})`), for any of `upstreams`, in source order. Each
/// site's arguments start with the quoted tool name, as the `tool/call` they stand for.
pub fn upstream_call_sites(src: &str, upstreams: &[String]) -> Result<Vec<CallSite>, LispError> {
    let named = |head: &str| {
        head.split_once('/')
            .is_some_and(|(ns, _)| upstreams.iter().any(|u| u == ns))
    };
    Ok(uses(src, &named)?
        .calls
        .into_iter()
        .map(|(head, mut site)| {
            site.args
                .insert(0, LiteralArg::Const(Value::Symbol(head.into())));
            site
        })
        .collect())
}

/// What a program does with the names a host gives meaning to, read without running it.
#[derive(Clone, Debug, Default)]
pub struct Uses {
    /// Literal calls whose head is one of the names, as [`call_sites`] finds them: the head and
    /// the site.
    pub calls: Vec<(String, CallSite)>,
    /// Every other use of one of the names, and where: passed as a value (`(map tool/call
    /// ...)`, `(apply tool/call ...)`) or called in a threading step, so what it calls is known
    /// only when the program runs.
    pub other: Vec<(String, Pos)>,
    /// Every `data/<key>` the program reads: the key and where.
    pub data: Vec<(String, Pos)>,
}

/// The uses in `src` of every name `named` accepts (calls, and uses as values), and its
/// `data/` reads; quoted data and `comment` forms are left out. Reading is bounded by the
/// reader's depth limit.
pub fn uses(src: &str, named: &dyn Fn(&str) -> bool) -> Result<Uses, LispError> {
    let limits = Limits::default();
    let scanned = crate::eval_stack::run(limits.thread_stack(), || {
        let found = Reader::new(src, limits.max_reader_depth)
            .read_all()
            .map(|forms| {
                let mut out = Uses::default();
                for f in &forms {
                    walk_uses(f, named, false, &mut out);
                }
                out
            });
        (found, 0)
    });
    scanned.unwrap_or_else(|message| Err(LispError::new(crate::Reason::InternalError, message)))
}

fn walk_uses(form: &Form, named: &dyn Fn(&str) -> bool, threaded: bool, out: &mut Uses) {
    match &form.kind {
        FormKind::Symbol(s) => {
            if let Some(key) = s.strip_prefix("data/") {
                out.data.push((key.to_string(), form.pos));
            } else if named(s) {
                out.other.push((s.to_string(), form.pos));
            }
        }
        FormKind::List(items) => {
            let head = items.first().and_then(Form::sym_name);
            if matches!(head, Some("quote" | "comment")) {
                return;
            }
            let mut rest = &items[..];
            if let Some(h) = head.filter(|h| named(h))
                && !threaded
            {
                out.calls.push((
                    h.to_string(),
                    CallSite {
                        pos: form.pos,
                        args: items[1..].iter().map(literal).collect(),
                    },
                ));
                rest = &items[1..];
            }
            let threading = head.is_some_and(|h| THREADING.contains(&h));
            let skipped = items.len() - rest.len();
            for (i, item) in rest.iter().enumerate() {
                walk_uses(item, named, threading && i + skipped >= 2, out);
            }
        }
        FormKind::Vector(items) | FormKind::Map(items) | FormKind::Set(items) => {
            for item in items {
                walk_uses(item, named, false, out);
            }
        }
        FormKind::AnonFn(body) => {
            let list = Form {
                kind: FormKind::List(body.clone()),
                pos: form.pos,
            };
            walk_uses(&list, named, false, out);
        }
        _ => {}
    }
}

fn literal(form: &Form) -> LiteralArg {
    match &form.kind {
        FormKind::Nil
        | FormKind::Bool(_)
        | FormKind::Int(_)
        | FormKind::Float(_)
        | FormKind::Str(_)
        | FormKind::Keyword(_) => const_of(form),
        FormKind::List(items) if items.len() == 2 && items[0].sym_name() == Some("quote") => {
            const_of(&items[1])
        }
        FormKind::Vector(items) => {
            let parts: Vec<LiteralArg> = items.iter().map(literal).collect();
            if parts.iter().all(|p| matches!(p, LiteralArg::Const(_))) {
                const_of(form)
            } else {
                LiteralArg::Dynamic
            }
        }
        FormKind::Map(items) => LiteralArg::Map(
            items
                .chunks(2)
                .map(|kv| (literal(&kv[0]), literal(&kv[1])))
                .collect(),
        ),
        FormKind::Symbol(s) => match s.strip_prefix("data/") {
            Some(key) => LiteralArg::Data(key.to_string()),
            None => LiteralArg::Dynamic,
        },
        _ => LiteralArg::Dynamic,
    }
}

fn const_of(form: &Form) -> LiteralArg {
    match form_to_value(form) {
        Ok(v) => LiteralArg::Const(v),
        Err(_) => LiteralArg::Dynamic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(server/tool {...})` of a named upstream is found as the `tool/call` it stands for;
    /// other qualified heads, quoted and threaded forms are not.
    #[test]
    fn finds_upstream_tools_called_by_name() {
        let src = "(obs/list {:a 1})
(str/join [])
'(obs/q)
(-> {} (obs/threaded))
#(obs/get {:id %})
(other/x)";
        let sites = upstream_call_sites(src, &["obs".to_string()]).unwrap();
        let found: Vec<String> = sites
            .iter()
            .map(|s| match &s.args[0] {
                LiteralArg::Const(Value::Symbol(t)) => format!("{} {t} {}", s.pos, s.args.len()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(found, ["1:1 obs/list 2", "5:1 obs/get 2"]);
        assert!(matches!(&sites[0].args[1], LiteralArg::Map(_)));
        assert!(upstream_call_sites(src, &[]).unwrap().is_empty());
    }

    #[test]
    fn finds_literal_calls_with_positions_and_skips_threaded_and_quoted_ones() {
        let src = "(let [x 1]\n  (tool/call 'a/b {:k x :n 2}))\n'(tool/call 'q/q)\n(->> {} (tool/call 'c/d))\n#(tool/call 'e/f {:i %})";
        let sites = call_sites(src, "tool/call").unwrap();
        let summary: Vec<String> = sites
            .iter()
            .map(|s| format!("{} {:?}", s.pos, s.args))
            .collect();
        assert_eq!(sites.len(), 2, "{summary:?}");
        assert_eq!((sites[0].pos.line, sites[0].pos.col), (2, 3));
        assert!(matches!(&sites[0].args[0], LiteralArg::Const(Value::Symbol(s)) if &**s == "a/b"));
        let LiteralArg::Map(entries) = &sites[0].args[1] else {
            panic!("{summary:?}")
        };
        assert!(matches!(entries[0].1, LiteralArg::Dynamic));
        assert!(matches!(entries[1].1, LiteralArg::Const(Value::Int(2))));
        assert_eq!((sites[1].pos.line, sites[1].pos.col), (5, 1));
        let err = call_sites("(tool/call", "tool/call").unwrap_err();
        assert_eq!(err.reason(), crate::Reason::ParseError, "{err:?}");
    }

    /// `uses` finds literal calls, every other use of a name (a value, a threaded step), and
    /// `data/` reads, but nothing quoted or in `comment`.
    #[test]
    fn uses_tell_literal_calls_from_other_uses_and_find_data_reads() {
        let src = "(tool/call 'a/b {:k data/x})
(map tool/call [])
(->> {} (tool/call 'c/d))
#(obs/get {:id %})
'(tool/call 'q/q data/quoted)
(comment (tool/call 'q/q))
(str data/y)";
        let u = uses(src, &|s| s == "tool/call" || s.starts_with("obs/")).unwrap();
        let calls: Vec<String> = u
            .calls
            .iter()
            .map(|(h, s)| format!("{h} {}", s.pos))
            .collect();
        assert_eq!(calls, ["tool/call 1:1", "obs/get 4:1"]);
        assert!(
            matches!(&u.calls[0].1.args[1], LiteralArg::Map(e) if matches!(&e[0].1, LiteralArg::Data(k) if k == "x"))
        );
        let other: Vec<String> = u.other.iter().map(|(n, p)| format!("{n} {p}")).collect();
        assert_eq!(other, ["tool/call 2:6", "tool/call 3:10"]);
        let data: Vec<String> = u.data.iter().map(|(k, p)| format!("{k} {p}")).collect();
        assert_eq!(data, ["x 1:21", "y 7:6"]);
    }

    /// The scan runs on an evaluation stack under the reader's depth limit: a call whose
    /// arguments sit at the deepest level allowed is found, one level more is refused with the
    /// depth reason.
    #[test]
    fn scans_to_the_reader_depth_limit_and_refuses_past_it() {
        let max = Limits::default().max_reader_depth;
        // `vectors` vectors around the call put its arguments at level `vectors + 1` (from 0).
        let nested = |vectors: usize| {
            format!(
                "{}(tool/call :k){}",
                "[".repeat(vectors),
                "]".repeat(vectors)
            )
        };
        let sites = call_sites(&nested(max - 2), "tool/call").unwrap();
        assert_eq!(sites.len(), 1);
        assert_eq!(sites[0].pos.col as usize, max - 1);
        let err = call_sites(&nested(max - 1), "tool/call").unwrap_err();
        assert_eq!(err.reason(), crate::Reason::DepthExceeded, "{err:?}");
    }
}
