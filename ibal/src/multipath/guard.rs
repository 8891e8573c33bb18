//! The last-path guard (docs/design.md §7): a guarded disk refuses a planned reset of the
//! adapter under one of its paths when no other path is Active and logged in, and names what
//! is missing. Only planned resets ask (RESET_QUERY): a forced reset or a fatal error is
//! never refused, since the guard protects maintenance, not recovery.
//!
//! The answer must still hold when the reset goes ahead (docs/design.md §3: the last answer before the
//! query closes counts). A path whose planned reset the disk consented to counts as
//! resetting from the consent until it is back after that reset, so of two overlapping
//! planned resets of the disk's adapters the second is refused; and while the query is
//! still open, the consenting path looks again whenever another path changes and vetoes
//! if the disk would now be left without one (see `SrpClient::recheck_consent`).

use hcabus::types::VetoReason;

use super::Multipath;

/// Why a path is not serving I/O, as the guard names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathGap {
    /// Its port is not Active (a cable out, link training, the subnet manager).
    PortDown,
    /// Its adapter is resetting (RESET heard, RESET_END not yet).
    Resetting,
    /// Its port is Active and it is not logged in (yet, or refused).
    LoggedOut,
    /// Its device failed or left.
    Failed,
}

impl PathGap {
    pub const fn as_str(self) -> &'static str {
        match self {
            PathGap::PortDown => "down",
            PathGap::Resetting => "resetting",
            PathGap::LoggedOut => "no login",
            PathGap::Failed => "failed",
        }
    }
}

/// Where a planned reset of a path's adapter that the disk consented to stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Consent {
    None,
    /// Consented; the query is still open (a veto may still come).
    Given,
    /// The reset went ahead: until the path is back up.
    ResetBegun,
}

/// Where a path runs: its adapter and port, for the guard's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathPlace {
    pub adapter: VetoReason,
    pub port: u8,
}

/// The reason a disk with one path gives: the adapter reset would take it.
pub fn only_path() -> VetoReason {
    VetoReason::cut("last path: no other path")
}

/// `"last path: hca1 port 1 down"`, built without allocating.
fn reason(place: Option<PathPlace>, gap: Option<PathGap>) -> VetoReason {
    let gap = gap.unwrap_or(PathGap::LoggedOut).as_str();
    let Some(place) = place else {
        return VetoReason::cut_parts(&["last path: other path ", gap]);
    };
    let digit = [b'0' + place.port.min(9)];
    let port = core::str::from_utf8(&digit).unwrap_or("?");
    VetoReason::cut_parts(&[
        "last path: ",
        place.adapter.as_str(),
        " port ",
        port,
        " ",
        gap,
    ])
}

impl Multipath {
    /// Path `path` runs through `adapter`'s port `port`.
    pub fn place_path(&mut self, path: usize, adapter: &str, port: u8) {
        if let Some(p) = self.paths.get_mut(path) {
            p.place = Some(PathPlace {
                adapter: VetoReason::cut(adapter),
                port,
            });
        }
    }

    /// Why `path` is not serving (`None` while it is).
    pub fn note_gap(&mut self, path: usize, gap: Option<PathGap>) {
        if let Some(p) = self.paths.get_mut(path) {
            p.gap = gap;
        }
    }

    /// The guard's answer for a planned reset of path `me`'s adapter: `None` (consent) when
    /// another path is up and not itself consented away, else the reason naming the first
    /// other path and why it is not.
    pub fn last_path(&self, me: usize) -> Option<VetoReason> {
        let mut others = self.paths.iter().enumerate().filter(|(i, _)| *i != me);
        let serves = |p: &super::PathState| p.up && p.dead.is_none() && p.consent == Consent::None;
        if others.clone().any(|(_, p)| serves(p)) {
            return None;
        }
        Some(match others.next() {
            Some((_, p)) if p.up && p.consent != Consent::None => {
                reason(p.place, Some(PathGap::Resetting))
            }
            Some((_, p)) => reason(p.place, p.gap),
            None => only_path(),
        })
    }

    /// The disk consented to a planned reset of `path`'s adapter: from now on the other
    /// paths' guards count it as resetting.
    pub fn consent_given(&mut self, path: usize) {
        if let Some(p) = self.paths.get_mut(path) {
            p.consent = Consent::Given;
        }
    }

