//! `hcasim fleet` (docs/design.md §11): the fleet scenarios of tests/scenarios/fleet run
//! through the binary, their figures read from its JSON, its refusals by key.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::common;

fn fleet_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios/fleet")
        .join(name)
}

fn hcasim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(args)
        .output()
        .expect("hcasim runs")
}

fn json_of(o: &Output) -> Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON document")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// What every run of every policy must show, whatever its speed: no target above its
/// capacity, no adapter reset and no paging I/O failed (but by the naive IPoIB), no
/// invariant violated.
fn every_run_keeps_the_fleet_guarantees(doc: &Value) {
    every_run_keeps_the_fleet_guarantees_but(doc, Except::NaiveIpoib);
    for run in doc["runs"].as_array().expect("runs") {
        // Only the naive IPoIB, there to show the cascade, may have adapters reset: past
        // the bus's storm limit (its two interfaces asking) a device is failed, and its
        // boot disk's paging I/O with it.
        if run["ipoib"] == "retry" {
            assert_eq!(
                run["adapter_resets"], 0,
                "{} seed {}",
                run["retry"], run["seed"]
            );
        }
    }
}

/// Whose runs may fail paging I/O.
#[derive(Clone, Copy, PartialEq)]
enum Except {
    /// No run's.
    Nobody,
    /// The naive IPoIB's, whose resets may fail a device.
    NaiveIpoib,
}

/// The same, where adapters are reset on purpose (a rollout).
fn every_run_keeps_the_fleet_guarantees_but_resets(doc: &Value) {
    every_run_keeps_the_fleet_guarantees_but(doc, Except::Nobody);
}

fn every_run_keeps_the_fleet_guarantees_but(doc: &Value, except: Except) {
    for run in doc["runs"].as_array().expect("runs") {
        let who = format!("{} seed {}", run["retry"], run["seed"]);
        for t in run["targets"].as_array().expect("targets") {
            assert!(
                t["peak_per_second"].as_u64() <= t["logins_per_second"].as_u64(),
                "{who}: {t}"
            );
        }
        if !(except == Except::NaiveIpoib && run["ipoib"] != "retry") {
            assert_eq!(run["io"]["paging_failed"], 0, "{who}");
        }
        assert_eq!(run["io"]["duplicated"], 0, "{who}");
        assert_eq!(run["invariants_violated"], 0, "{who}");
        let io = &run["io"];
        let n = |k: &str| io[k].as_u64().expect("a count");
        assert_eq!(
            n("submitted"),
            n("completed") + n("failed") + n("in_flight") + n("lost"),
            "{who}"
        );
    }
}

