// The floor of mediated creation: what one seccomp user notification per open(O_CREAT) costs
// on this machine, with nothing of stockade's around it. A child installs a filter that
// notifies openat with O_CREAT and creates N files in DIR; its parent is the supervisor:
//
//   mode 0  no filter (the bare cost of open+write+close)
//   mode 1  the supervisor answers "continue" (the notification round trip alone)
//   mode 2  the supervisor does the least a safe mediator must: read the path from the
//           child's memory, open it itself, hand the descriptor over with ADDFD|SEND
//   mode 3  as mode 2, the path read as stockade's init reads it: process_vm_readv, then
//           SECCOMP_IOCTL_NOTIF_ID_VALID (the tid could have been reused before the read;
//           mode 2's open of /proc/<pid>/mem by number has the same hole and no check)
//   mode 4  as mode 3, with a poll of the listener and of the child's pidfd before each RECV
//           (a mediator must also see its command end while it waits)
//   mode 5  as mode 4 for paths relative to a directory descriptor of the child's (as tar
//           makes them): the directory taken with pidfd_getfd, its path asked with fchdir +
//           getcwd (what the rules need), the file made by openat2(RESOLVE_NO_SYMLINKS)
//           relative to it, the copy closed: stockade's design for that call without its
//           rules, Landlock or Rust (docs/design.md, mediated creation, "Cost")
//
// The fair floor: the layers stockade's command and init run under, each added by a mode of
// its own (benches/notif_floor.sh --fair prepares the two files from a real run):
//
//   mode 6  as mode 5, the child under stockade's own seccomp program instead of the 6
//           instructions above: FILTER=FILE holds it (raw struct sock_filter, dumped from a
//           real run's command by `notif_floor dump PID`: the deny-list and the mediated
//           calls in one search). Its other notifications (mkdir, umask, chmod...) are
//           served too: mkdir made by the supervisor like a file, the rest answered "continue"
//   mode 7  as mode 6, the child in a Landlock domain of the default run's shape: LANDLOCK=
//           FILE holds "<access bits> <path>" lines (the plan's host rules, then the init's
//           own); every right of the kernel's ABI handled, signals and abstract sockets
//           scoped (ABI 6), the domain taken twice (stockade's command is nested in its init's)
//   mode 8  as mode 7, the supervisor in the outer of those domains (stockade's init takes
//           the command's rules itself: its own lookups and creations pass Landlock)
//   mode 9  as mode 8, a path with directories made the careful way, as stockade's init
//           makes it since edf3e36 (on a case-folding directory the spelled path is not the
//           one the kernel resolves): the parent opened by openat2(O_PATH, RESOLVE_NO_SYMLINKS)
//           from the start, the start closed, the parent's path by fchdir + getcwd, the file
//           made by openat of the last name in it, the parent closed (13 calls, not 11)
//
// With a command after N (`notif_floor MODE DIR N CMD ARG...`), the child runs it (execve
// under the filter and domains) instead of its loop of N files: tar as in benches/extract.sh.
// Its creations may then also be `open`/`creat`/`mkdir`, absolute or relative to the cwd (the
// start taken from /proc/<pid>/cwd), with paths read until their NUL.
//
// SYNC=1 in the environment asks for SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6); CPU=1
// prints the CPU time of both processes per file instead of the wall time.
// Prints microseconds per file (nothing with a command). Run by benches/notif_floor.sh and
// benches/extract.sh; not a test.
//
// `notif_floor dump PID` (root): the seccomp program of task PID (the newest of its stack)
// on stdout, by PTRACE_SECCOMP_GET_FILTER; the number of programs in its stack on stderr.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

#define DIRFD 100

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void send_fd(int sock, int fd) {
  char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof(int));
  if (sendmsg(sock, &m, 0) < 0) _exit(2);
}

static int recv_fd(int sock) {
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  int fd = -1;
  if (recvmsg(sock, &m, 0) > 0 && CMSG_FIRSTHDR(&m)) memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
  return fd;
}

// Stockade's program (mode >= 6), read from FILTER before the fork.
static struct sock_filter *stockade_prog;
static unsigned short stockade_len;

static void load_filter(void) {
  const char *file = getenv("FILTER");
  FILE *f = file ? fopen(file, "rb") : NULL;
  if (!f) {
    fprintf(stderr, "notif_floor: modes 6-8 need FILTER=<a program dumped by `notif_floor dump`>\n");
    exit(2);
  }
  stockade_prog = calloc(4096, sizeof *stockade_prog);
  size_t n = stockade_prog ? fread(stockade_prog, sizeof *stockade_prog, 4096, f) : 0;
  fclose(f);
  if (n == 0 || n >= 4096) exit(2);
  stockade_len = (unsigned short)n;
}

