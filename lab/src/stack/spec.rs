//! What a stack's clients are built from. Each client's configuration builds the client and
//! says what it takes of the adapter ([`ClientConfig`]); [`ClientSpec`] is one line per kind
//! of client, so that a new kind is its own module and one line here (docs/protocol.md,
//! "where a change belongs").

use std::boxed::Box;
use std::string::String;

use hcabus::types::{ClientDesc, ClientFlags, ClientKind};
use hcabus_sim::{Behavior, ScriptedAgent};

use super::{BuildError, StackClient};
pub use crate::block::LargeIo;
use crate::block::{BlockWorkload, WorkloadConfig};
use crate::budget::{self, Needs};
use crate::ipoib_peer::{IpoibPeer, SteadyTraffic};
use crate::srp_target::{Lun, Route, SharedAdmission, SrpTarget};
use crate::user_process::{SteadyProcess, UverbsSpec};
use hcabus::verbs::Lid;
use hcabus::Instant;
use ibal::disk::{DiskConfig, SrpClient};
use ibal::ibal_client::SharedIbal;
use ibal::ipoib::{IpoibClient, IpoibConfig};
use ibal::multipath::SharedMultipath;
use ibal::target::Target;
use ibal::uverbs::UverbsClient;
use ibal::workload::Workload;

/// What a client is built on: the stack's access layer and its multipath disks.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    /// The access layer, handed only to a client whose [`ClientConfig::needs`] says what it
    /// takes of the adapter: one that declares nothing cannot reach the verbs the budget
    /// check did not count. Read through [`Parts::ibal`].
    pub(super) ibal: Option<&'a SharedIbal>,
    pub disks: &'a [LabDisk],
    /// The login capacity of targets other hosts share, by the target's LID.
    pub targets: &'a [(Lid, SharedAdmission)],
    /// A fleet's subnet manager and SA, which IPoIB joins its groups through.
    pub subnet: Option<&'a crate::subnet::SharedSubnet>,
    /// When the host powers on: its workloads and traffic start then.
    pub start: Instant,
}

impl Parts<'_> {
    /// The access layer for the client `name`, or `Undeclared` when its configuration
    /// declared no needs.
    pub fn ibal(&self, name: &str) -> Result<SharedIbal, BuildError> {
        self.ibal
            .cloned()
            .ok_or_else(|| BuildError::Undeclared(name.into()))
    }

    /// A disk on a fleet's fabric asks its SA for the path before each login.
    pub fn on_fabric(&self, disk: SrpClient) -> SrpClient {
        match self.subnet {
            Some(s) => disk.with_subnet(std::sync::Arc::new(s.clone())),
            None => disk,
        }
    }
}

/// A multipath disk as the lab builds it: the queue above its paths, and the LUN every
/// path's target port serves.
#[derive(Debug, Clone)]
pub struct LabDisk {
    pub queue: SharedMultipath,
    pub lun: Lun,
}

/// The workload `load` on LUN `lun_id`, with at most `max_outstanding` I/Os owed at once,
/// its first I/O due at `start` (its host's power-on).
pub fn workload(
    load: &Load,
    lun_id: u32,
    max_outstanding: usize,
    start: Instant,
) -> Box<dyn Workload> {
    let w = BlockWorkload::new(WorkloadConfig {
        iops: load.iops,
        read_pct: load.read_pct.min(100),
        lun_id,
        n_blocks: load.n_blocks,
        max_outstanding,
        large: load.large,
        series_buckets: load.series_buckets,
    });
    Box::new(w.starting_at(start))
}

/// `target` with the login capacity it shares with other hosts, when it is one of
/// `targets` (by LID).
fn shared(mut target: SrpTarget, lid: Lid, targets: &[(Lid, SharedAdmission)]) -> Box<dyn Target> {
    if let Some((_, a)) = targets.iter().find(|(l, _)| *l == lid) {
        target.set_admission(a.clone());
    }
    Box::new(target)
}

