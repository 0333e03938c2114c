//! Everything `analyze` writes into a run directory, and the human headline.

use crate::analyze::{analyze_trace_with, Summary, Timeline};
use crate::aside::Aside;
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

/// A product written aside (see [`crate::aside`]): an `analyze` that fails
/// (a trace that cannot be read, a full disk) or is interrupted leaves the
/// previous file as it was, and no half-written one (a failed `analyze`
/// emptied windows.csv).
fn file_aside(path: &Path) -> Result<(Aside, std::fs::File), ReportError> {
    Aside::file(path).map_err(io_err(path))
}

/// Commits `products` together, their error said with the run's directory.
fn commit(dir: &Path, products: Vec<Aside>) -> Result<(), ReportError> {
    crate::aside::commit_together(products).map_err(io_err(dir))
}

/// Writes `bytes` to `path` whole or not at all (see [`crate::aside`]).
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    crate::aside::write_whole(path, bytes).map_err(io_err(path))
}

/// `bytes` written beside `path`, to be committed over it.
fn written_aside(path: &Path, bytes: &[u8]) -> Result<Aside, ReportError> {
    use std::io::Write as _;
    let (partial, mut file) = file_aside(path)?;
    file.write_all(bytes).map_err(io_err(path))?;
    Ok(partial)
}

/// How the run in `dir` ended, as its meta.json says: "" without one (a
/// trace copied alone is analysed as it is); one missing or that cannot be
/// read is said in `warnings`.
pub fn run_status_of(dir: &Path, warnings: &mut Vec<String>) -> String {
    let unknown = "the run's status and configuration are unknown; the figures are the trace's";
    match crate::meta::Meta::read(dir) {
        Ok(m) => m.status,
        Err(e) if dir.join("meta.json").exists() => {
            warnings.push(format!("{e}: {unknown}"));
            String::new()
        }
        Err(_) => {
            warnings.push(format!("no meta.json in {}: {unknown}", dir.display()));
            String::new()
        }
    }
}

/// Analyses `dir/trace.jsonl` and writes `summary.json`, `timeline.csv`,
/// `windows.csv`, the SVG plots and `report.html` (with the default frame
/// ladder) next to it. Returns the summary and warnings.
pub fn write_products(dir: &Path) -> Result<(Summary, Vec<String>), ReportError> {
    let trace =
        crate::reader::trace_path(dir).ok_or_else(|| crate::reader::OpenError::no_trace_in(dir))?;
    let wpath = dir.join("windows.csv");
    let (windows, wfile) = file_aside(&wpath)?;
    let a = analyze_trace_with(&trace, Some(wfile))?;
    if let Some(e) = a.window_log_error {
        return Err(io_err(&wpath)(e));
    }
    let mut summary = a.summary;
    let mut warnings = a.warnings;
    summary.run_status = run_status_of(dir, &mut warnings);
    // Written aside and committed together once all are whole: a failure
    // (a full disk) leaves the previous ones, which agree with each other
    // (a new summary.json beside an old report.html did not). The plots go
    // into a directory aside, which the report reads them from.
    let plots = Aside::dir(&dir.join("plots")).map_err(io_err(dir))?;
    let made = crate::plots::run_plots(plots.tmp(), &a.timeline)?;
    summary.plots = made.clone();
    let path = dir.join("summary.json");
    let mut json = serde_json::to_string_pretty(&summary).expect("summary serializes");
    json.push('\n');
    let summary_file = written_aside(&path, json.as_bytes())?;
    let timeline = timeline_aside(&dir.join("timeline.csv"), &a.timeline)?;
    let ladder = crate::ladder::LadderOpts {
        found: Some(a.slice),
        ..Default::default()
    };
    let mut page = crate::page::RunPage::read_with_plots(dir, plots.tmp(), &summary, &ladder);
    page.beside = crate::page::beside_in(dir, &["summary.json", "timeline.csv", "windows.csv"]);
    let page = page.html();
    let report = written_aside(&dir.join("report.html"), page.as_bytes())?;
    // A stacked-streams plot of an earlier analysis that this one did
    // not draw (one stream) goes.
    let stale = if made.iter().any(|n| n == "streams.svg") {
        vec![]
    } else {
        vec![dir.join("streams.svg")]
    };
    let plots = plots.move_files(made, stale);
    commit(dir, vec![windows, timeline, plots, report, summary_file])?;
    Ok((summary, warnings))
}

/// Writes the run's page (see [`crate::page`]) to `out`, or to
/// `dir/report.html`; returns the path written.
pub fn write_html(
    dir: &Path,
    summary: &Summary,
    ladder: &crate::ladder::LadderOpts,
    out: Option<&Path>,
) -> Result<std::path::PathBuf, ReportError> {
    let path = out.map_or_else(|| dir.join("report.html"), Path::to_path_buf);
    let html = crate::page::RunPage::read(dir, summary, ladder).html();
    write_whole(&path, html.as_bytes())?;
    Ok(path)
}

/// What a timeline series' value is, for a reader who pivots them together.
fn kind_of(m: crate::series::Merge) -> (&'static str, &'static str) {
    use crate::series::Merge;
    match m {
        Merge::Max => ("level", "max"),
        Merge::Min => ("level", "min"),
        Merge::Last => ("cumulative", "last"),
        Merge::Sum => ("per_bucket", "sum"),
    }
}

/// timeline.csv: one row per series, (connection, stream) and bucket (tidy,
/// long format), every series on one grid of one bucket width from 0 to the
/// end of the trace, so a pivot on `t_s` lines them up. Columns and units
/// are documented in docs/outputs.md.
pub fn write_timeline_csv(path: &Path, tl: &Timeline) -> Result<(), ReportError> {
    timeline_aside(path, tl)?.commit().map_err(io_err(path))
}

/// timeline.csv written beside `path`, to be committed over it.
fn timeline_aside(path: &Path, tl: &Timeline) -> Result<Aside, ReportError> {
    use crate::schema::Endpoint;
    use crate::series::Series;
    let (partial, f) = file_aside(path)?;
    let mut w = std::io::BufWriter::new(f);
    let rows: [(&str, &Series, &str); 19] = [
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
        ("h2_buffer_blocked", &tl.h2_buffer_blocked, "seconds"),
        ("not_open_blocked", &tl.not_open_blocked, "seconds"),
        ("socket_blocked", &tl.socket_blocked, "seconds"),
        ("window_update_bytes", &tl.window_update_bytes, "bytes"),
        ("window_updates", &tl.window_updates, "frames"),
        ("rss", &tl.rss, "bytes"),
        ("admitted_bytes", &tl.admitted_bytes, "bytes"),
        ("client_pending", &tl.client_pending, "originals"),
        ("client_outstanding", &tl.client_outstanding, "attempts"),
    ];
    let mut rows: Vec<(&str, &crate::series::Series, &str)> = rows.to_vec();
    if let Some(r) = &tl.relay {
        rows.extend([
            ("relay_withheld_conn_c2s", &r.conn_withheld_c2s, "bytes"),
            ("relay_withheld_conn_s2c", &r.conn_withheld_s2c, "bytes"),
        ]);
    }
    let key = |ep: Endpoint, conn: u32| tl.conn_keys.get(&(ep, conn)).cloned().unwrap_or_default();
    // (series, unit, conn_key, stream, data)
    let mut all: Vec<(String, &str, String, String, &Series)> = rows
        .iter()
        .map(|(n, s, u)| (n.to_string(), *u, String::new(), String::new(), *s))
        .collect();
    // The relay's one plotted stream, named by its client leg's key.
    if let Some(r) = &tl.relay {
        let (conn_key, stream) = r
            .plotted_stream
            .map_or_else(Default::default, |(conn, stream)| {
                (key(Endpoint::ClientLeg, conn), stream.to_string())
            });
        for (name, s) in [
            ("relay_withheld_stream_c2s", &r.stream_withheld_c2s),
            ("relay_withheld_stream_min_c2s", &r.stream_withheld_min_c2s),
        ] {
            all.push((name.into(), "bytes", conn_key.clone(), stream.clone(), s));
        }
    }
    for ((conn, stream), s) in &tl.stream_credit {
        all.push((
            "credit_stream_client".into(),
            "bytes",
            key(Endpoint::Client, *conn),
            stream.to_string(),
            s,
        ));
    }
    for ((ep, conn, stream), s) in &tl.stream_bytes {
        all.push((
            format!("data_c2s_{}", ep.as_str()),
            "bytes",
            key(*ep, *conn),
            stream.to_string(),
            s,
        ));
    }
    let width = all
        .iter()
        .map(|r| r.4.grid_width(tl.end_s))
        .max()
        .unwrap_or(1_000_000);
    let bucket_s = width as f64 / 1e9;
    let res = (|| {
        writeln!(w, "series,kind,agg,unit,conn_key,stream,t_s,bucket_s,value")?;
        for (name, unit, conn_key, stream, s) in &all {
            if s.is_empty() {
                continue;
            }
            let (kind, agg) = kind_of(s.merge());
            for (t, b) in s.coarsened(width).grid(tl.end_s) {
                if let Some(b) = b {
                    writeln!(
                        w,
                        "{name},{kind},{agg},{unit},{conn_key},{stream},{t:.6},{bucket_s},{}",
                        b.value
                    )?;
                }
            }
        }
        w.flush()
    })();
    res.map_err(io_err(path))?;
    drop(w);
    Ok(partial)
}

