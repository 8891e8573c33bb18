//! Fast path failover (docs/design.md §7): a path whose command has been out past the disk's
//! `path_io_timeout`, while another path answered a command sent no earlier, gives the
//! command up (telling the target to abort it) for the other path to re-issue at once, and
//! takes no new I/O until an answer comes on it again (a probe: the abort's own answer) or
//! its adapter resets. When no other path answers, nothing moves: a slow target is not a
//! dead path.
//!
//! A write given up may still run late at the target, before its abort: no newer write to
//! its block goes out on any path until that abort is answered or its connection is gone
//! (the write fence), so a stale copy never overwrites newer data. Its own re-issue may
//! go: it writes the same data.

use hcabus::{Duration, Instant};

use super::Multipath;
use crate::block::IoRequest;

/// A given-up write of I/O `id` to block `lba` on `path` that may still run at the target.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence {
    path: u8,
    id: u64,
    lba: u64,
}

impl Fence {
    pub(super) fn on(&self, path: usize) -> bool {
        usize::from(self.path) == path
    }
}

/// The default `path_io_timeout` of a multipath disk: docs/design.md §7 "Fast path failover"
/// says why.
pub const DEFAULT_PATH_IO_TIMEOUT: Duration = Duration::from_ms(100);

impl Multipath {
    /// The send time of the youngest command any path but `me` that serves (up, not
    /// suspect) has answered: a command of `me` sent no later was overtaken there.
    pub fn others_answered_at(&self, me: usize) -> Option<Instant> {
        self.paths
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != me && p.up && !p.suspect)
            .filter_map(|(_, p)| p.last_answer)
            .max()
    }

    /// The target answered on `path` a command sent at `at`.
    pub fn note_answer(&mut self, path: usize, at: Instant) {
        if let Some(p) = self.paths.get_mut(path) {
            p.last_answer = p.last_answer.max(Some(at));
        }
    }

    /// `path` gave up `n` commands for being slow: it takes no new I/O until
    /// [`Multipath::probe_answered`] or its adapter resets.
    pub fn gave_up(&mut self, path: usize, n: u32, now: Instant) {
        self.see(now);
        self.events
            .push(now, path, super::PathEventKind::GaveUp { n });
        let Some(p) = self.paths.get_mut(path) else {
            return;
        };
        if !p.suspect {
            p.stats.slow_failovers += 1;
        }
        p.suspect = true;
        p.stats.given_up += u64::from(n);
        if self.turn == path {
            self.turn = (path + 1) % self.paths.len();
        }
    }

    /// An answer came on `path` after it gave commands up: it serves again.
    pub fn probe_answered(&mut self, path: usize, now: Instant) {
        self.see(now);
        if let Some(p) = self.paths.get_mut(path).filter(|p| p.suspect) {
            p.suspect = false;
            self.events.push(now, path, super::PathEventKind::Serves);
        }
    }

    /// Whether `path` gave commands up and has not answered since.
    pub fn path_suspect(&self, path: usize) -> bool {
        self.paths.get(path).is_some_and(|p| p.suspect)
    }

    /// The writes `path` gave up whose abort the target has not yet answered, as (I/O id,
    /// block): no newer write to those blocks goes out (see the module's doc).
    pub fn set_fences(&mut self, path: usize, writes: impl Iterator<Item = (u64, u64)>) {
        self.fences.retain(|f| !f.on(path));
        for (id, lba) in writes {
            if self.fences.len() < self.fence_limit {
                self.fences.push(Fence {
                    path: path as u8,
                    id,
                    lba,
                });
            } else {
                // Cannot happen: there is room for every path's whole request limit.
                log::error!("{}: no room to fence block {lba}", self.name);
            }
        }
    }

    /// Whether `path` fences any block.
    pub fn has_fences(&self, path: usize) -> bool {
        self.fences.iter().any(|f| f.on(path))
    }

    /// Whether `req` is a write that must wait: a given-up write of another I/O to its block
    /// may still run.
    fn fenced(&self, req: &IoRequest) -> bool {
        req.write
            && self
                .fences
                .iter()
                .any(|f| f.lba == req.lba && f.id != req.id)
    }

    /// Where the next I/O a path may take waits in the queue: the first one not fenced.
    pub(super) fn next_takeable(&self) -> Option<usize> {
        if self.fences.is_empty() {
            return (!self.queue.is_empty()).then_some(0);
        }
        self.queue.iter().position(|r| !self.fenced(r))
    }
}

#[cfg(test)]
mod tests;
