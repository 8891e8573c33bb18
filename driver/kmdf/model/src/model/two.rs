//! The bus's image and the sample child driver's (driver/kmdf-child) on one machine: each
//! loaded as Windows loads a driver, bound by WdfVersionBind to globals of its own, by which
//! every WDF call is told to be one driver's or the other's (`super::caller_slot`).
//!
//! What runs: the child driver's load (its FxDriverEntry, DriverEntry, WdfDriverCreate of a
//! driver of its own), its unload and its reload, beside a bus that keeps serving; its FDO
//! added on the bus's SRP PDO with the PDO's hardware ids, started (prepare hardware: the
//! interface queried through the PDO, Register) and removed (release hardware: Unregister,
//! InterfaceDereference); the resets it rides through, answered from its own callback inside
//! the bus's DPC, image to image. Its own I/O across them is `twoio.rs`'s, its PnP and power
//! life `twolife.rs`'s, four processors `twoconc.rs`'s (docs/child-driver.md).

use wdk_sys::*;

use hcabus::ioctl::ResetMode;
use hcabus::recorder::RecordKind;
use hcabus::types::{Call, State};
use hcabus_kmdf::kernel::ChildFunction;
use hcabus_sim::Fault;

use super::admin::{self, ADMIN};
use super::driver::DriverFn;
use super::harness::{expect, started};
use super::image::{self, BUS, CHILD};
use super::kernel::{Handle, Init, InitState, Kernel, Kind, Role};
use super::machine::{at, Machine, FILE_READ_DATA};
use super::{violation, with, Rule, PASSIVE};

/// The child driver's service, as its INF adds it (inf/hcabus-child.inx).
const CHILD_SERVICE: &str =
    "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\hcabus_child";

impl Machine {
    /// Loads the child driver: its image as loaded (data sections afresh), then its entry
    /// with a DRIVER_OBJECT of its own and its service's registry path, as the I/O manager
    /// calls a driver's entry. A success without WdfDriverCreate stops the machine.
    pub(crate) fn load_child(&mut self) -> NTSTATUS {
        let Some(image) = image::get_slot(CHILD) else {
            violation(
                Rule::Expectation,
                "load child",
                "no child driver image loaded (HCABUS_MODEL_CHILD_IMAGE)",
            )
        };
        image.fresh();
        // SAFETY: an all-zero DRIVER_OBJECT (plain integers and pointers), as for the bus.
        let object: &mut DRIVER_OBJECT = self
            .child_driver_object
            .insert(Box::new(unsafe { core::mem::zeroed() }));
        let object = object as *mut DRIVER_OBJECT;
        let path: Vec<u16> = CHILD_SERVICE.encode_utf16().collect();
        let registry = UNICODE_STRING {
            Length: (path.len() * 2) as u16,
            MaximumLength: (path.len() * 2) as u16,
            Buffer: path.as_ptr().cast_mut(),
        };
        // SAFETY: the child image's entry point, with its driver object and registry path.
        let status = at("hcabus_child!DriverEntry", PASSIVE, || unsafe {
            image::call(image.entry(), &[object as u64, &raw const registry as u64]) as NTSTATUS
        });
        if status >= 0 && with(|k| k.drivers[CHILD].is_none()) {
            violation(
                Rule::NoDriverObject,
                "hcabus_child!DriverEntry",
                "returned success without WdfDriverCreate",
            );
        }
        status
    }

    /// Unloads the child driver: its EvtDriverUnload if it has one, then KMDF deletes its
    /// driver object (and what is parented to it).
    pub(crate) fn unload_child(&mut self) {
        let (driver, unload) = with(|k| {
            let driver = k.drivers[CHILD].unwrap_or_else(|| {
                violation(
                    Rule::Expectation,
                    "unload child",
                    "the child driver is not loaded",
                )
            });
            match &k.objects[Kernel::index_of(driver as _)].kind {
                Kind::Driver { config } => (driver, config.EvtDriverUnload),
                _ => (driver, None),
            }
        });
        if let Some(f) = unload {
            // SAFETY: the child's callback with its driver, as KMDF calls it at unload.
            at("hcabus_child!EvtDriverUnload", PASSIVE, || unsafe {
                super::driver::DriverFn::run(f, (driver as WDFDRIVER,))
            });
        }
        with(|k| {
            k.delete_now("DriverUnload", driver);
            k.drivers[CHILD] = None;
        });
        self.child_driver_object = None;
    }
}

