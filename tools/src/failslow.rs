//! The fail-slow trace set (tests/scenarios/failslow/) under each path timeout, side by side:
//! what `cargo bench -p hcabus-tools --bench failover` prints and docs/design.md §7 quotes.
//!
//! Every figure is virtual time from the simulator, so a run is the same for a seed on any
//! machine: the tests assert the goals on the same numbers the benchmark prints.

use std::fmt::Write as _;
use std::path::Path;

use hcabus::Duration;
use hcabus_lab::block::LatencyHistogram;
use hcabus_lab::stack::{self, ClientSpec, MultiSetup};
use ibal::disk::PathTimeout;
use ibal::multipath::MAX_PATHS;

use crate::scenario::{parse_any, Scenario};

pub mod campaign;
pub mod matrix;

/// The timeouts compared: the shipped adaptive one against fixed settings of its peers.
pub const MODES: [(&str, PathTimeout); 4] = [
    ("adaptive", PathTimeout::DEFAULT),
    ("fixed 100 ms", PathTimeout::Fixed(Duration::from_ms(100))),
    ("fixed 30 s", PathTimeout::Fixed(Duration::from_ms(30_000))),
    (
        "5 s polled checker",
        hcabus_lab::baselines::checker(Duration::from_ms(5_000)),
    ),
];

/// The traces, and whether giving a command up is ever warranted in each (in the others
/// every give-up is spurious: no path is worse than another).
pub const TRACES: [(&str, bool); 18] = [
    ("healthy-jitter", false),
    ("spikes", false),
    ("slow-every-path", false),
    ("slow-10x", true),
    ("slow-100x", true),
    ("slow-under-load", true),
    ("flapping", true),
    ("blackhole", true),
    ("slow-writes", true),
    ("writes-only", true),
    ("gc-pauses", true),
    ("partial-loss", true),
    ("four-paths-blackhole", true),
    ("ramp", true),
    ("heavy-tail", true),
    ("shared-slowness", false),
    ("congestion-spreading", true),
    ("reduced-width", true),
];

/// One trace under one timeout.
#[derive(Debug, Clone)]
pub struct TraceRun {
    pub trace: &'static str,
    pub mode: &'static str,
    pub degraded: bool,
    pub ios: u64,
    pub given_up: u64,
    pub abort_timeouts: u64,
    pub probes: u64,
    pub latencies: LatencyHistogram,
    /// The longest any I/O waited, one still owed at the end counted to the end.
    pub max_latency_us: u64,
    /// From the route's first blackhole to the first of its path's commands moved to the
    /// other path: given up (the timeout), or taken back as the path went down (the
    /// transport gave its sends up). `None`: no blackhole, or nothing moved after it.
    pub dead_found_us: Option<u64>,
    pub lost: u64,
    pub duplicated: u64,
    pub mismatched: u64,
    pub failed: u64,
    /// Every I/O's wait, each still owed at the end counted at its age.
    pub waited: LatencyHistogram,
    /// Commands given up, path by path.
    pub given_up_on: [u64; MAX_PATHS],
    /// Each command moved off a path (given up, or taken back as it went down): the
    /// path and when.
    pub moved_at: Vec<(usize, hcabus::Instant)>,
}

impl TraceRun {
    pub fn p99_us(&self) -> u64 {
        self.latencies.percentile(990_000)
    }
    pub fn p999_us(&self) -> u64 {
        self.latencies.percentile(999_000)
    }
}

/// Why a trace did not run.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{0}: {1}")]
    Read(String, std::io::Error),
    #[error("{0}: {1}")]
    Parse(String, crate::scenario::ScenarioError),
    #[error("{0}: not a scenario of several adapters")]
    NotMultipath(String),
    #[error("{0}: {1}")]
    Build(String, String),
}

/// Reads trace `name` from `dir`.
pub fn load(dir: &Path, name: &str) -> Result<MultiSetup, TraceError> {
    let path = dir.join(format!("{name}.toml"));
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| TraceError::Read(shown.clone(), e))?;
    match parse_any(&text).map_err(|e| TraceError::Parse(shown.clone(), e))? {
        Scenario::Many(m) => Ok(m),
        Scenario::One(_) => Err(TraceError::NotMultipath(shown)),
    }
}

/// `setup` with every multipath disk's path timeout set to `mode`.
pub fn with_timeout(mut setup: MultiSetup, mode: PathTimeout) -> MultiSetup {
    for d in &mut setup.disks {
        d.config.path_timeout = mode;
    }
    for a in &mut setup.adapters {
        for c in &mut a.stack.clients {
            if let ClientSpec::DiskPath { config, .. } = c {
                config.initiator.path_timeout = mode;
            }
        }
    }
    setup
}

