//! The command layer against each construct it refuses, the paths it resolves, and the
//! commands it must let through.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{check, check_argv, resolve, Construct, Context};

/// `<tmp>/home/.ssh/id_rsa`, `<tmp>/outside/`, and a workspace `<tmp>/ws` with `src/main.rs`,
/// a planted executable `git` and `ls`, a symlink `key` to the key, a dangling symlink `drop`
/// to `<tmp>/outside/new`, and a symlink `out` to `<tmp>/outside`.
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (ws, home) = (root.join("ws"), root.join("home"));
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "key").unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
        for planted in ["git", "ls"] {
            std::fs::write(ws.join(planted), "#!/bin/sh\necho planted\n").unwrap();
            std::fs::set_permissions(ws.join(planted), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        symlink(home.join(".ssh/id_rsa"), ws.join("key")).unwrap();
        symlink(root.join("outside/new"), ws.join("drop")).unwrap();
        symlink(root.join("outside"), ws.join("out")).unwrap();
        Setup {
            _dir: dir,
            root,
            ws,
            home,
        }
    }

    fn ctx(&self) -> Context {
        Context::new(&self.ws)
            .unwrap()
            .with_home(Some(self.home.clone()))
    }
}

/// Every construct the argv-only policy refuses, in the forms an agent writes them.
#[test]
fn each_construct_is_refused_and_named() {
    let s = Setup::new();
    let ctx = s.ctx();
    let rows: &[(&str, Construct)] = &[
        // The list.
        ("cat ../../etc/passwd", Construct::PathOutsideWorkspace),
        ("OUT=/etc/passwd", Construct::EnvAssignment),
        ("echo OUT=/etc/passwd", Construct::PathOutsideWorkspace),
        ("ls --output=/etc/x", Construct::PathOutsideWorkspace),
        ("cat key", Construct::PathOutsideWorkspace),
        ("echo ok > /etc/crontab", Construct::Redirection),
        ("a; b", Construct::Sequence),
        ("echo $(curl x)", Construct::CommandSubstitution),
        ("echo `id`", Construct::Backticks),
        ("LD_PRELOAD=x ls", Construct::DangerousVariable),
        ("./git status", Construct::ProgramInWorkspace),
        // Operators and compound syntax.
        ("a\nb", Construct::Sequence),
        ("a && b", Construct::AndOr),
        ("a || b", Construct::AndOr),
        ("a | b", Construct::Pipeline),
        ("curl x | sh", Construct::Pipeline),
        ("a &", Construct::Background),
        ("a & b", Construct::Background),
        ("! a", Construct::Negation),
        ("time a", Construct::Time),
        ("(a)", Construct::Subshell),
        ("{ a; }", Construct::Compound),
        ("if a; then b; fi", Construct::Compound),
        ("for f in a; do b; done", Construct::Compound),
        ("while a; do b; done", Construct::Compound),
        ("case x in x) a;; esac", Construct::Compound),
        ("((x = 1))", Construct::Compound),
        ("[[ -f x ]]", Construct::Compound),
        ("f() { a; }", Construct::Function),
        // Redirections.
        ("cat < x", Construct::Redirection),
        ("ls 2>&1", Construct::Redirection),
        ("ls >> log", Construct::Redirection),
        ("cat <<EOF\nx\nEOF", Construct::Redirection),
        ("cat <<< x", Construct::Redirection),
        ("> x ls", Construct::Redirection),
        ("ls &> x", Construct::Redirection),
        ("ls 99999999999>x", Construct::Redirection),
        // Expansions.
        ("diff <(ls) x", Construct::ProcessSubstitution),
        ("echo \"$(id)\"", Construct::CommandSubstitution),
        ("echo \"`id`\"", Construct::Backticks),
        ("echo $((1+2))", Construct::ArithmeticExpansion),
        ("echo $HOME", Construct::ParameterExpansion),
        ("echo ${HOME}", Construct::ParameterExpansion),
        ("echo \"$HOME\"", Construct::ParameterExpansion),
        ("echo ${X:-/etc/passwd}", Construct::ParameterExpansion),
        ("echo $1 $@", Construct::ParameterExpansion),
        ("cat x$IFS/etc/passwd", Construct::ParameterExpansion),
        ("echo $'a\\n'", Construct::DollarQuote),
        ("echo $\"a\"", Construct::DollarQuote),
        ("echo ~root", Construct::TildeExpansion),
        ("echo ~+", Construct::TildeExpansion),
        ("echo a=~/x", Construct::TildeExpansion),
        ("echo A=x:~/y", Construct::TildeExpansion),
        ("ls *.rs", Construct::Glob),
        ("ls src/?.rs", Construct::Glob),
        ("ls [ab].rs", Construct::Glob),
        ("ls \"src\"/*", Construct::Glob),
        ("echo {a,b}", Construct::BraceExpansion),
        ("echo x{1..3}", Construct::BraceExpansion),
        ("echo {{a},b}", Construct::BraceExpansion),
        // Variables.
        ("OUT=/etc/passwd ls", Construct::EnvAssignment),
        ("FOO=bar ls", Construct::EnvAssignment),
        ("env LD_PRELOAD=x ls", Construct::DangerousVariable),
        ("env -i LD_AUDIT=x ls", Construct::DangerousVariable),
        ("BASH_ENV=x ls", Construct::DangerousVariable),
        ("FOO=bar LD_PRELOAD=x ls", Construct::DangerousVariable),
        ("> x LD_PRELOAD=x ls", Construct::DangerousVariable),
        (
            "env NODE_OPTIONS=--require=x node",
            Construct::DangerousVariable,
        ),
        ("env PATH=. git status", Construct::DangerousVariable),
        (
            "env 'GIT_SSH_COMMAND=sh -c x' git fetch",
            Construct::DangerousVariable,
        ),
        (
            "docker run --env=LD_PRELOAD=/x.so img",
            Construct::DangerousVariable,
        ),
        // Shells asked to run a string.
        ("bash -c ls", Construct::ShellInterpreter),
        ("bash -lc 'ls; id'", Construct::ShellInterpreter),
        ("/bin/sh -ec ls", Construct::ShellInterpreter),
        ("env sh -c ls", Construct::ShellInterpreter),
        ("env FOO=bar ls", Construct::ProgramRunner),
        ("env ./git status", Construct::ProgramRunner),
        ("timeout 5 ./git status", Construct::ProgramRunner),
        ("nice -n 5 git status", Construct::ProgramRunner),
        ("xargs rm", Construct::ProgramRunner),
        ("xargs", Construct::ProgramRunner),
        ("find . -exec touch pwned ';'", Construct::ProgramRunner),
        // Found by fuzzing: brush-parser panics, or allocates without bound, on these.
        ("$((<<()\n)", Construct::Redirection),
        ("echo \"$(cat <<x\nhi\nx\n)\"", Construct::Redirection),
        ("x\n<<\r x ", Construct::Redirection),
        ("cat <<< hi", Construct::Redirection),
        // Found by fuzzing: seconds of parsing (unbalanced `${`), now refused before it.
        ("cD${z[}D{/D${z[}D{/s{D}/LDbas=c{D${zc{D}/s{D{{D${z[}D{/s{D}/LD${zs{{D${z[}D{/s{D}/LDbas=c{D${zc{D}/s{D{{D${z[}D{/s{D}/LD${z=c{D${zc{D}/s{}/s{$", Construct::ParameterExpansion),
        ("((((((((((((((((((((((((((((((", Construct::ParseError),
        (
            "find src -name x -execdir ./x '{}' +",
            Construct::ProgramRunner,
        ),
        ("env -S 'ls -l'", Construct::ShellInterpreter),
        ("env --split-string='ls -l'", Construct::ShellInterpreter),
        // Paths.
        ("cat /etc/passwd", Construct::PathOutsideWorkspace),
        ("cat ~/.ssh/id_rsa", Construct::PathOutsideWorkspace),
        ("cat drop", Construct::PathOutsideWorkspace),
        ("cp src/main.rs drop", Construct::PathOutsideWorkspace),
        ("cat out/x", Construct::PathOutsideWorkspace),
        (
            "cat ./out/../../home/.ssh/id_rsa",
            Construct::PathOutsideWorkspace,
        ),
        ("cat src/../..", Construct::PathOutsideWorkspace),
        ("cat nothing/../../x", Construct::PathOutsideWorkspace),
        ("cat ..", Construct::PathOutsideWorkspace),
        ("cat file:///etc/passwd", Construct::PathOutsideWorkspace),
        (
            "cat FILE://localhost/etc/passwd",
            Construct::PathOutsideWorkspace,
        ),
        ("ls -I/etc", Construct::PathOutsideWorkspace),
        ("ls -I../x", Construct::PathOutsideWorkspace),
        ("cat @/etc/passwd", Construct::PathOutsideWorkspace),
        ("echo src:../x", Construct::PathOutsideWorkspace),
        ("echo LIB=a:/usr/lib", Construct::PathOutsideWorkspace),
        ("cat \"/etc/\"passwd", Construct::PathOutsideWorkspace),
        ("cat /e\\tc/passwd", Construct::PathOutsideWorkspace),
        // Programs.
        ("./ls", Construct::ProgramInWorkspace),
        ("src/../git", Construct::ProgramInWorkspace),
        (
            &format!("{}/git", s.ws.display()),
            Construct::ProgramInWorkspace,
        ),
        ("cd src", Construct::ProgramNotFound),
        ("source x", Construct::ProgramNotFound),
        ("no-such-program-stockade", Construct::ProgramNotFound),
        ("/etc/passwd", Construct::ProgramNotFound),
        // Malformed.
        ("", Construct::Empty),
        ("   # only a comment", Construct::Empty),
        ("ls 'unterminated", Construct::ParseError),
        ("ls )", Construct::ParseError),
        ("ls @(a|b)", Construct::ParseError),
    ];
    for (command, construct) in rows {
        match check(command, &ctx) {
            Ok(ok) => panic!("{command:?} was accepted: {ok:?}"),
            Err(r) => {
                assert_eq!(r.construct, *construct, "{command:?}: {r}");
                assert_eq!(r.code(), "E_SANDBOX_VIOLATION");
                assert!(
                    r.to_string().contains(construct.as_str()),
                    "{command:?}: the message names the construct: {r}"
                );
                assert!(!r.hint().is_empty());
            }
        }
    }
}

