/*
 * netfold.h - the C API of netfold, a user-space TCP/IP stack.
 *
 * BSD-socket-like calls on a netfold stack: port a program by renaming socket() to
 * nf_socket(s, ...) and so on. Link with -lnetfold (libnetfold.so or libnetfold.a; the static
 * library also needs -lpthread -ldl -lm).
 *
 * Conventions (as on Linux where it makes sense):
 *  - Failure returns -1 (NULL for nf_stack_new) and sets errno. Notable values: EAGAIN for a
 *    call that would block on a non-blocking descriptor or after SO_RCVTIMEO/SO_SNDTIMEO;
 *    EINPROGRESS for a non-blocking connect (then poll for POLLOUT and read SO_ERROR);
 *    ECONNREFUSED, ECONNRESET, ETIMEDOUT, ENOTCONN, EISCONN, EALREADY, EADDRINUSE,
 *    EADDRNOTAVAIL (bind/listen on an address that is not the stack's), EHOSTUNREACH (a
 *    connect whose next hop never answered ARP: after the ARP retries, ~3 s, as Linux), EBADF, EINVAL, EFAULT (a NULL buffer), EMSGSIZE, ENOPROTOOPT (an option
 *    netfold does not implement), EAFNOSUPPORT (not AF_INET or AF_INET6, or a sockaddr of
 *    the other family), ENETUNREACH (an IPv6 peer while the stack has no IPv6 address; a
 *    v4-mapped peer of an IPV6_V6ONLY socket), EPROTONOSUPPORT / ESOCKTNOSUPPORT (not TCP
 *    or UDP).
 *  - AF_INET6 sockets take and return struct sockaddr_in6 (at least 24 bytes, RFC 2133; the
 *    scope id is read when given). Dual stack as Linux with net.ipv6.bindv6only = 0: an
 *    AF_INET6 socket bound to [::] serves IPv4 too, and reports IPv4 addresses v4-mapped
 *    (::ffff:a.b.c.d) from accept, getsockname, getpeername and recvfrom; an AF_INET6 socket
 *    connecting (TCP) or sending (UDP) to a v4-mapped address runs over IPv4, and a UDP one
 *    also takes a plain sockaddr_in destination (as Linux's udpv6_sendmsg). IPV6_V6ONLY
 *    (level IPPROTO_IPV6, AF_INET6 only, default 0, EINVAL once bound) makes it IPv6-only: a
 *    v4-mapped bind is EINVAL, a v4-mapped peer ENETUNREACH. A dual-stack [::]:p conflicts
 *    with every IPv4 binding of port p (EADDRINUSE), a v6-only one with none. IPv6 peers
 *    are reached once the stack has IPv6 addresses (nf_config.address6) and they passed
 *    Duplicate Address Detection; until then connecting or sending to a real IPv6 peer
 *    fails at once with ENETUNREACH and binding a specific IPv6 address with EADDRNOTAVAIL.
 *    An IPv6-only stack (address NULL) fails IPv4 peers with ENETUNREACH.
 *    TCP_MAXSEG is one user MSS for both families (as Linux): an IPv4 connection uses it
 *    as given (default MTU - 40), an IPv6 one at most the IPv6 link's MSS (MTU - 60), so the
 *    default becomes MTU - 60 over IPv6 and a smaller value applies to both unchanged.
 *  - EPIPE is only an errno: netfold never raises SIGPIPE (MSG_NOSIGNAL is accepted, and moot).
 *  - Descriptors are netfold's own small integers (from 3 up, at most 4096 per stack), valid
 *    only with the nf_stack that made them; they are not kernel file descriptors. nf_socket
 *    takes SOCK_NONBLOCK (and ignores SOCK_CLOEXEC).
 *  - Every call is thread-safe. With NF_CLOCK_REAL the library runs its own thread that handles
 *    injected frames, the device and timers; blocking calls sleep until ready (no spinning),
 *    honouring SO_RCVTIMEO/SO_SNDTIMEO. With NF_CLOCK_MANUAL nothing happens between calls:
 *    time moves only through nf_clock_set, every call runs the stack until it is quiescent
 *    before returning (so nf_inject has processed its frame, and nf_write's segments are ready
 *    for nf_take), and a blocking call waits for another thread's call to make it ready
 *    (timeouts are measured on the manual clock).
 *  - Buffers passed in one iovec array must not overlap. nf_stack_free must not run while
 *    another thread is inside a call on the same stack.
 *  - Options: SO_REUSEADDR, SO_KEEPALIVE, SO_LINGER, SO_RCVBUF, SO_SNDBUF, SO_ERROR, SO_TYPE,
 *    SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN (the last four read-only), SO_RCVLOWAT (TCP), SO_RCVTIMEO, SO_SNDTIMEO, TCP_NODELAY, TCP_CORK,
 *    TCP_MAXSEG, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_SYNCNT, TCP_INFO (read-only), TCP_INQ,
 *    TCP_NOTSENT_LOWAT, TCP_USER_TIMEOUT, IP_MTU_DISCOVER, IP_MTU (read-only, connected
 *    sockets), IPV6_V6ONLY (AF_INET6 sockets), TCP_FASTOPEN, TCP_FASTOPEN_KEY (set only),
 *    TCP_FASTOPEN_CONNECT, TCP_CONGESTION ("cubic", the default, or "reno": NewReno; another
 *    name is ENOENT; a connected socket switches at once, keeping its cwnd and ssthresh, as
 *    Linux does; getsockopt returns the 16-byte NUL-padded name), IP_TOS and IPV6_TCLASS (TCP
 *    sockets; IPV6_TCLASS on AF_INET6 ones),
 *    IP_FREEBIND and IPV6_FREEBIND (one flag, as on Linux: nf_bind then takes an address that
 *    is not the interface's, and packets leave from it), SO_ZEROCOPY (see MSG_ZEROCOPY below
 *    nf_send_zc), SO_MARK (kept and read back; nothing in netfold routes or filters by it),
 *    SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING (receive and transmit timestamps, below).
 *    Software receive timestamps for TCP, as Linux reports them (socket(7),
 *    Documentation/networking/timestamping.rst): with SO_TIMESTAMPING set to
 *    SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE nf_recvmsg adds an
 *    SOL_SOCKET/SCM_TIMESTAMPING message (struct scm_timestamping: ts[0] the time, ts[1] and
 *    ts[2] zero); with SO_TIMESTAMP an SCM_TIMESTAMP (struct timeval) before it, with
 *    SO_TIMESTAMPNS an SCM_TIMESTAMPNS (struct timespec); TCP_CM_INQ comes after them. The
 *    time is when the last byte the call returned (or peeked) arrived: when the stack
 *    processed its frame, frames of one poll sharing that poll's time, and bytes that came
 *    out of order taking the time their hole was filled (Linux keeps each packet's own).
 *    REAL clock: the system's wall clock; MANUAL clock: the manual clock's own value (0 is the
 *    Unix epoch). An accepted socket inherits the options; bytes it received before it was
 *    accepted carry the time of the accept. SO_TIMESTAMP on clears SO_TIMESTAMPNS and either
 *    off clears both, as on Linux. SO_TIMESTAMPING takes the receive and reporting flags
 *    (RX_SOFTWARE, SOFTWARE, RX_HARDWARE, RAW_HARDWARE, OPT_RX_FILTER; no hardware times are
 *    ever produced) and the software transmit flags below; other flags (TX_HARDWARE,
 *    OPT_STATS, ...) are EINVAL. UDP sockets take the options but get no timestamps.
 *    Software transmit timestamps for TCP, as Linux gives them: with TX_SCHED, TX_SOFTWARE
 *    and/or TX_ACK set, each send that queues at least one byte asks for its last byte's
 *    timestamps; nf_recvmsg(fd, &msg, MSG_ERRQUEUE) then returns one per call: 0 bytes,
 *    msg_flags MSG_ERRQUEUE (and MSG_TRUNC unless OPT_TSONLY is set: Linux would queue a copy
 *    of the packet, netfold keeps none), an SOL_SOCKET/SCM_TIMESTAMPING message (ts[0] the
 *    time, when SOFTWARE is set) and an SOL_IP/IP_RECVERR (SOL_IPV6/IPV6_RECVERR) one with a
 *    sock_extended_err: ee_errno ENOMSG, ee_origin SO_EE_ORIGIN_TIMESTAMPING, ee_info
 *    SCM_TSTAMP_SCHED and SCM_TSTAMP_SND when the byte is first sent (both the time of the
 *    poll that sent it; retransmissions are not stamped), SCM_TSTAMP_ACK when it is
 *    acknowledged, and ee_data the byte's number counted from SND.UNA at the moment OPT_ID
 *    was turned on (0 without OPT_ID; OPT_ID on a listening or unconnected TCP socket is
 *    EINVAL, as on Linux). MSG_ZEROCOPY notifications of the same socket come first;
 *    POLLERR while any waits; EAGAIN when none. Sends with MSG_ZEROCOPY are not stamped.
 *    IP_TOS / IPV6_TCLASS as on Linux: the DSCP bits every segment of the connection carries
 *    from then on (the SYN-ACK of a listener's connections too); the two ECN bits are not the
 *    socket's (ECN sets them per segment) and read back 0; an accepted socket starts with its
 *    listener's value; IPV6_TCLASS -1 means 0, other values outside 0..255 are EINVAL. IPPROTO_IP
 *    options take an int or, when optlen is 1 to 3, one byte.
 *    TCP_FASTOPEN (RFC 7413, server side) as on Linux: on a socket before or after listen,
 *    the number of Fast Open connections that may wait for their handshake's last ACK (capped
 *    at 4096; negative, or on a connected socket, EINVAL); getsockopt returns it. A SYN with
 *    a valid cookie and data is then accepted at once: nf_accept returns the connection with
 *    the data readable before the handshake completes, and the SYN-ACK acknowledges it. A
 *    SYN asking for a cookie, or with an invalid one, gets the normal handshake and the
 *    cookie in the SYN-ACK. TCP_FASTOPEN_KEY: 16 (or 32) bytes, the listener's own cookie key
 *    (see nf_set_tcp_fastopen_key); other lengths EINVAL.
 *    Client side (RFC 7413 §4.1), as on Linux: the stack caches the cookie each server's
 *    SYN-ACK gives (sent back in the option form it came in) and the MSS of every SYN-ACK to
 *    a Fast Open SYN; a cookie request that gets no cookie is followed by one in the
 *    experimental option form, then the RFC form again. nf_sendto/nf_sendmsg with
 *    MSG_FASTOPEN on an unconnected socket
 *    connect to the address given: with a cookie cached the SYN carries it and the first
 *    bytes (up to the MSS less 40) and the call returns them; without one the SYN asks for a
 *    cookie and a non-blocking call fails with EINPROGRESS (a blocking call waits for the
 *    handshake and queues the data); EALREADY while the connection is still opening,
 *    EOPNOTSUPP with the client side off (nf_set_tcp_fastopen). On a connected socket the
 *    flag is ignored. A write on a socket whose SYN is unanswered queues nothing: EAGAIN when
 *    non-blocking, a blocking one waits for the handshake (as any connecting socket). Data
 *    (and a FIN) on a SYN-ACK that acknowledges all of the SYN's data is taken; the part of
 *    the SYN's data a SYN-ACK does not acknowledge is sent again at once. TCP_FASTOPEN_CONNECT (0 or 1; EOPNOTSUPP with the client side off,
 *    EINVAL once connecting): with a cookie cached, nf_connect returns 0 at once, the socket
 *    polls writable, reads EAGAIN, another nf_connect is EISCONN, and the SYN leaves with
 *    the first write's data; without one nf_connect sends a SYN asking for a cookie.
 *    TCP_NOTSENT_LOWAT as on Linux for poll/epoll: a connection reads as writable (POLLOUT)
 *    only while fewer than that many written bytes are still unsent; getsockopt returns the
 *    value set, 0 while unset (no limit, Linux's default sysctl of UINT_MAX). Unlike Linux,
 *    a write is not cut short at the threshold (only by the send buffer).
 *    SO_RCVLOWAT as on Linux for TCP: poll/epoll report POLLIN once that many bytes are
 *    queued (or at end of stream), a blocking read waits for that many (a non-blocking one
 *    returns what is there); 0 means 1, negative INT_MAX, capped at the fixed SO_RCVBUF size
 *    or 3 MiB. Linux grows the receive buffer to fit the mark; netfold does not, and uses at
 *    most the connection's receive buffer as the mark.
 *    TCP_USER_TIMEOUT (milliseconds, 0 = off, negative EINVAL) as on Linux (RFC 5482): once
 *    data has gone unacknowledged that long, the retransmission timer (brought forward to
 *    the deadline) aborts the connection with ETIMEDOUT, in place of the retry-count limit;
 *    zero-window probing that has lasted that long aborts too, answered or not. No RST is
 *    sent. As in Linux, the time counts from the first timer retransmission (a tail loss
 *    probe does not start it), and the first expiry retransmits rather than aborts.
 *    TCP_INQ as on Linux: 0 or 1 (others EINVAL), getsockopt returns the setting; when on,
 *    nf_recvmsg adds a SOL_TCP/TCP_CM_INQ control message (an int: the bytes still queued
 *    after the call, 1 for an empty queue once the peer's FIN arrived), MSG_CTRUNC if
 *    msg_control cannot hold it.
 *    TCP_CORK as on Linux (tcp(7)): partial segments are held until the option is cleared
 *    (which sends them at once) or, with nothing in flight, until the persist timer fires
 *    (max(RTO, 200 ms)); a FIN is never held. Setting TCP_NODELAY sends what is queued at
 *    once, past Nagle and TCP_CORK, as Linux does.
 *    PSH is set as Linux sets it: on the segment that ends each write (not after MSG_MORE),
 *    on the one that ends a MSG_EOR record, and on the last segment of a burst the peer's
 *    window or the congestion window cuts short.
 *    TCP_INFO fills Linux's struct tcp_info (<linux/tcp.h>, 280 bytes as of Linux 6.18; a
 *    shorter buffer such as glibc's <netinet/tcp.h> struct gets its prefix) with Linux's
 *    units: state, ca_state, options, wscales, rto/rtt/rttvar/min_rtt in microseconds, snd_mss/rcv_mss/advmss,
 *    unacked/sacked/lost/retrans and snd_cwnd/snd_ssthresh in segments, bytes_acked,
 *    bytes_received, bytes_sent, bytes_retrans, segs_in/out, data_segs_in/out, total_retrans,
 *    notsent_bytes, snd_wnd, rcv_wnd, total_rto, delivered, reordering, last_data_recv (from
 *    the handshake until data arrives), busy_time, rwnd_limited and sndbuf_limited (Linux's
 *    send chronographs, microseconds). What netfold does not measure (pacing and delivery
 *    rates, rcv_rtt) reads 0.
 *    Others fail with ENOPROTOOPT. IP_MTU_DISCOVER on UDP as Linux (default
 *    IP_PMTUDISC_WANT: DF on datagrams that fit the path MTU, larger ones fragmented;
 *    DONT: no DF; DO: DF, EMSGSIZE beyond the path MTU; PROBE: DF, EMSGSIZE beyond the
 *    interface MTU); TCP keeps the value but always sets DF (segments fit the path MTU).
 *  - A connected UDP socket (nf_connect on SOCK_DGRAM) reports an ICMP port unreachable
 *    from its peer as ECONNREFUSED (host unreachable, or no ARP answer: EHOSTUNREACH) once,
 *    on its next send/recv or SO_ERROR, as Linux. SO_LINGER {1, 0} makes
 *    nf_close reset the connection; {1, t > 0} makes a blocking nf_close wait up to t seconds
 *    for the FIN to be acknowledged (then the close goes on in the background, and nf_close
 *    returns 0 either way). SO_RCVBUF/SO_SNDBUF as on Linux: setting one turns buffer
 *    auto-tuning off for the socket; the value (clamped to 2 KiB..16 MiB) is the ring and
 *    window size, and getsockopt reports it doubled (socket(7)); unset, getsockopt reports
 *    twice the auto-tuned buffer.
 *  - nf_ioctl: FIONREAD, FIONBIO and SIOCOUTQ (== TIOCOUTQ, as in <linux/sockios.h>).
 *  - recv flags: MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC (UDP only) and MSG_PEEK (TCP: the
 *    bytes stay queued; with MSG_WAITALL it waits until all are there); send flags:
 *    MSG_DONTWAIT, MSG_NOSIGNAL, MSG_MORE (TCP: the partial tail waits, as under TCP_CORK,
 *    until the next send without it or the next ACK, and gets no PSH) and MSG_EOR (TCP: later
 *    sends never share a segment with the end of this one). Others: EOPNOTSUPP.
 *
 * Keep in sync with crates/netfold-ffi/src/api.rs (tests compare the declared function names
 * with the library's exports, and nf_config's layout with nf_config_layout()).
 */
