//! The bus client of one disk: the initiator ([`SrpDisk`]), the workload above it and the
//! remote target it logs in to, driven by the bus's events and its own deferred work.

use hcabus::bus::{Client, ClientReport};
use hcabus::types::*;
use hcabus::{Duration, Instant};

use crate::ibal_client::{EventLog, SharedIbal};
use crate::io::*;
use crate::multipath::SharedMultipath;
use crate::retry::{ClientProblem, Connector, Probe};
use crate::target::Target;
use crate::workload::Workload;

use super::{DiskConfig, Link, SrpDisk};

use crate::access::FabricBus;

mod cm;
mod failover;
mod guard;
mod path_record;
mod ride;

pub use cm::{MAX_CM_RETRIES, REQ_TIMEOUT};
use path_record::PathRecords;
pub use path_record::{PathRecordStats, PATH_RECORD_TIMEOUT};

/// The bus client of one disk, with the layer above it and its remote target.
#[derive(Debug)]
pub struct SrpClient {
    desc: ClientDesc,
    ibal: SharedIbal,
    disk: SrpDisk,
    /// Where its I/O comes from: a workload of its own, or the queue of the multipath disk
    /// it is a path of.
    above: Above,
    target: Box<dyn Target>,
    id: Option<ClientId>,
    events: EventLog,
    /// Deferred work: connect (after start, RESET_END or RESET_ABORTED, or a retry).
    connect_at: Option<Instant>,
    /// On a fabric with an SA: the PathRecord each login asks for first.
    paths: Option<PathRecords>,
    /// The login's CM REQ, out with no answer yet (`cm.rs`).
    req: Option<cm::ReqOut>,
    /// Deferred execute of a data LUN's quiesce.
    execute_at: Option<(Instant, Epoch)>,
    /// Refused logins back off up to `io_hold_timeout`.
    login: Connector,
    /// Its port is usable: Active, or never reported (a bus that does not model ports).
    /// After RESET it counts as down until PORT_ACTIVE (docs/design.md §4).
    port_up: bool,
    /// Its port's LID when it logged in: a PORT_ACTIVE with another one means the
    /// connection's addresses are gone (a new master renumbered the port).
    port_lid: Option<u16>,
    /// From RESET to its end (RESET_END, RESET_ABORTED, RESET_FAILED): what the last-path
    /// guard of another path of the disk says of this one.
    resetting: bool,
    /// The disk's answers within and past its timeout, as last told to the multipath queue
    /// (which judges a probing path by them).
    told_answers: (u64, u64),
    /// This path asked for its adapter's reset (a stalled data path) and the reset has not
    /// come yet: it asks once.
    escalated: bool,
    /// The planned reset whose query this path consented to, while that query is open: the
    /// answer must hold until it closes, so the path looks again as the others change.
    consented: Option<Epoch>,
    pub refusals: u32,
}

/// Which disk a path belongs to, and which of its paths it is.
#[derive(Debug, Clone)]
struct PathOf {
    mp: SharedMultipath,
    index: usize,
}

/// What issues a disk's I/O and takes its answers.
#[derive(Debug)]
enum Above {
    /// The layer above a disk of its own.
    Own(Box<dyn Workload>),
    /// One path of a multipath disk: I/O comes from, and goes back to, the disk's queue.
    Path(PathOf),
}

impl Above {
    fn path(&self) -> Option<&PathOf> {
        match self {
            Above::Path(p) => Some(p),
            Above::Own(_) => None,
        }
    }
}

impl SrpClient {
    /// The disk `name` configured by `config`, on the adapter whose access layer is `ibal`,
    /// logging in to `target`, its I/O issued by `workload`.
    pub fn new(
        name: &str,
        config: DiskConfig,
        ibal: SharedIbal,
        target: Box<dyn Target>,
        workload: Box<dyn Workload>,
    ) -> Option<Self> {
        let write_data = workload.write_data();
        Self::build(name, config, ibal, target, write_data, Above::Own(workload))
    }

