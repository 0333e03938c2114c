//! Where the server listens: a TCP address, or a Unix domain socket (a
//! sidecar's or node agent's clients reach their server by path).

use h2probe_analysis::schema::{UNIX_PREFIX, UNIX_UNNAMED};
use std::path::{Path, PathBuf};

/// `--listen`: `IP:PORT`, or `unix:PATH` (`unix:///ABSOLUTE/PATH`, as gRPC
/// names one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(std::net::SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(a) => a.fmt(f),
            ListenAddr::Unix(p) => write!(f, "{UNIX_PREFIX}{}", p.display()),
        }
    }
}

impl serde::Serialize for ListenAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `--listen`'s parser.
pub fn parse_listen(s: &str) -> Result<ListenAddr, String> {
    if let Some(rest) = s.strip_prefix(UNIX_PREFIX) {
        let path = match rest.strip_prefix("//") {
            Some(abs) if abs.starts_with('/') => abs,
            Some(_) => {
                return Err(format!(
                    "{s:?}: unix:// takes an absolute path (unix:///run/app.sock), or write unix:relative/app.sock"
                ))
            }
            None => rest,
        };
        if path.is_empty() {
            return Err(format!("{s:?}: no path after unix:"));
        }
        return Ok(ListenAddr::Unix(PathBuf::from(path)));
    }
    s.parse().map(ListenAddr::Tcp).map_err(|_| {
        format!("{s:?} is not IP:PORT (e.g. 127.0.0.1:50051, or [::1]:50051 for IPv6) or unix:PATH; a host name is not accepted here")
    })
}

/// A bound listener. A Unix domain socket's file is removed when it drops.
pub enum Listener {
    Tcp(tokio::net::TcpListener),
    /// With its name in `conn_open` (see [`crate::unix_socket::path_name`]).
    Unix(tokio::net::UnixListener, SocketFile, String),
}

/// The socket file a Unix listener made, removed when the server ends
/// unless another has taken the path meanwhile (its device and inode).
pub struct SocketFile(PathBuf, Option<(u64, u64)>);

impl SocketFile {
    fn made(path: &Path) -> SocketFile {
        SocketFile(path.to_path_buf(), file_id(path))
    }
}

/// A file's (device, inode), not following a symbolic link.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.1.is_some() && file_id(&self.0) == self.1 {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

impl From<tokio::net::TcpListener> for Listener {
    fn from(l: tokio::net::TcpListener) -> Listener {
        Listener::Tcp(l)
    }
}

/// An accepted connection and the names its tap records.
pub struct Accepted {
    pub io: Socket,
    pub local: String,
    pub peer: String,
}

pub enum Socket {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Listener {
    /// Binds `addr`. A Unix socket's path may hold a stale socket (its
    /// server gone: nothing accepts on it), which is replaced; anything
    /// else there is refused, never removed.
    pub async fn bind(addr: &ListenAddr) -> std::io::Result<Listener> {
        match addr {
            ListenAddr::Tcp(a) => tokio::net::TcpListener::bind(a).await.map(Listener::Tcp),
            ListenAddr::Unix(path) => {
                use std::os::unix::ffi::OsStrExt;
                let len = path.as_os_str().as_bytes().len();
                if len > crate::unix_socket::MAX_PATH {
                    return Err(crate::unix_socket::too_long(len));
                }
                remove_stale_socket(path).await?;
                let l = tokio::net::UnixListener::bind(path)?;
                let name = crate::unix_socket::path_name(path);
                Ok(Listener::Unix(l, SocketFile::made(path), name))
            }
        }
    }

    /// The address it listens on (a TCP port 0 resolved).
    pub fn local(&self) -> std::io::Result<ListenAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().map(ListenAddr::Tcp),
            Listener::Unix(_, f, _) => Ok(ListenAddr::Unix(f.0.clone())),
        }
    }

    pub async fn accept(&self) -> std::io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok(Accepted {
                    local: s.local_addr()?.to_string(),
                    peer: peer.to_string(),
                    io: Socket::Tcp(s),
                })
            }
            Listener::Unix(l, _, name) => {
                // getpeername(2): accept's own address reads unnamed here
                // even for a named peer.
                let (s, _) = l.accept().await?;
                let peer = s.peer_addr().map_or_else(
                    |_| UNIX_UNNAMED.to_string(),
                    |a| crate::unix_socket::peer_name(&a),
                );
                Ok(Accepted {
                    io: Socket::Unix(s),
                    local: name.clone(),
                    peer,
                })
            }
        }
    }
}

/// Removes `path` when it is a socket nobody accepts on.
async fn remove_stale_socket(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let kind = meta.file_type();
    if !kind.is_socket() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_symlink() {
            "a symbolic link (never followed)"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_block_device() || kind.is_char_device() {
            "a device"
        } else {
            "a file"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("the path exists and is {what}, not a socket"),
        ));
    }
    let live = |why: &str| {
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("a socket that accepts connections{why}"),
        ))
    };
    match tokio::net::UnixStream::connect(path).await {
        Ok(_) => live(""),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
        // A listener whose backlog is full refuses for now, not for good
        // (EAGAIN: it read "Resource temporarily unavailable").
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            live(" (its backlog is full: it accepts none for now)")
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_an_ip_and_port_or_a_unix_path() {
        assert_eq!(
            parse_listen("127.0.0.1:50051"),
            Ok(ListenAddr::Tcp("127.0.0.1:50051".parse().unwrap()))
        );
        for (given, path) in [
            ("unix:/run/app.sock", "/run/app.sock"),
            ("unix:///run/app.sock", "/run/app.sock"),
            ("unix:relative/app.sock", "relative/app.sock"),
        ] {
            let addr = parse_listen(given).unwrap();
            assert_eq!(addr, ListenAddr::Unix(path.into()));
            assert_eq!(addr.to_string(), format!("unix:{path}"));
        }
        for bad in ["unix:", "unix://run/app.sock", "localhost:50051"] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }
}
