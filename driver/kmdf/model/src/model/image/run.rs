//! The model's scenarios on the image: `HCABUS_IMAGE` names the .sys (CI sets it to
//! linkcheck's output); each scenario runs in its own process as on the Linux build, the
//! child told which image by `harness::IMAGE`. Without `HCABUS_IMAGE` the test says it was skipped
//! and why.

use std::string::String;
use std::vec::Vec;

use super::super::harness::{run_on, run_with, Outcome, CHILD_IMAGE, IMAGE};
use super::super::{violation, Rule};

/// The user's (and CI's) variable: the image to run the scenarios on.
const USER_IMAGE: &str = "HCABUS_IMAGE";

/// The user's (and CI's) variable: the sample child driver's image, run beside the bus's.
const USER_CHILD_IMAGE: &str = "HCABUS_CHILD_IMAGE";

/// In the scenario's process: loads the image if the parent named one, and the child
/// driver's beside it if it named that too.
pub(crate) fn load_if_asked() {
    let path = std::env::var(IMAGE).unwrap_or_default();
    if path.is_empty() {
        return;
    }
    if let Err(e) = super::load(&path) {
        violation(Rule::Expectation, "(loader)", &format!("{path}: {e}"));
    }
    let child = std::env::var(CHILD_IMAGE).unwrap_or_default();
    if child.is_empty() {
        return;
    }
    if let Err(e) = super::load_slot(super::CHILD, &child, "hcabus_child") {
        violation(Rule::Expectation, "(loader)", &format!("{child}: {e}"));
    }
}

/// In the scenario's process, at its end: each entry point's deepest stack and the pool the
/// image still holds, on lines the parent reads.
pub(crate) fn report() {
    let Some(image) = super::get() else {
        return;
    };
    for (name, bytes, calls) in super::stacks::report() {
        println!("image stack: {name}: {bytes} bytes ({calls} calls)");
    }
    let (blocks, bytes) = super::pool::outstanding();
    println!(
        "image pool: {blocks} blocks, {bytes} bytes held; {} imports bound",
        image.imports().len()
    );
}

/// The model's scenarios on the image: each that plants no defect (a planted defect is
/// compiled into the Linux build only), with what it must end in.
pub(crate) const SCENARIOS: &[(&str, Ends)] = &[
    ("life", Ends::Passes),
    ("control_create_fails", Ends::Passes),
    ("lock_create_fails", Ends::Passes),
    ("footprint", Ends::Passes),
    ("child_outlives_fdo", Ends::Passes),
    // The model's own rule, on the image as on the Linux build: a child that never gives
    // the interface back leaves the FDO referenced at unload.
    (
        "child_keeps_interface",
        Ends::Caught("ReferenceLeak in DriverUnload"),
    ),
    ("rebalance_with_a_child", Ends::Passes),
    ("query_interface_as_kmdf", Ends::Passes),
    ("sleep", Ends::Passes),
    ("handle_outlives_fdo", Ends::Passes),
    ("special_files", Ends::Passes),
    ("sleep_during_reset", Ends::Passes),
    ("shutdown", Ends::Passes),
    ("stop_during_reset", Ends::Passes),
    ("names_across_disable", Ends::Passes),
    ("stopped_wait_on_the_clock", Ends::Passes),
    ("failed_restart", Ends::Passes),
    ("reset_after_query_stop", Ends::Passes),
    ("name_fails", Ends::Passes),
    ("error_log_refused", Ends::Passes),
    // ETW and the System log (`tracing.rs`).
    ("reset_fails", Ends::Passes),
    ("etw_sessions", Ends::Passes),
    ("etw_refused", Ends::Passes),
    // The HLK's Device Fundamentals sequences (`hlk.rs`).
    ("df_disable_enable", Ends::Passes),
    ("df_rebalance", Ends::Passes),
    ("df_surprise_remove", Ends::Passes),
    ("df_sleep", Ends::Passes),
    // Four processors (shuttle), each running the image on its own kernel stack: the races
    // of docs/windows.md, and CHAOS.
    ("races", Ends::Passes),
    ("chaos", Ends::Passes),
];

/// The scenarios of the bus's image and the child driver's together (`two.rs`).
pub(crate) const TWO_SCENARIOS: &[(&str, Ends)] = &[
    ("two_images_load", Ends::Passes),
    ("two_child_rides_resets", Ends::Passes),
    ("two_child_io_across_resets", Ends::Passes),
    ("two_child_power_rebalance_reload", Ends::Passes),
    ("two_child_surprise_bus", Ends::Passes),
    ("two_child_late", Ends::Passes),
    ("two_child_ipoib_and_srp", Ends::Passes),
    // Four processors (shuttle), each running either image on its own kernel stack.
    ("two_child_races", Ends::Passes),
];

/// How a scenario on the image must end.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ends {
    Passes,
    /// Stopped by the model with a line that says this.
    Caught(&'static str),
}

