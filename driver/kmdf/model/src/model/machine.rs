//! The rest of the machine: the PnP manager (add, start, enumerate, stop, remove, unload),
//! the I/O manager (open a handle, send an IOCTL) and the dispatcher (DPCs, timers, work
//! items on virtual time). It calls the driver's callbacks at the IRQL Windows calls them at,
//! never holding the kernel's lock, and checks each returns with no lock held.

use std::string::String;
use std::vec::Vec;

use hcabus_sim::FakeConnectX;
use wdk_sys::*;

use super::driver::DriverFn;
use super::kernel::{Adapter, Handle, Init, InitOrigin, InitState, Kernel, Kind, Role};
use super::{irql, set_irql, violation, with, Rule, DISPATCH, PASSIVE};

extern "system" {
    /// The Linux build's entry: hcabus-kmdf exports it by the name the image's loader finds.
    fn DriverEntry(driver: PDRIVER_OBJECT, registry_path: PCUNICODE_STRING) -> NTSTATUS;
}

/// A METHOD_BUFFERED request as the I/O manager builds it.
pub(crate) struct Request {
    /// The IOCTL code (IoControlCode), for a queue that dispatches the request later.
    pub(crate) code: u32,
    pub(crate) input_length: usize,
    pub(crate) output_length: usize,
    pub(crate) system_buffer: Vec<u8>,
    /// What the I/O manager copies back, taken at completion; the system buffer is then
    /// poisoned, and must still be when the callback returns (BufAfterReqCompletedIoctl).
    pub(crate) delivered: Vec<u8>,
    pub(crate) completed: bool,
    pub(crate) status: NTSTATUS,
    pub(crate) information: usize,
    pub(crate) irp: Box<IRP>,
    pub(crate) stack: Box<IO_STACK_LOCATION>,
    pub(crate) file: Box<FILE_OBJECT>,
}

/// FILE_READ_DATA, FILE_WRITE_DATA: what a handle may be granted.
pub(crate) const FILE_READ_DATA: u32 = 1;
pub(crate) const FILE_WRITE_DATA: u32 = 2;

/// BAR0 of the model's adapters: where and how large.
const BAR_PHYSICAL: i64 = 0xF000_0000;
const BAR_LENGTH: usize = 1 << 20;

/// Calls driver code at `level`; afterwards the IRQL must be back and no lock held.
/// What the driver allocates meanwhile is counted as its own (`crate::model::heap::driver_bytes`).
pub(crate) fn at<R>(what: &str, level: u8, f: impl FnOnce() -> R) -> R {
    let before = irql();
    let held_before = held_locks();
    set_irql(level);
    super::image::stacks::naming(what);
    let counting = crate::model::heap::count_bytes(super::driver::heap_is_counted());
    let r = f();
    crate::model::heap::count_bytes(counting);
    if irql() != level {
        violation(
            Rule::LockHeldOnReturn,
            what,
            &format!("returned at IRQL {} (called at {level})", irql()),
        );
    }
    if held_locks().iter().any(|h| !held_before.contains(h)) {
        violation(Rule::LockHeldOnReturn, what, "returned holding a lock");
    }
    set_irql(before);
    r
}

/// The locks this thread holds now (on the one-threaded machine, also whoever called into
/// the driver: a DPC the model runs at once, as another processor would, can start while its
/// enqueuer holds a wait lock).
fn held_locks() -> Vec<Handle> {
    let me = super::schedule::me();
    with(|k| {
        k.objects
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                !o.deleted
                    && matches!(
                        o.kind,
                        Kind::SpinLock { holder, .. } | Kind::WaitLock { holder }
                            if holder == me
                    )
            })
            .map(|(i, _)| Kernel::handle_of(i))
            .collect()
    })
}

/// Whether this thread holds a spin lock or a wait lock now.
pub(crate) fn locks_held() -> bool {
    !held_locks().is_empty()
}

/// A successful EvtDriverDeviceAdd leaves no control device it created unfinished: until
/// WdfControlFinishInitializing, KMDF refuses every request to it.
fn control_devices_finished() {
    let unfinished = with(|k| {
        k.objects.iter().any(|o| {
            !o.deleted
                && matches!(&o.kind, Kind::Device(d) if d.role == Role::Control && !d.finished)
        })
    });
    if unfinished {
        violation(
            Rule::ControlNotFinished,
            "EvtDriverDeviceAdd",
            "returned success with a control device not finished",
        );
    }
}

