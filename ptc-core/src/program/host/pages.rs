//! `tool/pages`: a paged tool's pages in order, each one upstream call within the run's
//! budgets, until the last page, `:max-pages` or `:max-items`.

use ptc_lisp::{CallContext, HostError, Value};

use super::calls::Fetched;
use super::{ProgramHost, ValueKind, err_map, fault, form_fault, kw, raised};
use crate::call::contract::Reason;
use crate::call::form;
use crate::call::projection::{Pager, Step, lisp_at};
use ptc_plan::Pagination;

/// A paged tool's pagination, default arguments and argument properties.
pub(super) type PagedTool = (
    Pagination,
    serde_json::Map<String, serde_json::Value>,
    serde_json::Map<String, serde_json::Value>,
);

/// How to write a `tool/pages` call, for every message about a malformed one.
pub(super) const PAGES_USAGE: &str = "use (tool/pages 'server/tool {:arg value} {:max-pages n :max-items n \
                           :as :items}) (:as :pages keeps each page whole)";

/// The options map of a `tool/pages` call.
pub(super) struct PageOptions {
    max_pages: u64,
    max_items: Option<u64>,
    as_pages: bool,
}

impl PageOptions {
    /// Pages fetched when the call does not say.
    const DEFAULT_MAX_PAGES: u64 = 10;

    /// Reads the options; `:max-pages` may not exceed the program's call budget.
    pub(super) fn read(v: Option<&Value>, max_calls: u64) -> Result<Self, HostError> {
        let mut out = PageOptions {
            max_pages: Self::DEFAULT_MAX_PAGES.min(max_calls),
            max_items: None,
            as_pages: false,
        };
        let m = match v {
            None | Some(Value::Nil) => return Ok(out),
            Some(Value::Map(m)) => m,
            Some(other) => {
                return Err(fault(format!(
                    "tool/pages: the options must be a map, got {}; {PAGES_USAGE}",
                    other.type_name()
                )));
            }
        };
        for (k, v) in m.iter() {
            let key = match k {
                Value::Keyword(s) => s.to_string(),
                other => {
                    return Err(fault(format!(
                        "tool/pages: option keys are keywords, got {other}; {PAGES_USAGE}"
                    )));
                }
            };
            let count = |max: u64| match v {
                Value::Int(n) if *n >= 1 && (*n as u64) <= max => Ok(*n as u64),
                other => Err(fault(format!(
                    "tool/pages: :{key} must be an integer 1..{max}, got {other}"
                ))),
            };
            match key.as_str() {
                "max-pages" => out.max_pages = count(max_calls)?,
                "max-items" => out.max_items = Some(count(1_000_000)?),
                "as" => {
                    out.as_pages = match v {
                        Value::Keyword(s) if &**s == "pages" => true,
                        Value::Keyword(s) if &**s == "items" => false,
                        other => {
                            return Err(fault(format!(
                                "tool/pages: :as must be :items or :pages, got {other}"
                            )));
                        }
                    }
                }
                other => {
                    return Err(fault(format!(
                        "tool/pages: unknown option :{other}; {PAGES_USAGE}"
                    )));
                }
            }
        }
        Ok(out)
    }
}

