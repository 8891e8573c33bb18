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

#[derive(Parser, Debug)]
#[command(
    name = "infcheck",
    version,
    about = "Check an INF against our encoding of InfVerif's Windows Driver (/w) rules and the boot-start rules",
    long_about = None,
    after_help = NOT_INFVERIF
)]
struct Cli {
    /// The INF (or .inx) to check.
    #[arg(required_unless_present = "rules")]
    file: Option<PathBuf>,
    /// List the rules and exit.
    #[arg(long)]
    rules: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.rules {
        for (name, what) in rules::RULES {
            println!("{name:<20} {what}");
        }
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
    let findings = rules::check(&parsed);
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