#ifndef NETFOLD_H
#define NETFOLD_H

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nf_stack nf_stack;

enum { NF_MEDIUM_ETHERNET = 0, NF_MEDIUM_IP = 1 };   /* IP: frames are bare IPv4 packets */
enum { NF_CLOCK_REAL = 0, NF_CLOCK_MANUAL = 1 };

typedef struct nf_config {
    uint32_t size;            /* sizeof(nf_config), for ABI evolution */
    int medium;
    const char *address;      /* "198.18.0.2/24" (prefix length required) */
    const char *gateway;      /* NULL or "198.18.0.1" */
    uint8_t mac[6];           /* Ethernet only; all zero: 02:00:<IPv4 address> */
    uint32_t mtu;             /* 0 means 1500 */
    int clock;
    const char *device;       /* NULL: frames only via nf_inject/nf_take; "tap:NAME",
                                 "tun:NAME" (NF_MEDIUM_IP), "packet:IFNAME" or
                                 "xdp:IFNAME[@QUEUE][:all]" (AF_XDP on a queue: the frames
                                 for the stack's addresses, or every frame with ":all") */
    /* Added after `device` (a program compiled with the shorter struct passes its smaller
     * size and gets no IPv6): */
    const char *address6;     /* NULL, or IPv6 addresses with prefixes, comma-separated,
                               * e.g. "2001:2::2/64": turns IPv6 on (NDP, DAD for about a
                               * second, ICMPv6 echo; AF_INET6 sockets reach IPv6 peers).
                               * With address NULL the stack is IPv6 only. */
    const char *gateway6;     /* NULL or the default IPv6 router on the link, "fe80::1" */
    /* Added after `gateway6` (a shorter struct gets 2): */
    int tcp_ecn;              /* ECN for TCP, as Linux's net.ipv4.tcp_ecn: 0 off, 1 ask on
                               * connections we open and accept when asked, 2 accept only */
} nf_config;

