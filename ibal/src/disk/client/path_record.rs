//! The PathRecord a disk asks the SA for before each login (docs/design.md §11): on a fabric
//! an SRP initiator resolves its path to the target through the subnet administrator before
//! it sends its CM REQ (Linux's ib_srp: `srp_path_rec_lookup`, `SRP_PATH_REC_TIMEOUT_MS`, one
//! second), so logins and the SA's load go together: a target restart that makes a thousand
//! hosts log in again is a thousand PathRecords first. A disk with no SA to ask (one host, no
//! fabric modelled) logs in at once.
//!
//! Unlike ib_srp, the disk keeps the path it resolved for its next logins: a login the target
//! refused as busy came back through that path, and a thousand disks retrying busy logins
//! each second would otherwise ask the SA a thousand PathRecords a second, as much as a slow
//! SA serves, for nothing. The path is asked again after what may move it: its port down or
//! its adapter reset, a new master (ClientReregister), or three logins in a row the target
//! never answered. A lookup that failed waits the SA's backoff (1 s doubling to 16 s) before
//! the next, whatever the login's own backoff says; but a ClientReregister that reaches the
//! port meanwhile (a new master, with an SA that answers) starts the next lookup at once, and
//! the backoff over, as srp_daemon rescans at once on one.

use std::sync::Arc;

use hcabus::{Duration, Instant};

use rand::Rng;

use crate::access::FabricBus;
use crate::ipoib::{SaAnswer, SubnetAdmin};
use crate::retry::sa_retry_wait;

/// Logins in a row the target never answered before the path is asked for again.
const UNANSWERED_BEFORE_LOOKUP: u32 = 3;

/// How long a disk waits for its PathRecord: ib_srp's `SRP_PATH_REC_TIMEOUT_MS`.
pub const PATH_RECORD_TIMEOUT: Duration = Duration::from_ms(1_000);

/// Where a login's path lookup stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Idle,
    /// A query sent at `sent` is settled at `at`: answered then (`answered`), or known to
    /// have failed then (no answer by the timeout, or BUSY).
    Waiting {
        sent: Instant,
        at: Instant,
        answered: bool,
    },
}

/// What the login may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathStep {
    /// The path is known: log in.
    Resolved,
    /// Come back at this instant.
    WaitUntil(Instant),
    /// The SA did not resolve it: the login failed, and is retried as a refused one.
    Failed,
}

/// What a disk's lookups came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathRecordStats {
    pub queries: u64,
    pub failed: u64,
    /// Lookups started at once by a ClientReregister after a failed one.
    pub rescans: u64,
}

/// A disk's PathRecord lookups through its fabric's SA.
#[derive(Debug, Clone)]
pub(crate) struct PathRecords {
    subnet: Arc<dyn SubnetAdmin>,
    lookup: Lookup,
    stats: PathRecordStats,
    /// The path resolved, under this many ClientReregisters: good for the next login.
    cached: Option<u32>,
    /// Logins in a row the target never answered.
    unanswered: u32,
    /// Lookups failed in a row, and no new one before this instant.
    failures: u32,
    not_before: Instant,
    /// The ClientReregisters the port had when the last lookup failed: the next one is a
    /// new SA to ask at once.
    failed_under: Option<u32>,
}

impl PathRecords {
    pub(crate) fn new(subnet: Arc<dyn SubnetAdmin>) -> Self {
        PathRecords {
            subnet,
            lookup: Lookup::Idle,
            stats: PathRecordStats::default(),
            cached: None,
            unanswered: 0,
            failures: 0,
            not_before: Instant::ZERO,
            failed_under: None,
        }
    }

    pub(crate) fn stats(&self) -> PathRecordStats {
        self.stats
    }

