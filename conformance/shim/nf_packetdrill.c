/*
 * nf_packetdrill.c - packetdrill's --so_filename interface on netfold's C API.
 *
 * packetdrill (github.com/google/packetdrill) can drive a user-space stack through a shared
 * library that exports packetdrill_interface_init(flags, ifc) and fills in a table of
 * function pointers: the socket calls, netdev_send/netdev_receive (packets in and out) and the
 * clock (usleep, gettimeofday). This file is that library for netfold. It is our own code:
 * the table's layout below is written from the interface description (packetdrill.h, GPL,
 * not part of this repository); the field order must match it exactly.
 *
 * What it does:
 *  - One netfold stack per run, NF_MEDIUM_IP (packetdrill's so mode hands netdev_send a bare
 *    IPv4 packet starting at the IP header, and parses what netdev_receive returns as one),
 *    address 198.18.0.1/24 by default, NF_CLOCK_MANUAL.
 *  - Time is netfold's manual clock: usleep(n) advances it by n microseconds, gettimeofday
 *    reads it (plus a fixed epoch) and advances it by one microsecond, so packetdrill's
 *    "spin until the event time" loop terminates; netdev_receive, when netfold has nothing to
 *    send, advances it in steps of STEP_USEC until a packet leaves (as real time would pass
 *    while packetdrill waits), and gives up after MAX_IDLE_USEC of stack time with a message
 *    (packetdrill itself would wait forever). What a script sees never depends on the wall
 *    clock: real time only bounds how long the shim waits for packetdrill's blocking-call
 *    thread to settle before the clock moves (settle_threads below).
 *  - Descriptors are netfold's own (from 3 up, as packetdrill scripts expect).
 *
 * so_flags: a comma-separated list of key=value: address=A/P (default 198.18.0.1/24),
 * mtu=N (default 1500), verbose=1 (log each packet and clock jump to stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "netfold.h"

/* Our declaration of packetdrill's interface table (same order and types as packetdrill.h). */
struct pd_interface {
    void *userdata;
    void (*free)(void *);
    int (*socket)(void *, int, int, int);
    int (*bind)(void *, int, const struct sockaddr *, socklen_t);
    int (*listen)(void *, int, int);
    int (*accept)(void *, int, struct sockaddr *, socklen_t *);
    int (*connect)(void *, int, const struct sockaddr *, socklen_t);
    ssize_t (*read)(void *, int, void *, size_t);
    ssize_t (*readv)(void *, int, const struct iovec *, int);
    ssize_t (*recv)(void *, int, void *, size_t, int);
    ssize_t (*recvfrom)(void *, int, void *, size_t, int, struct sockaddr *, socklen_t *);
    ssize_t (*recvmsg)(void *, int, struct msghdr *, int);
    ssize_t (*write)(void *, int, const void *, size_t);
    ssize_t (*writev)(void *, int, const struct iovec *, int);
    ssize_t (*send)(void *, int, const void *, size_t, int);
    ssize_t (*sendto)(void *, int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    ssize_t (*sendmsg)(void *, int, const struct msghdr *, int);
    int (*fcntl)(void *, int, int, ...);
    int (*ioctl)(void *, int, unsigned long, ...);
    int (*close)(void *, int);
    int (*shutdown)(void *, int, int);
    int (*getsockopt)(void *, int, int, int, void *, socklen_t *);
    int (*setsockopt)(void *, int, int, int, const void *, socklen_t);
    int (*poll)(void *, struct pollfd *, nfds_t, int);
    int (*netdev_send)(void *, const void *, size_t);
    int (*netdev_receive)(void *, void *, size_t *, long long *);
    int (*usleep)(void *, useconds_t);
    int (*gettimeofday)(void *, struct timeval *, struct timezone *);
    int (*epoll_create)(void *, int);
    int (*epoll_ctl)(void *, int, int, int, struct epoll_event *);
    int (*epoll_wait)(void *, int, struct epoll_event *, int, int);
    int (*pipe)(void *, int[2]);
    int (*splice)(void *, int, loff_t *, int, loff_t *, size_t, unsigned int);
};

/* Step by which netdev_receive moves the clock while it waits for netfold to send: 1 ms, the
 * resolution of packetdrill's usual timing tolerance (4 ms by default). */
#define STEP_USEC 1000ULL
/* Longest stretch of stack time netdev_receive waits for a packet before it declares the
 * script stuck: longer than any timer a script waits for (TIME_WAIT 60 s, RTO backoff). */
#define MAX_IDLE_USEC (180ULL * 1000000ULL)
/* netdev_receive settles threads (below) before each clock step in the first
 * YIELD_WINDOW_USEC of an idle stretch: a blocking call that packetdrill runs in its own
 * thread (read, accept, poll) may just have been made ready, and it must return (and read
 * the clock) before the clock moves on. By then any thread that was woken has long run, and
 * long waits (TIME-WAIT, backoff) stay fast. */
#define YIELD_WINDOW_USEC 1000000ULL
/* Wall-clock epoch added to the stack clock for gettimeofday (any fixed value works; this
 * one keeps timestamps readable: 2020-09-13). */
#define EPOCH_USEC (1600000000ULL * 1000000ULL)

struct shim {
    nf_stack *s;
    pthread_mutex_t clock_lock; /* serialises read-modify-write of the manual clock */
    int verbose;
};

static void advance(struct shim *sh, uint64_t usec)
{
    pthread_mutex_lock(&sh->clock_lock);
    uint64_t now = nf_clock_now(sh->s);
    nf_clock_set(sh->s, now + usec);
    pthread_mutex_unlock(&sh->clock_lock);
}

#define S(u) (((struct shim *)(u))->s)

/*
 * Settling threads before the clock moves. packetdrill runs a blocking call (a script line
 * with a time range, "+0...0.05 read") in a thread of its own, and takes the call's return
 * time from gettimeofday in that thread once the call returns. With a manual clock that
 * time is right only if the thread has returned, and read the clock, before the main thread
 * moves the clock on to the next event. So before each clock jump (usleep, netdev_receive's
 * steps) the shim waits, in real time and for at most SETTLE_MAX_NSEC, until no thread other
 * than packetdrill's main one is
 *  - inside a socket call and runnable (made ready by the last event but not yet returned:
 *    a thread asleep in netfold's wait is in state S in /proc, a woken one R), or
 *  - returned from one and not yet done with it: it has not read the clock since, or is
 *    still running (packetdrill reads the return time before or after taking its own lock,
 *    depending on its version; once the thread sleeps again, waiting for its next call, the
 *    time is taken).
 * Real time thus only decides how long the shim waits, never what the script sees, however
 * loaded the machine is.
 */
#define SETTLE_MAX_NSEC 1000000000LL
static pid_t main_tid;
static _Atomic pid_t call_tid;     /* a thread inside a socket call, 0 for none */
static _Atomic pid_t returned_tid; /* a thread that returned from one and is not done with it */
static _Atomic int clocked_since;  /* returned_tid has read the clock since it returned */
static __thread pid_t my_tid_cache;

static pid_t my_tid(void)
{
    if (my_tid_cache == 0) my_tid_cache = (pid_t)syscall(SYS_gettid);
    return my_tid_cache;
}

static void enter_call(void)
{
    pid_t t = my_tid();
    if (t != main_tid) atomic_store(&call_tid, t);
}

/* Marked returned before the call is cleared, so that settle_threads never sees neither. */
static void leave_call(void)
{
    pid_t t = my_tid();
    if (t != main_tid) {
        atomic_store(&clocked_since, 0);
        atomic_store(&returned_tid, t);
        atomic_store(&call_tid, 0);
    }
}

/* A socket call through netfold, with the calling thread tracked (errno kept). */
#define TRACKED(expr)                                                                        \
    ({                                                                                       \
        enter_call();                                                                        \
        __typeof__(expr) r_ = (expr);                                                        \
        int e_ = errno;                                                                      \
        leave_call();                                                                        \
        errno = e_;                                                                          \
        r_;                                                                                  \
    })

/* Whether thread `tid` of this process is asleep (state S), or gone. */
static int thread_sleeping(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parens). */
    const char *p = strrchr(buf, ')');
    return !p || p[1] != ' ' || p[2] != 'R';
}

