//! The master's plan through a trap storm: its sweeps, each for the storm or for another
//! switch's trap, and when the storm's leaf was deaf (`traps.rs` gives the rules).

use std::vec::Vec;

use hcabus::{Duration, Instant};

use super::{TrapFigures, SWEEP_INTERVAL, TRAP_AGING, TRAP_THRESHOLD};

/// A sweep: its beginning, and whether the storm asked for it (its trap, or the timer
/// finding the storm switch's bit set) rather than only another switch's trap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sweep {
    at: Instant,
    storm: bool,
}

/// The cable's bounces and what else the master heard: the plan's input.
#[derive(Debug, Clone, Copy)]
pub struct Cable<'a> {
    /// When the cable goes dark, for `down` each, its link training in `link_up` once back.
    pub downs: &'a [Instant],
    pub down: Duration,
    pub link_up: Duration,
    /// Whether the port's link was up as the storm began (else its first loss is no change).
    pub starts_up: bool,
    /// Other changes of the storm's switch (a fabric event's on its other ports): each
    /// counts under its key and sets its bit as the cable's do.
    pub also: &'a [Instant],
}

/// The master's sweeps through a storm, and when the storm's leaf was deaf: a change there
/// then sends no trap the master acts on.
#[derive(Debug, Default)]
pub struct SweepPlan {
    /// Every sweep, in order; each lasts `sweep`.
    sweeps: Vec<Sweep>,
    sweep: Duration,
    /// Half-open on the left: a port that trains at `t` with `a < t <= b` is not heard.
    deaf: Vec<(Instant, Instant)>,
    figures: TrapFigures,
}

/// The master as the plan is made.
struct Master {
    sweep: Duration,
    /// The switch's bit, set since this instant.
    latched: Option<Instant>,
    /// The switch's traps counted under its key (a trap's toggle is 0: one key), and the
    /// latest.
    counted: u32,
    latest: Option<Instant>,
    busy_until: Instant,
    /// A sweep asked for during one: whether the storm asked.
    pending: Option<bool>,
    sweeps: Vec<Sweep>,
    deaf: Vec<(Instant, Instant)>,
    deaf_since: Option<Instant>,
    figures: TrapFigures,
}

impl Master {
    /// The count a trap would find at `t`, its key aged out or not.
    fn count_at(&self, t: Instant) -> u32 {
        match self.latest {
            Some(l) if t <= l + TRAP_AGING => self.counted,
            _ => 0,
        }
    }

    /// Whether a change at `t` (before what happens then) would be heard.
    fn hears(&self, t: Instant) -> bool {
        self.latched.is_none() && self.count_at(t) <= TRAP_THRESHOLD
    }

    /// Notes the leaf's deafness as it stands after what happened at `t`.
    fn note_deaf(&mut self, t: Instant) {
        match (self.hears(t), self.deaf_since) {
            (false, None) => self.deaf_since = Some(t),
            (true, Some(a)) => {
                self.deaf_since = None;
                if a < t {
                    self.deaf.push((a, t));
                }
            }
            _ => {}
        }
    }

    fn begin_sweep(&mut self, at: Instant, storm: bool) {
        self.note_deaf(at);
        self.sweeps.push(Sweep { at, storm });
        self.busy_until = at + self.sweep;
        self.pending = None;
        if storm {
            self.figures.busy = self.figures.busy + self.sweep;
            self.figures.sweeps += 1;
        }
        // The sweep reads the switch and clears its bit.
        self.latched = None;
        self.note_deaf(at);
    }

    /// A sweep asked for at `t`: one beginning then serves it (what it finds is what has
    /// happened by then); one in progress makes it the next.
    fn ask_sweep(&mut self, t: Instant, storm: bool) {
        if let Some(last) = self.sweeps.last_mut().filter(|s| s.at == t) {
            if storm && !last.storm {
                last.storm = true;
                self.figures.busy = self.figures.busy + self.sweep;
                self.figures.sweeps += 1;
            }
            // It reads the switch after this change: the bit is clear again.
            self.latched = None;
        } else if t >= self.busy_until {
            self.begin_sweep(t, storm);
        } else {
            self.pending = Some(self.pending.unwrap_or(false) | storm);
        }
    }

