//! A program's memory meter: what it has been charged against its budget and, when the host
//! shares one budget among many programs ([`MemoryPool`]), what it has reserved from that budget.
//! A program reserves as it grows, a chunk at a time, and gives everything back when it ends
//! (however it ends), so a thousand programs in flight hold what they use, not what they may.
//!
//! A charge for a collection's own storage is given to that collection ([`Meter::own`]) and
//! credited back when it is freed, so the budget bounds what a program holds, not what it has
//! allocated over its life. Only the exact bytes charged for that one allocation come back, and
//! only once: a charge is not cloned with its collection, and a charge covering several values
//! (or a value's elements) is never given to one of them, so no program is credited more than
//! it was charged for what it freed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A memory budget shared by every program of a host.
pub trait MemoryPool: Send + Sync {
    /// Takes `bytes` from the budget; `false` when they are not free.
    fn reserve(&self, bytes: u64) -> bool;
    /// Gives back `bytes` taken before.
    fn release(&self, bytes: u64);
    /// The whole budget, for the message of a refusal.
    fn budget(&self) -> u64;
}

/// A program reserves from its pool at least this much at a time (a reservation per charge
/// would cost more than the allocation it stands for).
pub const RESERVE_CHUNK: u64 = 1 << 20;

/// Bytes just charged to a meter, not yet given to a value: left alone they stay charged until
/// the program ends; given to the collection they paid for ([`Meter::own`]), they come back when
/// it is freed. Neither `Clone` nor `Copy`, so one charge is given at most once.
#[derive(Debug)]
pub(crate) struct Bill(u64);

/// What a collection's own storage was charged, credited back to the program's meter when the
/// collection is freed (dropped with it). An empty charge (the default) credits nothing: values
/// the program did not pay for alone, such as literals or copies made by `Clone`.
#[derive(Default)]
pub struct Charge {
    bytes: u64,
    used: Option<Arc<AtomicU64>>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(used) = &self.used {
            used.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// The meter of one evaluation (shared with its `pmap` branches).
pub(crate) struct Meter<'a> {
    // Shared with the charges given to values, which may outlive the meter (a value kept in a
    // session): a credit after the program ended is harmless.
    used: Arc<AtomicU64>,
    peak: AtomicU64,
    reserved: AtomicU64,
    max: u64,
    pool: Option<&'a dyn MemoryPool>,
}

impl<'a> Meter<'a> {
    /// A meter for a budget of `max` bytes, reserving from `pool` when there is one.
    pub(crate) fn new(max: u64, pool: Option<&'a dyn MemoryPool>) -> Self {
        Meter {
            used: Arc::new(AtomicU64::new(0)),
            peak: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            max,
            pool,
        }
    }

    /// Bytes charged and not yet credited back: what the program holds.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The most the program has held at once: the smallest budget it runs within.
    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Bytes left in the program's own budget.
    pub(crate) fn left(&self) -> u64 {
        self.max.saturating_sub(self.used())
    }

    /// Charges `bytes`: the message of the `memory_exceeded` error when the program's budget is
    /// passed, or the pool cannot give what the program now uses.
    pub(crate) fn charge(&self, bytes: u64) -> Result<Bill, String> {
        let used = self
            .used
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        if used > self.max {
            return Err(format!("program would hold more than {} bytes", self.max));
        }
        self.peak.fetch_max(used, Ordering::Relaxed);
        if let Some(pool) = self.pool {
            let mut have = self.reserved.load(Ordering::Acquire);
            while used > have {
                let want = (used - have).max(RESERVE_CHUNK);
                if !pool.reserve(want) {
                    return Err(format!(
                        "the host's memory budget of {} bytes is in use by other programs",
                        pool.budget()
                    ));
                }
                have = self.reserved.fetch_add(want, Ordering::AcqRel) + want;
            }
        }
        Ok(Bill(bytes))
    }

    /// Gives `bill` to the collection it paid for: credited back when the collection is freed.
    pub(crate) fn own(&self, bill: Bill) -> Charge {
        Charge {
            bytes: bill.0,
            used: Some(Arc::clone(&self.used)),
        }
    }
}

impl Drop for Meter<'_> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool {
            pool.release(*self.reserved.get_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Charged, Items};
    use std::sync::Mutex;

    /// A pool of `free` bytes that logs what it is asked.
    struct Pool {
        free: Mutex<u64>,
        log: Mutex<Vec<String>>,
    }

