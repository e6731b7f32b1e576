//! The evaluator: walks analyzed [`Node`]s over a value stack of frame slots, applies functions,
//! and enforces the limits (steps, deadline, memory, loop iterations, call depth, native stack).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::ast::{Arity, BinOp, Bind, CapSrc, ForClause, Node};
use crate::destructure;
use crate::error::{Ctl, LispError, Pos, R, Reason, err};
use crate::footprint;
use crate::function::{Builtin, Closure, Function, arity_error, closure_arity_error};
use crate::globals::GlobalTable;
use crate::host::{CallContext, Host, HostValue};
use crate::limits::Limits;
use crate::meter::{Bill, Charge, Meter};
use crate::printer::short;
use crate::suspend::{Resume, Suspender};
use crate::value::access::{Seq, get_flex, get_in_place, map_get_flex, seq_items};
use crate::value::{Charged, CollArc, Items, MapData, SetData, Text, Value};

pub(crate) struct Frame<'a> {
    pub base: usize,
    pub captures: &'a [Value],
    pub this: Option<&'a Value>,
}

/// State shared by the main evaluation and its `pmap` branches.
pub(crate) struct Shared<'a> {
    pub limits: &'a Limits,
    pub deadline: Option<Instant>,
    pub meter: Meter<'a>,
    pub cancel: &'a AtomicBool,
    pub host: Option<&'a dyn Host>,
    pub data: &'a Value,
    /// Whether the host keeps definitions between evaluations (`session/` builtins work).
    pub sessions: bool,
}

/// Per-thread evaluation context. Builtins reach it through methods only: charge the budget,
/// apply functions, print, reach the host, fork and join parallel branches.
pub struct Ctx<'a> {
    shared: &'a Shared<'a>,
    steps: u64,
    depth: usize,
    stack_base: usize,
    /// The most native stack a call has found in use (decides whether the thread is reused).
    stack_peak: usize,
    stack: Vec<Value>,
    recur_buf: Vec<Value>,
    globals: Vec<Option<Value>>,
    /// The globals' names and latest definitions (the analyzer declares into it between
    /// top-level forms; `def` marks it). A parallel branch has an empty one of its own.
    table: GlobalTable,
    output: String,
    /// How many parallel regions (`pmap`/`pcalls`) enclose this context.
    par_depth: usize,
    /// Where host waits suspend the program: its coroutine's (a `pmap` branch's own).
    suspend: &'a Suspender,
    /// When the program last let other programs on its thread run (see [`TIME_SLICE`]).
    slice_start: Instant,
}

/// A program that computes this long lets the other programs of its thread run before it goes
/// on (it suspends with nothing to wait for), so a long computation does not hold up short ones;
/// sooner when its host wants the thread for another (see [`crate::suspend::yield_when`]).
pub const TIME_SLICE: std::time::Duration = std::time::Duration::from_millis(2);

/// What a parallel branch starts from: a snapshot of its parent context. Each branch calls
/// [`Fork::start`] on its own stack.
pub(crate) struct Fork<'a> {
    shared: &'a Shared<'a>,
    globals: &'a [Option<Value>],
    steps: u64,
    depth: usize,
    par_depth: usize,
}

impl<'a> Fork<'a> {
    /// A branch context, created on the branch's own stack (it measures that stack), whose
    /// waits suspend through the branch's coroutine.
    pub(crate) fn start(&self, suspend: &'a Suspender) -> Ctx<'a> {
        let mut w = Ctx::new(
            self.shared,
            self.globals.to_vec(),
            GlobalTable::default(),
            suspend,
        );
        w.par_depth = self.par_depth + 1;
        w.steps = self.steps;
        w.depth = self.depth;
        w
    }

    /// Steps a branch has taken since the fork.
    pub(crate) fn steps_taken(&self, worker: &Ctx<'_>) -> u64 {
        worker.steps - self.steps
    }
}

fn stack_addr() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

static NIL: Value = Value::Nil;
static ONE: Value = Value::Int(1);

/// Two-integer arithmetic and comparison inline; `None` for other operands and on overflow (the
/// builtin then decides).
#[inline(always)]
fn int_binop(op: BinOp, x: &Value, y: &Value) -> Option<Value> {
    let (Value::Int(p), Value::Int(q)) = (x, y) else {
        return None;
    };
    let (p, q) = (*p, *q);
    match op {
        BinOp::Add => p.checked_add(q).map(Value::Int),
        BinOp::Sub => p.checked_sub(q).map(Value::Int),
        BinOp::Mul => p.checked_mul(q).map(Value::Int),
        BinOp::Lt => Some(Value::Bool(p < q)),
        BinOp::Gt => Some(Value::Bool(p > q)),
        BinOp::Le => Some(Value::Bool(p <= q)),
        BinOp::Ge => Some(Value::Bool(p >= q)),
        BinOp::Eq => Some(Value::Bool(p == q)),
    }
}

/// Native stack kept in reserve below the limit for builtins and the printer.
const STACK_RESERVE: usize = 1 << 20;

impl<'a> Ctx<'a> {
    /// The context of an evaluation's coroutine: host waits suspend it through `suspend`.
    pub(crate) fn new(
        shared: &'a Shared<'a>,
        globals: Vec<Option<Value>>,
        table: GlobalTable,
        suspend: &'a Suspender,
    ) -> Self {
        Ctx {
            shared,
            steps: 0,
            depth: 0,
            stack_base: stack_addr(),
            stack_peak: 0,
            stack: Vec::with_capacity(256),
            recur_buf: Vec::new(),
            globals,
            table,
            output: String::new(),
            par_depth: 0,
            suspend,
            slice_start: Instant::now(),
        }
    }