static long long elapsed_nsec(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - since->tv_sec) * 1000000000LL + (now.tv_nsec - since->tv_nsec);
}

static void settle_threads(void)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t r = atomic_load(&returned_tid), t = atomic_load(&call_tid);
        if (r != 0 && atomic_load(&clocked_since) && thread_sleeping(r)) {
            atomic_compare_exchange_strong(&returned_tid, &r, 0);
            r = 0;
        }
        if (r == 0 && (t == 0 || thread_sleeping(t))) return;
        if (elapsed_nsec(&start) > SETTLE_MAX_NSEC) {
            /* A thread that does not settle: stop waiting for it. */
            atomic_compare_exchange_strong(&returned_tid, &r, 0);
            return;
        }
        struct timespec pause = {0, 20000L};
        nanosleep(&pause, NULL);
    }
}

/* The running shim, for the getsockopt interposer below. */
static struct shim *live_shim;

static void shim_free(void *u)
{
    struct shim *sh = u;
    if (live_shim == sh)
        live_shim = NULL;
    nf_stack_free(sh->s);
    pthread_mutex_destroy(&sh->clock_lock);
    free(sh);
}

/* Linux's sysctls net.ipv4.tcp_fastopen, tcp_fastopen_key, tcp_timestamps, tcp_ecn and
 * tcp_notsent_lowat, as a script sets
 * them (its preamble writes /proc/sys, which in the script's private network namespace is its
 * own): read before each socket(), listen(), connect(), setsockopt() and send with an address,
 * and given to the stack, so a script gets the Fast Open switch and key and the timestamp
 * default it asked for. The key reads as zeros until set, and the stack then
 * uses zeros too (deterministic; Linux would draw a random key). */
