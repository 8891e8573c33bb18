//! Leaf switches: a leaf's reboot takes the ports cabled to it, and its blast radius is what
//! those hosts had on it: a single-homed host its boot disk, a dual-rail one a path.

use hcabus::Duration;

use super::super::*;
use super::{run, setup, BOOT_MS};

fn leaf_reboot(leaf: u32, down_ms: u64) -> FleetFault {
    FleetFault::LeafReboot {
        leaf,
        down: Duration::from_ms(down_ms),
    }
}

/// Forty boot hosts of one adapter, twenty a leaf: leaf 1's reboot of 30 s takes hosts 20 to
/// 39 and every path of their boot disks. Their paging I/O waits it out, past MPIO's 20 s;
/// every one is back after it, and leaf 0's hosts never noticed.
#[test]
fn a_leaf_reboot_cuts_the_boot_disk_of_every_single_homed_host_on_it() {
    let mut s = setup(
        40,
        std::vec![(2_000, leaf_reboot(1, 30_000))],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 45_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    assert_eq!((r.fault.name(), r.hosts, r.back), ("leaf_reboot", 20, 20));
    assert_eq!(
        (r.per_leaf.as_slice(), r.boot_disks_cut),
        ([0, 20].as_slice(), 20)
    );
    assert_eq!(r.leaves_touched(), (1, 20));
    // Down 30 s, then trained (1.5 s) and swept (500 ms, 2 ms a host of the leaf).
    assert_eq!(r.outage, Duration::from_ms(30_000 + 1_500 + 500 + 38));
    assert!(r.all_back_after >= Some(r.theoretical_min), "{r:?}");
    assert_eq!(f.paging_over_pdo_remove, 20, "{:?}", f.paging_stall);
    assert_eq!(f.paging_over_disk_timeout, 0);
    // The power-on's own figures: every host on its own leaf, all twenty on each.
    assert_eq!(f.faults[0].per_leaf, [20, 20]);
}

/// The same reboot under dual-rail multipath hosts (each host's second adapter on the next
/// leaf): it takes a path of forty hosts and the boot disk of none. No paging I/O waits it
/// out; every path is back after it.
#[test]
fn a_leaf_reboot_takes_one_path_of_a_dual_rail_host_and_no_boot_disk() {
    let mut s = setup(
        40,
        std::vec![(2_000, leaf_reboot(1, 30_000))],
        RetryPolicy::Backoff,
    );
    s.host = FleetTemplate::Many(multipath_host(20, 10));
    s.duration = Duration::from_ms(BOOT_MS + 45_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    // Leaf 1 holds hosts 20..40's first adapters and hosts 0..20's second ones.
    assert_eq!((r.hosts, r.back, r.boot_disks_cut), (40, 40, 0), "{r:?}");
    assert_eq!(r.per_leaf, [20, 20]);
    assert_eq!(f.paging_over_pdo_remove, 0, "{:?}", f.paging_stall);
    assert!(
        f.paging_stall[2] < Duration::from_ms(5_000),
        "{:?}",
        f.paging_stall
    );
    assert_eq!(f.max_no_path_us, 0, "no boot disk was ever without a path");
}

/// A leaf the hosts do not fill, and a leaf of no ports, are refused by key.
#[test]
fn a_leaf_that_is_not_there_is_refused() {
    let s = setup(
        40,
        std::vec![(2_000, leaf_reboot(2, 1_000))],
        RetryPolicy::Backoff,
    );
    let e = Fleet::build(&s).expect_err("two leaves");
    assert_eq!(
        e.to_string(),
        "faults[0].leaf: no leaf 2 (the fleet's hosts fill 2)"
    );
    for per in [0, MAX_HOSTS_PER_LEAF + 1] {
        let e = Fleet::build(&FleetSetup {
            hosts_per_leaf: per,
            faults: std::vec::Vec::new(),
            ..s.clone()
        })
        .expect_err("no such switch");
        assert!(e.to_string().starts_with("hosts_per_leaf"), "{e}");
    }
}
