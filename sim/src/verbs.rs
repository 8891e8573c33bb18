//! The verbs model of `SimHca`: resource tables, host memory the device reaches by DMA, and
//! a wire to simulated remote peers.
//!
//! Every table, queue and buffer is reserved when the device is built, so creating,
//! destroying and using resources never allocates: IBAL re-creates them from inside the
//! reset path (docs/design.md §6). Object numbers carry a serial that only grows, so a number from
//! before a reset never names an object made after it, as on real hardware where the
//! driver's allocator outlives the firmware's tables.

use std::collections::VecDeque;
use std::vec::Vec;

use hcabus::fabric::*;
use hcabus::types::MAX_PORTS;
use hcabus::verbs::*;

mod post;
mod transport;
mod wire;

/// Multicast groups one queue pair may be attached to.
const MCAST_PER_QP: usize = 8;
/// Object numbers: the slot index in the low bits, a serial above.
const INDEX_BITS: u32 = 8;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// Addresses of host memory start here, so that address 0 is never valid.
const DMA_BASE: u64 = 0x10_0000;

/// Counts of data-path activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VerbsStats {
    pub sends_posted: u64,
    pub recvs_posted: u64,
    /// Doorbells rung on a device in catastrophic error: accepted and never executed.
    pub lost_doorbells: u64,
    /// Reliable sends with no room on the wire (they fail their queue pair): the model's
    /// ring, which a fleet host sizes so that it never fills.
    pub wire_drops: u64,
    /// Datagrams refused for want of room on the wire, as a full send queue refuses them:
    /// their senders keep them.
    pub sends_refused: u64,
    /// Sends posted on a port with no link: a datagram is lost; a reliable one waits on
    /// the wire for a transmission after the port's return, or its budget.
    pub no_link_sends: u64,
    /// What remote peers sent, wrote or read through a port with no link: refused.
    pub no_link_remote: u64,
    pub remote_sends: u64,
    pub remote_rdma_writes: u64,
    pub remote_rdma_reads: u64,
    pub remote_access_errors: u64,
    pub cq_overruns: u64,
    pub mr_registrations: u64,
    pub preserved_registrations: u64,
    /// Reliable sends no responder acknowledged within the transport's retry budget: each
    /// completed with `RetryExceeded` and put its queue pair in error.
    pub retries_exceeded: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct PdSlot {
    live: bool,
    number: u32,
}

#[derive(Debug, Clone)]
struct CqSlot {
    live: bool,
    number: u32,
    entries: u32,
    ring: VecDeque<Cqe>,
}

#[derive(Debug, Clone)]
struct QpSlot {
    live: bool,
    number: u32,
    attr: QpAttr,
    state: QpState,
    remote: Option<RemoteQp>,
    recvs: VecDeque<RecvWr>,
    mcast: [Option<(Mgid, Lid)>; MCAST_PER_QP],
    /// Sends executed, for tests that check which queue pair a call reached.
    sends: u64,
}

#[derive(Debug, Clone, Copy)]
struct MrSlot {
    live: bool,
    keys: MrKeys,
    pd: Pdn,
    addr: u64,
    len: u64,
    access: Access,
}

#[derive(Debug, Clone, Copy, Default)]
struct AhSlot {
    live: bool,
    number: u32,
    pd: u32,
    port: u8,
    dlid: Lid,
}

/// The verbs state of one adapter. Owned by `SimHca`, which gates every call on the
/// device's health before it gets here.
#[derive(Debug, Clone)]
pub struct SimVerbs {
    limits: VerbsLimits,
    serial: u32,
    key_variant: u8,
    pds: Vec<PdSlot>,
    cqs: Vec<CqSlot>,
    qps: Vec<QpSlot>,
    mrs: Vec<MrSlot>,
    ahs: Vec<AhSlot>,
    memory: Vec<u8>,
    dma_next: u64,
    wire: VecDeque<WireMsg>,
    /// Reliable sends on the wire waiting for their acknowledgement, oldest first.
    unacked: VecDeque<transport::Unacked>,
    next_seq: u64,
    transport: RcTransport,
    /// The adapter's time, for the transport's timer.
    now: hcabus::time::Instant,
    /// Whether each port has a link (Active), as the adapter last said.
    links: [bool; MAX_PORTS as usize],
    stats: VerbsStats,
}

