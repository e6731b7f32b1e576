//! Upstream discovery for a program: `tool/servers`, `dir`, `doc`, `meta`, `apropos` and
//! `tool/search`, each one operation of the run's discovery budget, showing only what the
//! caller's grant allows.

use std::sync::atomic::Ordering;

use ptc_lisp::{CallContext, HostError, Value};

use super::{ProgramHost, err_map, fault, kw, message_of};
use crate::call::contract::Reason;
use crate::catalog::discovery::{
    apropos, dir_lines, doc_text, listing, server_doc_text, server_meta, visible,
};
use crate::catalog::{ServerEntry, ToolEntry};
impl ProgramHost {
    /// Takes one discovery operation from the budget; the refusal value when it is spent.
    pub(super) fn take_discovery(&self) -> Option<Value> {
        let run = &self.run;
        if run.discovery.fetch_add(1, Ordering::Relaxed) >= run.budgets.max_discovery {
            Some(err_map(
                Reason::CapExhausted,
                &format!(
                    "the program's budget of {} discovery operations is spent",
                    run.budgets.max_discovery
                ),
                None,
            ))
        } else {
            None
        }
    }

    pub(super) fn servers(&self) -> Result<Value, HostError> {
        if let Some(v) = self.take_discovery() {
            return Ok(v);
        }
        let grant = &self.run.grant;
        let list = self
            .upstreams()
            .catalog()
            .servers()
            .iter()
            .filter(|s| crate::catalog::discovery::shown(s, grant))
            .map(|s| {
                Value::map_from(vec![
                    (kw("name"), Value::str(&s.name)),
                    (kw("description"), Value::str(&self.redact(s.description()))),
                    (
                        kw("tool_count"),
                        s.tools()
                            .map_or(Value::Nil, |_| Value::Int(visible(s, grant).len() as i64)),
                    ),
                    (kw("loaded"), Value::Bool(s.tools().is_some())),
                ])
            })
            .collect();
        Ok(Value::vector(list))
    }

    pub(super) fn dir(
        &self,
        cx: &mut CallContext<'_>,
        name: &str,
    ) -> Result<Option<Value>, HostError> {
        // `(dir 'tool)`: the runtime lists its discovery forms, the host its own functions.
        if name == "tool" {
            let names = super::functions::FUNCTIONS
                .iter()
                // Unqualified, as the runtime lists its forms of `tool/`.
                .map(|f| Value::symbol(f.name))
                .collect();
            return Ok(Some(Value::vector(names)));
        }
        // Unknown names are the runtime's to report (its hint knows every namespace).
        let Some(server) = self.upstream(cx, name)? else {
            return Ok(None);
        };
        if let Some(v) = self.take_discovery() {
            return Ok(Some(v));
        }
        let server = match server {
            Ok(s) => s,
            Err(e) => return Ok(Some(err_map(e.reason, &e.message, None))),
        };
        let lines = dir_lines(server, &self.run.grant)
            .iter()
            .map(|l| Value::str(&self.redact(l)))
            .collect();
        Ok(Some(Value::vector(lines)))
    }

