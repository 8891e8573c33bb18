//! How one target port's route behaves over time (docs/design.md §9 "Route phases"): the
//! fail-slow trace set's faults, which make a path slow, stuck or flapping without making
//! its adapter or its device fail. Each phase holds from its instant until the next one.

use hcabus::{Duration, Instant};

/// Most phases one route has (a flapping path is one phase per change).
pub const MAX_ROUTE_PHASES: usize = 12;

/// The target's service time of a command, without a phase that says otherwise.
pub const SERVICE_MIN: Duration = Duration::from_us(60);
pub const SERVICE_MAX: Duration = Duration::from_us(250);

/// What the route and the target port do from `at` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutePhase {
    pub at: Instant,
    /// Each answer takes this long back to the initiator (answers leave in order).
    pub latency: Duration,
    /// The target serves a command in 60 us to this, uniformly (at least 60 us).
    pub service_max: Duration,
    /// Each command already waiting at the port adds this to a new one's service time:
    /// a path slow only under load.
    pub load: Duration,
    /// A command takes `spike` longer with this chance in a million: rare stragglers.
    pub spike: Duration,
    pub spike_per_million: u32,
    /// Commands and aborts are taken and never answered, and answers are lost.
    pub blackhole: bool,
    /// Slowness of a kind the phase's other fields do not give: writes only, periodic
    /// pauses, lost transmissions.
    pub slow: Slowness,
}

/// Fail-slow patterns beyond a steady latency (Gunawi et al., FAST'18 "Fail-Slow at
/// Scale"): what one command meets at the target port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slowness {
    /// Each write takes this much longer: SRP writes are the target's RDMA READs, bounded
    /// by its `responder_resources`, and a port short of them is slow for writes alone.
    pub write_extra: Duration,
    /// The target stalls for `pause` every `pause_every` from the phase's start (a garbage
    /// collection, a firmware housekeeping pass): a command due inside a pause is served
    /// at its end.
    pub pause_every: Duration,
    pub pause: Duration,
    /// A command's first transmission is lost with this chance in a million and carried by
    /// the transport's first retransmission, one local ACK timeout later (the reliable
    /// connection's bimodal latency); with no retransmission timer it is lost for good.
    pub loss_per_million: u32,
    /// Service times with a heavy (Pareto) tail: each command takes
    /// `tail * (u^(-1/shape) - 1)` longer, `u` uniform in (0, 1], so half take under
    /// `tail * (2^(1/shape) - 1)` more and one in `k^shape` more than `(k - 1) * tail` (a
    /// disk or a flash translation layer at its worst, Gunawi et al.'s heavy-tailed
    /// fail-slow). The shape is in hundredths: 150 is 1.5, whose variance is infinite.
    pub tail: Duration,
    pub tail_shape_centi: u16,
    /// The link's data rate, in MB/s (bytes a microsecond): each command's data crosses it
    /// in its size over this, after the data before it in the same direction (a link
    /// trained down to a reduced width or speed is slow in proportion to the size). 0: the
    /// link is never what limits.
    pub bandwidth_mb_s: u32,
}

/// The data a route's link has carried, one direction at a time: a transfer waits for the
/// ones before it in its direction (a write's data goes to the target, a read's comes back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkQueue {
    to_target_free: Instant,
    from_target_free: Instant,
}

impl LinkQueue {
    /// When `bytes` of a command's data, ready to cross at `at` (to the target for a
    /// `write`), have crossed at `bandwidth_mb_s` (no time at 0, nor for no data).
    pub fn transfer(
        &mut self,
        at: Instant,
        bytes: u64,
        write: bool,
        bandwidth_mb_s: u32,
    ) -> Instant {
        if bandwidth_mb_s == 0 || bytes == 0 {
            return at;
        }
        let free = if write {
            &mut self.to_target_free
        } else {
            &mut self.from_target_free
        };
        let done = at.max(*free) + Duration::from_us(bytes.div_ceil(u64::from(bandwidth_mb_s)));
        *free = done;
        done
    }
}

impl Slowness {
    pub const NONE: Slowness = Slowness {
        write_extra: Duration::ZERO,
        pause_every: Duration::ZERO,
        pause: Duration::ZERO,
        loss_per_million: 0,
        tail: Duration::ZERO,
        tail_shape_centi: 0,
        bandwidth_mb_s: 0,
    };

