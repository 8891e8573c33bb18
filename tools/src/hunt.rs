//! `hcasim hunt`: random scenarios run in-process on every core, hunting for a broken
//! guarantee or a lost, duplicated or corrupted I/O. Each failure comes with the one command
//! that replays it.
//!
//! A seed runs the scripted-client scenario of `random_setup(seed)` (cheap: thousands a
//! second); every `stack_every`th seed also runs the whole stack of `random_stack(seed)`
//! (IBAL, IPoIB, the disks under load) and the two-adapter host of `random_multipath(seed)` (a multipath boot disk, a random path timeout, routes slow,
//! flapping or blackholed: the fail-slow keys). The generators draw shaped fault pairs aimed
//! at the phases of one reset (`shaped_faults`) as well as uniform ones.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hcabus_lab::stack;
use hcabus_lab::stack::Node;
use hcabus_sim::random_setup;

/// What to hunt.
#[derive(Debug, Clone)]
pub struct HuntConfig {
    pub seeds: Range<u64>,
    pub jobs: usize,
    /// Every this many seeds also runs the full stack (0: never).
    pub stack_every: u64,
}

/// One broken run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HuntFailure {
    pub seed: u64,
    pub stack: bool,
    pub what: String,
}

impl HuntFailure {
    /// The command that replays exactly this run.
    pub fn replay(&self) -> String {
        if self.stack {
            let (a, b) = (self.seed, self.seed + 1);
            format!("cargo run --release --bin hcasim -- hunt --seeds {a}..{b} --stack-every 1")
        } else {
            format!("cargo run --release --bin hcasim -- --random {}", self.seed)
        }
    }
}

/// What a hunt found.
#[derive(Debug, Default)]
pub struct HuntReport {
    pub runs: u64,
    pub stack_runs: u64,
    pub failures: Vec<HuntFailure>,
    /// How resets ended, over every run.
    pub outcomes: BTreeMap<String, u64>,
}

/// Runs one seed; its failures and the outcomes of its resets.
fn run_seed(seed: u64, stack_run: bool) -> (Vec<HuntFailure>, Vec<String>) {
    let mut failures = Vec::new();
    let mut outcomes = Vec::new();
    let fail = |what: String| HuntFailure {
        seed,
        stack: stack_run,
        what,
    };
    let host: Option<Node> = if stack_run {
        match stack::build(&stack::random_stack(seed)) {
            Ok(mut h) => {
                h.run();
                Some(h)
            }
            Err(e) => {
                failures.push(fail(format!("the random stack does not build: {e}")));
                None
            }
        }
    } else {
        match stack::scripted(&random_setup(seed)) {
            Ok(mut h) => {
                h.run();
                Some(h)
            }
            Err(e) => {
                failures.push(fail(format!("the random setup is refused: {e}")));
                None
            }
        }
    };
    if stack_run {
        multipath_seed(seed, &mut failures, &mut outcomes);
    }
    let Some(host) = host else {
        return (failures, outcomes);
    };
    for v in &host.checker().violations {
        failures.push(fail(format!("guarantee broken: {v}")));
    }
    outcomes.extend(host.resets().into_iter().map(|r| r.outcome().to_string()));
    if stack_run {
        let io = stack::io_stats(&host);
        let open = !io.closes();
        if open || !crate::report::clean(&io, false) {
            failures.push(fail(format!("I/O: {io:?}")));
        }
    }
    (failures, outcomes)
}

/// The two-adapter host of `random_multipath(seed)`: its guarantees and the disk's I/O.
fn multipath_seed(seed: u64, failures: &mut Vec<HuntFailure>, outcomes: &mut Vec<String>) {
    let fail = |what: String| HuntFailure {
        seed,
        stack: true,
        what,
    };
    let mut world = match stack::build_multi(&stack::random_multipath(seed)) {
        Ok(w) => w,
        Err(e) => {
            failures.push(fail(format!(
                "the random multipath host does not build: {e}"
            )));
            return;
        }
    };
    world.run();
    let (_, violated) = world.invariants();
    for v in violated {
        failures.push(fail(format!("multipath: guarantee broken: {v}")));
    }
    outcomes.extend(world.resets().into_iter().map(|r| r.outcome().to_string()));
    let io = stack::io_stats_all(&world);
    let open = !io.closes();
    if open || !crate::report::clean(&io, false) {
        failures.push(fail(format!("multipath I/O: {io:?}")));
    }
}

