//! Bounded retries and the record of a client that could not do its job.
//!
//! No client retries forever or in silence: a refused connect or login backs off
//! exponentially with jitter (so a thousand hosts coming back at once do not stampede one
//! target, docs/design.md §7), up to a deadline, and giving up leaves a [`ClientProblem`] that the
//! report shows next to the client.

use hcabus::errors::RegisterError;
use hcabus::{Duration, Instant};
use rand::Rng;

use crate::errors::{CreateError, OpenError};

/// The first retry waits this long; each refusal doubles it.
pub const BACKOFF_FIRST: Duration = Duration::from_ms(1);
/// No wait between two attempts is longer than this (before jitter).
pub const BACKOFF_CAP: Duration = Duration::from_ms(1_000);
/// How long a data LUN that gave its login up (failing its I/O upward) keeps probing its
/// target at the backoff's cap before it stops until the next RESET_END: Linux's SRP
/// initiator's `dev_loss_tmo` default. A target outage longer than the hold (a storage
/// upgrade) then ends with the disk back by itself, not with an operator resetting every
/// host's adapter.
pub const DEV_LOSS: Duration = Duration::from_ms(600_000);

/// The first retry of an SA query waits this long, and each failure in a row doubles it up
/// to [`SA_BACKOFF_CAP`], with up to half again of jitter: Linux IPoIB's multicast join
/// backoff (1 s doubling to `IPOIB_MAX_BACKOFF_SECONDS`, 16 s). A retry of an SA that is
/// behind adds to its queue, so the cap is what lets a fabric's interfaces ask less than an
/// SA slower than their demand can serve, and the SA catch up.
pub const SA_BACKOFF_FIRST: Duration = Duration::from_ms(1_000);
pub const SA_BACKOFF_CAP: Duration = Duration::from_ms(16_000);

/// The wait after the `failures`th failed SA query in a row (from 1), jitter included.
pub fn sa_retry_wait(failures: u32, rng: &mut impl Rng) -> Duration {
    let shift = failures.saturating_sub(1).min(16);
    let base_us = (SA_BACKOFF_FIRST.as_us() << shift).min(SA_BACKOFF_CAP.as_us());
    Duration::from_us(base_us + rng.gen_range(0..=base_us / 2))
}

/// What to do after a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Try again then.
    RetryAt(Instant),
    /// The deadline has passed: stop, after this many attempts.
    GiveUp { attempts: u32 },
}

/// How a refused login is retried: the shipped backoff, or a rule of the host's own (the
/// lab's fleet compares the shipped one with rules it supplies, docs/design.md §11).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Capped exponential ([`BACKOFF_FIRST`] doubling to [`BACKOFF_CAP`]) with up to 50%
    /// jitter: hosts refused together come back spread out.
    #[default]
    Backoff,
    /// A wait rule a host supplies instead.
    Rule(WaitRule),
}

/// A wait rule of a host's own: a name for reports, and the wait after the `n`th refusal
/// in a row, drawn from `param` and without randomness.
#[derive(Debug, Clone, Copy)]
pub struct WaitRule {
    pub name: &'static str,
    pub param: Duration,
    pub wait: fn(refusals: u32, param: Duration) -> Duration,
}

/// Two rules are the same when their names and parameters are: a name stands for one
/// rule, and a function's address is no identity (one function may have two).
impl PartialEq for WaitRule {
    fn eq(&self, other: &Self) -> bool {
        (self.name, self.param) == (other.name, other.param)
    }
}

impl Eq for WaitRule {}

/// The shipped backoff's wait after the `refusals`th refusal in a row (from 1), before its
/// jitter: [`BACKOFF_FIRST`] doubling to [`BACKOFF_CAP`].
pub fn capped_exponential(refusals: u32) -> Duration {
    let shift = refusals.saturating_sub(1).min(20);
    Duration::from_us((BACKOFF_FIRST.as_us() << shift).min(BACKOFF_CAP.as_us()))
}

impl RetryPolicy {
    /// The wait after the `refusals`th refusal in a row (from 1).
    fn wait(self, refusals: u32, rng: &mut impl Rng) -> Duration {
        match self {
            RetryPolicy::Backoff => {
                let exp_us = capped_exponential(refusals).as_us();
                Duration::from_us(exp_us + rng.gen_range(0..=exp_us / 2))
            }
            RetryPolicy::Rule(r) => (r.wait)(refusals, r.param),
        }
    }

    /// The policy's name in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            RetryPolicy::Backoff => "backoff",
            RetryPolicy::Rule(r) => r.name,
        }
    }
}

