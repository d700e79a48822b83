//! Stockade's network egress: the pieces of the egress proxy that decide, as pure functions
//! over bytes and addresses, with no I/O.
//!
//! A sandboxed command reaches the network only through the proxy (HTTP forward proxy,
//! `CONNECT`, SOCKS5). For every connection the proxy learns a [`Target`] from the client
//! ([`http::parse_connect_authority`], [`http::parse_absolute_target`],
//! [`socks5::parse_request`]), applies the policy's rules to it, resolves a name itself and
//! refuses any address [`ssrf::check`] forbids, connects to exactly the address it checked, and
//! refuses domain fronting: a tunnel whose TLS [`sni`] names another host, or a plain request
//! whose `Host` header does ([`http::host_header_matches`]).
//!
//! Every host goes through [`normalize_host`] first, so rules and checks compare one spelling:
//! lower-case names without a trailing dot, canonical IP text, and no legacy numeric IPv4
//! forms (`127.1`) pretending to be names.
//!
//! ```
//! use net::{http, sni, ssrf, Target};
//!
//! // CONNECT allowed.test:443, then the client's first bytes.
//! let target = http::parse_connect_authority("allowed.test:443")?;
//! let hello = sni::tests_support::client_hello(Some("allowed.test"));
//! let sni::Sni::Found(found) = sni::parse(&hello) else { unreachable!() };
//! assert!(found.server_name.is_some_and(|name| target.host_matches(&name)));
//!
//! // The name resolved to the cloud metadata service: refused before any connect.
//! let resolved = "169.254.169.254".parse().unwrap();
//! assert_eq!(ssrf::forbidden(resolved).map(|f| f.code()), Some("cloud_metadata"));
//! # Ok::<(), http::Error>(())
//! ```

#![forbid(unsafe_code)]

pub mod credential;
pub mod http;
pub mod proxy;
pub mod resolve;
pub mod sni;
pub mod socks5;
pub mod ssrf;
mod target;

pub use target::{normalize_host, Target, TargetError, MAX_HOST_LEN, MAX_LABEL_LEN};
