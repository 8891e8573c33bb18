//! hcactl, the operator's tool for an hcabus bus: what its binary and the simulator share.
//!
//! The binary (`src/bin/hcactl/`) talks to one adapter's control device: `\\.\HcaBus<n>` on
//! Windows (DeviceIoControl, [`windows`]), or the socket of a running `hcasim serve` elsewhere
//! ([`transport`]). This library is what `hcasim` uses of it too: the transport's framing
//! (its server side), device names, the JSON contract, the flight-recorder records as JSON,
//! and the generated completions and manual pages. Nothing here links the simulator.

pub mod answer;
pub mod contract;
pub mod device;
pub mod generate;
pub mod log_json;
#[cfg(unix)]
pub mod transport;
#[cfg(windows)]
pub mod windows;

/// An IOCTL's status and output as a transport to the control device brings them back, or
/// the transport's own error.
pub type IoctlAnswer = std::io::Result<(hcabus::ioctl::NtStatus, Vec<u8>)>;
