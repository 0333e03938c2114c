//! The 9-byte frame header (RFC 9113 §4.1).

use super::FrameType;
use h2probe_analysis::schema::flags;

pub const HEADER_LEN: usize = 9;

/// Raw flag bits, all kept; `Debug` names the ones defined for the frame type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    pub const END_STREAM: u8 = flags::END_STREAM;
    pub const ACK: u8 = flags::ACK;
    pub const END_HEADERS: u8 = flags::END_HEADERS;
    pub const PADDED: u8 = flags::PADDED;
    pub const PRIORITY: u8 = flags::PRIORITY;

    pub fn contains(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Names of the set bits as defined for `ty`; undefined bits as hex.
    pub fn names(self, ty: FrameType) -> Vec<String> {
        let defined: &[(u8, &str)] = match ty {
            FrameType::DATA => &[(Self::END_STREAM, "END_STREAM"), (Self::PADDED, "PADDED")],
            FrameType::HEADERS => &[
                (Self::END_STREAM, "END_STREAM"),
                (Self::END_HEADERS, "END_HEADERS"),
                (Self::PADDED, "PADDED"),
                (Self::PRIORITY, "PRIORITY"),
            ],
            FrameType::SETTINGS | FrameType::PING => &[(Self::ACK, "ACK")],
            FrameType::PUSH_PROMISE => {
                &[(Self::END_HEADERS, "END_HEADERS"), (Self::PADDED, "PADDED")]
            }
            FrameType::CONTINUATION => &[(Self::END_HEADERS, "END_HEADERS")],
            _ => &[],
        };
        let mut out = Vec::new();
        let mut rest = self.0;
        for (bit, name) in defined {
            if self.0 & bit != 0 {
                out.push((*name).to_string());
                rest &= !bit;
            }
        }
        if rest != 0 {
            out.push(format!("0x{rest:02x}"));
        }
        out
    }
}

impl std::fmt::Debug for Flags {
    /// `Flags(0x09)`: the frame type is needed to name bits (they overlap
    /// across types); [`Head`]'s `Debug` prints the names.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flags(0x{:02x})", self.0)
    }
}

/// A decoded frame header. The stream id's reserved bit is kept apart, not masked away.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Head {
    len: u32,
    ty: FrameType,
    flags: Flags,
    stream: u32,
    reserved: bool,
}

impl std::fmt::Debug for Head {
    /// `Head { ty: DATA, len: 40, flags: ["END_STREAM", "PADDED"], stream: 1 }`:
    /// flag bits named as the frame type defines them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Head");
        d.field("ty", &format_args!("{}", self.ty))
            .field("len", &self.len)
            .field("flags", &self.flags.names(self.ty))
            .field("stream", &self.stream);
        if self.reserved {
            d.field("reserved", &true);
        }
        d.finish()
    }
}

impl Head {
    pub fn new(len: u32, ty: FrameType, flags: u8, stream: u32) -> Head {
        Head {
            len,
            ty,
            flags: Flags(flags),
            stream: stream & 0x7fff_ffff,
            reserved: stream & 0x8000_0000 != 0,
        }
    }

    /// Decodes the 9 header bytes.
    pub fn parse(b: &[u8; HEADER_LEN]) -> Head {
        let len = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        let sid = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        Head::new(len, FrameType(b[3]), b[4], sid)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_be_bytes()[1..]);
        out.push(self.ty.0);
        out.push(self.flags.0);
        let sid = self.stream | if self.reserved { 0x8000_0000 } else { 0 };
        out.extend_from_slice(&sid.to_be_bytes());
    }

    pub fn len(&self) -> u32 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn ty(&self) -> FrameType {
        self.ty
    }
    pub fn flags(&self) -> Flags {
        self.flags
    }
    pub fn stream(&self) -> u32 {
        self.stream
    }
    pub fn reserved(&self) -> bool {
        self.reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_round_trip_with_reserved_bit() {
        let b = [0x00, 0x40, 0x00, 0x00, 0x01, 0x80, 0x00, 0x00, 0x03];
        let h = Head::parse(&b);
        assert_eq!(h.len(), 16384);
        assert_eq!(h.ty(), FrameType::DATA);
        assert_eq!(h.stream(), 3);
        assert!(h.reserved());
        let mut out = Vec::new();
        h.encode(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn flag_names_keep_undefined_bits() {
        assert_eq!(
            Flags(0x0d).names(FrameType::HEADERS),
            vec!["END_STREAM", "END_HEADERS", "PADDED"]
        );
        assert_eq!(
            Flags(0x41).names(FrameType::DATA),
            vec!["END_STREAM", "0x40"]
        );
        // One bit, three meanings: ACK, END_STREAM, or nothing defined.
        for ty in [FrameType::SETTINGS, FrameType::PING] {
            assert_eq!(Flags(0x01).names(ty), vec!["ACK"], "{ty}");
        }
        assert_eq!(Flags(0x01).names(FrameType::CONTINUATION), vec!["0x01"]);
        assert_eq!(Flags(0x01).names(FrameType::WINDOW_UPDATE), vec!["0x01"]);
        assert_eq!(
            Flags(0x0c).names(FrameType::PUSH_PROMISE),
            vec!["END_HEADERS", "PADDED"]
        );
        assert_eq!(
            Flags(0x0c).names(FrameType::CONTINUATION),
            vec!["END_HEADERS", "0x08"]
        );
    }

    /// What a failed `assert_eq!` on frames shows: flag bits by name, the
    /// reserved bit only when set.
    #[test]
    fn debug_names_the_flags_by_the_frame_type() {
        let h = Head::new(40, FrameType::DATA, 0x09, 1);
        assert_eq!(
            format!("{h:?}"),
            r#"Head { ty: DATA, len: 40, flags: ["END_STREAM", "PADDED"], stream: 1 }"#
        );
        let h = Head::new(0, FrameType::SETTINGS, 0x01, 0x8000_0000);
        assert_eq!(
            format!("{h:?}"),
            r#"Head { ty: SETTINGS, len: 0, flags: ["ACK"], stream: 0, reserved: true }"#
        );
        assert_eq!(format!("{:?}", Flags(0x09)), "Flags(0x09)");
    }
}
