//! TLS for the endpoints (rustls with ring): the client's configuration
//! (ALPN h2; the system's roots, `--ca FILE`, or `--insecure`), the server's
//! from PEM files, and the key log. Both honour `SSLKEYLOGFILE` (NSS key log
//! format), so Wireshark can decrypt a capture taken alongside a run.
//!
//! The taps stay on the plaintext side of TLS (every frame is still
//! recorded); `socket_blocked` is measured below TLS, on the TCP socket
//! (`tap::SocketWatch`).

use crate::config::UsageError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// The ALPN protocol id of HTTP/2 over TLS (RFC 9113 §3.2).
pub const ALPN_H2: &[u8] = b"h2";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn usage(msg: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg))
}

/// Reads every certificate of a PEM file (a bad or empty file is a usage error).
pub fn read_certs(path: &Path, flag: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| usage(format!("{flag} {}: {e}", path.display())))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| usage(format!("{flag} {}: {e}", path.display())))?;
    crate::refuse_unless!(
        !certs.is_empty(),
        "{flag} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
        path.display()
    );
    Ok(certs)
}

/// The client's TLS configuration: ALPN h2, the key log, and either the
/// system's roots, the roots of `ca`, or no verification at all.
pub fn client_config(ca: Option<&Path>, insecure: bool) -> anyhow::Result<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let mut cfg = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            Some(path) => {
                for c in read_certs(path, "--ca")? {
                    roots
                        .add(c)
                        .map_err(|e| usage(format!("--ca {}: {e}", path.display())))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                crate::refuse_unless!(
                    added > 0,
                    "--tls: no usable root certificate in the system's store ({}); give --ca FILE",
                    found
                        .errors
                        .first()
                        .map_or("it is empty".to_string(), |e| e.to_string())
                );
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    cfg.alpn_protocols = vec![ALPN_H2.to_vec()];
    cfg.key_log = key_log();
    Ok(cfg)
}

/// The key log `SSLKEYLOGFILE` asks for. rustls drops a file it cannot
/// open without a word (Wireshark then decrypts nothing, and nobody knows
/// why): it is opened once here, and a failure said on stderr.
fn key_log() -> Arc<dyn rustls::KeyLog> {
    if let Some(path) = std::env::var_os("SSLKEYLOGFILE") {
        if let Err(e) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
        {
            crate::say!(
                "warning: SSLKEYLOGFILE={}: {e}; no TLS keys are logged",
                std::path::Path::new(&path).display()
            );
        }
    }
    Arc::new(rustls::KeyLogFile::new())
}

/// The server's TLS configuration from a PEM certificate chain and its key.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let chain = read_certs(cert, "--tls-cert")?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| usage(format!("--tls-key {}: {e}", key.display())))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| usage(format!("--tls-cert/--tls-key: {e}")))?;
    cfg.alpn_protocols = vec![ALPN_H2.to_vec()];
    cfg.key_log = key_log();
    Ok(cfg)
}

/// The name a client checks the server's certificate against: the host of
/// the authority (a DNS name or an IP address; brackets of IPv6 removed).
pub fn server_name(host: &str) -> anyhow::Result<ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string())
        .map_err(|e| usage(format!("{host:?} is not a valid TLS server name: {e}")))
}

/// What to do about a failed handshake, for the common certificate
/// mistakes (appended to the error; empty when there is nothing to add).
pub fn hint(e: &std::io::Error) -> &'static str {
    let text = format!("{e:?}");
    if text.contains("CaUsedAsEndEntity") {
        " (the server's certificate is a CA certificate, basicConstraints CA:TRUE, which TLS refuses as a \
         server certificate: issue the server a leaf certificate signed by that CA, and give the CA to --ca)"
    } else if text.contains("UnknownIssuer") {
        " (its issuer is not among the trusted roots: give the CA with --ca FILE, or skip verification with --insecure)"
    } else if text.contains("NotValidForName") {
        " (the certificate does not carry the name asked for: --authority sets the name checked)"
    } else if text.contains("InvalidContentType") || text.contains("corrupt message") {
        " (the server did not answer in TLS: a cleartext h2c server is called without --tls)"
    } else if matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
    ) || text.contains("handshake eof")
    {
        " (the server closed or reset the connection during the TLS handshake: is it speaking TLS on that port?)"
    } else {
        ""
    }
}

/// `--insecure`: accepts any certificate, but still checks that the server
/// holds the key of the certificate it showed (the handshake signatures).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
