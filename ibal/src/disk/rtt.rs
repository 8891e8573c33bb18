//! How long one path's commands may take before fast path failover gives them up
//! (docs/design.md §7 "Adaptive path timeout").
//!
//! The adaptive mode is RFC 6298's retransmission timer, measured per path on the commands
//! the target answered: SRTT + max(`path_timeout_min`, 4 x RTTVAR), at most
//! `path_timeout_max`. It was chosen over a phi-accrual detector because it needs two
//! integers per path and no floating point (the disk runs in the kernel's paging path), is
//! fed by every answer rather than by heartbeats, and its behaviour under a change of
//! latency is the one TCP has relied on for decades. Before its first sample a path's timeout
//! is RFC 6298's conservative initial one (1 s), doubled at each give-up: a path slow from
//! its first command learns its latency instead of being given up at the floor before its
//! first answer. Each send carries its own tag, so an answer is never ambiguous (Karn's
//! problem): the late answer of a probe given up still measures its path.

use hcabus::{Duration, Instant};

/// The timeout mode of a multipath disk's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathTimeout {
    /// Never give a command up for being slow.
    Off,
    /// A fixed `path_io_timeout`.
    Fixed(Duration),
    /// Learned per path, within `[min, max]`.
    Adaptive { min: Duration, max: Duration },
    /// A fixed timeout whose give-ups a host's own rule notices (the lab's dm-multipath
    /// checker notices them at its next tick).
    Polled(PollRule),
}

/// A fixed `timeout`, and when a command past it is noticed: `noticed(due, timeout)`, no
/// sooner than `due`. A name for reports.
#[derive(Debug, Clone, Copy)]
pub struct PollRule {
    pub name: &'static str,
    pub timeout: Duration,
    pub noticed: fn(due: Instant, timeout: Duration) -> Instant,
}

/// Two rules are the same when their names and timeouts are: a function's address is no
/// identity.
impl PartialEq for PollRule {
    fn eq(&self, other: &Self) -> bool {
        (self.name, self.timeout) == (other.name, other.timeout)
    }
}

impl Eq for PollRule {}

/// The defaults of the adaptive mode: docs/design.md §7 says why.
pub const DEFAULT_PATH_TIMEOUT_MIN: Duration = Duration::from_ms(5);
pub const DEFAULT_PATH_TIMEOUT_MAX: Duration = Duration::from_ms(3_000);

impl PathTimeout {
    /// The shipped default: adaptive within the default bounds.
    pub const DEFAULT: PathTimeout = PathTimeout::Adaptive {
        min: DEFAULT_PATH_TIMEOUT_MIN,
        max: DEFAULT_PATH_TIMEOUT_MAX,
    };

    /// The longest a command may be out whatever the path does: what bounds a command a
    /// path keeps behind while answering younger ones.
    pub fn cap(&self) -> Option<Duration> {
        match *self {
            PathTimeout::Off => None,
            PathTimeout::Fixed(t) => Some(t),
            PathTimeout::Adaptive { max, .. } => Some(max),
            PathTimeout::Polled(r) => Some(r.timeout),
        }
    }

    /// The shortest timeout the mode can give: where a path's probing backoff starts.
    pub fn floor(&self) -> Option<Duration> {
        match *self {
            PathTimeout::Adaptive { min, .. } => Some(min),
            other => other.cap(),
        }
    }
}

/// RFC 6298 §2.1's timeout before any round trip was measured.
pub const INITIAL_RTO: Duration = Duration::from_ms(1_000);

/// Doublings of the initial timeout counted (RFC 6298 §5.5); the ceiling bounds it long
/// before.
const MAX_BACKOFF: u8 = 20;

/// RFC 6298's estimator over one path's round trips, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RttEstimator {
    /// Smoothed round trip and its mean deviation; `None` before the first sample.
    srtt_us: Option<u64>,
    rttvar_us: u64,
    /// Give-ups before the first sample: each doubles the initial timeout.
    backoff: u8,
}

