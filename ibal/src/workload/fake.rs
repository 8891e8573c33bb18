//! A workload for the product's own tests: reads at a steady rate, one per block in turn,
//! with the accounting a disk's rules are judged by (what was owed, what completed, what
//! failed retryable). No data is checked: the lab's workload does that.

use std::vec::Vec;

use hcabus::{Duration, Instant};
use rand::RngCore;

use super::{Workload, WriteData};
use crate::io::{IoCompletion, IoRequest, IoStats, IoStatus};

/// Reads `iops` a second (none at 0), at most `max_outstanding` owed at once.
#[derive(Debug, Clone)]
pub(crate) struct Steady {
    interval: Duration,
    next_at: Option<Instant>,
    next_id: u64,
    max_outstanding: usize,
    retry: Option<IoRequest>,
    outstanding: Vec<u64>,
    stats: IoStats,
}

impl Steady {
    pub(crate) fn boxed(iops: u32, max_outstanding: usize) -> Box<dyn Workload> {
        Box::new(Steady {
            interval: Duration::from_us(1_000_000 / u64::from(iops.max(1))),
            next_at: (iops > 0).then_some(Instant::ZERO),
            next_id: 1,
            max_outstanding,
            retry: None,
            outstanding: Vec::with_capacity(max_outstanding),
            stats: IoStats::default(),
        })
    }
}

fn no_data(_: &IoRequest, _: &mut [u8]) {}

impl Workload for Steady {
    fn next_request(&mut self, now: Instant, _: &mut dyn RngCore) -> Option<IoRequest> {
        if let Some(r) = self.retry.take() {
            return Some(r);
        }
        let at = self.next_at.filter(|t| *t <= now)?;
        self.next_at = Some(at + self.interval);
        if self.outstanding.len() >= self.max_outstanding {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(IoRequest {
            submitted_at: now,
            ..IoRequest::stamped(id, id, false)
        })
    }
    fn accepted(&mut self, req: IoRequest) {
        self.stats.submitted += 1;
        self.outstanding.push(req.id);
    }
    fn refused(&mut self, req: IoRequest) {
        self.stats.busy += 1;
        self.retry = Some(req);
    }
    fn complete(&mut self, c: IoCompletion, _: Instant) {
        let Some(i) = self.outstanding.iter().position(|id| *id == c.id) else {
            self.stats.duplicated += 1;
            return;
        };
        self.outstanding.swap_remove(i);
        match c.status {
            IoStatus::Ok => self.stats.completed += 1,
            status => {
                self.stats.failed += 1;
                if status == IoStatus::Retryable {
                    self.stats.retryable += 1;
                }
            }
        }
    }
    fn next_at(&self) -> Option<Instant> {
        self.next_at
    }
    fn stats(&self) -> &IoStats {
        &self.stats
    }
    fn accounted(&self, live: &dyn Fn(u64) -> bool) -> IoStats {
        let in_flight = self.outstanding.iter().filter(|id| live(**id)).count() as u64;
        IoStats {
            in_flight,
            lost: self.outstanding.len() as u64 - in_flight,
            ..self.stats
        }
    }
    fn write_data(&self) -> WriteData {
        no_data
    }
    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}
