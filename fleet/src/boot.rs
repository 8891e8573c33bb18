//! A fleet powering on as one does (docs/fleet.md, design.md §11 "A power-on host by host"): each host's BMC waits its
//! power-restore delay; the boot firmware (FlexBoot) brings a port up, asks the SA for the
//! path to the boot disk's target, logs in and loads the operating system through it; the
//! operating system's driver then starts the stack, whose ports train again and whose disks
//! log in anew (the target's second login from the host, taking over the firmware's channel).
//!
//! A port that trains is Active once a sweep of the subnet manager reaches it. Each port
//! that comes up sends a trap and the master sweeps the fabric again: a port trained after
//! the running sweep passed it waits for the next, which starts when that one ends. Hosts
//! that start one after another keep the master sweeping back to back.
//!
//! A host is built at the fleet's build (its resources checked then) and built again, as it
//! is, when its operating system starts: nothing of it runs before. A fault that strikes a
//! host that is still off does not reach it, but a subnet manager away meanwhile does (its
//! ports wait for a master).

use std::string::String;
use std::vec::Vec;

use hcabus::{Duration, Instant};
use ibal::ipoib::SaAnswer;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use hcabus::verbs::Lid;
use hcabus_lab::srp_target::{Admission, LoginCapacity, SharedAdmission};
use hcabus_lab::subnet::SharedSubnet;
use std::collections::BinaryHeap;

use super::{template, Fleet, FleetSetup, SmSetup, Step};

/// How long the firmware waits for the SA's PathRecord answer: the product's own (ib_srp's
/// `SRP_PATH_REC_TIMEOUT_MS`); FlexBoot's is not published.
pub const FIRMWARE_LOOKUP_TIMEOUT: Duration = Duration::from_ms(1_000);
/// iPXE's `SAN_REOPEN_DELAY_SECS`: the wait before the firmware opens the boot disk again
/// after a try failed.
pub const FIRMWARE_REOPEN_DELAY: Duration = Duration::from_ms(5_000);
/// iPXE's `SAN_DEFAULT_RETRIES`: the firmware's tries past the first before the boot fails.
pub const FIRMWARE_RETRIES: u8 = 10;
/// How long the firmware waits for its login's answer (a target serving logins one at a
/// time, far behind): a failed try then. iPXE's own bound on a login was not read; this is
/// its bound on a SAN command (`SAN_COMMAND_TIMEOUT`), an estimate.
pub const FIRMWARE_COMMAND_TIMEOUT: Duration = Duration::from_ms(15_000);

/// How the fleet powers on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PowerOnSetup {
    /// Each host's power-restore delay, drawn for it (seeded) from this range: none by
    /// default (every host at once, Intel's and Lenovo's default); Intel's "Auto" is 25 to
    /// 300 s, Lenovo's random delay 1 to 15 s.
    pub delay: (Duration, Duration),
    /// The boot firmware logs each host's boot disk in first and loads the operating system
    /// through it: this long from its login to the driver's start. `None`: the operating
    /// system's login is each host's first.
    pub firmware: Option<Duration>,
}

impl PowerOnSetup {
    /// Whether the hosts power on other than all at once with no firmware of their own:
    /// each then starts at its own step.
    pub fn staged(&self) -> bool {
        self.delay.1 > Duration::ZERO || self.firmware.is_some()
    }

    /// Whether a delay range can be: refused by its key otherwise.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.delay.0 > self.delay.1 {
            return Err("power_on_delay_ms: the least delay is above the most");
        }
        if self.firmware.is_some_and(|f| f == Duration::ZERO) {
            return Err("firmware_boot_ms: must be at least 1");
        }
        Ok(())
    }

    /// Each host's power-on instant, drawn from `seed`.
    pub(super) fn delays(&self, seed: u64, hosts: u32) -> Vec<Instant> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x506f_7765_724f_6e00);
        let (least, most) = (self.delay.0.as_us(), self.delay.1.as_us());
        (0..hosts)
            .map(|_| Instant::from_us(rng.gen_range(least..=most)))
            .collect()
    }
}

/// The master's sweeps, each started by a trap from a port that came up: the one running
/// or due last, and the one before it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sweeps {
    before: Option<Instant>,
    latest: Option<Instant>,
}

