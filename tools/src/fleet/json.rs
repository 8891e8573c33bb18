//! The fleet's JSON document (`hcasim.fleet/1`, docs/json.md): each run's figures, and
//! with several seeds the campaign across them (`campaign.rs`).

use hcabus_fleet::{FaultFigures, FleetFault};
use hcabus_lab::baselines::fixed_wait;
use serde_json::{json, Value};

use super::{FleetRun, Source};
use crate::scenario::fleet::FleetScenario;

fn ms(d: hcabus::Duration) -> f64 {
    d.as_us() as f64 / 1e3
}

fn fault_json(f: &FaultFigures) -> Value {
    let (target, leaf, down) = match f.fault {
        FleetFault::TargetRestart { target, down } => (Some(target), None, down),
        FleetFault::LeafReboot { leaf, down } | FleetFault::TrapStorm { leaf, down, .. } => {
            (None, Some(leaf), down)
        }
        FleetFault::LinkFlap { down } | FleetFault::SaOverload { down } => (None, None, down),
        FleetFault::PowerOn
        | FleetFault::SmFailover
        | FleetFault::SmHandover { .. }
        | FleetFault::Rollout { .. } => (None, None, hcabus::Duration::ZERO),
    };
    let (leaves_touched, most_on_one_leaf) = f.leaves_touched();
    let (every, bounces) = match f.fault {
        FleetFault::TrapStorm { every, bounces, .. } => (Some(ms(every)), Some(bounces)),
        _ => (None, None),
    };
    json!({
        "kind": f.fault.name(),
        "at_ms": f.at.as_us() as f64 / 1e3,
        "target": target,
        "leaf": leaf,
        "down_ms": ms(down),
        "hosts": f.hosts,
        "back": f.back,
        "all_back_ms": f.all_back_after.map(ms),
        "theoretical_min_ms": ms(f.theoretical_min),
        "over_min": f.over_min(),
        "outage_ms": ms(f.outage),
        "controlled_min_ms": ms(f.controlled_min),
        "excess_ms": f.excess_us().map(|us| us as f64 / 1e3),
        "controlled_over_min": f.controlled_over_min(),
        "p50_ms": f.p50.map(ms),
        "p99_ms": f.p99.map(ms),
        "multicast_hosts": f.multicast_hosts,
        "multicast_p99_ms": f.multicast_p99.map(ms),
        "multicast_max_ms": f.multicast_max.map(ms),
        "blast": {
            "leaves_touched": leaves_touched,
            "most_on_one_leaf": most_on_one_leaf,
            "per_leaf": f.per_leaf,
            "boot_disks_cut": f.boot_disks_cut,
        },
        "paths_ridden": f.paths_ridden,
        "reassign_lids": f.fault.renumbers(),
        "every_ms": every,
        "bounces": bounces,
    })
}

