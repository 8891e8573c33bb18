//! The platform on KMDF and WDM: each method of [`crate::kernel::Platform`] (the core host's) and
//! of [`crate::kernel::KmdfPlatform`] is one or two kernel calls. Type-checked against the KMDF
//! 1.33 headers and run on the KMDF model (hcabus-kmdf-model); linked and its image run there too
//! (docs/windows.md).

use core::cell::UnsafeCell;

use hcabus::coordinator::{Config, Coordinator};
use hcabus::host::{Bus, NewError};
use hcabus::mmio::{MmioHca, RegisterAccess};
use hcabus::types::{ClientId, Event, PnpOp, TimerId};
use hcabus::Instant;
use hcabus_cabi::CCallback;
use wdk_sys::*;

use super::defects::{planted, Defect};

// wdm.h (Windows 8 on); wdk-sys 0.5 generates no binding for it.
unsafe extern "system" {
    fn KeQuerySystemTimePrecise(current_time: PLARGE_INTEGER);
}

/// The Unix epoch, 1970-01-01, in milliseconds since the system time's 1601-01-01.
const UNIX_EPOCH_SINCE_1601_MS: u64 = 11_644_473_600_000;
use super::resources::{self, Deferred};
use crate::kernel::{
    ChildFunction, EventLogEntry, Irql, KmdfPlatform, Lock, Platform, PlatformError, Scheduled,
};

/// A WDFSPINLOCK guarding `T`.
pub(crate) struct WdfSpinLock<T> {
    lock: WDFSPINLOCK,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only reached between WdfSpinLockAcquire and WdfSpinLockRelease.
unsafe impl<T: Send> Sync for WdfSpinLock<T> {}

impl<T> Drop for WdfSpinLock<T> {
    fn drop(&mut self) {
        // SAFETY: the lock this value created, not held (dropping needs `&mut self`):
        // deleted once, so that no prepare/release cycle leaves one behind.
        unsafe { delete(self.lock.cast()) };
    }
}

impl<T> Lock<T> for WdfSpinLock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the lock was created with the FDO as parent and lives as long as the bus.
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, self.lock) };
        if planted(Defect::SpinLockTwice) {
            // SAFETY: none: the planted violation, which the model stops at.
            unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, self.lock) };
        }
        // SAFETY: the lock is held: this is the only reference to the data.
        let r = f(unsafe { &mut *self.data.get() });
        // SAFETY: acquired above on this thread.
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockRelease, self.lock) };
        r
    }

    fn into_inner(self) -> T {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the lock this value created, not held (taking `self` needs no holder);
        // deleted once: `this` is never dropped.
        unsafe { delete(this.lock.cast()) };
        // SAFETY: the data is moved out once, and `this` is never used again.
        unsafe { core::ptr::read(&this.data) }.into_inner()
    }
}

/// A WDFWAITLOCK guarding `T` (PASSIVE_LEVEL).
pub(crate) struct WdfWaitLock<T> {
    lock: WDFWAITLOCK,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only reached between WdfWaitLockAcquire and WdfWaitLockRelease.
unsafe impl<T: Send> Sync for WdfWaitLock<T> {}

impl<T> Drop for WdfWaitLock<T> {
    fn drop(&mut self) {
        // SAFETY: as for the spin lock.
        unsafe { delete(self.lock.cast()) };
    }
}

/// WdfObjectDelete of an object this layer created and owns.
///
/// # Safety
/// `object` is live and not used afterwards.
unsafe fn delete(object: WDFOBJECT) {
    if object.is_null() || planted(Defect::ReleaseWithoutRundown) {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, object) };
}

impl<T> Lock<T> for WdfWaitLock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the lock lives as long as the bus; a null timeout waits (PASSIVE_LEVEL only,
        // which the work item is).
        let status = unsafe {
            call_unsafe_wdf_function_binding!(WdfWaitLockAcquire, self.lock, core::ptr::null_mut())
        };
        // With no timeout the only answer is STATUS_SUCCESS, once the lock is ours.
        debug_assert_eq!(status, STATUS_SUCCESS);
        if planted(Defect::WaitLockTwice) {
            // SAFETY: none: the planted violation, which the model stops at.
            let _ = unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfWaitLockAcquire,
                    self.lock,
                    core::ptr::null_mut()
                )
            };
        }
        // SAFETY: the lock is held: this is the only reference to the data.
        let r = f(unsafe { &mut *self.data.get() });
        if !planted(Defect::WaitLockKept) {
            // SAFETY: acquired above.
            unsafe { call_unsafe_wdf_function_binding!(WdfWaitLockRelease, self.lock) };
        }
        r
    }

    fn into_inner(self) -> T {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: as for the spin lock.
        unsafe { delete(this.lock.cast()) };
        // SAFETY: as for the spin lock.
        unsafe { core::ptr::read(&this.data) }.into_inner()
    }
}

