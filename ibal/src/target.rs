//! The far end of an SRP initiator's connection, as the initiator meets it: a target port
//! it logs in to, which answers what it sends over the wire; and [`Wire`], the adapter as
//! every far end (a target, an IPoIB peer) is handed it.
//!
//! On a real fabric the target is another machine and the initiator only sends and
//! receives. A host that simulates the fabric has to run the target somewhere; it runs it
//! on the initiator's turn, before and after the initiator's own work, so that a reply
//! never overtakes the command it answers. The initiator sees it through [`Target`] only:
//! the simulated target itself lives in the lab (`hcabus-lab`), never in the product.

use core::any::Any;
use core::fmt::Debug;

use hcabus::fabric::{Fabric, RemoteError, RemoteRdma, WireMsg};
use hcabus::verbs::{Lid, Mgid, Qpn, RcTransport, RemoteQp, Verbs};
use hcabus::{Duration, Instant};
use rand::RngCore;

/// A login the target did not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoginRejected {
    /// SRP_LOGIN_REJ, insufficient resources: past one of its limits.
    #[error("login rejected: insufficient resources ({0})")]
    Busy(&'static str),
    /// The target is restarting: nothing answers the CM REQ.
    #[error("no answer: the target is restarting")]
    Restarting,
    /// The CM REQ does not reach the target: its route is cut.
    #[error("no answer: the route to the target is cut")]
    Unreachable,
}

/// What a remote peer can do to the host's adapter, object-safe: [`Fabric`]'s calls with
/// their filters as trait objects, and the adapter's transport timer. Every adapter that
/// carries a fabric is one, so a [`Target`] is handed the device as it is.
pub trait Wire {
    fn rc_transport(&self) -> RcTransport;
    fn login_refused(&mut self) -> bool;
    fn wire_take(&mut self, wanted: &dyn Fn(&WireMsg) -> bool) -> Option<WireMsg>;
    fn wire_front(&mut self, wanted: &dyn Fn(&WireMsg) -> bool) -> Option<WireMsg>;
    fn wire_drop(&mut self, wanted: &dyn Fn(&WireMsg) -> bool) -> Option<WireMsg>;
    fn carries(&self, lid: Lid, since: Instant, at: Instant) -> bool;
    fn remote_send(&mut self, from: RemoteQp, to: Qpn, data: &[u8]) -> Result<(), RemoteError>;
    fn remote_send_mcast(&mut self, mgid: Mgid, data: &[u8]) -> Result<u32, RemoteError>;
    fn remote_rdma_write(&mut self, rdma: RemoteRdma, data: &[u8]) -> Result<(), RemoteError>;
    fn remote_rdma_read(&mut self, rdma: RemoteRdma, out: &mut [u8]) -> Result<(), RemoteError>;
}

impl<D: Fabric + Verbs + ?Sized> Wire for D {
    fn rc_transport(&self) -> RcTransport {
        Verbs::rc_transport(self)
    }
    fn login_refused(&mut self) -> bool {
        Fabric::remote_login_refused(self)
    }
    fn wire_take(&mut self, wanted: &dyn Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        Fabric::wire_take(self, wanted)
    }
    fn wire_front(&mut self, wanted: &dyn Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        Fabric::wire_front(self, wanted)
    }
    fn wire_drop(&mut self, wanted: &dyn Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        Fabric::wire_drop(self, wanted)
    }
    fn carries(&self, lid: Lid, since: Instant, at: Instant) -> bool {
        Fabric::carries(self, lid, since, at)
    }
    fn remote_send(&mut self, from: RemoteQp, to: Qpn, data: &[u8]) -> Result<(), RemoteError> {
        Fabric::remote_send(self, from, to, data)
    }
    fn remote_send_mcast(&mut self, mgid: Mgid, data: &[u8]) -> Result<u32, RemoteError> {
        Fabric::remote_send_mcast(self, mgid, data)
    }
    fn remote_rdma_write(&mut self, rdma: RemoteRdma, data: &[u8]) -> Result<(), RemoteError> {
        Fabric::remote_rdma_write(self, rdma, data)
    }
    fn remote_rdma_read(&mut self, rdma: RemoteRdma, out: &mut [u8]) -> Result<(), RemoteError> {
        Fabric::remote_rdma_read(self, rdma, out)
    }
}

/// The target port an initiator logs in to, run on the initiator's turn.
pub trait Target: Debug + Send + Any {
    /// The CM REQ of a login sent at `now` over `wire`: accepted, how long the exchange
    /// and the SRP login take until the connection carries commands (the target's and
    /// the route's time, not the initiator's); else why not.
    fn admit(&mut self, wire: &mut dyn Wire, now: Instant) -> Result<Duration, LoginRejected>;
    /// The login from `initiator`: the target's queue pair for the connection.
    fn login(&mut self, initiator: RemoteQp) -> RemoteQp;
    /// Whether the target dropped the connection since last asked (once per drop).
    fn take_dropped(&mut self) -> bool;
    /// When it next has something to do on its own: an answer due, a phase of its route.
    fn next_due(&self) -> Option<Instant>;
    /// Takes what the initiator sent it off the wire.
    fn intake(&mut self, wire: &mut dyn Wire, now: Instant, rng: &mut dyn RngCore);
    /// Executes what is due and sends the answers that are.
    fn process(&mut self, wire: &mut dyn Wire, now: Instant);
    /// The concrete target, for the host that made it (its statistics, its connection).
    fn as_any(&self) -> &dyn Any;
}
