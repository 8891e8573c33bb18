//! Requests, the registry and the event log: the kernel calls behind the IOCTL queue, the
//! policy and IoWriteErrorLogEntry. Type-checked against the KMDF 1.33 headers, never linked
//! or run (docs/windows.md).

use core::ffi::c_void;

use hcabus::ioctl::{NtStatus, Reply, Rights};
use wdk_sys::*;

use super::objects::context;
use crate::device::rights_of;
use crate::platform::EventLogEntry;
use hcabus::host::Bus;

/// IoAllocateErrorLogEntry + IoWriteErrorLogEntry with the message id of messages.mc.
///
/// # Safety
/// `device` is live; PASSIVE_LEVEL or DISPATCH_LEVEL.
pub(crate) unsafe fn write_error_log(device: WDFDEVICE, entry: EventLogEntry) {
    let mut strings = [0u16; 64];
    let (count, used) = entry.insertion_strings(&mut strings);
    // SAFETY: the device is live.
    let wdm = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceWdmGetDeviceObject, device) };
    let header = core::mem::size_of::<IO_ERROR_LOG_PACKET>();
    let size = header + used * 2;
    // ERROR_LOG_MAXIMUM_SIZE is 240 bytes: 64 u16 of strings keep well within it.
    // SAFETY: a size the I/O manager accepts; null when its pool is short (the entry is lost
    // and `log` says so instead).
    let packet = unsafe { wdk_sys::ntddk::IoAllocateErrorLogEntry(wdm.cast(), size as u8) }
        .cast::<IO_ERROR_LOG_PACKET>();
    if packet.is_null() {
        log::warn!("event log entry not written: {entry:?}");
        return;
    }
    // SAFETY: a zeroed packet of `size` bytes we own until written; the strings go right
    // after the header, where StringOffset says.
    unsafe {
        (*packet).ErrorCode = entry.message_id() as i32;
    }
    // SAFETY: as above.
    unsafe {
        (*packet).NumberOfStrings = u16::from(count);
    }
    // SAFETY: as above.
    unsafe {
        (*packet).StringOffset = header as u16;
    }
    // SAFETY: `header` bytes into the `size`-byte packet: in bounds.
    let text = unsafe { packet.cast::<u8>().add(header) }.cast::<u16>();
    // SAFETY: `used` u16 fit after the header in the `size` bytes allocated.
    unsafe { core::ptr::copy_nonoverlapping(strings.as_ptr(), text, used) };
    // SAFETY: the packet is ours; the I/O manager frees it.
    unsafe { wdk_sys::ntddk::IoWriteErrorLogEntry(packet.cast()) };
}

/// Runs `f` on the request's METHOD_BUFFERED buffers with the handle's rights; the status
/// and byte count go back through the request.
///
/// # Safety
/// `queue` and `request` are KMDF's for an EvtIoDeviceControl call.
pub(crate) unsafe fn with_request_buffers(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    input_len: usize,
    output_len: usize,
    f: impl FnOnce(&Bus<super::platform::WdfPlatform>, &[u8], &mut [u8], Rights) -> Reply,
) -> (NtStatus, usize) {
    // SAFETY: the queue's device is the control device, whose context names the FDO.
    let control = unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueGetDevice, queue) };
    // SAFETY: the control device carries an FdoContext, written at its creation.
    let control_context = unsafe { context(control.cast()) };
    // SAFETY: as above: the context is live and initialised.
    let fdo = unsafe { &*control_context }.device;
    // SAFETY: the FDO carries its context, which outlives its control device.
    let fdo_context = unsafe { context(fdo.cast()) };
    // SAFETY: as above; only shared references are taken while requests are served.
    let Some(bus) = (unsafe { &*fdo_context }).bus.as_ref() else {
        return (NtStatus::INVALID_DEVICE_REQUEST, 0);
    };
    let mut buffer: *mut c_void = core::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: METHOD_BUFFERED: one system buffer, max(input, output) bytes.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestRetrieveInputBuffer,
            request,
            0,
            &mut buffer,
            &mut len
        )
    };
    if s < 0 || buffer.is_null() {
        return (NtStatus::INVALID_BUFFER_SIZE, 0);
    }
    // The dispatcher decodes the input fully before it writes a byte of output, so one copy
    // of the input keeps both views apart.
    let mut input = [0u8; 512];
    let n = input_len.min(input.len()).min(len);
    // SAFETY: the system buffer has at least `len` bytes.
    input[..n].copy_from_slice(unsafe { core::slice::from_raw_parts(buffer.cast::<u8>(), n) });
    // SAFETY: the system buffer has room for the output length KMDF checked.
    let output =
        unsafe { core::slice::from_raw_parts_mut(buffer.cast::<u8>(), output_len.min(len)) };
    // SAFETY: the request's file object is live for the request.
    let granted = unsafe { granted_access(request) };
    let reply = f(bus, &input[..n], output, rights_of(granted));
    (reply.status, reply.bytes)
}

