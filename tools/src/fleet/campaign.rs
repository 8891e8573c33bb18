//! A campaign: one fleet scenario over many seeds, each figure summarised across them (its
//! median, its 99th percentile, each with a 95% interval, its worst and the seed of it), and
//! the worst seed of each policy with the command that replays it.
//!
//! The campaign is computed from the runs' JSON (`run_json`), not from the figures in
//! memory: a campaign of one process and one merged from the documents of many shards
//! (`merge`) are the same computation on the same input, so they cannot disagree.
//!
//! The intervals are distribution-free: order statistics of the seeds' values, whose ranks
//! come from the binomial law of how many seeds fall below the true quantile. They assume
//! nothing of the figures' shape; what they need is seeds. With 30 seeds the median's
//! interval is closed; the 99th percentile's upper bound needs 299 seeds and is reported
//! open below that, not invented.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use statrs::distribution::{Binomial, DiscreteCDF};

/// The confidence of every interval.
pub const CONFIDENCE: f64 = 0.95;

/// One figure's value in one run: a number, or never (a host that was never back has no
/// time back; it is worse than any).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    Value(f64),
    Never,
}

impl Sample {
    fn key(&self) -> (bool, f64) {
        match self {
            Sample::Value(v) => (false, *v),
            Sample::Never => (true, 0.0),
        }
    }

    fn cmp(&self, other: &Sample) -> std::cmp::Ordering {
        let (a, b) = (self.key(), other.key());
        a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
    }

    fn json(&self) -> Value {
        match self {
            Sample::Value(v) => json!(v),
            Sample::Never => json!("never"),
        }
    }

    /// As the table shows it, in `unit`.
    pub fn words(&self, unit: &str) -> String {
        match self {
            Sample::Value(v) if unit == "ms" => format!("{:.3} s", v / 1e3),
            Sample::Value(v) if unit == "x" => format!("{v:.2}x"),
            Sample::Value(v) => format!("{v}"),
            Sample::Never => "never".into(),
        }
    }
}

/// The 1-based ranks, among `n` sorted values, of the `q` quantile (nearest rank) and of
/// the bounds of its interval at [`CONFIDENCE`]: `None` for a bound that `n` values cannot
/// give (it is open). The interval [x(l), x(u)] holds the true quantile with probability
/// F(u-1) - F(l-1) >= CONFIDENCE, F the CDF of Binomial(n, q).
pub fn quantile_ranks(n: usize, q: f64) -> (usize, Option<usize>, Option<usize>) {
    if n == 0 {
        return (0, None, None);
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    let Ok(b) = Binomial::new(q, n as u64) else {
        return (rank, None, None);
    };
    let tail = (1.0 - CONFIDENCE) / 2.0;
    // F(k - 1) for rank k; F(-1) is 0.
    let below = |k: usize| if k == 0 { 0.0 } else { b.cdf(k as u64 - 1) };
    let lower = (1..=rank).rev().find(|&l| below(l) <= tail);
    let upper = (rank..=n).find(|&u| below(u) >= 1.0 - tail);
    (rank, lower, upper)
}

/// One figure across the seeds of one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The fault it belongs to (its index among the run's faults), or none for the run's.
    pub fault: Option<usize>,
    pub name: String,
    pub unit: &'static str,
    /// Seeds that gave it a value (a fault that took no host's path gives none).
    pub n: usize,
    pub never: usize,
    pub p50: Sample,
    pub p50_ci: (Option<Sample>, Option<Sample>),
    pub p99: Sample,
    pub p99_ci: (Option<Sample>, Option<Sample>),
    pub max: Sample,
    pub worst_seed: u64,
}

/// A figure's values, seed by seed.
struct Series {
    fault: Option<usize>,
    name: String,
    unit: &'static str,
    samples: Vec<(u64, Sample)>,
}

impl Series {
    fn summary(mut self) -> Option<Summary> {
        // Ties go to the lowest seed: the same worst seed whatever order the shards came in.
        self.samples
            .sort_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
        let n = self.samples.len();
        let &(worst_seed, max) = self.samples.last()?;
        let at = |r: Option<usize>| r.map(|r| self.samples[r - 1].1);
        let (r50, l50, u50) = quantile_ranks(n, 0.5);
        let (r99, l99, u99) = quantile_ranks(n, 0.99);
        Some(Summary {
            fault: self.fault,
            name: self.name,
            unit: self.unit,
            n,
            never: self.samples.iter().filter(|s| s.1 == Sample::Never).count(),
            p50: self.samples[r50 - 1].1,
            p50_ci: (at(l50), at(u50)),
            p99: self.samples[r99 - 1].1,
            p99_ci: (at(l99), at(u99)),
            max,
            worst_seed,
        })
    }
}

