//! A reliable connection's transport timer (InfiniBand Architecture Specification vol. 1,
//! 9.7.6.1.3 "Local ACK timeout", C9-140 to C9-142): how long the requester of an RC queue
//! pair waits for an acknowledgement before it sends again, and how often it does before it
//! completes the work request in error (retry exceeded) and moves the queue pair to the
//! error state, which flushes everything else it holds.
//!
//! The first bound on every command a disk sends: a route that swallows what is sent ends
//! the command here, from the adapter's own settings, before the initiator's own bound.

use crate::time::Duration;

/// The local ACK timeout exponent and the retry count of the adapter's reliable connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RcTransport {
    /// T_tr = 4.096 us x 2^`local_ack_timeout` (5 bits); 0 means no timer at all: a
    /// requester that never gives up, and never sends again.
    pub local_ack_timeout: u8,
    /// Retransmissions after the first send (3 bits, 0 to 7).
    pub retry_count: u8,
}

/// Why transport settings were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("the local ACK timeout is 5 bits: 0 (none) to 31")]
    AckTimeout,
    #[error("the retry count is 3 bits: 0 to 7")]
    RetryCount,
}

impl RcTransport {
    /// 67.1 ms and 7 retries: the retry count ib_srp asks for (`tl_retry_count`), and a
    /// timeout at the low end of what fabrics configure (the subnet manager's packet
    /// lifetime plus one: 67 ms to 2 s in the field).
    pub const DEFAULT: RcTransport = RcTransport {
        local_ack_timeout: 14,
        retry_count: 7,
    };

    /// Checked settings.
    pub const fn new(local_ack_timeout: u8, retry_count: u8) -> Result<Self, TransportError> {
        if local_ack_timeout > 31 {
            return Err(TransportError::AckTimeout);
        }
        if retry_count > 7 {
            return Err(TransportError::RetryCount);
        }
        Ok(RcTransport {
            local_ack_timeout,
            retry_count,
        })
    }

    /// T_tr, the wait for an acknowledgement; `None`: no timer (0).
    pub const fn ack_timeout(&self) -> Option<Duration> {
        if self.local_ack_timeout == 0 || self.local_ack_timeout > 31 {
            return None;
        }
        Some(Duration::from_us(
            (4096u64 << self.local_ack_timeout) / 1000,
        ))
    }

    /// When the requester sends a message first sent `k` timeouts ago again: the `k`-th
    /// transmission after the first, for `k` in `1..=retry_count`.
    pub fn retransmission(&self, k: u8) -> Option<Duration> {
        let t = self.ack_timeout()?;
        (k <= self.retry_count).then(|| Duration::from_us(t.as_us() * u64::from(k)))
    }

    /// How long after its first transmission an unacknowledged send completes in error, as
    /// the simulated adapter runs its timer: one timeout after the last retransmission,
    /// (retry count + 1) x T_tr. `None`: never.
    pub fn retry_budget(&self) -> Option<Duration> {
        let t = self.ack_timeout()?;
        Some(Duration::from_us(
            t.as_us() * (u64::from(self.retry_count) + 1),
        ))
    }

    /// The longest any adapter may take to complete a reliable send, in success or in error:
    /// the specification lets each timeout run between T_tr and 4 x T_tr (C9-141), so
    /// (retry count + 1) x 4 x T_tr. What a driver may rely on whatever the adapter: past it a
    /// send not completed means the adapter moves nothing. `None`: no bound (no timer).
    pub fn completion_bound(&self) -> Option<Duration> {
        self.retry_budget()
            .map(|b| Duration::from_us(b.as_us().saturating_mul(4)))
    }
}

impl Default for RcTransport {
    fn default() -> Self {
        RcTransport::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_follows_the_specification_and_zero_is_none() {
        let t = RcTransport::DEFAULT;
        assert_eq!(t.ack_timeout(), Some(Duration::from_us(67_108)));
        assert_eq!(t.retry_budget(), Some(Duration::from_us(8 * 67_108)));
        assert_eq!(t.completion_bound(), Some(Duration::from_us(32 * 67_108)));
        assert_eq!(t.retransmission(1), Some(Duration::from_us(67_108)));
        assert_eq!(t.retransmission(7), Some(Duration::from_us(7 * 67_108)));
        assert_eq!(t.retransmission(8), None, "seven retries, no eighth");
        let none = RcTransport::new(0, 7).expect("valid");
        assert_eq!(
            (
                none.ack_timeout(),
                none.retry_budget(),
                none.retransmission(1)
            ),
            (None, None, None)
        );
        let quick = RcTransport::new(1, 0).expect("valid");
        assert_eq!(quick.ack_timeout(), Some(Duration::from_us(8)));
        assert_eq!(
            quick.retry_budget(),
            quick.ack_timeout(),
            "one send, no retry"
        );
        let slowest = RcTransport::new(31, 7).expect("valid");
        assert_eq!(
            slowest.ack_timeout(),
            Some(Duration::from_us(8_796_093_022))
        );
        assert_eq!(RcTransport::new(32, 0), Err(TransportError::AckTimeout));
        assert_eq!(RcTransport::new(14, 8), Err(TransportError::RetryCount));
    }
}
