//! The catalogue of a home's own persistence points: files and directories in the user's home
//! that the host runs, sources or searches for programs without the user touching a project
//! (at login, in every shell, on every program name looked up on `PATH`, when sshd or an
//! editor starts). Data, beside [`crate::host_exec`].
//!
//! In every profile these are protected paths (`deny_write`, anchored at `~`): when a
//! writable root holds the home or part of it (the home as the workspace, a workspace above
//! the home, `--allow-write ~/.config`), they stay read-only while the run lasts and are
//! refused on creation (mediated creation; under gVisor the post-run sweep quarantines what a
//! run made), as are a directory renamed or a symbolic link made at one of their ancestors.
//! Elsewhere they are outside every writable root and read-only anyway. Shell start-up files
//! the project catalogue already names (`.bashrc`, `.profile`, `.zshrc`, `.config/fish`, ...)
//! apply at any depth there and are not repeated here.
//!
//! Crontabs live in `/var/spool/cron`, outside the home and read-only in every sandbox, and
//! `crontab(1)` is set-id, which `no_new_privs` disarms: no entry is needed for them.
//!
//! No list is complete: a home also holds toolchains (`~/.rustup`), caches of sources host
//! builds compile (`~/.cargo/registry`, `~/go/pkg/mod`, `~/.m2/repository`) and whatever a
//! start-up file sources. A home as a writable root hands those to the run; review mode, or
//! a project directory as the workspace, is the full answer.

use crate::host_exec::HostExec;

const fn entry(path: &'static str, tool: &'static str, why: &'static str) -> HostExec {
    HostExec { path, tool, why }
}

