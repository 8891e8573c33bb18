//! An exhaustive model check of fast path failover's take-back (docs/design.md §7 "Fast path
//! failover"): the real slot table of each path's initiator (`ibal::disk::slots`) and the
//! real multipath queue (`ibal::multipath::Multipath`: turns, suspicion, the write fence),
//! driven through every interleaving of sends, the target taking, running and answering
//! commands in any order, answers arriving late, ABORT TASKs, time passing, an adapter
//! dying and an adapter being reset, on two paths to one LUN.
//!
//! The transport and the target are modelled as the simulator's are: a path's messages
//! reach its target in order, the target may run what it took in any order, its answers come
//! back in order, a dead adapter moves nothing (no send leaves it, no RDMA through it), and a
//! reset connection drops the old connection's commands and answers.
//!
//! Properties, checked in every state: every I/O is in exactly one place (the queue, one
//! path's table, or completed upward), completed at most once; the target only ever runs a
//! command whose slot still holds it (its buffer is that command's); no write ever lands on
//! a block after a newer write to it completed (no stale overwrite). In every state with no
//! move left and both adapters alive, every I/O has completed exactly once.
//! `HCABUS_FAILOVER_DEPTH=N` explores deeper. Planted take-back bugs (ibal's `mutants`) show
//! the properties bite: see the last test.

use std::collections::{HashSet, VecDeque};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use hcabus::{Duration, Instant};
use ibal::disk::slots::{Answer, GiveUpRule, SlotMutant, SlotTable};
use ibal::disk::{DiskConfig, PathTimeout, PathTiming};
use ibal::io::IoRequest;
use ibal::multipath::{Multipath, SharedMultipath};

const PATHS: usize = 2;
const QD: u16 = 2;
const LIMIT: Duration = Duration::from_ms(100);
const MODE: PathTimeout = PathTimeout::Fixed(LIMIT);
/// The command bound: two ticks.
const BOUND: Duration = Duration::from_ms(200);

/// The probes' jitter: always its least (half the backoff), so that a probe may go one tick
/// after a give-up and the state stays a function of the moves.
fn jitter() -> rand::rngs::mock::StepRng {
    rand::rngs::mock::StepRng::new(0, 0)
}

