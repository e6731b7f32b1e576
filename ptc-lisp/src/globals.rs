//! The program's globals (`def`, `defn`, ...): the names the analyzer resolves to slot indices,
//! the values in those slots, and what last defined each slot — which is what a session keeps
//! between evaluations (see [`crate::session`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::value::Value;

/// The REPL history globals every interpreter defines; never part of a session.
pub(crate) const HISTORY: [&str; 3] = ["*1", "*2", "*3"];

/// Globals as they rest between evaluations. During an evaluation the values live in the
/// evaluation context (the hot path reads them) and the table beside them.
#[derive(Default)]
pub(crate) struct Globals {
    pub table: GlobalTable,
    pub values: Vec<Option<Value>>,
}

/// Names to slots, and what defined each slot last.
#[derive(Default)]
pub(crate) struct GlobalTable {
    pub names: HashMap<Arc<str>, usize>,
    /// Slots handed out so far. Indices are baked into analyzed nodes, so the slot of a name
    /// that is forgotten is never handed out again.
    pub slots: usize,
    /// Per slot, its latest definition (`None`: declared only, or forgotten).
    pub marks: Vec<Option<DefMark>>,
    next_seq: u64,
}

/// One definition of a global: when it happened and, for a whole top-level form, that form.
#[derive(Clone)]
pub(crate) struct DefMark {
    /// Increases with every definition of the interpreter: orders definitions.
    pub seq: u64,
    pub source: Option<Arc<DefSource>>,
}

/// A top-level form that is a definition (`(defn f ...)`, `(def x ...)`), as a session keeps it:
/// its text, and what running it again would depend on.
pub(crate) struct DefSource {
    pub text: Arc<str>,
    /// The globals the form names, each with whether it is read when the form runs (`true`)
    /// or only inside a function body it creates (`false`, read when that function is called).
    pub refs: Vec<(Arc<str>, bool)>,
    /// Why running the form again would not be the same definition (a host call, a read of
    /// the request context); `None` when it would.
    pub blocker: Option<String>,
}

/// What the analyzer noted while analyzing one top-level form.
#[derive(Default)]
pub(crate) struct FormRecord {
    pub refs: Vec<(Arc<str>, bool)>,
    /// Host functions the form names (`tool/call`, upstream-call sugar included).
    pub host_calls: Vec<String>,
    /// `data/<key>` reads made when the form runs (outside any function body).
    pub data_reads: Vec<String>,
}

impl FormRecord {
    /// The form `text` this record was made for, as a kept definition.
    pub(crate) fn into_source(self, text: Arc<str>) -> DefSource {
        let blocker = if let Some(h) = self.host_calls.first() {
            Some(format!(
                "calls the host function {h}: running its definition again could act outside"
            ))
        } else {
            self.data_reads.first().map(|d| {
                format!("reads {d} when defined, and the request context changes between calls")
            })
        };
        let mut refs = self.refs;
        refs.sort();
        refs.dedup();
        DefSource {
            text,
            refs,
            blocker,
        }
    }
}

impl GlobalTable {
    /// The slot of `name`, handing out a new one the first time.
    pub(crate) fn declare(&mut self, name: &Arc<str>) -> usize {
        if let Some(i) = self.names.get(name) {
            return *i;
        }
        let i = self.slots;
        self.slots += 1;
        self.names.insert(name.clone(), i);
        i
    }

    /// Notes that slot `idx` was just defined (by `source` when it is a whole top-level form).
    pub(crate) fn mark(&mut self, idx: usize, source: Option<Arc<DefSource>>) {
        if self.marks.len() <= idx {
            self.marks.resize(idx + 1, None);
        }
        self.next_seq += 1;
        self.marks[idx] = Some(DefMark {
            seq: self.next_seq,
            source,
        });
    }

    /// Removes `name`: later programs do not know it. Returns its slot, which the caller
    /// empties.
    pub(crate) fn remove(&mut self, name: &str) -> Option<usize> {
        let idx = self.names.remove(name)?;
        if let Some(m) = self.marks.get_mut(idx) {
            *m = None;
        }
        Some(idx)
    }
}

/// Whether a global is the program's own: not the REPL history, not a hidden `letfn` global
/// (those have a space in their name, which no symbol the reader produces has).
pub(crate) fn is_user_name(name: &str) -> bool {
    !HISTORY.contains(&name) && !name.contains(' ')
}
