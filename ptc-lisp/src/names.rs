//! The name tables: one place for the special forms and one for the namespaces. The analyzer's
//! dispatch, symbol resolution, `doc`, `dir`, `apropos`, `all-ns` and the "did you mean" hints
//! all read these tables, so a name added here works everywhere at once.

/// What the analyzer does with a special form (its dispatch key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    Quote,
    Var,
    If,
    IfNot,
    Do,
    Comment,
    /// `ns`, `require`, `import`, `in-ns`: there is one namespace; explain and refuse.
    Namespace,
    Letfn,
    Declare,
    When,
    WhenNot,
    And,
    Or,
    Let,
    Loop,
    Recur,
    Fn,
    Def,
    Defonce,
    Defn,
    Cond,
    Case,
    For,
    Doseq,
    Return,
    Fail,
    /// `doc`, `dir`, `source`: discovery whose argument may be an unquoted name.
    Discovery,
    /// A form that rewrites into other forms (see `sugar.rs`).
    Sugar(crate::sugar::Sugar),
}

/// One special form or core macro.
pub(crate) struct SpecialForm {
    /// Name as written in programs.
    pub name: &'static str,
    /// How the analyzer handles it.
    pub kind: Special,
    /// One-line usage, shown by `doc`.
    pub doc: &'static str,
}

const fn sf(name: &'static str, kind: Special, doc: &'static str) -> SpecialForm {
    SpecialForm { name, kind, doc }
}

use crate::sugar::Sugar as S;

