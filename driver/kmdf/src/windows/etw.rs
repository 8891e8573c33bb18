//! The driver's ETW provider, `hcabus` (src/etw.rs encodes its events): registered in
//! DriverEntry and unregistered in EvtDriverUnload, as the EtwRegister page asks, and written
//! at the end of each drain, at DISPATCH_LEVEL under the bus lock (EtwWriteTransfer takes any
//! IRQL; what it is given is on the stack or in the image, never paged).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hcabus::host::ResetSpan;
use hcabus::recorder::Record;
use wdk_sys::*;

use crate::etw::{self, EtwEvent};

/// The registration handle (0: none, EtwRegister failed or the driver is unloading). Set in
/// DriverEntry before any device exists and cleared in EvtDriverUnload after the last is
/// gone: no write runs beside either.
static REGISTRATION: AtomicU64 = AtomicU64::new(0);
/// Events not written (encoding refused or EtwWriteTransfer failed): said once when it first
/// happens (DISPATCH_LEVEL, the bus lock held: not a line per event) and in full at unload.
static NOT_WRITTEN: AtomicU64 = AtomicU64::new(0);
static WARNED: AtomicBool = AtomicBool::new(false);

/// One event not written: counted, and the first said.
fn not_written(why: core::fmt::Arguments<'_>) {
    NOT_WRITTEN.fetch_add(1, Ordering::Relaxed);
    if !WARNED.swap(true, Ordering::Relaxed) {
        log::warn!("ETW: {why}; further events not written are counted and said at unload");
    }
}

/// EVENT_DATA_DESCRIPTOR as evntprov.h lays it out: the pointer, the size, then the block's
/// type in the union's first byte (the kit's mingw binding names only `Reserved` there, the
/// WDK's a union: this spelling is both's).
#[repr(C)]
struct DataDescriptor {
    ptr: u64,
    size: u32,
    kind: u8,
    reserved1: u8,
    reserved2: u16,
}

const _: () = {
    assert!(
        core::mem::size_of::<DataDescriptor>() == core::mem::size_of::<EVENT_DATA_DESCRIPTOR>()
    );
    assert!(
        core::mem::align_of::<DataDescriptor>() == core::mem::align_of::<EVENT_DATA_DESCRIPTOR>()
    );
    assert!(
        core::mem::offset_of!(DataDescriptor, size)
            == core::mem::offset_of!(EVENT_DATA_DESCRIPTOR, Size)
    );
    assert!(core::mem::offset_of!(DataDescriptor, kind) == 12);
    assert!(core::mem::size_of::<EVENT_DESCRIPTOR>() == 16);
};

impl DataDescriptor {
    fn of(block: &[u8], kind: u8) -> Self {
        DataDescriptor {
            ptr: block.as_ptr() as u64,
            size: block.len() as u32,
            kind,
            reserved1: 0,
            reserved2: 0,
        }
    }
}

/// EVENT_INFO_CLASS's EventProviderSetTraits: the provider's metadata block, after which
/// ETW reads each EVENT_DATA_DESCRIPTOR's type (without it the metadata blocks would be taken
/// for payload).
const EVENT_PROVIDER_SET_TRAITS: u32 = 2;

/// EtwSetInformation (wdm.h, Windows 10 on, where KMDF 1.33 runs), found at run time: the
/// kit's import list (mingw's) lacks it, and a driver asks the kernel for a newer routine
/// this way anyway.
type EtwSetInformation = unsafe extern "system" fn(REGHANDLE, u32, PVOID, ULONG) -> NTSTATUS;

/// "EtwSetInformation" in UTF-16, for MmGetSystemRoutineAddress.
static SET_INFORMATION_NAME: [u16; 17] = {
    let name = *b"EtwSetInformation";
    let mut out = [0u16; 17];
    let mut i = 0;
    while i < name.len() {
        out[i] = name[i] as u16;
        i += 1;
    }
    out
};

/// EventProviderSetTraits with the provider's metadata block; `false` when the kernel has no
/// EtwSetInformation or refuses the traits.
fn set_traits(handle: REGHANDLE) -> bool {
    let mut name = UNICODE_STRING {
        Length: (SET_INFORMATION_NAME.len() * 2) as u16,
        MaximumLength: (SET_INFORMATION_NAME.len() * 2) as u16,
        Buffer: SET_INFORMATION_NAME.as_ptr().cast_mut(),
    };
    // SAFETY: PASSIVE_LEVEL; a counted UTF-16 name the kernel only reads.
    let routine = unsafe { wdk_sys::ntddk::MmGetSystemRoutineAddress(&mut name) };
    if routine.is_null() {
        log::warn!("the kernel has no EtwSetInformation: the driver is not traced");
        return false;
    }
    // SAFETY: the kernel's EtwSetInformation, whose signature wdm.h gives.
    let set = unsafe { core::mem::transmute::<PVOID, EtwSetInformation>(routine) };
    let traits = &etw::PROVIDER_METADATA;
    // SAFETY: PASSIVE_LEVEL; a registered handle; the image's traits block, only read.
    let status = unsafe {
        set(
            handle,
            EVENT_PROVIDER_SET_TRAITS,
            traits.as_ptr().cast_mut().cast(),
            traits.len() as ULONG,
        )
    };
    if status < 0 {
        log::warn!(
            "EtwSetInformation(EventProviderSetTraits): {status:#x}: the driver is not traced"
        );
    }
    status >= 0
}

