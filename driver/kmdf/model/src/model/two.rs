//! The bus's image and the sample child driver's (driver/kmdf-child) on one machine: each
//! loaded as Windows loads a driver, bound by WdfVersionBind to globals of its own, by which
//! every WDF call is told to be one driver's or the other's (`super::caller_slot`).
//!
//! What runs so far: the child driver's load (its FxDriverEntry, DriverEntry, WdfDriverCreate
//! of a driver of its own), its unload and its reload, beside a bus that keeps serving. Its
//! device stacked on the bus's PDO, its queues and the resets it rides through come next
//! (docs/child-driver.md, "What the model runs").

use wdk_sys::*;

use super::admin;
use super::harness::{expect, started};
use super::image::{self, BUS, CHILD};
use super::kernel::{Kernel, Kind};
use super::machine::{at, Machine, FILE_READ_DATA};
use super::{violation, with, Rule, PASSIVE};

/// The child driver's service, as its INF adds it (inf/hcabus-child.inx).
const CHILD_SERVICE: &str =
    "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\hcabus_child";

impl Machine {
    /// Loads the child driver: its image as loaded (data sections afresh), then its entry
    /// with a DRIVER_OBJECT of its own and its service's registry path, as the I/O manager
    /// calls a driver's entry. A success without WdfDriverCreate stops the machine.
    pub(crate) fn load_child(&mut self) -> NTSTATUS {
        let Some(image) = image::get_slot(CHILD) else {
            violation(
                Rule::Expectation,
                "load child",
                "no child driver image loaded (HCABUS_MODEL_CHILD_IMAGE)",
            )
        };
        image.fresh();
        // SAFETY: an all-zero DRIVER_OBJECT (plain integers and pointers), as for the bus.
        let object: &mut DRIVER_OBJECT = self
            .child_driver_object
            .insert(Box::new(unsafe { core::mem::zeroed() }));
        let object = object as *mut DRIVER_OBJECT;
        let path: Vec<u16> = CHILD_SERVICE.encode_utf16().collect();
        let registry = UNICODE_STRING {
            Length: (path.len() * 2) as u16,
            MaximumLength: (path.len() * 2) as u16,
            Buffer: path.as_ptr().cast_mut(),
        };
        // SAFETY: the child image's entry point, with its driver object and registry path.
        let status = at("hcabus_child!DriverEntry", PASSIVE, || unsafe {
            image::call(image.entry(), &[object as u64, &raw const registry as u64]) as NTSTATUS
        });
        if status >= 0 && with(|k| k.drivers[CHILD].is_none()) {
            violation(
                Rule::NoDriverObject,
                "hcabus_child!DriverEntry",
                "returned success without WdfDriverCreate",
            );
        }
        status
    }

    /// Unloads the child driver: its EvtDriverUnload if it has one, then KMDF deletes its
    /// driver object (and what is parented to it).
    pub(crate) fn unload_child(&mut self) {
        let (driver, unload) = with(|k| {
            let driver = k.drivers[CHILD].unwrap_or_else(|| {
                violation(
                    Rule::Expectation,
                    "unload child",
                    "the child driver is not loaded",
                )
            });
            match &k.objects[Kernel::index_of(driver as _)].kind {
                Kind::Driver { config } => (driver, config.EvtDriverUnload),
                _ => (driver, None),
            }
        });
        if let Some(f) = unload {
            // SAFETY: the child's callback with its driver, as KMDF calls it at unload.
            at("hcabus_child!EvtDriverUnload", PASSIVE, || unsafe {
                super::driver::DriverFn::run(f, (driver as WDFDRIVER,))
            });
        }
        with(|k| {
            k.delete_now("DriverUnload", driver);
            k.drivers[CHILD] = None;
        });
        self.child_driver_object = None;
    }
}

/// The scenarios of this file (`tests.rs` runs them by name).
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "two_images_load" => two_images_load(),
        _ => return false,
    }
    true
}

/// The child driver's own WDFDRIVER's EvtDriverDeviceAdd.
fn child_device_add() -> Option<usize> {
    with(|k| {
        let driver = k.drivers[CHILD]?;
        match &k.objects[Kernel::index_of(driver as _)].kind {
            Kind::Driver { config } => config.EvtDriverDeviceAdd.map(|f| f as usize),
            _ => None,
        }
    })
}

/// Both images on one machine: the child driver loads beside a started bus, its
/// WdfDriverCreate makes a driver of its own (the bus's untouched), each image is bound to
/// globals named for its service, the bus keeps serving, and the child unloads and loads
/// again from a fresh image.
fn two_images_load() {
    let mut m = started();
    let bus = with(|k| k.drivers[BUS]);
    for round in 0..2 {
        let status = m.load_child();
        expect(
            status == STATUS_SUCCESS,
            &format!("the child's DriverEntry (load {round}): {status:#x}"),
        );
        let (bus_now, child) = with(|k| (k.drivers[BUS], k.drivers[CHILD]));
        expect(
            bus_now == bus && child.is_some() && child != bus,
            &format!("drivers: bus {bus:?} then {bus_now:?}, child {child:?}"),
        );
        let in_child = child_device_add().is_some_and(|a| {
            image::get_slot(CHILD).is_some_and(|i| i.in_text(a))
                && !image::get_slot(BUS).is_some_and(|i| i.in_text(a))
        });
        expect(
            in_child,
            "the child's EvtDriverDeviceAdd is its own image's code",
        );
        let names: Vec<String> = image::loaded().map(image::Image::driver_name).collect();
        expect(
            names == ["hcabus", "hcabus_child"],
            &format!("the images' globals: {names:?}"),
        );
        let (status, s) = admin::query_state(&mut m, FILE_READ_DATA);
        expect(
            status == STATUS_SUCCESS && s.is_some_and(|s| s.epoch == 1),
            &format!("the bus beside the child: {status:#x} {s:?}"),
        );
        m.unload_child();
        expect(
            with(|k| k.drivers[CHILD].is_none() && k.drivers[BUS] == bus),
            "the child's unload left the bus's driver as it was",
        );
    }
    m.surprise_remove();
    m.unload();
}
