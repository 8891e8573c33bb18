//! Fast path failover's side of a disk's client (docs/design.md §7 "Fast path failover",
//! "Adaptive path timeout", "Every command ends"): what the path tells its disk's queue of
//! its answers, giving overdue commands up (to another path, or to be sent again here past
//! the command bound), and the escalations past an unanswered abort, a stalled send or a
//! connection the transport gave up.

use hcabus::{Duration, Instant};

use super::SrpClient;
use crate::access::FabricBus;
use crate::disk::slots::check_wait;
use crate::disk::slots::Sent;
use crate::disk::{GiveUpRule, PathTimeout};
use crate::multipath::Multipath;

/// What a path's late commands want: see `SrpClient::evidence_plan`.
#[derive(Debug, Clone, Copy, Default)]
struct Evidence {
    check_at: Option<Instant>,
    ask: Option<(Instant, Instant)>,
}

/// How long a send may go unacknowledged by the adapter before the path asks for its reset
/// (at least; a longer path timeout or transport bound waits that long).
const STALL_AFTER: Duration = Duration::from_ms(100);

impl SrpClient {
    /// Tells the disk's queue what the target answered on this path: how young a command
    /// (for the other paths' failover), the answers a probing path is judged by, and which
    /// blocks its given-up writes still fence.
    pub(super) fn sync_answers<B: FabricBus + ?Sized>(
        &mut self,
        mp: &mut Multipath,
        index: usize,
        bus: &mut B,
    ) {
        let (disk, told, now) = (&mut self.disk, &mut self.told_answers, bus.now());
        if let Some(sent_at) = disk.timing().freshest_prompt() {
            mp.note_answer(index, sent_at);
        }
        let (prompt, slow) = disk.timing().answers();
        if (prompt, slow) != *told {
            let news = (prompt - told.0, slow - told.1);
            *told = (prompt, slow);
            if mp.path_answered(index, news, now, bus.rng()) {
                disk.timing.restored();
            }
        }
        mp.set_fences(index, disk.slots.fenced_writes());
        mp.note_load(index, disk.load());
    }

    /// The rule this disk's commands are given up by now: the command bound always, and
    /// for a path of a multipath disk with failover on, its timeout once another path
    /// answered a younger command (`mp`: the disk's queue and this path's place in it).
    fn give_up_rule(&self, mp: Option<(&Multipath, usize)>) -> GiveUpRule {
        let bound = self.disk.command_bound().bound;
        let mode = self.disk.config.path_timeout;
        let (overtaken_at, overtaker_rtt, tested) = match (mode, mp) {
            (PathTimeout::Off, _) | (_, None) => (None, None, false),
            (_, Some((mp, index))) => (
                mp.others_answered_at(index),
                mp.others_rtt(index),
                !mp.path_suspect(index),
            ),
        };
        let timeout = self.disk.path_timeout().unwrap_or(bound);
        GiveUpRule {
            timeout,
            check_wait: check_wait(timeout, self.disk.timing().estimator().srtt()),
            cap: mode.cap().unwrap_or(bound),
            overtaken_at,
            own_answered_at: self.disk.timing().freshest_any(),
            overtaker_rtt,
            bound,
            tested,
        }
    }