/// Retries under a [`RetryPolicy`] (capped exponential with jitter unless told otherwise),
/// bounded by a deadline from the first refusal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backoff {
    first_refused_at: Option<Instant>,
    refusals: u32,
    policy: RetryPolicy,
}

impl Backoff {
    /// Refusals since the last success (or reset).
    pub fn refusals(&self) -> u32 {
        self.refusals
    }

    /// Retries under `policy`.
    pub fn with_policy(policy: RetryPolicy) -> Self {
        Backoff {
            policy,
            ..Backoff::default()
        }
    }

    /// Starts over: the next refusal is a first one.
    pub fn reset(&mut self) {
        *self = Backoff::with_policy(self.policy);
    }

    /// One more refusal at `now`; gives up at once on a refusal that cannot change
    /// (`transient` false), else once `limit` has passed since the first.
    pub fn refused(
        &mut self,
        now: Instant,
        limit: Duration,
        transient: bool,
        rng: &mut impl Rng,
    ) -> Next {
        let first = *self.first_refused_at.get_or_insert(now);
        self.refusals = self.refusals.saturating_add(1);
        if !transient || now.saturating_since(first) >= limit {
            return Next::GiveUp {
                attempts: self.refusals,
            };
        }
        Next::RetryAt(now + self.policy.wait(self.refusals, rng))
    }
}

/// A client's connect or login, retried with a [`Backoff`], and what keeps it from working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connector {
    /// What is retried, for the record ("SRP login").
    what: &'static str,
    backoff: Backoff,
    problem: Option<ClientProblem>,
}

impl Connector {
    pub fn new(what: &'static str) -> Self {
        Self::with_policy(what, RetryPolicy::Backoff)
    }

    /// Retries under `policy` (the fleet's comparison; clients ship with the default).
    pub fn with_policy(what: &'static str, policy: RetryPolicy) -> Self {
        Connector {
            what,
            backoff: Backoff::with_policy(policy),
            problem: None,
        }
    }

    pub fn problem(&self) -> Option<ClientProblem> {
        self.problem
    }

    /// An attempt at `now` that nobody answered yet (a login's REQ its CM sends again): its
    /// deadline counts from the first of them, as from a first refusal, and the client says
    /// it is retrying. `e` names what failed.
    pub fn unanswered(&mut self, now: Instant, e: CreateError) {
        self.backoff.first_refused_at.get_or_insert(now);
        if !self.given_up() {
            self.problem = Some(ClientProblem::Retrying {
                what: self.what,
                attempts: self.backoff.refusals(),
                last: e,
            });
        }
    }

    /// When `limit` from the first refusal (or unanswered attempt) runs out, if one came.
    pub fn deadline(&self, limit: Duration) -> Option<Instant> {
        self.backoff.first_refused_at.map(|t| t + limit)
    }

    /// The client could not start: it stays down, and says why.
    pub fn start_failed(&mut self, problem: ClientProblem) {
        self.problem = Some(problem);
    }

    /// Down for good: it could not start, or it gave up (a retry still in progress is not).
    pub fn given_up(&self) -> bool {
        self.problem
            .is_some_and(|p| !matches!(p, ClientProblem::Retrying { .. }))
    }

    /// Connected: the retries (or the probes after a give-up) are over.
    pub fn connected(&mut self) {
        self.backoff.reset();
        if matches!(
            self.problem,
            Some(ClientProblem::Retrying { .. } | ClientProblem::GaveUp { .. })
        ) {
            self.problem = None;
        }
    }

    /// A fresh device (RESET_END, RESET_ABORTED): one that gave up tries again.
    pub fn fresh_device(&mut self) {
        self.backoff.reset();
        if matches!(
            self.problem,
            Some(ClientProblem::Retrying { .. } | ClientProblem::GaveUp { .. })
        ) {
            self.problem = None;
        }
    }

    /// A refusal `e` at `now`: when to try again, or `None` for given up (recorded and
    /// logged under `name`).
    pub fn refused(
        &mut self,
        name: &str,
        now: Instant,
        limit: Duration,
        e: CreateError,
        rng: &mut impl Rng,
    ) -> Option<Instant> {
        let what = self.what;
        match self.backoff.refused(now, limit, e.is_transient(), rng) {
            Next::RetryAt(t) => {
                self.problem = Some(ClientProblem::Retrying {
                    what,
                    attempts: self.backoff.refusals(),
                    last: e,
                });
                Some(t)
            }
            Next::GiveUp { attempts } => {
                log::error!("{name}: {what} gave up after {attempts} refusals: {e}");
                self.problem = Some(ClientProblem::GaveUp {
                    what,
                    attempts,
                    last: e,
                });
                None
            }
        }
    }
}

