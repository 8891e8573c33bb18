//! The access layer: every consumer's verbs go through here, and here they meet resets.
//!
//! IBAL keeps a software object for every hardware resource, so that a reset can take the
//! hardware away without the consumer's handles dangling: on its RESET it drains what the
//! hardware already completed, turns every outstanding work request into a flushed
//! completion, and marks each object released. Consumers find their handles stale, their
//! posts refused, their polls answered with flushed completions. Memory regions registered
//! with [`MrFlags::PRESERVE_KEYS`] are re-registered with the same keys on RESET_END, before
//! any consumer hears of it (SPEC §7).
//!
//! Every table is reserved in [`Ibal::new`]: nothing here allocates afterwards, so the
//! whole reset path, re-creation included, runs without allocating (SPEC §6).

use std::collections::VecDeque;
use std::vec::Vec;

use bitflags::bitflags;
use hcabus::bus::BusHandle;
use hcabus::fabric::Fabric;
use hcabus::types::{ClientName, Epoch};
use hcabus::verbs::*;
use hcabus::State;

use crate::errors::*;
use crate::handle::*;

/// What IBAL drives: any host's bus handle whose device speaks [`Verbs`]. IBAL reads the
/// bus's state to gate commands and drives the device through it; it never calls the bus
/// itself (its client does, in [`crate::IbalClient`]).
pub trait VerbsBus: BusHandle<Device: Verbs> {}

impl<B: BusHandle<Device: Verbs> + ?Sized> VerbsBus for B {}

/// What the clients drive: a bus whose device also has DMA memory for their buffers and the
/// far side of the wire for the peers they carry (the SRP target, the IPoIB peer). The
/// simulated adapter is one on every host.
pub trait ClientBus: BusHandle<Device: Verbs + DmaMemory + Fabric> {}

impl<B: BusHandle<Device: Verbs + DmaMemory + Fabric> + ?Sized> ClientBus for B {}

/// Sizes of IBAL's tables, reserved at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbalConfig {
    pub max_consumers: u16,
    pub max_pds: u16,
    pub max_cqs: u16,
    pub max_qps: u16,
    pub max_mrs: u16,
    pub max_ahs: u16,
    /// Largest CQ; also the size of each CQ's software ring of flushed completions.
    pub max_cq_entries: u32,
    /// Largest work queue; also the size of each queue's shadow of outstanding requests.
    pub max_wr: u32,
}

impl Default for IbalConfig {
    fn default() -> Self {
        IbalConfig {
            max_consumers: 16,
            max_pds: 32,
            max_cqs: 48,
            max_qps: 48,
            max_mrs: 96,
            max_ahs: 48,
            max_cq_entries: 512,
            max_wr: 512,
        }
    }
}

bitflags! {
    /// How a memory region is registered.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MrFlags: u32 {
        /// Its R-Key has been advertised to peers: keep the keys across a reset.
        const PRESERVE_KEYS = 1 << 0;
    }
}

/// A queue pair to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSpec {
    pub pd: PdHandle,
    pub qp_type: QpType,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub port: u8,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
}

impl QpSpec {
    /// A queue pair whose sends and receives complete on one CQ, `wr` deep each way: the
    /// shape every client here uses.
    pub fn on_one_cq(pd: PdHandle, qp_type: QpType, cq: CqHandle, port: u8, wr: u32) -> Self {
        QpSpec {
            pd,
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            port,
            max_send_wr: wr,
            max_recv_wr: wr,
        }
    }
}

/// A memory region to register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrSpec {
    pub pd: PdHandle,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub flags: MrFlags,
}

/// Where a send goes, in handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    Connected,
    Datagram { ah: AhHandle, qpn: Qpn },
}

/// A send work request, in handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Send {
    pub wr_id: u64,
    pub sge: Sge,
    pub dest: Dest,
}

/// Where IBAL is in the reset protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not registered with the bus yet.
    Detached,
    Running,
    /// From its RESET to its RESET_END (or RESET_ABORTED): resources released.
    Quiesced,
    Failed,
    Removed,
}

/// What IBAL did, for reports and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IbalStats {
    /// Objects whose hardware IBAL released on RESET.
    pub released: u64,
    /// Work requests turned into flushed completions.
    pub flushed: u64,
    /// Completions the hardware had made that IBAL kept for the consumer at release.
    pub drained: u64,
    pub preserved_restored: u64,
    pub preserve_failures: u64,
    /// Hardware objects left behind by a reset that was then aborted, destroyed later.
    pub orphans_destroyed: u64,
    pub refused_resetting: u64,
    pub refused_failed: u64,
    pub refused_stale: u64,
}

#[derive(Debug, Clone)]
struct Slot<T> {
    live: bool,
    generation: u32,
    consumer: u16,
    /// The epoch of the hardware object behind it.
    epoch: Epoch,
    /// Its hardware was released for a reset: every handle to it is stale.
    released: bool,
    data: T,
}

#[derive(Debug, Clone)]
struct Slab<T> {
    slots: Vec<Slot<T>>,
}

enum Found {
    At(usize),
    /// Destroyed (or never existed).
    Gone,
    NotOwner,
}

