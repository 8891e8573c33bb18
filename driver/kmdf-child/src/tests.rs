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
use crate::queue::Change;

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

/// The KMDF layer and its I/O queue, faked: each queue change carried out as the layer does
/// (`performing`, the call, `applied`, again while changes were decided meanwhile), the stop
/// callback called from inside the stop when the driver owns nothing, as KMDF calls it.
#[derive(Default)]
struct Queue {
    dispatching: bool,
    accepting: bool,
    callback: bool,
    owned: u32,
    calls: Vec<Change>,
    /// The bus calls the child made (consent, veto, execute), in order.
    bus: Vec<Action>,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            dispatching: true,
            accepting: true,
            ..Queue::default()
        }
    }

    fn act(&mut self, c: &mut Child, action: Action) {
        let Action::Queue(mut op) = action else {
            if action != Action::Nothing {
                self.bus.push(action);
            }
            return;
        };
        loop {
            let change = c.performing(op);
            self.call(c, change);
            match c.applied(op) {
                Action::Queue(next) => op = next,
                _ => return,
            }
        }
    }

    fn call(&mut self, c: &mut Child, change: Change) {
        self.calls.push(change);
        match change {
            Change::Stop | Change::Close => {
                assert!(
                    !(change == Change::Stop && self.callback),
                    "a second stop callback"
                );
                self.dispatching = false;
                self.accepting = true;
                self.callback |= change == Change::Stop;
            }
            Change::Start => (self.dispatching, self.accepting) = (true, true),
            // QueuePurge clears AcceptRequests only (fxioqueue.cpp).
            Change::Purge => self.accepting = false,
        }
        self.idle(c);
    }

    /// KMDF's DispatchEvents: the stop callback once the driver owns nothing.
    fn idle(&mut self, c: &mut Child) {
        if self.callback && self.owned == 0 {
            self.callback = false;
            let next = c.queue_idle();
            self.act(c, next);
        }
    }

    /// A request dispatched to the child (only while the queue dispatches).
    fn dispatch(&mut self, c: &mut Child) -> Result<u64, IoRefused> {
        assert!(
            self.dispatching,
            "a request dispatched from a stopped queue"
        );
        let r = c.begin_io();
        if r.is_ok() {
            self.owned += 1;
        }
        r
    }

    fn complete(&mut self, c: &mut Child) {
        c.end_io(true);
        self.owned -= 1;
        self.idle(c);
    }
}

fn running(epoch: u64) -> (Child, Queue) {
    let mut c = Child::new();
    let mut q = Queue::new();
    let a = c.registered(11, epoch, false, false);
    assert_eq!(a.change(), Some(Change::Start));
    q.act(&mut c, a);
    (c, q)
}

fn reset(epoch: u64) -> BusEvent {
    BusEvent::Reset {
        epoch,
        planned: false,
    }
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
    let (mut c, mut q) = running(1);
    assert_eq!(q.dispatch(&mut c), Ok(1));
    let a = c.on_event(reset(1));
    assert_eq!(a.change(), Some(Change::Stop));
    q.act(&mut c, a);
    // The request the driver owns holds the callback back: nothing executed yet.
    assert_eq!((q.dispatching, q.bus.len()), (false, 0));
    q.complete(&mut c);
    assert_eq!(q.bus, [Action::Execute(1)]);
    assert_eq!(c.phase(), Phase::Executed { epoch: 1 });
    c.executed(0, false);
    // Nothing may run now: the bus was told this child holds nothing.
    assert_eq!(c.begin_io(), Err(IoRefused::AfterExecute));
    let a = c.on_event(BusEvent::ResetEnd { epoch: 2 });
    q.act(&mut c, a);
    assert!(q.dispatching);
    assert_eq!(q.dispatch(&mut c), Ok(2));
    q.complete(&mut c);
    let s = c.stats();
    assert_eq!((s.completed, s.failed, s.executed, s.epoch), (2, 1, 1, 2));
    assert_eq!((s.events[1], s.events[2]), (1, 1));
    assert_eq!(q.calls, [Change::Start, Change::Stop, Change::Start]);
    closes(&c);
}

#[test]
fn a_stop_on_an_idle_queue_executes_from_inside_the_stop() {
    let (mut c, mut q) = running(1);
    let a = c.on_event(reset(1));
    q.act(&mut c, a);
    assert_eq!(q.bus, [Action::Execute(1)]);
    // RESET delivered twice (it is not: the bus sends it once) stops once.
    assert_eq!(c.on_event(reset(1)), Action::Nothing);
}

#[test]
fn a_failed_reset_purges_and_its_late_callback_executes_nothing() {
    let (mut c, mut q) = running(1);
    q.owned = 1;
    let a = c.on_event(reset(1));
    q.act(&mut c, a);
    let a = c.on_event(BusEvent::ResetFailed { epoch: 1 });
    assert_eq!(a.change(), Some(Change::Purge));
    q.act(&mut c, a);
    q.owned = 0;
    q.idle(&mut c);
    assert!(q.bus.is_empty(), "{:?}", q.bus);
    assert!(!q.accepting);
    assert_eq!(c.begin_io(), Err(IoRefused::Failed));
}

#[test]
fn a_query_is_consented_or_vetoed_as_armed() {
    let (mut c, _) = running(4);
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
    let (mut c, mut q) = running(2);
    let a = c.on_event(BusEvent::Reset {
        epoch: 2,
        planned: true,
    });
    q.act(&mut c, a);
    assert_eq!(q.bus, [Action::Execute(2)]);
    let a = c.on_event(BusEvent::ResetAborted { epoch: 2 });
    q.act(&mut c, a);
    assert!(q.dispatching);
    assert_eq!(q.dispatch(&mut c), Ok(2));
}