/// The dispatcher: every queued DPC and work item, until none is left.
fn run_queued() {
    for _ in 0..100_000 {
        let next = with(|k| {
            k.objects
                .iter()
                .enumerate()
                .find_map(|(i, o)| match &o.kind {
                    Kind::Dpc { queued: true, .. } if !o.deleted => {
                        Some((Kernel::handle_of(i), true))
                    }
                    _ => None,
                })
                .or_else(|| {
                    k.objects
                        .iter()
                        .enumerate()
                        .find_map(|(i, o)| match &o.kind {
                            Kind::WorkItem { queued: true, .. } if !o.deleted => {
                                Some((Kernel::handle_of(i), false))
                            }
                            _ => None,
                        })
                })
        });
        match next {
            Some((h, true)) => run_dpc(h),
            Some((h, false)) => {
                with(|k| {
                    if let Kind::WorkItem { queued, .. } =
                        &mut k.objects[Kernel::index_of(h as _)].kind
                    {
                        *queued = false;
                    }
                });
                run_work_item(h);
            }
            None => return,
        }
    }
    violation(Rule::Expectation, "run", "DPCs and work items never settle");
}

/// Virtual time passes `us` on the other processors: each timer fires when due, and what
/// it queues runs. A work item or DPC already running (the caller's own) is not run again.
pub(crate) fn dispatch_for(us: u64) {
    let end = with(|k| k.now_us) + us;
    run_queued();
    loop {
        let due = with(|k| {
            k.objects
                .iter()
                .enumerate()
                .filter_map(|(i, o)| match &o.kind {
                    Kind::Timer {
                        due_us: Some(d),
                        running: 0,
                        ..
                    } if !o.deleted && *d <= end => Some((*d, Kernel::handle_of(i))),
                    _ => None,
                })
                .min()
        });
        let Some((at_us, h)) = due else { break };
        with(|k| k.now_us = k.now_us.max(at_us));
        fire_timer(h);
        run_queued();
    }
    with(|k| k.now_us = k.now_us.max(end));
}

/// Runs a work item's callback (its own flush, or the dispatcher).
pub(crate) fn run_work_item(h: Handle) {
    let f = with(|k| match &mut k.objects[Kernel::index_of(h as _)].kind {
        Kind::WorkItem {
            config, running, ..
        } => {
            *running = super::schedule::me();
            config.EvtWorkItemFunc
        }
        _ => None,
    });
    if let Some(f) = f {
        // SAFETY: the driver's callback for its work item.
        at("EvtWorkItem", PASSIVE, || unsafe {
            f.run((h as WDFWORKITEM,))
        });
    }
    with(|k| {
        if let Kind::WorkItem { running, .. } = &mut k.objects[Kernel::index_of(h as _)].kind {
            *running = 0;
        }
    });
}

/// The machine a scenario drives: one adapter, one driver.
pub(crate) struct Machine {
    pub(crate) fdo: Option<Handle>,
    driver_object: Box<DRIVER_OBJECT>,
    /// The child driver's DRIVER_OBJECT while it is loaded (`two.rs`).
    pub(super) child_driver_object: Option<Box<DRIVER_OBJECT>>,
    /// The child driver's FDOs stacked on the bus's PDOs (`two.rs`): PnP removes them before
    /// the PDOs below them, and those before the bus's FDO.
    pub(super) child_stacks: Vec<Handle>,
}

