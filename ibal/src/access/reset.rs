//! IBAL's side of the reset protocol, called by its bus client: release on RESET, bring
//! preserved regions back on RESET_END, resume on RESET_ABORTED, give up on RESET_FAILED.

use hcabus::types::Epoch;
use hcabus::verbs::*;
use hcabus::State;

use super::slab::Orphan;
use super::{Ibal, Phase, VerbsBus};

impl Ibal {
    /// IBAL registered with the bus in `epoch`.
    pub fn attach(&mut self, epoch: Epoch, state: State) {
        self.epoch = epoch;
        self.phase = match state {
            State::Failed => Phase::Failed,
            State::Removed => Phase::Removed,
            State::Operational | State::Preparing => Phase::Running,
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
            if !self.qps.held(i) {
                continue;
            }
            let s = &self.qps.slots[i];
            let (send_cq, recv_cq) = (s.data.send_cq, s.data.recv_cq);
            let qpn = s.data.hw.unwrap_or(Qpn(0));
            while let Some(wr_id) = self.qps.slots[i].data.sends.pop_front() {
                self.flush(send_cq, wr_id, qpn, WcOpcode::Send);
            }
            while let Some(wr_id) = self.qps.slots[i].data.recvs.pop_front() {
                self.flush(recv_cq, wr_id, qpn, WcOpcode::Recv);
            }
            let hw = self.qps.release(i);
            self.released(hw);
        }
        for i in 0..self.ahs.slots.len() {
            if self.ahs.held(i) {
                let hw = self.ahs.release(i);
                self.released(hw);
            }
        }
        for i in 0..self.mrs.slots.len() {
            // A preserved region keeps its keys and its handle; RESET_END brings it back.
            if self.mrs.held(i) && !self.mrs.slots[i].data.preserve {
                let hw = self.mrs.release(i);
                self.released(hw);
            }
        }
        for i in 0..self.cqs.slots.len() {
            if self.cqs.held(i) {
                let hw = self.cqs.release(i);
                self.released(hw);
            }
        }
        for i in 0..self.pds.slots.len() {
            if self.pds.held(i) && self.pds.slots[i].data.pins == 0 {
                let hw = self.pds.release(i);
                self.released(hw);
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

    /// An object released for a reset: counted, and its hardware object orphaned (the
    /// reset destroys it, or an abort leaves it to [`Ibal::destroy_orphans`]).
    fn released(&mut self, hw: Option<Orphan>) {
        self.stats.released += 1;
        if let Some(o) = hw {
            self.orphan(o);
        }
    }

    pub(super) fn orphan(&mut self, o: Orphan) {
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
                Some(pd) => {
                    let d = &s.data;
                    let (addr, len, access) = (d.addr, d.len, d.access);
                    let attr = MrAttr {
                        pd,
                        addr,
                        len,
                        access,
                    };
                    lower.device().reg_mr(attr, Some(d.keys))
                }
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
                if o.destroy(lower.device()).is_ok() {
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
}
