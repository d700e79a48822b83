//! `stockade policy show [--json]`: the policy a run with the same options would get. Without
//! `--json`, a page for a person: mode, workspace, what is readable and writable, the masks
//! and protected paths counted with a few examples, the network, the limits with how they are
//! enforced here, the environment and the credentials, each part tagged with where it came
//! from (`[flag]`, `[policy file]`, `[user policy]`, `[project policy]`, `[profile]`,
//! `[credential]`); the head names the policy files read and those found but not used.
//! `--json` prints everything (the files, the policy, its digest, the protected paths with
//! their sources and the full sandbox plan), as one JSON document.

use policy::origin::{Field, Origin, Origins, Setting};
use policy::{NetworkMode, Policy, ProtectedSource, ReadScope};
use sandbox::human_size;
use stockade::{Error, RunRequest};

use crate::output::outln;
use crate::PolicyArgs;

/// How many entries of a long list are shown as examples.
const EXAMPLES: usize = 5;

pub fn main(args: PolicyArgs, json: bool) -> Result<u8, Error> {
    let (mut policy, sources, overrides) = crate::resolve_sources(&args)?;
    let file = sources.merged();
    let request = RunRequest::new(vec!["true".into()], args.workspace.clone())?;
    // What a run would get: refused, or with the user file's directory protected.
    crate::default_policy::check_reach(&mut policy, &request, &sources)?;
    let plan = stockade::plan(&policy, &request)?;
    let protected = policy::protected_sources(&policy, &args.protect);
    if json {
        let files: Vec<serde_json::Value> = sources
            .layers
            .iter()
            .map(|l| serde_json::json!({ "kind": l.kind, "path": l.path }))
            .collect();
        let doc = serde_json::json!({
            "policy_files": files,
            "policy_files_not_used": sources.notes,
            "policy": policy,
            "policy_digest": policy::digest(&policy),
            "protected_paths": protected,
            "plan": plan,
        });
        outln!("{doc}");
        return Ok(0);
    }
    let origins = Origins::new(file.as_ref(), &overrides).with_layers(&sources.layers);
    let described = sources.described();
    let shown = Shown {
        policy: &policy,
        plan: &plan,
        protected: &protected,
        origins,
        files: described.as_deref(),
        workspace: &request.invocation.workspace,
    };
    let mut lines = shown.lines();
    // The files found but not used, before the closing blank line and note.
    let footer = lines.split_off(lines.len().saturating_sub(2));
    for line in lines {
        outln!("{line}");
    }
    for note in &sources.notes {
        outln!("not used     {}", crate::output::shown_line(note));
    }
    for line in footer {
        outln!("{line}");
    }
    Ok(0)
}

/// What the summary is made of.
struct Shown<'a> {
    policy: &'a Policy,
    plan: &'a stockade::native_plan::Plan,
    protected: &'a [ProtectedSource],
    origins: Origins<'a>,
    /// The policy files, as [`crate::default_policy::Sources::described`] says.
    files: Option<&'a str>,
    workspace: &'a std::path::Path,
}

/// `[flag]`, `[policy file]`, `[preset npm]`, ...
fn tag(origin: Origin) -> String {
    format!("[{origin}]")
}

/// `[user policy]`, `[project policy]`, `[policy file]` (`--policy`, or not known).
fn file_tag(layer: Option<&policy::origin::Layer>) -> String {
    match layer.map(|l| l.kind) {
        Some(k @ (policy::origin::LayerKind::User | policy::origin::LayerKind::Project)) => {
            format!("[{k}]")
        }
        _ => tag(Origin::PolicyFile),
    }
}

/// `a, b, c, d, e, ... (12 more)`, or `none`.
fn examples<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    let shown: Vec<&str> = items.iter().take(EXAMPLES).map(AsRef::as_ref).collect();
    match items.len().saturating_sub(EXAMPLES) {
        0 => shown.join(", "),
        more => format!("{}, ... ({more} more)", shown.join(", ")),
    }
}