    /// The cable changes at `t`.
    fn change(&mut self, t: Instant) {
        self.figures.changes += 1;
        if self.latched.is_some() {
            return;
        }
        self.latched = Some(t);
        self.figures.traps += 1;
        let count = self.count_at(t);
        self.counted = count + 1;
        self.latest = Some(t);
        if count > TRAP_THRESHOLD {
            self.figures.ignored += 1;
        } else {
            self.ask_sweep(t, true);
        }
    }

    /// What the master does by itself before `t`: the sweep asked for during the last, its
    /// timer's light sweeps (heavy when the switch's bit is set), the key aging out.
    fn until(&mut self, t: Instant) {
        loop {
            let due = match (self.pending, self.latched) {
                (Some(storm), _) => Some((self.busy_until, storm)),
                (None, Some(since)) => {
                    // The first of the timer's light sweeps to find the bit set.
                    let every_us = SWEEP_INTERVAL.as_us();
                    let after_us = since.saturating_since(self.busy_until).as_us();
                    let ticks = after_us.div_ceil(every_us).max(1);
                    Some((self.busy_until + Duration::from_us(ticks * every_us), true))
                }
                (None, None) => None,
            };
            // Past its aging a key counted over the threshold is heard again.
            let aged = self
                .latest
                .map(|l| l + TRAP_AGING)
                .filter(|a| self.counted > TRAP_THRESHOLD && *a < t)
                .filter(|a| due.is_none_or(|(at, _)| *a < at));
            if let Some(a) = aged {
                self.counted = 0;
                // Heard from just after it.
                self.note_deaf(a);
                continue;
            }
            // A sweep due at `t` begins before what happens then, which it then serves.
            match due {
                Some((at, storm)) if at <= t => self.begin_sweep(at, storm),
                _ => return,
            }
        }
    }
}

impl SweepPlan {
    /// The plan of `cable` on a fabric whose sweep takes `sweep`; `heard` are traps of
    /// other switches (a fabric event's), each asking for a sweep.
    pub fn new(cable: Cable<'_>, sweep: Duration, heard: &[Instant]) -> Self {
        let mut events: Vec<(Instant, bool)> = Vec::with_capacity(cable.downs.len() * 2);
        // The switch's port changes state when its link goes down from up, and when it has
        // trained again: a cable out again before its link trained changes nothing.
        let mut up = cable.starts_up;
        for (k, d) in cable.downs.iter().enumerate() {
            if up {
                events.push((*d, true));
            }
            let trained = *d + cable.down + cable.link_up;
            up = cable.downs.get(k + 1).is_none_or(|next| trained < *next);
            if up {
                events.push((trained, true));
            }
        }
        events.extend(cable.also.iter().map(|t| (*t, true)));
        events.extend(heard.iter().map(|t| (*t, false)));
        events.sort();
        let mut m = Master {
            sweep,
            latched: None,
            counted: 0,
            latest: None,
            busy_until: Instant::ZERO,
            pending: None,
            sweeps: Vec::new(),
            deaf: Vec::new(),
            deaf_since: None,
            figures: TrapFigures::default(),
        };
        for (t, storm) in &events {
            m.until(*t);
            if *storm {
                m.change(*t);
            } else {
                m.ask_sweep(*t, false);
            }
            m.note_deaf(*t);
        }
        // Until every sweep asked for has run, the bit is clear and the key aged out.
        let last = events.last().map_or(Instant::ZERO, |(t, _)| *t);
        let settled = last + TRAP_AGING + SWEEP_INTERVAL + sweep + sweep;
        m.until(settled);
        let end = m.busy_until.max(settled);
        m.note_deaf(end);
        if let Some(a) = m.deaf_since.take() {
            m.deaf.push((a, end));
        }
        let mut plan = SweepPlan {
            sweeps: m.sweeps,
            sweep,
            deaf: m.deaf,
            figures: m.figures,
        };
        plan.figures.longest_deaf = plan.longest_deaf();
        plan
    }

