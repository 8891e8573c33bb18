//! A bundle's clock made a scenario's. A driver's clock counts from boot, and a bus that has
//! run for weeks records a reset days after its clients registered; a scenario starts at 0
//! and runs at most a day, every hour of it under its clients' load. So the replay's 0 is the
//! bus's start (its first record, moved back onto the phase of its first health poll), and
//! each quiet stretch (no reset under way, nothing recorded) longer than any window of the
//! policy is shortened by whole health-poll periods: every timer the policy runs, and the
//! poll's phase, come out the same.

use hcabus::coordinator::bundle::BundleView;
use hcabus::policy::Limit;
use hcabus::recorder::{HwOutcome, Record, RecordKind};
use hcabus::{HwStep, Instant, Policy};

/// How the bundle's instants map onto the replay's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Timebase {
    /// The bundle's instant that is the replay's 0.
    pub t0_us: u64,
    /// Quiet stretches shortened: from each original instant on, this much more is taken
    /// out (cumulative, in order).
    cuts: Vec<(u64, u64)>,
}

impl Timebase {
    /// The replay's instant of a bundle's.
    pub fn map(&self, us: u64) -> u64 {
        let cut = self
            .cuts
            .iter()
            .take_while(|(from, _)| *from <= us)
            .last()
            .map_or(0, |(_, total)| *total);
        us.saturating_sub(self.t0_us).saturating_sub(cut)
    }

    /// Microseconds of quiet taken out in all.
    pub fn shortened_us(&self) -> u64 {
        self.cuts.last().map_or(0, |(_, total)| *total)
    }

    /// How many quiet stretches were shortened.
    pub fn stretches(&self) -> usize {
        self.cuts.len()
    }

    /// The bundle with every instant mapped.
    pub fn apply(&self, b: &BundleView) -> BundleView {
        let mut out = b.clone();
        for r in &mut out.records {
            r.at = Instant::from_us(self.map(r.at.as_us()));
            r.last_at = Instant::from_us(self.map(r.last_at.as_us()));
        }
        out.header.taken_at_us = self.map(b.header.taken_at_us);
        out
    }
}

/// The timebase of a bundle run under `policy`.
pub fn timebase(b: &BundleView, policy: &Policy) -> Timebase {
    let poll_us = policy.health_poll_interval_ms.saturating_mul(1000).max(1);
    let first_us = b.records.first().map_or(0, |r| r.at.as_us());
    // The poll runs from the bus's start until a reset re-arms it: the first healthy read
    // before any reset gives its phase.
    let phase = b
        .records
        .iter()
        .take_while(|r| !matches!(r.kind, RecordKind::ResetStarted { .. }))
        .find(|r| {
            matches!(
                r.kind,
                RecordKind::Hw {
                    step: HwStep::ReadHealth,
                    outcome: HwOutcome::Healthy,
                    ..
                }
            )
        })
        .map(|r| r.at.as_us() % poll_us);
    let t0_us = match phase {
        Some(p) => {
            let back = (first_us % poll_us + poll_us - p) % poll_us;
            first_us.saturating_sub(back)
        }
        None => first_us,
    };
    Timebase {
        t0_us,
        cuts: quiet_cuts(&b.records, b.header.taken_at_us, policy, poll_us),
    }
}

/// The longest any timer of the policy runs: a quiet stretch keeps this much, and a poll.
fn longest_window_us(policy: &Policy) -> u64 {
    Policy::LIMITS
        .iter()
        .zip(policy.values())
        .filter(|(limit, _)| matches!(limit, Limit::Ms { .. }))
        .map(|(_, ms)| ms.saturating_mul(1000))
        .max()
        .unwrap_or(0)
}

fn quiet_cuts(records: &[Record], taken_us: u64, policy: &Policy, poll_us: u64) -> Vec<(u64, u64)> {
    let keep_us = longest_window_us(policy).saturating_add(poll_us);
    let mut cuts = Vec::new();
    let mut total = 0u64;
    let mut in_reset = false;
    let instants = records
        .iter()
        .map(|r| (r.at.as_us(), Some(r)))
        .chain(core::iter::once((taken_us, None)));
    let mut last_us: Option<u64> = None;
    for (at_us, r) in instants {
        if let (Some(last), false) = (last_us, in_reset) {
            let gap = at_us.saturating_sub(last);
            if gap > keep_us {
                // Whole polls only: the poll's phase after the stretch is kept.
                let cut = (gap - keep_us) / poll_us * poll_us;
                if cut > 0 {
                    total = total.saturating_add(cut);
                    cuts.push((at_us, total));
                }
            }
        }
        match r.map(|r| r.kind) {
            Some(RecordKind::ResetStarted { .. }) => in_reset = true,
            Some(RecordKind::ResetFinished { .. } | RecordKind::ResetFailed { .. }) => {
                in_reset = false;
            }
            _ => {}
        }
        last_us = Some(at_us.max(last_us.unwrap_or(0)));
    }
    cuts
}
