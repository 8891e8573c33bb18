//! The WDM half: the exports the layer calls directly (`extern "C"` symbols), the register
//! file behind BAR0's mapping, the PCI bus interface and DbgPrint's sink.

use std::string::String;

use hcabus::mmio::RegisterAccess;
use hcabus::Instant;
use wdk_sys::*;

use super::kernel::Mapping;
use super::{irql, violation, with, Rule, DISPATCH, PASSIVE};

#[unsafe(no_mangle)]
extern "C" fn KeGetCurrentIrql() -> KIRQL {
    let _kernel = super::enter("KeGetCurrentIrql", super::HIGH);
    irql()
}

#[unsafe(no_mangle)]
extern "C" fn KeQueryUnbiasedInterruptTime() -> ULONGLONG {
    let _kernel = super::enter("KeQueryUnbiasedInterruptTime", super::HIGH);
    with(|k| k.tick.floor(k.now_us) * 10)
}

/// The calling thread: 1 on the one-threaded machine (it runs DPCs, timers and work items
/// itself, one after another), each shuttle thread its own under `schedule`.
#[unsafe(no_mangle)]
extern "C" fn PsGetCurrentThreadId() -> HANDLE {
    let _kernel = super::enter("PsGetCurrentThreadId", super::HIGH);
    super::schedule::me() as HANDLE
}

/// A wait the one-threaded model cannot end (nothing else runs while it waits): a
/// violation, which stops the test.
#[unsafe(no_mangle)]
extern "C" fn KeDelayExecutionThread(
    _mode: KPROCESSOR_MODE,
    _alertable: BOOLEAN,
    interval: PLARGE_INTEGER,
) -> NTSTATUS {
    const DDI: &str = "KeDelayExecutionThread";
    let kernel = super::enter(DDI, super::APC);
    if interval.is_null() {
        violation(Rule::NullParameter, DDI, "a NULL interval");
    }
    // SAFETY: the caller's LARGE_INTEGER, not NULL.
    let whole = unsafe { *interval };
    // SAFETY: a relative interval is written as its QuadPart.
    let t = unsafe { whole.QuadPart };
    if t >= 0 {
        violation(
            Rule::Expectation,
            DDI,
            "an absolute time: the driver waits relative",
        );
    }
    if super::machine::locks_held() {
        violation(Rule::WaitWithLockHeld, DDI, "waits holding a lock");
    }
    drop(kernel);
    // While this thread sleeps the other processors run: due timers fire and queued DPCs
    // and work items run, in virtual time. Under `schedule` they are threads of their own: the
    // time passes, and they run as the schedule has it.
    // The wait ends at the first clock tick at or after its due time.
    let us = t.unsigned_abs() / 10;
    let (now, wake) = with(|k| (k.now_us, k.tick.ceil(k.now_us + us.max(1))));
    if super::schedule::on() {
        with(|k| k.now_us = k.now_us.max(wake));
        super::schedule::point();
    } else {
        super::machine::dispatch_for(wake - now);
    }
    STATUS_SUCCESS
}

/// The model's time of day: a fixed 2026-11-25T00:00:00Z plus the bus clock, so that a
/// test knows what QUERY_STATE's wall-clock time of time zero must be.
pub const MODEL_TIME_ZERO_UNIX_MS: u64 = 1_795_564_800_000;

#[unsafe(no_mangle)]
extern "C" fn KeQuerySystemTimePrecise(time: PLARGE_INTEGER) {
    let _kernel = super::enter("KeQuerySystemTimePrecise", super::HIGH);
    if time.is_null() {
        violation(
            Rule::NullParameter,
            "KeQuerySystemTimePrecise",
            "a NULL time",
        );
    }
    let since_1601 =
        (MODEL_TIME_ZERO_UNIX_MS + 11_644_473_600_000) * 10_000 + with(|k| k.now_us) * 10;
    let now = LARGE_INTEGER {
        QuadPart: since_1601 as i64,
    };
    // SAFETY: `time` is not NULL (a NULL one stopped above) and the caller's LARGE_INTEGER
    // lives for the call.
    unsafe { time.write(now) };
}

