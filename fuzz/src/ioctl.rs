//! The IOCTL dispatcher (docs/design.md §8) on the virtual-time host: a program of requests, each an
//! arbitrary code, input and output capacity with arbitrary rights, virtual time passing
//! between them.
//!
//! Properties: nothing panics; a reply never claims more bytes than the buffer holds; a refused
//! request changes nothing (the coordinator's protocol state, its policy, the faults applied,
//! the caller's buffer); and whatever the accepted requests did, every guarantee of docs/design.md §4
//! holds to the end of the run.

use std::hash::Hasher;

use hcabus::ioctl::*;
use hcabus::types::{ClientDesc, ClientFlags, ClientKind};
use hcabus::{Duration, Policy};
use hcabus_sim::{Behavior, SimHost, SimSetup};

use crate::Reader;

/// Requests per input: enough to reach a reset inside a reset, few enough to stay fast.
const MAX_REQUESTS: usize = 48;
const OUTPUT_CAP: usize = 4096;
const UNTOUCHED: u8 = 0xA5;

fn host() -> SimHost {
    let client = |name: &str, flags: ClientFlags, behavior: Behavior| {
        let desc = ClientDesc::new(name, ClientKind::Custom, flags).expect("literal name fits");
        (desc, behavior)
    };
    let setup = SimSetup {
        name: "fuzz-ioctl".into(),
        duration: Duration::from_ms(3_600_000),
        recorder_capacity: 256,
        reported_resets: hcabus_sim::REPORTED_RESETS,
        derived_faults: hcabus_sim::DERIVED_FAULTS,
        clients: vec![
            client("inline", ClientFlags::empty(), Behavior::default()),
            client(
                "slow",
                ClientFlags::empty(),
                Behavior {
                    ack_delay: Duration::from_ms(30),
                    ..Behavior::default()
                },
            ),
            client(
                "vetoer",
                ClientFlags::CAN_VETO,
                Behavior {
                    veto_planned: true,
                    ack_delay: Duration::from_ms(5),
                    ..Behavior::default()
                },
            ),
        ],
        ..SimSetup::default()
    };
    SimHost::new(&setup).expect("the fuzz host's setup is valid")
}

/// A well-formed input for `code` (the fuzzer then overwrites its body).
fn valid_input(code: u32) -> Vec<u8> {
    let mut buf = vec![0u8; input_size(code).unwrap_or(0)];
    match code {
        IOCTL_HCABUS_LIST_CLIENTS => encode_list_clients(0, &mut buf),
        IOCTL_HCABUS_READ_LOG => encode_read_log(0, 16, &mut buf),
        IOCTL_HCABUS_REQUEST_RESET => RequestResetIn::new(ResetMode::Forced, "").encode(&mut buf),
        IOCTL_HCABUS_SET_POLICY => {
            encode_set_policy(&PolicyAbi::from_policy(&Policy::default()), &mut buf)
        }
        IOCTL_HCABUS_INJECT_FAULT => {
            encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut buf)
        }
        _ if buf.is_empty() => {}
        _ => encode_empty(&mut buf),
    }
    buf
}

/// One request drawn from the bytes: (code, input, output capacity, rights).
fn draw(r: &mut Reader<'_>) -> (u32, Vec<u8>, usize, Rights) {
    let pick = r.u8();
    let code = if pick < 0xF0 {
        CODES[usize::from(pick) % CODES.len()].0
    } else {
        r.u32()
    };
    let shape = r.u8();
    let input = match shape % 4 {
        // A well-formed request: it acts, and moves the bus to states worth fuzzing in.
        0 => valid_input(code),
        // A valid header, the body fuzzed: reaches the checks past the header.
        1 => {
            let mut buf = valid_input(code);
            let header = size_of::<InputHeader>().min(buf.len());
            let body = r.bytes(buf.len() - header);
            buf[header..header + body.len()].copy_from_slice(body);
            buf
        }
        2 => {
            let n = input_size(code).unwrap_or(16);
            r.bytes(n).to_vec()
        }
        _ => {
            let n = usize::from(r.u8());
            r.bytes(n).to_vec()
        }
    };
    let capacity = usize::from(r.u16()) % (OUTPUT_CAP + 1);
    let rights = match r.u8() % 4 {
        0 => Rights::READ,
        1 => Rights::empty(),
        _ => Rights::READ | Rights::WRITE,
    };
    (code, input, capacity, rights)
}

fn snapshot(host: &SimHost) -> (u64, Policy, usize) {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    host.coordinator().fingerprint(&mut h);
    (
        h.finish(),
        *host.coordinator().policy(),
        host.faults_applied().len(),
    )
}

/// Runs one program of requests.
pub fn check(data: &[u8]) {
    let mut host = host();
    let mut r = Reader::new(data);
    let mut output = vec![0u8; OUTPUT_CAP];
    for _ in 0..MAX_REQUESTS {
        if r.is_empty() {
            break;
        }
        let (code, input, capacity, rights) = draw(&mut r);
        let before = snapshot(&host);
        let out = &mut output[..capacity];
        out.fill(UNTOUCHED);
        let reply = host.ioctl(code, &input, out, rights);
        assert!(
            reply.bytes <= capacity,
            "{code:#x}: {reply:?} past {capacity}"
        );
        if reply.status != NtStatus::SUCCESS {
            assert_eq!(reply.bytes, 0, "{code:#x}: a refusal returns no bytes");
            assert!(
                out.iter().all(|b| *b == UNTOUCHED),
                "{code:#x}: a refusal ({:?}) wrote to the caller's buffer",
                reply.status
            );
            assert_eq!(
                snapshot(&host),
                before,
                "{code:#x}: a refused request ({:?}) changed the bus",
                reply.status
            );
        }
        let advance_ms = u64::from(r.u8());
        let until = host.now() + Duration::from_ms(advance_ms);
        host.run_until(until);
    }
    // Whatever was set in motion runs out: every deadline here is a few seconds at most.
    let end = host.now() + Duration::from_ms(30_000);
    host.run_until(end);
    assert_eq!(host.checker().violations, Vec::<String>::new());
}
