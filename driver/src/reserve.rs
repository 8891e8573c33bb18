//! Reserved and touched: buffers the reset path writes are allocated at start and written
//! once, every slot, so the kernel maps their pages then and not on the reset path, where a
//! page fault must not happen (docs/design.md §6). `Vec::with_capacity` alone reserves address space
//! the first write faults in, a page at a time, one reset after another.

use alloc::vec::Vec;

use crate::policy::PolicyError;

/// The allocator refused a reservation: which configuration key sized it. In the kernel that
/// is a short pool, answered STATUS_INSUFFICIENT_RESOURCES; never an abort or a bugcheck.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no memory for what `{key}` asks")]
pub struct OutOfMemory {
    pub key: &'static str,
}

impl From<OutOfMemory> for PolicyError {
    fn from(e: OutOfMemory) -> Self {
        PolicyError {
            field: e.key,
            problem: "the memory it asks for could not be had",
        }
    }
}

/// `len` copies of `fill`, the room asked of the allocator first: a refusal comes back as an
/// error naming `key`, and the fill then allocates nothing more.
pub fn try_filled<T: Clone>(key: &'static str, len: usize, fill: T) -> Result<Vec<T>, OutOfMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| OutOfMemory { key })?;
    v.resize(len, fill);
    Ok(v)
}

/// Where a reservation's memory comes from. [`Heap`] fills it through `Vec`'s own methods,
/// which keep a call to the allocation-error handler for a growth that never comes (the room
/// was reserved first); a kernel host fills the room it reserved slot by slot instead, so that
/// the handler, and the unwinding code of the standard library behind it, is not in its
/// image at all (docs/windows.md, "Memory").
pub trait Reserve {
    /// `len` copies of `fill`, every slot written; the allocator's refusal names `key`.
    fn filled<T: Clone>(
        &self,
        key: &'static str,
        len: usize,
        fill: T,
    ) -> Result<Vec<T>, OutOfMemory> {
        try_filled(key, len, fill)
    }
}

/// The heap, through `Vec`'s fallible reservation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Heap;

impl Reserve for Heap {}

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

    /// No room yet: every push is refused until it is replaced by a reserved one.
    pub const fn empty() -> Self {
        Fifo {
            slots: Vec::new(),
            head: 0,
            len: 0,
        }
    }

    /// [`Fifo::new`] with room from `pool`, its allocation fallible (a refusal names `key`).
    pub fn reserved(
        pool: &impl Reserve,
        key: &'static str,
        capacity: usize,
        fill: T,
    ) -> Result<Self, OutOfMemory> {
        Ok(Fifo {
            slots: pool.filled(key, capacity.max(1), fill)?,
            head: 0,
            len: 0,
        })
    }

    /// The oldest value, left where it is.
    pub fn front(&self) -> Option<T> {
        (self.len > 0).then(|| self.slots[self.head])
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
    fn a_reservation_the_allocator_refuses_is_an_error_naming_its_key() {
        let huge = usize::MAX / 4;
        assert_eq!(
            try_filled("max_clients", huge, 0u64).err(),
            Some(OutOfMemory { key: "max_clients" })
        );
        assert_eq!(
            Fifo::reserved(&Heap, "actions", huge, 0u64)
                .err()
                .map(|e| e.key),
            Some("actions")
        );
        let e = PolicyError::from(OutOfMemory {
            key: "recorder_capacity",
        });
        assert_eq!(e.field, "recorder_capacity");
        let v = try_filled("k", 5, 7u8).expect("room for five");
        assert_eq!(v, [7; 5]);
        let f = Fifo::reserved(&Heap, "k", 0, 1u8).expect("room");
        assert_eq!(f.capacity(), 1);
        assert_eq!(Heap.filled("k", 3, 2u16), Ok(std::vec![2, 2, 2]));
        assert!(Heap.filled("k", huge, 0u64).is_err());
    }

    #[test]
    fn the_front_is_the_value_pop_gives_next_and_stays_until_popped() {
        let mut f = Fifo::new(2, 0u32);
        assert_eq!(f.front(), None);
        assert_eq!((f.push(1), f.push(2)), (Ok(()), Ok(())));
        assert_eq!((f.front(), f.front(), f.len()), (Some(1), Some(1), 2));
        assert_eq!(f.pop(), Some(1));
        assert_eq!(f.push(3), Ok(()), "past the wrap");
        assert_eq!(f.front(), Some(2));
        assert_eq!((f.pop(), f.front()), (Some(2), Some(3)));
    }

    #[test]
    fn a_fifo_asked_for_no_room_still_holds_one() {
        let mut f = Fifo::new(0, 0u8);
        assert_eq!((f.push(9), f.push(8)), (Ok(()), Err(8)));
        assert_eq!(f.pop(), Some(9));
    }
}
