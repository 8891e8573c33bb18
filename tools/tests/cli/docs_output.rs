//! The docs say what the programs print: every output quoted in README.md and docs/*.md
//! under a `<!-- output: PROGRAM ARGS... -->` line is run again and compared. Only
//! deterministic runs are marked so (a seeded hcasim run, a help text, a refused scenario);
//! a live server's output is not. What is compared is what a terminal shows: stdout, then
//! stderr.
//!
//! A quoted block is the output's lines in order. A line of just `...` stands for any number
//! of lines left out; without one at its start (or end), the block starts (or ends) where
//! the output does. Trailing spaces are not compared.

use std::process::Command;

use super::common;

use common::quotes::{all_quotes, matches, root, Quote, CHECKED_ELSEWHERE};

fn run(q: &Quote) -> Vec<String> {
    let program = match q.args[0].as_str() {
        "hcasim" => env!("CARGO_BIN_EXE_hcasim"),
        "hcactl" => crate::common::hcactl(),
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

#[test]
fn every_quoted_output_in_the_docs_is_what_the_program_prints() {
    let quotes = all_quotes();
    assert!(
        quotes.len() >= 4,
        "the README's and docs' real outputs are marked: {} found",
        quotes.len()
    );
    for elsewhere in CHECKED_ELSEWHERE {
        assert!(
            quotes.iter().any(|q| q.args.join(" ") == *elsewhere),
            "`{elsewhere}` is no longer quoted: drop it from CHECKED_ELSEWHERE"
        );
    }
    let mut wrong = Vec::new();
    for q in quotes
        .iter()
        .filter(|q| !CHECKED_ELSEWHERE.contains(&q.args.join(" ").as_str()))
    {
        if let Err(why) = matches(&q.lines, &run(q)) {
            wrong.push(format!("{} (`{}`): {why}", q.at, q.args.join(" ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