static void sync_sysctls(struct shim *sh)
{
    char buf[128];
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_fastopen", "r");
    if (f) {
        if (fgets(buf, sizeof(buf), f)) {
            long v = strtol(buf, NULL, 0);
            if (v >= 0 && v <= INT32_MAX)
                nf_set_tcp_fastopen(sh->s, (int)v);
        }
        fclose(f);
    }
    f = fopen("/proc/sys/net/ipv4/tcp_timestamps", "r");
    if (f) {
        /* Linux's 2 (timestamps without random offsets) still means on. */
        if (fgets(buf, sizeof(buf), f))
            nf_set_tcp_timestamps(sh->s, atoi(buf) != 0);
        fclose(f);
    }
    f = fopen("/proc/sys/net/ipv4/tcp_ecn", "r");
    if (f) {
        /* 0 off, 1 ask and accept, 2 accept only (a fresh namespace's default). */
        if (fgets(buf, sizeof(buf), f)) {
            int v = atoi(buf);
            if (v >= 0 && v <= 2)
                nf_set_tcp_ecn(sh->s, v);
        }
        fclose(f);
    }
    f = fopen("/proc/sys/net/ipv4/tcp_notsent_lowat", "r");
    if (f) {
        if (fgets(buf, sizeof(buf), f)) {
            unsigned long v = strtoul(buf, NULL, 10);
            if (v <= UINT32_MAX)
                nf_set_tcp_notsent_lowat(sh->s, (uint32_t)v);
        }
        fclose(f);
    }
    f = fopen("/proc/sys/net/ipv4/tcp_fastopen_key", "r");
    if (f) {
        unsigned int w[8];
        if (fgets(buf, sizeof(buf), f)) {
            int n = sscanf(buf, "%x-%x-%x-%x,%x-%x-%x-%x", &w[0], &w[1], &w[2], &w[3], &w[4],
                           &w[5], &w[6], &w[7]);
            if (n == 4 || n == 8) {
                uint8_t key[32];
                for (int i = 0; i < n; i++)
                    for (int b = 0; b < 4; b++)
                        key[4 * i + b] = (uint8_t)(w[i] >> (8 * b)); /* each word little-endian */
                nf_set_tcp_fastopen_key(sh->s, key, (size_t)n * 4);
            }
        }
        fclose(f);
    }
}

