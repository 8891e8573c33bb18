//! The driver's logic on the fake kernel: every decision of EvtDriverDeviceAdd and
//! EvtDevicePrepareHardware, the coordinator's actions on KMDF objects at the IRQLs docs/design.md
//! allows, the child list, the IOCTL queue, removal and the event log.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::{Arc, Mutex, Weak};

use hcabus::bus_abi::HcabusEvent;
use hcabus::coordinator::Config;
use hcabus::ioctl::Wire;
use hcabus::ioctl::{self, NtStatus, Rights};
use hcabus::types::*;
use hcabus::Policy;
use hcabus_sim::fixtures::identity;
use hcabus_sim::{FakeConnectX, FakeFaults};

use crate::device::*;
use crate::fake::*;
use crate::kernel::{ChildFunction, EventLogEntry, Irql, PlatformError};
use hcabus::host::Bus;

struct Counting;

// SAFETY: forwards to the system allocator unchanged; counting touches only thread-locals
// that need no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: as GlobalAlloc::realloc requires, forwarded.
        unsafe { System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn config() -> BusConfig {
    BusConfig {
        coordinator: Config {
            max_clients: 16,
            recorder_capacity: 1024,
            policy: Policy {
                quiesce_deadline_ms: 1_000,
                hw_ready_timeout_ms: 2_000,
                ..Policy::default()
            },
        },
        ports: 2,
    }
}

fn prepared(faults: FakeFaults) -> Arc<Bus<FakePlatform>> {
    let platform = FakePlatform::<FakeCallback>::new(FakeConnectX::with_faults(identity(), faults));
    let bus = at_irql(Irql::Passive, || prepare(platform, config(), None)).expect("prepared");
    let bus = Arc::new(bus);
    settle(&bus);
    bus
}

/// How a test client answers RESET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// reset_execute from inside the callback.
    Inline,
    /// Later, from a thread at PASSIVE_LEVEL (the test calls [`Client::execute_pending`]).
    Later,
    /// Unregisters from inside its RESET callback.
    Leave,
}

/// A child driver: what it heard (reserved, so hearing never allocates) and its RESET to
/// answer later.
struct Client {
    id: Mutex<Option<ClientId>>,
    heard: Mutex<Vec<(EventKind, u64)>>,
    pending: Mutex<Option<Epoch>>,
}

impl Client {
    fn register(bus: &Arc<Bus<FakePlatform>>, name: &str, answer: Answer) -> Arc<Client> {
        let client = Arc::new(Client {
            id: Mutex::new(None),
            heard: Mutex::new(Vec::with_capacity(64)),
            pending: Mutex::new(None),
        });
        let weak_bus: Weak<Bus<FakePlatform>> = Arc::downgrade(bus);
        let me = Arc::downgrade(&client);
        let callback: FakeCallback = Arc::new(move |e: &HcabusEvent| {
            let (Some(bus), Some(me)) = (weak_bus.upgrade(), me.upgrade()) else {
                return;
            };
            me.on_event(&bus, e, answer);
        });
        let desc = ClientDesc::new(name, ClientKind::Custom, ClientFlags::empty()).expect("fits");
        let reg = bus.register(desc, callback).expect("register");
        *client.id.lock().expect("id") = Some(reg.id);
        client
    }

    fn id(&self) -> ClientId {
        self.id.lock().expect("id").expect("registered")
    }

    fn on_event(&self, bus: &Bus<FakePlatform>, e: &HcabusEvent, answer: Answer) {
        let epoch = event_epoch(e);
        if let Ok(mut heard) = self.heard.lock() {
            if heard.len() < heard.capacity() {
                heard.push((EventKind::try_from(u32::from(e.kind)).expect("kind"), epoch));
            }
        }
        if e.kind == EventKind::Reset as u16 {
            match answer {
                Answer::Inline => {
                    let _ = bus.reset_execute(self.id(), Epoch(epoch));
                }
                Answer::Later => *self.pending.lock().expect("pending") = Some(Epoch(epoch)),
                Answer::Leave => bus
                    .unregister(self.id())
                    .expect("unregister in its callback"),
            }
        }
    }

    fn execute_pending(&self, bus: &Bus<FakePlatform>) {
        if let Some(epoch) = self.pending.lock().expect("pending").take() {
            at_irql(Irql::Passive, || bus.reset_execute(self.id(), epoch)).expect("execute");
        }
    }