    fn build(
        name: &str,
        config: DiskConfig,
        ibal: SharedIbal,
        target: Box<dyn Target>,
        write_data: crate::workload::WriteData,
        above: Above,
    ) -> Option<Self> {
        let (kind, mut flags) = if config.boot {
            (
                ClientKind::BootDisk,
                ClientFlags::BOOT_CRITICAL | ClientFlags::PAGING_PATH,
            )
        } else {
            (ClientKind::Srp, ClientFlags::empty())
        };
        if config.guard_last_path {
            flags |= ClientFlags::CAN_VETO;
        }
        Some(SrpClient {
            desc: ClientDesc::new(name, kind, flags)?,
            ibal,
            disk: SrpDisk::new(config, write_data),
            above,
            target,
            id: None,
            events: EventLog::new(),
            connect_at: None,
            paths: None,
            req: None,
            execute_at: None,
            login: Connector::with_policy("SRP login", config.login_retry),
            port_up: true,
            port_lid: None,
            resetting: false,
            told_answers: (0, 0),
            escalated: false,
            consented: None,
            refusals: 0,
        })
    }

    /// Path `index` of the multipath disk `mp`, on the adapter whose access layer is
    /// `ibal`: its own initiator, QP and target port (`target`, onto the disk's LUN);
    /// `config` gives its port and queue depth, the I/O is the disk's.
    pub fn new_path(
        name: &str,
        config: DiskConfig,
        ibal: SharedIbal,
        mp: SharedMultipath,
        index: usize,
        target: Box<dyn Target>,
    ) -> Option<Self> {
        let config = DiskConfig {
            // Waiting I/O waits in the disk's queue, not on a path.
            hold_capacity: 0,
            ..config
        };
        let write_data = mp.lock().write_data();
        let path = Above::Path(PathOf { mp, index });
        Self::build(name, config, ibal, target, write_data, path)
    }

    /// The multipath disk this client is a path of, and which path.
    pub fn multipath(&self) -> Option<(&SharedMultipath, usize)> {
        self.above.path().map(|p| (&p.mp, p.index))
    }

    pub fn disk(&self) -> &SrpDisk {
        &self.disk
    }

    /// The target port it logs in to.
    pub fn target(&self) -> &dyn Target {
        &*self.target
    }

    /// The layer above a disk of its own (`None` for a path of a multipath disk).
    pub fn workload(&self) -> Option<&dyn Workload> {
        match &self.above {
            Above::Own(w) => Some(&**w),
            Above::Path(_) => None,
        }
    }

    /// Why the disk is not serving I/O, if it is not.
    pub fn problem(&self) -> Option<ClientProblem> {
        self.login.problem()
    }

    /// Whether the disk is a live path: registered, logged in at least once, not given up.
    /// I/O it still holds then is in flight (it will complete), not lost (docs/design.md §9).
    pub fn is_live_path(&self) -> bool {
        self.id.is_some() && self.disk.stats.logins > 0 && !self.login.given_up()
    }

    /// Its counters now: its logins, and the I/O of its workload; a path of a multipath
    /// disk gives the I/O it took last (so each adapter counts its own share, each I/O on
    /// one adapter, and each adapter's accounting closes) and its own failovers, and its
    /// first path also what waits in the disk's queue or failed there without reaching a
    /// path.
    pub fn counters(&self) -> hcabus::bus::ClientCounters {
        let io = |s: &IoStats| hcabus::bus::ClientCounters {
            submitted: s.submitted,
            completed: s.completed,
            failed: s.failed,
            held: s.submitted.saturating_sub(s.completed + s.failed),
            ..Default::default()
        };
        let mut c = match &self.above {
            Above::Own(w) => io(w.stats()),
            Above::Path(p) => {
                let mp = p.mp.lock();
                let path = mp.path_stats(p.index).unwrap_or_default();
                // What the disk's queue holds and what failed there without reaching a
                // path count on its first path: every I/O on exactly one adapter.
                let (queued, unpathed) = if p.index == 0 {
                    (mp.queued() as u64, mp.stats().failed_unpathed)
                } else {
                    (0, 0)
                };
                // A command moved off this path counts on the path that took it last.
                let mine = path.taken.saturating_sub(path.moved);
                let mut c = hcabus::bus::ClientCounters {
                    submitted: mine + queued + unpathed,
                    completed: path.ios,
                    failed: path.failed + unpathed,
                    // Taken last by this path and not answered upward yet, and what waits
                    // in the disk's queue.
                    held: mine.saturating_sub(path.ios + path.failed) + queued,
                    ..Default::default()
                };
                c.failovers = u64::from(path.failovers);
                c.commands_moved = path.moved;
                c
            }
        };
        c.logins = u64::from(self.disk.stats.logins);
        c.logins_refused = u64::from(self.disk.stats.login_retries);
        c
    }

