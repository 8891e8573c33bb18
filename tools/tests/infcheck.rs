//! infcheck: inf/hcabus.inx passes, and each rule fails on an INF that breaks it, at the line
//! that breaks it.

use std::path::Path;
use std::process::Command;

use hcabus_tools::inf::{parse, rules};

fn package() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inf/hcabus.inx");
    std::fs::read_to_string(path).expect("inf/hcabus.inx")
}

/// The package with `from` replaced by `to` (which must be there), and the first line that
/// differs.
fn broken(from: &str, to: &str) -> (String, usize) {
    let text = package();
    assert!(text.contains(from), "{from:?} is in the package");
    let edited = text.replacen(from, to, 1);
    let line = text
        .lines()
        .zip(edited.lines())
        .position(|(a, b)| a != b)
        .map_or(text.lines().count(), |i| i + 1);
    (edited, line)
}

/// Each rule with an edit of the package that breaks it.
const BREAKS: [(&str, &str, &str); 16] = [
    ("version-signature", "\"$WINDOWS NT$\"", "\"$Chicago$\""),
    ("class-system", "Class       = System", "Class       = Net"),
    ("version-provider", "Provider    = %ProviderName%", ""),
    ("catalog-file", "CatalogFile = hcabus.cat", ""),
    ("driver-ver", "DriverVer   = 01/01/2026,0.1.0.0", ""),
    ("pnp-lockdown", "PnpLockdown = 1", "PnpLockdown = 0"),
    ("dirid-13", "DefaultDestDir = 13", "DefaultDestDir = 12"),
    (
        "service-binary",
        "ServiceBinary  = %13%\\hcabus.sys",
        "ServiceBinary  = %12%\\drivers\\hcabus.sys",
    ),
    (
        "registry-hkr",
        "HKR,Parameters,paging_io_hold_timeout_ms",
        "HKLM,System\\Parameters,paging_io_hold_timeout_ms",
    ),
    (
        "forbidden-directive",
        "CopyFiles = HcaBus_CopyFiles",
        "CopyFiles = HcaBus_CopyFiles\nDelFiles = HcaBus_CopyFiles",
    ),
    (
        "source-disks",
        "[HcaBus_CopyFiles]\nhcabus.sys",
        "[HcaBus_CopyFiles]\nhcabus.sys\nextra.sys",
    ),
    (
        "section-exists",
        "CopyFiles = HcaBus_CopyFiles",
        "CopyFiles = HcaBus_Missing",
    ),
    ("kmdf-section", "KmdfLibraryVersion = 1.33", ""),
    ("boot-start", "StartType      = 0", "StartType      = 3"),
    (
        "security-sddl",
        "(A;;GA;;;BA)\"",
        "(A;;GA;;;BA)(A;;GR;;;WD)\"",
    ),
    (
        "strings-defined",
        "DisplayName    = %ServiceName%",
        "DisplayName    = %NoSuchString%",
    ),
];

#[test]
fn the_package_keeps_every_rule() {
    let inf = parse(&package()).expect("an INF");
    assert_eq!(rules::check(&inf), []);
}

#[test]
fn every_rule_has_a_breaking_inf() {
    let mut named: Vec<&str> = rules::RULES.iter().map(|r| r.0).collect();
    let mut tested: Vec<&str> = BREAKS.iter().map(|b| b.0).collect();
    named.sort_unstable();
    tested.sort_unstable();
    assert_eq!(named, tested);
}

#[test]
fn each_rule_fails_on_its_inf_at_the_line_that_breaks_it() {
    for (rule, from, to) in BREAKS {
        let (text, line) = broken(from, to);
        let findings = rules::check(&parse(&text).expect("still an INF"));
        assert!(
            findings.iter().any(|f| f.rule == rule),
            "{rule}: not found in {findings:?}"
        );
        // A removed line is reported where its section starts; an edited one where it is.
        let removed = to.is_empty();
        let at = findings.iter().filter(|f| f.rule == rule).map(|f| f.line);
        if !removed {
            let lines: Vec<usize> = at.collect();
            assert!(
                lines.contains(&line),
                "{rule}: reported at {lines:?}, broken at {line}"
            );
        }
        assert!(
            findings
                .iter()
                .all(|f| f.rule == rule || rule == "section-exists" || rule == "source-disks"),
            "{rule}: one edit, one rule: {findings:?}"
        );
    }
}

fn infcheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infcheck"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_binary_exits_0_1_or_2_and_never_claims_to_be_infverif() {
    let inx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inf/hcabus.inx");
    let (code, out, _) = infcheck(&[inx.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("does not run Microsoft's InfVerif"), "{out}");

    let dir = std::env::temp_dir().join(format!("infcheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bad = dir.join("bad.inf");
    std::fs::write(&bad, broken("StartType      = 0", "StartType      = 3").0).expect("write");
    let (code, out, _) = infcheck(&[bad.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("bad.inf:") && out.contains("[boot-start] StartType = 3"),
        "{out}"
    );

    let not_inf = dir.join("not.inf");
    std::fs::write(&not_inf, "Key = value\n").expect("write");
    let (code, _, err) = infcheck(&[not_inf.to_str().expect("utf-8")]);
    assert_eq!(code, 2);
    assert!(err.contains("not.inf:1: not an INF"), "{err}");
    let (code, _, err) = infcheck(&[dir.join("absent.inf").to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    let _ = std::fs::remove_dir_all(&dir);

    let (code, help, _) = infcheck(&["--help"]);
    assert_eq!(code, 0);
    assert!(help.contains("does not run Microsoft's InfVerif"), "{help}");
}
