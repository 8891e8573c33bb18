//! The access layer: every consumer's verbs go through here, and here they meet resets.
//!
//! IBAL keeps a software object for every hardware resource, so that a reset can take the
//! hardware away without the consumer's handles dangling: on its RESET it drains what the
//! hardware already completed, turns every outstanding work request into a flushed
//! completion, and marks each object released. Consumers find their handles stale, their
//! posts refused, their polls answered with flushed completions. Memory regions registered
//! with [`MrFlags::PRESERVE_KEYS`] are re-registered with the same keys on RESET_END, before
//! any consumer hears of it (docs/design.md §7).
//!
//! Every table is reserved in [`Ibal::new`]: nothing here allocates afterwards, so the
//! whole reset path, re-creation included, runs without allocating (docs/design.md §6).

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

/// What a client of the access layer drives on any host: a bus whose device speaks
/// [`Verbs`] and has DMA memory for its buffers. User verbs needs no more.
pub trait ClientBus: BusHandle<Device: Verbs + DmaMemory> {}

impl<B: BusHandle<Device: Verbs + DmaMemory> + ?Sized> ClientBus for B {}

/// A client bus whose device also carries the far side of the wire ([`Fabric`]): the SRP
/// initiator and IPoIB run their far ends (a [`crate::target::Target`], an
/// [`crate::ipoib::Peer`], which the lab implements) on their own turn, handing them the
/// device as a [`crate::target::Wire`]. The simulated adapter is one on every host; on a
/// real host the far side is the network (docs/clients.md).
pub trait FabricBus: ClientBus<Device: Fabric> {}

impl<B: ClientBus<Device: Fabric> + ?Sized> FabricBus for B {}

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
mod destroy;
mod reset;
mod slab;
mod verbs;

use slab::{AhData, ConsumerSlot, CqData, Found, MrData, Orphan, PdData, QpData, Slab};

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
        let cq_entries = config.max_cq_entries as usize;
        let wr = config.max_wr as usize;
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
            pds: Slab::with(config.max_pds, || PdData { hw: None, pins: 0 }),
            cqs: Slab::with(config.max_cqs, || CqData {
                hw: None,
                entries: 0,
                ready: VecDeque::with_capacity(cq_entries),
            }),
            qps: Slab::with(config.max_qps, || QpData {
                hw: None,
                pd: 0,
                send_cq: 0,
                recv_cq: 0,
                max_send_wr: 0,
                max_recv_wr: 0,
                sends: VecDeque::with_capacity(wr),
                recvs: VecDeque::with_capacity(wr),
            }),
            mrs: Slab::with(config.max_mrs, || MrData {
                hw: None,
                keys: MrKeys { lkey: 0, rkey: 0 },
                pd: 0,
                addr: 0,
                len: 0,
                access: Access::empty(),
                preserve: false,
            }),
            ahs: Slab::with(config.max_ahs, || AhData { hw: None, pd: 0 }),
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
            && matches!(
                lower.state(),
                State::Operational | State::Preparing | State::Restoring
            );
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
        // Preparing is still in service: a planned reset is only being asked about.
        self.phase == Phase::Running && lower.state().in_service()
    }

    fn gates<L: VerbsBus + ?Sized, E: From<Gate>>(&mut self, lower: &L) -> Result<(), E> {
        self.failed(lower)?;
        self.resetting(lower)?;
        Ok(())
    }
}
