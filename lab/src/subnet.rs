//! The subnet manager as a fleet's hosts see it (docs/design.md §11): its subnet
//! administrator (SA), and the ClientReregister a new master sets on every port during its
//! first sweep, upon which every IPoIB interface joins its multicast groups again and
//! re-resolves its paths through that SA. Shared by every host of a fleet, as the fabric's
//! one SM is; each host holds its own view ([`SharedSubnet::for_port`]), which knows where
//! the sweep reaches its ports.
//!
//! OpenSM sets ClientReregister in the PortInfo it sends each port in the first sweep of a
//! new master (`osm_lid_mgr.c`: `first_time_master_sweep`), port after port in the order it
//! walks the fabric, and the adapter raises it at once as an asynchronous event
//! (`IB_EVENT_CLIENT_REREGISTER`); the SA ignores every MAD until that first sweep is over
//! (`osm_sa_mad_ctrl.c`: "SM in first sweep. MAD ignored"). So a port reached early in a long
//! sweep joins into silence and retries under its backoff.
//!
//! The SA is a queue, as a real one is (docs/fleet.md gives each figure its source): a query
//! is a MAD that lands in the SM port's QP1 receive queue, or is dropped when that queue is
//! full (no receive buffer: the asker times out); the kernel moves each MAD off QP1 in turn
//! onto the SM's receive list, which holds so many; the SA serves them one after another. A
//! query that arrives when the SA's backlog has waited longer than `max_wait` is dropped
//! (OpenSM's `max_msg_fifo_timeout`; its BUSY answer is commented out), or answered BUSY by
//! an SA set to. An answer that comes after its asker's timeout is late: it cost the SA as
//! much as any and served nobody, which is how an SA behind its load falls further behind.
//! While no master is up nothing is answered, and what was queued when the master failed
//! is lost.
//!
//! Both stages serve in arrival order at a fixed cost, so a query's fate is known the moment
//! it arrives: the fleet steps its hosts in time order, so queries reach the SA in order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use hcabus::{Duration, Instant};
use ibal::ipoib::SaAnswer;

/// The most queries an SA may serve a second.
pub const MAX_SA_QUERIES_PER_SECOND: u32 = 1_000_000;
/// The deepest receive queue an SA's port may have (what it reserves).
pub const MAX_RECEIVE_QUEUE: u32 = 65_536;
/// The longest receive list an SA may have.
pub const MAX_BACKLOG: u32 = 1_000_000;

/// The SA's capacities and timers; the defaults are the real systems' (docs/fleet.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaSetup {
    /// Queries the SA serves a second, one after another (OpenSM: "approximately 100k
    /// packets per second", its developers' estimate).
    pub queries_per_second: u32,
    /// MADs the SM port's QP1 receive queue holds (ib_mad's `recv_queue_size`, 512).
    pub receive_queue: u32,
    /// How long the kernel takes to move one MAD off QP1 (no source: an estimate).
    pub receive: Duration,
    /// Queries the SM's receive list holds (ib_umad's `MAX_UMAD_RECV_LIST_SIZE`, 200,000),
    /// counted as every query taken in and not answered yet: on QP1, waiting, or served.
    pub backlog_limit: u32,
    /// A query arriving when the backlog has waited longer than this is dropped, or
    /// answered BUSY (OpenSM's `max_msg_fifo_timeout`, 10 s).
    pub max_wait: Duration,
    /// Whether the SA answers BUSY rather than drop (OpenSM drops).
    pub busy_answers: bool,
}

impl Default for SaSetup {
    fn default() -> Self {
        SaSetup {
            queries_per_second: 100_000,
            receive_queue: 512,
            receive: Duration::from_us(1),
            backlog_limit: 200_000,
            max_wait: Duration::from_ms(10_000),
            busy_answers: false,
        }
    }
}