fn number(serial: u32, index: usize) -> u32 {
    ((serial << INDEX_BITS) | index as u32) & 0x00ff_ffff
}

fn index_of(number: u32) -> usize {
    (number & INDEX_MASK) as usize
}

impl SimVerbs {
    pub fn new(limits: VerbsLimits, transport: RcTransport) -> Self {
        let cap = |n: u16| usize::from(n).min(INDEX_MASK as usize + 1);
        let ud_placeholder = QpAttr {
            pd: Pdn(0),
            qp_type: QpType::Ud,
            send_cq: Cqn(0),
            recv_cq: Cqn(0),
            port: 1,
            max_send_wr: 0,
            max_recv_wr: 0,
        };
        SimVerbs {
            limits,
            serial: 1,
            key_variant: 0,
            pds: std::vec![PdSlot::default(); cap(limits.max_pds)],
            cqs: (0..cap(limits.max_cqs))
                .map(|_| CqSlot {
                    live: false,
                    number: 0,
                    entries: 0,
                    ring: VecDeque::with_capacity(limits.max_cq_entries as usize),
                })
                .collect(),
            qps: (0..cap(limits.max_qps))
                .map(|_| QpSlot {
                    live: false,
                    number: 0,
                    attr: ud_placeholder,
                    state: QpState::Reset,
                    remote: None,
                    recvs: VecDeque::with_capacity(limits.max_wr as usize),
                    mcast: [None; MCAST_PER_QP],
                    sends: 0,
                })
                .collect(),
            mrs: std::vec![
                MrSlot {
                    live: false,
                    keys: MrKeys { lkey: 0, rkey: 0 },
                    pd: Pdn(0),
                    addr: 0,
                    len: 0,
                    access: Access::empty(),
                };
                cap(limits.max_mrs)
            ],
            ahs: std::vec![AhSlot::default(); cap(limits.max_ahs)],
            memory: std::vec![0; limits.dma_bytes as usize],
            dma_next: DMA_BASE,
            wire: VecDeque::with_capacity(limits.wire_capacity as usize),
            unacked: VecDeque::with_capacity(limits.wire_capacity as usize),
            next_seq: 0,
            transport,
            now: hcabus::time::Instant::ZERO,
            links: [true; MAX_PORTS as usize],
            stats: VerbsStats::default(),
        }
    }

    /// Which ports have a link now (port 1 first); the adapter says so whenever its ports
    /// may have changed.
    pub(crate) fn set_links(&mut self, links: [bool; MAX_PORTS as usize]) {
        self.links = links;
    }

    /// Whether `port` has a link, as the adapter last said.
    pub fn link(&self, port: u8) -> bool {
        port.checked_sub(1)
            .and_then(|i| self.links.get(usize::from(i)))
            .copied()
            .unwrap_or(false)
    }

    pub fn stats(&self) -> &VerbsStats {
        &self.stats
    }

    /// The transport timer of its reliable connections.
    pub fn rc_transport(&self) -> RcTransport {
        self.transport
    }

    /// The device forgets every resource (a reset). Host memory and datagrams already on
    /// the wire are not the device's: they stay. A reliable send no peer took yet is gone:
    /// nothing is left to send it again.
    pub(crate) fn forget_all(&mut self) {
        for p in &mut self.pds {
            p.live = false;
        }
        for c in &mut self.cqs {
            c.live = false;
            c.ring.clear();
        }
        for q in &mut self.qps {
            q.live = false;
            q.recvs.clear();
            q.mcast = [None; MCAST_PER_QP];
        }
        // No queue pair is left to send again what no responder took.
        for i in 0..self.qps.len() {
            self.forget_sends(i);
        }
        for m in &mut self.mrs {
            m.live = false;
        }
        for a in &mut self.ahs {
            a.live = false;
        }
    }

    /// Objects the device holds now, of every kind: zero after a reset.
    pub fn live_objects(&self) -> usize {
        self.pds.iter().filter(|s| s.live).count()
            + self.cqs.iter().filter(|s| s.live).count()
            + self.qps.iter().filter(|s| s.live).count()
            + self.mrs.iter().filter(|s| s.live).count()
            + self.ahs.iter().filter(|s| s.live).count()
    }

    /// Sends a queue pair has executed; `None` if no such queue pair.
    pub fn qp_sends(&self, qp: Qpn) -> Option<u64> {
        self.qp(qp).map(|q| q.sends)
    }

