//! One test per cell of the behaviour table of docs/design.md §7, plus the reset paths around it.

use hcabus::bus::BusHandle;
use hcabus::coordinator::Registration;
use hcabus::errors::{RegisterError, UnregisterError};
use hcabus::fabric::Fabric;
use hcabus::fabric::RemoteRdma;
use hcabus::hca::Hca;
use hcabus::types::Epoch;
use hcabus::types::{ClientDesc, ClientId};
use hcabus::verbs::*;
use hcabus::State;
use hcabus::{Instant, Policy};
use hcabus_sim::{RemoteError, SimHca, SimHcaConfig};
use ibal::access::*;
use ibal::errors::*;
use ibal::handle::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The access layer's view from below, without a coordinator: a state and a device. IBAL
/// never calls the bus itself (its client does), so every call here fails the test.
struct Rig {
    state: State,
    hca: SimHca,
    rng: ChaCha8Rng,
}

const NO_BUS: &str = "IBAL called the bus: only its client may";

impl BusHandle for Rig {
    type Device = SimHca;
    type Rng = ChaCha8Rng;
    fn now(&self) -> Instant {
        Instant::ZERO
    }
    fn state(&self) -> State {
        self.state
    }
    fn epoch(&self) -> Epoch {
        Epoch(1)
    }
    fn policy(&self) -> Policy {
        Policy::default()
    }
    fn port(&self, _: u8) -> Option<hcabus::coordinator::PortView> {
        None
    }
    fn register(&mut self, _: ClientDesc) -> Result<Registration, RegisterError> {
        panic!("{NO_BUS}")
    }
    fn unregister(&mut self, _: ClientId) -> Result<(), UnregisterError> {
        panic!("{NO_BUS}")
    }
    fn input<R>(&mut self, _: impl FnOnce(&mut hcabus::bus::ClientPort<'_>, Instant) -> R) -> R {
        panic!("{NO_BUS}")
    }
    fn device_and_rng(&mut self) -> (&mut SimHca, &mut ChaCha8Rng) {
        (&mut self.hca, &mut self.rng)
    }
}

const PEER: RemoteQp = RemoteQp {
    lid: 0x30,
    qpn: Qpn(0x99),
};

#[derive(Debug, Clone, Copy)]
struct Res {
    pd: PdHandle,
    cq: CqHandle,
    qp: QpHandle,
    mr: MrHandle,
    keys: MrKeys,
    buf: u64,
}

fn setup() -> (Ibal, Rig, ConsumerId, Res) {
    let mut rig = Rig {
        state: State::Operational,
        hca: SimHca::new(SimHcaConfig::default()),
        rng: ChaCha8Rng::seed_from_u64(1),
    };
    let mut ibal = Ibal::new(IbalConfig::default());
    ibal.attach(Epoch(1), State::Operational);
    let c = ibal.open("ulp").expect("consumer");
    let res = resources(&mut ibal, &mut rig, c, MrFlags::empty());
    (ibal, rig, c, res)
}

fn resources(ibal: &mut Ibal, rig: &mut Rig, c: ConsumerId, flags: MrFlags) -> Res {
    let pd = ibal.alloc_pd(rig, c).expect("pd");
    let cq = ibal.create_cq(rig, c, 64).expect("cq");
    let qp = ibal
        .create_qp(rig, c, QpSpec::on_one_cq(pd, QpType::Rc, cq, 1, 16))
        .expect("qp");
    ibal.ready_to_receive(rig, c, qp, Some(PEER)).expect("rtr");
    ibal.modify_qp(rig, c, qp, QpState::Rts, None).expect("rts");
    let buf = rig.hca.verbs_mut().dma_alloc(4096).expect("dma");
    let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let (mr, keys) = ibal
        .reg_mr(
            rig,
            c,
            MrSpec {
                pd,
                addr: buf,
                len: 4096,
                access: all,
                flags,
            },
        )
        .expect("mr");
    Res {
        pd,
        cq,
        qp,
        mr,
        keys,
        buf,
    }
}

fn send(r: &Res, wr_id: u64) -> Send {
    Send {
        wr_id,
        sge: Sge {
            addr: r.buf,
            len: 16,
            lkey: r.keys.lkey,
        },
        dest: Dest::Connected,
    }
}

fn recv(r: &Res, wr_id: u64) -> RecvWr {
    RecvWr {
        wr_id,
        sge: Sge {
            addr: r.buf + 1024,
            len: 256,
            lkey: r.keys.lkey,
        },
    }
}

/// Brings the rig through a reset the way the bus does: RESET to IBAL (release), the
/// device resets and comes back, RESET_END to IBAL (restore).
fn reset(ibal: &mut Ibal, rig: &mut Rig, to: Epoch) {
    rig.state = State::Quiescing;
    ibal.release_all(rig);
    rig.state = State::Resetting;
    rig.hca.save_config().expect("save config");
    rig.hca.assert_reset().expect("reset");
    rig.hca.set_now(Instant::from_ms(1_000));
    rig.hca.probe_ready().expect("probe");
    rig.hca.restore_config().expect("restore config");
    rig.hca.init_command_interface().expect("init");
    rig.state = State::Restoring;
    ibal.restore(rig, to);
    rig.state = State::Operational;
}

// ----- create / modify / allocate -----

#[test]
fn creates_work_when_operational() {
    let (mut ibal, mut rig, c, r) = setup();
    assert!(ibal.create_ah(&mut rig, c, r.pd, 1, 7).is_ok());
    assert_eq!(ibal.objects_of(c), 5);
    assert!(rig.hca.verbs().live_objects() >= 5);
}

#[test]
fn creates_during_a_reset_are_refused_with_resetting() {
    for state in [State::Quiescing, State::Resetting, State::Restoring] {
        let (mut ibal, mut rig, c, r) = setup();
        rig.state = state;
        if state != State::Quiescing {
            // By Resetting IBAL has had its RESET.
            ibal.release_all(&mut rig);
        }
        let live = rig.hca.verbs().live_objects();
        assert_eq!(
            ibal.alloc_pd(&mut rig, c),
            Err(CreateError::Resetting),
            "{state}"
        );
        assert_eq!(ibal.create_cq(&mut rig, c, 8), Err(CreateError::Resetting));
        if state == State::Quiescing {
            // Handles are still current before IBAL's own RESET: the state refuses.
            assert_eq!(
                ibal.modify_qp(&mut rig, c, r.qp, QpState::Error, None),
                Err(CreateError::Resetting)
            );
        }
        assert_eq!(
            rig.hca.verbs().live_objects(),
            live,
            "nothing reached the device"
        );
    }
}

#[test]
fn creates_after_a_failure_are_refused_with_device_failed() {
    for (state, removed) in [(State::Failed, false), (State::Removed, true)] {
        let (mut ibal, mut rig, c, r) = setup();
        rig.state = state;
        ibal.fail(&mut rig, removed);
        assert_eq!(ibal.alloc_pd(&mut rig, c), Err(CreateError::DeviceFailed));
        assert_eq!(
            ibal.create_ah(&mut rig, c, r.pd, 1, 3),
            Err(CreateError::DeviceFailed),
            "the failure wins over the stale PD"
        );
        let e = CreateError::DeviceFailed.to_string();
        assert!(e.contains("EIO"), "{e}");
    }
}

#[test]
fn creates_on_stale_handles_are_refused_with_stale_handle() {
    let (mut ibal, mut rig, c, r) = setup();
    reset(&mut ibal, &mut rig, Epoch(2));
    let cq = ibal.create_cq(&mut rig, c, 8).expect("new cq");
    let stale = StaleHandle {
        made_in: Epoch(1),
        current: Epoch(2),
    };
    let spec = QpSpec::on_one_cq(r.pd, QpType::Ud, cq, 1, 4);
    assert_eq!(
        ibal.create_qp(&mut rig, c, spec),
        Err(CreateError::StaleHandle(stale))
    );
    assert_eq!(
        ibal.modify_qp(&mut rig, c, r.qp, QpState::Error, None),
        Err(CreateError::StaleHandle(stale))
    );
    assert_eq!(ibal.stats().refused_stale, 2);
}

// ----- post send / recv -----

#[test]
fn posts_work_when_operational() {
    let (mut ibal, mut rig, c, r) = setup();
    ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 1))
        .expect("recv");
    ibal.post_send(&mut rig, c, r.qp, &send(&r, 2))
        .expect("send");
    assert_eq!(
        ibal.poll_cq(&mut rig, c, r.cq).expect("poll"),
        None,
        "a reliable send completes when its peer acknowledges it"
    );
    let msg = hcabus::fabric::Fabric::wire_take(&mut rig.hca, |m| m.dlid == PEER.lid);
    assert!(msg.is_some(), "the send is on the wire");
    let cqe = ibal.poll_cq(&mut rig, c, r.cq).expect("poll").expect("cqe");
    assert_eq!((cqe.wr_id, cqe.status), (2, WcStatus::Success));
}

