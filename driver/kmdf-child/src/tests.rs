//! The child's decisions, on every host: the hardware ids it takes, the interface it accepts,
//! the events it decodes, and its state machine through each path of the protocol.

use hcabus::bus_abi::{HcabusBusInterfaceV1, HcabusEvent, HCABUS_BUS_INTERFACE_VERSION};
use hcabus::time::Instant;
use hcabus::types::{
    AbortCause, ClientId, Epoch, Event, FailReason, FatalReason, ResetOutcome, ResetReason,
};
use hcabus_kmdf::kernel::ChildFunction;

use crate::abi::*;
use crate::child::{Action, Child, IoRefused, Phase};

#[test]
fn the_child_takes_every_pdo_the_bus_enumerates_and_nothing_else() {
    for function in ChildFunction::of_bus(2) {
        let id = function.hardware_id();
        let took = Function::of_hardware_id(id).unwrap_or_else(|| panic!("{id} not taken"));
        let expected = match function {
            ChildFunction::Srp => Function::Srp,
            ChildFunction::Ipoib { port } => Function::Ipoib { port },
        };
        assert_eq!(took, expected, "{id}");
        assert_eq!(
            Function::of_hardware_id(&id.to_ascii_lowercase()),
            Some(expected)
        );
    }
    for other in [
        "HCABUS\\IPOIB",
        "HCABUS\\IPOIB&PORT3",
        "PCI\\VEN_15B3",
        "HCABUS",
        "",
        "HCABUS\\SRPX",
    ] {
        assert_eq!(Function::of_hardware_id(other), None, "{other}");
    }
    // Every name is one the bus takes (1..32 bytes) and they differ.
    let names = [
        Function::Srp,
        Function::Ipoib { port: 1 },
        Function::Ipoib { port: 2 },
    ]
    .map(|f| f.name().to_bytes().len());
    assert!(names.iter().all(|n| (1..=32).contains(n)));
    assert_ne!(
        Function::Ipoib { port: 1 }.name(),
        Function::Ipoib { port: 2 }.name()
    );
}

unsafe extern "C" fn reference(_: *mut core::ffi::c_void) {}
unsafe extern "C" fn epoch_call(_: *mut core::ffi::c_void, _: u64, _: u64) -> i32 {
    0
}
unsafe extern "C" fn register(
    _: *mut core::ffi::c_void,
    _: *const hcabus::bus_abi::HcabusClientDesc,
    _: *mut hcabus::bus_abi::HcabusRegistration,
) -> i32 {
    0
}
unsafe extern "C" fn unregister(_: *mut core::ffi::c_void, _: u64) -> i32 {
    0
}
unsafe extern "C" fn request(_: *mut core::ffi::c_void, _: u64, _: *mut u64) -> i32 {
    0
}
unsafe extern "C" fn veto(
    _: *mut core::ffi::c_void,
    _: u64,
    _: u64,
    _: *const core::ffi::c_char,
) -> i32 {
    0
}
unsafe extern "C" fn query(
    _: *mut core::ffi::c_void,
    _: *mut hcabus::bus_abi::HcabusBusState,
) -> i32 {
    0
}

fn whole_interface() -> HcabusBusInterfaceV1 {
    HcabusBusInterfaceV1 {
        size: core::mem::size_of::<HcabusBusInterfaceV1>() as u16,
        version: HCABUS_BUS_INTERFACE_VERSION,
        interface_reference: Some(reference),
        interface_dereference: Some(reference),
        register: Some(register),
        unregister: Some(unregister),
        reset_request: Some(request),
        reset_execute: Some(epoch_call),
        reset_consent: Some(epoch_call),
        reset_veto: Some(veto),
        query_state: Some(query),
        ..HcabusBusInterfaceV1::EMPTY
    }
}

#[test]
fn an_interface_is_used_only_whole_and_of_the_version_known() {
    assert_eq!(check_interface(&whole_interface()), Ok(()));
    let small = HcabusBusInterfaceV1 {
        size: 40,
        ..whole_interface()
    };
    assert_eq!(
        check_interface(&small),
        Err(InterfaceError::TooSmall { size: 40 })
    );
    for version in [0, 2] {
        let other = HcabusBusInterfaceV1 {
            version,
            ..whole_interface()
        };
        assert_eq!(
            check_interface(&other),
            Err(InterfaceError::Version { version })
        );
    }
    let no_execute = HcabusBusInterfaceV1 {
        reset_execute: None,
        ..whole_interface()
    };
    assert_eq!(
        check_interface(&no_execute),
        Err(InterfaceError::Missing("ResetExecute"))
    );
    // What the query leaves when it writes nothing.
    assert!(check_interface(&HcabusBusInterfaceV1::EMPTY).is_err());
}

/// The union as the bus fills it, read back by value as the child's callback copies it.
fn decoded(event: Event) -> BusEvent {
    let c = HcabusEvent::new(ClientId::from_raw(7), event);
    // SAFETY: every member of the union is plain integers.
    #[allow(unsafe_code)]
    let raw = unsafe { c.data.raw };
    BusEvent::decode(c.kind, raw)
}

