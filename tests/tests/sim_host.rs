//! The virtual-time host: callbacks that call back into the bus, and whole scenarios.

use hcabus::bus::{BusHandle, Client, ClientReport};
use hcabus::recorder::RecordKind;
use hcabus::types::*;
use hcabus::types::{ClientState, State};
use hcabus::{Duration, Instant, Policy};
use hcabus_sim::{scenarios, Behavior, Fault, SimHost, SimSetup};
use hcabus_tests::{acks_after, desc, events_of, run};
use EventKind::*;

fn setup(clients: Vec<(ClientDesc, Behavior)>, faults: Vec<(u64, Fault)>) -> SimSetup {
    SimSetup {
        name: "test".into(),
        duration: Duration::from_ms(10_000),
        policy: Policy {
            quiesce_deadline_ms: 1_000,
            ..Policy::default()
        },
        clients,
        faults: faults
            .into_iter()
            .map(|(ms, f)| (Instant::from_ms(ms), f))
            .collect(),
        ..SimSetup::default()
    }
}

fn custom(name: &str) -> ClientDesc {
    desc(name, ClientKind::Custom, ClientFlags::empty())
}

#[test]
fn default_scenario_recovers_with_every_client_back() {
    let host = run(&scenarios::scripted_boot_from_san());
    let c = host.coordinator();
    assert_eq!(c.state(), State::Operational);
    assert_eq!(c.epoch(), Epoch(2));
    assert_eq!(host.resets().len(), 1);
    let r = &host.resets()[0];
    assert_eq!(r.reason, ResetReason::Catastrophic);
    assert_eq!(r.outcome(), "Restored");
    assert_eq!(r.pnp_operations, 0);
    assert!(r.forced_clients.is_empty());
    for a in host.agents() {
        assert_eq!(a.events(), [Reset, ResetEnd], "{}", a.name());
    }
    assert_eq!(host.checker().violations, Vec::<String>::new());
    assert!(host.checker().checked >= 12);
}

#[test]
fn execute_from_inside_the_reset_callback() {
    let host = run(&setup(
        vec![
            (custom("inline"), acks_after(0)),
            (custom("other"), acks_after(0)),
        ],
        vec![(500, Fault::AdminReset)],
    ));
    let r = &host.resets()[0];
    assert_eq!(
        r.quiesce_us(),
        Some(0),
        "both executed inside their callbacks"
    );
    assert_eq!(events_of(&host, "inline"), [Reset, ResetEnd]);
}

#[test]
fn unregister_from_inside_the_reset_callback_counts_as_ready() {
    let leaver = Behavior {
        unregister_on_reset: true,
        ..Behavior::default()
    };
    let host = run(&setup(
        vec![(custom("stays"), acks_after(0)), (custom("leaver"), leaver)],
        vec![(500, Fault::AdminReset)],
    ));
    let r = &host.resets()[0];
    assert_eq!(r.outcome(), "Restored");
    assert_eq!(r.quiesce_us(), Some(0), "no wait for the deadline");
    assert_eq!(events_of(&host, "leaver"), [Reset]);
    assert_eq!(host.coordinator().client_count(), 1);
}

#[test]
fn reregister_from_inside_the_reset_callback_is_late_and_gets_reset_end() {
    let rereg = Behavior {
        reregister_on_reset: true,
        ..Behavior::default()
    };
    let host = run(&setup(
        vec![(custom("stays"), acks_after(0)), (custom("rereg"), rereg)],
        vec![(500, Fault::AdminReset)],
    ));
    // Old id: RESET; new (late) id: RESET_END, without a RESET of its own.
    assert_eq!(events_of(&host, "rereg"), [Reset, ResetEnd]);
    let a = host
        .agents()
        .iter()
        .find(|a| a.name() == "rereg")
        .expect("agent");
    let id = a.id().expect("registered again");
    assert_eq!(
        host.coordinator().client(id).expect("new id").state,
        ClientState::Active
    );
    assert_eq!(host.checker().violations, Vec::<String>::new());
}

/// An agent that, from its RESET callback, registers a helper, unregisters the helper,
/// executes, and checks the bus state: everything a callback may do.
#[derive(Debug)]
struct Acrobat {
    id: Option<ClientId>,
    events: Vec<EventKind>,
    helper_results: Vec<&'static str>,
}

impl<B: BusHandle + ?Sized> Client<B> for Acrobat {
    fn start(&mut self, bus: &mut B) {
        self.id = Some(bus.register(custom("acrobat")).expect("register").id);
    }

