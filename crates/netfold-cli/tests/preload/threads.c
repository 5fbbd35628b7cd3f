/* Several threads calling netfold at once. argv: address, port, mode.
 * mode "conns": THREADS threads, each with its own connection to the kernel peer (an echo
 * server): each sends ROUNDS blocks of a pattern of its own and reads each block back whole,
 * byte-checked.
 * mode "epoll": CONNS non-blocking connections on which the peer sends BULK bytes of a
 * pattern and closes; THREADS threads share one epoll (EPOLLONESHOT, re-armed after each
 * read) and check every byte at its offset. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 200
#define BLOCK 3000
#define CONNS 8
#define BULK (256 * 1024)

static struct sockaddr_in peer;

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    exit(1);
}

static unsigned char pat(long i, int k) { return (unsigned char)((i * (2 * k + 3) + k) % 251); }

static int dial(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (connect(s, (struct sockaddr *)&peer, sizeof peer) < 0) die("connect");
    return s;
}

static void *echo_thread(void *arg) {
    int k = (int)(long)arg, s = dial();
    unsigned char out[BLOCK], in[BLOCK];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BLOCK; i++) out[i] = pat((long)r * BLOCK + i, k);
        for (size_t done = 0; done < BLOCK;) {
            ssize_t n = write(s, out + done, BLOCK - done);
            if (n <= 0) die("write");
            done += n;
        }
        for (size_t got = 0; got < BLOCK;) {
            ssize_t n = read(s, in + got, BLOCK - got);
            if (n < 0) die("read");
            if (n == 0) { fprintf(stderr, "thread %d: eof in round %d\n", k, r); exit(1); }
            got += n;
        }
        if (memcmp(in, out, BLOCK) != 0) { fprintf(stderr, "thread %d: round %d differs\n", k, r); exit(1); }
    }
    close(s);
    return NULL;
}

static int ep;
static int fds[CONNS];
static long offs[CONNS];
static atomic_int open_conns = CONNS;

static void *epoll_thread(void *arg) {
    (void)arg;
    unsigned char buf[16384];
    while (atomic_load(&open_conns) > 0) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, 100);
        if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        if (n == 0) continue;
        int c = (int)ev.data.u32;
        for (;;) {
            ssize_t got = read(fds[c], buf, sizeof buf);
            if (got < 0) {
                if (errno != EAGAIN) die("read");
                struct epoll_event re = {.events = EPOLLIN | EPOLLONESHOT, .data.u32 = (unsigned)c};
                if (epoll_ctl(ep, EPOLL_CTL_MOD, fds[c], &re) < 0) die("epoll_ctl MOD");
                break;
            }
            if (got == 0) {
                if (offs[c] != BULK) { fprintf(stderr, "conn %d: eof at %ld\n", c, offs[c]); exit(1); }
                atomic_fetch_sub(&open_conns, 1);
                break;
            }
            for (ssize_t i = 0; i < got; i++)
                if (buf[i] != pat(offs[c] + i, c)) { fprintf(stderr, "conn %d: byte %ld differs\n", c, offs[c] + i); exit(1); }
            offs[c] += got;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: mt ADDR PORT conns|epoll\n"); return 2; }
    peer.sin_family = AF_INET;
    peer.sin_port = htons((unsigned short)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1) return 2;
    alarm(60);
    pthread_t t[THREADS];
    if (strcmp(argv[3], "conns") == 0) {
        for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, echo_thread, (void *)i);
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
        printf("conns ok: %d threads x %d bytes echoed\n", THREADS, ROUNDS * BLOCK);
        return 0;
    }
    ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    for (int c = 0; c < CONNS; c++) {
        fds[c] = dial();
        /* The peer tells the connections apart by this first byte. */
        unsigned char id = (unsigned char)c;
        if (write(fds[c], &id, 1) != 1) die("write id");
        fcntl(fds[c], F_SETFL, fcntl(fds[c], F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u32 = (unsigned)c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[c], &ev) < 0) die("epoll_ctl ADD");
    }
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, epoll_thread, NULL);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("epoll ok: %d connections x %d bytes over %d threads\n", CONNS, BULK, THREADS);
    return 0;
}
