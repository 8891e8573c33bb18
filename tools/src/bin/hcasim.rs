//! hcasim: runs the bus driver, a simulated HCA and its clients in virtual time.
#![forbid(unsafe_code)]

use std::alloc::System;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use hcabus_lab::stack::Node;
use hcabus_sim::random_setup;
use hcabus_tools::{report, scenario, timeline};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations so far, all threads: the per-reset "allocs" column is its difference.
fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

/// Whether `--json` was given: errors are then JSON on stderr (docs/json.md, hcasim.error/1).
static JSON_ERRORS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says what went wrong on stderr: `hcasim: MESSAGE`, or under `--json` one JSON object.
macro_rules! complain {
    ($($arg:tt)*) => { say_error(&format!($($arg)*)) };
}

fn say_error(message: &str) {
    if JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) {
        let v = serde_json::json!({
            "schema": hcactl::contract::schema("hcasim", "error"),
            "error": { "message": message },
        });
        eprintln!("{v}");
    } else {
        eprintln!("hcasim: {message}");
    }
}

// A directory of its own: a file beside this one would be a binary of its own.
#[path = "hcasim/fleet.rs"]
mod fleet;
#[path = "hcasim/replay.rs"]
mod replay;

/// What hcasim's exit status says (`--help`, the manual page's EXIT STATUS).
const EXIT_STATUS: &str = "\
Exit status:
  0  the run kept every guarantee: no invariant violated, no I/O lost, duplicated or
     corrupted, no command out past its bound (`hunt`: every seed did; `serve`: it
     stopped on SIGINT or SIGTERM)
  1  a guarantee broke: an invariant violated, I/O lost, duplicated or corrupted, or a
     command left out past its bound (`hunt`: a seed did, printed with the command that
     replays it); `replay`: the replay's records differ from the bundle's
  2  a usage error, a scenario file that is refused (the key named), or a socket that
     cannot be served; `replay`: a file that is not a bundle, one with nothing to compare
     or too long to replay, or a --scenario file that exists already";

