//! The child FDO's context: what the function is, its I/O queue, the bus interface it holds,
//! and its state machine under a WDFSPINLOCK. KMDF allocates it with the device and frees it
//! with the device: after release hardware's Unregister (a rundown) no callback of the bus can
//! still be reading it.

use core::cell::UnsafeCell;
use core::ptr::null;

use hcabus::bus_abi::HcabusBusInterfaceV1;
use wdk_sys::*;

use crate::abi::Function;
use crate::child::{Action, Child};

/// The context type's WDF_OBJECT_CONTEXT_TYPE_INFO, whose `UniqueType` is itself (what C's
/// WDF_DECLARE_CONTEXT_TYPE declares).
pub(super) struct ContextType(WDF_OBJECT_CONTEXT_TYPE_INFO);

// SAFETY: immutable, and its pointers are to 'static data (its name, itself).
unsafe impl Sync for ContextType {}

pub(super) static CHILD_CONTEXT: ContextType = ContextType(WDF_OBJECT_CONTEXT_TYPE_INFO {
    Size: core::mem::size_of::<WDF_OBJECT_CONTEXT_TYPE_INFO>() as ULONG,
    ContextName: c"ChildContext".as_ptr(),
    ContextSize: core::mem::size_of::<ChildContext>(),
    UniqueType: &CHILD_CONTEXT.0,
    EvtDriverGetUniqueContextType: None,
});

pub(super) struct ChildContext {
    pub(super) function: Function,
    /// The queue the child's I/O waits in across a reset (power-managed, parallel).
    pub(super) io_queue: WDFQUEUE,
    lock: WDFSPINLOCK,
    /// Written only under `lock`.
    child: UnsafeCell<Child>,
    /// Written in prepare hardware before Register and in release hardware after Unregister
    /// returned: no callback and no I/O runs then (the I/O queue is power-managed, and the
    /// device is out of D0 at both), so every other reader sees it unchanging.
    bus: UnsafeCell<HcabusBusInterfaceV1>,
}

// SAFETY: `child` is reached only under the WDFSPINLOCK; `bus` only as its comment says; the
// handles are written once before the device is published.
unsafe impl Sync for ChildContext {}

/// WDF_OBJECT_ATTRIBUTES_INIT (wdk-sys binds none of the FORCEINLINE `_INIT` helpers), with
/// the parent and, for the device, the context type.
pub(super) fn attributes(parent: WDFOBJECT, context: bool) -> WDF_OBJECT_ATTRIBUTES {
    WDF_OBJECT_ATTRIBUTES {
        Size: core::mem::size_of::<WDF_OBJECT_ATTRIBUTES>() as ULONG,
        ExecutionLevel: _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent,
        SynchronizationScope: _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent,
        ParentObject: parent,
        ContextTypeInfo: if context {
            CHILD_CONTEXT.0.UniqueType
        } else {
            null()
        },
        ..WDF_OBJECT_ATTRIBUTES::default()
    }
}

impl ChildContext {
    /// Writes the context of a device just created with CHILD_CONTEXT.
    ///
    /// # Safety
    /// `device` was just created with CHILD_CONTEXT; nothing else reaches it yet.
    pub(super) unsafe fn init<'a>(
        device: WDFDEVICE,
        function: Function,
        io_queue: WDFQUEUE,
        lock: WDFSPINLOCK,
    ) -> Option<&'a ChildContext> {
        // SAFETY: the caller's contract; the type info is a static.
        let slot = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectGetTypedContextWorker,
                device.cast(),
                CHILD_CONTEXT.0.UniqueType
            )
        }
        .cast::<ChildContext>();
        if slot.is_null() {
            return None;
        }
        let value = ChildContext {
            function,
            io_queue,
            lock,
            child: UnsafeCell::new(Child::new()),
            bus: UnsafeCell::new(HcabusBusInterfaceV1::EMPTY),
        };
        // SAFETY: KMDF allocated and zeroed the context with the device, aligned and of the
        // type's size; no one else reaches it: written once, nothing to drop.
        unsafe { slot.write(value) };
        // SAFETY: just written; only shared references are handed out from here.
        unsafe { slot.as_ref() }
    }

    /// The context of `device`.
    ///
    /// # Safety
    /// `device` is a live child FDO created by `evt_device_add`.
    pub(super) unsafe fn of<'a>(device: WDFDEVICE) -> Option<&'a ChildContext> {
        // SAFETY: the caller's contract.
        let p = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectGetTypedContextWorker,
                device.cast(),
                CHILD_CONTEXT.0.UniqueType
            )
        };
        // SAFETY: KMDF keeps the context as long as the device; shared references only.
        unsafe { p.cast::<ChildContext>().as_ref() }
    }

    /// Runs `step` on the state machine under the spin lock (raised to DISPATCH_LEVEL, held
    /// only for the step: it calls nothing).
    pub(super) fn with_child<R>(&self, step: impl FnOnce(&mut Child) -> R) -> R {
        // SAFETY: the lock was created with the device and lives as long as the context.
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, self.lock) };
        // SAFETY: the lock is held: no other reference to the child exists.
        let r = step(unsafe { &mut *self.child.get() });
        // SAFETY: acquired above, on this processor.
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockRelease, self.lock) };
        r
    }

    /// The interface as prepare hardware stored it (EMPTY outside).
    pub(super) fn bus(&self) -> HcabusBusInterfaceV1 {
        // SAFETY: see the field: no writer runs while a reader can.
        unsafe { *self.bus.get() }
    }

    /// Stores or clears the interface.
    ///
    /// # Safety
    /// Only from prepare hardware before Register, or release hardware after Unregister.
    pub(super) unsafe fn set_bus(&self, bus: HcabusBusInterfaceV1) {
        // SAFETY: the caller's contract: no reader runs.
        unsafe { *self.bus.get() = bus };
    }

    /// The step's action, with the lock dropped: see [`Action`].
    pub(super) fn act(&self, action: Action) {
        super::bus::act(self, action);
    }
}
