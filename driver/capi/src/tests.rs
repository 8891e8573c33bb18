use super::*;
use hcabus::bus_abi::*;
use hcabus::types::{AbortCause, ClientId, Epoch, Event, EventKind, State};

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
    assert_eq!(usize::from(e.size), size_of::<HcabusEvent>());
    assert_eq!(e.kind, EventKind::ResetAborted as u16);
    assert_eq!(e.client_id, id.to_raw());
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

#[test]
fn a_panic_under_a_live_bus_is_contained_and_the_bus_still_answers() {
    let mut sim: *mut HcabusSim = std::ptr::null_mut();
    // SAFETY: null config (defaults) and a writable out pointer.
    let created = unsafe { hcabus_sim_create(std::ptr::null(), &mut sim) };
    assert_eq!(created, status::SUCCESS);
    let mut bus = HcabusBusInterfaceV1::EMPTY;
    let size = size_of::<HcabusBusInterfaceV1>() as u16;
    // SAFETY: a live bus, the interface GUID and a buffer of `size` bytes.
    let got =
        unsafe { hcabus_sim_query_interface(sim, &GUID_HCABUS_BUS_INTERFACE, size, 1, &mut bus) };
    assert_eq!(got, status::SUCCESS);
    // The wrapper every interface function runs in, with a body that panics.
    let caught = interface::with_bus(bus.context, |_| panic!("a bug behind the interface"));
    assert_eq!(caught, status::INTERNAL_ERROR);
    let mut state = HcabusBusState {
        size: size_of::<HcabusBusState>() as u32,
        ..HcabusBusState::default()
    };
    let query = bus.query_state.expect("filled");
    // SAFETY: the interface's own function, its context and a sized state to fill.
    assert_eq!(unsafe { query(bus.context, &mut state) }, status::SUCCESS);
    assert_eq!(state.state, State::Operational as u32);
    let deref = bus.interface_dereference.expect("filled");
    // SAFETY: the interface's own function and context, dereferenced once as referenced.
    unsafe { deref(bus.context) };
    // SAFETY: a live bus with no reference left, destroyed once.
    assert_eq!(unsafe { hcabus_sim_destroy(sim) }, status::SUCCESS);
}

/// KeLowerIrql never raises: lowering to a level above the thread's current one (a bugcheck
/// on Windows), like a value that is no level, is refused and changes nothing. Each test
/// runs on its own thread, whose IRQL starts at PASSIVE_LEVEL.
#[test]
fn lowering_the_irql_above_where_the_thread_is_is_refused_and_changes_nothing() {
    use hcabus::host::irql::{current, Irql};
    assert_eq!(current(), Irql::Passive);
    hcabus_sim_lower_irql(2);
    assert_eq!(
        current(),
        Irql::Passive,
        "lowering from PASSIVE to DISPATCH raised"
    );
    hcabus_sim_lower_irql(7);
    assert_eq!(current(), Irql::Passive, "not a level");
    let old = hcabus_sim_raise_irql_to_dispatch();
    assert_eq!((old, current()), (0, Irql::Dispatch));
    hcabus_sim_lower_irql(2);
    assert_eq!(current(), Irql::Dispatch, "to the same level: allowed");
    hcabus_sim_lower_irql(old);
    assert_eq!(current(), Irql::Passive);
}
