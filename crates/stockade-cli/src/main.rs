//! `stockade`: run a command inside layered containment.
//!
//! Thin by design: clap parses flags, the policy is resolved, one library call runs, errors are
//! printed once (`stockade: error[CODE]: message` plus hints, or JSON with `--json`), and the
//! process exits with the command's code, 125 when stockade refused or failed, 126/127 when the
//! program could not be executed.

#![forbid(unsafe_code)]
// Every print goes through `output` (a closed pipe must not panic).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use stockade::{Error, RunRequest};

mod control_fd;
mod default_policy;
mod guard_command;
mod hook;
mod man_and_completions;
mod mcp_command;
mod output;
mod policy_show;
mod proxy_command;
mod review_command;
mod run_hints;
mod run_notices;
mod selftest;
mod shell_prefix;
mod snapshot_command;
mod trust;
mod why_command;

use output::{errln, out, outln};

/// Exit code when stockade itself refused or failed.
const EXIT_REFUSED: u8 = 125;

#[derive(Parser)]
#[command(
    name = "stockade",
    version,
    about = "Run AI agents' commands in a sandbox that tells you what it blocked"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// `defer`: a subcommand's arguments are built only when clap builds that subcommand, i.e. when it
// is the one parsed (or for `--help`, completions, man pages, which build the whole tree): a
// start no longer builds and drops every subcommand's options (most of `stockade --version`'s
// instructions). Names, abouts and `hide` stay eager. Hence no doc comment on an `Args` struct
// (it would replace the variant's about) and no `mut_args` on a variant (it would run before
// the arguments exist).
#[command(defer = true)]
enum Command {
    /// Run a program (after `--`) or a shell string (`--shell`) in the sandbox.
    Run(Box<RunArgs>),
    /// Claude Code's shell prefix: `CLAUDE_CODE_SHELL_PREFIX` set to a script running
    /// `exec stockade shell-prefix "$@"` runs every Bash command of Claude Code in the sandbox,
    /// with the project's root as workspace (`--workspace`, else the directory Claude Code
    /// started in: its process, CLAUDE_PID, an ancestor; else CLAUDE_PROJECT_DIR; refused when
    /// the two disagree; a `cd` never moves it), no time limit unless asked, and Claude Code's
    /// tracking of `cd` working.
    /// Takes `run`'s options; your user policy file applies as to `run`.
    ShellPrefix(Box<ShellPrefixArgs>),
    /// A Claude Code PreToolUse hook (`stockade hook claude-code [-- RUN-OPTIONS]`): reads the
    /// tool call as JSON on stdin and answers with the Bash command wrapped in `stockade run`
    /// (workspace: CLAUDE_PROJECT_DIR; your user policy file applies to it as to `run`, so
    /// presets and domains need no options here); other tools pass; exit 2 denies. `--ask`
    /// (among the options) keeps Claude Code's permission prompt.
    Hook {
        /// The agent: claude-code.
        #[arg(value_parser = ["claude-code"])]
        agent: String,
        /// Options for every wrapped `stockade run` (after `--`).
        #[arg(last = true, value_name = "RUN-OPTIONS")]
        options: Vec<String>,
    },
    /// Serve the sandbox to an MCP client (stdio, or streamable HTTP with `--http ADDR`):
    /// tools `execute` (a shell command in the sandbox) and `read_file`, `write_file`,
    /// `edit_file`, `ls`, `glob`, `grep` (the workspace, under the sandbox's own rules). Each
    /// call is a sandboxed run of its own under the policy of `run`'s options.
    Mcp(Box<mcp_command::McpArgs>),
    /// The file tools' side inside the sandbox (run by `stockade mcp`).
    #[command(hide = true)]
    FileTool,
    /// Probe what this machine can enforce, by trying it.
    Doctor {
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
        /// The backend to check: native (default), gvisor, podman or docker.
        #[arg(long, value_name = "NAME", value_parser = ["native", "gvisor", "podman", "docker"])]
        backend: Option<String>,
    },
    /// Print the AppArmor profile that lets this stockade binary create user namespaces on
    /// hosts that restrict them (`kernel.apparmor_restrict_unprivileged_userns = 1`, Ubuntu
    /// 23.10+): `stockade apparmor-profile | sudo tee /etc/apparmor.d/stockade`, then
    /// `sudo apparmor_parser -r /etc/apparmor.d/stockade`.
    ApparmorProfile,
    /// Show or check policies.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// The pending change sets of review runs (`run --review`), newest first, with age and size.
    Runs(review_command::RunsArgs),
    /// What a review run changed: added, modified, deleted, replaced directories, mode
    /// changes, and what is flagged (host-executed files, executables, symlinks, git
    /// internals, ...) with the reason.
    Changes(review_command::ChangesArgs),
    /// A unified diff of a review run's change set (binary files named, not shown).
    Diff(review_command::DiffArgs),
    /// Write a review run's change set into the workspace: never through a symbolic link, each
    /// file atomically; flagged entries only when accepted; refused on conflicts.
    Apply(review_command::ApplyArgs),
    /// Remove a review run's change set.
    Discard(review_command::DiscardArgs),
    /// Explain what the policy of the given options does to a path (`why PATH [--write]`:
    /// masked, protected, read-only or writable, by which rule from which file and line) or
    /// to a destination (`why HOST[:PORT]`: the network mode and rule), whether stockade sees
    /// a refusal or the kernel refuses it silently, and what flag would allow it. Exit 0 when
    /// allowed, 1 when not.
    Why(Box<why_command::WhyArgs>),
    /// Export the workspace, filtered, for a backend that cannot bind-mount it (`--out DIR`
    /// or `--out FILE.tar`): without the policy's masked files, git's hooks and other code
    /// paths (a reduced `.git/config`), `.stockade/`, and dependency caches (`node_modules`,
    /// `target`, `.venv`, ...). Refused (exit 125, E_SNAPSHOT_REFUSED) when symbolic links
    /// resolve outside the workspace, listing them.
    Snapshot(Box<snapshot_command::SnapshotArgs>),
    /// Run the egress proxy on this machine for a whole agent (the rules of `run --net proxy`),
    /// until Ctrl-C. It filters only what is sent to it: pair it with a network namespace or
    /// firewall that blocks direct connections.
    // The run-only flags of `PolicyArgs` stay accepted (as before) but hidden (`ProxyArgs`), and
    // warned about when given: the proxy uses only the network rules.
    Proxy(Box<proxy_command::ProxyArgs>),
    /// Pin the workspace's trust-relevant configuration by content: once approved, `run`
    /// refuses (E_UNTRUSTED_CONFIG) while those files differ; a policy file inside the
    /// workspace always needs an approval.
    #[command(subcommand)]
    Trust(trust::TrustCommand),
    /// Check a shell command string under the argv-only policy (one simple command of literal
    /// words, paths inside the workspace, the program from the trusted search path) and print
    /// the argv it becomes; refuses (exit 125, E_SANDBOX_VIOLATION) naming the construct.
    Guard(Box<guard_command::GuardArgs>),
    /// Run the embedded attack corpus on this machine (throw-away fixtures, loopback only) and
    /// print, per case, contained / escaped / not applicable, plus what `doctor` found. Exit 0
    /// only if nothing escaped.
    Selftest(selftest::SelftestArgs),
    /// Copy standard input to standard output without invisible and direction-changing
    /// characters, Unicode Tag characters and terminal control sequences (text headed to a
    /// model or a terminal). Says on stderr what it removed, including text hidden in Tags.
    Sanitize {
        /// Also write the report (JSON) to FILE.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// The report as JSON on stderr instead of a summary line.
        #[arg(long)]
        json: bool,
    },
    /// Print a completion script for SHELL on standard output, e.g.
    /// `stockade completions bash > ~/.local/share/bash-completion/completions/stockade`,
    /// `stockade completions zsh > ~/.zfunc/_stockade`,
    /// `stockade completions fish > ~/.config/fish/completions/stockade.fish`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff) on standard output: stockade(1), or with a subcommand its
    /// own page (`stockade man run` is stockade-run(1)). `stockade man > stockade.1 && man
    /// ./stockade.1`, or save the pages into a `man1` directory of MANPATH.
    Man {
        /// The subcommand whose page to print (`run`, `policy show`, ...).
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Vec<String>,
    },
}