/// BAR0 mapped with MmMapIoSpaceEx, config space through the PCI bus interface.
pub(crate) struct WdfRegs {
    bar0: *mut u8,
    bar0_len: usize,
    pci: BUS_INTERFACE_STANDARD,
}

// SAFETY: the mapping and the bus interface may be used from any thread; the bus serialises
// every access under its wait lock.
unsafe impl Send for WdfRegs {}

impl Drop for WdfRegs {
    fn drop(&mut self) {
        // SAFETY: the mapping made in map_registers, unused once the bus that owned these
        // registers is dropped.
        unsafe { resources::unmap(self.bar0, self.bar0_len) };
        // SAFETY: the interface referenced in map_registers, given back once.
        unsafe { resources::release_interface(&self.pci) };
    }
}

/// The register file of the KMDF model (`hcabus-kmdf-model`), which defines these as it
/// defines the kernel's exports: the Linux build of the layer cannot map a BAR.
#[cfg(wdk_fake)]
mod model_hooks {
    extern "C" {
        pub(super) fn hcabus_model_register_read(register: *const u32) -> u32;
        pub(super) fn hcabus_model_register_write(register: *mut u32, value: u32);
    }
}

/// READ_REGISTER_ULONG: on x64 Windows a volatile load (wdm.h's inline function). Under the
/// KMDF model the load goes to its register file, which gives reads and writes the side
/// effects a ConnectX has: the one place the model stands in below the FFI layer.
///
/// # Safety
/// `register` is in a live mapping, dword aligned.
unsafe fn read_register(register: *const u32) -> u32 {
    #[cfg(wdk_fake)]
    {
        // SAFETY: the caller's contract; the model defines the function.
        unsafe { model_hooks::hcabus_model_register_read(register) }
    }
    #[cfg(not(wdk_fake))]
    {
        // SAFETY: the caller's contract.
        unsafe { core::ptr::read_volatile(register) }
    }
}

/// WRITE_REGISTER_ULONG, as [`read_register`].
///
/// # Safety
/// As [`read_register`].
unsafe fn write_register(register: *mut u32, value: u32) {
    #[cfg(wdk_fake)]
    {
        // SAFETY: the caller's contract; the model defines the function.
        unsafe { model_hooks::hcabus_model_register_write(register, value) }
    }
    #[cfg(not(wdk_fake))]
    {
        // SAFETY: the caller's contract.
        unsafe { core::ptr::write_volatile(register, value) }
    }
}

impl RegisterAccess for WdfRegs {
    fn config_read32(&mut self, offset: u16) -> Option<u32> {
        let mut value = 0u32;
        let get = self.pci.GetBusData?;
        // SAFETY: the interface was referenced in `new`; the buffer is 4 writable bytes.
        let n = unsafe {
            get(
                self.pci.Context,
                PCI_WHICHSPACE_CONFIG,
                (&mut value as *mut u32).cast(),
                offset.into(),
                4,
            )
        };
        (n == 4).then_some(value)
    }

    fn config_write32(&mut self, offset: u16, value: u32) -> bool {
        let Some(set) = self.pci.SetBusData else {
            return false;
        };
        let mut v = value;
        // SAFETY: as above; the buffer is 4 readable bytes.
        let n = unsafe {
            set(
                self.pci.Context,
                PCI_WHICHSPACE_CONFIG,
                (&mut v as *mut u32).cast(),
                offset.into(),
                4,
            )
        };
        n == 4
    }

    fn bar0_read32(&mut self, offset: u32) -> u32 {
        if offset as usize + 4 > self.bar0_len {
            return u32::MAX;
        }
        // SAFETY: `offset + 4` is within the mapping, checked above.
        let register = unsafe { self.bar0.add(offset as usize) }.cast::<u32>();
        // SAFETY: in bounds of the mapping, dword aligned (every offset of the map is).
        unsafe { read_register(register) }
    }

    fn bar0_write32(&mut self, offset: u32, value: u32) {
        if offset as usize + 4 > self.bar0_len {
            return;
        }
        // SAFETY: `offset + 4` is within the mapping, checked above.
        let register = unsafe { self.bar0.add(offset as usize) }.cast::<u32>();
        // SAFETY: in bounds of the mapping, dword aligned.
        unsafe { write_register(register, value) }
    }
}

