//! The fleet's own schedule: the setup's faults and the steps they lead to, in order of
//! their instants, those of one instant in the order they were scheduled. A heap, so that
//! ten thousand hosts' steps (a power-on's, every srp_daemon's rescan) cost a logarithm each
//! to schedule and nothing once done.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use hcabus::Instant;

use super::Step;

#[derive(Debug, Clone, Copy)]
struct Due {
    at: Instant,
    /// Scheduled `seq`th: the order among steps of one instant.
    seq: u64,
    step: Step,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Steps to come.
#[derive(Debug, Default)]
pub(super) struct Steps {
    heap: BinaryHeap<Reverse<Due>>,
    seq: u64,
}

impl Steps {
    /// `step` at `at`, after every step already scheduled for that instant.
    pub(super) fn push(&mut self, at: Instant, step: Step) {
        self.heap.push(Reverse(Due {
            at,
            seq: self.seq,
            step,
        }));
        self.seq += 1;
    }

    /// When the next step is due.
    pub(super) fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(d)| d.at)
    }

    /// The next step, taken off the schedule.
    pub(super) fn pop(&mut self) -> Option<(Instant, Step)> {
        self.heap.pop().map(|Reverse(d)| (d.at, d.step))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_come_by_instant_then_in_the_order_they_were_scheduled() {
        let mut s = Steps::default();
        let at = Instant::from_ms;
        s.push(at(5), Step::OsStart(1));
        s.push(at(2), Step::OsStart(2));
        s.push(at(5), Step::OsStart(3));
        s.push(at(2), Step::OsStart(4));
        assert_eq!(s.next_at(), Some(at(2)));
        let order: std::vec::Vec<Step> = std::iter::from_fn(|| s.pop().map(|(_, st)| st)).collect();
        assert_eq!(
            order,
            [
                Step::OsStart(2),
                Step::OsStart(4),
                Step::OsStart(1),
                Step::OsStart(3)
            ]
        );
        assert_eq!(s.next_at(), None);
    }
}