    /// A login is due at `now`: ask for its path, or say what the asking came to.
    pub(crate) fn step(&mut self, now: Instant, rng: &mut impl Rng) -> PathStep {
        match self.lookup {
            Lookup::Idle => {
                if self.cached == Some(self.subnet.reregistrations(now)) {
                    return PathStep::Resolved;
                }
                self.cached = None;
                if now < self.not_before {
                    return PathStep::WaitUntil(self.not_before);
                }
                self.stats.queries += 1;
                let (at, answered) = match self.subnet.query(now, PATH_RECORD_TIMEOUT) {
                    SaAnswer::At(at) if at <= now + PATH_RECORD_TIMEOUT => (at, true),
                    SaAnswer::Busy(at) => (at, false),
                    SaAnswer::At(_) | SaAnswer::Lost => (now + PATH_RECORD_TIMEOUT, false),
                };
                self.lookup = Lookup::Waiting {
                    sent: now,
                    at,
                    answered,
                };
                // An answer in the same instant is taken at once.
                self.step(now, rng)
            }
            Lookup::Waiting { at, .. } if at > now => PathStep::WaitUntil(at),
            Lookup::Waiting { sent, at, answered } => {
                // A master that failed meanwhile took the answer with it: waited out.
                if answered && !self.subnet.survived(sent, at) {
                    self.lookup = Lookup::Waiting {
                        sent,
                        at: sent + PATH_RECORD_TIMEOUT,
                        answered: false,
                    };
                    return self.step(now, rng);
                }
                self.lookup = Lookup::Idle;
                if answered {
                    self.cached = Some(self.subnet.reregistrations(now));
                    self.failures = 0;
                    self.failed_under = None;
                    PathStep::Resolved
                } else {
                    self.stats.failed += 1;
                    self.failures = self.failures.saturating_add(1);
                    self.not_before = now + sa_retry_wait(self.failures, rng);
                    self.failed_under = Some(self.subnet.reregistrations(now));
                    PathStep::Failed
                }
            }
        }
    }

    /// When a ClientReregister reaches the port after the last lookup failed: the disk
    /// looks again then ([`PathRecords::rescan`]).
    pub(crate) fn rescan_due(&self) -> Option<Instant> {
        self.failed_under.and_then(|n| self.subnet.reregister_at(n))
    }

    /// At `now`, past [`PathRecords::rescan_due`]: the failures are forgotten and the next
    /// lookup may go at once; `true` if so.
    pub(crate) fn rescan(&mut self, now: Instant) -> bool {
        // The same test as `rescan_due`'s, so that a wake for it always clears it.
        match self.failed_under {
            Some(n) if self.subnet.reregister_at(n).is_some_and(|t| t <= now) => {
                self.failed_under = None;
                self.failures = 0;
                self.not_before = now;
                self.stats.rescans += 1;
                true
            }
            _ => false,
        }
    }

    /// The login was cancelled by what may move the path (a reset, the port down, a failed
    /// device): a lookup under way is forgotten, and the path asked for again.
    pub(crate) fn cancel(&mut self) {
        self.lookup = Lookup::Idle;
        self.cached = None;
    }

    /// What the login through the path came to: answered (even as busy), or not at all.
    pub(crate) fn login_answered(&mut self, answered: bool) {
        if answered {
            self.unanswered = 0;
            return;
        }
        self.unanswered += 1;
        if self.unanswered >= UNANSWERED_BEFORE_LOOKUP {
            self.unanswered = 0;
            self.cached = None;
        }
    }
}

/// A disk's logins on a fabric with an SA: each through its path lookup.
impl super::SrpClient {
    /// The disk on a fabric's SA: each login first asks it for the path to the target.
    pub fn with_subnet(mut self, subnet: std::sync::Arc<dyn crate::ipoib::SubnetAdmin>) -> Self {
        self.paths = Some(PathRecords::new(subnet));
        self
    }

    /// Its PathRecord lookups, on a fabric with an SA.
    pub fn path_records(&self) -> Option<PathRecordStats> {
        self.paths.as_ref().map(PathRecords::stats)
    }

    /// A login is due: its path first (on a fabric with an SA), then the login.
    pub(super) fn login_due<B: FabricBus + ?Sized>(&mut self, bus: &mut B, now: Instant) {
        if self
            .req
            .is_some_and(|r| r.gives_up_at.is_some_and(|t| t <= now))
        {
            // The target's answer never came in time: the CM gave the login up.
            self.req = None;
            if let Some(p) = &mut self.paths {
                p.login_answered(false);
            }
            return self.login_refused(bus, crate::errors::CreateError::AnsweredLate);
        }
        let step = match &mut self.paths {
            Some(p) => p.step(now, bus.rng()),
            None => PathStep::Resolved,
        };
        match step {
            PathStep::WaitUntil(t) => self.connect_at = Some(t),
            PathStep::Failed => {
                // A REQ series cut short by a lookup that failed starts over next time.
                self.req = None;
                self.login_refused(bus, crate::errors::CreateError::PathUnresolved);
            }
            PathStep::Resolved => {
                if self.req.is_some() {
                    // The CM sends the unanswered REQ again.
                    self.disk.stats.req_retries += 1;
                }
                let cm_until = self.cm_until(bus, now);
                let result = self
                    .disk
                    .connect(&self.ibal, bus, &mut *self.target, cm_until);
                if result == Err(crate::errors::CreateError::AnsweredLate) {
                    return self.answered_late(bus, now);
                }
                // The target answered after this many of the CM's timeouts: it sent the REQ
                // again at each (the target drops the copies).
                if let Ok(takes) = result {
                    self.disk.stats.req_retries += super::cm::resent_before(takes);
                }
                let result = result.map(|_| ());
                // Nobody answered the REQ: its CM learns so at its timeout, and sends it
                // again then, until it has sent it as often as it may.
                let silent = result == Err(crate::errors::CreateError::Unreachable);
                if silent && self.req_unanswered(bus) {
                    return;
                }
                self.req = None;
                if let Some(p) = &mut self.paths {
                    p.login_answered(result != Err(crate::errors::CreateError::Unreachable));
                }
                match result {
                    Ok(()) => {
                        self.port_lid = bus.port(self.disk.config.port).map(|p| p.lid);
                        self.login.connected()
                    }
                    Err(e) => self.login_refused(bus, e),
                }
            }
        }
    }