/// The scale: a thousand hosts through a target restart, a fabric-wide link flap and
/// a subnet-manager failover, five minutes of virtual time, under each policy. The shipped
/// one gets every host's every path back within 1.5 times the theoretical minimum; the fixed
/// 10 s retry of NVMe-oF leaves hosts out for most of a minute, and the naive IPoIB resets
/// adapters by the thousand.
/// The runs are made once, in this process, by what `hcasim fleet` runs (`fleet::run`): the
/// figures are read from their JSON report, and their table (`fleet::text`, what the program
/// prints) is the one README.md quotes (docs_output.rs leaves that quote to this test).
#[test]
fn a_thousand_hosts_get_every_path_back_within_one_and_a_half_times_the_minimum() {
    use hcabus_tools::{fleet, scenario};
    let file = fleet_file("thousand-hosts.toml");
    let text = std::fs::read_to_string(&file).expect("the scenario");
    let scenario = scenario::fleet::parse(&text).expect("a fleet scenario");
    let seed = scenario.setup.seed;
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let runs = fleet::run(&scenario, seed..seed + 1, jobs).expect("the fleet runs");
    let source = fleet::Source::of("tests/scenarios/fleet/thousand-hosts.toml", &text);
    if let Err(why) = common::quotes::check(
        "hcasim fleet tests/scenarios/fleet/thousand-hosts.toml",
        &fleet::text(&source, &scenario, &runs),
    ) {
        panic!("{why}");
    }
    let doc: Value = serde_json::from_str(&fleet::json(&source, &scenario, &runs)).expect("JSON");
    assert_eq!(doc["hosts"], 1000);
    every_run_keeps_the_fleet_guarantees(&doc);
    let runs = doc["runs"].as_array().expect("runs");
    let by = |p: &str| {
        runs.iter()
            .find(|r| r["retry"] == p && r["ipoib"] == "retry")
            .unwrap_or_else(|| panic!("a {p} run"))
    };
    let shipped = by("backoff");
    assert_eq!(shipped["held"], true);
    assert_eq!(
        (
            shipped["io"]["lost"].as_u64(),
            shipped["io"]["failed"].as_u64()
        ),
        (Some(0), Some(0))
    );
    let faults = shipped["faults"].as_array().expect("faults");
    let kinds: Vec<&str> = faults.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["power_on", "target_restart", "link_flap", "sm_failover"]
    );
    for fault in faults {
        assert_eq!(fault["back"], fault["hosts"], "{fault}");
        assert_eq!(fault["hosts"], 1000, "{fault}");
        assert!(f(&fault["over_min"]) >= 1.0, "{fault}");
        // The honest figures: the excess is what the whole minimum left, and the policy's
        // own part is over its least.
        let excess = f(&fault["all_back_ms"]) - f(&fault["theoretical_min_ms"]);
        assert!((f(&fault["excess_ms"]) - excess).abs() < 1e-6, "{fault}");
        assert!(f(&fault["controlled_over_min"]) >= 1.0, "{fault}");
        let min = f(&fault["outage_ms"]) + f(&fault["controlled_min_ms"]);
        assert!(
            (f(&fault["theoretical_min_ms"]) - min).abs() < 1e-6,
            "{fault}"
        );
    }
    // The goal is of the fleet's faults (its power-on is the firmware's and the sweeps'),
    // over the whole minimum; and the restart's logins, the one part a retry
    // policy alone decides, within 1.5 times their own least once each host knows the target
    // is back: a host learns it from a REQ sent after its return, and its CM sends them a
    // REQ's timeout apart (docs/design.md §7 "A login's REQ"), which the least leaves out.
    for fault in &faults[1..] {
        assert!(f(&fault["over_min"]) <= 1.5, "{fault}");
    }
    let restart = &faults[1];
    let req_ms = ibal::disk::REQ_TIMEOUT.as_us() as f64 / 1e3;
    let goal = f(&restart["outage_ms"]) + req_ms + 1.5 * f(&restart["controlled_min_ms"]);
    assert!(f(&restart["all_back_ms"]) <= goal, "{restart}");
    for worse in ["no_jitter", "fixed"] {
        let restart = &by(worse)["faults"][1];
        assert!(
            restart["back"].as_u64() < restart["hosts"].as_u64()
                || f(&restart["controlled_over_min"]) > 1.5,
            "{worse}: {restart}"
        );
        assert!(
            restart["excess_ms"].is_null() || f(&restart["excess_ms"]) > f(&faults[1]["excess_ms"]),
            "{worse}: {restart}"
        );
    }
    // The reset-storm cascade: the SA falls behind the reregister (and the boot), queries
    // time out; the shipped IPoIB retries, the naive one has its adapter reset.
    assert!(
        shipped["sa_timeouts"].as_u64() > Some(0),
        "the SA fell behind"
    );
    assert_eq!(shipped["ipoib_resets_asked"], 0);
    let naive = runs
        .iter()
        .find(|r| r["ipoib"] == "reset_on_sa_timeout")
        .expect("the naive IPoIB's run");
    // Every interface's first joins after the failover go into the silence of the new
    // master's first sweep: the naive one takes that timeout for a hung adapter, and every
    // host's adapter is reset, where the shipped interface reset none.
    let resets = naive["adapter_resets"].as_u64();
    assert!(resets >= Some(1000), "a storm: {resets:?}");
    assert!(naive["ipoib_resets_asked"].as_u64() >= resets);
    let sm = &shipped["faults"][3];
    assert_eq!(sm["back"], 1000, "{sm}");
    // The standby notices 50 to 60 s after the failure: nothing is back sooner, and no
    // policy has a say in it.
    assert!(f(&sm["outage_ms"]) >= 50_000.0, "{sm}");
}