    fn on_event(&mut self, bus: &mut B, id: ClientId, event: Event) {
        self.events.push(event.kind());
        if let Event::Reset { epoch, .. } = event {
            assert_eq!(bus.state(), State::Quiescing);
            let helper = bus
                .register(custom("helper"))
                .expect("register inside callback");
            assert!(helper.late);
            self.helper_results.push("registered");
            bus.unregister(helper.id)
                .expect("unregister inside callback");
            self.helper_results.push("unregistered");
            bus.reset_execute(id, epoch)
                .expect("execute inside callback");
            self.helper_results.push("executed");
            // A second request from inside the callback joins the reset under way.
            assert_eq!(bus.reset_request(id), Ok(epoch));
        }
    }
}

impl ClientReport for Acrobat {
    fn name(&self) -> &str {
        "acrobat"
    }

    fn events(&self) -> &[EventKind] {
        &self.events
    }

    fn id(&self) -> Option<ClientId> {
        self.id
    }
}

#[test]
fn register_unregister_execute_and_request_from_inside_a_callback() {
    let s = setup(vec![], vec![(500, Fault::AdminReset)]);
    let acrobat = Acrobat {
        id: None,
        events: Vec::new(),
        helper_results: Vec::new(),
    };
    let mut host = SimHost::with_agents(&s, vec![Box::new(acrobat)]).expect("setup");
    host.run();
    assert_eq!(host.agents()[0].events(), [Reset, ResetEnd]);
    assert_eq!(host.coordinator().state(), State::Operational);
    assert_eq!(host.coordinator().counters().resets_started, 1);
    assert_eq!(host.resets()[0].requests, 2);
}

#[test]
fn stuck_client_is_forced_named_and_still_restarted() {
    let wedged = Behavior {
        never_ack: true,
        ..Behavior::default()
    };
    let host = run(&setup(
        vec![(custom("good"), acks_after(3)), (custom("wedged"), wedged)],
        vec![(500, Fault::Catastrophic)],
    ));
    let r = &host.resets()[0];
    assert_eq!(r.outcome(), "Restored");
    assert_eq!(r.forced_clients, ["wedged"]);
    let quiesce = r.quiesce_us().expect("quiesce ended");
    assert!(
        quiesce >= 1_000_000,
        "waited the full deadline: {quiesce}us"
    );
    assert_eq!(events_of(&host, "wedged"), [Reset, ResetEnd]);
    let named = host.coordinator().recorder().iter().any(
        |rec| matches!(rec.kind, RecordKind::Unresponsive { .. } if rec.name.as_str() == "wedged"),
    );
    assert!(named);
}

#[test]
fn vetoed_planned_reset_changes_nothing_in_hardware() {
    let vetoer = Behavior {
        veto_planned: true,
        ..Behavior::default()
    };
    let host = run(&setup(
        vec![
            (custom("a"), acks_after(0)),
            (
                desc("db", ClientKind::Custom, ClientFlags::CAN_VETO),
                vetoer,
            ),
        ],
        vec![(500, Fault::PlannedReset)],
    ));
    let r = &host.resets()[0];
    assert_eq!(r.outcome(), "Aborted");
    assert_eq!(r.vetoed_by.as_deref(), Some("db"));
    assert_eq!(host.hca().stats().soft_resets, 0);
    assert_eq!(host.coordinator().epoch(), Epoch(1));
    assert_eq!(events_of(&host, "a"), [], "a veto disturbs nobody");
    assert_eq!(events_of(&host, "db"), [ResetQuery, ResetAborted]);
}

#[test]
fn one_noisy_client_is_throttled_and_never_fails_the_device() {
    let stormy = Behavior {
        request_every: Some(Duration::from_ms(1_000)),
        ..acks_after(0)
    };
    let host = run(&setup(vec![(custom("stormy"), stormy)], vec![]));
    assert_eq!(host.coordinator().state(), State::Operational);
    let outcomes: Vec<&str> = host.resets().iter().map(|r| r.outcome()).collect();
    assert_eq!(
        outcomes,
        ["Restored", "Restored"],
        "client_request_limit = 2"
    );
    assert!(host.coordinator().counters().throttled >= 2);
}