/// Milliseconds to one decimal, or to the µs below 0.95 ms, where one
/// decimal would print 0.0 (a sender that keeps up: `--rpc exchange`
/// lateness) or mix "0.004ms" with a 0.098 ms rounded to "0.1ms" on one line.
pub(crate) fn short_ms(v: f64) -> String {
    if v > 0.0 && v < 0.95 {
        format!("{v:.3}ms")
    } else {
        format!("{v:.1}ms")
    }
}

/// The Part 3 lines: useful completion first, then where every original
/// went, the attempt accounting, the completed cohorts per phase, and the
/// costs (server-owned payload, retry collisions, wire bytes).
/// `client`, `server`: whether the trace has that side's events (the
/// originals, attempts, completions and retries are the client's; R, the
/// slots and the admitted payload the server's): the other side's figures
/// are n/a, not zeros.
pub fn overload_lines(
    ov: &crate::analyze::overload::Overload,
    client: bool,
    server: bool,
) -> String {
    let mut o = String::new();
    if client {
        let _ = writeln!(
            o,
            "useful    U/N {}/{} = {}  {}",
            ov.on_time,
            ov.originals,
            or_na(ov.originals > 0, || format!(
                "{:.3} %",
                100.0 * ov.useful_fraction
            )),
            ov.other_ends()
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join("  ")
        );
    } else {
        let _ = writeln!(
            o,
            "useful    n/a: the originals and their ends are the client's, and the trace has no client events"
        );
    }
    let _ = writeln!(
        o,
        "attempts  N {}  F {}  A {}  S {}  R {}  slots ≤ {}",
        or_na(client, || format!(
            "{} ({:.1}/s)",
            ov.originals, ov.offered_rate
        )),
        or_na(client, || ov.first_attempts.to_string()),
        or_na(client, || format!(
            "{} ({} retries)",
            ov.attempts, ov.retries
        )),
        or_na(client, || ov.sent.to_string()),
        or_na(server, || ov.decoded.to_string()),
        or_na(server, || format!("{}/{}", ov.max_in_use, ov.slots)),
    );
    let phases: Vec<String> = ov
        .phases
        .iter()
        .map(|p| {
            let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3}s"));
            format!(
                "{} p50 {} p95 {} (n={})",
                p.phase,
                f(p.p50_s),
                f(p.p95_s),
                p.cohort
            )
        })
        .collect();
    let _ = writeln!(
        o,
        "latency   completed cohorts: {}",
        or_na(client, || phases.join("; "))
    );
    let _ = writeln!(
        o,
        "cost      admitted payload {}  client pending ≤ {} outstanding ≤ {}  retry collision {}  wire {} B/useful",
        or_na(server, || format!(
            "{:.3} MiB·s (peak {:.2} MiB)",
            ov.owned_mib_s,
            ov.owned_peak_bytes as f64 / 1048576.0
        )),
        or_na(client, || ov.pending_peak.to_string()),
        or_na(client, || ov.outstanding_peak.to_string()),
        if client {
            let c = &ov.collision;
            let m = crate::part3::collision_scope(c);
            c.fraction
                .map_or(format!("n/a ({m})"), |f| format!("{f:.5} of pairs ({m})"))
        } else {
            "n/a (retries are the client's)".to_string()
        },
        or_na(client, || ov
            .wire_bytes_per_useful
            .map_or("n/a".to_string(), |b| format!("{b:.0}"))),
    );
    o
}

/// " (N never resumed)" after a blocked time some of whose waits were
/// given up (a reset, a deadline, an interrupt, the recording's end).
fn open_at_end(s: &Summary, on: &str) -> String {
    match s.blocked_open_by.get(on) {
        Some(&n) if n > 0 => format!(" ({n} never resumed)"),
        _ => String::new(),
    }
}

