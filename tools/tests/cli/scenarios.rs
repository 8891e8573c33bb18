//! Every scenario in tests/scenarios runs through `hcasim run FILE --json`, and its expected
//! outcome is asserted from the JSON report. Bad scenario files are refused by key.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios")
}

fn hcasim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(args)
        .output()
        .expect("hcasim runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn report(file: &str) -> Value {
    let path = scenarios_dir().join(file);
    let (code, stdout, stderr) = hcasim(&["run", path.to_str().expect("utf-8 path"), "--json"]);
    assert_eq!(code, 0, "{file}: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{file}: not JSON ({e}): {stdout}"))
}

/// The events one client heard, by name.
fn events<'a>(r: &'a Value, client: &str) -> Vec<&'a str> {
    r["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .find(|c| c["name"] == client)
        .unwrap_or_else(|| panic!("no client {client}"))["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e.as_str().expect("event"))
        .collect()
}

fn outcomes(r: &Value) -> Vec<&str> {
    r["resets"]
        .as_array()
        .expect("resets")
        .iter()
        .map(|x| x["outcome"].as_str().expect("outcome"))
        .collect()
}

/// What every run must show: no event order violated, no I/O lost or duplicated, and
/// every soft reset without allocation or PnP.
fn common(file: &str, r: &Value) {
    assert_eq!(r["invariants"]["violated"], Value::Array(vec![]), "{file}");
    // The checks are made at deliveries and reset conclusions: a run without a reset (a
    // slow path) has none to make.
    let resets = r["resets"].as_array().expect("resets").len();
    assert!(
        r["invariants"]["checked"].as_u64().expect("checked") > 0 || resets == 0,
        "{file}"
    );
    assert_eq!(r["io"]["lost"], 0, "{file}");
    assert_eq!(r["io"]["duplicated"], 0, "{file}");
    for reset in r["resets"].as_array().expect("resets") {
        assert_eq!(reset["allocations"], 0, "{file}: {reset}");
        let soft = matches!(
            reset["outcome"].as_str(),
            Some("Restored" | "FirmwareChanged" | "Aborted" | "AbortedUnresponsive")
        );
        if soft {
            assert_eq!(reset["pnp_operations"], 0, "{file}: {reset}");
        }
    }
    // Every field of docs/design.md §9 is there, with its type.
    for key in [
        "scenario",
        "seed",
        "final_state",
        "epoch",
        "resets",
        "clients",
        "io",
        "net",
    ] {
        assert!(r.get(key).is_some(), "{file}: no {key}");
    }
    for key in [
        "submitted",
        "completed",
        "failed",
        "lost",
        "duplicated",
        "max_latency_us",
        "max_failed_latency_us",
        "in_flight",
        "paging_failed",
        "logins",
        "logins_refused",
    ] {
        assert!(r["io"][key].is_u64(), "{file}: io.{key}");
    }
    assert_accounting_closes(file, r);
    for key in ["sent", "completed_back", "dropped"] {
        assert!(r["net"][key].is_u64(), "{file}: net.{key}");
    }
    for c in r["clients"].as_array().expect("clients") {
        for key in ["name", "kind", "state"] {
            assert!(c[key].is_string(), "{file}: clients[].{key}");
        }
        assert!(c["events"].is_array());
        assert!(
            c["error"].is_null() || c["error"].is_string(),
            "{file}: clients[].error"
        );
    }
}

/// docs/design.md §9: every I/O submitted is completed, failed, in flight on a live path, or lost.
fn assert_accounting_closes(file: &str, r: &Value) {
    let n = |k: &str| {
        r["io"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{file}: io.{k}"))
    };
    assert_eq!(
        n("submitted"),
        n("completed") + n("failed") + n("in_flight") + n("lost"),
        "{file}: {}",
        r["io"]
    );
}

#[test]
fn every_scenario_file_has_its_expected_outcome() {
    let mut files: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("tests/scenarios")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    files.sort();
    let expected = [
        "auto-recover-off.toml",
        "cable-out-through-reset.toml",
        "catastrophic-while-quiescing.toml",
        "default-boot-from-san.toml",
        "device-never-returns.toml",
        "device-replaced.toml",
        "fatal-while-preparing.toml",
        "firmware-activation.toml",
        "fw-activate-after-assert.toml",
        "fw-activate-on-failed.toml",
        "hang-mid-reset.toml",
        "io-hold-timeout.toml",
        "last-path-cable-out.toml",
        "last-path-consents.toml",
        "last-path-overlap.toml",
        "last-path-single.toml",
        "last-path-withdrawn.toml",
        "multipath-adapter-replaced.toml",
        "multipath-both-reset.toml",
        "multipath-cable-out.toml",
        "multipath-failover.toml",
        "multipath-idle-check.toml",
        "multipath-one-slow-lun.toml",
        "multipath-path-groups.toml",
        "multipath-slow-path.toml",
        "multipath-slow-target.toml",
        "paging-long-outage.toml",
        "planned-aborted-unresponsive.toml",
        "planned-consented.toml",
        "planned-vetoed.toml",
        "port-flap.toml",
        "request-during-restore.toml",
        "sm-slow.toml",
        "storm-limit.toml",
        "storm.toml",
        "stuck-client.toml",
        "surprise-removal-mid-reset.toml",
        "target-busy.toml",
        "two-causes-one-instant.toml",
    ];
    assert_eq!(
        files, expected,
        "every scenario file has an expectation below"
    );
    for file in expected {
        let r = report(file);
        common(file, &r);
        let (state, epoch) = (r["final_state"].as_str().expect("state"), &r["epoch"]);
        match file {
            "multipath-failover.toml"
            | "multipath-both-reset.toml"
            | "multipath-adapter-replaced.toml"
            | "multipath-cable-out.toml"
            | "multipath-idle-check.toml"
            | "multipath-one-slow-lun.toml"
            | "multipath-path-groups.toml"
            | "multipath-slow-path.toml"
            | "multipath-slow-target.toml" => expect_multipath(file, &r),
            "last-path-cable-out.toml"
            | "last-path-consents.toml"
            | "last-path-single.toml"
            | "last-path-withdrawn.toml"
            | "last-path-overlap.toml" => expect_last_path(file, &r),
            "stuck-client.toml"
            | "planned-vetoed.toml"
            | "planned-consented.toml"
            | "fatal-while-preparing.toml"
            | "planned-aborted-unresponsive.toml" => expect_planned(file, &r, state, epoch),
            "default-boot-from-san.toml"
            | "cable-out-through-reset.toml"
            | "port-flap.toml"
            | "target-busy.toml"
            | "sm-slow.toml" => expect_ports(file, &r, state, epoch),
            "storm.toml"
            | "storm-limit.toml"
            | "auto-recover-off.toml"
            | "paging-long-outage.toml"
            | "device-replaced.toml"
            | "device-never-returns.toml"
            | "surprise-removal-mid-reset.toml"
            | "io-hold-timeout.toml" => expect_failures(file, &r, state, epoch),
            "firmware-activation.toml"
            | "request-during-restore.toml"
            | "two-causes-one-instant.toml"
            | "catastrophic-while-quiescing.toml"
            | "fw-activate-after-assert.toml"
            | "fw-activate-on-failed.toml"
            | "hang-mid-reset.toml" => expect_causes(file, &r, state, epoch),
            other => unreachable!("{other}"),
        }
    }
}

/// Several adapters and a disk with a path through each.
fn expect_multipath(file: &str, r: &Value) {
    match file {
        "multipath-failover.toml" | "multipath-both-reset.toml" => {
            let both = file == "multipath-both-reset.toml";
            assert_eq!(
                r["resets"].as_array().map(Vec::len),
                Some(1 + usize::from(both))
            );
            assert_eq!(r["resets"][0]["hca"], "hca0");
            assert_eq!(r["hcas"][0]["epoch"], 2);
            assert_eq!(r["hcas"][1]["epoch"], if both { 2 } else { 1 });
            assert_eq!(r["io"]["failed"], 0);
            let m = &r["multipath"][0];
            assert_eq!(m["name"], "bootdisk");
            let p0 = &m["paths"][0];
            let latency = m["max_latency_us"].as_u64().expect("latency");
            if both {
                // Both reset at once: nothing to overtake, so nothing given up; each RESET
                // takes a full queue depth back.
                assert_eq!(
                    (p0["failovers"].as_u64(), p0["moved"].as_u64()),
                    (Some(1), Some(32))
                );
                assert_eq!(p0["given_up"], 0, "{m}");
                // No path for the device's second and the fabric's 3.5: the queue holds.
                assert!(m["no_path_us"].as_u64() > Some(4_000_000), "{m}");
                assert!(m["max_held"].as_u64() > Some(0), "{m}");
                assert!(latency > 4_500_000, "{m}");
            } else {
                assert_eq!(m["no_path_us"], 0, "{m}");
                assert_eq!(m["max_held"], 0, "the hold queue is never used: {m}");
                // The dead adapter's commands are given up once past hca0's learned
                // timeout (SRTT + 5 ms) and re-issued on hca1; the path then takes only
                // probes, so its RESET moves at most those.
                let given_up = p0["given_up"].as_u64().expect("given_up");
                let probes = p0["probes"].as_u64().expect("probes");
                let moved = p0["moved"].as_u64().expect("moved");
                assert!(
                    given_up >= 1 && (given_up..=given_up + probes).contains(&moved),
                    "{m}"
                );
                // The longest wait is a give-up's, or a newer write's to a block whose
                // given-up write may still run (the write fence): that drops hca0's
                // connection at two of its timeouts, not the abort's half second, nor the
                // health poll's 600 ms.
                assert!(latency < 20_000, "a give-up's, not a poll's: {m}");
                assert!(m["p99_latency_us"].as_u64() < Some(1_000), "{m}");
                assert!(m["paths"][0]["ios"].as_u64() > Some(1_000), "{m}");
                assert!(m["paths"][0]["down_us"].as_u64() > Some(4_000_000), "{m}");
            }
            for c in r["clients"].as_array().expect("clients") {
                assert!(c["hca"].is_string(), "{file}: {c}");
            }
        }
        "multipath-adapter-replaced.toml" => {
            assert_eq!(outcomes(r), ["DeviceReplaced"]);
            assert_eq!(r["hcas"][0]["final_state"], "Failed");
            assert_eq!(r["hcas"][1]["final_state"], "Operational");
            assert_eq!(r["io"]["failed"], 0, "one path is enough");
            let m = &r["multipath"][0];
            let p0 = &m["paths"][0];
            assert!(p0["given_up"].as_u64() >= Some(1), "{m}");
            assert!(p0["failovers"].as_u64() <= Some(1), "{m}");
            assert_eq!(m["no_path_us"], 0, "{m}");
            assert!(m["paths"][1]["ios"].as_u64() > Some(5_000), "{m}");
        }
        "multipath-slow-path.toml" | "multipath-slow-target.toml" => {
            // Fast path failover: a slow route is no reset, and nothing fails.
            assert_eq!(outcomes(r), Vec::<&str>::new());
            assert_eq!(r["io"]["failed"], 0);
            let m = &r["multipath"][0];
            assert_eq!(m["path_timeout"], "adaptive", "the default: {m}");
            assert_eq!(m["path_io_timeout_ms"], Value::Null, "{m}");
            assert_eq!(
                (
                    m["path_timeout_min_ms"].as_u64(),
                    m["path_timeout_max_ms"].as_u64()
                ),
                (Some(5), Some(3_000))
            );
            let (p0, p1) = (&m["paths"][0], &m["paths"][1]);
            if file == "multipath-slow-path.toml" {
                // hca0's route is 300 ms from the start: before its first answer its
                // timeout is RFC 6298's conservative second, so its first commands are
                // answered within it and it learns its latency; nothing is given up, no
                // target is told to abort (before, the 5 ms floor gave every command up
                // and the path carried nothing, for ever). Priced at 300 ms beside a
                // 150 us path, it carries its first commands and one a second after (a
                // path idle that long), and the disk's p99 is the fast path's.
                assert_eq!(
                    (p0["given_up"].as_u64(), p0["moved"].as_u64()),
                    (Some(0), Some(0)),
                    "{m}"
                );
                let ios = p0["ios"].as_u64().expect("ios");
                assert!((3..=10).contains(&ios), "a slow path carries I/O: {m}");
                assert!(m["p99_latency_us"].as_u64() < Some(1_000), "{m}");
                assert!(p0["srtt_us"].as_u64() >= Some(300_000), "{m}");
                assert!(p1["ios"].as_u64() > Some(5_000), "{m}");
                assert_eq!(p1["given_up"], 0, "{m}");
                let worst = m["max_latency_us"].as_u64().expect("latency");
                assert!((300_000..302_000).contains(&worst), "the route's own: {m}");
            } else {
                // Slow on every path: no path answers sooner, nothing moves.
                for p in [p0, p1] {
                    assert_eq!(
                        (p["given_up"].as_u64(), p["moved"].as_u64()),
                        (Some(0), Some(0)),
                        "{m}"
                    );
                    assert!(p["ios"].as_u64() > Some(200), "both paths serve: {m}");
                }
                assert!(m["max_latency_us"].as_u64() >= Some(300_000), "{m}");
                // Each path learned the target's 300 ms as its own round trip.
                for p in [p0, p1] {
                    assert!(p["srtt_us"].as_u64() >= Some(300_000), "{m}");
                    assert!(p["timeout_us"].as_u64() > p["srtt_us"].as_u64(), "{m}");
                }
            }
        }
        "multipath-cable-out.toml" => {
            assert_eq!(outcomes(r), ["Restored"]);
            assert_eq!(r["resets"][0]["hca"], "hca1");
            let m = &r["multipath"][0];
            // Down from the pull (1000 ms) to PORT_ACTIVE after the plug-back (5300 ms),
            // and the re-login after it: not the 1.5 s a reset that plugged it back gave.
            let down = m["paths"][1]["down_us"].as_u64().expect("down_us");
            assert!((4_300_000..4_400_000).contains(&down), "{m}");
            assert_eq!(m["no_path_us"], 0, "hca0 carried the disk: {m}");
            assert_eq!(r["io"]["failed"], 0);
        }
        "multipath-one-slow-lun.toml" => {
            // The data LUN is slow behind both ports alike: no path of either disk is
            // worse than the other, so nothing is given up; the boot LUN, served as
            // before by the same ports, keeps a healthy path's latency.
            assert_eq!(outcomes(r), Vec::<&str>::new());
            let disks = r["multipath"].as_array().expect("disks");
            assert_eq!(disks.len(), 2, "{disks:?}");
            for m in disks {
                for p in m["paths"].as_array().expect("paths") {
                    assert_eq!(
                        (p["given_up"].as_u64(), p["moved"].as_u64()),
                        (Some(0), Some(0)),
                        "{m}"
                    );
                }
            }
            let (boot, data) = (&disks[0], &disks[1]);
            assert_eq!(boot["name"], "bootdisk");
            assert!(boot["max_latency_us"].as_u64() < Some(1_000), "{boot}");
            // A third of its I/O before 2 s in 0.2 ms, the rest served in 60 us to 30 ms:
            // a median near 8 ms, a p99 near 30.
            let p50 = data["p50_latency_us"].as_u64().expect("p50");
            assert!((5_000..12_000).contains(&p50), "{data}");
            assert!(data["p99_latency_us"].as_u64() > Some(25_000), "{data}");
            assert_eq!(r["io"]["failed"], 0);
        }
        "multipath-idle-check.toml" => {
            // hca1 (standby) carries nothing; its idle checks, one a second, find its
            // route dead from 2000 ms: the first check after it, late half its timeout, is
            // followed by the path's check of itself, and both are given up, the first at
            // its timeout: within that second and the timeout; no I/O was ever on it.
            assert_eq!(outcomes(r), Vec::<&str>::new());
            let m = &r["multipath"][0];
            let p1 = &m["paths"][1];
            assert_eq!(
                (p1["ios"].as_u64(), p1["given_up"].as_u64()),
                (Some(0), Some(2)),
                "{m}"
            );
            let checks = p1["checks"].as_u64().expect("checks");
            assert_eq!(p1["checks_answered"].as_u64(), Some(checks - 2), "{m}");
            assert!(
                (3..=4).contains(&checks),
                "one a second, until 2 s, and one: {m}"
            );
            // Down (its connection dropped) half a second after the give-up: found at
            // most 1 s + its timeout after the route died.
            let down = p1["down_us"].as_u64().expect("down");
            let found_ms = 5_000 - down / 1_000 - 500;
            assert!(
                (2_000..=2_000 + 1_000 + 6).contains(&found_ms),
                "{found_ms} {m}"
            );
            assert_eq!(m["paths"][0]["ios"].as_u64(), Some(10_000), "{m}");
            assert!(
                m["max_latency_us"].as_u64() < Some(1_000),
                "no I/O waited on it: {m}"
            );
            assert_eq!(r["io"]["failed"], 0);
        }
        "multipath-path-groups.toml" => {
            // hca0 (group 0) carries everything but the 1.8 s from its cable's pull
            // (2000 ms) to 500 ms after its path is back (3300.5 ms): 2,000 IOPS there.
            assert_eq!(outcomes(r), Vec::<&str>::new());
            let m = &r["multipath"][0];
            let (p0, p1) = (&m["paths"][0], &m["paths"][1]);
            assert_eq!(
                (&p0["group"], &p1["group"]),
                (&Value::from(0), &Value::from(1))
            );
            let carried = p1["ios"].as_u64().expect("ios");
            assert!((3_550..=3_650).contains(&carried), "{m}");
            assert_eq!(p0["ios"].as_u64(), Some(12_000 - carried), "{m}");
            assert_eq!(m["no_path_us"], 0, "{m}");
            assert!(m["max_latency_us"].as_u64() < Some(5_000), "{m}");
            assert_eq!(r["io"]["failed"], 0);
        }
        other => unreachable!("{other}"),
    }
}

/// The last-path guard (docs/design.md §7): a planned reset that would leave the boot disk
/// with no path is vetoed, naming what is missing; one that would not is consented to; a
/// forced reset is never asked.
fn expect_last_path(file: &str, r: &Value) {
    assert_eq!(r["io"]["failed"], 0, "{file}");
    assert_eq!(r["io"]["paging_failed"], 0, "{file}");
    match file {
        // Vetoed at once (cable-out), or after a consent that no longer held when hca1's
        // cable was pulled before the query closed (withdrawn, docs/design.md §3): the same veto.
        "last-path-cable-out.toml" | "last-path-withdrawn.toml" => {
            assert_eq!(outcomes(r), ["Aborted"]);
            let reset = &r["resets"][0];
            assert_eq!(reset["hca"], "hca0");
            assert_eq!(reset["vetoed_by"], "bootdisk");
            assert_eq!(reset["veto_reason"], "last path: hca1 port 1 down");
            assert_eq!(reset["hw_reset_us"], Value::Null, "nothing torn down");
            assert_eq!(r["hcas"][0]["epoch"], 1);
            let m = &r["multipath"][0];
            // The disk never lost its one path, and the vetoing path never went down.
            assert_eq!(m["no_path_us"], 0, "{m}");
            assert_eq!(m["paths"][0]["down_us"], 0, "{m}");
            assert_eq!(m["paths"][0]["moved"], 0, "{m}");
        }
        "last-path-consents.toml" => {
            assert_eq!(outcomes(r), ["Restored"]);
            assert_eq!(r["resets"][0]["reason"], "admin_planned");
            assert_eq!(r["resets"][0]["vetoed_by"], Value::Null);
            assert_eq!(r["hcas"][0]["epoch"], 2);
            assert_eq!(r["io"]["lost"], 0);
            let m = &r["multipath"][0];
            // hca1 carried the disk through hca0's whole outage: no I/O waited.
            assert_eq!(m["no_path_us"], 0, "{m}");
            assert_eq!(m["max_held"], 0, "{m}");
            assert!(m["paths"][0]["down_us"].as_u64() > Some(400_000), "{m}");
            assert!(m["max_latency_us"].as_u64() < Some(10_000), "{m}");
        }
        // Two overlapping planned resets of the disk's two adapters: one goes ahead.
        "last-path-overlap.toml" => {
            assert_eq!(outcomes(r), ["Restored", "Aborted"]);
            let (first, second) = (&r["resets"][0], &r["resets"][1]);
            assert_eq!(first["hca"], "hca0");
            assert_eq!(second["hca"], "hca1");
            assert_eq!(second["vetoed_by"], "bootdisk");
            assert_eq!(second["veto_reason"], "last path: hca0 port 1 resetting");
            assert_eq!(r["hcas"][0]["epoch"], 2);
            assert_eq!(r["hcas"][1]["epoch"], 1);
            let m = &r["multipath"][0];
            assert_eq!(m["no_path_us"], 0, "{m}");
            assert_eq!(m["max_held"], 0, "{m}");
            assert_eq!(m["paths"][1]["down_us"], 0, "{m}");
        }
        "last-path-single.toml" => {
            assert_eq!(outcomes(r), ["Aborted", "Restored"]);
            assert_eq!(r["resets"][0]["vetoed_by"], "bootdisk");
            assert_eq!(r["resets"][0]["veto_reason"], "last path: no other path");
            assert_eq!(r["resets"][1]["reason"], "admin_forced");
            assert_eq!(r["epoch"], 2);
            assert_eq!(
                events(r, "bootdisk"),
                ["RESET_QUERY", "RESET_ABORTED", "RESET", "RESET_END"]
            );
        }
        other => unreachable!("{other}"),
    }
}

/// Planned resets (asked first, vetoed, consented, aborted) and a client forced through its deadline.
fn expect_planned(file: &str, r: &Value, state: &str, epoch: &Value) {
    match file {
        "stuck-client.toml" => {
            assert_eq!(outcomes(r), ["Restored"]);
            assert_eq!(
                r["resets"][0]["forced_clients"],
                serde_json::json!(["wedged"])
            );
            assert!(r["resets"][0]["quiesce_us"].as_u64() >= Some(2_000_000));
            assert_eq!(r["io"]["failed"], 0);
        }
        "planned-vetoed.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(1)));
            assert_eq!(outcomes(r), ["Aborted"]);
            assert_eq!(r["resets"][0]["vetoed_by"], "db");
            assert_eq!(r["resets"][0]["veto_reason"], "scenario: veto_planned");
            assert_eq!(r["resets"][0]["hw_reset_us"], Value::Null);
            assert_eq!(r["io"]["failed"], 0);
            // The veto came before anything was torn down: only the CAN_VETO clients were
            // asked (db, and the boot disk, whose last-path guard makes it CAN_VETO), and
            // only they hear the abort.
            assert_eq!(events(r, "db"), ["RESET_QUERY", "RESET_ABORTED"]);
            assert_eq!(events(r, "bootdisk"), ["RESET_QUERY", "RESET_ABORTED"]);
            assert!(events(r, "ibal").is_empty(), "ibal heard nothing");
        }
        "planned-consented.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            assert_eq!(r["resets"][0]["reason"], "admin_planned");
            assert_eq!(events(r, "db"), ["RESET_QUERY", "RESET", "RESET_END"]);
            assert_eq!(events(r, "bootdisk"), ["RESET", "RESET_END"]);
            assert_eq!(r["io"]["failed"], 0);
        }
        "fatal-while-preparing.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"], "one reset, not two");
            assert_eq!(r["resets"][0]["reason"], "catastrophic");
            assert_eq!(r["resets"][0]["forced_clients"][0], "slow-voter");
            assert_eq!(
                events(r, "slow-voter"),
                ["RESET_QUERY", "RESET", "RESET_END"]
            );
            assert_eq!(r["io"]["failed"], 0);
        }
        "planned-aborted-unresponsive.toml" => {
            // docs/design.md §5 "An abort is not a veto": before, this said vetoed_by "wedged" and
            // quiesce_us null.
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(1)));
            assert_eq!(outcomes(r), ["AbortedUnresponsive"]);
            let reset = &r["resets"][0];
            assert_eq!(reset["vetoed_by"], Value::Null, "{reset}");
            assert_eq!(reset["veto_reason"], Value::Null, "{reset}");
            assert_eq!(reset["unresponsive_clients"], serde_json::json!(["wedged"]));
            assert_eq!(
                reset["forced_clients"],
                serde_json::json!([]),
                "nobody forced"
            );
            assert_eq!(
                reset["quiesce_us"], 500_000,
                "the quiesce ran to its deadline"
            );
            assert_eq!(reset["hw_reset_us"], Value::Null);
            assert_eq!(events(r, "wedged"), ["RESET", "RESET_ABORTED"]);
        }
        other => unreachable!("{other}"),
    }
}

