//! Replays the committed corpus of every fuzz target, and the seeds as generated now, through
//! the functions libFuzzer drives: CI covers what fuzzing found without nightly.

use std::path::Path;

use hcabus_fuzz::TARGETS;

fn check(target: &str) {
    let (_, run) = TARGETS
        .iter()
        .find(|t| t.0 == target)
        .expect("a target of that name");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| f.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
    for f in &files {
        let bytes = match std::fs::read(f) {
            Ok(b) => b,
            // A fuzzer running in this tree replaces inputs with smaller ones as it goes.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", f.display()),
        };
        eprintln!("{target}: {}", f.display());
        run(&bytes);
    }
    let seeds = hcabus_fuzz::seeds::all().expect("the seeds");
    for (_, name, bytes) in seeds.iter().filter(|s| s.0 == target) {
        eprintln!("{target}: generated {name}");
        run(bytes);
    }
}

#[test]
fn ioctl_corpus() {
    check("ioctl");
}

#[test]
fn frame_corpus() {
    check("frame");
}

#[test]
fn scenario_corpus() {
    check("scenario");
}

#[test]
fn record_corpus() {
    check("record");
}

#[test]
fn cabi_corpus() {
    check("cabi");
}

#[test]
fn every_target_has_a_test_above() {
    let names: Vec<_> = TARGETS.iter().map(|t| t.0).collect();
    assert_eq!(names, ["ioctl", "frame", "scenario", "record", "cabi"]);
}