#[unsafe(no_mangle)]
extern "C" fn MmMapIoSpaceEx(physical: PHYSICAL_ADDRESS, bytes: SIZE_T, _protect: ULONG) -> PVOID {
    let _kernel = super::enter("MmMapIoSpaceEx", DISPATCH);
    // SAFETY: reading the QuadPart of a PHYSICAL_ADDRESS.
    let at = unsafe { physical.QuadPart };
    with(|k| {
        // Mapping space is a resource the system may be short of: NULL, as documented.
        if k.fails("MmMapIoSpaceEx") {
            return core::ptr::null_mut();
        }
        let Some(adapter) = k
            .adapters
            .iter()
            .position(|a| a.bar_physical == at && bytes as usize <= a.bar_length)
        else {
            return core::ptr::null_mut();
        };
        let Ok(memory) = super::uncounted(|| super::image::memory::Region::reserve(bytes as usize))
        else {
            return core::ptr::null_mut();
        };
        let base = memory.base() as *mut u32;
        k.mappings.insert(
            base as usize,
            Mapping {
                memory,
                length: bytes as usize,
                adapter,
            },
        );
        base.cast()
    })
}

#[unsafe(no_mangle)]
extern "C" fn MmUnmapIoSpace(base: PVOID, bytes: SIZE_T) {
    const DDI: &str = "MmUnmapIoSpace";
    let _kernel = super::enter(DDI, DISPATCH);
    with(|k| match k.mappings.get(&(base as usize)) {
        Some(m) if m.length == bytes as usize => {
            k.mappings.remove(&(base as usize));
        }
        Some(m) => violation(
            Rule::BadUnmap,
            DDI,
            &format!("{bytes} bytes of a {}-byte mapping", m.length),
        ),
        None => violation(
            Rule::BadUnmap,
            DDI,
            &format!("{base:p} is not a mapping's base"),
        ),
    });
}

/// The mapping and byte offset of a register address; one outside every mapping stops the
/// machine (a wild access to I/O space).
fn register(k: &mut super::kernel::Kernel, ddi: &str, at: usize) -> (usize, u32) {
    let Some((base, m)) = k.mappings.range(..=at).next_back() else {
        violation(
            Rule::BadUnmap,
            ddi,
            &format!("{at:#x} is in no mapping (unmapped or never mapped)"),
        );
    };
    if at >= base + m.length {
        violation(Rule::BadUnmap, ddi, &format!("{at:#x} is past its mapping"));
    }
    if !k.adapters[m.adapter].d0 {
        violation(
            Rule::DeviceInDx,
            ddi,
            &format!("register {:#x} of a device in Dx", at - base),
        );
    }
    (m.adapter, (at - base) as u32)
}

/// READ_REGISTER_ULONG through the mapping: the adapter's register file answers.
///
/// # Safety
/// None beyond the model's checks; `unsafe` as the volatile load it stands for.
pub(crate) unsafe fn register_read(at: *const u32) -> u32 {
    with(|k| {
        let (adapter, offset) = register(k, "READ_REGISTER_ULONG", at as usize);
        let now = Instant::from_us(k.now_us);
        let hca = &mut k.adapters[adapter].hca;
        hca.set_now(now);
        hca.bar0_read32(offset)
    })
}

/// WRITE_REGISTER_ULONG through the mapping.
///
/// # Safety
/// As [`register_read`].
pub(crate) unsafe fn register_write(at: *mut u32, value: u32) {
    with(|k| {
        let (adapter, offset) = register(k, "WRITE_REGISTER_ULONG", at as usize);
        let now = Instant::from_us(k.now_us);
        let hca = &mut k.adapters[adapter].hca;
        hca.set_now(now);
        hca.bar0_write32(offset, value);
    });
}

