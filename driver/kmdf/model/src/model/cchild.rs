//! A child driver written in C, as the SRP initiator's would be: it asks its PDO for
//! HCABUS_BUS_INTERFACE_V1 with IRP_MN_QUERY_INTERFACE, registers through the interface's
//! function pointers, answers the bus's events from its callback (at DISPATCH_LEVEL, inside
//! the driver's DPC) and lets the interface go when it is removed. It sees only the bytes
//! the driver published: no Rust type of the driver's is used to call it.

use core::ffi::c_void;

use hcabus::bus_abi::*;
use hcabus::types::{ClientFlags, ClientKind, EventKind};
use wdk_sys::GUID;

use super::driver::{callable, DriverFn};
use super::kernel::{Handle, Kernel};
use super::machine::at;
use super::{irql, violation, with, Rule, DISPATCH, PASSIVE};

/// Events a child keeps (kinds in order); more are counted, not kept.
const HEARD: usize = 16;

/// What the child driver holds and has heard.
pub(crate) struct CChild {
    iface: HcabusBusInterfaceV1,
    pub(crate) id: u64,
    heard: [u16; HEARD],
    count: usize,
    /// The epoch of the last RESET_END.
    pub(crate) restored_epoch: u64,
    /// Whether it refuses a planned reset (its last path would go).
    pub(crate) vetoes: bool,
    /// The highest IRQL a callback came at.
    pub(crate) max_irql: u8,
    /// A call from the callback that did not succeed: (event kind, status).
    pub(crate) failed: Option<(u16, i32)>,
    /// Its unregister has returned (done, or the bus removed): no callback may come now.
    unregistered: bool,
    /// Its callback is running (on whichever thread delivers).
    in_callback: bool,
    /// Its unregister was called while its callback ran on another thread: the race the
    /// unregister's rundown is for.
    pub(crate) unregistered_during_callback: bool,
}

fn expect(ok: bool, what: &str) {
    if !ok {
        violation(Rule::Expectation, "C child", what);
    }
}

impl CChild {
    /// IRP_MN_QUERY_INTERFACE on the PDO of the child `serial` of `fdo` (KMDF references
    /// the interface for the caller), then `register` with CAN_VETO.
    pub(crate) fn attach(fdo: Handle, serial: u32, name: &'static core::ffi::CStr) -> Box<Self> {
        let guid = bus_guid();
        let size = core::mem::size_of::<HcabusBusInterfaceV1>();
        let bytes = at("IRP_MN_QUERY_INTERFACE", PASSIVE, || {
            super::children::query_interface(
                fdo,
                serial,
                &guid,
                size,
                HCABUS_BUS_INTERFACE_VERSION,
                0,
            )
        });
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(status) => violation(
                Rule::Expectation,
                "IRP_MN_QUERY_INTERFACE",
                &format!("the child's PDO answered HCABUS_BUS_INTERFACE_V1's query {status:#x}"),
            ),
        };
        // SAFETY: `size` bytes of the interface as the driver published it.
        let iface = unsafe {
            bytes
                .as_ptr()
                .cast::<HcabusBusInterfaceV1>()
                .read_unaligned()
        };
        expect(
            usize::from(iface.size) == size && iface.version == HCABUS_BUS_INTERFACE_VERSION,
            "the interface's size or version",
        );
        let mut child = Box::new(CChild {
            iface,
            id: 0,
            heard: [0; HEARD],
            count: 0,
            restored_epoch: 0,
            vetoes: false,
            max_irql: 0,
            failed: None,
            unregistered: false,
            in_callback: false,
            unregistered_during_callback: false,
        });
        let desc = HcabusClientDesc {
            size: core::mem::size_of::<HcabusClientDesc>() as u16,
            kind: ClientKind::Srp as u16,
            flags: (ClientFlags::CAN_VETO | ClientFlags::BOOT_CRITICAL).bits(),
            name: name.as_ptr(),
            event_callback: callable(Some(on_event)),
            client_context: (&mut *child as *mut CChild).cast(),
        };
        let mut reg = HcabusRegistration::default();
        let register = child.iface.register;
        let context = child.iface.context;
        // SAFETY: the driver's function with its own context, a whole descriptor and a
        // registration to fill; the child outlives its registration (detach unregisters).
        let status = at("C child: register", PASSIVE, || unsafe {
            register.map_or(status::NOT_SUPPORTED, |f| {
                f.run((context, &raw const desc, &raw mut reg))
            })
        });
        expect(status == status::SUCCESS, &format!("register: {status:#x}"));
        child.id = reg.client_id;
        child
    }

    /// Whether its callback is running now (on another thread).
    pub(crate) fn in_callback(&self) -> bool {
        self.in_callback
    }

    /// The kinds heard, in order.
    pub(crate) fn heard(&self) -> &[u16] {
        &self.heard[..self.count.min(HEARD)]
    }

    /// QUERY_STATE through the interface: (state, epoch).
    pub(crate) fn query_state(&self) -> (i32, u32, u64) {
        let mut state = HcabusBusState {
            size: core::mem::size_of::<HcabusBusState>() as u32,
            ..HcabusBusState::default()
        };
        let query = self.iface.query_state;
        // SAFETY: the driver's function with its context and a sized state to fill.
        let status = at("C child: query_state", PASSIVE, || unsafe {
            query.map_or(status::NOT_SUPPORTED, |f| {
                f.run((self.iface.context, &raw mut state))
            })
        });
        (status, state.state, state.epoch)
    }

    /// A child that never lets the interface go: unregisters only.
    pub(crate) fn unregister_only(&mut self) -> i32 {
        let unregister = self.iface.unregister;
        self.unregistered_during_callback |= self.in_callback;
        // SAFETY: the driver's function with its context and the child's own id.
        let status = at("C child: unregister", PASSIVE, || unsafe {
            unregister.map_or(status::NOT_SUPPORTED, |f| {
                f.run((self.iface.context, self.id))
            })
        });
        let removed = status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved);
        self.unregistered |= status == status::SUCCESS || status == removed;
        status
    }

    /// The child's removal: unregister, then InterfaceDereference. Returns unregister's
    /// status. The child stays where it is until the caller drops it.
    pub(crate) fn detach(&mut self) -> i32 {
        let status = self.unregister_only();
        if let Some(f) = self.iface.interface_dereference {
            // SAFETY: gives back the reference the query took, with its own context.
            at("C child: InterfaceDereference", PASSIVE, || unsafe {
                f.run((self.iface.context,))
            });
        }
        status
    }
}

