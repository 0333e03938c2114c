//! What bytes that are not HTTP/2 framing most likely are, from their first
//! bytes: for `decode` (a file) and for the tap (a server's first frame).

/// A recognised kind of foreign bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// An HTTP/1.x request or status line.
    Http1,
    Pcap,
    Pcapng,
    /// A TLS record (handshake, alert, …).
    Tls,
    Elf,
    /// Printable text of no kind above.
    Text,
}

/// Bytes enough to recognise every signature [`foreign`] knows.
pub const SNIFF_LEN: usize = 12;

/// The kind of `head`, the first bytes of a stream, if it is one of the
/// signatures no HTTP/2 byte stream starts with (read as a frame header,
/// each would be a frame of over 600 KB, more than the 16,384 every
/// connection starts with), or printable text; `None` otherwise.
pub fn foreign(head: &[u8]) -> Option<Foreign> {
    const HTTP1: [&[u8]; 10] = [
        b"GET ",
        b"POST ",
        b"PUT ",
        b"HEAD ",
        b"DELETE ",
        b"OPTIONS ",
        b"PATCH ",
        b"CONNECT ",
        b"TRACE ",
        b"HTTP/1.",
    ];
    const PCAP: [[u8; 4]; 4] = [
        [0xa1, 0xb2, 0xc3, 0xd4],
        [0xd4, 0xc3, 0xb2, 0xa1],
        [0xa1, 0xb2, 0x3c, 0x4d],
        [0x4d, 0x3c, 0xb2, 0xa1],
    ];
    Some(if HTTP1.iter().any(|p| head.starts_with(p)) {
        Foreign::Http1
    } else if head.len() >= 4 && PCAP.contains(&[head[0], head[1], head[2], head[3]]) {
        Foreign::Pcap
    } else if head.len() >= 12
        && head[..4] == [0x0a, 0x0d, 0x0d, 0x0a]
        && matches!(
            head[8..12],
            [0x1a, 0x2b, 0x3c, 0x4d] | [0x4d, 0x3c, 0x2b, 0x1a]
        )
    {
        Foreign::Pcapng
    } else if head.len() >= 3
        && (0x14..=0x17).contains(&head[0])
        && head[1] == 0x03
        && head[2] <= 0x04
    {
        Foreign::Tls
    } else if head.starts_with(b"\x7fELF") {
        Foreign::Elf
    } else if !head.is_empty()
        && head
            .iter()
            .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        Foreign::Text
    } else {
        return None;
    })
}
