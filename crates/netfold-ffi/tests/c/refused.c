/* Connecting to a port nobody listens on: ECONNREFUSED, both from a non-blocking connect (via
 * poll and SO_ERROR) and from a blocking connect in another thread. */
#include "nftest.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static nf_stack *cli, *srv;
static atomic_int done;
static int result, result_errno;

static void *blocking_connect(void *arg) {
    (void)arg;
    int c = nf_socket(cli, AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 4444);
    errno = 0;
    result = nf_connect(cli, c, (struct sockaddr *)&a, sizeof a);
    result_errno = errno;
    CHECK(nf_close(cli, c) == 0);
    atomic_store(&done, 1);
    return NULL;
}

int main(void) {
    cli = make_stack("198.18.0.1/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    srv = make_stack("198.18.0.2/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);

    int c = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 4444);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    CHECK(shuttle(cli, srv) == 2); /* SYN, RST */
    struct pollfd p = {c, POLLOUT, 0};
    CHECK(nf_poll(cli, &p, 1, 0) == 1);
    CHECK(p.revents & POLLERR);
    int err = 0;
    socklen_t el = sizeof err;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
    CHECK(err == ECONNREFUSED);
    /* SO_ERROR is cleared by reading it. */
    el = sizeof err;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
    /* A new attempt on the same socket after the failure is allowed, and refused again. */
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    shuttle(cli, srv);
    char b[4];
    CHECK_ERR(nf_read(cli, c, b, sizeof b), ECONNREFUSED);
    CHECK(nf_close(cli, c) == 0);

    /* Blocking connect: the other thread waits until this thread carries the RST to it. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, blocking_connect, NULL) == 0);
    for (long i = 0; !atomic_load(&done); i++) {
        CHECK(i < 50 * 1000 * 1000);
        shuttle(cli, srv);
        sched_yield();
    }
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(result == -1 && result_errno == ECONNREFUSED);

    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("refused: ok");
    return 0;
}
