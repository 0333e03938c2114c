//! Trace → qlog (JSON-SEQ, RFC 7464): frames as `http2:frame_created` /
//! `http2:frame_parsed` events after draft-pardue-httpbis-qlog-h2-events,
//! application events in an `h2probe:` namespace of our own. One file per
//! endpoint (`server.sqlog`, `client.sqlog`): a qlog trace has one vantage point.

use crate::trace::schema::{Dir, Event, FrameEv, FrameType, Kind};
use anyhow::Context as _;
use h2probe_analysis::aside::Aside;
use serde::Serialize;
use serde_json::json;
use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};

const RS: u8 = 0x1e;

/// A frame as qlog's `frame` object, serialized straight from the trace's
/// event: a `serde_json::Value` tree cost ≈ 90 bytes of memory a byte of a
/// SETTINGS list (4.9 GB for one 35 MB line). Fields are in key order, as
/// the `Value` maps wrote them, so the files are unchanged byte for byte.
#[derive(Serialize)]
struct QFrame<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ack: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_stream: Option<bool>,
    /// `Some(None)` is written `null`: a RST_STREAM or GOAWAY whose code
    /// the trace lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<Option<u32>>,
    flags: u8,
    frame_type: Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_stream_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    opaque_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pad_length: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<QPriority>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_frame_type: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    settings: Option<QSettings<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window_size_increment: Option<Option<u32>>,
}

#[derive(Serialize)]
struct QPriority {
    exclusive: bool,
    stream_dependency: u32,
    weight: u16,
}

/// A SETTINGS list as `[{"identifier": …, "value": …}, …]`, one pair at a
/// time.
struct QSettings<'a>(&'a [(u16, u32)]);

impl Serialize for QSettings<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Setting {
            identifier: u16,
            value: u32,
        }
        s.collect_seq(
            self.0
                .iter()
                .map(|&(identifier, value)| Setting { identifier, value }),
        )
    }
}

fn qlog_frame(f: &FrameEv) -> QFrame<'_> {
    let name = f.frame.name();
    let mut q = QFrame {
        ack: None,
        end_stream: None,
        error_code: None,
        flags: f.flags,
        frame_type: name.map_or(Cow::Borrowed("unknown"), |n| {
            Cow::Owned(n.to_ascii_lowercase())
        }),
        last_stream_id: None,
        opaque_data: None,
        pad_length: None,
        priority: f.priority.map(|p| QPriority {
            exclusive: p.exclusive,
            stream_dependency: p.dependency,
            weight: p.weight,
        }),
        raw_frame_type: name.is_none().then_some(f.frame.0),
        settings: None,
        window_size_increment: None,
    };
    // Flag 0x1: ACK on SETTINGS and PING, END_STREAM on DATA and HEADERS.
    let flag_1 = f.flags & 1 == 1;
    match f.frame {
        FrameType::WINDOW_UPDATE => q.window_size_increment = Some(f.increment),
        FrameType::SETTINGS => {
            q.settings = Some(QSettings(f.settings.as_deref().unwrap_or_default()));
            q.ack = Some(flag_1);
        }
        FrameType::RST_STREAM | FrameType::GOAWAY => {
            q.error_code = Some(f.error_code);
            q.last_stream_id = f.last_stream;
        }
        FrameType::PING => {
            q.opaque_data = Some(format!("{:016x}", f.opaque.unwrap_or(0)));
            q.ack = Some(flag_1);
        }
        FrameType::DATA | FrameType::HEADERS => {
            q.end_stream = Some(flag_1);
            q.pad_length = (f.pad > 0).then_some(f.pad);
        }
        _ => {}
    }
    q
}

/// A frame event's `data`.
#[derive(Serialize)]
struct QFrameData<'a> {
    conn: u32,
    frame: QFrame<'a>,
    length: u32,
    stream_id: u32,
}

/// One qlog event: its keys in the order a `Value` map sorts them.
#[derive(Serialize)]
struct QEvent<'a, D: Serialize> {
    data: D,
    name: &'a str,
    time: f64,
}

/// One JSON-SEQ record.
fn record(w: &mut impl Write, v: &impl Serialize) -> std::io::Result<()> {
    w.write_all(&[RS])?;
    serde_json::to_writer(&mut *w, v)?;
    w.write_all(b"\n")
}

/// Writes the qlog event for a trace event, relative to `origin` (ms), as
/// one JSON-SEQ record; an event qlog has no place for writes nothing.
fn write_event(w: &mut impl Write, e: &Event, origin: u64) -> std::io::Result<()> {
    let time = e.t.saturating_sub(origin) as f64 / 1e6;
    match &e.kind {
        Kind::Frame(f) => {
            let name = if f.dir == Dir::Out {
                "http2:frame_created"
            } else {
                "http2:frame_parsed"
            };
            let data = QFrameData {
                conn: e.conn,
                frame: qlog_frame(f),
                length: f.len,
                stream_id: e.stream,
            };
            record(w, &QEvent { data, name, time })
        }
        Kind::Unknown => Ok(()),
        other => {
            // Application events are small: their fields as the trace has
            // them, less the tag, plus the connection and stream.
            let Ok(mut v) = serde_json::to_value(other) else {
                return Ok(());
            };
            let Some(o) = v.as_object_mut() else {
                return Ok(());
            };
            o.remove("type");
            o.insert("conn".into(), json!(e.conn));
            o.insert("stream_id".into(), json!(e.stream));
            let name = format!("h2probe:{}", other.name());
            record(
                w,
                &QEvent {
                    data: v,
                    name: &name,
                    time,
                },
            )
        }
    }
}

