//! Shared pieces of the hcabus command-line tools.

pub mod timeline;
