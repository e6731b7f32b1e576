//! The order a worker thread runs its ready programs in: fair per party (a caller, or one
//! client session of a shared identity), so that one party's ten long computations do not hold
//! back another party's one-line program.
//!
//! The policy is per-party fair queuing on virtual time, as Linux's CFS does for threads: each
//! party on the worker has a virtual time, the computing time its programs were polled for; the
//! ready program of the party with the least virtual time runs next, for at most one time slice
//! (the evaluator yields at its slice's end, `ptc_lisp`'s `TIME_SLICE`), and a party's own ready
//! programs take turns. A party that has not computed lately (it is new, or its programs waited
//! on upstreams) comes back at the worker's floor less one slice: first in line, with at most a
//! slice of credit, so waiting never banks computing time. Chosen over shortest-remaining-budget
//! first, which needs to know how long a program will compute (it cannot be known), and over
//! plain round-robin of programs, which gives a party with ten programs ten turns to one.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// The credit a party that has not computed lately gets: one time slice, so it runs next but
/// cannot save up more.
pub(crate) const CREDIT: Duration = ptc_lisp::TIME_SLICE;

/// One party's place on a worker.
struct Party<T> {
    /// Nanoseconds its programs were polled for, shifted as [`CREDIT`] says.
    vtime: u64,
    /// Its programs on this worker (ready or not): the party is forgotten when none is left.
    programs: usize,
    /// Its ready programs, oldest first.
    ready: VecDeque<T>,
    state: State,
}

/// Where a party is.
#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    /// Nothing ready, or not yet back in line.
    Out,
    /// In line in [`RunQueue::order`] under this key.
    InLine(u64, u64),
    /// One of its programs is running (the party gets back in line when it is done).
    Running,
}

/// A worker's ready programs (`T` names one), in the order they run.
pub(crate) struct RunQueue<T> {
    parties: HashMap<Arc<str>, Party<T>>,
    /// Parties with a ready program, by virtual time, then by when they got in line.
    order: BTreeSet<(u64, u64, Arc<str>)>,
    /// Virtual time of the party that ran last: where a returning party is placed.
    floor: u64,
    /// Tie-breaker: parties with equal virtual time run in the order they got in line.
    arrivals: u64,
}

impl<T> Default for RunQueue<T> {
    fn default() -> Self {
        RunQueue {
            parties: HashMap::new(),
            order: BTreeSet::new(),
            floor: 0,
            arrivals: 0,
        }
    }
}

impl<T> RunQueue<T> {
    /// A program of `party` starts on this worker (it is made ready with [`RunQueue::ready`]).
    pub(crate) fn join(&mut self, party: &Arc<str>) {
        let credited = self.floor.saturating_sub(nanos(CREDIT));
        let p = self.parties.entry(party.clone()).or_insert_with(|| Party {
            vtime: credited,
            programs: 0,
            ready: VecDeque::new(),
            state: State::Out,
        });
        p.programs += 1;
    }

    /// A program of `party` ended: the party is forgotten when it has no other.
    pub(crate) fn leave(&mut self, party: &Arc<str>) {
        if let Some(p) = self.parties.get_mut(party) {
            p.programs = p.programs.saturating_sub(1);
            if p.programs == 0 && p.ready.is_empty() {
                if let State::InLine(v, a) = p.state {
                    self.order.remove(&(v, a, party.clone()));
                }
                self.parties.remove(party);
            }
        }
    }

    /// Program `task` of `party` (which [`RunQueue::join`]ed) is ready to run.
    pub(crate) fn ready(&mut self, party: &Arc<str>, task: T) {
        let Some(p) = self.parties.get_mut(party) else {
            return;
        };
        p.ready.push_back(task);
        if p.state == State::Out {
            // A party that waited comes back no further behind than a slice of credit.
            p.vtime = p.vtime.max(self.floor.saturating_sub(nanos(CREDIT)));
            Self::enqueue(&mut self.order, &mut self.arrivals, party, p);
        }
    }

    /// The next program to run and its party: the oldest ready program of the party with the
    /// least virtual time. The party is out of line until [`RunQueue::ran`] says how long its
    /// program ran.
    pub(crate) fn next(&mut self) -> Option<(Arc<str>, T)> {
        let (vtime, _, party) = self.order.pop_first()?;
        self.floor = self.floor.max(vtime);
        let p = self.parties.get_mut(&party)?;
        p.state = State::Running;
        let task = p.ready.pop_front()?;
        Some((party, task))
    }

    /// The program [`RunQueue::next`] gave of `party` ran for `took`: counted to its party, which
    /// gets back in line if it has other ready programs.
    pub(crate) fn ran(&mut self, party: &Arc<str>, took: Duration) {
        let Some(p) = self.parties.get_mut(party) else {
            return;
        };
        if p.state != State::Running {
            return;
        }
        p.vtime = p.vtime.saturating_add(nanos(took));
        p.state = State::Out;
        if !p.ready.is_empty() {
            Self::enqueue(&mut self.order, &mut self.arrivals, party, p);
        }
    }

