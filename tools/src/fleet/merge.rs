//! `hcasim fleet-merge`: the documents of a sweep's shards (each a process of a batch
//! engine's array, `hcasim fleet FILE --json --shard I/N`) made one, as if one process had
//! run every seed: the runs in seed order, then policy order, and their campaign.
//!
//! Shards of two different scenarios, or of one seed twice, are refused: a campaign over
//! them would be a figure of nothing.

use std::collections::BTreeSet;

use serde_json::Value;

/// Why shards could not be merged; each names the shard (its index in the list given).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    #[error("no shard to merge")]
    Empty,
    #[error("shard {0}: not an hcasim.fleet/1 document (its `schema` is {1})")]
    NotFleet(usize, String),
    #[error("shard {0}: `{1}` is {2}, shard 0's is {3}: shards of different scenarios")]
    Differs(usize, &'static str, String, String),
    #[error("shard {0}: seed {1} under {2} is also in an earlier shard")]
    Twice(usize, u64, String),
    #[error("shard {0}: run {1} has no `seed`")]
    NoSeed(usize, usize),
}

/// The keys every shard of one sweep has the same.
const SAME: [&str; 5] = ["name", "file", "scenario_sha256", "hosts", "duration_ms"];

/// The one document of `shards`.
pub fn merge(shards: &[Value]) -> Result<Value, MergeError> {
    let first = shards.first().ok_or(MergeError::Empty)?;
    let schema = hcactl::contract::schema("hcasim", "fleet");
    let mut runs: Vec<(u64, usize, Value)> = Vec::new();
    let mut policies: Vec<String> = Vec::new();
    let mut seen: BTreeSet<(u64, String)> = BTreeSet::new();
    for (i, shard) in shards.iter().enumerate() {
        if shard["schema"] != schema.as_str() {
            return Err(MergeError::NotFleet(i, shard["schema"].to_string()));
        }
        for key in SAME {
            if shard[key] != first[key] {
                let (a, b) = (shard[key].to_string(), first[key].to_string());
                return Err(MergeError::Differs(i, key, a, b));
            }
        }
        for (k, run) in shard["runs"].as_array().into_iter().flatten().enumerate() {
            let seed = run["seed"].as_u64().ok_or(MergeError::NoSeed(i, k))?;
            let policy = super::campaign::policy_label(run);
            if !seen.insert((seed, policy.clone())) {
                return Err(MergeError::Twice(i, seed, policy));
            }
            let p = match policies.iter().position(|p| *p == policy) {
                Some(p) => p,
                None => {
                    policies.push(policy);
                    policies.len() - 1
                }
            };
            runs.push((seed, p, run.clone()));
        }
    }
    runs.sort_by_key(|(seed, p, _)| (*seed, *p));
    let mut head = first.clone();
    if let Some(o) = head.as_object_mut() {
        o.remove("runs");
        o.remove("campaign");
    }
    Ok(super::json::document(
        head,
        runs.into_iter().map(|(_, _, r)| r).collect(),
    ))
}
