//! IPoIB's joins through the subnet administrator (docs/design.md §11). Once its queue pair
//! is up, and again whenever the subnet manager sets ClientReregister (a new master after a
//! handover), an interface joins its multicast groups (an MCMemberRecord each) and resolves
//! its peer's path (a PathRecord) through the SA. The SA serves its queries in turn: an
//! answer may come late, BUSY, or not at all (no master, no room); an unanswered query times
//! out.
//!
//! What a timeout means is the point: an SA that is slow or away is not a hung adapter. The
//! shipped interface retries the queries still unanswered under a backoff with jitter whose
//! cap keeps a fabric's demand under what a slow SA serves, and never asks for a reset. A
//! host may give it a rule of its own ([`OnSaTimeout::Rule`]): the lab's naive one (the 2008 Windows IPoIB) reports itself hung at the first timeout, and
//! NDIS resets the adapter: the reset-storm cascade a fleet must never see.

use std::sync::Arc;
use std::vec::Vec;

use hcabus::{Duration, Instant};
use rand::Rng;

use crate::access::FabricBus;
use crate::retry::sa_retry_wait;

/// No query waits longer than this for its answer.
pub const SA_TIMEOUT_CAP: Duration = Duration::from_ms(16_000);

/// What became of a query to the SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaAnswer {
    /// Its answer reaches the asker at this instant (after the asker's timeout: late, and
    /// as good as none).
    At(Instant),
    /// The SA answered BUSY at this instant: too far behind to serve it now.
    Busy(Instant),
    /// Never answered (no master, no room on the SA's queue pair): the asker times out.
    Lost,
}

/// The subnet administrator as an interface's joins see it. On a fabric the queries are MADs
/// to the SA's QP1; in the simulator a fabric's one SM answers them (the lab's subnet, shared
/// by every host of a fleet).
pub trait SubnetAdmin: core::fmt::Debug + Send + Sync {
    /// A query (an MCMemberRecord join or a PathRecord) sent at `now` by an asker that waits
    /// `timeout` for its answer.
    fn query(&self, now: Instant, timeout: Duration) -> SaAnswer;
    /// Whether an answer the SA sent at `at` to a query of `sent` reached the asker: no
    /// master failed in between and took it with it.
    fn survived(&self, sent: Instant, at: Instant) -> bool;
    /// How many times a master has set ClientReregister on the port by `now`: a count the
    /// interface has not answered with a join means join again.
    fn reregistrations(&self, now: Instant) -> u32;
    /// When the port gets its `n`th ClientReregister (from 0), if a master set one. The
    /// adapter raises it as an asynchronous event, so the interface is woken then rather
    /// than noticing at its next packet.
    fn reregister_at(&self, n: u32) -> Option<Instant> {
        let _ = n;
        None
    }
}

/// What an interface does when an SA query times out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnSaTimeout {
    /// Retry the unanswered queries under the backoff: the shipped behaviour.
    #[default]
    Retry,
    /// A rule a host supplies instead.
    Rule(SaTimeoutRule),
}

/// A host's own rule for an SA timeout: a name for reports, and whether the interface takes
/// its `n`th timeout (from 1) for a hung adapter and asks for the adapter's reset, rather
/// than retrying.
#[derive(Debug, Clone, Copy)]
pub struct SaTimeoutRule {
    pub name: &'static str,
    pub hung_at: fn(sa_timeouts: u32) -> bool,
}

/// Two rules are the same when their names are: a function's address is no identity.
impl PartialEq for SaTimeoutRule {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for SaTimeoutRule {}

impl OnSaTimeout {
    /// Whether the interface takes its `sa_timeouts`th timeout for a hung adapter.
    fn hung_at(self, sa_timeouts: u32) -> bool {
        match self {
            OnSaTimeout::Retry => false,
            OnSaTimeout::Rule(r) => (r.hung_at)(sa_timeouts),
        }
    }
}

/// Where the interface's queries stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Every query answered (or none asked yet).
    Joined,
    /// The unanswered queries go (again) at this instant.
    QueryAt(Instant),
    /// Queries sent at `sent` are out: every one answered (some BUSY) by `at`, or, with
    /// `lost`, some never will be and they time out at `at`.
    Waiting(Batch),
    /// A timeout taken for a hung adapter: nothing more until the QP is up again.
    Hung,
}

