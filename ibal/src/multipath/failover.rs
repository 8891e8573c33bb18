//! Fast path failover (docs/design.md §7): a path whose command has been out past its
//! timeout, while another path answered a command sent no earlier, gives the command up
//! (telling the target to abort it) for the other path to re-issue at once; it then takes
//! no share of I/O but one probe at a time, after a backoff with jitter, until several
//! prompt answers in a row or its adapter's reset. When no other path answers, nothing
//! moves: a slow target is not a dead path.
//!
//! A write given up may still run late at the target, before its abort: no newer write to
//! its block goes out on any path until that abort is answered or its connection is gone
//! (the write fence), so a stale copy never overwrites newer data. Its own re-issue may
//! go: it writes the same data.

use hcabus::{Duration, Instant};
use rand::Rng;

use super::Multipath;
use crate::io::IoRequest;

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

    /// Whether it fences a block `req` moves, and `req` is another I/O.
    fn covers(&self, req: &IoRequest) -> bool {
        req.id != self.id && (req.lba..req.lba + u64::from(req.blocks)).contains(&self.lba)
    }
}

/// The fixed timeout of the mode before the adaptive one (docs/design.md §7 "Fast path
/// failover"): the benchmark's baseline, and where a probe's backoff starts should a disk
/// with failover off give a command up (it cannot: the fallback is never used).
pub const DEFAULT_PATH_IO_TIMEOUT: Duration = Duration::from_ms(100);

/// Prompt answers in a row a probing path gives before it takes its full share again:
/// one could be luck (a slow route's queue just drained); three is TCP's duplicate-ACK
/// threshold, the usual "not a coincidence" (docs/design.md §7).
pub const PROBES_TO_SERVE: u8 = 3;

/// The longest wait between probes of a path that keeps failing them: a merely slow
/// route is given up at most about once per 1.5 s once the backoff reaches it (jitter
/// averages three quarters of it), and a route that recovers is back within 2 s and three
/// round trips (docs/design.md §7 says why this bound).
pub const PROBE_BACKOFF_MAX: Duration = Duration::from_ms(2_000);

/// A path that gave commands up: when its next probe may go and the backoff after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Probe {
    pub(super) next_at: Instant,
    pub(super) backoff: Duration,
    /// Prompt answers in a row.
    streak: u8,
    /// A probe is out (taken and not answered or given up yet).
    pub(super) out: bool,
}

impl Probe {
    /// The first probe, `backoff` (jittered) after the give-up at `now`.
    fn after(backoff: Duration, now: Instant, rng: &mut impl Rng) -> Probe {
        Probe {
            next_at: now + jittered(backoff, rng),
            backoff,
            streak: 0,
            out: false,
        }
    }

    /// The probe was given up or answered slowly: wait twice as long (up to the bound).
    fn failed(self, now: Instant, rng: &mut impl Rng) -> Probe {
        let backoff =
            Duration::from_us(self.backoff.as_us().saturating_mul(2)).min(PROBE_BACKOFF_MAX);
        Probe::after(backoff, now, rng)
    }

    /// `n` prompt answers: serving again (`None`) after enough in a row, else the next
    /// probe at once.
    fn answered(self, n: u64, now: Instant) -> Option<Probe> {
        let streak = u64::from(self.streak).saturating_add(n);
        (streak < u64::from(PROBES_TO_SERVE)).then_some(Probe {
            next_at: now,
            streak: streak as u8,
            out: false,
            ..self
        })
    }

    /// Its connection was dropped: the probe out, if any, was taken back.
    pub(super) fn taken_back(self) -> Probe {
        Probe { out: false, ..self }
    }

    /// Whether a probe may go at `now`.
    pub(super) fn ready(&self, now: Instant) -> bool {
        !self.out && self.next_at <= now
    }
}

/// Half of `d` and a random part of the other half: probes of many paths (and hosts) that
/// failed together do not come back in step.
fn jittered(d: Duration, rng: &mut impl Rng) -> Duration {
    let half = d.as_us() / 2;
    Duration::from_us(half + rng.gen_range(0..=d.as_us() - half))
}

