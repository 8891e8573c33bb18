//! When each agent next wants to wake, kept between steps so that a step of the virtual-time
//! host does not ask every agent (two dynamic calls per agent per step made most of the
//! cost of a reset with many clients).
//!
//! An agent whose wake is its own ([`hcabus::bus::Client::wake_is_own`]) is asked again only
//! after the host called it (start, an event, a wake); its answer waits in a heap ordered by
//! time. Every other agent (one sharing a multipath device with agents of other adapters,
//! say) is asked at each step, as before. A step visits due agents in index order and asks
//! each at its turn, exactly as a scan would: runs are the same for a seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::vec::Vec;

use crate::agent::Agent;
use hcabus::reserve::touched_vec;
use hcabus::time::Instant;

/// The wakes of a host's agents.
#[derive(Debug)]
pub(super) struct Wakes {
    /// The wake an agent gave when last asked; only for agents whose wake is their own.
    cached: Vec<Option<Instant>>,
    own: Vec<bool>,
    /// Removed agents: never asked again.
    forgotten: Vec<bool>,
    /// Agents asked at every step, in index order.
    shared: Vec<usize>,
    /// Cached wakes by time; an entry whose time is no longer its agent's is dropped when it
    /// reaches the top, so the top is always current.
    by_time: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Entries the heap may hold before it is rebuilt from `cached` (no growth, no
    /// allocation on the reset path).
    room: usize,
    /// The step under way: its time, the agents due in it by index, and whether each is
    /// already in that queue.
    step: Option<Instant>,
    due: BinaryHeap<Reverse<usize>>,
    queued: Vec<bool>,
}

impl Wakes {
    pub(super) fn new<A: ?Sized + Agent>(agents: &[std::boxed::Box<A>]) -> Self {
        let n = agents.len();
        let own: Vec<bool> = agents.iter().map(|a| a.wake_is_own()).collect();
        let room = 4 * n + 64;
        let mut by_time = BinaryHeap::from(touched_vec(room, Reverse((Instant::ZERO, 0))));
        by_time.clear();
        let mut due = BinaryHeap::from(touched_vec(n + 1, Reverse(0)));
        due.clear();
        Wakes {
            cached: std::vec![None; n],
            shared: (0..n).filter(|i| !own[*i]).collect(),
            own,
            forgotten: std::vec![false; n],
            by_time,
            room,
            step: None,
            due,
            queued: std::vec![false; n],
        }
    }

    /// Agents added after `new` (the rest of `agents`) are asked from now on.
    pub(super) fn grow<A: ?Sized + Agent>(&mut self, agents: &[std::boxed::Box<A>]) {
        for (i, a) in agents.iter().enumerate().skip(self.own.len()) {
            let own = a.wake_is_own();
            self.own.push(own);
            self.cached.push(None);
            self.queued.push(false);
            self.forgotten.push(false);
            if !own {
                self.shared.push(i);
            }
        }
        self.room = 4 * agents.len() + 64;
        self.by_time
            .reserve(self.room.saturating_sub(self.by_time.len()));
        self.due.reserve(agents.len() + 1);
    }

    /// Agent `i` is never asked again (it was removed).
    pub(super) fn forget(&mut self, i: usize) {
        self.own[i] = true;
        self.forgotten[i] = true;
        self.cached[i] = None;
        self.shared.retain(|s| *s != i);
        self.drop_stale_top();
    }

    /// Asks agent `i` again, after the host called it.
    pub(super) fn refresh<A: ?Sized + Agent>(&mut self, i: usize, agents: &[std::boxed::Box<A>]) {
        if !self.own[i] || self.forgotten[i] {
            return;
        }
        let wake = agents[i].next_wake();
        if wake == self.cached[i] {
            return;
        }
        self.cached[i] = wake;
        if let Some(at) = wake {
            if self.by_time.len() == self.room {
                self.rebuild();
            }
            self.by_time.push(Reverse((at, i)));
            if self.step.is_some_and(|now| at <= now) {
                self.enqueue(i);
            }
        }
        self.drop_stale_top();
    }

    /// The earliest wake of any agent.
    pub(super) fn next<A: ?Sized + Agent>(&self, agents: &[std::boxed::Box<A>]) -> Option<Instant> {
        let own = self.by_time.peek().map(|Reverse((at, _))| *at);
        let shared = self
            .shared
            .iter()
            .filter_map(|i| agents[*i].next_wake())
            .min();
        own.into_iter().chain(shared).min()
    }

    /// Starts a step at `now`: every agent whose own wake is due joins the step's queue.
    pub(super) fn begin_step(&mut self, now: Instant) {
        self.step = Some(now);
        while let Some(&Reverse((at, i))) = self.by_time.peek() {
            if at > now {
                break;
            }
            self.by_time.pop();
            self.enqueue(i);
            self.drop_stale_top();
        }
    }

    /// The next agent after `after` (by index) due at the step's time, asking agents that
    /// are asked every time at their turn; `None` ends the step.
    pub(super) fn next_due<A: ?Sized + Agent>(
        &mut self,
        after: Option<usize>,
        agents: &[std::boxed::Box<A>],
    ) -> Option<usize> {
        let now = self.step?;
        let first = after.map_or(0, |a| a + 1);
        let own = loop {
            match self.due.peek() {
                Some(&Reverse(i)) if i < first || self.cached[i].is_none_or(|w| w > now) => {
                    // Done already this step, or no longer due: a later step finds it.
                    self.due.pop();
                    self.queued[i] = false;
                }
                Some(&Reverse(i)) => break Some(i),
                None => break None,
            }
        };
        let shared = self
            .shared
            .iter()
            .copied()
            .filter(|i| *i >= first && own.is_none_or(|o| *i < o))
            .find(|i| agents[*i].next_wake().is_some_and(|w| w <= now));
        match (shared, own) {
            (Some(s), _) => Some(s),
            (None, Some(o)) => {
                self.due.pop();
                self.queued[o] = false;
                // Its heap entry went when the step began: forgetting its wake makes the
                // refresh after its call put whatever it says next back in the heap.
                self.cached[o] = None;
                Some(o)
            }
            (None, None) => None,
        }
    }

