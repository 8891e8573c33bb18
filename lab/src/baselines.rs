//! Behaviours the fleet compares the product's with, kept out of the product: the rules a
//! refused login could be retried by instead of the shipped backoff
//! (`ibal::retry::RetryPolicy::Backoff`), given to the product as its `WaitRule`s, and the
//! naive IPoIB's answer to an SA timeout, given as an `SaTimeoutRule`, and dm-multipath's path
//! checker, given as a `PollRule`.

use hcabus::{Duration, Instant};
use ibal::disk::{PathTimeout, PollRule};
use ibal::ipoib::{OnSaTimeout, SaTimeoutRule};
use ibal::retry::{capped_exponential, RetryPolicy, WaitRule};

/// The shipped backoff's waits without their jitter: hosts refused together retry together.
pub const NO_JITTER: RetryPolicy = RetryPolicy::Rule(WaitRule {
    name: "no_jitter",
    param: Duration::ZERO,
    wait: no_jitter,
});

const FIXED: &str = "fixed";
const CHECKER: &str = "checker";

/// dm-multipath's path checker: every `interval`, a path whose command has been out a whole
/// interval is given up (its detection takes one to two intervals).
pub const fn checker(interval: Duration) -> PathTimeout {
    PathTimeout::Polled(PollRule {
        name: CHECKER,
        timeout: interval,
        noticed: next_tick,
    })
}

/// The checker's first tick at or after `due`.
fn next_tick(due: Instant, interval: Duration) -> Instant {
    let q = interval.as_us().max(1);
    Instant::from_us(due.as_us().div_ceil(q) * q)
}

/// The interval of a [`checker`]; `None` for any other path timeout.
pub fn checker_interval(timeout: PathTimeout) -> Option<Duration> {
    match timeout {
        PathTimeout::Polled(r) if r.name == CHECKER => Some(r.timeout),
        _ => None,
    }
}

/// The naive IPoIB (the 2008 Windows one): it takes its first SA timeout, and every one
/// after, for a hung adapter and asks for the adapter's reset.
pub const NAIVE_IPOIB: OnSaTimeout = OnSaTimeout::Rule(SaTimeoutRule {
    name: "naive_ipoib",
    hung_at: |_| true,
});

fn no_jitter(refusals: u32, _: Duration) -> Duration {
    capped_exponential(refusals)
}

fn fixed_wait_rule(_: u32, wait: Duration) -> Duration {
    wait
}

/// A fixed `wait` between attempts, no jitter (NVMe-oF's `reconnect_delay`, 10 s).
pub const fn fixed(wait: Duration) -> RetryPolicy {
    RetryPolicy::Rule(WaitRule {
        name: FIXED,
        param: wait,
        wait: fixed_wait_rule,
    })
}

/// The wait of a [`fixed`] policy; `None` for any other.
pub fn fixed_wait(policy: RetryPolicy) -> Option<Duration> {
    match policy {
        RetryPolicy::Rule(r) if r.name == FIXED => Some(r.param),
        RetryPolicy::Rule(_) | RetryPolicy::Backoff => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_baseline_waits_its_own_way() {
        let waits = |p: RetryPolicy| match p {
            RetryPolicy::Rule(r) => (1..=12).map(|n| (r.wait)(n, r.param).as_us()).collect(),
            RetryPolicy::Backoff => std::vec::Vec::new(),
        };
        let plain: std::vec::Vec<u64> = waits(NO_JITTER);
        assert_eq!(&plain[..3], &[1_000, 2_000, 4_000]);
        assert_eq!(plain.last(), Some(&1_000_000), "capped");
        let ten = fixed(Duration::from_ms(10_000));
        assert!(waits(ten).iter().all(|w| *w == 10_000_000));
        assert_eq!((NO_JITTER.name(), ten.name()), ("no_jitter", "fixed"));
        assert_eq!(fixed_wait(ten), Some(Duration::from_ms(10_000)));
        assert_eq!(fixed_wait(NO_JITTER), None);
        assert_eq!(fixed_wait(RetryPolicy::Backoff), None);
        assert_ne!(
            ten,
            fixed(Duration::from_ms(1)),
            "the wait is part of the rule"
        );
    }

    #[test]
    fn the_naive_ipoib_takes_every_sa_timeout_for_a_hung_adapter() {
        let OnSaTimeout::Rule(rule) = NAIVE_IPOIB else {
            panic!("a rule of the lab's own");
        };
        assert!(
            (1..=5).all(rule.hung_at),
            "the first timeout and every one after"
        );
        assert_ne!(NAIVE_IPOIB, OnSaTimeout::Retry);
    }

    #[test]
    fn the_checker_notices_a_give_up_at_its_next_tick() {
        let every_50 = checker(Duration::from_ms(50));
        let PathTimeout::Polled(rule) = every_50 else {
            panic!("a rule of the lab's own");
        };
        let at = |ms| Instant::from_ms(ms);
        let tick = |due| (rule.noticed)(due, rule.timeout);
        assert_eq!(
            (tick(at(100)), tick(at(101)), tick(at(149))),
            (at(100), at(150), at(150))
        );
        assert_eq!(checker_interval(every_50), Some(Duration::from_ms(50)));
        assert_eq!(checker_interval(PathTimeout::DEFAULT), None);
        assert_eq!(every_50.cap(), Some(Duration::from_ms(50)));
    }
}
