//! The schema's view of a parsed frame: the one mapping from the parser's
//! [`FrameRef`] to a `frame` event, shared by the tap, `decode` and exports.

use super::schema::{self, Dir, FrameEv};
use crate::config::CapturePayload;
use crate::wire::{Body, FrameRef};

/// The schema's view of a parsed frame.
///
/// `upload`: the frame travels client→server (the bulk DATA `headers`
/// capture leaves out). A kept DATA payload is taken from `f`, not copied.
pub fn frame_event(
    f: &mut FrameRef<'_>,
    dir: Dir,
    capture: CapturePayload,
    upload: bool,
) -> FrameEv {
    let mut ev = FrameEv {
        dir,
        offset: f.offset,
        frame: f.head.ty(),
        flags: f.head.flags().0,
        len: f.head.len(),
        reserved: f.head.reserved(),
        ..FrameEv::default()
    };
    match f.body {
        Body::Data { pad } => ev.pad = pad.unwrap_or(0),
        Body::Headers { pad, priority } => {
            ev.pad = pad.unwrap_or(0);
            ev.priority = priority;
        }
        Body::Priority(p) => ev.priority = Some(p),
        Body::RstStream { error_code } => ev.error_code = Some(error_code),
        Body::Settings { .. } => {
            ev.settings = Some(f.body.settings().map(|s| (s.id, s.value)).collect())
        }
        Body::PushPromise {
            pad,
            promised,
            reserved,
        } => {
            ev.pad = pad.unwrap_or(0);
            ev.promised = Some(promised);
            ev.field_reserved = reserved;
        }
        Body::Ping { opaque, .. } => ev.opaque = Some(u64::from_be_bytes(opaque)),
        Body::GoAway {
            last_stream,
            reserved,
            error_code,
            ..
        } => {
            ev.last_stream = Some(last_stream);
            ev.field_reserved = reserved;
            ev.error_code = Some(error_code);
        }
        Body::WindowUpdate {
            increment,
            reserved,
        } => {
            ev.increment = Some(increment);
            ev.field_reserved = reserved;
        }
        Body::Continuation | Body::Unknown => {}
    }
    let keep = match capture {
        CapturePayload::None => false,
        CapturePayload::Headers => f.head.ty() != schema::FrameType::DATA || !upload,
        CapturePayload::Full => true,
    };
    if keep && f.payload().is_some_and(|p| !p.is_empty()) {
        ev.payload = f.take_payload().map(schema::Payload);
    }
    ev
}