#[test]
fn requests_from_many_clients_beyond_the_storm_limit_fail_the_device() {
    let at = |ms| Behavior {
        request_reset_at: Some(Instant::from_ms(ms)),
        ..acks_after(0)
    };
    let host = run(&setup(
        vec![
            (custom("a"), at(500)),
            (custom("b"), at(1_500)),
            (custom("c"), at(2_500)),
            (custom("d"), at(3_500)),
        ],
        vec![],
    ));
    assert_eq!(host.coordinator().state(), State::Failed);
    let outcomes: Vec<&str> = host.resets().iter().map(|r| r.outcome()).collect();
    assert_eq!(outcomes, ["Restored", "Restored", "Restored", "StormLimit"]);
    assert_eq!(host.coordinator().counters().throttled, 0);
}

#[test]
fn hang_is_detected_and_recovered() {
    let host = run(&setup(
        vec![(custom("a"), acks_after(1))],
        vec![(500, Fault::Hang)],
    ));
    let r = &host.resets()[0];
    assert!(
        matches!(
            r.reason,
            ResetReason::CommandTimeout | ResetReason::HealthStall
        ),
        "{:?}",
        r.reason
    );
    assert_eq!(r.outcome(), "Restored");
    assert_eq!(
        host.coordinator().counters().resets_started,
        1,
        "one reset for one hang"
    );
}

#[test]
fn surprise_removal_mid_reset_ends_everything() {
    let host = run(&setup(
        vec![(custom("a"), acks_after(0)), (custom("b"), acks_after(0))],
        vec![(500, Fault::Catastrophic), (1_100, Fault::SurpriseRemoval)],
    ));
    // 1000: health poll sees the error; 1100: removed during the 200 ms hardware reset.
    assert_eq!(host.coordinator().state(), State::Removed);
    assert_eq!(events_of(&host, "a"), [Reset, DeviceFatal]);
    assert_eq!(host.resets()[0].outcome(), "Removed");
    assert_eq!(host.checker().violations, Vec::<String>::new());
}

#[test]
fn every_fault_has_one_name_and_every_ioctl_code_one_fault() {
    use hcabus::ioctl::{FaultCode, FaultRequest};
    use hcabus_sim::FaultArgs;
    for f in Fault::ALL {
        let count = if f.takes_count() { 3 } else { 1 };
        let expect = f.with_count(count);
        let parsed = Fault::parse(f.name(), count);
        assert_eq!(parsed, f.in_scenarios().then_some(expect), "{}", f.name());
        assert_eq!(Fault::named(f.name()), Some(f), "{}", f.name());
        if let Some(code) = f.code() {
            assert_eq!(code.as_str(), f.name());
            let request = match f {
                Fault::PortDown { port, duration } => {
                    FaultRequest::port_down(port, duration.as_ms() as u32)
                }
                _ => FaultRequest::new(code, if f.takes_count() { count } else { 0 }),
            };
            assert_eq!(Fault::from_request(request), Some(expect));
            assert_eq!(f.request().map(|r| r.code), Some(code));
        } else {
            assert!(f.request().is_none(), "{}: an act has no request", f.name());
        }
    }
    for code in FaultCode::ALL {
        let f = Fault::from_request(match code {
            FaultCode::PortDown => FaultRequest::port_down(1, 1_000),
            _ => FaultRequest::new(code, 1),
        })
        .expect("every INJECT_FAULT code is a fault");
        assert_eq!(f.code(), Some(code), "{}", code.as_str());
        assert_eq!(f.name(), code.as_str());
    }
    let names: std::collections::HashSet<_> = Fault::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names.len(), Fault::ALL.len(), "names are unique");
    // Every variant is in ALL: a kind of each argument shape, and every code above.
    for args in [
        FaultArgs::None,
        FaultArgs::Count,
        FaultArgs::PortAndDuration,
        FaultArgs::Client,
    ] {
        assert!(Fault::ALL.iter().any(|f| f.args() == args), "{args:?}");
    }
    // What a seed draws is part of what it means: the drawn faults, in this order.
    assert_eq!(
        Fault::DRAWN,
        [
            Fault::Catastrophic,
            Fault::CommandTimeout,
            Fault::HealthStall,
            Fault::Hang,
            Fault::AdminReset,
            Fault::PlannedReset,
            Fault::FwActivate,
            Fault::ResetFails(1),
            Fault::ResetFails(5),
            Fault::DeviceReplaced,
            Fault::NeverReturns,
            Fault::AdminRestart,
            Fault::SurpriseRemoval,
        ]
    );
}

