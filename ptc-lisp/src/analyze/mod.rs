//! The analyzer: forms to [`Node`]s. Special forms and the core macros (threading, `cond`,
//! `when`, `for`, ...) are handled here; symbols resolve to frame slots, captures, globals,
//! builtins (through namespace aliases such as `clojure.string/join`) or host functions.

use std::sync::Arc;

use crate::ast::{Arity, Bind, CapSrc, ForClause, Lambda, Node};
use crate::builtins;
use crate::error::{LispError, Pos, Reason};
use crate::function::Builtin;
use crate::function::{Fast, Function, builtin_value};
use crate::globals::{FormRecord, GlobalTable};
use crate::names::{self, Constant, NsKind, Special};
use crate::reader::{Form, FormKind};
mod destructure;

use crate::sugar::{self, binding_vector, expect_args, invalid, list, sym};
use crate::value::Value;

struct FnScope {
    names: Vec<(Arc<str>, usize)>,
    n_slots: usize,
    captures: Vec<(Arc<str>, CapSrc)>,
    self_name: Option<Arc<str>>,
}

#[derive(Clone, Copy)]
struct RecurTarget {
    n_args: usize,
}

pub(crate) struct Analyzer<'a> {
    scopes: Vec<FnScope>,
    globals: &'a mut GlobalTable,
    /// What the top-level form being analyzed uses (for a session to keep a definition).
    record: FormRecord,
    host_namespaces: &'a [String],
    upstreams: &'a [String],
    recur: Option<RecurTarget>,
    /// `letfn` names in scope, each bound to a hidden global so the functions can call each other.
    letfn_names: Vec<(Arc<str>, usize, Arc<str>)>,
    gensym: usize,
    max_depth: usize,
    depth: usize,
}

type AR<T> = Result<T, LispError>;

impl<'a> Analyzer<'a> {
    pub(crate) fn new(
        globals: &'a mut GlobalTable,
        host_namespaces: &'a [String],
        upstreams: &'a [String],
        max_depth: usize,
    ) -> Self {
        Analyzer {
            scopes: Vec::new(),
            globals,
            record: FormRecord::default(),
            host_namespaces,
            upstreams,
            recur: None,
            letfn_names: Vec::new(),
            gensym: 0,
            max_depth,
            depth: 0,
        }
    }

    /// Analyzes one top-level form as its own frame; returns the node and the frame size.
    pub(crate) fn analyze_top(&mut self, form: &Form) -> AR<(Node, usize)> {
        self.scopes.push(FnScope {
            names: Vec::new(),
            n_slots: 0,
            captures: Vec::new(),
            self_name: None,
        });
        self.recur = None;
        self.record = FormRecord::default();
        let r = self.analyze(form, true);
        let scope = self.scopes.pop();
        let mut node = r?;
        let n = scope.map(|s| s.n_slots).unwrap_or(0);
        crate::liveness::mark_moves(&mut node, n);
        Ok((node, n))
    }

    /// What the last top-level form used: the globals it names, host functions, `data/` reads.
    pub(crate) fn take_record(&mut self) -> FormRecord {
        std::mem::take(&mut self.record)
    }

    /// Whether analysis is outside every function body of the top-level form: what is named
    /// here is read when the form runs, not when a function it creates is called.
    fn at_top(&self) -> bool {
        self.scopes.len() == 1
    }

    fn gensym(&mut self, base: &str) -> Arc<str> {
        self.gensym += 1;
        // A space can never appear in a symbol the reader produces, so no clash with user names.
        format!("{base} {}", self.gensym).into()
    }

    fn scope(&mut self) -> &mut FnScope {
        let n = self.scopes.len() - 1;
        &mut self.scopes[n]
    }

    fn new_slot(&mut self) -> usize {
        let s = self.scope();
        let slot = s.n_slots;
        s.n_slots += 1;
        slot
    }

    fn bind_name(&mut self, name: Arc<str>) -> usize {
        let slot = self.new_slot();
        self.scope().names.push((name, slot));
        slot
    }

    fn lookup_local(&mut self, idx: usize, name: &str) -> Option<CapSrc> {
        let scope = &self.scopes[idx];
        if let Some((_, slot)) = scope.names.iter().rev().find(|(n, _)| &**n == name) {
            return Some(CapSrc::Local(*slot));
        }
        if let Some(i) = scope.captures.iter().position(|(n, _)| &**n == name) {
            return Some(CapSrc::Capture(i));
        }
        if scope.self_name.as_deref() == Some(name) {
            return Some(CapSrc::SelfRef);
        }
        if idx == 0 {
            return None;
        }
        let src = self.lookup_local(idx - 1, name)?;
        let scope = &mut self.scopes[idx];
        scope.captures.push((name.into(), src));
        Some(CapSrc::Capture(scope.captures.len() - 1))
    }

    fn local(&mut self, name: &str) -> Option<Node> {
        let idx = self.scopes.len().checked_sub(1)?;
        Some(match self.lookup_local(idx, name)? {
            CapSrc::Local(s) => Node::Local(s),
            CapSrc::Capture(i) => Node::Capture(i),
            CapSrc::SelfRef => Node::SelfRef,
        })
    }

