//! Every command ends and no healthy path is shut out (docs/design.md §7 "Every command
//! ends", "Adaptive path timeout"): the scenarios of tests/scenarios/bounds run through
//! `hcasim run FILE --json`. A route that swallows what is sent, for less or more than the
//! transport's retry budget, on one path or on every path, with or without a transport
//! timer: every command ends, nothing fails or is lost, no command is left out past its
//! bound, and the run is clean (exit 0). A steady 8, 50 or 500 ms path beside a fast one
//! learns its latency and carries I/O; none is given up.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/bounds")
}

fn report(file: &str) -> Value {
    let path = dir().join(file);
    let out = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(["run", path.to_str().expect("utf-8"), "--json"])
        .output()
        .expect("hcasim runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{file}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{file}: not JSON ({e})"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// What every file of the set must show: nothing failed, lost, duplicated or overdue, the
/// accounting closed, and what is owed at the end is what the last instant issued.
fn every_command_ended(file: &str, r: &Value) -> Value {
    let io = r["io"].clone();
    assert_eq!(
        r["invariants"]["violated"],
        Value::Array(Vec::new()),
        "{file}"
    );
    for key in ["failed", "lost", "duplicated", "paging_failed", "overdue"] {
        assert_eq!(n(&io[key]), 0, "{file}: {key} in {io}");
    }
    assert_eq!(
        n(&io["submitted"]),
        n(&io["completed"]) + n(&io["in_flight"]),
        "{file}: {io}"
    );
    io
}

#[test]
fn the_set_is_the_files_in_the_directory() {
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("tests/scenarios/bounds")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "both-paths-blackholed-200ms.toml",
            "both-paths-blackholed-3s.toml",
            "healthy-path-500ms.toml",
            "healthy-path-50ms.toml",
            "healthy-path-8ms.toml",
            "no-transport-timer.toml",
            "one-path-blackholed-200ms.toml",
            "one-path-blackholed-3s.toml",
        ]
    );
}

/// 200 ms of blackhole on every path, or on the only one: the transport's retransmissions
/// carry everything through once the route heals. The worst I/O waited the blackhole and a
/// retransmission; nothing is left owed but what the last instant issued.
#[test]
fn a_blackhole_within_the_retry_budget_is_ridden_through_on_any_number_of_paths() {
    for file in [
        "both-paths-blackholed-200ms.toml",
        "one-path-blackholed-200ms.toml",
    ] {
        let r = report(file);
        let io = every_command_ended(file, &r);
        assert!(n(&io["in_flight"]) <= 2, "{file}: {io}");
        let worst = n(&io["max_latency_us"]);
        assert!((200_000..270_000).contains(&worst), "{file}: {worst}");
        assert_eq!(
            n(&io["logins"]),
            1 + u64::from(file.starts_with("both")),
            "{file}: no login lost"
        );
        assert_eq!(
            r["resets"],
            Value::Array(Vec::new()),
            "{file}: no adapter reset"
        );
    }
}

/// 3 s of blackhole, past the retry budget: each path's transport gives up, the disk's login
/// REQs go unanswered and its CM sends each again at its timeout (2.3 s), the first after
/// the route heals gets through, and every command ends; with no transport timer at all,
/// the command bound (1 s) and the unanswered abort after it do the same. No I/O waits past
/// the blackhole by more than a REQ's timeout and a second and a half.
#[test]
fn a_blackhole_past_the_retry_budget_ends_in_a_new_login_and_every_command_ends() {
    for (file, blackhole_ms) in [
        ("both-paths-blackholed-3s.toml", 3_000),
        ("one-path-blackholed-3s.toml", 3_000),
        ("no-transport-timer.toml", 5_000),
    ] {
        let r = report(file);
        let io = every_command_ended(file, &r);
        assert!(n(&io["in_flight"]) <= 2, "{file}: {io}");
        let worst = n(&io["max_latency_us"]);
        let end = blackhole_ms * 1_000;
        let grid = ibal::disk::REQ_TIMEOUT.as_us();
        assert!(
            (end..end + grid + 1_500_000).contains(&worst),
            "{file}: {worst} against a {blackhole_ms} ms blackhole"
        );
        let paths = if file.starts_with("both") { 2 } else { 1 };
        assert!(
            n(&io["logins"]) >= 2 * paths,
            "{file}: a new login each: {io}"
        );
        assert!(
            n(&io["req_retries"]) >= 1,
            "{file}: unanswered while dark: {io}"
        );
    }
}

/// A healthy path of 8, 50 or 500 ms beside a fast one is not shut out: nothing given up,
/// its learned round trip its route's, the worst I/O its latency. The selector prices it at
/// that latency, so it carries what a path idle for a second gets (one I/O a second over
/// the 30 s runs) and the disk's p99 stays the fast path's.
#[test]
fn a_healthy_path_of_any_latency_carries_io_beside_a_fast_one() {
    for ms in [8u64, 50, 500] {
        let file = format!("healthy-path-{ms}ms.toml");
        let r = report(&file);
        let io = every_command_ended(&file, &r);
        let m = &r["multipath"][0];
        let (fast, slow) = (&m["paths"][0], &m["paths"][1]);
        for p in [fast, slow] {
            assert_eq!((n(&p["given_up"]), n(&p["moved"])), (0, 0), "{file}: {m}");
        }
        assert!(
            (29..=31).contains(&n(&slow["ios"])),
            "{file}: the slow path carries one I/O a second: {m}"
        );
        assert!(n(&m["p99_latency_us"]) < 1_000, "{file}: {m}");
        let srtt = n(&slow["srtt_us"]);
        assert!(
            (ms * 1_000..ms * 1_000 + 500).contains(&srtt),
            "{file}: {srtt}"
        );
        let worst = n(&io["max_latency_us"]);
        assert!(
            (ms * 1_000..ms * 1_000 + 1_000).contains(&worst),
            "{file}: {worst}"
        );
    }
}

/// A run that ends while every route is dark: the I/O the disk still owes is in its latency
/// figures at its age. Its completed I/O alone never waited a millisecond, so a report of
/// completions only would call this disk fast.
#[test]
fn a_command_still_owed_at_the_end_is_in_the_disks_latency_figures() {
    let text = std::fs::read_to_string(dir().join("both-paths-blackholed-3s.toml"))
        .expect("the scenario")
        .replace("duration_ms = 15000", "duration_ms = 6500");
    assert!(
        text.contains("duration_ms = 6500"),
        "the run ends in the dark"
    );
    let file = std::env::temp_dir().join(format!("hcabus-owed-{}.toml", std::process::id()));
    std::fs::write(&file, text).expect("a temporary file");
    let out = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(["run", file.to_str().expect("utf-8"), "--json"])
        .output()
        .expect("hcasim runs");
    let _ = std::fs::remove_file(&file);
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let io = &r["io"];
    assert!(n(&io["in_flight"]) > 100, "owed at the end: {io}");
    assert!(
        n(&io["max_latency_us"]) < 1_000_000,
        "completions only: {io}"
    );
    let m = &r["multipath"][0];
    let (p50, p99, max) = (
        n(&m["p50_latency_us"]),
        n(&m["p99_latency_us"]),
        n(&m["max_latency_us"]),
    );
    assert!(p50 <= p99 && p99 <= max, "{m}");
    // Owed since the routes went dark at 5 s, at the end 1.5 s later.
    assert!((1_490_000..=1_500_000).contains(&max), "{m}");
    assert!(
        p99 >= 1_000_000,
        "more than 1% of its I/O is still owed: {m}"
    );
    assert!(p50 < 1_000, "most of it was answered at once: {m}");
}
