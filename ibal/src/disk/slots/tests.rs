use super::*;

fn io(id: u64, lba: u64, write: bool) -> IoRequest {
    IoRequest::stamped(id, lba, write)
}

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

/// A plain timeout of `limit`, overtaken by an answer elsewhere to a command sent `at`,
/// within a command bound of [`BOUND`].
fn rule(limit: Duration, overtaken_at: Instant) -> GiveUpRule {
    GiveUpRule {
        timeout: limit,
        cap: limit,
        overtaken_at: Some(overtaken_at),
        own_answered_at: None,
        overtaker_rtt: None,
        bound: BOUND,
        tested: false,
        check_wait: limit,
    }
}

const BOUND: Duration = Duration::from_ms(10_000);

const LATE: Answer = Answer::Late { sent_at: None };

/// Admits `req` and sends it at `now`; returns its tag.
fn send(t: &mut SlotTable, req: IoRequest, now: Instant) -> u64 {
    t.admit(req).expect("room");
    let (_, tag, sent) = t.next_send().expect("queued");
    assert_eq!(sent, req);
    t.sent(now);
    tag
}

#[test]
fn an_answer_completes_its_command_once_and_a_second_one_is_late() {
    let mut t = SlotTable::new(2);
    let tag = send(&mut t, io(1, 5, false), at(0));
    assert_eq!(t.in_flight(), 1);
    assert!(t.tracks(1));
    assert!(matches!(t.answer(tag, false), Answer::Complete { req, .. } if req.id == 1));
    assert_eq!(t.answer(tag, false), LATE, "never completed twice");
    assert!(!t.tracks(1));
    assert_eq!(t.in_flight(), 0);
}

#[test]
fn tags_no_send_carried_are_unknown() {
    let mut t = SlotTable::new(2);
    let sent = send(&mut t, io(1, 5, false), at(0));
    assert_eq!(t.answer(tag(7, 1), false), Answer::Unknown, "no such slot");
    assert_eq!(t.answer(tag(1, 1), false), Answer::Unknown, "never sent");
    assert_eq!(
        t.answer(sent + 1, false),
        Answer::Unknown,
        "a later generation"
    );
    assert_eq!(t.answer(sent, true), Answer::Unknown, "no abort was sent");
    assert!(matches!(t.answer(sent, false), Answer::Complete { .. }));
}

#[test]
fn nothing_is_given_up_unless_another_path_answered_after_it_was_sent() {
    let mut t = SlotTable::new(4);
    send(&mut t, io(1, 1, false), at(10));
    send(&mut t, io(2, 2, false), at(30));
    let limit = Duration::from_ms(100);
    assert_eq!(
        t.next_overdue(&rule(limit, at(5))),
        Some(at(10_010)),
        "answered before either was sent: only the bound"
    );
    assert_eq!(t.next_overdue(&rule(limit, at(20))), Some(at(110)));
    assert_eq!(t.next_overdue(&rule(limit, at(40))), Some(at(110)));
    // A slow target on every path: the other path's last answer predates the command.
    assert_eq!(
        t.give_up_overdue(at(500), &rule(limit, at(5)), |_, _| true),
        0
    );
    assert_eq!(t.in_flight(), 2);
    // Out 100 ms, and the other path answered since: given up; the younger one waits.
    let mut given = Vec::new();
    assert_eq!(
        t.give_up_overdue(at(115), &rule(limit, at(40)), |tag, r| {
            given.push((tag, r.id));
            true
        }),
        1
    );
    assert_eq!(given.iter().map(|g| g.1).collect::<Vec<_>>(), [1]);
    assert_eq!((t.in_flight(), t.aborting()), (1, 1));
    assert!(!t.tracks(1), "its I/O is another path's now");
    assert_eq!(
        t.answers_owed(),
        3,
        "the other's answer, a late one and the abort's"
    );
}

#[test]
fn commands_are_given_up_newest_first() {
    let mut t = SlotTable::new(4);
    for id in [3, 1, 2] {
        send(&mut t, io(id, id, false), at(0));
    }
    let mut ids = Vec::new();
    t.give_up_overdue(at(200), &rule(Duration::from_ms(100), at(50)), |_, r| {
        ids.push(r.id);
        true
    });
    assert_eq!(
        ids,
        [3, 2, 1],
        "pushed to a queue's front, the oldest ends first"
    );
}

