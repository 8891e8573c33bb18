//! SRP on the simulated fabric: the information units, and a target with LUNs that hold
//! real block contents.
//!
//! The initiator sends an SRP_CMD naming its data buffer (address, R-Key, length); the
//! target moves the data with RDMA (READ for a write command, WRITE for a read command)
//! and answers with an SRP_RSP. Only the connection setup is compressed: the CM REQ/REP
//! and SRP_LOGIN exchange is one call, [`SrpTarget::admit`] then [`SrpTarget::login`],
//! and the connection carries commands once the route's login time has passed.
//!
//! Task management is ABORT TASK only ([`SrpTskMgmt`]): the initiator gives a command up
//! (fast path failover) and tells the target, which drops it if it has not run it yet. The
//! target answers every abort, after any answer of the command itself, on the same
//! connection: the initiator knows the command's tag is free once that answer comes.

use std::collections::VecDeque;
use std::vec::Vec;

use hcabus::fabric::{RemoteError, RemoteRdma, WireMsg};
use hcabus::verbs::{Lid, Qpn, RemoteQp};

use hcabus::{Duration, Instant};
use ibal::target::{Target, Wire};
use rand::RngCore;

use ibal::io::{checksum_blocks, BLOCK_SIZE};
use ibal::srp::{SrpCmd, SrpRsp, SrpStatus, SrpTskMgmt, IU_SIZE};

mod admission;
mod lun;
pub use lun::Lun;
mod route;
mod transport;
pub use admission::{
    Admission, AdmissionStats, CapacityError, LoginCapacity, LoginRejected, SharedAdmission,
    MAX_CONCURRENT_LOGINS, MAX_LOGINS_PER_SECOND,
};
pub use route::{
    LinkQueue, Route, RouteError, RoutePhase, Slowness, LOGIN_TIME, MAX_ROUTE_PHASES, SERVICE_MAX,
    SERVICE_MIN,
};

/// Counts kept by the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetStats {
    pub logins: u32,
    pub commands: u64,
    pub reads: u64,
    pub writes: u64,
    /// TEST UNIT READYs (an idle path's checks): no data moved.
    pub checks: u64,
    /// Writes whose data did not match their checksum: corruption on the path.
    pub write_mismatches: u64,
    /// Commands or responses the host never got (its adapter was down, the QP gone).
    pub undeliverable: u64,
    /// Messages for a connection that no longer exists.
    pub stale_messages: u64,
    pub malformed: u64,
    /// ABORT TASKs that found their command waiting and dropped it.
    pub aborted: u64,
    /// ABORT TASKs that came after their command had run.
    pub aborts_too_late: u64,
    /// Commands refused because the target's queue was full.
    pub overflowed: u64,
    /// Blocks of its LUN written with something other than a pattern (kept whole: the lab's
    /// workloads write none).
    pub data_blocks: u64,
    /// Commands whose transmission a lossy route lost with no transport timer to resend it.
    pub lost: u64,
    /// Commands, aborts and answers a blackholed route swallowed at least once: each got
    /// through on a retransmission, or its transport gave it up.
    pub blackholed: u64,
    /// Commands, answers and data transfers that got through on a retransmission after the
    /// initiator's port came back (a link flap ridden by the transport, no login).
    pub port_dark_retransmits: u64,
    /// Connections the target's own transport gave up: an answer the route swallowed for
    /// the whole retry budget put its queue pair in error, and the connection went.
    pub transport_failures: u32,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    due: Instant,
    /// When its data transfer was first tried and swallowed (the initiator's port dark):
    /// it is tried again at each of the transport's retransmissions after that.
    tried: Option<Instant>,
    /// The target QP the command came in on.
    via: Qpn,
    cmd: SrpCmd,
}

/// Most commands the target holds at once unless its initiator's queue says fewer
/// (`with_queue_for`).
const TARGET_QUEUE: usize = 1024;

/// An answer on its way back to the initiator.
#[derive(Debug, Clone, Copy)]
struct Outgoing {
    /// When it arrives, if the route carries its first transmission; each retransmission
    /// arrives a transport timeout later.
    due: Instant,
    /// The target QP it goes out on.
    via: Qpn,
    rsp: SrpRsp,
}

