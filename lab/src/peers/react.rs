//! What each peer does when a path goes wrong: its transport's error, its reconnects, its
//! checkers and keep-alives, its command timeouts, and I/O with no path left
//! (docs/peers.md §1-§4).

use hcabus::{Duration, Instant};
use ibal::io::IoStatus;

use super::engine::{Conn, Engine, Ev, Tag};
use super::{noticed, timers, Peer};

impl Engine {
    /// The path's queue pair erred (retry exceeded) on its current connection.
    pub(super) fn transport_error(&mut self, p: usize) {
        let now = self.now;
        let ids = self.take_all(p);
        let path = &mut self.paths[p];
        path.gen += 1;
        path.conn = Conn::Down {
            since: now,
            fail_fast: false,
        };
        let gen = path.gen;
        match self.peer {
            Peer::DmSrp(_) => {
                // The rport is blocked: its commands wait for the reconnect (which retries
                // them on this path) or for fast_io_fail (which fails them over).
                self.paths[p].parked = ids.into();
                self.at(now + timers::SRP_RECONNECT_DELAY, Ev::Reconnect(p, gen));
                self.at(now + timers::SRP_FAST_IO_FAIL, Ev::FastIoFail(p, gen));
            }
            Peer::Nvme(_) => {
                // Error recovery: every command cancelled with a path status and re-driven
                // on another path; the controller reconnects every reconnect_delay.
                self.paths[p].check_out = None;
                self.take_out(p);
                self.at(now + timers::NVME_RECONNECT_DELAY, Ev::Reconnect(p, gen));
                self.fail_over(p, ids);
            }
            Peer::Mpio(_) => {
                // Assumed (docs/peers.md): the SRP miniport completes the path's requests
                // with a status the DSM takes as fatal, and MPIO re-issues them.
                self.take_out(p);
                self.at(now + timers::PATH_RECOVERY, Ev::Reconnect(p, gen));
                self.fail_over(p, ids);
            }
        }
    }

    /// A reconnect (SRP, NVMe) or a path recovery (MPIO) of path `p`.
    pub(super) fn reconnect(&mut self, p: usize) {
        let Conn::Down { since, .. } = self.paths[p].conn else {
            return;
        };
        let (now, gen) = (self.now, self.paths[p].gen);
        if !self.paths[p].port.open(now) {
            let again = match self.peer {
                Peer::DmSrp(_) => timers::SRP_RECONNECT_DELAY,
                Peer::Nvme(_) => timers::NVME_RECONNECT_DELAY,
                Peer::Mpio(_) => timers::PATH_RECOVERY,
            };
            let lost = matches!(self.peer, Peer::Nvme(_))
                && now.saturating_since(since) >= timers::CTRL_LOSS_TMO;
            if !lost {
                self.at(now + again, Ev::Reconnect(p, gen));
            }
            return;
        }
        // The login's time is short against every timer here: it is not modelled.
        self.paths[p].conn = Conn::Live;
        match self.peer {
            Peer::DmSrp(_) => {
                // DID_RESET: the mid-layer sends them again on this path. dm takes a
                // failed path back when multipathd's next TUR passes.
                let parked: Vec<u64> = self.paths[p].parked.drain(..).collect();
                for id in parked {
                    self.give(p, id);
                }
                // A TUR that waited behind the blocked rport goes now.
                if let Some((seq, _)) = self.paths[p].check_out {
                    self.transmit(p, Tag::Check(seq));
                }
            }
            Peer::Nvme(_) | Peer::Mpio(_) => {
                self.paths[p].usable = true;
                self.lost_all = None;
                if matches!(self.peer, Peer::Nvme(_)) {
                    self.at(now + timers::KEEP_ALIVE_PERIOD, Ev::Check(p));
                }
            }
        }
        self.dispatch();
    }

    /// ib_srp's fast_io_fail_tmo ran out with the rport still blocked: its commands fail
    /// with a transport status, and dm fails the path and re-issues them elsewhere.
    pub(super) fn fast_io_fail(&mut self, p: usize) {
        if let Conn::Down { since, .. } = self.paths[p].conn {
            self.paths[p].conn = Conn::Down {
                since,
                fail_fast: true,
            };
            let ids: Vec<u64> = self.paths[p].parked.drain(..).collect();
            self.take_out(p);
            self.fail_over(p, ids);
            if self.paths[p].check_out.is_some() {
                self.check_result(p, false);
            }
        }
    }

