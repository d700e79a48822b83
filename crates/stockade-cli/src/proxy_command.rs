//! `stockade proxy`: the egress proxy alone, for a whole agent, under the network rules of a
//! policy (`--policy`, `--allow-domain`, `--deny-domain`, `--allow-host`, and the registries of
//! `--preset`). Its help lists only those and its own options; the other policy flags of `run` are still accepted, as they
//! always were, but hidden, and a warning says the proxy does not use them.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Arg;
use stockade::Error;

use crate::output::errln;
use crate::PolicyArgs;

// `stockade proxy`.
// (A plain comment: under `defer` a doc comment here would become the subcommand's about,
// replacing its variant's.)
#[derive(clap::Args)]
// On the arguments, not on `Command::Proxy`: that variant's methods run before its deferred
// arguments exist.
#[command(mut_args(hide_run_only))]
pub struct ProxyArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Where to listen (loopback only).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:3128")]
    listen: SocketAddr,
    /// Append JSON-line audit events here, as they happen.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
}

/// The options the proxy uses (clap's ids); every other one of [`PolicyArgs`] is run-only.
const PROXY_USES: &[&str] = &[
    "policy",
    "allow_domain",
    "deny_domain",
    "allow_host",
    "preset",
    "listen",
    "audit",
    "help",
];

/// Hides a run-only option from `stockade proxy --help` (see the module documentation).
pub fn hide_run_only(arg: Arg) -> Arg {
    let used = PROXY_USES.contains(&arg.get_id().as_str());
    arg.hide(!used)
}

/// The run-only flags given, as written on the command line.
fn run_only_given(p: &PolicyArgs) -> Vec<&'static str> {
    let given = [
        ("--workspace", p.workspace.is_some()),
        ("--profile", p.profile.is_some()),
        ("--agent", p.agent.is_some()),
        ("--allow-write", !p.allow_write.is_empty()),
        ("--deny-read", !p.deny_read.is_empty()),
        ("--allow-read", !p.allow_read.is_empty()),
        ("--protect", !p.protect.is_empty()),
        ("--env", !p.env.is_empty()),
        ("--credential", !p.credential.is_empty()),
        ("--net", p.net.is_some()),
        ("--backend", p.backend.is_some()),
        ("--timeout", p.timeout.is_some()),
        ("--tmp-size", p.tmp_size.is_some()),
        ("--files", p.files.is_some()),
        ("--memory", p.memory.is_some()),
        ("--pids", p.pids.is_some()),
        ("--cpu", p.cpu.is_some()),
        ("--output-limit", p.output_limit.is_some()),
    ];
    given
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(flag, _)| flag)
        .collect()
}

pub fn main(args: &ProxyArgs) -> Result<u8, Error> {
    let ignored = run_only_given(&args.policy);
    if !ignored.is_empty() {
        errln!(
            "stockade: warning: {}: options of `stockade run`; `stockade proxy` applies only the network rules (--policy, --allow-domain, --deny-domain, --allow-host, --preset) and injects no credentials",
            ignored.join(", ")
        );
    }
    let (policy, _, _) = crate::resolve(&args.policy)?;
    let ready = |addr: SocketAddr| {
        errln!("stockade: egress proxy on {addr} (HTTP, CONNECT, SOCKS5); Ctrl-C stops it");
        errln!("  export HTTP_PROXY=http://{addr} HTTPS_PROXY=http://{addr} ALL_PROXY=socks5h://{addr}");
    };
    // Each refusal as it happens, with what would allow it.
    let denied = Box::new(|e: &stockade::NetworkEvent| {
        if e.code == stockade::NETWORK_DENIED {
            errln!("{}", crate::run_notices::network_notice(e));
        }
    });
    // SIGHUP: the policy file and the flags again; the new network rules are in force for the
    // next connection (a policy that no longer parses keeps the old rules).
    let reload = || crate::resolve(&args.policy).map(|(p, _, _)| p);
    let reloaded = |r: &Result<(), Error>| match r {
        Ok(()) => {
            errln!("stockade: proxy: reloaded the policy (SIGHUP): its network rules are in force")
        }
        Err(e) => errln!(
            "stockade: proxy: the reload (SIGHUP) failed, the rules are unchanged: {}",
            crate::output::shown(&e.to_string())
        ),
    };
    let events = stockade::serve_proxy(
        &policy,
        args.listen,
        args.audit.as_deref(),
        &ready,
        denied,
        &reload,
        &reloaded,
    )?;
    let denied = events
        .iter()
        .filter(|e| e.code == stockade::NETWORK_DENIED)
        .count();
    errln!(
        "stockade: proxy stopped: {} decisions, {denied} denied",
        events.len()
    );
    Ok(0)
}
