//! Destructuring patterns (vector, map, `:keys :strs :syms :or :as`, `&`, nested), compiled
//! into sequential bindings over the run-time views in `crate::destructure`.

use std::sync::Arc;

use super::{AR, Analyzer};
use crate::ast::{Bind, Node};
use crate::error::{LispError, Reason};
use crate::reader::{Form, FormKind};
use crate::sugar::invalid;
use crate::value::{Text, Value};

impl Analyzer<'_> {
    /// Binds a (possibly destructuring) pattern to `init`, appending sequential bindings.
    pub(super) fn bind_pattern(&mut self, pat: &Form, init: Node, out: &mut Vec<Bind>) -> AR<()> {
        match &pat.kind {
            FormKind::Symbol(s) => {
                if s.contains('/') {
                    return Err(LispError::new(
                        Reason::DestructureError,
                        format!("cannot bind qualified symbol {s}"),
                    )
                    .with_pos(pat.pos));
                }
                let slot = self.new_slot();
                out.push(Bind { slot, init });
                self.scope().names.push((s.clone(), slot));
                Ok(())
            }
            FormKind::Vector(items) => {
                let tmp = self.new_slot();
                out.push(Bind { slot: tmp, init });
                let mut i = 0;
                let mut idx = 0;
                while i < items.len() {
                    let p = &items[i];
                    if p.sym_name() == Some("&") {
                        let rp = items.get(i + 1).ok_or_else(|| {
                            LispError::new(
                                Reason::DestructureError,
                                "& must be followed by a pattern",
                            )
                            .with_pos(p.pos)
                        })?;
                        self.bind_pattern(
                            rp,
                            Node::RestFrom(Box::new(Node::Local(tmp)), idx),
                            out,
                        )?;
                        i += 2;
                        continue;
                    }
                    if let FormKind::Keyword(k) = &p.kind
                        && &**k == "as"
                    {
                        let ap = items.get(i + 1).ok_or_else(|| {
                            LispError::new(
                                Reason::DestructureError,
                                ":as must be followed by a symbol",
                            )
                            .with_pos(p.pos)
                        })?;
                        self.bind_pattern(ap, Node::Local(tmp), out)?;
                        i += 2;
                        continue;
                    }
                    self.bind_pattern(p, Node::Nth(Box::new(Node::Local(tmp)), idx), out)?;
                    idx += 1;
                    i += 1;
                }
                Ok(())
            }
            FormKind::Map(items) => {
                let tmp = self.new_slot();
                out.push(Bind { slot: tmp, init });
                // Defaults from :or, analyzed lazily per binding.
                let mut defaults: Vec<(Arc<str>, &Form)> = Vec::new();
                for kv in items.chunks(2) {
                    if let FormKind::Keyword(k) = &kv[0].kind
                        && &**k == "or"
                    {
                        match &kv[1].kind {
                            FormKind::Map(ds) => {
                                for d in ds.chunks(2) {
                                    if let Some(n) = d[0].sym_name() {
                                        defaults.push((n.into(), &d[1]));
                                    }
                                }
                            }
                            _ => {
                                return Err(LispError::new(
                                    Reason::DestructureError,
                                    ":or requires a map",
                                )
                                .with_pos(kv[1].pos));
                            }
                        }
                    }
                }
                for kv in items.chunks(2) {
                    let (k, v) = (&kv[0], &kv[1]);
                    match &k.kind {
                        FormKind::Keyword(kw) if matches!(&**kw, "keys" | "strs" | "syms") => {
                            let names = match &v.kind {
                                FormKind::Vector(ns) => ns,
                                _ => {
                                    return Err(LispError::new(
                                        Reason::DestructureError,
                                        format!(":{kw} requires a vector"),
                                    )
                                    .with_pos(v.pos));
                                }
                            };
                            for n in names {
                                let (full, local): (Arc<str>, Arc<str>) = match &n.kind {
                                    FormKind::Symbol(s) | FormKind::Keyword(s) => {
                                        let local = s.rsplit('/').next().unwrap_or(s).into();
                                        (s.clone(), local)
                                    }
                                    _ => {
                                        return Err(LispError::new(
                                            Reason::DestructureError,
                                            "destructuring names must be symbols",
                                        )
                                        .with_pos(n.pos));
                                    }
                                };
                                let key = match &**kw {
                                    "keys" => Value::Keyword(Text::new(&full)),
                                    "strs" => Value::Str(Text::new(&full)),
                                    _ => Value::Symbol(Text::new(&full)),
                                };
                                let default = match defaults.iter().find(|(d, _)| *d == local) {
                                    Some((_, f)) => Some(Box::new(self.analyze(f, false)?)),
                                    None => None,
                                };
                                let slot = self.new_slot();
                                out.push(Bind {
                                    slot,
                                    init: Node::MapGet(Box::new(Node::Local(tmp)), key, default),
                                });
                                self.scope().names.push((local, slot));
                            }
                        }
                        FormKind::Keyword(kw) if &**kw == "as" => {
                            self.bind_pattern(v, Node::Local(tmp), out)?;
                        }
                        FormKind::Keyword(kw) if &**kw == "or" => {}
                        _ => {
                            let key = crate::read_data::form_to_value(v)?;
                            let default = match k
                                .sym_name()
                                .and_then(|n| defaults.iter().find(|(d, _)| &**d == n))
                            {
                                Some((_, f)) => Some(Box::new(self.analyze(f, false)?)),
                                None => None,
                            };
                            self.bind_pattern(
                                k,
                                Node::MapGet(Box::new(Node::Local(tmp)), key, default),
                                out,
                            )?;
                        }
                    }
                }
                Ok(())
            }
            _ => Err(invalid(
                "unsupported binding form: expected a symbol, vector or map",
                pat.pos,
            )),
        }
    }
}