/// The default host and the fabric: ports, cables, the subnet manager, busy targets.
fn expect_ports(file: &str, r: &Value, state: &str, epoch: &Value) {
    match file {
        "default-boot-from-san.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            assert_eq!(r["io"]["failed"], 0);
            assert!(r["io"]["completed"].as_u64() > Some(10_000));
            assert!(r["net"]["completed_back"].as_u64() > Some(0));
            // The device is back 1 s after the reset; the fabric takes 3.5 s more,
            // and the boot disk waits for both.
            assert_eq!(r["resets"][0]["total_us"], 1_002_000);
            assert!(r["io"]["max_latency_us"].as_u64() > Some(4_500_000));
        }
        "cable-out-through-reset.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            for c in ["ibal", "boot"] {
                assert_eq!(
                    events(r, c),
                    ["PORT_DOWN", "RESET", "RESET_END", "PORT_ACTIVE"],
                    "{c}"
                );
            }
            // I/O issued at the pull waits for the plug-back (5000 ms), the link and the
            // sweep; before the fix the reset brought the port back at 2500 ms.
            assert!(
                r["io"]["max_latency_us"].as_u64() > Some(4_000_000),
                "{}",
                r["io"]
            );
            assert_eq!(r["io"]["failed"], 0);
        }
        "port-flap.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(1)));
            assert!(outcomes(r).is_empty(), "a cable pull resets nothing");
            for c in ["ibal", "boot", "ipoib-port2"] {
                assert_eq!(events(r, c), ["PORT_DOWN", "PORT_ACTIVE"], "{c}");
            }
            assert_eq!(r["io"]["failed"], 0);
        }
        "target-busy.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            assert_eq!(r["io"]["logins_refused"], 5, "every busy refusal retried");
            assert_eq!(r["io"]["logins"], 2, "the first login and the one after");
            assert_eq!(r["io"]["failed"], 0, "held, not failed");
            assert_eq!(
                events(r, "boot"),
                ["RESET", "RESET_END", "PORT_ACTIVE", "PORT_ACTIVE"]
            );
        }
        "sm-slow.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            for c in ["ibal", "boot", "ipoib-port1"] {
                assert_eq!(
                    events(r, c),
                    ["RESET", "RESET_END", "PORT_ACTIVE", "PORT_ACTIVE"],
                    "{c}"
                );
            }
        }
        other => unreachable!("{other}"),
    }
}

