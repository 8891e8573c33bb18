//! The readable report of a host of several adapters: a lane group per adapter (each with
//! its own reset table and clients), then the I/O of every disk, multipath disks with a
//! line per path.

use std::fmt::Write as _;

use hcabus::bus::ClientReport;
use hcabus_lab::stack::MultiNode;
use ibal::disk::SrpClient;
use ibal::multipath::PathEventKind;

use crate::timeline::{disk_line, io_lines, lanes, net_line, us, uverbs_line};

/// Renders the run: header, one lane group per adapter, the workload.
pub fn render(world: &MultiNode) -> String {
    let names: Vec<&str> = world.hosts().iter().map(|(n, _)| n.as_str()).collect();
    let mut out = format!(
        "hcasim: scenario '{}', seed {}, {} ms of virtual time, {} adapters ({})\n",
        world.name(),
        world.seed(),
        world.end().as_ms(),
        names.len(),
        names.join(", ")
    );
    for (name, host) in world.hosts() {
        let _ = writeln!(
            out,
            "\n== adapter {name}: {} clients ==\n",
            host.agents().len()
        );
        out.push_str(&lanes(host));
    }
    out.push_str(&paths_timeline(world));
    if world.livelocks() > 0 {
        let _ = writeln!(
            out,
            "LIVELOCK: the adapters woke each other without time moving {} times",
            world.livelocks()
        );
    }
    out.push('\n');
    out.push_str(&workload(world));
    out
}

/// A disk's path timeout as the report says it.
fn timeout_words(t: ibal::disk::PathTimeout) -> String {
    use ibal::disk::PathTimeout;
    match t {
        PathTimeout::Off => "off".into(),
        PathTimeout::Fixed(t) => t.to_string(),
        PathTimeout::Adaptive { min, max } => format!("adaptive {min} to {max}"),
        PathTimeout::Polled(r) => match hcabus_lab::baselines::checker_interval(t) {
            Some(interval) => format!("a checker every {interval}"),
            None => format!("{} every {}", r.name, r.timeout),
        },
    }
}

/// What happened to each multipath disk's paths, in time order: when each went down and
/// came back, the commands it moved at a failover, the commands fast path failover gave up.
pub fn paths_timeline(world: &MultiNode) -> String {
    let mut out = String::new();
    for (mp, paths) in hcabus_lab::stack::multipath_disks(world) {
        let mp = mp.lock();
        let names: Vec<&str> = paths.iter().map(|(hca, _)| *hca).collect();
        let groups = mp.config().path_groups;
        let grouped = (0..names.len()).any(|i| mp.path_group(i) != 0);
        let groups = if grouped {
            let each: Vec<String> = (0..names.len())
                .map(|i| mp.path_group(i).to_string())
                .collect();
            format!(
                ", groups {} (failback {})",
                each.join(", "),
                groups.failback
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "\n== multipath disk {}: paths {}{groups}, path timeout {} ==\n",
            mp.name(),
            names.join(", "),
            timeout_words(mp.config().path_timeout)
        );
        let _ = writeln!(out, "   time ms | path     | what");
        let _ = writeln!(out, "{}", "-".repeat(80));
        let (events, dropped) = mp.path_events();
        if dropped > 0 {
            let _ = writeln!(
                out,
                "           |          | ({dropped} older events not kept)"
            );
        }
        for e in events {
            let path = names.get(e.path).copied().unwrap_or("?");
            let what = match e.kind {
                PathEventKind::Up => "up: logged in, serving".to_string(),
                PathEventKind::Down => "down: no new I/O".to_string(),
                PathEventKind::Moved { n } => format!("{n} command(s) moved to the other paths"),
                PathEventKind::GaveUp { n } => format!(
                    "{n} command(s) past the path's timeout and overtaken on another path: \
                     given up there, the target told to abort; the path is probed"
                ),
                PathEventKind::Serves => format!(
                    "{} prompt answers in a row: serving again",
                    ibal::multipath::PROBES_TO_SERVE
                ),
                PathEventKind::Dead => "its device failed or left".to_string(),
            };
            let t = e.at.as_us();
            let _ = writeln!(
                out,
                "{:>10} | {path:<8} | {what}",
                format!("{}.{:03}", t / 1000, t % 1000)
            );
        }
    }
    out
}

/// The I/O and network summary over every adapter.
pub fn workload(world: &MultiNode) -> String {
    let mut out = String::new();
    let several = world.hosts().len() > 1;
    let singles: Vec<(String, &SrpClient)> = world
        .hosts()
        .iter()
        .flat_map(|(hca, h)| {
            hcabus_lab::stack::disks(h)
                .filter(|d| d.multipath().is_none())
                .map(move |d| match several {
                    true => (format!("{}@{hca}", d.name()), d),
                    false => (d.name().to_string(), d),
                })
        })
        .collect();
    let multipath = crate::report::multipath(world);
    if !singles.is_empty() || !multipath.is_empty() {
        io_lines(&hcabus_lab::stack::io_stats_all(world), &mut out);
    }
    for (label, d) in &singles {
        disk_line(label, d, &mut out);
    }
    for m in &multipath {
        let _ =
            writeln!(
            out,
            "    {:<10} max latency {} (p50 {}, p99 {}), no path for {}, {} held at most, path \
             timeout {}; paths:",
            m.name,
            us(Some(m.max_latency_us)),
            us(Some(m.p50_latency_us)),
            us(Some(m.p99_latency_us)),
            us(Some(m.no_path_us)),
            m.max_held,
            match (m.path_io_timeout_ms, m.path_timeout_min_ms, m.path_timeout_max_ms) {
                (Some(ms), _, _) => us(Some(ms * 1000)),
                (None, Some(min), Some(max)) => format!("adaptive {min}-{max} ms"),
                _ => m.path_timeout.into(),
            }
        );
        for p in &m.paths {
            let _ = writeln!(
                out,
                "      {:<8} {:>6} done, {} failover(s), {} commands moved off it ({} given up \
                 slow, {} late answers discarded), down {}",
                p.hca,
                p.ios,
                p.failovers,
                p.moved,
                p.given_up,
                p.late_discarded,
                us(Some(p.down_us))
            );
        }
    }
    let has_net = world
        .hosts()
        .iter()
        .any(|(_, h)| hcabus_lab::stack::nets(h).next().is_some());
    if has_net {
        net_line(&hcabus_lab::stack::net_stats_all(world), &mut out);
    }
    for (_, h) in world.hosts() {
        uverbs_line(h, &mut out);
    }
    out
}
