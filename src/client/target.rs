//! Where the client connects and how each request is addressed: `host:port`
//! (a DNS name, IPv4 or `[IPv6]`), `:authority`, TLS, and the request
//! metadata (`-H 'name: value'`).

use crate::config::UsageError;
use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// `--connect-timeout`'s default (and `run`'s, to its own server).
pub const DEFAULT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `client`: the server and how to reach it.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct TargetOpts {
    /// Server to connect to: HOST:PORT, where HOST is a DNS name
    /// (localhost), an IPv4 address or an IPv6 address in brackets
    /// ([::1]:50051). Every address the name resolves to is tried in order.
    /// Or a Unix domain socket, as gRPC names one: unix:PATH or
    /// unix:///ABSOLUTE/PATH.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "HOST:PORT|unix:PATH", value_parser = parse_connect)]
    pub connect: String,

    /// The :authority of every request (and, with --tls, the name the
    /// certificate must carry). [default: --connect as given; localhost
    /// for a Unix domain socket]
    #[arg(long, value_name = "HOST[:PORT]", value_parser = parse_authority)]
    pub authority: Option<String>,

    /// How long a connection may take to open: TCP's connect (each address
    /// the name resolves to) and, with --tls, the handshake. An address
    /// that drops the client's SYN would otherwise hold it for the kernel's
    /// retries, about two minutes.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: crate::config::Dur,

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
            connect_timeout: crate::config::Dur(DEFAULT_CONNECT_TIMEOUT),
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

/// The path of a `unix:PATH` or `unix:///ABSOLUTE/PATH` target (gRPC's
/// names for a Unix domain socket), `None` for any other.
fn unix_path(s: &str) -> Option<Result<PathBuf, String>> {
    let rest = s.strip_prefix("unix:")?;
    Some(match rest.strip_prefix("//") {
        Some(abs) if abs.starts_with('/') => Ok(abs.into()),
        Some(_) => Err(format!(
            "{s:?}: unix:// takes an absolute path (unix:///run/app.sock), or write unix:relative/app.sock"
        )),
        None if rest.is_empty() => Err(format!("{s:?}: no path after unix:")),
        None => Ok(rest.into()),
    })
}

/// `--connect`: an authority with a port, or a Unix domain socket.
fn parse_connect(s: &str) -> Result<String, String> {
    match unix_path(s) {
        Some(path) => path.map(|_| s.to_string()),
        None => parse_host_port(s),
    }
}

/// An authority with a port.
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
    /// `--cert`: the client shows a certificate when asked for one.
    pub showed_cert: bool,
}

/// Where the server listens.
#[derive(Clone)]
pub enum Place {
    /// Addresses tried in order for each connection.
    Tcp(Vec<SocketAddr>),
    /// A Unix domain socket (`unix:PATH`).
    Unix(PathBuf),
}