impl<T: Clone> Slab<T> {
    fn new(capacity: u16, blank: T) -> Self {
        Slab {
            slots: std::vec![
                Slot {
                    live: false,
                    generation: 0,
                    consumer: 0,
                    epoch: Epoch(0),
                    released: false,
                    data: blank,
                };
                usize::from(capacity)
            ],
        }
    }
}

impl<T> Slab<T> {
    /// Lowest free slot: reuse is immediate, so the generation check matters.
    fn free(&self) -> Option<usize> {
        self.slots.iter().position(|s| !s.live)
    }

    fn occupy(&mut self, i: usize, consumer: u16, epoch: Epoch) -> (u32, u32) {
        let s = &mut self.slots[i];
        s.live = true;
        s.generation = s.generation.wrapping_add(1);
        s.consumer = consumer;
        s.epoch = epoch;
        s.released = false;
        (i as u32, s.generation)
    }

    fn vacate(&mut self, i: usize) {
        let s = &mut self.slots[i];
        s.live = false;
        // A new generation at once: the destroyed handle can never match again.
        s.generation = s.generation.wrapping_add(1);
    }

    fn find<K>(&self, h: Handle<K>, consumer: u16) -> Found {
        match self.slots.get(h.index as usize) {
            Some(s) if s.live && s.generation == h.generation => {
                if s.consumer == consumer {
                    Found::At(h.index as usize)
                } else {
                    Found::NotOwner
                }
            }
            _ => Found::Gone,
        }
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Slot<T>)> {
        self.slots.iter().enumerate().filter(|(_, s)| s.live)
    }
}

#[derive(Debug, Clone, Copy)]
struct PdData {
    hw: Option<Pdn>,
    /// Preserved memory regions inside: the PD must come back with them.
    pins: u32,
}

#[derive(Debug, Clone)]
struct CqData {
    hw: Option<Cqn>,
    entries: u32,
    /// Completions for the consumer that no longer come from the hardware: drained before
    /// a release, or flushed by it.
    ready: VecDeque<Cqe>,
}

#[derive(Debug, Clone)]
struct QpData {
    hw: Option<Qpn>,
    pd: usize,
    send_cq: usize,
    recv_cq: usize,
    max_send_wr: u32,
    max_recv_wr: u32,
    /// Outstanding work requests, oldest first: what to flush if the hardware goes.
    sends: VecDeque<u64>,
    recvs: VecDeque<u64>,
}

#[derive(Debug, Clone, Copy)]
struct MrData {
    hw: Option<MrKeys>,
    keys: MrKeys,
    pd: usize,
    addr: u64,
    len: u64,
    access: Access,
    preserve: bool,
}

#[derive(Debug, Clone, Copy)]
struct AhData {
    hw: Option<Ahn>,
    pd: usize,
}

#[derive(Debug, Clone, Copy)]
struct ConsumerSlot {
    live: bool,
    generation: u32,
    name: Option<ClientName>,
}

/// A hardware object nobody owns any more that may still exist in the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Orphan {
    Qp(Qpn),
    Ah(Ahn),
    Mr(u32),
    Cq(Cqn),
    Pd(Pdn),
}

impl Orphan {
    /// Destroy order: users before what they use.
    fn rank(self) -> u8 {
        match self {
            Orphan::Qp(_) => 0,
            Orphan::Ah(_) => 1,
            Orphan::Mr(_) => 2,
            Orphan::Cq(_) => 3,
            Orphan::Pd(_) => 4,
        }
    }
}

/// Looks a handle up for a call that needs a current object, or says why not.
macro_rules! current {
    ($self:ident, $slab:ident, $h:expr, $c:expr, $err:ident) => {{
        let h = $h;
        match $self.$slab.find(h, $c.index) {
            Found::NotOwner => return Err($err::NotOwner),
            Found::Gone if h.epoch != $self.epoch => {
                $self.stats.refused_stale += 1;
                return Err($err::StaleHandle($self.stale(h.epoch)));
            }
            Found::Gone => return Err($err::InvalidHandle),
            Found::At(i) if $self.$slab.slots[i].released => {
                $self.stats.refused_stale += 1;
                return Err($err::StaleHandle($self.stale(h.epoch)));
            }
            Found::At(i) => i,
        }
    }};
}

/// Refusals that depend only on where the device and IBAL are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Resetting,
    DeviceFailed,
}

impl From<Gate> for CreateError {
    fn from(g: Gate) -> Self {
        match g {
            Gate::Resetting => CreateError::Resetting,
            Gate::DeviceFailed => CreateError::DeviceFailed,
        }
    }
}

impl From<Gate> for PostError {
    fn from(g: Gate) -> Self {
        match g {
            Gate::Resetting => PostError::Resetting,
            Gate::DeviceFailed => PostError::DeviceFailed,
        }
    }
}

/// The access layer of one adapter.
#[derive(Debug, Clone)]
pub struct Ibal {
    config: IbalConfig,
    phase: Phase,
    epoch: Epoch,
    consumers: Vec<ConsumerSlot>,
    pds: Slab<PdData>,
    cqs: Slab<CqData>,
    qps: Slab<QpData>,
    mrs: Slab<MrData>,
    ahs: Slab<AhData>,
    orphans: Vec<Orphan>,
    stats: IbalStats,
}

