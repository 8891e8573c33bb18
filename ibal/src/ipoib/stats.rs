//! What an IPoIB interface counts: the report's `net` fields, and its I/O as the bus's
//! counters see it.

/// The `net` fields of the report (docs/design.md §9) and what else the interface saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStats {
    /// Sends the hardware completed.
    pub sent: u64,
    /// Sends handed back to the stack as resubmittable during a reset.
    pub completed_back: u64,
    /// Packets lost: the stack's queue overflowed or a send failed for good.
    pub dropped: u64,
    pub received_unicast: u64,
    pub received_multicast: u64,
    pub link_downs: u32,
    pub link_ups: u32,
    pub group_joins: u32,
    pub filters_restored: u32,
    /// Packets the peer received from us.
    pub peer_received: u64,
}

impl NetStats {
    pub fn add(&mut self, o: &NetStats) {
        self.sent += o.sent;
        self.completed_back += o.completed_back;
        self.dropped += o.dropped;
        self.received_unicast += o.received_unicast;
        self.received_multicast += o.received_multicast;
        self.link_downs += o.link_downs;
        self.link_ups += o.link_ups;
        self.group_joins += o.group_joins;
        self.filters_restored += o.filters_restored;
        self.peer_received += o.peer_received;
    }
}

impl NetStats {
    /// A frame is the interface's I/O: sent (completed), dropped (failed), or waiting in the
    /// stack's queue (`held` of them).
    pub fn counters(&self, held: u64) -> hcabus::bus::ClientCounters {
        let (completed, failed) = (self.sent, self.dropped);
        hcabus::bus::ClientCounters {
            submitted: completed + failed + held,
            completed,
            failed,
            held,
            ..Default::default()
        }
    }
}