#[test]
fn a_given_up_slot_is_reused_only_after_the_target_answers_its_abort() {
    let mut t = SlotTable::new(1);
    let sent = send(&mut t, io(1, 9, true), at(0));
    t.send_completed(0);
    let mut abort = None;
    t.give_up_overdue(at(100), &rule(Duration::from_ms(100), at(60)), |tag, _| {
        abort = Some(tag);
        true
    });
    assert_eq!(
        abort,
        Some(sent),
        "the target is told to abort that very send"
    );
    assert!(!t.has_room(), "its buffer may still be read by the target");
    assert_eq!(
        t.fenced_writes().collect::<Vec<_>>(),
        [(1, 9)],
        "a stale write may still run"
    );
    // The command ran before the abort came: its answer arrives first, and is discarded.
    assert_eq!(t.answer(sent, false), LATE);
    assert!(!t.has_room());
    assert!(matches!(t.answer(sent, true), Answer::AbortAnswered { req } if req.id == 1));
    assert!(t.has_room());
    assert_eq!(t.fenced_writes().count(), 0);
    assert_eq!(
        t.answer(sent, true),
        Answer::Unknown,
        "a second abort answer changes nothing"
    );
    assert_eq!(t.aborting(), 0);
}

#[test]
fn a_reset_requeues_what_was_in_flight_oldest_first_and_frees_what_was_given_up() {
    let mut t = SlotTable::new(4);
    let old = send(&mut t, io(1, 1, true), at(0));
    t.send_completed(0);
    t.give_up_overdue(at(100), &rule(Duration::from_ms(100), at(50)), |_, _| true);
    let b = send(&mut t, io(5, 5, false), at(150));
    let a = send(&mut t, io(4, 4, false), at(150));
    assert_eq!(t.take_back(), 2);
    assert_eq!((t.in_flight(), t.aborting(), t.queued()), (0, 0, 2));
    assert!(t.tracks(4) && t.tracks(5) && !t.tracks(1));
    assert_eq!(
        t.fenced_writes().count(),
        0,
        "the dead connection runs nothing more"
    );
    // Answers from before the reset are late, whatever they answer.
    assert_eq!(t.answer(old, false), LATE);
    assert_eq!(t.answer(a, false), LATE);
    // Re-issued oldest first, under new tags; only those complete.
    let (_, tag4, r) = t.next_send().expect("queued");
    assert_eq!(r.id, 4);
    t.sent(at(300));
    let (_, tag5, r) = t.next_send().expect("queued");
    assert_eq!(r.id, 5);
    t.sent(at(300));
    assert_eq!(t.answer(b, false), LATE);
    assert!(matches!(t.answer(tag5, false), Answer::Complete { req, .. } if req.id == 5));
    assert!(matches!(t.answer(tag4, false), Answer::Complete { req, .. } if req.id == 4));
}

#[test]
fn queued_commands_leave_from_either_end() {
    let mut t = SlotTable::new(3);
    for id in 1..=3 {
        t.admit(io(id, id, false)).expect("room");
    }
    assert_eq!(t.admit(io(4, 4, false)), None, "full");
    assert_eq!(t.pop_queued_back().map(|r| r.id), Some(3));
    assert_eq!(t.pop_queued_front().map(|r| r.id), Some(1));
    assert_eq!(t.queued(), 1);
    assert!(t.has_room());
}

#[test]
fn every_write_given_up_fences_its_block_and_a_send_never_completed_is_a_stall() {
    let mut t = SlotTable::new(3);
    send(&mut t, io(1, 3, true), at(0));
    let acked = send(&mut t, io(2, 4, true), at(0));
    send(&mut t, io(3, 5, false), at(0));
    t.send_completed((acked >> 32) as usize);
    let limit = Duration::from_ms(100);
    assert!(!t.stalled_send(at(99), limit), "not out long enough");
    assert!(
        t.stalled_send(at(100), limit),
        "sent 100 ms ago, never completed"
    );
    t.give_up_overdue(at(100), &rule(limit, at(50)), |_, _| true);
    assert_eq!(t.aborting(), 3, "every slot waits for its abort");
    let mut fenced: Vec<_> = t.fenced_writes().collect();
    fenced.sort_unstable();
    assert_eq!(
        fenced,
        [(1, 3), (2, 4)],
        "both writes, taken or not: a late delivery may still run; never the read"
    );
    assert!(t.stalled_send(at(100), limit), "given up, still never sent");
    t.take_back();
    assert!(!t.stalled_send(at(500), limit), "the connection is gone");
}