#[derive(Subcommand)]
#[command(defer = true)]
enum PolicyCommand {
    /// Print the resolved policy and the sandbox plan for the given options.
    Show {
        #[command(flatten)]
        policy: Box<PolicyArgs>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a policy file: TOML, or srt / Claude Code JSON settings (strict: unknown or
    /// duplicate keys, and keys stockade cannot honour, are errors).
    Check { file: PathBuf },
}

#[derive(Args, Clone)]
struct PolicyArgs {
    /// Workspace directory (writable under the default profile). Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Policy file: TOML, or srt's / Claude Code's JSON sandbox settings. Layered over your
    /// user policy ($XDG_CONFIG_HOME/stockade/policy.toml, default
    /// ~/.config/stockade/policy.toml) and the workspace's stockade.toml once approved
    /// (`stockade trust approve`); the flags come last.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Ignore your user policy file for this command (as STOCKADE_NO_USER_POLICY=1 does).
    #[arg(long)]
    no_user_policy: bool,
    /// Built-in profile: workspace-write (default) or read-only.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Run an agent inside (worker mode) with what it needs: claude-code, codex, opencode or
    /// aider (its model key on the host, its state writable, its hooks and settings read-only,
    /// no time limit). `stockade policy show --agent NAME` prints what it adds.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// A toolchain's registry through the proxy and a cache of stockade's own: cargo, npm, pip
    /// or go (repeatable).
    #[arg(long = "preset", value_name = "NAME")]
    preset: Vec<String>,
    /// Also allow writing PATH.
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<String>,
    /// Deny reading PATH (masked inside).
    #[arg(long = "deny-read", value_name = "PATH")]
    deny_read: Vec<String>,
    /// Allow reading PATH even inside a denied path.
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<String>,
    /// Keep PATTERN read-only inside writable roots and refuse its creation (a protected
    /// path, like the catalogue's `.vscode`; relative patterns apply at any depth).
    #[arg(long = "protect", value_name = "PATTERN")]
    protect: Vec<String>,
    /// Pass NAME from the caller's environment, or set NAME=VALUE.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Give the command a credential it never sees: a route (anthropic, openai, gemini,
    /// github, gitlab, or one the policy file's [credentials] defines), optionally with its
    /// source (`=env:VAR`, `=file:PATH`, `=keyring:SERVICE/ACCOUNT`). Inside, the route's key
    /// variable holds a per-run stand-in and its base-URL variable points at the proxy, which
    /// puts the real value on requests to the route's upstream only. Implies `--net proxy`.
    #[arg(long = "credential", value_name = "NAME[=SOURCE]")]
    credential: Vec<String>,
    /// Network: none (default: only the sandbox's own loopback), proxy (egress only through
    /// stockade's proxy, under the domain rules) or host (the host's network, unfiltered).
    #[arg(long, value_name = "MODE", value_parser = ["none", "proxy", "host"])]
    net: Option<String>,
    /// The isolation backend: native (default: namespaces, Landlock, seccomp), gvisor
    /// (gVisor's runsc; the command's kernel is its Sentry), podman or docker (a hardened
    /// container of that engine).
    #[arg(long, value_name = "NAME", value_parser = ["native", "gvisor", "podman", "docker"])]
    backend: Option<String>,
    /// Mode proxy: allow this domain (`example.com`, `*.example.com` = subdomains; `:PORT`).
    #[arg(long = "allow-domain", value_name = "PATTERN")]
    allow_domain: Vec<String>,
    /// Mode proxy: never reach this domain (wins over every allow rule).
    #[arg(long = "deny-domain", value_name = "PATTERN")]
    deny_domain: Vec<String>,
    /// Mode proxy: allow this IP, network or exact host (`127.0.0.1:5432`, `10.0.0.0/8`): the
    /// only way to reach IP literals and loopback, private or link-local addresses.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    allow_host: Vec<String>,
    /// End the whole run after SECONDS (exit code 124); 0: no limit. Default: 600.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// Size of the private /tmp and /dev/shm (memory), e.g. 512M, 2G. Default: 1G.
    #[arg(long = "tmp-size", value_name = "SIZE")]
    tmp_size: Option<String>,
    /// Open files per process (RLIMIT_NOFILE, soft and hard; can only be lowered).
    #[arg(long, value_name = "N")]
    files: Option<u64>,
    /// Memory of the whole run, no swap beyond it: a size (512M, 2G) or a share of the
    /// machine's (50%); 0: no limit. Default: 50%.
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Processes and threads of the whole run at once; 0: no limit. Default: 1024.
    #[arg(long, value_name = "N")]
    pids: Option<u64>,
    /// CPU of the whole run in cores (0.5: half a core). Needs a cgroup. Default: no limit.
    #[arg(long, value_name = "CORES", value_parser = parse_cores)]
    cpu: Option<policy::Cores>,
    /// Output passed on per stream (stdout, stderr); beyond it the middle is dropped with a
    /// marker (head and tail kept); 0: no limit. Default: 16M.
    #[arg(long = "output-limit", value_name = "SIZE")]
    output_limit: Option<String>,
    /// Review mode: the command sees the workspace through a copy-on-write view; its changes
    /// wait in $XDG_STATE_HOME/stockade/changes/RUN until `stockade apply` (`stockade changes`,
    /// `diff`, `discard`). `review = true` in a policy file does the same.
    #[arg(long, conflicts_with = "ephemeral")]
    review: bool,
    /// As --review, but the changes are thrown away when the run ends (the report still
    /// counts them).
    #[arg(long)]
    ephemeral: bool,
    /// With --review or --ephemeral: what the run may write into its view of the workspace
    /// (e.g. 2G); beyond it writes fail with ENOSPC inside and the report says the limit was
    /// reached. The writes are held in memory (a tmpfs of that size) until the run ends.
    #[arg(long, value_name = "SIZE")]
    disk: Option<String>,
}

fn parse_cores(text: &str) -> Result<policy::Cores, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(policy::Cores::new)
        .ok_or_else(|| {
            format!("expected a number of cores of at least 0.01 (e.g. 0.5, 2), not {text:?}")
        })
}

// What `run` and `shell-prefix` share besides the policy: records, degrading, sanitizing.
// (A plain comment: under `defer` a doc comment here would become the subcommand's about,
// replacing its variant's.)
#[derive(Args)]
struct RecordArgs {
    /// Write a JSON run record here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Append JSON-line audit events here.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Run even if Landlock or seccomp cannot be enforced (recorded in the report).
    #[arg(long)]
    allow_degraded: bool,
    /// Pass the command's stdout and stderr (terminals too) through the sanitizer: no
    /// invisible, Bidi or Tag characters, no terminal escape sequences (see `stockade sanitize`).
    #[arg(long)]
    sanitize_output: bool,
    /// Print stockade's own errors as JSON on stderr.
    #[arg(long)]
    json: bool,
    /// After the command, append one `<stockade-hint>` block to stderr listing what stockade
    /// refused (violations, network refusals, limits) with the rule and the flag or policy
    /// line that would allow each; nothing when nothing was refused (`hints = true` in the
    /// policy file does the same).
    #[arg(long)]
    hints: bool,
}

#[derive(Args)]
struct ShellPrefixArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    record: RecordArgs,
    /// The command string, as Claude Code passes it.
    #[arg(value_name = "STRING")]
    command: String,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Run `/bin/sh -c STRING` instead of a program.
    #[arg(long, value_name = "STRING", conflicts_with = "argv")]
    shell: Option<String>,
    /// Check the command first under the argv-only policy (as `stockade guard`) and run the
    /// resulting argv directly, without a shell (`--shell STRING` is parsed, not run by sh).
    #[arg(long)]
    guard: bool,
    #[command(flatten)]
    record: RecordArgs,
    /// Give the command no terminal of its own even when stdin, stdout or stderr is one.
    /// By default such a run gets a new terminal inside the sandbox (job control, `/dev/tty`,
    /// Ctrl-C to the command; `~.` at the start of a line ends the run); with this flag its
    /// terminal output goes through pipes and a terminal stdin becomes /dev/null.
    #[arg(long)]
    no_tty: bool,
    /// Container backends: leave the run's container behind when it ends, for debugging; the
    /// run record (--report) names it and the command that removes it.
    #[arg(long)]
    keep: bool,
    /// Read policy changes from descriptor N while the run goes on, one JSON object a line,
    /// each list replacing the current one: `allow_domains`, `deny_domains`, `allow_hosts`
    /// (the proxy's rules, in force at once), `allow_write`, `allow_read`, `deny_read`,
    /// `deny_write` (fixed for this run's life: they would apply to a next run). Each line
    /// is answered on N (else on stderr) and audited.
    #[arg(long, value_name = "N")]
    control_fd: Option<i32>,
    /// The program and its arguments.
    #[arg(last = true, value_name = "PROGRAM")]
    argv: Vec<String>,
}

