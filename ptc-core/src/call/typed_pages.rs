//! Typed pages: [`Upstreams::pages`] streams a generated [`Paged`] operation's pages, stepping
//! with the same [`Pager`] as `tool/pages`, each page one call through [`Upstreams::call`].

use futures_util::Stream;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::call::contract::{Reason, ToolError, ToolOutput};
use crate::call::projection::{Pager, Step, json_at};
use crate::call::upstreams::{CallOptions, Operation, Upstreams, encode_args};
use crate::catalog::ToolEntry;
use ptc_plan::Pagination;

/// A generated operation that pages (its document or override names a pagination):
/// `ptc_upstreams!` implements it, and [`Upstreams::pages`] streams its pages.
pub trait Paged: Operation {}

/// Where a typed page loop is.
enum Loop<'a> {
    Going(Box<Going<'a>>),
    Failed(ToolError),
    Over,
}

/// A page loop with pages to go.
struct Going<'a> {
    pager: Pager<'a>,
    args: Map<String, Value>,
    entry: &'a ToolEntry,
    style: &'a Pagination,
    pages: u64,
}

impl Upstreams {
    /// The pages of `args`'s operation, in order, each decoded as its response (what its result
    /// path selects), until the last page or `max_pages`. A page loop that repeats a cursor
    /// ends with an `upstream_error` after the last good page; any failed call ends the stream
    /// with its error.
    pub fn pages<O: Paged>(
        &self,
        args: &O,
        max_pages: u64,
    ) -> impl Stream<Item = Result<O::Response, ToolError>> + '_ {
        let (server, tool) = O::TOOL.split_once('/').unwrap_or(("", O::TOOL));
        let start = match self.start_pages(server, tool, args) {
            Ok(going) => going,
            Err(e) => Loop::Failed(e),
        };
        futures_util::stream::unfold(start, move |state| async move {
            let Going {
                mut pager,
                args,
                entry,
                style,
                pages,
            } = match state {
                Loop::Over => return None,
                Loop::Failed(e) => return Some((Err(e), Loop::Over)),
                Loop::Going(going) => *going,
            };
            if pages >= max_pages {
                return None;
            }
            let name = entry.qualified();
            let answer = self
                .call(
                    &entry.server,
                    &entry.name,
                    pager.args(&args),
                    CallOptions::default(),
                )
                .await;
            let bytes = match answer {
                Ok(ToolOutput::Json(bytes)) => bytes,
                Ok(_) => return Some((Err(not_json(&name)), Loop::Over)),
                Err(e) => return Some((Err(e), Loop::Over)),
            };
            let path = entry.projection.result_path.as_ref();
            // Counting and the cursor read the page first, skipping all but what they need;
            // then the page itself is decoded from the same bytes.
            let items = style
                .counts_items()
                .then(|| json_at::<Vec<IgnoredAny>>(&bytes, path).ok().flatten())
                .flatten()
                .map(|v| v.len());
            let cursor = match style {
                Pagination::Cursor {
                    next_cursor_path, ..
                } => json_at::<Value>(&bytes, Some(next_cursor_path))
                    .ok()
                    .flatten(),
                _ => None,
            };
            let page = match crate::call::upstreams::decode_typed::<O::Response>(
                &entry.server,
                &entry.name,
                ToolOutput::Json(bytes),
                path,
            ) {
                Ok(p) => p,
                Err(e) => return Some((Err(e), Loop::Over)),
            };
            let next = match pager.after(items, cursor) {
                Step::Next(_) => Loop::Going(Box::new(Going {
                    pager,
                    args,
                    entry,
                    style,
                    pages: pages + 1,
                })),
                Step::Done => Loop::Over,
                Step::Loop(why) => Loop::Failed(ToolError {
                    reason: Reason::UpstreamError,
                    message: format!(
                        "{name}: stopped after page {}: {why}; the upstream's paging loops",
                        pages + 1
                    ),
                }),
            };
            Some((Ok(page), next))
        })
    }

    fn start_pages<O: Operation>(
        &self,
        server: &str,
        tool: &str,
        args: &O,
    ) -> Result<Loop<'_>, ToolError> {
        let args = encode_args(server, tool, args)?;
        let entry = self.catalog().server(server)?.tool(tool)?;
        let style = entry
            .projection
            .pagination
            .as_ref()
            .ok_or_else(|| ToolError {
                reason: Reason::InvalidArgs,
                message: format!("{}: has no pagination", entry.qualified()),
            })?;
        let mut with_defaults = entry.default_args();
        with_defaults.extend(args.clone());
        Ok(Loop::Going(Box::new(Going {
            pager: Pager::new(style, &with_defaults),
            args,
            entry,
            style,
            pages: 0,
        })))
    }
}

fn not_json(name: &str) -> ToolError {
    ToolError {
        reason: Reason::UpstreamError,
        message: format!("{name}: a page answered without JSON"),
    }
}