    pub(crate) fn analyze(&mut self, form: &Form, tail: bool) -> AR<Node> {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.depth -= 1;
            return Err(LispError::new(
                Reason::DepthExceeded,
                format!(
                    "program nesting deeper than {} levels after macro expansion",
                    self.max_depth
                ),
            )
            .with_pos(form.pos));
        }
        let r = self.analyze_inner(form, tail);
        self.depth -= 1;
        r
    }

    fn analyze_inner(&mut self, form: &Form, tail: bool) -> AR<Node> {
        let pos = form.pos;
        match &form.kind {
            FormKind::Nil => Ok(Node::Const(Value::Nil)),
            FormKind::Bool(b) => Ok(Node::Const(Value::Bool(*b))),
            FormKind::Int(i) => Ok(Node::Const(Value::Int(*i))),
            FormKind::Float(f) => Ok(Node::Const(Value::Float(*f))),
            FormKind::Str(s) => Ok(Node::Const(Value::Str(s.into()))),
            FormKind::Keyword(k) => Ok(Node::Const(Value::Keyword(k.into()))),
            FormKind::Regex(r) => match regex::Regex::new(r) {
                Ok(re) => Ok(Node::Const(Value::Regex(Arc::new(re)))),
                Err(e) => Err(LispError::new(
                    Reason::ParseError,
                    format!("invalid regex #\"{r}\": {e}"),
                )
                .with_pos(pos)),
            },
            FormKind::Symbol(s) => self.resolve_symbol(s, pos),
            FormKind::Vector(items) => {
                let nodes = items
                    .iter()
                    .map(|f| self.analyze(f, false))
                    .collect::<AR<Vec<_>>>()?;
                if nodes.iter().all(|n| matches!(n, Node::Const(_))) {
                    let vals = nodes
                        .into_iter()
                        .map(|n| match n {
                            Node::Const(v) => v,
                            _ => Value::Nil,
                        })
                        .collect();
                    return Ok(Node::Const(Value::vector(vals)));
                }
                Ok(Node::MakeVec(nodes))
            }
            FormKind::Map(items) => {
                let mut pairs = Vec::new();
                for kv in items.chunks(2) {
                    pairs.push((self.analyze(&kv[0], false)?, self.analyze(&kv[1], false)?));
                }
                if pairs
                    .iter()
                    .all(|(k, v)| matches!(k, Node::Const(_)) && matches!(v, Node::Const(_)))
                {
                    let mut entries = Vec::new();
                    for (k, v) in pairs {
                        if let (Node::Const(k), Node::Const(v)) = (k, v) {
                            if entries.iter().any(|(ek, _): &(Value, Value)| *ek == k) {
                                return Err(invalid(
                                    format!("duplicate key {k} in map literal"),
                                    pos,
                                ));
                            }
                            entries.push((k, v));
                        }
                    }
                    return Ok(Node::Const(Value::map_from(entries)));
                }
                Ok(Node::MakeMap(pairs))
            }
            FormKind::Set(items) => {
                let nodes = items
                    .iter()
                    .map(|f| self.analyze(f, false))
                    .collect::<AR<Vec<_>>>()?;
                Ok(Node::MakeSet(nodes))
            }
            FormKind::AnonFn(body) => self.analyze_anon_fn(body, pos),
            FormKind::List(items) => {
                if items.is_empty() {
                    return Ok(Node::Const(Value::vector(vec![])));
                }
                self.analyze_list(items, pos, tail)
            }
        }
    }

    fn resolve_symbol(&mut self, s: &Arc<str>, pos: Pos) -> AR<Node> {
        if let Some(n) = self.local(s) {
            return Ok(n);
        }
        if let Some((ns, name)) = s.split_once('/')
            && !ns.is_empty()
            && !name.is_empty()
        {
            return self.resolve_qualified(ns, name, pos);
        }
        if let Some((_, i, hidden)) = self.letfn_names.iter().rev().find(|(n, _, _)| n == s) {
            return Ok(Node::Global(*i, hidden.clone()));
        }
        if let Some(&i) = self.globals.names.get(&**s) {
            let eager = self.at_top();
            self.record.refs.push((s.clone(), eager));
            return Ok(Node::Global(i, s.clone()));
        }
        if let Some(b) = builtins::lookup(s) {
            return Ok(Node::Const(builtin_value(b)));
        }
        if names::special_form(s).is_some() {
            return Err(LispError::new(
                Reason::InvalidForm,
                format!("`{s}` is a special form and cannot be used as a value"),
            )
            .with_pos(pos));
        }
        Err(self.unknown_symbol(s, pos))
    }

    fn unknown_symbol(&mut self, s: &str, pos: Pos) -> LispError {
        if let Some(hint) = unsupported_hint(s) {
            return LispError::new(
                Reason::UnboundVar,
                format!("{s} is not available in PTC-Lisp"),
            )
            .with_pos(pos)
            .with_hint(hint);
        }
        let candidates = builtins::names()
            .map(|n| -> &str { n })
            .filter(|n| !n.contains('/'))
            .chain(names::SPECIAL_FORMS.iter().map(|f| f.name))
            .chain(self.globals.names.keys().map(|n| &**n))
            .chain(
                self.scopes
                    .iter()
                    .flat_map(|s| s.names.iter().map(|(n, _)| &**n)),
            )
            .filter(|n| !n.contains(' '));
        let e = LispError::new(Reason::UnboundVar, format!("unknown symbol {s}")).with_pos(pos);
        match names::did_you_mean(s, candidates) {
            Some(cand) => e.with_hint(format!("did you mean {cand}?")),
            None => e,
        }
    }

    fn resolve_qualified(&mut self, ns: &str, name: &str, pos: Pos) -> AR<Node> {
        if let Some(space) = names::namespace(ns) {
            match space.kind {
                NsKind::Data => {
                    if self.at_top() {
                        self.record.data_reads.push(format!("{ns}/{name}"));
                    }
                    return Ok(Node::Data(name.into(), pos));
                }
                NsKind::Builtins { .. } => {
                    if let Some(b) = builtins::lookup_in(space, name) {
                        return Ok(Node::Const(builtin_value(b)));
                    }
                    if names::qualified_special_form(&format!("{ns}/{name}")).is_some() {
                        return Err(invalid(
                            format!(
                                "`{ns}/{name}` is a special form and cannot be used as a value"
                            ),
                            pos,
                        ));
                    }
                    if let Some(c) = space.constant(name) {
                        return Ok(Node::Const(match c {
                            Constant::Float(f) => Value::Float(f),
                            Constant::Int(i) => Value::Int(i),
                        }));
                    }
                    return Err(LispError::new(
                        Reason::UnboundVar,
                        format!("unknown function {ns}/{name}"),
                    )
                    .with_pos(pos));
                }
                NsKind::Discovery => {
                    if let Some(b) = builtins::lookup_in(space, name) {
                        return Ok(Node::Const(builtin_value(b)));
                    }
                    if !self.host_namespaces.iter().any(|h| h == ns) {
                        return Err(LispError::new(
                            Reason::UnboundVar,
                            format!(
                                "no host provides {ns}/{name}: this program runs without tools"
                            ),
                        )
                        .with_pos(pos));
                    }
                }
            }
        }
        if self.host_namespaces.iter().any(|h| h == ns) {
            self.record.host_calls.push(format!("{ns}/{name}"));
            return Ok(Node::Const(Value::Func(Arc::new(Function::Host {
                ns: ns.into(),
                name: name.into(),
            }))));
        }
        if self.upstreams.iter().any(|u| u == ns) {
            return Err(LispError::new(
                Reason::UnboundVar,
                format!("{ns}/{name} names a tool of upstream {ns}, not a function value"),
            )
            .with_pos(pos)
            .with_hint(format!(
                "call it as ({ns}/{name} {{...}}), e.g. #({ns}/{name} {{:id %}}) where a \
                 function is needed; (doc '{ns}/{name}) describes it"
            )));
        }
        let mut known: Vec<&str> = names::NAMESPACES.iter().map(|n| n.name()).collect();
        known.extend(self.host_namespaces.iter().map(String::as_str));
        known.extend(self.upstreams.iter().map(String::as_str));
        let mut seen = std::collections::HashSet::new();
        known.retain(|n| seen.insert(*n));
        let e = LispError::new(
            Reason::UnboundVar,
            format!(
                "unknown namespace `{ns}` in {ns}/{name}; known namespaces: {}",
                known.join(", ")
            ),
        )
        .with_pos(pos);
        let candidates = names::NAMESPACES
            .iter()
            .flat_map(|n| n.all_names())
            .map(|n| -> &str { n })
            .chain(self.host_namespaces.iter().map(String::as_str))
            .chain(self.upstreams.iter().map(String::as_str));
        match names::did_you_mean(ns, candidates) {
            Some(c) => Err(e.with_hint(format!("did you mean {c}/{name}?"))),
            None => Err(e),
        }
    }

    fn analyze_body(&mut self, forms: &[Form], tail: bool) -> AR<Node> {
        match forms.len() {
            0 => Ok(Node::Const(Value::Nil)),
            1 => self.analyze(&forms[0], tail),
            n => {
                let mut nodes = Vec::with_capacity(n);
                for (i, f) in forms.iter().enumerate() {
                    nodes.push(self.analyze(f, tail && i == n - 1)?);
                }
                Ok(Node::Do(nodes))
            }
        }
    }

    fn analyze_list(&mut self, items: &[Form], pos: Pos, tail: bool) -> AR<Node> {
        let head = &items[0];
        let args = &items[1..];
        if let FormKind::Symbol(name) = &head.kind {
            let is_local = self.local(name).is_some();
            if !is_local && let Some(form) = names::special_form(name) {
                return self.analyze_special(form.kind, name, args, pos, tail);
            }
            // `clojure.core/when`, and `tool/doc`, `tool/dir` with their unquoted names.
            if !is_local && let Some(form) = names::qualified_special_form(name) {
                return self.analyze_special(form.kind, form.name, args, pos, tail);
            }
            // `(server/tool {...})`: a call of an upstream's tool. Upstream names never shadow a
            // namespace of the language or the host (the config refuses them), and a program
            // cannot define a qualified name, so the form means nothing else.
            if let Some((ns, _)) = name.split_once('/')
                && self.upstreams.iter().any(|u| u == ns)
                && names::namespace(ns).is_none()
                && !self.host_namespaces.iter().any(|h| h == ns)
            {
                let call = crate::sugar::upstream_call(name, args, pos);
                return self.analyze(&call, tail);
            }
        }
        if let FormKind::Keyword(k) = &head.kind {
            if args.is_empty() || args.len() > 2 {
                return Err(LispError::new(
                    Reason::ArityError,
                    format!(
                        "arity error: keyword :{k} expects 1 or 2 argument(s), got {}",
                        args.len()
                    ),
                )
                .with_pos(pos));
            }
            let target = self.analyze(&args[0], false)?;
            let default = match args.get(1) {
                Some(d) => Some(Box::new(self.analyze(d, false)?)),
                None => None,
            };
            return Ok(Node::KwGet(
                Value::Keyword(k.into()),
                Box::new(target),
                default,
            ));
        }
        let f = self.analyze(head, false)?;
        let arg_nodes = args
            .iter()
            .map(|a| self.analyze(a, false))
            .collect::<AR<Vec<_>>>()?;
        if let Node::Const(Value::Func(func)) = &f
            && let Function::Builtin(b) = &**func
        {
            if b.traits.pure_builder && arg_nodes.iter().all(|n| matches!(n, Node::Const(_))) {
                return Ok(Node::Memo(
                    Box::new(Node::CallBuiltin(b, arg_nodes, pos)),
                    std::sync::OnceLock::new(),
                ));
            }
            return Ok(match binop(b, arg_nodes, pos) {
                Ok(node) => node,
                Err(arg_nodes) => Node::CallBuiltin(b, arg_nodes, pos),
            });
        }
        Ok(Node::Call(Box::new(f), arg_nodes, pos))
    }

    fn analyze_special(
        &mut self,
        kind: Special,
        name: &str,
        args: &[Form],
        pos: Pos,
        tail: bool,
    ) -> AR<Node> {
        match kind {
            Special::Sugar(s) => {
                let form = sugar::expand(s, name, args, pos, &mut |base| self.gensym(base))?;
                self.analyze(&form, tail)
            }
            Special::Quote => {
                expect_args("quote", args, 1, Some(1), pos)?;
                Ok(Node::Const(crate::read_data::form_to_value(&args[0])?))
            }
            Special::Var => {
                expect_args("var", args, 1, Some(1), pos)?;
                match args[0].sym_name() {
                    Some(s) => Ok(Node::Const(Value::Var(s.into()))),
                    None => Err(invalid("var expects a symbol", pos)),
                }
            }
            Special::If => {
                expect_args("if", args, 2, Some(3), pos)?;
                let c = self.analyze(&args[0], false)?;
                let t = self.analyze(&args[1], tail)?;
                let e = match args.get(2) {
                    Some(f) => self.analyze(f, tail)?,
                    None => Node::Const(Value::Nil),
                };
                Ok(Node::If(Box::new(c), Box::new(t), Box::new(e)))
            }
            Special::IfNot => {
                expect_args("if-not", args, 2, Some(3), pos)?;
                let c = self.analyze(&args[0], false)?;
                let t = self.analyze(&args[1], tail)?;
                let e = match args.get(2) {
                    Some(f) => self.analyze(f, tail)?,
                    None => Node::Const(Value::Nil),
                };
                Ok(Node::If(Box::new(c), Box::new(e), Box::new(t)))
            }
            Special::Do => self.analyze_body(args, tail),
            Special::Comment => Ok(Node::Const(Value::Nil)),
            Special::Namespace => Err(LispError::new(
                Reason::UnboundVar,
                format!("{name} is not available in PTC-Lisp: a program has one namespace"),
            )
            .with_pos(pos)
            .with_hint(
                "every builtin is already loaded: call str/join, set/union, json/parse-string, Math/abs, ... directly",
            )),
            Special::Letfn => {
                let specs = match args.first().map(|f| &f.kind) {
                    Some(FormKind::Vector(specs)) => specs,
                    _ => return Err(invalid("letfn requires a vector of function specs", pos)),
                };
                let mark = self.letfn_names.len();
                let mut names = Vec::new();
                for spec in specs {
                    let name = match &spec.kind {
                        FormKind::List(items) => items.first().and_then(Form::sym_name),
                        _ => None,
                    };
                    let Some(name) = name else {
                        return Err(invalid(
                            "letfn specs look like (name [params] body...)",
                            spec.pos,
                        ));
                    };
                    let hidden = self.gensym(name);
                    let idx = self.globals.declare(&hidden);
                    self.letfn_names.push((name.into(), idx, hidden.clone()));
                    names.push((idx, hidden));
                }
                let result = (|| -> AR<Node> {
                    let mut nodes = Vec::new();
                    for (spec, (idx, hidden)) in specs.iter().zip(names) {
                        if let FormKind::List(items) = &spec.kind {
                            let f = self.analyze_fn(&items[1..], spec.pos, Some(hidden.clone()))?;
                            nodes.push(Node::Def {
                                idx,
                                name: hidden,
                                value: Box::new(f),
                                once: false,
                                origin: None,
                            });
                        }
                    }
                    nodes.push(self.analyze_body(&args[1..], tail)?);
                    Ok(Node::Do(nodes))
                })();
                self.letfn_names.truncate(mark);
                result
            }
            Special::Declare => {
                for a in args {
                    match a.sym_name() {
                        Some(s) if !s.contains('/') => {
                            self.globals.declare(&Arc::from(s));
                        }
                        _ => return Err(invalid("declare expects symbols", a.pos)),
                    }
                }
                Ok(Node::Const(Value::Nil))
            }
            Special::When | Special::WhenNot => {
                expect_args(name, args, 1, None, pos)?;
                let c = self.analyze(&args[0], false)?;
                let body = self.analyze_body(&args[1..], tail)?;
                let nil = Node::Const(Value::Nil);
                Ok(if kind == Special::When {
                    Node::If(Box::new(c), Box::new(body), Box::new(nil))
                } else {
                    Node::If(Box::new(c), Box::new(nil), Box::new(body))
                })
            }
            Special::And | Special::Or => {
                if args.is_empty() {
                    return Ok(Node::Const(if kind == Special::And {
                        Value::Bool(true)
                    } else {
                        Value::Nil
                    }));
                }
                let n = args.len();
                let nodes = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| self.analyze(a, tail && i == n - 1))
                    .collect::<AR<Vec<_>>>()?;
                if n == 1 {
                    return Ok(nodes.into_iter().next().unwrap_or(Node::Const(Value::Nil)));
                }
                Ok(if kind == Special::And {
                    Node::And(nodes)
                } else {
                    Node::Or(nodes)
                })
            }
            Special::Let => {
                let bv = binding_vector(name, args.first(), pos)?;
                let mark = self.scope().names.len();
                let mut binds = Vec::new();
                for pair in bv.chunks(2) {
                    let init = self.analyze(&pair[1], false)?;
                    self.bind_pattern(&pair[0], init, &mut binds)?;
                }
                let body = self.analyze_body(&args[1..], tail)?;
                self.scope().names.truncate(mark);
                Ok(Node::Let(binds, Box::new(body)))
            }
            Special::Loop => self.analyze_loop(args, pos),
            Special::Recur => {
                let target = match self.recur {
                    Some(t) => t,
                    None => return Err(invalid("recur is only allowed inside loop or fn", pos)),
                };
                if !tail {
                    return Err(invalid("recur must be in tail position", pos));
                }
                if args.len() != target.n_args {
                    return Err(LispError::new(
                        Reason::ArityError,
                        format!(
                            "arity error: recur expects {} argument(s), got {}",
                            target.n_args,
                            args.len()
                        ),
                    )
                    .with_pos(pos));
                }
                let nodes = args
                    .iter()
                    .map(|a| self.analyze(a, false))
                    .collect::<AR<Vec<_>>>()?;
                Ok(Node::Recur(nodes))
            }
            Special::Fn => self.analyze_fn(args, pos, None),
            Special::Def => {
                expect_args("def", args, 1, Some(3), pos)?;
                let name: Arc<str> = match args[0].sym_name() {
                    Some(s) if !s.contains('/') => s.into(),
                    _ => return Err(invalid("def expects a symbol name", pos)),
                };
                let idx = self.globals.declare(&name);
                let value = match args.len() {
                    1 => Node::Const(Value::Nil),
                    2 => self.analyze(&args[1], false)?,
                    _ => self.analyze(&args[2], false)?,
                };
                Ok(Node::Def {
                    idx,
                    name,
                    value: Box::new(value),
                    once: false,
                    origin: None,
                })
            }
            Special::Defonce => {
                expect_args("defonce", args, 2, Some(2), pos)?;
                let name: Arc<str> = match args[0].sym_name() {
                    Some(s) if !s.contains('/') => s.into(),
                    _ => return Err(invalid("defonce expects a symbol name", pos)),
                };
                let idx = self.globals.declare(&name);
                let value = self.analyze(&args[1], false)?;
                Ok(Node::Def {
                    idx,
                    name,
                    value: Box::new(value),
                    once: true,
                    origin: None,
                })
            }
            Special::Defn => {
                expect_args(name, args, 2, None, pos)?;
                let fname: Arc<str> = match args[0].sym_name() {
                    Some(s) if !s.contains('/') => s.into(),
                    _ => return Err(invalid("defn expects a symbol name", pos)),
                };
                let mut rest = &args[1..];
                if let Some(FormKind::Str(_)) = rest.first().map(|f| &f.kind)
                    && rest.len() > 1
                {
                    rest = &rest[1..];
                }
                if let Some(FormKind::Map(_)) = rest.first().map(|f| &f.kind)
                    && rest.len() > 1
                {
                    rest = &rest[1..];
                }
                let idx = self.globals.declare(&fname);
                let f = self.analyze_fn(rest, pos, Some(fname.clone()))?;
                Ok(Node::Def {
                    idx,
                    name: fname,
                    value: Box::new(f),
                    once: false,
                    origin: None,
                })
            }
            Special::Cond => {
                if !args.len().is_multiple_of(2) {
                    return Err(invalid("cond requires an even number of forms", pos));
                }
                // A flat clause list (not nested ifs): a long cond must not nest the evaluator.
                let mut clauses = Vec::with_capacity(args.len() / 2);
                for pair in args.chunks(2) {
                    let test = if matches!(pair[0].kind, FormKind::Keyword(_)) {
                        Node::Const(Value::Bool(true))
                    } else {
                        self.analyze(&pair[0], false)?
                    };
                    let then = self.analyze(&pair[1], tail)?;
                    clauses.push((test, then));
                }
                Ok(Node::Cond(clauses))
            }
            Special::Case => {
                expect_args("case", args, 1, None, pos)?;
                let e = self.analyze(&args[0], false)?;
                let clauses = &args[1..];
                let (pairs, default) = if clauses.len() % 2 == 1 {
                    (
                        &clauses[..clauses.len() - 1],
                        Some(&clauses[clauses.len() - 1]),
                    )
                } else {
                    (clauses, None)
                };
                let mut table = Vec::new();
                for pair in pairs.chunks(2) {
                    let body = self.analyze(&pair[1], tail)?;
                    match &pair[0].kind {
                        FormKind::List(alts) => {
                            // A list of alternatives shares one body; analyze it once per alternative.
                            for (i, alt) in alts.iter().enumerate() {
                                let v = crate::read_data::form_to_value(alt)?;
                                let b = if i + 1 == alts.len() {
                                    None
                                } else {
                                    Some(self.analyze(&pair[1], tail)?)
                                };
                                table.push((v, b));
                            }
                            if let Some(last) = table.last_mut() {
                                last.1 = Some(body);
                            }
                        }
                        _ => table.push((crate::read_data::form_to_value(&pair[0])?, Some(body))),
                    }
                }
                let table = table
                    .into_iter()
                    .map(|(v, b)| (v, b.unwrap_or(Node::Const(Value::Nil))))
                    .collect();
                let default = match default {
                    Some(d) => self.analyze(d, tail)?,
                    None => Node::Const(Value::Nil),
                };
                Ok(Node::Case(Box::new(e), table, Box::new(default)))
            }
            Special::For => self.analyze_for(args, pos, true),
            Special::Doseq => self.analyze_for(args, pos, false),
            Special::Return => {
                expect_args(name, args, 0, Some(1), pos)?;
                let v = match args.first() {
                    Some(a) => self.analyze(a, false)?,
                    None => Node::Const(Value::Nil),
                };
                Ok(Node::Return(Box::new(v)))
            }
            Special::Fail => {
                expect_args(name, args, 0, Some(1), pos)?;
                let v = match args.first() {
                    Some(a) => self.analyze(a, false)?,
                    None => Node::Const(Value::Nil),
                };
                Ok(Node::Fail(Box::new(v), pos))
            }
            Special::Discovery => {
                // Like clojure.repl, the argument is a name, quoted or not.
                let mut nodes = Vec::new();
                for a in args {
                    match &a.kind {
                        FormKind::Symbol(s) => nodes.push(Node::Const(Value::Symbol(s.into()))),
                        _ => nodes.push(self.analyze(a, false)?),
                    }
                }
                let b = builtins::lookup(&format!("repl/{name}"))
                    .ok_or_else(|| invalid(format!("{name} is unavailable"), pos))?;
                Ok(Node::CallBuiltin(b, nodes, pos))
            }
        }
    }

    fn analyze_loop(&mut self, args: &[Form], pos: Pos) -> AR<Node> {
        let bv = binding_vector("loop", args.first(), pos)?;
        let mark = self.scope().names.len();
        let first_slot = self.scope().n_slots;
        let mut binds = Vec::new();
        let mut recur_slots = Vec::new();
        let mut prologue = Vec::new();
        let mut patterns: Vec<(&Form, usize)> = Vec::new();
        for pair in bv.chunks(2) {
            let init = self.analyze(&pair[1], false)?;
            match &pair[0].kind {
                FormKind::Symbol(s) => {
                    let slot = self.bind_name(s.clone());
                    binds.push(Bind { slot, init });
                    recur_slots.push(slot);
                }
                _ => {
                    // Destructuring loop binding: recur rebinds a hidden slot. The pattern is bound
                    // right away (later initial bindings may use its names) and again at the top
                    // of the body, so each iteration destructures the new value.
                    let slot = self.new_slot();
                    binds.push(Bind { slot, init });
                    recur_slots.push(slot);
                    self.bind_pattern(&pair[0], Node::Local(slot), &mut binds)?;
                    patterns.push((&pair[0], slot));
                }
            }
        }
        for (pat, slot) in patterns {
            self.bind_pattern(pat, Node::Local(slot), &mut prologue)?;
        }
        let saved = self.recur.replace(RecurTarget {
            n_args: recur_slots.len(),
        });
        let body = self.analyze_body(&args[1..], true);
        self.recur = saved;
        let mut body = body?;
        if !prologue.is_empty() {
            body = Node::Let(prologue, Box::new(body));
        }
        self.scope().names.truncate(mark);
        Ok(Node::Loop {
            binds,
            recur_slots,
            first_slot,
            body: Box::new(body),
            pos,
        })
    }

    fn analyze_for(&mut self, args: &[Form], pos: Pos, collect: bool) -> AR<Node> {
        let what = if collect { "for" } else { "doseq" };
        let bv = match args.first().map(|f| &f.kind) {
            Some(FormKind::Vector(items)) if items.len() % 2 == 0 && !items.is_empty() => items,
            _ => {
                return Err(invalid(
                    format!("{what} requires a vector of bindings"),
                    pos,
                ));
            }
        };
        let mark = self.scope().names.len();
        let first_slot = self.scope().n_slots;
        let saved = self.recur.take();
        let result = (|| -> AR<Node> {
            let mut clauses = Vec::new();
            for pair in bv.chunks(2) {
                match &pair[0].kind {
                    FormKind::Keyword(k) if &**k == "when" => {
                        clauses.push(ForClause::When(self.analyze(&pair[1], false)?))
                    }
                    FormKind::Keyword(k) if &**k == "while" => {
                        clauses.push(ForClause::While(self.analyze(&pair[1], false)?))
                    }
                    FormKind::Keyword(k) if &**k == "let" => {
                        let lets = match &pair[1].kind {
                            FormKind::Vector(items) if items.len() % 2 == 0 => items,
                            _ => {
                                return Err(invalid(
                                    ":let in for requires a binding vector",
                                    pair[1].pos,
                                ));
                            }
                        };
                        let mut binds = Vec::new();
                        for lp in lets.chunks(2) {
                            let init = self.analyze(&lp[1], false)?;
                            self.bind_pattern(&lp[0], init, &mut binds)?;
                        }
                        clauses.push(ForClause::Let(binds));
                    }
                    FormKind::Keyword(k) => {
                        return Err(invalid(
                            format!("unsupported {what} modifier :{k}"),
                            pair[0].pos,
                        ));
                    }
                    _ => {
                        let coll = self.analyze(&pair[1], false)?;
                        let slot = self.new_slot();
                        let mut binds = Vec::new();
                        self.bind_pattern(&pair[0], Node::Local(slot), &mut binds)?;
                        clauses.push(ForClause::Each { slot, coll, binds });
                    }
                }
            }
            let body = self.analyze_body(&args[1..], false)?;
            Ok(Node::For {
                clauses,
                first_slot,
                body: Box::new(body),
                collect,
                pos,
            })
        })();
        self.recur = saved;
        self.scope().names.truncate(mark);
        result
    }

    fn analyze_anon_fn(&mut self, body: &[Form], pos: Pos) -> AR<Node> {
        let mut max = 0usize;
        let mut rest = false;
        let (mut bare, mut one) = (false, false);
        let mut stack: Vec<&Form> = body.iter().collect();
        while let Some(f) = stack.pop() {
            match &f.kind {
                FormKind::Symbol(s) => {
                    if &**s == "%" || &**s == "%1" {
                        max = max.max(1);
                        bare |= &**s == "%";
                        one |= &**s == "%1";
                    } else if &**s == "%&" {
                        rest = true;
                    } else if let Some(n) =
                        s.strip_prefix('%').and_then(|d| d.parse::<usize>().ok())
                    {
                        max = max.max(n);
                    }
                }
                FormKind::List(items)
                | FormKind::Vector(items)
                | FormKind::Map(items)
                | FormKind::Set(items) => stack.extend(items.iter()),
                FormKind::AnonFn(_) => {
                    return Err(invalid(
                        "nested #() function literals are not allowed",
                        f.pos,
                    ));
                }
                _ => {}
            }
        }
        let mut params: Vec<Form> = (1..=max).map(|i| sym(&format!("%{i}"), pos)).collect();
        // `%` is an alias of `%1`: the first parameter takes the name the body uses, and only a
        // body using both binds one to the other (a binding per call otherwise).
        if bare && !one {
            params[0] = sym("%", pos);
        }
        if rest {
            params.push(sym("&", pos));
            params.push(sym("%&", pos));
        }
        let body_form = list(body.to_vec(), pos);
        let inner = if bare && one {
            list(
                vec![
                    sym("let", pos),
                    Form {
                        kind: FormKind::Vector(vec![sym("%", pos), sym("%1", pos)]),
                        pos,
                    },
                    body_form,
                ],
                pos,
            )
        } else {
            body_form
        };
        let fn_args = vec![
            Form {
                kind: FormKind::Vector(params),
                pos,
            },
            inner,
        ];
        self.analyze_fn(&fn_args, pos, None)
    }

    fn analyze_fn(&mut self, args: &[Form], pos: Pos, def_name: Option<Arc<str>>) -> AR<Node> {
        let mut rest = args;
        let mut self_name = None;
        if let Some(FormKind::Symbol(s)) = rest.first().map(|f| &f.kind) {
            self_name = Some(s.clone());
            rest = &rest[1..];
        }
        let arity_forms: Vec<(&[Form], &[Form])> = match rest.first().map(|f| &f.kind) {
            Some(FormKind::Vector(params)) => vec![(params.as_slice(), &rest[1..])],
            Some(FormKind::List(_)) => {
                let mut v = Vec::new();
                for f in rest {
                    match &f.kind {
                        FormKind::List(items) => match items.first().map(|p| &p.kind) {
                            Some(FormKind::Vector(params)) => {
                                v.push((params.as_slice(), &items[1..]))
                            }
                            _ => {
                                return Err(invalid(
                                    "each arity of fn must start with a parameter vector",
                                    f.pos,
                                ));
                            }
                        },
                        _ => return Err(invalid("fn arities must be lists", f.pos)),
                    }
                }
                v
            }
            _ => return Err(invalid("fn requires a parameter vector", pos)),
        };
        let name = self_name.clone().or(def_name);
        self.scopes.push(FnScope {
            names: Vec::new(),
            n_slots: 0,
            captures: Vec::new(),
            self_name,
        });
        let saved_recur = self.recur;
        let result = (|| -> AR<Vec<Arity>> {
            let mut arities = Vec::new();
            let mut max_slots = 0;
            for (params, body) in arity_forms {
                // Every arity numbers its frame from slot 0: arguments land in the first slots.
                self.scope().n_slots = 0;
                let mark = self.scope().names.len();
                let mut fixed: Vec<&Form> = Vec::new();
                let mut variadic: Option<&Form> = None;
                let mut i = 0;
                while i < params.len() {
                    if params[i].sym_name() == Some("&") {
                        match params.get(i + 1) {
                            Some(p) if i + 2 == params.len() => variadic = Some(p),
                            _ => {
                                return Err(invalid(
                                    "& in a parameter vector must be followed by exactly one parameter",
                                    params[i].pos,
                                ));
                            }
                        }
                        break;
                    }
                    fixed.push(&params[i]);
                    i += 1;
                }
                // Parameters occupy the first slots in order; destructuring follows in a prologue.
                let mut param_slots = Vec::new();
                for _ in 0..fixed.len() + usize::from(variadic.is_some()) {
                    param_slots.push(self.new_slot());
                }
                let mut prologue = Vec::new();
                for (p, slot) in fixed.iter().chain(variadic.iter()).zip(param_slots.iter()) {
                    match &p.kind {
                        FormKind::Symbol(s) => self.scope().names.push((s.clone(), *slot)),
                        _ => self.bind_pattern(p, Node::Local(*slot), &mut prologue)?,
                    }
                }
                self.recur = Some(RecurTarget {
                    n_args: param_slots.len(),
                });
                let mut body_node = self.analyze_body(body, true)?;
                if !prologue.is_empty() {
                    body_node = Node::Let(prologue, Box::new(body_node));
                }
                self.scope().names.truncate(mark);
                if arities
                    .iter()
                    .any(|a: &Arity| a.n_fixed == fixed.len() && a.variadic == variadic.is_some())
                {
                    return Err(invalid(
                        "fn has two arities with the same number of parameters",
                        pos,
                    ));
                }
                arities.push(Arity {
                    n_fixed: fixed.len(),
                    variadic: variadic.is_some(),
                    body: body_node,
                });
                max_slots = max_slots.max(self.scope().n_slots);
            }
            self.scope().n_slots = max_slots;
            Ok(arities)
        })();
        self.recur = saved_recur;
        let scope = self.scopes.pop();
        let mut arities = result?;
        let scope = match scope {
            Some(s) => s,
            None => return Err(invalid("internal: scope underflow", pos)),
        };
        for a in &mut arities {
            crate::liveness::mark_moves(&mut a.body, scope.n_slots);
        }
        let lambda = Lambda {
            name,
            arities,
            n_slots: scope.n_slots,
        };
        let caps = scope.captures.into_iter().map(|(_, src)| src).collect();
        Ok(Node::Fn(Arc::new(lambda), caps))
    }
}