fn print_error(e: &Error, json: bool) {
    let hint = e.hint();
    if json {
        let mut v = serde_json::json!({
            "error": { "code": e.code(), "kind": e.kind(), "message": e.to_string(), "hint": hint }
        });
        if let Some(construct) = e.construct() {
            v["error"]["construct"] = construct.into();
        }
        errln!("{v}");
    } else {
        // Messages name paths the sandbox chose: they stay on their line, inert.
        let message = e.to_string();
        let message = output::shown_line(&message);
        let notice = sandbox::Notice::new("error", e.registry_code(), &message);
        errln!("{}", notice.with_hint(Some(&hint)));
    }
}

/// The flags of `args`, as `policy::resolve` takes them.
fn overrides(args: &PolicyArgs) -> policy::Overrides {
    policy::Overrides {
        profile: args.profile.clone(),
        allow_write: args.allow_write.clone(),
        deny_read: args.deny_read.clone(),
        allow_read: args.allow_read.clone(),
        deny_write: args.protect.clone(),
        env: args.env.clone(),
        net: args.net.as_deref().map(|m| match m {
            "proxy" => policy::NetworkMode::Proxy,
            "host" => policy::NetworkMode::Host,
            _ => policy::NetworkMode::None,
        }),
        allow_domains: args.allow_domain.clone(),
        deny_domains: args.deny_domain.clone(),
        allow_hosts: args.allow_host.clone(),
        timeout: args.timeout,
        tmp_size: args.tmp_size.clone(),
        files: args.files,
        memory: args.memory.clone(),
        pids: args.pids,
        cpu: args.cpu,
        output_limit: args.output_limit.clone(),
        backend: args.backend.as_deref().and_then(policy::BackendName::parse),
        credentials: args.credential.clone(),
        agent: args.agent.clone(),
        presets: args.preset.clone(),
        disk: args.disk.clone(),
        workspace_mode: if args.review {
            Some(policy::WorkspaceMode::Review)
        } else if args.ephemeral {
            Some(policy::WorkspaceMode::Ephemeral)
        } else {
            None
        },
    }
}