/// Run the hcabus soft-reset coordinator on a simulated HCA.
///
/// With no arguments: the embedded boot-from-SAN scenario (IBAL, IPoIB on two ports, a boot
/// disk and a data LUN under load, a user-verbs process) hits a catastrophic error and
/// recovers.
#[derive(Debug, Parser)]
#[command(name = "hcasim", version, about, after_help = EXIT_STATUS)]
struct Cli {
    /// Seed of the default run (its own seed otherwise).
    #[arg(long)]
    seed: Option<u64>,
    /// Run a random scenario generated from this seed instead (clients, faults, policy).
    #[arg(long, value_name = "SEED")]
    random: Option<u64>,
    /// Also print every flight-recorder record.
    #[arg(long)]
    flight_record: bool,
    /// Run the default host with a second adapter and the boot disk on a path through
    /// each (the catastrophic error strikes one of them).
    #[arg(long)]
    multipath: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario file (TOML, the format of docs/hcasim.md).
    Run {
        file: PathBuf,
        /// Print the JSON report instead of the timeline.
        #[arg(long)]
        json: bool,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Also draw the reset timeline as an SVG picture into this file.
        #[arg(long, value_name = "OUT.svg")]
        timeline: Option<PathBuf>,
    },
    /// Run random scenarios on every core, hunting for broken guarantees or lost I/O; each
    /// failure is printed with the command that replays it. Exit 1 when any failed.
    Hunt {
        /// Seeds to run, `A..B` (B excluded).
        #[arg(long, default_value = "0..1000")]
        seeds: String,
        /// Threads (default: every core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Every this many seeds also runs the full stack under load (0: never).
        #[arg(long, default_value_t = 50)]
        stack_every: u64,
        /// Print the JSON report (hcasim.hunt/1) instead of the text.
        #[arg(long)]
        json: bool,
    },
    /// Run a fleet scenario (`[fleet]`, docs/design.md §11): many hosts sharing SRP targets,
    /// under each retry policy it compares, side by side. Exit 1 when a run of the shipped
    /// retry policy broke a guarantee on any host (the others are shown, not judged).
    Fleet {
        file: PathBuf,
        /// Seeds to run, `A..B` (B excluded), instead of the scenario's own: one shard of a
        /// sweep under a batch engine (docs/hcasim.md).
        #[arg(long)]
        seeds: Option<String>,
        /// Print the JSON report (hcasim.fleet/1) instead of the table.
        #[arg(long)]
        json: bool,
        /// Also draw hosts recovered over time, for the first seed, into this file.
        #[arg(long, value_name = "OUT.svg")]
        svg: Option<PathBuf>,
        /// Threads (default: every core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only shard I of N of the seeds (a contiguous slice): one task of a batch
        /// engine's array (`$SLURM_ARRAY_TASK_ID/100`); `fleet-merge` joins their JSON.
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// The capacity curve: the fleet grown or shrunk to each load, `A,B,C` disks logging
        /// in to each target, under its first policy; each fault's recovery by load.
        #[arg(long, value_name = "A,B,C")]
        curve: Option<String>,
    },
    /// Merge the JSON documents of a fleet sweep's shards into one, as one process running
    /// every seed would have printed it, and summarise the campaign across the seeds. Exit
    /// 1 when a run of the shipped policy broke a guarantee, 2 when the shards do not fit.
    FleetMerge {
        /// The shards' `hcasim fleet --json` outputs.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the merged JSON document (hcasim.fleet/1) instead of the campaign's table.
        #[arg(long)]
        json: bool,
    },
    /// Replay a diagnostic bundle (`hcactl dump --bundle FILE`): build the scenario its
    /// records show, run it, and hold the replay's records against the bundle's, kind by
    /// kind and in order. Exit 1 when they differ.
    Replay {
        file: PathBuf,
        /// Also write the scenario made from the bundle into this new file.
        #[arg(long, value_name = "OUT.toml")]
        scenario: Option<PathBuf>,
    },
    /// Run a live host in real time and serve the IOCTL interface on a Unix socket. A host
    /// of several adapters (`[[hcas]]`, `--multipath`) also serves each adapter NAME on
    /// PATH.NAME (`hcactl --device NAME`); PATH is the first adapter.
    #[cfg(unix)]
    Serve {
        /// Where to listen (created with mode 0600).
        #[arg(long)]
        socket: PathBuf,
        /// Start from this scenario (its clients and policy; its events fire at their
        /// times); the default host with no faults otherwise.
        #[arg(long)]
        scenario: Option<PathBuf>,
    },
    /// Print the completion script for SHELL (bash, zsh, fish, powershell, elvish), e.g.
    /// `hcasim completions bash > /etc/bash_completion.d/hcasim`.
    Completions { shell: hcactl::generate::Shell },
    /// Print the manual page (roff), e.g. `hcasim man > hcasim.1; man ./hcasim.1`.
    Man,
}

impl Command {
    fn is_serve(&self) -> bool {
        #[cfg(unix)]
        if let Command::Serve { .. } = self {
            return true;
        }
        false
    }
}

#[cfg(unix)]
fn serve(
    socket: &std::path::Path,
    scenario: Option<&std::path::Path>,
    seed: Option<u64>,
    multipath: bool,
) -> ExitCode {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let mut setup = match (scenario, multipath) {
        (Some(_), true) => {
            complain!("--multipath is a host of its own; it does not take --scenario");
            return ExitCode::from(2);
        }
        (Some(file), false) => match read_any_scenario(file) {
            Ok(s) => s,
            Err(code) => return code,
        },
        (None, true) => {
            let mut s = hcabus_lab::stack::boot_from_san_multipath();
            for a in &mut s.adapters {
                a.stack.sim.faults.clear();
            }
            scenario::Scenario::Many(s)
        }
        (None, false) => {
            let mut s = hcabus_lab::stack::boot_from_san();
            s.sim.faults.clear();
            scenario::Scenario::One(s)
        }
    };
    if let Some(seed) = seed {
        match &mut setup {
            scenario::Scenario::One(s) => s.sim.seed = seed,
            scenario::Scenario::Many(s) => s.seed = seed,
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            complain!("cannot handle signal {signal}: {e}");
            return ExitCode::from(2);
        }
    }
    match hcabus_tools::serve::serve(setup, socket, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            complain!("serve {}: {e}", socket.display());
            ExitCode::from(2)
        }
    }
}

