//! Shared pieces of the hcabus command-line tools.

pub mod answer;
pub mod contract;
pub mod device;
pub mod failslow;
pub mod fleet;
pub mod generate;
pub mod hunt;
pub mod inf;
pub mod log_json;
pub mod report;
pub mod scenario;
#[cfg(unix)]
pub mod serve;
pub mod svg;
pub mod timeline;
#[cfg(unix)]
pub mod transport;

/// An IOCTL's status and output as a transport to the control device brings them back, or
/// the transport's own error.
pub type IoctlAnswer = std::io::Result<(hcabus::ioctl::NtStatus, Vec<u8>)>;
#[cfg(windows)]
pub mod windows;
pub mod world;
