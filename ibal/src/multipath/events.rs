//! What happened to a multipath disk's paths, with when: the failover timeline of the
//! simulator's report and SVG. Bounded and reserved at creation (it is written on the reset
//! path): past its capacity the oldest events go, and are counted.

use std::collections::VecDeque;

use hcabus::Instant;

/// Events kept per disk.
const CAPACITY: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathEventKind {
    /// The path logged in and serves.
    Up,
    /// It stopped serving (its adapter's RESET, its port, its device).
    Down,
    /// It went down with `n` commands, which it gave back for another path.
    Moved { n: u32 },
    /// Fast path failover: it gave up `n` commands another path overtook.
    GaveUp { n: u32 },
    /// An answer came on it after it gave commands up: it serves again.
    Serves,
    /// Its device failed or left.
    Dead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathEvent {
    pub at: Instant,
    pub path: usize,
    pub kind: PathEventKind,
}

#[derive(Debug, Clone)]
pub(super) struct PathLog {
    events: VecDeque<PathEvent>,
    dropped: u64,
}

impl PathLog {
    pub(super) fn new() -> Self {
        PathLog {
            events: VecDeque::with_capacity(CAPACITY),
            dropped: 0,
        }
    }

    pub(super) fn push(&mut self, at: Instant, path: usize, kind: PathEventKind) {
        if self.events.len() >= CAPACITY {
            self.events.pop_front();
            self.dropped += 1;
        }
        self.events.push_back(PathEvent { at, path, kind });
    }
}

impl super::Multipath {
    /// What happened to the paths, oldest first, and how many older events were dropped.
    pub fn path_events(&self) -> (impl Iterator<Item = &PathEvent>, u64) {
        (self.events.events.iter(), self.events.dropped)
    }
}