/// The queries an interface sent together, and what the SA made of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Batch {
    sent: Instant,
    /// How long its queries wait for their answers.
    timeout: Duration,
    /// When the batch is settled: its last answer, or its timeout when one was lost.
    at: Instant,
    busy: u8,
    lost: bool,
}

/// What a look at the interface's queries found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joins {
    /// Joined, or still waiting.
    Fine,
    /// A query timed out and the interface takes that for a hung adapter.
    Hung,
}

/// The counts a fleet reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RejoinStats {
    /// Times the interface joined its groups through the SA (after a QP came up or a
    /// ClientReregister).
    pub joins_started: u32,
    pub joins_done: u32,
    pub queries_answered: u64,
    pub sa_timeouts: u32,
    /// Batches the SA answered (in part) BUSY: retried under the backoff, no timeout.
    pub sa_busy: u32,
    /// Adapter resets the interface asked for because an SA query timed out.
    pub resets_asked: u32,
}

/// An interface's joins through the SA.
#[derive(Debug, Clone)]
pub struct Rejoin {
    subnet: Arc<dyn SubnetAdmin>,
    on_timeout: OnSaTimeout,
    timeout: Duration,
    /// Reregistrations already answered by a join.
    seen: u32,
    /// Queries not yet answered.
    pending: u8,
    phase: Phase,
    /// Batches failed (timed out, BUSY) in a row, and timed out in a row.
    failures: u32,
    timeouts_in_row: u32,
    /// When each answer of the batch out came, of those that came in time.
    answers: Vec<Instant>,
    stats: RejoinStats,
}

impl Rejoin {
    pub fn new(subnet: Arc<dyn SubnetAdmin>, on_timeout: OnSaTimeout, timeout: Duration) -> Self {
        // Those set before time began; its start syncs it again once its queue pair is up
        // (a host that powers on late has missed every one before).
        let seen = subnet.reregistrations(Instant::ZERO);
        Rejoin {
            subnet,
            on_timeout,
            timeout,
            seen,
            pending: 0,
            phase: Phase::Joined,
            failures: 0,
            timeouts_in_row: 0,
            answers: Vec::new(),
            stats: RejoinStats::default(),
        }
    }

    /// Joins `queries` groups and paths from `now` (a QP just came up).
    pub fn start(&mut self, now: Instant, queries: u8) {
        self.seen = self.subnet.reregistrations(now);
        self.pending = queries;
        self.answers.reserve(usize::from(queries));
        self.phase = Phase::QueryAt(now);
        self.failures = 0;
        self.timeouts_in_row = 0;
        self.stats.joins_started += 1;
    }

    /// The QP is gone (a reset, a port down): nothing to join until it is back.
    pub fn stop(&mut self) {
        self.pending = 0;
        self.answers.clear();
        self.phase = Phase::Joined;
    }

    /// Every group joined and path resolved.
    pub fn joined(&self) -> bool {
        self.phase == Phase::Joined
    }

    pub fn stats(&self) -> &RejoinStats {
        &self.stats
    }

    /// When the queries next need a look.
    pub fn due(&self) -> Option<Instant> {
        match self.phase {
            Phase::Joined | Phase::Hung => None,
            Phase::QueryAt(t) => Some(t),
            Phase::Waiting(b) => Some(b.at),
        }
    }

    /// When the next ClientReregister it has not answered reaches its port: an interface
    /// with its queue pair up is woken for it (the adapter's event).
    pub fn reregister_due(&self) -> Option<Instant> {
        self.subnet.reregister_at(self.seen)
    }

    /// The reset a hung interface asked for was refused (the bus throttles it, the device is
    /// Failed): it asks again at its next timeout, the unanswered queries retried meanwhile.
    pub fn reset_refused(&mut self, now: Instant, rng: &mut impl Rng) {
        if self.phase == Phase::Hung {
            self.failures = self.failures.saturating_add(1);
            self.phase = Phase::QueryAt(now + sa_retry_wait(self.failures, rng));
        }
    }