    pub fn figures(&self) -> TrapFigures {
        self.figures
    }

    /// The longest a port on the leaf waits: trained just after the leaf went deaf, or just
    /// after a sweep within that began (it finds the port trained too late).
    fn longest_deaf(&self) -> Duration {
        let mut longest = Duration::ZERO;
        for (a, b) in &self.deaf {
            let first = self.sweeps.partition_point(|s| s.at <= *a);
            let last = self.sweeps.partition_point(|s| s.at < *b);
            let within = self.sweeps[first..last].iter().map(|s| s.at);
            for from in core::iter::once(*a).chain(within) {
                let t = from + Duration::from_us(1);
                longest = longest.max(self.begins(t, true).saturating_since(t));
            }
        }
        longest
    }

    /// Whether a change on the leaf at `t` goes unheard.
    fn deaf_at(&self, t: Instant) -> bool {
        let k = self.deaf.partition_point(|(a, _)| *a < t);
        k > 0 && t <= self.deaf[k - 1].1
    }

    /// The sweep in progress at `t` among those `counted`, by its beginning: one that
    /// begins at `t` is the one a trap then asked for, and finds what trained then.
    fn sweeping_at(&self, t: Instant, counted: impl Fn(&Sweep) -> bool) -> Option<Instant> {
        let k = self.sweeps.partition_point(|s| s.at < t);
        let before = self.sweeps[..k].iter().rev();
        let s = before
            .take_while(|s| t < s.at + self.sweep)
            .find(|s| counted(s))?;
        Some(s.at)
    }

