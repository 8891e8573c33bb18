//! `hcactl resets` and the last reset in `hcactl status`: the bus's reset history
//! (READ_RESETS), which polling cannot evict.

use hcabus::ioctl::*;
use hcactl::answer::Answer;
use serde_json::{json, Value};

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::view::{document, Clock};
use crate::view::{reason_name, result, us};

/// Summaries the bus holds at most (it keeps 16; room for more costs nothing).
const ROOM: usize = 64;

/// The history, oldest first, and the count of resets concluded since the bus started.
pub(crate) fn fetch(bus: &mut ControlDevice) -> Result<(u64, Vec<ResetSummaryOut>), Failure> {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let head = size_of::<ReadResetsOut>();
    let each = size_of::<ResetSummaryOut>();
    let out = bus.call(IOCTL_HCABUS_READ_RESETS, &input, head + ROOM * each)?;
    let a = Answer::new("READ_RESETS", &out);
    let count = a.u32(0)? as usize;
    let total = a.u64(8)?;
    if count > ROOM || count as u64 > total {
        return Err(a
            .malformed(&format!("{count} summaries of {total} resets"))
            .into());
    }
    let mut all = Vec::with_capacity(count);
    for i in 0..count {
        let s = ResetSummaryOut::decode(a.slice(head + i * each, each)?)
            .ok_or_else(|| a.malformed("a summary that does not decode"))?;
        all.push(s);
    }
    Ok((total, all))
}

fn text(raw: &Text32) -> Option<&str> {
    text_of(raw).filter(|t| !t.is_empty())
}

fn opt_us(v: u64) -> Value {
    (v != NONE_U64).then_some(v).into()
}

/// Why, as a person reads it: a restart is a restart, whatever reason code it ran under.
fn why(s: &ResetSummaryOut) -> &'static str {
    if s.flags & SUMMARY_RESTART != 0 {
        "admin_restart"
    } else {
        reason_name(s.reason)
    }
}

/// A planned reset called off because clients passed their deadline: not a veto.
fn aborted_unresponsive(s: &ResetSummaryOut) -> bool {
    s.result == RESULT_ABORTED_UNRESPONSIVE
}

pub(crate) fn summary_json(s: &ResetSummaryOut, clock: &Clock) -> Value {
    let aborted = aborted_unresponsive(s);
    json!({
        "ordinal": s.ordinal,
        "epoch": s.epoch,
        "new_epoch": (s.new_epoch != NONE_U64).then_some(s.new_epoch),
        "reason": why(s),
        "planned": s.flags & SUMMARY_PLANNED != 0,
        "flags": summary_flags(s),
        "admin_reason": text(&s.admin_reason),
        "outcome": result(s.result),
        "started_us": s.started_us,
        "started_at": clock.at(s.started_us),
        "quiesce_us": opt_us(s.quiesce_us),
        "hw_reset_us": opt_us(s.hw_reset_us),
        "restore_us": opt_us(s.restore_us),
        "total_us": opt_us(s.total_us),
        "requests": s.requests,
        "barrier_size": s.barrier_size,
        "soft_attempts": s.soft_attempts,
        "flr_used": s.flags & SUMMARY_FLR != 0,
        "pnp_operations": s.pnp_operations,
        // The wire's forced clients are those that passed the quiesce deadline; an abort
        // for them forced nobody through (docs/design.md §5 "An abort is not a veto").
        "forced": if aborted { 0 } else { s.forced },
        "forced_names": if aborted { Vec::new() } else { s.forced_names().collect::<Vec<_>>() },
        "unresponsive": s.forced,
        "unresponsive_names": s.forced_names().collect::<Vec<_>>(),
        "vetoed_by": (s.vetoer != NONE_U64).then(|| json!({
            "id": hcabus::types::ClientId::from_raw(s.vetoer).to_string(),
            "name": text(&s.vetoer_name),
            "reason": text(&s.veto_reason),
        })),
    })
}

/// A summary's flags, named (`planned`, `restart`, `flr`).
fn summary_flags(s: &ResetSummaryOut) -> Vec<&'static str> {
    [
        (SUMMARY_PLANNED, "planned"),
        (SUMMARY_RESTART, "restart"),
        (SUMMARY_FLR, "flr"),
    ]
    .into_iter()
    .filter(|(bit, _)| s.flags & bit != 0)
    .map(|(_, name)| name)
    .collect()
}

/// The lines that describe one reset, each without its label.
pub(crate) fn summary_lines(s: &ResetSummaryOut, clock: &Clock) -> Vec<String> {
    let mut lines = vec![format!(
        "#{} e{} {}{}: {}, total {}",
        s.ordinal,
        s.epoch,
        why(s),
        text(&s.admin_reason).map_or(String::new(), |r| format!(" (\"{r}\")")),
        result(s.result),
        us(s.total_us)
    )];
    lines.push(format!("started {}", clock.text(s.started_us)));
    let restart = s.flags & SUMMARY_RESTART != 0;
    lines.push(format!(
        "phases: quiesce {}, hardware {}, restore {}",
        if restart {
            "none (restart)".into()
        } else {
            us(s.quiesce_us)
        },
        us(s.hw_reset_us),
        us(s.restore_us)
    ));
    lines.push(format!(
        "hardware: {} soft reset(s){}; {} request(s) served; barrier of {}; {} PnP operation(s)",
        s.soft_attempts,
        if s.flags & SUMMARY_FLR != 0 {
            ", then a function-level reset"
        } else {
            ""
        },
        s.requests,
        s.barrier_size,
        s.pnp_operations
    ));
    if s.forced > 0 {
        let names: Vec<&str> = s.forced_names().collect();
        let more = usize::from(s.forced).saturating_sub(names.len());
        lines.push(format!(
            "{}: {}{}",
            if aborted_unresponsive(s) {
                "aborted, unresponsive at the quiesce deadline"
            } else {
                "forced"
            },
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if s.vetoer != NONE_U64 {
        lines.push(format!(
            "vetoed by {} ({}): {}",
            text(&s.vetoer_name).unwrap_or("?"),
            hcabus::types::ClientId::from_raw(s.vetoer),
            text(&s.veto_reason).unwrap_or("no reason given")
        ));
    }
    lines
}

pub(crate) fn resets(bus: &mut ControlDevice, as_json: bool) -> Outcome {
    let (total, all) = fetch(bus)?;
    let clock = Clock::of(&bus.state()?);
    if as_json {
        let summaries: Vec<Value> = all.iter().map(|s| summary_json(s, &clock)).collect();
        say!(
            "{:#}",
            document("resets", json!({ "total": total, "resets": summaries }))
        );
        return Ok(());
    }
    if all.is_empty() {
        say!("no reset since the bus started");
        return Ok(());
    }
    say!(
        "{} reset(s) since the bus started; the last {} (oldest first):",
        total,
        all.len()
    );
    for s in &all {
        for (i, line) in summary_lines(s, &clock).into_iter().enumerate() {
            say!("{}{line}", if i == 0 { "" } else { "    " });
        }
    }
    Ok(())
}