/// The disk `name` as `spec` sets it up, on the access layer `ibal`: its target port
/// (sharing its login capacity when it is one of `targets`) and its workload the lab's,
/// from `start` on. `None` when the bus would refuse the name.
pub fn disk(
    name: &str,
    spec: &DiskSpec,
    ibal: SharedIbal,
    targets: &[(Lid, SharedAdmission)],
    start: Instant,
) -> Option<SrpClient> {
    let c = &spec.initiator;
    let target = SrpTarget::new(c.target_lid, c.lun_id, spec.load.n_blocks)
        .with_route(spec.route)
        .with_max_blocks(c.max_blocks)
        .with_queue_for(c.slots());
    let target = shared(target, c.target_lid, targets);
    let workload = workload(&spec.load, c.lun_id, c.slots() as usize, start);
    SrpClient::new(name, *c, ibal, target, workload)
}

/// An IPoIB interface as the lab sets it up: the product's interface, and the lab's peer
/// at the far end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpoibSpec {
    pub interface: IpoibConfig,
    /// Packets a second the stack above the interface sends.
    pub pps: u32,
    /// Unicast packets a second the peer sends the interface (multicast: one tenth as many).
    pub peer_pps: u32,
}

impl Default for IpoibSpec {
    fn default() -> Self {
        IpoibSpec {
            interface: IpoibConfig::default(),
            pps: 1_000,
            peer_pps: 500,
        }
    }
}

/// The interface `name` as `spec` sets it up, on the access layer `ibal`, talking to the
/// lab's peer at its `peer_lid`, both sending from `start` on. `None` when the bus would
/// refuse the name.
pub fn ipoib(
    name: &str,
    spec: &IpoibSpec,
    ibal: SharedIbal,
    start: Instant,
) -> Option<IpoibClient> {
    let peer = IpoibPeer::new(spec.interface.peer_lid, spec.peer_pps).starting_at(start);
    let traffic = SteadyTraffic::new(spec.pps).starting_at(start);
    IpoibClient::new(
        name,
        spec.interface,
        ibal,
        Box::new(peer),
        Box::new(traffic),
    )
}

/// The user-verbs provider `name` on the access layer `ibal`, with the lab's process as
/// `spec` sets it up, calling from `start` on. `None` when the bus would refuse the name.
pub fn uverbs(
    name: &str,
    spec: &UverbsSpec,
    ibal: SharedIbal,
    start: Instant,
) -> Option<UverbsClient> {
    let process = SteadyProcess::new(spec).starting_at(start);
    UverbsClient::new(name, ibal, Some(Box::new(process)))
}

/// A client's configuration: what the client takes of the adapter, and the client itself.
pub trait ClientConfig {
    /// What the client takes at its peak, and the key that sizes it (charged when it does
    /// not fit); `None` for a client that uses no verbs (and so needs no access layer).
    fn needs(&self) -> Option<(Needs, Option<&'static str>)>;
    /// The client called `name`; `BadName` when the bus would refuse the name.
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError>;
}

/// Declares [`ClientSpec`], one variant a kind of client, each a name and its configuration.
macro_rules! client_specs {
    ($($(#[$doc:meta])* $variant:ident($config:ty),)*) => {
        /// One client of a stack: its name and what it is built from.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum ClientSpec {
            $($(#[$doc])* $variant { name: String, config: $config },)*
        }

        impl ClientSpec {
            pub fn name(&self) -> &str {
                match self {
                    $(ClientSpec::$variant { name, .. } => name,)*
                }
            }

            /// What builds the client and says what it needs.
            pub fn config(&self) -> &dyn ClientConfig {
                match self {
                    $(ClientSpec::$variant { config, .. } => config,)*
                }
            }
        }
    };
}

client_specs! {
    /// An SRP data LUN or the boot disk, with its workload and target.
    Disk(DiskSpec),
    /// One path of a multipath disk: an initiator on this adapter whose I/O comes from the
    /// disk's queue.
    DiskPath(PathConfig),
    Ipoib(IpoibSpec),
    Uverbs(UverbsSpec),
    /// A scripted client (kind `custom`, or any kind the scenario only scripts).
    Scripted(ScriptedConfig),
}

/// A disk of its own as the lab sets it up: the product's initiator, and the lab's side
/// of it: the workload above it and the route to its target port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskSpec {
    pub initiator: DiskConfig,
    pub load: Load,
    /// How the target port's route behaves: its answers' latency (a congested or long
    /// route), and the phases of a fail-slow trace. What makes a path slow without making
    /// it dead.
    pub route: Route,
}

/// What the workload above a disk does, and the LUN its target serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// I/Os a second (none at 0).
    pub iops: u32,
    /// Percentage of reads, 0..=100.
    pub read_pct: u8,
    /// Blocks of the LUN.
    pub n_blocks: u64,
    /// Large transfers among its I/Os (each disk's buffers are sized for them).
    pub large: LargeIo,
    /// Buckets of the disk's I/O series over time (the timeline's picture of it): a host
    /// of a fleet, whose series nobody draws, keeps fewer.
    pub series_buckets: usize,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            iops: 2_000,
            read_pct: 70,
            n_blocks: 1024,
            large: LargeIo::NONE,
            series_buckets: crate::block::SERIES_BUCKETS,
        }
    }
}

