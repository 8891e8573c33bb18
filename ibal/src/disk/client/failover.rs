//! Fast path failover's side of a disk's client (docs/design.md §7 "Fast path failover",
//! "Adaptive path timeout"): what the path tells its disk's queue of its answers, giving
//! overdue commands up, and the escalations past an unanswered abort or a stalled send.

use hcabus::{Duration, Instant};

use super::SrpClient;
use crate::access::FabricBus;
use crate::disk::{GiveUpRule, PathTimeout};

/// How long a send may go unacknowledged by the adapter before the path asks for its reset
/// (at least; a longer path timeout waits that long).
const STALL_AFTER: Duration = Duration::from_ms(100);

/// The least time an ABORT TASK is given before its path's connection is dropped.
const ABORT_TIMEOUT_MIN: Duration = Duration::from_ms(500);

impl SrpClient {
    /// Tells the disk's queue what the target answered on this path: how young a command
    /// (for the other paths' failover), the answers a probing path is judged by, and which
    /// blocks its given-up writes still fence.
    pub(super) fn sync_answers<B: FabricBus + ?Sized>(
        &mut self,
        mp: &mut crate::multipath::Multipath,
        index: usize,
        bus: &mut B,
    ) {
        let (disk, told, now) = (&self.disk, &mut self.told_answers, bus.now());
        if let Some(sent_at) = disk.timing().freshest_prompt() {
            mp.note_answer(index, sent_at);
        }
        let (prompt, slow) = disk.timing().answers();
        if (prompt, slow) != *told {
            let news = (prompt - told.0, slow - told.1);
            *told = (prompt, slow);
            mp.path_answered(index, news, now, bus.rng());
        }
        mp.set_fences(index, disk.slots.fenced_writes());
        mp.note_room(index, disk.can_send_more());
    }

    /// The rule fast path failover gives this path's commands up by now, if any (another
    /// path must have answered, and the disk must have a timeout).
    fn give_up_rule(&self, mp: &crate::multipath::Multipath, index: usize) -> Option<GiveUpRule> {
        let mode = self.disk.config.path_timeout;
        Some(GiveUpRule {
            timeout: self.disk.path_timeout()?,
            cap: mode.cap()?,
            overtaken_at: mp.others_answered_at(index)?,
            own_answered_at: self.disk.timing().freshest_any(),
        })
    }