    /// When the sweep that finds a port trained at `t` begins. Off the deaf leaf its own
    /// trap's: at once, or after a sweep of the storm's in progress (another switch's sweep
    /// in progress is the one a fabric event's own ports are found by, in their turn). On
    /// the storm's leaf while it is deaf, the next sweep anything makes, or the timer's.
    pub fn begins(&self, t: Instant, on_leaf: bool) -> Instant {
        if on_leaf && self.deaf_at(t) {
            let after = self.sweeping_at(t, |_| true).map_or(t, |s| s + self.sweep);
            let k = self.sweeps.partition_point(|s| s.at + self.sweep <= after);
            let last_end = k
                .checked_sub(1)
                .map_or(Instant::ZERO, |k| self.sweeps[k].at + self.sweep);
            let every_us = SWEEP_INTERVAL.as_us();
            let ticks = after
                .saturating_since(last_end)
                .as_us()
                .div_ceil(every_us)
                .max(1);
            let timer = last_end + Duration::from_us(ticks * every_us);
            let next = self
                .sweeps
                .get(self.sweeps.partition_point(|s| s.at < after));
            return next.map_or(timer, |s| s.at.min(timer));
        }
        self.sweeping_at(t, |s| s.storm)
            .map_or(t, |s| s + self.sweep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_ms(v)
    }

    /// A cable bouncing every second, dark 100 ms, on a fabric whose sweep takes 2.5 s.
    fn bouncing(bounces: u64, heard: &[Instant]) -> SweepPlan {
        let downs: Vec<Instant> = (0..bounces).map(|k| ms(10_000 + 1_000 * k)).collect();
        let cable = Cable {
            downs: &downs,
            down: Duration::from_ms(100),
            link_up: Duration::from_ms(50),
            starts_up: true,
            also: &[],
        };
        SweepPlan::new(cable, Duration::from_ms(2_500), heard)
    }

    fn starts(p: &SweepPlan) -> Vec<Instant> {
        p.sweeps.iter().map(|s| s.at).collect()
    }

    #[test]
    fn one_bounce_is_two_changes_one_trap_each_sweep_and_no_port_waits_after() {
        let p = bouncing(1, &[]);
        let f = p.figures();
        // Down at 10 s: a trap, a sweep; up at 10.15 s, during that sweep: the bit was
        // cleared as it began, so a trap, and the sweep after.
        assert_eq!((f.changes, f.traps, f.ignored, f.sweeps), (2, 2, 0, 2));
        assert_eq!(starts(&p), [ms(10_000), ms(12_500)]);
        // A port elsewhere trained in the first sweep waits for the second; after, none.
        assert_eq!(p.begins(ms(11_000), false), ms(12_500));
        assert_eq!(p.begins(ms(16_000), false), ms(16_000));
        assert_eq!(p.begins(ms(16_000), true), ms(16_000));
        // A port trained as a sweep begins is found by it.
        assert_eq!(p.begins(ms(12_500), false), ms(12_500));
    }

    #[test]
    fn a_long_storm_keeps_the_master_sweeping_until_its_traps_are_ignored() {
        let p = bouncing(120, &[]);
        let f = p.figures();
        // One trap a sweep (the switch's bit; a change as a sweep begins is found by it and
        // traps again), back to back: the twelfth, at 28 s, is counted past ten, ignored,
        // and the bit stays set until the timer's sweep 10 s after the last; the key aged
        // out by then, eleven more are heard, and so on.
        assert_eq!(starts(&p)[..3], [ms(10_000), ms(12_500), ms(15_000)]);
        assert_eq!(starts(&p)[7..9], [ms(27_500), ms(40_000)]);
        assert!(f.ignored >= 3 && f.traps < f.changes, "{f:?}");
        // A leaf-mate trained just after the sweep of 27.5 s began waits for the timer's.
        assert_eq!(p.begins(ms(27_600), true), ms(40_000));
        // A port elsewhere then waits only for the sweep in progress.
        assert_eq!(p.begins(ms(27_600), false), ms(30_000));
        assert!(f.longest_deaf >= Duration::from_ms(12_399), "{f:?}");
    }

    #[test]
    fn another_switchs_trap_sweeps_a_deaf_leaf_but_holds_no_port_up() {
        // The storm's twelfth trap ignored at 28 s (its bit set): a trap elsewhere at 34.5 s
        // asks for a sweep, which finds the leaf's port then, before the timer's at 40 s.
        let p = bouncing(40, &[ms(34_500)]);
        assert_eq!(p.begins(ms(33_000), true), ms(34_500));
        // A port elsewhere trained during that sweep is not held for it.
        assert_eq!(p.begins(ms(35_500), false), ms(35_500));
    }

    #[test]
    fn a_request_as_a_pending_sweep_begins_is_that_sweep() {
        // The up at 10.15 s made a sweep pending for 12.5 s; a trap elsewhere at 12.5 s is
        // that sweep, still the storm's: a port trained at 13 s waits for it to end.
        let p = bouncing(1, &[ms(12_500)]);
        assert_eq!(starts(&p), [ms(10_000), ms(12_500)]);
        assert_eq!(p.figures().sweeps, 2);
        assert_eq!(p.begins(ms(13_000), false), ms(15_000));
    }

    #[test]
    fn requests_at_one_instant_are_one_sweep_and_the_last_one_asked_runs() {
        let heard = [ms(10_000), ms(10_000), ms(200_000), ms(200_100)];
        let p = bouncing(1, &heard);
        // 10 s: the storm's trap and two heard, one sweep; 200 s and its request pending.
        assert_eq!(
            starts(&p),
            [ms(10_000), ms(12_500), ms(200_000), ms(202_500)]
        );
        assert_eq!(p.figures().sweeps, 2, "the storm's alone");
    }

    #[test]
    fn without_the_bit_latched_a_quiet_switch_is_heard_at_once() {
        let p = bouncing(3, &[]);
        let end = p.sweeps.last().expect("sweeps").at + Duration::from_ms(2_500);
        let t = end + TRAP_AGING + SWEEP_INTERVAL;
        assert_eq!(p.begins(t, true), t);
    }
}
