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
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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

/// The roots of a PEM file of CA certificates (`flag` names it in errors).
fn read_roots(path: &Path, flag: &str) -> anyhow::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(path, flag)? {
        roots
            .add(c)
            .map_err(|e| usage(format!("{flag} {}: {e}", path.display())))?;
    }
    Ok(roots)
}

/// A certificate and its private key, from PEM files: the flags that
/// named them are said in errors.
pub struct Identity<'a> {
    pub cert: (&'a Path, &'a str),
    pub key: (&'a Path, &'a str),
}

impl Identity<'_> {
    fn read(&self) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let (path, flag) = self.key;
        let chain = read_certs(self.cert.0, self.cert.1)?;
        let key = PrivateKeyDer::from_pem_file(path).map_err(|e| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let why = if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
                "the key is encrypted, which h2probe cannot read: decrypt it \
                 (openssl pkey -in KEY -out plain-key.pem)"
                    .to_string()
            } else if matches!(e, rustls::pki_types::pem::Error::NoItemsFound) {
                "no PEM private key (-----BEGIN PRIVATE KEY-----, or its RSA or EC form) in it"
                    .to_string()
            } else {
                e.to_string()
            };
            usage(format!("{flag} {}: {why}", path.display()))
        })?;
        Ok((chain, key))
    }

    /// rustls refused the pair (a key that is not the certificate's, most
    /// often): both flags are named.
    fn refused(&self, e: rustls::Error) -> anyhow::Error {
        let what = match e {
            rustls::Error::InconsistentKeys(_) => format!("the key is not the certificate's ({e})"),
            e => e.to_string(),
        };
        usage(format!("{}/{}: {what}", self.cert.1, self.key.1))
    }
}

/// The client's TLS configuration: ALPN h2, the key log, either the
/// system's roots, the roots of `ca`, or no verification at all, and the
/// certificate the client shows when the server asks for one (`--cert`,
/// `--key`: mutual TLS).
pub fn client_config(
    ca: Option<&Path>,
    insecure: bool,
    identity: Option<Identity<'_>>,
) -> anyhow::Result<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
    } else {
        let roots = match ca {
            Some(path) => read_roots(path, "--ca")?,
            None => {
                let mut roots = rustls::RootCertStore::empty();
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
                roots
            }
        };
        builder.with_root_certificates(roots)
    };
    let mut cfg = match identity {
        Some(id) => {
            let (chain, key) = id.read()?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| id.refused(e))?
        }
        None => builder.with_no_client_auth(),
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

/// The server's TLS configuration from a PEM certificate chain and its key;
/// with `client_ca` (`--client-ca`), every client must show a certificate
/// issued by one of its CAs (mutual TLS), or its handshake fails.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> anyhow::Result<rustls::ServerConfig> {
    let id = Identity {
        cert: (cert, "--tls-cert"),
        key: (key, "--tls-key"),
    };
    let (chain, key) = id.read()?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(path) => {
            let roots = Arc::new(read_roots(path, "--client-ca")?);
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider())
                    .build()
                    .map_err(|e| usage(format!("--client-ca {}: {e}", path.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| id.refused(e))?;
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

/// What to do about an alert the server sent about the client's
/// certificate (mutual TLS), given whether the client showed one
/// (`--cert`). Under TLS 1.3 the server judges the client's certificate
/// after the client's handshake is done, so the alert arrives on the
/// connection's first read, not in the handshake.
pub fn client_cert_hint(e: &std::io::Error, showed_cert: bool) -> &'static str {
    use rustls::AlertDescription as A;
    let Some(rustls::Error::AlertReceived(alert)) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return "";
    };
    match (alert, showed_cert) {
        (A::CertificateRequired, false) => {
            " (the server asks for a client certificate (mutual TLS): give --cert and --key)"
        }
        // rustls sends none when the key's type suits none of the
        // signature schemes the server accepts.
        (A::CertificateRequired, true) => {
            " (the server asks for a client certificate and took none from --cert: is its key's type \
             one the server accepts?)"
        }
        // TLS 1.2 servers say a missing certificate in these words too.
        (A::BadCertificate | A::UnknownCA | A::CertificateUnknown | A::HandshakeFailure, false) => {
            " (if the server asks for a client certificate (mutual TLS), give --cert and --key)"
        }
        (A::UnknownCA, true) => {
            " (the server refused the client certificate of --cert: its issuer is not among the CAs \
             the server trusts for clients)"
        }
        (A::CertificateExpired, true) => {
            " (the server refused the client certificate of --cert: it has expired, or is not valid yet)"
        }
        (A::UnsupportedCertificate, true) => {
            " (the server refused the client certificate of --cert: its extendedKeyUsage must \
             allow clientAuth)"
        }
        (A::BadCertificate | A::CertificateUnknown | A::CertificateRevoked | A::AccessDenied, true) => {
            " (the server refused the client certificate of --cert: check its issuer, dates and \
             extendedKeyUsage (clientAuth))"
        }
        _ => "",
    }
}

/// What to say when a TLS server closes the connection before any byte
/// of HTTP/2 reached the client: some servers (gRPC's C core) refuse a
/// client certificate, or its absence, by closing without an alert.
fn closed_before_http2_hint(showed_cert: bool) -> &'static str {
    if showed_cert {
        " (the server closed the connection before its first frame: it may have refused the \
         client certificate of --cert)"
    } else {
        " (the server closed the connection before its first frame: if it asks for a client \
         certificate (mutual TLS), give --cert and --key)"
    }
}

