//! A fake register file behind [`RegisterAccess`]: a ConnectX-like device on virtual time for
//! `MmioHca`'s tests, with the misbehaviours a real one has (a semaphore never released, a
//! device that never comes back, another adapter after the reset, a catastrophic error, a
//! command that never completes).

use std::collections::BTreeMap;
use std::vec::Vec;

use crate::fault::{Fault, CATASTROPHIC_WORD};
use hcabus::hca::Identity;
use hcabus::mmio::{regs, RegisterAccess};
use hcabus::time::{Duration, Instant};

/// What the fake device does wrong, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FakeFaults {
    /// The hardware semaphore always reads taken.
    pub semaphore_stuck: bool,
    /// After a reset the vendor id stays 0xffff for ever.
    pub never_returns: bool,
    /// After a reset the device answers with this node GUID.
    pub guid_after_reset: Option<u64>,
    /// The catastrophic buffer's first syndrome word.
    pub catastrophic: u32,
    /// The command register never clears GO.
    pub command_stuck: bool,
    /// The firmware's health counter stopped (a hang).
    pub health_stalled: bool,
    /// No Function Level Reset capability.
    pub no_flr: bool,
    /// Words 1 to 3 of the catastrophic buffer (word 0 is `catastrophic`): an error may
    /// sit in a later word alone.
    pub syndrome_tail: [u32; 3],
    /// The health counter reads this for ever (all-ones: a counter gone wrong, not a
    /// device gone).
    pub counter_stuck_at: Option<u32>,
    /// Commands complete with this status (0: success).
    pub command_status: u8,
    /// The firmware never leaves its initialising state.
    pub stuck_initializing: bool,
    /// What the extended capability list holds.
    pub ext_caps: ExtCaps,
}

/// The extended capabilities' list, at 0x100: where the Device Serial Number sits in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExtCaps {
    /// The serial number alone (what most adapters show first).
    #[default]
    SerialOnly,
    /// Advanced Error Reporting first, then the serial number.
    ErrorsThenSerial,
    /// Advanced Error Reporting alone: no serial number.
    ErrorsOnly,
    /// Advanced Error Reporting pointing back at itself: a broken list.
    ErrorsLoop,
}

/// Where the fake's second extended capability sits.
const EXT_CAP_SECOND: u16 = 0x148;
/// Extended capability id of Advanced Error Reporting.
const EXT_CAP_ID_AER: u32 = 0x0001;

/// One config write, in order: what a test checks the restore sequence against.
pub type ConfigWrite = (u16, u32);

/// The fake device.
#[derive(Debug, Clone)]
pub struct FakeConnectX {
    config: Vec<u32>,
    bar0: BTreeMap<u32, u32>,
    pub faults: FakeFaults,
    now: Instant,
    /// How long after a reset the device is back (vendor id readable).
    pub back_after: Duration,
    /// When the last reset was asserted; `None` when none is under way.
    reset_at: Option<Instant>,
    /// Accesses of any kind made before the settle after a reset was over.
    pub touched_while_settling: u32,
    settle: Duration,
    pub config_writes: Vec<ConfigWrite>,
    pub resets_asserted: u32,
    pub flrs: u32,
    pub semaphore_reads: u32,
    pub command_reads: u32,
    /// Config reads at or past the extended capabilities (0x100).
    pub ext_reads: u32,
    pub initializing_reads: u32,
}

/// Where the fake's capabilities sit.
const PCIE_CAP: u16 = 0x60;
const PM_CAP: u16 = 0x40;
/// The words of configuration space a driver tunes and a reset returns to their power-on
/// values: COMMAND, and PCI Express Device Control and Link Control.
#[derive(Debug, Clone, Copy)]
struct Controls {
    command: u32,
    devctl: u32,
    lnkctl: u32,
}

