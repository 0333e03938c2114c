//! The parser against bytes nobody here wrote: every conversation in
//! `../shared/corpus`, fed in random splits, must yield exactly the frames an
//! independent parser (python-hyper's hyperframe) listed.

mod support;

use h2probe::wire::{Body, Parsed, Parser};
use serde_json::{json, Map, Value};
use support::{corpus_dir, random_splits, Rng};

/// Our frames in the reference list's JSON shape.
fn ours(bytes: &[u8], dir: &str, chunks: &[&[u8]]) -> Vec<Value> {
    let mut p = if dir == "c2s" {
        Parser::client_to_server()
    } else {
        Parser::server_to_client()
    };
    // The corpus peers advertise large frame sizes; the reference parser has no limit.
    p.set_max_frame_size(h2probe::wire::MAX_MAX_FRAME_SIZE);
    let mut out = vec![];
    let mut consumed = 0;
    for c in chunks {
        consumed += c.len();
        p.feed(c, |r| match r.unwrap_or_else(|e| panic!("{dir}: {e}")) {
            Parsed::Preface { .. } => {}
            Parsed::Frame(f) => {
                let mut ev = Map::new();
                ev.insert("dir".into(), json!(dir));
                ev.insert("offset".into(), json!(f.offset));
                ev.insert("type".into(), json!(f.head.ty().to_string()));
                ev.insert("flags".into(), json!(f.head.flags().0));
                ev.insert("stream".into(), json!(f.head.stream()));
                ev.insert("length".into(), json!(f.head.len()));
                match f.body {
                    Body::WindowUpdate { increment, .. } => {
                        ev.insert("increment".into(), json!(increment));
                    }
                    Body::Settings { .. } => {
                        let m: Map<String, Value> = f
                            .body
                            .settings()
                            .map(|s| (s.id.to_string(), json!(s.value)))
                            .collect();
                        ev.insert("settings".into(), Value::Object(m));
                    }
                    Body::Data { pad } => {
                        ev.insert("pad_length".into(), json!(pad.unwrap_or(0)));
                    }
                    Body::RstStream { error_code } | Body::GoAway { error_code, .. } => {
                        ev.insert("error_code".into(), json!(error_code));
                    }
                    _ => {}
                }
                out.push(Value::Object(ev));
            }
        });
    }
    assert_eq!(consumed, bytes.len());
    p.finish().unwrap();
    out
}

#[test]
fn corpus_frames_equal_the_reference_in_random_splits() {
    let Some(dir) = corpus_dir() else { return };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".frames.jsonl").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 4,
        "expected the four corpus conversations, found {names:?}"
    );
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut total = 0;
    for name in &names {
        let reference: Vec<Value> =
            std::fs::read_to_string(dir.join(format!("{name}.frames.jsonl")))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        for d in ["c2s", "s2c"] {
            let bytes = std::fs::read(dir.join(format!("{name}.{d}.bin"))).unwrap();
            let want: Vec<&Value> = reference.iter().filter(|v| v["dir"] == d).collect();
            let whole = ours(&bytes, d, &[&bytes]);
            assert_eq!(whole.len(), want.len(), "{name} {d}: frame count");
            for (i, (a, b)) in whole.iter().zip(&want).enumerate() {
                assert_eq!(&a, b, "{name} {d}: frame {i}");
            }
            for max in [1u64, 7, 100, 4096, 70_000] {
                let chunks = random_splits(&bytes, &mut rng, max);
                assert_eq!(
                    ours(&bytes, d, &chunks),
                    whole,
                    "{name} {d}: splits up to {max}"
                );
            }
            total += whole.len();
        }
    }
    assert!(total > 500, "only {total} frames checked");
}