/// The policy of `args`, with the file and flags it was resolved from.
fn resolve(
    args: &PolicyArgs,
) -> Result<
    (
        policy::Policy,
        Option<policy::PolicyFile>,
        policy::Overrides,
    ),
    Error,
> {
    let (policy, sources, overrides) = resolve_sources(args)?;
    Ok((policy, sources.merged(), overrides))
}

/// The policy of `args`, with the files and flags it was resolved from.
fn resolve_sources(
    args: &PolicyArgs,
) -> Result<(policy::Policy, default_policy::Sources, policy::Overrides), Error> {
    let sources = default_policy::load(args)?;
    let overrides = overrides(args);
    Ok((
        policy::resolve(sources.merged(), &overrides)?,
        sources,
        overrides,
    ))
}

fn run(args: RunArgs) -> Result<u8, Error> {
    let guarded = args.guard.then(|| (args.shell.clone(), args.argv.clone()));
    let argv = match args.shell {
        Some(s) => vec!["/bin/sh".to_string(), "-c".to_string(), s],
        None => args.argv,
    };
    // The stages before the run are spans too (`STOCKADE_LOG=debug`), as the run's own.
    let loading = tracing::debug_span!("policy").entered();
    let prepared = resolve_sources(&args.policy).and_then(|(mut policy, sources, overrides)| {
        let request = match &guarded {
            Some((shell, argv)) => guard_command::guarded_request(
                shell.as_deref(),
                argv,
                args.policy.workspace.clone(),
            )?,
            None => RunRequest::new(argv, args.policy.workspace.clone())?,
        };
        default_policy::print_notes(&sources);
        default_policy::check_reach(&mut policy, &request, &sources)?;
        Ok((policy, request, sources, overrides))
    });
    drop(loading);
    let (policy, mut request, sources, overrides) = match prepared {
        Ok(p) => p,
        Err(e) => {
            // Refusals before the run are audited too; a failing audit write must not hide
            // the original error.
            if let Some(audit) = &args.record.audit {
                let _ = stockade::audit_refusal(audit, &e);
            }
            return Err(e);
        }
    };
    request.options.allow_degraded = args.record.allow_degraded;
    request.options.sanitize_output = args.record.sanitize_output;
    request.options.no_terminal = args.no_tty;
    request.options.keep = args.keep;
    request.options.limit_terminal = args.policy.output_limit.is_some();
    request.report = args.record.report;
    request.audit = args.record.audit;
    request.policy_file = args.policy.policy.clone();
    // A `[[commands]]` entry for this program: its grants, or the run outside the sandbox.
    let matched =
        tracing::debug_span!("commands").in_scope(|| stockade::match_command(&policy, &request))?;
    let policy = match &matched {
        Some(m) if m.rule.excluded => {
            stockade::check_trust(&request)?;
            errln!(
                "stockade: running {} OUTSIDE the sandbox: [[commands]] entry {} in {} has excluded = true{}",
                output::shown(&m.program.display().to_string()),
                m.index,
                sources.described().unwrap_or_default(),
                if m.rule.reason.is_empty() { String::new() } else { format!(" ({})", output::shown(&m.rule.reason)) }
            );
            let code = stockade::run_excluded(&request, m)?;
            return Ok(u8::try_from(code).unwrap_or(EXIT_REFUSED));
        }
        Some(m) => {
            errln!(
                "stockade: {} gets the grants of [[commands]] entry {}{}",
                output::shown(&m.program.display().to_string()),
                m.index,
                if m.rule.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", output::shown(&m.rule.reason))
                }
            );
            m.rule.grant(&policy)
        }
        None => policy,
    };
    request.command_rule = matched;
    if let Some(fd) = args.control_fd {
        let live = stockade::LivePolicy::new(policy.clone())?;
        request.live = Some(live.clone());
        control_fd::start(fd, live, request.audit.clone())?;
    }
    run_notices::before_review(&policy, &request);
    let result = stockade::run(&policy, &request)?;
    run_notices::print(&result, &request, &policy, args.record.json);
    let file = sources.merged();
    if args.record.hints || file.as_ref().is_some_and(|f| f.hints == Some(true)) {
        let origins =
            policy::origin::Origins::new(file.as_ref(), &overrides).with_layers(&sources.layers);
        let explain = |path: &Path| {
            stockade::why::violation_rule(
                &policy,
                &request,
                &origins,
                args.policy.policy.as_deref(),
                path,
            )
            .map(|(rule, allow)| (rule.described(), allow))
        };
        let denials = run_hints::denials(&result, policy.limits.timeout, &explain);
        if let Some(block) = run_hints::block(&denials) {
            errln!("{block}");
        }
    }
    // A review run whose change set could not be sealed failed, whatever the command's code.
    if result.review_error.is_some() {
        return Ok(EXIT_REFUSED);
    }
    Ok(u8::try_from(result.exit_code).unwrap_or(EXIT_REFUSED))
}