/// The KMDF objects of one FDO, for one prepare/release cycle.
pub(crate) struct WdfPlatform {
    device: WDFDEVICE,
    translated: WDFCMRESLIST,
    deferred: Deferred,
    /// IB ports: the children are an IPoIB per port and the SRP initiator.
    ports: u8,
    /// Callbacks that returned, for Unregister's rundown.
    deliveries: super::shared::AtomicU64,
}

impl WdfPlatform {
    /// The DPC, work item and timers, created with the FDO as parent.
    ///
    /// # Safety
    /// `device` is a live FDO and `translated` its resource list, during
    /// EvtDevicePrepareHardware.
    pub(crate) unsafe fn new(
        device: WDFDEVICE,
        translated: WDFCMRESLIST,
        ports: u8,
    ) -> Result<Self, NTSTATUS> {
        // SAFETY: the caller's contract.
        let deferred = unsafe { Deferred::create(device)? };
        Ok(WdfPlatform {
            device,
            translated,
            deferred,
            ports,
            deliveries: super::shared::AtomicU64::new(0),
        })
    }

    /// The policy and the flight recorder's depth from the service's Parameters key
    /// (`device::config_from_registry`: the defaults where a value is absent; a refused
    /// value named in the debug log, and its part of the configuration left at defaults).
    pub(crate) fn registry_config(&self) -> Config {
        // SAFETY: PASSIVE_LEVEL, in prepare hardware.
        let key = unsafe { super::io::open_parameters(self.device) };
        let (config, refused) = crate::device::config_from_registry(|name| {
            // SAFETY: the key (or null, which reads nothing) is open for this call.
            unsafe { super::io::query_ulong(key, name) }
        });
        // SAFETY: opened above (a null key is not closed).
        unsafe { super::io::close_key(key) };
        for e in refused.iter().flatten() {
            log::error!(
                "Parameters\\{}: {}; its default is used",
                e.field,
                e.problem
            );
        }
        config
    }
}

/// The bus's reservations from the pool, filled slot by slot: `Vec::resize` would keep a call
/// to the allocation-error handler (and, behind it, the standard library's unwinding code)
/// in the image for a growth that cannot come.
impl hcabus::reserve::Reserve for WdfPlatform {
    fn filled<T: Clone>(
        &self,
        key: &'static str,
        len: usize,
        fill: T,
    ) -> Result<alloc::vec::Vec<T>, hcabus::reserve::OutOfMemory> {
        let mut v = alloc::vec::Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| hcabus::reserve::OutOfMemory { key })?;
        for slot in v.spare_capacity_mut().iter_mut().take(len) {
            slot.write(fill.clone());
        }
        // SAFETY: try_reserve_exact gave room for `len`, and the first `len` slots were each
        // written just above.
        unsafe { v.set_len(len) };
        Ok(v)
    }
}

impl Platform for WdfPlatform {
    type SpinLock<T: Send> = WdfSpinLock<T>;
    type WaitLock<T: Send> = WdfWaitLock<T>;
    type Hca = MmioHca<WdfRegs>;
    type Callback = CCallback;

    fn now(&self) -> Instant {
        Self::interrupt_time()
    }

    fn wall_clock_unix_ms(&self) -> Option<u64> {
        let mut now = wdk_sys::LARGE_INTEGER::default();
        // SAFETY: callable at any IRQL; writes the 100 ns intervals since 1601-01-01 (UTC)
        // to `now`, which lives for the call.
        unsafe { KeQuerySystemTimePrecise(&mut now) };
        // SAFETY: reading the QuadPart of a LARGE_INTEGER the call wrote.
        let since_1601 = u64::try_from(unsafe { now.QuadPart }).ok()?;
        (since_1601 / 10_000).checked_sub(UNIX_EPOCH_SINCE_1601_MS)
    }

    /// The room from pool first (a short pool is STATUS_INSUFFICIENT_RESOURCES, not a
    /// bugcheck), then the coordinator written into it in place.
    fn new_coordinator(
        &self,
        config: Config,
        identity: hcabus::hca::Identity,
        now: Instant,
    ) -> Result<alloc::boxed::Box<Coordinator>, NewError> {
        super::context::build_in_pool(|room| {
            Coordinator::init_in(room, config, identity, now, self).map_err(NewError::Policy)
        })
        .map_err(|e| e.unwrap_or(NewError::OutOfMemory))
    }