/// A remote SRP target port with one LUN of real blocks.
#[derive(Debug, Clone)]
pub struct SrpTarget {
    lid: Lid,
    blocks: Lun,
    /// The live connection: the target's QP and the initiator's.
    conn: Option<(Qpn, RemoteQp)>,
    next_qpn: u32,
    queue: VecDeque<Pending>,
    /// Answers in the order they were made: they leave in that order (a reliable
    /// connection delivers in order), each no sooner than `latency` after it was made.
    outbox: VecDeque<Outgoing>,
    scratch: Vec<u8>,
    /// How this port's route and service behave over time (a constant latency, or the
    /// phases of a fail-slow trace).
    route: Route,
    /// The target's login capacity and restarts, shared by its ports (`None`: it takes
    /// every login and never restarts).
    admission: Option<SharedAdmission>,
    /// The target's count of restarts when this port's connection was made, and when its
    /// last login was admitted.
    restarts_at_login: u32,
    restarts_admitted: u32,
    /// When the last login's REQ arrived (admitted or not; `login` follows an admission at
    /// once), and so when the live connection was made: its addresses are the initiator
    /// port's then (`Wire::carries`).
    admitted_at: Instant,
    conn_since: Instant,
    /// The next transmission of a command (or abort) the route swallowed, and of an
    /// answer: when each is tried again.
    retransmit_in: Option<Instant>,
    retransmit_out: Option<Instant>,
    /// The data its link has carried (a route with a bandwidth).
    link: LinkQueue,
    stats: TargetStats,
}

impl SrpTarget {
    /// A target at `lid` whose LUN has `n_blocks` blocks, each filled with a pattern the
    /// initiator's workload can predict.
    pub fn new(lid: Lid, lun_id: u32, n_blocks: u64) -> Self {
        Self::with_lun(lid, Lun::new(lun_id, n_blocks))
    }

    /// A target port at `lid` onto `lun`, which other ports may share.
    pub fn with_lun(lid: Lid, lun: Lun) -> Self {
        SrpTarget {
            lid,
            blocks: lun,
            conn: None,
            next_qpn: 0x40_0000 | (u32::from(lid) << 8),
            queue: VecDeque::with_capacity(TARGET_QUEUE),
            outbox: VecDeque::with_capacity(TARGET_QUEUE),
            scratch: std::vec![0u8; BLOCK_SIZE],
            route: Route::default(),
            admission: None,
            restarts_at_login: 0,
            restarts_admitted: 0,
            admitted_at: Instant::ZERO,
            conn_since: Instant::ZERO,
            retransmit_in: None,
            retransmit_out: None,
            link: LinkQueue::default(),
            stats: TargetStats::default(),
        }
    }

    /// Room for the commands of an initiator of `slots` (its queue depth and held I/O),
    /// four times over: its request limit keeps it to `slots` on the live connection, and
    /// the rest is for commands of connections it left that are still queued. The target
    /// ports of a fleet's ten thousand hosts would otherwise reserve 1,024 each. Counted if
    /// it ever fills (`overflowed`).
    pub fn with_queue_for(mut self, slots: u64) -> Self {
        let n = usize::try_from(slots.saturating_mul(4))
            .unwrap_or(TARGET_QUEUE)
            .clamp(32, TARGET_QUEUE);
        self.queue = VecDeque::with_capacity(n);
        self.outbox = VecDeque::with_capacity(n);
        self
    }

    /// Logins through this port count against `admission`, the target's (the fleet's
    /// targets, docs/design.md §11).
    pub fn set_admission(&mut self, admission: SharedAdmission) {
        self.admission = Some(admission);
    }

    /// The CM REQ of a login arriving at `now` over `wire`: refused when the adapter's
    /// fabric turns logins away as busy (the `TargetBusy` fault), unanswered when the
    /// route is cut, else counted against the target's capacity if it has one. Accepted,
    /// it is in progress for the route's login time, which it returns.
    pub fn admit(&mut self, wire: &mut dyn Wire, now: Instant) -> Result<Duration, LoginRejected> {
        if wire.login_refused() {
            return Err(LoginRejected::Busy("the fabric refuses logins"));
        }
        if !self.reachable(now) {
            return Err(LoginRejected::Unreachable);
        }
        self.admitted_at = now;
        let takes = self.route.login();
        let Some(a) = &self.admission else {
            return Ok(takes);
        };
        // Admitted by the logins before it, every host's (`turns`).
        crate::turns::wait_turn();
        let mut a = a.lock();
        let wait = a.try_login(now, takes)?;
        // Taken on at `login`: an initiator that gives this one up keeps the connection it had.
        self.restarts_admitted = a.restarts();
        self.admitted_at = now + wait;
        Ok(wait + takes)
    }

