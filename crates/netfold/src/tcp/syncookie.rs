//! SYN cookies, RFC 4987 §3.6, laid out as Linux does (`net/ipv4/syncookies.c`).
//!
//! When a listener's SYN queue is full, the SYN is answered anyway, statelessly: everything
//! needed to rebuild the connection is folded into our initial sequence number (the cookie),
//! and, when timestamps are on, into the low bits of our TSval. The returning ACK carries the
//! cookie back (SEG.ACK - 1) and the TSval back (TSecr); if the cookie verifies, the
//! connection is created ESTABLISHED from what it encodes. A flood of spoofed SYNs then costs
//! no memory, and real clients keep connecting.
//!
//! The cookie (Linux `secure_tcp_syn_cookie`), with `count` = minutes on the stack's clock and
//! `sseq` = the client's ISN:
//!
//! ```text
//! cookie = H0(saddr, daddr, sport, dport) + sseq + (count << 24)
//!        + ((H1(saddr, daddr, sport, dport, count) + mss_index) mod 2^24)
//! ```
//!
//! The top 8 bits carry the minute (checked against the current one: at most
//! [`MAX_AGE_MINUTES`] - 1 minutes old, Linux `MAX_SYNCOOKIE_AGE` 2), the low 24 bits a keyed
//! MAC plus a 2-bit index into [`MSS_TABLE`]. A forged ACK verifies with probability about
//! 2/256 x 4/2^24 = 2^-29. H0 and H1 are SipHash-2-4 under the stack's [`Secret`] with two
//! domain tags (Linux: SipHash under two keys, `syncookie_secret[2]`).
//!
//! The timestamp (Linux `cookie_init_timestamp` / `cookie_timestamp_decode`):
//!
//! ```text
//! MSB                                LSB
//! | 31 ...   6 |  5  |  4   | 3 2 1 0 |
//! |  Timestamp | ECN | SACK | WScale  |
//! ```
//!
//! WScale 0xf (an invalid shift) means the SYN had no window-scale option. The encoded TSval
//! is at most our clock (the low bits are rounded down a block of 64 if needed), so later
//! TSvals never go backwards. Without timestamps, the cookie cannot carry the window scale or
//! SACK-permitted, and the SYN-ACK offers neither (as Linux: `tcp_clear_options`).
//!
//! Deviations from Linux, each deliberate:
//! - `count` is minutes of the stack's (sans-IO) clock, not jiffies since boot.
//! - A peer MSS below 536 still maps to 536 (index 0), as in Linux: RFC 9293 §3.7.1 requires
//!   every host to accept segments of the 536-byte default MSS.
//! - The ECN bit says the SYN asked for ECN and the SYN-ACK agreed (RFC 3168 §6.1.1); as in
//!   Linux it travels only with timestamps.
//!
//! IPv6 (Linux `net/ipv6/syncookies.c`): the same layout; H0 and H1 hash the 128-bit addresses
//! (the message is the tag, client address, our address, `count`, client port, our port, in
//! Linux's `cookie_hash` order), and the MSS index points into [`MSS_TABLE_V6`], Linux's
//! IPv6 `msstab` {1220, 1420, 1440, 8940}: 1280 - 60 is the least any IPv6 path carries (RFC
//! 8200 §5, §8.3), so a peer MSS below 1220 is taken as 1220, as Linux does. A SYN without an
//! MSS option counts as MSS 1220 (RFC 9293 §3.7.1 MUST-15, the IPv6 default).

use super::conn::Conn;
use super::secret::Secret;
use super::Config;
use crate::hash::siphash24;
use crate::time::{Duration, Instant};
use crate::wire::tcp::{TcpFlags, TcpRepr, Timestamps};
use std::net::SocketAddr;

/// Linux `msstab`: the MSS values a cookie can express (Alcock & Nelson 2011 found these
/// cover the vast majority of announced MSS values; 1440/1452 are PPPoE). Sorted.
pub const MSS_TABLE: [u16; 4] = [536, 1300, 1440, 1460];
/// Linux's IPv6 `msstab` (`net/ipv6/syncookies.c`): 1280 - 60 (the IPv6 minimum MTU, RFC
/// 8200 §5), 1480 - 60 (encapsulation, PPPoE), 1500 - 60 (Ethernet), 9000 - 60 (jumbo).
pub const MSS_TABLE_V6: [u16; 4] = [1220, 1420, 1440, 8940];