    /// A look at `now` by an interface whose QP is up (`up`) and that joins `queries`: a
    /// ClientReregister it has not answered starts a join; queries due go to the SA; a
    /// timeout is retried, or taken for a hung adapter.
    pub fn run(&mut self, now: Instant, up: bool, queries: u8, rng: &mut impl Rng) -> Joins {
        if up && self.subnet.reregistrations(now) != self.seen {
            log::info!("[{now}] ClientReregister: joining the groups again through the SA");
            self.start(now, queries);
        }
        match self.phase {
            Phase::QueryAt(t) if t <= now => {
                self.phase = Phase::Waiting(self.send(now));
                Joins::Fine
            }
            Phase::Waiting(b) if b.at <= now => self.settle(b, now, rng),
            _ => Joins::Fine,
        }
    }

    /// How long the next batch waits for its answers: the configured timeout, doubled at
    /// each timeout in a row up to [`SA_TIMEOUT_CAP`]. An SA behind its load answers late,
    /// and a late answer is one it served for nobody; waiting longer for it (as TCP backs
    /// its retransmission timer off) turns that work into a join.
    fn timeout(&self) -> Duration {
        let shift = self.timeouts_in_row.min(16);
        let us = self.timeout.as_us().saturating_mul(1 << shift);
        Duration::from_us(us.min(SA_TIMEOUT_CAP.as_us().max(self.timeout.as_us())))
    }

    /// Sends every unanswered query at `now`; the instants of the answers that come in time
    /// are kept for [`Rejoin::settle`].
    fn send(&mut self, now: Instant) -> Batch {
        let timeout = self.timeout();
        let mut b = Batch {
            timeout,
            sent: now,
            at: now,
            busy: 0,
            lost: false,
        };
        self.answers.clear();
        for _ in 0..self.pending {
            match self.subnet.query(now, timeout) {
                SaAnswer::At(at) if at <= now + timeout => {
                    self.answers.push(at);
                    b.at = b.at.max(at);
                }
                SaAnswer::Busy(at) => {
                    b.busy += 1;
                    b.at = b.at.max(at);
                }
                SaAnswer::At(_) | SaAnswer::Lost => b.lost = true,
            }
        }
        if b.lost {
            b.at = now + timeout;
        }
        b
    }

    /// The batch `b` is settled at `now`: joined, or retried (after a timeout, or BUSY).
    fn settle(&mut self, b: Batch, now: Instant, rng: &mut impl Rng) -> Joins {
        // A master that failed meanwhile took the answers still queued with it; those it
        // sent before are the asker's. One taken means waiting out the whole timeout.
        let (sent, subnet) = (b.sent, &self.subnet);
        let survived = self.answers.iter().filter(|&&at| subnet.survived(sent, at));
        let answered = u8::try_from(survived.count()).unwrap_or(u8::MAX);
        let taken = usize::from(answered) < self.answers.len();
        if taken && !b.lost {
            self.phase = Phase::Waiting(Batch {
                at: b.sent + b.timeout,
                lost: true,
                ..b
            });
            return Joins::Fine;
        }
        self.answers.clear();
        self.pending -= answered.min(self.pending);
        self.stats.queries_answered += u64::from(answered);
        if self.pending == 0 {
            self.stats.joins_done += 1;
            self.failures = 0;
            self.timeouts_in_row = 0;
            self.phase = Phase::Joined;
            return Joins::Fine;
        }
        if b.lost {
            self.stats.sa_timeouts += 1;
            self.timeouts_in_row = self.timeouts_in_row.saturating_add(1);
            if self.on_timeout.hung_at(self.stats.sa_timeouts) {
                self.phase = Phase::Hung;
                self.stats.resets_asked += 1;
                return Joins::Hung;
            }
        } else {
            // Every query answered, some BUSY: the row of timeouts is broken.
            self.stats.sa_busy += 1;
            self.timeouts_in_row = 0;
        }
        // Unbounded in time (the interface must come back by itself), bounded in rate by
        // the backoff's cap; each timeout and BUSY is counted.
        self.failures = self.failures.saturating_add(1);
        self.phase = Phase::QueryAt(now + sa_retry_wait(self.failures, rng));
        Joins::Fine
    }
}

