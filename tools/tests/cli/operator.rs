//! The operator's commands against a live `hcasim serve` over the real socket: the last
//! reset in `status`, `resets`, a flight recorder that names clients and reasons, `log`'s
//! filters and structured JSON, `dump` and reading it back offline, `status --watch`.
#![cfg(unix)]

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common;
use common::{json, text, Server};

/// A boot disk and a client that never answers RESET, with a short quiesce deadline.
const SCENARIO: &str = r#"
name = "operator"
seed = 3
duration_ms = 600000

[policy]
quiesce_deadline_ms = 300

[[clients]]
name = "boot"
kind = "bootdisk"
iops = 500
queue_depth = 8

[[clients]]
name = "wedged"
kind = "custom"
never_ack = true
"#;

fn server(tag: &str) -> Server {
    let dir = std::env::temp_dir().join(format!("hcabus-operator-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let scenario = dir.join("operator.toml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let s = Server::start_with(tag, &["--scenario", scenario.to_str().expect("utf-8")]);
    let _ = std::fs::remove_dir_all(&dir);
    s
}

fn lines(o: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// One JSON document per line.
fn json_lines(o: &std::process::Output) -> Vec<Value> {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    lines(o)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The records of `log --json`: every line an `hcactl.log/1` document, the records first,
/// then one summary line.
fn log_records(o: &std::process::Output) -> Vec<Value> {
    let mut all = json_lines(o);
    assert!(all.iter().all(|v| v["schema"] == "hcactl.log/1"), "{all:?}");
    let summary = all.pop().expect("a summary line");
    assert_eq!(summary["type"], "summary", "{summary}");
    assert_eq!(summary["shown"], all.len(), "{summary}");
    assert!(all.iter().all(|v| v["type"] == "record"), "{all:?}");
    all
}

#[test]
fn a_forced_reset_is_told_with_its_reason_phases_and_forced_client() {
    let server = server("reason");
    let reset = server.ctl(&["reset", "--forced", "--reason", "maintenance 42", "--wait"]);
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));

    let status = text(&server.ctl(&["status"]));
    for said in [
        "last reset   #1 e1 admin_forced (\"maintenance 42\"): Restored, total ",
        "phases: quiesce 300ms",
        "hardware: 1 soft reset(s); 1 request(s) served; barrier of 3; 0 PnP operation(s)",
        "forced: wedged",
    ] {
        assert!(status.contains(said), "{said:?} in:\n{status}");
    }
    let s = json(&server.ctl(&["--json", "status"]));
    let last = &s["last_reset"];
    assert_eq!(last["admin_reason"], "maintenance 42");
    assert_eq!(last["forced_names"], serde_json::json!(["wedged"]));
    assert!(
        last["hw_reset_us"].as_u64().is_some_and(|us| us > 0),
        "{last}"
    );

    let r = json(&server.ctl(&["--json", "resets"]));
    assert_eq!(r["total"], 1);
    assert_eq!(r["resets"][0], *last, "status shows the newest summary");

    let log = server.ctl(&["log"]);
    let said = text(&log);
    assert!(said.contains("admin_reset: \"maintenance 42\""), "{said}");
    assert!(
        said.contains("client 'wedged' (#2.0) unresponsive at deadline: forced"),
        "{said}"
    );
    assert!(said.contains("RESET -> 'boot' (#1.0) (e1)"), "{said}");
    let trailer = lines(&log).pop().expect("a trailer");
    assert!(
        trailer.starts_with("-- ") && trailer.contains(" 0 dropped"),
        "{trailer}"
    );
}

#[test]
fn log_filters_and_structured_json_work_alike_on_the_bus_and_on_a_dump() {
    let server = server("dump");
    let reset = server.ctl(&[
        "reset",
        "--forced",
        "--reason",
        "post-mortem test",
        "--wait",
    ]);
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));

    let forced = log_records(&server.ctl(&["--json", "log", "--kind", "unresponsive"]));
    assert_eq!(forced.len(), 1, "{forced:?}");
    let f = &forced[0];
    assert_eq!(
        (&f["kind"], &f["client"]["name"]),
        (&"unresponsive".into(), &"wedged".into())
    );
    assert!(
        f["seq"].is_u64() && f["at_us"].is_u64() && f["count"] == 1,
        "{f}"
    );
    let wedged = lines(&server.ctl(&["log", "--client", "wedged"]));
    assert!(wedged.len() > 2, "{wedged:?}");
    assert!(
        wedged[..wedged.len() - 1]
            .iter()
            .all(|l| l.contains("'wedged'")),
        "{wedged:#?}"
    );
    let bad = server.ctl(&["log", "--kind", "nonsense"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad).contains("not a kind of record (kinds: transition,"),
        "{}",
        text(&bad)
    );

    let file = server.dir.join("post-mortem.json");
    let path = file.to_str().expect("utf-8");
    let dumped = server.ctl(&["dump", "-o", path]);
    assert_eq!(dumped.status.code(), Some(0), "{}", text(&dumped));
    let dump: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("the dump")).expect("JSON");
    assert_dump_holds_the_bus(&dump);
    let records = dump["log"]["records"].as_array().expect("records");
    assert!(records
        .iter()
        .all(|r| r["kind"].is_string() && r["seq"].is_u64()));

    // Offline: the same filters over the dump give the same records.
    let offline =
        log_records(&server.ctl(&["--json", "log", "--input", path, "--kind", "unresponsive"]));
    assert_eq!(offline, forced);
    let all = server.ctl(&["log", "--input", path]);
    let mut got = lines(&all);
    let trailer = got.pop().expect("trailer");
    let want: Vec<&str> = records.iter().filter_map(|r| r["text"].as_str()).collect();
    assert_eq!(got.len(), want.len());
    for (line, record) in got.iter().zip(&records[..]) {
        // The wall-clock time first, from the dump's own time zero: the one the bus gave.
        let at = record["at"].as_str().expect("a live bus has a wall clock");
        let text = record["text"].as_str().expect("text");
        assert_eq!(*line, format!("{at}  {text}"));
    }
    assert!(trailer.starts_with(&format!(
        "-- {} of {} record(s) shown",
        want.len(),
        want.len()
    )));

    dumps_are_kept_and_only_dumps_read(&server, &file, path);
}