fn apparmor_profile() -> Result<u8, Error> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| Error::Io {
            what: "find the stockade binary".into(),
            cause: e,
        })?;
    out!("{}", stockade::native_plan::apparmor_profile(&exe));
    Ok(0)
}

/// `ok  `, `FAIL` (a required check failed) or `warn`, as `doctor` prints a check.
fn check_mark(c: &stockade::Check) -> &'static str {
    if c.ok {
        "ok  "
    } else if c.required {
        "FAIL"
    } else {
        "warn"
    }
}

fn doctor(json: bool, backend: Option<&str>) -> u8 {
    let (name, checks, layers) = stockade::backend_checks(
        backend
            .and_then(policy::BackendName::parse)
            .unwrap_or_default(),
    );
    let ok = checks.iter().all(|c| c.ok || !c.required);
    if json {
        let mut v = serde_json::json!({ "ok": ok, "backend": name, "checks": checks });
        if !layers.is_empty() {
            v["enforced_by"] = serde_json::json!(layers);
        }
        outln!("{v}");
    } else {
        for c in &checks {
            outln!("[{}] {:<28} {}", check_mark(c), c.name, c.detail);
            if let Some(fix) = &c.fix {
                outln!("       fix: {fix}");
            }
        }
        if !layers.is_empty() {
            outln!("under the {name} backend:");
            for l in layers {
                outln!("  {}: {}", l.what, l.by);
            }
        }
        outln!(
            "{}",
            if ok {
                "stockade can enforce its default policy on this machine."
            } else {
                "stockade cannot enforce its default policy here: `stockade run` will refuse (exit 125) until the failures above are fixed."
            }
        );
    }
    if ok {
        0
    } else {
        1
    }
}