    /// Resolves `server/tool` for doc and meta: `Ok(None)` when `server` is not an upstream.
    pub(super) fn resolve_ref(
        &self,
        cx: &mut CallContext<'_>,
        reference: &str,
    ) -> Result<Option<Resolved<'_>>, HostError> {
        // `dir` lines read "server/tool - summary"; accept them back.
        let reference = reference.split(" - ").next().unwrap_or(reference).trim();
        let (server, tool) = match reference.split_once('/') {
            Some((s, t)) => (s, Some(t)),
            None => (reference, None),
        };
        let Some(entry) = self.upstream(cx, server)? else {
            return Ok(None);
        };
        if let Some(v) = self.take_discovery() {
            return Ok(Some(Resolved::Refused(v)));
        }
        let entry = match entry {
            Ok(e) => e,
            Err(e) => return Ok(Some(Resolved::Refused(err_map(e.reason, &e.message, None)))),
        };
        match tool {
            None => Ok(Some(Resolved::Server(entry))),
            Some(t) => match entry.tool(t) {
                Ok(tool) => match self.run.grant.check(tool) {
                    Ok(()) => Ok(Some(Resolved::Tool(entry, tool))),
                    Err(m) => Ok(Some(Resolved::Refused(err_map(
                        Reason::Forbidden,
                        &m,
                        None,
                    )))),
                },
                Err(e) => Err(fault(e.message)),
            },
        }
    }

    pub(super) fn doc(
        &self,
        cx: &mut CallContext<'_>,
        reference: &str,
    ) -> Result<Option<Value>, HostError> {
        // The host's own functions are documented like built-ins, outside the budget.
        if let Some(f) = reference
            .strip_prefix("tool/")
            .and_then(super::functions::find)
        {
            cx.print(&super::functions::doc_text(f));
            return Ok(Some(Value::Nil));
        }
        let text = match self.resolve_ref(cx, reference)? {
            None => return Ok(None),
            Some(Resolved::Refused(v)) => {
                if let Some(m) = message_of(&v) {
                    cx.print(&format!("{m}\n"));
                }
                return Ok(Some(Value::Nil));
            }
            Some(Resolved::Server(s)) => server_doc_text(s, &self.run.grant),
            Some(Resolved::Tool(s, t)) => {
                let mut text = doc_text(s, t);
                let subject = &self.run.caller.subject;
                if let Some(sample) = self.upstreams().samples().of(subject, &s.name, &t.name) {
                    text.push_str("Your last text answer from it began:\n");
                    for line in sample.lines() {
                        text.push_str(&format!("  | {line}\n"));
                    }
                }
                text
            }
        };
        cx.print(&self.redact(&text));
        Ok(Some(Value::Nil))
    }

    pub(super) fn meta(
        &self,
        cx: &mut CallContext<'_>,
        reference: &str,
    ) -> Result<Option<Value>, HostError> {
        let json = match self.resolve_ref(cx, reference)? {
            None => return Ok(None),
            Some(Resolved::Refused(v)) => return Ok(Some(v)),
            Some(Resolved::Server(s)) => server_meta(s, &self.run.grant),
            Some(Resolved::Tool(_, t)) => t.to_json(),
        };
        let text = self.redact(&json.to_string());
        cx.decode_json(text.as_bytes()).map(Some)
    }

    pub(super) fn apropos(&self, args: &[Value]) -> Result<Option<Value>, HostError> {
        let query = match args.first() {
            Some(Value::Str(s) | Value::Symbol(s) | Value::Keyword(s)) => s.to_string(),
            _ => return Ok(None),
        };
        let page = SearchPage::read("apropos", &query, args.get(1), 20)?;
        if let Some(v) = self.take_discovery() {
            return Ok(Some(v));
        }
        let lines = apropos(
            self.upstreams().catalog(),
            &self.run.grant,
            &query,
            page.offset,
            page.limit,
        )
        .into_iter()
        .map(|t| Value::str(&self.redact(&listing(t))))
        .collect();
        Ok(Some(Value::vector(lines)))
    }

    /// `(tool/search "text" {:limit n :offset n})`: the best matching tools as data, best first:
    /// `[{:name "server/tool" :summary "..." :score 12.5} ...]`.
    pub(super) fn tool_search(&self, args: &[Value]) -> Result<Value, HostError> {
        let query = match args.first() {
            Some(Value::Str(s)) if args.len() <= 2 => s.to_string(),
            _ => {
                return Err(fault(
                    "tool/search: use (tool/search \"text\") or (tool/search \"text\" {:limit n \
                     :offset n})",
                ));
            }
        };
        let page = SearchPage::read("tool/search", &query, args.get(1), 10)?;
        if let Some(v) = self.take_discovery() {
            return Ok(v);
        }
        let hits = crate::catalog::search::search(self.upstreams().catalog(), &query)
            .into_iter()
            .filter(|h| self.run.grant.sees(h.tool))
            .skip(page.offset)
            .take(page.limit)
            .map(|h| {
                let summary = h.tool.description.split("\n\n").next().unwrap_or_default();
                Value::map_from(vec![
                    (kw("name"), Value::str(&h.tool.qualified())),
                    (kw("summary"), Value::str(&self.redact(summary.trim()))),
                    (kw("score"), Value::Float((h.score * 100.0).round() / 100.0)),
                ])
            })
            .collect();
        Ok(Value::vector(hits))
    }
}

/// Which results of a search to show: `:limit` (1..200) from `:offset`.
pub(super) struct SearchPage {
    limit: usize,
    offset: usize,
}

impl SearchPage {
    pub(super) fn read(
        form: &str,
        query: &str,
        options: Option<&Value>,
        default_limit: usize,
    ) -> Result<Self, HostError> {
        if query.trim().is_empty() {
            return Err(fault(format!("{form}: give a non-empty search text")));
        }
        let mut page = SearchPage {
            limit: default_limit,
            offset: 0,
        };
        let Some(Value::Map(m)) = options else {
            return Ok(page);
        };
        match m.get(&kw("limit")) {
            Some(Value::Int(n)) if (1..=200).contains(n) => page.limit = *n as usize,
            Some(other) => {
                return Err(fault(format!(
                    "{form}: :limit must be an integer 1..200, got {other}"
                )));
            }
            None => {}
        }
        match m.get(&kw("offset")) {
            Some(Value::Int(n)) if *n >= 0 => page.offset = *n as usize,
            Some(other) => {
                return Err(fault(format!(
                    "{form}: :offset must be an integer 0 or more, got {other}"
                )));
            }
            None => {}
        }
        Ok(page)
    }
}

pub(super) enum Resolved<'a> {
    Refused(Value),
    Server(&'a ServerEntry),
    Tool(&'a ServerEntry, &'a ToolEntry),
}
