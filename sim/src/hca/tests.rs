//! Unit tests of `SimHca`, in a file of their own as the coordinator's are.

use super::*;

fn mr(pd: Pdn, addr: u64, len: u64, access: Access) -> MrAttr {
    MrAttr {
        pd,
        addr,
        len,
        access,
    }
}

#[test]
fn comes_back_after_its_reset_time() {
    let mut h = SimHca::new(SimHcaConfig::default());
    h.set_now(Instant::from_ms(10));
    h.assert_reset().expect("reset");
    assert_eq!(h.probe_ready(), Ok(Readiness::NotReady));
    assert!(h.identity().is_err(), "no identity while in reset");
    h.set_now(Instant::from_ms(210));
    assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
    assert!(h.identity().is_ok());
}

#[test]
fn faults_behave_as_named() {
    let mut h = SimHca::new(SimHcaConfig::default());
    let before = h.current_identity();
    h.fail_next_resets(1);
    assert_eq!(h.assert_reset(), Err(HwError::DeviceError));
    h.replace_on_next_reset();
    h.stage_firmware(7);
    h.assert_reset().expect("second reset works");
    h.set_now(Instant::from_ms(1000));
    assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
    let after = h.identity().expect("running");
    assert!(!before.same_adapter(&after));
    assert_eq!(after.fw_version, 7);

    h.stall_health();
    let a = h.read_health().expect("running").counter;
    h.set_now(Instant::from_ms(5000));
    assert_eq!(h.read_health().expect("running").counter, a);

    h.never_return();
    h.assert_reset().expect("reset");
    h.set_now(Instant::from_ms(60_000));
    assert_eq!(h.probe_ready(), Ok(Readiness::NotReady));
    h.remove();
    assert_eq!(h.probe_ready(), Err(HwError::Absent));
}

#[test]
fn catastrophic_error_shows_in_health_and_clears_on_reset() {
    let mut h = SimHca::new(SimHcaConfig::default());
    h.inject_catastrophic(0xbad);
    assert_eq!(h.read_health().expect("running").catastrophic, 0xbad);
    h.assert_reset().expect("reset");
    h.set_now(Instant::from_ms(500));
    h.probe_ready().expect("probe");
    assert_eq!(h.read_health().expect("running").catastrophic, 0);
}

// ----- the verbs model -----

const PEER: RemoteQp = RemoteQp {
    lid: 0x20,
    qpn: Qpn(0x77),
};

/// A running device with an RC queue pair connected to `PEER`, a region with every
/// right over 4 KiB of host memory, and one receive posted.
fn connected() -> (SimHca, Qpn, Cqn, MrKeys, u64) {
    connected_with(SimHcaConfig::default())
}

/// [`connected`] on a device of `config`.
fn connected_with(config: SimHcaConfig) -> (SimHca, Qpn, Cqn, MrKeys, u64) {
    let mut h = SimHca::new(config);
    let pd = h.alloc_pd().expect("pd");
    let cq = h.create_cq(16).expect("cq");
    let qp = h
        .create_qp(QpAttr {
            pd,
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            port: 1,
            max_send_wr: 8,
            max_recv_wr: 8,
        })
        .expect("qp");
    h.modify_qp(qp, QpState::Init, None).expect("init");
    h.modify_qp(qp, QpState::Rtr, Some(PEER)).expect("rtr");
    h.modify_qp(qp, QpState::Rts, None).expect("rts");
    let addr = h.verbs_mut().dma_alloc(4096).expect("dma");
    let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let keys = h.reg_mr(mr(pd, addr, 4096, all), None).expect("mr");
    let sge = Sge {
        addr,
        len: 256,
        lkey: keys.lkey,
    };
    h.post_recv(qp, &RecvWr { wr_id: 1, sge }).expect("recv");
    (h, qp, cq, keys, addr)
}

