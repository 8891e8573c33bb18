//! docs/sdv-rules.md, the model held to Static Driver Verifier's KMDF rule catalog, checked
//! against the code it cites: every rule of the catalog once, each set its size, every
//! `Rule::`, `Defect::` and test it names real, each rule marked as not applying resting on
//! names the layer indeed never uses, and the counts at its top recounted.

use std::collections::BTreeSet;
use std::path::Path;

/// Rules per set in Microsoft's catalog ("Rules for KMDF drivers").
const SETS: [(&str, usize); 8] = [
    ("DDI usage", 47),
    ("request processing", 30),
    ("locking", 11),
    ("IRQL", 7),
    ("miscellaneous", 7),
    ("USB", 5),
    ("IRP processing", 3),
    ("warnings", 17),
];

pub(crate) fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One row of the catalog: its six cells.
pub(crate) struct Row {
    pub(crate) rule: String,
    set: String,
    applies: String,
    never: String,
    pub(crate) how: String,
    pub(crate) planted: String,
}

pub(crate) fn rows(doc: &str) -> Vec<Row> {
    doc.lines()
        .skip_while(|l| !l.starts_with("| rule | set | applies |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| {
            // A `\|` inside a cell is text, not a separator.
            let cells: Vec<String> = l
                .replace("\\|", "\u{1}")
                .split('|')
                .map(|c| c.trim().replace('\u{1}', "|"))
                .collect();
            assert_eq!(cells.len(), 8, "six cells in {l}");
            Row {
                rule: cells[1].clone(),
                set: cells[2].clone(),
                applies: cells[3].clone(),
                never: cells[4].clone(),
                how: cells[5].clone(),
                planted: cells[6].clone(),
            }
        })
        .collect()
}

/// The names in backticks of `text` that start with `prefix` (without it).
pub(crate) fn ticked<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|t| t.strip_prefix(prefix))
        .collect()
}

/// Every identifier in the layer's source: the KMDF crate (this crate's parent directory).
fn layer_identifiers() -> BTreeSet<String> {
    identifiers(&["../src", "../src/windows"])
}

