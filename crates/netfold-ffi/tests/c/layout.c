/* nf_config's layout and the API's argument checking. */
#include "nftest.h"
#include <stddef.h>

int main(void) {
    size_t off[11];
    size_t size = nf_config_layout(off, 11);
    CHECK(size == sizeof(nf_config));
    CHECK(off[0] == offsetof(nf_config, size));
    CHECK(off[1] == offsetof(nf_config, medium));
    CHECK(off[2] == offsetof(nf_config, address));
    CHECK(off[3] == offsetof(nf_config, gateway));
    CHECK(off[4] == offsetof(nf_config, mac));
    CHECK(off[5] == offsetof(nf_config, mtu));
    CHECK(off[6] == offsetof(nf_config, clock));
    CHECK(off[7] == offsetof(nf_config, device));
    CHECK(off[8] == offsetof(nf_config, address6));
    CHECK(off[9] == offsetof(nf_config, gateway6));
    CHECK(off[10] == offsetof(nf_config, tcp_ecn));

    nf_config c;
    memset(&c, 0xaa, sizeof c);
    nf_config_init(&c);
    CHECK(c.size == sizeof(nf_config));
    CHECK(c.medium == NF_MEDIUM_ETHERNET && c.clock == NF_CLOCK_REAL);
    CHECK(strcmp(c.address, "198.18.0.2/24") == 0);
    CHECK(c.gateway == NULL && c.device == NULL && c.mtu == 0);
    CHECK(c.address6 == NULL && c.gateway6 == NULL);
    CHECK(c.tcp_ecn == 2);

    /* Bad configurations. */
    CHECK(nf_stack_new(NULL) == NULL && errno == EFAULT);
    nf_config bad = c;
    bad.size = 8;
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.address = "198.18.0.2";
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.address = NULL;
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.address6 = "2001:2::2"; /* no prefix length */
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.address6 = "ff02::1/64"; /* not unicast */
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.address6 = "2001:2::2/64";
    bad.gateway6 = "fe80::x";
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.medium = 7;
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.mtu = 20;
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.device = "tap:"; /* no interface name */
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.device = "tap:nf0";
    bad.medium = NF_MEDIUM_IP; /* a TAP carries Ethernet frames */
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad = c;
    bad.device = "eth0"; /* not a device kind netfold knows */
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);

    /* A real-clock stack starts and stops its thread cleanly. */
    nf_stack *r = nf_stack_new(&c);
    CHECK(r != NULL);
    CHECK_ERR(nf_clock_set(r, 5), EINVAL);
    nf_stack_free(r);

    c.clock = NF_CLOCK_MANUAL;
    nf_stack *s = nf_stack_new(&c);
    CHECK(s != NULL);
    CHECK(nf_clock_now(s) == 0);
    CHECK(nf_clock_set(s, 1000) == 0 && nf_clock_now(s) == 1000);
    CHECK_ERR(nf_clock_set(s, 999), EINVAL);

    /* A program compiled against the first nf_config (it ended at `device`) passes that size:
     * accepted, and the fields beyond it (here a bogus address6) are not read. */
    {
        nf_config old = c;
        old.size = (uint32_t)offsetof(nf_config, address6);
        old.address6 = "not read";
        nf_stack *o = nf_stack_new(&old);
        CHECK(o != NULL);
        nf_stack_free(o);
        old.size = (uint32_t)offsetof(nf_config, address6) - 1;
        CHECK(nf_stack_new(&old) == NULL && errno == EINVAL);
    }

    /* Socket creation errors. */
    CHECK_ERR(nf_socket(s, AF_UNIX, SOCK_STREAM, 0), EAFNOSUPPORT);
    CHECK_ERR(nf_socket(s, AF_PACKET, SOCK_DGRAM, 0), EAFNOSUPPORT);
    /* AF_INET6 sockets exist; each family takes only its own sockaddr (Linux inet_bind,
     * inet6_bind), and a sockaddr_in6 shorter than RFC 2133's 24 bytes is EINVAL. */
    int fd6 = nf_socket(s, AF_INET6, SOCK_STREAM, 0);
    CHECK(fd6 >= 3);
    {
        struct sockaddr_in a4 = sin_of("198.18.0.2", 81);
        CHECK_ERR(nf_bind(s, fd6, (struct sockaddr *)&a4, sizeof a4), EAFNOSUPPORT);
        struct sockaddr_in6 any6 = sin6_of("::", 81);
        CHECK_ERR(nf_bind(s, fd6, (struct sockaddr *)&any6, 20), EINVAL);
        struct sockaddr_in6 foreign6 = sin6_of("2001:db8::9", 81);
        CHECK_ERR(nf_bind(s, fd6, (struct sockaddr *)&foreign6, sizeof foreign6), EADDRNOTAVAIL);
    }
    CHECK(nf_close(s, fd6) == 0);
    CHECK_ERR(nf_socket(s, AF_INET, SOCK_RAW, 0), ESOCKTNOSUPPORT);
    CHECK_ERR(nf_socket(s, AF_INET, SOCK_SEQPACKET, 0), ESOCKTNOSUPPORT);
    CHECK_ERR(nf_socket(s, AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
    CHECK_ERR(nf_socket(NULL, AF_INET, SOCK_STREAM, 0), EINVAL);

    int fd = nf_socket(s, AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 3);
    CHECK_ERR(nf_close(s, 999), EBADF);
    CHECK_ERR(nf_read(s, 999, NULL, 0), EBADF);
    char b[4];
    CHECK_ERR(nf_read(s, fd, b, sizeof b), ENOTCONN);
    CHECK_ERR(nf_write(s, fd, NULL, 4), EFAULT);

    /* Addresses. */
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    CHECK_ERR(nf_bind(s, fd, (struct sockaddr *)&a6, sizeof a6), EAFNOSUPPORT);
    struct sockaddr_in a = sin_of("198.18.0.2", 80);
    CHECK_ERR(nf_bind(s, fd, (struct sockaddr *)&a, 4), EINVAL);
    struct sockaddr_in other = sin_of("198.19.0.1", 80);
    CHECK_ERR(nf_bind(s, fd, (struct sockaddr *)&other, sizeof other), EADDRNOTAVAIL);
    CHECK(nf_bind(s, fd, (struct sockaddr *)&a, sizeof a) == 0);
    int fd2 = nf_socket(s, AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(nf_bind(s, fd2, (struct sockaddr *)&a, sizeof a), EADDRINUSE);
    struct sockaddr_in got;
    socklen_t gl = sizeof got;
    CHECK(nf_getsockname(s, fd, (struct sockaddr *)&got, &gl) == 0);
    CHECK(gl == sizeof got && got.sin_port == htons(80));
    gl = sizeof got;
    CHECK_ERR(nf_getpeername(s, fd, (struct sockaddr *)&got, &gl), ENOTCONN);

    /* Options: the listed ones work, the rest are refused. */
    int one = 1, v = 0;
    socklen_t vl = sizeof v;
    CHECK(nf_setsockopt(s, fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    CHECK(nf_getsockopt(s, fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0 && v == 1);
    CHECK(nf_setsockopt(s, fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one) == 0);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, IPPROTO_TCP, TCP_CORK, &v, &vl) == 0 && v == 1);
    int uncork = 0;
    CHECK(nf_setsockopt(s, fd, IPPROTO_TCP, TCP_CORK, &uncork, sizeof uncork) == 0);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, IPPROTO_TCP, TCP_CORK, &v, &vl) == 0 && v == 0);
    vl = sizeof v;
    CHECK_ERR(nf_setsockopt(s, fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof one), ENOPROTOOPT);
    CHECK_ERR(nf_setsockopt(s, fd, IPPROTO_IP, IP_TTL, &one, sizeof one), ENOPROTOOPT);
    /* IP_TOS on TCP: the DSCP bits are kept, the ECN bits (here 0x01) are not the socket's. */
    int tos = 0x29;
    CHECK(nf_setsockopt(s, fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) == 0);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, IPPROTO_IP, IP_TOS, &v, &vl) == 0 && v == 0x28);
    vl = sizeof v;
    CHECK_ERR(nf_setsockopt(s, fd, SOL_SOCKET, SO_ERROR, &one, sizeof one), ENOPROTOOPT);
    CHECK_ERR(nf_setsockopt(s, fd, SOL_SOCKET, SO_KEEPALIVE, &one, 2), EINVAL);
    int idle = 30;
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == 0);
    CHECK(nf_setsockopt(s, fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, &vl) == 0 && v == 30);
    int zero = 0;
    CHECK_ERR(nf_setsockopt(s, fd, IPPROTO_TCP, TCP_KEEPCNT, &zero, sizeof zero), EINVAL);
    struct linger lg = {1, 0};
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    struct linger lg2;
    vl = sizeof lg2;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_LINGER, &lg2, &vl) == 0);
    CHECK(vl == sizeof lg2 && lg2.l_onoff == 1 && lg2.l_linger == 0);
    struct timeval tv = {2, 500000};
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    struct timeval tv2;
    vl = sizeof tv2;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_RCVTIMEO, &tv2, &vl) == 0);
    CHECK(tv2.tv_sec == 2 && tv2.tv_usec == 500000);
    tv.tv_usec = 2000000;
    CHECK_ERR(nf_setsockopt(s, fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), EDOM);
    int mss = 1000;
    CHECK(nf_setsockopt(s, fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss) == 0);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, IPPROTO_TCP, TCP_MAXSEG, &v, &vl) == 0 && v == 1000);
    int big = 1 << 20;
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big) == 0);
    vl = sizeof v;
    /* Linux's semantics (socket(7)): the value is doubled, and getsockopt shows the double. */
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_RCVBUF, &v, &vl) == 0 && v == 2 * big);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_TYPE, &v, &vl) == 0 && v == SOCK_STREAM);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_DOMAIN, &v, &vl) == 0 && v == AF_INET);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_PROTOCOL, &v, &vl) == 0 && v == IPPROTO_TCP);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) == 0 && v == 0);
    CHECK_ERR(nf_setsockopt(s, fd, SOL_SOCKET, SO_DOMAIN, &one, sizeof one), ENOPROTOOPT);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, fd, SOL_SOCKET, SO_ERROR, &v, &vl) == 0 && v == 0);

    /* fcntl / ioctl. */
    CHECK(nf_fcntl(s, fd, F_GETFL, 0) == O_RDWR);
    CHECK(nf_fcntl(s, fd, F_SETFL, O_NONBLOCK) == 0);
    CHECK(nf_fcntl(s, fd, F_GETFL, 0) == (O_RDWR | O_NONBLOCK));
    CHECK_ERR(nf_fcntl(s, fd, F_DUPFD, 0), EINVAL);
    CHECK_ERR(nf_ioctl(s, fd, 0x1234, &v), ENOTTY);

    /* UDP: TCP options do not apply; sending needs a destination. */
    int u = nf_socket(s, AF_INET, SOCK_DGRAM, 0);
    CHECK(u >= 0);
    CHECK_ERR(nf_setsockopt(s, u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), ENOPROTOOPT);
    vl = sizeof v;
    CHECK(nf_getsockopt(s, u, SOL_SOCKET, SO_PROTOCOL, &v, &vl) == 0 && v == IPPROTO_UDP);
    CHECK_ERR(nf_send(s, u, "x", 1, 0), EDESTADDRREQ);
    CHECK_ERR(nf_listen(s, u, 1), EOPNOTSUPP);

    CHECK(nf_close(s, fd) == 0);
    CHECK(nf_close(s, fd2) == 0);
    CHECK(nf_close(s, u) == 0);
    nf_stack_free(s);
    nf_stack_free(NULL);
    puts("layout: ok");
    return 0;
}
