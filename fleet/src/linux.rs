//! Linux SRP initiators beside the product's hosts (docs/fleet.md "Linux initiators"): the
//! targets' other customers, as the kernel's ib_srp logs them in. A Linux host's login to
//! its target is `ch_count` channels, one after another, each a PathRecord then a CM REQ the
//! target serves as any login (`ib_srp.c` `srp_create_target()`, `srp_connect_ch()`; a
//! reconnect, `srp_reconnect_rport()`, the same): a fleet of them multiplies a target's
//! logins by its channel count, in the same queue as the product's. A REQ the target does
//! not answer (restarting) is sent again at the CM's timeout (6.1 s, ib_srp's grant), 16 in
//! all; a REJ (past an array's limits), a lookup unanswered or the REQs spent fail the
//! login, tried again `reconnect_delay` (10 s) later, as the SRP transport does.
//!
//! They sit on a leaf of their own (no product leaf's reboot reaches them) and power on as
//! the hosts do, each after its own power-restore delay (`fleet.power_on_delay_ms`), with
//! no boot firmware of their own. A target's restart drops their connections to it; a link flap every one, each
//! logging in again once its port is back; a handover that reassigns LIDs every one, after
//! the new master's sweep. A reconnect that fails is tried again `reconnect_delay` later,
//! longer past ten failures in a row; a connection not back `dev_loss_tmo` (600 s) after its
//! loss is removed, and srp_daemon adds its target again at its next rescan, as it makes a
//! first login that failed. Not modelled: their I/O and `fast_io_fail_tmo` (it fails I/O, not
//! logins); srp_daemon's own queries on them (`fleet.srp_daemon_rescan_ms` is the product's
//! hosts').

use std::vec::Vec;

use hcabus::{Duration, Instant};
use hcabus_lab::srp_target::LoginRejected;
use ibal::ipoib::SaAnswer;

use super::{Fleet, PowerOnSetup, Step};

/// The Linux initiators' power-on delays are drawn from a stream of their own.
const LINUX_STREAM: u64 = 0x4c69_6e75_7849_6e69;

/// ib_srp's CM REQ: packet lifetime 18 (1,024 ms) twice and the grant of 20 (4,096 ms).
pub const LINUX_REQ_TIMEOUT: Duration = Duration::from_ms(2 * 1_024 + 4_096);
/// REQs a channel's login sends before it fails (`max_cm_retries` 15, and the first).
pub const LINUX_REQS: u8 = 16;
/// ib_srp's PathRecord timeout (`SRP_PATH_REC_TIMEOUT_MS`).
pub const LINUX_PATH_TIMEOUT: Duration = Duration::from_ms(1_000);
/// The SRP transport's `reconnect_delay` (ib_srp's default), after a connection's loss or
/// a reconnect that failed.
pub const RECONNECT_DELAY: Duration = Duration::from_ms(10_000);
/// srp_daemon rescans every minute (its unit's `-R 60`) from when it started: a first login
/// that failed, or a target whose connection was removed, is logged in again at the next
/// rescan (the transport retries only a connection it still has).
pub const SRP_DAEMON_RESCAN: Duration = Duration::from_ms(60_000);
/// ib_srp's `dev_loss_tmo`: the rport of a connection not back this long after its loss is
/// removed (`rport_dev_loss_timedout()`), its reconnects with it.
pub const DEV_LOSS_TMO: Duration = Duration::from_ms(600_000);
/// The most channels a fleet's Linux initiators may have together: each channel's login
/// is a few steps of the fleet.
pub const MAX_LINUX_CHANNELS: u64 = 100_000;
/// ib_srp's channels on a two-socket host of 32 CPUs whose adapter has a completion
/// vector a CPU: `min(max(4 x 2, 32), 32)`.
pub const LINUX_CH_COUNT: u8 = 32;
/// The most Linux initiators a fleet may have.
pub const MAX_LINUX_HOSTS: u32 = 10_000;