/// What a dump of the "dump" server holds: its format, state, policy, health, clients and
/// the administrator's reason of its reset.
fn assert_dump_holds_the_bus(dump: &Value) {
    assert_eq!(
        (&dump["schema"], &dump["format"], &dump["version"]),
        (&"hcactl.dump/1".into(), &"hcabus-dump".into(), &2.into())
    );
    assert_eq!(dump["state"]["state"], "Operational");
    assert_eq!(dump["policy"]["quiesce_deadline_ms"], 300);
    assert_eq!(dump["health"]["reporter"], "fw_fatal");
    let names: Vec<&str> = dump["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["ibal", "boot", "wedged"]);
    assert_eq!(
        dump["resets"]["summaries"][0]["admin_reason"],
        "post-mortem test"
    );
}

/// A dump never replaces a file, and only dumps are read back.
fn dumps_are_kept_and_only_dumps_read(server: &Server, file: &std::path::Path, path: &str) {
    let before = std::fs::read(file).expect("the dump");
    let again = server.ctl(&["dump", "-o", path]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert_eq!(
        std::fs::read(file).expect("kept"),
        before,
        "not overwritten"
    );
    let other = server.dir.join("other.json");
    std::fs::write(&other, "{\"format\": \"something-else\"}").expect("write");
    let refused = server.ctl(&["log", "--input", other.to_str().expect("utf-8")]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused).contains("not an hcabus-dump file"),
        "{}",
        text(&refused)
    );
    let missing = server.ctl(&["log", "--input", "/nonexistent/dump.json"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn status_watch_looks_again_until_its_count() {
    let server = server("watch");
    let start = Instant::now();
    let looks = json_lines(&server.ctl(&[
        "--json",
        "status",
        "--watch",
        "--interval-ms",
        "10",
        "--count",
        "3",
    ]));
    assert_eq!(looks.len(), 3);
    assert!(looks.iter().all(|v| v["state"] == "Operational"));
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "it ended by itself"
    );
    let text_looks = server.ctl(&["status", "--watch", "--interval-ms", "10", "--count", "2"]);
    let out = text(&text_looks);
    assert_eq!(out.matches("state        Operational").count(), 2, "{out}");
    let refused = server.ctl(&["status", "--count", "2"]);
    assert_eq!(refused.status.code(), Some(2), "--count needs --watch");
}

/// `hcactl dump --bundle`: none kept before a failure (said, with the command that takes one
/// now, and no file made); `--now` writes one; a reset that fails keeps one, which the file
/// holds as the driver gave it; a file already there is never replaced.
#[test]
fn a_failed_recovery_leaves_a_bundle_that_dump_writes() {
    use hcabus::coordinator::bundle::{read_bundle, BundleCause};
    use hcabus::types::{FailReason, State};
    let server = server("bundle");
    let kept = server.dir.join("kept.bundle");
    let kept_path = kept.to_str().expect("utf-8");
    let none = server.ctl(&["dump", "--bundle", kept_path]);
    assert_eq!(none.status.code(), Some(1), "{}", text(&none));
    assert!(
        text(&none).contains("STATUS_NOT_FOUND") && text(&none).contains("--bundle FILE --now"),
        "{}",
        text(&none)
    );
    assert!(!kept.exists(), "no file for no bundle");

    let now = server.dir.join("now.bundle");
    let taken = server.ctl(&["dump", "--bundle", now.to_str().expect("utf-8"), "--now"]);
    assert_eq!(taken.status.code(), Some(0), "{}", text(&taken));
    assert!(
        text(&taken).contains("a bundle taken on demand"),
        "{}",
        text(&taken)
    );
    let b = read_bundle(&std::fs::read(&now).expect("written")).expect("a bundle");
    assert_eq!(
        (b.cause(), b.state()),
        (Some(BundleCause::OnDemand), Some(State::Operational))
    );

    // Every assertion of the next reset fails: the device ends Failed.
    let fails = server.ctl(&["inject", "reset_fails", "--count", "64"]);
    assert_eq!(fails.status.code(), Some(0), "{}", text(&fails));
    let reset = server.ctl(&["reset", "--forced", "--reason", "bundle test"]);
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));
    let deadline = Instant::now() + Duration::from_secs(120);
    let dumped = loop {
        let o = server.ctl(&["dump", "--bundle", kept_path]);
        if o.status.code() == Some(0) || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(dumped.status.code(), Some(0), "{}", text(&dumped));
    assert!(
        text(&dumped).contains("kept when the device ended Failed"),
        "{}",
        text(&dumped)
    );
    let bytes = std::fs::read(&kept).expect("written");
    let b = read_bundle(&bytes).expect("a bundle");
    assert_eq!(
        (b.cause(), b.state(), b.fail_reason()),
        (
            Some(BundleCause::Failed),
            Some(State::Failed),
            Some(FailReason::HardwareDead)
        )
    );
    assert!(b.records.iter().any(|r| r.name.as_str() == "bundle test"));
    let again = server.ctl(&["dump", "--bundle", kept_path]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert_eq!(std::fs::read(&kept).expect("kept"), bytes, "not replaced");
}

/// `hcasim replay` of the bundles hcactl wrote: the one kept at the failure (an injection,
/// an administrator's reset, every assertion refused) and one taken on demand each replay
/// to the same records; the scenario goes to a new file and never over one; a file that is
/// not a bundle is refused with exit 2.
#[test]
fn the_bundles_hcactl_writes_replay_in_the_simulator() {
    let server = server("replay");
    let dir = &server.dir;
    let path = |name: &str| dir.join(name).to_str().expect("utf-8").to_string();
    let now = server.ctl(&["dump", "--bundle", &path("now.bundle"), "--now"]);
    assert_eq!(now.status.code(), Some(0), "{}", text(&now));
    for args in [
        &["inject", "reset_fails", "--count", "64"][..],
        &["reset", "--forced", "--reason", "replay test"],
    ] {
        let o = server.ctl(args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let kept = loop {
        let o = server.ctl(&["dump", "--bundle", &path("kept.bundle")]);
        if o.status.code() == Some(0) || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(kept.status.code(), Some(0), "{}", text(&kept));
    // The server's directory (the bundles' too) lasts as long as it does: it serves on.

    let hcasim = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hcasim"))
            .args(args)
            .output()
            .expect("hcasim runs")
    };
    let scenario = path("kept.toml");
    let o = hcasim(&["replay", &path("kept.bundle"), "--scenario", &scenario]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("reset_fails (count = 64)"), "{out}");
    assert!(out.contains("admin_reset"), "{out}");
    assert!(
        out.contains("kind by kind and in order") && out.contains("it ends Failed"),
        "{out}"
    );
    let written = std::fs::read_to_string(&scenario).expect("the scenario written");
    assert!(
        written.contains("fault = \"reset_fails\"\ncount = 64"),
        "{written}"
    );
    // The scenario written runs as any other.
    let run = hcasim(&["run", &scenario]);
    assert!(text(&run).contains("Failed"), "{}", text(&run));

    let again = hcasim(&["replay", &path("kept.bundle"), "--scenario", &scenario]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert_eq!(
        std::fs::read_to_string(&scenario).expect("kept"),
        written,
        "not replaced"
    );

    let o = hcasim(&["replay", &path("now.bundle")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("it ends Operational"), "{}", text(&o));

    let o = hcasim(&["replay", &scenario]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a hcabus bundle"), "{}", text(&o));
}
