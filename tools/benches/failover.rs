//! The fail-slow trace set under each path timeout, side by side (issue 46; docs/design.md §7
//! "Adaptive path timeout"): `cargo bench -p hcabus-tools --bench failover`.
//!
//! The figures are the simulator's virtual time, the same on any machine for the traces'
//! seeds; only the wall time printed last depends on this one.

use std::path::Path;
use std::time::Instant as Wall;

use hcabus_tools::failslow;

fn main() {
    let start = Wall::now();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/failslow");
    let runs = match failslow::run_all(&dir) {
        Ok(runs) => runs,
        Err(e) => {
            eprintln!("failover bench: {e}");
            std::process::exit(1);
        }
    };
    print!("{}", failslow::render(&runs));
    println!(
        "\n{} runs of {} traces in {:.1} s of wall time",
        runs.len(),
        failslow::TRACES.len(),
        start.elapsed().as_secs_f64()
    );
}