impl RttEstimator {
    /// Starts over from one round trip, as from a first measurement (RFC 6298 §2.2): SRTT
    /// that round trip, RTTVAR half of it.
    pub fn restart(&mut self, rtt: Duration) {
        let r = rtt.as_us();
        self.backoff = 0;
        self.srtt_us = Some(r);
        self.rttvar_us = r / 2;
    }

    /// One answered command's round trip (RFC 6298 §2.2 and §2.3: alpha 1/8, beta 1/4).
    pub fn sample(&mut self, rtt: Duration) {
        let r = rtt.as_us();
        self.backoff = 0;
        match self.srtt_us {
            None => {
                self.srtt_us = Some(r);
                self.rttvar_us = r / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(r);
                self.rttvar_us = self.rttvar_us - self.rttvar_us / 4 + err / 4;
                self.srtt_us = Some(srtt - srtt / 8 + r / 8);
            }
        }
    }

    /// A command was given up on this path. Before the first sample the timeout doubles
    /// (RFC 6298 §5.5), so a path slower than the initial second still gets a sample. After
    /// it, a path given up is probed (with a backoff of its own) and its timeout is what its
    /// answers say.
    pub fn backed_off(&mut self) {
        if self.srtt_us.is_none() {
            self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        }
    }

    /// SRTT + max(`min`, 4 x RTTVAR), within `min..=max`; before any sample, [`INITIAL_RTO`]
    /// doubled at each give-up (RFC 6298 §2.1, §5.5). The conservative start matters: the
    /// floor before the first answer shut out a healthy path slower than it for good, since
    /// each of its commands was given up before its answer could teach anything.
    pub fn timeout(&self, min: Duration, max: Duration) -> Duration {
        let Some(srtt) = self.srtt_us else {
            let t = INITIAL_RTO
                .as_us()
                .saturating_mul(1u64 << self.backoff.min(MAX_BACKOFF));
            return Duration::from_us(t).max(min).min(max);
        };
        // The variance term is at least `min` (Linux's TCP floors its deviation at a quarter
        // of its minimum timeout the same way): a path slow but steady (a congested route
        // at its limit) keeps a margin above its latency, so its answers are not given up
        // one by one for being a hair late.
        let margin = self.rttvar_us.saturating_mul(4).max(min.as_us());
        Duration::from_us(srtt.saturating_add(margin)).min(max)
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_us.map(Duration::from_us)
    }
}

/// What one path's answers say of it: its round trips, and the send times fast path
/// failover compares (docs/design.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PathTiming {
    rtt: RttEstimator,
    /// The send time of the youngest command answered within the path's timeout: what
    /// another path's failover compares with (a command out that long there, sent no later,
    /// was overtaken by a prompt answer here).
    freshest_prompt: Option<Instant>,
    /// The send time of the youngest command answered at all: a path that answers commands
    /// sent after one of its own is moving, and that one is the target's straggler.
    freshest_any: Option<Instant>,
    /// Answers within the timeout and past it: what a probing path is judged by.
    prompt: u64,
    slow: u64,
    /// The youngest command answered, by send time, and its round trip (see
    /// [`PathTiming::recent_rtt`]).
    youngest: Option<(Instant, Duration)>,
}

impl PathTiming {
    /// The timeout a command on this path has under `mode` now (`None`: never given up).
    pub fn timeout(&self, mode: PathTimeout) -> Option<Duration> {
        match mode {
            PathTimeout::Off => None,
            PathTimeout::Fixed(t) => Some(t),
            PathTimeout::Adaptive { min, max } => Some(self.rtt.timeout(min, max)),
            PathTimeout::Polled(r) => Some(r.timeout),
        }
    }

    /// The target answered a command sent at `sent_at`, at `now`.
    pub fn answered(&mut self, mode: PathTimeout, sent_at: Instant, now: Instant) {
        let rtt = now.saturating_since(sent_at);
        if self.timeout(mode).is_none_or(|t| rtt < t) {
            self.freshest_prompt = self.freshest_prompt.max(Some(sent_at));
            self.prompt += 1;
        } else {
            self.slow += 1;
        }
        self.freshest_any = self.freshest_any.max(Some(sent_at));
        self.rtt.sample(rtt);
        self.remember(sent_at, rtt);
    }

