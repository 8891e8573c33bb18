//! Built-in scenarios.

use crate::report::REPORTED_RESETS;
use crate::setup::DERIVED_FAULTS;
use std::vec::Vec;

use crate::agent::Behavior;
use crate::hca::SimHcaConfig;
use crate::setup::{Fault, SimSetup};
use hcabus::policy::Policy;
use hcabus::time::{Duration, Instant};
use hcabus::types::{ClientDesc, ClientFlags, ClientKind};

fn desc(name: &str, kind: ClientKind, flags: ClientFlags) -> ClientDesc {
    // The names below are short literals; a failure here is a typo caught by every test.
    ClientDesc::new(name, kind, flags)
        .unwrap_or_else(|| panic!("built-in client name {name:?} too long"))
}

fn acks_after(ms: u64) -> Behavior {
    Behavior {
        ack_delay: Duration::from_ms(ms),
        ..Behavior::default()
    }
}

/// The boot-from-SAN host with scripted stand-ins for its clients — the access layer, IPoIB
/// on two ports, the boot disk on the paging path, a data LUN and a user-verbs context — that
/// hits a catastrophic firmware error at 1.4 s and recovers. The coordinator's own suites use
/// it; `hcabus_lab::stack::boot_from_san` is the same host with the real clients under load (the
/// `hcasim` default).
///
/// Each client's acknowledgement delay stands for its own quiesce work (completing or
/// parking in-flight I/O, destroying QPs); the boot disk executes from inside its callback,
/// as a paging-path client must.
pub fn scripted_boot_from_san() -> SimSetup {
    let clients: Vec<(ClientDesc, Behavior)> = std::vec![
        (
            desc("ibal", ClientKind::Ibal, ClientFlags::BOOT_CRITICAL),
            acks_after(2)
        ),
        (
            desc("ipoib-port1", ClientKind::Ipoib, ClientFlags::empty()),
            acks_after(1)
        ),
        (
            desc("ipoib-port2", ClientKind::Ipoib, ClientFlags::empty()),
            acks_after(1)
        ),
        (
            desc(
                "bootdisk",
                ClientKind::BootDisk,
                ClientFlags::BOOT_CRITICAL | ClientFlags::PAGING_PATH
            ),
            acks_after(0)
        ),
        (
            desc("data-lun", ClientKind::Srp, ClientFlags::empty()),
            acks_after(4)
        ),
        (
            desc("uverbs", ClientKind::Uverbs, ClientFlags::USER_MODE),
            acks_after(0)
        ),
    ];
    SimSetup {
        clients,
        ..boot_from_san_run()
    }
}

/// The run of the boot-from-SAN host without its clients: one adapter with two ports, the
/// default policy, five seconds, and a catastrophic firmware error at 1.4 s (between two
/// health polls, so I/O piles up on the dead device before anyone knows). The one
/// definition both hosts of the default build on: [`scripted_boot_from_san`] here, and
/// `hcabus_lab::stack::boot_from_san` (the `hcasim` default) with the real clients.
pub fn boot_from_san_run() -> SimSetup {
    SimSetup {
        name: "boot-from-san".into(),
        seed: 1,
        duration: Duration::from_ms(5_000),
        hca: SimHcaConfig {
            ports: 2,
            hw_reset: Duration::from_ms(200),
            ..SimHcaConfig::default()
        },
        policy: Policy::default(),
        max_clients: 64,
        recorder_capacity: 8192,
        reported_resets: REPORTED_RESETS,
        derived_faults: DERIVED_FAULTS,
        clients: Vec::new(),
        faults: std::vec![(Instant::from_ms(1_400), Fault::Catastrophic)],
        start: Instant::ZERO,
    }
}