#[test]
fn a_send_reaches_the_wire_and_a_remote_send_lands_in_a_posted_receive() {
    let (mut h, qp, cq, keys, addr) = connected();
    h.verbs_mut()
        .mem_mut(addr + 1024, 5)
        .expect("mem")
        .copy_from_slice(b"hello");
    let sge = Sge {
        addr: addr + 1024,
        len: 5,
        lkey: keys.lkey,
    };
    h.post_send(
        qp,
        &SendWr {
            wr_id: 9,
            sge,
            dest: SendDest::Connected,
        },
    )
    .expect("send");
    assert_eq!(h.poll_cq(cq).expect("poll"), None, "not acknowledged yet");
    // The peer takes it: its acknowledgement completes the send.
    let msg = h.wire_take(|m| m.dlid == PEER.lid).expect("on wire");
    assert_eq!(
        (msg.payload(), msg.dqpn, msg.src_qpn),
        (&b"hello"[..], PEER.qpn, qp)
    );
    let sent = h.poll_cq(cq).expect("poll").expect("cqe");
    assert_eq!((sent.wr_id, sent.status), (9, WcStatus::Success));

    h.remote_send(PEER, qp, b"reply").expect("delivered");
    let got = h.poll_cq(cq).expect("poll").expect("cqe");
    assert_eq!(
        (got.wr_id, got.opcode, got.byte_len),
        (1, WcOpcode::Recv, 5)
    );
    assert_eq!(h.verbs().mem(addr, 5), Some(&b"reply"[..]));
    assert_eq!(
        h.remote_send(PEER, qp, b"again"),
        Err(RemoteError::ReceiverNotReady),
        "one receive was posted"
    );
    let stranger = RemoteQp {
        lid: 0x21,
        qpn: Qpn(5),
    };
    assert_eq!(
        h.remote_send(stranger, qp, b"x"),
        Err(RemoteError::NotConnected)
    );
}

#[test]
fn remote_rdma_checks_key_range_and_rights() {
    let (mut h, qp, _, keys, addr) = connected();
    h.remote_rdma_write(RemoteRdma::new(PEER, qp, keys.rkey, addr + 100), b"data")
        .expect("write");
    let mut out = [0u8; 4];
    h.remote_rdma_read(RemoteRdma::new(PEER, qp, keys.rkey, addr + 100), &mut out)
        .expect("read");
    assert_eq!(&out, b"data");
    let bad = keys.rkey ^ 0x1;
    assert_eq!(
        h.remote_rdma_read(RemoteRdma::new(PEER, qp, bad, addr), &mut out),
        Err(RemoteError::AccessError)
    );
    assert_eq!(
        h.remote_rdma_read(RemoteRdma::new(PEER, qp, keys.rkey, addr + 4094), &mut out),
        Err(RemoteError::AccessError),
        "past the end of the region"
    );
    assert_eq!(h.verbs().stats().remote_access_errors, 2);
}

#[test]
fn a_reset_forgets_every_resource_and_preserved_keys_come_back_on_request() {
    let (mut h, qp, _, keys, addr) = connected();
    assert!(h.verbs().live_objects() >= 4);
    h.assert_reset().expect("reset");
    assert_eq!(h.verbs().live_objects(), 0);
    h.set_now(Instant::from_ms(500));
    assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
    assert_eq!(h.alloc_pd(), Err(VerbsError::DeviceError), "before init");
    h.init_command_interface().expect("init");
    let mut out = [0u8; 4];
    assert_eq!(
        h.remote_rdma_read(RemoteRdma::new(PEER, qp, keys.rkey, addr), &mut out),
        Err(RemoteError::NoSuchQp)
    );
    let pd = h.alloc_pd().expect("pd");
    let fresh = h
        .reg_mr(mr(pd, addr, 4096, Access::REMOTE_READ), None)
        .expect("fresh");
    assert_ne!(fresh, keys, "an ordinary registration gets new keys");
    h.dereg_mr(fresh.lkey).expect("dereg");
    let again = h
        .reg_mr(mr(pd, addr, 4096, Access::REMOTE_READ), Some(keys))
        .expect("same keys");
    assert_eq!(again, keys);
    assert_eq!(
        h.reg_mr(mr(pd, addr, 4096, Access::REMOTE_READ), Some(keys)),
        Err(VerbsError::KeyUnavailable),
        "the entry is taken"
    );
}

