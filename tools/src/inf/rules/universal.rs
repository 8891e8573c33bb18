//! What a universal INF (and so a Windows Driver, InfVerif /w) may not contain: sections,
//! directives and [Manufacturer] decorations, from Microsoft's "Using a Universal INF File";
//! and that every section a directive names exists (InfVerif 1203).

use super::Check;

/// Directives a universal INF may not use, wherever they appear.
const FORBIDDEN_DIRECTIVES: [&str; 13] = [
    "BitReg",
    "DelFiles",
    "DelProperty",
    "DelReg",
    "DelService",
    "Ini2Reg",
    "LogConfig",
    "ProfileItems",
    "RegisterDlls",
    "RenFiles",
    "UnregisterDlls",
    "UpdateIniFields",
    "UpdateInis",
];

/// `DDInstall.X` sections a universal INF may not have, by their suffix.
const FORBIDDEN_SUFFIXES: [&str; 3] = ["CoInstallers", "FactDef", "LogConfigOverride"];

/// Architectures a `NT<arch>` decoration may name.
const ARCHITECTURES: [&str; 6] = ["", "x86", "amd64", "ia64", "arm", "arm64"];

/// Directives whose values name sections of this INF (Include and Needs name other INFs).
const SECTION_DIRECTIVES: [&str; 4] = ["CopyFiles", "AddReg", "AddProperty", "AddInterface"];