    /// Whether the target restarted since this port's connection was made: the connection
    /// is gone, with every command and answer on it (the initiator hears a CM DREQ, or its
    /// QP errors out). It is forgotten here; `true` once per restart.
    pub fn take_dropped(&mut self) -> bool {
        let restarts = match &self.admission {
            Some(a) if self.conn.is_some() => a.lock().restarts(),
            _ => return false,
        };
        if restarts == self.restarts_at_login {
            return false;
        }
        self.conn = None;
        self.queue.clear();
        self.stats.undeliverable += self.outbox.len() as u64;
        self.outbox.clear();
        self.retransmit_out = None;
        true
    }

    /// Answers from this port take `latency` to reach the initiator: a congested or long
    /// route, the slow path of fast path failover.
    pub fn with_latency(self, latency: Duration) -> Self {
        self.with_route(Route::constant(latency))
    }

    /// This port's route behaves as `route` says, phase by phase.
    pub fn with_route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// Room for a write of `blocks` blocks, reserved now: taking one allocates nothing.
    /// A larger one is taken too, its room made then.
    pub fn with_max_blocks(mut self, blocks: u16) -> Self {
        let len = usize::from(blocks.max(1)) * BLOCK_SIZE;
        self.scratch.reserve(len.saturating_sub(self.scratch.len()));
        self
    }

    pub fn stats(&self) -> &TargetStats {
        &self.stats
    }

    /// Whether a login through this port's route reaches the target at `now`.
    pub fn reachable(&self, now: Instant) -> bool {
        !self.route.at(now).blackhole
    }

    /// The CM exchange and SRP_LOGIN: a new target QP connected to `initiator`. The old
    /// connection, if any, is gone: whatever still arrives on it is dropped.
    /// The live connection as the fabric names it: the target's side and the initiator's
    /// queue pair. For a test to send what a broken target would.
    #[cfg(test)]
    pub(crate) fn connection(&self) -> Option<(RemoteQp, Qpn)> {
        self.conn
            .map(|(qpn, initiator)| (RemoteQp { lid: self.lid, qpn }, initiator.qpn))
    }

    pub fn login(&mut self, initiator: RemoteQp) -> RemoteQp {
        self.next_qpn = (self.next_qpn + 1) & 0x00ff_ffff;
        let qpn = Qpn(self.next_qpn);
        self.conn = Some((qpn, initiator));
        self.conn_since = self.admitted_at;
        self.restarts_at_login = self.restarts_admitted;
        // Commands of the old connection die with it; its answers have nowhere to go.
        self.queue.clear();
        self.stats.undeliverable += self.outbox.len() as u64;
        self.outbox.clear();
        self.retransmit_out = None;
        self.stats.logins += 1;
        RemoteQp { lid: self.lid, qpn }
    }

    /// When the target next has work due: a command to run, an answer to send, or a
    /// transmission the route swallowed to try again.
    pub fn next_due(&self) -> Option<Instant> {
        let out = self.retransmit_out.or(self.outbox.front().map(|o| o.due));
        self.queue
            .iter()
            .map(|p| p.due)
            .chain(out)
            .chain(self.retransmit_in)
            .min()
    }

    /// Takes the commands on the wire for this target that its route carried, in order (a
    /// reliable connection delivers in order: one still being retransmitted holds the
    /// rest), and schedules each. What arrives for a connection it no longer has is lost
    /// here, unacknowledged: its sender's transport gives it up.
    pub fn intake(&mut self, hca: &mut dyn Wire, now: Instant, rng: &mut dyn RngCore) {
        let lid = self.lid;
        let rc = hca.rc_transport();
        self.retransmit_in = None;
        while let Some(msg) = hca.wire_front(&|m| m.dlid == lid) {
            let same = |m: &WireMsg| m.dlid == lid && m.seq == msg.seq && m.src_qpn == msg.src_qpn;
            let current = self
                .conn
                .filter(|(q, i)| *q == msg.dqpn && i.qpn == msg.src_qpn && i.lid == msg.src_lid);
            if current.is_none() {
                self.stats.stale_messages += 1;
                hca.wire_drop(&same);
                continue;
            }
            let lost = |at| self.swallowed(hca, msg.src_lid, at);
            match transport::carried(msg.sent_at, rc, now, lost) {
                Ok(at) => {
                    if at > msg.sent_at {
                        self.count_retransmitted(hca, Some(msg.src_lid), msg.sent_at);
                    }
                    hca.wire_take(&same);
                }
                Err(next) => {
                    // Swallowed so far: the transport sends it again at `next` (or has given
                    // up, and the adapter fails the send).
                    self.retransmit_in = next;
                    break;
                }
            }
            let phase = *self.route.at(now);
            if let Some(tmf) = SrpTskMgmt::decode(msg.payload()) {
                self.abort(now, msg.dqpn, tmf);
                continue;
            }
            let Some(cmd) = SrpCmd::decode(msg.payload()) else {
                self.stats.malformed += 1;
                continue;
            };
            let due = now + phase.service_time(self.queue.len(), rng);
            let when = (phase.at, due, cmd.write);
            let Some(due) = phase.slow.serve(when, rc.retransmission(1), rng) else {
                // Lost, and no transport timer sends it again: never run, never answered.
                self.stats.lost += 1;
                continue;
            };
            let bytes = u64::from(cmd.len);
            let due = self
                .link
                .transfer(due, bytes, cmd.write, phase.slow.bandwidth_mb_s);
            if self.queue.len() < self.queue.capacity() {
                self.queue.push_back(Pending {
                    due,
                    tried: None,
                    via: msg.dqpn,
                    cmd,
                });
            } else {
                // The initiator's request limit keeps this from happening; counted if it does.
                self.stats.overflowed += 1;
            }
        }
        self.send_due(hca, now);
    }

