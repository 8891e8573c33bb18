//! Time as the core sees it: passed in by the host, never read from a clock.
//!
//! Microsecond resolution is enough for acknowledgement latencies and far finer than any
//! deadline the protocol uses; a u64 of microseconds lasts 584 000 years.

use core::fmt;
use core::ops::{Add, Sub};

/// A point in the host's monotonic time line, in microseconds since the host started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    pub const ZERO: Instant = Instant { micros: 0 };

    pub const fn from_us(micros: u64) -> Self {
        Instant { micros }
    }

    pub const fn from_ms(millis: u64) -> Self {
        Instant {
            micros: millis.saturating_mul(1000),
        }
    }

    pub const fn as_us(self) -> u64 {
        self.micros
    }

    pub const fn as_ms(self) -> u64 {
        self.micros / 1000
    }

    /// Time elapsed since `earlier`, zero if `earlier` is in the future (hosts on real clocks
    /// may hand in slightly out-of-order instants from different threads).
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_us(self.micros.saturating_sub(earlier.micros))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}

/// A span of time in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    micros: u64,
}

impl Duration {
    pub const ZERO: Duration = Duration { micros: 0 };
    /// Longer than anything waits: a bound that never passes.
    pub const MAX: Duration = Duration { micros: u64::MAX };

    pub const fn from_us(micros: u64) -> Self {
        Duration { micros }
    }

    pub const fn from_ms(millis: u64) -> Self {
        Duration {
            micros: millis.saturating_mul(1000),
        }
    }

    pub const fn as_us(self) -> u64 {
        self.micros
    }

    pub const fn as_ms(self) -> u64 {
        self.micros / 1000
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant::from_us(self.micros.saturating_add(rhs.micros))
    }
}

impl Add<Duration> for Duration {
    type Output = Duration;
    /// Saturating: a sum of bounds past the time line's end is a bound that never passes.
    fn add(self, rhs: Duration) -> Duration {
        Duration::from_us(self.micros.saturating_add(rhs.micros))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant::from_us(self.micros.saturating_sub(rhs.micros))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.micros >= 1000 {
            write!(f, "{}.{:03}ms", self.micros / 1000, self.micros % 1000)
        } else {
            write!(f, "{}us", self.micros)
        }
    }
}
