// The floor under `stockade run -- true`: the kernel work of stockade's default policy (what
// `strace -f` of a native run shows, 2026-11-28), done by the least launcher that does it, with
// nothing else of stockade's (no policy, no plan, no walk, no journal, no relay, no reaper):
//
//   supervisor  root: an idmapping user namespace (a helper child, "0 <host id> 1"), the home
//               mounted idmapped and read-only, the workspace idmapped; a v1 memory and pids
//               cgroup with their limits. Both: a Landlock ruleset of RULES rules (less the
//               init's 6) on O_PATH descriptors of real paths (the entries of /, then of $HOME).
//               clone(NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP), the id maps
//               ("1000 <host id> 1"; unprivileged "deny" to setgroups), a pipe to say go.
//   init (pid 1) setsid, setgroups, setresgid/uid 1000, not dumpable, parent-death signal,
//               / private, the device nodes cloned, / read-only (recursive mount_setattr, no
//               pivot_root: stockade remounts the host's tree in place), tmpfs /tmp and /dev,
//               6 device nodes bound, devpts, /dev/shm, links, proc, /proc/{sys,irq,bus}
//               read-only, the home (root), MASKS masks bound from a detached tmpfs, the
//               workspace bound writable, the hostname, lo up, 6 more Landlock rules,
//               landlock_restrict_self, 42 bounding-set drops; vfork of the command.
//   command     setsid, chdir, capabilities cleared, no_new_privs, landlock_restrict_self,
//               rlimits (unprivileged, for the cgroups), a seccomp filter of SECLEN instructions
//               with a listener (openat with O_CREAT notifies) sent to the init, exec true.
//   init again  capabilities (CAP_SYS_PTRACE only), no_new_privs, pidfd_open, poll the listener
//               and the pidfd, wait, exit with the command's status.
//
// Each piece can be left out (benches/startup_floor.sh measures the floor without each one):
//
//   startup_floor [no-user] [no-pid] [no-net] [no-ipc] [no-uts] [no-cgns] [no-mounts]
//                 [no-dev] [no-proc] [no-idmap] [no-cgroup] [no-landlock] [no-seccomp]
//                 [no-capdrop] [masks=N] [rules=N] [seclen=N] [maskdir=DIR] [-- CMD ARGS]
//   startup_floor serve SOCK [options]   # warm: the sandbox made once, one command per client
//   startup_floor client SOCK            # ask a warm sandbox to run `true`, exit as it did
//
// Defaults follow stockade's default run as this caller: root 7 masks, 60 rules, idmap and
// cgroups; unprivileged 0 masks (HOME=/ in the bench), 12 rules, rlimits. MASKS masks are
// files m0.. (the first 4) and directories (the rest) in DIR, which must exist (the script
// makes them). The workspace is the working directory. Not a test; no timing inside: it is
// measured from outside, beside bwrap and stockade.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static int o_user = 1, o_pid = 1, o_net = 1, o_ipc = 1, o_uts = 1, o_cgns = 1, o_mounts = 1,
           o_dev = 1, o_proc = 1, o_idmap = -1, o_cgroup = -1, o_landlock = 1, o_seccomp = 1,
           o_capdrop = 1, o_masks = -1, o_rules = -1, o_seclen = 222;
static const char *maskdir = "/var/tmp/stockade-floor-masks";
static char **cmd;
static char *deftrue[] = {"/usr/bin/true", NULL};
static int root;
static char ws[4096], home[4096];
static const unsigned host_id = 2146435072u; // stockade's sandbox id as root

#define DIE(what) die(what, __LINE__)
static void die(const char *what, int line) {
  fprintf(stderr, "startup_floor:%d: %s: %s\n", line, what, strerror(errno));
  _exit(125);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) DIE(path);
  close(fd);
}

static int path_fd(const char *path) {
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
  int fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd < 0) DIE(path);
  return fd;
}

// ---- Landlock (the installed header predates ABI 4; the ABI's own layout) ----
struct ll_attr {
  uint64_t fs, net, scoped;
};
struct ll_path {
  uint64_t allowed;
  int32_t parent;
} __attribute__((packed));
static int ll_abi;
static uint64_t ll_fs;