/// Every special form and core macro.
pub(crate) const SPECIAL_FORMS: &[SpecialForm] = &[
    sf("quote", Special::Quote, "(quote x) or 'x: x unevaluated"),
    sf("var", Special::Var, "(var x) or #'x"),
    sf("if", Special::If, "(if test then else?)"),
    sf("if-not", Special::IfNot, "(if-not test then else?)"),
    sf("do", Special::Do, "(do expr ...): the last value"),
    sf("comment", Special::Comment, "(comment ...): ignored; nil"),
    sf(
        "ns",
        Special::Namespace,
        "(ns name): not supported; a program has one namespace and every builtin is available",
    ),
    sf(
        "require",
        Special::Namespace,
        "(require ...): not supported; str/, set/, json/ and the other aliases need no require",
    ),
    sf(
        "import",
        Special::Namespace,
        "(import ...): not supported; Math/, Integer/, LocalDate/, ... need no import",
    ),
    sf(
        "in-ns",
        Special::Namespace,
        "(in-ns 'name): not supported; a program has one namespace",
    ),
    sf(
        "letfn",
        Special::Letfn,
        "(letfn [(f [x] ...) (g [y] ...)] body...): local functions that may call each other",
    ),
    sf(
        "declare",
        Special::Declare,
        "(declare name ...): declare globals defined later",
    ),
    sf("when", Special::When, "(when test body...)"),
    sf("when-not", Special::WhenNot, "(when-not test body...)"),
    sf(
        "and",
        Special::And,
        "(and x ...): short-circuit; the first falsy value or the last",
    ),
    sf(
        "or",
        Special::Or,
        "(or x ...): short-circuit; the first truthy value or the last",
    ),
    sf(
        "let",
        Special::Let,
        "(let [pattern value ...] body...): sequential bindings with destructuring",
    ),
    sf(
        "let*",
        Special::Let,
        "(let* [pattern value ...] body...): same as let",
    ),
    sf(
        "loop",
        Special::Loop,
        "(loop [pattern init ...] body...): with (recur ...) in tail position",
    ),
    sf(
        "recur",
        Special::Recur,
        "(recur args...): jump to the enclosing loop or fn, in tail position",
    ),
    sf(
        "fn",
        Special::Fn,
        "(fn name? [params] body...): a function; params may destructure; & rest for variadic",
    ),
    sf("fn*", Special::Fn, "(fn* [params] body...): same as fn"),
    sf(
        "def",
        Special::Def,
        "(def name value): define a global; returns #'name",
    ),
    sf(
        "defonce",
        Special::Defonce,
        "(defonce name value): define unless already defined",
    ),
    sf(
        "defn",
        Special::Defn,
        "(defn name [params] body...) or (defn name ([x] ...) ([x y] ...)): define a function",
    ),
    sf(
        "defn-",
        Special::Defn,
        "(defn- name [params] body...): same as defn",
    ),
    sf("cond", Special::Cond, "(cond test expr ... :else expr)"),
    sf(
        "condp",
        Special::Sugar(S::Condp),
        "(condp pred expr test result ... default?): nil when nothing matches",
    ),
    sf(
        "case",
        Special::Case,
        "(case expr const result (c1 c2) result ... default?): nil when nothing matches",
    ),
    sf(
        "if-let",
        Special::Sugar(S::IfLet),
        "(if-let [x expr] then else?)",
    ),
    sf(
        "when-let",
        Special::Sugar(S::WhenLet),
        "(when-let [x expr] body...)",
    ),
    sf(
        "if-some",
        Special::Sugar(S::IfSome),
        "(if-some [x expr] then else?): then when expr is not nil",
    ),
    sf(
        "when-some",
        Special::Sugar(S::WhenSome),
        "(when-some [x expr] body...): body when expr is not nil",
    ),
    sf(
        "when-first",
        Special::Sugar(S::WhenFirst),
        "(when-first [x coll] body...): body with x the first element when coll is not empty",
    ),
    sf(
        "->",
        Special::Sugar(S::Thread),
        "(-> x (f a) g): thread x through the forms as their first argument",
    ),
    sf(
        "->>",
        Special::Sugar(S::ThreadLast),
        "(->> x (f a) g): thread x through the forms as their last argument",
    ),
    sf(
        "as->",
        Special::Sugar(S::As),
        "(as-> x name (f name) ...): thread x through the forms bound to name",
    ),
    sf(
        "cond->",
        Special::Sugar(S::CondThread),
        "(cond-> x test (f a) ...): thread x (first) through the forms whose test is truthy",
    ),
    sf(
        "cond->>",
        Special::Sugar(S::CondThreadLast),
        "(cond->> x test (f a) ...): thread x (last) through the forms whose test is truthy",
    ),
    sf(
        "some->",
        Special::Sugar(S::SomeThread),
        "(some-> x f g): thread x (first) while the value is not nil",
    ),
    sf(
        "some->>",
        Special::Sugar(S::SomeThreadLast),
        "(some->> x f g): thread x (last) while the value is not nil",
    ),
    sf(
        "for",
        Special::For,
        "(for [x xs :when p :let [y ..] :while q] expr): an eager vector",
    ),
    sf(
        "doseq",
        Special::Doseq,
        "(doseq [x xs] body...): for side effects (println); nil",
    ),
    sf(
        "dotimes",
        Special::Sugar(S::Dotimes),
        "(dotimes [i n] body...): body with i from 0 to n-1; nil",
    ),
    sf(
        "return",
        Special::Return,
        "(return value): end the program with value",
    ),
    sf(
        "fail",
        Special::Fail,
        "(fail value): end the program with a fail error carrying value",
    ),
    sf(
        "doc",
        Special::Discovery,
        "(doc name): print documentation of a builtin, special form or upstream tool",
    ),
    sf(
        "source",
        Special::Discovery,
        "(source name): like doc (sources of builtins are not available)",
    ),
    sf(
        "dir",
        Special::Discovery,
        "(dir ns): the names in a namespace or upstream",
    ),
];

/// The special form called `name`.
pub(crate) fn special_form(name: &str) -> Option<&'static SpecialForm> {
    SPECIAL_FORMS.iter().find(|f| f.name == name)
}

