//! Events as JSON lines, written without serde's generic machinery: the
//! recorder's writer thread spends much of its time turning events into
//! text, and this is about 2.4 times as fast as `serde_json::to_writer`
//! (`cargo bench --bench throughput -- encode` measures both side by side).
//!
//! The output is byte for byte what `serde_json::to_writer(&event)` writes
//! (the tests hold every kind written here to that). The event types the
//! probe writes often have a direct path; each destructures its payload
//! exhaustively, so a field added to the schema does not compile until it is
//! written here too. The rare ones go through serde_json.

use crate::schema::{
    ChunkEv, CompleteEv, DiscardEv, EnqueueEv, Event, FrameEv, IntervalEv, Kind, MsgEv, Payload,
    Priority, ReleaseEv, RpcEndEv, RpcStartEv, SampleEv, SendEv, StartEv, WindowBlockedEv,
};

/// A key as the literal written before its value, `,"name":`: keys were
/// copied in three pieces (comma and quote, name, quote and colon).
macro_rules! k {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}

/// A key and the opening quote of its string value, `,"name":"`.
macro_rules! kq {
    ($name:literal) => {
        concat!(",\"", $name, "\":\"")
    };
}

/// Appends `e` as one JSON line (with its `\n`) to `out`.
pub fn write_event(out: &mut Vec<u8>, e: &Event) {
    let start = out.len();
    let mut o = Obj { out };
    o.out.extend_from_slice(b"{\"t\":");
    o.int(e.t);
    o.name(kq!("ep"), e.ep.as_str());
    o.u(k!("conn"), e.conn);
    o.u(k!("stream"), e.stream);
    if !o.kind(&e.kind) {
        out.truncate(start);
        serde_json::to_writer(&mut *out, e).expect("writing to memory cannot fail");
        out.push(b'\n');
        return;
    }
    out.extend_from_slice(b"}\n");
}

/// The fields of one JSON object after its first.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
}

