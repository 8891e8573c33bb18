//! Destroys: a consumer's objects go from IBAL's tables at once; their hardware objects are
//! destroyed by firmware command when the device takes commands, and orphaned otherwise
//! (a reset under way destroys them; an aborted one leaves them to `destroy_orphans`).

use crate::errors::DestroyError;
use crate::handle::*;

use super::slab::{Found, Orphan, Slab};
use super::{Ibal, VerbsBus};

impl Ibal {
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
            if self.qps.owned_by(i, c.index) {
                self.drop_qp(lower, i, hw_ok);
            }
        }
        for i in 0..self.ahs.slots.len() {
            if self.ahs.owned_by(i, c.index) {
                self.drop_ah(lower, i, hw_ok);
            }
        }
        for i in 0..self.mrs.slots.len() {
            if self.mrs.owned_by(i, c.index) {
                self.drop_mr(lower, i, hw_ok);
            }
        }
        for i in 0..self.cqs.slots.len() {
            if self.cqs.owned_by(i, c.index) {
                self.drop_cq(lower, i, hw_ok);
            }
        }
        for i in 0..self.pds.slots.len() {
            if self.pds.owned_by(i, c.index) {
                self.drop_pd(lower, i, hw_ok);
            }
        }
        Ok(())
    }

    /// Destroys `hw` in the device when it takes commands; orphans it otherwise, or when
    /// the command fails.
    fn give_back<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, hw: Option<Orphan>, hw_ok: bool) {
        if let Some(o) = hw {
            if !hw_ok || o.destroy(lower.device()).is_err() {
                self.orphan(o);
            }
        }
    }

    fn drop_qp<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let hw = self.qps.take_hw(i);
        self.give_back(lower, hw, hw_ok);
        let d = &mut self.qps.slots[i].data;
        d.sends.clear();
        d.recvs.clear();
        self.qps.vacate(i);
    }

    fn drop_ah<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let hw = self.ahs.take_hw(i);
        self.give_back(lower, hw, hw_ok);
        self.ahs.vacate(i);
    }

    fn drop_mr<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let hw = self.mrs.take_hw(i);
        self.give_back(lower, hw, hw_ok);
        let d = &self.mrs.slots[i].data;
        if d.preserve {
            let pins = &mut self.pds.slots[d.pd].data.pins;
            *pins = pins.saturating_sub(1);
        }
        self.mrs.vacate(i);
    }

    fn drop_cq<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let hw = self.cqs.take_hw(i);
        self.give_back(lower, hw, hw_ok);
        self.cqs.slots[i].data.ready.clear();
        self.cqs.vacate(i);
    }

    fn drop_pd<L: VerbsBus + ?Sized>(&mut self, lower: &mut L, i: usize, hw_ok: bool) {
        let hw = self.pds.take_hw(i);
        self.give_back(lower, hw, hw_ok);
        self.pds.vacate(i);
    }

    /// The slot of `h` for a destroy by `c`: `Ok(None)` when there is nothing left to
    /// destroy (destroying twice, or after a reset replaced the slot, is not an error).
    fn destroy_target<T, K>(
        &self,
        slab: &Slab<T>,
        h: Handle<K>,
        c: ConsumerId,
    ) -> Result<Option<usize>, DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
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
        if let Some(i) = self.destroy_target(&self.qps, qp, c)? {
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
        if let Some(i) = self.destroy_target(&self.ahs, ah, c)? {
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
        if let Some(i) = self.destroy_target(&self.mrs, mr, c)? {
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
        if let Some(i) = self.destroy_target(&self.cqs, cq, c)? {
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
        if let Some(i) = self.destroy_target(&self.pds, pd, c)? {
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
