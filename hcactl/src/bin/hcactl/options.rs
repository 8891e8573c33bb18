//! Every numeric option of every subcommand, found by walking clap's own description of the
//! command line, so that a new one cannot be left out: each states its range in its help
//! ("Range: MIN to MAX"), and the parser takes exactly that range. A number outside it, or
//! no number, is a usage error (exit 2) naming the option, found before anything is sent.

use std::any::TypeId;

use clap::error::ErrorKind;
use clap::{Arg, Command, CommandFactory, Parser};

use crate::Cli;

/// One numeric option: the subcommands that lead to it, its long name, its stated range.
#[derive(Debug)]
struct Numeric {
    path: Vec<String>,
    long: String,
    min: u128,
    max: u128,
}

impl Numeric {
    /// The command line that gives the option `value`, with what it needs beside itself
    /// to be parsed at all: `--timeout` of `reset` needs `--wait`, `status`'s options
    /// `--watch`, `inject` a fault; a global option is given before a subcommand.
    fn argv(&self, value: &str) -> Vec<String> {
        let companions: &[&str] = match (self.path.first().map(String::as_str), &*self.long) {
            (Some("status"), _) => &["--watch"],
            (Some("reset" | "restart"), "timeout") => &["--wait"],
            (Some("inject"), _) => &["port_down"],
            _ => &[],
        };
        let mut argv = vec!["hcactl".to_string()];
        argv.extend(self.path.iter().cloned());
        argv.extend(companions.iter().map(|c| c.to_string()));
        // `--opt=VALUE`, so that "-1" reaches the option's parser, not clap's flags.
        argv.push(format!("--{}={value}", self.long));
        if self.path.is_empty() {
            argv.push("man".into());
        }
        argv
    }

    fn name(&self) -> String {
        format!("{} --{}", self.path.join(" "), self.long)
    }
}

fn is_number(arg: &Arg) -> bool {
    let t = arg.get_value_parser().type_id();
    [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ]
    .iter()
    .any(|id| t == *id)
}

/// "Range: MIN to MAX" in `help`.
fn stated_range(help: &str) -> Option<(u128, u128)> {
    let rest = &help[help.find("Range: ")? + "Range: ".len()..];
    let mut words = rest.split_whitespace();
    let number = |w: Option<&str>| w?.trim_end_matches(['.', ',']).parse::<u128>().ok();
    let min = number(words.next())?;
    (words.next() == Some("to")).then_some(())?;
    Some((min, number(words.next())?))
}

/// Every numeric option under `cmd`, which `path` leads to.
fn walk(cmd: &Command, path: &[String], found: &mut Vec<Numeric>) {
    for arg in cmd.get_arguments().filter(|a| is_number(a)) {
        let long = arg
            .get_long()
            .unwrap_or_else(|| panic!("{path:?}: a numeric argument with no long name: {arg:?}"));
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let Some((min, max)) = stated_range(&help) else {
            panic!("{path:?} --{long}: its help states no \"Range: MIN to MAX\": {help:?}")
        };
        let path = path.to_vec();
        let long = long.to_string();
        found.push(Numeric {
            path,
            long,
            min,
            max,
        });
    }
    for sub in cmd.get_subcommands() {
        let mut deeper = path.to_vec();
        deeper.push(sub.get_name().to_string());
        walk(sub, &deeper, found);
    }
}

fn numeric_options() -> Vec<Numeric> {
    let mut found = Vec::new();
    walk(&Cli::command(), &[], &mut found);
    found
}

/// A value the parser must refuse: a usage error (exit 2) that names the option.
fn assert_refused(o: &Numeric, value: &str) {
    let argv = o.argv(value);
    let e = Cli::try_parse_from(&argv).expect_err(&format!("{argv:?} is refused"));
    assert!(
        matches!(
            e.kind(),
            ErrorKind::ValueValidation | ErrorKind::InvalidValue
        ),
        "{argv:?}: {:?}: {e}",
        e.kind()
    );
    assert_eq!(e.exit_code(), 2, "{argv:?}: a usage error");
    assert!(
        e.to_string().contains(&format!("--{}", o.long)),
        "{argv:?}: the message names the option: {e}"
    );
}

fn assert_taken(o: &Numeric, value: &str) {
    let argv = o.argv(value);
    if let Err(e) = Cli::try_parse_from(&argv) {
        panic!("{argv:?} is taken: {e}");
    }
}

/// The walk over every numeric option: its minimum and its maximum taken, 0 taken only
/// where the range starts at 0, one past the maximum and a word refused, each naming it.
#[test]
fn every_numeric_option_takes_its_stated_range_and_nothing_else() {
    let all = numeric_options();
    for o in &all {
        assert!(o.min <= o.max, "{}: {}..={}", o.name(), o.min, o.max);
        assert_taken(o, &o.min.to_string());
        assert_taken(o, &o.max.to_string());
        if o.min == 0 {
            assert_taken(o, "0");
        } else {
            assert_refused(o, "0");
            assert_refused(o, &(o.min - 1).to_string());
        }
        assert_refused(o, &(o.max + 1).to_string());
        assert_refused(o, "ten");
        assert_refused(o, "-1");
    }
    // The walk finds what it must (the issue's --timeout among them), so it proves something.
    let names: Vec<String> = all.iter().map(Numeric::name).collect();
    for known in [
        "reset --timeout",
        "maintain --timeout",
        "restart --timeout",
        "status --interval-ms",
        "status --count",
        "log --since",
        "inject --count",
        "inject --port",
        "inject --duration-ms",
    ] {
        assert!(names.iter().any(|n| n == known), "{known} in {names:?}");
    }
}

/// A timeout is at most a day: the issue's 2^64 - 1 seconds is refused before the reset
/// is sent, and the deadline of any wait is computed without a panic, even one the clock
/// cannot count.
#[test]
fn no_timeout_can_overflow_a_deadline() {
    let issue = ["hcactl", "reset", "--forced", "--wait", "--timeout"];
    let mut argv = issue.to_vec();
    argv.push("18446744073709551615");
    let e = Cli::try_parse_from(argv).expect_err("out of range");
    assert_eq!(e.exit_code(), 2);
    let now = std::time::Instant::now();
    assert!(crate::wait::deadline_after(std::time::Duration::MAX) >= now);
    assert!(crate::wait::deadline_after(std::time::Duration::from_secs(86_400)) > now);
}

#[test]
fn a_stated_range_reads_as_written() {
    assert_eq!(
        stated_range("How many. Range: 1 to 10000."),
        Some((1, 10000))
    );
    assert_eq!(stated_range("Range: 1 to 86400 (a day)"), Some((1, 86400)));
    assert_eq!(stated_range("Range: 1 or 2"), None);
    assert_eq!(stated_range("no range"), None);
}
