//! hcactl as a script would meet it: a reader that closes stdout early, a server that
//! answers short or nonsense, and `--wait` on resets that do not bring the device back.
#![cfg(unix)]

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hcabus::ioctl::*;
use hcactl::transport::{read_request, write_response};

use super::common;
use common::{text, Server};

fn hcactl(socket: &Path, args: &[&str]) -> std::process::Output {
    Command::new(crate::common::hcactl())
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .expect("hcactl runs")
}

/// A server that answers every request with success and `answer(code)` as output.
fn fake_server(tag: &str, answer: fn(u32) -> Vec<u8>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hcactl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let socket = dir.join("fake.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            while let Ok(Some(req)) = read_request(&mut stream) {
                let out = answer(req.code);
                if write_response(&mut stream, NtStatus::SUCCESS, &out).is_err() {
                    break;
                }
            }
        }
    });
    socket
}

/// A tag, what the fake server answers, and the hcactl command.
type Case = (&'static str, fn(u32) -> Vec<u8>, &'static [&'static str]);

#[test]
fn short_or_malformed_answers_are_connection_errors_not_panics() {
    let cases: [Case; 6] = [
        ("clients-short", |_| vec![1, 0, 0, 0], &["clients"]),
        (
            "clients-count",
            |_| {
                let mut v = vec![0u8; 8];
                v[0..4].copy_from_slice(&5u32.to_le_bytes());
                v[4..8].copy_from_slice(&1_000u32.to_le_bytes());
                v
            },
            &["clients"],
        ),
        ("log-short", |_| vec![3, 0, 0, 0, 0, 0, 0, 0], &["log"]),
        ("reset-empty", |_| Vec::new(), &["reset"]),
        ("restart-short", |_| vec![1, 2, 3], &["restart"]),
        ("status-short", |_| vec![0; 12], &["status"]),
    ];
    for (tag, answer, args) in cases {
        let socket = fake_server(tag, answer);
        let out = hcactl(&socket, args);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{tag}: {all}");
        assert!(!all.contains("panicked"), "{tag}: {all}");
        assert!(all.contains("answer"), "{tag}: names the bad answer: {all}");
        // The fake server's directory is the test's own: nothing left in the temp dir.
        if let Some(dir) = socket.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[test]
fn a_reader_that_closes_stdout_early_ends_hcactl_and_hcasim_quietly() {
    let server = Server::start("pipe");
    for (bin, args) in [
        (
            crate::common::hcactl(),
            vec!["--socket", server.socket.to_str().expect("utf-8"), "log"],
        ),
        (env!("CARGO_BIN_EXE_hcasim"), vec!["--flight-record"]),
    ] {
        let mut child = Command::new(bin)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs");
        // Like `| head -c 1`: take one byte and close.
        let mut one = [0u8; 1];
        let mut stdout = child.stdout.take().expect("stdout");
        let _ = stdout.read(&mut one);
        drop(stdout);
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err)
            .expect("stderr");
        let status = child.wait().expect("exits");
        assert_eq!(status.code(), Some(0), "{bin}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{bin}: {err}"
        );
    }
    assert!(server.stop().success());
}

#[test]
fn wait_fails_when_a_planned_reset_is_vetoed_and_gives_up_at_its_timeout() {
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let vetoed = scenarios.join("planned-vetoed.toml");
    let server = Server::start_with("veto", &["--scenario", vetoed.to_str().expect("utf-8")]);
    let out = server.ctl(&["reset", "--planned", "--wait"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("vetoed"), "says why: {}", text(&out));
    assert!(
        text(&out).contains("said: scenario: veto_planned"),
        "gives the vetoer's own reason: {}",
        text(&out)
    );
    let log = text(&server.ctl(&["log"]));
    assert!(
        log.contains("vetoed the planned reset: scenario: veto_planned"),
        "the flight recorder keeps it: {log}"
    );
    assert!(server.stop().success());

    // A wedged client holds the quiesce for its 2 s deadline (virtual time never runs ahead
    // of the wall clock): a 1 s timeout always comes first.
    let stuck = scenarios.join("stuck-client.toml");
    let server = Server::start_with("timeout", &["--scenario", stuck.to_str().expect("utf-8")]);
    let out = server.ctl(&["reset", "--forced", "--wait", "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no outcome within 1 s"),
        "{}",
        text(&out)
    );
    let usage = server.ctl(&["reset", "--timeout", "5"]);
    assert_eq!(usage.status.code(), Some(2), "--timeout needs --wait");
    assert!(server.stop().success());
}