static int shim_socket(void *u, int d, int t, int p)
{
    sync_sysctls(u);
    return nf_socket(S(u), d, t, p);
}
static int shim_bind(void *u, int fd, const struct sockaddr *a, socklen_t l) { return nf_bind(S(u), fd, a, l); }
static int shim_listen(void *u, int fd, int b)
{
    sync_sysctls(u);
    return nf_listen(S(u), fd, b);
}
static int shim_accept(void *u, int fd, struct sockaddr *a, socklen_t *l) { return TRACKED(nf_accept(S(u), fd, a, l)); }
static int shim_connect(void *u, int fd, const struct sockaddr *a, socklen_t l)
{
    sync_sysctls(u);
    return TRACKED(nf_connect(S(u), fd, a, l));
}
static ssize_t shim_read(void *u, int fd, void *b, size_t n) { return TRACKED(nf_read(S(u), fd, b, n)); }
static ssize_t shim_readv(void *u, int fd, const struct iovec *v, int c) { return TRACKED(nf_readv(S(u), fd, v, c)); }
static ssize_t shim_recv(void *u, int fd, void *b, size_t n, int f) { return TRACKED(nf_recv(S(u), fd, b, n, f)); }
static ssize_t shim_recvfrom(void *u, int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
    return TRACKED(nf_recvfrom(S(u), fd, b, n, f, a, l));
}
/* Receive and transmit timestamps are the manual clock's own time (include/netfold.h);
 * packetdrill compares them with its gettimeofday, which adds EPOCH_USEC: add it here too. */
static void shift_time(struct timespec *ts)
{
    if (ts->tv_sec == 0 && ts->tv_nsec == 0) return;
    ts->tv_sec += (time_t)(EPOCH_USEC / 1000000ULL);
}
static ssize_t shim_recvmsg(void *u, int fd, struct msghdr *m, int f)
{
    ssize_t r = TRACKED(nf_recvmsg(S(u), fd, m, f));
    if (r < 0) return r;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_TIMESTAMPING && c->cmsg_len >= CMSG_LEN(3 * sizeof(struct timespec))) {
            struct timespec ts[3];
            memcpy(ts, CMSG_DATA(c), sizeof ts);
            shift_time(&ts[0]);
            memcpy(CMSG_DATA(c), ts, sizeof ts);
        } else if (c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            shift_time(&ts);
            memcpy(CMSG_DATA(c), &ts, sizeof ts);
        } else if (c->cmsg_type == SCM_TIMESTAMP && c->cmsg_len >= CMSG_LEN(sizeof(struct timeval))) {
            struct timeval tv;
            memcpy(&tv, CMSG_DATA(c), sizeof tv);
            tv.tv_sec += (time_t)(EPOCH_USEC / 1000000ULL);
            memcpy(CMSG_DATA(c), &tv, sizeof tv);
        }
    }
    return r;
}
static ssize_t shim_write(void *u, int fd, const void *b, size_t n) { return TRACKED(nf_write(S(u), fd, b, n)); }
static ssize_t shim_writev(void *u, int fd, const struct iovec *v, int c) { return TRACKED(nf_writev(S(u), fd, v, c)); }
static ssize_t shim_send(void *u, int fd, const void *b, size_t n, int f) { return TRACKED(nf_send(S(u), fd, b, n, f)); }
static ssize_t shim_sendto(void *u, int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l)
{
    sync_sysctls(u);
    return TRACKED(nf_sendto(S(u), fd, b, n, f, a, l));
}
static ssize_t shim_sendmsg(void *u, int fd, const struct msghdr *m, int f)
{
    sync_sysctls(u);
    return TRACKED(nf_sendmsg(S(u), fd, m, f));
}

