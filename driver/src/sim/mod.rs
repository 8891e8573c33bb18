//! Feature `sim`: the simulated HCA and the hosts that run the coordinator on Linux.

pub mod agent;
pub mod bench;
pub mod bus;
pub mod fake_connectx;
pub mod fault;
pub mod hca;
pub mod host;
pub mod hosted;
pub mod invariants;
pub mod multi;
pub mod report;
pub mod scenarios;
pub mod setup;
pub mod shared;
pub mod stepper;
pub mod threaded;
pub mod threads;
pub mod verbs;
pub mod verifier;
mod wakes;

pub use crate::fabric::{Fabric, RemoteError, WireMsg, HOST_LID_BASE, WIRE_MTU};
pub use crate::verbs::{DmaMemory, VerbsLimits};
pub use agent::{Agent, Behavior, ScriptedAgent, AGENT_EVENT_CAPACITY};
pub use bus::Bus;
pub use fake_connectx::{ExtCaps, FakeConnectX, FakeFaults};
pub use fault::{Fault, FaultArgs};
pub use hca::{SimHca, SimHcaConfig, SimHcaStats, SimPorts};
pub use host::{AllocProbe, HostStats, SimHost};
pub use hosted::{Hosted, ThreadCtx, Wake, Workers};
pub use invariants::InvariantChecker;
pub use multi::{MultiHost, MultiHostError};
pub use report::ResetReport;
pub use setup::{draw_recovery_policy, random_setup, shaped_faults, SimSetup, COMMAND_TIMEOUT};
pub use shared::SharedSimHca;
pub use stepper::{SimDevice, Stepper, StepperError};
pub use threaded::{
    EventCallback, StartError, StdPlatform, ThreadPlatform, ThreadedBus, ThreadedHost,
};
pub use threads::{StdThreads, Threads};
pub use verbs::{SimVerbs, VerbsStats};