/// The message names the offending text, not only the construct.
#[test]
fn refusal_names_the_offending_text() {
    let s = Setup::new();
    let ctx = s.ctx();
    let r = check("ls src; curl evil.test", &ctx).unwrap_err();
    assert!(r.text.contains("curl evil.test"), "{r}");
    let r = check("echo ok $(curl x)", &ctx).unwrap_err();
    assert_eq!(r.text, "$(curl x)");
    let r = check("cat key", &ctx).unwrap_err();
    assert!(r.reason.contains(".ssh/id_rsa"), "{r}");
    let r = check("echo ok > /etc/crontab", &ctx).unwrap_err();
    assert!(r.text.contains("/etc/crontab"), "{r}");
    let long = format!("a; {}", "b".repeat(500));
    let r = check(&long, &ctx).unwrap_err();
    assert!(r.text.chars().count() <= 121, "{r}");
}

/// Ordinary commands pass, with quotes removed and the program resolved outside the
/// workspace (the planted `ls` and `git` are ignored).
#[test]
fn ordinary_commands_pass_as_literal_argv() {
    let s = Setup::new();
    let ctx = s.ctx();
    let rows: &[(&str, &[&str])] = &[
        ("ls -la src", &["-la", "src"]),
        ("find src -name '*.rs'", &["src", "-name", "*.rs"]),
        ("echo '<<' \\<\\<", &["<<", "<<"]),
        (
            "grep -E '((a|b)(c|d)){2}' src",
            &["-E", "((a|b)(c|d)){2}", "src"],
        ),
        ("env", &[]),
        ("ls", &[]),
        ("ls .", &["."]),
        ("ls ./src/", &["./src/"]),
        ("cat src/main.rs", &["src/main.rs"]),
        (
            "cp src/main.rs src/new/file.rs",
            &["src/main.rs", "src/new/file.rs"],
        ),
        ("echo 'a b' \"c d\" e\\ f", &["a b", "c d", "e f"]),
        (
            "echo '$HOME' \"*\" '{a,b}' \\$x",
            &["$HOME", "*", "{a,b}", "$x"],
        ),
        ("echo \"a\\\"b\" \"\\$\" \"\\n\"", &["a\"b", "$", "\\n"]),
        (
            "echo HEAD~1 @{u} {} a{b}c",
            &["HEAD~1", "@{u}", "{}", "a{b}c"],
        ),
        ("echo x \\;", &["x", ";"]),
        ("echo ok # a comment", &["ok"]),
        ("echo ok;", &["ok"]),
        ("echo a \\\n  b", &["a", "b"]),
        ("echo \"a\\\nb\" 'c\\\nd'", &["ab", "c\\\nd"]),
        ("echo héllo 'wörld'", &["héllo", "wörld"]),
        (
            "echo https://example.com/a/../../b",
            &["https://example.com/a/../../b"],
        ),
        ("echo --format=%H/%s", &["--format=%H/%s"]),
        ("cat /dev/null", &["/dev/null"]),
        ("ls [", &["["]),
        ("echo a=b", &["a=b"]),
        ("echo 'a=~/x'", &["a=~/x"]),
        ("echo ~/../ws/src", &["~/../ws/src"]),
    ];
    for (command, args) in rows {
        let checked = check(command, &ctx).unwrap_or_else(|r| panic!("{command:?}: {r}"));
        let argv0 = Path::new(&checked.argv[0]);
        assert!(argv0.is_absolute(), "{command:?}: {checked:?}");
        assert!(
            !checked.program.starts_with(&s.ws),
            "{command:?}: {checked:?}"
        );
        let rest: Vec<&str> = checked.argv[1..].iter().map(String::as_str).collect();
        let expected: Vec<String> = args
            .iter()
            .map(|a| a.replace('~', &s.home.display().to_string()))
            .collect();
        let expected: Vec<&str> = if command.contains("'a=~/x'") || command.contains("HEAD~1") {
            args.to_vec()
        } else {
            expected.iter().map(String::as_str).collect()
        };
        assert_eq!(rest, expected, "{command:?}");
    }
    let checked = check("ls -la src", &ctx).unwrap();
    assert!(checked.argv[0].ends_with("/ls"));
    if let Ok(git) = check("git status", &ctx) {
        assert_ne!(git.program, s.ws.join("git"));
        assert!(git.argv[0].ends_with("/git"), "{git:?}");
    }
}

