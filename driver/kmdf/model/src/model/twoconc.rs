//! The bus's image and the child driver's on four processors (`schedule`, `processors`): a
//! DPC processor, a timer processor and a worker run the bus's deferred work, and with it the
//! child's callback and its queue's stop callback, image to image; a program thread sends I/O
//! to the child's device; the scenario's own thread, the administrator and the firmware,
//! forces a reset and raises a catastrophic error. Each schedule is a fresh machine.
//!
//! What must hold in every schedule: every request is answered with success, none of them
//! dispatched between the child's ResetExecute and the reset's end (the child would fail it
//! STATUS_DEVICE_BUSY), both books close, and the child ends registered in the last epoch
//! with both resets executed.

use std::sync::atomic::{AtomicUsize, Ordering};

use hcabus::ioctl::ResetMode;
use hcabus::types::State;
use hcabus_sim::Fault;
use wdk_sys::*;

use super::admin::{self, ADMIN};
use super::harness::expect;
use super::processors::Processors;
use super::twoio::{stats, Ledger};
use super::{violation, with, Rule};

/// Schedules per scheduler (random, then PCT); `HCABUS_MODEL_SCHEDULES` overrides it.
const SCHEDULES: usize = 40;

/// Requests the program sends in a schedule.
const REQUESTS: usize = 6;

/// Over all schedules: requests held in the child's stopped queue, and requests answered.
static HELD: AtomicUsize = AtomicUsize::new(0);
static ANSWERED: AtomicUsize = AtomicUsize::new(0);

/// The scenarios of this file.
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "two_child_races" => {
            let schedules = std::env::var("HCABUS_MODEL_SCHEDULES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(SCHEDULES);
            super::schedule::explore(super::races::seed(), schedules, on_four_processors);
            println!(
                "two_child_races reached: {} requests answered, {} of them held in a reset",
                ANSWERED.load(Ordering::Relaxed),
                HELD.load(Ordering::Relaxed),
            );
        }
        _ => return false,
    }
    true
}

/// A program's thread: REQUESTS requests to the child's device.
fn program(child: usize) -> shuttle::thread::JoinHandle<Ledger> {
    super::schedule::spawn(move || {
        let mut io = Ledger::default();
        for _ in 0..REQUESTS {
            io.submit(child);
        }
        io
    })
}

/// The program's thread joined: what it sent, and what is still pending.
fn finish(program: shuttle::thread::JoinHandle<Ledger>) -> Ledger {
    let Ok(io) = super::schedule::join(program) else {
        violation(
            Rule::Expectation,
            "program",
            "the program's thread panicked",
        )
    };
    HELD.fetch_add(io.pending.len(), Ordering::Relaxed);
    io
}

/// This thread waits for `ms` of virtual time to pass (the timer processor moves it).
fn wait_ms(ms: u64) {
    let until_us = with(|k| k.now_us) + ms * 1_000;
    while with(|k| k.now_us) < until_us {
        super::schedule::yield_now();
    }
}

fn on_four_processors() {
    let (mut m, child) = super::two::started_with_child();
    let cpus = Processors::start();
    // The forced reset with the program's I/O, then (a hardware reset clears the device's
    // error state: the error comes once the first reset is over) the catastrophic error with
    // more of it.
    let first = program(child);
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    let mut io = finish(first);
    wait_ms(10_000);
    let epoch = admin::state(&mut m).epoch;
    expect(epoch == 2, &format!("epoch {epoch} after the forced reset"));
    let second = program(child);
    with(|k| k.adapters[0].hca.inject(Fault::Catastrophic));
    let more = finish(second);
    io.submitted += more.submitted;
    io.ran_in.extend(more.ran_in);
    io.failed.extend(more.failed);
    io.pending.extend(more.pending);
    wait_ms(30_000);
    let s = admin::state(&mut m);
    expect(
        s.epoch == 3 && s.state == State::Operational as u32,
        &format!(
            "after the forced reset and the catastrophic one: e{} state {}",
            s.epoch, s.state
        ),
    );
    cpus.stop();
    io.collect();
    ANSWERED.fetch_add(io.ran_in.len(), Ordering::Relaxed);
    io.closes("after both resets");
    expect(
        io.pending.is_empty() && io.failed.is_empty() && io.ran_in.len() == 2 * REQUESTS,
        &format!(
            "every request answered with success: ran in {:?}, failed {:?}, {} pending",
            io.ran_in,
            io.failed,
            io.pending.len()
        ),
    );
    let s = stats(child);
    expect(
        s.executed == 2 && s.epoch == 3 && s.failed == 0 && s.in_progress == 0,
        &format!("the child after both resets: {s:?}"),
    );
    m.remove_child_device(child);
    m.unload_child();
    m.surprise_remove();
    m.unload();
}
