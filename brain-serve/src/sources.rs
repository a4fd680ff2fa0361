//! Where a request comes from, and how many failed authentications that source may make.
//!
//! The source is the connection's peer, or, when the peer is a proxy named by
//! `--trusted-proxy CIDR`, the right-most hop of the one header that proxy writes —
//! `X-Forwarded-For`, or with `--forwarded-header forwarded` `Forwarded` (RFC 7239), never the
//! other, which the client may have written — that is not itself a trusted proxy: the hops to
//! its left are whatever the client wrote. An IPv6 source is its /64: one host holds a /64.
//!
//! Failed authentications are counted per source in a bounded table (the least recently seen
//! source is forgotten first) by a GCRA: `per_minute` failures in any minute, after which the
//! source's requests are answered 429 at once, with `Retry-After`, without being checked.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// How many sources the table remembers.
const TABLE_SIZE: usize = 16_384;

/// The proxies whose forwarding header is believed, and which header they write.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies {
    nets: Vec<IpNet>,
    /// `Forwarded` (RFC 7239) instead of `X-Forwarded-For`.
    forwarded: bool,
}

impl TrustedProxies {
    /// Parses `--trusted-proxy` values (`10.0.0.0/8`, `::1/128`, or one address) and
    /// `--forwarded-header` (`x-forwarded-for`, the default, or `forwarded`).
    pub(crate) fn parse(values: &[String], header: Option<&str>) -> Result<TrustedProxies, String> {
        let forwarded = match header.map(str::to_ascii_lowercase).as_deref() {
            None | Some("x-forwarded-for") => false,
            Some("forwarded") => true,
            Some(other) => {
                return Err(format!(
                    "--forwarded-header {other:?} is neither `x-forwarded-for` nor `forwarded`: \
                     name the one header your proxy writes"
                ));
            }
        };
        let nets = values
            .iter()
            .map(|value| {
                value
                    .parse::<IpNet>()
                    .or_else(|_| value.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!(
                            "--trusted-proxy {value:?} is not an address or a CIDR block (e.g. \
                             `10.0.0.0/8` or `127.0.0.1`)"
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(TrustedProxies { nets, forwarded })
    }

    fn trusts(&self, address: IpAddr) -> bool {
        let address = mapped(address);
        self.nets.iter().any(|net| net.contains(&address))
    }

    /// The source of a request from `peer` with `headers`.
    pub(crate) fn source(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return source_of(peer);
        }
        // The hops, left to right as written, each element parsed alone (one the proxy did not
        // write cannot spoil the ones it did); the right-most untrusted one is the client.
        let mut hops: Vec<Option<IpAddr>> = Vec::new();
        let name = if self.forwarded {
            "forwarded"
        } else {
            "x-forwarded-for"
        };
        for value in headers.get_all(name) {
            for element in value.as_bytes().split(|byte| *byte == b',') {
                let element = std::str::from_utf8(element).ok().map(str::trim);
                let hop = if self.forwarded {
                    element.and_then(|element| {
                        element.split(';').find_map(|pair| {
                            let (name, value) = pair.trim().split_once('=')?;
                            name.trim()
                                .eq_ignore_ascii_case("for")
                                .then(|| value.trim().trim_matches('"'))
                        })
                    })
                } else {
                    element
                };
                hops.push(hop.and_then(parse_hop));
            }
        }
        for hop in hops.iter().rev() {
            match hop {
                Some(address) if self.trusts(*address) => continue,
                Some(address) => return source_of(*address),
                // A hop that is not an address (`unknown`, an obfuscated name): the trusted
                // proxy's own view ends there.
                None => return source_of(peer),
            }
        }
        source_of(peer)
    }
}

/// An address of a forwarding header: `192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]:80`,
/// `2001:db8::1`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(address) = hop.parse::<IpAddr>() {
        return Some(address);
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    hop.rsplit_once(':')?.0.parse().ok()
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn mapped(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// What counts as one source: an IPv4 address, or an IPv6 address's /64 (one host's share:
/// counted by /128, a host would be 2^64 sources).
pub(crate) fn source_of(address: IpAddr) -> IpAddr {
    match mapped(address) {
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(
            u128::from(v6) & !u128::from(u64::MAX),
        )),
        v4 => v4,
    }
}

/// Failed authentications per source.
pub(crate) struct Throttle {
    /// The time one failure costs: a minute over the allowance.
    cost: Duration,
    /// How far ahead of now a source's account may run: a minute.
    window: Duration,
    table: Mutex<HashMap<IpAddr, Account>>,
}

#[derive(Clone, Copy)]
struct Account {
    /// The GCRA's theoretical arrival time.
    due: Instant,
    seen: Instant,
}

impl Throttle {
    pub(crate) fn new(per_minute: u32) -> Throttle {
        let window = Duration::from_secs(60);
        Throttle {
            cost: window / per_minute.max(1),
            window,
            table: Mutex::default(),
        }
    }

    /// `Some(retry after)` when `source` has used up its failures.
    pub(crate) fn throttled(&self, source: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let account = table.get(&source)?;
        let ahead = account.due.checked_duration_since(now)?;
        // The next failure would put the account beyond the window: wait until it would not.
        (ahead + self.cost > self.window).then(|| ahead + self.cost - self.window)
    }

    /// Counts a failed authentication of `source`.
    pub(crate) fn failed(&self, source: IpAddr) {
        let now = Instant::now();
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if !table.contains_key(&source) && table.len() >= TABLE_SIZE {
            // Full: forget the sources no longer throttled, and if that frees too little the
            // least recently seen sixteenth (one pass, then room for many more).
            table.retain(|_, account| account.due > now);
            if table.len() >= TABLE_SIZE - TABLE_SIZE / 16 {
                let mut seen: Vec<Instant> = table.values().map(|account| account.seen).collect();
                let (_, cut, _) = seen.select_nth_unstable(TABLE_SIZE / 16);
                let cut = *cut;
                table.retain(|_, account| account.seen > cut);
            }
        }
        let account = table.entry(source).or_insert(Account {
            due: now,
            seen: now,
        });
        account.due = account.due.max(now) + self.cost;
        account.seen = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn the_source_is_the_right_most_untrusted_hop() {
        let proxies =
            TrustedProxies::parse(&["10.0.0.0/8".into(), "127.0.0.1".into()], None).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let spoofed = headers(&[("x-forwarded-for", "6.6.6.6, 192.0.2.7, 10.1.1.1")]);
        // From a trusted proxy: the right-most hop it did not add itself.
        assert_eq!(proxies.source(ip("10.0.0.5"), &spoofed), ip("192.0.2.7"));
        // From anyone else, the headers are the client's own words: the peer.
        assert_eq!(proxies.source(ip("192.0.2.9"), &spoofed), ip("192.0.2.9"));
        // `Forwarded` is the client's word when the proxy writes `X-Forwarded-For`.
        let both = headers(&[
            ("forwarded", "for=192.0.2.66"),
            ("x-forwarded-for", "192.0.2.8"),
        ]);
        assert_eq!(proxies.source(ip("10.0.0.5"), &both), ip("192.0.2.8"));
        let rfc = TrustedProxies::parse(&["127.0.0.1".into()], Some("forwarded")).unwrap();
        let forwarded = headers(&[
            (
                "forwarded",
                "for=6.6.6.6, for=\"[2001:db8::1]:4711\";proto=https, for=127.0.0.1",
            ),
            ("x-forwarded-for", "192.0.2.66"),
        ]);
        assert_eq!(rfc.source(ip("127.0.0.1"), &forwarded), ip("2001:db8::"));
        let unknown = headers(&[("forwarded", "for=192.0.2.1, for=unknown")]);
        assert_eq!(rfc.source(ip("127.0.0.1"), &unknown), ip("127.0.0.1"));
        // An element that is not text spoils only itself.
        let mut garbled = HeaderMap::new();
        garbled.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"\xff\xfe, 192.0.2.9").unwrap(),
        );
        assert_eq!(proxies.source(ip("10.0.0.5"), &garbled), ip("192.0.2.9"));
        // One IPv6 host is its /64.
        assert_eq!(
            proxies.source(ip("2001:db8:1:2:aaaa::1"), &HeaderMap::new()),
            ip("2001:db8:1:2::")
        );
        assert!(TrustedProxies::parse(&["nope".into()], None).is_err());
        assert!(TrustedProxies::parse(&[], Some("x-real-ip")).is_err());
    }

    #[test]
    fn failures_are_throttled_per_source() {
        let throttle = Throttle::new(3);
        let attacker = IpAddr::from([127, 0, 0, 2]);
        let client = IpAddr::from([127, 0, 0, 1]);
        for _ in 0..3 {
            assert!(throttle.throttled(attacker).is_none());
            throttle.failed(attacker);
        }
        let wait = throttle.throttled(attacker).expect("throttled after 3");
        assert!(wait <= Duration::from_secs(20), "{wait:?}");
        assert!(throttle.throttled(client).is_none());
    }
}