    /// Whether `mgid` has `qp` attached.
    pub fn is_attached(&self, qp: Qpn, mgid: Mgid) -> bool {
        self.qp(qp)
            .is_some_and(|q| q.mcast.iter().flatten().any(|(g, _)| *g == mgid))
    }

    // ----- host memory -----

    /// Reserves `len` bytes of DMA-able host memory. Setup only: the arena never grows.
    pub fn dma_alloc(&mut self, len: u64) -> Option<u64> {
        let addr = self.dma_next.next_multiple_of(64);
        let end = addr.checked_add(len)?;
        if end - DMA_BASE > self.memory.len() as u64 {
            return None;
        }
        self.dma_next = end;
        Some(addr)
    }

    /// Every DMA buffer is given back at once: what the host's memory is after every driver
    /// that held some was removed (the arena has no per-buffer free). Whoever still holds
    /// an address must never use it again.
    pub fn dma_release_all(&mut self) {
        self.dma_next = DMA_BASE;
    }

    /// Bytes of DMA memory handed out.
    pub fn dma_in_use(&self) -> u64 {
        self.dma_next - DMA_BASE
    }

    fn range(&self, addr: u64, len: u64) -> Option<core::ops::Range<usize>> {
        let start = addr.checked_sub(DMA_BASE)?;
        let end = start.checked_add(len)?;
        (end <= self.memory.len() as u64).then_some(start as usize..end as usize)
    }

    pub fn mem(&self, addr: u64, len: u64) -> Option<&[u8]> {
        self.range(addr, len).map(|r| &self.memory[r])
    }

    pub fn mem_mut(&mut self, addr: u64, len: u64) -> Option<&mut [u8]> {
        self.range(addr, len).map(|r| &mut self.memory[r])
    }

    // ----- lookups -----

    fn qp(&self, qp: Qpn) -> Option<&QpSlot> {
        self.qps
            .get(index_of(qp.0))
            .filter(|s| s.live && s.number == qp.0)
    }

    fn qp_index(&self, qp: Qpn) -> Result<usize, VerbsError> {
        let i = index_of(qp.0);
        match self.qps.get(i) {
            Some(s) if s.live && s.number == qp.0 => Ok(i),
            _ => Err(VerbsError::InvalidHandle),
        }
    }

    fn cq_index(&self, cq: Cqn) -> Result<usize, VerbsError> {
        let i = index_of(cq.0);
        match self.cqs.get(i) {
            Some(s) if s.live && s.number == cq.0 => Ok(i),
            _ => Err(VerbsError::InvalidHandle),
        }
    }

    fn pd_live(&self, pd: Pdn) -> bool {
        self.pds
            .get(index_of(pd.0))
            .is_some_and(|s| s.live && s.number == pd.0)
    }

    fn mr_by_key(&self, key: u32, remote: bool) -> Option<&MrSlot> {
        self.mrs.get((key >> 8) as usize).filter(|m| {
            m.live
                && if remote {
                    m.keys.rkey == key
                } else {
                    m.keys.lkey == key
                }
        })
    }

    fn next_serial(&mut self) -> u32 {
        self.serial = self.serial.wrapping_add(1).max(1) & 0xffff;
        self.serial
    }

    /// Pushes a completion; a full queue is an overrun, counted and dropped.
    fn complete(&mut self, cq: Cqn, cqe: Cqe) {
        let Ok(i) = self.cq_index(cq) else {
            return;
        };
        let c = &mut self.cqs[i];
        if c.ring.len() >= c.entries as usize {
            self.stats.cq_overruns += 1;
            return;
        }
        c.ring.push_back(cqe);
    }

    /// Checks that `lkey` covers the buffer in `pd` with `need`.
    fn local_buffer(&self, pd: Pdn, sge: &Sge, need: Access) -> bool {
        self.mr_by_key(sge.lkey, false).is_some_and(|m| {
            m.pd == pd
                && m.access.contains(need)
                && sge.addr >= m.addr
                && sge.addr + u64::from(sge.len) <= m.addr + m.len
        })
    }

    // ----- verbs, called by SimHca once the device is known healthy -----

