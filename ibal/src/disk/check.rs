//! Idle checks (docs/design.md §7 "Idle checks"): a path of a multipath disk that has had
//! nothing out for a second sends a check (SCSI's TEST UNIT READY: no data, no block), at
//! most one a second, so that a dead path with no I/O on it is known before I/O needs it,
//! as multipathd's path checkers and MPIO's path verification do. A check is a command like
//! any other to the target and to fast path failover: answered, it is a round trip (the
//! selector's price, the other paths' overtaking evidence); unanswered past the path's
//! timeout while another path answers, it is given up and the path is probed. It is
//! nobody's I/O: never completed upward, never handed to another path.
//!
//! A path also checks on demand: when another path's command is out past that path's
//! timeout and no younger command was answered elsewhere, an idle path sends a check at
//! once, so that a dead path is known within its timeout and a round trip even when I/O is
//! sparse (at 2 IOPS the next I/O on another path is 500 ms away).

use hcabus::{Duration, Instant};

use super::SrpDisk;
use crate::access::FabricBus;
use crate::io::IoRequest;

/// How long a path may have nothing out before it is checked, and so the most checks a
/// second it sends: one.
pub const CHECK_IDLE: Duration = Duration::from_ms(1_000);

impl SrpDisk {
    /// Nothing out and nothing waiting to be sent.
    fn idle(&self) -> bool {
        self.slots.answers_owed() == 0 && self.slots.queued() == 0
    }

    /// When this path's next idle check is due: a second after it last sent anything (or
    /// logged in), while it is up with nothing out and nothing waiting to be sent.
    pub(super) fn check_due(&self) -> Option<Instant> {
        let since = self.last_sent.filter(|_| self.idle() && self.is_up())?;
        Some(since + CHECK_IDLE)
    }

    /// Queues the idle check when it is due (the caller's pump sends it).
    pub(super) fn check_if_idle<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        if self.check_due().is_some_and(|t| t <= bus.now()) {
            self.send_check(bus, false);
        }
    }

    /// When this path checks at once to give another path's late command (sent at
    /// `since`) its evidence: it is up with nothing out or waiting, and sent nothing since
    /// then. One check per late command at most: once sent, it has sent after `since`.
    pub(super) fn demand_check_due(&self, since: Instant) -> Option<Instant> {
        let quiet = self.last_sent.is_none_or(|t| t < since);
        (self.idle() && quiet && self.is_up()).then_some(since)
    }

    /// Sends the check another path's late command wants, when due.
    pub(super) fn check_on_demand<B: FabricBus + ?Sized>(&mut self, bus: &mut B, since: Instant) {
        if self.demand_check_due(since).is_some_and(|t| t <= bus.now()) {
            self.send_check(bus, true);
        }
    }

    /// Checks this path at once: its youngest command out is late and nothing was
    /// answered since it was sent (the caller decides when).
    pub(super) fn check_self<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        self.send_check(bus, true);
    }

    /// Queues a check. Counted as sent once it is queued: the next idle one waits a second
    /// from here whether or not the pump could send this one.
    fn send_check<B: FabricBus + ?Sized>(&mut self, bus: &mut B, on_demand: bool) {
        let now = bus.now();
        if self.submit(bus, IoRequest::check(now), false).is_ok() {
            self.stats.checks_sent += 1;
            self.stats.checks_on_demand += u64::from(on_demand);
            self.last_sent = Some(now);
        }
    }
}
