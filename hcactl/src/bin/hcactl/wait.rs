//! `--wait`: until a reset has an outcome, and by default until the service is back (every
//! port that was Active before it is Active again: docs/design.md §5 "Service restored").

use std::time::{Duration as WallDuration, Instant as WallInstant};

use hcabus::ioctl::*;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::state::waiting_for;
use crate::view::document;
use crate::view::{result, us};
use crate::{log, resets};

/// A spinner with the phase and the time elapsed, on stderr when it is a terminal (indicatif
/// draws nothing elsewhere) and never under `--json`.
pub(crate) fn progress(as_json: bool) -> ProgressBar {
    let target = if as_json {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(WallDuration::from_millis(100));
    bar
}

/// What a reset under way is doing, as the spinner says it.
fn phase(s: &StateOut, label: &str) -> String {
    format!(
        "{label}: reset of e{} {}",
        s.last_epoch,
        state_name(s.state)
    )
}

/// What `--wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum WaitFor {
    /// The reset's outcome, and then every port that was Active before it Active again.
    Service,
    /// The reset's outcome only: the adapter restored (RESET_END), ports or not.
    Restored,
}

/// How long `--wait` waits by default: the longest a reset can take under the bus's policy
/// (the whole quiesce deadline, then the hardware phase up to the auto-restart window, which
/// bounds every retry), and a minute for the restore and the polling. A policy the bus
/// takes makes this at most twenty days and a minute; a server that answers more is cut
/// to [`LONGEST_WAIT`].
pub(crate) fn worst_case(bus: &mut ControlDevice) -> Result<WallDuration, Failure> {
    let p = bus.policy()?;
    let ms = p
        .quiesce_deadline_ms
        .saturating_add(p.auto_restart_window_ms)
        .saturating_add(60_000);
    Ok(WallDuration::from_millis(ms).min(LONGEST_WAIT))
}

/// The longest any wait lasts: above the policy's worst case (two durations of at most ten
/// days each, and a minute), far below what the clock can count.
const LONGEST_WAIT: WallDuration = WallDuration::from_secs(21 * 24 * 3600);

/// When a wait of `limit` from now ends. Checked, never a panic after the request was sent:
/// a limit the clock cannot count from now is cut to [`LONGEST_WAIT`], and if even that
/// cannot be counted the wait ends now (and says it ran out).
pub(crate) fn deadline_after(limit: WallDuration) -> WallInstant {
    let now = WallInstant::now();
    now.checked_add(limit)
        .or_else(|| now.checked_add(LONGEST_WAIT))
        .unwrap_or(now)
}

/// Why a waited-for reset did not bring the device back, in words.
fn why_not(result: u32) -> &'static str {
    match result {
        RESULT_VETOED => "a client vetoed it; nothing was reset",
        RESULT_ABORTED_UNRESPONSIVE => "a client did not answer in time; nothing was reset",
        0x11 => "the hardware did not come back from reset",
        0x12 => "another device answered after the reset",
        0x13 => "too many automatic resets: storm control failed the device",
        0x14 => "the device did not come back within the auto-restart window",
        0x15 => "auto_recover is off: the device is left failed for the administrator",
        0x30 => "the device was removed",
        _ => "unknown outcome",
    }
}

/// How often `--wait` and `maintain` look at the bus.
const POLL: WallDuration = WallDuration::from_millis(20);

/// Looks until the reset of `epoch` has an outcome; `None` at `deadline`. `bar` shows the
/// phase, under `label`.
pub(crate) fn outcome_of(
    bus: &mut ControlDevice,
    epoch: u64,
    deadline: WallInstant,
    bar: &ProgressBar,
    label: &str,
) -> Result<Option<StateOut>, Failure> {
    loop {
        let s = bus.state()?;
        if s.flags & STATE_RESET_IN_PROGRESS == 0
            && s.last_epoch != NONE_U64
            && s.last_epoch >= epoch
        {
            return Ok(Some(s));
        }
        bar.set_message(phase(&s, label));
        if WallInstant::now() > deadline {
            return Ok(None);
        }
        std::thread::sleep(POLL);
    }
}

/// Looks until QUERY_STATE no longer says the device is recovering (every port that was
/// Active before the reset is Active again); the last answer, and whether it is so.
pub(crate) fn service_of(
    bus: &mut ControlDevice,
    mut s: StateOut,
    deadline: WallInstant,
    bar: &ProgressBar,
    label: &str,
) -> Result<(StateOut, bool), Failure> {
    while s.flags & STATE_RECOVERING != 0 {
        if WallInstant::now() > deadline {
            return Ok((s, false));
        }
        bar.set_message(format!("{label}: {}", waiting_for(&s)));
        std::thread::sleep(POLL);
        s = bus.state()?;
    }
    Ok((s, true))
}