    /// Each path's first check: multipathd's checker at a phase of its own, NVMe's
    /// keep-alive a period after connecting; MPIO verifies no path (the default).
    pub(super) fn start_checks(&mut self) {
        for p in 0..self.paths.len() {
            let first = match self.peer {
                Peer::DmSrp(_) => {
                    use rand::Rng;
                    let phase = self.rng().gen_range(0..timers::POLLING_INTERVAL.as_us());
                    Instant::from_us(phase)
                }
                Peer::Nvme(_) => Instant::ZERO + timers::KEEP_ALIVE_PERIOD,
                Peer::Mpio(_) => continue,
            };
            self.at(first, Ev::Check(p));
        }
    }

    /// A check falls due: multipathd's TUR, NVMe's keep-alive.
    pub(super) fn check(&mut self, p: usize) {
        let now = self.now;
        match self.peer {
            Peer::Mpio(_) => return,
            Peer::Nvme(_) if self.paths[p].conn != Conn::Live => return,
            _ => {}
        }
        if self.paths[p].check_out.is_some() {
            return;
        }
        let path = &mut self.paths[p];
        path.check_seq += 1;
        let seq = path.check_seq;
        path.check_out = Some((seq, now));
        self.out.checks += 1;
        let timeout = match self.peer {
            Peer::Nvme(_) => timers::KATO,
            _ => timers::SD_TIMEOUT,
        };
        self.at(now + timeout, Ev::CheckTimeout(p, seq));
        match self.paths[p].conn {
            Conn::Live => self.transmit(p, Tag::Check(seq)),
            // A TUR to a failed-fast device fails at once; to a blocked one it waits.
            Conn::Down {
                fail_fast: true, ..
            } => self.check_result(p, false),
            Conn::Down { .. } => {}
        }
    }

    pub(super) fn check_answered(&mut self, p: usize, seq: u32) {
        if self.paths[p].check_out.is_some_and(|(s, _)| s == seq) {
            self.check_result(p, true);
        }
    }

    pub(super) fn check_timed_out(&mut self, p: usize, seq: u32) {
        if self.paths[p].check_out.is_none_or(|(s, _)| s != seq) {
            return;
        }
        match self.peer {
            Peer::Nvme(_) => {
                self.paths[p].check_out = None;
                if self.paths[p].conn == Conn::Live {
                    self.transport_error(p);
                }
            }
            _ => self.check_result(p, false),
        }
    }

    /// The check out on `p` passed (`up`) or failed, now.
    fn check_result(&mut self, p: usize, up: bool) {
        let Some((_, sent)) = self.paths[p].check_out.take() else {
            return;
        };
        if let Peer::Nvme(_) = self.peer {
            self.at(sent + timers::KEEP_ALIVE_PERIOD, Ev::Check(p));
            return;
        }
        // multipathd sees the result at its next look at the pending check.
        let seen = noticed(sent, self.now);
        let changed = up != self.paths[p].usable;
        let every = self.paths[p].check_every;
        let every = if changed || !up {
            timers::POLLING_INTERVAL
        } else {
            (every + every).min(timers::MAX_POLLING_INTERVAL)
        };
        self.paths[p].check_every = every;
        let next = (sent + every).max(seen + Duration::from_ms(1));
        self.at(next, Ev::Check(p));
        if up && self.paths[p].conn == Conn::Live && !self.paths[p].usable {
            self.paths[p].usable = true;
            self.dispatch();
        } else if !up && self.paths[p].usable {
            // multipathd fails the path in dm at the look that sees it: new I/O avoids it.
            self.take_out_at(p, seen);
        }
    }

    fn take_out_at(&mut self, p: usize, at: Instant) {
        if self.paths[p].usable {
            self.paths[p].usable = false;
            self.out.taken_out[p].push(at);
        }
    }