impl Obj<'_> {
    /// `k` is a key's whole prefix, `,"name":` (from [`k!`]): one copy.
    #[inline(always)]
    fn key(&mut self, k: &'static str) {
        self.out.extend_from_slice(k.as_bytes());
    }

    #[inline(always)]
    fn int(&mut self, v: impl itoa::Integer) {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    #[inline(always)]
    fn u(&mut self, k: &'static str, v: impl itoa::Integer) {
        self.key(k);
        self.int(v);
    }

    #[inline(always)]
    fn opt(&mut self, k: &'static str, v: Option<impl itoa::Integer>) {
        if let Some(v) = v {
            self.u(k, v);
        }
    }

    #[inline(always)]
    fn bool(&mut self, k: &'static str, v: bool) {
        self.key(k);
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
    }

    #[inline(always)]
    fn str(&mut self, k: &'static str, v: &str) {
        self.key(k);
        string(self.out, v);
    }

    /// A name from the schema's own tables (never needs escaping); `kq` is
    /// the key's prefix with the value's opening quote, `,"name":"` (from
    /// [`kq!`]).
    #[inline(always)]
    fn name(&mut self, kq: &'static str, v: &'static str) {
        self.out.extend_from_slice(kq.as_bytes());
        self.out.extend_from_slice(v.as_bytes());
        self.out.push(b'"');
    }

    /// The `type` tag and the payload's fields; false for a kind without a
    /// direct path here.
    fn kind(&mut self, kind: &Kind) -> bool {
        self.name(kq!("type"), kind.name());
        match kind {
            Kind::Frame(f) => self.frame(f),
            Kind::SocketBlocked(IntervalEv { dir, start, open }) => {
                self.name(kq!("dir"), dir.as_str());
                self.u(k!("start"), *start);
                if *open {
                    self.bool(k!("open"), true);
                }
            }
            Kind::RpcStart(RpcStartEv {
                path,
                deadline_ns,
                framing,
                release,
                withhold_after,
            }) => {
                self.str(k!("path"), path);
                self.opt(k!("deadline_ns"), *deadline_ns);
                if let Some(f) = framing {
                    self.str(k!("framing"), f);
                }
                if let Some(r) = release {
                    self.name(kq!("release"), r.as_str());
                }
                self.opt(k!("withhold_after"), *withhold_after);
            }
            Kind::RpcEnd(RpcEndEv { status, message }) => {
                self.u(k!("status"), *status);
                self.str(k!("message"), message);
            }
            Kind::Chunk(ChunkEv { len }) => self.u(k!("len"), *len),
            Kind::Release(ReleaseEv { bytes, at, seq }) => {
                self.u(k!("bytes"), *bytes);
                self.name(kq!("at"), at.as_str());
                self.opt(k!("seq"), *seq);
            }
            Kind::Decode(MsgEv { seq, size, framed })
            | Kind::Schedule(MsgEv { seq, size, framed }) => {
                self.u(k!("seq"), *seq);
                self.u(k!("size"), *size);
                self.u(k!("framed"), *framed);
            }
            Kind::Enqueue(EnqueueEv {
                seq,
                depth,
                queued_bytes,
            }) => {
                self.u(k!("seq"), *seq);
                self.u(k!("depth"), *depth);
                self.u(k!("queued_bytes"), *queued_bytes);
            }
            Kind::Start(StartEv {
                seq,
                worker,
                wait_ns,
                depth,
            }) => {
                self.u(k!("seq"), *seq);
                self.u(k!("worker"), *worker);
                self.u(k!("wait_ns"), *wait_ns);
                self.u(k!("depth"), *depth);
            }
            Kind::Complete(CompleteEv {
                seq,
                worker,
                service_ns,
            }) => {
                self.u(k!("seq"), *seq);
                self.u(k!("worker"), *worker);
                self.u(k!("service_ns"), *service_ns);
            }
            Kind::Discard(DiscardEv { seq, reason }) => {
                self.u(k!("seq"), *seq);
                self.name(kq!("reason"), reason.as_str());
            }
            Kind::Sample(SampleEv {
                depth,
                queued_bytes,
                owned_bytes,
                unreleased,
                used_capacity,
                available_capacity,
                rss_bytes,
            }) => {
                self.u(k!("depth"), *depth);
                self.u(k!("queued_bytes"), *queued_bytes);
                self.u(k!("owned_bytes"), *owned_bytes);
                self.u(k!("unreleased"), *unreleased);
                self.u(k!("used_capacity"), *used_capacity);
                self.u(k!("available_capacity"), *available_capacity);
                self.u(k!("rss_bytes"), *rss_bytes);
            }
            Kind::Send(SendEv {
                seq,
                scheduled,
                begin,
                bytes,
            }) => {
                self.u(k!("seq"), *seq);
                self.u(k!("scheduled"), *scheduled);
                self.u(k!("begin"), *begin);
                self.u(k!("bytes"), *bytes);
            }
            Kind::WindowBlocked(WindowBlockedEv { seq, start, open }) => {
                self.u(k!("seq"), *seq);
                self.u(k!("start"), *start);
                if *open {
                    self.bool(k!("open"), true);
                }
            }
            _ => return false,
        }
        true
    }

    fn frame(&mut self, f: &FrameEv) {
        let FrameEv {
            dir,
            offset,
            frame,
            flags,
            len,
            reserved,
            field_reserved,
            pad,
            increment,
            settings,
            error_code,
            last_stream,
            promised,
            priority,
            opaque,
            payload,
            payload_dropped,
        } = f;
        self.name(kq!("dir"), dir.as_str());
        self.u(k!("offset"), *offset);
        match frame.name() {
            Some(name) => self.name(kq!("frame"), name),
            None => self.str(k!("frame"), &frame.to_string()),
        }
        self.u(k!("flags"), *flags);
        self.u(k!("len"), *len);
        if *reserved {
            self.bool(k!("reserved"), true);
        }
        if *field_reserved {
            self.bool(k!("field_reserved"), true);
        }
        if *pad != 0 {
            self.u(k!("pad"), *pad);
        }
        self.opt(k!("increment"), *increment);
        if let Some(settings) = settings {
            self.key(k!("settings"));
            self.out.push(b'[');
            for (i, (id, value)) in settings.iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                self.out.push(b'[');
                self.int(*id);
                self.out.push(b',');
                self.int(*value);
                self.out.push(b']');
            }
            self.out.push(b']');
        }
        self.opt(k!("error_code"), *error_code);
        self.opt(k!("last_stream"), *last_stream);
        self.opt(k!("promised"), *promised);
        if let Some(Priority {
            dependency,
            exclusive,
            weight,
        }) = priority
        {
            self.key(k!("priority"));
            self.out.extend_from_slice(b"{\"dependency\":");
            self.int(*dependency);
            self.bool(k!("exclusive"), *exclusive);
            self.u(k!("weight"), *weight);
            self.out.push(b'}');
        }
        self.opt(k!("opaque"), *opaque);
        if let Some(Payload(p)) = payload {
            // Base64 straight into the line: no string to build or scan.
            self.key(k!("payload"));
            self.out.push(b'"');
            base64_simd::STANDARD.encode_append(p, self.out);
            self.out.push(b'"');
        }
        if *payload_dropped {
            self.bool(k!("payload_dropped"), true);
        }
    }
}

