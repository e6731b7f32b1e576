//! Discovery: `doc`, `dir`, `source`, `meta`, `apropos`. Local builtins are documented by the
//! runtime; other names (upstream tools) are forwarded to the host.

use super::{Builtin, VARIADIC, b, lookup, lookup_in};
use crate::error::{Ctl, LispError, R, Reason, err};
use crate::eval::Ctx;
use crate::host::{Discovery, HostValue};
use crate::names::{self, Constant, NsKind};
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

/// The builtin a name means, through any namespace alias (`s/join`, `Math/abs`, `tool/dir`).
fn local_builtin(name: &str) -> Option<&'static Builtin> {
    if let Some(b) = lookup(name) {
        return Some(b);
    }
    let (ns, n) = name.split_once('/')?;
    lookup_in(names::namespace(ns)?, n)
}

/// The constant a name means (`Math/PI`).
fn local_constant(name: &str) -> Option<Constant> {
    let (ns, n) = name.split_once('/')?;
    names::namespace(ns)?.constant(n)
}

fn host_discover(ctx: &mut Ctx<'_>, op: Discovery, args: &[Value]) -> R<Option<Value>> {
    match ctx.with_host(|host, cx| host.discover(cx, op, args)) {
        Some(Ok(Some(HostValue::Value(v)))) => Ok(Some(v)),
        Some(Ok(Some(HostValue::Json(bytes)))) => ctx.decode_json(&bytes).map(Some),
        None | Some(Ok(None)) => Ok(None),
        Some(Err(e)) => err(e.reason, e.message),
    }
}

/// Every namespace name a program may write: local ones with their aliases, the host's and
/// the upstreams.
fn known_namespaces(ctx: &Ctx<'_>) -> Vec<String> {
    let mut v: Vec<String> = names::NAMESPACES
        .iter()
        .flat_map(|n| n.all_names())
        .map(str::to_string)
        .collect();
    if let Some(h) = ctx.host() {
        v.extend(h.namespaces());
        v.extend(h.upstreams());
    }
    v
}

/// An `unbound_var` error with a "did you mean" hint among `candidates`.
fn unknown(message: String, name: &str, candidates: Vec<String>) -> Ctl {
    let e = LispError::new(Reason::UnboundVar, message);
    let best = names::did_you_mean(name, candidates.iter().map(String::as_str));
    Ctl::from(match best {
        Some(c) => e.with_hint(format!("did you mean {c}?")),
        None => e,
    })
}

fn doc(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(name) = name_of(&a[0]) else {
        return super::type_err("doc", "a name", &a[0]);
    };
    let text = if let Some(b) = local_builtin(&name) {
        format!("-------------------------\n{}\n  {}\n", b.name, b.doc)
    } else if let Some(form) = names::special_form(&name).or(names::qualified_special_form(&name)) {
        format!(
            "-------------------------\n{}\n  Special Form\n  {}\n",
            form.name, form.doc
        )
    } else if let Some(c) = local_constant(&name) {
        format!(
            "-------------------------\n{name}\n  Constant: {}\n",
            constant_value(c)
        )
    } else {
        return match host_discover(ctx, Discovery::Doc, &[Value::symbol(&name)])? {
            Some(_) => Ok(Value::Nil),
            None => {
                let mut cands: Vec<String> = super::names().map(str::to_string).collect();
                cands.extend(names::SPECIAL_FORMS.iter().map(|f| f.name.to_string()));
                Err(unknown(
                    format!("no documentation for {name}"),
                    &name,
                    cands,
                ))
            }
        };
    };
    ctx.print(&text);
    Ok(Value::Nil)
}

fn constant_value(c: Constant) -> Value {
    match c {
        Constant::Float(f) => Value::Float(f),
        Constant::Int(i) => Value::Int(i),
    }
}

/// The unqualified names of the builtins under a registry prefix (`""` is the core).
fn builtins_under(prefix: &str) -> Vec<&'static str> {
    super::all()
        .into_iter()
        .filter_map(|b| {
            if prefix.is_empty() {
                (!b.name.contains('/') && !b.name.starts_with('.')).then_some(b.name)
            } else {
                b.name.strip_prefix(prefix)
            }
        })
        .collect()
}

