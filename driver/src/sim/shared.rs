//! `SharedSimHca`: one simulated adapter on the wall clock, shared by the threaded host's
//! reset steps, the clients' verbs and a test that injects faults.
//!
//! Every call locks the adapter for that call alone, as every verb on a real adapter is one
//! short command: nobody holds the device across a call to the bus, so the lock cannot
//! take part in a cycle (the order is a client's lock, the access layer's, then this one).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::fabric::{Fabric, RemoteError, WireMsg};
use crate::hca::{Hca, HealthSample, HwError, Identity, Readiness};
use crate::sim::hca::SimHca;
use crate::time::Instant;
use crate::verbs::*;

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

impl Hca for SharedSimHca {
    fn save_config(&mut self) -> Result<(), HwError> {
        self.with(|h| h.save_config())
    }
    fn restore_config(&mut self) -> Result<(), HwError> {
        self.with(|h| h.restore_config())
    }
    fn assert_reset(&mut self) -> Result<(), HwError> {
        self.with(|h| h.assert_reset())
    }
    fn function_level_reset(&mut self) -> Result<(), HwError> {
        self.with(|h| h.function_level_reset())
    }
    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        self.with(|h| h.probe_ready())
    }
    fn init_command_interface(&mut self) -> Result<(), HwError> {
        self.with(|h| h.init_command_interface())
    }
    fn identity(&mut self) -> Result<Identity, HwError> {
        self.with(|h| h.identity())
    }
    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        self.with(|h| h.read_health())
    }
}

impl Verbs for SharedSimHca {
    fn alloc_pd(&mut self) -> Result<Pdn, VerbsError> {
        self.with(|h| h.alloc_pd())
    }
    fn dealloc_pd(&mut self, pd: Pdn) -> Result<(), VerbsError> {
        self.with(|h| h.dealloc_pd(pd))
    }
    fn create_cq(&mut self, entries: u32) -> Result<Cqn, VerbsError> {
        self.with(|h| h.create_cq(entries))
    }
    fn destroy_cq(&mut self, cq: Cqn) -> Result<(), VerbsError> {
        self.with(|h| h.destroy_cq(cq))
    }
    fn poll_cq(&mut self, cq: Cqn) -> Result<Option<Cqe>, VerbsError> {
        self.with(|h| h.poll_cq(cq))
    }
    fn create_qp(&mut self, attr: QpAttr) -> Result<Qpn, VerbsError> {
        self.with(|h| h.create_qp(attr))
    }
    fn modify_qp(
        &mut self,
        qp: Qpn,
        to: QpState,
        remote: Option<RemoteQp>,
    ) -> Result<(), VerbsError> {
        self.with(|h| h.modify_qp(qp, to, remote))
    }
    fn destroy_qp(&mut self, qp: Qpn) -> Result<(), VerbsError> {
        self.with(|h| h.destroy_qp(qp))
    }
    fn reg_mr(
        &mut self,
        pd: Pdn,
        addr: u64,
        len: u64,
        access: Access,
        keys: Option<MrKeys>,
    ) -> Result<MrKeys, VerbsError> {
        self.with(|h| h.reg_mr(pd, addr, len, access, keys))
    }
    fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        self.with(|h| h.dereg_mr(lkey))
    }
    fn create_ah(&mut self, pd: Pdn, port: u8, dlid: Lid) -> Result<Ahn, VerbsError> {
        self.with(|h| h.create_ah(pd, port, dlid))
    }
    fn destroy_ah(&mut self, ah: Ahn) -> Result<(), VerbsError> {
        self.with(|h| h.destroy_ah(ah))
    }
    fn attach_mcast(&mut self, qp: Qpn, mgid: Mgid, mlid: Lid) -> Result<(), VerbsError> {
        self.with(|h| h.attach_mcast(qp, mgid, mlid))
    }
    fn detach_mcast(&mut self, qp: Qpn, mgid: Mgid) -> Result<(), VerbsError> {
        self.with(|h| h.detach_mcast(qp, mgid))
    }
    fn post_send(&mut self, qp: Qpn, wr: &SendWr) -> Result<(), VerbsError> {
        self.with(|h| h.post_send(qp, wr))
    }
    fn post_recv(&mut self, qp: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        self.with(|h| h.post_recv(qp, wr))
    }
}

impl DmaMemory for SharedSimHca {
    fn dma_alloc(&mut self, len: u64) -> Option<u64> {
        self.with(|h| h.dma_alloc(len))
    }
    fn with_dma<R>(&mut self, addr: u64, len: u64, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.with(|h| h.with_dma(addr, len, f))
    }
}

impl Fabric for SharedSimHca {
    fn wire_take(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.with(|h| h.wire_take(wanted))
    }
    fn remote_send(&mut self, from: RemoteQp, to: Qpn, data: &[u8]) -> Result<(), RemoteError> {
        self.with(|h| h.remote_send(from, to, data))
    }
    fn remote_send_mcast(&mut self, mgid: Mgid, data: &[u8]) -> Result<u32, RemoteError> {
        self.with(|h| h.remote_send_mcast(mgid, data))
    }
    fn remote_rdma_write(
        &mut self,
        from: RemoteQp,
        to: Qpn,
        rkey: u32,
        addr: u64,
        data: &[u8],
    ) -> Result<(), RemoteError> {
        self.with(|h| h.remote_rdma_write(from, to, rkey, addr, data))
    }
    fn remote_rdma_read(
        &mut self,
        from: RemoteQp,
        to: Qpn,
        rkey: u32,
        addr: u64,
        out: &mut [u8],
    ) -> Result<(), RemoteError> {
        self.with(|h| h.remote_rdma_read(from, to, rkey, addr, out))
    }
}
