//! What the suites build a bus from, kept once: the simulated adapter's identity and the
//! protocol tests' policy (deadlines short enough to reach in a few steps, long enough to
//! tell apart).

use hcabus::hca::Identity;
use hcabus::policy::Policy;

use crate::hca::SimHcaConfig;

/// The identity a default `SimHca` reports (a ConnectX-3 on firmware 2.42.5000).
pub fn identity() -> Identity {
    SimHcaConfig::default().identity
}

/// The model checks' policy: deadlines of a few steps (100 ms quiesce and ready bound, a
/// 50 ms query, a 1 s restart window) and no soft-reset retry, so that every stage is a few
/// inputs from the start.
pub fn model_policy() -> Policy {
    Policy {
        quiesce_deadline_ms: 100,
        hw_ready_timeout_ms: 100,
        query_deadline_ms: 50,
        auto_restart_window_ms: 1_000,
        reset_retries: 0,
        ..Policy::default()
    }
}

/// The protocol tests' policy: a 1 s quiesce, a 2 s ready bound, a 60 s restart window.
pub fn policy() -> Policy {
    Policy {
        quiesce_deadline_ms: 1_000,
        hw_ready_timeout_ms: 2_000,
        auto_restart_window_ms: 60_000,
        ..Policy::default()
    }
}