    /// Where host waits suspend the program.
    pub(crate) fn suspender(&self) -> &'a Suspender {
        self.suspend
    }

    /// The most native stack this context has found in use.
    pub(crate) fn stack_used(&self) -> usize {
        self.stack_peak
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        self.shared.limits
    }

    /// Snapshot for parallel workers (see [`Fork`]).
    pub(crate) fn fork(&self) -> Fork<'_> {
        Fork {
            shared: self.shared,
            globals: &self.globals,
            steps: self.steps,
            depth: self.depth,
            par_depth: self.par_depth,
        }
    }

    /// Takes back what parallel workers did: their steps count against this context's budget.
    pub(crate) fn join(&mut self, steps: u64) {
        self.steps += steps;
    }

    /// How many parallel regions enclose this context.
    pub(crate) fn parallel_depth(&self) -> usize {
        self.par_depth
    }

    /// Appends printed text to the captured output, within `max_output_bytes`.
    pub(crate) fn print(&mut self, text: &str) {
        crate::printer::append_output(&mut self.output, text, self.shared.limits.max_output_bytes);
    }

    /// Takes the output printed so far (a worker hands it to its parent, in branch order).
    pub(crate) fn take_output(&mut self) -> String {
        std::mem::take(&mut self.output)
    }

    /// The host's namespaces, when there is a host.
    pub(crate) fn host(&self) -> Option<&'a dyn Host> {
        self.shared.host
    }

    /// The request context (`data/<key>`).
    pub(crate) fn data(&self) -> &'a Value {
        self.shared.data
    }

    /// The globals' table, for the analyzer to declare into between top-level forms.
    pub(crate) fn table_mut(&mut self) -> &mut GlobalTable {
        &mut self.table
    }

    /// Whether the host keeps definitions between evaluations.
    pub(crate) fn sessions_on(&self) -> bool {
        self.shared.sessions
    }

    /// The globals' table and values, for the `session/` builtins; `None` in a parallel
    /// branch, which has a copy of the values only.
    pub(crate) fn globals_view(&self) -> Option<(&GlobalTable, &[Option<Value>])> {
        (self.par_depth == 0).then_some((&self.table, self.globals.as_slice()))
    }

    /// Removes the global `name` (later forms do not know it, functions that use it find no
    /// value). False when there is no such global, or in a parallel branch.
    pub(crate) fn forget_global(&mut self, name: &str) -> bool {
        if self.par_depth > 0 {
            return false;
        }
        match self.table.remove(name) {
            Some(idx) => {
                if let Some(slot) = self.globals.get_mut(idx) {
                    *slot = None;
                }
                true
            }
            None => false,
        }
    }

    /// Evaluates one analyzed top-level form in a fresh frame of `n_slots` slots.
    pub(crate) fn eval_top(&mut self, node: &Node, n_slots: usize) -> R<Value> {
        if self.globals.len() < self.table.slots {
            self.globals.resize(self.table.slots, None);
        }
        self.stack.clear();
        self.stack.resize(n_slots, Value::Nil);
        self.recur_buf.clear();
        let fr = Frame {
            base: 0,
            captures: &[],
            this: None,
        };
        self.eval(node, &fr)
    }

    /// Ends the evaluation: the globals (for the next one), the captured output and the most
    /// native stack a call found in use.
    pub(crate) fn finish(mut self) -> (crate::globals::Globals, String, usize) {
        self.stack.clear();
        let globals = crate::globals::Globals {
            table: std::mem::take(&mut self.table),
            values: std::mem::take(&mut self.globals),
        };
        (globals, std::mem::take(&mut self.output), self.stack_peak)
    }

    #[inline]
    pub(crate) fn tick(&mut self) -> R<()> {
        self.steps += 1;
        if self.steps & 1023 == 0 {
            self.check_slow()?;
        }
        Ok(())
    }

    #[cold]
    pub(crate) fn check_slow(&mut self) -> R<()> {
        if let Some(max) = self.shared.limits.max_steps
            && self.steps > max
        {
            return err(
                Reason::Timeout,
                format!("step budget of {max} evaluation steps exhausted"),
            );
        }
        if self.slice_start.elapsed() >= TIME_SLICE || crate::suspend::wanted() {
            if let Resume::Stopped(reason) =
                crate::suspend::suspend(self.suspend, crate::suspend::yield_now())
            {
                return err(reason, self.shared.limits.stop_message(reason));
            }
            self.slice_start = Instant::now();
        }
        self.check_deadline()
    }

    /// Checks the wall-clock deadline and cancellation (used inside long-running builtins).
    pub(crate) fn check_deadline(&self) -> R<()> {
        if let Some(d) = self.shared.deadline
            && Instant::now() >= d
        {
            return err(
                Reason::Timeout,
                self.shared.limits.stop_message(Reason::Timeout),
            );
        }
        if self.shared.cancel.load(Ordering::Relaxed) {
            return err(
                Reason::Cancelled,
                self.shared.limits.stop_message(Reason::Cancelled),
            );
        }
        Ok(())
    }

    /// Charges `bytes` against the memory budget: the bill, to give to the collection it pays
    /// for ([`Ctx::vector`]) or to leave charged until the program ends.
    #[inline]
    pub(crate) fn charge(&self, bytes: u64) -> R<Bill> {
        self.shared
            .meter
            .charge(bytes)
            .or_else(|message| err(Reason::MemoryExceeded, message))
    }

    /// A vector of `values`, its storage charged now (for values built from what the program
    /// already holds) and credited back when it is freed.
    pub(crate) fn vector(&self, values: Vec<Value>) -> R<Value> {
        let bill = self.charge(footprint::vector(values.capacity()))?;
        Ok(self.paid_vector(values, bill))
    }

    /// A vector of `values` whose storage `bill` paid for before it was allocated (from
    /// `self.charge(footprint::vector(capacity))`): credited back when it is freed.
    pub(crate) fn paid_vector(&self, values: Vec<Value>, bill: Bill) -> Value {
        Value::Vector(self.paid(Items(values), bill))
    }

    /// A string of `s`, its shared bytes charged now and credited back when they are freed
    /// (text stored inline takes nothing beyond its value).
    pub(crate) fn string(&self, s: &str) -> R<Value> {
        let charge = match footprint::string(s.len()) {
            0 => Charge::default(),
            bytes => self.owned(self.charge(bytes)?),
        };
        Ok(Value::Str(Text::charged(s, charge)))
    }

    /// A string of `s` ([`Ctx::string`]), or `nil` when there is none.
    pub(crate) fn string_or_nil(&self, s: Option<&str>) -> R<Value> {
        s.map_or(Ok(Value::Nil), |s| self.string(s))
    }

    /// A map of `m`, its storage charged now and credited back when it is freed.
    pub(crate) fn map(&self, m: MapData) -> R<Value> {
        let bill = self.charge(footprint::map_storage(&m))?;
        Ok(Value::Map(self.paid(m, bill)))
    }

    /// A set of `s`, its storage charged now and credited back when it is freed.
    pub(crate) fn set(&self, s: SetData) -> R<Value> {
        let bill = self.charge(footprint::set_storage(&s))?;
        Ok(Value::Set(self.paid(s, bill)))
    }

    /// The elements of a seqable value: a vector's own; for a set, map (`[k v]` entries, each a
    /// vector of its own) or string (one-character strings), built and charged before they are.
    pub(crate) fn seq<'v>(&self, v: &'v Value) -> R<Seq<'v>> {
        let n = match v {
            Value::Vector(items) => return Ok(Seq::borrowed(items)),
            Value::Map(m) => {
                let bill = self.charge(footprint::vector(m.len()))?;
                let mut pairs = Vec::with_capacity(m.len());
                for (k, x) in m.sorted() {
                    pairs.push(self.vector(vec![k.clone(), x.clone()])?);
                }
                return Ok(Seq::built(pairs, self.owned(bill)));
            }
            Value::Set(s) => s.0.len(),
            // One-character strings are inline: their elements are all they take.
            Value::Str(s) => s.chars().count(),
            other => {
                return Ok(Seq::built(
                    seq_items(other)?.into_owned(),
                    Charge::default(),
                ));
            }
        };
        let bill = self.charge(footprint::vector(n))?;
        Ok(Seq::built(seq_items(v)?.into_owned(), self.owned(bill)))
    }

    /// Storage that `bill` paid for, and nothing else did: credited back when it is freed.
    pub(crate) fn paid<T>(&self, data: T, bill: Bill) -> CollArc<Charged<T>> {
        CollArc::new(Charged::new(data, self.owned(bill)))
    }

    /// The charge of something `bill` paid for, and nothing else did, to be kept with it.
    pub(crate) fn owned(&self, bill: Bill) -> Charge {
        self.shared.meter.own(bill)
    }

    /// The elements of a vector that `extra` more will be added to, charged before anything is
    /// allocated: a shared vector is copied with room for them (the copy is charged), an own one
    /// that lacks the room grows (its new room is charged).
    pub(crate) fn grow_vector<'v>(
        &self,
        items: &'v mut CollArc<Charged<Items>>,
        extra: usize,
    ) -> R<&'v mut Vec<Value>> {
        let need = items.len().saturating_add(extra);
        if CollArc::get_mut(items).is_none() {
            let bill = self.charge(footprint::vector(need))?;
            let mut copy = Vec::with_capacity(need);
            copy.extend_from_slice(items);
            *items = self.paid(Items(copy), bill);
        } else if items.capacity() < need {
            let room = need.max(items.capacity().saturating_mul(2));
            let bill = self.charge(footprint::vector(room))?;
            let own = CollArc::make_mut(items);
            let len = own.len();
            own.reserve_exact(room - len);
            // Growing moved the elements out of the old storage, freed now: its charge comes back.
            own.recharge(self.owned(bill));
        }
        Ok(&mut CollArc::make_mut(items).0)
    }

    /// A map that `extra` more entries will be added to, charged first as [`Ctx::grow_vector`]
    /// charges a vector.
    pub(crate) fn grow_map<'m>(
        &self,
        m: &'m mut CollArc<Charged<MapData>>,
        extra: usize,
    ) -> R<&'m mut MapData> {
        let need = m.len().saturating_add(extra);
        if CollArc::get_mut(m).is_none() {
            let bill = self.charge(footprint::map_room(need))?;
            let mut copy = MapData::with_capacity(need);
            for (k, v) in m.iter() {
                copy.insert(k.clone(), v.clone());
            }
            *m = self.paid(copy, bill);
        } else if m.capacity() < need {
            let room = need.max(m.capacity().saturating_mul(2));
            let bill = self.charge(footprint::map_room(room))?;
            let own = CollArc::make_mut(m);
            own.regrow(room);
            own.recharge(self.owned(bill));
        }
        Ok(&mut **CollArc::make_mut(m))
    }

    /// A set that `extra` more elements will be added to, charged first as [`Ctx::grow_vector`]
    /// charges a vector.
    pub(crate) fn grow_set<'s>(
        &self,
        s: &'s mut CollArc<Charged<SetData>>,
        extra: usize,
    ) -> R<&'s mut SetData> {
        let need = s.0.len().saturating_add(extra);
        if CollArc::get_mut(s).is_none() {
            let bill = self.charge(footprint::set(need))?;
            let mut copy = indexmap::IndexSet::with_capacity_and_hasher(need, Default::default());
            copy.extend(s.0.iter().cloned());
            *s = self.paid(SetData(copy), bill);
        } else if s.0.capacity() < need {
            let room = need.max(s.0.capacity().saturating_mul(2));
            let bill = self.charge(footprint::set(room))?;
            let own = CollArc::make_mut(s);
            let len = own.0.len();
            own.0.reserve(room - len);
            own.recharge(self.owned(bill));
        }
        Ok(&mut **CollArc::make_mut(s))
    }

    /// Bytes left in the memory budget (a bound for text a builtin may build).
    pub(crate) fn remaining_memory(&self) -> usize {
        usize::try_from(self.shared.meter.left()).unwrap_or(usize::MAX)
    }

    /// The longest string a builtin may build: the remaining memory budget, and never more than
    /// 256 MiB (building text is not interruptible, so this also bounds its time).
    pub(crate) fn text_limit(&self) -> usize {
        self.remaining_memory().min(256 << 20)
    }

    /// Renders a value as text within [`Ctx::text_limit`].
    pub(crate) fn render(
        &self,
        v: &Value,
        out: &mut String,
        style: crate::printer::Style,
    ) -> R<()> {
        let limit = self.text_limit();
        if crate::printer::render_limited(v, out, style, limit) {
            Ok(())
        } else {
            err(
                Reason::MemoryExceeded,
                format!(
                    "rendering a value as text would exceed {limit} bytes (memory budget, at most 256 MiB per string)"
                ),
            )
        }
    }

    /// Charges for a vector of `n` elements.
    #[inline]
    pub(crate) fn charge_items(&self, n: usize) -> R<Bill> {
        self.charge(footprint::vector(n))
    }

    /// Checks that a collection of `n` elements could be charged, before building it.
    pub(crate) fn precheck_items(&self, n: u64) -> R<()> {
        let bytes = n.saturating_mul(std::mem::size_of::<Value>() as u64);
        if bytes > self.shared.meter.left() {
            return err(
                Reason::MemoryExceeded,
                format!(
                    "a collection of {n} elements would exceed the {} byte memory budget",
                    self.shared.limits.max_memory_bytes
                ),
            );
        }
        Ok(())
    }

    /// Enters a call: checks call depth, native stack and the step budget. On success the caller
    /// must decrement `depth` when the call returns.
    fn enter(&mut self) -> R<()> {
        if self.depth >= self.shared.limits.max_call_depth {
            return err(
                Reason::DepthExceeded,
                format!(
                    "call depth exceeded {} nested calls",
                    self.shared.limits.max_call_depth
                ),
            );
        }
        let used = self.stack_base.abs_diff(stack_addr());
        self.stack_peak = self.stack_peak.max(used);
        if used + STACK_RESERVE > self.shared.limits.thread_stack() {
            return err(
                Reason::DepthExceeded,
                "native stack exhausted by nested evaluation",
            );
        }
        self.tick()?;
        self.depth += 1;
        Ok(())
    }

    /// A node's value read where it lies, for the nodes that evaluate without effects or
    /// allocation: constants, locals, captures and keyword lookups in those (a missing key reads
    /// as nil). `None` for any other node, which must be evaluated.
    fn peek<'s>(&'s self, node: &'s Node, fr: &'s Frame<'_>) -> Option<&'s Value> {
        match node {
            Node::Const(v) => Some(v),
            // Reading a local where it lies instead of moving it out leaves it in its slot until
            // the frame ends; a comparison has no use for owning it.
            Node::Local(s) | Node::Move(s) => Some(&self.stack[fr.base + s]),
            Node::Capture(i) => Some(&fr.captures[*i]),
            Node::KwGet(k, target, None) => {
                Some(get_in_place(self.peek(target, fr)?, k).unwrap_or(&NIL))
            }
            _ => None,
        }
    }

    /// Evaluates a node in a frame. The hot node kinds are handled here; the rest live in
    /// [`Ctx::eval_cold`] so this function keeps a small stack frame.
    #[inline]
    pub(crate) fn eval(&mut self, node: &Node, fr: &Frame<'_>) -> R<Value> {
        match node {
            Node::Const(v) => Ok(v.clone()),
            Node::Local(s) => Ok(self.stack[fr.base + s].clone()),
            Node::Move(s) => Ok(std::mem::take(&mut self.stack[fr.base + s])),
            Node::Capture(i) => Ok(fr.captures[*i].clone()),
            Node::If(c, t, e) => {
                if self.eval(c, fr)?.truthy() {
                    self.eval(t, fr)
                } else {
                    self.eval(e, fr)
                }
            }
            Node::CallBuiltin(b, args, pos) => self.call_builtin(b, args, *pos, fr),
            Node::KwGet(k, target, default) => {
                let found = match self.peek(target, fr) {
                    Some(t) => get_in_place(t, k).cloned(),
                    None => get_in_place(&self.eval(target, fr)?, k).cloned(),
                };
                match found {
                    Some(v) => Ok(v),
                    None => match default {
                        Some(d) => self.eval(d, fr),
                        None => Ok(Value::Nil),
                    },
                }
            }
            Node::BinOp {
                op,
                a,
                b,
                builtin,
                unary,
                pos,
            } => {
                // Operands that only read (constants, locals, keyword lookups in them) are
                // looked at where they lie: a comparison of two of them clones and drops nothing.
                if let Some(x) = self.peek(a, fr) {
                    let y = if *unary { Some(&ONE) } else { self.peek(b, fr) };
                    if let Some(y) = y {
                        if let Some(r) = int_binop(*op, x, y) {
                            return Ok(r);
                        }
                        if let Some(holds) = op.compare(x, y) {
                            return Ok(Value::Bool(holds));
                        }
                        let (x, y) = (x.clone(), y.clone());
                        return self.binop_slow(builtin, x, y, *unary, *pos);
                    }
                }
                let x = self.eval(a, fr)?;
                let y = if *unary {
                    Value::Int(1)
                } else {
                    self.eval(b, fr)?
                };
                if let Some(r) = int_binop(*op, &x, &y) {
                    return Ok(r);
                }
                self.binop_slow(builtin, x, y, *unary, *pos)
            }
            Node::Recur(args) => {
                for a in args {
                    let v = self.eval(a, fr)?;
                    self.recur_buf.push(v);
                }
                Err(Ctl::Recur)
            }
            _ => self.eval_cold(node, fr),
        }
    }

    #[inline(never)]
    fn eval_cold(&mut self, node: &Node, fr: &Frame<'_>) -> R<Value> {
        match node {
            Node::Cond(clauses) => {
                for (test, then) in clauses {
                    if self.eval(test, fr)?.truthy() {
                        return self.eval(then, fr);
                    }
                }
                Ok(Value::Nil)
            }
            Node::Memo(inner, cell) => {
                if let Some(v) = cell.get() {
                    return Ok(v.clone());
                }
                let v = self.eval(inner, fr)?;
                Ok(cell.get_or_init(|| v).clone())
            }
            Node::BinOp { .. } | Node::KwGet(..) => err(
                Reason::InternalError,
                "a fast-path node reached the slow path",
            ),
            Node::Const(v) => Ok(v.clone()),
            Node::Local(s) => Ok(self.stack[fr.base + s].clone()),
            Node::Move(s) => Ok(std::mem::take(&mut self.stack[fr.base + s])),
            Node::Capture(i) => Ok(fr.captures[*i].clone()),
            Node::SelfRef => Ok(fr.this.cloned().unwrap_or(Value::Nil)),
            Node::Global(i, name) => match self.globals.get(*i) {
                Some(Some(v)) => Ok(v.clone()),
                _ => err(
                    Reason::UnboundVar,
                    format!("{name} is declared but has no value yet"),
                ),
            },
            Node::Data(key, pos) => self.data_lookup(key, *pos),
            Node::If(c, t, e) => {
                if self.eval(c, fr)?.truthy() {
                    self.eval(t, fr)
                } else {
                    self.eval(e, fr)
                }
            }
            Node::Do(nodes) => {
                let (last, init) = match nodes.split_last() {
                    Some(x) => x,
                    None => return Ok(Value::Nil),
                };
                for n in init {
                    self.eval(n, fr)?;
                }
                self.eval(last, fr)
            }
            Node::Let(binds, body) => {
                self.bind_all(binds, fr)?;
                self.eval(body, fr)
            }
            Node::Loop {
                binds,
                recur_slots,
                body,
                pos,
                ..
            } => {
                self.bind_all(binds, fr)?;
                let mut iterations: u64 = 0;
                loop {
                    match self.eval(body, fr) {
                        Err(Ctl::Recur) => {
                            iterations += 1;
                            if iterations > self.shared.limits.max_loop_iterations {
                                return Err(Ctl::from(
                                    LispError::new(
                                        Reason::LoopLimitExceeded,
                                        format!(
                                            "loop exceeded {} iterations",
                                            self.shared.limits.max_loop_iterations
                                        ),
                                    )
                                    .with_pos(*pos),
                                ));
                            }
                            self.tick()?;
                            let n = recur_slots.len();
                            let start = self.recur_buf.len() - n;
                            for (i, v) in self.recur_buf.drain(start..).enumerate() {
                                self.stack[fr.base + recur_slots[i]] = v;
                            }
                        }
                        r => return r,
                    }
                }
            }
            Node::Recur(args) => {
                for a in args {
                    let v = self.eval(a, fr)?;
                    self.recur_buf.push(v);
                }
                Err(Ctl::Recur)
            }
            Node::Fn(lambda, caps) => {
                // Closures are values too: a loop that keeps millions of them must hit the budget.
                let bill = self.charge_items(caps.len() + 4)?;
                let captures = caps
                    .iter()
                    .map(|c| match c {
                        CapSrc::Local(s) => self.stack[fr.base + s].clone(),
                        CapSrc::Capture(i) => fr.captures[*i].clone(),
                        CapSrc::SelfRef => fr.this.cloned().unwrap_or(Value::Nil),
                    })
                    .collect();
                Ok(Value::Func(Arc::new(Function::Closure(Closure {
                    lambda: lambda.clone(),
                    captures,
                    _charge: self.owned(bill),
                }))))
            }
            Node::Def {
                idx,
                name,
                value,
                once,
                origin,
            } => {
                if *once && matches!(self.globals.get(*idx), Some(Some(_))) {
                    return Ok(Value::Var(name.into()));
                }
                let v = self.eval(value, fr)?;
                if self.globals.len() <= *idx {
                    self.globals.resize(*idx + 1, None);
                }
                self.globals[*idx] = Some(v);
                self.table.mark(*idx, origin.clone());
                Ok(Value::Var(name.into()))
            }
            Node::And(nodes) => {
                let mut v = Value::Bool(true);
                for n in nodes {
                    v = self.eval(n, fr)?;
                    if !v.truthy() {
                        return Ok(v);
                    }
                }
                Ok(v)
            }
            Node::Or(nodes) => {
                let mut v = Value::Nil;
                for n in nodes {
                    v = self.eval(n, fr)?;
                    if v.truthy() {
                        return Ok(v);
                    }
                }
                Ok(v)
            }
            Node::CallBuiltin(b, args, pos) => self.call_builtin(b, args, *pos, fr),
            Node::Call(f, args, pos) => {
                let fv = self.eval(f, fr)?;
                let r = match args.len() {
                    0 => self.apply(&fv, &mut []),
                    1 => {
                        let mut a = [self.eval(&args[0], fr)?];
                        self.apply(&fv, &mut a)
                    }
                    2 => {
                        let mut a = [self.eval(&args[0], fr)?, self.eval(&args[1], fr)?];
                        self.apply(&fv, &mut a)
                    }
                    3 => {
                        let mut a = [
                            self.eval(&args[0], fr)?,
                            self.eval(&args[1], fr)?,
                            self.eval(&args[2], fr)?,
                        ];
                        self.apply(&fv, &mut a)
                    }
                    _ => {
                        let mut v = Vec::with_capacity(args.len());
                        for a in args {
                            v.push(self.eval(a, fr)?);
                        }
                        self.apply(&fv, &mut v)
                    }
                };
                r.map_err(|e| at(e, *pos))
            }
            Node::Case(e, table, default) => {
                let v = self.eval(e, fr)?;
                for (k, body) in table {
                    if *k == v {
                        return self.eval(body, fr);
                    }
                }
                self.eval(default, fr)
            }
            Node::For {
                clauses,
                body,
                collect,
                pos,
                ..
            } => {
                let mut out = Vec::new();
                self.run_for(clauses, 0, body, fr, &mut out, *collect)
                    .map_err(|e| at(e, *pos))?;
                if *collect {
                    self.vector(out)
                } else {
                    Ok(Value::Nil)
                }
            }
            Node::MakeVec(nodes) => {
                let mut v = Vec::with_capacity(nodes.len());
                for n in nodes {
                    v.push(self.eval(n, fr)?);
                }
                self.vector(v)
            }
            Node::MakeMap(pairs) => {
                let mut m = MapData::with_capacity(pairs.len());
                for (k, v) in pairs {
                    let k = self.eval(k, fr)?;
                    let v = self.eval(v, fr)?;
                    m.insert(k, v);
                }
                self.map(m)
            }
            Node::MakeSet(nodes) => {
                let mut s = SetData::default();
                for n in nodes {
                    s.0.insert(self.eval(n, fr)?);
                }
                self.set(s)
            }
            Node::Nth(src, i) => {
                let v = self.eval(src, fr)?;
                destructure::nth(&v, *i)
            }
            Node::RestFrom(src, i) => {
                let v = self.eval(src, fr)?;
                match destructure::rest(&v, *i)? {
                    Some(rest) => self.vector(rest),
                    None => Ok(Value::Nil),
                }
            }
            Node::MapGet(src, key, default) => {
                let v = self.eval(src, fr)?;
                match destructure::get(&v, key)? {
                    Some(x) => Ok(x),
                    None => match default {
                        Some(d) => self.eval(d, fr),
                        None => Ok(Value::Nil),
                    },
                }
            }
            Node::Return(v) => {
                let v = self.eval(v, fr)?;
                if self.par_depth > 0 {
                    return err(
                        Reason::InvalidForm,
                        "return is not allowed inside pmap/pcalls",
                    );
                }
                Err(Ctl::Return(Box::new(v)))
            }
            Node::Fail(v, pos) => {
                let v = self.eval(v, fr)?;
                if self.par_depth > 0 {
                    return err(
                        Reason::InvalidForm,
                        "fail is not allowed inside pmap/pcalls",
                    );
                }
                let msg = match &v {
                    Value::Str(s) => s.to_string(),
                    other => other.to_string(),
                };
                Err(Ctl::from(
                    LispError::new(Reason::Fail, msg)
                        .with_value(v)
                        .with_pos(*pos),
                ))
            }
        }
    }

    fn bind_all(&mut self, binds: &[Bind], fr: &Frame<'_>) -> R<()> {
        for b in binds {
            let v = self.eval(&b.init, fr)?;
            self.stack[fr.base + b.slot] = v;
        }
        Ok(())
    }

    fn data_lookup(&self, key: &str, pos: Pos) -> R<Value> {
        match get_flex(self.shared.data, &Value::keyword(key)) {
            Some(v) => Ok(v),
            None => Err(Ctl::from(
                LispError::new(
                    Reason::UnboundVar,
                    format!("data/{key} is not in the request context"),
                )
                .with_pos(pos),
            )),
        }
    }

    fn run_for(
        &mut self,
        clauses: &[ForClause],
        i: usize,
        body: &Node,
        fr: &Frame<'_>,
        out: &mut Vec<Value>,
        collect: bool,
    ) -> R<bool> {
        // Returns false when a :while clause stopped the enclosing iteration.
        let Some(clause) = clauses.get(i) else {
            let v = self.eval(body, fr)?;
            if collect {
                out.push(v);
            }
            return Ok(true);
        };
        match clause {
            ForClause::Each { slot, coll, binds } => {
                let c = self.eval(coll, fr)?;
                let items = self.seq(&c)?;
                for item in items.iter() {
                    self.tick()?;
                    self.stack[fr.base + slot] = item.clone();
                    self.bind_all(binds, fr)?;
                    if !self.run_for(clauses, i + 1, body, fr, out, collect)? {
                        break;
                    }
                }
                Ok(true)
            }
            ForClause::Let(binds) => {
                self.bind_all(binds, fr)?;
                self.run_for(clauses, i + 1, body, fr, out, collect)
            }
            ForClause::When(test) => {
                if self.eval(test, fr)?.truthy() {
                    self.run_for(clauses, i + 1, body, fr, out, collect)
                } else {
                    Ok(true)
                }
            }
            ForClause::While(test) => {
                if self.eval(test, fr)?.truthy() {
                    self.run_for(clauses, i + 1, body, fr, out, collect)
                } else {
                    Ok(false)
                }
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn binop_slow(
        &mut self,
        b: &'static Builtin,
        x: Value,
        y: Value,
        unary: bool,
        pos: Pos,
    ) -> R<Value> {
        let r = if unary {
            (b.f)(self, &mut [x])
        } else {
            (b.f)(self, &mut [x, y])
        };
        r.map_err(|e| at(e, pos))
    }

    #[inline(never)]
    fn call_builtin(
        &mut self,
        b: &'static Builtin,
        args: &[Node],
        pos: Pos,
        fr: &Frame<'_>,
    ) -> R<Value> {
        let n = args.len();
        if n < b.min || n > b.max {
            return Err(at(Ctl::from(arity_error(b, n)), pos));
        }
        let r = match n {
            0 => (b.f)(self, &mut []),
            1 => {
                let mut a = [self.eval(&args[0], fr)?];
                (b.f)(self, &mut a)
            }
            2 => {
                let mut a = [self.eval(&args[0], fr)?, self.eval(&args[1], fr)?];
                (b.f)(self, &mut a)
            }
            3 => {
                let mut a = [
                    self.eval(&args[0], fr)?,
                    self.eval(&args[1], fr)?,
                    self.eval(&args[2], fr)?,
                ];
                (b.f)(self, &mut a)
            }
            4 => {
                let mut a = [
                    self.eval(&args[0], fr)?,
                    self.eval(&args[1], fr)?,
                    self.eval(&args[2], fr)?,
                    self.eval(&args[3], fr)?,
                ];
                (b.f)(self, &mut a)
            }
            _ => {
                let mut v = Vec::with_capacity(n);
                for a in args {
                    v.push(self.eval(a, fr)?);
                }
                (b.f)(self, &mut v)
            }
        };
        r.map_err(|e| at(e, pos))
    }

    /// Applies `f` to one argument it may only read: keyword and string accessors look the key
    /// up without cloning the argument (the common `(map :cost rows)` case).
    #[inline]
    pub(crate) fn call1(&mut self, f: &Value, x: &Value) -> R<Value> {
        match f {
            Value::Keyword(_) => {
                // Accessors are cheap but a builtin may call them millions of times: count steps.
                self.tick()?;
                Ok(get_flex(x, f).unwrap_or(Value::Nil))
            }
            Value::Str(_) if matches!(x, Value::Map(_)) => Ok(get_flex(x, f).unwrap_or(Value::Nil)),
            _ => self.apply(f, &mut [x.clone()]),
        }
    }

    /// Applies any callable value to arguments (which may be moved out of `args`).
    pub(crate) fn apply(&mut self, f: &Value, args: &mut [Value]) -> R<Value> {
        match f {
            Value::Func(func) => match &**func {
                Function::Builtin(b) => {
                    if args.len() < b.min || args.len() > b.max {
                        return Err(Ctl::from(arity_error(b, args.len())));
                    }
                    (b.f)(self, args)
                }
                Function::Closure(c) => self.call_closure(f, c, args),
                Function::Native(n) => {
                    // Combinators can nest without bound (a chain of partials): count them as calls.
                    self.enter()?;
                    let r = (n.f)(&n.captured, self, args);
                    self.depth -= 1;
                    r
                }
                Function::Host { ns, name } => self.call_host(ns, name, args),
            },
            // Strings act as map accessors too (`(sort-by "cost" rows)`), like keywords; on
            // anything but a map a string is still not a function.
            Value::Str(_) if !matches!(args.first(), Some(Value::Map(_) | Value::Nil)) => err(
                Reason::NotCallable,
                format!("{} (string) is not a function", short(f)),
            ),
            Value::Keyword(_) | Value::Symbol(_) | Value::Str(_) => match args.len() {
                1 => Ok(get_flex(&args[0], f).unwrap_or(Value::Nil)),
                2 => Ok(get_flex(&args[0], f).unwrap_or_else(|| std::mem::take(&mut args[1]))),
                n => err(
                    Reason::ArityError,
                    format!("arity error: {f} expects 1 or 2 argument(s), got {n}"),
                ),
            },
            Value::Map(m) => match args.len() {
                1 | 2 => Ok(map_get_flex(m, &args[0])
                    .cloned()
                    .unwrap_or_else(|| args.get_mut(1).map(std::mem::take).unwrap_or(Value::Nil))),
                n => err(
                    Reason::ArityError,
                    format!("arity error: a map expects 1 or 2 argument(s), got {n}"),
                ),
            },
            Value::Set(s) => match args.len() {
                1 => Ok(if s.0.contains(&args[0]) {
                    args[0].clone()
                } else {
                    Value::Nil
                }),
                n => err(
                    Reason::ArityError,
                    format!("arity error: a set expects 1 argument, got {n}"),
                ),
            },
            Value::Vector(v) => match args.len() {
                1 => match &args[0] {
                    Value::Int(i) if *i >= 0 && (*i as usize) < v.len() => {
                        Ok(v[*i as usize].clone())
                    }
                    Value::Int(_) => Ok(Value::Nil),
                    other => err(
                        Reason::TypeError,
                        format!("vector index must be an integer, got {other}"),
                    ),
                },
                n => err(
                    Reason::ArityError,
                    format!("arity error: a vector expects 1 argument, got {n}"),
                ),
            },
            other => {
                let e = LispError::new(
                    Reason::NotCallable,
                    format!("{} ({}) is not a function", short(other), other.type_name()),
                );
                let e = match other {
                    Value::Int(_) | Value::Float(_) | Value::Nil | Value::Bool(_) => e.with_hint(
                        "a list of data must be a vector [1 2 3] or quoted '(1 2 3); parentheses call a function",
                    ),
                    _ => e,
                };
                Err(Ctl::from(e))
            }
        }
    }

    #[inline(never)]
    fn call_closure(&mut self, this: &Value, c: &Closure, args: &mut [Value]) -> R<Value> {
        let lambda = &*c.lambda;
        let n = args.len();
        let arity = match select_arity(&lambda.arities, n) {
            Some(a) => a,
            None => {
                return Err(Ctl::from(closure_arity_error(lambda, n)));
            }
        };
        self.enter()?;
        let base = self.stack.len();
        for a in args.iter_mut().take(arity.n_fixed) {
            self.stack.push(std::mem::take(a));
        }
        if arity.variadic {
            let rest: Vec<Value> = args[arity.n_fixed..]
                .iter_mut()
                .map(std::mem::take)
                .collect();
            self.stack.push(if rest.is_empty() {
                Value::Nil
            } else {
                Value::vector(rest)
            });
        }
        // The slots past the parameters (a one-parameter function usually has none).
        let frame_end = base + lambda.n_slots.max(1);
        if self.stack.len() < frame_end {
            self.stack.resize(frame_end, Value::Nil);
        }
        let fr = Frame {
            base,
            captures: &c.captures,
            this: Some(this),
        };
        let n_params = arity.n_fixed + usize::from(arity.variadic);
        let mut iterations: u64 = 0;
        let result = loop {
            match self.eval(&arity.body, &fr) {
                Err(Ctl::Recur) => {
                    iterations += 1;
                    if iterations > self.shared.limits.max_loop_iterations {
                        break err(
                            Reason::LoopLimitExceeded,
                            format!(
                                "recur exceeded {} iterations",
                                self.shared.limits.max_loop_iterations
                            ),
                        );
                    }
                    if let Err(e) = self.tick() {
                        break Err(e);
                    }
                    let start = self.recur_buf.len() - n_params;
                    for (i, v) in self.recur_buf.drain(start..).enumerate() {
                        self.stack[base + i] = v;
                    }
                }
                r => break r,
            }
        };
        self.stack.truncate(base);
        self.depth -= 1;
        result
    }

    fn call_host(&mut self, ns: &str, name: &str, args: &mut [Value]) -> R<Value> {
        self.tick()?;
        self.check_deadline()?;
        let answer = self.with_host(|host, cx| host.call(cx, ns, name, args));
        // A host call that ran past the deadline (a slow upstream) ends the program there, as a
        // step would, whatever it answered.
        self.check_deadline()?;
        match answer {
            None => err(Reason::UnboundVar, format!("no host provides {ns}/{name}")),
            Some(Ok(HostValue::Value(v))) => {
                // Host-built values count against the budget like decoded ones; the walk stops
                // once it is known not to fit.
                self.charge(v.approx_size(self.shared.meter.left()))?;
                Ok(v)
            }
            Some(Ok(HostValue::Json(bytes))) => self.decode_json(&bytes),
            Some(Err(e)) => err(e.reason, e.message),
        }
    }

    /// Runs `f` with the host and a [`CallContext`] for this evaluation (its deadline, captured
    /// output and memory budget); `None` when the interpreter has no host.
    pub(crate) fn with_host<T>(
        &mut self,
        f: impl FnOnce(&dyn Host, &mut CallContext<'_>) -> T,
    ) -> Option<T> {
        let host = self.shared.host?;
        let mut cx = CallContext::in_program(
            self.shared.limits,
            self.shared.deadline,
            &mut self.output,
            &self.shared.meter,
            Some(self.suspend),
        );
        Some(f(host, &mut cx))
    }

    /// Decodes JSON bytes into values, charging the memory budget.
    pub(crate) fn decode_json(&mut self, bytes: &[u8]) -> R<Value> {
        crate::json::decode_for(
            &self.shared.meter,
            bytes,
            self.shared.limits.max_json_depth,
            self.shared.deadline,
        )
        .map_err(Ctl::from)
    }
}

fn select_arity(arities: &[Arity], n: usize) -> Option<&Arity> {
    arities
        .iter()
        .find(|a| !a.variadic && a.n_fixed == n)
        .or_else(|| arities.iter().find(|a| a.variadic && n >= a.n_fixed))
}

pub(crate) fn at(e: Ctl, pos: Pos) -> Ctl {
    match e {
        Ctl::Err(mut b) => {
            b.set_pos_if_none(pos);
            Ctl::Err(b)
        }
        other => other,
    }
}
