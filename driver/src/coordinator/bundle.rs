//! The diagnostic bundle: what support needs to understand a failed recovery, frozen when the
//! device ends Failed (and taken on demand), so that the resets after it do not overwrite it.
//! Its room is reserved at start and it is written in place: no allocation on the way to
//! Failed.
//!
//! Layout (little-endian; docs/ioctl.md, READ_BUNDLE): a [`BundleHeader`] of 392 bytes (what
//! was taken and why, the adapter's identity, the health watch, the config space when the
//! host gave it), then the policy's values (`policy_keys` × u64, in `Policy::KEYS` order),
//! then the clients registered (`client_count` LIST_CLIENTS entries, in registration order:
//! what `hcasim replay` needs to rebuild the host), then the last `record_count` flight
//! records, oldest first, each `record_bytes` long (the READ_LOG record).

use alloc::vec::Vec;
use core::mem::size_of;

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::Coordinator;
use crate::client_entry::ClientEntry;
use crate::policy::Policy;
use crate::recorder::{Record, RECORD_BYTES};
use crate::reserve::{OutOfMemory, Reserve};
use crate::time::Instant;
use crate::types::{FailReason, ResetReason, State};
use crate::wire::WireByte;

/// The bundle's first bytes.
pub const BUNDLE_MAGIC: [u8; 8] = *b"HCABNDL\0";
/// The layout's version: 2 added the client table (format 1, read still, has none).
pub const BUNDLE_FORMAT: u16 = 2;
/// The most records a bundle keeps: the last resets' worth (a reset is 30 to 60 records).
pub const BUNDLE_RECORDS: usize = 256;
/// The most clients a bundle lists (the first registered; the records name the rest).
pub const BUNDLE_CLIENTS: usize = 64;
/// The largest bundle: its header, the policy, [`BUNDLE_CLIENTS`] clients,
/// [`BUNDLE_RECORDS`] records.
pub const BUNDLE_MAX_BYTES: usize = bundle_bytes(BUNDLE_CLIENTS, BUNDLE_RECORDS);
/// Config space kept: the PCI header and the capabilities after it.
pub const CONFIG_BYTES: usize = 256;

/// Why a bundle was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleCause {
    /// The device ended Failed: the bundle kept until the next failure.
    Failed = 1,
    /// An administrator asked for one now.
    OnDemand = 2,
}

/// The bundle's fixed part.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable)]
pub struct BundleHeader {
    pub magic: [u8; 8],
    pub format: u16,
    /// [`BundleCause`].
    pub cause: u8,
    /// `State` on the wire when taken.
    pub state: u8,
    /// `FailReason` on the wire of the last reset's failure (0: it did not fail).
    pub fail_reason: u8,
    /// Client entries after the policy (at most [`BUNDLE_CLIENTS`]; 0 in format 1).
    pub client_count: u8,
    pub reserved: [u8; 2],
    pub record_count: u32,
    pub record_bytes: u16,
    pub policy_keys: u16,
    pub epoch: u64,
    pub taken_at_us: u64,
    /// Records the ring had overwritten before the first one kept here.
    pub first_seq: u64,
    /// The driver's version, ASCII, NUL-padded.
    pub driver_version: [u8; 16],
    // The adapter, as it last identified itself.
    pub node_guid: u64,
    pub vendor_id: u16,
    pub device_id: u16,
    pub subsys_vendor_id: u16,
    pub subsys_id: u16,
    pub serial: u64,
    pub fw_version: u64,
    // The health watch.
    pub health_errors: u64,
    pub health_recovers: u64,
    /// The firmware's health counter as last read; `health_counter_read` 0: never read.
    pub health_counter: u32,
    pub health_counter_read: u8,
    pub health_open: u8,
    /// `ResetReason` on the wire of the last fatal cause found (0: none).
    pub last_error_cause: u8,
    pub reserved2: u8,
    /// The catastrophic-error word of that cause (0: none).
    pub last_error_syndrome: u32,
    /// How many bytes of `config` the host read (0: none).
    pub config_bytes: u32,
    pub last_error_at_us: u64,
    pub config: [u8; CONFIG_BYTES],
}
const_assert_eq!(size_of::<BundleHeader>(), 392);
const_assert_eq!(core::mem::offset_of!(BundleHeader, client_count), 13);
const_assert_eq!(core::mem::offset_of!(BundleHeader, record_count), 16);
const_assert_eq!(core::mem::offset_of!(BundleHeader, epoch), 24);
const_assert_eq!(core::mem::offset_of!(BundleHeader, config_bytes), 124);
const_assert_eq!(core::mem::offset_of!(BundleHeader, node_guid), 64);
const_assert_eq!(core::mem::offset_of!(BundleHeader, health_errors), 96);
const_assert_eq!(core::mem::offset_of!(BundleHeader, config), 136);

