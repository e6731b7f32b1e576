//! Session state: the definitions a program made, in a form a host can keep between
//! evaluations (in memory, or serialised to share with another replica) and restore into a
//! fresh [`Interpreter`](crate::Interpreter) before the next program of the same session.
//!
//! What is kept of each global, by one rule:
//!
//! * a value that holds no function (data: numbers, strings, collections, ...) is kept as it
//!   is, whatever form defined it;
//! * a value that holds a function (`(defn f ...)`, `(def g (partial + 1))`, a map of
//!   functions) is kept as the source text of the top-level form that last defined it —
//!   provided that form calls no host function (`tool/...`, an upstream call) and reads no
//!   `data/` key when it runs, and every global it names is kept too (a global it reads when
//!   it runs, rather than inside a function body, must have been defined before it). Restoring
//!   runs the form again.
//!
//! Anything else (a function defined inside another form, e.g. `(let [x 1] (defn f [] x))`; a
//! form calling `tool/call`) is listed as not kept, with a one-line reason for the agent.
//! Definitions are listed in the order they were last defined, which is also the order they
//! are restored in.

mod codec;
mod scan;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::globals::{DefMark, GlobalTable, HISTORY, is_user_name};
use crate::value::Value;

pub use codec::FORMAT;

/// The user's definitions, in definition order (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    vars: Vec<SessionVar>,
}

/// One definition: its name and what is kept of it.
#[derive(Clone, Debug)]
pub struct SessionVar {
    name: String,
    kept: Kept,
    /// The other globals a kept source names (restoring it needs them).
    uses: Vec<String>,
}

/// What a session keeps of a definition.
#[derive(Clone, Debug)]
pub enum Kept {
    /// A value without functions, restored as it is.
    Data(Value),
    /// A value holding functions, kept as the source text of the top-level form that defined
    /// it; restoring evaluates it again.
    Source(String),
    /// Not kept; why, in one line (for the agent).
    NotKept(String),
}

impl SessionVar {
    /// The global's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What is kept of it.
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    /// Whether it is kept (restored by [`Interpreter::restore_session`](crate::Interpreter::restore_session)).
    pub fn is_kept(&self) -> bool {
        !matches!(self.kept, Kept::NotKept(_))
    }
}

impl SessionState {
    /// Every definition, kept or not, in definition order.
    pub fn vars(&self) -> &[SessionVar] {
        &self.vars
    }

    /// The names of the kept definitions, in definition order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.vars
            .iter()
            .filter(|v| v.is_kept())
            .map(|v| v.name.as_str())
    }

    /// The definitions that are not kept, each with why.
    pub fn not_kept(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().filter_map(|v| match &v.kept {
            Kept::NotKept(why) => Some((v.name.as_str(), why.as_str())),
            _ => None,
        })
    }

    /// How many definitions are kept.
    pub fn len(&self) -> usize {
        self.names().count()
    }

    /// Whether no definition is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes the definitions called `names`; returns the names removed. A kept source that
    /// names a removed definition is not kept any more (it could not be restored without it).
    pub fn forget<S: AsRef<str>>(&mut self, names: &[S]) -> Vec<String> {
        let mut removed = Vec::new();
        self.vars.retain(|v| {
            let hit = names.iter().any(|n| n.as_ref() == v.name);
            if hit {
                removed.push(v.name.clone());
            }
            !hit
        });
        self.settle();
        removed
    }

    /// Removes every definition.
    pub fn clear(&mut self) {
        self.vars.clear();
    }

    /// The serialised form (versioned JSON, see [`FORMAT`]); only kept definitions are in it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        codec::encode(&self.vars, &mut out);
        out
    }

    /// The length of [`SessionState::encode`]'s bytes, counted without building them (for a
    /// host's size limit).
    pub fn encoded_len(&self) -> usize {
        let mut n = codec::Count(0);
        codec::encode(&self.vars, &mut n);
        n.0
    }

    /// Reads what [`SessionState::encode`] wrote. Other formats, other versions and damaged
    /// bytes are errors that say which; never panics.
    pub fn decode(bytes: &[u8]) -> Result<SessionState, SessionError> {
        let mut state = SessionState {
            vars: codec::decode(bytes)?,
        };
        state.settle();
        Ok(state)
    }

    /// Marks not kept every kept source that names a definition that is not kept, until none
    /// does (restoring it would fail).
    fn settle(&mut self) {
        loop {
            let kept: std::collections::HashSet<String> =
                self.names().map(str::to_string).collect();
            let mut changed = false;
            for v in &mut self.vars {
                if let Kept::Source(_) = v.kept
                    && let Some(u) = v.uses.iter().find(|u| !kept.contains(*u))
                {
                    v.kept = Kept::NotKept(format!("uses {u}, which is not kept"));
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }
}

/// Why bytes could not be read as session state.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// The bytes are not session state at all (not JSON, no `ptc_session` field).
    NotSessionState(String),
    /// Session state of another format version.
    Version(i64),
    /// Session state of this version whose content is damaged.
    Invalid(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::NotSessionState(why) => write!(f, "not session state: {why}"),
            SessionError::Version(v) => write!(
                f,
                "session state format {v}; this host reads format {FORMAT}: \
                 start a new session, or run a host that reads format {v}"
            ),
            SessionError::Invalid(why) => write!(f, "damaged session state: {why}"),
        }
    }
}

