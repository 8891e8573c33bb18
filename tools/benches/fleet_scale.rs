//! Ten thousand hosts (issue 64's fifth goal): `tests/scenarios/fleet/ten-thousand.toml`, a
//! fleet of 10,000 boot-from-SAN hosts on twenty targets powering on, through a target
//! restart and a subnet-manager failover, under the shipped policy; its wall time against
//! 60 s and its peak resident memory a host against 300 KB, each printed with PASS or MISS.
//!
//! `cargo bench -p hcabus-tools --bench fleet_scale` (about a minute on 2 cores; `--hosts N`
//! runs the same fleet at another size, for the curve of cost against size; `--workers N`
//! steps it on N threads, every core by default: the same run on any number).
//! The fleet runs alone in this process, so the process's peak resident set (Linux's
//! `VmHWM`) is the fleet's: every host, its targets and SA, the allocator's overhead, and
//! the program itself (a few MB, counted against the goal too). The run's figures are
//! checked as `hcasim fleet` checks them: a run that did not hold is no measurement.

use std::time::Instant as Wall;

use hcabus_tools::scenario;

/// The process's peak resident set, in KB (Linux); `None` elsewhere.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hosts = args
        .iter()
        .position(|a| a == "--hosts")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<u32>().ok());
    let workers = args
        .iter()
        .position(|a| a == "--workers")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/scenarios/fleet/ten-thousand.toml"
    );
    let text = std::fs::read_to_string(file).expect("the scenario");
    let mut s = scenario::fleet::parse(&text).expect("a fleet scenario");
    if let Some(n) = hosts {
        s.setup.hosts = n;
    }
    let started = Wall::now();
    let mut fleet = hcabus_fleet::Fleet::build(&s.setup).expect("the fleet builds");
    let built_s = started.elapsed().as_secs_f64();
    fleet.set_workers(workers);
    fleet.run();
    let wall_s = started.elapsed().as_secs_f64();
    let f = fleet.figures();
    let n = u64::from(s.setup.hosts);
    println!(
        "fleet {}: {n} hosts, {} targets, {} s of virtual time, the shipped policy, {workers} \
         threads",
        s.setup.name,
        s.setup.targets.len(),
        s.setup.duration.as_ms() / 1000
    );
    for r in &f.faults {
        println!(
            "  {:<16} {} of {} hosts back, all after {}",
            r.fault.name(),
            r.back,
            r.hosts,
            r.all_back_after
                .map_or("-".into(), |d| format!("{:.3} s", d.as_us() as f64 / 1e6))
        );
    }
    println!(
        "  host steps {} ({:.2} us each), built in {built_s:.1} s",
        f.steps,
        wall_s * 1e6 / f.steps.max(1) as f64
    );
    println!(
        "  wall time {wall_s:.1} s (goal <= 60 s): {}",
        verdict(wall_s <= 60.0)
    );
    match peak_rss_kb() {
        Some(kb) => println!(
            "  peak resident {:.2} GB, {} KB a host (goal <= 300 KB): {}",
            kb as f64 / 1e6,
            kb / n.max(1),
            verdict(kb / n.max(1) <= 300)
        ),
        None => println!("  peak resident: not measured here (Linux's /proc only)"),
    }
    assert!(
        f.held(),
        "the run broke a guarantee: {} violations, {} model overflows, {:?}",
        f.violations,
        f.model_overflows,
        f.io
    );
}