static int shim_fcntl(void *u, int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return nf_fcntl(S(u), fd, cmd, arg);
}

static int shim_ioctl(void *u, int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return nf_ioctl(S(u), fd, req, arg);
}

static int shim_close(void *u, int fd) { return TRACKED(nf_close(S(u), fd)); }
static int shim_shutdown(void *u, int fd, int how) { return nf_shutdown(S(u), fd, how); }
static int shim_getsockopt(void *u, int fd, int lv, int nm, void *v, socklen_t *l)
{
    return nf_getsockopt(S(u), fd, lv, nm, v, l);
}
static int shim_setsockopt(void *u, int fd, int lv, int nm, const void *v, socklen_t l)
{
    sync_sysctls(u);
    return nf_setsockopt(S(u), fd, lv, nm, v, l);
}
static int shim_poll(void *u, struct pollfd *p, nfds_t n, int t) { return TRACKED(nf_poll(S(u), p, n, t)); }

static void log_packet(struct shim *sh, const char *dir, const void *buf, size_t n)
{
    if (!sh->verbose)
        return;
    fprintf(stderr, "[nf-shim %.6f] %s %zu bytes\n", nf_clock_now(sh->s) / 1e6, dir, n);
    (void)buf;
}

static int shim_netdev_send(void *u, const void *buf, size_t n)
{
    struct shim *sh = u;
    log_packet(sh, "in ", buf, n);
    if (nf_inject(sh->s, buf, n) < 0) {
        /* packetdrill reports only "error handling packet"; say why (EMSGSIZE: the script's
         * packet is larger than the MTU, which a kernel behind tun/GRO would still accept). */
        fprintf(stderr, "nf-shim: nf_inject of a %zu-byte packet failed: %s\n", n, strerror(errno));
        return -1;
    }
    return 0;
}

static int shim_netdev_receive(void *u, void *buf, size_t *count, long long *time_usecs)
{
    struct shim *sh = u;
    uint64_t idle = 0;
    for (;;) {
        ssize_t n = nf_take(sh->s, buf, *count);
        if (n >= 0) {
            *count = (size_t)n;
            *time_usecs = (long long)(EPOCH_USEC + nf_clock_now(sh->s));
            log_packet(sh, "out", buf, (size_t)n);
            return 0;
        }
        if (errno != EAGAIN) {
            *count = 0;
            return -1;
        }
        if (idle >= MAX_IDLE_USEC) {
            fprintf(stderr,
                    "nf-shim: netfold sent nothing in %llu s of stack time while packetdrill "
                    "waited for an outbound packet (now %.6f s)\n",
                    MAX_IDLE_USEC / 1000000ULL, nf_clock_now(sh->s) / 1e6);
            exit(EXIT_FAILURE);
        }
        if (idle < YIELD_WINDOW_USEC) settle_threads();
        advance(sh, STEP_USEC);
        idle += STEP_USEC;
    }
}

/* Before usleep moves the clock: a blocking call that the last event made ready (a read the
 * data just injected completes) returns, and reads the clock, first (settle_threads). */
static int shim_usleep(void *u, useconds_t usec)
{
    settle_threads();
    advance(u, usec);
    return 0;
}

static int shim_gettimeofday(void *u, struct timeval *tv, struct timezone *tz)
{
    struct shim *sh = u;
    (void)tz;
    if (atomic_load(&returned_tid) == my_tid()) atomic_store(&clocked_since, 1);
    /* One microsecond per reading: packetdrill spins on gettimeofday for the last stretch
     * before an event, and a clock that never moved would spin forever. */
    advance(sh, 1);
    uint64_t t = EPOCH_USEC + nf_clock_now(sh->s);
    tv->tv_sec = (time_t)(t / 1000000ULL);
    tv->tv_usec = (suseconds_t)(t % 1000000ULL);
    return 0;
}

