//! The fail-slow matrix (docs/failslow.md "The matrix"): every trace on 2 and 4 paths at
//! 2, 200, 2,000 and 50,000 IOPS over many seeds, run by the product (the whole simulated
//! host) and by each peer as it is (`hcabus_lab::peers`), on the same routes, rates,
//! request limits and seeds. One record a run, as JSON lines, so that shards of seeds run
//! as separate processes and their outputs merge (`summary`).

use std::path::Path;

use hcabus::Instant;
use hcabus_lab::peers::{self, Peer, PeerSetup};
use hcabus_lab::stack::{ClientSpec, MultiSetup};
use serde::{Deserialize, Serialize};

use super::{run, TraceError, MODES, TRACES};
use crate::scenario::{parse_any, Scenario};

pub mod summary;

/// The rates and path counts of the matrix.
pub const IOPS: [u32; 4] = [2, 200, 2_000, 50_000];
pub const PATHS: [usize; 2] = [2, 4];

/// Who ran a record: the product's name in tables.
pub const HCABUS: &str = "hcabus";

/// One run of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub trace: String,
    pub paths: usize,
    pub iops: u32,
    pub seed: u64,
    pub who: String,
    /// I/Os completed or failed upward.
    pub ios: u64,
    pub failed: u64,
    /// Commands moved off (or paths taken out of use) where no path was at fault.
    pub spurious: u64,
    /// From the fault's start to the first command moved off a faulted path (or that path
    /// taken out of use); `None` when that never happened in the trace, or there is no
    /// fault.
    pub detected_us: Option<u64>,
    pub p50_us: u64,
    pub p99_us: u64,
    /// The longest wait, an I/O still owed at the end counted at its age.
    pub max_us: u64,
    /// Lost, duplicated or mismatched I/Os: 0, or the model is wrong.
    pub bad: u64,
}

/// The trace `name` of `dir` as the cell (`paths`, `iops`) and `seed` run it.
pub fn variant(
    dir: &Path,
    name: &str,
    (paths, iops, seed): (usize, u32, u64),
) -> Result<(MultiSetup, Vec<bool>), TraceError> {
    let path = dir.join(format!("{name}.toml"));
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| TraceError::Read(shown.clone(), e))?;
    let degraded = TRACES.iter().any(|(t, d)| *t == name && *d);
    let bad = |why: &str| TraceError::Build(shown.clone(), why.into());
    let mut file: toml::Table = toml::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let hcas = file
        .get("hcas")
        .and_then(|h| h.as_array())
        .cloned()
        .ok_or_else(|| bad("no [[hcas]]"))?;
    let faulted: Vec<bool> = hcas
        .iter()
        .map(|h| degraded && h.get("route").is_some())
        .collect();
    let (chosen, faults) = choose_paths(&hcas, &faulted, paths);
    let names: Vec<toml::Value> = chosen
        .iter()
        .map(|h| {
            h.get("name")
                .cloned()
                .unwrap_or(toml::Value::String(String::new()))
        })
        .collect();
    file.insert("hcas".into(), toml::Value::Array(chosen));
    file.insert("seed".into(), toml::Value::Integer(seed as i64));
    let clients = file
        .get_mut("clients")
        .and_then(|c| c.as_array_mut())
        .ok_or_else(|| bad("no [[clients]]"))?;
    for c in clients.iter_mut().filter_map(|c| c.as_table_mut()) {
        if c.contains_key("paths") {
            c.insert("paths".into(), toml::Value::Array(names.clone()));
            c.insert("iops".into(), toml::Value::Integer(i64::from(iops)));
        }
    }
    let text = toml::to_string(&file).map_err(|e| bad(&e.to_string()))?;
    match parse_any(&text).map_err(|e| TraceError::Parse(shown.clone(), e))? {
        Scenario::Many(m) => Ok((m, faults)),
        Scenario::One(_) => Err(TraceError::NotMultipath(shown)),
    }
}

