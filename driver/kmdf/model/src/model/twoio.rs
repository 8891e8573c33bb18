//! The child driver's own I/O on the model, beside the bus (`two.rs`): requests a program
//! sends to the child's device, some completed at once, some held in its stopped I/O queue
//! across a reset and completed in the new epoch, some cancelled by its removal. Each is
//! accounted for twice: by the program (submitted = answered + pending), and by the child's
//! own counters, read through IOCTL_HCABUS_CHILD_STATS (dispatched = completed + failed +
//! in progress).

use hcabus::ioctl::ResetMode;
use hcabus::types::State;
use hcabus_child_kmdf::abi::{
    ChildIoResult, ChildSetVeto, ChildStats, IOCTL_HCABUS_CHILD_IO, IOCTL_HCABUS_CHILD_SET_VETO,
    IOCTL_HCABUS_CHILD_STATS,
};
use hcabus_sim::Fault;
use wdk_sys::*;
use zerocopy::{FromBytes, IntoBytes};

use super::admin::{self, ADMIN};
use super::harness::expect;
use super::kernel::Handle;
use super::machine::Machine;
use super::with;

/// The program's side: every request it sent, and how each ended.
#[derive(Default)]
pub(crate) struct Ledger {
    pub(crate) submitted: usize,
    /// Answered with success: the epoch each ran in.
    pub(crate) ran_in: Vec<u64>,
    /// Answered with a failure: the status.
    pub(crate) failed: Vec<NTSTATUS>,
    pub(crate) pending: Vec<Handle>,
}

impl Ledger {
    /// One IOCTL_HCABUS_CHILD_IO.
    pub(crate) fn submit(&mut self, child: Handle) {
        self.submitted += 1;
        let out = core::mem::size_of::<ChildIoResult>();
        match super::two::child_ioctl(child, IOCTL_HCABUS_CHILD_IO, &[], out) {
            Ok(result) => self.answered(result),
            Err(request) => self.pending.push(request),
        }
    }

    fn answered(&mut self, (status, bytes): (NTSTATUS, Vec<u8>)) {
        if status < 0 {
            self.failed.push(status);
            return;
        }
        match ChildIoResult::read_from_bytes(&bytes) {
            Ok(r) if r.bus_status >= 0 => self.ran_in.push(r.epoch),
            other => expect(
                false,
                &format!("an I/O answered {status:#x} with {other:?}"),
            ),
        }
    }

    /// Collects every pending request that is completed now; returns how many.
    pub(crate) fn collect(&mut self) -> usize {
        let mut done = 0;
        for request in core::mem::take(&mut self.pending) {
            match super::io::take_result(request) {
                Some(result) => {
                    self.answered(result);
                    done += 1;
                }
                None => self.pending.push(request),
            }
        }
        done
    }

    /// submitted = answered + pending, always.
    pub(crate) fn closes(&self, when: &str) {
        let answered = self.ran_in.len() + self.failed.len();
        expect(
            self.submitted == answered + self.pending.len(),
            &format!(
                "{when}: {} submitted, {answered} answered, {} pending",
                self.submitted,
                self.pending.len()
            ),
        );
    }
}

/// The child's counters; its own books must close: dispatched = completed + failed + in
/// progress.
pub(crate) fn stats(child: Handle) -> ChildStats {
    let out = core::mem::size_of::<ChildStats>();
    let result = super::two::child_ioctl(child, IOCTL_HCABUS_CHILD_STATS, &[], out);
    let Ok((STATUS_SUCCESS, bytes)) = result else {
        expect(false, &format!("IOCTL_HCABUS_CHILD_STATS: {result:?}"));
        unreachable!("expect stops the machine")
    };
    let Ok(s) = ChildStats::read_from_bytes(&bytes) else {
        expect(false, &format!("{} bytes of STATS", bytes.len()));
        unreachable!("expect stops the machine")
    };
    expect(
        s.dispatched == s.completed + s.failed + s.in_progress,
        &format!("the child's books: {s:?}"),
    );
    s
}

fn set_veto(child: Handle, veto: bool) {
    let input = ChildSetVeto { veto: veto.into() };
    let r = super::two::child_ioctl(child, IOCTL_HCABUS_CHILD_SET_VETO, input.as_bytes(), 0);
    expect(
        matches!(r, Ok((STATUS_SUCCESS, _))),
        &format!("SET_VETO {veto}: {r:?}"),
    );
}

