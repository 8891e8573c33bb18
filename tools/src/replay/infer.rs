//! From a bundle's records back to what struck the device: each cause a record names (a
//! health read that found the catastrophic buffer, a command that timed out, an
//! administrator's or a client's request, a cable pulled, the adapter gone) becomes the
//! scenario event that makes it, at the instant it was recorded; what a reset found (its
//! assertions refused, the device never ready again, another adapter answering) is armed
//! just before the reset that found it; the adapter's timings (reset, link training, the
//! subnet manager's sweep) are read from the gaps between the records that bound them.

use hcabus::coordinator::bundle::BundleView;
use hcabus::fault::{FaultArgs, FaultCode};
use hcabus::recorder::{HwOutcome, Record, RecordKind};
use hcabus::types::{Call, FailReason, PortState};
use hcabus::types::{ResetReason, State};
use hcabus::{HwStep, Policy};

use super::clients::{
    answers_reset_end, behaviours, clients, is_custom, is_reset_end, last_of, other_paths,
    ClientDraft,
};

/// One event of the scenario: when (to the microsecond the record says; the file rounds it
/// up to its millisecond), its TOML keys after `at_ms`, and whether it arms the device
/// (written before a cause at the same instant, which the format applies in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    pub at_us: u64,
    pub arms: bool,
    pub keys: String,
}

/// The adapter's timings read from the records (`None`: nothing showed it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Timings {
    pub hw_reset_ms: Option<u64>,
    pub link_up_ms: Option<u64>,
    pub sm_sweep_ms: Option<u64>,
    /// The highest port a record named: the fabric is modelled.
    pub ports: Option<u8>,
}

/// What the records say.
#[derive(Debug, Clone, Default)]
pub(super) struct Draft {
    pub clients: Vec<ClientDraft>,
    pub events: Vec<Event>,
    pub timings: Timings,
    pub notes: Vec<String>,
}

fn reason_of(kind: &RecordKind) -> Option<ResetReason> {
    match *kind {
        RecordKind::ResetStarted { reason, .. }
        | RecordKind::ResetJoined { reason }
        | RecordKind::FollowUpScheduled { reason } => Some(reason),
        _ => None,
    }
}

/// Reads the records into a draft of the scenario.
pub(super) fn draft(b: &BundleView, policy: &Policy) -> Draft {
    let mut d = Draft::default();
    d.clients = clients(b, &mut d.notes);
    behaviours(&b.records, &mut d.clients);
    other_paths(&b.records, &d.clients, &mut d.notes);
    d.timings = timings(&b.records);
    causes(b, policy, &mut d);
    resets(&b.records, &mut d);
    d
}

/// The causes recorded, each an event at its instant.
fn causes(b: &BundleView, policy: &Policy, d: &mut Draft) {
    let records = &b.records;
    let mut state = records
        .iter()
        .find_map(|r| match r.kind {
            RecordKind::Transition { from, .. } => Some(from),
            _ => None,
        })
        .unwrap_or(State::Operational);
    let mut cables = Cables::default();
    for (i, r) in records.iter().enumerate() {
        let (before, at_us) = (&records[..i], r.at.as_us());
        match r.kind {
            RecordKind::Transition { to, .. } => state = to,
            RecordKind::FaultInjected {
                fault: code,
                count,
                port,
                duration_ms,
                accepted: true,
            } => d.events.push(event(
                at_us,
                false,
                injection(code, count, port, duration_ms),
            )),
            RecordKind::Call { client: None, call } => {
                if let Some(keys) = bus_call(call, before, &records[i + 1..]) {
                    d.events.push(event(at_us, false, keys));
                }
            }
            RecordKind::Call {
                client: Some(_),
                call: Call::ResetRequest,
            }
            | RecordKind::Throttled { .. }
                if is_custom(&d.clients, r)
                    && !(answers_reset_end(&d.clients, r)
                        && is_reset_end(last_of(before, r), at_us)) =>
            {
                let keys = format!(
                    "{}\nclient = {}",
                    fault("admin_reset"),
                    quoted(r.name.as_str())
                );
                d.events.push(event(at_us, false, keys));
            }
            RecordKind::Hw {
                step: HwStep::ReadHealth,
                outcome: HwOutcome::CounterUnchanged,
                ..
            } if state == State::Operational
                && !stalled_before(before)
                && !injected(before, STALLS) =>
            {
                // The counter stopped since the last read that saw it move.
                stall(d, stall_start(before, policy));
            }
            RecordKind::Port {
                port, state: ps, ..
            } => {
                let pulled = state != State::Resetting && !injected(before, &[FaultCode::PortDown]);
                let link_up_us = d.timings.link_up_ms.unwrap_or(0) * 1000;
                if let Some(e) = cables.port(port, ps, at_us, pulled, link_up_us) {
                    d.events.push(e);
                }
            }
            _ => {}
        }
        reason_cause(d, r, before, policy);
    }
    d.events.extend(cables.still_out(b.taken_at().as_us()));
}

