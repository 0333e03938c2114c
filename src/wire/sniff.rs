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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signature_and_a_near_miss() {
        let pcapng = [
            0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0x1c, 0x4d, 0x3c, 0x2b, 0x1a,
        ];
        for (head, want) in [
            (
                &b"POST /h2probe.v1.Probe/Ingest HTTP/1.1"[..],
                Some(Foreign::Http1),
            ),
            (&b"HTTP/1.1 200 OK"[..], Some(Foreign::Http1)),
            (&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0][..], Some(Foreign::Pcap)),
            (&pcapng[..], Some(Foreign::Pcapng)),
            // A section header block's type without its byte-order magic.
            (
                &[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0x1c, 0, 0, 0, 0][..],
                None,
            ),
            // pcapng's byte-order magic after another block type.
            (
                &[
                    0x0b, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0x1c, 0x4d, 0x3c, 0x2b, 0x1a,
                ][..],
                None,
            ),
            (&pcapng[..11], None),
            // A handshake record (a ClientHello's, version 3.1), and an
            // alert (3.3).
            (&[0x16, 0x03, 0x01, 0x02, 0x00][..], Some(Foreign::Tls)),
            (&[0x15, 0x03, 0x03][..], Some(Foreign::Tls)),
            // Not a record type, not TLS's major version, a minor past 1.3.
            (&[0x18, 0x03, 0x01][..], None),
            (&[0x16, 0x02, 0x01][..], None),
            (&[0x16, 0x03, 0x05][..], None),
            (&[0x16, 0x03][..], None),
            (&b"\x7fELF\x02\x01\x01"[..], Some(Foreign::Elf)),
            (&b"hello, world\n"[..], Some(Foreign::Text)),
            // An HTTP/2 SETTINGS frame's header: neither text nor a
            // signature.
            (&[0, 0, 0x12, 4, 0, 0, 0, 0, 0][..], None),
            (&[][..], None),
        ] {
            assert_eq!(foreign(head), want, "{head:02x?}");
        }
    }
}
