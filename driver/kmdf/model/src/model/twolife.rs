//! The child driver through the bus's and its own PnP and power life (`two.rs`, `twoio.rs`):
//! the bus to D3 and back, the bus's rebalance, the child's own stop and start, the child
//! unloaded and loaded again, and the bus surprise-removed during a reset while the child
//! holds the interface and has I/O waiting.

use hcabus::ioctl::ResetMode;
use hcabus::types::{Call, State};
use hcabus_kmdf::kernel::ChildFunction;
use wdk_sys::*;

use super::admin::{self, ADMIN};
use super::harness::expect;
use super::machine::Machine;
use super::twoio::{advance_until, stats, Ledger};

/// The scenarios of this file.
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "two_child_power_rebalance_reload" => power_rebalance_reload(),
        "two_child_surprise_bus" => surprise_bus(),
        "two_child_late" => late(),
        "two_child_ipoib_and_srp" => ipoib_and_srp(),
        _ => return false,
    }
    true
}

/// D3 and back: the child's power-managed I/O queue is held while the bus is out of D0 (the
/// child first), and what waited runs when both are back, in the same epoch. A rebalance of
/// the bus: the child hears nothing, keeps its registration, its I/O runs in the same epoch.
/// The child's own stop and start: a new query and a new Register. Its unload and a load
/// from a fresh image: the same again. Both books close at every step.
fn power_rebalance_reload() {
    let (mut m, child) = super::two::started_with_child();
    let bus_fdo = m.fdo.unwrap_or_default();
    let references = super::cchild::references(bus_fdo);
    let mut io = Ledger::default();
    through_d3(&mut m, child, &mut io);
    through_rebalances(&mut m, child, &mut io);
    expect(
        super::cchild::references(bus_fdo) == references,
        "one interface reference held across the child's restart",
    );
    // Unloaded and loaded again: a fresh image, a new device on the same PDO, a reset ridden.
    m.remove_child_device(child);
    m.unload_child();
    expect(
        super::cchild::references(bus_fdo) == references - 1,
        "the unloaded child holds no reference",
    );
    reloaded(&mut m);
    m.surprise_remove();
    m.unload();
}

/// The bus to D3 with the child's I/O held, and back.
fn through_d3(m: &mut Machine, child: usize, io: &mut Ledger) {
    io.submit(child);
    m.power_down(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3);
    for _ in 0..2 {
        io.submit(child);
    }
    expect(
        io.pending.len() == 2,
        "the child's I/O waits while out of D0",
    );
    // Its counters answer in D3: the default queue is not power-managed.
    let held = stats(child);
    expect(held.dispatched == 1, &format!("in D3: {held:?}"));
    io.closes("in D3");
    expect(m.power_up() == STATUS_SUCCESS, "D0Entry");
    expect(io.collect() == 2, "what waited in D3 ran at D0");
    expect(
        io.ran_in == [1, 1, 1],
        &format!("across D3: {:?}", io.ran_in),
    );
}

/// The bus's rebalance (the child hears nothing), then the child's own (a new Register).
fn through_rebalances(m: &mut Machine, child: usize, io: &mut Ledger) {
    let id = stats(child).client_id;
    expect(m.stop() == STATUS_SUCCESS, "the bus's stop");
    expect(
        m.start() == STATUS_SUCCESS,
        "the bus's start after the stop",
    );
    m.run();
    io.submit(child);
    let after = stats(child);
    expect(
        after.client_id == id
            && io.ran_in.last() == Some(&1)
            && after.events.iter().sum::<u32>() == 0,
        &format!("across the bus's rebalance the child heard nothing: {after:?}"),
    );
    expect(
        m.restart_child_device(child) == STATUS_SUCCESS,
        "the child's own stop and start",
    );
    io.submit(child);
    let restarted = stats(child);
    expect(
        restarted.client_id != id && restarted.executed == 0,
        &format!("a new registration after the child's restart: {restarted:?}"),
    );
    io.closes("after the child's restart");
}

