//! Where a request comes from, and how many failed authentications that source may make.
//!
//! The source is the connection's peer, or, when the peer is a proxy named by
//! `--trusted-proxy CIDR`, the right-most hop of `Forwarded` (RFC 7239) or `X-Forwarded-For` that
//! is not itself a trusted proxy: the hops to its left are whatever the client wrote.
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

/// The proxies whose forwarding headers are believed.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses `--trusted-proxy` values (`10.0.0.0/8`, `::1/128`, or one address).
    pub(crate) fn parse(values: &[String]) -> Result<TrustedProxies, String> {
        values
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
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    fn trusts(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The source of a request from `peer` with `headers`.
    pub(crate) fn source(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return peer;
        }
        // The hops, left to right as written; the right-most untrusted one is the client.
        let mut hops: Vec<Option<IpAddr>> = Vec::new();
        let forwarded: Vec<&str> = headers
            .get_all("forwarded")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if forwarded.is_empty() {
            for value in headers.get_all("x-forwarded-for") {
                let Ok(value) = value.to_str() else {
                    hops.push(None);
                    continue;
                };
                hops.extend(value.split(',').map(|hop| parse_hop(hop.trim())));
            }
        } else {
            for value in forwarded {
                for element in value.split(',') {
                    let node = element.split(';').find_map(|pair| {
                        let (name, value) = pair.trim().split_once('=')?;
                        name.trim()
                            .eq_ignore_ascii_case("for")
                            .then(|| value.trim().trim_matches('"'))
                    });
                    hops.push(node.and_then(parse_hop));
                }
            }
        }
        for hop in hops.iter().rev() {
            match hop {
                Some(address) if self.trusts(*address) => continue,
                Some(address) => return canonical(*address),
                // A hop that is not an address (`unknown`, an obfuscated name): the trusted
                // proxy's own view ends there.
                None => return peer,
            }
        }
        peer
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
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
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
            // Forget the source seen least recently.
            if let Some(oldest) = table
                .iter()
                .min_by_key(|(_, account)| account.seen)
                .map(|(address, _)| *address)
            {
                table.remove(&oldest);
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
        let proxies = TrustedProxies::parse(&["10.0.0.0/8".into(), "127.0.0.1".into()]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let spoofed = headers(&[("x-forwarded-for", "6.6.6.6, 192.0.2.7, 10.1.1.1")]);
        // From a trusted proxy: the right-most hop it did not add itself.
        assert_eq!(proxies.source(ip("10.0.0.5"), &spoofed), ip("192.0.2.7"));
        // From anyone else, the headers are the client's own words: the peer.
        assert_eq!(proxies.source(ip("192.0.2.9"), &spoofed), ip("192.0.2.9"));
        let forwarded = headers(&[(
            "forwarded",
            "for=6.6.6.6, for=\"[2001:db8::1]:4711\";proto=https, for=10.2.2.2",
        )]);
        assert_eq!(
            proxies.source(ip("127.0.0.1"), &forwarded),
            ip("2001:db8::1")
        );
        let unknown = headers(&[("forwarded", "for=192.0.2.1, for=unknown")]);
        assert_eq!(proxies.source(ip("127.0.0.1"), &unknown), ip("127.0.0.1"));
        assert!(TrustedProxies::parse(&["nope".into()]).is_err());
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