#[test]
fn a_device_in_catastrophic_error_takes_doorbells_and_does_nothing() {
    let (mut h, qp, cq, keys, addr) = connected();
    h.inject_catastrophic(1);
    assert_eq!(h.alloc_pd(), Err(VerbsError::DeviceError));
    let sge = Sge {
        addr,
        len: 8,
        lkey: keys.lkey,
    };
    let wr = SendWr {
        wr_id: 3,
        sge,
        dest: SendDest::Connected,
    };
    assert_eq!(h.post_send(qp, &wr), Ok(()), "the doorbell is just a write");
    assert_eq!(h.poll_cq(cq), Ok(None), "and nothing completes");
    assert_eq!(h.verbs().wire_len(), 0);
    assert_eq!(h.verbs().stats().lost_doorbells, 1);
    assert_eq!(h.remote_send(PEER, qp, b"x"), Err(RemoteError::HostDown));
    h.remove();
    assert_eq!(h.post_send(qp, &wr), Err(VerbsError::Absent));
}

#[test]
fn multicast_reaches_attached_datagram_queue_pairs_only() {
    let mut h = SimHca::new(SimHcaConfig::default());
    let pd = h.alloc_pd().expect("pd");
    let cq = h.create_cq(16).expect("cq");
    let addr = h.verbs_mut().dma_alloc(1024).expect("dma");
    let keys = h
        .reg_mr(mr(pd, addr, 1024, Access::LOCAL_WRITE), None)
        .expect("mr");
    let mut qps = [Qpn(0); 2];
    for (n, q) in qps.iter_mut().enumerate() {
        *q = h
            .create_qp(QpAttr {
                pd,
                qp_type: QpType::Ud,
                send_cq: cq,
                recv_cq: cq,
                port: 1,
                max_send_wr: 4,
                max_recv_wr: 4,
            })
            .expect("qp");
        h.modify_qp(*q, QpState::Init, None).expect("init");
        h.modify_qp(*q, QpState::Rtr, None).expect("rtr");
        let sge = Sge {
            addr: addr + 512 * n as u64,
            len: 512,
            lkey: keys.lkey,
        };
        h.post_recv(
            *q,
            &RecvWr {
                wr_id: n as u64,
                sge,
            },
        )
        .expect("recv");
    }
    const GROUP: Mgid = 0xff12_401b_ffff_0000_0000_0000_ffff_ffff;
    h.attach_mcast(qps[0], GROUP, 0xc000).expect("attach");
    assert_eq!(h.remote_send_mcast(GROUP, b"arp"), Ok(1));
    h.detach_mcast(qps[0], GROUP).expect("detach");
    assert_eq!(h.remote_send_mcast(GROUP, b"arp"), Ok(0));
    assert!(!h.verbs().is_attached(qps[0], GROUP));
}

