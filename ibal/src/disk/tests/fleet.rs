//! Hosts that share a target's login capacity (docs/design.md §11): each disk is the real
//! one, and a login the target has no room for is rejected and retried with the backoff.

use std::vec::Vec;

use hcabus::{Duration, Instant};

use super::{disk, routed, setup};
use crate::disk::DiskConfig;
use crate::srp_target::{LoginCapacity, SharedAdmission};
use crate::stack::{self, Host};

/// Two hosts whose disks log in at 0 ms to one target that takes one login at a time (each
/// takes 20 ms): the second is rejected, backs off, and logs in once the first is done. The
/// hosts run in step, a millisecond at a time, as a fleet's do.
#[test]
fn a_login_the_target_has_no_room_for_is_retried_after_a_backoff() {
    let config = DiskConfig {
        login_delay: Duration::from_ms(20),
        ..routed()
    };
    let capacity = LoginCapacity {
        concurrent: 1,
        per_second: 1_000,
    };
    let target = SharedAdmission::new(capacity).expect("a capacity that can be");
    let shared = [(config.target_lid, target.clone())];
    let mut hosts: Vec<Host> = (0..2)
        .map(|_| stack::build_sharing(&setup(config, Vec::new()), &shared).expect("builds"))
        .collect();
    for ms in 1..=200 {
        for h in &mut hosts {
            h.run_until(Instant::from_ms(ms));
        }
    }
    let s = target.lock().stats();
    let d: Vec<_> = hosts.iter().map(|h| *disk(h).disk().stats()).collect();
    assert_eq!((d[0].logins, d[0].login_retries), (1, 0));
    assert_eq!(d[1].logins, 1);
    assert!(d[1].login_retries > 0, "{:?}", d[1]);
    assert_eq!(
        (
            s.accepted,
            s.refused_busy,
            s.refused_rate,
            s.peak_per_second
        ),
        (2, u64::from(d[1].login_retries), 0, 2)
    );
    for h in &hosts {
        let c = disk(h);
        assert!(c.disk().is_up(), "{:?}", c.problem());
        assert!(h.checker().violations.is_empty());
        let io = c.io_stats();
        assert_eq!(
            io.submitted,
            io.completed + io.failed + io.in_flight + io.lost
        );
        assert_eq!((io.failed, io.lost), (0, 0));
    }
}
