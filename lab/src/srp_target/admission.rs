//! A target's login capacity (the fleet, docs/design.md §11): how many logins it has in
//! progress at once and how many it accepts a second. Past either it rejects the login with
//! SRP_LOGIN_REJ "insufficient resources", as the Linux SRP target does when its allocation
//! fails (it does no admission control of its own). Shared by every port and initiator of
//! one target, as its LUN is.
//!
//! The rate is a sliding window: a login is accepted while fewer than `per_second` were
//! accepted in the second before it, so a burst of `per_second` is taken at once and no
//! second, wherever it starts, ever holds more (a token bucket of a second's depth would let
//! a burst and a second's rate into one second: twice the capacity).
//!
//! The Linux SRP target itself refuses nothing: it handles one login at a time (SCST's
//! `srpt_cm_req_recv` under its port's mutex; the kernel CM's work queue runs one item at a
//! time on each CPU), so a login past the one in progress waits its turn
//! ([`LoginCapacity::IB_SRPT`], `queue`). The initiator's CM sends
//! its REQ again meanwhile, and the target drops each copy as a duplicate: the answer comes
//! when the login's turn does, or after the initiator gave up.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use hcabus::{Duration, Instant};

/// The most logins a target may have in progress at once (a bound on what it reserves).
pub const MAX_CONCURRENT_LOGINS: u16 = 4_096;

/// A target's login capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginCapacity {
    /// Logins in progress (CM exchange and SRP_LOGIN) at once.
    pub concurrent: u16,
    /// Logins accepted per second, as a long-run rate.
    pub per_second: u32,
    /// Past either limit a login waits its turn, in order of arrival, rather than being
    /// refused.
    pub queue: bool,
}

impl LoginCapacity {
    /// The Linux SRP target: one login at a time, each after the one before, none refused.
    pub const IB_SRPT: LoginCapacity = LoginCapacity {
        concurrent: 1,
        per_second: MAX_LOGINS_PER_SECOND,
        queue: true,
    };

    /// A target that refuses logins past `concurrent` at once and `per_second` a second.
    pub const fn refusing(concurrent: u16, per_second: u32) -> Self {
        LoginCapacity {
            concurrent,
            per_second,
            queue: false,
        }
    }
}

/// The most logins a target may accept a second (a bound on the window it reserves).
pub const MAX_LOGINS_PER_SECOND: u32 = 100_000;

/// A capacity that cannot be: named by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    #[error("login_concurrency must be 1..={MAX_CONCURRENT_LOGINS}, not {0}")]
    Concurrent(u16),
    #[error("logins_per_second must be 1..={MAX_LOGINS_PER_SECOND}, not {0}")]
    PerSecond(u32),
}

pub use ibal::target::LoginRejected;

/// What a target's admission saw, for the fleet's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    pub accepted: u64,
    pub refused_busy: u64,
    pub refused_rate: u64,
    /// The most logins accepted within any one second (a sliding second, wherever it
    /// starts): never above the capacity's `per_second`.
    pub peak_per_second: u32,
    /// Logins tried while it restarted.
    pub refused_down: u64,
    pub restarts: u32,
    /// Logins that waited for their turn (a capacity that queues), and the longest wait.
    pub queued: u64,
    pub longest_wait: Duration,
}

/// One target's admission of logins.
#[derive(Debug)]
pub struct Admission {
    capacity: LoginCapacity,
    /// When each login in progress ends (reserved at `concurrent`; a queue's grows with the
    /// logins waiting, outside any reset path).
    ending: Vec<Instant>,
    /// When each login of the last second was accepted, oldest first (reserved at
    /// `per_second`).
    window: VecDeque<Instant>,
    /// Until when it is restarting (answering no login).
    down_until: Instant,
    stats: AdmissionStats,
}

/// An admission shared by every port of one target.
#[derive(Debug, Clone)]
pub struct SharedAdmission(Arc<Mutex<Admission>>);