/// Reads and parses a scenario file of one adapter or several.
fn read_any_scenario(file: &std::path::Path) -> Result<scenario::Scenario, ExitCode> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        complain!("cannot read {}: {e}", file.display());
        ExitCode::from(2)
    })?;
    scenario::parse_any(&text).map_err(|e| {
        complain!("{}: {e}", file.display());
        ExitCode::from(2)
    })
}

/// A run: one adapter's host, or several adapters' on one clock.
// One per process, built once: boxing the large variant buys nothing.
#[allow(clippy::large_enum_variant)]
enum Run {
    One(Node),
    Many(hcabus_lab::stack::MultiNode),
}

impl Run {
    fn end(&self) -> hcabus::Instant {
        match self {
            Run::One(h) => h.end(),
            Run::Many(w) => w.end(),
        }
    }
    fn run_until(&mut self, t: hcabus::Instant) {
        match self {
            Run::One(h) => h.run_until(t),
            Run::Many(w) => w.run_until(t),
        }
    }
    fn reset_in_progress(&self) -> bool {
        match self {
            Run::One(h) => h.coordinator().reset_in_progress(),
            Run::Many(w) => w.reset_in_progress(),
        }
    }
    fn set_alloc_probe(&mut self, probe: hcabus_sim::AllocProbe) {
        match self {
            Run::One(h) => h.set_alloc_probe(probe),
            Run::Many(w) => w.set_alloc_probe(probe),
        }
    }
    fn svg(&self) -> String {
        match self {
            Run::One(h) => hcabus_tools::svg::render(h),
            Run::Many(w) => hcabus_tools::svg::render_many(w.hosts()),
        }
    }
    fn json(&self) -> String {
        match self {
            Run::One(h) => report::to_json(h),
            Run::Many(w) => report::json(&report::build_many(w)),
        }
    }
    fn text(&self, flight_record: bool) -> String {
        let mut t = match self {
            Run::One(h) => {
                let mut t = timeline::render(h);
                t.push_str(&timeline::workload(h));
                t
            }
            Run::Many(w) => hcabus_tools::world::render(w),
        };
        if flight_record {
            t.push_str("\nflight record:\n");
            let hosts: Vec<(&str, &Node)> = match self {
                Run::One(h) => std::vec![("", h)],
                Run::Many(w) => w.hosts().iter().map(|(n, h)| (n.as_str(), h)).collect(),
            };
            for (name, h) in hosts {
                if !name.is_empty() {
                    t.push_str(&format!("adapter {name}:\n"));
                }
                t.push_str(&timeline::flight_record(h));
            }
        }
        t
    }
    fn io(&self) -> ibal::io::IoStats {
        match self {
            Run::One(h) => hcabus_lab::stack::io_stats(h),
            Run::Many(w) => hcabus_lab::stack::io_stats_all(w),
        }
    }
    fn violated(&self) -> bool {
        match self {
            Run::One(h) => !h.checker().violations.is_empty(),
            Run::Many(w) => !w.invariants().1.is_empty(),
        }
    }
}

/// Runs to the end; a long run shows a progress bar when stdout is a terminal. The run is
/// the same either way: stepping to intermediate instants changes nothing.
fn run_with_progress(host: &mut Run) {
    use std::io::IsTerminal;
    let end = host.end();
    const LONG_US: u64 = 60_000_000;
    if end.as_us() < LONG_US || !std::io::stdout().is_terminal() {
        host.run_until(end);
        return;
    }
    let bar = indicatif::ProgressBar::new(end.as_ms());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} ms of virtual time")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let step = (end.as_us() / 200).max(1);
    let mut t = 0;
    while t < end.as_us() {
        t = (t + step).min(end.as_us());
        host.run_until(hcabus::Instant::from_us(t));
        // Drawing allocates: never inside a reset, whose allocations are being counted.
        if !host.reset_in_progress() {
            bar.set_position(t / 1000);
        }
    }
    bar.finish_and_clear();
}

