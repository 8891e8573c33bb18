//! `hcactl policy get|set`: the policy as a table or JSON, and changes to it. A refusal
//! names the field the bus refused and why (SET_POLICY's version-5 answer).

use hcabus::ioctl::*;
use hcabus::policy::{Limit, SetKeyError};
use hcabus::Policy;
use serde_json::{json, Value};

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::view::document;

/// The `KEY=VALUE` pairs of `policy set`, each key once: of `k=100 k=200` one value would
/// be dropped without a word. Checked before hcactl connects; a usage error naming the
/// pair or the key.
pub(crate) fn pairs(pairs: &[String]) -> Result<Vec<(&str, &str)>, Failure> {
    let mut split: Vec<(&str, &str)> = Vec::with_capacity(pairs.len());
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Failure::Usage(format!("{pair:?}: expected KEY=VALUE")))?;
        if let Some((_, first)) = split.iter().find(|(k, _)| *k == key) {
            return Err(Failure::Usage(format!(
                "{key} given twice ({key}={first}, {pair}); give each key once"
            )));
        }
        split.push((key, value));
    }
    Ok(split)
}

/// `KEY=VALUE` pairs applied to `p`; a key or value hcactl can already tell is wrong is a
/// usage error naming it.
fn apply(p: &mut Policy, pairs: &[String]) -> Outcome {
    for (key, value) in self::pairs(pairs)? {
        let flag = Policy::KEYS
            .iter()
            .zip(Policy::LIMITS)
            .any(|(k, limit)| *k == key && limit == Limit::Flag);
        let number = match value {
            "true" if flag => 1,
            "false" if flag => 0,
            v => v.parse::<u64>().map_err(|_| {
                let want = if flag { "true or false" } else { "a number" };
                Failure::Usage(format!("{key}: {value:?} is not {want}"))
            })?,
        };
        p.set(key, number).map_err(|e| match e {
            SetKeyError::UnknownKey => Failure::Usage(format!(
                "unknown policy key {key:?} (keys: {})",
                Policy::KEYS.join(", ")
            )),
            SetKeyError::OutOfRange => Failure::Usage(format!("{key}: {value} is out of range")),
        })?;
    }
    Ok(())
}

/// Sends the whole policy with `pairs` changed. The bus validates it as a whole; its answer
/// names the field it refused, which hcactl reports (exit 1). Says what changed, from what
/// to what.
pub(crate) fn set(bus: &mut ControlDevice, pairs: &[String], as_json: bool) -> Outcome {
    let before = bus.policy()?;
    let mut p = before;
    apply(&mut p, pairs)?;
    let mut input = [0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(&PolicyAbi::from_policy(&p), &mut input);
    let out = bus.call(IOCTL_HCABUS_SET_POLICY, &input, size_of::<SetPolicyOut>())?;
    let answer = SetPolicyOut::decode(&out).ok_or_else(|| {
        Failure::Usage(format!(
            "a short SET_POLICY answer ({} bytes, {} needed)",
            out.len(),
            size_of::<SetPolicyOut>()
        ))
    })?;
    match answer.refusal() {
        None if answer.applied == 1 => changed(&before, &p, as_json),
        Some((field, problem)) if !field.is_empty() => Err(Failure::Outcome(format!(
            "refused: policy field {field}: {problem}; nothing changed"
        ))),
        Some((_, problem)) => Err(Failure::Outcome(format!(
            "refused: {problem}; nothing changed"
        ))),
        None => Err(Failure::Outcome(
            "refused, in an answer this hcactl cannot read; nothing changed".into(),
        )),
    }
}

/// What a change applied: each key whose value changed, from what to what.
fn changed(before: &Policy, after: &Policy, as_json: bool) -> Outcome {
    let changes: Vec<(&str, u64, u64)> = Policy::KEYS
        .iter()
        .zip(before.values().into_iter().zip(after.values()))
        .filter(|(_, (old, new))| old != new)
        .map(|(key, (old, new))| (*key, old, new))
        .collect();
    if as_json {
        let list: Vec<Value> = changes
            .iter()
            .map(|(key, old, new)| json!({ "key": key, "old": old, "new": new }))
            .collect();
        say!(
            "{}",
            document("policy-set", json!({ "applied": true, "changed": list }))
        );
    } else if changes.is_empty() {
        say!("policy unchanged (every value was already so)");
    } else {
        for (key, old, new) in changes {
            say!("{key}: {old} -> {new}");
        }
    }
    Ok(())
}

/// Every key, in `Policy::KEYS` order (the policy's table); flags as booleans.
fn rows(p: &Policy) -> Vec<(&'static str, Value)> {
    Policy::KEYS
        .iter()
        .zip(p.values().into_iter().zip(Policy::LIMITS))
        .map(|(key, (value, limit))| {
            let cell = match limit {
                Limit::Flag => (value == 1).into(),
                Limit::Ms { .. } | Limit::Count { .. } => value.into(),
            };
            (*key, cell)
        })
        .collect()
}

pub(crate) fn policy_json(p: &Policy) -> Value {
    Value::Object(
        rows(p)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

pub(crate) fn print(p: &Policy, as_json: bool) -> Outcome {
    if as_json {
        say!("{:#}", document("policy", policy_json(p)));
    } else {
        for (k, v) in rows(p) {
            say!("{k} = {v}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_a_row_in_order() {
        let keys: Vec<&str> = rows(&Policy::default()).iter().map(|r| r.0).collect();
        assert_eq!(keys, Policy::KEYS);
    }
}