/// A home holding the workspace: `~/ws/...` lies inside.
#[test]
fn tilde_paths_inside_the_workspace_pass() {
    let s = Setup::new();
    let ctx = Context::new(&s.ws).unwrap().with_home(Some(s.root.clone()));
    let checked = check("cat ~/ws/src/main.rs", &ctx).unwrap();
    assert_eq!(
        checked.argv[1],
        s.root.join("ws/src/main.rs").display().to_string()
    );
    let no_home = Context::new(&s.ws).unwrap();
    let r = check("cat ~/ws/src/main.rs", &no_home).unwrap_err();
    assert_eq!(r.construct, Construct::TildeExpansion);
}

/// The search path drops relative and empty entries and entries leading into the workspace
/// (also through a symlink); planted programs are never found.
#[test]
fn search_path_never_includes_the_workspace() {
    let s = Setup::new();
    let bin = s.root.join("bin-link");
    symlink(&s.ws, &bin).unwrap();
    let path = format!(
        "{}:.::src:{}:/usr/bin:/usr/bin:/bin",
        s.ws.display(),
        bin.display()
    );
    let ctx = s.ctx().with_search_path(path.as_ref());
    let kept: Vec<&Path> = ctx.search_path();
    assert!(kept.contains(&Path::new("/usr/bin")), "{kept:?}");
    for p in &kept {
        assert!(
            p.is_absolute() && !p.starts_with(&s.ws) && *p != bin,
            "{kept:?}"
        );
    }
    assert_eq!(
        kept.iter().filter(|p| **p == Path::new("/usr/bin")).count(),
        1
    );
    let git = check("ls", &ctx).unwrap();
    assert_ne!(git.program, s.ws.join("ls"));
    assert!(!ctx.search_path_value().is_empty());

    // Control: a shell with that PATH would have run the planted `ls`.
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", "ls"])
        .env("PATH", &path)
        .current_dir(&s.ws)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "planted\n");
}

