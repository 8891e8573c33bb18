//! The event loop every peer shares: the workload's steady arrivals, the host's queue, the
//! selector, each path's connection, credits and port, and the upward completions. What a
//! peer does when something goes wrong is in `react.rs`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use hcabus::{Duration, Instant};
use ibal::io::{IoCompletion, IoRequest, IoStatus};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::port::{Carried, Port};
use super::{timers, Peer, PeerRun, PeerSetup, Selector};
use crate::block::{BlockWorkload, WorkloadConfig};
use crate::pattern::{checksum, fill_pattern, initial_seed, write_seed};

/// What a message on a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Tag {
    /// An I/O, by id, in its `attempt`-th sending.
    Io(u64, u32),
    /// A check (a TUR, a keep-alive), by its sequence number on the path.
    Check(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    Tick,
    Arrive(usize, u32, Tag),
    Execute(usize, u32, Tag),
    Answer(usize, u32, Tag, u64),
    QpError(usize, u32),
    Reconnect(usize, u32),
    FastIoFail(usize, u32),
    Check(usize),
    CheckTimeout(usize, u32),
    CmdTimeout(u64, u32),
    AbortFailed(u64, u32),
    PdoRemove,
}

/// A path's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conn {
    Live,
    /// Its transport erred at `since` (SRP: blocked; NVMe: connecting; MPIO: failed).
    Down {
        since: Instant,
        fail_fast: bool,
    },
}

#[derive(Debug, Clone)]
pub(super) struct PathSt {
    pub port: Port,
    /// The connection's generation: a message of an older one is void.
    pub gen: u32,
    pub conn: Conn,
    /// The multipath layer sends new I/O here.
    pub usable: bool,
    /// I/O commands out on the connection.
    pub sent: u32,
    /// I/O given this path and not sent (its connection is blocked).
    pub parked: VecDeque<u64>,
    /// The check out: its sequence number and when it was sent.
    pub check_out: Option<(u32, Instant)>,
    pub check_seq: u32,
    pub check_every: Duration,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Cmd {
    pub req: IoRequest,
    /// The path, connection and attempt it was last sent on.
    pub on: Option<(usize, u32)>,
    pub attempt: u32,
    pub retries: u32,
}

pub(super) struct Engine {
    pub peer: Peer,
    pub now: Instant,
    end: Instant,
    rng: ChaCha8Rng,
    events: BinaryHeap<Reverse<(Instant, u64, Ev)>>,
    seq: u64,
    workload: BlockWorkload,
    lun: Vec<u64>,
    /// I/O waiting for a path, oldest first.
    pub host: VecDeque<u64>,
    pub cmds: HashMap<u64, Cmd>,
    pub paths: Vec<PathSt>,
    queue_depth: u32,
    turn: usize,
    /// MPIO: since when no path served (the pseudo-LUN's removal counts from it), and
    /// whether it was removed.
    pub lost_all: Option<Instant>,
    pub removed: bool,
    pub out: PeerRun,
}

impl Engine {
    pub fn new(peer: Peer, s: &PeerSetup) -> Engine {
        let config = WorkloadConfig {
            iops: s.iops,
            read_pct: s.read_pct.min(100),
            lun_id: s.lun_id,
            n_blocks: s.n_blocks,
            max_outstanding: s.max_outstanding.max(1),
            large: s.large,
            series_buckets: crate::block::SERIES_BUCKETS,
        };
        let mut block = std::vec![0u8; ibal::io::BLOCK_SIZE];
        let lun = (0..s.n_blocks)
            .map(|lba| {
                fill_pattern(initial_seed(s.lun_id, lba), &mut block);
                checksum(&block)
            })
            .collect();
        let mut e = Engine {
            peer,
            now: Instant::ZERO,
            end: Instant::ZERO + s.duration,
            rng: ChaCha8Rng::seed_from_u64(s.seed),
            events: BinaryHeap::new(),
            seq: 0,
            workload: BlockWorkload::new(config),
            lun,
            host: VecDeque::new(),
            cmds: HashMap::new(),
            paths: s
                .routes
                .iter()
                .map(|r| PathSt {
                    port: Port::new(*r, s.rc),
                    gen: 0,
                    conn: Conn::Live,
                    usable: true,
                    sent: 0,
                    parked: VecDeque::new(),
                    check_out: None,
                    check_seq: 0,
                    check_every: timers::POLLING_INTERVAL,
                })
                .collect(),
            queue_depth: u32::from(s.queue_depth),
            turn: 0,
            lost_all: None,
            removed: false,
            out: PeerRun::default(),
        };
        e.at(Instant::ZERO, Ev::Tick);
        e.start_checks();
        e
    }

