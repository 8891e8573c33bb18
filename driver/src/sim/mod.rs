//! Feature `sim`: the simulated HCA and the hosts that run the coordinator on Linux.

pub mod hca;
pub mod host;
pub mod scenarios;
pub mod stepper;
pub mod threaded;
pub mod verbs;
pub mod verifier;

pub use hca::{SimHca, SimHcaConfig, SimHcaStats};
pub use host::{
    random_setup, Agent, Behavior, Bus, Fault, InvariantChecker, ResetReport, ScriptedAgent,
    SimHost, SimSetup,
};
pub use stepper::Stepper;
pub use threaded::{BusClient, SharedSimHca, StartError, ThreadedBus, ThreadedHost};
pub use verbs::{RemoteError, SimVerbs, VerbsLimits, VerbsStats, WireMsg, HOST_LID_BASE, WIRE_MTU};
