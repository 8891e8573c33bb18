//! Linux initiators beside the hosts: ib_srp's channels, each a login the targets serve in
//! the same queue as the product's disks.

use hcabus::Duration;

use hcabus_lab::srp_target::LoginCapacity;

use super::super::*;
use super::{restart, run, setup};

/// Thirty hosts on two Linux targets (one login at a time, 20 ms each), with `linux`
/// initiators of `ch_count` channels beside them.
fn with_linux(faults: Vec<(u64, FleetFault)>, linux: u32, ch_count: u8) -> FleetSetup {
    let mut s = setup(30, faults, RetryPolicy::Backoff);
    for t in &mut s.targets {
        t.capacity = LoginCapacity::IB_SRPT;
    }
    s.linux = (linux > 0).then_some(LinuxSetup {
        hosts: linux,
        ch_count,
    });
    s
}

/// Twenty Linux initiators of eight channels log in with the fleet: 160 logins, one
/// PathRecord each, in the targets' queues beside the hosts' 60 disks. Every one is up, and
/// the hosts' power-on is back later than with none: the targets served theirs too.
#[test]
fn linux_initiators_log_in_every_channel_and_the_hosts_wait_behind_them() {
    let alone = run(&with_linux(Vec::new(), 0, 0));
    let f = run(&with_linux(Vec::new(), 20, 8));
    assert!(alone.held() && f.held(), "{f:?}");
    assert_eq!(alone.linux, None);
    let l = f.linux.expect("Linux figures");
    assert_eq!(
        (
            l.hosts,
            l.ch_count,
            l.channels,
            l.path_records,
            l.failed,
            l.up
        ),
        (20, 8, 160, 160, 0, 20),
        "{l:?}"
    );
    // Each target took its 80 channels and its hosts' disks one at a time.
    let accepted = |f: &FleetFigures| f.targets.iter().map(|t| t.stats.accepted).sum::<u64>();
    assert_eq!(accepted(&f), accepted(&alone) + 160);
    let back = |f: &FleetFigures| f.faults[0].all_back_after.expect("the power-on is back");
    assert!(
        back(&f) > back(&alone),
        "{:?} against {:?}",
        back(&f),
        back(&alone)
    );
}

/// A target's restart drops its Linux initiators' channels: each reconnects the transport's
/// 10 s later. Down 1 s, the target answers at once: eight channels again. Down 15 s, each
/// first REQ meets it restarting and is sent again at the CM's 6.1 s, answered. The other
/// target's initiators never notice.
#[test]
fn a_target_restart_logs_its_linux_initiators_in_again_after_the_transports_delay() {
    for (down_ms, reqs_again) in [(1_000, 0), (15_000, 10)] {
        let mut s = with_linux(std::vec![(2_000, restart(0, down_ms))], 20, 8);
        s.duration = Duration::from_ms(super::BOOT_MS + 30_000);
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        let l = f.linux.expect("Linux figures");
        // Ten of them on target 0, eight channels each again.
        assert_eq!(
            (l.reqs_again, l.channels, l.up, l.failed),
            (reqs_again, 240, 20, 0),
            "{l:?}"
        );
        let waited = 10_000 + if reqs_again > 0 { 6_144 } else { 0 };
        assert!(l.longest_login > Duration::from_ms(waited), "{l:?}");
    }
}

/// An array that refuses past four logins at once turns some of the power-on's channels
/// away: each such first login fails at its REJ and is made again at srp_daemon's next
/// rescan, a minute later; every initiator is up in the end.
#[test]
fn a_first_login_an_array_refuses_waits_for_srp_daemons_rescan() {
    let mut s = with_linux(Vec::new(), 20, 8);
    for t in &mut s.targets {
        t.capacity = LoginCapacity::refusing(4, 100);
    }
    s.duration = Duration::from_ms(super::BOOT_MS + 130_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let l = f.linux.expect("Linux figures");
    assert!(l.failed > 0, "{l:?}");
    assert_eq!(l.up, 20, "{l:?}");
    assert!(l.longest_login > Duration::from_ms(60_000), "{l:?}");
}

/// With a power-restore delay of 10 to 20 s, each initiator powers on after its own (a
/// stream of its own, as the hosts'): the last logs in no sooner than the shortest delay
/// and its port's training, and every one is up.
#[test]
fn linux_initiators_power_on_after_their_own_delays() {
    let mut s = with_linux(Vec::new(), 20, 2);
    s.power_on.delay = (Duration::from_ms(10_000), Duration::from_ms(20_000));
    s.duration = Duration::from_ms(40_000);
    let f = run(&s);
    let l = f.linux.expect("Linux figures");
    assert_eq!((l.up, l.channels, l.failed), (20, 40, 0), "{l:?}");
    assert!(l.longest_login > Duration::from_ms(10_000), "{l:?}");
    assert!(l.longest_login < Duration::from_ms(25_000), "{l:?}");
}

/// The transport's wait between reconnects: 10 s up to ten failures in a row, then 10 s
/// times the failures past ten, at most a hundred times (`srp_reconnect_work()`).
#[test]
fn the_reconnect_delay_grows_past_ten_failures_in_a_row() {
    let secs = |n| crate::linux::reconnect_delay(n).as_us() / 1_000_000;
    assert_eq!(
        [0, 1, 11, 12, 13, 50, 110, 111, u32::MAX].map(secs),
        [10, 10, 10, 20, 30, 400, 1_000, 1_000, 1_000]
    );
}

/// A target down 700 s: its ten Linux initiators' reconnects (each sending its REQs into the
/// silence for 98 s) go on until `dev_loss_tmo`, 600 s after the loss, removes their
/// connections; srp_daemon adds each target again at its next rescan, and once the target
/// is back every one logs in again. Down 60 s, none is removed.
#[test]
fn a_connection_not_back_by_dev_loss_tmo_is_removed_and_srp_daemon_adds_it_again() {
    for (down_ms, removed, delay_ms) in [(60_000, 0, 0), (700_000, 10, 10_000)] {
        let mut s = with_linux(std::vec![(2_000, restart(0, down_ms))], 20, 2);
        s.duration = Duration::from_ms(super::BOOT_MS + 2_000 + down_ms + 120_000);
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        let l = f.linux.expect("Linux figures");
        assert_eq!((l.removed, l.up), (removed, 20), "{l:?}");
        // A reconnect into the silence fails only when its sixteen REQs are spent (none
        // does in 60 s): never ten in a row before the rport goes, so the delay stays 10 s.
        assert_eq!(
            l.longest_reconnect_delay,
            Duration::from_ms(delay_ms),
            "{l:?}"
        );
        assert!(l.longest_login > Duration::from_ms(down_ms), "{l:?}");
    }
}

/// A target restart before the initiators have powered on takes nothing from them: each
/// still logs in once its own delay is over, none a rescan later.
#[test]
fn a_restart_before_an_initiator_powers_on_takes_nothing_from_it() {
    let mut s = with_linux(std::vec![(1_000, restart(0, 1_000))], 20, 2);
    s.power_on.delay = (Duration::from_ms(10_000), Duration::from_ms(20_000));
    s.duration = Duration::from_ms(40_000);
    let f = run(&s);
    let l = f.linux.expect("Linux figures");
    assert_eq!(
        (l.up, l.channels, l.failed, l.removed),
        (20, 40, 0, 0),
        "{l:?}"
    );
    assert!(l.longest_login < Duration::from_ms(25_000), "{l:?}");
}
