//! Which path takes the next I/O (docs/design.md §7 "Path selection"): the one whose next
//! command is expected to be answered soonest, among the paths that serve.
//!
//! A path's expected wait is its recent round trip times the commands it would then hold:
//! `rtt x (owed + 1)`. It is the least-expected-completion rule of dm-multipath's
//! `historical-service-time`, with two differences. The round trip is the path's SRTT, or
//! the round trip of the youngest command it answered when that was faster
//! (`PathTiming::recent_rtt`): SRTT alone takes some twenty answers to forget a slow regime,
//! and a path that healed gets few answers while it is priced by the old one; a straggler's
//! late answer is never the youngest. And since that round trip grows with the path's own
//! queue, a loaded slow path is priced twice over, which moves load off a path that slows
//! under load sooner than a linear price would (the `slow-under-load` trace). Prices are
//! compared on a log scale of eight steps a doubling: paths within about a tenth of each
//! other tie, and ties go round robin from the path whose turn it is. Equal paths share
//! while their prices tie; a path whose last answer drew a slower service than the
//! other's recent ones is priced out until the other's queue grows or it goes stale (the
//! `blackhole` trace's two equal paths carry 70% and 30% of the I/O before its fault).
//!
//! A path the rule starves of I/O keeps the round trip it last had: should it recover, the
//! rule would never learn it. A serving path that has taken nothing for [`STALE_AFTER`]
//! takes the next I/O whatever its price (dm's HST does the same with its stale paths):
//! one command a second at most, which refreshes its round trip.

use hcabus::{Duration, Instant};

use super::Multipath;
pub use crate::disk::PathLoad;

/// How long a serving path may go without I/O before it takes one whatever it costs.
pub const STALE_AFTER: Duration = Duration::from_ms(1_000);

impl Multipath {
    /// What `path`'s client says of its load now (it says so after each change).
    pub fn note_load(&mut self, path: usize, load: PathLoad) {
        if let Some(p) = self.paths.get_mut(path) {
            p.load = load;
        }
    }

    /// Whether `path` could send another command when it last said.
    pub fn note_room(&mut self, path: usize, room: bool) {
        if let Some(p) = self.paths.get_mut(path) {
            p.load.room = room;
        }
    }

    /// The price of one more command on `path`: its expected wait in microseconds, zero for
    /// a stale path or one that asks for a check. A path not answered yet is priced at the best round trip another path
    /// has (or 1 µs when none has one): hopeful, so it is tried, but not free.
    fn price(&self, path: usize) -> u64 {
        let p = &self.paths[path];
        let stale = p
            .last_taken
            .is_none_or(|t| self.now.saturating_since(t) >= STALE_AFTER);
        let Some(owed) = p.load.priced(self.now) else {
            return 0;
        };
        if stale && p.load.rtt_us.is_some() {
            return 0;
        }
        let rtt = p.load.rtt_us.unwrap_or_else(|| {
            let known = self.paths.iter().filter_map(|q| q.load.rtt_us).min();
            known.unwrap_or(1).max(1)
        });
        rtt.saturating_mul(owed.saturating_add(1))
    }

    /// How far after the turn `path` comes in round-robin order: ties go to the nearest.
    fn rank(&self, path: usize) -> usize {
        let n = self.paths.len();
        (path + n - self.turn % n) % n
    }

    /// Where `path` stands in the selector's order: its price's step on the log scale, then
    /// its place after the turn. A total order, so one path always comes first.
    fn order(&self, path: usize) -> (u32, usize) {
        (step(self.price(path)), self.rank(path))
    }

    /// `path`'s group (0 the best).
    pub fn path_group(&self, path: usize) -> u8 {
        self.config
            .path_groups
            .priority
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// The group I/O goes to: the best one with a path that serves and has been back for
    /// the failback delay; with none such, the best with a path that serves (a path that
    /// just came back is better than none). `None` while no path serves.
    pub fn active_group(&self) -> Option<u8> {
        let failback = self.config.path_groups.failback;
        let serving = || (0..self.paths.len()).filter(|&i| self.paths[i].serves());
        let settled = serving()
            .filter(|&i| {
                self.paths[i]
                    .back_at
                    .is_none_or(|t| self.now.saturating_since(t) >= failback)
            })
            .map(|i| self.path_group(i))
            .min();
        settled.or_else(|| serving().map(|i| self.path_group(i)).min())
    }

    /// Whether `path` is the one to take the next I/O among those that serve: it is in the
    /// active group, and no other serving path of that group with room comes before it. A
    /// path that is full does not hold the others up; a worse group does not take what a
    /// full better one cannot (ALUA's non-optimized paths are for when no optimized path
    /// is available, not busy).
    pub(super) fn chosen(&self, path: usize) -> bool {
        let active = self.active_group();
        if active.is_some_and(|g| g != self.path_group(path)) {
            return false;
        }
        let mine = self.order(path);
        !self
            .paths
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != path && p.serves() && p.load.room)
            .filter(|(i, _)| active.is_none_or(|g| g == self.path_group(*i)))
            .any(|(i, _)| self.order(i) < mine)
    }

