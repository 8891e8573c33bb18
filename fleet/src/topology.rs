//! Where a fleet's hosts hang off the fabric: leaf switches of `hosts_per_leaf` hosts each,
//! in the hosts' order, under spines a fault of the fleet never takes. A host of several
//! adapters is dual-rail: its adapter `a` is on the leaf `a` after its own (wrapping), so
//! that one leaf's reboot takes one of its paths, not all of them. The targets hang off
//! leaves of their own.

use std::vec::Vec;

/// The most hosts a leaf may have: a switch's ports.
pub const MAX_HOSTS_PER_LEAF: u32 = 128;

/// The fleet's leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    pub hosts_per_leaf: u32,
    /// How many leaves the hosts fill (the last may be partly empty).
    pub leaves: u32,
}

impl Topology {
    /// `hosts` hosts at `hosts_per_leaf` a leaf (at least 1: checked by the fleet).
    pub fn new(hosts: u32, hosts_per_leaf: u32) -> Self {
        let per = hosts_per_leaf.max(1);
        Topology {
            hosts_per_leaf: per,
            leaves: hosts.div_ceil(per).max(1),
        }
    }

    /// The leaf adapter `adapter` of host `host` is cabled to.
    pub fn leaf_of(&self, host: u32, adapter: usize) -> u32 {
        let own = host / self.hosts_per_leaf;
        ((u64::from(own) + adapter as u64) % u64::from(self.leaves)) as u32
    }

    /// The hosts with an adapter on `leaf` (of `adapters` each), in order.
    pub fn hosts_on(&self, leaf: u32, hosts: u32, adapters: usize) -> Vec<u32> {
        (0..hosts)
            .filter(|h| (0..adapters).any(|a| self.leaf_of(*h, a) == leaf))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_fill_leaves_in_order_and_a_second_adapter_is_on_the_next_leaf() {
        let t = Topology::new(50, 20);
        assert_eq!(t.leaves, 3);
        assert_eq!(
            (t.leaf_of(0, 0), t.leaf_of(19, 0), t.leaf_of(20, 0)),
            (0, 0, 1)
        );
        assert_eq!((t.leaf_of(0, 1), t.leaf_of(45, 1)), (1, 0));
        assert_eq!(t.hosts_on(2, 50, 1), (40..50).collect::<Vec<u32>>());
        // Dual-rail: leaf 1 holds hosts 20..40 and the second adapters of hosts 0..20.
        assert_eq!(t.hosts_on(1, 50, 2).len(), 40);
        // One leaf: every adapter of a host on it.
        let one = Topology::new(5, 20);
        assert_eq!((one.leaves, one.leaf_of(3, 1)), (1, 0));
    }
}
