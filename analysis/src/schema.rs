//! The trace schema: defined once here, written by the probe, read by the analysis.
//!
//! A trace is JSON Lines. Line 1 is a [`Header`] (`"type":"header"`), then one
//! [`Event`] per line, and a clean shutdown ends with a [`Footer`]
//! (`"type":"footer"`) carrying the event and drop counts. Every line has a
//! `type` tag; the list of event types may grow, and readers skip types they do
//! not know (see [`Kind::Unknown`]).
//!
//! Times are CLOCK_MONOTONIC nanoseconds (`t`), shared by every process on one
//! host, so traces of a separate `serve` and `client` merge on one axis. The
//! header anchors that clock to wall time.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bumped on any change a reader must know about (renamed or retyped fields).
/// Adding an event type or an optional field does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// Which endpoint of the experiment recorded an event.
///
/// `h2probe relay` taps two legs of every relayed connection, both in the
/// relay's process: `client_leg` (its tap on the connection the real client
/// opened to the relay; the relay is that connection's server end) and
/// `server_leg` (its tap on the connection the relay opened to the real
/// server; the relay is that connection's client end). One relayed pair
/// has the same `conn` on both legs.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    Server,
    Client,
    ClientLeg,
    ServerLeg,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Server => "server",
            Endpoint::Client => "client",
            Endpoint::ClientLeg => "client_leg",
            Endpoint::ServerLeg => "server_leg",
        }
    }

    /// Whether this tap sits at the HTTP/2 client end of its TCP connection
    /// (it writes the connection preface): the probe's client, and the
    /// relay's leg towards the server.
    pub fn is_client_end(self) -> bool {
        matches!(self, Endpoint::Client | Endpoint::ServerLeg)
    }

    /// Whether this is one of the relay's two legs.
    pub fn is_relay_leg(self) -> bool {
        matches!(self, Endpoint::ClientLeg | Endpoint::ServerLeg)
    }
}

/// Direction of bytes relative to the endpoint whose tap saw them.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    /// Read from the socket.
    #[default]
    In,
    /// Written to the socket.
    Out,
}

impl Dir {
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::In => "in",
            Dir::Out => "out",
        }
    }
}

/// An HTTP/2 frame type as an open value: unknown types are kept, not dropped.
///
/// Serialized as the RFC 9113 name (`"DATA"`, `"WINDOW_UPDATE"`, ...) or
/// `"UNKNOWN_0xNN"` for types the RFC does not define.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct FrameType(pub u8);

impl FrameType {
    pub const DATA: FrameType = FrameType(0x0);
    pub const HEADERS: FrameType = FrameType(0x1);
    pub const PRIORITY: FrameType = FrameType(0x2);
    pub const RST_STREAM: FrameType = FrameType(0x3);
    pub const SETTINGS: FrameType = FrameType(0x4);
    pub const PUSH_PROMISE: FrameType = FrameType(0x5);
    pub const PING: FrameType = FrameType(0x6);
    pub const GOAWAY: FrameType = FrameType(0x7);
    pub const WINDOW_UPDATE: FrameType = FrameType(0x8);
    pub const CONTINUATION: FrameType = FrameType(0x9);

    const NAMES: [&'static str; 10] = [
        "DATA",
        "HEADERS",
        "PRIORITY",
        "RST_STREAM",
        "SETTINGS",
        "PUSH_PROMISE",
        "PING",
        "GOAWAY",
        "WINDOW_UPDATE",
        "CONTINUATION",
    ];

    /// The RFC 9113 name, or `None` for an extension/unknown type.
    pub fn name(self) -> Option<&'static str> {
        Self::NAMES.get(self.0 as usize).copied()
    }

    pub fn from_name(name: &str) -> Option<FrameType> {
        if let Some(i) = Self::NAMES.iter().position(|n| *n == name) {
            return Some(FrameType(i as u8));
        }
        let hex = name.strip_prefix("UNKNOWN_0x")?;
        u8::from_str_radix(hex, 16).ok().map(FrameType)
    }
}

impl std::fmt::Display for FrameType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "UNKNOWN_0x{:02x}", self.0),
        }
    }
}

impl Serialize for FrameType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.name() {
            Some(n) => s.serialize_str(n),
            None => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for FrameType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        FrameType::from_name(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown frame type name {s:?}")))
    }
}

/// First line of every trace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Header {
    pub schema: u32,
    /// `h2probe <version>`.
    pub tool: String,
    /// Always `CLOCK_MONOTONIC`: every `t` in the trace is on this clock.
    pub clock: String,
    /// CLOCK_MONOTONIC (ns) and wall-clock time (ns since the Unix epoch)
    /// read together when the trace was opened.
    pub origin_mono_ns: u64,
    pub origin_unix_ns: u64,
}

/// Last line of a cleanly finished trace. Its absence means the writer died.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Footer {
    /// Events written to this file (header and footer excluded).
    pub events: u64,
    /// Events the recorder had to drop because its buffer was full, by kind.
    /// Should be empty; `analyze` warns when it is not.
    pub dropped: std::collections::BTreeMap<String, u64>,
}

impl Header {
    /// The header's trace line (no newline): its fields behind `"type":"header"`.
    pub fn to_line(&self) -> String {
        tagged_line("header", self)
    }
}

