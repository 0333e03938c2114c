//! The results of one pass: the summary figures, the invariant checks and
//! the bounded time series.

use crate::series::{Merge, Series};
use crate::stats::Distribution;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Buckets per series (bounded memory, enough for a readable plot).
const SERIES_CAP: usize = 2048;

/// An invariant and whether the trace honours it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `None` when the trace lacks what the check needs (e.g. no server events).
    pub ok: Option<bool>,
    pub detail: String,
}

impl Check {
    pub(super) fn new(ok: bool, detail: impl Into<String>) -> Check {
        Check {
            ok: Some(ok),
            detail: detail.into(),
        }
    }
    pub(super) fn na(detail: impl Into<String>) -> Check {
        Check {
            ok: None,
            detail: detail.into(),
        }
    }
}

/// The headline figures of one run (`summary.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Seconds from the first to the last event.
    pub span_s: f64,
    pub scheduled: u64,
    pub sent: u64,
    pub never_sent: u64,
    pub never_sent_by_reason: BTreeMap<String, u64>,
    pub decoded: u64,
    pub completed: u64,
    pub discarded: u64,
    pub discarded_by_reason: BTreeMap<String, u64>,
    /// scheduled − completed − discarded − never_sent. Non-zero only when
    /// messages were lost in flight (see `lost_in_flight`) or events are missing.
    pub unaccounted: i64,
    /// Messages handed to h2 that the server never decoded: sent − decoded.
    /// They were in h2's buffers or on the wire when a stream was reset, so
    /// only RPCs that did not end OK can have them.
    pub lost_in_flight: i64,
    /// Messages per second over the offered period (first to last `schedule`).
    pub offered_rate: f64,
    /// `send` events per second, first schedule → last send.
    pub send_rate: f64,
    pub decode_rate: f64,
    /// `complete` events per second, first start → last complete.
    pub completion_rate: f64,
    /// Least-squares slope of queue depth (msg/s) over `queue_growth_window_s`.
    pub queue_growth_rate: f64,
    /// The steady window of the fit, seconds since the trace origin:
    /// warm-up (first 10% of the offered period) and drain excluded.
    pub queue_growth_window_s: (f64, f64),
    /// Stream-level WINDOW_UPDATEs the server sent within the growth window,
    /// and the stream credit (bytes) they returned: what the transport kept
    /// granting while the queue grew. (Connection-level updates come on top.)
    pub window_updates_in_growth_window: u64,
    pub credit_returned_in_growth_window: u64,
    /// Queue depth change over the growth window, messages.
    pub queue_growth_in_window: f64,
    pub max_queue_depth: u64,
    pub max_queued_bytes: u64,
    /// Peak framed bytes decoded and not yet completed or discarded.
    pub max_owned_bytes: u64,
    /// Peak bytes received by the server application and not yet released.
    pub max_unreleased_bytes: u64,
    pub client_window_blocked_s: f64,
    pub client_socket_blocked_s: f64,
    pub server_socket_blocked_s: f64,
    pub window_blocked_ms: Distribution,
    pub socket_blocked_ms: Distribution,
    /// Scheduled → handed to h2 (start of `send_data`), ms.
    pub lateness_ms: Distribution,
    /// DATA frames / payload bytes read by the server's tap.
    pub data_frames_in: u64,
    pub data_bytes_in: u64,
    /// WINDOW_UPDATE frames written by the server's tap (stream + connection).
    pub window_updates_out: u64,
    pub window_updates_out_stream: u64,
    pub window_updates_out_conn: u64,
    /// Stream-level WINDOW_UPDATE increments, bytes.
    pub window_update_increment: Distribution,
    pub releases: u64,
    pub released_bytes: u64,
    /// Releases per stream-level WINDOW_UPDATE.
    pub coalescing_ratio: f64,
    /// `release` call → the stream WINDOW_UPDATE that carried its last byte, ms.
    pub release_to_update_ms: Distribution,
    /// Same, for the connection-level WINDOW_UPDATE.
    pub release_to_conn_update_ms: Distribution,
    pub release_point: Option<String>,
    /// Client tap write → server tap read of the same client→server frame
    /// (matched by byte offset), ms: the one-way time through the socket,
    /// plus any `--link-delay`.
    pub c2s_frame_latency_ms: Distribution,
    /// Client RPC outcomes by gRPC status name.
    pub rpc_status: BTreeMap<String, u64>,
    pub server_rpc_status: BTreeMap<String, u64>,
    /// Lowest windows reconstructed anywhere (should never be negative).
    pub min_window: i64,
    pub protocol_violations: u64,
    pub wire_errors: u64,
    pub peak_rss_bytes: u64,
    pub dropped_events: u64,
    /// clean | no_footer | truncated at line N
    pub trace_ending: String,
    pub checks: BTreeMap<String, Check>,
}

/// Time series for plots and CSV (bounded, see [`Series`]).
pub struct Timeline {
    pub credit_conn_client: Series,
    pub credit_stream_client: Series,
    pub credit_conn_server: Series,
    pub unreleased: Series,
    pub owned_bytes: Series,
    pub queue_depth: Series,
    pub scheduled: Series,
    pub sent: Series,
    pub completed: Series,
    pub discarded: Series,
    pub window_blocked: Series,
    pub socket_blocked: Series,
    pub window_update_bytes: Series,
    pub window_updates: Series,
    pub rss: Series,
    /// (start s, end s, window=true / socket=false) client blocked intervals.
    pub intervals: Vec<(f64, f64, bool)>,
    pub intervals_dropped: u64,
    /// Seconds from the trace origin to the last event.
    pub end_s: f64,
}

impl Timeline {
    pub(super) fn new(origin: u64) -> Timeline {
        let s = |m| Series::new(origin, 1_000_000, SERIES_CAP, m);
        Timeline {
            credit_conn_client: s(Merge::Min),
            credit_stream_client: s(Merge::Min),
            credit_conn_server: s(Merge::Min),
            unreleased: s(Merge::Max),
            owned_bytes: s(Merge::Max),
            queue_depth: s(Merge::Max),
            scheduled: s(Merge::Last),
            sent: s(Merge::Last),
            completed: s(Merge::Last),
            discarded: s(Merge::Last),
            window_blocked: s(Merge::Sum),
            socket_blocked: s(Merge::Sum),
            window_update_bytes: s(Merge::Sum),
            window_updates: s(Merge::Sum),
            rss: s(Merge::Max),
            intervals: vec![],
            intervals_dropped: 0,
            end_s: 0.0,
        }
    }
}