    fn heard(&self) -> Vec<EventKind> {
        self.heard
            .lock()
            .expect("heard")
            .iter()
            .map(|h| h.0)
            .collect()
    }
}

/// The epoch an event carries, read as a C client reads it: every epoch event's data starts
/// with it.
fn event_epoch(e: &HcabusEvent) -> u64 {
    // SAFETY: every member of the union is plain integers, and `HcabusEvent::new` zeroes the
    // whole union before writing one: its `raw` view is always initialised.
    unsafe { e.data.raw[0] }
}

/// A forced reset by IOCTL, with read and write access.
fn forced_reset(bus: &Bus<FakePlatform>, rights: Rights) -> NtStatus {
    let mut input = [0u8; 80];
    ioctl::RequestResetIn::new(ioctl::ResetMode::Forced, "test").encode(&mut input);
    let mut out = [0u8; 8];
    let code = ioctl::IOCTL_HCABUS_REQUEST_RESET;
    bus.device_control(code, &input, &mut out, rights).status
}

fn violations(bus: &Bus<FakePlatform>) -> Vec<String> {
    bus.platform().kernel.with(|k| k.violations.clone())
}

#[test]
fn device_add_takes_connectx_functions_as_a_bus_extender_with_an_admin_only_control_device() {
    let setup = device_add(0x15B3, 0x1003, 0).expect("ConnectX-3");
    assert_eq!(setup.device_type, FILE_DEVICE_BUS_EXTENDER);
    assert_eq!(setup.sddl, "D:P(A;;GA;;;SY)(A;;GA;;;BA)");
    assert_eq!(setup.control_device.as_str(), "\\Device\\HcaBus0");
    assert_eq!(setup.symbolic_link.as_str(), "\\DosDevices\\HcaBus0");
    let last = device_add(0x15B3, 0x1003, u32::MAX).expect("the last instance");
    assert_eq!(
        last.symbolic_link.as_str(),
        "\\DosDevices\\HcaBus4294967295"
    );
    assert_eq!(
        device_add(0x8086, 0x1003, 0),
        Err(AddError::Unsupported {
            vendor_id: 0x8086,
            device_id: 0x1003
        })
    );
    assert!(device_add(0x15B3, 0xFFFF, 0).is_err());
    assert_eq!(rights_of(0x0001), Rights::READ);
    assert_eq!(rights_of(0x0003), Rights::READ | Rights::WRITE);
    assert_eq!(rights_of(0x0000), Rights::empty());
}

#[test]
fn prepare_hardware_maps_the_registers_reserves_everything_and_reports_each_child() {
    let before = allocations().0;
    let bus = prepared(FakeFaults::default());
    assert!(allocations().0 > before, "the coordinator is built here");
    let k = &bus.platform().kernel;
    k.with(|k| {
        assert_eq!(
            k.children,
            [
                ChildFunction::Ipoib { port: 1 },
                ChildFunction::Ipoib { port: 2 },
                ChildFunction::Srp
            ]
        );
        let map = k.calls.iter().find(|(n, _)| *n == "MmMapIoSpaceEx");
        assert_eq!(map, Some(&("MmMapIoSpaceEx", Irql::Passive)));
    });
    assert_eq!(bus.inspect(|c| c.state()), State::Operational);
    let too_many = BusConfig {
        ports: 3,
        ..config()
    };
    let platform = FakePlatform::<FakeCallback>::new(FakeConnectX::new(identity()));
    assert_eq!(
        prepare(platform, too_many, None).err(),
        Some(PrepareError::Ports(3))
    );
}

/// A lock KMDF could not create fails the prepare with its status: a null WDFSPINLOCK or
/// WDFWAITLOCK would bugcheck on its first acquire.
#[test]
fn a_lock_kmdf_refuses_to_create_fails_prepare_hardware_with_its_status() {
    for call in ["WdfSpinLockCreate", "WdfWaitLockCreate"] {
        let platform = FakePlatform::<FakeCallback>::new(FakeConnectX::new(identity()));
        platform.kernel.with(|k| k.refuse = Some(call));
        let refused = at_irql(Irql::Passive, || prepare(platform, config(), None)).err();
        assert_eq!(
            refused,
            Some(PrepareError::Platform(PlatformError::Status(0xC000_009A))),
            "{call}"
        );
    }
}