/// What the scenarios' processes said about the stack, merged: (entry point, deepest, calls).
fn stacks(outcomes: &[(String, Outcome)]) -> Vec<(String, usize, usize)> {
    let mut merged: Vec<(String, usize, usize)> = Vec::new();
    for (_, o) in outcomes {
        for line in o.stdout.lines() {
            // The first line the scenario prints follows the harness's "test ... ".
            let Some(rest) = line.split_once("image stack: ").map(|(_, r)| r) else {
                continue;
            };
            let Some((name, tail)) = rest.rsplit_once(": ") else {
                continue;
            };
            let mut words = tail.split(' ');
            let bytes: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            let calls: usize = tail
                .split('(')
                .nth(1)
                .and_then(|c| c.split(' ').next())
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            match merged.iter_mut().find(|(n, _, _)| n == name) {
                Some((_, b, c)) => {
                    *b = (*b).max(bytes);
                    *c += calls;
                }
                None => merged.push((name.into(), bytes, calls)),
            }
        }
    }
    merged.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    merged
}

/// The image named by `HCABUS_IMAGE` and its SHA-256, or why the tests are skipped.
fn image() -> Option<(String, String)> {
    let path = std::env::var(USER_IMAGE).unwrap_or_default();
    if path.is_empty() {
        println!(
            "image: skipped: {USER_IMAGE} names no driver image (../shared/wdk-kit/linkcheck.sh \
             links target/wdk-kit/link/hcabus_kmdf.sys; .ci/run sets it)"
        );
        return None;
    }
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{USER_IMAGE}={path}: {e}"));
    Some((path, super::sha256_hex(&data)))
}

fn ended(scenario: &str, o: &Outcome, ends: Ends) {
    match ends {
        Ends::Passes => assert_eq!(
            o.code,
            Some(0),
            "scenario {scenario} on the image failed:\n{}\n{}",
            o.stdout,
            o.stderr
        ),
        Ends::Caught(what) => assert!(
            o.code == Some(super::super::BUGCHECK_EXIT) && o.stderr.contains(what),
            "scenario {scenario} on the image: not stopped with {what}:\n{}",
            o.stderr
        ),
    }
}

#[test]
fn the_scenarios_pass_on_the_image() {
    let Some((path, sha256)) = image() else {
        return;
    };
    let mut outcomes = Vec::new();
    for &(scenario, ends) in SCENARIOS {
        let o = run_on(scenario, None, Some(&path));
        ended(scenario, &o, ends);
        outcomes.push((scenario.to_string(), o));
    }
    for (name, bytes, calls) in stacks(&outcomes) {
        println!("image stack: {name}: {bytes} bytes, {calls} calls");
    }
    // What the schedules on other processors reached, and how often they switched.
    for (name, o) in &outcomes {
        for line in o.stdout.lines().filter_map(super::super::races::reached) {
            println!("image {name}: {line}");
        }
    }
    println!(
        "image: {} scenarios passed on sha256 {sha256}",
        outcomes.len()
    );
}

/// The child driver's image named by `HCABUS_CHILD_IMAGE` with the bus's, or why the
/// two-image scenarios are skipped.
fn child_image() -> Option<(String, String, String, String)> {
    let (bus, bus_sha) = image()?;
    let path = std::env::var(USER_CHILD_IMAGE).unwrap_or_default();
    if path.is_empty() {
        println!(
            "image+child: skipped: {USER_CHILD_IMAGE} names no child driver image \
             (WDK_KIT_PACKAGE=hcabus-child-kmdf ../shared/wdk-kit/linkcheck.sh links \
             target/wdk-kit/link/hcabus_child_kmdf.sys; .ci/run sets it)"
        );
        return None;
    }
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{USER_CHILD_IMAGE}={path}: {e}"));
    Some((bus, bus_sha, path, super::sha256_hex(&data)))
}

#[test]
fn the_bus_and_the_child_driver_run_together_as_images() {
    let Some((bus, bus_sha, child, child_sha)) = child_image() else {
        return;
    };
    for &(scenario, ends) in TWO_SCENARIOS {
        let o = run_with(scenario, None, Some(&bus), Some(&child));
        ended(scenario, &o, ends);
        // What the schedules on other processors reached, and how often they switched.
        for line in o.stdout.lines() {
            if let Some(at) = line.find("conc: ").or_else(|| line.find(" reached: ")) {
                let from = line[..at].rfind([' ', '.']).map_or(0, |i| i + 1);
                println!("image+child {scenario}: {}", &line[from..]);
            }
        }
    }
    println!(
        "image+child: {} scenarios passed on sha256 {bus_sha} with child sha256 {child_sha}",
        TWO_SCENARIOS.len()
    );
}

/// The allocation walk on the image: each pool allocation of add and start refused in turn
/// (ExAllocatePool2 answers NULL, a KMDF object's create fails), and the driver answers
/// STATUS_INSUFFICIENT_RESOURCES, leaks nothing and unloads.
#[test]
fn every_allocation_of_add_and_start_may_fail_on_the_image() {
    let Some((path, _)) = image() else {
        return;
    };
    for n in 0..400 {
        let o = run_on(&format!("pool_short:{n}"), None, Some(&path));
        ended(&format!("pool_short:{n}"), &o, Ends::Passes);
        if o.stdout.contains("refused=false") {
            assert!(n > 20, "only {n} allocations in add and start");
            println!("image: the allocation walk refused each of {n} allocations in turn");
            return;
        }
    }
    panic!("add and start asked for more than 400 allocations on the image");
}
