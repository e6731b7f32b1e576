//! The bench's global allocator: mimalloc (what the `ptc` binary and the released jaq ship with),
//! or glibc malloc when `PTC_BENCH_ALLOC=system` is set, for the allocator rows. Bytes are
//! counted only while [`peak_during`] runs, so the timed rows pay nothing for the counting.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU8, Ordering::Relaxed};

use mimalloc::MiMalloc;

/// mimalloc or the system allocator (chosen once, at the first allocation), counting on demand.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The allocator in use, decided before the first allocation so that every pointer is freed by
/// the allocator that made it. `getenv` does not allocate, so it can run inside `alloc`.
fn mode() -> u8 {
    let m = MODE.load(Relaxed);
    if m != UNDECIDED {
        return m;
    }
    // SAFETY: a NUL-terminated name; the result is only compared with null and read as a C
    // string while no other thread exists yet (the first allocation happens before `main`).
    #[allow(unsafe_code)]
    let system = unsafe {
        let v = libc::getenv(c"PTC_BENCH_ALLOC".as_ptr());
        !v.is_null() && std::ffi::CStr::from_ptr(v).to_bytes() == b"system"
    };
    let m = if system { SYSTEM } else { MIMALLOC };
    MODE.store(m, Relaxed);
    m
}

/// Name of the allocator this process runs on, for the table.
pub fn name() -> &'static str {
    if mode() == SYSTEM {
        "glibc malloc"
    } else {
        "mimalloc"
    }
}

// SAFETY: every call is forwarded unchanged to one allocator, fixed for the life of the process;
// only counters are added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe {
            if mode() == SYSTEM {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        };
        if !p.is_null() && COUNTING.load(Relaxed) {
            grow(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe {
            if mode() == SYSTEM {
                System.dealloc(ptr, layout)
            } else {
                MiMalloc.dealloc(ptr, layout)
            }
        };
        if COUNTING.load(Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe {
            if mode() == SYSTEM {
                System.realloc(ptr, layout, new_size)
            } else {
                MiMalloc.realloc(ptr, layout, new_size)
            }
        };
        if !p.is_null() && COUNTING.load(Relaxed) {
            grow(new_size as isize - layout.size() as isize);
        }
        p
    }
}

fn grow(n: isize) {
    let live = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(live, Relaxed);
}

/// Heap bytes that `f` needed at its peak, beyond what was live before it ran.
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LIVE.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    COUNTING.store(true, Relaxed);
    let r = f();
    COUNTING.store(false, Relaxed);
    (r, PEAK.load(Relaxed).max(0) as usize)
}