/* Defaults: Ethernet, "198.18.0.2/24", no gateway, MAC from the address (IPv6 only: from
 * the last four bytes of the first IPv6 address), MTU 1500, NF_CLOCK_REAL, no device, no
 * IPv6, tcp_ecn 2. */
void      nf_config_init(nf_config *cfg);
/* NULL + errno on failure: EINVAL (bad config), or the kernel's errno when the device cannot
 * be opened (EPERM without CAP_NET_ADMIN, ENOENT without /dev/net/tun, ...). "tap:NAME" needs
 * NF_MEDIUM_ETHERNET; NAME may be a pattern such as "nf%d". */
nf_stack *nf_stack_new(const nf_config *cfg);
/* Closing loses nothing. nf_close of a TCP socket sends what is queued and then a FIN, and
 * the connection goes on after the descriptor is gone (an orphan, as in Linux).
 * nf_stack_shutdown closes every descriptor, lets the closed connections deliver their data
 * and FIN while the stack's thread runs, for at most timeout_ms, then ends what is left with
 * a RST (RFC 9293 ABORT: none in CLOSING or LAST-ACK), so that no peer waits for bytes that
 * will never come. It returns the number of connections ended that way (0: everything was
 * delivered), -1 with EINVAL for a negative timeout or a shard's view. The stack stays
 * usable. With NF_CLOCK_MANUAL time does not move during the call: what is left is reset at
 * once and the RSTs wait for nf_take. nf_stack_free does the same with NF_STACK_DRAIN_MS,
 * then stops the thread and frees everything. */