#[test]
fn a_failed_device_fails_its_io_and_an_administrators_restart_brings_it_back() {
    let (mut c, mut q) = running(1);
    for e in [reset(1), BusEvent::ResetFailed { epoch: 1 }] {
        let a = c.on_event(e);
        q.act(&mut c, a);
    }
    assert_eq!(c.begin_io(), Err(IoRefused::Failed));
    // An administrator's restart: RESET_END alone (nobody held hardware), which opens the
    // purged queue again.
    let a = c.on_event(BusEvent::ResetEnd { epoch: 2 });
    q.act(&mut c, a);
    assert!(q.dispatching && q.accepting);
    assert_eq!(q.dispatch(&mut c), Ok(2));
    q.complete(&mut c);
    closes(&c);
    assert_eq!(
        c.on_event(BusEvent::DeviceFatal).change(),
        Some(Change::Purge)
    );
    assert_eq!(c.phase(), Phase::Failed);
}

#[test]
fn a_late_registration_holds_its_queue_until_the_resets_outcome() {
    for (outcome, dispatching) in [
        (BusEvent::ResetEnd { epoch: 6 }, true),
        (BusEvent::ResetAborted { epoch: 5 }, true),
        (BusEvent::ResetFailed { epoch: 5 }, false),
    ] {
        let mut c = Child::new();
        let mut q = Queue::new();
        let a = c.registered(3, 5, true, false);
        assert_eq!(a.change(), Some(Change::Close));
        q.act(&mut c, a);
        assert_eq!(c.stats().flags & STATS_LATE, STATS_LATE);
        assert_eq!(c.begin_io(), Err(IoRefused::AfterExecute));
        let a = c.on_event(outcome);
        q.act(&mut c, a);
        assert_eq!(q.dispatching, dispatching, "{outcome:?}");
        assert!(
            q.bus.is_empty(),
            "a late registrant owes the reset nothing: {:?}",
            q.bus
        );
    }
}

#[test]
fn a_registration_on_a_failed_device_fails_its_io_until_reset_end() {
    let mut c = Child::new();
    let mut q = Queue::new();
    let a = c.registered(3, 4, false, true);
    assert_eq!(a.change(), Some(Change::Purge));
    q.act(&mut c, a);
    assert_eq!(c.begin_io(), Err(IoRefused::Failed));
    let a = c.on_event(BusEvent::ResetEnd { epoch: 5 });
    q.act(&mut c, a);
    assert_eq!(q.dispatch(&mut c), Ok(5));
}

#[test]
fn an_unbound_child_hears_nothing_and_runs_nothing() {
    let (mut c, _) = running(1);
    c.unregistered();
    assert_eq!(c.begin_io(), Err(IoRefused::Unbound));
    assert_eq!(c.on_event(BusEvent::ResetEnd { epoch: 9 }), Action::Nothing);
    assert_eq!(c.phase(), Phase::Unbound);
    c.io_failed_unrun();
    closes(&c);
    assert_eq!(c.stats().failed, 2);
}

/// KMDF takes one stop callback at a time (a second is a bugcheck): a reset that comes while
/// an aborted reset's callback is still outstanding closes the queue without one, and when
/// that old callback comes (it may have seen the queue open) asks for a fresh one, whose
/// arrival alone executes.
#[test]
fn a_second_stop_callback_is_never_asked_for_while_one_is_outstanding() {
    let (mut c, mut q) = running(3);
    q.owned = 1;
    let planned = BusEvent::Reset {
        epoch: 3,
        planned: true,
    };
    let a = c.on_event(planned);
    q.act(&mut c, a);
    // Another client did not answer in time: the planned reset is aborted before this
    // child's queue went idle (a request of its own still running).
    let a = c.on_event(BusEvent::ResetAborted { epoch: 3 });
    q.act(&mut c, a);
    assert!(q.callback && q.dispatching);
    // The next reset: the first callback has not come; the queue closes without one.
    let a = c.on_event(planned);
    q.act(&mut c, a);
    assert_eq!(q.calls.last(), Some(&Change::Close));
    assert!(q.bus.is_empty());
    // The request completes: the old callback asks again, and the fresh one executes.
    q.complete(&mut c);
    assert_eq!(
        q.calls,
        [
            Change::Start,
            Change::Stop,
            Change::Start,
            Change::Close,
            Change::Stop
        ]
    );
    assert_eq!(q.bus, [Action::Execute(3)]);
}

/// Two threads decide queue changes at once: one carries its change out, the other's waits
/// for it, and the queue ends as last decided, whichever call ran first.
#[test]
fn changes_decided_while_another_thread_carries_one_out_end_as_last_decided() {
    let (mut c, mut q) = running(1);
    q.owned = 1;
    // The DPC's RESET: its stop is handed to the DPC's thread, which has not made the call.
    let stop = c.on_event(reset(1));
    let Action::Queue(stop) = stop else {
        panic!("a stop: {stop:?}")
    };
    // Meanwhile a RESET_FAILED on another thread: it decides the purge, and leaves it to the
    // thread carrying changes out.
    assert_eq!(
        c.on_event(BusEvent::ResetFailed { epoch: 1 }),
        Action::Nothing
    );
    // The DPC's thread makes its call now: a stop for a quiesce that is over only closes
    // (no callback asked), then it carries out the purge decided meanwhile.
    let change = c.performing(stop);
    assert_eq!(change, Change::Close);
    q.call(&mut c, change);
    let next = c.applied(stop);
    assert_eq!(next.change(), Some(Change::Purge));
    q.act(&mut c, next);
    assert!(!q.dispatching && !q.accepting && !q.callback);
    assert!(q.bus.is_empty());
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
