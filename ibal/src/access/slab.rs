//! IBAL's object tables: one slab per kind of verbs object, each slot a software object
//! that outlives the hardware object behind it across a reset.

use std::collections::VecDeque;
use std::vec::Vec;

use hcabus::types::{ClientName, Epoch};
use hcabus::verbs::*;

use crate::handle::Handle;

#[derive(Debug, Clone)]
pub(super) struct Slot<T> {
    pub(super) live: bool,
    pub(super) generation: u32,
    pub(super) consumer: u16,
    /// The epoch of the hardware object behind it.
    pub(super) epoch: Epoch,
    /// Its hardware was released for a reset: every handle to it is stale.
    pub(super) released: bool,
    pub(super) data: T,
}

#[derive(Debug, Clone)]
pub(super) struct Slab<T> {
    pub(super) slots: Vec<Slot<T>>,
}

pub(super) enum Found {
    At(usize),
    /// Destroyed (or never existed).
    Gone,
    NotOwner,
}

/// The software side of one kind of object: it can give up its hardware object.
pub(super) trait HwData {
    /// Takes the hardware object out, as what to destroy (or orphan) in the device.
    fn take_hw(&mut self) -> Option<Orphan>;
}

impl<T> Slab<T> {
    /// `capacity` slots, each built by `blank`: every slot reserves its own rings here, once
    /// (a `Clone` of one blank would keep the capacity only for the first copy).
    pub(super) fn with(capacity: u16, mut blank: impl FnMut() -> T) -> Self {
        Slab {
            slots: (0..capacity)
                .map(|_| Slot {
                    live: false,
                    generation: 0,
                    consumer: 0,
                    epoch: Epoch(0),
                    released: false,
                    data: blank(),
                })
                .collect(),
        }
    }

    /// Lowest free slot: reuse is immediate, so the generation check matters.
    pub(super) fn free(&self) -> Option<usize> {
        self.slots.iter().position(|s| !s.live)
    }

    pub(super) fn occupy(&mut self, i: usize, consumer: u16, epoch: Epoch) -> (u32, u32) {
        let s = &mut self.slots[i];
        s.live = true;
        s.generation = s.generation.wrapping_add(1);
        s.consumer = consumer;
        s.epoch = epoch;
        s.released = false;
        (i as u32, s.generation)
    }

    pub(super) fn vacate(&mut self, i: usize) {
        let s = &mut self.slots[i];
        s.live = false;
        // A new generation at once: the destroyed handle can never match again.
        s.generation = s.generation.wrapping_add(1);
    }

    pub(super) fn find<K>(&self, h: Handle<K>, consumer: u16) -> Found {
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

    pub(super) fn live(&self) -> impl Iterator<Item = (usize, &Slot<T>)> {
        self.slots.iter().enumerate().filter(|(_, s)| s.live)
    }

    /// Slot `i` is live and belongs to `consumer`.
    pub(super) fn owned_by(&self, i: usize, consumer: u16) -> bool {
        self.slots[i].live && self.slots[i].consumer == consumer
    }

    /// Slot `i` is live and its hardware has not been released.
    pub(super) fn held(&self, i: usize) -> bool {
        self.slots[i].live && !self.slots[i].released
    }
}

impl<T: HwData> Slab<T> {
    /// For a destroy: the hardware object of slot `i`, unless a reset already released it.
    pub(super) fn take_hw(&mut self, i: usize) -> Option<Orphan> {
        let s = &mut self.slots[i];
        s.data.take_hw().filter(|_| !s.released)
    }

    /// For a reset: marks slot `i` released and hands its hardware object over.
    pub(super) fn release(&mut self, i: usize) -> Option<Orphan> {
        let s = &mut self.slots[i];
        s.released = true;
        s.data.take_hw()
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct PdData {
    pub(super) hw: Option<Pdn>,
    /// Preserved memory regions inside: the PD must come back with them.
    pub(super) pins: u32,
}

#[derive(Debug, Clone)]
pub(super) struct CqData {
    pub(super) hw: Option<Cqn>,
    pub(super) entries: u32,
    /// Completions for the consumer that no longer come from the hardware: drained before
    /// a release, or flushed by it.
    pub(super) ready: VecDeque<Cqe>,
}

#[derive(Debug, Clone)]
pub(super) struct QpData {
    pub(super) hw: Option<Qpn>,
    pub(super) pd: usize,
    pub(super) send_cq: usize,
    pub(super) recv_cq: usize,
    pub(super) max_send_wr: u32,
    pub(super) max_recv_wr: u32,
    /// Outstanding work requests, oldest first: what to flush if the hardware goes.
    pub(super) sends: VecDeque<u64>,
    pub(super) recvs: VecDeque<u64>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct MrData {
    pub(super) hw: Option<MrKeys>,
    pub(super) keys: MrKeys,
    pub(super) pd: usize,
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) access: Access,
    pub(super) preserve: bool,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct AhData {
    pub(super) hw: Option<Ahn>,
    pub(super) pd: usize,
}

impl HwData for PdData {
    fn take_hw(&mut self) -> Option<Orphan> {
        self.hw.take().map(Orphan::Pd)
    }
}

impl HwData for CqData {
    fn take_hw(&mut self) -> Option<Orphan> {
        self.hw.take().map(Orphan::Cq)
    }
}

impl HwData for QpData {
    fn take_hw(&mut self) -> Option<Orphan> {
        self.hw.take().map(Orphan::Qp)
    }
}

impl HwData for MrData {
    fn take_hw(&mut self) -> Option<Orphan> {
        self.hw.take().map(|k| Orphan::Mr(k.lkey))
    }
}

impl HwData for AhData {
    fn take_hw(&mut self) -> Option<Orphan> {
        self.hw.take().map(Orphan::Ah)
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct ConsumerSlot {
    pub(super) live: bool,
    pub(super) generation: u32,
    pub(super) name: Option<ClientName>,
}

/// A hardware object nobody owns any more that may still exist in the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Orphan {
    Qp(Qpn),
    Ah(Ahn),
    Mr(u32),
    Cq(Cqn),
    Pd(Pdn),
}

impl Orphan {
    /// Destroy order: users before what they use.
    pub(super) fn rank(self) -> u8 {
        match self {
            Orphan::Qp(_) => 0,
            Orphan::Ah(_) => 1,
            Orphan::Mr(_) => 2,
            Orphan::Cq(_) => 3,
            Orphan::Pd(_) => 4,
        }
    }

    /// Destroys the object in the device (a firmware command).
    pub(super) fn destroy(self, hw: &mut (impl Verbs + ?Sized)) -> Result<(), VerbsError> {
        match self {
            Orphan::Qp(q) => hw.destroy_qp(q),
            Orphan::Ah(a) => hw.destroy_ah(a),
            Orphan::Mr(k) => hw.dereg_mr(k),
            Orphan::Cq(c) => hw.destroy_cq(c),
            Orphan::Pd(p) => hw.dealloc_pd(p),
        }
    }
}
