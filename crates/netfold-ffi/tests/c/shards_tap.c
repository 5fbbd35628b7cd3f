/* nf_shards_new_tap in a network namespace: run by tests/c_api.rs inside a
 * throw-away namespace (`ip netns exec`) where the kernel's side of the multi-queue TAP
 * argv[1] already has 198.18.0.1/24. One host of two shards (198.18.0.2) on the TAP's two
 * queues. With argv[1] "xdp:IFNAME" and argv[2] an address, the same over
 * nf_shards_new_device on the AF_XDP queues of a two-queue veth end (the kernel's end
 * in the same namespace), which must refuse three shards (EINVAL); a worker per shard (nf_shards_run_on) accepts its own shard's connections with
 * nf_accept_on and echoes them; CONNS kernel clients (plain sockets, in the namespace)
 * connect, send distinct bytes, and check the echo byte for byte. Every connection is
 * accepted once, by one shard, from a port a client used; both shards get some. Every wait
 * is bounded (SO_RCVTIMEO, poll timeouts), so a lost wake-up fails instead of hanging. */
#define _GNU_SOURCE
#include "nftest.h"
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SHARDS 2
#define CONNS 16
#define PORT 7
static const char *SERVER_IP = "198.18.0.2";
#define MAXLEN 40000

static nf_shards *sh;
static nf_shards_listener *lst;
static atomic_int served;               /* connections echoed to the end, all shards */
static unsigned short accepted[SHARDS][CONNS];
static int n_accepted[SHARDS];
static unsigned short client_port[CONNS];

static size_t payload(unsigned id, unsigned char *buf) {
    size_t n = 20000 + (size_t)id * 1117;
    uint32_t x = 2654435761u * (id + 1);
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    return n;
}

static void *worker(void *arg) {
    unsigned k = (unsigned)(uintptr_t)arg;
    CHECK(nf_current_shard() == (int)k);
    nf_stack *s = nf_shards_stack(sh, k);
    CHECK(s != NULL);
    int lfd = nf_shards_listener_fd(lst, k);
    CHECK(lfd >= 0);
    time_t deadline = time(NULL) + 60;
    while (atomic_load(&served) < CONNS) {
        CHECK(time(NULL) < deadline);
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int r = nf_poll(s, &p, 1, 50);
        CHECK(r >= 0);
        if (r == 0) continue;
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = nf_accept_on(lst, k, (struct sockaddr *)&peer, &pl);
        if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        CHECK(fd >= 0);
        CHECK(n_accepted[k] < CONNS);
        accepted[k][n_accepted[k]++] = ntohs(peer.sin_port);
        struct timeval tv = {20, 0};
        CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
        CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
        char buf[4096];
        ssize_t n;
        while ((n = nf_read(s, fd, buf, sizeof buf)) > 0) {
            const char *q = buf;
            while (n > 0) {
                ssize_t w = nf_write(s, fd, q, (size_t)n);
                CHECK(w > 0);
                q += w;
                n -= w;
            }
        }
        CHECK(n == 0);
        CHECK(nf_close(s, fd) == 0);
        atomic_fetch_add(&served, 1);
    }
    return arg;
}

/* A kernel client: connects to the shards, sends its bytes, checks the echo. */
static void *client(void *arg) {
    unsigned id = (unsigned)(uintptr_t)arg;
    static _Thread_local unsigned char data[MAXLEN], back[MAXLEN + 1];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct timeval tv = {20, 0};
    CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
    struct sockaddr_in to = sin_of(SERVER_IP, PORT);
    CHECK(connect(fd, (struct sockaddr *)&to, sizeof to) == 0);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    CHECK(getsockname(fd, (struct sockaddr *)&me, &ml) == 0);
    client_port[id] = ntohs(me.sin_port);
    size_t n = payload(id, data);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, data + off, n - off);
        CHECK(w > 0);
        off += (size_t)w;
    }
    CHECK(shutdown(fd, SHUT_WR) == 0);
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, back + got, sizeof back - got)) > 0) got += (size_t)r;
    CHECK(r == 0);
    CHECK(got == n);
    CHECK(memcmp(back, data, n) == 0);
    CHECK(close(fd) == 0);
    return arg;
}