    /// The longest a heavy tail adds to one command: a minute, as long as any route phase.
    pub const TAIL_MAX: Duration = Duration::from_ms(60_000);

    /// What the heavy tail adds to one command's service. Draws from `rng` only with a
    /// tail, so routes without one keep their sequence.
    pub fn tail_extra(&self, rng: &mut dyn rand::RngCore) -> Duration {
        use rand::Rng;
        if self.tail == Duration::ZERO || self.tail_shape_centi == 0 {
            return Duration::ZERO;
        }
        // 1 - [0, 1) is (0, 1]: never a division by zero.
        let u = 1.0 - rng.gen::<f64>();
        let shape = f64::from(self.tail_shape_centi) / 100.0;
        let extra_us = self.tail.as_us() as f64 * (u.powf(-1.0 / shape) - 1.0);
        Duration::from_us((extra_us as u64).min(Self::TAIL_MAX.as_us()))
    }

    /// When a command `write` with a service due at `due`, in a phase that began at
    /// `start`, is served instead: `None` when its transmission is lost for good
    /// (`retransmit`: the transport's first retransmission after a loss, if any). Draws
    /// from `rng` only with a loss rate, so routes without one keep their sequence.
    pub fn serve(
        &self,
        (start, due, write): (Instant, Instant, bool),
        retransmit: Option<Duration>,
        rng: &mut dyn rand::RngCore,
    ) -> Option<Instant> {
        use rand::Rng;
        let mut due = due;
        if write {
            due = due + self.write_extra;
        }
        if self.loss_per_million > 0 && rng.gen_range(0..1_000_000) < self.loss_per_million {
            due = due + retransmit?;
        }
        if self.pause_every > Duration::ZERO {
            let every = self.pause_every.as_us();
            let into = due.saturating_since(start).as_us() % every;
            if into < self.pause.as_us() {
                due = due + Duration::from_us(self.pause.as_us() - into);
            }
        }
        Some(due)
    }
}

impl RoutePhase {
    /// How long the target takes over a command that finds `waiting` others at the port
    /// (the lab target's and the peers' models draw it the same way).
    pub fn service_time(&self, waiting: usize, rng: &mut dyn rand::RngCore) -> Duration {
        use rand::Rng;
        let span = self.service_max.as_us().saturating_sub(SERVICE_MIN.as_us());
        let mut us = SERVICE_MIN.as_us() + rng.gen_range(0..=span);
        us = us.saturating_add(self.load.as_us().saturating_mul(waiting as u64));
        // Drawn only on a route with spikes: every other run keeps its random sequence.
        if self.spike_per_million > 0 && rng.gen_range(0..1_000_000) < self.spike_per_million {
            us = us.saturating_add(self.spike.as_us());
        }
        us = us.saturating_add(self.slow.tail_extra(rng).as_us());
        Duration::from_us(us)
    }

    /// A healthy route from `at` on, but for `latency`.
    pub const fn plain(at: Instant, latency: Duration) -> RoutePhase {
        RoutePhase {
            at,
            latency,
            service_max: SERVICE_MAX,
            load: Duration::ZERO,
            spike: Duration::ZERO,
            spike_per_million: 0,
            blackhole: false,
            slow: Slowness::NONE,
        }
    }
}

/// A route's phases, in order of their instants: the constant one it starts with (at 0,
/// replaced by a phase given at 0) and up to [`MAX_ROUTE_PHASES`] given after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    phases: [RoutePhase; MAX_ROUTE_PHASES + 1],
    len: u8,
    /// A phase at 0 was given (it replaced the constant one; another at 0 is out of order).
    started: bool,
    /// How long a login through the route takes: the CM REQ/REP exchange and the SRP
    /// login, compressed into one wait (the initiator's connection carries commands when
    /// it is over).
    login: Duration,
}

/// A login's CM exchange and SRP login, unless a route says otherwise.
pub const LOGIN_TIME: Duration = Duration::from_us(500);

/// Why a phase was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("at most {MAX_ROUTE_PHASES} phases")]
    TooMany,
    #[error("each phase must start after the one before it")]
    OutOfOrder,
}

impl Route {
    /// A route whose answers always take `latency`.
    pub const fn constant(latency: Duration) -> Route {
        Route {
            phases: [RoutePhase::plain(Instant::ZERO, latency); MAX_ROUTE_PHASES + 1],
            len: 1,
            started: false,
            login: LOGIN_TIME,
        }
    }