/// A sum of the trace's counts that saturates: a count no recorder wrote
/// (2^64 − 1 and 1 summed to 0 dropped, and the check held) stays as large
/// as it can be, and fails what it should.
pub fn saturating_sum<'a>(counts: impl IntoIterator<Item = &'a u64>) -> u64 {
    counts.into_iter().fold(0, |a, b| a.saturating_add(*b))
}

impl Footer {
    /// Events dropped, all kinds (saturating).
    pub fn dropped_total(&self) -> u64 {
        saturating_sum(self.dropped.values())
    }

    /// The footer's trace line (no newline): its fields behind `"type":"footer"`.
    pub fn to_line(&self) -> String {
        tagged_line("footer", self)
    }
}

/// `{"type":tag, ...fields of v}`: header and footer lines carry their tag
/// first, as events do.
fn tagged_line<T: Serialize>(tag: &str, v: &T) -> String {
    let fields = serde_json::to_string(v).expect("a plain struct serializes");
    match fields.strip_prefix('{').filter(|f| *f != "}") {
        Some(rest) => format!("{{\"type\":\"{tag}\",{rest}"),
        None => format!("{{\"type\":\"{tag}\"}}"),
    }
}

/// One event: the common header (time, endpoint, connection, stream) plus
/// the kind-specific fields, all flat on one JSON line.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Event {
    /// CLOCK_MONOTONIC nanoseconds.
    pub t: u64,
    pub ep: Endpoint,
    /// Connection id, unique within the recording process.
    pub conn: u32,
    /// HTTP/2 stream id; 0 for connection-level events.
    pub stream: u32,
    #[serde(flatten)]
    pub kind: Kind,
}

/// The one table of event types: variant, payload type, `type` tag and the
/// payload's columns in tidy CSV exports. [`Kind`], [`Kind::NAMES`],
/// [`Kind::name`], [`Kind::columns`] and the line parser all come from it.
macro_rules! event_kinds {
    ($( $(#[$doc:meta])* $variant:ident($ty:ty) = $name:literal [$($col:literal : $ct:ident $(($def:literal))?),* $(,)?], )*) => {
        /// What happened. The `type` tag names the variant.
        #[derive(Serialize, Clone, Debug, PartialEq)]
        #[serde(tag = "type")]
        pub enum Kind {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($ty), )*
            /// A type this reader does not know (written by a newer h2probe).
            #[serde(skip)]
            Unknown,
        }

        /// An event type without its payload: what the recorder counts a
        /// dropped event as, without building it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum KindId {
            $( $variant, )*
            Unknown,
        }

        impl Kind {
            /// This kind's [`KindId`].
            pub fn id(&self) -> KindId {
                match self {
                    $( Kind::$variant(_) => KindId::$variant, )*
                    Kind::Unknown => KindId::Unknown,
                }
            }

            /// Every event type name this version writes, in documentation order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The `type` tag of this kind, as written.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Kind::$variant(_) => $name, )*
                    Kind::Unknown => "unknown",
                }
            }

            /// The payload columns of an event type in CSV exports (after
            /// the common `t_ns,t_s,ep,conn,stream`); empty for unknown types.
            pub fn columns(name: &str) -> &'static [&'static str] {
                match name {
                    $( $name => &[$($col),*], )*
                    _ => &[],
                }
            }

            /// The type of each of [`Kind::columns`], in the same order.
            pub fn column_types(name: &str) -> &'static [ColType] {
                match name {
                    $( $name => &[$(ColType::$ct $(($def))?),*], )*
                    _ => &[],
                }
            }

            /// Parses the payload of a line whose tag is `ty`.
            fn parse_payload(ty: &str, line: &str) -> Result<Kind, serde_json::Error> {
                Ok(match ty {
                    $( $name => Kind::$variant(serde_json::from_str(line)?), )*
                    _ => Kind::Unknown,
                })
            }
        }
    };
}

