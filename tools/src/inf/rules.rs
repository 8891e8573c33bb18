//! This project's written encoding of InfVerif's Windows Driver (`/w`) rules and of the
//! boot-start rules of a boot bus driver (../shared/windows-notes.md). It is not InfVerif:
//! passing it says the INF keeps the rules as we wrote them down, nothing more.

use super::{Entry, Inf, Section};

/// One broken rule, where it is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub line: usize,
    pub rule: &'static str,
    pub message: String,
}

/// Every rule: its name and what it asks, for `infcheck --rules` and the docs.
pub const RULES: [(&str, &str); 16] = [
    ("version-signature", "[Version] Signature is \"$WINDOWS NT$\""),
    ("class-system", "Class = System with the System class GUID (a boot bus driver)"),
    ("version-provider", "[Version] names a Provider"),
    ("catalog-file", "[Version] names a CatalogFile"),
    ("driver-ver", "[Version] has a DriverVer (stampinf sets it)"),
    ("pnp-lockdown", "[Version] PnpLockdown = 1"),
    ("dirid-13", "every DestinationDirs entry is DIRID 13 (run from the driver store)"),
    ("service-binary", "ServiceBinary is under %13% (the driver store)"),
    ("registry-hkr", "AddReg and DelReg write HKR-relative keys only"),
    ("forbidden-directive", "no ClassInstall32, CoInstallers, DelReg, DelFiles, RenFiles, RegisterDlls, UnregisterDlls, ProfileItems, UpdateInis, UpdateIniFields, Ini2Reg"),
    ("source-disks", "every copied file is in [SourceDisksFiles] on a disk of [SourceDisksNames]"),
    ("section-exists", "every section a directive names exists"),
    ("kmdf-section", "the install section's .Wdf section names a KmdfService whose section sets KmdfLibraryVersion"),
    ("boot-start", "the service is a kernel driver (ServiceType 1) started at boot (StartType 0) in a boot load-order group, ErrorControl 1 or 3"),
    ("security-sddl", "the device's HKR Security SDDL grants SYSTEM and Administrators only, with a protected DACL"),
    ("strings-defined", "every %string% is defined in [Strings]"),
];

/// Load-order groups loaded by the boot loader.
const BOOT_GROUPS: [&str; 4] = [
    "Boot Bus Extender",
    "System Bus Extender",
    "SCSI miniport",
    "Base",
];

const SYSTEM_CLASS_GUID: &str = "{4D36E97D-E325-11CE-BFC1-08002BE10318}";

const FORBIDDEN: [&str; 10] = [
    "CoInstallers",
    "DelReg",
    "DelFiles",
    "RenFiles",
    "RegisterDlls",
    "UnregisterDlls",
    "ProfileItems",
    "UpdateInis",
    "UpdateIniFields",
    "Ini2Reg",
];

/// Directives whose values name sections of this INF (Include and Needs name other INFs).
const SECTION_DIRECTIVES: [&str; 3] = ["CopyFiles", "AddReg", "DelReg"];

struct Check<'a> {
    inf: &'a Inf,
    findings: Vec<Finding>,
}

