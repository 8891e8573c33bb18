//! `SimHca`: a ConnectX-like device in virtual time with injectable faults.

use crate::hca::{Hca, HealthSample, HwError, Identity, Readiness};
use crate::time::{Duration, Instant};

/// What the simulated adapter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimHcaConfig {
    pub identity: Identity,
    pub ports: u8,
    /// Time the device takes to come back after a reset is asserted.
    pub hw_reset: Duration,
}

impl Default for SimHcaConfig {
    fn default() -> Self {
        SimHcaConfig {
            identity: Identity {
                node_guid: 0x0002_c903_0010_f5e0,
                vendor_id: 0x15b3, // Mellanox
                device_id: 0x1003, // ConnectX-3
                subsys_vendor_id: 0x15b3,
                subsys_id: 0x0050,
                serial: 0x5a5a_0000_1234_0001,
                fw_version: Identity::fw_version(2, 42, 5000),
            },
            ports: 2,
            hw_reset: Duration::from_ms(200),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    InReset { ready_at: Instant },
    Removed,
}

/// Counts of what was done to the device, for tests and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimHcaStats {
    pub soft_resets: u32,
    pub function_level_resets: u32,
    pub failed_resets: u32,
    pub probes: u32,
    pub config_saves: u32,
    pub config_restores: u32,
}

/// The simulated adapter. Time is handed in by the host with [`SimHca::set_now`].
#[derive(Debug, Clone)]
pub struct SimHca {
    now: Instant,
    config: SimHcaConfig,
    identity: Identity,
    phase: Phase,
    catastrophic: u32,
    /// Counter value frozen by a stall, if stalled.
    stalled_at: Option<u32>,
    reset_failures_left: u32,
    never_returns: bool,
    replace_with: Option<Identity>,
    staged_fw: Option<u64>,
    config_saved: bool,
    cmd_ready: bool,
    stats: SimHcaStats,
}

impl SimHca {
    pub fn new(config: SimHcaConfig) -> Self {
        SimHca {
            now: Instant::ZERO,
            config,
            identity: config.identity,
            phase: Phase::Running,
            catastrophic: 0,
            stalled_at: None,
            reset_failures_left: 0,
            never_returns: false,
            replace_with: None,
            staged_fw: None,
            config_saved: false,
            cmd_ready: true,
            stats: SimHcaStats::default(),
        }
    }

    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    pub fn config(&self) -> &SimHcaConfig {
        &self.config
    }

    pub fn stats(&self) -> &SimHcaStats {
        &self.stats
    }

    /// The identity the device presents now.
    pub fn current_identity(&self) -> Identity {
        self.identity
    }

    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    pub fn is_removed(&self) -> bool {
        self.phase == Phase::Removed
    }

    // ----- fault injection -----

    /// Firmware writes a catastrophic error into the health buffer.
    pub fn inject_catastrophic(&mut self, syndrome: u32) {
        self.catastrophic = syndrome.max(1);
    }

    /// The firmware health counter stops advancing.
    pub fn stall_health(&mut self) {
        if self.stalled_at.is_none() {
            self.stalled_at = Some(self.counter());
        }
    }

    /// The next `count` reset assertions (soft or FLR) fail.
    pub fn fail_next_resets(&mut self, count: u32) {
        self.reset_failures_left = self.reset_failures_left.saturating_add(count);
    }

    /// After the next reset the device never becomes ready again.
    pub fn never_return(&mut self) {
        self.never_returns = true;
    }

    /// After the next reset another adapter answers (another node GUID and serial).
    pub fn replace_on_next_reset(&mut self) {
        let mut other = self.identity;
        other.node_guid ^= 0x0000_0000_00ff_ff00;
        other.serial = other.serial.wrapping_add(0x100);
        self.replace_with = Some(other);
    }

    /// After the next reset the device runs `fw_version`.
    pub fn stage_firmware(&mut self, fw_version: u64) {
        self.staged_fw = Some(fw_version);
    }

    /// The device leaves the bus.
    pub fn remove(&mut self) {
        self.phase = Phase::Removed;
    }

    fn counter(&self) -> u32 {
        // Advances every millisecond while the firmware runs.
        self.stalled_at
            .unwrap_or((self.now.as_ms() & u64::from(u32::MAX)) as u32)
    }