impl Ibal {
    pub fn new(config: IbalConfig) -> Self {
        let cq_blank = CqData {
            hw: None,
            entries: 0,
            ready: VecDeque::with_capacity(config.max_cq_entries as usize),
        };
        let qp_blank = QpData {
            hw: None,
            pd: 0,
            send_cq: 0,
            recv_cq: 0,
            max_send_wr: 0,
            max_recv_wr: 0,
            sends: VecDeque::with_capacity(config.max_wr as usize),
            recvs: VecDeque::with_capacity(config.max_wr as usize),
        };
        let keys0 = MrKeys { lkey: 0, rkey: 0 };
        let orphans = usize::from(config.max_pds)
            + usize::from(config.max_cqs)
            + usize::from(config.max_qps)
            + usize::from(config.max_mrs)
            + usize::from(config.max_ahs);
        Ibal {
            config,
            phase: Phase::Detached,
            epoch: Epoch(0),
            consumers: std::vec![
                ConsumerSlot {
                    live: false,
                    generation: 0,
                    name: None,
                };
                usize::from(config.max_consumers)
            ],
            pds: Slab::new(config.max_pds, PdData { hw: None, pins: 0 }),
            // Each slot's rings are reserved here, once: `Clone` of a blank keeps capacity
            // only for the first copy, so build each slot on its own.
            cqs: Slab {
                slots: (0..config.max_cqs)
                    .map(|_| Slot {
                        live: false,
                        generation: 0,
                        consumer: 0,
                        epoch: Epoch(0),
                        released: false,
                        data: CqData {
                            ready: VecDeque::with_capacity(config.max_cq_entries as usize),
                            ..cq_blank.clone()
                        },
                    })
                    .collect(),
            },
            qps: Slab {
                slots: (0..config.max_qps)
                    .map(|_| Slot {
                        live: false,
                        generation: 0,
                        consumer: 0,
                        epoch: Epoch(0),
                        released: false,
                        data: QpData {
                            sends: VecDeque::with_capacity(config.max_wr as usize),
                            recvs: VecDeque::with_capacity(config.max_wr as usize),
                            ..qp_blank.clone()
                        },
                    })
                    .collect(),
            },
            mrs: Slab::new(
                config.max_mrs,
                MrData {
                    hw: None,
                    keys: keys0,
                    pd: 0,
                    addr: 0,
                    len: 0,
                    access: Access::empty(),
                    preserve: false,
                },
            ),
            ahs: Slab::new(config.max_ahs, AhData { hw: None, pd: 0 }),
            orphans: Vec::with_capacity(orphans),
            stats: IbalStats::default(),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The epoch of the hardware IBAL's resources live in.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    pub fn stats(&self) -> &IbalStats {
        &self.stats
    }

    /// Live software objects of `c`, of every kind (released ones included).
    pub fn objects_of(&self, c: ConsumerId) -> usize {
        let of = |consumer: u16| consumer == c.index;
        self.pds.live().filter(|(_, s)| of(s.consumer)).count()
            + self.cqs.live().filter(|(_, s)| of(s.consumer)).count()
            + self.qps.live().filter(|(_, s)| of(s.consumer)).count()
            + self.mrs.live().filter(|(_, s)| of(s.consumer)).count()
            + self.ahs.live().filter(|(_, s)| of(s.consumer)).count()
    }

    /// The device queue pair behind a handle, if it is current (for tests and peers).
    pub fn qpn(&self, c: ConsumerId, qp: QpHandle) -> Option<Qpn> {
        match self.qps.find(qp, c.index) {
            Found::At(i) if !self.qps.slots[i].released => self.qps.slots[i].data.hw,
            _ => None,
        }
    }

    fn stale(&self, made_in: Epoch) -> StaleHandle {
        StaleHandle {
            made_in,
            current: self.epoch,
        }
    }

    // ----- the reset protocol (called by the IBAL bus client) -----

    /// IBAL registered with the bus in `epoch`.
    pub fn attach(&mut self, epoch: Epoch, state: State) {
        self.epoch = epoch;
        self.phase = match state {
            State::Failed => Phase::Failed,
            State::Removed => Phase::Removed,
            State::Operational => Phase::Running,
            // Registered late, during a reset: nothing to release, wait for RESET_END.
            _ => Phase::Quiesced,
        };
    }

    /// RESET: release every consumer's hardware resources, keeping what the hardware has
    /// already completed and flushing the rest. Software objects stay until their
    /// consumers destroy them.
    pub fn release_all<L: VerbsBus + ?Sized>(&mut self, lower: &mut L) {
        if self.phase == Phase::Running {
            self.drain_hardware(lower);
        }
        for i in 0..self.qps.slots.len() {
            let s = &self.qps.slots[i];
            if !s.live || s.released {
                continue;
            }
            let (send_cq, recv_cq) = (s.data.send_cq, s.data.recv_cq);
            let qpn = s.data.hw.unwrap_or(Qpn(0));
            while let Some(wr_id) = self.qps.slots[i].data.sends.pop_front() {
                self.flush(send_cq, wr_id, qpn, WcOpcode::Send);
            }
            while let Some(wr_id) = self.qps.slots[i].data.recvs.pop_front() {
                self.flush(recv_cq, wr_id, qpn, WcOpcode::Recv);
            }
            if let Some(q) = self.qps.slots[i].data.hw.take() {
                self.orphan(Orphan::Qp(q));
            }
            self.qps.slots[i].released = true;
            self.stats.released += 1;
        }
        for i in 0..self.ahs.slots.len() {
            if self.ahs.slots[i].live && !self.ahs.slots[i].released {
                if let Some(a) = self.ahs.slots[i].data.hw.take() {
                    self.orphan(Orphan::Ah(a));
                }
                self.ahs.slots[i].released = true;
                self.stats.released += 1;
            }
        }
        for i in 0..self.mrs.slots.len() {
            let s = &mut self.mrs.slots[i];
            // A preserved region keeps its keys and its handle; RESET_END brings it back.
            if s.live && !s.released && !s.data.preserve {
                let hw = s.data.hw.take();
                s.released = true;
                self.stats.released += 1;
                if let Some(k) = hw {
                    self.orphan(Orphan::Mr(k.lkey));
                }
            }
        }
        for i in 0..self.cqs.slots.len() {
            if self.cqs.slots[i].live && !self.cqs.slots[i].released {
                if let Some(c) = self.cqs.slots[i].data.hw.take() {
                    self.orphan(Orphan::Cq(c));
                }
                self.cqs.slots[i].released = true;
                self.stats.released += 1;
            }
        }
        for i in 0..self.pds.slots.len() {
            let s = &mut self.pds.slots[i];
            if s.live && !s.released && s.data.pins == 0 {
                let hw = s.data.hw.take();
                s.released = true;
                self.stats.released += 1;
                if let Some(p) = hw {
                    self.orphan(Orphan::Pd(p));
                }
            }
        }
        if matches!(self.phase, Phase::Running | Phase::Detached) {
            self.phase = Phase::Quiesced;
        }
    }

    /// Completions the hardware already made are real: keep them for the consumer.
    fn drain_hardware<L: VerbsBus + ?Sized>(&mut self, lower: &mut L) {
        for c in 0..self.cqs.slots.len() {
            let s = &self.cqs.slots[c];
            let Some(cqn) = s.data.hw.filter(|_| s.live && !s.released) else {
                continue;
            };
            while let Ok(Some(cqe)) = lower.device().poll_cq(cqn) {
                self.account(&cqe);
                let ready = &mut self.cqs.slots[c].data.ready;
                if ready.len() < ready.capacity() {
                    ready.push_back(cqe);
                    self.stats.drained += 1;
                }
            }
        }
    }

    fn flush(&mut self, cq: usize, wr_id: u64, qpn: Qpn, opcode: WcOpcode) {
        let ready = &mut self.cqs.slots[cq].data.ready;
        // Sized to the largest CQ: a queue pair never has more outstanding than its CQ.
        if ready.len() < ready.capacity() {
            ready.push_back(Cqe {
                wr_id,
                qpn,
                opcode,
                status: WcStatus::Flushed,
                byte_len: 0,
            });
            self.stats.flushed += 1;
        }
    }

    fn orphan(&mut self, o: Orphan) {
        if self.orphans.len() < self.orphans.capacity() {
            self.orphans.push(o);
        }
    }

    /// RESET_END: the hardware is back in `epoch`, empty. Bring back preserved regions
    /// (and their PDs) with their keys, then accept calls again.
    pub fn restore<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, epoch: Epoch) {
        // Whatever IBAL orphaned, the reset destroyed.
        self.orphans.clear();
        if self.phase == Phase::Running {
            // RESET_END without RESET (a late registrant, an administrator's restart of a
            // failed device): release first so that nothing old looks current.
            self.release_all(lower);
        }
        self.epoch = epoch;
        for p in 0..self.pds.slots.len() {
            let s = &self.pds.slots[p];
            if !(s.live && !s.released && s.data.pins > 0) {
                continue;
            }
            match lower.device().alloc_pd() {
                Ok(pdn) => {
                    self.pds.slots[p].data.hw = Some(pdn);
                    self.pds.slots[p].epoch = epoch;
                }
                Err(e) => {
                    log::warn!("ibal: preserved PD could not come back: {e}");
                    self.pds.slots[p].released = true;
                    self.pds.slots[p].data.hw = None;
                }
            }
        }
        for m in 0..self.mrs.slots.len() {
            let s = self.mrs.slots[m].clone();
            if !(s.live && !s.released && s.data.preserve) {
                continue;
            }
            let pd = &self.pds.slots[s.data.pd];
            let result = match pd.data.hw.filter(|_| !pd.released) {
                Some(pdn) => lower.device().reg_mr(
                    pdn,
                    s.data.addr,
                    s.data.len,
                    s.data.access,
                    Some(s.data.keys),
                ),
                None => Err(VerbsError::InvalidHandle),
            };
            let slot = &mut self.mrs.slots[m];
            match result {
                Ok(keys) => {
                    slot.data.hw = Some(keys);
                    slot.epoch = epoch;
                    self.stats.preserved_restored += 1;
                }
                Err(e) => {
                    // Peers holding the R-Key will get remote access errors; the consumer
                    // finds the handle stale and must re-register and re-advertise.
                    log::warn!(
                        "ibal: preserved MR {:#x} lost its keys: {e}",
                        s.data.keys.rkey
                    );
                    slot.data.hw = None;
                    slot.released = true;
                    slot.data.preserve = false;
                    self.pds.slots[s.data.pd].data.pins -= 1;
                    self.stats.preserve_failures += 1;
                }
            }
        }
        self.phase = Phase::Running;
    }