impl Controls {
    /// After a reset: no decoding, no bus mastering, the default payload and read request.
    const AT_POWER_ON: Controls = Controls {
        command: 0x0010_0000,
        devctl: 0x0000_2810,
        lnkctl: 0,
    };
    /// As the driver tuned them before the reset (memory decoding and bus mastering, a larger
    /// payload and read request, common clock): what save must keep and restore bring back.
    const TUNED: Controls = Controls {
        command: 0x0010_0006,
        devctl: 0x0000_2937,
        lnkctl: 0x0000_0040,
    };

    fn write_to(self, config: &mut [u32]) {
        config[1] = self.command;
        config[usize::from((PCIE_CAP + regs::PCIE_DEVCTL) / 4)] = self.devctl;
        config[usize::from((PCIE_CAP + regs::PCIE_LNKCTL) / 4)] = self.lnkctl;
    }
}

impl FakeConnectX {
    /// A healthy device with this identity; back 50 ms after a reset.
    pub fn new(identity: Identity) -> Self {
        Self::with_faults(identity, FakeFaults::default())
    }

    /// A device with this identity that misbehaves as `faults` says.
    pub fn with_faults(identity: Identity, faults: FakeFaults) -> Self {
        let mut f = FakeConnectX {
            config: vec![0; 1024],
            bar0: BTreeMap::new(),
            faults,
            now: Instant::ZERO,
            back_after: Duration::from_ms(50),
            reset_at: None,
            touched_while_settling: 0,
            settle: Duration::ZERO,
            // Reserved: recording a reset's writes never allocates (tests count allocations).
            config_writes: Vec::with_capacity(1024),
            resets_asserted: 0,
            flrs: 0,
            semaphore_reads: 0,
            command_reads: 0,
            ext_reads: 0,
            initializing_reads: 0,
        };
        f.power_on(identity);
        f
    }

    fn power_on(&mut self, id: Identity) {
        let c = &mut self.config;
        c[0] = u32::from(id.vendor_id) | (u32::from(id.device_id) << 16);
        c[2] = 0x0207_0000; // network controller, other
        c[4] = 0xF000_000C; // BAR0, 64-bit prefetchable
        c[5] = 0x0000_00FF;
        c[11] = u32::from(id.subsys_vendor_id) | (u32::from(id.subsys_id) << 16);
        c[13] = u32::from(PM_CAP);
        c[15] = 0x0000_01FF;
        // Power management, then PCI Express.
        c[usize::from(PM_CAP / 4)] = 0x01 | (u32::from(PCIE_CAP) << 8);
        c[usize::from(PCIE_CAP / 4)] = u32::from(regs::CAP_ID_PCIE);
        let flr = if self.faults.no_flr {
            0
        } else {
            regs::DEVCAP_FLR
        };
        c[usize::from((PCIE_CAP + regs::PCIE_DEVCAP) / 4)] = flr | 0x8FC0;
        Controls::TUNED.write_to(c);
        // Dwords 22 and 23: vendor-private, changing under the driver's feet.
        c[22] = 0xDEAD_0022;
        c[23] = 0xDEAD_0023;
        self.ext_caps(id.serial);
        let fw = id.fw_version;
        let (major, minor, sub) = (
            (fw >> 32) as u32,
            (fw >> 16) as u32 & 0xFFFF,
            fw as u32 & 0xFFFF,
        );
        self.bar0.insert(regs::FW_REV, major | (minor << 16));
        self.bar0.insert(regs::FW_SUB, sub);
        self.bar0
            .insert(regs::NODE_GUID_HI, (id.node_guid >> 32) as u32);
        self.bar0.insert(regs::NODE_GUID_LO, id.node_guid as u32);
    }

    /// The dword the serial number capability starts at, if the list has one.
    fn dsn_at(&self) -> Option<usize> {
        match self.faults.ext_caps {
            ExtCaps::SerialOnly => Some(usize::from(regs::EXT_CAP_START / 4)),
            ExtCaps::ErrorsThenSerial => Some(usize::from(EXT_CAP_SECOND / 4)),
            ExtCaps::ErrorsOnly | ExtCaps::ErrorsLoop => None,
        }
    }

