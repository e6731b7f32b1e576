//! The value model: immutable, `Arc`-shared (so values are `Send + Sync` and can cross `pmap`
//! workers), with copy-on-write updates through `Arc::make_mut` when a collection is uniquely owned.
//!
//! Maps are flat arrays up to [`SMALL_MAP`] entries (tool results are millions of small objects,
//! see docs/performance.md) and hash maps beyond; decoded JSON objects that repeat one another's
//! keys (arrays of records) share one key list ([`Shape`]). Dropping, equality and hashing never
//! recurse without a bound, so arbitrarily deep values cannot overflow the stack.

use std::cmp::Ordering;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use indexmap::{IndexMap, IndexSet};

use crate::function::Function;
use crate::meter::Charge;

pub(crate) mod access;
mod record;
mod text;

pub use record::Record;
pub use text::{INLINE, Text};

/// The shared storage of vectors, maps and sets: `triomphe::Arc`, an `Arc` without a weak
/// count (nothing holds a collection weakly), so each collection's block is 8 bytes smaller.
pub type CollArc<T> = triomphe::Arc<T>;

const _: () = assert!(std::mem::size_of::<Value>() == 16);

/// Maps with at most this many entries are stored as a flat array with linear lookup.
pub const SMALL_MAP: usize = 12;

/// Recursion bound for equality, hashing and ordering of nested values.
pub(crate) const MAX_VALUE_DEPTH: usize = 2_000;

/// A fast non-cryptographic hasher (FxHash); keys come from the program or its tools, and
/// hash-flooding is bounded by the memory and time limits anyway.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            self.add(u64::from_le_bytes(a));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(a));
        }
        self.add(bytes.len() as u64);
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// Hash builder for [`FxHasher`].
pub type FxBuild = BuildHasherDefault<FxHasher>;

/// A PTC-Lisp value: 16 bytes, a one-byte tag and its payload (text inline up to
/// [`INLINE`] bytes, numbers, or one pointer at offset 8).
#[derive(Default)]
#[repr(u8)]
pub enum Value {
    /// `nil`
    #[default]
    Nil,
    /// `true` / `false`
    Bool(bool),
    /// 64-bit integer; overflow is an `arithmetic_error`.
    Int(i64),
    /// IEEE double.
    Float(f64),
    /// A string (chars are one-character strings).
    Str(Text),
    /// A keyword, stored without the leading colon (`"a"` or `"ns/a"`).
    Keyword(Text),
    /// A symbol (a value only when quoted), e.g. `observatory/list-traces`.
    Symbol(Text),
    /// A vector; every sequence is an eager vector.
    Vector(CollArc<Charged<Items>>),
    /// A map.
    Map(CollArc<Charged<MapData>>),
    /// A set.
    Set(CollArc<Charged<SetData>>),
    /// A function: builtin, closure, combinator or host function.
    Func(Arc<Function>),
    /// A compiled regular expression.
    Regex(Arc<regex::Regex>),
    /// A var reference `#'x`, what `def` returns.
    Var(Text),
}

// A bitwise copy after taking one more count on whatever the value shares: two word moves,
// where a clone built variant by variant copies the small variants with partial stores that
// stall store forwarding on the evaluator's hottest path.
#[allow(unsafe_code)]
impl Clone for Value {
    #[inline]
    fn clone(&self) -> Self {
        match self {
            Value::Nil | Value::Bool(_) | Value::Int(_) | Value::Float(_) => {}
            Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) | Value::Var(s) => s.retain(),
            Value::Vector(v) => std::mem::forget(CollArc::clone(v)),
            Value::Map(m) => std::mem::forget(CollArc::clone(m)),
            Value::Set(s) => std::mem::forget(CollArc::clone(s)),
            Value::Func(f) => std::mem::forget(Arc::clone(f)),
            Value::Regex(r) => std::mem::forget(Arc::clone(r)),
        }
        // SAFETY: everything the value owns now has a count for the copy.
        unsafe { std::ptr::read(self) }
    }
}

/// A collection's storage with what the program was charged for it, credited back to the
/// program's meter when the storage is freed (the last reference dropped), so the memory budget
/// bounds what a program holds. Storage nobody paid for alone (a literal, a decoded tool result,
/// a copy) carries an empty charge.
#[derive(Default)]
pub struct Charged<T> {
    data: T,
    charge: Charge,
}

impl<T> Charged<T> {
    /// Storage paid for by `charge`.
    pub(crate) fn new(data: T, charge: Charge) -> Self {
        Charged { data, charge }
    }

