//! Replays of the scenarios in tests/scenarios: each run, its bundle taken, the bundle
//! replayed, the two records held side by side.

use std::path::PathBuf;

use hcabus::coordinator::bundle::{read_bundle, BundleCause, BundleView};
use hcabus::recorder::RecordKind;
use hcabus::types::State;

use super::*;
use crate::scenario::Scenario;

/// The scenarios of one host (tests/scenarios and its directories but the fleets').
fn scenarios() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir)
            .expect("tests/scenarios")
            .filter_map(|e| e.ok().map(|e| e.path()))
        {
            if path.is_dir() && !path.ends_with("fleet") {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "toml") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Each adapter's bundle at the end of a scenario's run: the kept one of an adapter that
/// ended Failed, one taken at the end otherwise.
fn bundles(path: &std::path::Path) -> Vec<(String, BundleView)> {
    let text = std::fs::read_to_string(path).expect("read");
    let take = |c: &hcabus::Coordinator| {
        let bytes = match c.kept_bundle() {
            Some(k) if c.state() == State::Failed => k.to_vec(),
            _ => {
                let mut out = vec![0u8; hcabus::coordinator::bundle::BUNDLE_MAX_BYTES];
                let n = c.bundle_now(BundleCause::OnDemand, &mut out).expect("room");
                out.truncate(n);
                out
            }
        };
        read_bundle(&bytes).expect("a bundle")
    };
    match scenario::parse_any(&text).expect("parses") {
        Scenario::One(s) => {
            let mut n = hcabus_lab::stack::build(&s).expect("builds");
            let end = n.end();
            n.run_until(end);
            vec![(String::new(), take(n.coordinator()))]
        }
        Scenario::Many(s) => {
            let mut w = hcabus_lab::stack::build_multi(&s).expect("builds");
            let end = w.end();
            w.run_until(end);
            w.hosts()
                .iter()
                .map(|(name, h)| (name.clone(), take(h.coordinator())))
                .collect()
        }
    }
}

/// A bundle replayed: the verdict, with what differs said.
fn replayed(what: &str, b: &BundleView) -> Verdict {
    let replay = infer(b, "replay").expect("infers");
    let v = run(b, &replay).expect("runs");
    if let Some(i) = v.first_difference {
        panic!(
            "{what}: the replay differs at record {i}:\n  bundle: {:?}\n  replay: {:?}\n{}",
            v.original.get(i).map(|r| r.to_string()),
            v.replayed.get(i).map(|r| r.to_string()),
            replay.toml
        );
    }
    v
}

/// Every adapter that a scenario of tests/scenarios leaves Failed: its kept bundle replays
/// to the same records, kind by kind and in order, and the replay fails for the same reason.
#[test]
fn every_failure_in_the_scenarios_replays_to_its_record_sequence() {
    let mut failures = 0;
    for path in scenarios() {
        for (adapter, b) in bundles(&path) {
            if b.cause() != Some(BundleCause::Failed) {
                continue;
            }
            failures += 1;
            let what = format!("{} {adapter}", path.display());
            let v = replayed(&what, &b);
            assert_eq!(v.state, State::Failed, "{what}");
            assert_eq!(v.original.len(), b.records.len());
            assert!(v.original.len() > 10, "{what}: a reset's worth of records");
        }
    }
    assert!(
        failures >= 4,
        "the scenarios hold failures to replay: {failures}"
    );
}

/// Every scenario of one adapter, failed or not: a bundle taken at its end replays to the
/// same records.
#[test]
fn every_single_adapter_scenario_replays_to_its_record_sequence() {
    let mut replays = 0;
    for path in scenarios() {
        let text = std::fs::read_to_string(&path).expect("read");
        if !matches!(scenario::parse_any(&text), Ok(Scenario::One(_))) {
            continue;
        }
        for (_, b) in bundles(&path) {
            replayed(&path.display().to_string(), &b);
            replays += 1;
        }
    }
    assert!(replays >= 20, "{replays} scenarios of one adapter");
}

/// The bundle of one adapter's scenario of tests/scenarios, by file name, at its end.
fn bundle_of_scenario(name: &str) -> BundleView {
    let path = scenarios()
        .into_iter()
        .find(|p| p.ends_with(name))
        .unwrap_or_else(|| panic!("no {name} in tests/scenarios"));
    bundles(&path).pop().expect("a bundle").1
}

/// The bundle of an inline scenario at its end (the kept one if it ended Failed).
fn bundle_of(text: &str) -> BundleView {
    let dir = std::env::temp_dir().join(format!("hcabus-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("{:x}.toml", fxhash(text)));
    std::fs::write(&path, text).expect("write");
    let (_, b) = bundles(&path).pop().expect("one adapter");
    let _ = std::fs::remove_file(&path);
    b
}

fn fxhash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

const RESTARTED: &str = r#"
name = "restarted"
duration_ms = 7000
[[clients]]
name = "bootdisk"
kind = "bootdisk"
[[clients]]
name = "watcher"
kind = "custom"
can_veto = true
[[events]]
at_ms = 1000
fault = "reset_fails"
count = 4
[[events]]
at_ms = 1000
fault = "admin_reset"
[[events]]
at_ms = 3000
fault = "admin_restart"
[[events]]
at_ms = 5000
fault = "planned_reset"
"#;

/// A device that failed, was restarted by its administrator and then reset by plan: the
/// replay finds the refused assertions, the restart and the planned reset.
#[test]
fn a_failure_an_administrators_restart_and_a_planned_reset_replay() {
    let b = bundle_of(RESTARTED);
    assert_eq!(b.state(), Some(State::Operational));
    let replay = infer(&b, "restarted").expect("infers");
    for expected in [
        "reset_fails (count = 4) at 999 ms",
        "admin_reset at 1000 ms",
        "admin_restart at 3000 ms",
        "planned_reset at 5000 ms",
    ] {
        assert!(
            replay.events.iter().any(|e| e == expected),
            "{expected}: {:?}",
            replay.events
        );
    }
    replayed("restarted", &b);
}

/// A bundle of format 1 has no client table: its clients are replayed as custom ones (said
/// in a note), which is all a scenario of custom clients needs.
#[test]
fn a_format_1_bundle_replays_its_clients_as_custom() {
    let mut b = bundle_of_scenario("storm-limit.toml");
    b.clients.clear();
    b.header.format = 1;
    let replay = infer(&b, "old").expect("infers");
    assert!(
        replay.notes.iter().any(|n| n.contains("no client table")),
        "{:?}",
        replay.notes
    );
    assert_eq!(replay.toml.matches("kind = \"custom\"").count(), 4);
    replayed("format 1", &b);
}

/// What no simulator reproduces (the catastrophic word a field adapter wrote, the LIDs its
/// subnet manager gave) is not compared; a kind, a step or an outcome is.
#[test]
fn the_fields_numbers_are_not_compared_but_their_kinds_are() {
    let mut b = bundle_of_scenario("sm-slow.toml");
    let mut touched = 0;
    for r in &mut b.records {
        match &mut r.kind {
            RecordKind::Hw { detail, .. } if *detail != 0 => *detail = 0xdead_beef,
            RecordKind::Port { lid, .. } => *lid += 100,
            _ => continue,
        }
        touched += 1;
    }
    assert!(touched >= 4, "{touched}");
    replayed("field numbers", &b);
    let outcome = b.records.iter().position(|r| {
        matches!(
            r.kind,
            RecordKind::Hw {
                outcome: hcabus::recorder::HwOutcome::Ready,
                ..
            }
        )
    });
    let i = outcome.expect("a device that came back");
    if let RecordKind::Hw { outcome, .. } = &mut b.records[i].kind {
        *outcome = hcabus::recorder::HwOutcome::Absent;
    }
    let v = run(&b, &infer(&b, "changed").expect("infers")).expect("runs");
    assert!(
        v.first_difference.is_some_and(|d| d <= i),
        "{:?}",
        v.first_difference
    );
}

/// A bundle whose ring had overwritten its first records (more than 256 since start) is
/// held against the replay from where it starts.
#[test]
fn a_bundle_that_starts_mid_record_replays_from_where_it_starts() {
    let mut text = String::from(
        "name = \"many\"\nduration_ms = 14000\n[[clients]]\nname = \"a\"\nkind = \"custom\"\n\
         [[clients]]\nname = \"b\"\nkind = \"custom\"\nack_delay_ms = 3\n",
    );
    for at_ms in (500..13_000).step_by(500) {
        text.push_str(&format!(
            "[[events]]\nat_ms = {at_ms}\nfault = \"admin_reset\"\n"
        ));
    }
    let b = bundle_of(&text);
    assert!(b.header.first_seq > 0, "the ring went round");
    assert_eq!(b.records.len(), hcabus::coordinator::bundle::BUNDLE_RECORDS);
    let v = replayed("many", &b);
    assert!(v.skipped > 0, "it starts within a reset");
    assert!(
        v.original.len() + v.skipped < b.records.len(),
        "its healthy polls left out"
    );
    assert!(v.original.iter().all(|r| !matches!(
        r.kind,
        RecordKind::Hw {
            outcome: hcabus::recorder::HwOutcome::Healthy,
            ..
        }
    )));
    assert!(
        matches!(v.original[0].kind, RecordKind::ResetStarted { .. }),
        "compared from the first reset it holds whole"
    );
}

/// A bundle with no record has nothing to replay: refused, not run.
#[test]
fn a_bundle_with_no_records_is_refused() {
    let mut b = bundle_of(RESTARTED);
    b.records.clear();
    assert!(matches!(infer(&b, "empty"), Err(ReplayError::NoRecords)));
}

/// Failures of every class, each as a scenario a user would write: it ends Failed, and its
/// kept bundle replays to the same records.
#[test]
fn a_failure_of_each_class_replays_to_its_record_sequence() {
    for (what, body) in failure_classes() {
        let text = format!("name = \"case\"\nduration_ms = 9000\n{body}");
        let b = bundle_of(&text);
        assert_eq!(
            b.cause(),
            Some(BundleCause::Failed),
            "{what}: it fails\n{text}"
        );
        let v = replayed(what, &b);
        assert_eq!(v.state, State::Failed, "{what}");
    }
}

/// One scenario of each class of failure (its clients, policy and events, no header).
fn failure_classes() -> Vec<(&'static str, String)> {
    let disk = "[[clients]]\nname = \"bootdisk\"\nkind = \"bootdisk\"\niops = 800\n";
    let net = "[[clients]]\nname = \"ipoib\"\nkind = \"ipoib\"\n";
    let ev = |at: u64, keys: &str| format!("[[events]]\nat_ms = {at}\n{keys}\n");
    vec![
        (
            "every assertion refused",
            format!("{disk}{}", ev(1000, "fault = \"reset_fails\"\ncount = 5") + &ev(1500, "fault = \"catastrophic\"")),
        ),
        (
            "auto-recover off",
            format!("[policy]\nauto_recover = false\n{disk}{}", ev(1200, "fault = \"command_timeout\"")),
        ),
        (
            "a hang, then never back",
            format!(
                "[policy]\nhw_ready_timeout_ms = 800\nauto_restart_window_ms = 3000\n{disk}{net}{}{}",
                ev(300, "fault = \"never_returns\""),
                ev(700, "fault = \"hang\"")
            ),
        ),
        (
            "a stalled counter, then another adapter",
            format!("{net}{}{}", ev(400, "fault = \"device_replaced\""), ev(600, "fault = \"health_stall\"")),
        ),
        (
            "a retry that worked, then one that did not",
            format!(
                "[policy]\nreset_retries = 1\n{disk}{}{}{}",
                ev(500, "fault = \"reset_fails\"\ncount = 1"),
                ev(600, "fault = \"catastrophic\""),
                ev(2500, "fault = \"reset_fails\"\ncount = 3") + &ev(2600, "fault = \"admin_reset\"")
            ),
        ),
        (
            "a cable out, then the device dead",
            format!(
                "[hca]\nlink_up_ms = 100\nsm_sweep_ms = 200\n{disk}{net}{}{}{}",
                ev(400, "fault = \"port_down\"\nport = 2\nduration_ms = 900"),
                ev(800, "fault = \"reset_fails\"\ncount = 4"),
                ev(900, "fault = \"catastrophic\"")
            ),
        ),
        (
            "a storm of client requests",
            format!(
                "[policy]\nmax_auto_resets = 2\nclient_request_limit = 16\n[[clients]]\nname = \"flaky\"\nkind = \"custom\"\n\
                 request_every_ms = 600\n[[clients]]\nname = \"voter\"\nkind = \"custom\"\n\
                 can_veto = true\nack_delay_ms = 40\n{disk}"
            ),
        ),
        (
            "a planned reset forced through a silent voter, then dead",
            format!(
                "[policy]\nquery_deadline_ms = 300\nhw_ready_timeout_ms = 1000\nauto_restart_window_ms = 3000\n[[clients]]\nname = \"silent\"\nkind = \"custom\"\n\
                 can_veto = true\nnever_ack = true\n{disk}guard_last_path = false\n{}{}",
                ev(500, "fault = \"never_returns\""),
                ev(600, "fault = \"fw_activate\"")
            ),
        ),
        (
            "clients that leave at a reset, one of them to come back",
            format!(
                "[policy]\nreset_retries = 0\n[[clients]]\nname = \"leaver\"\nkind = \"custom\"\n\
                 unregister_on_reset = true\n[[clients]]\nname = \"returner\"\nkind = \"custom\"\n\
                 reregister_on_reset = true\n[[clients]]\nname = \"slow\"\nkind = \"custom\"\n\
                 ack_delay_ms = 25\n{net}{}{}{}",
                ev(500, "fault = \"admin_reset\""),
                ev(1500, "fault = \"reset_fails\"\ncount = 2"),
                ev(1600, "fault = \"catastrophic\"")
            ),
        ),
    ]
}

/// A bundle of a bus up for days (a driver's clock counts from boot): its clock is moved to
/// the bus's start and a quiet stretch of three days shortened by whole health polls, and it
/// replays to the same records in a minute of virtual time.
#[test]
fn a_bundle_days_after_boot_replays_on_the_buses_own_clock() {
    let mut b = bundle_of(
        "name = \"late\"\nduration_ms = 8000\n[[clients]]\nname = \"bootdisk\"\nkind = \"bootdisk\"\n\
         [[events]]\nat_ms = 5000\nfault = \"reset_fails\"\ncount = 5\n\
         [[events]]\nat_ms = 5000\nfault = \"catastrophic\"\n",
    );
    assert_eq!(b.cause(), Some(BundleCause::Failed));
    const HOUR_US: u64 = 3_600_000_000;
    let boot_us = 48 * HOUR_US;
    let quiet_us = 72 * HOUR_US;
    let struck = b
        .records
        .iter()
        .position(|r| matches!(r.kind, RecordKind::ResetStarted { .. }))
        .expect("a reset");
    for (i, r) in b.records.iter_mut().enumerate() {
        let later = boot_us + if i + 1 >= struck { quiet_us } else { 0 };
        r.at = hcabus::Instant::from_us(r.at.as_us() + later);
        r.last_at = hcabus::Instant::from_us(r.last_at.as_us() + later);
    }
    b.header.taken_at_us += boot_us + quiet_us;
    let replay = infer(&b, "late").expect("infers");
    assert_eq!(replay.timebase.t0_us, boot_us);
    assert_eq!(replay.timebase.stretches(), 1);
    assert!(replay.timebase.shortened_us() > quiet_us - HOUR_US);
    assert!(replay.notes.iter().any(|n| n.contains("quiet stretch")));
    let v = replayed("days after boot", &b);
    assert_eq!(v.state, State::Failed);
    assert!(
        v.original.last().is_some_and(|r| r.at.as_us() < HOUR_US),
        "minutes, not days"
    );
}

/// The timebase maps an instant before a shortened stretch by the start alone, one after it
/// by the start and the stretch.
#[test]
fn the_timebase_moves_each_instant_by_what_came_before_it() {
    let mut b = bundle_of(RESTARTED);
    let base = b.records[0].at.as_us();
    let last = b.records.len() - 1;
    let gap_us = 10 * 3_600_000_000;
    b.records[last].at = hcabus::Instant::from_us(b.records[last].at.as_us() + gap_us);
    b.header.taken_at_us += gap_us;
    let t = timebase::timebase(&b, &hcabus::Policy::default());
    assert_eq!(t.map(base), 0);
    let before = b.records[last - 1].at.as_us();
    assert_eq!(t.map(before), before - t.t0_us);
    let after = b.records[last].at.as_us();
    assert_eq!(t.map(after), after - t.t0_us - t.shortened_us());
    assert_eq!(t.shortened_us() % 1_000_000, 0, "whole polls");
    assert!(
        after - t.shortened_us() - before > 600_000_000,
        "every window kept"
    );
}
