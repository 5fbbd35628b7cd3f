//! TCP Fast Open (RFC 7413), with Linux's knobs and cookie.
//!
//! A client that connected before holds a cookie from this server; its next SYN carries the
//! cookie and data, and the server hands the data to the application at once, one round
//! trip earlier than after a three-way handshake (RFC 7413 §2). What netfold does (section
//! numbers are RFC 7413's; the text paraphrases it):
//!
//! - **The switch** ([`TcpLayer::set_fastopen`](super::TcpLayer::set_fastopen)) takes Linux's
//!   `net.ipv4.tcp_fastopen` bits ([`CLIENT_ENABLE`], [`SERVER_ENABLE`], [`CLIENT_NO_COOKIE`],
//!   [`SERVER_COOKIE_NOT_REQD`], [`SERVER_WO_SOCKOPT`]). The default, [`DEFAULT_FLAGS`], has
//!   both the client and the server bit: a listener whose application sets
//!   [`Config::fastopen_queue`](super::Config::fastopen_queue) (the C API's `TCP_FASTOPEN`)
//!   answers Fast Open at once, without a system-wide switch as well (Linux's default is 1,
//!   client only).
//! - **The queue** ([`Config::fastopen_queue`](super::Config::fastopen_queue), Linux
//!   `fastopenq.max_qlen`): how many Fast Open connections of one listener may be in
//!   SYN-RECEIVED at a time (§5.1: a server should bound its pending Fast Open connections
//!   against SYN floods). 0 = Fast Open off for the listener; with [`SERVER_WO_SOCKOPT`] a
//!   listener without the option gets its backlog. Past the limit SYNs fall back to the
//!   normal handshake (data not acknowledged), counted in `Stats::fastopen_listen_overflow`.
//! - **The cookie** (§4.1.2: the server generates and checks cookies, a MAC of the client's
//!   IP address): Linux's, `__tcp_fastopen_cookie_gen_cipher`: SipHash-2-4 under the 128-bit
//!   Fast Open key over the client's and then the server's address (8 or 32 bytes), the
//!   64-bit result as 8 bytes little-endian. The key is derived from the stack's
//!   [`Secret`](super::Secret) unless set
//!   ([`TcpLayer::set_fastopen_key`](super::TcpLayer::set_fastopen_key), Linux
//!   `tcp_fastopen_key`; per listener `TCP_FASTOPEN_KEY`). A second (backup) key is also
//!   accepted, as Linux's key rotation does.
//! - **A SYN** (§4.2.2, Linux `tcp_try_fastopen`), once the listener takes Fast Open and has
//!   room: a valid cookie (or none needed, [`SERVER_COOKIE_NOT_REQD`]) creates the connection
//!   at once in SYN-RECEIVED, with the SYN's data in its receive buffer, in the accept queue
//!   (the application may have the data before the handshake completes); its SYN-ACK
//!   acknowledges the data, and the connection may send before the last ACK. A cookie
//!   request (empty option), or an invalid cookie, gets the normal handshake with the valid
//!   cookie in the SYN-ACK (§4.2.1; for an invalid cookie Linux too sends the right one); the
//!   SYN's data is then not acknowledged and the client sends it again. A SYN without the
//!   option and without data is an ordinary SYN.
//! - **A client** (§4.1.3, Linux `tcp_sendmsg_fastopen`,
//!   [`TcpLayer::connect_fastopen`](super::TcpLayer::connect_fastopen)): the layer caches the
//!   cookie each server's SYN-ACK gives, in its option form, and the MSS of every SYN-ACK to
//!   a Fast Open SYN; a Fast Open active open to a server with a cached cookie sends it in
//!   its SYN with the first data, otherwise a cookie request (once in the experimental form
//!   after one in the RFC form went unanswered, as Linux's `try_exp`). A SYN-ACK
//!   acknowledging only the SYN, or part of its data, makes the rest go again at once; one
//!   acknowledging all of it may carry data and a FIN, which are taken.
//! - Invalid input never fails: an option with a length no cookie has is ignored at parse
//!   time (`wire::tcp`), a cookie of the wrong length or MAC is an invalid cookie (counted in
//!   `Stats::fastopen_passive_fail`).

