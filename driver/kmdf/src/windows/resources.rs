//! What prepare hardware creates and release hardware gives back: the delivery DPC, the
//! hardware work item, a timer per TimerId (all parented to the FDO), BAR0's mapping and the
//! PCI bus interface. Type-checked against the KMDF 1.33 headers and run on the KMDF model
//! (hcabus-kmdf-model); linked and its image run there too (docs/windows.md).

use hcabus::types::TimerId;
use wdk_sys::*;

use super::context::{attributes, context, init_context, TimerContext, TIMER_CONTEXT};
use super::defects::{planted, Defect};
use super::{evt_dpc, evt_timer, evt_work_item};

/// The object a DPC, work item or timer was created under (KMDF has no generic
/// `WdfObjectGetParent`: each object type has its own `Get...ParentObject`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Child {
    Dpc(WDFDPC),
    WorkItem(WDFWORKITEM),
    Timer(WDFTIMER),
}

/// The parent of a DPC, work item or timer.
///
/// # Safety
/// The object is live.
pub(crate) unsafe fn parent(object: Child) -> WDFOBJECT {
    match object {
        // SAFETY: the caller's contract.
        Child::Dpc(dpc) => unsafe { call_unsafe_wdf_function_binding!(WdfDpcGetParentObject, dpc) },
        Child::WorkItem(item) => {
            // SAFETY: the caller's contract.
            unsafe { call_unsafe_wdf_function_binding!(WdfWorkItemGetParentObject, item) }
        }
        Child::Timer(timer) => {
            // SAFETY: the caller's contract.
            unsafe { call_unsafe_wdf_function_binding!(WdfTimerGetParentObject, timer) }
        }
    }
}

/// The DPC, work item and timers of one prepared FDO. Dropping them (at PASSIVE_LEVEL, in
/// release hardware, once no callback can reach the bus) stops every timer and waits for
/// its callback, cancels the DPC and waits, flushes the work item, then deletes them all:
/// nothing outlives the prepare/release cycle that made it.
pub(crate) struct Deferred {
    pub(crate) dpc: WDFDPC,
    pub(crate) work_item: WDFWORKITEM,
    pub(crate) timers: [WDFTIMER; TimerId::COUNT],
}

/// Attributes of a DPC, work item or timer: parented to the FDO, inheriting its execution
/// level and synchronization scope (0 would be `...Invalid`, refused by KMDF).
fn deferred_attributes(
    device: WDFDEVICE,
    context: Option<&'static super::context::ContextType>,
) -> WDF_OBJECT_ATTRIBUTES {
    let mut a = attributes(device.cast(), context);
    if planted(Defect::InvalidExecutionLevel) {
        a.ExecutionLevel = 0;
        a.SynchronizationScope = 0;
    }
    a
}

impl Deferred {
    /// The delivery DPC, the hardware work item and one timer per TimerId, parented to the
    /// FDO; what was created before a failure is deleted again.
    ///
    /// # Safety
    /// `device` is live, at PASSIVE_LEVEL.
    pub(crate) unsafe fn create(device: WDFDEVICE) -> Result<Self, NTSTATUS> {
        let mut made = Deferred {
            dpc: core::ptr::null_mut(),
            work_item: core::ptr::null_mut(),
            timers: [core::ptr::null_mut(); TimerId::COUNT],
        };
        let mut attributes = deferred_attributes(device, None);
        let mut dpc_config = WDF_DPC_CONFIG {
            Size: core::mem::size_of::<WDF_DPC_CONFIG>() as ULONG,
            EvtDpcFunc: Some(evt_dpc),
            AutomaticSerialization: 0,
        };
        // SAFETY: the configs outlive the calls; the objects are parented to the live device.
        let s = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfDpcCreate,
                &mut dpc_config,
                &mut attributes,
                &mut made.dpc
            )
        };
        if s < 0 {
            return Err(s);
        }
        let mut work_config = WDF_WORKITEM_CONFIG {
            Size: core::mem::size_of::<WDF_WORKITEM_CONFIG>() as ULONG,
            EvtWorkItemFunc: Some(evt_work_item),
            AutomaticSerialization: 0,
        };
        // SAFETY: as above.
        let s = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfWorkItemCreate,
                &mut work_config,
                &mut attributes,
                &mut made.work_item
            )
        };
        if s < 0 {
            return Err(s);
        }
        for (i, id) in TimerId::ALL.iter().enumerate() {
            // SAFETY: the caller's contract.
            made.timers[i] = unsafe { timer(device, *id) }?;
        }
        Ok(made)
    }
}