/// Hunts over `config.seeds` on `config.jobs` threads; `progress` is told of every finished
/// seed (from any thread).
pub fn hunt(config: &HuntConfig, progress: &(dyn Fn(u64) + Sync)) -> HuntReport {
    let next = AtomicU64::new(config.seeds.start);
    let report = Mutex::new(HuntReport::default());
    let jobs = config.jobs.max(1);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= config.seeds.end {
                    return;
                }
                let runs_stack = config.stack_every > 0 && seed.is_multiple_of(config.stack_every);
                let mut found = run_seed(seed, false);
                if runs_stack {
                    let (f, o) = run_seed(seed, true);
                    found.0.extend(f);
                    found.1.extend(o);
                }
                {
                    let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
                    r.runs += 1;
                    r.stack_runs += u64::from(runs_stack);
                    r.failures.extend(found.0);
                    for o in found.1 {
                        *r.outcomes.entry(o).or_default() += 1;
                    }
                }
                progress(seed);
            });
        }
    });
    let mut report = report.into_inner().unwrap_or_else(|e| e.into_inner());
    report.failures.sort_by_key(|f| (f.seed, f.stack));
    report
}

/// Parses `A..B` (B excluded).
pub fn parse_seeds(text: &str) -> Result<Range<u64>, String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("--seeds {text:?}: expected A..B"))?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|_| format!("--seeds: {a:?} is not a number"))?;
    let b: u64 = b
        .trim()
        .parse()
        .map_err(|_| format!("--seeds: {b:?} is not a number"))?;
    if a >= b {
        return Err(format!("--seeds {text}: empty range"));
    }
    Ok(a..b)
}

/// The `hcasim.hunt/1` document of a hunt: what ran, how resets ended, and each failure
/// with the command that replays it.
pub fn json(config: &HuntConfig, report: &HuntReport, wall_ms: u64) -> serde_json::Value {
    serde_json::json!({
        "schema": hcactl::contract::schema("hcasim", "hunt"),
        "seeds": { "start": config.seeds.start, "end": config.seeds.end },
        "jobs": config.jobs,
        "stack_every": config.stack_every,
        "wall_ms": wall_ms,
        "runs": report.runs,
        "stack_runs": report.stack_runs,
        "failed": report.failures.len(),
        "failures": report.failures.iter().map(|f| serde_json::json!({
            "seed": f.seed,
            "stack": f.stack,
            "what": f.what,
            "replay": f.replay(),
        })).collect::<Vec<_>>(),
        "outcomes": report.outcomes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_as_a_half_open_range_and_bad_ones_are_refused_by_name() {
        assert_eq!(parse_seeds("0..100"), Ok(0..100));
        assert!(parse_seeds("5..5").is_err());
        assert!(parse_seeds("7").is_err());
        assert!(parse_seeds("a..3").expect_err("refused").contains("\"a\""));
    }

    #[test]
    fn the_json_report_carries_each_failure_and_its_replay() {
        let config = HuntConfig {
            seeds: 10..20,
            jobs: 2,
            stack_every: 5,
        };
        let mut report = HuntReport {
            runs: 12,
            stack_runs: 2,
            ..HuntReport::default()
        };
        report.failures.push(HuntFailure {
            seed: 15,
            stack: true,
            what: "lost an I/O".into(),
        });
        report.outcomes.insert("Restored".into(), 7);
        let doc = json(&config, &report, 3);
        assert_eq!(doc["schema"], "hcasim.hunt/1");
        assert_eq!(
            (doc["failed"].as_u64(), doc["runs"].as_u64()),
            (Some(1), Some(12))
        );
        let f = &doc["failures"][0];
        assert_eq!(
            (f["seed"].as_u64(), f["stack"].as_bool()),
            (Some(15), Some(true))
        );
        assert_eq!(f["replay"], report.failures[0].replay());
        assert_eq!(doc["outcomes"]["Restored"], 7);
        assert_eq!(doc["seeds"]["end"], 20);
    }

    #[test]
    fn a_failure_names_the_command_that_replays_it() {
        let scripted = HuntFailure {
            seed: 42,
            stack: false,
            what: String::new(),
        };
        assert!(scripted.replay().ends_with("hcasim -- --random 42"));
        let stack = HuntFailure {
            stack: true,
            ..scripted
        };
        assert!(stack
            .replay()
            .ends_with("hunt --seeds 42..43 --stack-every 1"));
    }
}
