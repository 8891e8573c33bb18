//! The SVG timeline read back as XML: the hardware attempts of a reset that retries and
//! falls back to a function-level reset, a storm shown whole, captions with outcomes, a
//! legend that names every colour used, round axis ticks and readable tooltips.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Where the lanes run across the picture (`tools/src/svg.rs`).
const LEFT: f64 = 150.0;
const WIDTH: f64 = 1100.0;

/// The SVG and the JSON report of one scenario.
fn draw(file: &str) -> (String, Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios")
        .join(file);
    let svg = std::env::temp_dir().join(format!("hcasim-svg-{file}-{}.svg", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_hcasim"))
        .args(["run", path.to_str().expect("utf-8"), "--json", "--timeline"])
        .arg(&svg)
        .output()
        .expect("hcasim runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).expect("written");
    let _ = std::fs::remove_file(&svg);
    (
        text,
        serde_json::from_slice(&out.stdout).expect("a JSON report"),
    )
}

fn class<'a>(doc: &'a roxmltree::Document<'a>, name: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some(name))
        .collect()
}

fn text_of(n: roxmltree::Node<'_, '_>, tag: &str) -> String {
    n.descendants()
        .filter(|c| c.has_tag_name(tag))
        .filter_map(|c| c.text())
        .collect::<Vec<_>>()
        .join(" ")
}

fn num(n: roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    n.attribute(attr)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{attr} of {n:?}"))
}

/// What every picture must be: a legend for each colour it uses, round ticks, and tooltips
/// in ms or s rather than thousands of microseconds.
fn common(doc: &roxmltree::Document<'_>, file: &str) {
    let legend: Vec<String> = class(doc, "legend")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    for want in [
        "failed",
        "RESET",
        "RESET_FAILED",
        "DEVICE_FATAL",
        "fault",
        "hardware reset (ticks: soft n, FLR)",
    ] {
        assert!(
            legend.iter().any(|l| l == want),
            "{file}: no {want:?} in the legend {legend:?}"
        );
    }
    let bands: Vec<&str> = class(doc, "phase")
        .iter()
        .filter_map(|n| n.attribute("fill"))
        .collect();
    let resets: Vec<&str> = class(doc, "marker")
        .iter()
        .filter(|n| text_of(**n, "title").starts_with("RESET:"))
        .filter_map(|n| n.attribute("fill"))
        .collect();
    assert!(!resets.is_empty(), "{file}: RESET markers");
    assert!(
        resets.iter().all(|c| !bands.contains(c)),
        "{file}: RESET shares a band's colour"
    );
    let ticks: Vec<String> = class(doc, "tick")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    assert!(ticks.len() >= 3, "{file}: {ticks:?}");
    let values: Vec<f64> = ticks
        .iter()
        .map(|t| {
            t.trim_end_matches(" ms")
                .parse()
                .unwrap_or_else(|_| panic!("{file}: tick {t:?}"))
        })
        .collect();
    let step = values[1] - values[0];
    let mantissa = step / 10f64.powf(step.log10().floor());
    assert!(
        [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6),
        "{file}: a step of {step} ms"
    );
    assert!(
        values
            .iter()
            .all(|v| (v / step - (v / step).round()).abs() < 1e-6),
        "{file}: {ticks:?}"
    );
    for title in doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
    {
        let raw = title.split_whitespace().collect::<Vec<_>>();
        let long_us = raw.windows(2).any(|w| w[1] == "us" && w[0].len() > 3);
        assert!(!long_us, "{file}: a tooltip in raw microseconds: {title:?}");
    }
    for m in class(doc, "marker") {
        let x = m
            .attribute("cx")
            .map_or_else(|| num(m, "x") + 4.0, |v| v.parse().expect("cx"));
        assert!(
            x > LEFT && x < LEFT + WIDTH - 1.0,
            "{file}: a marker at the edge {m:?}"
        );
    }
}

#[test]
fn a_reset_that_retries_shows_each_attempt_and_the_function_level_reset() {
    let (svg, report) = draw("device-never-returns.toml");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    common(&doc, "device-never-returns");
    let attempts: Vec<String> = class(&doc, "attempt")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    let soft = report["resets"][0]["soft_attempts"]
        .as_u64()
        .expect("soft_attempts");
    assert!(soft >= 2, "the scenario retries: {soft}");
    let mut want: Vec<String> = (1..=soft).map(|n| format!("soft {n}")).collect();
    want.push("FLR".into());
    assert_eq!(attempts, want);
    let captions: Vec<String> = class(&doc, "caption")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    assert_eq!(captions, ["e1 catastrophic \u{2192} AutoRestartExpired"]);
}

#[test]
fn a_storm_is_drawn_whole_with_every_throttled_request() {
    let (svg, report) = draw("storm.toml");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    common(&doc, "storm");
    let throttled = class(&doc, "marker")
        .iter()
        .filter(|n| text_of(**n, "title").starts_with("THROTTLED"))
        .count();
    assert!(throttled >= 4, "every throttled request: {throttled}");
    let captions: Vec<String> = class(&doc, "caption")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    let resets = report["resets"].as_array().expect("resets").len();
    assert_eq!(captions.len(), resets, "{captions:?}");
    assert!(
        captions.iter().all(|c| c.ends_with("\u{2192} Restored")),
        "{captions:?}"
    );
}

#[test]
fn a_removal_is_captioned_as_one_and_device_fatal_is_marked() {
    let (svg, _) = draw("surprise-removal-mid-reset.toml");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    common(&doc, "surprise-removal-mid-reset");
    let captions: Vec<String> = class(&doc, "caption")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    assert_eq!(captions, ["e1 catastrophic \u{2192} Removed"]);
    let fatal = class(&doc, "marker")
        .iter()
        .filter(|n| text_of(**n, "title").starts_with("DEVICE_FATAL"))
        .count();
    assert!(fatal > 0);
}

/// Each disk's I/O lane of `doc`: its name and the lane's element.
fn io_lanes<'a>(doc: &'a roxmltree::Document<'a>) -> Vec<(String, roxmltree::Node<'a, 'a>)> {
    class(doc, "io-lane")
        .into_iter()
        .map(|n| {
            let name = n
                .children()
                .find(|c| c.has_tag_name("text"))
                .and_then(|c| c.text())
                .unwrap_or_default()
                .to_string();
            (name, n)
        })
        .collect()
}

fn in_class<'a>(n: roxmltree::Node<'a, 'a>, name: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    n.descendants()
        .filter(|c| c.attribute("class") == Some(name))
        .collect()
}