/// Resets that fail, storms, removal and held I/O.
fn expect_failures(file: &str, r: &Value, state: &str, epoch: &Value) {
    match file {
        "storm.toml" => {
            // One noisy client is throttled; the device is never failed for it.
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(3)));
            assert_eq!(outcomes(r), ["Restored", "Restored"]);
            assert_eq!(r["io"]["failed"], 0);
            assert_eq!(r["io"]["paging_failed"], 0);
        }
        "storm-limit.toml" => {
            assert_eq!(state, "Failed");
            assert_eq!(
                outcomes(r),
                ["Restored", "Restored", "Restored", "StormLimit"]
            );
        }
        "auto-recover-off.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["AutoRecoverOff", "Restored"]);
            assert_eq!(r["resets"][0]["hw_reset_us"], Value::Null, "no reset");
            assert_eq!(r["resets"][1]["reason"], "admin_restart");
            assert_eq!(events(r, "app"), ["RESET", "RESET_FAILED", "RESET_END"]);
        }
        "paging-long-outage.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            assert!(r["resets"][0]["hw_reset_us"].as_u64() >= Some(40_000_000));
            assert_eq!(r["io"]["paging_failed"], 0, "the paging path held");
            assert!(
                r["io"]["failed"].as_u64() > Some(0),
                "the data LUN gave up at io_hold_timeout"
            );
        }
        "device-replaced.toml" => {
            assert_eq!(state, "Failed");
            assert_eq!(outcomes(r), ["DeviceReplaced"]);
            assert!(r["resets"][0]["pnp_operations"].as_u64() > Some(0));
        }
        "device-never-returns.toml" => {
            assert_eq!(state, "Failed");
            assert_eq!(outcomes(r), ["AutoRestartExpired"]);
            assert!(
                r["io"]["failed"].as_u64() > Some(0),
                "held I/O failed upward"
            );
        }
        "surprise-removal-mid-reset.toml" => {
            assert_eq!(state, "Removed");
            assert_eq!(outcomes(r), ["Removed"]);
            for c in r["clients"].as_array().expect("clients") {
                let events = c["events"].as_array().expect("events");
                assert_eq!(events.last(), Some(&Value::from("DEVICE_FATAL")), "{c}");
            }
        }
        "io-hold-timeout.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"]);
            assert!(
                r["io"]["failed"].as_u64() > Some(0),
                "held I/O failed, retryable"
            );
            assert!(
                r["io"]["completed"].as_u64() > Some(5_000),
                "and the disks came back"
            );
            // Failed I/O waited out the hold (100 ms) and counts in the maximum.
            let failed = r["io"]["max_failed_latency_us"].as_u64().expect("latency");
            assert!(failed >= 100_000, "{failed}");
            assert!(r["io"]["max_latency_us"].as_u64() >= Some(failed));
        }
        other => unreachable!("{other}"),
    }
}