/// A program in a search-path directory that is a symlink into the workspace is refused.
#[test]
fn program_linked_into_the_workspace_is_refused() {
    let s = Setup::new();
    let bin = s.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    symlink(s.ws.join("git"), bin.join("mytool")).unwrap();
    let ctx = s.ctx().with_search_path(bin.as_os_str());
    let r = check("mytool", &ctx).unwrap_err();
    assert_eq!(r.construct, Construct::ProgramInWorkspace, "{r}");
}

/// Extra roots widen what path arguments may name.
#[test]
fn allowed_roots_accept_paths_below_them() {
    let s = Setup::new();
    let ctx = s.ctx();
    assert!(check("ls out/x", &ctx).is_err());
    let ctx = ctx.allow_root(&s.root.join("outside")).unwrap();
    check("ls out/x", &ctx).unwrap();
    check("cat drop", &ctx).unwrap();
}

/// Argv that never went through a shell: shell syntax is literal text, but programs, paths
/// and dangerous variables are still checked.
#[test]
fn argv_is_checked_without_parsing() {
    let s = Setup::new();
    let ctx = s.ctx();
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let ok = check_argv(&argv(&["echo", "a; b", "$(x)", "*"]), &ctx).unwrap();
    assert_eq!(ok.argv[1..], argv(&["a; b", "$(x)", "*"]));
    let cases: &[(&[&str], Construct)] = &[
        (&["./git"], Construct::ProgramInWorkspace),
        (
            &["cat", "../../etc/passwd"],
            Construct::PathOutsideWorkspace,
        ),
        (&["env", "LD_PRELOAD=x", "ls"], Construct::DangerousVariable),
        (&["sh", "-c", "id"], Construct::ShellInterpreter),
        (&[], Construct::Empty),
    ];
    for (a, construct) in cases {
        let r = check_argv(&argv(a), &ctx).unwrap_err();
        assert_eq!(r.construct, *construct, "{a:?}: {r}");
    }
}