#define NF_STACK_DRAIN_MS 5000
int       nf_stack_shutdown(nf_stack *s, int timeout_ms);
void      nf_stack_free(nf_stack *s);
/* One inbound frame (Ethernet frame or IP packet, per medium). It may exceed the MTU (a
 * device with receive offloads delivers merged segments): EMSGSIZE only beyond a whole IP
 * datagram (65535 bytes plus an Ethernet header with a VLAN tag); ENOBUFS if the inbound
 * queue (1024 frames, REAL clock) is full. */
int       nf_inject(nf_stack *s, const void *frame, size_t len);
/* Next outbound frame: its length, or -1/EAGAIN if none, -1/EMSGSIZE (frame kept) if cap is
 * too small. At most 4096 frames wait; beyond that output is dropped (TCP retransmits). */
ssize_t   nf_take(nf_stack *s, void *buf, size_t cap);
/* MANUAL: advance time to usec (never backwards: EINVAL) and run due work. REAL: EINVAL. */
int       nf_clock_set(nf_stack *s, uint64_t usec);
/* Current stack time in microseconds (REAL: since nf_stack_new). */
uint64_t  nf_clock_now(nf_stack *s);
/* When the stack next needs to run: returns 1 and stores in *usec the stack time (the scale of
 * nf_clock_now/nf_clock_set) of its earliest timer (retransmission, delayed ACK, probe,
 * keepalive, TIME-WAIT, ARP retry, reassembly timeout); never earlier than nf_clock_now (work
 * already due reads as now). Returns 0 (*usec untouched) when no timer is pending: then only
 * nf_inject or a socket call gives the stack work. -1 with EINVAL (NULL s) or EFAULT (NULL
 * usec). A MANUAL-clock loop: `if (nf_clock_next(s, &t) == 1) nf_clock_set(s, t);` between
 * frames; with NF_CLOCK_REAL it is informational (the library's thread keeps the time). */