// Landlock (mode >= 7): a ruleset of the default run's shape, built before the fork.
#define LL_FILE_RIGHTS ((1ULL << 0) | (1ULL << 1) | (1ULL << 2) | (1ULL << 14) | (1ULL << 15))
struct ll_ruleset_attr {
  __u64 handled_access_fs, handled_access_net, scoped;
};
struct ll_path_beneath {
  __u64 allowed_access;
  __s32 parent_fd;
} __attribute__((packed));

static int landlock_ruleset(void) {
  const char *file = getenv("LANDLOCK");
  FILE *f = file ? fopen(file, "r") : NULL;
  if (!f) {
    fprintf(stderr, "notif_floor: modes 7-8 need LANDLOCK=<\"<bits> <path>\" lines>\n");
    exit(2);
  }
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
  if (abi < 1) { perror("landlock"); exit(2); }
  // Every filesystem right of this ABI (the landlock crate's AccessFs::from_all, as stockade).
  int bits = abi >= 5 ? 16 : abi >= 3 ? 15 : abi >= 2 ? 14 : 13;
  struct ll_ruleset_attr attr = {(1ULL << bits) - 1, 0, abi >= 6 ? 3 /* abstract sockets, signals */ : 0};
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, abi >= 6 ? sizeof attr : 2 * sizeof(__u64), 0);
  if (rs < 0) { perror("landlock_create_ruleset"); exit(2); }
  char line[4200];
  int added = 0;
  while (fgets(line, sizeof line, f)) {
    char *sp = strchr(line, ' ');
    if (!sp) continue;
    *sp = 0;
    char *path = sp + 1;
    path[strcspn(path, "\n")] = 0;
    int pfd = open(path, O_PATH | O_CLOEXEC);
    if (pfd < 0) continue; // gone: nothing granted (as stockade)
    struct stat st;
    struct ll_path_beneath rule = {strtoull(line, NULL, 0) & attr.handled_access_fs, pfd};
    if (fstat(pfd, &st) == 0 && !S_ISDIR(st.st_mode)) rule.allowed_access &= LL_FILE_RIGHTS;
    if (syscall(SYS_landlock_add_rule, rs, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &rule, 0)) {
      perror(path);
      exit(2);
    }
    close(pfd);
    added++;
  }
  fclose(f);
  if (getenv("VERBOSE")) fprintf(stderr, "notif_floor: Landlock ABI %ld, %d rules\n", abi, added);
  return rs;
}

static void restrict_self(int rs) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, rs, 0)) {
    perror("landlock_restrict_self");
    _exit(2);
  }
}

static void child(int mode, int sock, const char *dir, int n, char **cmd, int ruleset) {
  if (mode > 0) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (mode >= 6) prog = (struct sock_fprog){stockade_len, stockade_prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) _exit(2);
    // The command's domain: nested in the init's (mode 8: the parent's, taken before the
    // fork; mode 7: taken here twice, the supervisor stays outside).
    if (mode == 7) restrict_self(ruleset);
    if (mode >= 7) restrict_self(ruleset);
    if (ruleset >= 0) close(ruleset);
    int listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener < 0) { perror("seccomp"); _exit(2); }
    send_fd(sock, listener);
    close(listener);
  }
  char go, path[4096];
  if (read(sock, &go, 1) != 1) _exit(2);
  if (cmd) {
    execvp(cmd[0], cmd);
    perror(cmd[0]);
    _exit(127);
  }
  // Mode 5 and up: relative to a directory descriptor, always number DIRFD (the supervisor
  // takes it).
  int at = AT_FDCWD;
  if (mode >= 5) {
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || dup2(d, DIRFD) != DIRFD) _exit(2);
    at = DIRFD;
  }
  double t0 = now();
  for (int i = 0; i < n; i++) {
    if (mode >= 5)
      snprintf(path, sizeof path, "f%d", i);
    else
      snprintf(path, sizeof path, "%s/f%d", dir, i);
    int fd = openat(at, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1) { perror("open"); _exit(1); }
    close(fd);
  }
  if (!getenv("CPU")) printf("%.2f\n", (now() - t0) / n * 1e6);
  fflush(stdout);
  _exit(0);
}

