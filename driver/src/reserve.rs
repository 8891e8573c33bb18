//! Reserved and touched: buffers the reset path writes are allocated at start and written
//! once, every slot, so the kernel maps their pages then and not on the reset path, where a
//! page fault must not happen (SPEC §6). `Vec::with_capacity` alone reserves address space
//! the first write faults in, a page at a time, one reset after another.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// An empty vector with room for at least `capacity`, every slot of it written once.
pub fn touched_vec<T: Clone>(capacity: usize, fill: T) -> Vec<T> {
    let mut v = Vec::with_capacity(capacity);
    v.resize(v.capacity(), fill);
    v.clear();
    v
}

/// An empty ring with room for at least `capacity`, every slot of it written once.
pub fn touched_deque<T: Clone>(capacity: usize, fill: T) -> VecDeque<T> {
    let mut d = VecDeque::with_capacity(capacity);
    d.resize(d.capacity(), fill);
    d.clear();
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_is_kept_and_nothing_is_left_in_it() {
        let v = touched_vec(1000, 7u32);
        assert!(v.is_empty() && v.capacity() >= 1000);
        let d = touched_deque(1000, 7u64);
        assert!(d.is_empty() && d.capacity() >= 1000);
    }
}
