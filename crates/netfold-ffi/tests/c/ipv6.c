/* IPv6 addresses through nf_config (address6): two MANUAL-clock Ethernet stacks, each with an
 * IPv4 and an IPv6 address, resolve each other by Neighbor Discovery after Duplicate Address
 * Detection and talk over IPv6:
 *  - before DAD has passed, a connect to the peer's IPv6 address fails with ENETUNREACH;
 *  - TCP: an AF_INET6 listener on [::], a client connecting to [2001:2::2]:7000; accept and
 *    getpeername/getsockname report the real IPv6 addresses; data both ways;
 *  - UDP: an AF_INET6 socket exchanges datagrams with the peer's IPv6 address, one of them
 *    larger than the MTU (fragmented, RFC 8200 §4.5);
 *  - an IPv6-only stack (address NULL): its IPv6 TCP works, IPv4 peers are ENETUNREACH. */
#include "nftest.h"

static nf_stack *make6(const char *v4, const char *v6) {
    nf_config c;
    nf_config_init(&c);
    c.address = v4;
    c.address6 = v6;
    c.clock = NF_CLOCK_MANUAL;
    nf_stack *s = nf_stack_new(&c);
    CHECK(s != NULL);
    return s;
}

/* Runs both stacks' clocks forward by ms milliseconds in 10 ms steps, moving frames. */
static void run_for(nf_stack *a, nf_stack *b, int ms) {
    for (int i = 0; i < ms / 10; i++) {
        uint64_t t = nf_clock_now(a) + 10000;
        CHECK(nf_clock_set(a, t) == 0);
        CHECK(nf_clock_set(b, t) == 0);
        shuttle(a, b);
    }
}

static int addr6_is(const struct sockaddr_in6 *a, const char *ip) {
    struct in6_addr want;
    CHECK(inet_pton(AF_INET6, ip, &want) == 1);
    return a->sin6_family == AF_INET6 && memcmp(&a->sin6_addr, &want, sizeof want) == 0;
}

static void tcp6(nf_stack *cli, nf_stack *srv, const char *cli_ip, const char *srv_ip) {
    int l = nf_socket(srv, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(l >= 0);
    struct sockaddr_in6 any = sin6_of("::", 7000);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&any, sizeof any) == 0);
    CHECK(nf_listen(srv, l, 8) == 0);
    int c = nf_socket(cli, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    struct sockaddr_in6 to = sin6_of(srv_ip, 7000);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&to, sizeof to), EINPROGRESS);
    shuttle(cli, srv);
    struct sockaddr_in6 peer;
    socklen_t pl = sizeof peer;
    int s = nf_accept(srv, l, (struct sockaddr *)&peer, &pl);
    CHECK(s >= 0);
    CHECK(pl == sizeof peer && addr6_is(&peer, cli_ip));
    struct sockaddr_in6 mine;
    socklen_t ml = sizeof mine;
    CHECK(nf_getsockname(cli, c, (struct sockaddr *)&mine, &ml) == 0);
    CHECK(addr6_is(&mine, cli_ip) && mine.sin6_port == peer.sin6_port);
    CHECK(nf_getpeername(cli, c, (struct sockaddr *)&mine, &ml) == 0);
    CHECK(addr6_is(&mine, srv_ip) && mine.sin6_port == htons(7000));
    CHECK(nf_fcntl(srv, s, F_SETFL, O_NONBLOCK) == 0);

    static char big[100000], got[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 7);
    size_t sent = 0, recvd = 0;
    for (int round = 0; round < 1000 && recvd < sizeof big; round++) {
        if (sent < sizeof big) {
            ssize_t n = nf_write(cli, c, big + sent, sizeof big - sent);
            if (n > 0)
                sent += (size_t)n;
            else
                CHECK(errno == EAGAIN);
        }
        shuttle(cli, srv);
        ssize_t n;
        while ((n = nf_read(srv, s, got + recvd, sizeof got - recvd)) > 0)
            recvd += (size_t)n;
    }
    CHECK(recvd == sizeof big && memcmp(big, got, sizeof big) == 0);
    CHECK(nf_write(srv, s, "back", 4) == 4);
    shuttle(cli, srv);
    char b4[8];
    CHECK(nf_read(cli, c, b4, sizeof b4) == 4 && memcmp(b4, "back", 4) == 0);
    CHECK(nf_close(cli, c) == 0 && nf_close(srv, s) == 0 && nf_close(srv, l) == 0);
    shuttle(cli, srv);
}

static void udp6(nf_stack *a, nf_stack *b) {
    int ua = nf_socket(a, AF_INET6, SOCK_DGRAM, 0);
    int ub = nf_socket(b, AF_INET6, SOCK_DGRAM, 0);
    CHECK(ua >= 0 && ub >= 0);
    struct sockaddr_in6 pb = sin6_of("::", 5353);
    CHECK(nf_bind(b, ub, (struct sockaddr *)&pb, sizeof pb) == 0);
    struct sockaddr_in6 to = sin6_of("2001:2::2", 5353);
    static char msg[3000], buf[4000];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (char)(i * 13);
    size_t sizes[2] = {5, sizeof msg};
    for (int k = 0; k < 2; k++) {
        CHECK(nf_sendto(a, ua, msg, sizes[k], 0, (struct sockaddr *)&to, sizeof to) ==
              (ssize_t)sizes[k]);
        shuttle(a, b);
        struct sockaddr_in6 from;
        socklen_t fl = sizeof from;
        ssize_t n = nf_recvfrom(b, ub, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from,
                                &fl);
        CHECK(n == (ssize_t)sizes[k] && memcmp(buf, msg, sizes[k]) == 0);
        CHECK(addr6_is(&from, "2001:2::1"));
    }
    CHECK(nf_close(a, ua) == 0 && nf_close(b, ub) == 0);
}

int main(void) {
    nf_stack *a = make6("198.18.0.1/24", "2001:2::1/64");
    nf_stack *b = make6("198.18.0.2/24", "2001:2::2/64");
    /* Tentative until DAD passes (RFC 4862 §5.4): no usable source yet. */
    int early = nf_socket(a, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in6 to = sin6_of("2001:2::2", 7000);
    CHECK_ERR(nf_connect(a, early, (struct sockaddr *)&to, sizeof to), ENETUNREACH);
    CHECK(nf_close(a, early) == 0);
    run_for(a, b, 3000);
    tcp6(a, b, "2001:2::1", "2001:2::2");
    udp6(a, b);
    nf_stack_free(a);
    nf_stack_free(b);

    /* IPv6 only. */
    nf_stack *c = make6(NULL, "2001:2::3/64");
    nf_stack *d = make6("198.18.0.4/24", "2001:2::4/64");
    run_for(c, d, 3000);
    tcp6(d, c, "2001:2::4", "2001:2::3");
    int v4 = nf_socket(c, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in p4 = sin_of("198.18.0.4", 7000);
    CHECK_ERR(nf_connect(c, v4, (struct sockaddr *)&p4, sizeof p4), ENETUNREACH);
    nf_stack_free(c);
    nf_stack_free(d);
    printf("ipv6: ok\n");
    return 0;
}