#[test]
fn a_straggler_its_path_answered_around_waits_for_the_cap_until_the_path_sticks() {
    let mut t = SlotTable::new(4);
    send(&mut t, io(1, 1, false), at(0));
    send(&mut t, io(2, 2, false), at(10));
    let mut r = GiveUpRule {
        timeout: Duration::from_ms(5),
        cap: Duration::from_ms(3_000),
        overtaken_at: Some(at(50)),
        // This path answered a command sent at 8 ms: it moves; command 1 is a straggler.
        own_answered_at: Some(at(8)),
        overtaker_rtt: None,
        bound: BOUND,
        tested: false,
        check_wait: Duration::from_ms(5),
    };
    assert_eq!(r.due(at(0)), at(3_000), "the straggler waits for the cap");
    assert_eq!(
        r.due(at(10)),
        at(15),
        "nothing younger answered: the timeout"
    );
    assert_eq!(r.due(at(60)), at(10_060), "not overtaken: the bound");
    assert_eq!(t.next_overdue(&r), Some(at(15)));
    assert_eq!(t.give_up_overdue(at(14), &r, |_, _| true), 0);
    // The path stuck after 8 ms: command 2 goes, and the straggler, older, with it.
    let mut ids = Vec::new();
    assert_eq!(
        t.give_up_overdue(at(15), &r, |_, q| {
            ids.push(q.id);
            true
        }),
        2
    );
    assert_eq!(ids, [2, 1]);
    // On a path that moves, a straggler alone goes at the cap.
    send(&mut t, io(3, 3, false), at(100));
    r.overtaken_at = Some(at(200));
    r.own_answered_at = Some(at(150));
    assert_eq!(t.give_up_overdue(at(3_099), &r, |_, _| true), 0);
    assert_eq!(t.give_up_overdue(at(3_100), &r, |_, _| true), 1);
}

#[test]
fn a_command_overtaken_by_one_sent_the_same_instant_is_overtaken() {
    let r = GiveUpRule {
        timeout: Duration::from_ms(5),
        cap: Duration::from_ms(3_000),
        overtaken_at: Some(at(50)),
        own_answered_at: Some(at(40)),
        overtaker_rtt: None,
        bound: BOUND,
        tested: false,
        check_wait: Duration::from_ms(5),
    };
    assert_eq!(r.due(at(50)), at(55), "sent no later than the one answered");
    assert_eq!(
        r.due(at(40)),
        at(45),
        "its path answered nothing sent after it"
    );
    assert_eq!(
        r.due(at(39)),
        at(3_039),
        "its path answered one sent after it"
    );
}

#[test]
fn the_stall_and_abort_deadlines_follow_the_sends_and_the_aborts() {
    let mut t = SlotTable::new(3);
    let limit = Duration::from_ms(100);
    assert_eq!(
        (t.stall_deadline(limit), t.abort_deadline(limit)),
        (None, None)
    );
    let first = send(&mut t, io(1, 1, true), at(10));
    send(&mut t, io(2, 2, false), at(20));
    assert_eq!(
        t.stall_deadline(limit),
        Some(at(110)),
        "the oldest send not completed"
    );
    t.send_completed((first >> 32) as usize);
    assert_eq!(t.stall_deadline(limit), Some(at(120)));
    assert!(!t.stalled_send(at(119), limit));
    assert!(t.stalled_send(at(120), limit));
    assert_eq!(t.abort_deadline(limit), None, "nothing given up");
    t.give_up_overdue(at(130), &rule(limit, at(100)), |_, _| true);
    assert_eq!(t.aborting(), 2);
    assert_eq!(
        t.abort_deadline(limit),
        Some(at(230)),
        "the aborts went out at 130"
    );
    assert_eq!(
        t.stall_deadline(limit),
        Some(at(120)),
        "a given-up send still uncompleted"
    );
    // Only completed sends: no stall, whatever their age.
    let mut done = SlotTable::new(1);
    let tag = send(&mut done, io(3, 3, false), at(0));
    done.send_completed((tag >> 32) as usize);
    assert!(!done.stalled_send(at(10_000), limit));
    assert_eq!(done.stall_deadline(limit), None);
}