/// The figures a run gives, as (fault, name, unit, value): `None` where the run has none
/// to give (a fault that took no host's path).
fn figures(run: &Value) -> Vec<(Option<usize>, &'static str, &'static str, Option<Sample>)> {
    let mut out = Vec::new();
    let num = |v: &Value| v.as_f64().map(Sample::Value);
    for (k, f) in run["faults"].as_array().into_iter().flatten().enumerate() {
        let touched = f["hosts"].as_u64().unwrap_or(0) > 0;
        let or_never = |v: &Value| touched.then(|| num(v).unwrap_or(Sample::Never));
        out.push((Some(k), "all_back_ms", "ms", or_never(&f["all_back_ms"])));
        out.push((Some(k), "excess_ms", "ms", or_never(&f["excess_ms"])));
        let ratio = or_never(&f["controlled_over_min"]);
        out.push((Some(k), "controlled_over_min", "x", ratio));
        out.push((Some(k), "p99_ms", "ms", or_never(&f["p99_ms"])));
        let nets = f["multicast_hosts"].as_u64().unwrap_or(0) > 0;
        let multicast = nets.then(|| num(&f["multicast_max_ms"]).unwrap_or(Sample::Never));
        out.push((Some(k), "multicast_max_ms", "ms", multicast));
        let ridden = f["paths_ridden"].as_u64().is_some_and(|n| n > 0);
        out.push((
            Some(k),
            "paths_ridden",
            "",
            ridden.then(|| num(&f["paths_ridden"])).flatten(),
        ));
    }
    let count = |name: &'static str, v: &Value| (None, name, "", num(v));
    out.push(count("adapter_resets", &run["adapter_resets"]));
    out.push(count("logins_refused", &run["logins_refused"]));
    out.push(count("sa_late", &run["sa"]["late"]));
    out.push(count("sa_timeouts", &run["sa_timeouts"]));
    out.push((None, "max_no_path_ms", "ms", num(&run["max_no_path_ms"])));
    let stall = &run["paging_stall"];
    out.push((None, "paging_stall_max_ms", "ms", num(&stall["max_ms"])));
    out.push(count("paging_over_20s", &stall["over_pdo_remove_period"]));
    out.push(count("paging_over_60s", &stall["over_disk_timeout"]));
    out.push(count("io_lost", &run["io"]["lost"]));
    out.push(count("paging_failed", &run["io"]["paging_failed"]));
    out.push(count("model_overflows", &run["model_overflows"]));
    out.push(count("invariants_violated", &run["invariants_violated"]));
    out
}

/// A run's policy as a key: its retry, fixed wait and IPoIB.
fn policy_key(run: &Value) -> String {
    format!("{}/{}/{}", run["retry"], run["retry_wait_ms"], run["ipoib"])
}

/// A run's policy as the table names it (`super::policy_label`, from the JSON).
pub fn policy_label(run: &Value) -> String {
    if run["ipoib"] == "reset_on_sa_timeout" {
        return "naive IPoIB".into();
    }
    match run["retry_wait_ms"].as_f64() {
        Some(ms) => format!("fixed {} s", ms / 1e3),
        None => run["retry"].as_str().unwrap_or("?").replace('_', " "),
    }
}

/// How bad a run was, to find a policy's worst seed: a broken guarantee first, then hosts
/// never back, then the seconds lost over the minimums of every fault.
fn badness(run: &Value) -> (bool, usize, f64) {
    let faults = run["faults"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let touched = || faults.iter().filter(|f| f["hosts"].as_u64() > Some(0));
    let never = touched().filter(|f| f["all_back_ms"].is_null()).count();
    let excess = touched().filter_map(|f| f["excess_ms"].as_f64()).sum();
    (run["held"] == false, never, excess)
}

/// One policy's campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCampaign {
    pub label: String,
    pub runs: usize,
    /// Runs that kept every guarantee.
    pub held: usize,
    pub worst_seed: u64,
    pub figures: Vec<Summary>,
}

