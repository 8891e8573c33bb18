//! Shell completions and manual pages for the tools (`hcasim completions SHELL`, `hcactl
//! man`), generated from the same clap definitions that parse their command lines, so
//! they cannot drift from what the tools accept.

use std::io::{self, Write};

use roff::{bold, roman, Roff};

pub use clap_complete::Shell;

/// Writes `shell`'s completion script for `cmd` to `out`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) -> io::Result<()> {
    let name = cmd.get_name().to_string();
    // clap_complete writes with no error path of its own: render to memory, then write.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    out.write_all(&script)
}

/// Writes the manual page (roff, section 1) of `cmd` to `out`: its options, every
/// subcommand with its own options in this one page (no page is referred to that is not
/// generated), and EXIT STATUS from `exit_status` (the text `--help` ends with).
pub fn man(cmd: clap::Command, exit_status: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let page = clap_mangen::Man::new(cmd.clone());
    page.render_title(out)?;
    page.render_name_section(out)?;
    page.render_synopsis_section(out)?;
    page.render_description_section(out)?;
    page.render_options_section(out)?;
    let mut roff = Roff::new();
    if cmd.get_subcommands().next().is_some() {
        roff.control("SH", ["SUBCOMMANDS"]);
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            subcommand(&mut roff, cmd.get_name(), sub);
        }
    }
    roff.control("SH", ["EXIT STATUS"]);
    exit_codes(&mut roff, exit_status);
    roff.to_writer(out)?;
    page.render_version_section(out)
}

/// The `Exit status:` text of `--help` as roff: each `  N  text` (and the lines indented
/// under it) one tagged paragraph, a line flush left a paragraph of its own.
fn exit_codes(roff: &mut Roff, text: &str) {
    let mut item: Option<(String, String)> = None;
    let flush = |roff: &mut Roff, item: &mut Option<(String, String)>| {
        if let Some((code, said)) = item.take() {
            roff.control("TP", []);
            roff.text([bold(code)]);
            roff.text([roman(said)]);
        }
    };
    for line in text.lines().skip_while(|l| l.ends_with(':')) {
        let trimmed = line.trim_start();
        let code = trimmed
            .split_once("  ")
            .filter(|(c, _)| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_digit()));
        match (line.starts_with(' '), code) {
            (true, Some((code, said))) => {
                flush(roff, &mut item);
                item = Some((code.to_string(), said.trim().to_string()));
            }
            (true, None) => {
                if let Some((_, said)) = item.as_mut() {
                    said.push(' ');
                    said.push_str(trimmed);
                }
            }
            (false, _) => {
                flush(roff, &mut item);
                roff.control("PP", []);
                roff.text([roman(line)]);
            }
        }
    }
    flush(roff, &mut item);
}

/// One subcommand: `.SS tool name [args]`, what it does, and each option (nested ones, such
/// as `policy set`, under it).
fn subcommand(roff: &mut Roff, parent: &str, sub: &clap::Command) {
    let name = format!("{parent} {}", sub.get_name());
    let positionals: Vec<String> = sub
        .get_positionals()
        .map(|a| {
            let value = a
                .get_value_names()
                .and_then(|v| v.first().map(ToString::to_string))
                .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
            if a.is_required_set() {
                value
            } else {
                format!("[{value}]")
            }
        })
        .collect();
    roff.control(
        "SS",
        [format!("{name} {}", positionals.join(" ")).trim_end()],
    );
    if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
        roff.text([roman(about.to_string())]);
    }
    for arg in sub
        .get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
    {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if long == "help" || arg.is_global_set() {
            continue;
        }
        roff.control("TP", []);
        let value = arg
            .get_value_names()
            .and_then(|v| v.first().map(|n| format!(" <{n}>")))
            .unwrap_or_default();
        let takes = arg.get_num_args().is_some_and(|n| n.takes_values());
        let flag = format!("--{long}{}", if takes { value } else { String::new() });
        roff.text([bold(flag)]);
        if let Some(help) = arg.get_long_help().or_else(|| arg.get_help()) {
            roff.text([roman(help.to_string())]);
        }
    }
    for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand(roff, &name, nested);
    }
}