    /// RESET_ABORTED: the hardware never reset. Whatever was released still exists in the
    /// device and is destroyed by [`Ibal::destroy_orphans`] outside the callback.
    pub fn resume(&mut self) {
        if self.phase == Phase::Quiesced {
            self.phase = Phase::Running;
        }
    }

    /// Whether an aborted reset left hardware objects to destroy.
    pub fn has_orphans(&self) -> bool {
        !self.orphans.is_empty() && self.phase == Phase::Running
    }

    /// Destroys in the device what an aborted reset left behind (firmware commands:
    /// deferred work, never from a callback).
    pub fn destroy_orphans<L: VerbsBus + ?Sized>(&mut self, lower: &mut L) {
        if self.phase != Phase::Running {
            return;
        }
        for rank in 0..5 {
            for &o in self.orphans.iter().filter(|o| o.rank() == rank) {
                let hw = lower.device();
                let r = match o {
                    Orphan::Qp(q) => hw.destroy_qp(q),
                    Orphan::Ah(a) => hw.destroy_ah(a),
                    Orphan::Mr(k) => hw.dereg_mr(k),
                    Orphan::Cq(c) => hw.destroy_cq(c),
                    Orphan::Pd(p) => hw.dealloc_pd(p),
                };
                if r.is_ok() {
                    self.stats.orphans_destroyed += 1;
                }
            }
        }
        self.orphans.clear();
    }

