//! `hcactl` against a live `hcasim serve` over the real socket, and malformed frames from a
//! raw client: each gets its status or a closed connection, and the server keeps serving.
#![cfg(unix)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hcabus::ioctl::*;
use serde_json::Value;

use super::common;
use common::{json, text, Server};

/// QUERY_STATE's answer in the ABI version this build speaks.
const STATE_BYTES: u32 = size_of::<StateOut>() as u32;

#[test]
fn hcactl_drives_a_live_simulator_through_resets() {
    let server = Server::start("ctl");
    let mode = std::fs::metadata(&server.socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode");

    let s = json(&server.ctl(&["--json", "status"]));
    assert_eq!(
        (s["state"].as_str(), s["epoch"].as_u64()),
        (Some("Operational"), Some(1))
    );
    assert_eq!(s["last_reset"], Value::Null);
    let human = server.ctl(&["status"]);
    assert!(
        text(&human).contains("state        Operational"),
        "{}",
        text(&human)
    );

    let clients = json(&server.ctl(&["--json", "clients"]));
    let names = names_of(&clients);
    assert_eq!(
        names,
        [
            "ibal",
            "ipoib-port1",
            "ipoib-port2",
            "bootdisk",
            "data-lun",
            "uverbs"
        ]
    );

    // `reset` is planned unless --forced: the boot disk, whose only path is this adapter,
    // refuses it by its last-path guard, and nothing is reset.
    let planned = server.ctl(&["reset", "--reason", "maintenance", "--wait"]);
    assert_eq!(planned.status.code(), Some(1), "{}", text(&planned));
    assert!(
        text(&planned).contains("client 'bootdisk' said: last path: no other path"),
        "{}",
        text(&planned)
    );
    assert_eq!(json(&server.ctl(&["--json", "status"]))["epoch"], 1);
    // --wait=restored: back as soon as the adapter is; the service is not, yet (the default
    // host's fabric takes 3.5 s after the reset).
    let restored = server.ctl(&["reset", "--forced", "--wait=restored"]);
    assert_eq!(restored.status.code(), Some(0), "{}", text(&restored));
    let s = json(&server.ctl(&["--json", "status"]));
    assert_eq!(
        s["recovering"]["waiting_for_ports"],
        serde_json::json!([1, 2]),
        "{s}"
    );
    assert!(
        text(&server.ctl(&["status"])).contains("Operational (recovering: waiting for ports 1, 2)")
    );
    // --wait: until every port that was Active before is Active again.
    let reset = server.ctl(&["reset", "--forced", "--reason", "test", "--wait"]);
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));
    assert!(text(&reset).contains("Restored"), "{}", text(&reset));
    assert!(
        text(&reset).contains("service restored: port(s) 1, 2 Active again"),
        "{}",
        text(&reset)
    );
    assert_eq!(
        json(&server.ctl(&["--json", "status"]))["recovering"],
        Value::Null
    );
    let s = json(&server.ctl(&["--json", "status"]));
    assert_eq!(s["epoch"], 3);
    assert_eq!(s["last_reset"]["outcome"], "Restored");
    assert_eq!(s["last_reset"]["reason"], "admin_forced");

    log_since(&server, &s);
    policy_set_and_refused(&server);

    // A device whose reset fails for good, then restarted by the administrator.
    assert_eq!(
        server
            .ctl(&["inject", "reset_fails", "--count", "4"])
            .status
            .code(),
        Some(0)
    );
    let failed = server.ctl(&["reset", "--forced", "--wait"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    assert!(text(&failed).contains("HardwareDead"));
    assert_eq!(json(&server.ctl(&["--json", "status"]))["state"], "Failed");
    let restarted = server.ctl(&["restart", "--wait"]);
    assert_eq!(restarted.status.code(), Some(0), "{}", text(&restarted));
    let s = json(&server.ctl(&["--json", "status"]));
    assert_eq!(
        (s["state"].as_str(), s["epoch"].as_u64()),
        (Some("Operational"), Some(4))
    );
    let again = server.ctl(&["restart"]);
    assert_eq!(again.status.code(), Some(1), "nothing to restart");
    assert!(text(&again).contains("STATUS_INVALID_DEVICE_REQUEST"));
    assert!(
        text(&again).contains("the device is Operational, not Failed"),
        "a refused restart says why: {}",
        text(&again)
    );
    // The refused policy and restart are the administrator's, counted apart from the
    // clients' refused calls (QUERY_STATE version 6).
    let s = json(&server.ctl(&["--json", "status"]));
    assert_eq!(s["counters"]["admin_refusals"], 2, "{s}");
    assert_eq!(s["counters"]["refusals"], 0, "{s}");
    let human = text(&server.ctl(&["status"]));
    assert!(human.contains("2 administrator request(s)"), "{human}");

    let socket = server.socket.clone();
    let status = server.stop();
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");
    assert!(!socket.exists(), "socket removed on shutdown");
}

/// `hcactl log`: the reset's records, only newer ones with `--since`, and from past the head
/// the bus's head as the next sequence.
fn log_since(server: &Server, s: &Value) {
    let log = server.ctl(&["log"]);
    assert!(
        text(&log).contains("reset of e1 started: admin_forced"),
        "{}",
        text(&log)
    );
    let since = s["log_next_seq"].as_u64().expect("seq").to_string();
    let later = server.ctl(&["log", "--since", &since]);
    assert!(!text(&later).contains("started"), "only newer records");
    // Asked from past the head, the next sequence is the bus's head, not the number asked.
    let past = server.ctl(&["log", "--since", "999999"]);
    assert_eq!(past.status.code(), Some(0), "{}", text(&past));
    let trailer = text(&past);
    let next: u64 = trailer
        .rsplit("next sequence ")
        .next()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("a next sequence in {trailer:?}"));
    let head = json(&server.ctl(&["--json", "status"]))["log_next_seq"].as_u64();
    assert!(
        Some(next) <= head && next < 999_999,
        "{trailer:?}, head {head:?}"
    );
}

