/* Linux's MSG_ZEROCOPY through the C API, on two MANUAL-clock stacks: SO_ZEROCOPY (get, set,
 * EINVAL for values other than 0 and 1, inherited by accepted sockets); without it the flag is
 * ignored (the data copied, no notification); with it every send of at least one byte gets the
 * next number, and once its buffers are acknowledged recvmsg(MSG_ERRQUEUE) returns one
 * sock_extended_err (SOL_IP/IP_RECVERR) per range of consecutive numbers, as Linux coalesces
 * them; poll and epoll report POLLERR/EPOLLERR exactly while notifications wait; EAGAIN when
 * none; a send that takes nothing gives its number back; MSG_CTRUNC for a short control
 * buffer; nf_send_zc's completions on the same socket stay with nf_zc_completions; buffers
 * released by a reset are notified too; the data arrives byte for byte. */
#include "nftest.h"
#include <linux/errqueue.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

/* One MSG_ERRQUEUE read: returns recvmsg's result, the notification in *ee, the cmsg's level
 * and type in *level and *type, the message's flags in *flags. */
static ssize_t read_note(nf_stack *st, int fd, struct sock_extended_err *ee, int *level,
                         int *type, int *flags, size_t control_len) {
    union {
        char buf[CMSG_SPACE(sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in6))];
        struct cmsghdr align;
    } control;
    memset(&control, 0xa5, sizeof control);
    char data[16];
    struct iovec iov = {data, sizeof data};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.buf;
    m.msg_controllen = control_len;
    ssize_t r = nf_recvmsg(st, fd, &m, MSG_ERRQUEUE);
    if (r < 0) return r;
    *flags = m.msg_flags;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == NULL) {
        *level = *type = -1;
        return r;
    }
    CHECK(c->cmsg_len >= CMSG_LEN(sizeof *ee));
    *level = c->cmsg_level;
    *type = c->cmsg_type;
    memcpy(ee, CMSG_DATA(c), sizeof *ee);
    /* The offender address after it is all zero (no address for this origin). */
    const unsigned char *off = CMSG_DATA(c) + sizeof *ee;
    for (size_t i = 0; i < c->cmsg_len - CMSG_LEN(sizeof *ee); i++) CHECK(off[i] == 0);
    return r;
}

static short revents(nf_stack *st, int fd) {
    struct pollfd p = {fd, POLLIN | POLLOUT, 0};
    CHECK(nf_poll(st, &p, 1, 0) == 1);
    return p.revents;
}

/* Expects one zerocopy notification lo..hi on (st, fd). */
static void expect_note(nf_stack *st, int fd, unsigned lo, unsigned hi) {
    struct sock_extended_err ee;
    int level, type, flags;
    size_t full = CMSG_SPACE(sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in6));
    CHECK(read_note(st, fd, &ee, &level, &type, &flags, full) == 0);
    CHECK(level == SOL_IP && type == IP_RECVERR);
    CHECK(flags & MSG_ERRQUEUE);
    CHECK(ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_type == 0);
    /* An Ethernet link of nf_inject/nf_take takes linear frames: the payload is copied into
     * each frame once, which the notification reports as Linux does without scatter-gather. */
    CHECK(ee.ee_code == SO_EE_CODE_ZEROCOPY_COPIED);
    CHECK(ee.ee_info == lo && ee.ee_data == hi);
}

