//! The analysis is defined on `t`, never on the order events reached the
//! file: a trace, its `t`-sorted copy and any reshuffle of it within the
//! reorder window give the same summary, byte for byte. The traces are the
//! committed reference runs (real recordings of both endpoints).

use h2probe_analysis::analyze::{analyze_trace, reorder::WINDOW_NS};
use h2probe_analysis::reader::{Ending, TraceReader};
use h2probe_analysis::schema::Event;
use std::io::Write;
use std::path::{Path, PathBuf};

fn reference(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../captures/reference")
        .join(name)
        .join("trace.jsonl.gz")
}

/// Header, events and footer of a trace.
fn read(path: &Path) -> (String, Vec<Event>, String) {
    let mut r = TraceReader::open(path).unwrap();
    let header = r.header().to_line();
    let events: Vec<Event> = r.by_ref().map(|e| e.unwrap()).collect();
    let footer = match r.ending() {
        Ending::Clean(f) => f.to_line(),
        other => panic!("{other:?}"),
    };
    (header, events, footer)
}

fn write(dir: &Path, name: &str, header: &str, events: &[Event], footer: &str) -> PathBuf {
    let path = dir.join(name);
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(w, "{header}").unwrap();
    for e in events {
        serde_json::to_writer(&mut w, e).unwrap();
        writeln!(w).unwrap();
    }
    writeln!(w, "{footer}").unwrap();
    w.flush().unwrap();
    path
}

fn summary_json(path: &Path) -> String {
    let a = analyze_trace(path).unwrap();
    assert_eq!(a.summary.out_of_order_events, 0, "{}", path.display());
    serde_json::to_string_pretty(&a.summary).unwrap()
}

/// xorshift64*: a fixed, seedable generator (no dependency needed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn a_trace_its_sorted_copy_and_reshuffles_within_the_window_analyse_the_same() {
    let dir = std::env::temp_dir().join(format!("h2probe-time-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["frame-unbounded", "frame-bounded32"] {
        let original = reference(name);
        let expected = summary_json(&original);
        let (header, events, footer) = read(&original);

        let mut sorted = events.clone();
        sorted.sort_by_key(|e| e.t);
        let p = write(&dir, "sorted.jsonl", &header, &sorted, &footer);
        assert_eq!(summary_json(&p), expected, "{name}: t-sorted copy");

        for seed in 1..=4u64 {
            // Each event moves by a random delay below the window: any
            // order this produces is one the recorder could have written.
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let jitter = WINDOW_NS / 2;
            let mut shuffled: Vec<(u64, Event)> = events
                .iter()
                .map(|e| (e.t + rng.next() % jitter, e.clone()))
                .collect();
            shuffled.sort_by_key(|(k, _)| *k);
            let shuffled: Vec<Event> = shuffled.into_iter().map(|(_, e)| e).collect();
            assert_ne!(shuffled, events, "the reshuffle changed the order");
            let p = write(&dir, "shuffled.jsonl", &header, &shuffled, &footer);
            assert_eq!(summary_json(&p), expected, "{name}: reshuffle, seed {seed}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Events later than the window (a client held up records the messages
/// that fell due meanwhile with the `t` they were due; a thread held up
/// between its clock read and the recorder) are put in their place by
/// sorting the trace whole: every figure is the original's, and the
/// summary counts them. Analysed out of place instead (as before), a
/// reshuffle by up to 2 s failed `credit` and `no_data_beyond_credit`
/// (exit 3) on a trace that had nothing wrong, and one release written
/// 300 ms late moved a headline percentile by 68 %.
#[test]
fn events_later_than_the_window_are_sorted_into_their_place() {
    let dir = std::env::temp_dir().join(format!("h2probe-late-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let original = reference("frame-unbounded");
    let expected = summary_json(&original);
    let (header, events, footer) = read(&original);
    let mut rng = Rng(7);
    let mut shuffled: Vec<(u64, Event)> = events
        .iter()
        .map(|e| (e.t + rng.next() % (8 * WINDOW_NS), e.clone()))
        .collect();
    shuffled.sort_by_key(|(k, _)| *k);
    let shuffled: Vec<Event> = shuffled.into_iter().map(|(_, e)| e).collect();
    let mut reversed = events.clone();
    reversed.reverse();
    for (how, order) in [("shuffled", shuffled), ("reversed", reversed)] {
        let p = write(&dir, "late.jsonl", &header, &order, &footer);
        let a = analyze_trace(&p).unwrap();
        let mut s = a.summary;
        assert_eq!(s.out_of_order_events, 0, "{how}");
        assert!(
            s.late_written_events > 100,
            "{how}: {}",
            s.late_written_events
        );
        let warning = s.warnings.pop().unwrap();
        assert!(
            warning.contains("too late for the 250 ms reorder window")
                && warning.contains("sorted whole"),
            "{how}: {warning}"
        );
        s.late_written_events = 0;
        assert_eq!(
            serde_json::to_string_pretty(&s).unwrap(),
            expected,
            "{how}: every figure is the original's"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
