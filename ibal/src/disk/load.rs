//! What a path of a multipath disk tells the disk's path selector of its load
//! (docs/design.md §7 "Path selection"): the disk's side of the selector's price.

use hcabus::Instant;

/// What a path's client says of its load (see [`PathLoad::priced`] for why lateness
/// matters): whether it could send another command, the commands it holds to send or has
/// out, how many of those were late (out past the midpoint from its round trip to its
/// timeout: a check sent then has the other half of the margin to come back) when it said
/// and when its oldest one is, whether it answered a command sent after its oldest one
/// out, when its youngest command out turns late if nothing sent as late or later was
/// answered (the check is due then), and its recent round trip (`None` before its first
/// answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PathLoad {
    pub room: bool,
    pub owed: u64,
    pub late: u64,
    pub late_at: Option<Instant>,
    pub moving: bool,
    pub check_at: Option<Instant>,
    pub rtt_us: Option<u64>,
}

impl PathLoad {
    /// The commands it is priced for at `now`, or `None` when it asks for the next I/O
    /// whatever that costs (the check). A command out late is the target's straggler on a
    /// path free to serve, or the first sign of a dead path, and only a younger command's
    /// answer tells (fast path failover gives a command up as dead unless its path
    /// answered something younger). So a path whose youngest command out is late, with
    /// nothing sent as late or later answered, gets the next I/O; once it answered a
    /// command sent after its oldest one out (it moves), its late commands are not priced;
    /// otherwise all of it is.
    pub fn priced(&self, now: Instant) -> Option<u64> {
        if self.check_at.is_some_and(|t| t <= now) {
            return None;
        }
        let late = self
            .late
            .max(u64::from(self.late_at.is_some_and(|t| t <= now)));
        Some(if self.moving {
            self.owed.saturating_sub(late)
        } else {
            self.owed
        })
    }
}
