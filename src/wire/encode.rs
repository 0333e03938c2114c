//! Frame builders: exact wire bytes for tests, mock peers and for rebuilding
//! capture files from a trace.

use super::{Flags, FrameType, Head, Priority, PREFACE};

/// A frame with an arbitrary type, flags, stream and payload.
pub fn raw(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + payload.len());
    Head::new(payload.len() as u32, FrameType(ty), flags, stream).encode(&mut out);
    out.extend_from_slice(payload);
    out
}

fn padded(pad: Option<u8>, mid: &[u8], body: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    if let Some(n) = pad {
        p.push(n);
    }
    p.extend_from_slice(mid);
    p.extend_from_slice(body);
    p.resize(p.len() + pad.unwrap_or(0) as usize, 0);
    p
}

pub fn preface() -> Vec<u8> {
    PREFACE.to_vec()
}

/// DATA; `pad` sets PADDED and appends that many zero bytes.
pub fn data(stream: u32, flags: u8, pad: Option<u8>, body: &[u8]) -> Vec<u8> {
    let flags = flags | if pad.is_some() { Flags::PADDED } else { 0 };
    raw(0x0, flags, stream, &padded(pad, &[], body))
}

fn priority_bytes(p: Priority) -> [u8; 5] {
    let dep = p.dependency | if p.exclusive { 0x8000_0000 } else { 0 };
    let d = dep.to_be_bytes();
    [d[0], d[1], d[2], d[3], (p.weight.clamp(1, 256) - 1) as u8]
}

pub fn headers(
    stream: u32,
    flags: u8,
    pad: Option<u8>,
    priority: Option<Priority>,
    block: &[u8],
) -> Vec<u8> {
    let mut flags = flags | if pad.is_some() { Flags::PADDED } else { 0 };
    let mut mid = Vec::new();
    if let Some(p) = priority {
        flags |= Flags::PRIORITY;
        mid.extend_from_slice(&priority_bytes(p));
    }
    raw(0x1, flags, stream, &padded(pad, &mid, block))
}

pub fn priority(stream: u32, p: Priority) -> Vec<u8> {
    raw(0x2, 0, stream, &priority_bytes(p))
}

pub fn rst_stream(stream: u32, error_code: u32) -> Vec<u8> {
    raw(0x3, 0, stream, &error_code.to_be_bytes())
}

pub fn settings(ack: bool, params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::with_capacity(params.len() * 6);
    for (id, v) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    raw(0x4, u8::from(ack), 0, &p)
}

pub fn push_promise(
    stream: u32,
    flags: u8,
    pad: Option<u8>,
    promised: u32,
    block: &[u8],
) -> Vec<u8> {
    let flags = flags | if pad.is_some() { Flags::PADDED } else { 0 };
    raw(
        0x5,
        flags,
        stream,
        &padded(pad, &promised.to_be_bytes(), block),
    )
}

pub fn ping(ack: bool, opaque: [u8; 8]) -> Vec<u8> {
    raw(0x6, u8::from(ack), 0, &opaque)
}

pub fn goaway(last_stream: u32, error_code: u32, debug: &[u8]) -> Vec<u8> {
    let mut p = last_stream.to_be_bytes().to_vec();
    p.extend_from_slice(&error_code.to_be_bytes());
    p.extend_from_slice(debug);
    raw(0x7, 0, 0, &p)
}

pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    raw(0x8, 0, stream, &increment.to_be_bytes())
}

pub fn continuation(stream: u32, flags: u8, block: &[u8]) -> Vec<u8> {
    raw(0x9, flags, stream, block)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pad` sets PADDED whether or not the caller's flags already did.
    #[test]
    fn padded_flag_given_twice_stays_set() {
        for frame in [
            data(1, Flags::PADDED, Some(2), b"x"),
            push_promise(1, Flags::PADDED, Some(2), 2, b"x"),
            headers(
                1,
                Flags::PADDED | Flags::PRIORITY,
                Some(2),
                Some(Priority::default()),
                b"x",
            ),
        ] {
            let head = Head::parse(frame[..9].try_into().unwrap());
            assert!(head.flags().contains(Flags::PADDED), "{head:?}");
            assert_eq!(frame[9], 2, "the pad length comes first");
        }
        let frame = push_promise(1, Flags::END_HEADERS, Some(2), 2, b"x");
        let head = Head::parse(frame[..9].try_into().unwrap());
        assert_eq!(head.flags(), Flags(Flags::END_HEADERS | Flags::PADDED));
    }
}
