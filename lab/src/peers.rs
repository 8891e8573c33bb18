//! The multipath stacks hcabus is compared with, as they are (docs/peers.md): Linux's SRP
//! initiator under dm-multipath and multipathd, NVMe-oF native multipath, and Windows MPIO
//! with Microsoft's DSM, each with its own defaults and its own way of finding a dead path,
//! run on the same trace as the product: the same routes (the lab target's service time,
//! latency, spikes, pauses, losses and blackholes, drawn by the same functions), the same
//! reliable-connection timers, the same workload (one block at the same steady rate, the
//! same request limit a path) and the same data checked on every read.
//!
//! A peer here is a discrete-event model, not the product with other settings: none of the
//! product's rules (its timeouts, its overtaking rule, its probes, its selector) is in it.
//! What each model simplifies is said where it does; docs/peers.md gives every timer's
//! source.

use hcabus::verbs::RcTransport;
use hcabus::{Duration, Instant};

use crate::block::LatencyHistogram;
use crate::srp_target::Route;
use ibal::io::IoStats;
use ibal::multipath::MAX_PATHS;

mod engine;
mod port;
mod react;
#[cfg(test)]
mod tests;

/// How a peer spreads I/O over the paths it may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// Each path in turn.
    RoundRobin,
    /// dm's `service-time`: the least bytes in flight (every I/O here is one block, so the
    /// fewest in flight); the path chosen goes to the back of the list, so ties take turns.
    ServiceTime,
    /// NVMe's `queue-depth` and MPIO's Least Queue Depth: the fewest in flight, ties to the
    /// first path (both stop at the first idle one).
    LeastQueue,
    /// NVMe's `numa`: the first usable path, kept while it is usable (one NUMA node).
    First,
}

/// A peer: its stack, and the selector it runs (each stack's default in [`Peer::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// ib_srp under dm-multipath and multipathd's `tur` checker.
    DmSrp(Selector),
    /// NVMe-oF over RDMA, native multipath.
    Nvme(Selector),
    /// Windows MPIO with the Microsoft DSM; path verification off (the default).
    Mpio(Selector),
}

impl Peer {
    /// Each stack as it ships: dm's `service-time 0`, NVMe's `numa`, MSDSM's round robin
    /// for an active/active array; and the load-aware policy each also offers.
    pub const ALL: [Peer; 6] = [
        Peer::DmSrp(Selector::ServiceTime),
        Peer::Nvme(Selector::First),
        Peer::Nvme(Selector::LeastQueue),
        Peer::Mpio(Selector::RoundRobin),
        Peer::Mpio(Selector::LeastQueue),
        Peer::DmSrp(Selector::RoundRobin),
    ];

    /// The peer's name in tables.
    pub const fn name(self) -> &'static str {
        match self {
            Peer::DmSrp(Selector::ServiceTime) => "dm-multipath service-time",
            Peer::DmSrp(_) => "dm-multipath round-robin",
            Peer::Nvme(Selector::First) => "NVMe-oF numa",
            Peer::Nvme(Selector::RoundRobin) => "NVMe-oF round-robin",
            Peer::Nvme(_) => "NVMe-oF queue-depth",
            Peer::Mpio(Selector::LeastQueue) => "MPIO least queue depth",
            Peer::Mpio(_) => "MPIO round robin",
        }
    }

    pub const fn selector(self) -> Selector {
        match self {
            Peer::DmSrp(s) | Peer::Nvme(s) | Peer::Mpio(s) => s,
        }
    }
}

/// The timers, each as its stack ships it (docs/peers.md gives file and line).
pub mod timers {
    use hcabus::Duration;

