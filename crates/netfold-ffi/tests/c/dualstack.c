/* AF_INET6 sockets on two MANUAL-clock Ethernet stacks (IPv4 only: the stacks have no IPv6
 * address yet), with Linux's dual-stack semantics (net.ipv6.bindv6only = 0):
 *  - an AF_INET6 listener on [::]:p accepts an IPv4 connection; accept, getsockname and
 *    getpeername report sockaddr_in6 with v4-mapped addresses (::ffff:a.b.c.d);
 *  - an AF_INET6 client connects to a v4-mapped address over IPv4, data flows both ways;
 *  - IPV6_V6ONLY: default 0, settable before bind, EINVAL after; a v6-only [::] listener
 *    refuses IPv4 (the client's connect gets ECONNREFUSED); ENOPROTOOPT on AF_INET;
 *  - a dual-stack [::]:p and an AF_INET 0.0.0.0:p conflict (EADDRINUSE), a v6-only one not;
 *  - a connect to a real IPv6 address fails at once with ENETUNREACH (no IPv6 address);
 *  - UDP: an AF_INET6 socket on [::] receives from an IPv4 peer (recvfrom: sockaddr_in6,
 *    mapped) and answers with the mapped address or with a plain sockaddr_in. */
#include "nftest.h"

static int in6_is_mapped(const struct sockaddr_in6 *a, const char *v4) {
    struct in6_addr want;
    char text[64];
    snprintf(text, sizeof text, "::ffff:%s", v4);
    CHECK(inet_pton(AF_INET6, text, &want) == 1);
    return a->sin6_family == AF_INET6 && memcmp(&a->sin6_addr, &want, sizeof want) == 0;
}

static void tcp_dual_listener(nf_stack *cli, nf_stack *srv) {
    int l = nf_socket(srv, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(l >= 0);
    int v = -1;
    socklen_t vl = sizeof v;
    CHECK(nf_getsockopt(srv, l, IPPROTO_IPV6, IPV6_V6ONLY, &v, &vl) == 0 && v == 0);
    struct sockaddr_in6 any = sin6_of("::", 7000);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&any, sizeof any) == 0);
    /* Too late for IPV6_V6ONLY once bound (Linux: EINVAL). */
    v = 1;
    CHECK_ERR(nf_setsockopt(srv, l, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof v), EINVAL);
    CHECK(nf_listen(srv, l, 8) == 0);
    struct sockaddr_in6 ln;
    socklen_t lnl = sizeof ln;
    CHECK(nf_getsockname(srv, l, (struct sockaddr *)&ln, &lnl) == 0);
    CHECK(lnl == sizeof ln && ln.sin6_family == AF_INET6 && ln.sin6_port == htons(7000));
    CHECK(IN6_IS_ADDR_UNSPECIFIED(&ln.sin6_addr));

    /* The dual-stack wildcard covers every IPv4 address: an AF_INET bind to 0.0.0.0:7000
     * conflicts (Linux inet_csk_bind_conflict). */
    int v4 = nf_socket(srv, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any4 = sin_of("0.0.0.0", 7000);
    CHECK_ERR(nf_bind(srv, v4, (struct sockaddr *)&any4, sizeof any4), EADDRINUSE);
    CHECK(nf_close(srv, v4) == 0);

    /* An IPv4 client. */
    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in to = sin_of("198.18.0.2", 7000);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&to, sizeof to), EINPROGRESS);
    shuttle(cli, srv);
    struct sockaddr_in6 peer;
    socklen_t pl = sizeof peer;
    int s = nf_accept(srv, l, (struct sockaddr *)&peer, &pl);
    CHECK(s >= 0);
    CHECK(pl == sizeof peer && in6_is_mapped(&peer, "198.18.0.1"));
    struct sockaddr_in mine;
    socklen_t ml = sizeof mine;
    CHECK(nf_getsockname(cli, c, (struct sockaddr *)&mine, &ml) == 0);
    CHECK(mine.sin_port == peer.sin6_port);
    struct sockaddr_in6 name;
    socklen_t nl = sizeof name;
    CHECK(nf_getsockname(srv, s, (struct sockaddr *)&name, &nl) == 0);
    CHECK(nl == sizeof name && in6_is_mapped(&name, "198.18.0.2") && name.sin6_port == htons(7000));
    nl = sizeof name;
    CHECK(nf_getpeername(srv, s, (struct sockaddr *)&name, &nl) == 0);
    CHECK(in6_is_mapped(&name, "198.18.0.1") && name.sin6_port == mine.sin_port);
    /* The accepted socket is AF_INET6 too: IPV6_V6ONLY is readable on it. */
    vl = sizeof v;
    CHECK(nf_getsockopt(srv, s, IPPROTO_IPV6, IPV6_V6ONLY, &v, &vl) == 0 && v == 0);
    /* ... and not on an AF_INET socket. */
    CHECK_ERR(nf_getsockopt(cli, c, IPPROTO_IPV6, IPV6_V6ONLY, &v, &vl), ENOPROTOOPT);

    CHECK(nf_write(cli, c, "ping", 4) == 4);
    shuttle(cli, srv);
    char buf[16];
    CHECK(nf_recv(srv, s, buf, sizeof buf, MSG_DONTWAIT) == 4 && memcmp(buf, "ping", 4) == 0);
    CHECK(nf_write(srv, s, "pong!", 5) == 5);
    shuttle(cli, srv);
    CHECK(nf_recv(cli, c, buf, sizeof buf, MSG_DONTWAIT) == 5 && memcmp(buf, "pong!", 5) == 0);
    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, s) == 0);
    shuttle(cli, srv);
    CHECK(nf_close(srv, l) == 0);
}

