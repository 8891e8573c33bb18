//! The I/O manager's side of an IOCTL: the handle's access checked against the code's
//! RequiredAccess, a METHOD_BUFFERED request built, the queue's callback called, the request
//! completed exactly once, the output copied back.

use std::vec::Vec;

use wdk_sys::*;

use super::driver::DriverFn;
use super::kernel::{Handle, Kernel, Kind, Role};
use super::machine::{at, Machine, Request, FILE_READ_DATA, FILE_WRITE_DATA};
use super::{violation, with, Rule, DISPATCH, PASSIVE};

/// What a completed request's system buffer holds until the I/O manager frees it.
pub(crate) const POISON: u8 = 0xA5;

/// The IRQL KMDF may call a queue's callbacks at: PASSIVE_LEVEL only if the queue, or the
/// device or driver it inherits from, says WdfExecutionLevelPassive; else up to
/// DISPATCH_LEVEL (the driver object's default), which the model takes (SDV KmdfIrql2).
fn queue_irql(k: &mut Kernel, queue: Handle) -> u8 {
    let mut at = Some(queue);
    while let Some(h) = at {
        let o = &k.objects[Kernel::index_of(h as _)];
        match o.execution_level {
            _WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive => return PASSIVE,
            _WDF_EXECUTION_LEVEL::WdfExecutionLevelDispatch => return DISPATCH,
            _ => at = o.parent,
        }
    }
    DISPATCH
}

/// The queue and its callback of the control device a handle was opened on.
fn target(control: Handle) -> Option<(WDFQUEUE, PFN_WDF_IO_QUEUE_IO_DEVICE_CONTROL)> {
    with(|k| {
        let Kind::Device(d) = &k.object("IRP_MJ_DEVICE_CONTROL", control as _).kind else {
            return None;
        };
        let q = d.queue?;
        match &k.objects[Kernel::index_of(q as _)].kind {
            Kind::Queue { config, .. } => Some((q as WDFQUEUE, config.EvtIoDeviceControl)),
            _ => None,
        }
    })
}

impl Machine {
    /// IRP_MJ_CREATE on `\\.\<link>` (a handle hcactl keeps between two calls): the live
    /// control device behind the link. An open handle references the device and its queue: a
    /// control device deleted meanwhile is kept, and its queue still dispatches, until the
    /// handle closes (fxdevice.cpp, fxpkggeneral.cpp).
    pub(crate) fn open(&mut self, link: &str) -> Option<Handle> {
        with(|k| {
            let (i, queue) = k
                .objects
                .iter()
                .enumerate()
                .find_map(|(i, o)| match &o.kind {
                    Kind::Device(d)
                        if !o.deleted
                            && d.role == Role::Control
                            && d.finished
                            && d.links.iter().any(|l| l == link) =>
                    {
                        Some((i, d.queue?))
                    }
                    _ => None,
                })?;
            k.objects[i].references += 1;
            k.objects[Kernel::index_of(queue as _)].references += 1;
            Some(Kernel::handle_of(i))
        })
    }

    /// IRP_MJ_CLOSE of the last handle: the references go, and a device deleted meanwhile goes
    /// with them (its queue first).
    pub(crate) fn close(&mut self, control: Handle) {
        let queue = with(|k| {
            let o = &mut k.objects[Kernel::index_of(control as _)];
            o.references -= 1;
            let Kind::Device(d) = &o.kind else {
                unreachable!("a control device")
            };
            let q = d.queue.unwrap_or_default();
            k.objects[Kernel::index_of(q as _)].references -= 1;
            q
        });
        super::objects::destroy_if_unreferenced(queue);
        super::objects::destroy_if_unreferenced(control);
    }

    /// The I/O manager: an IOCTL on `\\.\<link>` through a handle granted `granted`, opened
    /// for it and closed after.
    pub(crate) fn ioctl(
        &mut self,
        link: &str,
        granted: u32,
        code: u32,
        input: &[u8],
        output_length: usize,
    ) -> (NTSTATUS, Vec<u8>) {
        let Some(control) = self.open(link) else {
            return (STATUS_OBJECT_NAME_NOT_FOUND, Vec::new());
        };
        let r = self.ioctl_on(control, granted, code, input, output_length);
        self.close(control);
        r
    }