    /// The I/O accounting: every I/O the workload is owed counts `in_flight` when this disk
    /// tracks it on a live path, `lost` otherwise.
    pub fn io_stats(&self) -> IoStats {
        let Above::Own(w) = &self.above else {
            // The disk's queue accounts for it (see `Multipath::io_stats`).
            return IoStats::default();
        };
        let live = self.is_live_path();
        let mut stats = w.accounted(&|id| live && self.disk.tracks(id));
        if self.desc.flags.contains(ClientFlags::PAGING_PATH) {
            stats.paging_failed = stats.failed;
        }
        stats.overdue = self.disk.overdue();
        stats
    }

    /// The login was refused: back off and try again, or give up at the hold timeout,
    /// failing what is held as retryable so nothing waits on a dead path, and probe on at
    /// the backoff's cap until [`crate::retry::DEV_LOSS`] (then until the next RESET_END).
    /// How long after its first refusal a login gives up. The paging path keeps trying as
    /// long as it holds: until Failed or Removed. A path of a multipath disk holds nothing
    /// (its disk's queue does) and keeps trying too, at the backoff's bound: a route that
    /// swallowed its logins for longer than the hold timeout is used again once it heals.
    fn login_limit<B: FabricBus + ?Sized>(&self, bus: &B) -> Duration {
        match self.above {
            Above::Path(_) => Duration::MAX,
            Above::Own(_) => self
                .disk
                .config
                .hold_timeout(&bus.policy())
                .unwrap_or(Duration::MAX),
        }
    }

    fn login_refused<B: FabricBus + ?Sized>(&mut self, bus: &mut B, e: crate::errors::CreateError) {
        self.disk.stats.login_retries += 1;
        if e == crate::errors::CreateError::DeviceFailed {
            // RESET_FAILED or DEVICE_FATAL fails the disk (and cancels its login): nothing
            // to retry.
            return;
        }
        let now = bus.now();
        let limit = self.login_limit(bus);
        if e == crate::errors::CreateError::TargetBusy {
            self.disk.stats.logins_refused_busy += 1;
        }
        let name = self.desc.name;
        // A data LUN gives up at its hold, failing what it holds, and probes on; a path or
        // the paging path never gives up (`limit` is unbounded for them).
        let probe_for = crate::retry::DEV_LOSS.max(limit);
        let policy = (limit, probe_for);
        match self
            .login
            .refused_then_probe(name.as_str(), now, policy, e, bus.rng())
        {
            Probe::RetryAt(t) => self.connect_at = Some(t),
            Probe::GaveUp { probe_at, first } => {
                // A path holds nothing (the disk's queue times out on its own) and never
                // gets here.
                self.connect_at = probe_at;
                if first && self.above.path().is_none() && !self.disk.fast_fail {
                    self.disk.hold_expired();
                }
            }
        }
    }

    /// Whether its port is usable now: Active, or not known to the bus.
    fn port_usable<B: FabricBus + ?Sized>(&self, bus: &B) -> bool {
        bus.port(self.disk.config.port)
            .is_none_or(|p| p.state == PortState::Active)
    }

    fn execute<B: FabricBus + ?Sized>(&mut self, bus: &mut B, epoch: Epoch) {
        if let Some(id) = self.id {
            if bus.reset_execute(id, epoch).is_err() {
                self.refusals += 1;
            }
        }
    }

