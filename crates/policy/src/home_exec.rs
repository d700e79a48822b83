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
//! The caches, package stores and toolchains the host's builds run from (`~/.cargo/registry`,
//! `~/go/pkg/mod`, `~/.m2/repository`, `~/.cache/pre-commit`, ...) are a family here too: with
//! the home as the workspace a build that should fill one is granted it by name
//! (`--allow-write ~/.cargo/registry`: a protected path that is a writable root itself stays
//! writable) or uses a preset that gives the tool a cache of its own (`--preset cargo`).
//! Files the start-up files source beyond the conventional ones below are found by reading
//! those files (`workspace`'s `home_sources`, best effort).
//!
//! No list is complete: a home also holds toolchains and caches the entries below miss. A home
//! as a writable root hands those to the run; review mode, or a project directory as the
//! workspace, is the full answer.

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
    entry(
        "~/.rustup",
        "rustup",
        "the proxies in ~/.cargo/bin run the toolchains here (settings.toml's default_toolchain picks which)",
    ),
    entry("~/go/bin", "PATH (go install)", "commonly on PATH; `go install` puts programs there"),
    entry("~/.deno", "deno", "bin/ is on PATH per deno's installer; the deno it runs lives here"),
    entry("~/.bun", "bun", "bin/ is on PATH per bun's installer; install/cache holds the packages `bun install` links"),
    entry("~/.volta", "volta", "its shims for node, npm and yarn are on PATH; tools/ holds what they run"),
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
    entry("~/.bash_functions", "bash", "sourced by many ~/.bashrc files, as ~/.bash_aliases"),
    entry("~/.bash_prompt", "bash", "sourced by common dotfiles' ~/.bash_profile (mathiasbynens/dotfiles)"),
    entry("~/.bash_local", "bash", "a machine's own additions, sourced by common dotfiles' ~/.bashrc"),
    entry("~/.bashrc.local", "bash", "a machine's own additions, sourced by common dotfiles' ~/.bashrc"),
    entry("~/.bashrc.d", "bash", "every file is sourced by the usual ~/.bashrc (Fedora)"),
    entry("~/.bash_it", "Bash-it", "sourced by ~/.bashrc, with its plugins, aliases and themes"),
    entry("~/.aliases", "bash, zsh", "sourced by common dotfiles' start-up files (mathiasbynens, thoughtbot)"),
    entry("~/.functions", "bash, zsh", "sourced by common dotfiles' start-up files"),
    entry("~/.exports", "bash, zsh", "sourced by common dotfiles' start-up files"),
    entry("~/.extra", "bash, zsh", "sourced by common dotfiles' start-up files (a machine's own settings)"),
    entry("~/.path", "bash, zsh", "sourced by common dotfiles' start-up files (PATH additions)"),
    entry("~/.localrc", "bash, zsh", "sourced by common dotfiles' start-up files (holman/dotfiles)"),
    entry("~/.profile.d", "sh, bash", "every file is sourced by many ~/.profile files"),
    entry("~/.shrc", "sh", "the usual ENV file: sourced by every interactive sh (dash, FreeBSD sh)"),
    entry("~/.zshrc.local", "zsh", "a machine's own additions, sourced by common dotfiles' ~/.zshrc (thoughtbot, grml)"),
    entry("~/.zshrc.d", "zsh", "every file is sourced by many ~/.zshrc files"),
    entry("~/.zprezto", "Prezto", "sourced by ~/.zshrc, with its modules"),
    entry("~/.zpreztorc", "Prezto", "sourced at every zsh start"),
    entry("~/.zimrc", "Zim", "read at every zsh start; names the modules it sources"),
    entry("~/.zim", "Zim", "its init.zsh and modules are sourced by ~/.zshrc"),
    entry("~/.antigen", "antigen", "bundles sourced by ~/.zshrc"),
    entry("~/.zplug", "zplug", "plugins sourced by ~/.zshrc"),
    entry("~/.local/share/zinit", "zinit", "plugins sourced by ~/.zshrc"),
    entry("~/.p10k.zsh", "powerlevel10k", "sourced by the ~/.zshrc its wizard writes"),
    entry("~/.fzf.bash", "fzf", "sourced by the ~/.bashrc fzf's installer edits"),
    entry("~/.fzf.zsh", "fzf", "sourced by the ~/.zshrc fzf's installer edits"),
    entry("~/.config/bash", "bash", "common place for files ~/.bashrc sources"),
    entry("~/.config/shell", "bash, zsh", "common place for files the start-up files source"),
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
    entry(
        "~/.pypirc",
        "twine",
        "its repository URLs decide where `twine upload` sends the package and the credentials (keyring or typed)",
    ),
    entry(
        "~/.claude.json",
        "Claude Code",
        "its global state: the mcpServers there (user and local scope) are started at every start of Claude Code",
    ),
    // Host tools' own start-up and configuration files that run programs (red team of
    // issue 30: each was planted from a run with the home as the workspace and ran on the
    // host later).
    entry("~/.mavenrc", "mvn", "the mvn script sources it (shell) on every build"),
    entry("~/.m2/settings.xml", "Maven", "mirrors and plugin repositories (a file:// one in the home) decide which plugins every build runs"),
    entry("~/.m2/toolchains.xml", "Maven", "names the JDK programs builds run"),
    entry("~/.gradle/gradle.properties", "Gradle", "org.gradle.jvmargs (-javaagent:) runs code in every build's daemon"),
    entry("~/.lessfilter", "lesspipe", "run on every file less opens (LESSOPEN, set by the usual ~/.bashrc)"),
    entry("~/.config/lesspipe", "lesspipe", "lessfilter here runs as ~/.lessfilter"),
    entry("~/.config/user-dirs.dirs", "xdg-user-dir", "sourced (shell) by xdg-user-dir and desktop scripts"),
    entry("~/.selected_editor", "sensible-editor", "sourced (shell) whenever sensible-editor picks the editor (crontab -e, Debian tools)"),
    entry("~/.npm-init.js", "npm", "run by `npm init`"),
    entry("~/.node_modules", "Node.js", "a global folder: require() of a package no node_modules holds loads it from here"),
    entry("~/.node_libraries", "Node.js", "a global folder, as ~/.node_modules"),
    entry("~/.bunfig.toml", "bun", "preload scripts run before every `bun run`"),
    entry("~/.config/pip", "pip", "pip.conf's index-url/find-links decide what the next pip install builds and runs"),
    entry("~/.pip", "pip", "the legacy pip.conf location, as ~/.config/pip"),
    entry("~/.config/direnv", "direnv", "direnvrc and lib/*.sh are sourced for every .envrc; direnv.toml's whitelist trusts .envrc files unasked"),
    entry("~/.direnvrc", "direnv", "sourced for every .envrc"),
    entry("~/.local/share/direnv", "direnv", "the allow list: an entry makes an .envrc run without `direnv allow`"),
    entry("~/.hgrc", "Mercurial", "[hooks] run on every hg command"),
    entry("~/.config/hg", "Mercurial", "as ~/.hgrc"),
    entry("~/.sqliterc", "sqlite3", "its commands (.shell, .system) run at every start"),
    entry("~/.pdbrc", "pdb", "its lines run as Python when pdb starts"),
    entry("~/.perldb", "perl -d", "Perl run when the debugger starts"),
    entry("~/.octaverc", "Octave", "run at start"),
    entry("~/.gnuplot", "gnuplot", "run at start (`system`)"),
    entry("~/.Renviron", "R", "R_PROFILE_USER and friends name the code R runs at start"),
    entry("~/.R/Makevars", "R", "compiler commands of every package install"),
    entry("~/.ghci", "GHCi", "run at start (`:!` runs shell commands)"),
    entry("~/.ghc/ghci.conf", "GHCi", "as ~/.ghci"),
    entry("~/.sbclrc", "SBCL", "run at start"),
    entry("~/.guile", "Guile", "run at REPL start"),
    entry("~/.lein/profiles.clj", "Leiningen", "the :user profile's injections run in every project"),
    entry("~/.jupyter/jupyter_config.py", "Jupyter", "Python run at every start"),
    entry("~/.jupyter/jupyter_server_config.py", "Jupyter", "Python run at every server start"),
    entry("~/.jupyter/jupyter_notebook_config.py", "Jupyter", "Python run at every notebook start"),
    entry("~/.jupyter/jupyter_lab_config.py", "Jupyter", "Python run at every lab start"),
    entry("~/.mailcap", "mailcap (run-mailcap, mutt, w3m)", "the program run to view each type"),
    entry("~/.muttrc", "mutt", "`source \"cmd|\"` and hooks run commands at start"),
    entry("~/.mutt", "mutt", "muttrc as ~/.muttrc"),
    entry("~/.config/mutt", "mutt", "muttrc as ~/.muttrc"),
    entry("~/.config/mpv", "mpv", "scripts/ are loaded at every start"),
    entry("~/.config/ranger", "ranger", "commands.py and rc.conf run at start"),
    entry("~/.config/starship.toml", "starship", "custom modules' commands run at every prompt"),
    entry("~/.config/containers", "podman", "containers.conf names the runtimes and helpers it runs"),
    entry("~/.config/nix", "nix", "nix.conf's post-build-hook and build-hook run programs"),
    entry("~/.terraformrc", "Terraform", "provider_installation names where providers (programs) come from"),
    entry("~/.terraform.d", "Terraform", "plugins/ holds providers it runs"),
    entry("~/.vscode-server", "VS Code remote", "extensions run on every remote session"),
    entry("~/.vscode-oss", "VSCodium", "extensions run at start"),
    entry("~/.config/VSCodium/User", "VSCodium", "as ~/.config/Code/User"),
    entry("~/.config/Cursor/User", "Cursor", "as ~/.config/Code/User"),
    // Terminals and window managers.
    entry("~/.config/kitty", "kitty", "the shell and startup sessions it runs"),
    entry("~/.config/alacritty", "Alacritty", "the shell it runs"),
    entry("~/.config/wezterm", "WezTerm", "its Lua configuration runs at start"),
    entry("~/.wezterm.lua", "WezTerm", "its Lua configuration runs at start"),
    entry("~/.config/i3", "i3", "exec lines run at login"),
    entry("~/.config/sway", "sway", "exec lines run at login"),
    entry("~/.config/hypr", "Hyprland", "exec-once lines run at login"),
    // Caches, package stores and toolchains the host's builds and tools run from: a build
    // compiles and runs (build scripts, plugins, hooks) or links what it finds there without
    // fetching or checking it again. A run that should fill one is granted it by name
    // (`--allow-write ~/.cargo/registry`: a path granted by name stays writable) or uses a
    // preset that points the tool at a cache of its own (`--preset cargo`).
    entry("~/.cargo/registry", "cargo", "crate sources whose build.rs and proc macros every host build compiles and runs"),
    entry("~/.cargo/git", "cargo", "git dependencies' checkouts, compiled and run as ~/.cargo/registry's"),
    entry("~/.cache/pre-commit", "pre-commit", "the hook repositories and their environments run on every commit"),
    entry("~/.cache/go-build", "go", "compiled packages every go build links without compiling again"),
    entry("~/go/pkg/mod", "go", "module sources every go build compiles (and `go generate`, cgo run)"),
    entry("~/.cache/pip", "pip", "built wheels the next pip install installs (their .pth files run in every Python)"),
    entry("~/.cache/uv", "uv", "built wheels and sources the next uv sync installs"),
    entry("~/.local/share/uv", "uv", "the Python versions and tools uv runs"),
    entry("~/.cache/pypoetry", "Poetry", "the virtualenvs `poetry run` executes, and its artifact cache"),
    entry("~/.local/share/virtualenvs", "pipenv", "the virtualenvs `pipenv run` executes"),
    entry("~/.local/pipx", "pipx", "the environments of the applications pipx puts on PATH"),
    entry("~/.local/share/pipx", "pipx", "as ~/.local/pipx (newer location)"),
    entry("~/.npm/_cacache", "npm", "the packages the next npm install unpacks (and their install scripts runs)"),
    entry("~/.npm/_npx", "npx", "packages npx runs without fetching them again"),
    entry("~/.cache/yarn", "yarn", "the package cache yarn installs from"),
    entry("~/.yarn/berry", "yarn (berry)", "the global cache yarn installs from"),
    entry("~/.local/share/pnpm", "pnpm", "the content-addressed store projects link packages from, and pnpm's global bin"),
    entry("~/.cache/pnpm", "pnpm", "package metadata pnpm resolves from"),
    entry("~/.cache/deno", "deno", "remote modules deno runs without fetching them again (DENO_DIR)"),
    entry("~/.cache/node-gyp", "node-gyp", "the headers native addons are compiled against"),
    entry("~/.cache/ms-playwright", "Playwright", "the browser programs its tests run"),
    entry("~/.cache/puppeteer", "Puppeteer", "the browser programs it runs"),
    entry("~/.cache/Cypress", "Cypress", "the Cypress program its tests run"),
    entry("~/.m2/repository", "Maven", "plugins and dependencies every build runs"),
    entry("~/.gradle/caches", "Gradle", "plugins, dependencies and compiled build scripts every build runs"),
    entry("~/.gradle/wrapper", "Gradle", "the Gradle distributions ./gradlew runs"),
    entry("~/.ivy2", "Ivy, sbt", "dependencies and plugins builds run"),
    entry("~/.sbt", "sbt", "its launcher's boot jars and global plugins run in every build"),
    entry("~/.cache/coursier", "coursier (sbt, mill, scala-cli)", "the jars builds and launched applications run"),
    entry("~/.local/share/coursier", "coursier", "the applications it installs on PATH"),
    entry("~/.cache/bazel", "Bazel", "output bases: external repositories and tools a later build runs"),
    entry("~/.cache/bazelisk", "bazelisk", "the bazel programs it runs"),
    entry("~/.cache/ccache", "ccache", "compiled objects host builds link without compiling again"),
    entry("~/.ccache", "ccache", "as ~/.cache/ccache (older location)"),
    entry("~/.cache/sccache", "sccache", "compiled objects host builds link without compiling again"),
    entry("~/.cache/zig", "zig", "the global cache of compiled artifacts builds reuse"),
    entry("~/.stack", "Haskell Stack", "the compilers and snapshot packages builds run"),
    entry("~/.cabal", "cabal", "the package store builds link and bin/ (on PATH)"),
    entry("~/.opam", "opam", "the switches' compilers and programs (on PATH through opam env)"),
    entry("~/.elan", "elan (Lean)", "the toolchains its proxies run"),
    entry("~/.julia/packages", "Julia", "the packages `using` loads"),
    entry("~/.julia/compiled", "Julia", "the precompiled caches `using` loads"),
    entry("~/.gem", "RubyGems", "gems installed with --user-install, loaded by require and their executables"),
    entry("~/.local/share/gem", "RubyGems", "as ~/.gem (XDG location)"),
    entry("~/.bundle", "Bundler", "its config (BUNDLE_PATH, build options) and the gems installed there"),
    entry("~/perl5", "local::lib", "modules every perl loads through PERL5LIB, and bin/ on PATH"),
    entry("~/.cpan", "CPAN", "CPAN/MyConfig.pm is Perl run by every cpan, and the build directories"),
    entry("~/.composer", "Composer", "global packages; vendor/bin is on PATH"),
    entry("~/.config/composer", "Composer", "as ~/.composer (XDG location)"),
    entry("~/.cache/composer", "Composer", "the package cache installs unpack"),
    entry("~/.pub-cache", "Dart, Flutter", "the packages builds compile and bin/ (on PATH)"),
    entry("~/.nuget/packages", "NuGet (dotnet)", "packages whose build targets every dotnet build runs"),
    entry("~/.konan", "Kotlin/Native", "the toolchains Gradle builds run"),
    entry("~/.mix", "Elixir (mix)", "archives loaded into every mix command"),
    entry("~/.hex", "Elixir (hex)", "the packages mix builds compile"),
    entry("~/.cache/rebar3", "rebar3", "the plugins and packages builds run"),
    entry("~/.swiftpm", "SwiftPM", "configuration and caches of the packages builds compile"),
    entry("~/.conda", "conda", "environments (and their activation scripts) conda runs"),
    entry("~/miniconda3", "conda", "the base environment conda init puts on PATH"),
    entry("~/anaconda3", "conda", "the base environment conda init puts on PATH"),
    entry("~/miniforge3", "conda", "the base environment conda init puts on PATH"),
    entry("~/mambaforge", "conda", "the base environment conda init puts on PATH"),
    entry("~/.fnm", "fnm", "the node versions its shims run"),
    entry("~/.local/share/fnm", "fnm", "as ~/.fnm (XDG location)"),
    entry("~/.goenv", "goenv", "its shims are on PATH; the versions run from here"),
    entry("~/.jenv", "jenv", "its shims are on PATH"),
    entry("~/.cache/torch/hub", "PyTorch", "torch.hub.load imports hubconf.py from the repositories cached here"),
    entry("~/.cache/huggingface/modules", "transformers", "remote code (trust_remote_code) imported from here"),
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

    /// Whether the default profile protects `~/p` (by an entry, an ancestor's or a glob).
    fn covered_in_home(p: &str) -> bool {
        let home = std::path::Path::new("/h");
        let ctx = crate::PathContext {
            home: home.to_path_buf(),
            workspace: home.to_path_buf(),
            writable_roots: vec![home.to_path_buf()],
        };
        let path = home.join(p);
        crate::profile::default_deny_write()
            .iter()
            .flat_map(|p| crate::expand(p, &ctx).unwrap())
            .any(|pat| match pat {
                crate::PathPattern::Exact(e) => crate::is_within(&path, &e),
                crate::PathPattern::Glob(g) => {
                    g.is_match(&path) || path.ancestors().any(|a| g.is_match(a))
                }
            })
    }

    /// Files the usual start-up files and dotfile frameworks source (bash's aliases and
    /// functions, mathiasbynens' and thoughtbot's dotfiles, Fedora's `.bashrc.d`, oh-my-zsh,
    /// Prezto, Zim, Bash-it, fzf, powerlevel10k) are covered, existing or not; control: a
    /// file of the home no start-up file conventionally sources is not.
    #[test]
    fn covers_files_the_start_up_files_source() {
        for p in [
            ".bash_aliases",
            ".bash_functions",
            ".bash_logout",
            ".bash_prompt",
            ".bashrc.local",
            ".bashrc.d/10-x.sh",
            ".bash_it/plugins/x.bash",
            ".aliases",
            ".functions",
            ".exports",
            ".extra",
            ".path",
            ".localrc",
            ".profile.d/x.sh",
            ".shrc",
            ".zshrc.local",
            ".zshrc.d/x.zsh",
            ".zsh/x.zsh",
            ".oh-my-zsh/oh-my-zsh.sh",
            ".oh-my-zsh/custom/plugins/x/x.plugin.zsh",
            ".config/zsh/.zshrc",
            ".zprezto/init.zsh",
            ".zpreztorc",
            ".zim/init.zsh",
            ".p10k.zsh",
            ".fzf.bash",
            ".fzf.zsh",
            ".config/bash/x",
            ".config/shell/aliases",
        ] {
            assert!(covered_in_home(p), "~/{p} is not protected");
        }
        for p in [".my_own_rc", ".aliases_backup_notes/x", "aliases"] {
            assert!(!covered_in_home(p), "~/{p} is protected");
        }
    }

    /// The caches, package stores and toolchains host builds run from (red team of issue 30:
    /// with the home as the workspace a run could plant a crate's build.rs in
    /// `~/.cargo/registry` for the host's next `cargo build`) are covered; control: the
    /// tools' other files (logs, credentials' neighbours, stockade's own preset caches) are
    /// not.
    #[test]
    fn covers_caches_and_toolchains_host_builds_run() {
        for p in [
            ".cargo/registry/src/index.crates.io-x/serde-1.0.0/build.rs",
            ".cargo/git/checkouts/x/y/build.rs",
            ".rustup/toolchains/stable/bin/rustc",
            ".cache/pre-commit/repoabc/hook.py",
            ".cache/go-build/00/x-a",
            "go/pkg/mod/example.com/x@v1/x.go",
            ".cache/pip/wheels/x.whl",
            ".cache/uv/wheels-v1/x",
            ".npm/_cacache/index-v5/x",
            ".npm/_npx/x/node_modules/y/index.js",
            ".cache/yarn/v6/x",
            ".local/share/pnpm/store/v3/x",
            ".m2/repository/org/x/x.jar",
            ".gradle/caches/modules-2/x.jar",
            ".gradle/wrapper/dists/gradle-8/bin/gradle",
            ".gradle/init.d/x.gradle",
            ".pyenv/shims/python",
            ".nvm/nvm.sh",
            ".sdkman/bin/sdkman-init.sh",
            ".deno/bin/deno",
            ".cache/deno/remote/x",
            ".bun/install/cache/x",
            ".cache/bazel/_bazel_u/x",
            ".ivy2/cache/x.jar",
            ".sbt/boot/x.jar",
            ".cache/coursier/v1/x.jar",
            ".cache/ccache/x.o",
            ".stack/programs/ghc",
            ".cabal/store/x",
            ".opam/default/bin/ocaml",
            ".gem/ruby/3.0.0/gems/x/lib/x.rb",
            "perl5/lib/perl5/X.pm",
            ".nuget/packages/x/build/x.targets",
            ".conda/envs/x/bin/python",
            "miniconda3/bin/python",
        ] {
            assert!(covered_in_home(p), "~/{p} is not protected");
        }
        for p in [
            ".cargo/.package-cache",
            ".cache/stockade/cargo/registry/x",
            ".cache/stockade/npm/_cacache/x",
            ".cache/thumbnails/x.png",
            ".gradle/daemon/8.0/daemon.log",
            ".npm/_logs/x.log",
        ] {
            assert!(!covered_in_home(p), "~/{p} is protected");
        }
    }

    /// Host tools' start-up files a red team planted from a run with the home as the
    /// workspace and saw run on the host later (mvn, lesspipe, xdg-user-dir,
    /// sensible-editor, npm init, node's global folders), and their kin, are covered;
    /// control: an ordinary file beside them is not.
    #[test]
    fn covers_host_tools_start_up_files() {
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
        let covered = |p: &str| {
            let path = home.join(p);
            patterns.iter().any(|pat| match pat {
                crate::PathPattern::Exact(e) => crate::is_within(&path, e),
                crate::PathPattern::Glob(g) => {
                    g.is_match(&path) || path.ancestors().any(|a| g.is_match(a))
                }
            })
        };
        for p in [
            ".mavenrc",
            ".m2/settings.xml",
            ".gradle/gradle.properties",
            ".lessfilter",
            ".config/lesspipe/lessfilter",
            ".config/user-dirs.dirs",
            ".selected_editor",
            ".npm-init.js",
            ".node_modules/left-pad/index.js",
            ".config/pip/pip.conf",
            ".pip/pip.conf",
            ".config/direnv/direnvrc",
            ".config/direnv/lib/x.sh",
            ".local/share/direnv/allow/0123",
            ".hgrc",
            ".sqliterc",
            ".pdbrc",
            ".jupyter/jupyter_server_config.py",
            ".config/starship.toml",
            ".config/containers/containers.conf",
            ".terraform.d/plugins/x",
            ".rustup/settings.toml",
            ".rustup/toolchains/evil/bin/cargo",
        ] {
            assert!(covered(p), "~/{p} is not protected");
        }
        // Controls: what tools write there in a normal run stays writable.
        for p in [
            ".m2/wrapper-notes.txt",
            ".gradle/daemon/x.log",
            ".config/notes.txt",
            ".jupyter/lab/workspaces/default.json",
            "project/src/main.rs",
        ] {
            assert!(!covered(p), "~/{p} is protected");
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
