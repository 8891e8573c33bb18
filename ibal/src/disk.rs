//! The SRP initiator as a disk: a data LUN (`srp`) or the boot disk on the paging path
//! (`bootdisk`), each with its workload and the remote target it talks to.
//!
//! Through a reset the disk never fails I/O it was given: on RESET it blocks, takes every
//! in-flight command back for re-issue, holds new I/O in its reserved slots, releases its
//! resources and executes. On RESET_END it logs in again and re-issues in submission
//! order. Only past `io_hold_timeout` (the paging path: `paging_io_hold_timeout`, by default
//! never) does held I/O fail upward, once, as retryable; only a
//! failed or removed device fails it for good. Nothing here allocates after start.

use std::collections::VecDeque;

use hcabus::verbs::*;
use hcabus::{Duration, Instant};

use crate::access::{Dest, FabricBus, Send};
use crate::handle::*;
use crate::ibal_client::SharedIbal;
use crate::io::*;
use crate::srp::*;
use crate::workload::WriteData;

mod bound;
mod check;
mod client;
mod config;
mod connection;
mod load;
pub mod rtt;
pub mod slots;

pub use bound::{CommandBound, DEFAULT_COMMAND_TIMEOUT, MAX_BOUND_STRIKES};
pub use check::CHECK_IDLE;
pub use client::{PathRecordStats, SrpClient, MAX_CM_RETRIES, PATH_RECORD_TIMEOUT, REQ_TIMEOUT};
pub use config::{DiskConfig, PathGroups, MAX_PATHS};
pub use load::PathLoad;
pub use rtt::{PathTimeout, PathTiming, PollRule, RttEstimator};
use slots::Answer;
pub use slots::SlotTable;
pub use slots::{GiveUpRule, SlotMutant};

/// Marks the work request id of an ABORT TASK's send (a command's is its slot).
const ABORT_WR: u64 = 1 << 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Down,
    LoggingIn {
        ready_at: Instant,
    },
    Up,
    /// Logged in, its port dark: the connection is kept until `until`, while the
    /// transport's retransmissions can still carry what is out, and nothing new is sent.
    PortDark {
        until: Instant,
    },
}

#[derive(Debug, Clone, Copy)]
struct Resources {
    pd: Option<PdHandle>,
    cq: Option<CqHandle>,
    qp: Option<QpHandle>,
    mr: Option<(MrHandle, MrKeys)>,
}

const NO_RESOURCES: Resources = Resources {
    pd: None,
    cq: None,
    qp: None,
    mr: None,
};

/// What the disk did, beyond the workload's accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskStats {
    pub commands_sent: u64,
    /// In-flight commands taken back for re-issue, over all resets.
    pub taken_back: u64,
    /// The most in flight at one RESET.
    pub max_in_flight_at_reset: u64,
    /// The most I/Os held (queued, link down) at once.
    pub max_held: u64,
    /// Logins that succeeded.
    pub logins: u32,
    /// Logins refused (target busy, or the device not ready), each retried after a backoff.
    pub login_retries: u32,
    /// CM REQs sent again after their timeout passed with no answer (a target restarting,
    /// a route cut, a target serving logins one at a time and far behind): each waited the
    /// REQ's timeout first (or the hold's end, sooner).
    pub req_retries: u64,
    /// Logins the target would have answered only after the CM's last REQ timed out: given
    /// up then, and retried as a refused login is.
    pub logins_answered_late: u32,
    /// Of those, refused by the target as busy.
    pub logins_refused_busy: u32,
    /// Times its port went down under a logged-in disk and stayed down past what the
    /// transport rides (a transport loss, no reset): the disk took its commands back.
    pub port_losses: u32,
    /// Times its port went down under a logged-in disk and came back while the transport
    /// could still carry what was out: the connection kept, no login.
    pub port_flaps_ridden: u32,
    /// Times its port came back Active with another LID under a connection (a new master
    /// renumbered it): the connection's addresses were gone, and it logged in again.
    pub lid_changes: u32,
    /// Every answer the target sent: completions, late ones, aborts' answers, unknown tags.
    pub answers: u64,
    /// Answers whose tag no send of this disk carried.
    pub stale_responses: u64,
    pub hold_timeouts: u32,
    /// Commands out past `path_io_timeout` given up here for another path to re-issue
    /// (fast path failover), each with an ABORT TASK to the target.
    pub given_up: u64,
    /// Answers to commands no longer waited for here (given up, or taken back at a reset):
    /// discarded, never completed twice.
    pub late_discarded: u64,
    /// The target's answers to those ABORT TASKs: each frees its command's slot.
    pub aborts_answered: u64,
    /// ABORT TASKs unanswered for `abort_timeout`: the path dropped its connection (as SCSI
    /// error handling escalates) so that nothing given up can still run at the target.
    pub abort_timeouts: u32,
    /// ABORT TASKs the adapter refused to send.
    pub aborts_unsent: u64,
    /// Commands out past the command bound (docs/design.md §7 "Every command ends"), each
    /// given up with an ABORT TASK and sent again, here or on another path.
    pub command_timeouts: u64,
    /// I/Os a data disk failed upward (retryable) after re-driving each past the command
    /// bound [`bound::MAX_BOUND_STRIKES`] times.
    pub bound_failures: u64,
    /// Connections the transport gave up: a send no responder acknowledged in the retry
    /// budget (retry exceeded) put the queue pair in error; the disk took its commands back
    /// and logged in again.
    pub transport_errors: u32,
    /// Idle checks sent (a path with nothing out for a second), and answered.
    pub checks_sent: u64,
    /// Of them, sent at once for another path's late command (docs/design.md §7).
    pub checks_on_demand: u64,
    pub checks_answered: u64,
}

