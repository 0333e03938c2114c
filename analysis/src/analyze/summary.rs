//! The results of one pass: the summary figures, the invariant checks and
//! the bounded time series.

use crate::schema::Endpoint;
use crate::series::{Merge, Series};
use crate::stats::Distribution;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Buckets per series (bounded memory, enough for a readable plot).
const SERIES_CAP: usize = 2048;

/// Streams that get their own credit and bytes series (the first ones
/// seen; later streams are counted in [`Timeline::streams_untracked`]), so
/// memory stays bounded however many streams a run opens.
pub const MAX_STREAM_SERIES: usize = 64;

/// The queue's fitted slope (msg/s over the growth window) above which it
/// is said to grow: [`Summary::queue_grows_on_credit`].
pub const GROWING_MSG_PER_S: f64 = 1.0;

/// An invariant and whether the trace honours it (by default: cannot be
/// judged, no reason given).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `true` holds, `false` a violation (with its first offending event),
    /// `None` the trace cannot tell (the detail says why: one side only, cut
    /// short, events dropped).
    pub ok: Option<bool>,
    pub detail: String,
    /// First offending event of a violation: seconds since the trace origin
    /// and line in the trace file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_t_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_line: Option<u64>,
}

impl Check {
    /// A violation whose first offending event is at `t_s`, line `line`.
    pub(super) fn failed_at(detail: impl Into<String>, t_s: f64, line: u64) -> Check {
        Check {
            ok: Some(false),
            detail: detail.into(),
            first_t_s: Some(t_s),
            first_line: Some(line),
        }
    }
    pub(super) fn new(ok: bool, detail: impl Into<String>) -> Check {
        Check {
            ok: Some(ok),
            detail: detail.into(),
            first_t_s: None,
            first_line: None,
        }
    }
    pub(super) fn na(detail: impl Into<String>) -> Check {
        Check {
            ok: None,
            detail: detail.into(),
            first_t_s: None,
            first_line: None,
        }
    }
}