static void drain(nf_stack *b, int fd, unsigned char *in, size_t cap, size_t *got) {
    for (;;) {
        ssize_t r = nf_read(b, fd, in + *got, cap - *got);
        if (r < 0) {
            CHECK(errno == EAGAIN);
            return;
        }
        if (r == 0) return;
        *got += (size_t)r;
    }
}

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);

    /* SO_ZEROCOPY on a listener: 0 or 1 only, read back, inherited by accepted sockets. */
    int l = listen_on(srv, 7100);
    int v = 2, one = 1, got = -1;
    socklen_t gl = sizeof got;
    CHECK_ERR(nf_setsockopt(srv, l, SOL_SOCKET, SO_ZEROCOPY, &v, sizeof v), EINVAL);
    CHECK(nf_getsockopt(srv, l, SOL_SOCKET, SO_ZEROCOPY, &got, &gl) == 0 && got == 0);
    CHECK(nf_setsockopt(srv, l, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0);
    CHECK(nf_getsockopt(srv, l, SOL_SOCKET, SO_ZEROCOPY, &got, &gl) == 0 && got == 1);
    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 7100);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    shuttle(cli, srv);
    int s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_fcntl(srv, s, F_SETFL, O_NONBLOCK) == 0);
    CHECK(nf_getsockopt(srv, s, SOL_SOCKET, SO_ZEROCOPY, &got, &gl) == 0 && got == 1);
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);

    static unsigned char out[64 * 1024], in[256 * 1024];
    for (size_t i = 0; i < sizeof out; i++) out[i] = (unsigned char)(i * 7 + (i >> 8));
    size_t sent = 0, recvd = 0;

    /* No notification yet: EAGAIN, no POLLERR. */
    struct sock_extended_err ee;
    int level, type, flags;
    CHECK_ERR(read_note(cli, c, &ee, &level, &type, &flags, 64), EAGAIN);
    CHECK(!(revents(cli, c) & POLLERR));

    /* Without SO_ZEROCOPY the flag is ignored: copied, never notified. */
    CHECK(nf_send(cli, c, out, 1000, MSG_ZEROCOPY) == 1000);
    sent += 1000;
    shuttle(cli, srv);
    CHECK_ERR(read_note(cli, c, &ee, &level, &type, &flags, 64), EAGAIN);
    CHECK(!(revents(cli, c) & POLLERR));

    /* With it: three sends, numbers 0, 1, 2, notified once acknowledged, as one range. */
    CHECK(nf_setsockopt(cli, c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0);
    for (int i = 0; i < 3; i++) {
        CHECK(nf_send(cli, c, out + sent, 3000, MSG_ZEROCOPY) == 3000);
        sent += 3000;
    }
    /* Not acknowledged yet: nothing to read. */
    CHECK_ERR(read_note(cli, c, &ee, &level, &type, &flags, 64), EAGAIN);
    CHECK(!(revents(cli, c) & POLLERR));
    /* An epoll instance watching only EPOLLIN still reports EPOLLERR (always watched). */
    int ep = nf_epoll_create1(cli, 0);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data = {.fd = c}};
    CHECK(nf_epoll_ctl(cli, ep, EPOLL_CTL_ADD, c, &ev) == 0);
    struct epoll_event evs[2];
    CHECK(nf_epoll_wait(cli, ep, evs, 2, 0) == 0);
    shuttle(cli, srv);
    CHECK(revents(cli, c) & POLLERR);
    CHECK(nf_epoll_wait(cli, ep, evs, 2, 0) == 1 && (evs[0].events & EPOLLERR));
    expect_note(cli, c, 0, 2);
    CHECK_ERR(read_note(cli, c, &ee, &level, &type, &flags, 64), EAGAIN);
    CHECK(!(revents(cli, c) & POLLERR));
    CHECK(nf_epoll_wait(cli, ep, evs, 2, 0) == 0);

    /* A send of nothing takes no number; sendmsg with two buffers is one send (number 3);
     * numbers read one range at a time: 3 is read before 4 is sent, so 4 comes alone. */
    CHECK(nf_send(cli, c, out, 0, MSG_ZEROCOPY) == 0);
    struct iovec iov[2] = {{out + sent, 500}, {out + sent + 500, 700}};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    CHECK(nf_sendmsg(cli, c, &m, MSG_ZEROCOPY) == 1200);
    sent += 1200;
    shuttle(cli, srv);
    expect_note(cli, c, 3, 3);
    CHECK(nf_send(cli, c, out + sent, 100, MSG_ZEROCOPY) == 100);
    sent += 100;
    shuttle(cli, srv);
    /* A control buffer too short for the message: MSG_CTRUNC, the notification is used up. */
    CHECK(read_note(cli, c, &ee, &level, &type, &flags, sizeof(struct cmsghdr)) == 0);
    CHECK(level == -1 && (flags & MSG_CTRUNC) && (flags & MSG_ERRQUEUE));
    CHECK_ERR(read_note(cli, c, &ee, &level, &type, &flags, 64), EAGAIN);

    /* nf_send_zc on the same socket: its completion stays with nf_zc_completions, and the
     * MSG_ZEROCOPY sends around it keep their own numbers (5, 6: one range). */
    CHECK(nf_send(cli, c, out + sent, 200, MSG_ZEROCOPY) == 200);
    sent += 200;
    CHECK(nf_send_zc(cli, c, out + sent, 300, 77, 0) == 300);
    sent += 300;
    CHECK(nf_send(cli, c, out + sent, 400, MSG_ZEROCOPY) == 400);
    sent += 400;
    shuttle(cli, srv);
    expect_note(cli, c, 5, 6);
    nf_zc_completion zc[4];
    CHECK(nf_zc_completions(cli, c, zc, 4) == 1);
    CHECK(zc[0].cookie == 77 && zc[0].len == 300 && zc[0].status == 0);
    CHECK_ERR(read_note(cli, c, &ee, &level, &type, &flags, 64), EAGAIN);

    drain(srv, s, in, sizeof in, &recvd);
    CHECK(recvd == sent && memcmp(in, out, sent) == 0);

    /* Buffers still queued when the connection is reset are released: notified too. */
    CHECK(nf_send(cli, c, out, 5000, MSG_ZEROCOPY) == 5000);
    struct linger lg = {1, 0};
    CHECK(nf_setsockopt(srv, s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    CHECK(nf_close(srv, s) == 0);
    unsigned char frame[2048];
    ssize_t n;
    while ((n = nf_take(srv, frame, sizeof frame)) > 0) CHECK(nf_inject(cli, frame, (size_t)n) == 0);
    while (nf_take(cli, frame, sizeof frame) > 0) {
    }
    CHECK(revents(cli, c) & POLLERR);
    expect_note(cli, c, 7, 7);

    CHECK(nf_close(cli, ep) == 0);
    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, l) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    printf("msg_zerocopy ok\n");
    return 0;
}