/// GUID_HCABUS_BUS_INTERFACE as the kernel's GUID.
fn bus_guid() -> GUID {
    GUID {
        Data1: GUID_HCABUS_BUS_INTERFACE.data1,
        Data2: GUID_HCABUS_BUS_INTERFACE.data2,
        Data3: GUID_HCABUS_BUS_INTERFACE.data3,
        Data4: GUID_HCABUS_BUS_INTERFACE.data4,
    }
}

/// The references an object holds (the interface's on the FDO).
pub(crate) fn references(object: Handle) -> u32 {
    with(|k| k.objects[Kernel::index_of(object as _)].references)
}

/// The child's event callback: records the event and answers it as a real initiator would,
/// from inside the callback.
unsafe extern "C" fn on_event(context: *mut c_void, event: *const HcabusEvent) {
    // SAFETY: the context is the CChild registered with this callback, alive until it
    // unregisters.
    let child = unsafe { &mut *context.cast::<CChild>() };
    // SAFETY: the event lives for the call.
    let event = unsafe { &*event };
    if child.unregistered {
        violation(
            Rule::CallbackAfterUnregister,
            "C child: event callback",
            &format!("event {} after unregister returned", event.kind),
        );
    }
    child.in_callback = true;
    child.max_irql = child.max_irql.max(irql());
    if child.count < HEARD {
        child.heard[child.count] = event.kind;
    }
    child.count += 1;
    // SAFETY: every member of the union is plain integers; the epoch comes first in each.
    let epoch = unsafe { event.data.raw[0] };
    let ctx = child.iface.context;
    let status = match event.kind {
        // SAFETY: here and below, the driver's function with its own context, the
        // child's id and the event's epoch; the reason is a NUL-terminated literal.
        k if k == EventKind::ResetQuery as u16 && child.vetoes => unsafe {
            child.iface.reset_veto.map_or(status::NOT_SUPPORTED, |f| {
                f.run((
                    ctx,
                    child.id,
                    epoch,
                    c"its last path to the boot LUN".as_ptr(),
                ))
            })
        },
        // SAFETY: as above.
        k if k == EventKind::ResetQuery as u16 => unsafe {
            child
                .iface
                .reset_consent
                .map_or(status::NOT_SUPPORTED, |f| f.run((ctx, child.id, epoch)))
        },
        // SAFETY: as above.
        k if k == EventKind::Reset as u16 => unsafe {
            child
                .iface
                .reset_execute
                .map_or(status::NOT_SUPPORTED, |f| f.run((ctx, child.id, epoch)))
        },
        k if k == EventKind::ResetEnd as u16 => {
            child.restored_epoch = epoch;
            status::SUCCESS
        }
        _ => status::SUCCESS,
    };
    if status < 0 && child.failed.is_none() {
        child.failed = Some((event.kind, status));
    }
    // Its calls above were scheduling points: an unregister on another thread may have
    // returned meanwhile, which it must not while this callback runs.
    child.in_callback = false;
    if child.unregistered {
        violation(
            Rule::CallbackAfterUnregister,
            "C child: event callback",
            &format!(
                "event {} still running after unregister returned",
                event.kind
            ),
        );
    }
}

