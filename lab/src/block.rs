//! Block I/O as the layer above a disk sees it: a workload that issues reads and writes at
//! a rate, and the accounting that makes loss, duplication and corruption visible.
//!
//! Every I/O has an id and a payload derived from it, so its checksum is known without
//! keeping the data. The workload remembers the checksum each block should have; a read
//! that returns anything else is corruption, a completion for an id not outstanding is a
//! duplicate, and an outstanding id the disk no longer tracks is lost.

use std::vec::Vec;

use hcabus::{Duration, Instant};
use rand::{Rng, RngCore};

use crate::pattern::*;
use ibal::io::{
    checksum_blocks, fold_block, IoCompletion, IoRequest, IoStats, IoStatus, BLOCK_SIZE,
};
use ibal::workload::{Workload, WriteData};

mod histogram;
mod series;
pub use histogram::LatencyHistogram;
pub use series::{IoBucket, IoSeries, SERIES_BUCKETS, SERIES_START_US};

/// What the workload asks of a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadConfig {
    pub iops: u32,
    /// Percentage of reads, 0..=100.
    pub read_pct: u8,
    pub lun_id: u32,
    pub n_blocks: u64,
    /// Most I/Os outstanding at once (the disk's slots).
    pub max_outstanding: usize,
    /// Large transfers among its I/Os.
    pub large: LargeIo,
    /// Buckets of its I/O series over time (`IoSeries`).
    pub series_buckets: usize,
}

/// A share of a workload's I/Os that move several blocks at once (a file's read-ahead, a
/// page-file cluster); the rest move one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LargeIo {
    /// Percentage of I/Os, 0..=100.
    pub pct: u8,
    /// Blocks each moves.
    pub blocks: u16,
}

impl LargeIo {
    pub const NONE: LargeIo = LargeIo { pct: 0, blocks: 1 };

    /// The most blocks one I/O moves: what the disk's buffers must take.
    pub fn max_blocks(&self) -> u16 {
        if self.pct > 0 {
            self.blocks.max(1)
        } else {
            1
        }
    }
}

/// Issues I/O at a steady rate and checks every completion.
#[derive(Debug, Clone)]
pub struct BlockWorkload {
    config: WorkloadConfig,
    next_at: Option<Instant>,
    next_id: u64,
    /// Refused as busy: tried again before anything new.
    retry: Option<IoRequest>,
    /// Accepted and not completed: a completion for an id not here is a duplicate.
    outstanding: Vec<IoRequest>,
    /// What each block should hold; `None` after a failed write (old or new data).
    expected: Vec<Option<u64>>,
    busy_lba: Vec<bool>,
    scratch: Vec<u8>,
    stats: IoStats,
    series: IoSeries,
    /// Every I/O's wait for its upward completion, for percentiles.
    latencies: LatencyHistogram,
}

impl BlockWorkload {
    pub fn new(config: WorkloadConfig) -> Self {
        // Room for its largest I/O's data: a write's is made without allocating.
        let mut scratch = Vec::with_capacity(usize::from(config.large.max_blocks()) * BLOCK_SIZE);
        scratch.resize(BLOCK_SIZE, 0);
        let expected = (0..config.n_blocks)
            .map(|lba| {
                fill_pattern(initial_seed(config.lun_id, lba), &mut scratch);
                Some(checksum(&scratch))
            })
            .collect();
        BlockWorkload {
            config,
            next_at: (config.iops > 0).then_some(Instant::ZERO),
            next_id: 1,
            retry: None,
            outstanding: Vec::with_capacity(config.max_outstanding),
            expected,
            busy_lba: std::vec![false; config.n_blocks as usize],
            scratch,
            stats: IoStats::default(),
            series: IoSeries::with_buckets(config.series_buckets),
            latencies: LatencyHistogram::default(),
        }
    }