/// `n` of the trace's adapters in their order: the faulted ones first chosen (leaving room
/// for one healthy path where the trace has one: a cut trace keeps somewhere to move to),
/// then the healthy ones; past the trace's own, copies of its first healthy adapter (of its
/// first, when all share the trace's condition). Returns them and which are faulted.
fn choose_paths(hcas: &[toml::Value], faulted: &[bool], n: usize) -> (Vec<toml::Value>, Vec<bool>) {
    let room = if faulted.iter().all(|f| *f) {
        n
    } else {
        n.saturating_sub(1).max(1)
    };
    let mut keep: Vec<usize> = (0..hcas.len()).filter(|i| faulted[*i]).take(room).collect();
    for i in (0..hcas.len()).filter(|i| !faulted[*i]) {
        if keep.len() < n {
            keep.push(i);
        }
    }
    keep.sort_unstable();
    let mut out: Vec<toml::Value> = keep.iter().map(|i| hcas[*i].clone()).collect();
    let mut faults: Vec<bool> = keep.iter().map(|i| faulted[*i]).collect();
    let model = faulted.iter().position(|f| !f).unwrap_or(0);
    let mut k = hcas.len();
    while out.len() < n {
        let mut copy = hcas[model].clone();
        if let Some(t) = copy.as_table_mut() {
            t.insert("name".into(), toml::Value::String(format!("hca{k}")));
        }
        out.push(copy);
        faults.push(false);
        k += 1;
    }
    (out, faults)
}

/// What a peer is given of `setup`: its first multipath disk's load and paths, in order.
pub fn peer_setup(setup: &MultiSetup) -> Option<PeerSetup> {
    let disk = setup.disks.first()?;
    let mut routes = vec![None; disk.paths];
    for c in setup.adapters.iter().flat_map(|a| &a.stack.clients) {
        if let ClientSpec::DiskPath { config, .. } = c {
            if config.disk == 0 {
                *routes.get_mut(config.path)? = Some(config.route);
            }
        }
    }
    let sim = &setup.adapters.first()?.stack.sim;
    Some(PeerSetup {
        seed: setup.seed,
        duration: sim.duration,
        iops: disk.load.iops,
        read_pct: disk.load.read_pct,
        n_blocks: disk.load.n_blocks,
        lun_id: disk.config.lun_id,
        queue_depth: disk.config.queue_depth,
        max_outstanding: ibal::multipath::SharedMultipath::capacity(&disk.config, disk.paths),
        large: disk.load.large,
        rc: sim.hca.transport,
        routes: routes.into_iter().collect::<Option<Vec<_>>>()?,
    })
}

/// When the first faulted path's trouble starts: its first phase after time zero.
fn fault_start(setup: &MultiSetup, faults: &[bool]) -> Option<Instant> {
    setup
        .adapters
        .iter()
        .flat_map(|a| &a.stack.clients)
        .filter_map(|c| match c {
            ClientSpec::DiskPath { config, .. } if faults.get(config.path) == Some(&true) => config
                .route
                .phases()
                .iter()
                .map(|p| p.at)
                .find(|t| *t > Instant::ZERO),
            _ => None,
        })
        .min()
}

