//! The catalogue of project files that host tools execute, or that make them execute code:
//! written by a sandboxed command, they would run with the user's full rights the next time
//! the user (or their editor, agent or shell) touches the project. Data, beside the profiles.
//!
//! In every profile these are protected paths (`deny_write`): read-only while the run lasts
//! and refused on creation (mediated creation; the post-run sweep quarantines what got past).
//! Each entry is relative, so it applies at any depth beneath every writable root, and names
//! the tool and why. A policy file can add entries (`deny_write`) and remove catalogue
//! entries by name (`unprotect`); git's own files and stockade's configuration cannot be
//! removed (see [`crate::profile::CORE_PROTECTED`]).
//!
//! No list is complete: a project's own sources, build scripts (`Makefile`, `build.rs`,
//! `package.json` scripts, `setup.py`) and virtualenvs also run on the host. Reviewing a run's
//! changes before they reach the workspace is the full answer.

/// One catalogue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostExec {
    /// A relative path pattern (one or more components; `*` and `?` within a component).
    pub path: &'static str,
    /// The host tool that reads it.
    pub tool: &'static str,
    /// How it makes that tool run code.
    pub why: &'static str,
}

const fn entry(path: &'static str, tool: &'static str, why: &'static str) -> HostExec {
    HostExec { path, tool, why }
}

/// Every catalogue entry, grouped by tool.
pub const HOST_EXEC: &[HostExec] = &[
    // Rust.
    entry(
        ".cargo/config.toml",
        "cargo",
        "build.rustc-wrapper, target runners and aliases run programs on the next cargo command (rust-analyzer runs one on opening the project)",
    ),
    entry(".cargo/config", "cargo", "old name of .cargo/config.toml, read the same way"),
    entry(
        "rust-toolchain.toml",
        "rustup",
        "a `path` toolchain makes every rustup proxy (cargo, rustc) run binaries from that path",
    ),
    entry("rust-toolchain", "rustup", "old name of rust-toolchain.toml, path toolchains included"),
    // JavaScript.
    entry(
        ".npmrc",
        "npm",
        "`script-shell` and `node-options` (--require) choose what every `npm run` executes",
    ),
    entry(".yarnrc.yml", "yarn", "`yarnPath` names the script every `yarn` command runs; `plugins` are loaded"),
    entry(".yarnrc", "yarn (classic)", "`yarn-path` names the script every `yarn` command runs"),
    entry(".yarn/releases", "yarn", "the yarn release `yarnPath` points at, run by every `yarn` command"),
    entry(".yarn/plugins", "yarn", "plugins loaded by every `yarn` command"),
    entry(".pnpmfile.cjs", "pnpm", "its hooks (readPackage, afterAllResolved) run on every install"),
    // Python.
    entry(
        ".venv/pip.conf",
        "pip",
        "pip in that virtualenv reads it: `index-url` picks where the next install fetches (and runs) packages from",
    ),
    // Environment managers.
    entry(".envrc", "direnv", "evaluated by the user's shell on entering the directory (once allowed; it can source other files)"),
    entry(".tool-versions", "asdf, mise", "a `path:` version makes the shims run binaries from that path"),
    entry("mise.toml", "mise", "[env] `_.source`, hooks and tasks run shell code on entering the directory"),
    entry(".mise.toml", "mise", "as mise.toml"),
    entry("mise.local.toml", "mise", "as mise.toml"),
    entry(".mise.local.toml", "mise", "as mise.toml"),
    entry(".config/mise", "mise", "as mise.toml (config.toml, conf.d)"),
    entry(".config/mise.toml", "mise", "as mise.toml"),
    // Git hook managers.
    entry(".pre-commit-config.yaml", "pre-commit", "its hooks (`repo: local` runs any command) run on the next `git commit`"),
    entry(".husky", "husky", "hook scripts git runs (core.hooksPath points there once installed)"),
    entry("lefthook.*", "lefthook", "commands it runs on git events"),
    entry(".lefthook.*", "lefthook", "as lefthook.yml"),
    entry("lefthook-local.*", "lefthook", "as lefthook.yml, local overrides"),
    entry(".lefthook-local.*", "lefthook", "as lefthook.yml, local overrides"),
    entry(".overcommit.yml", "overcommit", "hooks it runs on git events"),
    // Build tools that read per-project configuration on every command.
    entry(".bazelrc", "bazel", "flags for every command: `--workspace_status_command` runs a program on each build"),
    entry(
        ".mvn",
        "maven",
        "extensions.xml loads build extensions, jvm.config can add -javaagent, the wrapper's distributionUrl picks what mvnw runs",
    ),
    // Development containers.
    entry(".devcontainer", "devcontainers", "`initializeCommand` runs on the host; Dockerfiles and features are built from it"),
    entry(".devcontainer.json", "devcontainers", "as .devcontainer/devcontainer.json"),
    // Editors and IDEs.
    entry(".vscode", "VS Code", "tasks (runOn: folderOpen), launch configurations and settings that name executables"),
    entry(".idea", "JetBrains IDEs", "run configurations, external tools and startup tasks"),
    entry(".zed", "Zed", "tasks and settings that name language servers and formatters"),
    entry(".helix", "Helix", "languages.toml names language servers and formatters it starts"),
    entry(".nvim.lua", "Neovim", "run on start with `exrc` set (after a trust prompt)"),
    entry(".nvimrc", "Neovim", "run on start with `exrc` set (after a trust prompt)"),
    entry(".exrc", "Vim, Neovim", "run on start with `exrc` set"),
    entry(".dir-locals.el", "Emacs", "`eval` entries run Lisp on opening a file (after a prompt for unsafe ones)"),
    // Coding agents.
    entry(".claude", "Claude Code", "settings hooks and statusLine run commands; MCP servers, commands and agents"),
    entry(".mcp.json", "Claude Code and other MCP clients", "project MCP servers: commands started after approval"),
    entry(".codex", "Codex CLI", "project config: MCP servers and tool commands"),
    entry(".cursor", "Cursor", "hooks.json runs commands; mcp.json starts MCP servers"),
    entry(".gemini", "Gemini CLI", "settings.json MCP servers and tool-discovery commands, extensions"),
    entry(".qwen", "Qwen Code", "settings.json MCP servers and tool-discovery commands"),
    entry("opencode.json", "opencode", "local MCP servers and formatter/LSP commands"),
    entry("opencode.jsonc", "opencode", "as opencode.json"),
    entry(".opencode", "opencode", "plugins (JavaScript loaded at start), custom tools, config"),
    entry(".kiro", "Kiro", "agent hooks run commands; settings/mcp.json starts MCP servers"),
    entry(".amazonq", "Amazon Q Developer", "mcp.json starts workspace MCP servers"),
    entry(".roo", "Roo Code", "mcp.json starts project MCP servers"),
    entry(".continue", "Continue", "config blocks start MCP servers and run commands"),
    entry(".junie", "Junie", "project MCP servers (mcp/mcp.json)"),
    entry(".crush.json", "Crush", "MCP servers and language-server commands"),
    entry("crush.json", "Crush", "as .crush.json"),
    entry(".aider.conf.yml", "aider", "`lint-cmd` and `test-cmd` run after each edit"),
    entry(".windsurf", "Windsurf", "hooks.json runs commands around Cascade's actions"),
    entry(".clinerules/hooks", "Cline", "hook scripts run around Cline's tasks and tools"),
    // Shells, when the workspace is (or holds) a home directory.
    entry(".bashrc", "bash", "sourced by every interactive shell"),
    entry(".bash_profile", "bash", "sourced by login shells"),
    entry(".bash_login", "bash", "sourced by login shells"),
    entry(".bash_logout", "bash", "sourced when a login shell exits"),
    entry(".profile", "sh, bash", "sourced by login shells"),
    entry(".zshrc", "zsh", "sourced by interactive shells"),
    entry(".zshenv", "zsh", "sourced by every zsh"),
    entry(".zprofile", "zsh", "sourced by login shells"),
    entry(".zlogin", "zsh", "sourced by login shells"),
    entry(".config/fish", "fish", "config.fish and conf.d are sourced by every fish"),
    // Tools' global configs, when the workspace is (or holds) a home directory: each applies
    // to every project the user opens afterwards.
    entry(
        ".gitconfig",
        "git",
        "the global config: core.fsmonitor, core.hooksPath, aliases and filters run in every repository",
    ),
    entry(".config/git/config", "git", "the global config (XDG location), as ~/.gitconfig"),
    entry(
        ".config/git/attributes",
        "git",
        "global attributes select the diff, merge and filter drivers run in every repository",
    ),
    entry(".config/git/ignore", "git", "global ignore rules can hide a planted file from every `git status`"),
];

