//! QUERY_COUNTERS (version 7): what the stack above the bus did, per client kind, as
//! `rdma statistic` gives a device's counters. The bus sees no I/O itself; a host that hosts
//! the clients (the simulator) counts for them, and one that does not answers NOT_SUPPORTED.

use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::types::{ClientKind, MAX_PORTS};

/// Slots of `CountersOut::kinds`: index is the `ClientKind` number (0 unused), with room
/// to grow.
pub const KIND_SLOTS: usize = 8;

/// One client kind's I/O.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct KindCountersOut {
    /// Clients of this kind the host counts for.
    pub clients: u32,
    pub reserved: u32,
    /// I/O the clients were given (a disk's commands, IPoIB's frames, user verbs' calls).
    pub submitted: u64,
    pub completed: u64,
    /// Failed upward (a disk's, to the file system; a frame dropped; a call's EIO).
    pub failed: u64,
    /// Held now: accepted and not yet completed (waiting out a reset or a path).
    pub held: u64,
}
const_assert_eq!(size_of::<KindCountersOut>(), 40);
const_assert_eq!(offset_of!(KindCountersOut, submitted), 8);

/// Output of QUERY_COUNTERS.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct CountersOut {
    /// [`COUNTERS_FROM_HOST`]: the host counted its clients' I/O.
    pub source: u32,
    pub reserved: u32,
    pub kinds: [KindCountersOut; KIND_SLOTS],
    /// SRP logins that succeeded, and those the targets refused (each retried).
    pub logins: u64,
    pub logins_refused: u64,
    /// Times a path went down with commands that another path took over.
    pub failovers: u64,
    /// Commands taken off a path and re-issued on another.
    pub commands_moved: u64,
    /// Per port, the times its link went down (IBA PortCounters: LinkDownedCounter).
    pub link_downed: [u64; MAX_PORTS as usize],
}
const_assert_eq!(size_of::<CountersOut>(), 376);
const_assert_eq!(offset_of!(CountersOut, kinds), 8);
const_assert_eq!(offset_of!(CountersOut, logins), 328);
const_assert_eq!(offset_of!(CountersOut, link_downed), 360);

impl CountersOut {
    /// The slot of `kind`. Every kind has one: the test below takes each kind's slot, so a
    /// kind past the last slot fails it (and then needs a new version of the structure)
    /// instead of being left out of the counters.
    pub fn kind_mut(&mut self, kind: ClientKind) -> &mut KindCountersOut {
        &mut self.kinds[kind as usize]
    }

    /// Each kind with its counters, in the kind enum's order.
    pub fn by_kind(&self) -> impl Iterator<Item = (ClientKind, &KindCountersOut)> + '_ {
        ClientKind::ALL
            .into_iter()
            .map(|kind| (kind, &self.kinds[kind as usize]))
    }
}

/// `CountersOut::source`: the host counted its clients.
pub const COUNTERS_FROM_HOST: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_slot_and_is_listed_once() {
        let mut c = CountersOut::default();
        for (n, kind) in ClientKind::ALL.into_iter().enumerate() {
            c.kind_mut(kind).clients = n as u32 + 1;
        }
        let listed: alloc::vec::Vec<(ClientKind, u32)> =
            c.by_kind().map(|(k, v)| (k, v.clients)).collect();
        let expected: alloc::vec::Vec<(ClientKind, u32)> = ClientKind::ALL
            .into_iter()
            .enumerate()
            .map(|(n, k)| (k, n as u32 + 1))
            .collect();
        assert_eq!(listed, expected);
        assert_eq!(
            c.kinds[ClientKind::Srp as usize].clients,
            3,
            "indexed by the kind's number"
        );
        assert_eq!(
            c.kinds[0],
            KindCountersOut::default(),
            "slot 0 is no kind's"
        );
    }
}
