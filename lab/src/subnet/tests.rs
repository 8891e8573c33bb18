use super::*;

fn at(us: u64) -> Instant {
    Instant::from_us(us)
}

/// A slow SA to watch: 1,000 queries a second (1 ms each), 4 MADs on QP1, 10 us to take
/// one, a backlog of 8, BUSY (or, as OpenSM, nothing) past a 5 ms wait.
fn small_answering(busy_answers: bool) -> SharedSubnet {
    SharedSubnet::new(SaSetup {
        queries_per_second: 1_000,
        receive_queue: 4,
        receive: Duration::from_us(10),
        backlog_limit: 8,
        max_wait: Duration::from_ms(5),
        busy_answers,
    })
    .expect("a setup")
}

fn small() -> SharedSubnet {
    small_answering(false)
}

const SECOND: Duration = Duration::from_ms(1_000);

#[test]
fn queries_are_served_in_turn_and_a_burst_past_the_receive_queue_is_dropped() {
    let s = small();
    let answers: Vec<SaAnswer> = (0..6).map(|_| s.query(at(0), SECOND)).collect();
    // Taken off QP1 at 10, 20, 30 and 40 us; served a millisecond each from there.
    assert_eq!(answers[0], SaAnswer::At(at(1_010)));
    assert_eq!(answers[1], SaAnswer::At(at(2_010)));
    assert_eq!(answers[3], SaAnswer::At(at(4_010)));
    // Four MADs are on QP1 at once: the fifth and sixth find no receive buffer.
    assert_eq!(&answers[4..], &[SaAnswer::Lost, SaAnswer::Lost]);
    // Once the receiver has taken them, QP1 has room again.
    assert_eq!(s.query(at(40), SECOND), SaAnswer::At(at(5_010)));
    let (st, queued) = s.stats(at(3_000));
    assert_eq!((st.answered, st.dropped_full, queued), (2, 2, 3));
    assert_eq!(st.peak_backlog, 5);
    let (st, queued) = s.stats(at(10_000));
    assert_eq!((st.answered, st.late, queued), (5, 0, 0));
}

/// One query every 400 us against 1 ms of service: the backlog grows by 0.6 ms a query.
fn flood(s: &SharedSubnet, n: u64) -> Vec<SaAnswer> {
    (0..n).map(|i| s.query(at(i * 400), SECOND)).collect()
}

#[test]
fn a_backlog_that_waited_past_max_wait_drops_or_answers_busy_at_once() {
    let s = small_answering(true);
    let answers = flood(&s, 40);
    let busy: Vec<usize> = (0..answers.len())
        .filter(|&i| matches!(answers[i], SaAnswer::Busy(_)))
        .collect();
    assert!(!busy.is_empty(), "{answers:?}");
    // BUSY goes back as soon as the MAD is taken off QP1, not after the backlog.
    let first = busy[0];
    assert_eq!(answers[first], SaAnswer::Busy(at(first as u64 * 400 + 10)));
    // A BUSY costs the SA nothing: the queries it took are served back to back.
    let served: Vec<Instant> = answers
        .iter()
        .filter_map(|a| match a {
            SaAnswer::At(t) => Some(*t),
            _ => None,
        })
        .collect();
    assert!(served
        .windows(2)
        .all(|w| w[1] == w[0] + Duration::from_ms(1)));
    // Nothing waited much past max_wait: the one being served had waited at most that
    // when the last was taken in.
    let (st, _) = s.stats(at(1_000_000));
    assert_eq!((st.busy, st.dropped_old), (busy.len() as u64, 0));
    assert!(st.peak_wait > Duration::from_ms(5) && st.peak_wait < Duration::from_ms(12));
    // OpenSM drops instead: the same queries are lost, none answered BUSY.
    let o = small();
    let dropped = flood(&o, 40);
    let served = |a: &[SaAnswer]| {
        a.iter()
            .map(|x| matches!(x, SaAnswer::At(_)))
            .collect::<Vec<_>>()
    };
    assert_eq!(served(&dropped), served(&answers));
    assert!(busy.iter().all(|&i| dropped[i] == SaAnswer::Lost));
    let (st, _) = o.stats(at(1_000_000));
    assert_eq!((st.busy, st.dropped_old), (0, busy.len() as u64));
}

#[test]
fn a_full_receive_list_drops() {
    let s = SharedSubnet::new(SaSetup {
        backlog_limit: 3,
        queries_per_second: 1_000,
        ..SaSetup::default()
    })
    .expect("a setup");
    let answers: Vec<SaAnswer> = (0..5).map(|i| s.query(at(i * 10), SECOND)).collect();
    assert_eq!(&answers[3..], &[SaAnswer::Lost, SaAnswer::Lost]);
    assert_eq!(s.stats(at(0)).0.dropped_backlog, 2);
}

