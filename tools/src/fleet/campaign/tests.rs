use super::*;

#[test]
fn a_median_of_thirty_has_a_closed_interval_and_a_p99_an_open_top() {
    // Binomial(30, 0.5): F(9) = 0.021 <= 0.025 < F(10) = 0.049, F(19) = 0.951 < 0.975 <=
    // F(20) = 0.979: the interval is [x(10), x(21)].
    assert_eq!(quantile_ranks(30, 0.5), (15, Some(10), Some(21)));
    // Binomial(30, 0.99): F(27) = 0.0033 <= 0.025 < F(28) = 0.036; F(29) = 0.26 never
    // reaches 0.975: the top is open.
    assert_eq!(quantile_ranks(30, 0.99), (30, Some(28), None));
    // 299 seeds close it (1 - 0.99^299 = 0.95).
    let (_, _, upper) = quantile_ranks(400, 0.99);
    assert!(upper.is_some());
    assert_eq!(quantile_ranks(1, 0.5), (1, None, None));
    assert_eq!(quantile_ranks(0, 0.5), (0, None, None));
}

#[test]
fn the_interval_covers_what_it_says() {
    // Every interval given, whatever n, holds the quantile with 95% or more.
    for n in [5usize, 6, 10, 30, 31, 100, 1_000] {
        for q in [0.5, 0.99] {
            let (rank, lower, upper) = quantile_ranks(n, q);
            assert!(lower.is_none_or(|l| l <= rank) && upper.is_none_or(|u| u >= rank));
            if let (Some(l), Some(u)) = (lower, upper) {
                let b = Binomial::new(q, n as u64).expect("law");
                let below = |k: usize| if k == 0 { 0.0 } else { b.cdf(k as u64 - 1) };
                assert!(below(u) - below(l) >= CONFIDENCE, "n {n} q {q}: [{l}, {u}]");
            }
        }
    }
}

fn run(seed: u64, retry: &str, all_back_ms: Option<f64>, held: bool) -> Value {
    json!({
        "seed": seed,
        "retry": retry,
        "retry_wait_ms": null,
        "ipoib": "retry",
        "held": held,
        "faults": [
            {"kind": "power_on", "hosts": 10, "all_back_ms": all_back_ms,
             "excess_ms": all_back_ms.map(|v| v - 100.0), "controlled_over_min": 1.5,
             "p99_ms": 10.0},
            {"kind": "target_restart", "hosts": 0, "all_back_ms": null, "excess_ms": null,
             "controlled_over_min": null, "p99_ms": null},
        ],
        "adapter_resets": 0,
        "logins_refused": seed,
        "sa": {"late": 0},
        "sa_timeouts": 0,
        "max_no_path_ms": 0.0,
        "io": {"lost": 0, "paging_failed": 0},
        "invariants_violated": 0,
    })
}

#[test]
fn a_host_never_back_is_the_worst_seed_and_a_fault_with_no_host_is_no_sample() {
    let runs: Vec<Value> = (1..=30)
        .map(|s| run(s, "backoff", (s != 17).then_some(100.0 + s as f64), true))
        .collect();
    let c = of(&runs);
    assert_eq!(c.len(), 1);
    let c = &c[0];
    assert_eq!((c.runs, c.held, c.worst_seed), (30, 30, 17));
    let all_back = c.figures.iter().find(|f| f.name == "power_on.all_back_ms");
    let all_back = all_back.expect("the power-on's figure");
    assert_eq!((all_back.n, all_back.never), (30, 1));
    assert_eq!((all_back.max, all_back.worst_seed), (Sample::Never, 17));
    // The 15th of 29 values 101..=130 (17 missing) and never.
    assert_eq!(all_back.p50, Sample::Value(115.0));
    assert_eq!(
        all_back.p50_ci,
        (Some(Sample::Value(110.0)), Some(Sample::Value(122.0)))
    );
    // The restart took no host in any seed: no figure, rather than 30 "never".
    assert!(c
        .figures
        .iter()
        .all(|f| !f.name.starts_with("target_restart")));
    let refused = c.figures.iter().find(|f| f.name == "logins_refused");
    assert_eq!(
        refused.map(|f| (f.max, f.worst_seed)),
        Some((Sample::Value(30.0), 30))
    );
}

#[test]
fn a_broken_run_is_worse_than_any_slow_one_and_policies_keep_their_order() {
    let mut runs = Vec::new();
    for s in 1..=5 {
        runs.push(run(s, "no_jitter", Some(500.0), true));
        runs.push(run(s, "backoff", Some(100.0 * s as f64), s != 2));
    }
    let c = of(&runs);
    let labels: Vec<&str> = c.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(labels, ["no jitter", "backoff"]);
    assert_eq!((c[1].held, c[1].worst_seed), (4, 2));
    // Every seed of `no_jitter` is as bad: the lowest is its worst.
    assert_eq!(c[0].worst_seed, 1);
    let text = text("f.toml", &c);
    assert!(
        text.contains("worst seed 2: hcasim --seed 2 fleet f.toml"),
        "{text}"
    );
}
