//! Object contexts, as KMDF wants them declared: each context type has a static
//! WDF_OBJECT_CONTEXT_TYPE_INFO whose `UniqueType` points at itself (what C's
//! WDF_DECLARE_CONTEXT_TYPE declares), the object's attributes name it, and every lookup
//! passes it (KMDF bugchecks 0x10D on a null type info). Object attributes are built as
//! WDF_OBJECT_ATTRIBUTES_INIT builds them, since wdk-sys binds none of the FORCEINLINE
//! `_INIT` helpers.

use core::cell::UnsafeCell;
use core::ptr::{null, null_mut};
use core::sync::atomic::Ordering;

use hcabus::host::{Bus, Parked};
use hcabus_cabi::CCallback;
use wdk_sys::*;

use super::defects::{planted, Defect};
use super::shared::{AtomicBool, AtomicPtr, AtomicU32};
use super::wdf_platform::WdfPlatform;

/// A context type's WDF_OBJECT_CONTEXT_TYPE_INFO.
pub(crate) struct ContextType(WDF_OBJECT_CONTEXT_TYPE_INFO);

// SAFETY: the info is immutable, and its pointers are to 'static data (its name, itself).
unsafe impl Sync for ContextType {}

impl ContextType {
    /// What a lookup and the attributes name: the info's `UniqueType`.
    fn unique(&'static self) -> PCWDF_OBJECT_CONTEXT_TYPE_INFO {
        self.0.UniqueType
    }
}

/// Declares the static type info of a context type.
macro_rules! context_type {
    ($info:ident, $ty:ty, $name:literal) => {
        pub(crate) static $info: ContextType = ContextType(WDF_OBJECT_CONTEXT_TYPE_INFO {
            Size: core::mem::size_of::<WDF_OBJECT_CONTEXT_TYPE_INFO>() as ULONG,
            ContextName: $name.as_ptr(),
            ContextSize: core::mem::size_of::<$ty>(),
            UniqueType: &$info.0,
            EvtDriverGetUniqueContextType: None,
        });
    };
}

context_type!(FDO_CONTEXT, FdoContext, c"FdoContext");
context_type!(CONTROL_CONTEXT, ControlContext, c"ControlContext");
context_type!(TIMER_CONTEXT, TimerContext, c"TimerContext");

/// The FDO's context. The bus is reached only under its rundown protection, so that release
/// hardware can wait until no DPC, timer, work item, IOCTL or child is inside it before it
/// is freed; no caller ever gets `&mut` to anything here.
pub(crate) struct FdoContext {
    pub(crate) device: WDFDEVICE,
    /// The FDO's control device, deleted with the FDO (KMDF does not delete control
    /// devices on its own).
    pub(crate) control: AtomicPtr<core::ffi::c_void>,
    rundown: UnsafeCell<EX_RUNDOWN_REF>,
    /// The bus (a leaked Box) between prepare and release hardware; null outside.
    bus: AtomicPtr<Bus<WdfPlatform>>,
    /// Above every client id the FDO's previous buses gave out: each start builds a new bus,
    /// and a child that kept an id across a rebalance must be refused as stale, not taken
    /// for the client that holds its slot in the new one.
    generations: AtomicU32,
    /// What a PnP stop keeps for the next start (a leaked Box, or null): the coordinator with
    /// the children's registrations, so that a rebalance is invisible to them. Freed by the
    /// FDO's cleanup.
    parked: AtomicPtr<Parked<CCallback>>,
    /// Set by surprise removal and by the FDO's cleanup: a request that still reaches this
    /// context with no bus (through a handle kept open on the control device, or a child's
    /// interface, whose references keep it allocated) is answered as removed, not as a stop.
    pub(crate) removed: AtomicBool,
    /// Between a PnP stop that parked the bus and the start that resumes it: a child's call
    /// then waits for the start. Cleared by that start, or by its failure (the parked bus is
    /// gone with it: the calls are then answered as removed).
    pub(crate) stopped: AtomicBool,
    /// Starts that let callers in, counted by attach before it clears `stopped`: a caller
    /// refused at the door reads it before trying, and a change after the refusal means a
    /// start opened the door meanwhile (D1: a refusal, then the start's re-initialised
    /// rundown and cleared `stopped`, read as a removal).
    pub(crate) starts: AtomicU32,
    /// How many of each special file the storage stack above holds on this bus's path
    /// (index: WDF_SPECIAL_FILE_TYPE), from its usage notifications. A count, as KMDF keeps
    /// (FxPkgPnp's m_SpecialFileCount): two paging files on the boot LUN are two
    /// notifications, and the first one taken off leaves the other on the path.
    pub(crate) special_files: [AtomicU32; SPECIAL_FILE_TYPES],
    /// The control device's number (`\Device\HcaBus<n>`), given back by the FDO's destroy.
    pub(crate) instance: u32,
}

