//! The hardware as the coordinator needs it, and the health monitor.
//!
//! The coordinator never touches the device: it emits [`HwStep`]s, a host runs each on its
//! [`Hca`] with [`execute`] and hands back the [`HwCompletion`]. That keeps the core sans-IO
//! and lets the same sequence drive `SimHca`, a fake in a unit test, or real registers.

use crate::time::Duration;

/// What identifies one physical adapter across a reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    pub node_guid: u64,
    pub vendor_id: u16,
    pub device_id: u16,
    pub subsys_vendor_id: u16,
    pub subsys_id: u16,
    /// PCIe Device Serial Number.
    pub serial: u64,
    /// major << 32 | minor << 16 | subminor.
    pub fw_version: u64,
}

impl Identity {
    /// Same adapter, ignoring the firmware version.
    pub fn same_adapter(&self, other: &Identity) -> bool {
        self.node_guid == other.node_guid
            && self.vendor_id == other.vendor_id
            && self.device_id == other.device_id
            && self.subsys_vendor_id == other.subsys_vendor_id
            && self.subsys_id == other.subsys_id
            && self.serial == other.serial
    }

    pub const fn fw_version(major: u16, minor: u16, subminor: u16) -> u64 {
        ((major as u64) << 32) | ((minor as u64) << 16) | subminor as u64
    }
}

/// A hardware operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HwError {
    /// The device answered with an error or all-ones.
    #[error("device error")]
    DeviceError,
    /// The device is not on the bus.
    #[error("device absent")]
    Absent,
    /// The operation is not available on this device.
    #[error("not supported")]
    Unsupported,
    /// A bounded wait inside one step ran out (a semaphore never free, a command never done).
    #[error("bounded wait ran out")]
    Timeout,
}

/// Result of a readiness probe after reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Vendor id readable and firmware ready.
    Ready,
    /// Still in reset (config reads return all-ones, or firmware not yet up).
    NotReady,
}

/// One sample of the health buffer and counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HealthSample {
    /// Non-zero when the firmware reports a catastrophic error.
    pub catastrophic: u32,
    /// Advances while the firmware is alive.
    pub counter: u32,
}

/// The hardware interface. Every method is short and non-blocking: waiting is the
/// coordinator's business, done with timers between probes.
pub trait Hca {
    fn save_config(&mut self) -> Result<(), HwError>;
    fn restore_config(&mut self) -> Result<(), HwError>;
    /// Start a device reset (the vendor's soft reset).
    fn assert_reset(&mut self) -> Result<(), HwError>;
    /// PCIe function-level reset, the stronger remedy after soft resets failed.
    fn function_level_reset(&mut self) -> Result<(), HwError>;
    fn probe_ready(&mut self) -> Result<Readiness, HwError>;
    fn init_command_interface(&mut self) -> Result<(), HwError>;
    fn identity(&mut self) -> Result<Identity, HwError>;
    fn read_health(&mut self) -> Result<HealthSample, HwError>;
    /// How long the device must be left alone after the last assert (or FLR) before the
    /// first readiness probe: mlx4 waits 1 s after its soft reset, PCIe 100 ms after an FLR.
    /// The coordinator waits it with a timer; the bounded poll starts after it.
    fn settle_after_reset(&self) -> Duration {
        Duration::ZERO
    }
    /// The config space the last `save_config` kept, as its bytes (little-endian, from
    /// offset 0), into `out`: how many. 0 when none is kept (the default).
    fn saved_config(&self, out: &mut [u8]) -> usize {
        let _ = out;
        0
    }
}

