//! The policy as GET_POLICY answers it and SET_POLICY takes it: [`PolicyAbi`], its size in
//! each ABI version and its conversions, all made from the policy's table
//! ([`with_policy_keys!`](crate::with_policy_keys)).
//!
//! The keys of versions 1 to 7 each have a field of their own. From version 8 on a key has a
//! slot instead: `slots[N]`, carried when bit N of `slots_set` is set. A key added is then a
//! line of the table that names a free slot, and neither a new layout nor a new version: a
//! caller that does not know the key leaves its bit clear and the key keeps its value, and a
//! caller that sets the bit of a slot this bus has no key for is refused with the field named.

use core::mem::{offset_of, size_of};

use static_assertions::{const_assert, const_assert_eq};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::{Wire, ABI_VERSION};
use crate::policy::{KeyValue, Policy, PolicyError};

/// Bytes of the policy structure in version 1 (its first 72 bytes in version 2).
pub const POLICY_V1_BYTES: usize = 72;
/// Bytes of the fields named one per key (versions 2 to 7): the slots follow them.
pub const POLICY_NAMED_BYTES: usize = 96;
/// Slots for the keys added from version 8 on.
pub const POLICY_KEY_SLOTS: usize = 16;
/// Bytes of the policy structure from each ABI version on. A field appended to [`PolicyAbi`]
/// is a new ABI version and a new row (the last row is asserted to be the structure's size);
/// a caller's structure is its version's first bytes, and the keys it does not carry keep
/// their values ([`PolicyAbi::with_newer_keys_of`]). A new key takes a slot, not a row.
pub const POLICY_BYTES_SINCE: [(u16, usize); 3] = [
    (1, POLICY_V1_BYTES),
    (2, POLICY_NAMED_BYTES),
    (8, size_of::<PolicyAbi>()),
];

/// The policy, as GET_POLICY returns it and SET_POLICY takes it.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct PolicyAbi {
    pub quiesce_deadline_ms: u64,
    pub hw_ready_timeout_ms: u64,
    pub hw_poll_interval_ms: u64,
    pub auto_restart_window_ms: u64,
    pub storm_window_ms: u64,
    pub io_hold_timeout_ms: u64,
    pub health_poll_interval_ms: u64,
    pub reset_retries: u32,
    pub max_auto_resets: u32,
    /// 0 or 1.
    pub abort_on_unresponsive: u32,
    pub reserved: u32,
    // Version 2: appended, so that a version-1 layout is this one's first 72 bytes.
    pub query_deadline_ms: u64,
    /// 0: hold until the device is Failed or Removed.
    pub paging_io_hold_timeout_ms: u64,
    pub client_request_limit: u32,
    /// 0 or 1.
    pub auto_recover: u32,
    // Version 8: every key from here on is a slot.
    /// Bit N: `slots[N]` carries a value. GET_POLICY sets the bit of each slot this bus has
    /// a key for; SET_POLICY sets the key of each slot whose bit is set and keeps the others.
    pub slots_set: u64,
    /// The value of the key the policy's table gives slot N (flags 0 or 1).
    pub slots: [u64; POLICY_KEY_SLOTS],
}
// The table's last row is the structure as it is, in a version already served.
const_assert_eq!(
    size_of::<PolicyAbi>(),
    POLICY_BYTES_SINCE[POLICY_BYTES_SINCE.len() - 1].1
);
const_assert!(POLICY_BYTES_SINCE[POLICY_BYTES_SINCE.len() - 1].0 <= ABI_VERSION);
const_assert_eq!(size_of::<PolicyAbi>(), 232);
const_assert_eq!(offset_of!(PolicyAbi, query_deadline_ms), POLICY_V1_BYTES);
const_assert_eq!(offset_of!(PolicyAbi, paging_io_hold_timeout_ms), 80);
const_assert_eq!(offset_of!(PolicyAbi, client_request_limit), 88);
const_assert_eq!(offset_of!(PolicyAbi, auto_recover), 92);
const_assert_eq!(offset_of!(PolicyAbi, io_hold_timeout_ms), 40);
const_assert_eq!(offset_of!(PolicyAbi, reset_retries), 56);
const_assert_eq!(offset_of!(PolicyAbi, abort_on_unresponsive), 64);
const_assert_eq!(offset_of!(PolicyAbi, slots_set), POLICY_NAMED_BYTES);
const_assert_eq!(offset_of!(PolicyAbi, slots), 104);