/// Time goes on 1 ms at a time until `until` holds (at most `bound_ms`).
pub(crate) fn advance_until(
    m: &mut Machine,
    bound_ms: u64,
    what: &str,
    until: impl Fn(&mut Machine) -> bool,
) {
    for _ in 0..bound_ms {
        if until(m) {
            return;
        }
        m.advance(1);
    }
    expect(until(m), &format!("{what} within {bound_ms} ms"));
}

/// The scenarios of this file.
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "two_child_io_across_resets" => io_across_resets(),
        _ => return false,
    }
    true
}

/// The child's I/O through a catastrophic error, a planned reset it vetoes and its removal:
/// what runs before the error runs in epoch 1; what is submitted once RESET stopped its
/// queue waits there and runs after RESET_END, in epoch 2, none of it while the reset runs;
/// the veto leaves its I/O running in the same epoch; what waits at its removal is
/// cancelled. Both books close at every step.
fn io_across_resets() {
    let (mut m, child) = super::two::started_with_child();
    let queue = super::two::io_queue(child);
    let mut io = Ledger::default();
    held_across_a_catastrophic_error(&mut m, child, queue, &mut io);
    vetoed(&mut m, child, &mut io);
    cancelled_at_removal(&mut m, child, queue, &mut io);
    m.advance(5_000);
    m.unload_child();
    m.surprise_remove();
    m.unload();
}

/// I/O before the error runs in epoch 1; once RESET stopped the child's queue what comes waits
/// in it, and runs at RESET_END in epoch 2.
fn held_across_a_catastrophic_error(
    m: &mut Machine,
    child: Handle,
    queue: Handle,
    io: &mut Ledger,
) {
    for _ in 0..3 {
        io.submit(child);
    }
    expect(
        io.ran_in == [1, 1, 1],
        &format!("before the error: {:?}", io.ran_in),
    );
    io.closes("before the error");
    with(|k| k.adapters[0].hca.inject(Fault::Catastrophic));
    advance_until(m, 10_000, "RESET stopping the child's queue", |_| {
        !super::queues::state(queue).dispatching
    });
    for _ in 0..4 {
        io.submit(child);
    }
    expect(
        io.pending.len() == 4,
        &format!("held in the reset: {} pending", io.pending.len()),
    );
    let held = super::queues::state(queue);
    expect(
        held.queued.len() == 4,
        &format!("the stopped queue holds {:?}", held.queued),
    );
    let during = stats(child);
    expect(
        during.dispatched == 3 && during.executed == 1,
        &format!("during the reset: {during:?}"),
    );
    io.closes("during the reset");
    advance_until(m, 10_000, "the reset ending", |m| {
        let s = admin::state(m);
        s.epoch == 2 && s.state == State::Operational as u32
    });
    expect(
        io.collect() == 4,
        "the held requests completed at RESET_END",
    );
    expect(
        io.ran_in == [1, 1, 1, 2, 2, 2, 2],
        &format!("after the reset: {:?}", io.ran_in),
    );
    io.closes("after the reset");
}

/// A planned reset the child vetoes: nothing stops, the epoch stays.
fn vetoed(m: &mut Machine, child: Handle, io: &mut Ledger) {
    set_veto(child, true);
    let asked = admin::request_reset(m, ADMIN, ResetMode::Planned);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a planned reset: {asked:#x}"),
    );
    m.advance(5_000);
    set_veto(child, false);
    io.submit(child);
    expect(
        io.ran_in.last() == Some(&2) && admin::state(m).epoch == 2,
        "the vetoed reset left the child's I/O in epoch 2",
    );
    let after = stats(child);
    expect(
        after.vetoes == 1 && after.executed == 1 && after.dispatched == 8 && after.failed == 0,
        &format!("after the veto: {after:?}"),
    );
}

/// Another reset, and the child removed while requests wait in its stopped queue: they are
/// cancelled.
fn cancelled_at_removal(m: &mut Machine, child: Handle, queue: Handle, io: &mut Ledger) {
    let asked = admin::request_reset(m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    advance_until(m, 10_000, "RESET stopping the child's queue", |_| {
        !super::queues::state(queue).dispatching
    });
    for _ in 0..2 {
        io.submit(child);
    }
    m.remove_child_device(child);
    expect(io.collect() == 2, "the removal answered what waited");
    expect(
        io.failed == [STATUS_CANCELLED, STATUS_CANCELLED],
        &format!("what waited at the removal: {:?}", io.failed),
    );
    io.closes("after the removal");
}