impl Machine {
    /// Installs the model with `hca` on the PCI bus and the Parameters key's `values`, then
    /// loads the driver: DriverEntry.
    pub(crate) fn boot(hca: FakeConnectX, values: &[(&str, u32)]) -> (Machine, NTSTATUS) {
        let mut kernel = Kernel::default();
        kernel.adapters.push(Adapter {
            hca,
            bar_physical: BAR_PHYSICAL,
            bar_length: BAR_LENGTH,
            interface_references: 0,
            d0: true,
        });
        kernel.parameters = values.iter().map(|(k, v)| (String::from(*k), *v)).collect();
        super::install(kernel);
        hcabus_kmdf::lab::image_loaded();
        let mut m = Machine {
            fdo: None,
            // SAFETY: an all-zero DRIVER_OBJECT (plain integers and pointers) is what the
            // model's WdfDriverCreate accepts.
            driver_object: Box::new(unsafe { core::mem::zeroed() }),
            child_driver_object: None,
            child_stacks: Vec::new(),
        };
        let path: Vec<u16> = "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\hcabus"
            .encode_utf16()
            .collect();
        let registry = UNICODE_STRING {
            Length: (path.len() * 2) as u16,
            MaximumLength: (path.len() * 2) as u16,
            Buffer: path.as_ptr().cast_mut(),
        };
        if let Some(image) = super::image::get() {
            image.fresh();
        }
        let object = &raw mut *m.driver_object;
        let status = match super::image::get() {
            // FxDriverEntry, by its address, as the I/O manager calls a driver's entry.
            // SAFETY: the image's entry point, with a driver object and its registry path.
            Some(image) => at("DriverEntry", PASSIVE, || unsafe {
                super::image::call(image.entry(), &[object as u64, &raw const registry as u64])
                    as NTSTATUS
            }),
            None => at("DriverEntry", PASSIVE, || {
                // SAFETY: the Linux build's entry, with a driver object and its registry path.
                unsafe { DriverEntry(object, &raw const registry) }
            }),
        };
        if status >= 0 && with(|k| k.drivers[super::image::BUS].is_none()) {
            violation(
                Rule::NoDriverObject,
                "DriverEntry",
                "returned success without WdfDriverCreate",
            );
        }
        (m, status)
    }

    /// PnP's AddDevice: EvtDriverDeviceAdd with an init for the adapter's PCI function.
    pub(crate) fn add_device(&mut self, hardware_id: &str) -> NTSTATUS {
        let (driver, add, init) = with(|k| {
            k.inits
                .push(Init::new(InitOrigin::Pnp, hardware_id.into(), 0));
            let init = Kernel::init_handle(k.inits.len() - 1);
            let driver = k.drivers[super::image::BUS]
                .unwrap_or_else(|| violation(Rule::Expectation, "AddDevice", "no WdfDriverCreate"));
            let add = match &k.objects[Kernel::index_of(driver as _)].kind {
                Kind::Driver { config } => config.EvtDriverDeviceAdd,
                _ => None,
            };
            (driver, add, init)
        });
        let Some(add) = add else {
            violation(Rule::Expectation, "AddDevice", "no EvtDriverDeviceAdd")
        };
        // SAFETY: the driver's callback with its driver and an init KMDF owns.
        let status = at("EvtDriverDeviceAdd", PASSIVE, || unsafe {
            add.run((driver as WDFDRIVER, init))
        });
        if status >= 0 {
            control_devices_finished();
        }
        let cleanups = with(|k| {
            // KMDF frees the PnP init whatever EvtDriverDeviceAdd did with it.
            let pnp = &mut k.inits[Kernel::init_index(init)];
            if pnp.state == InitState::Open {
                pnp.state = InitState::Freed;
            }
            self.fdo = k
                .objects
                .iter()
                .enumerate()
                .rev()
                .find(|(_, o)| {
                    !o.deleted && matches!(&o.kind, Kind::Device(d) if d.role == Role::Fdo)
                })
                .map(|(i, _)| Kernel::handle_of(i));
            match self.fdo {
                // KMDF deletes the FDO of a failed add.
                Some(f) if status < 0 => k.delete("EvtDriverDeviceAdd", f),
                _ => Vec::new(),
            }
        });
        if status < 0 {
            self.fdo = None;
        }
        at("EvtCleanupCallback", PASSIVE, || {
            super::objects::run_cleanups(cleanups)
        });
        status
    }

    /// The I/O manager's side alone, for a thread of its own (`processors`): IOCTLs through the
    /// symbolic link, no FDO of its own.
    pub(crate) fn io_manager() -> Machine {
        Machine {
            fdo: None,
            // SAFETY: as in `boot`; never passed to the driver.
            driver_object: Box::new(unsafe { core::mem::zeroed() }),
            child_driver_object: None,
            child_stacks: Vec::new(),
        }
    }

    fn fdo(&self, what: &str) -> Handle {
        self.fdo
            .unwrap_or_else(|| violation(Rule::Expectation, what, "no FDO"))
    }

    fn pnp(&self) -> WDF_PNPPOWER_EVENT_CALLBACKS {
        let fdo = self.fdo("pnp");
        with(|k| k.device(fdo).pnp)
    }