/// Runs one cell and seed: the product, then each of `peers`.
pub fn run_cell(
    dir: &Path,
    trace: &'static str,
    (paths, iops, seed): (usize, u32, u64),
    peers: &[Peer],
) -> Result<Vec<Record>, TraceError> {
    let (setup, faults) = variant(dir, trace, (paths, iops, seed))?;
    let start = fault_start(&setup, &faults);
    let record = |who: &str| Record {
        trace: trace.into(),
        paths,
        iops,
        seed,
        who: who.into(),
        ios: 0,
        failed: 0,
        spurious: 0,
        detected_us: None,
        p50_us: 0,
        p99_us: 0,
        max_us: 0,
        bad: 0,
    };
    let mut out = Vec::with_capacity(1 + peers.len());
    let product = run(&setup, (trace, false), MODES[0])?;
    let mut mine = record(HCABUS);
    mine.ios = product.ios;
    mine.failed = product.failed;
    mine.bad = product.lost + product.duplicated + product.mismatched;
    mine.p50_us = product.latencies.percentile(500_000);
    mine.p99_us = product.p99_us();
    mine.max_us = product.max_latency_us;
    mine.spurious = (0..paths)
        .filter(|p| !faults.get(*p).copied().unwrap_or(false))
        .map(|p| product.given_up_on[p])
        .sum();
    mine.detected_us = start.and_then(|s| {
        product
            .moved_at
            .iter()
            .filter(|(p, at)| faults.get(*p) == Some(&true) && *at >= s)
            .map(|(_, at)| at.saturating_since(s).as_us())
            .min()
    });
    out.push(mine);
    let peer_setup = peer_setup(&setup)
        .ok_or_else(|| TraceError::Build(trace.into(), "no multipath disk".into()))?;
    for &peer in peers {
        let r = peers::run(peer, &peer_setup)
            .map_err(|e| TraceError::Build(trace.into(), e.to_string()))?;
        let mut rec = record(peer.name());
        rec.ios = r.io.completed + r.io.failed;
        rec.failed = r.io.failed;
        rec.bad = r.io.lost + r.io.duplicated + r.io.read_mismatches;
        rec.p50_us = r.latencies.percentile(500_000);
        rec.p99_us = r.latencies.percentile(990_000);
        rec.max_us = r.latencies.max();
        rec.spurious = (0..paths)
            .filter(|p| !faults.get(*p).copied().unwrap_or(false))
            .map(|p| r.moved[p] + r.taken_out[p].len() as u64)
            .sum();
        rec.detected_us = start.and_then(|s| {
            (0..paths)
                .filter(|p| faults.get(*p) == Some(&true))
                .filter_map(|p| r.taken_out_after(p, s))
                .map(|t| t.saturating_since(s).as_us())
                .min()
        });
        out.push(rec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/failslow")
    }

    #[test]
    fn a_trace_is_cut_to_two_paths_or_filled_to_four_keeping_its_faults() {
        // The faulted fourth path is kept, with the first healthy one, in their order.
        let (two, faults) = variant(&dir(), "four-paths-blackhole", (2, 200, 3)).expect("a trace");
        assert_eq!(faults, [false, true]);
        assert_eq!(two.seed, 3);
        assert_eq!((two.disks[0].paths, two.disks[0].load.iops), (2, 200));
        let names: Vec<&str> = two.adapters.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["hca0", "hca3"]);
        // Two paths filled to four with copies of the healthy one.
        let (four, faults) = variant(&dir(), "blackhole", (4, 50_000, 1)).expect("a trace");
        assert_eq!(faults, [true, false, false, false]);
        assert_eq!(four.disks[0].paths, 4);
        let setup = peer_setup(&four).expect("a multipath disk");
        assert!(setup.routes[0].phases().iter().any(|p| p.blackhole));
        assert!(setup.routes[1..]
            .iter()
            .all(|r| r.phases().iter().all(|p| !p.blackhole)));
        // Two faulted paths of three cut to two: the first fault and the healthy path.
        let (cut, faults) = variant(&dir(), "congestion-spreading", (2, 2, 1)).expect("a trace");
        assert_eq!(faults, [true, false]);
        let names: Vec<&str> = cut.adapters.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["hca0", "hca2"]);
        // A trace with no fault has no faulted path, even with routes of its own.
        let (_, faults) = variant(&dir(), "spikes", (2, 2, 1)).expect("a trace");
        assert_eq!(faults, [false, false]);
    }

    #[test]
    fn a_peer_given_the_products_work_waits_what_the_product_waits_where_neither_chooses() {
        // Every path alike and slow: no selector can do better than another, so the peer's
        // model and the whole simulated host must agree on the same work: same I/Os done,
        // same median wait, within a few percent.
        let (setup, _) = variant(&dir(), "slow-every-path", (2, 2_000, 11)).expect("a trace");
        let product = run(&setup, ("slow-every-path", false), MODES[0]).expect("runs");
        let peer = peers::run(
            Peer::Mpio(peers::Selector::RoundRobin),
            &peer_setup(&setup).expect("disk"),
        )
        .expect("runs");
        let done = |x: u64| x as f64;
        let ios = done(peer.io.completed) / done(product.ios);
        assert!(
            (0.99..=1.01).contains(&ios),
            "{} vs {}",
            peer.io.completed,
            product.ios
        );
        let (a, b) = (
            peer.latencies.percentile(500_000) as f64,
            product.latencies.percentile(500_000) as f64,
        );
        assert!((a / b - 1.0).abs() < 0.05, "p50 {a} vs {b}");
    }

    #[test]
    fn a_cell_runs_the_product_and_every_peer_on_the_same_seed() {
        let peers = [
            Peer::DmSrp(peers::Selector::ServiceTime),
            Peer::Mpio(peers::Selector::RoundRobin),
        ];
        let recs = run_cell(&dir(), "blackhole", (2, 200, 1), &peers).expect("runs");
        assert_eq!(recs.len(), 3);
        assert!(
            recs.iter()
                .all(|r| r.bad == 0 && r.failed == 0 && r.seed == 1),
            "{recs:?}"
        );
        let found = |i: usize| recs[i].detected_us.expect("found");
        // Retry exceeded (8 x 67.1 ms) then ib_srp's fast_io_fail_tmo, 15 s.
        assert!((15_000_000..16_000_000).contains(&found(1)), "{}", found(1));
        assert!(found(0) < found(2) && found(2) < found(1), "{recs:?}");
        assert_eq!(recs[0].spurious, 0);
    }
}