    /// Lays out the extended capabilities as `faults.ext_caps` says: a header is `id |
    /// version << 16 | next << 20`.
    fn ext_caps(&mut self, serial: u64) {
        let header = |id: u32, next: u16| id | (1 << 16) | (u32::from(next) << 20);
        let first = usize::from(regs::EXT_CAP_START / 4);
        let next = match self.faults.ext_caps {
            ExtCaps::SerialOnly => None,
            ExtCaps::ErrorsThenSerial => Some(EXT_CAP_SECOND),
            ExtCaps::ErrorsOnly => Some(0),
            ExtCaps::ErrorsLoop => Some(regs::EXT_CAP_START),
        };
        if let Some(next) = next {
            self.config[first] = header(EXT_CAP_ID_AER, next);
        }
        if let Some(at) = self.dsn_at() {
            self.config[at] = header(u32::from(regs::EXT_CAP_ID_DSN), 0);
            self.config[at + 1] = serial as u32;
            self.config[at + 2] = (serial >> 32) as u32;
        }
    }

    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// Gives the register file a fault of the run's vocabulary ([`Fault`]): `true` when it
    /// models it (as the registers a driver reads: the catastrophic buffer, the health
    /// counter, the command register, the device after a reset), `false` for what it does not
    /// (a count of failed assertions, removal, the fabric) and for acts, which are not the
    /// device's. The quirks no fault names (a stuck semaphore, no FLR) stay in [`FakeFaults`].
    pub fn inject(&mut self, fault: Fault) -> bool {
        match fault {
            Fault::Catastrophic => self.faults.catastrophic = CATASTROPHIC_WORD,
            Fault::CommandTimeout => self.faults.command_stuck = true,
            Fault::HealthStall => self.faults.health_stalled = true,
            Fault::Hang => {
                self.faults.health_stalled = true;
                self.faults.command_stuck = true;
            }
            Fault::NeverReturns => self.faults.never_returns = true,
            Fault::DeviceReplaced => {
                self.faults.guid_after_reset = Some(self.identity().node_guid ^ 0xFFFF_0000)
            }
            Fault::ResetFails(_)
            | Fault::SurpriseRemoval
            | Fault::PortDown { .. }
            | Fault::TargetBusy(_)
            | Fault::AdminReset
            | Fault::PlannedReset
            | Fault::FwActivate
            | Fault::AdminRestart
            | Fault::ClientRequest { .. } => return false,
        }
        true
    }

    pub fn identity(&self) -> Identity {
        let c = &self.config;
        let word = |at: u32| self.bar0.get(&at).copied().unwrap_or(0);
        let rev = word(regs::FW_REV);
        Identity {
            node_guid: (u64::from(word(regs::NODE_GUID_HI)) << 32)
                | u64::from(word(regs::NODE_GUID_LO)),
            vendor_id: c[0] as u16,
            device_id: (c[0] >> 16) as u16,
            subsys_vendor_id: c[11] as u16,
            subsys_id: (c[11] >> 16) as u16,
            serial: self
                .dsn_at()
                .map_or(0, |at| (u64::from(c[at + 2]) << 32) | u64::from(c[at + 1])),
            fw_version: Identity::fw_version(
                rev as u16,
                (rev >> 16) as u16,
                word(regs::FW_SUB) as u16,
            ),
        }
    }

    /// The config dword at `index` as the device holds it now.
    pub fn config_word(&self, index: usize) -> u32 {
        self.config[index]
    }

    /// Whether the device is still in reset (reads all-ones).
    fn in_reset(&mut self) -> bool {
        let Some(at) = self.reset_at else {
            return false;
        };
        if self.now < at + self.settle {
            self.touched_while_settling += 1;
        }
        if self.faults.never_returns || self.now < at + self.back_after {
            return true;
        }
        self.come_back();
        false
    }