/// The MSS table of the family of a connection to `remote`.
pub fn mss_table(remote: &SocketAddr) -> &'static [u16; 4] {
    if remote.is_ipv6() {
        &MSS_TABLE_V6
    } else {
        &MSS_TABLE
    }
}
/// Bits of the cookie below the minute counter.
const COOKIE_BITS: u32 = 24;
const COOKIE_MASK: u32 = (1 << COOKIE_BITS) - 1;
/// Linux `MAX_SYNCOOKIE_AGE`: a cookie is valid in the minute it was made and the next one.
pub const MAX_AGE_MINUTES: u32 = 2;
/// Linux `TCP_SYNCOOKIE_PERIOD`: the cookie's clock ticks once a minute.
pub const PERIOD: Duration = Duration::from_secs(60);
/// Linux `TCP_SYNCOOKIE_VALID`: how long after the last SYN-queue overflow a listener still
/// checks ACKs as cookies.
pub const VALID: Duration = Duration::from_secs(60 * MAX_AGE_MINUTES as u64);
/// Low TSval bits holding the options.
const TS_BITS: u32 = 6;
const TS_MASK: u32 = (1 << TS_BITS) - 1;
const TS_OPT_WSCALE_MASK: u32 = 0xf;
const TS_OPT_SACK: u32 = 1 << 4;
const TS_OPT_ECN: u32 = 1 << 5;
/// Domain tags of H0 and H1 (see `ephemeral.rs` for the other tags under the same key).
const TAG_H0: u8 = 4;
const TAG_H1: u8 = 5;
/// RFC 7323 §2.3: largest window shift.
const MAX_WSCALE: u8 = 14;

/// What the client's SYN asked for, after our own configuration agreed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynOptions {
    /// The peer's MSS option (536 if absent, RFC 9293 §3.7.1).
    pub mss: u16,
    /// The peer's window shift, if both sides do window scaling.
    pub wscale: Option<u8>,
    pub sack_ok: bool,
    pub ecn_ok: bool,
}

/// A cookie for one SYN: our ISN, the MSS it encodes, and our TSval if timestamps are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie {
    pub isn: u32,
    /// The peer MSS rounded down to [`MSS_TABLE`]: what the rebuilt connection will use.
    pub mss: u16,
    pub tsval: Option<u32>,
}

/// What a valid cookie ACK tells about the connection to rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieOptions {
    pub mss: u16,
    /// The ACK carried a timestamp option (so the handshake negotiated timestamps).
    pub timestamps: bool,
    /// The peer's window shift (only with timestamps).
    pub wscale: Option<u8>,
    pub sack_ok: bool,
    pub ecn_ok: bool,
}

/// The cookie's minute counter (Linux `tcp_cookie_time`).
fn minutes(now: Instant) -> u32 {
    (now.total_micros() / PERIOD.total_micros()) as u32
}

/// Linux `cookie_hash`: keyed hash of the 4-tuple (saddr = the client) and `count`. IPv4:
/// tag, saddr, daddr, sport, dport, count (17 bytes); IPv6 in Linux's v6 order: tag, saddr,
/// daddr, count, sport, dport (41 bytes). Both ends are of one family (the layer keys every
/// connection in the family it runs on).
fn cookie_hash(secret: &Secret, tag: u8, local: SocketAddr, remote: SocketAddr, count: u32) -> u32 {
    match (local, remote) {
        (SocketAddr::V4(l), SocketAddr::V4(r)) => {
            let mut m = [0u8; 17];
            m[0] = tag;
            m[1..5].copy_from_slice(&r.ip().octets());
            m[5..9].copy_from_slice(&l.ip().octets());
            m[9..11].copy_from_slice(&r.port().to_be_bytes());
            m[11..13].copy_from_slice(&l.port().to_be_bytes());
            m[13..17].copy_from_slice(&count.to_be_bytes());
            siphash24(secret.bytes(), &m) as u32
        }
        (l, r) => {
            // IPv6 (a mixed pair, which no connection has, hashes its IPv4 side v4-mapped).
            let v6 = |a: SocketAddr| match a.ip() {
                std::net::IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                std::net::IpAddr::V6(v) => v.octets(),
            };
            let mut m = [0u8; 41];
            m[0] = tag;
            m[1..17].copy_from_slice(&v6(r));
            m[17..33].copy_from_slice(&v6(l));
            m[33..37].copy_from_slice(&count.to_be_bytes());
            m[37..39].copy_from_slice(&r.port().to_be_bytes());
            m[39..41].copy_from_slice(&l.port().to_be_bytes());
            siphash24(secret.bytes(), &m) as u32
        }
    }
}