impl Machine {
    /// PnP binds the child driver to the PDO of the bus's child `serial` (the INF's hardware
    /// id): its EvtDriverDeviceAdd with an init that reports the PDO's hardware ids. Returns
    /// the FDO it created on the PDO.
    pub(crate) fn add_child_device(&mut self, serial: u32) -> Handle {
        let bus_fdo = self
            .fdo
            .unwrap_or_else(|| violation(Rule::Expectation, "add child device", "no bus FDO"));
        let Some(pdo) = super::children::pdo_of(bus_fdo, serial) else {
            violation(
                Rule::Expectation,
                "add child device",
                "no PDO of that serial",
            )
        };
        let (driver, add, init, before) = with(|k| {
            let ids = k.device(pdo).identity.hardware_ids.clone();
            k.inits.push(Init::for_pdo(pdo, ids));
            let init = Kernel::init_handle(k.inits.len() - 1);
            let driver = k.drivers[CHILD].unwrap_or_else(|| {
                violation(
                    Rule::Expectation,
                    "add child device",
                    "the child driver is not loaded",
                )
            });
            let add = match &k.objects[Kernel::index_of(driver as _)].kind {
                Kind::Driver { config } => config.EvtDriverDeviceAdd,
                _ => None,
            };
            (driver, add, init, k.objects.len())
        });
        let Some(add) = add else {
            violation(
                Rule::Expectation,
                "add child device",
                "no EvtDriverDeviceAdd",
            )
        };
        // SAFETY: the child's callback with its driver and an init KMDF owns.
        let status = at("hcabus_child!EvtDriverDeviceAdd", PASSIVE, || unsafe {
            add.run((driver as WDFDRIVER, init))
        });
        let fdo = with(|k| {
            let i = &mut k.inits[Kernel::init_index(init)];
            if i.state == InitState::Open {
                i.state = InitState::Freed;
            }
            (before..k.objects.len()).find_map(|n| {
                let o = &k.objects[n];
                match &o.kind {
                    Kind::Device(d)
                        if !o.deleted && d.role == Role::Fdo && d.lower_pdo == Some(pdo) =>
                    {
                        Some(Kernel::handle_of(n))
                    }
                    _ => None,
                }
            })
        });
        match fdo {
            Some(fdo) if status >= 0 => {
                self.child_stacks.push(fdo);
                fdo
            }
            _ => violation(
                Rule::Expectation,
                "hcabus_child!EvtDriverDeviceAdd",
                &format!("{status:#x}, no FDO on the PDO"),
            ),
        }
    }

    /// The child FDO's start, after its PDO's (the bus's PDOs have no PnP callbacks): prepare
    /// hardware with empty resource lists (a PDO of this bus claims none), then D0Entry.
    pub(crate) fn start_child_device(&mut self, fdo: Handle) -> NTSTATUS {
        let (raw, translated, pnp) = with(|k| {
            let raw = no_resources(k, fdo);
            (raw, no_resources(k, fdo), k.device(fdo).pnp)
        });
        let status = pnp.EvtDevicePrepareHardware.map_or(STATUS_SUCCESS, |f| {
            // SAFETY: the child's callback with its FDO and two resource lists.
            at(
                "hcabus_child!EvtDevicePrepareHardware",
                PASSIVE,
                || unsafe {
                    f.run((
                        fdo as WDFDEVICE,
                        raw as WDFCMRESLIST,
                        translated as WDFCMRESLIST,
                    ))
                },
            )
        });
        with(|k| {
            for list in [raw, translated] {
                k.delete_now("start", list);
            }
        });
        if status < 0 {
            return status;
        }
        pnp.EvtDeviceD0Entry.map_or(STATUS_SUCCESS, |f| {
            // SAFETY: the child's callback with its FDO and the state it leaves.
            at("hcabus_child!EvtDeviceD0Entry", PASSIVE, || unsafe {
                f.run((
                    fdo as WDFDEVICE,
                    _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final,
                ))
            })
        })
    }