/// The bundle a failure froze, in room reserved at start, and the config space the host
/// last saved, which a bundle carries.
#[derive(Debug, Clone)]
pub(super) struct KeptBundle {
    bytes: Vec<u8>,
    len: usize,
    config: [u8; CONFIG_BYTES],
    config_len: usize,
}

impl Default for KeptBundle {
    fn default() -> Self {
        KeptBundle {
            bytes: Vec::new(),
            len: 0,
            config: [0; CONFIG_BYTES],
            config_len: 0,
        }
    }
}

impl KeptBundle {
    pub(super) fn reserve(
        &mut self,
        pool: &impl Reserve,
        clients: usize,
        records: usize,
    ) -> Result<(), OutOfMemory> {
        let bytes = bundle_bytes(clients.min(BUNDLE_CLIENTS), records.min(BUNDLE_RECORDS));
        self.bytes = pool.filled("recorder_capacity", bytes, 0u8)?;
        self.len = 0;
        Ok(())
    }

    /// Bytes of room reserved.
    #[cfg(test)]
    pub(super) fn room(&self) -> usize {
        self.bytes.capacity()
    }

    /// Its room given back; the config space saved stays (it is no allocation).
    pub(super) fn give_back(&mut self) {
        self.bytes = Vec::new();
        self.len = 0;
    }

    pub(super) fn get(&self) -> Option<&[u8]> {
        (self.len != 0).then(|| &self.bytes[..self.len])
    }
}

/// The bytes of a bundle of `clients` clients and `records` records.
pub const fn bundle_bytes(clients: usize, records: usize) -> usize {
    size_of::<BundleHeader>()
        + Policy::KEYS.len() * 8
        + clients * size_of::<ClientEntry>()
        + records * RECORD_BYTES
}

/// `out` was too small for the bundle: it needs this many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a bundle needs {0} bytes")]
pub struct BundleTooSmall(pub usize);

impl Coordinator {
    /// The host saved the device's config space before a reset (`Hca::saved_config`): the
    /// bundle keeps its first [`CONFIG_BYTES`] bytes, the last ones saved. Copied in place.
    pub fn config_saved(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(CONFIG_BYTES);
        self.kept.config[..n].copy_from_slice(&bytes[..n]);
        self.kept.config[n..].fill(0);
        self.kept.config_len = n;
    }

    /// The bundle the last failure froze, if the device has failed since start.
    pub fn kept_bundle(&self) -> Option<&[u8]> {
        self.kept.get()
    }