/// The transport's wait before its next reconnect, after `failed` in a row
/// (`srp_reconnect_work()`: `reconnect_delay x clamp(failed - 10, 1, 100)`).
pub fn reconnect_delay(failed: u32) -> Duration {
    let times = failed.saturating_sub(10).clamp(1, 100);
    Duration::from_us(RECONNECT_DELAY.as_us() * u64::from(times))
}

/// How long the CM still waits for a REQ's answer once it has sent `req` of them before.
fn cm_waits(req: u8) -> Duration {
    Duration::from_us(LINUX_REQ_TIMEOUT.as_us() * u64::from(LINUX_REQS.saturating_sub(req)))
}

/// Linux initiators beside the fleet's hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinuxSetup {
    pub hosts: u32,
    /// Channels a login opens: ib_srp's `min(ch_count ?: max(4 x NUMA nodes, completion
    /// vectors), CPUs)`, 32 on a two-socket host of 32 CPUs whose adapter has a completion
    /// vector each.
    pub ch_count: u8,
}

/// What the Linux initiators did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinuxFigures {
    pub hosts: u32,
    pub ch_count: u8,
    /// Channels logged in, their PathRecords, their REQs sent again unanswered.
    pub channels: u64,
    pub path_records: u64,
    pub reqs_again: u64,
    /// Logins that failed (a REJ, a lookup, the REQs spent) and were tried again later.
    pub failed: u64,
    /// Connections removed at `dev_loss_tmo`, each added again at srp_daemon's next rescan;
    /// and the longest wait the transport's reconnect delay reached.
    pub removed: u64,
    pub longest_reconnect_delay: Duration,
    /// How many were logged in at the end, and the longest any took from its connection's
    /// loss (or the start) to its last channel.
    pub up: u32,
    pub longest_login: Duration,
}

/// One Linux host's login.
#[derive(Debug, Clone, Copy)]
struct Host {
    target: usize,
    /// Bumped at each loss: a step of an earlier login is stale.
    generation: u32,
    up: bool,
    /// Whether its transport has a connection to reconnect (an rport): a first login that
    /// fails, and one whose rport was removed, wait for srp_daemon.
    ever_up: bool,
    lost_at: Instant,
    /// Reconnects failed in a row (the rport's `failed_reconnects`).
    failed_reconnects: u32,
    /// When its rport goes if not reconnected by then (`dev_loss_tmo` after the first loss).
    dev_loss_at: Option<Instant>,
    /// When its srp_daemon made its first scan: it rescans every minute from then.
    daemon_from: Instant,
    /// When its port is back after the last loss: srp_daemon finds nothing before.
    port_back: Instant,
}

impl Host {
    /// srp_daemon's first rescan after `at`.
    fn next_rescan(&self, at: Instant) -> Instant {
        let since = at.saturating_since(self.daemon_from).as_us();
        let every = SRP_DAEMON_RESCAN.as_us();
        self.daemon_from + Duration::from_us((since / every + 1) * every)
    }
}

/// The Linux initiators.
#[derive(Debug, Clone)]
pub(super) struct Linux {
    setup: LinuxSetup,
    hosts: Vec<Host>,
    figures: LinuxFigures,
}

/// What a Linux host's step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinuxStep {
    /// Channel `ch`'s PathRecord.
    Lookup { ch: u8 },
    /// Channel `ch`'s REQ, its `req`th (0: the first), its path asked for at `asked`.
    Req { ch: u8, req: u8, asked: Instant },
    /// Its rport's `dev_loss_tmo` runs out.
    DevLoss,
}

/// What a Linux host's step came to.
enum Next {
    Step(Instant, LinuxStep),
    /// Every channel logged in.
    Up,
    /// The login failed; the initiator learns of it at this instant.
    Failed(Instant),
}

impl Linux {
    pub(super) fn new(setup: LinuxSetup, targets: usize) -> Self {
        let hosts = (0..setup.hosts)
            .map(|j| Host {
                target: j as usize % targets.max(1),
                generation: 0,
                up: false,
                ever_up: false,
                lost_at: Instant::ZERO,
                failed_reconnects: 0,
                dev_loss_at: None,
                daemon_from: Instant::ZERO,
                port_back: Instant::ZERO,
            })
            .collect();
        Linux {
            setup,
            hosts,
            figures: LinuxFigures {
                hosts: setup.hosts,
                ch_count: setup.ch_count,
                ..LinuxFigures::default()
            },
        }
    }
}