/// WDF_SPECIAL_FILE_TYPE's values, WdfSpecialFileUndefined (0) to WdfSpecialFileMax (7).
pub(crate) const SPECIAL_FILE_TYPES: usize = 8;

// SAFETY: `rundown` is only passed to the Ex*Rundown* functions, which synchronise
// themselves; the other fields are atomics or a handle written once at creation.
unsafe impl Sync for FdoContext {}

/// The control device's context: the FDO whose bus serves its requests. The control device
/// holds a reference on that FDO from its creation to its EvtDestroyCallback: KMDF keeps a
/// control device deleted with a handle open, and its queue dispatching, until the handle
/// closes, and a request then must still find the FDO's context allocated.
pub(crate) struct ControlContext {
    pub(crate) fdo: WDFDEVICE,
}

/// A WDFTIMER's context: the TimerId it stands for.
pub(crate) struct TimerContext {
    pub(crate) id: u32,
}

/// Room for a `T` from the pool, `init` writing the value straight into it: `Ok` with the
/// box, or `Err(None)` when the pool is short, or `Err(Some(e))` when `init` failed (it must
/// then have written nothing: the room is freed as it is). A large value (the bus, the
/// coordinator) is so never built on a kernel stack and copied.
pub(crate) fn build_in_pool<T, E>(
    init: impl FnOnce(&mut core::mem::MaybeUninit<T>) -> Result<&mut T, E>,
) -> Result<alloc::boxed::Box<T>, Option<E>> {
    type Room<T> = core::mem::MaybeUninit<T>;
    let layout = core::alloc::Layout::new::<Room<T>>();
    let room: *mut Room<T> = if planted(Defect::InfallibleAllocation) || layout.size() == 0 {
        alloc::boxed::Box::into_raw(alloc::boxed::Box::new(Room::<T>::uninit()))
    } else {
        // SAFETY: a layout of non-zero size.
        unsafe { alloc::alloc::alloc(layout) }.cast()
    };
    // SAFETY: null, or fresh memory of the room's size and alignment, ours alone.
    let Some(slot) = (unsafe { room.as_mut() }) else {
        return Err(None);
    };
    match init(slot) {
        // SAFETY: `init` wrote the whole value; the box frees it with the layout it was
        // allocated with, through the same global allocator.
        Ok(_) => Ok(unsafe { alloc::boxed::Box::from_raw(room.cast::<T>()) }),
        Err(e) => {
            // SAFETY: the room as allocated above, holding nothing to drop (init's
            // contract), freed once.
            drop(unsafe { alloc::boxed::Box::from_raw(room) });
            Err(Some(e))
        }
    }
}

/// WDF_OBJECT_ATTRIBUTES_INIT, with the parent and the context type set as
/// WDF_OBJECT_ATTRIBUTES_INIT_CONTEXT_TYPE sets them.
pub(crate) fn attributes(
    parent: WDFOBJECT,
    context: Option<&'static ContextType>,
) -> WDF_OBJECT_ATTRIBUTES {
    let mut a = WDF_OBJECT_ATTRIBUTES {
        Size: core::mem::size_of::<WDF_OBJECT_ATTRIBUTES>() as ULONG,
        ExecutionLevel: _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent,
        SynchronizationScope: _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent,
        ParentObject: parent,
        ContextTypeInfo: context.map_or(null(), ContextType::unique),
        ..WDF_OBJECT_ATTRIBUTES::default()
    };
    if planted(Defect::SizeWithoutType) {
        if let Some(c) = context {
            a.ContextSizeOverride = c.0.ContextSize;
            a.ContextTypeInfo = null();
        }
    }
    a
}