/// `hcactl policy`: a value set and read back; one refused with its field named, one a usage
/// error; neither changes anything.
fn policy_set_and_refused(server: &Server) {
    assert_eq!(
        server
            .ctl(&["policy", "set", "quiesce_deadline_ms=1234"])
            .status
            .code(),
        Some(0)
    );
    let p = json(&server.ctl(&["--json", "policy", "get"]));
    assert_eq!(p["quiesce_deadline_ms"], 1234);
    let refused = server.ctl(&["policy", "set", "quiesce_deadline_ms=0"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused)
            .contains("refused: policy field quiesce_deadline_ms: must be greater than zero"),
        "the field is named: {}",
        text(&refused)
    );
    let usage = server.ctl(&["policy", "set", "colour=3"]);
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));
    assert_eq!(
        json(&server.ctl(&["--json", "policy", "get"]))["quiesce_deadline_ms"],
        1234
    );
}

fn frame(code: u32, input: &[u8], cap: u32) -> Vec<u8> {
    let mut f = Vec::new();
    for v in [0x4241_4348u32, code, input.len() as u32, cap] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(input);
    f
}

/// Sends raw bytes, then reads a response; `None` if the server closed the connection.
fn exchange(socket: &Path, bytes: &[u8], close_write: bool) -> Option<(u32, Vec<u8>)> {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(bytes).expect("write");
    if close_write {
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    }
    let mut head = [0u8; 12];
    match s.read(&mut head) {
        Ok(0) | Err(_) => return None,
        Ok(n) if n < 12 => s.read_exact(&mut head[n..]).ok()?,
        Ok(_) => {}
    }
    let status = u32::from_le_bytes(head[4..8].try_into().expect("4"));
    let len = u32::from_le_bytes(head[8..12].try_into().expect("4")) as usize;
    let mut out = vec![0u8; len];
    s.read_exact(&mut out).ok()?;
    Some((status, out))
}

