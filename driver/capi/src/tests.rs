use super::*;
use hcabus::bus_abi::*;
use hcabus::types::{AbortCause, ClientId, Epoch, Event, EventKind};

#[test]
fn a_panic_inside_an_export_becomes_a_status_and_never_reaches_c() {
    assert_eq!(guard(|| status::SUCCESS), status::SUCCESS);
    let caught = guard(|| panic!("a bug in the bus"));
    assert_eq!(caught, status::INTERNAL_ERROR);
}

#[test]
fn the_union_a_c_client_reads_holds_what_the_event_said() {
    let id = ClientId {
        index: 2,
        generation: 7,
    };
    let e = HcabusEvent::new(
        id,
        Event::ResetAborted {
            epoch: Epoch(4),
            vetoed_by: id,
            cause: AbortCause::Veto,
        },
    );
    assert_eq!(e.kind, EventKind::ResetAborted as u16);
    // SAFETY: `new` zeroes the whole union before writing the variant `kind` names, and
    // every variant is plain integers: any field may be read.
    let aborted = unsafe { e.data.reset_aborted };
    assert_eq!(aborted.epoch, 4);
    assert_eq!(aborted.vetoed_by, id.to_raw());
    assert_eq!(aborted.cause, AbortCause::Veto as u32);
}

#[test]
fn a_null_or_foreign_context_is_refused() {
    let mut not_a_bus = [0u64; 8];
    // SAFETY: null, then a readable buffer the size of the bus object's first words.
    unsafe {
        assert_eq!(
            hcabus_sim_wait_idle(std::ptr::null_mut(), 0),
            status::INVALID_PARAMETER
        );
    }
    let foreign = not_a_bus.as_mut_ptr().cast::<HcabusSim>();
    // SAFETY: readable memory larger than the magic the check reads first.
    let refused = unsafe { sim_from(foreign.cast()) }.err();
    assert_eq!(refused, Some(status::INVALID_PARAMETER));
}