/// The initiator side of one LUN.
#[derive(Debug, Clone)]
pub struct SrpDisk {
    config: DiskConfig,
    consumer: Option<crate::handle::ConsumerId>,
    res: Resources,
    link: Link,
    /// A reset is under way (from RESET until the login after it).
    blocked: bool,
    /// The device failed or left: every I/O fails with this.
    failed: Option<IoStatus>,
    hold_deadline: Option<Instant>,
    fast_fail: bool,
    slots: SlotTable,
    /// The tags of the commands one failover gives up, to abort each (a place per slot).
    aborts: Vec<u64>,
    upward: VecDeque<IoCompletion>,
    /// What the target's answers say of this path (its timeout, fast path failover's times).
    timing: PathTiming,
    /// The adapter's transport timer for the connection (set at each login).
    transport: RcTransport,
    /// A send completed in error: the queue pair is in error and the connection is gone.
    qp_error: Option<WcStatus>,
    /// The latest instant the disk saw: what the report judges its commands' age by.
    seen: Instant,
    /// When it last sent a command or logged in: an idle check is due a second after.
    last_sent: Option<Instant>,
    data_base: u64,
    send_iu_base: u64,
    recv_iu_base: u64,
    dma_len: u64,
    /// How a write's data reaches its DMA block (the layer above's buffer).
    write_data: WriteData,
    stats: DiskStats,
}

impl SrpDisk {
    fn new(config: DiskConfig, write_data: WriteData) -> Self {
        let n = usize::from(config.queue_depth) + usize::from(config.hold_capacity);
        SrpDisk {
            config,
            consumer: None,
            res: NO_RESOURCES,
            link: Link::Down,
            blocked: false,
            failed: None,
            hold_deadline: None,
            fast_fail: false,
            slots: SlotTable::new(n),
            aborts: Vec::with_capacity(n),
            upward: VecDeque::with_capacity(2 * n),
            timing: PathTiming::default(),
            transport: RcTransport::DEFAULT,
            qp_error: None,
            seen: Instant::ZERO,
            last_sent: None,
            data_base: 0,
            send_iu_base: 0,
            recv_iu_base: 0,
            dma_len: 0,
            write_data,
            stats: DiskStats::default(),
        }
    }

    /// Reserves the disk's DMA memory: a data block, a command IU and an ABORT TASK IU per
    /// slot, a response IU per request-limit credit.
    fn reserve<B: FabricBus + ?Sized>(&mut self, bus: &mut B) -> bool {
        let n = self.slots.len() as u64;
        let len = self.config.dma_bytes();
        let Some(base) = bus.device().dma_alloc(len) else {
            return false;
        };
        self.data_base = base;
        self.send_iu_base = base + n * self.config.data_bytes();
        self.recv_iu_base = self.send_iu_base + 2 * n * IU_SIZE as u64;
        self.dma_len = len;
        true
    }

