//! The docs say what the programs print: every output quoted in README.md and docs/*.md
//! under a `<!-- output: PROGRAM ARGS... -->` line is run again and compared. Only
//! deterministic runs are marked so (a seeded hcasim run, a help text, a refused scenario);
//! a live server's output is not. What is compared is what a terminal shows: stdout, then
//! stderr.
//!
//! A quoted block is the output's lines in order. A line of just `...` stands for any number
//! of lines left out; without one at its start (or end), the block starts (or ends) where
//! the output does. Trailing spaces are not compared.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One marked block: where it is, the command line, and the quoted lines.
struct Quote {
    at: String,
    args: Vec<String>,
    lines: Vec<String>,
}

fn quotes_in(path: &Path) -> Vec<Quote> {
    let text = std::fs::read_to_string(path).expect("a doc");
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(args) = lines[i]
            .trim()
            .strip_prefix("<!-- output:")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            i += 1;
            continue;
        };
        let at = format!("{}:{}", path.display(), i + 1);
        assert!(
            lines.get(i + 1).is_some_and(|l| l.starts_with("```")),
            "{at}: the marker must stand right before a fenced block"
        );
        let body: Vec<String> = lines[i + 2..]
            .iter()
            .take_while(|l| !l.starts_with("```"))
            .map(|l| l.trim_end().to_string())
            .collect();
        i += 2 + body.len();
        found.push(Quote {
            at,
            args: args.split_whitespace().map(String::from).collect(),
            lines: body,
        });
    }
    found
}

fn run(q: &Quote) -> Vec<String> {
    let program = match q.args[0].as_str() {
        "hcasim" => env!("CARGO_BIN_EXE_hcasim"),
        "hcactl" => env!("CARGO_BIN_EXE_hcactl"),
        "infcheck" => env!("CARGO_BIN_EXE_infcheck"),
        other => panic!("{}: no such program {other}", q.at),
    };
    let out = Command::new(program)
        .args(&q.args[1..])
        .current_dir(root())
        .output()
        .expect("runs");
    // What a terminal shows: stdout, then stderr (a refusal's message).
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    shown.lines().map(|l| l.trim_end().to_string()).collect()
}

/// Whether `quoted` (with `...` gaps) is `output`; the first line that does not match if not.
fn matches(quoted: &[String], output: &[String]) -> Result<(), String> {
    let segments: Vec<&[String]> = quoted.split(|l| l == "...").collect();
    let open_start = quoted.first().is_some_and(|l| l == "...");
    let open_end = quoted.last().is_some_and(|l| l == "...");
    let mut from = 0;
    for (k, seg) in segments.iter().enumerate() {
        if seg.is_empty() {
            continue;
        }
        let anchored_start = k == 0 && !open_start;
        let anchored_end = k == segments.len() - 1 && !open_end;
        let fits = |at: usize| output.get(at..at + seg.len()) == Some(*seg);
        let at = if anchored_start {
            Some(from).filter(|a| fits(*a))
        } else if anchored_end {
            output
                .len()
                .checked_sub(seg.len())
                .filter(|a| *a >= from && fits(*a))
        } else {
            (from..output.len()).find(|a| fits(*a))
        };
        let Some(at) = at else {
            return Err(format!(
                "this part is not in the output:\n{}",
                seg.join("\n")
            ));
        };
        from = at + seg.len();
        if anchored_end && from != output.len() {
            return Err("the output goes on past the quote".into());
        }
    }
    Ok(())
}

#[test]
fn every_quoted_output_in_the_docs_is_what_the_program_prints() {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let quotes: Vec<Quote> = files.iter().flat_map(|f| quotes_in(f)).collect();
    assert!(
        quotes.len() >= 4,
        "the README's and docs' real outputs are marked: {} found",
        quotes.len()
    );
    let mut wrong = Vec::new();
    for q in &quotes {
        if let Err(why) = matches(&q.lines, &run(q)) {
            wrong.push(format!("{} (`{}`): {why}", q.at, q.args.join(" ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn a_quote_matches_only_what_the_output_says_in_order() {
    let out: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let q = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(matches(&q(&["a", "b", "c", "d"]), &out).is_ok());
    assert!(matches(&q(&["a", "...", "d"]), &out).is_ok());
    assert!(matches(&q(&["...", "c", "d"]), &out).is_ok());
    assert!(matches(&q(&["...", "b", "..."]), &out).is_ok());
    assert!(
        matches(&q(&["a", "b"]), &out).is_err(),
        "ends before the output"
    );
    assert!(
        matches(&q(&["b", "...", "d"]), &out).is_err(),
        "not the start"
    );
    assert!(
        matches(&q(&["...", "c", "b", "..."]), &out).is_err(),
        "order"
    );
    assert!(
        matches(&q(&["...", "x", "..."]), &out).is_err(),
        "not there"
    );
}