int       nf_clock_next(nf_stack *s, uint64_t *usec);

/* TCP Fast Open (RFC 7413) for the whole stack, as Linux's sysctls. nf_set_tcp_fastopen takes
 * the bits of net.ipv4.tcp_fastopen: 0x1 client, 0x2 server (a listener with TCP_FASTOPEN
 * set takes Fast Open), 0x200 server takes SYN data without a cookie, 0x400 every listener
 * takes Fast Open (queue = its backlog); the default is 0x3 (Linux's is 0x1), so that
 * TCP_FASTOPEN on a listener is enough. nf_set_tcp_fastopen_key sets the key cookies are made
 * with (net.ipv4.tcp_fastopen_key; its text form's four 32-bit words, each little-endian):
 * 16 bytes, or 32 (primary, then a backup that is still accepted); until set, a key derived
 * from the stack's secret. A socket's TCP_FASTOPEN_KEY overrides it for its listener. -1 with
 * EINVAL (negative flags, key length), EFAULT (NULL key). */
int       nf_set_tcp_fastopen(nf_stack *s, int flags);
/* Whether TCP sockets created from now on offer timestamps (RFC 7323), as Linux's
 * net.ipv4.tcp_timestamps: 1 (the default) or 0; else -1/EINVAL. */
int       nf_set_tcp_timestamps(nf_stack *s, int on);
/* ECN for TCP sockets created from now on, as Linux's net.ipv4.tcp_ecn: 0 off, 1 ask (ECE
 * and CWR on our SYNs) and accept, 2 accept only (the default, nf_config.tcp_ecn); else
 * -1/EINVAL. */
int       nf_set_tcp_ecn(nf_stack *s, int mode);
/* TCP_NOTSENT_LOWAT of TCP sockets created from now on that set none themselves, as Linux's
 * net.ipv4.tcp_notsent_lowat (default UINT32_MAX: no limit). */
int       nf_set_tcp_notsent_lowat(nf_stack *s, uint32_t bytes);
int       nf_set_tcp_fastopen_key(nf_stack *s, const void *key, size_t len);

int nf_socket(nf_stack *s, int domain, int type, int protocol);
int nf_bind(nf_stack *s, int fd, const struct sockaddr *a, socklen_t l);
int nf_listen(nf_stack *s, int fd, int backlog);
int nf_accept(nf_stack *s, int fd, struct sockaddr *a, socklen_t *l);
int nf_connect(nf_stack *s, int fd, const struct sockaddr *a, socklen_t l);
ssize_t nf_read(nf_stack *s, int fd, void *b, size_t n);
ssize_t nf_write(nf_stack *s, int fd, const void *b, size_t n);
ssize_t nf_readv(nf_stack *s, int fd, const struct iovec *iov, int cnt);
ssize_t nf_writev(nf_stack *s, int fd, const struct iovec *iov, int cnt);
ssize_t nf_recv(nf_stack *s, int fd, void *b, size_t n, int flags);
ssize_t nf_send(nf_stack *s, int fd, const void *b, size_t n, int flags);
ssize_t nf_recvfrom(nf_stack *s, int fd, void *b, size_t n, int flags, struct sockaddr *a, socklen_t *l);
ssize_t nf_sendto(nf_stack *s, int fd, const void *b, size_t n, int flags, const struct sockaddr *a, socklen_t l);
ssize_t nf_recvmsg(nf_stack *s, int fd, struct msghdr *m, int flags);
ssize_t nf_sendmsg(nf_stack *s, int fd, const struct msghdr *m, int flags);
int nf_shutdown(nf_stack *s, int fd, int how);
int nf_close(nf_stack *s, int fd);
int nf_getsockopt(nf_stack *s, int fd, int level, int name, void *v, socklen_t *l);
int nf_setsockopt(nf_stack *s, int fd, int level, int name, const void *v, socklen_t l);
int nf_getsockname(nf_stack *s, int fd, struct sockaddr *a, socklen_t *l);
int nf_getpeername(nf_stack *s, int fd, struct sockaddr *a, socklen_t *l);
int nf_fcntl(nf_stack *s, int fd, int cmd, long arg);     /* F_GETFL / F_SETFL (O_NONBLOCK) */
int nf_ioctl(nf_stack *s, int fd, unsigned long req, void *arg);  /* FIONREAD, SIOCOUTQ */
int nf_poll(nf_stack *s, struct pollfd *fds, nfds_t n, int timeout_ms);

