/* Shards through the C API: two hosts of two shards each, joined by the in-memory
 * multi-queue link that steers every frame by the RSS hash of its 4-tuple.
 *  - A server worker per shard (nf_shards_run_on) accepts its shard's connections with
 *    nf_accept_on and echoes them; a client thread per shard connects with nf_connect_on.
 *    Every echo is checked byte for byte, and each server shard accepted exactly the
 *    connections its client shard opened (a connection steered to the wrong shard would have
 *    been reset there, and its connect or echo would fail).
 *  - nf_accept_any reports the shard a connection arrived on, also to a thread that was
 *    already waiting, and times out with EAGAIN when nothing comes.
 *  - Errors: out-of-range shards, freeing a view, freeing while a callback runs.
 * Every wait is bounded (SO_RCVTIMEO/SO_SNDTIMEO, accept timeouts), so a lost wake-up fails
 * the test instead of hanging it. */
#define _GNU_SOURCE
#include "nftest.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/time.h>

#define SHARDS 2
#define PER_SHARD 8
#define PORT 7
#define SERVER_IP "198.18.0.2"

static nf_shards *cli, *srv;
static nf_shards_listener *lst;
/* Local ports of the connections each client shard opened; peer ports each server shard
 * accepted. */
static unsigned short opened[SHARDS][PER_SHARD];
static unsigned short accepted[SHARDS][PER_SHARD];

static void bound_waits(nf_stack *s, int fd) {
    struct timeval tv = {20, 0};
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
}

/* Connection id's bytes: distinct per connection, so a mix-up shows. */
static size_t payload(unsigned id, unsigned char *buf) {
    size_t n = 3000 + (size_t)id * 517;
    uint32_t x = 2654435761u * (id + 1);
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    return n;
}