static int unsupported(void)
{
    errno = ENOSYS;
    return -1;
}
/* epoll(7) over netfold descriptors (epoll_create's size only has to be positive). */
static int shim_epoll_create(void *u, int size)
{
    if (size <= 0) {
        errno = EINVAL;
        return -1;
    }
    return nf_epoll_create1(S(u), 0);
}
static int shim_epoll_ctl(void *u, int e, int op, int fd, struct epoll_event *ev)
{
    return nf_epoll_ctl(S(u), e, op, fd, ev);
}
static int shim_epoll_wait(void *u, int e, struct epoll_event *ev, int m, int t)
{
    return TRACKED(nf_epoll_wait(S(u), e, ev, m, t));
}
static int shim_pipe(void *u, int p[2]) { (void)u; (void)p; return unsupported(); }
static int shim_splice(void *u, int a, loff_t *b, int c, loff_t *d, size_t e, unsigned int f)
{
    (void)u; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f;
    return unsupported();
}

/* Reads "key=value" from a comma-separated flag string into out (NUL-terminated). */
static int flag(const char *flags, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    const char *p = flags;
    while (p && *p) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn(v, ",");
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return 1;
        }
        p = strchr(p, ',');
        if (p)
            p++;
    }
    return 0;
}

/* packetdrill keeps its own bookkeeping of "live" descriptor numbers and, at the end of a
 * script, may close() small kernel descriptors with the numbers our sockets had (3, 4, ...).
 * netfold's stack owns kernel descriptors of its own (wake-up channels): if one of them had such
 * a number, that close() would pull it from under the stack (Rust aborts on it). So before the
 * stack is created, every free descriptor below RESERVED_FDS is parked on /dev/null: the stack's
 * descriptors land above, and packetdrill's stray close() only ever hits a placeholder. */
#define RESERVED_FDS 64
static void reserve_low_fds(void)
{
    for (int fd = 0; fd < RESERVED_FDS; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int p = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (p < 0)
            return;
        if (p != fd) {
            /* open() returns the lowest free number, so p == fd unless something raced. */
            close(p);
            return;
        }
    }
}

/*
 * packetdrill's `%{ ... }%` code blocks read the socket under test with getsockopt(2) itself
 * (TCP_INFO, TCP_CC_INFO, SO_MEMINFO on its live fd), not through the interface table. When
 * this library is also preloaded (conformance/run.sh sets LD_PRELOAD to it), this definition
 * takes those calls: a descriptor of the netfold stack answers from netfold (TCP_INFO from
 * nf_getsockopt; TCP_CC_INFO with no data, as Linux for an algorithm without it; SO_MEMINFO
 * with the receive and send queues and buffers, the rest 0), anything else goes to libc.
 */
