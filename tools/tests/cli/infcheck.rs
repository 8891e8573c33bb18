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

/// An edit of the package that breaks `rule`, and the other rules the same edit may break
/// too (a file copied from nowhere is also not in [SourceDisksFiles], say).
struct Break {
    rule: &'static str,
    from: &'static str,
    to: String,
    also: &'static [&'static str],
}

fn b(rule: &'static str, from: &'static str, to: &str) -> Break {
    Break {
        rule,
        from,
        to: to.to_string(),
        also: &[],
    }
}

fn with_also(mut x: Break, also: &'static [&'static str]) -> Break {
    x.also = also;
    x
}

/// Every section or directive a universal INF may not have, added to the package.
fn universal_breaks() -> Vec<Break> {
    let wdf = "[HcaBus_Install.NT.Wdf]";
    let mut out: Vec<Break> = [
        "[HcaBus_Install.NT.CoInstallers]",
        "[HcaBus_Install.NT.FactDef]",
        "[HcaBus_Install.NT.LogConfigOverride]",
        "[ClassInstall32]",
        "[ClassInstall32.NTamd64]",
        "[DefaultInstall.NTamd64]",
        "[DefaultInstall]",
    ]
    .iter()
    .map(|header| b("forbidden-section", wdf, &format!("{header}\n\n{wdf}")))
    .collect();
    // Every directive the rule says it refuses (its description, which `infcheck --rules`
    // and the docs print), each refused in turn.
    let rule = rules::RULES
        .iter()
        .find(|r| r.name == "forbidden-directive")
        .expect("the rule");
    let (_, listed) = rule.what.split_once(": ").expect("a list after the colon");
    let directives: Vec<&str> = listed.split(", ").collect();
    assert_eq!(directives.len(), 13, "{directives:?}");
    for directive in directives {
        let copy = "CopyFiles = HcaBus_CopyFiles";
        out.push(b(
            "forbidden-directive",
            copy,
            &format!("{copy}\n{directive} = HcaBus_CopyFiles"),
        ));
    }
    out
}

/// Each rule with edits of the package that break it.
fn breaks() -> Vec<Break> {
    let mut out = version_breaks();
    out.extend(package_breaks());
    out.extend(universal_breaks());
    out
}

/// Edits of the [Version] section and the driver's own settings.
fn version_breaks() -> Vec<Break> {
    let dv = "DriverVer   = 01/01/2026,0.1.0.0";
    vec![
        b("version-signature", "\"$WINDOWS NT$\"", "\"$Chicago$\""),
        b("class-system", "Class       = System", "Class       = Net"),
        b("version-provider", "Provider    = %ProviderName%", ""),
        b(
            "version-provider",
            "Provider    = %ProviderName%",
            "Provider    = Microsoft",
        ),
        b("catalog-file", "CatalogFile = hcabus.cat", ""),
        b("driver-ver", dv, ""),
        // InfVerif 1217: three parts.
        b("driver-ver", dv, "DriverVer   = 01/01/2026,0.1.0"),
        b("driver-ver", dv, "DriverVer   = 01/01/2026,0.1.0.65535"),
        b("driver-ver", dv, "DriverVer   = 01/01/2026,0.0.0.0"),
        b("driver-ver", dv, "DriverVer   = 01/01/2026"),
        b("driver-ver", dv, "DriverVer   = 1/1/2026,0.1.0.0"),
        b("driver-ver", dv, "DriverVer   = 02/30/2026,0.1.0.0"),
        b("driver-ver", dv, "DriverVer   = 2026-01-01,0.1.0.0"),
        b(
            "driver-ver",
            "CopyFiles = HcaBus_CopyFiles",
            "CopyFiles = HcaBus_CopyFiles\nDriverVer = 01/01/2026,1.2.3",
        ),
        b("pnp-lockdown", "PnpLockdown = 1", "PnpLockdown = 0"),
    ]
}

