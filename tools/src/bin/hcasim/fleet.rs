//! `hcasim fleet` and `hcasim fleet-merge`: a fleet scenario's runs, a shard of a sweep,
//! and the merge of a sweep's shards.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{emit, say_error};
use hcabus_tools::fleet;
use hcabus_tools::scenario;

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

/// `hcasim fleet FILE`: the table (or JSON) on stdout, the picture where `--svg` says.
pub(super) fn run(
    file: &Path,
    seeds: (Option<&str>, Option<u64>, Option<&str>),
    json: bool,
    svg: Option<&Path>,
    jobs: Option<usize>,
) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            complain!("cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let scenario = match scenario::fleet::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let seeds = match seeds_of(seeds, scenario.setup.seed) {
        Ok(s) => s,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let jobs = super::every_core_unless(jobs);
    let runs = match fleet::run(&scenario, seeds, jobs) {
        Ok(r) => r,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    if let Some(out) = svg {
        let first = &runs[..scenario.policies.len().min(runs.len())];
        if let Err(e) = std::fs::write(
            out,
            hcabus_tools::svg::fleet::render(&scenario.setup.name, first),
        ) {
            complain!("cannot write {}: {e}", out.display());
            return ExitCode::from(2);
        }
    }
    let source = fleet::Source::of(&file.display().to_string(), &text);
    let out = if json {
        format!("{}\n", fleet::json(&source, &scenario, &runs))
    } else {
        fleet::text(&source, &scenario, &runs)
    };
    let verdict = if fleet::held(&runs) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    emit(&out).unwrap_or(verdict)
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
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            complain!("cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let ran = scenario::fleet::parse(&text)
        .map_err(|e| format!("{}: {e}", file.display()))
        .and_then(|s| Ok((curve::parse_points(points)?, s)))
        .and_then(|(p, s)| {
            let jobs = super::every_core_unless(jobs);
            Ok((curve::run(&s, &p, jobs)?, s))
        });
    let (points, scenario) = match ran {
        Ok(r) => r,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(out) = svg {
        let picture = hcabus_tools::svg::curve::render(&scenario.setup.name, &points);
        if let Err(e) = std::fs::write(out, picture) {
            complain!("cannot write {}: {e}", out.display());
            return ExitCode::from(2);
        }
    }
    let source = fleet::Source::of(&file.display().to_string(), &text);
    let out = if json {
        format!("{}\n", curve::json(&source, &scenario, &points))
    } else {
        curve::text(&scenario, &points)
    };
    let verdict = if curve::held(&points) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    emit(&out).unwrap_or(verdict)
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