#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif
#ifndef TCP_CC_INFO
#define TCP_CC_INFO 26
#endif
int getsockopt(int fd, int level, int name, void *v, socklen_t *l)
{
    static int (*real)(int, int, int, void *, socklen_t *);
    struct shim *sh = live_shim;
    int ours = sh && ((level == IPPROTO_TCP && (name == TCP_INFO || name == TCP_CC_INFO)) ||
                      (level == SOL_SOCKET && name == SO_MEMINFO));
    if (ours) {
        int type;
        socklen_t tl = sizeof(type);
        ours = nf_getsockopt(sh->s, fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0;
    }
    if (ours && name == TCP_INFO)
        return nf_getsockopt(sh->s, fd, level, name, v, l);
    if (ours && name == TCP_CC_INFO) {
        *l = 0;
        return 0;
    }
    if (ours) {
        /* SK_MEMINFO_RMEM_ALLOC, RCVBUF, WMEM_ALLOC, SNDBUF, FWD_ALLOC, WMEM_QUEUED, OPTMEM,
         * BACKLOG, DROPS. */
        uint32_t mem[9] = {0};
        int x;
        socklen_t xl = sizeof(x);
        if (nf_ioctl(sh->s, fd, FIONREAD, &x) == 0)
            mem[0] = (uint32_t)x;
        if (nf_getsockopt(sh->s, fd, SOL_SOCKET, SO_RCVBUF, &x, &xl) == 0)
            mem[1] = (uint32_t)x;
        if (nf_ioctl(sh->s, fd, TIOCOUTQ, &x) == 0)
            mem[2] = mem[5] = (uint32_t)x;
        xl = sizeof(x);
        if (nf_getsockopt(sh->s, fd, SOL_SOCKET, SO_SNDBUF, &x, &xl) == 0)
            mem[3] = (uint32_t)x;
        socklen_t n = *l < sizeof(mem) ? *l : (socklen_t)sizeof(mem);
        memcpy(v, mem, n);
        *l = n;
        return 0;
    }
    if (!real) {
        real = (int (*)(int, int, int, void *, socklen_t *))dlsym(RTLD_NEXT, "getsockopt");
        if (!real) {
            errno = ENOSYS;
            return -1;
        }
    }
    return real(fd, level, name, v, l);
}

void packetdrill_interface_init(const char *flags, struct pd_interface *ifc)
{
    static char address[64];
    char buf[32];
    struct shim *sh = calloc(1, sizeof(*sh));
    if (!sh) {
        fprintf(stderr, "nf-shim: out of memory\n");
        exit(EXIT_FAILURE);
    }
    pthread_mutex_init(&sh->clock_lock, NULL);
    main_tid = my_tid();

    nf_config cfg;
    nf_config_init(&cfg);
    cfg.medium = NF_MEDIUM_IP;
    cfg.clock = NF_CLOCK_MANUAL;
    strcpy(address, "198.18.0.1/24");
    if (flags) {
        flag(flags, "address", address, sizeof(address));
        if (flag(flags, "mtu", buf, sizeof(buf)))
            cfg.mtu = (uint32_t)strtoul(buf, NULL, 10);
        if (flag(flags, "verbose", buf, sizeof(buf)))
            sh->verbose = atoi(buf);
    }
    cfg.address = address;
    reserve_low_fds();
    sh->s = nf_stack_new(&cfg);
    if (!sh->s) {
        fprintf(stderr, "nf-shim: nf_stack_new(%s): %s\n", address, strerror(errno));
        exit(EXIT_FAILURE);
    }

    live_shim = sh;
    memset(ifc, 0, sizeof(*ifc));
    ifc->userdata = sh;
    ifc->free = shim_free;
    ifc->socket = shim_socket;
    ifc->bind = shim_bind;
    ifc->listen = shim_listen;
    ifc->accept = shim_accept;
    ifc->connect = shim_connect;
    ifc->read = shim_read;
    ifc->readv = shim_readv;
    ifc->recv = shim_recv;
    ifc->recvfrom = shim_recvfrom;
    ifc->recvmsg = shim_recvmsg;
    ifc->write = shim_write;
    ifc->writev = shim_writev;
    ifc->send = shim_send;
    ifc->sendto = shim_sendto;
    ifc->sendmsg = shim_sendmsg;
    ifc->fcntl = shim_fcntl;
    ifc->ioctl = shim_ioctl;
    ifc->close = shim_close;
    ifc->shutdown = shim_shutdown;
    ifc->getsockopt = shim_getsockopt;
    ifc->setsockopt = shim_setsockopt;
    ifc->poll = shim_poll;
    ifc->netdev_send = shim_netdev_send;
    ifc->netdev_receive = shim_netdev_receive;
    ifc->usleep = shim_usleep;
    ifc->gettimeofday = shim_gettimeofday;
    ifc->epoll_create = shim_epoll_create;
    ifc->epoll_ctl = shim_epoll_ctl;
    ifc->epoll_wait = shim_epoll_wait;
    ifc->pipe = shim_pipe;
    ifc->splice = shim_splice;
}