/// The headline figures of one run (`summary.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Seconds from the first to the last event.
    pub span_s: f64,
    /// When the first event happened, seconds since the trace origin (the
    /// plots' time axis and `report --at`'s); `null` without events.
    #[serde(default)]
    pub first_event_s: Option<f64>,
    /// When the upload's first and last DATA frames (client to server, as
    /// either tap saw them) were written or read, seconds since the trace
    /// origin; `null` without one. A queue can keep its workers busy long
    /// after the last one, and the replies' DATA comes later still.
    #[serde(default)]
    pub upload_data_s: Option<(f64, f64)>,
    pub scheduled: u64,
    pub sent: u64,
    pub never_sent: u64,
    pub never_sent_by_reason: BTreeMap<String, u64>,
    /// Unary: messages a connection that ended before its schedule handed
    /// to the connection replacing it, unsent (`never_sent` `handed_over`:
    /// not in `never_sent`, sent or not there), and those its replacements
    /// took (`handed`): equal in a whole trace. Each message is counted
    /// once in `scheduled`, on the connection that scheduled it.
    #[serde(default)]
    pub handed_over: u64,
    #[serde(default)]
    pub handed_in: u64,
    pub decoded: u64,
    pub completed: u64,
    pub discarded: u64,
    pub discarded_by_reason: BTreeMap<String, u64>,
    /// scheduled − completed − discarded − never_sent, over the connections
    /// paired across the taps (see `unpaired`). Non-zero only when
    /// messages were lost in flight (see `lost_in_flight`) or events are missing.
    /// `null` in a trace without both sides (one side's counts are not
    /// the other's: a client alone read as every message lost).
    pub unaccounted: Option<i64>,
    /// Messages handed to h2 that the server never decoded: sent − decoded,
    /// over the connections paired across the taps (see `unpaired`).
    /// They were in h2's buffers or on the wire when a stream was reset, so
    /// only RPCs that did not end OK can have them. `null` in a trace
    /// without both sides.
    pub lost_in_flight: Option<i64>,
    /// In a trace with both sides, the connections a message crossed (sent
    /// by a client, decoded by a server) that no connection of the other
    /// side's tap pairs with (a client
    /// the trace does not hold, such as a foreign gRPC client of `serve`, or
    /// a client's connection to another server), and their messages: they
    /// count in every figure above but `unaccounted` and `lost_in_flight`,
    /// and the accounting check matches only the paired ones across sides.
    /// Absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpaired: Option<Unpaired>,
    /// The server cut bodies into raw work units (`--framing raw`: its
    /// `rpc_start` says `framing: raw:N`, or its `decode` events have no
    /// gRPC prefix, framed = size), so its counts
    /// are units, not the client's messages: `unaccounted` and
    /// `lost_in_flight` are then 0 (null without both sides) and the accounting check judges each
    /// side on its own.
    pub raw_units: bool,
    /// The client offered messages per connection (`schedule` on stream 0:
    /// `--rpc unary`), each call carrying one: streams have no demand of
    /// their own, so starvation is not a question.
    #[serde(default)]
    pub unary: bool,
    /// Messages per second over the offered period (first to last `schedule`).
    pub offered_rate: f64,
    /// `send` events per second, (n − 1) over first schedule → the later
    /// of the last send and the last schedule (whole run: a one-time
    /// allowance of queue slots and window fills is included).
    pub send_rate: f64,
    /// Least-squares slope of cumulative sends (msg/s) over the steady window
    /// (`queue_growth_window_s`): the rate the client sustained. Fitted on
    /// the `sent` series in the window's buckets (1 ms, wider for runs
    /// longer than 2,048 buckets), one point per bucket, the count held
    /// through buckets without a send to the window's end.
    pub send_rate_steady: f64,
    pub decode_rate: f64,
    /// `complete` events per second, first start → last complete.
    pub completion_rate: f64,
    /// Least-squares slope of queue depth (msg/s) over `queue_growth_window_s`.
    pub queue_growth_rate: f64,
    /// The steady window of the fit, seconds since the trace origin:
    /// warm-up (first 10% of the offered period) and drain excluded, on
    /// whole timeline buckets: [start, end), every figure of the window
    /// counted on `t` within it.
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
    /// Peak bytes received by the server application and not yet released,
    /// over every stream of every connection at one instant.
    pub max_unreleased_bytes: u64,
    /// The same of one stream (the figure the `credit` check compares
    /// with the stream window).
    #[serde(default)]
    pub max_stream_unreleased_bytes: u64,
    /// Client waits for capacity while the send window reconstructed from
    /// the client's tap (stream or connection) was ≤ 0: blocked on credit.
    pub client_window_blocked_s: f64,
    /// Client waits for capacity while the window was open: h2 withheld
    /// capacity because its own send buffer was full (socket backpressure
    /// seen through h2).
    pub client_h2_buffer_blocked_s: f64,
    /// Client waits for capacity before the stream's HEADERS left: h2 had
    /// the stream pending open (its turn to be written, or one more stream
    /// the server's SETTINGS_MAX_CONCURRENT_STREAMS did not allow yet).
    #[serde(default)]
    pub client_not_open_blocked_s: f64,
    /// Client tap writes that returned Pending: blocked on the socket.
    pub client_socket_blocked_s: f64,
    pub server_socket_blocked_s: f64,
    /// Blocked intervals that never resumed (given up at a reset, a
    /// deadline, an interrupt or the recording's end; closed at that
    /// moment and counted in the totals above).
    pub blocked_open: u64,
    /// Of those, by what the wait was on: `window`, `h2_buffer`, `not_open`
    /// (the client's), `socket` (the client's), `server_socket`.
    #[serde(default)]
    pub blocked_open_by: BTreeMap<String, u64>,
    pub window_blocked_ms: Distribution,
    pub h2_buffer_blocked_ms: Distribution,
    #[serde(default)]
    pub not_open_blocked_ms: Distribution,
    pub socket_blocked_ms: Distribution,
    /// Scheduled → handed to h2 (start of `send_data`), ms.
    pub lateness_ms: Distribution,
    /// Client: each RPC's duration, its `rpc_start` (the request handed to
    /// h2, which may hold it for a stream the server allows: `stream not
    /// open`) to its `rpc_end`, of those that ended OK, ms: a unary call's
    /// latency as its caller sees it.
    #[serde(default)]
    pub call_ms: Distribution,
    /// Client, `--rpc unary`: each call ended OK from its message's
    /// scheduled time to its `rpc_end`, ms: the response time the offered
    /// schedule sees (the backlog's wait, then the call).
    #[serde(default)]
    pub response_ms: Distribution,
    /// DATA frames / payload bytes read by the server's tap.
    pub data_frames_in: u64,
    pub data_bytes_in: u64,
    /// WINDOW_UPDATE frames written by the server's tap (stream + connection).
    pub window_updates_out: u64,
    pub window_updates_out_stream: u64,
    pub window_updates_out_conn: u64,
    /// Stream-level WINDOW_UPDATE increments, bytes.
    pub window_update_increment: Distribution,
    /// The client's own view of the same traffic (its tap): DATA frames and
    /// payload bytes it wrote, WINDOW_UPDATE frames it read (stream +
    /// connection) and their stream-level increments. A client-only run
    /// against a foreign server has these, not the server's.
    #[serde(default)]
    pub data_frames_out: u64,
    #[serde(default)]
    pub data_bytes_out: u64,
    #[serde(default)]
    pub window_updates_in: u64,
    #[serde(default)]
    pub window_updates_in_stream: u64,
    #[serde(default)]
    pub window_updates_in_conn: u64,
    #[serde(default)]
    pub window_update_in_increment: Distribution,
    /// Lowest client→server send window (a stream's or the connection's)
    /// reconstructed from the client's tap; `null` without a client tap.
    #[serde(default)]
    pub min_send_window: Option<i64>,
    /// `release` calls of the release policy, and their bytes (the
    /// end-of-RPC release excluded).
    pub releases: u64,
    pub released_bytes: u64,
    /// End-of-RPC releases (`at: end`): bytes still unreleased when an RPC
    /// ended, returned in bulk. Not in the release→update statistics.
    pub end_releases: u64,
    pub end_released_bytes: u64,
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
    /// Samples of `c2s_frame_latency_ms` whose read preceded the write on
    /// the clock (recorded as 0). Should be 0: the client stamps a write
    /// before the kernel has the bytes, the server a read after.
    pub c2s_frame_latency_negative: u64,
    /// Client RPC outcomes by gRPC status name.
    pub rpc_status: BTreeMap<String, u64>,
    pub server_rpc_status: BTreeMap<String, u64>,
    /// Lowest window reconstructed anywhere. Negative only when a peer
    /// lowered SETTINGS_INITIAL_WINDOW_SIZE mid-stream (legal, RFC 9113
    /// §6.9.2) or a sender overran its credit (a violation). `None` when
    /// the trace has no connection (nothing to reconstruct).
    pub min_window: Option<i64>,
    /// DATA frames that arrived past a window lowered by SETTINGS before the
    /// sender could have seen it (SETTINGS not yet acknowledged): legal, an
    /// observation.
    pub data_past_lowered_window: u64,
    /// DATA sent beyond credit, windows pushed past 2^31-1.
    pub protocol_violations: u64,
    /// `wire_error` events: bytes a tap could not frame, and frames that
    /// broke a rule of RFC 9113 the tap judges (`rules_broken`).
    pub wire_errors: u64,
    /// Server: failed `accept` calls (descriptors exhausted, …), retried.
    pub accept_errors: u64,
    /// Server: connections closed unserved (`--max-connections`).
    pub conns_refused: u64,
    /// Every protocol error the server answered, and every `wire_error`, by
    /// kind, from the trace alone:
    /// - each GOAWAY and RST_STREAM the server sent, keyed by frame and
    ///   RFC 9113 §7 code name (`"GOAWAY PROTOCOL_ERROR"`,
    ///   `"RST_STREAM FLOW_CONTROL_ERROR"`; codes the RFC does not define as
    ///   `0xNN`). Read from the server's tap; from the client's (frames it
    ///   received) when the trace has no server side.
    /// - each `wire_error` event of either tap, keyed `"wire_error: <first
    ///   words>"` (the byte offset and the specifics dropped, numbers as `N`).
    ///
    /// These are what the server answered and what the tap could not parse
    /// or saw break a rule (`"wire_error: rule broken: DATA frame on stream
    /// 0"`, see `rules_broken`). h2 answers several violations with one
    /// code, and some with another code than RFC 9113 names (HPACK garbage
    /// → PROTOCOL_ERROR, not COMPRESSION_ERROR).
    /// NO_ERROR is left out: it is not an error (RFC 9113 §7), and h2 sends
    /// it on every graceful shutdown (GOAWAY) and when it answers before the
    /// request body ended (RST_STREAM, §8.1). CANCEL is kept: a server never
    /// answers a client's RST_STREAM with one (§5.4.2), so a CANCEL it sent
    /// is a stream it gave up on itself.
    #[serde(default)]
    pub protocol_errors: BTreeMap<String, u64>,
    /// GOAWAY and RST_STREAM the client sent with an error code, keyed as in
    /// `protocol_errors`: what the client answered a server's errors with.
    /// Read from the client's tap; from the server's (frames it received)
    /// when the trace has no client side. NO_ERROR and CANCEL are left out
    /// (the client cancels at its deadlines and interrupts by design).
    #[serde(default)]
    pub client_answers: BTreeMap<String, u64>,
    /// `wire_error`s by who wrote the bytes a tap could not frame: `client`
    /// or `server`. The client's and server's taps, as `wire_errors` (a
    /// relay's legs count theirs in `relay.wire_errors`). A server that is
    /// not HTTP/2 counts here; the headline names it apart.
    #[serde(default)]
    pub wire_errors_by_writer: BTreeMap<String, u64>,
    /// Frames that broke a rule of RFC 9113 the taps judge from the frame
    /// alone (its stream, a WINDOW_UPDATE of 0, a SETTINGS value out of
    /// range, a header block interrupted), keyed `"<writer>: <rule>"`
    /// (`"client: DATA frame on stream 0"`): who broke which, once per
    /// frame: as the receiver's taps read them, or as the sender's wrote
    /// them when the trace as a whole has no tap of the receiving side. Its `wire_error`s
    /// are in `wire_errors` (one per tap), not in `wire_errors_by_writer`
    /// (the frame was framed).
    /// Rules that need the connection's state (an idle stream, a window
    /// overrun, HPACK) are not judged: the receiver's answer is in
    /// `protocol_errors`.
    #[serde(default)]
    pub rules_broken: BTreeMap<String, u64>,
    pub peak_rss_bytes: u64,
    pub dropped_events: u64,
    /// Frames recorded without the payload their capture mode keeps
    /// (`payload_dropped`: the recorder's payload bound was full). Their
    /// headers, and so every count and window, are in the trace.
    #[serde(default)]
    pub payload_dropped_frames: u64,
    /// DATA and WINDOW_UPDATE frames of a stream that reached a tap after
    /// the analysis had judged and forgotten the stream (see README,
    /// Memory): they count in the connection's windows and totals, not in
    /// their stream's figures.
    /// Should be 0; a link slower than the wait the analysis gives streams.
    #[serde(default)]
    pub frames_after_retirement: u64,
    /// Their DATA bytes.
    #[serde(default)]
    pub data_bytes_after_retirement: u64,
    /// Frames, `conn_open` events and events of a stream naming a
    /// connection the analysis had retired (closed on its tap, every
    /// stream judged), or a relay's connection pair after both its legs
    /// closed: left out of every figure. Should be 0: nothing comes after
    /// a tap's `conn_close` in an intact trace.
    #[serde(default)]
    pub events_after_conn_retirement: u64,
    /// Their payload bytes (the sum of their `len`).
    #[serde(default)]
    pub payload_dropped_bytes: u64,
    /// Frames whose payload field was damaged (not base64, or not `len`
    /// bytes): read without it, like `payload_dropped`. Should be 0.
    #[serde(default)]
    pub damaged_payloads: u64,
    /// Trace lines that were not events (not JSON, not an event of this
    /// schema, or not UTF-8), skipped. Should be 0.
    #[serde(default)]
    pub corrupt_lines: u64,
    /// The trace line of the first of them; `null` without one.
    #[serde(default)]
    pub first_corrupt_line: Option<u64>,
    /// What the analysis warned about (on stderr too): a cut or edited
    /// trace, corrupt lines, drops, payloads kept without their bytes. Empty
    /// for a sound trace.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The SVG plots `analyze` drew beside summary.json (file names): a
    /// report that finds one missing draws them again.
    #[serde(default)]
    pub plots: Vec<String>,
    /// Events of types this analysis does not know (a newer h2probe's),
    /// skipped.
    #[serde(default)]
    pub unknown_events: u64,
    /// Lines of the trace between its header and footer: every event read,
    /// those skipped as corrupt or of unknown types included.
    #[serde(default)]
    pub event_lines: u64,
    /// Events the writer wrote, from the trace's footer; `null` without a
    /// clean footer. Not `event_lines` only if lines were lost or added
    /// after the run (a warning says so).
    #[serde(default)]
    pub footer_events: Option<u64>,
    /// Events that reached the analyzer after a later event (more than the
    /// reorder window late): analysed out of time order. 0 unless sorting
    /// the trace whole failed (see `late_written_events`).
    pub out_of_order_events: u64,
    /// Events the reorder window could not put in place (read after it had
    /// handed out a later one), for which the trace was sorted whole before
    /// it was analysed (so they were analysed in their place).
    /// Informative: the figures are exact.
    #[serde(default)]
    pub late_written_events: u64,
    /// The first line with content after the footer (not read: two traces
    /// joined, a damaged file); null when the footer is the last line.
    #[serde(default)]
    pub after_footer_line: Option<u64>,
    /// Reading the trace failed with an error of the file itself (a
    /// compressed trace failing its checksum, or its stream broken): what
    /// was read may be wrong anywhere, so no check is judged. Null when
    /// the file read whole.
    #[serde(default)]
    pub read_error: Option<String>,
    /// Client waits classified as window-blocked, split: the connection
    /// window (shared by every stream) was exhausted during the wait, or only
    /// the stream's own window was. When both were, the wait counts as the
    /// connection's.
    pub client_blocked_conn_window_s: f64,
    pub client_blocked_stream_window_s: f64,
    /// Per stream, server's view (streams that carried DATA): the first
    /// [`super::retire::MAX_LISTED_STREAMS`] to end, sorted by
    /// (connection, stream); `stream_count` counts them all.
    pub streams: Vec<StreamFigures>,
    /// Streams that carried DATA or were offered bytes, listed or not.
    #[serde(default)]
    pub stream_count: u64,
    /// Of those, the streams offered bytes that carried none.
    #[serde(default)]
    pub streams_without_data: u64,
    /// Jain's fairness index of delivery over all streams (null below 2
    /// streams), and what delivery was: `bytes_per_offered` (every
    /// stream's demand known) or `bytes`.
    pub stream_fairness: Option<f64>,
    #[serde(default)]
    pub stream_fairness_basis: Option<String>,
    /// Streams that got < 10 % of their fair share while others progressed,
    /// as `conn/stream` (the least served
    /// [`super::retire::MAX_STARVED_NAMED`]; `starved_streams_truncated`
    /// when every one of those was starved and more streams were not kept).
    pub starved_streams: Vec<String>,
    #[serde(default)]
    pub starved_streams_truncated: bool,
    /// `stall` events: the run stopped progressing and was ended.
    pub stalls: u64,
    /// The first stall, described (when, what was pending, each stream's
    /// unreleased bytes and available credit).
    pub stall: Option<String>,
    /// Why the first stall happened, judged from the stream states at that
    /// instant: `deadlock` (the streams holding the connection's credit hold
    /// only bytes of messages they cannot decode yet, and together those
    /// fill the connection window: each waits for credit another holds),
    /// `starvation` (a stream holds decoded bytes it never released),
    /// `no_credit` (a stall the client recorded alone: a send window it
    /// needed stayed exhausted), `other` (none of these: e.g. nothing held).
    pub stall_cause: Option<String>,
    /// Which endpoints the trace has events of.
    pub has_client: bool,
    pub has_server: bool,
    /// meta.json's status (`complete`, `interrupted`, `error: …`), when the
    /// run directory has one; empty otherwise.
    pub run_status: String,
    /// clean | no_footer | truncated at line N
    pub trace_ending: String,
    pub checks: BTreeMap<String, Check>,
    /// `h2probe relay` runs: what crossed the relay, per data flow (null for
    /// traces without relay legs).
    #[serde(default)]
    pub relay: Option<RelaySummary>,
    /// Part 3 accounting, when the trace has `Exchange` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<super::overload::Overload>,
}