/// The fault a reset's reason names, when no record before made it: a catastrophic error a
/// health read found, a counter that stopped. A reset scheduled to follow another starts for
/// the cause found then, which made its event already.
fn reason_cause(d: &mut Draft, r: &Record, before: &[Record], policy: &Policy) {
    let at_us = r.at.as_us();
    let followed = |reason: ResetReason| {
        let last = before
            .iter()
            .rev()
            .find_map(|b| reason_of(&b.kind).map(|x| (b.kind, x)));
        matches!(last, Some((RecordKind::FollowUpScheduled { .. }, x)) if x == reason)
    };
    match (r.kind, reason_of(&r.kind)) {
        (RecordKind::ResetStarted { .. }, Some(reason)) if followed(reason) => {}
        (_, Some(ResetReason::Catastrophic))
            if !caused_at(d, at_us, "catastrophic")
                && !injected(before, &[FaultCode::Catastrophic]) =>
        {
            d.events.push(event(at_us, false, fault("catastrophic")));
        }
        (_, Some(ResetReason::HealthStall)) if !injected(before, STALLS) => {
            stall(d, stall_start(before, policy));
        }
        _ => {}
    }
}

/// A stopped health counter at `at_us`, once.
fn stall(d: &mut Draft, at_us: u64) {
    if !caused_at(d, at_us, "health_stall") {
        d.events.push(event(at_us, false, fault("health_stall")));
    }
}

/// The event of a call the bus recorded with no client (the hardware's, or an
/// administrator's), unless an injection it follows made it.
fn bus_call(call: Call, before: &[Record], after: &[Record]) -> Option<String> {
    let made_by = |codes: &[FaultCode]| injected(before, codes);
    match call {
        Call::CommandTimeout if !made_by(&[FaultCode::CommandTimeout, FaultCode::Hang]) => {
            Some(fault("command_timeout"))
        }
        Call::Catastrophic if !made_by(&[FaultCode::Catastrophic]) => Some(fault("catastrophic")),
        Call::SurpriseRemoval if !made_by(&[FaultCode::SurpriseRemoval]) => {
            Some(fault("surprise_removal"))
        }
        Call::AdminRestart => Some(fault("admin_restart")),
        Call::AdminReset => Some(fault(admin_kind(after))),
        _ => None,
    }
}

/// Cables pulled: when each port went Down outside a reset, until it trained again.
#[derive(Debug, Default)]
struct Cables {
    out_since_us: [Option<u64>; 2],
}

impl Cables {
    /// A port's new state; the cable pull it ends, if it ends one.
    fn port(
        &mut self,
        port: u8,
        state: PortState,
        at_us: u64,
        pulled: bool,
        link_up_us: u64,
    ) -> Option<Event> {
        let slot = &mut self.out_since_us[usize::from(port.clamp(1, 2) - 1)];
        match state {
            PortState::Down if pulled => {
                *slot = Some(at_us);
                None
            }
            PortState::Init => {
                let down_us = slot.take()?;
                // Plugged back when the link began to train.
                let out_ms = at_us.saturating_sub(down_us.saturating_add(link_up_us)) / 1000;
                Some(event(down_us, false, port_down(port, out_ms.max(1))))
            }
            _ => None,
        }
    }

    /// The cables still out when the bundle was taken: out until past it.
    fn still_out(&self, taken_us: u64) -> Vec<Event> {
        (1u8..)
            .zip(self.out_since_us)
            .filter_map(|(port, since)| {
                let down_us = since?;
                let out_ms = taken_us.saturating_sub(down_us) / 1000 + GRACE_OUT_MS;
                Some(event(down_us, false, port_down(port, out_ms)))
            })
            .collect()
    }
}

/// How long past the bundle a cable still out stays out: past the replay's end.
const GRACE_OUT_MS: u64 = 2_000;

fn port_down(port: u8, duration_ms: u64) -> String {
    format!(
        "{}\nport = {port}\nduration_ms = {duration_ms}",
        fault("port_down")
    )
}

impl Event {
    /// Its instant as the file writes it: the millisecond, rounded up, so that an event
    /// between two timers' milliseconds still comes after the first.
    pub(super) fn at_ms(&self) -> u64 {
        self.at_us.div_ceil(1000)
    }

    fn at_text(&self) -> String {
        if self.at_us.is_multiple_of(1000) {
            format!("{} ms", self.at_us / 1000)
        } else {
            format!("{:.3} ms", self.at_us as f64 / 1000.0)
        }
    }

