//! hcasim: runs the bus driver, a simulated HCA and its clients in virtual time.

use std::alloc::System;
use std::process::ExitCode;

use clap::Parser;
use hcabus::sim::{random_setup, scenarios, SimHost};
use hcabus_tools::timeline;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations so far, all threads: the per-reset "allocs" column is its difference.
fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

/// Run the hcabus soft-reset coordinator on a simulated HCA.
///
/// With no arguments: the embedded boot-from-SAN scenario (IBAL, IPoIB on two ports, a boot
/// disk, a data LUN, a user-verbs context) hits a catastrophic error and recovers.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Seed of the run (the default scenario's own seed otherwise).
    #[arg(long)]
    seed: Option<u64>,
    /// Run a random scenario generated from this seed instead (clients, faults, policy).
    #[arg(long, value_name = "SEED")]
    random: Option<u64>,
    /// Also print every flight-recorder record.
    #[arg(long)]
    flight_record: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        // Logging formats text, which allocates: only when asked for.
        env_logger::init();
    }
    let mut setup = match cli.random {
        Some(seed) => random_setup(seed),
        None => scenarios::boot_from_san(),
    };
    if let Some(seed) = cli.seed {
        setup.seed = seed;
    }
    let mut host = match SimHost::new(&setup) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("hcasim: scenario '{}': {e}", setup.name);
            return ExitCode::from(2);
        }
    };
    host.set_alloc_probe(allocations);
    host.run();
    print!("{}", timeline::render(&host));
    if cli.flight_record {
        println!();
        println!("flight record:");
        print!("{}", timeline::flight_record(&host));
    }
    if host.checker().violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