    /// Gives up what is overdue (docs/design.md §7). On a path of a multipath disk: commands
    /// out past the path's timeout that a younger command overtook on another path while
    /// this path answered nothing younger, or out past the command bound, go to the other
    /// paths at once (the target told to abort each), and the path is probed, one command
    /// at a time with backoff, until several prompt answers in a row or its adapter resets.
    /// On a disk of one path: commands out past the command bound are aborted and sent
    /// again once the abort is answered or the connection is gone.
    pub(super) fn fail_over_slow<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        if !self.disk.is_connected() {
            return;
        }
        let Some(p) = self.above.path() else {
            let rule = self.give_up_rule(None);
            if self.due(&rule).is_some_and(|t| t <= bus.now()) {
                let n = self.disk.give_up_overdue(&self.ibal, bus, &rule, |_| false);
                if n > 0 {
                    self.disk.timing.gave_up();
                    log::warn!(
                        "{}: {n} command(s) out past the command bound ({}): aborted, sent \
                         again once the target answers the abort",
                        self.desc.name,
                        rule.bound
                    );
                }
            }
            return;
        };
        let (mp, index) = (p.mp.clone(), p.index);
        let now = bus.now();
        let mut mp = mp.lock();
        self.sync_answers(&mut mp, index, bus);
        let rule = self.give_up_rule(Some((&mp, index)));
        if self.due(&rule).is_some_and(|t| t <= now) {
            let n = self.disk.give_up_overdue(&self.ibal, bus, &rule, |req| {
                mp.give_back(index, req);
                true
            });
            if n > 0 {
                self.disk.timing.gave_up();
                log::info!(
                    "{}: {n} command(s) out {} with another path answering, or past the \
                     command bound {}: given up for another path",
                    self.desc.name,
                    rule.timeout,
                    rule.bound
                );
                mp.gave_up(index, n, now, bus.rng());
            }
        }
        // After the give-up: a path that just gave its commands up is probed, and checks
        // nothing of its own.
        self.seek_evidence(&mut mp, index, bus);
        let suspect = mp.path_suspect(index);
        drop(mp);
        // The adapter's own acknowledgement of a send is not the route's business: a send
        // it has not completed within what its transport allows is a stall. Looked at
        // whether or not anything was due (the wake may be the stall's own).
        if let Some(limit) = self.stall_limit().filter(|_| suspect) {
            self.escalate_stall(bus, limit);
        }
    }

    /// What this path's late commands want (docs/design.md §7 "Evidence on demand"):
    /// when it checks itself (its youngest command out is late, its timeout or a check's
    /// `check_wait`, and nothing was sent after it), and which command the other paths are
    /// asked to check for, from when (the oldest late one: once the first command sent
    /// after it has been out the path's timeout unanswered too; a check tested by a check,
    /// once that test is out, so that their answers are in when it is due). A command is
    /// not asked for when failover is off, it was overtaken already, or this path answered
    /// something younger (it is alive and the command a straggler).
    fn evidence_plan(&self, mp: &Multipath, index: usize) -> Evidence {
        let none = Evidence::default();
        if self.disk.config.path_timeout == PathTimeout::Off || !self.disk.is_connected() {
            return none;
        }
        let (Some(timeout), Some(first), Some(last)) = (
            self.disk.path_timeout(),
            self.disk.slots.oldest(),
            self.disk.slots.youngest(),
        ) else {
            return none;
        };
        let (oldest, youngest) = (first.at, last.at);
        let answered = self.disk.timing().freshest_any();
        let quiet = |t: Instant| answered.is_none_or(|a| a < t);
        // A path being probed has its probe for a test: it sends no check of its own.
        let can_check = self.disk.can_send_more() && self.disk.is_up() && !mp.path_suspect(index);
        let overtaken = mp.others_answered_at(index).is_some_and(|t| t >= oldest);
        let half = check_wait(timeout, self.disk.timing().estimator().srtt());
        let test_at = youngest + if last.check { half } else { timeout };
        let ask_at = |t: Sent| {
            if first.check && t.check {
                (oldest + half).max(t.at)
            } else {
                (oldest + timeout).max(t.at + timeout)
            }
        };
        Evidence {
            check_at: (quiet(youngest) && can_check).then_some(test_at),
            ask: (quiet(oldest) && !overtaken)
                .then(|| self.disk.slots.first_after(oldest))
                .flatten()
                .map(|t| (oldest, ask_at(t))),
        }
    }

    /// Tells the disk's queue what this path's late command wants (the other paths check
    /// for it once asked), and checks this path itself when that is due.
    fn seek_evidence<B: FabricBus + ?Sized>(
        &mut self,
        mp: &mut Multipath,
        index: usize,
        bus: &mut B,
    ) {
        let now = bus.now();
        let plan = self.evidence_plan(mp, index);
        let ask = plan
            .ask
            .filter(|(_, at)| *at <= now)
            .map(|(oldest, _)| oldest);
        mp.want_evidence(index, ask);
        if plan.check_at.is_some_and(|t| t <= now) {
            self.disk.check_self(bus);
        }
    }

    /// When this path next acts on its late commands: checks itself, or asks the others.
    fn evidence_deadline(&self, mp: &Multipath, index: usize) -> Option<Instant> {
        let plan = self.evidence_plan(mp, index);
        let ask = plan
            .ask
            .filter(|(oldest, _)| mp.wants_evidence(index) != Some(*oldest))
            .map(|(_, at)| at);
        [plan.check_at, ask].into_iter().flatten().min()
    }

    /// When the first command `rule` gives up is due. A checker acts at its ticks only, the
    /// first at or after that, but the command bound does not wait for a tick.
    fn due(&self, rule: &GiveUpRule) -> Option<Instant> {
        let due = self.disk.slots.next_overdue(rule)?;
        let bound = self.disk.slots.oldest_sent().map(|t| t + rule.bound);
        Some(match self.disk.config.path_timeout {
            PathTimeout::Polled(r) => {
                // Noticed when the rule says, never before it is due; the command bound
                // still ends it first.
                let noticed = (r.noticed)(due, r.timeout).max(due);
                bound.map_or(noticed, |b| noticed.min(b))
            }
            _ => due,
        })
    }

    /// How long a send may go uncompleted before this path asks for its adapter's reset,
    /// while a reset may still be asked for (`None` once asked, during one, or unregistered):
    /// no sooner than the transport could still complete it (in error: a route that
    /// swallows what is sent is not a hung adapter), nor than the path's timeout.
    fn stall_limit(&self) -> Option<Duration> {
        let ask = !self.escalated && !self.resetting && self.id.is_some();
        let t = self.disk.path_timeout()?;
        let transport = self
            .disk
            .transport
            .completion_bound()
            .unwrap_or(self.disk.command_bound().bound);
        ask.then(|| t.max(STALL_AFTER).max(transport))
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

    /// A send completed in error (retry exceeded: the route swallowed every transmission of
    /// it): the queue pair is in error and the connection gone, as ib_srp sees a QP error.
    /// The commands out are taken back and the disk logs in again (refused while the route
    /// swallows the login too, and retried with backoff); a path stays given up if it was.
    pub(super) fn transport_lost<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let Some(status) = self.disk.take_qp_error() else {
            return;
        };
        if !self.disk.is_connected() {
            return;
        }
        self.disk.stats.transport_errors += 1;
        log::warn!(
            "{}: a send completed in error ({}): the connection is gone; logging in again",
            self.desc.name,
            status.as_str()
        );
        if let Some(p) = self.above.path() {
            p.mp.lock().keep_probing(p.index);
        }
        self.disk.on_reset(&self.ibal, bus);
        self.connect_at = self.port_up.then_some(bus.now());
    }

    /// An ABORT TASK unanswered past the disk's abort timeout: the route swallows what is
    /// sent (a blackhole), or the target lost the connection. The disk drops its connection,
    /// as SCSI error handling escalates past an abort, so the target can run nothing it gave
    /// up and the writes fenced behind them go out; it takes back what it still had and
    /// logs in again (refused while the route swallows the login too).
    pub(super) fn drop_stuck_connection<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let now = bus.now();
        let limit = self.abort_limit();
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
        if let Some(p) = self.above.path() {
            // Its own doing, not its adapter's reset: it stays given up while it logs in.
            p.mp.lock().keep_probing(p.index);
        }
        self.disk.on_reset(&self.ibal, bus);
        self.connect_at = self.port_up.then_some(now);
    }

    /// How long this path's aborts may go unanswered before its connection is dropped: the
    /// disk's abort timeout, or, while a write of the disk's queue waits behind a write this
    /// path gave up (its fence), the timeout without its floor (docs/design.md §7 "The write
    /// fence").
    fn abort_limit(&self) -> Duration {
        let holding = self
            .above
            .path()
            .is_some_and(|p| p.mp.lock().fence_holds_io(p.index));
        if holding {
            self.disk.abort_timeout_holding()
        } else {
            self.disk.abort_timeout()
        }
    }

    /// A path whose adapter has not completed a send in the stall limit has a stalled data
    /// path, not a slow target: it asks for the adapter's reset (as SCSI error handling
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

    /// When this disk next has work of its own bounds: a command overdue, an abort
    /// unanswered too long, a send that would make a stall, a send its transport may fail.
    pub(super) fn failover_deadlines(&self) -> [Option<Instant>; 4] {
        let connected = self.disk.is_connected();
        let overdue = connected
            .then(|| match self.above.path() {
                Some(p) => {
                    let mp = p.mp.lock();
                    let due = self.due(&self.give_up_rule(Some((&mp, p.index))));
                    let tell = self.evidence_deadline(&mp, p.index);
                    [due, tell].into_iter().flatten().min()
                }
                None => self.due(&self.give_up_rule(None)),
            })
            .flatten();
        // A path that gave commands up looks again when a send it never completed would
        // make a stall (the same conditions as `fail_over_slow`'s look).
        let stall = self.above.path().and_then(|p| {
            let limit = self.stall_limit()?;
            let suspect = p.mp.lock().path_suspect(p.index);
            suspect
                .then(|| self.disk.slots.stall_deadline(limit))
                .flatten()
        });
        // A connection dropped frees every abort.
        let abort = self.disk.slots.abort_deadline(self.abort_limit());
        [overdue, abort, stall, self.disk.transport_deadline()]
    }
}
