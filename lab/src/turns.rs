//! Turns: the order in which a fleet stepped on several threads calls into what its hosts
//! share (a target's admission, the SA), so that it is the order one thread would give.
//!
//! A fleet steps each host at each instant it has something due, in the order of
//! `(instant, host)`. Hosts touch one another only through the objects they share, and
//! each of those (`SharedSubnet::query`, a target's admission) answers by what it was asked
//! before: the answer a host gets depends on which calls came first. Split the hosts into
//! lanes, one a thread, each stepping its own hosts in that order, and every lane publishes
//! the `(instant, host)` of the step it is on (its clock). A call into a shared object
//! waits its turn: until every other lane's clock is past the caller's step. A lane past it
//! has finished every step before, so every call that one thread would have made first has
//! been made; and a lane behind it makes its calls later, waiting in turn. The smallest
//! step never waits, so the lanes never deadlock. Lanes do their own hosts' work (nearly
//! all of it) at once; they run in step only where hosts really meet.
//!
//! A thread that is no lane (a fleet on one thread, one host's run, a test) never waits.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::vec::Vec;

use hcabus::Instant;

/// Bits of a clock kept for the host: a clock is `instant_us << HOST_BITS | host`.
const HOST_BITS: u32 = 20;
/// The latest instant a clock can hold (about 203 days): a fleet's run must end before.
pub const LAST_US: u64 = (u64::MAX >> HOST_BITS) - 1;
/// The most hosts a clock can tell apart.
pub const MAX_HOST: u32 = (1 << HOST_BITS) - 1;
/// The clock of a lane with no step left before the fleet's next pause.
const DONE: u64 = u64::MAX;

/// The clocks of a fleet's lanes.
#[derive(Debug)]
pub struct Turns {
    clocks: Vec<AtomicU64>,
}

thread_local! {
    /// This thread's lane, while it steps one.
    static LANE: RefCell<Option<(Arc<Turns>, usize)>> = const { RefCell::new(None) };
}

impl Turns {
    /// Clocks for `lanes` lanes, each done until told otherwise.
    pub fn new(lanes: usize) -> Arc<Self> {
        Arc::new(Turns {
            clocks: (0..lanes).map(|_| AtomicU64::new(DONE)).collect(),
        })
    }

    /// Lane `lane` is at the step of `host` at `at` (or, with `None`, has no step left
    /// before the next pause). Its clocks only go forward: a lane publishes its next step
    /// only once the one before is over.
    pub fn publish(&self, lane: usize, step: Option<(Instant, u32)>) {
        let clock = step.map_or(DONE, |(at, host)| clock(at, host));
        if let Some(c) = self.clocks.get(lane) {
            c.store(clock, Ordering::Release);
        }
    }

    /// Waits until every lane but `lane` is past `lane`'s step.
    fn wait(&self, lane: usize) {
        let Some(mine) = self.clocks.get(lane).map(|c| c.load(Ordering::Relaxed)) else {
            return;
        };
        for (o, other) in self.clocks.iter().enumerate() {
            let mut spins = 0u32;
            while o != lane && other.load(Ordering::Acquire) < mine {
                // A short spin for a lane about to move on, then the processor to it: the
                // machine may have fewer cores than the fleet has lanes.
                if spins < 64 {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

fn clock(at: Instant, host: u32) -> u64 {
    debug_assert!(at.as_us() <= LAST_US && host <= MAX_HOST);
    at.as_us().min(LAST_US) << HOST_BITS | u64::from(host.min(MAX_HOST))
}

/// This thread steps lane `lane` of `turns` until the guard is dropped.
#[must_use = "the thread is a lane only while the guard lives"]
pub fn enter(turns: &Arc<Turns>, lane: usize) -> LaneGuard {
    LANE.with(|l| *l.borrow_mut() = Some((Arc::clone(turns), lane)));
    LaneGuard(())
}

/// While it lives, its thread is a lane ([`enter`]).
#[derive(Debug)]
pub struct LaneGuard(());

impl Drop for LaneGuard {
    fn drop(&mut self) {
        LANE.with(|l| *l.borrow_mut() = None);
    }
}

/// Before a call into what hosts share: waits for this thread's turn, if it is a lane.
pub fn wait_turn() {
    LANE.with(|l| {
        if let Some((turns, lane)) = &*l.borrow() {
            turns.wait(*lane);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_order_by_instant_then_host() {
        let a = clock(Instant::from_us(5), 9);
        let b = clock(Instant::from_us(6), 0);
        let c = clock(Instant::from_us(6), 1);
        assert!(a < b && b < c);
        assert!(clock(Instant::from_us(LAST_US), MAX_HOST) < DONE);
    }

    /// A lane's call waits until the other lane has moved past its step, and no longer:
    /// the calls into a shared log come in the order of their steps, whichever thread runs
    /// first.
    #[test]
    fn calls_come_in_the_order_of_their_steps() {
        use std::sync::Mutex;
        let turns = Turns::new(2);
        let log = Mutex::new(Vec::new());
        // Lane 0 has hosts 0 and 2, lane 1 hosts 1 and 3, each due at 1..=20 us.
        let steps = |lane: u32| {
            (1..=20u64).flat_map(move |t| [lane, lane + 2].map(|h| (Instant::from_us(t), h)))
        };
        turns.publish(0, steps(0).next());
        turns.publish(1, steps(1).next());
        std::thread::scope(|s| {
            for lane in 0..2u32 {
                let (turns, log) = (&turns, &log);
                s.spawn(move || {
                    let _g = enter(turns, lane as usize);
                    let mut it = steps(lane).peekable();
                    while let Some(step) = it.next() {
                        wait_turn();
                        log.lock().expect("the log").push(step);
                        turns.publish(lane as usize, it.peek().copied());
                    }
                });
            }
        });
        let log = log.into_inner().expect("the log");
        let mut sorted = log.clone();
        sorted.sort();
        assert_eq!(log.len(), 80);
        assert_eq!(log, sorted);
    }

    #[test]
    fn a_thread_that_is_no_lane_never_waits() {
        let turns = Turns::new(2);
        turns.publish(1, Some((Instant::ZERO, 0)));
        // Not a lane: returns although lane 1 is at the very first step.
        wait_turn();
        let g = enter(&turns, 0);
        drop(g);
        wait_turn();
    }
}