/// `name` as the list spells it, if the list has it (INF names ignore case).
fn listed(list: &[&'static str], name: &str) -> Option<&'static str> {
    list.iter().copied().find(|f| f.eq_ignore_ascii_case(name))
}

pub(super) fn check(c: &mut Check<'_>) {
    sections(c);
    directives(c);
    decorations(c);
}

/// The architecture of a `DefaultInstall` decoration (`DefaultInstall.NTamd64...`), if any.
fn has_architecture(name: &str) -> bool {
    let Some(first) = name.split('.').nth(1) else {
        return false;
    };
    let lower = first.to_ascii_lowercase();
    lower
        .strip_prefix("nt")
        .is_some_and(|arch| !arch.is_empty() && ARCHITECTURES.contains(&arch))
}

fn sections(c: &mut Check<'_>) {
    let inf = c.inf;
    let manufacturer = inf.section("Manufacturer").is_some();
    for s in &inf.sections {
        let parts: Vec<&str> = s.name.split('.').collect();
        let head = parts[0];
        if head.eq_ignore_ascii_case("ClassInstall32") {
            c.add(
                s.line,
                "forbidden-section",
                format!("a [{}] section (a class installer)", s.name),
            );
            continue;
        }
        if head.eq_ignore_ascii_case("DefaultInstall") {
            if !has_architecture(&s.name) {
                c.add(s.line, "forbidden-section", format!(
                    "[{}]: DefaultInstall needs an architecture decoration ([DefaultInstall.NTamd64])",
                    s.name
                ));
            }
            if manufacturer {
                c.add(
                    s.line,
                    "forbidden-section",
                    format!(
                    "[{}] beside [Manufacturer]: an INF installs devices or is primitive, not both",
                    s.name
                ),
                );
            }
            continue;
        }
        if parts.len() > 1 {
            let last = parts[parts.len() - 1];
            if let Some(f) = listed(&FORBIDDEN_SUFFIXES, last) {
                c.add(
                    s.line,
                    "forbidden-section",
                    format!("a [{}] section (DDInstall.{f})", s.name),
                );
            }
        }
    }
}

fn directives(c: &mut Check<'_>) {
    let inf = c.inf;
    for s in &inf.sections {
        // [Strings] keys are names, not directives.
        if s.name.eq_ignore_ascii_case("Strings") {
            continue;
        }
        for e in &s.entries {
            let Some(key) = e.key.as_deref() else {
                continue;
            };
            if let Some(f) = listed(&FORBIDDEN_DIRECTIVES, key) {
                c.add(
                    e.line,
                    "forbidden-directive",
                    format!("{f} in [{}]", s.name),
                );
            }
            if key.eq_ignore_ascii_case("ServiceBinary") && !e.value(0).starts_with("%13%\\") {
                c.add(
                    e.line,
                    "service-binary",
                    format!(
                        "ServiceBinary is {}: a Windows Driver runs from the driver store, %13%\\",
                        e.value(0)
                    ),
                );
            }
            let names_sections = SECTION_DIRECTIVES
                .iter()
                .any(|d| d.eq_ignore_ascii_case(key));
            if !names_sections {
                continue;
            }
            // AddInterface = {guid}, [ref], section: only its third value is a section.
            let values: Vec<&String> = if key.eq_ignore_ascii_case("AddInterface") {
                e.values.iter().skip(2).take(1).collect()
            } else {
                e.values.iter().collect()
            };
            for name in values.into_iter().filter(|v| !v.is_empty()) {
                // CopyFiles = @file copies one file directly.
                if !name.starts_with('@') && inf.section(name).is_none() {
                    c.add(
                        e.line,
                        "section-exists",
                        format!("{key} names [{name}], which does not exist"),
                    );
                }
            }
        }
    }
}

/// `NT[arch][.major[.minor[.ProductType[.SuiteMask[.build]]]]]`, and the models section it
/// names.
fn decorations(c: &mut Check<'_>) {
    let inf = c.inf;
    for m in inf.entries("Manufacturer") {
        let base = m.value(0);
        for d in m.values.iter().skip(1).filter(|d| !d.is_empty()) {
            if let Err(why) = target_os(d) {
                c.add(
                    m.line,
                    "target-os-version",
                    format!("decoration {d:?}: {why}"),
                );
            }
            let models = format!("{base}.{d}");
            if inf.section(&models).is_none() {
                c.add(
                    m.line,
                    "section-exists",
                    format!("[Manufacturer] names [{models}], which does not exist"),
                );
            }
        }
    }
}

pub(crate) fn target_os(decoration: &str) -> Result<(), String> {
    let fields: Vec<&str> = decoration.split('.').collect();
    let lower = fields[0].to_ascii_lowercase();
    let Some(arch) = lower.strip_prefix("nt") else {
        return Err("does not start with NT".into());
    };
    if !ARCHITECTURES.contains(&arch) {
        return Err(format!("unknown architecture {arch:?}"));
    }
    if fields.len() > 6 {
        return Err("more than NT[arch].major.minor.ProductType.SuiteMask.build".into());
    }
    let numeric = |f: &str| f.is_empty() || f.bytes().all(|b| b.is_ascii_digit());
    for (i, name) in [
        (1, "major version"),
        (2, "minor version"),
        (5, "build number"),
    ] {
        if let Some(f) = fields.get(i).filter(|f| !numeric(f)) {
            return Err(format!("{name} {f:?} is not a number"));
        }
    }
    for (i, name) in [(3, "ProductType"), (4, "SuiteMask")] {
        if fields.get(i).is_some_and(|f| !f.is_empty()) {
            return Err(format!("a {name} is not allowed in a universal INF"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::target_os;

    #[test]
    fn a_decoration_is_nt_arch_with_numeric_versions_and_no_product_type_or_suite_mask() {
        for ok in [
            "NTamd64",
            "NT",
            "NTamd64.10.0...16299",
            "NTarm64.10.0",
            "ntAMD64.6.3",
        ] {
            assert_eq!(target_os(ok), Ok(()), "{ok}");
        }
        for bad in [
            "NTamd64.10.0.1..16299",
            "NTamd64.10.0..0x80",
            "NTsparc",
            "Win64",
            "NTamd64.ten",
            "NTamd64.10.0...build",
            "NTamd64.10.0....1",
        ] {
            assert!(target_os(bad).is_err(), "{bad}");
        }
    }
}