    fn data_addr(&self, slot: usize) -> u64 {
        self.data_base + slot as u64 * self.config.data_bytes()
    }

    /// Slot `slot`'s command IU.
    fn send_iu_addr(&self, slot: usize) -> u64 {
        self.send_iu_base + (slot * IU_SIZE) as u64
    }

    /// Slot `slot`'s ABORT TASK IU: apart from the command's, whose send the adapter may
    /// not have completed (read) yet when the command is given up.
    fn abort_iu_addr(&self, slot: usize) -> u64 {
        self.send_iu_addr(self.slots.len() + slot)
    }

    /// Receive buffer `index`: one per credit of the request limit.
    fn recv_iu_addr(&self, index: u64) -> u64 {
        self.recv_iu_base + index * IU_SIZE as u64
    }

    /// Its setup.
    pub fn config(&self) -> &DiskConfig {
        &self.config
    }

    /// Its command slots: the request limit and the hold.
    pub fn slots(&self) -> &SlotTable {
        &self.slots
    }

    /// The DMA memory it reserved at start: where it begins and how long it is (0, 0 before).
    pub fn dma_reserved(&self) -> (u64, u64) {
        (self.data_base, self.dma_len)
    }

    /// Every buffer the adapter may hold at once, as (address, length): each slot's data
    /// block, command IU and ABORT TASK IU, and each credit's response IU.
    pub fn dma_buffers(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let per_slot = (0..self.slots.len()).flat_map(move |slot| {
            [
                (self.data_addr(slot), self.config.data_bytes()),
                (self.send_iu_addr(slot), IU_SIZE as u64),
                (self.abort_iu_addr(slot), IU_SIZE as u64),
            ]
        });
        let per_credit = (0..u64::from(self.config.queue_depth))
            .map(move |i| (self.recv_iu_addr(i), IU_SIZE as u64));
        per_slot.chain(per_credit)
    }

    /// Whether the disk still owes a completion for `id`. What it completed is handed up
    /// before each of its client's calls returns (the upward queue is empty between them),
    /// so its slots say it all.
    pub fn tracks(&self, id: u64) -> bool {
        self.slots.tracks(id)
    }

    pub fn stats(&self) -> &DiskStats {
        &self.stats
    }

    pub fn in_flight(&self) -> u16 {
        self.slots.in_flight()
    }

    /// How many answers the target sent this disk (any kind): a path that gave commands up
    /// serves again once this grows.
    pub fn answers(&self) -> u64 {
        self.stats.answers
    }

    /// Logged in or logging in: holds a connection a port loss would break.
    pub fn is_connected(&self) -> bool {
        !matches!(self.link, Link::Down)
    }

    /// Room for one more I/O that would go out at once: logged in, not blocked, and a
    /// credit of the request limit. A path takes I/O from its disk's queue only then, so
    /// nothing waits on a path that cannot send it (another path may). A path's slots are
    /// its request limit, and every slot taken owes an answer or waits to be sent, so a
    /// credit is also a free slot.
    pub fn can_send_more(&self) -> bool {
        let owed = self.slots.answers_owed() + self.slots.queued() as u32;
        self.is_up() && owed < u32::from(self.config.queue_depth)
    }

    /// What a multipath disk's path selector prices this path by (`PathLoad::priced` says
    /// how lateness counts): whether it could send another command, the commands it holds
    /// to send or has out and how many of them are late, when its oldest one will be,
    /// whether it answered a command sent after that one, and its recent round trip.
    pub fn load(&self) -> PathLoad {
        // Midway from the round trip to the timeout: a check sent then has the other half
        // of the margin to be answered.
        let srtt = self.timing.estimator().srtt().unwrap_or(Duration::ZERO);
        let late_after = self
            .path_timeout()
            .map(|t| Duration::from_us((srtt.as_us() + t.as_us().max(srtt.as_us())) / 2));
        let late = late_after.map_or(0, |age| self.slots.out_since(self.seen, age));
        let oldest = self.slots.oldest_sent();
        let answered = self.timing.freshest_any();
        // Its youngest command out, while nothing sent as late or later was answered: the
        // one a younger command's answer would show moving.
        let unanswered = self.slots.youngest_sent().filter(|&t| answered < Some(t));
        PathLoad {
            room: self.can_send_more(),
            owed: u64::from(self.slots.in_flight()) + self.slots.queued() as u64,
            late,
            late_at: oldest.zip(late_after).map(|(at, age)| at + age),
            // It answered a command sent after its oldest one out.
            moving: answered > oldest,
            check_at: unanswered.zip(late_after).map(|(at, age)| at + age),
            rtt_us: self.timing.recent_rtt().map(|d| d.as_us()),
        }
    }