impl std::error::Error for SessionError {}

/// One global as the snapshot sees it.
pub(crate) struct Entry {
    pub name: Arc<str>,
    pub value: Value,
    pub kept: Kept,
    seq: u64,
    uses: Vec<String>,
}

/// The user's definitions in `table`/`values`, classified (see the module documentation).
pub(crate) fn snapshot(table: &GlobalTable, values: &[Option<Value>]) -> Snapshot {
    let mut rows: Vec<(Entry, Refs)> = Vec::new();
    for (name, &idx) in &table.names {
        if !is_user_name(name) {
            continue;
        }
        let Some(Some(value)) = values.get(idx) else {
            continue;
        };
        let mark: Option<&DefMark> = table.marks.get(idx).and_then(Option::as_ref);
        let (kept, refs) = match (scan::scan(value), mark.and_then(|m| m.source.as_ref())) {
            (scan::Scan::Data, _) => (Kept::Data(value.clone()), Vec::new()),
            (_, Some(src)) => match &src.blocker {
                None => (Kept::Source(src.text.to_string()), src.refs.clone()),
                Some(why) => (Kept::NotKept(why.clone()), Vec::new()),
            },
            (other, None) => (Kept::NotKept(other.why(value)), Vec::new()),
        };
        let uses: std::collections::BTreeSet<String> = refs
            .iter()
            .filter(|(r, _)| is_user_name(r) && r != name)
            .map(|(r, _)| r.to_string())
            .collect();
        let entry = Entry {
            name: name.clone(),
            value: value.clone(),
            kept,
            seq: mark.map_or(0, |m| m.seq),
            uses: uses.into_iter().collect(),
        };
        rows.push((entry, refs));
    }
    rows.sort_by(|(a, _), (b, _)| (a.seq, &a.name).cmp(&(b.seq, &b.name)));
    let (entries, refs): (Vec<Entry>, Vec<Refs>) = rows.into_iter().unzip();
    let mut snap = Snapshot { entries };
    snap.check_refs(&refs);
    snap
}

/// The globals a kept source names, each with whether it is read when the form runs.
type Refs = Vec<(Arc<str>, bool)>;

/// The classified definitions, in definition order.
pub(crate) struct Snapshot {
    pub entries: Vec<Entry>,
}

impl Snapshot {
    /// Marks not kept every kept source that names a global that is not kept, or reads one
    /// when it runs that was defined after it (running it again would see another value),
    /// until none does.
    fn check_refs(&mut self, refs: &[Refs]) {
        let has_value: std::collections::HashSet<Arc<str>> =
            self.entries.iter().map(|e| e.name.clone()).collect();
        loop {
            let kept: HashMap<Arc<str>, u64> = self
                .entries
                .iter()
                .filter(|e| !matches!(e.kept, Kept::NotKept(_)))
                .map(|e| (e.name.clone(), e.seq))
                .collect();
            let mut changed = false;
            for (e, refs) in self.entries.iter_mut().zip(refs) {
                if !matches!(e.kept, Kept::Source(_)) {
                    continue;
                }
                let why = refs.iter().find_map(|(r, eager)| {
                    let (r, eager) = (&**r, *eager);
                    if HISTORY.contains(&r) {
                        return eager.then(|| format!("uses {r} when defined"));
                    }
                    if !is_user_name(r) || (r == &*e.name && !eager) {
                        return None;
                    }
                    match kept.get(r) {
                        None if has_value.contains(r) => {
                            Some(format!("uses {r}, which is not kept"))
                        }
                        None => Some(format!("uses {r}, which has no value")),
                        Some(_) if r == &*e.name => Some("uses its own earlier value".into()),
                        Some(seq) if eager && *seq >= e.seq => Some(format!(
                            "uses the value of {r}, which was defined again after it"
                        )),
                        Some(_) => None,
                    }
                });
                if let Some(why) = why {
                    e.kept = Kept::NotKept(why);
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// The session state: each entry's name and what is kept.
    pub(crate) fn into_state(self) -> SessionState {
        SessionState {
            vars: self
                .entries
                .into_iter()
                .map(|e| SessionVar {
                    name: e.name.to_string(),
                    kept: e.kept,
                    uses: e.uses,
                })
                .collect(),
        }
    }
}

impl Entry {
    /// What `(session/vars)` says of this definition: `{:type "vector" :count 120 :kept true}`,
    /// `{:type "function" :kept true}`, `{:type "function" :kept false :why "..."}`.
    pub(crate) fn describe(&self) -> Value {
        let mut m = vec![(Value::keyword("type"), Value::str(self.value.type_name()))];
        let count = match &self.value {
            Value::Vector(v) => Some(v.len()),
            Value::Map(v) => Some(v.len()),
            Value::Set(v) => Some(v.0.len()),
            Value::Str(s) => Some(s.chars().count()),
            _ => None,
        };
        if let Some(n) = count {
            m.push((Value::keyword("count"), Value::Int(n as i64)));
        }
        match &self.kept {
            Kept::NotKept(why) => {
                m.push((Value::keyword("kept"), Value::Bool(false)));
                m.push((Value::keyword("why"), Value::str(why)));
            }
            _ => m.push((Value::keyword("kept"), Value::Bool(true))),
        }
        Value::map_from(m)
    }
}