/// The context of type `info` of `object`, or `None` when the object has none of that type.
///
/// # Safety
/// `object` is a live WDF handle; `T` is the type `info` declares.
pub(crate) unsafe fn context<'a, T>(
    object: WDFOBJECT,
    info: &'static ContextType,
) -> Option<&'a T> {
    let info = if planted(Defect::NullContextType) {
        null()
    } else {
        info.unique()
    };
    // SAFETY: the caller's contract; the type info is a static that outlives every object.
    let p =
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectGetTypedContextWorker, object, info) };
    // SAFETY: KMDF allocated the context with the object, aligned and of `T`'s size, and
    // keeps it until the object's memory goes; only shared references are handed out.
    unsafe { p.cast::<T>().as_ref() }
}

/// Writes the context of type `info` of an object just created with it; `false` when the
/// object has no such context.
///
/// # Safety
/// `object` was just created with `info` as its context type, `T` is the type `info`
/// declares, and no other code can reach the object yet.
pub(crate) unsafe fn init_context<T>(
    object: WDFOBJECT,
    info: &'static ContextType,
    value: T,
) -> bool {
    // SAFETY: the caller's contract.
    let slot = unsafe {
        call_unsafe_wdf_function_binding!(WdfObjectGetTypedContextWorker, object, info.unique())
    }
    .cast::<T>();
    if slot.is_null() {
        return false;
    }
    // SAFETY: KMDF allocated (and zeroed) the context with the object, of `T`'s size and
    // aligned; no one else reaches it yet: written once, with no old value to drop.
    unsafe { slot.write(value) };
    true
}

impl FdoContext {
    /// Writes the context of a device just created with FDO_CONTEXT.
    ///
    /// # Safety
    /// `device` was just created with FDO_CONTEXT and no one else has seen it yet.
    pub(crate) unsafe fn init<'a>(device: WDFDEVICE, instance: u32) -> Option<&'a FdoContext> {
        let fresh = FdoContext {
            device,
            control: AtomicPtr::new(null_mut()),
            rundown: UnsafeCell::new(EX_RUNDOWN_REF::default()),
            bus: AtomicPtr::new(null_mut()),
            generations: AtomicU32::new(0),
            parked: AtomicPtr::new(null_mut()),
            removed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            starts: AtomicU32::new(0),
            special_files: [const { AtomicU32::new(0) }; SPECIAL_FILE_TYPES],
            instance,
        };
        // SAFETY: the caller's contract.
        if !unsafe { init_context(device.cast(), &FDO_CONTEXT, fresh) } {
            return None;
        }
        // SAFETY: initialised just above.
        let ctx = unsafe { context::<FdoContext>(device.cast(), &FDO_CONTEXT) }?;
        // SAFETY: the rundown reference is in the context, which lives as long as the FDO.
        unsafe { wdk_sys::ntddk::ExInitializeRundownProtection(ctx.rundown.get()) };
        // Run down at once (no one holds it yet): until prepare hardware attaches a bus,
        // every caller is refused at the door, and attach always re-initialises.
        // SAFETY: PASSIVE_LEVEL in EvtDriverDeviceAdd; no holder, so no wait.
        unsafe { wdk_sys::ntddk::ExWaitForRundownProtectionRelease(ctx.rundown.get()) };
        Some(ctx)
    }

    /// Runs `f` on the bus, if there is one, with rundown protection held.
    pub(crate) fn with_bus<R>(&self, f: impl FnOnce(&Bus<WdfPlatform>) -> R) -> Option<R> {
        self.with_bus_or(f).ok()
    }

    /// [`FdoContext::with_bus`], giving `f` back when there is no bus (to try again).
    pub(crate) fn with_bus_or<R, F: FnOnce(&Bus<WdfPlatform>) -> R>(&self, f: F) -> Result<R, F> {
        if planted(Defect::ReleaseWithoutRundown) {
            // SAFETY: none: this is the planted race (a bus freed under its caller).
            return match unsafe { self.bus.load(Ordering::Acquire).as_ref() } {
                Some(bus) => Ok(f(bus)),
                None => Err(f),
            };
        }
        // SAFETY: the rundown reference lives in the context, as long as the FDO.
        if unsafe { wdk_sys::ntddk::ExAcquireRundownProtection(self.rundown.get()) } == 0 {
            return Err(f);
        }
        if planted(Defect::RundownReleasedEarly) {
            // SAFETY: none: this is the planted race (protection released before the call).
            unsafe { wdk_sys::ntddk::ExReleaseRundownProtection(self.rundown.get()) };
            // SAFETY: none, as above.
            return match unsafe { self.bus.load(Ordering::Acquire).as_ref() } {
                Some(bus) => Ok(f(bus)),
                None => Err(f),
            };
        }
        // SAFETY: protection is held: release hardware frees the bus only after it has
        // waited for every holder, so the pointer, if not null, is live until released.
        let r = match unsafe { self.bus.load(Ordering::Acquire).as_ref() } {
            Some(bus) => Ok(f(bus)),
            None => Err(f),
        };
        // SAFETY: acquired above.
        unsafe { wdk_sys::ntddk::ExReleaseRundownProtection(self.rundown.get()) };
        r
    }