/// A leaf's reboot of three minutes: its twenty single-homed hosts' boot disks wait it out
/// and every host is back after it. The run holds: the backlog each interface's stack queued
/// meanwhile goes out when its link is back, more at once than a fleet host's wire takes,
/// and the adapter refuses what finds no room (as a full send queue does) rather than drop
/// it (it once did: 640 datagrams, and the run did not hold).
#[test]
fn a_leaf_reboot_of_minutes_holds_and_its_boot_disks_wait_it_out() {
    let file = fleet_file("leaf-reboot.toml");
    let doc = json_of(&hcasim(&["fleet", file.to_str().expect("utf-8"), "--json"]));
    every_run_keeps_the_fleet_guarantees(&doc);
    let run = &doc["runs"][0];
    assert_eq!(run["held"], true, "{run}");
    assert_eq!(run["model_overflows"], 0);
    let leaf = &run["faults"][1];
    assert_eq!(
        (leaf["kind"].as_str(), leaf["leaf"].as_u64()),
        (Some("leaf_reboot"), Some(3))
    );
    assert_eq!(
        (leaf["hosts"].as_u64(), leaf["back"].as_u64()),
        (Some(20), Some(20))
    );
    assert_eq!(leaf["blast"]["boot_disks_cut"], 20);
    assert_eq!(leaf["blast"]["leaves_touched"], 1);
    assert_eq!(run["paging_stall"]["over_disk_timeout"], 20, "{run}");
}

/// The capacity curve: the fleet grown to each load a target, its restart's recovery
/// growing with it; refused with a seed range, or with loads that are not ascending.
#[test]
fn a_capacity_curve_grows_the_fleet_to_each_load_and_the_restart_with_it() {
    let file = fleet_file("small.toml");
    let file = file.to_str().expect("utf-8");
    let doc = json_of(&hcasim(&["fleet", file, "--json", "--curve", "25,100,400"]));
    assert_eq!(doc["schema"], "hcasim.fleet-curve/1");
    let points = doc["points"].as_array().expect("points");
    // One target, two disks a host on it: hosts = load / 2, rounded up.
    let hosts: Vec<u64> = points.iter().filter_map(|p| p["hosts"].as_u64()).collect();
    assert_eq!(hosts, [13, 50, 200]);
    let restart: Vec<f64> = points
        .iter()
        .map(|p| {
            assert_eq!(p["held"], true, "{p}");
            let r = &p["faults"][1];
            assert_eq!(r["kind"], "target_restart");
            assert_eq!(r["back"], r["hosts"], "{r}");
            f(&r["all_back_ms"])
        })
        .collect();
    assert!(
        restart.windows(2).all(|w| w[0] < w[1]),
        "the restart's recovery grows with the load: {restart:?}"
    );
    for (args, words) in [
        (
            vec!["--curve", "100,50"],
            "--curve 100,50: expected disks a target",
        ),
        (
            vec!["--curve", "50", "--seeds", "1..3"],
            "no --seeds or --shard",
        ),
        (vec!["--curve", "30000"], "past 10000"),
    ] {
        let mut all = vec!["fleet", file];
        all.extend(args);
        let o = hcasim(&all);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(words), "{err}");
    }
}

/// A seed range is what a batch engine shards: each seed's runs are the same whether it runs
/// alone or inside a range, and the runs come in seed order, then policy order.
#[test]
fn a_seed_range_shards_and_each_seed_runs_the_same_alone() {
    let file = fleet_file("small.toml");
    let file = file.to_str().expect("utf-8");
    let range = json_of(&hcasim(&[
        "fleet", file, "--json", "--seeds", "3..5", "--jobs", "2",
    ]));
    let alone = json_of(&hcasim(&["fleet", file, "--json", "--seeds", "4..5"]));
    let runs = range["runs"].as_array().expect("runs");
    let seeds: Vec<u64> = runs.iter().filter_map(|r| r["seed"].as_u64()).collect();
    assert_eq!(seeds, [3, 3, 3, 4, 4, 4]);
    let policies: Vec<&str> = runs[..3]
        .iter()
        .filter_map(|r| r["retry"].as_str())
        .collect();
    assert_eq!(policies, ["backoff", "no_jitter", "fixed"]);
    let strip = |r: &Value| {
        let mut r = r.clone();
        r["wall_ms"] = Value::Null;
        r
    };
    let alone_runs = alone["runs"].as_array().expect("runs");
    for (a, b) in runs[3..].iter().zip(alone_runs) {
        assert_eq!(strip(a), strip(b));
    }
    assert_ne!(
        strip(&runs[0])["faults"],
        strip(&runs[3])["faults"],
        "seeds differ"
    );
    every_run_keeps_the_fleet_guarantees(&range);
}

