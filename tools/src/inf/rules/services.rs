//! What each install section installs: its KMDF section, its services (boot start, the
//! binary and event message file it names, each a file the install copies to the driver
//! store), no service added twice differently (InfVerif 1333), and the device's SDDL.

use std::collections::BTreeMap;

use super::super::{Entry, Inf, Section};
use super::files::Copy;
use super::Check;

/// Load-order groups loaded by the boot loader.
const BOOT_GROUPS: [&str; 4] = [
    "Boot Bus Extender",
    "System Bus Extender",
    "SCSI miniport",
    "Base",
];

pub(super) fn check(c: &mut Check<'_>, copies: &[Copy]) {
    let inf = c.inf;
    let installs = install_sections(inf);
    if installs.is_empty() {
        c.add(
            1,
            "section-exists",
            "no install section reached from [Manufacturer]".into(),
        );
    }
    for install in installs {
        let added = services(c, install, copies);
        kmdf(c, install, &added);
        security(c, install);
    }
    conflicts(c);
}

/// The install sections: what the models sections point to, decorated or not.
fn install_sections(inf: &Inf) -> Vec<&Section> {
    let mut out = Vec::new();
    for m in inf.entries("Manufacturer") {
        let base = m.value(0);
        let decorations: Vec<&str> = m.values.iter().skip(1).map(String::as_str).collect();
        let mut models: Vec<String> = decorations.iter().map(|d| format!("{base}.{d}")).collect();
        models.push(base.to_string());
        for model in models.iter().filter_map(|n| inf.section(n)) {
            for e in &model.entries {
                // The install section as SetupAPI picks it: the best decoration first.
                let base = e.value(0);
                let found = [".NTamd64", ".NT", ""]
                    .iter()
                    .find_map(|d| inf.section(&format!("{base}{d}")));
                if let Some(s) = found {
                    if !out.iter().any(|x: &&Section| std::ptr::eq(*x, s)) {
                        out.push(s);
                    }
                }
            }
        }
    }
    out
}

fn kmdf(c: &mut Check<'_>, install: &Section, added: &[String]) {
    let inf = c.inf;
    let wdf = format!("{}.Wdf", install.name);
    let Some(w) = inf.section(&wdf) else {
        c.add(install.line, "kmdf-section", format!("no [{wdf}] section"));
        return;
    };
    let Some(k) = w.get("KmdfService") else {
        c.add(
            w.line,
            "kmdf-section",
            format!("[{wdf}] has no KmdfService"),
        );
        return;
    };
    if !added.iter().any(|s| s.eq_ignore_ascii_case(k.value(0))) {
        c.add(
            k.line,
            "kmdf-section",
            format!(
                "KmdfService {} is not a service [{}.Services] adds ({})",
                k.value(0),
                install.name,
                added.join(", ")
            ),
        );
    }
    match inf
        .section(k.value(1))
        .and_then(|s| s.get("KmdfLibraryVersion"))
    {
        Some(v) if kmdf_version(v.value(0)) => {}
        Some(v) => c.add(
            v.line,
            "kmdf-section",
            format!(
            "KmdfLibraryVersion = {}: it is 1.N, the KMDF minor version the driver was built for",
            v.value(0)
        ),
        ),
        None => c.add(
            k.line,
            "kmdf-section",
            format!("[{}] sets no KmdfLibraryVersion", k.value(1)),
        ),
    }
}