    /// The storage itself, to live on in another value. Its charge comes back now, so the value
    /// it lives on in must be charged for it ([`Ctx::vector`](crate::eval::Ctx::vector)).
    pub(crate) fn into_inner(self) -> T {
        self.data
    }

    /// Pays for the storage with `charge` (after it grew); the charge it had comes back.
    pub(crate) fn recharge(&mut self, charge: Charge) {
        self.charge = charge;
    }
}

impl<T> From<T> for Charged<T> {
    fn from(data: T) -> Self {
        Charged::new(data, Charge::default())
    }
}

// A copy (`Arc::make_mut` of shared storage) is storage nobody has paid for: it never carries
// the original's charge, which would then be credited twice.
impl<T: Clone> Clone for Charged<T> {
    fn clone(&self) -> Self {
        Charged::from(self.data.clone())
    }
}

impl<T> Deref for Charged<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T> DerefMut for Charged<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.data
    }
}

/// The element storage of a vector. Dropping it is iterative.
#[derive(Clone, Default)]
pub struct Items(pub Vec<Value>);

impl Deref for Items {
    type Target = Vec<Value>;
    fn deref(&self) -> &Vec<Value> {
        &self.0
    }
}
impl DerefMut for Items {
    fn deref_mut(&mut self) -> &mut Vec<Value> {
        &mut self.0
    }
}

fn is_container(v: &Value) -> bool {
    matches!(
        v,
        Value::Vector(_) | Value::Map(_) | Value::Set(_) | Value::Func(_)
    )
}

/// Drops values without recursion, however deeply collections and closures nest.
pub(crate) fn drop_values(mut values: Vec<Value>) {
    if values.iter().any(is_container) {
        drain_into(&mut values);
    }
}

