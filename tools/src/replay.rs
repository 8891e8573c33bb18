//! `hcasim replay FILE`: a diagnostic bundle (docs/ioctl.md, READ_BUNDLE), which a driver
//! kept when a device ended Failed in the field, turned back into a scenario that the
//! simulator runs; the replay's own record is then held against the bundle's, kind by kind
//! and in order. A field failure replayed on a desk.
//!
//! The bundle holds the policy, the clients (format 2) and the last flight records, not the
//! faults themselves: [`infer`] reads them from what the records show (module `infer`). A
//! record carries no I/O, so the clients' loads are their kinds' defaults; what the replay
//! could not take from the bundle is said in its notes, never guessed silently.

use std::fmt::Write as _;

use hcabus::coordinator::bundle::{read_bundle, BundleCause, BundleError, BundleView};
use hcabus::recorder::{HwOutcome, Record, RecordKind};
use hcabus::types::{ClientFlags, ClientKind, Epoch, State};
use hcabus::{HwStep, Instant, Policy};

use crate::scenario::{self, ScenarioError};

mod clients;
mod infer;
mod timebase;

pub use timebase::Timebase;

use infer::quoted;

/// A scenario made from a bundle, and what it could not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The scenario, in the format of docs/hcasim.md.
    pub toml: String,
    /// The events the scenario holds, in order: `catastrophic at 1000 ms`.
    pub events: Vec<String>,
    /// Each event's instant to the microsecond the records give, in the file's order: the
    /// replay runs these (the file rounds each up to its millisecond).
    pub instants: Vec<Instant>,
    /// What was taken as a default or left out, in words.
    pub notes: Vec<String>,
    /// How the bundle's instants map onto the replay's.
    pub timebase: Timebase,
}

/// Why a replay could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{0}")]
    Bundle(#[from] BundleError),
    #[error("the bundle holds no record: there is nothing to replay")]
    NoRecords,
    /// The scenario made from the bundle was refused: a defect of the replay, said whole.
    #[error("the scenario made from the bundle is refused ({0}); it is:\n{1}")]
    Scenario(ScenarioError, String),
    #[error("the scenario made from the bundle cannot be built: {0}")]
    Build(String),
    #[error(
        "the bundle spans {span_ms} ms once its quiet stretches are shortened: more than a \
         scenario runs ({MAX_SCENARIO_MS} ms)"
    )]
    TooLong { span_ms: u64 },
    #[error(
        "nothing of the bundle is compared: its records end a reset whose start its ring had \
         overwritten"
    )]
    NothingCompared,
}

/// The longest scenario (`duration_ms`'s bound).
const MAX_SCENARIO_MS: u64 = 24 * 3_600_000;

/// What a timebase did, in words.
fn timebase_notes(t: &Timebase) -> Vec<String> {
    let mut notes = Vec::new();
    if t.t0_us > 0 {
        notes.push(format!(
            "the replay's 0 is the bundle's {} (the bus's start); its times are the bundle's \
             less that",
            Instant::from_us(t.t0_us)
        ));
    }
    if t.stretches() > 0 {
        notes.push(format!(
            "{} quiet stretch(es) shortened by {} in all (whole health polls; every window of \
             the policy kept)",
            t.stretches(),
            hcabus::Duration::from_us(t.shortened_us())
        ));
    }
    notes
}

/// How long the replay runs past the bundle's instant.
const GRACE_MS: u64 = 1_000;

/// Whether the replay compares a record: an injection (the simulator's INJECT_FAULT) is
/// an input, which the replay makes a scenario event, not a record of its own. Of a bundle
/// that does not hold its record from the start (`whole` false), a health poll that found
/// the device healthy is not compared either: the poll's phase was set by resets before the
/// bundle's first record, which the replay does not have.
pub fn compared(r: &Record, whole: bool) -> bool {
    match r.kind {
        RecordKind::FaultInjected { .. } => false,
        RecordKind::Hw {
            step: HwStep::ReadHealth,
            outcome: HwOutcome::Healthy,
            ..
        } => whole,
        _ => true,
    }
}

/// The records the replay compares, as the recorder would have kept them had the others
/// not been written: a record the same as the one before it (once those between are left
/// out) is that one again, not another.
fn comparable(records: &[Record], whole: bool) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::with_capacity(records.len());
    for r in records.iter().filter(|r| compared(r, whole)) {
        if out.last().map(|l| signature(l, 0)) != Some(signature(r, 0)) {
            out.push(*r);
        }
    }
    out
}