static void tcp_v6only_listener(nf_stack *cli, nf_stack *srv) {
    int l = nf_socket(srv, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    CHECK(nf_setsockopt(srv, l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0);
    int v = 0;
    socklen_t vl = sizeof v;
    CHECK(nf_getsockopt(srv, l, IPPROTO_IPV6, IPV6_V6ONLY, &v, &vl) == 0 && v == 1);
    struct sockaddr_in6 any = sin6_of("::", 7001);
    CHECK(nf_bind(srv, l, (struct sockaddr *)&any, sizeof any) == 0);
    CHECK(nf_listen(srv, l, 8) == 0);
    /* A v6-only wildcard leaves IPv4 to others: this AF_INET bind succeeds (and is closed
     * again, so nothing listens for IPv4 on 7001). */
    int v4 = nf_socket(srv, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any4 = sin_of("0.0.0.0", 7001);
    CHECK(nf_bind(srv, v4, (struct sockaddr *)&any4, sizeof any4) == 0);
    CHECK(nf_close(srv, v4) == 0);
    /* A v4-mapped bind on a v6-only socket is EINVAL (Linux inet6_bind). */
    int m = nf_socket(srv, AF_INET6, SOCK_STREAM, 0);
    CHECK(nf_setsockopt(srv, m, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0);
    struct sockaddr_in6 mapped = sin6_of("::ffff:198.18.0.2", 7002);
    CHECK_ERR(nf_bind(srv, m, (struct sockaddr *)&mapped, sizeof mapped), EINVAL);
    CHECK(nf_close(srv, m) == 0);

    int c = nf_socket(cli, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = sin_of("198.18.0.2", 7001);
    int so = 0;
    /* A blocking connect on a MANUAL stack needs the frames moved: non-blocking here. */
    CHECK(nf_fcntl(cli, c, F_SETFL, O_NONBLOCK) == 0);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&to, sizeof to), EINPROGRESS);
    shuttle(cli, srv);
    socklen_t sl = sizeof so;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == ECONNREFUSED);
    CHECK_ERR(nf_accept(srv, l, NULL, NULL), EAGAIN);
    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, l) == 0);
}

static void tcp_v6_client(nf_stack *cli, nf_stack *srv) {
    int l = listen_on(srv, 7003);
    /* An AF_INET6 client connecting to a v4-mapped address runs over IPv4. */
    int c = nf_socket(cli, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in6 to = sin6_of("::ffff:198.18.0.2", 7003);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&to, sizeof to), EINPROGRESS);
    shuttle(cli, srv);
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    int s = nf_accept(srv, l, (struct sockaddr *)&peer, &pl);
    CHECK(s >= 0 && peer.sin_family == AF_INET && peer.sin_addr.s_addr == inet_addr("198.18.0.1"));
    struct sockaddr_in6 mine;
    socklen_t ml = sizeof mine;
    CHECK(nf_getsockname(cli, c, (struct sockaddr *)&mine, &ml) == 0);
    CHECK(in6_is_mapped(&mine, "198.18.0.1") && mine.sin6_port == peer.sin_port);
    ml = sizeof mine;
    CHECK(nf_getpeername(cli, c, (struct sockaddr *)&mine, &ml) == 0);
    CHECK(in6_is_mapped(&mine, "198.18.0.2") && mine.sin6_port == htons(7003));
    CHECK(nf_write(cli, c, "v6 socket", 9) == 9);
    shuttle(cli, srv);
    char buf[16];
    CHECK(nf_recv(srv, s, buf, sizeof buf, MSG_DONTWAIT) == 9 && memcmp(buf, "v6 socket", 9) == 0);
    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, s) == 0);
    shuttle(cli, srv);
    CHECK(nf_close(srv, l) == 0);

    /* An AF_INET6 socket refuses a sockaddr_in for connect (Linux tcp_v6_connect). */
    c = nf_socket(cli, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in to4 = sin_of("198.18.0.2", 7003);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&to4, sizeof to4), EAFNOSUPPORT);
    /* A real IPv6 peer: the stack has no IPv6 address, so no route (at once, never a hang). */
    struct sockaddr_in6 far = sin6_of("2001:db8::2", 80);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&far, sizeof far), ENETUNREACH);
    CHECK(nf_close(cli, c) == 0);
    /* The same for a blocking socket. */
    c = nf_socket(cli, AF_INET6, SOCK_STREAM, 0);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&far, sizeof far), ENETUNREACH);
    CHECK(nf_close(cli, c) == 0);
    /* IPV6_V6ONLY forbids v4-mapped peers (Linux: ENETUNREACH). */
    c = nf_socket(cli, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    CHECK(nf_setsockopt(cli, c, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&to, sizeof to), ENETUNREACH);
    CHECK(nf_close(cli, c) == 0);
}