/// The Linux build's READ_REGISTER_ULONG: hcabus-kmdf declares it under `--cfg wdk_fake`,
/// where it cannot map a BAR (the image's own loads fault into [`register_read`] instead).
///
/// # Safety
/// As [`register_read`].
#[unsafe(no_mangle)]
unsafe extern "C" fn hcabus_model_register_read(at: *const u32) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { register_read(at) }
}

/// The Linux build's WRITE_REGISTER_ULONG, as [`hcabus_model_register_read`].
///
/// # Safety
/// As [`register_read`].
#[unsafe(no_mangle)]
unsafe extern "C" fn hcabus_model_register_write(at: *mut u32, value: u32) {
    // SAFETY: the caller's contract.
    unsafe { register_write(at, value) }
}

/// The PCI bus interface's context: the adapter's index + 1 (never NULL).
fn adapter_of(context: PVOID) -> usize {
    context as usize - 1
}

pub(crate) unsafe extern "C" fn pci_reference(context: PVOID) {
    let _kernel = super::enter("BUS_INTERFACE_STANDARD.InterfaceReference", super::HIGH);
    with(|k| k.adapters[adapter_of(context)].interface_references += 1);
}

pub(crate) unsafe extern "C" fn pci_dereference(context: PVOID) {
    let _kernel = super::enter("BUS_INTERFACE_STANDARD.InterfaceDereference", super::HIGH);
    with(|k| {
        let a = &mut k.adapters[adapter_of(context)];
        if a.interface_references == 0 {
            violation(
                Rule::InterfaceLeak,
                "InterfaceDereference",
                "more dereferences than references",
            );
        }
        a.interface_references -= 1;
    });
}

/// GetBusData / SetBusData: config space, dword by dword, at PASSIVE_LEVEL only (the PCI
/// bus driver's interface pages its code).
fn config(context: PVOID, buffer: PVOID, offset: ULONG, length: ULONG, write: bool) -> ULONG {
    let ddi = if write { "SetBusData" } else { "GetBusData" };
    let _kernel = super::enter(ddi, PASSIVE);
    if length != 4 || !offset.is_multiple_of(4) {
        return 0;
    }
    with(|k| {
        let now = Instant::from_us(k.now_us);
        let hca = &mut k.adapters[adapter_of(context)].hca;
        hca.set_now(now);
        let offset = offset as u16;
        if write {
            // SAFETY: the caller passes 4 readable bytes.
            let value = unsafe { buffer.cast::<u32>().read_unaligned() };
            if hca.config_write32(offset, value) {
                4
            } else {
                0
            }
        } else {
            match hca.config_read32(offset) {
                Some(v) => {
                    // SAFETY: the caller passes 4 writable bytes.
                    unsafe { buffer.cast::<u32>().write_unaligned(v) };
                    4
                }
                None => 0,
            }
        }
    })
}

/// BUS_INTERFACE_STANDARD's GetBusData (`bus_data::<false>`) and SetBusData
/// (`bus_data::<true>`) on the function's configuration space.
pub(crate) unsafe extern "C" fn bus_data<const WRITE: bool>(
    context: PVOID,
    _space: ULONG,
    buffer: PVOID,
    offset: ULONG,
    length: ULONG,
) -> ULONG {
    config(context, buffer, offset, length, WRITE)
}

/// ERROR_LOG_MAXIMUM_SIZE.
const ERROR_LOG_MAXIMUM_SIZE: usize = 240;

#[unsafe(no_mangle)]
extern "C" fn IoAllocateErrorLogEntry(_object: PVOID, size: UCHAR) -> PVOID {
    let _kernel = super::enter("IoAllocateErrorLogEntry", DISPATCH);
    let size = usize::from(size);
    if size > ERROR_LOG_MAXIMUM_SIZE || size < core::mem::size_of::<IO_ERROR_LOG_PACKET>() {
        return core::ptr::null_mut();
    }
    with(|k| {
        // From the pool, which may be short: NULL, as documented.
        if k.fails("IoAllocateErrorLogEntry") {
            return core::ptr::null_mut();
        }
        k.error_log_allocated += 1;
        // The I/O manager's until IoWriteErrorLogEntry gives it back.
        let mut packet = vec![0u64; size.div_ceil(8)].into_boxed_slice();
        let at = packet.as_mut_ptr();
        k.error_log_packets.insert(at as usize, packet);
        at.cast()
    })
}

