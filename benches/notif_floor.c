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
// SYNC=1 in the environment asks for SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6); CPU=1
// prints the CPU time of both processes per file instead of the wall time.
// Prints microseconds per file. Run by benches/notif_floor.sh; not a test.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
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

static void child(int mode, int sock, const char *dir, int n) {
  if (mode > 0) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) _exit(2);
    int listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener < 0) { perror("seccomp"); _exit(2); }
    send_fd(sock, listener);
    close(listener);
  }
  char go, path[4096];
  if (read(sock, &go, 1) != 1) _exit(2);
  // Mode 5: relative to a directory descriptor, always number DIRFD (the supervisor takes it).
  int at = AT_FDCWD;
  if (mode == 5) {
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || dup2(d, DIRFD) != DIRFD) _exit(2);
    at = DIRFD;
  }
  double t0 = now();
  for (int i = 0; i < n; i++) {
    if (mode == 5)
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

static void serve(int mode, int listener, pid_t child_pid) {
  struct seccomp_notif req;
  struct seccomp_notif_resp resp;
  char path[4096], mem[64], cwd[4096];
  int pidfd = mode >= 4 ? (int)syscall(SYS_pidfd_open, child_pid, 0) : -1;
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
    int fd;
    if (mode == 5) {
      int start = (int)syscall(SYS_pidfd_getfd, pidfd, (int)req.data.args[0], 0);
      if (start < 0 || fchdir(start) < 0 || !getcwd(cwd, sizeof cwd)) {
        fd = -1;
      } else {
        struct {
          __u64 flags, mode, resolve;
        } how = {(__u64)((int)req.data.args[2] | O_CLOEXEC), req.data.args[3] & 07777, 0x04 | 0x02};
        fd = (int)syscall(SYS_openat2, start, path, &how, sizeof how);
      }
      if (start >= 0) close(start);
    } else {
      fd = openat(AT_FDCWD, path, (int)req.data.args[2] | O_CLOEXEC, (mode_t)req.data.args[3]);
    }
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

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: notif_floor MODE DIR N\n");
    return 2;
  }
  int mode = atoi(argv[1]), n = atoi(argv[3]), sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return 2;
  pid_t pid = fork();
  if (pid == 0) child(mode, sv[1], argv[2], n);
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
  if (getenv("CPU")) {
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