/// Integer fast path for two-argument arithmetic/comparison and `inc`/`dec`; gives the
/// arguments back when the call does not qualify.
fn binop(b: &'static Builtin, args: Vec<Node>, pos: Pos) -> Result<Node, Vec<Node>> {
    let (op, unary) = match (b.traits.fast, args.len()) {
        (Some(Fast::Binary(op)), 2) => (op, false),
        (Some(Fast::Unary(op)), 1) => (op, true),
        _ => return Err(args),
    };
    let mut it = args.into_iter();
    let a = it.next().unwrap_or(Node::Const(Value::Nil));
    let second = it.next().unwrap_or(Node::Const(Value::Int(1)));
    Ok(Node::BinOp {
        op,
        a: Box::new(a),
        b: Box::new(second),
        builtin: b,
        unary,
        pos,
    })
}

/// Why a well-known Clojure name is missing, and what to use instead.
fn unsupported_hint(name: &str) -> Option<&'static str> {
    Some(match name {
        "iterate" | "cycle" | "repeatedly" | "lazy-seq" | "lazy-cat" => {
            "sequences are eager and finite; use range, repeat with a count, or loop/recur"
        }
        "atom" | "swap!" | "reset!" | "deref" | "volatile!" | "vswap!" | "ref" | "dosync"
        | "agent" => "there is no mutable state; thread values through let, loop/recur or reduce",
        "try" | "catch" | "throw" | "ex-info" | "ex-message" | "finally" => {
            "there are no exceptions; bad data gives nil, and (fail msg) ends the program with an error"
        }
        "eval" | "read-string" | "load-string" => "programs cannot evaluate code at run time",
        "defmacro" | "macroexpand" => "macros are not supported; use defn",
        "slurp" | "spit" | "future" | "promise" | "deliver" | "Thread/sleep" | "sh" => {
            "there is no I/O or concurrency beyond pmap/pcalls and tool calls"
        }
        "defrecord" | "deftype" | "defprotocol" | "defmulti" | "defmethod" | "reify" | "proxy" => {
            "use maps and functions instead of types, protocols or multimethods"
        }
        "sorted-map" | "sorted-set" | "sorted-map-by" | "sorted-set-by" => {
            "maps and sets already iterate in sorted order: use {} or #{}, and sort-by their entries for another order"
        }
        "rand" | "rand-int" | "rand-nth" | "shuffle" | "random-uuid" => {
            "programs are deterministic; there is no randomness"
        }
        _ => return None,
    })
}
