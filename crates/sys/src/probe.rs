//! "Try it and see" probes behind `stockade doctor`: each forks a throw-away child that attempts
//! one kernel feature and reports the errno. Versions are never read; only behaviour counts.

use std::io;

use crate::raw::{self, Errno, MountAttr};

/// Run `f` in a forked child; its result comes back over a pipe.
fn in_child(f: fn() -> raw::Result<()>) -> io::Result<Result<(), Errno>> {
    let (r, w) = raw::pipe()?;
    match raw::clone_fork(0) {
        Ok(0) => {
            raw::close(r);
            let code: i32 = match f() {
                Ok(()) => 0,
                Err(e) => e.0.max(1),
            };
            let _ = raw::write_all(w, &code.to_ne_bytes());
            raw::exit(0)
        }
        Ok(pid) => {
            raw::close(w);
            let mut buf = [0u8; 4];
            let got = raw::read(r, &mut buf);
            raw::close(r);
            let _ = raw::waitpid(pid, 0);
            match got {
                Ok(4) => {
                    let code = i32::from_ne_bytes(buf);
                    Ok(if code == 0 { Ok(()) } else { Err(Errno(code)) })
                }
                // The child died before answering (e.g. killed by a seccomp filter).
                _ => Ok(Err(Errno(libc::ECHILD))),
            }
        }
        Err(e) => {
            raw::close(r);
            raw::close(w);
            Err(e.into())
        }
    }
}

pub const ALL_NAMESPACES: i32 = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

/// Can this process create a user namespace?
pub fn user_namespace() -> io::Result<Result<(), Errno>> {
    in_child(|| raw::unshare(libc::CLONE_NEWUSER))
}

/// Can it create every namespace the sandbox uses, at once?
pub fn all_namespaces() -> io::Result<Result<(), Errno>> {
    in_child(|| raw::unshare(ALL_NAMESPACES))
}

/// Can it build a mount tree inside new user+mount namespaces (private propagation, a tmpfs,
/// a detached tmpfs, recursive read-only)?
pub fn mounts_in_user_namespace() -> io::Result<Result<(), Errno>> {
    in_child(|| {
        raw::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)?;
        raw::mount(
            None,
            c"/",
            None,
            (libc::MS_REC | libc::MS_PRIVATE) as libc::c_ulong,
            None,
        )?;
        let fd = raw::detached_tmpfs(c"0755")?;
        raw::close(fd);
        raw::mount_setattr(
            libc::AT_FDCWD,
            c"/",
            libc::AT_RECURSIVE as u32,
            &MountAttr {
                attr_set: raw::MOUNT_ATTR_RDONLY,
                ..MountAttr::default()
            },
        )
    })
}

/// Can it enforce a Landlock ruleset (not just query the ABI)?
pub fn landlock_enforce() -> io::Result<Result<(), Errno>> {
    in_child(|| {
        let abi = raw::landlock_abi()?;
        if abi < 1 {
            return Err(Errno(libc::EOPNOTSUPP));
        }
        let fd = raw::landlock_ruleset_for_probe()?;
        raw::set_no_new_privs()?;
        raw::landlock_restrict_self(fd)
    })
}

/// Can it install a seccomp filter (an allow-everything one)?
pub fn seccomp_filter() -> io::Result<Result<(), Errno>> {
    in_child(|| {
        raw::set_no_new_privs()?;
        let allow = [libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        }];
        raw::seccomp_install(&allow)
    })
}

/// Can it install a filter with a user-notification listener (mediated creation)?
pub fn seccomp_user_notification() -> io::Result<Result<(), Errno>> {
    in_child(|| {
        raw::set_no_new_privs()?;
        let allow = [libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        }];
        let listener = raw::seccomp_install_listener(&allow)?;
        raw::close(listener);
        Ok(())
    })
}

/// Can it create an idmapped mount (needed when the caller is root)?
pub fn idmapped_mount() -> io::Result<Result<(), Errno>> {
    let ns = match crate::parent::idmap_userns("0 2147418112 1\n", "0 2147418112 1\n") {
        Ok(ns) => ns,
        Err(e) => return Ok(Err(Errno(e.raw_os_error().unwrap_or(libc::EPERM)))),
    };
    match crate::parent::idmapped_clone(std::path::Path::new("/"), ns.fd(), true) {
        Ok(_) => Ok(Ok(())),
        Err(e) => Ok(Err(Errno(e.raw_os_error().unwrap_or(libc::EPERM)))),
    }
}