#[test]
fn a_slot_holds_its_send_while_in_flight_or_aborting_and_owes_two_answers_per_abort() {
    let mut t = SlotTable::new(3);
    assert_eq!((t.len(), t.is_empty()), (3, false));
    assert!(SlotTable::new(0).is_empty());
    let a = send(&mut t, io(1, 1, false), at(0));
    let b = send(&mut t, io(2, 2, false), at(0));
    assert!(t.holds(a) && t.holds(b));
    assert!(!t.holds(a + 1), "a later generation of its slot");
    assert!(!t.holds(tag(2, 1)), "a slot never sent");
    t.give_up_overdue(at(100), &rule(Duration::from_ms(100), at(50)), |_, _| true);
    assert!(
        t.holds(a) && t.holds(b),
        "given up, their aborts unanswered"
    );
    assert_eq!(
        t.answers_owed(),
        4,
        "two given up: a late answer and an abort's each"
    );
    assert!(matches!(t.answer(a, true), Answer::AbortAnswered { .. }));
    assert!(!t.holds(a), "its abort answered: the slot is free");
    assert_eq!(t.answers_owed(), 2);
}

/// Past the command bound on a disk of one path: the command is given up to itself. Its I/O
/// stays owed here (never fenced: no other path re-issues it), and goes out again, first,
/// only once the target answered the abort: no copy of the old send can run after that.
#[test]
fn a_command_given_up_to_its_own_table_goes_again_once_its_abort_is_answered() {
    let mut t = SlotTable::new(3);
    assert_eq!(t.oldest_sent(), None, "nothing out");
    let first = send(&mut t, io(1, 4, true), at(20));
    send(&mut t, io(2, 5, false), at(50));
    t.admit(io(3, 6, false)).expect("room");
    let bound = Duration::from_ms(100);
    let own = GiveUpRule {
        timeout: bound,
        cap: bound,
        overtaken_at: None,
        own_answered_at: None,
        overtaker_rtt: None,
        bound,
        tested: false,
        check_wait: Duration::from_ms(5),
    };
    assert_eq!(t.next_overdue(&own), Some(at(120)), "the oldest's bound");
    assert_eq!(t.out_since(at(120), bound), 1);
    assert_eq!(t.oldest_sent(), Some(at(20)));
    let mut aborts = Vec::new();
    let n = t.give_up_overdue(at(120), &own, |tag, _| {
        aborts.push(tag);
        false
    });
    assert_eq!((n, aborts.as_slice()), (1, &[first][..]));
    assert!(t.tracks(1), "still owed here");
    assert_eq!(
        t.fenced_writes().count(),
        0,
        "its own re-issue writes the same data"
    );
    assert_eq!(
        t.answers_owed(),
        1 + 2,
        "the other's answer, its late one and the abort's"
    );
    assert_eq!(
        t.next_send().map(|(_, _, r)| r.id),
        Some(3),
        "not sent again yet"
    );
    // The command ran before the abort came: its late answer still measures the path.
    assert_eq!(
        t.answer(first, false),
        Answer::Late {
            sent_at: Some(at(20))
        }
    );
    assert!(matches!(t.answer(first, true), Answer::AbortAnswered { req } if req.id == 1));
    assert_eq!(
        t.next_send().map(|(_, _, r)| r.id),
        Some(1),
        "first out again, ahead of the one waiting"
    );
    assert_eq!(t.pop_struck_out(2), None, "given up once");
    assert_eq!(t.pop_struck_out(1).map(|r| r.id), Some(1));
    assert!(!t.tracks(1), "struck out: taken out to be failed upward");
}

#[test]
fn a_connection_lost_sends_again_what_was_given_up_to_its_own_table() {
    let mut t = SlotTable::new(2);
    send(&mut t, io(1, 4, false), at(0));
    let other = send(&mut t, io(2, 5, false), at(10));
    let own = GiveUpRule {
        timeout: Duration::from_ms(100),
        cap: Duration::from_ms(100),
        overtaken_at: None,
        own_answered_at: None,
        overtaker_rtt: None,
        bound: Duration::from_ms(100),
        tested: false,
        check_wait: Duration::from_ms(5),
    };
    assert_eq!(t.give_up_overdue(at(105), &own, |_, _| false), 1);
    assert_eq!(
        t.overdue(at(105), Duration::from_ms(100)),
        1,
        "sent 105 ms ago"
    );
    assert_eq!(t.overdue(at(105), Duration::from_ms(105)), 0);
    assert_eq!(t.take_back(), 1, "one in flight");
    assert_eq!(t.queued(), 2, "and the one given up to itself");
    let order: Vec<u64> = std::iter::from_fn(|| t.pop_queued_front().map(|r| r.id)).collect();
    assert_eq!(order, [1, 2], "oldest first");
    assert_eq!(t.answer(other, false), LATE, "the old connection's");
}