impl SharedAdmission {
    pub fn new(capacity: LoginCapacity) -> Result<Self, CapacityError> {
        Ok(SharedAdmission(Arc::new(Mutex::new(Admission::new(
            capacity,
        )?))))
    }

    /// The admission; a poisoned lock is taken anyway (no login leaves it half changed).
    pub fn lock(&self) -> MutexGuard<'_, Admission> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Admission {
    pub fn new(capacity: LoginCapacity) -> Result<Self, CapacityError> {
        if capacity.concurrent == 0 || capacity.concurrent > MAX_CONCURRENT_LOGINS {
            return Err(CapacityError::Concurrent(capacity.concurrent));
        }
        if capacity.per_second == 0 || capacity.per_second > MAX_LOGINS_PER_SECOND {
            return Err(CapacityError::PerSecond(capacity.per_second));
        }
        Ok(Admission {
            capacity,
            ending: Vec::with_capacity(usize::from(capacity.concurrent)),
            window: VecDeque::with_capacity(capacity.per_second as usize),
            down_until: Instant::ZERO,
            stats: AdmissionStats::default(),
        })
    }

    pub fn capacity(&self) -> LoginCapacity {
        self.capacity
    }

    pub fn stats(&self) -> AdmissionStats {
        self.stats
    }

    /// A login arriving at `now` that, accepted, is in progress for `takes` once it starts:
    /// how long it waits for its turn first (none unless the capacity queues), or why not.
    pub fn try_login(&mut self, now: Instant, takes: Duration) -> Result<Duration, LoginRejected> {
        if now < self.down_until {
            self.stats.refused_down += 1;
            return Err(LoginRejected::Restarting);
        }
        self.ending.retain(|&end| end > now);
        let (concurrent, per_second) = (
            usize::from(self.capacity.concurrent),
            self.capacity.per_second as usize,
        );
        let mut start = now;
        if self.ending.len() >= concurrent {
            if !self.capacity.queue {
                self.stats.refused_busy += 1;
                return Err(LoginRejected::Busy("logins in progress"));
            }
            // Its turn: when all but `concurrent - 1` of those ahead of it have ended.
            let k = self.ending.len() - concurrent;
            let (_, nth, _) = self.ending.select_nth_unstable(k);
            start = *nth;
        }
        // A queue is served in order: none starts before one that arrived ahead of it.
        if let Some(&last) = self.window.back().filter(|_| self.capacity.queue) {
            start = start.max(last);
        }
        self.leave_window(start);
        if self.window.len() >= per_second {
            if !self.capacity.queue {
                self.stats.refused_rate += 1;
                return Err(LoginRejected::Busy("logins per second"));
            }
            // Queued logins start in order, so the window is in order too.
            let oldest = self.window[self.window.len() - per_second];
            start = start.max(oldest + Duration::from_ms(1_000));
            self.leave_window(start);
        }
        self.window.push_back(start);
        self.ending.push(start + takes);
        self.stats.accepted += 1;
        let in_second = self.window.len() as u32;
        self.stats.peak_per_second = self.stats.peak_per_second.max(in_second);
        let wait = start.saturating_since(now);
        if wait > Duration::ZERO {
            self.stats.queued += 1;
        }
        self.stats.longest_wait = self.stats.longest_wait.max(wait);
        Ok(wait)
    }

    /// Logins a second or more before `at` leave the window (none has, in the first second).
    fn leave_window(&mut self, at: Instant) {
        let second_ago = at.as_us().checked_sub(1_000_000).map(Instant::from_us);
        while self.window.front().is_some_and(|&t| Some(t) <= second_ago) {
            self.window.pop_front();
        }
    }

    /// The target restarts at `now` and answers no login for `down_for`: every connection
    /// to it is gone (its ports see the count of restarts change), and every login in
    /// progress with them.
    pub fn restart(&mut self, now: Instant, down_for: Duration) {
        self.ending.clear();
        // Logins queued to start later are gone with it: none holds a later one back.
        self.window.retain(|&t| t <= now);
        // Overlapping outages are one: a shorter one never ends a longer one sooner.
        self.down_until = self.down_until.max(now + down_for);
        self.stats.restarts += 1;
    }

