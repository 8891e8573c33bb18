//! The files a package copies: where from (SourceDisksFiles on a disk of SourceDisksNames),
//! where to (DIRID 13 only: driver package isolation), and no destination copied from two
//! different sources (InfVerif 1330).

use std::collections::BTreeMap;

use super::super::Entry;
use super::Check;

/// One file a CopyFiles directive copies.
#[derive(Debug, Clone)]
pub(super) struct Copy {
    /// The file-list entry's line (the directive's for `@file`).
    pub line: usize,
    /// The section that holds the CopyFiles directive.
    pub owner: String,
    pub dest: String,
    pub source: String,
    /// The destination DIRID; `None` when neither the list nor DefaultDestDir has one.
    pub dirid: Option<String>,
}

pub(super) fn check(c: &mut Check<'_>) -> Vec<Copy> {
    destinations(c);
    let copies = copies(c);
    for copy in copies.iter().filter(|x| x.dirid.is_none()) {
        c.add(copy.line, "dirid-13", format!(
            "{} has no DestinationDirs entry and there is no DefaultDestDir: it would go to DIRID 11",
            copy.dest
        ));
    }
    sources(c, &copies);
    conflicts(c, &copies);
    copies
}

fn destinations(c: &mut Check<'_>) {
    for e in c.inf.entries("DestinationDirs") {
        if e.value(0).trim() != "13" {
            let key = e.key.clone().unwrap_or_default();
            c.add(
                e.line,
                "dirid-13",
                format!("{key} goes to DIRID {}", e.value(0)),
            );
        }
    }
}

/// The destination DIRID of a file list (`None` for `@file`), as SetupAPI resolves it.
fn dirid_of(c: &Check<'_>, list: Option<&str>) -> Option<String> {
    let entry = |name: &str| {
        c.inf
            .entries("DestinationDirs")
            .find(|e| e.is(name))
            .map(|e| e.value(0).trim().to_string())
    };
    list.and_then(entry).or_else(|| entry("DefaultDestDir"))
}

/// A file-list entry: `destination[,source[,temporary[,flags]]]`.
fn names_of(f: &Entry) -> (String, String) {
    let (dest, source) = match &f.key {
        Some(k) => (k.trim().to_string(), f.value(0).trim().to_string()),
        None => (f.value(0).trim().to_string(), f.value(1).trim().to_string()),
    };
    let source = if source.is_empty() {
        dest.clone()
    } else {
        source
    };
    (dest, source)
}

fn copies(c: &Check<'_>) -> Vec<Copy> {
    let mut out = Vec::new();
    for s in &c.inf.sections {
        for e in s.all("CopyFiles") {
            for v in e.values.iter().filter(|v| !v.is_empty()) {
                if let Some(file) = v.strip_prefix('@') {
                    out.push(Copy {
                        line: e.line,
                        owner: s.name.clone(),
                        dest: file.trim().to_string(),
                        source: file.trim().to_string(),
                        dirid: dirid_of(c, None),
                    });
                } else if let Some(list) = c.inf.section(v) {
                    let dirid = dirid_of(c, Some(v));
                    out.extend(list.entries.iter().map(|f| {
                        let (dest, source) = names_of(f);
                        Copy {
                            line: f.line,
                            owner: s.name.clone(),
                            dest,
                            source,
                            dirid: dirid.clone(),
                        }
                    }));
                }
            }
        }
    }
    out
}

fn is_decorated(name: &str, base: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let base = base.to_ascii_lowercase();
    lower == base
        || lower
            .strip_prefix(&base)
            .is_some_and(|r| r.starts_with('.'))
}

fn sources(c: &mut Check<'_>, copies: &[Copy]) {
    let inf = c.inf;
    let disks: Vec<String> = inf
        .sections
        .iter()
        .filter(|s| is_decorated(&s.name, "SourceDisksNames"))
        .flat_map(|s| s.entries.iter())
        .filter_map(|e| e.key.as_ref().map(|k| k.trim().to_string()))
        .collect();
    let mut listed: Vec<(usize, String)> = Vec::new();
    for s in inf
        .sections
        .iter()
        .filter(|s| is_decorated(&s.name, "SourceDisksFiles"))
    {
        let mut here: Vec<String> = Vec::new();
        for e in &s.entries {
            let Some(file) = e.key.as_ref().map(|k| k.trim().to_string()) else {
                continue;
            };
            if !disks.iter().any(|d| d == e.value(0).trim()) {
                c.add(
                    e.line,
                    "source-disks",
                    format!(
                        "{file} is on disk {:?}, not in [SourceDisksNames]",
                        e.value(0)
                    ),
                );
            }
            let lower = file.to_ascii_lowercase();
            if here.contains(&lower) {
                c.add(
                    e.line,
                    "source-disks",
                    format!("{file} is listed twice in [{}]", s.name),
                );
            }
            here.push(lower.clone());
            listed.push((e.line, lower));
        }
    }
    for copy in copies {
        if !listed
            .iter()
            .any(|(_, f)| *f == copy.source.to_ascii_lowercase())
        {
            c.add(
                copy.line,
                "source-disks",
                format!("{} is copied but not in [SourceDisksFiles]", copy.source),
            );
        }
    }
    for (line, file) in &listed {
        if !copies
            .iter()
            .any(|x| x.source.to_ascii_lowercase() == *file)
        {
            c.add(
                *line,
                "source-disks",
                format!("{file} is in [SourceDisksFiles] but nothing copies it"),
            );
        }
    }
}

fn conflicts(c: &mut Check<'_>, copies: &[Copy]) {
    let mut seen: BTreeMap<(String, String), (usize, String)> = BTreeMap::new();
    for copy in copies {
        let at = (
            copy.dirid.clone().unwrap_or_default(),
            copy.dest.to_ascii_lowercase(),
        );
        let source = copy.source.to_ascii_lowercase();
        match seen.get(&at) {
            Some((first, before)) if *before != source => c.add(
                copy.line,
                "copy-conflict",
                format!(
                    "{} is copied from {} here and from {before} at line {first} (InfVerif 1330)",
                    copy.dest, copy.source
                ),
            ),
            Some(_) => {}
            None => {
                seen.insert(at, (copy.line, source));
            }
        }
    }
}
