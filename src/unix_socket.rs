//! Unix domain sockets' names, as the taps write them in `conn_open`:
//! the listening end by its path (absolute), the client's end by the
//! abstract name h2probe binds, so that both taps name one connection
//! alike and the analysis pairs them (as TCP's addresses and ports do).

use h2probe_analysis::schema::{UNIX_ABSTRACT, UNIX_PREFIX, UNIX_UNNAMED};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Connects to a Unix domain socket from an end bound to an abstract name
/// of its own (Linux), `h2probe-<pid>-<nonce>-<n>` (the nonce: processes
/// in containers share pids, often 1): a server sees it as its peer
/// (`unix:@h2probe-…`), so the analysis pairs each client connection with
/// the server's exactly, as TCP's ports do. An unnamed end (what a client
/// usually is) pairs with none: every client connection would look alike.
/// Where the name cannot be bound the end stays unnamed. Returns the
/// stream and the names of its two ends (the server's as
/// [`path_name`] spells it).
pub(crate) async fn connect(
    path: &Path,
) -> std::io::Result<(tokio::net::UnixStream, String, String)> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let len = path.as_os_str().as_bytes().len();
    if len > MAX_PATH {
        return Err(too_long(len));
    }
    let nonce = NONCE.get_or_init(|| {
        // The wall clock's nanoseconds when first needed: two processes
        // with one pid do not start on the same nanosecond.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("h2probe-{}-{nonce:x}-{n}", std::process::id());
    let sock = tokio::net::UnixSocket::new_stream()?;
    let mut abstract_path = vec![0u8];
    abstract_path.extend_from_slice(name.as_bytes());
    let local = match sock.bind(std::ffi::OsStr::from_bytes(&abstract_path)) {
        Ok(()) => format!("{UNIX_ABSTRACT}{name}"),
        Err(e) => {
            crate::say!(
                "warning: binding unix:@{name}: {e}; this end stays unnamed, and a merge cannot pair its connection"
            );
            UNIX_UNNAMED.to_string()
        }
    };
    let s = sock.connect(path).await?;
    Ok((s, local, path_name(path)))
}

/// The longest path a Unix domain socket takes (`sun_path`'s 108 bytes,
/// with its terminating NUL).
pub(crate) const MAX_PATH: usize = 107;

/// A path too long for a socket, said in bytes.
pub(crate) fn too_long(len: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("the path is {len} bytes; a Unix socket's holds at most {MAX_PATH} (a shorter directory, or a relative path)"),
    )
}

/// A socket path as both ends write it in `conn_open` (`unix:` and the
/// path made absolute, symbolic links resolved), so that the names pair
/// however each side spelled the path.
pub(crate) fn path_name(path: &Path) -> String {
    let path = std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf());
    format!("{}{}", UNIX_PREFIX, path.display())
}

/// A Unix peer's name as `conn_open` writes it: `unix:@NAME` (an abstract
/// name, h2probe's client binds one), `unix:PATH`, or `unix:(unnamed)`
/// (most clients).
pub(crate) fn peer_name(addr: &tokio::net::unix::SocketAddr) -> String {
    if let Some(name) = addr.as_abstract_name() {
        return format!("{UNIX_ABSTRACT}{}", String::from_utf8_lossy(name));
    }
    match addr.as_pathname() {
        Some(p) => format!("{UNIX_PREFIX}{}", p.display()),
        None => UNIX_UNNAMED.to_string(),
    }
}