/// Moves the children of uniquely owned containers onto `stack` so they drop one level at a time.
/// Children that hold nothing are dropped at once: the stack grows only by containers (freeing a
/// vector of pairs does not allocate a second vector as large as the first).
fn drain_into(stack: &mut Vec<Value>) {
    while let Some(v) = stack.pop() {
        match v {
            Value::Vector(a) => {
                if let Some(mut items) = unshare(a) {
                    stack.extend(items.0.drain(..).filter(is_container));
                }
            }
            Value::Map(a) => {
                if let Some(mut m) = unshare(a) {
                    m.drain_values(stack);
                }
            }
            Value::Set(a) => {
                if let Some(mut s) = unshare(a) {
                    stack.extend(std::mem::take(&mut s.0).into_iter().filter(is_container));
                }
            }
            Value::Func(a) => {
                if let Some(mut f) = Arc::into_inner(a) {
                    match &mut f {
                        Function::Closure(c) => {
                            stack.extend(c.captures.drain(..).filter(is_container))
                        }
                        Function::Native(n) => {
                            stack.extend(n.captured.drain(..).filter(is_container))
                        }
                        Function::Builtin(_) | Function::Host { .. } => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// The storage of the last reference to it, else `None` (the reference dropped): exactly one of
/// the references dropped at once gets it.
pub(crate) fn unshare<T>(a: CollArc<T>) -> Option<T> {
    CollArc::into_unique(a).map(triomphe::UniqueArc::into_inner)
}

impl Drop for Items {
    fn drop(&mut self) {
        if self.0.iter().any(is_container) {
            let mut stack = std::mem::take(&mut self.0);
            drain_into(&mut stack);
        }
    }
}

/// The keys of small maps decoded from JSON objects that spell the same keys in the same order:
/// kept once, shared by every such map ([`MapData::Record`]). Distinct, at most [`SMALL_MAP`].
pub struct Shape(Box<[Value]>);

impl Shape {
    /// A shape of distinct `keys` (at most [`SMALL_MAP`]; the caller makes sure).
    pub(crate) fn new(keys: Box<[Value]>) -> Self {
        debug_assert!(keys.len() <= SMALL_MAP);
        Shape(keys)
    }

    /// The keys, in order.
    pub fn keys(&self) -> &[Value] {
        &self.0
    }

    fn position(&self, k: &Value) -> Option<usize> {
        self.0.iter().position(|kk| kk.fast_eq(k))
    }
}

/// Map storage: a flat array when small, an insertion-ordered hash map when large.
/// Sequence views (keys, vals, seq, printing) are sorted by key, never by insertion order.
#[derive(Clone)]
pub enum MapData {
    /// Up to [`SMALL_MAP`] entries, linear lookup.
    Small(Vec<(Value, Value)>),
    /// A small map whose keys are a shared [`Shape`]: the values, in the shape's key order. A
    /// decoded record costs one value per entry instead of two; adding or removing a key turns
    /// it into `Small`.
    Record(Record),
    /// Hash map (boxed so that `MapData` stays three words wide).
    Large(Box<IndexMap<Value, Value, FxBuild>>),
}

impl Default for MapData {
    fn default() -> Self {
        MapData::Small(Vec::new())
    }
}

impl Drop for MapData {
    fn drop(&mut self) {
        let nested = match self {
            MapData::Small(v) => v.iter().any(|(k, v)| is_container(k) || is_container(v)),
            // Shape keys come from JSON: strings.
            MapData::Record(r) => r.values().iter().any(is_container),
            MapData::Large(m) => m.iter().any(|(k, v)| is_container(k) || is_container(v)),
        };
        if nested {
            let mut stack = Vec::new();
            self.drain_values(&mut stack);
            drain_into(&mut stack);
        }
    }
}

impl MapData {
    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        if n <= SMALL_MAP {
            MapData::Small(Vec::with_capacity(n))
        } else {
            MapData::Large(Box::new(IndexMap::with_capacity_and_hasher(
                n,
                FxBuild::default(),
            )))
        }
    }

    /// Entries it holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        match self {
            MapData::Small(v) => v.capacity(),
            MapData::Record(r) => r.values().len(),
            MapData::Large(m) => m.capacity(),
        }
    }

    /// Moves the entries into storage with room for `n` ([`MapData::with_capacity`]).
    pub(crate) fn regrow(&mut self, n: usize) {
        if let MapData::Large(m) = self
            && n > SMALL_MAP
        {
            m.reserve(n.saturating_sub(m.len()));
            return;
        }
        let mut grown = MapData::with_capacity(n);
        self.take_entries(|k, x| grown.insert(k, x));
        *self = grown;
    }

    /// Moves every entry out to `each`, leaving the map empty.
    fn take_entries(&mut self, mut each: impl FnMut(Value, Value)) {
        match self {
            MapData::Small(v) => std::mem::take(v).into_iter().for_each(|(k, x)| each(k, x)),
            MapData::Record(r) => {
                let shape = Arc::clone(r.shape());
                let values = r.values_mut().iter_mut().map(std::mem::take);
                shape
                    .keys()
                    .iter()
                    .cloned()
                    .zip(values)
                    .for_each(|(k, x)| each(k, x));
                *self = MapData::default();
            }
            MapData::Large(m) => (*std::mem::take(m))
                .into_iter()
                .for_each(|(k, x)| each(k, x)),
        }
    }

    /// Moves the keys and values that are containers onto `stack` (for [`drain_into`]); the
    /// rest are dropped.
    fn drain_values(&mut self, stack: &mut Vec<Value>) {
        // A record's keys are its shape's strings: only its values can hold anything.
        if let MapData::Record(r) = self {
            stack.extend(
                r.values_mut()
                    .iter_mut()
                    .map(std::mem::take)
                    .filter(is_container),
            );
            return;
        }
        self.take_entries(|k, x| stack.extend([k, x].into_iter().filter(is_container)));
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            MapData::Small(v) => v.len(),
            MapData::Record(r) => r.values().len(),
            MapData::Large(m) => m.len(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Exact-key lookup.
    pub fn get(&self, k: &Value) -> Option<&Value> {
        match self {
            MapData::Small(v) => {
                // Pointer-equal interned keys are the common case for decoded JSON.
                for (kk, vv) in v {
                    if kk.fast_eq(k) {
                        return Some(vv);
                    }
                }
                None
            }
            MapData::Record(r) => r.shape().position(k).map(|i| &r.values()[i]),
            MapData::Large(m) => m.get(k),
        }
    }

    /// Exact-key lookup for update in place.
    pub fn get_mut(&mut self, k: &Value) -> Option<&mut Value> {
        match self {
            MapData::Small(v) => v.iter_mut().find(|(kk, _)| kk.fast_eq(k)).map(|(_, vv)| vv),
            MapData::Record(r) => {
                let i = r.shape().position(k)?;
                Some(&mut r.values_mut()[i])
            }
            MapData::Large(m) => m.get_mut(k),
        }
    }

    /// The entries of a small map (`Small` or `Record`), in storage order; `None` when large.
    pub(crate) fn small_entries(&self) -> Option<SmallEntries<'_>> {
        match self {
            MapData::Small(v) => Some(SmallEntries::Pairs(v.iter())),
            MapData::Record(r) => Some(SmallEntries::Record(r.keys().iter().zip(r.values()))),
            MapData::Large(_) => None,
        }
    }

    /// The pairs of a small map, so a key can be added or removed (a `Record` becomes `Small`
    /// first); `None` when large.
    fn pairs_mut(&mut self) -> Option<&mut Vec<(Value, Value)>> {
        if let MapData::Record(r) = self {
            let mut pairs = Vec::with_capacity(r.values().len());
            self.take_entries(|k, x| pairs.push((k, x)));
            *self = MapData::Small(pairs);
        }
        match self {
            MapData::Small(v) => Some(v),
            _ => None,
        }
    }

    /// Lookup of a string-like key by name: a keyword or string key equal to `name`.
    pub fn get_named(&self, name: &str, keyword: bool) -> Option<&Value> {
        match self.small_entries() {
            Some(mut entries) => entries.find_map(|(kk, vv)| match kk {
                Value::Keyword(s) if keyword && &**s == name => Some(vv),
                Value::Str(s) if !keyword && &**s == name => Some(vv),
                _ => None,
            }),
            None => {
                let key = if keyword {
                    Value::Keyword(Text::new(name))
                } else {
                    Value::Str(Text::new(name))
                };
                self.get(&key)
            }
        }
    }

    /// True if the exact key is present.
    pub fn contains_key(&self, k: &Value) -> bool {
        self.get(k).is_some()
    }

    /// Inserts or replaces.
    pub fn insert(&mut self, k: Value, val: Value) {
        if let Some(slot) = self.get_mut(&k) {
            *slot = val;
            return;
        }
        match self.pairs_mut() {
            Some(v) if v.len() < SMALL_MAP => v.push((k, val)),
            Some(v) => {
                let pairs = std::mem::take(v);
                let mut m: IndexMap<Value, Value, FxBuild> =
                    IndexMap::with_capacity_and_hasher(pairs.len() * 2, FxBuild::default());
                m.extend(pairs);
                m.insert(k, val);
                *self = MapData::Large(Box::new(m));
            }
            None => {
                if let MapData::Large(m) = self {
                    m.insert(k, val);
                }
            }
        }
    }

    /// Removes a key.
    pub fn remove(&mut self, k: &Value) {
        if !self.contains_key(k) {
            return;
        }
        match self.pairs_mut() {
            Some(v) => v.retain(|(kk, _)| !kk.fast_eq(k)),
            None => {
                if let MapData::Large(m) = self {
                    m.shift_remove(k);
                }
            }
        }
    }

    /// Entries in storage order (not sorted).
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&Value, &Value)> + '_> {
        match self.small_entries() {
            Some(entries) => Box::new(entries),
            None => match self {
                MapData::Large(m) => Box::new(m.iter()),
                _ => Box::new(std::iter::empty()),
            },
        }
    }

    /// Entries sorted by key (the order every sequence view of a map uses).
    pub fn sorted(&self) -> Vec<(&Value, &Value)> {
        let v: Vec<(&Value, &Value)> = self.iter().collect();
        stable_sort_by(v, |a, b| compare(a.0, b.0))
    }
}

/// The entries of a small map ([`MapData::small_entries`]).
pub(crate) enum SmallEntries<'a> {
    Pairs(std::slice::Iter<'a, (Value, Value)>),
    Record(std::iter::Zip<std::slice::Iter<'a, Value>, std::slice::Iter<'a, Value>>),
}

impl<'a> Iterator for SmallEntries<'a> {
    type Item = (&'a Value, &'a Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            SmallEntries::Pairs(it) => it.next().map(|(k, v)| (k, v)),
            SmallEntries::Record(it) => it.next(),
        }
    }
}

/// Set storage (insertion-ordered hash set); printed and iterated in sorted order.
#[derive(Clone, Default)]
pub struct SetData(pub IndexSet<Value, FxBuild>);

impl Drop for SetData {
    fn drop(&mut self) {
        if self.0.iter().any(is_container) {
            let mut stack: Vec<Value> = std::mem::take(&mut self.0).into_iter().collect();
            drain_into(&mut stack);
        }
    }
}

impl SetData {
    /// A set of `values` (duplicates dropped), with room for exactly as many.
    pub(crate) fn from_values(
        values: impl IntoIterator<Item = Value, IntoIter: ExactSizeIterator>,
    ) -> Self {
        let values = values.into_iter();
        let mut s = IndexSet::with_capacity_and_hasher(values.len(), FxBuild::default());
        s.extend(values);
        SetData(s)
    }

    /// Elements sorted (the order every sequence view of a set uses).
    pub fn sorted(&self) -> Vec<&Value> {
        let v: Vec<&Value> = self.0.iter().collect();
        stable_sort_by(v, |a, b| compare(a, b))
    }
}

impl Value {
    /// Approximate bytes held by this value and everything it references (shared parts counted
    /// each time they are reachable), or a size past `cap` once it is known to pass it: shared
    /// structure can make the reachable size astronomical, and the walk stops there. Walks with
    /// an explicit stack, so depth does not matter.
    pub fn approx_size(&self, cap: u64) -> u64 {
        let word = std::mem::size_of::<Value>() as u64;
        let mut total = 0u64;
        let mut stack: Vec<&Value> = vec![self];
        while let Some(v) = stack.pop() {
            if total > cap {
                return total;
            }
            total += word;
            match v {
                Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) | Value::Var(s) => {
                    total += crate::footprint::string(s.len())
                }
                Value::Vector(items) => {
                    total += 32;
                    stack.extend(items.iter());
                }
                Value::Map(m) => {
                    total += 32;
                    for (k, x) in m.iter() {
                        stack.push(k);
                        stack.push(x);
                    }
                }
                Value::Set(set) => {
                    total += 32;
                    stack.extend(set.0.iter());
                }
                _ => {}
            }
        }
        total
    }

    /// A string value.
    pub fn str(s: &str) -> Value {
        Value::Str(Text::new(s))
    }
    /// A keyword value (name without colon).
    pub fn keyword(s: &str) -> Value {
        Value::Keyword(Text::new(s))
    }
    /// A symbol value.
    pub fn symbol(s: &str) -> Value {
        Value::Symbol(Text::new(s))
    }
    /// A vector value.
    pub fn vector(v: Vec<Value>) -> Value {
        Value::Vector(CollArc::new(Items(v).into()))
    }
    /// A map value from entries (later duplicates win).
    pub fn map_from(entries: Vec<(Value, Value)>) -> Value {
        let mut m = MapData::with_capacity(entries.len());
        for (k, v) in entries {
            m.insert(k, v);
        }
        Value::Map(CollArc::new(m.into()))
    }
    /// A set value.
    pub fn set_from(items: Vec<Value>) -> Value {
        Value::Set(CollArc::new(SetData::from_values(items).into()))
    }

    /// Clojure truthiness: only `nil` and `false` are falsy.
    #[inline]
    pub fn truthy(&self) -> bool {
        !matches!(self, Value::Nil | Value::Bool(false))
    }

    /// True for `nil`.
    #[inline]
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// A short type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Keyword(_) => "keyword",
            Value::Symbol(_) => "symbol",
            Value::Vector(_) => "vector",
            Value::Map(_) => "map",
            Value::Set(_) => "set",
            Value::Func(_) => "function",
            Value::Regex(_) => "regex",
            Value::Var(_) => "var",
        }
    }

    /// Equality with a pointer fast path (used for map keys).
    #[inline]
    pub(crate) fn fast_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Keyword(a), Value::Keyword(b)) | (Value::Str(a), Value::Str(b)) => a == b,
            _ => equal(self, other),
        }
    }
}