#[test]
fn posts_during_a_reset_fail_at_once_and_queue_nothing() {
    let (mut ibal, mut rig, c, r) = setup();
    rig.state = State::Quiescing;
    let posted = *rig.hca.verbs().stats();
    assert_eq!(
        ibal.post_send(&mut rig, c, r.qp, &send(&r, 1)),
        Err(PostError::Resetting)
    );
    assert_eq!(
        ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 2)),
        Err(PostError::Resetting)
    );
    let now = rig.hca.verbs().stats();
    assert_eq!(
        (now.sends_posted, now.recvs_posted),
        (posted.sends_posted, posted.recvs_posted)
    );
    assert_eq!(rig.hca.verbs().wire_len(), 0);
}

#[test]
fn posts_after_a_failure_get_eio() {
    let (mut ibal, mut rig, c, r) = setup();
    rig.state = State::Failed;
    assert_eq!(
        ibal.post_send(&mut rig, c, r.qp, &send(&r, 1)),
        Err(PostError::DeviceFailed)
    );
    ibal.fail(&mut rig, false);
    assert_eq!(
        ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 1)),
        Err(PostError::DeviceFailed)
    );
}

#[test]
fn posts_on_stale_handles_get_stale_handle() {
    let (mut ibal, mut rig, c, r) = setup();
    reset(&mut ibal, &mut rig, Epoch(2));
    let err = ibal.post_send(&mut rig, c, r.qp, &send(&r, 1));
    assert!(matches!(err, Err(PostError::StaleHandle(_))), "{err:?}");
    assert_eq!(rig.hca.verbs().stats().sends_posted, 0);
}