event_kinds! {
    /// A frame crossed the tap (`t`: the read/write call that completed it).
    Frame(FrameEv) = "frame" [
        "dir": Text, "offset": Int, "frame": Text, "flags": Int, "len": Int, "reserved": BoolOr(false), "field_reserved": BoolOr(false), "pad": IntOr(0), "increment": IntOpt,
        "settings": Json, "error_code": IntOpt, "last_stream": IntOpt, "promised": IntOpt, "priority": Json, "opaque": U64Opt,
        "payload_dropped": BoolOr(false),
    ],
    /// The tap's parser could not frame the byte stream; it stops parsing
    /// that direction (bytes still flow).
    WireError(WireErrorEv) = "wire_error" ["dir": Text, "offset": Int, "error": Text],
    /// `poll_write` on the socket returned Pending from `start` until `t`.
    SocketBlocked(IntervalEv) = "socket_blocked" ["dir": Text, "start": Int, "open": BoolOr(false)],
    /// A connection was accepted or established.
    ConnOpen(ConnOpenEv) = "conn_open" ["local": Text, "peer": Text],
    /// A connection ended.
    ConnClose(ConnCloseEv) = "conn_close" ["error": Text, "bytes_in": Int, "bytes_out": Int],
    /// An RPC began (server: request headers received; client: request sent).
    RpcStart(RpcStartEv) = "rpc_start" ["path": Text, "deadline_ns": IntOpt, "framing": Text, "release": Text, "withhold_after": IntOpt],
    /// An RPC ended with a gRPC status.
    RpcEnd(RpcEndEv) = "rpc_end" ["status": Int, "message": Text],
    /// Server: h2 handed `len` body bytes to the application.
    Chunk(ChunkEv) = "chunk" ["len": Int],
    /// Server: `release_capacity(bytes)` was called.
    Release(ReleaseEv) = "release" ["bytes": Int, "at": Text, "seq": IntOpt],
    /// Server: a whole gRPC message was decoded.
    Decode(MsgEv) = "decode" ["seq": Int, "size": Int, "framed": Int],
    /// Server: a decoded message entered the application queue.
    Enqueue(EnqueueEv) = "enqueue" ["seq": Int, "depth": Int, "queued_bytes": Int],
    /// Server: a worker took a message.
    Start(StartEv) = "start" ["seq": Int, "worker": Int, "wait_ns": Int, "depth": Int],
    /// Server: a worker finished a message.
    Complete(CompleteEv) = "complete" ["seq": Int, "worker": Int, "service_ns": Int],
    /// Server: a message was dropped before completion.
    Discard(DiscardEv) = "discard" ["seq": Int, "reason": Text],
    /// Server, `--drop-stream`: the application dropped the request body
    /// (the injected bug): what it read and did not release stays held, and
    /// h2 discards what arrives after.
    BodyDrop(BodyDropEv) = "body_drop" [],
    /// Server: periodic sample of one RPC's state.
    Sample(SampleEv) = "sample" [
        "depth": Int, "queued_bytes": Int, "owned_bytes": Int, "unreleased": Int, "used_capacity": Int,
        "available_capacity": Int, "rss_bytes": Int,
    ],
    /// Client: a message's scheduled send time came (`t` = scheduled time).
    Schedule(MsgEv) = "schedule" ["seq": Int, "size": Int, "framed": Int],
    /// Client: all of a message's bytes were handed to h2 (`send_data`).
    Send(SendEv) = "send" ["seq": Int, "scheduled": Int, "begin": Int, "bytes": Int],
    /// Client: blocked on window credit (capacity reserved, none assigned)
    /// from `start` until `t`, while sending message `seq`.
    WindowBlocked(WindowBlockedEv) = "window_blocked" ["seq": Int, "start": Int, "open": BoolOr(false)],
    /// Client: a scheduled message was never wholly handed to h2 (one cut
    /// mid-send by a deadline or an interrupt counts here, not as `send`).
    NeverSent(NeverSentEv) = "never_sent" ["seq": Int, "reason": Text, "count": IntOr(1)],
    /// Client, unary: messages a replaced connection (`from`) had offered
    /// and not sent were taken over by this one, its replacement, to be
    /// sent here (`from`'s `never_sent` `handed_over` says the same).
    Handed(HandedEv) = "handed" ["seq": Int, "count": IntOr(1), "from": Int],
    /// Server: `accept` failed (e.g. EMFILE: descriptors exhausted); the
    /// listener pauses and retries.
    AcceptError(AcceptErrorEv) = "accept_error" ["error": Text],
    /// Server: a connection was closed at once, unserved (`reason`).
    ConnRefused(ConnRefusedEv) = "conn_refused" ["peer": Text, "reason": Text],
    /// No bytes reached the application on any stream for `timeout_ns`
    /// while the client still had messages to send: the run is stuck (a
    /// stalled stream starving a shared connection window, or a deadlock),
    /// and is ended. `streams`: the server's view of every open stream.
    Stall(StallEv) = "stall" ["timeout_ns": Int, "pending": Int, "conn_window": IntOpt, "streams": Json],
    /// Server, Exchange: the admission decision for a decoded attempt
    /// (`seq` links it to the stream's decode/enqueue/start/complete/discard).
    Admission(AdmissionEv) = "admission" [
        "seq": Int, "id": Int, "attempt": Int, "deadline": Int, "decision": Text,
        "in_use": Int, "slots": Int, "wait_ns": Int, "framed": Int,
    ],
    /// Server: the worker's service time changed (`--service-schedule`);
    /// the first one marks the schedule's origin.
    ServiceChange(ServiceChangeEv) = "service_change" ["service_ns": Int, "step": Int],
    /// Client, Exchange: an original was scheduled (`t` = its scheduled time).
    Original(OriginalEv) = "original" ["id": Int, "deadline": Int, "pending": Int, "outstanding": Int],
    /// Client, Exchange: an attempt at an original was initiated (`seq`: its
    /// place on the stream, as the server's `decode` numbers it).
    Attempt(AttemptEv) = "attempt" [
        "id": Int, "attempt": Int, "seq": Int, "scheduled": Int, "deadline": Int,
        "pending": Int, "outstanding": Int,
    ],
    /// Client, Exchange: the server's outcome for an attempt arrived.
    AttemptEnd(AttemptEndEv) = "attempt_end" ["id": Int, "attempt": Int, "seq": Int, "result": Text, "at": Int],
    /// Client, Exchange: an original's one terminal state.
    OriginalEnd(OriginalEndEv) = "original_end" [
        "id": Int, "state": Text, "attempts": Int, "reason": Text, "latency_ns": IntOpt,
        "pending": Int, "outstanding": Int,
    ],
}

