//! Requests, the registry and the event log: the kernel calls behind the IOCTL queue, the
//! policy and IoWriteErrorLogEntry. Type-checked against the KMDF 1.33 headers and run on the
//! KMDF model (hcabus-kmdf-model); linked and its image run there too (docs/windows.md).

use core::ffi::c_void;

use hcabus::ioctl::{NtStatus, Reply, Rights};
use wdk_sys::*;

use super::context::{context, ControlContext, FdoContext, CONTROL_CONTEXT, FDO_CONTEXT};
use super::defects::{planted, Defect};
use crate::device::{rights_of, rights_of_ioctl};
use crate::kernel::EventLogEntry;
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
    if packet.is_null() && !planted(Defect::ErrorLogUnchecked) {
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

/// Runs `f` on the request's METHOD_BUFFERED buffers with the rights the I/O manager
/// checked the handle for; the status and byte count go back through the request.
///
/// # Safety
/// `queue` and `request` are KMDF's for an EvtIoDeviceControl call of `code`.
pub(crate) unsafe fn with_request_buffers(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    (code, input_len, output_len): (u32, usize, usize),
    f: impl FnOnce(&Bus<super::wdf_platform::WdfPlatform>, &[u8], &mut [u8], Rights) -> Reply,
) -> (NtStatus, usize) {
    // SAFETY: the queue's device is the control device, whose context names the FDO.
    let control = unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueGetDevice, queue) };
    // SAFETY: the control device was created with a ControlContext.
    let Some(control) = (unsafe { context::<ControlContext>(control.cast(), &CONTROL_CONTEXT) })
    else {
        return (NtStatus::INVALID_DEVICE_REQUEST, 0);
    };
    // SAFETY: the control device holds a reference on its FDO until it is destroyed, so
    // the FDO's context is allocated even after its removal.
    let Some(fdo) = (unsafe { context::<FdoContext>(control.fdo.cast(), &FDO_CONTEXT) }) else {
        return (NtStatus::INVALID_DEVICE_REQUEST, 0);
    };
    // The dispatcher decodes the input fully before it writes a byte of output, but
    // METHOD_BUFFERED gives both views one system buffer: the input is copied out first.
    let mut input = [0u8; 512];
    // SAFETY: the request is live and not completed.
    let n = match unsafe { retrieve(request, Direction::Input, input_len) } {
        Ok((buffer, len)) => {
            let n = len.min(input_len).min(input.len());
            // SAFETY: KMDF's input buffer has `len` readable bytes.
            input[..n].copy_from_slice(unsafe { core::slice::from_raw_parts(buffer, n) });
            n
        }
        Err(status) => return (status, 0),
    };
    let wanted = if planted(Defect::OutputFromInput) {
        output_len.min(input_len)
    } else {
        output_len
    };
    // SAFETY: as above.
    let output: &mut [u8] = match unsafe { retrieve(request, Direction::Output, wanted) } {
        // SAFETY: KMDF's output buffer has `len` writable bytes until the request completes,
        // and no other view of it is alive (the input was copied out).
        Ok((buffer, len)) => unsafe { core::slice::from_raw_parts_mut(buffer, len) },
        Err(status) => return (status, 0),
    };
    let rights = if planted(Defect::ShareAccessAsGranted) {
        // SAFETY: the request is live.
        rights_of(unsafe { share_access(request) })
    } else {
        rights_of_ioctl(code)
    };
    let reply = fdo.with_bus(|bus| f(bus, &input[..n], output, rights));
    // No bus: removed (a handle kept open past the FDO), or stopped (a rebalance).
    let absent = if fdo.removed.load(core::sync::atomic::Ordering::Acquire) {
        NtStatus::DEVICE_REMOVED
    } else {
        NtStatus::DEVICE_NOT_READY
    };
    reply.map_or((absent, 0), |r| (r.status, r.bytes))
}

#[derive(Clone, Copy)]
enum Direction {
    Input,
    Output,
}

/// The request's input or output buffer: empty when its length is 0, which KMDF's Retrieve
/// functions refuse (STATUS_BUFFER_TOO_SMALL) rather than return.
///
/// # Safety
/// `request` is live and not completed.
unsafe fn retrieve(
    request: WDFREQUEST,
    direction: Direction,
    length: usize,
) -> Result<(*mut u8, usize), NtStatus> {
    if length == 0 {
        return Ok((core::ptr::NonNull::dangling().as_ptr(), 0));
    }
    let mut buffer: *mut c_void = core::ptr::null_mut();
    let mut len = 0usize;
    let s = match direction {
        // SAFETY: the caller's contract; the out-pointers live for the call.
        Direction::Input => unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestRetrieveInputBuffer,
                request,
                0,
                &mut buffer,
                &mut len
            )
        },
        // SAFETY: as above.
        Direction::Output => unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestRetrieveOutputBuffer,
                request,
                0,
                &mut buffer,
                &mut len
            )
        },
    };
    if s < 0 || buffer.is_null() {
        return Err(NtStatus(s as u32));
    }
    Ok((buffer.cast(), len.min(length)))
}

/// The file object's share-access flags: the planted misreading of what a handle may do
/// (share access is bookkeeping for IoCheckShareAccess, not the access granted).
///
/// # Safety
/// `request` is live.
unsafe fn share_access(request: WDFREQUEST) -> u32 {
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
    if planted(Defect::LeftPending) {
        return;
    }
    // SAFETY: the caller's contract (live, not completed); only for the planted violation.
    let kept = planted(Defect::WrittenAfterCompletion)
        .then(|| unsafe { retrieve(request, Direction::Output, 1) }.ok())
        .flatten();
    let times = if planted(Defect::CompletedTwice) {
        2
    } else {
        1
    };
    for _ in 0..times {
        // SAFETY: the caller's contract (broken on purpose the second time).
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestCompleteWithInformation,
                request,
                status.0 as i32,
                bytes as u64
            )
        };
    }
    if let Some((buffer, _)) = kept {
        // SAFETY: none: the planted violation, a write into a buffer the I/O manager owns
        // again (on Windows, freed).
        unsafe { buffer.write_volatile(0) };
    }
    if planted(Defect::TouchedAfterCompletion) {
        // SAFETY: none: the planted violation, which the model stops at.
        let _ = unsafe { retrieve(request, Direction::Input, 1) };
    }
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