    /// An IOCTL through an open handle on `control`.
    pub(crate) fn ioctl_on(
        &mut self,
        control: Handle,
        granted: u32,
        code: u32,
        input: &[u8],
        output_length: usize,
    ) -> (NTSTATUS, Vec<u8>) {
        let Some((queue, Some(callback))) = target(control) else {
            return (STATUS_INVALID_DEVICE_REQUEST, Vec::new());
        };
        // The I/O manager checks the code's RequiredAccess against the handle before any driver
        // sees the request (IopXxxControlFile).
        let required = (code >> 14) & 3;
        let have = (if granted & FILE_READ_DATA != 0 { 1 } else { 0 })
            | (if granted & FILE_WRITE_DATA != 0 { 2 } else { 0 });
        if required & !have != 0 {
            return (STATUS_ACCESS_DENIED, Vec::new());
        }
        let request = new_request(code, input, output_length);
        let level = with(|k| queue_irql(k, queue as Handle));
        // SAFETY: the driver's callback with its queue and a request it now owns.
        at("EvtIoDeviceControl", level, || unsafe {
            callback.run((
                queue,
                request as WDFREQUEST,
                output_length,
                input.len(),
                code,
            ))
        });
        match take_result(request) {
            Some(result) => result,
            None => violation(
                Rule::RequestNotCompleted,
                "EvtIoDeviceControl",
                "returned without completing the request (the sequential queue stalls)",
            ),
        }
    }
}

/// IRP_MJ_DEVICE_CONTROL as the I/O manager builds it, METHOD_BUFFERED, as a WDFREQUEST
/// (no parent: the I/O manager's).
pub(crate) fn new_request(code: u32, input: &[u8], output_length: usize) -> Handle {
    let mut system_buffer = vec![0u8; input.len().max(output_length)];
    system_buffer[..input.len()].copy_from_slice(input);
    let mut r = Box::new(Request {
        code,
        input_length: input.len(),
        output_length,
        system_buffer,
        delivered: Vec::new(),
        completed: false,
        status: 0,
        information: 0,
        // SAFETY: here and below, IRP, IO_STACK_LOCATION and FILE_OBJECT are plain integers,
        // pointers and unions, for which all zeroes is a valid value.
        irp: Box::new(unsafe { core::mem::zeroed() }),
        // SAFETY: as above.
        stack: Box::new(unsafe { core::mem::zeroed() }),
        // SAFETY: as above.
        file: Box::new(unsafe { core::mem::zeroed() }),
    });
    // A KMDF control device records no share access: the file object's ReadAccess and
    // WriteAccess stay 0 whatever the handle was granted.
    r.stack.FileObject = &mut *r.file;
    r.irp
        .Tail
        .Overlay
        .__bindgen_anon_2
        .__bindgen_anon_1
        .CurrentStackLocation = &mut *r.stack;
    with(|k| {
        k.create(
            "IRP_MJ_DEVICE_CONTROL",
            Kind::Request(r),
            core::ptr::null_mut(),
            None,
        )
    })
}

/// A completed request's status and output, the I/O manager's copy, and the request gone
/// (IoCompleteRequest); `None` while it is not completed. Its buffer must still be poisoned:
/// nothing wrote it after the completion.
pub(crate) fn take_result(request: Handle) -> Option<(NTSTATUS, Vec<u8>)> {
    with(|k| {
        let o = &mut k.objects[Kernel::index_of(request as _)];
        let Kind::Request(r) = &o.kind else {
            unreachable!("a request")
        };
        if !r.completed {
            return None;
        }
        if r.system_buffer.iter().any(|b| *b != POISON) {
            violation(
                Rule::BufferAfterCompletion,
                "EvtIoDeviceControl",
                "the request's buffer was written after WdfRequestCompleteWithInformation",
            );
        }
        let out = r.delivered.clone();
        let status = r.status;
        k.delete_now("IoCompleteRequest", request);
        Some((status, out))
    })
}
