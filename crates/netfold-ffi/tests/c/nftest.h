/* Helpers shared by the C tests of the netfold C API (compiled and run by tests/c_api.rs). */
#ifndef NFTEST_H
#define NFTEST_H

#define _GNU_SOURCE
#include "netfold.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n", __FILE__, __LINE__, \
                    #cond, errno, strerror(errno));                                       \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* A call that must fail with a given errno. */
#define CHECK_ERR(call, err)                                                              \
    do {                                                                                  \
        errno = 0;                                                                        \
        long r_ = (long)(call);                                                           \
        if (r_ != -1 || errno != (err)) {                                                 \
            fprintf(stderr, "%s:%d: %s returned %ld errno %d (%s), wanted -1/%s\n",       \
                    __FILE__, __LINE__, #call, r_, errno, strerror(errno), #err);         \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static inline nf_stack *make_stack(const char *addr, int medium, int clock) {
    nf_config c;
    nf_config_init(&c);
    c.address = addr;
    c.medium = medium;
    c.clock = clock;
    nf_stack *s = nf_stack_new(&c);
    CHECK(s != NULL);
    return s;
}

static inline struct sockaddr_in sin_of(const char *ip, unsigned short port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
    return a;
}

static inline struct sockaddr_in6 sin6_of(const char *ip, unsigned short port) {
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    CHECK(inet_pton(AF_INET6, ip, &a.sin6_addr) == 1);
    return a;
}

/* Moves every waiting frame from a to b and from b to a until neither has any; returns how many
 * frames moved. With NF_CLOCK_MANUAL each injection is processed before nf_inject returns. */
static inline int shuttle(nf_stack *a, nf_stack *b) {
    unsigned char buf[2048];
    int moved = 0, progress;
    do {
        progress = 0;
        ssize_t n;
        while ((n = nf_take(a, buf, sizeof buf)) > 0) {
            CHECK(nf_inject(b, buf, (size_t)n) == 0);
            moved++;
            progress = 1;
        }
        CHECK(n == -1 && errno == EAGAIN);
        while ((n = nf_take(b, buf, sizeof buf)) > 0) {
            CHECK(nf_inject(a, buf, (size_t)n) == 0);
            moved++;
            progress = 1;
        }
        CHECK(n == -1 && errno == EAGAIN);
    } while (progress);
    return moved;
}

/* A listening TCP socket on port, non-blocking. */
static inline int listen_on(nf_stack *s, unsigned short port) {
    int fd = nf_socket(s, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = sin_of("0.0.0.0", port);
    CHECK(nf_bind(s, fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(nf_listen(s, fd, 16) == 0);
    return fd;
}

/* Establishes a connection between two MANUAL stacks: returns the client fd in *cfd and the
 * accepted server fd in *sfd (both non-blocking). */
static inline void connect_pair(nf_stack *cli, nf_stack *srv, const char *srv_ip,
                                unsigned short port, int *cfd, int *sfd) {
    int l = listen_on(srv, port);
    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    struct sockaddr_in a = sin_of(srv_ip, port);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    shuttle(cli, srv);
    int s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_fcntl(srv, s, F_SETFL, O_NONBLOCK) == 0);
    CHECK(nf_close(srv, l) == 0);
    *cfd = c;
    *sfd = s;
}

#ifdef NFTEST_WIRE
/* The link between two REAL-clock stacks: a thread moving frames both ways until stopped,
 * napping 0.1 ms when the link is idle. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct nftest_wire {
    nf_stack *a, *b;
    atomic_int stop;
    pthread_t thread;
};

static void *nftest_wire_run(void *arg) {
    struct nftest_wire *w = arg;
    unsigned char f[2048];
    while (!atomic_load(&w->stop)) {
        int moved = 0;
        ssize_t n;
        while ((n = nf_take(w->a, f, sizeof f)) > 0) {
            if (nf_inject(w->b, f, (size_t)n) == 0) moved++;
        }
        while ((n = nf_take(w->b, f, sizeof f)) > 0) {
            if (nf_inject(w->a, f, (size_t)n) == 0) moved++;
        }
        if (!moved) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static inline void nftest_wire_start(struct nftest_wire *w, nf_stack *a, nf_stack *b) {
    w->a = a;
    w->b = b;
    atomic_store(&w->stop, 0);
    CHECK(pthread_create(&w->thread, NULL, nftest_wire_run, w) == 0);
}

static inline void nftest_wire_stop(struct nftest_wire *w) {
    atomic_store(&w->stop, 1);
    CHECK(pthread_join(w->thread, NULL) == 0);
}
#endif

#endif