/// Input that could exhaust the parser's stack is refused before parsing.
#[test]
fn oversized_and_deeply_nested_input_is_refused() {
    let s = Setup::new();
    let ctx = s.ctx();
    let deep = format!("echo {}x{}", "$(".repeat(10_000), ")".repeat(10_000));
    assert_eq!(
        check(&deep, &ctx).unwrap_err().construct,
        Construct::ParseError
    );
    let deep = format!("{}ls{}", "(".repeat(10_000), ")".repeat(10_000));
    assert_eq!(
        check(&deep, &ctx).unwrap_err().construct,
        Construct::ParseError
    );
    let long = format!("echo {}", "a".repeat(super::MAX_COMMAND_LEN));
    assert_eq!(
        check(&long, &ctx).unwrap_err().construct,
        Construct::ParseError
    );
    assert_eq!(
        check("echo a\0b", &ctx).unwrap_err().construct,
        Construct::ParseError
    );
    // Nesting under the bound still parses (and is refused for what it is).
    let nested = format!("echo {}x{}", "$(".repeat(12), ")".repeat(12));
    assert_eq!(
        check(&nested, &ctx).unwrap_err().construct,
        Construct::CommandSubstitution
    );
}

/// The resolver follows symlinks (dangling ones too), goes to the real parent on `..`, and
/// stops on loops.
#[test]
fn resolve_follows_links_like_the_kernel() {
    let s = Setup::new();
    assert_eq!(
        resolve(&s.ws.join("key")).unwrap(),
        s.home.join(".ssh/id_rsa")
    );
    assert_eq!(
        resolve(&s.ws.join("drop")).unwrap(),
        s.root.join("outside/new")
    );
    assert_eq!(
        resolve(&s.ws.join("drop/deeper/file")).unwrap(),
        s.root.join("outside/new/deeper/file")
    );
    // `out/..` is the parent of the link's target, not the workspace.
    assert_eq!(resolve(&s.ws.join("out/..")).unwrap(), s.root);
    assert_eq!(
        resolve(&s.ws.join("none/../src")).unwrap(),
        s.ws.join("src")
    );
    assert_eq!(resolve(Path::new("/../..")).unwrap(), PathBuf::from("/"));
    symlink("loop", s.ws.join("loop")).unwrap();
    assert!(resolve(&s.ws.join("loop")).is_err());
    // Relative link targets are taken from the link's directory.
    symlink("../outside", s.ws.join("src/rel")).unwrap();
    assert_eq!(
        resolve(&s.ws.join("src/rel")).unwrap(),
        s.root.join("ws/outside")
    );
}

/// The parser must not panic (a release build aborts on a panic: no typed refusal): random
/// strings of shell syntax, and numbers too large for their field.
#[test]
fn random_shell_text_never_panics() {
    let s = Setup::new();
    let ctx = s.ctx();
    let alphabet: Vec<char> = "ab09 ;&|<>()$`'\"\\{}[]*?~=!#:\n\t-/.@%,+^"
        .chars()
        .collect();
    // xorshift64: deterministic, so a failure reproduces.
    let mut seed: u64 = 0x1234_5678_9abc_def0;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut commands: Vec<String> = (0..20_000)
        .map(|_| {
            let len = (next() % 48) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            format!("echo {text}")
        })
        .collect();
    commands.extend(
        [
            "ls 99999999999>x",
            "ls 99999999999<x",
            "echo $((99999999999999999999999))",
            "echo ${x:99999999999999999999}",
            "echo ${@:1:99999999999999999999}",
            "echo {1..99999999999999999999}",
            "((99999999999999999999999))",
        ]
        .map(String::from),
    );
    let panicked: Vec<&String> = commands
        .iter()
        .filter(|cmd| std::panic::catch_unwind(|| check(cmd, &ctx).is_ok()).is_err())
        .collect();
    assert!(panicked.is_empty(), "the parser panicked on {panicked:?}");
}
