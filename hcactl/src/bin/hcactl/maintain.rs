//! `hcactl maintain`: rolling maintenance (docs/design.md §7). The host's adapters one at a
//! time, each by a planned reset (or a firmware activation), and after each the wait until its
//! ports are Active again; the next adapter's reset is asked only then. A last-path veto (a
//! disk whose other path is not back yet) is waited out and asked again within the bound;
//! one that waiting cannot cure (the other path's adapter Failed or Removed, a disk of one
//! path), any other veto or failure, and a Failed or Removed device stop the run at once
//! with exit 1, naming the device, the reason and what to do.

use std::path::PathBuf;
use std::time::{Duration as WallDuration, Instant as WallInstant};

use hcabus::ioctl::*;
use indicatif::ProgressBar;
use serde_json::{json, Value};

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::resets;
use crate::state::waiting_for;
use crate::view::{document, duration_ms};
use crate::view::{result, us};
use crate::wait::{
    came_back, deadline_after, failure, outcome_of, progress, service_of, worst_case,
};

/// How long a last-path veto is waited out before the reset is asked again.
const VETO_RETRY: WallDuration = WallDuration::from_millis(500);

/// What `maintain` was asked.
pub(crate) struct Plan<'a> {
    pub(crate) socket: Option<&'a PathBuf>,
    /// The devices by name, in order; `None`: every device found, in the listing's order.
    pub(crate) devices: Option<&'a [String]>,
    pub(crate) firmware: bool,
    /// Per device: seconds for its reset and its ports (default: the policy's worst case).
    pub(crate) timeout: Option<u64>,
    pub(crate) as_json: bool,
}

/// One adapter done.
struct Done {
    device: String,
    from_epoch: u64,
    to_epoch: u64,
    outcome: &'static str,
    total_us: u64,
    /// Last-path vetoes waited out before the reset went ahead.
    vetoes: u32,
    /// From the outcome until its ports were Active again.
    service_ms: u128,
}

/// The devices `--devices` names, each once: a device named twice would be reset twice,
/// which nobody means. A usage error naming it, before anything is asked of any device.
fn once_each(devices: &[String]) -> Outcome {
    for (i, name) in devices.iter().enumerate() {
        if devices[..i].contains(name) {
            return Err(Failure::Usage(format!(
                "--devices: {name:?} given twice; each device is maintained once"
            )));
        }
    }
    Ok(())
}

/// The devices to maintain, checked before anything is reset: each named one must be there,
/// and named once.
fn targets(plan: &Plan<'_>) -> Result<Vec<Option<String>>, Failure> {
    if let Some(wanted) = plan.devices {
        once_each(wanted)?;
    }
    let found = crate::devices::find(plan.socket)?;
    let Some(wanted) = plan.devices else {
        if found.is_empty() {
            return Err(Failure::Outcome(
                "no device found (`hcactl devices`)".into(),
            ));
        }
        return Ok(found.into_iter().map(|f| f.name).collect());
    };
    for name in wanted {
        if !found
            .iter()
            .any(|f| f.name.as_deref() == Some(name.as_str()))
        {
            return Err(Failure::Usage(format!(
                "--devices: no device {name:?} (`hcactl devices` lists them)"
            )));
        }
    }
    Ok(wanted.iter().cloned().map(Some).collect())
}

pub(crate) fn maintain(plan: &Plan<'_>) -> Outcome {
    let targets = targets(plan)?;
    let bar = progress(plan.as_json);
    let mut done: Vec<Done> = Vec::with_capacity(targets.len());
    for name in &targets {
        let label = name.clone().unwrap_or_else(|| "the device".into());
        let one = one_device(plan, name.as_deref(), &label, &bar);
        match one {
            Ok(d) => {
                bar.suspend(|| say_done(&d, plan.as_json))?;
                done.push(d);
            }
            Err(e) => {
                bar.finish_and_clear();
                if plan.as_json {
                    say!("{}", report(&done, Some((&label, &e))));
                }
                return Err(e);
            }
        }
    }
    bar.finish_and_clear();
    if plan.as_json {
        say!("{}", report(&done, None));
    } else {
        say!("maintained {} device(s), one at a time", done.len());
    }
    Ok(())
}

fn say_done(d: &Done, as_json: bool) -> Outcome {
    if !as_json {
        let waited = if d.vetoes > 0 {
            format!(" after {} last-path veto(es) waited out", d.vetoes)
        } else {
            String::new()
        };
        say!(
            "{}: e{} {} in {}{waited}; ports back {} later; now e{}",
            d.device,
            d.from_epoch,
            d.outcome,
            us(d.total_us),
            duration_ms(d.service_ms as u64),
            d.to_epoch
        );
    }
    Ok(())
}

fn report(done: &[Done], failed: Option<(&str, &Failure)>) -> Value {
    document(
        "maintain",
        json!({
            "devices": done.iter().map(|d| json!({
                "device": d.device, "from_epoch": d.from_epoch, "to_epoch": d.to_epoch,
                "outcome": d.outcome, "total_us": d.total_us, "last_path_vetoes": d.vetoes,
                "service_ms": d.service_ms,
            })).collect::<Vec<_>>(),
            "stopped_at": failed.map(|(device, e)| json!({ "device": device, "reason": e.text() })),
        }),
    )
}