/// An SA setup that cannot be: named by its key under `fleet.sm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SaError {
    #[error("sa_queries_per_second must be 1..={MAX_SA_QUERIES_PER_SECOND}, not {0}")]
    Rate(u32),
    #[error("sa_receive_queue must be 1..={MAX_RECEIVE_QUEUE}, not {0}")]
    ReceiveQueue(u32),
    #[error("sa_receive_us must be at most 1000000 (a MAD a second), not {0}")]
    Receive(u64),
    #[error("sa_backlog_limit must be 1..={MAX_BACKLOG}, not {0}")]
    Backlog(u32),
}

impl SaError {
    /// The key under `fleet.sm` it names.
    pub fn key(&self) -> &'static str {
        match self {
            SaError::Rate(_) => "sa_queries_per_second",
            SaError::ReceiveQueue(_) => "sa_receive_queue",
            SaError::Receive(_) => "sa_receive_us",
            SaError::Backlog(_) => "sa_backlog_limit",
        }
    }
}

impl SaSetup {
    pub fn check(&self) -> Result<(), SaError> {
        if !(1..=MAX_SA_QUERIES_PER_SECOND).contains(&self.queries_per_second) {
            return Err(SaError::Rate(self.queries_per_second));
        }
        if !(1..=MAX_RECEIVE_QUEUE).contains(&self.receive_queue) {
            return Err(SaError::ReceiveQueue(self.receive_queue));
        }
        if self.receive.as_us() > 1_000_000 {
            return Err(SaError::Receive(self.receive.as_us()));
        }
        if !(1..=MAX_BACKLOG).contains(&self.backlog_limit) {
            return Err(SaError::Backlog(self.backlog_limit));
        }
        Ok(())
    }

    /// What one query costs the SA to serve, in nanoseconds: a rate that does not divide a
    /// second into whole microseconds is served at that rate still.
    pub fn service_ns(&self) -> u64 {
        (1_000_000_000 / u64::from(self.queries_per_second.max(1))).max(1)
    }
}

/// What the SA did with its queries, for the fleet's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaStats {
    /// Answered within their asker's timeout.
    pub answered: u64,
    /// Answered after it: served for nobody (the SA cannot tell; the fleet can).
    pub late: u64,
    /// Answered BUSY (an SA set to), or dropped: the backlog had waited too long.
    pub busy: u64,
    pub dropped_old: u64,
    /// Dropped at a full QP1 receive queue, or a full receive list.
    pub dropped_full: u64,
    pub dropped_backlog: u64,
    /// Dropped while no master served the SA.
    pub dropped_away: u64,
    /// Queued when the master failed: never answered.
    pub lost_in_failover: u64,
    /// The most answers (in time or late) sent within any one second.
    pub peak_per_second: u32,
    /// The longest any query waited for its answer (from its arrival), and the most queries
    /// taken in and not answered at once.
    pub peak_wait: Duration,
    pub peak_backlog: u64,
}

/// A query taken in and not answered yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    arrived: Instant,
    /// When the SA began serving it.
    started: Instant,
    /// When its answer goes, and whether that is after its asker's timeout.
    at: Instant,
    late: bool,
}

/// The SA's queue.
#[derive(Debug)]
struct Sa {
    setup: SaSetup,
    service_ns: u64,
    /// When the receiver will have moved every MAD now on QP1, and when (in nanoseconds)
    /// the SA will have served every query it took.
    received_at: Instant,
    served_ns: u64,
    /// Until when no master answers.
    away_until: Instant,
    /// Each instant a master failed, for [`SharedSubnet::survived`]: a handful a run.
    failures: Vec<Instant>,
    /// The answers not sent yet, in the order they will be (the queue's own order).
    pending: VecDeque<Pending>,
    /// The answers of the last second (reserved at the rate), for the peak.
    window: VecDeque<Instant>,
    stats: SaStats,
}

