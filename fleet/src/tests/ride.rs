//! A link flap the transport rides (docs/design.md §7 "A link flap ridden"): where a
//! host's ports are back before its transport's last retransmission, its disks keep their
//! connections, and the fault costs no login and no PathRecord.

use hcabus::verbs::RcTransport;
use hcabus::Duration;

use super::super::*;
use super::{run, setup};

fn flap(down_ms: u64) -> FleetFault {
    FleetFault::LinkFlap {
        down: Duration::from_ms(down_ms),
    }
}

/// The fleet's every host with adapters of `transport`.
fn with_transport(mut s: FleetSetup, transport: RcTransport) -> FleetSetup {
    match &mut s.host {
        FleetTemplate::One(h) => h.sim.hca.transport = transport,
        FleetTemplate::Many(m) => {
            for a in &mut m.adapters {
                a.stack.sim.hca.transport = transport;
            }
        }
    }
    s
}

/// A 300 ms flap under eight hosts whose ports are back 2.3 s later (training and the
/// sweep). With a local ACK timeout of 19 (2.1 s, as fabrics set in the field: 15 s
/// ridden) every disk keeps its connection: each target took no login past the boot's,
/// and the policy's part of the minimum is the interfaces' joins alone. Under the default
/// transport (470 ms ridden) the same flap logs every disk in again.
#[test]
fn a_flap_within_the_transports_retries_costs_no_login() {
    let faults = || std::vec![(1_000, flap(300))];
    let field = RcTransport::new(19, 7).expect("valid");
    let ridden = run(&with_transport(
        setup(8, faults(), RetryPolicy::Backoff),
        field,
    ));
    let plain = run(&setup(8, faults(), RetryPolicy::Backoff));
    for f in [&ridden, &plain] {
        assert!(f.held(), "{f:?}");
        assert_eq!((f.resets, f.io.failed, f.io.lost), (0, 0, 0));
        assert_eq!((f.faults[1].hosts, f.faults[1].back), (8, 8), "{f:?}");
    }
    let (r, p) = (&ridden.faults[1], &plain.faults[1]);
    // Two disks a host: every one rode the flap, or none did.
    assert_eq!((r.paths_ridden, p.paths_ridden), (16, 0));
    let accepted =
        |f: &FleetFigures| -> Vec<u64> { f.targets.iter().map(|t| t.stats.accepted).collect() };
    assert_eq!(accepted(&ridden), std::vec![8, 8], "the boot's logins only");
    assert_eq!(accepted(&plain), std::vec![16, 16]);
    assert_eq!(
        r.outage, p.outage,
        "the same ports back at the same instants"
    );
    assert!(r.controlled_min < p.controlled_min, "{r:?} {p:?}");
    assert!(r.all_back_after < p.all_back_after, "{r:?} {p:?}");
    // Still a least, and met: the last host is back with its port and its own joins.
    let ratio = r.controlled_over_min().expect("every host back");
    assert!((1.0..1.5).contains(&ratio), "{ratio} {r:?}");
}

/// A flap longer than the transport rides (15 s past the PORT_DOWN under a local ACK
/// timeout of 19): every connection is given up, as under the default transport, and
/// every disk logs in again.
#[test]
fn a_flap_past_the_transports_retries_logs_every_disk_in_again() {
    let field = RcTransport::new(19, 7).expect("valid");
    let mut s = with_transport(
        setup(4, std::vec![(1_000, flap(16_000))], RetryPolicy::Backoff),
        field,
    );
    s.duration = s.duration + Duration::from_ms(16_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    assert_eq!((r.hosts, r.back, r.paths_ridden), (4, 4, 0), "{r:?}");
    let accepted: Vec<u64> = f.targets.iter().map(|t| t.stats.accepted).collect();
    assert_eq!(accepted, std::vec![8, 8], "{f:?}");
    assert_eq!((f.io.failed, f.io.lost, f.io.paging_failed), (0, 0, 0));
}
