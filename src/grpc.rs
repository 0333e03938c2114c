//! gRPC over HTTP/2, the parts h2probe needs: length-prefixed message
//! framing with exact byte accounting, status codes and `grpc-timeout`.

use bytes::{Buf, Bytes, BytesMut};
use std::time::Duration;

/// Generated from `proto/h2probe.proto`.
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/h2probe.v1.rs"));
}

/// The client-streaming method (Parts 1 and 2).
pub const INGEST_PATH: &str = "/h2probe.v1.Probe/Ingest";
/// The bidirectional method with per-attempt outcomes (Part 3).
pub const EXCHANGE_PATH: &str = "/h2probe.v1.Probe/Exchange";
/// Bytes in the gRPC message prefix: compressed flag + 4-byte length.
pub const PREFIX_LEN: usize = 5;

/// gRPC status codes used here (grpc/doc/statuscodes.md); names for
/// display are `h2probe_analysis::schema::status_name`.
pub mod status {
    pub const OK: u32 = 0;
    pub const CANCELLED: u32 = 1;
    pub const UNKNOWN: u32 = 2;
    pub const INVALID_ARGUMENT: u32 = 3;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const INTERNAL: u32 = 13;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;

    /// The status of an RPC the server reset (RST_STREAM), by gRPC's
    /// HTTP/2 mapping (PROTOCOL-HTTP2.md, "Errors"); a connection that
    /// failed (GOAWAY, I/O, a protocol error h2 found) is UNAVAILABLE.
    pub fn of_h2_error(e: &h2::Error) -> u32 {
        if !e.is_reset() {
            return UNAVAILABLE;
        }
        match e.reason().map(u32::from) {
            Some(0x7) => UNAVAILABLE,        // REFUSED_STREAM
            Some(0x8) => CANCELLED,          // CANCEL
            Some(0xb) => RESOURCE_EXHAUSTED, // ENHANCE_YOUR_CALM
            Some(0xc) => PERMISSION_DENIED,  // INADEQUATE_SECURITY
            _ => INTERNAL,
        }
    }

    /// The status of a response whose HTTP status is not 200, by gRPC's
    /// mapping (http-grpc-status-mapping.md).
    pub fn of_http(code: http::StatusCode) -> u32 {
        match code.as_u16() {
            400 => INTERNAL,
            401 => UNAUTHENTICATED,
            403 => PERMISSION_DENIED,
            404 => UNIMPLEMENTED,
            429 | 502 | 503 | 504 => UNAVAILABLE,
            _ => UNKNOWN,
        }
    }
}

/// A whole message cut from the stream: the body chunks it spans, shared
/// with h2's buffers (never copied while cut out; see [`Framed::data`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Framed {
    pub compressed: bool,
    parts: Vec<Bytes>,
    len: usize,
    prefix: bool,
}

impl Framed {
    /// Bytes this message occupied in the body (prefix included).
    pub fn framed_len(&self) -> u32 {
        (if self.prefix { PREFIX_LEN } else { 0 } + self.len) as u32
    }

    /// The message's bytes (prefix excluded).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The message as one buffer: shared when it arrived in one chunk (the
    /// usual case for gRPC), copied once when it spans several.
    pub fn data(&self) -> Bytes {
        match self.parts.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => many.concat().into(),
        }
    }

    /// The chunks, for holding the message without joining them.
    pub fn into_parts(self) -> Vec<Bytes> {
        self.parts
    }
}

/// A message the deframer refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeframeError {
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u32, max: u32 },
    /// The prefix's first byte is the compressed flag, 0 or 1 (gRPC over
    /// HTTP/2's Length-Prefixed-Message); anything else is not gRPC.
    #[error("a message prefix whose compressed flag is {flag} (it is 0 or 1)")]
    BadFlag { flag: u8 },
}

impl DeframeError {
    /// The status a server ends the RPC with.
    pub fn status(&self) -> u32 {
        match self {
            DeframeError::TooLarge { .. } => status::RESOURCE_EXHAUSTED,
            DeframeError::BadFlag { .. } => status::INTERNAL,
        }
    }
}

/// Cuts messages out of body chunks as they arrive: gRPC length-prefixed
/// messages, or fixed-size raw units. Holds at most one partial message
/// (bounded by the size limit, checked before anything is kept for it) as
/// the chunks h2 handed over: cutting copies nothing.
#[derive(Debug)]
pub struct Deframer {
    chunks: std::collections::VecDeque<Bytes>,
    /// Bytes in `chunks`.
    buffered: usize,
    max: u32,
    /// `Some(n)`: raw framing, n-byte units, no prefix.
    raw: Option<u32>,
    /// Bytes pushed but not yet part of a returned message.
    pending: u64,
}

