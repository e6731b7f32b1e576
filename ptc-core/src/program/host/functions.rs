//! The functions of the `tool/` namespace that the host serves, with what `doc` prints for
//! each: one table, read by the dispatch (its unknown-name message) and by `doc`. (`tool/dir`,
//! `tool/doc`, `tool/meta` and `tool/apropos` are the language's own discovery forms.)

/// One function of `tool/`.
pub(super) struct HostFunction {
    /// Its name in `tool/`.
    pub(super) name: &'static str,
    /// What `doc` prints: the call's form first, then what it gives.
    pub(super) doc: &'static str,
}

/// Every function of `tool/` the host serves.
pub(super) const FUNCTIONS: &[HostFunction] = &[
    HostFunction {
        name: "call",
        doc: "(tool/call 'server/tool {:arg value}) calls an upstream tool once. Gives \
              {:ok true :value v :value_kind k} (k is :json, :text or :empty) or \
              {:ok false :reason r :message m}; a write adds :mutation_state. \
              (server/tool {:arg value}) is the same call.",
    },
    HostFunction {
        name: "pages",
        doc: "(tool/pages 'server/tool {:arg value} {:max-pages n :max-items n :as :items}) \
              gathers a paged tool's pages in order, each one call. Gives {:ok true :value \
              [items] :value_kind :json :pages n :complete bool :next cursor-or-nil}; a page \
              that fails gives its {:ok false ...} with the :value and :pages gathered before \
              it. :as :pages keeps each page whole.",
    },
    HostFunction {
        name: "search",
        doc: "(tool/search \"text\" {:limit n :offset n}) finds the tools that best match \
              the text, best first: [{:name \"server/tool\" :summary \"...\" :score s} ...] \
              (10 unless :limit says).",
    },
    HostFunction {
        name: "servers",
        doc: "(tool/servers) lists the upstreams: [{:name \"server\" :description \"...\" \
              :tool_count n :loaded bool} ...] (:tool_count is nil until a listed-on-use \
              upstream is listed).",
    },
];

/// The function named `name` in `tool/`.
pub(super) fn find(name: &str) -> Option<&'static HostFunction> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// What `doc` prints for `f`, laid out as the language prints a built-in's.
pub(super) fn doc_text(f: &HostFunction) -> String {
    format!("-------------------------\ntool/{}\n  {}\n", f.name, f.doc)
}

/// The names, for a message: `call, pages, search and servers`.
pub(super) fn names() -> String {
    let names: Vec<&str> = FUNCTIONS.iter().map(|f| f.name).collect();
    // The table has several functions, so the last one follows an "and".
    match names.split_last() {
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::pages::PAGES_USAGE;
    use super::*;

    /// `tool/pages`'s doc shows the options its usage message names.
    #[test]
    fn each_doc_starts_with_its_call_and_pages_shows_its_usage_options() {
        for f in FUNCTIONS {
            assert!(f.doc.starts_with(&format!("(tool/{}", f.name)), "{}", f.doc);
        }
        for option in [":max-pages", ":max-items", ":as :items", ":as :pages"] {
            assert!(PAGES_USAGE.contains(option), "{option}");
            assert!(find("pages").unwrap().doc.contains(option), "{option}");
        }
        assert_eq!(names(), "call, pages, search and servers");
    }
}
