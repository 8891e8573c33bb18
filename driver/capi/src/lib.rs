//! The bus interface of docs/design.md §3 as a C ABI, over the threaded host and a simulated HCA.
//!
//! On Windows the KMDF bus driver hands `HCABUS_BUS_INTERFACE_V1` (driver/include/hcabus.h) to
//! each child through IRP_MN_QUERY_INTERFACE. This library hands out the very same structure
//! on Linux, built over [`ThreadedHost`] (the bus the KMDF driver ships, `hcabus::host::Bus`,
//! on std's threads: one lock, callbacks with the lock dropped, a timer thread), so that C
//! child drivers can be tested here as they would use it. `hcabus_sim_*` stand for what the parent driver and the PnP manager do: create the
//! bus, answer the query interface, reset the device on an administrator's request.
//!
//! Nothing panics across the boundary: every export runs its body in [`guard`], which turns a
//! panic into `STATUS_INTERNAL_ERROR` (and a log line) instead of unwinding into C.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};

use hcabus::bus_abi::{status, HcabusStatus};
use hcabus::host::irql::Irql;
use hcabus::host::ThreadedHost;
use hcabus::types::AdminReset;
use hcabus::{Config, Duration, Policy};
use hcabus_sim::{SharedSimHca, SimHca, SimHcaConfig};

mod callback;
mod interface;

pub use interface::hcabus_sim_query_interface;

/// Marks a live [`HcabusSim`]: a context that does not start with it is refused, which
/// catches the commonest mistake (passing the client's own context) before it does harm.
const MAGIC: u64 = 0x6863_6162_7573_5631; // "hcabusV1"

/// How a test configures the simulated bus; zero means the default for every field.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct HcabusSimConfig {
    /// `sizeof(HCABUS_SIM_CONFIG)`.
    pub size: u32,
    pub max_clients: u32,
    pub quiesce_deadline_ms: u32,
    pub query_deadline_ms: u32,
    /// How long the simulated device stays in reset.
    pub hw_reset_ms: u32,
    pub reserved: u32,
}

/// One simulated bus: the object behind every interface's `Context`. `repr(C)` keeps the
/// magic at offset 0, where [`sim_from`] reads it before trusting the rest.
#[repr(C)]
#[derive(Debug)]
pub struct HcabusSim {
    magic: u64,
    host: ThreadedHost,
    /// Interfaces handed out and not yet dereferenced: the bus may not go while any is held.
    references: AtomicU32,
}

const _: () = assert!(std::mem::offset_of!(HcabusSim, magic) == 0);

/// Runs an export's body; a panic becomes `STATUS_INTERNAL_ERROR` instead of unwinding into
/// C (which would be undefined behaviour, or an abort since Rust 1.81).
pub fn guard(body: impl FnOnce() -> HcabusStatus) -> HcabusStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(status) => status,
        Err(_) => {
            log::error!("a panic inside the bus was stopped at the C boundary");
            status::INTERNAL_ERROR
        }
    }
}

/// The live bus behind a context, or `INVALID_PARAMETER`.
///
/// # Safety
/// `context` is null or points to readable memory at least as large as an [`HcabusSim`]:
/// what `hcabus_sim_create` or `hcabus_sim_query_interface` handed out, not yet destroyed.
unsafe fn sim_from<'a>(context: *const c_void) -> Result<&'a HcabusSim, HcabusStatus> {
    let sim = context.cast::<HcabusSim>();
    if sim.is_null() || !sim.is_aligned() {
        return Err(status::INVALID_PARAMETER);
    }
    // The magic is the first word (`repr(C)`): read it as a bare u64, no reference made.
    let first_word = sim.cast::<u64>();
    // SAFETY: non-null and aligned, and readable by the caller's contract for at least the
    // first word.
    let magic = unsafe { first_word.read() };
    if magic != MAGIC {
        return Err(status::INVALID_PARAMETER);
    }
    // SAFETY: the magic says this is a live bus, which the caller's contract keeps alive.
    Ok(unsafe { &*sim })
}

fn policy_of(config: &HcabusSimConfig) -> Policy {
    let mut policy = Policy::default();
    if config.quiesce_deadline_ms != 0 {
        policy.quiesce_deadline_ms = config.quiesce_deadline_ms.into();
    }
    if config.query_deadline_ms != 0 {
        policy.query_deadline_ms = config.query_deadline_ms.into();
    }
    policy
}

/// Creates a simulated bus and writes its handle to `*out`.
///
/// # Safety
/// `config` is null (every default) or points to an `HCABUS_SIM_CONFIG`; `out` points to
/// writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn hcabus_sim_create(
    config: *const HcabusSimConfig,
    out: *mut *mut HcabusSim,
) -> HcabusStatus {
    guard(|| {
        if out.is_null() {
            return status::INVALID_PARAMETER;
        }
        let config = if config.is_null() {
            HcabusSimConfig {
                size: size_of::<HcabusSimConfig>() as u32,
                ..HcabusSimConfig::default()
            }
        } else {
            // SAFETY: non-null, and an HCABUS_SIM_CONFIG by the caller's contract.
            unsafe { config.read_unaligned() }
        };
        if config.size as usize != size_of::<HcabusSimConfig>() {
            return status::INFO_LENGTH_MISMATCH;
        }
        let max_clients = match config.max_clients {
            0 => 64,
            n => match u16::try_from(n) {
                Ok(n) => n,
                Err(_) => return status::INVALID_PARAMETER,
            },
        };
        let hw_reset = match config.hw_reset_ms {
            0 => Duration::from_ms(20),
            ms => Duration::from_ms(ms.into()),
        };
        let hca = SharedSimHca::new(SimHca::new(SimHcaConfig {
            hw_reset,
            ..SimHcaConfig::default()
        }));
        let bus_config = Config {
            max_clients,
            recorder_capacity: 4096,
            policy: policy_of(&config),
        };
        let host = match ThreadedHost::start(bus_config, hca) {
            Ok(host) => host,
            Err(e) => {
                log::error!("the simulated bus did not start: {e}");
                return status::INVALID_PARAMETER;
            }
        };
        let sim = Box::new(HcabusSim {
            magic: MAGIC,
            host,
            references: AtomicU32::new(0),
        });
        // SAFETY: `out` is non-null and writable by the caller's contract.
        unsafe { out.write(Box::into_raw(sim)) };
        status::SUCCESS
    })
}

