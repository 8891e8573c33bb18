//! No silent failure in the stack: what a scenario asks for is checked before the run, a
//! client that cannot come up says so, no retry is unbounded, and the I/O accounting closes
//! (docs/design.md §9: submitted = completed + failed + in flight + lost).

use hcabus::bus::ClientReport;
use hcabus::{Duration, Instant, State};
use hcabus_lab::stack::{self, ClientSpec, DiskSpec, Node, StackSetup};
use hcabus_sim::Fault;
use ibal::disk::DiskConfig;

/// A stack of `n` data disks at queue depth `qd`, nothing else but the access layer.
fn disks(n: usize, qd: u16) -> StackSetup {
    let mut setup = stack::boot_from_san_fast();
    setup.sim.faults.clear();
    setup.sim.duration = Duration::from_ms(300);
    setup.clients = (0..n)
        .map(|i| ClientSpec::Disk {
            name: format!("d{i}"),
            config: DiskSpec {
                initiator: DiskConfig {
                    queue_depth: qd,
                    target_lid: 0x100 + i as u16,
                    lun_id: i as u32,
                    port: 1,
                    ..DiskConfig::default()
                },
                ..DiskSpec::default()
            },
        })
        .collect();
    setup
}

/// The budget and the run agree: a stack the budget accepts brings every disk up; one it
/// refuses would leave the client it names down, with a recorded error.
#[test]
fn the_budget_accepts_exactly_the_stacks_whose_clients_all_come_up() {
    let mut accepted = 0;
    let mut refused = 0;
    for n in 1..=4 {
        for qd in [1, 32, 64, 128, 200, 252, 253, 256] {
            let setup = disks(n, qd);
            let verdict = setup.budget();
            let mut host = stack::build_unchecked(&setup).expect("builds");
            host.run();
            let down: Vec<(String, Option<String>)> = hcabus_lab::stack::disks(&host)
                .filter(|d| !d.disk().is_up())
                .map(|d| (d.name().to_string(), d.error()))
                .collect();
            match verdict {
                Ok(()) => {
                    accepted += 1;
                    assert!(down.is_empty(), "{n} x qd {qd} accepted, but {down:?} down");
                }
                Err(e) => {
                    refused += 1;
                    let name = format!("d{}", e.client);
                    assert!(
                        down.iter().any(|(d, _)| *d == name),
                        "{n} x qd {qd} refused for {name} ({e}), yet it came up"
                    );
                    // A disk down for want of resources is never silent.
                    for (d, error) in &down {
                        assert!(error.is_some() || d != &name, "{d} down without an error");
                    }
                }
            }
        }
    }
    assert!(
        accepted > 10 && refused > 5,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn building_a_stack_the_adapter_cannot_serve_is_refused() {
    let e = stack::build(&disks(1, 256)).expect_err("CQ of 520 > 512");
    assert!(e.to_string().contains("queue_depth"), "{e}");
    let e = stack::build(&disks(3, 128)).expect_err("DMA memory");
    assert!(e.to_string().contains("DMA"), "{e}");
    assert!(stack::build(&disks(2, 128)).is_ok());
}

/// A login refused over and over backs off and gives up at `io_hold_timeout`: the error is
/// recorded, the held I/O fails as retryable, and the next RESET_END brings the disk back.
#[test]
fn a_refused_login_backs_off_gives_up_with_a_record_and_recovers_after_the_reset() {
    let mut setup = disks(1, 32);
    setup.sim.policy.io_hold_timeout_ms = 50;
    setup.sim.duration = Duration::from_ms(3_000);
    // A dead device from the first instant: every login is refused until the health poll
    // finds the error at 1 s and the reset brings the device back.
    setup.sim.faults = vec![(Instant::ZERO, Fault::Catastrophic)];
    let mut host = stack::build(&setup).expect("valid");
    host.run_until(Instant::from_ms(500));
    let d = stack::disks(&host).next().expect("disk");
    let error = d.error().expect("the give-up is recorded");
    assert!(error.contains("SRP login gave up"), "{error}");
    let retries = d.disk().stats().login_retries;
    assert!(
        (3..40).contains(&retries),
        "bounded: {retries} attempts in 50 ms"
    );
    let io = d.io_stats();
    assert!(io.retryable > 0, "what it held failed as retryable: {io:?}");
    assert!(io.closes(), "{io:?}");
    host.run();
    let d = stack::disks(&host).next().expect("disk");
    assert_eq!(d.error(), None, "cleared by the login after RESET_END");
    assert!(d.disk().is_up());
    assert_eq!(host.coordinator().state(), State::Operational);
    let io = d.io_stats();
    assert!(io.closes(), "{io:?}");
    assert_eq!(io.lost, 0, "{io:?}");
}

/// A disk that never logged in holds nothing anyone will complete: its I/O is lost, and the
/// accounting still closes.
#[test]
fn the_io_of_a_disk_that_never_came_up_is_lost_not_in_flight() {
    let mut setup = disks(1, 32);
    setup.sim.duration = Duration::from_ms(400);
    setup.sim.faults = vec![(Instant::ZERO, Fault::Catastrophic)];
    let mut host: Node = stack::build(&setup).expect("valid");
    host.run();
    let d = stack::disks(&host).next().expect("disk");
    assert_eq!(d.disk().stats().logins, 0);
    let io = d.io_stats();
    assert!(io.lost > 0, "{io:?}");
    assert_eq!(io.in_flight, 0, "{io:?}");
    assert!(io.closes(), "{io:?}");
}

#[test]
fn the_default_run_accounts_for_every_io() {
    let mut host = stack::build(&stack::boot_from_san_fast()).expect("valid");
    host.run();
    let io = stack::io_stats(&host);
    assert!(io.closes(), "{io:?}");
    assert_eq!(io.lost, 0, "{io:?}");
    assert_eq!(io.paging_failed, 0, "{io:?}");
}