    /// ABORT TASK on connection `via`: drops the command if it is still waiting, and
    /// answers either way. Its answer leaves after any answer of the command (the command
    /// ran before the abort came), so the initiator may reuse the tag once it has it.
    fn abort(&mut self, now: Instant, via: Qpn, tmf: SrpTskMgmt) {
        let waiting = self
            .queue
            .iter()
            .position(|p| p.via == via && p.cmd.tag == tmf.task_tag);
        let status = match waiting.and_then(|i| self.queue.remove(i)) {
            Some(_) => {
                self.stats.aborted += 1;
                SrpStatus::TaskAborted
            }
            None => {
                self.stats.aborts_too_late += 1;
                SrpStatus::TaskNotFound
            }
        };
        let rsp = SrpRsp {
            tag: tmf.task_tag,
            status,
            checksum: 0,
        };
        self.answer(now, via, rsp);
    }

    fn answer(&mut self, now: Instant, via: Qpn, rsp: SrpRsp) {
        if self.outbox.len() == self.outbox.capacity() {
            self.stats.undeliverable += 1;
            return;
        }
        // A later phase's shorter latency does not let an answer pass one made before it.
        let after = self.outbox.back().map_or(Instant::ZERO, |o| o.due);
        self.outbox.push_back(Outgoing {
            due: (now + self.route.at(now).latency).max(after),
            via,
            rsp,
        });
    }

    /// Executes every command that is due (moves the data, makes its answer) and sends the
    /// answers that are due.
    pub fn process(&mut self, hca: &mut dyn Wire, now: Instant) {
        while let Some(i) = self.queue.iter().position(|p| p.due <= now) {
            let Some(p) = self.queue.remove(i) else {
                break;
            };
            let Some((qpn, initiator)) = self.conn.filter(|(q, _)| *q == p.via) else {
                self.stats.stale_messages += 1;
                continue;
            };
            if !self.transfer_carried(hca, p, initiator.lid, now) {
                continue;
            }
            let me = RemoteQp { lid: self.lid, qpn };
            self.stats.commands += 1;
            let rsp = self.execute(hca, me, initiator, &p.cmd);
            self.answer(now, p.via, rsp);
        }
        self.send_due(hca, now);
    }

    /// Whether command `p`'s data transfer crosses the wire now. While the initiator's port
    /// carries nothing its RDMA is swallowed: the command waits for the transport's next
    /// retransmission (`false`, queued again), or, past the retry budget, the connection
    /// is gone with it. A route's blackhole does not hold data transfers (its own model).
    fn transfer_carried(&mut self, hca: &dyn Wire, p: Pending, lid: Lid, now: Instant) -> bool {
        let first = p.tried.unwrap_or(p.due);
        let rc = hca.rc_transport();
        let since = self.conn_since;
        match transport::carried(first, rc, now, |at| !hca.carries(lid, since, at)) {
            Ok(at) => {
                if at > first {
                    self.stats.port_dark_retransmits += 1;
                }
                true
            }
            Err(Some(next)) => {
                let again = Pending {
                    due: next,
                    tried: Some(first),
                    ..p
                };
                self.queue.push_back(again);
                false
            }
            Err(None) => {
                self.transport_failed();
                false
            }
        }
    }

