/* Zero-copy send through the C API on two MANUAL-clock stacks: buffers lent with nf_send_zc and
 * a file range lent with nf_sendfile_zc arrive byte for byte between copied writes; every lent
 * buffer comes back exactly once from nf_zc_completions with its cookie, acknowledged; buffers
 * still queued when the connection is reset come back with ECONNABORTED, also after nf_close;
 * over a link that drops every 7th data-carrying frame the bytes still arrive exactly and every
 * buffer still completes exactly once, acknowledged, after its retransmissions; and the errors
 * of the calls. */
#include "nftest.h"
#include <stddef.h>
#include <unistd.h>

#define N (300 * 1024)

static unsigned char pattern(size_t i) { return (unsigned char)(i * 13 + (i >> 9)); }

/* Like shuttle(), but every `nth` frame from a to b longer than `min_len` bytes (a data
 * segment, not a bare ACK) is dropped and counted in *dropped; returns how many frames were
 * taken from either side. */
static int lossy_shuttle(nf_stack *a, nf_stack *b, int nth, size_t min_len, int *count,
                         int *dropped) {
    unsigned char buf[2048];
    int moved = 0, progress;
    do {
        progress = 0;
        ssize_t n;
        while ((n = nf_take(a, buf, sizeof buf)) > 0) {
            progress = 1;
            moved++;
            if ((size_t)n > min_len && ++*count % nth == 0) {
                ++*dropped;
                continue;
            }
            CHECK(nf_inject(b, buf, (size_t)n) == 0);
        }
        CHECK(n == -1 && errno == EAGAIN);
        while ((n = nf_take(b, buf, sizeof buf)) > 0) {
            progress = 1;
            moved++;
            CHECK(nf_inject(a, buf, (size_t)n) == 0);
        }
        CHECK(n == -1 && errno == EAGAIN);
    } while (progress);
    return moved;
}

