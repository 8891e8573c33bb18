//! What a stack's clients are built from. Each client's configuration builds the client and
//! says what it takes of the adapter ([`ClientConfig`]); [`ClientSpec`] is one line per kind
//! of client, so that a new kind is its own module and one line here (docs/protocol.md,
//! "where a change belongs").

use std::boxed::Box;
use std::string::String;

use hcabus::types::{ClientDesc, ClientFlags, ClientKind};
use hcabus_sim::{Behavior, ScriptedAgent};

use super::{BuildError, StackClient};
use crate::block::{BlockWorkload, WorkloadConfig};
use crate::budget::{self, Needs};
use crate::disk::{DiskConfig, SrpClient};
use crate::ibal_client::SharedIbal;
use crate::ipoib::{IpoibClient, IpoibConfig};
use crate::multipath::SharedMultipath;
use crate::srp_target::{Lun, SharedAdmission, SrpTarget};
use crate::target::Target;
use crate::uverbs::{UverbsClient, UverbsConfig};
use crate::workload::Workload;
use hcabus::verbs::Lid;

/// What a client is built on: the stack's access layer and its multipath disks.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    pub ibal: &'a SharedIbal,
    pub disks: &'a [LabDisk],
    /// The login capacity of targets other hosts share, by the target's LID.
    pub targets: &'a [(Lid, SharedAdmission)],
    /// A fleet's subnet manager and SA, which IPoIB joins its groups through.
    pub subnet: Option<&'a crate::subnet::SharedSubnet>,
}

/// A multipath disk as the lab builds it: the queue above its paths, and the LUN every
/// path's target port serves.
#[derive(Debug, Clone)]
pub struct LabDisk {
    pub queue: SharedMultipath,
    pub lun: Lun,
}

/// The workload a disk configured by `config` carries, with at most `max_outstanding`
/// I/Os owed at once.
pub fn workload(config: &DiskConfig, max_outstanding: usize) -> Box<dyn Workload> {
    Box::new(BlockWorkload::new(WorkloadConfig {
        iops: config.iops,
        read_pct: config.read_pct.min(100),
        lun_id: config.lun_id,
        n_blocks: config.n_blocks,
        max_outstanding,
    }))
}

/// `target` with the login capacity it shares with other hosts, when it is one of
/// `targets` (by LID).
fn shared(mut target: SrpTarget, lid: Lid, targets: &[(Lid, SharedAdmission)]) -> Box<dyn Target> {
    if let Some((_, a)) = targets.iter().find(|(l, _)| *l == lid) {
        target.set_admission(a.clone());
    }
    Box::new(target)
}

/// The disk `name` as `config` sets it up, on the access layer `ibal`: its target port
/// (sharing its login capacity when it is one of `targets`) and its workload the lab's.
/// `None` when the bus would refuse the name.
pub fn disk(
    name: &str,
    config: &DiskConfig,
    ibal: SharedIbal,
    targets: &[(Lid, SharedAdmission)],
) -> Option<SrpClient> {
    let target =
        SrpTarget::new(config.target_lid, config.lun_id, config.n_blocks).with_route(config.route);
    let target = shared(target, config.target_lid, targets);
    let workload = workload(config, config.slots() as usize);
    SrpClient::new(name, *config, ibal, target, workload)
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
    Disk(DiskConfig),
    /// One path of a multipath disk: an initiator on this adapter whose I/O comes from the
    /// disk's queue.
    DiskPath(PathConfig),
    Ipoib(IpoibConfig),
    Uverbs(UverbsConfig),
    /// A scripted client (kind `custom`, or any kind the scenario only scripts).
    Scripted(ScriptedConfig),
}

/// Path `path` of the multipath disk `disk` (an index into
/// [`MultiSetup::disks`](super::MultiSetup::disks)), its initiator configured by `initiator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathConfig {
    pub initiator: DiskConfig,
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

/// The key a disk's queue depth sizes: what runs out is charged to it.
const DISK_SIZED_BY: Option<&str> = Some("queue_depth");

impl ClientConfig for DiskConfig {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((budget::disk(self), DISK_SIZED_BY))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        built(name, disk(name, self, on.ibal.clone(), on.targets))
    }
}

impl ClientConfig for PathConfig {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((budget::disk(&self.initiator), DISK_SIZED_BY))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        let disk = on
            .disks
            .get(self.disk)
            .ok_or_else(|| BuildError::NoSuchDisk(name.into()))?;
        let config = &self.initiator;
        let target =
            SrpTarget::with_lun(config.target_lid, disk.lun.clone()).with_route(config.route);
        let target = shared(target, config.target_lid, on.targets);
        let (ibal, mp) = (on.ibal.clone(), disk.queue.clone());
        built(
            name,
            SrpClient::new_path(name, *config, ibal, mp, self.path, target),
        )
    }
}

impl ClientConfig for IpoibConfig {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((budget::ipoib(self), None))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        let c = IpoibClient::new(name, *self, on.ibal.clone());
        built(
            name,
            c.map(|c| match on.subnet {
                Some(s) => c.with_subnet(std::sync::Arc::new(s.clone())),
                None => c,
            }),
        )
    }
}

impl ClientConfig for UverbsConfig {
    fn needs(&self) -> Option<(Needs, Option<&'static str>)> {
        Some((budget::user_verbs(), None))
    }
    fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
        let c = UverbsClient::new(name, *self, on.ibal.clone());
        built(name, c)
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