impl Shown<'_> {
    /// The tag of `entry` of `field`: `[user policy]`, `[project policy]` or `[policy file]`
    /// for an entry of a file, by the file that gave it.
    fn entry_tag(&self, field: Field, entry: &str) -> String {
        match self.origins.entry(field, entry) {
            Origin::PolicyFile => file_tag(self.origins.entry_layer(field, entry)),
            o => tag(o),
        }
    }

    /// The tag of `setting`, as [`Shown::entry_tag`].
    fn setting_tag(&self, setting: Setting) -> String {
        match self.origins.setting(setting) {
            Origin::PolicyFile => file_tag(self.origins.setting_layer(setting)),
            o => tag(o),
        }
    }

    fn lines(&self) -> Vec<String> {
        let mut out = self.head();
        out.extend(self.filesystem());
        out.extend(self.network());
        out.extend(self.limits());
        out.extend(self.environment());
        out.extend(self.credentials());
        out.extend(self.commands());
        out.push(String::new());
        out.push(
            "Tags say where a part came from. `stockade policy show --json` prints all of it: \
             every entry, the protected paths with their sources, the full sandbox plan."
                .into(),
        );
        out
    }

    /// Entries of `field` that did not come from the profile, each with its tag.
    fn added(&self, field: Field, entries: &[String]) -> Vec<String> {
        entries
            .iter()
            .map(|e| (e, self.origins.entry(field, e)))
            .filter(|(_, o)| *o != Origin::Profile)
            .map(|(e, _)| format!("{e} {}", self.entry_tag(field, e)))
            .collect()
    }

    fn head(&self) -> Vec<String> {
        let p = self.policy;
        let from = match self.files {
            Some(f) => format!("policy files: {f}"),
            None => "no policy file".into(),
        };
        let profile = match self.origins.setting(Setting::Profile) {
            Origin::Profile => "(the default)".to_owned(),
            _ => self.setting_tag(Setting::Profile),
        };
        let mut out = vec![
            format!(
                "profile      {} {profile} ({from}; digest {})",
                p.profile,
                policy::digest(p)
            ),
            format!(
                "backend      {} {}",
                p.backend.as_str(),
                self.setting_tag(Setting::Backend)
            ),
            format!("workspace    {}", self.workspace.display()),
        ];
        for (i, name) in p.presets.iter().enumerate() {
            if let Ok(preset) = policy::preset(name) {
                out.insert(1 + i, format!("preset       {name}: {}", preset.summary));
            }
        }
        match &self.plan.cwd_fallback {
            Some(f) => out.push(format!(
                "starts in    {} (not the current directory {}: {})",
                self.workspace.display(),
                f.cwd.display(),
                f.reason
            )),
            None => out.push(format!("starts in    {}", self.plan.cwd.display())),
        }
        out
    }

    fn filesystem(&self) -> Vec<String> {
        let fs = &self.policy.filesystem;
        let plan = self.plan;
        let scope = self.setting_tag(Setting::ReadScope);
        let readable = match fs.read_scope {
            ReadScope::Host => format!("the whole host, read-only, except what is masked {scope}"),
            ReadScope::AllowList => format!(
                "only allow_read, the writable roots and the system's runtime paths {scope}"
            ),
        };
        let writable: Vec<String> = plan
            .writable_roots
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let tmp = self
            .policy
            .limits
            .tmp_size
            .as_deref()
            .unwrap_or(policy::DEFAULT_TMP_SIZE);
        let mut out = vec![
            "filesystem".into(),
            format!("  readable   {readable}"),
            format!(
                "  writable   {}; /tmp and /dev/shm private and empty ({tmp} of memory)",
                if writable.is_empty() {
                    "nothing on the host".into()
                } else {
                    writable.join(", ")
                }
            ),
        ];
        if !self.policy.filesystem.private.is_empty() {
            out.push(format!(
                "  private    {}: each run sees them empty and its own (a tmpfs gone with the run)",
                self.policy.filesystem.private.join(", ")
            ));
        }
        let mut list = |name: &str, field: Field, entries: &[String], what: &str| {
            let added = self.added(field, entries);
            if entries.is_empty() {
                return;
            }
            let mut line = format!("  {name:<10} {} {what}", entries.len());
            if entries.len() > added.len() {
                let from_profile: Vec<&String> = entries
                    .iter()
                    .filter(|e| self.origins.entry(field, e) == Origin::Profile)
                    .collect();
                line.push_str(&format!(
                    ", e.g. {} [profile]",
                    examples(&from_profile.iter().map(|s| s.as_str()).collect::<Vec<_>>())
                ));
            }
            if !added.is_empty() {
                line.push_str(&format!("; added: {}", added.join(", ")));
            }
            out.push(line);
        };
        list(
            "also read",
            Field::AllowRead,
            &fs.allow_read,
            "paths readable even inside a masked one",
        );
        list(
            "masked",
            Field::DenyRead,
            &fs.deny_read,
            "patterns cannot be read",
        );
        list(
            "read empty",
            Field::ReadEmpty,
            &fs.read_empty,
            "files read as empty (shell start-up files often export tokens)",
        );
        out.push(format!(
            "  exist here {} of the masked paths, {} of those read as empty",
            plan.masked.len(),
            plan.emptied.len()
        ));
        out.push(self.protected_line());
        out
    }

    fn protected_line(&self) -> String {
        let live: Vec<&ProtectedSource> = self.protected.iter().filter(|p| !p.removed).collect();
        // The catalogue's and stockade's own as listed; the others by where they came from
        // (a flag, the policy file, a preset).
        let source = |p: &ProtectedSource| match p.source {
            "built-in" | "catalogue" => p.source.to_owned(),
            _ => self.origins.entry(Field::DenyWrite, &p.pattern).to_string(),
        };
        let mut sources: Vec<String> = Vec::new();
        for p in &live {
            let s = source(p);
            if !sources.contains(&s) {
                sources.push(s);
            }
        }
        let mut parts = Vec::new();
        for from in &sources {
            let of: Vec<&str> = live
                .iter()
                .filter(|p| source(p) == *from)
                .map(|p| p.pattern.as_str())
                .collect();
            parts.push(format!("{} {from} ({})", of.len(), examples(&of)));
        }
        let removed: Vec<&str> = self
            .protected
            .iter()
            .filter(|p| p.removed)
            .map(|p| p.pattern.as_str())
            .collect();
        let mut line = format!(
            "  protected  {} read-only inside writable roots, refused on creation: {}",
            live.len(),
            parts.join("; ")
        );
        if !removed.is_empty() {
            line.push_str(&format!(
                "; unprotected by the policy file: {}",
                removed.join(", ")
            ));
        }
        line
    }

    fn network(&self) -> Vec<String> {
        let net = &self.policy.network;
        let mode = self.setting_tag(Setting::NetworkMode);
        let head = match net.mode {
            NetworkMode::None => {
                format!("network      none {mode}: only the sandbox's own loopback; nothing reaches the host or beyond")
            }
            NetworkMode::Host => {
                format!("network      host {mode}: the host's network, unfiltered")
            }
            NetworkMode::Proxy => format!(
                "network      proxy {mode}: egress only through stockade's proxy ({} inside), under these rules",
                self.plan
                    .network
                    .proxy
                    .map_or_else(|| sandbox::PROXY_ADDR.to_string(), |a| a.to_string())
            ),
        };
        let mut out = vec![head];
        if net.mode == NetworkMode::None
            && (net.allow_domains.len() + net.deny_domains.len() + net.allow_hosts.len()) > 0
        {
            out.push(
                "  (the rules below apply with --net proxy only; under none nothing is reached)"
                    .into(),
            );
        }
        for (name, field, entries) in [
            ("allowed domains", Field::AllowDomains, &net.allow_domains),
            ("denied domains", Field::DenyDomains, &net.deny_domains),
            ("allowed hosts", Field::AllowHosts, &net.allow_hosts),
        ] {
            if net.mode == NetworkMode::Proxy || !entries.is_empty() {
                let tagged: Vec<String> = entries
                    .iter()
                    .map(|e| format!("{e} {}", self.entry_tag(field, e)))
                    .collect();
                let text = if tagged.is_empty() {
                    "none".to_owned()
                } else {
                    tagged.join(", ")
                };
                out.push(format!("  {name:<16} {text}"));
            }
        }
        out
    }

    fn limits(&self) -> Vec<String> {
        let l = &self.policy.limits;
        let r = &self.plan.resources;
        let o = |s: Setting| self.setting_tag(s);
        let enforced = |m: Option<(u64, stockade::native_plan::Mechanism)>| {
            m.map_or(String::new(), |(_, m)| format!(" ({})", m.describe()))
        };
        let timeout = match l.timeout {
            Some(0) | None => "no limit".to_owned(),
            Some(s) => format!("{s} s"),
        };
        let memory = match (&l.memory, r.memory) {
            (Some(m), Some((bytes, _))) if m.ends_with('%') => {
                format!("{m} of this machine = {}", human_size(bytes))
            }
            (_, Some((bytes, _))) => human_size(bytes),
            _ => "no limit".to_owned(),
        };
        let pids = r.pids.map_or("no limit".to_owned(), |(n, _)| n.to_string());
        let cpu = l
            .cpu
            .map_or("no limit".to_owned(), |c| format!("{c} cores"));
        let files = l
            .files
            .map_or("as inherited".to_owned(), |n| format!("{n} per process"));
        let output = match self.plan.output_limit {
            Some(n) => format!("{} per stream (head and tail kept)", human_size(n)),
            None => "no limit".to_owned(),
        };
        vec![
            "limits".into(),
            format!("  timeout    {timeout} {}", o(Setting::Timeout)),
            format!(
                "  memory     {memory}{} {}",
                enforced(r.memory),
                o(Setting::Memory)
            ),
            format!(
                "  processes  {pids}{} {}",
                enforced(r.pids),
                o(Setting::Pids)
            ),
            format!(
                "  cpu        {cpu}{} {}",
                enforced(r.cpu_millis),
                o(Setting::Cpu)
            ),
            format!("  open files {files} {}", o(Setting::Files)),
            format!(
                "  /tmp size  {} {}",
                l.tmp_size.as_deref().unwrap_or(policy::DEFAULT_TMP_SIZE),
                o(Setting::TmpSize)
            ),
            format!("  output     {output} {}", o(Setting::OutputLimit)),
        ]
    }

    fn environment(&self) -> Vec<String> {
        let env = &self.policy.env;
        let names: Vec<&str> = self.plan.env.iter().map(|(n, _)| n.as_str()).collect();
        let set: Vec<String> = env.set.keys().cloned().collect();
        let tagged = |field: Field, entries: &[String]| -> String {
            if entries.is_empty() {
                return "none".into();
            }
            entries
                .iter()
                .map(|e| format!("{e} {}", self.entry_tag(field, e)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut allow_added = self.added(Field::EnvAllow, &env.allow);
        if allow_added.is_empty() {
            allow_added.push("none".into());
        }
        vec![
            format!(
                "environment  rebuilt from scratch; {} variables here (values not shown): {}",
                names.len(),
                names.join(" ")
            ),
            format!(
                "  from the caller  {} names or patterns, secret-looking names never; added: {}",
                env.allow.len(),
                allow_added.join(", ")
            ),
            format!(
                "  passed as is     {}",
                tagged(Field::EnvPassthrough, &env.passthrough)
            ),
            format!("  set              {}", tagged(Field::EnvSet, &set)),
        ]
    }

    /// `[[commands]]` entries, when there are any: what each grants, or that it runs its
    /// program outside the sandbox and with what.
    fn commands(&self) -> Vec<String> {
        let rules = &self.policy.commands;
        if rules.is_empty() {
            return Vec::new();
        }
        let mut out = vec![format!(
            "commands     {} [[commands]] entr{} [policy file]",
            rules.len(),
            if rules.len() == 1 { "y" } else { "ies" }
        )];
        for (i, r) in rules.iter().enumerate() {
            let what = if r.excluded {
                let args = match &r.allowed_args {
                    None => "no allowed_args: only git runs without them".to_string(),
                    Some(a) if a.is_empty() => "allowed_args none".to_string(),
                    Some(a) => format!("allowed_args {}", a.join(" ")),
                };
                let files = if r.runs_workspace_files {
                    "; runs_workspace_files: it may run from a writable root and read files there the sandbox could have written"
                } else {
                    ""
                };
                format!("excluded: runs OUTSIDE the sandbox; {args}{files}")
            } else {
                let mut grants = Vec::new();
                for (key, list) in [
                    ("allow_write", &r.allow_write),
                    ("allow_read", &r.allow_read),
                    ("allow_domains", &r.allow_domains),
                    ("allow_hosts", &r.allow_hosts),
                    ("env", &r.env),
                ] {
                    if !list.is_empty() {
                        grants.push(format!("{key} {}", list.join(" ")));
                    }
                }
                grants.join("; ")
            };
            out.push(format!("  {i} {:<14} {what}", r.program));
        }
        out
    }

    fn credentials(&self) -> Vec<String> {
        let creds = &self.policy.credentials;
        if creds.is_empty() {
            return vec!["credentials  none".into()];
        }
        let mut out = vec![format!(
            "credentials  {} (the command gets stand-ins; the proxy puts the real values on their requests)",
            creds.len()
        )];
        for c in creds {
            let to = if c.route.is_masked() {
                format!("hosts {}", c.route.hosts.join(", "))
            } else {
                c.route.upstream.clone()
            };
            out.push(format!(
                "  {:<16} from {} to {to} {}",
                c.name,
                c.source.describe(),
                self.entry_tag(Field::Credentials, &c.name)
            ));
        }
        out
    }
}
