//! The registry: AddReg writes only under HKR (driver package isolation), and no value is
//! written twice with different data for one key (InfVerif 1331, 1332 in a service's).

use std::collections::BTreeMap;

use super::super::Section;
use super::Check;

pub(super) fn check(c: &mut Check<'_>) {
    let inf = c.inf;
    // Each add-registry section once, however many directives name it.
    let mut every: Vec<&Section> = Vec::new();
    for owner in &inf.sections {
        let targets: Vec<&Section> = owner
            .all("AddReg")
            .flat_map(|e| e.values.iter())
            .filter(|v| !v.is_empty())
            .filter_map(|name| inf.section(name))
            .collect();
        for t in &targets {
            if !every.iter().any(|x| std::ptr::eq(*x, *t)) {
                every.push(t);
            }
        }
        conflicts(c, owner, &targets);
    }
    hkr_only(c, &every);
}

fn hkr_only(c: &mut Check<'_>, targets: &[&Section]) {
    for section in targets {
        for e in &section.entries {
            let root = e.key.as_deref().unwrap_or(e.value(0));
            let root = root.split(',').next().unwrap_or("").trim();
            if !root.eq_ignore_ascii_case("HKR") {
                c.add(
                    e.line,
                    "registry-hkr",
                    format!("[{}] writes under {root}", section.name),
                );
            }
        }
    }
}

/// Every value the AddReg sections of `owner` write lands under one key (the device's, its
/// software key, a service's): written twice, it must be written alike.
fn conflicts(c: &mut Check<'_>, owner: &Section, targets: &[&Section]) {
    let mut seen: BTreeMap<(String, String, String), (usize, Vec<String>)> = BTreeMap::new();
    let service = owner.get("ServiceBinary").is_some() || owner.get("ServiceType").is_some();
    for section in targets {
        for e in section.entries.iter().filter(|e| e.key.is_none()) {
            let lower = |i: usize| e.value(i).trim().to_ascii_lowercase();
            let at = (lower(0), lower(1), lower(2));
            let data: Vec<String> = e
                .values
                .iter()
                .skip(3)
                .map(|v| v.trim().to_string())
                .collect();
            match seen.get(&at) {
                Some((first, before)) if *before != data => {
                    let code = if service { "1332" } else { "1331" };
                    c.add(e.line, "registry-conflict", format!(
                        "{},{},{} is written again with other data (first at line {first}; InfVerif {code})",
                        e.value(0), e.value(1), e.value(2)
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(at, (e.line, data));
                }
            }
        }
    }
}
