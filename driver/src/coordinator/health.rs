//! The health reporter (SPEC §8 QUERY_HEALTH, in the manner of devlink health): what the
//! health monitor found, how often, and whether the device recovered. Bookkeeping only: it
//! decides nothing. The coordinator feeds it as it reads health, meets a fatal cause and
//! concludes a reset; it is history, so the model check's fingerprint leaves it out.

use crate::hca::HealthSample;
use crate::time::Instant;
use crate::types::ResetReason;

/// One fatal error the bus found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthError {
    pub at: Instant,
    /// Catastrophic, command timeout or health stall.
    pub cause: ResetReason,
    /// The catastrophic-error buffer's word for a catastrophic error read by the health
    /// poll; 0 otherwise (an interrupt, an unreadable device, a timeout, a stall).
    pub syndrome: u32,
}

/// What QUERY_HEALTH reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthReport {
    /// Fatal errors found: each catastrophic error, command timeout or stall that started
    /// a reset or made one fatal.
    pub errors: u64,
    /// Resets that restored the device after an error.
    pub recovers: u64,
    pub last_error: Option<HealthError>,
    /// An error was found and no reset has restored the device since.
    pub open: bool,
    /// The firmware health counter as last read (`None`: never read).
    pub counter: Option<u32>,
    /// When a read last found the counter different from the read before (the first read
    /// counts as a move).
    pub counter_moved_at: Option<Instant>,
    /// The catastrophic word of the last read that had one, until an error takes it.
    syndrome: u32,
}

impl HealthReport {
    /// A health read answered.
    pub(super) fn sample(&mut self, now: Instant, s: HealthSample) {
        if self.counter != Some(s.counter) {
            self.counter_moved_at = Some(now);
        }
        self.counter = Some(s.counter);
        if s.catastrophic != 0 {
            self.syndrome = s.catastrophic;
        }
    }

    /// A fatal cause was found.
    pub(super) fn error(&mut self, now: Instant, cause: ResetReason) {
        let syndrome = match cause {
            ResetReason::Catastrophic => core::mem::take(&mut self.syndrome),
            _ => 0,
        };
        self.errors += 1;
        self.open = true;
        self.last_error = Some(HealthError {
            at: now,
            cause,
            syndrome,
        });
    }

    /// A reset restored the device: an open error is recovered.
    pub(super) fn restored(&mut self) {
        if self.open {
            self.recovers += 1;
            self.open = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(catastrophic: u32, counter: u32) -> HealthSample {
        HealthSample {
            catastrophic,
            counter,
        }
    }

    #[test]
    fn the_counter_moves_only_when_it_changes() {
        let mut r = HealthReport::default();
        r.sample(Instant::from_ms(1_000), sample(0, 5));
        assert_eq!(r.counter_moved_at, Some(Instant::from_ms(1_000)));
        r.sample(Instant::from_ms(2_000), sample(0, 5));
        assert_eq!(
            (r.counter, r.counter_moved_at),
            (Some(5), Some(Instant::from_ms(1_000)))
        );
        r.sample(Instant::from_ms(3_000), sample(0, 6));
        assert_eq!(r.counter_moved_at, Some(Instant::from_ms(3_000)));
    }

    #[test]
    fn a_catastrophic_error_carries_its_syndrome_once_and_a_restore_recovers_it() {
        let mut r = HealthReport::default();
        r.sample(Instant::from_ms(1), sample(0xbad, 1));
        r.error(Instant::from_ms(1), ResetReason::Catastrophic);
        assert_eq!(
            r.last_error,
            Some(HealthError {
                at: Instant::from_ms(1),
                cause: ResetReason::Catastrophic,
                syndrome: 0xbad
            })
        );
        assert!(r.open);
        r.error(Instant::from_ms(2), ResetReason::Catastrophic);
        assert_eq!(r.last_error.map(|e| e.syndrome), Some(0), "not read again");
        r.restored();
        r.restored();
        assert_eq!((r.errors, r.recovers, r.open), (2, 1, false));
        r.error(Instant::from_ms(3), ResetReason::HealthStall);
        assert_eq!(r.last_error.map(|e| e.syndrome), Some(0));
    }
}
