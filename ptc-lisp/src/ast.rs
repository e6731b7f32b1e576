//! The analyzed program: symbols resolved to frame slots, captures, globals or constants.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Pos;
use crate::function::Builtin;
use crate::globals::DefSource;
use crate::value::{Value, equal, ordering_for_lt};

/// Where a closure capture comes from in the enclosing frame.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CapSrc {
    Local(usize),
    Capture(usize),
    SelfRef,
}

/// One sequential binding into a frame slot.
pub(crate) struct Bind {
    pub slot: usize,
    pub init: Node,
}

/// One arity of a function.
pub(crate) struct Arity {
    pub n_fixed: usize,
    pub variadic: bool,
    pub body: Node,
}

/// A function literal after analysis.
pub(crate) struct Lambda {
    pub name: Option<Arc<str>>,
    pub arities: Vec<Arity>,
    pub n_slots: usize,
}

/// A clause of `for` / `doseq`.
pub(crate) enum ForClause {
    /// Iterate `coll`, binding each element into `slot` and then running `binds` (destructuring).
    Each {
        slot: usize,
        coll: Node,
        binds: Vec<Bind>,
    },
    Let(Vec<Bind>),
    When(Node),
    While(Node),
}

/// Integer fast paths for the commonest arithmetic and comparisons.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
}

impl BinOp {
    /// For a comparison (`=`/`==`, `<`, `>`, `<=`, `>=`), whether it holds between `x` and `y`:
    /// the builtins compare each neighbouring pair with this, and the evaluator two operands it
    /// reads in place. Values with no order between them (a string and a number) are neither
    /// less nor greater. `None` for arithmetic.
    pub(crate) fn compare(self, x: &Value, y: &Value) -> Option<bool> {
        let order = || ordering_for_lt(x, y);
        Some(match self {
            BinOp::Eq => equal(x, y),
            BinOp::Lt => order() == Some(Ordering::Less),
            BinOp::Gt => order() == Some(Ordering::Greater),
            BinOp::Le => order().is_some_and(|o| o != Ordering::Greater),
            BinOp::Ge => order().is_some_and(|o| o != Ordering::Less),
            BinOp::Add | BinOp::Sub | BinOp::Mul => return None,
        })
    }
}

/// An analyzed expression.
pub(crate) enum Node {
    Const(Value),
    Local(usize),
    /// Last use of a local: moves the value out so collections stay uniquely owned.
    Move(usize),
    Capture(usize),
    SelfRef,
    Global(usize, Arc<str>),
    Data(Arc<str>, Pos),
    If(Box<Node>, Box<Node>, Box<Node>),
    Do(Vec<Node>),
    Let(Vec<Bind>, Box<Node>),
    /// Bindings, the slots `recur` writes (first slot index of the loop's own locals), body.
    Loop {
        binds: Vec<Bind>,
        recur_slots: Vec<usize>,
        first_slot: usize,
        body: Box<Node>,
        pos: Pos,
    },
    Recur(Vec<Node>),
    Fn(Arc<Lambda>, Vec<CapSrc>),
    Def {
        idx: usize,
        name: Arc<str>,
        value: Box<Node>,
        once: bool,
        /// The top-level form, when this definition is one (see `session`): noted as the
        /// global's latest definition when it runs.
        origin: Option<Arc<DefSource>>,
    },
    And(Vec<Node>),
    Or(Vec<Node>),
    Call(Box<Node>, Vec<Node>, Pos),
    CallBuiltin(&'static Builtin, Vec<Node>, Pos),
    /// `(+ a b)`, `(< a b)`, `(inc a)`, ...: integers inline, anything else through the builtin
    /// (with only `a` when `unary`, as for `inc`).
    BinOp {
        op: BinOp,
        a: Box<Node>,
        b: Box<Node>,
        builtin: &'static Builtin,
        unary: bool,
        pos: Pos,
    },
    /// `(:k m)` / `(:k m default)` with flexible key lookup.
    KwGet(Value, Box<Node>, Option<Box<Node>>),
    Case(Box<Node>, Vec<(Value, Node)>, Box<Node>),
    /// `cond`: the first clause whose test is truthy; nil when none is.
    Cond(Vec<(Node, Node)>),
    For {
        clauses: Vec<ForClause>,
        first_slot: usize,
        body: Box<Node>,
        collect: bool,
        pos: Pos,
    },
    MakeVec(Vec<Node>),
    MakeMap(Vec<(Node, Node)>),
    MakeSet(Vec<Node>),
    /// Destructuring helpers.
    Nth(Box<Node>, usize),
    RestFrom(Box<Node>, usize),
    MapGet(Box<Node>, Value, Option<Box<Node>>),
    Return(Box<Node>),
    /// A call with constant arguments to a pure function-building builtin (`(fnil + 0)`,
    /// `(partial f 1)`, ...): evaluated once, then reused, so loops do not rebuild it.
    Memo(Box<Node>, std::sync::OnceLock<Value>),
    Fail(Box<Node>, Pos),
}
