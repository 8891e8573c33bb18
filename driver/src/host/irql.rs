//! A small Driver Verifier for the hosts: IRQL discipline of docs/design.md §4 and §6.
//!
//! Callbacks and the coordinator's DPC-like work run "at DISPATCH_LEVEL": they may not
//! block and may not allocate. Hosts raise the current thread's IRQL around that work with
//! [`raise_to_dispatch`]; blocking primitives call [`check_may_block`] and refuse at raised
//! IRQL (where a kernel would bugcheck with IRQL_NOT_LESS_OR_EQUAL); the virtual-time host
//! compares an allocation probe before and after each raised section.

use core::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The interrupt request levels the model distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Irql {
    Passive = 0,
    Dispatch = 2,
}

std::thread_local! {
    static IRQL: Cell<Irql> = const { Cell::new(Irql::Passive) };
}

static BLOCK_VIOLATIONS: AtomicU64 = AtomicU64::new(0);

/// The current thread's IRQL.
pub fn current() -> Irql {
    IRQL.with(Cell::get)
}

/// Restores the previous IRQL when dropped.
#[derive(Debug)]
#[must_use = "the IRQL is lowered again when the guard is dropped"]
pub struct Raised {
    previous: Irql,
}

impl Drop for Raised {
    fn drop(&mut self) {
        IRQL.with(|c| c.set(self.previous));
    }
}

/// Raises the current thread to DISPATCH_LEVEL until the guard is dropped.
pub fn raise_to_dispatch() -> Raised {
    let previous = IRQL.with(|c| c.replace(Irql::Dispatch));
    Raised { previous }
}

/// Sets the current thread's IRQL and returns the previous one: KeRaiseIrql and KeLowerIrql
/// for a C child (`hcabus_sim_raise_irql_to_dispatch`, `hcabus_sim_lower_irql`).
pub fn set(level: Irql) -> Irql {
    IRQL.with(|c| c.replace(level))
}

/// A blocking call was attempted at DISPATCH_LEVEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} would block at DISPATCH_LEVEL")]
pub struct BlockAtDispatch {
    pub what: &'static str,
}

/// Called by every blocking primitive of the hosts before it blocks.
pub fn check_may_block(what: &'static str) -> Result<(), BlockAtDispatch> {
    if current() >= Irql::Dispatch {
        BLOCK_VIOLATIONS.fetch_add(1, Ordering::SeqCst);
        log::error!("verifier: {what} called at DISPATCH_LEVEL");
        return Err(BlockAtDispatch { what });
    }
    Ok(())
}

/// Blocking calls refused at DISPATCH_LEVEL since the process started, all threads.
pub fn block_violations() -> u64 {
    BLOCK_VIOLATIONS.load(Ordering::SeqCst)
}