// ----- destroy / deallocate -----

#[test]
fn destroys_when_operational_free_the_hardware() {
    let (mut ibal, mut rig, c, r) = setup();
    let before = rig.hca.verbs().live_objects();
    ibal.destroy_qp(&mut rig, c, r.qp).expect("qp");
    assert_eq!(
        ibal.dealloc_pd(&mut rig, c, r.pd),
        Err(DestroyError::Busy),
        "MR inside"
    );
    ibal.dereg_mr(&mut rig, c, r.mr).expect("mr");
    ibal.destroy_cq(&mut rig, c, r.cq).expect("cq");
    ibal.dealloc_pd(&mut rig, c, r.pd).expect("pd");
    assert_eq!(rig.hca.verbs().live_objects(), before - 4);
    assert_eq!(ibal.objects_of(c), 0);
}

#[test]
fn destroys_during_a_reset_succeed_in_software() {
    let (mut ibal, mut rig, c, r) = setup();
    rig.state = State::Quiescing;
    let hw_before = rig.hca.verbs().live_objects();
    ibal.destroy_qp(&mut rig, c, r.qp).expect("qp");
    ibal.dereg_mr(&mut rig, c, r.mr).expect("mr");
    ibal.destroy_cq(&mut rig, c, r.cq).expect("cq");
    ibal.dealloc_pd(&mut rig, c, r.pd).expect("pd");
    assert_eq!(ibal.objects_of(c), 0);
    assert_eq!(
        rig.hca.verbs().live_objects(),
        hw_before,
        "no firmware command during a reset"
    );
}

#[test]
fn destroys_after_a_failure_succeed() {
    let (mut ibal, mut rig, c, r) = setup();
    rig.state = State::Failed;
    ibal.fail(&mut rig, false);
    ibal.destroy_qp(&mut rig, c, r.qp).expect("qp");
    ibal.dereg_mr(&mut rig, c, r.mr).expect("mr");
    ibal.destroy_cq(&mut rig, c, r.cq).expect("cq");
    ibal.dealloc_pd(&mut rig, c, r.pd).expect("pd");
    assert_eq!(ibal.objects_of(c), 0);
}