/// Edits of what the package copies, registers and installs.
fn package_breaks() -> Vec<Break> {
    let bin = "ServiceBinary  = %13%\\hcabus.sys";
    let copy = "[HcaBus_CopyFiles]\nhcabus.sys";
    let sdf = "hcabus.sys = 1,,";
    vec![
        // The driver then leaves the driver store, so its service names a file not there.
        with_also(b("dirid-13", "DefaultDestDir = 13", "DefaultDestDir = 12"), &["service-binary"]),
        with_also(
            b("dirid-13", "DefaultDestDir = 13", "DefaultDestDir = 13\nHcaBus_CopyFiles = 11"),
            &["service-binary"],
        ),
        with_also(b("dirid-13", "DefaultDestDir = 13", ""), &["service-binary"]),
        // The event log's message file is then not the binary that runs, either.
        with_also(
            b("service-binary", bin, "ServiceBinary  = %12%\\drivers\\hcabus.sys"),
            &["event-log"],
        ),
        // A boot service whose binary the package never copies.
        with_also(
            b("service-binary", bin, "ServiceBinary  = %13%\\hcabus2.sys"),
            &["event-log"],
        ),
        with_also(
            b("service-binary", bin, "ServiceBinary  = %13%\\hcabus.dll"),
            &["event-log"],
        ),
        b("service-binary", bin, ""),
        with_also(
            b("service-binary", "%13%\\hcabus.sys\"", "%13%\\hcamsg.dll\""),
            &["event-log"],
        ),
        // Event Viewer would find no text for the driver's entries.
        b(
            "event-log",
            "AddService = hcabus, 0x00000002, HcaBus_Service_Install, HcaBus_EventLog_Install",
            "AddService = hcabus, 0x00000002, HcaBus_Service_Install",
        ),
        b(
            "event-log",
            "AddService = hcabus, 0x00000002, HcaBus_Service_Install, HcaBus_EventLog_Install",
            "AddService = hcabus, 0x00000002, HcaBus_Service_Install, HcaBus_EventLog_Install, Application",
        ),
        b(
            "event-log",
            "\"%%SystemRoot%%\\System32\\IoLogMsg.dll;%13%\\hcabus.sys\"",
            "\"%13%\\hcabus.sys\"",
        ),
        b("event-log", "EventMessageFile,0x00020000", "EventMessageFile,0x00000000"),
        b("event-log", "TypesSupported,0x00010001,7", "TypesSupported,0x00010001,3"),
        b("event-log", "HKR,,TypesSupported,0x00010001,7", ""),
        b("event-log", "HKR,,TypesSupported,", "HKR,Other,TypesSupported,"),
        b(
            "registry-hkr",
            "HKR,Parameters,paging_io_hold_timeout_ms",
            "HKLM,System\\Parameters,paging_io_hold_timeout_ms",
        ),
        with_also(b("source-disks", copy, "[HcaBus_CopyFiles]\nhcabus.sys\nextra.sys"), &[]),
        b("source-disks", sdf, "hcabus.sys = 2,,"),
        b("source-disks", sdf, "hcabus.sys = 1,,\nunused.sys = 1,,"),
        b("source-disks", sdf, "hcabus.sys = 1,,\nhcabus.sys = 1,,"),
        with_also(
            b("copy-conflict", copy, "[HcaBus_CopyFiles]\nhcabus.sys\nhcabus.sys,hcabus_v2.sys"),
            &["source-disks"],
        ),
        b(
            "registry-conflict",
            "HKR,Parameters,quiesce_deadline_ms,0x00010001,5000",
            "HKR,Parameters,quiesce_deadline_ms,0x00010001,5000\nHKR,Parameters,quiesce_deadline_ms,0x00010001,6000",
        ),
        b(
            "service-conflict",
            "AddService = hcabus, 0x00000002, HcaBus_Service_Install, HcaBus_EventLog_Install",
            "AddService = hcabus, 0x00000002, HcaBus_Service_Install, HcaBus_EventLog_Install\nAddService = hcabus, 0x00000000, HcaBus_Service_Install",
        ),
        with_also(
            b(
                "target-os-version",
                "HcaBus, NTamd64.10.0...20348",
                "HcaBus, NTamd64.10.0.1..20348",
            ),
            &["section-exists"],
        ),
        with_also(
            b("target-os-version", "HcaBus, NTamd64.10.0...20348", "HcaBus, NTsparc.10.0...20348"),
            &["section-exists"],
        ),
        // Nothing is copied then: the listed file is unused and the service's binary absent.
        with_also(
            b("section-exists", "CopyFiles = HcaBus_CopyFiles", "CopyFiles = HcaBus_Missing"),
            &["source-disks", "service-binary"],
        ),
        // A decoration whose models section is missing.
        b(
            "section-exists",
            "HcaBus, NTamd64.10.0...20348",
            "HcaBus, NTamd64.10.0...20348, NTarm64.10.0...20348",
        ),
        b("kmdf-section", "KmdfLibraryVersion = 1.33", ""),
        // KMDF 1.33 is in Windows from build 20348: installing on 2004 (19041), or on any
        // NT, is installing where the boot driver cannot load.
        with_also(
            b(
                "kmdf-min-build",
                "HcaBus, NTamd64.10.0...20348",
                "HcaBus, NTamd64.10.0...19041",
            ),
            &["section-exists"],
        ),
        with_also(
            b("kmdf-min-build", "HcaBus, NTamd64.10.0...20348", "HcaBus, NTamd64"),
            &["section-exists"],
        ),
        b(
            "kmdf-min-build",
            "KmdfLibraryVersion = 1.33",
            "KmdfLibraryVersion = 1.35",
        ),
        b("kmdf-section", "KmdfService = hcabus,", "KmdfService = other,"),
        b("boot-start", "StartType      = 0", "StartType      = 3"),
        // The device would have no function driver.
        b(
            "boot-start",
            "AddService = hcabus, 0x00000002,",
            "AddService = hcabus, 0x00000000,",
        ),
        b("kmdf-section", "KmdfLibraryVersion = 1.33", "KmdfLibraryVersion = 2.0"),
        b("security-sddl", "(A;;GA;;;BA)\"", "(A;;GA;;;BA)(A;;GR;;;WD)\""),
        b(
            "strings-defined",
            "DisplayName    = %ServiceName%",
            "DisplayName    = %NoSuchString%",
        ),
    ]
}

