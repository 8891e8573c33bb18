//! Shared pieces of the hcabus command-line tools.

pub mod failslow;
pub mod fleet;
pub mod hunt;
pub mod inf;
pub mod par;
pub mod replay;
pub mod report;
pub mod scenario;
#[cfg(unix)]
pub mod serve;
pub mod svg;
pub mod timeline;
pub mod world;