    /// Its first I/O due no sooner than `at`: its host powers on then (a fleet's host that
    /// boots late), and a caller that has not started owes no I/O before.
    pub fn starting_at(mut self, at: Instant) -> Self {
        self.next_at = self.next_at.map(|t| t.max(at));
        self
    }

    pub fn stats(&self) -> &IoStats {
        &self.stats
    }

    /// Every completed or failed I/O's latency.
    pub fn latencies(&self) -> &LatencyHistogram {
        &self.latencies
    }

    /// When the oldest I/O still owed was submitted: a run's worst wait includes it.
    pub fn oldest_outstanding(&self) -> Option<Instant> {
        self.outstanding.iter().map(|o| o.submitted_at).min()
    }

    /// What completed, failed and waited, interval by interval.
    pub fn series(&self) -> &IoSeries {
        &self.series
    }

    pub fn next_at(&self) -> Option<Instant> {
        self.next_at
    }

    /// Stops issuing (the run is over, or the test wants quiet).
    pub fn stop(&mut self) {
        self.next_at = None;
    }

    /// I/Os accepted and not yet completed.
    pub fn outstanding(&self) -> impl Iterator<Item = &IoRequest> {
        self.outstanding.iter()
    }

    /// What its callers waited, as of `now`: every completed or failed I/O's latency, and
    /// each I/O still owed counted at its age. A command stuck for good is in the
    /// percentiles and the maximum, not left out of them.
    pub fn waited(&self, now: Instant) -> LatencyHistogram {
        let mut all = self.latencies.clone();
        for r in &self.outstanding {
            all.record(now.saturating_since(r.submitted_at).as_us());
        }
        all
    }

    fn interval(&self) -> Duration {
        Duration::from_us(1_000_000 / u64::from(self.config.iops.max(1)))
    }

    /// The next I/O, if one is due at `now`.
    pub fn next_request(
        &mut self,
        now: Instant,
        rng: &mut (impl Rng + ?Sized),
    ) -> Option<IoRequest> {
        if let Some(r) = self.retry.take() {
            return Some(r);
        }
        let at = self.next_at.filter(|t| *t <= now)?;
        // The tick passes whether or not an I/O can be issued in it: a full queue
        // throttles the rate, as it does for a real caller.
        self.next_at = Some(at + self.interval());
        if self.outstanding.len() >= self.config.max_outstanding {
            return None;
        }
        // Drawn only with large transfers: every other run keeps its random sequence.
        let large = self.config.large;
        let blocks = if large.pct > 0 && rng.gen_range(0..100u8) < large.pct {
            large.max_blocks()
        } else {
            1
        };
        // Free blocks: two I/Os to one block at once would make the expected data
        // ambiguous.
        let n = self.config.n_blocks;
        let start = rng.gen_range(0..n);
        let span = u64::from(blocks);
        let free = |l: u64| (l..l + span).all(|b| !self.busy_lba[b as usize]);
        let lba = (0..n)
            .map(|k| (start + k) % n)
            .find(|l| l + span <= n && free(*l))?;
        let write = rng.gen_range(0..100u8) >= self.config.read_pct;
        let id = self.next_id;
        self.next_id += 1;
        let mut req = IoRequest {
            id,
            lba,
            write,
            blocks,
            checksum: 0,
            submitted_at: now,
        };
        if write {
            self.scratch.resize(req.bytes() as usize, 0);
            write_data(&req, &mut self.scratch);
            req.checksum = checksum_blocks(&self.scratch);
        }
        Some(req)
    }

    /// What a read of `req`'s blocks must deliver, while every one of them is known.
    fn expected_read(&self, req: &IoRequest) -> Option<u64> {
        let mut blocks = self.blocks_of(req).map(|b| self.expected[b]);
        let first = blocks.next()??;
        blocks.try_fold(first, |h, b| Some(fold_block(h, b?)))
    }

    fn blocks_of(&self, req: &IoRequest) -> std::ops::Range<usize> {
        req.lba as usize..req.lba as usize + usize::from(req.blocks)
    }

