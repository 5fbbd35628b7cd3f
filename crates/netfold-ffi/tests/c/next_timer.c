/* nf_clock_next: a MANUAL-clock program learns when the stack next needs to run. An idle
 * stack has no timer; a lost data segment arms one, and setting the clock to exactly that
 * time (not a microsecond earlier) brings the retransmission; a loop that only ever jumps to
 * nf_clock_next's answer finishes the connection's close (TIME-WAIT included) and ends with
 * no timer pending. */
#include "nftest.h"

int main(void) {
    uint64_t t = 12345;
    CHECK_ERR(nf_clock_next(NULL, &t), EINVAL);

    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    CHECK_ERR(nf_clock_next(cli, NULL), EFAULT);
    /* Nothing pending on a fresh stack: 0, and *usec untouched. */
    CHECK(nf_clock_next(cli, &t) == 0 && t == 12345);

    int c, s;
    connect_pair(cli, srv, "198.18.0.2", 8080, &c, &s);
    int one = 1;
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    const char msg[] = "lost once";
    CHECK(nf_write(cli, c, msg, sizeof msg) == (ssize_t)sizeof msg);
    unsigned char lost[2048], tmp[2048];
    ssize_t n = nf_take(cli, lost, sizeof lost);
    CHECK(n > 40);
    CHECK_ERR(nf_take(cli, tmp, sizeof tmp), EAGAIN);

    /* The lost segment arms a timer (tail loss probe or RTO): due in the future. */
    uint64_t now = nf_clock_now(cli);
    CHECK(nf_clock_next(cli, &t) == 1);
    printf("next timer %llu us after now\n", (unsigned long long)(t - now));
    CHECK(t > now && t - now <= 5000000ULL);
    /* One microsecond before it nothing is sent; at it, the segment goes again. */
    CHECK(nf_clock_set(cli, t - 1) == 0);
    CHECK_ERR(nf_take(cli, tmp, sizeof tmp), EAGAIN);
    uint64_t t2;
    CHECK(nf_clock_next(cli, &t2) == 1 && t2 == t);
    CHECK(nf_clock_set(cli, t) == 0);
    ssize_t m = nf_take(cli, tmp, sizeof tmp);
    CHECK(m == n);
    /* Deliver it: the receiver reads the data, and the ACK settles the sender. */
    CHECK(nf_clock_set(srv, t) == 0);
    CHECK(nf_inject(srv, tmp, (size_t)m) == 0);
    char buf[64];
    CHECK(nf_read(srv, s, buf, sizeof buf) == (ssize_t)sizeof msg);
    CHECK(memcmp(buf, msg, sizeof msg) == 0);
    shuttle(cli, srv);

    /* Close both ends, then run each stack only by jumping to its next timer (delivering
     * whatever it sends) until neither has one: TIME-WAIT ends, nothing stays pending. */
    CHECK(nf_close(cli, c) == 0);
    shuttle(cli, srv);
    CHECK(nf_close(srv, s) == 0);
    shuttle(cli, srv);
    int steps = 0;
    for (;;) {
        uint64_t tc = 0, ts = 0;
        int hc = nf_clock_next(cli, &tc), hs = nf_clock_next(srv, &ts);
        CHECK(hc >= 0 && hs >= 0);
        if (!hc && !hs) break;
        CHECK(++steps < 1000);
        uint64_t next = !hc ? ts : !hs ? tc : (tc < ts ? tc : ts);
        CHECK(next >= nf_clock_now(cli) && next >= nf_clock_now(srv));
        CHECK(nf_clock_set(cli, next) == 0 && nf_clock_set(srv, next) == 0);
        shuttle(cli, srv);
    }
    printf("closed after %d timer steps, at %llu ms\n", steps,
           (unsigned long long)(nf_clock_now(cli) / 1000));
    CHECK(steps >= 1); /* TIME-WAIT at least */
    CHECK(nf_clock_next(cli, &t) == 0 && nf_clock_next(srv, &t) == 0);

    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("next_timer: ok");
    return 0;
}