#[test]
fn the_package_keeps_every_rule() {
    let inf = parse(&package()).expect("an INF");
    assert_eq!(rules::check(&inf), []);
}

/// Edits that keep every rule: what Microsoft allows must not be flagged.
#[test]
fn what_the_rules_allow_is_not_flagged() {
    for (from, to) in [
        // CatalogFile per platform.
        (
            "CatalogFile = hcabus.cat",
            "CatalogFile.NTamd64 = hcabus.cat",
        ),
        // DriverVer with hyphens, a leap day and the largest field.
        ("01/01/2026,0.1.0.0", "02-29-2028,65534.0.0.1"),
        // The file list's own DestinationDirs entry, to DIRID 13.
        (
            "DefaultDestDir = 13",
            "DefaultDestDir = 13\nHcaBus_CopyFiles = 13",
        ),
        // An older KMDF than the decoration needs.
        ("KmdfLibraryVersion = 1.33", "KmdfLibraryVersion = 1.31"),
        // A decimal ASSOCSERVICE flag.
        (
            "AddService = hcabus, 0x00000002,",
            "AddService = hcabus, 2,",
        ),
        // The event log's message files with NOCLOBBER, the types in hexadecimal, the log
        // named, and the I/O manager's file by another spelling of its path.
        ("EventMessageFile,0x00020000", "EventMessageFile,0x00020002"),
        (
            "TypesSupported,0x00010001,7",
            "TypesSupported,0x00010001,0x7",
        ),
        (
            "HcaBus_EventLog_Install\n",
            "HcaBus_EventLog_Install, System\n",
        ),
        (
            "%%SystemRoot%%\\System32\\IoLogMsg.dll",
            "%%SystemRoot%%\\system32\\iologmsg.dll",
        ),
    ] {
        let (text, _) = broken(from, to);
        let findings = rules::check(&parse(&text).expect("still an INF"));
        assert_eq!(findings, [], "{to:?}");
    }
}

