//! `hcasim fleet FILE` (docs/design.md §11): a fleet scenario run under each retry policy it
//! compares, for each seed of a range, side by side; its figures as a table, JSON
//! (`hcasim.fleet/1`, docs/json.md) and a picture of hosts recovered over time.

use std::ops::Range;
use std::sync::Mutex;

use hcabus_fleet::{FaultFigures, Fleet, FleetFault, FleetFigures, PowerOnSetup};
use hcabus_lab::baselines::fixed_wait;
use ibal::retry::RetryPolicy;
use serde_json::Value;

use crate::scenario::fleet::{FleetPolicy, FleetScenario};

pub mod campaign;
pub mod curve;
mod json;
mod merge;
pub use json::json;
pub use merge::{merge, MergeError};

/// Where a fleet scenario came from: its path as given (a replay command names it) and the
/// SHA-256 of its text (shards of different scenarios are not merged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub file: String,
    pub sha256: String,
}

impl Source {
    pub fn of(file: &str, text: &str) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(text.as_bytes());
        Source {
            file: file.to_string(),
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// Shard `index` of `count` of `seeds`: a contiguous slice, the slices of every index
/// together `seeds` once each, their sizes within one of each other.
pub fn shard(seeds: Range<u64>, index: u64, count: u64) -> Result<Range<u64>, String> {
    if count == 0 || index >= count {
        return Err(format!(
            "--shard {index}/{count}: a shard is I/N with I below N"
        ));
    }
    let n = seeds.end.saturating_sub(seeds.start);
    let at = |i: u64| seeds.start + (u128::from(n) * u128::from(i) / u128::from(count)) as u64;
    Ok(at(index)..at(index + 1))
}

/// `I/N` of `--shard`.
pub fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("--shard {s}: expected I/N, e.g. 3/100");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    Ok((
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    ))
}

/// The most seeds one `hcasim fleet` takes: a shard, not a sweep.
pub const MAX_SEEDS: u64 = 100_000;

/// One run of the fleet: a seed under a policy, its figures, and what it cost.
#[derive(Debug, Clone)]
pub struct FleetRun {
    pub figures: FleetFigures,
    /// Wall-clock time of the run (build and run), in milliseconds: the one figure that is
    /// not the same from one machine to another.
    pub wall_ms: u64,
}

/// Runs `scenario` for each seed of `seeds` under each of its policies, on `jobs` threads;
/// the runs come back in order (seed, then policy). With fewer runs than threads, each run
/// steps its hosts on its share of them (`Fleet::set_workers`: the same figures). `Err` names a host the fleet could not
/// build.
pub fn run(
    scenario: &FleetScenario,
    seeds: Range<u64>,
    jobs: usize,
) -> Result<Vec<FleetRun>, String> {
    if seeds.end.saturating_sub(seeds.start) > MAX_SEEDS {
        return Err(format!(
            "--seeds: {} seeds; a run takes at most {MAX_SEEDS} (a batch engine shards more)",
            seeds.end.saturating_sub(seeds.start)
        ));
    }
    let work: Vec<(u64, FleetPolicy)> = seeds
        .flat_map(|s| scenario.policies.iter().map(move |p| (s, *p)))
        .collect();
    let workers = (jobs / work.len().max(1)).max(1);
    let next = Mutex::new(0usize);
    let done: Mutex<Vec<Option<Result<FleetRun, String>>>> =
        Mutex::new(work.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, work.len().max(1)) {
            scope.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(&(seed, retry)) = work.get(i) else {
                    return;
                };
                let r = one(scenario, seed, retry, workers);
                done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("a run did not finish".into())))
        .collect()
}

fn one(
    scenario: &FleetScenario,
    seed: u64,
    policy: FleetPolicy,
    workers: usize,
) -> Result<FleetRun, String> {
    let started = std::time::Instant::now();
    let mut setup = scenario.setup.clone();
    setup.seed = seed;
    setup.retry = policy.retry;
    setup.naive_ipoib = policy.naive_ipoib;
    let mut fleet = Fleet::build(&setup).map_err(|e| format!("key `fleet`: {e}"))?;
    fleet.set_workers(workers);
    fleet.run();
    Ok(FleetRun {
        figures: fleet.figures(),
        wall_ms: started.elapsed().as_millis() as u64,
    })
}

/// A run's policy as the table and the picture name it.
pub fn policy_label(f: &FleetFigures) -> String {
    if f.naive_ipoib {
        return "naive IPoIB".into();
    }
    match fixed_wait(f.retry) {
        Some(d) => format!("fixed {} s", d.as_ms() as f64 / 1e3),
        None => f.retry.name().replace('_', " "),
    }
}

fn secs(d: Option<hcabus::Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.3} s", d.as_us() as f64 / 1e6))
}