/// One adapter: its planned reset (asked again after a last-path veto, within the bound),
/// then its ports.
fn one_device(
    plan: &Plan<'_>,
    name: Option<&str>,
    label: &str,
    bar: &ProgressBar,
) -> Result<Done, Failure> {
    let named = |e: Failure| match e {
        Failure::Outcome(text) => Failure::Outcome(format!("{label}: {text}")),
        other => other,
    };
    let mut bus = ControlDevice::open(plan.socket, name)?;
    failed_stops(&mut bus, name, label)?;
    let limit = match plan.timeout {
        Some(s) => WallDuration::from_secs(s),
        None => worst_case(&mut bus)?,
    };
    let deadline = deadline_after(limit);
    let mode = if plan.firmware {
        ResetMode::FirmwareActivate
    } else {
        ResetMode::Planned
    };
    let mut vetoes = 0;
    loop {
        bar.set_message(format!("{label}: planned reset"));
        let epoch = crate::request_reset(&mut bus, mode, "hcactl maintain")?;
        let Some(s) = outcome_of(&mut bus, epoch, deadline, bar, label)? else {
            return Err(named(Failure::Outcome(format!(
                "no outcome within {} s (--timeout)",
                limit.as_secs()
            ))));
        };
        if came_back(&s) {
            bar.set_message(format!("{label}: {}", waiting_for(&s)));
            let start = WallInstant::now();
            let (after, back) = service_of(&mut bus, s, deadline, bar, label)?;
            if !back {
                return Err(named(Failure::Outcome(format!(
                    "back on e{}, but the service is not: {} after {} s (--timeout)",
                    after.epoch,
                    waiting_for(&after),
                    limit.as_secs()
                ))));
            }
            return Ok(Done {
                device: label.into(),
                from_epoch: s.last_epoch,
                to_epoch: s.epoch,
                outcome: result(s.last_result),
                total_us: s.last_total_us,
                vetoes,
                service_ms: start.elapsed().as_millis(),
            });
        }
        let why = failure(&mut bus, &s)?;
        let Some(reason) = last_path_veto(&mut bus, &s)? else {
            return Err(named(Failure::Outcome(why)));
        };
        if let Some(stop) = incurable(plan.socket, &reason) {
            return Err(named(Failure::Outcome(format!("{why}; {stop}"))));
        }
        if deadline.saturating_duration_since(WallInstant::now()) < VETO_RETRY {
            return Err(named(Failure::Outcome(format!(
                "still refused after {} s (--timeout): {why}",
                limit.as_secs()
            ))));
        }
        vetoes += 1;
        bar.set_message(format!("{label}: {why}; asking again"));
        std::thread::sleep(VETO_RETRY);
    }
}

/// A Failed or Removed device is not maintained: a planned reset cannot bring it back (the
/// bus refuses it), and a run that went on past it would report it as done. The run stops
/// there, naming the device and what to do.
fn failed_stops(bus: &mut ControlDevice, name: Option<&str>, label: &str) -> Outcome {
    let device = name.map_or(String::new(), |n| format!("--device {n} "));
    match state_name(bus.state()?.state) {
        "Failed" => Err(Failure::Outcome(format!(
            "{label} is Failed: maintenance stops here; `hcactl {device}restart` brings it back"
        ))),
        "Removed" => Err(Failure::Outcome(format!(
            "{}; maintenance stops here",
            crate::control::removed(label)
        ))),
        _ => Ok(()),
    }
}

/// The reason of the last-path guard's veto that ended `s`, if it was one (waiting may cure
/// it), rather than a client's with reasons of its own.
fn last_path_veto(bus: &mut ControlDevice, s: &StateOut) -> Result<Option<String>, Failure> {
    if s.last_result != RESULT_VETOED {
        return Ok(None);
    }
    let newest = resets::fetch(bus)?.1.into_iter().max_by_key(|r| r.ordinal);
    Ok(newest
        .and_then(|r| hcabus::ioctl::text_of(&r.veto_reason).map(str::to_owned))
        .filter(|t| t.starts_with("last path:")))
}

/// Why waiting cannot cure a last-path veto (`reason`, the guard's words), if it cannot: the
/// disk has no other path, or its other path's adapter is Failed or Removed (only a restart
/// or a new device brings it back). `None`: the other path is coming back (down, resetting,
/// logging in), and the reset is asked again.
fn incurable(socket: Option<&PathBuf>, reason: &str) -> Option<String> {
    let rest = reason.strip_prefix("last path: ")?;
    if rest == "no other path" {
        return Some(
            "its disk has no other path, which waiting cannot change: maintenance stops here"
                .into(),
        );
    }
    let (adapter, gap) = rest.split_once(" port ")?;
    let state = ControlDevice::open(socket, Some(adapter))
        .and_then(|mut b| b.state())
        .ok()
        .map(|s| state_name(s.state));
    match state {
        Some("Failed") => Some(format!(
            "{adapter} is Failed, which waiting cannot cure: maintenance stops here; \
             `hcactl --device {adapter} restart` brings it back"
        )),
        Some("Removed") => Some(format!(
            "{}; waiting cannot cure this veto: maintenance stops here",
            crate::control::removed(adapter)
        )),
        // Its adapter is not a device here to ask: the path's own state says enough.
        _ if gap.ends_with(" failed") => Some(format!(
            "the path through {adapter} failed (its device failed or left), which waiting \
             cannot cure: maintenance stops here"
        )),
        _ => None,
    }
}