#[test]
fn destroying_a_stale_handle_succeeds_and_spares_the_slot_s_new_owner() {
    let (mut ibal, mut rig, c, r) = setup();
    reset(&mut ibal, &mut rig, Epoch(2));
    // The old consumer destroys its QP; another consumer gets the same slot.
    ibal.destroy_qp(&mut rig, c, r.qp).expect("first destroy");
    let other = ibal.open("other").expect("consumer");
    let r2 = resources(&mut ibal, &mut rig, other, MrFlags::empty());
    assert_eq!(r2.qp.index, r.qp.index, "slot reused");
    ibal.destroy_qp(&mut rig, c, r.qp)
        .expect("stale destroy is ok");
    assert!(ibal.qpn(other, r2.qp).is_some(), "the new owner's QP lives");
    assert_eq!(
        ibal.destroy_qp(&mut rig, c, r2.qp),
        Err(DestroyError::NotOwner)
    );
}

// ----- poll CQ -----

#[test]
fn polls_when_operational_return_hardware_completions() {
    let (mut ibal, mut rig, c, r) = setup();
    ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 10))
        .expect("recv");
    let qpn = ibal.qpn(c, r.qp).expect("current");
    rig.hca.remote_send(PEER, qpn, b"hi").expect("peer sends");
    let cqe = ibal.poll_cq(&mut rig, c, r.cq).expect("poll").expect("cqe");
    assert_eq!(
        (cqe.wr_id, cqe.opcode, cqe.byte_len),
        (10, WcOpcode::Recv, 2)
    );
    assert_eq!(ibal.poll_cq(&mut rig, c, r.cq), Ok(None));
}

#[test]
fn polls_during_a_reset_give_flushed_completions_then_nothing() {
    let (mut ibal, mut rig, c, r) = setup();
    ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 1))
        .expect("recv");
    ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 2))
        .expect("recv");
    ibal.post_send(&mut rig, c, r.qp, &send(&r, 3))
        .expect("send");
    // The peer takes it: acknowledged, complete.
    hcabus::fabric::Fabric::wire_take(&mut rig.hca, |m| m.dlid == PEER.lid).expect("sent");
    rig.hca.inject_catastrophic(1);
    // Swallowed by the dead device: only a flush will ever complete it.
    ibal.post_send(&mut rig, c, r.qp, &send(&r, 4))
        .expect("doorbell");
    rig.state = State::Quiescing;
    ibal.release_all(&mut rig);
    rig.state = State::Resetting;
    let mut got = Vec::new();
    while let Some(cqe) = ibal.poll_cq(&mut rig, c, r.cq).expect("poll") {
        got.push((cqe.wr_id, cqe.status));
    }
    assert_eq!(
        got,
        [
            (3, WcStatus::Success),
            (4, WcStatus::Flushed),
            (1, WcStatus::Flushed),
            (2, WcStatus::Flushed)
        ],
        "the completed send is kept as a success, the rest are flushed"
    );
    assert_eq!(ibal.stats().drained, 1);
    assert_eq!(ibal.stats().flushed, 3);
}

#[test]
fn polls_after_a_failure_give_flushed_completions() {
    let (mut ibal, mut rig, c, r) = setup();
    ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 7))
        .expect("recv");
    rig.state = State::Failed;
    ibal.fail(&mut rig, false);
    let cqe = ibal.poll_cq(&mut rig, c, r.cq).expect("poll").expect("cqe");
    assert_eq!((cqe.wr_id, cqe.status), (7, WcStatus::Flushed));
    assert_eq!(ibal.poll_cq(&mut rig, c, r.cq), Ok(None));
}

#[test]
fn polls_of_stale_cqs_give_flushed_completions_then_nothing() {
    let (mut ibal, mut rig, c, r) = setup();
    ibal.post_recv(&mut rig, c, r.qp, &recv(&r, 5))
        .expect("recv");
    reset(&mut ibal, &mut rig, Epoch(2));
    let cqe = ibal.poll_cq(&mut rig, c, r.cq).expect("poll").expect("cqe");
    assert_eq!((cqe.wr_id, cqe.status), (5, WcStatus::Flushed));
    assert_eq!(ibal.poll_cq(&mut rig, c, r.cq), Ok(None));
    ibal.destroy_qp(&mut rig, c, r.qp).expect("qp");
    ibal.destroy_cq(&mut rig, c, r.cq).expect("cq");
    assert_eq!(
        ibal.poll_cq(&mut rig, c, r.cq),
        Ok(None),
        "destroyed in an older epoch: nothing, not an error"
    );
}

