//! What must be given back: at the end of each prepare/release cycle, and at unload.

use std::string::String;
use std::vec::Vec;

use super::kernel::{Handle, InitOrigin, InitState, Kind, Role};
use super::{violation, with, Rule};

/// After EvtDeviceReleaseHardware: nothing its prepare created is alive, no mapping is left,
/// the PCI interface's references are given back.
pub(crate) fn cycle(fdo: Handle) {
    with(|k| {
        let left: Vec<String> = k
            .objects
            .iter()
            .filter(|o| o.cycle_of == Some(fdo) && !o.deleted)
            .map(|o| {
                let armed = match &o.kind {
                    Kind::Timer {
                        due_us: Some(_), ..
                    } => " (armed)",
                    Kind::Dpc { queued: true, .. } | Kind::WorkItem { queued: true, .. } => {
                        " (queued)"
                    }
                    _ => "",
                };
                format!("{}{armed}", o.kind.name())
            })
            .collect();
        if !left.is_empty() {
            violation(
                Rule::CycleLeak,
                "EvtDeviceReleaseHardware",
                &format!("still alive: {}", left.join(", ")),
            );
        }
        if let Some((_, m)) = k.mappings.iter().next() {
            violation(
                Rule::MappingLeak,
                "EvtDeviceReleaseHardware",
                &format!("a {}-byte BAR mapping was never unmapped", m.length),
            );
        }
        if let Some(a) = k.adapters.iter().find(|a| a.interface_references != 0) {
            violation(
                Rule::InterfaceLeak,
                "EvtDeviceReleaseHardware",
                &format!(
                    "the PCI bus interface holds {} reference(s)",
                    a.interface_references
                ),
            );
        }
    });
}

/// Unload: no control device left, no object but the driver, no init, no reference, and
/// (the image's) no pool block.
pub(crate) fn unload() {
    if super::image::get().is_some() {
        super::image::unload();
    }
    super::etw::at_unload();
    with(|k| {
        if let Some((rule, ddi, why)) = k.sdv_warnings.first() {
            violation(*rule, ddi, &format!("{why}; reported at unload"));
        }
        for o in &k.objects {
            if let Kind::Device(d) = &o.kind {
                if d.role == Role::Control && !o.deleted {
                    violation(
                        Rule::ControlDeviceAtUnload,
                        "DriverUnload",
                        &format!("control device {:?} was never deleted", d.name),
                    );
                }
            }
        }
        let alive: Vec<&str> = k
            .objects
            .iter()
            .filter(|o| !o.deleted && !matches!(o.kind, Kind::Driver { .. }))
            .map(|o| o.kind.name())
            .collect();
        if !alive.is_empty() {
            violation(
                Rule::ObjectLeak,
                "DriverUnload",
                &format!("alive: {}", alive.join(", ")),
            );
        }
        if let Some(o) = k.objects.iter().find(|o| o.references != 0) {
            violation(
                Rule::ReferenceLeak,
                "DriverUnload",
                &format!("{} holds {} reference(s)", o.kind.name(), o.references),
            );
        }
        if k.inits
            .iter()
            .any(|i| i.origin == InitOrigin::Control && i.state == InitState::Open)
        {
            violation(
                Rule::InitLeaked,
                "DriverUnload",
                "a control device's WDFDEVICE_INIT was neither consumed nor freed",
            );
        }
        if k.error_log_allocated != 0 {
            violation(
                Rule::ObjectLeak,
                "DriverUnload",
                "an error log entry allocated and never written",
            );
        }
    });
}