#[test]
fn nothing_crosses_a_port_without_a_link_either_way() {
    let (mut h, qp, cq, keys, addr) = connected();
    let mut out = [0u8; 4];
    // The cable of port 1 is out for a second; link training and the sweep are instant.
    h.set_now(Instant::from_ms(100));
    assert!(h.pull_cable(1, Duration::from_ms(1_000)));
    assert_eq!(
        h.remote_send(PEER, qp, b"lost"),
        Err(RemoteError::LinkDown),
        "a peer's send never arrives"
    );
    assert_eq!(
        h.remote_rdma_read(RemoteRdma::new(PEER, qp, keys.rkey, addr), &mut out),
        Err(RemoteError::LinkDown)
    );
    let wr = SendWr {
        wr_id: 4,
        sge: Sge {
            addr,
            len: 8,
            lkey: keys.lkey,
        },
        dest: SendDest::Connected,
    };
    h.post_send(qp, &wr).expect("the doorbell rings");
    assert_eq!(
        h.poll_cq(cq).expect("poll"),
        None,
        "retransmitted, not failed"
    );
    let lid = hcabus::fabric::HOST_LID_BASE;
    assert!(
        Fabric::carries(&h, lid, Instant::ZERO, Instant::from_ms(99)),
        "before the pull"
    );
    assert!(!Fabric::carries(
        &h,
        lid,
        Instant::ZERO,
        Instant::from_ms(100)
    ));
    assert!(!Fabric::carries(
        &h,
        lid,
        Instant::ZERO,
        Instant::from_ms(1_099)
    ));
    assert!(
        Fabric::carries(&h, lid, Instant::ZERO, Instant::from_ms(1_100)),
        "back"
    );
    assert!(
        !Fabric::carries(&h, lid + 2, Instant::ZERO, Instant::from_ms(100)),
        "no port 3"
    );
    // Its budget (8 x 67.1 ms) runs out with the port still dark.
    h.set_now(Instant::from_ms(637));
    let cqe = h.poll_cq(cq).expect("poll").expect("a completion");
    assert_eq!(
        (cqe.wr_id, cqe.status),
        (4, WcStatus::RetryExceeded),
        "no transmission was ever acknowledged"
    );
    assert_eq!(h.verbs().wire_len(), 0, "nothing left on the wire");
    h.post_send(qp, &wr).expect("doorbell");
    let flushed = h.poll_cq(cq).expect("poll").expect("a completion");
    assert_eq!(
        flushed.status,
        WcStatus::Flushed,
        "the queue pair is in error"
    );
    assert_eq!(h.verbs().stats().no_link_sends, 1);
    assert_eq!(h.verbs().stats().no_link_remote, 2);

    // The cable is back: a fresh queue pair on port 1 talks again.
    h.set_now(Instant::from_ms(1_100));
    let (mut h2, qp2, _, _, _) = connected();
    h2.set_now(Instant::from_ms(1_100));
    assert_eq!(h2.remote_send(PEER, qp2, b"back"), Ok(()));
    assert_eq!(
        h.remote_send(PEER, qp, b"x"),
        Err(RemoteError::NotConnected),
        "the old queue pair stays in error"
    );
}

/// A reliable send posted while its port is dark stays on the wire; a peer that takes it
/// after the port's return (a retransmission got through) acknowledges it: it completes
/// in success and the queue pair stays in RTS.
#[test]
fn a_reliable_send_posted_in_the_dark_completes_when_a_peer_takes_it_after_the_return() {
    let (mut h, qp, cq, keys, addr) = connected();
    h.set_now(Instant::from_ms(100));
    assert!(h.pull_cable(1, Duration::from_ms(50)));
    let wr = SendWr {
        wr_id: 7,
        sge: Sge {
            addr,
            len: 8,
            lkey: keys.lkey,
        },
        dest: SendDest::Connected,
    };
    h.post_send(qp, &wr).expect("the doorbell rings");
    h.set_now(Instant::from_ms(168));
    assert_eq!(h.poll_cq(cq).expect("poll"), None);
    let m = Fabric::wire_take(&mut h, |m| m.src_qpn == qp).expect("on the wire");
    assert!(
        !Fabric::carries(&h, m.src_lid, Instant::ZERO, m.sent_at),
        "first sent in the dark"
    );
    let cqe = h.poll_cq(cq).expect("poll").expect("a completion");
    assert_eq!((cqe.wr_id, cqe.status), (7, WcStatus::Success));
    // Still in RTS: the next send waits for its acknowledgement, not flushed.
    h.post_send(qp, &SendWr { wr_id: 8, ..wr })
        .expect("doorbell");
    assert_eq!(h.poll_cq(cq).expect("poll"), None);
    assert_eq!(h.verbs().unacked(), 1);
}