    /// Publishes a bus built in prepare hardware and lets callers in (the protection is run
    /// down from device add, and again by each release).
    pub(crate) fn attach(&self, bus: alloc::boxed::Box<Bus<WdfPlatform>>) {
        if planted(Defect::StoppedAfterRundown) {
            self.stopped.store(false, Ordering::Release);
        }
        let floor = self.generations.load(Ordering::Acquire);
        bus.input(|c, _| c.retire_ids_before(floor));
        self.bus
            .store(alloc::boxed::Box::into_raw(bus), Ordering::Release);
        // SAFETY: as in with_bus; PASSIVE_LEVEL in prepare hardware, with no wait under way.
        unsafe { wdk_sys::ntddk::ExReInitializeRundownProtection(self.rundown.get()) };
        self.starts.fetch_add(1, Ordering::Release);
        // Only now: a child's call refused before the line above saw `stopped` and waits
        // for this start; cleared first, it would have been told the device was removed.
        if !planted(Defect::StoppedAfterRundown) {
            self.stopped.store(false, Ordering::Release);
        }
    }

    /// A usage notification of `file`: one more on the bus's path (`in_path`) or one fewer.
    /// A type the array has no room for is not one KMDF sends (it checks the range).
    pub(crate) fn special_file_used(&self, file: usize, in_path: bool) {
        let Some(count) = self.special_files.get(file) else {
            return;
        };
        let step = |n: u32| {
            Some(if in_path {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            })
        };
        let _ = count.fetch_update(Ordering::AcqRel, Ordering::Acquire, step);
    }

    /// The special files on the bus's path now (bit n: WDF_SPECIAL_FILE_TYPE n held once or
    /// more).
    pub(crate) fn special_files_held(&self) -> u32 {
        self.special_files
            .iter()
            .enumerate()
            .filter(|(_, n)| n.load(Ordering::Acquire) > 0)
            .fold(0, |bits, (file, _)| bits | 1 << file)
    }

    /// Release hardware: waits until no caller is inside the bus and none can enter, then
    /// hands the bus back to be dropped (which stops, flushes and deletes its objects).
    pub(crate) fn detach(&self) -> Option<alloc::boxed::Box<Bus<WdfPlatform>>> {
        if !planted(Defect::ReleaseWithoutRundown) {
            // SAFETY: PASSIVE_LEVEL; the reference lives in the context.
            unsafe { wdk_sys::ntddk::ExWaitForRundownProtectionRelease(self.rundown.get()) };
        }
        let p = self.bus.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: `p` came from Box::into_raw in attach and was swapped out once.
        let bus = (!p.is_null()).then(|| unsafe { alloc::boxed::Box::from_raw(p) });
        if let Some(b) = &bus {
            let next = b.inspect(hcabus::coordinator::Coordinator::next_generation);
            self.generations.store(next, Ordering::Release);
        }
        bus
    }

    /// Release hardware of a PnP stop: keeps what the next start resumes.
    pub(crate) fn park(&self, parked: alloc::boxed::Box<Parked<CCallback>>) {
        let old = self
            .parked
            .swap(alloc::boxed::Box::into_raw(parked), Ordering::AcqRel);
        // SAFETY: a pointer from Box::into_raw in an earlier park, swapped out once; PnP
        // callbacks are serialised, and a prepare takes what a release parked, so none is
        // left here in practice: freed rather than leaked if one were.
        drop((!old.is_null()).then(|| unsafe { alloc::boxed::Box::from_raw(old) }));
    }

    /// What the last PnP stop kept, taken by prepare hardware (or by the FDO's cleanup).
    pub(crate) fn take_parked(&self) -> Option<alloc::boxed::Box<Parked<CCallback>>> {
        let p = self.parked.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: from Box::into_raw in `park`, swapped out once.
        (!p.is_null()).then(|| unsafe { alloc::boxed::Box::from_raw(p) })
    }
}