#[test]
fn events_decode_from_the_union_as_the_bus_writes_them() {
    let deadline = Instant::from_us(5_000);
    assert_eq!(
        decoded(Event::Reset {
            epoch: Epoch(3),
            reason: ResetReason::Catastrophic,
            planned: false,
            deadline
        }),
        BusEvent::Reset {
            epoch: 3,
            planned: false
        }
    );
    assert_eq!(
        decoded(Event::ResetQuery {
            epoch: Epoch(4),
            reason: ResetReason::AdminForced,
            deadline
        }),
        BusEvent::ResetQuery { epoch: 4 }
    );
    assert_eq!(
        decoded(Event::ResetEnd {
            epoch: Epoch(5),
            outcome: ResetOutcome::Restored
        }),
        BusEvent::ResetEnd { epoch: 5 }
    );
    assert_eq!(
        decoded(Event::ResetFailed {
            epoch: Epoch(5),
            error: FailReason::HardwareDead
        }),
        BusEvent::ResetFailed { epoch: 5 }
    );
    assert_eq!(
        decoded(Event::ResetAborted {
            epoch: Epoch(6),
            vetoed_by: ClientId::from_raw(9),
            cause: AbortCause::Veto
        }),
        BusEvent::ResetAborted { epoch: 6 }
    );
    assert_eq!(
        decoded(Event::DeviceFatal {
            reason: FatalReason::SurpriseRemoval
        }),
        BusEvent::DeviceFatal
    );
    assert_eq!(BusEvent::decode(99, [0; 4]), BusEvent::Unknown { kind: 99 });
    assert_eq!(
        BusEvent::decode(0x0101, [0; 4]),
        BusEvent::Unknown { kind: 0x0101 }
    );
}

fn running(epoch: u64) -> Child {
    let mut c = Child::new();
    assert_eq!(c.registered(11, epoch, false), Action::StartQueue);
    c
}

/// dispatched = completed + failed + in progress, whatever happened.
fn closes(c: &Child) {
    let s = c.stats();
    assert_eq!(
        s.dispatched,
        s.completed + s.failed + s.in_progress,
        "{s:?}"
    );
}

#[test]
fn a_reset_stops_the_queue_executes_once_it_is_idle_and_starts_it_in_the_new_epoch() {
    let mut c = running(1);
    assert_eq!(c.begin_io(), Ok(1));
    assert_eq!(
        c.on_event(BusEvent::Reset {
            epoch: 1,
            planned: false
        }),
        Action::StopQueue
    );
    // A request dispatched before the stop took effect is the old epoch's, and the stop
    // waits for it.
    assert_eq!(c.begin_io(), Ok(1));
    c.end_io(true);
    c.end_io(true);
    assert_eq!(c.queue_idle(), Action::Execute(1));
    assert_eq!(c.phase(), Phase::Executed { epoch: 1 });
    c.executed(0, false);
    // Nothing may run now: the bus was told this child holds nothing.
    assert_eq!(c.begin_io(), Err(IoRefused::AfterExecute));
    assert_eq!(
        c.on_event(BusEvent::ResetEnd { epoch: 2 }),
        Action::StartQueue
    );
    assert_eq!(c.begin_io(), Ok(2));
    c.end_io(true);
    let s = c.stats();
    assert_eq!((s.completed, s.failed, s.executed, s.epoch), (3, 1, 1, 2));
    assert_eq!(s.events[1], 1);
    assert_eq!(s.events[2], 1);
    closes(&c);
}

#[test]
fn a_stale_stop_callback_executes_nothing() {
    let mut c = running(1);
    assert_eq!(
        c.on_event(BusEvent::Reset {
            epoch: 1,
            planned: true
        }),
        Action::StopQueue
    );
    // The reset failed before the queue went idle: the purge answers, not ResetExecute.
    assert_eq!(
        c.on_event(BusEvent::ResetFailed { epoch: 1 }),
        Action::PurgeQueue
    );
    assert_eq!(c.queue_idle(), Action::Nothing);
    let mut d = running(1);
    d.on_event(BusEvent::Reset {
        epoch: 1,
        planned: false,
    });
    // RESET delivered twice (it is not: the bus sends it once) stops once.
    assert_eq!(
        d.on_event(BusEvent::Reset {
            epoch: 1,
            planned: false
        }),
        Action::Nothing
    );
}

#[test]
fn a_query_is_consented_or_vetoed_as_armed() {
    let mut c = running(4);
    assert_eq!(
        c.on_event(BusEvent::ResetQuery { epoch: 4 }),
        Action::Consent(4)
    );
    c.set_veto(true);
    assert_eq!(
        c.on_event(BusEvent::ResetQuery { epoch: 4 }),
        Action::Veto(4)
    );
    assert_eq!(
        c.on_event(BusEvent::ResetAborted { epoch: 4 }),
        Action::Nothing
    );
    assert_eq!(c.phase(), Phase::Running { epoch: 4 });
    let s = c.stats();
    assert_eq!(
        (s.consents, s.vetoes, s.flags & STATS_VETO_ARMED),
        (1, 1, STATS_VETO_ARMED)
    );
}