/// A policy value as the IOCTL structure holds it: durations as they are, counts and flags
/// in 32 bits in a named field, every value in 64 bits in a slot.
trait AbiValue<A>: Sized {
    fn to_abi(self) -> A;
    /// The value `a` is, or the refusal that names `field`.
    fn from_abi(field: &'static str, a: A) -> Result<Self, PolicyError>;
}

impl AbiValue<u64> for u64 {
    fn to_abi(self) -> u64 {
        self
    }
    fn from_abi(_: &'static str, a: u64) -> Result<Self, PolicyError> {
        Ok(a)
    }
}

impl AbiValue<u32> for u8 {
    fn to_abi(self) -> u32 {
        u32::from(self)
    }
    fn from_abi(field: &'static str, a: u32) -> Result<Self, PolicyError> {
        <u8 as AbiValue<u64>>::from_abi(field, u64::from(a))
    }
}

impl AbiValue<u64> for u8 {
    fn to_abi(self) -> u64 {
        u64::from(self)
    }
    fn from_abi(field: &'static str, a: u64) -> Result<Self, PolicyError> {
        KeyValue::from_u64(a).map_err(|_| PolicyError {
            field,
            problem: "must be at most 255",
        })
    }
}

impl AbiValue<u32> for bool {
    fn to_abi(self) -> u32 {
        u32::from(self)
    }
    fn from_abi(field: &'static str, a: u32) -> Result<Self, PolicyError> {
        <bool as AbiValue<u64>>::from_abi(field, u64::from(a))
    }
}

impl AbiValue<u64> for bool {
    fn to_abi(self) -> u64 {
        u64::from(self)
    }
    fn from_abi(field: &'static str, a: u64) -> Result<Self, PolicyError> {
        KeyValue::from_u64(a).map_err(|_| PolicyError {
            field,
            problem: "must be 0 or 1",
        })
    }
}

/// Writes one key into the structure: into its field, or into its slot with the slot's bit.
macro_rules! abi_put {
    ($abi:ident, $key:ident, $value:expr) => {
        $abi.$key = AbiValue::to_abi($value)
    };
    ($abi:ident, $key:ident, $value:expr, $slot:literal) => {{
        $abi.slots[$slot] = AbiValue::<u64>::to_abi($value);
        $abi.slots_set |= 1 << $slot;
    }};
}

/// Reads one key from the structure: from its field, or from its slot, whose bit must be set.
macro_rules! abi_get {
    ($abi:ident, $key:ident) => {
        AbiValue::from_abi(stringify!($key), $abi.$key)?
    };
    ($abi:ident, $key:ident, $slot:literal) => {
        AbiValue::<u64>::from_abi(stringify!($key), $abi.slot(stringify!($key), $slot)?)?
    };
}

macro_rules! policy_abi {
    ($( $(#[$doc:meta])* $key:ident : $ty:ty = $default:expr, $limit:expr $(, slot $slot:literal)?; )+) => {
        /// The slots the policy's table gives a key.
        pub const POLICY_SLOTS_KEYED: u64 = 0 $( $( | 1 << $slot )? )+;
        // Two keys in one slot would read each other's value: as many bits as keyed lines.
        const_assert_eq!(POLICY_SLOTS_KEYED.count_ones(), 0 $( $( + ($slot - $slot + 1) )? )+);

        impl PolicyAbi {
            pub fn from_policy(p: &Policy) -> Self {
                let mut abi = PolicyAbi::default();
                $( abi_put!(abi, $key, p.$key $(, $slot)?); )+
                abi
            }

            /// The policy this structure holds, or the field that no policy value can be (a
            /// count above 255, a flag other than 0 or 1, a reserved field set, a slot set
            /// that has no key, a key's slot not set). Values are not validated as a whole
            /// here: [`Policy::validate`] does that.
            pub fn parse_policy(&self) -> Result<Policy, PolicyError> {
                self.check_reserved()?;
                let abi = self;
                // In the table's order: of several fields that cannot be values, the first
                // is named.
                Ok(Policy { $( $key: abi_get!(abi, $key $(, $slot)?), )+ })
            }
        }
    };
}
crate::with_policy_keys!(policy_abi);

impl PolicyAbi {
    /// A caller of ABI `version` carries the keys of its version's structure, and from
    /// version 8 on the slots whose bits it sets: every other key keeps `current`'s value.
    /// A bit set for a slot with no key stays set, for [`PolicyAbi::parse_policy`] to refuse.
    pub fn with_newer_keys_of(self, version: u16, current: &Policy) -> Self {
        let n = policy_bytes(version).min(POLICY_NAMED_BYTES);
        let mut merged = PolicyAbi::from_policy(current);
        merged.as_mut_bytes()[..n].copy_from_slice(&self.as_bytes()[..n]);
        // A structure older than version 8 was read with its slots zero: none is carried.
        for (i, (to, from)) in merged.slots.iter_mut().zip(self.slots).enumerate() {
            if self.slots_set & 1 << i != 0 {
                *to = from;
            }
        }
        merged.slots_set |= self.slots_set;
        merged
    }

    /// The policy this names, or `None` if a field cannot be one (validation of the
    /// values themselves is `Policy::validate`'s).
    pub fn to_policy(&self) -> Option<Policy> {
        self.parse_policy().ok()
    }

    /// Reads the structure of ABI `version` (the fields appended after it zero: see
    /// [`PolicyAbi::with_newer_keys_of`]); `None` when `buf` is shorter.
    pub fn decode_version(buf: &[u8], version: u16) -> Option<Self> {
        let n = policy_bytes(version);
        let mut full = [0u8; size_of::<PolicyAbi>()];
        full[..n].copy_from_slice(buf.get(..n)?);
        Self::decode(&full)
    }

    fn check_reserved(&self) -> Result<(), PolicyError> {
        if self.reserved != 0 {
            return Err(PolicyError {
                field: "reserved",
                problem: "must be 0",
            });
        }
        if self.slots_set & !POLICY_SLOTS_KEYED != 0 {
            return Err(PolicyError {
                field: "slots_set",
                problem: "sets a slot this bus has no key for",
            });
        }
        Ok(())
    }

    /// The value in `slot`, which carries `key`.
    fn slot(&self, key: &'static str, slot: usize) -> Result<u64, PolicyError> {
        if self.slots_set & 1 << slot == 0 {
            return Err(PolicyError {
                field: key,
                problem: "not carried: its bit in slots_set is 0",
            });
        }
        Ok(self.slots[slot])
    }
}

/// Bytes of the policy structure in ABI `version`: its row of [`POLICY_BYTES_SINCE`].
pub fn policy_bytes(version: u16) -> usize {
    POLICY_BYTES_SINCE
        .iter()
        .rev()
        .find(|&&(since, _)| since <= version)
        .map_or(POLICY_V1_BYTES, |&(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom() -> Policy {
        Policy {
            health_stall_polls: 11,
            abort_on_unresponsive: true,
            auto_recover: false,
            reset_retries: 5,
            ..Policy::default()
        }
    }

    #[test]
    fn a_policy_goes_through_the_structure_unchanged() {
        let abi = PolicyAbi::from_policy(&custom());
        assert_eq!(abi.slots_set, POLICY_SLOTS_KEYED);
        assert_eq!(abi.slots[0], 11);
        assert_eq!((abi.abort_on_unresponsive, abi.auto_recover), (1, 0));
        assert_eq!(abi.parse_policy(), Ok(custom()));
    }

    /// A key in a slot may be a flag or a count as well as a duration: each takes what its
    /// type takes, 64 bits wide.
    #[test]
    fn a_slot_holds_a_flag_or_a_count_in_64_bits() {
        assert_eq!(<bool as AbiValue<u64>>::to_abi(true), 1);
        assert_eq!(<bool as AbiValue<u64>>::to_abi(false), 0);
        assert_eq!(<bool as AbiValue<u64>>::from_abi("f", 1), Ok(true));
        let e = <bool as AbiValue<u64>>::from_abi("f", 2).expect_err("not a flag");
        assert_eq!((e.field, e.problem), ("f", "must be 0 or 1"));
        assert_eq!(<u8 as AbiValue<u64>>::to_abi(200), 200);
        assert_eq!(<u8 as AbiValue<u64>>::from_abi("c", 255), Ok(255));
        let e = <u8 as AbiValue<u64>>::from_abi("c", 1 << 32).expect_err("not a count");
        assert_eq!((e.field, e.problem), ("c", "must be at most 255"));
    }

    /// Every slot a caller marks is carried into the merged structure, whether or not this
    /// bus has a key for it (then parsing refuses it); an unmarked one keeps the current value.
    #[test]
    fn the_merge_carries_each_marked_slot_and_keeps_the_others() {
        let current = custom();
        let mut sent = PolicyAbi::from_policy(&Policy::default());
        sent.slots = core::array::from_fn(|i| 100 + i as u64);
        sent.slots_set = 1 << 3 | 1 << 15;
        let merged = sent.with_newer_keys_of(ABI_VERSION, &current);
        assert_eq!(merged.slots[3], 103);
        assert_eq!(merged.slots[15], 115);
        assert_eq!(merged.slots[0], 11, "slot 0 unmarked: the current value");
        assert_eq!(merged.slots_set, POLICY_SLOTS_KEYED | 1 << 3 | 1 << 15);
        assert_eq!(merged.quiesce_deadline_ms, sent.quiesce_deadline_ms);
        // A version-7 caller's structure has no slots: nothing of them is taken.
        let old =
            PolicyAbi::decode_version(&sent.as_bytes()[..POLICY_NAMED_BYTES], 7).expect("96 bytes");
        assert_eq!(old.with_newer_keys_of(7, &current).slots[0], 11);
    }

    #[test]
    fn a_slot_is_read_only_when_its_bit_is_set() {
        let mut abi = PolicyAbi::default();
        abi.slots[5] = 42;
        let e = abi.slot("k", 5).expect_err("bit clear");
        assert_eq!(e.field, "k");
        abi.slots_set = 1 << 5;
        assert_eq!(abi.slot("k", 5), Ok(42));
        assert!(abi.slot("k", 0).is_err(), "only bit 5 is set");
    }

    #[test]
    fn each_version_has_its_size() {
        assert_eq!(policy_bytes(0), POLICY_V1_BYTES);
        assert_eq!(policy_bytes(1), POLICY_V1_BYTES);
        assert_eq!(policy_bytes(2), POLICY_NAMED_BYTES);
        assert_eq!(policy_bytes(7), POLICY_NAMED_BYTES);
        assert_eq!(policy_bytes(8), size_of::<PolicyAbi>());
        assert_eq!(policy_bytes(ABI_VERSION), size_of::<PolicyAbi>());
    }
}
