//! READ_BUNDLE (version 9): the diagnostic bundle the last failure kept, or one taken now
//! (the layout is the core's, `coordinator::bundle`, documented in docs/ioctl.md).

use core::mem::size_of;

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::InputHeader;

/// READ_BUNDLE's `which`: the bundle the last failure kept.
pub const BUNDLE_KEPT: u32 = 0;
/// READ_BUNDLE's `which`: a bundle of the bus as it is now (the kept one is left as it is).
pub const BUNDLE_NOW: u32 = 1;

/// Input of READ_BUNDLE.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ReadBundleIn {
    pub header: InputHeader,
    /// [`BUNDLE_KEPT`] or [`BUNDLE_NOW`].
    pub which: u32,
    pub reserved: u32,
}
const_assert_eq!(size_of::<ReadBundleIn>(), 16);

/// Writes a READ_BUNDLE input.
pub fn encode_read_bundle(which: u32, out: &mut [u8]) {
    use super::Wire;
    ReadBundleIn {
        header: InputHeader::for_input::<ReadBundleIn>(),
        which,
        reserved: 0,
    }
    .encode(out);
}
