//! A disk with several paths, each through its own adapter (docs/design.md §7 "Multipath"): one I/O
//! queue above one SRP initiator per path.
//!
//! Each path is an [`SrpClient`](crate::disk::SrpClient) on its adapter's bus that pulls its
//! share of I/O from the queue here and hands every completion back. When a path's adapter
//! resets (or its port goes down, or its device fails) the path takes its in-flight
//! commands back, as a single-path disk does, and gives them straight back to this queue,
//! where another Active path re-issues them at once: the queue is a hold queue only while no
//! path is up. Every I/O still completes exactly once, which the workload here checks.
//!
//! Shared by the paths' clients across adapters (behind a mutex, as the access layer is);
//! everything is reserved at creation, so nothing here allocates after start.

use std::collections::VecDeque;
use std::string::String;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use hcabus::{Duration, Instant};
use rand::RngCore;

use crate::disk::DiskConfig;
use crate::io::*;
use crate::workload::{Workload, WriteData};

mod events;
mod failover;
mod guard;
mod select;
pub use events::{PathEvent, PathEventKind};
pub use failover::{DEFAULT_PATH_IO_TIMEOUT, PROBES_TO_SERVE, PROBE_BACKOFF_MAX};
pub use guard::{only_path, PathGap, PathPlace};
pub use select::{PathLoad, STALE_AFTER};

pub use crate::disk::MAX_PATHS;

/// What one path did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathStats {
    /// I/Os this path took from the queue to send (a command moved off another path counts
    /// on each path that took it; `taken - moved` are the ones it took last).
    pub taken: u64,
    /// I/Os this path completed upward.
    pub ios: u64,
    /// I/Os this path failed upward.
    pub failed: u64,
    /// Times the path went down with commands on it that the other paths took over.
    pub failovers: u32,
    /// Commands taken back from this path and given to the queue for another path.
    pub moved: u64,
    /// Time the path was down after it first came up.
    pub down_us: u64,
    /// Times it gave commands up for being slow while another path answered (fast path
    /// failover), and how many commands it gave up in all.
    pub slow_failovers: u32,
    pub given_up: u64,
    /// Probes it sent while given up, and times it served again after them.
    pub probes: u64,
    pub restored: u32,
}

/// What the disk as a whole did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MultipathStats {
    /// Time with no path up, after the first one came up: the only time I/O waits.
    pub no_path_us: u64,
    /// The most I/Os waiting in the queue while no path was up.
    pub max_held: u64,
    pub hold_timeouts: u32,
    /// I/Os failed in the queue without reaching a path (past the hold timeout with none
    /// up, or every path's device gone).
    pub failed_unpathed: u64,
}

#[derive(Debug, Clone, Copy)]
struct PathState {
    up: bool,
    /// The device of this path failed or left: it will not come back by itself.
    dead: Option<IoStatus>,
    down_since: Option<Instant>,
    stats: PathStats,
    /// Its adapter and port, and why it is not serving: what the last-path guard names.
    place: Option<PathPlace>,
    gap: Option<PathGap>,
    /// The send time of the youngest command it has answered promptly; whether it gave
    /// commands up for being slow and is being probed.
    last_answer: Option<Instant>,
    /// The send time of its oldest command out past its timeout that no younger answer on
    /// another path overtook: the other paths, when idle, check at once to answer it.
    wants_evidence: Option<Instant>,
    probe: Option<failover::Probe>,
    /// The path dropped its own connection while probed: it stays probed through the
    /// re-login (only an adapter's reset makes it fresh).
    keep_probe: bool,
    /// Not serving while its port is dark, its connection kept (docs/design.md §7 "A link
    /// flap ridden"): what that connection still runs keeps its fences and its probe.
    dark: bool,
    /// The backoff of its last probing and when it served again after it: a path given up
    /// again soon starts from there, not from the floor.
    last_backoff: Option<(Duration, Instant)>,
    /// Its load when it last said (see [`Multipath::note_load`]), and when it last took an
    /// I/O: what the path selector prices it by.
    load: PathLoad,
    last_taken: Option<Instant>,
    /// When it came back (up again after being down, or serving again after probes): a
    /// path of a better group counts for it only a failback delay after that.
    back_at: Option<Instant>,
    /// Where a planned reset of its adapter that the disk consented to stands: the guard
    /// counts the path as resetting until it is back after that reset.
    consent: guard::Consent,
}

