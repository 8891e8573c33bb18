//! This project's written encoding of InfVerif's Windows Driver (`/w`) rules and of the
//! boot-start rules of a boot bus driver (../shared/windows-notes.md). It is not InfVerif:
//! passing it says the INF keeps the rules as we wrote them down, nothing more.
//!
//! Each rule encodes a class, from Microsoft's pages: "Using a Universal INF File" (the
//! sections and directives a universal INF may not use), "Driver package isolation" (DIRID
//! 13, HKR), the INF DriverVer, SourceDisksFiles, CopyFiles, DestinationDirs and AddService
//! references, and the InfVerif error codes of "INF Validation Errors and Warnings" where
//! Microsoft documents a number for them ([`Rule::infverif`]).

mod files;
pub mod kmdf_build;
mod registry;
mod services;
mod universal;
mod version;

use super::Inf;

/// One broken rule, where it is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub line: usize,
    pub rule: &'static str,
    pub message: String,
}

/// A rule: its name, the InfVerif error codes it encodes (empty where Microsoft documents the
/// rule without a number), and what it asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub name: &'static str,
    pub infverif: &'static str,
    pub what: &'static str,
}

const fn rule(name: &'static str, infverif: &'static str, what: &'static str) -> Rule {
    Rule {
        name,
        infverif,
        what,
    }
}

/// Every rule, for `infcheck --rules`, its help and the docs.
pub const RULES: [Rule; 23] = [
    rule("version-signature", "1001", "[Version] Signature is \"$WINDOWS NT$\""),
    rule("class-system", "", "Class = System with the System class GUID (a boot bus driver)"),
    rule("version-provider", "1204", "[Version] names a Provider, and it is not Microsoft"),
    rule("catalog-file", "", "[Version] names a CatalogFile (a signed package)"),
    rule("driver-ver", "1217", "[Version] has a DriverVer, and every DriverVer is mm/dd/yyyy (or mm-dd-yyyy, a real date) then w.x.y.z: four decimal fields below 65535, not 0.0.0.0"),
    rule("pnp-lockdown", "", "[Version] PnpLockdown = 1"),
    rule("dirid-13", "", "every DestinationDirs entry is DIRID 13 and every copied file has a destination (driver package isolation: run from the driver store; without DefaultDestDir a file goes to DIRID 11)"),
    rule("service-binary", "", "every ServiceBinary is %13%\\file, and every file a service names (ServiceBinary, EventMessageFile under %13%) is one its install section copies to DIRID 13; a kernel driver's binary is a .sys"),
    rule("registry-hkr", "", "AddReg sections write HKR-relative keys only (driver package isolation)"),
    rule("forbidden-section", "", "no section a universal INF may not have: ClassInstall32 (any decoration), DDInstall.CoInstallers, DDInstall.FactDef, DDInstall.LogConfigOverride; DefaultInstall only with an architecture decoration, and never beside [Manufacturer]"),
    rule("forbidden-directive", "", "no directive a universal INF may not use: BitReg, DelFiles, DelProperty, DelReg, DelService, Ini2Reg, LogConfig, ProfileItems, RegisterDlls, RenFiles, UnregisterDlls, UpdateIniFields, UpdateInis"),
    rule("target-os-version", "", "each [Manufacturer] decoration is NT[arch][.major[.minor[.ProductType[.SuiteMask[.build]]]]] with a known architecture, numeric versions, and no ProductType or SuiteMask (not allowed in a universal INF)"),
    rule("source-disks", "", "every copied file is in [SourceDisksFiles] on a disk of [SourceDisksNames], listed once; every listed file is copied"),
    rule("copy-conflict", "1330", "no destination file is copied from two different source files"),
    rule("registry-conflict", "1331, 1332", "no registry value is written twice with different types or data for one key (a device's, a service's)"),
    rule("service-conflict", "1333", "no service is added twice with different flags or install sections"),
    rule("section-exists", "1203", "every section a directive or a [Manufacturer] decoration names exists"),
    rule("kmdf-section", "", "the install section's .Wdf section names a KmdfService that the install adds, whose section sets KmdfLibraryVersion = 1.N"),
    rule("kmdf-min-build", "", "every [Manufacturer] decoration installs only on builds that carry the KMDF of KmdfLibraryVersion (Microsoft's KMDF Version History: 1.33 from build 20348)"),
    rule("event-log", "", "the function driver's AddService names an event-log section for the System log whose AddReg sets EventMessageFile (REG_EXPAND_SZ) to IoLogMsg.dll and the service's own binary, and TypesSupported (REG_DWORD) 7: without them Event Viewer finds no message for the driver's IoWriteErrorLogEntry entries (with --role child, only where the service names an event-log section: a child writes no entries of its own)"),
    rule("boot-start", "", "the service is a kernel driver (ServiceType 1) started at boot (StartType 0) in a boot load-order group, ErrorControl 1 or 3; exactly one service of the install is the device's function driver (AddService flag 0x00000002)"),
    rule("security-sddl", "", "the device's HKR Security SDDL grants SYSTEM and Administrators only, with a protected DACL"),
    rule("strings-defined", "", "every %string% is defined in [Strings]"),
];

/// The InfVerif codes the rules encode, in order, for the help.
pub fn infverif_codes() -> Vec<&'static str> {
    let mut codes: Vec<&str> = RULES
        .iter()
        .flat_map(|r| r.infverif.split(", "))
        .filter(|c| !c.is_empty())
        .collect();
    codes.sort_unstable();
    codes
}

/// What the package installs, which decides the rules that apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// The boot bus driver of the HCA's PCI function: it writes I/O error-log entries, so its
    /// service registers a message file (`event-log`).
    #[default]
    Bus,
    /// A function driver of one of the bus's PDOs (the sample child, an IPoIB or SRP driver):
    /// boot start too, since the boot disk rides on it, but it writes no error-log entries of
    /// its own, so an event-log section is checked only where it names one.
    Child,
}

/// The findings of one pass over an INF.
struct Check<'a> {
    inf: &'a Inf,
    role: Role,
    findings: Vec<Finding>,
}

impl Check<'_> {
    fn add(&mut self, line: usize, rule: &'static str, message: String) {
        debug_assert!(RULES.iter().any(|r| r.name == rule), "unlisted rule {rule}");
        self.findings.push(Finding {
            line,
            rule,
            message,
        });
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

/// Checks a boot bus driver's INF against every rule.
pub fn check(inf: &Inf) -> Vec<Finding> {
    check_as(inf, Role::Bus)
}

/// Checks an INF against every rule that applies to `role`.
pub fn check_as(inf: &Inf, role: Role) -> Vec<Finding> {
    let mut c = Check {
        inf,
        role,
        findings: Vec::new(),
    };
    version::check(&mut c);
    universal::check(&mut c);
    registry::check(&mut c);
    let copies = files::check(&mut c);
    services::check(&mut c, &copies);
    kmdf_build::check(&mut c);
    c.strings();
    c.findings.sort_by_key(|f| f.line);
    c.findings
}
