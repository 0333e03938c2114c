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
}

impl Error {
    pub fn offset(&self) -> u64 {
        match *self {
            Error::BadPreface { offset }
            | Error::FrameTooLarge { offset, .. }
            | Error::Malformed { offset, .. }
            | Error::Truncated { offset, .. } => offset,
        }
    }
}