/// Destroys a bus no interface of which is still referenced (`DEVICE_BUSY` otherwise: a
/// child still holding one would call into freed memory). No call may run concurrently.
///
/// # Safety
/// `sim` is null or a handle from `hcabus_sim_create` not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn hcabus_sim_destroy(sim: *mut HcabusSim) -> HcabusStatus {
    guard(|| {
        // SAFETY: null or a live handle, by the caller's contract.
        let live = match unsafe { sim_from(sim.cast()) } {
            Ok(live) => live,
            Err(e) => return e,
        };
        if live.references.load(Ordering::Acquire) != 0 {
            return status::DEVICE_BUSY;
        }
        // SAFETY: a live handle from Box::into_raw in hcabus_sim_create, destroyed once: the
        // magic is cleared before the memory goes, so a second destroy is refused if the
        // allocator has not reused it yet.
        let mut owned = unsafe { Box::from_raw(sim) };
        owned.magic = 0;
        drop(owned);
        status::SUCCESS
    })
}

/// An administrator's reset (`mode` 1 forced, 2 planned, 3 firmware activation); the epoch of
/// the reset is written to `*epoch` when it is not null.
///
/// # Safety
/// `sim` is null or a live handle; `epoch` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn hcabus_sim_admin_reset(
    sim: *mut HcabusSim,
    mode: u32,
    epoch: *mut u64,
) -> HcabusStatus {
    guard(|| {
        // SAFETY: null or a live handle, by the caller's contract.
        let sim = match unsafe { sim_from(sim.cast()) } {
            Ok(sim) => sim,
            Err(e) => return e,
        };
        let kind = match mode {
            1 => AdminReset::Forced,
            2 => AdminReset::Planned,
            3 => AdminReset::FirmwareActivate,
            _ => return status::INVALID_PARAMETER,
        };
        match sim.host.bus().admin_reset(kind) {
            Ok(e) => {
                if !epoch.is_null() {
                    // SAFETY: non-null and writable by the caller's contract.
                    unsafe { epoch.write(e.0) };
                }
                status::SUCCESS
            }
            Err(e) => status::of_refusal(e.code()),
        }
    })
}

/// Waits until no reset is in progress and nothing is queued (`TIMEOUT` after `timeout_ms`).
/// A blocking call: refused with `INVALID_PARAMETER` from inside an event callback.
///
/// # Safety
/// `sim` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn hcabus_sim_wait_idle(
    sim: *mut HcabusSim,
    timeout_ms: u32,
) -> HcabusStatus {
    guard(|| {
        // SAFETY: null or a live handle, by the caller's contract.
        let sim = match unsafe { sim_from(sim.cast()) } {
            Ok(sim) => sim,
            Err(e) => return e,
        };
        let timeout = std::time::Duration::from_millis(timeout_ms.into());
        match sim.host.bus().wait_idle(timeout) {
            Ok(true) => status::SUCCESS,
            Ok(false) => status::TIMEOUT,
            Err(_) => status::INVALID_PARAMETER,
        }
    })
}

/// KeRaiseIrql(DISPATCH_LEVEL) for the calling thread, as a child does when it takes its own
/// spin lock: from now on no bus call of this thread runs a callback on it (what the call sets
/// in motion is delivered on another thread, the model of another processor), and a blocking
/// call is refused. Returns the IRQL before (0 PASSIVE_LEVEL, 2 DISPATCH_LEVEL) for
/// [`hcabus_sim_lower_irql`].
#[no_mangle]
pub extern "C" fn hcabus_sim_raise_irql_to_dispatch() -> u8 {
    hcabus::host::irql::set(Irql::Dispatch) as u8
}

/// KeLowerIrql: back to `old_irql`, what [`hcabus_sim_raise_irql_to_dispatch`] returned. A
/// value that is no IRQL the model knows, or one above the thread's current IRQL (lowering
/// never raises: KeLowerIrql to a higher level is bugcheck IRQL_NOT_LESS_OR_EQUAL on
/// Windows), is refused (logged) and changes nothing.
#[no_mangle]
pub extern "C" fn hcabus_sim_lower_irql(old_irql: u8) {
    let level = match old_irql {
        0 => Irql::Passive,
        2 => Irql::Dispatch,
        other => {
            log::error!("hcabus_sim_lower_irql({other}): not an IRQL the model knows; ignored");
            return;
        }
    };
    let now = hcabus::host::irql::current();
    if level > now {
        log::error!(
            "hcabus_sim_lower_irql({old_irql}): above the thread's IRQL ({}); KeLowerIrql \
             would bugcheck (IRQL_NOT_LESS_OR_EQUAL); ignored",
            now as u8
        );
        return;
    }
    hcabus::host::irql::set(level);
}

#[cfg(test)]
mod tests;
