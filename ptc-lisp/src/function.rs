//! Function values: builtins (with their table flags), user closures, combinator results and
//! host functions, and their arity errors. Values hold these; the evaluator applies them. The
//! only thing this module knows of the evaluator is the context type in the builtin signature.

use crate::meter::Charge;
use std::sync::Arc;

use crate::ast::{BinOp, Lambda};
use crate::error::{LispError, R, Reason};
use crate::eval::Ctx;
use crate::value::Value;

/// Signature of a builtin.
pub type BuiltinFn = fn(&mut Ctx<'_>, &mut [Value]) -> R<Value>;

/// Maximum arity marker for variadic builtins.
pub const VARIADIC: usize = usize::MAX;

/// A core library function.
pub struct Builtin {
    /// Name as written in programs (`"map"`, `"clojure.string/join"`, `"json/parse-string"`).
    pub name: &'static str,
    /// Minimum number of arguments.
    pub min: usize,
    /// Maximum number of arguments ([`VARIADIC`] when unbounded).
    pub max: usize,
    /// Implementation.
    pub f: BuiltinFn,
    /// One-line documentation, starting with the call signature.
    pub doc: &'static str,
    /// Behaviour chosen by this entry (fast paths, pure builders, orderings).
    pub(crate) traits: Traits,
}

/// Behaviour the analyzer and the standard library choose by a builtin's table entry rather
/// than by its name.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Traits {
    /// A pure function builder (`partial`, `comp`, ...): a call with constant arguments is
    /// evaluated once and remembered.
    pub(crate) pure_builder: bool,
    /// An integer fast path the analyzer compiles calls of this arity into.
    pub(crate) fast: Option<Fast>,
    /// The ordering this comparison function gives, so sorts need not call it.
    pub(crate) order: Option<Order>,
}

impl Traits {
    /// No special behaviour.
    pub(crate) const NONE: Traits = Traits {
        pure_builder: false,
        fast: None,
        order: None,
    };
    /// A pure function builder.
    pub(crate) const PURE_BUILDER: Traits = Traits {
        pure_builder: true,
        ..Traits::NONE
    };
    /// An integer fast path for two arguments.
    pub(crate) const fn binary(op: BinOp) -> Traits {
        Traits {
            fast: Some(Fast::Binary(op)),
            ..Traits::NONE
        }
    }
    /// An integer fast path for two arguments, and the ordering the function gives.
    pub(crate) const fn comparison(op: BinOp, order: Order) -> Traits {
        Traits {
            fast: Some(Fast::Binary(op)),
            order: Some(order),
            ..Traits::NONE
        }
    }
}

/// An integer fast path: `(op x y)` or, for `inc`/`dec`, `(op x 1)`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fast {
    Binary(BinOp),
    /// One argument, the other operand is 1.
    Unary(BinOp),
}

/// The ordering a comparison builtin gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// `<`: ascending; the order `<` gives (numbers first, NaN never less).
    Less,
    /// `>`: descending.
    Greater,
    /// `compare`: the total order of values.
    Compare,
}

/// The code of a combinator result: receives its captured values, the context and the arguments.
pub(crate) type NativeFn = fn(&[Value], &mut Ctx<'_>, &mut [Value]) -> R<Value>;

/// A function built by a combinator such as `partial`, `comp` or `juxt`. Its captured values
/// are held explicitly (not inside a Rust closure) so dropping long chains stays iterative.
pub struct Native {
    pub(crate) name: &'static str,
    pub(crate) captured: Vec<Value>,
    pub(crate) f: NativeFn,
    /// What the program was charged for it, credited back when it is freed (held for that).
    pub(crate) _charge: Charge,
}

impl Drop for Native {
    fn drop(&mut self) {
        crate::value::drop_values(std::mem::take(&mut self.captured));
    }
}

impl Drop for Closure {
    fn drop(&mut self) {
        crate::value::drop_values(std::mem::take(&mut self.captures));
    }
}

/// A callable value.
pub enum Function {
    /// A core library function.
    Builtin(&'static Builtin),
    /// A user function with its captured values.
    Closure(Closure),
    /// A combinator result (`partial`, `comp`, ...).
    Native(Native),
    /// A function served by the host, e.g. `tool/call`.
    Host {
        /// Namespace, e.g. `tool`.
        ns: Arc<str>,
        /// Name, e.g. `call`.
        name: Arc<str>,
    },
}

/// A user function value.
pub struct Closure {
    pub(crate) lambda: Arc<Lambda>,
    pub(crate) captures: Vec<Value>,
    /// What the program was charged for it, credited back when it is freed (held for that).
    pub(crate) _charge: Charge,
}

impl Function {
    /// The function's name for printing and error messages.
    pub fn name(&self) -> String {
        match self {
            Function::Builtin(b) => b.name.to_string(),
            Function::Closure(c) => c.lambda.name.as_deref().unwrap_or("fn").to_string(),
            Function::Native(n) => n.name.to_string(),
            Function::Host { ns, name } => format!("{ns}/{name}"),
        }
    }
}

/// The arity error of a builtin called with `n` arguments.
pub(crate) fn arity_error(b: &Builtin, n: usize) -> LispError {
    let expect = if b.max == VARIADIC {
        format!("at least {}", b.min)
    } else if b.max == b.min {
        format!("{}", b.min)
    } else if b.max == b.min + 1 {
        format!("{} or {}", b.min, b.max)
    } else {
        format!("{} to {}", b.min, b.max)
    };
    LispError::new(
        Reason::ArityError,
        format!(
            "arity error: {} expects {expect} argument(s), got {n}",
            b.name
        ),
    )
}

/// The arity error of a user function called with `n` arguments.
pub(crate) fn closure_arity_error(lambda: &Lambda, n: usize) -> LispError {
    let mut expects: Vec<String> = lambda
        .arities
        .iter()
        .map(|a| {
            if a.variadic {
                format!("{}+", a.n_fixed)
            } else {
                a.n_fixed.to_string()
            }
        })
        .collect();
    expects.sort();
    let name = lambda.name.as_deref().unwrap_or("fn");
    LispError::new(
        Reason::ArityError,
        format!(
            "arity error: {name} expects {} argument(s), got {n}",
            expects.join(" or ")
        ),
    )
}

/// A builtin as a function value.
pub(crate) fn builtin_value(b: &'static Builtin) -> Value {
    Value::Func(Arc::new(Function::Builtin(b)))
}
