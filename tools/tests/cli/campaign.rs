//! `hcasim fleet --seeds --shard` and `hcasim fleet-merge`: a sweep run as shards, each a
//! process as a batch engine's array runs them, merged into what one process gives.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn small() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios/fleet/small.toml")
        .to_str()
        .expect("utf-8")
        .to_string()
}

fn hcasim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(args)
        .output()
        .expect("hcasim runs")
}

fn ok(o: &Output) -> &[u8] {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    &o.stdout
}

fn refused(o: &Output, words: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(words), "{err}");
}

/// The document with what differs from one machine or process to another (wall time) out.
fn stripped(mut doc: Value) -> Value {
    for r in doc["runs"].as_array_mut().into_iter().flatten() {
        r["wall_ms"] = Value::Null;
    }
    doc
}

/// A temporary directory of this test's own, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("hcasim-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Three shards of seeds 1 to 6, each its own process writing its own JSON, merged: the
/// same document as one process running the six (but each run's wall time), with the same
/// campaign; the merge takes the shards in any order.
#[test]
fn shards_run_as_processes_merge_into_what_one_process_gives() {
    let file = small();
    let scratch = Scratch::new("shards");
    let shards: Vec<PathBuf> = (0..3)
        .map(|i| {
            let shard = format!("{i}/3");
            let o = hcasim(&[
                "fleet", &file, "--json", "--seeds", "1..7", "--shard", &shard,
            ]);
            let path = scratch.0.join(format!("shard-{i}.json"));
            std::fs::write(&path, ok(&o)).expect("write the shard");
            path
        })
        .collect();
    let one: Value =
        serde_json::from_slice(ok(&hcasim(&["fleet", &file, "--json", "--seeds", "1..7"])))
            .expect("JSON");
    let paths: Vec<&str> = shards.iter().rev().filter_map(|p| p.to_str()).collect();
    let mut args = vec!["fleet-merge", "--json"];
    args.extend(&paths);
    let merged: Value = serde_json::from_slice(ok(&hcasim(&args))).expect("JSON");
    // Each shard has two seeds' runs.
    let first: Value =
        serde_json::from_slice(&std::fs::read(&shards[0]).expect("shard")).expect("JSON");
    let seeds: Vec<u64> = first["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["seed"].as_u64())
        .collect();
    assert_eq!(seeds, [1, 1, 1, 2, 2, 2]);
    assert_eq!(stripped(merged.clone()), stripped(one.clone()));
    let campaign = &merged["campaign"]["policies"][0];
    assert_eq!(campaign["policy"], "backoff");
    assert_eq!(campaign["runs"], 6);
    let replay = campaign["replay"].as_str().expect("replay");
    assert!(
        replay.starts_with("hcasim --seed ") && replay.ends_with(&file),
        "{replay}"
    );
    // The table says the same campaign.
    let mut args = vec!["fleet-merge"];
    args.extend(&paths);
    let text = String::from_utf8_lossy(ok(&hcasim(&args))).to_string();
    assert!(text.contains("6 seeds from 3 shards"), "{text}");
    assert!(text.contains("power_on.all_back_ms"), "{text}");
}

/// The worst seed's replay command runs that seed alone and gives its figures again.
#[test]
fn the_worst_seed_replays_to_its_figures() {
    let file = small();
    let doc: Value =
        serde_json::from_slice(ok(&hcasim(&["fleet", &file, "--json", "--seeds", "1..5"])))
            .expect("JSON");
    let backoff = &doc["campaign"]["policies"][0];
    let worst = backoff["worst_seed"].as_u64().expect("worst seed");
    let replay = backoff["replay"].as_str().expect("replay");
    let args: Vec<&str> = replay.split(' ').skip(1).chain(["--json"]).collect();
    let again: Value = serde_json::from_slice(ok(&hcasim(&args))).expect("JSON");
    let run = |d: &Value| {
        d["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .find(|r| r["seed"] == worst && r["retry"] == "backoff")
            .cloned()
            .map(|mut r| {
                r["wall_ms"] = Value::Null;
                r
            })
    };
    assert!(run(&doc).is_some());
    assert_eq!(run(&doc), run(&again));
    // One seed: no campaign to make.
    assert!(again.get("campaign").is_none());
    // Its power-on was the slowest of the four seeds, or tied with it.
    let back = |r: &Value| r["faults"][0]["all_back_ms"].as_f64().unwrap_or(f64::MAX);
    let worst_back = back(&run(&doc).expect("run"));
    let p = &backoff["figures"][0];
    assert_eq!(p["figure"], "power_on.all_back_ms");
    assert!(p["max"].as_f64() >= Some(worst_back) || p["worst_seed"] != worst);
}

/// Shards that do not belong together are refused, by the shard: another scenario, a
/// seed twice, a document of another kind, nothing to merge; and a shard that is not I/N.
#[test]
fn shards_that_do_not_fit_are_refused_by_name() {
    let file = small();
    let scratch = Scratch::new("misfit");
    let write = |name: &str, bytes: &[u8]| {
        let p = scratch.0.join(name);
        std::fs::write(&p, bytes).expect("write");
        p.to_str().expect("utf-8").to_string()
    };
    let a = write(
        "a.json",
        ok(&hcasim(&["fleet", &file, "--json", "--seeds", "1..2"])),
    );
    let b = write(
        "b.json",
        ok(&hcasim(&["fleet", &file, "--json", "--seeds", "2..3"])),
    );
    // The same scenario with a longer run is another scenario.
    let text = std::fs::read_to_string(&file).expect("scenario");
    let longer = write(
        "longer.toml",
        text.replace("duration_ms = 60000", "duration_ms = 61000")
            .as_bytes(),
    );
    assert_ne!(std::fs::read_to_string(&longer).ok(), Some(text));
    let c = write(
        "c.json",
        ok(&hcasim(&["fleet", &longer, "--json", "--seeds", "3..4"])),
    );
    refused(&hcasim(&["fleet-merge", &a, &c]), "c.json");
    refused(&hcasim(&["fleet-merge", &a, &b, &a]), "seed 1");
    let report = write("report.json", br#"{"schema": "hcasim.report/1"}"#);
    refused(
        &hcasim(&["fleet-merge", &a, &report]),
        "not an hcasim.fleet/1",
    );
    let junk = write("junk.json", b"{not json");
    refused(&hcasim(&["fleet-merge", &junk]), "not JSON");
    refused(
        &hcasim(&["fleet-merge", "/nonexistent.json"]),
        "cannot read",
    );
    assert_eq!(hcasim(&["fleet-merge"]).status.code(), Some(2));
    for shard in ["3/3", "1/0", "x/2", "1"] {
        let o = hcasim(&["fleet", &file, "--seeds", "1..3", "--shard", shard]);
        refused(&o, "--shard");
    }
    // More shards than seeds: the empty one says so rather than print nothing.
    let o = hcasim(&["fleet", &file, "--seeds", "1..3", "--shard", "0/3"]);
    refused(&o, "no seed");
    // The files given were not touched.
    assert!(std::fs::read(&a).is_ok_and(|t| !t.is_empty()));
}
