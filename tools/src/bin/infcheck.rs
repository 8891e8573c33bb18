//! infcheck: checks an INF against this project's written encoding of InfVerif's Windows
//! Driver (`/w`) rules and the boot-start rules of a boot bus driver.
//!
//! It is not InfVerif and says so: InfVerif ships only in the WDK, which these machines do not
//! have. Exit status: 0 no finding, 1 findings, 2 the file could not be read or is not an INF.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hcabus_tools::inf::{self, rules};

const NOT_INFVERIF: &str = "infcheck checks this project's written encoding of InfVerif's /w \
     rules and the boot-start rules; it does not run Microsoft's InfVerif, and passing it does \
     not mean InfVerif passes.";

/// What the rules encode, for the help: InfVerif's numbered errors where Microsoft documents a
/// number, and the pages the unnumbered rules come from.
const ENCODES: &str = "Encodes InfVerif errors 1001 (Version signature), 1203 (section not \
     found), 1204 (Provider is Microsoft), 1217 (DriverVer not w.x.y.z below 65535), 1330 (one \
     destination copied from two sources), 1331 and 1332 (a registry value written twice \
     differently), 1333 (a service added twice differently); the sections and directives \
     Microsoft's \"Using a Universal INF File\" forbids (ClassInstall32, DDInstall.CoInstallers, \
     .FactDef, .LogConfigOverride, DefaultInstall without an architecture or beside \
     [Manufacturer], a ProductType or SuiteMask decoration; BitReg, DelFiles, DelProperty, \
     DelReg, DelService, Ini2Reg, LogConfig, ProfileItems, RegisterDlls, RenFiles, \
     UnregisterDlls, UpdateIniFields, UpdateInis); driver package isolation (DIRID 13, HKR, \
     PnpLockdown); file copies (every source listed once and used, every destination \
     resolved); service binaries the package copies; the boot-start rules of a boot bus \
     driver. `--rules` lists each rule with its InfVerif number.";

#[derive(Parser, Debug)]
#[command(
    name = "infcheck",
    version,
    about = "Check an INF against our encoding of InfVerif's Windows Driver (/w) rules and the boot-start rules",
    long_about = None,
    after_help = format!("{ENCODES}\n\n{NOT_INFVERIF}")
)]
struct Cli {
    /// The INF (or .inx) to check.
    #[arg(required_unless_present = "rules")]
    file: Option<PathBuf>,
    /// List the rules and exit.
    #[arg(long)]
    rules: bool,
    /// What the package installs: the boot bus driver, or a function driver of one of its
    /// PDOs (no event-log section required: it writes no error-log entries of its own).
    #[arg(long, value_enum, default_value_t = RoleArg::Bus)]
    role: RoleArg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum RoleArg {
    Bus,
    Child,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.rules {
        for r in rules::RULES {
            let codes = if r.infverif.is_empty() {
                "-"
            } else {
                r.infverif
            };
            println!("{:<20} {:<11} {}", r.name, codes, r.what);
        }
        println!("\n(the middle column: the InfVerif error numbers a rule encodes)");
        println!("\n{NOT_INFVERIF}");
        return ExitCode::SUCCESS;
    }
    let Some(path) = cli.file else {
        return ExitCode::from(2);
    };
    let text = match std::fs::read(&path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                eprintln!(
                    "infcheck: {}: not UTF-8 text (save the INF as UTF-8)",
                    path.display()
                );
                return ExitCode::from(2);
            }
        },
        Err(e) => {
            eprintln!("infcheck: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let parsed = match inf::parse(&text) {
        Ok(i) => i,
        Err(e) => {
            eprintln!(
                "infcheck: {}:{}: not an INF: {}",
                path.display(),
                e.line,
                e.problem
            );
            return ExitCode::from(2);
        }
    };
    let role = match cli.role {
        RoleArg::Bus => rules::Role::Bus,
        RoleArg::Child => rules::Role::Child,
    };
    let findings = rules::check_as(&parsed, role);
    for f in &findings {
        println!("{}:{}: [{}] {}", path.display(), f.line, f.rule, f.message);
    }
    println!(
        "infcheck: {}: {} finding(s) against {} rules. {NOT_INFVERIF}",
        path.display(),
        findings.len(),
        rules::RULES.len()
    );
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
