//! A decoded record's storage: its shared key list and its values, in two words.
//!
//! Arrays of JSON objects repeat one object's keys; such maps keep the keys once ([`Shape`]) and
//! only their values of their own. The number of values is the shape's, so the values are held
//! by a thin pointer where a `Box<[Value]>` would hold the length a second time. That keeps a
//! map's storage at three words, and a record's own block at 40 bytes with its counts and
//! charge: the bulk of a decoded tool result is records.
//!
//! One of the workspace's few `unsafe` modules (the lint is denied elsewhere): the pointer and
//! the shape's length are a `Box<[Value]>` taken apart, and each block says why it holds.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::Arc;

use super::{Shape, Value};

/// A record: the values of a map whose keys are a shared [`Shape`], in the shape's key order.
pub struct Record {
    shape: Arc<Shape>,
    /// A `Box<[Value]>` of exactly `shape.keys().len()` values, taken apart.
    values: NonNull<Value>,
}

// SAFETY: a record owns its values as a `Box<[Value]>` does, and values are `Send + Sync`.
unsafe impl Send for Record {}
// SAFETY: as above; shared access only reads the values.
unsafe impl Sync for Record {}

impl Record {
    /// A record of `values` under `shape`: one value per key, in the shape's key order.
    ///
    /// # Panics
    /// When the counts differ, a caller's bug that would otherwise free the wrong size.
    pub(crate) fn new(shape: Arc<Shape>, values: Box<[Value]>) -> Self {
        assert_eq!(
            values.len(),
            shape.keys().len(),
            "a record holds one value per key of its shape"
        );
        let values = NonNull::from(Box::leak(values)).cast::<Value>();
        Record { shape, values }
    }

    /// The shared key list.
    pub fn shape(&self) -> &Arc<Shape> {
        &self.shape
    }

    /// The keys, in order.
    pub fn keys(&self) -> &[Value] {
        self.shape.keys()
    }

    /// The values, one per key.
    pub fn values(&self) -> &[Value] {
        // SAFETY: `values` is a live `Box<[Value]>` of the shape's length (`new`), owned here.
        unsafe { std::slice::from_raw_parts(self.values.as_ptr(), self.shape.keys().len()) }
    }

    /// The values, for update in place.
    pub(crate) fn values_mut(&mut self) -> &mut [Value] {
        // SAFETY: as in `values`; `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.values.as_ptr(), self.shape.keys().len()) }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.values.as_ptr(), self.keys().len());
        // SAFETY: the pointer and length are those of the box `new` took apart, rebuilt once,
        // as the record is dropped.
        drop(unsafe { Box::from_raw(slice) });
    }
}

impl Clone for Record {
    fn clone(&self) -> Self {
        Record::new(Arc::clone(&self.shape), self.values().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(keys: &[&str]) -> Arc<Shape> {
        Arc::new(Shape::new(keys.iter().map(|k| Value::str(k)).collect()))
    }

    #[test]
    fn a_record_reads_and_updates_its_values_in_key_order() {
        let mut r = Record::new(
            shape(&["a", "b"]),
            vec![Value::Int(1), Value::Int(2)].into(),
        );
        assert_eq!(r.keys(), &[Value::str("a"), Value::str("b")]);
        assert_eq!(r.values(), &[Value::Int(1), Value::Int(2)]);
        r.values_mut()[1] = Value::str("a string longer than inline text");
        let copy = r.clone();
        drop(r);
        assert_eq!(
            copy.values(),
            &[
                Value::Int(1),
                Value::str("a string longer than inline text")
            ]
        );
    }

    #[test]
    fn a_record_of_no_keys_holds_no_values() {
        let r = Record::new(shape(&[]), Vec::new().into());
        assert!(r.values().is_empty());
        assert!(r.clone().values().is_empty());
    }

    #[test]
    fn values_shared_with_a_record_are_freed_with_its_last_copy() {
        let inner = Value::vector(vec![Value::Int(7)]);
        let r = Record::new(shape(&["v"]), vec![inner.clone()].into());
        let copy = r.clone();
        let Value::Vector(items) = &inner else {
            unreachable!()
        };
        assert_eq!(crate::value::CollArc::count(items), 3);
        drop(r);
        drop(copy);
        assert_eq!(crate::value::CollArc::count(items), 1);
    }

    #[test]
    #[should_panic(expected = "one value per key")]
    fn a_record_refuses_values_that_do_not_match_its_keys() {
        let _ = Record::new(shape(&["a", "b"]), vec![Value::Int(1)].into());
    }
}
