//! The analyzer's sugar: forms that are pure rewrites into other forms (threading macros, the
//! `if-let` family, `condp`, `when-first`, `dotimes`). Each expansion is a function of the form
//! alone (plus fresh names), so it can be tested by printing what it expands to; the analyzer
//! then analyzes the result like any other form.

use std::sync::Arc;

use crate::error::{LispError, Pos, Reason};
use crate::reader::{Form, FormKind};

/// The rewriting forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sugar {
    Condp,
    IfLet,
    WhenLet,
    IfSome,
    WhenSome,
    WhenFirst,
    Thread,
    ThreadLast,
    As,
    CondThread,
    CondThreadLast,
    SomeThread,
    SomeThreadLast,
    Dotimes,
}

pub(crate) fn invalid(msg: impl Into<String>, pos: Pos) -> LispError {
    LispError::new(Reason::InvalidForm, msg).with_pos(pos)
}

/// Checks a special form's argument count (`max` `None` for no upper bound).
pub(crate) fn expect_args(
    name: &str,
    args: &[Form],
    min: usize,
    max: Option<usize>,
    pos: Pos,
) -> Result<(), LispError> {
    let n = args.len();
    if n < min || max.is_some_and(|m| n > m) {
        let expect = match max {
            Some(m) if m == min => format!("{min}"),
            Some(m) => format!("{min} to {m}"),
            None => format!("at least {min}"),
        };
        return Err(invalid(
            format!("{name} expects {expect} argument(s), got {n}"),
            pos,
        ));
    }
    Ok(())
}

/// The items of a binding vector (an even number of forms).
pub(crate) fn binding_vector<'f>(
    name: &str,
    form: Option<&'f Form>,
    pos: Pos,
) -> Result<&'f [Form], LispError> {
    match form.map(|f| &f.kind) {
        Some(FormKind::Vector(items)) => {
            if items.len() % 2 != 0 {
                return Err(invalid(
                    format!("{name} requires an even number of forms in its binding vector"),
                    pos,
                ));
            }
            Ok(items)
        }
        _ => Err(invalid(
            format!("{name} requires a vector of bindings"),
            pos,
        )),
    }
}

/// `(server/tool args...)`, a call of an upstream's tool by its qualified name, is
/// `(tool/call 'server/tool args...)`: the same arguments, the same pre-check and errors.
pub(crate) fn upstream_call(tool: &str, args: &[Form], pos: Pos) -> Form {
    let quoted = list(vec![sym("quote", pos), sym(tool, pos)], pos);
    let mut items = vec![sym("tool/call", pos), quoted];
    items.extend(args.iter().cloned());
    list(items, pos)
}

pub(crate) fn sym(name: &str, pos: Pos) -> Form {
    Form {
        kind: FormKind::Symbol(name.into()),
        pos,
    }
}

pub(crate) fn list(items: Vec<Form>, pos: Pos) -> Form {
    Form {
        kind: FormKind::List(items),
        pos,
    }
}

fn vector(items: Vec<Form>, pos: Pos) -> Form {
    Form {
        kind: FormKind::Vector(items),
        pos,
    }
}

fn nil_form(pos: Pos) -> Form {
    Form {
        kind: FormKind::Nil,
        pos,
    }
}

