//! The fail-slow matrix (docs/failslow.md "The matrix"): every trace on 2 and 4 paths at
//! 2, 200, 2,000 and 50,000 IOPS, by the product and by each peer as it is.
//!
//! `cargo bench -p hcabus-tools --bench matrix -- run 1..31 --out shard.jsonl` runs seeds
//! 1 to 30 (a shard: any range; `--iops 2,200`, `--paths 2` and `--traces ramp,heavy-tail`
//! narrow it; `--product-only` runs no peer, for a product changed beside peers' records that
//! stand: their models share none of its code) and writes one
//! JSON record a run; `-- merge a.jsonl b.jsonl --svg m.svg --table m.md` merges shards and
//! prints the summary. With no arguments: seed 1 of every cell, merged.
//!
//! The figures are the simulator's virtual time, the same on any machine for their seeds;
//! only the wall time printed last depends on this one.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant as Wall;

use hcabus_lab::peers::Peer;
use hcabus_tools::failslow::matrix::{self, summary, Record, IOPS, PATHS};
use hcabus_tools::failslow::TRACES;

struct Args {
    merge: Vec<PathBuf>,
    seeds: std::ops::Range<u64>,
    iops: Vec<u32>,
    paths: Vec<usize>,
    traces: Vec<&'static str>,
    out: Option<PathBuf>,
    svg: Option<PathBuf>,
    table: Option<PathBuf>,
    product_only: bool,
}

fn list<T: std::str::FromStr>(v: &str, key: &str) -> Result<Vec<T>, String> {
    v.split(',')
        .map(|x| {
            x.parse()
                .map_err(|_| format!("{key}: a list of numbers, not {v:?}"))
        })
        .collect()
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        merge: Vec::new(),
        seeds: 1..2,
        iops: IOPS.to_vec(),
        paths: PATHS.to_vec(),
        traces: TRACES.iter().map(|t| t.0).collect(),
        out: None,
        svg: None,
        table: None,
        product_only: false,
    };
    let mut it = std::env::args().skip(1).filter(|x| x != "--bench");
    let mut merging = false;
    while let Some(x) = it.next() {
        let mut value = |k: &str| it.next().ok_or(format!("{k} needs a value"));
        match x.as_str() {
            "run" => merging = false,
            "merge" => merging = true,
            "--iops" => a.iops = list(&value("--iops")?, "--iops")?,
            "--paths" => a.paths = list(&value("--paths")?, "--paths")?,
            "--traces" => {
                let v = value("--traces")?;
                a.traces = v
                    .split(',')
                    .map(|t| {
                        TRACES
                            .iter()
                            .map(|k| k.0)
                            .find(|k| *k == t)
                            .ok_or(format!("--traces: no trace {t:?}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--product-only" => a.product_only = true,
            "--out" => a.out = Some(value("--out")?.into()),
            "--svg" => a.svg = Some(value("--svg")?.into()),
            "--table" => a.table = Some(value("--table")?.into()),
            s if s.contains("..") && !merging => {
                let (x, y) = s.split_once("..").ok_or("seeds: A..B")?;
                match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) if x < y => a.seeds = x..y,
                    _ => return Err(format!("seeds: A..B with A < B, not {s:?}")),
                }
            }
            s if merging => a.merge.push(s.into()),
            s => return Err(format!("unknown argument {s:?}")),
        }
    }
    Ok(a)
}

fn run(a: &Args, dir: &Path) -> Result<Vec<Record>, String> {
    let mut jobs = Vec::new();
    for &trace in &a.traces {
        for &paths in &a.paths {
            for &iops in &a.iops {
                for seed in a.seeds.clone() {
                    jobs.push((trace, paths, iops, seed));
                }
            }
        }
    }
    // The costly cells first, so that the threads end together.
    jobs.sort_by_key(|j| std::cmp::Reverse(j.2));
    let peers: &[Peer] = if a.product_only { &[] } else { &Peer::ALL };
    let done = hcabus_tools::par::map(&jobs, hcabus_tools::par::processors(), |&(t, p, r, s)| {
        matrix::run_cell(dir, t, (p, r, s), peers).map_err(|e| e.to_string())
    });
    let mut out = Vec::new();
    for r in done {
        out.extend(r?);
    }
    Ok(out)
}

fn read(files: &[PathBuf]) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let r = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: {e}", f.display(), n + 1))?;
            out.push(r);
        }
    }
    Ok(out)
}

fn main() {
    let start = Wall::now();
    let fail = |e: String| -> ! {
        eprintln!("matrix bench: {e}");
        std::process::exit(1);
    };
    let a = args().unwrap_or_else(|e| fail(e));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/failslow");
    let records = if a.merge.is_empty() {
        run(&a, &dir).unwrap_or_else(|e| fail(e))
    } else {
        read(&a.merge).unwrap_or_else(|e| fail(e))
    };
    if let Some(out) = &a.out {
        let mut text = String::new();
        for r in &records {
            text.push_str(&serde_json::to_string(r).unwrap_or_else(|e| fail(e.to_string())));
            text.push('\n');
        }
        std::fs::write(out, text).unwrap_or_else(|e| fail(format!("{}: {e}", out.display())));
    }
    let cells = summary::merge(&records);
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{}", summary::render_summary(&cells));
    if let Some(svg) = &a.svg {
        std::fs::write(svg, summary::render_svg(&cells))
            .unwrap_or_else(|e| fail(format!("{}: {e}", svg.display())));
    }
    if let Some(table) = &a.table {
        std::fs::write(table, summary::render_table(&cells))
            .unwrap_or_else(|e| fail(format!("{}: {e}", table.display())));
    }
    let _ = writeln!(
        stdout,
        "\n{} records; {:.1} s of wall time",
        records.len(),
        start.elapsed().as_secs_f64()
    );
}