/// Connections a message crossed (a client sent one, a server decoded
/// one) with no partner on the other side's tap (see `Summary::unpaired`).
/// A connection pairs with the other tap's on the same socket (its
/// addresses swapped) or through a relay's pair; an unnamed Unix socket end
/// never does; one whose tap recorded no addresses (a trace from before it
/// did) is left in, as every connection was then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unpaired {
    pub client_connections: u64,
    pub server_connections: u64,
    /// The client's messages on its unpaired connections.
    pub scheduled: u64,
    pub sent: u64,
    pub never_sent: u64,
    /// The server's messages on its unpaired connections.
    pub decoded: u64,
    pub completed: u64,
    pub discarded: u64,
    /// The lowest-numbered such connection (server side first: the one a
    /// foreign client opened first), as `"server conn 3 (peer ADDR)"`.
    pub first: String,
    #[serde(skip)]
    first_key: Option<(bool, u32)>,
}

impl Unpaired {
    /// Counts connection `id` of the client's tap (`client`) or the
    /// server's, with its `messages` (see `Conn::messages`).
    pub(super) fn add(&mut self, client: bool, id: u32, peer: &str, messages: [u64; 3]) {
        if client {
            self.client_connections += 1;
        } else {
            self.server_connections += 1;
        }
        self.add_messages(client, messages);
        let key = (client, id);
        if self.first_key.is_none_or(|k| key < k) {
            self.first_key = Some(key);
            let side = if client { "client" } else { "server" };
            self.first = format!("{side} conn {id} (peer {peer})");
        }
    }