impl Fleet {
    /// The Linux initiators log in once their ports are Active: each after a power-restore
    /// delay drawn as the hosts' are (a stream of their own), none of them through a boot
    /// firmware.
    pub(super) fn start_linux(&mut self, setup: Option<LinuxSetup>, power_on: &PowerOnSetup) {
        let Some(setup) = setup.filter(|s| s.hosts > 0) else {
            return;
        };
        let mut linux = Linux::new(setup, self.targets.len());
        let starts = power_on.delays(self.seed ^ LINUX_STREAM, setup.hosts);
        let mut first = Vec::with_capacity(starts.len());
        for (h, start) in linux.hosts.iter_mut().zip(starts) {
            h.daemon_from = start + self.fabric;
            first.push(h.daemon_from);
        }
        self.linux = Some(linux);
        for (j, at) in (0..setup.hosts).zip(first) {
            self.linux_step(j, 0, at, LinuxStep::Lookup { ch: 0 });
        }
    }

    fn linux_step(&mut self, host: u32, generation: u32, at: Instant, step: LinuxStep) {
        self.insert_step(
            at,
            Step::Linux {
                host,
                generation,
                step,
            },
        );
    }

    /// Linux hosts lose their connections now (those of `target` only, if given): each
    /// learns of it at `detected` and reconnects `reconnect_delay` later, not before its
    /// port is back (`back`); one with no connection yet (a first login under way) logs in
    /// at srp_daemon's next rescan after that. A host not powered on yet has nothing to lose.
    pub(super) fn linux_lost(&mut self, target: Option<usize>, detected: Instant, back: Instant) {
        let now = self.now;
        let Some(l) = &mut self.linux else {
            return;
        };
        let mut restart = Vec::new();
        for (j, h) in l.hosts.iter_mut().enumerate() {
            if target.is_some_and(|t| t != h.target) || now < h.daemon_from {
                continue;
            }
            // One still logging in starts over too: its channels so far are gone. Its
            // rport's timer, once started, is not moved (`srp_start_tl_fail_timers()`).
            h.generation = h.generation.wrapping_add(1);
            if h.up {
                h.lost_at = now;
                h.dev_loss_at = Some(detected + DEV_LOSS_TMO);
            }
            h.up = false;
            h.port_back = back;
            let again = if h.ever_up {
                (detected + RECONNECT_DELAY).max(back)
            } else {
                h.next_rescan(detected.max(back))
            };
            restart.push((j as u32, h.generation, again, h.dev_loss_at));
        }
        for (j, generation, again, dev_loss_at) in restart {
            self.linux_step(j, generation, again, LinuxStep::Lookup { ch: 0 });
            if let Some(at) = dev_loss_at {
                self.linux_step(j, generation, at, LinuxStep::DevLoss);
            }
        }
    }

    /// A Linux host's step, unless a loss since made it stale.
    pub(super) fn linux(&mut self, host: u32, generation: u32, step: LinuxStep) {
        let Some(l) = &self.linux else {
            return;
        };
        if l.hosts[host as usize].generation != generation {
            return;
        }
        let next = match step {
            LinuxStep::Lookup { ch } => self.linux_lookup(ch),
            LinuxStep::Req { ch, req, asked } => self.linux_req(host, (ch, req), asked),
            LinuxStep::DevLoss => return self.linux_dev_loss(host),
        };
        let now = self.now;
        let Some(l) = &mut self.linux else {
            return;
        };
        let (at, step) = match next {
            Next::Step(at, step) => (at, step),
            Next::Up => return,
            // A reconnect that failed is tried again at the transport's delay, from when the
            // initiator learned of it; a first login at srp_daemon's next rescan.
            Next::Failed(noticed) => {
                l.figures.failed += 1;
                let noticed = noticed.max(now);
                let h = &mut l.hosts[host as usize];
                let at = if h.ever_up {
                    h.failed_reconnects = h.failed_reconnects.saturating_add(1);
                    let delay = reconnect_delay(h.failed_reconnects);
                    l.figures.longest_reconnect_delay =
                        l.figures.longest_reconnect_delay.max(delay);
                    noticed + delay
                } else {
                    h.next_rescan(noticed)
                };
                (at, LinuxStep::Lookup { ch: 0 })
            }
        };
        self.linux_step(host, generation, at, step);
    }