/* epoll(7) over netfold descriptors. An epoll instance is a netfold descriptor (close it with
 * nf_close); it watches netfold descriptors of the same stack (a number that is not an open
 * one is EBADF). Events and flags are Linux's: EPOLLIN, EPOLLOUT, EPOLLRDHUP,
 * EPOLLERR and EPOLLHUP (always reported), EPOLLET, EPOLLONESHOT (re-armed by EPOLL_CTL_MOD);
 * EPOLLEXCLUSIVE is accepted on ADD. Level-triggered entries are reported while ready;
 * edge-triggered ones when a condition appears or, while readable/writable, when new bytes
 * arrive, a connection is queued or sent bytes are acknowledged (once per arrival, as Linux
 * wakes). A closed descriptor leaves every interest list. Errors as Linux: EBADF, EINVAL
 * (epfd not an epoll instance, fd == epfd, fd an epoll instance: no nesting; maxevents <= 0;
 * EPOLLEXCLUSIVE with MOD), EEXIST (ADD twice), ENOENT (MOD/DEL of an unwatched fd), EFAULT.
 * nf_epoll_wait sleeps like nf_poll (timeout_ms < 0: no limit, 0: do not wait). */
int nf_epoll_create1(nf_stack *s, int flags);   /* flags: 0 or EPOLL_CLOEXEC */
int nf_epoll_ctl(nf_stack *s, int epfd, int op, int fd, const struct epoll_event *ev);
int nf_epoll_wait(nf_stack *s, int epfd, struct epoll_event *events, int maxevents, int timeout_ms);

/* Zero-copy send (after Linux MSG_ZEROCOPY, Documentation/networking/msg_zerocopy.rst).
 * nf_send_zc lends buf to the TCP socket fd instead of copying it: segments refer to it,
 * retransmissions re-read it, and on a TAP with offloads the kernel copies the payload straight
 * from it (netfold touches no payload byte; on other links one copy into the frame, with the
 * checksum folded in). The buffer must stay valid and unmodified until its completion comes
 * back from nf_zc_completions. Returns the bytes taken: like a non-blocking send, possibly a
 * prefix (the send buffer bounds lent bytes as it bounds copied ones); send the rest with
 * another call. A blocking socket waits for room (SO_SNDTIMEO). One completion per call that
 * took bytes, carrying `cookie`. Errors: EAGAIN (no room, non-blocking or timed out), ENOBUFS
 * (too many completions wait to be taken: take them first), EINVAL (len 0), EFAULT (NULL
 * buf), ENOTCONN, EPIPE, ECONNRESET... as nf_send; EOPNOTSUPP on a UDP socket or for flags
 * other than MSG_DONTWAIT and MSG_NOSIGNAL. Completions are exactly once per taken buffer,
 * also when the connection is reset or aborted, the socket closed, or the stack freed (then
 * the buffers are released when nf_stack_free returns and their completions are lost with the
 * stack). */
typedef struct nf_zc_completion {
    uint64_t cookie;          /* as given to nf_send_zc / nf_sendfile_zc */
    uint64_t len;             /* bytes the call took */
    int fd;                   /* the socket it was sent on (may be closed or reused by now) */
    int status;               /* 0: acknowledged by the peer; ECONNABORTED: the connection
                                 ended first (the peer may have some of it) */
} nf_zc_completion;
ssize_t nf_send_zc(nf_stack *s, int fd, const void *buf, size_t len, uint64_t cookie, int flags);
/* sendfile: lends bytes [offset, offset+len) of the open file file_fd (a kernel descriptor),
 * mapped read-only, not read; the mapping goes when the buffer is released. The file must not
 * be truncated or that range modified until the completion. EINVAL for a range past the end
 * of the file or len 0, EBADF for a bad file_fd; otherwise as nf_send_zc. */
ssize_t nf_sendfile_zc(nf_stack *s, int fd, int file_fd, off_t offset, size_t len,
                       uint64_t cookie, int flags);
/* Takes up to max completions of socket fd (fd == -1: of every socket of the stack, including
 * closed ones), oldest first per socket; returns how many were stored in out (0: none now).
 * Completions arrive as the peer acknowledges: call after nf_inject/nf_poll, or from a loop.
 * -1 with EBADF (fd not open, and not -1), EFAULT (NULL out), EINVAL (max < 0). */
int nf_zc_completions(nf_stack *s, int fd, nf_zc_completion *out, int max);
/* Like nf_config_layout for nf_zc_completion. */
size_t nf_zc_completion_layout(size_t *offsets, size_t n);