/// Clojure `=` with the PTC divergence that `(= 1 1.0)` is true. Walks nested vectors and maps
/// with an explicit work list, so any depth compares correctly without using the native stack.
pub fn equal(a: &Value, b: &Value) -> bool {
    // Allocates only when a collection has elements to compare: scalar `=` stays cheap.
    let mut pending: Vec<(&Value, &Value)> = Vec::new();
    let (mut a, mut b) = (a, b);
    loop {
        if !equal_shallow(a, b, &mut pending) {
            return false;
        }
        match pending.pop() {
            Some((x, y)) => (a, b) = (x, y),
            None => return true,
        }
    }
}

/// Compares `a` and `b` at the top level; queues the element pairs of two collections.
fn equal_shallow<'v>(
    a: &'v Value,
    b: &'v Value,
    pending: &mut Vec<(&'v Value, &'v Value)>,
) -> bool {
    use Value::*;
    match (a, b) {
        (Nil, Nil) => true,
        (Bool(x), Bool(y)) => x == y,
        (Int(x), Int(y)) => x == y,
        (Float(x), Float(y)) => x == y,
        (Int(x), Float(y)) | (Float(y), Int(x)) => (*x as f64) == *y,
        (Str(x), Str(y)) => x == y,
        (Keyword(x), Keyword(y)) => x == y,
        (Symbol(x), Symbol(y)) => x == y,
        (Var(x), Var(y)) => x == y,
        (Regex(x), Regex(y)) => Arc::ptr_eq(x, y),
        (Func(x), Func(y)) => Arc::ptr_eq(x, y),
        (Vector(x), Vector(y)) => {
            if CollArc::ptr_eq(x, y) {
                return true;
            }
            if x.len() != y.len() {
                return false;
            }
            pending.extend(x.iter().zip(y.iter()));
            true
        }
        (Map(x), Map(y)) => {
            if CollArc::ptr_eq(x, y) {
                return true;
            }
            if x.len() != y.len() {
                return false;
            }
            for (k, v) in x.iter() {
                match y.get(k) {
                    Some(w) => pending.push((v, w)),
                    None => return false,
                }
            }
            true
        }
        // Set members are compared through their hashes and shallow equality.
        (Set(x), Set(y)) => {
            CollArc::ptr_eq(x, y) || (x.0.len() == y.0.len() && x.0.iter().all(|k| y.0.contains(k)))
        }
        _ => false,
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        equal(self, other)
    }
}
impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_depth(self, state, 0);
    }
}

