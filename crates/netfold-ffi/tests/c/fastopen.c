/* TCP Fast Open through the C API (server side): the options' errors, then hand-made SYNs
 * injected into a MANUAL-clock IP stack: a cookie request gets the cookie in the SYN-ACK, and
 * that cookie on a SYN with data makes nf_accept return a connection whose data nf_read
 * returns before the handshake's last ACK; the SYN-ACK acknowledges the data. */
#include "nftest.h"

#define SRV "198.18.0.1"
#define CLI "198.18.0.2"
#define PORT 8080

static uint16_t csum_add(uint32_t sum, const uint8_t *p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t)(p[i] << 8 | p[i + 1]);
    if (n & 1) sum += (uint32_t)(p[n - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

/* An IPv4 SYN from CLI:sport to SRV:PORT with MSS 1460 and a Fast Open option (kind 34)
 * carrying `cookie` (clen bytes, 0 = request), and `dlen` bytes of data. */
static size_t make_syn(uint8_t *pkt, uint16_t sport, uint32_t seq, const uint8_t *cookie,
                       size_t clen, const char *data, size_t dlen) {
    uint8_t opt[40];
    size_t ol = 0;
    opt[ol++] = 2; opt[ol++] = 4; opt[ol++] = 1460 >> 8; opt[ol++] = 1460 & 0xff;
    opt[ol++] = 34; opt[ol++] = (uint8_t)(2 + clen);
    memcpy(opt + ol, cookie, clen);
    ol += clen;
    while (ol % 4) opt[ol++] = 1;
    size_t thl = 20 + ol, tot = 20 + thl + dlen;
    memset(pkt, 0, tot);
    uint8_t *ip = pkt, *tcp = pkt + 20;
    ip[0] = 0x45; ip[2] = (uint8_t)(tot >> 8); ip[3] = (uint8_t)tot; ip[8] = 64; ip[9] = 6;
    CHECK(inet_pton(AF_INET, CLI, ip + 12) == 1);
    CHECK(inet_pton(AF_INET, SRV, ip + 16) == 1);
    uint16_t ic = (uint16_t)~csum_add(0, ip, 20);
    ip[10] = (uint8_t)(ic >> 8); ip[11] = (uint8_t)ic;
    tcp[0] = (uint8_t)(sport >> 8); tcp[1] = (uint8_t)sport;
    tcp[2] = PORT >> 8; tcp[3] = PORT & 0xff;
    tcp[4] = (uint8_t)(seq >> 24); tcp[5] = (uint8_t)(seq >> 16); tcp[6] = (uint8_t)(seq >> 8);
    tcp[7] = (uint8_t)seq;
    tcp[12] = (uint8_t)((thl / 4) << 4); tcp[13] = 0x02; /* SYN */
    tcp[14] = 0xff; tcp[15] = 0xff;
    memcpy(tcp + 20, opt, ol);
    memcpy(tcp + thl, data, dlen);
    uint8_t ph[12];
    memcpy(ph, ip + 12, 8);
    ph[8] = 0; ph[9] = 6; ph[10] = (uint8_t)((thl + dlen) >> 8); ph[11] = (uint8_t)(thl + dlen);
    uint16_t tc = (uint16_t)~csum_add(csum_add(0, ph, 12), tcp, thl + dlen);
    tcp[16] = (uint8_t)(tc >> 8); tcp[17] = (uint8_t)tc;
    return tot;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Takes the server's SYN-ACK: its ACK number and, in cookie[] (*clen bytes, -1 if absent),
 * its Fast Open option. */
static uint32_t take_synack(nf_stack *s, uint8_t *cookie, int *clen) {
    uint8_t b[2048];
    ssize_t n = nf_take(s, b, sizeof b);
    CHECK(n > 40);
    const uint8_t *tcp = b + 20;
    CHECK((tcp[13] & 0x12) == 0x12); /* SYN, ACK */
    size_t thl = (size_t)(tcp[12] >> 4) * 4;
    *clen = -1;
    for (size_t i = 20; i < thl;) {
        uint8_t k = tcp[i];
        if (k == 0) break;
        if (k == 1) { i++; continue; }
        uint8_t l = tcp[i + 1];
        CHECK(l >= 2 && i + l <= thl);
        if (k == 34) {
            *clen = l - 2;
            memcpy(cookie, tcp + i + 2, (size_t)(l - 2));
        }
        i += l;
    }
    CHECK(nf_take(s, b, sizeof b) == -1 && errno == EAGAIN);
    return be32(tcp + 8);
}

int main(void) {
    nf_stack *s = make_stack(SRV "/24", NF_MEDIUM_IP, NF_CLOCK_MANUAL);

    /* Errors of the stack-wide setters and the socket options. */
    CHECK_ERR(nf_set_tcp_fastopen(s, -1), EINVAL);
    CHECK_ERR(nf_set_tcp_fastopen_key(s, NULL, 16), EFAULT);
    uint8_t key[32] = {0};
    CHECK_ERR(nf_set_tcp_fastopen_key(s, key, 15), EINVAL);
    CHECK(nf_set_tcp_fastopen_key(s, key, 16) == 0);
    CHECK(nf_set_tcp_fastopen_key(s, key, 32) == 0);
    CHECK(nf_set_tcp_fastopen(s, 3) == 0);

    int l = nf_socket(s, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(l >= 0);
    int v = -1;
    CHECK_ERR(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN, &v, sizeof v), EINVAL);
    v = 100000;
    CHECK(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN, &v, sizeof v) == 0);
    socklen_t vl = sizeof v;
    CHECK(nf_getsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN, &v, &vl) == 0 && v == 4096);
    v = 4;
    CHECK(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN, &v, sizeof v) == 0);
    CHECK_ERR(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN_KEY, key, 0), EINVAL);
    CHECK_ERR(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN_KEY, key, 17), EINVAL);
    CHECK_ERR(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN_KEY, key, 100000), EINVAL);
    CHECK(nf_setsockopt(s, l, IPPROTO_TCP, TCP_FASTOPEN_KEY, key, 16) == 0);
    struct sockaddr_in a = sin_of(SRV, PORT);
    CHECK(nf_bind(s, l, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(nf_listen(s, l, 8) == 0);

    /* A cookie request: the normal handshake, the cookie in the SYN-ACK. */
    uint8_t pkt[2048], cookie[40];
    int clen;
    size_t n = make_syn(pkt, 40000, 1000, NULL, 0, "", 0);
    CHECK(nf_inject(s, pkt, n) == 0);
    CHECK(take_synack(s, cookie, &clen) == 1001);
    CHECK(clen == 8);
    CHECK_ERR(nf_accept(s, l, NULL, NULL), EAGAIN);

    /* The cookie with data: accepted at once, the data readable, the SYN-ACK acks it. */
    const char *req = "GET / HTTP/1.0\r\n\r\n";
    n = make_syn(pkt, 40001, 5000, cookie, 8, req, strlen(req));
    CHECK(nf_inject(s, pkt, n) == 0);
    uint8_t none[40];
    int nlen;
    CHECK(take_synack(s, none, &nlen) == 5001 + strlen(req));
    CHECK(nlen == -1);
    int c = nf_accept(s, l, NULL, NULL);
    CHECK(c >= 0);
    char buf[64];
    CHECK(nf_read(s, c, buf, sizeof buf) == (ssize_t)strlen(req));
    CHECK(memcmp(buf, req, strlen(req)) == 0);
    /* On a connection the queue length cannot be set. */
    v = 1;
    CHECK_ERR(nf_setsockopt(s, c, IPPROTO_TCP, TCP_FASTOPEN, &v, sizeof v), EINVAL);

    /* A forged cookie: data not acknowledged, the right cookie offered. */
    uint8_t forged[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    n = make_syn(pkt, 40002, 9000, forged, 8, req, strlen(req));
    CHECK(nf_inject(s, pkt, n) == 0);
    uint8_t again[40];
    CHECK(take_synack(s, again, &clen) == 9001);
    CHECK(clen == 8 && memcmp(again, cookie, 8) == 0);

    CHECK(nf_close(s, c) == 0);
    CHECK(nf_close(s, l) == 0);
    nf_stack_free(s);
    puts("fastopen: ok");
    return 0;
}