#[test]
fn an_abort_after_reset_starts_the_queue_again_in_the_same_epoch() {
    let mut c = running(2);
    c.on_event(BusEvent::Reset {
        epoch: 2,
        planned: true,
    });
    assert_eq!(c.queue_idle(), Action::Execute(2));
    assert_eq!(
        c.on_event(BusEvent::ResetAborted { epoch: 2 }),
        Action::StartQueue
    );
    assert_eq!(c.begin_io(), Ok(2));
}

#[test]
fn a_failed_device_fails_its_io_and_an_administrators_restart_brings_it_back() {
    let mut c = running(1);
    c.on_event(BusEvent::Reset {
        epoch: 1,
        planned: false,
    });
    c.queue_idle();
    assert_eq!(
        c.on_event(BusEvent::ResetFailed { epoch: 1 }),
        Action::PurgeQueue
    );
    assert_eq!(c.begin_io(), Err(IoRefused::Failed));
    // An administrator's restart: RESET_END alone (nobody held hardware), which opens the
    // purged queue again.
    assert_eq!(
        c.on_event(BusEvent::ResetEnd { epoch: 2 }),
        Action::StartQueue
    );
    assert_eq!(c.begin_io(), Ok(2));
    c.end_io(true);
    closes(&c);
    assert_eq!(c.on_event(BusEvent::DeviceFatal), Action::PurgeQueue);
    assert_eq!(c.phase(), Phase::Failed);
}

#[test]
fn a_late_registration_holds_its_queue_until_the_reset_ends() {
    let mut c = Child::new();
    assert_eq!(c.registered(3, 5, true), Action::CloseQueue);
    assert_eq!(c.stats().flags & STATS_LATE, STATS_LATE);
    assert_eq!(c.begin_io(), Err(IoRefused::AfterExecute));
    assert_eq!(
        c.on_event(BusEvent::ResetEnd { epoch: 6 }),
        Action::StartQueue
    );
    assert_eq!(c.begin_io(), Ok(6));
}

#[test]
fn an_unbound_child_hears_nothing_and_runs_nothing() {
    let mut c = running(1);
    c.unregistered();
    assert_eq!(c.begin_io(), Err(IoRefused::Unbound));
    assert_eq!(c.on_event(BusEvent::ResetEnd { epoch: 9 }), Action::Nothing);
    assert_eq!(c.phase(), Phase::Unbound);
    c.io_failed_unrun();
    closes(&c);
    assert_eq!(c.stats().failed, 2);
}

/// The INF installs the driver on exactly the PDOs the bus enumerates, and each id it lists
/// is one the driver takes.
#[test]
fn the_inf_lists_the_ids_the_driver_takes() {
    let inx = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../inf/hcabus-child.inx"),
    )
    .expect("inf/hcabus-child.inx");
    let listed: Vec<&str> = inx
        .lines()
        .filter(|l| l.contains("= HcaBusChild_Install,"))
        .filter_map(|l| l.rsplit(',').next())
        .map(str::trim)
        .collect();
    let enumerated: Vec<&str> = ChildFunction::of_bus(2).map(|f| f.hardware_id()).collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    let mut expected = enumerated.clone();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    for id in listed {
        assert!(Function::of_hardware_id(id).is_some(), "{id}");
    }
}

/// KMDF takes one stop callback at a time (a second is a bugcheck): a reset that comes while
/// an aborted reset's callback is still outstanding closes the queue without one, and when
/// that old callback comes (it may have seen the queue open) asks for a fresh one, whose
/// arrival alone executes.
#[test]
fn a_second_stop_callback_is_never_asked_for_while_one_is_outstanding() {
    let mut c = running(3);
    let reset = BusEvent::Reset {
        epoch: 3,
        planned: true,
    };
    assert_eq!(c.on_event(reset), Action::StopQueue);
    // Another client did not answer in time: the planned reset is aborted before this
    // child's queue went idle (a request of its own still running).
    assert_eq!(
        c.on_event(BusEvent::ResetAborted { epoch: 3 }),
        Action::StartQueue
    );
    // The next reset: the first callback has not come.
    assert_eq!(c.on_event(reset), Action::CloseQueue);
    // It comes now: it may have seen the queue open, so it does not execute.
    assert_eq!(c.queue_idle(), Action::StopQueue);
    assert_eq!(c.phase(), Phase::Quiescing { epoch: 3 });
    assert_eq!(c.queue_idle(), Action::Execute(3));
    // A callback that comes once the child runs again only clears the books.
    let mut d = running(1);
    assert_eq!(d.on_event(reset), Action::StopQueue);
    assert_eq!(
        d.on_event(BusEvent::ResetAborted { epoch: 3 }),
        Action::StartQueue
    );
    assert_eq!(d.queue_idle(), Action::Nothing);
    assert_eq!(d.on_event(reset), Action::StopQueue);
}