#[test]
fn a_reset_runs_on_kmdf_objects_at_the_right_irql_and_allocates_nothing_after_prepare() {
    let bus = prepared(FakeFaults::default());
    let inline = Client::register(&bus, "ipoib0", Answer::Inline);
    let later = Client::register(&bus, "bootdisk", Answer::Later);
    settle(&bus);
    let (before, dispatch_before) = allocations();
    assert_eq!(
        forced_reset(&bus, Rights::READ | Rights::WRITE),
        NtStatus::SUCCESS
    );
    advance(&bus, 10);
    later.execute_pending(&bus);
    advance(&bus, 3_000);
    let (after, dispatch_after) = allocations();
    assert_eq!(after - before, 0, "nothing allocates after prepare");
    assert_eq!(dispatch_after - dispatch_before, 0);
    assert_eq!(
        bus.inspect(|c| (c.state(), c.epoch())),
        (State::Operational, Epoch(2))
    );
    for c in [&inline, &later] {
        assert_eq!(c.heard(), [EventKind::Reset, EventKind::ResetEnd]);
    }
    assert_eq!(violations(&bus), Vec::<String>::new());
    bus.platform().kernel.with(|k| {
        assert!(k.config_accesses > 0, "the reset went through config space");
        let callbacks: Vec<_> = k
            .calls
            .iter()
            .filter(|(n, _)| *n == "client callback")
            .collect();
        assert!(callbacks.iter().all(|(_, irql)| *irql == Irql::Dispatch));
        assert_eq!(callbacks.len(), 4);
        assert_eq!(
            k.children_missing + k.reenumerations,
            0,
            "a soft reset: no PnP"
        );
    });
    assert_eq!(bus.overflows(), 0, "no hardware step or log entry dropped");
}

/// Unregister is a rundown (docs/design.md §3): once it has returned no callback of the client
/// starts, though its events were already queued for the DPC; from inside its own callback it
/// returns at once and nothing follows that callback. One processor here, so the rundown's
/// wait for a callback on another is the threaded host's and shuttle's to show.
#[test]
fn no_callback_starts_after_unregister_and_one_from_inside_its_callback_is_the_last() {
    let bus = prepared(FakeFaults::default());
    let stays = Client::register(&bus, "ipoib0", Answer::Inline);
    let leaves = Client::register(&bus, "srp0", Answer::Inline);
    let leaves_inside = Client::register(&bus, "custom0", Answer::Leave);
    settle(&bus);
    assert_eq!(
        forced_reset(&bus, Rights::READ | Rights::WRITE),
        NtStatus::SUCCESS
    );
    // RESET is queued for the DPC, which has not run.
    at_irql(Irql::Passive, || bus.unregister(leaves.id())).expect("unregister");
    advance(&bus, 3_000);
    assert_eq!(leaves.heard(), [], "queued before, yet never delivered");
    assert_eq!(leaves_inside.heard(), [EventKind::Reset], "nothing after");
    assert_eq!(stays.heard(), [EventKind::Reset, EventKind::ResetEnd]);
    assert_eq!(
        bus.inspect(|c| (c.state(), c.epoch(), c.client_count())),
        (State::Operational, Epoch(2), 1)
    );
    assert_eq!(violations(&bus), Vec::<String>::new());
}

#[test]
fn the_event_log_hears_a_reset_start_and_its_restore() {
    let bus = prepared(FakeFaults::default());
    let _c = Client::register(&bus, "ipoib0", Answer::Inline);
    assert_eq!(
        forced_reset(&bus, Rights::READ | Rights::WRITE),
        NtStatus::SUCCESS
    );
    advance(&bus, 3_000);
    let log = bus.platform().kernel.with(|k| k.event_log.clone());
    assert_eq!(
        log,
        [
            EventLogEntry::ResetStarted {
                epoch: 1,
                reason: ResetReason::AdminForced as u8
            },
            EventLogEntry::ResetRestored { epoch: 2 }
        ]
    );
    let logged_at: Vec<Irql> = bus.platform().kernel.with(|k| {
        k.calls
            .iter()
            .filter(|(n, _)| *n == "IoWriteErrorLogEntry")
            .map(|(_, i)| *i)
            .collect()
    });
    assert!(
        logged_at.iter().all(|i| *i == Irql::Passive),
        "from the work item"
    );
}

