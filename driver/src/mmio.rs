//! `MmioHca`: the [`Hca`] trait on a ConnectX-like register map, behind a register-access
//! trait, so the Windows build drives real registers and tests drive a fake register file.
//!
//! The reset follows mlx4 (Linux drivers/net/ethernet/mellanox/mlx4/reset.c): save the first
//! 256 bytes of config space but dwords 22 and 23, take the hardware semaphore, write the
//! reset value, leave the device alone 1 s, poll the vendor id, restore the PCIe Device and
//! Link Control registers, then the header with COMMAND last. Every wait the coordinator owns
//! (the settle, the poll, its bound) is a timer between steps; the only waits inside a step
//! are a few register reads with a fixed bound ([`SEMAPHORE_TRIES`], [`COMMAND_TRIES`],
//! [`INIT_TRIES`]), so no step can spin for long.
//!
//! The register map is this project's ConnectX-like model ([`regs`]): mlx4's reset block and
//! mlx5's initialization segment where those exist, fixed offsets where a real device reports
//! them through commands (the catastrophic buffer's place comes from QUERY_FW on mlx4, the
//! node GUID from QUERY_NODE).

use crate::hca::{HealthSample, HwError, Identity, Readiness};
use crate::time::Duration;
use crate::Hca;

/// How the driver reaches the device: config space (by the bus interface, PASSIVE_LEVEL on
/// Windows) and BAR0 (mapped memory). Offsets are in bytes, dword-aligned.
pub trait RegisterAccess {
    /// A config-space dword; `None` when the bus could not read it (the device is gone).
    fn config_read32(&mut self, offset: u16) -> Option<u32>;
    /// `false` when the bus could not write it.
    fn config_write32(&mut self, offset: u16, value: u32) -> bool;
    fn bar0_read32(&mut self, offset: u32) -> u32;
    fn bar0_write32(&mut self, offset: u32, value: u32);
}

/// The register map.
pub mod regs {
    /// Config space: vendor id (low 16 bits) and device id.
    pub const CFG_ID: u16 = 0x00;
    /// Config space: COMMAND (low 16 bits) and STATUS.
    pub const CFG_COMMAND: u16 = 0x04;
    /// Config space: subsystem vendor id (low 16) and subsystem id.
    pub const CFG_SUBSYSTEM: u16 = 0x2C;
    /// Config space: the first capability's offset (low 8 bits).
    pub const CFG_CAP_PTR: u16 = 0x34;
    /// Capability id of the PCI Express capability.
    pub const CAP_ID_PCIE: u8 = 0x10;
    /// In the PCIe capability: Device Capabilities, Device Control, Link Control.
    pub const PCIE_DEVCAP: u16 = 0x04;
    pub const PCIE_DEVCTL: u16 = 0x08;
    pub const PCIE_LNKCTL: u16 = 0x10;
    /// Device Capabilities: Function Level Reset capable.
    pub const DEVCAP_FLR: u32 = 1 << 28;
    /// Device Control: Initiate Function Level Reset.
    pub const DEVCTL_BCR_FLR: u32 = 1 << 15;
    /// Extended capabilities start here; the Device Serial Number capability's id.
    pub const EXT_CAP_START: u16 = 0x100;
    pub const EXT_CAP_ID_DSN: u16 = 0x0003;
    /// Config dwords mlx4 does not save (and so never restores).
    pub const SKIPPED_DWORDS: [usize; 2] = [22, 23];

    /// BAR0: firmware revision, `minor << 16 | major` (mlx5's fw_rev).
    pub const FW_REV: u32 = 0x0000;
    /// BAR0: `cmdif << 16 | subminor`.
    pub const FW_SUB: u32 = 0x0004;
    /// BAR0: the node GUID, high and low words.
    pub const NODE_GUID_HI: u32 = 0x0010;
    pub const NODE_GUID_LO: u32 = 0x0014;
    /// BAR0: the command register: write `CMD_GO | opcode`; the device clears GO when done
    /// and leaves a status in bits 16..24 (0 is success).
    pub const CMD: u32 = 0x0018;
    pub const CMD_GO: u32 = 1 << 31;
    pub const CMD_INIT_HCA: u32 = 0x0001;
    /// BAR0: bit 31 set while the firmware initialises (mlx5's `initializing`).
    pub const INITIALIZING: u32 = 0x01FC;
    pub const INITIALIZING_BIT: u32 = 1 << 31;
    /// BAR0: the catastrophic-error buffer, four syndrome dwords (non-zero: an error).
    pub const CATAS_BUF: u32 = 0x1000;
    pub const CATAS_WORDS: u32 = 4;
    /// BAR0: the firmware health counter; it advances while the firmware is alive.
    pub const HEALTH_COUNTER: u32 = 0x1010;
    /// BAR0: mlx4's reset block, its reset register and its hardware semaphore.
    pub const RESET_BASE: u32 = 0xF_0000;
    pub const RESET_OFFSET: u32 = 0x10;
    pub const SEMAPHORE_OFFSET: u32 = 0x3FC;
    /// Big-endian 1, as mlx4 writes it.
    pub const RESET_VALUE: u32 = 1u32.swap_bytes();
}

