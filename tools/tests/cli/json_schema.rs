//! The JSON contract (docs/json.md): every JSON document hcactl and hcasim print, from every
//! command and every error path, validates against docs/json-schema.json, whose objects
//! admit no key it does not document. Run against a live `hcasim serve`.
#![cfg(unix)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use super::common;
use common::{text, Server};

fn validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/json-schema.json");
    let schema: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("docs/json-schema.json"))
            .expect("the schema is JSON");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("the schema compiles: {e}"))
}

/// Asserts that `doc`, printed by a test elsewhere, validates against the schema: the fleet's
/// objects that only some fleet files fill (a trap storm's, the Linux initiators') are
/// checked where those files run.
pub(super) fn assert_conforms(what: &str, doc: &Value) {
    let errors = errors(&validator(), doc);
    assert!(errors.is_empty(), "{what}: {errors:#?}");
}

/// The first few ways `doc` breaks the schema, each with where.
fn errors(validator: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .take(5)
        .collect()
}

/// Checks every document of `out` (each line one under `lines`) and returns their schemas.
struct Checker {
    validator: jsonschema::Validator,
    seen: BTreeSet<String>,
}

impl Checker {
    fn document(&mut self, what: &str, v: &Value) {
        let errors = errors(&self.validator, v);
        assert!(errors.is_empty(), "{what}: {errors:#?}\n{v:#}");
        let schema = v["schema"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no schema: {v}"));
        self.seen.insert(schema.to_string());
    }

    fn text(&mut self, what: &str, raw: &[u8], lines: bool) {
        let raw = String::from_utf8_lossy(raw);
        let docs: Vec<&str> = if lines {
            raw.lines().filter(|l| !l.trim().is_empty()).collect()
        } else {
            vec![&raw]
        };
        assert!(!docs.is_empty(), "{what}: no JSON printed");
        for doc in docs {
            let v: Value =
                serde_json::from_str(doc).unwrap_or_else(|e| panic!("{what}: {e}: {doc}"));
            self.document(what, &v);
        }
    }

    /// stdout of a command that succeeds.
    fn stdout(&mut self, what: &str, o: &Output, lines: bool) {
        assert_eq!(o.status.code(), Some(0), "{what}: {}", text(o));
        self.text(what, &o.stdout, lines);
    }

    /// stderr of a command that fails with `code`: one error document, nothing on stdout.
    fn error(&mut self, what: &str, o: &Output, code: i32) {
        assert_eq!(o.status.code(), Some(code), "{what}: {}", text(o));
        assert!(o.stdout.is_empty(), "{what}: {}", text(o));
        self.text(what, &o.stderr, false);
    }
}

fn hcasim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(args)
        .output()
        .expect("hcasim runs")
}

