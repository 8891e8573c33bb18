//! What each client of a stack did, said by the client itself.
//!
//! A stack's host holds its clients as [`StackClient`]s, and every report (the I/O and
//! network totals, the per-disk lines, the SVG's I/O lanes) asks each client for its
//! [`Activity`] instead of looking clients up by type. The views below match the activity
//! exhaustively, with no catch-all arm: a new kind of client is a new variant, and every
//! view that must count it fails to compile until it says what the kind contributes.

use std::boxed::Box;
use std::vec::Vec;

use hcabus::bus::ClientCounters;
use hcabus::PolicyError;
use hcabus_sim::{Agent, MultiHost, ScriptedAgent, SimHost, SimSetup};

use ibal::disk::SrpClient;
use ibal::ibal_client::IbalClient;
use ibal::io::IoStats;
use ibal::ipoib::{IpoibClient, NetStats};
use ibal::uverbs::UverbsClient;

/// A client of a stack: a simulated client that says what it did.
pub trait StackClient: Agent + Send {
    fn activity(&self) -> Activity<'_>;
}

/// What a client does, with the client, for the reports of that kind of work.
#[derive(Debug, Clone, Copy)]
pub enum Activity<'a> {
    /// Block I/O through an SRP initiator: a disk of its own, or one path of a multipath
    /// disk (whose workload is the disk's, see [`SrpClient::multipath`]).
    Disk(&'a SrpClient),
    /// Network frames through IPoIB.
    Net(&'a IpoibClient),
    /// A user process's verbs.
    Verbs(&'a UverbsClient),
    /// No I/O of the kinds the reports count: the access layer itself (the other clients'
    /// verbs go through it), a scripted client (bus calls and events). A new kind of
    /// client that carries no such I/O says this and no view changes; one that does is a
    /// new variant, and every view must say what it contributes.
    Control(&'a dyn Agent),
}

/// A node: one computer with one adapter and a stack's clients on it, run by a virtual-time
/// host. ("Host" names the runtime that runs a coordinator; a computer is a node.)
pub type Node = SimHost<dyn StackClient>;
/// A node with several adapters, their buses on one clock.
pub type MultiNode = MultiHost<dyn StackClient>;

macro_rules! says {
    ($($ty:ty => $variant:ident),* $(,)?) => {
        $(impl StackClient for $ty {
            fn activity(&self) -> Activity<'_> {
                Activity::$variant(self)
            }
        })*
    };
}

says! {
    SrpClient => Disk,
    IpoibClient => Net,
    UverbsClient => Verbs,
    IbalClient => Control,
    ScriptedAgent => Control,
}

/// A host of scripted clients alone (a scenario without the access layer), held the way a
/// stack's host is so that every report reads it alike.
pub fn scripted(setup: &SimSetup) -> Result<Node, PolicyError> {
    let agents: Vec<Box<dyn StackClient>> = setup
        .clients
        .iter()
        .map(|(d, b)| Box::new(ScriptedAgent::new(*d, *b)) as Box<dyn StackClient>)
        .collect();
    SimHost::with_agents(setup, agents)
}

/// Every SRP initiator of `host`, in registration order (a multipath disk's paths each).
pub fn disks(host: &Node) -> impl Iterator<Item = &SrpClient> {
    host.agents().iter().filter_map(|a| match a.activity() {
        Activity::Disk(d) => Some(d),
        Activity::Net(_) | Activity::Verbs(_) | Activity::Control(_) => None,
    })
}

/// Every IPoIB interface of `host`.
pub fn nets(host: &Node) -> impl Iterator<Item = &IpoibClient> {
    host.agents().iter().filter_map(|a| match a.activity() {
        Activity::Net(n) => Some(n),
        Activity::Disk(_) | Activity::Verbs(_) | Activity::Control(_) => None,
    })
}

/// Every user-verbs process of `host`.
pub fn processes(host: &Node) -> impl Iterator<Item = &UverbsClient> {
    host.agents().iter().filter_map(|a| match a.activity() {
        Activity::Verbs(u) => Some(u),
        Activity::Disk(_) | Activity::Net(_) | Activity::Control(_) => None,
    })
}

/// The I/O accounting of every disk of `host`, summed.
pub fn io_stats(host: &Node) -> IoStats {
    let mut total = IoStats::default();
    for a in host.agents() {
        count(&mut total, a.activity(), a.counters());
    }
    total
}

/// Adds what a client whose activity is `activity` and whose counters are `counters` owes
/// the I/O accounting. I/O that a client which says it carries none
/// ([`Activity::Control`]) reports anyway counts as submitted and never accounted for: the
/// sum does not close and the run is not clean, where it would otherwise vanish from every
/// report.
fn count(total: &mut IoStats, activity: Activity<'_>, counters: ClientCounters) {
    match activity {
        Activity::Disk(d) => total.add(&d.io_stats()),
        Activity::Control(_) => total.submitted += counters.submitted,
        Activity::Net(_) | Activity::Verbs(_) => {}
    }
}

/// The network accounting of every IPoIB interface of `host`, summed.
pub fn net_stats(host: &Node) -> NetStats {
    let mut total = NetStats::default();
    for n in nets(host) {
        total.add(n.stats());
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcabus::types::{ClientDesc, ClientFlags, ClientKind};
    use hcabus_sim::Behavior;

    /// A client that says it carries no I/O and reports some anyway leaves the accounting
    /// open: the report says the run is not clean instead of dropping that I/O.
    #[test]
    fn io_a_control_client_reports_leaves_the_accounting_open() {
        let desc = ClientDesc::new("quiet", ClientKind::Custom, ClientFlags::empty())
            .expect("a valid name");
        let agent = ScriptedAgent::new(desc, Behavior::default());
        let mut total = IoStats::default();
        count(
            &mut total,
            Activity::Control(&agent),
            ClientCounters::default(),
        );
        assert!(total.closes(), "no I/O, nothing owed: {total:?}");
        let chatty = ClientCounters {
            submitted: 5,
            completed: 5,
            ..ClientCounters::default()
        };
        count(&mut total, Activity::Control(&agent), chatty);
        assert_eq!((total.submitted, total.unaccounted()), (5, 5));
        assert!(!total.closes(), "{total:?}");
    }
}