// The path argument from the task's memory (process_vm_readv, up to each page's end, until
// its NUL), then ID_VALID. -1 when unreadable or no longer valid.
static int read_path(int listener, struct seccomp_notif *req, __u64 addr, char *path, size_t size) {
  size_t have = 0;
  for (;;) {
    size_t want = 4096 - (addr + have) % 4096;
    if (want > size - 1 - have) want = size - 1 - have;
    struct iovec local = {path + have, want};
    struct iovec remote = {(void *)(addr + have), want};
    ssize_t got = process_vm_readv(req->pid, &local, 1, &remote, 1, 0);
    if (got <= 0) return -1;
    if (memchr(path + have, 0, got)) break;
    have += got;
    if (have >= size - 1) return -1;
  }
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0) return -1;
  return 0;
}

static void serve(int mode, int listener, pid_t child_pid) {
  struct seccomp_notif req;
  struct seccomp_notif_resp resp;
  char path[4096], mem[64], cwd[4096];
  int pidfd = mode >= 4 ? (int)syscall(SYS_pidfd_open, child_pid, 0) : -1;
  int taskfd = -1;
  __u32 task = 0;
  for (;;) {
    if (mode >= 4) {
      struct pollfd p[2] = {{listener, POLLIN, 0}, {pidfd, POLLIN, 0}};
      if (poll(p, 2, -1) < 0 && errno != EINTR) return;
      if (!(p[0].revents & POLLIN)) return; // the child is gone
    }
    memset(&req, 0, sizeof req);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
      if (errno == EINTR) continue;
      return; // the child is gone
    }
    memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    if (mode == 1) {
      resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
      continue;
    }
    if (mode >= 5) {
      // The creating calls by number (a command's may be any of them; the loop's are all
      // openat with O_CREAT); whatever else stockade's program notifies goes on.
      const __u64 *a = req.data.args;
      int at, dir = 0;
      __u64 addr, flags = 0, perm;
      switch (req.data.nr) {
      case SYS_openat: at = (int)a[0], addr = a[1], flags = a[2], perm = a[3]; break;
      case SYS_open: at = AT_FDCWD, addr = a[0], flags = a[1], perm = a[2]; break;
      case SYS_creat: at = AT_FDCWD, addr = a[0], flags = O_CREAT | O_WRONLY | O_TRUNC, perm = a[1]; break;
      case SYS_mkdirat: at = (int)a[0], addr = a[1], perm = a[2], dir = 1; break;
      case SYS_mkdir: at = AT_FDCWD, addr = a[0], perm = a[1], dir = 1; break;
      default:
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        continue;
      }
      int fd = -1, start = -1, err = 0;
      errno = 0;
      if (read_path(listener, &req, addr, path, sizeof path) < 0) {
        err = EACCES;
      } else if (path[0] != '/') {
        // The start directory (the task's dirfd by pidfd_getfd, or its cwd) and its path
        // (what the rules need), by fchdir + getcwd.
        if (at == AT_FDCWD) {
          snprintf(mem, sizeof mem, "/proc/%d/cwd", req.pid);
          start = open(mem, O_PATH | O_DIRECTORY | O_CLOEXEC);
        } else {
          // A pidfd of the calling task, kept while the same task calls (as stockade's
          // init keeps one per task): the command's children call too.
          if (req.pid != task) {
            if (taskfd >= 0) close(taskfd);
            task = req.pid;
            taskfd = (int)syscall(SYS_pidfd_open, task, O_EXCL /* PIDFD_THREAD */);
          }
          start = (int)syscall(SYS_pidfd_getfd, taskfd, at, 0);
        }
        char *last = strrchr(path, '/');
        if (mode >= 9 && start >= 0 && last) {
          // The careful way: the parent first (its name kept, the last name cut off).
          struct {
            __u64 flags, mode, resolve;
          } how = {O_PATH | O_DIRECTORY | O_CLOEXEC, 0, 0x04 | 0x02};
          char keep = last[1];
          last[1] = 0;
          int parent = (int)syscall(SYS_openat2, start, path, &how, sizeof how);
          last[1] = keep;
          close(start);
          start = parent;
          memmove(path, last + 1, strlen(last + 1) + 1);
        }
        if (start < 0 || fchdir(start) < 0 || !getcwd(cwd, sizeof cwd)) err = errno ? errno : EBADF;
      }
      if (!err && dir) {
        if (mkdirat(start >= 0 ? start : AT_FDCWD, path, (mode_t)(perm & 07777)) < 0) err = errno;
      } else if (!err && mode >= 9 && start >= 0) {
        fd = openat(start, path, (int)flags | O_CLOEXEC, (mode_t)(perm & 07777));
        if (fd < 0) err = errno;
      } else if (!err) {
        struct {
          __u64 flags, mode, resolve;
        } how = {(__u64)((int)flags | O_CLOEXEC), perm & 07777, 0x04 | 0x02};
        fd = (int)syscall(SYS_openat2, start >= 0 ? start : AT_FDCWD, path, &how, sizeof how);
        if (fd < 0) err = errno;
      }
      if (start >= 0) close(start);
      if (err || dir) {
        resp.error = -err;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        continue;
      }
      struct seccomp_notif_addfd add = {.id = req.id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = fd};
      if (flags & O_CLOEXEC) add.newfd_flags = O_CLOEXEC;
      ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
      close(fd);
      continue;
    }
    ssize_t got;
    if (mode >= 3) {
      // One page at most: the paths here are short and never cross into an unmapped page.
      size_t want = 4096 - req.data.args[1] % 4096;
      struct iovec local = {path, want < sizeof path - 1 ? want : sizeof path - 1};
      struct iovec remote = {(void *)req.data.args[1], local.iov_len};
      got = process_vm_readv(req.pid, &local, 1, &remote, 1, 0);
      if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) < 0) got = -1;
    } else {
      snprintf(mem, sizeof mem, "/proc/%d/mem", req.pid);
      int m = open(mem, O_RDONLY | O_CLOEXEC);
      got = m < 0 ? -1 : pread(m, path, sizeof path - 1, req.data.args[1]);
      if (m >= 0) close(m);
    }
    path[got < 0 ? 0 : got] = 0;
    int fd = openat(AT_FDCWD, path, (int)req.data.args[2] | O_CLOEXEC, (mode_t)req.data.args[3]);
    if (fd < 0) {
      resp.error = -errno;
      ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
      continue;
    }
    struct seccomp_notif_addfd add = {.id = req.id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = fd};
    ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
    close(fd);
  }
}

