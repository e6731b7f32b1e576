//! What values really take in memory, for the memory budget: a program is charged before it
//! allocates, with element and entry sizes as the allocator sees them (a map entry is its hash,
//! key, value and index slot; a hash table has empty slots) and the capacity it asks for, so a
//! program stopped by `memory_exceeded` never held much more than its budget. Charges are
//! given back when the value is freed (see `meter`), so they count what a program holds.

use crate::value::{Charged, INLINE, Items, MapData, SMALL_MAP, SetData, Value};

/// One vector element.
pub(crate) const VALUE: u64 = std::mem::size_of::<Value>() as u64;

/// A collection's own block: its count, its container and its charge (`CollArc<Charged<T>>`).
const fn block<T>() -> u64 {
    (8 + std::mem::size_of::<Charged<T>>()) as u64
}

/// A vector's own block (40 bytes, a size the allocator has a class for).
pub(crate) const VECTOR_BLOCK: u64 = block::<Items>();

/// A map's own block (40 bytes).
pub(crate) const MAP_BLOCK: u64 = block::<MapData>();

/// A set's own block (72 bytes).
pub(crate) const SET_BLOCK: u64 = block::<SetData>();

/// One map entry in a hash map: its hash, key and value, and about two index slots (a table is
/// at most 7/8 full and grows by doubling).
pub(crate) const MAP_ENTRY: u64 = 8 + 2 * VALUE + 2 * 8 + 8;

/// One set element: its hash and value, and its index slots.
pub(crate) const SET_ENTRY: u64 = 8 + VALUE + 2 * 8 + 8;

/// A vector with room for `n` elements.
pub(crate) fn vector(n: usize) -> u64 {
    VECTOR_BLOCK + n as u64 * VALUE
}

/// A map with room for `n` entries.
pub(crate) fn map(n: usize) -> u64 {
    MAP_BLOCK + n as u64 * MAP_ENTRY
}

/// A map of `n` values whose keys are a shared shape ([`MapData::Record`]).
pub(crate) fn record(n: usize) -> u64 {
    MAP_BLOCK + n as u64 * VALUE
}

/// A map built with room for `n` entries ([`MapData::with_capacity`]): a flat array when small.
pub(crate) fn map_room(n: usize) -> u64 {
    if n <= SMALL_MAP {
        MAP_BLOCK + n as u64 * 2 * VALUE
    } else {
        map(n)
    }
}

/// A set with room for `n` elements.
pub(crate) fn set(n: usize) -> u64 {
    SET_BLOCK + n as u64 * SET_ENTRY
}

/// A string of `len` bytes beyond its value: nothing when it is stored inline, else its shared
/// form's count, charge and length, and its bytes.
pub(crate) fn string(len: usize) -> u64 {
    if len <= INLINE { 0 } else { 24 + len as u64 }
}

/// What a built map's storage takes (its entries; keys and values of their own are charged
/// where they are made).
pub(crate) fn map_storage(m: &MapData) -> u64 {
    match m {
        MapData::Small(pairs) => MAP_BLOCK + pairs.capacity() as u64 * 2 * VALUE,
        MapData::Record(r) => record(r.values().len()),
        MapData::Large(table) => map(table.capacity()),
    }
}

/// What a built set's storage takes.
pub(crate) fn set_storage(s: &SetData) -> u64 {
    set(s.0.capacity())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_collection_block_is_its_count_its_container_and_its_charge() {
        assert_eq!((VECTOR_BLOCK, MAP_BLOCK, SET_BLOCK), (40, 40, 72));
        assert_eq!(vector(3), 40 + 3 * 16);
        assert_eq!(record(3), 40 + 3 * 16);
    }

    #[test]
    fn a_map_is_a_flat_array_up_to_the_small_size_and_a_hash_table_past_it() {
        assert_eq!(map_room(0), MAP_BLOCK);
        assert_eq!(
            map_room(SMALL_MAP),
            MAP_BLOCK + SMALL_MAP as u64 * 2 * VALUE
        );
        assert_eq!(
            map_room(SMALL_MAP + 1),
            MAP_BLOCK + (SMALL_MAP as u64 + 1) * MAP_ENTRY
        );
    }

    #[test]
    fn built_storage_is_charged_at_its_capacity() {
        let small = MapData::with_capacity(5);
        assert_eq!(map_storage(&small), MAP_BLOCK + 5 * 2 * VALUE);
        let large = MapData::with_capacity(100);
        let room = match &large {
            MapData::Large(table) => table.capacity() as u64,
            _ => unreachable!("100 entries are a hash table"),
        };
        assert!(room >= 100);
        assert_eq!(map_storage(&large), MAP_BLOCK + room * MAP_ENTRY);
        let shape = Arc::new(crate::value::Shape::new(
            vec![Value::str("a"), Value::str("b"), Value::str("c")].into(),
        ));
        let record = MapData::Record(crate::value::Record::new(shape, vec![Value::Nil; 3].into()));
        assert_eq!(map_storage(&record), MAP_BLOCK + 3 * VALUE);
        let set = SetData::from_values((0..10).map(|i: i32| Value::Int(i.into())));
        assert_eq!(
            set_storage(&set),
            SET_BLOCK + set.0.capacity() as u64 * SET_ENTRY
        );
        assert!(set.0.capacity() >= 10);
        assert_eq!(string(0), 0);
        assert_eq!(string(INLINE), 0, "inline in its value");
        assert_eq!(string(INLINE + 1), 24 + INLINE as u64 + 1);
    }
}
