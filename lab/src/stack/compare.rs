//! The soft reset beside Linux's remove/add, on the same stack (issue 16): the adapter, the
//! coordinator and the stack's setup stay; what differs is what happens to the clients.
//!
//! - [`soft_reset`]: RESET, the hardware reset, RESET_END; every client keeps its state
//!   and its held I/O and re-creates only its hardware resources.
//! - [`remove_add`]: every client is removed (DEVICE_FATAL, then unregistered: what a
//!   Linux upper-layer driver's remove callback does), the adapter is reset with nobody on
//!   it, and a new access layer and new clients are built and started from nothing, as
//!   `ib_unregister_device` / `ib_register_device` around mlx5's reload do.
//!
//! Both run in virtual time until the stack is back (every registered disk up, every
//! IPoIB interface's link up) and say what it cost in I/O; the benches time them and count
//! their allocations.

use hcabus::{Duration, Instant, State};
use hcabus_sim::Fault;

use super::{agents, BuildError, Node, StackSetup};

/// How long either way may take to bring the stack back before it counts as not back.
pub const BACK_WITHIN: Duration = Duration::from_ms(60_000);
/// The step of virtual time between looks at the stack.
const LOOK_EVERY: Duration = Duration::from_ms(1);

/// What one way of resetting did to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycle {
    /// The stack came back within [`BACK_WITHIN`].
    pub back: bool,
    /// Virtual time from the start of the reset to the stack being back.
    pub took: Duration,
    /// I/O failed upward, or left with nobody to complete it, during the cycle: what the
    /// filesystem (or, for the boot disk, Windows) saw fail or hang.
    pub io_dropped: u64,
    /// Clients removed (zero for a soft reset).
    pub removed: usize,
}

/// A host of `setup`'s stack, without its scripted faults, run until its I/O is flowing.
pub fn warm(setup: &StackSetup) -> Result<Node, BuildError> {
    let mut setup = setup.clone();
    setup.sim.faults.clear();
    setup.sim.duration = Duration::from_ms(3_600_000);
    let mut host = super::build(&setup)?;
    host.run_until(Instant::from_ms(1_000));
    Ok(host)
}

/// `clients` are registered (as many as before the reset), every registered disk is up and
/// every registered IPoIB interface has its link.
pub fn stack_is_back(host: &Node, clients: usize) -> bool {
    host.coordinator().state() == State::Operational
        && host.coordinator().client_count() >= clients
        && host.coordinator().clients().all(|c| {
            // Each client says whether it is serving: no looking up by type.
            host.agent_of(c.id)
                .is_none_or(|agent| host.agents()[agent].serving())
        })
}

/// I/O failed upward, or owed by a disk that is gone (lost), so far, by every disk the host
/// ever had. Read from the workloads' counters as they stand, a disk that is not a live
/// path owing all it holds: what the full accounting ([`super::io_stats`]) settles I/O by
/// I/O.
fn dropped(host: &Node) -> u64 {
    super::disks(host)
        .map(|d| {
            let s = d.workload().map(|w| *w.stats()).unwrap_or_default();
            let owed = s.submitted - s.completed - s.failed;
            s.failed + if d.is_live_path() { 0 } else { owed }
        })
        .sum()
}

/// Runs until `done` holds, a step at a time, up to [`BACK_WITHIN`] after `since`.
fn run_until_back(host: &mut Node, since: Instant, done: impl Fn(&Node) -> bool) -> bool {
    while !done(host) {
        if host.now() >= since + BACK_WITHIN {
            return false;
        }
        let next = host.now() + LOOK_EVERY;
        host.run_until(next);
    }
    true
}

/// An administrator's forced reset under the clients: the soft reset.
pub fn soft_reset(host: &mut Node) -> Cycle {
    let (start, before, epoch) = (host.now(), dropped(host), host.coordinator().epoch());
    let clients = host.coordinator().client_count();
    host.inject(Fault::AdminReset);
    let back = run_until_back(host, start, |h| {
        h.coordinator().epoch() > epoch && stack_is_back(h, clients)
    });
    Cycle {
        back,
        took: host.now().saturating_since(start),
        io_dropped: dropped(host) - before,
        removed: 0,
    }
}

/// Every client removed, the adapter reset alone, `setup`'s clients added anew.
pub fn remove_add(host: &mut Node, setup: &StackSetup) -> Result<Cycle, BuildError> {
    let (start, before, epoch) = (host.now(), dropped(host), host.coordinator().epoch());
    let clients = host.coordinator().client_count();
    let removed = host.remove_clients();
    host.inject(Fault::AdminReset);
    let reset = run_until_back(host, start, |h| {
        h.coordinator().epoch() > epoch && h.coordinator().state() == State::Operational
    });
    host.add_agents(agents(setup)?);
    let back = reset && run_until_back(host, start, |h| stack_is_back(h, clients));
    Ok(Cycle {
        back,
        took: host.now().saturating_since(start),
        io_dropped: dropped(host) - before,
        removed,
    })
}