use super::conn::{Conn, Ctx, Event};
use super::listener::Listener;
use super::{Payload, Stats};
use crate::hash::siphash24;
use crate::wire::tcp::{FastOpenCookie, FastOpenOption, TcpRepr};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// Linux `TFO_CLIENT_ENABLE`: active opens may use Fast Open.
pub const CLIENT_ENABLE: u32 = 0x1;
/// Linux `TFO_SERVER_ENABLE`: listeners with a Fast Open queue take Fast Open SYNs.
pub const SERVER_ENABLE: u32 = 0x2;
/// Linux `TFO_CLIENT_NO_COOKIE`: a client sends data in its SYN without a cookie.
pub const CLIENT_NO_COOKIE: u32 = 0x4;
/// Linux `TFO_SERVER_COOKIE_NOT_REQD`: a Fast Open listener takes SYN data without a cookie.
pub const SERVER_COOKIE_NOT_REQD: u32 = 0x200;
/// Linux `TFO_SERVER_WO_SOCKOPT1`: every listener takes Fast Open, with its backlog as the
/// queue, whether or not the application set the option.
pub const SERVER_WO_SOCKOPT: u32 = 0x400;
/// netfold's default: client and server enabled (see the module doc).
pub const DEFAULT_FLAGS: u32 = CLIENT_ENABLE | SERVER_ENABLE;

/// Length of the cookies this server makes (Linux `TCP_FASTOPEN_COOKIE_SIZE`).
pub const COOKIE_LEN: usize = 8;
/// Length of one Fast Open key (Linux `TCP_FASTOPEN_KEY_LENGTH`).
pub const KEY_LEN: usize = 16;

/// Domain tag of the derivation of the default key from the stack secret (the message is two
/// bytes long, unlike every other message hashed under that secret).
const TAG_KEY: u8 = 9;

/// The Fast Open key(s): the primary, which makes cookies, and an optional backup, which is
/// still accepted (Linux keeps two for rotation: `TCP_FASTOPEN_KEY` with 32 bytes). `Debug`
/// never prints them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FastOpenKey {
    primary: [u8; KEY_LEN],
    backup: Option<[u8; KEY_LEN]>,
}

impl core::fmt::Debug for FastOpenKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FastOpenKey(..)")
    }
}

impl FastOpenKey {
    /// A key from its bytes as Linux's `TCP_FASTOPEN_KEY` takes them: 16 bytes (primary) or
    /// 32 (primary then backup). `None` for any other length (Linux: EINVAL).
    pub fn from_bytes(bytes: &[u8]) -> Option<FastOpenKey> {
        let mut primary = [0u8; KEY_LEN];
        match bytes.len() {
            KEY_LEN => {
                primary.copy_from_slice(bytes);
                Some(FastOpenKey {
                    primary,
                    backup: None,
                })
            }
            l if l == 2 * KEY_LEN => {
                let mut backup = [0u8; KEY_LEN];
                primary.copy_from_slice(&bytes[..KEY_LEN]);
                backup.copy_from_slice(&bytes[KEY_LEN..]);
                Some(FastOpenKey {
                    primary,
                    backup: Some(backup),
                })
            }
            _ => None,
        }
    }