/// EtwRegister (PASSIVE_LEVEL, DriverEntry), then the provider's traits, as TraceLogging
/// registers a provider. A provider that cannot register, or whose traits the kernel will not
/// take, leaves the driver untraced, and says so; it does not fail the driver.
pub(crate) fn register() {
    let (data1, data2, data3, data4) = etw::PROVIDER_GUID;
    let guid = GUID {
        Data1: data1,
        Data2: data2,
        Data3: data3,
        Data4: data4,
    };
    let mut handle: REGHANDLE = 0;
    // SAFETY: PASSIVE_LEVEL in DriverEntry; the GUID and the handle outlive the call; no
    // enable callback (the driver asks EtwEventEnabled instead), so no context.
    let status =
        unsafe { wdk_sys::ntddk::EtwRegister(&guid, None, core::ptr::null_mut(), &mut handle) };
    if status < 0 || handle == 0 {
        log::warn!("ETW provider hcabus not registered: {status:#x}; the driver is not traced");
        return;
    }
    if !set_traits(handle) {
        // SAFETY: PASSIVE_LEVEL; the handle just registered, unregistered once.
        let _ = unsafe { wdk_sys::ntddk::EtwUnregister(handle) };
        return;
    }
    REGISTRATION.store(handle, Ordering::Release);
}

/// EtwUnregister (PASSIVE_LEVEL, EvtDriverUnload): after it, no write is made.
pub(crate) fn unregister() {
    let handle = REGISTRATION.swap(0, Ordering::AcqRel);
    if handle == 0 {
        return;
    }
    // SAFETY: PASSIVE_LEVEL at unload; the handle EtwRegister gave, unregistered once.
    let status = unsafe { wdk_sys::ntddk::EtwUnregister(handle) };
    if status < 0 {
        log::warn!("EtwUnregister: {status:#x}");
    }
    let lost = NOT_WRITTEN.swap(0, Ordering::Relaxed);
    if lost != 0 {
        log::warn!("ETW: {lost} event(s) were not written");
    }
    WARNED.store(false, Ordering::Relaxed);
}

/// One record's event, if a session wants its level and keywords: asked before it is encoded,
/// so an untraced driver pays one call per record.
pub(crate) fn write(record: &Record, reset: Option<ResetSpan>) {
    let handle = REGISTRATION.load(Ordering::Acquire);
    if handle == 0 {
        return;
    }
    let descriptor = EVENT_DESCRIPTOR {
        Id: 0,
        Version: 0,
        Channel: etw::CHANNEL_TRACELOGGING,
        Level: etw::level(record),
        Opcode: 0,
        Task: 0,
        Keyword: etw::keywords(record).bits(),
    };
    // SAFETY: any IRQL; a registered handle and a descriptor on the stack.
    if unsafe { wdk_sys::ntddk::EtwEventEnabled(handle, &descriptor) } == 0 {
        return;
    }
    let mut event = EtwEvent::default();
    if let Err(e) = event.encode(record, reset) {
        not_written(format_args!("{e}: record {} not traced", record.seq));
        return;
    }
    let blocks = [
        DataDescriptor::of(
            &etw::PROVIDER_METADATA,
            etw::DESCRIPTOR_TYPE_PROVIDER_METADATA,
        ),
        DataDescriptor::of(event.metadata(), etw::DESCRIPTOR_TYPE_EVENT_METADATA),
        DataDescriptor::of(event.data(), etw::DESCRIPTOR_TYPE_DATA),
    ];
    // SAFETY: any IRQL; the three blocks (the image's provider block, the event on this
    // stack) are non-paged and outlive the call, described as EVENT_DATA_DESCRIPTORs
    // (layout asserted above); no activity ids.
    let status = unsafe {
        wdk_sys::ntddk::EtwWriteTransfer(
            handle,
            &descriptor,
            core::ptr::null(),
            core::ptr::null(),
            blocks.len() as ULONG,
            blocks.as_ptr().cast::<EVENT_DATA_DESCRIPTOR>().cast_mut(),
        )
    };
    if status < 0 {
        not_written(format_args!(
            "EtwWriteTransfer: {status:#x}: record {} not traced",
            record.seq
        ));
    }
}
