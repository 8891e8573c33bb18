//! A target's login capacity (the fleet, docs/design.md §11): how many logins it has in
//! progress at once and how many it accepts a second. Past either it rejects the login with
//! SRP_LOGIN_REJ "insufficient resources", as the Linux SRP target does when its allocation
//! fails (it does no admission control of its own). Shared by every port and initiator of
//! one target, as its LUN is.
//!
//! The rate is a generic cell rate algorithm (ATM's GCRA, a token bucket in one number): a
//! login may come `interval` after the one before it, or up to a second's worth early, so a
//! burst of `per_second` is accepted at once and the long-run rate is never above it.

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
}

/// A capacity that cannot be: named by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    #[error("login_concurrency must be 1..={MAX_CONCURRENT_LOGINS}, not {0}")]
    Concurrent(u16),
    #[error("logins_per_second must be 1..=1000000, not {0}")]
    PerSecond(u32),
}

/// A login the target did not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoginRejected {
    /// SRP_LOGIN_REJ, insufficient resources: past one of its limits.
    #[error("login rejected: insufficient resources ({0})")]
    Busy(&'static str),
    /// The target is restarting: nothing answers the CM REQ.
    #[error("no answer: the target is restarting")]
    Restarting,
}

/// What a target's admission saw, for the fleet's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    pub accepted: u64,
    pub refused_busy: u64,
    pub refused_rate: u64,
    /// The most logins accepted within one second of the clock (0.000 to 0.999 s, ...).
    pub peak_per_second: u32,
    /// Logins tried while it restarted.
    pub refused_down: u64,
    pub restarts: u32,
}

/// One target's admission of logins.
#[derive(Debug)]
pub struct Admission {
    capacity: LoginCapacity,
    /// When each login in progress ends (reserved at `concurrent`).
    ending: Vec<Instant>,
    /// GCRA's theoretical arrival time of the next login.
    next_at: Instant,
    /// The second being counted toward the peak, and its count.
    second: u64,
    in_second: u32,
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
        if capacity.per_second == 0 || capacity.per_second > 1_000_000 {
            return Err(CapacityError::PerSecond(capacity.per_second));
        }
        Ok(Admission {
            capacity,
            ending: Vec::with_capacity(usize::from(capacity.concurrent)),
            next_at: Instant::ZERO,
            second: 0,
            in_second: 0,
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

    /// The time between two logins at the long-run rate.
    fn interval(&self) -> Duration {
        Duration::from_us(1_000_000 / u64::from(self.capacity.per_second))
    }

    /// A login arriving at `now` that, accepted, is in progress for `takes`.
    pub fn try_login(&mut self, now: Instant, takes: Duration) -> Result<(), LoginRejected> {
        if now < self.down_until {
            self.stats.refused_down += 1;
            return Err(LoginRejected::Restarting);
        }
        self.ending.retain(|&end| end > now);
        if self.ending.len() >= usize::from(self.capacity.concurrent) {
            self.stats.refused_busy += 1;
            return Err(LoginRejected::Busy("logins in progress"));
        }
        let interval = self.interval();
        // A second's worth of logins may come early: the burst a bucket of that size allows.
        let early = Duration::from_us(interval.as_us() * u64::from(self.capacity.per_second - 1));
        if self.next_at.saturating_since(now) > early {
            self.stats.refused_rate += 1;
            return Err(LoginRejected::Busy("logins per second"));
        }
        self.next_at = self.next_at.max(now) + interval;
        self.ending.push(now + takes);
        self.stats.accepted += 1;
        let second = now.as_us() / 1_000_000;
        if second != self.second {
            (self.second, self.in_second) = (second, 0);
        }
        self.in_second += 1;
        self.stats.peak_per_second = self.stats.peak_per_second.max(self.in_second);
        Ok(())
    }

    /// The target restarts at `now` and answers no login for `down_for`: every connection
    /// to it is gone (its ports see the count of restarts change), and every login in
    /// progress with them.
    pub fn restart(&mut self, now: Instant, down_for: Duration) {
        self.ending.clear();
        self.down_until = now + down_for;
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
        })
        .expect("a capacity that can be")
    }

    #[test]
    fn a_capacity_of_nothing_or_too_much_is_refused_by_its_key() {
        let bad = |concurrent, per_second| {
            Admission::new(LoginCapacity {
                concurrent,
                per_second,
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
            Some("logins_per_second must be 1..=1000000, not 0")
        );
        assert_eq!(
            bad(1, 1_000_001),
            Some(CapacityError::PerSecond(1_000_001).to_string())
        );
        assert_eq!((bad(4_096, 1_000_000), bad(1, 1)), (None, None));
    }

    /// A second's worth at once, then one every interval: the long-run rate is the capacity.
    #[test]
    fn a_burst_of_one_seconds_worth_then_the_rate() {
        let mut a = admission(100, 4);
        let results: Vec<bool> = (0..6)
            .map(|_| a.try_login(at(0), NO_TIME).is_ok())
            .collect();
        assert_eq!(results, [true, true, true, true, false, false]);
        // Four accepted at 0 ms: the next may come at 1 s minus the burst, 250 ms.
        assert!(a.try_login(at(249), NO_TIME).is_err());
        assert!(a.try_login(at(250), NO_TIME).is_ok());
        assert!(a.try_login(at(250), NO_TIME).is_err());
        assert!(a.try_login(at(500), NO_TIME).is_ok());
        let s = a.stats();
        assert_eq!(
            (
                s.accepted,
                s.refused_rate,
                s.refused_busy,
                s.peak_per_second
            ),
            (6, 4, 0, 6)
        );
        // Idle for long, it takes a whole burst again, counted in its own second.
        let burst = (0..5)
            .filter(|_| a.try_login(at(10_000), NO_TIME).is_ok())
            .count();
        assert_eq!((burst, a.stats().peak_per_second), (4, 6));
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
    }

    /// The peak counts logins within one second of the clock, not across two.
    #[test]
    fn the_peak_is_per_second_of_the_clock() {
        let mut a = admission(100, 1_000);
        for ms in [998, 999, 1_000, 1_001, 1_002] {
            assert!(a.try_login(at(ms), NO_TIME).is_ok());
        }
        assert_eq!(a.stats().peak_per_second, 3);
    }

    #[test]
    fn ports_of_one_target_share_its_admission() {
        let shared = SharedAdmission::new(LoginCapacity {
            concurrent: 1,
            per_second: 100,
        })
        .expect("valid");
        let other = shared.clone();
        assert!(shared.lock().try_login(at(0), Duration::from_ms(5)).is_ok());
        assert!(other.lock().try_login(at(1), Duration::from_ms(5)).is_err());
        assert_eq!(other.lock().capacity().concurrent, 1);
        assert_eq!(shared.lock().stats().refused_busy, 1);
    }
}
