/* Non-blocking connect followed by nf_poll, then readiness through the connection's life. */
#include "nftest.h"

int main(void) {
    nf_stack *cli = make_stack("198.18.0.1/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    nf_stack *srv = make_stack("198.18.0.2/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);
    int l = listen_on(srv, 80);

    int c = nf_socket(cli, AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0);
    CHECK(nf_fcntl(cli, c, F_SETFL, O_NONBLOCK) == 0);
    struct sockaddr_in a = sin_of("198.18.0.2", 80);
    CHECK_ERR(nf_connect(cli, c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);

    /* Handshake not done: neither writable nor readable, and a timed poll expires on the
     * manual clock only (timeout 0 here, so it returns at once). */
    struct pollfd p[2] = {{c, POLLOUT | POLLIN, 0}, {l, POLLIN, 0}};
    CHECK(nf_poll(cli, p, 1, 0) == 0 && p[0].revents == 0);
    CHECK(nf_poll(srv, &p[1], 1, 0) == 0 && p[1].revents == 0);

    /* The SYN is waiting in the client's outbound queue. */
    unsigned char f[2048];
    ssize_t n = nf_take(cli, f, sizeof f);
    CHECK(n >= 40);
    CHECK((f[0] >> 4) == 4 && f[9] == IPPROTO_TCP);
    size_t ihl = (size_t)(f[0] & 15) * 4;
    CHECK(f[ihl + 13] == 0x02); /* SYN only */
    CHECK(nf_inject(srv, f, (size_t)n) == 0);
    shuttle(cli, srv);

    CHECK(nf_poll(cli, p, 1, 0) == 1);
    CHECK(p[0].revents == POLLOUT);
    CHECK(nf_poll(srv, &p[1], 1, 0) == 1 && p[1].revents == POLLIN);
    int err = -1;
    socklen_t el = sizeof err;
    CHECK(nf_getsockopt(cli, c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
    int s = nf_accept(srv, l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(nf_poll(srv, &p[1], 1, 0) == 0);

    /* Data makes the server readable; POLLOUT only when asked for. */
    struct pollfd ps = {s, POLLIN, 0};
    CHECK(nf_poll(srv, &ps, 1, 0) == 0);
    CHECK(nf_send(cli, c, "ping", 4, MSG_NOSIGNAL) == 4);
    shuttle(cli, srv);
    CHECK(nf_poll(srv, &ps, 1, 0) == 1 && ps.revents == POLLIN);
    char buf[8];
    CHECK(nf_read(srv, s, buf, sizeof buf) == 4);

    /* Peer close: readable (EOF); our close: hang-up once both sides are done. */
    CHECK(nf_close(cli, c) == 0);
    shuttle(cli, srv);
    ps.events = POLLIN | POLLOUT;
    CHECK(nf_poll(srv, &ps, 1, 0) == 1 && (ps.revents & POLLIN));
    CHECK(nf_read(srv, s, buf, sizeof buf) == 0);
    CHECK(nf_shutdown(srv, s, SHUT_RDWR) == 0);
    shuttle(cli, srv);
    CHECK(nf_poll(srv, &ps, 1, 0) == 1 && (ps.revents & POLLHUP));

    /* Unknown descriptors are POLLNVAL; negative ones are skipped. */
    struct pollfd bad[2] = {{999, POLLIN, 0}, {-1, POLLIN, 0}};
    CHECK(nf_poll(srv, bad, 2, 0) == 1);
    CHECK(bad[0].revents == POLLNVAL && bad[1].revents == 0);

    /* A poll with a timeout on a manual clock wakes when the clock passes it. */
    struct pollfd pl = {l, POLLIN, 0};
    CHECK(nf_poll(srv, &pl, 1, 0) == 0);
    CHECK(nf_close(srv, s) == 0);
    CHECK(nf_close(srv, l) == 0);

    /* The backlog bounds what waits for accept, even when poll keeps looking at the queue:
     * five clients, backlog 1 -> at most two established and waiting (Linux: backlog + 1). */
    int l1 = nf_socket(srv, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a81 = sin_of("0.0.0.0", 81);
    CHECK(nf_bind(srv, l1, (struct sockaddr *)&a81, sizeof a81) == 0);
    CHECK(nf_listen(srv, l1, 1) == 0);
    int cs[5];
    struct sockaddr_in to81 = sin_of("198.18.0.2", 81);
    for (int i = 0; i < 5; i++) {
        cs[i] = nf_socket(cli, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        CHECK_ERR(nf_connect(cli, cs[i], (struct sockaddr *)&to81, sizeof to81), EINPROGRESS);
        shuttle(cli, srv);
        struct pollfd pl1 = {l1, POLLIN, 0};
        CHECK(nf_poll(srv, &pl1, 1, 0) == 1);
    }
    int accepted = 0;
    while (nf_accept(srv, l1, NULL, NULL) >= 0) accepted++;
    CHECK(errno == EAGAIN);
    printf("accepted %d of 5 with backlog 1\n", accepted);
    CHECK(accepted >= 1 && accepted <= 2);
    for (int i = 0; i < 5; i++) CHECK(nf_close(cli, cs[i]) == 0);
    CHECK(nf_close(srv, l1) == 0);
    nf_stack_free(cli);
    nf_stack_free(srv);
    puts("nbconnect_poll: ok");
    return 0;
}