static void write_all(nf_stack *s, int fd, const void *b, size_t n) {
    const char *p = b;
    while (n > 0) {
        ssize_t w = nf_write(s, fd, p, n);
        CHECK(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

static unsigned short local_port(nf_stack *s, int fd) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    CHECK(nf_getsockname(s, fd, (struct sockaddr *)&a, &l) == 0);
    return ntohs(a.sin_port);
}

static void *server_worker(void *arg) {
    unsigned k = (unsigned)(uintptr_t)arg;
    CHECK(nf_current_shard() == (int)k);
    nf_stack *s = nf_shards_stack(srv, k);
    CHECK(s != NULL);
    for (int i = 0; i < PER_SHARD; i++) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = nf_accept_on(lst, k, (struct sockaddr *)&peer, &pl);
        CHECK(fd >= 0);
        CHECK(local_port(s, fd) == PORT);
        accepted[k][i] = ntohs(peer.sin_port);
        bound_waits(s, fd);
        char buf[2048];
        ssize_t n;
        while ((n = nf_read(s, fd, buf, sizeof buf)) > 0) write_all(s, fd, buf, (size_t)n);
        CHECK(n == 0);
        CHECK(nf_close(s, fd) == 0);
    }
    return arg;
}

static void *client(void *arg) {
    unsigned k = (unsigned)(uintptr_t)arg;
    CHECK(nf_current_shard() == (int)k);
    nf_stack *s = nf_shards_stack(cli, k);
    CHECK(s != NULL);
    struct sockaddr_in to = sin_of(SERVER_IP, PORT);
    static _Thread_local unsigned char data[16384], back[16384];
    for (unsigned i = 0; i < PER_SHARD; i++) {
        unsigned id = k * PER_SHARD + i;
        int fd = nf_socket(s, AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        bound_waits(s, fd);
        CHECK(nf_connect_on(cli, k, fd, (struct sockaddr *)&to, sizeof to) == 0);
        opened[k][i] = local_port(s, fd);
        CHECK(opened[k][i] >= 49152);
        size_t n = payload(id, data);
        write_all(s, fd, data, n);
        CHECK(nf_shutdown(s, fd, SHUT_WR) == 0);
        size_t got = 0;
        ssize_t r;
        while ((r = nf_read(s, fd, back + got, sizeof back - got)) > 0) got += (size_t)r;
        CHECK(r == 0);
        CHECK(got == n);
        CHECK(memcmp(back, data, n) == 0);
        CHECK(nf_close(s, fd) == 0);
    }
    return arg;
}

static int cmp_port(const void *a, const void *b) {
    return (int)*(const unsigned short *)a - (int)*(const unsigned short *)b;
}

/* nf_accept_any on a thread that waits before anything arrives. */
static atomic_int any_shard = -1;
static atomic_int any_port;
static void *any_acceptor(void *arg) {
    (void)arg;
    unsigned k = 99;
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    int fd = nf_accept_any(lst, &k, (struct sockaddr *)&peer, &pl, 20000);
    CHECK(fd >= 0);
    CHECK(nf_close(nf_shards_stack(srv, k), fd) == 0);
    atomic_store(&any_port, ntohs(peer.sin_port));
    atomic_store(&any_shard, (int)k);
    return NULL;
}

static atomic_int release_blocker;
static void *blocker(void *arg) {
    while (!atomic_load(&release_blocker)) sched_yield();
    return arg;
}

/* A blocking connect from shard k by the main thread (on no shard): returns the fd. */
static int connect_from(unsigned k) {
    nf_stack *s = nf_shards_stack(cli, k);
    struct sockaddr_in to = sin_of(SERVER_IP, PORT);
    int fd = nf_socket(s, AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    bound_waits(s, fd);
    CHECK(nf_connect_on(cli, k, fd, (struct sockaddr *)&to, sizeof to) == 0);
    return fd;
}

int main(void) {
    nf_config a, b;
    nf_config_init(&a);
    nf_config_init(&b);
    a.address = "198.18.0.1/24";
    b.address = SERVER_IP "/24";

    /* Only the REAL clock and no device of its own. */
    b.clock = NF_CLOCK_MANUAL;
    CHECK_ERR(nf_shards_new_pair(&a, &b, SHARDS, 0, &cli, &srv), EINVAL);
    b.clock = NF_CLOCK_REAL;
    CHECK_ERR(nf_shards_new_pair(&a, &b, 0, 0, &cli, &srv), EINVAL);
    CHECK_ERR(nf_shards_new_pair(&a, &b, SHARDS, 0, NULL, &srv), EFAULT);
    CHECK(nf_shards_new_pair(&a, &b, SHARDS, NF_SHARDS_PIN, &cli, &srv) == 0);
    CHECK(nf_shards_count(cli) == SHARDS && nf_shards_count(srv) == SHARDS);
    CHECK(nf_current_shard() == -1);
    errno = 0;
    CHECK(nf_shards_stack(cli, SHARDS) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(nf_shards_run_on(cli, SHARDS, blocker, NULL) == NULL && errno == EINVAL);
    /* A view belongs to its nf_shards. */
    errno = 0;
    nf_stack_free(nf_shards_stack(cli, 0));
    CHECK(errno == EINVAL);

    struct sockaddr_in any = sin_of("0.0.0.0", PORT);
    lst = nf_shards_listen(srv, (struct sockaddr *)&any, sizeof any, 64);
    CHECK(lst != NULL);
    for (unsigned k = 0; k < SHARDS; k++) {
        int lfd = nf_shards_listener_fd(lst, k);
        CHECK(lfd >= 0);
        CHECK(local_port(nf_shards_stack(srv, k), lfd) == PORT);
    }
    CHECK_ERR(nf_shards_listener_fd(lst, SHARDS), EINVAL);

    /* Per-shard workers and clients. */
    nf_shard_thread *workers[SHARDS], *clients[SHARDS];
    for (unsigned k = 0; k < SHARDS; k++) {
        workers[k] = nf_shards_run_on(srv, k, server_worker, (void *)(uintptr_t)k);
        CHECK(workers[k] != NULL);
    }
    for (unsigned k = 0; k < SHARDS; k++) {
        clients[k] = nf_shards_run_on(cli, k, client, (void *)(uintptr_t)k);
        CHECK(clients[k] != NULL);
    }
    for (unsigned k = 0; k < SHARDS; k++) {
        void *ret = NULL;
        CHECK(nf_shards_join(clients[k], &ret) == 0);
        CHECK(ret == (void *)(uintptr_t)k);
        CHECK(nf_shards_join(workers[k], &ret) == 0);
        CHECK(ret == (void *)(uintptr_t)k);
    }
    /* Server shard k accepted exactly the connections client shard k opened. */
    for (unsigned k = 0; k < SHARDS; k++) {
        qsort(opened[k], PER_SHARD, sizeof opened[k][0], cmp_port);
        qsort(accepted[k], PER_SHARD, sizeof accepted[k][0], cmp_port);
        for (int i = 0; i < PER_SHARD; i++) {
            CHECK(accepted[k][i] == opened[k][i]);
            if (i > 0) CHECK(opened[k][i] != opened[k][i - 1]);
        }
    }

    /* nf_accept_any: a thread already waiting is woken by a connection on shard 1 and
     * reports shard 1; then each shard's connection is reported on its shard. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, any_acceptor, NULL) == 0);
    int c1 = connect_from(1);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(atomic_load(&any_shard) == 1);
    CHECK(atomic_load(&any_port) == local_port(nf_shards_stack(cli, 1), c1));
    for (int round = 0; round < 4; round++) {
        unsigned k = (unsigned)round % SHARDS;
        int c = connect_from(k);
        unsigned got = 99;
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = nf_accept_any(lst, &got, (struct sockaddr *)&peer, &pl, 20000);
        CHECK(fd >= 0);
        CHECK(got == k);
        CHECK(ntohs(peer.sin_port) == local_port(nf_shards_stack(cli, k), c));
        CHECK(nf_close(nf_shards_stack(srv, k), fd) == 0);
        CHECK(nf_close(nf_shards_stack(cli, k), c) == 0);
    }
    unsigned got = 99;
    CHECK_ERR(nf_accept_any(lst, &got, NULL, NULL, 50), EAGAIN);
    CHECK_ERR(nf_accept_any(lst, &got, NULL, NULL, 0), EAGAIN);
    CHECK_ERR(nf_accept_any(lst, NULL, NULL, NULL, 0), EFAULT);
    CHECK(nf_close(nf_shards_stack(cli, 1), c1) == 0);

    /* Not freed while a callback of run_on still runs. */
    nf_shard_thread *bt = nf_shards_run_on(cli, 0, blocker, NULL);
    CHECK(bt != NULL);
    CHECK_ERR(nf_shards_free(cli), EBUSY);
    atomic_store(&release_blocker, 1);
    CHECK(nf_shards_join(bt, NULL) == 0);

    CHECK(nf_shards_listener_close(lst) == 0);
    CHECK(nf_shards_free(cli) == 0);
    CHECK(nf_shards_free(srv) == 0);
    printf("shards: %d connections echoed, each accepted on its own shard\n", SHARDS * PER_SHARD);
    return 0;
}
