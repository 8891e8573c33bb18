//! The keys of a path's behaviour: an adapter's route to the targets (`target_latency_ms`,
//! the fail-slow phases of `route`), and a multipath disk's path timeout
//! (`path_io_timeout_ms`, `path_timeout_min_ms`, `path_timeout_max_ms`).

use hcabus::{Duration, Instant};
use hcabus_lab::srp_target::{Route, RoutePhase, Slowness, SERVICE_MIN};
use ibal::disk::{PathGroups, PathTimeout};

use super::keys::{Client, Hca, RouteKeys};
use super::{err, ScenarioError};

/// The longest latency, spike or phase start a scenario may give, in ms.
const MAX_ROUTE_MS: u64 = 60_000;

/// Refuses a phase of the adapter of `keys` (named under `at`) whose `disk` is none of
/// `disks`, the file's disk clients, whether or not that disk is on this adapter.
pub(super) fn check_disks(keys: &Hca, at: &str, disks: &[&str]) -> Result<(), ScenarioError> {
    for (i, p) in keys.route.iter().enumerate() {
        if let Some(d) = p.disk.as_deref().filter(|d| !disks.contains(d)) {
            return Err(err(
                format!("{at}.route[{i}].disk"),
                format!(
                    "no disk client called {d:?}; the disks are {}",
                    disks.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The route from the targets to the adapter of `keys` as the disk client `disk` meets it
/// (its keys named under `at`): every phase but those given for another disk (`disk =`).
pub(super) fn route_for(keys: &Hca, at: &str, disk: &str) -> Result<Route, ScenarioError> {
    // Checked whole first, so that a fault is named by its place in the file.
    route(keys, at)?;
    let mine = Hca {
        route: keys
            .route
            .iter()
            .filter(|p| p.disk.as_deref().is_none_or(|d| d == disk))
            .cloned()
            .collect(),
        ..keys.clone()
    };
    route(&mine, at)
}

/// The route from the targets to the adapter of `keys`, whose keys are named under `at`.
pub(super) fn route(keys: &Hca, at: &str) -> Result<Route, ScenarioError> {
    let latency = match keys.target_latency_ms {
        Some(ms) if ms > MAX_ROUTE_MS => {
            return Err(err(format!("{at}.target_latency_ms"), "at most 60000"))
        }
        ms => Duration::from_ms(ms.unwrap_or(0)),
    };
    let mut route = Route::constant(latency);
    for (i, p) in keys.route.iter().enumerate() {
        let key = |k: &str| format!("{at}.route[{i}].{k}");
        if p.at_ms == 0 && keys.target_latency_ms.is_some() {
            return Err(err(
                key("at_ms"),
                "a phase at 0 and target_latency_ms both say the route's start: give one",
            ));
        }
        let phase = phase(p, &key)?;
        route
            .push(phase)
            .map_err(|e| err(key("at_ms"), e.to_string()))?;
    }
    Ok(route)
}

fn phase(p: &RouteKeys, key: &dyn Fn(&str) -> String) -> Result<RoutePhase, ScenarioError> {
    let ms = |name: &str, v: Option<u64>| match v {
        Some(v) if v > MAX_ROUTE_MS => Err(err(key(name), "at most 60000")),
        v => Ok(Duration::from_ms(v.unwrap_or(0))),
    };
    if p.at_ms > MAX_ROUTE_MS * 10 {
        return Err(err(key("at_ms"), "at most 600000"));
    }
    let latency = match p.latency_us {
        Some(us) if us > MAX_ROUTE_MS * 1_000 => {
            return Err(err(key("latency_us"), "at most 60000000"))
        }
        us => Duration::from_us(us.unwrap_or(0)),
    };
    let mut phase = RoutePhase::plain(Instant::from_ms(p.at_ms), latency);
    if let Some(us) = p.service_max_us {
        if !(SERVICE_MIN.as_us()..=1_000_000).contains(&us) {
            return Err(err(key("service_max_us"), "between 60 and 1000000"));
        }
        phase.service_max = Duration::from_us(us);
    }
    if let Some(us) = p.load_us {
        if us > 100_000 {
            return Err(err(key("load_us"), "at most 100000"));
        }
        phase.load = Duration::from_us(us);
    }
    match (p.spike_ms, p.spike_per_million) {
        (None, None) => {}
        (Some(_), None) => return Err(err(key("spike_ms"), "takes spike_per_million")),
        (None, Some(_)) => return Err(err(key("spike_per_million"), "takes spike_ms")),
        (Some(_), Some(n)) if !(1..=1_000_000).contains(&n) => {
            return Err(err(key("spike_per_million"), "between 1 and 1000000"))
        }
        (Some(s), Some(n)) => {
            phase.spike = ms("spike_ms", Some(s))?;
            phase.spike_per_million = n;
        }
    }
    phase.blackhole = p.blackhole.unwrap_or(false);
    phase.slow = slowness(p, key)?;
    Ok(phase)
}

/// A phase's writes-only slowness, periodic pauses and lost transmissions.
fn slowness(p: &RouteKeys, key: &dyn Fn(&str) -> String) -> Result<Slowness, ScenarioError> {
    let mut slow = Slowness::NONE;
    if let Some(us) = p.write_extra_us {
        if us > MAX_ROUTE_MS * 1_000 {
            return Err(err(key("write_extra_us"), "at most 60000000"));
        }
        slow.write_extra = Duration::from_us(us);
    }
    match (p.pause_every_ms, p.pause_ms) {
        (None, None) => {}
        (Some(_), None) => return Err(err(key("pause_every_ms"), "takes pause_ms")),
        (None, Some(_)) => return Err(err(key("pause_ms"), "takes pause_every_ms")),
        (Some(every), _) if !(1..=MAX_ROUTE_MS).contains(&every) => {
            return Err(err(key("pause_every_ms"), "between 1 and 60000"))
        }
        (Some(every), Some(pause)) if pause == 0 || pause >= every => {
            return Err(err(
                key("pause_ms"),
                "more than 0 and less than pause_every_ms",
            ))
        }
        (Some(every), Some(pause)) => {
            slow.pause_every = Duration::from_ms(every);
            slow.pause = Duration::from_ms(pause);
        }
    }
    if let Some(n) = p.loss_per_million {
        if n > 1_000_000 {
            return Err(err(key("loss_per_million"), "at most 1000000"));
        }
        slow.loss_per_million = n;
    }
    match (p.tail_us, p.tail_shape) {
        (None, None) => {}
        (Some(_), None) => return Err(err(key("tail_us"), "takes tail_shape")),
        (None, Some(_)) => return Err(err(key("tail_shape"), "takes tail_us")),
        (Some(us), _) if !(1..=1_000_000).contains(&us) => {
            return Err(err(key("tail_us"), "between 1 and 1000000"))
        }
        // A shape of 1 or less has no mean: no path's average could be learned.
        (Some(_), Some(shape)) if !(1.01..=10.0).contains(&shape) => {
            return Err(err(key("tail_shape"), "between 1.01 and 10"))
        }
        (Some(us), Some(shape)) => {
            slow.tail = Duration::from_us(us);
            slow.tail_shape_centi = (shape * 100.0).round() as u16;
        }
    }
    if let Some(mb_s) = p.bandwidth_mb_s {
        // 1x SDR carries 250 MB/s, 4x NDR 50,000.
        if !(1..=100_000).contains(&mb_s) {
            return Err(err(key("bandwidth_mb_s"), "between 1 and 100000"));
        }
        slow.bandwidth_mb_s = mb_s;
    }
    Ok(slow)
}

/// The path groups of a disk: `path_groups` (one per path, in the order of `paths`) and
/// `failback_ms`, both only on a disk with `paths`. Returns the key at fault with its
/// message.
pub(super) fn path_groups(c: &Client) -> Result<PathGroups, (&'static str, String)> {
    let Some(paths) = &c.paths else {
        let given = [
            ("path_groups", c.path_groups.is_some()),
            ("failback_ms", c.failback_ms.is_some()),
        ];
        return match given.into_iter().find(|(_, set)| *set) {
            Some((key, _)) => Err((key, "takes a disk with paths (a multipath disk)".into())),
            None => Ok(PathGroups::default()),
        };
    };
    let mut groups = PathGroups::default();
    if let Some(g) = &c.path_groups {
        if g.len() != paths.len() {
            return Err((
                "path_groups",
                format!(
                    "one group per path: {} paths, {} groups",
                    paths.len(),
                    g.len()
                ),
            ));
        }
        for (slot, &group) in groups.priority.iter_mut().zip(g) {
            *slot = group;
        }
    }
    if let Some(ms) = c.failback_ms {
        if ms > 3_600_000 {
            return Err(("failback_ms", "at most 3600000 (an hour)".into()));
        }
        groups.failback = Duration::from_ms(ms);
    }
    Ok(groups)
}

/// The path timeout of a disk: adaptive by default for a disk with `paths`, fixed by
/// `path_io_timeout_ms` (0: off); refused on a disk of one path (it has no other to move
/// to). Returns the key at fault with its message.
pub(super) fn path_timeout(c: &Client) -> Result<PathTimeout, (&'static str, &'static str)> {
    let one_path = "takes a disk with paths (a multipath disk)";
    let bounds = [
        ("path_timeout_min_ms", c.path_timeout_min_ms),
        ("path_timeout_max_ms", c.path_timeout_max_ms),
    ];
    if c.paths.is_none() {
        let given = [("path_io_timeout_ms", c.path_io_timeout_ms)]
            .into_iter()
            .chain(bounds);
        return match given.into_iter().find(|(_, v)| v.is_some()) {
            Some((key, _)) => Err((key, one_path)),
            None => Ok(PathTimeout::Off),
        };
    }
    if let Some(ms) = c.path_io_timeout_ms {
        if let Some((key, _)) = bounds.iter().find(|(_, v)| v.is_some()) {
            return Err((
                key,
                "bounds the adaptive timeout; path_io_timeout_ms fixes it: give one",
            ));
        }
        return match ms {
            0 => Ok(PathTimeout::Off),
            ms if ms > 600_000 => Err(("path_io_timeout_ms", "0 (off) or at most 600000")),
            ms => Ok(PathTimeout::Fixed(Duration::from_ms(ms))),
        };
    }
    let PathTimeout::Adaptive { min, max } = PathTimeout::DEFAULT else {
        return Ok(PathTimeout::DEFAULT);
    };
    let min = c.path_timeout_min_ms.map_or(min, Duration::from_ms);
    let max = c.path_timeout_max_ms.map_or(max, Duration::from_ms);
    if min == Duration::ZERO {
        return Err(("path_timeout_min_ms", "must be greater than zero"));
    }
    if max > Duration::from_ms(600_000) {
        return Err(("path_timeout_max_ms", "at most 600000"));
    }
    if min > max {
        let key = if c.path_timeout_max_ms.is_some() {
            "path_timeout_max_ms"
        } else {
            "path_timeout_min_ms"
        };
        return Err((
            key,
            "path_timeout_min_ms must be at most path_timeout_max_ms",
        ));
    }
    Ok(PathTimeout::Adaptive { min, max })
}