/// A JSON string: copied as it is unless it holds a byte JSON requires
/// escaped (`"`, `\`, control characters), which serde_json then escapes
/// exactly as it would have. Names, paths and messages take the copy.
fn string(out: &mut Vec<u8>, s: &str) {
    // A fold without an early exit: the compiler turns it into a vector loop.
    let needs_escape = s.bytes().fold(false, |acc, b| {
        acc | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
        serde_json::to_writer(&mut *out, s).expect("writing to memory cannot fail");
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{
        ConnCloseEv, Dir, DiscardReason, Endpoint, FrameType, ReleasePoint, StallEv, StallStream,
    };

    fn line(e: &Event) -> String {
        let mut out = vec![];
        write_event(&mut out, e);
        String::from_utf8(out).unwrap()
    }

    fn serde_line(e: &Event) -> String {
        serde_json::to_string(e).unwrap() + "\n"
    }

    /// Awkward strings: quotes, escapes (an even number of them too),
    /// control bytes, non-ASCII, empty.
    const STRINGS: [&str; 7] = [
        "",
        "/h2probe.v1.Sink/Ingest",
        "say \"no\"\\",
        "two \"quotes\"",
        "line\nbreak\ttab\u{1}\u{1f}",
        "grüße ✓ \u{7f}",
        "QUJD+/==",
    ];

    /// Values at the edges of every integer type the schema uses.
    const INTS: [u64; 5] = [0, 1, 9, 16_384, u64::MAX];

    fn frames() -> Vec<FrameEv> {
        let mut v = vec![];
        for (i, &n) in INTS.iter().enumerate() {
            let some = i % 2 == 0;
            v.push(FrameEv {
                dir: if some { Dir::In } else { Dir::Out },
                offset: n,
                frame: FrameType([0u8, 1, 4, 8, 0x0a, 0xff][i % 6]),
                flags: n as u8,
                len: n as u32,
                reserved: some,
                field_reserved: !some,
                pad: if some { n as u8 } else { 0 },
                increment: some.then_some(n as u32),
                settings: match i % 3 {
                    0 => None,
                    1 => Some(vec![]),
                    _ => Some(vec![(1, 4096), (4, n as u32), (0xffff, u32::MAX)]),
                },
                error_code: some.then_some(n as u32),
                last_stream: (!some).then_some(n as u32),
                promised: some.then_some(7),
                priority: some.then_some(Priority {
                    dependency: n as u32,
                    exclusive: i % 4 == 0,
                    weight: 256,
                }),
                opaque: (!some).then_some(n),
                payload: some.then(|| Payload(STRINGS[i % STRINGS.len()].as_bytes().to_vec())),
                payload_dropped: !some,
            });
        }
        v.push(FrameEv::default());
        v
    }

    /// Every kind with a direct path, with its optional fields both set and
    /// absent (struct literals in full: a new field must be added here).
    fn kinds() -> Vec<Kind> {
        let mut v: Vec<Kind> = frames().into_iter().map(Kind::Frame).collect();
        for (i, &n) in INTS.iter().enumerate() {
            let s = STRINGS[i % STRINGS.len()].to_string();
            let some = i % 2 == 0;
            v.extend([
                Kind::SocketBlocked(IntervalEv {
                    dir: Dir::Out,
                    start: n,
                    open: some,
                }),
                Kind::RpcStart(RpcStartEv {
                    path: s.clone(),
                    deadline_ns: some.then_some(n),
                    framing: (!some).then(|| s.clone()),
                    release: some.then_some(crate::schema::ReleasePoint::ALL[i % 4]),
                    withhold_after: some.then_some(n),
                }),
                Kind::RpcEnd(RpcEndEv {
                    status: n as u32,
                    message: s.clone(),
                }),
                Kind::Chunk(ChunkEv { len: n as u32 }),
                Kind::Release(ReleaseEv {
                    bytes: n as u32,
                    at: [ReleasePoint::Frame, ReleasePoint::End][i % 2],
                    seq: some.then_some(n),
                }),
                Kind::Decode(MsgEv {
                    seq: n,
                    size: n as u32,
                    framed: 5,
                }),
                Kind::Schedule(MsgEv {
                    seq: n,
                    size: 0,
                    framed: n as u32,
                }),
                Kind::Enqueue(EnqueueEv {
                    seq: n,
                    depth: n as u32,
                    queued_bytes: n,
                }),
                Kind::Start(StartEv {
                    seq: n,
                    worker: n as u32,
                    wait_ns: n,
                    depth: 3,
                }),
                Kind::Complete(CompleteEv {
                    seq: n,
                    worker: 1,
                    service_ns: n,
                }),
                Kind::Discard(DiscardEv {
                    seq: n,
                    reason: [DiscardReason::QueueLimit, DiscardReason::RpcError][i % 2],
                }),
                Kind::Sample(SampleEv {
                    depth: n as u32,
                    queued_bytes: n,
                    owned_bytes: n,
                    unreleased: n,
                    used_capacity: n,
                    available_capacity: [i64::MIN, -1, 0, 65_535, i64::MAX][i],
                    rss_bytes: n,
                }),
                Kind::Send(SendEv {
                    seq: n,
                    scheduled: n,
                    begin: n,
                    bytes: n as u32,
                }),
                Kind::WindowBlocked(WindowBlockedEv {
                    seq: n,
                    start: n,
                    open: some,
                }),
            ]);
        }
        v
    }

    #[test]
    fn every_direct_kind_is_written_as_serde_json_writes_it() {
        let mut names = std::collections::BTreeSet::new();
        for (i, kind) in kinds().into_iter().enumerate() {
            names.insert(kind.name());
            // Taken on the direct path, not handed to serde_json.
            assert!(Obj { out: &mut vec![] }.kind(&kind), "{}", kind.name());
            let e = Event {
                t: INTS[i % INTS.len()],
                ep: [
                    Endpoint::Server,
                    Endpoint::Client,
                    Endpoint::ClientLeg,
                    Endpoint::ServerLeg,
                ][i % 4],
                conn: u32::MAX - i as u32,
                stream: i as u32,
                kind,
            };
            assert_eq!(line(&e), serde_line(&e), "{e:?}");
        }
        assert_eq!(names.len(), 15, "every kind with a direct path: {names:?}");
    }

    #[test]
    fn kinds_without_a_direct_path_go_through_serde_json() {
        for kind in [
            Kind::ConnClose(ConnCloseEv {
                error: "idle \"timeout\"".into(),
                bytes_in: 1,
                bytes_out: 2,
            }),
            Kind::Stall(StallEv {
                timeout_ns: 5,
                pending: 1,
                conn_window: Some(65_535),
                streams: vec![StallStream {
                    conn: 1,
                    stream: 3,
                    unreleased: 9,
                    available: -4,
                }],
            }),
        ] {
            assert!(!Obj { out: &mut vec![] }.kind(&kind), "{}", kind.name());
            let e = Event {
                t: 42,
                ep: Endpoint::Server,
                conn: 1,
                stream: 0,
                kind,
            };
            assert_eq!(line(&e), serde_line(&e));
        }
    }

    #[test]
    fn lines_append_and_parse_back() {
        let mut out = b"already here\n".to_vec();
        let e = Event {
            t: 7,
            ep: Endpoint::Client,
            conn: 2,
            stream: 1,
            kind: Kind::Chunk(ChunkEv { len: 10 }),
        };
        write_event(&mut out, &e);
        write_event(&mut out, &e);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "already here");
        assert_eq!(
            crate::schema::Line::parse(lines[1]).unwrap(),
            crate::schema::Line::Event(e)
        );
    }
}
