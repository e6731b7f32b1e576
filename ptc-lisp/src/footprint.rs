//! What values really take in memory, for the memory budget: a program is charged before it
//! allocates, with element and entry sizes as the allocator sees them (a map entry is its hash,
//! key, value and index slot; a hash table has empty slots) and the capacity it asks for, so a
//! program stopped by `memory_exceeded` never held much more than its budget. Charges are
//! cumulative: what a program frees is not given back, which also covers the old value alive
//! while a new one is built from it.

use crate::value::Value;

/// One vector element.
pub(crate) const VALUE: u64 = std::mem::size_of::<Value>() as u64;

/// A collection's own allocation: the `Arc` counts and the container's header.
pub(crate) const HEADER: u64 = 48;

/// One map entry in a hash map: its hash, key and value, and about two index slots (a table is
/// at most 7/8 full and grows by doubling).
pub(crate) const MAP_ENTRY: u64 = 8 + 2 * VALUE + 2 * 8 + 8;

/// One set element: its hash and value, and its index slots.
pub(crate) const SET_ENTRY: u64 = 8 + VALUE + 2 * 8 + 8;

/// A vector with room for `n` elements.
pub(crate) fn vector(n: usize) -> u64 {
    HEADER + n as u64 * VALUE
}

/// A map with room for `n` entries.
pub(crate) fn map(n: usize) -> u64 {
    HEADER + n as u64 * MAP_ENTRY
}

/// A set with room for `n` elements.
pub(crate) fn set(n: usize) -> u64 {
    HEADER + n as u64 * SET_ENTRY
}

/// A string of `len` bytes built in a buffer and then copied into its shared form: both exist
/// for a moment.
pub(crate) fn built_string(len: usize) -> u64 {
    HEADER + 2 * len as u64
}
