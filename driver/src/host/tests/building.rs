//! Building the bus (bus.rs `new`, `init_in`, `locked_parts`) and the platform's defaults
//! (platform.rs).

use core::mem::MaybeUninit;

use super::*;

/// Nothing runs before the first DPC: the health poll's timer is armed by the drain, on the
/// bus clock of the start.
#[test]
fn a_new_bus_reads_the_identity_reserves_and_asks_for_its_first_dpc() {
    let (platform, world) = fake(false);
    world.borrow_mut().now = at(5);
    let bus = Bus::new(platform, config(), hca()).expect("the bus builds");
    assert_eq!(world.borrow().dpc_asks, 1);
    assert!(world.borrow().arms.is_empty());
    settle(&bus);
    assert_eq!(world.borrow().arms, [(TimerId::HealthPoll, at(1_005))]);
    // The drain found no hardware step and no log entry: no work item.
    let (dpcs, works, settled) = {
        let w = world.borrow();
        (w.dpc_asks, w.work_asks, w.settled)
    };
    assert_eq!((dpcs, works, settled), (1, 0, 1));
    assert_eq!(hw_calls(&bus), ["identity"]);
    assert_eq!(
        bus.core.with(|c| c.timers.armed(TimerId::HealthPoll)),
        Some((at(1_005), 1))
    );
    assert_eq!(bus.core.with(|c| c.callbacks.len()), 4);
    assert_eq!(
        (bus.now(), bus.state(), bus.epoch(), bus.policy()),
        (at(5), State::Operational, Epoch(1), policy())
    );
    assert!(bus.powered());
    assert!(bus.is_idle());
    assert!(!bus.reset_open());
    assert_eq!(bus.overflows(), 0);
    assert_eq!(bus.inspect(|c| c.max_clients()), 4);
}

/// Each way the start can fail names its cause, and a bus that was not built asks nothing
/// of the platform.
#[test]
fn a_bus_that_cannot_be_built_says_why_and_queues_nothing() {
    let refused = |refuse: Option<&'static str>, hca: FakeHca, config: Config| {
        let (platform, world) = fake(false);
        world.borrow_mut().refuse = refuse;
        let e = Bus::new(platform, config, hca).expect_err("refused");
        let asks = world.borrow().dpc_asks;
        (e, asks)
    };
    let dead = FakeHca {
        fail_identity: true,
        ..hca()
    };
    assert_eq!(
        refused(None, dead, config()),
        (NewError::Hardware(HwError::Absent), 0)
    );
    let bad = Config {
        policy: Policy {
            quiesce_deadline_ms: 0,
            ..policy()
        },
        ..config()
    };
    let (e, asks) = refused(None, hca(), bad);
    assert!(
        matches!(e, NewError::Policy(p) if p.field == "quiesce_deadline_ms"),
        "{e:?}"
    );
    assert_eq!(asks, 0);
    let short = OutOfMemory { key: "max_clients" };
    assert_eq!(
        refused(Some("max_clients"), hca(), config()),
        (NewError::Policy(short.into()), 0)
    );
    for key in ["hardware queue", "event log queue"] {
        assert_eq!(
            refused(Some(key), hca(), config()),
            (NewError::OutOfMemory, 0),
            "{key}"
        );
    }
    for lock in ["spin", "wait"] {
        assert_eq!(
            refused(Some(lock), hca(), config()),
            (NewError::Platform(PlatformError::Status(REFUSED)), 0),
            "{lock}"
        );
    }
}

/// Built in place it is the same bus, and it asks for its first DPC as `new` does.
#[test]
fn a_bus_built_in_place_starts_as_a_new_one() {
    let (platform, world) = fake(false);
    let mut room = MaybeUninit::uninit();
    let bus = Bus::init_in(&mut room, platform, config(), hca()).expect("built in place");
    assert_eq!(world.borrow().dpc_asks, 1);
    settle(bus);
    assert_eq!(world.borrow().arms, [(TimerId::HealthPoll, at(1_000))]);
    assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(1)));

    let (platform, world) = fake(false);
    let mut room = MaybeUninit::uninit();
    let dead = FakeHca {
        fail_identity: true,
        ..hca()
    };
    assert_eq!(
        Bus::init_in(&mut room, platform, config(), dead).err(),
        Some(NewError::Hardware(HwError::Absent))
    );
    assert_eq!(world.borrow().dpc_asks, 0);
}

/// What a platform gets without saying otherwise: no wall clock, no waiting in D0Exit, the
/// coordinator in a box of the heap.
#[test]
fn the_platform_defaults_have_no_wall_clock_and_cannot_wait() {
    assert_eq!(Bare.wall_clock_unix_ms(), None);
    assert!(!Bare.delay_ms(10));
    Bare.settled();
    let c = Bare
        .new_coordinator(config(), identity(), at(3))
        .expect("a valid policy");
    // The health poll's timer, armed from the time given.
    assert_eq!((c.state(), c.pending_actions()), (State::Operational, 1));
    let bad = Config {
        policy: Policy {
            hw_poll_interval_ms: 5_000,
            ..policy()
        },
        ..config()
    };
    assert!(matches!(
        Bare.new_coordinator(bad, identity(), at(3)),
        Err(NewError::Policy(p)) if p.field == "hw_poll_interval_ms"
    ));
    let bus = Bus::new(Bare, config(), hca()).expect("builds on the defaults");
    assert_eq!((bus.now(), bus.state()), (at(3), State::Operational));
}
