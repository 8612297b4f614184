//! TLS for the model gateway (as a client of the provider) and for the scripted model (as a
//! server standing in for a provider in tests and benchmarks). rustls with ring: no system
//! library, so the shim stays one static binary.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The bytes of `path`, with an error naming it as `what`.
pub fn read(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("reading the {what} {path}: {e}"))
}

/// A client that trusts the public web's roots (Mozilla's list, built in) and the
/// certificates of `extra_ca` (PEM text, and where it came from for messages), speaking
/// HTTP/1.1 only.
pub fn client(extra_ca: Option<(&[u8], &str)>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some((pem, path)) = extra_ca {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| format!("{path}: not a PEM certificate: {e}"))?;
            roots.add(cert).map_err(|e| format!("{path}: a certificate that cannot be a trust anchor: {e}"))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A server presenting the certificate chain of `cert` with the private key of `key` (PEM).
pub fn server(cert: &str, key: &str) -> Result<Arc<ServerConfig>, String> {
    let pem = read(cert, "certificate file")?;
    let chain = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| format!("{cert}: not a PEM certificate chain: {e}"))?;
    if chain.is_empty() {
        return Err(format!("{cert} holds no PEM certificate"));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read(key, "private key file")?).map_err(|e| format!("{key}: not a PEM private key: {e}"))?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| format!("{cert} and {key} do not make a certificate and its key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