#[test]
fn a_replaced_adapter_reports_the_children_missing_and_re_enumerates_once() {
    let bus = prepared(FakeFaults {
        guid_after_reset: Some(0xBAD),
        ..FakeFaults::default()
    });
    let c = Client::register(&bus, "srp", Answer::Inline);
    assert!(bus.reset_request(c.id()).is_ok());
    advance(&bus, 3_000);
    assert_eq!(bus.inspect(|c| c.state()), State::Failed);
    bus.platform().kernel.with(|k| {
        assert_eq!((k.children_missing, k.reenumerations), (1, 1));
        assert!(k
            .event_log
            .contains(&EventLogEntry::DeviceReplaced { epoch: 1 }));
    });
    assert_eq!(c.heard(), [EventKind::Reset, EventKind::ResetFailed]);
}

#[test]
fn a_device_that_never_returns_fails_and_the_event_log_says_so() {
    let bus = prepared(FakeFaults {
        never_returns: true,
        ..FakeFaults::default()
    });
    let c = Client::register(&bus, "ipoib0", Answer::Inline);
    assert!(bus.reset_request(c.id()).is_ok());
    advance(&bus, 20_000);
    assert_eq!(bus.inspect(|c| c.state()), State::Failed);
    let failed = bus.platform().kernel.with(|k| {
        k.event_log
            .iter()
            .any(|e| matches!(e, EventLogEntry::ResetFailed { epoch: 1, .. }))
    });
    assert!(failed);
    assert_eq!(violations(&bus), Vec::<String>::new());
}

#[test]
fn the_ioctl_queue_serves_the_dispatcher_with_the_handles_rights() {
    let bus = prepared(FakeFaults::default());
    let read_only = rights_of(0x0001);
    assert_eq!(forced_reset(&bus, read_only), NtStatus::ACCESS_DENIED);
    assert!(!bus.inspect(|c| c.reset_in_progress()), "nothing happened");
    let mut state_in = [0u8; 8];
    ioctl::encode_empty(&mut state_in);
    let mut state_out = [0u8; 512];
    let reply = bus.device_control(
        ioctl::IOCTL_HCABUS_QUERY_STATE,
        &state_in,
        &mut state_out,
        read_only,
    );
    assert_eq!(reply.status, NtStatus::SUCCESS);
    assert!(reply.bytes > 0);
    // The driver hosts no clients and sees no I/O: QUERY_COUNTERS says so, never zeros.
    let mut counters = [0u8; 512];
    let reply = bus.device_control(
        ioctl::IOCTL_HCABUS_QUERY_COUNTERS,
        &state_in,
        &mut counters,
        read_only,
    );
    assert_eq!(reply.status, NtStatus::NOT_SUPPORTED);
}

/// Hardware steps the coordinator saw complete, by kind.
fn steps_done(bus: &Bus<FakePlatform>, step: hcabus::hca::HwStep) -> usize {
    bus.inspect(|c| {
        c.recorder()
            .iter()
            .filter(
                |r| matches!(r.kind, hcabus::recorder::RecordKind::Hw { step: s, .. } if s == step),
            )
            .map(|r| r.count as usize)
            .sum()
    })
}

#[test]
fn d0_exit_of_any_target_quiets_the_bus_and_only_surprise_removal_ends_it() {
    use hcabus::hca::HwStep;
    let bus = prepared(FakeFaults::default());
    let c = Client::register(&bus, "ipoib0", Answer::Inline);
    advance(&bus, 100);
    let polls = steps_done(&bus, HwStep::ReadHealth);
    let down = at_irql(Irql::Passive, || bus.d0_exit());
    assert!(!down.reset_held && !bus.powered());
    assert!(
        bus.platform()
            .kernel
            .with(|k| k.timers.iter().all(Option::is_none)),
        "a timer left armed in Dx"
    );
    // Minutes in Dx: no health read, and a reset asked for meanwhile waits for the device.
    advance(&bus, 600_000);
    assert!(
        bus.reset_request(c.id()).is_ok(),
        "a reset asked for in Dx is taken"
    );
    advance(&bus, 60_000);
    assert_eq!(
        steps_done(&bus, HwStep::ReadHealth),
        polls,
        "the health watch ran in Dx"
    );
    assert_eq!(
        steps_done(&bus, HwStep::SaveConfig),
        0,
        "a reset step ran in Dx"
    );
    // Quiesced, its last health read (which decides how the quiesce ends) held for D0.
    assert_eq!(bus.inspect(|c| c.state()), State::Quiescing);
    assert!(bus.inspect(|c| c.reset_in_progress()));
    assert!(!c.heard().contains(&EventKind::DeviceFatal));
    at_irql(Irql::Passive, || bus.d0_entry());
    advance(&bus, 20_000);
    assert_eq!(bus.inspect(|c| c.state()), State::Operational);
    assert!(
        steps_done(&bus, HwStep::ReadHealth) > polls,
        "the watch did not resume"
    );
    assert_eq!(c.heard(), [EventKind::Reset, EventKind::ResetEnd]);
    // Only surprise removal ends the bus.
    at_irql(Irql::Passive, || bus.surprise_removal());
    settle(&bus);
    assert_eq!(bus.inspect(|c| c.state()), State::Removed);
    assert_eq!(c.heard().last(), Some(&EventKind::DeviceFatal));
    assert_eq!(violations(&bus), Vec::<String>::new());
}