/// docs/design.md §5 "Ports": a cable pulled in any state of a planned reset is kept. The host is
/// stepped a millisecond at a time until the bus is in the state, the cable is pulled there
/// for 5 s, and the port must not be Active again before the plug-back plus training and
/// the sweep. (Restoring takes no virtual time in the simulator: no pull can land inside it.)
#[test]
fn a_cable_pulled_in_any_state_of_a_reset_stays_out_until_its_plug_back() {
    use hcabus_sim::SimHcaConfig;
    for target in [
        State::Operational,
        State::Preparing,
        State::Quiescing,
        State::Resetting,
    ] {
        // A silent CAN_VETO client: the query runs to its deadline, the quiesce to its own.
        let mute = Behavior {
            never_ack: true,
            ..Behavior::default()
        };
        let mut s = setup(
            vec![(
                desc("mute", ClientKind::Custom, ClientFlags::CAN_VETO),
                mute,
            )],
            vec![(1_000, Fault::PlannedReset)],
        );
        s.hca = SimHcaConfig {
            ports: 1,
            hw_reset: Duration::from_ms(300),
            link_up: Duration::from_ms(100),
            sm_sweep: Duration::from_ms(100),
            ..s.hca
        };
        let mut host = SimHost::new(&s).expect("valid");
        let in_state = |h: &SimHost| {
            h.coordinator().state() == target
                && (target != State::Operational || h.now() >= Instant::from_ms(500))
        };
        while !in_state(&host) {
            assert!(
                host.now() < Instant::from_ms(5_000),
                "{target:?} never reached"
            );
            host.run_until(host.now() + Duration::from_ms(1));
        }
        let pulled = host.now();
        host.inject(Fault::PortDown {
            port: 1,
            duration: Duration::from_ms(5_000),
        });
        host.run();
        let back: Vec<Instant> = host
            .coordinator()
            .recorder()
            .iter()
            .filter(|r| r.at > pulled)
            .filter(|r| {
                matches!(
                    r.kind,
                    RecordKind::Port {
                        port: 1,
                        state: PortState::Active,
                        ..
                    }
                )
            })
            .map(|r| r.at)
            .collect();
        let earliest = pulled + Duration::from_ms(5_200);
        assert!(!back.is_empty(), "{target:?}: the port never came back");
        assert!(
            back.iter().all(|t| *t >= earliest),
            "{target:?}: pulled at {pulled}, Active at {back:?} before {earliest}"
        );
        assert_eq!(host.checker().violations, Vec::<String>::new());
        assert_eq!(host.coordinator().state(), State::Operational, "{target:?}");
    }
}

/// A client whose wake-up stays in the past after every wake: it would hold the run at
/// one instant for ever.
#[derive(Debug, Default)]
struct Spinner {
    wakes: u32,
}

impl<B: BusHandle + ?Sized> Client<B> for Spinner {
    fn start(&mut self, _: &mut B) {}
    fn on_event(&mut self, _: &mut B, _: ClientId, _: Event) {}
    fn next_wake(&self) -> Option<Instant> {
        Some(Instant::from_ms(7))
    }
    fn wake(&mut self, _: &mut B) {
        self.wakes += 1;
    }
}

impl ClientReport for Spinner {
    fn name(&self) -> &str {
        "spinner"
    }
    fn events(&self) -> &[EventKind] {
        &[]
    }
    fn id(&self) -> Option<ClientId> {
        None
    }
}

#[test]
fn a_client_that_never_lets_time_move_is_a_livelock_recorded_and_the_run_stops() {
    let s = setup(vec![], vec![]);
    let mut host = SimHost::with_agents(&s, vec![Box::new(Spinner::default())]).expect("setup");
    host.run();
    assert!(host.livelocked());
    assert_eq!(host.now(), Instant::from_ms(7), "stopped where it spun");
    let v = &host.checker().violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("livelock") && v[0].contains("spinner"),
        "{v:?}"
    );
    let spinner: &Spinner = host.agent().expect("the spinner");
    assert_eq!(
        spinner.wakes,
        hcabus_sim::MAX_STEPS_AT_ONE_INSTANT,
        "woken once a step, the first step at 7 ms not counted"
    );
    // Asked to go on, it does not.
    host.run_until(Instant::from_ms(100));
    assert_eq!(host.now(), Instant::from_ms(7));
    // A client that lets time move is never stopped (the default scenario's run).
    let mut host = SimHost::new(&scenarios::boot_from_san_run()).expect("setup");
    host.run();
    assert!(!host.livelocked() && host.checker().violations.is_empty());
}