/// What to do about a failed handshake, for the common certificate
/// mistakes (appended to the error; empty when there is nothing to add).
pub fn hint(e: &std::io::Error, showed_cert: bool) -> &'static str {
    let text = format!("{e:?}");
    let client_cert = client_cert_hint(e, showed_cert);
    if !client_cert.is_empty() {
        client_cert
    } else if text.contains("CaUsedAsEndEntity") {
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

/// After a refused handshake the server's alert is on its way. Closing
/// with the client's bytes unread would reset the connection, and a reset
/// can overtake the alert: the client, which under TLS 1.3 has finished its
/// handshake and written its first frames, then reads "connection reset",
/// not why. So: half-close, then read and discard until the client closes,
/// for at most a second and 64 KiB.
pub async fn linger<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let _ = io.shutdown().await;
    let mut buf = [0u8; 4096];
    let mut left = 64 * 1024usize;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while left > 0 {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// A client's TLS stream whose errors say what to do about the server's
/// refusal of the client's certificate ([`client_cert_hint`]), which
/// surfaces as HTTP/2's error after the handshake: an alert, or a close
/// before the server's first byte.
pub struct ExplainAlerts<S> {
    inner: S,
    showed_cert: bool,
    /// Whether any plaintext arrived (after it, a close is not a refusal).
    heard: bool,
}

impl<S> ExplainAlerts<S> {
    pub fn new(inner: S, showed_cert: bool) -> Self {
        ExplainAlerts {
            inner,
            showed_cert,
            heard: false,
        }
    }

    fn explain<T>(&self, r: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        let Poll::Ready(Err(e)) = r else {
            return r;
        };
        let mut hint = client_cert_hint(&e, self.showed_cert);
        if hint.is_empty() && !self.heard && is_a_close(&e) {
            hint = closed_before_http2_hint(self.showed_cert);
        }
        if hint.is_empty() {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Err(std::io::Error::new(e.kind(), format!("{e}{hint}"))))
    }
}

/// The peer went away: an end without close_notify, a reset, a broken pipe.
fn is_a_close(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::UnexpectedEof | K::ConnectionReset | K::BrokenPipe | K::ConnectionAborted
    )
}

impl<S: AsyncRead + Unpin> AsyncRead for ExplainAlerts<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.heard = true;
        }
        self.explain(r)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ExplainAlerts<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.explain(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.explain(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.explain(r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.explain(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::AlertDescription as A;
    use tokio::io::AsyncReadExt as _;

    fn alert(a: A) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(a),
        )
    }

    /// Each alert about a client certificate says what to do, and names
    /// --cert only when one was shown.
    #[test]
    fn alerts_about_the_client_certificate_say_what_to_do() {
        for (a, showed, says) in [
            (A::CertificateRequired, false, "give --cert and --key"),
            (A::CertificateRequired, true, "took none from --cert"),
            (
                A::BadCertificate,
                false,
                "if the server asks for a client certificate",
            ),
            (
                A::HandshakeFailure,
                false,
                "if the server asks for a client certificate",
            ),
            (A::UnknownCA, true, "its issuer is not among the CAs"),
            (A::CertificateExpired, true, "it has expired"),
            (
                A::UnsupportedCertificate,
                true,
                "extendedKeyUsage must allow clientAuth",
            ),
            (
                A::BadCertificate,
                true,
                "check its issuer, dates and extendedKeyUsage",
            ),
        ] {
            let hint = client_cert_hint(&alert(a), showed);
            assert!(hint.contains(says), "{a:?} {showed}: {hint}");
            assert_eq!(
                hint.contains(" --cert:") || hint.contains("from --cert"),
                showed
            );
        }
        // Not about the client's certificate: nothing to add.
        assert_eq!(client_cert_hint(&alert(A::DecodeError), true), "");
        assert_eq!(client_cert_hint(&alert(A::HandshakeFailure), true), "");
    }

    /// A stream that returns `bytes` and then fails with `kind`.
    struct Then(&'static [u8], std::io::ErrorKind);

    impl AsyncRead for Then {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if self.0.is_empty() {
                return Poll::Ready(Err(self.1.into()));
            }
            buf.put_slice(self.0);
            self.0 = &[];
            Poll::Ready(Ok(()))
        }
    }

    /// A close before the server's first byte may be a refused (or
    /// wanted) certificate; after it, it is said as it is.
    #[tokio::test]
    async fn a_close_before_the_first_byte_may_be_about_the_certificate() {
        let mut buf = [0u8; 16];
        for (showed, says) in [(false, "give --cert and --key"), (true, "may have refused")] {
            let mut s = ExplainAlerts::new(Then(b"", std::io::ErrorKind::UnexpectedEof), showed);
            let e = s.read(&mut buf).await.unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        let mut s = ExplainAlerts::new(Then(b"frame", std::io::ErrorKind::ConnectionReset), false);
        assert_eq!(s.read(&mut buf).await.unwrap(), 5);
        let e = s.read(&mut buf).await.unwrap_err();
        assert!(!e.to_string().contains("--cert"), "{e}");
    }
}