    /// Messages of a connection counted already (its events after it left
    /// the analysis: see `books`).
    pub(super) fn add_messages(&mut self, client: bool, messages: [u64; 3]) {
        let [a, b, c] = messages;
        if client {
            self.scheduled = self.scheduled.saturating_add(a);
            self.sent = self.sent.saturating_add(b);
            self.never_sent = self.never_sent.saturating_add(c);
        } else {
            self.decoded = self.decoded.saturating_add(a);
            self.completed = self.completed.saturating_add(b);
            self.discarded = self.discarded.saturating_add(c);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.first_key.is_none() && self.first.is_empty()
    }
}

/// What a relay's two legs saw (see docs/summary-json.md, `relay`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelaySummary {
    /// Connections the relay accepted from clients (`conn_open` on `client_leg`).
    pub connections: u64,
    /// Connections closed at once past `--max-connections`.
    pub refused: u64,
    /// Legs closed with a reason, by `leg: reason` (its text before the first `:`).
    pub close_reasons: BTreeMap<String, u64>,
    /// `wire_error` events on either leg, but a frame that broke a rule
    /// (it was framed, and is forwarded).
    pub wire_errors: u64,
    /// Frames that broke a rule of RFC 9113 (see the top level's
    /// `rules_broken`), keyed `"<writer>: <rule>"`, once per frame and
    /// relay: as the leg that read it saw it. The headline names them for a relay's
    /// trace alone (merged with an endpoint's, the endpoint's taps do).
    #[serde(default)]
    pub rules_broken: BTreeMap<String, u64>,
    /// GOAWAY and RST_STREAM frames with an error code, keyed `"<sender>:
    /// <frame> <code name>"` (`"server: GOAWAY PROTOCOL_ERROR"`), once per
    /// frame and relay: as the leg that read it saw it. NO_ERROR is left
    /// out, and a client's CANCEL (how clients end calls). Named in the
    /// headline for a relay's trace alone.
    #[serde(default)]
    pub answers: BTreeMap<String, u64>,
    /// Frames read on one leg and written unchanged on the other.
    pub frames_forwarded: u64,
    /// Frames whose twin on the other leg (same direction, same offset) differs.
    pub frames_differing: u64,
    /// Frames seen on one leg only, in pairs closed without a reason.
    pub frames_unforwarded: u64,
    /// Client → server: DATA the client sends, credit the server returns.
    pub c2s: RelayFlow,
    /// Server → client: DATA the server sends, credit the client returns.
    pub s2c: RelayFlow,
    /// Per stream and flow (streams that carried DATA), the first 64.
    pub streams: Vec<RelayStream>,
    pub streams_omitted: u64,
    /// Streams a client opened that had not ended both ways (END_STREAM
    /// each way, or a RST_STREAM) when their connection closed: cut by the
    /// close (a peer that died mid-stream). Should be 0.
    #[serde(default)]
    pub streams_cut: u64,
    /// The first of them.
    #[serde(default)]
    pub first_cut: Option<RelayCut>,
}