    /// The key in Linux's `net.ipv4.tcp_fastopen_key` text form, `xxxxxxxx-xxxxxxxx-xxxxxxxx-
    /// xxxxxxxx` (four 32-bit hex words, each stored little-endian), optionally followed by
    /// `,` and the backup key. `None` if the text is not of that form.
    pub fn from_sysctl(text: &str) -> Option<FastOpenKey> {
        let mut bytes = Vec::with_capacity(2 * KEY_LEN);
        for key in text.trim().split(',').take(3) {
            let words: Vec<&str> = key.trim().split('-').collect();
            if words.len() != 4 {
                return None;
            }
            for w in words {
                if w.is_empty() || w.len() > 8 {
                    return None;
                }
                let v = u32::from_str_radix(w, 16).ok()?;
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        FastOpenKey::from_bytes(&bytes)
    }

    /// The key a stack uses until one is set: derived from its secret, so it is as
    /// unpredictable as the secret and stable for the stack's life.
    pub(crate) fn derived(secret: &super::Secret) -> FastOpenKey {
        let lo = siphash24(secret.bytes(), &[TAG_KEY, 0]);
        let hi = siphash24(secret.bytes(), &[TAG_KEY, 1]);
        let mut primary = [0u8; KEY_LEN];
        primary[..8].copy_from_slice(&lo.to_le_bytes());
        primary[8..].copy_from_slice(&hi.to_le_bytes());
        FastOpenKey {
            primary,
            backup: None,
        }
    }

    /// RFC 7413 §4.1.2 / Linux `__tcp_fastopen_cookie_gen_cipher`: the cookie for a SYN from
    /// `client` to `server` (both of one family; a mixed pair hashes its IPv4 side v4-mapped).
    pub fn cookie(&self, client: IpAddr, server: IpAddr) -> FastOpenCookie {
        cookie_under(&self.primary, client, server)
    }

    /// Whether `cookie` is the one for this pair under the primary or the backup key (Linux
    /// `tcp_fastopen_cookie_gen_check`).
    pub fn check(&self, cookie: &FastOpenCookie, client: IpAddr, server: IpAddr) -> bool {
        let ok = |k: &[u8; KEY_LEN]| cookie_under(k, client, server) == *cookie;
        ok(&self.primary) || self.backup.as_ref().is_some_and(ok)
    }
}

fn cookie_under(key: &[u8; KEY_LEN], client: IpAddr, server: IpAddr) -> FastOpenCookie {
    let h = match (client, server) {
        (IpAddr::V4(c), IpAddr::V4(s)) => {
            let mut m = [0u8; 8];
            m[..4].copy_from_slice(&c.octets());
            m[4..].copy_from_slice(&s.octets());
            siphash24(key, &m)
        }
        (c, s) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                IpAddr::V6(v) => v.octets(),
            };
            let mut m = [0u8; 32];
            m[..16].copy_from_slice(&v6(c));
            m[16..].copy_from_slice(&v6(s));
            siphash24(key, &m)
        }
    };
    // `foc->val[0] = cpu_to_le64(siphash(...))`.
    FastOpenCookie::new(&h.to_le_bytes()).unwrap_or_default()
}

/// Servers whose cookies a layer remembers (Linux's TCP metrics cache holds them per
/// destination): beyond this, one is forgotten for each new one.
pub const COOKIE_CACHE_MAX: usize = 1024;

/// What a client remembers of one server (Linux `tcp_fastopen_metrics`, in its TCP metrics
/// cache).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheEntry {
    /// The server's cookie, in the option form it came in (an experimental one goes back in
    /// that form); `None` until a server gives one.
    pub cookie: Option<FastOpenOption>,
    /// The MSS the server announced last, which bounds the data of the next SYN (RFC 7413
    /// §4.1.3); 0 = none known.
    pub mss: u16,
    /// Linux `try_exp`: 1 = a cookie request in the RFC form got no answer, so the next goes
    /// in the experimental form (RFC 7413 §4.1.1); 2 = that got none either, back to the
    /// RFC form for good.
    pub try_exp: u8,
}

/// The layer-wide Fast Open settings (Linux's two sysctls) and the client's cookie cache.
#[derive(Debug, Clone)]
pub(crate) struct FastOpen {
    pub flags: u32,
    pub key: FastOpenKey,
    /// RFC 7413 §4.1.3: the client caches the cookie per server IP address, with the MSS
    /// the server announced (recommended there; Linux `tcp_fastopen_cache_set`), which bounds
    /// the data in the next SYN.
    pub cookies: HashMap<IpAddr, CacheEntry>,
}

impl FastOpen {
    pub fn new(secret: &super::Secret) -> FastOpen {
        FastOpen {
            flags: DEFAULT_FLAGS,
            key: FastOpenKey::derived(secret),
            cookies: HashMap::new(),
        }
    }

    /// Remembers what `server`'s SYN-ACK to a Fast Open SYN told (bounded,
    /// [`COOKIE_CACHE_MAX`]; Linux `tcp_fastopen_cache_set`): its MSS (if announced) always,
    /// its cookie if it gave one (the cached one stays otherwise), and a `try_exp` step if the
    /// cookie request went unanswered and no cookie is cached.
    pub fn remember(&mut self, server: IpAddr, seen: CacheEntry) {
        if self.cookies.len() >= COOKIE_CACHE_MAX && !self.cookies.contains_key(&server) {
            if let Some(k) = self.cookies.keys().next().copied() {
                self.cookies.remove(&k);
            }
        }
        let e = self.cookies.entry(server).or_default();
        if seen.mss != 0 {
            e.mss = seen.mss;
        }
        match seen.cookie {
            Some(c) if !c.cookie.is_request() => e.cookie = Some(c),
            _ if seen.try_exp > e.try_exp && e.cookie.is_none() => e.try_exp = seen.try_exp,
            _ => {}
        }
    }