/// The special form a qualified name means: `clojure.core/when` (any alias of the core
/// namespace) is `when`, and `tool/doc`, `tool/dir`, `tool/source` are the discovery forms.
pub(crate) fn qualified_special_form(name: &str) -> Option<&'static SpecialForm> {
    let (ns, n) = name.split_once('/')?;
    let space = namespace(ns)?;
    let form = special_form(n)?;
    match space.kind {
        _ if space.name() == CORE => Some(form),
        // `clojure.repl/doc` and `tool/doc` take unquoted names like `doc`.
        _ if space.name() == "clojure.repl" && form.kind == Special::Discovery => Some(form),
        NsKind::Discovery if form.kind == Special::Discovery => Some(form),
        _ => None,
    }
}

/// The core namespace: `(dir clojure.core)` lists the special forms too.
pub(crate) const CORE: &str = "clojure.core";

/// A named constant served by a namespace (`Math/PI`).
#[derive(Clone, Copy)]
pub(crate) enum Constant {
    Float(f64),
    Int(i64),
}

/// What names in a namespace resolve to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NsKind {
    /// Builtins registered under `prefix` (`clojure.string/`); a name not found there falls
    /// back to the unqualified core builtin (`str/count` is `count`).
    Builtins { prefix: &'static str },
    /// `data/<key>`: the request context.
    Data,
    /// The discovery forms, under the host's `tool` namespace (`tool/dir`, `tool/doc`, ...);
    /// other `tool/` names are the host's.
    Discovery,
}

/// One local namespace: its names, from `ptc_names` (the table the config also reads to refuse
/// upstreams called by them), and what the language does with it.
pub(crate) struct Namespace {
    /// Its canonical name and aliases.
    pub names: &'static ptc_names::namespaces::Namespace,
    /// What its names resolve to.
    pub kind: NsKind,
    /// Named constants (`Math/PI`).
    pub constants: &'static [(&'static str, Constant)],
}

/// The behaviour of the namespace `ptc_names` calls `name` (its canonical name; anything else
/// fails the build).
const fn space(name: &'static str, kind: NsKind) -> Namespace {
    Namespace {
        names: ptc_names::namespaces::named(name),
        kind,
        constants: &[],
    }
}

/// A namespace of builtins registered under `prefix`.
const fn ns(name: &'static str, prefix: &'static str) -> Namespace {
    space(name, NsKind::Builtins { prefix })
}

/// A namespace of builtins with named constants.
const fn with_constants(
    name: &'static str,
    prefix: &'static str,
    constants: &'static [(&'static str, Constant)],
) -> Namespace {
    Namespace {
        constants,
        ..ns(name, prefix)
    }
}

const FLOAT_CONSTANTS: &[(&str, Constant)] = &[
    ("POSITIVE_INFINITY", Constant::Float(f64::INFINITY)),
    ("NEGATIVE_INFINITY", Constant::Float(f64::NEG_INFINITY)),
    ("NaN", Constant::Float(f64::NAN)),
    ("MAX_VALUE", Constant::Float(f64::MAX)),
];

const INT_CONSTANTS: &[(&str, Constant)] = &[
    ("MAX_VALUE", Constant::Int(i64::MAX)),
    ("MIN_VALUE", Constant::Int(i64::MIN)),
];

const MATH_CONSTANTS: &[(&str, Constant)] = &[
    ("PI", Constant::Float(std::f64::consts::PI)),
    ("E", Constant::Float(std::f64::consts::E)),
];

/// What the language does with every namespace of `ptc_names::namespaces::NAMESPACES` (a test
/// holds the two to the same set). Java classes keep their interop methods under `java/`.
pub(crate) const NAMESPACES: &[Namespace] = &[
    ns("clojure.core", ""),
    ns("clojure.string", "clojure.string/"),
    ns("clojure.set", "clojure.set/"),
    ns("clojure.walk", ""),
    ns("clojure.repl", "repl/"),
    ns("json", "json/"),
    ns("regex", ""),
    with_constants("Math", "Math/", MATH_CONSTANTS),
    with_constants("Integer", "java/", INT_CONSTANTS),
    with_constants("Long", "java/", INT_CONSTANTS),
    with_constants("Double", "java/", FLOAT_CONSTANTS),
    with_constants("Float", "java/", FLOAT_CONSTANTS),
    ns("Boolean", "java/"),
    ns("String", "java/"),
    ns("System", "java/"),
    ns("LocalDate", "LocalDate/"),
    ns("Instant", "Instant/"),
    ns("Duration", "Duration/"),
    ns("session", "session/"),
    space("data", NsKind::Data),
    space("tool", NsKind::Discovery),
];