impl Sweeps {
    /// When a sweep reaches host `i`'s port, trained at `trained`, of a fabric of `hosts`:
    /// the running (or next) sweep if it has not passed the port yet, else one more after
    /// it (or at once if none runs by then). Asked in the order the ports train.
    pub(super) fn reach(&mut self, trained: Instant, i: u32, sm: &SmSetup, hosts: u32) -> Instant {
        let at = |start: Instant| start + sm.reaches(i);
        for start in [self.before, self.latest].into_iter().flatten() {
            if at(start) >= trained {
                return at(start);
            }
        }
        let next = match self.latest {
            Some(start) => trained.max(start + sm.sweep(hosts)),
            None => trained,
        };
        self.before = self.latest;
        self.latest = Some(next);
        at(next)
    }
}

/// Where each host is in its power-on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Off, or its firmware at work.
    Off,
    /// Its firmware gave up on the boot disk: the host never starts.
    Failed,
    /// Its operating system started at this instant.
    Running(Instant),
}

/// What the power-on's firmware did, for the figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FirmwareFigures {
    /// Logins the firmware made (each host's first, at its boot disk's target).
    pub logins: u64,
    /// Tries that failed (the SA did not answer in time, the target refused, its answer later
    /// than the firmware waits or cut off by a master's failure) and were made again after
    /// iPXE's reopen delay.
    pub retries: u64,
    /// Hosts whose firmware gave the boot disk up after its last try: never started.
    pub boot_failures: u64,
    /// Hosts still off at the run's end (their delay or their firmware not done yet).
    pub still_off: u64,
    /// When the last host's operating system started (none yet: `None`).
    pub last_os_start: Option<Instant>,
    /// When the last host's ports were Active under its operating system.
    pub last_port_active: Option<Instant>,
}

/// The power-on in progress.
#[derive(Debug, Clone)]
pub(super) struct Boot {
    pub(super) setup: PowerOnSetup,
    pub(super) sweeps: Sweeps,
    pub(super) phase: Vec<Phase>,
    /// Each host's boot disk's target (`None`: the template has none; the firmware then
    /// boots from elsewhere and only the driver's start is modelled).
    pub(super) boot_target: Vec<Option<usize>>,
    /// The latest window with no master (a failover): a host that starts in it waits.
    pub(super) sm_away: Option<(Instant, Instant)>,
    pub(super) figures: FirmwareFigures,
}

/// How a firmware login went: answered after this long, refused (or its answer cut off),
/// or answered later than the firmware waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Login {
    Answered(Duration),
    Refused,
    TooLate,
}

impl Login {
    /// A login the target answers after `takes` (its wait and the login), or refused.
    pub(super) fn of(takes: Option<Duration>) -> Self {
        match takes {
            Some(t) if t > FIRMWARE_COMMAND_TIMEOUT => Login::TooLate,
            Some(t) => Login::Answered(t),
            None => Login::Refused,
        }
    }
}

/// What the fleet does at a power-on step: the next step, or the operating system's start
/// with its ports pulled until the sweep reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    Step(Instant, Step),
    OsStarts { pulled_for: Duration },
    Nothing,
}

impl Boot {
    pub(super) fn new(setup: PowerOnSetup, boot_target: Vec<Option<usize>>) -> Self {
        Boot {
            setup,
            sweeps: Sweeps::default(),
            phase: std::vec![Phase::Off; boot_target.len()],
            boot_target,
            sm_away: None,
            figures: FirmwareFigures::default(),
        }
    }

    /// Host `i` powers on at `now` with ports that train in `link_up`: its firmware's port
    /// is Active when a sweep reaches it, or, with no firmware, its operating system starts.
    pub(super) fn powered(
        &mut self,
        i: u32,
        now: Instant,
        fabric: (&SmSetup, u32, Duration),
    ) -> Next {
        let (sm, hosts, link_up) = fabric;
        match (self.setup.firmware, self.boot_target[i as usize]) {
            (Some(_), Some(_)) => {
                let active = self.active_at(now + link_up, i, (sm, hosts));
                Next::Step(active, Step::FirmwareLookup { host: i, tries: 0 })
            }
            _ => self.os_starts(i, now, fabric),
        }
    }

    /// The firmware's PathRecord query was answered `answer` (sent at `now`): its login
    /// when the answer comes in time, else another try.
    pub(super) fn looked_up(&mut self, i: u32, tries: u8, now: Instant, answer: SaAnswer) -> Next {
        match answer {
            SaAnswer::At(t) if t <= now + FIRMWARE_LOOKUP_TIMEOUT => {
                let login = Step::FirmwareLogin {
                    host: i,
                    tries,
                    asked: now,
                };
                Next::Step(t, login)
            }
            SaAnswer::At(_) | SaAnswer::Lost => {
                self.failed(i, tries, now + FIRMWARE_LOOKUP_TIMEOUT)
            }
            SaAnswer::Busy(t) => self.failed(i, tries, t),
        }
    }

