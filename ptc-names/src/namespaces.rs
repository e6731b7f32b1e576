//! The namespaces of PTC-Lisp: the one table of their names and aliases. The language keys what
//! each namespace does by its canonical name here (`ptc-lisp`'s `names.rs`, which a test holds
//! to exactly this set), and the config refuses an upstream called by any of these names
//! ([`is_reserved`]): `s/join` must mean `clojure.string/join`, never a tool of an upstream `s`.
//!
//! ```
//! use ptc_names::namespaces::{is_reserved, why_reserved};
//! assert!(is_reserved("s") && is_reserved("tool") && !is_reserved("observatory"));
//! assert!(why_reserved("s").unwrap().starts_with("`s` is PTC-Lisp's alias for clojure.string"));
//! ```
//!
//! Not reserved: `user`, Clojure's default namespace. PTC-Lisp has none: a definition is
//! unqualified (`(def x 1)` is `#'x`) and `user/x` is an unknown namespace, so an upstream
//! `user` shadows nothing, and a users API is a likely upstream.

/// One namespace of PTC-Lisp and the other names a program may write for it.
#[derive(Debug, PartialEq, Eq)]
pub struct Namespace {
    /// The canonical name (listed by `all-ns` and in errors).
    pub name: &'static str,
    /// Other names that mean the same namespace (`str`, `string`, `s` for `clojure.string`).
    pub aliases: &'static [&'static str],
}

impl Namespace {
    /// Every name a program may write for this namespace, canonical first.
    pub fn all_names(&self) -> impl Iterator<Item = &'static str> + use<> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

const fn ns(name: &'static str, aliases: &'static [&'static str]) -> Namespace {
    Namespace { name, aliases }
}

/// Every namespace of PTC-Lisp, the host's `tool` included (the discovery forms live there, and
/// the rest of `tool/` is the host's).
pub const NAMESPACES: &[Namespace] = &[
    ns("clojure.core", &["core"]),
    ns("clojure.string", &["str", "string", "s"]),
    ns("clojure.set", &["set"]),
    ns("clojure.walk", &["walk"]),
    ns("clojure.repl", &["repl"]),
    ns("json", &[]),
    ns("regex", &[]),
    ns("Math", &["java.lang.Math"]),
    ns("Integer", &[]),
    ns("Long", &[]),
    ns("Double", &[]),
    ns("Float", &[]),
    ns("Boolean", &[]),
    ns("String", &[]),
    ns("System", &[]),
    ns("LocalDate", &["java.time.LocalDate"]),
    ns("Instant", &["java.time.Instant"]),
    ns("Duration", &["java.time.Duration"]),
    ns("session", &[]),
    ns("data", &[]),
    ns("tool", &[]),
];

/// A qualifier PTC-Lisp keeps that is no namespace of its own, with why.
#[derive(Debug, PartialEq, Eq)]
pub struct Root {
    /// The qualifier.
    pub name: &'static str,
    /// Why it is the language's, worded to follow "reserved by PTC-Lisp: " as
    /// [`why_reserved`] does.
    pub why: &'static str,
}

/// The roots of the dotted names above. `java/` is where the Java interop builtins are
/// registered, and `doc`, `source` and `meta` find a builtin by that name before any upstream's
/// tool. `clojure/` resolves nothing in PTC-Lisp, but a program written as Clojure means the
/// language by every `clojure` qualifier, so no upstream may make one a tool.
pub const ROOTS: &[Root] = &[
    Root {
        name: "clojure",
        why: "`clojure` begins the names of PTC-Lisp's clojure.* namespaces (clojure.core, \
              clojure.string, ...), so `clojure/...` in a program reads as the language's",
    },
    Root {
        name: "java",
        why: "`java` is where PTC-Lisp keeps its Java interop builtins, which `doc`, `source` \
              and `meta` find before any tool (`java/parseInt`), and begins its java.* aliases \
              (java.lang.Math, ...)",
    },
];

/// The namespace `name` means, canonical name or alias.
pub fn namespace(name: &str) -> Option<&'static Namespace> {
    NAMESPACES
        .iter()
        .find(|n| n.name == name || n.aliases.contains(&name))
}

/// The namespace whose canonical name is `name`, for tables built at compile time: an unknown
/// name fails the build.
pub const fn named(name: &str) -> &'static Namespace {
    let mut i = 0;
    while i < NAMESPACES.len() {
        if same(NAMESPACES[i].name, name) {
            return &NAMESPACES[i];
        }
        i += 1;
    }
    panic!("not a canonical name in ptc_names::namespaces::NAMESPACES")
}

