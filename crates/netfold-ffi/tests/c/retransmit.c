/* Manual-clock retransmission: a data segment taken from the sender and never delivered is
 * sent again once the clock passes the retransmission timeout (RFC 6298), not before (a tail
 * loss probe may come first), and the receiver then gets the data. */
#include "nftest.h"

struct seg {
    unsigned char f[2048];
    ssize_t n;
    size_t payload_off, payload_len;
    unsigned long seq;
};

/* Parses a bare IPv4/TCP frame (NF_MEDIUM_IP). */
static void parse(struct seg *s) {
    CHECK(s->n >= 40 && (s->f[0] >> 4) == 4 && s->f[9] == IPPROTO_TCP);
    size_t ihl = (size_t)(s->f[0] & 15) * 4;
    size_t total = ((size_t)s->f[2] << 8) | s->f[3];
    size_t doff = (size_t)(s->f[ihl + 12] >> 4) * 4;
    s->payload_off = ihl + doff;
    s->payload_len = total - ihl - doff;
    const unsigned char *t = s->f + ihl;
    s->seq = ((unsigned long)t[4] << 24) | ((unsigned long)t[5] << 16) | ((unsigned long)t[6] << 8) | t[7];
}

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    int c, s;
    connect_pair(cli, srv, "198.18.0.2", 8080, &c, &s);
    int one = 1;
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);

    const char msg[] = "this segment is lost once";
    CHECK(nf_write(cli, c, msg, sizeof msg) == (ssize_t)sizeof msg);
    struct seg lost;
    lost.n = nf_take(cli, lost.f, sizeof lost.f);
    parse(&lost);
    CHECK(lost.payload_len == sizeof msg);
    CHECK(memcmp(lost.f + lost.payload_off, msg, sizeof msg) == 0);
    /* Dropped: nothing else is queued, and the receiver has nothing. */
    unsigned char tmp[2048];
    CHECK_ERR(nf_take(cli, tmp, sizeof tmp), EAGAIN);
    char buf[64];
    CHECK_ERR(nf_read(srv, s, buf, sizeof buf), EAGAIN);

    /* Step the clock 10 ms at a time and drop every copy of the segment until one comes a
     * full RTO after the previous transmission. An earlier copy is the RFC 8985 tail loss
     * probe (PTO = 2*SRTT plus a delayed-ACK allowance, at least 10 ms); the RTO then runs
     * from the probe and is at least the 200 ms floor netfold uses (RFC 6298 §2.4, rto_min). */
    unsigned long long t0 = nf_clock_now(cli), t = t0, last_tx = t0;
    struct seg again;
    int copies = 0;
    for (;;) {
        t += 10000;
        CHECK(t - t0 <= 5000000ULL); /* the initial RTO is 1 s (RFC 6298 §2.1) */
        CHECK(nf_clock_set(cli, t) == 0);
        again.n = nf_take(cli, again.f, sizeof again.f);
        if (again.n < 0) {
            CHECK(errno == EAGAIN);
            continue;
        }
        parse(&again);
        CHECK(again.seq == lost.seq);
        CHECK(again.payload_len == lost.payload_len);
        CHECK(memcmp(again.f + again.payload_off, msg, sizeof msg) == 0);
        copies++;
        printf("copy %d after %llu ms (%llu ms after the previous)\n", copies, (t - t0) / 1000,
               (t - last_tx) / 1000);
        if (t - last_tx >= 200000) break; /* the RTO retransmission */
        CHECK(copies == 1);               /* at most one probe comes before it */
        CHECK(t - last_tx >= 10000);
        last_tx = t;
    }
    /* The connection has not been touched by the receiver: nothing else was sent. */
    CHECK_ERR(nf_take(cli, tmp, sizeof tmp), EAGAIN);

    CHECK(nf_clock_set(srv, t) == 0);
    CHECK(nf_inject(srv, again.f, (size_t)again.n) == 0);
    CHECK(nf_read(srv, s, buf, sizeof buf) == (ssize_t)sizeof msg);
    CHECK(memcmp(buf, msg, sizeof msg) == 0);
    shuttle(cli, srv);

    CHECK(nf_close(cli, c) == 0 && nf_close(srv, s) == 0);
    shuttle(cli, srv);

    /* Keepalive options reach the engine: idle 1 s, 1 s apart, 2 probes. With every probe
     * lost, the connection is dropped and SO_ERROR says ETIMEDOUT (RFC 9293 §3.8.4). */
    connect_pair(cli, srv, "198.18.0.2", 8081, &c, &s);
    int idle = 1, intvl = 1, cnt = 2;
    CHECK(nf_setsockopt(cli, c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == 0);
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0);
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) == 0);
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) == 0);
    int probes = 0;
    struct pollfd p = {c, POLLIN, 0};
    for (;;) {
        t += 100000;
        CHECK(t - t0 <= 30000000ULL);
        CHECK(nf_clock_set(cli, t) == 0);
        while (nf_take(cli, tmp, sizeof tmp) > 0) probes++; /* lost */
        if (nf_poll(cli, &p, 1, 0) == 1 && (p.revents & POLLERR)) break;
    }
    CHECK(probes >= 2);
    int err = 0;
    socklen_t el = sizeof err;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == ETIMEDOUT);
    printf("keepalive: %d probes, dropped\n", probes);
    CHECK(nf_close(cli, c) == 0 && nf_close(srv, s) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("retransmit: ok");
    return 0;
}