/// Path `path` of the multipath disk `disk` (an index into
/// [`MultiSetup::disks`](super::MultiSetup::disks)), its initiator configured by
/// `initiator`, its target port reached over `route`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathConfig {
    pub initiator: DiskConfig,
    pub route: Route,
    pub disk: usize,
    pub path: usize,
}

/// A scripted client: its kind and flags as it registers, and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptedConfig {
    pub kind: ClientKind,
    pub flags: ClientFlags,
    pub behavior: Behavior,
}

/// A client made under `name`, or `BadName` when the bus would refuse the name.
fn built<C: StackClient + 'static>(
    name: &str,
    client: Option<C>,
) -> Result<Box<dyn StackClient>, BuildError> {
    match client {
        Some(c) => Ok(Box::new(c)),
        None => Err(BuildError::BadName(name.into())),
    }
}

/// Refuses a disk whose buffers cannot take `moves` blocks at once.
pub(super) fn fits(name: &str, moves: u16, config: &DiskConfig) -> Result<(), BuildError> {
    if moves > config.max_blocks.max(1) {
        return Err(BuildError::TooLarge {
            client: name.into(),
            moves,
            takes: config.max_blocks,
        });
    }
    Ok(())
}

/// The key that sizes what a disk needs: what runs out is charged to it. Its queue depth,
/// or with large transfers their size (each slot's buffer takes the largest).
fn disk_sized_by(c: &DiskConfig) -> Option<&'static str> {
    Some(if c.max_blocks > 1 {
        "large_blocks"
    } else {
        "queue_depth"
    })
}

impl ClientConfig for DiskSpec {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((
            budget::disk(&self.initiator),
            disk_sized_by(&self.initiator),
        ))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        fits(name, self.load.large.max_blocks(), &self.initiator)?;
        let client = disk(name, self, on.ibal(name)?, on.targets, on.start);
        built(name, client.map(|c| on.on_fabric(c)))
    }
}

impl ClientConfig for PathConfig {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((
            budget::disk(&self.initiator),
            disk_sized_by(&self.initiator),
        ))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        let disk = on
            .disks
            .get(self.disk)
            .ok_or_else(|| BuildError::NoSuchDisk(name.into()))?;
        let config = &self.initiator;
        fits(name, disk.queue.lock().config().max_blocks, config)?;
        let target = SrpTarget::with_lun(config.target_lid, disk.lun.clone())
            .with_route(self.route)
            .with_max_blocks(config.max_blocks);
        let target = shared(target, config.target_lid, on.targets);
        let (ibal, mp) = (on.ibal(name)?, disk.queue.clone());
        let client = SrpClient::new_path(name, *config, ibal, mp, self.path, target);
        built(name, client.map(|c| on.on_fabric(c)))
    }
}

impl ClientConfig for IpoibSpec {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((budget::ipoib(&self.interface), None))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        let c = ipoib(name, self, on.ibal(name)?, on.start);
        built(
            name,
            c.map(|c| match on.subnet {
                Some(s) => c.with_subnet(std::sync::Arc::new(s.clone())),
                None => c,
            }),
        )
    }
}

impl ClientConfig for UverbsSpec {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((budget::user_verbs(), None))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        built(name, uverbs(name, self, on.ibal(name)?, on.start))
    }
}

impl ClientConfig for ScriptedConfig {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        None
    }
    fn build(&self, name: &str, _: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        let desc = ClientDesc::new(name, self.kind, self.flags);
        built(name, desc.map(|d| ScriptedAgent::new(d, self.behavior)))
    }
}
