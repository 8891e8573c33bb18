//! The workload's latencies as a log-linear histogram: percentiles (p99, p99.9) for the
//! failover benchmark without keeping each I/O. Fixed memory, written at creation, so
//! recording never allocates. (HdrHistogram is the crate for this; it is not in the offline
//! registry this project builds from, and 40 lines do what the benchmark needs.)

/// Sub-buckets per power of two: a percentile is off by at most 1/16 of its value.
const SUB: usize = 16;
/// Buckets of 16 per power of two: values up to about 2^43 us (100 days) are told apart.
const POWERS: usize = 40;

/// Counts of latencies in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: [u32; SUB * POWERS],
    total: u64,
    /// The largest value recorded: no percentile is above it.
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: [0; SUB * POWERS],
            total: 0,
            max: 0,
        }
    }
}

/// The bucket of `us`: below 16 us one per microsecond, above it 16 per power of two.
fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let power = 63 - us.leading_zeros() as usize; // >= 4
    let sub = ((us >> (power - 4)) & (SUB as u64 - 1)) as usize;
    ((power - 3) * SUB + sub).min(SUB * POWERS - 1)
}

/// The largest latency bucket `i` holds.
fn upper(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let power = i / SUB + 3;
    let sub = (i % SUB) as u64;
    ((SUB as u64 + sub + 1) << (power - 4)) - 1
}

impl LatencyHistogram {
    pub fn record(&mut self, us: u64) {
        let c = &mut self.counts[bucket(us)];
        *c = c.saturating_add(1);
        self.total += 1;
        self.max = self.max.max(us);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest latency recorded (0 when none was).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The latency `per_million` millionths of the I/Os were at most (rounded up to its
    /// bucket's top, never above the largest recorded); 0 when none was recorded.
    pub fn percentile(&self, per_million: u64) -> u64 {
        let want = (self.total * per_million).div_ceil(1_000_000).max(1);
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += u64::from(n);
            if seen >= want {
                return upper(i).min(self.max);
            }
        }
        0
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a = a.saturating_add(*b);
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_falls_in_a_bucket_whose_top_is_within_a_sixteenth_above_it() {
        for us in (0..100_000).chain([1 << 30, (1 << 35) + 12_345]) {
            let top = upper(bucket(us));
            assert!(top >= us, "{us} in a bucket topped at {top}");
            assert!(top - us <= us / 16, "{us}: {top}");
        }
    }

    #[test]
    fn each_bucket_holds_up_to_its_top_and_the_next_starts_above_it() {
        for b in 0..SUB * POWERS - 1 {
            let top = upper(b);
            assert_eq!(bucket(top), b, "the top of bucket {b}, {top}, is in it");
            assert_eq!(bucket(top + 1), b + 1, "{} opens bucket {}", top + 1, b + 1);
        }
        // Past the last power covered, everything lands in the last bucket.
        let mut h = LatencyHistogram::default();
        h.record(u64::MAX);
        assert_eq!(bucket(u64::MAX), SUB * POWERS - 1);
        assert_eq!(h.percentile(500_000), upper(SUB * POWERS - 1));
    }

    #[test]
    fn percentiles_of_a_known_spread() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.percentile(990_000), 0, "empty");
        for us in 1..=1_000 {
            h.record(us);
        }
        let p50 = h.percentile(500_000);
        assert!((500..=532).contains(&p50), "{p50}");
        let p999 = h.percentile(999_000);
        assert!((999..=1_023).contains(&p999), "{p999}");
        assert_eq!(
            h.percentile(1_000_000),
            1_000,
            "never above the largest recorded"
        );
        let mut two = h.clone();
        two.add(&h);
        assert_eq!(two.count(), 2_000);
        assert_eq!(two.percentile(500_000), p50);
    }
}