static int ll_ruleset(void) {
  ll_abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* VERSION */);
  if (ll_abi < 1) DIE("landlock version");
  ll_fs = (1ULL << 13) - 1;
  if (ll_abi >= 2) ll_fs |= 1ULL << 13; // refer
  if (ll_abi >= 3) ll_fs |= 1ULL << 14; // truncate
  if (ll_abi >= 5) ll_fs |= 1ULL << 15; // ioctl_dev
  struct ll_attr a = {.fs = ll_fs, .net = ll_abi >= 4 ? 3 : 0, .scoped = ll_abi >= 6 ? 3 : 0};
  size_t size = ll_abi >= 6 ? 24 : ll_abi >= 4 ? 16 : 8;
  int fd = syscall(SYS_landlock_create_ruleset, &a, size, 0);
  if (fd < 0) DIE("landlock_create_ruleset");
  return fd;
}

static void ll_rule(int ruleset, const char *path, int writable) {
  int fd = path_fd(path);
  struct stat st;
  if (fstat(fd, &st)) DIE("fstat");
  uint64_t ro = 1 | 4 | (S_ISDIR(st.st_mode) ? 8 : 0); // execute, read file, read dir
  uint64_t files = 1 | 2 | 4 | (ll_abi >= 3 ? 1ULL << 14 : 0) | (ll_abi >= 5 ? 1ULL << 15 : 0);
  struct ll_path r = {.allowed = writable ? (S_ISDIR(st.st_mode) ? ll_fs : files) : ro, .parent = fd};
  if (syscall(SYS_landlock_add_rule, ruleset, 1 /* PATH_BENEATH */, &r, 0)) DIE(path);
  close(fd);
}

// The supervisor's rules, read-only: /usr, /etc and the like, the entries of /, then of $HOME,
// then again (a rule on a path already ruled is added all the same).
static void ll_host_rules(int ruleset, int n) {
  const char *dirs[] = {"/", home};
  char path[8192];
  const char *first[] = {"/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin"}; // what `true` needs
  int done = 0;
  for (int i = 0; i < 6 && done < n; i++) {
    struct stat st;
    if (lstat(first[i], &st) || S_ISLNK(st.st_mode)) continue;
    ll_rule(ruleset, first[i], 0);
    done++;
  }
  for (int round = 0; done < n && round < 8; round++)
    for (int d = 0; d < 2 && done < n; d++) {
      DIR *dir = opendir(dirs[d]);
      if (!dir) continue;
      struct dirent *e;
      while (done < n && (e = readdir(dir))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        snprintf(path, sizeof path, "%s/%s", strcmp(dirs[d], "/") ? dirs[d] : "", e->d_name);
        struct stat st;
        if (lstat(path, &st) || S_ISLNK(st.st_mode)) continue;
        ll_rule(ruleset, path, 0);
        done++;
      }
      closedir(dir);
    }
}

// ---- seccomp: a program of `len` instructions (stockade's is 222), openat with O_CREAT
// notified, everything else allowed after a chain of comparisons as long as the rest ----
static struct sock_filter prog[256];
static int filter_len(int len) {
  if (len < 12) len = 12;
  if (len > 256) len = 256;
  int i = 0;
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  prog[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  while (i < len - 6) { // never-taken comparisons to the EPERM return at the end
    prog[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2000 + i, (len - 1) - i - 1, 0);
    i++;
  }
  prog[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 2);
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]));
  prog[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT, 1, 0);
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
  return i;
}

static void send_fd(int sock, int fd) {
  char byte = 1, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof(int));
  if (sendmsg(sock, &m, 0) < 0) DIE("sendmsg");
}

static int recv_fds(int sock, int *fds, int n) {
  char byte, ctl[CMSG_SPACE(3 * sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) <= 0 || !CMSG_FIRSTHDR(&m)) return -1;
  memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&m)), n * sizeof(int));
  return 0;
}

static void caps(uint32_t keep) {
  struct {
    uint32_t version;
    int pid;
  } hdr = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
  struct {
    uint32_t effective, permitted, inheritable;
  } data[2] = {{keep, keep, 0}, {0, 0, 0}};
  if (syscall(SYS_capset, &hdr, data)) DIE("capset");
}

