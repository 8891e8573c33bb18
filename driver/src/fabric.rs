//! The far side of the wire: what a remote peer (an SRP target, an IPoIB host) does to this
//! host's adapter, for a device that can play both sides.
//!
//! Real hardware has no use for it: its peers are across a real fabric. The simulated
//! adapter implements [`Fabric`] so that the clients' peers (which live beside the clients in
//! the simulation) reach the host's queue pairs and memory the way the wire would, and
//! nothing here needs `std`: a host that runs the clients only needs a device that is
//! [`crate::verbs::Verbs`], [`crate::verbs::DmaMemory`] and `Fabric`.

use crate::time::Instant;
use crate::verbs::{Lid, Mgid, Qpn, RemoteQp};

/// Largest message the simulated wire carries: enough for an SRP command or an IPoIB frame
/// of the model.
pub const WIRE_MTU: usize = 256;

/// The first port's LID; port `n` has `HOST_LID_BASE + n - 1`.
pub const HOST_LID_BASE: Lid = 1;

/// A message on the wire, from a host queue pair to a remote peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireMsg {
    pub src_lid: Lid,
    pub src_qpn: Qpn,
    pub dlid: Lid,
    /// The destination queue pair (the connected peer's for RC).
    pub dqpn: Qpn,
    pub len: u16,
    pub data: [u8; WIRE_MTU],
    /// A reliable send's place in the adapter's transport (0 for a datagram): taking the
    /// message off the wire acknowledges it.
    pub seq: u64,
    /// When a reliable send was first transmitted: its retransmissions follow from it and
    /// the adapter's [`crate::verbs::RcTransport`].
    pub sent_at: Instant,
}

impl WireMsg {
    pub fn payload(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }
}

/// Why a remote peer's operation on this host failed, as the peer's own HCA reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemoteError {
    /// The host's adapter does not answer (in reset, dead, or removed): the peer times out.
    HostDown,
    /// No such queue pair on the host (destroyed, or forgotten by a reset).
    NoSuchQp,
    /// The queue pair is connected to someone else, or not ready to receive.
    NotConnected,
    /// Remote access error: bad R-Key, range or rights.
    AccessError,
    /// Receiver not ready: no receive posted.
    ReceiverNotReady,
    /// The message did not fit the posted receive buffer.
    LengthError,
    /// The host's port of that queue pair has no link (cable out, training, not yet swept):
    /// nothing reaches it, and the peer times out.
    LinkDown,
}

impl RemoteError {
    pub const fn as_str(self) -> &'static str {
        match self {
            RemoteError::HostDown => "host down",
            RemoteError::NoSuchQp => "no such queue pair",
            RemoteError::NotConnected => "not connected",
            RemoteError::AccessError => "remote access error",
            RemoteError::ReceiverNotReady => "receiver not ready",
            RemoteError::LengthError => "length error",
            RemoteError::LinkDown => "link down",
        }
    }
}

impl core::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for RemoteError {}

/// A remote peer's RDMA READ or WRITE: the peer, the host queue pair it arrives on, and its
/// RDMA header's memory key and address (IBA 9.3.3, the RETH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRdma {
    pub from: RemoteQp,
    pub to: Qpn,
    pub rkey: u32,
    pub addr: u64,
}

impl RemoteRdma {
    pub const fn new(from: RemoteQp, to: Qpn, rkey: u32, addr: u64) -> Self {
        RemoteRdma {
            from,
            to,
            rkey,
            addr,
        }
    }
}

/// What a remote peer can do to the host's adapter over the fabric.
pub trait Fabric {
    /// Whether the remote target an initiator logs in to refuses this login as busy (a
    /// thousand hosts logging in at once): asked by a simulated target as a login arrives
    /// (the lab's `SrpTarget::admit`), never by the initiator. Only the simulator's fabric
    /// is ever busy.
    fn remote_login_refused(&mut self) -> bool {
        false
    }
    /// Takes the oldest message on the wire that `wanted` accepts: the peer received it, so
    /// a reliable send is acknowledged (its send completes).
    fn wire_take(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg>;
    /// A copy of the oldest message on the wire that `wanted` accepts, left there: a peer
    /// whose route may lose it decides first.
    fn wire_front(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg>;
    /// Takes the oldest message `wanted` accepts without acknowledging it: it reached no
    /// queue pair (a connection the peer no longer has), and its sender's transport gives
    /// up on it in time.
    fn wire_drop(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg>;
    /// Whether a transmission at `at`, on a connection made at `since` with the host port
    /// whose queue pairs send from `lid`, reached that port: Active then, and under the
    /// LID it had at `since` (a port a new master renumbered answers its old address no
    /// more). A peer's reliable transport judges each transmission of a message by it, as
    /// by its route: a port that went dark swallows what crosses it, and the transmission
    /// after its return gets through. Only a simulated port ever goes dark.
    fn carries(&self, lid: Lid, since: Instant, at: Instant) -> bool {
        let _ = (lid, since, at);
        true
    }
    /// A remote peer sends `data` to host queue pair `to`.
    fn remote_send(&mut self, from: RemoteQp, to: Qpn, data: &[u8]) -> Result<(), RemoteError>;
    /// A remote peer sends to multicast group `mgid`; returns the host queue pairs reached.
    fn remote_send_mcast(&mut self, mgid: Mgid, data: &[u8]) -> Result<u32, RemoteError>;
    /// A remote peer's RDMA WRITE into host memory through `rkey`.
    fn remote_rdma_write(&mut self, rdma: RemoteRdma, data: &[u8]) -> Result<(), RemoteError>;
    /// A remote peer's RDMA READ from host memory through `rkey`.
    fn remote_rdma_read(&mut self, rdma: RemoteRdma, out: &mut [u8]) -> Result<(), RemoteError>;
}