    /// `catastrophic at 1000 ms`, `reset_fails (count 4) at 999 ms`.
    pub(super) fn summary(&self) -> String {
        let mut lines = self.keys.lines();
        let name = lines
            .next()
            .and_then(|l| l.strip_prefix("fault = "))
            .unwrap_or("?")
            .trim_matches('"');
        let args: Vec<&str> = lines.map(|l| l.trim()).collect();
        if args.is_empty() {
            format!("{name} at {}", self.at_text())
        } else {
            format!("{name} ({}) at {}", args.join(", "), self.at_text())
        }
    }
}

/// The faults that stop the health counter.
const STALLS: &[FaultCode] = &[FaultCode::HealthStall, FaultCode::Hang];

/// An injection the simulator accepted (INJECT_FAULT, `hcactl inject`), as the scenario's
/// event: the replay gives the same fault at the same instant.
fn injection(code: FaultCode, count: u32, port: u8, duration_ms: u32) -> String {
    match code.args() {
        FaultArgs::Count => format!("{}\ncount = {count}", fault(code.as_str())),
        FaultArgs::PortAndDuration => port_down(port, u64::from(duration_ms)),
        FaultArgs::None | FaultArgs::Client => fault(code.as_str()),
    }
}

/// Whether an injection of one of `codes` was accepted since the last reset ended: what
/// the records show after it is its doing, not a fault of its own.
fn injected(before: &[Record], codes: &[FaultCode]) -> bool {
    before
        .iter()
        .rev()
        .take_while(|r| {
            !matches!(
                r.kind,
                RecordKind::ResetFinished { .. } | RecordKind::ResetFailed { .. }
            )
        })
        .any(|r| {
            matches!(
                r.kind,
                RecordKind::FaultInjected { fault, accepted: true, .. } if codes.contains(&fault)
            )
        })
}

fn event(at_us: u64, arms: bool, keys: String) -> Event {
    Event { at_us, arms, keys }
}

fn fault(name: &str) -> String {
    format!("fault = {}", quoted(name))
}

/// A TOML string.
pub(super) fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn caused_at(d: &Draft, at_us: u64, name: &str) -> bool {
    let keys = fault(name);
    d.events.iter().any(|e| e.at_us == at_us && e.keys == keys)
}

/// Whether the last health read before these already found the counter stopped.
fn stalled_before(before: &[Record]) -> bool {
    let last = before.iter().rev().find_map(|r| match r.kind {
        RecordKind::Hw {
            step: HwStep::ReadHealth,
            outcome,
            ..
        } => Some(outcome),
        _ => None,
    });
    last == Some(HwOutcome::CounterUnchanged)
}

/// Which administrator's reset a call was: the reason of the reset it started or joined.
fn admin_kind(after: &[Record]) -> &'static str {
    let reason = after
        .iter()
        .take_while(|r| !matches!(r.kind, RecordKind::Call { .. }))
        .find_map(|r| reason_of(&r.kind));
    match reason {
        Some(ResetReason::AdminPlanned) => "planned_reset",
        Some(ResetReason::FirmwareActivate) => "fw_activate",
        _ => "admin_reset",
    }
}

/// When the health counter stopped: at the last read that saw it move (the counter
/// advances each millisecond, so a stall a millisecond later would move it once more; the
/// format applies an event before what runs at its instant, and the read still sees the
/// counter move since the read before it).
fn stall_start(before: &[Record], policy: &Policy) -> u64 {
    let moved = before.iter().rev().find(|r| {
        matches!(
            r.kind,
            RecordKind::Hw {
                step: HwStep::ReadHealth,
                outcome: HwOutcome::Healthy,
                ..
            }
        )
    });
    let unchanged = before.iter().rev().find(|r| {
        matches!(
            r.kind,
            RecordKind::Hw {
                step: HwStep::ReadHealth,
                outcome: HwOutcome::CounterUnchanged,
                ..
            }
        )
    });
    match (moved, unchanged) {
        (Some(m), _) => m.last_at.as_us(),
        (None, Some(u)) => {
            u.at.as_us()
                .saturating_sub(policy.health_poll_interval_ms.saturating_mul(1000))
        }
        (None, None) => 0,
    }
}