/// The catalogue entry named `path` (of the project catalogue, or the home's own
/// [`crate::home_exec::HOME_EXEC`]).
pub fn host_exec_entry(path: &str) -> Option<&'static HostExec> {
    HOST_EXEC
        .iter()
        .find(|e| e.path == path)
        .or_else(|| crate::home_exec::home_exec_entry(path))
}

/// Where a protected path of a resolved policy comes from, as `stockade policy show --json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProtectedSource {
    pub pattern: String,
    /// `built-in` (git's and stockade's own files), `catalogue`, `preset` (then `preset`
    /// names it), `flag` (`--protect`) or `policy file`.
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'static str>,
    /// A catalogue entry the policy file removed (`filesystem.unprotect`): not protected.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

/// The protected paths of `policy` with their sources, then the catalogue entries it
/// removed. `flags` are the `--protect` patterns of the command line.
pub fn protected_sources(policy: &crate::Policy, flags: &[String]) -> Vec<ProtectedSource> {
    let fs = &policy.filesystem;
    let of = |pattern: &str, removed: bool| {
        let entry = host_exec_entry(pattern);
        let preset = policy
            .presets
            .iter()
            .filter_map(|name| crate::presets::preset(name).ok())
            .find(|p| p.read_only.contains(&pattern))
            .map(|p| p.name);
        let source = if crate::profile::CORE_PROTECTED.contains(&pattern) {
            "built-in"
        } else if entry.is_some() {
            "catalogue"
        } else if flags.iter().any(|f| f == pattern) {
            "flag"
        } else if preset.is_some() {
            "preset"
        } else {
            "policy file"
        };
        ProtectedSource {
            pattern: pattern.to_owned(),
            preset: preset.filter(|_| source == "preset"),
            source,
            tool: entry.map(|e| e.tool),
            why: entry.map(|e| e.why),
            removed,
        }
    };
    fs.deny_write
        .iter()
        .map(|p| of(p, false))
        .chain(
            fs.unprotect
                .iter()
                .filter(|p| !fs.deny_write.contains(p))
                .map(|p| of(p, true)),
        )
        .collect()
}