/// `1.N`: KMDF's major version is 1 for every release.
fn kmdf_version(v: &str) -> bool {
    v.trim().strip_prefix("1.").is_some_and(|minor| {
        !minor.is_empty() && minor.len() <= 3 && minor.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The install's services, checked; returns their names.
fn services(c: &mut Check<'_>, install: &Section, copies: &[Copy]) -> Vec<String> {
    let inf = c.inf;
    let name = format!("{}.Services", install.name);
    let Some(svc) = inf.section(&name) else {
        c.add(install.line, "boot-start", format!("no [{name}] section"));
        return Vec::new();
    };
    let adds: Vec<&Entry> = svc.all("AddService").collect();
    if adds.is_empty() {
        c.add(svc.line, "boot-start", format!("[{name}] adds no service"));
    }
    function_driver(c, svc, &adds);
    // The files this install puts in the driver store, which its services may name.
    let stored: Vec<String> = copies
        .iter()
        .filter(|x| x.owner.eq_ignore_ascii_case(&install.name) && x.dirid.as_deref() == Some("13"))
        .map(|x| x.dest.to_ascii_lowercase())
        .collect();
    for add in &adds {
        match inf.section(add.value(2)) {
            Some(s) => {
                boot_start(c, s);
                binary(c, s, &install.name, &stored);
            }
            None => c.add(
                add.line,
                "section-exists",
                format!("AddService names [{}], which does not exist", add.value(2)),
            ),
        }
        let log = add.value(3);
        match inf.section(log) {
            Some(s) => event_log(c, s, &install.name, &stored),
            None if log.is_empty() => {}
            None => c.add(
                add.line,
                "section-exists",
                format!("AddService names [{log}], which does not exist"),
            ),
        }
        // A child writes no error-log entries of its own: its event-log section is optional.
        let logs = c.role == super::Role::Bus || !log.is_empty();
        if logs && flags_of(add.value(1)).is_some_and(|f| f & ASSOCSERVICE != 0) {
            let service = inf.section(add.value(2));
            let binary = service
                .and_then(|s| s.get("ServiceBinary"))
                .map(|b| b.value(0));
            message_files(c, add, inf.section(log), binary);
        }
    }
    adds.iter().map(|a| a.value(0).to_string()).collect()
}

/// SPSVCINST_ASSOCSERVICE: the service that is the device's function driver.
const ASSOCSERVICE: u32 = 0x2;

/// AddService flags as written: hexadecimal with 0x, or decimal.
fn flags_of(text: &str) -> Option<u32> {
    let t = text.trim();
    if t.is_empty() {
        return Some(0);
    }
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// Exactly one service of the install is the device's function driver (flag 0x2): with none
/// the device has no driver and does not start; with two, which one runs is not said.
fn function_driver(c: &mut Check<'_>, svc: &Section, adds: &[&Entry]) {
    let mut associated = Vec::new();
    for add in adds {
        match flags_of(add.value(1)) {
            Some(f) if f & ASSOCSERVICE != 0 => associated.push(add.line),
            Some(_) => {}
            None => c.add(
                add.line,
                "boot-start",
                format!("AddService flags {:?} are not a number", add.value(1)),
            ),
        }
    }
    // Reported at the first add when none is the function driver, at the second when two are.
    let at = match (adds.first(), associated.as_slice()) {
        (Some(first), []) => first.line,
        (_, [_, second, ..]) => *second,
        _ => return,
    };
    c.add(at, "boot-start", format!(
        "[{}]: {} service(s) with SPSVCINST_ASSOCSERVICE (0x00000002); the device needs exactly one function driver",
        svc.name,
        associated.len()
    ));
}

/// A path under the driver store names a file the install copies there.
fn stored_file(
    c: &mut Check<'_>,
    line: usize,
    what: &str,
    path: &str,
    install: &str,
    stored: &[String],
) {
    let Some(file) = path.trim().strip_prefix("%13%\\") else {
        return;
    };
    if !stored.contains(&file.to_ascii_lowercase()) {
        c.add(
            line,
            "service-binary",
            format!("{what} {path} names {file}, which [{install}] does not copy to DIRID 13"),
        );
    }
}

fn binary(c: &mut Check<'_>, s: &Section, install: &str, stored: &[String]) {
    let Some(b) = s.get("ServiceBinary") else {
        c.add(
            s.line,
            "service-binary",
            format!("[{}] has no ServiceBinary", s.name),
        );
        return;
    };
    let path = b.value(0);
    stored_file(c, b.line, "ServiceBinary", path, install, stored);
    let kernel = s.get("ServiceType").is_some_and(|t| t.value(0) == "1");
    if kernel && !path.to_ascii_lowercase().ends_with(".sys") {
        c.add(
            b.line,
            "service-binary",
            format!("ServiceBinary {path}: a kernel driver's binary is a .sys"),
        );
    }
}

/// The event log's message files (`a.dll;b.sys`) under the driver store.
fn event_log(c: &mut Check<'_>, log: &Section, install: &str, stored: &[String]) {
    let inf = c.inf;
    let values: Vec<&Entry> = log
        .all("AddReg")
        .flat_map(|e| e.values.iter())
        .filter_map(|n| inf.section(n))
        .flat_map(|s| s.entries.iter())
        .filter(|e| e.value(2).eq_ignore_ascii_case("EventMessageFile"))
        .collect();
    for e in values {
        for path in e.value(4).split(';') {
            stored_file(c, e.line, "EventMessageFile", path, install, stored);
        }
    }
}

/// The function driver's entries reach Event Viewer with their text: its AddService names an
/// event-log section of the System log that registers IoLogMsg.dll and its own binary (whose
/// message table the entries' ids are in) for all three types of entry.
fn message_files(c: &mut Check<'_>, add: &Entry, log: Option<&Section>, binary: Option<&str>) {
    let inf = c.inf;
    let Some(log) = log else {
        c.add(
            add.line,
            "event-log",
            format!(
                "AddService = {} names no event-log section: Event Viewer would find no message for the driver's entries",
                add.value(0)
            ),
        );
        return;
    };
    let name = add.value(4);
    if !name.is_empty() && !name.eq_ignore_ascii_case("System") {
        c.add(
            add.line,
            "event-log",
            format!("AddService logs to {name}: an I/O error log entry goes to the System log"),
        );
    }
    let values: Vec<&Entry> = log
        .all("AddReg")
        .flat_map(|e| e.values.iter())
        .filter_map(|n| inf.section(n))
        .flat_map(|s| s.entries.iter())
        .collect();
    // Values of the source's own key (HKR with no subkey): one under a subkey is another key's.
    let find = |name: &str| {
        values.iter().find(|e| {
            e.value(0).eq_ignore_ascii_case("HKR")
                && e.value(1).is_empty()
                && e.value(2).eq_ignore_ascii_case(name)
        })
    };
    // A file by its name: the directory may be written as a DIRID or a path.
    let file_name = |path: &str| {
        let path = path.trim().to_ascii_lowercase();
        path.rsplit('\\').next().unwrap_or_default().to_string()
    };
    // A value written elsewhere than the source's key is reported where it is.
    let missing = |c: &mut Check<'_>, name: &str| {
        let elsewhere = values
            .iter()
            .find(|e| e.value(2).eq_ignore_ascii_case(name));
        let (line, message) = match elsewhere {
            Some(e) => (
                e.line,
                format!("{name} is written under {},{}: not the event source's own key (HKR with no subkey)", e.value(0), e.value(1)),
            ),
            None => (log.line, format!("[{}] sets no {name}", log.name)),
        };
        c.add(line, "event-log", message);
    };
    match find("EventMessageFile") {
        None => missing(c, "EventMessageFile"),
        Some(e) => {
            let files: Vec<String> = e.value(4).split(';').map(file_name).collect();
            let named = |f: &str| files.contains(&file_name(f));
            // The type in the high word, FLG_ADDREG_BINVALUETYPE clear; other low flags
            // (NOCLOBBER, APPEND, ...) do not change the type.
            if flags_of(e.value(3)).is_none_or(|f| f & 0xFFFF_0001 != 0x0002_0000) {
                c.add(
                    e.line,
                    "event-log",
                    format!("EventMessageFile's type {} is not REG_EXPAND_SZ (0x00020000): %SystemRoot% would not expand", e.value(3)),
                );
            }
            if !named("IoLogMsg.dll") {
                c.add(
                    e.line,
                    "event-log",
                    "EventMessageFile does not name IoLogMsg.dll (the I/O manager's own messages)"
                        .to_string(),
                );
            }
            if let Some(binary) = binary.filter(|b| !named(b)) {
                c.add(
                    e.line,
                    "event-log",
                    format!("EventMessageFile does not name the service's binary {binary}, whose message table the entries' ids are in"),
                );
            }
        }
    }
    match find("TypesSupported") {
        Some(e)
            if flags_of(e.value(3)).is_some_and(|f| f & 0xFFFF_0001 == 0x0001_0001)
                && flags_of(e.value(4)) == Some(7) => {}
        Some(e) => c.add(
            e.line,
            "event-log",
            format!(
                "TypesSupported = {}, {}: want 0x00010001, 7 (error, warning, information)",
                e.value(3),
                e.value(4)
            ),
        ),
        None => missing(c, "TypesSupported"),
    }
}

fn boot_start(c: &mut Check<'_>, s: &Section) {
    let value = |key: &str| s.get(key).map(|e| (e.line, e.value(0).to_string()));
    let expect =
        |c: &mut Check<'_>, key: &str, ok: &dyn Fn(&str) -> bool, want: &str| match value(key) {
            Some((_, v)) if ok(&v) => {}
            Some((line, v)) => c.add(line, "boot-start", format!("{key} = {v}: {want}")),
            None => c.add(
                s.line,
                "boot-start",
                format!("[{}] has no {key}: {want}", s.name),
            ),
        };
    expect(c, "ServiceType", &|v| v == "1", "a kernel driver is 1");
    expect(
        c,
        "StartType",
        &|v| v == "0",
        "a boot bus driver starts at boot (0)",
    );
    expect(
        c,
        "ErrorControl",
        &|v| v == "1" || v == "3",
        "1 (normal) or 3 (critical)",
    );
    expect(
        c,
        "LoadOrderGroup",
        &|v| BOOT_GROUPS.iter().any(|g| g.eq_ignore_ascii_case(v)),
        "a group the boot loader loads",
    );
}

/// One service name, one way to add it, across the whole INF.
fn conflicts(c: &mut Check<'_>) {
    let inf = c.inf;
    let mut seen: BTreeMap<String, (usize, String, String)> = BTreeMap::new();
    for e in inf.sections.iter().flat_map(|s| s.all("AddService")) {
        let name = e.value(0).trim().to_ascii_lowercase();
        let flags = e.value(1).trim().to_ascii_lowercase();
        let section = e.value(2).trim().to_ascii_lowercase();
        match seen.get(&name) {
            Some((first, f, s)) if *f != flags || *s != section => c.add(e.line, "service-conflict", format!(
                "service {} is added again with flags {:?} and [{}] (first at line {first}; InfVerif 1333)",
                e.value(0),
                e.value(1),
                e.value(2)
            )),
            Some(_) => {}
            None => {
                seen.insert(name, (e.line, flags, section));
            }
        }
    }
}

/// The device's Security value: set by an AddReg of the install's .HW section.
fn security(c: &mut Check<'_>, install: &Section) {
    let inf = c.inf;
    let hw = format!("{}.HW", install.name);
    let sddl: Option<&Entry> = inf
        .section(&hw)
        .into_iter()
        .flat_map(|s| s.all("AddReg"))
        .flat_map(|e| e.values.iter())
        .filter_map(|name| inf.section(name))
        .flat_map(|s| s.entries.iter())
        .find(|e| e.value(2).eq_ignore_ascii_case("Security"));
    let Some(e) = sddl else {
        c.add(
            install.line,
            "security-sddl",
            format!("no HKR,,Security in an AddReg of [{hw}]"),
        );
        return;
    };
    let value = e.value(4);
    let aces: Vec<&str> = value
        .strip_prefix("D:P")
        .unwrap_or("")
        .split(')')
        .filter(|a| !a.is_empty())
        .collect();
    let trustees_ok = !aces.is_empty()
        && aces
            .iter()
            .all(|a| a.starts_with("(A;") && (a.ends_with(";;;SY") || a.ends_with(";;;BA")));
    if !trustees_ok {
        c.add(
            e.line,
            "security-sddl",
            format!("Security {value:?}: D:P with SY and BA only"),
        );
    }
}
