//! A slice of the hunt in the suite: 2,000 random scenarios of scripted clients (shaped fault
//! pairs among them) and a few of the full stack, with every guarantee and the I/O accounting
//! checked. `hcasim hunt --seeds 0..100000` runs the whole thing.

use hcabus_tools::hunt::{hunt, HuntConfig};

#[test]
fn two_thousand_random_scenarios_break_nothing_and_reach_every_outcome() {
    let config = HuntConfig {
        seeds: 0..2_000,
        jobs: std::thread::available_parallelism().map_or(1, usize::from),
        stack_every: 500,
    };
    let report = hunt(&config, &|_| {});
    assert_eq!(report.runs, 2_000);
    assert_eq!(report.stack_runs, 4);
    let failures: Vec<String> = report
        .failures
        .iter()
        .map(|f| format!("seed {}: {} (replay: {})", f.seed, f.what, f.replay()))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for outcome in [
        "Restored",
        "FirmwareChanged",
        "Aborted",
        "AbortedUnresponsive",
        "HardwareDead",
        "DeviceReplaced",
        "StormLimit",
        "AutoRestartExpired",
        "AutoRecoverOff",
        "Removed",
    ] {
        assert!(
            report.outcomes.contains_key(outcome),
            "{outcome} never reached: {:?}",
            report.outcomes
        );
    }
}
