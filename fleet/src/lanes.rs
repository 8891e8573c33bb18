//! The fleet's schedule: its hosts in lanes, each a contiguous range of hosts with its own
//! queue of when each is next due, stepped on a thread of its own when the fleet has
//! several (`Fleet::set_workers`).
//!
//! One lane is the plain schedule: every host at each instant it has something due, in the
//! order of `(instant, host)`. Several lanes give the same run: between two of the fleet's
//! pauses (a fault, a step a fault led to, the end) each lane steps its own hosts in that
//! order, and a call into what hosts share (a target's admission, the SA) waits its turn
//! (`hcabus_lab::turns`) until every other lane has stepped every host due before. A fault
//! is applied between windows, by one thread, as one lane would.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::vec::Vec;

use hcabus::Instant;
use hcabus_lab::turns::Turns;

use super::recovery::Look;
use super::FleetNode;

/// How far a window of steps goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound {
    /// The steps due before a fault's instant: at the same instant the fault goes first.
    Before(Instant),
    /// Every step due by the instant (the run's end, or where a caller stops it).
    Through(Instant),
}

impl Bound {
    fn admits(self, t: Instant) -> bool {
        match self {
            Bound::Before(f) => t < f,
            Bound::Through(u) => t <= u,
        }
    }
}

/// One lane of hosts.
#[derive(Debug)]
pub(super) struct Lane {
    /// Its hosts are `first..first + scheduled.len()`.
    first: u32,
    /// Its hosts by their next due instant; an entry other than `scheduled` is stale.
    queue: BinaryHeap<Reverse<(Instant, u32)>>,
    scheduled: Vec<Option<Instant>>,
    /// Host steps taken.
    steps: u64,
}

/// What every lane of a window shares.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window<'a> {
    pub(super) bound: Bound,
    /// The lanes' clocks, when there are several.
    pub(super) turns: Option<&'a Turns>,
    /// Set by the lane whose host livelocked: every lane stops at its next step.
    pub(super) stop: &'a AtomicBool,
    pub(super) fleet: &'a str,
}

impl Lane {
    /// A lane of hosts `first..first + n`, none scheduled.
    pub(super) fn new(first: u32, n: usize) -> Self {
        Lane {
            first,
            queue: BinaryHeap::with_capacity(n),
            scheduled: std::vec![None; n],
            steps: 0,
        }
    }

    /// `n` hosts split into `lanes` lanes of nearly equal size (at least one host each).
    pub(super) fn split(n: u32, lanes: usize) -> Vec<Lane> {
        let lanes = lanes.clamp(1, n.max(1) as usize) as u64;
        (0..lanes)
            .map(|k| {
                let first = (k * u64::from(n) / lanes) as u32;
                let end = ((k + 1) * u64::from(n) / lanes) as u32;
                Lane::new(first, (end - first) as usize)
            })
            .collect()
    }

    pub(super) fn first(&self) -> u32 {
        self.first
    }

    pub(super) fn len(&self) -> usize {
        self.scheduled.len()
    }

    pub(super) fn steps(&self) -> u64 {
        self.steps
    }

    pub(super) fn add_steps(&mut self, steps: u64) {
        self.steps += steps;
    }

    /// When host `i` (of this lane) is next due, if it is scheduled.
    pub(super) fn scheduled(&self, i: u32) -> Option<Instant> {
        self.scheduled[(i - self.first) as usize]
    }

    /// Queues host `i` (of this lane, `host`) at its next due instant, not before `now`;
    /// `false` if it livelocked (its checker holds the violation): the run stops.
    pub(super) fn schedule(&mut self, i: u32, host: &FleetNode, now: Instant) -> bool {
        if host.livelocked() {
            return false;
        }
        if let Some(t) = host.next_due() {
            let t = t.max(now);
            self.scheduled[(i - self.first) as usize] = Some(t);
            self.queue.push(Reverse((t, i)));
        }
        true
    }

    /// Its host due first within `bound`, stale entries dropped.
    pub(super) fn next_in(&mut self, bound: Bound) -> Option<(Instant, u32)> {
        while let Some(Reverse((t, i))) = self.queue.peek().copied() {
            if self.scheduled[(i - self.first) as usize] == Some(t) {
                return bound.admits(t).then_some((t, i));
            }
            self.queue.pop();
        }
        None
    }

    /// Steps its hosts (`hosts`, from its first) at each instant one is due within the
    /// window, each then looked at by every recovery (`looks`, its parts of them); the
    /// instant of its last step.
    pub(super) fn run(
        &mut self,
        lane: usize,
        hosts: &mut [FleetNode],
        looks: &mut [Look<'_>],
        w: Window<'_>,
    ) -> Option<Instant> {
        let mut last = None;
        while !w.stop.load(Ordering::Relaxed) {
            let Some((at, i)) = self.next_in(w.bound) else {
                break;
            };
            if let Some(turns) = w.turns {
                turns.publish(lane, Some((at, i)));
            }
            self.queue.pop();
            let k = (i - self.first) as usize;
            self.scheduled[k] = None;
            let host = &mut hosts[k];
            host.run_until(at);
            self.steps += 1;
            for l in looks.iter_mut() {
                l.look(i, host, at);
            }
            last = Some(at);
            if !self.schedule(i, host, at) {
                log::error!("fleet {}: host {i} livelocked; the run stops", w.fleet);
                w.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        if let Some(turns) = w.turns {
            turns.publish(lane, None);
        }
        last
    }
}
