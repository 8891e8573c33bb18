//! The last-path guard's side of a disk's client (docs/design.md §7): the answer to
//! RESET_QUERY, and the answer kept true until the query closes (docs/design.md §3).

use hcabus::types::*;

use super::SrpClient;
use crate::access::FabricBus;
use crate::multipath::{only_path, PathGap};

impl SrpClient {
    /// Why this path is not serving, as another path's guard names it; `None` while it is.
    pub(super) fn gap(&self) -> Option<PathGap> {
        if self.disk.is_up() {
            None
        } else if self.disk.failed.is_some() {
            Some(PathGap::Failed)
        } else if self.resetting {
            Some(PathGap::Resetting)
        } else if !self.port_up {
            Some(PathGap::PortDown)
        } else {
            Some(PathGap::LoggedOut)
        }
    }

    /// RESET_QUERY with the last-path guard on: consents when another path of the disk is
    /// Active and logged in, else vetoes naming what is missing. A disk of one path always
    /// vetoes: the planned reset would take its only path.
    pub(super) fn guard<B: FabricBus + ?Sized>(&mut self, bus: &mut B, epoch: Epoch) {
        let Some(id) = self.id else {
            return;
        };
        let missing = match self.above.path() {
            Some(p) => p.mp.lock().last_path(p.index),
            None => Some(only_path()),
        };
        let answered = match missing {
            None => {
                let ok = bus.reset_consent(id, epoch).is_ok();
                if let (true, Some(p)) = (ok, self.above.path()) {
                    p.mp.lock().consent_given(p.index);
                    self.consented = Some(epoch);
                }
                ok
            }
            Some(reason) => self.veto(bus, id, epoch, reason),
        };
        if !answered {
            self.refusals += 1;
        }
    }

    fn veto<B: FabricBus + ?Sized>(
        &self,
        bus: &mut B,
        id: ClientId,
        epoch: Epoch,
        reason: VetoReason,
    ) -> bool {
        log::info!("{}: vetoes the planned reset: {reason}", self.desc.name);
        bus.reset_veto(id, epoch, reason).is_ok()
    }

    /// Now (the disk's latest instant) when the consent this path gave no longer holds: the
    /// query is open and another path has since gone down, lost its login or been consented
    /// away.
    pub(super) fn recheck_due(&self) -> Option<hcabus::Instant> {
        let p = self.above.path().filter(|_| self.consented.is_some())?;
        let mp = p.mp.lock();
        mp.last_path(p.index).map(|_| mp.now())
    }

    /// While the query this path consented to is open, its answer must still hold
    /// (docs/design.md §3): if the disk would now be left with no path, it vetoes after all. A veto the bus
    /// refuses came too late (the query closed as it was sent): counted, and the reset that
    /// goes ahead finds this path as any reset does.
    pub(super) fn recheck_consent<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let (Some(p), Some(epoch), Some(id)) = (self.above.path(), self.consented, self.id) else {
            return;
        };
        let Some(reason) = p.mp.lock().last_path(p.index) else {
            return;
        };
        p.mp.lock().consent_withdrawn(p.index);
        self.consented = None;
        log::info!("{}: withdraws its consent", self.desc.name);
        if !self.veto(bus, id, epoch, reason) {
            self.refusals += 1;
        }
    }

    /// The query this path consented to closed: the reset went ahead (`began`) or not.
    pub(super) fn query_closed(&mut self, began: bool) {
        self.consented = None;
        if let Some(p) = self.above.path() {
            let mut mp = p.mp.lock();
            if began {
                mp.consented_reset_began(p.index);
            } else {
                mp.consent_withdrawn(p.index);
            }
        }
    }
}
