//! The workload's I/O over time, for the timeline's I/O lane: per interval, what completed,
//! what failed, how deep the queue got and how long the slowest I/O had waited.
//!
//! The buckets are reserved and written once when the workload is built, so recording
//! never allocates or faults a page in a reset window. A run longer than the buckets
//! cover merges neighbours in place and doubles the interval, so any run fits in the same
//! memory at a coarser grain.

use std::vec::Vec;

use hcabus::Instant;

/// Buckets kept: at the starting 1 ms interval, a second of run; a 10 s run at 16 ms.
pub const SERIES_BUCKETS: usize = 1024;
/// The starting interval.
pub const SERIES_START_US: u64 = 1_000;

/// One interval of the workload's I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoBucket {
    /// Something happened in it (an I/O accepted or completed).
    pub touched: bool,
    pub completed: u32,
    pub failed: u32,
    /// The most I/Os outstanding at once in it.
    pub peak_outstanding: u32,
    /// Outstanding after its last change; carries over an interval where nothing moved.
    pub last_outstanding: u32,
    /// The longest wait of an I/O that completed or failed in it.
    pub max_latency_us: u64,
}

impl IoBucket {
    /// `self` followed by `later`, as one interval.
    fn merge(self, later: IoBucket) -> IoBucket {
        if !later.touched {
            return self;
        }
        if !self.touched {
            return later;
        }
        IoBucket {
            touched: true,
            completed: self.completed.saturating_add(later.completed),
            failed: self.failed.saturating_add(later.failed),
            peak_outstanding: self.peak_outstanding.max(later.peak_outstanding),
            last_outstanding: later.last_outstanding,
            max_latency_us: self.max_latency_us.max(later.max_latency_us),
        }
    }
}

/// The per-interval series of one workload.
#[derive(Debug, Clone)]
pub struct IoSeries {
    interval_us: u64,
    buckets: Vec<IoBucket>,
}

impl Default for IoSeries {
    fn default() -> Self {
        Self::new()
    }
}

impl IoSeries {
    pub fn new() -> Self {
        Self::with_buckets(SERIES_BUCKETS)
    }

    /// A series of `n` buckets (at least 2): fewer for a host of a fleet, whose series no
    /// picture draws, than a host of its own.
    pub fn with_buckets(n: usize) -> Self {
        IoSeries {
            interval_us: SERIES_START_US,
            // Written, not only reserved: `vec!` of a struct clones into every slot.
            buckets: std::vec![IoBucket::default(); n.max(2)],
        }
    }

    /// How long each bucket is.
    pub fn interval_us(&self) -> u64 {
        self.interval_us
    }

    /// Every bucket, the first starting at time zero.
    pub fn buckets(&self) -> &[IoBucket] {
        &self.buckets
    }

    /// The bucket holding `at`, coarsening the series until one does.
    fn bucket(&mut self, at: Instant) -> &mut IoBucket {
        let t = at.as_us();
        // Each coarsening doubles the interval: a bounded number of them reaches any time.
        for _ in 0..u64::BITS {
            if t / self.interval_us < self.buckets.len() as u64 {
                break;
            }
            self.coarsen();
        }
        &mut self.buckets[(t / self.interval_us) as usize]
    }

    /// Each pair of buckets becomes one of twice the interval, in place.
    fn coarsen(&mut self) {
        let n = self.buckets.len();
        for i in 0..n / 2 {
            self.buckets[i] = self.buckets[2 * i].merge(self.buckets[2 * i + 1]);
        }
        for b in &mut self.buckets[n / 2..] {
            *b = IoBucket::default();
        }
        self.interval_us *= 2;
    }

    /// The queue is `outstanding` deep at `at`.
    pub fn depth(&mut self, at: Instant, outstanding: usize) {
        let depth = u32::try_from(outstanding).unwrap_or(u32::MAX);
        let b = self.bucket(at);
        b.peak_outstanding = if b.touched {
            b.peak_outstanding.max(depth)
        } else {
            depth
        };
        b.last_outstanding = depth;
        b.touched = true;
    }

    /// An I/O that waited `latency_us` completed (`ok`) or failed at `at`.
    pub fn completion(&mut self, at: Instant, ok: bool, latency_us: u64) {
        let b = self.bucket(at);
        if ok {
            b.completed = b.completed.saturating_add(1);
        } else {
            b.failed = b.failed.saturating_add(1);
        }
        b.max_latency_us = b.max_latency_us.max(latency_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pile_up_shows_as_depth_without_completions_then_a_slow_completion() {
        let mut s = IoSeries::new();
        s.depth(Instant::from_us(100), 1);
        s.depth(Instant::from_us(200), 0);
        s.completion(Instant::from_us(200), true, 100);
        for k in 0..8 {
            s.depth(Instant::from_ms(2 + k), k as usize + 1);
        }
        s.depth(Instant::from_ms(20), 7);
        s.completion(Instant::from_ms(20), true, 18_000);
        let b = s.buckets();
        assert_eq!((b[0].completed, b[0].peak_outstanding), (1, 1));
        assert_eq!(b[0].last_outstanding, 0);
        assert_eq!((b[9].completed, b[9].peak_outstanding), (0, 8));
        assert!(!b[12].touched, "nothing moved at 12 ms");
        assert_eq!((b[20].completed, b[20].max_latency_us), (1, 18_000));
    }

    #[test]
    fn a_long_run_coarsens_in_place_and_keeps_every_count() {
        let mut s = IoSeries::new();
        let before = s.buckets().as_ptr();
        let end_ms = 10_000u64;
        for ms in 0..end_ms {
            s.depth(Instant::from_ms(ms), (ms % 5) as usize);
            s.completion(Instant::from_ms(ms), ms % 100 != 0, ms);
        }
        assert_eq!(s.buckets().as_ptr(), before, "no reallocation");
        assert_eq!(s.buckets().len(), SERIES_BUCKETS);
        assert_eq!(s.interval_us(), 16_000, "10 s fits 1024 buckets at 16 ms");
        let completed: u64 = s.buckets().iter().map(|b| u64::from(b.completed)).sum();
        let failed: u64 = s.buckets().iter().map(|b| u64::from(b.failed)).sum();
        assert_eq!((completed, failed), (end_ms - 100, 100));
        let peak = s.buckets().iter().map(|b| b.peak_outstanding).max();
        assert_eq!(peak, Some(4));
        let worst = s.buckets().iter().map(|b| b.max_latency_us).max();
        assert_eq!(worst, Some(end_ms - 1));
    }
}