    /// The child FDO's removal, before its PDO's: its queues purged (what waits is
    /// cancelled), D0Exit to D3Final, release hardware, then KMDF deletes the device (its
    /// queues and lock with it).
    pub(crate) fn remove_child_device(&mut self, fdo: Handle) {
        self.child_stacks.retain(|s| *s != fdo);
        // PnpCleanupForRemove: the power-managed queues purged before the power-down.
        super::queues::purge_device(fdo, true);
        self.release_child(fdo);
        // PnpEventRemovedCommonCode: the others once the hardware is released.
        super::queues::purge_device(fdo, false);
        let cleanups = with(|k| k.delete("remove", fdo));
        at("EvtCleanupCallback", PASSIVE, || {
            super::objects::run_cleanups(cleanups)
        });
    }
}

impl Machine {
    /// The child FDO's power-down to D3Final and its release hardware (a stop's or a
    /// removal's: KMDF calls both, in this order).
    fn release_child(&mut self, fdo: Handle) {
        let (translated, pnp) = with(|k| (no_resources(k, fdo), k.device(fdo).pnp));
        if let Some(f) = pnp.EvtDeviceD0Exit {
            // SAFETY: the child's callback with its FDO and the state it goes to.
            at("hcabus_child!EvtDeviceD0Exit", PASSIVE, || unsafe {
                f.run((
                    fdo as WDFDEVICE,
                    _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final,
                ))
            });
        }
        let status = pnp.EvtDeviceReleaseHardware.map_or(STATUS_SUCCESS, |f| {
            // SAFETY: the child's callback with its FDO and its translated resources.
            at(
                "hcabus_child!EvtDeviceReleaseHardware",
                PASSIVE,
                || unsafe { f.run((fdo as WDFDEVICE, translated as WDFCMRESLIST)) },
            )
        });
        with(|k| k.delete_now("release", translated));
        expect(
            status >= 0,
            &format!("the child's release hardware: {status:#x}"),
        );
    }

    /// The power manager's order going to Dx: the children first, each FDO's power-managed
    /// queues held before its D0Exit.
    pub(crate) fn power_down_children(&mut self, target: WDF_POWER_DEVICE_STATE) {
        for fdo in self.child_stacks.clone().into_iter().rev() {
            super::queues::power_device(fdo, false);
            let d0_exit = with(|k| k.device(fdo).pnp.EvtDeviceD0Exit);
            if let Some(f) = d0_exit {
                // SAFETY: the child's callback with its FDO and the state it goes to.
                at("hcabus_child!EvtDeviceD0Exit", PASSIVE, || unsafe {
                    f.run((fdo as WDFDEVICE, target))
                });
            }
        }
    }

    /// Back to D0: after the bus, each child's D0Entry, then its queues resumed (what waited
    /// runs on this thread).
    pub(crate) fn power_up_children(&mut self) {
        for fdo in self.child_stacks.clone() {
            let d0_entry = with(|k| k.device(fdo).pnp.EvtDeviceD0Entry);
            if let Some(f) = d0_entry {
                // SAFETY: the child's callback with its FDO and the state it leaves.
                let status = at("hcabus_child!EvtDeviceD0Entry", PASSIVE, || unsafe {
                    f.run((fdo as WDFDEVICE, _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3))
                });
                expect(status >= 0, &format!("the child's D0Entry: {status:#x}"));
            }
            super::queues::power_device(fdo, true);
        }
    }

    /// The child's own PnP stop and start (its rebalance): release hardware (Unregister,
    /// InterfaceDereference), then prepare hardware again (a new query, a new Register).
    pub(crate) fn restart_child_device(&mut self, fdo: Handle) -> NTSTATUS {
        super::queues::power_device(fdo, false);
        self.release_child(fdo);
        let status = self.start_child_device(fdo);
        super::queues::power_device(fdo, true);
        status
    }