    fn deliver_upward(&mut self, now: Instant) {
        match &mut self.above {
            Above::Path(p) => {
                let mut mp = p.mp.lock();
                while let Some(c) = self.disk.upward.pop_front() {
                    mp.complete(p.index, c, now);
                }
            }
            Above::Own(w) => {
                while let Some(c) = self.disk.upward.pop_front() {
                    w.complete(c, now);
                }
            }
        }
    }

    /// Tells the disk's queue whether this path serves; a path that does not gives every
    /// command it still has back to the queue, for another path to re-issue at once.
    fn sync_path<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let Some(p) = self.above.path() else {
            return;
        };
        let (shared, index) = (p.mp.clone(), p.index);
        let now = bus.now();
        let mut mp = shared.lock();
        mp.note_gap(index, self.gap());
        self.sync_answers(&mut mp, index, bus);
        if self.disk.is_up() {
            if !mp.path_up(index) {
                mp.path_is_up(index, now);
            }
            return;
        }
        // Down: whatever made it slow, it comes back fresh (the queue forgets it too).
        let mut moved = 0;
        while let Some(req) = self.disk.pop_queued_back() {
            mp.give_back(index, req);
            moved += 1;
        }
        match self.disk.failed {
            Some(status) if !mp.path_dead(index) => mp.path_is_dead(index, now, status),
            Some(_) => {}
            None => {
                let hold = self.disk.config.hold_timeout(&bus.policy());
                if self.disk.port_dark_until().is_some() {
                    mp.path_is_dark(index, now, hold);
                } else {
                    mp.path_is_down(index, now, hold);
                }
            }
        }
        if moved > 0 {
            mp.failed_over(index, moved, now);
        }
    }

    /// The device of this disk failed (`DeviceFailed`) or left (`DeviceRemoved`).
    fn device_lost<B: FabricBus + ?Sized>(&mut self, bus: &mut B, status: IoStatus) {
        if self.above.path().is_some() {
            // Another path may still serve what this one held: give it back, not fail it.
            self.disk.on_reset(&self.ibal, bus);
            self.disk.failed = Some(status);
        } else {
            self.disk.on_failed(&self.ibal, bus, status);
        }
        self.cancel_connect();
        self.deliver_upward(bus.now());
    }

    /// New I/O from the workload: its own, or for a path the disk's queue's.
    fn take_work<B: FabricBus + ?Sized>(&mut self, bus: &mut B, now: Instant) {
        let p = match &mut self.above {
            Above::Path(p) => p,
            Above::Own(w) => {
                while let Some(req) = w.next_request(now, bus.rng()) {
                    match self.disk.submit(bus, req, false) {
                        Ok(()) => w.accepted(req),
                        Err(req) => {
                            w.refused(req);
                            break;
                        }
                    }
                }
                return;
            }
        };
        let mut mp = p.mp.lock();
        mp.generate(now, bus.rng());
        mp.check_hold(now);
        while self.disk.can_send_more() {
            let Some(req) = mp.take(p.index) else {
                break;
            };
            if let Err(req) = self.disk.submit(bus, req, mp.probe_out(p.index)) {
                // Room was checked: only a full upward queue refuses; try again later.
                mp.give_back(p.index, req);
                break;
            }
        }
        mp.note_load(p.index, self.disk.load());
    }
}

impl<B: FabricBus + ?Sized> Client<B> for SrpClient {
    fn start(&mut self, bus: &mut B) {
        if !self.disk.reserve(bus) {
            log::error!("{}: no DMA memory for the disk", self.name());
            self.refusals += 1;
            self.login.start_failed(ClientProblem::NoDmaMemory {
                bytes: self.disk.config.dma_bytes(),
            });
            return;
        }
        match self.ibal.lock().open(self.desc.name.as_str()) {
            Ok(c) => self.disk.consumer = Some(c),
            Err(e) => {
                log::error!("{}: {e}", self.desc.name.as_str());
                self.refusals += 1;
                self.login.start_failed(ClientProblem::NoConsumer(e));
                return;
            }
        }
        match bus.register(self.desc) {
            Ok(r) => {
                self.id = Some(r.id);
                self.port_up = self.port_usable(bus);
                if r.state.in_service() {
                    self.connect_at = self.port_up.then(|| bus.now());
                } else {
                    // Late: hold everything until RESET_END.
                    self.disk.blocked = true;
                }
            }
            Err(e) => {
                self.refusals += 1;
                self.login.start_failed(ClientProblem::NotRegistered(e));
            }
        }
    }