/// The discovery forms reachable as `tool/<name>`, and the builtin each one is.
pub(crate) const TOOL_DISCOVERY: &[(&str, &str)] = &[
    ("dir", "repl/dir"),
    ("doc", "repl/doc"),
    ("source", "repl/source"),
    ("meta", "meta"),
    ("apropos", "apropos"),
];

/// The local namespace called `name` (canonical name or alias).
pub(crate) fn namespace(name: &str) -> Option<&'static Namespace> {
    let names = ptc_names::namespaces::namespace(name)?;
    NAMESPACES.iter().find(|n| n.name() == names.name)
}

impl Namespace {
    /// The canonical name (listed by `all-ns` and in errors).
    pub(crate) fn name(&self) -> &'static str {
        self.names.name
    }

    /// Every name a program may write for this namespace, canonical first.
    pub(crate) fn all_names(&self) -> impl Iterator<Item = &'static str> + use<> {
        self.names.all_names()
    }

    /// The constant `name` in this namespace.
    pub(crate) fn constant(&self, name: &str) -> Option<Constant> {
        self.constants
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
    }
}

/// The candidate `name` most likely meant, for the "did you mean" of every unknown-name error:
/// `ptc-names`'s one rule, so a program, a config and the runtime suggest alike.
pub(crate) fn did_you_mean<'c>(
    name: &str,
    candidates: impl Iterator<Item = &'c str>,
) -> Option<String> {
    ptc_names::closest(name, candidates).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Interpreter, Limits, Reason, Value};

    fn eval(i: &mut Interpreter, src: &str) -> Value {
        i.eval_str(src).unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    /// Every alias of every local namespace works in every discovery form, and means the same
    /// as its canonical name there.
    #[test]
    fn every_namespace_alias_works_in_every_discovery_form() {
        let mut i = Interpreter::new(Limits::default());
        i.set_context(Value::map_from(vec![(
            Value::keyword("rows"),
            Value::Int(1),
        )]));
        let mut checked = 0;
        for space in NAMESPACES {
            let canonical = eval(&mut i, &format!("(dir {})", space.name()));
            let Value::Vector(names) = &canonical else {
                panic!("(dir {}) is {canonical}", space.name())
            };
            assert!(!names.is_empty(), "(dir {}) is empty", space.name());
            for alias in space.all_names() {
                for form in [
                    format!("(dir {alias})"),
                    format!("(dir '{alias})"),
                    format!("(repl/dir \"{alias}\")"),
                ] {
                    assert_eq!(eval(&mut i, &form), canonical, "{form}");
                }
                assert!(
                    eval(&mut i, "(all-ns)")
                        .to_string()
                        .contains(&format!(" {} ", space.name()).replace(' ', "")),
                    "all-ns lacks {}",
                    space.name()
                );
                for name in names.iter() {
                    let name = name.to_string();
                    let q = format!("{alias}/{name}");
                    if space.kind == NsKind::Data {
                        assert_eq!(eval(&mut i, &q), Value::Int(1), "{q}");
                        continue;
                    }
                    // The name resolves as a call would see it: a function or constant, or a
                    // special form (dispatched as a call head, refused as a value).
                    let special = qualified_special_form(&q).is_some();
                    let v = match i.eval_str(&q) {
                        Ok(v) => v,
                        Err(e) if special => {
                            assert_eq!(e.reason(), Reason::InvalidForm, "{q}: {e}");
                            Value::Nil
                        }
                        Err(e) => panic!("{q}: {e}"),
                    };
                    assert!(
                        matches!(v, Value::Func(_) | Value::Float(_) | Value::Int(_)) || special,
                        "{q} is {v}"
                    );
                    // ... and doc, source, meta and apropos all know it.
                    i.take_output();
                    assert_eq!(eval(&mut i, &format!("(doc {q})")), Value::Nil);
                    let printed = i.take_output();
                    assert!(printed.contains(&name), "(doc {q}) printed {printed:?}");
                    assert_eq!(eval(&mut i, &format!("(source {q})")), Value::Nil);
                    i.take_output();
                    if matches!(v, Value::Func(_)) || special {
                        let m = eval(&mut i, &format!("(:name (meta '{q}))"));
                        assert!(m.to_string().ends_with(&name), "(meta '{q}) names {m}");
                        let hits = eval(&mut i, &format!("(apropos \"{name}\")"));
                        let Value::Vector(hits) = hits else {
                            panic!("apropos gave {hits}")
                        };
                        // Some hit is a name a program can write that means this function (the
                        // repl/ builtins are found as their special forms `doc`, `dir`, ...).
                        let found = hits.iter().any(|h| {
                            let h = h.to_string();
                            let same = format!(
                                "(let [a (str (:name (meta '{h}))) b (str (:name (meta '{q})))]
                                   (or (= a b) (= (str \"repl/\" a) b)))"
                            );
                            i.eval_str(&same).is_ok_and(|r| r == Value::Bool(true))
                        });
                        assert!(found, "(apropos {name:?}) has nothing meaning {q}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 300, "only {checked} names checked");
    }

    /// The language gives every namespace of `ptc_names` a behaviour, exactly once, and has
    /// none of its own: the names a program qualifies with are the names the config reserves.
    #[test]
    fn the_namespaces_are_exactly_the_shared_table() {
        let mut ours: Vec<&str> = NAMESPACES.iter().map(Namespace::name).collect();
        let mut shared: Vec<&str> = ptc_names::namespaces::NAMESPACES
            .iter()
            .map(|n| n.name)
            .collect();
        ours.sort_unstable();
        shared.sort_unstable();
        let before = ours.len();
        ours.dedup();
        assert_eq!(ours.len(), before, "a namespace has two behaviours");
        assert_eq!(ours, shared);
        // Lookups go through the shared aliases.
        assert_eq!(namespace("s").map(Namespace::name), Some("clojure.string"));
        assert!(namespace("clojure").is_none());
    }

    /// Every qualifier the language resolves by itself is reserved for it: each namespace's
    /// names and the prefix of every qualified builtin (`doc`, `source` and `meta` find a
    /// builtin by its registry name, so `java/parseInt` is the language's too).
    #[test]
    fn every_qualifier_the_language_reads_is_reserved() {
        use ptc_names::namespaces::is_reserved;
        for space in NAMESPACES {
            for name in space.all_names() {
                assert!(is_reserved(name), "{name}");
            }
        }
        let mut prefixes = 0;
        for name in crate::builtins::names() {
            if let Some((ns, _)) = name.split_once('/')
                && !ns.is_empty()
            {
                assert!(is_reserved(ns), "{name}: `{ns}` is not reserved");
                prefixes += 1;
            }
        }
        assert!(prefixes > 50, "only {prefixes} qualified builtins");
        let mut i = Interpreter::new(Limits::default());
        assert_eq!(eval(&mut i, "(doc java/parseInt)"), Value::Nil);
        assert!(i.take_output().contains("parseInt"));
    }

    /// `user`, Clojure's default namespace, is none here (so `ptc_names` leaves it to
    /// upstreams): definitions are unqualified and `user/` is an unknown namespace.
    #[test]
    fn there_is_no_user_namespace() {
        let mut i = Interpreter::new(Limits::default());
        assert_eq!(eval(&mut i, "(def x 1)").to_string(), "#'x");
        let e = i.eval_str("user/x").unwrap_err();
        assert_eq!(e.reason(), Reason::UnboundVar);
        assert!(e.message().contains("unknown namespace `user`"), "{e}");
        assert!(!ptc_names::namespaces::is_reserved("user"));
    }

    #[test]
    fn tool_discovery_aliases_are_the_discovery_forms() {
        let mut i = Interpreter::new(Limits::default());
        assert_eq!(eval(&mut i, "(tool/doc map)"), Value::Nil);
        assert!(i.take_output().contains("(map f coll"));
        assert_eq!(
            eval(&mut i, "(count (tool/dir clojure.set))"),
            eval(&mut i, "(count (dir set))")
        );
        assert_eq!(
            eval(&mut i, "(:name (tool/meta 'str/join))").to_string(),
            "clojure.string/join"
        );
        assert_eq!(
            eval(&mut i, "(first (tool/apropos \"upper-case\"))").to_string(),
            "clojure.string/upper-case"
        );
        assert_eq!(eval(&mut i, "(tool/dir tool)"), eval(&mut i, "(dir tool)"));
        assert_eq!(eval(&mut i, "(repl/dir s)"), eval(&mut i, "(dir s)"));
        assert_eq!(eval(&mut i, "(clojure.repl/doc s/join)"), Value::Nil);
        assert!(i.take_output().contains("clojure.string/join"));
        // Other tool/ names belong to the host; without one they are unknown.
        let e = i.eval_str("(tool/call 'a/b {})").unwrap_err();
        assert_eq!(e.reason(), Reason::UnboundVar);
    }

    #[test]
    fn special_forms_are_documented_and_dispatched_from_one_table() {
        let mut i = Interpreter::new(Limits::default());
        assert!(!SPECIAL_FORMS.is_empty());
        for form in SPECIAL_FORMS {
            assert!(!form.doc.is_empty(), "{} has no doc", form.name);
            i.take_output();
            assert_eq!(eval(&mut i, &format!("(doc {})", form.name)), Value::Nil);
            let out = i.take_output();
            assert!(out.contains("Special Form"), "{}: {out}", form.name);
            assert!(out.contains(form.doc), "{}: {out}", form.name);
            let m = eval(&mut i, &format!("(:special-form (meta '{}))", form.name));
            assert_eq!(m, Value::Bool(true), "{}", form.name);
            // Used as a value it is refused as a special form, not an unknown symbol.
            let e = i.eval_str(&format!("[{}]", form.name)).unwrap_err();
            assert_eq!(e.reason(), Reason::InvalidForm, "{}", form.name);
        }
        // Qualified with the core namespace they are the same forms.
        assert_eq!(eval(&mut i, "(clojure.core/when true 1)"), Value::Int(1));
        assert_eq!(
            eval(&mut i, "(core/->> [1 2] (map inc) vec)").to_string(),
            "[2 3]"
        );
        assert!(
            eval(&mut i, "(dir clojure.core)")
                .to_string()
                .contains(" when-let ")
        );
        // Near misses are hinted from the same table.
        let e = i.eval_str("(whenn true 1)").unwrap_err();
        assert_eq!(e.hint(), Some("did you mean when?"));
    }

    #[test]
    fn namespace_forms_explain_there_is_one_namespace() {
        let mut i = Interpreter::new(Limits::default());
        for src in [
            "(ns foo)",
            "(require '[clojure.string :as str])",
            "(import 'java.time.LocalDate)",
            "(in-ns 'foo)",
        ] {
            let e = i.eval_str(src).unwrap_err();
            assert_eq!(e.reason(), Reason::UnboundVar, "{src}");
            assert!(e.message().contains("one namespace"), "{src}: {e}");
            assert!(
                e.hint().is_some_and(|h| h.contains("str/join")),
                "{src}: {e}"
            );
        }
    }

    #[test]
    fn unknown_namespaces_get_a_hint_from_the_table() {
        let mut i = Interpreter::new(Limits::default());
        let e = i.eval_str("(clojure.strng/join \",\" [1])").unwrap_err();
        assert_eq!(e.reason(), Reason::UnboundVar);
        assert_eq!(e.hint(), Some("did you mean clojure.string/join?"));
        let e = i.eval_str("(dir clojure.strng)").unwrap_err();
        assert_eq!(e.hint(), Some("did you mean clojure.string?"));
        let e = i.eval_str("(doc fitler)").unwrap_err();
        assert_eq!(e.hint(), Some("did you mean filter?"));
    }
}