/// A stream cut by its connection's close (see `streams_cut`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayCut {
    /// When the client's leg closed, seconds from the trace's origin.
    pub t_s: f64,
    pub conn: u32,
    pub stream: u32,
}

/// One data flow through the relay (see docs/summary-json.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayFlow {
    pub frames: u64,
    pub data_frames: u64,
    pub data_bytes: u64,
    pub max_data_frame: u32,
    pub relay_latency_ms: Distribution,
    pub window_updates_stream: u64,
    pub window_updates_conn: u64,
    pub updates_per_mib: f64,
    pub update_increment_stream: Distribution,
    pub update_increment_conn: Distribution,
    pub update_gap_stream_ms: Distribution,
    pub update_gap_conn_ms: Distribution,
    pub withheld_after_update: Distribution,
    pub max_withheld_stream_bytes: i64,
    pub max_withheld_conn_bytes: i64,
    pub credit_release: String,
    pub min_stream_window: Option<i64>,
    pub min_conn_window: Option<i64>,
    pub exhausted_s: f64,
    pub exhausted_intervals: u64,
    pub exhausted_open: u64,
    pub inferred_blocked_s: f64,
    pub inferred_blocked_intervals: u64,
    pub resume_after_credit_ms: Distribution,
    pub window_violations: u64,
}