/// The table names each policy, the picture is an SVG with a line per policy, and a fleet's
/// exit status is 0 when the shipped policy kept every guarantee.
#[test]
fn the_table_and_the_picture_show_each_policy() {
    let svg = std::env::temp_dir().join(format!("hcasim-fleet-{}.svg", std::process::id()));
    let o = hcasim(&[
        "fleet",
        fleet_file("small.toml").to_str().expect("utf-8"),
        "--svg",
        svg.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let table = String::from_utf8_lossy(&o.stdout);
    for want in [
        "backoff",
        "no jitter",
        "fixed 10 s",
        "all back after",
        "minimum: outage + the policy's part",
        "over it: excess / the part's ratio",
        "peak logins/s",
    ] {
        assert!(table.contains(want), "{want}: {table}");
    }
    let picture = std::fs::read_to_string(&svg).expect("the picture");
    let _ = std::fs::remove_file(&svg);
    assert!(picture.starts_with("<svg") && picture.trim_end().ends_with("</svg>"));
    // One line per policy, in each of the three panels: power-on and the two faults.
    assert_eq!(picture.matches("<polyline").count(), 9);
}

/// Every refusal names its key, and exits 2 with nothing on stdout.
#[test]
fn a_bad_fleet_file_is_refused_by_key() {
    let good = std::fs::read_to_string(fleet_file("small.toml")).expect("small.toml");
    let cases: [(&str, &str, &str); 31] = [
        (
            "hosts = 100",
            "hosts = 100\nlinux_ch_count = 4",
            "fleet.linux_ch_count",
        ),
        (
            "hosts = 100",
            "hosts = 100\nlinux_initiators = 3\nlinux_ch_count = 0",
            "fleet.linux_ch_count",
        ),
        (
            "hosts = 100",
            "hosts = 100\nlinux_initiators = 10001",
            "fleet.linux_initiators",
        ),
        (
            "down_ms = 500",
            "down_ms = 500\nbounces = 3",
            "fleet.events[1].bounces",
        ),
        (
            "hosts = 100",
            "hosts = 100\nfirmware_boot_ms = 5000\nlogin_ms = 15001",
            "fleet.login_ms",
        ),
        (
            "hosts = 100",
            "hosts = 100\nsrp_daemon_rescan_ms = 14999",
            "fleet.srp_daemon_rescan_ms",
        ),
        (
            "login_concurrency = 8\nlogins_per_second = 50",
            "login_concurrency = 8",
            "fleet.targets[0].logins_per_second",
        ),
        (
            "hosts = 100",
            "hosts = 100\npower_on_delay_ms = [2000, 1000]",
            "fleet.power_on_delay_ms",
        ),
        (
            "hosts = 100",
            "hosts = 100\nfirmware_boot_ms = 0",
            "fleet.firmware_boot_ms",
        ),
        (
            "kind = \"link_flap\"",
            "kind = \"link_flap\"\nreassign_lids = true",
            "fleet.events[1].reassign_lids",
        ),
        ("hosts = 100", "hosts = 0", "fleet.hosts"),
        (
            "hosts = 100",
            "hosts = 100\nlocal_ack_timeout = 32",
            "fleet.local_ack_timeout",
        ),
        (
            "hosts = 100",
            "hosts = 100\nretry_count = 8",
            "fleet.retry_count",
        ),
        (
            "kind = \"link_flap\"",
            "kind = \"rollout\"",
            "fleet.events[1].kind",
        ),
        (
            "hosts = 100",
            "hosts = 100\nhost = \"multipath\"\n[[fleet.events]]\nat_ms = 1\nkind = \"rollout\"",
            "fleet.events[0].max_in_reset_per_target",
        ),
        (
            "hosts = 100",
            "hosts = 100\n[fleet.sm]\nsa_queries_per_second = 0",
            "fleet.sm.sa_queries_per_second",
        ),
        (
            "hosts = 100",
            "hosts = 100\n[fleet.sm]\nsa_receive_queue = 0",
            "fleet.sm.sa_receive_queue",
        ),
        (
            "hosts = 100",
            "hosts = 100\n[fleet.sm]\nsa_backlog_limit = 2000000",
            "fleet.sm.sa_backlog_limit",
        ),
        (
            "hosts = 100",
            "hosts = 100\n[fleet.sm]\nsa_receive_us = 5000000",
            "fleet.sm.sa_receive_us",
        ),
        (
            "hosts = 100",
            "hosts = 100\n[fleet.sm]\nsa_max_wait_ms = 0",
            "fleet.sm.sa_max_wait_ms",
        ),
        (
            "hosts = 100",
            "hosts = 100\n[fleet.sm]\npolls_missed = 0",
            "fleet.sm.polls_missed",
        ),
        (
            "kind = \"link_flap\"",
            "kind = \"sm_failover\"",
            "fleet.events[1].down_ms",
        ),
        (
            "hosts = 100",
            "hosts = 100\nhost = \"laptop\"",
            "fleet.host",
        ),
        (
            "hosts = 100",
            "hosts = 100\ncompare = [\"backoff\", \"sometimes\"]",
            "fleet.compare[1]",
        ),
        (
            "hosts = 100",
            "hosts = 100\ncompare = [\"fixed\", \"fixed\"]",
            "fleet.compare[1]",
        ),
        (
            "login_concurrency = 8",
            "login_concurrency = 0",
            "fleet.targets[0].login_concurrency",
        ),
        (
            "logins_per_second = 50",
            "logins_per_second = 1000000",
            "fleet.targets[0].logins_per_second",
        ),
        ("target = 0", "target = 3", "fleet.events[0].target"),
        ("at_ms = 40000", "at_ms = 90000", "fleet.events[1].at_ms"),
        (
            "kind = \"link_flap\"",
            "kind = \"sm_flood\"",
            "fleet.events[1].kind",
        ),
        ("hosts = 100", "hosts = 100\nspeed = 3", "speed"),
    ];
    let dir = std::env::temp_dir().join(format!("hcasim-fleet-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    for (i, (from, to, key)) in cases.iter().enumerate() {
        assert!(good.contains(from), "{from}");
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, good.replacen(from, to, 1)).expect("written");
        let o = hcasim(&["fleet", path.to_str().expect("utf-8")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{key}: {err}");
        assert!(o.stdout.is_empty(), "{key}");
        assert!(err.contains(key), "{key}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    // A fleet is not a host's scenario, nor a host's scenario a fleet.
    let small = fleet_file("small.toml");
    let o = hcasim(&["run", small.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("key `fleet`"));
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/storm.toml");
    let o = hcasim(&["fleet", host.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("fleet"));
    let o = hcasim(&[
        "--seed",
        "2",
        "fleet",
        small.to_str().expect("utf-8"),
        "--seeds",
        "1..3",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = hcasim(&["fleet", small.to_str().expect("utf-8"), "--seeds", "5..5"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A rolling firmware rollout across 200 multipath hosts: every adapter activated, never more
/// than the limit in reset among a target's adapters, no boot disk ever without a path, no
/// I/O failed.
#[test]
fn a_rollout_activates_every_adapter_and_keeps_every_boot_disk_on_a_path() {
    let doc = json_of(&hcasim(&[
        "fleet",
        fleet_file("rollout.toml").to_str().expect("utf-8"),
        "--json",
    ]));
    every_run_keeps_the_fleet_guarantees_but_resets(&doc);
    let run = &doc["runs"][0];
    assert_eq!(run["held"], true);
    let ro = &run["rollout"];
    assert_eq!(
        (ro["done"].as_u64(), ro["adapters"].as_u64()),
        (Some(400), Some(400)),
        "{ro}"
    );
    assert!(ro["took_ms"].as_f64().is_some(), "{ro}");
    assert!(ro["peak_in_reset_per_target"].as_u64() <= ro["max_in_reset_per_target"].as_u64());
    assert_eq!(run["max_no_path_ms"], 0.0);
    // Each activation is one planned reset, and nothing else reset an adapter.
    assert_eq!(run["adapter_resets"], 400);
    assert_eq!(
        (run["io"]["failed"].as_u64(), run["io"]["lost"].as_u64()),
        (Some(0), Some(0))
    );
}

/// `small.toml` under the shipped policy alone with `extra` keys in its `[fleet]`, run for
/// its table and its JSON (through a scratch file named by `tag`).
fn small_with(tag: &str, extra: &str) -> (String, Value) {
    let small = std::fs::read_to_string(fleet_file("small.toml")).expect("small.toml");
    let text = small.replace(
        "hosts = 100",
        &format!("hosts = 100\ncompare = [\"backoff\"]{extra}"),
    );
    fleet_of(&format!("{tag}{}", extra.len()), &text)
}

/// The fleet file `text`, run for its table and its JSON (through a scratch file named by
/// `tag`).
fn fleet_of(tag: &str, text: &str) -> (String, Value) {
    let file = std::env::temp_dir().join(format!("hcasim-{tag}-{}.toml", std::process::id()));
    std::fs::write(&file, text).expect("a scratch file");
    let path = file.to_str().expect("utf-8");
    let table = hcasim(&["fleet", path]);
    let doc = json_of(&hcasim(&["fleet", path, "--json"]));
    let _ = std::fs::remove_file(&file);
    (String::from_utf8_lossy(&table.stdout).into_owned(), doc)
}

/// `small.toml` with its hosts booting from SAN through their firmware: each boot disk is
/// logged in by the firmware first (the table's row and the JSON's `firmware`), the target
/// takes a login more a host, and the power-on is back later by the OS's load at least.
#[test]
fn a_power_on_through_the_boot_firmware_logs_every_boot_disk_in_twice() {
    let run = |extra: &str| small_with("firmware", extra);
    let (table, doc) = run("\nfirmware_boot_ms = 5000");
    let (plain_table, plain) = run("");
    every_run_keeps_the_fleet_guarantees(&doc);
    assert!(
        table.contains("firmware logins (retries, boots failed)"),
        "{table}"
    );
    assert!(!plain_table.contains("firmware logins"), "{plain_table}");
    let fw = &doc["runs"][0]["firmware"];
    assert_eq!(
        (&fw["logins"], &fw["boot_failures"]),
        (&100.into(), &0.into()),
        "{fw}"
    );
    assert!(plain["runs"][0]["firmware"].is_null());
    let accepted = |d: &Value| f(&d["runs"][0]["targets"][0]["accepted"]);
    assert_eq!(accepted(&doc), accepted(&plain) + 100.0);
    let power = |d: &Value| d["runs"][0]["faults"][0].clone();
    let (with, without) = (power(&doc), power(&plain));
    assert_eq!(
        (&with["kind"], &with["back"]),
        (&"power_on".into(), &100.into())
    );
    assert!(
        f(&with["all_back_ms"]) >= f(&without["all_back_ms"]) + 5_000.0,
        "{with} {without}"
    );
    assert!(
        f(&with["outage_ms"]) >= f(&fw["last_os_start_ms"]),
        "{with} {fw}"
    );
}

/// `small.toml` on a Linux target (neither limit given): it refuses no login, serves them
/// one at a time (the table's row says so), and the run keeps every guarantee.
#[test]
fn a_target_with_no_limits_is_the_linux_one_and_refuses_no_login() {
    let small = std::fs::read_to_string(fleet_file("small.toml")).expect("small.toml");
    let text = small
        .replace("login_concurrency = 8\nlogins_per_second = 50\n", "")
        .replace("hosts = 100", "hosts = 100\ncompare = [\"backoff\"]");
    let (table, doc) = fleet_of("srpt", &text);
    assert!(table.contains("one at a time; waited"), "{table}");
    every_run_keeps_the_fleet_guarantees(&doc);
    let t = &doc["runs"][0]["targets"][0];
    assert_eq!(
        (&t["queues"], &t["refused_busy"], &t["refused_rate"]),
        (&true.into(), &0.into(), &0.into()),
        "{t}"
    );
    assert!(
        f(&t["queued"]) > 0.0 && f(&t["longest_wait_ms"]) > 0.0,
        "{t}"
    );
    assert_eq!(doc["runs"][0]["logins_answered_late"], 0);
}

/// `small.toml` with srp_daemon on every port: its rescans in the table and the JSON, eight
/// SA queries each (two ports, one target), and the SA served more than without them.
#[test]
fn srp_daemon_on_every_host_loads_the_sa() {
    let run = |extra: &str| small_with("daemon", extra);
    let (table, doc) = run("\nsrp_daemon_rescan_ms = 20000");
    let (_, plain) = run("");
    every_run_keeps_the_fleet_guarantees(&doc);
    assert!(table.contains("srp_daemon rescans"), "{table}");
    let d = &doc["runs"][0]["srp_daemon"];
    assert!(plain["runs"][0]["srp_daemon"].is_null());
    // Two ports, one target: eight queries a rescan; a hundred hosts, each at its port's
    // first Active, every 20 s after (twice more in the minute), and after the flap.
    assert_eq!(f(&d["queries"]), 8.0 * f(&d["rescans"]), "{d}");
    assert!(f(&d["rescans"]) >= 400.0, "{d}");
    assert_eq!(d["rescan_ms"], 20_000.0);
    let answered = |x: &Value| f(&x["runs"][0]["sa"]["answered"]);
    assert!(answered(&doc) > answered(&plain), "{d}");
}

/// `small.toml` on a fabric whose transport rides 15 s (`local_ack_timeout = 19`): its
/// 500 ms link flap is ridden by every disk (the table's row and the JSON's `paths_ridden`),
/// with no login; under the default transport, none is, and the table has no such row.
#[test]
fn a_link_flap_the_transport_rides_costs_no_login() {
    let run = |extra: &str| small_with("ride", extra);
    let (table, doc) = run("\nlocal_ack_timeout = 19");
    let (plain_table, plain) = run("");
    assert!(!plain_table.contains("paths kept"), "{plain_table}");
    every_run_keeps_the_fleet_guarantees(&doc);
    assert!(
        table.contains("paths kept through the flap (no login)"),
        "{table}"
    );
    let flap = |d: &Value| d["runs"][0]["faults"][2].clone();
    let (ridden, not) = (flap(&doc), flap(&plain));
    assert_eq!(
        (&ridden["kind"], &not["kind"]),
        (&"link_flap".into(), &"link_flap".into())
    );
    // A hundred hosts, two disks each: every one rode the flap.
    assert_eq!(
        (&ridden["paths_ridden"], &not["paths_ridden"]),
        (&200.into(), &0.into())
    );
    assert_eq!(ridden["back"], ridden["hosts"], "{ridden}");
    assert!(
        f(&ridden["all_back_ms"]) < f(&not["all_back_ms"]),
        "{ridden} {not}"
    );
    let accepted = |d: &Value| f(&d["runs"][0]["targets"][0]["accepted"]);
    assert!(accepted(&doc) < accepted(&plain), "no login for the flap");
}

/// Every fault the file names appears in the report, in order. One that takes no host's path
/// (a target restart while every disk is still logging in at power-on, an SA overload) says
/// it had no host to recover, with no ratio, in the table and in the JSON, instead of "back
/// after 0 s, 0.00x the minimum" or nothing at all.
#[test]
fn a_fault_with_no_host_to_recover_is_listed_and_says_so() {
    let small = std::fs::read_to_string(fleet_file("small.toml")).expect("small.toml");
    let text = format!(
        "{small}\n[[fleet.events]]\nat_ms = 0\nkind = \"target_restart\"\ntarget = 0\n\
         down_ms = 100\n\n[[fleet.events]]\nat_ms = 30000\nkind = \"sa_overload\"\n\
         down_ms = 1000\n"
    );
    let (table, doc) = fleet_of("nohost", &text);
    assert!(table.contains("no host to recover"), "{table}");
    assert!(
        table.contains("the SA answers nothing at 30.000 s"),
        "{table}"
    );
    let faults = doc["runs"][0]["faults"].as_array().expect("faults");
    let kinds: Vec<&str> = faults.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "power_on",
            "target_restart",
            "target_restart",
            "sa_overload",
            "link_flap"
        ]
    );
    for f in [&faults[1], &faults[3]] {
        assert_eq!(f["hosts"], 0, "{f}");
        assert_eq!(
            (&f["all_back_ms"], &f["over_min"]),
            (&Value::Null, &Value::Null),
            "{f}"
        );
    }
    assert_eq!(faults[3]["down_ms"], 1000.0);
    assert!(faults[2]["over_min"].as_f64() >= Some(1.0), "{}", faults[2]);
}

/// `small.toml` with a trap storm after its flap: leaf 1's first host's cable bounces six
/// times 3 s apart. The switch traps each change, the master sweeps for each (700 ms a
/// sweep of a hundred hosts) until the twelfth, counted past ten within 5 s of the one
/// before: ignored, the switch's bit left set, so the last bounce's port waits for the
/// master's timer, 10 s after the last sweep. The table and the JSON say so; the run holds.
#[test]
fn a_trap_storm_is_swept_until_the_master_ignores_it_and_its_port_waits_for_the_timer() {
    let small = std::fs::read_to_string(fleet_file("small.toml")).expect("small.toml");
    let text = small
        .replace("duration_ms = 60000", "duration_ms = 120000")
        .replace("hosts = 100", "hosts = 100\ncompare = [\"backoff\"]")
        + "\n[[fleet.events]]\nat_ms = 45000\nkind = \"trap_storm\"\nleaf = 1\ndown_ms = 100\n\
           every_ms = 3000\nbounces = 6\n";
    let (table, doc) = fleet_of("storm", &text);
    every_run_keeps_the_fleet_guarantees(&doc);
    #[cfg(unix)]
    super::json_schema::assert_conforms("a fleet with a trap storm", &doc);
    for run in doc["runs"].as_array().expect("runs") {
        assert_eq!(run["held"], true, "{run}");
        let t = &run["trap_storm"];
        assert_eq!(
            (
                t["changes"].as_u64(),
                t["traps"].as_u64(),
                t["ignored"].as_u64(),
                t["sweeps"].as_u64()
            ),
            (Some(12), Some(12), Some(1), Some(12)),
            "{t}"
        );
        let storm = &run["faults"][3];
        assert_eq!(
            (
                storm["kind"].as_str(),
                storm["leaf"].as_u64(),
                storm["hosts"].as_u64(),
                storm["back"].as_u64()
            ),
            (Some("trap_storm"), Some(1), Some(1), Some(1)),
            "{storm}"
        );
        // From the last bounce: its sweep's 700 ms, the timer's 10 s, then 500 ms.
        assert_eq!(f(&storm["outage_ms"]), 11_200.0, "{storm}");
        assert_eq!(
            (storm["every_ms"].as_f64(), storm["bounces"].as_u64()),
            (Some(3_000.0), Some(6))
        );
        // A leaf-mate trained just as that sweep began waits the timer out.
        assert!(f(&t["longest_leaf_wait_ms"]) >= 10_699.0, "{t}");
    }
    assert!(
        table.contains("trap storm: traps (ignored), heavy sweeps"),
        "{table}"
    );
    assert!(table.contains("12 (1), 12"), "{table}");
    // A fleet with no Linux initiators says so with a null.
    assert_eq!(doc["runs"][0]["linux_initiators"], Value::Null);
}

/// `small.toml` with ten Linux initiators of four channels beside its hosts: every channel
/// is a login its target serves (the JSON's `linux_initiators`, the table's rows); its array
/// (8 at once, 50 a second) refuses some, each made again later, and every one is up by
/// the end.
#[test]
fn linux_initiators_beside_the_hosts_log_in_every_channel() {
    // Long enough for a first login the array refused to be made again a minute later.
    let small = std::fs::read_to_string(fleet_file("small.toml")).expect("small.toml");
    let text = small
        .replace("duration_ms = 60000", "duration_ms = 150000")
        .replace(
            "hosts = 100",
            "hosts = 100\ncompare = [\"backoff\"]\nlinux_initiators = 10\nlinux_ch_count = 4",
        );
    let (table, doc) = fleet_of("linux", &text);
    every_run_keeps_the_fleet_guarantees(&doc);
    #[cfg(unix)]
    super::json_schema::assert_conforms("a fleet with Linux initiators", &doc);
    let run = &doc["runs"][0];
    assert_eq!(run["held"], true, "{run}");
    let l = &run["linux_initiators"];
    assert_eq!(
        (
            l["hosts"].as_u64(),
            l["ch_count"].as_u64(),
            l["up"].as_u64()
        ),
        (Some(10), Some(4), Some(10)),
        "{l}"
    );
    // At least two rounds' worth of channels: the flap drops every initiator, each logs in
    // again after it.
    assert!(l["channels"].as_u64() >= Some(2 * 40), "{l}");
    assert!(l["failed"].as_u64() > Some(0), "{l}");
    assert!(
        table.contains("Linux initiators: channels (failed logins, removed)"),
        "{table}"
    );
}