/// Every policy's campaign, in the order the runs first name them.
pub fn of(runs: &[Value]) -> Vec<PolicyCampaign> {
    let mut order: Vec<String> = Vec::new();
    let mut by_policy: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in runs {
        let key = policy_key(r);
        if !by_policy.contains_key(&key) {
            order.push(key.clone());
        }
        by_policy.entry(key).or_default().push(r);
    }
    order
        .iter()
        .map(|key| policy_campaign(&by_policy[key]))
        .collect()
}

fn policy_campaign(runs: &[&Value]) -> PolicyCampaign {
    let mut series: Vec<Series> = Vec::new();
    for r in runs {
        let seed = r["seed"].as_u64().unwrap_or(0);
        for (i, (fault, name, unit, value)) in figures(r).into_iter().enumerate() {
            if series.len() <= i {
                let name = match fault {
                    Some(k) => format!("{}.{name}", r["faults"][k]["kind"].as_str().unwrap_or("?")),
                    None => name.to_string(),
                };
                series.push(Series {
                    fault,
                    name,
                    unit,
                    samples: Vec::new(),
                });
            }
            if let Some(v) = value {
                series[i].samples.push((seed, v));
            }
        }
    }
    let seed = |r: &&Value| r["seed"].as_u64().unwrap_or(0);
    let worst = runs
        .iter()
        .max_by(|a, b| {
            let (x, y) = (badness(a), badness(b));
            (x.0, x.1)
                .cmp(&(y.0, y.1))
                .then(x.2.total_cmp(&y.2))
                .then(seed(b).cmp(&seed(a)))
        })
        .map_or(0, seed);
    PolicyCampaign {
        label: runs.first().map_or(String::new(), |r| policy_label(r)),
        runs: runs.len(),
        held: runs.iter().filter(|r| r["held"] == true).count(),
        worst_seed: worst,
        figures: series.into_iter().filter_map(Series::summary).collect(),
    }
}

/// The command that replays seed `seed` of the scenario in `file`.
pub fn replay(file: &str, seed: u64) -> String {
    format!("hcasim --seed {seed} fleet {file}")
}

/// The campaign as the fleet document's `campaign` object.
pub fn json(file: &str, campaigns: &[PolicyCampaign]) -> Value {
    let bound = |b: Option<Sample>| b.map_or(Value::Null, |s| s.json());
    json!({
        "confidence": CONFIDENCE,
        "policies": campaigns.iter().map(|c| json!({
            "policy": c.label,
            "runs": c.runs,
            "held": c.held,
            "worst_seed": c.worst_seed,
            "replay": replay(file, c.worst_seed),
            "figures": c.figures.iter().map(|f| json!({
                "fault": f.fault,
                "figure": f.name,
                "n": f.n,
                "never": f.never,
                "p50": f.p50.json(),
                "p50_low": bound(f.p50_ci.0),
                "p50_high": bound(f.p50_ci.1),
                "p99": f.p99.json(),
                "p99_low": bound(f.p99_ci.0),
                "p99_high": bound(f.p99_ci.1),
                "max": f.max.json(),
                "worst_seed": f.worst_seed,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The campaign as a table a policy, a row a figure.
pub fn text(file: &str, campaigns: &[PolicyCampaign]) -> String {
    use comfy_table::{presets, Table};
    let mut out = String::new();
    for c in campaigns {
        out.push_str(&format!(
            "{}: {} seeds, {} kept every guarantee; worst seed {}: {}\n",
            c.label,
            c.runs,
            c.held,
            c.worst_seed,
            replay(file, c.worst_seed)
        ));
        let mut t = Table::new();
        t.load_style(presets::NOTHING);
        t.set_header(["figure", "n", "p50 [95%]", "p99 [95%]", "max (seed)"]);
        let open = |b: Option<Sample>, unit: &str, side: &str| {
            b.map_or(side.to_string(), |s| s.words(unit))
        };
        for f in &c.figures {
            let interval = |(l, u): (Option<Sample>, Option<Sample>)| {
                format!("[{}, {}]", open(l, f.unit, "-"), open(u, f.unit, "open"))
            };
            let name = match f.fault {
                Some(k) => format!("{k}: {}", f.name),
                None => f.name.clone(),
            };
            t.add_row([
                name,
                f.n.to_string(),
                format!("{} {}", f.p50.words(f.unit), interval(f.p50_ci)),
                format!("{} {}", f.p99.words(f.unit), interval(f.p99_ci)),
                format!("{} ({})", f.max.words(f.unit), f.worst_seed),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    out
}

#[cfg(test)]
mod tests;