/// One stream of one flow at the receiver's leg.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayStream {
    pub conn: u32,
    pub stream: u32,
    pub flow: String,
    pub data_bytes: u64,
    pub returned_bytes: u64,
    pub window_updates: u64,
    pub max_withheld_bytes: i64,
    pub withheld_end_bytes: i64,
}

/// One stream's share of a run (server's view).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    /// Server connection id and HTTP/2 stream id.
    pub conn: u32,
    pub stream: u32,
    /// DATA payload bytes the server's tap read on this stream.
    pub bytes: u64,
    /// Messages decoded on it.
    pub messages: u64,
    /// Framed bytes the client scheduled on it (its demand), when the
    /// client's side is in the trace.
    #[serde(default)]
    pub offered_bytes: Option<u64>,
    /// When a stall was recorded before the stream was done with: its
    /// `bytes` and `offered_bytes` up to the first stall, what its delivery
    /// is judged on (the run ends at a stall; what crosses in the teardown
    /// is not service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_before_stall: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_before_stall: Option<u64>,
    /// The client's messages on it (null without the client's side):
    /// scheduled (null too on a unary call's stream: its connection
    /// scheduled its message), sent (wholly handed to h2) and never sent.
    #[serde(default)]
    pub scheduled: Option<u64>,
    #[serde(default)]
    pub sent: Option<u64>,
    #[serde(default)]
    pub never_sent: Option<u64>,
    /// The server's messages on it that completed, and that were discarded.
    #[serde(default)]
    pub completed: u64,
    #[serde(default)]
    pub discarded: u64,
    /// Its delivery ÷ the mean delivery over streams, where delivery is
    /// bytes ÷ offered bytes (bytes alone without the client's schedule):
    /// 1 is exactly a fair share; a stream that got all it asked for is
    /// never below another that got less of its demand.
    pub fair_share: f64,
}

impl StreamFigures {
    /// The bytes its delivery is judged on: up to the first stall when
    /// one was recorded while it was open.
    pub fn served_bytes(&self) -> u64 {
        self.bytes_before_stall.unwrap_or(self.bytes)
    }

    /// Its demand, on the same span as [`Self::served_bytes`].
    pub fn demand(&self) -> Option<u64> {
        self.offered_before_stall.or(self.offered_bytes)
    }
}

/// Why a client send waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// No credit: the reconstructed send window was ≤ 0.
    Window,
    /// Credit, but h2 withheld capacity (its send buffer was full).
    H2Buffer,
    /// The stream was not open yet (h2 had it pending open).
    NotOpen,
    /// The socket refused the write.
    Socket,
}