    /// ib_srp `reconnect_delay` (ib_srp.c `srp_reconnect_delay = 10`).
    pub const SRP_RECONNECT_DELAY: Duration = Duration::from_ms(10_000);
    /// ib_srp `fast_io_fail_tmo` (ib_srp.c `srp_fast_io_fail_tmo = 15`); multipathd does not
    /// set it on SRP paths.
    pub const SRP_FAST_IO_FAIL: Duration = Duration::from_ms(15_000);
    /// The disk's SCSI timeout: sd's 30 s (`SD_TIMEOUT`), raised by ib_srp to the transport's
    /// worst case plus a second when that is longer (`srp_compute_rq_tmo`).
    pub const SD_TIMEOUT: Duration = Duration::from_ms(30_000);
    /// ib_srp's wait for a task-management answer (`SRP_ABORT_TIMEOUT_MS`).
    pub const SRP_TMF_WAIT: Duration = Duration::from_ms(5_000);
    /// The mid-layer's delay before it aborts a timed-out command (`HZ/100`).
    pub const SCSI_ABORT_DELAY: Duration = Duration::from_ms(10);
    /// sd's retries of a command (`SD_MAX_RETRIES`).
    pub const SD_RETRIES: u32 = 5;
    /// multipathd `polling_interval` (`DEFAULT_CHECKINT`), and its ceiling, 4 x it.
    pub const POLLING_INTERVAL: Duration = Duration::from_ms(5_000);
    pub const MAX_POLLING_INTERVAL: Duration = Duration::from_ms(20_000);
    /// multipathd polls a pending asynchronous TUR this often.
    pub const PENDING_POLL: Duration = Duration::from_ms(1_000);
    /// NVMe `NVME_DEFAULT_KATO`, and the keep-alive's period, kato / 2.
    pub const KATO: Duration = Duration::from_ms(5_000);
    pub const KEEP_ALIVE_PERIOD: Duration = Duration::from_ms(2_500);
    /// `nvme_core.io_timeout`.
    pub const NVME_IO_TIMEOUT: Duration = Duration::from_ms(30_000);
    /// NVMe-oF `reconnect_delay` (`NVMF_DEF_RECONNECT_DELAY`).
    pub const NVME_RECONNECT_DELAY: Duration = Duration::from_ms(10_000);
    /// NVMe-oF `ctrl_loss_tmo` (`NVMF_DEF_CTRL_LOSS_TMO`).
    pub const CTRL_LOSS_TMO: Duration = Duration::from_ms(600_000);
    /// MPIO `PDORemovePeriod`, and path recovery every 2 x it (custom interval off).
    pub const PDO_REMOVE_PERIOD: Duration = Duration::from_ms(20_000);
    pub const PATH_RECOVERY: Duration = Duration::from_ms(40_000);
    /// MPIO's disk timeout (`DiskTimeoutValue`, per the MPIO cmdlet documentation).
    pub const MPIO_DISK_TIMEOUT: Duration = Duration::from_ms(120_000);
    /// MPIO `RetryCount` and `RetryInterval`.
    pub const MPIO_RETRIES: u32 = 3;
    pub const MPIO_RETRY_INTERVAL: Duration = Duration::from_ms(1_000);
}

/// One run's work: what a trace gives the product, for a peer.
#[derive(Debug, Clone)]
pub struct PeerSetup {
    pub seed: u64,
    pub duration: Duration,
    pub iops: u32,
    pub read_pct: u8,
    pub n_blocks: u64,
    pub lun_id: u32,
    /// Commands one path carries at once (the product's `queue_depth`).
    pub queue_depth: u16,
    /// I/Os the workload keeps owed at once, waiting ones included (the product's disk
    /// capacity: its hold and every path's slots).
    pub max_outstanding: usize,
    /// Large transfers among its I/Os.
    pub large: crate::block::LargeIo,
    /// The reliable connection's timers (the adapter's).
    pub rc: RcTransport,
    /// Each path's route, path 0 first.
    pub routes: Vec<Route>,
}

/// What a peer did with the run.
#[derive(Debug, Clone, Default)]
pub struct PeerRun {
    pub io: IoStats,
    /// Every I/O's wait, each still owed at the end counted at its age.
    pub latencies: LatencyHistogram,
    /// Per path: commands the peer moved off it to another path (failed over).
    pub moved: [u64; MAX_PATHS],
    /// Per path: when the peer first stopped using it or moved a command off it, at or
    /// after each instant it did (the matrix takes the first after a fault's start).
    pub taken_out: [Vec<Instant>; MAX_PATHS],
    /// Checks the peer sent (TURs, keep-alives).
    pub checks: u64,
}

impl PeerRun {
    /// Reads whose data was checked.
    pub fn reads_verified(&self) -> u64 {
        self.io.reads_verified
    }

    /// The first time path `path` was taken out of use at or after `from`.
    pub fn taken_out_after(&self, path: usize, from: Instant) -> Option<Instant> {
        self.taken_out
            .get(path)?
            .iter()
            .copied()
            .find(|t| *t >= from)
    }
}

/// Why a peer's run was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    #[error("a peer's disk has 1 to {MAX_PATHS} paths")]
    Paths,
    #[error("a peer's disk needs a queue depth above 0")]
    QueueDepth,
    #[error("a peer's LUN needs at least one block")]
    Blocks,
}

/// Runs `setup` under `peer`.
pub fn run(peer: Peer, setup: &PeerSetup) -> Result<PeerRun, PeerError> {
    if setup.routes.is_empty() || setup.routes.len() > MAX_PATHS {
        return Err(PeerError::Paths);
    }
    if setup.queue_depth == 0 {
        return Err(PeerError::QueueDepth);
    }
    if setup.n_blocks == 0 {
        return Err(PeerError::Blocks);
    }
    let mut e = engine::Engine::new(peer, setup);
    e.run(Instant::ZERO + setup.duration);
    Ok(e.finish())
}

/// The time an asynchronous check that began at `start` and ended at `end` is noticed:
/// multipathd looks at a pending TUR once a second.
fn noticed(start: Instant, end: Instant) -> Instant {
    let every = timers::PENDING_POLL.as_us();
    let took = end.saturating_since(start).as_us();
    start + Duration::from_us(took.div_ceil(every).max(1) * every)
}