pub(super) fn run_json(r: &FleetRun) -> Value {
    let f = &r.figures;
    let io = &f.io;
    json!({
        "seed": f.seed,
        "retry": f.retry.name(),
        "retry_wait_ms": fixed_wait(f.retry).map(ms),
        "ipoib": if f.naive_ipoib { "reset_on_sa_timeout" } else { "retry" },
        "held": f.held(),
        "wall_ms": r.wall_ms,
        "host_steps": f.steps,
        "faults": f.faults.iter().map(fault_json).collect::<Vec<_>>(),
        "targets": f.targets.iter().map(|t| json!({
            "lid": t.lid,
            "login_concurrency": t.capacity.concurrent,
            "logins_per_second": t.capacity.per_second,
            "peak_per_second": t.stats.peak_per_second,
            "accepted": t.stats.accepted,
            "refused_busy": t.stats.refused_busy,
            "refused_rate": t.stats.refused_rate,
            "refused_down": t.stats.refused_down,
            "queues": t.capacity.queue,
            "queued": t.stats.queued,
            "longest_wait_ms": ms(t.stats.longest_wait),
        })).collect::<Vec<_>>(),
        "logins_refused": f.logins_refused(),
        "logins_answered_late": f.logins_answered_late,
        "adapter_resets": f.resets,
        "rollout": f.rollout.map(|ro| json!({
            "started_ms": ro.started_at.as_us() as f64 / 1e3,
            "took_ms": ro.finished_at.map(|e| ms(e.saturating_since(ro.started_at))),
            "adapters": ro.adapters,
            "done": ro.done,
            "refused_by_guard": ro.vetoed,
            "not_restored": ro.failed,
            "given_up": ro.given_up,
            "peak_in_reset_per_target": ro.peak_per_target,
            "max_in_reset_per_target": ro.max_per_target,
        })),
        "max_no_path_ms": f.max_no_path_us as f64 / 1e3,
        "sa": {
            "queries_per_second": f.sa_setup.queries_per_second,
            "receive_queue": f.sa_setup.receive_queue,
            "receive_us": f.sa_setup.receive.as_us(),
            "backlog_limit": f.sa_setup.backlog_limit,
            "max_wait_ms": f.sa_setup.max_wait.as_us() as f64 / 1e3,
            "busy_answers": f.sa_setup.busy_answers,
            "peak_per_second": f.sa.peak_per_second,
            "answered": f.sa.answered,
            "late": f.sa.late,
            "busy": f.sa.busy,
            "dropped_busy": f.sa.dropped_full + f.sa.dropped_backlog + f.sa.dropped_old,
            "dropped_full": f.sa.dropped_full,
            "dropped_backlog": f.sa.dropped_backlog,
            "dropped_old": f.sa.dropped_old,
            "dropped_away": f.sa.dropped_away,
            "lost_in_failover": f.sa.lost_in_failover,
            "queued_at_end": f.sa_queued,
            "peak_backlog": f.sa.peak_backlog,
            "peak_wait_ms": f.sa.peak_wait.as_us() as f64 / 1e3,
        },
        "sa_timeouts": f.sa_timeouts,
        "sa_busy": f.sa_busy,
        "ipoib_resets_asked": f.ipoib_resets_asked,
        "path_records": {
            "queries": f.path_records.queries,
            "failed": f.path_records.failed,
            "rescans": f.path_records.rescans,
        },
        "srp_daemon": f.srp_daemon.map(|d| json!({
            "rescan_ms": ms(d.rescan),
            "rescans": d.rescans,
            "queries": d.queries,
            "unanswered": d.unanswered,
            "given_up": d.given_up,
            "merged": d.merged,
        })),
        "linux_initiators": f.linux.map(|l| json!({
            "hosts": l.hosts,
            "ch_count": l.ch_count,
            "channels": l.channels,
            "path_records": l.path_records,
            "reqs_again": l.reqs_again,
            "failed": l.failed,
            "removed": l.removed,
            "longest_reconnect_delay_ms": ms(l.longest_reconnect_delay),
            "up": l.up,
            "longest_login_ms": ms(l.longest_login),
        })),
        "trap_storm": f.traps.map(|t| json!({
            "changes": t.changes,
            "traps": t.traps,
            "ignored": t.ignored,
            "sweeps": t.sweeps,
            "busy_ms": ms(t.busy),
            "longest_leaf_wait_ms": ms(t.longest_deaf),
        })),
        "firmware": f.firmware.map(|fw| json!({
            "delay_ms": [ms(f.power_on.delay.0), ms(f.power_on.delay.1)],
            "firmware_boot_ms": f.power_on.firmware.map(ms),
            "logins": fw.logins,
            "retries": fw.retries,
            "boot_failures": fw.boot_failures,
            "still_off": fw.still_off,
            "last_os_start_ms": fw.last_os_start.map(|t| t.as_us() as f64 / 1e3),
            "last_port_active_ms": fw.last_port_active.map(|t| t.as_us() as f64 / 1e3),
        })),
        "io": {
            "submitted": io.submitted,
            "completed": io.completed,
            "failed": io.failed,
            "in_flight": io.in_flight,
            "lost": io.lost,
            "duplicated": io.duplicated,
            "paging_failed": io.paging_failed,
            "overdue": io.overdue,
        },
        "paging_stall": {
            "p50_ms": ms(f.paging_stall[0]),
            "p99_ms": ms(f.paging_stall[1]),
            "max_ms": ms(f.paging_stall[2]),
            "over_pdo_remove_period": f.paging_over_pdo_remove,
            "over_disk_timeout": f.paging_over_disk_timeout,
        },
        "model_overflows": f.model_overflows,
        "invariants_violated": f.violations,
        "violations": f.quoted_violations,
    })
}

/// The `hcasim.fleet/1` document of `runs`, with their campaign when they span several
/// seeds.
pub fn json(source: &Source, scenario: &FleetScenario, runs: &[FleetRun]) -> String {
    let s = &scenario.setup;
    let runs: Vec<Value> = runs.iter().map(run_json).collect();
    document(
        json!({
            "schema": hcactl::contract::schema("hcasim", "fleet"),
            "name": s.name,
            "file": source.file,
            "scenario_sha256": source.sha256,
            "hosts": s.hosts,
            "duration_ms": s.duration.as_ms(),
        }),
        runs,
    )
    .to_string()
}

/// A fleet document: `head` (every key but the runs) with `runs` and, when they span
/// several seeds, their campaign. One process's document and a merge of shards' are made
/// here, the same way.
pub(super) fn document(mut head: Value, runs: Vec<Value>) -> Value {
    let seeds: std::collections::BTreeSet<u64> =
        runs.iter().filter_map(|r| r["seed"].as_u64()).collect();
    let campaign = (seeds.len() > 1).then(|| {
        let file = head["file"].as_str().unwrap_or("FILE").to_string();
        super::campaign::json(&file, &super::campaign::of(&runs))
    });
    head["runs"] = Value::Array(runs);
    if let Some(c) = campaign {
        head["campaign"] = c;
    }
    head
}