    /// Start: EvtDevicePrepareHardware with BAR0 in the translated resources, D0Entry, then
    /// the children's PDOs.
    pub(crate) fn start(&mut self) -> NTSTATUS {
        let status = self.start_fdo();
        if status >= 0 {
            self.enumerate();
        }
        status
    }

    /// The FDO's part of a start: EvtDevicePrepareHardware, then D0Entry.
    pub(crate) fn start_fdo(&mut self) -> NTSTATUS {
        let fdo = self.fdo("start");
        let mut d = CM_PARTIAL_RESOURCE_DESCRIPTOR {
            Type: CmResourceTypeMemory as u8,
            ..Default::default()
        };
        d.u.Memory.Start.QuadPart = BAR_PHYSICAL;
        d.u.Memory.Length = BAR_LENGTH as u32;
        let (raw, translated) = with(|k| {
            let raw = k.create(
                "start",
                Kind::ResourceList {
                    descriptors: vec![d],
                },
                core::ptr::null_mut(),
                Some(fdo),
            );
            let translated = k.create(
                "start",
                Kind::ResourceList {
                    descriptors: vec![d],
                },
                core::ptr::null_mut(),
                Some(fdo),
            );
            k.preparing = Some(fdo);
            // The PnP manager starts a device in D0 (uninitialised): prepare may read it.
            k.adapters.iter_mut().for_each(|a| a.d0 = true);
            (raw, translated)
        });
        let prepare = self.pnp().EvtDevicePrepareHardware;
        let status = prepare.map_or(STATUS_SUCCESS, |f| {
            // SAFETY: the driver's callback with its FDO and two resource lists.
            at("EvtDevicePrepareHardware", PASSIVE, || unsafe {
                f.run((
                    fdo as WDFDEVICE,
                    raw as WDFCMRESLIST,
                    translated as WDFCMRESLIST,
                ))
            })
        });
        with(|k| {
            k.preparing = None;
            for list in [raw, translated] {
                k.delete_now("start", list);
            }
        });
        if status < 0 {
            return status;
        }
        self.d0_entry()
    }

    /// D0Entry from D3Final, as after every start (KMDF calls it after prepare hardware).
    fn d0_entry(&mut self) -> NTSTATUS {
        self.d0_entry_from(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final)
    }

    /// D0Entry: the device is in D0 again before the driver hears it.
    fn d0_entry_from(&mut self, previous: WDF_POWER_DEVICE_STATE) -> NTSTATUS {
        let fdo = self.fdo("D0Entry");
        with(|k| k.adapters.iter_mut().for_each(|a| a.d0 = true));
        let Some(f) = self.pnp().EvtDeviceD0Entry else {
            return STATUS_SUCCESS;
        };
        // SAFETY: the driver's callback for its FDO.
        at("EvtDeviceD0Entry", PASSIVE, || unsafe {
            f.run((fdo as WDFDEVICE, previous))
        })
    }

    /// The PnP manager's enumeration: a PDO for each present child that has none; a PDO whose
    /// child went missing is removed.
    pub(crate) fn enumerate(&mut self) {
        super::children::enumerate(self.fdo("enumerate"));
    }

    /// Runs every queued DPC and work item until none is left.
    pub(crate) fn run(&mut self) {
        run_queued();
    }

    /// Virtual time passes `ms`: each timer fires when due, and what it queues runs.
    pub(crate) fn advance(&mut self, ms: u64) {
        dispatch_for(ms * 1000);
    }

    /// A PnP stop for a resource rebalance: IRP_MN_QUERY_STOP_DEVICE (KMDF refuses it while
    /// a special file is on the device's path), then IRP_MN_STOP_DEVICE: KMDF powers the
    /// device down to D3Final (powerpolicystatemachine.cpp, PowerPolStopping;
    /// powerstatemachine.cpp, PowerGotoD3Stopped), then releases the hardware (and the
    /// cycle rule). The children stay: their PDOs are not touched. The query's answer.
    pub(crate) fn stop(&mut self) -> NTSTATUS {
        let status = self.query_stop();
        if status >= 0 {
            self.stop_after_query();
        }
        status
    }

