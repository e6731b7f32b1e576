//! The typed reasons: the README's table is `Reason::ALL`, and `return` is control flow, not
//! an error.

use ptc_lisp::{Interpreter, Limits, Reason};

/// The reason names in the README's error table, in order.
fn readme_reasons() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md is readable");
    let table = readme
        .split("| Reason | Raised when |")
        .nth(1)
        .expect("README has the reason table");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.split('`')
                .nth(1)
                .unwrap_or_else(|| panic!("row without a `name`: {l}"))
                .to_string()
        })
        .collect()
}

#[test]
fn the_readme_reason_table_is_reason_all() {
    let documented = readme_reasons();
    let all: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    assert!(!all.is_empty());
    assert_eq!(documented, all);
    for r in Reason::ALL {
        assert_eq!(Reason::from_name(r.as_str()), Some(r));
        assert_eq!(r.to_string(), r.as_str());
    }
    assert_eq!(Reason::from_name("no_such_reason"), None);
}

#[test]
fn raised_reasons_are_typed() {
    let mut i = Interpreter::new(Limits::default());
    let cases = [
        ("(", Reason::ParseError),
        ("(if)", Reason::InvalidForm),
        ("nope", Reason::UnboundVar),
        ("(inc 1 2)", Reason::ArityError),
        ("(+ 1 nil)", Reason::TypeError),
        ("(quot 1 0)", Reason::ArithmeticError),
        ("(1 2)", Reason::NotCallable),
        ("(let [[a] 1] a)", Reason::DestructureError),
        ("(fail \"x\")", Reason::Fail),
    ];
    for (src, reason) in cases {
        let e = i.eval_str(src).unwrap_err();
        assert_eq!(e.reason(), reason, "{src}: {e}");
        assert!(e.to_string().starts_with(reason.as_str()), "{e}");
    }
}

#[test]
fn return_ends_the_program_with_its_value() {
    let mut i = Interpreter::new(Limits::default());
    let v = i
        .eval_str("(loop [n 0] (when (= n 3) (return [:early n])) (recur (inc n))) :late")
        .unwrap();
    assert_eq!(v.to_string(), "[:early 3]");
    let v = i
        .eval_str("((fn [x] (when (pos? x) (return :from-fn)) :after) 1)")
        .unwrap();
    assert_eq!(v.to_string(), ":from-fn");
    assert_eq!(i.eval_str("(return)").unwrap().to_string(), "nil");
    // A return value is the result, never an error, even when it looks like one.
    let v = i
        .eval_str("(do (return {:reason \"__return\"}) 1)")
        .unwrap();
    assert_eq!(v.to_string(), "{:reason \"__return\"}");
    let e = i.eval_str("(pmap (fn [x] (return x)) [1 2])").unwrap_err();
    assert_eq!(e.reason(), Reason::InvalidForm);
    assert!(
        e.message().contains("return is not allowed inside pmap"),
        "{e}"
    );
}