/// How the fleet powered on, in the table's words.
fn power_on_words(p: PowerOnSetup) -> String {
    let s = |d: hcabus::Duration| d.as_us() as f64 / 1e6;
    let when = if p.delay.1 > hcabus::Duration::ZERO {
        format!(
            "each host powers on {:.0} to {:.0} s in",
            s(p.delay.0),
            s(p.delay.1)
        )
    } else {
        "every host powers on at 0 s".into()
    };
    match p.firmware {
        Some(load) => format!(
            "{when}, its firmware logs the boot disk in and loads the OS for {:.0} s",
            s(load)
        ),
        None if p.delay.1 > hcabus::Duration::ZERO => when,
        None => format!("{when} (a boot storm)"),
    }
}

fn fault_words(f: &FaultFigures, power_on: PowerOnSetup) -> String {
    let at = f.at.as_us() as f64 / 1e6;
    match f.fault {
        FleetFault::TargetRestart { target, down } => format!(
            "target {target} restarts at {at:.3} s, down {:.3} s",
            down.as_us() as f64 / 1e6
        ),
        FleetFault::LinkFlap { down } => format!(
            "every link flaps at {at:.3} s, down {:.3} s",
            down.as_us() as f64 / 1e6
        ),
        FleetFault::LeafReboot { leaf, down } => format!(
            "leaf switch {leaf} reboots at {at:.3} s, down {:.3} s",
            down.as_us() as f64 / 1e6
        ),
        FleetFault::TrapStorm {
            leaf,
            down,
            every,
            bounces,
        } => format!(
            "a cable on leaf switch {leaf} bounces {bounces} times from {at:.3} s, every {:.3} s, down {:.3} s (a trap storm)",
            every.as_us() as f64 / 1e6,
            down.as_us() as f64 / 1e6
        ),
        FleetFault::PowerOn => power_on_words(power_on),
        FleetFault::SmHandover {
            reassign_lids: false,
        } => format!(
            "a subnet manager of higher priority takes over at {at:.3} s (a handover: it sweeps)"
        ),
        FleetFault::SmHandover {
            reassign_lids: true,
        } => format!(
            "a subnet manager of higher priority takes over at {at:.3} s (a handover: it \
             sweeps and gives every port a new LID)"
        ),
        FleetFault::SmFailover => format!(
            "the master subnet manager fails at {at:.3} s (the standby polls, takes over, sweeps)"
        ),
        FleetFault::SaOverload { down } => format!(
            "the SA answers nothing at {at:.3} s for {:.3} s",
            down.as_us() as f64 / 1e6
        ),
        FleetFault::Rollout { max_per_target } => format!(
            "a firmware rollout starts at {at:.3} s, at most {max_per_target} in reset a \
             target (its figures below)"
        ),
    }
}

/// The runs as tables: a table of each seed's, a column per policy; with several seeds the
/// campaign across them instead (`campaign.rs`), whose worst seed a table of its own
/// replays.
pub fn text(source: &Source, scenario: &FleetScenario, runs: &[FleetRun]) -> String {
    let mut out = String::new();
    let s = &scenario.setup;
    out.push_str(&format!(
        "fleet {}: {} hosts, {} target(s), {} s of virtual time, {} {} side by side\n",
        s.name,
        s.hosts,
        s.targets.len(),
        s.duration.as_ms() as f64 / 1e3,
        scenario.policies.len(),
        if scenario.policies.len() == 1 {
            "policy"
        } else {
            "policies"
        }
    ));
    let per_seed = scenario.policies.len().max(1);
    if runs.len() <= per_seed {
        for seed_runs in runs.chunks(per_seed) {
            out.push_str(&seed_table(seed_runs));
        }
        return out;
    }
    let values: Vec<Value> = runs.iter().map(json::run_json).collect();
    out.push_str(&campaign::text(&source.file, &campaign::of(&values)));
    out
}

/// Fault `k` of a run (every run of one fleet has the same faults).
fn fault_of(r: &FleetRun, k: usize) -> &FaultFigures {
    &r.figures.faults[k]
}

