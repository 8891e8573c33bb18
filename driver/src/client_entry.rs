//! One client as it leaves the bus: LIST_CLIENTS' entry, and the client table of the
//! diagnostic bundle, which is the same 64 bytes so that one decoder reads both.

use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::coordinator::ClientInfo;
use crate::types::{ClientDesc, ClientFlags, ClientKind, ClientName, ClientState};
use crate::wire::WireByte;

/// `last_ack_latency_us` of a client that has not yet acknowledged a reset.
const NO_LATENCY: u64 = u64::MAX;

/// One client in LIST_CLIENTS (docs/ioctl.md) and in a bundle's client table.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ClientEntry {
    /// `ClientId::to_raw`.
    pub id: u64,
    /// `ClientKind` number.
    pub kind: u32,
    /// `ClientFlags` bits.
    pub flags: u32,
    /// `ClientState` number.
    pub state: u32,
    pub in_barrier: u32,
    /// Time from RESET to execute in the last reset; `u64::MAX` if none yet.
    pub last_ack_latency_us: u64,
    /// UTF-8, NUL-padded.
    pub name: [u8; 32],
}
const_assert_eq!(size_of::<ClientEntry>(), 64);
const_assert_eq!(offset_of!(ClientEntry, kind), 8);
const_assert_eq!(offset_of!(ClientEntry, state), 16);
const_assert_eq!(offset_of!(ClientEntry, last_ack_latency_us), 24);
const_assert_eq!(offset_of!(ClientEntry, name), 32);

impl ClientEntry {
    /// The entry of a registered client.
    pub fn of(c: &ClientInfo) -> Self {
        let mut name = [0u8; 32];
        let text = c.desc.name.as_str().as_bytes();
        let n = text.len().min(ClientName::CAPACITY).min(32);
        name[..n].copy_from_slice(&text[..n]);
        ClientEntry {
            id: c.id.to_raw(),
            kind: c.desc.kind as u32,
            flags: c.desc.flags.bits(),
            state: c.state as u32,
            in_barrier: u32::from(c.in_barrier),
            last_ack_latency_us: c.last_ack_latency.map_or(NO_LATENCY, |d| d.as_us()),
            name,
        }
    }

    /// The name, up to its first NUL.
    pub fn name(&self) -> &str {
        let end = self.name.iter().position(|b| *b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..end]).unwrap_or("?")
    }

    /// What the client declared at registration; `None` for a kind or name no client has.
    pub fn desc(&self) -> Option<ClientDesc> {
        let kind = u8::try_from(self.kind)
            .ok()
            .and_then(ClientKind::from_byte)?;
        ClientDesc::new(
            self.name(),
            kind,
            ClientFlags::from_bits_truncate(self.flags),
        )
    }

    /// Its state; `None` for a number no state has.
    pub fn state(&self) -> Option<ClientState> {
        u8::try_from(self.state)
            .ok()
            .and_then(ClientState::from_byte)
    }
}