int main(int argc, char **argv) {
    CHECK(argc == 2 || argc == 3);
    if (argc == 3) SERVER_IP = argv[2];
    char addr[64];
    snprintf(addr, sizeof addr, "%s/24", SERVER_IP);
    nf_config c;
    nf_config_init(&c);
    c.address = addr;
    if (strncmp(argv[1], "xdp:", 4) == 0) {
        CHECK_ERR(nf_shards_new_device(&c, argv[1], 0, 0, &sh), EINVAL);
        /* Two receive queues: three shards are refused before anything is bound. */
        CHECK_ERR(nf_shards_new_device(&c, argv[1], SHARDS + 1, 0, &sh), EINVAL);
        if (nf_shards_new_device(&c, argv[1], SHARDS, 0, &sh) != 0 &&
            (errno == EPERM || errno == EAFNOSUPPORT || errno == ENOSYS)) {
            printf("SKIPPED: AF_XDP unavailable (errno %d)\n", errno);
            return 0;
        }
        CHECK(sh != NULL);
    } else {
        CHECK_ERR(nf_shards_new_tap(&c, argv[1], 0, 0, &sh), EINVAL);
        CHECK(nf_shards_new_tap(&c, argv[1], SHARDS, 0, &sh) == 0);
    }
    CHECK(nf_shards_count(sh) == SHARDS);

    struct sockaddr_in any = sin_of("0.0.0.0", PORT);
    lst = nf_shards_listen(sh, (struct sockaddr *)&any, sizeof any, 64);
    CHECK(lst != NULL);
    for (unsigned k = 0; k < SHARDS; k++) {
        int lfd = nf_shards_listener_fd(lst, k);
        nf_stack *s = nf_shards_stack(sh, k);
        CHECK(nf_fcntl(s, lfd, F_SETFL, nf_fcntl(s, lfd, F_GETFL, 0) | O_NONBLOCK) == 0);
    }
    nf_shard_thread *workers[SHARDS];
    for (unsigned k = 0; k < SHARDS; k++) {
        workers[k] = nf_shards_run_on(sh, k, worker, (void *)(uintptr_t)k);
        CHECK(workers[k] != NULL);
    }
    pthread_t clients[CONNS];
    for (unsigned i = 0; i < CONNS; i++)
        CHECK(pthread_create(&clients[i], NULL, client, (void *)(uintptr_t)i) == 0);
    for (unsigned i = 0; i < CONNS; i++) CHECK(pthread_join(clients[i], NULL) == 0);
    for (unsigned k = 0; k < SHARDS; k++) {
        void *ret = NULL;
        CHECK(nf_shards_join(workers[k], &ret) == 0);
        CHECK(ret == (void *)(uintptr_t)k);
    }
    /* Each connection accepted exactly once, by one shard, from a client's port. */
    CHECK(n_accepted[0] + n_accepted[1] == CONNS);
    for (unsigned i = 0; i < CONNS; i++) {
        int seen = 0;
        for (unsigned k = 0; k < SHARDS; k++)
            for (int j = 0; j < n_accepted[k]; j++) seen += accepted[k][j] == client_port[i];
        CHECK(seen == 1);
    }
    /* 16 flows over 2 queues: all on one has odds 2^-15. */
    CHECK(n_accepted[0] > 0 && n_accepted[1] > 0);
    printf("shards_tap %s: shard 0 accepted %d, shard 1 accepted %d\n", argv[1], n_accepted[0],
           n_accepted[1]);
    CHECK(nf_shards_listener_close(lst) == 0);
    CHECK(nf_shards_free(sh) == 0);
    return 0;
}