/// Causes that meet: firmware activations, requests during a restore, errors mid-reset.
fn expect_causes(file: &str, r: &Value, state: &str, epoch: &Value) {
    match file {
        "firmware-activation.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["FirmwareChanged"]);
            assert_eq!(r["resets"][0]["reason"], "fw_activate");
        }
        "request-during-restore.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(3)));
            assert_eq!(outcomes(r), ["Restored", "Restored"]);
            assert_eq!(r["resets"][1]["reason"], "client_request");
        }
        "two-causes-one-instant.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"], "one reset, not two");
            assert_eq!(r["resets"][0]["reason"], "catastrophic");
        }
        "catastrophic-while-quiescing.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["Restored"], "no abort, no second reset");
            assert_eq!(r["resets"][0]["reason"], "catastrophic");
            assert_eq!(r["resets"][0]["forced_clients"][0], "wedged");
        }
        "fw-activate-after-assert.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(4)));
            assert_eq!(outcomes(r), ["Restored", "FirmwareChanged", "Restored"]);
            assert_eq!(r["resets"][1]["reason"], "fw_activate");
            assert_eq!(r["io"]["failed"], 0);
        }
        "fw-activate-on-failed.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(2)));
            assert_eq!(outcomes(r), ["HardwareDead", "FirmwareChanged"]);
            assert_eq!(r["resets"][1]["pnp_operations"], 0);
        }
        "hang-mid-reset.toml" => {
            assert_eq!((state, epoch.as_u64()), ("Operational", Some(3)));
            assert_eq!(outcomes(r), ["Restored", "Restored"]);
            // `common` holds every reset to zero allocations.
        }
        other => unreachable!("{other}"),
    }
}