// `notif_floor dump PID`: PID's newest seccomp program, raw, on stdout.
static int dump(pid_t pid) {
  int status;
  if (ptrace(PTRACE_SEIZE, pid, 0, 0) || ptrace(PTRACE_INTERRUPT, pid, 0, 0) || waitpid(pid, &status, __WALL) < 0) {
    perror("ptrace");
    return 2;
  }
  long n = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, 0, NULL);
  struct sock_filter *f = n > 0 ? calloc(n, sizeof *f) : NULL;
  if (!f || ptrace(PTRACE_SECCOMP_GET_FILTER, pid, 0, f) != n) {
    perror("PTRACE_SECCOMP_GET_FILTER");
    return 2;
  }
  long stack = 1;
  while (ptrace(PTRACE_SECCOMP_GET_FILTER, pid, stack, NULL) > 0) stack++;
  fwrite(f, sizeof *f, n, stdout);
  fprintf(stderr, "%ld instructions, %ld program(s) in the stack\n", n, stack);
  ptrace(PTRACE_DETACH, pid, 0, 0);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "dump")) return dump(atoi(argv[2]));
  if (argc < 4) {
    fprintf(stderr, "usage: notif_floor MODE DIR N [COMMAND ARG...] | notif_floor dump PID\n");
    return 2;
  }
  int mode = atoi(argv[1]), n = atoi(argv[3]), sv[2], ruleset = -1;
  char **cmd = argc > 4 ? argv + 4 : NULL;
  if (mode >= 6) load_filter();
  if (mode >= 7) ruleset = landlock_ruleset();
  // Modes 8 and 9: the supervisor's own domain, the outer of the command's two.
  if (mode >= 8) restrict_self(ruleset);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return 2;
  pid_t pid = fork();
  if (pid == 0) child(mode, sv[1], argv[2], n, cmd, ruleset);
  if (ruleset >= 0) close(ruleset);
  int listener = mode > 0 ? recv_fd(sv[0]) : -1;
  if (mode > 0 && listener < 0) return 2;
  if (listener >= 0 && getenv("SYNC")) {
    __u64 flags = 1; // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) < 0) perror("SYNC_WAKE_UP");
  }
  if (write(sv[0], "g", 1) != 1) return 2;
  if (listener >= 0) serve(mode, listener, pid);
  int status;
  waitpid(pid, &status, 0);
  if (getenv("CPU") && !cmd) {
    // CPU=1: the CPU time (user + system) of both processes per file instead of the wall
    // time (less swayed by other load on the machine than the wall clock).
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    double s = self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec + kids.ru_stime.tv_sec +
               (self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec + kids.ru_stime.tv_usec) * 1e-6;
    printf("%.2f\n", s / n * 1e6);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