impl super::IpoibClient {
    /// The interface on a fleet's fabric: its joins go through `subnet`'s SA, again at
    /// every ClientReregister.
    pub fn with_subnet(mut self, subnet: Arc<dyn SubnetAdmin>) -> Self {
        let (timeout, on) = (self.config.sa_timeout, self.config.on_sa_timeout);
        self.rejoin = Some(Rejoin::new(subnet, on, timeout));
        self
    }

    /// Whether its groups are joined and its path resolved through the SA (always, with no
    /// SA modelled).
    pub fn sa_joined(&self) -> bool {
        self.rejoin.as_ref().is_none_or(Rejoin::joined)
    }

    /// Its joins through the SA, if it has one.
    pub fn rejoin_stats(&self) -> Option<&RejoinStats> {
        self.rejoin.as_ref().map(Rejoin::stats)
    }

    /// The SA queries of one join: the broadcast group, each extra group, the peer's path.
    pub(super) fn sa_queries(&self) -> u8 {
        self.config.groups + 2
    }

    /// Its joins through the SA: a timeout the naive interface takes for a hung adapter
    /// asks for the adapter's reset, as NDIS resets a miniport that reports itself hung.
    pub(super) fn run_joins<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let (up, queries, now) = (self.res.qp.is_some(), self.sa_queries(), bus.now());
        let Some(r) = &mut self.rejoin else {
            return;
        };
        if r.run(now, up, queries, bus.rng()) != Joins::Hung {
            return;
        }
        let asked = self.id.map(|id| bus.reset_request(id));
        match asked {
            Some(Ok(epoch)) => log::warn!(
                "{}: an SA query timed out: reported hung, the adapter is reset ({epoch})",
                self.desc.name
            ),
            refused => {
                self.refusals += 1;
                log::warn!("{}: hung, but no reset: {refused:?}", self.desc.name);
                if let Some(r) = &mut self.rejoin {
                    r.reset_refused(now, bus.rng());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::Mutex;

    fn at(ms: u64) -> Instant {
        Instant::from_ms(ms)
    }

    /// An SA that answers `per_second` queries in each whole second of virtual time and
    /// none while it is away.
    #[derive(Debug)]
    struct FakeSa {
        per_second: u32,
        /// The second being answered in, and how many were answered in it.
        answered: Mutex<(u64, u32)>,
        away_until: Mutex<Instant>,
        reregistered: AtomicU32,
        /// Past its rate it answers BUSY rather than nothing.
        busy: AtomicBool,
        /// How long an answer takes, and when a master failed.
        delay: Mutex<Duration>,
        failed_at: Mutex<Option<Instant>>,
        spread: AtomicBool,
        asked: AtomicU32,
    }

    impl FakeSa {
        fn new(per_second: u32) -> Arc<Self> {
            Arc::new(FakeSa {
                per_second,
                answered: Mutex::new((0, 0)),
                away_until: Mutex::new(Instant::ZERO),
                reregistered: AtomicU32::new(0),
                busy: AtomicBool::new(false),
                delay: Mutex::new(Duration::ZERO),
                failed_at: Mutex::new(None),
                spread: AtomicBool::new(false),
                asked: AtomicU32::new(0),
            })
        }
    }

    impl SubnetAdmin for FakeSa {
        fn query(&self, now: Instant, _timeout: Duration) -> SaAnswer {
            if now < *self.away_until.lock().expect("not poisoned") {
                return SaAnswer::Lost;
            }
            let mut a = self.answered.lock().expect("not poisoned");
            let second = now.as_ms() / 1_000;
            if a.0 != second {
                *a = (second, 0);
            }
            let answer = a.1 < self.per_second;
            a.1 += u32::from(answer);
            // With `spread`, the kth answer comes k delays after its query.
            let k = if self.spread.load(Ordering::Relaxed) {
                u64::from(self.asked.fetch_add(1, Ordering::Relaxed)) + 1
            } else {
                1
            };
            let delay = self.delay.lock().expect("not poisoned").as_us() * k;
            match (answer, self.busy.load(Ordering::Relaxed)) {
                (true, _) => SaAnswer::At(now + Duration::from_us(delay)),
                (false, true) => SaAnswer::Busy(now),
                (false, false) => SaAnswer::Lost,
            }
        }

        fn survived(&self, sent: Instant, at: Instant) -> bool {
            let f = *self.failed_at.lock().expect("not poisoned");
            !f.is_some_and(|f| sent <= f && f < at)
        }

        fn reregistrations(&self, _now: Instant) -> u32 {
            self.reregistered.load(Ordering::Relaxed)
        }
    }

    /// Joins through an SA that answers two queries a second: four queries take two
    /// seconds of retries, then a ClientReregister starts them again.
    #[test]
    fn queries_the_sa_drops_are_retried_until_every_one_is_answered() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let subnet = FakeSa::new(2);
        let mut r = Rejoin::new(subnet.clone(), OnSaTimeout::Retry, Duration::from_ms(100));
        r.start(at(0), 4);
        let mut now = at(0);
        while let Some(t) = r.due() {
            now = t;
            assert_eq!(r.run(now, true, 4, &mut rng), Joins::Fine);
            assert!(now < at(10_000), "bounded");
        }
        assert!(r.joined() && now >= at(1_000), "{now}");
        let s = *r.stats();
        assert_eq!(
            (s.queries_answered, s.joins_done, s.resets_asked),
            (4, 1, 0)
        );
        assert!(s.sa_timeouts > 0);
        subnet.reregistered.fetch_add(1, Ordering::Relaxed);
        r.run(at(20_000), true, 4, &mut rng);
        assert!(!r.joined());
        assert_eq!(r.stats().joins_started, 2);
    }

    /// An interface whose rule takes every timeout for a hung adapter (the lab's naive one)
    /// asks for a reset at the first.
    #[test]
    fn the_naive_interface_asks_for_a_reset_at_the_first_timeout() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let subnet = FakeSa::new(10);
        *subnet.away_until.lock().expect("not poisoned") = at(5_000);
        let naive = OnSaTimeout::Rule(SaTimeoutRule {
            name: "naive",
            hung_at: |_| true,
        });
        let mut r = Rejoin::new(subnet, naive, Duration::from_ms(100));
        r.start(at(0), 3);
        assert_eq!(r.run(at(0), true, 3, &mut rng), Joins::Fine);
        assert_eq!(r.due(), Some(at(100)));
        assert_eq!(r.run(at(100), true, 3, &mut rng), Joins::Hung);
        assert_eq!(
            (r.stats().resets_asked, r.due(), r.joined()),
            (1, None, false)
        );
        // The reset is refused (throttled, or the device Failed): it does not stay hung, it
        // retries and takes its next timeout for a hang again.
        r.reset_refused(at(100), &mut rng);
        let again = r.due().expect("retrying");
        assert!(again > at(100) && !r.joined());
        assert_eq!(r.run(again, true, 3, &mut rng), Joins::Fine);
        let timeout = r.due().expect("waiting for answers");
        assert_eq!(r.run(timeout, true, 3, &mut rng), Joins::Hung);
        assert_eq!(r.stats().resets_asked, 2);
    }

    /// An SA that answers BUSY past its rate: the interface retries under its backoff and
    /// counts no timeout (a BUSY is an answer), so even the naive rule asks for no reset.
    #[test]
    fn a_busy_answer_is_retried_and_is_no_timeout() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let subnet = FakeSa::new(1);
        subnet.busy.store(true, Ordering::Relaxed);
        let naive = OnSaTimeout::Rule(SaTimeoutRule {
            name: "naive",
            hung_at: |_| true,
        });
        let mut r = Rejoin::new(subnet, naive, Duration::from_ms(100));
        r.start(at(0), 3);
        let mut now = at(0);
        while let Some(t) = r.due() {
            now = t;
            assert_eq!(r.run(now, true, 3, &mut rng), Joins::Fine);
            assert!(now < at(60_000), "bounded");
        }
        let s = *r.stats();
        assert!(r.joined() && now >= at(2_000), "{now}");
        assert_eq!(
            (s.sa_timeouts, s.resets_asked, s.queries_answered),
            (0, 0, 3)
        );
        assert!(s.sa_busy >= 2, "{s:?}");
    }