/// One line of what the sanitizer removed, and one with the text hidden in Tags if any.
fn report_sanitized(what: &str, report: &sanitize::Report) {
    let parts: Vec<String> = report
        .found
        .iter()
        .map(|(c, f)| {
            let name = serde_json::to_value(c)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{} {name}", f.count)
        })
        .collect();
    errln!("stockade: {what}: removed {}", parts.join(", "));
    if !report.hidden_text.is_empty() {
        errln!(
            "stockade: {what}: hidden text (Unicode Tags): {:?}",
            report.hidden_text
        );
    }
}

/// `stockade sanitize`: stdin → stdout through [`sanitize::Sanitizer`], in 64 KiB chunks (reads of
/// 256 KiB and 1 MiB measured slower: the kernel's copy into them took three times as long).
fn sanitize(report_file: Option<&Path>, json: bool) -> Result<u8, Error> {
    use std::io::{Read, Write};
    let io = |what: &str| {
        let what = what.to_string();
        move |cause| Error::Io { what, cause }
    };
    let mut s = sanitize::Sanitizer::new();
    let (mut input, mut stdout) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut buf = vec![0u8; 64 * 1024];
    let mut clean = Vec::with_capacity(buf.len() + 64);
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io("read standard input")(e)),
        };
        clean.clear();
        s.push(&buf[..n], &mut clean);
        stdout
            .write_all(&clean)
            .unwrap_or_else(|e| output::stdout_failed(e));
    }
    clean.clear();
    let report = s.finish(&mut clean);
    stdout
        .write_all(&clean)
        .and_then(|()| stdout.flush())
        .unwrap_or_else(|e| output::stdout_failed(e));
    let value = serde_json::to_value(&report).unwrap_or_default();
    if let Some(path) = report_file {
        // Like a run's report: a link planted at the name is replaced, never followed.
        stockade::write_report_file(path, format!("{value:#}\n").as_bytes())?;
    }
    if json {
        errln!("{value}");
    } else if !report.is_clean() {
        report_sanitized("sanitize", &report);
    }
    Ok(0)
}