    /// Keeps `rtt` if its command was sent after the one kept: the late answer of an old
    /// command says nothing of the path now.
    fn remember(&mut self, sent_at: Instant, rtt: Duration) {
        if self.youngest.is_none_or(|(at, _)| at < sent_at) {
            self.youngest = Some((sent_at, rtt));
        }
    }

    /// What the path selector prices a path's round trip at: SRTT, or the round trip of
    /// the youngest command answered when that was faster. SRTT's gain of an eighth takes
    /// some twenty answers to forget a slow regime, and a path that healed gets few answers
    /// while it is priced by the old one: its youngest answer is what it does now. A slower
    /// youngest answer is left to SRTT (and a straggler's to nothing: it is not the
    /// youngest), so one slow answer does not shut a path out (docs/design.md §7 "Path
    /// selection").
    pub fn recent_rtt(&self) -> Option<Duration> {
        let srtt = self.rtt.srtt()?;
        Some(self.youngest.map_or(srtt, |(_, rtt)| srtt.min(rtt)))
    }

    /// The answer to a probe this path gave up, sent at `sent_at`, came at `now`: too late
    /// to complete it, not too late to measure the path (the tag names that one send). Only
    /// the round trip learns from it; the probe stays a failed one.
    pub fn answered_late(&mut self, sent_at: Instant, now: Instant) {
        let rtt = now.saturating_since(sent_at);
        self.rtt.sample(rtt);
        self.remember(sent_at, rtt);
    }

    /// The path served again after its probes (docs/design.md §7 "Adaptive path timeout"):
    /// its estimate starts over from its youngest answer, one of those that restored it.
    /// What it learned while given up describes the trouble, not the route now: one late
    /// answer from a blackhole that lifted (a command the reliable connection delivered
    /// 470 ms late) left a 0.2 ms route's timeout at 310 ms a second and a half later, and a
    /// path the selector rightly leaves idle gets too few answers to decay it, so the next
    /// blackhole held its command 485 ms instead of 10.
    pub fn restored(&mut self) {
        if let Some((_, rtt)) = self.youngest {
            self.rtt.restart(rtt);
        }
    }

    /// Commands were given up on this path (see [`RttEstimator::backed_off`]).
    pub fn gave_up(&mut self) {
        self.rtt.backed_off();
    }

    pub fn freshest_prompt(&self) -> Option<Instant> {
        self.freshest_prompt
    }

    pub fn freshest_any(&self) -> Option<Instant> {
        self.freshest_any
    }

    /// How many answers came within the timeout, and past it.
    pub fn answers(&self) -> (u64, u64) {
        (self.prompt, self.slow)
    }