impl Deframer {
    pub fn new(max_message_size: u32) -> Deframer {
        Deframer {
            chunks: Default::default(),
            buffered: 0,
            max: max_message_size,
            raw: None,
            pending: 0,
        }
    }

    /// Raw framing: the body is cut into `unit`-byte pieces.
    pub fn raw(unit: u32) -> Deframer {
        Deframer {
            raw: Some(unit),
            ..Deframer::new(unit)
        }
    }

    /// At end of body: a raw body's last short unit, if any. (A gRPC body
    /// that ends mid-message is the caller's error to report.)
    pub fn finish(&mut self) -> Option<Framed> {
        if self.raw.is_none() || self.buffered == 0 {
            return None;
        }
        self.pending = 0;
        let n = self.buffered;
        Some(self.take(n, false, false))
    }

    /// Keeps a chunk (shared, not copied).
    pub fn push_bytes(&mut self, chunk: Bytes) {
        self.pending += chunk.len() as u64;
        if !chunk.is_empty() {
            self.buffered += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// Copies a chunk in (for callers that hold a slice).
    pub fn push(&mut self, chunk: &[u8]) {
        self.push_bytes(Bytes::copy_from_slice(chunk));
    }

    /// Bytes received that belong to no complete message yet.
    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// The gRPC prefix at the front, once all 5 bytes are here.
    fn prefix(&self) -> Option<[u8; PREFIX_LEN]> {
        if self.buffered < PREFIX_LEN {
            return None;
        }
        let mut p = [0u8; PREFIX_LEN];
        let mut bytes = self.chunks.iter().flat_map(|c| c.iter());
        for b in &mut p {
            *b = *bytes.next()?;
        }
        Some(p)
    }

    /// Bytes the message being assembled will occupy (prefix included),
    /// once its prefix has arrived.
    pub fn next_framed_len(&self) -> Option<u64> {
        match self.raw {
            Some(unit) => Some(unit as u64),
            None => self
                .prefix()
                .map(|p| PREFIX_LEN as u64 + u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as u64),
        }
    }

    /// Removes `n` buffered bytes (the first `skip` of them dropped: the
    /// prefix) as a message.
    fn take(&mut self, n: usize, skip_prefix: bool, compressed: bool) -> Framed {
        let mut parts = Vec::new();
        let (mut left, mut skip) = (n, if skip_prefix { PREFIX_LEN } else { 0 });
        while left > 0 {
            let mut c = self.chunks.pop_front().expect("n ≤ buffered");
            if c.len() > left {
                self.chunks.push_front(c.split_off(left));
            }
            left -= c.len();
            let drop = skip.min(c.len());
            skip -= drop;
            c.advance(drop);
            if !c.is_empty() {
                parts.push(c);
            }
        }
        self.buffered -= n;
        let len = parts.iter().map(Bytes::len).sum();
        Framed {
            compressed,
            parts,
            len,
            prefix: skip_prefix,
        }
    }

    /// The next complete message, if the buffer holds one.
    pub fn next_message(&mut self) -> Result<Option<Framed>, DeframeError> {
        if let Some(unit) = self.raw {
            if self.buffered < unit as usize {
                return Ok(None);
            }
            self.pending -= unit as u64;
            return Ok(Some(self.take(unit as usize, false, false)));
        }
        let Some(p) = self.prefix() else {
            return Ok(None);
        };
        if p[0] > 1 {
            return Err(DeframeError::BadFlag { flag: p[0] });
        }
        let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]);
        if len > self.max {
            return Err(DeframeError::TooLarge { len, max: self.max });
        }
        let total = PREFIX_LEN + len as usize;
        if self.buffered < total {
            return Ok(None);
        }
        self.pending -= total as u64;
        Ok(Some(self.take(total, true, p[0] == 1)))
    }
}

/// Frames a protobuf message: `[0][len u32 BE][bytes]`.
pub fn encode<M: prost::Message>(m: &M) -> Bytes {
    let len = m.encoded_len();
    let mut b = BytesMut::with_capacity(PREFIX_LEN + len);
    b.extend_from_slice(&[0]);
    b.extend_from_slice(&(len as u32).to_be_bytes());
    m.encode(&mut b).expect("BytesMut grows");
    b.freeze()
}

/// The `grpc-timeout` header's name, made once: looked up by a string, a
/// name that is not a standard header's is parsed and classified on every
/// request (the lookup took ≈ 330 instructions a request under callgrind,
/// ≈ 150 fewer by this name).
pub static TIMEOUT_HEADER: http::HeaderName = http::HeaderName::from_static("grpc-timeout");