/// Expands `(name args...)`; `fresh` makes a name no program can write (for hidden locals).
pub(crate) fn expand(
    sugar: Sugar,
    name: &str,
    args: &[Form],
    pos: Pos,
    fresh: &mut dyn FnMut(&str) -> Arc<str>,
) -> Result<Form, LispError> {
    match sugar {
        Sugar::Condp => condp(args, pos, fresh),
        Sugar::IfLet => if_let(name, args, pos, true, false, fresh),
        Sugar::WhenLet => if_let(name, args, pos, false, false, fresh),
        Sugar::IfSome => if_let(name, args, pos, true, true, fresh),
        Sugar::WhenSome => if_let(name, args, pos, false, true, fresh),
        Sugar::WhenFirst => when_first(args, pos, fresh),
        Sugar::Thread | Sugar::ThreadLast => {
            expect_args(name, args, 1, None, pos)?;
            let mut acc = args[0].clone();
            for step in &args[1..] {
                acc = thread_step(step, acc, sugar == Sugar::ThreadLast);
            }
            Ok(acc)
        }
        Sugar::As => {
            expect_args(name, args, 2, None, pos)?;
            let mut bindings = vec![args[1].clone(), args[0].clone()];
            for step in &args[2..] {
                bindings.push(args[1].clone());
                bindings.push(step.clone());
            }
            Ok(list(
                vec![sym("let", pos), vector(bindings, pos), args[1].clone()],
                pos,
            ))
        }
        Sugar::CondThread | Sugar::CondThreadLast | Sugar::SomeThread | Sugar::SomeThreadLast => {
            let last = matches!(sugar, Sugar::CondThreadLast | Sugar::SomeThreadLast);
            let is_cond = matches!(sugar, Sugar::CondThread | Sugar::CondThreadLast);
            cond_thread(name, args, pos, last, is_cond, fresh)
        }
        Sugar::Dotimes => {
            let bv = binding_vector(name, args.first(), pos)?;
            if bv.len() != 2 {
                return Err(invalid("dotimes requires one binding", pos));
            }
            let mut v = vec![
                sym("doseq", pos),
                vector(
                    vec![
                        bv[0].clone(),
                        list(vec![sym("range", pos), bv[1].clone()], pos),
                    ],
                    pos,
                ),
            ];
            v.extend(args[1..].iter().cloned());
            Ok(list(v, pos))
        }
    }
}

fn condp(
    args: &[Form],
    pos: Pos,
    fresh: &mut dyn FnMut(&str) -> Arc<str>,
) -> Result<Form, LispError> {
    expect_args("condp", args, 2, None, pos)?;
    let pred = fresh("pred");
    let val = fresh("val");
    let clauses = &args[2..];
    let (pairs, default) = if clauses.len() % 2 == 1 {
        (
            &clauses[..clauses.len() - 1],
            Some(clauses[clauses.len() - 1].clone()),
        )
    } else {
        (clauses, None)
    };
    let mut expr = default.unwrap_or_else(|| nil_form(pos));
    for pair in pairs.chunks(2).rev() {
        let test = list(vec![sym(&pred, pos), pair[0].clone(), sym(&val, pos)], pos);
        expr = list(vec![sym("if", pos), test, pair[1].clone(), expr], pos);
    }
    Ok(list(
        vec![
            sym("let", pos),
            vector(
                vec![
                    sym(&pred, pos),
                    args[0].clone(),
                    sym(&val, pos),
                    args[1].clone(),
                ],
                pos,
            ),
            expr,
        ],
        pos,
    ))
}

fn if_let(
    name: &str,
    args: &[Form],
    pos: Pos,
    is_if: bool,
    some: bool,
    fresh: &mut dyn FnMut(&str) -> Arc<str>,
) -> Result<Form, LispError> {
    expect_args(
        name,
        args,
        if is_if { 2 } else { 1 },
        if is_if { Some(3) } else { None },
        pos,
    )?;
    let bv = binding_vector(name, args.first(), pos)?;
    if bv.len() != 2 {
        return Err(invalid(format!("{name} requires exactly one binding"), pos));
    }
    let tmp = fresh("tmp");
    let test = if some {
        list(vec![sym("some?", pos), sym(&tmp, pos)], pos)
    } else {
        sym(&tmp, pos)
    };
    let then_body: Vec<Form> = if is_if {
        vec![args[1].clone()]
    } else {
        args[1..].to_vec()
    };
    let mut then = vec![
        sym("let", pos),
        vector(vec![bv[0].clone(), sym(&tmp, pos)], pos),
    ];
    then.extend(then_body);
    let else_form = if is_if {
        args.get(2).cloned().unwrap_or(nil_form(pos))
    } else {
        nil_form(pos)
    };
    Ok(list(
        vec![
            sym("let", pos),
            vector(vec![sym(&tmp, pos), bv[1].clone()], pos),
            list(vec![sym("if", pos), test, list(then, pos), else_form], pos),
        ],
        pos,
    ))
}

