//! SET_POLICY's refusals as the administrator meets them: every one whole in its 56 bytes,
//! a broken rule between two keys named by the key that was set and the key it conflicts
//! with, and each recorded under the key at fault.

use std::collections::BTreeSet;
use std::format;
use std::string::{String, ToString};

use super::*;
use hcabus::policy::MAX_MS;
use hcabus::recorder::{Record, RecordKind, RECORD_BYTES};

const ANSWER: usize = size_of::<SetPolicyOut>();

/// SET_POLICY of `abi` as the current ABI asks it; the field and problem of a refusal.
fn set(d: &mut Dev, abi: &PolicyAbi) -> Option<(String, String)> {
    let mut input = vec![0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(abi, &mut input);
    let (r, out) = call(d, IOCTL_HCABUS_SET_POLICY, &input, ANSWER, ALL);
    assert_eq!(r, Reply::ok(ANSWER));
    let said = SetPolicyOut::decode(&out).expect("an answer");
    said.refusal()
        .map(|(field, problem)| (field.to_string(), problem.to_string()))
}

/// The case and each rule from either side: the key set is named, and its problem
/// names the other key with that key's value.
#[test]
fn a_broken_rule_is_refused_naming_the_key_set_and_the_key_it_conflicts_with() {
    let mut d = dev();
    let base = *d.coord.policy();
    for (key, value, problem) in [
        (
            "hw_ready_timeout_ms",
            700_000,
            "must not exceed auto_restart_window_ms (600000)",
        ),
        (
            "auto_restart_window_ms",
            5_000,
            "must be at least hw_ready_timeout_ms (10000)",
        ),
        (
            "hw_poll_interval_ms",
            20_000,
            "must be shorter than hw_ready_timeout_ms (10000)",
        ),
        (
            "hw_ready_timeout_ms",
            10,
            "must be longer than hw_poll_interval_ms (10)",
        ),
    ] {
        let mut p = base;
        p.set(key, value).expect("a key");
        let said = set(&mut d, &PolicyAbi::from_policy(&p));
        assert_eq!(said, Some((key.into(), problem.into())), "{key}={value}");
        assert_eq!(*d.coord.policy(), base, "nothing changed");
    }
}

/// Every refusal SET_POLICY can answer, from a sweep of every key through the values at
/// each bound (from the defaults, and from a policy of nine-digit durations, whose values
/// are the longest a conflict quotes), and every field no policy can hold: each problem is
/// its whole text, none cut by the 56 bytes.
#[test]
fn every_policy_refusal_fits_set_policys_answer_whole() {
    let wide = Policy {
        hw_poll_interval_ms: 100_000_000,
        hw_ready_timeout_ms: MAX_MS - 2,
        auto_restart_window_ms: MAX_MS - 1,
        ..Policy::default()
    };
    assert_eq!(wide.validate(), Ok(()));
    let values = [
        0,
        1,
        9,
        17,
        256,
        100_000_000,
        MAX_MS - 1,
        MAX_MS,
        MAX_MS + 1,
        u64::MAX,
    ];
    let mut seen = BTreeSet::new();
    for base in [Policy::default(), wide] {
        let mut d = dev();
        d.coord.set_policy(d.now, base).expect("a valid base");
        for key in Policy::KEYS {
            for value in values {
                let mut p = base;
                if p.set(key, value).is_err() {
                    continue;
                }
                let Err(e) = p.validate_change(&base) else {
                    continue;
                };
                let whole = match p.conflict(&e) {
                    Some((other, v)) => {
                        assert!(e.problem.contains(other), "{e}");
                        format!("{} ({v})", e.problem)
                    }
                    None => e.problem.to_string(),
                };
                let said = set(&mut d, &PolicyAbi::from_policy(&p));
                assert_eq!(said, Some((e.field.into(), whole.clone())), "{key}={value}");
                seen.insert(whole);
            }
        }
    }
    // Fields no policy can hold, refused before the policy is validated.
    let mut d = dev();
    let abi = PolicyAbi::from_policy(d.coord.policy());
    for bad in [
        PolicyAbi {
            reset_retries: u32::MAX,
            ..abi
        },
        PolicyAbi {
            auto_recover: u32::MAX,
            ..abi
        },
        PolicyAbi {
            reserved: u32::MAX,
            ..abi
        },
    ] {
        let (field, problem) = set(&mut d, &bad).expect("refused");
        let e = bad.parse_policy().expect_err("no policy");
        assert_eq!((field.as_str(), problem.as_str()), (e.field, e.problem));
        seen.insert(problem);
    }
    // The sweep reached every rule from both sides, at its longest.
    for longest in [
        "must not exceed auto_restart_window_ms (863999999)",
        "must be at least hw_ready_timeout_ms (863999998)",
        "must be shorter than hw_ready_timeout_ms (863999998)",
        "must be longer than hw_poll_interval_ms (100000000)",
    ] {
        assert!(seen.contains(longest), "{longest} in {seen:#?}");
    }
    assert!(seen.len() >= 12, "{seen:#?}");
}

/// The flight record of a refused policy names the key at fault: the key the administrator
/// set, for a broken rule; the field, for one no policy can hold.
#[test]
fn a_refused_policy_is_recorded_under_the_key_that_was_set() {
    let mut d = dev();
    let newest = |d: &Dev| *d.coord.recorder().iter().last().expect("a record");
    let mut p = *d.coord.policy();
    p.hw_ready_timeout_ms = 700_000;
    assert!(set(&mut d, &PolicyAbi::from_policy(&p)).is_some());
    let r = newest(&d);
    assert_eq!(
        r.kind,
        RecordKind::Refused {
            client: None,
            call: hcabus::types::Call::SetPolicy,
            code: hcabus::errors::RefusalCode::InvalidPolicy,
        }
    );
    assert_eq!(r.name.as_str(), "hw_ready_timeout_ms");
    assert_eq!(
        r.what().to_string(),
        "set_policy refused: invalid policy (hw_ready_timeout_ms)"
    );
    let raw: [u8; RECORD_BYTES] = r.encode();
    assert_eq!(Record::decode(&raw), Some(r), "READ_LOG carries the key");
    // A field no policy can hold is recorded and counted too.
    let bad = PolicyAbi {
        reset_retries: 300,
        ..PolicyAbi::from_policy(d.coord.policy())
    };
    assert!(set(&mut d, &bad).is_some());
    assert_eq!(newest(&d).name.as_str(), "reset_retries");
    assert_eq!(d.coord.counters().admin_refusals, 2);
}