fn seed_table(runs: &[FleetRun]) -> String {
    use comfy_table::{presets, Table};
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    let mut header = vec![format!("seed {}", first.figures.seed)];
    header.extend(runs.iter().map(|r| policy_label(&r.figures)));
    t.set_header(header);
    let row = |t: &mut Table, name: &str, f: &dyn Fn(&FleetRun) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(runs.iter().map(f));
        t.add_row(r);
    };
    for (k, ff) in first.figures.faults.iter().enumerate() {
        t.add_row(vec![fault_words(ff, first.figures.power_on)]);
        row(&mut t, "  hosts back / that lost a path", &|r| {
            format!("{}/{}", fault_of(r, k).back, fault_of(r, k).hosts)
        });
        row(&mut t, "  all back after", &|r| {
            secs(fault_of(r, k).all_back_after)
        });
        row(&mut t, "  minimum: outage + the policy's part", &|r| {
            let f = fault_of(r, k);
            format!(
                "{} + {}",
                secs(Some(f.outage)),
                secs(Some(f.controlled_min))
            )
        });
        row(&mut t, "  over it: excess / the part's ratio", &|r| {
            let f = fault_of(r, k);
            match (f.excess_us(), f.controlled_over_min()) {
                (Some(us), Some(x)) => format!("{:+.3} s / {x:.2}x", us as f64 / 1e6),
                _ if f.no_host() => "no host to recover".into(),
                _ => "-".into(),
            }
        });
        row(&mut t, "  per host p50 / p99", &|r| {
            format!(
                "{} / {}",
                secs(fault_of(r, k).p50),
                secs(fault_of(r, k).p99)
            )
        });
        row(
            &mut t,
            "  blast: leaves / most on one / boot disks cut",
            &|r| {
                let f = fault_of(r, k);
                let (touched, most) = f.leaves_touched();
                let leaves = f.per_leaf.len();
                format!("{touched} of {leaves} / {most} / {}", f.boot_disks_cut)
            },
        );
        if runs.iter().any(|r| fault_of(r, k).paths_ridden > 0) {
            row(&mut t, "  paths kept through the flap (no login)", &|r| {
                fault_of(r, k).paths_ridden.to_string()
            });
        }
        if first.figures.faults[k].multicast_hosts > 0 {
            row(&mut t, "  multicast joined again p99 / last", &|r| {
                let f = fault_of(r, k);
                format!("{} / {}", secs(f.multicast_p99), secs(f.multicast_max))
            });
        }
    }
    for (k, tf) in first.figures.targets.iter().enumerate() {
        row(
            &mut t,
            &format!("target {k} (lid {:#x}) peak logins/s", tf.lid),
            &|r| {
                let s = r.figures.targets[k];
                if s.capacity.queue {
                    let wait = s.stats.longest_wait.as_us() as f64 / 1e6;
                    format!(
                        "{}, one at a time; waited {wait:.3} s at most",
                        s.stats.peak_per_second
                    )
                } else {
                    format!("{} of {}", s.stats.peak_per_second, s.capacity.per_second)
                }
            },
        );
    }
    if first.figures.rollout.is_some() {
        rollout_rows(&mut t, runs);
    }
    row(&mut t, "logins refused", &|r| {
        r.figures.logins_refused().to_string()
    });
    if runs.iter().any(|r| r.figures.logins_answered_late > 0) {
        row(&mut t, "logins given up before the target answered", &|r| {
            r.figures.logins_answered_late.to_string()
        });
    }
    subnet_rows(&mut t, runs);
    row(&mut t, "adapter resets (asked by IPoIB)", &|r| {
        format!("{} ({})", r.figures.resets, r.figures.ipoib_resets_asked)
    });
    row(&mut t, "I/O lost / failed", &|r| {
        format!("{} / {}", r.figures.io.lost, r.figures.io.failed)
    });
    row(&mut t, "paging I/O failed", &|r| {
        r.figures.io.paging_failed.to_string()
    });
    row(&mut t, "paging stall p50 / p99 / worst host", &|r| {
        let [p50, p99, max] = r.figures.paging_stall;
        format!(
            "{} / {} / {}",
            secs(Some(p50)),
            secs(Some(p99)),
            secs(Some(max))
        )
    });
    row(&mut t, "hosts stalled past 20 s / 60 s", &|r| {
        format!(
            "{} / {}",
            r.figures.paging_over_pdo_remove, r.figures.paging_over_disk_timeout
        )
    });
    row(&mut t, "invariants violated", &|r| {
        r.figures.violations.to_string()
    });
    row(&mut t, "host steps", &|r| r.figures.steps.to_string());
    row(&mut t, "wall time", &|r| {
        format!("{:.1} s", r.wall_ms as f64 / 1e3)
    });
    let mut out = format!("{t}\n");
    for r in runs {
        for v in &r.figures.quoted_violations {
            out.push_str(&format!("VIOLATED ({}): {v}\n", policy_label(&r.figures)));
        }
    }
    out
}

