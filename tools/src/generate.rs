//! Shell completions and manual pages for the tools (`hcasim completions SHELL`, `hcactl
//! man`), generated from the same clap definitions that parse their command lines, so
//! they cannot drift from what the tools accept.

use std::io::{self, Write};

pub use clap_complete::Shell;

/// Writes `shell`'s completion script for `cmd` to `out`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) -> io::Result<()> {
    let name = cmd.get_name().to_string();
    // clap_complete writes with no error path of its own: render to memory, then write.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    out.write_all(&script)
}

/// Writes the manual page (roff, section 1) of `cmd` to `out`: its options and a line per
/// subcommand.
pub fn man(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    clap_mangen::Man::new(cmd).render(out)
}