fn when_first(
    args: &[Form],
    pos: Pos,
    fresh: &mut dyn FnMut(&str) -> Arc<str>,
) -> Result<Form, LispError> {
    expect_args("when-first", args, 1, None, pos)?;
    let bv = binding_vector("when-first", args.first(), pos)?;
    if bv.len() != 2 {
        return Err(invalid("when-first requires exactly one binding", pos));
    }
    let tmp = fresh("coll");
    let mut then = vec![
        sym("let", pos),
        vector(
            vec![
                bv[0].clone(),
                list(vec![sym("first", pos), sym(&tmp, pos)], pos),
            ],
            pos,
        ),
    ];
    then.extend(args[1..].iter().cloned());
    Ok(list(
        vec![
            sym("let", pos),
            vector(vec![sym(&tmp, pos), bv[1].clone()], pos),
            list(
                vec![
                    sym("if", pos),
                    list(vec![sym("seq", pos), sym(&tmp, pos)], pos),
                    list(then, pos),
                    nil_form(pos),
                ],
                pos,
            ),
        ],
        pos,
    ))
}

fn cond_thread(
    name: &str,
    args: &[Form],
    pos: Pos,
    last: bool,
    is_cond: bool,
    fresh: &mut dyn FnMut(&str) -> Arc<str>,
) -> Result<Form, LispError> {
    expect_args(name, args, 1, None, pos)?;
    let g = fresh("v");
    let mut bindings = vec![sym(&g, pos), args[0].clone()];
    if is_cond {
        if !(args.len() - 1).is_multiple_of(2) {
            return Err(invalid(format!("{name} requires test/form pairs"), pos));
        }
        for pair in args[1..].chunks(2) {
            let stepped = thread_step(&pair[1], sym(&g, pos), last);
            bindings.push(sym(&g, pos));
            bindings.push(list(
                vec![sym("if", pos), pair[0].clone(), stepped, sym(&g, pos)],
                pos,
            ));
        }
    } else {
        for step in &args[1..] {
            let stepped = thread_step(step, sym(&g, pos), last);
            bindings.push(sym(&g, pos));
            bindings.push(list(
                vec![
                    sym("if", pos),
                    list(vec![sym("nil?", pos), sym(&g, pos)], pos),
                    nil_form(pos),
                    stepped,
                ],
                pos,
            ));
        }
    }
    Ok(list(
        vec![sym("let", pos), vector(bindings, pos), sym(&g, pos)],
        pos,
    ))
}

