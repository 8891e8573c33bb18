//! A KMDF model: the WDF functions and WDM exports the FFI layer calls, written in Rust over
//! the kit's LLP64 bindings, with the rules KMDF's own source (microsoft/Windows-Driver-
//! Frameworks) and the WDK's documentation enforce. The layer's WDF calls reach it through the
//! real `call_unsafe_wdf_function_binding!` and the table `WdfFunctions_01033`; its WDM calls
//! through the `extern "C"` symbols defined here. Under it sits a ConnectX (hcabus's
//! `FakeConnectX`) behind BAR0 and the PCI bus interface.
//!
//! A rule broken is a bugcheck: [`violation`] prints the rule, the DDI and where the rule
//! comes from, and ends the process. Each scenario therefore runs in a child process of the
//! test binary (`tests.rs`), whose parent reads the verdict.
#![allow(non_upper_case_globals, non_snake_case)]

mod admin;
mod audit;
mod cchild;
mod checks;
mod children;
mod documented;
pub(crate) mod driver;
mod entries;
mod etw;
mod fault;
mod harness;
mod heap;
mod hlk;
pub(crate) mod image;
mod io;
mod kernel;
mod leaks;
mod machine;
mod misuses;
mod notify;
mod objects;
mod pnp;
mod processors;
mod queues;
mod races;
mod rules;
mod schedule;
mod sdv_plants;
mod sync;
mod table;
mod tests;
mod tracing;
mod two;
mod twoconc;
mod twoio;
mod twolife;
mod usage;
mod wdm;

pub(crate) use rules::Rule;

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kernel::Kernel;

// The three symbols WdfLdr provides on Windows and wdk-sys declares.
#[unsafe(no_mangle)]
static mut WdfFunctions_01033: *const wdk_sys::WDFFUNC = core::ptr::null();
#[unsafe(no_mangle)]
static mut WdfFunctionCount: wdk_sys::ULONG = 0;
#[unsafe(no_mangle)]
static mut WdfDriverGlobals: wdk_sys::PWDF_DRIVER_GLOBALS = core::ptr::null_mut();

/// The kernel's state. One scenario per process: nothing else shares it.
static KERNEL: Mutex<Option<Kernel>> = Mutex::new(None);

thread_local! {
    /// The IRQL of the calling thread (0 PASSIVE, 2 DISPATCH).
    static IRQL: Cell<u8> = const { Cell::new(0) };
}

pub(crate) const PASSIVE: u8 = 0;
pub(crate) const APC: u8 = 1;
pub(crate) const DISPATCH: u8 = 2;
/// DISPATCH_LEVEL + 1: the lowest device IRQL (WdfObjectGetTypedContextWorker's maximum).
pub(crate) const DISPATCH_PLUS_ONE: u8 = 3;
pub(crate) const HIGH: u8 = 15;

pub(crate) fn irql() -> u8 {
    schedule::irql().unwrap_or_else(|| IRQL.with(Cell::get))
}

pub(crate) fn set_irql(level: u8) {
    if !schedule::set_irql(level) {
        IRQL.with(|c| c.set(level));
    }
}

/// Runs `f` on the kernel's state. Never held across a call into the driver. What it
/// allocates is the kernel's, not counted as the driver's.
pub(crate) fn with<R>(f: impl FnOnce(&mut Kernel) -> R) -> R {
    uncounted(|| with_uncounted(f))
}

/// Runs kernel code that allocates or frees outside [`with`]: not the driver's bytes.
pub(crate) fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    let counting = crate::model::heap::count_bytes(false);
    let r = f();
    crate::model::heap::count_bytes(counting);
    r
}

fn with_uncounted<R>(f: impl FnOnce(&mut Kernel) -> R) -> R {
    let mut guard: MutexGuard<'_, Option<Kernel>> =
        KERNEL.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(kernel) = guard.as_mut() else {
        drop(guard);
        violation(
            Rule::NoKernel,
            "(any)",
            "a DDI was called before the model was installed",
        );
    };
    f(kernel)
}

/// The image slot of the driver making a WDF call: the one whose globals it passes (each image
/// is bound to its own by WdfVersionBind), the bus's for the Linux build's NULL. Globals that
/// no image was bound to stop the machine (KMDF would dereference them).
pub(crate) fn caller_slot(globals: wdk_sys::PWDF_DRIVER_GLOBALS, ddi: &str) -> usize {
    if globals.is_null() {
        return image::BUS;
    }
    image::slot_of_globals(globals).unwrap_or_else(|| {
        violation(
            Rule::Expectation,
            ddi,
            "DriverGlobals that WdfVersionBind gave no image",
        )
    })
}

/// The exit code of a process the model stopped: a bugcheck.
pub(crate) const BUGCHECK_EXIT: i32 = 86;

/// A broken rule: the machine stops, as a bugcheck stops it. The parent test reads the line.
pub(crate) fn violation(rule: Rule, ddi: &str, detail: &str) -> ! {
    eprintln!(
        "KMDF MODEL BUGCHECK {:#x} {:?} in {ddi}: {detail} [rule: {}; from: {}]",
        rule.code(),
        rule,
        rule.says(),
        rule.source()
    );
    if let Some(n) = schedule::whereabouts() {
        eprintln!("KMDF MODEL SCHEDULE {n} (replayed by the same seed and count)");
    }
    std::process::exit(BUGCHECK_EXIT)
}

/// Kernel code is running: what it allocates is not the driver's. Dropped when the DDI
/// returns; a callback into the driver from inside turns counting back on (`machine::at`).
#[must_use = "the DDI is kernel code until this is dropped"]
pub(crate) struct KernelSide(bool);

impl Drop for KernelSide {
    fn drop(&mut self) {
        crate::model::heap::count_bytes(self.0);
    }
}

/// Every DDI starts here (a scheduling point when other processors run): the IRQL it allows (KMDF's verifier, FxVerifierCheckIrqlLevel, and
/// each DDI's documented "IRQL <= ..."). Until the guard drops, allocations are the kernel's.
pub(crate) fn enter(ddi: &str, max_irql: u8) -> KernelSide {
    schedule::point();
    let side = KernelSide(crate::model::heap::count_bytes(false));
    let now = irql();
    if now > max_irql {
        violation(
            Rule::IrqlTooHigh,
            ddi,
            &format!("called at IRQL {now}, allowed at most {max_irql}"),
        );
    }
    side
}

/// Installs a fresh kernel and the function table.
pub(crate) fn install(kernel: Kernel) {
    *KERNEL.lock().unwrap_or_else(PoisonError::into_inner) = Some(kernel);
    table::install();
}
