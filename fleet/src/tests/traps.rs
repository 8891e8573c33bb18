//! A trap storm: a bad cable on a leaf bounces, its switch traps each change, and the master
//! sweeps for each trap it hears until OpenSM's count makes it ignore the switch; a port on
//! that leaf then waits for the master's timer.

use hcabus::Duration;

use super::super::*;
use super::{run, setup, BOOT_MS};

fn storm(bounces: u32) -> FleetFault {
    FleetFault::TrapStorm {
        leaf: 1,
        down: Duration::from_ms(100),
        every: Duration::from_ms(3_000),
        bounces,
    }
}

/// Forty hosts, twenty a leaf; host 20's cable on leaf 1 bounces every 3 s, dark 100 ms. One
/// bounce is heard: two traps, two sweeps, its port swept as it trains. Six bounces: each
/// change traps (each sweep, 580 ms, clears the switch's bit before the next), 1.4 to 1.6 s
/// apart; the twelfth, the last bounce's return, is counted past ten: ignored, the bit left
/// set, and the port waits in Init for the timer's sweep 10 s after the last (the eleventh
/// trap's). The storm's row says so, and the run holds.
#[test]
fn a_storm_past_opensms_count_leaves_its_port_to_the_timer() {
    let mut at_once = None;
    for bounces in [1, 6] {
        let mut s = setup(40, std::vec![(2_000, storm(bounces))], RetryPolicy::Backoff);
        s.duration = Duration::from_ms(BOOT_MS + 3_000 * u64::from(bounces) + 30_000);
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        let t = f.traps.expect("a storm's figures");
        let r = f.faults.iter().find(|r| r.fault.name() == "trap_storm");
        let r = r.expect("the storm's row");
        assert_eq!(
            (r.hosts, r.back, r.per_leaf.as_slice()),
            (1, 1, [0, 1].as_slice())
        );
        assert_eq!(t.changes, 2 * u64::from(bounces));
        // Trained 1.5 s after the cable is back, swept in 500 ms.
        let heard = Duration::from_ms(100 + 1_500 + 500);
        if bounces == 1 {
            assert_eq!((t.traps, t.ignored, t.sweeps), (2, 0, 2), "{t:?}");
            assert_eq!(r.outage, heard);
            at_once = r.all_back_after;
        } else {
            // Eleven heard and swept, the twelfth ignored; the timer's sweep.
            assert_eq!((t.traps, t.ignored, t.sweeps), (12, 1, 12), "{t:?}");
            // The last sweep began at the last bounce and ended 580 ms later: the timer's
            // 10 s after it, then 500 ms.
            let timer = Duration::from_ms(580 + 10_000 + 500);
            assert_eq!(r.outage, timer, "{r:?}");
            assert!(r.all_back_after > at_once, "{r:?} against {at_once:?}");
            assert!(
                t.longest_deaf.as_us() + heard.as_us() >= r.outage.as_us(),
                "{t:?}"
            );
        }
    }
}

/// The master sweeps for each trap the storm's switch sends, one sweep at a time: leaf 0's
/// reboot, whose ports train from 4.7 s in (its spine's trap heard), while the sweep for the
/// storm's second down (4.5 s, 580 ms) is in progress, waits for it to end, 5.08 s, where
/// they would be swept from 4.7 s in turn (2 ms a host): its hosts are back later.
#[test]
fn a_leaf_reboot_elsewhere_waits_for_the_sweep_in_progress() {
    let reboot = FleetFault::LeafReboot {
        leaf: 0,
        down: Duration::from_ms(1_000),
    };
    let mut outages = Vec::new();
    for with_storm in [false, true] {
        let mut faults = std::vec![(2_200, reboot)];
        if with_storm {
            faults.insert(0, (1_500, storm(8)));
        }
        let mut s = setup(40, faults, RetryPolicy::Backoff);
        s.duration = Duration::from_ms(BOOT_MS + 60_000);
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        let r = f.faults.iter().find(|r| r.fault.name() == "leaf_reboot");
        let r = r.expect("the reboot's row");
        assert_eq!((r.hosts, r.back), (20, 20), "{r:?}");
        outages.push(r.all_back_after.expect("all back"));
    }
    let later = outages[1].as_us().saturating_sub(outages[0].as_us());
    assert!(later >= 250_000, "{outages:?}");
}