#[test]
fn a_timer_stopped_before_it_fires_is_ignored() {
    let bus = prepared(FakeFaults::default());
    let polls = |bus: &Bus<FakePlatform>| {
        bus.inspect(|c| {
            c.recorder()
                .iter()
                .filter(|r| {
                    matches!(
                        r.kind,
                        hcabus::recorder::RecordKind::Hw {
                            step: hcabus::hca::HwStep::ReadHealth,
                            ..
                        }
                    )
                })
                .map(|r| r.count as usize)
                .sum::<usize>()
        })
    };
    let before = polls(&bus);
    // The health poll's WDFTIMER fires although nothing armed it now: a stale expiry.
    at_irql(Irql::Dispatch, || bus.timer_fired(TimerId::QuiesceDeadline));
    settle(&bus);
    assert_eq!(polls(&bus), before);
    assert_eq!(bus.inspect(|c| c.state()), State::Operational);
}

#[test]
fn the_inf_lists_exactly_the_functions_device_add_takes() {
    let inx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../inf/hcabus.inx");
    let text = std::fs::read_to_string(inx).expect("inf/hcabus.inx");
    let mut in_inf: Vec<u16> = text
        .match_indices("PCI\\VEN_15B3&DEV_")
        .filter_map(|(at, m)| {
            u16::from_str_radix(text.get(at + m.len()..at + m.len() + 4)?, 16).ok()
        })
        .collect();
    in_inf.sort_unstable();
    let mut taken: Vec<u16> = SUPPORTED_DEVICES.iter().map(|d| d.0).collect();
    taken.sort_unstable();
    assert_eq!(in_inf, taken);
    for id in in_inf {
        assert!(device_add(PCI_VENDOR_MELLANOX, id, 0).is_ok());
    }
}

#[test]
fn the_pci_ids_come_from_the_first_hardware_id() {
    assert_eq!(
        parse_pci_hardware_id("PCI\\VEN_15B3&DEV_1003&SUBSYS_005015B3&REV_00"),
        Some((0x15B3, 0x1003))
    );
    assert_eq!(
        parse_pci_hardware_id("pci\\ven_15b3&dev_101b"),
        None,
        "tags are upper case"
    );
    assert_eq!(parse_pci_hardware_id("USB\\VID_1234&PID_5678"), None);
    assert_eq!(parse_pci_hardware_id("PCI\\VEN_15B3"), None);
    assert_eq!(parse_pci_hardware_id("PCI\\VEN_ZZZZ&DEV_1003"), None);
}

/// A C child as the driver's PDO serves it: through hcabus-cabi's marshalling (what
/// src/windows/interface.rs calls) with a C ABI callback that executes from inside itself.
mod through_the_c_abi {
    use core::ffi::c_void;

    use hcabus::bus_abi::*;
    use hcabus_cabi::{self as cabi, CCallback};

    use super::*;

    struct CChild {
        bus: *const Bus<FakePlatform<CCallback>>,
        id: u64,
        kinds: [u16; 8],
        heard: usize,
        end_epoch: u64,
    }

    unsafe extern "C" fn on_event(context: *mut c_void, event: *const HcabusEvent) {
        // SAFETY: the context is the test's CChild, alive for the whole test.
        let child = unsafe { &mut *context.cast::<CChild>() };
        // SAFETY: the event lives for the call.
        let event = unsafe { &*event };
        if child.heard < child.kinds.len() {
            child.kinds[child.heard] = event.kind;
            child.heard += 1;
        }
        // SAFETY: every member of the union is plain integers, all initialised.
        let epoch = unsafe { event.data.raw[0] };
        if event.kind == EventKind::Reset as u16 {
            // SAFETY: the bus outlives the child.
            let bus = unsafe { &*child.bus };
            assert_eq!(cabi::reset_execute(bus, child.id, epoch), status::SUCCESS);
        } else if event.kind == EventKind::ResetEnd as u16 {
            child.end_epoch = epoch;
        }
    }

