//! The data-path half of the hardware: the verbs an access layer drives (docs/design.md §7).
//!
//! [`crate::hca::Hca`] is what the coordinator needs to reset a device; [`Verbs`] is what
//! IBAL needs to use one: protection domains, completion queues, queue pairs, memory regions
//! and address handles, and posting work to them. `SimHca` implements both; the Windows
//! build would implement both on the real command interface.
//!
//! Every method is short and never blocks: commands that a real device answers through a
//! mailbox are modelled as completing at once, so a host decides where it may call them.

use bitflags::bitflags;

mod transport;
pub use transport::{RcTransport, TransportError};

/// Protection domain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pdn(pub u32);
/// Completion queue number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cqn(pub u32);
/// Queue pair number (24 bits on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Qpn(pub u32);
/// Address handle number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ahn(pub u32);

/// Local identifier of a port on the fabric.
pub type Lid = u16;
/// A multicast group's GID.
pub type Mgid = u128;

/// The keys of a memory region: the L-Key for local work requests, the R-Key a remote peer
/// presents with RDMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
}

bitflags! {
    /// What a memory region allows.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        const LOCAL_WRITE = 1 << 0;
        const REMOTE_READ = 1 << 1;
        const REMOTE_WRITE = 1 << 2;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected: one remote peer, sends and RDMA.
    Rc,
    /// Unreliable datagram: any peer per send through an address handle, multicast.
    Ud,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset,
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    Error,
}

/// The other end of a reliable connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteQp {
    pub lid: Lid,
    pub qpn: Qpn,
}

/// What a queue pair is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub pd: Pdn,
    pub qp_type: QpType,
    pub send_cq: Cqn,
    pub recv_cq: Cqn,
    pub port: u8,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
}

/// What a memory region is registered with: `[addr, addr + len)` in protection domain `pd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrAttr {
    pub pd: Pdn,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
}

/// One scatter/gather element: a local buffer named through an L-Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

/// Where a send goes: the connected peer (RC) or a datagram destination (UD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendDest {
    Connected,
    Datagram { ah: Ahn, qpn: Qpn },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub sge: Sge,
    pub dest: SendDest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sge: Sge,
}

/// Status of a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    Success,
    /// The L-Key did not cover the buffer.
    LocalProtection,
    /// The receive buffer was too small for the message.
    LocalLength,
    /// The queue pair is in error or gone: the work request was never executed.
    Flushed,
    /// A reliable send got no acknowledgement (its port has no link): the queue pair is now
    /// in error, as after the hardware's transport retries.
    RetryExceeded,
}

impl WcStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            WcStatus::Success => "success",
            WcStatus::LocalProtection => "local protection error",
            WcStatus::LocalLength => "local length error",
            WcStatus::Flushed => "flushed",
            WcStatus::RetryExceeded => "transport retry counter exceeded",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    Send,
    Recv,
}

/// One completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe {
    pub wr_id: u64,
    pub qpn: Qpn,
    pub opcode: WcOpcode,
    pub status: WcStatus,
    pub byte_len: u32,
}

/// A verbs command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum VerbsError {
    /// The device is in reset, in a catastrophic error, or its commands time out.
    #[error("device error")]
    DeviceError,
    /// The device is not on the bus.
    #[error("device absent")]
    Absent,
    /// A table or queue is full.
    #[error("no resources")]
    NoResources,
    /// No such object on the device (destroyed, or forgotten by a reset).
    #[error("no such object on the device")]
    InvalidHandle,
    /// The object is not in a state that allows the call.
    #[error("object in the wrong state")]
    InvalidState,
    /// A requested memory key is taken or malformed.
    #[error("memory key unavailable")]
    KeyUnavailable,
    /// A buffer or key does not belong to the caller's protection domain or memory.
    #[error("invalid argument")]
    InvalidArgument,
}