#[test]
fn every_json_document_of_hcactl_and_hcasim_validates_against_the_documented_schema() {
    let mut c = Checker {
        validator: validator(),
        seen: BTreeSet::new(),
    };
    let server = Server::start_args("schema", &["--multipath"], &[]);
    let ctl = |args: &[&str]| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        server.ctl(&all)
    };
    // Reads, before and after a reset (a last reset, its ports recovering).
    for args in [
        &["status"][..],
        &["health"],
        &["resets"],
        &["clients"],
        &["devices"],
    ] {
        c.stdout(&args.join(" "), &ctl(args), false);
    }
    c.stdout("policy get", &ctl(&["policy", "get"]), false);
    c.stdout("reset", &ctl(&["reset", "--forced"]), false);
    c.stdout("status during a reset", &ctl(&["status"]), false);
    c.stdout(
        "reset --wait",
        &ctl(&["reset", "--forced", "--wait"]),
        false,
    );
    c.stdout(
        "reset --wait=restored",
        &ctl(&["reset", "--forced", "--wait=restored"]),
        false,
    );
    c.stdout("status recovering", &ctl(&["status"]), false);
    let watch = ctl(&["status", "--watch", "--count", "2", "--interval-ms", "10"]);
    c.stdout("status --watch", &watch, true);
    for args in [&["resets"][..], &["health"], &["clients"], &["devices"]] {
        c.stdout(&args.join(" "), &ctl(args), false);
    }
    c.stdout(
        "policy set",
        &ctl(&["policy", "set", "quiesce_deadline_ms=4000"]),
        false,
    );
    c.stdout(
        "inject",
        &ctl(&["inject", "port_down", "--port", "2", "--duration-ms", "100"]),
        false,
    );
    c.stdout("log", &ctl(&["log"]), true);
    c.stdout(
        "log --kind",
        &ctl(&["log", "--kind", "policy_changed"]),
        true,
    );
    c.stdout("dump", &ctl(&["dump"]), false);
    c.stdout("maintain", &ctl(&["maintain", "--timeout", "60"]), false);
    // Errors: refusals (exit 1), usage and connection (exit 2), a reset that fails.
    c.error("restart refused", &ctl(&["restart"]), 1);
    c.error(
        "policy refused",
        &ctl(&["policy", "set", "quiesce_deadline_ms=0"]),
        1,
    );
    c.error("unknown fault", &ctl(&["inject", "nonsense"]), 2);
    c.error("unknown command", &ctl(&["nonsense"]), 2);
    c.error("unknown device", &ctl(&["--device", "hca9", "status"]), 2);
    c.stdout(
        "inject reset_fails",
        &ctl(&["inject", "reset_fails", "--count", "4"]),
        false,
    );
    // A waited-for reset that fails: its outcome on stdout, the error on stderr.
    let failed = ctl(&["reset", "--forced", "--wait"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    c.text("a reset that fails: outcome", &failed.stdout, false);
    c.text("a reset that fails: error", &failed.stderr, false);
    c.stdout("restart --wait", &ctl(&["restart", "--wait"]), false);
    let dir = server.dir.clone();
    assert!(server.stop().success());
    let gone = dir.join("gone.sock");
    let nobody = Command::new(crate::common::hcactl())
        .args([
            "--json",
            "--socket",
            gone.to_str().expect("utf-8"),
            "status",
        ])
        .output()
        .expect("hcactl runs");
    c.error("no server", &nobody, 2);

    // hcasim: a report of one adapter and of several, and its errors.
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    for file in ["stuck-client.toml", "multipath-failover.toml"] {
        let path = scenarios.join(file);
        let run = hcasim(&["run", path.to_str().expect("utf-8"), "--json"]);
        c.stdout(file, &run, false);
    }
    for file in ["fleet/small.toml", "fleet/rollout.toml"] {
        let fleet = scenarios.join(file);
        let run = hcasim(&["fleet", fleet.to_str().expect("utf-8"), "--json"]);
        c.stdout(file, &run, false);
    }
    // A capacity curve.
    let small = scenarios.join("fleet/small.toml");
    let curve = hcasim(&[
        "fleet",
        small.to_str().expect("utf-8"),
        "--json",
        "--curve",
        "20,40",
    ]);
    c.stdout("a capacity curve", &curve, false);
    // A hunt's report.
    let hunt = hcasim(&["hunt", "--json", "--seeds", "0..20", "--stack-every", "10"]);
    c.stdout("a hunt", &hunt, false);
    // A campaign of several seeds, and the merge of its shards.
    let small = scenarios.join("fleet/small.toml");
    let small = small.to_str().expect("utf-8");
    let campaign = hcasim(&["fleet", small, "--json", "--seeds", "1..3"]);
    c.stdout("a fleet campaign", &campaign, false);
    let shard = std::env::temp_dir().join(format!("hcasim-schema-{}.json", std::process::id()));
    std::fs::write(&shard, &campaign.stdout).expect("write the shard");
    let merged = hcasim(&["fleet-merge", "--json", shard.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&shard);
    c.stdout("a merged campaign", &merged, false);
    c.error(
        "no scenario file",
        &hcasim(&["--json", "run", "/nonexistent.toml"]),
        2,
    );
    c.error(
        "bad argument",
        &hcasim(&["run", "--json", "--bogus", "x"]),
        2,
    );

    let want = [
        "hcactl.clients/1",
        "hcactl.devices/1",
        "hcactl.dump/1",
        "hcactl.error/1",
        "hcactl.health/1",
        "hcactl.injected/1",
        "hcactl.log/1",
        "hcactl.maintain/1",
        "hcactl.policy-set/1",
        "hcactl.policy/1",
        "hcactl.requested/1",
        "hcactl.resets/1",
        "hcactl.status/1",
        "hcactl.wait/1",
        "hcasim.error/1",
        "hcasim.fleet-curve/1",
        "hcasim.fleet/1",
        "hcasim.hunt/1",
        "hcasim.report/1",
    ];
    assert_eq!(
        c.seen.iter().map(String::as_str).collect::<Vec<_>>(),
        want,
        "every document the schema names was printed and checked"
    );
    // And every document the schema names is one of these: none documented and never made.
    let schema: Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/json-schema.json"))
            .expect("schema"),
    )
    .expect("JSON");
    let documented: BTreeSet<&str> = schema["$defs"]
        .as_object()
        .expect("$defs")
        .keys()
        .filter(|k| k.contains('.'))
        .map(String::as_str)
        .collect();
    let printed: BTreeSet<String> = want.iter().map(|w| w.replace("/1", "")).collect();
    assert_eq!(
        documented,
        printed.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
}

/// The schema is strict: a key it does not document, a state spelled another way, a flag
/// list as a string, or a missing schema fails, so the test above proves something.
#[test]
fn the_schema_refuses_undocumented_keys_other_spellings_and_old_shapes() {
    let v = validator();
    let good = serde_json::json!({
        "schema": "hcactl.clients/1",
        "clients": [{ "id": "#0.0", "name": "ibal", "kind": "ibal", "flags": ["BOOT_CRITICAL"],
                      "state": "Active", "in_barrier": false, "last_ack_latency_us": null }]
    });
    assert!(v.is_valid(&good), "{:?}", v.validate(&good).err());
    let mut extra = good.clone();
    extra["clients"][0]["surprise"] = 1.into();
    let mut lower = good.clone();
    lower["clients"][0]["state"] = "active".into();
    let mut old_flags = good.clone();
    old_flags["clients"][0]["flags"] = "BOOT_CRITICAL".into();
    let mut unnamed = good.clone();
    unnamed.as_object_mut().expect("object").remove("schema");
    let bare_list = good["clients"].clone();
    for (why, bad) in [
        ("an undocumented key", extra),
        ("a lower-case state", lower),
        ("flags as a string", old_flags),
        ("no schema", unnamed),
        ("a bare list (the old shape)", bare_list),
    ] {
        assert!(!v.is_valid(&bad), "{why} passed: {bad}");
    }
}