    /// Fast path failover (docs/design.md §7): commands out on this path past its timeout,
    /// which a younger command overtook on another path while this path answered nothing
    /// younger, are given up here (the target told to abort each) for the other path to
    /// re-issue at once; this path is then probed, one command at a time with backoff, and
    /// serves again after several prompt answers in a row, or when its adapter resets.
    pub(super) fn fail_over_slow<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let Some(p) = &self.path else {
            return;
        };
        let (mp, index) = (p.mp.clone(), p.index);
        let now = bus.now();
        let mut mp = mp.lock();
        self.sync_answers(&mut mp, index, bus);
        if let Some(rule) = self.give_up_rule(&mp, index) {
            let due = self.due(&rule);
            if due.is_some_and(|t| t <= now) {
                let n = self
                    .disk
                    .give_up_overdue(&self.ibal, bus, &rule, |req| mp.give_back(index, req));
                if n > 0 {
                    log::info!(
                        "{}: {n} command(s) out {} with another path answering: given up for it",
                        self.desc.name,
                        rule.timeout
                    );
                    mp.gave_up(index, n, now, bus.rng());
                }
            }
        }
        let suspect = mp.path_suspect(index);
        drop(mp);
        // The adapter's own acknowledgement of a send is not the route's business: a send
        // it has not completed in 100 ms (or the path's timeout, if longer) is a stall. Looked
        // at whether or not anything was due (the wake may be the stall's own).
        if let Some(limit) = self.stall_limit().filter(|_| suspect) {
            self.escalate_stall(bus, limit);
        }
    }

    /// When the first command `rule` gives up is due; a checker acts at its ticks only, the
    /// first at or after that.
    fn due(&self, rule: &GiveUpRule) -> Option<Instant> {
        let due = self.disk.slots.next_overdue(rule)?;
        Some(match self.disk.config.path_timeout {
            PathTimeout::Checker { interval } => {
                let q = interval.as_us().max(1);
                Instant::from_us(due.as_us().div_ceil(q) * q)
            }
            _ => due,
        })
    }

    /// How long a send may go uncompleted before this path asks for its adapter's reset,
    /// while a reset may still be asked for (`None` once asked, during one, or unregistered).
    fn stall_limit(&self) -> Option<Duration> {
        let ask = !self.escalated && !self.resetting && self.id.is_some();
        let t = self.disk.path_timeout()?;
        ask.then(|| t.max(STALL_AFTER))
    }

    /// How long an ABORT TASK may go unanswered before the path drops its connection: twice
    /// the path's timeout, at least half a second (an abort is answered in one round trip
    /// of the route; the floor keeps a route merely slower than the timeout from losing its
    /// connection at each give-up).
    fn abort_timeout(&self) -> Option<Duration> {
        let t = self.disk.path_timeout()?;
        Some(Duration::from_us(t.as_us().saturating_mul(2)).max(ABORT_TIMEOUT_MIN))
    }

    /// The target restarted (a fleet's target, docs/design.md §11): the connection is gone.
    /// As at a port loss, the commands out are taken back and the disk logs in again.
    pub(super) fn target_dropped<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        if !self.target.take_dropped() || !self.disk.is_connected() {
            return;
        }
        log::warn!("{}: the target restarted: logging in again", self.desc.name);
        self.disk.on_reset(&self.ibal, bus);
        self.connect_at = self.port_up.then_some(bus.now());
    }

    /// An ABORT TASK unanswered past [`Self::abort_timeout`]: the route swallows what is
    /// sent (a blackhole). The path drops its connection, as SCSI error handling escalates
    /// past an abort, so the target can run nothing it gave up and the writes fenced behind
    /// them go out; it takes back what it still had and logs in again (refused while the
    /// route swallows the login too).
    pub(super) fn drop_stuck_connection<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let now = bus.now();
        let Some(limit) = self.abort_timeout().filter(|_| self.path.is_some()) else {
            return;
        };
        if !self.disk.is_connected()
            || self
                .disk
                .slots
                .abort_deadline(limit)
                .is_none_or(|t| t > now)
        {
            return;
        }
        self.disk.stats.abort_timeouts += 1;
        log::warn!(
            "{}: an ABORT TASK unanswered for {limit}: the connection is dropped",
            self.desc.name
        );
        if let Some(p) = &self.path {
            // Its own doing, not its adapter's reset: it stays given up while it logs in.
            p.mp.lock().keep_probing(p.index);
        }
        self.disk.on_reset(&self.ibal, bus);
        self.connect_at = self.port_up.then_some(now);
    }

    /// A path whose adapter has not completed a send in `path_io_timeout` has a stalled
    /// data path, not a slow target: it asks for the adapter's reset (as SCSI error handling
    /// escalates to a host reset), once until the reset comes. The reset frees what its
    /// given-up writes fence, sooner than the health poll would.
    fn escalate_stall<B: FabricBus + ?Sized>(&mut self, bus: &mut B, limit: Duration) {
        // `limit` is given only while a reset may be asked for (`stall_limit`).
        let Some(id) = self.id else {
            return;
        };
        if !self.disk.slots.stalled_send(bus.now(), limit) {
            return;
        }
        self.escalated = true;
        match bus.reset_request(id) {
            Ok(epoch) => log::warn!(
                "{}: no send completed in {limit}: asked for the adapter's reset ({epoch})",
                self.desc.name
            ),
            Err(e) => {
                self.refusals += 1;
                log::warn!("{}: the adapter's reset was refused: {e}", self.desc.name);
            }
        }
    }

    /// When this path next has failover work: a command overdue, an abort unanswered too
    /// long, a send that would make a stall.
    pub(super) fn failover_deadlines(&self) -> [Option<Instant>; 3] {
        let overdue = self.path.as_ref().and_then(|p| {
            let rule = self.give_up_rule(&p.mp.lock(), p.index)?;
            self.due(&rule)
        });
        // A path that gave commands up looks again when a send it never completed would
        // make a stall (the same conditions as `fail_over_slow`'s look).
        let stall = self.path.as_ref().and_then(|p| {
            let limit = self.stall_limit()?;
            let suspect = p.mp.lock().path_suspect(p.index);
            suspect
                .then(|| self.disk.slots.stall_deadline(limit))
                .flatten()
        });
        // Only a path gives commands up, and a connection dropped frees every abort.
        let abort = self
            .abort_timeout()
            .and_then(|t| self.disk.slots.abort_deadline(t));
        [overdue, abort, stall]
    }
}