/// Writes `server.sqlog` and `client.sqlog` (a relay run: `client_leg.sqlog`
/// and `server_leg.sqlog`) for the endpoints present.
pub fn export_qlog(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let (header, events) = super::run_events(dir)?;
    let origin = header.origin_mono_ns;
    let origin_unix_ms = header.origin_unix_ns as f64 / 1e6;
    // One file per tap: server, client, and a relay's two legs.
    // Each written aside and renamed once whole (h2probe_analysis::aside):
    // an interrupted or failed export leaves the previous files.
    type Out = (PathBuf, Aside, std::io::BufWriter<std::fs::File>);
    let mut outs: Vec<Option<Out>> = vec![None, None, None, None];
    for e in events {
        let i = e.ep as usize;
        if outs[i].is_none() {
            let name = format!("{}.sqlog", e.ep.as_str());
            let path = dir.join(name);
            let (aside, f) =
                Aside::file(&path).with_context(|| format!("creating {}", path.display()))?;
            let mut w = std::io::BufWriter::new(f);
            let header = json!({
                "file_schema": "urn:ietf:params:qlog:file:sequential",
                "qlog_version": "0.3",
                "qlog_format": "JSON-SEQ",
                "serialization_format": "application/qlog+json-seq",
                "title": format!("h2probe {} tap", e.ep.as_str()),
                "trace": {
                    // qlog knows client, server and network: a relay's
                    // legs are observers on the path.
                    "vantage_point": {
                        "type": if e.ep.is_relay_leg() { "network" } else { e.ep.as_str() },
                        "name": e.ep.as_str(),
                    },
                    "common_fields": { "time_format": "relative", "reference_time": origin_unix_ms },
                    "event_schemas": ["urn:ietf:params:qlog:events:http2", "urn:h2probe:events"],
                },
            });
            record(&mut w, &header)?;
            outs[i] = Some((path, aside, w));
        }
        if let Some((path, _, w)) = outs[i].as_mut() {
            write_event(w, &e, origin).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    let (mut paths, mut written) = (vec![], vec![]);
    for (path, aside, mut w) in outs.into_iter().flatten() {
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        paths.push(path);
        written.push(aside);
    }
    h2probe_analysis::aside::commit_together(written)
        .with_context(|| format!("writing the qlogs into {}", dir.display()))?;
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::schema::{Endpoint, Priority};

    fn line(e: &Event) -> String {
        let mut out = vec![];
        write_event(&mut out, e, 1_000_000).expect("to memory");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    fn frame_event(f: FrameEv) -> Event {
        Event {
            t: 3_500_000,
            ep: Endpoint::Server,
            conn: 2,
            stream: 5,
            kind: Kind::Frame(f),
        }
    }

    /// The frame objects as qlog files had them when they were built as
    /// `serde_json::Value` maps (the expected lines are what that build
    /// wrote for each frame kind): the same keys, in sorted order, and
    /// `null` for a reset's missing code.
    #[test]
    fn frames_are_written_as_the_value_maps_wrote_them() {
        let cases = [
            (
                FrameEv {
                    frame: FrameType::SETTINGS,
                    settings: Some(vec![(4, 1), (0x99, 7)]),
                    len: 12,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"ack":false,"flags":0,"frame_type":"settings","settings":[{"identifier":4,"value":1},{"identifier":153,"value":7}]},"length":12,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::SETTINGS,
                    flags: 1,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"ack":true,"flags":1,"frame_type":"settings","settings":[]},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::RST_STREAM,
                    dir: Dir::Out,
                    len: 4,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"error_code":null,"flags":0,"frame_type":"rst_stream"},"length":4,"stream_id":5},"name":"http2:frame_created","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::GOAWAY,
                    error_code: Some(11),
                    last_stream: Some(7),
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"error_code":11,"flags":0,"frame_type":"goaway","last_stream_id":7},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::HEADERS,
                    flags: 0x29,
                    pad: 2,
                    priority: Some(Priority {
                        dependency: 3,
                        exclusive: true,
                        weight: 16,
                    }),
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"end_stream":true,"flags":41,"frame_type":"headers","pad_length":2,"priority":{"exclusive":true,"stream_dependency":3,"weight":16}},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::PING,
                    opaque: Some(0xab),
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"ack":false,"flags":0,"frame_type":"ping","opaque_data":"00000000000000ab"},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::WINDOW_UPDATE,
                    increment: None,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"flags":0,"frame_type":"window_update","window_size_increment":null},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::DATA,
                    flags: 0x9,
                    pad: 3,
                    len: 100,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"end_stream":true,"flags":9,"frame_type":"data","pad_length":3},"length":100,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::PRIORITY,
                    priority: Some(Priority {
                        dependency: 0,
                        exclusive: false,
                        weight: 256,
                    }),
                    len: 5,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"flags":0,"frame_type":"priority","priority":{"exclusive":false,"stream_dependency":0,"weight":256}},"length":5,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::PUSH_PROMISE,
                    flags: 0x4,
                    promised: Some(2),
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"flags":4,"frame_type":"push_promise"},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType::CONTINUATION,
                    flags: 0x4,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"flags":4,"frame_type":"continuation"},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
            (
                FrameEv {
                    frame: FrameType(0x20),
                    flags: 0xff,
                    ..Default::default()
                },
                r#"{"data":{"conn":2,"frame":{"flags":255,"frame_type":"unknown","raw_frame_type":32},"length":0,"stream_id":5},"name":"http2:frame_parsed","time":2.5}"#,
            ),
        ];
        for (f, want) in cases {
            let got = line(&frame_event(f));
            assert_eq!(got, format!("\u{1e}{want}\n"));
            // And in the key order a Value map sorts them into.
            let v: serde_json::Value = serde_json::from_str(&got[1..]).expect("JSON");
            assert_eq!(format!("\u{1e}{v}\n"), got);
        }
    }
}
