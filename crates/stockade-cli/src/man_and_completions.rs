//! `stockade completions SHELL` and `stockade man [SUBCOMMAND...]`: made from the same clap
//! definitions as the parser, so they list exactly the subcommands and options it accepts
//! (hidden ones aside).

use clap::CommandFactory;
use stockade::Error;

use crate::output::stdout_bytes;
use crate::Cli;

/// The completion script for `shell`, on standard output.
pub fn completions(shell: clap_complete::Shell) -> Result<u8, Error> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "stockade", &mut script);
    stdout_bytes(&script);
    Ok(0)
}

/// The manual page of stockade, or of the subcommand `path` (`["policy", "show"]` is
/// stockade-policy-show(1), as the main page's SUBCOMMANDS section names it), on standard
/// output.
pub fn man(path: &[String]) -> Result<u8, Error> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Gives each subcommand its page's name (`stockade-run`).
    cmd.build();
    for name in path {
        let sub = cmd.find_subcommand(name).cloned();
        cmd = sub.ok_or_else(|| Error::Usage {
            message: format!("no subcommand `{}` has a manual page", path.join(" ")),
            hint:
                "`stockade --help` lists the subcommands; `stockade man` alone prints the main page"
                    .into(),
        })?;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .source(concat!("stockade ", env!("CARGO_PKG_VERSION")))
        .render(&mut page)
        .map_err(|cause| Error::Io {
            what: "render the manual page".into(),
            cause,
        })?;
    stdout_bytes(&page);
    Ok(0)
}
