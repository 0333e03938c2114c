//! Where the client connects and how each request is addressed: `host:port`
//! (a DNS name, IPv4 or `[IPv6]`), `:authority`, TLS, and the request
//! metadata (`-H 'name: value'`).

use crate::config::UsageError;
use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// `client`: the server and how to reach it.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct TargetOpts {
    /// Server to connect to: HOST:PORT, where HOST is a DNS name
    /// (localhost), an IPv4 address or an IPv6 address in brackets
    /// ([::1]:50051). Every address the name resolves to is tried in order.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "HOST:PORT", value_parser = parse_host_port)]
    pub connect: String,

    /// The :authority of every request (and, with --tls, the name the
    /// certificate must carry). [default: --connect as given]
    #[arg(long, value_name = "HOST[:PORT]", value_parser = parse_authority)]
    pub authority: Option<String>,

    /// Speak TLS (ALPN h2), verifying the server against the system's roots
    /// (or --ca). The tap still records every frame (it sits above TLS);
    /// SSLKEYLOGFILE=FILE writes the session keys for Wireshark.
    #[arg(long)]
    pub tls: bool,

    /// With --tls: trust the CA certificates of this PEM file instead of
    /// the system's roots.
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub ca: Option<PathBuf>,

    /// With --tls: accept any server certificate (no verification; said on
    /// stderr and recorded in meta.json).
    #[arg(long, requires = "tls", conflicts_with = "ca")]
    pub insecure: bool,

    /// With --tls: show the server this PEM certificate chain when it asks
    /// for one (mutual TLS; and --key).
    #[arg(long, value_name = "FILE", requires_all = ["tls", "key"])]
    pub cert: Option<PathBuf>,

    /// The PEM private key of --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// Request metadata, 'name: value' (repeatable). Names are lowercased;
    /// pseudo-headers and the headers the client sets itself (content-type,
    /// te, grpc-timeout: use --deadline) are refused, as are
    /// connection-specific ones HTTP/2 forbids.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    #[serde(serialize_with = "redacted_headers")]
    pub headers: Vec<String>,
}

