//! `wire`: a sans-IO HTTP/2 frame parser, the bottom layer.
//!
//! The parser ([`Parser`]) never touches a socket or a clock: callers feed
//! byte slices exactly as they came off the wire and get frames back. It
//! knows nothing of clap, tokio or the recorder; the tap (`crate::tap`) is
//! the only place that glues it to real I/O.

pub mod encode;
mod error;
mod frame;
mod head;
mod parser;
pub mod rules;
pub mod sniff;

pub use error::{Error, TLS_RECORD};
pub use frame::{Body, FrameRef, Setting};
pub use h2probe_analysis::schema::{FrameType, Priority};
pub use head::{Flags, Head, HEADER_LEN};
pub use parser::{Parsed, Parser, PREFACE};
pub use rules::Writer;

/// The initial SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest frame payload the 24-bit length field allows.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
