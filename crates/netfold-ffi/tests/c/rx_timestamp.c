/* Software receive timestamps through the C API, on two MANUAL-clock stacks (whose clock is
 * the timestamps' time): SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE |
 * SOF_TIMESTAMPING_SOFTWARE gives nf_recvmsg an SCM_TIMESTAMPING message whose first time is
 * when the last byte the call returned arrived (a read of the older bytes their time, a read
 * reaching the newer ones theirs, MSG_PEEK the peeked bytes'); SO_TIMESTAMP adds SCM_TIMESTAMP
 * (a timeval) before it, SO_TIMESTAMPNS SCM_TIMESTAMPNS (a timespec); getsockopt reads them
 * back as Linux does; transmit flags are EINVAL; without the options nothing is added; an
 * accepted socket inherits its listener's; TCP_CM_INQ comes after the timestamps. */
#include "nftest.h"
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <sys/socket.h>
#include <time.h>

struct stamps {
    int n;
    int level[4], type[4];
    unsigned char data[4][48];
    size_t len[4];
};

static ssize_t recv_stamped(nf_stack *st, int fd, void *buf, size_t n, int flags,
                            struct stamps *out) {
    union {
        char buf[256];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, n};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.buf;
    m.msg_controllen = sizeof control.buf;
    ssize_t r = nf_recvmsg(st, fd, &m, flags);
    memset(out, 0, sizeof *out);
    if (r < 0) return r;
    CHECK(!(m.msg_flags & MSG_CTRUNC));
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
        CHECK(out->n < 4);
        size_t len = c->cmsg_len - CMSG_LEN(0);
        CHECK(len <= sizeof out->data[0]);
        out->level[out->n] = c->cmsg_level;
        out->type[out->n] = c->cmsg_type;
        out->len[out->n] = len;
        memcpy(out->data[out->n], CMSG_DATA(c), len);
        out->n++;
    }
    return r;
}