/// The IRQL the bus's callbacks must come at, at most.
pub(crate) const CALLBACK_IRQL: u8 = DISPATCH;

/// The scenarios of this file (`tests.rs` runs them by name).
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "query_interface_as_kmdf" => query_interface_as_kmdf(),
        _ => return false,
    }
    true
}

/// IRP_MN_QUERY_INTERFACE on a PDO answered as KMDF's PDO answers it: a request smaller than
/// the interface the bus published, or of version 0, is STATUS_INVALID_BUFFER_SIZE and takes
/// no reference; a larger one (a later header's) gets the bus's 88 bytes, its `Size` and
/// `Version` 1, the rest of the caller's buffer untouched, and one reference; another GUID is
/// STATUS_NOT_SUPPORTED. What docs/bus-interface.md tells a Windows child to expect.
fn query_interface_as_kmdf() {
    let mut m = super::harness::started();
    let fdo = m.fdo.unwrap_or_default();
    let serial = hcabus_kmdf::kernel::ChildFunction::Srp.serial();
    let guid = bus_guid();
    let v1 = core::mem::size_of::<HcabusBusInterfaceV1>();
    let before = references(fdo);
    let query = |size: usize, version: u16, guid: &GUID| {
        at("IRP_MN_QUERY_INTERFACE", PASSIVE, || {
            super::children::query_interface(fdo, serial, guid, size, version, 0xA5)
        })
    };
    for (size, version) in [(v1 - 8, 1), (40, 1), (v1, 0)] {
        let r = query(size, version, &guid);
        expect(
            r == Err(wdk_sys::STATUS_INVALID_BUFFER_SIZE),
            &format!(
                "a query for {size} bytes of version {version}: {:?}",
                r.map(|b| b.len())
            ),
        );
    }
    expect(
        references(fdo) == before,
        "a refused query took a reference",
    );
    let other = GUID {
        Data1: guid.Data1 ^ 1,
        ..guid
    };
    let r = query(v1, 1, &other);
    expect(
        r == Err(wdk_sys::STATUS_NOT_SUPPORTED),
        &format!("another GUID: {:?}", r.map(|b| b.len())),
    );
    let Ok(bytes) = query(v1 + 32, 2, &guid) else {
        violation(
            Rule::Expectation,
            "IRP_MN_QUERY_INTERFACE",
            "a later, larger query was refused",
        )
    };
    // SAFETY: the buffer holds at least the bus's structure, as KMDF wrote it.
    let iface = unsafe {
        bytes
            .as_ptr()
            .cast::<HcabusBusInterfaceV1>()
            .read_unaligned()
    };
    expect(
        usize::from(iface.size) == v1 && iface.version == HCABUS_BUS_INTERFACE_VERSION,
        &format!(
            "a later query read Size {} Version {}",
            iface.size, iface.version
        ),
    );
    expect(
        bytes[v1..].iter().all(|b| *b == 0xA5),
        "KMDF wrote past the bus's structure",
    );
    expect(
        references(fdo) == before + 1,
        "the copy was referenced once",
    );
    if let Some(f) = iface.interface_dereference {
        // SAFETY: gives back the reference the query took, with its own context.
        at("InterfaceDereference", PASSIVE, || unsafe {
            f.run((iface.context,))
        });
    }
    expect(references(fdo) == before, "the dereference gave it back");
    m.surprise_remove();
    m.unload();
}