    fn execute(
        &mut self,
        hca: &mut dyn Wire,
        me: RemoteQp,
        initiator: RemoteQp,
        cmd: &SrpCmd,
    ) -> SrpRsp {
        let rsp = |status, checksum| SrpRsp {
            tag: cmd.tag,
            status,
            checksum,
        };
        let mut blocks = self.blocks.lock();
        // Whole blocks, at least one, all on the LUN (a check's length is 0).
        let len = cmd.len as usize;
        let Some(start) = usize::try_from(cmd.lba)
            .ok()
            .and_then(|l| l.checked_mul(BLOCK_SIZE))
            .filter(|s| s + len.max(BLOCK_SIZE) <= blocks.len() && len.is_multiple_of(BLOCK_SIZE))
        else {
            return rsp(SrpStatus::LbaOutOfRange, 0);
        };
        if len == 0 {
            // TEST UNIT READY: the unit is ready; no data moves.
            self.stats.checks += 1;
            return rsp(SrpStatus::Good, 0);
        }
        // The command's own buffer, reached through the initiator's connection.
        let rdma = RemoteRdma::new(me, initiator.qpn, cmd.rkey, cmd.addr);
        let moved: Result<u64, RemoteError> = if cmd.write {
            self.stats.writes += 1;
            self.scratch.resize(len, 0);
            hca.remote_rdma_read(rdma, &mut self.scratch)
                .map(|()| checksum_blocks(&self.scratch))
        } else {
            self.stats.reads += 1;
            self.scratch.resize(len, 0);
            blocks.read(start, &mut self.scratch);
            hca.remote_rdma_write(rdma, &self.scratch)
                .map(|()| checksum_blocks(&self.scratch))
        };
        match moved {
            Ok(sum) if cmd.write && sum != cmd.checksum => {
                self.stats.write_mismatches += 1;
                rsp(SrpStatus::DataMismatch, sum)
            }
            Ok(sum) => {
                if cmd.write {
                    blocks.write(start, &self.scratch);
                    self.stats.data_blocks = blocks.data_blocks();
                }
                rsp(SrpStatus::Good, sum)
            }
            Err(_) => rsp(SrpStatus::TransferFailed, 0),
        }
    }
}

impl Target for SrpTarget {
    fn admit(&mut self, wire: &mut dyn Wire, now: Instant) -> Result<Duration, LoginRejected> {
        SrpTarget::admit(self, wire, now)
    }
    fn login(&mut self, initiator: RemoteQp) -> RemoteQp {
        SrpTarget::login(self, initiator)
    }
    fn take_dropped(&mut self) -> bool {
        SrpTarget::take_dropped(self)
    }
    fn next_due(&self) -> Option<Instant> {
        SrpTarget::next_due(self)
    }
    fn intake(&mut self, wire: &mut dyn Wire, now: Instant, rng: &mut dyn RngCore) {
        SrpTarget::intake(self, wire, now, rng);
    }
    fn process(&mut self, wire: &mut dyn Wire, now: Instant) {
        SrpTarget::process(self, wire, now);
    }
    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn information_units_round_trip_and_garbage_is_refused() {
        let cmd = SrpCmd {
            tag: 0x1234_0000_0007,
            write: true,
            lba: 99,
            addr: 0x10_2000,
            rkey: 0x1f03,
            len: BLOCK_SIZE as u32,
            checksum: 0xfeed,
        };
        let mut iu = [0u8; IU_SIZE];
        let n = cmd.encode(&mut iu);
        assert_eq!(SrpCmd::decode(&iu[..n]), Some(cmd));
        assert_eq!(SrpCmd::decode(&iu[..n - 1]), None, "truncated");
        assert_eq!(SrpRsp::decode(&iu[..n]), None, "not a response");
        let rsp = SrpRsp {
            tag: 5,
            status: SrpStatus::DataMismatch,
            checksum: 9,
        };
        let n = rsp.encode(&mut iu);
        assert_eq!(SrpRsp::decode(&iu[..n]), Some(rsp));
        iu[1] = 200;
        assert_eq!(SrpRsp::decode(&iu[..n]), None, "unknown status");
        let tmf = SrpTskMgmt {
            task_tag: 0x7_0000_0003,
        };
        let n = tmf.encode(&mut iu);
        assert_eq!(SrpTskMgmt::decode(&iu[..n]), Some(tmf));
        assert_eq!(SrpCmd::decode(&iu[..n]), None, "not a command");
        iu[1] = 2;
        assert_eq!(SrpTskMgmt::decode(&iu[..n]), None, "only ABORT TASK");
        assert!(SrpStatus::TaskNotFound.answers_abort() && !SrpStatus::Good.answers_abort());
    }
}
