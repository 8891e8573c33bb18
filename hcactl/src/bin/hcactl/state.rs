//! `hcactl status` and `hcactl health`: the bus's state and its health reporter, as text
//! or JSON.

use hcabus::ioctl::*;
use serde_json::{json, Value};

use hcabus::types::ResetReason;

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::view::{
    document, duration_ms, port_text, ports, ports_json, reason_name, result, state_word, us, Clock,
};

/// A duration of the bus in microseconds, in the one format of every view.
/// The stack's counters (QUERY_COUNTERS), or nothing from a host that counts none (the KMDF
/// driver: NOT_SUPPORTED) or a bus that predates them (version 7).
pub(crate) fn fetch_counters(bus: &mut ControlDevice) -> Result<Option<CountersOut>, Failure> {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    match bus.call(
        IOCTL_HCABUS_QUERY_COUNTERS,
        &input,
        size_of::<CountersOut>(),
    ) {
        Ok(out) => CountersOut::decode(&out).map(Some).ok_or_else(|| {
            Failure::Usage(format!(
                "a short QUERY_COUNTERS answer from the server ({} bytes, {} needed)",
                out.len(),
                size_of::<CountersOut>()
            ))
        }),
        Err(Failure::Refused(NtStatus::NOT_SUPPORTED | NtStatus::INVALID_DEVICE_REQUEST)) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The client kinds with counters, by name.
fn kinds(c: &CountersOut) -> impl Iterator<Item = (&'static str, &KindCountersOut)> + '_ {
    c.by_kind()
        .filter_map(|(kind, k)| (k.clients > 0).then_some((kind.as_str(), k)))
}

/// The stack's counters as JSON, as `rdma statistic` gives a device's.
pub(crate) fn counters_json(c: &CountersOut) -> Value {
    let by_kind: serde_json::Map<String, Value> = kinds(c)
        .map(|(name, k)| {
            let v = json!({ "clients": k.clients, "submitted": k.submitted,
                             "completed": k.completed, "failed": k.failed, "held": k.held });
            (name.to_string(), v)
        })
        .collect();
    json!({
        "io_by_kind": by_kind,
        "logins": c.logins,
        "logins_refused": c.logins_refused,
        "failovers": c.failovers,
        "commands_moved": c.commands_moved,
        "link_downed": c.link_downed.iter().zip(1u8..)
            .map(|(n, port)| json!({ "port": port, "count": n })).collect::<Vec<_>>(),
    })
}

/// The stack's counters as lines.
fn counters_lines(c: &CountersOut) -> Vec<String> {
    let io: Vec<String> = kinds(c)
        .map(|(name, k)| {
            format!(
                "{name} {} completed, {} failed, {} held",
                k.completed, k.failed, k.held
            )
        })
        .collect();
    let mut lines = vec![format!("io           {}", io.join("; "))];
    lines.push(format!(
        "paths        {} login(s), {} refused; {} failover(s), {} command(s) moved",
        c.logins, c.logins_refused, c.failovers, c.commands_moved
    ));
    let links: Vec<String> = c
        .link_downed
        .iter()
        .zip(1u8..)
        .map(|(n, port)| format!("port {port} {n}"))
        .collect();
    lines.push(format!("links down   {}", links.join(", ")));
    lines
}

/// The bus's history, or nothing from a bus that predates READ_RESETS (version 5).
fn newest_reset(bus: &mut ControlDevice) -> Result<Option<ResetSummaryOut>, Failure> {
    match crate::resets::fetch(bus) {
        Ok((_, all)) => Ok(all.last().copied()),
        Err(Failure::Refused(NtStatus::INVALID_DEVICE_REQUEST)) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn status_json(
    s: &StateOut,
    last: Option<&ResetSummaryOut>,
    counters: Option<&CountersOut>,
) -> Value {
    let fw = fw_version(s);
    let clock = Clock::of(s);
    let opt = |v: u64| (v != NONE_U64).then_some(v);
    // From QUERY_STATE alone when the bus keeps no history.
    let fallback = (s.last_epoch != NONE_U64).then(|| {
        json!({
            "epoch": s.last_epoch,
            "reason": reason_name(s.last_reason),
            "outcome": result(s.last_result),
            "quiesce_us": opt(s.last_quiesce_us),
            "hw_reset_us": opt(s.last_hw_reset_us),
            "restore_us": opt(s.last_restore_us),
            "total_us": opt(s.last_total_us),
        })
    });
    json!({
        "state": state_name(s.state),
        "time_zero": clock.zero(),
        "time_zero_unix_ms": clock.zero_unix_ms(),
        "reset_in_progress": s.flags & 1 == 1,
        // The adapter is back and the service not yet: the ports still awaited.
        "recovering": (s.flags & STATE_RECOVERING != 0).then(|| json!({
            "waiting_for_ports": awaited_ports(s),
        })),
        // The reset under way and how long it has run (QUERY_STATE's total of an open reset).
        "in_progress": (s.flags & 1 == 1 && s.last_epoch != NONE_U64).then(|| json!({
            "epoch": s.last_epoch,
            "reason": reason_name(s.last_reason),
            "elapsed_us": opt(s.last_total_us),
        })),
        "epoch": s.epoch,
        "identity": {
            "node_guid": format!("0x{:016x}", s.node_guid),
            "serial": format!("0x{:016x}", s.serial),
            "fw_version": format!("{}.{}.{}", fw.0, fw.1, fw.2),
            "vendor_id": s.vendor_id, "device_id": s.device_id,
            "subsys_vendor_id": s.subsys_vendor_id, "subsys_id": s.subsys_id,
        },
        "clients": s.clients, "max_clients": s.max_clients,
        "counters": {
            "resets_started": s.resets_started, "resets_restored": s.resets_restored,
            "resets_failed": s.resets_failed, "resets_aborted": s.resets_aborted,
            "refusals": s.refusals, "admin_refusals": s.admin_refusals,
            "pnp_operations": s.pnp_operations,
            "resets_by_reason": resets_by_reason(s),
        },
        "last_reset": last.map(|r| crate::resets::summary_json(r, &clock)).or(fallback),
        "log_next_seq": s.log_next_seq,
        "ports": ports_json(s),
        // What the stack above the bus did (QUERY_COUNTERS); null where the host counts none.
        "stack": counters.map(counters_json),
    })
}

/// QUERY_STATE's resets by reason, named: `admin_restart` for index 0, then each
/// `ResetReason`.
pub(crate) fn resets_by_reason(s: &StateOut) -> Value {
    let mut by = serde_json::Map::new();
    for (i, n) in s.resets_by_reason.iter().enumerate() {
        let name = match i {
            0 => Some("admin_restart"),
            _ => ResetReason::try_from(i as u32)
                .ok()
                .map(ResetReason::as_str),
        };
        if let Some(name) = name {
            by.insert(name.into(), (*n).into());
        }
    }
    Value::Object(by)
}

/// The ports the service still waits for, from QUERY_STATE's flags.
pub(crate) fn awaited_ports(s: &StateOut) -> Vec<u8> {
    let mask = s.flags >> STATE_AWAITED_PORTS_SHIFT;
    (1..=8u8).filter(|p| mask & (1 << (p - 1)) != 0).collect()
}

/// "waiting for port 1", "waiting for ports 1, 2".
pub(crate) fn waiting_for(s: &StateOut) -> String {
    let ports: Vec<String> = awaited_ports(s).iter().map(u8::to_string).collect();
    let plural = if ports.len() == 1 { "" } else { "s" };
    format!("waiting for port{plural} {}", ports.join(", "))
}

fn fw_version(s: &StateOut) -> (u64, u64, u64) {
    (
        s.fw_version >> 32,
        (s.fw_version >> 16) & 0xffff,
        s.fw_version & 0xffff,
    )
}

/// One look at the bus: its state and its last concluded reset.
pub(crate) fn status(bus: &mut ControlDevice, as_json: bool, compact: bool) -> Outcome {
    let s = bus.state()?;
    let last = newest_reset(bus)?;
    let counters = fetch_counters(bus)?;
    if as_json {
        let v = document("status", status_json(&s, last.as_ref(), counters.as_ref()));
        if compact {
            say!("{v}");
        } else {
            say!("{v:#}");
        }
        return Ok(());
    }
    let fw = fw_version(&s);
    let note = if s.flags & 1 == 1 {
        String::from(" (reset in progress)")
    } else if s.flags & STATE_RECOVERING != 0 {
        format!(" (recovering: {})", waiting_for(&s))
    } else {
        String::new()
    };
    let clock = Clock::of(&s);
    say!("state        {}{note}", state_name(s.state));
    say!("epoch        e{}", s.epoch);
    if let Some(zero) = clock.zero() {
        say!("started      {zero} (the bus's time zero)");
    }
    say!(
        "device       {:04x}:{:04x} subsystem {:04x}:{:04x}, node GUID 0x{:016x}, serial 0x{:016x}, firmware {}.{}.{}",
        s.vendor_id, s.device_id, s.subsys_vendor_id, s.subsys_id, s.node_guid, s.serial, fw.0, fw.1, fw.2
    );
    say!("clients      {} of {}", s.clients, s.max_clients);
    for (i, (port, p)) in ports(&s).enumerate() {
        say!(
            "{:<13}{}",
            if i == 0 { "ports" } else { "" },
            port_text(port, p)
        );
    }
    say!(
        "resets       {} started, {} restored, {} failed, {} aborted; refused: {} client call(s), {} administrator request(s); {} PnP operations",
        s.resets_started, s.resets_restored, s.resets_failed, s.resets_aborted, s.refusals, s.admin_refusals, s.pnp_operations
    );
    let by: Vec<String> = resets_by_reason(&s)
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if !by.is_empty() {
        say!("by reason    {}", by.join(", "));
    }
    if s.flags & 1 == 1 && s.last_epoch != NONE_U64 {
        say!(
            "in progress  e{} {}, {} so far",
            s.last_epoch,
            reason_name(s.last_reason),
            us(s.last_total_us)
        );
    }
    match (&last, s.last_epoch) {
        (Some(last), _) => {
            for (i, line) in crate::resets::summary_lines(last, &clock)
                .iter()
                .enumerate()
            {
                say!("{:<13}{line}", if i == 0 { "last reset" } else { "" });
            }
        }
        (None, NONE_U64) => say!("last reset   none"),
        (None, _) => say!(
            "last reset   e{} {}: {}, total {} (quiesce {}, hardware {}, restore {})",
            s.last_epoch,
            reason_name(s.last_reason),
            result(s.last_result),
            us(s.last_total_us),
            us(s.last_quiesce_us),
            us(s.last_hw_reset_us),
            us(s.last_restore_us)
        ),
    }
    for line in counters.iter().flat_map(counters_lines) {
        say!("{line}");
    }
    say!("log          next sequence {}", s.log_next_seq);
    Ok(())
}

/// `status --watch`: a look every `interval`, `count` times (until interrupted when
/// `None`); on a terminal each look replaces the last.
pub(crate) fn watch(
    bus: &mut ControlDevice,
    as_json: bool,
    interval: std::time::Duration,
    count: Option<u64>,
) -> Outcome {
    use std::io::IsTerminal;
    let redraw = !as_json && std::io::stdout().is_terminal();
    let mut looks = 0u64;
    loop {
        if redraw {
            // Clear the screen and home the cursor.
            say!("\x1b[2J\x1b[H");
        } else if looks > 0 && !as_json {
            say!("");
        }
        status(bus, as_json, true)?;
        looks += 1;
        if count.is_some_and(|n| looks >= n) {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

/// An instant `at_us` of the bus's clock, said with its wall-clock time and its age at
/// `now_us`.
fn ago(clock: &Clock, at_us: u64, now_us: u64) -> String {
    if at_us == NONE_U64 {
        return "never".into();
    }
    format!(
        "at {}, {} ago",
        clock.text(at_us),
        us(now_us.saturating_sub(at_us))
    )
}

pub(crate) fn fetch_health(bus: &mut ControlDevice) -> Result<HealthOut, Failure> {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let out = bus.call(IOCTL_HCABUS_QUERY_HEALTH, &input, size_of::<HealthOut>())?;
    HealthOut::decode(&out).ok_or_else(|| {
        Failure::Usage(format!(
            "a short QUERY_HEALTH answer from the server ({} bytes, {} needed)",
            out.len(),
            size_of::<HealthOut>()
        ))
    })
}

/// The health reporter as JSON; `s` (QUERY_STATE) gives the wall clock and the ports in
/// their one shape.
pub(crate) fn health_json(h: &HealthOut, s: &StateOut) -> Value {
    let clock = Clock::of(s);
    let reporter = ReporterState::try_from(h.reporter_state).map_or("?", |r| r.as_str());
    let cause = (h.last_error_us != NONE_U64).then(|| reason_name(h.last_error_cause));
    json!({
        "reporter": "fw_fatal",
        "state": state_word(reporter),
        "error_count": h.error_count,
        "recover_count": h.recover_count,
        "last_error": cause.map(|c| json!({
            "time_us": h.last_error_us,
            "time": clock.at(h.last_error_us),
            "cause": c,
            "syndrome": format!("0x{:08x}", h.last_syndrome),
        })),
        "health_counter": h.health_counter,
        "counter_unchanged_polls": h.unchanged_polls,
        "counter_moved_us": (h.counter_moved_us != NONE_U64).then_some(h.counter_moved_us),
        "counter_moved": clock.at(h.counter_moved_us),
        "now_us": h.now_us,
        "now": clock.at(h.now_us),
        "auto_recover": h.auto_recover == 1,
        "grace_period_ms": h.grace_period_ms,
        "max_auto_resets": h.max_auto_resets,
        "health_poll_ms": h.health_poll_ms,
        "ports": ports_json(s),
    })
}

pub(crate) fn health(bus: &mut ControlDevice, as_json: bool) -> Outcome {
    let h = fetch_health(bus)?;
    let s = bus.state()?;
    if as_json {
        say!("{:#}", document("health", health_json(&h, &s)));
        return Ok(());
    }
    let clock = Clock::of(&s);
    let reporter = ReporterState::try_from(h.reporter_state).map_or("?", |r| r.as_str());
    let cause = (h.last_error_us != NONE_U64).then(|| reason_name(h.last_error_cause));
    say!("reporter     fw_fatal, state {}", state_word(reporter));
    say!(
        "errors       {} found, {} recovered",
        h.error_count,
        h.recover_count
    );
    match cause {
        Some(c) => say!(
            "last error   {c} {}, syndrome 0x{:08x}",
            ago(&clock, h.last_error_us, h.now_us),
            h.last_syndrome
        ),
        None => say!("last error   none"),
    }
    say!(
        "counter      {} (last moved {}; {} read(s) unchanged, 3 is a stall; read every {})",
        h.health_counter,
        ago(&clock, h.counter_moved_us, h.now_us),
        h.unchanged_polls,
        duration_ms(u64::from(h.health_poll_ms))
    );
    say!(
        "recovery     auto_recover {}, grace period {} (at most {} automatic resets in it)",
        if h.auto_recover == 1 { "on" } else { "off" },
        duration_ms(h.grace_period_ms),
        h.max_auto_resets
    );
    for (i, (port, p)) in ports(&s).enumerate() {
        say!(
            "{:<13}{}",
            if i == 0 { "ports" } else { "" },
            port_text(port, p)
        );
    }
    Ok(())
}