/// The times of the `port N active` rows of the bus lane, in ms, in order.
fn port_active_times(timeline: &str, port: u8) -> Vec<f64> {
    let row = format!("port {port} active");
    timeline
        .lines()
        .filter(|l| l.contains(&row))
        .filter_map(|l| l.split('|').next()?.trim().parse().ok())
        .collect()
}

/// docs/design.md §5 "Ports": a pulled cable stays out through a reset, on one adapter and on several.
/// The port is Active at the start, then only after the plug-back at 5000 ms plus training
/// (200 ms) and the sweep (100 ms); before the fix it came back with the device at 2500 ms.
#[test]
fn a_pulled_cable_stays_out_through_a_reset_on_one_adapter_and_on_several() {
    for file in ["cable-out-through-reset.toml", "multipath-cable-out.toml"] {
        let path = scenarios_dir().join(file);
        let (code, out, err) = hcasim(&["run", path.to_str().expect("utf-8")]);
        assert_eq!(code, 0, "{file}: {err}");
        let invariants: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("invariants:"))
            .collect();
        assert!(!invariants.is_empty(), "{out}");
        assert!(
            invariants.iter().all(|l| l.ends_with(" 0 violated")),
            "{invariants:?}"
        );
        let times = port_active_times(&out, 1);
        assert_eq!(times.first(), Some(&0.0), "{file}: {times:?}");
        assert_eq!(times.last(), Some(&5300.0), "{file}: {times:?}\n{out}");
        assert!(
            times.iter().all(|t| *t == 0.0 || *t >= 5000.0),
            "{file}: Active while the cable was out: {times:?}"
        );
    }
}

