//! `SharedSimHca`: one simulated adapter on the wall clock, shared by the threaded host's
//! reset steps, the clients' verbs and a test that injects faults.
//!
//! Every call locks the adapter for that call alone, as every verb on a real adapter is one
//! short command: nobody holds the device across a call to the bus, so the lock cannot
//! take part in a cycle (the order is a client's lock, the access layer's, then this one).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::hca::SimHca;
use hcabus::fabric::{Fabric, RemoteError, RemoteRdma, WireMsg};
use hcabus::hca::{Hca, HealthSample, HwError, Identity, Readiness};
use hcabus::time::Instant;
use hcabus::verbs::*;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics under this lock but a bug in SimHca, after which it is still whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A `SimHca` on the wall clock, shared so that a test can inject faults while the threaded
/// host drives it.
#[derive(Debug, Clone)]
pub struct SharedSimHca {
    inner: Arc<Mutex<SimHca>>,
    start: std::time::Instant,
}

impl SharedSimHca {
    pub fn new(hca: SimHca) -> Self {
        SharedSimHca {
            inner: Arc::new(Mutex::new(hca)),
            start: std::time::Instant::now(),
        }
    }

    /// Runs `f` on the device at the current wall-clock time.
    pub fn with<R>(&self, f: impl FnOnce(&mut SimHca) -> R) -> R {
        let mut hca = lock(&self.inner);
        let us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        hca.set_now(Instant::from_us(us));
        f(&mut hca)
    }
}

/// Implements a device trait for `SharedSimHca` by running each method on the locked
/// adapter: one line per method, so the forwarding cannot drift from the trait.
macro_rules! forward {
    ($trait:ident { $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)* } $($extra:item)*) => {
        impl $trait for SharedSimHca {
            $(fn $name(&mut self, $($arg: $ty),*) -> $ret {
                self.with(|h| h.$name($($arg),*))
            })*
            $($extra)*
        }
    };
}

forward!(Verbs {
    fn alloc_pd() -> Result<Pdn, VerbsError>;
    fn dealloc_pd(pd: Pdn) -> Result<(), VerbsError>;
    fn create_cq(entries: u32) -> Result<Cqn, VerbsError>;
    fn destroy_cq(cq: Cqn) -> Result<(), VerbsError>;
    fn poll_cq(cq: Cqn) -> Result<Option<Cqe>, VerbsError>;
    fn create_qp(attr: QpAttr) -> Result<Qpn, VerbsError>;
    fn modify_qp(qp: Qpn, to: QpState, remote: Option<RemoteQp>) -> Result<(), VerbsError>;
    fn destroy_qp(qp: Qpn) -> Result<(), VerbsError>;
    fn reg_mr(attr: MrAttr, keys: Option<MrKeys>) -> Result<MrKeys, VerbsError>;
    fn dereg_mr(lkey: u32) -> Result<(), VerbsError>;
    fn create_ah(pd: Pdn, port: u8, dlid: Lid) -> Result<Ahn, VerbsError>;
    fn destroy_ah(ah: Ahn) -> Result<(), VerbsError>;
    fn attach_mcast(qp: Qpn, mgid: Mgid, mlid: Lid) -> Result<(), VerbsError>;
    fn detach_mcast(qp: Qpn, mgid: Mgid) -> Result<(), VerbsError>;
    fn post_send(qp: Qpn, wr: &SendWr) -> Result<(), VerbsError>;
    fn post_recv(qp: Qpn, wr: &RecvWr) -> Result<(), VerbsError>;
}
    fn rc_transport(&self) -> RcTransport {
        lock(&self.inner).config().transport
    }
);

forward!(Hca {
    fn save_config() -> Result<(), HwError>;
    fn restore_config() -> Result<(), HwError>;
    fn assert_reset() -> Result<(), HwError>;
    fn function_level_reset() -> Result<(), HwError>;
    fn probe_ready() -> Result<Readiness, HwError>;
    fn init_command_interface() -> Result<(), HwError>;
    fn identity() -> Result<Identity, HwError>;
    fn read_health() -> Result<HealthSample, HwError>;
});

impl DmaMemory for SharedSimHca {
    fn dma_alloc(&mut self, len: u64) -> Option<u64> {
        self.with(|h| h.dma_alloc(len))
    }
    fn with_dma<R>(&mut self, addr: u64, len: u64, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.with(|h| h.with_dma(addr, len, f))
    }
}

forward!(Fabric {
    fn remote_send(from: RemoteQp, to: Qpn, data: &[u8]) -> Result<(), RemoteError>;
    fn remote_send_mcast(mgid: Mgid, data: &[u8]) -> Result<u32, RemoteError>;
    fn remote_rdma_write(rdma: RemoteRdma, data: &[u8]) -> Result<(), RemoteError>;
    fn remote_rdma_read(rdma: RemoteRdma, out: &mut [u8]) -> Result<(), RemoteError>;
}
    fn wire_take(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.with(|h| h.wire_take(wanted))
    }
    fn wire_front(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.with(|h| h.wire_front(wanted))
    }
    fn wire_drop(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.with(|h| h.wire_drop(wanted))
    }
    fn remote_login_refused(&mut self) -> bool {
        self.with(|h| h.remote_login_refused())
    }
);