/* Reads what is readable on (b, fd) into in[*got...]. */
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
    /* The completion struct's layout as the library sees it. */
    size_t off[4];
    CHECK(nf_zc_completion_layout(off, 4) == sizeof(nf_zc_completion));
    CHECK(off[0] == offsetof(nf_zc_completion, cookie) && off[1] == offsetof(nf_zc_completion, len));
    CHECK(off[2] == offsetof(nf_zc_completion, fd) && off[3] == offsetof(nf_zc_completion, status));

    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_ETHERNET, NF_CLOCK_MANUAL);
    int c, s;
    connect_pair(cli, srv, "198.18.0.2", 7001, &c, &s);
    /* The clock does not move by itself: no Nagle wait for a delayed ACK that never comes. */
    int one = 1;
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);

    static unsigned char out[N], in[2 * N];
    for (size_t i = 0; i < N; i++) out[i] = pattern(i);
    /* A file for nf_sendfile_zc. */
    char path[] = "/tmp/netfold-zc-XXXXXX";
    int file = mkstemp(path);
    CHECK(file >= 0);
    CHECK(write(file, out, N) == N);

    /* Lend out[] in pieces of 50000 bytes (cookie = offset + 1), with a copied write and a file
     * range in the middle. Prefixes: send the rest again. */
    size_t expect_len = 0, got = 0;
    static unsigned char expect[2 * N];
    unsigned long long lent = 0, completed = 0, bytes_lent = 0, bytes_completed = 0;
    size_t at = 0;
    int stage = 0;
    nf_zc_completion done[64];
    for (int rounds = 0; stage < 3 || got < expect_len; rounds++) {
        CHECK(rounds < 100000);
        if (stage == 0 && at < N) {
            size_t n = N - at < 50000 ? N - at : 50000;
            ssize_t w = nf_send_zc(cli, c, out + at, n, at + 1, 0);
            if (w < 0) {
                CHECK(errno == EAGAIN);
            } else {
                CHECK(w > 0 && (size_t)w <= n);
                memcpy(expect + expect_len, out + at, (size_t)w);
                expect_len += (size_t)w;
                at += (size_t)w;
                lent++;
                bytes_lent += (unsigned long long)w;
            }
            if (at == N) stage = 1;
        } else if (stage == 1) {
            ssize_t w = nf_write(cli, c, "--copied--", 10);
            if (w == 10) {
                memcpy(expect + expect_len, "--copied--", 10);
                expect_len += 10;
                stage = 2;
                at = 0;
            } else {
                CHECK(w < 0 && errno == EAGAIN);
            }
        } else if (stage == 2) {
            /* File bytes [1000, 1000 + 100000). */
            size_t want = 100000;
            ssize_t w = nf_sendfile_zc(cli, c, file, (off_t)(1000 + at), want - at, 0x5f000000 + at, 0);
            if (w < 0) {
                CHECK(errno == EAGAIN);
            } else {
                memcpy(expect + expect_len, out + 1000 + at, (size_t)w);
                expect_len += (size_t)w;
                at += (size_t)w;
                lent++;
                bytes_lent += (unsigned long long)w;
                if (at == want) stage = 3;
            }
        }
        shuttle(cli, srv);
        drain(srv, s, in, sizeof in, &got);
        shuttle(cli, srv);
        int k;
        while ((k = nf_zc_completions(cli, c, done, 64)) > 0) {
            for (int i = 0; i < k; i++) {
                CHECK(done[i].status == 0);
                CHECK(done[i].fd == c);
                CHECK(done[i].cookie != 0);
                completed++;
                bytes_completed += done[i].len;
            }
        }
        CHECK(k == 0);
    }
    CHECK(got == expect_len);
    CHECK(memcmp(in, expect, got) == 0);
    /* The last ACK may be a delayed one: let the clocks run to it. */
    for (int i = 0; i < 100 && completed < lent; i++) {
        uint64_t t;
        if (nf_clock_next(srv, &t) == 1) {
            CHECK(nf_clock_set(srv, t) == 0);
            if (t > nf_clock_now(cli)) CHECK(nf_clock_set(cli, t) == 0);
        }
        shuttle(cli, srv);
        int k;
        while ((k = nf_zc_completions(cli, c, done, 64)) > 0) {
            for (int j = 0; j < k; j++) {
                CHECK(done[j].status == 0);
                completed++;
                bytes_completed += done[j].len;
            }
        }
    }
    CHECK(completed == lent && bytes_completed == bytes_lent);
    printf("lent %llu buffers (%llu bytes), all completed acknowledged\n", lent, bytes_lent);
    close(file);
    unlink(path);

    /* Loss: lend 200 KiB in 20000-byte buffers over a link that drops every 7th data frame;
     * run both clocks to each next timer when nothing moves (retransmissions, probes). */
    {
        int c3, s3;
        connect_pair(cli, srv, "198.18.0.2", 7003, &c3, &s3);
        CHECK(nf_setsockopt(cli, c3, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
        const size_t total = 200 * 1024;
        size_t sent = 0, got3 = 0;
        unsigned long long lent3 = 0, done3 = 0, bytes3 = 0;
        int count = 0, dropped = 0;
        for (int rounds = 0; got3 < total || done3 < lent3; rounds++) {
            CHECK(rounds < 200000);
            int progress = 0;
            if (sent < total) {
                size_t n = total - sent < 20000 ? total - sent : 20000;
                ssize_t w = nf_send_zc(cli, c3, out + sent, n, 0x30000000 + sent, 0);
                if (w > 0) {
                    sent += (size_t)w;
                    lent3++;
                    progress = 1;
                } else {
                    CHECK(w < 0 && errno == EAGAIN);
                }
            }
            progress |= lossy_shuttle(cli, srv, 7, 100, &count, &dropped) > 0;
            size_t before = got3;
            drain(srv, s3, in, sizeof in, &got3);
            progress |= got3 != before;
            int k;
            while ((k = nf_zc_completions(cli, c3, done, 64)) > 0) {
                progress = 1;
                for (int i = 0; i < k; i++) {
                    CHECK(done[i].status == 0 && done[i].fd == c3);
                    CHECK(done[i].cookie >= 0x30000000 && done[i].cookie < 0x30000000 + total);
                    done3++;
                    bytes3 += done[i].len;
                }
            }
            CHECK(k == 0);
            if (!progress) {
                /* Nothing moves at this instant: run both clocks to the earlier timer
                 * (a retransmission, a probe, a delayed ACK). */
                uint64_t ta = 0, tb = 0;
                int ha = nf_clock_next(cli, &ta) == 1, hb = nf_clock_next(srv, &tb) == 1;
                CHECK(ha || hb);
                uint64_t t = ha && hb ? (ta < tb ? ta : tb) : ha ? ta : tb;
                if (t <= nf_clock_now(cli) && t <= nf_clock_now(srv)) t = nf_clock_now(cli) + 1;
                if (t > nf_clock_now(cli)) CHECK(nf_clock_set(cli, t) == 0);
                if (t > nf_clock_now(srv)) CHECK(nf_clock_set(srv, t) == 0);
            }
        }
        CHECK(got3 == total);
        CHECK(memcmp(in, out, total) == 0);
        CHECK(dropped > 0);
        CHECK(done3 == lent3 && bytes3 == total);
        CHECK(nf_zc_completions(cli, c3, done, 64) == 0);
        printf("loss: %d data frames dropped, %llu buffers lent, all completed once\n", dropped,
               lent3);
        CHECK(nf_close(cli, c3) == 0);
        CHECK(nf_close(srv, s3) == 0);
        shuttle(cli, srv);
    }

    /* Errors. */
    CHECK_ERR(nf_send_zc(cli, c, NULL, 10, 1, 0), EFAULT);
    CHECK_ERR(nf_send_zc(cli, c, out, 0, 1, 0), EINVAL);
    CHECK_ERR(nf_send_zc(cli, 999, out, 10, 1, 0), EBADF);
    CHECK_ERR(nf_send_zc(cli, c, out, 10, 1, MSG_OOB), EOPNOTSUPP);
    CHECK_ERR(nf_sendfile_zc(cli, c, -1, 0, 10, 1, 0), EBADF);
    CHECK_ERR(nf_zc_completions(cli, 999, done, 4), EBADF);
    CHECK_ERR(nf_zc_completions(cli, c, NULL, 4), EFAULT);
    int u = nf_socket(cli, AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(nf_send_zc(cli, u, out, 10, 1, 0), EOPNOTSUPP);
    CHECK(nf_close(cli, u) == 0);

    /* Reset with buffers outstanding: lend without delivering, then the server resets and the
     * client closes its descriptor; the completions still come, unacknowledged. */
    int c2, s2;
    connect_pair(cli, srv, "198.18.0.2", 7002, &c2, &s2);
    int n2 = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(nf_send_zc(cli, c2, out + i * 1000, 1000, 100 + i, 0) == 1000);
        n2++;
    }
    /* Drop what the client sent. */
    unsigned char frame[2048];
    while (nf_take(cli, frame, sizeof frame) > 0) {}
    struct linger lg = {1, 0};
    CHECK(nf_setsockopt(srv, s2, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    CHECK(nf_close(srv, s2) == 0); /* RST */
    shuttle(cli, srv);
    CHECK(nf_close(cli, c2) == 0);
    int k = nf_zc_completions(cli, -1, done, 64);
    CHECK(k == n2);
    for (int i = 0; i < k; i++) {
        CHECK(done[i].cookie == (uint64_t)(100 + i));
        CHECK(done[i].status == ECONNABORTED);
        CHECK(done[i].fd == c2 && done[i].len == 1000);
    }
    CHECK(nf_zc_completions(cli, -1, done, 64) == 0);
    printf("reset: %d buffers completed with ECONNABORTED after nf_close\n", k);

    CHECK(nf_close(cli, c) == 0);
    CHECK(nf_close(srv, s) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    return 0;
}
