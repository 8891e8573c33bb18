//! hcabus-sim: the simulated adapter and the virtual-time hosts that run the hcabus core on
//! Linux, outside the product crate (TigerBeetle keeps its simulator outside `src/vsr/` for
//! the same reason: the driver ships none of it).
//!
//! * the device: [`SimHca`] (the adapter as the coordinator and the verbs see it, with its
//!   fault vocabulary, [`Fault`]), [`FakeConnectX`] (the register file under `MmioHca`), and
//!   [`SharedSimHca`] (one adapter on the wall clock for the threaded host);
//! * the hosts: [`SimHost`] (virtual time, agents, invariants), [`Stepper`] (the coordinator
//!   alone, step by step, for protocol tests), [`MultiHost`] (adapters side by side) and
//!   [`Hosted`] (any client on the threaded host of `hcabus::host`);
//! * the checks and reports: [`InvariantChecker`], [`ResetReport`], the benchmark.

pub mod agent;
pub mod bench;
pub mod ctx;
pub mod fake_connectx;
pub mod fault;
pub mod fixtures;
pub mod hca;
pub mod hosted;
pub mod invariants;
pub mod multi;
pub mod report;
pub mod scenarios;
pub mod setup;
pub mod shared;
pub mod sim_host;
pub mod stepper;
pub mod verbs;
mod wakes;

pub use agent::{Agent, Behavior, ScriptedAgent, AGENT_EVENT_CAPACITY};
pub use ctx::SimCtx;
pub use fake_connectx::{ExtCaps, FakeConnectX, FakeFaults};
pub use fault::{Fault, FaultArgs};
pub use hca::{SimHca, SimHcaConfig, SimHcaStats, SimPorts};
pub use hcabus::fabric::{Fabric, RemoteError, WireMsg, HOST_LID_BASE, WIRE_MTU};
pub use hcabus::verbs::{DmaMemory, VerbsLimits};
pub use hosted::{Hosted, ThreadCtx, Wake, Workers};
pub use invariants::InvariantChecker;
pub use multi::{MultiHost, MultiHostError};
pub use report::ResetReport;
pub use report::REPORTED_RESETS;
pub use setup::DERIVED_FAULTS;
pub use setup::{draw_recovery_policy, random_setup, shaped_faults, SimSetup, COMMAND_TIMEOUT};
pub use shared::SharedSimHca;
pub use sim_host::{AllocProbe, HostStats, SimHost, MAX_STEPS_AT_ONE_INSTANT};
pub use stepper::{SimDevice, Stepper, StepperError};
pub use verbs::{SimVerbs, VerbsStats};
