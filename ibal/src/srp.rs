//! SRP's information units as the initiator and a target exchange them (SRP_CMD, SRP_TSK_MGMT
//! with ABORT TASK, SRP_RSP), reduced to the fields this stack moves, and their encoding in
//! an information unit buffer. The initiator's wire: product code, which the lab's simulated
//! target (`hcabus_lab::srp_target`) speaks too.

/// Bytes of one information unit buffer.
pub const IU_SIZE: usize = 64;

const IU_TSK_MGMT: u8 = 0x01;
const IU_CMD: u8 = 0x02;
const IU_RSP: u8 = 0xC1;
/// SRP's task management function ABORT TASK.
const TSK_ABORT_TASK: u8 = 0x01;

/// SRP_CMD, reduced to what the model moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrpCmd {
    pub tag: u64,
    pub write: bool,
    pub lba: u64,
    /// The initiator's data buffer, reachable through `rkey`.
    pub addr: u64,
    pub rkey: u32,
    pub len: u32,
    /// Checksum of the data a write carries (the target verifies it).
    pub checksum: u64,
}

/// Status of a command at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SrpStatus {
    Good = 0,
    /// The data the target read did not match the command's checksum.
    DataMismatch = 1,
    LbaOutOfRange = 2,
    /// The target could not move the data (remote access error on the initiator's key).
    TransferFailed = 3,
    /// The answer to an ABORT TASK: the command was found and will never run.
    TaskAborted = 4,
    /// The answer to an ABORT TASK: no such command (it ran, and answered, before).
    TaskNotFound = 5,
}

impl SrpStatus {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => SrpStatus::Good,
            1 => SrpStatus::DataMismatch,
            2 => SrpStatus::LbaOutOfRange,
            3 => SrpStatus::TransferFailed,
            4 => SrpStatus::TaskAborted,
            5 => SrpStatus::TaskNotFound,
            _ => return None,
        })
    }
}

impl SrpStatus {
    /// Whether this answers an ABORT TASK rather than a command.
    pub fn answers_abort(self) -> bool {
        matches!(self, SrpStatus::TaskAborted | SrpStatus::TaskNotFound)
    }
}

/// SRP_TSK_MGMT with the function ABORT TASK: drop the command tagged `task_tag`. Its
/// answer is an [`SrpRsp`] carrying `task_tag` and [`SrpStatus::TaskAborted`] or
/// [`SrpStatus::TaskNotFound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrpTskMgmt {
    pub task_tag: u64,
}

/// SRP_RSP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrpRsp {
    pub tag: u64,
    pub status: SrpStatus,
    /// Checksum of the data a read delivered.
    pub checksum: u64,
}

fn put(buf: &mut [u8], at: usize, v: &[u8]) {
    buf[at..at + v.len()].copy_from_slice(v);
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

impl SrpCmd {
    pub const LEN: usize = 48;

    pub fn encode(&self, buf: &mut [u8; IU_SIZE]) -> usize {
        buf[0] = IU_CMD;
        buf[1] = u8::from(self.write);
        put(buf, 8, &self.tag.to_le_bytes());
        put(buf, 16, &self.lba.to_le_bytes());
        put(buf, 24, &self.addr.to_le_bytes());
        put(buf, 32, &self.rkey.to_le_bytes());
        put(buf, 36, &self.len.to_le_bytes());
        put(buf, 40, &self.checksum.to_le_bytes());
        Self::LEN
    }

    /// `None` for anything that is not a well-formed SRP_CMD.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < Self::LEN || buf[0] != IU_CMD || buf[1] > 1 {
            return None;
        }
        Some(SrpCmd {
            write: buf[1] == 1,
            tag: u64_at(buf, 8)?,
            lba: u64_at(buf, 16)?,
            addr: u64_at(buf, 24)?,
            rkey: u32_at(buf, 32)?,
            len: u32_at(buf, 36)?,
            checksum: u64_at(buf, 40)?,
        })
    }
}

impl SrpTskMgmt {
    pub const LEN: usize = 16;

    pub fn encode(&self, buf: &mut [u8; IU_SIZE]) -> usize {
        buf[0] = IU_TSK_MGMT;
        buf[1] = TSK_ABORT_TASK;
        put(buf, 8, &self.task_tag.to_le_bytes());
        Self::LEN
    }

    /// `None` for anything that is not a well-formed ABORT TASK.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < Self::LEN || buf[0] != IU_TSK_MGMT || buf[1] != TSK_ABORT_TASK {
            return None;
        }
        Some(SrpTskMgmt {
            task_tag: u64_at(buf, 8)?,
        })
    }
}

impl SrpRsp {
    pub const LEN: usize = 24;

    pub fn encode(&self, buf: &mut [u8; IU_SIZE]) -> usize {
        buf[0] = IU_RSP;
        buf[1] = self.status as u8;
        put(buf, 8, &self.tag.to_le_bytes());
        put(buf, 16, &self.checksum.to_le_bytes());
        Self::LEN
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < Self::LEN || buf[0] != IU_RSP {
            return None;
        }
        Some(SrpRsp {
            status: SrpStatus::from_u8(buf[1])?,
            tag: u64_at(buf, 8)?,
            checksum: u64_at(buf, 16)?,
        })
    }
}