    fn spin_lock<T: Send>(&self, value: T) -> Result<WdfSpinLock<T>, PlatformError> {
        let mut lock = core::ptr::null_mut();
        let mut attributes = super::context::attributes(self.lock_parent(), None);
        // SAFETY: PASSIVE_LEVEL in prepare hardware; parented to the FDO, and deleted by
        // the lock's Drop when the bus goes.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(WdfSpinLockCreate, &mut attributes, &mut lock)
        };
        if !planted(Defect::LockStatusIgnored) {
            created(status, lock)?;
        }
        Ok(WdfSpinLock {
            lock,
            data: UnsafeCell::new(value),
        })
    }

    fn wait_lock<T: Send>(&self, value: T) -> Result<WdfWaitLock<T>, PlatformError> {
        let mut lock = core::ptr::null_mut();
        let mut attributes = super::context::attributes(self.lock_parent(), None);
        // SAFETY: as for the spin lock.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(WdfWaitLockCreate, &mut attributes, &mut lock)
        };
        if !planted(Defect::LockStatusIgnored) {
            created(status, lock)?;
        }
        Ok(WdfWaitLock {
            lock,
            data: UnsafeCell::new(value),
        })
    }

    fn arm_timer(&self, timer: TimerId, due: Instant) {
        let wait_us = due.saturating_since(self.now()).as_us();
        // Negative: relative, in 100 ns units.
        let relative = -(i64::try_from(wait_us.saturating_mul(10)).unwrap_or(i64::MAX));
        // SAFETY: the timer lives as long as the FDO.
        let _was_queued = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfTimerStart,
                self.deferred.timers[timer as usize],
                relative
            )
        };
        // A timer already queued is re-armed to the new due time: nothing else to do.
    }

    fn cancel_timer(&self, timer: TimerId) {
        // SAFETY: as above; FALSE: do not wait (we may be at DISPATCH_LEVEL).
        let _was_queued = unsafe {
            call_unsafe_wdf_function_binding!(WdfTimerStop, self.deferred.timers[timer as usize], 0)
        };
        // A timer that already fired is stale when its callback runs, and ignored there.
    }

    fn queue_dpc(&self) -> Scheduled {
        // SAFETY: the DPC lives as long as the FDO.
        let _queued_now =
            unsafe { call_unsafe_wdf_function_binding!(WdfDpcEnqueue, self.deferred.dpc) };
        // FALSE means it was queued already: the one run drains everything queued.
        Scheduled::Queued
    }

    fn queue_work_item(&self) -> Scheduled {
        // SAFETY: the work item lives as long as the FDO.
        unsafe { call_unsafe_wdf_function_binding!(WdfWorkItemEnqueue, self.deferred.work_item) };
        Scheduled::Queued
    }

    fn deliver(_bus: &Bus<Self>, callback: &CCallback, client: ClientId, event: Event) {
        callback.deliver(client, event);
    }

    fn pnp(&self, op: PnpOp) {
        match op {
            // SAFETY: the FDO's default child list.
            PnpOp::ReportChildrenMissing => unsafe {
                super::children::children_missing(self.device)
            },
            PnpOp::ReenumerateChildren => {
                let mut present = [ChildFunction::Srp; 3];
                let mut n = 0;
                for (slot, c) in present.iter_mut().zip(ChildFunction::of_bus(self.ports)) {
                    *slot = c;
                    n += 1;
                }
                // SAFETY: the FDO's default child list.
                unsafe { super::children::rescan(self.device, &present[..n]) };
            }
        }
    }

    fn log_event(&self, entry: EventLogEntry) {
        // SAFETY: PASSIVE_LEVEL in the work item; the FDO's WDM device object.
        unsafe { super::io::write_error_log(self.device, entry) };
    }

    fn trace(&self, record: &hcabus::recorder::Record, reset: Option<hcabus::host::ResetSpan>) {
        super::etw::write(record, reset);
    }

    fn at_dispatch(&self) -> bool {
        self.irql() == Irql::Dispatch
    }

    fn context(&self) -> usize {
        if planted(Defect::SharedContext) {
            return 1;
        }
        // In a DPC this is the thread the DPC interrupted, which cannot itself run until the
        // DPC returns: two contexts side by side never share it.
        // SAFETY: callable at any IRQL.
        unsafe { wdk_sys::ntddk::PsGetCurrentThreadId() as usize }
    }

    fn delivery_ended(&self) {
        self.deliveries
            .fetch_add(1, core::sync::atomic::Ordering::AcqRel);
    }

    fn deliveries_ended(&self) -> u64 {
        self.deliveries.load(core::sync::atomic::Ordering::Acquire)
    }

    fn wait_delivery_end(&self, seen: u64) {
        // A callback runs at DISPATCH_LEVEL and may not block, so this wait is short: a
        // millisecond's sleep between looks, not an event the DPC would have to set.
        while self.deliveries_ended() == seen {
            // PASSIVE_LEVEL: the bus checked `at_dispatch` first.
            Self::sleep_ms(1);
        }
    }

    fn delay_ms(&self, ms: u32) -> bool {
        if planted(Defect::ResetRunsPastD0Exit) || self.irql() != Irql::Passive {
            return false;
        }
        Self::sleep_ms(ms);
        true
    }
}

