//! `hcasim fleet` and `hcasim fleet-merge`: a fleet scenario's runs, a shard of a sweep,
//! and the merge of a sweep's shards.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{emit, say_error};
use hcabus_tools::fleet;
use hcabus_tools::scenario;
use hcabus_tools::scenario::fleet::FleetScenario;

/// The seeds a command line asks for: `--seeds A..B` (or the scenario's seed, or the
/// global `--seed N` alone), then its `--shard I/N` slice.
fn seeds_of(
    (seeds, global, shard): (Option<&str>, Option<u64>, Option<&str>),
    own: u64,
) -> Result<Range<u64>, String> {
    // `hcasim --seed N fleet FILE` runs seed N alone, as `run` does.
    let all = match (seeds.map(hcabus_tools::hunt::parse_seeds), global) {
        (Some(_), Some(_)) => return Err("--seed and --seeds: give one".into()),
        (None, seed) => {
            let s = seed.unwrap_or(own);
            let end = s.checked_add(1).ok_or_else(|| {
                format!(
                    "seed {s}: the largest seed a fleet runs is {}",
                    u64::MAX - 1
                )
            })?;
            s..end
        }
        (Some(r), None) => r?,
    };
    match shard.map(fleet::parse_shard) {
        None => Ok(all),
        Some(Ok((i, n))) => {
            let slice = fleet::shard(all.clone(), i, n)?;
            if slice.is_empty() {
                return Err(format!(
                    "--shard {i}/{n}: no seed of {}..{} falls to it ({} seeds for {n} shards)",
                    all.start,
                    all.end,
                    all.end.saturating_sub(all.start)
                ));
            }
            Ok(slice)
        }
        Some(Err(e)) => Err(e),
    }
}

/// A fleet file's text and scenario, or the exit status of a file that cannot be read or is
/// not one (said on stderr).
fn fleet_file(file: &Path) -> Result<(String, FleetScenario), ExitCode> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        complain!("cannot read {}: {e}", file.display());
        ExitCode::from(2)
    })?;
    let scenario = scenario::fleet::parse(&text).map_err(|e| {
        complain!("{}: {e}", file.display());
        ExitCode::from(2)
    })?;
    Ok((text, scenario))
}

/// Writes `picture` where `--svg` says, if it does.
fn draw(svg: Option<&Path>, picture: impl FnOnce() -> String) -> Result<(), ExitCode> {
    let Some(out) = svg else {
        return Ok(());
    };
    std::fs::write(out, picture()).map_err(|e| {
        complain!("cannot write {}: {e}", out.display());
        ExitCode::from(2)
    })
}

/// Prints `out`; the status says whether every judged run `held`.
fn finish(out: &str, held: bool) -> ExitCode {
    let verdict = if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    emit(out).unwrap_or(verdict)
}

/// `hcasim fleet FILE`: the table (or JSON) on stdout, the picture where `--svg` says.
pub(super) fn run(
    file: &Path,
    seeds: (Option<&str>, Option<u64>, Option<&str>),
    json: bool,
    svg: Option<&Path>,
    jobs: Option<usize>,
) -> ExitCode {
    let (text, scenario) = match fleet_file(file) {
        Ok(f) => f,
        Err(status) => return status,
    };
    let ran = seeds_of(seeds, scenario.setup.seed).and_then(|seeds| {
        let jobs = super::every_core_unless(jobs);
        fleet::run(&scenario, seeds, jobs).map_err(|e| format!("{}: {e}", file.display()))
    });
    let runs = match ran {
        Ok(r) => r,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let first = &runs[..scenario.policies.len().min(runs.len())];
    let name = &scenario.setup.name;
    if let Err(status) = draw(svg, || hcabus_tools::svg::fleet::render(name, first)) {
        return status;
    }
    let source = fleet::Source::of(&file.display().to_string(), &text);
    let out = if json {
        format!("{}\n", fleet::json(&source, &scenario, &runs))
    } else {
        fleet::text(&source, &scenario, &runs)
    };
    finish(&out, fleet::held(&runs))
}

/// `hcasim fleet FILE --curve A,B,C`: the capacity curve's table (or JSON), its picture
/// where `--svg` says.
pub(super) fn curve(
    file: &Path,
    points: &str,
    json: bool,
    svg: Option<&Path>,
    jobs: Option<usize>,
) -> ExitCode {
    use fleet::curve;
    let (text, scenario) = match fleet_file(file) {
        Ok(f) => f,
        Err(status) => return status,
    };
    let ran = curve::parse_points(points).and_then(|p| {
        let jobs = super::every_core_unless(jobs);
        curve::run(&scenario, &p, jobs)
    });
    let points = match ran {
        Ok(r) => r,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let name = &scenario.setup.name;
    if let Err(status) = draw(svg, || hcabus_tools::svg::curve::render(name, &points)) {
        return status;
    }
    let source = fleet::Source::of(&file.display().to_string(), &text);
    let out = if json {
        format!("{}\n", curve::json(&source, &scenario, &points))
    } else {
        curve::text(&scenario, &points)
    };
    finish(&out, curve::held(&points))
}

/// `hcasim fleet-merge FILE...`: the shards' documents as one, its campaign as a table.
pub(super) fn merge(files: &[PathBuf], json: bool) -> ExitCode {
    let mut shards = Vec::with_capacity(files.len());
    for f in files {
        let doc = std::fs::read(f)
            .map_err(|e| format!("cannot read {}: {e}", f.display()))
            .and_then(|b| {
                serde_json::from_slice::<serde_json::Value>(&b)
                    .map_err(|e| format!("{}: not JSON: {e}", f.display()))
            });
        match doc {
            Ok(d) => shards.push(d),
            Err(e) => {
                complain!("{e}");
                return ExitCode::from(2);
            }
        }
    }
    let merged = match fleet::merge(&shards) {
        Ok(m) => m,
        Err(e) => {
            // The error names a shard by its index: say which file that is.
            let which = match &e {
                fleet::MergeError::NotFleet(i, _)
                | fleet::MergeError::Differs(i, ..)
                | fleet::MergeError::Twice(i, ..)
                | fleet::MergeError::NoSeed(i, _) => format!(" ({})", files[*i].display()),
                fleet::MergeError::Empty => String::new(),
            };
            complain!("{e}{which}");
            return ExitCode::from(2);
        }
    };
    let runs = merged["runs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let out = if json {
        format!("{merged}\n")
    } else {
        let file = merged["file"].as_str().unwrap_or("FILE");
        let seeds: std::collections::BTreeSet<u64> =
            runs.iter().filter_map(|r| r["seed"].as_u64()).collect();
        format!(
            "fleet {}: {} hosts, {} seeds from {} shards\n{}",
            merged["name"].as_str().unwrap_or("?"),
            merged["hosts"],
            seeds.len(),
            files.len(),
            fleet::campaign::text(file, &fleet::campaign::of(runs))
        )
    };
    let verdict = if fleet::held_json(runs) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    emit(&out).unwrap_or(verdict)
}