/// The type of a payload column in the tidy CSV export, so a reader can
/// load every file with fixed dtypes (pandas infers a float from an
/// integer column with empty cells, and nothing from a file with no rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColType {
    /// An integer on every row (i64 range).
    Int,
    /// An integer or empty (the field is absent for this event).
    IntOpt,
    /// An unsigned 64-bit integer or empty (PING's opaque bytes can exceed i64).
    U64Opt,
    /// An integer the trace omits when it equals this default; the CSV
    /// writes the default, so the column has no empty cells.
    IntOr(i64),
    /// `true`/`false`; the trace omits the default, the CSV writes it.
    BoolOr(bool),
    /// Text (names, addresses, messages); an empty text reads as missing.
    Text,
    /// Compact JSON (arrays, objects) as text, or empty when absent.
    Json,
}

impl ColType {
    /// The pandas dtype that reads this column without loss
    /// (`pd.read_csv(path, dtype=...)`): the nullable `Int64`/`UInt64` for
    /// integers that may be empty.
    pub fn pandas(self) -> &'static str {
        match self {
            ColType::Int | ColType::IntOr(_) => "int64",
            ColType::IntOpt => "Int64",
            ColType::U64Opt => "UInt64",
            ColType::BoolOr(_) => "bool",
            ColType::Text | ColType::Json => "string",
        }
    }
}

/// The key one connection has in both taps' rows: `CLIENT_PORT-SERVER_PORT`
/// (a connection is `conn 1` in the client's tap and `conn 2` in the
/// server's; the port pair is the same). `local`/`peer` come from the tap's
/// `conn_open`; `None` when an address has no port.
pub fn conn_key(ep: Endpoint, local: &str, peer: &str) -> Option<String> {
    let port = |a: &str| -> Option<u16> { a.rsplit_once(':')?.1.parse().ok() };
    let (client, server) = if ep.is_client_end() {
        (local, peer)
    } else {
        (peer, local)
    };
    Some(format!("{}-{}", port(client)?, port(server)?))
}

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

/// A frame's payload bytes as the tap saw them; a base64 string (standard
/// alphabet, padded) in JSON. Kept raw in memory so that the recording
/// thread only copies them: the trace writer encodes them straight into its
/// output, and readers get bytes back.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Payload(pub Vec<u8>);