    /// A command's timer ran out (the SCSI disk timeout, NVMe's io_timeout, MPIO's disk
    /// timeout) on the sending `attempt`.
    pub(super) fn cmd_timed_out(&mut self, id: u64, attempt: u32) {
        let Some(c) = self.cmds.get(&id).copied() else {
            return;
        };
        let Some((p, gen)) = c.on.filter(|_| c.attempt == attempt) else {
            return;
        };
        if self.paths[p].gen != gen {
            return;
        }
        match self.peer {
            // No per-command abort on RDMA: the controller is reset.
            Peer::Nvme(_) => self.transport_error(p),
            Peer::DmSrp(_) | Peer::Mpio(_) => {
                // An ABORT TASK, answered if the route carries it (the target drops the
                // command), else the error handler escalates.
                let wait = timers::SCSI_ABORT_DELAY;
                if self.paths[p].port.open(self.now + wait) {
                    self.retry_same_path(p, id);
                } else {
                    let tmf = timers::SRP_TMF_WAIT + timers::SRP_TMF_WAIT;
                    self.at(self.now + wait + tmf, Ev::AbortFailed(id, attempt));
                }
            }
        }
    }

    /// An aborted command sent again on its path, while it has retries.
    fn retry_same_path(&mut self, p: usize, id: u64) {
        let limit = match self.peer {
            Peer::Mpio(_) => timers::MPIO_RETRIES,
            _ => timers::SD_RETRIES,
        };
        let Some(c) = self.cmds.get_mut(&id) else {
            return;
        };
        c.retries += 1;
        c.attempt += 1;
        c.on = None;
        let over = c.retries > limit;
        self.paths[p].sent = self.paths[p].sent.saturating_sub(1);
        if over {
            self.complete(id, IoStatus::DeviceFailed, 0);
            self.dispatch();
        } else {
            self.give(p, id);
        }
    }

    /// The abort and the LUN reset went unanswered: the host reset reconnects, and a
    /// reconnect the route refuses offlines the device: its commands fail over.
    pub(super) fn abort_failed(&mut self, id: u64, attempt: u32) {
        let Some((p, gen)) = self
            .cmds
            .get(&id)
            .filter(|c| c.attempt == attempt)
            .and_then(|c| c.on)
        else {
            return;
        };
        if self.paths[p].gen != gen || self.paths[p].port.open(self.now) {
            return;
        }
        let ids = self.take_all(p);
        self.paths[p].gen += 1;
        let since = self.now;
        self.paths[p].conn = Conn::Down {
            since,
            fail_fast: true,
        };
        self.at(
            self.now + timers::SRP_RECONNECT_DELAY,
            Ev::Reconnect(p, self.paths[p].gen),
        );
        self.take_out(p);
        self.fail_over(p, ids);
    }

    /// I/O with no path the multipath layer may use.
    pub(super) fn no_path(&mut self) {
        match self.peer {
            // no_path_retry's default, fail: the error goes up.
            Peer::DmSrp(_) => self.fail_held(),
            // Held on the head's requeue list while a controller reconnects.
            Peer::Nvme(_) => {
                if !self
                    .paths
                    .iter()
                    .any(|p| matches!(p.conn, Conn::Down { .. }))
                {
                    self.fail_held();
                }
            }
            // Held for PDORemovePeriod, then the pseudo-LUN goes and its I/O fails.
            Peer::Mpio(_) => {
                if self.removed {
                    self.fail_held();
                } else if self.lost_all.is_none() {
                    self.lost_all = Some(self.now);
                    self.at(self.now + timers::PDO_REMOVE_PERIOD, Ev::PdoRemove);
                }
            }
        }
    }

    pub(super) fn pdo_remove(&mut self) {
        let due = self
            .lost_all
            .is_some_and(|t| self.now.saturating_since(t) >= timers::PDO_REMOVE_PERIOD);
        if due && !self.paths.iter().any(|p| p.usable) {
            self.removed = true;
            self.fail_held();
        }
    }

    fn fail_held(&mut self) {
        let held: Vec<u64> = self.host.drain(..).collect();
        for id in held {
            self.complete(id, IoStatus::DeviceFailed, 0);
        }
    }
}