/// `STOCKADE_LOG=LEVEL` (error, warn, info, debug, trace): the stages of a run as spans on
/// stderr, each closed with its time (`time.busy`, `time.idle`). Unset: nothing is installed.
fn init_log() {
    let Some(value) = std::env::var_os("STOCKADE_LOG") else {
        return;
    };
    let level = value
        .to_str()
        .and_then(|v| v.parse::<tracing_subscriber::filter::LevelFilter>().ok());
    let Some(level) = level else {
        errln!(
            "stockade: warning: STOCKADE_LOG={} is not a level (error, warn, info, debug, trace); not logging",
            value.to_string_lossy()
        );
        return;
    };
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // stockade's own crates at the level asked for; the libraries under the proxy (tokio,
    // hyper, hickory) only from warnings up, or their debug lines drown the stages.
    let ours = [
        "stockade",
        "native",
        "net",
        "guard",
        "policy",
        "stockade_cli",
    ]
    .into_iter()
    .fold(Targets::new(), |t, name| t.with_target(name, level))
    .with_default(level.min(LevelFilter::WARN));
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(false)
        .finish()
        .with(ours)
        .init();
}

fn main() -> ExitCode {
    init_log();
    let cli = Cli::parse();
    let (result, json) = match cli.command {
        Command::Run(args) => {
            let args = *args;
            let json = args.record.json;
            (run(args), json)
        }
        Command::Hook { agent: _, options } => (hook::main(&options), false),
        Command::ShellPrefix(args) => {
            let json = args.record.json;
            (shell_prefix::run_args(*args).and_then(run), json)
        }
        Command::Mcp(args) => (mcp_command::main(&args), false),
        Command::FileTool => (mcp_command::file_tool(), false),
        Command::Doctor { json, backend } => (Ok(doctor(json, backend.as_deref())), json),
        Command::ApparmorProfile => (apparmor_profile(), false),
        Command::Sanitize { report, json } => (sanitize(report.as_deref(), json), json),
        Command::Selftest(args) => (selftest::main(&args), args.json),
        Command::Guard(args) => (guard_command::main(&args), args.json),
        Command::Trust(command) => trust::main(command),
        Command::Proxy(args) => (proxy_command::main(&args), false),
        Command::Completions { shell } => (man_and_completions::completions(shell), false),
        Command::Man { subcommand } => (man_and_completions::man(&subcommand), false),
        Command::Why(args) => (why_command::main(&args), args.json),
        Command::Snapshot(args) => (snapshot_command::main(&args), args.json),
        Command::Policy(PolicyCommand::Show { policy, json }) => {
            (policy_show::main(*policy, json), json)
        }
        Command::Runs(args) => (review_command::runs(&args), args.json),
        Command::Changes(args) => (review_command::changes(&args), args.json),
        Command::Diff(args) => (review_command::diff(&args), false),
        Command::Apply(args) => (review_command::apply(&args), args.json),
        Command::Discard(args) => (review_command::discard(&args), false),
        Command::Policy(PolicyCommand::Check { file }) => (
            policy::read_policy_file(&file)
                .and_then(|f| policy::resolve(Some(f), &policy::Overrides::default()))
                .map(|_| {
                    outln!("{}: ok", file.display());
                    0
                })
                .map_err(Error::from),
            false,
        ),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            print_error(&e, json);
            ExitCode::from(EXIT_REFUSED)
        }
    }
}
