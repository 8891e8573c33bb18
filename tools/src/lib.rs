//! Shared pieces of the hcabus command-line tools.

pub mod answer;
pub mod contract;
pub mod device;
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
#[cfg(windows)]
pub mod windows;
pub mod world;
