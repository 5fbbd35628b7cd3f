/* sendmmsg, recvmmsg and splice on a netfold TCP socket, against a kernel echo server.
 * argv: address, port. Every byte is checked. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    exit(1);
}

static unsigned char pat(long i, int k) { return (unsigned char)((i * (2 * k + 3) + k) % 251); }

static void fill(unsigned char *b, size_t n, long off, int k) {
    for (size_t i = 0; i < n; i++) b[i] = pat(off + (long)i, k);
}

static void check(const unsigned char *b, size_t n, long off, int k, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(off + (long)i, k)) {
            fprintf(stderr, "%s: byte %ld differs\n", what, off + (long)i);
            exit(1);
        }
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    alarm(60);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) return 2;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) die("connect");

    /* sendmmsg: three messages of 100, 2000 and 30000 bytes, each counted in msg_len. */
    enum { M = 3 };
    size_t lens[M] = {100, 2000, 30000}, total = 0;
    static unsigned char out[32100], in[32100];
    struct iovec iov[M];
    struct mmsghdr mv[M];
    memset(mv, 0, sizeof mv);
    fill(out, sizeof out, 0, 1);
    for (int i = 0; i < M; i++) {
        iov[i].iov_base = out + total;
        iov[i].iov_len = lens[i];
        mv[i].msg_hdr.msg_iov = &iov[i];
        mv[i].msg_hdr.msg_iovlen = 1;
        total += lens[i];
    }
    int r = sendmmsg(s, mv, M, 0);
    if (r != M) { fprintf(stderr, "sendmmsg returned %d: %s\n", r, strerror(errno)); return 1; }
    for (int i = 0; i < M; i++)
        if (mv[i].msg_len != lens[i]) { fprintf(stderr, "sendmmsg msg_len[%d] = %u\n", i, mv[i].msg_len); return 1; }

    /* recvmmsg with MSG_WAITFORONE until the echo is back: the first receive waits, the
     * others take what is there; each message's count is in msg_len. */
    size_t got = 0;
    int calls = 0;
    while (got < total) {
        struct iovec riov[M];
        struct mmsghdr rv[M];
        memset(rv, 0, sizeof rv);
        /* One buffer per message; message i's bytes follow message i-1's in the stream. */
        unsigned char tmp[M][4096];
        for (int i = 0; i < M; i++) {
            riov[i].iov_base = tmp[i];
            riov[i].iov_len = sizeof tmp[i];
            rv[i].msg_hdr.msg_iov = &riov[i];
            rv[i].msg_hdr.msg_iovlen = 1;
        }
        int k = recvmmsg(s, rv, M, MSG_WAITFORONE, NULL);
        if (k <= 0) { fprintf(stderr, "recvmmsg returned %d: %s\n", k, strerror(errno)); return 1; }
        for (int i = 0; i < k; i++) {
            if (rv[i].msg_len == 0) { fprintf(stderr, "recvmmsg: eof\n"); return 1; }
            if (got + rv[i].msg_len > total) { fprintf(stderr, "recvmmsg: too much\n"); return 1; }
            memcpy(in + got, tmp[i], rv[i].msg_len);
            got += rv[i].msg_len;
        }
        calls++;
    }
    check(in, total, 0, 1, "sendmmsg/recvmmsg echo");

    /* splice pipe -> socket: bytes written into a pipe are spliced to the socket. */
    int p[2];
    if (pipe(p) < 0) die("pipe");
    enum { S = 50000 };
    static unsigned char sb[S], rb[S];
    size_t moved = 0, put = 0;
    fill(sb, S, 0, 2);
    while (moved < S) {
        if (put < S) {
            size_t chunk = S - put < 8192 ? S - put : 8192;
            ssize_t w = write(p[1], sb + put, chunk);
            if (w < 0) die("write pipe");
            put += (size_t)w;
        }
        ssize_t m = splice(p[0], NULL, s, NULL, put - moved, 0);
        if (m <= 0) { fprintf(stderr, "splice pipe->socket returned %zd: %s\n", m, strerror(errno)); return 1; }
        moved += (size_t)m;
    }
    /* splice socket -> pipe: the echo comes back through a pipe. */
    size_t back = 0;
    while (back < S) {
        ssize_t m = splice(s, NULL, p[1], NULL, S - back, 0);
        if (m <= 0) { fprintf(stderr, "splice socket->pipe returned %zd: %s\n", m, strerror(errno)); return 1; }
        for (ssize_t done = 0; done < m;) {
            ssize_t rd = read(p[0], rb + back + done, (size_t)(m - done));
            if (rd <= 0) die("read pipe");
            done += rd;
        }
        back += (size_t)m;
    }
    check(rb, S, 0, 2, "splice echo");

    /* Linux: neither end a pipe is EINVAL; offsets on a socket or pipe are ESPIPE. */
    if (splice(s, NULL, s, NULL, 10, 0) != -1 || errno != EINVAL) { fprintf(stderr, "splice socket->socket: not EINVAL\n"); return 1; }
    loff_t off = 0;
    if (splice(p[0], &off, s, NULL, 10, 0) != -1 || errno != ESPIPE) { fprintf(stderr, "splice with an offset: not ESPIPE\n"); return 1; }
    /* Nothing to splice from a non-blocking socket, or from an empty pipe with
     * SPLICE_F_NONBLOCK: EAGAIN. */
    int fl = fcntl(s, F_GETFL);
    fcntl(s, F_SETFL, fl | O_NONBLOCK);
    if (splice(s, NULL, p[1], NULL, 10, 0) != -1 || errno != EAGAIN) { fprintf(stderr, "splice from a non-blocking socket: not EAGAIN\n"); return 1; }
    fcntl(s, F_SETFL, fl);
    if (splice(p[0], NULL, s, NULL, 10, SPLICE_F_NONBLOCK) != -1 || errno != EAGAIN) { fprintf(stderr, "splice from an empty pipe, SPLICE_F_NONBLOCK: not EAGAIN\n"); return 1; }
    /* recvmmsg with MSG_DONTWAIT and nothing there: -1 EAGAIN. */
    struct iovec one = {.iov_base = in, .iov_len = 16};
    struct mmsghdr rm = {.msg_hdr = {.msg_iov = &one, .msg_iovlen = 1}};
    if (recvmmsg(s, &rm, 1, MSG_DONTWAIT, NULL) != -1 || errno != EAGAIN) { fprintf(stderr, "recvmmsg dontwait: not EAGAIN\n"); return 1; }
    close(s);
    printf("mmsg ok: %zu bytes in %d recvmmsg calls, %d bytes spliced each way\n", total, calls, S);
    return 0;
}