    impl MemoryPool for Pool {
        fn reserve(&self, bytes: u64) -> bool {
            let mut free = self.free.lock().unwrap();
            self.log.lock().unwrap().push(format!("reserve {bytes}"));
            if *free < bytes {
                return false;
            }
            *free -= bytes;
            true
        }
        fn release(&self, bytes: u64) {
            self.log.lock().unwrap().push(format!("release {bytes}"));
            *self.free.lock().unwrap() += bytes;
        }
        fn budget(&self) -> u64 {
            3 * RESERVE_CHUNK
        }
    }

    fn pool(free: u64) -> Pool {
        Pool {
            free: Mutex::new(free),
            log: Mutex::default(),
        }
    }

    #[test]
    fn a_program_reserves_a_chunk_at_a_time_and_gives_all_back_at_the_end() {
        const C: u64 = RESERVE_CHUNK;
        let p = pool(5 * C);
        {
            let m = Meter::new(u64::MAX, Some(&p));
            m.charge(1).unwrap(); // a first chunk
            m.charge(C - 1).unwrap(); // exactly the chunk: nothing more
            m.charge(1).unwrap(); // one past: a second chunk
            m.charge(C + 5).unwrap(); // 2C + 6 used: a third chunk is enough
            m.charge(2 * C).unwrap(); // 4C + 6 used: what is missing, more than a chunk
            assert_eq!(m.used(), 4 * C + 6);
        }
        assert_eq!(
            *p.log.lock().unwrap(),
            [
                format!("reserve {C}"),
                format!("reserve {C}"),
                format!("reserve {C}"),
                format!("reserve {}", C + 6),
                format!("release {}", 4 * C + 6),
            ]
        );
        assert_eq!(*p.free.lock().unwrap(), 5 * C, "all given back");
    }

    #[test]
    fn a_charge_given_to_a_value_comes_back_once_when_the_value_is_freed() {
        let m = Meter::new(1000, None);
        let held = m.own(m.charge(300).unwrap());
        m.charge(200).unwrap(); // a bill given to nothing: charged until the end
        assert_eq!((m.used(), m.peak()), (500, 500));
        drop(held);
        assert_eq!((m.used(), m.peak()), (200, 500));
        // What was freed is room again, up to exactly the budget.
        m.charge(800).unwrap();
        assert_eq!((m.used(), m.peak()), (1000, 1000));
        assert_eq!(
            m.charge(1).unwrap_err(),
            "program would hold more than 1000 bytes"
        );
    }

    #[test]
    fn a_copy_carries_no_charge_and_a_charge_outliving_its_meter_is_harmless() {
        let m = Meter::new(1000, None);
        let storage = Charged::new(Items(vec![]), m.own(m.charge(100).unwrap()));
        let copy = storage.clone();
        drop(storage);
        assert_eq!(m.used(), 0);
        drop(copy);
        assert_eq!(m.used(), 0, "credited once");
        let kept = m.own(m.charge(10).unwrap());
        drop(m);
        drop(kept);
    }

    #[test]
    fn a_program_that_frees_and_allocates_again_reserves_nothing_more() {
        const C: u64 = RESERVE_CHUNK;
        let p = pool(5 * C);
        {
            let m = Meter::new(u64::MAX, Some(&p));
            for _ in 0..3 {
                drop(m.own(m.charge(C).unwrap()));
            }
            assert_eq!(m.peak(), C);
        }
        assert_eq!(
            *p.log.lock().unwrap(),
            [format!("reserve {C}"), format!("release {C}")]
        );
    }

    #[test]
    fn the_program_budget_holds_at_exactly_max_and_the_pool_names_its_budget_when_full() {
        let m = Meter::new(100, None);
        m.charge(100).unwrap();
        assert_eq!(m.left(), 0);
        assert_eq!(
            m.charge(1).unwrap_err(),
            "program would hold more than 100 bytes"
        );
        let p = pool(RESERVE_CHUNK);
        let m = Meter::new(u64::MAX, Some(&p));
        m.charge(RESERVE_CHUNK).unwrap();
        assert_eq!(
            m.charge(1).unwrap_err(),
            format!(
                "the host's memory budget of {} bytes is in use by other programs",
                3 * RESERVE_CHUNK
            )
        );
        drop(m);
        assert_eq!(*p.free.lock().unwrap(), RESERVE_CHUNK, "given back");
    }
}