    /// IRP_MN_QUERY_STOP_DEVICE alone: KMDF's answer, then the driver's
    /// (pnpstatemachine.cpp, PnpEventQueryStop). What follows an allowed one is
    /// [`Self::stop_after_query`] or [`Self::cancel_stop`].
    pub(crate) fn query_stop(&mut self) -> NTSTATUS {
        let fdo = self.fdo("query stop");
        let status = super::usage::query_stop_or_remove(fdo);
        match (status >= 0, self.pnp().EvtDeviceQueryStop) {
            // SAFETY: the driver's callback for its FDO.
            (true, Some(f)) => at("EvtDeviceQueryStop", PASSIVE, || unsafe {
                f.run((fdo as WDFDEVICE,))
            }),
            _ => status,
        }
    }

    /// IRP_MN_STOP_DEVICE: D0Exit to D3Final, then release hardware.
    pub(crate) fn stop_after_query(&mut self) {
        self.d0_exit(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final);
        self.release();
    }

    /// IRP_MN_QUERY_REMOVE_DEVICE: KMDF's answer (the driver has no callback for it).
    pub(crate) fn query_remove(&mut self) -> NTSTATUS {
        super::usage::query_stop_or_remove(self.fdo("query remove"))
    }

    /// Device power down, the device staying started: `target` D3 for idle or system sleep
    /// (S3, and S4 hibernation, whose image the boot path wrote before), or D3Final for a
    /// shutdown. The children went to Dx first, as PnP powers a tree down.
    pub(crate) fn power_down(&mut self, target: WDF_POWER_DEVICE_STATE) {
        self.power_down_children(target);
        self.d0_exit(target);
    }

    /// Back to D0 from D3 (a wake, a resume from sleep): D0Entry.
    pub(crate) fn power_up(&mut self) -> NTSTATUS {
        let status = self.d0_entry_from(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3);
        self.power_up_children();
        status
    }

    /// D0Exit: the driver's callback runs with the device still in D0 (it may wait, as
    /// other processors run on); once it returns the device is in Dx and its registers are
    /// off (the DeviceInDx rule).
    fn d0_exit(&mut self, target: WDF_POWER_DEVICE_STATE) {
        let fdo = self.fdo("D0Exit");
        if let Some(f) = self.pnp().EvtDeviceD0Exit {
            // SAFETY: the driver's callback for its FDO.
            at("EvtDeviceD0Exit", PASSIVE, || unsafe {
                f.run((fdo as WDFDEVICE, target))
            });
        }
        with(|k| k.adapters.iter_mut().for_each(|a| a.d0 = false));
        self.run();
    }

    fn release(&mut self) {
        let fdo = self.fdo("release");
        if let Some(f) = self.pnp().EvtDeviceReleaseHardware {
            // SAFETY: the driver's callback for its FDO.
            at("EvtDeviceReleaseHardware", PASSIVE, || unsafe {
                f.run((fdo as WDFDEVICE, core::ptr::null_mut::<core::ffi::c_void>()))
            });
        }
        super::leaks::cycle(fdo);
    }

    /// Surprise removal, then the remove that follows it.
    pub(crate) fn surprise_remove(&mut self) {
        let fdo = self.fdo("surprise removal");
        self.remove_child_stacks();
        super::children::remove_all(fdo);
        if let Some(f) = self.pnp().EvtDeviceSurpriseRemoval {
            // SAFETY: the driver's callback for its FDO.
            at("EvtDeviceSurpriseRemoval", PASSIVE, || unsafe {
                f.run((fdo as WDFDEVICE,))
            });
        }
        self.run();
        self.remove();
    }

    /// Remove: the children first, EvtDeviceSelfManagedIoFlush (PnpCleanupForRemove),
    /// D0Exit to D3Final, release hardware, then KMDF deletes the FDO and everything under it
    /// (cleanup callbacks run).
    pub(crate) fn remove(&mut self) {
        let fdo = self.fdo("remove");
        self.remove_child_stacks();
        super::children::remove_all(fdo);
        self.flush_self_managed_io();
        self.d0_exit(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final);
        self.release();
        self.delete_fdo(fdo);
    }

    /// A start after a PnP stop that the bus driver below fails (PCI refuses the
    /// rebalance's resources): KMDF's FDO goes Stopped, StartDeviceFailed, Failed, and the
    /// one driver callback on that path is EvtDeviceSelfManagedIoFlush (pnpstatemachine.cpp,
    /// PnpEventFailed, PnpCleanupForRemove): no prepare, no D0Entry, no release (the stop
    /// released the hardware). The PnP manager then removes the device: [`Self::remove_failed`].
    pub(crate) fn fail_restart(&mut self) {
        self.flush_self_managed_io();
    }

