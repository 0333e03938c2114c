//! Typed views of the ten RFC 9113 frame types, plus unknown types.
//!
//! A [`Body`] borrows the payload it came from; nothing is copied and no
//! per-frame allocation happens. DATA payloads are never buffered at all:
//! only the pad length is read.

use super::{Error, Flags, FrameType, Head, Priority};

/// One SETTINGS parameter, unknown identifiers kept.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Setting {
    pub id: u16,
    pub value: u32,
}

/// The type-specific part of a frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Body<'a> {
    Data {
        /// Pad length when PADDED is set (the pad-length byte itself not included).
        pad: Option<u8>,
    },
    Headers {
        pad: Option<u8>,
        priority: Option<Priority>,
    },
    Priority(Priority),
    RstStream {
        error_code: u32,
    },
    Settings {
        ack: bool,
        /// Raw parameter bytes, a multiple of 6; see [`Body::settings`].
        raw: &'a [u8],
    },
    PushPromise {
        pad: Option<u8>,
        promised: u32,
        /// The reserved high bit of the promised stream id (should be 0).
        reserved: bool,
    },
    Ping {
        ack: bool,
        opaque: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        /// The reserved high bit of the last stream id (should be 0).
        reserved: bool,
        error_code: u32,
        /// Length of the additional debug data.
        debug_len: u32,
    },
    WindowUpdate {
        increment: u32,
        /// The reserved high bit of the increment field (should be 0).
        reserved: bool,
    },
    Continuation,
    /// A type RFC 9113 does not define; kept with its raw header.
    Unknown,
}

impl<'a> Body<'a> {
    /// SETTINGS parameters in wire order; empty for other frame types.
    pub fn settings(&self) -> impl Iterator<Item = Setting> + 'a {
        let raw: &'a [u8] = match *self {
            Body::Settings { raw, .. } => raw,
            _ => &[],
        };
        raw.chunks_exact(6).map(|c| Setting {
            id: u16::from_be_bytes([c[0], c[1]]),
            value: u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        })
    }

    /// How many payload bytes a body needs to be typed: DATA needs only its
    /// pad-length byte, everything else its whole payload.
    pub(crate) fn prefix_needed(head: &Head) -> usize {
        if head.ty() == FrameType::DATA {
            usize::from(head.flags().contains(Flags::PADDED)).min(head.len() as usize)
        } else {
            head.len() as usize
        }
    }

    /// Types a payload (for DATA: just its pad-length byte, if any).
    pub fn load(head: &Head, offset: u64, p: &'a [u8]) -> Result<Body<'a>, Error> {
        let bad = |what| Error::Malformed {
            offset,
            ty: head.ty(),
            what,
        };
        let len = head.len();
        let flags = head.flags();
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        // Pad length, checked against the payload length (RFC 9113 §6.1).
        let pad = |extra: u32| -> Result<(Option<u8>, usize), Error> {
            if !flags.contains(Flags::PADDED) {
                return Ok((None, 0));
            }
            if len < 1 {
                return Err(bad("PADDED set on an empty payload"));
            }
            let pl = p[0];
            if u32::from(pl) + 1 + extra > len {
                return Err(bad("pad length exceeds the payload"));
            }
            Ok((Some(pl), 1))
        };
        let priority = |b: &[u8]| {
            let dep = be32(b);
            Priority {
                dependency: dep & 0x7fff_ffff,
                exclusive: dep & 0x8000_0000 != 0,
                weight: u16::from(b[4]) + 1,
            }
        };
        Ok(match head.ty() {
            FrameType::DATA => Body::Data { pad: pad(0)?.0 },
            FrameType::HEADERS => {
                let has_prio = flags.contains(Flags::PRIORITY);
                let (pad, at) = pad(if has_prio { 5 } else { 0 })?;
                let priority = if has_prio {
                    if p.len() < at + 5 {
                        return Err(bad("PRIORITY flag set but fewer than 5 bytes"));
                    }
                    Some(priority(&p[at..]))
                } else {
                    None
                };
                Body::Headers { pad, priority }
            }
            FrameType::PRIORITY => {
                if len != 5 {
                    return Err(bad("length is not 5"));
                }
                Body::Priority(priority(p))
            }
            FrameType::RST_STREAM => {
                if len != 4 {
                    return Err(bad("length is not 4"));
                }
                Body::RstStream {
                    error_code: be32(p),
                }
            }
            FrameType::SETTINGS => {
                if len % 6 != 0 {
                    return Err(bad("length is not a multiple of 6"));
                }
                let ack = flags.contains(0x1);
                if ack && len != 0 {
                    return Err(bad("ACK with a non-empty payload"));
                }
                Body::Settings { ack, raw: p }
            }
            FrameType::PUSH_PROMISE => {
                let (pad, at) = pad(4)?;
                if p.len() < at + 4 {
                    return Err(bad("shorter than a promised stream id"));
                }
                let raw = be32(&p[at..]);
                Body::PushPromise {
                    pad,
                    promised: raw & 0x7fff_ffff,
                    reserved: raw & 0x8000_0000 != 0,
                }
            }
            FrameType::PING => {
                if len != 8 {
                    return Err(bad("length is not 8"));
                }
                let mut opaque = [0; 8];
                opaque.copy_from_slice(p);
                Body::Ping {
                    ack: flags.contains(0x1),
                    opaque,
                }
            }
            FrameType::GOAWAY => {
                if len < 8 {
                    return Err(bad("shorter than 8 bytes"));
                }
                Body::GoAway {
                    last_stream: be32(p) & 0x7fff_ffff,
                    reserved: be32(p) & 0x8000_0000 != 0,
                    error_code: be32(&p[4..]),
                    debug_len: len - 8,
                }
            }
            FrameType::WINDOW_UPDATE => {
                if len != 4 {
                    return Err(bad("length is not 4"));
                }
                let raw = be32(p);
                Body::WindowUpdate {
                    increment: raw & 0x7fff_ffff,
                    reserved: raw & 0x8000_0000 != 0,
                }
            }
            FrameType::CONTINUATION => Body::Continuation,
            _ => Body::Unknown,
        })
    }
}