impl Payload {
    /// The base64 text JSON holds.
    pub fn to_base64(&self) -> String {
        base64_simd::STANDARD.encode_to_string(&self.0)
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        base64_simd::STANDARD
            .decode_to_vec(text.as_bytes())
            .map(Payload)
            .map_err(|_| {
                serde::de::Error::custom("payload is not valid base64 (standard alphabet, padded)")
            })
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct FrameEv {
    pub dir: Dir,
    /// Byte offset of the frame header within this direction's byte stream
    /// (the client preface counts).
    pub offset: u64,
    pub frame: FrameType,
    /// Raw flag bits as on the wire, unknown bits included.
    pub flags: u8,
    /// Payload length from the frame header (padding included).
    pub len: u32,
    /// The reserved bit of the stream id (should be 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserved: bool,
    /// The reserved bit before the frame's 31-bit field (should be 0):
    /// WINDOW_UPDATE's increment, GOAWAY's last stream id, PUSH_PROMISE's
    /// promised stream id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub field_reserved: bool,
    /// Pad length for DATA/HEADERS/PUSH_PROMISE with PADDED set.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub pad: u8,
    /// WINDOW_UPDATE: the window size increment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub increment: Option<u32>,
    /// SETTINGS: (identifier, value) pairs in wire order, unknown ids kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Vec<(u16, u32)>>,
    /// RST_STREAM / GOAWAY error code (unknown codes kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<u32>,
    /// GOAWAY: last stream id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stream: Option<u32>,
    /// PUSH_PROMISE: promised stream id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promised: Option<u32>,
    /// HEADERS with PRIORITY / PRIORITY frame: dependency, exclusive, weight (1-256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// PING: the 8 opaque bytes as a big-endian integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<u64>,
    /// Payload bytes, when the capture mode stored them (base64 in JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    /// The capture mode would have kept this frame's payload, but the
    /// recorder's payload bound was full (the writer behind) or smaller
    /// than the frame: the frame is recorded, its bytes are not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub payload_dropped: bool,
}

impl Default for FrameType {
    fn default() -> Self {
        FrameType::DATA
    }
}

impl FrameEv {
    pub fn has_flag(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }
    /// DATA payload bytes that count against flow control (padding included,
    /// as RFC 9113 §6.9.1 counts the whole frame payload).
    pub fn flow_len(&self) -> u32 {
        if self.frame == FrameType::DATA {
            self.len
        } else {
            0
        }
    }
    /// DATA bytes the application receives (payload minus padding).
    pub fn data_len(&self) -> u32 {
        if self.frame != FrameType::DATA {
            return 0;
        }
        if self.has_flag(flags::PADDED) {
            self.len.saturating_sub(1 + self.pad as u32)
        } else {
            self.len
        }
    }
}

/// A Unix domain socket's addresses in `conn_open`: a listening socket's
/// end is `unix:PATH`; a client's end is `unix:@NAME` when bound to an
/// abstract name (h2probe's client binds `h2probe-<pid>-<nonce>-<n>`), or
/// `unix:(unnamed)` (the probe writes them, the analysis and exports read
/// them).
pub const UNIX_PREFIX: &str = "unix:";
/// An end bound to a name in Linux's abstract namespace: `unix:@NAME`.
pub const UNIX_ABSTRACT: &str = "unix:@";
/// `merge` offsets the connection ids of its k-th input by k × this, so
/// that ids of different processes never collide: in a merged trace,
/// `conn / CONN_OFFSET` tells which process recorded an event (what a
/// process numbers on its own, such as an `Exchange` client's original
/// ids, is told apart by it).
pub const CONN_OFFSET: u32 = 1 << 20;

/// An end with no name (another client's, usually): such connections are
/// paired with none, as every one of them looks alike.
pub const UNIX_UNNAMED: &str = "unix:(unnamed)";

/// What a `wire_error` says after its `byte N: ` when a frame broke a rule
/// of RFC 9113 (the tap's parser writes it, the analysis reads it: one
/// contract, here).
pub const RULE_BROKEN: &str = "rule broken: ";

/// Flag bits (RFC 9113 §6).
pub mod flags {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// Known SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod settings {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    /// Effective weight, 1-256 (wire value + 1).
    pub weight: u16,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WireErrorEv {
    pub dir: Dir,
    pub offset: u64,
    pub error: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct IntervalEv {
    pub dir: Dir,
    /// Start of the interval (ns); `t` is its end.
    pub start: u64,
    /// The wait had not ended when the run did (connection closed, run cut
    /// short): `t` is when the recording stopped, not when it resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ConnOpenEv {
    pub local: String,
    pub peer: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ConnCloseEv {
    /// Why the server closed it (handshake or idle timeout, drain timeout);
    /// empty when the connection simply ended.
    #[serde(default)]
    pub error: String,
    /// Bytes read and written through the tap.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StallEv {
    /// How long nothing reached the application (`--stall-timeout`).
    pub timeout_ns: u64,
    /// Messages the client still had to send.
    pub pending: u64,
    /// The connection window the server advertises (`--conn-window`): the
    /// streams of one connection share it. `None` in the client's stall:
    /// the client does not know the server's option (its view of its
    /// windows is in its frames).
    #[serde(default)]
    pub conn_window: Option<u64>,
    pub streams: Vec<StallStream>,
}

/// One open stream at a stall, as the server saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StallStream {
    pub conn: u32,
    pub stream: u32,
    /// Bytes the application read and did not release (not what h2
    /// buffered for it).
    pub unreleased: u64,
    /// h2's `available_capacity()`: what h2 would grant, announced in a
    /// WINDOW_UPDATE or not; not the peer's credit on the wire (the
    /// analysis reconstructs that from the tap and judges on it).
    pub available: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AcceptErrorEv {
    pub error: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ConnRefusedEv {
    pub peer: String,
    pub reason: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RpcStartEv {
    pub path: String,
    /// The RPC deadline from `grpc-timeout`, ns; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// Server, `--framing raw:N` only: `raw:N`, the body is cut into N-byte
    /// work units that are not the client's messages (absent for gRPC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing: Option<String>,
    /// Server: the stream's release point (`--release`), so that a stall's
    /// cause can be judged from the trace alone. Absent on the client's
    /// side and in older traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleasePoint>,
    /// Server, `--stall-stream`: the stream's releases at its point stop
    /// once this many body bytes arrived (an application that stops taking
    /// data; the end-of-RPC release still returns them), so that the
    /// `release_point` check does not call the withheld bytes a fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withhold_after: Option<u64>,
}

/// `body_drop` has no fields: what the stream held then is in its `chunk`
/// and `release` events.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct BodyDropEv {}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RpcEndEv {
    /// gRPC status code (0 = OK); HTTP-level failures use the mapped code.
    pub status: u32,
    #[serde(default)]
    pub message: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ChunkEv {
    pub len: u32,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ReleasePoint {
    Frame,
    Decode,
    Start,
    Complete,
    /// Not a policy: the bytes still unreleased when an RPC ends (deadline,
    /// reset, shutdown, or bytes that never formed a message), returned so
    /// the connection window is whole again.
    End,
}

impl std::str::FromStr for ReleasePoint {
    type Err = String;
    fn from_str(s: &str) -> Result<ReleasePoint, String> {
        ReleasePoint::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("{s:?}: expected frame, decode, start or complete"))
    }
}

impl ReleasePoint {
    /// Every release policy (`--release` values), in pipeline order;
    /// [`ReleasePoint::End`] is not one.
    pub const ALL: [ReleasePoint; 4] = [
        ReleasePoint::Frame,
        ReleasePoint::Decode,
        ReleasePoint::Start,
        ReleasePoint::Complete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReleasePoint::Frame => "frame",
            ReleasePoint::Decode => "decode",
            ReleasePoint::Start => "start",
            ReleasePoint::Complete => "complete",
            ReleasePoint::End => "end",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ReleaseEv {
    pub bytes: u32,
    /// The pipeline point that triggered this release.
    pub at: ReleasePoint,
    /// The message whose bytes these are; absent for `frame` releases and for
    /// the unframed remainder released at the end of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MsgEv {
    /// Message index within its RPC, from 0.
    pub seq: u64,
    /// Message size: the protobuf encoding (gRPC) or the unit (raw framing).
    pub size: u32,
    /// Bytes the message occupies in the body: `size + 5` for gRPC (the
    /// length prefix), `size` for raw framing.
    pub framed: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EnqueueEv {
    pub seq: u64,
    /// Queue depth (messages) after this enqueue.
    pub depth: u32,
    /// Framed bytes held by the queue after this enqueue.
    pub queued_bytes: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StartEv {
    pub seq: u64,
    pub worker: u32,
    /// Time the message waited in the queue (decode → start), ns.
    pub wait_ns: u64,
    /// Queue depth after this dequeue.
    pub depth: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CompleteEv {
    pub seq: u64,
    pub worker: u32,
    /// start → complete, ns.
    pub service_ns: u64,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum DiscardReason {
    /// The RPC's deadline passed with the message still queued.
    Deadline,
    /// The client cancelled (RST_STREAM) or the connection died.
    Cancelled,
    /// Server shutdown without `--shutdown-drain`.
    Shutdown,
    /// The unbounded queue's safety limit was reached.
    QueueLimit,
    /// The RPC failed (bad message, truncated stream) with work still owned.
    RpcError,
    /// `--max-owned-bytes` was reached: the RPC ended RESOURCE_EXHAUSTED.
    Limit,
    /// Exchange, `--when-full reject`: admission refused, answered `rejected`.
    Rejected,
    /// Exchange, `--when-full drop`: discarded on purpose, answered `dropped`.
    Dropped,
    /// Exchange: the attempt's deadline passed while it waited for a slot or
    /// in the queue (never started), answered `expired`.
    Expired,
}

impl DiscardReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DiscardReason::Deadline => "deadline",
            DiscardReason::Cancelled => "cancelled",
            DiscardReason::Shutdown => "shutdown",
            DiscardReason::QueueLimit => "queue_limit",
            DiscardReason::RpcError => "rpc_error",
            DiscardReason::Limit => "limit",
            DiscardReason::Rejected => "rejected",
            DiscardReason::Dropped => "dropped",
            DiscardReason::Expired => "expired",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DiscardEv {
    pub seq: u64,
    pub reason: DiscardReason,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SampleEv {
    /// Messages waiting in the queue.
    pub depth: u32,
    /// Framed bytes waiting in the queue.
    pub queued_bytes: u64,
    /// Framed bytes of decoded messages not yet completed (queued + in service).
    pub owned_bytes: u64,
    /// Bytes received but not yet released (our own count).
    pub unreleased: u64,
    /// h2's `FlowControl::used_capacity()` and `available_capacity()`.
    pub used_capacity: u64,
    pub available_capacity: i64,
    /// Resident set size of the process, bytes (0 where unknown).
    pub rss_bytes: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SendEv {
    pub seq: u64,
    /// Scheduled send time, ns (same clock as `t`): the pacer's time, or
    /// with `--rpc exchange` when the attempt was initiated (its `attempt`
    /// event's `t`).
    pub scheduled: u64,
    /// When the client began handing this message to h2, ns.
    pub begin: u64,
    /// Framed bytes (5-byte prefix + protobuf).
    pub bytes: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WindowBlockedEv {
    pub seq: u64,
    pub start: u64,
    /// The wait had not ended when the RPC did (deadline, interrupt, reset):
    /// `t` is when it was given up, not when credit came.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum NeverSentReason {
    /// The client's pending backlog (`--max-pending`) was full.
    Backlog,
    /// The RPC deadline passed first.
    Deadline,
    /// The stream or connection failed first.
    StreamError,
    /// The client was interrupted (Ctrl-C).
    Interrupted,
    /// The run stopped progressing and the stall watcher ended it (see the
    /// `stall` event).
    Stalled,
    /// The schedule itself was held up (the client not running) until more
    /// than 100 ms past `--duration`: messages due before `--duration` it
    /// had not reached were offered and never sent.
    Behind,
    /// Not sent on this connection: a unary connection that ended before
    /// its schedule handed them to the connection that replaced it (its
    /// `handed` event), to be sent there. Not a message never sent.
    HandedOver,
}

impl NeverSentReason {
    pub fn as_str(self) -> &'static str {
        match self {
            NeverSentReason::Backlog => "backlog",
            NeverSentReason::Deadline => "deadline",
            NeverSentReason::StreamError => "stream_error",
            NeverSentReason::Interrupted => "interrupted",
            NeverSentReason::Stalled => "stalled",
            NeverSentReason::Behind => "behind",
            NeverSentReason::HandedOver => "handed_over",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NeverSentEv {
    /// The first message of the run.
    pub seq: u64,
    pub reason: NeverSentReason,
    /// Messages `seq`, `seq + 1`, … `seq + count − 1`: one event per
    /// contiguous run of never-sent messages (absent: 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HandedEv {
    /// The first message of the run.
    pub seq: u64,
    /// Messages `seq` … `seq + count − 1` (absent: 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u64,
    /// The connection that handed them over (it had scheduled them).
    pub from: u32,
}

/// What the server decided for an attempt at the admission boundary.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// It took a slot (at once, or after `wait_ns` under `--when-full wait`).
    Admitted,
    /// Refused at once (`--when-full reject`).
    Rejected,
    /// Discarded on purpose (`--when-full drop`).
    Dropped,
    /// Its deadline passed while it waited for a slot (or before it arrived).
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Admitted => "admitted",
            Decision::Rejected => "rejected",
            Decision::Dropped => "dropped",
            Decision::Expired => "expired",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AdmissionEv {
    /// The attempt's place on its stream (the `decode` event's `seq`).
    pub seq: u64,
    /// The original's id and the attempt number (1 = first).
    pub id: u64,
    pub attempt: u32,
    /// The original's absolute deadline (CLOCK_MONOTONIC ns; 0 = none).
    pub deadline: u64,
    pub decision: Decision,
    /// Admission slots taken after this decision (queued + in service).
    pub in_use: u32,
    /// The server's admission bound K (`--admission`).
    pub slots: u32,
    /// Time spent waiting for a slot (0 unless `--when-full wait`).
    pub wait_ns: u64,
    /// The attempt's framed size (its payload counts as server-owned while admitted).
    pub framed: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ServiceChangeEv {
    /// The worker's service time from `t` on.
    pub service_ns: u64,
    /// Index of the schedule step (0 = the first, at the schedule's origin).
    pub step: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OriginalEv {
    pub id: u64,
    /// Absolute deadline: `t` + the original deadline; never changes.
    pub deadline: u64,
    /// The client's pending originals (waiting for an outstanding credit)
    /// and outstanding attempts (sent or retry-waiting, unanswered) after
    /// this event.
    pub pending: u32,
    pub outstanding: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AttemptEv {
    pub id: u64,
    pub attempt: u32,
    /// The attempt's place on the stream (the server's `decode` seq).
    pub seq: u64,
    /// The original's scheduled time and deadline, as sent.
    pub scheduled: u64,
    pub deadline: u64,
    pub pending: u32,
    pub outstanding: u32,
}

/// The server's answer to one attempt.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum AttemptResult {
    Completed,
    Rejected,
    Dropped,
    Expired,
}

impl AttemptResult {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptResult::Completed => "completed",
            AttemptResult::Rejected => "rejected",
            AttemptResult::Dropped => "dropped",
            AttemptResult::Expired => "expired",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AttemptEndEv {
    pub id: u64,
    pub attempt: u32,
    pub seq: u64,
    pub result: AttemptResult,
    /// When the server decided (completed: when the worker finished).
    pub at: u64,
}

/// The one terminal state of an original.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum OriginalState {
    /// Completed by its deadline (useful).
    OnTime,
    /// Completed after its deadline.
    Late,
    /// Its last attempt was rejected and no retry was made (`reason` says why).
    Rejected,
    Dropped,
    Expired,
    /// No attempt could be initiated (`reason`: backlog, deadline, end,
    /// interrupted, stream_error).
    NeverSent,
    /// An attempt was initiated but no outcome came back (the RPC ended
    /// first: interrupted, reset, server shutdown).
    Unanswered,
}

impl OriginalState {
    pub const ALL: [OriginalState; 7] = [
        OriginalState::OnTime,
        OriginalState::Late,
        OriginalState::Rejected,
        OriginalState::Dropped,
        OriginalState::Expired,
        OriginalState::NeverSent,
        OriginalState::Unanswered,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            OriginalState::OnTime => "on_time",
            OriginalState::Late => "late",
            OriginalState::Rejected => "rejected",
            OriginalState::Dropped => "dropped",
            OriginalState::Expired => "expired",
            OriginalState::NeverSent => "never_sent",
            OriginalState::Unanswered => "unanswered",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OriginalEndEv {
    pub id: u64,
    pub state: OriginalState,
    /// Attempts initiated for it.
    pub attempts: u32,
    /// Why it ended there, in a word (e.g. `no_retry`, `deadline`, `attempts`, `backlog`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Completed (on time or late): completion − scheduled time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
    pub pending: u32,
    pub outstanding: u32,
}

fn one() -> u64 {
    1
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

impl Kind {
    /// Index of this kind in [`Kind::NAMES`] (for per-kind counters);
    /// `NAMES.len()` for [`Kind::Unknown`].
    pub fn index(&self) -> usize {
        self.id().index()
    }
}

impl KindId {
    /// Index in [`Kind::NAMES`]; `NAMES.len()` for [`KindId::Unknown`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One parsed line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    Header(Header),
    Event(Event),
    Footer(Footer),
}

/// The fields every event line carries; read first to pick the variant.
#[derive(Deserialize)]
struct Common<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    /// Required of an event (read as 0 without one, a trace of 12,000 s);
    /// the header and footer have none.
    t: Option<u64>,
    ep: Option<Endpoint>,
    #[serde(default)]
    conn: u32,
    #[serde(default)]
    stream: u32,
}

impl Line {
    /// Parses one trace line. Unknown event types become [`Kind::Unknown`].
    /// [`Line::parse`] of the line with its `payload` field left out (a
    /// reader's second try when only the payload is damaged).
    pub fn parse_without_payload(line: &str) -> Result<Line, serde_json::Error> {
        let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)?;
        v.remove("payload");
        Line::parse(&serde_json::to_string(&v)?)
    }

    pub fn parse(line: &str) -> Result<Line, serde_json::Error> {
        let c: Common = serde_json::from_str(line)?;
        let kind = match &*c.ty {
            "header" => return Ok(Line::Header(serde_json::from_str(line)?)),
            "footer" => return Ok(Line::Footer(serde_json::from_str(line)?)),
            ty => Kind::parse_payload(ty, line)?,
        };
        let ep =
            c.ep.ok_or_else(|| serde::de::Error::custom("missing field `ep`"))?;
        let t =
            c.t.ok_or_else(|| serde::de::Error::custom("missing field `t`"))?;
        Ok(Line::Event(Event {
            t,
            ep,
            conn: c.conn,
            stream: c.stream,
            kind,
        }))
    }
}

/// The gRPC status name of a code (`CODE_n` for codes without a name).
pub fn status_name(code: u32) -> String {
    let n = match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => return format!("CODE_{code}"),
    };
    n.to_string()
}

/// The RFC 9113 §7 name of an HTTP/2 error code (RST_STREAM, GOAWAY);
/// codes the RFC does not define as `0xNN`.
pub fn h2_error_name(code: u32) -> String {
    let n = match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => return format!("0x{code:02x}"),
    };
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code gRPC defines has its name (16 read "CODE_16").
    #[test]
    fn every_grpc_status_code_is_named() {
        for (code, name) in [
            (6, "ALREADY_EXISTS"),
            (7, "PERMISSION_DENIED"),
            (9, "FAILED_PRECONDITION"),
            (10, "ABORTED"),
            (11, "OUT_OF_RANGE"),
            (15, "DATA_LOSS"),
            (16, "UNAUTHENTICATED"),
            (17, "CODE_17"),
        ] {
            assert_eq!(status_name(code), name);
        }
        assert!((0..=16).all(|c| !status_name(c).starts_with("CODE_")));
    }

    #[test]
    fn both_taps_give_one_connection_the_same_key() {
        let client = conn_key(Endpoint::Client, "127.0.0.1:56408", "127.0.0.1:34881");
        let server = conn_key(Endpoint::Server, "127.0.0.1:34881", "127.0.0.1:56408");
        assert_eq!(client.as_deref(), Some("56408-34881"));
        assert_eq!(client, server);
        assert_eq!(
            conn_key(Endpoint::Client, "[::1]:5", "[::1]:6").as_deref(),
            Some("5-6")
        );
        assert_eq!(conn_key(Endpoint::Client, "unix", "127.0.0.1:1"), None);
    }

    #[test]
    fn frame_type_names_round_trip_including_unknown() {
        for b in 0..=255u8 {
            let ft = FrameType(b);
            let s = serde_json::to_string(&ft).unwrap();
            let back: FrameType = serde_json::from_str(&s).unwrap();
            assert_eq!(back, ft, "{s}");
        }
        assert_eq!(FrameType(0x8).to_string(), "WINDOW_UPDATE");
        assert_eq!(FrameType(0xb).to_string(), "UNKNOWN_0x0b");
    }

    #[test]
    fn every_kind_round_trips_through_a_line() {
        let kinds = vec![
            Kind::Frame(FrameEv {
                dir: Dir::Out,
                offset: 24,
                frame: FrameType::SETTINGS,
                flags: 0,
                len: 6,
                settings: Some(vec![(4, 65535)]),
                ..Default::default()
            }),
            Kind::Release(ReleaseEv {
                bytes: 16389,
                at: ReleasePoint::Complete,
                seq: Some(3),
            }),
            Kind::Discard(DiscardEv {
                seq: 9,
                reason: DiscardReason::Deadline,
            }),
            Kind::WindowBlocked(WindowBlockedEv {
                seq: 1,
                start: 5,
                open: true,
            }),
            Kind::NeverSent(NeverSentEv {
                seq: 2,
                reason: NeverSentReason::Backlog,
                count: 40,
            }),
        ];
        for kind in kinds {
            let ev = Event {
                t: 42,
                ep: Endpoint::Client,
                conn: 1,
                stream: 3,
                kind,
            };
            let s = serde_json::to_string(&ev).unwrap();
            assert_eq!(Line::parse(&s).unwrap(), Line::Event(ev.clone()), "{s}");
        }
    }

    #[test]
    fn payload_bytes_are_base64_in_a_line_and_bytes_again_when_read() {
        let bytes: Vec<u8> = (0..=255).collect();
        let ev = Event {
            t: 1,
            ep: Endpoint::Server,
            conn: 1,
            stream: 1,
            kind: Kind::Frame(FrameEv {
                frame: FrameType::DATA,
                len: 256,
                payload: Some(Payload(bytes.clone())),
                ..Default::default()
            }),
        };
        let s = serde_json::to_string(&ev).unwrap();
        assert!(s.contains(r#""payload":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==""#), "{s}");
        assert_eq!(Line::parse(&s).unwrap(), Line::Event(ev));
        // A payload that is not base64 is an error naming the field, not
        // bytes silently made up.
        let bad = s.replace("AAECAwQF", "AAEC*wQF");
        let err = Line::parse(&bad).unwrap_err().to_string();
        assert!(err.contains("payload is not valid base64"), "{err}");
    }

    #[test]
    fn unknown_types_are_kept_as_unknown() {
        let l = Line::parse(
            r#"{"type":"from_the_future","t":1,"ep":"server","conn":0,"stream":0,"x":1}"#,
        )
        .unwrap();
        match l {
            Line::Event(e) => assert_eq!(e.kind, Kind::Unknown),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn kind_names_match_the_serialized_tag() {
        let ev = Event {
            t: 0,
            ep: Endpoint::Server,
            conn: 0,
            stream: 1,
            kind: Kind::Chunk(ChunkEv { len: 1 }),
        };
        let v: serde_json::Value = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["type"], "chunk");
        assert_eq!(ev.kind.index(), 7);
    }
}