/// The verbs of one adapter.
pub trait Verbs {
    fn alloc_pd(&mut self) -> Result<Pdn, VerbsError>;
    fn dealloc_pd(&mut self, pd: Pdn) -> Result<(), VerbsError>;
    fn create_cq(&mut self, entries: u32) -> Result<Cqn, VerbsError>;
    fn destroy_cq(&mut self, cq: Cqn) -> Result<(), VerbsError>;
    /// The oldest completion, if any. Reading the CQ is a memory read: it works on a device
    /// in error as long as the CQ exists.
    fn poll_cq(&mut self, cq: Cqn) -> Result<Option<Cqe>, VerbsError>;
    fn create_qp(&mut self, attr: QpAttr) -> Result<Qpn, VerbsError>;
    /// Moves a queue pair to `to`; `remote` names the peer of a reliable connection on the
    /// way to `Rtr`.
    fn modify_qp(
        &mut self,
        qp: Qpn,
        to: QpState,
        remote: Option<RemoteQp>,
    ) -> Result<(), VerbsError>;
    fn destroy_qp(&mut self, qp: Qpn) -> Result<(), VerbsError>;
    /// Registers `attr`'s range. With `keys`, the region gets exactly those keys
    /// (re-registration after a reset) or the call fails with `KeyUnavailable`.
    fn reg_mr(&mut self, attr: MrAttr, keys: Option<MrKeys>) -> Result<MrKeys, VerbsError>;
    fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError>;
    fn create_ah(&mut self, pd: Pdn, port: u8, dlid: Lid) -> Result<Ahn, VerbsError>;
    fn destroy_ah(&mut self, ah: Ahn) -> Result<(), VerbsError>;
    fn attach_mcast(&mut self, qp: Qpn, mgid: Mgid, mlid: Lid) -> Result<(), VerbsError>;
    fn detach_mcast(&mut self, qp: Qpn, mgid: Mgid) -> Result<(), VerbsError>;
    /// Rings the send doorbell. A device in catastrophic error accepts the doorbell and
    /// never executes the request, as real hardware does.
    fn post_send(&mut self, qp: Qpn, wr: &SendWr) -> Result<(), VerbsError>;
    fn post_recv(&mut self, qp: Qpn, wr: &RecvWr) -> Result<(), VerbsError>;
    /// The transport timer of its reliable connections: an RC send the responder never
    /// acknowledges completes in error (`RetryExceeded`) once it runs out.
    fn rc_transport(&self) -> RcTransport {
        RcTransport::DEFAULT
    }
}

/// Capacities of the device's tables and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbsLimits {
    pub max_pds: u16,
    pub max_cqs: u16,
    pub max_cq_entries: u32,
    pub max_qps: u16,
    pub max_wr: u32,
    pub max_mrs: u16,
    pub max_ahs: u16,
    /// Host memory the device can reach by DMA, carved up at start with `dma_alloc`.
    pub dma_bytes: u32,
    /// Messages in flight on the wire.
    pub wire_capacity: u32,
}

impl Default for VerbsLimits {
    fn default() -> Self {
        VerbsLimits {
            max_pds: 64,
            max_cqs: 64,
            max_cq_entries: 512,
            max_qps: 64,
            max_wr: 512,
            max_mrs: 128,
            max_ahs: 64,
            dma_bytes: 4 << 20,
            wire_capacity: 4096,
        }
    }
}

/// Host memory the device reaches by DMA (a common buffer on Windows), carved up at start.
///
/// Access goes through a closure rather than a returned slice so that a device shared
/// between threads can hold its lock for exactly the access and no longer.
pub trait DmaMemory {
    /// Reserves `len` bytes; `None` when the memory is spent. Setup only: it never grows.
    fn dma_alloc(&mut self, len: u64) -> Option<u64>;
    /// Runs `f` on `[addr, addr + len)`; `None` when the range is not the device's memory.
    fn with_dma<R>(&mut self, addr: u64, len: u64, f: impl FnOnce(&mut [u8]) -> R) -> Option<R>;
}