/// What each side sent or wrote wrong, by who: the server's GOAWAY and
/// RST_STREAM error codes, the client's, a server that is not HTTP/2,
/// bytes a tap could not frame by who wrote them, and the rules frames
/// broke by who sent them. `None` when there were none.
fn errors_line(s: &Summary) -> Option<String> {
    // Each error its own field, the group named before its first.
    let list = |m: &mut dyn Iterator<Item = (&String, &u64)>| -> String {
        m.map(|(k, n)| format!("{k}×{n}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut fields = vec![];
    let server = list(
        &mut s
            .protocol_errors
            .iter()
            .filter(|(k, _)| !k.starts_with("wire_error")),
    );
    if !server.is_empty() {
        fields.push(format!("server sent {server}"));
    }
    if !s.client_answers.is_empty() {
        fields.push(format!(
            "client sent {}",
            list(&mut s.client_answers.iter())
        ));
    }
    // Not a frame gone wrong: the server is something else (its bytes).
    let not_http2: u64 = s
        .protocol_errors
        .iter()
        .filter(|(k, _)| k.starts_with("wire_error: not an HTTP/2"))
        .map(|(_, n)| n)
        .sum();
    if not_http2 > 0 {
        fields.push(format!("not an HTTP/2 server×{not_http2}"));
    }
    // Connections the server closed unserved: each `conn_refused` event
    // says why (a failed TLS handshake, --max-connections).
    if s.conns_refused > 0 {
        fields.push(format!("server refused connections×{}", s.conns_refused));
    }
    if s.wire_errors_by_writer.is_empty() && s.rules_broken.is_empty() && s.wire_errors > not_http2
    {
        // A summary from before the split by writer (and before rules).
        fields.push(format!("wire_error×{}", s.wire_errors - not_http2));
    }
    for (writer, &n) in &s.wire_errors_by_writer {
        let n = if writer == "server" {
            n.saturating_sub(not_http2)
        } else {
            n
        };
        if n > 0 {
            fields.push(format!("wire_error×{n} in the {writer}'s bytes"));
        }
    }
    fields.extend(by_who(&s.rules_broken, "broke: "));
    // Two spaces apart: a long line breaks between fields, not inside one.
    (!fields.is_empty()).then(|| fields.join("  "))
}

/// Counts keyed `"<who>: <what>"`, a field each, `did` between: `client:
/// DATA frame on stream 0` with `broke: ` → `client broke: DATA frame on
/// stream 0×1` (a key without a who, as it is).
fn by_who(counts: &std::collections::BTreeMap<String, u64>, did: &str) -> Vec<String> {
    counts
        .iter()
        .map(|(key, n)| match key.split_once(": ") {
            Some((who, what)) => format!("{who} {did}{what}×{n}"),
            None => format!("{key}×{n}"),
        })
        .collect()
}

/// A figure, or `n/a` when the trace lacks the side that measures it.
fn or_na(have: bool, f: impl FnOnce() -> String) -> String {
    if have {
        f()
    } else {
        "n/a".into()
    }
}

/// What the headline's lines fit: an 80-column terminal.
pub const HEADLINE_WIDTH: usize = 80;

/// A short, human-readable headline of a run, within [`HEADLINE_WIDTH`]
/// columns. Figures a one-sided trace cannot have print as `n/a`; the
/// checks line counts what holds, what failed and what cannot be judged
/// (and why).
pub fn headline(s: &Summary) -> String {
    fit_lines(&headline_lines(s), HEADLINE_WIDTH)
}

/// A field's words, a number's unit kept with it ("+32830 B" is one
/// piece: a line ending in a number and a line starting with "B" read as
/// two figures).
fn unit_glued_words(field: &str) -> Vec<String> {
    const UNITS: &[&str] = &[
        "B", "KiB", "MiB", "GiB", "kB", "MB", "GB", "B/s", "KiB/s", "MiB/s", "GiB/s", "MiB·s",
        "B/useful", "s", "ms", "µs", "ns", "msg/s", "msgs", "msg", "%",
    ];
    let mut out: Vec<String> = vec![];
    for word in field.split(' ').filter(|w| !w.is_empty()) {
        let bare = word.trim_end_matches([',', ';', ')', '.', ':']);
        let after_number = out
            .last()
            .is_some_and(|p| p.ends_with(|c: char| c.is_ascii_digit()));
        match out.last_mut() {
            Some(prev) if after_number && UNITS.contains(&bare) => {
                prev.push(' ');
                prev.push_str(word);
            }
            _ => out.push(word.to_string()),
        }
    }
    out
}

/// The completion rate, with how many completions over how long when they
/// span less than half the trace (a stalled run's dozen completions in
/// 47 ms read as 231/s on their own). The span is the rate's own: (n − 1)
/// ÷ rate = last `complete` − first `start`.
pub(crate) fn completed_text(s: &Summary) -> String {
    let rate = format!("{:.1}/s", s.completion_rate);
    if s.completed < 2 || s.completion_rate <= 0.0 {
        return rate;
    }
    let span = (s.completed - 1) as f64 / s.completion_rate;
    if span >= s.span_s / 2.0 {
        return rate;
    }
    format!(
        "{rate} ({} in {}s)",
        s.completed,
        crate::stats::trimmed(span, 3)
    )
}

/// Lines wider than `width` terminal columns continue on lines indented like their text
/// (under the 10-column label), broken between fields (two spaces) where
/// possible, else between words (a number and its unit count as one). A
/// word, or a number with its unit, longer than a line stays whole.
pub fn fit_lines(text: &str, width: usize) -> String {
    let mut o = String::new();
    for line in text.lines() {
        if crate::compare::columns(line) <= width {
            o.push_str(line);
            o.push('\n');
            continue;
        }
        // "label     text": continuation lines start under the text.
        let indent = line
            .char_indices()
            .find(|&(i, c)| i > 0 && c != ' ' && line[..i].ends_with("  "))
            .map_or(2, |(i, _)| line[..i].chars().count())
            .min(width / 2);
        let pad = " ".repeat(indent);
        let (head, body) = line.split_at(
            line.char_indices()
                .nth(indent)
                .map_or(line.len(), |(i, _)| i),
        );
        let mut cur = head.to_string();
        let mut fresh = true; // nothing after the label or indent yet
        let mut push = |cur: &mut String, piece: &str, sep: &str, fresh: &mut bool| {
            let room = crate::compare::columns(cur) + sep.len() + crate::compare::columns(piece);
            if !*fresh && room > width {
                o.push_str(cur.trim_end());
                o.push('\n');
                *cur = pad.clone();
                *fresh = true;
            }
            if !*fresh {
                cur.push_str(sep);
            }
            cur.push_str(piece);
            *fresh = false;
        };
        for field in body.split("  ").filter(|f| !f.is_empty()) {
            if indent + crate::compare::columns(field) <= width {
                push(&mut cur, field, "  ", &mut fresh);
            } else {
                let mut first = true;
                for word in unit_glued_words(field) {
                    push(&mut cur, &word, if first { "  " } else { " " }, &mut fresh);
                    first = false;
                }
            }
        }
        o.push_str(cur.trim_end());
        o.push('\n');
    }
    o
}

fn headline_lines(s: &Summary) -> String {
    let (c, sv) = (s.has_client, s.has_server);
    let mut o = String::new();
    if s.trace_ending == "none" {
        let _ = writeln!(
            o,
            "trace     none recorded (--no-trace): the endpoints ran without the recorder; nothing to analyse"
        );
        return o;
    }
    if s.run_status == "interrupted" {
        let _ = writeln!(
            o,
            "status    interrupted (Ctrl-C or a signal): the run directory is complete, the run is not"
        );
    } else if let Some(err) = s.run_status.strip_prefix("error: ") {
        let _ = writeln!(o, "status    error: {err}");
    }
    if s.trace_ending != "clean" && !s.trace_ending.is_empty() {
        let _ = writeln!(
            o,
            "trace     {}: analysed up to the last complete event; checks that need the rest cannot be judged",
            match s.trace_ending.as_str() {
                "no_footer" => "cut short (no footer)".to_string(),
                other => format!("cut short ({other})"),
            }
        );
    }
    if let Some(e) = &s.read_error {
        let _ = writeln!(
            o,
            "trace     failed as read ({e}): a compressed file's bytes may be wrong anywhere before that, checks cannot be judged"
        );
    } else if let Some(why) = s.lines_altered() {
        let _ = writeln!(
            o,
            "trace     altered: {why}; figures are the lines present, checks cannot be judged"
        );
    } else if let Some(line) = s.after_footer_line {
        let _ = writeln!(
            o,
            "trace     goes on after its footer (line {line}), unread: figures are those before it, checks cannot be judged"
        );
    } else if s.corrupt_lines > 0 {
        let _ = writeln!(
            o,
            "trace     damaged: {} corrupt line{} skipped ({}line {}), an event lost each; only failures settled before the first are judged",
            s.corrupt_lines,
            if s.corrupt_lines == 1 { "" } else { "s" },
            if s.corrupt_lines == 1 { "" } else { "the first at " },
            s.first_corrupt_line.map_or("?".to_string(), |l| l.to_string())
        );
    }
    if s.payload_dropped_frames > 0 {
        let _ = writeln!(
            o,
            "trace     {} frames without payload ({} B, --trace-payload-buffer or --trace-limit)",
            s.payload_dropped_frames, s.payload_dropped_bytes
        );
    }
    if let Some(r) = &s.relay {
        // The client's own record of its credit waits, when its trace is
        // merged in: beside the relay's inference of the same waits.
        let own = (s.has_client && s.window_blocked_ms.count > 0)
            .then_some((s.client_window_blocked_s, s.window_blocked_ms.count));
        let client_streams: u64 = s.rpc_status.values().sum();
        relay_lines(&mut o, r, own, client_streams);
        if !c && !sv {
            // A relay alone: the probe endpoints' figures do not exist, and
            // the rules broken are the legs' to name.
            let mut fields = by_who(&r.answers, "sent ");
            fields.extend(by_who(&r.rules_broken, "broke: "));
            if !fields.is_empty() {
                let _ = writeln!(o, "errors    {}", fields.join("  "));
            }
            let _ = write!(o, "{}", checks_lines(&s.checks));
            return o;
        }
    } else if !c && !sv {
        // Nothing from either endpoint (a client that never connected, a
        // server nobody called): eight lines of n/a under one side's
        // labels would say less than this.
        let _ = writeln!(
            o,
            "events    none: the trace holds no event of a client, a server or a relay (no connection), so there are no figures"
        );
        let _ = write!(o, "{}", checks_lines(&s.checks));
        return o;
    }
    if let Some(ov) = &s.overload {
        o.push_str(&overload_lines(ov, c, sv));
    }
    let _ =
        writeln!(
        o,
        "messages  {}scheduled {}  sent {}  decoded {}  completed {}  discarded {}  never-sent {}{}",
        // Part 3 counts originals above; these count every attempt.
        if s.overload.is_some() { "(every attempt) " } else { "" },
        or_na(c, || s.scheduled.to_string()),
        or_na(c, || s.sent.to_string()),
        or_na(sv, || s.decoded.to_string()),
        or_na(sv, || s.completed.to_string()),
        or_na(sv, || s.discarded.to_string()),
        or_na(c, || never_sent_text(s)),
        handed_text(s),
    );
    if let Some(u) = &s.unpaired {
        let mut parts = vec![];
        if u.server_connections > 0 {
            parts.push(format!(
                "{} no client connection pairs with (decoded {})",
                counted(u.server_connections, "server connection"),
                u.decoded
            ));
        }
        if u.client_connections > 0 {
            parts.push(format!(
                "{} no server connection pairs with (sent {})",
                counted(u.client_connections, "client connection"),
                u.sent
            ));
        }
        let _ = writeln!(
            o,
            "unpaired  {}: counted above, left out of the accounting across sides",
            parts.join(", ")
        );
    }
    // Part 3: attempts initiated (the originals' rate is on `attempts`), and
    // no queue growth: under an admission bound the queue cannot grow past
    // its slots, so its slope says nothing about held work.
    let growth = match s.overload {
        Some(_) => String::new(),
        None => format!(
            "  queue growth {}",
            or_na(c && sv, || format!(
                "{:+.1} msg/s",
                crate::stats::rounded_zero(s.queue_growth_rate, 1)
            ))
        ),
    };
    let _ = writeln!(
        o,
        "rates     {} {}  sent {} (steady {})  completed {}{growth}",
        if s.overload.is_some() {
            "attempts"
        } else {
            "offered"
        },
        or_na(c, || format!("{:.1}/s", s.offered_rate)),
        or_na(c, || format!("{:.1}/s", s.send_rate)),
        or_na(c, || format!("{:.1}/s", s.send_rate_steady)),
        or_na(sv, || completed_text(s)),
    );
    // Peaks are of the server as a whole: with several RPCs, the sum of
    // those open at one instant (a per-RPC reading of 2 × 65,535 B
    // unreleased would exceed the window). Not "of N RPCs": a run of 900
    // unary calls one at a time read "sum of 900 RPCs".
    let rpcs: u64 = s.server_rpc_status.values().sum();
    let _ = writeln!(
        o,
        "peaks     queue {}  owned {}  unreleased {}{}",
        or_na(sv, || counted(s.max_queue_depth, "msg")),
        or_na(sv, || format!(
            "{:.2} MiB",
            s.max_owned_bytes as f64 / 1048576.0
        )),
        or_na(sv, || format!("{} B", s.max_unreleased_bytes)),
        if sv && rpcs > 1 {
            "  (open RPCs summed)".to_string()
        } else {
            String::new()
        },
    );
    let _ = writeln!(
        o,
        "client    blocked: window {}{}  h2 buffer {}{}{}  socket {}{}  lateness p50 {} p99 {}{}  frame c2s latency p50 {}",
        or_na(c, || format!("{:.2}s", s.client_window_blocked_s)),
        open_at_end(s, "window"),
        or_na(c, || format!("{:.2}s", s.client_h2_buffer_blocked_s)),
        open_at_end(s, "h2_buffer"),
        // Shown when it happened: a stream h2 held pending open.
        if c && s.not_open_blocked_ms.count > 0 {
            format!(
                "  stream not open {:.2}s{}",
                s.client_not_open_blocked_s,
                open_at_end(s, "not_open")
            )
        } else {
            String::new()
        },
        or_na(c, || format!("{:.3}s", s.client_socket_blocked_s)),
        open_at_end(s, "socket"),
        or_na(c && s.lateness_ms.count > 0, || short_ms(s.lateness_ms.p50)),
        or_na(c && s.lateness_ms.count > 0, || short_ms(s.lateness_ms.p99)),
        // A unary call's latency, as its caller sees it.
        if c && s.unary && s.call_ms.count > 0 {
            format!(
                "  calls p50 {} p99 {}  response p50 {} p99 {}",
                short_ms(s.call_ms.p50),
                short_ms(s.call_ms.p99),
                short_ms(s.response_ms.p50),
                short_ms(s.response_ms.p99)
            )
        } else {
            String::new()
        },
        if c && sv && s.c2s_frame_latency_ms.count == 0 && s.relay.is_some() {
            // Merged through a relay: each tap is on its own socket, so no
            // frame is seen leaving one tap and reaching the other.
            "n/a (the taps are on two sockets, the relay's)".to_string()
        } else {
            or_na(c && sv && s.c2s_frame_latency_ms.count > 0, || {
                format!("{:.3}ms", s.c2s_frame_latency_ms.p50)
            })
        },
    );
    if c && !sv {
        // A client alone (e.g. against a foreign server): the wire as its
        // own tap saw it, and which figures only the server's trace has.
        let _ = writeln!(
            o,
            "wire      DATA out {} ({} B)  WINDOW_UPDATE in {}  lowest send window {}",
            s.data_frames_out,
            s.data_bytes_out,
            // "stream 449" read as stream id 449 (and "stream 0, mean +0 B"
            // as an update on stream 0): the counts add up, said so.
            if s.window_updates_in_stream > 0 {
                format!(
                    "{} = {} stream + {} conn (stream mean +{:.0} B)",
                    s.window_updates_in,
                    s.window_updates_in_stream,
                    s.window_updates_in_conn,
                    s.window_update_in_increment.mean
                )
            } else {
                format!(
                    "{} (none at stream level; connection {})",
                    s.window_updates_in, s.window_updates_in_conn
                )
            },
            s.min_send_window
                .map_or("n/a".to_string(), |w| format!("{w} B")),
        );
        let _ = writeln!(
            o,
            "needs     the server's trace: decoded, completed, discarded, queue, owned, unreleased, \
             release→update latency, frame c2s latency (trace the server with `h2probe serve` \
             and join the runs with `h2probe merge`)"
        );
    } else {
        let _ = writeln!(
            o,
            "wire      DATA in {}  WINDOW_UPDATE out {}",
            or_na(sv, || format!(
                "{} ({} B)",
                s.data_frames_in, s.data_bytes_in
            )),
            or_na(sv, || {
                let latency = if s.release_to_update_ms.count > 0 {
                    format!(
                        "p50 {:.2}ms p90 {:.2}ms",
                        s.release_to_update_ms.p50, s.release_to_update_ms.p90
                    )
                } else {
                    "n/a".to_string()
                };
                // Without a stream-level update there is no mean to give
                // (large windows: the connection's updates carry it all).
                let stream = if s.window_update_increment.count > 0 {
                    format!(
                        "stream mean +{:.0} B, {:.1} releases each",
                        s.window_update_increment.mean, s.coalescing_ratio
                    )
                } else {
                    "none at stream level".to_string()
                };
                format!(
                    "{} ({stream}, release→update {latency})",
                    s.window_updates_out,
                )
            }),
        );
    }
    if let Some(line) = errors_line(s) {
        let _ = writeln!(o, "errors    {line}");
    }
    if s.queue_grows_on_credit() {
        let _ = writeln!(
            o,
            "growth    from {:.1}s to {:.1}s the queue grew by {} while the server sent {} returning {:.2} MiB of credit",
            s.queue_growth_window_s.0,
            s.queue_growth_window_s.1,
            counted(s.queue_growth_in_window.round() as u64, "msg"),
            counted(s.window_updates_in_growth_window, "stream WINDOW_UPDATE"),
            s.credit_returned_in_growth_window as f64 / 1048576.0
        );
    }
    // Summaries written before `stream_count` listed every stream.
    let count = s.stream_count.max(s.streams.len() as u64);
    if count >= 2 {
        let of = match s.stream_fairness_basis.as_deref() {
            Some("bytes_per_offered") => "bytes ÷ offered",
            Some(_) => "bytes",
            None if s.streams.iter().all(|f| f.offered_bytes.is_some()) => "bytes ÷ offered",
            None => "bytes",
        };
        let carried = match s.streams_without_data {
            0 => "carried DATA".to_string(),
            n => format!("offered DATA, {n} of them carried none"),
        };
        let mut line = if s.unary {
            // One message a stream, offered per connection: no stream has a
            // share or a demand of its own.
            format!("streams   {count} {carried}: unary calls, one message each (fairness and starvation not judged)")
        } else {
            format!(
                "streams   {count} {carried}; fairness {} (Jain's index of {of}; 1 = equal{})",
                s.stream_fairness
                    .map_or("n/a".to_string(), |f| format!("{f:.2}")),
                if s.stall_cause.is_some() {
                    ", up to the first stall"
                } else {
                    ""
                }
            )
        };
        if of == "bytes" && !s.unary {
            line.push_str("; starvation not judged: not every stream's demand (the client's schedule) is in the trace");
        }
        if !s.starved_streams.is_empty() {
            line.push_str(&format!(
                "; STARVED (< 10 % of a fair share): {}{}",
                s.starved_streams.join(", "),
                if s.starved_streams_truncated {
                    " and maybe more (only the least served are kept)"
                } else {
                    ""
                }
            ));
        }
        if s.client_blocked_conn_window_s > 0.0 || s.client_blocked_stream_window_s > 0.0 {
            line.push_str(&format!(
                "; window-blocked on the connection window {:.2}s, on own stream windows {:.2}s",
                s.client_blocked_conn_window_s, s.client_blocked_stream_window_s
            ));
        }
        let _ = writeln!(o, "{line}");
    }
    if let Some(cause) = &s.stall_cause {
        // The cause names the problem; the description is in the check.
        let _ = writeln!(
            o,
            "stall     {} stall(s); first cause: {cause} (described under the no_stall check)",
            s.stalls
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
        // A cut trace, or one side that never saw an RPC end ("-" said
        // nothing a reader could look up).
        (true, true) => "none ended in this trace".into(),
    };
    let _ = writeln!(o, "rpcs      {rpcs}");
    let _ = write!(o, "{}", checks_lines(&s.checks));
    o
}

/// `n` and `what`, plural unless `n` is 1 ("1 frame", "2 frames").
pub fn counted(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A latency given in ms, as the relay line prints it: µs below 1 ms.
fn micros(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.1}µs", ms * 1e3)
    }
}

/// The relay's lines: what crossed it, and per data flow the receiver's
/// credit behaviour and the sender's credit waits.
fn relay_lines(
    o: &mut String,
    r: &crate::analyze::RelaySummary,
    client_own: Option<(f64, u64)>,
    client_streams: u64,
) {
    let closed: u64 = r.close_reasons.values().sum();
    let _ = writeln!(
        o,
        "relay     {} ({} refused, {} closed with a reason), {} forwarded unchanged{}; read→write in the relay {}",
        counted(r.connections, "connection pair"),
        r.refused,
        counted(closed, "leg"),
        counted(r.frames_forwarded, "frame"),
        if r.frames_differing + r.frames_unforwarded > 0 {
            format!(
                ", {} DIFFERING, {} NOT FORWARDED",
                r.frames_differing, r.frames_unforwarded
            )
        } else {
            String::new()
        },
        if r.c2s.relay_latency_ms.count + r.s2c.relay_latency_ms.count > 0 {
            // A direction no frame crossed has no latency (n/a, not 0).
            let (c, s) = (&r.c2s.relay_latency_ms, &r.s2c.relay_latency_ms);
            let at = |d: &crate::stats::Distribution, q: f64| {
                if d.count > 0 {
                    micros(q)
                } else {
                    "n/a".to_string()
                }
            };
            format!(
                "p50 c2s {} s2c {} (p99 {} / {})",
                at(c, c.p50),
                at(s, s.p50),
                at(c, c.p99),
                at(s, s.p99),
            )
        } else {
            "n/a (no frame crossed)".to_string()
        },
    );
    if let (n @ 1.., Some(c)) = (r.streams_cut, &r.first_cut) {
        let _ = writeln!(
            o,
            "cut       {} open when {} connection closed (no END_STREAM both ways, no RST_STREAM; first: {}/{} at {:.3}s)",
            counted(n, "stream"),
            if n == 1 { "its" } else { "their" },
            c.conn,
            c.stream,
            c.t_s
        );
    }
    if closed > 0 {
        let list: Vec<String> = r
            .close_reasons
            .iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect();
        let _ = writeln!(o, "closed    {}", list.join(", "));
    }
    for (name, f, sender, receiver) in [
        ("c2s", &r.c2s, "client", "server"),
        ("s2c", &r.s2c, "server", "client"),
    ] {
        if f.data_frames == 0 {
            continue;
        }
        if f.window_updates_stream + f.window_updates_conn + f.exhausted_intervals == 0 {
            let _ = writeln!(
                o,
                "{name}       DATA {} ({} B); no WINDOW_UPDATE from the {receiver}, no credit wait",
                counted(f.data_frames, "frame"),
                f.data_bytes
            );
            continue;
        }
        // Figures of distributions with no sample are n/a, not 0.
        let stream_updates = if f.window_updates_stream == 0 {
            "0 stream".to_string()
        } else {
            format!(
                "{} stream (+{:.0} B p50, every {} p50, {:.1} per MiB)",
                f.window_updates_stream,
                f.update_increment_stream.p50,
                if f.update_gap_stream_ms.count > 0 {
                    format!("{:.2}ms", f.update_gap_stream_ms.p50)
                } else {
                    "n/a".to_string()
                },
                f.updates_per_mib,
            )
        };
        let conn_updates = if f.window_updates_conn == 0 {
            "0 connection".to_string()
        } else {
            format!(
                "{} connection (+{:.0} B p50)",
                f.window_updates_conn, f.update_increment_conn.p50
            )
        };
        let _ = writeln!(
            o,
            "{name}       DATA {} ({} B); {receiver}'s WINDOW_UPDATEs: {stream_updates}, {conn_updates}",
            counted(f.data_frames, "frame"),
            f.data_bytes,
        );
        let frames = |b: f64| b / f64::from(f.max_data_frame.max(1));
        let verdict = match f.credit_release.as_str() {
            "on_receipt" => format!(
                "the {receiver} returns credit ON RECEIPT: after each stream WINDOW_UPDATE it still holds p50 {:.0} B (< half a {}-B frame), p90 {:.0} B",
                f.withheld_after_update.p50, f.max_data_frame, f.withheld_after_update.p90
            ),
            "after_receipt" => format!(
                "the {receiver} HOLDS credit after receipt: after each stream WINDOW_UPDATE it still holds p50 {:.0} B ({:.1} frames of {} B), p90 {:.0} B",
                f.withheld_after_update.p50,
                frames(f.withheld_after_update.p50),
                f.max_data_frame,
                f.withheld_after_update.p90
            ),
            _ => format!("the {receiver} sent too few stream WINDOW_UPDATEs to tell when it returns credit"),
        };
        let _ = writeln!(
            o,
            "credit    {verdict}; withheld peak stream {} B, connection {} B",
            f.max_withheld_stream_bytes, f.max_withheld_conn_bytes
        );
        let _ = writeln!(
            o,
            "waits     the {sender} had an open stream and no credit {:.3}s{} in {}{}; inferred waiting (it sent more DATA after the credit) {:.3}s in {}{}",
            f.exhausted_s,
            if r.connections > 1 {
                " (summed over connections)"
            } else {
                ""
            },
            counted(f.exhausted_intervals, "interval"),
            if f.exhausted_open > 0 {
                format!(" ({} open at the end)", f.exhausted_open)
            } else {
                String::new()
            },
            f.inferred_blocked_s,
            f.inferred_blocked_intervals,
            if f.resume_after_credit_ms.count > 0 {
                format!(
                    ", resumed p50 {:.3}ms after the credit",
                    f.resume_after_credit_ms.p50
                )
            } else {
                String::new()
            },
        );
        if let (Some((secs, waits)), "client") = (client_own, sender) {
            let _ = writeln!(
                o,
                "          the client's own record (its trace): window-blocked {secs:.3}s in {}{}",
                counted(waits, "wait"),
                // The relay's intervals are per connection; the client's
                // waits per stream: with several streams they add up.
                if client_streams > 1 {
                    " (summed over its streams: not comparable)"
                } else {
                    ""
                }
            );
        }
    }
}

/// A unary run's messages that replaced connections handed over, sent
/// (or not) on their replacements: "  handed-over 36" (none: nothing).
fn handed_text(s: &Summary) -> String {
    if s.handed_over == 0 && s.handed_in == 0 {
        return String::new();
    }
    if s.handed_over == s.handed_in {
        format!("  handed-over {}", s.handed_over)
    } else {
        format!("  handed-over {} (taken {})", s.handed_over, s.handed_in)
    }
}

/// `never_sent`, with its reasons when there are any: "36 (behind 36)".
fn never_sent_text(s: &Summary) -> String {
    if s.never_sent == 0 {
        return "0".into();
    }
    let why: Vec<String> = s
        .never_sent_by_reason
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    format!("{} ({})", s.never_sent, why.join(", "))
}

/// `checks    5 hold, 1 cannot be judged (name: why)`, then one line per
/// failed check.
fn checks_lines(checks: &std::collections::BTreeMap<String, crate::analyze::Check>) -> String {
    let mut o = String::new();
    let held = checks.values().filter(|c| c.ok == Some(true)).count();
    let failed: Vec<_> = checks.iter().filter(|(_, c)| c.ok == Some(false)).collect();
    let unknown: Vec<_> = checks.iter().filter(|(_, c)| c.ok.is_none()).collect();
    let mut line = if failed.is_empty() && unknown.is_empty() {
        "all invariants hold".to_string()
    } else {
        format!("{held} hold")
    };
    if !failed.is_empty() {
        line.push_str(&format!(", {} FAILED", failed.len()));
    }
    if !unknown.is_empty() {
        // One reason per distinct cause, naming the checks it applies to.
        let mut causes: Vec<(String, Vec<&str>)> = vec![];
        for (name, c) in &unknown {
            match causes.iter_mut().find(|(d, _)| *d == c.detail) {
                Some((_, names)) => names.push(name),
                None => causes.push((c.detail.clone(), vec![name])),
            }
        }
        let why: Vec<String> = causes
            .iter()
            .map(|(d, names)| format!("{}: {}", names.join(", "), brief(d, names)))
            .collect();
        line.push_str(&format!(
            ", {} cannot be judged ({})",
            unknown.len(),
            why.join("; ")
        ));
    }
    let _ = writeln!(o, "checks    {line}");
    for (name, c) in failed {
        let at = match (c.first_t_s, c.first_line) {
            (Some(t), Some(l)) => format!(" [first at {t:.3}s, trace line {l}]"),
            _ => String::new(),
        };
        let _ = writeln!(o, "CHECK FAILED  {name}: {}{at}", c.detail);
    }
    o
}

/// Longer than this, a reason a check cannot judge is given on the checks
/// line by its lead clause only.
const BRIEF_REASON: usize = 200;

/// A check's reason for the checks line: whole, or when long its lead
/// clause (up to its first ": ") and where the rest is. The accounting's,
/// listing the connections nothing pairs with, took eight lines there.
fn brief(detail: &str, names: &[&str]) -> String {
    match detail.find(": ") {
        Some(end) if detail.chars().count() > BRIEF_REASON => {
            let whole = names
                .iter()
                .map(|n| format!("checks.{n}"))
                .collect::<Vec<_>>()
                .join(", ");
            // A parenthesis the lead clause opened is closed.
            let lead = &detail[..end];
            let open = lead.matches('(').count();
            let unclosed = open.saturating_sub(lead.matches(')').count());
            format!(
                "{lead}{} (whole in summary.json {whole})",
                ")".repeat(unclosed)
            )
        }
        _ => detail.to_string(),
    }
}

/// The more serious of two exit codes: a failed check (3) above an
/// interruption (130) above a non-OK RPC (4) above success.
pub fn worst_exit(a: i32, b: i32) -> i32 {
    let rank = |c| match c {
        3 => 3,
        130 => 2,
        4 => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// The exit code a run or an analysis ends with (documented in `--help` and
/// the README): 3 a check failed; 130 the run was interrupted (its directory
/// is still complete; only for the command that ran it, `live`); 4 an RPC
/// ended with a status other than OK; 0 else.
pub fn exit_code(s: &Summary, live: bool) -> i32 {
    if s.checks.values().any(|c| c.ok == Some(false)) {
        3
    } else if live && s.run_status == "interrupted" {
        130
    } else if s
        .rpc_status
        .keys()
        .chain(s.server_rpc_status.keys())
        .any(|k| k != "OK")
    {
        4
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headline's small texts: waits never resumed, errors by who,
    /// units kept with their numbers, a completion rate's span, and lines
    /// broken only past the width.
    #[test]
    fn the_headlines_small_texts_count_what_they_say() {
        let s = Summary {
            blocked_open_by: [("window".into(), 0), ("socket".into(), 2)].into(),
            ..Summary::default()
        };
        assert_eq!(open_at_end(&s, "socket"), " (2 never resumed)");
        assert_eq!(open_at_end(&s, "window"), "");
        assert_eq!(open_at_end(&s, "conn"), "");

        assert_eq!(errors_line(&Summary::default()), None);
        let not_h2 = "wire_error: not an HTTP/2 server (HTTP/1.1 reply)".to_string();
        let s = Summary {
            protocol_errors: [(not_h2.clone(), 1), ("GOAWAY PROTOCOL_ERROR".into(), 2)].into(),
            conns_refused: 1,
            wire_errors: 4,
            wire_errors_by_writer: [("server".into(), 3), ("client".into(), 1)].into(),
            ..Summary::default()
        };
        assert_eq!(
            errors_line(&s).unwrap(),
            "server sent GOAWAY PROTOCOL_ERROR×2  not an HTTP/2 server×1  \
             server refused connections×1  wire_error×1 in the client's bytes  \
             wire_error×2 in the server's bytes"
        );
        // The server's only wire error is its not being HTTP/2.
        let s = Summary {
            protocol_errors: [(not_h2.clone(), 1)].into(),
            wire_errors: 1,
            wire_errors_by_writer: [("server".into(), 1)].into(),
            ..Summary::default()
        };
        assert_eq!(errors_line(&s).unwrap(), "not an HTTP/2 server×1");
        // A summary from before the split by writer.
        let old = |wire_errors: u64| Summary {
            protocol_errors: [(not_h2.clone(), 1)].into(),
            wire_errors,
            ..Summary::default()
        };
        assert_eq!(errors_line(&old(1)).unwrap(), "not an HTTP/2 server×1");
        assert_eq!(
            errors_line(&old(3)).unwrap(),
            "not an HTTP/2 server×1  wire_error×2"
        );

        let handed = |handed_over: u64, handed_in: u64| {
            handed_text(&Summary {
                handed_over,
                handed_in,
                ..Summary::default()
            })
        };
        assert_eq!(handed(0, 0), "");
        assert_eq!(handed(36, 36), "  handed-over 36");
        assert_eq!(handed(36, 30), "  handed-over 36 (taken 30)");
        assert_eq!(handed(0, 5), "  handed-over 0 (taken 5)");

        assert_eq!(
            unit_glued_words("took 3 ms, and a B"),
            ["took", "3 ms,", "and", "a", "B"]
        );

        let done = |completed: u64, completion_rate: f64| {
            completed_text(&Summary {
                completed,
                completion_rate,
                span_s: 4.0,
                ..Summary::default()
            })
        };
        assert_eq!(done(0, 5.0), "5.0/s");
        assert_eq!(done(1, 5.0), "5.0/s");
        assert_eq!(done(2, 0.0), "0.0/s");
        assert_eq!(done(2, 100.0), "100.0/s (2 in 0.01s)");
        // Completions over half the trace or more: the rate alone.
        assert_eq!(done(3, 1.0), "1.0/s");

        // A field that fills the line exactly stays on it.
        assert_eq!(
            fit_lines("abc       12345  1234567  99", 24),
            "abc       12345  1234567\n          99\n"
        );
        // Continuations are indented at most half the width.
        assert_eq!(
            fit_lines("abcdefghijklmnop  111 222 333 444", 20),
            "abcdefghijklmnop\n          111 222\n          333 444\n"
        );
    }

    /// A failed check outranks an interruption, which outranks an RPC that
    /// did not end OK; an interruption counts only for the live command.
    #[test]
    fn exit_codes_rank_a_failed_check_over_an_interrupt_over_an_rpc_error() {
        for (a, b, worst) in [
            (0, 4, 4),
            (4, 130, 130),
            (130, 3, 3),
            (3, 130, 3),
            (4, 0, 4),
            (0, 0, 0),
            (3, 3, 3),
            (1, 0, 1),
        ] {
            assert_eq!(worst_exit(a, b), worst, "{a} {b}");
        }
        let failed = crate::analyze::Check {
            ok: Some(false),
            ..Default::default()
        };
        let of = |status: &str, rpc: &str, server_rpc: &str, fail: bool| Summary {
            run_status: status.into(),
            rpc_status: [(rpc.to_string(), 1)].into(),
            server_rpc_status: [(server_rpc.to_string(), 1)].into(),
            checks: if fail {
                [("credit".to_string(), failed.clone())].into()
            } else {
                Default::default()
            },
            ..Summary::default()
        };
        assert_eq!(exit_code(&of("complete", "OK", "OK", false), true), 0);
        assert_eq!(
            exit_code(&of("complete", "CANCELLED", "OK", false), true),
            4
        );
        assert_eq!(exit_code(&of("complete", "OK", "INTERNAL", false), true), 4);
        assert_eq!(exit_code(&of("interrupted", "OK", "OK", false), true), 130);
        assert_eq!(exit_code(&of("interrupted", "OK", "OK", false), false), 0);
        assert_eq!(exit_code(&of("complete", "OK", "OK", true), false), 3);
        assert_eq!(
            exit_code(&of("interrupted", "CANCELLED", "OK", true), true),
            3
        );
    }

    /// The Part 3 lines, and what each side's absence leaves n/a.
    #[test]
    fn overload_lines_give_every_end_and_what_a_side_lacks() {
        let ov = crate::analyze::overload::Overload {
            originals: 240,
            on_time: 180,
            useful_fraction: 0.75,
            late: 10,
            rejected: 50,
            offered_rate: 80.0,
            first_attempts: 240,
            attempts: 260,
            retries: 20,
            sent: 255,
            decoded: 250,
            max_in_use: 31,
            slots: 32,
            owned_mib_s: 1.5,
            owned_peak_bytes: 3 << 19,
            pending_peak: 12,
            outstanding_peak: 33,
            wire_bytes_per_useful: Some(17000.4),
            phases: vec![crate::analyze::overload::PhaseLatency {
                phase: "before".into(),
                cohort: 60,
                p50_s: Some(0.0125),
                p95_s: None,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            overload_lines(&ov, true, true),
            "useful    U/N 180/240 = 75.000 %  late 10  rejected 50  dropped 0  expired 0  never-sent 0  unanswered 0\n\
             attempts  N 240 (80.0/s)  F 240  A 260 (20 retries)  S 255  R 250  slots ≤ 31/32\n\
             latency   completed cohorts: before p50 0.013s p95 n/a (n=60)\n\
             cost      admitted payload 1.500 MiB·s (peak 1.50 MiB)  client pending ≤ 12 outstanding ≤ 33  \
             retry collision n/a (M=0 in [0, 0) s)  wire 17000 B/useful\n"
        );
        let server_only = overload_lines(&ov, false, true);
        assert!(
            server_only.starts_with("useful    n/a: the originals"),
            "{server_only}"
        );
        assert!(
            server_only.contains("attempts  N n/a  F n/a  A n/a  S n/a  R 250  slots ≤ 31/32\n"),
            "{server_only}"
        );
        assert!(
            server_only
                .contains("retry collision n/a (retries are the client's)  wire n/a B/useful"),
            "{server_only}"
        );
        let client_only = overload_lines(&ov, true, false);
        assert!(client_only.contains("R n/a  slots ≤ n/a"), "{client_only}");
        assert!(
            client_only.contains("admitted payload n/a  client pending ≤ 12"),
            "{client_only}"
        );
        // No originals: no percentage of them.
        let none = crate::analyze::overload::Overload::default();
        assert!(overload_lines(&none, true, true).starts_with("useful    U/N 0/0 = n/a  "));
    }

    /// never-sent with its reasons; a failed check with where it first
    /// failed; a reason cut to its lead clause only past the limit.
    #[test]
    fn never_sent_failed_checks_and_brief_reasons_are_said_whole() {
        let never = |n: u64| {
            never_sent_text(&Summary {
                never_sent: n,
                never_sent_by_reason: [("behind".to_string(), n)].into(),
                ..Summary::default()
            })
        };
        assert_eq!(never(0), "0");
        assert_eq!(never(36), "36 (behind 36)");
        let failed = |first_t_s, first_line| {
            let c = crate::analyze::Check {
                ok: Some(false),
                detail: "went below zero".into(),
                first_t_s,
                first_line,
            };
            checks_lines(&[("credit".to_string(), c)].into())
        };
        assert!(failed(Some(1.25), Some(40))
            .contains("CHECK FAILED  credit: went below zero [first at 1.250s, trace line 40]\n"));
        assert!(failed(Some(1.25), None).contains("CHECK FAILED  credit: went below zero\n"));
        let at = |n: usize| format!("lead: {}", "x".repeat(n - 6));
        assert_eq!(brief(&at(BRIEF_REASON), &["a"]), at(BRIEF_REASON));
        assert_eq!(
            brief(&at(BRIEF_REASON + 1), &["a"]),
            "lead (whole in summary.json checks.a)"
        );
        assert_eq!(brief(&"y".repeat(300), &["a"]), "y".repeat(300));
    }

    /// Each condition of a run has its headline line or words, and only
    /// when it holds: a cut trace, damage, payload left out, unpaired
    /// connections, a client alone, nothing at all, streams and how their
    /// fairness is measured.
    #[test]
    fn each_condition_of_a_run_gets_its_words_only_when_it_holds() {
        let both = Summary {
            has_client: true,
            has_server: true,
            ..Summary::default()
        };
        let said = |f: &dyn Fn(&mut Summary)| {
            let mut s = both.clone();
            f(&mut s);
            headline_lines(&s)
        };
        let plain = said(&|_| {});
        for absent in [
            "trace  ",
            "damaged",
            "without payload",
            "unpaired",
            "events    none",
        ] {
            assert!(!plain.contains(absent), "{absent:?} in\n{plain}");
        }
        assert!(plain.contains("messages  scheduled 0"), "{plain}");
        assert!(!said(&|s| s.trace_ending = "clean".into()).contains("trace  "));
        assert!(said(&|s| s.trace_ending = "no_footer".into())
            .contains("trace     cut short (no footer): analysed up to"));
        assert!(said(&|s| s.trace_ending = "truncated".into()).contains("cut short (truncated)"));
        let damaged = |n: u64| {
            said(&|s| {
                s.corrupt_lines = n;
                s.first_corrupt_line = Some(7);
            })
        };
        assert!(damaged(1).contains("damaged: 1 corrupt line skipped (line 7)"));
        assert!(damaged(2).contains("damaged: 2 corrupt lines skipped (the first at line 7)"));
        assert!(said(&|s| {
            s.payload_dropped_frames = 3;
            s.payload_dropped_bytes = 100;
        })
        .contains("trace     3 frames without payload (100 B,"));
        let unpaired = said(&|s| {
            let mut u = crate::analyze::summary::Unpaired::default();
            (u.server_connections, u.decoded) = (1, 5);
            s.unpaired = Some(u);
        });
        assert!(
            unpaired.contains(
                "unpaired  1 server connection no client connection pairs with (decoded 5): counted above"
            ),
            "{unpaired}"
        );
        assert!(
            !unpaired.contains("no server connection pairs"),
            "{unpaired}"
        );
        let unpaired = said(&|s| {
            let mut u = crate::analyze::summary::Unpaired::default();
            (u.client_connections, u.sent) = (2, 9);
            s.unpaired = Some(u);
        });
        assert!(
            unpaired.contains(
                "unpaired  2 client connections no server connection pairs with (sent 9):"
            ),
            "{unpaired}"
        );
        assert!(
            !unpaired.contains("no client connection pairs"),
            "{unpaired}"
        );
        // A client alone has its own wire line; nothing at all says so.
        let alone = said(&|s| s.has_server = false);
        assert!(alone.contains("wire      DATA out 0 (0 B)"), "{alone}");
        assert!(!plain.contains("wire      DATA out"), "{plain}");
        let nothing = said(&|s| {
            s.has_client = false;
            s.has_server = false;
        });
        assert!(nothing.starts_with("events    none:"), "{nothing}");
        assert!(!nothing.contains("messages"), "{nothing}");
        assert!(!alone.contains("events    none"), "{alone}");
        // Streams: a line from two; fairness of bytes ÷ offered when every
        // stream's demand is known, else of bytes and starvation unjudged.
        let streams = |offered: [Option<u64>; 2], unary: bool| {
            said(&|s| {
                s.streams = offered
                    .iter()
                    .map(|o| crate::analyze::summary::StreamFigures {
                        offered_bytes: *o,
                        ..Default::default()
                    })
                    .collect();
                s.unary = unary;
            })
        };
        let known = streams([Some(1), Some(2)], false);
        assert!(
            known.contains("(Jain's index of bytes ÷ offered; 1 = equal)"),
            "{known}"
        );
        assert!(!known.contains("starvation not judged"), "{known}");
        let unknown = streams([Some(1), None], false);
        assert!(
            unknown.contains("(Jain's index of bytes; 1 = equal)"),
            "{unknown}"
        );
        assert!(unknown.contains("; starvation not judged:"), "{unknown}");
        let unary = streams([Some(1), None], true);
        assert!(unary.contains("unary calls, one message each"), "{unary}");
        assert!(!unary.contains("; starvation not judged:"), "{unary}");
        assert!(!said(&|s| s.stream_count = 1).contains("streams   "));
        assert!(said(&|s| s.stream_count = 2).contains("streams   2 carried DATA"));
        for (conn, stream) in [(0.5, 0.0), (0.0, 0.25)] {
            let blocked = said(&|s| {
                s.stream_count = 2;
                s.client_blocked_conn_window_s = conn;
                s.client_blocked_stream_window_s = stream;
            });
            assert!(
                blocked.contains(&format!(
                    "; window-blocked on the connection window {conn:.2}s, on own stream windows {stream:.2}s"
                )),
                "{blocked}"
            );
        }
        assert!(!said(&|s| s.stream_count = 2).contains("window-blocked on the connection"));
        let starved = |truncated: bool| {
            said(&|s| {
                s.stream_count = 2;
                s.starved_streams = vec!["1/3".into()];
                s.starved_streams_truncated = truncated;
            })
        };
        assert!(starved(false).contains("; STARVED (< 10 % of a fair share): 1/3\n"));
        assert!(starved(true).contains(": 1/3 and maybe more (only the least served are kept)"));
        assert!(!said(&|s| s.stream_count = 2).contains("STARVED"));
        // A relay: alone, its legs' errors and no endpoint figures; with
        // the client's trace merged in, the client's own record of its
        // credit waits beside the relay's inference.
        let mut relay = crate::analyze::RelaySummary::default();
        relay.c2s.data_frames = 1;
        relay.c2s.exhausted_intervals = 1;
        relay.answers = [("client: GOAWAY".to_string(), 1)].into();
        relay.rules_broken = [("server: DATA on stream 0".to_string(), 2)].into();
        let with_relay = |client: bool, server: bool, waits: u64| {
            said(&|s| {
                s.relay = Some(relay.clone());
                s.has_client = client;
                s.has_server = server;
                s.window_blocked_ms.count = waits;
                s.client_window_blocked_s = 0.5;
            })
        };
        let alone = with_relay(false, false, 0);
        assert!(
            alone.contains("\nerrors    client sent GOAWAY×1  server broke: DATA on stream 0×2\n"),
            "{alone}"
        );
        assert!(!alone.contains("messages"), "{alone}");
        assert!(!alone.contains("events    none"), "{alone}");
        let own = "the client's own record (its trace): window-blocked 0.500s in 3 waits";
        let merged = with_relay(true, false, 3);
        assert!(merged.contains("messages  scheduled 0"), "{merged}");
        assert!(merged.contains(own), "{merged}");
        assert!(!with_relay(true, true, 0).contains("the client's own record"));
        assert!(!with_relay(false, true, 3).contains("the client's own record"));
        assert!(with_relay(false, true, 3).contains("messages  scheduled n/a"));
    }

    /// A long reason a check cannot judge is its lead clause on the checks
    /// line, and says where the whole is; a short one is given whole.
    #[test]
    fn a_long_reason_a_check_cannot_judge_is_given_briefly() {
        let check = |detail: &str| crate::analyze::Check {
            ok: None,
            detail: detail.into(),
            first_t_s: None,
            first_line: None,
        };
        let long = format!(
            "no connection a message crossed pairs with one on the other side's tap: {}",
            "1 server connection no client connection of this trace pairs with; ".repeat(4)
        );
        let mut checks = std::collections::BTreeMap::new();
        checks.insert("accounting".to_string(), check(&long));
        checks.insert("bytes".to_string(), check("no paired streams carried DATA"));
        let line = checks_lines(&checks);
        assert_eq!(
            line,
            "checks    0 hold, 2 cannot be judged (accounting: no connection a message \
             crossed pairs with one on the other side's tap (whole in summary.json \
             checks.accounting); bytes: no paired streams carried DATA)\n"
        );
        // A lead clause cut inside a parenthesis closes it.
        let long = format!(
            "needs client and server events in one trace (client only: {})",
            "on 1 stream, DATA out of its tap = framed bytes sent; ".repeat(4)
        );
        checks.insert("bytes".to_string(), check(&long));
        checks.remove("accounting");
        assert_eq!(
            checks_lines(&checks),
            "checks    0 hold, 1 cannot be judged (bytes: needs client and server events \
             in one trace (client only) (whole in summary.json checks.bytes))\n"
        );
    }

    /// A figure of a distribution with no sample is n/a, never 0: a
    /// client that sent no stream WINDOW_UPDATE, a direction no frame
    /// crossed (they read "+0 B p50, every 0.00ms p50" and "s2c 0.0µs").
    /// Waits summed over connections, and a client's over its streams,
    /// say so.
    #[test]
    fn relay_figures_without_samples_are_not_zeros() {
        let one = |v: f64| crate::stats::Distribution {
            count: 1,
            p50: v,
            p99: v,
            ..Default::default()
        };
        let mut r = crate::analyze::RelaySummary {
            connections: 2,
            ..Default::default()
        };
        r.c2s.relay_latency_ms = one(25.1592);
        r.c2s.data_frames = 3;
        r.c2s.data_bytes = 300;
        r.c2s.window_updates_conn = 1;
        r.c2s.update_increment_conn = one(300.0);
        let mut o = String::new();
        relay_lines(&mut o, &r, Some((7.2, 847)), 4);
        assert!(
            o.contains("p50 c2s 25.16ms s2c n/a (p99 25.16ms / n/a)"),
            "{o}"
        );
        assert!(
            o.contains("server's WINDOW_UPDATEs: 0 stream, 1 connection (+300 B p50)"),
            "{o}"
        );
        assert!(o.contains("s (summed over connections) in "), "{o}");
        assert!(
            o.contains("(summed over its streams: not comparable)"),
            "{o}"
        );
        r.c2s.window_updates_stream = 1;
        r.c2s.update_increment_stream = one(16384.0);
        let mut o = String::new();
        relay_lines(&mut o, &r, None, 1);
        assert!(o.contains("1 stream (+16384 B p50, every n/a p50,"), "{o}");
        // When the receiver returns credit, in frames of its largest DATA.
        r.c2s.max_data_frame = 16384;
        r.c2s.withheld_after_update = crate::stats::Distribution {
            p50: 40960.0,
            p90: 49152.0,
            ..one(40960.0)
        };
        r.c2s.credit_release = "after_receipt".into();
        r.close_reasons = [("GOAWAY".to_string(), 2), ("EOF".to_string(), 1)].into();
        let mut o = String::new();
        relay_lines(&mut o, &r, None, 1);
        assert!(
            o.contains(
                "credit    the server HOLDS credit after receipt: after each stream \
                 WINDOW_UPDATE it still holds p50 40960 B (2.5 frames of 16384 B), p90 49152 B;"
            ),
            "{o}"
        );
        assert!(
            o.contains("(0 refused, 3 legs closed with a reason)"),
            "{o}"
        );
        assert!(o.contains("\nclosed    EOF×1, GOAWAY×2\n"), "{o}");
        r.c2s.credit_release = "on_receipt".into();
        let mut o = String::new();
        relay_lines(&mut o, &r, None, 1);
        assert!(
            o.contains("the server returns credit ON RECEIPT: after each stream WINDOW_UPDATE it still holds p50 40960 B (< half a 16384-B frame)"),
            "{o}"
        );
        // A direction with DATA but no update and no wait is one line;
        // one with only a credit wait is not.
        let mut r = crate::analyze::RelaySummary::default();
        r.s2c.data_frames = 1;
        r.s2c.data_bytes = 5;
        let mut o = String::new();
        relay_lines(&mut o, &r, None, 1);
        assert!(
            o.contains(
                "s2c       DATA 1 frame (5 B); no WINDOW_UPDATE from the client, no credit wait\n"
            ),
            "{o}"
        );
        assert!(!o.contains("closed    "), "{o}");
        r.s2c.exhausted_intervals = 1;
        let mut o = String::new();
        relay_lines(&mut o, &r, None, 1);
        assert!(
            o.contains("client's WINDOW_UPDATEs: 0 stream, 0 connection"),
            "{o}"
        );
        assert!(o.contains("no credit 0.000s in 1 interval;"), "{o}");
    }

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn lateness_below_a_tenth_of_a_millisecond_is_not_printed_as_zero() {
        assert_eq!(short_ms(0.005668), "0.006ms");
        assert_eq!(short_ms(0.980459), "1.0ms");
        assert_eq!(short_ms(0.098396), "0.098ms");
        assert_eq!(short_ms(0.7), "0.700ms");
        assert_eq!(short_ms(835.2), "835.2ms");
        assert_eq!(short_ms(0.0), "0.0ms");
    }

    #[test]
    fn long_headline_lines_continue_under_their_text_within_80_columns() {
        let text = "messages  scheduled 1200  sent 1200  decoded 1200\n\
            client    blocked: window 0.00s  h2 buffer 0.00s  socket 0.000s  lateness p50 1.0ms p99 1.8ms  frame c2s latency p50 0.018ms\n\
            growth    from 0.4s to 4.0s the queue grew by 753 msgs while the server sent 539 stream WINDOW_UPDATEs returning 16.86 MiB of credit\n";
        let fitted = fit_lines(text, 80);
        for l in fitted.lines() {
            assert!(l.chars().count() <= 80, "{l}\n{fitted}");
        }
        // Nothing lost or reordered, short lines untouched.
        assert_eq!(words(&fitted), words(text));
        assert!(fitted.starts_with("messages  scheduled 1200  sent 1200  decoded 1200\n"));
        let lines: Vec<&str> = fitted.lines().collect();
        assert!(
            lines[1].starts_with("client    blocked: window 0.00s"),
            "{fitted}"
        );
        // Continuations sit under the text, broken between fields.
        assert!(
            lines[2].starts_with("          ") && !lines[2].starts_with("           "),
            "{fitted}"
        );
        // Fields stay whole.
        assert!(
            lines
                .iter()
                .any(|l| l.contains("frame c2s latency p50 0.018ms")),
            "{fitted}"
        );
        let growth = lines.iter().position(|l| l.starts_with("growth")).unwrap();
        assert!(lines[growth + 1].starts_with("          "), "{fitted}");
    }

    /// A wide character takes two columns: a line holding CJK text (a
    /// server's error, a socket's name) went past 80 columns, each
    /// character counted as one.
    #[test]
    fn a_headline_line_with_wide_characters_fits_80_columns() {
        // 65 characters, 101 columns.
        let text = format!("status    server said: {}\n", ["服务器暂不可"; 6].join(" "));
        let fitted = fit_lines(&text, 80);
        assert!(fitted.lines().count() > 1, "{fitted}");
        for l in fitted.lines() {
            assert!(crate::compare::columns(l) <= 80, "{l}\n{fitted}");
        }
        assert_eq!(words(&fitted), words(&text));
    }

    /// A number keeps its unit across a break (the audit saw "+32830" end
    /// a line and "B" begin the next).
    #[test]
    fn a_number_and_its_unit_are_not_split() {
        // Broken between words: the field is longer than a line.
        let text = "credit    the server returned +32830 B of stream credit in 4 updates while the queue held 12 msgs and 3.2 MiB, then +16415 B more\n";
        for width in 40..=80 {
            let fitted = fit_lines(text, width);
            assert_eq!(words(&fitted), words(text), "{fitted}");
            for l in fitted.lines() {
                let first = l.split_whitespace().next().unwrap_or("");
                assert!(
                    !["B", "msgs", "MiB,"].contains(&first),
                    "width {width}: a unit began a line:\n{fitted}"
                );
                assert!(l.chars().count() <= width, "{l}\n{fitted}");
            }
        }
    }

    #[test]
    fn a_run_without_stream_updates_says_so_rather_than_a_mean_of_nothing() {
        let mut s = Summary {
            has_server: true,
            trace_ending: "clean".into(),
            window_updates_out: 3,
            window_updates_out_conn: 3,
            ..Summary::default()
        };
        let wire = |s: &Summary| {
            let h = headline_lines(s);
            h.lines()
                .find(|l| l.starts_with("wire"))
                .unwrap()
                .to_string()
        };
        let none = wire(&s);
        assert!(
            none.contains("WINDOW_UPDATE out 3 (none at stream level, "),
            "{none}"
        );
        assert!(!none.contains("mean"), "{none}");
        s.window_updates_out_stream = 2;
        s.window_update_increment.count = 2;
        s.window_update_increment.mean = 16_400.0;
        s.coalescing_ratio = 4.0;
        let some = wire(&s);
        assert!(
            some.contains("(stream mean +16400 B, 4.0 releases each, "),
            "{some}"
        );
        // The client's side alone: counts that add up, no "stream 449"
        // that reads as a stream id.
        let client = Summary {
            has_client: true,
            trace_ending: "clean".into(),
            window_updates_in: 1345,
            window_updates_in_stream: 449,
            window_updates_in_conn: 896,
            ..Summary::default()
        };
        let mut client = client;
        client.window_update_in_increment.mean = 32_899.0;
        let text = headline_lines(&client);
        assert!(
            text.contains("WINDOW_UPDATE in 1345 = 449 stream + 896 conn (stream mean +32899 B)"),
            "{text}"
        );
    }

    /// A queue that did not grow reads +0.0, never -0.0 (a least-squares
    /// slope of a flat queue comes out a hair below zero).
    #[test]
    fn a_flat_queue_grows_by_plus_zero() {
        let s = Summary {
            has_server: true,
            has_client: true,
            trace_ending: "clean".into(),
            queue_growth_rate: -0.0004,
            ..Summary::default()
        };
        let h = headline_lines(&s);
        let rates = h.lines().find(|l| l.starts_with("rates")).unwrap();
        assert!(rates.ends_with("queue growth +0.0 msg/s"), "{rates}");
    }

    /// A completion rate over a short stretch of the run says how many and
    /// over how long (a stalled run's 12 in 48 ms read "231.3/s" alone);
    /// over most of the run, the rate alone.
    #[test]
    fn a_completion_rate_over_a_short_stretch_says_its_count_and_span() {
        let mut s = Summary {
            has_server: true,
            has_client: true,
            trace_ending: "clean".into(),
            completed: 12,
            completion_rate: 11.0 / 0.0475,
            span_s: 4.2,
            ..Summary::default()
        };
        let h = headline_lines(&s);
        assert!(h.contains("completed 231.6/s (12 in 0.048s)"), "{h}");
        s.span_s = 0.09;
        let h = headline_lines(&s);
        assert!(h.contains("completed 231.6/s  "), "{h}");
        assert!(!h.contains("12 in"), "{h}");
    }

    /// Part 1's growth figures, and none under Part 3's admission bound.
    #[test]
    fn queue_growth_is_left_out_of_a_part3_headline() {
        let mut s = Summary {
            has_server: true,
            has_client: true,
            trace_ending: "clean".into(),
            queue_growth_rate: 5.4,
            queue_growth_in_window: 17.0,
            ..Summary::default()
        };
        let h = headline_lines(&s);
        assert!(h.contains("queue growth +5.4 msg/s"), "{h}");
        assert!(h.lines().any(|l| l.starts_with("growth    from")), "{h}");
        s.overload = Some(Default::default());
        let h = headline_lines(&s);
        assert!(!h.contains("queue growth"), "{h}");
        assert!(!h.lines().any(|l| l.starts_with("growth")), "{h}");
        assert!(h.contains("rates     attempts "), "{h}");
    }

    /// A queue that held one message more at the growth window's last
    /// bucket than at its first, on a flat slope, did not grow: no growth
    /// line (an 80-stream run at 1 ms service read "grew by 1 msg" beside
    /// "+0.0 msg/s"). One message more on a rising slope did; a rising
    /// slope that ends where it began did not.
    #[test]
    fn a_queue_grows_by_its_end_points_and_its_slope_together() {
        let grows = |rate: f64, grown: f64| {
            let s = Summary {
                has_server: true,
                has_client: true,
                trace_ending: "clean".into(),
                queue_growth_rate: rate,
                queue_growth_in_window: grown,
                ..Summary::default()
            };
            let line = headline_lines(&s)
                .lines()
                .any(|l| l.starts_with("growth    from"));
            assert_eq!(line, s.queue_grows_on_credit(), "{rate} {grown}");
            line
        };
        assert!(!grows(0.0, 1.0));
        assert!(!grows(1.0, 1.0), "a slope of exactly 1 msg/s is not growth");
        assert!(grows(1.01, 1.0));
        assert!(!grows(5.0, 0.0));
        assert!(!grows(5.0, 0.99));
    }

    /// A trace with no endpoint event (a client that never connected)
    /// says so once, not under one side's labels: it read "DATA in n/a" for
    /// a client.
    #[test]
    fn a_trace_without_endpoint_events_says_so_instead_of_n_a_lines() {
        let s = Summary {
            trace_ending: "clean".into(),
            run_status: "error: connecting to 127.0.0.1:9: Connection refused".into(),
            ..Summary::default()
        };
        let h = headline_lines(&s);
        assert!(h.starts_with("status    error: connecting"), "{h}");
        assert!(
            h.contains("events    none: the trace holds no event"),
            "{h}"
        );
        assert!(!h.contains("n/a") && !h.contains("DATA"), "{h}");
        assert!(h.contains("checks"), "{h}");
    }

    /// No RPC ended in the trace (one cut before any did): said in words
    /// (it printed "-").
    #[test]
    fn rpcs_none_ended_is_said() {
        let s = Summary {
            trace_ending: "no_footer".into(),
            has_client: true,
            has_server: true,
            ..Summary::default()
        };
        let h = headline_lines(&s);
        assert!(h.contains("rpcs      none ended in this trace\n"), "{h}");
    }

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(counted(1, "frame"), "1 frame");
        assert_eq!(counted(0, "connection pair"), "0 connection pairs");
        assert_eq!(counted(2, "leg"), "2 legs");
    }
}
