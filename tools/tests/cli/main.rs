//! The tools' suites in one test binary: cargo runs test binaries one after another and libtest
//! runs one binary's tests side by side, so the long ones (a thousand hosts, the JSON contract
//! against a live server, the fail-slow tables) share the machine's cores.

mod bounds;
mod campaign;
mod common;
mod devices;
mod docs_output;
mod failslow;
mod fleet;
mod generate;
mod hcactl;
mod hunt;
mod infcheck;
mod json_schema;
mod maintain;
mod operator;
mod scenarios;
mod serve;
mod svg;
mod usage;