    /// The disk took `req`: it now owes exactly one completion.
    pub fn accepted(&mut self, req: IoRequest) {
        self.stats.submitted += 1;
        for b in self.blocks_of(&req) {
            self.busy_lba[b] = true;
        }
        // Reserved for `max_outstanding`, which `next_request` never goes past: pushed
        // within the reserve, so it never allocates.
        self.outstanding.push(req);
        self.series.depth(req.submitted_at, self.outstanding.len());
    }

    /// The disk was busy: try `req` again next.
    pub fn refused(&mut self, req: IoRequest) {
        self.stats.busy += 1;
        self.retry = Some(req);
    }

    /// Checks one upward completion.
    pub fn complete(&mut self, c: IoCompletion, now: Instant) {
        let Some(i) = self.outstanding.iter().position(|o| o.id == c.id) else {
            self.stats.duplicated += 1;
            return;
        };
        let req = self.outstanding.swap_remove(i);
        for b in self.blocks_of(&req) {
            self.busy_lba[b] = false;
        }
        let lba = req.lba as usize;
        let latency = now.saturating_since(req.submitted_at).as_us();
        self.stats.max_latency_us = self.stats.max_latency_us.max(latency);
        self.latencies.record(latency);
        self.series.depth(now, self.outstanding.len());
        self.series
            .completion(now, c.status == IoStatus::Ok, latency);
        match c.status {
            IoStatus::Ok => {
                self.stats.completed += 1;
                if req.write && req.blocks == 1 {
                    self.expected[lba] = Some(req.checksum);
                } else if req.write {
                    for b in self.blocks_of(&req) {
                        let one = IoRequest {
                            lba: b as u64,
                            blocks: 1,
                            ..req
                        };
                        self.scratch.resize(BLOCK_SIZE, 0);
                        write_data(&one, &mut self.scratch);
                        self.expected[b] = Some(checksum(&self.scratch));
                    }
                } else if let Some(want) = self.expected_read(&req) {
                    self.stats.reads_verified += 1;
                    if want != c.checksum {
                        self.stats.read_mismatches += 1;
                    }
                }
            }
            status => {
                self.stats.failed += 1;
                self.stats.max_failed_latency_us = self.stats.max_failed_latency_us.max(latency);
                if status == IoStatus::Retryable {
                    self.stats.retryable += 1;
                }
                if req.write {
                    // The target may or may not have written them.
                    for b in self.blocks_of(&req) {
                        self.expected[b] = None;
                    }
                }
            }
        }
    }

    /// Splits every outstanding I/O into `in_flight` (`live` says a live path still holds
    /// it) and `lost` (nobody will complete it), and returns `lost`.
    pub fn count_outstanding(&mut self, live: impl Fn(u64) -> bool) -> u64 {
        self.stats = self.accounted(&live);
        self.stats.lost
    }

    /// Its statistics with every outstanding I/O counted `in_flight` or `lost` by `live`.
    fn accounted(&self, live: &dyn Fn(u64) -> bool) -> IoStats {
        let (mut in_flight, mut lost) = (0, 0);
        for o in &self.outstanding {
            if live(o.id) {
                in_flight += 1;
            } else {
                lost += 1;
            }
        }
        IoStats {
            in_flight,
            lost,
            ..self.stats
        }
    }
}

/// Writes the data of I/O `req`: each block the pattern of its id and that block.
fn write_data(req: &IoRequest, data: &mut [u8]) {
    for (k, block) in data.chunks_mut(BLOCK_SIZE).enumerate() {
        fill_pattern(write_seed(req.id, req.lba + k as u64), block);
    }
}