static void udp_dual(nf_stack *cli, nf_stack *srv) {
    int u6 = nf_socket(srv, AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 any = sin6_of("::", 5353);
    CHECK(nf_bind(srv, u6, (struct sockaddr *)&any, sizeof any) == 0);
    int u4 = nf_socket(cli, AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = sin_of("198.18.0.2", 5353);
    CHECK(nf_sendto(cli, u4, "query", 5, 0, (struct sockaddr *)&to, sizeof to) == 5);
    shuttle(cli, srv);
    char buf[32];
    struct sockaddr_in6 from;
    socklen_t fl = sizeof from;
    CHECK(nf_recvfrom(srv, u6, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fl) == 5);
    CHECK(fl == sizeof from && in6_is_mapped(&from, "198.18.0.1") && memcmp(buf, "query", 5) == 0);
    /* Answer to the mapped address ... */
    CHECK(nf_sendto(srv, u6, "answer", 6, 0, (struct sockaddr *)&from, sizeof from) == 6);
    shuttle(cli, srv);
    struct sockaddr_in from4;
    socklen_t f4l = sizeof from4;
    CHECK(nf_recvfrom(cli, u4, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from4, &f4l) == 6);
    CHECK(memcmp(buf, "answer", 6) == 0 && from4.sin_addr.s_addr == inet_addr("198.18.0.2"));
    CHECK(from4.sin_port == htons(5353));
    /* ... or to a plain sockaddr_in (Linux udpv6_sendmsg takes AF_INET on a v6 socket). */
    struct sockaddr_in back = sin_of("198.18.0.1", ntohs(from.sin6_port));
    CHECK(nf_sendto(srv, u6, "again", 5, 0, (struct sockaddr *)&back, sizeof back) == 5);
    shuttle(cli, srv);
    CHECK(nf_recv(cli, u4, buf, sizeof buf, MSG_DONTWAIT) == 5 && memcmp(buf, "again", 5) == 0);
    /* An IPv6 destination: no IPv6 address to send from. */
    struct sockaddr_in6 far = sin6_of("2001:db8::2", 53);
    CHECK_ERR(nf_sendto(srv, u6, "x", 1, 0, (struct sockaddr *)&far, sizeof far), ENETUNREACH);
    /* An AF_INET socket cannot send to a sockaddr_in6. */
    CHECK_ERR(nf_sendto(cli, u4, "x", 1, 0, (struct sockaddr *)&far, sizeof far), EAFNOSUPPORT);
    struct sockaddr_in6 name;
    socklen_t nl = sizeof name;
    CHECK(nf_getsockname(srv, u6, (struct sockaddr *)&name, &nl) == 0);
    CHECK(nl == sizeof name && name.sin6_port == htons(5353) && IN6_IS_ADDR_UNSPECIFIED(&name.sin6_addr));
    CHECK(nf_close(srv, u6) == 0);
    CHECK(nf_close(cli, u4) == 0);

    /* A v6-only UDP socket on [::] does not hear IPv4, and refuses sockaddr_in destinations. */
    u6 = nf_socket(srv, AF_INET6, SOCK_DGRAM, 0);
    int one = 1;
    CHECK(nf_setsockopt(srv, u6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0);
    any = sin6_of("::", 5354);
    CHECK(nf_bind(srv, u6, (struct sockaddr *)&any, sizeof any) == 0);
    u4 = nf_socket(cli, AF_INET, SOCK_DGRAM, 0);
    to = sin_of("198.18.0.2", 5354);
    CHECK(nf_sendto(cli, u4, "lost", 4, 0, (struct sockaddr *)&to, sizeof to) == 4);
    shuttle(cli, srv);
    CHECK_ERR(nf_recv(srv, u6, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    CHECK_ERR(nf_sendto(srv, u6, "x", 1, 0, (struct sockaddr *)&back, sizeof back), ENETUNREACH);
    CHECK(nf_close(srv, u6) == 0);
    CHECK(nf_close(cli, u4) == 0);
}

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    tcp_dual_listener(cli, srv);
    tcp_v6only_listener(cli, srv);
    tcp_v6_client(cli, srv);
    udp_dual(cli, srv);
    nf_stack_free(cli);
    nf_stack_free(srv);
    printf("dualstack: ok\n");
    return 0;
}