/// What a refusal under [`Connector::refused_then_probe`] leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Still retrying: try again then.
    RetryAt(Instant),
    /// Given up (its held work failed upward, `first` says whether this refusal is the one
    /// that gave up), probing again at `probe_at` (`None`: stopped until a fresh device).
    GaveUp {
        probe_at: Option<Instant>,
        first: bool,
    },
}

impl Connector {
    /// A refusal `e` at `now` of a client that gives up at `hold` from the first refusal
    /// (recorded, logged once) but goes on probing, under the same backoff, until
    /// `probe_for` (at least `hold`) has passed: a give-up that a target back later undoes.
    pub fn refused_then_probe(
        &mut self,
        name: &str,
        now: Instant,
        (hold, probe_for): (Duration, Duration),
        e: CreateError,
        rng: &mut impl Rng,
    ) -> Probe {
        let was_given_up = matches!(self.problem, Some(ClientProblem::GaveUp { .. }));
        let next = self
            .backoff
            .refused(now, probe_for.max(hold), e.is_transient(), rng);
        let first_at = self.backoff.first_refused_at.unwrap_or(now);
        let attempts = self.backoff.refusals();
        let what = self.what;
        match next {
            Next::RetryAt(t) if now.saturating_since(first_at) < hold => {
                self.problem = Some(ClientProblem::Retrying {
                    what,
                    attempts,
                    last: e,
                });
                Probe::RetryAt(t)
            }
            next => {
                if !was_given_up {
                    log::error!("{name}: {what} gave up after {attempts} refusals: {e}");
                }
                self.problem = Some(ClientProblem::GaveUp {
                    what,
                    attempts,
                    last: e,
                });
                let probe_at = match next {
                    Next::RetryAt(t) => Some(t),
                    Next::GiveUp { .. } => {
                        log::error!("{name}: {what} stops probing after {attempts} refusals");
                        None
                    }
                };
                Probe::GaveUp {
                    probe_at,
                    first: !was_given_up,
                }
            }
        }
    }
}

