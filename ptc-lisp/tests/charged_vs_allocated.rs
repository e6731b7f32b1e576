//! What the memory budget charges, against what the allocator is really asked for: for programs
//! that grow each kind of collection, the most bytes live at once while the program runs stays
//! within what its meter held at most, plus 10 % (the limit's promise: a program stopped by
//! `memory_exceeded` never held much more than its budget). One test, so that no other test's
//! allocations run beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use ptc_lisp::{Interpreter, Limits};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only counters are added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let size = layout.size() as isize;
            PEAK.fetch_max(LIVE.fetch_add(size, Relaxed) + size, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes allocated at once while `src` ran (above what was live before), and the most
/// its meter held.
fn peaks(src: &str) -> (u64, u64) {
    let mut interp = Interpreter::new(Limits::default());
    interp.eval_str("(+ 1 2)").unwrap();
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    interp
        .eval_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e}"));
    let allocated = (PEAK.load(Relaxed) - before) as u64;
    (allocated, interp.last_memory_bytes())
}

#[test]
fn what_is_allocated_stays_within_what_is_charged() {
    let programs = [
        "(loop [v [] i 0] (if (< i 100000) (recur (conj v i) (inc i)) (count v)))",
        "(loop [s #{} i 0] (if (< i 100000) (recur (conj s i) (inc i)) (count s)))",
        "(loop [m {} i 0] (if (< i 100000) (recur (assoc m i i) (inc i)) (count m)))",
        "(count (into (vec (range 100000)) (range 100000)))",
        "(count (into #{} (range 100000)))",
        "(count (merge (zipmap (range 50000) (range 50000)) (zipmap (range 50000 100000) (range 50000))))",
        "(count (group-by #(mod % 100) (range 100000)))",
        "(count (frequencies (map #(mod % 1000) (range 100000))))",
        "(count (mapv (fn [i] [i i]) (range 100000)))",
        "(count (mapv (fn [i] {:a i :b i}) (range 100000)))",
        "(count (partition 2 (range 100000)))",
        "(count (map (fn [[k v]] v) (zipmap (range 50000) (range 50000))))",
        "(count (apply str (map str (range 100000))))",
        "(count (seq (apply str (repeat 100000 \"ab\"))))",
    ];
    for src in programs {
        let (allocated, charged) = peaks(src);
        assert!(
            allocated <= charged + charged / 10 + (256 << 10),
            "{src}: {allocated} bytes allocated at once, {charged} charged at most"
        );
    }
}