    /// RFC 7413 §4.1.3 (Linux `tcp_fastopen_cookie_check` / `tcp_send_syn_data`): what the
    /// SYN of a Fast Open active open to `server` carries. With [`CLIENT_NO_COOKIE`], no
    /// option and up to the returned number of data bytes: the MSS `mss` (or the smaller one
    /// the server announced last) less the most options a SYN may carry (Linux
    /// `mss - MAX_TCP_OPTION_SPACE`); with a cookie cached for the server, the cookie (in the
    /// form it came in) and as much data; otherwise a cookie request (in the experimental
    /// form when the cache says to try it) and no data (0). `None`, 0 when the client side is
    /// off.
    pub fn client_plan(&self, server: IpAddr, mss: u16) -> (Option<FastOpenOption>, usize) {
        if self.flags & CLIENT_ENABLE == 0 {
            return (None, 0);
        }
        let e = self.cookies.get(&server).copied().unwrap_or_default();
        let mss = if e.mss != 0 { mss.min(e.mss) } else { mss };
        let room = usize::from(mss).saturating_sub(crate::wire::tcp::MAX_OPTIONS_LEN);
        if self.flags & CLIENT_NO_COOKIE != 0 {
            return (None, room);
        }
        match e.cookie {
            Some(c) => (Some(c), room),
            None => (
                Some(FastOpenOption {
                    cookie: FastOpenCookie::REQUEST,
                    experimental: e.try_exp == 1,
                }),
                0,
            ),
        }
    }

    /// The most Fast Open connections `l` may have in SYN-RECEIVED (Linux `max_qlen`, set by
    /// `TCP_FASTOPEN` or, with [`SERVER_WO_SOCKOPT`], by `listen`'s backlog); 0 = off.
    pub fn max_qlen(&self, l: &Listener) -> usize {
        if l.config.fastopen_queue > 0 {
            l.config.fastopen_queue
        } else if self.flags & (SERVER_ENABLE | SERVER_WO_SOCKOPT)
            == SERVER_ENABLE | SERVER_WO_SOCKOPT
        {
            l.backlog
        } else {
            0
        }
    }

    /// What a listener does with a SYN (Linux `tcp_try_fastopen`), called only when the SYN
    /// gets a connection of its own (not a SYN cookie, no full queue).
    pub fn on_syn(
        &self,
        l: &Listener,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        data_len: usize,
        stats: &mut Stats,
    ) -> SynFastOpen {
        let foc = syn.options.fast_open;
        if foc.is_some_and(|f| f.cookie.is_request()) {
            stats.fastopen_cookie_reqd += 1;
        }
        let max = self.max_qlen(l);
        if self.flags & SERVER_ENABLE == 0 || (data_len == 0 && foc.is_none()) || max == 0 {
            return SynFastOpen::Handshake { cookie: None };
        }
        if l.fastopen_pending >= max {
            // RFC 7413 §5.1: past the limit, the normal handshake (Linux `TCPFastOpenListenOverflow`).
            stats.fastopen_listen_overflow += 1;
            return SynFastOpen::Handshake { cookie: None };
        }
        if self.flags & SERVER_COOKIE_NOT_REQD != 0 {
            stats.fastopen_passive += 1;
            return SynFastOpen::Accept;
        }
        let Some(foc) = foc else {
            return SynFastOpen::Handshake { cookie: None };
        };
        let key = l.fastopen_key.unwrap_or(self.key);
        let (client, server) = (remote.ip(), local.ip());
        let answer = Some(FastOpenOption {
            cookie: key.cookie(client, server),
            experimental: foc.experimental,
        });
        if foc.cookie.is_request() {
            return SynFastOpen::Handshake { cookie: answer };
        }
        if key.check(&foc.cookie, client, server) {
            stats.fastopen_passive += 1;
            SynFastOpen::Accept
        } else {
            stats.fastopen_passive_fail += 1;
            SynFastOpen::Handshake { cookie: answer }
        }
    }
}

/// A listener's answer to a SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SynFastOpen {
    /// The three-way handshake; the SYN-ACK carries `cookie` if set. SYN data is not taken.
    Handshake { cookie: Option<FastOpenOption> },
    /// A Fast Open connection: created now, with the SYN's data, in the accept queue.
    Accept,
}