/// One threading step: `acc` becomes the first (or last) argument of `step`.
fn thread_step(step: &Form, acc: Form, last: bool) -> Form {
    let pos = step.pos;
    match &step.kind {
        FormKind::List(items) if !items.is_empty() => {
            let mut v = items.clone();
            if last {
                v.push(acc);
            } else {
                v.insert(1, acc);
            }
            list(v, pos)
        }
        _ => list(vec![step.clone(), acc], pos),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::Reader;

    /// Prints a form as source (hidden names print as `name#n`).
    fn show(f: &Form) -> String {
        fn seq(items: &[Form], open: &str, close: &str) -> String {
            let inner: Vec<String> = items.iter().map(show).collect();
            format!("{open}{}{close}", inner.join(" "))
        }
        match &f.kind {
            FormKind::Nil => "nil".into(),
            FormKind::Bool(b) => b.to_string(),
            FormKind::Int(i) => i.to_string(),
            FormKind::Float(x) => x.to_string(),
            FormKind::Str(s) => format!("{s:?}"),
            FormKind::Keyword(k) => format!(":{k}"),
            FormKind::Symbol(s) => s.replace(' ', "#"),
            FormKind::List(items) => seq(items, "(", ")"),
            FormKind::Vector(items) => seq(items, "[", "]"),
            FormKind::Map(items) => seq(items, "{", "}"),
            FormKind::Set(items) => seq(items, "#{", "}"),
            FormKind::Regex(r) => format!("#\"{r}\""),
            FormKind::AnonFn(items) => seq(items, "#(", ")"),
        }
    }

    /// Expands the sugar form in `src` once and prints the result.
    fn expands(src: &str) -> String {
        let form = Reader::new(src, 64).read_all().unwrap().remove(0);
        let FormKind::List(items) = &form.kind else {
            panic!("not a list: {src}")
        };
        let name = items[0].sym_name().unwrap();
        let Some(crate::names::Special::Sugar(s)) =
            crate::names::special_form(name).map(|f| f.kind)
        else {
            panic!("{name} is not sugar")
        };
        let mut n = 0;
        let mut fresh = |base: &str| -> Arc<str> {
            n += 1;
            format!("{base} {n}").into()
        };
        match expand(s, name, &items[1..], form.pos, &mut fresh) {
            Ok(f) => show(&f),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn threading_macros_expand_into_nested_calls() {
        assert_eq!(expands("(-> x (f a) g)"), "(g (f x a))");
        assert_eq!(expands("(->> x (f a) g)"), "(g (f a x))");
        assert_eq!(expands("(-> x)"), "x");
        assert_eq!(
            expands("(as-> 1 n (+ n 1) (* n 2))"),
            "(let [n 1 n (+ n 1) n (* n 2)] n)"
        );
        assert_eq!(
            expands("(cond-> x p (f 1))"),
            "(let [v#1 x v#1 (if p (f v#1 1) v#1)] v#1)"
        );
        assert_eq!(
            expands("(cond->> x p (f 1))"),
            "(let [v#1 x v#1 (if p (f 1 v#1) v#1)] v#1)"
        );
        assert_eq!(
            expands("(some-> x f)"),
            "(let [v#1 x v#1 (if (nil? v#1) nil (f v#1))] v#1)"
        );
        assert_eq!(
            expands("(some->> x (g 2))"),
            "(let [v#1 x v#1 (if (nil? v#1) nil (g 2 v#1))] v#1)"
        );
    }

    #[test]
    fn binding_forms_expand_into_let_and_if() {
        assert_eq!(
            expands("(if-let [[a] xs] a :none)"),
            "(let [tmp#1 xs] (if tmp#1 (let [[a] tmp#1] a) :none))"
        );
        assert_eq!(
            expands("(when-some [a x] 1 2)"),
            "(let [tmp#1 x] (if (some? tmp#1) (let [a tmp#1] 1 2) nil))"
        );
        assert_eq!(
            expands("(when-first [a xs] a)"),
            "(let [coll#1 xs] (if (seq coll#1) (let [a (first coll#1)] a) nil))"
        );
        assert_eq!(
            expands("(dotimes [i 3] (println i))"),
            "(doseq [i (range 3)] (println i))"
        );
        assert_eq!(
            expands("(condp = x 1 :one 2 :two :other)"),
            "(let [pred#1 = val#2 x] (if (pred#1 1 val#2) :one (if (pred#1 2 val#2) :two :other)))"
        );
        assert_eq!(
            expands("(condp = x 1 :one)"),
            "(let [pred#1 = val#2 x] (if (pred#1 1 val#2) :one nil))"
        );
    }

    #[test]
    fn malformed_sugar_is_an_invalid_form() {
        assert_eq!(
            expands("(if-let [a 1 b 2] a)"),
            "error: invalid_form: if-let requires exactly one binding (1:1)"
        );
        assert_eq!(
            expands("(cond-> x p)"),
            "error: invalid_form: cond-> requires test/form pairs (1:1)"
        );
        assert_eq!(
            expands("(->)"),
            "error: invalid_form: -> expects at least 1 argument(s), got 0 (1:1)"
        );
        assert_eq!(
            expands("(dotimes i 3)"),
            "error: invalid_form: dotimes requires a vector of bindings (1:1)"
        );
        assert_eq!(
            expands("(if-let [a 1])"),
            "error: invalid_form: if-let expects 2 to 3 argument(s), got 1 (1:1)"
        );
    }
}
