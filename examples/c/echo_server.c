/*
 * echo_server.c - a TCP echo server on netfold over a TAP device, written with the BSD-like
 * calls of <netfold.h>. One connection at a time is simple; this one serves many with nf_poll.
 *
 * Build (from the repository root):
 *   cargo build --release -p netfold-ffi
 *   gcc -O2 -Iinclude examples/c/echo_server.c -o echo_server \
 *       target/release/libnetfold.a -lpthread -ldl -lm
 * Run (needs CAP_NET_ADMIN to create the TAP "nf0", or a TAP made beforehand with
 * `ip tuntap add nf0 mode tap user $USER`); then give the kernel's side an address:
 *   ./echo_server 198.18.0.2/24 7 [tap:nf0] &
 *   ip addr add 198.18.0.1/24 dev nf0 && ip link set nf0 up
 *   nc 198.18.0.2 7
 */
#include <netfold.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLIENTS 64

int main(int argc, char **argv) {
    const char *address = argc > 1 ? argv[1] : "198.18.0.2/24";
    int port = argc > 2 ? atoi(argv[2]) : 7;
    const char *device = argc > 3 ? argv[3] : "tap:nf0";

    nf_config cfg;
    nf_config_init(&cfg);
    cfg.address = address;
    cfg.device = device;
    cfg.clock = NF_CLOCK_REAL; /* the library runs the stack on its own thread */
    nf_stack *s = nf_stack_new(&cfg);
    if (!s) {
        fprintf(stderr, "nf_stack_new(%s): %s\n", device, strerror(errno));
        return 1;
    }

    int l = nf_socket(s, AF_INET, SOCK_STREAM, 0);
    int one = 1;
    nf_setsockopt(s, l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (l < 0 || nf_bind(s, l, (struct sockaddr *)&a, sizeof a) < 0 || nf_listen(s, l, 16) < 0) {
        fprintf(stderr, "listen on port %d: %s\n", port, strerror(errno));
        nf_stack_free(s);
        return 1;
    }
    printf("echo server on %s port %d\n", address, port);

    struct pollfd fds[1 + MAX_CLIENTS];
    nfds_t n = 1;
    fds[0].fd = l;
    fds[0].events = POLLIN;
    char buf[16384];
    for (;;) {
        if (nf_poll(s, fds, n, -1) < 0) {
            perror("nf_poll");
            break;
        }
        for (nfds_t i = 1; i < n; i++) {
            if (!fds[i].revents) continue;
            ssize_t r = nf_recv(s, fds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0) {
                /* A blocking send queues everything (or fails); no SIGPIPE either way. */
                if (nf_send(s, fds[i].fd, buf, (size_t)r, MSG_NOSIGNAL) == r) continue;
            } else if (r < 0 && errno == EAGAIN) {
                continue;
            }
            nf_close(s, fds[i].fd); /* end of stream or error */
            fds[i] = fds[--n];
            i--;
        }
        if (fds[0].revents & POLLIN) {
            int c = nf_accept(s, l, NULL, NULL);
            if (c < 0) continue;
            if (n == 1 + MAX_CLIENTS) {
                nf_close(s, c);
                continue;
            }
            fds[n].fd = c;
            fds[n].events = POLLIN;
            fds[n].revents = 0;
            n++;
        }
    }
    nf_close(s, l);
    nf_stack_free(s);
    return 0;
}