fn query() -> Vec<u8> {
    let mut input = vec![0u8; 8];
    encode_empty(&mut input);
    input
}

#[test]
fn malformed_frames_get_their_status_or_a_closed_connection_and_the_server_keeps_serving() {
    let server = Server::start("frames");
    let socket = server.socket.clone();
    // A client that opens, sends half a frame and goes silent must not stall anyone.
    let mut slow = UnixStream::connect(&socket).expect("connect");
    slow.write_all(&frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES)[..10])
        .expect("half");
    let ok = |s: &Path| {
        let r = exchange(
            s,
            &frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES),
            false,
        );
        assert_eq!(
            r.map(|(st, out)| (st, out.len())),
            Some((0, STATE_BYTES as usize)),
            "still serving"
        );
    };
    ok(&socket);

    let mut wrong_magic = frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES);
    wrong_magic[0] = b'X';
    assert_eq!(
        exchange(&socket, &wrong_magic, false),
        None,
        "wrong magic: closed"
    );
    ok(&socket);

    let truncated = frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES);
    assert_eq!(
        exchange(&socket, &truncated[..20], true),
        None,
        "truncated: closed"
    );
    ok(&socket);

    let mut oversized = frame(IOCTL_HCABUS_QUERY_STATE, &[], STATE_BYTES);
    oversized[8..12].copy_from_slice(&(64 * 1024 + 1u32).to_le_bytes());
    assert_eq!(
        exchange(&socket, &oversized, false),
        None,
        "oversized: closed"
    );
    ok(&socket);

    bad_headers_get_their_status(&socket);
    many_clients_many_requests(&socket);
    drop(slow);
    ok(&socket);
    assert!(server.stop().success());
}

/// Well-formed frames whose IOCTL is bad are answered with its status, not closed.
fn bad_headers_get_their_status(socket: &Path) {
    let status = |bytes: Vec<u8>| exchange(socket, &bytes, false).map(|(s, _)| NtStatus(s));
    assert_eq!(
        status(frame(0x003B_6500, &query(), 160)),
        Some(NtStatus::INVALID_DEVICE_REQUEST),
        "unknown code"
    );
    assert_eq!(
        status(frame(IOCTL_HCABUS_QUERY_STATE, &query(), 100)),
        Some(NtStatus::BUFFER_TOO_SMALL),
        "short output capacity"
    );
    let mut wrong_version = query();
    wrong_version[4..6].copy_from_slice(&(ABI_VERSION + 1).to_le_bytes());
    assert_eq!(
        status(frame(IOCTL_HCABUS_QUERY_STATE, &wrong_version, STATE_BYTES)),
        Some(NtStatus::REVISION_MISMATCH)
    );
    let mut wrong_size = query();
    wrong_size[0] = 12;
    assert_eq!(
        status(frame(IOCTL_HCABUS_QUERY_STATE, &wrong_size, STATE_BYTES)),
        Some(NtStatus::INVALID_BUFFER_SIZE)
    );
}

/// Several requests on one connection, and many connections at once.
fn many_clients_many_requests(socket: &Path) {
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let socket = socket.to_path_buf();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&socket).expect("connect");
                for _ in 0..20 {
                    s.write_all(&frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES))
                        .expect("write");
                    let mut head = [0u8; 12];
                    s.read_exact(&mut head).expect("head");
                    let mut body = [0u8; STATE_BYTES as usize];
                    s.read_exact(&mut body).expect("body");
                    assert_eq!(&head[4..8], &[0, 0, 0, 0]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
}