#[test]
fn a_datagram_sent_on_a_port_without_a_link_completes_and_is_lost() {
    let mut h = SimHca::new(SimHcaConfig {
        link_up: Duration::from_ms(500),
        ..SimHcaConfig::default()
    });
    let pd = h.alloc_pd().expect("pd");
    let cq = h.create_cq(8).expect("cq");
    let attr = |port| QpAttr {
        pd,
        qp_type: QpType::Ud,
        send_cq: cq,
        recv_cq: cq,
        port,
        max_send_wr: 4,
        max_recv_wr: 4,
    };
    let (qp1, qp2) = (
        h.create_qp(attr(1)).expect("qp"),
        h.create_qp(attr(2)).expect("qp"),
    );
    for qp in [qp1, qp2] {
        h.modify_qp(qp, QpState::Init, None).expect("init");
        h.modify_qp(qp, QpState::Rtr, None).expect("rtr");
        h.modify_qp(qp, QpState::Rts, None).expect("rts");
    }
    let addr = h.verbs_mut().dma_alloc(4096).expect("dma");
    let keys = h
        .reg_mr(mr(pd, addr, 4096, Access::LOCAL_WRITE), None)
        .expect("mr");
    h.set_now(Instant::from_ms(10));
    assert!(h.pull_cable(2, Duration::from_ms(100)));
    for (qp, port) in [(qp1, 1), (qp2, 2)] {
        let ah = h.create_ah(pd, port, 0x30).expect("ah");
        let wr = SendWr {
            wr_id: u64::from(port),
            sge: Sge {
                addr,
                len: 16,
                lkey: keys.lkey,
            },
            dest: SendDest::Datagram { ah, qpn: Qpn(7) },
        };
        h.post_send(qp, &wr).expect("send");
        let cqe = h.poll_cq(cq).expect("poll").expect("a completion");
        assert_eq!(cqe.status, WcStatus::Success, "port {port}");
    }
    assert_eq!(
        h.verbs().wire_len(),
        1,
        "only port 1's datagram is on the wire"
    );
    assert_eq!(h.verbs().stats().no_link_sends, 1);
    // Port 2 trains again 500 ms after the cable is back.
    h.set_now(Instant::from_ms(609));
    assert_eq!(h.verbs().stats().no_link_sends, 1);
    assert!(!h.verbs().link(2));
    h.set_now(Instant::from_ms(610));
    assert!(h.verbs().link(2));
}

/// Posts a 5-byte send `wr_id` on `qp` from `addr`.
fn send_on(h: &mut SimHca, qp: Qpn, keys: MrKeys, addr: u64, wr_id: u64) {
    let sge = Sge {
        addr,
        len: 5,
        lkey: keys.lkey,
    };
    let wr = SendWr {
        wr_id,
        sge,
        dest: SendDest::Connected,
    };
    h.post_send(qp, &wr).expect("send");
}

fn drain(h: &mut SimHca, cq: Cqn) -> Vec<(u64, WcOpcode, WcStatus)> {
    let mut got = Vec::new();
    while let Some(c) = h.poll_cq(cq).expect("poll") {
        got.push((c.wr_id, c.opcode, c.status));
    }
    got
}

