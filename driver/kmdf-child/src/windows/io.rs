//! The child's requests. The default queue (parallel, not power-managed) answers the counters
//! and the veto switch at once, in a reset too, and forwards each I/O to the I/O queue
//! (parallel, power-managed), which the bus's RESET stops and RESET_END starts: the requests
//! submitted meanwhile wait there, KMDF's, and run in the new epoch.

use core::ffi::c_void;

use hcabus::bus_abi::{status, HcabusBusState};
use wdk_sys::*;
use zerocopy::{FromBytes, IntoBytes};

use super::context::ChildContext;
use crate::abi::*;
use crate::child::IoRefused;

/// The context of the device a queue belongs to.
///
/// # Safety
/// `queue` is one of the child's live queues.
unsafe fn context_of<'a>(queue: WDFQUEUE) -> Option<&'a ChildContext> {
    // SAFETY: the caller's contract.
    let device = unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueGetDevice, queue) };
    // SAFETY: the queue's device is the child FDO that created it.
    unsafe { ChildContext::of(device) }
}

/// Completes `request` with `status` and `bytes`.
///
/// # Safety
/// `request` is live and not completed.
unsafe fn complete(request: WDFREQUEST, status: NTSTATUS, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            status,
            bytes as u64
        )
    };
}

/// The request's input (`output` false) or output buffer, at least `min` bytes, or the status
/// to fail it with. METHOD_BUFFERED: both are the one system buffer, the request's until it
/// is completed.
///
/// # Safety
/// `request` is live and not completed.
unsafe fn buffer<'a>(
    request: WDFREQUEST,
    min: usize,
    output: bool,
) -> Result<&'a mut [u8], NTSTATUS> {
    let mut buffer: *mut c_void = core::ptr::null_mut();
    let mut len = 0usize;
    let s = if output {
        // SAFETY: the caller's contract; the out-pointers live for the call. KMDF refuses a
        // buffer shorter than `min` (STATUS_BUFFER_TOO_SMALL).
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestRetrieveOutputBuffer,
                request,
                min,
                &mut buffer,
                &mut len
            )
        }
    } else {
        // SAFETY: as above.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestRetrieveInputBuffer,
                request,
                min,
                &mut buffer,
                &mut len
            )
        }
    };
    if s < 0 || buffer.is_null() || len < min {
        return Err(if s < 0 { s } else { STATUS_BUFFER_TOO_SMALL });
    }
    // SAFETY: KMDF's buffer of `len` bytes, the request's until it is completed.
    Ok(unsafe { core::slice::from_raw_parts_mut(buffer.cast::<u8>(), len) })
}

/// The request's output buffer, at least `min` bytes.
///
/// # Safety
/// `request` is live and not completed.
unsafe fn output<'a>(request: WDFREQUEST, min: usize) -> Result<&'a mut [u8], NTSTATUS> {
    // SAFETY: the caller's contract.
    unsafe { buffer(request, min, true) }
}

/// The request's input as a `T`.
///
/// # Safety
/// `request` is live and not completed.
unsafe fn input<T: FromBytes>(request: WDFREQUEST) -> Result<T, NTSTATUS> {
    let min = core::mem::size_of::<T>();
    // SAFETY: the caller's contract.
    let bytes = unsafe { buffer(request, min, false) }?;
    T::read_from_bytes(&bytes[..min]).map_err(|_| STATUS_INVALID_PARAMETER)
}

/// EvtIoDeviceControl of the default queue.
pub(super) extern "C" fn evt_io_device_control(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    _output_length: usize,
    _input_length: usize,
    code: ULONG,
) {
    // SAFETY: the queue is live for its callback.
    let Some(ctx) = (unsafe { context_of(queue) }) else {
        // SAFETY: the request is live and ours to complete.
        unsafe { complete(request, STATUS_INVALID_DEVICE_STATE, 0) };
        return;
    };
    // SAFETY: here and below, the request is live, ours, and completed once.
    let (status, bytes) = match code {
        IOCTL_HCABUS_CHILD_IO => {
            // SAFETY: both live; the I/O queue is this device's.
            let s = unsafe {
                call_unsafe_wdf_function_binding!(WdfRequestForwardToIoQueue, request, ctx.io_queue)
            };
            if s >= 0 {
                return;
            }
            // The I/O queue refuses requests (purged: the adapter failed). KMDF's
            // STATUS_WDF_BUSY is the framework's own: the program is told what it means.
            log::info!("an I/O refused by the purged queue: {s:#x}");
            ctx.with_child(|c| c.io_failed_unrun());
            (STATUS_NO_SUCH_DEVICE, 0)
        }
        IOCTL_HCABUS_CHILD_STATS => {
            // SAFETY: as above.
            let out = unsafe { output(request, size_of::<ChildStats>()) };
            stats(ctx, out)
        }
        IOCTL_HCABUS_CHILD_SET_VETO => {
            // SAFETY: as above.
            let veto = unsafe { input::<ChildSetVeto>(request) };
            set_veto(ctx, veto)
        }
        _ => (STATUS_INVALID_DEVICE_REQUEST, 0),
    };
    // SAFETY: as above.
    unsafe { complete(request, status, bytes) };
}