impl WdfPlatform {
    /// A lock's parent: the FDO (none when the planted SDV ParentObjectCheckLock violation
    /// is).
    fn lock_parent(&self) -> WDFOBJECT {
        if planted(Defect::LockWithoutParent) {
            return core::ptr::null_mut();
        }
        self.device.cast()
    }

    /// The unbiased interrupt time. KeQueryInterruptTime is a macro over KUSER_SHARED_DATA
    /// on x64, not an export; the unbiased time does not advance while the machine sleeps,
    /// so a deadline is not overrun by a hibernation it could not have acted in. It moves
    /// by clock ticks (15.6 ms by default).
    pub(crate) fn interrupt_time() -> Instant {
        // SAFETY: callable at any IRQL; 100 ns units.
        let t = unsafe { wdk_sys::ntddk::KeQueryUnbiasedInterruptTime() };
        Instant::from_us(t / 10)
    }

    /// KeDelayExecutionThread for `ms`, at PASSIVE_LEVEL: at least `ms`, and to the next
    /// clock tick (a 1 ms sleep is 15.6 ms by default), so a caller bounds a wait by the
    /// time elapsed, never by the sleeps it counted.
    pub(crate) fn sleep_ms(ms: u32) {
        let mut interval = LARGE_INTEGER {
            QuadPart: -10_000 * i64::from(ms), // relative, in 100 ns units
        };
        // SAFETY: PASSIVE_LEVEL (the callers' contract); the interval lives for the call.
        let _status = unsafe {
            wdk_sys::ntddk::KeDelayExecutionThread(
                _MODE::KernelMode as KPROCESSOR_MODE,
                0,
                &mut interval,
            )
        };
    }
}

impl KmdfPlatform for WdfPlatform {
    fn irql(&self) -> Irql {
        // SAFETY: always callable.
        match unsafe { wdk_sys::ntddk::KeGetCurrentIrql() } {
            0 | 1 => Irql::Passive,
            _ => Irql::Dispatch,
        }
    }

    fn map_registers(&mut self) -> Result<MmioHca<WdfRegs>, PlatformError> {
        // SAFETY: the resource list is valid during prepare hardware.
        let (start, len) =
            unsafe { resources::memory_bar(self.translated) }.ok_or(PlatformError::NoRegisters)?;
        // SAFETY: a memory resource the PnP manager assigned to this function.
        let bar0 = unsafe { resources::map(start, len) }.ok_or(PlatformError::NoRegisters)?;
        // SAFETY: the FDO is live; the interface is referenced until the registers go.
        let Some(pci) = (unsafe { resources::pci_interface(self.device) }) else {
            // SAFETY: mapped just above, never handed out.
            unsafe { resources::unmap(bar0, len) };
            return Err(PlatformError::NoConfigSpace);
        };
        Ok(MmioHca::new(WdfRegs {
            bar0,
            bar0_len: len,
            pci,
        }))
    }

    fn child_present(&self, child: ChildFunction) -> Result<(), PlatformError> {
        // SAFETY: the FDO's default child list, during prepare hardware.
        unsafe { super::children::child_present(self.device, child) }
            .map_err(|s| PlatformError::Status(s as u32))
    }
}

/// A created object's status as a Result; a success that left the handle null is refused
/// too.
fn created<H>(status: NTSTATUS, handle: *mut H) -> Result<(), PlatformError> {
    if status < 0 || handle.is_null() {
        return Err(PlatformError::Status(status as u32));
    }
    Ok(())
}

pub(crate) use super::io::{complete, with_request_buffers};
pub(crate) use super::objects::release_instance;
pub(crate) use super::objects::{claim_instance, create_fdo, install_logger, pci_ids};
