//! Every command ends (docs/design.md §7 "Every command ends"): the initiator's own bound on
//! one command, above the transport's, and what the report judges a command by.
//!
//! A command is bounded twice, as on real stacks. The adapter's transport ends a send the
//! route swallows ([`RcTransport`]: retry exceeded, the queue pair in error, everything else
//! flushed). Above it, a command the target took and never answered (a target that lost the
//! connection, a transport with no timer) is given up at the command bound: the target is
//! told to abort it, and an abort unanswered drops the connection (the client's escalation),
//! which takes every command back to be sent again after the next login. Taking a command
//! back re-drives it; it never fails it upward.

use hcabus::{Duration, Instant};

use super::rtt::{PathTimeout, DEFAULT_PATH_TIMEOUT_MIN};
use super::SrpDisk;

/// The command bound's ceiling: the SCSI layer's command timeout (Linux's `sd` default, and
/// ib_srp's least `rq_tmo`); the `command_timeout_ms` key sets it.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_ms(30_000);

/// Above the path's learned timeout: a command out this many of them has failed, not
/// straggled (RFC 6298's timer doubles twice).
const BOUND_TIMEOUTS: u64 = 4;

/// Above the transport's completion bound, as ib_srp sets its request timeout (`rq_tmo`):
/// the transport ends what it can first.
const TRANSPORT_MARGIN: Duration = Duration::from_ms(1_000);

/// Times a data disk re-drives one I/O past the command bound before it fails it upward as
/// retryable: SCSI's disk driver retries a timed-out command five times (`SD_MAX_RETRIES`).
/// The paging path never fails one: it re-drives while the device is recoverable.
pub const MAX_BOUND_STRIKES: u8 = 5;

/// The least time an ABORT TASK is given before its connection is dropped.
const ABORT_TIMEOUT_MIN: Duration = Duration::from_ms(500);

/// Past the full escalation (the bound, then an unanswered abort), the report's margin for
/// a wake that lands at the run's last instant.
const OVERDUE_SLACK: Duration = Duration::from_ms(10);

/// What bounds one command of a disk now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandBound {
    /// No command is out longer: past it, it is given up (ABORT TASK) and sent again.
    pub bound: Duration,
    /// An abort unanswered this long drops the connection.
    pub abort_timeout: Duration,
}

impl SrpDisk {
    /// The path's timeout as its answers say, whatever the failover mode: RFC 6298's
    /// estimate, within the adaptive floor and the bound's ceiling.
    fn learned_timeout(&self) -> Duration {
        let min = match self.config.path_timeout {
            PathTimeout::Adaptive { min, .. } => min,
            _ => DEFAULT_PATH_TIMEOUT_MIN,
        };
        self.timing
            .estimator()
            .timeout(min, self.config.command_timeout.max(min))
    }

    /// The command bound now: four of the path's learned timeouts, no less than the
    /// transport's completion bound and a second (what the transport ends, it ends first),
    /// at most the ceiling. With no transport timer, the ceiling: nothing below it ends a
    /// swallowed command.
    pub fn command_bound(&self) -> CommandBound {
        let ceiling = self.config.command_timeout;
        let learned = Duration::from_us(
            self.learned_timeout()
                .as_us()
                .saturating_mul(BOUND_TIMEOUTS),
        );
        let bound = match self.transport.completion_bound() {
            Some(t) => learned.max(t + TRANSPORT_MARGIN).min(ceiling),
            None => ceiling,
        };
        CommandBound {
            bound,
            abort_timeout: self.abort_timeout(),
        }
    }

    /// How long an ABORT TASK may go unanswered before the connection is dropped: twice the
    /// path's timeout (its fast path failover's, else the learned one), at least half a
    /// second (an abort is answered in one round trip of the route; the floor keeps a route
    /// merely slower than the timeout from losing its connection at each give-up).
    pub fn abort_timeout(&self) -> Duration {
        self.abort_timeout_holding().max(ABORT_TIMEOUT_MIN)
    }

    /// How long an ABORT TASK may go unanswered when a write waits behind the write it
    /// aborts (the fence): twice the path's timeout, without the floor. Waiting on the
    /// floor costs that write up to half a second; dropping the connection of a route that
    /// was only slow costs a login on a path that is probing anyway.
    pub fn abort_timeout_holding(&self) -> Duration {
        let t = self
            .path_timeout()
            .unwrap_or_else(|| self.learned_timeout());
        Duration::from_us(t.as_us().saturating_mul(2))
    }

    /// Commands out longer than the bound and an unanswered abort allow, as of the latest
    /// instant the disk saw: none unless something failed to end them (the report calls a
    /// run with any of them unclean).
    pub fn overdue(&self) -> u64 {
        let b = self.command_bound();
        self.slots
            .overdue(self.seen, b.bound + b.abort_timeout + OVERDUE_SLACK)
    }

    /// The disk's time moved to `now`.
    pub(super) fn see(&mut self, now: Instant) {
        self.seen = self.seen.max(now);
    }

    /// When the adapter's transport may next fail a send of this disk (a command's or an
    /// abort's, the earliest after `now`): the client looks at its completions then.
    pub fn transport_deadline(&self) -> Option<Instant> {
        let budget = self.transport.retry_budget()?;
        self.slots.transport_deadline(budget, self.seen)
    }