#[test]
fn io_that_piles_up_between_the_fault_and_its_detection_shows_in_each_disks_lane() {
    let (svg, report) = draw("default-boot-from-san.toml");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    common(&doc, "default-boot-from-san");
    let lanes = io_lanes(&doc);
    let names: Vec<&str> = lanes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["I/O bootdisk", "I/O data-lun"]);
    let fault_x = num(class(&doc, "fault")[0].first_child().expect("line"), "x1");
    let reset_x = class(&doc, "marker")
        .iter()
        .filter(|n| text_of(**n, "title").starts_with("RESET:"))
        .map(|n| num(*n, "x") + 4.0)
        .fold(f64::MAX, f64::min);
    assert!(
        fault_x + 50.0 < reset_x,
        "detection comes well after the fault"
    );
    for (name, lane) in &lanes {
        // Nothing completes from a little after the fault until the reset is under way.
        let done_between = in_class(*lane, "io-done")
            .iter()
            .filter(|r| num(**r, "x") > fault_x + 5.0 && num(**r, "x") < reset_x)
            .count();
        assert_eq!(
            done_between, 0,
            "{name}: I/O completed while the HCA was dead"
        );
        // The columns there say the queue held I/O and none finished.
        let piled: Vec<String> = in_class(*lane, "io-column")
            .iter()
            .filter(|c| num(**c, "x") > fault_x + 5.0 && num(**c, "x") < reset_x)
            .map(|c| text_of(*c, "title"))
            .collect();
        assert!(!piled.is_empty(), "{name}: columns over the pile-up");
        for t in &piled {
            assert!(t.contains(" 0 completed, 0 failed"), "{name}: {t}");
            let depth: u64 = t
                .split("up to ")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|d| d.parse().ok())
                .unwrap_or_else(|| panic!("{name}: a depth in {t}"));
            assert!(depth > 0, "{name}: {t}");
        }
    }
    // The slowest wait drawn is the report's max latency.
    let max_us = report["io"]["max_latency_us"]
        .as_u64()
        .expect("max latency");
    let want = format!("waited up to {}", hcabus_tools::svg::span(max_us));
    let waits: Vec<String> = class(&doc, "io-wait")
        .iter()
        .map(|n| n.text().unwrap_or_default().to_string())
        .collect();
    assert!(waits.contains(&want), "{want} not in {waits:?}");
}

#[test]
fn io_failed_upward_is_red_in_its_disks_lane_and_the_paging_path_has_none() {
    let (svg, report) = draw("io-hold-timeout.toml");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    common(&doc, "io-hold-timeout");
    assert!(report["io"]["failed"].as_u64().expect("failed") > 0);
    let red = |lane: roxmltree::Node<'_, '_>| {
        in_class(lane, "io-done")
            .iter()
            .filter(|r| r.attribute("fill") == Some("#d00000"))
            .count()
    };
    let lanes = io_lanes(&doc);
    let lane = |name: &str| {
        lanes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, l)| *l)
            .unwrap_or_else(|| panic!("no lane {name}"))
    };
    assert!(
        red(lane("I/O data-lun")) > 0,
        "the data LUN failed I/O upward"
    );
    assert_eq!(red(lane("I/O bootdisk")), 0, "the paging path holds");
    let legend: Vec<String> = class(&doc, "legend")
        .iter()
        .map(|n| text_of(*n, "text"))
        .collect();
    for want in ["I/O outstanding", "I/O completed", "I/O failed"] {
        assert!(legend.iter().any(|l| l == want), "{want} in {legend:?}");
    }
}

#[test]
fn a_multipath_disk_has_one_io_lane_however_many_paths() {
    let (svg, _) = draw("multipath-failover.toml");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let names: Vec<String> = io_lanes(&doc).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["I/O bootdisk (multipath)"]);
}