/* Linux's MSG_ZEROCOPY (Documentation/networking/msg_zerocopy.rst), built on nf_send_zc, for
 * programs (and LD_PRELOAD) written against Linux:
 *  - setsockopt(SOL_SOCKET, SO_ZEROCOPY, 1) on a TCP or UDP socket (0 or 1, else EINVAL;
 *    an accepted socket inherits its listener's). Without it MSG_ZEROCOPY is ignored and the
 *    data copied, as on Linux.
 *  - nf_send / nf_sendto / nf_sendmsg with MSG_ZEROCOPY on a connected TCP socket lend the
 *    buffers as nf_send_zc does: they must stay valid and unmodified until the send's
 *    notification is read (unlike Linux, which pins the pages, netfold reads them in place:
 *    freeing or unmapping them earlier is an error too). Each call that takes at least one
 *    byte gets the next number of the socket (from 0, 32 bits, wrapping); a call that fails
 *    or takes nothing gives its number back. A blocking socket waits until every byte is
 *    taken. With MSG_MORE, MSG_EOR, MSG_FASTOPEN or on a UDP socket the data is copied and
 *    the notification (at once) says SO_EE_CODE_ZEROCOPY_COPIED.
 *  - Once the stack has released all of a send's buffers (acknowledged, or the connection
 *    reset or aborted), its number goes to the socket's error queue; consecutive numbers
 *    merge into one range as on Linux. nf_recvmsg(fd, &msg, MSG_ERRQUEUE) takes one range:
 *    it returns 0, sets MSG_ERRQUEUE in msg_flags and writes one control message
 *    SOL_IP/IP_RECVERR (SOL_IPV6/IPV6_RECVERR on an AF_INET6 socket) holding a struct
 *    sock_extended_err (<linux/errqueue.h>) with ee_errno 0, ee_origin SO_EE_ORIGIN_ZEROCOPY,
 *    ee_info..ee_data the first and last number, followed by an all-zero address
 *    (MSG_CTRUNC and the range is used up if msg_control is too short); -1/EAGAIN at once
 *    when the queue is empty, blocking socket or not. ee_code is SO_EE_CODE_ZEROCOPY_COPIED
 *    when the link takes only linear frames (nf_inject/nf_take, a TAP without offloads),
 *    where netfold copies the payload into each frame once, as Linux reports a route
 *    without scatter-gather; 0 when frames referred to the buffers.
 *  - nf_poll and nf_epoll_wait report POLLERR/EPOLLERR while notifications wait.
 *  - Notifications of a closed socket are dropped (its buffers are still read until
 *    released). nf_send_zc's completions on the same socket stay with nf_zc_completions. */

/* Shards: one host as N stacks, one per queue of a multi-queue device, each with
 * its own buffers, timers, connection table and driver thread (optionally pinned to a CPU),
 * and the application work of its connections on threads started beside it. Connections are
 * steered to shards by the RSS (Toeplitz) hash of their 4-tuple, so both directions of one
 * stay on one shard and nothing on the data path is shared (docs/SCALING.md).
 *  - nf_shards_stack(sh, k) is shard k as an nf_stack: every call above works on it (its
 *    descriptors are its own, valid only with that view). It belongs to sh: nf_stack_free
 *    refuses it (errno EINVAL); it is freed by nf_shards_free.
 *  - A server listens on every shard (nf_shards_listen, like SO_REUSEPORT); shard k accepts
 *    the connections whose SYN its queue received: a worker per shard calls nf_accept_on(k),
 *    or one thread takes them all with nf_accept_any.
 *  - A client opens a socket on shard k's stack and connects it with nf_connect_on(sh, k,
 *    ...), which binds it first to an ephemeral port (49152-65535) whose 4-tuple hashes to
 *    shard k both ways, so the replies come back to shard k (and a sharded peer steering by
 *    the same key accepts it on its shard k). Ports bound or in TIME-WAIT are skipped;
 *    EADDRNOTAVAIL when none is left. A socket already bound connects as nf_connect.
 *  - nf_shards_run_on(sh, k, fn, arg) runs fn(arg) on a new thread of shard k (pinned beside
 *    its driver with NF_SHARDS_PIN); nf_current_shard() tells the thread its shard.
 * Devices: nf_shards_new_pair builds two hosts joined by an in-memory multi-queue link (RSS
 * steering at every transmit, as a pair of multi-queue NICs would do): for tests and
 * benchmarks of sharded programs without a NIC. nf_shards_new_tap puts one host on the N
 * queues of a multi-queue Linux TAP (IFF_MULTI_QUEUE), shard k on queue k. There an eBPF
 * program attached to the TAP (TUNSETSTEERINGEBPF) steers by the same Toeplitz hash, and
 * nf_connect_on picks ports as over the in-memory link. Without it (no CAP_BPF) the kernel's
 * automq steers: a flow it opens lands on the queue of its own flow hash and stays there
 * (the shard answers on that queue); a flow a shard opens goes out on the shard's queue and
 * the kernel sends its replies back there, so nf_connect_on needs no hash: shard k takes
 * ephemeral ports with port % N == k (one address, disjoint ports). ARP and
 * NDP frames, which the kernel delivers on any queue, are copied to every shard. The configs
 * need NF_CLOCK_REAL, NF_MEDIUM_ETHERNET and device NULL (else EINVAL). */
typedef struct nf_shards nf_shards;
typedef struct nf_shards_listener nf_shards_listener;
typedef struct nf_shard_thread nf_shard_thread;
enum { NF_SHARDS_PIN = 1 };   /* shard k's driver and threads on CPU k (modulo the CPUs) */

/* Two hosts (configs a and b; every shard of a host has its address) of `shards` shards each
 * (1..128); flags 0 or NF_SHARDS_PIN. 0, or -1 with EINVAL / EFAULT / EAGAIN (no thread). */