/// Why a client is not doing its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClientProblem {
    /// The adapter's DMA memory was spent before this client reserved its own.
    #[error("no DMA memory left for its {bytes} bytes")]
    NoDmaMemory { bytes: u64 },
    /// The access layer refused to open a consumer for it.
    #[error("the access layer refused it: {0}")]
    NoConsumer(OpenError),
    /// The bus refused its registration.
    #[error("the bus refused its registration: {0}")]
    NotRegistered(RegisterError),
    /// Its connect or login is being refused; it backs off and tries again.
    #[error("{what} refused {attempts} times, retrying (last: {last})")]
    Retrying {
        what: &'static str,
        attempts: u32,
        last: CreateError,
    },
    /// Its connect or login was refused for good, or until the deadline passed.
    #[error("{what} gave up after {attempts} refusals (last: {last})")]
    GaveUp {
        what: &'static str,
        attempts: u32,
        last: CreateError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn waits_grow_to_the_cap_with_bounded_jitter_then_give_up_at_the_deadline() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut b = Backoff::default();
        let limit = Duration::from_ms(10_000);
        let mut now = Instant::ZERO;
        let mut waits = std::vec::Vec::new();
        loop {
            match b.refused(now, limit, true, &mut rng) {
                Next::RetryAt(t) => {
                    waits.push(t.saturating_since(now).as_us());
                    now = t;
                }
                Next::GiveUp { attempts } => {
                    assert_eq!(attempts, b.refusals());
                    break;
                }
            }
        }
        assert!(
            now >= Instant::ZERO + limit,
            "gave up only past the deadline"
        );
        assert!(waits.len() < 40, "bounded: {} attempts", waits.len());
        assert!(
            (1_000..=1_500).contains(&waits[0]),
            "first wait {}",
            waits[0]
        );
        let cap = BACKOFF_CAP.as_us();
        assert!(waits.iter().all(|w| *w <= cap + cap / 2));
        assert!(
            waits.iter().rev().take(3).all(|w| *w >= cap),
            "reached the cap"
        );
        b.reset();
        assert_eq!(b.refusals(), 0);
        assert_eq!(b, Backoff::default());
        assert_eq!(
            b.refused(now, limit, false, &mut rng),
            Next::GiveUp { attempts: 1 },
            "a refusal that cannot change is not retried"
        );
    }

    /// The shipped backoff against a rule of the host's own (the lab's are the fleet's
    /// baselines): without jitter two hosts refused together retry together; a rule's waits
    /// are its own; a reset keeps the policy.
    #[test]
    fn each_policy_waits_its_own_way_and_a_reset_keeps_it() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let limit = Duration::MAX;
        let waits = |policy, rng: &mut rand_chacha::ChaCha8Rng| {
            let mut b = Backoff::with_policy(policy);
            let mut now = Instant::ZERO;
            let mut w = std::vec::Vec::new();
            for _ in 0..14 {
                let Next::RetryAt(t) = b.refused(now, limit, true, rng) else {
                    panic!("no deadline: never gives up");
                };
                w.push(t.saturating_since(now).as_us());
                now = t;
            }
            b.reset();
            assert_eq!(b, Backoff::with_policy(policy), "a reset keeps the policy");
            w
        };
        let no_jitter = RetryPolicy::Rule(WaitRule {
            name: "no_jitter",
            param: Duration::ZERO,
            wait: |n, _| capped_exponential(n),
        });
        let plain = waits(no_jitter, &mut rng);
        assert_eq!(plain, waits(no_jitter, &mut rng));
        assert_eq!(&plain[..3], &[1_000, 2_000, 4_000]);
        assert_eq!(plain.last(), Some(&BACKOFF_CAP.as_us()));
        let fixed = RetryPolicy::Rule(WaitRule {
            name: "fixed",
            param: Duration::from_ms(10_000),
            wait: |_, d| d,
        });
        assert_eq!((fixed.name(), no_jitter.name()), ("fixed", "no_jitter"));
        assert_ne!(fixed, no_jitter);
        let fixed = waits(fixed, &mut rng);
        assert!(fixed.iter().all(|w| *w == 10_000_000), "{fixed:?}");
        let jittered = waits(RetryPolicy::Backoff, &mut rng);
        assert_ne!(jittered, plain, "the shipped policy spreads its retries");
        assert!(jittered
            .iter()
            .zip(&plain)
            .all(|(j, p)| j >= p && *j <= p + p / 2));
    }

    fn busy() -> CreateError {
        CreateError::TargetBusy
    }

    /// A connector retries until its deadline, then gives up for good (recorded) until a
    /// fresh device; a connect clears a retry in progress.
    #[test]
    fn a_connector_retries_to_its_deadline_and_a_fresh_device_starts_it_over() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut c = Connector::new("SRP login");
        let limit = Duration::from_ms(10);
        let first = c.refused("d", Instant::ZERO, limit, busy(), &mut rng);
        assert!(first.is_some_and(|t| t > Instant::ZERO));
        assert!(matches!(
            c.problem(),
            Some(ClientProblem::Retrying { attempts: 1, .. })
        ));
        assert!(!c.given_up());
        c.connected();
        assert_eq!(c.problem(), None);
        c.refused("d", Instant::ZERO, limit, busy(), &mut rng);
        assert_eq!(
            c.refused("d", Instant::from_ms(10), limit, busy(), &mut rng),
            None
        );
        assert!(c.given_up(), "{:?}", c.problem());
        c.fresh_device();
        assert!(!c.given_up() && c.problem().is_none());
        c.start_failed(ClientProblem::NoDmaMemory { bytes: 1 });
        assert!(c.given_up());
        c.fresh_device();
        assert!(c.given_up(), "a client that could not start stays down");
    }

    /// Refused past its hold, a prober gives up once (its first refusal past the hold says
    /// so) and probes on at the backoff until `probe_for`; a connect clears the give-up.
    #[test]
    fn a_prober_gives_up_at_its_hold_once_and_probes_to_its_bound() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut c = Connector::new("SRP login");
        let bounds = (Duration::from_ms(50), Duration::from_ms(5_000));
        let mut at = |ms| c.refused_then_probe("d", Instant::from_ms(ms), bounds, busy(), &mut rng);
        assert!(matches!(at(0), Probe::RetryAt(_)));
        assert!(matches!(at(49), Probe::RetryAt(_)));
        assert!(matches!(
            at(50),
            Probe::GaveUp {
                probe_at: Some(_),
                first: true
            }
        ));
        assert!(matches!(
            at(1_000),
            Probe::GaveUp {
                probe_at: Some(_),
                first: false
            }
        ));
        assert!(matches!(
            at(5_000),
            Probe::GaveUp {
                probe_at: None,
                first: false
            }
        ));
        assert!(c.given_up());
        c.connected();
        assert!(!c.given_up() && c.problem().is_none());
    }
}
