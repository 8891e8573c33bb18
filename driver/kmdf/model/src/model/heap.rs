//! The heap of the test process, as the model needs it: the Linux build of the driver
//! allocates from Rust's global allocator, so this allocator is the pool it asks. It counts
//! the driver's bytes (while driver code runs, [`count_bytes`]), refuses the pool allocation
//! the allocation-failure walk names ([`refuse_pool_allocation`]), and holds frees back while
//! schedules are explored ([`quarantine`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;

thread_local! {
    /// Bytes counted as the driver's (while [`count_bytes`] is on): allocated minus freed.
    static DRIVER_BYTES: Cell<isize> = const { Cell::new(0) };
    static COUNTING_BYTES: Cell<bool> = const { Cell::new(false) };
}

/// Turns the counting of the driver's bytes on or off on this thread; returns what it was.
/// The model turns it on while driver code runs and off inside its own DDIs, so the figure
/// is what the driver asked the pool for.
pub(crate) fn count_bytes(on: bool) -> bool {
    COUNTING_BYTES.try_with(|c| c.replace(on)).unwrap_or(false)
}

/// The driver's bytes live on this thread (allocated minus freed while counted).
pub(crate) fn driver_bytes() -> isize {
    DRIVER_BYTES.with(Cell::get)
}

/// Whether the heap's allocations are the driver's now (counted).
fn counting() -> bool {
    COUNTING_BYTES.try_with(Cell::get) == Ok(true)
}

fn count_size(delta: isize) {
    if counting() {
        let _ = DRIVER_BYTES.try_with(|c| c.set(c.get() + delta));
    }
}

/// The pool's allocations the driver asked for (its heap while counted, and the KMDF
/// objects the model creates for it), and the one the model refuses: the walk of
/// `checks.rs` fails each in turn and checks the driver answers
/// STATUS_INSUFFICIENT_RESOURCES and leaks nothing.
static POOL_ASKED: AtomicU64 = AtomicU64::new(0);
static POOL_REFUSES: AtomicU64 = AtomicU64::new(u64::MAX);

/// From now on, refuse the pool allocation numbered `n` (0 the next one), or none.
pub(crate) fn refuse_pool_allocation(n: Option<u64>) {
    POOL_ASKED.store(0, SeqCst);
    POOL_REFUSES.store(n.unwrap_or(u64::MAX), SeqCst);
}

/// One pool allocation asked for: `true` if it is the one refused.
pub(crate) fn pool_refuses() -> bool {
    POOL_ASKED.fetch_add(1, SeqCst) == POOL_REFUSES.load(SeqCst)
}

/// How many pool allocations were asked for since [`refuse_pool_allocation`].
pub(crate) fn pool_asked() -> u64 {
    POOL_ASKED.load(SeqCst)
}

/// Frees held back while the model explores schedules (`schedule.rs`): a use after free then
/// reads what was there, the same in every run of a seed, instead of whatever the heap put
/// there since. A fixed table (the allocator may not allocate); once full, frees go through.
struct Quarantine {
    on: bool,
    len: usize,
    held: [(usize, usize, usize); QUARANTINE_ENTRIES],
}

const QUARANTINE_ENTRIES: usize = 1 << 16;

static QUARANTINE: Mutex<Quarantine> = Mutex::new(Quarantine {
    on: false,
    len: 0,
    held: [(0, 0, 0); QUARANTINE_ENTRIES],
});

fn quarantined(ptr: *mut u8, layout: Layout) -> bool {
    let Ok(mut q) = QUARANTINE.try_lock() else {
        return false;
    };
    if !q.on || q.len == QUARANTINE_ENTRIES {
        return false;
    }
    let at = q.len;
    q.held[at] = (ptr as usize, layout.size(), layout.align());
    q.len += 1;
    true
}

/// Holds frees back from now (`true`), or frees what was held and stops (`false`).
pub(crate) fn quarantine(on: bool) {
    let mut q = QUARANTINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    q.on = on;
    if on {
        return;
    }
    let held = q.len;
    q.len = 0;
    for &(ptr, size, align) in &q.held[..held] {
        // A layout that was valid when it was allocated.
        let Ok(layout) = Layout::from_size_align(size, align) else {
            continue;
        };
        // SAFETY: a block System.alloc gave out with this layout, held back once and freed
        // once, here.
        unsafe { System.dealloc(ptr as *mut u8, layout) };
    }
}

/// The test binary's allocator: the system's, with the model's three duties.
struct ModelHeap;

// SAFETY: forwards to the system allocator unchanged; counting touches only thread-locals
// and atomics that need no allocation.
unsafe impl GlobalAlloc for ModelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() && pool_refuses() {
            return std::ptr::null_mut();
        }
        count_size(layout.size() as isize);
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_size(-(layout.size() as isize));
        if quarantined(ptr, layout) {
            return;
        }
        // SAFETY: `ptr` came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        if counting() && pool_refuses() {
            return std::ptr::null_mut();
        }
        count_size(size as isize - layout.size() as isize);
        // SAFETY: as GlobalAlloc::realloc requires, forwarded.
        unsafe { System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: ModelHeap = ModelHeap;