/// Reads of the hardware semaphore before the assert gives up with [`HwError::Timeout`]
/// (mlx4 waits up to 10 s, sleeping; a step may not, so the coordinator's retry is the wait).
pub const SEMAPHORE_TRIES: u32 = 1_000;
/// Reads of the command register before a command counts as timed out.
pub const COMMAND_TRIES: u32 = 1_000;
/// Reads of the initializing bit before `init_command_interface` gives up.
pub const INIT_TRIES: u32 = 1_000;
/// Capabilities a list may hold before the walk stops: a looping list cannot hang it.
const MAX_CAPS: usize = 48;
const MAX_EXT_CAPS: usize = 480;

/// mlx4: "docs say" to wait 1 s after the soft reset before touching the device.
pub const SOFT_RESET_SETTLE: Duration = Duration::from_ms(1_000);
/// PCIe: 100 ms after a function-level reset.
pub const FLR_SETTLE: Duration = Duration::from_ms(100);

/// What save_config keeps.
#[derive(Debug, Clone, Copy)]
struct Saved {
    header: [u32; 64],
    pcie_cap: u16,
    devctl: u32,
    lnkctl: u32,
}

/// A ConnectX-like adapter driven through its registers.
#[derive(Debug)]
pub struct MmioHca<R> {
    regs: R,
    saved: Option<Saved>,
    settle: Duration,
}

impl<R: RegisterAccess> MmioHca<R> {
    pub fn new(regs: R) -> Self {
        MmioHca {
            regs,
            saved: None,
            settle: Duration::ZERO,
        }
    }

    pub fn regs(&self) -> &R {
        &self.regs
    }

    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    fn cfg(&mut self, offset: u16) -> Result<u32, HwError> {
        match self.regs.config_read32(offset) {
            Some(u32::MAX) | None => Err(HwError::Absent),
            Some(v) => Ok(v),
        }
    }

    fn cfg_write(&mut self, offset: u16, value: u32) -> Result<(), HwError> {
        if self.regs.config_write32(offset, value) {
            Ok(())
        } else {
            Err(HwError::DeviceError)
        }
    }

    /// The PCI Express capability's offset, by a bounded walk of the capability list.
    fn pcie_cap(&mut self) -> Result<u16, HwError> {
        let mut at = (self.cfg(regs::CFG_CAP_PTR)? & 0xFC) as u16;
        for _ in 0..MAX_CAPS {
            if at < 0x40 {
                break;
            }
            let header = self.cfg(at)?;
            if (header & 0xFF) as u8 == regs::CAP_ID_PCIE {
                return Ok(at);
            }
            at = ((header >> 8) & 0xFC) as u16;
        }
        Err(HwError::Unsupported)
    }

    /// The Device Serial Number, by a bounded walk of the extended capabilities.
    fn serial(&mut self) -> Result<u64, HwError> {
        let mut at = regs::EXT_CAP_START;
        for _ in 0..MAX_EXT_CAPS {
            let header = self.cfg(at)?;
            if (header & 0xFFFF) as u16 == regs::EXT_CAP_ID_DSN {
                let lo = self.cfg(at + 4)?;
                let hi = self.cfg(at + 8)?;
                return Ok((u64::from(hi) << 32) | u64::from(lo));
            }
            at = ((header >> 20) & 0xFFC) as u16;
            // 0 ends the list; the start, or anything before it, would walk it again.
            if at <= regs::EXT_CAP_START {
                break;
            }
        }
        Ok(0)
    }

    /// Waits, by a bounded number of reads, until `(read & mask) == want`. All-ones means
    /// the device is not decoding at all: no point waiting.
    fn poll_bar(&mut self, offset: u32, mask: u32, want: u32, tries: u32) -> Result<u32, HwError> {
        for _ in 0..tries {
            let v = self.regs.bar0_read32(offset);
            if v == u32::MAX {
                return Err(HwError::Absent);
            }
            if v & mask == want {
                return Ok(v);
            }
        }
        Err(HwError::Timeout)
    }
}

impl<R: RegisterAccess> Hca for MmioHca<R> {
    fn saved_config(&self, out: &mut [u8]) -> usize {
        let Some(saved) = &self.saved else { return 0 };
        let mut n = 0;
        for (word, room) in saved.header.iter().zip(out.chunks_exact_mut(4)) {
            room.copy_from_slice(&word.to_le_bytes());
            n += 4;
        }
        n
    }
    fn save_config(&mut self) -> Result<(), HwError> {
        let mut header = [0u32; 64];
        for (i, word) in header.iter_mut().enumerate() {
            if regs::SKIPPED_DWORDS.contains(&i) {
                continue;
            }
            *word = self.cfg(i as u16 * 4)?;
        }
        // mlx4 refuses to reset a device without a PCIe capability: nothing to restore to.
        let pcie_cap = self.pcie_cap().map_err(|_| HwError::DeviceError)?;
        let devctl = self.cfg(pcie_cap + regs::PCIE_DEVCTL)?;
        let lnkctl = self.cfg(pcie_cap + regs::PCIE_LNKCTL)?;
        self.saved = Some(Saved {
            header,
            pcie_cap,
            devctl,
            lnkctl,
        });
        Ok(())
    }