    fn on_event(&mut self, bus: &mut B, _id: ClientId, event: Event) {
        self.events.push(event.kind());
        let now = bus.now();
        self.disk.see(now);
        match event {
            Event::Reset { epoch, .. } => {
                self.query_closed(true);
                self.resetting = true;
                self.escalated = false;
                if let Some(p) = self.above.path() {
                    // Whatever made it slow, its adapter's reset makes it fresh, even while
                    // it was down already (logging in again after dropping its connection).
                    p.mp.lock().path_reset(p.index);
                }
                self.disk.on_reset(&self.ibal, bus);
                self.cancel_connect();
                // After the hardware reset every port the bus knows is down until
                // PORT_ACTIVE; one it never reported is taken as up.
                self.port_up = bus.port(self.disk.config.port).is_none();
                if self.disk.config.boot {
                    // The paging path cannot wait for a worker thread.
                    self.execute(bus, epoch);
                } else {
                    self.execute_at = Some((now + self.disk.config.ack_delay, epoch));
                }
            }
            // A planned reset called off at its query (a veto): this disk heard no RESET
            // and tore nothing down, so it carries on as it was.
            Event::ResetAborted { .. } if !self.resetting => self.query_closed(false),
            Event::ResetEnd { .. } | Event::ResetAborted { .. } => {
                self.resetting = false;
                self.disk.failed = None;
                // The reset is over: a deferred execute still pending for it (forced past
                // the quiesce deadline) has nothing left to acknowledge, and must not keep
                // the login below from happening when the port comes back.
                self.execute_at = None;
                // Logs in only on an Active port: otherwise its PORT_ACTIVE will.
                self.connect_at = self.port_up.then_some(now);
                // A fresh device: a login that gave up before gets another chance.
                self.login.fresh_device();
            }
            Event::ResetFailed { .. } => {
                self.query_closed(false);
                self.resetting = false;
                // Nothing left to acknowledge (as at RESET_END).
                self.execute_at = None;
                self.device_lost(bus, IoStatus::DeviceFailed);
            }
            // Asked only when the guard made it CAN_VETO.
            Event::ResetQuery { epoch, .. } => self.guard(bus, epoch),
            Event::DeviceFatal { .. } => {
                self.query_closed(false);
                self.resetting = false;
                self.execute_at = None;
                self.device_lost(bus, IoStatus::DeviceRemoved);
            }
            Event::PortActive { port, lid, .. } if port == self.disk.config.port => {
                self.port_up = true;
                if !self.port_renumbered(bus, lid) {
                    self.port_came_back(bus);
                }
                // Down and not failed: log in now (RESET_END may have come first). No port
                // news comes inside a reset, and every end of one drops a deferred execute,
                // so none is pending here. A login already due (a busy target's backoff)
                // keeps its time.
                let waiting = !self.disk.is_up() && self.disk.failed.is_none();
                if waiting && self.connect_at.is_none() {
                    self.connect_at = Some(now);
                }
            }
            Event::PortDown { port, .. } if port == self.disk.config.port => {
                self.port_up = false;
                self.cancel_connect();
                if self.disk.is_connected() {
                    self.port_went_dark(bus);
                }
            }
            // Another port's news.
            Event::PortActive { .. } | Event::PortDown { .. } => {}
        }
        // Answers a RESET or a port loss found in the completion queue are real: up at
        // once, not at the next wake-up (which may be the login's).
        self.deliver_upward(now);
        debug_assert!(self.disk.upward.is_empty());
        self.sync_path(bus);
    }