/// Index of the largest `table` MSS not above `mss` (0 if `mss` is below them all).
fn mss_index(table: &[u16; 4], mss: u16) -> u32 {
    table.iter().rposition(|&m| mss >= m).unwrap_or(0) as u32
}

/// Linux `cookie_init_timestamp`: `clock` (our TSval clock now) with the options in the low
/// six bits, never above `clock`.
fn encode_timestamp(clock: u32, opt: &SynOptions) -> u32 {
    let mut bits = opt
        .wscale
        .map_or(TS_OPT_WSCALE_MASK, |w| u32::from(w.min(MAX_WSCALE)));
    if opt.sack_ok {
        bits |= TS_OPT_SACK;
    }
    if opt.ecn_ok {
        bits |= TS_OPT_ECN;
    }
    let ts = (clock & !TS_MASK) | bits;
    if ts > clock {
        ts.wrapping_sub(1 << TS_BITS)
    } else {
        ts
    }
}

/// The cookie answering a SYN from `remote` to `local` with sequence number `client_isn`.
/// `ts_clock` is our TSval clock for this connection when the SYN-ACK carries timestamps.
pub fn encode(
    secret: &Secret,
    now: Instant,
    local: SocketAddr,
    remote: SocketAddr,
    client_isn: u32,
    opt: &SynOptions,
    ts_clock: Option<u32>,
) -> Cookie {
    let count = minutes(now);
    let table = mss_table(&remote);
    let idx = mss_index(table, opt.mss);
    let isn = cookie_hash(secret, TAG_H0, local, remote, 0)
        .wrapping_add(client_isn)
        .wrapping_add(count << COOKIE_BITS)
        .wrapping_add(
            cookie_hash(secret, TAG_H1, local, remote, count).wrapping_add(idx) & COOKIE_MASK,
        );
    Cookie {
        isn,
        mss: table[idx as usize],
        tsval: ts_clock.map(|c| encode_timestamp(c, opt)),
    }
}

/// Linux `__cookie_v4_check` + `cookie_timestamp_decode`: checks the ACK `seg` (from `remote`
/// to `local`) as the answer to a cookie SYN-ACK and returns what the cookie encodes, or
/// `None` for a forged, mangled, too old or foreign cookie, or options `config` refuses.
pub fn decode(
    secret: &Secret,
    now: Instant,
    local: SocketAddr,
    remote: SocketAddr,
    seg: &TcpRepr,
    config: &Config,
) -> Option<CookieOptions> {
    let f = seg.flags;
    if !f.ack() || f.syn() || f.rst() {
        return None;
    }
    let cookie = seg.ack.wrapping_sub(1);
    let client_isn = seg.seq.wrapping_sub(1);
    let count = minutes(now);
    // Strip the layers: (count << 24) + (H1 + data) mod 2^24 remains.
    let c =
        cookie.wrapping_sub(cookie_hash(secret, TAG_H0, local, remote, 0).wrapping_add(client_isn));
    let diff = count.wrapping_sub(c >> COOKIE_BITS) & (u32::MAX >> COOKIE_BITS);
    if diff >= MAX_AGE_MINUTES {
        return None;
    }
    let h1 = cookie_hash(secret, TAG_H1, local, remote, count.wrapping_sub(diff));
    let idx = c.wrapping_sub(h1) & COOKIE_MASK;
    let mss = *mss_table(&remote).get(idx as usize)?;
    let Some(ts) = seg.options.timestamps else {
        // No timestamps: nothing else was negotiated.
        return Some(CookieOptions {
            mss,
            timestamps: false,
            wscale: None,
            sack_ok: false,
            ecn_ok: false,
        });
    };
    // The echoed TSval holds the options; refuse what this listener does not do (a SYN-ACK
    // from us never offered it, so the ACK is not an answer to ours).
    if !config.timestamps {
        return None;
    }
    let bits = ts.tsecr & TS_MASK;
    let sack_ok = bits & TS_OPT_SACK != 0;
    if sack_ok && !config.sack {
        return None;
    }
    let ws = (bits & TS_OPT_WSCALE_MASK) as u8;
    let wscale = if u32::from(ws) == TS_OPT_WSCALE_MASK {
        None
    } else if !config.window_scaling || ws > MAX_WSCALE {
        return None;
    } else {
        Some(ws)
    };
    let ecn_ok = bits & TS_OPT_ECN != 0;
    if ecn_ok && config.ecn == super::EcnMode::Off {
        // Linux `cookie_ecn_ok`: a listener without ECN never agreed to it.
        return None;
    }
    Some(CookieOptions {
        mss,
        timestamps: true,
        wscale,
        sack_ok,
        ecn_ok,
    })
}

