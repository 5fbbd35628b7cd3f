/* Two MANUAL-clock Ethernet stacks in one program, joined by nf_take/nf_inject: ARP, the TCP
 * handshake, a 200 KB transfer each way with read/write/readv/writev, orderly close, and a UDP
 * exchange with sendmsg/recvmsg. */
#include "nftest.h"

#define N (200 * 1024)

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + (i >> 8)); }

/* Sends n bytes from tx to rx over the pair, checking every byte. */
static void transfer(nf_stack *a, int afd, nf_stack *b, int bfd, size_t n, int vectored) {
    static unsigned char out[N], in[N];
    for (size_t i = 0; i < n; i++) out[i] = pattern(i);
    size_t sent = 0, got = 0;
    int rounds = 0;
    while (got < n) {
        CHECK(++rounds < 100000);
        if (sent < n) {
            ssize_t w;
            if (vectored) {
                size_t half = (n - sent) / 2;
                struct iovec iov[2] = {{out + sent, half}, {out + sent + half, n - sent - half}};
                w = nf_writev(a, afd, iov, 2);
            } else {
                w = nf_write(a, afd, out + sent, n - sent);
            }
            if (w < 0) CHECK(errno == EAGAIN);
            else sent += (size_t)w;
        }
        shuttle(a, b);
        while (got < n) {
            ssize_t r;
            if (vectored) {
                size_t left = n - got, half = left / 2;
                struct iovec iov[2] = {{in + got, half}, {in + got + half, left - half}};
                r = nf_readv(b, bfd, iov, 2);
            } else {
                r = nf_read(b, bfd, in + got, n - got);
            }
            if (r < 0) {
                CHECK(errno == EAGAIN);
                break;
            }
            CHECK(r > 0);
            got += (size_t)r;
        }
        shuttle(a, b);
    }
    CHECK(sent == n && got == n);
    CHECK(memcmp(in, out, n) == 0);
}

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);

    int l = listen_on(srv, 5001);
    CHECK_ERR(nf_accept(srv, l, NULL, NULL), EAGAIN);
    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 5001);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EALREADY);
    /* ARP request, reply, SYN, SYN-ACK, ACK at least. */
    CHECK(shuttle(cli, srv) >= 5);
    /* As Linux: the first connect() after the handshake reports success, later ones EISCONN. */
    CHECK(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EISCONN);

    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    int s = nf_accept(srv, l, (struct sockaddr *)&peer, &pl);
    CHECK(s >= 0);
    CHECK(pl == sizeof peer && peer.sin_family == AF_INET);
    CHECK(peer.sin_addr.s_addr == inet_addr("198.18.0.1"));
    struct sockaddr_in mine;
    socklen_t ml = sizeof mine;
    CHECK(nf_getsockname(cli, c, (struct sockaddr *)&mine, &ml) == 0);
    CHECK(mine.sin_port == peer.sin_port && mine.sin_addr.s_addr == peer.sin_addr.s_addr);
    pl = sizeof peer;
    CHECK(nf_getpeername(cli, c, (struct sockaddr *)&peer, &pl) == 0);
    CHECK(peer.sin_port == htons(5001));
    /* Accepted sockets do not inherit O_NONBLOCK. */
    CHECK(nf_fcntl(srv, s, F_GETFL, 0) == O_RDWR);
    CHECK(nf_fcntl(srv, s, F_SETFL, O_NONBLOCK) == 0);
    int err = -1;
    socklen_t el = sizeof err;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);

    transfer(cli, c, srv, s, N, 0);
    transfer(srv, s, cli, c, N, 1);

    /* FIONREAD and SIOCOUTQ. */
    CHECK(nf_write(cli, c, "hello", 5) == 5);
    int q = -1;
    CHECK(nf_ioctl(cli, c, SIOCOUTQ, &q) == 0 && q == 5);
    shuttle(cli, srv);
    CHECK(nf_ioctl(srv, s, FIONREAD, &q) == 0 && q == 5);
    char buf[16];
    CHECK(nf_recv(srv, s, buf, sizeof buf, MSG_DONTWAIT) == 5 && memcmp(buf, "hello", 5) == 0);
    CHECK(nf_ioctl(srv, s, FIONREAD, &q) == 0 && q == 0);

    /* Orderly close: the server sees end of stream, then its writes still reach the client. */
    CHECK(nf_shutdown(cli, c, SHUT_WR) == 0);
    CHECK_ERR(nf_write(cli, c, "x", 1), EPIPE);
    shuttle(cli, srv);
    CHECK(nf_read(srv, s, buf, sizeof buf) == 0);
    CHECK(nf_write(srv, s, "bye", 3) == 3);
    shuttle(cli, srv);
    CHECK(nf_read(cli, c, buf, sizeof buf) == 3 && memcmp(buf, "bye", 3) == 0);
    CHECK(nf_close(srv, s) == 0);
    shuttle(cli, srv);
    CHECK(nf_read(cli, c, buf, sizeof buf) == 0);
    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, l) == 0);
    CHECK_ERR(nf_close(srv, l), EBADF);

    /* SO_LINGER {1, 0}: close resets the connection; the peer's read says ECONNRESET, once,
     * and its writes fail. */
    l = listen_on(srv, 5002);
    int c2, s2;
    c2 = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a2 = sin_of("198.18.0.2", 5002);
    CHECK_ERR(nf_connect(cli, c2, (struct sockaddr *)&a2, sizeof a2), EINPROGRESS);
    shuttle(cli, srv);
    s2 = nf_accept(srv, l, NULL, NULL);
    CHECK(s2 >= 0);
    CHECK(nf_fcntl(srv, s2, F_SETFL, O_NONBLOCK) == 0);
    struct linger lg = {1, 0};
    CHECK(nf_setsockopt(srv, s2, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    CHECK(nf_close(srv, s2) == 0);
    CHECK(shuttle(cli, srv) == 1); /* the RST */
    struct pollfd pr = {c2, POLLIN, 0};
    CHECK(nf_poll(cli, &pr, 1, 0) == 1 && (pr.revents & POLLERR) && (pr.revents & POLLHUP));
    CHECK_ERR(nf_read(cli, c2, buf, sizeof buf), ECONNRESET);
    CHECK(nf_read(cli, c2, buf, sizeof buf) == 0);
    CHECK(nf_write(cli, c2, "x", 1) == -1 && (errno == ECONNRESET || errno == EPIPE));
    CHECK(nf_close(cli, c2) == 0);
    CHECK(nf_close(srv, l) == 0);

    /* UDP both ways, with sendmsg/recvmsg and truncation. */
    int us = nf_socket(srv, AF_INET, SOCK_DGRAM, 0);
    int uc = nf_socket(cli, AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    CHECK(us >= 0 && uc >= 0);
    struct sockaddr_in ua = sin_of("0.0.0.0", 7000);
    CHECK(nf_bind(srv, us, (struct sockaddr *)&ua, sizeof ua) == 0);
    CHECK(nf_fcntl(srv, us, F_SETFL, O_NONBLOCK) == 0);
    struct sockaddr_in to = sin_of("198.18.0.2", 7000);
    struct iovec iov[2] = {{"dat", 3}, {"agram", 5}};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_name = &to;
    m.msg_namelen = sizeof to;
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    CHECK(nf_sendmsg(cli, uc, &m, 0) == 8);
    shuttle(cli, srv);
    CHECK(nf_ioctl(srv, us, FIONREAD, &q) == 0 && q == 8);
    char small[4];
    struct sockaddr_in from;
    struct iovec riov = {small, sizeof small};
    struct msghdr rm;
    memset(&rm, 0, sizeof rm);
    rm.msg_name = &from;
    rm.msg_namelen = sizeof from;
    rm.msg_iov = &riov;
    rm.msg_iovlen = 1;
    CHECK(nf_recvmsg(srv, us, &rm, 0) == 4);
    CHECK(rm.msg_flags & MSG_TRUNC);
    CHECK(memcmp(small, "data", 4) == 0);
    CHECK(from.sin_addr.s_addr == inet_addr("198.18.0.1"));
    /* Reply to the sender's address. */
    CHECK(nf_sendto(srv, us, "pong", 4, 0, (struct sockaddr *)&from, rm.msg_namelen) == 4);
    shuttle(cli, srv);
    socklen_t fl = sizeof from;
    CHECK(nf_recvfrom(cli, uc, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl) == 4);
    CHECK(memcmp(buf, "pong", 4) == 0 && from.sin_port == htons(7000));
    CHECK_ERR(nf_recv(cli, uc, buf, sizeof buf, 0), EAGAIN);
    CHECK(nf_close(srv, us) == 0 && nf_close(cli, uc) == 0);

    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("handshake: ok");
    return 0;
}
