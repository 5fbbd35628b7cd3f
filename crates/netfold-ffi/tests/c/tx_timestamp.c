/* Software transmit timestamps through the C API, on two MANUAL-clock stacks, as Linux gives
 * them (Documentation/networking/timestamping.rst): SO_TIMESTAMPING with TX_SCHED |
 * TX_SOFTWARE | TX_ACK | SOFTWARE | OPT_ID; each send's last byte gets SCM_TSTAMP_SCHED and
 * SCM_TSTAMP_SND once sent and SCM_TSTAMP_ACK once acknowledged, read one per
 * recvmsg(MSG_ERRQUEUE): 0 bytes, MSG_ERRQUEUE | MSG_TRUNC (no OPT_TSONLY), SCM_TIMESTAMPING
 * then IP_RECVERR {ENOMSG, SO_EE_ORIGIN_TIMESTAMPING, ee_info kind, ee_data key}, the key
 * counted from SND.UNA at the setsockopt; POLLERR while one waits; EAGAIN when none; with
 * OPT_TSONLY no MSG_TRUNC; ts[0] the manual clock's time of the send and of the ACK. */
#include "nftest.h"
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <poll.h>
#include <sys/socket.h>

static short revents(nf_stack *st, int fd) {
    struct pollfd p = {fd, POLLIN | POLLOUT, 0};
    CHECK(nf_poll(st, &p, 1, 0) == 1);
    return p.revents;
}

/* One MSG_ERRQUEUE read, which must succeed with a timestamp note of `kind` and `key`;
 * ts[0] must be `want_usec`; returns the message's flags. */
static int expect_stamp(nf_stack *st, int fd, unsigned kind, unsigned key, uint64_t want_usec) {
    union {
        char buf[512];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    char data[1];
    struct iovec iov = {data, 0};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.buf;
    m.msg_controllen = sizeof control.buf;
    CHECK(nf_recvmsg(st, fd, &m, MSG_ERRQUEUE) == 0);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    CHECK(c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING);
    struct scm_timestamping ts;
    memcpy(&ts, CMSG_DATA(c), sizeof ts);
    CHECK(ts.ts[0].tv_sec == (time_t)(want_usec / 1000000));
    CHECK(ts.ts[0].tv_nsec == (long)(want_usec % 1000000 * 1000));
    c = CMSG_NXTHDR(&m, c);
    CHECK(c != NULL && c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR);
    struct sock_extended_err ee;
    memcpy(&ee, CMSG_DATA(c), sizeof ee);
    CHECK(ee.ee_errno == ENOMSG && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING);
    CHECK(ee.ee_type == 0 && ee.ee_code == 0);
    CHECK(ee.ee_info == kind && ee.ee_data == key);
    CHECK(CMSG_NXTHDR(&m, c) == NULL);
    return m.msg_flags;
}

static void expect_empty(nf_stack *st, int fd) {
    char buf[256];
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_control = buf;
    m.msg_controllen = sizeof buf;
    CHECK_ERR(nf_recvmsg(st, fd, &m, MSG_ERRQUEUE), EAGAIN);
    CHECK(!(revents(st, fd) & POLLERR));
}

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    int l = listen_on(srv, 7300);
    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    int flags = SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_TX_SOFTWARE |
                SOF_TIMESTAMPING_TX_ACK | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID;
    /* Linux sock_set_timestamping: OPT_ID on a TCP socket in CLOSE is EINVAL. */
    CHECK_ERR(nf_setsockopt(cli, c, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags), EINVAL);
    struct sockaddr_in a = sin_of("198.18.0.2", 7300);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    shuttle(cli, srv);
    int s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_fcntl(srv, s, F_SETFL, O_NONBLOCK) == 0);

    int one = 1; /* No Nagle: the second send goes out while the first is unacknowledged. */
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    static unsigned char out[4000], in[8000];
    memset(out, 0x5a, sizeof out);
    /* 300 bytes unacknowledged at the setsockopt: OPT_ID counts them (from SND.UNA). */
    CHECK(nf_send(cli, c, out, 300, 0) == 300);
    CHECK(nf_setsockopt(cli, c, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0);
    int got = -1;
    socklen_t gl = sizeof got;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_TIMESTAMPING, &got, &gl) == 0 && got == flags);
    expect_empty(cli, c);
    uint64_t t_send = 5000000;
    CHECK(nf_clock_set(cli, t_send) == 0);
    CHECK(nf_send(cli, c, out, 1000, 0) == 1000);
    /* Sent at once (MANUAL clock: the call's segments leave before it returns). */
    CHECK(revents(cli, c) & POLLERR);
    CHECK(expect_stamp(cli, c, SCM_TSTAMP_SCHED, 1299, t_send) == (MSG_ERRQUEUE | MSG_TRUNC));
    CHECK(expect_stamp(cli, c, SCM_TSTAMP_SND, 1299, t_send) == (MSG_ERRQUEUE | MSG_TRUNC));
    expect_empty(cli, c);
    uint64_t t_ack = 5020000;
    CHECK(nf_clock_set(srv, t_ack) == 0 && nf_clock_set(cli, t_ack) == 0);
    shuttle(cli, srv);
    CHECK(expect_stamp(cli, c, SCM_TSTAMP_ACK, 1299, t_ack) == (MSG_ERRQUEUE | MSG_TRUNC));
    expect_empty(cli, c);

    /* OPT_TSONLY: no packet copy, so no MSG_TRUNC; only TX_ACK asked: one note. */
    int ack_only = SOF_TIMESTAMPING_TX_ACK | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID |
                   SOF_TIMESTAMPING_OPT_TSONLY;
    CHECK(nf_setsockopt(cli, c, SOL_SOCKET, SO_TIMESTAMPING, &ack_only, sizeof ack_only) == 0);
    CHECK(nf_send(cli, c, out, 500, 0) == 500);
    expect_empty(cli, c);
    shuttle(cli, srv);
    CHECK(expect_stamp(cli, c, SCM_TSTAMP_ACK, 1799, t_ack) == MSG_ERRQUEUE);
    expect_empty(cli, c);

    /* The data arrived whole. */
    size_t n = 0;
    for (;;) {
        ssize_t r = nf_read(srv, s, in + n, sizeof in - n);
        if (r <= 0) break;
        n += (size_t)r;
    }
    CHECK(n == 1800);
    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, s) == 0);
    CHECK(nf_close(srv, l) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    printf("tx_timestamp ok\n");
    return 0;
}
