//! Version 8: the policy's keys from this version on travel in slots, each carried when its
//! bit in `slots_set` is set, so that a key added is no new layout and no new version.

use std::string::{String, ToString};

use super::*;
use hcabus::recorder::RecordKind;

const ANSWER: usize = size_of::<SetPolicyOut>();

/// SET_POLICY of `abi` as a caller of the current version sends it: the refusal's field and
/// problem, or `None` when it is in force.
fn set(d: &mut Dev, abi: &PolicyAbi) -> Option<(String, String)> {
    let (r, out) = call(
        d,
        IOCTL_HCABUS_SET_POLICY,
        &set_policy_as(abi, ABI_VERSION),
        ANSWER,
        ALL,
    );
    assert_eq!(r, Reply::ok(ANSWER));
    let said = SetPolicyOut::decode(&out).expect("an answer");
    said.refusal()
        .map(|(field, problem)| (field.to_string(), problem.to_string()))
}

fn get(d: &mut Dev) -> PolicyAbi {
    let room = size_of::<PolicyAbi>();
    let (r, out) = call(d, IOCTL_HCABUS_GET_POLICY, &empty(), room, Rights::READ);
    assert_eq!(r, Reply::ok(room));
    PolicyAbi::decode(&out).expect("a policy")
}

/// GET_POLICY marks every slot the table gives a key, and only those, with each key's value.
#[test]
fn get_policy_sets_the_bit_of_each_keyed_slot_and_its_value() {
    let mut d = dev();
    let custom = Policy {
        health_stall_polls: 7,
        ..Policy::default()
    };
    d.coord.set_policy(d.now, custom).expect("valid");
    let abi = get(&mut d);
    assert_eq!(abi.slots_set, POLICY_SLOTS_KEYED);
    assert_ne!(abi.slots_set & 1, 0, "health_stall_polls is slot 0");
    assert_eq!(abi.slots[0], 7);
    for (i, value) in abi.slots.iter().enumerate() {
        if abi.slots_set & 1 << i == 0 {
            assert_eq!(*value, 0, "slot {i} has no key");
        }
    }
    assert_eq!(abi.parse_policy(), Ok(custom));
}

/// A slot whose bit is set changes its key; one whose bit is clear keeps the key's value
/// whatever the slot holds, while the named fields are taken as sent.
#[test]
fn set_policy_changes_the_slots_whose_bits_are_set_and_keeps_the_others() {
    let mut d = dev();
    let mut abi = PolicyAbi::from_policy(d.coord.policy());
    abi.slots[0] = 5;
    assert_eq!(set(&mut d, &abi), None);
    assert_eq!(d.coord.policy().health_stall_polls, 5);
    let index = Policy::KEYS.iter().position(|k| *k == "health_stall_polls");
    let recorded = d.coord.recorder().iter().find_map(|r| match r.kind {
        RecordKind::PolicyChanged { key, old, new } => Some((usize::from(key), old, new)),
        _ => None,
    });
    assert_eq!(
        recorded,
        index.map(|i| (i, 3, 5)),
        "recorded under its key's index"
    );
    // The bit clear: a caller that does not know the key leaves it alone.
    abi.slots_set = 0;
    abi.slots[0] = 9;
    abi.quiesce_deadline_ms = 2_222;
    assert_eq!(set(&mut d, &abi), None);
    assert_eq!(d.coord.policy().health_stall_polls, 5);
    assert_eq!(d.coord.policy().quiesce_deadline_ms, 2_222);
}

/// A bit set for a slot this bus has no key for is refused with `slots_set` named, and so
/// is a value its key cannot take; nothing changes either way.
#[test]
fn a_slot_with_no_key_or_a_value_out_of_range_is_refused_and_changes_nothing() {
    let mut d = dev();
    let base = PolicyAbi::from_policy(d.coord.policy());
    let before = fingerprint(&d);
    let free = (!POLICY_SLOTS_KEYED).trailing_zeros();
    assert!((free as usize) < POLICY_KEY_SLOTS, "a slot is free");
    let mut no_key = PolicyAbi {
        slots_set: base.slots_set | 1 << free,
        ..base
    };
    no_key.slots[free as usize] = 1;
    let high = PolicyAbi {
        slots_set: base.slots_set | 1 << 63,
        ..base
    };
    let mut too_big = base;
    too_big.slots[0] = 17;
    let mut not_u8 = base;
    not_u8.slots[0] = 256;
    let mut zero = base;
    zero.slots[0] = 0;
    for (abi, field, problem) in [
        (no_key, "slots_set", "sets a slot this bus has no key for"),
        (high, "slots_set", "sets a slot this bus has no key for"),
        (too_big, "health_stall_polls", "must be at most 16"),
        (not_u8, "health_stall_polls", "must be at most 255"),
        (zero, "health_stall_polls", "must be greater than zero"),
    ] {
        assert_eq!(
            set(&mut d, &abi),
            Some((field.to_string(), problem.to_string())),
            "{abi:?}"
        );
        assert_eq!(fingerprint(&d), before);
    }
}

/// A caller of version 7 sends the named fields only: the keys in slots keep their values,
/// and its GET_POLICY answer has no slots.
#[test]
fn a_version_7_caller_keeps_the_slotted_keys() {
    let mut d = dev();
    let custom = Policy {
        health_stall_polls: 9,
        ..Policy::default()
    };
    d.coord.set_policy(d.now, custom).expect("valid");
    let mut v7 = empty();
    put_u16(&mut v7, 4, 7);
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_GET_POLICY,
        &v7,
        POLICY_NAMED_BYTES,
        Rights::READ,
    );
    assert_eq!(r, Reply::ok(POLICY_NAMED_BYTES));
    let abi = PolicyAbi {
        storm_window_ms: 70_000,
        ..PolicyAbi::from_policy(&Policy::default())
    };
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_SET_POLICY,
        &set_policy_as(&abi, 7),
        0,
        ALL,
    );
    assert_eq!(r, Reply::ok(0));
    assert_eq!(
        *d.coord.policy(),
        Policy {
            storm_window_ms: 70_000,
            ..custom
        }
    );
}

/// A structure that does not carry a slotted key cannot be read as a policy: the key is
/// named, never taken as zero.
#[test]
fn a_structure_without_a_keys_slot_names_the_key() {
    let abi = PolicyAbi {
        slots_set: 0,
        ..PolicyAbi::from_policy(&Policy::default())
    };
    let e = abi.parse_policy().expect_err("slot 0 not carried");
    assert_eq!(e.field, "health_stall_polls");
}