/// Every home entry, grouped by what runs it. Each is `~/`-anchored and exact (no globs).
pub const HOME_EXEC: &[HostExec] = &[
    // Login and session.
    entry(
        "~/.config/systemd",
        "systemd --user",
        "user units, timers and drop-ins (and user.conf) start programs at login or on schedule",
    ),
    entry("~/.local/share/systemd", "systemd --user", "user units are loaded from here too"),
    entry(
        "~/.config/autostart",
        "XDG autostart",
        "every `.desktop` entry's Exec runs at each graphical login",
    ),
    entry(
        "~/.config/environment.d",
        "systemd --user",
        "variables (LD_PRELOAD, PATH) for every user service and the session",
    ),
    entry("~/.pam_environment", "pam_env", "variables for every login (LD_PRELOAD, PATH)"),
    entry(
        "~/.config/plasma-workspace",
        "KDE Plasma",
        "env/ and shutdown/ scripts run at each login and logout",
    ),
    entry("~/.xinitrc", "startx", "the X session startx runs"),
    entry("~/.xserverrc", "startx", "the X server program startx runs"),
    entry("~/.xsession", "display managers", "the session script run at graphical login"),
    entry("~/.xsessionrc", "Xsession", "sourced at every graphical login (Debian)"),
    entry("~/.xprofile", "display managers", "sourced at every graphical login"),
    entry("~/.forward", "mail delivery", "a `|program` line runs that program on every mail received"),
    entry(
        "~/.local/share/applications",
        "desktop environments",
        "`.desktop` entries here replace the system's: their Exec runs when the application is opened",
    ),
    // SSH.
    entry(
        "~/.ssh",
        "sshd, ssh",
        "authorized_keys lets a planted key log in, rc and environment run at each login, config's ProxyCommand/LocalCommand run on every ssh",
    ),
    // Directories on PATH, ahead of the system's.
    entry("~/.local/bin", "PATH", "on PATH ahead of the system's (systemd, Debian and Fedora profiles): a program named like a system one runs instead"),
    entry("~/bin", "PATH", "on PATH ahead of the system's (the usual ~/.profile adds it)"),
    entry("~/.cargo/bin", "PATH (rustup)", "rustup's proxies (cargo, rustc): ~/.cargo/env puts the directory first on PATH"),
    entry("~/.cargo/env", "rustup", "sourced by the start-up files rustup edits"),
    entry("~/go/bin", "PATH (go install)", "commonly on PATH; `go install` puts programs there"),
    entry("~/.deno/bin", "PATH (deno)", "on PATH per deno's installer"),
    entry("~/.bun/bin", "PATH (bun)", "on PATH per bun's installer"),
    entry("~/.volta/bin", "PATH (volta)", "volta's shims for node, npm and yarn"),
    entry("~/.pyenv", "pyenv", "its shims and the pyenv script are on PATH; the versions run from here"),
    entry("~/.rbenv", "rbenv", "its shims are on PATH; the versions run from here"),
    entry("~/.nodenv", "nodenv", "its shims are on PATH"),
    entry("~/.asdf", "asdf", "its shims and asdf.sh (sourced by the start-up files)"),
    entry("~/.local/share/mise", "mise", "its shims and installs are on PATH"),
    entry("~/.nvm", "nvm", "nvm.sh is sourced by the start-up files; node versions run from here"),
    entry("~/.sdkman", "SDKMAN!", "sdkman-init.sh is sourced by the start-up files"),
    entry("~/.ghcup", "ghcup", "ghcup's env is sourced by the start-up files; its bin is on PATH"),
    entry("~/.nix-profile", "nix", "the profile's bin is on PATH"),
    entry("~/.dotnet/tools", "dotnet", "global tools, on PATH"),
    // Shell start-up files beyond the project catalogue's.
    entry("~/.bash_aliases", "bash", "sourced by the usual ~/.bashrc"),
    entry("~/.bashrc.d", "bash", "every file is sourced by the usual ~/.bashrc (Fedora)"),
    entry("~/.zlogout", "zsh", "sourced when a login shell exits"),
    entry("~/.oh-my-zsh", "oh-my-zsh", "sourced by ~/.zshrc, with its plugins and themes"),
    entry("~/.zsh", "zsh", "common place for files ~/.zshrc sources"),
    entry("~/.config/zsh", "zsh", "ZDOTDIR of many set-ups: the start-up files live here"),
    entry("~/.kshrc", "ksh", "sourced by interactive shells"),
    entry("~/.mkshrc", "mksh", "sourced by interactive shells"),
    entry("~/.cshrc", "csh", "sourced by every shell"),
    entry("~/.tcshrc", "tcsh", "sourced by every shell"),
    entry("~/.login", "csh", "sourced by login shells"),
    entry("~/.logout", "csh", "sourced when a login shell exits"),
    entry("~/.inputrc", "readline", "key bindings and macros of every readline program"),
    entry("~/.config/nushell", "nushell", "config.nu and env.nu run at start"),
    entry("~/.xonshrc", "xonsh", "run at start"),
    entry("~/.config/xonsh", "xonsh", "rc.xsh and rc.d run at start"),
    entry("~/.config/elvish", "elvish", "rc.elv runs at start"),
    entry("~/.config/powershell", "PowerShell", "profile.ps1 runs at start"),
    entry("~/.tmux.conf", "tmux", "run-shell and if-shell run commands at start"),
    entry("~/.config/tmux", "tmux", "as ~/.tmux.conf"),
    entry("~/.screenrc", "screen", "commands run at start"),
    // Editors.
    entry("~/.vimrc", "Vim", "run at start"),
    entry("~/.gvimrc", "gVim", "run at start"),
    entry("~/.vim", "Vim", "plugin/, after/ and autoload/ scripts run at start"),
    entry("~/.config/nvim", "Neovim", "init.lua/init.vim and plugins run at start"),
    entry("~/.local/share/nvim", "Neovim", "site/plugin and plugin managers' plugins run at start"),
    entry("~/.emacs", "Emacs", "run at start"),
    entry("~/.emacs.el", "Emacs", "run at start"),
    entry("~/.emacs.d", "Emacs", "init.el, early-init.el and packages run at start"),
    entry("~/.config/emacs", "Emacs", "as ~/.emacs.d (XDG location)"),
    entry("~/.doom.d", "Doom Emacs", "config.el runs at start"),
    entry("~/.config/doom", "Doom Emacs", "as ~/.doom.d"),
    entry("~/.config/helix", "Helix", "languages.toml names the language servers and formatters it starts"),
    entry("~/.config/Code/User", "VS Code", "settings name executables (terminal profiles, formatters); tasks run"),
    entry("~/.config/zed", "Zed", "settings and tasks name the programs it starts"),
    // Interpreters and tools that run start-up code of the user's.
    entry(
        "~/.local/lib",
        "Python",
        "the user site-packages: a `.pth` file or usercustomize.py runs in every Python started",
    ),
    entry("~/.ipython", "IPython", "profile startup scripts run at start"),
    entry("~/.Rprofile", "R", "run at start"),
    entry("~/.julia/config", "Julia", "startup.jl runs at start"),
    entry("~/.irbrc", "irb", "run at start"),
    entry("~/.pryrc", "pry", "run at start"),
    entry("~/.psqlrc", "psql", "`\\!` runs shell commands at start"),
    entry("~/.gdbinit", "gdb", "commands (and `shell`, python) run at start"),
    entry("~/.config/gdb", "gdb", "as ~/.gdbinit"),
    entry("~/.lldbinit", "lldb", "commands run at start"),
    entry("~/.gradle/init.d", "Gradle", "init scripts run on every build"),
    entry("~/.gradle/init.gradle", "Gradle", "init script run on every build"),
    entry("~/.gnupg", "GnuPG", "gpg-agent.conf names the pinentry program it runs"),
    entry("~/.aws", "AWS CLI", "config's credential_process runs a program on every call"),
    entry("~/.kube", "kubectl", "kubeconfig `exec` credential plugins run on every call"),
    entry("~/.docker", "docker", "credsStore/credHelpers and cli-plugins run programs on every call"),
    // Terminals and window managers.
    entry("~/.config/kitty", "kitty", "the shell and startup sessions it runs"),
    entry("~/.config/alacritty", "Alacritty", "the shell it runs"),
    entry("~/.config/wezterm", "WezTerm", "its Lua configuration runs at start"),
    entry("~/.wezterm.lua", "WezTerm", "its Lua configuration runs at start"),
    entry("~/.config/i3", "i3", "exec lines run at login"),
    entry("~/.config/sway", "sway", "exec lines run at login"),
    entry("~/.config/hypr", "Hyprland", "exec-once lines run at login"),
];