/// Header names whose values are credentials: meta.json and its argv keep
/// the name and the value's length, not the value.
pub fn is_secret(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    [
        "authorization",
        "cookie",
        "token",
        "secret",
        "password",
        "api-key",
        "apikey",
        "x-api-key",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// `name: value` with a credential's value replaced by its length.
pub fn redact_header(h: &str) -> String {
    match h.split_once(':') {
        Some((name, value)) if is_secret(name) => {
            format!("{name}: <redacted, {} bytes>", value.trim().len())
        }
        _ => h.to_string(),
    }
}

fn redacted_headers<S: serde::Serializer>(h: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(h.iter().map(|h| redact_header(h)))
}

impl Default for TargetOpts {
    fn default() -> Self {
        TargetOpts {
            connect: "127.0.0.1:50051".into(),
            authority: None,
            tls: false,
            ca: None,
            insecure: false,
            cert: None,
            key: None,
            headers: vec![],
        }
    }
}

fn parse_authority(s: &str) -> Result<String, String> {
    let a: http::uri::Authority = s.parse().map_err(|e| {
        // An IPv6 address takes brackets before its port, as in a URL.
        use std::net::Ipv6Addr;
        let hint = match s.rsplit_once(':') {
            Some((host, port))
                if host.parse::<Ipv6Addr>().is_ok() && port.parse::<u16>().is_ok() =>
            {
                format!(" (an IPv6 address goes in brackets: [{host}]:{port})")
            }
            _ if s.parse::<Ipv6Addr>().is_ok() => {
                format!(" (an IPv6 address goes in brackets, with a port: [{s}]:PORT)")
            }
            _ if s.contains("://") => " (HOST:PORT, without a scheme)".to_string(),
            _ => String::new(),
        };
        format!("{s:?} is not a valid authority: {e}{hint}")
    })?;
    if a.as_str().contains('@') {
        return Err(format!(
            "{s:?}: userinfo (user@) is not allowed in :authority"
        ));
    }
    Ok(a.as_str().to_string())
}

/// `--connect`: an authority with a port.
fn parse_host_port(s: &str) -> Result<String, String> {
    let a = parse_authority(s)?;
    let parsed: http::uri::Authority = a.parse().expect("parsed above");
    // After an IPv6 literal's `]`, or the whole text: what follows the last
    // `:` is the port as written.
    let tail = a.rsplit_once(']').map_or(a.as_str(), |(_, r)| r);
    let written = tail
        .rsplit_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty());
    match (parsed.port_u16(), written) {
        (Some(0), _) => return Err(format!("{s:?}: port 0 cannot be connected to")),
        (Some(_), _) => {}
        (None, Some(p)) => return Err(format!("{s:?}: {p} is not a port (1 to 65535)")),
        (None, None) => {
            return Err(format!(
                "{s:?} has no port: give HOST:PORT, e.g. localhost:50051 or [::1]:50051"
            ))
        }
    }
    if parsed.host().is_empty() {
        return Err(format!("{s:?} has no host"));
    }
    Ok(a)
}

/// Headers h2probe sets itself or HTTP/2 forbids (RFC 9113 §8.2.2).
const RESERVED: &[(&str, &str)] = &[
    ("content-type", "the client sends application/grpc"),
    ("te", "the client sends te: trailers"),
    ("grpc-timeout", "use --deadline"),
    ("host", "use --authority"),
    ("connection", "HTTP/2 forbids connection-specific headers"),
    ("keep-alive", "HTTP/2 forbids connection-specific headers"),
    (
        "proxy-connection",
        "HTTP/2 forbids connection-specific headers",
    ),
    (
        "transfer-encoding",
        "HTTP/2 forbids connection-specific headers",
    ),
    ("upgrade", "HTTP/2 forbids connection-specific headers"),
];

/// Parses `-H` values into request metadata.
pub fn parse_metadata(headers: &[String]) -> anyhow::Result<http::HeaderMap> {
    let mut map = http::HeaderMap::new();
    for h in headers {
        let (name, value) = h.split_once(':').filter(|(n, _)| !n.is_empty()).ok_or_else(|| {
            anyhow::Error::new(UsageError(format!(
                "-H {h:?}: expected 'name: value' (a pseudo-header like :authority is not metadata; see --authority)"
            )))
        })?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            anyhow::Error::new(UsageError(format!(
                "-H {h:?}: {name:?} is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)"
            )))
        })?;
        if let Some((_, why)) = RESERVED.iter().find(|(n, _)| *n == name.as_str()) {
            crate::refuse_unless!(false, "-H {h:?}: {name} cannot be set ({why})");
        }
        if name.as_str().ends_with("-bin") {
            use base64::Engine as _;
            let ok = [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::STANDARD_NO_PAD,
            ]
            .iter()
            .any(|e| e.decode(value).is_ok());
            crate::refuse_unless!(
                ok,
                "-H {h:?}: a -bin header carries base64 (gRPC binary metadata), and {value:?} is not"
            );
        }
        // gRPC metadata values are printable ASCII (0x20–0x7E), stricter than HTTP.
        let printable = value.bytes().all(|b| (0x20..0x7f).contains(&b));
        let value = http::HeaderValue::from_str(value)
            .ok()
            .filter(|_| printable)
            .ok_or_else(|| {
            anyhow::Error::new(UsageError(format!(
                "-H {h:?}: the value must be printable ASCII (use a -bin name with base64 for bytes)"
            )))
            })?;
        map.append(name, value);
    }
    Ok(map)
}

/// TLS to the server: the connector and the name the certificate must carry.
#[derive(Clone)]
pub struct Tls {
    pub connector: tokio_rustls::TlsConnector,
    pub name: rustls::pki_types::ServerName<'static>,
}

/// The server, resolved, and how requests address it.
#[derive(Clone)]
pub struct Target {
    /// Tried in order for each connection.
    pub addrs: Vec<SocketAddr>,
    /// `:authority` of every request.
    pub authority: String,
    pub tls: Option<Tls>,
}

impl Target {
    /// Cleartext to one address, the authority being that address.
    pub fn plain(addr: SocketAddr) -> Target {
        Target {
            addrs: vec![addr],
            authority: addr.to_string(),
            tls: None,
        }
    }