/// A record as the replay compares it: its kind and fields, less what no simulator
/// reproduces (a catastrophic word, a settle time, a LID the subnet manager gave), its
/// epoch counted from `base` (a bundle that starts mid-record starts at a later one).
pub fn signature(r: &Record, base: u64) -> RecordKind {
    let rel = |e: Epoch| Epoch(e.0.saturating_sub(base));
    match r.kind {
        RecordKind::Hw { step, outcome, .. } => RecordKind::Hw {
            step,
            outcome,
            detail: 0,
        },
        RecordKind::Port { port, state, .. } => RecordKind::Port {
            port,
            state,
            lid: 0,
        },
        RecordKind::ResetStarted {
            epoch,
            reason,
            planned,
        } => RecordKind::ResetStarted {
            epoch: rel(epoch),
            reason,
            planned,
        },
        RecordKind::ResetFinished { epoch, outcome } => RecordKind::ResetFinished {
            epoch: rel(epoch),
            outcome,
        },
        RecordKind::ResetFailed { epoch, error } => RecordKind::ResetFailed {
            epoch: rel(epoch),
            error,
        },
        RecordKind::Event {
            client,
            event,
            epoch,
        } => RecordKind::Event {
            client,
            event,
            epoch: rel(epoch),
        },
        other => other,
    }
}

/// The first epoch records name: what a sequence's epochs are counted from.
fn base_epoch(records: &[Record]) -> u64 {
    records
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::ResetStarted { epoch, .. }
            | RecordKind::ResetFinished { epoch, .. }
            | RecordKind::ResetFailed { epoch, .. }
            | RecordKind::Event { epoch, .. } => Some(epoch.0),
            _ => None,
        })
        .min()
        .unwrap_or(0)
}

/// The records of two sequences, each with its epochs counted from its own first, equal
/// for as long as they go together: how many.
fn matching(a: &[Record], b: &[Record]) -> usize {
    let (base_a, base_b) = (base_epoch(a), base_epoch(b));
    a.iter()
        .zip(b)
        .take_while(|(x, y)| signature(x, base_a) == signature(y, base_b))
        .count()
}

/// The scenario that reproduces a bundle's records.
pub fn infer(b: &BundleView, name: &str) -> Result<Replay, ReplayError> {
    if b.records.is_empty() {
        return Err(ReplayError::NoRecords);
    }
    let mut policy = Policy::default();
    let mut notes = Vec::new();
    for (key, value) in Policy::KEYS.iter().zip(&b.policy) {
        if policy.set(key, *value).is_err() {
            notes.push(format!(
                "policy {key} = {value} is not one this build takes"
            ));
        }
    }
    if b.policy.len() != Policy::KEYS.len() {
        notes.push(format!(
            "the bundle gives {} policy key(s), this build has {}: the rest keep their defaults",
            b.policy.len(),
            Policy::KEYS.len()
        ));
    }
    if let Err(e) = policy.validate() {
        notes.push(format!(
            "the bundle's policy is not one this build runs ({e}): the replay runs the defaults"
        ));
        policy = Policy::default();
    }
    let timebase = timebase::timebase(b, &policy);
    notes.extend(timebase_notes(&timebase));
    let b = &timebase.apply(b);
    let mut d = infer::draft(b, &policy);
    notes.append(&mut d.notes);
    let injections = b
        .records
        .iter()
        .filter(|r| matches!(r.kind, RecordKind::FaultInjected { .. }))
        .count();
    if injections > 0 {
        notes.push(format!(
            "{injections} injection(s) (INJECT_FAULT) are the scenario's events, not records \
             the replay compares (a refused one is left out)"
        ));
    }
    let mut t = String::new();
    let last_ms = d.events.iter().map(infer::Event::at_ms).max().unwrap_or(0);
    // A second past the bundle's instant: a replay a little late is still compared whole.
    let end_ms = (b.taken_at().as_us() / 1000).max(last_ms) + GRACE_MS;
    if end_ms > MAX_SCENARIO_MS {
        return Err(ReplayError::TooLong { span_ms: end_ms });
    }
    let _ = writeln!(
        t,
        "# Made by `hcasim replay` from a bundle {} at {} (e{}).",
        b.why(),
        b.taken_at(),
        b.header.epoch
    );
    let _ = writeln!(
        t,
        "name = {}\nseed = 1\nduration_ms = {end_ms}",
        quoted(name)
    );
    hca_section(&mut t, b, &d.timings);
    policy_section(&mut t, &policy);
    notes.extend(client_sections(&mut t, &d.clients));
    d.events.sort_by_key(|e| (e.at_us, !e.arms));
    for e in &d.events {
        let _ = write!(t, "\n[[events]]\nat_ms = {}\n{}\n", e.at_ms(), e.keys);
    }
    let events = d.events.iter().map(infer::Event::summary).collect();
    let instants = d.events.iter().map(|e| Instant::from_us(e.at_us)).collect();
    Ok(Replay {
        toml: t,
        events,
        instants,
        notes,
        timebase,
    })
}

