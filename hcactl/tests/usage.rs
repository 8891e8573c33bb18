//! hcactl on its own, before any device answers: bad command lines and a device that is not
//! there end with exit status 2 and a message that says why.

use std::process::{Command, Output};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn hcactl_reports_usage_and_connection_errors_with_exit_2() {
    let missing = Command::new(env!("CARGO_BIN_EXE_hcactl"))
        .args(["--socket", "/nonexistent/hcabus.sock", "status"])
        .env_remove("HCABUS_SOCKET")
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing).contains("cannot connect"),
        "{}",
        text(&missing)
    );
    let none = Command::new(env!("CARGO_BIN_EXE_hcactl"))
        .arg("status")
        .env_remove("HCABUS_SOCKET")
        .output()
        .expect("runs");
    assert_eq!(none.status.code(), Some(2));
    let bad = Command::new(env!("CARGO_BIN_EXE_hcactl"))
        .args(["frobnicate"])
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    // A fault out of INJECT_FAULT's range is refused before any connection, naming the
    // option and its range (the rule scenario files use too; a number outside every
    // fault's range is the parser's, which names it alike).
    for (args, said) in [
        (
            &["reset_fails", "--count", "65"][..],
            "--count must be between 1 and 64",
        ),
        (
            &["port_down", "--port", "1", "--duration-ms", "0"][..],
            "'--duration-ms <MS>': 0 is not in 1..=3600000",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_hcactl"))
            .args(["--socket", "/nonexistent/hcabus.sock", "inject"])
            .args(args)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(said), "{}", text(&out));
    }
}