impl Workload for BlockWorkload {
    fn next_request(&mut self, now: Instant, rng: &mut dyn RngCore) -> Option<IoRequest> {
        BlockWorkload::next_request(self, now, rng)
    }
    fn accepted(&mut self, req: IoRequest) {
        BlockWorkload::accepted(self, req);
    }
    fn refused(&mut self, req: IoRequest) {
        BlockWorkload::refused(self, req);
    }
    fn complete(&mut self, c: IoCompletion, now: Instant) {
        BlockWorkload::complete(self, c, now);
    }
    fn next_at(&self) -> Option<Instant> {
        self.next_at
    }
    fn stats(&self) -> &IoStats {
        &self.stats
    }
    fn accounted(&self, live: &dyn Fn(u64) -> bool) -> IoStats {
        BlockWorkload::accounted(self, live)
    }
    fn write_data(&self) -> WriteData {
        write_data
    }
    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn workload() -> BlockWorkload {
        BlockWorkload::new(WorkloadConfig {
            iops: 1000,
            read_pct: 50,
            lun_id: 1,
            n_blocks: 8,
            max_outstanding: 4,
            large: LargeIo::NONE,
            series_buckets: SERIES_BUCKETS,
        })
    }

    /// Two I/Os accepted at 0 and 1 ms, the first answered at 3 ms: the workload, that
    /// answer, and the I/O still owed.
    fn two_accepted_the_first_done_at_3ms() -> (BlockWorkload, IoCompletion, IoRequest) {
        let mut w = workload();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let a = w.next_request(Instant::ZERO, &mut rng).expect("due");
        w.accepted(a);
        let b = w
            .next_request(Instant::from_ms(1), &mut rng)
            .expect("due again");
        w.accepted(b);
        let ok = IoCompletion {
            id: a.id,
            status: IoStatus::Ok,
            checksum: 0,
        };
        w.complete(ok, Instant::from_ms(3));
        (w, ok, b)
    }

    /// A command still owed counts at its age: a stuck one is the worst wait, not absent.
    #[test]
    fn what_callers_waited_counts_each_io_still_owed_at_its_age() {
        let (w, _, _) = two_accepted_the_first_done_at_3ms();
        assert_eq!((w.latencies().count(), w.latencies().max()), (1, 3_000));
        let waited = w.waited(Instant::from_ms(101));
        assert_eq!(
            waited.count(),
            2,
            "the completed one and the one still owed"
        );
        assert_eq!(waited.max(), 100_000, "the owed one at its age");
        assert_eq!(waited.percentile(990_000), 100_000);
        assert!((3_000..=3_000 + 3_000 / 16).contains(&waited.percentile(500_000)));
        assert_eq!(
            w.latencies().count(),
            1,
            "the workload's own record is untouched"
        );
    }

    #[test]
    fn a_second_completion_is_a_duplicate_and_a_forgotten_io_is_lost() {
        let (mut w, ok, b) = two_accepted_the_first_done_at_3ms();
        w.complete(ok, Instant::from_ms(4));
        assert_eq!(w.stats().completed, 1);
        assert_eq!(w.stats().duplicated, 1);
        assert_eq!(w.stats().max_latency_us, 3_000);
        assert_eq!(
            w.count_outstanding(|_| false),
            1,
            "b is owed and nobody has it"
        );
        assert_eq!((w.stats().in_flight, w.stats().lost), (0, 1));
        assert_eq!(w.count_outstanding(|id| id == b.id), 0);
        assert_eq!((w.stats().in_flight, w.stats().lost), (1, 0));
        let s = w.stats();
        assert_eq!(s.unaccounted(), 0, "{s:?}");
    }

    #[test]
    fn reads_are_checked_against_what_was_written() {
        let mut w = BlockWorkload::new(WorkloadConfig {
            read_pct: 100,
            ..workload().config
        });
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let r = w.next_request(Instant::ZERO, &mut rng).expect("due");
        assert!(!r.write);
        w.accepted(r);
        let mut block = std::vec![0u8; BLOCK_SIZE];
        fill_pattern(initial_seed(1, r.lba), &mut block);
        let good = IoCompletion {
            id: r.id,
            status: IoStatus::Ok,
            checksum: checksum(&block),
        };
        w.complete(good, Instant::from_ms(1));
        assert_eq!(
            (w.stats().reads_verified, w.stats().read_mismatches),
            (1, 0)
        );
        let r2 = w.next_request(Instant::from_ms(1), &mut rng).expect("due");
        w.accepted(r2);
        w.complete(
            IoCompletion {
                checksum: 0xbad,
                id: r2.id,
                ..good
            },
            Instant::from_ms(2),
        );
        assert_eq!(w.stats().read_mismatches, 1);
    }