impl PathState {
    /// Up and not probing: it takes its full share.
    fn serves(&self) -> bool {
        self.up && self.probe.is_none()
    }
}

/// The queue and workload above the paths of one disk.
#[derive(Debug, Clone)]
pub struct Multipath {
    name: String,
    config: DiskConfig,
    workload: Box<dyn Workload>,
    /// I/Os on no path: new ones, and those taken back from a path that went down. Reserved
    /// to `queue_limit` at creation (a bound kept apart from the capacity, which a clone
    /// does not keep).
    queue: VecDeque<IoRequest>,
    queue_limit: usize,
    paths: Vec<PathState>,
    /// The path whose turn it is to take the next I/O (round robin over the up paths).
    turn: usize,
    /// The latest instant a path reported: "now" for [`Multipath::next_wake`].
    now: Instant,
    ever_up: bool,
    no_path_since: Option<Instant>,
    hold_deadline: Option<Instant>,
    /// Past the hold timeout with no path: I/O fails at once (retryable) until one is up.
    fast_fail: bool,
    /// Blocks with a given-up write that may still run late, by path (fast path failover).
    fences: Vec<failover::Fence>,
    fence_limit: usize,
    /// What happened to the paths, newest last (bounded: the oldest go first).
    events: events::PathLog,
    stats: MultipathStats,
}

/// The disk's queue, shared by its paths' clients.
#[derive(Debug, Clone)]
pub struct SharedMultipath(Arc<Mutex<Multipath>>);

impl SharedMultipath {
    /// A disk named `name` with `paths` paths whose I/O `workload` issues; `config` is the
    /// disk's request limit and hold (its `port` and `hold_capacity` are each path's
    /// business).
    pub fn new(name: &str, config: DiskConfig, paths: usize, workload: Box<dyn Workload>) -> Self {
        let paths = paths.clamp(1, MAX_PATHS);
        let capacity = Self::capacity(&config, paths);
        let fence_limit =
            paths * usize::from(config.queue_depth) * usize::from(config.max_blocks.max(1));
        let path = PathState {
            up: false,
            dead: None,
            down_since: None,
            stats: PathStats::default(),
            place: None,
            gap: Some(PathGap::LoggedOut),
            last_answer: None,
            wants_evidence: None,
            probe: None,
            keep_probe: false,
            dark: false,
            last_backoff: None,
            load: PathLoad {
                room: true,
                ..PathLoad::default()
            },
            last_taken: None,
            back_at: None,
            consent: guard::Consent::None,
        };
        SharedMultipath(Arc::new(Mutex::new(Multipath {
            name: name.into(),
            config,
            workload,
            queue: VecDeque::with_capacity(capacity),
            queue_limit: capacity,
            paths: std::vec![path; paths],
            turn: 0,
            now: Instant::ZERO,
            ever_up: false,
            no_path_since: None,
            hold_deadline: None,
            fast_fail: false,
            fences: Vec::with_capacity(fence_limit),
            fence_limit,
            events: events::PathLog::new(),
            stats: MultipathStats::default(),
        })))
    }

    /// The most I/Os a disk of `paths` paths configured by `config` owes at once: what its
    /// queue holds and every path's request limit (what its workload may have out).
    pub fn capacity(config: &DiskConfig, paths: usize) -> usize {
        let paths = paths.clamp(1, MAX_PATHS);
        usize::from(config.hold_capacity) + paths * usize::from(config.queue_depth)
    }