    /// The firmware's login at `now`: accepted (taking `login`), the operating system
    /// starts once it is loaded; refused, another try.
    pub(super) fn logged_in(&mut self, i: u32, tries: u8, now: Instant, outcome: Login) -> Next {
        match (outcome, self.setup.firmware) {
            (Login::Answered(login), Some(load)) => {
                self.figures.logins += 1;
                Next::Step(now + login + load, Step::OsStart(i))
            }
            // The firmware waits out its bound before it gives the try up.
            (Login::TooLate, _) => self.failed(i, tries, now + FIRMWARE_COMMAND_TIMEOUT),
            _ => self.failed(i, tries, now),
        }
    }

    /// A try of host `i`'s firmware failed at `at`: it opens the boot disk again after
    /// iPXE's delay, or, past its last try, the boot fails.
    fn failed(&mut self, i: u32, tries: u8, at: Instant) -> Next {
        if tries >= FIRMWARE_RETRIES {
            log::error!(
                "fleet: host {i}'s boot firmware gave its boot disk up after {} tries",
                tries + 1
            );
            self.phase[i as usize] = Phase::Failed;
            self.figures.boot_failures += 1;
            return Next::Nothing;
        }
        self.figures.retries += 1;
        let again = Step::FirmwareLookup {
            host: i,
            tries: tries + 1,
        };
        Next::Step(at + FIRMWARE_REOPEN_DELAY, again)
    }

    /// Host `i`'s operating system starts at `now`: its driver resets the adapter, whose
    /// ports train again and are Active when a sweep reaches them (or once a master is back).
    pub(super) fn os_starts(
        &mut self,
        i: u32,
        now: Instant,
        fabric: (&SmSetup, u32, Duration),
    ) -> Next {
        let (sm, hosts, link_up) = fabric;
        let trained = now + link_up;
        let active = self.active_at(trained, i, (sm, hosts));
        self.phase[i as usize] = Phase::Running(now);
        let f = &mut self.figures;
        f.last_os_start = f.last_os_start.max(Some(now));
        f.last_port_active = f.last_port_active.max(Some(active));
        // The adapter's model trains the port when its cable is back, then adds the sweep's
        // base: the cable is out until the sweep reaches it.
        let reached = active.saturating_since(trained + sm.sweep_base);
        Next::OsStarts {
            pulled_for: reached + Duration::from_us(1),
        }
    }

    /// When host `i`'s port trained at `trained` is Active: a sweep reaches it, then the
    /// sweep's base; or, if that falls while no master is there, once one is back (as the
    /// adapter's own model has it, `SimPorts::swept_at`).
    fn active_at(&mut self, trained: Instant, i: u32, (sm, hosts): (&SmSetup, u32)) -> Instant {
        let active = self.sweeps.reach(trained, i, sm, hosts) + sm.sweep_base;
        match self.sm_away {
            Some((gone, back)) if gone <= active && active < back => back,
            _ => active,
        }
    }
}

/// What the fabric and the firmware alone would make of the power-on, with no operating
/// system's login in the way: when the first and the last host's ports are Active under
/// their operating systems. The same rules as the run (the sweeps, each target's capacity,
/// iPXE's tries), with the SA answering each lookup in its own time; what the run takes
/// past it is the policies' doing. `None` when no host would start.
pub(super) struct Ideal<'a> {
    pub(super) power_on: PowerOnSetup,
    pub(super) starts: &'a [Instant],
    pub(super) boot_target: &'a [Option<usize>],
    pub(super) capacities: &'a [LoginCapacity],
    pub(super) sm: &'a SmSetup,
    /// A link's training, a login, the SA's answer to one query.
    pub(super) link_up: Duration,
    pub(super) login: Duration,
    pub(super) lookup: Duration,
}

/// An event of the ideal power-on: (instant, host, what): a port trained under the firmware
/// (0), a firmware login tried (1 + the try), a port trained under the OS (`u8::MAX`).
type IdealEvent = core::cmp::Reverse<(Instant, u32, u8)>;

