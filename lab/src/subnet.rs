//! The subnet manager as a fleet's hosts see it (docs/design.md §11): its subnet
//! administrator (SA), which answers so many queries a second and none while no master is
//! up, and the ClientReregister a new master sets on every port after its sweep, upon which
//! every IPoIB interface joins its multicast groups again and re-resolves its paths through
//! that SA. Shared by every host of a fleet, as the fabric's one SM is.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use hcabus::{Duration, Instant};

use crate::srp_target::{CapacityError, LoginCapacity, SharedAdmission};

/// The most queries an SA may answer a second (a bound on the window it reserves).
pub const MAX_SA_QUERIES_PER_SECOND: u32 = crate::srp_target::MAX_LOGINS_PER_SECOND;

/// The fabric's SM and SA, shared by every host.
#[derive(Debug, Clone)]
pub struct SharedSubnet {
    /// Its queries, admitted as a target admits logins: a sliding second's worth, none
    /// while it is away (a query takes no time of its own, so no limit on those at once).
    sa: SharedAdmission,
    /// How many times a master set ClientReregister on every port.
    reregistered: Arc<AtomicU32>,
}

impl SharedSubnet {
    /// An SA that answers `queries_per_second` (1..=100,000).
    pub fn new(queries_per_second: u32) -> Result<Self, CapacityError> {
        let sa = SharedAdmission::new(LoginCapacity {
            concurrent: crate::srp_target::MAX_CONCURRENT_LOGINS,
            per_second: queries_per_second,
        })?;
        Ok(SharedSubnet {
            sa,
            reregistered: Arc::new(AtomicU32::new(0)),
        })
    }

    /// A query to the SA at `now`: answered, or dropped (it will time out at the asker).
    pub fn query(&self, now: Instant) -> bool {
        self.sa.lock().try_login(now, Duration::ZERO).is_ok()
    }

    /// No master answers from `now` for `for_`: the SA drops every query.
    pub fn away(&self, now: Instant, for_: Duration) {
        self.sa.lock().restart(now, for_);
    }

    /// A new master swept and set ClientReregister on every port.
    pub fn reregister(&self) {
        self.reregistered.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times ClientReregister was set: a port that saw fewer must join again.
    pub fn reregistrations(&self) -> u32 {
        self.reregistered.load(Ordering::Relaxed)
    }

    /// What the SA answered and dropped.
    pub fn stats(&self) -> crate::srp_target::AdmissionStats {
        self.sa.lock().stats()
    }
}

impl ibal::ipoib::SubnetAdmin for SharedSubnet {
    fn query(&self, now: Instant) -> bool {
        SharedSubnet::query(self, now)
    }

    fn reregistrations(&self) -> u32 {
        SharedSubnet::reregistrations(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sa_answers_its_capacity_a_second_and_nothing_while_away() {
        let s = SharedSubnet::new(3).expect("a capacity");
        let t = Instant::from_ms(10);
        let answered = (0..5).filter(|_| s.query(t)).count();
        assert_eq!(answered, 3);
        s.away(Instant::from_ms(2_000), Duration::from_ms(500));
        assert!(!s.query(Instant::from_ms(2_100)));
        assert!(s.query(Instant::from_ms(2_500)));
        let st = s.stats();
        assert_eq!((st.accepted, st.refused_rate, st.refused_down), (4, 2, 1));
        let other = s.clone();
        other.reregister();
        assert_eq!(s.reregistrations(), 1);
        assert!(SharedSubnet::new(0).is_err());
    }
}