    /// Locks the queue. Its methods leave it whole between statements, so a lock held by
    /// a client that panicked is taken over rather than poisoning every path.
    pub fn lock(&self) -> MutexGuard<'_, Multipath> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `other` is this same disk.
    pub fn same(&self, other: &SharedMultipath) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Multipath {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The disk's setup (its workload, request limit, fast path failover's timeout).
    pub fn config(&self) -> &DiskConfig {
        &self.config
    }
    /// The layer above every path.
    pub fn workload(&self) -> &dyn Workload {
        &*self.workload
    }
    /// How the writes of the layer above carry their data, for each path's initiator.
    pub fn write_data(&self) -> WriteData {
        self.workload.write_data()
    }
    /// What the disk did, a time with no path still running counted up to the latest
    /// instant a path reported.
    pub fn stats(&self) -> MultipathStats {
        let mut s = self.stats;
        if let Some(since) = self.no_path_since {
            s.no_path_us += self.now.saturating_since(since).as_us();
        }
        s
    }
    /// What `path` did, a time down still running counted as [`Multipath::stats`] does.
    pub fn path_stats(&self, path: usize) -> Option<PathStats> {
        self.paths.get(path).map(|p| {
            let mut s = p.stats;
            if let Some(since) = p.down_since {
                s.down_us += self.now.saturating_since(since).as_us();
            }
            s
        })
    }
    /// The latest instant a path reported.
    pub fn now(&self) -> Instant {
        self.now
    }
    pub fn path_up(&self, path: usize) -> bool {
        self.paths.get(path).is_some_and(|p| p.up)
    }
    pub fn path_dead(&self, path: usize) -> bool {
        self.paths.get(path).is_some_and(|p| p.dead.is_some())
    }

    fn any_up(&self) -> bool {
        self.paths.iter().any(|p| p.up)
    }

    /// Feeds what decides the queue's next moves (the queue, each path's state, the turn,
    /// the fences, the hold) to `h`, leaving out the workload and the statistics: a model
    /// check's fingerprint of the disk.
    pub fn hash_state<H: core::hash::Hasher>(&self, h: &mut H) {
        use core::hash::Hash;
        for r in &self.queue {
            (r.id, r.lba, r.blocks, r.write).hash(h);
        }
        for p in &self.paths {
            (p.up, p.dead.is_some(), p.probe, p.load, p.last_answer).hash(h);
            (p.last_taken, p.back_at).hash(h);
            (p.keep_probe, p.dark, p.last_backoff).hash(h);
            p.consent.hash(h);
        }
        for f in &self.fences {
            std::format!("{f:?}").hash(h);
        }
        (
            self.turn,
            self.hold_deadline,
            self.fast_fail,
            self.no_path_since,
        )
            .hash(h);
    }

    /// I/Os waiting in the queue for a path.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The queue holds `id` (it is owed, and a path will take it).
    pub fn tracks(&self, id: u64) -> bool {
        self.queue.iter().any(|r| r.id == id)
    }

