//! A program's memory meter: what it has been charged against its budget and, when the host
//! shares one budget among many programs ([`MemoryPool`]), what it has reserved from that budget.
//! A program reserves as it grows, a chunk at a time, and gives everything back when it ends
//! (however it ends), so a thousand programs in flight hold what they use, not what they may.
//!
//! A charge for a collection's or a shared string's own storage is given to it ([`Meter::own`])
//! and credited back when it is freed, so the budget bounds what a program holds, not what it
//! has allocated over its life. Only the exact bytes charged for that one allocation come back, and
//! only once: a charge is not cloned with its collection, and a charge covering several values
//! (or a value's elements) is never given to one of them, so no program is credited more than
//! it was charged for what it freed.
//!
//! A charge is 8 bytes (every collection and shared string carries one, decoded tool results
//! included): its bytes and its meter's id. It is credited to the meter of the program running
//! on the thread that frees it ([`Meter::enter`]) when that is its own: a program runs on one
//! thread, its `pmap` branches included, and its driver steps it out while it is suspended. A
//! charge freed elsewhere (by the host, after its program) stays charged to a meter that is gone
//! or that counts on, which is the safe side. Ids are 32 bits: only a value kept four billion programs later on the same
//! thread could meet its id again.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
    bytes: u32,
    /// The meter's id; 0 for none.
    meter: u32,
}

/// The meter of the program running on a thread: its id and its count.
type Running = Option<(u32, Arc<AtomicU64>)>;

thread_local! {
    static RUNNING: Cell<Running> = const { Cell::new(None) };
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.meter == 0 {
            return;
        }
        // Gone only while the thread exits, when there is no program left to credit.
        let _ = RUNNING.try_with(|running| {
            let current = running.take();
            if let Some((id, used)) = &current
                && *id == self.meter
            {
                used.fetch_sub(u64::from(self.bytes), Ordering::Relaxed);
            }
            running.set(current);
        });
    }
}

/// The program running on this thread, for as long as it runs here (see [`Meter::enter`]).
pub(crate) struct Entered(Running);

impl Drop for Entered {
    fn drop(&mut self) {
        let _ = RUNNING.try_with(|running| running.set(self.0.take()));
    }
}

/// What runs on this thread, taken out of it: a driver about to resume a program steps out
/// what ran before it, and back in ([`step_in`]) when the program suspends or ends.
pub(crate) fn step_out() -> Running {
    RUNNING.try_with(Cell::take).ok().flatten()
}

/// Makes `running` what runs on this thread again ([`step_out`]).
pub(crate) fn step_in(running: Running) {
    let _ = RUNNING.try_with(|r| r.set(running));
}

/// What runs on this thread, left running (a program about to suspend keeps it, to step back
/// in when resumed).
pub(crate) fn running() -> Running {
    let current = step_out();
    step_in(current.clone());
    current
}

/// Ids of meters: 0 is no meter.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// The meter of one evaluation (shared with its `pmap` branches).
pub(crate) struct Meter<'a> {
    // Shared with the charges given to values, which may outlive the meter (a value kept in a
    // session): a credit after the program ended is harmless.
    used: Arc<AtomicU64>,
    id: u32,
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
            id: match NEXT_ID.fetch_add(1, Ordering::Relaxed) {
                0 => NEXT_ID.fetch_add(1, Ordering::Relaxed),
                id => id,
            },
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

    /// Gives `bill` to the collection it paid for: credited back when the collection is freed
    /// while this meter's program runs on the thread. A bill of 4 GiB or more stays charged.
    pub(crate) fn own(&self, bill: Bill) -> Charge {
        match u32::try_from(bill.0) {
            Ok(bytes) => Charge {
                bytes,
                meter: self.id,
            },
            Err(_) => Charge::default(),
        }
    }

    /// Makes this meter's program the one running on this thread until the guard drops (the one
    /// before it runs again then): charges freed meanwhile on this thread are credited to it.
    pub(crate) fn enter(&self) -> Entered {
        let mine = Some((self.id, Arc::clone(&self.used)));
        Entered(RUNNING.try_with(|r| r.replace(mine)).ok().flatten())
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
        let _running = m.enter();
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
        let running = m.enter();
        let storage = Charged::new(Items(vec![]), m.own(m.charge(100).unwrap()));
        let copy = storage.clone();
        drop(storage);
        assert_eq!(m.used(), 0);
        drop(copy);
        assert_eq!(m.used(), 0, "credited once");
        let kept = m.own(m.charge(10).unwrap());
        drop(running);
        drop(m);
        drop(kept);
    }

    #[test]
    fn a_charge_is_credited_only_to_its_own_program_running_on_the_thread() {
        let (a, b) = (Meter::new(1000, None), Meter::new(1000, None));
        let of_a = a.own(a.charge(100).unwrap());
        drop(of_a); // no program running here: stays charged
        assert_eq!(a.used(), 100);
        let of_a = a.own(a.charge(10).unwrap());
        let running_b = b.enter();
        drop(of_a); // another program runs: stays charged to its own
        assert_eq!((a.used(), b.used()), (110, 0));
        let running_a = a.enter();
        let of_a = a.own(a.charge(5).unwrap());
        let suspended = running(); // a suspends, keeping what to step back in
        let away = step_out(); // its driver steps it out
        drop(a.own(a.charge(1).unwrap())); // freed while a is suspended: stays charged
        step_in(away);
        step_in(suspended); // resumed
        drop(of_a);
        assert_eq!(a.used(), 111);
        drop(running_a); // b runs again
        let of_b = b.own(b.charge(7).unwrap());
        drop(of_b);
        assert_eq!(b.used(), 0);
        drop(running_b);
        assert!(step_out().is_none(), "nothing left running");
        let big = a.own(Bill(u64::from(u32::MAX) + 1));
        assert_eq!(
            (big.bytes, big.meter),
            (0, 0),
            "4 GiB or more stays charged"
        );
    }

    #[test]
    fn a_program_that_frees_and_allocates_again_reserves_nothing_more() {
        const C: u64 = RESERVE_CHUNK;
        let p = pool(5 * C);
        {
            let m = Meter::new(u64::MAX, Some(&p));
            let _running = m.enter();
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