impl ProgramHost {
    /// `(tool/pages 'server/tool {args} {:max-pages n :max-items n :as :items|:pages})`: the
    /// tool's pages in order, each one upstream call within the run's budgets, until the last
    /// page, `:max-pages` or `:max-items`.
    pub(super) fn tool_pages(
        &self,
        cx: &mut CallContext<'_>,
        args: &[Value],
    ) -> Result<Value, HostError> {
        if args.is_empty() || args.len() > 3 {
            return Err(fault(format!("tool/pages: {PAGES_USAGE}")));
        }
        let form = form::read(&args[..args.len().min(2)]).map_err(form_fault)?;
        let options = PageOptions::read(args.get(2), self.run.budgets.max_calls)?;
        let written = form.json_args().map_err(form_fault)?;
        let (style, defaults, props) = match self.paged_tool(cx, &form.server, &form.tool)? {
            Ok(found) => found,
            Err(refused) => return Ok(refused),
        };
        // Keyed by wire names, so the pager finds (and sets) its arguments however the program
        // spelled them; unknown names stay as written for validation to report.
        let req_args: serde_json::Map<String, serde_json::Value> = written
            .into_iter()
            .map(|(k, v)| {
                let wire = crate::call::validate::resolve_name(&props, &k).map(str::to_string);
                (wire.unwrap_or(k), v)
            })
            .collect();
        let mut with_defaults = defaults;
        with_defaults.extend(req_args.clone());
        let mut pager = Pager::new(&style, &with_defaults);
        let mut collected: Vec<Value> = Vec::new();
        let mut pages = 0u64;
        let mut next = None;
        let partial = |collected: Vec<Value>, pages: u64, failed: Value| {
            let Value::Map(m) = failed else { return failed };
            let mut m = (*m).clone();
            m.insert(kw("value"), Value::vector(collected));
            m.insert(kw("pages"), Value::Int(pages as i64));
            Value::Map(ptc_lisp::CollArc::new(m))
        };
        let complete = loop {
            if pages == options.max_pages {
                break false;
            }
            let page_args = pager.args(&req_args);
            let page = Some(pages + 1);
            let fetched = self.fetch(cx, &form.server, &form.tool, page_args, page)?;
            let (answer, kind, done) = match fetched {
                Fetched::Refused(v) => return Ok(partial(collected, pages, v)),
                Fetched::Answer(value, kind, done) => (value, kind, done),
            };
            let cursor = match &style {
                Pagination::Cursor {
                    next_cursor_path, ..
                } => lisp_at(&answer, next_cursor_path).and_then(|c| form::to_json(c, 4).ok()),
                _ => None,
            };
            let page = match self.select(&done, kind, answer) {
                Ok(v) => v,
                Err(why) => return Ok(partial(collected, pages, self.bad_answer(&done, &why))),
            };
            let items = match &page {
                Value::Vector(v) => Some(v.len()),
                _ => None,
            };
            if style.counts_items() && items.is_none() {
                let why = format!(
                    "page {} is {}, not a list: {} pagination counts each page's items",
                    pages + 1,
                    page.type_name(),
                    style.style()
                );
                return Ok(partial(collected, pages, self.bad_answer(&done, &why)));
            }
            let drift = match self.check_answer(&done, &page) {
                Ok(drift) => drift,
                Err(refused) => return Ok(partial(collected, pages, refused)),
            };
            self.finish(&done, Ok(()), drift);
            pages += 1;
            match (&page, options.as_pages) {
                (Value::Vector(v), false) => collected.extend(v.iter().cloned()),
                _ => collected.push(page),
            }
            let step = pager.after(items, cursor);
            if let Some(max) = options.max_items
                && collected.len() as u64 >= max
            {
                collected.truncate(max as usize);
                if let Step::Next(p) = step {
                    next = Some(p);
                }
                break false;
            }
            match step {
                Step::Next(p) => next = Some(p),
                Step::Done => {
                    next = None;
                    break true;
                }
                Step::Loop(why) => {
                    let message = self.redact(&format!(
                        "{}: stopped after page {pages}: {why}; the upstream's paging loops",
                        done.qualified()
                    ));
                    let failed = err_map(Reason::UpstreamError, &message, None);
                    return Ok(partial(collected, pages, failed));
                }
            }
        };
        let next = match next {
            Some(p) if !complete => cx.decode_json(p.to_string().as_bytes())?,
            _ => Value::Nil,
        };
        Ok(Value::map_from(vec![
            (kw("ok"), Value::Bool(true)),
            (kw("value"), Value::vector(collected)),
            (kw("value_kind"), kw(ValueKind::Json.as_str())),
            (kw("pages"), Value::Int(pages as i64)),
            (kw("complete"), Value::Bool(complete)),
            (kw("next"), next),
        ]))
    }

    /// The pagination, default arguments and argument properties of `server/tool`, or the
    /// refusal the program gets.
    pub(super) fn paged_tool(
        &self,
        cx: &mut CallContext<'_>,
        server: &str,
        tool: &str,
    ) -> Result<Result<PagedTool, Value>, HostError> {
        let entry = match self.upstream(cx, server)? {
            None => {
                let e = self.upstreams().catalog().server(server).err();
                return Err(e.map_or_else(|| fault("tool/pages: no such upstream"), |e| raised(&e)));
            }
            Some(Err(e)) => return Ok(Err(err_map(e.reason, &e.message, None))),
            Some(Ok(entry)) => entry,
        };
        let tool = entry.tool(tool).map_err(|e| raised(&e))?;
        let (props, _) = entry.schema(tool).properties();
        let Some(style) = tool.projection.pagination.clone() else {
            return Err(fault(format!(
                "tool/pages: {} has no pagination (its document names no x-ptc-pagination); \
                 call it with tool/call",
                tool.qualified()
            )));
        };
        Ok(Ok((
            style,
            tool.default_args(),
            props.cloned().unwrap_or_default(),
        )))
    }
}