int nf_shards_new_pair(const nf_config *a, const nf_config *b, unsigned shards, int flags,
                       nf_shards **out_a, nf_shards **out_b);
/* One host (config cfg, its address on every shard) of `shards` shards (1..128) over the
 * queues of multi-queue TAP ifname (created if missing; "nf%d" lets the kernel number it; an
 * existing TAP must be multi_queue), opened without offloads like device "tap:NAME"; flags 0
 * or NF_SHARDS_PIN. 0, or -1 with EINVAL / EFAULT / EAGAIN, or the kernel's errno from
 * opening the TAP (EPERM without CAP_NET_ADMIN, ENOENT without /dev/net/tun, ...). */
int nf_shards_new_tap(const nf_config *cfg, const char *ifname, unsigned shards, int flags,
                      nf_shards **out);
/* One host of `shards` shards (1..128) over the device spec names: "tap:NAME" (as
 * nf_shards_new_tap) or "xdp:IFNAME[:all]": one AF_XDP socket on each of the interface's
 * queues 0..shards-1, shard k on queue k, behind one XDP program that redirects the frames
 * for cfg's addresses and ARP/NDP for them (":all": every frame of those queues), ARP and NDP
 * copied to every shard. The interface must have at least `shards` receive queues (ethtool
 * -l; a veth made with numrxqueues/numtxqueues), else EINVAL; a spec naming a queue
 * (xdp:IF@Q) is EINVAL too. Which queue a frame arrives on is the sender's and the driver's
 * choice (a NIC's RSS, a veth peer's transmit queue, which Linux changes mid-connection), so
 * the queues steer in software (as Linux's RPS): each TCP/UDP frame goes to the shard of its
 * 4-tuple's Toeplitz hash (Microsoft's key, as nf_shards_new_pair), handed over from the
 * queue it arrived on when that is another; a connection the peer opens is accepted by the
 * shard of its hash, and nf_connect_on picks a port whose 4-tuple hashes to its shard. flags 0 or
 * NF_SHARDS_PIN. 0, or -1 with EINVAL / EFAULT / EAGAIN, or the errno of the step that failed
 * (EPERM without CAP_NET_ADMIN and CAP_BPF, ENODEV for an unknown interface, EBUSY when
 * another XDP program or socket holds it, ...). */
int nf_shards_new_device(const nf_config *cfg, const char *spec, unsigned shards, int flags,
                         nf_shards **out);
/* Closes the shards' descriptors and lets their closed connections finish for up to
 * NF_STACK_DRAIN_MS, all shards at once (as nf_stack_free), then stops the shards and frees
 * sh and its views. -1/EBUSY (nothing freed) while a callback of nf_shards_run_on still runs;
 * join those first. Listeners must still be closed with nf_shards_listener_close (their calls
 * fail with EBADF meanwhile). */
int nf_shards_free(nf_shards *sh);
unsigned nf_shards_count(nf_shards *sh);                /* 0 for NULL */
nf_stack *nf_shards_stack(nf_shards *sh, unsigned k);   /* NULL/EINVAL if k is out of range */
/* A thread of shard k running fn(arg); NULL with EINVAL (k), EFAULT (fn) or EAGAIN. */
nf_shard_thread *nf_shards_run_on(nf_shards *sh, unsigned k, void *(*fn)(void *), void *arg);
/* Waits for the thread, stores fn's return value in *ret (if ret is not NULL), frees t. */
int nf_shards_join(nf_shard_thread *t, void **ret);
/* The calling thread's shard if nf_shards_run_on started it, else -1. */
int nf_current_shard(void);
/* A TCP listening socket bound to `a` on every shard (AF_INET or AF_INET6 by a's family); NULL
 * with errno as nf_socket/nf_bind/nf_listen (all or nothing). */
nf_shards_listener *nf_shards_listen(nf_shards *sh, const struct sockaddr *a, socklen_t l,
                                     int backlog);
/* Shard k's listening descriptor (of nf_shards_stack(sh, k)): for nf_poll, O_NONBLOCK,
 * SO_RCVTIMEO, options. -1/EINVAL if k is out of range. */
int nf_shards_listener_fd(nf_shards_listener *l, unsigned k);
int nf_shards_listener_close(nf_shards_listener *l);
/* nf_accept on shard k's listening socket (blocking unless it is O_NONBLOCK): a descriptor
 * of shard k's stack. */
int nf_accept_on(nf_shards_listener *l, unsigned k, struct sockaddr *a, socklen_t *al);
/* The next connection on any shard (each call starts looking at the next shard, so a busy
 * one hides none): stores its shard in *shard and returns a descriptor of that shard's
 * stack. timeout_ms as nf_poll (-1: no limit, 0: no wait); -1/EAGAIN when it passes. Sleeps
 * until a shard did work, never spins. */
int nf_accept_any(nf_shards_listener *l, unsigned *shard, struct sockaddr *a, socklen_t *al,
                  int timeout_ms);
/* nf_connect of socket fd (of nf_shards_stack(sh, k)) from a port steered to shard k. */
int nf_connect_on(nf_shards *sh, unsigned k, int fd, const struct sockaddr *a, socklen_t l);

/* Layout self-description (for tests that keep this header honest): stores up to n offsets
 * of nf_config's fields, in declaration order, and returns sizeof(nf_config) as compiled
 * into the library. */
size_t nf_config_layout(size_t *offsets, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* NETFOLD_H */