    /// What the target's answers say of this path.
    pub fn timing(&self) -> &PathTiming {
        &self.timing
    }

    /// How long a command on this path may be out now (`None`: never given up).
    pub fn path_timeout(&self) -> Option<Duration> {
        self.timing.timeout(self.config.path_timeout)
    }

    /// The newest I/O waiting to be sent, taken out of the disk (for another path).
    fn pop_queued_back(&mut self) -> Option<IoRequest> {
        // A check is this path's own business: dropped, not handed to another path.
        while let Some(req) = self.slots.pop_queued_back() {
            if !req.is_check() {
                return Some(req);
            }
        }
        None
    }

    pub fn is_up(&self) -> bool {
        self.link == Link::Up && !self.blocked
    }

    /// Hands an I/O to the disk (`probe`: one a path given up sends to learn whether it
    /// serves again). `Err` means busy: not accepted, nothing owed.
    fn submit<B: FabricBus + ?Sized>(
        &mut self,
        bus: &mut B,
        req: IoRequest,
        probe: bool,
    ) -> Result<(), IoRequest> {
        if self.upward.len() >= self.upward.capacity() {
            return Err(req);
        }
        if let Some(status) = self.failed {
            self.complete_upward(req.id, status, 0);
            return Ok(());
        }
        if self.fast_fail {
            self.complete_upward(req.id, IoStatus::Retryable, 0);
            return Ok(());
        }
        if req.blocks > self.config.max_blocks.max(1) || (req.blocks == 0 && !req.is_check()) {
            // Its buffers were sized at start for the largest command configured.
            self.complete_upward(req.id, IoStatus::TooLarge, 0);
            return Ok(());
        }
        let Some(i) = self.slots.admit(req) else {
            return Err(req);
        };
        if probe {
            self.slots.mark_probe(i);
        }
        if req.write {
            // The caller's data, in the slot's DMA buffer.
            let addr = self.data_addr(i);
            let write_data = self.write_data;
            bus.device().with_dma(addr, req.bytes(), |buf| {
                write_data(&req, buf);
            });
        }
        if self.blocked {
            self.stats.max_held = self.stats.max_held.max(self.slots.queued() as u64);
        }
        Ok(())
    }

    fn complete_upward(&mut self, id: u64, status: IoStatus, checksum: u64) {
        if id == IoRequest::CHECK_ID {
            // Nobody's I/O: a check failed with its path, which says so otherwise.
            return;
        }
        // Reserved for every slot twice over, and handed up before each of the client's
        // calls returns: within one call a slot answers once and `submit` refuses at the
        // reserve, so this never grows it.
        self.upward.push_back(IoCompletion {
            id,
            status,
            checksum,
        });
    }

    /// Sends queued commands while the link is up and credits remain: the request limit
    /// counts every answer the target may still send (two for a command given up).
    fn pump<B: FabricBus + ?Sized>(&mut self, ibal: &SharedIbal, bus: &mut B) {
        let (Some(_), Some(_), Some((_, keys))) = (self.consumer, self.res.qp, self.res.mr) else {
            return;
        };
        // At most a request limit's worth per call: each send takes a credit.
        for _ in 0..self.config.queue_depth {
            if !self.is_up() || self.slots.answers_owed() >= u32::from(self.config.queue_depth) {
                break;
            }
            let Some((slot, tag, req)) = self.slots.next_send() else {
                break;
            };
            let cmd = SrpCmd {
                tag,
                write: req.write,
                lba: req.lba,
                addr: self.data_addr(slot),
                rkey: keys.rkey,
                // A check moves no data.
                len: req.bytes() as u32,
                checksum: req.checksum,
            };
            let mut iu = [0u8; IU_SIZE];
            let n = cmd.encode(&mut iu);
            let at = (self.send_iu_addr(slot), slot as u64);
            if !self.post_iu(ibal, bus, at, &iu[..n]) {
                // A reset is coming (or here): the command stays queued for it.
                break;
            }
            self.slots.sent(bus.now());
            self.last_sent = Some(bus.now());
            // A command is sent once per slot it takes: the slot is in flight now, out of
            // the queue (a table that lost track would flood the target with copies).
            debug_assert!(self.slots.next_send().is_none_or(|(next, ..)| next != slot));
            self.stats.commands_sent += 1;
        }
    }