/// The client→server bytes of one tap's streams that have no series of
/// their own, together.
pub struct UntrackedBytes {
    /// Streams that carried bytes.
    pub streams: u64,
    /// Their bytes so far.
    pub bytes: f64,
    /// `bytes` over time (cumulative).
    pub series: Series,
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
    pub h2_buffer_blocked: Series,
    pub not_open_blocked: Series,
    pub socket_blocked: Series,
    pub window_update_bytes: Series,
    pub window_updates: Series,
    pub rss: Series,
    /// Per stream, keyed (client tap connection, stream): the stream's
    /// send credit as the client's tap reconstructed it.
    pub stream_credit: BTreeMap<(u32, u32), Series>,
    /// Per stream, keyed (tap, connection, stream): DATA payload bytes
    /// client→server so far (cumulative), as that tap saw them.
    pub stream_bytes: BTreeMap<(Endpoint, u32, u32), Series>,
    /// Streams beyond [`MAX_STREAM_SERIES`] that got no series of their own.
    pub streams_untracked: u64,
    /// Per tap, the client→server bytes of the streams past
    /// [`MAX_STREAM_SERIES`] that have no `stream_bytes` series, together:
    /// streams.svg stacks them with the rest, so that its top is every
    /// stream's bytes (600 unary calls drew 1 MiB of their 9.4).
    pub stream_bytes_untracked: BTreeMap<Endpoint, UntrackedBytes>,
    /// Each tap connection's key shared by both taps (`CLIENT_PORT-SERVER_PORT`).
    pub conn_keys: BTreeMap<(Endpoint, u32), String>,
    /// The stream window the server advertised (SETTINGS_INITIAL_WINDOW_SIZE
    /// as the client's tap read it; 65,535 when the SETTINGS left it out),
    /// `None` without a client tap.
    pub advertised_stream_window: Option<i64>,
    /// Seconds from the trace origin to the last `schedule` event: the end
    /// of the offered period.
    pub offer_end_s: Option<f64>,
    /// Exchange: server-owned payload (admitted attempts' framed bytes).
    pub admitted_bytes: Series,
    /// Exchange: the clients' pending originals and outstanding attempts.
    pub client_pending: Series,
    pub client_outstanding: Series,
    /// (start s, end s, kind) client blocked intervals.
    pub intervals: Vec<(f64, f64, Blocked)>,
    pub intervals_dropped: u64,
    /// Seconds from the trace origin to the last event.
    pub end_s: f64,
    /// A relay run's withheld credit (absent without relay legs).
    pub relay: Option<super::relay::RelaySeries>,
    /// Which taps the trace has (a one-sided run's plots say what is missing).
    pub has_client: bool,
    pub has_server: bool,
    origin: u64,
}

impl Summary {
    /// The queue grew over the growth window with no admission bound to
    /// cap it: by a message or more from the window's first bucket to its
    /// last, and on a fitted slope above [`GROWING_MSG_PER_S`]. Part 1's
    /// finding, the headline's `growth` line and alert cards, and what the
    /// ladder's default slice then says it shows. (By the end points alone
    /// a healthy run whose queue held one message at the window's last
    /// bucket was reported growing, beside a slope of +0.0 msg/s.)
    pub fn queue_grows_on_credit(&self) -> bool {
        self.queue_growth_in_window >= 1.0
            && self.queue_growth_rate > GROWING_MSG_PER_S
            && self.overload.is_none()
    }

    /// Why the file's lines are not those the writer wrote (its footer
    /// counts other than the lines present), if they are not.
    pub fn lines_altered(&self) -> Option<String> {
        if self.after_footer_line.is_some() {
            // The footer read is not the file's end: its count is not the
            // file's to compare (see `events_in_doubt`).
            return None;
        }
        match self.footer_events {
            Some(f) if f != self.event_lines => Some(format!(
                "the footer counts {f} events written, the file holds {} lines of events: lines were lost or added after the run (or skipped as corrupt by a merge)",
                self.event_lines
            )),
            _ => None,
        }
    }

