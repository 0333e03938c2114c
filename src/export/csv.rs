//! Trace → tidy CSV: one file per event type (every type, with its header,
//! even when the run had no such event, so a notebook loads the same files
//! from every run), one row per event, fixed columns, plus `dtypes.json`:
//! the pandas dtype of every column of every file. Units: `t_ns`
//! CLOCK_MONOTONIC ns, `t_s` seconds since the trace origin, byte counts in
//! bytes, `*_ns` in nanoseconds. Columns are documented in docs/outputs.md.

use crate::trace::schema::{self, ColType, Endpoint, Kind};
use anyhow::Context as _;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Columns every file starts with, and their pandas dtypes. `conn_key`
/// (`CLIENT_PORT-SERVER_PORT`) names one connection the same way in both
/// taps' rows; it is empty for an event whose connection has no
/// `conn_open` in the trace (a listener event, or a trace cut at the start).
pub const COMMON: [(&str, &str); 6] = [
    ("t_ns", "int64"),
    ("t_s", "float64"),
    ("ep", "string"),
    ("conn", "int64"),
    ("conn_key", "string"),
    ("stream", "int64"),
];

/// A CSV field: plain for numbers and simple text, quoted otherwise; arrays
/// and objects as compact JSON. A field the trace omits because it holds
/// its default is written as that default.
fn field(v: Option<&serde_json::Value>, ty: ColType) -> String {
    use serde_json::Value;
    let s = match (v, ty) {
        (None | Some(Value::Null), ColType::IntOr(d)) => return d.to_string(),
        (None | Some(Value::Null), ColType::BoolOr(b)) => return b.to_string(),
        (None | Some(Value::Null), _) => return String::new(),
        (Some(Value::String(s)), _) => s.clone(),
        (Some(Value::Bool(b)), _) => b.to_string(),
        (Some(Value::Number(n)), _) => return n.to_string(),
        (Some(other), _) => other.to_string(),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// `{file stem: {column: pandas dtype}}` for every file [`export_csv`]
/// writes, as JSON (`csv/dtypes.json`).
pub fn dtypes_json() -> serde_json::Value {
    let mut files = serde_json::Map::new();
    for name in Kind::NAMES {
        let mut cols = serde_json::Map::new();
        for (c, d) in COMMON {
            cols.insert(c.into(), d.into());
        }
        for (c, ty) in Kind::columns(name).iter().zip(Kind::column_types(name)) {
            cols.insert((*c).into(), ty.pandas().into());
        }
        files.insert((*name).into(), cols.into());
    }
    files.into()
}

/// Each connection's `conn_key`, from the `conn_open` events (a first pass
/// over the trace, so events written before their `conn_open` get it too).
fn conn_keys(dir: &Path) -> anyhow::Result<HashMap<(Endpoint, u32), String>> {
    let (_, events) = super::run_events(dir)?;
    Ok(events
        .filter_map(|e| match &e.kind {
            Kind::ConnOpen(c) => {
                schema::conn_key(e.ep, &c.local, &c.peer).map(|k| ((e.ep, e.conn), k))
            }
            _ => None,
        })
        .collect())
}

/// Writes `csv/<type>.csv` for every event type and `csv/dtypes.json`.
/// Returns the paths.
pub fn export_csv(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let keys = conn_keys(dir)?;
    let (header, events) = super::run_events(dir)?;
    let origin = header.origin_mono_ns;
    // The directory is written aside (`.csv.partial`, see
    // h2probe_analysis::aside) and replaces `csv/` once whole: an
    // interrupted or failed export leaves the previous one.
    let final_dir = dir.join("csv");
    let aside = h2probe_analysis::aside::Aside::dir(&final_dir)
        .with_context(|| format!("creating {}", final_dir.display()))?;
    let out = aside.tmp().to_path_buf();
    let mut files: HashMap<&'static str, (PathBuf, std::io::BufWriter<std::fs::File>)> =
        HashMap::new();
    for name in Kind::NAMES {
        let path = out.join(format!("{name}.csv"));
        let f =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        let header: Vec<&str> = COMMON
            .iter()
            .map(|c| c.0)
            .chain(Kind::columns(name).iter().copied())
            .collect();
        writeln!(w, "{}", header.join(","))
            .with_context(|| format!("writing {}", path.display()))?;
        files.insert(name, (path, w));
    }
    for mut e in events {
        if matches!(e.kind, Kind::Unknown) {
            continue;
        }
        let name = e.kind.name();
        let (path, w) = files.get_mut(name).expect("every known type has a file");
        // A SETTINGS list is written from the event itself: as a `Value`
        // tree it took ≈ 16 bytes of memory a byte of the list (582 MB for
        // one 35 MB line).
        let settings = match &mut e.kind {
            Kind::Frame(f) => {
                // Not a column: its base64 need not become a value.
                f.payload = None;
                f.settings.take()
            }
            _ => None,
        };
        let v = serde_json::to_value(&e)?;
        // Fields are written as they are made: one row's text in a string
        // was another copy of a line that can be 64 MiB.
        let res = (|| -> std::io::Result<()> {
            write!(
                w,
                "{},{:.9},{},{},{},{}",
                e.t,
                e.t.saturating_sub(origin) as f64 / 1e9,
                e.ep.as_str(),
                e.conn,
                keys.get(&(e.ep, e.conn)).map_or("", |k| k.as_str()),
                e.stream
            )?;
            for (c, ty) in Kind::columns(name).iter().zip(Kind::column_types(name)) {
                w.write_all(b",")?;
                match (&settings, *c) {
                    // Pairs of numbers: their JSON holds commas from the
                    // first pair on, and never a quote.
                    (Some(list), "settings") => {
                        let q: &[u8] = if list.is_empty() { b"" } else { b"\"" };
                        w.write_all(q)?;
                        serde_json::to_writer(&mut *w, list)?;
                        w.write_all(q)?;
                    }
                    _ => w.write_all(field(v.get(*c), *ty).as_bytes())?,
                }
            }
            w.write_all(b"\n")
        })();
        res.with_context(|| format!("writing {}", path.display()))?;
    }
    let mut paths = vec![];
    for (_, (path, mut w)) in files {
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        paths.push(final_dir.join(path.file_name().expect("a file")));
    }
    let dpath = out.join("dtypes.json");
    let mut json = serde_json::to_string_pretty(&dtypes_json()).expect("a map serializes");
    json.push('\n');
    std::fs::write(&dpath, json).with_context(|| format!("writing {}", dpath.display()))?;
    aside
        .commit()
        .with_context(|| format!("writing {}", final_dir.display()))?;
    paths.sort();
    paths.push(final_dir.join("dtypes.json"));
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::schema::*;

    /// Every field an event serializes must have a column, so a schema change
    /// cannot silently drop data from the CSV.
    #[test]
    fn every_serialized_field_has_a_column() {
        let frame = FrameEv {
            dir: Dir::Out,
            offset: 1,
            frame: FrameType::HEADERS,
            flags: 0x28,
            len: 10,
            reserved: true,
            field_reserved: true,
            pad: 1,
            increment: Some(1),
            settings: Some(vec![(4, 1)]),
            error_code: Some(1),
            last_stream: Some(1),
            promised: Some(2),
            priority: Some(Priority::default()),
            opaque: Some(1),
            payload: None,
            payload_dropped: true,
        };
        let kinds = vec![
            Kind::Frame(frame),
            Kind::WireError(WireErrorEv {
                dir: Dir::In,
                offset: 1,
                error: "x".into(),
            }),
            Kind::SocketBlocked(IntervalEv {
                dir: Dir::Out,
                start: 1,
                open: true,
            }),
            Kind::ConnOpen(ConnOpenEv {
                local: "a".into(),
                peer: "b".into(),
            }),
            Kind::ConnClose(ConnCloseEv {
                error: "e".into(),
                bytes_in: 1,
                bytes_out: 2,
            }),
            Kind::RpcStart(RpcStartEv {
                path: "/p".into(),
                deadline_ns: Some(1),
                framing: Some("raw:4".into()),
                release: Some(crate::config::ReleasePoint::Decode),
                withhold_after: Some(1),
            }),
            Kind::RpcEnd(RpcEndEv {
                status: 0,
                message: "m".into(),
            }),
            Kind::Chunk(ChunkEv { len: 1 }),
            Kind::Release(ReleaseEv {
                bytes: 1,
                at: ReleasePoint::Frame,
                seq: Some(1),
            }),
            Kind::Decode(MsgEv {
                seq: 1,
                size: 2,
                framed: 7,
            }),
            Kind::Enqueue(EnqueueEv {
                seq: 1,
                depth: 1,
                queued_bytes: 1,
            }),
            Kind::Start(StartEv {
                seq: 1,
                worker: 0,
                wait_ns: 1,
                depth: 0,
            }),
            Kind::Complete(CompleteEv {
                seq: 1,
                worker: 0,
                service_ns: 1,
            }),
            Kind::Discard(DiscardEv {
                seq: 1,
                reason: DiscardReason::Deadline,
            }),
            Kind::Sample(SampleEv {
                depth: 1,
                queued_bytes: 1,
                owned_bytes: 1,
                unreleased: 1,
                used_capacity: 1,
                available_capacity: 1,
                rss_bytes: 1,
            }),
            Kind::Schedule(MsgEv {
                seq: 1,
                size: 2,
                framed: 7,
            }),
            Kind::Send(SendEv {
                seq: 1,
                scheduled: 1,
                begin: 1,
                bytes: 1,
            }),
            Kind::WindowBlocked(WindowBlockedEv {
                seq: 1,
                start: 1,
                open: true,
            }),
            Kind::NeverSent(NeverSentEv {
                seq: 1,
                reason: NeverSentReason::Backlog,
                count: 3,
            }),
            Kind::Handed(HandedEv {
                seq: 1,
                count: 3,
                from: 2,
            }),
            Kind::AcceptError(AcceptErrorEv {
                error: "Too many open files".into(),
            }),
            Kind::ConnRefused(ConnRefusedEv {
                peer: "127.0.0.1:1".into(),
                reason: "--max-connections 1 reached".into(),
            }),
            Kind::Stall(StallEv {
                timeout_ns: 2_000_000_000,
                pending: 3,
                conn_window: Some(65_535),
                streams: vec![StallStream {
                    conn: 2,
                    stream: 3,
                    unreleased: 65_535,
                    available: 0,
                }],
            }),
            Kind::Admission(AdmissionEv {
                seq: 1,
                id: 1,
                attempt: 1,
                deadline: 1,
                decision: Decision::Admitted,
                in_use: 1,
                slots: 32,
                wait_ns: 1,
                framed: 1,
            }),
            Kind::ServiceChange(ServiceChangeEv {
                service_ns: 1,
                step: 0,
            }),
            Kind::BodyDrop(Default::default()),
            Kind::Original(OriginalEv {
                id: 1,
                deadline: 1,
                pending: 1,
                outstanding: 1,
            }),
            Kind::Attempt(AttemptEv {
                id: 1,
                attempt: 2,
                seq: 1,
                scheduled: 1,
                deadline: 1,
                pending: 1,
                outstanding: 1,
            }),
            Kind::AttemptEnd(AttemptEndEv {
                id: 1,
                attempt: 1,
                seq: 1,
                result: AttemptResult::Completed,
                at: 1,
            }),
            Kind::OriginalEnd(OriginalEndEv {
                id: 1,
                state: OriginalState::Rejected,
                attempts: 1,
                reason: "no_retry".into(),
                latency_ns: Some(1),
                pending: 1,
                outstanding: 1,
            }),
        ];
        assert_eq!(kinds.len(), Kind::NAMES.len());
        for kind in kinds {
            let name = kind.name();
            let e = Event {
                t: 1,
                ep: Endpoint::Client,
                conn: 1,
                stream: 1,
                kind,
            };
            let v = serde_json::to_value(&e).unwrap();
            for key in v.as_object().unwrap().keys() {
                let known = ["t", "ep", "conn", "stream", "type", "payload"]
                    .contains(&key.as_str())
                    || Kind::columns(name).contains(&key.as_str());
                assert!(known, "{name}: field {key} has no CSV column");
            }
            // Every column's declared type fits the value the sample (all
            // optional fields set) serializes, so dtypes.json cannot lie.
            for (col, ty) in Kind::columns(name).iter().zip(Kind::column_types(name)) {
                let val = v.get(*col).unwrap_or_else(|| panic!("{name}.{col} absent"));
                let fits = match ty {
                    ColType::Int | ColType::IntOpt | ColType::IntOr(_) => val.is_i64(),
                    ColType::U64Opt => val.is_u64(),
                    ColType::BoolOr(_) => val.is_boolean(),
                    ColType::Text => val.is_string(),
                    ColType::Json => val.is_array() || val.is_object(),
                };
                assert!(fits, "{name}.{col}: {val} is not {ty:?}");
            }
        }
    }

    #[test]
    fn omitted_defaults_are_written_and_absent_options_are_empty() {
        assert_eq!(field(None, ColType::IntOr(1)), "1");
        assert_eq!(field(None, ColType::BoolOr(false)), "false");
        assert_eq!(field(None, ColType::IntOpt), "");
        assert_eq!(field(Some(&serde_json::json!(3)), ColType::IntOr(1)), "3");
    }

    #[test]
    fn dtypes_cover_every_file_and_column() {
        let d = dtypes_json();
        for name in Kind::NAMES {
            let cols = d[*name].as_object().unwrap();
            assert_eq!(cols.len(), COMMON.len() + Kind::columns(name).len());
        }
        assert_eq!(d["frame"]["increment"], "Int64");
        assert_eq!(d["frame"]["conn_key"], "string");
    }

    #[test]
    fn fields_are_quoted_only_when_needed() {
        let t = ColType::Text;
        assert_eq!(field(Some(&serde_json::json!("a,b")), t), "\"a,b\"");
        assert_eq!(
            field(Some(&serde_json::json!("say \"hi\"")), t),
            "\"say \"\"hi\"\"\""
        );
        assert_eq!(
            field(Some(&serde_json::json!([[4, 65535]])), ColType::Json),
            "\"[[4,65535]]\""
        );
        assert_eq!(field(Some(&serde_json::json!(12)), ColType::Int), "12");
        assert_eq!(field(None, t), "");
    }
}
