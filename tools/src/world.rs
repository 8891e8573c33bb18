//! The readable report of a host of several adapters: a lane group per adapter (each with
//! its own reset table and clients), then the I/O of every disk, multipath disks with a
//! line per path.

use std::fmt::Write as _;

use hcabus::bus::ClientReport;
use hcabus::sim::MultiHost;
use ibal::disk::SrpClient;

use crate::timeline::{disk_line, io_lines, lanes, net_line, us, uverbs_line};

/// Renders the run: header, one lane group per adapter, the workload.
pub fn render(world: &MultiHost) -> String {
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

/// The I/O and network summary over every adapter.
pub fn workload(world: &MultiHost) -> String {
    let mut out = String::new();
    let several = world.hosts().len() > 1;
    let singles: Vec<(String, &SrpClient)> = world
        .hosts()
        .iter()
        .flat_map(|(hca, h)| {
            h.agents_of::<SrpClient>()
                .filter(|d| d.multipath().is_none())
                .map(move |d| match several {
                    true => (format!("{}@{hca}", d.name()), d),
                    false => (d.name().to_string(), d),
                })
        })
        .collect();
    let multipath = crate::report::multipath(world);
    if !singles.is_empty() || !multipath.is_empty() {
        io_lines(&ibal::stack::io_stats_all(world), &mut out);
    }
    for (label, d) in &singles {
        disk_line(label, d, &mut out);
    }
    for m in &multipath {
        let _ = writeln!(
            out,
            "    {:<10} max latency {}, no path for {}, {} held at most; paths:",
            m.name,
            us(Some(m.max_latency_us)),
            us(Some(m.no_path_us)),
            m.max_held
        );
        for p in &m.paths {
            let _ = writeln!(
                out,
                "      {:<8} {:>6} done, {} failover(s), {} commands moved off it, down {}",
                p.hca,
                p.ios,
                p.failovers,
                p.moved,
                us(Some(p.down_us))
            );
        }
    }
    let has_net = world
        .hosts()
        .iter()
        .any(|(_, h)| h.agents_of::<ibal::ipoib::IpoibClient>().next().is_some());
    if has_net {
        net_line(&ibal::stack::net_stats_all(world), &mut out);
    }
    for (_, h) in world.hosts() {
        uverbs_line(h, &mut out);
    }
    out
}