    /// Writes a bundle of the coordinator as it is now into `out`; its length.
    pub fn bundle_now(&self, cause: BundleCause, out: &mut [u8]) -> Result<usize, BundleTooSmall> {
        let records = self.recorder.len().min(BUNDLE_RECORDS);
        let clients = self.client_count().min(BUNDLE_CLIENTS);
        let need = bundle_bytes(clients, records);
        let out = out.get_mut(..need).ok_or(BundleTooSmall(need))?;
        let skip = self.recorder.len() - records;
        let first_seq = self.recorder.iter().nth(skip).map_or(0, |r| r.seq);
        let mut header = self.bundle_header(cause, records, first_seq);
        header.client_count = clients as u8;
        let (head, rest) = out.split_at_mut(size_of::<BundleHeader>());
        head.copy_from_slice(header.as_bytes());
        let (policy, rest) = rest.split_at_mut(Policy::KEYS.len() * 8);
        for (slot, value) in policy.chunks_exact_mut(8).zip(self.policy.values()) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
        let (table, records_out) = rest.split_at_mut(clients * size_of::<ClientEntry>());
        for (slot, c) in table
            .chunks_exact_mut(size_of::<ClientEntry>())
            .zip(self.clients())
        {
            slot.copy_from_slice(ClientEntry::of(&c).as_bytes());
        }
        for (slot, r) in records_out
            .chunks_exact_mut(RECORD_BYTES)
            .zip(self.recorder.iter().skip(skip))
        {
            slot.copy_from_slice(&r.encode());
        }
        Ok(need)
    }

    /// The device ended Failed: the bundle is frozen in the room reserved for it.
    pub(super) fn keep_bundle(&mut self) {
        let mut room = core::mem::take(&mut self.kept.bytes);
        self.kept.len = self.bundle_now(BundleCause::Failed, &mut room).unwrap_or(0);
        self.kept.bytes = room;
    }

    fn bundle_header(&self, cause: BundleCause, records: usize, first_seq: u64) -> BundleHeader {
        let id = self.identity;
        let h = self.health_report();
        let last = h.last_error;
        let mut version = [0u8; 16];
        let v = env!("CARGO_PKG_VERSION").as_bytes();
        let n = v.len().min(version.len());
        version[..n].copy_from_slice(&v[..n]);
        BundleHeader {
            magic: BUNDLE_MAGIC,
            format: BUNDLE_FORMAT,
            cause: cause as u8,
            state: WireByte::to_byte(self.state()),
            fail_reason: match self.last_reset().and_then(|r| r.result) {
                Some(super::ResetResult::Failed(e)) => WireByte::to_byte(e),
                _ => 0,
            },
            client_count: 0,
            reserved: [0; 2],
            record_count: records as u32,
            record_bytes: RECORD_BYTES as u16,
            policy_keys: Policy::KEYS.len() as u16,
            epoch: self.epoch.0,
            taken_at_us: self.now.as_us(),
            first_seq,
            driver_version: version,
            node_guid: id.node_guid,
            vendor_id: id.vendor_id,
            device_id: id.device_id,
            subsys_vendor_id: id.subsys_vendor_id,
            subsys_id: id.subsys_id,
            serial: id.serial,
            fw_version: id.fw_version,
            health_errors: h.errors,
            health_recovers: h.recovers,
            health_counter: h.counter.unwrap_or(0),
            health_counter_read: u8::from(h.counter.is_some()),
            health_open: u8::from(h.open),
            last_error_cause: last.map_or(0, |e| WireByte::to_byte(e.cause)),
            reserved2: 0,
            last_error_syndrome: last.map_or(0, |e| e.syndrome),
            config_bytes: self.kept.config_len as u32,
            last_error_at_us: last.map_or(0, |e| e.at.as_us()),
            config: self.kept.config,
        }
    }
}

/// A bundle read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleView {
    pub header: BundleHeader,
    pub policy: Vec<u64>,
    /// The clients registered when it was taken (none in format 1).
    pub clients: Vec<ClientEntry>,
    pub records: Vec<Record>,
}

impl BundleView {
    pub fn cause(&self) -> Option<BundleCause> {
        match self.header.cause {
            1 => Some(BundleCause::Failed),
            2 => Some(BundleCause::OnDemand),
            _ => None,
        }
    }

    pub fn state(&self) -> Option<State> {
        WireByte::from_byte(self.header.state)
    }

    pub fn fail_reason(&self) -> Option<FailReason> {
        WireByte::from_byte(self.header.fail_reason)
    }