    pub(crate) fn alloc_pd(&mut self) -> Result<Pdn, VerbsError> {
        let i = self
            .pds
            .iter()
            .position(|s| !s.live)
            .ok_or(VerbsError::NoResources)?;
        let n = number(self.next_serial(), i);
        self.pds[i] = PdSlot {
            live: true,
            number: n,
        };
        Ok(Pdn(n))
    }

    pub(crate) fn dealloc_pd(&mut self, pd: Pdn) -> Result<(), VerbsError> {
        if !self.pd_live(pd) {
            return Err(VerbsError::InvalidHandle);
        }
        let busy = self.qps.iter().any(|q| q.live && q.attr.pd == pd)
            || self.mrs.iter().any(|m| m.live && m.pd == pd)
            || self.ahs.iter().any(|a| a.live && a.pd == pd.0);
        if busy {
            return Err(VerbsError::InvalidState);
        }
        self.pds[index_of(pd.0)].live = false;
        Ok(())
    }

    pub(crate) fn create_cq(&mut self, entries: u32) -> Result<Cqn, VerbsError> {
        if entries == 0 || entries > self.limits.max_cq_entries {
            return Err(VerbsError::InvalidArgument);
        }
        let i = self
            .cqs
            .iter()
            .position(|s| !s.live)
            .ok_or(VerbsError::NoResources)?;
        let n = number(self.next_serial(), i);
        let c = &mut self.cqs[i];
        c.live = true;
        c.number = n;
        c.entries = entries;
        c.ring.clear();
        Ok(Cqn(n))
    }

    pub(crate) fn destroy_cq(&mut self, cq: Cqn) -> Result<(), VerbsError> {
        let i = self.cq_index(cq)?;
        if self
            .qps
            .iter()
            .any(|q| q.live && (q.attr.send_cq == cq || q.attr.recv_cq == cq))
        {
            return Err(VerbsError::InvalidState);
        }
        self.cqs[i].live = false;
        self.cqs[i].ring.clear();
        Ok(())
    }

    pub(crate) fn poll_cq(&mut self, cq: Cqn) -> Result<Option<Cqe>, VerbsError> {
        let i = self.cq_index(cq)?;
        Ok(self.cqs[i].ring.pop_front())
    }

    pub(crate) fn create_qp(&mut self, attr: QpAttr) -> Result<Qpn, VerbsError> {
        if !self.pd_live(attr.pd) {
            return Err(VerbsError::InvalidHandle);
        }
        self.cq_index(attr.send_cq)?;
        self.cq_index(attr.recv_cq)?;
        if attr.max_recv_wr > self.limits.max_wr || attr.max_send_wr > self.limits.max_wr {
            return Err(VerbsError::InvalidArgument);
        }
        let i = self
            .qps
            .iter()
            .position(|s| !s.live)
            .ok_or(VerbsError::NoResources)?;
        let n = number(self.next_serial(), i);
        let q = &mut self.qps[i];
        q.live = true;
        q.number = n;
        q.attr = attr;
        q.state = QpState::Reset;
        q.remote = None;
        q.recvs.clear();
        q.mcast = [None; MCAST_PER_QP];
        q.sends = 0;
        Ok(Qpn(n))
    }

    pub(crate) fn modify_qp(
        &mut self,
        qp: Qpn,
        to: QpState,
        remote: Option<RemoteQp>,
    ) -> Result<(), VerbsError> {
        let i = self.qp_index(qp)?;
        let q = &mut self.qps[i];
        let ok = matches!(
            (q.state, to),
            (_, QpState::Reset)
                | (_, QpState::Error)
                | (QpState::Reset, QpState::Init)
                | (QpState::Init, QpState::Rtr)
                | (QpState::Rtr, QpState::Rts)
        );
        if !ok {
            return Err(VerbsError::InvalidState);
        }
        if to == QpState::Rtr && q.attr.qp_type == QpType::Rc {
            q.remote = Some(remote.ok_or(VerbsError::InvalidArgument)?);
        }
        q.state = to;
        if to == QpState::Error {
            // Entering error flushes every posted receive.
            let (recv_cq, n) = (q.attr.recv_cq, q.number);
            while let Some(wr) = self.qps[i].recvs.pop_front() {
                self.complete(
                    recv_cq,
                    Cqe {
                        wr_id: wr.wr_id,
                        qpn: Qpn(n),
                        opcode: WcOpcode::Recv,
                        status: WcStatus::Flushed,
                        byte_len: 0,
                    },
                );
            }
        }
        Ok(())
    }