impl Ideal<'_> {
    pub(super) fn active(&self) -> Option<(Instant, Instant)> {
        const OS: u8 = u8::MAX;
        let hosts = self.starts.len() as u32;
        let mut admissions: Vec<Admission> = self
            .capacities
            .iter()
            .filter_map(|c| Admission::new(*c).ok())
            .collect();
        let mut events: BinaryHeap<IdealEvent> = BinaryHeap::with_capacity(self.starts.len());
        for (i, p) in self.starts.iter().enumerate() {
            let firmware = self.power_on.firmware.is_some() && self.boot_target[i].is_some();
            let what = if firmware { 0 } else { OS };
            events.push(core::cmp::Reverse((*p + self.link_up, i as u32, what)));
        }
        let (mut sweeps, mut span) = (Sweeps::default(), None::<(Instant, Instant)>);
        let load = self.power_on.firmware.unwrap_or(Duration::ZERO);
        while let Some(core::cmp::Reverse((at, i, what))) = events.pop() {
            let next = match what {
                OS => {
                    let active = sweeps.reach(at, i, self.sm, hosts) + self.sm.sweep_base;
                    span = Some(
                        span.map_or((active, active), |(a, b)| (a.min(active), b.max(active))),
                    );
                    continue;
                }
                0 => (
                    sweeps.reach(at, i, self.sm, hosts) + self.sm.sweep_base + self.lookup,
                    1,
                ),
                tried => {
                    let t = self.boot_target[i as usize].unwrap_or(0);
                    let takes = admissions
                        .get_mut(t)
                        .and_then(|a| a.try_login(at, self.login).ok())
                        .map(|wait| wait + self.login);
                    let failed_at = match Login::of(takes) {
                        Login::Answered(takes) => {
                            events.push(core::cmp::Reverse((
                                at + takes + load + self.link_up,
                                i,
                                OS,
                            )));
                            continue;
                        }
                        Login::TooLate => at + FIRMWARE_COMMAND_TIMEOUT,
                        Login::Refused => at,
                    };
                    if tried > FIRMWARE_RETRIES {
                        continue;
                    }
                    (failed_at + FIRMWARE_REOPEN_DELAY + self.lookup, tried + 1)
                }
            };
            events.push(core::cmp::Reverse((next.0, i, next.1)));
        }
        span
    }
}

/// A fleet's power-on host by host: the power-on, and what it takes to build a host again
/// when its operating system starts.
#[derive(Debug)]
pub(super) struct Staged {
    pub(super) boot: Boot,
    /// When the first and the last host's ports would be Active with the fabric and the
    /// firmware alone ([`Ideal`]): the power-on's minimum.
    pub(super) ideal: Option<(Instant, Instant)>,
    /// Hosts that could not be built again at their operating system's start (a broken
    /// invariant: the same template built them once), each with why: the run stops there.
    pub(super) not_started: Vec<String>,
    setup: FleetSetup,
    shared: Vec<(Lid, SharedAdmission)>,
    subnet: SharedSubnet,
}

impl Fleet {
    /// Stages the power-on `setup` asks for: each host's power-on a step of its own.
    pub(super) fn stage(
        &mut self,
        setup: &FleetSetup,
        shared: &[(Lid, SharedAdmission)],
        subnet: &SharedSubnet,
    ) {
        if !setup.power_on.staged() {
            return;
        }
        let boot_target: Vec<Option<usize>> = self
            .hosts
            .iter()
            .zip(&self.disk_targets)
            .map(|(h, targets)| {
                let k = h.disks().position(|d| d.disk().config().boot)?;
                targets.get(k).copied()
            })
            .collect();
        let starts = setup.power_on.delays(setup.seed, setup.hosts);
        let capacities: Vec<LoginCapacity> = setup.targets.iter().map(|t| t.capacity).collect();
        let ideal = Ideal {
            power_on: setup.power_on,
            starts: &starts,
            boot_target: &boot_target,
            capacities: &capacities,
            sm: &self.sm,
            link_up: self.link_up(),
            login: self.login,
            lookup: super::figures::sa_takes(1, &self.sm.sa),
        }
        .active();
        // After the setup's faults: a fault comes before a power-on at the same instant.
        for (i, at) in starts.iter().enumerate() {
            self.insert_step(*at, Step::PowerOn(i as u32));
        }
        self.staged = Some(std::boxed::Box::new(Staged {
            boot: Boot::new(setup.power_on, boot_target),
            ideal,
            setup: setup.clone(),
            shared: shared.to_vec(),
            subnet: subnet.clone(),
            not_started: Vec::new(),
        }));
    }

