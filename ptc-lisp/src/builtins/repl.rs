//! Discovery: `doc`, `dir`, `source`, `meta`, `apropos`. Local builtins are documented by the
//! runtime; other names (upstream tools) are forwarded to the host.

use super::{Builtin, VARIADIC, b, lookup};
use crate::error::{R, err};
use crate::eval::Ctx;
use crate::host::{CallContext, Discovery, HostValue};
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "repl/doc",
        1,
        1,
        doc,
        "(doc name): print documentation; returns nil"
    ),
    b!(
        "repl/source",
        1,
        1,
        doc,
        "(source name): like doc (sources of builtins are not available)"
    ),
    b!(
        "repl/dir",
        1,
        1,
        dir,
        "(dir ns): the names in a namespace or upstream"
    ),
    b!(
        "meta",
        1,
        1,
        meta,
        "(meta 'name): metadata of a builtin or upstream tool"
    ),
    b!(
        "apropos",
        1,
        2,
        apropos,
        "(apropos text [opts]): names containing text"
    ),
    b!("all-ns", 0, 0, all_ns, "(all-ns): namespaces"),
    b!(
        "ns-publics",
        1,
        1,
        dir,
        "(ns-publics ns): the names in a namespace"
    ),
    b!("ns-name", 1, 1, |_, a| Ok(a[0].clone()), "(ns-name ns)"),
    b!("describe", 1, VARIADIC, meta, "(describe 'name): metadata"),
];

fn name_of(v: &Value) -> Option<String> {
    match v {
        Value::Symbol(s) | Value::Str(s) | Value::Var(s) => Some(s.to_string()),
        Value::Keyword(s) => Some(s.to_string()),
        Value::Func(f) => Some(f.name()),
        _ => None,
    }
}

fn local_builtin(name: &str) -> Option<&'static Builtin> {
    if let Some(b) = lookup(name) {
        return Some(b);
    }
    let (ns, n) = name.split_once('/')?;
    let prefix = match ns {
        "clojure.string" | "str" | "string" => "clojure.string/",
        "clojure.set" | "set" => "clojure.set/",
        "clojure.core" | "core" | "clojure.walk" | "walk" => "",
        _ => return None,
    };
    lookup(&format!("{prefix}{n}")).or_else(|| lookup(n))
}

fn host_discover(ctx: &mut Ctx<'_>, op: Discovery, args: &[Value]) -> R<Option<Value>> {
    let Some(host) = ctx.shared.host else {
        return Ok(None);
    };
    let max_output = ctx.limits().max_output_bytes;
    let mut cx = CallContext {
        deadline: ctx.shared.deadline,
        output: &mut ctx.output,
        max_output,
    };
    match host.discover(&mut cx, op, args) {
        Ok(Some(HostValue::Value(v))) => Ok(Some(v)),
        Ok(Some(HostValue::Json(bytes))) => ctx.decode_json(&bytes).map(Some),
        Ok(None) => Ok(None),
        Err(e) => err(e.reason, e.message),
    }
}

fn doc(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(name) = name_of(&a[0]) else {
        return super::type_err("doc", "a name", &a[0]);
    };
    if let Some(b) = local_builtin(&name) {
        let text = format!("-------------------------\n{}\n  {}\n", b.name, b.doc);
        let max = ctx.limits().max_output_bytes;
        super::io::append_output(&mut ctx.output, &text, max);
        return Ok(Value::Nil);
    }
    if crate::analyze::SPECIAL_FORMS.contains(&name.as_str()) {
        let text = format!(
            "-------------------------\n{name}\n  Special Form\n  {}\n",
            special_form_doc(&name)
        );
        let max = ctx.limits().max_output_bytes;
        super::io::append_output(&mut ctx.output, &text, max);
        return Ok(Value::Nil);
    }
    match host_discover(ctx, Discovery::Doc, &[Value::symbol(&name)])? {
        Some(_) => Ok(Value::Nil),
        None => err("unbound_var", format!("no documentation for {name}")),
    }
}

fn local_ns_prefix(ns: &str) -> Option<&'static str> {
    Some(match ns {
        "clojure.core" | "core" => "",
        "clojure.string" | "str" | "string" => "clojure.string/",
        "clojure.set" | "set" => "clojure.set/",
        "json" => "json/",
        _ => return None,
    })
}

fn dir(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(ns) = name_of(&a[0]) else {
        return super::type_err("dir", "a namespace name", &a[0]);
    };
    if let Some(prefix) = local_ns_prefix(&ns) {
        let names: Vec<Value> = super::all()
            .into_iter()
            .filter(|b| {
                if prefix.is_empty() {
                    !b.name.contains('/') && !b.name.starts_with('.')
                } else {
                    b.name.starts_with(prefix)
                }
            })
            .map(|b| Value::symbol(b.name.rsplit('/').next().unwrap_or(b.name)))
            .collect();
        return super::vec_value(ctx, names);
    }
    match host_discover(ctx, Discovery::Dir, &[Value::symbol(&ns)])? {
        Some(v) => Ok(v),
        None => err(
            "unbound_var",
            format!("no namespace or upstream named {ns}"),
        ),
    }
}