/// The home entry named `path`.
pub fn home_exec_entry(path: &str) -> Option<&'static HostExec> {
    HOME_EXEC.iter().find(|e| e.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_exact_home_paths_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for e in HOME_EXEC {
            assert!(seen.insert(e.path), "duplicate {}", e.path);
            assert!(!e.tool.is_empty() && !e.why.is_empty(), "{}", e.path);
            assert!(e.path.starts_with("~/"), "{}", e.path);
            assert!(!crate::paths::has_glob_meta(e.path), "{}", e.path);
            crate::paths::check_syntax(e.path).unwrap();
            // Not a project catalogue entry under another spelling.
            assert!(
                crate::host_exec::host_exec_entry(&e.path[2..]).is_none(),
                "{} is in the project catalogue",
                e.path
            );
        }
    }

    /// The persistence points issue 30 names are all in (by an entry or an ancestor's), the
    /// project catalogue counted.
    #[test]
    fn covers_the_named_persistence_points() {
        let home = std::path::Path::new("/h");
        let ctx = crate::PathContext {
            home: home.to_path_buf(),
            workspace: home.to_path_buf(),
            writable_roots: vec![home.to_path_buf()],
        };
        let patterns: Vec<crate::PathPattern> = crate::profile::default_deny_write()
            .iter()
            .flat_map(|p| crate::expand(p, &ctx).unwrap())
            .collect();
        for p in [
            ".config/systemd/user/x.service",
            ".config/autostart/x.desktop",
            ".local/bin/git",
            "bin/ls",
            ".bashrc",
            ".bash_profile",
            ".profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".config/fish/config.fish",
            ".vimrc",
            ".config/nvim/init.lua",
            ".emacs",
            ".emacs.d/init.el",
            ".ssh/authorized_keys",
            ".ssh/rc",
            ".gitconfig",
            ".config/git/config",
            ".pam_environment",
            ".xinitrc",
            ".xprofile",
            ".config/environment.d/x.conf",
        ] {
            let path = home.join(p);
            let covered = patterns.iter().any(|pat| match pat {
                crate::PathPattern::Exact(e) => crate::is_within(&path, e),
                crate::PathPattern::Glob(g) => {
                    g.is_match(&path) || path.ancestors().any(|a| g.is_match(a))
                }
            });
            assert!(covered, "~/{p} is not protected");
        }
    }
}