    /// A link's training: the fabric's time to an Active port less the sweep's base.
    pub(super) fn link_up(&self) -> Duration {
        Duration::from_us(
            self.fabric
                .as_us()
                .saturating_sub(self.sm.sweep_base.as_us()),
        )
    }

    /// A step of the staged power-on.
    pub(super) fn power_step(&mut self, step: Step) {
        let now = self.now;
        let hosts = self.hosts.len() as u32;
        let link_up = self.link_up();
        let Some(staged) = &mut self.staged else {
            return;
        };
        let boot = &mut staged.boot;
        let fabric = (&self.sm, hosts, link_up);
        let (host, next) = match step {
            Step::PowerOn(i) => (i, boot.powered(i, now, fabric)),
            Step::FirmwareLookup { host, tries } => {
                let answer = staged.subnet.query(now, FIRMWARE_LOOKUP_TIMEOUT);
                (host, boot.looked_up(host, tries, now, answer))
            }
            // An answer a master's failure cut off on its way never came: a failed try.
            Step::FirmwareLogin { host, tries, asked } => {
                let answered = staged.subnet.survived(asked, now);
                // Answered too late for the firmware, the target's time is spent all the same.
                let takes = boot.boot_target[host as usize]
                    .filter(|_| answered)
                    .and_then(|t| {
                        let mut a = self.targets[t].1.lock();
                        let wait = a.try_login(now, self.login).ok()?;
                        Some(wait + self.login)
                    });
                (host, boot.logged_in(host, tries, now, Login::of(takes)))
            }
            Step::OsStart(i) => (i, boot.os_starts(i, now, fabric)),
            Step::Fault(_)
            | Step::RolloutLook
            | Step::Rescan { .. }
            | Step::Bounce { .. }
            | Step::Linux { .. } => return,
        };
        match next {
            Next::Step(at, step) => self.insert_step(at, step),
            Next::OsStarts { pulled_for } => self.start_os(host, pulled_for),
            Next::Nothing => {}
        }
    }

    /// Host `i`'s operating system starts now: the host is built again as it is, starting
    /// now with its ports pulled for `pulled_for`, and stepped from now on.
    fn start_os(&mut self, i: u32, pulled_for: Duration) {
        let Some(staged) = &self.staged else {
            return;
        };
        let (setup, shared) = (&staged.setup, staged.shared.as_slice());
        let power = Some((self.now, pulled_for));
        match template::fleet_host(setup, i, (shared, &staged.subnet), power) {
            Ok((host, _)) => {
                self.hosts[i as usize] = host;
                // A trap storm's plan reaches it as it does every host (`traps.rs`).
                self.install_sweeps(i);
                self.schedule(i);
                // Its srp_daemon starts with it: a first rescan once its port is Active.
                let active = self.now + pulled_for + self.fabric;
                self.rescan_at(i, active, super::daemon::Cause::Period);
            }
            // Built once already from the same template: only a broken invariant lands here,
            // and the run stops with it counted as a violation.
            Err(e) => {
                log::error!("fleet {}: host {i} could not start: {e}", self.name);
                if let Some(staged) = &mut self.staged {
                    staged
                        .not_started
                        .push(std::format!("host{i}: could not start: {e}"));
                }
                self.stopped = true;
            }
        }
    }

    /// Whether host `i` has not started yet (or never will) in a staged power-on: a fault
    /// does not reach it, and nothing steps it, until its operating system starts.
    pub(super) fn powered_off(&self, i: u32) -> bool {
        self.staged
            .as_ref()
            .is_some_and(|s| !matches!(s.boot.phase[i as usize], Phase::Running(_)))
    }

    /// The first and the last host's ports Active with the fabric and the firmware alone.
    pub(super) fn ideal_active(&self) -> Option<(Instant, Instant)> {
        self.staged.as_ref().and_then(|s| s.ideal)
    }

    /// Hosts that could not be built again at their start, each with why.
    pub(super) fn not_started(&self) -> &[String] {
        self.staged.as_ref().map_or(&[], |s| &s.not_started)
    }

    /// How the hosts power on.
    pub fn power_on(&self) -> PowerOnSetup {
        self.staged
            .as_ref()
            .map_or(PowerOnSetup::default(), |s| s.boot.setup)
    }