fn meta(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(name) = name_of(&a[0]) else {
        return Ok(Value::Nil);
    };
    if let Some(b) = local_builtin(&name) {
        return Ok(Value::map_from(vec![
            (Value::keyword("name"), Value::symbol(b.name)),
            (Value::keyword("doc"), Value::str(b.doc)),
            (
                Value::keyword("ns"),
                Value::symbol(if b.name.contains('/') {
                    b.name.split('/').next().unwrap_or("")
                } else {
                    "clojure.core"
                }),
            ),
        ]));
    }
    Ok(host_discover(ctx, Discovery::Meta, &[Value::symbol(&name)])?.unwrap_or(Value::Nil))
}

fn apropos(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let pattern = match &a[0] {
        Value::Str(s) | Value::Symbol(s) | Value::Keyword(s) => s.to_lowercase(),
        Value::Regex(r) => r.as_str().to_string(),
        other => return super::type_err("apropos", "a string", other),
    };
    let mut out: Vec<Value> = Vec::new();
    let args: Vec<Value> = a.to_vec();
    if let Some(Value::Vector(v)) = host_discover(ctx, Discovery::Apropos, &args)? {
        out.extend(v.iter().cloned());
    }
    let is_re = matches!(a[0], Value::Regex(_));
    for b in super::all() {
        let hit = if is_re {
            if let Value::Regex(r) = &a[0] {
                r.is_match(b.name)
            } else {
                false
            }
        } else {
            b.name.to_lowercase().contains(&pattern)
        };
        if hit && !b.name.starts_with("repl/") && !b.name.starts_with("java/") {
            out.push(Value::symbol(b.name));
        }
    }
    if let Some(Value::Map(opts)) = a.get(1)
        && let Some(Value::Int(limit)) = opts.get(&Value::keyword("limit"))
    {
        out.truncate((*limit).max(0) as usize);
    }
    super::vec_value(ctx, out)
}

fn all_ns(ctx: &mut Ctx<'_>, _: &mut [Value]) -> R<Value> {
    let mut v: Vec<Value> = crate::analyze::LOCAL_NAMESPACES
        .iter()
        .map(|s| Value::symbol(s))
        .collect();
    if let Some(h) = ctx.shared.host {
        v.extend(h.namespaces().iter().map(|s| Value::symbol(s)));
    }
    Ok(Value::vector(v))
}

/// One-line usage of the special forms and core macros.
fn special_form_doc(name: &str) -> &'static str {
    match name {
        "def" => "(def name value): define a global; returns #'name",
        "defn" | "defn-" => {
            "(defn name [params] body...) or (defn name ([x] ...) ([x y] ...)): define a function"
        }
        "defonce" => "(defonce name value): define unless already defined",
        "declare" => "(declare name ...): declare globals defined later",
        "fn" | "fn*" => {
            "(fn name? [params] body...): a function; params may destructure; & rest for variadic"
        }
        "let" | "let*" => {
            "(let [pattern value ...] body...): sequential bindings with destructuring"
        }
        "loop" => "(loop [pattern init ...] body...): with (recur ...) in tail position",
        "recur" => "(recur args...): jump to the enclosing loop or fn, in tail position",
        "if" => "(if test then else?)",
        "if-not" => "(if-not test then else?)",
        "when" | "when-not" => "(when test body...)",
        "cond" => "(cond test expr ... :else expr)",
        "condp" => "(condp pred expr test result ... default?): nil when nothing matches",
        "case" => "(case expr const result (c1 c2) result ... default?): nil when nothing matches",
        "if-let" | "if-some" => "(if-let [x expr] then else?)",
        "when-let" | "when-some" => "(when-let [x expr] body...)",
        "when-first" => "(when-first [x coll] body...)",
        "and" | "or" => "(and x ...) / (or x ...): short-circuit",
        "do" => "(do expr ...): the last value",
        "->" | "->>" => "(-> x (f a) g): thread x as first (->) or last (->>) argument",
        "as->" => "(as-> x name (f name) ...)",
        "cond->" | "cond->>" => {
            "(cond-> x test (f a) ...): thread through forms whose test is truthy"
        }
        "some->" | "some->>" => "(some-> x f g): thread while the value is not nil",
        "for" => "(for [x xs :when p :let [y ..] :while q] expr): an eager vector",
        "doseq" => "(doseq [x xs] body...): for side effects (println); nil",
        "dotimes" => "(dotimes [i n] body...)",
        "quote" => "(quote x) or 'x: x unevaluated",
        "var" => "(var x) or #'x",
        "return" => "(return value): end the program with value",
        "fail" => "(fail value): end the program with a fail error carrying value",
        "comment" => "(comment ...): ignored; nil",
        "doc" | "source" => "(doc name): print documentation",
        "dir" => "(dir ns): the names in a namespace or upstream",
        _ => "",
    }
}