    /// The round trip of the fastest path but `me` that serves (what overtakes `me`'s
    /// commands, see `GiveUpRule::overtaker_rtt`).
    pub fn others_rtt(&self, me: usize) -> Option<Duration> {
        self.paths
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != me && p.serves())
            .filter_map(|(_, p)| p.load.rtt_us)
            .min()
            .map(Duration::from_us)
    }

    /// `path` took an I/O at `now`: it owes one more.
    pub(super) fn took(&mut self, path: usize, now: Instant) {
        if let Some(p) = self.paths.get_mut(path) {
            p.load.owed = p.load.owed.saturating_add(1);
            // The command just taken is the youngest: the check, if one was due, is it.
            p.load.check_at = None;
            p.last_taken = Some(now);
        }
    }
}

/// `price` on a log scale of eight steps a doubling (0 for 0): the leading bit's place and
/// the three bits after it.
fn step(price: u64) -> u32 {
    let Some(lead) = price.checked_ilog2() else {
        return 0;
    };
    let frac = if lead >= 3 {
        price >> (lead - 3)
    } else {
        price << (3 - lead)
    } & 7;
    1 + lead * 8 + frac as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::{DiskConfig, PathTimeout};
    use crate::io::IoRequest;
    use crate::multipath::SharedMultipath;
    use crate::workload::fake::Steady;

    fn at_us(us: u64) -> Instant {
        Instant::from_us(us)
    }

    /// Two paths up with `n` I/Os queued and nothing else.
    fn two_paths(n: u64) -> SharedMultipath {
        let config = DiskConfig {
            path_timeout: PathTimeout::DEFAULT,
            ..DiskConfig::default()
        };
        two_paths_of(config, n)
    }

    fn two_paths_of(config: DiskConfig, n: u64) -> SharedMultipath {
        let mp = SharedMultipath::new("disk", config, 2, Steady::boxed(0, 0));
        {
            let mut m = mp.lock();
            m.path_is_up(0, Instant::ZERO);
            m.path_is_up(1, Instant::ZERO);
            for id in 1..=n {
                m.enqueue(IoRequest::stamped(id, id, false)).expect("room");
            }
        }
        mp
    }

    fn load(owed: u64, rtt_us: u64) -> PathLoad {
        PathLoad {
            room: true,
            owed,
            rtt_us: Some(rtt_us),
            moving: true,
            ..PathLoad::default()
        }
    }

    #[test]
    fn the_path_expected_to_answer_soonest_takes_the_next_io() {
        let mp = two_paths(8);
        let mut m = mp.lock();
        m.see(at_us(10));
        // Path 0 answers in 200 us, path 1 in 1 ms: path 0 takes until it holds four.
        m.note_load(0, load(0, 200));
        m.note_load(1, load(0, 1_000));
        for p in &mut m.paths {
            p.last_taken = Some(at_us(10));
        }
        let mut order = std::vec::Vec::new();
        for _ in 0..6 {
            let path = (0..2)
                .find(|&p| m.may_take(p, true))
                .expect("one path may take");
            assert!(!m.may_take(1 - path, true), "only one at a time");
            m.take(path).expect("it may");
            order.push(path);
        }
        // 200 x (owed + 1) passes 1,000 x 1 at four owed; then 1,000 x 2 at nine.
        assert_eq!(order, [0, 0, 0, 0, 1, 0]);
    }

    #[test]
    fn equal_prices_alternate_and_a_full_path_does_not_hold_the_other_up() {
        let mp = two_paths(4);
        let mut m = mp.lock();
        m.see(at_us(10));
        for p in 0..2 {
            m.note_load(p, load(0, 200));
            m.paths[p].last_taken = Some(at_us(10));
        }
        m.take(0).expect("path 0 first");
        // Path 0 owes one now, but its report says what it says: the same price again.
        m.note_load(0, load(0, 200));
        assert!(
            m.may_take(1, true) && !m.may_take(0, true),
            "a tie: the turn"
        );
        m.note_room(1, false);
        assert!(m.may_take(0, true), "path 1 cannot send: path 0 may");
    }

    #[test]
    fn a_path_whose_youngest_command_is_late_and_unanswered_gets_the_next_io_as_its_check() {
        let mp = two_paths(4);
        let mut m = mp.lock();
        m.see(at_us(10));
        for p in 0..2 {
            m.paths[p].last_taken = Some(at_us(10));
        }
        // Path 1 has one command out, late at 3 ms, and answered nothing sent after it.
        let late = PathLoad {
            owed: 1,
            late_at: Some(at_us(3_000)),
            check_at: Some(at_us(3_000)),
            moving: false,
            ..load(1, 200)
        };
        m.note_load(0, load(0, 200));
        m.note_load(1, late);
        assert!(m.may_take(0, true) && !m.may_take(1, true), "not late yet");
        m.see(at_us(3_000));
        assert!(
            m.may_take(1, true) && !m.may_take(0, true),
            "late: the check"
        );
        m.take(1).expect("the check");
        // Two out, the older late, nothing answered: all of it priced.
        assert_eq!(m.paths[1].load.priced(m.now), Some(2));
        // It answered the check: it moves, and the late one is not priced.
        let moving = PathLoad {
            owed: 1,
            late: 1,
            moving: true,
            check_at: None,
            ..late
        };
        assert_eq!(moving.priced(m.now), Some(0));
        // A second straggler behind the first, nothing answered since it was sent: its
        // own check, though the path moved past the first.
        let second = PathLoad {
            owed: 2,
            late: 1,
            check_at: Some(at_us(3_000)),
            ..moving
        };
        assert_eq!(second.priced(m.now), None);
    }

    /// Two paths up, path 1 in the better group, with `failback` and `n` I/Os queued.
    fn grouped(failback_ms: u64, n: u64) -> SharedMultipath {
        let config = DiskConfig {
            path_timeout: PathTimeout::DEFAULT,
            path_groups: crate::disk::PathGroups {
                priority: [1, 0, 0, 0],
                failback: Duration::from_ms(failback_ms),
            },
            ..DiskConfig::default()
        };
        let mp = two_paths_of(config, n);
        for p in &mut mp.lock().paths {
            p.last_taken = Some(Instant::ZERO);
        }
        mp
    }

    #[test]
    fn the_better_group_takes_everything_while_a_path_of_it_serves_even_when_slower() {
        let mp = grouped(0, 4);
        let mut m = mp.lock();
        m.see(at_us(10));
        m.note_load(0, load(0, 100));
        m.note_load(1, load(5, 10_000));
        assert_eq!(m.active_group(), Some(0));
        assert!(m.may_take(1, true) && !m.may_take(0, true));
        // Full: the worse group does not take what the better cannot.
        m.note_room(1, false);
        assert!(!m.may_take(0, true), "a busy optimized path is no failover");
        // Down: the worse group takes over at once.
        m.path_is_down(1, at_us(20), None);
        assert_eq!(m.active_group(), Some(1));
        assert!(m.may_take(0, true));
    }

    #[test]
    fn a_better_path_back_takes_the_load_after_the_failback_delay_and_at_once_when_alone() {
        let mp = grouped(500, 4);
        let mut m = mp.lock();
        m.note_load(0, load(0, 200));
        m.note_load(1, load(0, 200));
        m.path_is_down(1, Instant::from_ms(1_000), None);
        m.path_is_up(1, Instant::from_ms(2_000));
        m.see(Instant::from_ms(2_499));
        assert_eq!(m.active_group(), Some(1), "back 499 ms: not yet");
        assert!(m.may_take(0, true) && !m.may_take(1, true));
        m.see(Instant::from_ms(2_500));
        assert_eq!(m.active_group(), Some(0), "back 500 ms: failed back");
        assert!(m.may_take(1, true) && !m.may_take(0, true));
        // Back again, and the other path gone meanwhile: a path just back beats none.
        m.path_is_down(1, Instant::from_ms(3_000), None);
        m.path_is_up(1, Instant::from_ms(3_100));
        m.path_is_down(0, Instant::from_ms(3_100), None);
        assert_eq!(m.active_group(), Some(0));
        assert!(m.may_take(1, true));
        // No path serves: no group.
        m.path_is_down(1, Instant::from_ms(3_200), None);
        assert_eq!(m.active_group(), None);
    }

    #[test]
    fn a_path_idle_for_a_second_takes_one_io_whatever_it_costs() {
        let mp = two_paths(4);
        let mut m = mp.lock();
        m.note_load(0, load(0, 200));
        m.note_load(1, load(0, 50_000));
        m.paths[0].last_taken = Some(at_us(1_000_000));
        m.paths[1].last_taken = Some(at_us(500_000));
        m.see(at_us(1_400_000));
        assert!(
            m.may_take(0, true) && !m.may_take(1, true),
            "the slow one waits"
        );
        m.see(at_us(1_500_000));
        assert!(m.may_take(1, true), "idle for STALE_AFTER: its turn");
        m.take(1).expect("one");
        m.note_load(1, load(0, 50_000));
        assert!(!m.may_take(1, true), "one, not more");
        // A path never answered is priced at the best round trip known: tried, not free.
        m.paths[1].load.rtt_us = None;
        assert_eq!(m.price(1), 200);
    }

    #[test]
    fn prices_within_a_step_tie_and_a_step_is_an_eighth_of_a_doubling() {
        assert_eq!(step(0), 0);
        assert!(step(1) > step(0));
        // 1,100 and 1,150 us: the same step; 1,100 and 1,300: not.
        assert_eq!(step(1_100), step(1_150));
        assert!(step(1_300) > step(1_100));
        // Monotonic over a wide range, and never more than one step per 1/8 growth.
        let mut last = 0;
        for p in (1..2_000_000u64).step_by(997) {
            let s = step(p);
            assert!(s >= last, "{p}");
            last = s;
        }
        assert_eq!(step(u64::MAX), 1 + 63 * 8 + 7);
        assert_eq!(step(16) - step(8), 8, "a doubling is eight steps");
    }
}