/// Parses a `grpc-timeout` value (`1-8 digits` + `H|M|S|m|u|n`).
pub fn parse_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (num, unit) = v.split_at(v.len() - 1);
    // Digits only: `u64::from_str` would also take a leading `+`.
    if !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = num.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Formats a `grpc-timeout` value: in the finest unit whose count fits
/// the 8 digits the header allows, rounded up, so that it is never 0 (the
/// spec wants a positive count, and a gRPC server fails a call whose
/// timeout is `0m` at once; milliseconds rounded down sent `0m` for a
/// unary call with 0.5 ms left) nor shorter than `d`.
pub fn format_timeout(d: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let ns = d.as_nanos().max(1);
    let units: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    for (per, unit) in units {
        let n = ns.div_ceil(per);
        if n <= MAX {
            return format!("{n}{unit}");
        }
    }
    format!("{MAX}H")
}

/// Percent-encodes a `grpc-message` (gRPC spec: printable ASCII except %).
pub fn encode_message(m: &str) -> String {
    let mut out = String::with_capacity(m.len());
    for b in m.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn decode_message(m: &str) -> String {
    let b = m.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn deframer_cuts_messages_across_any_chunking() {
        let a = encode(&pb::Item {
            seq: 1,
            scheduled_ns: 2,
            payload: vec![7; 300].into(),
        });
        let b = encode(&pb::Item {
            seq: 2,
            scheduled_ns: 3,
            payload: vec![8; 10].into(),
        });
        let wire = [a.clone(), b.clone()].concat();
        for split in 0..wire.len() {
            let mut d = Deframer::new(1 << 20);
            let mut got = vec![];
            for part in [&wire[..split], &wire[split..]] {
                d.push(part);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got.len(), 2, "split {split}");
            assert_eq!(got[0].framed_len() as usize, a.len());
            assert_eq!(pb::Item::decode(got[1].data()).unwrap().seq, 2);
            assert_eq!(d.pending(), 0);
        }
    }

    #[test]
    fn raw_units_with_a_short_tail() {
        let mut d = Deframer::raw(4);
        d.push(b"abcdefghij");
        assert_eq!(d.next_message().unwrap().unwrap().data(), &b"abcd"[..]);
        assert_eq!(d.next_message().unwrap().unwrap().framed_len(), 4);
        assert_eq!(d.next_message().unwrap(), None);
        assert_eq!(d.pending(), 2);
        assert_eq!(d.finish().unwrap().data(), &b"ij"[..]);
        assert_eq!(d.pending(), 0);
    }

    #[test]
    fn oversize_is_refused_from_the_prefix_alone() {
        let mut d = Deframer::new(100);
        d.push(&[0, 0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(
            d.next_message(),
            Err(DeframeError::TooLarge {
                len: 0x7fff_ffff,
                max: 100
            })
        );
        assert_eq!(d.buffered, 5, "nothing kept beyond the prefix");
        // The limit itself is allowed.
        let mut d = Deframer::new(3);
        d.push(&[0, 0, 0, 0, 3, 7, 8, 9]);
        assert_eq!(d.next_message().unwrap().unwrap().data(), &[7, 8, 9][..]);
    }

    #[test]
    fn a_raw_unit_is_cut_when_its_last_byte_arrives() {
        let mut d = Deframer::raw(4);
        d.push(b"abc");
        assert_eq!(d.next_message(), Ok(None));
        d.push(b"d");
        assert_eq!(d.next_message().unwrap().unwrap().data(), &b"abcd"[..]);
        assert_eq!(d.finish(), None);
    }

    /// The compressed flag is 0 or 1: a prefix starting 2 is no gRPC
    /// message (it was read as uncompressed, its low bit being 0), and ends
    /// the RPC INTERNAL; 1 is a compressed message.
    #[test]
    fn a_prefix_whose_flag_is_neither_0_nor_1_is_refused() {
        let mut d = Deframer::new(100);
        d.push(&[2, 0, 0, 0, 1, 9]);
        let e = d.next_message().unwrap_err();
        assert_eq!(e, DeframeError::BadFlag { flag: 2 });
        assert_eq!(e.status(), status::INTERNAL);
        let mut d = Deframer::new(100);
        d.push(&[1, 0, 0, 0, 1, 9]);
        let m = d.next_message().unwrap().unwrap();
        assert!(m.compressed);
        assert_eq!((m.len(), m.is_empty(), m.framed_len()), (1, false, 6));
    }

    /// What the message being assembled will occupy is known from its
    /// prefix (a raw unit's from the start); a gRPC body that ends inside
    /// a message leaves nothing for `finish`.
    #[test]
    fn the_next_message_size_is_known_from_its_prefix() {
        let mut d = Deframer::new(100);
        d.push(&[0, 0, 0]);
        assert_eq!(d.next_framed_len(), None);
        d.push(&[0, 7, 1, 2]);
        assert_eq!(d.next_framed_len(), Some(12));
        assert_eq!(d.next_message(), Ok(None));
        assert_eq!(d.finish(), None, "a partial gRPC message is no message");
        assert_eq!(Deframer::raw(4).next_framed_len(), Some(4));
    }

    /// A message of no bytes is a message: its 5-byte prefix is all it
    /// occupies.
    #[test]
    fn an_empty_message_is_cut_and_counted() {
        let mut d = Deframer::new(100);
        d.push(&[0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let m = d.next_message().unwrap().unwrap();
        assert_eq!((m.len(), m.is_empty(), m.framed_len()), (0, true, 5));
        assert_eq!(m.data(), Bytes::new());
        assert_eq!(d.next_message(), Ok(None));
        assert_eq!(d.pending(), 4);
    }

    #[test]
    fn a_message_within_one_chunk_shares_it_and_units_span_chunks_uncopied() {
        let a = encode(&pb::Item {
            seq: 1,
            scheduled_ns: 2,
            payload: vec![7; 300].into(),
        });
        let mut d = Deframer::new(1 << 20);
        d.push_bytes(a.clone());
        let m = d.next_message().unwrap().unwrap();
        // The same allocation, past the prefix.
        assert_eq!(m.data().as_ptr(), a[PREFIX_LEN..].as_ptr());
        let mut d = Deframer::raw(10);
        let (x, y) = (
            Bytes::from_static(b"abcdef"),
            Bytes::from_static(b"ghijklmn"),
        );
        d.push_bytes(x.clone());
        d.push_bytes(y.clone());
        let parts = d.next_message().unwrap().unwrap().into_parts();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].as_ptr(), x.as_ptr());
        assert_eq!(parts[1].as_ptr(), y.as_ptr());
        assert_eq!(d.finish().unwrap().data(), &b"klmn"[..]);
    }

    /// http-grpc-status-mapping.md, every row, and a status it leaves out.
    #[test]
    fn http_statuses_map_as_grpc_says() {
        for (code, want) in [
            (400, status::INTERNAL),
            (401, status::UNAUTHENTICATED),
            (403, status::PERMISSION_DENIED),
            (404, status::UNIMPLEMENTED),
            (429, status::UNAVAILABLE),
            (502, status::UNAVAILABLE),
            (503, status::UNAVAILABLE),
            (504, status::UNAVAILABLE),
            (500, status::UNKNOWN),
        ] {
            let http = http::StatusCode::from_u16(code).unwrap();
            assert_eq!(status::of_http(http), want, "{code}");
        }
    }

    #[test]
    fn timeouts_round_trip() {
        assert_eq!(parse_timeout("120000m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_timeout("1x"), None);
        assert_eq!(parse_timeout("123456789m"), None);
        assert_eq!(parse_timeout("+5S"), None, "TimeoutValue is digits");
        assert_eq!(parse_timeout("S"), None);
        assert_eq!(
            parse_timeout("12345678H"),
            Some(Duration::from_secs(12_345_678 * 3600))
        );
        assert_eq!(parse_timeout("7M"), Some(Duration::from_secs(420)));
        assert_eq!(parse_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_timeout("7n"), Some(Duration::from_nanos(7)));
        assert_eq!(format_timeout(Duration::from_secs(120)), "120000m");
        // Below a millisecond, and never 0 nor shorter than given.
        assert_eq!(format_timeout(Duration::from_micros(479)), "479000n");
        assert_eq!(format_timeout(Duration::ZERO), "1n");
        assert_eq!(format_timeout(Duration::from_nanos(100_000_001)), "100001u");
        assert_eq!(format_timeout(Duration::from_secs(200_000_000)), "3333334M");
        for d in [1, 999, 99_999_999, 100_000_000, 123_456_789_123] {
            let d = Duration::from_nanos(d);
            let t = parse_timeout(&format_timeout(d)).unwrap();
            assert!(
                t >= d && t - d < d / 1000 + Duration::from_nanos(1),
                "{d:?} → {t:?}"
            );
        }
    }

    #[test]
    fn grpc_message_percent_encoding() {
        let m = "bad 100% ✓";
        assert_eq!(encode_message(m), "bad 100%25 %E2%9C%93");
        assert_eq!(decode_message(&encode_message(m)), m);
        // A peer's message is taken as it comes: an escape cut short or
        // not hex stays as written.
        for (raw, want) in [
            ("%41", "A"),
            ("100%", "100%"),
            ("x%4", "x%4"),
            ("abc%4", "abc%4"),
            ("a%zz%41", "a%zzA"),
        ] {
            assert_eq!(decode_message(raw), want, "{raw}");
        }
    }
}