/// The I/Os the layer above issues, in order: a write to block 0, a read of block 1, and a
/// newer write to block 0 (only once the first completed, as a filesystem does).
const SCRIPT: [(u64, u64, bool); 3] = [(1, 0, true), (2, 1, false), (3, 0, true)];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Msg {
    Cmd {
        tag: u64,
        id: u64,
        lba: u64,
        write: bool,
    },
    Abort {
        tag: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Rsp {
    tag: u64,
    aborts: bool,
}

/// One path: its adapter, its initiator's table, its target port.
#[derive(Debug, Clone)]
struct Path {
    table: SlotTable,
    /// The adapter's data path stopped (until its reset).
    dead: bool,
    /// Logged in (the queue knows it up).
    up: bool,
    /// The connection's generation: messages of an older one are dropped.
    conn: u8,
    inbox: VecDeque<(u8, Msg)>,
    /// Commands the target took and has not run: (connection, message).
    pending: Vec<(u8, Msg)>,
    outbox: VecDeque<(u8, Rsp)>,
    /// What its answers say: the real per-path timing the initiator keeps (the send
    /// times failover compares, the prompt and slow answers a probe is judged by).
    timing: PathTiming,
    /// The answers last told to the queue.
    told: (u64, u64),
}

#[derive(Debug, Clone)]
struct World {
    paths: [Path; PATHS],
    mp: Multipath,
    now: Instant,
    /// Next script entry to issue.
    next: usize,
    completed: Vec<u64>,
    /// Per block: the id of the write that last landed, and of the newest write completed.
    landed: [u64; 2],
    newest_done: [u64; 2],
    ticks: u8,
    deaths: u8,
    resets: u8,
    /// Commands given up past the bound to their own table: one, as deaths and resets.
    bounds: u8,
    violation: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Move {
    Issue,
    Send(usize),
    Intake(usize),
    Run(usize, usize),
    Deliver(usize),
    GiveUp(usize),
    /// A command past the command bound, given up to be sent again on its own path once
    /// its abort is answered or the connection is gone (a disk of one path does this).
    Bound(usize),
    /// The path sends what its own table holds queued (a command given up to itself, its
    /// abort answered).
    Pump(usize),
    Tick,
    Die(usize),
    Reset(usize),
    Login(usize),
}

fn io(i: usize) -> IoRequest {
    let (id, lba, write) = SCRIPT[i];
    IoRequest::stamped(id, lba, write)
}

impl World {
    fn new(mutant: Option<SlotMutant>) -> Self {
        let config = DiskConfig {
            path_timeout: MODE,
            queue_depth: QD,
            hold_capacity: 4,
            ..DiskConfig::default()
        };
        let load = hcabus_lab::stack::Load {
            iops: 0,
            n_blocks: 2,
            ..Default::default()
        };
        let max_outstanding = SharedMultipath::capacity(&config, PATHS);
        let workload = hcabus_lab::stack::workload(
            &load,
            config.lun_id,
            max_outstanding,
            hcabus::Instant::ZERO,
        );
        let mut mp = SharedMultipath::new("disk", config, PATHS, workload)
            .lock()
            .clone();
        let path = |_| {
            let mut table = SlotTable::new(usize::from(QD));
            if let Some(m) = mutant {
                table.plant(m);
            }
            Path {
                table,
                dead: false,
                up: true,
                conn: 0,
                inbox: VecDeque::new(),
                pending: Vec::new(),
                outbox: VecDeque::new(),
                timing: PathTiming::default(),
                told: (0, 0),
            }
        };
        for p in 0..PATHS {
            mp.path_is_up(p, Instant::ZERO);
        }
        World {
            paths: core::array::from_fn(path),
            mp,
            now: Instant::ZERO,
            next: 0,
            completed: Vec::new(),
            landed: [0; 2],
            newest_done: [0; 2],
            ticks: 0,
            deaths: 0,
            resets: 0,
            bounds: 0,
            violation: None,
        }
    }

    fn fingerprint(&self) -> u64 {
        let mut h = hcabus_tests::Fingerprint::default();
        for p in &self.paths {
            let _ = write!(h, "{:?}", p.table);
            (p.dead, p.up, p.conn, &p.inbox, &p.pending, &p.outbox).hash(&mut h);
            (p.timing, p.told).hash(&mut h);
        }
        self.mp.hash_state(&mut h);
        (
            self.now,
            self.next,
            &self.completed,
            self.landed,
            self.newest_done,
        )
            .hash(&mut h);
        (self.ticks, self.deaths, self.resets, self.bounds).hash(&mut h);
        h.finish()
    }

    fn can_send(&self, p: usize) -> bool {
        let t = &self.paths[p].table;
        t.has_room() && t.answers_owed() + (t.queued() as u32) < u32::from(QD)
    }

    /// What the client does after any change: tell the queue its answers, room and fences.
    fn sync(&mut self, p: usize) {
        let path = &mut self.paths[p];
        if let Some(at) = path.timing.freshest_prompt() {
            self.mp.note_answer(p, at);
        }
        let (prompt, slow) = path.timing.answers();
        if (prompt, slow) != path.told {
            let news = (prompt - path.told.0, slow - path.told.1);
            path.told = (prompt, slow);
            self.mp.path_answered(p, news, self.now, &mut jitter());
        }
        self.mp.set_fences(p, path.table.fenced_writes());
        let room = path.up && self.can_send(p);
        self.mp.note_room(p, room);
    }

    fn moves(&self) -> Vec<Move> {
        let mut m = Vec::new();
        if self.next < SCRIPT.len() {
            let (id, lba, write) = SCRIPT[self.next];
            // A block's next write waits for the last one to complete, as above a disk.
            let prev = SCRIPT[..self.next]
                .iter()
                .filter(|(_, l, w)| *l == lba && *w && write)
                .all(|(i, _, _)| self.completed.contains(i));
            if prev && id > 0 {
                m.push(Move::Issue);
            }
        }
        for p in 0..PATHS {
            let path = &self.paths[p];
            if path.up && self.mp.may_take(p, self.can_send(p)) {
                m.push(Move::Send(p));
            }
            if !path.inbox.is_empty() {
                m.push(Move::Intake(p));
            }
            for i in 0..path.pending.len() {
                m.push(Move::Run(p, i));
            }
            if !path.outbox.is_empty() {
                m.push(Move::Deliver(p));
            }
            let due = self
                .rule(p)
                .and_then(|r| path.table.next_overdue(&r))
                .is_some_and(|t| t <= self.now);
            if path.up && due {
                m.push(Move::GiveUp(p));
            }
            let bound_due = path
                .table
                .next_overdue(&Self::bound_rule())
                .is_some_and(|t| t <= self.now);
            if path.up && bound_due && self.bounds < 1 {
                m.push(Move::Bound(p));
            }
            let credit = path.table.answers_owed() < u32::from(QD);
            if path.up && path.table.queued() > 0 && credit {
                m.push(Move::Pump(p));
            }
            if !path.dead && self.deaths < 1 {
                m.push(Move::Die(p));
            }
            if self.resets < 1 && (path.up || path.dead) {
                m.push(Move::Reset(p));
            }
            if !path.up && !path.dead {
                m.push(Move::Login(p));
            }
        }
        if self.ticks < 2 {
            m.push(Move::Tick);
        }
        m
    }

    /// The initiator's rule for giving path `p`'s commands up, once another path answered
    /// (or past the bound).
    fn rule(&self, p: usize) -> Option<GiveUpRule> {
        Some(GiveUpRule {
            timeout: LIMIT,
            cap: LIMIT,
            overtaken_at: Some(self.mp.others_answered_at(p)?),
            own_answered_at: self.paths[p].timing.freshest_any(),
            overtaker_rtt: None,
            bound: BOUND,
            tested: false,
            check_wait: LIMIT,
        })
    }

    /// The command bound alone, as a disk of one path gives commands up.
    fn bound_rule() -> GiveUpRule {
        GiveUpRule {
            timeout: BOUND,
            cap: BOUND,
            overtaken_at: None,
            own_answered_at: None,
            overtaker_rtt: None,
            bound: BOUND,
            tested: false,
            check_wait: BOUND,
        }
    }

    fn fail(&mut self, why: String) {
        self.violation.get_or_insert(why);
    }

    fn apply(&mut self, mv: Move) {
        match mv {
            Move::Issue => {
                if self.mp.enqueue(io(self.next)).is_err() {
                    self.fail("the queue refused an I/O".into());
                }
                self.next += 1;
            }
            Move::Send(p) => self.send(p),
            Move::Intake(p) => self.intake(p),
            Move::Run(p, i) => self.run(p, i),
            Move::Deliver(p) => self.deliver(p),
            Move::GiveUp(p) => self.give_up(p),
            Move::Bound(p) => self.bound(p),
            Move::Pump(p) => self.pump(p),
            Move::Tick => {
                self.now = self.now + LIMIT;
                self.ticks += 1;
            }
            Move::Die(p) => {
                self.paths[p].dead = true;
                self.deaths += 1;
            }
            Move::Reset(p) => self.reset(p),
            Move::Login(p) => {
                self.paths[p].up = true;
                self.mp.path_is_up(p, self.now);
            }
        }
        for p in 0..PATHS {
            self.sync(p);
        }
        self.check_places();
    }

    fn send(&mut self, p: usize) {
        let Some(req) = self.mp.take(p) else {
            return;
        };
        self.paths[p].table.admit(req).expect("room was checked");
        self.pump(p);
    }

    /// Sends the command at the front of path `p`'s table.
    fn pump(&mut self, p: usize) {
        let path = &mut self.paths[p];
        let Some((_, tag, req)) = path.table.next_send() else {
            return;
        };
        path.table.sent(self.now);
        if !path.dead {
            let msg = Msg::Cmd {
                tag,
                id: req.id,
                lba: req.lba,
                write: req.write,
            };
            path.inbox.push_back((path.conn, msg));
        }
    }

    fn intake(&mut self, p: usize) {
        let path = &mut self.paths[p];
        let Some((conn, msg)) = path.inbox.pop_front() else {
            return;
        };
        if conn != path.conn {
            return;
        }
        match msg {
            Msg::Cmd { tag, .. } => {
                // The transport acknowledged it: the send completes.
                path.table.send_completed((tag >> 32) as usize);
                path.pending.push((conn, msg));
            }
            Msg::Abort { tag } => {
                let found = path
                    .pending
                    .iter()
                    .position(|(_, m)| matches!(m, Msg::Cmd { tag: t, .. } if *t == tag));
                if let Some(i) = found {
                    path.pending.remove(i);
                }
                path.outbox.push_back((conn, Rsp { tag, aborts: true }));
            }
        }
    }

    fn run(&mut self, p: usize, i: usize) {
        let (conn, msg) = self.paths[p].pending.remove(i);
        let Msg::Cmd {
            tag,
            id,
            lba,
            write,
        } = msg
        else {
            return;
        };
        if conn != self.paths[p].conn || self.paths[p].dead {
            // The connection is gone, or the adapter moves no data: nothing runs.
            return;
        }
        if !self.paths[p].table.holds(tag) {
            self.fail(format!(
                "the target ran {tag:#x} on path {p}, whose slot moved on"
            ));
        }
        if write {
            let b = lba as usize;
            if id < self.newest_done[b] {
                self.fail(format!(
                    "stale write {id} landed on block {lba} after write {} completed",
                    self.newest_done[b]
                ));
            }
            self.landed[b] = id;
        }
        self.paths[p]
            .outbox
            .push_back((conn, Rsp { tag, aborts: false }));
    }

    fn deliver(&mut self, p: usize) {
        let now = self.now;
        let path = &mut self.paths[p];
        let Some((conn, rsp)) = path.outbox.pop_front() else {
            return;
        };
        if conn != path.conn || path.dead {
            return;
        }
        if let Answer::Complete { req, sent_at, .. } = path.table.answer(rsp.tag, rsp.aborts) {
            path.timing.answered(MODE, sent_at, now);
            self.complete(req);
        }
    }

    fn complete(&mut self, req: IoRequest) {
        if self.completed.contains(&req.id) {
            self.fail(format!("I/O {} completed twice", req.id));
            return;
        }
        self.completed.push(req.id);
        if req.write {
            let b = req.lba as usize;
            self.newest_done[b] = self.newest_done[b].max(req.id);
        }
    }

    fn give_up(&mut self, p: usize) {
        let Some(rule) = self.rule(p) else {
            return;
        };
        let now = self.now;
        let path = &mut self.paths[p];
        let mut tags = Vec::new();
        let mp = &mut self.mp;
        let n = path.table.give_up_overdue(now, &rule, |tag, req| {
            tags.push(tag);
            mp.give_back(p, req);
            true
        });
        if n > 0 {
            mp.gave_up(p, n, now, &mut jitter());
        }
        if !path.dead {
            for tag in tags {
                path.inbox.push_back((path.conn, Msg::Abort { tag }));
            }
        }
    }

    fn bound(&mut self, p: usize) {
        self.bounds += 1;
        let now = self.now;
        let path = &mut self.paths[p];
        let mut tags = Vec::new();
        path.table
            .give_up_overdue(now, &Self::bound_rule(), |tag, _| {
                tags.push(tag);
                false
            });
        if !path.dead {
            for tag in tags {
                path.inbox.push_back((path.conn, Msg::Abort { tag }));
            }
        }
    }

    fn reset(&mut self, p: usize) {
        self.resets += 1;
        let path = &mut self.paths[p];
        path.table.take_back();
        while let Some(req) = path.table.pop_queued_back() {
            self.mp.give_back(p, req);
        }
        path.conn += 1;
        path.dead = false;
        path.up = false;
        path.pending.clear();
        self.mp.path_is_down(p, self.now, None);
    }

    /// Every issued I/O is in exactly one place.
    fn check_places(&mut self) {
        for &(id, _, _) in &SCRIPT[..self.next] {
            let places = usize::from(self.mp.tracks(id))
                + self.paths.iter().filter(|p| p.table.tracks(id)).count()
                + usize::from(self.completed.contains(&id));
            if places != 1 {
                self.fail(format!("I/O {id} is in {places} places"));
            }
        }
    }

    /// No move left: with both adapters alive, everything completed.
    fn check_end(&mut self) {
        if self.paths.iter().any(|p| p.dead) {
            return;
        }
        if self.next < SCRIPT.len() || self.completed.len() != SCRIPT.len() {
            let done = self.completed.clone();
            self.fail(format!("stuck: issued {}, completed {done:?}", self.next));
        }
    }
}

/// Breadth-first over every interleaving up to `depth` moves (so every state within that
/// many moves is reached, by its shortest path); the first violation with the moves that
/// led to it. Returns the states seen. A layer keeps its states as paths from the start,
/// replayed to expand them: a world and a trace apiece held 10 GB at depth 22.
fn explore(mutant: Option<SlotMutant>, depth: usize) -> (usize, Option<(String, Vec<Move>)>) {
    let first = World::new(mutant);
    let mut seen = HashSet::from([first.fingerprint()]);
    // Path nodes: (parent, move); a layer is a list of nodes.
    let mut nodes: Vec<(u32, Option<Move>)> = vec![(0, None)];
    let mut layer = vec![0u32];
    for d in 0..=depth {
        let mut next_layer = Vec::new();
        for node in layer {
            let trace = hcabus_tests::path_to(&nodes, node);
            let mut w = first.clone();
            for mv in &trace {
                w.apply(*mv);
            }
            let moves = w.moves();
            if moves.is_empty() {
                w.check_end();
                if let Some(v) = w.violation {
                    return (seen.len(), Some((v, trace)));
                }
                continue;
            }
            if d == depth {
                continue;
            }
            for mv in moves {
                let mut next = w.clone();
                next.apply(mv);
                if let Some(v) = next.violation.take() {
                    let mut t = trace.clone();
                    t.push(mv);
                    return (seen.len(), Some((v, t)));
                }
                if seen.insert(next.fingerprint()) {
                    nodes.push((node, Some(mv)));
                    next_layer.push(u32::try_from(nodes.len() - 1).expect("nodes fit u32"));
                }
            }
        }
        layer = next_layer;
    }
    (seen.len(), None)
}

fn depth() -> usize {
    std::env::var("HCABUS_FAILOVER_DEPTH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(22)
}

#[test]
fn every_interleaving_of_late_answers_aborts_and_resets_keeps_each_io_once() {
    let (states, found) = explore(None, depth());
    if let Some((why, trace)) = found {
        panic!("{why}\n  after: {trace:?}");
    }
    assert!(
        states > 10_000,
        "the search went somewhere: {states} states"
    );
    eprintln!("failover model: {states} states, no violation");
}

#[test]
fn each_planted_take_back_bug_is_caught() {
    for mutant in SlotMutant::ALL {
        let (_, found) = explore(Some(mutant), depth());
        let Some((why, trace)) = found else {
            panic!("{mutant:?} went unnoticed");
        };
        eprintln!("{mutant:?}: {why} after {} moves", trace.len());
    }
}