impl Check<'_> {
    fn add(&mut self, line: usize, rule: &'static str, message: String) {
        self.findings.push(Finding {
            line,
            rule,
            message,
        });
    }

    fn version(&mut self) {
        let Some(v) = self.inf.section("Version") else {
            self.add(1, "version-signature", "no [Version] section".into());
            return;
        };
        let line = v.line;
        match v.get("Signature") {
            Some(e) if e.value(0).eq_ignore_ascii_case("$WINDOWS NT$") => {}
            Some(e) => self.add(
                e.line,
                "version-signature",
                format!("Signature is {:?}", e.value(0)),
            ),
            None => self.add(line, "version-signature", "no Signature".into()),
        }
        let class = v.get("Class").map(|e| (e.line, e.value(0).to_string()));
        let guid = v.get("ClassGuid").map(|e| (e.line, e.value(0).to_string()));
        match (class, guid) {
            (Some((_, c)), Some((_, g)))
                if c.eq_ignore_ascii_case("System")
                    && g.eq_ignore_ascii_case(SYSTEM_CLASS_GUID) => {}
            (c, g) => {
                let at = c.as_ref().or(g.as_ref()).map_or(line, |x| x.0);
                self.add(at, "class-system", format!(
                    "Class {:?}, ClassGuid {:?}: a boot bus driver is Class=System, {SYSTEM_CLASS_GUID}",
                    c.map(|x| x.1), g.map(|x| x.1)
                ));
            }
        }
        for (key, rule) in [
            ("Provider", "version-provider"),
            ("CatalogFile", "catalog-file"),
            ("DriverVer", "driver-ver"),
        ] {
            if v.get(key).is_none_or(|e| e.value(0).is_empty()) {
                self.add(line, rule, format!("[Version] has no {key}"));
            }
        }
        match v.get("PnpLockdown") {
            Some(e) if e.value(0) == "1" => {}
            Some(e) => self.add(
                e.line,
                "pnp-lockdown",
                format!("PnpLockdown = {}", e.value(0)),
            ),
            None => self.add(line, "pnp-lockdown", "no PnpLockdown = 1".into()),
        }
    }

    fn destinations(&mut self) {
        for e in self.inf.entries("DestinationDirs") {
            if e.value(0).trim() != "13" {
                let key = e.key.clone().unwrap_or_default();
                self.add(
                    e.line,
                    "dirid-13",
                    format!("{key} goes to DIRID {}", e.value(0)),
                );
            }
        }
    }

    fn directives(&mut self) {
        if let Some(s) = self.inf.section("ClassInstall32") {
            self.add(
                s.line,
                "forbidden-directive",
                "a [ClassInstall32] section".into(),
            );
        }
        for s in &self.inf.sections {
            for e in &s.entries {
                let Some(key) = e.key.as_deref() else {
                    continue;
                };
                if let Some(f) = FORBIDDEN.iter().find(|f| f.eq_ignore_ascii_case(key)) {
                    self.add(
                        e.line,
                        "forbidden-directive",
                        format!("{f} in [{}]", s.name),
                    );
                }
                if key.eq_ignore_ascii_case("ServiceBinary") && !e.value(0).starts_with("%13%\\") {
                    self.add(
                        e.line,
                        "service-binary",
                        format!("ServiceBinary is {}", e.value(0)),
                    );
                }
                if SECTION_DIRECTIVES
                    .iter()
                    .any(|d| d.eq_ignore_ascii_case(key))
                {
                    for name in e.values.iter().filter(|v| !v.is_empty()) {
                        // CopyFiles = @file copies one file directly.
                        if !name.starts_with('@') && self.inf.section(name).is_none() {
                            self.add(
                                e.line,
                                "section-exists",
                                format!("{key} names [{name}], which does not exist"),
                            );
                        }
                    }
                }
            }
        }
    }

    /// The sections an AddReg or DelReg directive names, for the HKR rule.
    fn registry(&mut self) {
        let mut named = Vec::new();
        for s in &self.inf.sections {
            for e in s
                .entries
                .iter()
                .filter(|e| e.is("AddReg") || e.is("DelReg"))
            {
                named.extend(e.values.iter().filter(|v| !v.is_empty()).cloned());
            }
        }
        for name in named {
            let Some(section) = self.inf.section(&name) else {
                continue;
            };
            for e in &section.entries {
                let root = e.key.as_deref().unwrap_or(e.value(0));
                let root = root.split(',').next().unwrap_or("").trim();
                if !root.eq_ignore_ascii_case("HKR") {
                    self.add(
                        e.line,
                        "registry-hkr",
                        format!("[{name}] writes under {root}"),
                    );
                }
            }
        }
    }

    fn files(&mut self) {
        let disks: Vec<String> = self
            .inf
            .entries("SourceDisksNames")
            .chain(self.inf.entries("SourceDisksNames.amd64"))
            .filter_map(|e| e.key.clone())
            .collect();
        let mut listed = Vec::new();
        for e in self
            .inf
            .entries("SourceDisksFiles")
            .chain(self.inf.entries("SourceDisksFiles.amd64"))
        {
            let Some(file) = e.key.clone() else {
                continue;
            };
            if !disks.iter().any(|d| d == e.value(0)) {
                self.add(
                    e.line,
                    "source-disks",
                    format!(
                        "{file} is on disk {:?}, not in [SourceDisksNames]",
                        e.value(0)
                    ),
                );
            }
            listed.push(file.to_ascii_lowercase());
        }
        let copied: Vec<(usize, String)> = self.copied_files();
        for (line, file) in copied {
            if !listed.contains(&file.to_ascii_lowercase()) {
                self.add(
                    line,
                    "source-disks",
                    format!("{file} is copied but not in [SourceDisksFiles]"),
                );
            }
        }
    }

    /// Every file a CopyFiles directive copies, directly (`@file`) or by its file list.
    fn copied_files(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for s in &self.inf.sections {
            for e in s.entries.iter().filter(|e| e.is("CopyFiles")) {
                for v in e.values.iter().filter(|v| !v.is_empty()) {
                    if let Some(file) = v.strip_prefix('@') {
                        out.push((e.line, file.to_string()));
                    } else if let Some(list) = self.inf.section(v) {
                        out.extend(list.entries.iter().map(|f| {
                            let name = f.key.clone().unwrap_or_else(|| f.value(0).to_string());
                            (f.line, name)
                        }));
                    }
                }
            }
        }
        out
    }

    fn strings(&mut self) {
        for (line, name) in &self.inf.undefined_strings {
            self.add(
                *line,
                "strings-defined",
                format!("%{name}% is not in [Strings]"),
            );
        }
    }
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

