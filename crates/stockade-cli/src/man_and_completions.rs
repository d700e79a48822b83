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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use crate::Cli;

    fn text(s: Option<&clap::builder::StyledStr>) -> Option<String> {
        s.map(ToString::to_string)
    }

    /// Subcommands are deferred (`Command` in main.rs): their arguments are added when clap
    /// builds them. What the variant says must survive that build: a doc comment on an `Args`
    /// struct would replace the variant's about (in `--help` of that subcommand only).
    #[test]
    fn a_deferred_build_keeps_each_subcommands_about() {
        fn check(unbuilt: &clap::Command, path: &str) {
            for sub in unbuilt.get_subcommands() {
                let name = format!("{path} {}", sub.get_name());
                let mut built = sub.clone();
                built.build();
                assert_eq!(text(built.get_about()), text(sub.get_about()), "{name}");
                assert_eq!(
                    text(built.get_long_about()),
                    text(sub.get_long_about()),
                    "{name}"
                );
                assert_eq!(built.is_hide_set(), sub.is_hide_set(), "{name}");
                check(sub, &name);
            }
        }
        check(&Cli::command(), "stockade");
    }

    /// The run-only options stay hidden from `proxy --help` and `snapshot --help` under
    /// `defer` (a `mut_args` on the variant would run before they exist), and only there.
    #[test]
    fn run_only_options_stay_hidden_where_unused() {
        let mut cli = Cli::command();
        cli.build();
        let hidden = |sub: &str, arg: &str| {
            let sub = cli.find_subcommand(sub);
            let arg = sub.and_then(|s| s.get_arguments().find(|a| a.get_id() == arg));
            arg.map(clap::Arg::is_hide_set)
        };
        assert_eq!(hidden("proxy", "workspace"), Some(true));
        assert_eq!(hidden("proxy", "allow_domain"), Some(false));
        assert_eq!(hidden("snapshot", "net"), Some(true));
        assert_eq!(hidden("snapshot", "workspace"), Some(false));
        assert_eq!(hidden("run", "net"), Some(false));
        assert_eq!(hidden("run", "workspace"), Some(false));
    }
}