/// IOCTL_HCABUS_CHILD_STATS into `out`.
fn stats(ctx: &ChildContext, out: Result<&mut [u8], NTSTATUS>) -> (NTSTATUS, usize) {
    match out {
        Ok(out) => {
            let stats = ctx.with_child(|c| c.stats());
            out[..size_of::<ChildStats>()].copy_from_slice(stats.as_bytes());
            (STATUS_SUCCESS, size_of::<ChildStats>())
        }
        Err(s) => (s, 0),
    }
}

/// IOCTL_HCABUS_CHILD_SET_VETO: only a child registered with CAN_VETO may veto.
fn set_veto(ctx: &ChildContext, veto: Result<ChildSetVeto, NTSTATUS>) -> (NTSTATUS, usize) {
    match veto {
        Ok(v) if v.veto > 1 => (STATUS_INVALID_PARAMETER, 0),
        Ok(_)
            if !ctx
                .function
                .flags()
                .contains(hcabus::types::ClientFlags::CAN_VETO) =>
        {
            (STATUS_NOT_SUPPORTED, 0)
        }
        Ok(v) => {
            ctx.with_child(|c| c.set_veto(v.veto == 1));
            (STATUS_SUCCESS, 0)
        }
        Err(s) => (s, 0),
    }
}

/// EvtIoDeviceControl of the I/O queue: one I/O, run in the child's epoch. Its work is a
/// QUERY_STATE through the interface (the sample has no data path of its own); what it proves
/// is where it runs: never between the child's ResetExecute and the reset's end.
pub(super) extern "C" fn evt_io_child_io(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    _output_length: usize,
    _input_length: usize,
    _code: ULONG,
) {
    // SAFETY: the queue is live for its callback.
    let Some(ctx) = (unsafe { context_of(queue) }) else {
        // SAFETY: the request is live and ours to complete.
        unsafe { complete(request, STATUS_INVALID_DEVICE_STATE, 0) };
        return;
    };
    // SAFETY: live and ours.
    let out = match unsafe { output(request, size_of::<ChildIoResult>()) } {
        Ok(out) => out,
        Err(s) => {
            ctx.with_child(|c| c.io_failed_unrun());
            // SAFETY: as above.
            unsafe { complete(request, s, 0) };
            return;
        }
    };
    let epoch = match ctx.with_child(|c| c.begin_io()) {
        Ok(epoch) => epoch,
        Err(refused) => {
            if refused == IoRefused::AfterExecute {
                log::error!("I/O dispatched after ResetExecute: {refused}");
            }
            let s = match refused {
                IoRefused::Unbound => STATUS_DEVICE_NOT_READY,
                IoRefused::Failed => STATUS_NO_SUCH_DEVICE,
                IoRefused::AfterExecute => STATUS_DEVICE_BUSY,
            };
            // SAFETY: as above.
            unsafe { complete(request, s, 0) };
            return;
        }
    };
    let bus = ctx.bus();
    let mut state = HcabusBusState {
        size: size_of::<HcabusBusState>() as u32,
        ..HcabusBusState::default()
    };
    let bus_status = match bus.query_state {
        // SAFETY: the bus's function with its context and a sized state to fill; callable at
        // DISPATCH_LEVEL (the queue may dispatch from WdfIoQueueStart in the callback).
        Some(f) => unsafe { f(bus.context, &mut state) },
        None => status::NOT_SUPPORTED,
    };
    let result = ChildIoResult {
        epoch,
        bus_state: state.state,
        bus_status,
    };
    out[..size_of::<ChildIoResult>()].copy_from_slice(result.as_bytes());
    // Counted before the completion: the queue's stop callback (and so ResetExecute) may
    // follow it at once, on another processor.
    ctx.with_child(|c| c.end_io(true));
    // SAFETY: as above.
    unsafe { complete(request, STATUS_SUCCESS, size_of::<ChildIoResult>()) };
}