    /// Answers take 30 ms: the interface is joined when the last arrives, not when it asked;
    /// a master that fails while they are queued takes them with it, and the interface
    /// waits out its timeout before it asks again.
    #[test]
    fn joined_at_the_last_answer_and_answers_a_failed_master_held_are_waited_out() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let subnet = FakeSa::new(100);
        *subnet.delay.lock().expect("not poisoned") = Duration::from_ms(30);
        let mut r = Rejoin::new(subnet.clone(), OnSaTimeout::Retry, Duration::from_ms(100));
        r.start(at(0), 2);
        r.run(at(0), true, 2, &mut rng);
        assert_eq!(r.due(), Some(at(30)));
        assert!(!r.joined());
        r.run(at(30), true, 2, &mut rng);
        assert!(r.joined());
        r.start(at(1_000), 2);
        r.run(at(1_000), true, 2, &mut rng);
        *subnet.failed_at.lock().expect("not poisoned") = Some(at(1_010));
        r.run(at(1_030), true, 2, &mut rng);
        assert_eq!(r.due(), Some(at(1_100)), "waits its timeout");
        r.run(at(1_100), true, 2, &mut rng);
        assert_eq!(r.stats().sa_timeouts, 1);
        assert!(!r.joined() && r.due().is_some_and(|t| t > at(1_100)));
    }

    /// A master that fails between a batch's answers took only those after it: the ones
    /// before reached the interface and count, the rest are asked again after the timeout.
    #[test]
    fn answers_sent_before_a_master_failed_are_kept() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let subnet = FakeSa::new(1_000);
        *subnet.delay.lock().expect("not poisoned") = Duration::from_ms(30);
        subnet.spread.store(true, Ordering::Relaxed);
        let mut r = Rejoin::new(subnet.clone(), OnSaTimeout::Retry, Duration::from_ms(100));
        r.start(at(0), 2);
        r.run(at(0), true, 2, &mut rng);
        // Answers at 30 and 60 ms; the master fails at 45 ms: the first went.
        assert_eq!(r.due(), Some(at(60)));
        *subnet.failed_at.lock().expect("not poisoned") = Some(at(45));
        r.run(at(60), true, 2, &mut rng);
        assert_eq!(r.due(), Some(at(100)), "the second is waited out");
        r.run(at(100), true, 2, &mut rng);
        let s = *r.stats();
        assert_eq!((s.queries_answered, s.sa_timeouts), (1, 1));
        assert!(!r.joined());
    }

    /// Each timeout in a row doubles how long the next batch waits (100, 200, 400 ms); a
    /// join starts the row over.
    #[test]
    fn the_timeout_doubles_at_each_timeout_in_a_row_and_a_join_resets_it() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let subnet = FakeSa::new(1_000);
        *subnet.away_until.lock().expect("not poisoned") = at(100_000);
        let mut r = Rejoin::new(subnet.clone(), OnSaTimeout::Retry, Duration::from_ms(100));
        r.start(at(0), 1);
        let mut waits = Vec::new();
        for _ in 0..3 {
            let sent = r.due().expect("a query due");
            r.run(sent, true, 1, &mut rng);
            let timeout_at = r.due().expect("waiting");
            waits.push(timeout_at.saturating_since(sent).as_ms());
            r.run(timeout_at, true, 1, &mut rng);
        }
        assert_eq!(waits, [100, 200, 400]);
        *subnet.away_until.lock().expect("not poisoned") = Instant::ZERO;
        let sent = r.due().expect("a query due");
        r.run(sent, true, 1, &mut rng);
        // Answered in the same instant: settled at the interface's next look, then.
        assert_eq!(r.due(), Some(sent));
        r.run(sent, true, 1, &mut rng);
        assert!(r.joined());
        r.start(at(200_000), 1);
        *subnet.away_until.lock().expect("not poisoned") = at(300_000);
        r.run(at(200_000), true, 1, &mut rng);
        assert_eq!(r.due(), Some(at(200_100)), "the row starts over");
    }
}