/* The SCM_TIMESTAMPING message at index i: ts[0] equals usec (stack time), ts[1..2] zero. */
static void check_timestamping(const struct stamps *s, int i, uint64_t usec) {
    CHECK(s->n > i && s->level[i] == SOL_SOCKET && s->type[i] == SCM_TIMESTAMPING);
    struct scm_timestamping ts;
    CHECK(s->len[i] == sizeof ts);
    memcpy(&ts, s->data[i], sizeof ts);
    CHECK((uint64_t)ts.ts[0].tv_sec == usec / 1000000);
    CHECK((uint64_t)ts.ts[0].tv_nsec == usec % 1000000 * 1000);
    CHECK(ts.ts[1].tv_sec == 0 && ts.ts[1].tv_nsec == 0 && ts.ts[2].tv_sec == 0 && ts.ts[2].tv_nsec == 0);
}

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    int l = listen_on(srv, 7200);
    int flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE, got = -1, one = 1;
    socklen_t gl = sizeof got;
    /* Linux sock_set_timestamping: OPT_ID on a listening TCP socket is EINVAL. */
    int tx = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID;
    CHECK_ERR(nf_setsockopt(srv, l, SOL_SOCKET, SO_TIMESTAMPING, &tx, sizeof tx), EINVAL);
    /* Hardware transmit timestamps are not offered. */
    int hw = SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
    CHECK_ERR(nf_setsockopt(srv, l, SOL_SOCKET, SO_TIMESTAMPING, &hw, sizeof hw), EINVAL);
    CHECK(nf_setsockopt(srv, l, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0);
    CHECK(nf_getsockopt(srv, l, SOL_SOCKET, SO_TIMESTAMPING, &got, &gl) == 0 && got == flags);

    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 7200);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    shuttle(cli, srv);
    int s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_fcntl(srv, s, F_SETFL, O_NONBLOCK) == 0);
    CHECK(nf_getsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMPING, &got, &gl) == 0 && got == flags);
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);

    /* 100 bytes arrive at 5 s, 200 more at 7.25 s; read at 9 s. */
    static unsigned char out[300], in[300];
    for (size_t i = 0; i < sizeof out; i++) out[i] = (unsigned char)(i * 3 + 1);
    const uint64_t t1 = 5000000, t2 = 7250000;
    CHECK(nf_clock_set(cli, t1) == 0 && nf_clock_set(srv, t1) == 0);
    CHECK(nf_write(cli, c, out, 100) == 100);
    shuttle(cli, srv);
    CHECK(nf_clock_set(cli, t2) == 0 && nf_clock_set(srv, t2) == 0);
    CHECK(nf_write(cli, c, out + 100, 200) == 200);
    shuttle(cli, srv);
    CHECK(nf_clock_set(cli, 9000000) == 0 && nf_clock_set(srv, 9000000) == 0);

    struct stamps st;
    /* MSG_PEEK of 10 bytes: the first write's time; nothing consumed. */
    CHECK(recv_stamped(srv, s, in, 10, MSG_PEEK, &st) == 10);
    CHECK(st.n == 1);
    check_timestamping(&st, 0, t1);
    /* 60 bytes, all of the first write: its time. */
    CHECK(recv_stamped(srv, s, in, 60, 0, &st) == 60);
    CHECK(st.n == 1);
    check_timestamping(&st, 0, t1);
    /* With SO_TIMESTAMPNS and TCP_INQ: 40 bytes ending the first write: SCM_TIMESTAMPNS, then
     * SCM_TIMESTAMPING, then TCP_CM_INQ. */
    CHECK(nf_setsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) == 0);
    CHECK(nf_getsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMPNS, &got, &gl) == 0 && got == 1);
    CHECK(nf_getsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMP, &got, &gl) == 0 && got == 0);
    CHECK(nf_setsockopt(srv, s, IPPROTO_TCP, TCP_INQ, &one, sizeof one) == 0);
    CHECK(recv_stamped(srv, s, in + 60, 40, 0, &st) == 40);
    CHECK(st.n == 3);
    CHECK(st.level[0] == SOL_SOCKET && st.type[0] == SCM_TIMESTAMPNS);
    struct timespec tsn;
    CHECK(st.len[0] == sizeof tsn);
    memcpy(&tsn, st.data[0], sizeof tsn);
    CHECK((uint64_t)tsn.tv_sec == t1 / 1000000 && (uint64_t)tsn.tv_nsec == t1 % 1000000 * 1000);
    check_timestamping(&st, 1, t1);
    CHECK(st.level[2] == SOL_TCP && st.type[2] == TCP_CM_INQ);
    int inq;
    memcpy(&inq, st.data[2], sizeof inq);
    CHECK(inq == 200);
    /* SO_TIMESTAMP (clears NS): a timeval. The rest, all of the second write: its time. */
    CHECK(nf_setsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof one) == 0);
    CHECK(nf_getsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMP, &got, &gl) == 0 && got == 1);
    CHECK(nf_getsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMPNS, &got, &gl) == 0 && got == 0);
    CHECK(recv_stamped(srv, s, in + 100, 200, 0, &st) == 200);
    CHECK(st.n == 3);
    CHECK(st.level[0] == SOL_SOCKET && st.type[0] == SCM_TIMESTAMP);
    struct timeval tv;
    CHECK(st.len[0] == sizeof tv);
    memcpy(&tv, st.data[0], sizeof tv);
    CHECK((uint64_t)tv.tv_sec == t2 / 1000000 && (uint64_t)tv.tv_usec == t2 % 1000000);
    check_timestamping(&st, 1, t2);
    CHECK(memcmp(in, out, sizeof out) == 0);

    /* A read that spans both writes' bytes is stamped with the later one. */
    CHECK(nf_clock_set(cli, 10000000) == 0 && nf_clock_set(srv, 10000000) == 0);
    CHECK(nf_write(cli, c, out, 30) == 30);
    shuttle(cli, srv);
    CHECK(nf_clock_set(cli, 11000000) == 0 && nf_clock_set(srv, 11000000) == 0);
    CHECK(nf_write(cli, c, out, 30) == 30);
    shuttle(cli, srv);
    CHECK(recv_stamped(srv, s, in, 300, 0, &st) == 60);
    check_timestamping(&st, 1, 11000000);

    /* Everything off: no control message (TCP_INQ off too). */
    int zero = 0;
    CHECK(nf_setsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMP, &zero, sizeof zero) == 0);
    CHECK(nf_setsockopt(srv, s, SOL_SOCKET, SO_TIMESTAMPING, &zero, sizeof zero) == 0);
    CHECK(nf_setsockopt(srv, s, IPPROTO_TCP, TCP_INQ, &zero, sizeof zero) == 0);
    CHECK(nf_write(cli, c, out, 30) == 30);
    shuttle(cli, srv);
    CHECK(recv_stamped(srv, s, in, 300, 0, &st) == 30);
    CHECK(st.n == 0);

    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, s) == 0);
    CHECK(nf_close(srv, l) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    printf("rx_timestamp ok\n");
    return 0;
}
