//! `trace`: the clock, the bounded recorder and its JSON Lines writer.
//!
//! The schema itself lives in `h2probe_analysis::schema` (the reader owns the
//! format); this module only writes it.

pub mod clock;
mod drop_behind;
mod frame_event;
mod output;
#[cfg(test)]
mod page_cache_probe;
mod recorder;

pub(crate) use drop_behind::DropBehind;
pub use frame_event::frame_event;
pub use h2probe_analysis::schema;
pub use recorder::{
    Recorder, RecorderStats, TraceWriter, WriterFailure, DEFAULT_CAPACITY, PAYLOAD_BUDGET,
};