    /// No login is due any more: a lookup under way is forgotten with it.
    pub(super) fn cancel_connect(&mut self) {
        self.connect_at = None;
        self.req = None;
        if let Some(p) = &mut self.paths {
            p.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// An SA that answers each query as told.
    #[derive(Debug)]
    struct Scripted {
        answers: Mutex<Vec<SaAnswer>>,
        failed_at: Option<Instant>,
        reregistered: std::sync::atomic::AtomicU32,
        /// ClientReregisters set for instants to come (after those `reregistered` counts).
        rereg_at: Mutex<Vec<Instant>>,
    }

    impl SubnetAdmin for Scripted {
        /// The scripted answers in turn, then each 10 ms after its query.
        fn query(&self, now: Instant, _timeout: Duration) -> SaAnswer {
            let mut a = self.answers.lock().expect("not poisoned");
            if a.is_empty() {
                return SaAnswer::At(now + Duration::from_ms(10));
            }
            a.remove(0)
        }
        fn survived(&self, sent: Instant, at: Instant) -> bool {
            !self.failed_at.is_some_and(|f| sent <= f && f < at)
        }
        fn reregistrations(&self, now: Instant) -> u32 {
            let later = self.rereg_at.lock().expect("not poisoned");
            self.reregistered.load(std::sync::atomic::Ordering::Relaxed)
                + later.iter().filter(|t| **t <= now).count() as u32
        }
        fn reregister_at(&self, n: u32) -> Option<Instant> {
            let before = self.reregistered.load(std::sync::atomic::Ordering::Relaxed);
            let later = self.rereg_at.lock().expect("not poisoned");
            later.get(n.checked_sub(before)? as usize).copied()
        }
    }

    fn sa(answers: &[SaAnswer], failed_at: Option<u64>) -> Arc<Scripted> {
        Arc::new(Scripted {
            answers: Mutex::new(answers.to_vec()),
            failed_at: failed_at.map(Instant::from_ms),
            reregistered: std::sync::atomic::AtomicU32::new(0),
            rereg_at: Mutex::new(Vec::new()),
        })
    }

    fn records(answers: &[SaAnswer], failed_at: Option<u64>) -> PathRecords {
        PathRecords::new(sa(answers, failed_at))
    }

    fn rng() -> rand_chacha::ChaCha8Rng {
        rand::SeedableRng::seed_from_u64(1)
    }

    fn at(ms: u64) -> Instant {
        Instant::from_ms(ms)
    }

    #[test]
    fn a_login_waits_for_its_path_and_a_lost_or_late_one_fails_at_the_timeout() {
        let r = &mut rng();
        let answers = [
            SaAnswer::At(at(30)),
            SaAnswer::Lost,
            SaAnswer::At(at(50_000)),
        ];
        let mut p = records(&answers, None);
        assert_eq!(p.step(at(0), r), PathStep::WaitUntil(at(30)));
        assert_eq!(p.step(at(30), r), PathStep::Resolved);
        p.cancel();
        // Lost: known at the timeout.
        assert_eq!(p.step(at(100), r), PathStep::WaitUntil(at(1_100)));
        assert_eq!(p.step(at(1_100), r), PathStep::Failed);
        // The next lookup waits the SA's backoff (1 to 1.5 s), whatever the login's says.
        let WaitUntil(next) = p.step(at(1_101), r) else {
            panic!("backs off");
        };
        assert!(next >= at(2_100) && next <= at(2_600), "{next}");
        // Late (after the second the initiator waits): as good as lost.
        assert_eq!(
            p.step(next, r),
            PathStep::WaitUntil(next + PATH_RECORD_TIMEOUT)
        );
        assert_eq!(p.step(next + PATH_RECORD_TIMEOUT, r), PathStep::Failed);
        assert_eq!(
            p.stats(),
            PathRecordStats {
                queries: 3,
                failed: 2,
                rescans: 0
            }
        );
    }

    use PathStep::WaitUntil;

    #[test]
    fn busy_fails_at_once_and_a_failed_master_takes_the_answer_with_it() {
        let r = &mut rng();
        let mut p = records(
            &[SaAnswer::Busy(at(1)), SaAnswer::At(at(3_300))],
            Some(3_200),
        );
        assert_eq!(p.step(at(0), r), PathStep::WaitUntil(at(1)));
        assert_eq!(p.step(at(1), r), PathStep::Failed);
        assert_eq!(p.step(at(3_000), r), PathStep::WaitUntil(at(3_300)));
        // The master failed at 3.2 s, before the answer went: waited out to the timeout.
        assert_eq!(p.step(at(3_300), r), PathStep::WaitUntil(at(4_000)));
        assert_eq!(p.step(at(4_000), r), PathStep::Failed);
        assert_eq!(p.stats().failed, 2);
    }

    /// A lookup failed (no master up) waits the SA's backoff, but a ClientReregister that
    /// reaches the port meanwhile says there is a new master: the lookup goes at once, the
    /// backoff over, as srp_daemon rescans on one. Before it, nothing changes.
    #[test]
    fn a_client_reregister_after_a_failed_lookup_looks_again_at_once() {
        let r = &mut rng();
        let subnet = sa(&[SaAnswer::Lost, SaAnswer::Lost], None);
        let mut p = PathRecords::new(subnet.clone());
        assert_eq!(p.step(at(0), r), WaitUntil(at(1_000)));
        assert_eq!(p.step(at(1_000), r), PathStep::Failed);
        assert_eq!(p.rescan_due(), None, "no master set one");
        // Two failures: the backoff has grown past 2 s.
        let WaitUntil(next) = p.step(at(1_000), r) else {
            panic!("the backoff");
        };
        assert_eq!(p.step(next, r), WaitUntil(next + PATH_RECORD_TIMEOUT));
        let failed = next + PATH_RECORD_TIMEOUT;
        assert_eq!(p.step(failed, r), PathStep::Failed);
        let WaitUntil(backoff) = p.step(failed, r) else {
            panic!("the backoff");
        };
        assert!(backoff >= failed + Duration::from_ms(2_000), "{backoff}");
        // A new master sets ClientReregister on the port 100 ms after the failure.
        let rereg = failed + Duration::from_ms(100);
        subnet.rereg_at.lock().expect("not poisoned").push(rereg);
        assert_eq!(p.rescan_due(), Some(rereg));
        assert!(
            !p.rescan(rereg - Duration::from_ms(1)),
            "not before it comes"
        );
        assert!(p.rescan(rereg));
        assert_eq!(p.rescan_due(), None);
        assert_eq!(p.step(rereg, r), WaitUntil(rereg + Duration::from_ms(10)));
        assert_eq!(p.step(rereg + Duration::from_ms(10), r), PathStep::Resolved);
        assert_eq!((p.stats().rescans, p.stats().queries), (1, 3));
    }

    /// A resolved path serves the next logins (a busy target answered through it) until a
    /// new master, a reset or three unanswered logins say it may have moved.
    #[test]
    fn a_resolved_path_is_kept_until_something_may_have_moved_it() {
        let r = &mut rng();
        let subnet = sa(&[], None);
        let mut p = PathRecords::new(subnet.clone());
        assert_eq!(p.step(at(0), r), WaitUntil(at(10)));
        assert_eq!(p.step(at(10), r), PathStep::Resolved);
        p.login_answered(true);
        assert_eq!(p.step(at(20), r), PathStep::Resolved, "kept: no query");
        assert_eq!(p.stats().queries, 1);
        // A new master: asked again.
        subnet
            .reregistered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(p.step(at(30), r), WaitUntil(at(40)));
        assert_eq!(p.step(at(40), r), PathStep::Resolved);
        // Two unanswered logins keep it; the third drops it.
        p.login_answered(false);
        p.login_answered(false);
        assert_eq!(p.step(at(50), r), PathStep::Resolved);
        p.login_answered(false);
        assert_eq!(p.step(at(60), r), WaitUntil(at(70)));
        assert_eq!(p.step(at(70), r), PathStep::Resolved);
        // A reset: asked again.
        p.cancel();
        assert_eq!(p.step(at(80), r), WaitUntil(at(90)));
        assert_eq!(p.stats().queries, 4);
    }
}