// ---- mounts (the init, inside the namespaces) ----
static void setattr(int fd, const char *path, unsigned flags, uint64_t set) {
  struct mount_attr a = {.attr_set = set};
  if (mount_setattr(fd, path, flags, &a, sizeof a)) DIE("mount_setattr");
}
static void move_onto(int tree, const char *target) {
  int t = path_fd(target);
  if (move_mount(tree, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)) DIE(target);
  close(t);
  close(tree);
}
static void ro_rebind(const char *path) {
  int t = path_fd(path);
  int tree = open_tree(t, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (tree < 0) DIE(path);
  close(t);
  setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  move_onto(tree, path);
}

static int home_tree = -1, ws_tree = -1;
static const char *devs[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};

static void do_mounts(void) {
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) DIE("make / private");
  if (!o_mounts) return;
  int dev_tree[6];
  for (int i = 0; o_dev && i < 6; i++) {
    int t = path_fd(devs[i]);
    dev_tree[i] = open_tree(t, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (dev_tree[i] < 0) DIE(devs[i]);
    close(t);
  }
  if (ws_tree < 0) {
    int t = path_fd(ws);
    ws_tree = open_tree(t, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (ws_tree < 0) DIE("open_tree workspace");
    close(t);
  }
  setattr(AT_FDCWD, "/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1073741824")) DIE("/tmp");
  if (o_dev) {
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m")) DIE("/dev");
    for (int i = 0; i < 6; i++) {
      int fd = open(devs[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0) DIE(devs[i]);
      close(fd);
      fchmodat(AT_FDCWD, devs[i], 0666, 0);
      setattr(dev_tree[i], "", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_NOSUID);
      move_onto(dev_tree[i], devs[i]);
    }
    mkdirat(AT_FDCWD, "/dev/pts", 0755);
    if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"))
      DIE("devpts");
    symlinkat("pts/ptmx", AT_FDCWD, "/dev/ptmx");
    mkdirat(AT_FDCWD, "/dev/shm", 01777);
    fchmodat(AT_FDCWD, "/dev/shm", 01777, 0);
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1073741824")) DIE("/dev/shm");
    symlinkat("/proc/self/fd", AT_FDCWD, "/dev/fd");
    symlinkat("/proc/self/fd/0", AT_FDCWD, "/dev/stdin");
    symlinkat("/proc/self/fd/1", AT_FDCWD, "/dev/stdout");
    symlinkat("/proc/self/fd/2", AT_FDCWD, "/dev/stderr");
  }
  if (o_proc) {
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) DIE("proc");
    ro_rebind("/proc/sys");
    ro_rebind("/proc/irq");
    ro_rebind("/proc/bus");
  }
  if (home_tree >= 0) {
    setattr(home_tree, "", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    move_onto(home_tree, home);
  }
  if (o_masks > 0) {
    int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0) DIE("fsopen");
    if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
      DIE("fsconfig");
    int mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
    if (mnt < 0) DIE("fsmount");
    close(fs);
    mkdirat(mnt, "d", 0);
    close(openat(mnt, "f", O_RDONLY | O_CREAT | O_CLOEXEC, 0));
    for (int i = 0; i < o_masks; i++) {
      char target[4096];
      snprintf(target, sizeof target, "%s/m%d", maskdir, i);
      int tree = open_tree(mnt, i < 4 ? "f" : "d", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
      if (tree < 0) DIE("open_tree mask");
      setattr(tree, "", AT_EMPTY_PATH,
              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
      move_onto(tree, target);
    }
    close(mnt);
  }
  setattr(ws_tree, "", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  move_onto(ws_tree, ws);
}

// ---- the command: a vfork of the init ----
static int ruleset = -1;
static pid_t spawn(int notify_sock, const int *stdio) {
  pid_t pid = vfork();
  if (pid) return pid;
  if (stdio)
    for (int i = 0; i < 3; i++) dup2(stdio[i], i);
  setsid();
  if (chdir(ws)) _exit(126);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  caps(0);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (ruleset >= 0 && syscall(SYS_landlock_restrict_self, ruleset, 0)) _exit(126);
  if (!root) {
    struct rlimit r = {1UL << 34, 1UL << 34};
    setrlimit(RLIMIT_DATA, &r);
    struct rlimit p = {4096, 4096};
    setrlimit(RLIMIT_NPROC, &p);
  }
  syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (o_seccomp) {
    struct sock_fprog fp = {(unsigned short)filter_len(o_seclen), prog};
    int lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &fp);
    if (lfd < 0) _exit(126);
    send_fd(notify_sock, lfd);
    close(lfd);
  }
  execve(cmd[0], cmd, (char *[]){"PATH=/usr/bin:/bin", NULL});
  _exit(127);
}

// Run one command from the init and wait for it (the listener polled as stockade's init does).
static int run_one(const int *stdio) {
  int sp[2] = {-1, -1};
  if (o_seccomp && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) DIE("socketpair");
  pid_t pid = spawn(sp[1], stdio);
  if (pid < 0) DIE("vfork");
  int lfd = -1;
  if (o_seccomp) {
    close(sp[1]);
    recv_fds(sp[0], &lfd, 1);
    close(sp[0]);
  }
  int pfd = syscall(SYS_pidfd_open, pid, 0);
  struct pollfd p[2] = {{.fd = pfd, .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
  while (poll(p, lfd >= 0 ? 2 : 1, -1) >= 0 && !(p[0].revents & POLLIN)) {
    if (!(p[1].revents & POLLIN)) continue;
    // A creation (none for `true`): answered "continue", the least an answer is.
    struct seccomp_notif n;
    memset(&n, 0, sizeof n);
    if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &n)) continue;
    struct seccomp_notif_resp r = {.id = n.id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
    ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &r);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(pfd);
  if (lfd >= 0) close(lfd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int go[2], serve_fd = -1;

static int init_main(void) {
  char c;
  close(go[1]);
  if (read(go[0], &c, 1) != 1) _exit(125); // the id maps are written
  close(go[0]);
  setsid();
  if (o_user) {
    if (setgroups(0, NULL) && root) DIE("setgroups");
    if (setresgid(1000, 1000, 1000) || setresuid(1000, 1000, 1000)) DIE("setresuid");
  }
  prctl(PR_SET_DUMPABLE, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  umask(022);
  do_mounts();
  if (o_uts && sethostname("stockade", 8)) DIE("sethostname");
  if (o_net) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    close(s);
  }
  if (ruleset >= 0) {
    const char *mine[] = {"/tmp", "/dev/shm", "/dev/pts", "/proc", "/dev", ws};
    for (int i = 0; i < 6; i++) {
      struct stat st;
      ll_rule(ruleset, stat(mine[i], &st) ? "/" : mine[i], i == 5);
    }
    if (syscall(SYS_landlock_restrict_self, ruleset, 0)) DIE("landlock_restrict_self");
  }
  for (int cap = 0; o_capdrop && cap < 42; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  if (serve_fd < 0) {
    int rc = run_one(NULL);
    _exit(rc);
  }
  // Warm: the sandbox is made; each client gets one command with its own stdio.
  signal(SIGPIPE, SIG_IGN);
  for (;;) {
    int c = accept4(serve_fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) continue;
    int stdio[3];
    if (recv_fds(c, stdio, 3) == 0) {
      unsigned char rc = run_one(stdio);
      for (int i = 0; i < 3; i++) close(stdio[i]);
      if (write(c, &rc, 1) != 1) {
      }
    }
    close(c);
  }
}

static int cg_fd_dirs[2];
static char cg_dirs[2][4096];
static int cg_count;

// A v1 cgroup beside our own (stockade's as root here: memory, pids), with its limits.
static void cgroup_make(void) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  char line[4096];
  while (f && fgets(line, sizeof line, f) && cg_count < 2) {
    char *ctl = strchr(line, ':'), *path = ctl ? strchr(ctl + 1, ':') : NULL;
    if (!path) continue;
    *path++ = 0;
    path[strcspn(path, "\n")] = 0;
    const char *name = ctl + 1;
    if (strcmp(name, "memory") && strcmp(name, "pids")) continue;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(cg_dirs[cg_count], sizeof cg_dirs[0], "/sys/fs/cgroup/%s%s/floor-%d-%ld", name, path, getpid(),
             (long)ts.tv_nsec);
    if (mkdir(cg_dirs[cg_count], 0755)) DIE(cg_dirs[cg_count]);
    char file[4200];
    if (!strcmp(name, "memory")) {
      snprintf(file, sizeof file, "%s/memory.limit_in_bytes", cg_dirs[cg_count]);
      write_file(file, "8589934592");
      snprintf(file, sizeof file, "%s/memory.memsw.limit_in_bytes", cg_dirs[cg_count]);
      int fd = open(file, O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        if (write(fd, "8589934592", 10) < 0) {
        }
        close(fd);
      }
    } else {
      snprintf(file, sizeof file, "%s/pids.max", cg_dirs[cg_count]);
      write_file(file, "4096");
    }
    snprintf(file, sizeof file, "%s/tasks", cg_dirs[cg_count]);
    cg_fd_dirs[cg_count] = open(file, O_WRONLY | O_CLOEXEC);
    if (cg_fd_dirs[cg_count] < 0) DIE(file);
    cg_count++;
  }
  if (f) fclose(f);
}

static int client(const char *sock) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
  if (connect(s, (struct sockaddr *)&a, sizeof a)) DIE("connect");
  char byte = 1, ctl[CMSG_SPACE(3 * sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(3 * sizeof(int));
  int fds[3] = {0, 1, 2};
  memcpy(CMSG_DATA(h), fds, sizeof fds);
  if (sendmsg(s, &m, 0) < 0) DIE("sendmsg");
  unsigned char rc;
  if (read(s, &rc, 1) != 1) return 125;
  return rc;
}

int main(int argc, char **argv) {
  int a = 1;
  if (argc > 2 && !strcmp(argv[1], "client")) return client(argv[2]);
  const char *serve = NULL;
  if (argc > 2 && !strcmp(argv[1], "serve")) serve = argv[2], a = 3;
  for (; a < argc; a++) {
    const char *s = argv[a];
    if (!strcmp(s, "--")) {
      cmd = argv + a + 1;
      break;
    }
#define FLAG(name, var) else if (!strcmp(s, "no-" name)) var = 0;
    if (0) {
    }
    FLAG("user", o_user) FLAG("pid", o_pid) FLAG("net", o_net) FLAG("ipc", o_ipc) FLAG("uts", o_uts)
    FLAG("cgns", o_cgns) FLAG("mounts", o_mounts) FLAG("dev", o_dev) FLAG("proc", o_proc)
    FLAG("idmap", o_idmap) FLAG("cgroup", o_cgroup) FLAG("landlock", o_landlock)
    FLAG("seccomp", o_seccomp) FLAG("capdrop", o_capdrop)
    else if (!strncmp(s, "masks=", 6)) o_masks = atoi(s + 6);
    else if (!strncmp(s, "rules=", 6)) o_rules = atoi(s + 6);
    else if (!strncmp(s, "seclen=", 7)) o_seclen = atoi(s + 7);
    else if (!strncmp(s, "maskdir=", 8)) maskdir = s + 8;
    else {
      fprintf(stderr, "startup_floor: unknown option %s\n", s);
      return 2;
    }
  }
  if (!cmd || !cmd[0]) cmd = deftrue;
  root = geteuid() == 0;
  if (o_idmap < 0) o_idmap = root;
  if (o_cgroup < 0) o_cgroup = root;
  if (o_masks < 0) o_masks = root ? 7 : 0;
  if (o_rules < 0) o_rules = root ? 60 : 12;
  if (!o_pid) o_proc = 0;          // proc needs a pid namespace of the user namespace's own
  if (!o_user) o_idmap = 0;        // the command's id is 1000 only in a user namespace
  if (!root && !o_user) return 2;  // nothing to mount with
  if (!o_mounts) o_masks = 0, o_idmap = 0;
  if (!getcwd(ws, sizeof ws)) DIE("getcwd");
  snprintf(home, sizeof home, "%s", getenv("HOME") ? getenv("HOME") : "/");
  if (!strcmp(home, "/")) o_idmap = 0;

  if (o_landlock) {
    ruleset = ll_ruleset();
    ll_host_rules(ruleset, o_rules > 6 ? o_rules - 6 : 0);
  }
  if (o_idmap) {
    // An idmapping user namespace: a helper child only holds it while the trees are made.
    int hold[2];
    if (pipe2(hold, O_CLOEXEC)) DIE("pipe");
    pid_t helper = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
    if (helper < 0) DIE("clone idmap");
    if (!helper) {
      char c;
      close(hold[1]);
      if (read(hold[0], &c, 1) < 0) {
      }
      _exit(0);
    }
    close(hold[0]);
    char path[64], map[64];
    snprintf(map, sizeof map, "0 %u 1\n", host_id);
    snprintf(path, sizeof path, "/proc/%d/uid_map", helper);
    write_file(path, map);
    snprintf(path, sizeof path, "/proc/%d/gid_map", helper);
    write_file(path, map);
    snprintf(path, sizeof path, "/proc/%d/ns/user", helper);
    int userns = open(path, O_RDONLY | O_CLOEXEC);
    if (userns < 0) DIE("ns/user");
    const char *srcs[] = {home, ws};
    int *trees[] = {&home_tree, &ws_tree};
    for (int i = 0; i < 2; i++) {
      int t = path_fd(srcs[i]);
      *trees[i] = open_tree(t, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
      if (*trees[i] < 0) DIE("open_tree idmap");
      close(t);
      struct mount_attr ma = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                          (i == 0 ? MOUNT_ATTR_RDONLY : 0),
                              .userns_fd = (uint64_t)userns};
      if (mount_setattr(*trees[i], "", AT_EMPTY_PATH, &ma, sizeof ma)) DIE("mount_setattr idmap");
    }
    close(hold[1]);
    waitpid(helper, NULL, 0);
    close(userns);
  }
  if (o_cgroup) cgroup_make();
  if (serve) {
    serve_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", serve);
    unlink(serve);
    if (bind(serve_fd, (struct sockaddr *)&sa, sizeof sa) || listen(serve_fd, 64)) DIE("bind");
    chmod(serve, 0777);
  }
  if (pipe2(go, O_CLOEXEC)) DIE("pipe");
  int flags = (o_user ? CLONE_NEWUSER : 0) | (o_mounts || o_user ? CLONE_NEWNS : 0) | (o_pid ? CLONE_NEWPID : 0) |
              (o_net ? CLONE_NEWNET : 0) | (o_ipc ? CLONE_NEWIPC : 0) | (o_uts ? CLONE_NEWUTS : 0) |
              (o_cgns ? CLONE_NEWCGROUP : 0);
  if (!o_mounts && !o_user) flags |= CLONE_NEWNS;
  pid_t init = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
  if (init < 0) DIE("clone");
  if (!init) return init_main();
  close(go[0]);
  if (o_user) {
    char path[64], map[64];
    snprintf(map, sizeof map, "1000 %u 1\n", root ? host_id : getuid());
    snprintf(path, sizeof path, "/proc/%d/uid_map", init);
    if (!root) {
      char sg[64];
      snprintf(sg, sizeof sg, "/proc/%d/setgroups", init);
      write_file(sg, "deny");
    }
    write_file(path, map);
    snprintf(map, sizeof map, "1000 %u 1\n", root ? host_id : getgid());
    snprintf(path, sizeof path, "/proc/%d/gid_map", init);
    write_file(path, map);
  }
  char pid[32];
  snprintf(pid, sizeof pid, "%d", init);
  for (int i = 0; i < cg_count; i++)
    if (write(cg_fd_dirs[i], pid, strlen(pid)) < 0) DIE("join cgroup");
  if (write(go[1], "g", 1) != 1) DIE("go");
  close(go[1]);
  if (home_tree >= 0) close(home_tree);
  if (ws_tree >= 0) close(ws_tree);
  if (serve) { // warm: the supervisor stays until SIGTERM, then takes the sandbox down
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);
    sigprocmask(SIG_BLOCK, &term, NULL);
    int sig;
    sigwait(&term, &sig);
    kill(init, SIGKILL);
  }
  int status = 0;
  waitpid(init, &status, 0);
  int busy = 0;
  for (int i = 0; i < cg_count; i++) {
    close(cg_fd_dirs[i]);
    busy |= rmdir(cg_dirs[i]) != 0;
  }
  // A v1 cgroup can be busy for a moment after its last task is reaped: as stockade's reaper,
  // a child retries off the critical path.
  if (busy && fork() == 0) {
    for (int t = 0; t < 200; t++) {
      int left = 0;
      for (int i = 0; i < cg_count; i++) left |= rmdir(cg_dirs[i]) != 0 && errno != ENOENT;
      if (!left) break;
      usleep(5000);
    }
    _exit(0);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