#[test]
fn every_rule_has_a_breaking_inf() {
    let mut named: Vec<&str> = rules::RULES.iter().map(|r| r.name).collect();
    let mut tested: Vec<&str> = breaks().iter().map(|b| b.rule).collect();
    named.sort_unstable();
    tested.sort_unstable();
    tested.dedup();
    assert_eq!(named, tested);
}

#[test]
fn each_rule_fails_on_its_inf_at_the_line_that_breaks_it() {
    for x in breaks() {
        let (rule, to) = (x.rule, x.to.as_str());
        let (text, line) = broken(x.from, to);
        let findings = rules::check(&parse(&text).expect("still an INF"));
        assert!(
            findings.iter().any(|f| f.rule == rule),
            "{rule} ({to:?}): not found in {findings:?}"
        );
        // A removed line is reported where its section starts (or where what needed it is);
        // an edited or added one where it is.
        let removed = to.is_empty();
        let at: Vec<usize> = findings
            .iter()
            .filter(|f| f.rule == rule)
            .map(|f| f.line)
            .collect();
        if !removed {
            // An edit that adds lines may break the rule on any of them.
            let added = to.lines().count().max(1);
            assert!(
                at.iter().any(|l| (line..line + added + 1).contains(l)),
                "{rule} ({to:?}): reported at {at:?}, broken at {line}"
            );
        }
        assert!(
            findings
                .iter()
                .all(|f| f.rule == rule || x.also.contains(&f.rule)),
            "{rule} ({to:?}): one edit, one rule: {findings:?}"
        );
    }
}

#[test]
fn the_help_names_every_infverif_number_a_rule_encodes() {
    let (code, help, _) = infcheck(&["--help"]);
    assert_eq!(code, 0);
    let codes = rules::infverif_codes();
    assert!(
        codes.contains(&"1217") && codes.contains(&"1330"),
        "{codes:?}"
    );
    for c in codes {
        assert!(
            help.contains(c),
            "--help does not name InfVerif {c}: {help}"
        );
    }
    let (code, listed, _) = infcheck(&["--rules"]);
    assert_eq!(code, 0);
    for r in rules::RULES {
        assert!(listed.contains(r.name), "{listed}");
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

fn child_package() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inf/hcabus-child.inx");
    std::fs::read_to_string(path).expect("inf/hcabus-child.inx")
}

/// The child's INF keeps every rule of a child, and is told apart from a bus's: it adds no
/// event-log section, which only the bus (which writes error-log entries) must have. A
/// section it does name is checked as the bus's is.
#[test]
fn the_child_package_keeps_the_rules_of_a_child() {
    let text = child_package();
    let inf = parse(&text).expect("an INF");
    assert_eq!(rules::check_as(&inf, rules::Role::Child), []);
    let as_bus = rules::check_as(&inf, rules::Role::Bus);
    assert_eq!(
        as_bus.iter().map(|f| f.rule).collect::<Vec<_>>(),
        ["event-log"],
        "{as_bus:?}"
    );
    // A child that names an event-log section must make it a good one.
    let named = text
        .replace(
            "AddService = hcabus_child, 0x00000002, HcaBusChild_Service_Install",
            "AddService = hcabus_child, 0x00000002, HcaBusChild_Service_Install, Log",
        )
        .replace(
            "[Strings]",
            "[Log]\nAddReg = LogReg\n\n[LogReg]\nHKR,,TypesSupported,0x00010001,7\n\n[Strings]",
        );
    let findings = rules::check_as(&parse(&named).expect("an INF"), rules::Role::Child);
    assert!(
        findings.iter().any(|f| f.rule == "event-log"),
        "{findings:?}"
    );
    // The rest holds for a child as for the bus: boot start, on the boot path.
    let demand = text.replace("StartType      = 0", "StartType      = 3");
    let findings = rules::check_as(&parse(&demand).expect("an INF"), rules::Role::Child);
    assert!(
        findings.iter().any(|f| f.rule == "boot-start"),
        "{findings:?}"
    );

    let inx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inf/hcabus-child.inx");
    let (code, out, _) = infcheck(&["--role", "child", inx.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = infcheck(&[inx.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{out}");
    let (code, _, err) = infcheck(&["--role", "parent", inx.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--role"), "{err}");
}
