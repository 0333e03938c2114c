//! Trace → qlog (JSON-SEQ, RFC 7464): frames as `http2:frame_created` /
//! `http2:frame_parsed` events after draft-pardue-httpbis-qlog-h2-events,
//! application events in an `h2probe:` namespace of our own. One file per
//! endpoint (`server.sqlog`, `client.sqlog`): a qlog trace has one vantage point.

use crate::trace::schema::{Dir, Event, FrameEv, FrameType, Kind};
use anyhow::Context as _;
use h2probe_analysis::aside::Aside;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

const RS: u8 = 0x1e;

fn frame_json(f: &FrameEv) -> Value {
    let ty = match f.frame.name() {
        Some(n) => n.to_ascii_lowercase(),
        None => "unknown".into(),
    };
    let mut frame = json!({ "frame_type": ty });
    let m = frame.as_object_mut().expect("object");
    if f.frame.name().is_none() {
        m.insert("raw_frame_type".into(), json!(f.frame.0));
    }
    m.insert("flags".into(), json!(f.flags));
    match f.frame {
        FrameType::WINDOW_UPDATE => {
            m.insert("window_size_increment".into(), json!(f.increment));
        }
        FrameType::SETTINGS => {
            let s: Vec<Value> = f
                .settings
                .iter()
                .flatten()
                .map(|(id, v)| json!({ "identifier": id, "value": v }))
                .collect();
            m.insert("settings".into(), json!(s));
            m.insert("ack".into(), json!(f.flags & 1 == 1));
        }
        FrameType::RST_STREAM | FrameType::GOAWAY => {
            m.insert("error_code".into(), json!(f.error_code));
            if let Some(l) = f.last_stream {
                m.insert("last_stream_id".into(), json!(l));
            }
        }
        FrameType::PING => {
            m.insert(
                "opaque_data".into(),
                json!(format!("{:016x}", f.opaque.unwrap_or(0))),
            );
            m.insert("ack".into(), json!(f.flags & 1 == 1));
        }
        FrameType::DATA | FrameType::HEADERS => {
            m.insert("end_stream".into(), json!(f.flags & 1 == 1));
            if f.pad > 0 {
                m.insert("pad_length".into(), json!(f.pad));
            }
        }
        _ => {}
    }
    if let Some(p) = f.priority {
        m.insert(
            "priority".into(),
            json!({ "stream_dependency": p.dependency, "exclusive": p.exclusive, "weight": p.weight }),
        );
    }
    frame
}

/// One qlog event for a trace event, relative to `origin` (ms).
fn event_json(e: &Event, origin: u64) -> Option<Value> {
    let time = e.t.saturating_sub(origin) as f64 / 1e6;
    let (name, data) = match &e.kind {
        Kind::Frame(f) => {
            let name = if f.dir == Dir::Out {
                "http2:frame_created"
            } else {
                "http2:frame_parsed"
            };
            (
                name.to_string(),
                json!({ "stream_id": e.stream, "length": f.len, "frame": frame_json(f), "conn": e.conn }),
            )
        }
        Kind::Unknown => return None,
        other => {
            let mut v = serde_json::to_value(other).ok()?;
            let o = v.as_object_mut()?;
            o.remove("type");
            o.insert("conn".into(), json!(e.conn));
            o.insert("stream_id".into(), json!(e.stream));
            (format!("h2probe:{}", other.name()), v)
        }
    };
    Some(json!({ "time": time, "name": name, "data": data }))
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
            w.write_all(&[RS])?;
            serde_json::to_writer(&mut w, &header)?;
            w.write_all(b"\n")?;
            outs[i] = Some((path, aside, w));
        }
        if let (Some(v), Some((path, _, w))) = (event_json(&e, origin), outs[i].as_mut()) {
            let res = (|| -> std::io::Result<()> {
                w.write_all(&[RS])?;
                serde_json::to_writer(&mut *w, &v)?;
                w.write_all(b"\n")
            })();
            res.with_context(|| format!("writing {}", path.display()))?;
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
