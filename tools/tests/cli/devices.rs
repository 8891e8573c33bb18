//! Several adapters served at once (`hcactl --device NAME`, `hcactl devices`) and the
//! fabric's faults given by IOCTL, against a live `hcasim serve` over the real sockets.
#![cfg(unix)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::common;
use common::{json, text, Server};

fn status(server: &Server, device: &str) -> Value {
    json(&server.ctl(&["--device", device, "--json", "status"]))
}

fn port_states(s: &Value) -> Vec<&str> {
    s["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["state"].as_str().expect("state"))
        .collect()
}

#[test]
fn each_adapter_of_a_multipath_host_is_its_own_device() {
    let mut server = Server::start_args("devices", &["--multipath"], &[]);
    let base = server.socket.clone();
    let listed = json(&server.ctl(&["--json", "devices"]));
    assert_eq!(listed["schema"], "hcactl.devices/1");
    let rows: Vec<(&str, bool, &str)> = listed["devices"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| {
            (
                d["device"].as_str().expect("named"),
                d["default"].as_bool().expect("default"),
                d["state"].as_str().expect("answered"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("hca0", true, "Operational"),
            ("hca1", false, "Operational")
        ]
    );
    let human = text(&server.ctl(&["devices"]));
    assert!(human.contains("hca1") && human.contains(".hca1"), "{human}");

    // Two adapters, two identities; PATH itself is the first.
    let (a, b) = (status(&server, "hca0"), status(&server, "hca1"));
    let health = json(&server.ctl(&["--device", "hca1", "--json", "health"]));
    assert_eq!(health["state"], "Healthy");
    assert_ne!(a["identity"]["node_guid"], b["identity"]["node_guid"]);
    let default = json(&server.ctl(&["--json", "status"]));
    assert_eq!(default["identity"], a["identity"]);

    // A cable pull on one adapter's port, given by IOCTL, shows at once.
    let pulled = server.ctl(&[
        "--device",
        "hca0",
        "inject",
        "port_down",
        "--port",
        "2",
        "--duration-ms",
        "60000",
    ]);
    assert_eq!(pulled.status.code(), Some(0), "{}", text(&pulled));
    assert_eq!(port_states(&status(&server, "hca0")), ["Active", "Down"]);
    assert_eq!(port_states(&status(&server, "hca1")), ["Active", "Active"]);

    // A reset of one adapter is that adapter's alone.
    let reset = server.ctl(&["--device", "hca1", "reset", "--forced", "--wait"]);
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));
    assert_eq!(status(&server, "hca1")["epoch"].as_u64(), Some(2));
    assert_eq!(status(&server, "hca0")["epoch"].as_u64(), Some(1));
    // hca0's cable is still out (for a minute): the reset of hca1 did not touch it.
    assert_eq!(port_states(&status(&server, "hca0")), ["Active", "Down"]);
    let clients = json(&server.ctl(&["--device", "hca1", "--json", "clients"]));
    let on_hca1 = clients["clients"].as_array().expect("clients").len();
    let clients = json(&server.ctl(&["--device", "hca0", "--json", "clients"]));
    assert!(
        clients["clients"].as_array().expect("clients").len() > on_hca1,
        "hca0 carries IPoIB and the data LUN as well as its path of the boot disk"
    );

    // A device that is not there, or a name that is no device name: usage errors.
    let none = server.ctl(&["--device", "hca7", "status"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none).contains("hcactl devices"), "{}", text(&none));
    let bad = server.ctl(&["--device", "../hca0", "status"]);
    assert_eq!(bad.status.code(), Some(2));

    // Every socket made is removed at the end, and only those.
    let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    assert!(server.child.wait().expect("exits").success());
    for name in ["h", "hca0", "hca1"] {
        let path = match name {
            "h" => base.clone(),
            n => hcactl::device::socket_of(&base, n),
        };
        assert!(!path.exists(), "{} left behind", path.display());
    }
}

#[test]
fn a_host_of_one_adapter_is_one_unnamed_device() {
    let server = Server::start("one-device");
    let listed = json(&server.ctl(&["--json", "devices"]));
    let listed = &listed["devices"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["device"], Value::Null);
    assert_eq!(listed[0]["default"], Value::Bool(true));
    assert_eq!(listed[0]["state"], "Operational");
    let named = server.ctl(&["--device", "hca0", "status"]);
    assert_eq!(named.status.code(), Some(2), "{}", text(&named));

    // The health reporter, as `devlink health show` gives it.
    let h = json(&server.ctl(&["--json", "health"]));
    assert_eq!(
        (h["reporter"].as_str(), h["state"].as_str()),
        (Some("fw_fatal"), Some("Healthy"))
    );
    assert_eq!(
        (h["error_count"].as_u64(), h["recover_count"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(h["last_error"], Value::Null);
    assert_eq!(h["auto_recover"], Value::Bool(true));
    assert_eq!(h["ports"].as_array().map(Vec::len), Some(2));
    let text_health = text(&server.ctl(&["health"]));
    assert!(
        text_health.contains("state Healthy") && text_health.contains("grace period"),
        "{text_health}"
    );

    // The fabric's faults by IOCTL: a busy target and a cable pull.
    let busy = server.ctl(&["inject", "target_busy", "--count", "3"]);
    assert_eq!(busy.status.code(), Some(0), "{}", text(&busy));
    let pulled = server.ctl(&[
        "inject",
        "port_down",
        "--port",
        "1",
        "--duration-ms",
        "60000",
    ]);
    assert_eq!(pulled.status.code(), Some(0), "{}", text(&pulled));
    let s = json(&server.ctl(&["--json", "status"]));
    assert_eq!(port_states(&s), ["Down", "Active"]);
    let log = text(&server.ctl(&["log"]));
    assert!(log.contains("port 1 down"), "{log}");

    // Arguments a fault does not take are refused before anything is sent.
    for args in [
        &["inject", "port_down", "--port", "1"][..],
        &["inject", "port_down", "--port", "9", "--duration-ms", "5"],
        &["inject", "catastrophic", "--port", "1"],
        &["inject", "hang", "--count", "2"],
        &["inject", "target_busy", "--count", "0"],
    ] {
        let out = server.ctl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    let after = json(&server.ctl(&["--json", "status"]));
    assert_eq!(after["epoch"], s["epoch"], "nothing was reset");
    assert!(server.stop().success());
}

#[test]
fn a_device_socket_that_cannot_be_made_leaves_nothing_behind() {
    let dir = std::env::temp_dir().join(format!("hcasim-devices-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let base = dir.join("h.sock");
    let taken = hcactl::device::socket_of(&base, "hca1");
    std::fs::write(&taken, "precious").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(["--multipath", "serve", "--socket"])
        .arg(&base)
        .output()
        .expect("hcasim runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("adapter hca1") && err.contains("not a socket"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&taken).expect("kept"), "precious");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        left,
        [Path::new("h.sock.hca1").as_os_str()],
        "only the file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