/// A connection's Fast Open state (cold: looked at on the handshake only).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnFastOpen {
    /// The Fast Open option our SYN or SYN-ACK carries: a cookie for the client (SYN-ACK),
    /// or our cookie or a cookie request (an active open's SYN).
    pub syn_option: Option<FastOpenOption>,
    /// Active open: bytes of the send queue our first SYN carries (RFC 7413 §4.1.3).
    pub syn_data_len: u32,
    /// Active open: what the server's SYN-ACK to our Fast Open SYN told (its cookie, its
    /// MSS, whether to try the experimental option), for the layer's cache.
    pub(crate) peer_cookie: Option<CacheEntry>,
    /// The connection was created by Fast Open, its SYN's data taken (`TCPI_OPT_SYN_DATA`).
    pub syn_data: bool,
    /// A Fast Open connection still in SYN-RECEIVED: counted in the listener at this slot
    /// (with this generation) against its Fast Open queue.
    pub pending_in: Option<(u32, u32)>,
}

impl Conn {
    /// A Fast Open connection in SYN-RECEIVED whose SYN-ACK has gone: it sends data before
    /// the handshake completes, as Linux does (RFC 7413 §4.2.2 lets the server send data
    /// once the SYN-ACK is out; its ACK of the data may arrive with the client's
    /// handshake ACK). A timeout retransmits the SYN-ACK, then the data after it.
    pub(crate) fn fastopen_sends(&self) -> bool {
        self.state == super::State::SynReceived
            && self.fastopen.pending_in.is_some()
            && self.snd.nxt() != self.snd.iss()
    }

    /// RFC 7413 §4.1.3, an active Fast Open's SYN-ACK (Linux `tcp_rcv_fastopen_synack`): a
    /// cookie in it is kept for the layer's cache (reported by `Event::Established`); data
    /// the SYN carried but the SYN-ACK does not acknowledge goes again at once (the client
    /// retransmits it, §4.2.2), the rest of the connection as usual. When all of the SYN's
    /// data is acknowledged (or it carried none), data and a FIN on the SYN-ACK are taken
    /// (RFC 7413 §4.2.2 lets the server send data with its SYN-ACK; Linux
    /// `tcp_fastopen_add_skb`, which Linux skips when it retransmits SYN data).
    pub(crate) fn fastopen_synack(
        &mut self,
        ctx: &mut Ctx<'_>,
        seg: &TcpRepr,
        payload: Payload<'_>,
    ) -> Event {
        let sent_to = self
            .snd
            .iss()
            .wrapping_add(1)
            .wrapping_add(self.fastopen.syn_data_len);
        let data_acked = seg.ack == sent_to;
        if !data_acked {
            // Data the SYN carried is not (all) acknowledged: what is leaves the send queue,
            // as with any ACK (`take_cumulative_ack`), the rest goes again at once as a
            // retransmission (Linux `tcp_rcv_fastopen_synack` marks it lost and calls
            // `tcp_non_congestion_loss_retransmit`): RACK learns of it as sent with the SYN.
            let upto = super::seq::min(seg.ack, sent_to);
            self.snd.on_syn_data_acked(upto);
            self.snd.rewind();
            if self.sack_ok {
                self.snd.on_rack_sent(upto, sent_to, ctx.now, None);
            }
        } else if self.fastopen.syn_data_len > 0 {
            // All of it: it leaves the send queue (TCPI_OPT_SYN_DATA).
            self.fastopen.syn_data = true;
            self.snd.on_syn_data_acked(sent_to);
        }
        if data_acked {
            // Linux: only a SYN whose data was all acknowledged gets this far in
            // `tcp_rcv_synsent_state_process` (`fastopen_fail` returns before it).
            self.quickack_if_write_pending(ctx.now);
        }
        if data_acked && (!payload.is_empty() || seg.flags.fin()) {
            // The window our SYN announced (unscaled, RFC 7323 §2.2) is the right edge the
            // SYN-ACK's data arrives under.
            self.rcv.on_syn_ack_sent(self.rcv.buf().min(0xffff) as u32);
            self.receive_data(ctx, seg.seq.wrapping_add(1), payload, seg.flags.fin());
            self.check_fin(ctx.now);
        }
        // Linux `tcp_rcv_fastopen_synack`: the MSS is cached in any case; a cookie only if our
        // SYN carried the option (an unsolicited one is ignored); a cookie request that got
        // no answer, on a SYN not retransmitted and without data, moves `try_exp` on (try
        // the experimental form next, then give it up).
        let asked = self.fastopen.syn_option;
        let answer = seg.options.fast_open;
        let try_exp = match asked {
            Some(a)
                if answer.is_none()
                    && self.fastopen.syn_data_len == 0
                    && self.counters.total_rto == 0 =>
            {
                if a.experimental {
                    2
                } else {
                    1
                }
            }
            _ => 0,
        };
        self.fastopen.peer_cookie = Some(CacheEntry {
            cookie: answer.filter(|_| asked.is_some()),
            mss: seg.options.mss.filter(|&m| m != 0).unwrap_or(536),
            try_exp,
        });
        Event::Established
    }