    /// This route with logins through it taking `login`.
    pub const fn with_login(mut self, login: Duration) -> Route {
        self.login = login;
        self
    }

    /// How long a login through the route takes.
    pub const fn login(&self) -> Duration {
        self.login
    }

    /// Adds a phase after the last one.
    pub fn push(&mut self, phase: RoutePhase) -> Result<(), RouteError> {
        let last = self.phases[usize::from(self.len) - 1];
        let again = phase.at == last.at && (self.len > 1 || self.started);
        if phase.at < last.at || again {
            return Err(RouteError::OutOfOrder);
        }
        if phase.at == last.at {
            // The first phase given at 0 replaces the constant one.
            self.phases[0] = phase;
            self.started = true;
            return Ok(());
        }
        // The phases given: the constant one counts only once a given phase replaced it.
        let given = usize::from(self.len) - usize::from(!self.started);
        if given >= MAX_ROUTE_PHASES {
            return Err(RouteError::TooMany);
        }
        let slot = self
            .phases
            .get_mut(usize::from(self.len))
            .ok_or(RouteError::TooMany)?;
        *slot = phase;
        self.len += 1;
        Ok(())
    }

    /// The phase in force at `now`.
    pub fn at(&self, now: Instant) -> &RoutePhase {
        let n = usize::from(self.len);
        self.phases[..n]
            .iter()
            .rev()
            .find(|p| p.at <= now)
            .unwrap_or(&self.phases[0])
    }

    pub fn phases(&self) -> &[RoutePhase] {
        &self.phases[..usize::from(self.len)]
    }
}

