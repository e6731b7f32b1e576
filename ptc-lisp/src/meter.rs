//! A program's memory meter: what it has been charged against its budget and, when the host
//! shares one budget among many programs ([`MemoryPool`]), what it has reserved from that budget.
//! A program reserves as it grows, a chunk at a time, and gives everything back when it ends
//! (however it ends), so a thousand programs in flight hold what they use, not what they may.

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

/// The meter of one evaluation (shared with its `pmap` branches).
pub(crate) struct Meter<'a> {
    used: AtomicU64,
    reserved: AtomicU64,
    max: u64,
    pool: Option<&'a dyn MemoryPool>,
}

impl<'a> Meter<'a> {
    /// A meter for a budget of `max` bytes, reserving from `pool` when there is one.
    pub(crate) fn new(max: u64, pool: Option<&'a dyn MemoryPool>) -> Self {
        Meter {
            used: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            max,
            pool,
        }
    }

    /// Bytes charged so far.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes left in the program's own budget.
    pub(crate) fn left(&self) -> u64 {
        self.max.saturating_sub(self.used())
    }

    /// Charges `bytes`: the message of the `memory_exceeded` error when the program's budget is
    /// passed, or the pool cannot give what the program now uses.
    pub(crate) fn charge(&self, bytes: u64) -> Result<(), String> {
        let used = self
            .used
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        if used > self.max {
            return Err(format!("program allocated more than {} bytes", self.max));
        }
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
        Ok(())
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
    fn the_program_budget_holds_at_exactly_max_and_the_pool_names_its_budget_when_full() {
        let m = Meter::new(100, None);
        m.charge(100).unwrap();
        assert_eq!(m.left(), 0);
        assert_eq!(
            m.charge(1).unwrap_err(),
            "program allocated more than 100 bytes"
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
