//! The other processors, under `schedule`: one runs the DPCs, one the timers (and with them
//! virtual time), one the work items, each a shuttle thread, until it is told to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::vec::Vec;

use shuttle::thread::JoinHandle;

use super::kernel::{Handle, Kernel, Kind};
use super::machine::{fire_timer, run_dpc, run_work_item};
use super::with;

/// A value a shuttle thread may take: shuttle's threads are continuations on the one OS
/// thread of the scenario, so raw pointers inside are never used by two threads at once.
pub(crate) struct Sendable<T>(pub(crate) T);

// SAFETY: see above; every thread of a schedule runs on the scenario's OS thread, one at a
// time.
unsafe impl<T> Send for Sendable<T> {}

/// The running processors.
pub(crate) struct Processors {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// What a processor looks for next.
#[derive(Clone, Copy)]
enum Runs {
    Dpcs,
    Timers,
    WorkItems,
}

impl Processors {
    /// Starts a DPC processor, a timer processor and a worker.
    pub(crate) fn start() -> Processors {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = [Runs::Dpcs, Runs::Timers, Runs::WorkItems]
            .into_iter()
            .map(|work| {
                let stop = Arc::clone(&stop);
                super::schedule::spawn(move || processor(work, &stop))
            })
            .collect();
        Processors { stop, threads }
    }

    /// Lets each processor finish what is queued for it (a timer still armed stays armed),
    /// then joins them.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads {
            if super::schedule::join(t).is_err() {
                super::violation(super::Rule::Expectation, "processor", "a thread panicked");
            }
        }
    }
}

fn processor(work: Runs, stop: &AtomicBool) {
    loop {
        let stopping = stop.load(Ordering::Acquire);
        match (next(work, stopping), stopping) {
            (Some(h), _) => match work {
                Runs::Dpcs => run_dpc(h),
                Runs::Timers => fire_timer(h),
                Runs::WorkItems => {
                    let taken = with(|k| match &mut k.objects[Kernel::index_of(h as _)].kind {
                        Kind::WorkItem { queued, .. } => core::mem::replace(queued, false),
                        _ => false,
                    });
                    if taken {
                        run_work_item(h);
                    }
                }
            },
            (None, true) => return,
            (None, false) => super::schedule::yield_now(),
        }
    }
}

/// The next DPC or work item queued and not running, or the next timer due (virtual time
/// moves to it once no DPC or work item is queued or running; stopping, no timer fires).
fn next(work: Runs, stopping: bool) -> Option<Handle> {
    with(|k| {
        let live = k
            .objects
            .iter()
            .enumerate()
            .filter(|(_, o)| !o.deleted)
            .map(|(i, o)| (Kernel::handle_of(i), &o.kind));
        let found = match work {
            Runs::Dpcs => live
                .filter_map(|(h, kind)| match kind {
                    Kind::Dpc {
                        queued: true,
                        running: 0,
                        ..
                    } => Some((0, h)),
                    _ => None,
                })
                .next(),
            Runs::WorkItems => live
                .filter_map(|(h, kind)| match kind {
                    Kind::WorkItem {
                        queued: true,
                        running: 0,
                        ..
                    } => Some((0, h)),
                    _ => None,
                })
                .next(),
            Runs::Timers if stopping => None,
            Runs::Timers => live
                .filter_map(|(h, kind)| match kind {
                    Kind::Timer {
                        due_us: Some(d),
                        running: 0,
                        ..
                    } => Some((*d, h)),
                    _ => None,
                })
                .min(),
        };
        let (due_us, h) = found?;
        // Time passes only once the work already queued has run: a DPC or work item queued
        // or running holds the next timer until it is done, as microseconds of work hold a
        // timer a second away on a machine. Otherwise the timer processor jumped a whole
        // poll interval over a queued health read, and the next poll took it for one the
        // device never answered (a catastrophic reset in nearly every schedule).
        if due_us > k.now_us && pending_work(k) {
            return None;
        }
        k.now_us = k.now_us.max(due_us);
        Some(h)
    })
}

/// A DPC or work item queued or running.
fn pending_work(k: &Kernel) -> bool {
    k.objects.iter().filter(|o| !o.deleted).any(|o| {
        matches!(
            o.kind,
            Kind::Dpc { queued: true, .. }
                | Kind::Dpc { running: 1.., .. }
                | Kind::WorkItem { queued: true, .. }
                | Kind::WorkItem { running: 1.., .. }
        )
    })
}