/// The subnet manager's rows: what the SA answered, late and dropped against its rate, the
/// interfaces' timeouts, and the PathRecords the logins asked for.
fn subnet_rows(t: &mut comfy_table::Table, runs: &[FleetRun]) {
    let mut row = |name: &str, f: &dyn Fn(&FleetFigures) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(runs.iter().map(|run| f(&run.figures)));
        t.add_row(r);
    };
    row("SA peak answers/s", &|f| {
        format!(
            "{} of {}",
            f.sa.peak_per_second, f.sa_setup.queries_per_second
        )
    });
    row("SA answered / late / dropped", &|f| {
        let sa = &f.sa;
        let dropped = sa.dropped_full + sa.dropped_backlog + sa.dropped_old + sa.dropped_away;
        let lost = dropped + sa.lost_in_failover;
        format!("{} / {} / {lost}", sa.answered, sa.late)
    });
    row("SA queries timed out", &|f| f.sa_timeouts.to_string());
    row("logins' PathRecords (unresolved)", &|f| {
        format!("{} ({})", f.path_records.queries, f.path_records.failed)
    });
    if runs.iter().any(|r| r.figures.srp_daemon.is_some()) {
        row("srp_daemon rescans (unanswered, given up)", &|f| {
            f.srp_daemon.map_or("-".into(), |d| {
                format!("{} ({}, {})", d.rescans, d.unanswered, d.given_up)
            })
        });
    }
    if runs.iter().any(|r| r.figures.linux.is_some()) {
        row(
            "Linux initiators: channels (failed logins, removed)",
            &|f| {
                f.linux.map_or("-".into(), |l| {
                    format!("{} ({}, {})", l.channels, l.failed, l.removed)
                })
            },
        );
        row("Linux initiators: up / longest login", &|f| {
            f.linux.map_or("-".into(), |l| {
                format!(
                    "{} of {} / {:.3} s",
                    l.up,
                    l.hosts,
                    l.longest_login.as_us() as f64 / 1e6
                )
            })
        });
    }
    if runs.iter().any(|r| r.figures.traps.is_some()) {
        row("trap storm: traps (ignored), heavy sweeps", &|f| {
            f.traps.map_or("-".into(), |t| {
                format!("{} ({}), {}", t.traps, t.ignored, t.sweeps)
            })
        });
        row("trap storm: longest a leaf port waited", &|f| {
            f.traps.map_or("-".into(), |t| {
                format!("{:.3} s", t.longest_deaf.as_us() as f64 / 1e6)
            })
        });
    }
    if runs.iter().any(|r| r.figures.firmware.is_some()) {
        row("firmware logins (retries, boots failed)", &|f| {
            f.firmware.map_or("-".into(), |fw| {
                format!("{} ({}, {})", fw.logins, fw.retries, fw.boot_failures)
            })
        });
    }
}

/// The rollout's rows: how far it got and how long it took, its peak against its limit, the
/// guard's refusals, and the longest a boot disk went with no path.
fn rollout_rows(t: &mut comfy_table::Table, runs: &[FleetRun]) {
    let mut row = |name: &str, f: &dyn Fn(&hcabus_fleet::RolloutFigures, &FleetRun) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(
            runs.iter()
                .map(|run| run.figures.rollout.map_or("-".into(), |ro| f(&ro, run))),
        );
        t.add_row(r);
    };
    row("rollout: adapters activated", &|ro, _| {
        format!("{}/{}", ro.done, ro.adapters)
    });
    row("  took", &|ro, _| {
        secs(ro.finished_at.map(|e| e.saturating_since(ro.started_at)))
    });
    row("  peak in reset per target", &|ro, _| {
        format!("{} of {}", ro.peak_per_target, ro.max_per_target)
    });
    row("  activations refused by the guard", &|ro, _| {
        ro.vetoed.to_string()
    });
    row("  longest a boot disk had no path", &|_, run| {
        secs(Some(hcabus::Duration::from_us(run.figures.max_no_path_us)))
    });
}

/// Whether every run under the shipped policy kept every guarantee. The policies it is
/// compared with are there to be worse (a fixed 10 s retry can leave a boot disk that never
/// logged in, whose I/O is lost by the report's rule): their figures are shown, not judged,
/// unless the shipped policy is not among them, when every run is judged.
pub fn held(runs: &[FleetRun]) -> bool {
    let shipped = |r: &&FleetRun| r.figures.retry == RetryPolicy::Backoff && !r.figures.naive_ipoib;
    if runs.iter().any(|r| shipped(&r)) {
        runs.iter().filter(shipped).all(|r| r.figures.held())
    } else {
        runs.iter().all(|r| r.figures.held())
    }
}

/// [`held`] of runs read back from JSON (a merge's): the shipped policy's runs judged, or
/// every run when it is not among them.
pub fn held_json(runs: &[Value]) -> bool {
    let shipped = |r: &&Value| r["retry"] == "backoff" && r["ipoib"] == "retry";
    if runs.iter().any(|r| shipped(&r)) {
        runs.iter().filter(shipped).all(|r| r["held"] == true)
    } else {
        runs.iter().all(|r| r["held"] == true)
    }
}