    /// RESET_FAILED or DEVICE_FATAL: nothing will come back.
    pub fn fail<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, removed: bool) {
        if self.phase == Phase::Running {
            self.release_all(lower);
        }
        self.orphans.clear();
        // Preserved objects cannot come back either: their handles go stale too.
        for s in self.mrs.slots.iter_mut().filter(|s| s.live) {
            s.released = true;
            s.data.hw = None;
        }
        for s in self.pds.slots.iter_mut().filter(|s| s.live) {
            s.released = true;
            s.data.hw = None;
        }
        self.phase = if removed {
            Phase::Removed
        } else {
            Phase::Failed
        };
    }

    // ----- consumers -----

    pub fn open(&mut self, name: &str) -> Result<ConsumerId, OpenError> {
        let i = self
            .consumers
            .iter()
            .position(|c| !c.live)
            .ok_or(OpenError::NoResources)?;
        let c = &mut self.consumers[i];
        c.live = true;
        c.generation = c.generation.wrapping_add(1);
        c.name = ClientName::new(name);
        Ok(ConsumerId {
            index: i as u16,
            generation: c.generation,
        })
    }

    fn known(&self, c: ConsumerId) -> bool {
        self.consumers
            .get(usize::from(c.index))
            .is_some_and(|s| s.live && s.generation == c.generation)
    }

    /// Destroys everything `c` holds, then forgets it. Never fails for a known consumer.
    pub fn close<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
    ) -> Result<(), DestroyError> {
        self.destroy_all(lower, c)?;
        self.consumers[usize::from(c.index)].live = false;
        Ok(())
    }

    /// Destroys every object of `c` in dependency order (user-verbs disassociation).
    pub fn destroy_all<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        let hw_ok = self.can_command(lower);
        for i in 0..self.qps.slots.len() {
            if self.qps.slots[i].live && self.qps.slots[i].consumer == c.index {
                self.drop_qp(lower, i, hw_ok);
            }
        }
        for i in 0..self.ahs.slots.len() {
            if self.ahs.slots[i].live && self.ahs.slots[i].consumer == c.index {
                self.drop_ah(lower, i, hw_ok);
            }
        }
        for i in 0..self.mrs.slots.len() {
            if self.mrs.slots[i].live && self.mrs.slots[i].consumer == c.index {
                self.drop_mr(lower, i, hw_ok);
            }
        }
        for i in 0..self.cqs.slots.len() {
            if self.cqs.slots[i].live && self.cqs.slots[i].consumer == c.index {
                self.drop_cq(lower, i, hw_ok);
            }
        }
        for i in 0..self.pds.slots.len() {
            if self.pds.slots[i].live && self.pds.slots[i].consumer == c.index {
                self.drop_pd(lower, i, hw_ok);
            }
        }
        Ok(())
    }

    // ----- gates -----

    fn failed(&mut self, lower: &(impl VerbsBus + ?Sized)) -> Result<(), Gate> {
        let failed = matches!(self.phase, Phase::Failed | Phase::Removed)
            || matches!(lower.state(), State::Failed | State::Removed);
        if failed {
            self.stats.refused_failed += 1;
            Err(Gate::DeviceFailed)
        } else {
            Ok(())
        }
    }

    fn resetting(&mut self, lower: &(impl VerbsBus + ?Sized)) -> Result<(), Gate> {
        let open = self.phase == Phase::Running
            && matches!(lower.state(), State::Operational | State::Restoring);
        if open {
            Ok(())
        } else {
            self.stats.refused_resetting += 1;
            Err(Gate::Resetting)
        }
    }

    /// Firmware commands are issued only on a running device outside any reset; during a
    /// reset destroys are software only (the reset destroys the hardware object).
    fn can_command(&self, lower: &(impl VerbsBus + ?Sized)) -> bool {
        self.phase == Phase::Running && lower.state() == State::Operational
    }

    fn gates<L: VerbsBus + ?Sized, E: From<Gate>>(&mut self, lower: &L) -> Result<(), E> {
        self.failed(lower)?;
        self.resetting(lower)?;
        Ok(())
    }

    // ----- creates -----

    pub fn alloc_pd<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
    ) -> Result<PdHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.gates::<_, CreateError>(lower)?;
        let i = self.pds.free().ok_or(CreateError::NoResources)?;
        let pdn = lower.device().alloc_pd().map_err(CreateError::Hardware)?;
        let (index, generation) = self.pds.occupy(i, c.index, self.epoch);
        self.pds.slots[i].data = PdData {
            hw: Some(pdn),
            pins: 0,
        };
        Ok(Handle::new(index, generation, self.epoch))
    }

    pub fn create_cq<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        entries: u32,
    ) -> Result<CqHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.gates::<_, CreateError>(lower)?;
        if entries > self.config.max_cq_entries {
            return Err(CreateError::Hardware(VerbsError::InvalidArgument));
        }
        let i = self.cqs.free().ok_or(CreateError::NoResources)?;
        let cqn = lower
            .device()
            .create_cq(entries)
            .map_err(CreateError::Hardware)?;
        let (index, generation) = self.cqs.occupy(i, c.index, self.epoch);
        let d = &mut self.cqs.slots[i].data;
        d.hw = Some(cqn);
        d.entries = entries;
        d.ready.clear();
        Ok(Handle::new(index, generation, self.epoch))
    }

    pub fn create_qp<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        spec: QpSpec,
    ) -> Result<QpHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let pd = current!(self, pds, spec.pd, c, CreateError);
        let scq = current!(self, cqs, spec.send_cq, c, CreateError);
        let rcq = current!(self, cqs, spec.recv_cq, c, CreateError);
        self.resetting(lower)?;
        if spec.max_send_wr > self.config.max_wr || spec.max_recv_wr > self.config.max_wr {
            return Err(CreateError::Hardware(VerbsError::InvalidArgument));
        }
        let i = self.qps.free().ok_or(CreateError::NoResources)?;
        let (Some(pdn), Some(send_cq), Some(recv_cq)) = (
            self.pds.slots[pd].data.hw,
            self.cqs.slots[scq].data.hw,
            self.cqs.slots[rcq].data.hw,
        ) else {
            return Err(CreateError::StaleHandle(self.stale(spec.pd.epoch)));
        };
        let qpn = lower
            .device()
            .create_qp(QpAttr {
                pd: pdn,
                qp_type: spec.qp_type,
                send_cq,
                recv_cq,
                port: spec.port,
                max_send_wr: spec.max_send_wr,
                max_recv_wr: spec.max_recv_wr,
            })
            .map_err(CreateError::Hardware)?;
        let (index, generation) = self.qps.occupy(i, c.index, self.epoch);
        let d = &mut self.qps.slots[i].data;
        d.hw = Some(qpn);
        d.pd = pd;
        d.send_cq = scq;
        d.recv_cq = rcq;
        d.max_send_wr = spec.max_send_wr;
        d.max_recv_wr = spec.max_recv_wr;
        d.sends.clear();
        d.recvs.clear();
        Ok(Handle::new(index, generation, self.epoch))
    }

    /// The device QP behind `qp` for a modify-class call, once every check of the table
    /// has passed.
    fn qp_for_modify<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &L,
        c: ConsumerId,
        qp: QpHandle,
    ) -> Result<Qpn, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let i = current!(self, qps, qp, c, CreateError);
        self.resetting(lower)?;
        self.qps.slots[i].data.hw.ok_or(CreateError::InvalidHandle)
    }

    pub fn modify_qp<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        to: QpState,
        remote: Option<RemoteQp>,
    ) -> Result<(), CreateError> {
        let qpn = self.qp_for_modify(lower, c, qp)?;
        lower
            .device()
            .modify_qp(qpn, to, remote)
            .map_err(CreateError::Hardware)
    }

    pub fn attach_mcast<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        mgid: Mgid,
        mlid: Lid,
    ) -> Result<(), CreateError> {
        let qpn = self.qp_for_modify(lower, c, qp)?;
        lower
            .device()
            .attach_mcast(qpn, mgid, mlid)
            .map_err(CreateError::Hardware)
    }

    /// Leaves a multicast group. Like a destroy, it always succeeds: during a reset, or on
    /// a stale queue pair, the membership is gone with the hardware anyway.
    pub fn detach_mcast<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        mgid: Mgid,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        match self.qps.find(qp, c.index) {
            Found::NotOwner => Err(DestroyError::NotOwner),
            Found::Gone => Ok(()),
            Found::At(i) => {
                if let Some(qpn) = self.qps.slots[i].data.hw {
                    if !self.qps.slots[i].released && self.can_command(lower) {
                        let _ = lower.device().detach_mcast(qpn, mgid);
                    }
                }
                Ok(())
            }
        }
    }

    pub fn reg_mr<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        spec: MrSpec,
    ) -> Result<(MrHandle, MrKeys), CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let p = current!(self, pds, spec.pd, c, CreateError);
        self.resetting(lower)?;
        let i = self.mrs.free().ok_or(CreateError::NoResources)?;
        let pdn = self.pds.slots[p]
            .data
            .hw
            .ok_or(CreateError::InvalidHandle)?;
        let MrSpec {
            addr,
            len,
            access,
            flags,
            ..
        } = spec;
        let keys = lower
            .device()
            .reg_mr(pdn, addr, len, access, None)
            .map_err(CreateError::Hardware)?;
        let preserve = flags.contains(MrFlags::PRESERVE_KEYS);
        let (index, generation) = self.mrs.occupy(i, c.index, self.epoch);
        self.mrs.slots[i].data = MrData {
            hw: Some(keys),
            keys,
            pd: p,
            addr,
            len,
            access,
            preserve,
        };
        if preserve {
            self.pds.slots[p].data.pins += 1;
        }
        Ok((Handle::new(index, generation, self.epoch), keys))
    }

    pub fn create_ah<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        pd: PdHandle,
        port: u8,
        dlid: Lid,
    ) -> Result<AhHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let p = current!(self, pds, pd, c, CreateError);
        self.resetting(lower)?;
        let i = self.ahs.free().ok_or(CreateError::NoResources)?;
        let pdn = self.pds.slots[p]
            .data
            .hw
            .ok_or(CreateError::InvalidHandle)?;
        let ahn = lower
            .device()
            .create_ah(pdn, port, dlid)
            .map_err(CreateError::Hardware)?;
        let (index, generation) = self.ahs.occupy(i, c.index, self.epoch);
        self.ahs.slots[i].data = AhData {
            hw: Some(ahn),
            pd: p,
        };
        Ok(Handle::new(index, generation, self.epoch))
    }

    // ----- posts and polls -----

    pub fn post_send<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        wr: &Send,
    ) -> Result<(), PostError> {
        if !self.known(c) {
            return Err(PostError::UnknownConsumer);
        }
        self.failed(lower)?;
        let i = current!(self, qps, qp, c, PostError);
        let dest = match wr.dest {
            Dest::Connected => SendDest::Connected,
            Dest::Datagram { ah, qpn } => {
                let a = current!(self, ahs, ah, c, PostError);
                SendDest::Datagram {
                    ah: self.ahs.slots[a].data.hw.ok_or(PostError::InvalidHandle)?,
                    qpn,
                }
            }
        };
        self.resetting(lower)?;
        let d = &self.qps.slots[i].data;
        if d.sends.len() >= d.max_send_wr as usize {
            return Err(PostError::QueueFull);
        }
        let qpn = d.hw.ok_or(PostError::InvalidHandle)?;
        lower
            .device()
            .post_send(
                qpn,
                &SendWr {
                    wr_id: wr.wr_id,
                    sge: wr.sge,
                    dest,
                },
            )
            .map_err(PostError::Hardware)?;
        self.qps.slots[i].data.sends.push_back(wr.wr_id);
        Ok(())
    }

    pub fn post_recv<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        wr: &RecvWr,
    ) -> Result<(), PostError> {
        if !self.known(c) {
            return Err(PostError::UnknownConsumer);
        }
        self.failed(lower)?;
        let i = current!(self, qps, qp, c, PostError);
        self.resetting(lower)?;
        let d = &self.qps.slots[i].data;
        if d.recvs.len() >= d.max_recv_wr as usize {
            return Err(PostError::QueueFull);
        }
        let qpn = d.hw.ok_or(PostError::InvalidHandle)?;
        lower
            .device()
            .post_recv(qpn, wr)
            .map_err(PostError::Hardware)?;
        self.qps.slots[i].data.recvs.push_back(wr.wr_id);
        Ok(())
    }

    /// The next completion: flushed or drained ones first, then the hardware's while the
    /// CQ is current. A stale CQ gives its flushed completions, then `None`.
    pub fn poll_cq<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        cq: CqHandle,
    ) -> Result<Option<Cqe>, PollError> {
        if !self.known(c) {
            return Err(PollError::UnknownConsumer);
        }
        let i = match self.cqs.find(cq, c.index) {
            Found::NotOwner => return Err(PollError::NotOwner),
            // Destroyed during a reset: nothing left to give.
            Found::Gone if cq.epoch != self.epoch => return Ok(None),
            Found::Gone => return Err(PollError::InvalidHandle),
            Found::At(i) => i,
        };
        if let Some(cqe) = self.cqs.slots[i].data.ready.pop_front() {
            return Ok(Some(cqe));
        }
        let s = &self.cqs.slots[i];
        let Some(cqn) = s.data.hw.filter(|_| !s.released) else {
            return Ok(None);
        };
        match lower.device().poll_cq(cqn) {
            Ok(Some(cqe)) => {
                self.account(&cqe);
                Ok(Some(cqe))
            }
            _ => Ok(None),
        }
    }

    /// A hardware completion retires the oldest outstanding request of its queue.
    fn account(&mut self, cqe: &Cqe) {
        let owner = self
            .qps
            .slots
            .iter_mut()
            .find(|s| s.live && !s.released && s.data.hw == Some(cqe.qpn));
        if let Some(q) = owner {
            let queue = match cqe.opcode {
                WcOpcode::Send => &mut q.data.sends,
                WcOpcode::Recv => &mut q.data.recvs,
            };
            let front = queue.pop_front();
            debug_assert_eq!(front, Some(cqe.wr_id), "completions come in order");
        }
    }

    // ----- destroys -----

    fn drop_qp<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let s = &mut self.qps.slots[i];
        if let Some(q) = s.data.hw.take().filter(|_| !s.released) {
            if !hw_ok || lower.device().destroy_qp(q).is_err() {
                self.orphan(Orphan::Qp(q));
            }
        }
        self.qps.slots[i].data.sends.clear();
        self.qps.slots[i].data.recvs.clear();
        self.qps.vacate(i);
    }

    fn drop_ah<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let s = &mut self.ahs.slots[i];
        if let Some(a) = s.data.hw.take().filter(|_| !s.released) {
            if !hw_ok || lower.device().destroy_ah(a).is_err() {
                self.orphan(Orphan::Ah(a));
            }
        }
        self.ahs.vacate(i);
    }

    fn drop_mr<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let s = &mut self.mrs.slots[i];
        let (preserve, pd) = (s.data.preserve, s.data.pd);
        if let Some(k) = s.data.hw.take().filter(|_| !s.released) {
            if !hw_ok || lower.device().dereg_mr(k.lkey).is_err() {
                self.orphan(Orphan::Mr(k.lkey));
            }
        }
        if preserve {
            let pins = &mut self.pds.slots[pd].data.pins;
            *pins = pins.saturating_sub(1);
        }
        self.mrs.vacate(i);
    }

    fn drop_cq<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let s = &mut self.cqs.slots[i];
        if let Some(q) = s.data.hw.take().filter(|_| !s.released) {
            if !hw_ok || lower.device().destroy_cq(q).is_err() {
                self.orphan(Orphan::Cq(q));
            }
        }
        self.cqs.slots[i].data.ready.clear();
        self.cqs.vacate(i);
    }

    fn drop_pd<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let s = &mut self.pds.slots[i];
        if let Some(p) = s.data.hw.take().filter(|_| !s.released) {
            if !hw_ok || lower.device().dealloc_pd(p).is_err() {
                self.orphan(Orphan::Pd(p));
            }
        }
        self.pds.vacate(i);
    }

    /// Finds `h` for a destroy: `Ok(None)` when there is nothing left to destroy.
    fn for_destroy<T, K>(
        slab: &Slab<T>,
        h: Handle<K>,
        c: ConsumerId,
    ) -> Result<Option<usize>, DestroyError> {
        match slab.find(h, c.index) {
            Found::NotOwner => Err(DestroyError::NotOwner),
            Found::Gone => Ok(None),
            Found::At(i) => Ok(Some(i)),
        }
    }

    pub fn destroy_qp<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        if let Some(i) = Self::for_destroy(&self.qps, qp, c)? {
            let hw_ok = self.can_command(lower);
            self.drop_qp(lower, i, hw_ok);
        }
        Ok(())
    }

    pub fn destroy_ah<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        ah: AhHandle,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        if let Some(i) = Self::for_destroy(&self.ahs, ah, c)? {
            let hw_ok = self.can_command(lower);
            self.drop_ah(lower, i, hw_ok);
        }
        Ok(())
    }

    pub fn dereg_mr<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        mr: MrHandle,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        if let Some(i) = Self::for_destroy(&self.mrs, mr, c)? {
            let hw_ok = self.can_command(lower);
            self.drop_mr(lower, i, hw_ok);
        }
        Ok(())
    }

    pub fn destroy_cq<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        cq: CqHandle,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        if let Some(i) = Self::for_destroy(&self.cqs, cq, c)? {
            let used = self
                .qps
                .live()
                .any(|(_, q)| q.data.send_cq == i || q.data.recv_cq == i);
            if used {
                return Err(DestroyError::Busy);
            }
            let hw_ok = self.can_command(lower);
            self.drop_cq(lower, i, hw_ok);
        }
        Ok(())
    }

    pub fn dealloc_pd<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        pd: PdHandle,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        if let Some(i) = Self::for_destroy(&self.pds, pd, c)? {
            let used = self.qps.live().any(|(_, q)| q.data.pd == i)
                || self.mrs.live().any(|(_, m)| m.data.pd == i)
                || self.ahs.live().any(|(_, a)| a.data.pd == i);
            if used {
                return Err(DestroyError::Busy);
            }
            let hw_ok = self.can_command(lower);
            self.drop_pd(lower, i, hw_ok);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