    /// Sends `iu` from the send buffer at `iu_addr` under work request id `wr_id`; `false`
    /// when the QP refuses it.
    fn post_iu<B: FabricBus + ?Sized>(
        &mut self,
        ibal: &SharedIbal,
        bus: &mut B,
        (iu_addr, wr_id): (u64, u64),
        iu: &[u8],
    ) -> bool {
        let (Some(c), Some(qp), Some((_, keys))) = (self.consumer, self.res.qp, self.res.mr) else {
            return false;
        };
        bus.device().with_dma(iu_addr, iu.len() as u64, |buf| {
            buf.copy_from_slice(iu);
        });
        let wr = Send {
            wr_id,
            sge: Sge {
                addr: iu_addr,
                len: iu.len() as u32,
                lkey: keys.lkey,
            },
            dest: Dest::Connected,
        };
        ibal.lock().post_send(bus, c, qp, &wr).is_ok()
    }

    /// Reaps completions: responses complete I/O upward and give their IU back.
    fn poll<B: FabricBus + ?Sized>(&mut self, ibal: &SharedIbal, bus: &mut B) {
        let (Some(c), Some(cq)) = (self.consumer, self.res.cq) else {
            return;
        };
        loop {
            let Ok(Some(cqe)) = ibal.lock().poll_cq(bus, c, cq) else {
                break;
            };
            if cqe.opcode == WcOpcode::Send && cqe.status == WcStatus::Success {
                // The target took the command (an abort's send is marked, and says nothing
                // of its command's).
                if cqe.wr_id & ABORT_WR == 0 {
                    self.slots.send_completed(cqe.wr_id as usize);
                }
                continue;
            }
            if cqe.opcode == WcOpcode::Send && cqe.status != WcStatus::Flushed {
                // Retry exceeded (the route swallowed every transmission) or a local error:
                // the queue pair is in error and flushes the rest; the client takes the
                // commands back and logs in again.
                self.qp_error.get_or_insert(cqe.status);
                continue;
            }
            if cqe.opcode != WcOpcode::Recv || cqe.status != WcStatus::Success {
                // Flushed completions are what the take-back at RESET already accounted for.
                continue;
            }
            let iu_addr = self.recv_iu_addr(cqe.wr_id);
            let mut iu = [0u8; IU_SIZE];
            bus.device().with_dma(iu_addr, IU_SIZE as u64, |buf| {
                iu.copy_from_slice(buf);
            });
            self.post_recv(ibal, bus, cqe.wr_id);
            match SrpRsp::decode(&iu[..cqe.byte_len as usize]) {
                Some(rsp) => self.response(bus, rsp),
                None => self.stats.stale_responses += 1,
            }
        }
    }

    fn response<B: FabricBus + ?Sized>(&mut self, bus: &mut B, rsp: SrpRsp) {
        self.stats.answers += 1;
        let (slot, req) = match self.slots.answer(rsp.tag, rsp.status.answers_abort()) {
            Answer::Complete { slot, req, sent_at } => {
                let now = bus.now();
                self.timing.answered(self.config.path_timeout, sent_at, now);
                (slot, req)
            }
            Answer::Late { sent_at } => {
                self.stats.late_discarded += 1;
                if let Some(sent_at) = sent_at {
                    self.timing.answered_late(sent_at, bus.now());
                }
                return;
            }
            Answer::AbortAnswered { .. } => {
                self.stats.aborts_answered += 1;
                return;
            }
            Answer::Unknown => {
                self.stats.stale_responses += 1;
                return;
            }
        };
        if req.is_check() {
            self.stats.checks_answered += 1;
            return;
        }
        let (status, sum) = match rsp.status {
            SrpStatus::Good if !req.write => {
                // The disk checks the data it hands up, not the target's word for it.
                let addr = self.data_addr(slot);
                let sum = bus
                    .device()
                    .with_dma(addr, req.bytes(), |b| checksum_blocks(b))
                    .unwrap_or(0);
                (IoStatus::Ok, sum)
            }
            SrpStatus::Good => (IoStatus::Ok, 0),
            other => (IoStatus::Target(other), 0),
        };
        self.complete_upward(req.id, status, sum);
    }