/// A connected socket, before TLS and the tap.
pub enum Transport {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// A connection and the addresses its tap names in `conn_open`.
pub struct Connected {
    pub io: Transport,
    pub local: String,
    pub peer: String,
}

/// The server, resolved, and how requests address it.
#[derive(Clone)]
pub struct Target {
    pub place: Place,
    /// `--connect-timeout`: for TCP's connect, and TLS's handshake.
    pub connect_timeout: std::time::Duration,
    /// `:authority` of every request.
    pub authority: String,
    pub tls: Option<Tls>,
}

impl Target {
    /// Cleartext to one address, the authority being that address.
    pub fn plain(addr: SocketAddr) -> Target {
        Target {
            place: Place::Tcp(vec![addr]),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
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
            place: Place::Tcp(vec![addr]),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            authority: format!("{name}:{}", addr.port()),
            tls: Some(Tls {
                connector: Arc::new(cfg).into(),
                name: crate::tls::server_name(name)?,
                showed_cert: false,
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
        let (place, default_authority) = match unix_path(&opts.connect) {
            // gRPC's own clients call a Unix domain socket's server localhost.
            Some(path) => (
                Place::Unix(path.map_err(|e| anyhow::Error::new(UsageError(e)))?),
                "localhost".to_string(),
            ),
            None => {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host(opts.connect.as_str())
                    .await
                    .with_context(|| format!("resolving --connect {}", opts.connect))?
                    .collect();
                anyhow::ensure!(
                    !addrs.is_empty(),
                    "--connect {}: the name resolves to no address",
                    opts.connect
                );
                (Place::Tcp(addrs), opts.connect.clone())
            }
        };
        let authority = opts.authority.clone().unwrap_or(default_authority);
        let tls = if opts.tls {
            let identity = match (&opts.cert, &opts.key) {
                (Some(cert), Some(key)) => Some(crate::tls::Identity {
                    cert: (cert, "--cert"),
                    key: (key, "--key"),
                }),
                _ => None,
            };
            let showed_cert = identity.is_some();
            let cfg = crate::tls::client_config(opts.ca.as_deref(), opts.insecure, identity)?;
            let host: http::uri::Authority = authority.parse().expect("validated by clap");
            Some(Tls {
                connector: Arc::new(cfg).into(),
                name: crate::tls::server_name(host.host())?,
                showed_cert,
            })
        } else {
            None
        };
        Ok(Target {
            place,
            connect_timeout: opts.connect_timeout.0,
            authority,
            tls,
        })
    }

    /// TLS's handshake over `io` with `tls` (to `peer`, as said in errors),
    /// within --connect-timeout, HTTP/2 agreed by ALPN; the stream explains
    /// the server's refusal of a client certificate.
    pub async fn handshake<T>(
        &self,
        tls: &Tls,
        io: T,
        peer: &str,
    ) -> anyhow::Result<crate::tls::ExplainAlerts<tokio_rustls::client::TlsStream<T>>>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let name = tls.name.to_str();
        let handshake = tls.connector.connect(tls.name.clone(), io);
        let stream = match tokio::time::timeout(self.connect_timeout, handshake).await {
            Err(_) => anyhow::bail!(
                "TLS handshake with {peer} (as {name}): {}",
                self.timed_out()
            ),
            Ok(Err(e)) => anyhow::bail!(
                "TLS handshake with {peer} (as {name}): {e}{}",
                crate::tls::hint(&e, tls.showed_cert)
            ),
            Ok(Ok(s)) => s,
        };
        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        anyhow::ensure!(
            alpn.as_deref() == Some(crate::tls::ALPN_H2),
            "TLS with {peer}: the server did not agree to HTTP/2 (ALPN h2; it chose {})",
            alpn.map_or("nothing".to_string(), |a| format!(
                "{:?}",
                String::from_utf8_lossy(&a)
            ))
        );
        Ok(crate::tls::ExplainAlerts::new(stream, tls.showed_cert))
    }

    /// A socket's connect, within --connect-timeout.
    async fn within<T>(
        &self,
        connect: impl std::future::Future<Output = std::io::Result<T>>,
    ) -> anyhow::Result<T> {
        Ok(tokio::time::timeout(self.connect_timeout, connect)
            .await
            .map_err(|_| self.timed_out())??)
    }

    /// The error of a connection that did not open within the timeout.
    pub fn timed_out(&self) -> anyhow::Error {
        anyhow::anyhow!(
            "no answer within {} (--connect-timeout)",
            crate::config::Dur(self.connect_timeout)
        )
    }

    /// Connects to the first address that accepts (or to the Unix domain
    /// socket). The tap names the real socket's addresses: they pair the
    /// client's connection with the server's in the analysis. A Unix
    /// domain socket's client end is given a name of its own (see
    /// [`crate::unix_socket::connect`]) for that.
    pub async fn connect(&self) -> anyhow::Result<Connected> {
        let addrs = match &self.place {
            Place::Unix(path) => {
                let (s, local, peer) = self
                    .within(crate::unix_socket::connect(path))
                    .await
                    .with_context(|| format!("connecting to unix:{}", path.display()))?;
                return Ok(Connected {
                    io: Transport::Unix(s),
                    local,
                    peer,
                });
            }
            Place::Tcp(addrs) => addrs,
        };
        let mut last = None;
        for a in addrs {
            match self.within(tokio::net::TcpStream::connect(a)).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let (local, peer) = (s.local_addr()?, s.peer_addr()?);
                    return Ok(Connected {
                        io: Transport::Tcp(s),
                        local: local.to_string(),
                        peer: peer.to_string(),
                    });
                }
                Err(e) => last = Some(e.context(format!("connecting to {a}"))),
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

    /// gRPC's names for a Unix domain socket; its server is called
    /// localhost unless --authority says otherwise.
    #[tokio::test]
    async fn a_unix_domain_socket_is_reached_by_path_and_called_localhost() {
        for (connect, path) in [
            ("unix:/run/app.sock", "/run/app.sock"),
            ("unix:///run/app.sock", "/run/app.sock"),
            ("unix:relative/app.sock", "relative/app.sock"),
        ] {
            assert_eq!(parse_connect(connect).unwrap(), connect);
            let opts = TargetOpts {
                connect: connect.into(),
                ..Default::default()
            };
            let t = Target::resolve(&opts).await.unwrap();
            assert_eq!(t.authority, "localhost");
            assert!(
                matches!(&t.place, Place::Unix(p) if p == std::path::Path::new(path)),
                "{connect}"
            );
        }
        let opts = TargetOpts {
            connect: "unix:/run/app.sock".into(),
            authority: Some("agent.local".into()),
            ..Default::default()
        };
        assert_eq!(
            Target::resolve(&opts).await.unwrap().authority,
            "agent.local"
        );
        for bad in ["unix:", "unix://run/app.sock"] {
            assert!(parse_connect(bad).is_err(), "{bad}");
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