    /// The reset consented to went ahead (RESET): the path stays counted as resetting
    /// until it is back up.
    pub fn consented_reset_began(&mut self, path: usize) {
        if let Some(p) = self.paths.get_mut(path) {
            if p.consent == Consent::Given {
                p.consent = Consent::ResetBegun;
            }
        }
    }

    /// The consent no longer stands: the disk vetoed after all, or the reset was called off.
    pub fn consent_withdrawn(&mut self, path: usize) {
        if let Some(p) = self.paths.get_mut(path) {
            p.consent = Consent::None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::DiskConfig;
    use crate::multipath::SharedMultipath;

    fn disk(paths: usize) -> SharedMultipath {
        let mp = SharedMultipath::new(
            "bootdisk",
            DiskConfig::default(),
            paths,
            crate::workload::fake::Steady::boxed(0, 0),
        );
        for p in 0..paths {
            mp.lock().place_path(p, &std::format!("hca{p}"), 1);
        }
        mp
    }

    #[test]
    fn another_path_up_is_consent_and_none_up_names_the_first_other_and_why() {
        let mp = disk(2);
        let mut m = mp.lock();
        m.path_is_up(0, hcabus::Instant::ZERO);
        m.path_is_up(1, hcabus::Instant::ZERO);
        m.note_gap(0, None);
        m.note_gap(1, None);
        assert_eq!(m.last_path(0), None, "hca1 carries the disk");
        assert_eq!(m.last_path(1), None, "hca0 carries the disk");
        for (gap, said) in [
            (PathGap::PortDown, "last path: hca1 port 1 down"),
            (PathGap::Resetting, "last path: hca1 port 1 resetting"),
            (PathGap::LoggedOut, "last path: hca1 port 1 no login"),
            (PathGap::Failed, "last path: hca1 port 1 failed"),
        ] {
            m.path_is_down(1, hcabus::Instant::ZERO, None);
            m.note_gap(1, Some(gap));
            assert_eq!(m.last_path(0).map(|r| r.to_string()), Some(said.into()));
        }
        // The path being asked about is not another path: hca0 down does not veto hca1's
        // reset on its own account, hca1's own state does not count for it.
        m.path_is_up(1, hcabus::Instant::ZERO);
        m.path_is_down(0, hcabus::Instant::ZERO, None);
        m.note_gap(0, Some(PathGap::PortDown));
        assert_eq!(m.last_path(0), None);
        assert_eq!(
            m.last_path(1).map(|r| r.to_string()),
            Some("last path: hca0 port 1 down".into())
        );
    }

    #[test]
    fn a_path_consented_away_counts_as_resetting_until_it_is_back_after_its_reset() {
        let mp = disk(2);
        let mut m = mp.lock();
        let t = hcabus::Instant::ZERO;
        m.path_is_up(0, t);
        m.path_is_up(1, t);
        assert_eq!(m.last_path(0), None);
        m.consent_given(0);
        assert_eq!(
            m.last_path(1).map(|r| r.to_string()),
            Some("last path: hca0 port 1 resetting".into()),
            "a second planned reset overlapping the first is refused"
        );
        // Called off: hca0 serves the disk again for hca1's guard.
        m.consent_withdrawn(0);
        assert_eq!(m.last_path(1), None);
        // Gone ahead: resetting through its outage, until it is back up.
        m.consent_given(0);
        m.consented_reset_began(0);
        m.path_is_down(0, t, None);
        m.note_gap(0, Some(PathGap::Resetting));
        assert!(m.last_path(1).is_some());
        m.path_is_up(0, t);
        assert_eq!(m.last_path(1), None, "back after the reset consented to");
        // A consent still open is not cleared by the path coming up: only its reset's end.
        m.consent_given(1);
        m.path_is_down(1, t, None);
        m.path_is_up(1, t);
        assert!(m.last_path(0).is_some(), "the query for hca1 is still open");
    }

    #[test]
    fn a_disk_of_one_path_always_refuses_and_a_long_adapter_name_is_cut() {
        let one = disk(1);
        let mut m = one.lock();
        m.path_is_up(0, hcabus::Instant::ZERO);
        assert_eq!(m.last_path(0), Some(only_path()));
        assert_eq!(only_path().as_str(), "last path: no other path");
        drop(m);
        let two = disk(2);
        let mut m = two.lock();
        m.place_path(1, "an-adapter-with-a-long-name", 2);
        let r = m.last_path(0).expect("no other path up");
        assert_eq!(r.as_str(), "last path: an-adapter-with-a-lon");
    }
}