impl Default for Route {
    fn default() -> Self {
        Route::constant(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowness_delays_writes_waits_out_pauses_and_resends_what_it_loses() {
        let ms = Instant::from_ms;
        let mut rng = rand::rngs::mock::StepRng::new(0, 0);
        let none = Slowness::NONE;
        assert_eq!(
            none.serve((ms(0), ms(7), true), None, &mut rng),
            Some(ms(7))
        );
        let writes = Slowness {
            write_extra: Duration::from_ms(50),
            ..none
        };
        assert_eq!(
            writes.serve((ms(0), ms(7), true), None, &mut rng),
            Some(ms(57))
        );
        assert_eq!(
            writes.serve((ms(0), ms(7), false), None, &mut rng),
            Some(ms(7))
        );
        // 80 ms pauses every 1.5 s from a phase that began at 2 s: due at 3.51 s, in the
        // pause from 3.5 s, served at its end; due at 3.6 s, untouched.
        let gc = Slowness {
            pause_every: Duration::from_ms(1_500),
            pause: Duration::from_ms(80),
            ..none
        };
        assert_eq!(
            gc.serve((ms(2_000), ms(3_510), false), None, &mut rng),
            Some(ms(3_580))
        );
        assert_eq!(
            gc.serve((ms(2_000), ms(3_600), false), None, &mut rng),
            Some(ms(3_600))
        );
        // Every transmission lost (a zero draw is under any rate): the retransmission carries
        // it, or nothing does.
        let lossy = Slowness {
            loss_per_million: 1,
            ..none
        };
        let ack = Some(Duration::from_ms(67));
        assert_eq!(
            lossy.serve((ms(0), ms(1), false), ack, &mut rng),
            Some(ms(68))
        );
        assert_eq!(lossy.serve((ms(0), ms(1), false), None, &mut rng), None);
    }

    /// A link of 250 MB/s carries 64 KiB in 263 us: each transfer after the one before it
    /// in its direction, the two directions apart; at no bandwidth, or with no data, at once.
    #[test]
    fn a_link_carries_data_in_its_size_over_its_rate_one_transfer_after_another() {
        let us = Instant::from_us;
        let mut link = LinkQueue::default();
        assert_eq!(link.transfer(us(100), 65_536, true, 0), us(100));
        assert_eq!(link.transfer(us(100), 0, true, 250), us(100));
        assert_eq!(link.transfer(us(100), 65_536, true, 250), us(363));
        assert_eq!(
            link.transfer(us(110), 4_096, true, 250),
            us(380),
            "behind it"
        );
        assert_eq!(
            link.transfer(us(110), 4_096, false, 250),
            us(127),
            "the other way"
        );
        assert_eq!(
            link.transfer(us(1_000), 4_096, true, 250),
            us(1_017),
            "idle again"
        );
    }

    #[test]
    fn a_heavy_tail_adds_little_to_most_commands_and_much_to_a_few() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let none = Slowness::NONE;
        assert_eq!(none.tail_extra(&mut rng), Duration::ZERO);
        let heavy = Slowness {
            tail: Duration::from_us(500),
            tail_shape_centi: 120,
            ..none
        };
        let mut extra: Vec<u64> = (0..100_000)
            .map(|_| heavy.tail_extra(&mut rng).as_us())
            .collect();
        extra.sort_unstable();
        // Median 500 us x (2^(1/1.2) - 1) = 390 us; beyond 100 ms, (0.5 / 100.5)^1.2 =
        // 0.17% of commands: 170 of 100,000 expected.
        let median = extra[extra.len() / 2];
        assert!((350..430).contains(&median), "median {median} us");
        let over = extra.iter().filter(|us| **us > 100_000).count();
        assert!((100..250).contains(&over), "{over} over 100 ms");
        assert!(*extra.last().expect("drawn") <= Slowness::TAIL_MAX.as_us());
        // Without a tail the generator is not touched.
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut b = a.clone();
        let _ = none.tail_extra(&mut a);
        assert_eq!(rand::Rng::gen::<u64>(&mut a), rand::Rng::gen::<u64>(&mut b));
    }

    #[test]
    fn phases_hold_from_their_instant_until_the_next() {
        let mut r = Route::constant(Duration::from_ms(1));
        let slow = RoutePhase {
            latency: Duration::from_ms(30),
            ..RoutePhase::plain(Instant::from_ms(100), Duration::ZERO)
        };
        r.push(slow).expect("in order");
        r.push(RoutePhase {
            blackhole: true,
            ..RoutePhase::plain(Instant::from_ms(200), Duration::ZERO)
        })
        .expect("in order");
        assert_eq!(r.at(Instant::from_ms(99)).latency, Duration::from_ms(1));
        assert_eq!(r.at(Instant::from_ms(100)).latency, Duration::from_ms(30));
        assert!(r.at(Instant::from_ms(250)).blackhole);
        assert_eq!(r.phases().len(), 3);
        assert_eq!(r.push(slow), Err(RouteError::OutOfOrder));
        let same = RoutePhase::plain(Instant::from_ms(200), Duration::ZERO);
        assert_eq!(
            r.push(same),
            Err(RouteError::OutOfOrder),
            "two phases at 200 ms"
        );
    }

    #[test]
    fn twelve_phases_after_the_constant_one_are_taken_and_a_thirteenth_refused() {
        let mut r = Route::constant(Duration::from_ms(3));
        for i in 1..=MAX_ROUTE_PHASES as u64 {
            r.push(RoutePhase::plain(Instant::from_ms(i), Duration::ZERO))
                .expect("twelve given");
        }
        assert_eq!(
            r.phases().len(),
            MAX_ROUTE_PHASES + 1,
            "and the constant one"
        );
        assert_eq!(r.at(Instant::ZERO).latency, Duration::from_ms(3));
        let one_more = RoutePhase::plain(Instant::from_ms(100), Duration::ZERO);
        assert_eq!(r.push(one_more), Err(RouteError::TooMany));
    }

    #[test]
    fn a_phase_at_zero_replaces_the_constant_one_and_the_table_is_bounded() {
        let mut r = Route::default();
        r.push(RoutePhase::plain(Instant::ZERO, Duration::from_ms(7)))
            .expect("replaces");
        assert_eq!(r.phases().len(), 1);
        let twice = RoutePhase::plain(Instant::ZERO, Duration::from_ms(8));
        assert_eq!(
            r.push(twice),
            Err(RouteError::OutOfOrder),
            "a second phase at 0"
        );
        assert_eq!(r.at(Instant::ZERO).latency, Duration::from_ms(7));
        for i in 1..MAX_ROUTE_PHASES as u64 {
            r.push(RoutePhase::plain(Instant::from_ms(i), Duration::ZERO))
                .expect("room");
        }
        let one_more = RoutePhase::plain(Instant::from_ms(100), Duration::ZERO);
        assert_eq!(r.push(one_more), Err(RouteError::TooMany));
    }
}