fn hash_depth<H: Hasher>(v: &Value, state: &mut H, depth: usize) {
    use Value::*;
    match v {
        Nil => state.write_u8(0),
        Bool(b) => state.write_u8(if *b { 2 } else { 1 }),
        Int(i) => {
            state.write_u8(3);
            state.write_u64(*i as u64);
        }
        Float(f) => {
            // Integral floats hash like the equal integer because (= 1 1.0).
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                state.write_u8(3);
                state.write_u64(*f as i64 as u64);
            } else {
                state.write_u8(4);
                state.write_u64(f.to_bits());
            }
        }
        Str(s) => {
            state.write_u8(5);
            state.write(s.as_bytes());
        }
        Keyword(s) => {
            state.write_u8(6);
            state.write(s.as_bytes());
        }
        Symbol(s) => {
            state.write_u8(7);
            state.write(s.as_bytes());
        }
        Var(s) => {
            state.write_u8(8);
            state.write(s.as_bytes());
        }
        Vector(items) => {
            state.write_u8(9);
            state.write_usize(items.len());
            if depth < 32 {
                for x in items.iter() {
                    hash_depth(x, state, depth + 1);
                }
            }
        }
        Map(m) => {
            // Order-independent: sum of entry hashes.
            state.write_u8(10);
            state.write_usize(m.len());
            if depth < 32 {
                let mut acc: u64 = 0;
                for (k, x) in m.iter() {
                    let mut h = FxHasher::default();
                    hash_depth(k, &mut h, depth + 1);
                    hash_depth(x, &mut h, depth + 1);
                    acc = acc.wrapping_add(h.finish());
                }
                state.write_u64(acc);
            }
        }
        Set(s) => {
            state.write_u8(11);
            state.write_usize(s.0.len());
            if depth < 32 {
                let mut acc: u64 = 0;
                for k in s.0.iter() {
                    let mut h = FxHasher::default();
                    hash_depth(k, &mut h, depth + 1);
                    acc = acc.wrapping_add(h.finish());
                }
                state.write_u64(acc);
            }
        }
        Func(f) => {
            state.write_u8(12);
            state.write_usize(Arc::as_ptr(f) as *const u8 as usize);
        }
        Regex(r) => {
            state.write_u8(13);
            state.write(r.as_str().as_bytes());
        }
    }
}