impl Sa {
    fn query(&mut self, now: Instant, timeout: Duration) -> SaAnswer {
        if now < self.away_until {
            self.stats.dropped_away += 1;
            return SaAnswer::Lost;
        }
        let receive = self.setup.receive.as_us().max(1);
        let on_qp1 = self
            .received_at
            .saturating_since(now)
            .as_us()
            .div_ceil(receive);
        if on_qp1 >= u64::from(self.setup.receive_queue) {
            self.stats.dropped_full += 1;
            return SaAnswer::Lost;
        }
        self.received_at = self.received_at.max(now) + self.setup.receive;
        let taken = self.received_at;
        self.settle(now);
        if self.pending.len() >= self.setup.backlog_limit as usize {
            self.stats.dropped_backlog += 1;
            return SaAnswer::Lost;
        }
        // OpenSM looks at how long the query it is serving had waited, and only with more
        // than one queued.
        let serving_waited = self
            .pending
            .front()
            .map_or(Duration::ZERO, |p| p.started.saturating_since(p.arrived));
        if self.pending.len() > 1 && serving_waited > self.setup.max_wait {
            if self.setup.busy_answers {
                self.stats.busy += 1;
                return SaAnswer::Busy(taken);
            }
            self.stats.dropped_old += 1;
            return SaAnswer::Lost;
        }
        let start_ns = self.served_ns.max(taken.as_us() * 1_000);
        self.served_ns = start_ns + self.service_ns;
        let at = Instant::from_us(self.served_ns.div_ceil(1_000));
        self.pending.push_back(Pending {
            arrived: now,
            started: Instant::from_us(start_ns / 1_000),
            at,
            late: at > now + timeout,
        });
        // Every query taken in is pending until answered, on QP1 or in the SA's queue.
        let backlog = self.pending.len() as u64;
        self.stats.peak_backlog = self.stats.peak_backlog.max(backlog);
        self.stats.peak_wait = self.stats.peak_wait.max(at.saturating_since(now));
        SaAnswer::At(at)
    }

    /// Sends the answers due by `now`: counted, in time or late.
    fn settle(&mut self, now: Instant) {
        while let Some(&Pending { at, late, .. }) = self.pending.front().filter(|p| p.at <= now) {
            self.pending.pop_front();
            if late {
                self.stats.late += 1;
            } else {
                self.stats.answered += 1;
            }
            let second_before = at.as_us().checked_sub(1_000_000).map(Instant::from_us);
            while self
                .window
                .front()
                .is_some_and(|&t| Some(t) <= second_before)
            {
                self.window.pop_front();
            }
            self.window.push_back(at);
            let in_second = u32::try_from(self.window.len()).unwrap_or(u32::MAX);
            self.stats.peak_per_second = self.stats.peak_per_second.max(in_second);
        }
    }

    /// The master fails at `now` and none answers until `now + for_`: what was queued is
    /// lost (its askers time out).
    fn away(&mut self, now: Instant, for_: Duration) {
        self.settle(now);
        self.stats.lost_in_failover += self.pending.len() as u64;
        self.pending.clear();
        self.away_until = self.away_until.max(now + for_);
        self.received_at = self.received_at.min(now);
        self.served_ns = self.served_ns.min(now.as_us() * 1_000);
        self.failures.push(now);
    }
}

/// A new master's ClientReregisters: the port of order `k` gets its own at `first +
/// per_port x k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reregister {
    first: Instant,
    per_port: Duration,
}

impl Reregister {
    fn at(&self, order: u32) -> Instant {
        self.first + Duration::from_us(self.per_port.as_us().saturating_mul(u64::from(order)))
    }
}

/// The fabric's SM and SA, shared by every host; a clone for each host is its view
/// ([`SharedSubnet::for_port`]).
#[derive(Debug, Clone)]
pub struct SharedSubnet {
    sa: Arc<Mutex<Sa>>,
    /// Each ClientReregister a master set on every port, in order.
    reregisters: Arc<Mutex<Vec<Reregister>>>,
    /// Where the sweep reaches this view's ports (a fleet's host index; 0 for the fabric's
    /// own view).
    order: u32,
}

