/* Closing loses nothing: a server writes 60,000 bytes, closes the connection and its listener
 * and shuts its stack down at once; the client still reads every byte and then the end of
 * the stream. A connection that cannot finish in time is reset, so its peer does not hang. */
#define _GNU_SOURCE
#define NFTEST_WIRE
#include "nftest.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define BYTES 60000

static nf_stack *cli, *srv;

static struct nftest_wire link_;

static int connect_to(int port) {
    int c = nf_socket(cli, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = sin_of("198.18.0.2", (uint16_t)port);
    CHECK(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a) == 0);
    return c;
}

int main(void) {
    cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_REAL);
    srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_REAL);
    nftest_wire_start(&link_, cli, srv);
    int l = nf_socket(srv, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = sin_of("0.0.0.0", 7);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&la, sizeof la) == 0);
    CHECK(nf_listen(srv, l, 8) == 0);

    int c = connect_to(7);
    int s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    static unsigned char out[BYTES], in[BYTES + 1];
    for (size_t i = 0; i < BYTES; i++) out[i] = (unsigned char)(i % 251);
    CHECK(nf_write(srv, s, out, BYTES) == BYTES);
    CHECK(nf_close(srv, s) == 0);
    CHECK(nf_close(srv, l) == 0);
    /* The client has not read a byte yet: everything is still on its way. */
    CHECK(nf_stack_shutdown(srv, 10000) == 0);
    size_t got = 0;
    for (;;) {
        ssize_t n = nf_read(cli, c, in + got, sizeof in - got);
        CHECK(n >= 0);
        if (n == 0) break;
        got += (size_t)n;
    }
    CHECK(got == BYTES);
    CHECK(memcmp(in, out, BYTES) == 0);
    CHECK(nf_close(cli, c) == 0);
    CHECK_ERR(nf_stack_shutdown(srv, -1), EINVAL);

    /* Data left unread: closing resets the connection (RFC 9293 §3.6) at once; nothing is
     * left for the drain to end. */
    l = nf_socket(srv, AF_INET, SOCK_STREAM, 0);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&la, sizeof la) == 0);
    CHECK(nf_listen(srv, l, 8) == 0);
    c = connect_to(7);
    s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_write(cli, c, out, 100) == 100);
    struct pollfd p = {s, POLLIN, 0};
    CHECK(nf_poll(srv, &p, 1, 5000) == 1);
    CHECK(nf_stack_shutdown(srv, 1000) == 0);
    char b[8];
    CHECK_ERR(nf_read(cli, c, b, sizeof b), ECONNRESET);
    CHECK(nf_close(cli, c) == 0);

    /* A peer that takes nothing (a 4 KiB window it never opens): the closed connection
     * cannot finish, and is reset when the time is up, after the bytes the window let in. */
    l = nf_socket(srv, AF_INET, SOCK_STREAM, 0);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&la, sizeof la) == 0);
    CHECK(nf_listen(srv, l, 8) == 0);
    c = nf_socket(cli, AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    CHECK(nf_setsockopt(cli, c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 7);
    CHECK(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a) == 0);
    s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_write(srv, s, out, BYTES) == BYTES);
    CHECK(nf_close(srv, s) == 0);
    CHECK(nf_stack_shutdown(srv, 300) == 1);
    got = 0;
    for (;;) {
        ssize_t n = nf_read(cli, c, in + got, sizeof in - got);
        if (n < 0) {
            CHECK(errno == ECONNRESET);
            break;
        }
        CHECK(n > 0); /* no end of stream: the data was not all delivered */
        got += (size_t)n;
    }
    CHECK(got < BYTES);
    CHECK(memcmp(in, out, got) == 0);
    CHECK(nf_close(cli, c) == 0);

    nftest_wire_stop(&link_);
    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("drain: ok");
    return 0;
}