/// Clojure's order for keywords and symbols: unqualified names first, then by namespace, then name.
pub(crate) fn cmp_qualified(x: &str, y: &str) -> Ordering {
    let split = |s: &str| match s.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() => (Some(ns.to_string()), n.to_string()),
        _ => (None, s.to_string()),
    };
    let (xn, xs) = split(x);
    let (yn, ys) = split(y);
    xn.cmp(&yn).then_with(|| xs.cmp(&ys))
}

/// Java's `String.compareTo`: the difference of the first differing UTF-16 code units, else of
/// the lengths (what Clojure's `compare` returns for strings).
pub(crate) fn java_compare_str(x: &str, y: &str) -> i64 {
    let mut a = x.encode_utf16();
    let mut b = y.encode_utf16();
    loop {
        match (a.next(), b.next()) {
            (Some(p), Some(q)) if p != q => return p as i64 - q as i64,
            (Some(_), Some(_)) => {}
            _ => return x.encode_utf16().count() as i64 - y.encode_utf16().count() as i64,
        }
    }
}

fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Nil => 0,
        Value::Bool(_) => 1,
        Value::Int(_) | Value::Float(_) => 2,
        Value::Str(_) => 3,
        Value::Keyword(_) => 4,
        Value::Symbol(_) => 5,
        Value::Vector(_) => 6,
        Value::Map(_) => 7,
        Value::Set(_) => 8,
        Value::Var(_) => 9,
        Value::Regex(_) => 10,
        Value::Func(_) => 11,
    }
}