/// The child loaded again from a fresh image, on the same PDO, through a reset; removed and
/// unloaded.
fn reloaded(m: &mut Machine) {
    expect(
        m.load_child() == STATUS_SUCCESS,
        "the child's DriverEntry again",
    );
    let child = m.add_child_device(ChildFunction::Srp.serial());
    expect(
        m.start_child_device(child) == STATUS_SUCCESS,
        "the reloaded child's start",
    );
    let asked = admin::request_reset(m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    m.advance(5_000);
    let mut again = Ledger::default();
    again.submit(child);
    expect(
        again.ran_in == [2],
        &format!("the reloaded child after a reset: {:?}", again.ran_in),
    );
    let s = stats(child);
    expect(
        s.executed == 1 && s.events[2] == 1,
        &format!("the reloaded child: {s:?}"),
    );
    m.remove_child_device(child);
    m.unload_child();
}

/// The bus surprise-removed while a reset runs, the child registered, holding the interface,
/// with I/O waiting in its stopped queue: PnP removes the child's stack first (what waits is
/// cancelled, Unregister returns though its reset is open, the interface's reference given
/// back), then the bus's. Nothing is left at either unload.
fn surprise_bus() {
    let (mut m, child) = super::two::started_with_child();
    let bus_fdo = m.fdo.unwrap_or_default();
    let references = super::cchild::references(bus_fdo);
    let queue = super::two::io_queue(child);
    let mut io = Ledger::default();
    io.submit(child);
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    advance_until(&mut m, 10_000, "RESET stopping the child's queue", |_| {
        !super::queues::state(queue).dispatching
    });
    for _ in 0..3 {
        io.submit(child);
    }
    expect(io.pending.len() == 3, "I/O waits in the reset");
    let state = admin::state(&mut m);
    expect(
        state.state != State::Operational as u32,
        &format!("the reset still runs: {}", state.state),
    );
    // The PnP manager's first step: the stack above the bus's PDO.
    m.remove_child_stacks();
    expect(
        io.collect() == 3,
        "the child's removal answered what waited",
    );
    expect(
        io.failed == [STATUS_CANCELLED; 3] && io.ran_in == [1],
        &format!("{:?} / {:?}", io.failed, io.ran_in),
    );
    io.closes("after the child's removal");
    expect(
        super::cchild::references(bus_fdo) == references - 1,
        "the child gave the interface's reference back",
    );
    let unregistered = admin::flight_record(&mut m)
        .iter()
        .filter(|r| r.name.as_str() == "child-srp")
        .any(|r| {
            matches!(
                r.kind,
                hcabus::recorder::RecordKind::Call {
                    call: Call::Unregister,
                    ..
                }
            )
        });
    expect(
        unregistered,
        "the bus recorded the child's Unregister during its reset",
    );
    // Then the bus's own surprise removal; the reset it ran goes with it.
    m.surprise_remove();
    m.unload_child();
    m.unload();
}

/// The child started while a reset runs (its device added when the bus is Resetting): its
/// registration is late, its queue closed at once, what it is sent waits, and runs at the
/// reset's RESET_END in the new epoch; it owed the reset nothing and executed nothing. The
/// RESET_END its registration set in motion reached a child that knew it was registered.
fn late() {
    let mut m = super::harness::started();
    expect(m.load_child() == STATUS_SUCCESS, "the child's DriverEntry");
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    advance_until(&mut m, 10_000, "the bus resetting", |m| {
        admin::state(m).state == State::Resetting as u32
    });
    let child = m.add_child_device(ChildFunction::Srp.serial());
    expect(
        m.start_child_device(child) == STATUS_SUCCESS,
        "the child's start during the reset",
    );
    let registered = stats(child);
    expect(
        registered.flags & hcabus_child_kmdf::abi::STATS_LATE != 0,
        &format!("a late registration: {registered:?}"),
    );
    let mut io = Ledger::default();
    for _ in 0..2 {
        io.submit(child);
    }
    expect(
        io.pending.len() == 2,
        "the late child's I/O waits for the reset's end",
    );
    advance_until(&mut m, 10_000, "the reset ending", |m| {
        let s = admin::state(m);
        s.epoch == 2 && s.state == State::Operational as u32
    });
    expect(io.collect() == 2, "what waited ran at RESET_END");
    expect(
        io.ran_in == [2, 2],
        &format!("the late child's I/O: {:?}", io.ran_in),
    );
    let s = stats(child);
    expect(
        s.executed == 0 && s.events[2] == 1 && s.epoch == 2,
        &format!("the late child owed nothing and heard RESET_END: {s:?}"),
    );
    io.closes("after the reset");
    m.remove_child_device(child);
    m.unload_child();
    m.surprise_remove();
    m.unload();
}

/// One child driver on two PDOs, the SRP initiator's and port 1's IPoIB: two devices, two
/// registrations. The IPoIB function may not veto (it registers without CAN_VETO: its switch
/// is refused); the SRP function's veto calls a planned reset off and the IPoIB function
/// hears nothing of it; a forced reset is executed by both and their I/O runs in the new
/// epoch; the bus's surprise removal takes both stacks down first.
fn ipoib_and_srp() {
    use hcabus_child_kmdf::abi::{ChildSetVeto, IOCTL_HCABUS_CHILD_SET_VETO};
    use zerocopy::IntoBytes;
    let (mut m, srp) = super::two::started_with_child();
    let ipoib = m.add_child_device(ChildFunction::Ipoib { port: 1 }.serial());
    expect(
        m.start_child_device(ipoib) == STATUS_SUCCESS,
        "the IPoIB function's start",
    );
    let veto = |child, on: bool| {
        let input = ChildSetVeto { veto: on.into() };
        super::two::child_ioctl(child, IOCTL_HCABUS_CHILD_SET_VETO, input.as_bytes(), 0)
            .map(|(status, _)| status)
    };
    let refused = veto(ipoib, true);
    expect(
        refused == Ok(STATUS_NOT_SUPPORTED),
        &format!("an IPoIB veto switch: {refused:?}"),
    );
    expect(veto(srp, true) == Ok(STATUS_SUCCESS), "the SRP veto switch");
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Planned);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a planned reset: {asked:#x}"),
    );
    m.advance(5_000);
    let (s, i) = (stats(srp), stats(ipoib));
    expect(
        s.vetoes == 1 && i.events.iter().sum::<u32>() == 0 && s.epoch == 1,
        &format!("the veto disturbed only the SRP function: {s:?} / {i:?}"),
    );
    expect(
        veto(srp, false) == Ok(STATUS_SUCCESS),
        "the SRP veto switch off",
    );
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    m.advance(5_000);
    let mut io = Ledger::default();
    for child in [srp, ipoib] {
        io.submit(child);
        let c = stats(child);
        expect(
            c.executed == 1 && c.epoch == 2,
            &format!("after the forced reset: {c:?}"),
        );
    }
    expect(
        io.ran_in == [2, 2],
        &format!("both functions' I/O: {:?}", io.ran_in),
    );
    expect(
        stats(srp).client_id != stats(ipoib).client_id,
        "two registrations",
    );
    m.surprise_remove();
    m.unload_child();
    m.unload();
}