impl SharedSubnet {
    /// An SA of `setup`, refused by its key when it cannot be.
    pub fn new(setup: SaSetup) -> Result<Self, SaError> {
        setup.check()?;
        let sa = Sa {
            setup,
            service_ns: setup.service_ns(),
            received_at: Instant::ZERO,
            served_ns: 0,
            away_until: Instant::ZERO,
            failures: Vec::new(),
            pending: VecDeque::new(),
            window: VecDeque::with_capacity(setup.queries_per_second as usize),
            stats: SaStats::default(),
        };
        Ok(SharedSubnet {
            sa: Arc::new(Mutex::new(sa)),
            reregisters: Arc::new(Mutex::new(Vec::new())),
            order: 0,
        })
    }

    /// The view of the host whose ports the sweep reaches `order`th.
    pub fn for_port(&self, order: u32) -> Self {
        SharedSubnet {
            order,
            ..self.clone()
        }
    }

    fn reregisters(&self) -> MutexGuard<'_, Vec<Reregister>> {
        self.reregisters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The SA; a poisoned lock is taken anyway (no query leaves it half changed).
    fn sa(&self) -> MutexGuard<'_, Sa> {
        self.sa.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A query to the SA at `now` from an asker that waits `timeout` for its answer.
    pub fn query(&self, now: Instant, timeout: Duration) -> SaAnswer {
        // The SA answers by the queries before: on a fleet of several threads, those of
        // every host stepped before this one go first (`turns`).
        crate::turns::wait_turn();
        self.sa().query(now, timeout)
    }

    /// Whether an answer sent for a query of `sent` at `at` reached its asker: no master
    /// failed in between.
    pub fn survived(&self, sent: Instant, at: Instant) -> bool {
        !self.sa().failures.iter().any(|&f| sent <= f && f < at)
    }

    /// No master answers from `now` for `for_`: what was queued is lost.
    pub fn away(&self, now: Instant, for_: Duration) {
        self.sa().away(now, for_);
    }

    /// A new master sets ClientReregister on every port in its sweep: the port of order `k`
    /// at `first + per_port x k`. Set between a fleet's steps (at the failover), never
    /// while hosts run: every view reads the list as it stands.
    pub fn reregister(&self, first: Instant, per_port: Duration) {
        let mut r = self.reregisters();
        // In order for every port: a port's count by `now` and its next instant agree.
        let first = r.last().map_or(first, |l| first.max(l.first));
        let per_port = r.last().map_or(per_port, |l| per_port.max(l.per_port));
        r.push(Reregister { first, per_port });
    }

    /// How many ClientReregisters this view's ports got by `now`: a port that answered
    /// fewer must join again.
    pub fn reregistrations(&self, now: Instant) -> u32 {
        let r = self.reregisters();
        r.iter().filter(|r| r.at(self.order) <= now).count() as u32
    }

    /// When this view's ports get their `n`th ClientReregister (from 0), if a master set
    /// one: an asker waits for it as for a timer.
    pub fn reregister_at(&self, n: u32) -> Option<Instant> {
        let r = self.reregisters();
        r.get(n as usize).map(|r| r.at(self.order))
    }

    /// How many times a master set ClientReregister on every port.
    pub fn reregister_sweeps(&self) -> u32 {
        self.reregisters().len() as u32
    }

    /// What the SA answered and dropped by `now`, and how many answers are still to come.
    pub fn stats(&self, now: Instant) -> (SaStats, u64) {
        let mut sa = self.sa();
        sa.settle(now);
        (sa.stats, sa.pending.len() as u64)
    }
}

impl ibal::ipoib::SubnetAdmin for SharedSubnet {
    fn query(&self, now: Instant, timeout: Duration) -> SaAnswer {
        SharedSubnet::query(self, now, timeout)
    }

    fn survived(&self, sent: Instant, at: Instant) -> bool {
        SharedSubnet::survived(self, sent, at)
    }

    fn reregistrations(&self, now: Instant) -> u32 {
        SharedSubnet::reregistrations(self, now)
    }

    fn reregister_at(&self, n: u32) -> Option<Instant> {
        SharedSubnet::reregister_at(self, n)
    }
}

#[cfg(test)]
mod tests;