    fn enqueue(
        order: &mut BTreeSet<(u64, u64, Arc<str>)>,
        arrivals: &mut u64,
        party: &Arc<str>,
        p: &mut Party<T>,
    ) {
        *arrivals += 1;
        order.insert((p.vtime, *arrivals, party.clone()));
        p.state = State::InLine(p.vtime, *arrivals);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn party(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    /// Runs the queue as a worker would for `turns` turns, each program computing for `slice`
    /// and staying ready; the parties' names in the order they ran.
    fn run(q: &mut RunQueue<u32>, turns: usize, slice: Duration) -> Vec<String> {
        let mut order = Vec::new();
        for _ in 0..turns {
            let Some((p, task)) = q.next() else { break };
            order.push(p.to_string());
            q.ready(&p, task);
            q.ran(&p, slice);
        }
        order
    }

    #[test]
    fn a_party_with_ten_programs_gets_the_same_turns_as_a_party_with_one() {
        let mut q = RunQueue::default();
        let (heavy, light) = (party("heavy"), party("light"));
        for t in 0..10 {
            q.join(&heavy);
            q.ready(&heavy, t);
        }
        q.join(&light);
        q.ready(&light, 99);
        let order = run(&mut q, 20, 2 * MS);
        let light_turns = order.iter().filter(|p| *p == "light").count();
        assert_eq!(light_turns, 10, "{order:?}");
        // They alternate: neither runs twice in a row.
        assert!(order.windows(2).all(|w| w[0] != w[1]), "{order:?}");
    }

    #[test]
    fn a_newcomer_runs_next_after_the_program_running_now() {
        let mut q = RunQueue::default();
        let heavy = party("heavy");
        for t in 0..10 {
            q.join(&heavy);
            q.ready(&heavy, t);
        }
        // The heavy party has computed a while when the light one arrives.
        run(&mut q, 50, 2 * MS);
        let (p, task) = q.next().unwrap();
        assert_eq!(&*p, "heavy");
        let light = party("light");
        q.join(&light);
        q.ready(&light, 99);
        q.ready(&p, task);
        q.ran(&p, 2 * MS);
        assert_eq!(
            q.next().map(|(p, t)| (p.to_string(), t)),
            Some(("light".into(), 99))
        );
    }

    #[test]
    fn a_party_that_waited_gets_one_slice_of_credit_and_no_more() {
        let mut q = RunQueue::default();
        let (busy, waiter) = (party("busy"), party("waiter"));
        q.join(&busy);
        q.ready(&busy, 1);
        q.join(&waiter);
        q.ready(&waiter, 2);
        // Both ran once; then the waiter waits (not ready) while busy computes 100 ms.
        assert_eq!(run(&mut q, 1, 2 * MS), ["busy"]);
        let (w, t) = q.next().unwrap();
        assert_eq!(&*w, "waiter");
        q.ran(&w, 2 * MS);
        assert_eq!(run(&mut q, 50, 2 * MS), vec!["busy"; 50]);
        // Back at the floor (98 ms, busy's last start, less a slice), against busy's 102 ms:
        // it runs first, twice, and then they take turns. Its wait banked a slice, not 100 ms.
        q.ready(&w, t);
        assert_eq!(q.parties[&w].vtime, nanos(98 * MS));
        let order = run(&mut q, 6, 2 * MS);
        assert_eq!(
            order,
            ["waiter", "waiter", "busy", "waiter", "busy", "waiter"]
        );
    }

    #[test]
    fn a_newcomer_starts_one_slice_before_the_floor() {
        let mut q = RunQueue::default();
        // Named against the order they get in line, so a tie is not decided by the name.
        let (a, b) = (party("zed"), party("amy"));
        q.join(&a);
        q.ready(&a, 1);
        assert_eq!(run(&mut q, 1, 10 * MS), ["zed"]);
        // zed's virtual time is 10 ms, the floor 0 until it runs again.
        assert_eq!(run(&mut q, 1, 10 * MS), ["zed"]);
        // Floor 10 ms: amy arrives at 8 ms, zed is at 20 ms.
        q.join(&b);
        q.ready(&b, 2);
        assert_eq!(q.parties[&b].vtime, nanos(8 * MS));
        // amy runs while she is behind (8, 10, ... 18 < 20); at 20 they tie and zed, in line
        // first, runs; then amy.
        let order = run(&mut q, 8, 2 * MS);
        assert_eq!(
            order,
            ["amy", "amy", "amy", "amy", "amy", "amy", "zed", "amy"],
            "{order:?}"
        );
    }

    #[test]
    fn a_partys_programs_take_turns_oldest_first() {
        let mut q = RunQueue::default();
        let p = party("p");
        for t in 0..3 {
            q.join(&p);
            q.ready(&p, t);
        }
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (party, t) = q.next().unwrap();
            tasks.push(t);
            q.ready(&party, t);
            q.ran(&party, MS);
        }
        assert_eq!(tasks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_party_is_forgotten_when_its_last_program_ends() {
        let mut q = RunQueue::default();
        let p = party("p");
        q.join(&p);
        q.join(&p);
        q.ready(&p, 1);
        let (party, _) = q.next().unwrap();
        q.ran(&party, MS);
        q.leave(&p);
        assert!(q.parties.contains_key(&p), "one program left");
        q.leave(&p);
        assert!(!q.parties.contains_key(&p));
        assert!(q.next().is_none());
        // A program of a party nobody joined is not run.
        q.ready(&party, 2);
        assert!(q.next().is_none());
    }

    #[test]
    fn a_program_woken_twice_is_in_line_once_per_wake_and_a_party_once() {
        let mut q = RunQueue::default();
        let p = party("p");
        q.join(&p);
        q.ready(&p, 1);
        q.ready(&p, 1);
        assert_eq!(q.parties[&p].ready.len(), 2);
        assert_eq!(q.order.len(), 1, "the party is in line once");
    }
}