/// A boxed adapter is an adapter: the threaded host keeps any `Hca` behind one type.
impl<H: Hca + ?Sized> Hca for alloc::boxed::Box<H> {
    fn save_config(&mut self) -> Result<(), HwError> {
        (**self).save_config()
    }
    fn restore_config(&mut self) -> Result<(), HwError> {
        (**self).restore_config()
    }
    fn assert_reset(&mut self) -> Result<(), HwError> {
        (**self).assert_reset()
    }
    fn function_level_reset(&mut self) -> Result<(), HwError> {
        (**self).function_level_reset()
    }
    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        (**self).probe_ready()
    }
    fn init_command_interface(&mut self) -> Result<(), HwError> {
        (**self).init_command_interface()
    }
    fn identity(&mut self) -> Result<Identity, HwError> {
        (**self).identity()
    }
    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        (**self).read_health()
    }
    fn settle_after_reset(&self) -> Duration {
        (**self).settle_after_reset()
    }
    fn saved_config(&self, out: &mut [u8]) -> usize {
        (**self).saved_config(out)
    }
}

wire_enum! {
    /// A hardware operation the coordinator asks its host to perform.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum HwStep {
        SaveConfig = 1 => "save_config",
        AssertReset = 2 => "assert_reset",
        FunctionLevelReset = 3 => "function_level_reset",
        ProbeReady = 4 => "probe_ready",
        RestoreConfig = 5 => "restore_config",
        InitCommandInterface = 6 => "init_command_interface",
        ReadIdentity = 7 => "read_identity",
        ReadHealth = 8 => "read_health",
    }
}

/// What came back from a [`HwStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HwResult {
    Done,
    /// Asserted; leave the device alone this long before probing it.
    Settle(Duration),
    Readiness(Readiness),
    Identity(Identity),
    Health(HealthSample),
    Failed(HwError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwCompletion {
    pub step: HwStep,
    pub result: HwResult,
}

/// After a step: the config space a completed `save_config` kept, into `out` (how many
/// bytes); 0 after any other step. Every host hands it to [`Coordinator::config_saved`],
/// which the diagnostic bundle carries.
///
/// [`Coordinator::config_saved`]: crate::Coordinator::config_saved
pub fn saved_config_after<H: Hca + ?Sized>(hca: &H, done: &HwCompletion, out: &mut [u8]) -> usize {
    match (done.step, done.result) {
        (HwStep::SaveConfig, HwResult::Done) => hca.saved_config(out).min(out.len()),
        _ => 0,
    }
}

/// Runs one step on a device. Every host (simulator, threaded host, KMDF glue) uses this, so
/// the mapping from step to hardware call exists once.
pub fn execute<H: Hca + ?Sized>(hca: &mut H, step: HwStep) -> HwCompletion {
    fn done(r: Result<(), HwError>) -> HwResult {
        match r {
            Ok(()) => HwResult::Done,
            Err(e) => HwResult::Failed(e),
        }
    }
    fn asserted<H: Hca + ?Sized>(hca: &H, r: Result<(), HwError>) -> HwResult {
        match (r, hca.settle_after_reset()) {
            (Ok(()), Duration::ZERO) => HwResult::Done,
            (Ok(()), settle) => HwResult::Settle(settle),
            (Err(e), _) => HwResult::Failed(e),
        }
    }
    let result = match step {
        HwStep::SaveConfig => done(hca.save_config()),
        HwStep::AssertReset => {
            let r = hca.assert_reset();
            asserted(hca, r)
        }
        HwStep::FunctionLevelReset => {
            let r = hca.function_level_reset();
            asserted(hca, r)
        }
        HwStep::RestoreConfig => done(hca.restore_config()),
        HwStep::InitCommandInterface => done(hca.init_command_interface()),
        HwStep::ProbeReady => match hca.probe_ready() {
            Ok(r) => HwResult::Readiness(r),
            Err(e) => HwResult::Failed(e),
        },
        HwStep::ReadIdentity => match hca.identity() {
            Ok(id) => HwResult::Identity(id),
            Err(e) => HwResult::Failed(e),
        },
        HwStep::ReadHealth => match hca.read_health() {
            Ok(s) => HwResult::Health(s),
            Err(e) => HwResult::Failed(e),
        },
    };
    HwCompletion { step, result }
}