    /// A data disk fails upward, as retryable, each I/O given up past the command bound
    /// [`MAX_BOUND_STRIKES`] times: a target that takes a command and never answers it
    /// would otherwise be asked again for ever. The paging path re-drives for ever.
    pub(super) fn fail_struck_out(&mut self) {
        if self.config.boot {
            return;
        }
        while let Some(req) = self.slots.pop_struck_out(MAX_BOUND_STRIKES) {
            log::error!(
                "I/O {} given up past the command bound {MAX_BOUND_STRIKES} times: failed \
                 upward as retryable",
                req.id
            );
            self.stats.bound_failures += 1;
            self.complete_upward(req.id, super::IoStatus::Retryable, 0);
        }
    }

    /// A send completed in error (the queue pair is in error), taken once.
    pub(super) fn take_qp_error(&mut self) -> Option<hcabus::verbs::WcStatus> {
        self.qp_error.take()
    }
}

#[cfg(test)]
mod tests {
    use hcabus::verbs::{RcTransport, WcStatus};
    use hcabus::{Duration, Instant};

    use crate::disk::{DiskConfig, PathTimeout, SrpDisk};
    use crate::io::IoRequest;

    fn at(ms: u64) -> Instant {
        Instant::from_ms(ms)
    }

    /// A disk of `config` whose path answered a command in `rtt` (`None`: never).
    fn disk(config: DiskConfig, rtt: Option<Duration>) -> SrpDisk {
        let mut d = SrpDisk::new(config, |_, _| {});
        if let Some(rtt) = rtt {
            d.timing.answered(config.path_timeout, at(0), at(0) + rtt);
        }
        d
    }

    #[test]
    fn the_bound_is_four_learned_timeouts_within_the_transports_and_the_ceiling() {
        // 2.5 ms learned: the transport's completion bound and a second (2,147 + 1,000 ms).
        let quick = disk(DiskConfig::default(), Some(Duration::from_us(2_500)));
        let completion = RcTransport::DEFAULT.completion_bound().expect("a timer");
        assert_eq!(
            quick.command_bound().bound,
            completion + Duration::from_ms(1_000)
        );
        assert_eq!(quick.abort_timeout(), Duration::from_ms(500), "its floor");
        // Nothing learned: RFC 6298's second, four times.
        let fresh = disk(DiskConfig::default(), None);
        assert_eq!(fresh.command_bound().bound, Duration::from_ms(4_000));
        assert_eq!(fresh.abort_timeout(), Duration::from_ms(2_000));
        // A target of 2 s: 2 s + 4 x 1 s, four times, within the ceiling.
        let slow = disk(DiskConfig::default(), Some(Duration::from_ms(2_000)));
        assert_eq!(slow.command_bound().bound, Duration::from_ms(24_000));
        let capped = DiskConfig {
            command_timeout: Duration::from_ms(10_000),
            ..DiskConfig::default()
        };
        let c = disk(capped, Some(Duration::from_ms(2_000)));
        assert_eq!(c.command_bound().bound, Duration::from_ms(10_000));
        // A path's own floor counts: 1 s of margin at least, so 4 x 1.0025 s.
        let wide = DiskConfig {
            path_timeout: PathTimeout::Adaptive {
                min: Duration::from_ms(1_000),
                max: Duration::from_ms(3_000),
            },
            ..DiskConfig::default()
        };
        let w = disk(wide, Some(Duration::from_us(2_500)));
        assert_eq!(w.command_bound().bound, Duration::from_us(4_010_000));
        assert_eq!(w.abort_timeout(), Duration::from_us(2_005_000));
    }

    #[test]
    fn with_no_transport_timer_the_bound_is_the_ceiling() {
        let mut d = disk(DiskConfig::default(), Some(Duration::from_us(2_500)));
        d.transport = RcTransport::new(0, 7).expect("valid");
        assert_eq!(
            d.command_bound().bound,
            crate::disk::DEFAULT_COMMAND_TIMEOUT
        );
        d.slots
            .admit(IoRequest::stamped(1, 1, false))
            .expect("room");
        d.slots.sent(at(100));
        assert_eq!(d.transport_deadline(), None, "nothing fails it");
    }

    #[test]
    fn a_command_out_past_its_bound_and_the_abort_after_it_is_overdue() {
        let mut d = disk(DiskConfig::default(), Some(Duration::from_us(2_500)));
        d.slots
            .admit(IoRequest::stamped(1, 1, false))
            .expect("room");
        d.slots.sent(at(100));
        let b = d.command_bound();
        let limit = b.bound + b.abort_timeout + Duration::from_ms(10);
        d.see(at(100) + limit);
        assert_eq!(d.overdue(), 0, "at the limit");
        d.see(at(100) + limit + Duration::from_us(1));
        assert_eq!(d.overdue(), 1, "past it");
        d.see(at(0));
        assert_eq!(d.overdue(), 1, "the disk's time never goes back");
    }

    #[test]
    fn the_transport_deadline_is_the_oldest_unacknowledged_send_plus_the_retry_budget() {
        let mut d = disk(DiskConfig::default(), None);
        assert_eq!(d.transport_deadline(), None, "nothing out");
        d.slots
            .admit(IoRequest::stamped(1, 1, false))
            .expect("room");
        d.slots.sent(at(100));
        let budget = RcTransport::DEFAULT.retry_budget().expect("a timer");
        d.see(at(100));
        assert_eq!(d.transport_deadline(), Some(at(100) + budget));
        d.slots.send_completed(0);
        assert_eq!(d.transport_deadline(), None, "acknowledged");
        assert_eq!(d.take_qp_error(), None);
        d.qp_error = Some(WcStatus::RetryExceeded);
        assert_eq!(
            (d.take_qp_error(), d.take_qp_error()),
            (Some(WcStatus::RetryExceeded), None),
            "taken once"
        );
    }
}