/// Every identifier in the Rust files of `dirs` (relative to this crate).
fn identifiers(dirs: &[&str]) -> BTreeSet<String> {
    let mut text = String::new();
    for dir in dirs {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(&path).expect("a source directory") {
            let file = entry.expect("an entry").path();
            if file.extension().is_some_and(|e| e == "rs") {
                text += &std::fs::read_to_string(&file).expect("a source file");
            }
        }
    }
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn sdv_catalog() {
    let doc = read("../../../docs/sdv-rules.md");
    let rows = rows(&doc);
    assert_eq!(rows.len(), 127, "the catalog has 127 rules");
    let names: BTreeSet<&str> = rows.iter().map(|r| r.rule.as_str()).collect();
    assert_eq!(names.len(), rows.len(), "each rule once");
    for (set, size) in SETS {
        let n = rows.iter().filter(|r| r.set == set).count();
        assert_eq!(n, size, "rules in the set {set}");
    }

    let model_rules = read("src/model/rules.rs");
    let defects = read("../src/windows/defects.rs");
    let model_tests = ["tests", "checks", "misuses", "sdv_plants", "races"]
        .map(|f| read(&format!("src/model/{f}.rs")))
        .concat();
    let layer = layer_identifiers();
    let (mut planted, mut enforced, mut not) = (0, 0, 0);
    for r in &rows {
        let what = &r.rule;
        match r.applies.as_str() {
            "no" => {
                assert!(!r.how.is_empty(), "{what}: why it does not apply");
                assert!(r.planted.is_empty(), "{what}: nothing to plant");
                for name in ticked(&r.never, "") {
                    let used = match name.strip_suffix('*') {
                        Some(prefix) => layer.iter().any(|i| i.starts_with(prefix)),
                        None => layer.contains(name),
                    };
                    assert!(
                        !used,
                        "{what}: the layer uses {name}, so the rule may apply"
                    );
                }
            }
            "yes" => {
                assert!(r.never.is_empty(), "{what}: applies, so nothing is unused");
                if r.how.starts_with("not enforced:") {
                    assert_eq!(r.planted, "none", "{what}: not enforced, nothing caught");
                    not += 1;
                } else {
                    assert!(r.how.starts_with("`Rule::"), "{what}: names its check");
                    if r.planted == "none" {
                        enforced += 1;
                    } else {
                        let tests: Vec<&str> = ticked(&r.planted, "")
                            .into_iter()
                            .filter(|t| !t.contains("::"))
                            .collect();
                        assert!(
                            !ticked(&r.planted, "Defect::").is_empty(),
                            "{what}: a defect"
                        );
                        assert!(!tests.is_empty(), "{what}: the test that catches it");
                        for test in tests {
                            assert!(
                                model_tests.contains(&format!("fn {test}(")),
                                "{what}: no test {test} in the model's tests"
                            );
                        }
                        planted += 1;
                    }
                }
            }
            other => panic!("{what}: applies {other:?}, not yes or no"),
        }
    }
    // Every check, defect and test the page names anywhere is one the code has.
    for rule in ticked(&doc, "Rule::") {
        assert!(
            model_rules.contains(&format!("    {rule},")),
            "Rule::{rule} is not one of src/model/rules.rs"
        );
    }
    for defect in ticked(&doc, "Defect::") {
        assert!(
            defects.contains(&format!("    {defect},")),
            "Defect::{defect} is not one of defects.rs"
        );
    }

    let applies = planted + enforced + not;
    for (label, n) in [
        ("in the catalog", rows.len()),
        ("apply to this driver", applies),
        ("enforced by the model, a planted violation caught", planted),
        ("enforced by the model, no planted violation yet", enforced),
        ("not enforced", not),
    ] {
        let line = format!("| {label} | {n} |");
        assert!(
            doc.contains(&line),
            "docs/sdv-rules.md's counts lack {line:?}"
        );
    }
}

/// The child driver's rows: each rule one of the catalog's, once; each check, scenario and
/// test they name real; each "no" resting on names the child's source never uses.
#[test]
fn sdv_child_rows() {
    let doc = read("../../../docs/sdv-rules.md");
    let catalog: BTreeSet<String> = rows(&doc).into_iter().map(|r| r.rule).collect();
    let section = doc
        .split("<!-- child_rows -->")
        .nth(1)
        .and_then(|s| s.split("<!-- /child_rows -->").next())
        .expect("the child's rows between their markers");
    let model_rules = read("src/model/rules.rs");
    let model = ["two", "twoio", "twolife", "twoconc", "queues"]
        .map(|f| read(&format!("src/model/{f}.rs")))
        .concat();
    let child_tests = read("../../kmdf-child/src/tests.rs");
    let child = identifiers(&["../../kmdf-child/src", "../../kmdf-child/src/windows"]);
    let mut seen = BTreeSet::new();
    let lines = section.lines().filter(|l| l.starts_with("| ")).skip(2);
    for line in lines {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 6, "four cells in {line}");
        let (rule, applies, never, how) = (cells[1], cells[2], cells[3], cells[4]);
        assert!(catalog.contains(rule), "{rule} is not in the catalog");
        assert!(seen.insert(rule.to_string()), "{rule} twice");
        match applies {
            "no" => {
                let names = ticked(never, "");
                assert!(!names.is_empty(), "{rule}: what the child never uses");
                for name in names {
                    assert!(!child.contains(name), "{rule}: the child uses {name}");
                }
            }
            "yes" => assert!(never.is_empty(), "{rule}: applies, so nothing is unused"),
            other => panic!("{rule}: {other:?}, not yes or no"),
        }
        for r in ticked(how, "Rule::") {
            assert!(
                model_rules.contains(&format!("    {r},")),
                "{rule}: no Rule::{r}"
            );
        }
        for name in ticked(how, "") {
            if name.starts_with("Rule::") || name.contains("::") {
                continue;
            }
            let scenario = format!("\"{name}\"");
            let test = format!("fn {name}(");
            assert!(
                model.contains(&scenario) || child_tests.contains(&test),
                "{rule}: {name} is neither a two-image scenario nor a test of the child's"
            );
        }
    }
    assert!(seen.len() >= 10, "the child's rows: {}", seen.len());
}
