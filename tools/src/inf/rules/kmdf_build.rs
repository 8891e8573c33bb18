//! [Manufacturer] decorations against the KMDF the driver is built for: a decoration lets the
//! package install on every build from the one it names, and KMDF 1.N is in Windows only from
//! a given build. A boot-start driver installed where its KMDF is missing does not load, and a
//! machine whose boot driver does not load does not boot (0x7B). InfVerif does not check this.

use super::Check;

/// The Windows build each KMDF version first shipped in, from Microsoft's "KMDF Version
/// History" (learn.microsoft.com/windows-hardware/drivers/wdf/kmdf-version-history, the
/// column "Drivers using this KMDF version run on"); 1.29 shipped in Windows without a WDK.
/// KMDF before 1.15 is in every Windows 10.
pub const KMDF_BUILDS: [(u32, u32, &str); 10] = [
    (15, 10240, "Windows 10 1507"),
    (17, 10586, "Windows 10 1511"),
    (19, 14393, "Windows 10 1607, Windows Server 2016"),
    (21, 15063, "Windows 10 1703"),
    (23, 16299, "Windows 10 1709"),
    (25, 17134, "Windows 10 1803"),
    (27, 17763, "Windows 10 1809, Windows Server 2019"),
    (29, 18362, "Windows 10 1903"),
    (31, 19041, "Windows 10 2004"),
    (33, 20348, "Windows Server 2022; Windows 11 21H2 is 22000"),
];

/// The first build a decoration installs on: `NT[arch].major.minor...build`; a decoration
/// without a build (or without a version) installs on everything its version allows.
pub(crate) fn first_build(decoration: &str) -> u32 {
    let fields: Vec<&str> = decoration.split('.').collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u32>().ok());
    match (number(1), number(5)) {
        (Some(major), Some(build)) if major >= 10 => build,
        (Some(major), None) if major >= 10 => 10240,
        _ => 0,
    }
}

pub(super) fn check(c: &mut Check<'_>) {
    let inf = c.inf;
    let versions = inf
        .sections
        .iter()
        .flat_map(|s| s.all("KmdfLibraryVersion"));
    let Some((line, minor)) = versions
        .filter_map(|e| {
            let minor = e.value(0).trim().strip_prefix("1.")?.parse::<u32>().ok()?;
            Some((e.line, minor))
        })
        .max_by_key(|(_, minor)| *minor)
    else {
        return; // kmdf-section says what is missing
    };
    if minor < KMDF_BUILDS[0].0 {
        return;
    }
    let Some(&(_, need, name)) = KMDF_BUILDS.iter().find(|(m, _, _)| *m == minor) else {
        let newest = KMDF_BUILDS[KMDF_BUILDS.len() - 1].0;
        return c.add(
            line,
            "kmdf-min-build",
            format!(
                "KmdfLibraryVersion = 1.{minor}: not a KMDF release infcheck knows (1.15 to \
                 1.{newest}, odd minors); add it to its table with the build it needs"
            ),
        );
    };
    for m in inf.entries("Manufacturer") {
        for d in m.values.iter().skip(1).filter(|d| !d.is_empty()) {
            let first = first_build(d);
            if first < need {
                c.add(
                    m.line,
                    "kmdf-min-build",
                    format!(
                        "decoration {d:?} installs from build {first}, but KMDF 1.{minor} is \
                         in Windows from build {need} ({name}): decorate \
                         NT<arch>.10.0...{need} or later"
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoration_installs_from_the_build_it_names() {
        for (d, build) in [
            ("NTamd64.10.0...20348", 20348),
            ("NTamd64.10.0", 10240),
            ("NTamd64", 0),
            ("NTamd64.6.3", 0),
            ("NT", 0),
        ] {
            assert_eq!(first_build(d), build, "{d}");
        }
    }

    #[test]
    fn the_table_is_ordered_by_version_and_build() {
        for w in KMDF_BUILDS.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 < w[1].1, "{w:?}");
        }
    }
}
