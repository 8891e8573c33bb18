//! What hcactl refuses before it sends anything, and what it says when the bus refuses,
//! against a live `hcasim serve`: a number out of its option's range, a device or a policy
//! key given twice, a policy that breaks a rule between two keys, an order to a removed
//! device. (Every numeric option's range is walked in hcactl's own tests, `options.rs`.)
#![cfg(unix)]

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common;
use common::{json, text, Server};

fn epoch(server: &Server, device: Option<&str>) -> Value {
    let mut args = vec!["--json", "status"];
    if let Some(d) = device {
        args.splice(0..0, ["--device", d]);
    }
    json(&server.ctl(&args))["epoch"].clone()
}

/// The command: a timeout of 2^64 - 1 seconds sent the reset, then panicked. Now
/// it is a usage error before anything is sent; the longest timeout works.
#[test]
fn a_timeout_out_of_range_is_refused_before_the_reset_is_sent() {
    let server = Server::start("usage-timeout");
    for args in [
        &[
            "reset",
            "--forced",
            "--wait",
            "--timeout",
            "18446744073709551615",
        ][..],
        &["reset", "--forced", "--wait", "--timeout", "86401"],
        &["restart", "--wait", "--timeout", "0"],
        &["maintain", "--timeout", "18446744073709551615"],
    ] {
        let out = server.ctl(args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains("--timeout <SECONDS>"), "{args:?}: {said}");
        assert!(!said.contains("panicked"), "{args:?}: {said}");
    }
    assert_eq!(epoch(&server, None), 1, "nothing was reset");
    let out = server.ctl(&["reset", "--forced", "--wait", "--timeout", "86400"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(epoch(&server, None), 2);
    assert!(server.stop().success());
}

/// `maintain --devices hca1,hca1` reset hca1 twice. Now a usage error naming the device,
/// and nothing is reset.
#[test]
fn a_device_given_twice_is_a_usage_error_naming_it() {
    let server = Server::start_args("usage-twice", &["--multipath"], &[]);
    let out = server.ctl(&["maintain", "--devices", "hca1,hca1"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("\"hca1\" given twice"), "{said}");
    assert_eq!(epoch(&server, Some("hca1")), 1, "hca1 was not reset");
    assert!(server.stop().success());
}

/// `policy set k=100 k=200` kept the last value without a word. Now a usage error naming
/// the key, and nothing changes.
#[test]
fn a_policy_key_given_twice_is_a_usage_error_naming_it() {
    let server = Server::start("usage-key");
    let out = server.ctl(&[
        "policy",
        "set",
        "quiesce_deadline_ms=100",
        "quiesce_deadline_ms=200",
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("quiesce_deadline_ms given twice"), "{said}");
    let p = json(&server.ctl(&["--json", "policy", "get"]));
    assert_eq!(p["quiesce_deadline_ms"], 5000, "nothing changed");
    assert!(server.stop().success());
}

/// `policy set hw_ready_timeout_ms=700000` was refused as "...auto_restart_window_ms: must be
/// at least hw_ready_timeout_ms, or no reset could ": cut, and naming the other key. Now
/// whole, naming the key set, the key it conflicts with and that key's value, in the answer
/// and in the flight record.
#[test]
fn a_policy_refusal_names_the_key_set_and_says_it_whole() {
    let server = Server::start("usage-policy");
    let out = server.ctl(&["policy", "set", "hw_ready_timeout_ms=700000"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "hcactl: refused: policy field hw_ready_timeout_ms: must not exceed \
         auto_restart_window_ms (600000); nothing changed"
    );
    let log = server.ctl(&["--json", "log", "--kind", "refused"]);
    let last = String::from_utf8_lossy(&log.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["type"] == "record")
        .expect("a refused record");
    assert_eq!(
        (&last["call"], &last["key"]),
        (&"set_policy".into(), &"hw_ready_timeout_ms".into()),
        "{last}"
    );
    assert!(server.stop().success());
}

/// An order to a removed device was refused with a bare STATUS_INVALID_DEVICE_REQUEST; each
/// now says the device is Removed.
#[test]
fn an_order_to_a_removed_device_says_the_device_is_removed() {
    let server = Server::start("usage-removed");
    let out = server.ctl(&["inject", "surprise_removal"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let deadline = Instant::now() + Duration::from_secs(20);
    while json(&server.ctl(&["--json", "status"]))["state"] != "Removed" {
        assert!(Instant::now() < deadline, "the device was never Removed");
        std::thread::sleep(Duration::from_millis(20));
    }
    for args in [
        &["reset", "--forced"][..],
        &["reset"],
        &["restart"],
        &["policy", "set", "quiesce_deadline_ms=100"],
        &["inject", "catastrophic"],
    ] {
        let out = server.ctl(args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert!(
            said.contains("STATUS_INVALID_DEVICE_REQUEST (0xC0000010): the device is Removed"),
            "{args:?}: {said}"
        );
    }
    let out = server.ctl(&["--json", "reset"]);
    let e: Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(e["error"]["kind"], "refused");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the device is Removed")),
        "{e}"
    );
    assert!(server.stop().success());
}
