//! The fleet's subnet manager (docs/design.md §11): a master and a standby, the standby's
//! polls of the master, the sweep a new master makes before it sets ClientReregister on
//! every port, and the SA it answers queries with.

use hcabus::{Duration, Instant};
use hcabus_lab::subnet::SaSetup;

/// The subnet manager and its SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmSetup {
    /// The standby polls the master this often (OpenSM's `sminfo_polling_timeout`, 10 s)...
    pub poll_interval: Duration,
    /// ...and takes over once more than this many went unanswered (`polling_retry_number`,
    /// 4): OpenSM counts the polls it sent since the master last answered, and at each tick
    /// takes over if that count is above the setting, else polls again.
    pub polls_missed: u32,
    /// A sweep of the fabric takes this long, plus `sweep_per_host` for each host: it grows
    /// with the fabric's size.
    pub sweep_base: Duration,
    pub sweep_per_host: Duration,
    /// The SA's queue: its rate, its receive queue, when it answers BUSY.
    pub sa: SaSetup,
}

impl Default for SmSetup {
    fn default() -> Self {
        SmSetup {
            poll_interval: Duration::from_ms(10_000),
            polls_missed: 4,
            sweep_base: Duration::from_ms(500),
            sweep_per_host: Duration::from_us(2_000),
            sa: SaSetup::default(),
        }
    }
}

impl SmSetup {
    /// When the standby takes over from a master that failed at `failed_at`: at the tick
    /// after its `polls_missed + 1`th unanswered poll (polls at whole multiples of the
    /// interval; `osm_sm_state_mgr_polling_callback`: `retry_number >
    /// polling_retry_number`).
    pub fn takeover_at(&self, failed_at: Instant) -> Instant {
        let every = self.poll_interval.as_us().max(1);
        let first = (failed_at.as_us() / every + 1) * every;
        let last = first + u64::from(self.polls_missed.saturating_add(1)) * every;
        Instant::from_us(last)
    }

    /// How much later than the first host's the sweep brings host `i`'s ports Active:
    /// OpenSM configures ports one after another, `sweep_per_host` each, in the order it
    /// walks the fabric (here the hosts' own), so a fabric-wide event brings ten thousand
    /// ports back over seconds, not in one microsecond.
    pub fn reaches(&self, i: u32) -> Duration {
        Duration::from_us(self.sweep_per_host.as_us() * u64::from(i))
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
    fn the_standby_takes_over_after_its_fifth_missed_poll_and_sweeps_by_the_fabric_size() {
        let sm = SmSetup::default();
        // Failed at 95 s: polls at 100, 110, 120, 130 and 140 s go unanswered; at the tick
        // of 150 s five are out, more than `polling_retry_number`.
        assert_eq!(
            sm.takeover_at(Instant::from_ms(95_000)),
            Instant::from_ms(150_000)
        );
        // Failed right at a poll: that poll was answered.
        assert_eq!(
            sm.takeover_at(Instant::from_ms(100_000)),
            Instant::from_ms(160_000)
        );
        assert_eq!(sm.sweep(1_000), Duration::from_ms(2_500));
    }
}
