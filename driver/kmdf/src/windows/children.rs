//! The FDO's default child list: an IPoIB child per port and the SRP initiator, reported
//! present in prepare hardware, all missing and back again around a reset that re-enumerates.
//! Type-checked against the KMDF 1.33 headers and run on the KMDF model (hcabus-kmdf-model); linked
//! and its image run there too (docs/windows.md).

use wdk_sys::*;

use crate::kernel::ChildFunction;

/// A child's identification description: the header, then the child's serial.
#[repr(C)]
pub(crate) struct Identification {
    pub(crate) header: WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER,
    pub(crate) serial: u32,
}

/// WdfChildListAddOrUpdateChildDescriptionAsPresent with the child's identification.
///
/// # Safety
/// `device` is a live FDO with a default child list.
pub(crate) unsafe fn child_present(
    device: WDFDEVICE,
    child: ChildFunction,
) -> Result<(), NTSTATUS> {
    let mut id = Identification {
        header: WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER {
            IdentificationDescriptionSize: core::mem::size_of::<Identification>() as ULONG,
        },
        serial: child.serial(),
    };
    // SAFETY: the device is live.
    let list = unsafe { call_unsafe_wdf_function_binding!(WdfFdoGetDefaultChildList, device) };
    // SAFETY: the identification is the size the child list was configured with.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfChildListAddOrUpdateChildDescriptionAsPresent,
            list,
            &mut id.header,
            core::ptr::null_mut(),
        )
    };
    if s < 0 {
        Err(s)
    } else {
        Ok(())
    }
}

/// Marks every child missing: PnP surprise-removes their PDOs.
///
/// # Safety
/// `device` is a live FDO with a default child list.
pub(crate) unsafe fn children_missing(device: WDFDEVICE) {
    // SAFETY: the device is live.
    let list = unsafe { call_unsafe_wdf_function_binding!(WdfFdoGetDefaultChildList, device) };
    // SAFETY: begin/end bracket a scan with nothing reported present: all go missing.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfChildListBeginScan, list);
    }
    // SAFETY: as above.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfChildListEndScan, list);
    }
}

/// A scan that reports `children` present: the child list makes new PDOs for them (after
/// `children_missing` removed the old ones).
///
/// # Safety
/// `device` is a live FDO with a default child list.
pub(crate) unsafe fn rescan(device: WDFDEVICE, children: &[ChildFunction]) {
    // SAFETY: the device is live.
    let list = unsafe { call_unsafe_wdf_function_binding!(WdfFdoGetDefaultChildList, device) };
    // SAFETY: a scan bracketed by begin and end.
    unsafe { call_unsafe_wdf_function_binding!(WdfChildListBeginScan, list) };
    for child in children {
        // SAFETY: inside the scan, on the same live device.
        if let Err(s) = unsafe { child_present(device, *child) } {
            log::error!("re-enumerating {child:?}: 0x{s:08X}");
        }
    }
    // SAFETY: ends the scan begun above.
    unsafe { call_unsafe_wdf_function_binding!(WdfChildListEndScan, list) };
}