#[test]
fn a_reliable_send_no_peer_takes_fails_at_the_retry_budget_and_flushes_the_rest() {
    let (mut h, qp, cq, keys, addr) = connected();
    h.set_now(Instant::from_ms(10));
    send_on(&mut h, qp, keys, addr, 1);
    h.set_now(Instant::from_ms(20));
    send_on(&mut h, qp, keys, addr, 2);
    let budget = RcTransport::DEFAULT.retry_budget().expect("a timer");
    assert_eq!(budget, Duration::from_us(536_864));
    assert_eq!(
        h.verbs().transport_due(),
        Some(Instant::from_ms(10) + budget)
    );
    h.set_now(Instant::from_ms(10) + budget - Duration::from_us(1));
    assert_eq!(drain(&mut h, cq), [], "retrying still");
    assert_eq!(h.verbs().wire_len(), 2);
    h.set_now(Instant::from_ms(10) + budget);
    assert_eq!(
        drain(&mut h, cq),
        [
            (1, WcOpcode::Send, WcStatus::RetryExceeded),
            (2, WcOpcode::Send, WcStatus::Flushed),
            (1, WcOpcode::Recv, WcStatus::Flushed),
        ],
        "the oldest fails, the queue pair is in error, everything else flushed in order"
    );
    assert_eq!(h.verbs().wire_len(), 0, "nothing of it is sent again");
    assert_eq!(h.verbs().transport_due(), None);
    assert_eq!(h.verbs().stats().retries_exceeded, 1);
    send_on(&mut h, qp, keys, addr, 3);
    assert_eq!(
        drain(&mut h, cq),
        [(3, WcOpcode::Send, WcStatus::Flushed)],
        "a queue pair in error flushes what is posted"
    );
}

#[test]
fn a_message_the_peer_drops_is_not_acknowledged_and_fails_in_time() {
    let (mut h, qp, cq, keys, addr) = connected();
    send_on(&mut h, qp, keys, addr, 1);
    assert!(h.wire_front(|m| m.dlid == PEER.lid).is_some());
    assert_eq!(h.verbs().wire_len(), 1, "a look leaves it there");
    let lost = h.wire_drop(|m| m.dlid == PEER.lid).expect("on wire");
    assert_ne!(lost.seq, 0, "a reliable send is numbered");
    assert_eq!(drain(&mut h, cq), []);
    let budget = RcTransport::DEFAULT.retry_budget().expect("a timer");
    h.set_now(Instant::ZERO + budget);
    assert_eq!(
        drain(&mut h, cq)[0],
        (1, WcOpcode::Send, WcStatus::RetryExceeded)
    );
}

#[test]
fn a_dead_device_runs_no_timer_and_completes_nothing_a_peer_takes() {
    let (mut h, qp, cq, keys, addr) = connected();
    send_on(&mut h, qp, keys, addr, 1);
    send_on(&mut h, qp, keys, addr, 2);
    h.inject_catastrophic(7);
    h.wire_take(|m| m.dlid == PEER.lid)
        .expect("the first got out");
    h.set_now(Instant::from_ms(60_000));
    assert_eq!(drain(&mut h, cq), [], "no acknowledgement, no timer");
    assert_eq!(h.verbs().wire_len(), 1, "the second waits on the wire");
}

#[test]
fn a_destroyed_queue_pair_sends_nothing_again_and_a_transport_with_no_timer_never_fails() {
    let (mut h, qp, cq, keys, addr) = connected();
    send_on(&mut h, qp, keys, addr, 1);
    h.destroy_qp(qp).expect("destroy");
    assert_eq!(h.verbs().wire_len(), 0);
    h.set_now(Instant::from_ms(60_000));
    assert_eq!(drain(&mut h, cq), []);

    let (mut h, qp, cq, keys, addr) = connected_with(SimHcaConfig {
        transport: RcTransport::new(0, 7).expect("valid"),
        ..SimHcaConfig::default()
    });
    send_on(&mut h, qp, keys, addr, 1);
    h.set_now(Instant::from_ms(3_600_000));
    assert_eq!(h.verbs().transport_due(), None);
    assert_eq!(drain(&mut h, cq), [], "no timer: it waits for ever");
    assert_eq!(h.rc_transport(), RcTransport::new(0, 7).expect("valid"));
}
