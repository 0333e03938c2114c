//! Everything `analyze` writes into a run directory, and the human headline.

use crate::analyze::{analyze_trace_with, Summary, Timeline};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// Writing a run's analysis products failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Open(#[from] crate::reader::OpenError),
    #[error("{path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error(transparent)]
    Plot(#[from] crate::plots::PlotError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |cause| ReportError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// Analyses `dir/trace.jsonl` and writes `summary.json`, `timeline.csv` and
/// the SVG plots next to it. Returns the summary and warnings.
pub fn write_products(dir: &Path) -> Result<(Summary, Vec<String>), ReportError> {
    let trace =
        crate::reader::trace_path(dir).ok_or_else(|| crate::reader::OpenError::NotARun {
            dir: dir.display().to_string(),
        })?;
    let wpath = dir.join("windows.csv");
    let wfile = std::fs::File::create(&wpath).map_err(io_err(&wpath))?;
    let a = analyze_trace_with(&trace, Some(Box::new(std::io::BufWriter::new(wfile))))?;
    if let Some(e) = a.window_log_error {
        return Err(io_err(&wpath)(e));
    }
    let path = dir.join("summary.json");
    let mut json = serde_json::to_string_pretty(&a.summary).expect("summary serializes");
    json.push('\n');
    std::fs::write(&path, json).map_err(io_err(&path))?;
    write_timeline_csv(&dir.join("timeline.csv"), &a.timeline)?;
    crate::plots::run_plots(dir, &a.timeline)?;
    Ok((a.summary, a.warnings))
}

/// One row per series point: `series,t_s,value,unit` (tidy, long format).
pub fn write_timeline_csv(path: &Path, tl: &Timeline) -> Result<(), ReportError> {
    let f = std::fs::File::create(path).map_err(io_err(path))?;
    let mut w = std::io::BufWriter::new(f);
    let rows: [(&str, &crate::series::Series, &str); 15] = [
        ("credit_stream_client", &tl.credit_stream_client, "bytes"),
        ("credit_conn_client", &tl.credit_conn_client, "bytes"),
        ("credit_conn_server", &tl.credit_conn_server, "bytes"),
        ("unreleased", &tl.unreleased, "bytes"),
        ("owned", &tl.owned_bytes, "bytes"),
        ("queue_depth", &tl.queue_depth, "messages"),
        ("scheduled", &tl.scheduled, "messages"),
        ("sent", &tl.sent, "messages"),
        ("completed", &tl.completed, "messages"),
        ("discarded", &tl.discarded, "messages"),
        ("window_blocked", &tl.window_blocked, "seconds"),
        ("socket_blocked", &tl.socket_blocked, "seconds"),
        ("window_update_bytes", &tl.window_update_bytes, "bytes"),
        ("window_updates", &tl.window_updates, "frames"),
        ("rss", &tl.rss, "bytes"),
    ];
    let res = (|| {
        writeln!(w, "series,t_s,value,unit,bucket_s")?;
        for (name, s, unit) in rows {
            let bucket = s.width_ns() as f64 / 1e9;
            for (t, v) in s.points() {
                writeln!(w, "{name},{t:.6},{v},{unit},{bucket}")?;
            }
        }
        w.flush()
    })();
    res.map_err(io_err(path))
}

/// A short, human-readable headline of a run.
pub fn headline(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "messages  scheduled {}  sent {}  decoded {}  completed {}  discarded {}  never-sent {}",
        s.scheduled, s.sent, s.decoded, s.completed, s.discarded, s.never_sent
    );
    let _ = writeln!(
        o,
        "rates     offered {:.1}/s  sent {:.1}/s  completed {:.1}/s  queue growth {:+.1} msg/s",
        s.offered_rate, s.send_rate, s.completion_rate, s.queue_growth_rate
    );
    let _ = writeln!(
        o,
        "peaks     queue {} msgs  owned {:.2} MiB  unreleased {} B",
        s.max_queue_depth,
        s.max_owned_bytes as f64 / 1048576.0,
        s.max_unreleased_bytes
    );
    let _ = writeln!(
        o,
        "client    window-blocked {:.2}s  socket-blocked {:.3}s  lateness p50 {:.1}ms p99 {:.1}ms  frame c2s latency p50 {:.3}ms",
        s.client_window_blocked_s,
        s.client_socket_blocked_s,
        s.lateness_ms.p50,
        s.lateness_ms.p99,
        s.c2s_frame_latency_ms.p50
    );
    let _ = writeln!(
        o,
        "wire      DATA in {} ({} B)  WINDOW_UPDATE out {} (stream mean +{:.0} B, {:.1} releases each, release→update p50 {:.2}ms p90 {:.2}ms)",
        s.data_frames_in,
        s.data_bytes_in,
        s.window_updates_out,
        s.window_update_increment.mean,
        s.coalescing_ratio,
        s.release_to_update_ms.p50,
        s.release_to_update_ms.p90
    );
    if s.queue_growth_in_window >= 1.0 {
        let _ = writeln!(
            o,
            "growth    from {:.1}s to {:.1}s the queue grew by {:.0} msgs while the server sent {} stream WINDOW_UPDATEs returning {:.2} MiB of credit",
            s.queue_growth_window_s.0,
            s.queue_growth_window_s.1,
            s.queue_growth_in_window,
            s.window_updates_in_growth_window,
            s.credit_returned_in_growth_window as f64 / 1048576.0
        );
    }
    let show = |m: &std::collections::BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rpcs = match (s.rpc_status.is_empty(), s.server_rpc_status.is_empty()) {
        (false, _) => show(&s.rpc_status),
        (true, false) => format!("{} (as the server answered)", show(&s.server_rpc_status)),
        (true, true) => "-".into(),
    };
    let _ = writeln!(o, "rpcs      {rpcs}");
    let mut failed = vec![];
    for (name, c) in &s.checks {
        if c.ok == Some(false) {
            failed.push(format!("{name}: {}", c.detail));
        }
    }
    if failed.is_empty() {
        let _ = writeln!(o, "checks    all invariants hold");
    } else {
        for f in failed {
            let _ = writeln!(o, "CHECK FAILED  {f}");
        }
    }
    o
}