/// What the listener `config` accepts of the options in `syn` (from `remote`), with our own
/// SYN-ACK's window shift and whether timestamps are on. Without timestamps, no window
/// scaling and no SACK (the cookie could not bring them back). No MSS option: the family's
/// default (536, or 1220 for IPv6; RFC 9293 §3.7.1), the first entry of its table.
pub fn negotiate(syn: &TcpRepr, config: &Config, remote: &SocketAddr) -> (SynOptions, bool) {
    let o = &syn.options;
    let ts = config.timestamps && o.timestamps.is_some();
    let opt = SynOptions {
        mss: o.mss.unwrap_or(mss_table(remote)[0]),
        wscale: if ts && config.window_scaling {
            o.window_scale.map(|w| w.min(MAX_WSCALE))
        } else {
            None
        },
        sack_ok: ts && config.sack && o.sack_permitted,
        // RFC 3168 §6.1.1 ECN-setup SYN, accepted unless ECN is off (Linux
        // `cookie_ecn_ok`); like SACK and the window scale it needs the timestamp to travel.
        ecn_ok: ts && config.ecn != super::EcnMode::Off && syn.flags.ece() && syn.flags.cwr(),
    };
    (opt, ts)
}

/// The SYN-ACK carrying `cookie` for `syn`, with the options `negotiate` agreed to; the same
/// header fields a SYN-RECEIVED connection would send (see `output.rs`), so the connection
/// rebuilt from the ACK matches what the client saw. `config` is the listener's, already
/// adapted to the connection's family (for IPv6 its MSS bounded by the IPv6 link's, see
/// `Config::mss` and `conn::for_family`).
pub fn syn_ack(syn: &TcpRepr, config: &Config, opt: &SynOptions, cookie: &Cookie) -> TcpRepr {
    let mut r = TcpRepr {
        src_port: syn.dst_port,
        dst_port: syn.src_port,
        seq: cookie.isn,
        ack: syn.seq.wrapping_add(1),
        flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
        // RFC 7323 §2.2: the window in a SYN-ACK is not scaled.
        window: syn_window(config),
        ..TcpRepr::default()
    };
    r.options.mss = Some(config.mss.max(64));
    if let (Some(tsval), Some(peer)) = (cookie.tsval, syn.options.timestamps) {
        r.options.timestamps = Some(Timestamps {
            tsval,
            tsecr: peer.tsval,
        });
        if opt.wscale.is_some() {
            r.options.window_scale = Some(config.announced_wscale());
        }
        r.options.sack_permitted = opt.sack_ok;
        if opt.ecn_ok {
            r.flags = TcpFlags(r.flags.0 | TcpFlags::ECE);
        }
    }
    r
}

/// The (unscaled) window our SYN-ACK advertises.
pub fn syn_window(config: &Config) -> u16 {
    config.recv_initial().min(0xffff) as u16
}

