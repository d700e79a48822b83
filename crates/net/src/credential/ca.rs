//! The per-run certificate authority of masked credentials: made when the run starts, its
//! key only in this process's memory, its certificate given to the sandbox as a trusted root.
//! It can only sign the masked credentials' hosts (X.509 name constraints), and the proxy
//! uses it only for them: every other tunnel is spliced untouched.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The run's CA.
pub struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
    /// One server configuration per host, made on first use.
    servers: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca(<per-run>)")
    }
}

fn rcgen_error(e: rcgen::Error) -> String {
    format!("the per-run CA: {e}")
}

impl Ca {
    /// A new CA that can sign only `hosts` (names or addresses), valid for a day.
    pub fn new(hosts: &[String]) -> Result<Ca, String> {
        let key = rcgen::KeyPair::generate().map_err(rcgen_error)?;
        let mut params =
            rcgen::CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            "stockade per-run CA (masked credentials)",
        );
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let now = std::time::SystemTime::now();
        params.not_before = (now - std::time::Duration::from_secs(3600)).into();
        params.not_after = (now + std::time::Duration::from_secs(86_400)).into();
        let mut permitted = Vec::new();
        for h in hosts {
            let bare = h.trim_start_matches('[').trim_end_matches(']');
            match bare.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(ip)) => permitted.push(rcgen::GeneralSubtree::IpAddress(
                    rcgen::CidrSubnet::V4(ip.octets(), [255; 4]),
                )),
                Ok(std::net::IpAddr::V6(ip)) => permitted.push(rcgen::GeneralSubtree::IpAddress(
                    rcgen::CidrSubnet::V6(ip.octets(), [255; 16]),
                )),
                Err(_) => permitted.push(rcgen::GeneralSubtree::DnsName(bare.to_owned())),
            }
        }
        // Names only: no address at all (an unconstrained type would be open).
        let names_only = !permitted
            .iter()
            .any(|p| matches!(p, rcgen::GeneralSubtree::IpAddress(_)));
        let excluded = if names_only {
            vec![
                rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::V4([0; 4], [0; 4])),
                rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::V6([0; 16], [0; 16])),
            ]
        } else {
            Vec::new()
        };
        params.name_constraints = Some(rcgen::NameConstraints {
            permitted_subtrees: permitted,
            excluded_subtrees: excluded,
        });
        let cert = params.self_signed(&key).map_err(rcgen_error)?;
        Ok(Ca {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            servers: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate (PEM), for the sandbox's trust stores.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The TLS server settings that present a certificate for `host` (HTTP/1.1 only).
    pub fn server(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        if let Some(c) = self.servers.lock().ok().and_then(|m| m.get(host).cloned()) {
            return Ok(c);
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let key = rcgen::KeyPair::generate().map_err(rcgen_error)?;
        let mut params =
            rcgen::CertificateParams::new(vec![bare.to_owned()]).map_err(rcgen_error)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, bare);
        let now = std::time::SystemTime::now();
        params.not_before = (now - std::time::Duration::from_secs(3600)).into();
        params.not_after = (now + std::time::Duration::from_secs(86_400)).into();
        let cert = params.signed_by(&key, &self.issuer).map_err(rcgen_error)?;
        let der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS settings: {e}"))?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], der)
            .map_err(|e| format!("TLS settings: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if let Ok(mut m) = self.servers.lock() {
            m.insert(host.to_owned(), config.clone());
        }
        Ok(config)
    }
}
