//! Each processor's kernel stack for the image: 24 KiB (KERNEL_STACK_SIZE on x64) with a
//! guard page below, painted before each call from the model and read after it for how deep
//! the call went: the image's frames, those of any callback the model made from inside a
//! DDI, and the stubs' (about 200 bytes per DDI the image is inside); not KMDF's own
//! frames above the callback on Windows, which the model does not have.

use std::string::String;
use std::sync::{Mutex, PoisonError};
use std::vec::Vec;

use super::memory::{Region, PAGE};

/// KERNEL_STACK_SIZE on x64 (ntddk.h: 0x6000).
pub(crate) const STACK_BYTES: usize = 0x6000;
const PAINT: u8 = 0x5A;
/// Stack kept above the first frame of a call from the model (see [`begin`]).
const ABOVE: usize = 64;

struct Stack {
    processor: usize,
    region: Region,
}

impl Stack {
    fn top(&self) -> usize {
        self.region.base() + self.region.len()
    }

    fn usable(&mut self) -> &mut [u8] {
        &mut self.region.bytes_mut()[PAGE..]
    }
}

static STACKS: Mutex<Vec<Stack>> = Mutex::new(Vec::new());
/// Each processor's entry point under way (the name `machine::at` gives it).
static ENTRIES: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
/// The deepest each entry point went, and how many calls it had: (name, bytes, calls).
static HIGH_WATER: Mutex<Vec<(String, usize, usize)>> = Mutex::new(Vec::new());

/// The driver code about to run on the calling processor is `what` (from `machine::at`).
pub(crate) fn naming(what: &str) {
    super::super::uncounted(|| naming_uncounted(what));
}

fn naming_uncounted(what: &str) {
    if super::switch::guest_sp() != 0 {
        return; // a callback inside another call: counted with it
    }
    let me = super::super::schedule::me();
    let mut e = ENTRIES.lock().unwrap_or_else(PoisonError::into_inner);
    match e.iter_mut().find(|(p, _)| *p == me) {
        Some((_, name)) => what.clone_into(name),
        None => e.push((me, what.into())),
    }
}

/// The calling processor's stack, painted: its top.
pub(crate) fn begin() -> usize {
    super::super::uncounted(begin_uncounted)
}

fn begin_uncounted() -> usize {
    let me = super::super::schedule::me();
    let mut stacks = STACKS.lock().unwrap_or_else(PoisonError::into_inner);
    let i = match stacks.iter().position(|s| s.processor == me) {
        Some(i) => i,
        None => {
            let mut region = Region::reserve(PAGE + STACK_BYTES).expect("a kernel stack");
            region
                .make_writable(PAGE, STACK_BYTES)
                .expect("the stack writable above its guard page");
            stacks.push(Stack {
                processor: me,
                region,
            });
            stacks.len() - 1
        }
    };
    stacks[i].usable().fill(PAINT);
    // The stubs read the eight argument slots a DDI may have (`switch.rs`), four of them
    // above the caller's frame: on Windows KMDF's frames are there; here, room for them.
    stacks[i].top() - ABOVE
}

/// The call that [`begin`] began has returned: how deep it went, recorded.
pub(crate) fn end() {
    super::super::uncounted(end_uncounted);
}

fn end_uncounted() {
    let me = super::super::schedule::me();
    let used = {
        let mut stacks = STACKS.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(s) = stacks.iter_mut().find(|s| s.processor == me) else {
            return;
        };
        let bytes = s.usable();
        // Whole pages compared first (a memcmp), then bytes in the first page touched.
        let painted = [PAINT; PAGE];
        let pages = bytes
            .chunks(PAGE)
            .take_while(|c| *c == &painted[..c.len()])
            .count();
        let rest = &bytes[(pages * PAGE).min(bytes.len())..];
        let untouched = pages * PAGE + rest.iter().take_while(|b| **b == PAINT).count();
        // The room kept above the first frame is not the call's.
        (bytes.len() - untouched).saturating_sub(ABOVE)
    };
    let name = ENTRIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(p, _)| *p == me)
        .map_or_else(|| "(unnamed)".into(), |(_, n)| n.clone());
    let mut high = HIGH_WATER.lock().unwrap_or_else(PoisonError::into_inner);
    match high.iter_mut().find(|(n, _, _)| *n == name) {
        Some((_, bytes, calls)) => {
            *bytes = (*bytes).max(used);
            *calls += 1;
        }
        None => high.push((name, used, 1)),
    }
}

/// The entry point whose stack's guard page holds `at`, if one does (from the fault
/// handler: never waits for the lock).
pub(crate) fn overflowed(at: usize) -> Option<String> {
    let stacks = STACKS.try_lock().ok()?;
    let s = stacks
        .iter()
        .find(|s| at >= s.region.base() && at < s.region.base() + PAGE)?;
    let entries = ENTRIES.try_lock().ok()?;
    Some(
        entries
            .iter()
            .find(|(p, _)| *p == s.processor)
            .map_or_else(|| "(unnamed)".into(), |(_, n)| n.clone()),
    )
}

/// Each entry point's deepest call and its number of calls, deepest first.
pub(crate) fn report() -> Vec<(String, usize, usize)> {
    let mut high = HIGH_WATER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    high.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    high
}