#[test]
fn the_seed_flag_overrides_the_scenario_seed() {
    let path = scenarios_dir().join("default-boot-from-san.toml");
    let p = path.to_str().expect("utf-8");
    let (_, a, _) = hcasim(&["run", p, "--json", "--seed", "42"]);
    let a: Value = serde_json::from_str(&a).expect("json");
    assert_eq!(a["seed"], 42);
    let b = report("default-boot-from-san.toml");
    assert_ne!(a["io"], b["io"], "another seed, another run");
    // The global flag means the same, and is never silently dropped.
    let (code, g, _) = hcasim(&["--seed", "42", "run", p, "--json"]);
    assert_eq!(code, 0);
    let g: Value = serde_json::from_str(&g).expect("json");
    assert_eq!(g, a, "--seed before run is honoured");
    let (code, _, err) = hcasim(&["--seed", "41", "run", p, "--seed", "42"]);
    assert_eq!(code, 2, "two different seeds: {err}");
    let (code, out, err) = hcasim(&["--random", "3", "run", p]);
    assert_eq!(code, 2, "--random with a file is refused: {err}");
    assert!(out.is_empty() && err.contains("--random"), "{err}");
}

/// docs/design.md §9: a disk that never comes up makes its I/O lost, and a run that loses I/O exits 1
/// with the accounting still closed.
#[test]
fn a_run_that_loses_io_says_so_and_exits_1() {
    let dir = std::env::temp_dir().join(format!("hcasim-lost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("dead-from-the-start.toml");
    // Dead from the first instant; the health poll finds it at 1 s, after the run's end.
    std::fs::write(
        &path,
        "name = \"dead\"\nduration_ms = 500\n[[clients]]\nname = \"boot\"\nkind = \"bootdisk\"\n\
         [[events]]\nat_ms = 0\nfault = \"catastrophic\"\n",
    )
    .expect("write");
    let p = path.to_str().expect("utf-8");
    let (code, out, _) = hcasim(&["run", p, "--json"]);
    assert_eq!(code, 1, "{out}");
    let r: Value = serde_json::from_str(&out).expect("json");
    assert!(r["io"]["lost"].as_u64() > Some(0), "{}", r["io"]);
    assert_eq!(r["io"]["in_flight"], 0, "{}", r["io"]);
    assert_accounting_closes("dead-from-the-start", &r);
    let boot = &r["clients"][1];
    assert_eq!(boot["name"], "boot");
    assert!(
        boot["error"]
            .as_str()
            .is_some_and(|e| e.contains("SRP login")),
        "the disk says why it is down: {boot}"
    );
    let (code, text, _) = hcasim(&["run", p]);
    assert_eq!(code, 1);
    assert!(text.contains("LOST:"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_default_scenario_file_matches_the_embedded_default() {
    let (code, embedded, _) = hcasim(&[]);
    assert_eq!(code, 0);
    let path = scenarios_dir().join("default-boot-from-san.toml");
    let (_, from_file, _) = hcasim(&["run", path.to_str().expect("utf-8")]);
    assert_eq!(embedded, from_file);
}

#[test]
fn bad_scenarios_are_refused_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("hcasim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let base = "name = \"x\"\nduration_ms = 1000\n";
    let two = "[[hcas]]\nname = \"h0\"\n[[hcas]]\nname = \"h1\"\n";
    let cases = [
        ("unknown top-level key", format!("{base}colour = 3\n"), "colour"),
        ("unknown client key", format!("{base}[[clients]]\nname = \"a\"\nkind = \"custom\"\nspeed = 1\n"), "speed"),
        ("bad kind", format!("{base}[[clients]]\nname = \"a\"\nkind = \"nvme\"\n"), "clients[0].kind"),
        ("bad value type", format!("{base}[policy]\nquiesce_deadline_ms = \"soon\"\n"), "quiesce_deadline_ms"),
        ("invalid policy", format!("{base}[policy]\nquiesce_deadline_ms = 0\n"), "policy.quiesce_deadline_ms"),
        ("iops on a custom client", format!("{base}[[clients]]\nname = \"a\"\nkind = \"custom\"\niops = 5\n"), "clients[0].iops"),
        ("never_ack on the boot disk", format!("{base}[[clients]]\nname = \"a\"\nkind = \"bootdisk\"\nnever_ack = true\n"), "clients[0].never_ack"),
        ("a port the adapter lacks", format!("{base}[hca]\nports = 1\n[[clients]]\nname = \"a\"\nkind = \"ipoib\"\nport = 2\n"), "clients[0].port"),
        ("unknown fault", format!("{base}[[events]]\nat_ms = 5\nfault = \"meteor\"\n"), "events[0].fault"),
        ("event after the end", format!("{base}[[events]]\nat_ms = 5000\nfault = \"hang\"\n"), "events[0].at_ms"),
        ("count on a fault without one", format!("{base}[[events]]\nat_ms = 5\nfault = \"hang\"\ncount = 2\n"), "events[0].count"),
        ("duplicate names", format!("{base}[[clients]]\nname = \"a\"\nkind = \"custom\"\n[[clients]]\nname = \"a\"\nkind = \"custom\"\n"), "clients[1].name"),
        ("not TOML", "name = \n".to_string(), "line 1"),
        // What the adapter cannot serve is refused too, naming the key that asks for it.
        ("a queue depth whose CQ exceeds the adapter's", format!("{base}[[clients]]\nname = \"b\"\nkind = \"bootdisk\"\nqueue_depth = 256\n"), "clients[0].queue_depth"),
        ("disks that exhaust the DMA memory", format!("{base}{}", ["d1", "d2", "d3"].map(|n| format!("[[clients]]\nname = \"{n}\"\nkind = \"srp\"\nqueue_depth = 128\n")).concat()), "clients[2].queue_depth"),
        ("large transfers whose buffers exhaust the DMA memory", format!("{base}[[clients]]\nname = \"d\"\nkind = \"srp\"\nlarge_pct = 10\nlarge_blocks = 64\n"), "clients[0].large_blocks"),
        ("more consumers than the access layer has", format!("{base}{}", (0..20).map(|i| format!("[[clients]]\nname = \"n{i}\"\nkind = \"ipoib\"\n")).collect::<String>()), "clients[16]"),
        ("pps over its limit", format!("{base}[[clients]]\nname = \"n\"\nkind = \"ipoib\"\npps = 200000\n"), "clients[0].pps"),
        ("a NUL in a name", format!("{base}[[clients]]\nname = \"a\\u0000b\"\nkind = \"custom\"\n"), "clients[0].name"),
        ("a newline in a name", format!("{base}[[clients]]\nname = \"a\\nb\"\nkind = \"srp\"\n"), "clients[0].name"),
        ("a port_down without its port", format!("{base}[[events]]\nat_ms = 5\nfault = \"port_down\"\nduration_ms = 10\n"), "events[0].port"),
        ("a port_down on a port the adapter lacks", format!("{base}[hca]\nports = 1\n[[events]]\nat_ms = 5\nfault = \"port_down\"\nport = 2\nduration_ms = 10\n"), "events[0].port"),
        ("a port_down without its duration", format!("{base}[[events]]\nat_ms = 5\nfault = \"port_down\"\nport = 1\n"), "events[0].duration_ms"),
        ("a port on another fault", format!("{base}[[events]]\nat_ms = 5\nfault = \"hang\"\nport = 1\n"), "events[0].port"),
        ("a busy target refusing no login", format!("{base}[[events]]\nat_ms = 5\nfault = \"target_busy\"\ncount = 0\n"), "events[0].count"),
        // INJECT_FAULT's own ranges (FaultRequest::check), the same for a scenario.
        ("a cable pulled for no time", format!("{base}[[events]]\nat_ms = 5\nfault = \"port_down\"\nport = 1\nduration_ms = 0\n"), "events[0].duration_ms"),
        ("a cable pulled for longer than INJECT_FAULT takes", format!("{base}[[events]]\nat_ms = 5\nfault = \"port_down\"\nport = 1\nduration_ms = 3600001\n"), "events[0].duration_ms"),
        ("more busy logins than INJECT_FAULT takes", format!("{base}[[events]]\nat_ms = 5\nfault = \"target_busy\"\ncount = 10001\n"), "events[0].count"),
        ("more failed resets than INJECT_FAULT takes", format!("{base}[[events]]\nat_ms = 5\nfault = \"reset_fails\"\ncount = 65\n"), "events[0].count"),
        ("no failed reset", format!("{base}[[events]]\nat_ms = 5\nfault = \"reset_fails\"\ncount = 0\n"), "events[0].count"),
        ("a subnet manager slower than an hour", format!("{base}[hca]\nsm_sweep_ms = 3600001\n"), "hca.sm_sweep_ms"),
        ("another client called ibal", format!("{base}[[clients]]\nname = \"ibal\"\nkind = \"custom\"\n[[clients]]\nname = \"d\"\nkind = \"srp\"\n"), "clients[0].name"),
        // Several adapters: every name must lead somewhere, once.
        ("[hca] beside [[hcas]]", format!("{base}[hca]\nports = 1\n{two}"), "hca"),
        ("a name on the one [hca]", format!("{base}[hca]\nname = \"h0\"\n"), "hca.name"),
        ("an adapter without a name", format!("{base}[[hcas]]\nports = 1\n"), "hcas[0].name"),
        ("two adapters of one name", format!("{base}[[hcas]]\nname = \"a\"\n[[hcas]]\nname = \"a\"\n"), "hcas[1].name"),
        ("a bad key of the second adapter", format!("{base}{two}sm_sweep_ms = 3600001\n"), "hcas[1].sm_sweep_ms"),
        ("a client without its adapter", format!("{base}{two}[[clients]]\nname = \"n\"\nkind = \"ipoib\"\n"), "clients[0].hca"),
        ("a client on an adapter that does not exist", format!("{base}{two}[[clients]]\nname = \"n\"\nkind = \"ipoib\"\nhca = \"hca9\"\n"), "clients[0].hca"),
        ("paths on a client that is no disk", format!("{base}{two}[[clients]]\nname = \"n\"\nkind = \"ipoib\"\npaths = [\"h0\", \"h1\"]\n"), "clients[0].paths"),
        ("one adapter twice in paths", format!("{base}{two}[[clients]]\nname = \"d\"\nkind = \"srp\"\npaths = [\"h0\", \"h0\"]\n"), "clients[0].paths[1]"),
        ("a single path", format!("{base}{two}[[clients]]\nname = \"d\"\nkind = \"srp\"\npaths = [\"h0\"]\n"), "clients[0].paths"),
        ("both hca and paths", format!("{base}{two}[[clients]]\nname = \"d\"\nkind = \"srp\"\nhca = \"h0\"\npaths = [\"h0\", \"h1\"]\n"), "clients[0].paths"),
        ("an event without its adapter", format!("{base}{two}[[events]]\nat_ms = 5\nfault = \"hang\"\n"), "events[0].hca"),
        ("a client reset from another adapter's client", format!("{base}{two}[[clients]]\nname = \"c\"\nkind = \"custom\"\nhca = \"h1\"\n[[events]]\nat_ms = 5\nfault = \"admin_reset\"\nclient = \"c\"\nhca = \"h0\"\n"), "events[0].client"),
        ("an adapter named with one adapter", format!("{base}[[clients]]\nname = \"n\"\nkind = \"ipoib\"\nhca = \"h0\"\n"), "clients[0].hca"),
        ("a port a path's adapter lacks", format!("{base}[[hcas]]\nname = \"h0\"\n[[hcas]]\nname = \"h1\"\nports = 1\n[[clients]]\nname = \"d\"\nkind = \"srp\"\nport = 2\npaths = [\"h0\", \"h1\"]\n"), "clients[0].port"),
    ];
    for (what, text, key) in cases {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).expect("write");
        let (code, stdout, stderr) = hcasim(&["run", path.to_str().expect("utf-8"), "--json"]);
        assert_eq!(code, 2, "{what}: {stderr}");
        assert!(stdout.is_empty(), "{what}: nothing on stdout");
        assert!(stderr.contains(key), "{what}: {stderr:?} should name {key}");
    }
    let (code, _, stderr) = hcasim(&["run", "/nonexistent/x.toml"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_timeline_option_draws_the_resets_as_svg() {
    let out = std::env::temp_dir().join(format!("hcasim-timeline-{}.svg", std::process::id()));
    let path = scenarios_dir().join("stuck-client.toml");
    let (code, stdout, stderr) = hcasim(&[
        "run",
        path.to_str().expect("utf-8"),
        "--timeline",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("final state"),
        "the text timeline still prints"
    );
    let svg = std::fs::read_to_string(&out).expect("written");
    let _ = std::fs::remove_file(&out);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    for lane in ["bus", "ibal", "boot", "wedged"] {
        assert!(svg.contains(&format!(">{lane}</text>")), "lane {lane}");
    }
    assert!(
        svg.contains("<title>FORCED: wedged at 3.000 s</title>"),
        "the forced client is marked"
    );
    assert!(
        svg.contains("e1 catastrophic \u{2192} Restored"),
        "the reset is captioned"
    );
    assert!(
        svg.contains("<title>quiesce 2.000 s, from"),
        "the 2 s quiesce band"
    );
    let (code, _, stderr) = hcasim(&[
        "run",
        path.to_str().expect("utf-8"),
        "--timeline",
        "/nonexistent/dir/x.svg",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot write"), "{stderr}");
}

#[test]
fn the_multipath_default_shows_a_lane_group_per_adapter_and_each_path() {
    let (code, stdout, stderr) = hcasim(&["--multipath"]);
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "2 adapters (hca0, hca1)",
        "== adapter hca0: 6 clients ==",
        "== adapter hca1: 2 clients ==",
        "data-lun@hca0",
        // The dead adapter's commands given up each 5 ms old (hca0's learned timeout,
        // SRTT + 5 ms): the one it had out and the check the selector sent after it, then
        // its probes, and nothing left on it for the RESET to move: its connection was
        // dropped when its first abort went unanswered.
        "0 failover(s), 8 commands moved off it (8 given up slow, 0 late answers discarded)",
        "  1905.648 | hca0     | down: no new I/O",
        // The whole outage on the bus lane: the health poll, the link, the subnet manager.
        "health poll: catastrophic error",
        "port 1 training (1500.000ms)",
        "port 1 link up, waiting for the SM",
        // The failover, path by path.
        "== multipath disk bootdisk: paths hca0, hca1, path timeout adaptive 5.000ms to 3000.000ms ==",
        "  1405.648 | hca0     | 1 command(s) past the path's timeout and overtaken on another path",
        "bootdisk   max latency 5.",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    let (code, _, stderr) = hcasim(&["--multipath", "run", "x.toml"]);
    assert_eq!(code, 2, "--multipath is a host of its own");
    assert!(stderr.contains("--multipath"), "{stderr}");
    let out = std::env::temp_dir().join(format!("hcasim-mp-{}.svg", std::process::id()));
    let path = scenarios_dir().join("multipath-both-reset.toml");
    let (code, _, stderr) = hcasim(&[
        "run",
        path.to_str().expect("utf-8"),
        "--timeline",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let svg = std::fs::read_to_string(&out).expect("written");
    let _ = std::fs::remove_file(&out);
    for group in ["hca0: multipath-both-reset", "hca1: multipath-both-reset"] {
        assert!(svg.contains(group), "no lane group {group}");
    }
    assert_eq!(
        svg.matches("e1 catastrophic").count(),
        2,
        "one reset per group"
    );
    // Each adapter's ports (two, through down, training, the sweep and active again), the
    // health polls that found the errors, the multipath disk's path events.
    for (class, what) in [
        (r#"class="port""#, "port bars"),
        (r#"class="health""#, "health poll marks"),
        (r#"class="path-event""#, "path events"),
    ] {
        assert!(svg.contains(class), "no {what}");
    }
    assert_eq!(
        svg.matches(" I/Os, ").count(),
        2,
        "the multipath lane names each path's I/O, commands moved and time down"
    );
    for state in ["down", "training", "waiting for the SM", "active"] {
        assert!(
            svg.contains(&format!("port 1 {state}:")),
            "no port 1 {state}"
        );
    }
}

#[test]
fn no_timeline_cuts_a_word_and_every_row_lines_up_with_its_header() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("tests/scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for file in files {
        let (_, stdout, stderr) = hcasim(&["run", file.to_str().expect("utf-8 path")]);
        let name = file.display();
        let mut tables = 0;
        let mut lines = stdout.lines();
        while let Some(header) = lines.find(|l| l.trim_start().starts_with("time ms |")) {
            tables += 1;
            let bars: Vec<usize> = header.match_indices(" | ").map(|(i, _)| i).collect();
            lines.next(); // the rule
            for row in lines
                .by_ref()
                .take_while(|l| !l.is_empty() && !l.starts_with('('))
            {
                assert!(!row.contains('~'), "{name}: a cut word in {row:?}");
                let at: Vec<usize> = row.match_indices(" | ").map(|(i, _)| i).collect();
                assert!(
                    at.len() <= bars.len() && at == bars[..at.len()],
                    "{name}: {row:?} does not line up with {header:?}"
                );
            }
        }
        assert!(tables > 0, "{name}: no timeline in:\n{stdout}{stderr}");
    }
}