    /// Why events of the run may be missing from those analysed, or out of
    /// their place (lines lost or added after the run, corrupt lines
    /// skipped, events later than the reorder window), if so: a single
    /// missing or misplaced DATA frame or WINDOW_UPDATE unbalances the
    /// accounting from there on, so no check of the events can be judged.
    pub fn events_in_doubt(&self) -> Option<String> {
        let mut why: Vec<String> = self.lines_altered().into_iter().collect();
        if let Some(e) = &self.read_error {
            why.push(format!(
                "the file failed as it was read ({e}): a compressed trace's bytes may be wrong anywhere before that"
            ));
        }
        if self.corrupt_lines > 0 {
            why.push(format!(
                "{} corrupt line{} skipped (an event each, lost)",
                self.corrupt_lines,
                if self.corrupt_lines == 1 {
                    " was"
                } else {
                    "s were"
                }
            ));
        }
        if let Some(line) = self.after_footer_line {
            why.push(format!(
                "the file goes on after its footer (line {line}), unread"
            ));
        }
        if self.events_after_conn_retirement > 0 {
            // Lines added, or moved from their place (an edited `t`): which,
            // the trace cannot tell, and a moved one is missing where it was.
            why.push(format!(
                "{} named a connection after its retirement (its close, its streams judged, a grace: left out as added or moved lines)",
                crate::report::counted(self.events_after_conn_retirement, "event")
            ));
        }
        if self.out_of_order_events > 0 {
            why.push(format!(
                "{} event{} analysed out of time order (more than {} ms after later ones)",
                self.out_of_order_events,
                if self.out_of_order_events == 1 {
                    " was"
                } else {
                    "s were"
                },
                super::reorder::WINDOW_NS / 1_000_000,
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

impl Timeline {
    pub(crate) fn new(origin: u64) -> Timeline {
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
            h2_buffer_blocked: s(Merge::Sum),
            not_open_blocked: s(Merge::Sum),
            socket_blocked: s(Merge::Sum),
            window_update_bytes: s(Merge::Sum),
            window_updates: s(Merge::Sum),
            rss: s(Merge::Max),
            stream_credit: BTreeMap::new(),
            stream_bytes: BTreeMap::new(),
            streams_untracked: 0,
            stream_bytes_untracked: BTreeMap::new(),
            conn_keys: BTreeMap::new(),
            advertised_stream_window: None,
            offer_end_s: None,
            admitted_bytes: s(Merge::Max),
            client_pending: s(Merge::Max),
            client_outstanding: s(Merge::Max),
            intervals: vec![],
            intervals_dropped: 0,
            end_s: 0.0,
            relay: None,
            has_client: false,
            has_server: false,
            origin,
        }
    }

    /// A new series shaped like the others (same origin, width and cap).
    fn new_series(&self, merge: Merge) -> Series {
        Series::new(self.origin, 1_000_000, SERIES_CAP, merge)
    }

    /// A stream's credit as the client's tap saw it at `t`; false when the
    /// stream has no series (one past [`MAX_STREAM_SERIES`]: the caller
    /// counts it in `streams_untracked`, once).
    pub(super) fn push_stream_credit(&mut self, conn: u32, stream: u32, t: u64, v: f64) -> bool {
        if !self.stream_credit.contains_key(&(conn, stream)) {
            if self.stream_credit.len() >= MAX_STREAM_SERIES {
                return false;
            }
            let s = self.new_series(Merge::Min);
            self.stream_credit.insert((conn, stream), s);
        }
        if let Some(s) = self.stream_credit.get_mut(&(conn, stream)) {
            s.push(t, v);
        }
        true
    }

    /// Whether a series is plotted for a stream of `ep`'s connection
    /// `conn` (its key is then kept when the connection retires).
    pub(super) fn plots_conn(&self, ep: Endpoint, conn: u32) -> bool {
        self.stream_bytes
            .range((ep, conn, 0)..=(ep, conn, u32::MAX))
            .next()
            .is_some()
            || (ep == Endpoint::Client
                && self
                    .stream_credit
                    .range((conn, 0)..=(conn, u32::MAX))
                    .next()
                    .is_some())
    }

    /// A stream's cumulative client→server DATA bytes on `ep`'s tap at `t`
    /// (`v`, of which `added` just now).
    pub(super) fn push_stream_bytes(
        &mut self,
        ep: Endpoint,
        conn: u32,
        stream: u32,
        t: u64,
        v: f64,
        added: f64,
    ) {
        let key = (ep, conn, stream);
        if !self.stream_bytes.contains_key(&key) {
            if self.stream_bytes.len() >= 2 * MAX_STREAM_SERIES {
                let rest = match self.stream_bytes_untracked.entry(ep) {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => v.insert(UntrackedBytes {
                        streams: 0,
                        bytes: 0.0,
                        series: Series::new(self.origin, 1_000_000, SERIES_CAP, Merge::Last),
                    }),
                };
                // A stream's first bytes: its total is what just came.
                if added > 0.0 && v == added {
                    rest.streams += 1;
                }
                rest.bytes += added;
                rest.series.push(t, rest.bytes);
                return;
            }
            let s = self.new_series(Merge::Last);
            self.stream_bytes.insert(key, s);
        }
        if let Some(s) = self.stream_bytes.get_mut(&key) {
            s.push(t, v);
        }
    }
}

/// Keys a count map keyed by what the trace says (statuses, error kinds,
/// close reasons) holds at most: past them, the rest count under
/// [`OTHERS`], in time order (200,000 distinct status codes made a 4 MB
/// summary and a headline of 40,000 lines).
pub const MAX_KEYS: usize = 64;

/// The key the kinds past [`MAX_KEYS`] count under.
pub const OTHERS: &str = "(others)";

/// Adds `n` to `map[key]`, or to `map[OTHERS]` once the map holds
/// [`MAX_KEYS`] − 1 other keys.
pub fn count_capped(map: &mut BTreeMap<String, u64>, key: String, n: u64) {
    let key = if map.contains_key(&key) || map.len() < MAX_KEYS - 1 {
        key
    } else {
        OTHERS.to_string()
    };
    let c = map.entry(key).or_default();
    *c = c.saturating_add(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unpaired connection is counted with its messages; the one
    /// named is the lowest-numbered, the server's side first, whatever the
    /// order they were added in.
    #[test]
    fn the_unpaired_connection_named_is_the_lowest_servers() {
        let mut u = Unpaired::default();
        assert!(u.is_empty());
        u.add(true, 1, "127.0.0.1:80", [1, 1, 0]);
        u.add(false, 5, "127.0.0.1:6000", [0, 0, 0]);
        u.add(false, 3, "127.0.0.1:6001", [2, 1, 1]);
        u.add(false, 4, "127.0.0.1:6002", [0, 0, 0]);
        assert!(!u.is_empty());
        assert_eq!(u.first, "server conn 3 (peer 127.0.0.1:6001)");
        assert_eq!((u.client_connections, u.server_connections), (1, 3));
        assert_eq!(
            [
                u.scheduled,
                u.sent,
                u.never_sent,
                u.decoded,
                u.completed,
                u.discarded
            ],
            [1, 1, 0, 2, 1, 1]
        );
    }
}