    /// PnP's order at the bus's removal (surprise or not): every device stacked on its PDOs
    /// first, each the newest first.
    pub(crate) fn remove_child_stacks(&mut self) {
        while let Some(&fdo) = self.child_stacks.last() {
            self.remove_child_device(fdo);
        }
    }
}

/// An IOCTL to the child's device (through its device interface), from any thread: handed to
/// its default queue at PASSIVE_LEVEL. `Ok` with the status and output when the driver
/// completed it before the call returned, else `Err` with the request, pending
/// (`io::take_result` collects it).
pub(crate) fn child_ioctl(
    fdo: Handle,
    code: u32,
    input: &[u8],
    output_length: usize,
) -> Result<(NTSTATUS, Vec<u8>), Handle> {
    let queue = with(|k| k.device(fdo).queue).unwrap_or_else(|| {
        violation(
            Rule::Expectation,
            "child IOCTL",
            "the child's device has no default queue",
        )
    });
    let request = super::io::new_request(code, input, output_length);
    at("IRP_MJ_DEVICE_CONTROL", PASSIVE, || {
        super::queues::deliver(queue, request)
    });
    super::io::take_result(request).ok_or(request)
}

/// A started bus with the child driver loaded and its device added and started on the SRP
/// PDO: the machine and the child's FDO.
pub(crate) fn started_with_child() -> (Machine, Handle) {
    let mut m = started();
    expect(m.load_child() == STATUS_SUCCESS, "the child's DriverEntry");
    let child = m.add_child_device(ChildFunction::Srp.serial());
    let status = m.start_child_device(child);
    expect(
        status == STATUS_SUCCESS,
        &format!("the child's start: {status:#x}"),
    );
    (m, child)
}

/// An empty resource list of `fdo`'s: a PDO of this bus claims no resources.
fn no_resources(k: &mut Kernel, fdo: Handle) -> Handle {
    k.create(
        "resources",
        Kind::ResourceList {
            descriptors: Vec::new(),
        },
        core::ptr::null_mut(),
        Some(fdo),
    )
}

/// The child FDO's I/O queue: its queue that is not the default one.
pub(crate) fn io_queue(fdo: Handle) -> Handle {
    let found = with(|k| {
        k.objects
            .iter()
            .enumerate()
            .find_map(|(n, o)| match &o.kind {
                Kind::Queue { device, config, .. }
                    if !o.deleted && *device == fdo && config.DefaultQueue == 0 =>
                {
                    Some(Kernel::handle_of(n))
                }
                _ => None,
            })
    });
    found.unwrap_or_else(|| violation(Rule::Expectation, "the child's I/O queue", "none"))
}

/// The calls the bus recorded of the client named `name`: (call, how many).
fn calls_of(m: &mut Machine, name: &str, call: Call) -> usize {
    admin::flight_record(m)
        .iter()
        .filter(|r| r.name.as_str() == name)
        .filter(|r| matches!(r.kind, RecordKind::Call { call: c, .. } if c == call))
        .map(|r| r.count as usize)
        .sum()
}

/// The scenarios of this file (`tests.rs` runs them by name).
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "two_child_rides_resets" => two_child_rides_resets(),
        "two_images_load" => two_images_load(),
        _ => return false,
    }
    true
}

/// The child driver's own WDFDRIVER's EvtDriverDeviceAdd.
fn child_device_add() -> Option<usize> {
    with(|k| {
        let driver = k.drivers[CHILD]?;
        match &k.objects[Kernel::index_of(driver as _)].kind {
            Kind::Driver { config } => config.EvtDriverDeviceAdd.map(|f| f as usize),
            _ => None,
        }
    })
}