/// One WDFTIMER with its TimerId in its context. Not periodic: the bus arms each due time.
///
/// # Safety
/// `device` is live, at PASSIVE_LEVEL.
unsafe fn timer(device: WDFDEVICE, id: TimerId) -> Result<WDFTIMER, NTSTATUS> {
    let mut config = WDF_TIMER_CONFIG {
        Size: core::mem::size_of::<WDF_TIMER_CONFIG>() as ULONG,
        EvtTimerFunc: Some(evt_timer),
        Period: 0,
        AutomaticSerialization: 0,
        TolerableDelay: 0,
        ..WDF_TIMER_CONFIG::default()
    };
    let mut attributes = deferred_attributes(device, Some(&TIMER_CONTEXT));
    let mut timer: WDFTIMER = core::ptr::null_mut();
    // SAFETY: the config and attributes outlive the call.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfTimerCreate, &mut config, &mut attributes, &mut timer)
    };
    if s < 0 {
        return Err(s);
    }
    // SAFETY: the timer was just created with TIMER_CONTEXT; its callback cannot run before
    // it is started.
    if !unsafe { init_context(timer.cast(), &TIMER_CONTEXT, TimerContext { id: id as u32 }) } {
        // SAFETY: ours, never started: deleted once.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, timer.cast()) };
        return Err(STATUS_INVALID_DEVICE_STATE);
    }
    Ok(timer)
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if planted(Defect::ReleaseWithoutRundown) {
            return;
        }
        for timer in self.timers.iter().filter(|t| !t.is_null()) {
            // SAFETY: our live timer; TRUE waits for a running callback (PASSIVE_LEVEL).
            let _was_queued = unsafe { call_unsafe_wdf_function_binding!(WdfTimerStop, *timer, 1) };
        }
        if !self.dpc.is_null() {
            // SAFETY: our live DPC; TRUE waits for a running callback (PASSIVE_LEVEL).
            let _was_queued =
                unsafe { call_unsafe_wdf_function_binding!(WdfDpcCancel, self.dpc, 1) };
        }
        if !self.work_item.is_null() {
            // SAFETY: our live work item; waits until it is neither queued nor running.
            unsafe { call_unsafe_wdf_function_binding!(WdfWorkItemFlush, self.work_item) };
        }
        let objects = self
            .timers
            .iter()
            .map(|t| t.cast())
            .chain([self.dpc.cast(), self.work_item.cast()]);
        for object in objects.filter(|o: &WDFOBJECT| !o.is_null()) {
            // SAFETY: ours, idle (stopped, cancelled, flushed above): deleted once.
            unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, object) };
        }
    }
}

/// The TimerId a WDFTIMER stands for.
///
/// # Safety
/// `timer` was created by [`Deferred::create`].
pub(crate) unsafe fn timer_id(timer: WDFTIMER) -> Option<TimerId> {
    // SAFETY: the caller's contract: the timer carries a TimerContext.
    let ctx = unsafe { context::<TimerContext>(timer.cast(), &TIMER_CONTEXT) }?;
    TimerId::try_from(ctx.id).ok()
}