fn hca_section(t: &mut String, b: &BundleView, timings: &infer::Timings) {
    let h = &b.header;
    let fw = h.fw_version;
    let _ = write!(
        t,
        "\n[hca]\nnode_guid = \"{:#018x}\"\nfw_version = \"{}.{}.{}\"\n",
        h.node_guid,
        (fw >> 32) & 0xffff,
        (fw >> 16) & 0xffff,
        fw & 0xffff
    );
    if let Some(ms) = timings.hw_reset_ms {
        let _ = writeln!(t, "hw_reset_ms = {}", ms.max(1));
    }
    // Ports in the records: the fabric was modelled (its link training and sweep too).
    if let Some(ports) = timings.ports {
        let link_up_ms = timings.link_up_ms.unwrap_or(0);
        // A fabric is modelled when it takes time; one that takes none is given the least.
        let sm_sweep_ms = match timings.sm_sweep_ms.unwrap_or(0) {
            0 if link_up_ms == 0 => 1,
            ms => ms,
        };
        let _ = writeln!(t, "ports = {ports}");
        let _ = writeln!(t, "link_up_ms = {link_up_ms}");
        let _ = writeln!(t, "sm_sweep_ms = {sm_sweep_ms}");
    }
}

fn policy_section(t: &mut String, policy: &Policy) {
    let defaults = Policy::default().values();
    let mut head = false;
    for ((key, value), (default, limit)) in Policy::KEYS
        .iter()
        .zip(policy.values())
        .zip(defaults.iter().zip(Policy::LIMITS))
    {
        if value == *default {
            continue;
        }
        if !head {
            t.push_str("\n[policy]\n");
            head = true;
        }
        if matches!(limit, hcabus::policy::Limit::Flag) {
            let _ = writeln!(t, "{key} = {}", value != 0);
        } else {
            let _ = writeln!(t, "{key} = {value}");
        }
    }
}

/// The `[[clients]]` tables; notes for what a scenario cannot declare.
fn client_sections(t: &mut String, clients: &[clients::ClientDraft]) -> Vec<String> {
    let mut notes = Vec::new();
    let stack = clients.iter().any(|c| {
        matches!(
            c.kind,
            ClientKind::Ipoib | ClientKind::Srp | ClientKind::BootDisk
        )
    });
    for c in clients {
        let _ = write!(
            t,
            "\n[[clients]]\nname = {}\nkind = {}\n",
            quoted(&c.name),
            quoted(c.kind.as_str())
        );
        if matches!(c.kind, ClientKind::BootDisk | ClientKind::Srp) {
            let guard = c.flags.contains(ClientFlags::CAN_VETO);
            let _ = writeln!(t, "guard_last_path = {guard}");
        }
        if matches!(c.kind, ClientKind::Srp | ClientKind::Ipoib) && c.ack_delay_ms > 0 {
            let _ = writeln!(t, "ack_delay_ms = {}", c.ack_delay_ms);
        }
        if c.kind != ClientKind::Custom {
            continue;
        }
        if c.request_on_reset_end {
            t.push_str("request_on_reset_end = true\n");
        }
        if c.reregister_on_reset {
            t.push_str("reregister_on_reset = true\n");
        } else if c.unregister_on_reset {
            t.push_str("unregister_on_reset = true\n");
        }
        if c.vetoes {
            t.push_str("veto_planned = true\n");
        } else if c.flags.contains(ClientFlags::CAN_VETO) {
            t.push_str("can_veto = true\n");
        }
        if c.never_ack {
            t.push_str("never_ack = true\n");
        } else if c.ack_delay_ms > 0 {
            let _ = writeln!(t, "ack_delay_ms = {}", c.ack_delay_ms);
        }
    }
    if clients.iter().any(|c| c.kind == ClientKind::Ibal) && !stack {
        notes.push(
            "the access layer (ibal) registered with no storage or IPoIB client above it; a \
             scenario adds it only under one"
                .into(),
        );
    }
    if stack {
        notes.push(
            "the storage and IPoIB clients run their kinds' default load (a bundle keeps no I/O)"
                .into(),
        );
    }
    notes
}