    fn start_reset(&mut self) -> Result<(), HwError> {
        if self.phase == Phase::Removed {
            return Err(HwError::Absent);
        }
        if self.reset_failures_left > 0 {
            self.reset_failures_left -= 1;
            self.stats.failed_resets += 1;
            return Err(HwError::DeviceError);
        }
        // The device forgets everything: errors, stalls, command interface.
        self.catastrophic = 0;
        self.stalled_at = None;
        self.cmd_ready = false;
        if let Some(other) = self.replace_with.take() {
            self.identity = other;
        }
        if let Some(fw) = self.staged_fw.take() {
            self.identity.fw_version = fw;
        }
        self.phase = Phase::InReset {
            ready_at: self.now + self.config.hw_reset,
        };
        Ok(())
    }

    fn running(&self) -> Result<(), HwError> {
        match self.phase {
            Phase::Running => Ok(()),
            Phase::InReset { .. } => Err(HwError::DeviceError),
            Phase::Removed => Err(HwError::Absent),
        }
    }
}

impl Hca for SimHca {
    fn save_config(&mut self) -> Result<(), HwError> {
        if self.phase == Phase::Removed {
            return Err(HwError::Absent);
        }
        self.config_saved = true;
        self.stats.config_saves += 1;
        Ok(())
    }

    fn restore_config(&mut self) -> Result<(), HwError> {
        self.running()?;
        if !self.config_saved {
            return Err(HwError::DeviceError);
        }
        self.stats.config_restores += 1;
        Ok(())
    }

    fn assert_reset(&mut self) -> Result<(), HwError> {
        self.stats.soft_resets += 1;
        self.start_reset()
    }

    fn function_level_reset(&mut self) -> Result<(), HwError> {
        self.stats.function_level_resets += 1;
        self.start_reset()
    }

    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        self.stats.probes += 1;
        match self.phase {
            Phase::Removed => Err(HwError::Absent),
            Phase::Running => Ok(Readiness::Ready),
            Phase::InReset { ready_at } => {
                if self.never_returns || self.now < ready_at {
                    Ok(Readiness::NotReady)
                } else {
                    self.phase = Phase::Running;
                    Ok(Readiness::Ready)
                }
            }
        }
    }

    fn init_command_interface(&mut self) -> Result<(), HwError> {
        self.running()?;
        self.cmd_ready = true;
        Ok(())
    }

    fn identity(&mut self) -> Result<Identity, HwError> {
        self.running()?;
        Ok(self.identity)
    }

    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        self.running()?;
        Ok(HealthSample {
            catastrophic: self.catastrophic,
            counter: self.counter(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comes_back_after_its_reset_time() {
        let mut h = SimHca::new(SimHcaConfig::default());
        h.set_now(Instant::from_ms(10));
        h.assert_reset().expect("reset");
        assert_eq!(h.probe_ready(), Ok(Readiness::NotReady));
        assert!(h.identity().is_err(), "no identity while in reset");
        h.set_now(Instant::from_ms(210));
        assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
        assert!(h.identity().is_ok());
    }

    #[test]
    fn faults_behave_as_named() {
        let mut h = SimHca::new(SimHcaConfig::default());
        let before = h.current_identity();
        h.fail_next_resets(1);
        assert_eq!(h.assert_reset(), Err(HwError::DeviceError));
        h.replace_on_next_reset();
        h.stage_firmware(7);
        h.assert_reset().expect("second reset works");
        h.set_now(Instant::from_ms(1000));
        assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
        let after = h.identity().expect("running");
        assert!(!before.same_adapter(&after));
        assert_eq!(after.fw_version, 7);

        h.stall_health();
        let a = h.read_health().expect("running").counter;
        h.set_now(Instant::from_ms(5000));
        assert_eq!(h.read_health().expect("running").counter, a);

        h.never_return();
        h.assert_reset().expect("reset");
        h.set_now(Instant::from_ms(60_000));
        assert_eq!(h.probe_ready(), Ok(Readiness::NotReady));
        h.remove();
        assert_eq!(h.probe_ready(), Err(HwError::Absent));
    }

    #[test]
    fn catastrophic_error_shows_in_health_and_clears_on_reset() {
        let mut h = SimHca::new(SimHcaConfig::default());
        h.inject_catastrophic(0xbad);
        assert_eq!(h.read_health().expect("running").catastrophic, 0xbad);
        h.assert_reset().expect("reset");
        h.set_now(Instant::from_ms(500));
        h.probe_ready().expect("probe");
        assert_eq!(h.read_health().expect("running").catastrophic, 0);
    }
}