/// Numeric comparison that treats NaN as equal to avoid panics in sorts.
pub(crate) fn cmp_f64(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Total order used by `compare`, `sort`, `sort-by` and map/set printing: Clojure's order within
/// a type (vectors by length first), `nil` first, and a fixed order between types.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    cmp_depth(a, b, 0)
}

fn cmp_depth(a: &Value, b: &Value, depth: usize) -> Ordering {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => x.cmp(y),
        (Int(x), Float(y)) => cmp_f64(*x as f64, *y),
        (Float(x), Int(y)) => cmp_f64(*x, *y as f64),
        (Float(x), Float(y)) => cmp_f64(*x, *y),
        (Str(x), Str(y)) => x.cmp(y),
        (Keyword(x), Keyword(y)) | (Symbol(x), Symbol(y)) | (Var(x), Var(y)) => cmp_qualified(x, y),
        (Bool(x), Bool(y)) => x.cmp(y),
        (Vector(x), Vector(y)) => {
            if depth > MAX_VALUE_DEPTH {
                return Ordering::Equal;
            }
            x.len().cmp(&y.len()).then_with(|| {
                for (p, q) in x.iter().zip(y.iter()) {
                    let o = cmp_depth(p, q, depth + 1);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            })
        }
        (Map(x), Map(y)) => x.len().cmp(&y.len()),
        (Set(x), Set(y)) => x.0.len().cmp(&y.0.len()),
        (Regex(x), Regex(y)) => x.as_str().cmp(y.as_str()),
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

/// Order used by `<`, `>`, `<=`, `>=`: numbers compare numerically, any comparison with NaN
/// is false, and mixed types follow the reference's term order (numbers before everything).
/// Returns `None` when the comparison must be false (NaN).
pub(crate) fn ordering_for_lt(a: &Value, b: &Value) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Int(x), Float(y)) => (*x as f64).partial_cmp(y),
        (Float(x), Int(y)) => x.partial_cmp(&(*y as f64)),
        (Float(x), Float(y)) => x.partial_cmp(y),
        _ => {
            let ra = lt_rank(a);
            let rb = lt_rank(b);
            if ra != rb {
                Some(ra.cmp(&rb))
            } else {
                Some(compare(a, b))
            }
        }
    }
}

