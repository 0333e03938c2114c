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
    let page = crate::page::RunPage::read_with_plots(dir, plots.tmp(), &summary, &ladder).html();
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
            "waits     the {sender} had an open stream and no credit {:.3}s{} in {} intervals{}; inferred waiting (it sent more DATA after the credit) {:.3}s in {}{}",
            f.exhausted_s,
            if r.connections > 1 {
                " (summed over connections)"
            } else {
                ""
            },
            f.exhausted_intervals,
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
