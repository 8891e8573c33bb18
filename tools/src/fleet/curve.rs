//! The capacity curve (`hcasim fleet FILE --curve A,B,C`, docs/hcasim.md): the scenario's
//! fleet at several loads a target, the shipped policy (the file's first), and each fault's
//! recovery against the load: how many disks a target can carry before a restart keeps
//! them out too long. The load is the disks that log in to each target; the fleet grows or
//! shrinks to it (hosts = load x targets / disks a host), every other key as the file says.

use hcabus_fleet::MAX_HOSTS;
use serde_json::{json, Value};

use super::{policy_label, FleetRun, Source};
use crate::scenario::fleet::FleetScenario;

/// The most points a curve takes.
pub const MAX_POINTS: usize = 32;

/// One point of the curve: the load a target it was asked for, and its run.
#[derive(Debug, Clone)]
pub struct CurvePoint {
    pub disks_per_target: u32,
    pub hosts: u32,
    pub run: FleetRun,
}

/// `A,B,C` of `--curve`: loads a target, ascending, each at least 1.
pub fn parse_points(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("--curve {s}: expected disks a target, ascending, e.g. 50,100,200");
    let points = s
        .split(',')
        .map(|p| p.trim().parse::<u32>().map_err(|_| bad()))
        .collect::<Result<Vec<u32>, String>>()?;
    let ascending = points.windows(2).all(|w| w[0] < w[1]);
    if points.is_empty() || points[0] == 0 || !ascending {
        return Err(bad());
    }
    if points.len() > MAX_POINTS {
        return Err(format!("--curve {s}: at most {MAX_POINTS} points"));
    }
    Ok(points)
}

/// The hosts that put `load` disks on each of the scenario's targets.
pub fn hosts_for(scenario: &FleetScenario, load: u32) -> Result<u32, String> {
    let targets = scenario.setup.targets.len() as u64;
    let disks = scenario.setup.host.disks().max(1) as u64;
    let hosts = (u64::from(load) * targets).div_ceil(disks);
    match u32::try_from(hosts) {
        Ok(h) if h <= MAX_HOSTS => Ok(h.max(1)),
        _ => Err(format!(
            "--curve: {load} disks a target takes {hosts} hosts here, past {MAX_HOSTS}"
        )),
    }
}

/// Runs the scenario's first policy at each load, one after another, each on `jobs`
/// threads (its hosts in lanes).
pub fn run(
    scenario: &FleetScenario,
    points: &[u32],
    jobs: usize,
) -> Result<Vec<CurvePoint>, String> {
    let mut out = Vec::with_capacity(points.len());
    for &load in points {
        let hosts = hosts_for(scenario, load)?;
        let mut s = scenario.clone();
        s.setup.hosts = hosts;
        s.policies.truncate(1);
        let seed = s.setup.seed;
        let run = super::run(&s, seed..seed + 1, jobs)?
            .pop()
            .ok_or("a curve point did not run")?;
        out.push(CurvePoint {
            disks_per_target: load,
            hosts,
            run,
        });
    }
    Ok(out)
}

/// Whether every point's run kept every guarantee.
pub fn held(points: &[CurvePoint]) -> bool {
    points.iter().all(|p| p.run.figures.held())
}

fn secs(us: Option<u64>) -> String {
    us.map_or("never".into(), |us| format!("{:.3} s", us as f64 / 1e6))
}

/// The curve as a table: a row a load, a column a fault (all back after, and the excess).
pub fn text(scenario: &FleetScenario, points: &[CurvePoint]) -> String {
    use comfy_table::{presets, Table};
    let Some(first) = points.first() else {
        return String::new();
    };
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    let mut header = vec!["disks a target".to_string(), "hosts".to_string()];
    header.extend(
        first
            .run
            .figures
            .faults
            .iter()
            .map(|f| format!("{} at {:.0} s", f.fault.name(), f.at.as_us() as f64 / 1e6)),
    );
    header.push("held".into());
    t.set_header(header);
    for p in points {
        let mut row = vec![p.disks_per_target.to_string(), p.hosts.to_string()];
        row.extend(p.run.figures.faults.iter().map(|f| {
            let excess = f
                .excess_us()
                .map_or(String::new(), |us| format!(" ({:+.3} s)", us as f64 / 1e6));
            format!("{}{excess}", secs(f.all_back_after.map(|d| d.as_us())))
        }));
        row.push(p.run.figures.held().to_string());
        t.add_row(row);
    }
    format!(
        "fleet {}: the capacity curve under {}: each fault's all back after (its excess \
         over the minimum), by the disks that log in to each of {} target(s)\n{t}\n",
        scenario.setup.name,
        policy_label(&first.run.figures),
        scenario.setup.targets.len()
    )
}

/// The curve as `hcasim.fleet-curve/1`.
pub fn json(source: &Source, scenario: &FleetScenario, points: &[CurvePoint]) -> String {
    let point = |p: &CurvePoint| -> Value {
        let f = &p.run.figures;
        json!({
            "disks_per_target": p.disks_per_target,
            "hosts": p.hosts,
            "held": f.held(),
            "wall_ms": p.run.wall_ms,
            "faults": f.faults.iter().map(|ff| json!({
                "kind": ff.fault.name(),
                "at_ms": ff.at.as_us() as f64 / 1e3,
                "hosts": ff.hosts,
                "back": ff.back,
                "all_back_ms": ff.all_back_after.map(|d| d.as_us() as f64 / 1e3),
                "excess_ms": ff.excess_us().map(|us| us as f64 / 1e3),
                "controlled_over_min": ff.controlled_over_min(),
            })).collect::<Vec<_>>(),
            "paging_over_pdo_remove_period": f.paging_over_pdo_remove,
            "paging_over_disk_timeout": f.paging_over_disk_timeout,
            "logins_refused": f.logins_refused(),
        })
    };
    let doc = json!({
        "schema": "hcasim.fleet-curve/1",
        "name": scenario.setup.name,
        "file": source.file,
        "scenario_sha256": source.sha256,
        "seed": scenario.setup.seed,
        "targets": scenario.setup.targets.len(),
        "policy": points.first().map(|p| policy_label(&p.run.figures)),
        "points": points.iter().map(point).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_loads_ascending_and_refused_by_what_is_wrong() {
        assert_eq!(parse_points("50, 100,200"), Ok(vec![50, 100, 200]));
        for bad in ["", "0,10", "100,50", "10,10", "a,b", "10,,20"] {
            let e = parse_points(bad).expect_err(bad);
            assert!(e.starts_with(&format!("--curve {bad}:")), "{e}");
        }
        let many = (1..=33)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert!(parse_points(&many).expect_err("33").contains("at most 32"));
    }

    #[test]
    fn a_load_is_hosts_enough_for_it_on_every_target() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/scenarios/fleet/thousand-hosts.toml"
        ))
        .expect("the scenario");
        let s = crate::scenario::fleet::parse(&text).expect("a fleet");
        // Two targets, two disks a host: a load of 500 a target is 500 hosts.
        assert_eq!(hosts_for(&s, 500), Ok(500));
        assert_eq!(hosts_for(&s, 1), Ok(1));
        assert!(hosts_for(&s, 20_000)
            .expect_err("too many")
            .contains("past 10000"));
    }
}