/// The SYN the cookie stands for, rebuilt from the ACK `ack` and the decoded options: what
/// `Conn::new_passive` takes to make the connection.
pub fn rebuilt_syn(ack: &TcpRepr, opt: &CookieOptions) -> TcpRepr {
    let mut syn = TcpRepr {
        src_port: ack.src_port,
        dst_port: ack.dst_port,
        seq: ack.seq.wrapping_sub(1),
        flags: TcpFlags(TcpFlags::SYN),
        window: ack.window,
        ..TcpRepr::default()
    };
    syn.options.mss = Some(opt.mss);
    syn.options.window_scale = opt.wscale;
    syn.options.sack_permitted = opt.sack_ok;
    if opt.ecn_ok {
        // The SYN asked for ECN and the SYN-ACK agreed (`negotiate`).
        syn.flags = TcpFlags(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
    }
    if opt.timestamps {
        syn.options.timestamps = ack.options.timestamps.map(|t| Timestamps {
            tsval: t.tsval,
            tsecr: 0,
        });
    }
    syn
}

/// Our TSval clock for the connection `local`-`remote` now: what `Conn::ts_now` will say once
/// the connection exists (milliseconds plus the RFC 7323 §7.1 per-connection offset).
pub fn ts_clock(secret: &Secret, now: Instant, local: SocketAddr, remote: SocketAddr) -> u32 {
    (now.total_millis() as u32).wrapping_add(super::isn::ts_offset(secret.bytes(), local, remote))
}

// ---- TCB glue -------------------------------------------------------------------------------
// The only place that knows the TCB's fields; adapt it when `conn.rs` changes shape.

/// The connection a verified cookie ACK `ack` stands for, in SYN-RECEIVED as if it had sent
/// the SYN-ACK carrying the cookie (ISS = SEG.ACK - 1), ready to take `ack` through
/// `Conn::input` (which moves it to ESTABLISHED). It is not counted in any SYN queue.
pub(super) fn conn_from_cookie(
    now: Instant,
    secret: &Secret,
    local: SocketAddr,
    remote: SocketAddr,
    config: Config,
    ack: &TcpRepr,
    opt: &CookieOptions,
) -> Conn {
    let syn = rebuilt_syn(ack, opt);
    let mut c = Conn::new_passive(now, secret.bytes(), local, remote, config, &syn);
    let iss = ack.ack.wrapping_sub(1);
    // The SYN-ACK (one sequence number) was sent and is never retransmitted.
    c.snd.restart(iss);
    // The right edge our SYN-ACK advertised (unscaled window, RFC 7323 §2.2).
    c.rcv.on_syn_ack_sent(u32::from(syn_window(&config)));
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn secret() -> Secret {
        Secret::fixed_for_tests(*b"syncookie-tests!")
    }
    fn local() -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 80).into()
    }
    fn remote() -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 40000).into()
    }
    fn local6() -> SocketAddr {
        "[2001:db8::1]:80".parse().unwrap()
    }
    fn remote6() -> SocketAddr {
        "[2001:db8::2]:40000".parse().unwrap()
    }
    const CLIENT_ISN: u32 = 0xfedc_ba98;
    const T0: Instant = Instant::from_secs(3600 + 17);

    /// The client's answer to `cookie`: the ACK of our SYN, echoing our TSval.
    fn ack_for(cookie: &Cookie, client_isn: u32) -> TcpRepr {
        let mut a = TcpRepr {
            src_port: remote().port(),
            dst_port: local().port(),
            seq: client_isn.wrapping_add(1),
            ack: cookie.isn.wrapping_add(1),
            flags: TcpFlags(TcpFlags::ACK),
            window: 1000,
            ..TcpRepr::default()
        };
        a.options.timestamps = cookie.tsval.map(|t| Timestamps {
            tsval: 777,
            tsecr: t,
        });
        a
    }

    fn all_options() -> Vec<SynOptions> {
        let mut v = Vec::new();
        for mss in [
            100u16, 535, 536, 1000, 1299, 1300, 1400, 1440, 1452, 1460, 1500, 9000,
        ] {
            for wscale in [None, Some(0), Some(7), Some(14)] {
                for sack_ok in [false, true] {
                    for ecn_ok in [false, true] {
                        v.push(SynOptions {
                            mss,
                            wscale,
                            sack_ok,
                            ecn_ok,
                        });
                    }
                }
            }
        }
        v
    }

    #[test]
    fn mss_classes_round_down() {
        let m = |x| MSS_TABLE[mss_index(&MSS_TABLE, x) as usize];
        assert_eq!((m(100), m(536), m(1299), m(1300)), (536, 536, 536, 1300));
        assert_eq!(
            (m(1439), m(1440), m(1459), m(1460), m(9000)),
            (1300, 1440, 1440, 1460, 1460)
        );
        // IPv6 (Linux's v6 msstab): below 1220 is 1220.
        let m6 = |x| MSS_TABLE_V6[mss_index(&MSS_TABLE_V6, x) as usize];
        assert_eq!(
            (m6(536), m6(1219), m6(1220), m6(1419)),
            (1220, 1220, 1220, 1220)
        );
        assert_eq!(
            (m6(1420), m6(1439), m6(1440), m6(1460)),
            (1420, 1420, 1440, 1440)
        );
        assert_eq!((m6(8939), m6(8940), m6(65535)), (1440, 8940, 8940));
    }

    #[test]
    fn ipv6_round_trip_every_mss_class_and_option() {
        let cfg = Config::default();
        for opt in all_options() {
            for clock in [Some(0x1234_5678), None] {
                let c = encode(&secret(), T0, local6(), remote6(), CLIENT_ISN, &opt, clock);
                assert_eq!(
                    c.mss,
                    MSS_TABLE_V6[mss_index(&MSS_TABLE_V6, opt.mss) as usize]
                );
                let got = decode(
                    &secret(),
                    T0,
                    local6(),
                    remote6(),
                    &ack_for(&c, CLIENT_ISN),
                    &cfg,
                )
                .unwrap_or_else(|| panic!("{opt:?}"));
                assert_eq!(got.mss, c.mss);
                assert_eq!(got.timestamps, clock.is_some());
                if clock.is_some() {
                    assert_eq!((got.wscale, got.sack_ok), (opt.wscale, opt.sack_ok));
                }
            }
        }
    }

    #[test]
    fn ipv6_cookie_hashes_the_full_addresses_and_not_the_ipv4_tuple() {
        let cfg = Config::default();
        let opt = all_options()[77];
        let c = encode(&secret(), T0, local6(), remote6(), CLIENT_ISN, &opt, None);
        let good = ack_for(&c, CLIENT_ISN);
        assert!(decode(&secret(), T0, local6(), remote6(), &good, &cfg).is_some());
        // Another client differing only in the high 64 bits, or only in the last bit.
        for other in ["[3001:db8::2]:40000", "[2001:db8::3]:40000"] {
            let r: SocketAddr = other.parse().unwrap();
            assert_eq!(decode(&secret(), T0, local6(), r, &good, &cfg), None);
        }
        // The same ACK on IPv4 (an attacker replaying into the other family) fails.
        assert_eq!(decode(&secret(), T0, local(), remote(), &good, &cfg), None);
        // H0 and H1 are keyed on 41-byte messages in Linux's v6 order.
        let h = cookie_hash(&secret(), TAG_H1, local6(), remote6(), 9);
        let mut m = vec![TAG_H1];
        m.extend_from_slice(
            &"2001:db8::2"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        m.extend_from_slice(
            &"2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        m.extend_from_slice(&9u32.to_be_bytes());
        m.extend_from_slice(&40000u16.to_be_bytes());
        m.extend_from_slice(&80u16.to_be_bytes());
        assert_eq!(h, siphash24(secret().bytes(), &m) as u32);
    }

    #[test]
    fn ipv6_syn_without_mss_option_is_1220() {
        let syn = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: CLIENT_ISN,
            flags: TcpFlags(TcpFlags::SYN),
            ..TcpRepr::default()
        };
        let (opt, _) = negotiate(&syn, &Config::default(), &remote6());
        assert_eq!(opt.mss, 1220);
        let (opt, _) = negotiate(&syn, &Config::default(), &remote());
        assert_eq!(opt.mss, 536);
    }

    #[test]
    fn round_trip_every_mss_class_and_option_with_timestamps() {
        let cfg = Config::default();
        for opt in all_options() {
            let clock = 0x1234_5678;
            let c = encode(
                &secret(),
                T0,
                local(),
                remote(),
                CLIENT_ISN,
                &opt,
                Some(clock),
            );
            let ts = c.tsval.unwrap();
            assert!(ts <= clock && clock - ts < 64, "{ts:#x} vs {clock:#x}");
            let got = decode(
                &secret(),
                T0,
                local(),
                remote(),
                &ack_for(&c, CLIENT_ISN),
                &cfg,
            )
            .unwrap_or_else(|| panic!("{opt:?}"));
            assert_eq!(got.mss, MSS_TABLE[mss_index(&MSS_TABLE, opt.mss) as usize]);
            assert_eq!(got.mss, c.mss);
            assert!(got.timestamps);
            assert_eq!(got.wscale, opt.wscale);
            assert_eq!(got.sack_ok, opt.sack_ok);
            assert_eq!(got.ecn_ok, opt.ecn_ok);
        }
    }

    #[test]
    fn round_trip_without_timestamps_keeps_only_the_mss() {
        let cfg = Config::default();
        for opt in all_options() {
            let c = encode(&secret(), T0, local(), remote(), CLIENT_ISN, &opt, None);
            assert_eq!(c.tsval, None);
            let got = decode(
                &secret(),
                T0,
                local(),
                remote(),
                &ack_for(&c, CLIENT_ISN),
                &cfg,
            )
            .unwrap();
            assert_eq!(got.mss, c.mss);
            assert_eq!(
                (got.timestamps, got.wscale, got.sack_ok),
                (false, None, false)
            );
        }
    }

    #[test]
    fn timestamp_never_exceeds_the_clock_even_at_wrap() {
        let opt = SynOptions {
            mss: 1460,
            wscale: Some(7),
            sack_ok: true,
            ecn_ok: true,
        };
        for clock in [0u32, 1, 63, 64, 65, 0xffff_ffff, 0x8000_0000] {
            let ts = encode_timestamp(clock, &opt);
            assert_eq!(ts & TS_MASK, 7 | TS_OPT_SACK | TS_OPT_ECN);
            let behind = clock.wrapping_sub(ts);
            assert!(behind < 64, "clock {clock:#x} ts {ts:#x}");
        }
    }

    #[test]
    fn valid_for_the_current_and_next_minute_only() {
        let cfg = Config::default();
        let opt = all_options()[40];
        // Made at the very start of a minute: valid through the end of the next one.
        let start = Instant::from_secs(60 * 500);
        let c = encode(
            &secret(),
            start,
            local(),
            remote(),
            CLIENT_ISN,
            &opt,
            Some(99_999),
        );
        let a = ack_for(&c, CLIENT_ISN);
        let at = |s: u64| {
            decode(
                &secret(),
                Instant::from_micros(start.total_micros() + s),
                local(),
                remote(),
                &a,
                &cfg,
            )
        };
        assert!(at(0).is_some());
        assert!(at(119_999_999).is_some(), "age just under 2 minutes");
        assert!(at(120_000_000).is_none(), "2 minutes old");
        assert!(at(3_600_000_000).is_none());
        // Made at the end of a minute: the window is just over one minute.
        let late = Instant::from_micros(start.total_micros() + 59_999_999);
        let c = encode(&secret(), late, local(), remote(), CLIENT_ISN, &opt, None);
        let a = ack_for(&c, CLIENT_ISN);
        assert!(decode(
            &secret(),
            Instant::from_micros(late.total_micros() + 60_000_000),
            local(),
            remote(),
            &a,
            &cfg
        )
        .is_some());
        assert!(decode(
            &secret(),
            Instant::from_micros(late.total_micros() + 60_000_001),
            local(),
            remote(),
            &a,
            &cfg
        )
        .is_none());
        // From the future (clock went back, or a guessed counter): rejected too.
        assert!(decode(
            &secret(),
            Instant::from_secs(60 * 499),
            local(),
            remote(),
            &a,
            &cfg
        )
        .is_none());
    }

    #[test]
    fn wrong_secret_tuple_sequence_or_flags_are_rejected() {
        let cfg = Config::default();
        let opt = all_options()[77];
        let c = encode(
            &secret(),
            T0,
            local(),
            remote(),
            CLIENT_ISN,
            &opt,
            Some(5_000_000),
        );
        let good = ack_for(&c, CLIENT_ISN);
        assert!(decode(&secret(), T0, local(), remote(), &good, &cfg).is_some());
        let other = Secret::fixed_for_tests([0x55; 16]);
        assert_eq!(decode(&other, T0, local(), remote(), &good, &cfg), None);
        let r2 = SocketAddr::new(remote().ip(), remote().port() + 1);
        assert_eq!(decode(&secret(), T0, local(), r2, &good, &cfg), None);
        let l2: SocketAddr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 9), 80).into();
        assert_eq!(decode(&secret(), T0, l2, remote(), &good, &cfg), None);
        let mut a = good;
        a.seq = a.seq.wrapping_add(1);
        assert_eq!(decode(&secret(), T0, local(), remote(), &a, &cfg), None);
        let mut a = good;
        a.ack = a.ack.wrapping_add(1 << 20);
        assert_eq!(decode(&secret(), T0, local(), remote(), &a, &cfg), None);
        for flags in [
            TcpFlags::SYN | TcpFlags::ACK,
            TcpFlags::RST | TcpFlags::ACK,
            0,
        ] {
            let mut a = good;
            a.flags = TcpFlags(flags);
            assert_eq!(decode(&secret(), T0, local(), remote(), &a, &cfg), None);
        }
    }

    #[test]
    fn random_acks_almost_never_verify() {
        // A forged ACK passes with probability ~2^-29; 200,000 random tries must all fail.
        let cfg = Config::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut passed = 0;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = TcpRepr {
                src_port: remote().port(),
                dst_port: local().port(),
                seq: x as u32,
                ack: (x >> 32) as u32,
                flags: TcpFlags(TcpFlags::ACK),
                ..TcpRepr::default()
            };
            passed += usize::from(decode(&secret(), T0, local(), remote(), &a, &cfg).is_some());
        }
        assert_eq!(passed, 0);
    }

    #[test]
    fn options_the_listener_refuses_are_rejected() {
        let opt = SynOptions {
            mss: 1460,
            wscale: Some(7),
            sack_ok: true,
            ecn_ok: false,
        };
        let c = encode(
            &secret(),
            T0,
            local(),
            remote(),
            CLIENT_ISN,
            &opt,
            Some(1 << 20),
        );
        let a = ack_for(&c, CLIENT_ISN);
        let d = |cfg: Config| decode(&secret(), T0, local(), remote(), &a, &cfg);
        assert!(d(Config::default()).is_some());
        assert!(d(Config {
            timestamps: false,
            ..Config::default()
        })
        .is_none());
        assert!(d(Config {
            sack: false,
            ..Config::default()
        })
        .is_none());
        assert!(d(Config {
            window_scaling: false,
            ..Config::default()
        })
        .is_none());
    }

    #[test]
    fn syn_ack_offers_options_only_with_timestamps() {
        let cfg = Config::default();
        let mut syn = TcpRepr {
            src_port: remote().port(),
            dst_port: local().port(),
            seq: CLIENT_ISN,
            flags: TcpFlags(TcpFlags::SYN),
            window: 64240,
            ..TcpRepr::default()
        };
        syn.options.mss = Some(1460);
        syn.options.window_scale = Some(7);
        syn.options.sack_permitted = true;
        let (opt, ts) = negotiate(&syn, &cfg, &remote());
        assert!(!ts);
        assert_eq!((opt.wscale, opt.sack_ok), (None, false));
        let c = encode(&secret(), T0, local(), remote(), CLIENT_ISN, &opt, None);
        let r = syn_ack(&syn, &cfg, &opt, &c);
        assert_eq!((r.seq, r.ack), (c.isn, CLIENT_ISN.wrapping_add(1)));
        assert_eq!(r.options.window_scale, None);
        assert!(!r.options.sack_permitted && r.options.timestamps.is_none());

        syn.options.timestamps = Some(Timestamps {
            tsval: 42,
            tsecr: 0,
        });
        let (opt, ts) = negotiate(&syn, &cfg, &remote());
        assert!(ts);
        let c = encode(
            &secret(),
            T0,
            local(),
            remote(),
            CLIENT_ISN,
            &opt,
            Some(1 << 30),
        );
        let r = syn_ack(&syn, &cfg, &opt, &c);
        assert_eq!(r.options.window_scale, Some(cfg.announced_wscale()));
        assert!(r.options.sack_permitted);
        assert_eq!(
            r.options.timestamps,
            Some(Timestamps {
                tsval: c.tsval.unwrap(),
                tsecr: 42
            })
        );
        // The rebuilt SYN reproduces what the client sent (MSS rounded to the table).
        let got = decode(
            &secret(),
            T0,
            local(),
            remote(),
            &ack_for(&c, CLIENT_ISN),
            &cfg,
        )
        .unwrap();
        let re = rebuilt_syn(&ack_for(&c, CLIENT_ISN), &got);
        assert_eq!(re.seq, CLIENT_ISN);
        assert_eq!(re.options.mss, Some(1460));
        assert_eq!(re.options.window_scale, Some(7));
        assert!(re.options.sack_permitted);
        assert_eq!(re.options.timestamps.map(|t| t.tsval), Some(777));
    }
}