    pub(crate) fn destroy_qp(&mut self, qp: Qpn) -> Result<(), VerbsError> {
        let i = self.qp_index(qp)?;
        self.forget_sends(i);
        let q = &mut self.qps[i];
        q.live = false;
        q.recvs.clear();
        q.mcast = [None; MCAST_PER_QP];
        Ok(())
    }

    pub(crate) fn reg_mr(
        &mut self,
        attr: MrAttr,
        keys: Option<MrKeys>,
    ) -> Result<MrKeys, VerbsError> {
        let MrAttr {
            pd,
            addr,
            len,
            access,
        } = attr;
        if !self.pd_live(pd) {
            return Err(VerbsError::InvalidHandle);
        }
        if len == 0 || self.range(addr, len).is_none() {
            return Err(VerbsError::InvalidArgument);
        }
        let (i, keys) = match keys {
            Some(k) => {
                // The index is the key's upper bits, as on ConnectX; both keys must name
                // the same free entry.
                let i = (k.lkey >> 8) as usize;
                if k.lkey >> 8 != k.rkey >> 8 || self.mrs.get(i).is_none_or(|m| m.live) {
                    return Err(VerbsError::KeyUnavailable);
                }
                self.stats.preserved_registrations += 1;
                (i, k)
            }
            None => {
                let i = self
                    .mrs
                    .iter()
                    .position(|m| !m.live)
                    .ok_or(VerbsError::NoResources)?;
                // The variant byte keeps running across resets, so a fresh registration
                // never hands out a key a peer may still hold from before.
                self.key_variant = self.key_variant.wrapping_add(1);
                let key = ((i as u32) << 8) | u32::from(self.key_variant);
                (
                    i,
                    MrKeys {
                        lkey: key,
                        rkey: key,
                    },
                )
            }
        };
        self.mrs[i] = MrSlot {
            live: true,
            keys,
            pd,
            addr,
            len,
            access,
        };
        self.stats.mr_registrations += 1;
        Ok(keys)
    }

    pub(crate) fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        let i = (lkey >> 8) as usize;
        match self.mrs.get_mut(i) {
            Some(m) if m.live && m.keys.lkey == lkey => {
                m.live = false;
                Ok(())
            }
            _ => Err(VerbsError::InvalidHandle),
        }
    }

    pub(crate) fn create_ah(&mut self, pd: Pdn, port: u8, dlid: Lid) -> Result<Ahn, VerbsError> {
        if !self.pd_live(pd) {
            return Err(VerbsError::InvalidHandle);
        }
        let i = self
            .ahs
            .iter()
            .position(|a| !a.live)
            .ok_or(VerbsError::NoResources)?;
        let n = number(self.next_serial(), i);
        self.ahs[i] = AhSlot {
            live: true,
            number: n,
            pd: pd.0,
            port,
            dlid,
        };
        Ok(Ahn(n))
    }

    pub(crate) fn destroy_ah(&mut self, ah: Ahn) -> Result<(), VerbsError> {
        match self.ahs.get_mut(index_of(ah.0)) {
            Some(a) if a.live && a.number == ah.0 => {
                a.live = false;
                Ok(())
            }
            _ => Err(VerbsError::InvalidHandle),
        }
    }

    pub(crate) fn attach_mcast(
        &mut self,
        qp: Qpn,
        mgid: Mgid,
        mlid: Lid,
    ) -> Result<(), VerbsError> {
        let i = self.qp_index(qp)?;
        let q = &mut self.qps[i];
        if q.attr.qp_type != QpType::Ud {
            return Err(VerbsError::InvalidArgument);
        }
        if q.mcast.iter().flatten().any(|(g, _)| *g == mgid) {
            return Ok(());
        }
        let free = q
            .mcast
            .iter_mut()
            .find(|m| m.is_none())
            .ok_or(VerbsError::NoResources)?;
        *free = Some((mgid, mlid));
        Ok(())
    }

    pub(crate) fn detach_mcast(&mut self, qp: Qpn, mgid: Mgid) -> Result<(), VerbsError> {
        let i = self.qp_index(qp)?;
        let m = self.qps[i]
            .mcast
            .iter_mut()
            .find(|m| m.is_some_and(|(g, _)| g == mgid))
            .ok_or(VerbsError::InvalidArgument)?;
        *m = None;
        Ok(())
    }
}