    /// How many times it restarted: a connection made before the last one is gone.
    pub fn restarts(&self) -> u32 {
        self.stats.restarts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_TIME: Duration = Duration::ZERO;

    fn at(ms: u64) -> Instant {
        Instant::from_ms(ms)
    }

    fn admission(concurrent: u16, per_second: u32) -> Admission {
        Admission::new(LoginCapacity {
            concurrent,
            per_second,
            queue: false,
        })
        .expect("a capacity that can be")
    }

    #[test]
    fn a_capacity_of_nothing_or_too_much_is_refused_by_its_key() {
        let bad = |concurrent, per_second| {
            Admission::new(LoginCapacity {
                concurrent,
                per_second,
                queue: false,
            })
            .err()
            .map(|e| e.to_string())
        };
        assert_eq!(
            bad(0, 10).as_deref(),
            Some("login_concurrency must be 1..=4096, not 0")
        );
        assert_eq!(
            bad(4_097, 10),
            Some(CapacityError::Concurrent(4_097).to_string())
        );
        assert_eq!(
            bad(1, 0).as_deref(),
            Some("logins_per_second must be 1..=100000, not 0")
        );
        assert_eq!(
            bad(1, 100_001),
            Some(CapacityError::PerSecond(100_001).to_string())
        );
        assert_eq!((bad(4_096, 100_000), bad(1, 1)), (None, None));
    }

    /// A second's worth at once, then each as one of the second before it leaves: no second,
    /// wherever it starts, holds more than the capacity.
    #[test]
    fn a_burst_of_one_seconds_worth_then_no_more_in_any_second() {
        let mut a = admission(100, 4);
        let results: Vec<bool> = (0..6)
            .map(|_| a.try_login(at(0), NO_TIME).is_ok())
            .collect();
        assert_eq!(results, [true, true, true, true, false, false]);
        // Four accepted at 0 ms: the window has room again once they are a second old.
        assert!(a.try_login(at(999), NO_TIME).is_err());
        assert!(a.try_login(at(1_000), NO_TIME).is_ok());
        assert!(a.try_login(at(1_500), NO_TIME).is_ok());
        // 1.0 to 1.5 s: two; two more may come before 2 s, not a third.
        assert!(a.try_login(at(1_900), NO_TIME).is_ok());
        assert!(a.try_login(at(1_950), NO_TIME).is_ok());
        assert!(a.try_login(at(1_999), NO_TIME).is_err());
        let s = a.stats();
        assert_eq!(
            (
                s.accepted,
                s.refused_rate,
                s.refused_busy,
                s.peak_per_second
            ),
            (8, 4, 0, 4)
        );
        // Idle for long, it takes a whole burst again.
        let burst = (0..5)
            .filter(|_| a.try_login(at(10_000), NO_TIME).is_ok())
            .count();
        assert_eq!((burst, a.stats().peak_per_second), (4, 4));
    }

    /// Logins in progress are bounded; one ends when its time is up, a restart ends all.
    #[test]
    fn logins_in_progress_are_bounded_until_they_end() {
        let mut a = admission(2, 1_000);
        let takes = Duration::from_ms(10);
        assert!(a.try_login(at(0), takes).is_ok());
        assert!(a.try_login(at(1), takes).is_ok());
        assert_eq!(
            a.try_login(at(9), takes),
            Err(LoginRejected::Busy("logins in progress"))
        );
        // The first ends at 10 ms: room for one.
        assert!(a.try_login(at(10), takes).is_ok());
        assert!(a.try_login(at(10), takes).is_err());
        // Two in progress (to 11 and 20 ms) until the target restarts, down for 5 ms.
        a.restart(at(10), Duration::from_ms(5));
        assert_eq!(a.try_login(at(14), takes), Err(LoginRejected::Restarting));
        assert!(a.try_login(at(15), takes).is_ok());
        let s = a.stats();
        assert_eq!(
            (s.accepted, s.refused_busy, s.refused_rate, s.refused_down),
            (4, 2, 0, 1)
        );
        assert_eq!(a.restarts(), 1);
        // A shorter outage within a longer one does not end it sooner.
        a.restart(at(100), Duration::from_ms(500));
        a.restart(at(200), Duration::from_ms(10));
        assert_eq!(a.try_login(at(599), takes), Err(LoginRejected::Restarting));
        assert!(a.try_login(at(600), takes).is_ok());
    }

    /// The peak counts logins within any second, across two of the clock too.
    #[test]
    fn the_peak_is_of_a_sliding_second() {
        let mut a = admission(100, 1_000);
        for ms in [998, 999, 1_000, 1_001, 1_002, 2_000] {
            assert!(a.try_login(at(ms), NO_TIME).is_ok());
        }
        assert_eq!(a.stats().peak_per_second, 5);
    }

    /// The Linux target refuses nothing: each login waits for the one before it, in order.
    #[test]
    fn the_linux_target_serves_logins_one_after_another_and_refuses_none() {
        let mut a = Admission::new(LoginCapacity::IB_SRPT).expect("valid");
        let takes = Duration::from_ms(20);
        let waits: Vec<Duration> = (0..4)
            .map(|_| a.try_login(at(0), takes).expect("queued, not refused"))
            .collect();
        let ms = Duration::from_ms;
        assert_eq!(waits, [ms(0), ms(20), ms(40), ms(60)]);
        // Arriving at 50 ms, behind the fourth (ends at 80 ms).
        assert_eq!(a.try_login(at(50), takes), Ok(ms(30)));
        // Long after: no wait.
        assert_eq!(a.try_login(at(1_000), takes), Ok(ms(0)));
        let s = a.stats();
        assert_eq!((s.accepted, s.queued, s.refused_busy), (6, 4, 0));
        assert_eq!(s.longest_wait, ms(60));
        // A restart drops the queue with the logins in progress.
        a.restart(at(1_000), ms(100));
        assert_eq!(
            a.try_login(at(1_050), takes),
            Err(LoginRejected::Restarting)
        );
        assert_eq!(a.try_login(at(1_100), takes), Ok(ms(0)));
    }

    /// A queue past a rate: each second takes its share, the rest wait for the next one.
    #[test]
    fn a_queue_past_a_rate_waits_for_room_in_the_window() {
        let mut a = admission(100, 2);
        a.capacity.queue = true;
        let waits: Vec<u64> = (0..5)
            .map(|_| a.try_login(at(0), NO_TIME).expect("queued").as_ms())
            .collect();
        assert_eq!(waits, [0, 0, 1_000, 1_000, 2_000]);
        assert_eq!((a.stats().peak_per_second, a.stats().queued), (2, 3));
        // Logins a second apart from the oldest of the last two: one at 0 and one at 100 ms
        // let the next in at 1 s, and the one after at 1.1 s.
        let mut a = admission(100, 2);
        a.capacity.queue = true;
        let waits: Vec<u64> = [0, 100, 100, 100]
            .map(|ms| a.try_login(at(ms), NO_TIME).expect("queued").as_ms())
            .to_vec();
        assert_eq!(waits, [0, 0, 900, 1_000]);
    }

    #[test]
    fn ports_of_one_target_share_its_admission() {
        let shared = SharedAdmission::new(LoginCapacity {
            concurrent: 1,
            per_second: 100,
            queue: false,
        })
        .expect("valid");
        let other = shared.clone();
        assert!(shared.lock().try_login(at(0), Duration::from_ms(5)).is_ok());
        assert!(other.lock().try_login(at(1), Duration::from_ms(5)).is_err());
        assert_eq!(other.lock().capacity().concurrent, 1);
        assert_eq!(shared.lock().stats().refused_busy, 1);
    }
}
