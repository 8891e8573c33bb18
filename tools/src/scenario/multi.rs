//! Scenarios of several adapters (docs/design.md §9 `[[hcas]]`): each client and event names its
//! adapter with `hca`, a multipath disk its adapters with `paths`; each adapter then gets
//! the stack of one, checked as one is, with every refusal keyed by the file's own index.

use hcabus_lab::stack::{AdapterSetup, MultiSetup, MultipathSpec, PathConfig};

use super::*;

/// Most adapters in one host.
const MAX_ADAPTERS: usize = 8;

/// Where the file's clients and events go.
struct Placement<'a> {
    clients: Vec<Vec<(usize, &'a Client)>>,
    events: Vec<Vec<(usize, &'a EventKeys)>>,
    /// Each multipath disk: its file index and its adapters, in the order of its `paths`.
    multipath: Vec<(usize, Vec<usize>)>,
}

pub(super) fn build(file: File) -> Result<MultiSetup, ScenarioError> {
    check_run(&file)?;
    if file.hca.is_some() {
        return Err(err(
            "hca",
            "give either [hca] (one adapter) or [[hcas]] (several), not both",
        ));
    }
    if file.hcas.len() > MAX_ADAPTERS {
        return Err(err("hcas", format!("at most {MAX_ADAPTERS} adapters")));
    }
    let names = adapter_names(&file)?;
    let hcas = file
        .hcas
        .iter()
        .enumerate()
        .map(|(i, h)| hca_config(h, &format!("hcas[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let policy = policy(&file.policy)?;
    let placed = place(&file, &names)?;
    // One LUN and target per disk over the whole host, numbered in file order, so that
    // every path of a multipath disk reaches the same one.
    let disk_ids: Vec<(usize, u16)> = file
        .clients
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c.kind.as_str(), "srp" | "bootdisk"))
        .enumerate()
        .map(|(n, (i, _))| (i, n as u16))
        .collect();
    let disk_names: Vec<&str> = disk_ids
        .iter()
        .map(|(i, _)| file.clients[*i].name.as_str())
        .collect();
    let mut disks: Vec<Option<MultipathSpec>> = std::vec![None; placed.multipath.len()];
    let mut adapters = Vec::with_capacity(names.len());
    for (a, name) in names.iter().enumerate() {
        let at = format!("hcas[{a}]");
        let route = super::paths::route(&file.hcas[a], &at)?;
        super::paths::check_disks(&file.hcas[a], &at, &disk_names)?;
        let clients = Clients::build(&placed.clients[a], (hcas[a].ports, route))?;
        let with_ibal = clients.with_ibal();
        let file_index = clients.file_index;
        let mut specs = clients.specs;
        for (spec, fi) in specs.iter_mut().zip(&file_index) {
            let ClientSpec::Disk { name, config } = spec else {
                continue;
            };
            if let Some(&(_, id)) = disk_ids.iter().find(|(i, _)| i == fi) {
                config.initiator.target_lid = 0x100 + id;
                config.initiator.lun_id = u32::from(id);
            }
            config.route =
                super::paths::route_for(&file.hcas[a], &at, name)?.with_login(config.route.login());
            let Some(d) = placed.multipath.iter().position(|(i, _)| i == fi) else {
                continue;
            };
            let paths = &placed.multipath[d].1;
            let path = paths.iter().position(|&x| x == a).unwrap_or(0);
            disks[d].get_or_insert_with(|| MultipathSpec {
                name: name.clone(),
                config: config.initiator,
                load: config.load,
                paths: paths.len(),
            });
            *spec = ClientSpec::DiskPath {
                name: name.clone(),
                config: PathConfig {
                    // Waiting I/O waits in the disk's queue, not on a path.
                    initiator: DiskConfig {
                        hold_capacity: 0,
                        ..config.initiator
                    },
                    route: config.route,
                    disk: d,
                    path,
                },
            };
        }
        let faults = faults(&file, &placed.events[a], &specs, with_ibal, hcas[a].ports)?;
        let stack = stack(&file, hcas[a], policy, faults, with_ibal, specs);
        budget(&stack, &file_index)?;
        adapters.push(AdapterSetup {
            name: name.to_string(),
            stack,
        });
    }
    Ok(MultiSetup {
        name: file.name.clone(),
        seed: file.seed,
        adapters,
        disks: disks.into_iter().flatten().collect(),
    })
}

/// The adapters' names: present, unique.
fn adapter_names(file: &File) -> Result<Vec<&str>, ScenarioError> {
    let mut names: Vec<&str> = Vec::with_capacity(file.hcas.len());
    for (i, h) in file.hcas.iter().enumerate() {
        let name = h.name.as_deref().unwrap_or_default();
        // The name is also the adapter's device name (`hcactl --device NAME`).
        if !hcactl::device::valid_name(name) {
            return Err(err(format!("hcas[{i}].name"), hcactl::device::NAME_RULE));
        }
        if names.contains(&name) {
            return Err(err(
                format!("hcas[{i}].name"),
                format!("two adapters are called {name:?}"),
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// The adapter `name` names, for the key `key`.
fn adapter(names: &[&str], name: &str, key: String) -> Result<usize, ScenarioError> {
    names.iter().position(|n| *n == name).ok_or_else(|| {
        err(
            key,
            format!("no adapter called {name:?}; there are {}", names.join(", ")),
        )
    })
}

/// Puts each client and event on its adapter(s).
fn place<'a>(file: &'a File, names: &[&str]) -> Result<Placement<'a>, ScenarioError> {
    let n = names.len();
    let mut placed = Placement {
        clients: std::vec![Vec::new(); n],
        events: std::vec![Vec::new(); n],
        multipath: Vec::new(),
    };
    let only = (n == 1).then_some(0);
    let list = names.join(", ");
    for (i, c) in file.clients.iter().enumerate() {
        let at = |key: &str| format!("clients[{i}].{key}");
        if file.clients[..i].iter().any(|o| o.name == c.name) {
            return Err(err(
                at("name"),
                format!("two clients are called {:?}", c.name),
            ));
        }
        match (&c.hca, &c.paths) {
            (Some(_), Some(_)) => {
                return Err(err(
                    at("paths"),
                    "a disk with paths takes no `hca`: its paths name its adapters",
                ))
            }
            (None, Some(paths)) => {
                if !(2..=ibal::multipath::MAX_PATHS).contains(&paths.len()) {
                    return Err(err(
                        at("paths"),
                        format!(
                            "2 to {} adapters (one path each)",
                            ibal::multipath::MAX_PATHS
                        ),
                    ));
                }
                let mut on = Vec::with_capacity(paths.len());
                for (k, p) in paths.iter().enumerate() {
                    let a = adapter(names, p, format!("clients[{i}].paths[{k}]"))?;
                    if on.contains(&a) {
                        return Err(err(
                            format!("clients[{i}].paths[{k}]"),
                            format!("{p:?} twice: one path per adapter"),
                        ));
                    }
                    on.push(a);
                    placed.clients[a].push((i, c));
                }
                placed.multipath.push((i, on));
            }
            (Some(h), None) => placed.clients[adapter(names, h, at("hca"))?].push((i, c)),
            (None, None) => match only {
                Some(a) => placed.clients[a].push((i, c)),
                None => {
                    return Err(err(
                        at("hca"),
                        format!("with several adapters a client names its own: one of {list}"),
                    ))
                }
            },
        }
    }
    for (i, e) in file.events.iter().enumerate() {
        let a = match (&e.hca, only) {
            (Some(h), _) => adapter(names, h, format!("events[{i}].hca"))?,
            (None, Some(a)) => a,
            (None, None) => {
                return Err(err(
                    format!("events[{i}].hca"),
                    format!(
                        "with several adapters an event names the one it strikes: one of {list}"
                    ),
                ))
            }
        };
        placed.events[a].push((i, e));
    }
    Ok(placed)
}
