//! Shared pieces of the hcabus command-line tools.

pub mod report;
pub mod scenario;
pub mod timeline;