/// Runs trace `trace` (whose give-ups are warranted when `degraded`) under `mode`.
pub fn run(
    setup: &MultiSetup,
    (trace, degraded): (&'static str, bool),
    (mode_name, mode): (&'static str, PathTimeout),
) -> Result<TraceRun, TraceError> {
    let setup = with_timeout(setup.clone(), mode);
    let mut world =
        stack::build_multi(&setup).map_err(|e| TraceError::Build(trace.into(), e.to_string()))?;
    let moved_at = run_collecting(&mut world);
    let mut out = TraceRun {
        trace,
        mode: mode_name,
        degraded,
        ios: 0,
        given_up: 0,
        abort_timeouts: 0,
        probes: 0,
        latencies: LatencyHistogram::default(),
        max_latency_us: 0,
        dead_found_us: None,
        lost: 0,
        duplicated: 0,
        mismatched: 0,
        failed: 0,
        waited: LatencyHistogram::default(),
        given_up_on: [0; MAX_PATHS],
        moved_at,
    };
    if let Some((path, start)) = blackhole_start(&setup) {
        out.dead_found_us = out
            .moved_at
            .iter()
            .filter(|(p, at)| *p == path && *at >= start)
            .map(|(_, at)| at.saturating_since(start).as_us())
            .min();
    }
    for (mp, paths) in stack::multipath_disks(&world) {
        let io = stack::multipath_io(&mp, &paths);
        let mp = mp.lock();
        out.ios += io.completed + io.failed;
        out.failed += io.failed;
        out.lost += io.lost;
        out.duplicated += io.duplicated;
        out.mismatched += io.read_mismatches;
        out.max_latency_us = out.max_latency_us.max(io.max_latency_us);
        if let Some(t) = hcabus_lab::stack::multipath_workload(&mp).oldest_outstanding() {
            out.max_latency_us = out
                .max_latency_us
                .max(world.end().saturating_since(t).as_us());
        }
        let workload = hcabus_lab::stack::multipath_workload(&mp);
        out.latencies.add(workload.latencies());
        out.waited.add(&workload.waited(world.end()));

        for (i, (_, c)) in paths.iter().enumerate() {
            let s = mp.path_stats(i).unwrap_or_default();
            out.given_up += s.given_up;
            if let Some(g) = out.given_up_on.get_mut(i) {
                *g += s.given_up;
            }
            out.probes += s.probes;
            out.abort_timeouts += u64::from(c.disk().stats().abort_timeouts);
        }
    }
    Ok(out)
}

/// Runs `world` to its end in slices short enough that no disk's bounded path-event log
/// turns over within one, and returns every command moved off a path: the path and when.
fn run_collecting(world: &mut stack::MultiNode) -> Vec<(usize, hcabus::Instant)> {
    use ibal::multipath::PathEventKind::{GaveUp, Moved};
    let slice = Duration::from_ms(20);
    let mut seen: Vec<u64> = Vec::new();
    let mut moved = Vec::new();
    let mut t = hcabus::Instant::ZERO;
    loop {
        t = (t + slice).min(world.end());
        world.run_until(t);
        for (k, (mp, _)) in stack::multipath_disks(world).into_iter().enumerate() {
            let mp = mp.lock();
            let (events, dropped) = mp.path_events();
            let events: Vec<_> = events.copied().collect();
            let total = dropped + events.len() as u64;
            if seen.len() <= k {
                seen.push(0);
            }
            let new = (total - seen[k]).min(events.len() as u64) as usize;
            seen[k] = total;
            moved.extend(
                events[events.len() - new..]
                    .iter()
                    .filter(|e| matches!(e.kind, GaveUp { .. } | Moved { .. }))
                    .map(|e| (e.path, e.at)),
            );
        }
        if t >= world.end() {
            return moved;
        }
    }
}

/// The first path whose route turns into a blackhole, and when.
fn blackhole_start(setup: &MultiSetup) -> Option<(usize, hcabus::Instant)> {
    setup
        .adapters
        .iter()
        .flat_map(|a| &a.stack.clients)
        .filter_map(|c| match c {
            ClientSpec::DiskPath { config, .. } => Some(config),
            _ => None,
        })
        .filter_map(|p| {
            let at = p.route.phases().iter().find(|ph| ph.blackhole)?.at;
            Some((p.path, at))
        })
        .min_by_key(|(_, at)| *at)
}

/// Every trace under every mode, trace by trace. The runs are independent simulations, each
/// deterministic for its trace's seed, so they are spread over the machine's processors and
/// come back in the same order, with the same figures, on any machine.
pub fn run_all(dir: &Path) -> Result<Vec<TraceRun>, TraceError> {
    let setups = TRACES
        .iter()
        .map(|t| load(dir, t.0))
        .collect::<Result<Vec<_>, _>>()?;
    let jobs: Vec<(usize, usize)> = (0..TRACES.len())
        .flat_map(|t| (0..MODES.len()).map(move |m| (t, m)))
        .collect();
    crate::par::map(&jobs, crate::par::processors(), |&(t, m)| {
        run(&setups[t], TRACES[t], MODES[m])
    })
    .into_iter()
    .collect()
}

/// One mode's figures over the whole set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeSummary {
    /// The healthy trace's p99, and the time until the blackholed path's commands were
    /// given up (moved to the other path), as a multiple of it.
    pub healthy_p99_us: u64,
    pub dead_path_us: u64,
    /// Give-ups where none is warranted, per million I/Os of those traces.
    pub spurious_per_million: f64,
    pub aborts: u64,
    pub worst_us: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub mismatched: u64,
}

impl ModeSummary {
    pub fn dead_path_x_p99(&self) -> f64 {
        self.dead_path_us as f64 / self.healthy_p99_us.max(1) as f64
    }
}

/// The summary of `mode` over `runs`.
pub fn summary(runs: &[TraceRun], mode: &str) -> ModeSummary {
    let of = |t: &str| runs.iter().find(|r| r.mode == mode && r.trace == t);
    let mine: Vec<&TraceRun> = runs.iter().filter(|r| r.mode == mode).collect();
    let calm: Vec<&&TraceRun> = mine.iter().filter(|r| !r.degraded).collect();
    let calm_ios: u64 = calm.iter().map(|r| r.ios).sum();
    let spurious: u64 = calm.iter().map(|r| r.given_up).sum();
    ModeSummary {
        healthy_p99_us: of("healthy-jitter").map_or(0, TraceRun::p99_us),
        dead_path_us: of("blackhole")
            .and_then(|r| r.dead_found_us)
            .unwrap_or(u64::MAX),
        spurious_per_million: spurious as f64 * 1e6 / calm_ios.max(1) as f64,
        aborts: mine.iter().map(|r| r.given_up).sum(),
        worst_us: mine.iter().map(|r| r.max_latency_us).max().unwrap_or(0),
        lost: mine.iter().map(|r| r.lost).sum(),
        duplicated: mine.iter().map(|r| r.duplicated).sum(),
        mismatched: mine.iter().map(|r| r.mismatched).sum(),
    }
}

fn ms(us: u64) -> String {
    if us == u64::MAX {
        return "never".into();
    }
    format!("{:.1}", us as f64 / 1000.0)
}

/// The tables: the summary per mode, then each trace's figures per mode.
pub fn render(runs: &[TraceRun]) -> String {
    format!("{}\n{}", render_summary(runs), render_traces(runs))
}

/// The summary per mode (the table README.md and docs/design.md quote).
pub fn render_summary(runs: &[TraceRun]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| timeout | dead path found (ms) | as x healthy p99 | spurious give-ups / 10^6 I/Os \
         | aborts sent | worst I/O (ms) | lost / dup / mismatched |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|");
    for (name, _) in MODES {
        let s = summary(runs, name);
        let _ = writeln!(
            out,
            "| {name} | {} | {:.1}x (p99 {} ms) | {:.1} | {} | {} | {} / {} / {} |",
            ms(s.dead_path_us),
            s.dead_path_x_p99(),
            ms(s.healthy_p99_us),
            s.spurious_per_million,
            s.aborts,
            ms(s.worst_us),
            s.lost,
            s.duplicated,
            s.mismatched
        );
    }
    out
}

/// Each trace's figures per mode (docs/failslow.md).
pub fn render_traces(runs: &[TraceRun]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| trace | timeout | I/Os | given up | probes | abort timeouts | p99 (ms) | p99.9 (ms) | worst (ms) |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.trace,
            r.mode,
            r.ios,
            r.given_up,
            r.probes,
            r.abort_timeouts,
            ms(r.p99_us()),
            ms(r.p999_us()),
            ms(r.max_latency_us)
        );
    }
    out
}