    /// A passive connection just made from `syn` takes the listener's answer: the cookie its
    /// SYN-ACK carries, or (Fast Open accepted) its buffers now and the SYN's data in the
    /// receive buffer, so the SYN-ACK acknowledges it (RFC 7413 §4.2.2, Linux
    /// `tcp_fastopen_create_child` / `tcp_fastopen_add_skb`). `listener` is the listener's
    /// slot and generation, whose Fast Open queue counts the connection until the handshake
    /// completes. Returns whether Fast Open was accepted.
    pub(crate) fn fastopen_syn(
        &mut self,
        answer: SynFastOpen,
        ctx: &mut Ctx<'_>,
        syn: &TcpRepr,
        payload: Payload<'_>,
        listener: (u32, u32),
    ) -> bool {
        match answer {
            SynFastOpen::Handshake { cookie } => {
                self.fastopen.syn_option = cookie;
                false
            }
            SynFastOpen::Accept => {
                self.alloc_buffers(ctx.rings);
                self.fastopen.pending_in = Some(listener);
                if !payload.is_empty() {
                    self.fastopen.syn_data = true;
                    self.receive_data(ctx, syn.seq.wrapping_add(1), payload, false);
                    // The SYN-ACK's window is the SYN window, unscaled (RFC 7323 §2.2).
                    let wnd = self.rcv.buf().min(0xffff) as u32;
                    self.rcv.mark_syn_data_edge(wnd);
                    // The SYN-ACK is the acknowledgment: no ACK of its own is owed.
                    self.n_snaps = 0;
                    self.rcv.cancel_ack_now();
                    self.timers.delack = None;
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn hex(c: &FastOpenCookie) -> String {
        c.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Linux's cookies, from google/packetdrill's fastopen scripts (checked against Linux):
    /// key a0bf63f7-ed803d81-cd641d30-cebc4a90 (`simple1.pkt`, `sockopt-fastopen-key.pkt`),
    /// and the `TFO_COOKIE` of its test runner for key a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4.
    #[test]
    fn cookies_match_linux() {
        let k = FastOpenKey::from_sysctl("a0bf63f7-ed803d81-cd641d30-cebc4a90").unwrap();
        let c = k.cookie(
            IpAddr::V4(Ipv4Addr::new(10, 248, 0, 2)),
            IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2)),
        );
        assert_eq!(hex(&c), "00abaaabe8e954c2");
        let bytes = b"\xf7\x63\xbf\xa0\x81\x3d\x80\xed\x30\x1d\x64\xcd\x90\x4a\xbc\xce";
        assert_eq!(FastOpenKey::from_bytes(bytes), Some(k));
        let zero = FastOpenKey::from_sysctl("00000000-00000000-00000000-00000000").unwrap();
        let c0 = zero.cookie(
            IpAddr::V4(Ipv4Addr::new(10, 248, 0, 2)),
            IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2)),
        );
        assert_eq!(hex(&c0), "93b7aa4f550f8a1a");
        let d = FastOpenKey::from_sysctl("a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4").unwrap();
        let c = d.cookie(
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1)),
        );
        assert_eq!(hex(&c), "3021b9d889017eeb");
        let c6 = d.cookie(
            IpAddr::V6("fd3d:fa7b:d17d::1".parse::<Ipv6Addr>().unwrap()),
            IpAddr::V6("fd3d:a0b:17d6::1".parse::<Ipv6Addr>().unwrap()),
        );
        assert_eq!(hex(&c6), "c1d1e9742a47a9bc");
    }

    #[test]
    fn check_takes_primary_and_backup_only() {
        let (a, b) = ([1u8; KEY_LEN], [2u8; KEY_LEN]);
        let mut both = a.to_vec();
        both.extend_from_slice(&b);
        let k = FastOpenKey::from_bytes(&both).unwrap();
        let only_b = FastOpenKey::from_bytes(&b).unwrap();
        let (c, s) = (
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        );
        assert!(k.check(&k.cookie(c, s), c, s));
        assert!(k.check(&only_b.cookie(c, s), c, s));
        assert!(!only_b.check(&k.cookie(c, s), c, s));
        // Another client, a shorter cookie, a request: all invalid.
        let other = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3));
        assert!(!k.check(&k.cookie(other, s), c, s));
        let short = FastOpenCookie::new(&k.cookie(c, s).as_bytes()[..4]).unwrap();
        assert!(!k.check(&short, c, s));
        assert!(!k.check(&FastOpenCookie::REQUEST, c, s));
    }

    #[test]
    fn keys_of_bad_form_are_refused() {
        for bad in [0usize, 3, 15, 17, 31, 33, 64] {
            assert_eq!(FastOpenKey::from_bytes(&vec![0; bad]), None, "{bad} bytes");
        }
        for bad in [
            "",
            "a1a1a1a1-b2b2b2b2-c3c3c3c3",
            "a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4-e5",
            "g1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4",
            "a1a1a1a1a-b2b2b2b2-c3c3c3c3-d4d4d4d4",
            "a1a1a1a1--c3c3c3c3-d4d4d4d4",
        ] {
            assert_eq!(FastOpenKey::from_sysctl(bad), None, "{bad:?}");
        }
        assert!(FastOpenKey::from_sysctl("1-2-3-4,5-6-7-8\n").is_some());
    }

    /// Linux `tcp_fastopen_cache_set` / `tcp_fastopen_cache_get`: a cookie request that
    /// gets no cookie is followed by one in the experimental form, then the RFC form for
    /// good; the MSS is kept without a cookie; a cookie keeps its form; cookie-less mode
    /// sends no option even with a cookie cached.
    #[test]
    fn client_cache_follows_linux() {
        let mut f = FastOpen::new(&super::super::Secret::fixed_for_tests([3; 16]));
        let server = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        let req = |experimental| {
            Some(FastOpenOption {
                cookie: FastOpenCookie::REQUEST,
                experimental,
            })
        };
        assert_eq!(f.client_plan(server, 1460), (req(false), 0));
        let none = |try_exp| CacheEntry {
            cookie: None,
            mss: 1000,
            try_exp,
        };
        f.remember(server, none(1));
        assert_eq!(f.client_plan(server, 1460), (req(true), 0));
        f.remember(server, none(2));
        assert_eq!(f.client_plan(server, 1460), (req(false), 0));
        // Once at 2, an unanswered request in the RFC form does not go back to 1.
        f.remember(server, none(1));
        assert_eq!(f.client_plan(server, 1460), (req(false), 0));
        // Cookie-less mode: no option, data up to the cached MSS less 40.
        f.flags |= CLIENT_NO_COOKIE;
        assert_eq!(f.client_plan(server, 1460), (None, 960));
        f.flags &= !CLIENT_NO_COOKIE;
        let exp = FastOpenOption {
            cookie: FastOpenCookie::new(&[1, 2, 3, 4]).unwrap(),
            experimental: true,
        };
        f.remember(
            server,
            CacheEntry {
                cookie: Some(exp),
                mss: 0,
                try_exp: 0,
            },
        );
        // The cookie, in its form; the MSS of 0 (none announced) keeps the cached one.
        assert_eq!(f.client_plan(server, 1460), (Some(exp), 960));
        f.flags |= CLIENT_NO_COOKIE;
        assert_eq!(f.client_plan(server, 1460), (None, 960));
        f.flags &= !CLIENT_ENABLE;
        assert_eq!(f.client_plan(server, 1460), (None, 0));
    }

    #[test]
    fn derived_keys_follow_the_secret() {
        let a = FastOpenKey::derived(&super::super::Secret::fixed_for_tests([1; 16]));
        let b = FastOpenKey::derived(&super::super::Secret::fixed_for_tests([2; 16]));
        assert_ne!(a, b);
        assert_eq!(
            a,
            FastOpenKey::derived(&super::super::Secret::fixed_for_tests([1; 16]))
        );
        assert_eq!(format!("{a:?}"), "FastOpenKey(..)");
    }
}
