//! Reserved and touched: buffers the reset path writes are allocated at start and written
//! once, every slot, so the kernel maps their pages then and not on the reset path, where a
//! page fault must not happen (docs/design.md §6). `Vec::with_capacity` alone reserves address space
//! the first write faults in, a page at a time, one reset after another.

use alloc::vec::Vec;

/// An empty vector with room for at least `capacity`, every slot of it written once.
pub fn touched_vec<T: Clone>(capacity: usize, fill: T) -> Vec<T> {
    let mut v = Vec::with_capacity(capacity);
    v.resize(v.capacity(), fill);
    v.clear();
    v
}

/// A bounded first-in first-out queue whose every slot exists, written, from the start.
///
/// A push writes its value straight into the slot. `VecDeque::push_back` of a value the
/// caller has just built on the stack copies it with wide loads that cannot be forwarded from
/// the narrow stores that built it, which stalled the reset's fan-out on every client.
#[derive(Debug, Clone)]
pub struct Fifo<T> {
    slots: Vec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy> Fifo<T> {
    /// Room for `capacity` values (at least one), each slot written with `fill` now.
    pub fn new(capacity: usize, fill: T) -> Self {
        Fifo {
            slots: alloc::vec![fill; capacity.max(1)],
            head: 0,
            len: 0,
        }
    }

    /// Appends `value`; a full queue gives it back.
    #[inline(always)]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let cap = self.slots.len();
        if self.len == cap {
            return Err(value);
        }
        let mut at = self.head + self.len;
        if at >= cap {
            at -= cap;
        }
        self.slots[at] = value;
        self.len += 1;
        Ok(())
    }

    /// The oldest value, taken out.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head];
        self.head += 1;
        if self.head == self.slots.len() {
            self.head = 0;
        }
        self.len -= 1;
        Some(value)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Drops every value `keep` refuses, the rest kept in order; in place, no allocation.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let cap = self.slots.len();
        let mut kept = 0;
        for i in 0..self.len {
            let value = self.slots[(self.head + i) % cap];
            if keep(&value) {
                self.slots[(self.head + kept) % cap] = value;
                kept += 1;
            }
        }
        self.len = kept;
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let cap = self.slots.len();
        (0..self.len).map(move |i| &self.slots[(self.head + i) % cap])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_is_kept_and_nothing_is_left_in_it() {
        let v = touched_vec(1000, 7u32);
        assert!(v.is_empty() && v.capacity() >= 1000);
        let f = Fifo::new(1000, 7u64);
        assert!(f.is_empty() && f.capacity() == 1000);
    }

    #[test]
    fn a_fifo_gives_back_in_order_across_the_wrap_and_refuses_past_its_room() {
        let mut f = Fifo::new(3, 0u32);
        assert_eq!(f.push(1), Ok(()));
        assert!(!f.is_empty());
        assert_eq!(f.len(), 1);
        assert_eq!(f.push(2), Ok(()));
        assert_eq!(f.pop(), Some(1));
        assert_eq!(f.push(3), Ok(()));
        assert_eq!(f.push(4), Ok(()), "the third slot, past the wrap");
        assert_eq!(f.push(5), Err(5), "full: the value comes back");
        assert_eq!(f.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(
            (f.pop(), f.pop(), f.pop(), f.pop()),
            (Some(2), Some(3), Some(4), None)
        );
        assert!(f.is_empty());
    }

    #[test]
    fn retain_drops_what_it_refuses_across_the_wrap_and_frees_its_room() {
        let mut f = Fifo::new(3, 0u32);
        for v in [1, 2, 3] {
            assert_eq!(f.push(v), Ok(()));
        }
        assert_eq!(f.pop(), Some(1));
        assert_eq!(f.push(4), Ok(()), "past the wrap");
        f.retain(|v| *v != 3);
        assert_eq!(
            f.iter().copied().collect::<Vec<_>>(),
            [2, 4],
            "kept in order"
        );
        assert_eq!(f.push(6), Ok(()), "the room dropped is free again");
        assert_eq!(f.push(7), Err(7));
        assert_eq!((f.pop(), f.pop(), f.pop()), (Some(2), Some(4), Some(6)));
        f.retain(|_| false);
        assert!(f.is_empty());
    }

    #[test]
    fn a_fifo_asked_for_no_room_still_holds_one() {
        let mut f = Fifo::new(0, 0u8);
        assert_eq!((f.push(9), f.push(8)), (Ok(()), Err(8)));
        assert_eq!(f.pop(), Some(9));
    }
}
