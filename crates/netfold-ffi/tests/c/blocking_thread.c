/* A blocking read on a MANUAL-clock stack sleeps until another thread's nf_inject delivers
 * data; a blocking accept likewise; SO_RCVTIMEO expires on the manual clock. */
#define _GNU_SOURCE
#include "nftest.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static nf_stack *cli, *srv;
static int sfd;
static atomic_int stage;
static char got[64];
static ssize_t got_n;
static int got_errno;

static void *reader(void *arg) {
    (void)arg;
    atomic_store(&stage, 1);
    errno = 0;
    got_n = nf_read(srv, sfd, got, sizeof got); /* blocks: nothing has arrived yet */
    got_errno = errno;
    atomic_store(&stage, 2);
    return NULL;
}

static void *timed_reader(void *arg) {
    (void)arg;
    struct timeval tv = {0, 300000};
    CHECK(nf_setsockopt(srv, sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    atomic_store(&stage, 3);
    errno = 0;
    got_n = nf_read(srv, sfd, got, sizeof got);
    got_errno = errno;
    atomic_store(&stage, 4);
    return NULL;
}

static int poll_result;
static short poll_revents;
static int poll_timeout;

static void *poller(void *arg) {
    (void)arg;
    struct pollfd p = {sfd, POLLIN, 0};
    atomic_store(&stage, 5);
    poll_result = nf_poll(srv, &p, 1, poll_timeout);
    poll_revents = p.revents;
    atomic_store(&stage, 6);
    return NULL;
}

static void *waitall_reader(void *arg) {
    (void)arg;
    atomic_store(&stage, 7);
    got_n = nf_recv(srv, sfd, got, 10, MSG_WAITALL);
    got_errno = errno;
    atomic_store(&stage, 8);
    return NULL;
}

static int cfd_linger;
static int close_result;

static void *lingering_closer(void *arg) {
    (void)arg;
    atomic_store(&stage, 9);
    close_result = nf_close(cli, cfd_linger);
    atomic_store(&stage, 10);
    return NULL;
}

static void pause_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void) {
    cli = make_stack("198.18.0.1/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    srv = make_stack("198.18.0.2/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    int c;
    connect_pair(cli, srv, "198.18.0.2", 9000, &c, &sfd);
    CHECK(nf_fcntl(srv, sfd, F_SETFL, 0) == 0); /* blocking again */
    /* Without TCP_NODELAY, Nagle would hold a second small write until the first is ACKed,
     * and the delayed ACK waits for the manual clock: correct, but not what is tested here. */
    int one = 1;
    CHECK(nf_setsockopt(cli, c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
    while (atomic_load(&stage) < 1) sched_yield();
    /* Give the reader time to block (the assertions do not depend on it having blocked). */
    pause_ms(50);
    CHECK(atomic_load(&stage) == 1); /* still waiting: nothing can happen between calls */
    CHECK(nf_write(cli, c, "wake up", 7) == 7);
    shuttle(cli, srv); /* this thread's nf_inject makes the data readable and wakes the reader */
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(got_n == 7 && memcmp(got, "wake up", 7) == 0);

    /* SO_RCVTIMEO on the manual clock: the read gives up only when time is moved past it. */
    CHECK(nf_clock_set(srv, 1000000) == 0);
    CHECK(pthread_create(&t, NULL, timed_reader, NULL) == 0);
    while (atomic_load(&stage) < 3) sched_yield();
    pause_ms(50);
    CHECK(atomic_load(&stage) == 3);
    CHECK(nf_clock_set(srv, 1200000) == 0); /* 200 ms: not yet */
    pause_ms(50);
    CHECK(atomic_load(&stage) == 3);
    CHECK(nf_clock_set(srv, 1400000) == 0); /* past 300 ms */
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(got_n == -1 && got_errno == EAGAIN);

    /* nf_poll with no timeout sleeps until another thread's nf_inject makes the socket
     * readable. */
    poll_timeout = -1;
    CHECK(pthread_create(&t, NULL, poller, NULL) == 0);
    while (atomic_load(&stage) < 5) sched_yield();
    pause_ms(50);
    CHECK(atomic_load(&stage) == 5);
    CHECK(nf_write(cli, c, "x", 1) == 1);
    shuttle(cli, srv);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(poll_result == 1 && poll_revents == POLLIN);
    CHECK(nf_read(srv, sfd, got, sizeof got) == 1);

    /* nf_poll with a timeout ends when the manual clock passes it, not in wall time. */
    poll_timeout = 500;
    CHECK(pthread_create(&t, NULL, poller, NULL) == 0);
    while (atomic_load(&stage) < 5) sched_yield();
    pause_ms(50);
    CHECK(atomic_load(&stage) == 5);
    CHECK(nf_clock_set(srv, 1900001) == 0); /* 1.4 s + 500 ms + 1 us */
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(poll_result == 0 && poll_revents == 0);

    /* MSG_WAITALL: the read returns only once all 10 bytes have arrived, in two pieces. */
    struct timeval none = {0, 0};
    CHECK(nf_setsockopt(srv, sfd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none) == 0);
    CHECK(pthread_create(&t, NULL, waitall_reader, NULL) == 0);
    while (atomic_load(&stage) < 7) sched_yield();
    CHECK(nf_write(cli, c, "01234", 5) == 5);
    shuttle(cli, srv);
    pause_ms(50);
    CHECK(atomic_load(&stage) == 7); /* 5 of 10 bytes: still waiting */
    CHECK(nf_write(cli, c, "56789", 5) == 5);
    shuttle(cli, srv);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(got_n == 10 && memcmp(got, "0123456789", 10) == 0);

    /* SO_LINGER {1, 5}: a blocking close waits until the peer has acknowledged the FIN. */
    struct linger lg = {1, 5};
    CHECK(nf_setsockopt(cli, c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    CHECK(nf_fcntl(cli, c, F_SETFL, 0) == 0);
    cfd_linger = c;
    CHECK(pthread_create(&t, NULL, lingering_closer, NULL) == 0);
    while (atomic_load(&stage) < 9) sched_yield();
    pause_ms(50);
    CHECK(atomic_load(&stage) == 9); /* the FIN waits in the client's queue: still lingering */
    shuttle(cli, srv);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(close_result == 0);
    CHECK(nf_read(srv, sfd, got, sizeof got) == 0);
    CHECK(nf_close(srv, sfd) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("blocking_thread: ok");
    return 0;
}