    #[test]
    fn a_c_child_registers_executes_from_its_callback_and_hears_the_new_epoch() {
        let platform = FakePlatform::<CCallback>::new(FakeConnectX::new(identity()));
        let bus = at_irql(Irql::Passive, || prepare(platform, config(), None)).expect("prepared");
        settle(&bus);
        let mut child = Box::new(CChild {
            bus: &bus,
            id: 0,
            kinds: [0; 8],
            heard: 0,
            end_epoch: 0,
        });
        let desc = HcabusClientDesc {
            size: core::mem::size_of::<HcabusClientDesc>() as u16,
            kind: ClientKind::Ipoib as u16,
            flags: 0,
            name: c"ipoib0".as_ptr(),
            event_callback: Some(on_event),
            client_context: (&mut *child as *mut CChild).cast(),
        };
        let mut reg = HcabusRegistration::default();
        // SAFETY: a complete descriptor with a NUL-terminated name, and a registration to fill.
        let registered = unsafe { cabi::register(&bus, &desc, &mut reg, core::convert::identity) };
        assert_eq!(registered, status::SUCCESS);
        child.id = reg.client_id;
        let mut epoch = 0u64;
        // SAFETY: a writable epoch.
        let asked = unsafe { cabi::reset_request(&bus, reg.client_id, &mut epoch) };
        assert_eq!((asked, epoch), (status::SUCCESS, 1));
        advance(&bus, 3_000);
        let mut state = HcabusBusState {
            size: core::mem::size_of::<HcabusBusState>() as u32,
            ..HcabusBusState::default()
        };
        // SAFETY: a sized state to fill.
        let queried = unsafe { cabi::query_state(&bus, &mut state) };
        assert_eq!(queried, status::SUCCESS);
        assert_eq!((state.state, state.epoch), (State::Operational as u32, 2));
        let heard = &child.kinds[..child.heard];
        assert_eq!(heard, [EventKind::Reset as u16, EventKind::ResetEnd as u16]);
        assert_eq!(child.end_epoch, 2);
        assert_eq!(cabi::unregister(&bus, reg.client_id), status::SUCCESS);
        assert_eq!(
            cabi::unregister(&bus, reg.client_id),
            status::of_refusal(hcabus::errors::RefusalCode::StaleClient)
        );
        assert_eq!(
            bus.platform().kernel.with(|k| k.violations.clone()),
            Vec::<String>::new()
        );
    }
}

#[test]
fn the_registry_sets_the_policy_by_key_and_a_bad_value_falls_back_to_defaults_by_name() {
    let values = |pairs: &'static [(&'static str, u32)]| {
        move |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    };
    let (p, refused) = policy_from_registry(values(&[
        ("paging_io_hold_timeout_ms", 0),
        ("quiesce_deadline_ms", 2_500),
        ("auto_recover", 1),
    ]));
    assert_eq!(refused, None);
    assert_eq!(p.quiesce_deadline_ms, 2_500);
    let (p, refused) = policy_from_registry(values(&[("quiesce_deadline_ms", 0)]));
    assert_eq!(refused.map(|e| e.field), Some("quiesce_deadline_ms"));
    assert_eq!(p, Policy::default());
    let (_, refused) = policy_from_registry(values(&[("auto_recover", 2)]));
    assert_eq!(refused.map(|e| e.field), Some("auto_recover"));
    let (p, refused) = policy_from_registry(|_| None);
    assert_eq!((p, refused), (Policy::default(), None));
}

