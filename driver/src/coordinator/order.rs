//! The registration order of the client slots: RESET goes out newest first, RESET_END
//! oldest first. A doubly linked list over slot indices, reserved and written at start, so
//! that a client leaving (from inside its RESET callback, say) is unlinked in constant time:
//! a vector's search and shift made a reset where every client registers again quadratic.

use alloc::vec::Vec;

use super::stage::Walk;
use crate::reserve::{OutOfMemory, Reserve};

/// No slot: the end of the list.
const NIL: u16 = u16::MAX;

#[derive(Clone, PartialEq, Eq)]
pub(super) struct Order {
    next: Vec<u16>,
    prev: Vec<u16>,
    linked: Vec<bool>,
    head: u16,
    tail: u16,
    len: usize,
}

impl core::fmt::Debug for Order {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Order {
    /// No room yet (the coordinator reserves it next).
    pub(super) const fn empty() -> Self {
        Order {
            next: Vec::new(),
            prev: Vec::new(),
            linked: Vec::new(),
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    /// Room for slots `0..max` (`max` below `u16::MAX`, which marks an end).
    #[cfg(test)]
    pub(super) fn new(max: usize) -> Self {
        match Self::reserved(&crate::reserve::Heap, max) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        }
    }

    /// Room for `max` slots from `pool`, every link written now; a refusal names
    /// `max_clients`.
    pub(super) fn reserved(pool: &impl Reserve, max: usize) -> Result<Self, OutOfMemory> {
        const KEY: &str = "max_clients";
        Ok(Order {
            next: pool.filled(KEY, max, NIL)?,
            prev: pool.filled(KEY, max, NIL)?,
            linked: pool.filled(KEY, max, false)?,
            head: NIL,
            tail: NIL,
            len: 0,
        })
    }

    /// Slots it has room for.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.next.capacity()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Slot `index` becomes the newest.
    pub(super) fn push(&mut self, index: u16) {
        let i = usize::from(index);
        if self.linked.get(i) != Some(&false) {
            debug_assert!(false, "slot {index} pushed twice or out of range");
            return;
        }
        self.linked[i] = true;
        self.prev[i] = self.tail;
        self.next[i] = NIL;
        match self.tail {
            NIL => self.head = index,
            t => self.next[usize::from(t)] = index,
        }
        self.tail = index;
        self.len += 1;
    }

    /// Slot `index` leaves the order (nothing if it is not in it).
    pub(super) fn remove(&mut self, index: u16) {
        let i = usize::from(index);
        if self.linked.get(i) != Some(&true) {
            return;
        }
        let (p, n) = (self.prev[i], self.next[i]);
        match p {
            NIL => self.head = n,
            p => self.next[usize::from(p)] = n,
        }
        match n {
            NIL => self.tail = p,
            n => self.prev[usize::from(n)] = p,
        }
        self.linked[i] = false;
        self.len -= 1;
    }

    /// The oldest slot.
    pub(super) fn first(&self) -> Option<u16> {
        (self.head != NIL).then_some(self.head)
    }

    /// The newest slot.
    pub(super) fn last(&self) -> Option<u16> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The slot after `index` (newer), if any.
    pub(super) fn after(&self, index: u16) -> Option<u16> {
        let n = self.next[usize::from(index)];
        (n != NIL).then_some(n)
    }

    /// The slot before `index` (older), if any.
    pub(super) fn before(&self, index: u16) -> Option<u16> {
        let p = self.prev[usize::from(index)];
        (p != NIL).then_some(p)
    }

    /// Where a walk `walk` starts.
    pub(super) fn end(&self, walk: Walk) -> Option<u16> {
        match walk {
            Walk::OldestFirst => self.first(),
            Walk::NewestFirst => self.last(),
        }
    }

    /// The slot a walk `walk` visits after `index`.
    pub(super) fn next(&self, index: u16, walk: Walk) -> Option<u16> {
        match walk {
            Walk::OldestFirst => self.after(index),
            Walk::NewestFirst => self.before(index),
        }
    }

    /// A walk in `walk` order that holds no borrow of the order between its steps.
    pub(super) fn walker(&self, walk: Walk) -> Walker {
        Walker {
            walk,
            cur: self.end(walk),
            left: self.len,
        }
    }

    /// Oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        core::iter::successors(self.first(), |&i| self.after(i)).take(self.len)
    }

    /// One more step of a walk that has `left` steps before it has visited every linked
    /// slot: a walk is bounded by the length, so that a broken link is a failed assertion
    /// rather than a reset that never ends.
    #[inline(always)]
    pub(super) fn step_bound(&self, left: &mut usize) -> bool {
        let Some(l) = left.checked_sub(1) else {
            debug_assert!(false, "a walk of the order outran its {} slots", self.len);
            return false;
        };
        *left = l;
        true
    }
}

/// A walk of the order whose owner may change the coordinator between steps (a delivery, a
/// record): each step takes the next slot before the current one is visited, and the walk is
/// bounded by the order's length ([`Order::step_bound`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Walker {
    walk: Walk,
    cur: Option<u16>,
    left: usize,
}

impl Walker {
    /// The next slot of the walk; `None` at its end, or past its bound (a broken link).
    #[inline(always)]
    pub(super) fn next(&mut self, order: &Order) -> Option<u16> {
        let slot = self.cur?;
        if !order.step_bound(&mut self.left) {
            return None;
        }
        self.cur = order.next(slot, self.walk);
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn leaving_and_coming_back_keeps_the_registration_order() {
        let mut o = Order::new(8);
        for i in 0..5 {
            o.push(i);
        }
        o.remove(4);
        o.remove(0);
        o.remove(2);
        o.remove(2);
        o.push(2);
        assert_eq!(o.iter().collect::<Vec<_>>(), vec![1, 3, 2]);
        assert_eq!(o.len(), 3);
        assert_eq!((o.first(), o.last()), (Some(1), Some(2)));
        assert_eq!(o.before(2), Some(3));
        assert_eq!(alloc::format!("{o:?}"), "[1, 3, 2]");
        for i in [1, 3, 2] {
            o.remove(i);
        }
        assert_eq!((o.first(), o.last(), o.len()), (None, None, 0));
    }

    /// A walk visits every slot once each way: RESET's newest first, RESET_END's oldest
    /// first, ending after the last.
    #[test]
    fn walks_visit_each_slot_once_in_their_direction() {
        let mut o = Order::new(8);
        for i in [4, 1, 6] {
            o.push(i);
        }
        let walk = |w| {
            let mut seen = vec![];
            let mut walker = o.walker(w);
            while let Some(i) = walker.next(&o) {
                seen.push(i);
            }
            seen
        };
        assert_eq!(walk(Walk::OldestFirst), vec![4, 1, 6]);
        assert_eq!(walk(Walk::NewestFirst), vec![6, 1, 4]);
        assert_eq!((o.after(6), o.before(4)), (None, None));
    }

    /// The walk's bound counts down one step per slot.
    #[test]
    fn a_walk_step_uses_one_of_the_steps_left() {
        let o = Order::new(2);
        let mut left = 2;
        assert!(o.step_bound(&mut left));
        assert_eq!(left, 1);
        assert!(o.step_bound(&mut left));
        assert_eq!(left, 0);
    }

    /// A walk longer than the order (a broken link) is a failed assertion, not a loop.
    #[test]
    #[should_panic(expected = "outran")]
    fn a_walk_past_the_length_is_refused() {
        let o = Order::new(2);
        o.step_bound(&mut 0);
    }
}
