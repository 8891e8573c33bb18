//! The fleet's subnet manager (docs/design.md §11): a master and a standby, the standby's
//! polls of the master, the sweep a new master makes before it sets ClientReregister on
//! every port, and the SA it answers queries with.

use hcabus::{Duration, Instant};

/// The subnet manager and its SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmSetup {
    /// The standby polls the master this often (OpenSM's `sminfo_polling_timeout`, 10 s)...
    pub poll_interval: Duration,
    /// ...and takes over after this many polls go unanswered (`polling_retry_number`, 4).
    pub polls_missed: u32,
    /// A sweep of the fabric takes this long, plus `sweep_per_host` for each host: it grows
    /// with the fabric's size.
    pub sweep_base: Duration,
    pub sweep_per_host: Duration,
    /// Queries the SA answers in any one second.
    pub sa_queries_per_second: u32,
}

impl Default for SmSetup {
    fn default() -> Self {
        SmSetup {
            poll_interval: Duration::from_ms(10_000),
            polls_missed: 4,
            sweep_base: Duration::from_ms(500),
            sweep_per_host: Duration::from_us(2_000),
            sa_queries_per_second: 2_000,
        }
    }
}

impl SmSetup {
    /// When the standby takes over from a master that failed at `failed_at`: at its
    /// `polls_missed`th unanswered poll (polls at whole multiples of the interval).
    pub fn takeover_at(&self, failed_at: Instant) -> Instant {
        let every = self.poll_interval.as_us().max(1);
        let first = (failed_at.as_us() / every + 1) * every;
        let last = first + u64::from(self.polls_missed.saturating_sub(1)) * every;
        Instant::from_us(last)
    }

    /// How long a sweep of a fabric of `hosts` takes.
    pub fn sweep(&self, hosts: u32) -> Duration {
        Duration::from_us(self.sweep_base.as_us() + self.sweep_per_host.as_us() * u64::from(hosts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standby_takes_over_at_its_fourth_missed_poll_and_sweeps_by_the_fabric_size() {
        let sm = SmSetup::default();
        // Failed at 95 s: polls at 100, 110, 120 and 130 s go unanswered.
        assert_eq!(
            sm.takeover_at(Instant::from_ms(95_000)),
            Instant::from_ms(130_000)
        );
        // Failed right at a poll: that poll was answered.
        assert_eq!(
            sm.takeover_at(Instant::from_ms(100_000)),
            Instant::from_ms(140_000)
        );
        assert_eq!(sm.sweep(1_000), Duration::from_ms(2_500));
    }
}
