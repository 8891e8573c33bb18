//! `hcactl maintain` against a live `hcasim --multipath serve`: each adapter in turn by a
//! planned reset, the boot disk (a path through each) never without a path; a last-path veto
//! waited out, or, past the bound, the run stopped naming the device and the reason.
#![cfg(unix)]

use super::common;
use common::{json, text, Server};

/// A number the server's closing report gives after `label` (`"no path for "` -> 0).
fn report_field<'a>(report: &'a str, line_has: &str, label: &str) -> &'a str {
    let line = report
        .lines()
        .find(|l| l.contains(line_has))
        .unwrap_or_else(|| panic!("no {line_has:?} in:\n{report}"));
    let at = line.find(label).expect("label") + label.len();
    line[at..].split([',', ' ']).next().unwrap_or_default()
}

/// `args` to `device` of `server`.
fn on(server: &Server, device: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--device", device];
    all.extend_from_slice(args);
    server.ctl(&all)
}

/// Makes `device` Failed: its forced reset fails every attempt.
fn fail(server: &Server, device: &str) {
    let injected = on(server, device, &["inject", "reset_fails", "--count", "4"]);
    assert_eq!(injected.status.code(), Some(0), "{}", text(&injected));
    let failed = on(server, device, &["reset", "--forced", "--wait"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
}

#[test]
fn maintain_resets_every_adapter_in_turn_and_the_boot_disk_keeps_a_path() {
    let server = Server::start_args("maintain", &["--multipath"], &[]);
    let out = server.ctl(&["maintain"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    for device in ["hca0", "hca1"] {
        assert!(
            said.contains(&format!("{device}: e1 Restored")),
            "{device}: {said}"
        );
        let s = json(&server.ctl(&["--device", device, "--json", "status"]));
        assert_eq!(s["epoch"], 2, "{device}");
        assert_eq!(
            s["recovering"],
            serde_json::Value::Null,
            "{device}: ports back"
        );
        assert_eq!(s["last_reset"]["reason"], "admin_planned", "{device}");
    }
    // hca1's reset was asked only once hca0's ports were back.
    let hca0 = said.find("hca0:").expect("hca0 first");
    assert!(said.find("hca1:").is_some_and(|i| i > hca0), "{said}");
    let (status, report) = server.stop_report();
    assert!(status.success());
    assert_eq!(
        report_field(&report, "bootdisk", "no path for "),
        "0us",
        "{report}"
    );
    assert!(report.contains(" 0 lost, 0 duplicated"), "{report}");
    assert!(report.contains(", 0 failed ("), "{report}");
    assert!(!report.contains("PAGING I/O FAILED"), "{report}");
}

#[test]
fn a_last_path_veto_is_waited_out_and_past_the_bound_stops_naming_device_and_reason() {
    let server = Server::start_args("maintain-veto", &["--multipath"], &[]);
    // hca1's port 1 (the boot disk's path) out for 1.5 s: hca0's reset is refused until the
    // path is back, then goes ahead.
    let pull = |ms: &str| {
        server.ctl(&[
            "--device",
            "hca1",
            "inject",
            "port_down",
            "--port",
            "1",
            "--duration-ms",
            ms,
        ])
    };
    assert_eq!(pull("1500").status.code(), Some(0));
    let out = server.ctl(&["maintain", "--devices", "hca0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("last-path veto(es) waited out"),
        "{}",
        text(&out)
    );
    // Out for ten minutes: past the bound, the run stops, naming the device and the reason.
    assert_eq!(pull("600000").status.code(), Some(0));
    let out = server.ctl(&["maintain", "--devices", "hca0,hca1", "--timeout", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("hca0: still refused after 2 s"), "{said}");
    assert!(said.contains("last path: hca1 port 1 down"), "{said}");
    assert_eq!(
        json(&server.ctl(&["--device", "hca1", "--json", "status"]))["epoch"],
        1,
        "hca1 was never reset: the run stopped at hca0"
    );
    // A device that is not there is a usage error, before anything is reset.
    let out = server.ctl(&["maintain", "--devices", "hca9"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no device \"hca9\""), "{}", text(&out));
    assert!(server.stop().success());
}

/// A Failed adapter is not maintained: a planned reset of it is refused (RESTART is the way
/// out), and `maintain` stops there, naming the device and the command that brings it back,
/// instead of restoring it by a planned reset and calling that maintenance.
#[test]
fn maintain_stops_at_a_failed_device_naming_the_restart() {
    let server = Server::start_args("maintain-failed", &["--multipath"], &[]);
    let on_hca1 = |args: &[&str]| on(&server, "hca1", args);
    fail(&server, "hca1");
    assert_eq!(json(&on_hca1(&["--json", "status"]))["state"], "Failed");
    let planned = on_hca1(&["reset", "--planned"]);
    assert_eq!(planned.status.code(), Some(1), "{}", text(&planned));
    // The hint names the device: `hcactl restart` alone would go to hca0.
    assert!(
        text(&planned)
            .contains("`hcactl --device hca1 restart` (or `hcactl --device hca1 reset --forced`)"),
        "{}",
        text(&planned)
    );
    let restart0 = server.ctl(&["--device", "hca0", "restart"]);
    assert!(
        text(&restart0).contains("`hcactl --device hca0 reset` resets a working one"),
        "{}",
        text(&restart0)
    );
    let out = server.ctl(&["maintain", "--devices", "hca1,hca0"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("hca1 is Failed"), "{said}");
    assert!(said.contains("hcactl --device hca1 restart"), "{said}");
    assert!(!said.contains("Restored"), "nothing was reset: {said}");
    assert_eq!(json(&on_hca1(&["--json", "status"]))["state"], "Failed");
    assert_eq!(
        json(&server.ctl(&["--device", "hca0", "--json", "status"]))["epoch"],
        1,
        "the run stopped at hca1, before hca0"
    );
    assert!(server.stop().success());
}

/// hca1 Failed, then (on another host) Removed: hca0's planned reset is vetoed by the boot
/// disk's last-path guard, whose other path is on hca1. Waiting cannot cure that (only a
/// restart, or a new device, brings hca1 back), so `maintain` stops at the first veto,
/// naming hca1 and what to do, instead of asking again until its timeout (eleven minutes
/// at the default). A Removed device given by name stops the run, named, too.
#[test]
fn maintain_stops_at_once_on_a_veto_that_waiting_cannot_cure() {
    let server = Server::start_args("maintain-incurable", &["--multipath"], &[]);
    fail(&server, "hca1");
    let out = server.ctl(&["maintain"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("hca0: "), "the run stopped at hca0: {said}");
    assert!(said.contains("last path: hca1 port 1 failed"), "{said}");
    assert!(
        said.contains("hca1 is Failed, which waiting cannot cure"),
        "{said}"
    );
    assert!(said.contains("`hcactl --device hca1 restart`"), "{said}");
    assert!(
        !said.contains("still refused after"),
        "not waited out: {said}"
    );
    assert!(server.stop().success());

    let server = Server::start_args("maintain-removed", &["--multipath"], &[]);
    let gone = server.ctl(&["--device", "hca1", "inject", "surprise_removal"]);
    assert_eq!(gone.status.code(), Some(0), "{}", text(&gone));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while json(&server.ctl(&["--device", "hca1", "--json", "status"]))["state"] != "Removed" {
        assert!(
            std::time::Instant::now() < deadline,
            "hca1 was never Removed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = server.ctl(&["maintain", "--devices", "hca0"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("hca1 is Removed (surprise removal)"),
        "{said}"
    );
    assert!(said.contains("waiting cannot cure this veto"), "{said}");
    let out = server.ctl(&["maintain", "--devices", "hca1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("hca1 is Removed (surprise removal)"),
        "{said}"
    );
    assert!(said.contains("maintenance stops here"), "{said}");
    assert!(server.stop().success());
}