/// Both images on one machine: the child driver loads beside a started bus, its
/// WdfDriverCreate makes a driver of its own (the bus's untouched), each image is bound to
/// globals named for its service, the bus keeps serving, and the child unloads and loads
/// again from a fresh image.
fn two_images_load() {
    let mut m = started();
    let bus = with(|k| k.drivers[BUS]);
    for round in 0..2 {
        let status = m.load_child();
        expect(
            status == STATUS_SUCCESS,
            &format!("the child's DriverEntry (load {round}): {status:#x}"),
        );
        let (bus_now, child) = with(|k| (k.drivers[BUS], k.drivers[CHILD]));
        expect(
            bus_now == bus && child.is_some() && child != bus,
            &format!("drivers: bus {bus:?} then {bus_now:?}, child {child:?}"),
        );
        let in_child = child_device_add().is_some_and(|a| {
            image::get_slot(CHILD).is_some_and(|i| i.in_text(a))
                && !image::get_slot(BUS).is_some_and(|i| i.in_text(a))
        });
        expect(
            in_child,
            "the child's EvtDriverDeviceAdd is its own image's code",
        );
        let names: Vec<String> = image::loaded().map(image::Image::driver_name).collect();
        expect(
            names == ["hcabus", "hcabus_child"],
            &format!("the images' globals: {names:?}"),
        );
        let (status, s) = admin::query_state(&mut m, FILE_READ_DATA);
        expect(
            status == STATUS_SUCCESS && s.is_some_and(|s| s.epoch == 1),
            &format!("the bus beside the child: {status:#x} {s:?}"),
        );
        m.unload_child();
        expect(
            with(|k| k.drivers[CHILD].is_none() && k.drivers[BUS] == bus),
            "the child's unload left the bus's driver as it was",
        );
    }
    m.surprise_remove();
    m.unload();
}

/// The child driver on the bus's SRP PDO: added with the PDO's hardware id, started (the
/// interface through the PDO, one reference on the bus's FDO, Register), then an
/// administrator's forced reset and a catastrophic error found by the health poll, each
/// delivered to the child's callback inside the bus's DPC, answered by stopping its I/O
/// queue, executing from the queue's stop callback and starting the queue at RESET_END; then
/// its removal (Unregister, InterfaceDereference: the reference given back), its unload.
fn two_child_rides_resets() {
    let mut m = started();
    let bus_fdo = m.fdo.unwrap_or_default();
    expect(m.load_child() == STATUS_SUCCESS, "the child's DriverEntry");
    let before = super::cchild::references(bus_fdo);
    let child = m.add_child_device(ChildFunction::Srp.serial());
    let status = m.start_child_device(child);
    expect(
        status == STATUS_SUCCESS,
        &format!("the child's start: {status:#x}"),
    );
    expect(
        super::cchild::references(bus_fdo) == before + 1,
        "the child's query holds one reference on the bus's FDO",
    );
    expect(
        calls_of(&mut m, "child-srp", Call::Register) == 1,
        "the bus recorded the child's Register",
    );
    let queue = io_queue(child);
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    m.advance(5_000);
    with(|k| k.adapters[0].hca.inject(Fault::Catastrophic));
    m.advance(10_000);
    let state = admin::state(&mut m);
    expect(
        state.epoch == 3 && state.state == State::Operational as u32,
        &format!("after two resets: e{} state {}", state.epoch, state.state),
    );
    let executed = calls_of(&mut m, "child-srp", Call::ResetExecute);
    expect(
        executed == 2,
        &format!("the child executed {executed} of 2 resets"),
    );
    let q = super::queues::state(queue);
    expect(
        q.stops == 2 && q.starts == 3 && q.dispatching && q.idle.is_none(),
        &format!("the child's I/O queue: {q:?} (stopped at each RESET, started at register and each RESET_END)"),
    );
    m.remove_child_device(child);
    expect(
        super::cchild::references(bus_fdo) == before,
        "the child's release gave the interface's reference back",
    );
    expect(
        calls_of(&mut m, "child-srp", Call::Unregister) == 1,
        "the bus recorded the child's Unregister",
    );
    m.unload_child();
    m.surprise_remove();
    m.unload();
}
