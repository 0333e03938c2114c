use super::FrameType;

/// Input the parser could not accept. Every variant names the byte offset
/// (within its direction's stream) where the problem starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The stream did not start with `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`. Fatal:
    /// nothing after it can be framed.
    #[error("byte {offset}: bad client connection preface")]
    BadPreface { offset: u64 },
    /// A frame longer than the receiver's SETTINGS_MAX_FRAME_SIZE. Its payload
    /// is skipped; parsing continues with the next frame.
    #[error("byte {offset}: {ty} frame of {len} bytes exceeds the max frame size {max}")]
    FrameTooLarge {
        offset: u64,
        ty: FrameType,
        len: u32,
        max: u32,
    },
    /// A frame whose payload does not fit its type (RFC 9113 §6). Skipped;
    /// parsing continues with the next frame.
    #[error("byte {offset}: malformed {ty} frame: {what}")]
    Malformed {
        offset: u64,
        ty: FrameType,
        what: &'static str,
    },
    /// The connection ended inside a frame or the preface.
    #[error("byte {offset}: connection ended inside a frame ({got} of {want} bytes)")]
    Truncated { offset: u64, got: u64, want: u64 },
    /// A server's first frame was not SETTINGS (RFC 9113 §3.4): the peer
    /// does not speak HTTP/2 (an HTTP/1.x server, TLS, …). Fatal; `first`
    /// holds its first bytes (up to a frame header's 9).
    #[error(
        "byte 0: not an HTTP/2 server: its first frame is not SETTINGS (RFC 9113 §3.4); its first bytes read \"{}\"{}",
        escaped(first),
        what_it_looks_like(first)
    )]
    NotHttp2Server { first: Vec<u8> },
    /// A server's first frame, or a client's first after its preface, was
    /// another HTTP/2 frame than SETTINGS (RFC 9113 §3.4: a connection
    /// error, though h2 reads on). The frame itself is parsed, and so is
    /// what follows.
    #[error("byte {offset}: the {who}'s first frame is {first}, not SETTINGS (RFC 9113 §3.4)")]
    FirstFrameNotSettings {
        offset: u64,
        who: &'static str,
        first: String,
    },
    /// A frame that breaks a rule of RFC 9113 (or 9218) judged from the frame alone
    /// ([`super::rules`]). Still a frame: it is parsed and handed on after
    /// this error, and so is what follows.
    #[error(
        "byte {offset}: {}{} (RFC {} §{}: a {} error of type {}{})",
        h2probe_analysis::schema::RULE_BROKEN,
        rule.what,
        rule.rfc,
        rule.section,
        if rule.connection { "connection" } else { "stream" },
        rule.error,
        on_stream(*stream)
    )]
    RuleBroken {
        offset: u64,
        stream: u32,
        rule: super::rules::Rule,
    },
}

/// Which stream a frame was on, unless 0 (a `wire_error` event is the
/// connection's: its own `stream` is 0).
fn on_stream(stream: u32) -> String {
    if stream == 0 {
        String::new()
    } else {
        format!("; stream {stream}")
    }
}

/// Printable ASCII as is, anything else as `\xNN`.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        match b {
            b'"' | b'\\' => out.extend(['\\', b as char]),
            0x20..=0x7e => out.push(b as char),
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// What a server's first bytes are said to be when they are a TLS record
/// (the client spoke cleartext to a TLS server).
pub const TLS_RECORD: &str = " (a TLS record: the server expects TLS)";

/// What a server's non-HTTP/2 first bytes most likely are, if recognisable.
fn what_it_looks_like(first: &[u8]) -> &'static str {
    use super::sniff::{foreign, Foreign};
    match foreign(first) {
        Some(Foreign::Tls) => TLS_RECORD,
        Some(Foreign::Http1) => {
            " (an HTTP/1.x response: the server does not speak HTTP/2 in cleartext)"
        }
        Some(Foreign::Text) => " (text: not HTTP/2 framing)",
        _ => "",
    }
}

impl Error {
    /// For [`Error::NotHttp2Server`], what the peer's first bytes look like
    /// (" (a TLS record: …)"), or "" (for any other error too).
    pub fn peer_looks_like(&self) -> &'static str {
        match self {
            Error::NotHttp2Server { first } => what_it_looks_like(first),
            _ => "",
        }
    }

    pub fn offset(&self) -> u64 {
        match *self {
            Error::BadPreface { offset }
            | Error::FrameTooLarge { offset, .. }
            | Error::Malformed { offset, .. }
            | Error::Truncated { offset, .. }
            | Error::FirstFrameNotSettings { offset, .. }
            | Error::RuleBroken { offset, .. } => offset,
            Error::NotHttp2Server { .. } => 0,
        }
    }

    /// Whether the bytes from here on cannot be trusted as frames: no
    /// preface, not HTTP/2 at all, or a length past the max frame size
    /// (garbage, most likely: its length is no guide to the next frame).
    /// A malformed frame, a first frame that is not SETTINGS or one that
    /// breaks a rule is still a frame, and its length finds the next one.
    pub fn loses_framing(&self) -> bool {
        matches!(
            self,
            Error::BadPreface { .. }
                | Error::NotHttp2Server { .. }
                | Error::FrameTooLarge { .. }
                | Error::Truncated { .. }
        )
    }
}