    pub fn estimator(&self) -> &RttEstimator {
        &self.rtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_ms(5);
    const MAX: Duration = Duration::from_ms(3_000);

    #[test]
    fn the_first_sample_sets_srtt_and_half_of_it_as_variance() {
        let mut e = RttEstimator::default();
        assert_eq!(
            e.timeout(MIN, MAX),
            INITIAL_RTO,
            "nothing known: RFC 6298's second"
        );
        e.sample(Duration::from_ms(10));
        assert_eq!(e.srtt(), Some(Duration::from_ms(10)));
        // 10 + 4 x 5 ms.
        assert_eq!(e.timeout(MIN, MAX), Duration::from_ms(30));
    }

    #[test]
    fn steady_samples_leave_the_floor_as_the_margin_above_the_latency() {
        let mut e = RttEstimator::default();
        for _ in 0..200 {
            e.sample(Duration::from_us(200));
        }
        assert_eq!(e.srtt(), Some(Duration::from_us(200)));
        assert_eq!(
            e.timeout(MIN, MAX),
            Duration::from_us(5_200),
            "200 us + the floor"
        );
        // Integer arithmetic leaves a variance of 3 us (3 - 3/4 = 3): 200 + 4 x 3.
        assert_eq!(e.timeout(Duration::ZERO, MAX), Duration::from_us(212));
        // A path steady at 6.5 ms keeps 5 ms of margin, not 12 us.
        let mut slow = RttEstimator::default();
        for _ in 0..200 {
            slow.sample(Duration::from_us(6_500));
        }
        assert_eq!(slow.timeout(MIN, MAX), Duration::from_us(11_500));
    }

    #[test]
    fn a_target_slow_by_nature_gets_a_timeout_above_its_latency() {
        let mut e = RttEstimator::default();
        for i in 0..100u64 {
            e.sample(Duration::from_ms(80 + i % 7));
        }
        let t = e.timeout(MIN, MAX);
        assert!(
            t > Duration::from_ms(86),
            "above the slowest answer seen: {t}"
        );
        assert!(t < Duration::from_ms(120), "but not far above: {t}");
    }

    #[test]
    fn a_jump_in_latency_raises_the_timeout_through_the_variance() {
        let mut e = RttEstimator::default();
        for _ in 0..50 {
            e.sample(Duration::from_ms(1));
        }
        let before = e.timeout(Duration::ZERO, MAX);
        e.sample(Duration::from_ms(20));
        let after = e.timeout(Duration::ZERO, MAX);
        // RTTVAR gains 19/4 ms and SRTT 19/8 ms: 4 x 4.75 + 3.375 = 22.4 ms.
        assert!(after > Duration::from_ms(22), "{before} -> {after}");
        assert_eq!(e.timeout(MIN, Duration::from_ms(10)), Duration::from_ms(10));
    }

    #[test]
    fn before_its_first_sample_a_path_backs_off_from_a_second_and_a_sample_ends_it() {
        let mut e = RttEstimator::default();
        e.backed_off();
        assert_eq!(e.timeout(MIN, MAX), Duration::from_ms(2_000));
        e.backed_off();
        assert_eq!(
            e.timeout(MIN, MAX),
            MAX,
            "doubled again, within the ceiling"
        );
        for _ in 0..100 {
            e.backed_off();
        }
        assert_eq!(
            e.timeout(MIN, Duration::MAX),
            Duration::from_ms(1_000 << 20)
        );
        assert_eq!(
            e.timeout(MIN, Duration::from_ms(300)),
            Duration::from_ms(300),
            "a ceiling under a second bounds the first timeout too"
        );
        // A path that answers in 8 ms: its first answer sets the timeout from it.
        e.sample(Duration::from_ms(8));
        assert_eq!(e.timeout(MIN, MAX), Duration::from_ms(8 + 16));
        e.backed_off();
        assert_eq!(
            e.timeout(MIN, MAX),
            Duration::from_ms(24),
            "once measured, a give-up leaves the timeout to the answers"
        );
        // The floor holds under a tiny learned margin, the ceiling over a large one.
        let mut tiny = RttEstimator::default();
        tiny.sample(Duration::from_us(1));
        assert_eq!(tiny.timeout(MIN, MAX), Duration::from_us(5_001));
        assert_eq!(
            tiny.timeout(Duration::from_ms(10), MAX),
            Duration::from_us(10_001)
        );
    }

    #[test]
    fn a_path_given_up_before_its_first_answer_doubles_its_timeout() {
        let mode = PathTimeout::Adaptive { min: MIN, max: MAX };
        let mut t = PathTiming::default();
        assert_eq!(t.timeout(mode), Some(INITIAL_RTO));
        t.gave_up();
        assert_eq!(t.timeout(mode), Some(Duration::from_ms(2_000)));
        t.answered(mode, Instant::from_ms(0), Instant::from_ms(1_500));
        assert_eq!(
            t.timeout(mode),
            Some(MAX),
            "a sample ends the backoff: 1.5 s + 4 x 0.75 s, at most the ceiling"
        );
    }

    #[test]
    fn a_late_probe_teaches_the_round_trip_and_nothing_else() {
        let at = Instant::from_ms;
        let mode = PathTimeout::Adaptive { min: MIN, max: MAX };
        let mut t = PathTiming::default();
        t.answered_late(at(100), at(108));
        assert_eq!(t.estimator().srtt(), Some(Duration::from_ms(8)));
        assert_eq!(
            t.answers(),
            (0, 0),
            "neither prompt nor slow: the probe failed"
        );
        assert_eq!((t.freshest_prompt(), t.freshest_any()), (None, None));
        assert_eq!(t.timeout(mode), Some(Duration::from_ms(24)));
    }

    #[test]
    fn path_timing_judges_each_answer_against_the_timeout_it_had() {
        let at = Instant::from_ms;
        let fixed = PathTimeout::Fixed(Duration::from_ms(100));
        let mut t = PathTiming::default();
        assert_eq!(t.timeout(fixed), Some(Duration::from_ms(100)));
        assert_eq!(t.timeout(PathTimeout::Off), None);
        let polled = PathTimeout::Polled(PollRule {
            name: "polled",
            timeout: Duration::from_ms(5_000),
            noticed: |due, _| due,
        });
        assert_eq!(t.timeout(polled), Some(Duration::from_ms(5_000)));
        assert_eq!((t.freshest_prompt(), t.freshest_any()), (None, None));
        // Sent at 10, answered 50 ms later: prompt.
        t.answered(fixed, at(10), at(60));
        assert_eq!(t.answers(), (1, 0));
        assert_eq!(t.freshest_prompt(), Some(at(10)));
        // Sent at 20, answered exactly 100 ms later: past the timeout (it would have been
        // given up at that instant), so slow; it still shows the path moving.
        t.answered(fixed, at(20), at(120));
        assert_eq!(t.answers(), (1, 1));
        assert_eq!(t.freshest_prompt(), Some(at(10)));
        assert_eq!(t.freshest_any(), Some(at(20)));
        t.answered(fixed, at(30), at(31));
        t.answered(fixed, at(25), at(40));
        assert_eq!(t.answers(), (3, 1), "each answer counted once");
        assert_eq!(
            t.freshest_prompt(),
            Some(at(30)),
            "the youngest, not the latest"
        );
        // Every answer is a sample: 50, 100, 1 and 15 ms.
        let srtt = t.estimator().srtt().expect("sampled");
        assert!(
            srtt > Duration::from_ms(40) && srtt < Duration::from_ms(60),
            "{srtt}"
        );
        let adaptive = PathTimeout::Adaptive { min: MIN, max: MAX };
        assert_eq!(t.timeout(adaptive), Some(t.estimator().timeout(MIN, MAX)));
        // With failover off every answer is prompt.
        let mut off = PathTiming::default();
        off.answered(PathTimeout::Off, at(0), at(50_000));
        assert_eq!(off.answers(), (1, 0));
    }

    #[test]
    fn a_path_served_again_starts_its_estimate_over_from_its_youngest_answer() {
        let adaptive = PathTimeout::Adaptive { min: MIN, max: MAX };
        let us = Instant::from_us;
        let mut t = PathTiming::default();
        for i in 0..50 {
            t.answered(adaptive, us(i * 1_000), us(i * 1_000 + 200));
        }
        assert_eq!(t.timeout(adaptive), Some(Duration::from_us(5_200)));
        // A command held by a blackhole that lifted, answered 470 ms late after its
        // give-up, then the three prompt probes that restore the path.
        t.answered_late(us(60_000), us(530_000));
        for i in 0..3 {
            let sent = 600_000 + i * 5_000;
            t.answered(adaptive, us(sent), us(sent + 190));
        }
        let inflated = t.timeout(adaptive).expect("adaptive");
        assert!(inflated > Duration::from_ms(300), "{inflated}");
        t.restored();
        assert_eq!(t.estimator().srtt(), Some(Duration::from_us(190)));
        assert_eq!(t.timeout(adaptive), Some(Duration::from_us(5_190)));
        // Nothing answered yet: nothing to start from, the estimate stays.
        let mut fresh = PathTiming::default();
        fresh.restored();
        assert_eq!(fresh.estimator().srtt(), None);
    }
}