/// The adapter's timings: its reset (assertion to ready), its links' training (ready to
/// Init) and the subnet manager's sweep (Init to Active), each the first seen.
fn timings(records: &[Record]) -> Timings {
    let mut t = Timings::default();
    let mut asserted = None;
    let mut ready = None;
    let mut init = [None::<u64>; 2];
    for r in records {
        let us = r.at.as_us();
        match r.kind {
            RecordKind::Hw {
                step: HwStep::AssertReset | HwStep::FunctionLevelReset,
                outcome: HwOutcome::Done | HwOutcome::Asserted,
                ..
            } => asserted = Some(us),
            RecordKind::Hw {
                step: HwStep::ProbeReady,
                outcome: HwOutcome::Ready,
                ..
            } => {
                if let (None, Some(a)) = (t.hw_reset_ms, asserted) {
                    t.hw_reset_ms = Some(us.saturating_sub(a) / 1000);
                }
                ready = Some(us);
            }
            RecordKind::Port { port, state, .. } => {
                t.ports = t.ports.max(Some(port));
                let slot = usize::from(port.clamp(1, 2) - 1);
                match state {
                    PortState::Init => {
                        if let (None, Some(back)) = (t.link_up_ms, ready) {
                            t.link_up_ms = Some(us.saturating_sub(back) / 1000);
                        }
                        init[slot] = Some(us);
                    }
                    PortState::Active => {
                        if let (None, Some(i)) = (t.sm_sweep_ms, init[slot]) {
                            t.sm_sweep_ms = Some(us.saturating_sub(i) / 1000);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    t
}

/// What each reset found, armed before it: assertions refused, a device never ready again,
/// another adapter answering.
fn resets(records: &[Record], d: &mut Draft) {
    let mut start: Option<(usize, u64)> = None;
    let mut arming = Arming::default();
    for (i, r) in records.iter().enumerate() {
        let ended = match r.kind {
            RecordKind::FaultInjected {
                fault: FaultCode::ResetFails,
                count,
                accepted: true,
                ..
            } => {
                arming.outstanding = arming.outstanding.saturating_add(count);
                continue;
            }
            RecordKind::ResetStarted { .. } if start.is_none() => {
                start = Some((i, r.at.as_us()));
                continue;
            }
            RecordKind::ResetFinished { .. } => Ended::Finished,
            RecordKind::ResetFailed { error, .. } => Ended::Failed(error),
            _ => continue,
        };
        if let Some((from, start_us)) = start.take() {
            arming.arm(d, records, from..i + 1, start_us, ended);
            arming.last_end_us = r.at.as_us();
        }
    }
    // A reset still under way when the bundle was taken.
    if let Some((from, start_us)) = start {
        arming.arm(d, records, from..records.len(), start_us, Ended::Open);
    }
}

/// What arms each reset's faults: when the one before ended, and the refusals injected
/// (INJECT_FAULT) and not yet spent, which the device makes itself.
#[derive(Debug, Default)]
struct Arming {
    last_end_us: u64,
    outstanding: u32,
}

impl Arming {
    fn arm(
        &mut self,
        d: &mut Draft,
        records: &[Record],
        range: core::ops::Range<usize>,
        start_us: u64,
        ended: Ended,
    ) {
        let from = range.start;
        let reset = &records[range];
        // A millisecond before the reset, unless the one before was still running.
        let start_ms = start_us / 1000;
        let arm_ms = if start_ms >= 1 && self.last_end_us < (start_ms - 1) * 1000 {
            start_ms - 1
        } else {
            start_ms
        };
        let refused = refusals(reset);
        let extra = refused.saturating_sub(self.outstanding);
        self.outstanding = self.outstanding.saturating_sub(refused);
        if extra > 0 {
            let keys = format!("{}\ncount = {}", fault("reset_fails"), extra.min(64));
            d.events.push(event(arm_ms * 1000, true, keys));
        }
        for (code, keys) in found(reset, ended) {
            if !injected(&records[..from], &[code]) {
                d.events.push(event(arm_ms * 1000, true, keys));
            }
        }
    }
}

/// How many assertions (soft or FLR) a reset's records show refused.
fn refusals(reset: &[Record]) -> u32 {
    reset
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                RecordKind::Hw {
                    step: HwStep::AssertReset | HwStep::FunctionLevelReset,
                    outcome: HwOutcome::DeviceError | HwOutcome::Timeout,
                    ..
                }
            )
        })
        .fold(0u32, |n, r| n.saturating_add(r.count))
}

/// How a reset ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Finished,
    Failed(FailReason),
    /// Not by the bundle's end.
    Open,
}

/// The faults a reset's records show the device had, besides refused assertions.
fn found(reset: &[Record], ended: Ended) -> Vec<(FaultCode, String)> {
    let mut out = Vec::new();
    let probed = |outcome: HwOutcome| {
        reset.iter().any(|r| {
            matches!(r.kind, RecordKind::Hw { step: HwStep::ProbeReady, outcome: o, .. } if o == outcome)
        })
    };
    if ended == Ended::Failed(FailReason::DeviceReplaced) {
        out.push((FaultCode::DeviceReplaced, fault("device_replaced")));
    } else if ended != Ended::Finished && probed(HwOutcome::NotReady) && !probed(HwOutcome::Ready) {
        out.push((FaultCode::NeverReturns, fault("never_returns")));
    }
    out
}