    /// `dev_loss_tmo` ran out on a connection not back: its rport goes, the login under way
    /// with it, and srp_daemon adds the target again at its next rescan.
    fn linux_dev_loss(&mut self, host: u32) {
        let now = self.now;
        let Some(l) = &mut self.linux else {
            return;
        };
        let h = &mut l.hosts[host as usize];
        if h.up || h.dev_loss_at != Some(now) {
            return;
        }
        l.figures.removed += 1;
        h.generation = h.generation.wrapping_add(1);
        h.ever_up = false;
        h.failed_reconnects = 0;
        h.dev_loss_at = None;
        let (generation, at) = (h.generation, h.next_rescan(now.max(h.port_back)));
        self.linux_step(host, generation, at, LinuxStep::Lookup { ch: 0 });
    }

    /// Channel `ch`'s PathRecord, asked now.
    fn linux_lookup(&mut self, ch: u8) -> Next {
        let now = self.now;
        let Some(l) = &mut self.linux else {
            return Next::Up;
        };
        l.figures.path_records += 1;
        match self.subnet.query(now, LINUX_PATH_TIMEOUT) {
            SaAnswer::At(at) if at <= now + LINUX_PATH_TIMEOUT => Next::Step(
                at,
                LinuxStep::Req {
                    ch,
                    req: 0,
                    asked: now,
                },
            ),
            SaAnswer::Busy(at) => Next::Failed(at),
            SaAnswer::At(_) | SaAnswer::Lost => Next::Failed(now + LINUX_PATH_TIMEOUT),
        }
    }

    /// Channel `ch`'s REQ, its `req`th, sent now, its path asked for at `asked`.
    fn linux_req(&mut self, host: u32, (ch, req): (u8, u8), asked: Instant) -> Next {
        let now = self.now;
        // An answer a master's failure cut off on its way never came.
        if req == 0 && !self.subnet.survived(asked, now) {
            return Next::Failed(asked + LINUX_PATH_TIMEOUT);
        }
        let Some(l) = &mut self.linux else {
            return Next::Up;
        };
        let target = l.hosts[host as usize].target;
        let answer = self.targets[target].1.lock().try_login(now, self.login);
        match answer {
            Ok(wait) if wait + self.login <= cm_waits(req) => {
                l.figures.channels += 1;
                let done = now + wait + self.login;
                if ch + 1 < l.setup.ch_count {
                    return Next::Step(done, LinuxStep::Lookup { ch: ch + 1 });
                }
                let h = &mut l.hosts[host as usize];
                h.up = true;
                h.ever_up = true;
                h.failed_reconnects = 0;
                h.dev_loss_at = None;
                let took = done.saturating_since(h.lost_at);
                l.figures.longest_login = l.figures.longest_login.max(took);
                Next::Up
            }
            // Served after the CM's last REQ timed out: it gave up then.
            Ok(_) => Next::Failed(now + cm_waits(req)),
            Err(LoginRejected::Busy(_)) => Next::Failed(now),
            Err(LoginRejected::Restarting | LoginRejected::Unreachable) => {
                if req + 1 < LINUX_REQS {
                    l.figures.reqs_again += 1;
                    let again = LinuxStep::Req {
                        ch,
                        req: req + 1,
                        asked,
                    };
                    Next::Step(now + LINUX_REQ_TIMEOUT, again)
                } else {
                    Next::Failed(now + LINUX_REQ_TIMEOUT)
                }
            }
        }
    }

    /// What the Linux initiators did (`None`: the fleet has none).
    pub fn linux_figures(&self) -> Option<LinuxFigures> {
        self.linux.as_ref().map(|l| LinuxFigures {
            up: l.hosts.iter().filter(|h| h.up).count() as u32,
            ..l.figures
        })
    }
}