    pub fn last_error_cause(&self) -> Option<ResetReason> {
        WireByte::from_byte(self.header.last_error_cause)
    }

    pub fn taken_at(&self) -> Instant {
        Instant::from_us(self.header.taken_at_us)
    }

    /// Why it was taken, in the words hcactl's and hcasim's lines both use.
    pub fn why(&self) -> &'static str {
        match self.cause() {
            Some(BundleCause::Failed) => "kept when the device ended Failed",
            _ => "taken on demand",
        }
    }

    /// The state it was taken in, and the last reset's failure: `Failed (DeviceReplaced)`.
    pub fn outcome(&self) -> alloc::string::String {
        let state = self.state().map_or("?", |s| s.as_str());
        match self.fail_reason() {
            Some(f) => alloc::format!("{state} ({})", f.as_str()),
            None => state.into(),
        }
    }
}

/// Why bytes are not a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("not a hcabus bundle (no HCABNDL magic)")]
    Magic,
    #[error("bundle format {0}, this build reads 1 to {BUNDLE_FORMAT}")]
    Format(u16),
    #[error("the bundle is {has} bytes, its header says {says}")]
    Length { has: usize, says: usize },
    #[error("record {0} of the bundle does not decode")]
    Record(usize),
    #[error("records of {0} bytes, this build reads {RECORD_BYTES}")]
    RecordBytes(u16),
    /// A count past what the format holds (a format 1 bundle has no client table).
    #[error("the bundle's header gives {field} {value}, past the format's {most}")]
    Count {
        field: &'static str,
        value: u32,
        most: u32,
    },
}

/// Reads a bundle; refuses anything that is not one whole.
pub fn read_bundle(bytes: &[u8]) -> Result<BundleView, BundleError> {
    let (header, rest) = BundleHeader::read_from_prefix(bytes).map_err(|_| BundleError::Magic)?;
    if header.magic != BUNDLE_MAGIC {
        return Err(BundleError::Magic);
    }
    if !(1..=BUNDLE_FORMAT).contains(&header.format) {
        return Err(BundleError::Format(header.format));
    }
    if usize::from(header.record_bytes) != RECORD_BYTES {
        return Err(BundleError::RecordBytes(header.record_bytes));
    }
    // Format 1 wrote 0 where the client count now is.
    let most_clients = if header.format == 1 {
        0
    } else {
        BUNDLE_CLIENTS
    };
    let counts = [
        ("client_count", u32::from(header.client_count), most_clients),
        ("record_count", header.record_count, BUNDLE_RECORDS),
    ];
    for (field, value, most) in counts {
        if value as usize > most {
            return Err(BundleError::Count {
                field,
                value,
                most: most as u32,
            });
        }
    }
    let policy_len = usize::from(header.policy_keys) * 8;
    let clients_len = usize::from(header.client_count) * size_of::<ClientEntry>();
    let records = header.record_count as usize;
    // Bounded by the counts just checked: no sum here can overflow.
    let says = size_of::<BundleHeader>() + policy_len + clients_len + records * RECORD_BYTES;
    if rest.len() != says - size_of::<BundleHeader>() {
        return Err(BundleError::Length {
            has: bytes.len(),
            says,
        });
    }
    let (policy, rest) = rest.split_at(policy_len);
    let (table, raw) = rest.split_at(clients_len);
    let clients = table
        .chunks_exact(size_of::<ClientEntry>())
        .filter_map(|b| ClientEntry::read_from_bytes(b).ok())
        .collect();
    let policy = policy
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .collect();
    let mut out = Vec::new();
    for (i, chunk) in raw.chunks_exact(RECORD_BYTES).enumerate() {
        let raw: &[u8; RECORD_BYTES] = chunk.try_into().map_err(|_| BundleError::Record(i))?;
        out.push(Record::decode(raw).ok_or(BundleError::Record(i))?);
    }
    Ok(BundleView {
        header,
        policy,
        clients,
        records: out,
    })
}