/// What a file of [`HOST_RUN`] is to the host, and the review flag it raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// A build, test or deployment definition: the tool runs the code it holds or names
    /// (`build-file`).
    Build,
    /// Run or sourced when an interpreter, debugger or shell starts (`startup-file`).
    Startup,
    /// A tool's configuration, read on its own, that makes it load or run programs
    /// (`tool-config`).
    Config,
    /// Code the host loads as built or installed: bytecode, caches, installed packages
    /// (`host-loaded`).
    Loaded,
}

impl RunKind {
    /// The review flag's code.
    pub fn code(self) -> &'static str {
        match self {
            RunKind::Build => "build-file",
            RunKind::Startup => "startup-file",
            RunKind::Config => "tool-config",
            RunKind::Loaded => "host-loaded",
        }
    }
}

/// One entry of [`HOST_RUN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostRun {
    /// The ecosystem (each has its test).
    pub family: &'static str,
    pub kind: RunKind,
    /// A relative path pattern, as in [`HOST_EXEC`]: matched at any depth, and what lies
    /// below it.
    pub path: &'static str,
    /// Which tool runs what, and when.
    pub why: &'static str,
}

const fn run(
    family: &'static str,
    kind: RunKind,
    path: &'static str,
    why: &'static str,
) -> HostRun {
    HostRun {
        family,
        kind,
        path,
        why,
    }
}

use RunKind::{Build, Config, Loaded, Startup};