    /// One I/O a millisecond, at most four owed; a busy disk's refusal is offered again
    /// first; the oldest owed I/O, the latencies and the series follow every completion.
    #[test]
    fn the_workload_ticks_throttles_retries_and_records_each_completion() {
        let mut w = workload();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        assert_eq!(w.next_at(), Some(Instant::ZERO));
        let a = w.next_request(Instant::ZERO, &mut rng).expect("due at 0");
        assert_eq!((a.id, a.submitted_at), (1, Instant::ZERO));
        assert_eq!(w.next_at(), Some(Instant::from_ms(1)), "one interval later");
        assert!(w.next_request(Instant::from_us(999), &mut rng).is_none());
        w.refused(a);
        assert_eq!(w.stats().busy, 1);
        let again = w
            .next_request(Instant::from_us(999), &mut rng)
            .expect("the retry");
        assert_eq!(again, a, "the same request, before anything new");
        assert!(w.next_request(Instant::from_us(999), &mut rng).is_none());
        w.accepted(a);
        for ms in 1..=3 {
            let r = w.next_request(Instant::from_ms(ms), &mut rng).expect("due");
            w.accepted(r);
        }
        assert_eq!(w.outstanding().count(), 4);
        assert!(
            w.next_request(Instant::from_ms(4), &mut rng).is_none(),
            "four owed: the tick passes"
        );
        assert_eq!(w.next_at(), Some(Instant::from_ms(5)));
        assert_eq!(w.oldest_outstanding(), Some(Instant::ZERO));
        let done = |id, status| IoCompletion {
            id,
            status,
            checksum: 0,
        };
        w.complete(done(1, IoStatus::Retryable), Instant::from_ms(6));
        assert_eq!(w.oldest_outstanding(), Some(Instant::from_ms(1)));
        w.complete(done(2, IoStatus::DeviceFailed), Instant::from_ms(6));
        let s = *w.stats();
        assert_eq!((s.failed, s.retryable, s.completed), (2, 1, 0));
        assert_eq!((s.max_failed_latency_us, s.max_latency_us), (6_000, 6_000));
        assert_eq!(w.latencies().count(), 2);
        let failed: u32 = w.series().buckets().iter().map(|b| b.failed).sum();
        let completed: u32 = w.series().buckets().iter().map(|b| b.completed).sum();
        assert_eq!((failed, completed), (2, 0));
        let r = w
            .next_request(Instant::from_ms(6), &mut rng)
            .expect("room again");
        assert_eq!(r.id, 5);
        w.stop();
        assert_eq!(w.next_at(), None);
        assert!(w.next_request(Instant::from_ms(100), &mut rng).is_none());
    }

    /// Two I/Os to one block at once would make the expected data ambiguous: each new I/O
    /// takes a free block, searching on from a random one (and around the end).
    #[test]
    fn io_at_once_goes_to_distinct_blocks() {
        for seed in 0..16 {
            let mut w = BlockWorkload::new(WorkloadConfig {
                n_blocks: 3,
                max_outstanding: 3,
                ..workload().config
            });
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut lbas: std::vec::Vec<u64> = (0..3)
                .map(|ms| {
                    let r = w.next_request(Instant::from_ms(ms), &mut rng).expect("due");
                    w.accepted(r);
                    r.lba
                })
                .collect();
            lbas.sort_unstable();
            assert_eq!(lbas, [0, 1, 2], "seed {seed}");
        }
    }
}