/// The threads `--jobs` asks for, or every core.
fn every_core_unless(jobs: Option<usize>) -> usize {
    jobs.or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// `hcasim hunt`: the summary on stdout, a progress bar on a terminal's stderr.
fn hunt(seeds: &str, jobs: Option<usize>, stack_every: u64, json: bool) -> ExitCode {
    use hcabus_tools::hunt::{hunt, parse_seeds, HuntConfig};
    let seeds = match parse_seeds(seeds) {
        Ok(s) => s,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let jobs = every_core_unless(jobs);
    let config = HuntConfig {
        seeds: seeds.clone(),
        jobs,
        stack_every,
    };
    let bar = indicatif::ProgressBar::new(seeds.end - seeds.start);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {elapsed} (eta {eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let started = std::time::Instant::now();
    let report = hunt(&config, &|_| bar.inc(1));
    bar.finish_and_clear();
    let verdict = if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if json {
        let wall_ms = started.elapsed().as_millis() as u64;
        let doc = hcabus_tools::hunt::json(&config, &report, wall_ms);
        return emit(&format!("{doc}\n")).unwrap_or(verdict);
    }
    let mut out = format!(
        "hunt: seeds {}..{} on {jobs} threads in {:.1} s: {} runs ({} of the full stack), {} failed\n",
        seeds.start,
        seeds.end,
        started.elapsed().as_secs_f64(),
        report.runs,
        report.stack_runs,
        report.failures.len()
    );
    for f in &report.failures {
        out.push_str(&format!(
            "FAILED seed {}: {}\n  replay: {}\n",
            f.seed,
            f.what,
            f.replay()
        ));
    }
    out.push_str("outcomes reached:");
    for (outcome, n) in &report.outcomes {
        out.push_str(&format!(" {outcome} {n};"));
    }
    out.push('\n');
    emit(&out).unwrap_or(verdict)
}

fn main() -> ExitCode {
    let json = std::env::args_os().any(|a| a == "--json");
    JSON_ERRORS.store(json, std::sync::atomic::Ordering::Relaxed);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if json && e.use_stderr() => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("usage error");
            say_error(first.strip_prefix("error: ").unwrap_or(first));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    if std::env::var_os("RUST_LOG").is_some() {
        // Logging formats text, which allocates: only when asked for.
        env_logger::init();
    }
    if cli.command.is_some() && cli.random.is_some() {
        complain!(
            "--random generates its own scenario; it does not apply to `run`, `serve`, `hunt` \
             or `fleet`"
        );
        return ExitCode::from(2);
    }
    let serving = matches!(&cli.command, Some(c) if c.is_serve());
    if cli.multipath && ((cli.command.is_some() && !serving) || cli.random.is_some()) {
        complain!(
            "--multipath is an embedded host of its own; it does not apply to `run`, \
             `hunt` or --random (`hcasim --multipath serve` serves it)"
        );
        return ExitCode::from(2);
    }
    let (mut host, json) = match host_for(&cli) {
        Ok(built) => built,
        Err(code) => return code,
    };
    host.set_alloc_probe(allocations);
    run_with_progress(&mut host);
    if let Some(Command::Run {
        timeline: Some(out),
        ..
    }) = &cli.command
    {
        if let Err(e) = std::fs::write(out, host.svg()) {
            complain!("cannot write {}: {e}", out.display());
            return ExitCode::from(2);
        }
    }
    let text = if json {
        format!("{}\n", host.json())
    } else {
        host.text(cli.flight_record)
    };
    let io = host.io();
    if io.paging_failed > 0 {
        // Loud in every mode, JSON included: on Windows the machine would have died.
        complain!(
            "WARNING: {} paging I/Os failed upward; on Windows each is bugcheck \
             0x7A (KERNEL_DATA_INPAGE_ERROR)",
            io.paging_failed
        );
    }
    if io.overdue > 0 {
        complain!(
            "{} commands are out past their bound: every command should have ended",
            io.overdue
        );
    }
    let verdict = if hcabus_tools::report::clean(&io, host.violated()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    emit(&text).unwrap_or(verdict)
}

/// A host that could not be built: said on stderr, exit 2.
fn built<T>(name: &str, host: Result<T, String>) -> Result<T, ExitCode> {
    host.map_err(|e| {
        complain!("scenario '{name}': {e}");
        ExitCode::from(2)
    })
}

fn stack_world(setup: &hcabus_lab::stack::StackSetup) -> Result<Run, ExitCode> {
    built(
        &setup.sim.name,
        hcabus_lab::stack::build(setup).map_err(|e| e.to_string()),
    )
    .map(Run::One)
}

fn many_world(setup: &hcabus_lab::stack::MultiSetup) -> Result<Run, ExitCode> {
    built(
        &setup.name,
        hcabus_lab::stack::build_multi(setup).map_err(|e| e.to_string()),
    )
    .map(Run::Many)
}

/// `hcasim run FILE`: its scenario, with the seed `run --seed` or `hcasim --seed` gives.
fn run_world(
    file: &std::path::Path,
    seed: Option<u64>,
    global: Option<u64>,
) -> Result<Run, ExitCode> {
    let setup = read_any_scenario(file)?;
    // `hcasim --seed N run FILE` means what `hcasim run FILE --seed N` does.
    let seed = match (seed, global) {
        (Some(a), Some(b)) if a != b => {
            complain!("two different seeds given ({b} and {a})");
            return Err(ExitCode::from(2));
        }
        (Some(s), _) => Some(s),
        (None, global) => global,
    };
    match setup {
        scenario::Scenario::One(mut setup) => {
            if let Some(seed) = seed {
                setup.sim.seed = seed;
            }
            stack_world(&setup)
        }
        scenario::Scenario::Many(mut setup) => {
            if let Some(seed) = seed {
                setup.seed = seed;
            }
            many_world(&setup)
        }
    }
}

/// The host a command line runs (a scenario file, a random scenario or the embedded
/// default) and whether it wants JSON. `Err` is the exit code of a command that is over:
/// `serve`, `hunt`, or a refusal already reported.
fn host_for(cli: &Cli) -> Result<(Run, bool), ExitCode> {
    match &cli.command {
        Some(Command::Run {
            file, json, seed, ..
        }) => Ok((run_world(file, *seed, cli.seed)?, *json)),
        #[cfg(unix)]
        Some(Command::Serve { socket, scenario }) => {
            Err(serve(socket, scenario.as_deref(), cli.seed, cli.multipath))
        }
        Some(Command::Hunt {
            seeds,
            jobs,
            stack_every,
            json,
        }) => Err(hunt(seeds, *jobs, *stack_every, *json)),
        Some(Command::Fleet {
            file,
            seeds,
            json,
            svg,
            jobs,
            shard,
            curve,
        }) => Err(match (curve, seeds, shard) {
            (Some(points), None, None) => fleet::curve(file, points, *json, svg.as_deref(), *jobs),
            (Some(_), _, _) => {
                complain!("--curve runs one seed at each load: no --seeds or --shard");
                ExitCode::from(2)
            }
            (None, _, _) => fleet::run(
                file,
                (seeds.as_deref(), cli.seed, shard.as_deref()),
                *json,
                svg.as_deref(),
                *jobs,
            ),
        }),
        Some(Command::FleetMerge { files, json }) => Err(fleet::merge(files, *json)),
        Some(Command::Replay { file, scenario }) => Err(replay::run(file, scenario.as_deref())),
        Some(Command::Completions { shell }) => Err(generated(|out| {
            hcactl::generate::completions(Cli::command(), *shell, out)
        })),
        Some(Command::Man) => Err(generated(|out| {
            hcactl::generate::man(Cli::command(), EXIT_STATUS, out)
        })),
        None => match cli.random {
            Some(seed) => {
                let mut setup = random_setup(seed);
                if let Some(seed) = cli.seed {
                    setup.seed = seed;
                }
                let host = hcabus_lab::stack::scripted(&setup).map_err(|e| e.to_string());
                Ok((Run::One(built(&setup.name, host)?), false))
            }
            None if cli.multipath => {
                let mut setup = hcabus_lab::stack::boot_from_san_multipath();
                if let Some(seed) = cli.seed {
                    setup.seed = seed;
                }
                Ok((many_world(&setup)?, false))
            }
            None => {
                let mut setup = hcabus_lab::stack::boot_from_san();
                if let Some(seed) = cli.seed {
                    setup.sim.seed = seed;
                }
                Ok((stack_world(&setup)?, false))
            }
        },
    }
}

/// Writes what `write` generates to stdout; a closed pipe is not an error (as for `emit`).
fn generated(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match write(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            complain!("cannot write to stdout: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the report to stdout. A reader that closed it early (`| head`) has taken what it
/// wanted: that is not an error, and the run's verdict stands. Any other write error is.
fn emit(text: &str) -> Option<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => None,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => None,
        Err(e) => {
            complain!("cannot write the report: {e}");
            Some(ExitCode::from(2))
        }
    }
}