    /// A disk of its own reads nothing another client changes to know when it wakes (its
    /// target, workload and slots are its own); a path of a multipath disk reads the queue
    /// every path drives, so it is asked at every step.
    fn wake_is_own(&self) -> bool {
        matches!(self.above, Above::Own(_))
    }

    fn next_wake(&self) -> Option<Instant> {
        let login = match self.disk.link {
            Link::LoggingIn { ready_at } => Some(ready_at),
            _ => None,
        };
        let (work, hold) = match &self.above {
            Above::Path(p) => {
                let room = self.disk.can_send_more();
                let mp = p.mp.lock();
                let work = mp.next_wake(p.index, room);
                // Its idle check is due then too (a path of a multipath disk only), and a
                // check another path's late command wants.
                let check = self.disk.check_due();
                let demand = mp
                    .evidence_wanted(p.index)
                    .and_then(|since| self.disk.demand_check_due(since));
                ([work, check, demand].into_iter().flatten().min(), None)
            }
            Above::Own(w) => (
                w.next_at(),
                self.disk
                    .hold_deadline
                    .filter(|_| self.disk.blocked && !self.disk.fast_fail),
            ),
        };
        let [overdue, abort, stall, transport] = self.failover_deadlines();
        // A consent that no longer holds is withdrawn at once.
        let recheck = self.recheck_due();
        [
            self.target.next_due(),
            recheck,
            work,
            overdue,
            abort,
            stall,
            transport,
            self.connect_at,
            // A ClientReregister after a failed lookup is the adapter's event: a login
            // waiting out the SA's backoff looks again when it comes.
            self.connect_at
                .and(self.paths.as_ref())
                .and_then(PathRecords::rescan_due),
            self.execute_at.map(|(t, _)| t),
            self.disk.port_dark_until(),
            login,
            hold,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn wake(&mut self, bus: &mut B) {
        let now = bus.now();
        self.disk.see(now);
        // The remote side first: it answers what was sent before.
        {
            let (hca, rng) = bus.device_and_rng();
            self.target.intake(hca, now, rng);
            self.target.process(hca, now);
        }
        self.disk.poll(&self.ibal, bus);
        self.transport_lost(bus);
        self.port_dark_too_long(bus);
        self.target_dropped(bus);
        self.recheck_consent(bus);
        self.fail_over_slow(bus);
        self.drop_stuck_connection(bus);
        self.disk.fail_struck_out();
        if let Some((_, epoch)) = self.execute_at.filter(|(t, _)| *t <= now) {
            self.execute_at = None;
            self.execute(bus, epoch);
        }
        if self.connect_at.is_some() && self.paths.as_mut().is_some_and(|p| p.rescan(now)) {
            // A new master: the lookup goes at once, its backoff over (the login's own is
            // at most a second and a half).
            self.connect_at = Some(now);
        }
        if self.connect_at.is_some_and(|t| t <= now) {
            self.connect_at = None;
            self.login_due(bus, now);
        }
        if let Link::LoggingIn { ready_at } = self.disk.link {
            if ready_at <= now {
                self.disk.up();
            }
        }
        let held_too_long = self.disk.hold_deadline.is_some_and(|d| d <= now);
        if self.above.path().is_none() && self.disk.blocked && !self.disk.fast_fail && held_too_long
        {
            self.disk.hold_expired();
        }
        self.deliver_upward(now);
        self.sync_path(bus);
        self.take_work(bus, now);
        if let Some(p) = self.above.path() {
            let wanted = p.mp.lock().evidence_wanted(p.index);
            if let Some(since) = wanted {
                self.disk.check_on_demand(bus, since);
            }
            self.disk.check_if_idle(bus);
        }
        self.disk.pump(&self.ibal, bus);
        self.deliver_upward(now);
        // A command the link refused to post stays with a path that is going down.
        self.sync_path(bus);
        debug_assert!(self.disk.upward.is_empty());
        let (hca, rng) = bus.device_and_rng();
        self.target.intake(hca, now, rng);
    }
}

crate::ibal_client::report_fields!(
    SrpClient,
    |c| c.login.problem().map(|p| p.to_string()),
    |c| c.counters(),
    |c| c.disk().is_up()
);
