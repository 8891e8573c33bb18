//! [Version]: the signature, the class, the provider, the catalog, PnpLockdown and DriverVer
//! (wherever it appears: [Version] and any DDInstall section).

use super::Check;

const SYSTEM_CLASS_GUID: &str = "{4D36E97D-E325-11CE-BFC1-08002BE10318}";

pub(super) fn check(c: &mut Check<'_>) {
    let Some(v) = c.inf.section("Version") else {
        c.add(1, "version-signature", "no [Version] section".into());
        return;
    };
    let line = v.line;
    match v.get("Signature") {
        Some(e) if e.value(0).eq_ignore_ascii_case("$WINDOWS NT$") => {}
        Some(e) => c.add(
            e.line,
            "version-signature",
            format!("Signature is {:?}", e.value(0)),
        ),
        None => c.add(line, "version-signature", "no Signature".into()),
    }
    let class = v.get("Class").map(|e| (e.line, e.value(0).to_string()));
    let guid = v.get("ClassGuid").map(|e| (e.line, e.value(0).to_string()));
    match (class, guid) {
        (Some((_, cl)), Some((_, g)))
            if cl.eq_ignore_ascii_case("System") && g.eq_ignore_ascii_case(SYSTEM_CLASS_GUID) => {}
        (cl, g) => {
            let at = cl.as_ref().or(g.as_ref()).map_or(line, |x| x.0);
            c.add(at, "class-system", format!(
                "Class {:?}, ClassGuid {:?}: a boot bus driver is Class=System, {SYSTEM_CLASS_GUID}",
                cl.map(|x| x.1), g.map(|x| x.1)
            ));
        }
    }
    for (key, rule) in [
        ("Provider", "version-provider"),
        ("CatalogFile", "catalog-file"),
        ("DriverVer", "driver-ver"),
    ] {
        // CatalogFile may also be given per platform (CatalogFile.NTamd64).
        let given = v.entries.iter().any(|e| {
            let named = e.is(key)
                || (key == "CatalogFile"
                    && e.key
                        .as_deref()
                        .is_some_and(|k| k.to_ascii_lowercase().starts_with("catalogfile.nt")));
            named && !e.value(0).is_empty()
        });
        if !given {
            c.add(line, rule, format!("[Version] has no {key}"));
        }
    }
    if let Some(p) = v.get("Provider") {
        if p.value(0).trim().eq_ignore_ascii_case("Microsoft") {
            c.add(
                p.line,
                "version-provider",
                "Provider is Microsoft: a third-party package names itself".into(),
            );
        }
    }
    match v.get("PnpLockdown") {
        Some(e) if e.value(0) == "1" => {}
        Some(e) => c.add(
            e.line,
            "pnp-lockdown",
            format!("PnpLockdown = {}", e.value(0)),
        ),
        None => c.add(line, "pnp-lockdown", "no PnpLockdown = 1".into()),
    }
    driver_vers(c);
}

/// Every DriverVer of the INF, in [Version] or a DDInstall section, in full.
fn driver_vers(c: &mut Check<'_>) {
    let inf = c.inf;
    for s in &inf.sections {
        for e in s.all("DriverVer") {
            if e.value(0).is_empty() && s.name.eq_ignore_ascii_case("Version") {
                continue; // said above: [Version] has no DriverVer
            }
            if let Err(why) = driver_ver(e.value(0), e.value(1)) {
                c.add(
                    e.line,
                    "driver-ver",
                    format!(
                        "DriverVer = {},{} in [{}]: {why}",
                        e.value(0),
                        e.value(1),
                        s.name
                    ),
                );
            }
        }
    }
}

/// `mm/dd/yyyy,w.x.y.z` as the INF DriverVer directive defines it: two-digit month and day,
/// four-digit year, `/` or `-` between them, a date that exists; four version fields, each a
/// decimal integer below 65535 (InfVerif 1217), and not 0.0.0.0.
pub(crate) fn driver_ver(date: &str, version: &str) -> Result<(), String> {
    check_date(date.trim())?;
    let version = version.trim();
    if version.is_empty() {
        return Err("no version: w.x.y.z follows the date (stampinf sets it)".into());
    }
    let fields: Vec<&str> = version.split('.').collect();
    if fields.len() != 4 {
        return Err(format!(
            "version {version:?} has {} field(s): it is w.x.y.z",
            fields.len()
        ));
    }
    let mut all_zero = true;
    for f in &fields {
        let ok_digits = !f.is_empty() && f.len() <= 5 && f.bytes().all(|b| b.is_ascii_digit());
        let value: u32 = if ok_digits {
            f.parse().unwrap_or(u32::MAX)
        } else {
            u32::MAX
        };
        if value >= 65_535 {
            return Err(format!(
                "version field {f:?} of {version:?} is not a decimal integer below 65535"
            ));
        }
        all_zero &= value == 0;
    }
    if all_zero {
        return Err("version 0.0.0.0 is not valid".into());
    }
    Ok(())
}

fn check_date(date: &str) -> Result<(), String> {
    let sep = if date.contains('-') { '-' } else { '/' };
    let parts: Vec<&str> = date.split(sep).collect();
    let shaped = parts.len() == 3
        && [2, 2, 4]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.bytes().all(|b| b.is_ascii_digit()));
    if !shaped {
        return Err(format!(
            "date {date:?} is not mm/dd/yyyy (two-digit month and day, four-digit year, one separator)"
        ));
    }
    let num = |p: &str| p.parse::<u32>().unwrap_or(0);
    let (month, day, year) = (num(parts[0]), num(parts[1]), num(parts[2]));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(format!("date {date:?}: no month {month}")),
    };
    if day == 0 || day > days || year == 0 {
        return Err(format!("date {date:?} does not exist"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::driver_ver;

    #[test]
    fn driver_ver_takes_the_directive_format_and_nothing_else() {
        for (date, version) in [
            ("01/01/2026", "0.1.0.0"),
            ("02-29-2024", "65534.0.0.1"),
            ("12/31/1999", "5.00.2136.1"),
        ] {
            assert_eq!(driver_ver(date, version), Ok(()), "{date},{version}");
        }
        for (date, version) in [
            ("01/01/2026", "1.4.1"),
            ("01/01/2026", "1.2.3.4.5"),
            ("01/01/2026", "1.2.3.65535"),
            ("01/01/2026", "1.2.3.-1"),
            ("01/01/2026", "1.2.3.x"),
            ("01/01/2026", "1..3.4"),
            ("01/01/2026", "0.0.0.0"),
            ("01/01/2026", ""),
            ("1/1/2026", "1.0.0.0"),
            ("01/01/26", "1.0.0.0"),
            ("2026/01/01", "1.0.0.0"),
            ("13/01/2026", "1.0.0.0"),
            ("02/29/2025", "1.0.0.0"),
            ("04/31/2026", "1.0.0.0"),
            ("01/00/2026", "1.0.0.0"),
            ("01/01-2026", "1.0.0.0"),
        ] {
            assert!(driver_ver(date, version).is_err(), "{date},{version}");
        }
    }
}
