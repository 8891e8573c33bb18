//! Spurious give-ups over seeds (docs/failslow.md "Spurious give-ups over seeds"): the
//! traces where no path is worse, under the adaptive timeout, at 200 and 2,000 IOPS, over
//! seeds 1..41 unless given (`cargo bench -p hcabus-tools --bench spurious -- 41..81`: a
//! shard; the cells of several shards add up, I/Os and give-ups alike).
//!
//! The figures are the simulator's virtual time, the same on any machine for their seeds;
//! only the wall time printed last depends on this one.

use std::path::Path;
use std::time::Instant as Wall;

use hcabus_tools::failslow::campaign;

fn seeds() -> Result<std::ops::Range<u64>, String> {
    let Some(arg) = std::env::args().skip(1).find(|a| a.contains("..")) else {
        return Ok(1..41);
    };
    let (a, b) = arg.split_once("..").ok_or("seeds: A..B")?;
    let (a, b) = (a.parse::<u64>(), b.parse::<u64>());
    match (a, b) {
        (Ok(a), Ok(b)) if a < b => Ok(a..b),
        _ => Err(format!("seeds: A..B with A < B, not {arg:?}")),
    }
}

fn main() {
    let start = Wall::now();
    let seeds = seeds().unwrap_or_else(|e| {
        eprintln!("spurious bench: {e}");
        std::process::exit(2);
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/failslow");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    match campaign::spurious(&dir, seeds, &[200, 2_000], threads) {
        Ok(cells) => print!("{}", campaign::render(&cells)),
        Err(e) => {
            eprintln!("spurious bench: {e}");
            std::process::exit(1);
        }
    }
    println!(
        "\n{:.1} s of wall time on {threads} threads",
        start.elapsed().as_secs_f64()
    );
}