/// The access the handle behind `request` was granted.
///
/// # Safety
/// `request` is live.
unsafe fn granted_access(request: WDFREQUEST) -> u32 {
    // SAFETY: the caller's contract.
    let irp = unsafe { call_unsafe_wdf_function_binding!(WdfRequestWdmGetIrp, request) };
    // SAFETY: KMDF returns the request's live IRP.
    let tail = unsafe { &(*irp).Tail };
    // SAFETY: an IRP queued to a driver uses the Overlay member of its tail (IoGetCurrent-
    // IrpStackLocation reads the same field).
    let overlay = unsafe { &tail.Overlay };
    // SAFETY: while the IRP is owned by a driver the union holds its current stack location.
    let stack = unsafe {
        overlay
            .__bindgen_anon_2
            .__bindgen_anon_1
            .CurrentStackLocation
    };
    // SAFETY: a device-control IRP's current stack location is live for the request.
    let file = unsafe { (*stack).FileObject };
    if file.is_null() {
        return 0;
    }
    // SAFETY: the file object is live for the request.
    let file = unsafe { &*file };
    let (read, write) = (file.ReadAccess, file.WriteAccess);
    u32::from(read != 0) | (u32::from(write != 0) << 1)
}

/// Completes the request with its status and bytes.
///
/// # Safety
/// `request` is live and not yet completed.
pub(crate) unsafe fn complete(request: WDFREQUEST, (status, bytes): (NtStatus, usize)) {
    // SAFETY: the caller's contract.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            status.0 as i32,
            bytes as u64
        )
    };
}

/// The service's Parameters key, or null when it cannot be opened (every value then absent).
///
/// # Safety
/// `device` is live; PASSIVE_LEVEL.
pub(crate) unsafe fn open_parameters(device: WDFDEVICE) -> WDFKEY {
    let mut key: WDFKEY = core::ptr::null_mut();
    // WdfGetDriver is a FORCEINLINE helper over WdfDriverGlobals, not a table function; the
    // device's driver is the same object.
    // SAFETY: the device is live.
    let driver = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceGetDriver, device) };
    // SAFETY: as above; KEY_READ only.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDriverOpenParametersRegistryKey,
            driver,
            KEY_READ,
            WDF_NO_OBJECT_ATTRIBUTES,
            &mut key,
        )
    };
    if s < 0 {
        core::ptr::null_mut()
    } else {
        key
    }
}

/// A REG_DWORD of the Parameters key.
///
/// # Safety
/// `key` is null or open.
pub(crate) unsafe fn query_ulong(key: WDFKEY, name: &str) -> Option<u32> {
    if key.is_null() {
        return None;
    }
    let mut wide = [0u16; 64];
    for (w, b) in wide.iter_mut().zip(name.bytes()) {
        *w = u16::from(b);
    }
    let mut value_name = UNICODE_STRING {
        Length: (name.len().min(wide.len()) * 2) as u16,
        MaximumLength: (wide.len() * 2) as u16,
        Buffer: wide.as_mut_ptr(),
    };
    let mut value: ULONG = 0;
    // SAFETY: the key is open; the name and the out-value live for the call.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfRegistryQueryULong, key, &mut value_name, &mut value)
    };
    (s >= 0).then_some(value)
}

/// # Safety
/// `key` is null or open, and not used afterwards.
pub(crate) unsafe fn close_key(key: WDFKEY) {
    if !key.is_null() {
        // SAFETY: the caller's contract.
        unsafe { call_unsafe_wdf_function_binding!(WdfRegistryClose, key) };
    }
}