    fn assert_reset(&mut self) -> Result<(), HwError> {
        // The semaphore keeps a flash update and a reset apart; reading 0 takes it, and the
        // reset itself releases it.
        self.poll_bar(
            regs::RESET_BASE + regs::SEMAPHORE_OFFSET,
            u32::MAX,
            0,
            SEMAPHORE_TRIES,
        )?;
        self.regs
            .bar0_write32(regs::RESET_BASE + regs::RESET_OFFSET, regs::RESET_VALUE);
        self.settle = SOFT_RESET_SETTLE;
        Ok(())
    }

    fn function_level_reset(&mut self) -> Result<(), HwError> {
        let cap = match self.saved {
            Some(s) => s.pcie_cap,
            None => self.pcie_cap()?,
        };
        if self.cfg(cap + regs::PCIE_DEVCAP)? & regs::DEVCAP_FLR == 0 {
            return Err(HwError::Unsupported);
        }
        let devctl = self.cfg(cap + regs::PCIE_DEVCTL)?;
        self.cfg_write(cap + regs::PCIE_DEVCTL, devctl | regs::DEVCTL_BCR_FLR)?;
        self.settle = FLR_SETTLE;
        Ok(())
    }

    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        // Only the vendor id, as mlx4: BAR0 does not decode until COMMAND is restored.
        match self.regs.config_read32(regs::CFG_ID) {
            None => Err(HwError::Absent),
            Some(v) if v & 0xFFFF == 0xFFFF => Ok(Readiness::NotReady),
            Some(_) => Ok(Readiness::Ready),
        }
    }

    fn restore_config(&mut self) -> Result<(), HwError> {
        let saved = self.saved.ok_or(HwError::DeviceError)?;
        let cap = saved.pcie_cap;
        // Device Control without the FLR bit, which only ever reads back as 0.
        let devctl = saved.devctl & 0xFFFF & !regs::DEVCTL_BCR_FLR;
        self.cfg_write(cap + regs::PCIE_DEVCTL, devctl)?;
        self.cfg_write(cap + regs::PCIE_LNKCTL, saved.lnkctl & 0xFFFF)?;
        let command = usize::from(regs::CFG_COMMAND / 4);
        for (i, word) in saved.header.iter().enumerate().take(16) {
            if i != command {
                self.cfg_write(i as u16 * 4, *word)?;
            }
        }
        // COMMAND last: memory decoding and bus mastering only once everything else is back.
        self.cfg_write(regs::CFG_COMMAND, saved.header[command])
    }

    fn init_command_interface(&mut self) -> Result<(), HwError> {
        self.poll_bar(regs::INITIALIZING, regs::INITIALIZING_BIT, 0, INIT_TRIES)?;
        self.regs
            .bar0_write32(regs::CMD, regs::CMD_GO | regs::CMD_INIT_HCA);
        let done = self.poll_bar(regs::CMD, regs::CMD_GO, 0, COMMAND_TRIES)?;
        if (done >> 16) & 0xFF != 0 {
            return Err(HwError::DeviceError);
        }
        Ok(())
    }

    fn identity(&mut self) -> Result<Identity, HwError> {
        let id = self.cfg(regs::CFG_ID)?;
        let subsystem = self.cfg(regs::CFG_SUBSYSTEM)?;
        let serial = self.serial()?;
        let guid_hi = self.regs.bar0_read32(regs::NODE_GUID_HI);
        let guid_lo = self.regs.bar0_read32(regs::NODE_GUID_LO);
        let rev = self.regs.bar0_read32(regs::FW_REV);
        let sub = self.regs.bar0_read32(regs::FW_SUB);
        Ok(Identity {
            node_guid: (u64::from(guid_hi) << 32) | u64::from(guid_lo),
            vendor_id: id as u16,
            device_id: (id >> 16) as u16,
            subsys_vendor_id: subsystem as u16,
            subsys_id: (subsystem >> 16) as u16,
            serial,
            fw_version: Identity::fw_version(rev as u16, (rev >> 16) as u16, sub as u16),
        })
    }

    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        let mut catastrophic = 0;
        let mut all_ones = true;
        for i in 0..regs::CATAS_WORDS {
            let word = self.regs.bar0_read32(regs::CATAS_BUF + 4 * i);
            all_ones &= word == u32::MAX;
            if catastrophic == 0 {
                catastrophic = word;
            }
        }
        let counter = self.regs.bar0_read32(regs::HEALTH_COUNTER);
        // A device that fell off the bus reads all-ones everywhere.
        if all_ones && counter == u32::MAX {
            return Err(HwError::Absent);
        }
        Ok(HealthSample {
            catastrophic,
            counter,
        })
    }

    fn settle_after_reset(&self) -> Duration {
        self.settle
    }
}
