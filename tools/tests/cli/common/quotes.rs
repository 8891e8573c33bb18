//! The docs' quoted outputs: each `<!-- output: PROGRAM ARGS... -->` block of README.md and
//! docs/*.md, and whether an output is what a block quotes (docs_output.rs; fleet.rs checks
//! the one it runs itself).

use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One marked block: where it is, the command line, and the quoted lines.
pub struct Quote {
    pub at: String,
    pub args: Vec<String>,
    pub lines: Vec<String>,
}

pub fn quotes_in(path: &Path) -> Vec<Quote> {
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

/// Whether `quoted` (with `...` gaps) is `output`; the first line that does not match if not.
pub fn matches(quoted: &[String], output: &[String]) -> Result<(), String> {
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

/// Runs that a test of their own runs and compares with the docs, with the figures it reads
/// from the same run (a thousand hosts take a minute: once is enough).
pub const CHECKED_ELSEWHERE: &[&str] = &["hcasim fleet tests/scenarios/fleet/thousand-hosts.toml"];

/// Every quoted block, README.md first, then docs/*.md by name.
pub fn all_quotes() -> Vec<Quote> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files.iter().flat_map(|f| quotes_in(f)).collect()
}

/// Whether every block quoting `command` is `output` (at least one must).
pub fn check(command: &str, output: &str) -> Result<(), String> {
    let lines: Vec<String> = output.lines().map(|l| l.trim_end().to_string()).collect();
    let quotes: Vec<Quote> = all_quotes()
        .into_iter()
        .filter(|q| q.args.join(" ") == command)
        .collect();
    if quotes.is_empty() {
        return Err(format!("no doc quotes `{command}`"));
    }
    for q in &quotes {
        matches(&q.lines, &lines).map_err(|why| format!("{} (`{command}`): {why}", q.at))?;
    }
    Ok(())
}
