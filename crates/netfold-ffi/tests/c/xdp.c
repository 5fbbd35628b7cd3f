/* nf_config.device "xdp:IFNAME": run by tests/c_api.rs inside a throw-away namespace
 * (`ip netns exec`) holding one end of a veth pair (argv[1], no kernel address); the other
 * end is the kernel's, in a second namespace, at 198.18.53.1/24 with an echo server on port
 * 7. The stack (198.18.53.2) opens an AF_XDP socket on argv[1], connects, and sends CHUNKS
 * distinct chunks, reading each one's echo back before the next and checking it byte for
 * byte. Every wait is bounded (SO_RCVTIMEO / SO_SNDTIMEO). Without AF_XDP (not root, or a
 * kernel without it) it prints SKIPPED and exits 0. */
#define _GNU_SOURCE
#include "nftest.h"
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CHUNK 1000
#define CHUNKS 200

int main(int argc, char **argv) {
    CHECK(argc == 2);
    char dev[64];
    CHECK(snprintf(dev, sizeof dev, "xdp:%s", argv[1]) < (int)sizeof dev);
    nf_config c;
    nf_config_init(&c);
    c.address = "198.18.53.2/24";
    c.device = dev;
    nf_stack *s = nf_stack_new(&c);
    if (s == NULL && (errno == EPERM || errno == EAFNOSUPPORT || errno == ENOPROTOOPT)) {
        printf("SKIPPED: no AF_XDP here (errno %d: %s)\n", errno, strerror(errno));
        return 0;
    }
    CHECK(s != NULL);
    /* A spec the AF_XDP parser refuses, and an interface that does not exist. */
    nf_config bad = c;
    bad.device = "xdp:@1";
    CHECK(nf_stack_new(&bad) == NULL && errno == EINVAL);
    bad.device = "xdp:nf-no-such-if";
    CHECK(nf_stack_new(&bad) == NULL && errno == ENODEV);

    int fd = nf_socket(s, AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct timeval tv = {20, 0};
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    CHECK(nf_setsockopt(s, fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
    struct sockaddr_in to = sin_of("198.18.53.1", 7);
    CHECK(nf_connect(s, fd, (struct sockaddr *)&to, sizeof to) == 0);
    static unsigned char out[CHUNK], in[CHUNK];
    uint32_t x = 2654435761u;
    for (int k = 0; k < CHUNKS; k++) {
        for (size_t i = 0; i < CHUNK; i++) {
            x = x * 1103515245u + 12345u;
            out[i] = (unsigned char)(x >> 16);
        }
        CHECK(nf_write(s, fd, out, CHUNK) == CHUNK);
        size_t got = 0;
        while (got < CHUNK) {
            ssize_t n = nf_read(s, fd, in + got, CHUNK - got);
            CHECK(n > 0);
            got += (size_t)n;
        }
        CHECK(memcmp(in, out, CHUNK) == 0);
    }
    CHECK(nf_shutdown(s, fd, SHUT_WR) == 0);
    CHECK(nf_read(s, fd, in, sizeof in) == 0);
    CHECK(nf_close(s, fd) == 0);
    nf_stack_free(s);
    printf("xdp: %d chunks of %d bytes echoed over %s\n", CHUNKS, CHUNK, dev);
    return 0;
}