/// The first memory resource: BAR0.
///
/// # Safety
/// `list` is the translated resource list of prepare hardware.
pub(crate) unsafe fn memory_bar(list: WDFCMRESLIST) -> Option<(i64, usize)> {
    // SAFETY: the caller's contract.
    let count = unsafe { call_unsafe_wdf_function_binding!(WdfCmResourceListGetCount, list) };
    for i in 0..count {
        // SAFETY: `i` is below the count.
        let d =
            unsafe { call_unsafe_wdf_function_binding!(WdfCmResourceListGetDescriptor, list, i) };
        // SAFETY: KMDF returns a valid descriptor for an index below the count, or null.
        let Some(d) = (unsafe { d.as_ref() }) else {
            continue;
        };
        if u32::from(d.Type) == CmResourceTypeMemory {
            // SAFETY: the Memory member is the one a memory resource fills.
            let m = unsafe { d.u.Memory };
            // SAFETY: reading the union's QuadPart of a PHYSICAL_ADDRESS.
            return Some((unsafe { m.Start.QuadPart }, m.Length as usize));
        }
    }
    None
}

/// MmMapIoSpaceEx, uncached, non-executable.
///
/// # Safety
/// `start`/`len` are a memory resource assigned to this device.
pub(crate) unsafe fn map(start: i64, len: usize) -> Option<*mut u8> {
    let address = PHYSICAL_ADDRESS { QuadPart: start };
    // SAFETY: the caller's contract.
    let p = unsafe {
        wdk_sys::ntddk::MmMapIoSpaceEx(address, len as u64, PAGE_READWRITE | PAGE_NOCACHE)
    };
    (!p.is_null()).then_some(p.cast())
}

/// MmUnmapIoSpace of a mapping `map` made.
///
/// # Safety
/// `base`/`len` are a mapping from [`map`], not used afterwards.
pub(crate) unsafe fn unmap(base: *mut u8, len: usize) {
    if planted(Defect::MappingKept) {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { wdk_sys::ntddk::MmUnmapIoSpace(base.cast(), len as u64) };
}

/// GUID_BUS_INTERFACE_STANDARD of wdmguid.h, which wdk-sys does not bind:
/// {496B8280-6F25-11D0-BEAF-08002BE2092F}.
pub(crate) const GUID_BUS_INTERFACE_STANDARD: GUID = GUID {
    Data1: 0x496B_8280,
    Data2: 0x6F25,
    Data3: 0x11D0,
    Data4: [0xBE, 0xAF, 0x08, 0x00, 0x2B, 0xE2, 0x09, 0x2F],
};

/// The PCI bus interface (GUID_BUS_INTERFACE_STANDARD) for config space, referenced by the
/// bus driver that answered: [`release_interface`] gives that reference back.
///
/// # Safety
/// `device` is live, at PASSIVE_LEVEL.
pub(crate) unsafe fn pci_interface(device: WDFDEVICE) -> Option<BUS_INTERFACE_STANDARD> {
    // SAFETY: an all-zero interface is a valid value to be filled.
    let mut iface: BUS_INTERFACE_STANDARD = unsafe { core::mem::zeroed() };
    // SAFETY: the device is live; the buffer is the interface's size.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoQueryForInterface,
            device,
            &GUID_BUS_INTERFACE_STANDARD,
            (&mut iface as *mut BUS_INTERFACE_STANDARD).cast(),
            core::mem::size_of::<BUS_INTERFACE_STANDARD>() as u16,
            1,
            core::ptr::null_mut(),
        )
    };
    (s >= 0).then_some(iface)
}

/// InterfaceDereference of an interface [`pci_interface`] returned.
///
/// # Safety
/// `iface` came from [`pci_interface`] and is not used afterwards.
pub(crate) unsafe fn release_interface(iface: &BUS_INTERFACE_STANDARD) {
    if planted(Defect::MappingKept) {
        return;
    }
    if let Some(dereference) = iface.InterfaceDereference {
        // SAFETY: the caller's contract: the reference the query took, given back once.
        unsafe { dereference(iface.Context) };
    }
}
