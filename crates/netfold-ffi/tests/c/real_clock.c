/* NF_CLOCK_REAL: each stack runs its own thread; blocking connect/accept/read/write in plain
 * threads, with a "wire" thread carrying frames between the two stacks. Also: a timed nf_poll
 * and SO_RCVTIMEO expire in real time. */
#define _GNU_SOURCE
#define NFTEST_WIRE
#include "nftest.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define BYTES (1 << 20)

static nf_stack *cli, *srv;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct nftest_wire link_;

/* Echo server: accepts one connection and echoes until end of stream. */
static void *server(void *arg) {
    int l = *(int *)arg;
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    int s = nf_accept(srv, l, (struct sockaddr *)&peer, &pl);
    CHECK(s >= 0);
    static char buf[65536];
    for (;;) {
        ssize_t n = nf_read(srv, s, buf, sizeof buf);
        CHECK(n >= 0);
        if (n == 0) break;
        CHECK(nf_write(srv, s, buf, (size_t)n) == n); /* blocking write: all or error */
    }
    CHECK(nf_close(srv, s) == 0);
    return NULL;
}

static void *client_writer(void *arg) {
    int c = *(int *)arg;
    static unsigned char out[BYTES];
    for (size_t i = 0; i < BYTES; i++) out[i] = (unsigned char)(i % 251);
    CHECK(nf_write(cli, c, out, BYTES) == BYTES);
    CHECK(nf_shutdown(cli, c, SHUT_WR) == 0);
    return NULL;
}

int main(void) {
    cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_REAL);
    srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_REAL);
    pthread_t ts, tc;
    nftest_wire_start(&link_, cli, srv);

    int l = nf_socket(srv, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = sin_of("0.0.0.0", 7);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&la, sizeof la) == 0);
    CHECK(nf_listen(srv, l, 8) == 0);
    CHECK(pthread_create(&ts, NULL, server, &l) == 0);

    int c = nf_socket(cli, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 7);
    CHECK(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a) == 0); /* blocking */

    /* Write 1 MiB from one thread while this one reads the echo back. */
    CHECK(pthread_create(&tc, NULL, client_writer, &c) == 0);
    static unsigned char in[BYTES];
    size_t got = 0;
    for (;;) {
        ssize_t n = nf_read(cli, c, in + got, BYTES - got);
        CHECK(n >= 0);
        if (n == 0) break;
        got += (size_t)n;
        CHECK(got <= BYTES);
    }
    CHECK(got == BYTES);
    for (size_t i = 0; i < BYTES; i++) CHECK(in[i] == (unsigned char)(i % 251));
    CHECK(pthread_join(tc, NULL) == 0);
    CHECK(pthread_join(ts, NULL) == 0);
    CHECK(nf_close(cli, c) == 0);

    /* Timeouts in real time: a poll with nothing ready, and a read with SO_RCVTIMEO. */
    int u = nf_socket(cli, AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ua = sin_of("0.0.0.0", 5353);
    CHECK(nf_bind(cli, u, (struct sockaddr *)&ua, sizeof ua) == 0);
    struct pollfd p = {u, POLLIN, 0};
    double t0 = now_s();
    CHECK(nf_poll(cli, &p, 1, 100) == 0);
    double dt = now_s() - t0;
    CHECK(dt >= 0.095 && dt < 5.0);
    struct timeval tv = {0, 100000};
    CHECK(nf_setsockopt(cli, u, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    char b[8];
    t0 = now_s();
    CHECK_ERR(nf_recv(cli, u, b, sizeof b, 0), EAGAIN);
    dt = now_s() - t0;
    CHECK(dt >= 0.095 && dt < 5.0);
    CHECK(nf_clock_now(cli) > 0);

    nftest_wire_stop(&link_);
    CHECK(nf_close(cli, u) == 0);
    CHECK(nf_close(srv, l) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("real_clock: ok");
    return 0;
}