#[unsafe(no_mangle)]
extern "C" fn IoWriteErrorLogEntry(entry: PVOID) {
    let _kernel = super::enter("IoWriteErrorLogEntry", DISPATCH);
    super::uncounted(|| write_error_log_entry(entry));
}

/// The I/O manager reads the packet into the System log.
fn write_error_log_entry(entry: PVOID) {
    let packet = entry.cast::<IO_ERROR_LOG_PACKET>();
    // SAFETY: a packet IoAllocateErrorLogEntry gave out, filled by the driver.
    let header = unsafe { &*packet };
    let (code, count, offset) = (
        header.ErrorCode as u32,
        header.NumberOfStrings,
        header.StringOffset,
    );
    let mut strings = Vec::new();
    // SAFETY: the strings follow at StringOffset, each NUL-terminated, within the packet.
    let mut at = unsafe { entry.cast::<u8>().add(usize::from(offset)) }.cast::<u16>();
    for _ in 0..count {
        let mut s = String::new();
        // SAFETY: as above.
        while let c @ 1.. = unsafe { at.read_unaligned() } {
            s.push(char::from_u32(u32::from(c)).unwrap_or('?'));
            // SAFETY: as above.
            at = unsafe { at.add(1) };
        }
        // SAFETY: past the NUL.
        at = unsafe { at.add(1) };
        strings.push(s);
    }
    with(|k| {
        k.error_log_allocated -= 1;
        k.error_log_packets.remove(&(entry as usize));
        k.events.push(super::kernel::LoggedEvent { code, strings });
    });
}

/// The rundown state in EX_RUNDOWN_REF.Count: holders × 2, bit 0 once run down.
fn rundown(r: PEX_RUNDOWN_REF) -> &'static mut ULONG_PTR {
    if r.is_null() {
        violation(
            Rule::NullParameter,
            "Ex*RundownProtection",
            "RunRef is NULL",
        );
    }
    // SAFETY: the driver's EX_RUNDOWN_REF, live for the call; one CPU.
    let r = unsafe { &mut *r };
    // SAFETY: the union's Count view: EX_RUNDOWN_REF is a pointer-sized count.
    unsafe { &mut r.__bindgen_anon_1.Count }
}

#[unsafe(no_mangle)]
extern "C" fn ExInitializeRundownProtection(r: PEX_RUNDOWN_REF) {
    // Documented IRQL <= APC_LEVEL (wdm.h), though it only writes the reference.
    let _kernel = super::enter("ExInitializeRundownProtection", super::APC);
    *rundown(r) = 0;
}

#[unsafe(no_mangle)]
extern "C" fn ExReInitializeRundownProtection(r: PEX_RUNDOWN_REF) {
    // Documented IRQL <= APC_LEVEL (wdm.h).
    let _kernel = super::enter("ExReInitializeRundownProtection", super::APC);
    let c = rundown(r);
    if *c != 1 {
        violation(
            Rule::SelfDeadlock,
            "ExReInitializeRundownProtection",
            "the reference was not run down",
        );
    }
    *c = 0;
}

#[unsafe(no_mangle)]
extern "C" fn ExAcquireRundownProtection(r: PEX_RUNDOWN_REF) -> BOOLEAN {
    let _kernel = super::enter("ExAcquireRundownProtection", DISPATCH);
    let c = rundown(r);
    if *c & 1 != 0 {
        return 0;
    }
    *c += 2;
    let me = super::schedule::me();
    with(|k| k.rundown_holders.push((r as usize, me)));
    1
}