fn lt_rank(v: &Value) -> u8 {
    // Mirrors the BEAM term order of the reference: number < atom < fun < map < list < string.
    match v {
        Value::Int(_) | Value::Float(_) => 0,
        Value::Nil | Value::Bool(_) | Value::Keyword(_) | Value::Symbol(_) | Value::Var(_) => 1,
        Value::Func(_) | Value::Regex(_) => 2,
        Value::Map(_) => 3,
        Value::Set(_) => 4,
        Value::Vector(_) => 5,
        Value::Str(_) => 6,
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// A stable merge sort that never panics, whatever the comparator returns (user comparators
/// need not be consistent, and `std`'s sorts may panic on an inconsistent order).
pub(crate) fn stable_sort_by<T>(v: Vec<T>, mut cmp: impl FnMut(&T, &T) -> Ordering) -> Vec<T> {
    let n = v.len();
    if n < 2 {
        return v;
    }
    let mut idx: Vec<usize> = (0..n).collect();
    let mut buf: Vec<usize> = vec![0; n];
    let mut width = 1;
    while width < n {
        let mut i = 0;
        while i < n {
            let mid = (i + width).min(n);
            let hi = (i + 2 * width).min(n);
            let (mut a, mut b, mut k) = (i, mid, i);
            while a < mid && b < hi {
                if cmp(&v[idx[b]], &v[idx[a]]) == Ordering::Less {
                    buf[k] = idx[b];
                    b += 1;
                } else {
                    buf[k] = idx[a];
                    a += 1;
                }
                k += 1;
            }
            while a < mid {
                buf[k] = idx[a];
                a += 1;
                k += 1;
            }
            while b < hi {
                buf[k] = idx[b];
                b += 1;
                k += 1;
            }
            i += 2 * width;
        }
        std::mem::swap(&mut idx, &mut buf);
        width *= 2;
    }
    let mut slots: Vec<Option<T>> = v.into_iter().map(Some).collect();
    idx.into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(m: &MapData) -> Vec<(String, String)> {
        m.sorted()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn text_takes_room_beyond_its_value_only_when_it_is_too_long_to_be_inline() {
        let inline = "x".repeat(INLINE);
        assert_eq!(Value::str(&inline).approx_size(u64::MAX), 16);
        assert_eq!(Value::keyword(&inline).approx_size(u64::MAX), 16);
        let shared = "x".repeat(INLINE + 1);
        assert_eq!(Value::str(&shared).approx_size(u64::MAX), 16 + 24 + 15);
        assert_eq!(
            Value::vector(vec![Value::str(&shared), Value::Int(1)]).approx_size(u64::MAX),
            16 + 32 + (16 + 24 + 15) + 16
        );
        assert_eq!(
            Value::map_from(vec![(Value::str(&shared), Value::Int(1))]).approx_size(u64::MAX),
            16 + 32 + (16 + 24 + 15) + 16
        );
        assert_eq!(
            Value::set_from(vec![Value::str(&shared), Value::Int(1)]).approx_size(u64::MAX),
            16 + 32 + (16 + 24 + 15) + 16
        );
    }

    /// Shared structure reachable 64^8 times is not walked: the size stops just past the cap.
    #[test]
    fn the_size_of_hugely_shared_structure_stops_past_its_cap() {
        let mut v = Value::vector((0..64).map(Value::Int).collect());
        for _ in 0..8 {
            v = Value::vector(vec![v; 64]);
        }
        let size = v.approx_size(1 << 20);
        assert!(size > 1 << 20 && size <= (1 << 20) + 48, "{size}");
        // A value whose walk reaches exactly its cap is walked on: its size passes the cap.
        let pair = Value::vector(vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(pair.approx_size(u64::MAX), 80);
        assert_eq!(pair.approx_size(64), 80);
    }

    /// A collection holding another's members and more is not equal to it, either way round.
    #[test]
    fn collections_differ_when_one_holds_more() {
        fn ints(n: i64) -> Vec<Value> {
            (1..=n).map(Value::Int).collect()
        }
        let kinds: [fn(i64) -> Value; 3] = [
            |n| Value::vector(ints(n)),
            |n| Value::set_from(ints(n)),
            |n| Value::map_from(ints(n).into_iter().map(|k| (k, Value::Nil)).collect()),
        ];
        for kind in kinds {
            assert_eq!(kind(2), kind(2));
            assert_ne!(kind(2), kind(3));
            assert_ne!(kind(3), kind(2));
        }
    }

    #[test]
    fn a_map_regrown_has_the_room_asked_and_the_same_entries() {
        let shape = Arc::new(Shape::new(vec![Value::str("a"), Value::str("b")].into()));
        let record = MapData::Record(Record::new(
            shape,
            vec![Value::Int(1), Value::Int(2)].into(),
        ));
        let mut small = MapData::with_capacity(2);
        small.insert(Value::Int(1), Value::Int(2));
        let mut large = MapData::with_capacity(SMALL_MAP + 1);
        for i in 0..=SMALL_MAP as i64 {
            large.insert(Value::Int(i), Value::Int(i));
        }
        for (mut m, room) in [(record, 8), (small, SMALL_MAP), (large, 100)] {
            let before = entries(&m);
            assert!(m.capacity() < room);
            m.regrow(room);
            assert!(m.capacity() >= room, "{} < {room}", m.capacity());
            assert_eq!(entries(&m), before);
        }
        // Past the small size a map becomes a hash table, which then grows in place: its entries
        // are not copied into a new one.
        let mut m = MapData::with_capacity(SMALL_MAP);
        m.regrow(SMALL_MAP + 1);
        let table = |m: &MapData| match m {
            MapData::Large(t) => &**t as *const IndexMap<Value, Value, FxBuild>,
            _ => std::ptr::null(),
        };
        let before = table(&m);
        assert!(!before.is_null(), "a hash table");
        m.regrow(1000);
        assert!(m.capacity() >= 1000);
        assert_eq!(table(&m), before, "the same table, grown");
    }
}