    /// TLS to one address as `name`: verified against the CA certificates
    /// of `ca` (PEM), or not at all without it (`run`'s own server).
    pub fn tls(
        addr: SocketAddr,
        name: &str,
        ca: Option<&std::path::Path>,
    ) -> anyhow::Result<Target> {
        let cfg = crate::tls::client_config(ca, ca.is_none(), None)?;
        Ok(Target {
            addrs: vec![addr],
            authority: format!("{name}:{}", addr.port()),
            tls: Some(Tls {
                connector: Arc::new(cfg).into(),
                name: crate::tls::server_name(name)?,
            }),
        })
    }

    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Resolves `--connect` and prepares TLS.
    pub async fn resolve(opts: &TargetOpts) -> anyhow::Result<Target> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(opts.connect.as_str())
            .await
            .with_context(|| format!("resolving --connect {}", opts.connect))?
            .collect();
        anyhow::ensure!(
            !addrs.is_empty(),
            "--connect {}: the name resolves to no address",
            opts.connect
        );
        let authority = opts
            .authority
            .clone()
            .unwrap_or_else(|| opts.connect.clone());
        let tls = if opts.tls {
            let identity = match (&opts.cert, &opts.key) {
                (Some(cert), Some(key)) => Some(crate::tls::Identity {
                    cert: (cert, "--cert"),
                    key: (key, "--key"),
                }),
                _ => None,
            };
            let cfg = crate::tls::client_config(opts.ca.as_deref(), opts.insecure, identity)?;
            let host: http::uri::Authority = authority.parse().expect("validated by clap");
            Some(Tls {
                connector: Arc::new(cfg).into(),
                name: crate::tls::server_name(host.host())?,
            })
        } else {
            None
        };
        Ok(Target {
            addrs,
            authority,
            tls,
        })
    }

    /// Connects to the first address that accepts.
    pub async fn connect(&self) -> anyhow::Result<tokio::net::TcpStream> {
        let mut last = None;
        for a in &self.addrs {
            match tokio::net::TcpStream::connect(a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(anyhow::Error::new(e).context(format!("connecting to {a}"))),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no address to connect to")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_forms() {
        for ok in [
            "localhost:50051",
            "127.0.0.1:1",
            "[::1]:50051",
            "grpc.example.com:443",
        ] {
            assert_eq!(parse_host_port(ok).unwrap(), ok);
        }
        for (bad, why) in [
            ("localhost", "no port"),
            ("::1:50051", "not a valid authority"),
            ("a b:1", "not a valid authority"),
            ("user@host:1", "userinfo"),
            (":50051", "no host"),
            // It read "has no port".
            ("127.0.0.1:99999", "99999 is not a port (1 to 65535)"),
            ("[::1]:70000", "70000 is not a port"),
            ("localhost:0", "port 0 cannot be connected to"),
        ] {
            let e = parse_host_port(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redact_header("Authorization: Bearer abc"),
            "Authorization: <redacted, 10 bytes>"
        );
        assert_eq!(redact_header("x-tenant: blue"), "x-tenant: blue");
        assert!(is_secret("X-Auth-Token"));
    }

    #[test]
    fn metadata_is_validated() {
        let m = parse_metadata(&[
            "X-Tenant: blue".into(),
            "x-tenant:green".into(),
            "trace-bin: AAEC".into(),
        ])
        .unwrap();
        let v: Vec<_> = m.get_all("x-tenant").iter().collect();
        assert_eq!(v, ["blue", "green"]);
        assert_eq!(m["trace-bin"], "AAEC");
        for (bad, why) in [
            (":authority: x", "expected 'name: value'"),
            ("novalue", "expected 'name: value'"),
            ("bad name: x", "not a valid header name"),
            ("te: gzip", "te cannot be set"),
            ("grpc-timeout: 1S", "use --deadline"),
            ("Connection: close", "forbids"),
            ("x-bin: not base64!", "base64"),
            ("x: caf\u{e9}", "printable ASCII"),
        ] {
            let e = parse_metadata(&[bad.into()]).unwrap_err();
            assert!(e.downcast_ref::<UsageError>().is_some());
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }
}