fn dir(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let Some(ns) = name_of(&a[0]) else {
        return super::type_err("dir", "a namespace name", &a[0]);
    };
    if let Some(space) = names::namespace(&ns) {
        let mut names: Vec<Value> = match space.kind {
            NsKind::Builtins { prefix } => {
                let forms = names::SPECIAL_FORMS
                    .iter()
                    .filter(|_| space.name() == names::CORE)
                    .map(|f| f.name);
                let mut all: Vec<&str> = builtins_under(prefix)
                    .into_iter()
                    .chain(space.constants.iter().map(|(n, _)| *n))
                    .chain(forms)
                    .collect();
                all.sort_unstable();
                all.into_iter().map(Value::symbol).collect()
            }
            NsKind::Data => match ctx.data() {
                // The names a program writes after `data/`.
                Value::Map(m) => m
                    .sorted()
                    .into_iter()
                    .filter_map(|(k, _)| match k {
                        Value::Keyword(s) | Value::Str(s) | Value::Symbol(s) => {
                            Some(Value::symbol(s))
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            },
            NsKind::Discovery => names::TOOL_DISCOVERY
                .iter()
                .map(|(n, _)| Value::symbol(n))
                .collect(),
        };
        if space.kind == NsKind::Discovery
            && let Some(Value::Vector(more)) =
                host_discover(ctx, Discovery::Dir, &[Value::symbol(&ns)])?
        {
            names.extend(more.iter().cloned());
        }
        return super::vec_value(ctx, names);
    }
    match host_discover(ctx, Discovery::Dir, &[Value::symbol(&ns)])? {
        Some(v) => Ok(v),
        None => {
            let known = known_namespaces(ctx);
            Err(unknown(
                format!("no namespace or upstream named {ns}"),
                &ns,
                known,
            ))
        }
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
    if let Some(form) = names::special_form(&name).or(names::qualified_special_form(&name)) {
        return Ok(Value::map_from(vec![
            (Value::keyword("name"), Value::symbol(form.name)),
            (Value::keyword("doc"), Value::str(form.doc)),
            (Value::keyword("ns"), Value::symbol("clojure.core")),
            (Value::keyword("special-form"), Value::Bool(true)),
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
    let hit = |name: &str| match &a[0] {
        Value::Regex(r) => r.is_match(name),
        _ => name.to_lowercase().contains(&pattern),
    };
    for b in super::all() {
        if let Some(name) = writable_name(b)
            && hit(name)
        {
            out.push(Value::symbol(name));
        }
    }
    for form in names::SPECIAL_FORMS {
        if hit(form.name) {
            out.push(Value::symbol(form.name));
        }
    }
    if let Some(Value::Map(opts)) = a.get(1)
        && let Some(Value::Int(limit)) = opts.get(&Value::keyword("limit"))
    {
        out.truncate((*limit).max(0) as usize);
    }
    super::vec_value(ctx, out)
}

/// The name a program writes for a builtin in `apropos` results: its registry name, except
/// that Java interop methods (kept under `java/`) show the class their doc names
/// (`Integer/parseInt`); `repl/` names are the discovery special forms, listed as such.
fn writable_name(b: &'static Builtin) -> Option<&'static str> {
    if b.name.starts_with("repl/") {
        return None;
    }
    if b.name.starts_with("java/") {
        let call = b.doc.strip_prefix('(')?;
        let name = call.split([' ', ')']).next()?;
        return name.contains('/').then_some(name);
    }
    Some(b.name)
}

fn all_ns(ctx: &mut Ctx<'_>, _: &mut [Value]) -> R<Value> {
    let mut v: Vec<String> = names::NAMESPACES
        .iter()
        .map(|n| n.name().to_string())
        .collect();
    if let Some(h) = ctx.host() {
        v.extend(h.namespaces());
        v.extend(h.upstreams());
    }
    let mut seen = std::collections::HashSet::new();
    v.retain(|n| seen.insert(n.clone()));
    let v: Vec<Value> = v.iter().map(|s| Value::symbol(s)).collect();
    super::vec_value(ctx, v)
}

#[cfg(test)]
mod tests {
    use crate::{Interpreter, Limits};

    /// `doc` answers for every name the language defines, each built-in and special form, and
    /// what it prints names it.
    #[test]
    fn every_builtin_and_special_form_has_its_doc() {
        let mut interp = Interpreter::new(Limits::default());
        let builtins = super::super::all().into_iter().map(|b| b.name);
        let forms = crate::names::SPECIAL_FORMS.iter().map(|f| f.name);
        let mut missing = Vec::new();
        for name in builtins.chain(forms) {
            match interp.eval_str(&format!("(doc '{name})")) {
                Ok(v) if v.to_string() == "nil" && interp.take_output().contains(name) => {}
                other => missing.push(format!("{name}: {:?}", other.map(|v| v.to_string()))),
            }
        }
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