/// Why a reset that ended `s` did not bring the device back, with who said so: the vetoer
/// and its reason, or the clients that did not answer (an abort is not a veto).
pub(crate) fn failure(bus: &mut ControlDevice, s: &StateOut) -> Result<String, Failure> {
    let said = match s.last_result {
        RESULT_VETOED => log::last_veto(bus)?.map(|s| format!(" ({s})")),
        RESULT_ABORTED_UNRESPONSIVE => resets::fetch(bus)?
            .1
            .last()
            .map(|last| format!(" ({})", last.forced_names().collect::<Vec<_>>().join(", "))),
        _ => None,
    };
    Ok(format!(
        "the reset ended {}: {}{}",
        result(s.last_result),
        why_not(s.last_result),
        said.unwrap_or_default()
    ))
}

/// Whether a reset that ended `s` brought the device back (Restored, FirmwareChanged).
pub(crate) fn came_back(s: &StateOut) -> bool {
    matches!(s.last_result, 1 | 2)
}

/// Waits until the reset of `epoch` has an outcome and, with `WaitFor::Service`, until the
/// service is back; fails unless both happen within the bound.
pub(crate) fn wait_for(
    bus: &mut ControlDevice,
    epoch: u64,
    until: WaitFor,
    timeout: Option<u64>,
    as_json: bool,
) -> Outcome {
    let limit = match timeout {
        Some(s) => WallDuration::from_secs(s),
        None => worst_case(bus)?,
    };
    let deadline = deadline_after(limit);
    let bar = progress(as_json);
    let found = outcome_of(bus, epoch, deadline, &bar, "waiting");
    let Some(s) = found.inspect_err(|_| bar.finish_and_clear())? else {
        bar.finish_and_clear();
        return Err(Failure::Outcome(format!(
            "no outcome within {} s (--timeout); the reset of e{epoch} may still be running",
            limit.as_secs()
        )));
    };
    if came_back(&s) && until == WaitFor::Service {
        let served = service(bus, &s, (deadline, limit), &bar, as_json);
        bar.finish_and_clear();
        return served;
    }
    bar.finish_and_clear();
    if as_json {
        say!("{}", wait_json(&s, s.state, Value::Null));
    } else {
        say!("{}", outcome_line(&s));
    }
    if came_back(&s) {
        return Ok(());
    }
    Err(Failure::Outcome(failure(bus, &s)?))
}

/// The adapter is back (its outcome printed): waits, within the same bound, until QUERY_STATE
/// no longer says it is recovering, and names the ports that did not come back if they do not.
fn service(
    bus: &mut ControlDevice,
    restored: &StateOut,
    (deadline, limit): (WallInstant, WallDuration),
    bar: &ProgressBar,
    as_json: bool,
) -> Outcome {
    let start = WallInstant::now();
    let awaited = crate::state::awaited_ports(restored);
    if !as_json {
        bar.suspend(|| emit(format_args!("{}", outcome_line(restored))))?;
    }
    let (s, back) = service_of(bus, *restored, deadline, bar, "waiting")?;
    if !back {
        return Err(Failure::Outcome(format!(
            "the device is back on e{}, but the service is not: {} after {} s (--timeout)",
            s.epoch,
            waiting_for(&s),
            limit.as_secs()
        )));
    }
    let waited = start.elapsed();
    bar.finish_and_clear();
    if as_json {
        let service = json!({ "restored": true, "awaited_ports": awaited,
                              "waited_ms": waited.as_millis() as u64 });
        say!("{}", wait_json(restored, s.state, service));
    } else if !awaited.is_empty() {
        let ports: Vec<String> = awaited.iter().map(u8::to_string).collect();
        say!(
            "service restored: port(s) {} Active again, {} later",
            ports.join(", "),
            crate::view::duration_ms(waited.as_millis() as u64)
        );
    }
    Ok(())
}

/// The reset's outcome as `wait` reports it: the reset waited for, the state it left (`now`,
/// which may be later than the reset's own), and what is known of the service.
fn wait_json(reset: &StateOut, now: u32, service: Value) -> Value {
    document(
        "wait",
        json!({ "epoch": reset.last_epoch, "outcome": result(reset.last_result),
                "total_us": reset.last_total_us, "new_epoch": reset.epoch,
                "state": state_name(now), "service": service }),
    )
}

/// The reset's outcome in a line: how it ended, how long it took, where the bus is now.
fn outcome_line(s: &StateOut) -> String {
    format!(
        "reset of e{}: {} in {}; now {} on e{}",
        s.last_epoch,
        result(s.last_result),
        us(s.last_total_us),
        state_name(s.state),
        s.epoch
    )
}