/// Project files host tools run code from, beyond [`HOST_EXEC`]: a run may change them in
/// direct mode (that is what working on a project means), so they are not protected there,
/// but review flags every change to them (`stockade changes`), and `apply` writes them only
/// when accepted. Review flags by allow-list besides (binary files, executables, scripts,
/// links and special files are flagged wherever they are): this list names the text files
/// that are code to the host all the same. Grouped by family, one test each
/// (`workspace::changes::flags`).
pub const HOST_RUN: &[HostRun] = &[
    // Rust.
    run("rust", Build, "build.rs", "cargo compiles and runs it on the next build"),
    run("rust", Build, "Cargo.toml", "names build scripts, proc-macro crates and their sources for the next cargo build"),
    // Make, C and C++.
    run("make", Build, "Makefile", "make runs its recipes"),
    run("make", Build, "makefile", "make runs its recipes"),
    run("make", Build, "GNUmakefile", "make runs its recipes"),
    run("make", Build, "*.mk", "make includes it and runs its recipes"),
    run("make", Build, "Makefile.am", "automake makes the Makefile make runs from it"),
    run("make", Build, "Makefile.in", "configure makes the Makefile make runs from it"),
    run("make", Build, "configure", "run to configure the build"),
    run("make", Build, "configure.ac", "autoconf makes the configure script from it"),
    run("make", Build, "configure.in", "autoconf makes the configure script from it"),
    run("make", Build, "CMakeLists.txt", "cmake runs its commands when configuring"),
    run("make", Build, "*.cmake", "cmake runs its commands when configuring"),
    run("make", Build, "CMakePresets.json", "cmake takes toolchain files and cache entries from it (a toolchain file runs)"),
    run("make", Build, "CMakeUserPresets.json", "as CMakePresets.json"),
    run("make", Build, "meson.build", "meson runs its commands when configuring"),
    run("make", Build, "build.ninja", "ninja runs its commands"),
    run("make", Build, "SConstruct", "scons runs it as Python"),
    run("make", Build, "SConscript", "scons runs it as Python"),
    run("make", Build, "Sconstruct", "scons runs it as Python (its other names for SConstruct)"),
    run("make", Build, "sconstruct", "as Sconstruct"),
    run("make", Build, "SConstruct.py", "as Sconstruct"),
    run("make", Build, "Sconstruct.py", "as Sconstruct"),
    run("make", Build, "sconstruct.py", "as Sconstruct"),
    run("make", Build, "conanfile.py", "conan runs it as Python"),
    run("make", Build, "xmake.lua", "xmake runs it as Lua"),
    run("make", Build, "premake5.lua", "premake runs it as Lua"),
    // Task runners.
    run("tasks", Build, "justfile", "just runs its recipes"),
    run("tasks", Build, "Justfile", "just runs its recipes"),
    run("tasks", Build, ".justfile", "just runs its recipes"),
    run("tasks", Build, "Taskfile.yml", "task runs its commands"),
    run("tasks", Build, "Taskfile.yaml", "task runs its commands"),
    run("tasks", Build, "Taskfile.dist.yml", "task runs its commands"),
    run("tasks", Build, "Taskfile.dist.yaml", "task runs its commands"),
    run("tasks", Build, "Earthfile", "earthly runs its targets (LOCALLY ones on the host)"),
    run("tasks", Build, "Tiltfile", "tilt runs it (local() runs commands on the host)"),
    run("tasks", Build, "Procfile", "foreman, honcho and heroku local run its processes"),
    run("tasks", Build, "Procfile.*", "foreman, honcho and heroku local run its processes"),
    run("tasks", Build, "ecosystem.config.*", "pm2 runs it as JavaScript and starts its apps"),
    run("tasks", Build, "JUSTFILE", "just finds its justfile whatever the case of the name"),
    run("tasks", Build, "taskfile.yml", "task reads the lower-case names too"),
    run("tasks", Build, "taskfile.yaml", "task reads the lower-case names too"),
    run("tasks", Build, "taskfile.dist.yml", "task reads the lower-case names too"),
    run("tasks", Build, "taskfile.dist.yaml", "task reads the lower-case names too"),
    run("tasks", Build, "fabfile.py", "fab runs it as Python"),
    run("tasks", Build, "dodo.py", "doit runs it as Python"),
    run("tasks", Build, "Snakefile", "snakemake runs it as Python"),
    run("tasks", Build, "Brewfile", "brew bundle runs it as Ruby"),
    run("tasks", Build, "Makefile.toml", "cargo make runs its tasks"),
    run("tasks", Build, "nodemon.json", "nodemon runs the commands it names"),
    run("tasks", Config, "ansible.cfg", "ansible reads it from the current directory: plugin paths and a vault password file it runs"),
    run("tasks", Build, "terragrunt.hcl", "terragrunt runs its hooks"),
    run("tasks", Build, "Pulumi.yaml", "pulumi runs the program it names"),
    // Bazel and Buck.
    run("bazel", Build, "BUILD", "bazel runs its rules"),
    run("bazel", Build, "BUILD.bazel", "bazel runs its rules"),
    run("bazel", Build, "WORKSPACE", "bazel runs its rules"),
    run("bazel", Build, "WORKSPACE.bazel", "bazel runs its rules"),
    run("bazel", Build, "MODULE.bazel", "bazel runs its rules"),
    run("bazel", Build, "*.bzl", "bazel runs it"),
    run("bazel", Build, "tools/bazel", "bazelisk runs it instead of bazel"),
    run("bazel", Config, ".bazelversion", "bazelisk downloads and runs the bazel it names"),
    run("bazel", Build, "BUCK", "buck runs its rules"),
    run("bazel", Config, ".buckconfig", "buck reads its settings and the programs it runs from it"),
    // Python.
    run("python", Build, "setup.py", "pip and setuptools run it to build or install the project"),
    run("python", Build, "setup.cfg", "setuptools reads entry points and build commands from it"),
    run("python", Build, "pyproject.toml", "names the build backend pip runs to install the project, and tools' settings"),
    run("python", Build, "conftest.py", "pytest imports it before the tests"),
    run("python", Build, "noxfile.py", "nox runs it"),
    run("python", Build, "tox.ini", "tox runs its commands"),
    run("python", Build, "Pipfile", "pipenv runs its [scripts] (`pipenv run NAME`) and installs what it names"),
    run("python", Config, ".flaskenv", "`flask run` loads it into the environment, as .env"),
    run("python", Config, "pytest.ini", "pytest reads it: `addopts = -p MODULE` and `pythonpath` load code from the project"),
    run("python", Config, ".pytest.ini", "as pytest.ini"),
    run("python", Config, "uv.toml", "uv reads its indexes and Python installs from it (the next install runs what they serve)"),
    run("python", Config, "poetry.toml", "poetry reads its virtualenv and repository settings from it"),
    run("python", Config, ".pdm-python", "names the interpreter pdm runs"),
    run("python", Config, ".python-version", "pyenv and uv pick the interpreter they run by it"),
    run("python", Config, "mypy.ini", "mypy imports the plugins it names (editors run mypy on opening a file)"),
    run("python", Config, ".mypy.ini", "as mypy.ini"),
    run("python", Config, ".pylintrc", "pylint runs its init-hook and imports its load-plugins (editors run pylint on opening a file)"),
    run("python", Config, "pylintrc", "as .pylintrc"),
    run("python", Config, ".flake8", "flake8 imports the local plugins it names from the project"),
    run("python", Config, ".coveragerc", "coverage imports the plugins it names"),
    run("python", Build, "hatch.toml", "hatch runs its scripts and build hooks"),
    run("python", Build, "docs/conf.py", "sphinx runs it on every documentation build"),
    run("python", Build, "doc/conf.py", "sphinx runs it on every documentation build"),
    // Python start-up.
    run("python-startup", Startup, "*.pth", "Python runs its `import` lines at every start-up (site-packages)"),
    run("python-startup", Startup, "sitecustomize.py", "Python imports it at every start-up"),
    run("python-startup", Startup, "usercustomize.py", "Python imports it at every start-up"),
    run("python-startup", Startup, "pyvenv.cfg", "its `home` picks the interpreter the virtualenv runs"),
    run("python-startup", Startup, "bin/activate", "sourced by the shell to enter the virtualenv"),
    run("python-startup", Startup, "bin/activate.*", "sourced by the shell to enter the virtualenv"),
    run("python-startup", Startup, "bin/activate_this.py", "run by tools entering the virtualenv"),
    run("python-startup", Startup, ".pdbrc", "pdb runs its lines as commands when it starts"),
    run("python-startup", Startup, ".pythonrc", "Python runs it at interactive start-up (PYTHONSTARTUP)"),
    run("python-startup", Startup, ".pythonrc.py", "Python runs it at interactive start-up (PYTHONSTARTUP)"),
    // Python bytecode and installed packages.
    run("python-loaded", Loaded, "__pycache__", "Python loads the bytecode there instead of the source beside it"),
    run("python-loaded", Loaded, "*.pyc", "Python loads this bytecode instead of its source"),
    run("python-loaded", Loaded, "*.pyo", "Python loads this bytecode instead of its source"),
    run("python-loaded", Loaded, "site-packages", "installed packages Python imports"),
    run("python-loaded", Loaded, "dist-packages", "installed packages Python imports"),
    run("python-loaded", Loaded, "*.dist-info", "an installed package's entry points: console scripts and plugins (pytest11) loaded on their own"),
    run("python-loaded", Loaded, "*.egg-info", "a package's entry points: console scripts and plugins loaded on their own"),
    run("python-loaded", Loaded, "*.egg-link", "adds a directory to what Python imports"),
    run("python-loaded", Loaded, ".venv", "the project's virtualenv: its interpreter, scripts and packages run on the host"),
    run("python-loaded", Loaded, ".tox", "tox's virtualenvs, whose programs tox runs"),
    run("python-loaded", Loaded, ".nox", "nox's virtualenvs, whose programs nox runs"),
    // JavaScript.
    run("javascript", Build, "package.json", "npm, yarn and pnpm run its scripts (install, test, build)"),
    run("javascript", Build, "pnpm-workspace.yaml", "pnpm reads its packages and settings"),
    run("javascript", Config, "bunfig.toml", "bun preloads the scripts it names"),
    run("javascript", Build, "deno.json", "deno runs its tasks and import map"),
    run("javascript", Build, "deno.jsonc", "deno runs its tasks and import map"),
    run("javascript", Build, "Gruntfile.js", "grunt runs it"),
    run("javascript", Build, "Gruntfile.coffee", "grunt runs it"),
    run("javascript", Build, "Gruntfile.ts", "grunt runs it"),
    run("javascript", Build, "gruntfile.js", "grunt runs it"),
    run("javascript", Loaded, ".pnp.cjs", "Yarn's Plug'n'Play loader: every `yarn run`, `yarn node` and editor SDK requires it into node"),
    run("javascript", Loaded, ".pnp.loader.mjs", "as .pnp.cjs, for ES modules"),
    run("javascript", Build, "gulpfile.*", "gulp runs it"),
    run("javascript", Loaded, "node_modules", "packages node loads and scripts npm runs (`.bin`, install scripts), and tools' caches"),
    // JavaScript tools whose configuration is code, or loads code (editors run several on
    // opening a file).
    run("javascript-config", Config, ".eslintrc", "eslint loads the plugins and parsers it names (editors run eslint on opening a file)"),
    run("javascript-config", Config, ".eslintrc.*", "eslint runs it (.js, .cjs) or loads the plugins it names"),
    run("javascript-config", Config, "eslint.config.*", "eslint runs it as JavaScript"),
    run("javascript-config", Config, ".prettierrc", "prettier loads the plugins it names"),
    run("javascript-config", Config, ".prettierrc.*", "prettier runs it (.js, .cjs, .mjs, .ts) or loads the plugins it names"),
    run("javascript-config", Config, "prettier.config.*", "prettier runs it as JavaScript"),
    run("javascript-config", Config, ".babelrc", "babel loads the plugins and presets it names"),
    run("javascript-config", Config, ".babelrc.*", "babel runs it or loads the plugins it names"),
    run("javascript-config", Config, "babel.config.*", "babel runs it as JavaScript"),
    run("javascript-config", Config, "vite.config.*", "vite runs it as JavaScript"),
    run("javascript-config", Config, "vitest.config.*", "vitest runs it as JavaScript"),
    run("javascript-config", Config, "webpack.config.*", "webpack runs it as JavaScript"),
    run("javascript-config", Config, "rollup.config.*", "rollup runs it as JavaScript"),
    run("javascript-config", Config, "jest.config.*", "jest runs it as JavaScript"),
    run("javascript-config", Config, "next.config.*", "next runs it as JavaScript"),
    run("javascript-config", Config, "nuxt.config.*", "nuxt runs it as JavaScript"),
    run("javascript-config", Config, "svelte.config.*", "svelte tools run it as JavaScript (the editor's language server too)"),
    run("javascript-config", Config, "astro.config.*", "astro runs it as JavaScript"),
    run("javascript-config", Config, "tailwind.config.*", "tailwind runs it as JavaScript (the editor's language server too)"),
    run("javascript-config", Config, "postcss.config.*", "postcss runs it as JavaScript"),
    run("javascript-config", Config, ".postcssrc*", "postcss loads the plugins it names"),
    run("javascript-config", Config, ".mocharc*", "mocha runs it (.js) or loads what its `require` names"),
    run("javascript-config", Config, "playwright.config.*", "playwright runs it as JavaScript"),
    run("javascript-config", Config, "cypress.config.*", "cypress runs it as JavaScript"),
    run("javascript-config", Config, "karma.conf.*", "karma runs it as JavaScript"),
    run("javascript-config", Config, ".stylelintrc*", "stylelint runs it or loads the plugins it names"),
    run("javascript-config", Config, "stylelint.config.*", "stylelint runs it as JavaScript"),
    run("javascript-config", Config, ".lintstagedrc*", "lint-staged runs its commands on `git commit`"),
    run("javascript-config", Config, "lint-staged.config.*", "lint-staged runs it on `git commit`"),
    run("javascript-config", Config, "commitlint.config.*", "commitlint runs it on `git commit`"),
    run("javascript-config", Config, ".commitlintrc*", "as commitlint.config.*"),
    run("javascript-config", Config, ".huskyrc*", "husky 4 runs its hooks on git events"),
    run("javascript-config", Config, ".storybook", "storybook loads main.js, preview.js and their addons as JavaScript"),
    // Ruby.
    run("ruby", Build, "Gemfile", "bundler evaluates it as Ruby"),
    run("ruby", Build, "*.gemspec", "bundler and gem evaluate it as Ruby"),
    run("ruby", Build, "Rakefile", "rake runs it"),
    run("ruby", Build, "rakefile", "rake runs it"),
    run("ruby", Build, "*.rake", "rake loads it"),
    run("ruby", Build, "config.ru", "rackup runs it"),
    run("ruby", Build, "Guardfile", "guard runs it as Ruby"),
    run("ruby", Build, "Capfile", "capistrano runs it as Ruby"),
    run("ruby", Build, "gems.rb", "bundler evaluates it as Ruby (the Gemfile's other name)"),
    run("ruby", Build, "Rakefile.rb", "rake runs it (one of its default names)"),
    run("ruby", Build, "rakefile.rb", "rake runs it (one of its default names)"),
    run("ruby", Build, "Thorfile", "thor runs it as Ruby"),
    run("ruby", Build, "Dangerfile", "danger runs it as Ruby"),
    run("ruby", Build, "Podfile", "CocoaPods evaluates it as Ruby"),
    run("ruby", Build, "Berksfile", "berkshelf evaluates it as Ruby"),
    run("ruby", Build, "Fastfile", "fastlane runs it as Ruby"),
    run("ruby", Startup, ".simplecov", "simplecov loads it as Ruby when the tests start"),
    run("ruby", Startup, ".rvmrc", "rvm sources it as shell code on entering the directory (after a trust prompt)"),
    run("ruby", Config, ".rubocop.yml", "rubocop loads the Ruby its `require` and `plugins` name (editors run rubocop on opening a file)"),
    run("ruby", Config, ".bundle/config", "bundler reads the Gemfile, paths and build options it names"),
    run("ruby", Startup, ".irbrc", "irb runs it when it starts"),
    run("ruby", Startup, ".pryrc", "pry runs it when it starts"),
    run("ruby", Config, ".rspec", "rspec loads the files its --require names"),
    run("ruby", Loaded, "vendor/bundle", "installed gems Ruby loads"),
    // Go.
    run("go", Build, "go.mod", "its toolchain line makes go download and run another toolchain"),
    run("go", Build, "go.work", "selects the modules go builds, and a toolchain line as go.mod's"),
    run("go", Config, ".golangci*", "golangci-lint loads the plugins it names"),
    // JVM.
    run("jvm", Loaded, ".gradle", "gradle's project cache: compiled build scripts and the configuration cache"),
    run("jvm", Build, "build.gradle", "gradle runs it"),
    run("jvm", Build, "build.gradle.kts", "gradle runs it"),
    run("jvm", Build, "settings.gradle", "gradle runs it"),
    run("jvm", Build, "settings.gradle.kts", "gradle runs it"),
    run("jvm", Build, "*.gradle", "gradle runs it"),
    run("jvm", Build, "*.gradle.kts", "gradle runs it"),
    run("jvm", Config, "gradle.properties", "gradle reads JVM arguments and settings from it"),
    run("jvm", Build, "gradlew", "the gradle wrapper script run by hand and by IDEs"),
    run("jvm", Config, "gradle/wrapper", "the wrapper's jar and distributionUrl: which Gradle gradlew downloads and runs"),
    run("jvm", Build, "pom.xml", "maven runs its plugins"),
    run("jvm", Build, "mvnw", "the maven wrapper script run by hand and by IDEs"),
    run("jvm", Build, "build.xml", "ant runs its tasks"),
    run("jvm", Build, "build.sbt", "sbt compiles and runs it"),
    run("jvm", Build, "project/*.sbt", "sbt compiles and runs the build definition"),
    run("jvm", Build, "project/*.scala", "sbt compiles and runs the build definition"),
    run("jvm", Config, ".sbtopts", "sbt's JVM options (a -javaagent runs code)"),
    run("jvm", Config, ".jvmopts", "sbt's JVM options (a -javaagent runs code)"),
    run("jvm", Loaded, "*.class", "the JVM loads this bytecode"),
    run("jvm", Loaded, "*.jar", "the JVM loads the bytecode it holds"),
    run("jvm", Loaded, "*.war", "the JVM loads the bytecode it holds"),
    // Other languages' builds.
    run("other-builds", Build, "mix.exs", "mix runs it as Elixir"),
    run("other-builds", Startup, ".iex.exs", "iex runs it when it starts"),
    run("other-builds", Build, "rebar.config", "rebar3 reads its hooks and plugins"),
    run("other-builds", Build, "rebar.config.script", "rebar3 runs it as Erlang"),
    run("other-builds", Build, "Package.swift", "SwiftPM compiles and runs the manifest"),
    run("other-builds", Build, "build.zig", "zig build compiles and runs it"),
    run("other-builds", Build, "build.zig.zon", "names the packages zig build fetches and builds"),
    run("other-builds", Build, "Setup.hs", "cabal runs a custom setup"),
    run("other-builds", Build, "*.cabal", "cabal builds it (custom setups, build tools)"),
    run("other-builds", Build, "cabal.project", "cabal reads packages and options from it"),
    run("other-builds", Build, "stack.yaml", "stack reads packages and options from it"),
    run("other-builds", Build, "dune", "dune runs its rules"),
    run("other-builds", Build, "dune-project", "dune reads it"),
    run("other-builds", Build, "Makefile.PL", "perl runs it to make the Makefile"),
    run("other-builds", Build, "Build.PL", "perl runs it"),
    run("other-builds", Build, "composer.json", "composer runs its scripts"),
    run("other-builds", Build, "*.csproj", "msbuild runs its targets and tasks"),
    run("other-builds", Build, "Directory.Build.props", "msbuild imports it into every project below"),
    run("other-builds", Build, "Directory.Build.targets", "msbuild imports it into every project below"),
    run("other-builds", Config, "nuget.config", "the package sources the next restore fetches (and runs build targets) from"),
    run("other-builds", Config, ".formatter.exs", "mix format evaluates it as Elixir (editors run it on saving a file)"),
    run("other-builds", Config, ".credo.exs", "credo evaluates it as Elixir"),
    run("other-builds", Build, "project.clj", "leiningen evaluates it as Clojure"),
    run("other-builds", Build, "deps.edn", "the Clojure CLI runs the functions its aliases name"),
    run("other-builds", Build, "build.boot", "boot evaluates it as Clojure"),
    run("other-builds", Build, "bb.edn", "babashka runs its tasks"),
    run("other-builds", Build, "build.sc", "mill compiles and runs it"),
    run("other-builds", Build, "config.nims", "nim runs this NimScript on every compile below it"),
    run("other-builds", Build, "*.nims", "nim runs this NimScript"),
    run("other-builds", Build, "*.nimble", "nimble runs it as NimScript"),
    run("other-builds", Build, "shard.yml", "shards runs its postinstall scripts"),
    run("other-builds", Build, "dub.json", "dub runs its pre- and post-build commands"),
    run("other-builds", Build, "dub.sdl", "dub runs its pre- and post-build commands"),
    run("other-builds", Config, ".php-cs-fixer.php", "php-cs-fixer runs it as PHP (editors run it on saving a file)"),
    run("other-builds", Config, ".php-cs-fixer.dist.php", "as .php-cs-fixer.php"),
    run("other-builds", Config, "phpunit.xml", "phpunit runs its bootstrap file"),
    run("other-builds", Config, "phpunit.xml.dist", "phpunit runs its bootstrap file"),
    run("other-builds", Config, "phpstan.neon", "phpstan runs its bootstrap files (editors run phpstan on opening a file)"),
    // Containers.
    run("containers", Build, "Dockerfile", "docker build runs its RUN steps, with what it copies in"),
    run("containers", Build, "Dockerfile.*", "docker build runs its RUN steps"),
    run("containers", Build, "*.Dockerfile", "docker build runs its RUN steps"),
    run("containers", Build, "*.dockerfile", "docker build runs its RUN steps"),
    run("containers", Build, "Containerfile", "podman and buildah run its RUN steps"),
    run("containers", Build, "Containerfile.*", "podman and buildah run its RUN steps"),
    run("containers", Build, "dockerfile", "docker build takes it when there is no Dockerfile"),
    run("containers", Build, "docker-compose*.yml", "docker compose runs its services: images, commands, host mounts, privileges"),
    run("containers", Build, "docker-compose*.yaml", "docker compose runs its services: images, commands, host mounts, privileges"),
    run("containers", Build, "compose*.yml", "docker compose runs its services: images, commands, host mounts, privileges"),
    run("containers", Build, "compose*.yaml", "docker compose runs its services: images, commands, host mounts, privileges"),
    run("containers", Build, "docker-bake.*", "docker buildx bake builds its targets"),
    // Nix.
    run("nix", Build, "*.nix", "nix evaluates it (flake.nix, shell.nix, default.nix: `nix develop`, `nix-shell` and direnv's `use nix` run its hooks)"),
    run("nix", Config, "flake.lock", "pins the inputs nix fetches, builds and runs"),
    // Virtual machines and infrastructure.
    run("infra", Build, "Vagrantfile", "vagrant runs it as Ruby"),
    run("infra", Build, "vagrantfile", "vagrant runs it as Ruby (the lower-case name)"),
    run("infra", Build, "*.tf", "terraform runs its `external` data sources and local provisioners on plan and apply"),
    run("infra", Config, ".terraform.lock.hcl", "the provider builds terraform accepts and runs"),
    run("infra", Config, ".terraformrc", "terraform's CLI config: provider_installation dev_overrides run local binaries"),
    run("infra", Config, "terraform.rc", "as .terraformrc"),
    run("infra", Loaded, ".terraform", "the providers and modules terraform runs"),
    // Version control: git beyond its directory (flagged as git internals), and the
    // repositories of other systems, whose config runs hooks on the host's commands.
    run("vcs", Config, ".gitattributes", "selects the filter, diff and merge drivers git runs on the files it names"),
    run("vcs", Config, ".gitmodules", "names the submodules git fetches and checks out"),
    run("vcs", Config, ".lfsconfig", "git-lfs reads its endpoints and settings from it"),
    run("vcs", Loaded, ".hg", "Mercurial's repository: .hg/hgrc hooks and extensions run on the next hg command"),
    run("vcs", Loaded, ".jj", "Jujutsu's repository: its config's aliases and fsmonitor run on the next jj command"),
    // Editors beyond the catalogue's.
    run("editors", Config, "*.code-workspace", "VS Code workspace settings and tasks, as .vscode"),
    run("editors", Config, ".fleet", "Fleet's run configurations and settings"),
    run("editors", Config, ".dir-locals-2.el", "as .dir-locals.el: Emacs evaluates its `eval` entries"),
    run("editors", Config, ".lvimrc", "the localvimrc plugin sources it on opening a file"),
    run("editors", Startup, ".vimrc", "Vim with `exrc` sources it from the current directory, as .exrc"),
    run("editors", Startup, "_vimrc", "as .vimrc"),
    run("editors", Startup, ".gvimrc", "gVim with `exrc` sources it from the current directory"),
    run("editors", Startup, "_exrc", "as .exrc"),
    run("editors", Startup, ".lazy.lua", "lazy.nvim runs it as Lua on opening the project (after a trust prompt)"),
    // Environment files.
    run("environment", Config, ".env", "loaded into the environment by dotenv libraries, docker compose and direnv's dotenv: NODE_OPTIONS, LD_PRELOAD and the like run code"),
    run("environment", Config, ".env.*", "as .env"),
    run("environment", Startup, ".autoenv.zsh", "zsh-autoenv sources it on entering the directory"),
    run("environment", Startup, ".autoenv_leave.zsh", "zsh-autoenv sources it on leaving the directory"),
    run("environment", Loaded, ".direnv", "direnv's layouts: the virtualenvs and cached environments the shell loads on entering"),
    // Debuggers, REPLs and command-line tools that run a file on start.
    run("tools", Startup, ".gdbinit", "gdb runs its commands when it starts here (with auto-load, or when named)"),
    run("tools", Startup, ".lldbinit", "lldb runs its commands when it starts here (when allowed, or when named)"),
    run("tools", Startup, ".psqlrc", "psql runs its meta-commands (`\\!` runs a shell) when it starts"),
    run("tools", Startup, ".sqliterc", "sqlite3 runs its dot-commands (`.shell`) when it starts"),
    run("tools", Config, ".inputrc", "readline's key bindings: a macro types commands into every readline program"),
    run("tools", Config, ".ripgreprc", "rg's options when RIPGREP_CONFIG_PATH names it: `--pre` runs a program on every file searched"),
    run("tools", Startup, ".Rprofile", "R runs it at start-up in this directory"),
    run("tools", Config, ".Renviron", "R reads its variables at start-up (R_PROFILE names more code to run)"),
    run("tools", Startup, "renv/activate.R", "sourced by the project's .Rprofile at every R start-up"),
    run("tools", Startup, ".ghci", "GHCi runs its commands (`:!` runs a shell) when it starts here"),
    run("tools", Startup, ".ocamlinit", "the OCaml toplevel and utop run it when they start here"),
];