#[test]
fn write_codes_are_refused_to_another_user() {
    // Needs root to act as another uid; elsewhere the check cannot be arranged here.
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: not root");
        return;
    }
    let server = Server::start("uid");
    // The socket is 0600: open it up so that another user can reach the server at all.
    std::fs::set_permissions(&server.socket, std::fs::Permissions::from_mode(0o666))
        .expect("chmod");
    std::fs::set_permissions(&server.dir, std::fs::Permissions::from_mode(0o755))
        .expect("chmod dir");
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(crate::common::hcactl())
            .arg("--socket")
            .arg(&server.socket)
            .args(args)
            .output()
    };
    let Ok(read) = as_nobody(&["status"]) else {
        eprintln!("skipped: no setpriv");
        return;
    };
    assert_eq!(
        read.status.code(),
        Some(0),
        "reads are allowed: {}",
        text(&read)
    );
    let write = as_nobody(&["reset"]).expect("runs");
    assert_eq!(write.status.code(), Some(1), "{}", text(&write));
    assert!(
        text(&write).contains("STATUS_ACCESS_DENIED (0xC0000022)"),
        "{}",
        text(&write)
    );
    assert!(server.stop().success());
}

#[test]
fn serve_runs_a_scenario_whose_events_fire_in_real_time() {
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/stuck-client.toml");
    let server = Server::start_with(
        "scenario",
        &["--scenario", scenario.to_str().expect("utf-8")],
    );
    let clients = json(&server.ctl(&["--json", "clients"]));
    let names = names_of(&clients);
    assert_eq!(names, ["ibal", "boot", "wedged"]);
    // The catastrophic error at 1 s, a 2 s deadline for the wedged client, 200 ms of
    // hardware reset: epoch 2 a little after 3.2 s of wall time.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = json(&server.ctl(&["--json", "status"]));
        if s["epoch"] == 2 && s["reset_in_progress"] == false {
            assert_eq!(s["last_reset"]["reason"], "catastrophic");
            assert!(s["last_reset"]["quiesce_us"].as_u64() >= Some(2_000_000));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the scenario's reset never finished: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let forced = json(&server.ctl(&["--json", "clients"]));
    assert_eq!(
        forced["clients"][2]["state"], "Active",
        "the forced client got RESET_END too"
    );
    assert!(server.stop().success());
}

/// docs/design.md §5 "Ports" on the live server, with one adapter and with several: a cable pulled by
/// INJECT_FAULT stays out through an administrator's reset. Port 2 trains and is swept again
/// (3.5 s of the default timings); port 1, whose cable is out for ten minutes, stays Down.
/// Before the fix the reset plugged it back in and both came back together.
#[test]
fn a_cable_pulled_on_the_live_server_stays_out_through_a_reset() {
    for (before, device) in [(&[][..], None), (&["--multipath"][..], Some("hca1"))] {
        let server = Server::start_args("cable", before, &[]);
        let ctl = |args: &[&str]| {
            let mut all: Vec<&str> = device.map_or(vec![], |d| vec!["--device", d]);
            all.extend_from_slice(args);
            server.ctl(&all)
        };
        let pull = ctl(&[
            "inject",
            "port_down",
            "--port",
            "1",
            "--duration-ms",
            "600000",
        ]);
        assert_eq!(pull.status.code(), Some(0), "{}", text(&pull));
        let reset = ctl(&["reset", "--forced", "--wait"]);
        assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));
        let deadline = Instant::now() + Duration::from_secs(60);
        let ports = loop {
            let s = json(&ctl(&["--json", "status"]));
            let ports = s["ports"].clone();
            if ports[1]["state"] == "Active" {
                break ports;
            }
            assert!(
                Instant::now() < deadline,
                "{device:?}: port 2 never came back: {s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(ports[0]["port"], 1);
        assert_eq!(ports[0]["state"], "Down", "{device:?}: {ports}");
        assert_eq!(ports[0]["physical_state"], "Polling", "no cable: {ports}");
        assert!(server.stop().success());
    }
}

/// docs/design.md §5 "An abort is not a veto", through READ_RESETS: `hcactl resets` names the client
/// that did not answer as unresponsive (not "vetoed by ?") and gives the quiesce it ran.
#[test]
fn an_abort_for_an_unresponsive_client_is_not_shown_as_a_veto() {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios/planned-aborted-unresponsive.toml");
    let server = Server::start_with("abort", &["--scenario", scenario.to_str().expect("utf-8")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let summary = loop {
        let r = json(&server.ctl(&["--json", "resets"]));
        if r["total"] == 1 {
            break r["resets"][0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the planned reset never ended: {r}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(summary["outcome"], "AbortedUnresponsive", "{summary}");
    assert_eq!(summary["vetoed_by"], Value::Null, "{summary}");
    assert_eq!(summary["unresponsive_names"], serde_json::json!(["wedged"]));
    assert_eq!(summary["forced"], 0, "{summary}");
    assert_eq!(summary["quiesce_us"], 500_000, "{summary}");
    let human = text(&server.ctl(&["resets"]));
    assert!(
        human.contains("aborted, unresponsive at the quiesce deadline: wedged"),
        "{human}"
    );
    assert!(human.contains("phases: quiesce 500ms,"), "{human}");
    assert!(!human.contains("vetoed"), "{human}");
    let status = text(&server.ctl(&["status"]));
    assert!(
        status.contains("unresponsive at the quiesce deadline: wedged"),
        "{status}"
    );
    // An administrator's planned reset aborts the same way; --wait names who did not answer.
    let waited = server.ctl(&["reset", "--planned", "--wait"]);
    assert_eq!(waited.status.code(), Some(1), "{}", text(&waited));
    assert!(
        text(&waited).contains("a client did not answer in time; nothing was reset (wedged)"),
        "{}",
        text(&waited)
    );
    assert!(server.stop().success());
}

/// While a reset runs, `hcactl status` says how long it has run (it said "- so far"): a reset
/// held for ten minutes by a client that never answers is certainly running when asked.
#[test]
fn status_during_a_reset_says_how_long_it_has_run() {
    let dir = std::env::temp_dir().join(format!("hcasim-scenario-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let scenario = dir.join("long.toml");
    std::fs::write(
        &scenario,
        "name = \"long\"\nduration_ms = 3600000\n[policy]\nquiesce_deadline_ms = 600000\n\
         [[clients]]\nname = \"mute\"\nkind = \"custom\"\nnever_ack = true\n\
         [[events]]\nat_ms = 1\nfault = \"admin_reset\"\n",
    )
    .expect("write");
    let server = Server::start_with("long", &["--scenario", scenario.to_str().expect("utf-8")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let s = loop {
        let s = json(&server.ctl(&["--json", "status"]));
        if s["reset_in_progress"] == true {
            break s;
        }
        assert!(Instant::now() < deadline, "the reset never started: {s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(s["in_progress"]["reason"], "admin_forced", "{s}");
    assert!(s["in_progress"]["elapsed_us"].is_u64(), "{s}");
    let human = text(&server.ctl(&["status"]));
    let line = human
        .lines()
        .find(|l| l.starts_with("in progress"))
        .unwrap_or_else(|| panic!("{human}"));
    assert!(
        line.ends_with(" so far") && !line.contains("- so far"),
        "{line}"
    );
    assert!(server.stop().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `hcasim serve --socket PATH` at `path`, expected to refuse: its exit code and stderr.
fn serve_refused(path: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(["serve", "--socket"])
        .arg(path)
        .output()
        .expect("hcasim runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serve_replaces_only_a_stale_socket_and_never_a_file_a_link_or_a_live_socket() {
    let dir = std::env::temp_dir().join(format!("hcasim-paths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("notes.txt");
    std::fs::write(&file, "precious").expect("write");
    let (code, err) = serve_refused(&file);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("still there"),
        "precious"
    );

    let link = dir.join("link.sock");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    let (code, err) = serve_refused(&link);
    assert_eq!(code, Some(2), "{err}");
    assert!(std::fs::symlink_metadata(&link)
        .expect("link kept")
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(&file).expect("target kept"),
        "precious"
    );

    let (code, _) = serve_refused(&dir);
    assert_eq!(code, Some(2), "a directory");
    assert!(dir.is_dir());

    // A socket nobody listens on any more is stale: it is replaced and served.
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    let mut server = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(["serve", "--socket"])
        .arg(&stale)
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&stale).is_err() {
        assert!(
            Instant::now() < deadline,
            "the stale socket was never replaced"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // And a live one is refused, still served afterwards.
    let (code, err) = serve_refused(&stale);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("already being served"), "{err}");
    assert!(
        UnixStream::connect(&stale).is_ok(),
        "the first server is untouched"
    );
    let pid = nix::unistd::Pid::from_raw(server.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    assert!(server.wait().expect("exits").success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Threads of a process, from /proc.
fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn connections_past_the_cap_are_closed_and_the_server_keeps_serving() {
    let server = Server::start("cap");
    let held: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(&server.socket).expect("connect"))
        .collect();
    // Each held connection asks once; past the cap the server closes instead of answering.
    let mut answered = 0;
    let mut closed = 0;
    for mut s in held.iter() {
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let _ = s.write_all(&frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES));
        let mut head = [0u8; 12];
        match s.read_exact(&mut head) {
            Ok(()) => {
                let mut body = [0u8; STATE_BYTES as usize];
                s.read_exact(&mut body).expect("body");
                answered += 1;
            }
            Err(e) => {
                assert_ne!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock,
                    "no answer, no close"
                );
                closed += 1;
            }
        }
    }
    assert_eq!(answered, 64, "{answered} answered, {closed} closed");
    assert_eq!(closed, 36);
    let threads = threads_of(server.child.id());
    assert!(threads <= 64 + 8, "{threads} threads for 100 connections");
    drop(held);
    // Capacity comes back as connections close.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = exchange(
            &server.socket,
            &frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES),
            false,
        );
        if r.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "never served again");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(server.stop().success());
}

/// A client that drips a frame one byte at a time is dropped at the frame's deadline, not
/// held for a timeout per byte.
#[test]
fn a_frame_dripped_byte_by_byte_is_dropped_at_its_deadline() {
    let server = Server::start("drip");
    let mut s = UnixStream::connect(&server.socket).expect("connect");
    let bytes = frame(IOCTL_HCABUS_QUERY_STATE, &query(), STATE_BYTES);
    // 15 bytes a second apart: longer than the server's 10 s for a whole frame.
    for b in &bytes[..15] {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut buf = [0u8; 12];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("{n} bytes of an answer to half a frame"),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "still held: {e}"
        ),
    }
    assert!(server.stop().success());
}

/// A scenario heavier than real time: every IOCTL is still answered, and SIGTERM ends the
/// server (the test waits for the exit, it does not time it).
#[test]
fn a_scenario_heavier_than_real_time_is_still_served_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("hcasim-heavy-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let scenario = dir.join("heavy.toml");
    let disks: String = ["d1", "d2", "d3"]
        .map(|n| format!("[[clients]]\nname = \"{n}\"\nkind = \"srp\"\niops = 100000\n"))
        .concat();
    std::fs::write(
        &scenario,
        format!("name = \"heavy\"\nduration_ms = 3600000\n{disks}"),
    )
    .expect("write");
    let server = Server::start_with("heavy", &["--scenario", scenario.to_str().expect("utf-8")]);
    for _ in 0..20 {
        let s = json(&server.ctl(&["--json", "status"]));
        assert_eq!(s["state"], "Operational");
    }
    let reset = server.ctl(&["reset", "--forced", "--wait"]);
    assert_eq!(reset.status.code(), Some(0), "{}", text(&reset));
    assert!(server.stop().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The names in a `hcactl --json clients` listing, in order.
fn names_of(clients: &Value) -> Vec<&str> {
    clients["clients"]
        .as_array()
        .expect("list")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect()
}