#[test]
fn an_answer_after_its_askers_timeout_is_late_and_still_costs_the_sa() {
    let s = small();
    let short = Duration::from_us(2_500);
    let answers: Vec<SaAnswer> = (0..4).map(|_| s.query(at(0), short)).collect();
    assert_eq!(answers[3], SaAnswer::At(at(4_010)));
    let (st, _) = s.stats(at(10_000));
    // 1,010 and 2,010 us are in time; 3,010 and 4,010 are past the 2.5 ms the askers wait.
    assert_eq!((st.answered, st.late), (2, 2));
    // The SA served the late ones anyway: the next query waits behind them.
    assert_eq!(s.query(at(100), short), SaAnswer::At(at(5_010)));
}

#[test]
fn a_failed_master_answers_nothing_and_loses_what_was_queued() {
    let s = small();
    for _ in 0..3 {
        assert!(matches!(s.query(at(0), SECOND), SaAnswer::At(_)));
    }
    // The master fails at 1.5 ms: the first answer (1,010 us) went out, two are lost.
    s.away(at(1_500), Duration::from_ms(500));
    assert!(s.survived(at(0), at(1_010)));
    assert!(!s.survived(at(0), at(2_010)));
    assert_eq!(s.query(at(2_000), SECOND), SaAnswer::Lost);
    // Back at 501.5 ms with an empty queue.
    assert_eq!(s.query(at(501_500), SECOND), SaAnswer::At(at(502_510)));
    assert!(s.survived(at(501_500), at(502_510)));
    let (st, queued) = s.stats(at(600_000));
    assert_eq!(
        (st.answered, st.lost_in_failover, st.dropped_away, queued),
        (2, 2, 1, 0)
    );
}

#[test]
fn the_peak_counts_answers_in_any_one_second() {
    let s = SharedSubnet::new(SaSetup {
        queries_per_second: 10,
        ..SaSetup::default()
    })
    .expect("a setup");
    for i in 0..30 {
        s.query(at(i * 10_000), Duration::from_ms(10_000));
    }
    // 10 a second served back to back, 100 ms apart: a second that starts just after an
    // answer holds the next ten (the window is half open), never eleven.
    let (st, _) = s.stats(at(10_000_000));
    assert_eq!((st.answered, st.peak_per_second), (30, 10));
}

/// A rate that does not divide a second into whole microseconds is served at that rate:
/// 300,000 a second is 3,000 answers in 10 ms, not 3,333.
#[test]
fn a_rate_is_served_exactly_whatever_it_divides() {
    let s = SharedSubnet::new(SaSetup {
        queries_per_second: 300_000,
        receive_queue: 65_536,
        receive: Duration::ZERO,
        ..SaSetup::default()
    })
    .expect("a setup");
    for _ in 0..10_000 {
        s.query(at(0), Duration::from_ms(1_000));
    }
    let (st, _) = s.stats(at(10_000));
    assert!((2_999..=3_000).contains(&st.answered), "{}", st.answered);
}

#[test]
fn a_setup_that_cannot_be_is_refused_by_its_key() {
    let bad = |f: fn(&mut SaSetup)| {
        let mut s = SaSetup::default();
        f(&mut s);
        SharedSubnet::new(s).expect_err("refused").to_string()
    };
    assert!(bad(|s| s.queries_per_second = 0).starts_with("sa_queries_per_second"));
    assert!(bad(|s| s.receive_queue = 0).starts_with("sa_receive_queue"));
    assert!(bad(|s| s.receive = Duration::from_ms(2_000)).starts_with("sa_receive_us"));
    assert!(bad(|s| s.backlog_limit = 0).starts_with("sa_backlog_limit"));
    let e = SharedSubnet::new(SaSetup {
        receive_queue: 0,
        ..SaSetup::default()
    })
    .expect_err("refused");
    assert_eq!(e.key(), "sa_receive_queue");
}

/// A new master's ClientReregister reaches each port in the sweep's order: a view of a
/// port further on gets it later, and sees it only from then.
#[test]
fn a_reregister_reaches_each_port_in_the_sweeps_order() {
    let s = small();
    let (first, last) = (s.for_port(0), s.for_port(10));
    s.reregister(Instant::from_ms(100), Duration::from_ms(2));
    assert_eq!(s.reregister_sweeps(), 1);
    assert_eq!(first.reregister_at(0), Some(Instant::from_ms(100)));
    assert_eq!(last.reregister_at(0), Some(Instant::from_ms(120)));
    assert_eq!(last.reregister_at(1), None);
    assert_eq!(first.reregistrations(Instant::from_ms(100)), 1);
    assert_eq!(last.reregistrations(Instant::from_ms(119)), 0);
    assert_eq!(last.reregistrations(Instant::from_ms(120)), 1);
    s.reregister(Instant::from_ms(500), Duration::from_ms(2));
    assert_eq!(last.reregistrations(Instant::from_ms(600)), 2);
}