/// A frame as the parser saw it.
#[derive(PartialEq, Eq, Debug)]
pub struct FrameRef<'a> {
    /// Offset of the frame header in its direction's byte stream.
    pub offset: u64,
    pub head: Head,
    pub body: Body<'a>,
    pub(super) payload: PayloadRef<'a>,
}

/// Where a frame's payload is, if the parser kept it.
#[derive(PartialEq, Eq, Debug)]
pub(super) enum PayloadRef<'a> {
    /// DATA, with payloads not kept.
    Skipped,
    /// In the parser's reused buffer (every non-DATA frame).
    Borrowed(&'a [u8]),
    /// A kept DATA payload, gathered in a buffer of its own so that a
    /// full capture takes it without copying 16 KiB a frame.
    Owned(&'a mut Vec<u8>),
}

impl FrameRef<'_> {
    /// The whole payload for non-DATA frames (and for DATA when the parser
    /// was asked to keep DATA payloads, until [`FrameRef::take_payload`]);
    /// `None` otherwise.
    pub fn payload(&self) -> Option<&[u8]> {
        match &self.payload {
            PayloadRef::Skipped => None,
            PayloadRef::Borrowed(p) => Some(p),
            PayloadRef::Owned(v) => Some(v),
        }
    }

    /// The payload as an owned buffer: a kept DATA payload is moved out
    /// (the parser gathers the next one in a new buffer), anything else
    /// is copied.
    pub fn take_payload(&mut self) -> Option<Vec<u8>> {
        match &mut self.payload {
            PayloadRef::Skipped => None,
            PayloadRef::Borrowed(p) => Some(p.to_vec()),
            PayloadRef::Owned(v) => Some(std::mem::take(*v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode;
    use super::*;

    fn load(bytes: &[u8]) -> Result<Body<'_>, Error> {
        let head = Head::parse(bytes[..9].try_into().unwrap());
        Body::load(&head, 0, &bytes[9..])
    }

    #[test]
    fn data_with_padding() {
        let b = encode::data(1, 0x1, Some(3), b"hello");
        assert_eq!(load(&b).unwrap(), Body::Data { pad: Some(3) });
        assert_eq!(Head::parse(b[..9].try_into().unwrap()).len(), 1 + 5 + 3);
    }

    #[test]
    fn window_update_keeps_reserved_bit() {
        let mut b = encode::window_update(0, 65535);
        b[9] |= 0x80;
        assert_eq!(
            load(&b).unwrap(),
            Body::WindowUpdate {
                increment: 65535,
                reserved: true
            }
        );
    }

    #[test]
    fn goaway_and_push_promise_keep_their_reserved_bits() {
        let mut b = encode::goaway(7, 0, b"");
        b[9] |= 0x80;
        assert_eq!(
            load(&b).unwrap(),
            Body::GoAway {
                last_stream: 7,
                reserved: true,
                error_code: 0,
                debug_len: 0
            }
        );
        let mut b = encode::push_promise(1, 0x4, Some(1), 2, b"");
        b[10] |= 0x80;
        assert_eq!(
            load(&b).unwrap(),
            Body::PushPromise {
                pad: Some(1),
                promised: 2,
                reserved: true
            }
        );
    }

    #[test]
    fn settings_pairs_in_order_unknown_ids_kept() {
        let b = encode::settings(false, &[(4, 1 << 20), (0xfe03, 1), (5, 16384)]);
        let body = load(&b).unwrap();
        let s: Vec<_> = body.settings().map(|s| (s.id, s.value)).collect();
        assert_eq!(s, vec![(4, 1 << 20), (0xfe03, 1), (5, 16384)]);
    }

    #[test]
    fn headers_with_priority_and_padding() {
        let prio = Priority {
            dependency: 3,
            exclusive: true,
            weight: 16,
        };
        let b = encode::headers(5, 0x4 | 0x1, Some(2), Some(prio), b"\x82\x86");
        assert_eq!(
            load(&b).unwrap(),
            Body::Headers {
                pad: Some(2),
                priority: Some(prio)
            }
        );
    }

    #[test]
    fn rst_goaway_ping_priority_push_continuation_unknown() {
        assert_eq!(
            load(&encode::rst_stream(1, 8)).unwrap(),
            Body::RstStream { error_code: 8 }
        );
        assert_eq!(
            load(&encode::goaway(7, 0xb, b"calm")).unwrap(),
            Body::GoAway {
                last_stream: 7,
                reserved: false,
                error_code: 0xb,
                debug_len: 4
            }
        );
        assert_eq!(
            load(&encode::ping(true, *b"12345678")).unwrap(),
            Body::Ping {
                ack: true,
                opaque: *b"12345678"
            }
        );
        let prio = Priority {
            dependency: 0,
            exclusive: false,
            weight: 256,
        };
        assert_eq!(
            load(&encode::priority(3, prio)).unwrap(),
            Body::Priority(prio)
        );
        assert_eq!(
            load(&encode::push_promise(1, 0x4, None, 2, b"\x82")).unwrap(),
            Body::PushPromise {
                pad: None,
                promised: 2,
                reserved: false
            }
        );
        assert_eq!(
            load(&encode::continuation(1, 0x4, b"\x82")).unwrap(),
            Body::Continuation
        );
        assert_eq!(
            load(&encode::raw(0x0b, 0xff, 9, b"xyz")).unwrap(),
            Body::Unknown
        );
    }

    /// The pad length byte, the padding and (HEADERS) the priority fit
    /// the payload exactly, or the frame is malformed (RFC 9113 §6.1, §6.2).
    #[test]
    fn padding_that_fills_the_payload_exactly_is_the_limit() {
        assert_eq!(
            load(&encode::raw(0, 0x8, 1, &[2, 0, 0])).unwrap(),
            Body::Data { pad: Some(2) }
        );
        assert!(matches!(
            load(&encode::raw(0, 0x8, 1, &[3, 0, 0])),
            Err(Error::Malformed { .. })
        ));
        // PADDED | PRIORITY: pad length, 5 priority bytes, the padding.
        let mut p = vec![1, 0, 0, 0, 3, 15, 0];
        assert!(matches!(
            load(&encode::raw(1, 0x8 | 0x20, 1, &p)),
            Ok(Body::Headers {
                pad: Some(1),
                priority: Some(_)
            })
        ));
        p[0] = 2;
        assert!(matches!(
            load(&encode::raw(1, 0x8 | 0x20, 1, &p)),
            Err(Error::Malformed { .. })
        ));
        // PRIORITY alone: 5 bytes at least.
        assert!(matches!(
            load(&encode::raw(1, 0x20, 1, &[0, 0, 0, 3])),
            Err(Error::Malformed { .. })
        ));
        assert!(matches!(
            load(&encode::raw(1, 0x20, 1, &[0, 0, 0, 3, 15])),
            Ok(Body::Headers {
                pad: None,
                priority: Some(_)
            })
        ));
    }

    #[test]
    fn wrong_lengths_are_malformed_not_panics() {
        for (ty, len) in [
            (3u8, 3usize),
            (6, 7),
            (8, 5),
            (2, 4),
            (4, 5),
            (7, 7),
            (5, 2),
        ] {
            let b = encode::raw(ty, 0, 1, &vec![0; len]);
            assert!(
                matches!(load(&b), Err(Error::Malformed { .. })),
                "type {ty} len {len}"
            );
        }
        // Pad length larger than the payload.
        let b = encode::raw(0, 0x8, 1, &[200, 1, 2]);
        assert!(matches!(load(&b), Err(Error::Malformed { .. })));
        // SETTINGS ACK with a payload.
        let b = encode::raw(4, 0x1, 0, &[0; 6]);
        assert!(matches!(load(&b), Err(Error::Malformed { .. })));
    }
}
