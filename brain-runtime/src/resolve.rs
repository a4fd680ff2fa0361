//! Name resolution for the HTTP client: `localhost` (and `*.localhost`) always means loopback
//! (RFC 6761), without asking the system resolver — which a statically linked binary may not be
//! able to load. Other names go to the system resolver.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The resolver brain's HTTP client uses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Resolver;

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            if host == "localhost" || host.ends_with(".localhost") {
                let loopback = [
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(Ipv6Addr::LOCALHOST),
                ];
                let addrs: Addrs = Box::new(loopback.into_iter().map(|ip| SocketAddr::new(ip, 0)));
                return Ok(addrs);
            }
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}