    /// Schedules `ev` at `t` (ties in the order scheduled).
    pub fn at(&mut self, t: Instant, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, ev)));
    }

    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }

    pub fn run(&mut self, end: Instant) {
        while let Some(Reverse((t, _, ev))) = self.events.pop() {
            if t > end {
                break;
            }
            self.now = t;
            self.handle(ev);
        }
        self.now = end;
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Tick => self.tick(),
            Ev::Arrive(p, gen, tag) => self.arrive(p, gen, tag),
            Ev::Execute(p, gen, tag) => self.execute(p, gen, tag),
            Ev::Answer(p, gen, tag, sum) => self.answered(p, gen, tag, sum),
            Ev::QpError(p, gen) if self.paths[p].gen == gen => self.transport_error(p),
            Ev::Reconnect(p, gen) if self.paths[p].gen == gen => self.reconnect(p),
            Ev::FastIoFail(p, gen) if self.paths[p].gen == gen => self.fast_io_fail(p),
            Ev::Check(p) => self.check(p),
            Ev::CheckTimeout(p, seq) => self.check_timed_out(p, seq),
            Ev::CmdTimeout(id, attempt) => self.cmd_timed_out(id, attempt),
            Ev::AbortFailed(id, attempt) => self.abort_failed(id, attempt),
            Ev::PdoRemove => self.pdo_remove(),
            Ev::QpError(..) | Ev::Reconnect(..) | Ev::FastIoFail(..) => {}
        }
    }

    fn tick(&mut self) {
        let now = self.now;
        while let Some(req) = self.workload.next_request(now, &mut self.rng) {
            self.workload.accepted(req);
            let cmd = Cmd {
                req,
                on: None,
                attempt: 0,
                retries: 0,
            };
            self.cmds.insert(req.id, cmd);
            self.host.push_back(req.id);
        }
        if let Some(t) = self.workload.next_at().filter(|t| *t <= self.end) {
            self.at(t, Ev::Tick);
        }
        self.dispatch();
    }

    /// Gives the host's waiting I/O to paths while one has room.
    pub fn dispatch(&mut self) {
        while let Some(&id) = self.host.front() {
            if let Some(p) = self.choose() {
                self.host.pop_front();
                self.give(p, id);
            } else if self.paths.iter().any(|p| p.usable) {
                return;
            } else {
                self.no_path();
                return;
            }
        }
    }

    fn room(&self, p: usize) -> bool {
        let s = &self.paths[p];
        s.usable && s.sent + s.parked.len() as u32 <= self.queue_depth.saturating_sub(1)
    }

    fn load(&self, p: usize) -> u32 {
        self.paths[p].sent + self.paths[p].parked.len() as u32
    }

    fn choose(&mut self) -> Option<usize> {
        let n = self.paths.len();
        let pick = match self.peer.selector() {
            Selector::First => {
                // The sticky current path: the first usable one, waited for when busy.
                let first = (0..n).find(|p| self.paths[*p].usable)?;
                self.room(first).then_some(first)
            }
            Selector::LeastQueue => (0..n)
                .filter(|p| self.room(*p))
                .min_by_key(|p| self.load(*p)),
            Selector::RoundRobin => (0..n).map(|k| (self.turn + k) % n).find(|p| self.room(*p)),
            Selector::ServiceTime => {
                let least = (0..n)
                    .filter(|p| self.room(*p))
                    .map(|p| self.load(p))
                    .min()?;
                (0..n)
                    .map(|k| (self.turn + k) % n)
                    .find(|p| self.room(*p) && self.load(*p) == least)
            }
        }?;
        self.turn = (pick + 1) % n;
        Some(pick)
    }

    /// Path `p` carries I/O `id`: sent now, or parked behind its blocked connection.
    pub fn give(&mut self, p: usize, id: u64) {
        if self.paths[p].conn == Conn::Live {
            self.send(p, id);
        } else {
            self.paths[p].parked.push_back(id);
        }
    }

    fn send(&mut self, p: usize, id: u64) {
        let gen = self.paths[p].gen;
        let Some(cmd) = self.cmds.get_mut(&id) else {
            return;
        };
        cmd.attempt += 1;
        cmd.on = Some((p, gen));
        let attempt = cmd.attempt;
        self.paths[p].sent += 1;
        self.transmit(p, Tag::Io(id, attempt));
        let timeout = match self.peer {
            Peer::DmSrp(_) => timers::SD_TIMEOUT,
            Peer::Nvme(_) => timers::NVME_IO_TIMEOUT,
            Peer::Mpio(_) => timers::MPIO_DISK_TIMEOUT,
        };
        self.at(self.now + timeout, Ev::CmdTimeout(id, attempt));
    }

    /// Puts message `tag` on path `p`'s current connection now.
    pub fn transmit(&mut self, p: usize, tag: Tag) {
        let gen = self.paths[p].gen;
        match self.paths[p].port.carry(self.now) {
            Carried::At(t) => self.at(t, Ev::Arrive(p, gen, tag)),
            Carried::Failed(t) => self.at(t, Ev::QpError(p, gen)),
            Carried::Never => {}
        }
    }

    /// The target writes `req`'s blocks: each block's checksum, as the workload made them.
    fn store(&mut self, req: &IoRequest) {
        if req.blocks == 1 {
            self.lun[req.lba as usize] = req.checksum;
            return;
        }
        let mut block = [0u8; ibal::io::BLOCK_SIZE];
        for b in req.lba..req.lba + u64::from(req.blocks) {
            fill_pattern(write_seed(req.id, b), &mut block);
            self.lun[b as usize] = checksum(&block);
        }
    }

    /// What a read of `req`'s blocks carries ([`ibal::io::checksum_blocks`]).
    fn read(&self, req: &IoRequest) -> u64 {
        let mut sums = (req.lba..req.lba + u64::from(req.blocks)).map(|b| self.lun[b as usize]);
        let first = sums.next().unwrap_or(0);
        sums.fold(first, ibal::io::fold_block)
    }

    fn current(&self, p: usize, gen: u32, tag: Tag) -> bool {
        if self.paths[p].gen != gen {
            return false;
        }
        match tag {
            Tag::Io(id, attempt) => self.cmds.get(&id).is_some_and(|c| c.attempt == attempt),
            Tag::Check(_) => true,
        }
    }

    fn arrive(&mut self, p: usize, gen: u32, tag: Tag) {
        if !self.current(p, gen, tag) {
            return;
        }
        let data = match tag {
            Tag::Io(id, _) => self
                .cmds
                .get(&id)
                .map_or((false, 0), |c| (c.req.write, c.req.bytes())),
            Tag::Check(_) => (false, 0),
        };
        let due = self.paths[p].port.arrive(self.now, data, &mut self.rng);
        if let Some(due) = due {
            self.at(due, Ev::Execute(p, gen, tag));
        }
    }

    fn execute(&mut self, p: usize, gen: u32, tag: Tag) {
        self.paths[p].port.served();
        // The target drops what its connection no longer has (torn down, or aborted).
        if !self.current(p, gen, tag) {
            return;
        }
        let sum = match tag {
            Tag::Io(id, _) => match self.cmds.get(&id).map(|c| c.req) {
                Some(req) if req.write => {
                    self.store(&req);
                    0
                }
                Some(req) => self.read(&req),
                None => return,
            },
            Tag::Check(_) => 0,
        };
        let out = self.paths[p].port.answer(self.now);
        match self.paths[p].port.carry(out) {
            Carried::At(t) => self.at(t, Ev::Answer(p, gen, tag, sum)),
            Carried::Failed(t) => self.at(t, Ev::QpError(p, gen)),
            Carried::Never => {}
        }
    }

    fn answered(&mut self, p: usize, gen: u32, tag: Tag, sum: u64) {
        if !self.current(p, gen, tag) {
            return;
        }
        match tag {
            Tag::Io(id, _) => {
                self.paths[p].sent = self.paths[p].sent.saturating_sub(1);
                self.complete(id, IoStatus::Ok, sum);
                self.dispatch();
            }
            Tag::Check(seq) => self.check_answered(p, seq),
        }
    }

    /// I/O `id` completes upward with `status`.
    pub fn complete(&mut self, id: u64, status: IoStatus, sum: u64) {
        if self.cmds.remove(&id).is_some() {
            let c = IoCompletion {
                id,
                status,
                checksum: sum,
            };
            self.workload.complete(c, self.now);
        }
    }

    /// Every I/O path `p` holds (out on its connection, or parked), oldest first, taken
    /// off it: its connection's commands are void from here.
    pub fn take_all(&mut self, p: usize) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .cmds
            .iter()
            .filter(|(_, c)| c.on.is_some_and(|(q, g)| q == p && g == self.paths[p].gen))
            .map(|(id, _)| *id)
            .collect();
        out.sort_unstable();
        out.extend(self.paths[p].parked.drain(..));
        for id in &out {
            if let Some(c) = self.cmds.get_mut(id) {
                c.on = None;
                c.attempt += 1;
            }
        }
        self.paths[p].sent = 0;
        out
    }

    /// I/O `ids` go back to the host's queue, ahead of what waits there, moved off `p`.
    pub fn fail_over(&mut self, p: usize, ids: Vec<u64>) {
        self.out.moved[p] += ids.len() as u64;
        for id in ids.into_iter().rev() {
            self.host.push_front(id);
        }
        self.dispatch();
    }

    /// Path `p` leaves the multipath layer's use.
    pub fn take_out(&mut self, p: usize) {
        if self.paths[p].usable {
            self.paths[p].usable = false;
            self.out.taken_out[p].push(self.now);
        }
    }

    pub fn finish(mut self) -> PeerRun {
        let owed = self
            .cmds
            .keys()
            .copied()
            .collect::<std::collections::HashSet<u64>>();
        self.out.io = ibal::workload::Workload::accounted(&self.workload, &|id| owed.contains(&id));
        self.out.latencies = self.workload.waited(self.end);
        self.out
    }
}