#[test]
fn a_probes_late_answer_says_when_it_was_sent_and_the_transport_deadlines_follow_the_sends() {
    let mut t = SlotTable::new(2);
    let i = t.admit(io(1, 1, false)).expect("room");
    t.mark_probe(i);
    let (_, probe, _) = t.next_send().expect("queued");
    t.sent(at(10));
    let budget = Duration::from_ms(500);
    assert_eq!(t.transport_deadline(budget, at(10)), Some(at(510)));
    t.send_completed(i);
    assert_eq!(t.transport_deadline(budget, at(10)), None, "acknowledged");
    t.give_up_overdue(at(20), &rule(Duration::from_ms(5), at(15)), |_, _| true);
    assert_eq!(
        t.transport_deadline(budget, at(20)),
        Some(at(520)),
        "the abort's send, from when it went"
    );
    assert_eq!(t.transport_deadline(budget, at(520)), None, "past it");
    assert_eq!(
        t.answer(probe, false),
        Answer::Late {
            sent_at: Some(at(10))
        }
    );
}

/// With its path's own test, a command overtaken elsewhere is given up only once the
/// first command its path sent after it has been out the timeout too; with nothing sent
/// after it, at its bound (the path checks itself first).
#[test]
fn a_tested_command_waits_for_the_first_command_after_it() {
    let mut t = SlotTable::new(4);
    send(&mut t, io(1, 4, false), at(0));
    let tested = GiveUpRule {
        tested: true,
        ..rule(Duration::from_ms(5), at(0))
    };
    assert_eq!(
        t.next_overdue(&rule(Duration::from_ms(5), at(0))),
        Some(at(5))
    );
    assert_eq!(
        t.next_overdue(&tested),
        Some(at(0) + BOUND),
        "nothing after it"
    );
    send(&mut t, io(2, 5, false), at(3));
    assert_eq!(
        t.next_overdue(&tested),
        Some(at(8)),
        "the later one out 5 ms too"
    );
}

/// A check, nobody's I/O, tested by a check waits half as long: overtaken at 0 and tested
/// by a check sent 2.5 ms later, it is due at its timeout (5 ms), where a command of I/O
/// tested so, or a check tested by a command of I/O, waits for that test's whole timeout
/// (7.5 ms).
#[test]
fn a_check_tested_by_a_check_waits_half_a_timeout() {
    let half = Duration::from_us(2_500);
    let tested = GiveUpRule {
        tested: true,
        check_wait: half,
        ..rule(Duration::from_ms(5), at(0))
    };
    let whole = at(7) + Duration::from_us(500);
    let check = IoRequest::check;
    for (first, test, due) in [
        (check(at(0)), check(at(0) + half), at(5)),
        (io(1, 4, false), check(at(0) + half), whole),
        (check(at(0)), io(2, 5, false), whole),
    ] {
        let mut t = SlotTable::new(4);
        send(&mut t, first, at(0));
        assert_eq!(t.youngest().map(|s| s.check), Some(first.is_check()));
        send(&mut t, test, at(0) + half);
        assert_eq!(
            t.oldest().map(|s| (s.at, s.check)),
            Some((at(0), first.is_check()))
        );
        let after = t.first_after(at(0)).map(|s| (s.at, s.check));
        assert_eq!(after, Some((at(0) + half, test.is_check())));
        assert_eq!(t.next_overdue(&tested), Some(due), "{first:?} {test:?}");
    }
}

/// Half a timeout, rounded up, while it holds two of the path's round trips; else the
/// whole timeout: a path slow by nature (50 ms answers, a 55 ms timeout) or not measured yet.
#[test]
fn a_checks_wait_is_half_the_timeout_only_beside_a_short_round_trip() {
    let us = Duration::from_us;
    let ms = Duration::from_ms;
    assert_eq!(check_wait(us(5_001), Some(us(200))), us(2_501));
    assert_eq!(check_wait(ms(10), Some(ms(2) + us(500))), ms(5));
    assert_eq!(check_wait(ms(10), Some(ms(2) + us(501))), ms(10));
    assert_eq!(check_wait(ms(55), Some(ms(50))), ms(55));
    assert_eq!(check_wait(ms(5), None), ms(5));
}