    /// The step is over; agents still queued are due at a later step (their heap entries
    /// stay).
    pub(super) fn end_step(&mut self) {
        self.step = None;
        while let Some(Reverse(i)) = self.due.pop() {
            self.queued[i] = false;
            // Its heap entry was taken when the step began: put the current wake back.
            if let Some(at) = self.cached[i] {
                self.push(at, i);
            }
        }
    }

    fn enqueue(&mut self, i: usize) {
        if !self.queued[i] {
            self.queued[i] = true;
            self.due.push(Reverse(i));
        }
    }

    fn push(&mut self, at: Instant, i: usize) {
        if self.by_time.len() == self.room {
            self.rebuild();
        }
        self.by_time.push(Reverse((at, i)));
        self.drop_stale_top();
    }

    fn drop_stale_top(&mut self) {
        while let Some(&Reverse((at, i))) = self.by_time.peek() {
            if self.cached[i] == Some(at) {
                return;
            }
            self.by_time.pop();
        }
    }

    /// One entry per agent with a wake, from `cached`; keeps the reserved room.
    fn rebuild(&mut self) {
        let mut v = core::mem::take(&mut self.by_time).into_vec();
        v.clear();
        v.extend(
            self.cached
                .iter()
                .enumerate()
                .filter_map(|(i, w)| w.map(|at| Reverse((at, i)))),
        );
        self.by_time = BinaryHeap::from(v);
    }
}

#[cfg(test)]
mod tests {
    use std::boxed::Box;
    use std::vec::Vec;

    use super::*;
    use crate::agent::{Behavior, ScriptedAgent};
    use hcabus::types::{ClientDesc, ClientFlags, ClientKind};

    /// Scripted agents that ask for a reset at the given times (their wakes).
    fn agents(at_ms: &[u64]) -> Vec<Box<dyn Agent>> {
        at_ms
            .iter()
            .enumerate()
            .map(|(i, ms)| {
                let desc = ClientDesc::new(
                    &std::format!("a{i}"),
                    ClientKind::Custom,
                    ClientFlags::empty(),
                )
                .expect("short");
                let behavior = Behavior {
                    request_reset_at: Some(Instant::from_ms(*ms)),
                    ..Behavior::default()
                };
                Box::new(ScriptedAgent::new(desc, behavior)) as Box<dyn Agent>
            })
            .collect()
    }

    fn all_known(at_ms: &[u64]) -> (Wakes, Vec<Box<dyn Agent>>) {
        let a = agents(at_ms);
        let mut w = Wakes::new(&a);
        for i in 0..a.len() {
            w.refresh(i, &a);
        }
        (w, a)
    }

    /// A step as the host runs it: each agent due is called (here, it does nothing) and
    /// asked again.
    fn step(w: &mut Wakes, a: &[Box<dyn Agent>], now_ms: u64) -> Vec<usize> {
        w.begin_step(Instant::from_ms(now_ms));
        let mut due = Vec::new();
        while let Some(i) = w.next_due(due.last().copied(), a) {
            w.refresh(i, a);
            due.push(i);
        }
        w.end_step();
        due
    }

    #[test]
    fn the_earliest_wake_is_the_least_of_what_the_agents_said() {
        let (w, a) = all_known(&[30, 10, 20]);
        let scan = a.iter().filter_map(|x| x.next_wake()).min();
        assert_eq!(w.next(&a), scan);
        assert_eq!(scan, Some(Instant::from_ms(10)));
    }

    #[test]
    fn a_step_visits_the_due_agents_in_index_order_once() {
        let (mut w, a) = all_known(&[20, 10, 20, 30]);
        assert_eq!(step(&mut w, &a, 5), Vec::<usize>::new());
        assert_eq!(step(&mut w, &a, 20), [0, 1, 2]);
    }

    #[test]
    fn an_agent_whose_wake_did_not_move_stays_due() {
        // Called, it did nothing: its wake still stands, at the next step too, as a scan
        // of every agent would find.
        let (mut w, a) = all_known(&[50, 10]);
        assert_eq!(step(&mut w, &a, 10), [1]);
        assert_eq!(w.next(&a), Some(Instant::from_ms(10)));
        assert_eq!(step(&mut w, &a, 10), [1]);
    }

    #[test]
    fn a_forgotten_agent_is_never_due_again() {
        let (mut w, a) = all_known(&[10, 10]);
        w.forget(0);
        assert_eq!(step(&mut w, &a, 10), [1]);
        w.refresh(0, &a);
        assert_eq!(step(&mut w, &a, 10), [1]);
        assert_eq!(w.next(&a), Some(Instant::from_ms(10)));
    }

    #[test]
    fn the_heap_stays_in_its_reserved_room() {
        let (mut w, a) = all_known(&[10; 4]);
        let room = w.by_time.capacity();
        for _ in 0..1_000 {
            // Each step takes every entry and puts it back: no growth.
            assert_eq!(step(&mut w, &a, 10).len(), 4);
        }
        assert_eq!(w.by_time.capacity(), room);
    }
}
