//! The soft reset beside Linux's remove/add on the default stack (hcabus_lab::stack::compare):
//! both bring the stack back, but only remove/add fails I/O upward and builds every client
//! again.

use hcabus::{Duration, EventKind};
use hcabus_lab::stack::{self, compare};

#[test]
fn a_soft_reset_brings_the_stack_back_without_failing_io() {
    let setup = stack::boot_from_san_fast();
    let mut host = compare::warm(&setup).expect("builds");
    let agents = host.agents().len();
    let c = compare::soft_reset(&mut host);
    assert!(c.back, "{c:?}");
    assert_eq!((c.io_dropped, c.removed), (0, 0), "{c:?}");
    assert_eq!(host.agents().len(), agents, "nobody was built again");
    assert!(stack::io_stats(&host).closes());
}

#[test]
fn remove_add_brings_a_new_stack_up_and_fails_what_was_in_flight() {
    let setup = stack::boot_from_san_fast();
    let mut host = compare::warm(&setup).expect("builds");
    let old = host.agents().len();
    let io = stack::io_stats(&host);
    let in_flight = io.submitted - io.completed - io.failed - io.lost;
    assert!(in_flight > 0, "the disks are busy when the reset comes");
    let dma_before = host.hca().verbs().dma_in_use();
    let c = compare::remove_add(&mut host, &setup).expect("builds again");
    assert!(c.back, "{c:?}");
    // The access layer and its five clients.
    assert_eq!(c.removed, old);
    assert_eq!(host.agents().len(), 2 * old);
    // What was owed when the clients went, and what reached them before the new stack was
    // up, failed upward.
    assert!(
        c.io_dropped >= in_flight,
        "{c:?} with {in_flight} in flight"
    );
    // The old clients were told the device went away and were never reset.
    for a in &host.agents()[..old] {
        assert!(a.events().contains(&EventKind::DeviceFatal), "{}", a.name());
        assert!(!a.events().contains(&EventKind::Reset), "{}", a.name());
    }
    // The new disks serve I/O, and the whole run's accounting closes.
    let done_before: u64 = hcabus_lab::stack::disks(&host)
        .skip(2)
        .map(|d| d.io_stats().completed)
        .sum();
    let later = host.now() + Duration::from_ms(500);
    host.run_until(later);
    let done_after: u64 = hcabus_lab::stack::disks(&host)
        .skip(2)
        .map(|d| d.io_stats().completed)
        .sum();
    assert!(done_after > done_before, "{done_before} -> {done_after}");
    // Every client of the new stack came up: nothing the old one held was kept from it.
    assert_eq!(host.coordinator().client_count(), old);
    for d in hcabus_lab::stack::disks(&host).skip(2) {
        assert!(
            d.disk().is_up() && d.problem().is_none(),
            "{:?}",
            d.problem()
        );
    }
    assert!(stack::io_stats(&host).closes());
    // The new stack holds what the old one did, no more: the old one's memory came back.
    assert_eq!(host.hca().verbs().dma_in_use(), dma_before);
    assert_eq!(host.checker().violations, Vec::<String>::new());
}