#[unsafe(no_mangle)]
extern "C" fn ExReleaseRundownProtection(r: PEX_RUNDOWN_REF) {
    let _kernel = super::enter("ExReleaseRundownProtection", DISPATCH);
    let c = rundown(r);
    if *c < 2 {
        violation(
            Rule::ReferenceLeak,
            "ExReleaseRundownProtection",
            "released with no holder",
        );
    }
    *c -= 2;
    let me = super::schedule::me();
    with(|k| {
        let mine = k
            .rundown_holders
            .iter()
            .position(|h| *h == (r as usize, me));
        let any = k.rundown_holders.iter().position(|h| h.0 == r as usize);
        if let Some(i) = mine.or(any) {
            k.rundown_holders.swap_remove(i);
        }
    });
}

#[unsafe(no_mangle)]
extern "C" fn ExWaitForRundownProtectionRelease(r: PEX_RUNDOWN_REF) {
    const DDI: &str = "ExWaitForRundownProtectionRelease";
    let _kernel = super::enter(DDI, super::APC);
    let me = super::schedule::me();
    let at = r as usize;
    let c = rundown(r);
    // From here no one acquires it; the holders that are in go out in their own time.
    *c |= 1;
    super::schedule::wait_until(
        Rule::SelfDeadlock,
        DDI,
        "a holder is on this very call chain: the wait never ends",
        |k| {
            if k.rundown_holders.contains(&(at, me)) {
                violation(
                    Rule::SelfDeadlock,
                    DDI,
                    "a holder is on this very call chain: the wait never ends",
                );
            }
            !k.rundown_holders.iter().any(|h| h.0 == at)
        },
    );
    *rundown(r) = 1;
}

/// DbgPrint's sink (the C shim formats; see dbgprint.c).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn hcabus_model_dbg_print(text: *const core::ffi::c_char) {
    let _kernel = super::enter("DbgPrint", super::HIGH);
    let s = super::uncounted(|| {
        // SAFETY: the shim passes a NUL-terminated buffer.
        unsafe { core::ffi::CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    });
    with(|k| k.debug_output.push(s));
}

/// Whether `at` is in a live register mapping (for the image's faults there).
pub(crate) fn is_register(at: usize) -> bool {
    with(|k| {
        k.mappings
            .range(..=at)
            .next_back()
            .is_some_and(|(base, m)| at < base + m.length)
    })
}

/// The exports above, by name, as the image's loader binds them.
pub(crate) fn exports() -> [(&'static str, usize); 14] {
    [
        ("KeGetCurrentIrql", KeGetCurrentIrql as *const () as usize),
        (
            "KeQueryUnbiasedInterruptTime",
            KeQueryUnbiasedInterruptTime as *const () as usize,
        ),
        (
            "PsGetCurrentThreadId",
            PsGetCurrentThreadId as *const () as usize,
        ),
        (
            "KeDelayExecutionThread",
            KeDelayExecutionThread as *const () as usize,
        ),
        (
            "KeQuerySystemTimePrecise",
            KeQuerySystemTimePrecise as *const () as usize,
        ),
        ("MmMapIoSpaceEx", MmMapIoSpaceEx as *const () as usize),
        ("MmUnmapIoSpace", MmUnmapIoSpace as *const () as usize),
        (
            "IoAllocateErrorLogEntry",
            IoAllocateErrorLogEntry as *const () as usize,
        ),
        (
            "IoWriteErrorLogEntry",
            IoWriteErrorLogEntry as *const () as usize,
        ),
        (
            "ExInitializeRundownProtection",
            ExInitializeRundownProtection as *const () as usize,
        ),
        (
            "ExReInitializeRundownProtection",
            ExReInitializeRundownProtection as *const () as usize,
        ),
        (
            "ExAcquireRundownProtection",
            ExAcquireRundownProtection as *const () as usize,
        ),
        (
            "ExReleaseRundownProtection",
            ExReleaseRundownProtection as *const () as usize,
        ),
        (
            "ExWaitForRundownProtectionRelease",
            ExWaitForRundownProtectionRelease as *const () as usize,
        ),
    ]
}