// ----- around the table -----

#[test]
fn preserved_keys_come_back_and_ordinary_keys_do_not() {
    let (mut ibal, mut rig, c, plain) = setup();
    let kept = resources(&mut ibal, &mut rig, c, MrFlags::PRESERVE_KEYS);
    reset(&mut ibal, &mut rig, Epoch(2));
    assert_eq!(ibal.stats().preserved_restored, 1);
    // The consumer reconnects a new QP in the preserved PD; the peer reuses the old R-Key.
    let cq = ibal.create_cq(&mut rig, c, 8).expect("cq");
    let qp = ibal
        .create_qp(
            &mut rig,
            c,
            QpSpec::on_one_cq(kept.pd, QpType::Rc, cq, 1, 4),
        )
        .expect("qp in the preserved PD");
    ibal.ready_to_receive(&mut rig, c, qp, Some(PEER))
        .expect("rtr");
    let qpn = ibal.qpn(c, qp).expect("qpn");
    rig.hca
        .verbs_mut()
        .mem_mut(kept.buf, 4)
        .expect("mem")
        .copy_from_slice(b"keep");
    let mut out = [0u8; 4];
    rig.hca
        .remote_rdma_read(
            RemoteRdma::new(PEER, qpn, kept.keys.rkey, kept.buf),
            &mut out,
        )
        .expect("old R-Key works");
    assert_eq!(&out, b"keep");
    assert_eq!(
        rig.hca.remote_rdma_read(
            RemoteRdma::new(PEER, qpn, plain.keys.rkey, plain.buf),
            &mut out
        ),
        Err(RemoteError::AccessError),
        "an ordinary region's old R-Key is dead"
    );
    // The preserved region's handle is still good: it deregisters in hardware.
    let live = rig.hca.verbs().live_objects();
    ibal.dereg_mr(&mut rig, c, kept.mr).expect("dereg");
    assert_eq!(rig.hca.verbs().live_objects(), live - 1);
}

#[test]
fn an_aborted_reset_destroys_what_it_released_in_hardware() {
    let (mut ibal, mut rig, c, r) = setup();
    let before = rig.hca.verbs().live_objects();
    rig.state = State::Quiescing;
    ibal.release_all(&mut rig);
    // The consumer tears down in software during the quiesce; then the reset is vetoed.
    ibal.destroy_qp(&mut rig, c, r.qp).expect("qp");
    rig.state = State::Operational;
    ibal.resume();
    assert!(ibal.has_orphans());
    assert_eq!(
        rig.hca.verbs().live_objects(),
        before,
        "still in the device"
    );
    ibal.destroy_orphans(&mut rig);
    assert_eq!(rig.hca.verbs().live_objects(), 0);
    assert_eq!(ibal.stats().orphans_destroyed as usize, before);
    // The epoch did not change, but released handles are stale all the same.
    assert!(matches!(
        ibal.post_send(&mut rig, c, r.qp, &send(&r, 1)),
        Err(PostError::InvalidHandle)
    ));
    assert!(matches!(
        ibal.create_ah(&mut rig, c, r.pd, 1, 1),
        Err(CreateError::StaleHandle(s)) if s.made_in == s.current
    ));
}

#[test]
fn unknown_consumers_and_foreign_handles_are_refused() {
    let (mut ibal, mut rig, c, r) = setup();
    let other = ibal.open("other").expect("open");
    assert_eq!(
        ibal.post_send(&mut rig, other, r.qp, &send(&r, 1)),
        Err(PostError::NotOwner)
    );
    assert_eq!(
        ibal.poll_cq(&mut rig, other, r.cq),
        Err(PollError::NotOwner)
    );
    ibal.close(&mut rig, other).expect("close");
    assert_eq!(
        ibal.alloc_pd(&mut rig, other),
        Err(CreateError::UnknownConsumer)
    );
    ibal.close(&mut rig, c).expect("close frees everything");
    assert_eq!(rig.hca.verbs().live_objects(), 0);
}