    /// What the staged power-on's firmware did (`None`: every host powered on at once).
    pub fn firmware(&self) -> Option<FirmwareFigures> {
        self.staged.as_ref().map(|s| FirmwareFigures {
            still_off: s.boot.phase.iter().filter(|p| **p == Phase::Off).count() as u64,
            ..s.boot.figures
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_ms(ms)
    }

    /// One sweep catches every port trained before it passes them; a port it passed waits
    /// for the next, which starts as this one ends; one trained after that starts its own.
    #[test]
    fn sweeps_run_back_to_back_while_ports_keep_coming_up() {
        let sm = SmSetup::default(); // 500 ms + 2 ms a host: 700 ms for 100 hosts.
        let mut s = Sweeps::default();
        assert_eq!(s.reach(at(1_000), 0, &sm, 100), at(1_000));
        // Host 50 is reached 100 ms into the sweep: trained by then, it is caught.
        assert_eq!(s.reach(at(1_050), 50, &sm, 100), at(1_100));
        // Host 10 was passed at 1,020 ms: the next sweep, at 1,700 ms, reaches it.
        assert_eq!(s.reach(at(1_050), 10, &sm, 100), at(1_720));
        // Host 90 trained at 1,150 ms: the first sweep reaches it at 1,180 ms.
        assert_eq!(s.reach(at(1_150), 90, &sm, 100), at(1_180));
        // Long after both: a sweep of its own.
        assert_eq!(s.reach(at(9_000), 5, &sm, 100), at(9_010));
    }

    #[test]
    fn a_delay_range_is_drawn_per_host_within_it_and_checked() {
        let p = PowerOnSetup {
            delay: (Duration::from_ms(25_000), Duration::from_ms(300_000)),
            firmware: None,
        };
        assert!(p.staged() && p.check().is_ok());
        let d = p.delays(7, 1_000);
        assert!(d.iter().all(|t| (at(25_000)..=at(300_000)).contains(t)));
        assert!(d.iter().any(|t| *t < at(60_000)) && d.iter().any(|t| *t > at(260_000)));
        assert_eq!(d, p.delays(7, 1_000), "the same for a seed");
        assert!(!PowerOnSetup::default().staged());
        let backwards = PowerOnSetup {
            delay: (Duration::from_ms(2), Duration::from_ms(1)),
            firmware: None,
        };
        assert!(matches!(backwards.check(), Err(e) if e.starts_with("power_on_delay_ms")));
    }

    /// The firmware tries eleven times, each after iPXE's five seconds, then gives up.
    #[test]
    fn the_firmware_reopens_after_five_seconds_ten_times_then_the_boot_fails() {
        let setup = PowerOnSetup {
            delay: (Duration::ZERO, Duration::ZERO),
            firmware: Some(Duration::from_ms(20_000)),
        };
        let mut b = Boot::new(setup, std::vec![Some(0)]);
        let mut now = at(0);
        for tries in 0..=FIRMWARE_RETRIES {
            match b.logged_in(0, tries, now, Login::Refused) {
                Next::Step(
                    t,
                    Step::FirmwareLookup {
                        host: 0,
                        tries: next,
                    },
                ) => {
                    assert_eq!((t, next), (now + FIRMWARE_REOPEN_DELAY, tries + 1));
                    now = t;
                }
                Next::Nothing => assert_eq!(tries, FIRMWARE_RETRIES),
                other => panic!("try {tries}: {other:?}"),
            }
        }
        assert_eq!(b.phase[0], Phase::Failed);
        assert_eq!((b.figures.retries, b.figures.boot_failures), (10, 1));
        // A late answer is a failed try; one in time leads to the login.
        let late = b.looked_up(0, 0, at(0), SaAnswer::At(at(1_001)));
        assert!(matches!(late, Next::Step(t, _) if t == at(6_000)));
        let ok = b.looked_up(0, 0, at(0), SaAnswer::At(at(3)));
        assert_eq!(
            ok,
            Next::Step(
                at(3),
                Step::FirmwareLogin {
                    host: 0,
                    tries: 0,
                    asked: at(0)
                }
            )
        );
        // A login answered past the firmware's wait fails the try when the wait is over.
        let late = b.logged_in(0, 0, at(3), Login::of(Some(Duration::from_ms(15_001))));
        let reopen = FIRMWARE_COMMAND_TIMEOUT + FIRMWARE_REOPEN_DELAY;
        assert!(
            matches!(late, Next::Step(t, Step::FirmwareLookup { tries: 1, .. }) if t == at(3) + reopen)
        );
        let login = b.logged_in(0, 0, at(3), Login::Answered(Duration::from_ms(20)));
        assert_eq!(login, Next::Step(at(20_023), Step::OsStart(0)));
    }
}