/// A replay run: the bundle's records beside the replay's.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub original: Vec<Record>,
    pub replayed: Vec<Record>,
    /// The replay's state at its end, a second past the bundle's instant.
    pub state: State,
    /// The bundle's first records not compared: the end of a reset whose start its ring
    /// had overwritten.
    pub skipped: usize,
    /// The first position (after `skipped`) where the two differ (kind or order), or where one ends first.
    pub first_difference: Option<usize>,
    /// The largest time between two records the replay matched, in microseconds.
    pub drift_us: u64,
}

impl Verdict {
    pub fn same(&self) -> bool {
        self.first_difference.is_none()
    }
}

/// Runs the replay's scenario and holds its records against the bundle's, record number by
/// record number from the bundle's first.
pub fn run(b: &BundleView, replay: &Replay) -> Result<Verdict, ReplayError> {
    let b = &replay.timebase.apply(b);
    let mut setup =
        scenario::parse(&replay.toml).map_err(|e| ReplayError::Scenario(e, replay.toml.clone()))?;
    if setup.sim.faults.len() != replay.instants.len() {
        return Err(ReplayError::Build(format!(
            "the scenario has {} event(s), the replay {}",
            setup.sim.faults.len(),
            replay.instants.len()
        )));
    }
    for ((at, _), exact) in setup.sim.faults.iter_mut().zip(&replay.instants) {
        *at = *exact;
    }
    let mut node =
        hcabus_lab::stack::build(&setup).map_err(|e| ReplayError::Build(e.to_string()))?;
    let end = node.end();
    node.run_until(end);
    let coord = node.coordinator();
    let kept = (b.cause() == Some(BundleCause::Failed))
        .then(|| coord.kept_bundle().and_then(|k| read_bundle(k).ok()))
        .flatten();
    let whole = b.header.first_seq == 0;
    let mut original = comparable(&b.records, whole);
    // A bundle whose ring went round may start in a reset whose start it does not hold: its
    // records up to the next reset's start are not compared.
    let skipped = if whole { 0 } else { reset_tail(&original) };
    original.drain(..skipped);
    if original.is_empty() {
        return Err(ReplayError::NothingCompared);
    }
    let all = comparable(&coord.recorder().iter().copied().collect::<Vec<_>>(), whole);
    // A replay that failed is cut where its own bundle was kept, and held whole against the
    // original (a record more is a difference); one that did not is cut at the original's
    // length, as the run went on past the bundle's instant.
    let kept_end = kept.as_ref().and_then(|k| k.records.last()).map(|last| {
        all.iter()
            .position(|r| r.seq > last.seq)
            .unwrap_or(all.len())
    });
    let all = &all[..kept_end.unwrap_or(all.len())];
    let start = if whole { 0 } else { aligned(&original, all) };
    let mut replayed = all[start..].to_vec();
    if kept_end.is_none() {
        replayed.truncate(original.len());
    }
    let same = matching(&original, &replayed);
    let first_difference = (same < original.len().max(replayed.len())).then_some(same);
    let drift_us = original
        .iter()
        .zip(&replayed)
        .take(first_difference.unwrap_or(usize::MAX))
        .map(|(a, b)| a.at.as_us().abs_diff(b.at.as_us()))
        .max()
        .unwrap_or(0);
    Ok(Verdict {
        original,
        replayed,
        state: coord.state(),
        skipped,
        first_difference,
        drift_us,
    })
}

/// Where in the replay's records a bundle that starts mid-record (its ring had overwritten
/// the first) begins: the start that matches the longest run of its records.
fn aligned(original: &[Record], replayed: &[Record]) -> usize {
    (0..replayed.len())
        .max_by_key(|&k| {
            let window = &replayed[k..(k + original.len()).min(replayed.len())];
            (matching(original, window), core::cmp::Reverse(k))
        })
        .unwrap_or(0)
}

/// How many records open a sequence with the end of a reset it does not hold the start of:
/// up to its first reset's start, when a reset ends before any starts.
fn reset_tail(records: &[Record]) -> usize {
    let start = records
        .iter()
        .position(|r| matches!(r.kind, RecordKind::ResetStarted { .. }));
    let end = records.iter().position(|r| {
        matches!(
            r.kind,
            RecordKind::ResetFinished { .. } | RecordKind::ResetFailed { .. }
        )
    });
    match (start, end) {
        (Some(s), Some(e)) if e < s => s,
        (None, Some(_)) => records.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