    /// IRP_MN_REMOVE_DEVICE of a device that failed: the children first (KMDF's FDO waits in
    /// PnpRemovedWaitForChildren), then the FDO deleted, with no power-down and no release.
    pub(crate) fn remove_failed(&mut self) {
        let fdo = self.fdo("remove after a failure");
        self.remove_child_stacks();
        super::children::remove_all(fdo);
        self.delete_fdo(fdo);
    }

    fn flush_self_managed_io(&mut self) {
        let fdo = self.fdo("self-managed I/O flush");
        if let Some(f) = self.pnp().EvtDeviceSelfManagedIoFlush {
            // SAFETY: the driver's callback for its FDO, at PASSIVE_LEVEL as KMDF calls it.
            at("EvtDeviceSelfManagedIoFlush", PASSIVE, || unsafe {
                f.run((fdo as WDFDEVICE,))
            });
        }
    }

    fn delete_fdo(&mut self, fdo: Handle) {
        let cleanups = with(|k| k.delete("remove", fdo));
        at("EvtCleanupCallback", PASSIVE, || {
            super::objects::run_cleanups(cleanups)
        });
        self.fdo = None;
    }

    /// Unload: EvtDriverUnload (if the driver has one), then the leak report.
    pub(crate) fn unload(&mut self) {
        let (driver, unload) = with(|k| {
            let driver = k.drivers[super::image::BUS].unwrap_or_else(|| {
                violation(Rule::Expectation, "DriverUnload", "no WdfDriverCreate")
            });
            match &k.objects[Kernel::index_of(driver as _)].kind {
                Kind::Driver { config } => (driver, config.EvtDriverUnload),
                _ => (driver, None),
            }
        });
        if let Some(f) = unload {
            // SAFETY: the driver's callback with its driver, as KMDF calls it at unload.
            at("EvtDriverUnload", PASSIVE, || unsafe {
                f.run((driver as WDFDRIVER,))
            });
        }
        super::leaks::unload();
    }

    /// IRP_MN_DEVICE_USAGE_NOTIFICATION from the storage stack above the child `serial`'s
    /// PDO (the boot LUN's: paging, dump, hibernation, boot file), as KMDF answers it.
    pub(crate) fn usage_notification(
        &mut self,
        serial: u32,
        file: WDF_SPECIAL_FILE_TYPE,
        in_path: bool,
    ) -> NTSTATUS {
        let fdo = self.fdo("usage notification");
        let Some(pdo) = super::children::pdo_of(fdo, serial) else {
            violation(Rule::Expectation, "usage notification", "no such child");
        };
        super::usage::notify(pdo, file, in_path)
    }
}

pub(crate) fn run_dpc(h: Handle) {
    let f = with(|k| match &mut k.objects[Kernel::index_of(h as _)].kind {
        Kind::Dpc {
            config,
            queued,
            running,
        } => {
            *queued = false;
            *running = super::schedule::me();
            config.EvtDpcFunc
        }
        _ => None,
    });
    if let Some(f) = f {
        // SAFETY: the driver's callback for its DPC.
        at("EvtDpcFunc", DISPATCH, || unsafe { f.run((h as WDFDPC,)) });
    }
    with(|k| {
        if let Kind::Dpc { running, .. } = &mut k.objects[Kernel::index_of(h as _)].kind {
            *running = 0;
        }
    });
}

pub(crate) fn fire_timer(h: Handle) {
    let f = with(|k| match &mut k.objects[Kernel::index_of(h as _)].kind {
        Kind::Timer {
            config,
            due_us,
            running,
        } => {
            *due_us = None;
            *running = super::schedule::me();
            config.EvtTimerFunc
        }
        _ => None,
    });
    if let Some(f) = f {
        // SAFETY: the driver's callback for its timer.
        at("EvtTimerFunc", DISPATCH, || unsafe {
            f.run((h as WDFTIMER,))
        });
    }
    with(|k| {
        if let Kind::Timer { running, .. } = &mut k.objects[Kernel::index_of(h as _)].kind {
            *running = 0;
        }
    });
}