impl Multipath {
    /// The send time of the youngest command any path but `me` that serves (up, not
    /// probing) has answered promptly: a command of `me` sent no later was overtaken there.
    pub fn others_answered_at(&self, me: usize) -> Option<Instant> {
        self.paths
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != me && p.up && p.probe.is_none())
            .filter_map(|(_, p)| p.last_answer)
            .max()
    }

    /// `path`'s oldest command out past its timeout with nothing younger answered on another
    /// path was sent at `since` (`None`: it has none).
    pub fn want_evidence(&mut self, path: usize, since: Option<Instant>) {
        if let Some(p) = self.paths.get_mut(path) {
            p.wants_evidence = since;
        }
    }

    /// What `path` wants evidence for (see [`Multipath::want_evidence`]).
    pub fn wants_evidence(&self, path: usize) -> Option<Instant> {
        self.paths.get(path).and_then(|p| p.wants_evidence)
    }

    /// The youngest command another path that is up waits on evidence for: a check sent
    /// from here after it and answered overtakes it, and a dead path is known within its
    /// timeout and a round trip, not at the next I/O another path happens to carry.
    pub fn evidence_wanted(&self, me: usize) -> Option<Instant> {
        self.paths
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != me && p.up)
            .filter_map(|(_, p)| p.wants_evidence)
            .max()
    }

    /// The target answered on `path` a command sent at `at`.
    pub fn note_answer(&mut self, path: usize, at: Instant) {
        if let Some(p) = self.paths.get_mut(path) {
            p.last_answer = p.last_answer.max(Some(at));
        }
    }

    /// `path` gave up `n` commands for being slow: it takes no new I/O but one probe at a
    /// time, after a backoff with jitter (doubled at each give-up while probing), until
    /// [`PROBES_TO_SERVE`] prompt answers in a row or its adapter resets.
    pub fn gave_up(&mut self, path: usize, n: u32, now: Instant, rng: &mut impl Rng) {
        self.see(now);
        self.events
            .push(now, path, super::PathEventKind::GaveUp { n });
        let floor = self.probe_floor();
        let Some(p) = self.paths.get_mut(path) else {
            return;
        };
        p.stats.given_up += u64::from(n);
        p.probe = Some(match p.probe {
            None => {
                p.stats.slow_failovers += 1;
                // Given up again within the bound of serving again: the backoff goes on
                // from where it was (a path slow only under load would otherwise cycle at
                // the floor's pace).
                let again = p
                    .last_backoff
                    .filter(|(_, at)| now.saturating_since(*at) < PROBE_BACKOFF_MAX);
                match again {
                    Some((backoff, _)) => Probe::after(backoff, now, rng).failed(now, rng),
                    None => Probe::after(floor, now, rng),
                }
            }
            Some(probe) => probe.failed(now, rng),
        });
        // The turn may stay on it: a path that does not serve does not hold the turn.
    }

    /// `path` had answers come back, `prompt` within its timeout and `slow` past it: a
    /// probing path counts them, and serves again after enough prompt ones in a row.
    /// Whether it serves again now (its client then restarts its round-trip estimate).
    pub fn path_answered(
        &mut self,
        path: usize,
        (prompt, slow): (u64, u64),
        now: Instant,
        rng: &mut impl Rng,
    ) -> bool {
        self.see(now);
        let Some(p) = self.paths.get_mut(path) else {
            return false;
        };
        let Some(probe) = p.probe else {
            return false;
        };
        p.probe = if slow > 0 {
            Some(probe.failed(now, rng))
        } else if prompt > 0 {
            probe.answered(prompt, now)
        } else {
            Some(probe)
        };
        if p.probe.is_none() {
            p.back_at = Some(now);
            p.stats.restored += 1;
            p.last_backoff = Some((probe.backoff, now));
            self.events.push(now, path, super::PathEventKind::Serves);
            return true;
        }
        false
    }

    /// Where a probing path's backoff starts: the shortest timeout the disk's mode gives,
    /// within the backoff's bound.
    fn probe_floor(&self) -> Duration {
        self.config
            .path_timeout
            .floor()
            .unwrap_or(DEFAULT_PATH_IO_TIMEOUT)
            .min(PROBE_BACKOFF_MAX)
    }

    /// `path`'s adapter resets: it comes back fresh, probed no more.
    pub fn path_reset(&mut self, path: usize) {
        if let Some(p) = self.paths.get_mut(path) {
            p.probe = None;
            p.keep_probe = false;
            p.last_backoff = None;
        }
    }

    /// `path` is dropping its own connection (an ABORT TASK went unanswered): it stays
    /// probed through the re-login.
    pub fn keep_probing(&mut self, path: usize) {
        if let Some(p) = self.paths.get_mut(path).filter(|p| p.probe.is_some()) {
            p.keep_probe = true;
        }
    }

    /// Whether `path` has a probe out: what it took last was one.
    pub fn probe_out(&self, path: usize) -> bool {
        self.paths
            .get(path)
            .and_then(|p| p.probe)
            .is_some_and(|pr| pr.out)
    }

    /// Whether `path` gave commands up and is not serving again yet.
    pub fn path_suspect(&self, path: usize) -> bool {
        self.paths.get(path).is_some_and(|p| p.probe.is_some())
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

    /// Whether a write in the queue waits behind a write given up on `path` (a fence of
    /// `path`'s holds I/O, not only a block).
    pub fn fence_holds_io(&self, path: usize) -> bool {
        self.fences
            .iter()
            .any(|f| f.on(path) && self.queue.iter().any(|r| r.write && f.covers(r)))
    }

    /// Whether `req` is a write that must wait: a given-up write of another I/O to its block
    /// may still run.
    fn fenced(&self, req: &IoRequest) -> bool {
        req.write && self.fences.iter().any(|f| f.covers(req))
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
