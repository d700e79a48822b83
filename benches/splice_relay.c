/* The floor of a one-hop relay in user space, for benches/tunnel.sh: accept on 127.0.0.1:PORT,
 * connect to 127.0.0.1:UPSTREAM, and move bytes both ways with splice(2) through a 1 MiB pipe,
 * one blocking thread per direction; no parsing, no rules, no accounting, no timeouts. One
 * process (threads, not forks), so /proc/PID/stat holds all of its CPU time.
 *
 *   cc -O2 -o splice_relay splice_relay.c && ./splice_relay PORT UPSTREAM
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct pair { int from, to; };

static void *pump(void *arg) {
    struct pair *p = arg;
    int fds[2];
    if (pipe(fds) < 0) return NULL;
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    for (;;) {
        ssize_t n = splice(p->from, NULL, fds[1], NULL, 1 << 20, SPLICE_F_MOVE);
        if (n <= 0) break;
        while (n > 0) {
            ssize_t m = splice(fds[0], NULL, p->to, NULL, n, SPLICE_F_MOVE);
            if (m <= 0) goto out;
            n -= m;
        }
    }
out:
    shutdown(p->to, SHUT_WR);
    close(fds[0]);
    close(fds[1]);
    return NULL;
}

static struct sockaddr_in upstream;

static void *serve(void *arg) {
    int c = (int)(long)arg, u = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(u, (struct sockaddr *)&upstream, sizeof upstream) == 0) {
        struct pair up = {c, u}, down = {u, c};
        pthread_t t;
        pthread_create(&t, NULL, pump, &up);
        pump(&down);
        pthread_join(t, NULL);
    }
    close(u);
    close(c);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    a.sin_port = htons(atoi(argv[1]));
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 16) < 0) return 1;
    upstream = a;
    upstream.sin_port = htons(atoi(argv[2]));
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0) continue;
        pthread_t t;
        pthread_create(&t, NULL, serve, (void *)(long)c);
        pthread_detach(t);
    }
}