fn kmdf_and_services(check: &mut Check<'_>) {
    let inf = check.inf;
    let installs = install_sections(inf);
    if installs.is_empty() {
        check.add(
            1,
            "section-exists",
            "no install section reached from [Manufacturer]".into(),
        );
    }
    for install in installs {
        let wdf = format!("{}.Wdf", install.name);
        match inf.section(&wdf) {
            Some(w) => match w.get("KmdfService") {
                Some(k) => match inf.section(k.value(1)) {
                    Some(s) if s.get("KmdfLibraryVersion").is_some() => {}
                    _ => check.add(
                        k.line,
                        "kmdf-section",
                        format!("[{}] sets no KmdfLibraryVersion", k.value(1)),
                    ),
                },
                None => check.add(
                    w.line,
                    "kmdf-section",
                    format!("[{wdf}] has no KmdfService"),
                ),
            },
            None => check.add(install.line, "kmdf-section", format!("no [{wdf}] section")),
        }
        let services = format!("{}.Services", install.name);
        let Some(svc) = inf.section(&services) else {
            check.add(
                install.line,
                "boot-start",
                format!("no [{services}] section"),
            );
            continue;
        };
        let Some(add) = svc.get("AddService") else {
            check.add(
                svc.line,
                "boot-start",
                format!("[{services}] adds no service"),
            );
            continue;
        };
        match inf.section(add.value(2)) {
            Some(s) => boot_start(check, s),
            None => check.add(
                add.line,
                "section-exists",
                format!("AddService names [{}], which does not exist", add.value(2)),
            ),
        }
        // The event log install section (IoWriteErrorLogEntry's message table).
        let log = add.value(3);
        if !log.is_empty() && inf.section(log).is_none() {
            check.add(
                add.line,
                "section-exists",
                format!("AddService names [{log}], which does not exist"),
            );
        }
        security(check, install);
    }
}

fn boot_start(check: &mut Check<'_>, s: &Section) {
    let value = |key: &str| s.get(key).map(|e| (e.line, e.value(0).to_string()));
    let expect = |check: &mut Check<'_>, key: &str, ok: &dyn Fn(&str) -> bool, want: &str| {
        match value(key) {
            Some((_, v)) if ok(&v) => {}
            Some((line, v)) => check.add(line, "boot-start", format!("{key} = {v}: {want}")),
            None => check.add(
                s.line,
                "boot-start",
                format!("[{}] has no {key}: {want}", s.name),
            ),
        }
    };
    expect(check, "ServiceType", &|v| v == "1", "a kernel driver is 1");
    expect(
        check,
        "StartType",
        &|v| v == "0",
        "a boot bus driver starts at boot (0)",
    );
    expect(
        check,
        "ErrorControl",
        &|v| v == "1" || v == "3",
        "1 (normal) or 3 (critical)",
    );
    expect(
        check,
        "LoadOrderGroup",
        &|v| BOOT_GROUPS.iter().any(|g| g.eq_ignore_ascii_case(v)),
        "a group the boot loader loads",
    );
}

/// The device's Security value: set by an AddReg of the install's .HW section.
fn security(check: &mut Check<'_>, install: &Section) {
    let inf = check.inf;
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
        check.add(
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
        check.add(
            e.line,
            "security-sddl",
            format!("Security {value:?}: D:P with SY and BA only"),
        );
    }
}

/// Checks an INF against every rule.
pub fn check(inf: &Inf) -> Vec<Finding> {
    let mut c = Check {
        inf,
        findings: Vec::new(),
    };
    c.version();
    c.destinations();
    c.directives();
    c.registry();
    c.files();
    c.strings();
    kmdf_and_services(&mut c);
    c.findings.sort_by_key(|f| f.line);
    c.findings
}
