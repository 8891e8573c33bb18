//! Who asked for what the flight recorder records.

use core::fmt;

/// Who made the request a record was written for: the bus itself or a client (nobody an
/// administrator needs named), or an administrator through the control device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Actor {
    #[default]
    Nobody,
    /// A local user on the simulator's socket (SO_PEERCRED's uid), with the access the
    /// server granted (`ioctl::Rights` bits).
    Local { uid: u32, rights: u8 },
    /// A handle to the control device on Windows, with the access it was opened for. The
    /// control device is admin-only, so the handle's holder is an administrator or SYSTEM.
    Handle { rights: u8 },
}

impl Actor {
    /// The wire form (READ_LOG version 5's bytes 112..120): kind (0 nobody, 1 local, 2
    /// handle), rights, two reserved bytes, uid.
    pub fn to_bytes(self) -> [u8; 8] {
        let (kind, rights, uid) = match self {
            Actor::Nobody => (0, 0, 0),
            Actor::Local { uid, rights } => (1, rights, uid),
            Actor::Handle { rights } => (2, rights, 0),
        };
        let mut out = [0u8; 8];
        out[0] = kind;
        out[1] = rights;
        out[4..].copy_from_slice(&uid.to_le_bytes());
        out
    }

    /// The inverse of [`Actor::to_bytes`]; `None` for bytes no actor encodes to.
    pub fn from_bytes(b: [u8; 8]) -> Option<Actor> {
        let uid = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let (rights, reserved) = (b[1], [b[2], b[3]]);
        if reserved != [0, 0] || rights & !3 != 0 {
            return None;
        }
        match b[0] {
            0 if rights == 0 && uid == 0 => Some(Actor::Nobody),
            1 => Some(Actor::Local { uid, rights }),
            2 if uid == 0 => Some(Actor::Handle { rights }),
            _ => None,
        }
    }

    /// "read", "read-write", as the access is named.
    pub const fn access(rights: u8) -> &'static str {
        match rights & 3 {
            3 => "read-write",
            2 => "write",
            1 => "read",
            _ => "none",
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Actor::Nobody => f.write_str("-"),
            Actor::Local { uid, rights } => write!(f, "uid {uid} ({})", Actor::access(rights)),
            Actor::Handle { rights } => write!(f, "handle ({})", Actor::access(rights)),
        }
    }
}