/// `a == b`, in a `const fn`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Every name PTC-Lisp reads as its own qualifier: each namespace's canonical name and aliases,
/// then the [`ROOTS`]. Those containing `.` can never be upstream names anyway (see
/// [`crate::is_identifier`]).
pub fn reserved() -> impl Iterator<Item = &'static str> {
    NAMESPACES
        .iter()
        .flat_map(Namespace::all_names)
        .chain(ROOTS.iter().map(|r| r.name))
}

/// Whether `name` is one of the [`reserved`] names (exactly: case and the whole name count).
pub fn is_reserved(name: &str) -> bool {
    reserved().any(|r| r == name)
}

/// Why `name` is reserved, as a clause to follow "reserved by PTC-Lisp: " (`` `s` is PTC-Lisp's
/// alias for clojure.string, so `s/...` in a program means the language's names, never an
/// upstream's tools ``), or `None` when it is not.
pub fn why_reserved(name: &str) -> Option<String> {
    if let Some(space) = namespace(name) {
        let what = if space.name == name {
            format!("`{name}` is a PTC-Lisp namespace")
        } else {
            format!("`{name}` is PTC-Lisp's alias for {}", space.name)
        };
        return Some(format!(
            "{what}, so `{name}/...` in a program means the language's names, never an \
             upstream's tools"
        ));
    }
    ROOTS
        .iter()
        .find(|r| r.name == name)
        .map(|r| r.why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A name means one namespace: no name is listed twice, in the table or among the roots.
    #[test]
    fn every_reserved_name_is_listed_once() {
        let mut seen = HashSet::new();
        for name in reserved() {
            assert!(seen.insert(name), "{name} is listed twice");
        }
        assert!(seen.len() > NAMESPACES.len());
    }

    #[test]
    fn canonical_names_and_aliases_find_their_namespace() {
        for space in NAMESPACES {
            for name in space.all_names() {
                assert_eq!(namespace(name), Some(space), "{name}");
                assert!(is_reserved(name), "{name}");
            }
            assert_eq!(named(space.name), space);
        }
        assert_eq!(namespace("s").map(|n| n.name), Some("clojure.string"));
        assert_eq!(namespace("clojure"), None);
    }

    /// Exactly the listed names: not a prefix, an extension, another case or a root's child.
    #[test]
    fn reserved_names_match_whole_and_by_case() {
        for name in ["s", "repl", "String", "tool", "data", "clojure", "java"] {
            assert!(is_reserved(name), "{name}");
        }
        for name in [
            "sx",
            "string2",
            "strings",
            "tool-box",
            "Tool",
            "TOOL",
            "string_",
            "math",
            "user",
            "clojur",
            "javax",
            "",
            "clojure.",
            "java.lang",
        ] {
            assert!(!is_reserved(name), "{name:?}");
            assert_eq!(why_reserved(name), None, "{name:?}");
        }
    }

    #[test]
    fn why_says_what_the_language_reads_the_name_as() {
        let then = "in a program means the language's names, never an upstream's tools";
        assert_eq!(
            why_reserved("s").unwrap(),
            format!("`s` is PTC-Lisp's alias for clojure.string, so `s/...` {then}")
        );
        assert_eq!(
            why_reserved("tool").unwrap(),
            format!("`tool` is a PTC-Lisp namespace, so `tool/...` {then}")
        );
        assert_eq!(
            why_reserved("java.time.Instant").unwrap(),
            format!(
                "`java.time.Instant` is PTC-Lisp's alias for Instant, so `java.time.Instant/...` {then}"
            )
        );
        for root in ROOTS {
            assert_eq!(why_reserved(root.name).as_deref(), Some(root.why));
            assert!(root.why.starts_with(&format!("`{}` ", root.name)));
        }
        for name in reserved() {
            assert!(why_reserved(name).is_some(), "{name}");
        }
    }

    /// Only a canonical name keys a table: an alias or an unknown name is refused.
    #[test]
    #[should_panic(expected = "not a canonical name")]
    fn named_refuses_an_alias() {
        named("s");
    }

    #[test]
    fn strings_compare_at_compile_time_as_at_run_time() {
        for (a, b) in [("", ""), ("a", "a"), ("a", "b"), ("ab", "a"), ("a", "ab")] {
            assert_eq!(same(a, b), a == b, "{a:?} {b:?}");
        }
    }
}