    pub(crate) fn see(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// Takes the workload's I/O due at `now` into the queue: held there while no path is
    /// up, failed at once past the hold timeout or when every path's device is gone.
    pub fn generate(&mut self, now: Instant, rng: &mut dyn RngCore) {
        self.see(now);
        while let Some(req) = self.workload.next_request(now, rng) {
            let dead = self.paths.iter().all(|p| p.dead.is_some());
            if let Some(status) = dead.then(|| self.paths[0].dead).flatten() {
                self.workload.accepted(req);
                self.fail_one(req, status, now);
            } else if self.fast_fail {
                self.workload.accepted(req);
                self.fail_one(req, IoStatus::Retryable, now);
            } else if self.enqueue(req).is_ok() {
                self.workload.accepted(req);
                if !self.any_up() && self.ever_up {
                    self.stats.max_held = self.stats.max_held.max(self.queue.len() as u64);
                }
            } else {
                self.workload.refused(req);
                break;
            }
        }
    }

    /// An I/O from above joins the back of the queue; `Err` when it is full.
    pub fn enqueue(&mut self, req: IoRequest) -> Result<(), IoRequest> {
        if self.queue.len() >= self.queue_limit {
            return Err(req);
        }
        self.queue.push_back(req);
        Ok(())
    }

    fn fail_one(&mut self, req: IoRequest, status: IoStatus, now: Instant) {
        self.stats.failed_unpathed += 1;
        let c = IoCompletion {
            id: req.id,
            status,
            checksum: 0,
        };
        self.workload.complete(c, now);
    }

    /// Whether `path` may take the next I/O: it serves (up, not probing), has room, there is
    /// one it may send, and the path selector chooses it among the paths that serve and
    /// have room (a full path does not hold the others up); or it is probing and its probe
    /// may go. A probing path with no other path serving serves in full: a slow path is
    /// better than none.
    pub fn may_take(&self, path: usize, has_room: bool) -> bool {
        let Some(me) = self.paths.get(path) else {
            return false;
        };
        let full = me.serves() || (me.up && self.alone(path));
        let probes = me.up && me.probe.is_some_and(|pr| pr.ready(self.now));
        ((full && self.chosen(path)) || probes) && has_room && self.next_takeable().is_some()
    }

    /// Whether no path but `path` serves.
    fn alone(&self, path: usize) -> bool {
        !self
            .paths
            .iter()
            .enumerate()
            .any(|(i, p)| i != path && p.serves())
    }

    /// The next I/O for `path`, if it may take one; the turn (what breaks a tie between
    /// paths that cost the same) passes to the next path that serves.
    pub fn take(&mut self, path: usize) -> Option<IoRequest> {
        if !self.may_take(path, true) {
            return None;
        }
        let req = self.queue.remove(self.next_takeable()?)?;
        let alone = self.alone(path);
        self.took(path, self.now);
        if let Some(p) = self.paths.get_mut(path) {
            p.stats.taken += 1;
            if let Some(probe) = p.probe.as_mut().filter(|_| !alone) {
                // A probe: it does not take the turn either.
                probe.out = true;
                p.stats.probes += 1;
                return Some(req);
            }
        }
        let n = self.paths.len();
        self.turn = (1..=n)
            .map(|k| (path + k) % n)
            .find(|&p| self.paths[p].serves())
            .unwrap_or(path);
        Some(req)
    }

    /// When `path` next has work here: at once when it may take an I/O and has room for
    /// it, else the workload's next tick or the hold deadline.
    pub fn next_wake(&self, path: usize, has_room: bool) -> Option<Instant> {
        let now = self.may_take(path, has_room).then_some(self.now);
        let hold = self.hold_deadline.filter(|_| !self.fast_fail);
        // A probe that may go later (one that may go now is the case above).
        let probe = self
            .paths
            .get(path)
            .and_then(|p| p.probe)
            .map(|pr| pr.next_at)
            .filter(|&t| t > self.now);
        [now, self.workload.next_at(), hold, probe]
            .into_iter()
            .flatten()
            .min()
    }

    /// `path` is logged in and serving.
    pub fn path_is_up(&mut self, path: usize, now: Instant) {
        self.see(now);
        let Some(p) = self.paths.get_mut(path) else {
            return;
        };
        if let Some(since) = p.down_since.take() {
            p.stats.down_us += now.saturating_since(since).as_us();
            p.back_at = Some(now);
        }
        if !p.up {
            self.events.push(now, path, PathEventKind::Up);
        }
        // Back after the reset the disk consented to: it serves again, for the guard too.
        if p.consent == guard::Consent::ResetBegun {
            p.consent = guard::Consent::None;
        }
        p.up = true;
        p.dark = false;
        p.dead = None;
        if let Some(since) = self.no_path_since.take() {
            self.stats.no_path_us += now.saturating_since(since).as_us();
        }
        self.ever_up = true;
        self.hold_deadline = None;
        self.fast_fail = false;
    }

    /// `path` went down (RESET, its port, its device): no more I/O for it. With no path
    /// left, the queue holds until `hold` (the disk's hold timeout; `None`: for ever).
    pub fn path_is_down(&mut self, path: usize, now: Instant, hold: Option<Duration>) {
        self.path_stops(path, now, hold, false);
    }

    /// `path`'s port went dark under its connection, kept while the transport may still
    /// carry what is out: no more I/O for it, as down, but what the connection still runs
    /// keeps its write fences (an old write given up on it may still land) and the path
    /// its probe, until it serves again or goes down for good.
    pub fn path_is_dark(&mut self, path: usize, now: Instant, hold: Option<Duration>) {
        self.path_stops(path, now, hold, true);
    }

    fn path_stops(&mut self, path: usize, now: Instant, hold: Option<Duration>, kept: bool) {
        self.see(now);
        let Some(p) = self.paths.get_mut(path) else {
            return;
        };
        if p.up && self.ever_up {
            p.down_since = Some(now);
        }
        if p.up {
            self.events.push(now, path, PathEventKind::Down);
        }
        // Whatever made it slow, it comes back fresh (unless it dropped its own connection),
        // and its connection runs nothing more. Judged as its connection ends: the client
        // says it is down at every look.
        let ends = !kept && (p.up || p.dark);
        if ends {
            if std::mem::take(&mut p.keep_probe) {
                p.probe = p.probe.map(failover::Probe::taken_back);
            } else {
                p.probe = None;
                p.last_backoff = None;
            }
        }
        p.dark = kept && (p.up || p.dark);
        p.up = false;
        // Down but not dead: its device is back (RESET_END), or was never gone.
        p.dead = None;
        if !kept {
            self.fences.retain(|f| !f.on(path));
        }
        if self.turn == path {
            self.turn = (path + 1) % self.paths.len();
        }
        if !self.any_up() && self.ever_up && self.no_path_since.is_none() {
            self.no_path_since = Some(now);
            self.stats.max_held = self.stats.max_held.max(self.queue.len() as u64);
            if self.hold_deadline.is_none() {
                self.hold_deadline = hold.map(|t| now + t);
            }
        }
    }

    /// `path`'s device failed (`DeviceFailed`) or left (`DeviceRemoved`). When that leaves
    /// no path that may come back, everything queued fails with it.
    pub fn path_is_dead(&mut self, path: usize, now: Instant, status: IoStatus) {
        self.path_is_down(path, now, None);
        self.events.push(now, path, PathEventKind::Dead);
        if let Some(p) = self.paths.get_mut(path) {
            p.dead = Some(status);
        }
        if self.paths.iter().all(|p| p.dead.is_some()) {
            self.fail_queued(status, now);
        }
    }

    /// A command `path` took back: it goes first (the caller hands them over newest
    /// first, so the oldest ends up at the front). A probing path's probe, given back, is
    /// out no more.
    pub fn give_back(&mut self, path: usize, req: IoRequest) {
        if req.is_check() {
            // An idle check is its path's own: nobody's I/O to re-issue.
            return;
        }
        if let Some(probe) = self.paths.get_mut(path).and_then(|p| p.probe.as_mut()) {
            probe.out = false;
        }
        if self.queue.len() < self.queue_limit {
            self.queue.push_front(req);
        } else {
            // Cannot happen: the queue has room for every path's commands at once.
            log::error!(
                "{}: the queue is full; command {} dropped",
                self.name,
                req.id
            );
        }
        if let Some(p) = self.paths.get_mut(path) {
            p.stats.moved += 1;
        }
    }

    /// `path` went down with `moved` commands on it, which it gave back: a failover.
    pub fn failed_over(&mut self, path: usize, moved: u32, now: Instant) {
        self.see(now);
        if let Some(p) = self.paths.get_mut(path) {
            p.stats.failovers += 1;
        }
        self.events
            .push(now, path, PathEventKind::Moved { n: moved });
    }

    /// One completion `path` delivered.
    pub fn complete(&mut self, path: usize, c: IoCompletion, now: Instant) {
        self.see(now);
        if let Some(p) = self.paths.get_mut(path) {
            if c.status == IoStatus::Ok {
                p.stats.ios += 1;
            } else {
                p.stats.failed += 1;
            }
        }
        self.workload.complete(c, now);
    }

    /// Past the hold deadline with no path: fail what is held, once, as retryable.
    pub fn check_hold(&mut self, now: Instant) {
        self.see(now);
        if self.fast_fail || self.hold_deadline.is_none_or(|d| d > now) {
            return;
        }
        self.fast_fail = true;
        self.stats.hold_timeouts += 1;
        self.fail_queued(IoStatus::Retryable, now);
    }

    fn fail_queued(&mut self, status: IoStatus, now: Instant) {
        while let Some(req) = self.queue.pop_front() {
            self.fail_one(req, status, now);
        }
    }

    /// The I/O accounting: an owed I/O is in flight when the queue or a path still has it
    /// and some path is live (`live` says which paths are), else lost.
    pub fn io_stats(&self, live: bool, on_a_path: impl Fn(u64) -> bool) -> IoStats {
        let mut stats = self
            .workload
            .accounted(&|id| live && (self.tracks(id) || on_a_path(id)));
        if self.config.boot {
            stats.paging_failed = stats.failed;
        }
        stats
    }
}

#[cfg(test)]
mod tests;