    /// Gives up every command `rule` says is overdue (fast path failover, or the command
    /// bound), telling the target to abort each and handing its I/O to `give`, newest
    /// first: `give` says whether it took it (another path re-issues it) or leaves it here
    /// (sent again once its abort is answered or the connection is gone). Returns how many.
    fn give_up_overdue<B: FabricBus + ?Sized>(
        &mut self,
        ibal: &SharedIbal,
        bus: &mut B,
        rule: &GiveUpRule,
        mut give: impl FnMut(IoRequest) -> bool,
    ) -> u32 {
        let now = bus.now();
        let past_bound = self.slots.out_since(now, rule.bound);
        // Reserved with a place per slot: one tag per command given up.
        let mut aborts = core::mem::take(&mut self.aborts);
        aborts.clear();
        let given = self.slots.give_up_overdue(now, rule, |tag, req| {
            aborts.push(tag);
            give(req)
        });
        // Nothing is past the bound that was not given up with the rest.
        self.stats.command_timeouts += past_bound;
        for &task_tag in &aborts {
            let mut iu = [0u8; IU_SIZE];
            let len = SrpTskMgmt { task_tag }.encode(&mut iu);
            // Refused (the adapter's send queue is full of sends it never completed: its
            // data path stopped) or swallowed by a dead adapter: the reset that follows
            // frees the slot instead.
            let slot = (task_tag >> 32) as usize;
            let at = (self.abort_iu_addr(slot), slot as u64 | ABORT_WR);
            if !self.post_iu(ibal, bus, at, &iu[..len]) {
                self.stats.aborts_unsent += 1;
            }
        }
        self.aborts = aborts;
        self.stats.given_up += u64::from(given);
        given
    }

    /// RESET: block, take in-flight commands back (oldest first), release.
    fn on_reset<B: FabricBus + ?Sized>(&mut self, ibal: &SharedIbal, bus: &mut B) {
        let now = bus.now();
        // Responses already in the CQ are real: complete them instead of re-issuing.
        self.poll(ibal, bus);
        self.blocked = true;
        if self.hold_deadline.is_none() {
            self.hold_deadline = self.config.hold_timeout(&bus.policy()).map(|t| now + t);
        }
        self.take_back();
        self.teardown(ibal, bus);
    }

    fn take_back(&mut self) {
        let n = self.slots.take_back();
        self.stats.max_in_flight_at_reset = self.stats.max_in_flight_at_reset.max(u64::from(n));
        self.stats.taken_back += u64::from(n);
        self.stats.max_held = self.stats.max_held.max(self.slots.queued() as u64);
    }

    /// Past its hold timeout: fail what is held, once, as retryable; fail new I/O at
    /// once until the disk is back.
    fn hold_expired(&mut self) {
        self.fast_fail = true;
        self.stats.hold_timeouts += 1;
        self.fail_queued(IoStatus::Retryable);
    }

    fn fail_queued(&mut self, status: IoStatus) {
        while let Some(req) = self.slots.pop_queued_front() {
            self.complete_upward(req.id, status, 0);
        }
    }

    /// RESET_FAILED or DEVICE_FATAL: fail everything held, once, and whatever comes.
    fn on_failed<B: FabricBus + ?Sized>(
        &mut self,
        ibal: &SharedIbal,
        bus: &mut B,
        status: IoStatus,
    ) {
        self.blocked = true;
        self.take_back();
        self.teardown(ibal, bus);
        self.failed = Some(status);
        self.fail_queued(status);
    }

    /// The login is done: unblock and re-issue in order.
    fn up(&mut self) {
        self.last_sent = Some(self.seen);
        self.link = Link::Up;
        self.blocked = false;
        self.fast_fail = false;
        self.hold_deadline = None;
    }
}