#[test]
fn the_registry_sets_the_recorder_depth_by_its_key_and_a_bad_one_is_refused_alone() {
    let values = |pairs: &'static [(&'static str, u32)]| {
        move |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    };
    let (c, refused) = config_from_registry(|_| None);
    assert_eq!(c.recorder_capacity, DEFAULT_RECORDER_RECORDS as usize);
    assert_eq!(refused, [None, None]);
    let (c, refused) = config_from_registry(values(&[(RECORDER_RECORDS_KEY, 4096)]));
    assert_eq!((c.recorder_capacity, refused), (4096, [None, None]));
    for bad in [0, 63, 16_385, u32::MAX] {
        let read = |key: &str| match key {
            RECORDER_RECORDS_KEY => Some(bad),
            "quiesce_deadline_ms" => Some(2_500),
            _ => None,
        };
        let (c, refused) = config_from_registry(read);
        assert_eq!(
            c.recorder_capacity, DEFAULT_RECORDER_RECORDS as usize,
            "{bad}"
        );
        assert_eq!(
            refused[1].map(|e| e.field),
            Some(RECORDER_RECORDS_KEY),
            "{bad}"
        );
        // The depth's refusal leaves the policy the registry set.
        assert_eq!(
            (c.policy.quiesce_deadline_ms, refused[0]),
            (2_500, None),
            "{bad}"
        );
    }
    let (c, refused) = config_from_registry(values(&[
        (RECORDER_RECORDS_KEY, 64),
        ("quiesce_deadline_ms", 0),
    ]));
    assert_eq!(c.recorder_capacity, 64);
    assert_eq!(refused[0].map(|e| e.field), Some("quiesce_deadline_ms"));
    assert_eq!(c.policy, Policy::default());
}

#[test]
fn the_inf_seeds_only_policy_keys_the_driver_reads() {
    let inx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../inf/hcabus.inx");
    let text = std::fs::read_to_string(inx).expect("inf/hcabus.inx");
    let seeded: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("HKR,Parameters,"))
        .filter_map(|l| l.split(',').next())
        .collect();
    assert!(!seeded.is_empty());
    for key in seeded {
        assert!(
            Policy::KEYS.contains(&key) || key == RECORDER_RECORDS_KEY,
            "{key} is not a key the driver reads"
        );
    }
}

#[test]
fn event_log_insertion_strings_are_the_epoch_and_the_reason() {
    let text = |e: EventLogEntry, room: usize| {
        let mut out = vec![0u16; room];
        let (count, used) = e.insertion_strings(&mut out);
        (count, String::from_utf16_lossy(&out[..used]))
    };
    let started = EventLogEntry::ResetStarted {
        epoch: 42,
        reason: ResetReason::Catastrophic as u8,
    };
    assert_eq!(text(started, 64), (2, "e42\0catastrophic\0".to_string()));
    let failed = EventLogEntry::ResetFailed {
        epoch: u64::MAX,
        error: FailReason::StormLimit as u8,
    };
    let max = format!("e{}\0StormLimit\0", u64::MAX);
    assert_eq!(text(failed, 64), (2, max));
    assert_eq!(
        text(EventLogEntry::ResetRestored { epoch: 0 }, 64),
        (1, "e0\0".to_string())
    );
    assert_eq!(
        text(started, 5),
        (1, "e42\0".to_string()),
        "no string is cut"
    );
    assert_eq!(text(started, 2), (0, String::new()));
}

#[test]
fn an_ioctls_rights_are_its_required_access_which_the_io_manager_enforced() {
    use crate::device::rights_of_ioctl;
    assert_eq!(
        rights_of_ioctl(ioctl::IOCTL_HCABUS_QUERY_STATE),
        Rights::READ
    );
    assert_eq!(
        rights_of_ioctl(ioctl::IOCTL_HCABUS_REQUEST_RESET),
        Rights::READ | Rights::WRITE
    );
    // FILE_ANY_ACCESS: the I/O manager checked nothing, so the handle may do nothing.
    let any = ioctl::ctl_code(ioctl::FILE_DEVICE_INFINIBAND, 0x900, 0, 0);
    assert_eq!(rights_of_ioctl(any), Rights::empty());
}

#[test]
fn each_child_has_a_unique_instance_id_and_text_and_its_serial_names_it_back() {
    let children: Vec<ChildFunction> = ChildFunction::of_bus(2).collect();
    let mut ids = Vec::new();
    for child in &children {
        let mut digits = [0u8; 10];
        ids.push(child.instance_id(&mut digits).to_string());
        assert!(!child.description().is_empty() && !child.location().is_empty());
        assert_eq!(ChildFunction::from_serial(child.serial()), Some(*child));
    }
    assert_eq!(ids, ["1", "2", "256"]);
    assert_eq!(ChildFunction::from_serial(3), None);
    assert_eq!(ChildFunction::from_serial(0), None);
}