    /// The reset is over: the device is at its power-on state, as a driver finds it, with
    /// its error state cleared.
    fn come_back(&mut self) {
        self.reset_at = None;
        self.faults.catastrophic = 0;
        self.faults.health_stalled = false;
        let mut id = self.identity();
        if let Some(guid) = self.faults.guid_after_reset {
            id.node_guid = guid;
        }
        let private = (self.config[22], self.config[23]);
        self.config.iter_mut().for_each(|w| *w = 0);
        self.power_on(id);
        Controls::AT_POWER_ON.write_to(&mut self.config);
        self.config[4] = 0x0000_000C;
        self.config[5] = 0;
        (self.config[22], self.config[23]) = private;
    }

    fn assert_reset(&mut self, settle: Duration) {
        self.reset_at = Some(self.now);
        self.settle = settle;
    }
}

impl RegisterAccess for FakeConnectX {
    fn config_read32(&mut self, offset: u16) -> Option<u32> {
        if self.in_reset() {
            return Some(u32::MAX);
        }
        if offset >= regs::EXT_CAP_START {
            self.ext_reads += 1;
        }
        self.config.get(usize::from(offset / 4)).copied()
    }

    fn config_write32(&mut self, offset: u16, value: u32) -> bool {
        if self.in_reset() {
            return true;
        }
        let index = usize::from(offset / 4);
        if index >= self.config.len() {
            return false;
        }
        self.config_writes.push((offset, value));
        let devctl = usize::from((PCIE_CAP + regs::PCIE_DEVCTL) / 4);
        if index == devctl && value & regs::DEVCTL_BCR_FLR != 0 {
            self.flrs += 1;
            self.assert_reset(hcabus::mmio::FLR_SETTLE);
            return true;
        }
        // Vendor and device ids are read-only.
        if index != 0 {
            self.config[index] = value;
        }
        true
    }

    fn bar0_read32(&mut self, offset: u32) -> u32 {
        // BAR0 decodes only with memory space enabled in COMMAND.
        if self.in_reset() || self.config[1] & 0x2 == 0 {
            return u32::MAX;
        }
        match offset {
            o if o == regs::RESET_BASE + regs::SEMAPHORE_OFFSET => {
                self.semaphore_reads += 1;
                u32::from(self.faults.semaphore_stuck)
            }
            regs::CMD => {
                self.command_reads += 1;
                let v = self.bar0.get(&offset).copied().unwrap_or(0);
                if self.faults.command_stuck {
                    v
                } else {
                    v & !regs::CMD_GO | u32::from(self.faults.command_status) << 16
                }
            }
            regs::INITIALIZING => {
                self.initializing_reads += 1;
                if self.faults.stuck_initializing {
                    regs::INITIALIZING_BIT
                } else {
                    0
                }
            }
            o if o == regs::CATAS_BUF => self.faults.catastrophic,
            o if (regs::CATAS_BUF + 4..regs::CATAS_BUF + 4 * regs::CATAS_WORDS).contains(&o) => {
                self.faults.syndrome_tail[((o - regs::CATAS_BUF) / 4 - 1) as usize]
            }
            regs::HEALTH_COUNTER => match self.faults.counter_stuck_at {
                Some(stuck) => stuck,
                None if self.faults.health_stalled => 0x5_7A11,
                None => (self.now.as_us() / 100_000) as u32,
            },
            _ => self.bar0.get(&offset).copied().unwrap_or(0),
        }
    }

    fn bar0_write32(&mut self, offset: u32, value: u32) {
        if self.in_reset() || self.config[1] & 0x2 == 0 {
            return;
        }
        if offset == regs::RESET_BASE + regs::RESET_OFFSET && value == regs::RESET_VALUE {
            self.resets_asserted += 1;
            self.assert_reset(hcabus::mmio::SOFT_RESET_SETTLE);
            return;
        }
        self.bar0.insert(offset, value);
    }
}