/// The [`HOST_RUN`] entry named `path`.
pub fn host_run_entry(path: &str) -> Option<&'static HostRun> {
    HOST_RUN.iter().find(|e| e.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_relative_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for e in HOST_EXEC {
            assert!(seen.insert(e.path), "duplicate {}", e.path);
            assert!(!e.tool.is_empty() && !e.why.is_empty(), "{}", e.path);
            assert!(crate::paths::is_relative_pattern(e.path), "{}", e.path);
            crate::paths::check_syntax(e.path).unwrap();
        }
    }

    #[test]
    fn host_run_entries_are_unique_relative_documented_and_not_in_the_catalogue() {
        let mut seen = std::collections::HashSet::new();
        for e in HOST_RUN {
            assert!(seen.insert(e.path), "duplicate {}", e.path);
            assert!(!e.family.is_empty() && !e.why.is_empty(), "{}", e.path);
            assert!(crate::paths::is_relative_pattern(e.path), "{}", e.path);
            crate::paths::check_syntax(e.path).unwrap();
            assert!(
                host_exec_entry(e.path).is_none(),
                "{} is in HOST_EXEC too",
                e.path
            );
        }
        assert_eq!(host_run_entry("Dockerfile").map(|e| e.kind), Some(Build));
        assert_eq!(Loaded.code(), "host-loaded");
    }

    /// Every entry has a shape mediated creation checks during the run (`<root>/**/<tail>`,
    /// the tail only `*` and `?` wildcards): none is left to the post-run sweep alone.
    #[test]
    fn every_entry_is_guarded_during_the_run() {
        let ctx = crate::PathContext {
            home: "/h".into(),
            workspace: "/w".into(),
            writable_roots: vec!["/w".into()],
        };
        for e in HOST_EXEC {
            for p in crate::expand(e.path, &ctx).unwrap() {
                let crate::PathPattern::Glob(g) = p else {
                    panic!("{} is not a glob", e.path);
                };
                assert!(g.literal_base_and_tail().is_some(), "{}", e.path);
            }
        }
    }

    #[test]
    fn sources_name_catalogue_flag_and_file() {
        let file = crate::parse_policy_file(
            "[filesystem]\ndeny_write = [\"Makefile\"]\nunprotect = [\".idea\"]\n",
            "p",
        )
        .unwrap();
        let flags = vec!["justfile".to_owned()];
        let overrides = crate::Overrides {
            deny_write: flags.clone(),
            ..Default::default()
        };
        let policy = crate::resolve(Some(file), &overrides).unwrap();
        let sources = protected_sources(&policy, &flags);
        let find = |p: &str| sources.iter().find(|s| s.pattern == p).unwrap();
        assert_eq!(find(".git/hooks").source, "built-in");
        assert_eq!(find(".cargo/config.toml").source, "catalogue");
        assert_eq!(find(".cargo/config.toml").tool, Some("cargo"));
        assert_eq!(find("Makefile").source, "policy file");
        assert_eq!(find("justfile").source, "flag");
        assert!(find(".idea").removed);
        assert!(!find(".vscode").removed);
    }

    #[test]
    fn a_presets_read_only_paths_name_the_preset() {
        let file = crate::parse_policy_file("agent = \"codex\"\n", "p").unwrap();
        let policy = crate::resolve(Some(file), &crate::Overrides::default()).unwrap();
        let sources = protected_sources(&policy, &[]);
        let config = sources
            .iter()
            .find(|s| s.pattern == "~/.local/state/stockade/codex/config.toml")
            .unwrap();
        assert_eq!((config.source, config.preset), ("preset", Some("codex")));
    }
}
