//! `report.html`: one self-contained page per run (headline figures, the
//! checks, the frame ladder, every plot of the run inlined, the
//! configuration), and a comparison page for several runs. No network: the
//! SVGs, the CSS and everything else are inside the file; no script.

use crate::analyze::{Check, Summary};
use crate::ladder::{self, Ladder, LadderOpts};
use crate::meta::Meta;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// HTML-escapes text for element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = r#"
:root{--fg:#1a202c;--muted:#5a6472;--ok:#1e7e34;--okbg:#e6f4ea;--bad:#c53030;--badbg:#fdecec;--na:#7a5d00;--nabg:#fff6d6;--card:#f6f8fa;--border:#d8dee4;--accent:#1f5fa8}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);margin:0;background:#fff}
main{max-width:1340px;margin:0 auto;padding:22px 28px 64px}
h1{font-size:25px;margin:0 0 2px}
h2{font-size:19px;margin:34px 0 10px;padding-bottom:5px;border-bottom:2px solid #e9edf1}
h3{font-size:15px;margin:16px 0 6px}
a{color:var(--accent)}
.sub{color:var(--muted);font-size:14px}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
code{font-size:13px;background:#f1f3f5;padding:1px 5px;border-radius:4px}
nav{margin:10px 0 4px;font-size:14px}
nav a{margin-right:14px;text-decoration:none}
.badge{display:inline-block;padding:1px 9px;border-radius:11px;font-size:13px;font-weight:600;white-space:nowrap}
.b-ok{background:var(--okbg);color:var(--ok)}
.b-bad{background:var(--badbg);color:var(--bad)}
.b-na{background:var(--nabg);color:var(--na)}
.b-info{background:#e8f0fb;color:var(--accent)}
.cards{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:12px;margin:16px 0}
@media (max-width:900px){.cards{grid-template-columns:repeat(2,minmax(0,1fr))}}
.card{background:var(--card);border:1px solid var(--border);border-radius:9px;padding:10px 14px}
.card .k{color:var(--muted);font-size:13px}
.card .v{font-size:23px;font-weight:650;margin:2px 0}
.card .n{color:var(--muted);font-size:12.5px}
.card.alert{border-color:#f3b4b4;background:#fff7f7}
.card.alert .v{color:var(--bad)}
.card.good .v{color:var(--ok)}
.finding{border-left:4px solid #d62728;background:#fff7f7;padding:10px 14px;border-radius:0 8px 8px 0;margin:14px 0}
pre.headline{background:#0f172a;color:#e2e8f0;padding:14px 16px;border-radius:8px;white-space:pre-wrap;font-size:12.5px;line-height:1.45;margin:8px 0}
details>summary{cursor:pointer;color:var(--muted);font-size:14px}
table{border-collapse:collapse;font-size:14px}
th,td{padding:5px 10px;border-bottom:1px solid var(--border);text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:#fffafa}
.cfg{display:grid;grid-template-columns:repeat(auto-fill,minmax(380px,1fr));gap:18px}
.cfg td:first-child{color:var(--muted);white-space:nowrap}
.cfg td{font-size:13.5px}
.plots{display:grid;grid-template-columns:minmax(0,1040px);gap:22px}
figure{margin:0}
figure.wide{grid-column:1/-1}
figure img.plot{width:100%;height:auto;border:1px solid var(--border);border-radius:6px;display:block}
figcaption{font-size:13px;color:var(--muted);margin:5px 2px}
/* Wide tables scroll inside the page instead of widening it. */
.tw{overflow-x:auto;max-width:100%}
.ladder-wrap{border:1px solid var(--border);border-radius:8px;padding:6px;overflow-x:auto}
.ladder-wrap svg{width:100%;min-width:1000px;height:auto;display:block}
.ladder-narrow{display:none}
@media (max-width:1080px){.ladder-narrow{display:block}}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:13px;color:var(--muted);margin:8px 0}
.legend i{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:5px;border-radius:2px}
.note{font-size:14px;color:var(--muted)}
.warn{background:var(--nabg);border:1px solid #f0d98a;border-radius:6px;padding:6px 10px;font-size:14px;margin:8px 0}
.cmp{display:grid;gap:14px}
.cmp figure img.plot{border:1px solid var(--border)}
.runs td{font-size:13.5px}
/* A configuration's label wraps at its spaces, and stays in view while
   a wide table scrolls sideways. */
table.cmpt td:first-child{font-weight:600;min-width:9em}
table.cmpt td:first-child,table.cmpt th:first-child{position:sticky;left:0;background:#fff}
table.cmpt th:first-child{background:#f6f8fa}
@media (max-width:900px){th,td{padding:4px 6px}table{font-size:13px}}
h3 .note{font-weight:normal}
"#;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n",
        esc(title)
    )
}

/// A run's SVG plots, in reading order (the standard ones first), as
/// `(file name, <img> element)`. A file without an `<svg` element is left
/// out and named in the second list.
pub fn run_svgs(dir: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".svg"))
                .collect()
        })
        .unwrap_or_default();
    let rank = |n: &str| {
        [
            "credit.svg",
            "streams.svg",
            "queue.svg",
            "cumulative.svg",
            "blocked.svg",
        ]
        .iter()
        .position(|s| *s == n)
        .unwrap_or(99)
    };
    names.sort_by(|a, b| (rank(a), a).cmp(&(rank(b), b)));
    let mut ok = vec![];
    let mut skipped = vec![];
    for n in names {
        match std::fs::read(dir.join(&n))
            .ok()
            .and_then(|s| svg_image(&n, &s))
        {
            Some(img) => ok.push((n, img)),
            None => skipped.push(n),
        }
    }
    (ok, skipped)
}

/// An SVG file as an `<img>` whose source is the file itself (a `data:`
/// URL): a browser draws an SVG image without running its scripts,
/// fetching anything, navigating or touching the page around it, so a
/// plot file from anywhere can neither act nor break the page, which
/// text filters could not promise. `None` for a file that is not an SVG.
fn svg_image(name: &str, bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    if !text.contains("<svg") || !text.contains("</svg>") {
        return None;
    }
    Some(format!(
        r#"<img class="plot" alt="{}" src="data:image/svg+xml;base64,{}">"#,
        esc(name),
        base64_simd::STANDARD.encode_to_string(bytes)
    ))
}

fn caption(name: &str) -> &'static str {
    match name {
        "credit.svg" => "Credit against work: the client's send windows and the bytes the server had not released (top), the bytes the application owned (middle), the queue (bottom). Credit that stays up while ownership grows is the window describing bytes, not work; credit that falls to 0 as the application holds bytes is flow control holding the client back.",
        "queue.svg" => "Messages waiting in the application queue.",
        "cumulative.svg" => "Cumulative messages: scheduled and sent by the client, completed and discarded by the server. The gap between sent and completed is work the server holds.",
        "blocked.svg" => "When the client waited: on window credit, on h2's send buffer, on the socket.",
        "withheld.svg" => "Relay: the credit each receiver withheld (DATA it was sent minus credit it returned), read from the relay's legs. A server that releases on receipt drops back to near zero at each WINDOW_UPDATE; one that releases later holds the bytes of the work it owns.",
        "streams.svg" => "Client→server bytes per stream over time, stacked (the streams with the most bytes each get a layer): how the streams shared the connection.",
        "part3-outcomes.svg" => "Where every scheduled original went, per configuration: the mean fraction of N over its runs.",
        "part3-owned.svg" => "Server-owned payload over time: the bytes of admitted attempts, queued or in service (each configuration's first run; a point is the highest of its span).",
        "part3-client.svg" => "The client's pending originals and outstanding attempts over time (each configuration's first run; a point is the highest of its span).",
        "part3-collisions.svg" => "How many 20 ms bins of the collision window held k retries (mean over a configuration's runs): two or more in one bin collide.",
        _ => "",
    }
}

/// `+1.5`, `-0.3`, and `0.0` for what rounds to zero (never `-0.0`).
fn signed(v: f64, decimals: usize) -> String {
    let s = format!("{v:+.decimals$}");
    if s.trim_start_matches(['+', '-'])
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        format!("{:.decimals$}", 0.0)
    } else {
        s
    }
}

fn badge(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => r#"<span class="badge b-ok">✓ holds</span>"#,
        Some(false) => r#"<span class="badge b-bad">✗ FAILED</span>"#,
        None => r#"<span class="badge b-na">? cannot be judged</span>"#,
    }
}

/// What one figure of the summary shows when the trace lacks its side.
fn na(have: bool, f: impl FnOnce() -> String) -> String {
    if have {
        f()
    } else {
        "n/a".into()
    }
}

fn card(o: &mut String, class: &str, key: &str, value: &str, note: &str) {
    let _ = write!(
        o,
        r#"<div class="card {class}"><div class="k">{}</div><div class="v">{}</div><div class="n">{}</div></div>"#,
        esc(key),
        esc(value),
        esc(note)
    );
}

/// A relay run alone: no probe endpoint, so the relay's figures as cards
/// (the c2s flow: what the client sent, what the server withheld).
fn relay_cards(s: &Summary, r: &crate::analyze::RelaySummary) -> String {
    let mut o = String::from(r#"<div class="cards">"#);
    let f = &r.c2s;
    card(
        &mut o,
        "",
        "connection pairs",
        &r.connections.to_string(),
        &format!(
            "{} legs closed with a reason",
            r.close_reasons.values().sum::<u64>()
        ),
    );
    card(
        &mut o,
        "",
        "frames forwarded",
        &r.frames_forwarded.to_string(),
        &format!(
            "{} differing, {} not forwarded",
            r.frames_differing, r.frames_unforwarded
        ),
    );
    card(
        &mut o,
        "",
        "read→write in the relay",
        &format!("{:.1} µs", f.relay_latency_ms.p50 * 1e3),
        &format!("c2s p50; s2c {:.1} µs", r.s2c.relay_latency_ms.p50 * 1e3),
    );
    card(
        &mut o,
        "",
        "server's credit",
        &f.credit_release.replace('_', " "),
        "when the server returns credit (c2s)",
    );
    card(
        &mut o,
        "",
        "held after each update",
        &format!("{:.0} B", f.withheld_after_update.p50),
        &format!(
            "p50 of {} stream WINDOW_UPDATEs; p90 {:.0} B",
            f.window_updates_stream, f.withheld_after_update.p90
        ),
    );
    card(
        &mut o,
        "",
        "client waiting on credit",
        &format!("{:.2} s", f.inferred_blocked_s),
        &format!(
            "inferred, {} waits; no credit {:.2} s",
            f.inferred_blocked_intervals, f.exhausted_s
        ),
    );
    card(
        &mut o,
        "",
        "WINDOW_UPDATE cadence",
        &format!("{:.2} ms", f.update_gap_stream_ms.p50),
        &format!(
            "p50 between stream updates; +{:.0} B each",
            f.update_increment_stream.p50
        ),
    );
    o.push_str(&checks_card(s));
    o.push_str("</div>");
    o
}

fn checks_card(s: &Summary) -> String {
    let mut o = String::new();
    let held = s.checks.values().filter(|c| c.ok == Some(true)).count();
    let failed = s.checks.values().filter(|c| c.ok == Some(false)).count();
    let unknown = s.checks.len() - held - failed;
    let mut note = format!(
        "{held} hold · {failed} failed · {unknown} cannot be judged (of {})",
        s.checks.len()
    );
    // The trace itself in doubt: said whatever the verdicts, and it leads
    // when nothing failed (rather than what little holds).
    let doubt = s.events_in_doubt();
    if let Some(why) = &doubt {
        note = format!("{why}. {note}");
    }
    let (class, value) = if failed > 0 {
        ("alert", format!("{failed} FAILED"))
    } else if doubt.is_some() && unknown > 0 {
        ("alert", format!("{unknown} cannot be judged"))
    } else if unknown > 0 {
        ("", format!("{held} hold"))
    } else {
        ("good", "all hold".to_string())
    };
    card(&mut o, class, "invariant checks", &value, &note);
    o
}

/// The headline figures as cards, and the growth finding when there is one.
fn cards(s: &Summary) -> String {
    let (c, sv) = (s.has_client, s.has_server);
    if let Some(r) = s.relay.as_ref().filter(|_| !c && !sv) {
        return relay_cards(s, r);
    }
    let mut o = String::from(r#"<div class="cards">"#);
    card(
        &mut o,
        "",
        "sent (steady)",
        &na(c, || format!("{:.1}/s", s.send_rate_steady)),
        &na(c, || {
            let offered = match s.overload {
                // Part 3 schedules attempts: originals and their retries.
                Some(_) => format!("attempts initiated {:.1}/s", s.offered_rate),
                None => format!("offered {:.1}/s", s.offered_rate),
            };
            // What the client scheduled and never sent (the terminal said
            // it; no card did).
            match s.never_sent {
                0 => offered,
                n => format!("{offered} · {n} never sent"),
            }
        }),
    );
    card(
        &mut o,
        "",
        "completed",
        &na(sv, || crate::report::completed_text(s)),
        &na(sv, || format!("{} of {} decoded", s.completed, s.decoded)),
    );
    // Under Part 3's admission bound the queue cannot outgrow its slots:
    // its slope says nothing, what the originals became does.
    let growing = c && sv && s.queue_grows_on_credit();
    match &s.overload {
        Some(ov) => part3_cards(&mut o, ov, c, sv),
        None => card(
            &mut o,
            if growing { "alert" } else { "" },
            "queue growth",
            &na(c && sv, || {
                format!("{} msg/s", signed(s.queue_growth_rate, 1))
            }),
            "slope over the steady part of the run",
        ),
    }
    card(
        &mut o,
        if growing { "alert" } else { "" },
        "peak queue",
        &na(sv, || format!("{} msgs", s.max_queue_depth)),
        &na(sv, || {
            format!(
                "{:.2} MiB owned by the application{}",
                s.max_owned_bytes as f64 / 1048576.0,
                // Not the server-owned card's peak: that counts admitted
                // attempts only.
                if s.overload.is_some() {
                    " (decoded, not yet done: admitted or not)"
                } else {
                    ""
                }
            )
        }),
    );
    card(
        &mut o,
        "",
        "peak unreleased",
        &na(sv, || format!("{} B", s.max_unreleased_bytes)),
        "received by the server, credit not yet released",
    );
    card(
        &mut o,
        if c && s.client_window_blocked_s > 0.0 {
            "alert"
        } else {
            ""
        },
        "client blocked on credit",
        &na(c, || format!("{:.2} s", s.client_window_blocked_s)),
        &na(c, || {
            let not_open = if s.not_open_blocked_ms.count > 0 {
                format!(" · stream not open {:.2} s", s.client_not_open_blocked_s)
            } else {
                String::new()
            };
            format!(
                "h2 buffer {:.2} s · socket {:.3} s{not_open}",
                s.client_h2_buffer_blocked_s, s.client_socket_blocked_s
            )
        }),
    );
    if c && s.unary {
        // A unary call's latency, as its caller sees it (the headline's
        // `calls` and `response`): the page left both out.
        let ms = crate::report::short_ms;
        let called = s.call_ms.count > 0;
        card(
            &mut o,
            "",
            "unary call p50",
            &na(called, || ms(s.call_ms.p50)),
            &na(called, || {
                format!(
                    "p99 {} over {} calls that ended OK · response (from the scheduled time, the backlog's wait included) p50 {} · p99 {}",
                    ms(s.call_ms.p99),
                    s.call_ms.count,
                    ms(s.response_ms.p50),
                    ms(s.response_ms.p99)
                )
            }),
        );
    }
    card(
        &mut o,
        "",
        "WINDOW_UPDATEs out",
        &na(sv, || s.window_updates_out.to_string()),
        &na(sv, || {
            // No sample is n/a, never 0 (a unary run's updates are all the
            // connection's: the card read "stream mean +0 B").
            let mean = if s.window_update_increment.count > 0 {
                format!("stream mean +{:.0} B", s.window_update_increment.mean)
            } else {
                "none at stream level".to_string()
            };
            let latency = if s.release_to_update_ms.count > 0 {
                format!("{:.2} ms", s.release_to_update_ms.p50)
            } else {
                "n/a".to_string()
            };
            format!("{mean} · release→update p50 {latency}")
        }),
    );
    o.push_str(&checks_card(s));
    o.push_str("</div>");
    if s.queue_grows_on_credit() {
        let _ = write!(
            o,
            r#"<p class="finding">From <b>{:.1} s</b> to <b>{:.1} s</b> the queue grew by <b>{}</b> while the server sent <b>{}</b> returning <b>{:.2} MiB of credit</b>: the window kept describing bytes, not the work the server held.</p>"#,
            s.queue_growth_window_s.0,
            s.queue_growth_window_s.1,
            crate::report::counted(s.queue_growth_in_window.round() as u64, "message"),
            crate::report::counted(s.window_updates_in_growth_window, "stream WINDOW_UPDATE"),
            s.credit_returned_in_growth_window as f64 / 1048576.0
        );
    }
    o
}

/// Part 3's figures (an `--rpc exchange` run), as the headline's `useful`,
/// `attempts`, `latency` and `cost` lines give them: a side the trace
/// lacks has its figures n/a.
fn part3_cards(
    o: &mut String,
    ov: &crate::analyze::overload::Overload,
    client: bool,
    server: bool,
) {
    card(
        o,
        if client && ov.on_time < ov.originals {
            "alert"
        } else {
            ""
        },
        "useful (on time)",
        &na(client && ov.originals > 0, || {
            format!("{:.1} %", 100.0 * ov.useful_fraction)
        }),
        &if client {
            format!(
                "{} of {} originals · {}",
                ov.on_time,
                ov.originals,
                ov.other_ends()
                    .iter()
                    .map(|(name, n)| format!("{name} {n}"))
                    .collect::<Vec<_>>()
                    .join(" · ")
            )
        } else {
            "the originals are the client's: no client events".to_string()
        },
    );
    card(
        o,
        "",
        "attempts",
        &na(client, || ov.attempts.to_string()),
        &na(client, || {
            format!(
                "{} originals at {:.1}/s · {} retries",
                ov.originals, ov.offered_rate, ov.retries
            )
        }),
    );
    let p95: Vec<String> = ov
        .phases
        .iter()
        .map(|p| p.p95_s.map_or("n/a".into(), |v| format!("{v:.3}")))
        .collect();
    let names: Vec<&str> = ov.phases.iter().map(|p| p.phase.as_str()).collect();
    card(
        o,
        "",
        "latency p95 by phase",
        &na(client && !p95.is_empty(), || {
            format!("{} s", p95.join(" / "))
        }),
        &format!("{} (completed originals)", names.join(" / ")),
    );
    let c = &ov.collision;
    card(
        o,
        "",
        "retry collision (fraction of pairs)",
        &na(client, || {
            c.fraction.map_or("n/a".into(), |f| format!("{f:.5}"))
        }),
        &if client {
            crate::part3::collision_scope(c)
        } else {
            "retries are the client's".to_string()
        },
    );
    card(
        o,
        "",
        "server-owned",
        &na(server, || format!("{:.3} MiB·s", ov.owned_mib_s)),
        &format!(
            "admitted peak {} · client pending ≤ {} · outstanding ≤ {}",
            na(server, || format!(
                "{:.2} MiB",
                ov.owned_peak_bytes as f64 / 1048576.0
            )),
            na(client, || ov.pending_peak.to_string()),
            na(client, || ov.outstanding_peak.to_string())
        ),
    );
}

fn checks_table(s: &Summary, dir_arg: &str) -> String {
    if s.checks.is_empty() {
        return r#"<p class="note">No checks: the trace holds nothing to judge.</p>"#.into();
    }
    // The column only when some check names an event (it stood empty
    // when every check held).
    let with_at = s.checks.values().any(|c| c.first_t_s.is_some());
    let mut o = format!(
        r#"<div class="tw"><table class="checks"><tr><th>check</th><th>result</th><th>why</th>{}</tr>"#,
        if with_at {
            "<th>first offending event</th>"
        } else {
            ""
        }
    );
    // Failures first, then what cannot be judged, then what holds.
    let mut rows: Vec<(&String, &Check)> = s.checks.iter().collect();
    rows.sort_by_key(|(n, c)| {
        (
            match c.ok {
                Some(false) => 0,
                None => 1,
                Some(true) => 2,
            },
            n.to_string(),
        )
    });
    for (name, c) in rows {
        let at = match (c.first_t_s, c.first_line) {
            (Some(t), line) => {
                let mut a = format!("at {t:.6} s");
                if let Some(l) = line {
                    let _ = write!(a, ", trace line {l}");
                }
                let from = (t - 0.01).max(0.0);
                let _ = write!(
                    a,
                    r#"<br><span class="note">see it: <code>h2probe report {} --at {from:.3}s --span 20ms</code></span>"#,
                    esc(dir_arg)
                );
                a
            }
            _ => String::new(),
        };
        let _ = write!(
            o,
            r#"<tr{}><td><code>{}</code></td><td>{}</td><td>{}</td>{}</tr>"#,
            if c.ok == Some(false) {
                r#" class="failed""#
            } else {
                ""
            },
            esc(name),
            badge(c.ok),
            esc(&c.detail),
            if with_at {
                format!("<td>{at}</td>")
            } else {
                String::new()
            }
        );
    }
    o.push_str("</table></div>");
    o
}

fn json_cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "–".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn kv_table(title: &str, rows: &[(String, String)]) -> String {
    let mut o = format!("<div><h3>{}</h3><div class=\"tw\"><table>", esc(title));
    for (k, v) in rows {
        let _ = write!(
            o,
            r#"<tr><td>{}</td><td class="mono">{}</td></tr>"#,
            esc(k),
            esc(v)
        );
    }
    o.push_str("</table></div></div>");
    o
}

/// `2026-11-30 05:50:21 UTC` from Unix nanoseconds.
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn config_section(meta: &Result<Meta, String>) -> String {
    let m = match meta {
        Ok(m) => m,
        Err(e) => return format!(r#"<p class="warn">meta.json: {}</p>"#, esc(e)),
    };
    let mut o = String::from(r#"<div class="cfg">"#);
    // A merge of several clients has the first as `client`, the others
    // (client 2, 3, …) beside it; a relay run has its own settings.
    let more = m
        .config
        .more_clients
        .iter()
        .enumerate()
        .map(|(k, c)| (format!("client {}", k + 2), Some(c)));
    let parts = [
        ("server".to_string(), m.config.server.as_ref()),
        ("client".to_string(), m.config.client.as_ref()),
    ]
    .into_iter()
    .chain(more)
    .chain([
        ("relay".to_string(), m.config.relay.as_ref()),
        ("output".to_string(), m.config.output.as_ref()),
    ]);
    for (title, part) in parts {
        if let Some(map) = part {
            let rows: Vec<(String, String)> =
                map.iter().map(|(k, v)| (k.clone(), json_cell(v))).collect();
            o.push_str(&kv_table(&title, &rows));
        }
    }
    let mut run = vec![
        ("command".to_string(), m.command.clone()),
        ("status".to_string(), m.status.clone()),
        ("tool".to_string(), m.tool.clone()),
    ];
    if !m.argv.is_empty() {
        run.push(("argv".into(), m.argv.join(" ")));
    }
    if m.started_unix_ns > 0 {
        run.push(("started".into(), utc(m.started_unix_ns)));
    }
    if m.finished_unix_ns > m.started_unix_ns && m.started_unix_ns > 0 {
        run.push((
            "lasted".into(),
            format!(
                "{:.1} s",
                (m.finished_unix_ns - m.started_unix_ns) as f64 / 1e9
            ),
        ));
    }
    if let Some(l) = m.listen.as_ref().or(m.config.listen.as_ref()) {
        run.push(("listen".into(), l.clone()));
    }
    if let Some(c) = &m.config.connect {
        run.push(("connect".into(), c.clone()));
    }
    let mut recorder = format!(
        "{} events accepted, {} written, {} dropped",
        m.recorder.accepted,
        m.recorder.written,
        m.recorder.dropped_total()
    );
    if m.recorder.payload_dropped_frames > 0 {
        recorder += &format!(
            "; {} frames kept without their payload ({} B: --trace-payload-buffer, or past --trace-limit)",
            m.recorder.payload_dropped_frames, m.recorder.payload_dropped_bytes
        );
    }
    run.push(("recorder".into(), recorder));
    if !m.merged_from.is_empty() {
        run.push(("merged from".into(), m.merged_from.join(", ")));
    }
    o.push_str(&kv_table("run", &run));
    let h = &m.host;
    let host = vec![
        ("hostname".to_string(), h.hostname.clone()),
        ("os / arch".to_string(), format!("{} / {}", h.os, h.arch)),
        ("kernel".to_string(), h.kernel.clone()),
        ("cpus".to_string(), h.cpus.to_string()),
    ];
    o.push_str(&kv_table("host", &host));
    let versions: Vec<(String, String)> = m
        .versions
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !versions.is_empty() {
        o.push_str(&kv_table("crate versions", &versions));
    }
    o.push_str("</div>");
    o
}

fn legend() -> String {
    let mut o = String::from(r#"<div class="legend">"#);
    for (k, what) in [
        ("DATA", "DATA (client → server)"),
        ("WINDOW_UPDATE", "WINDOW_UPDATE (credit back to the client)"),
        ("other", "other frames"),
        ("chunk", "chunk: h2 hands bytes to the app"),
        ("release", "release_capacity"),
        ("decode", "message decoded"),
        ("enqueue", "enqueued (depth after)"),
        ("start", "worker starts"),
        ("complete", "worker completes"),
        ("send", "client: message handed to h2"),
    ] {
        let _ = write!(
            o,
            r#"<span><i style="background:{}"></i>{}</span>"#,
            ladder::color(k),
            esc(what)
        );
    }
    let _ = write!(
        o,
        r#"<span><i style="background:{};opacity:.5;height:9px"></i>queue depth</span><span><i style="background:repeating-linear-gradient(45deg,#ff7f0e 0 2px,#fff1e0 2px 5px);height:9px"></i>client blocked on credit</span></div>"#,
        ladder::color("enqueue")
    );
    o
}

/// The run's ladder. `events` and `upload` are when the trace's events and
/// its upload's DATA frames run, seconds since the trace origin (the
/// slice's axis and `--at`'s), for the hints; `None` when the summary does
/// not say (no events, no upload, or written by an older h2probe).
fn ladder_section(
    l: &Result<Ladder, String>,
    dir_arg: &str,
    events: Option<(f64, f64)>,
    upload: Option<(f64, f64)>,
) -> String {
    let l = match l {
        Ok(l) => l,
        Err(e) => return format!(r#"<p class="warn">No ladder: {}</p>"#, esc(e)),
    };
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<p><b>{} → {} s</b>: {}. Times are seconds since the trace origin, as on the plots' time axis. Each arrow leaves the sender's column when the sender's tap wrote the frame and reaches the receiver's column when the receiver's tap read it, to scale; the server's application steps are ticks beside its column. Hover an arrow or a tick for exact times.</p>"#,
        esc(&format!("{:.4}", l.secs(l.start))),
        esc(&format!("{:.4}", l.secs(l.end))),
        esc(&l.how),
    );
    // What the slice shows, in figures.
    let mut data = (0usize, 0u64);
    let mut wu = (0usize, 0u64, 0u64);
    for a in &l.arrows {
        match a.frame {
            crate::schema::FrameType::DATA => {
                data.0 += 1;
                data.1 += a.len as u64;
            }
            crate::schema::FrameType::WINDOW_UPDATE => {
                wu.0 += 1;
                let inc = a.increment.unwrap_or(0) as u64;
                if a.stream == 0 {
                    wu.2 += inc
                } else {
                    wu.1 += inc
                }
            }
            _ => {}
        }
    }
    let released: u64 = l
        .ticks
        .iter()
        .filter(|t| t.kind == "release")
        .filter_map(|t| t.text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    let mut facts = vec![
        format!("{} DATA frames ({} B) to the server", data.0, data.1),
        format!(
            "{} WINDOW_UPDATEs back (+{} B stream, +{} B connection credit)",
            wu.0, wu.1, wu.2
        ),
        // Releases are the server's: without its view, none can be counted.
        if l.server.is_some() {
            format!("{released} B released")
        } else {
            "released n/a (no server view)".to_string()
        },
    ];
    if let (Some(first), Some(last)) = (
        l.queue_before.or(l.queue.first().map(|q| q.1)),
        l.queue.last().map(|q| q.1),
    ) {
        facts.push(format!("queue depth {first} → {last}"));
    }
    let _ = write!(
        o,
        r#"<p><span class="badge b-info">in this slice</span> {}</p>"#,
        esc(&facts.join(" · "))
    );
    let conn = match (&l.client, &l.server) {
        (Some(c), Some(s)) => format!(
            "client conn {} ({}) ↔ server conn {} ({})",
            c.conn, c.local, s.conn, s.local
        ),
        (Some(c), None) => format!(
            "client conn {} ({} → {}); the trace has no server view of it",
            c.conn, c.local, c.peer
        ),
        (None, Some(s)) => format!(
            "server conn {} ({} ← {}); the trace has no client view of it",
            s.conn, s.local, s.peer
        ),
        (None, None) => "no connection has frames in this slice".into(),
    };
    let mut notes = vec![format!("Connection: {conn}.")];
    if l.arrows.is_empty() && l.ticks.is_empty() {
        notes.push(match (events, upload) {
            (_, Some((first, last))) => format!(
                "Nothing to draw in this slice: no frame, no application step (the upload's DATA frames run from {first:.3} s to {last:.3} s)."
            ),
            (Some((first, last)), None) => format!(
                "Nothing to draw in this slice: no frame, no application step (the trace's events run from {first:.3} s to {last:.3} s)."
            ),
            (None, None) => "Nothing to draw in this slice: the trace has no events.".to_string(),
        });
    }
    if l.other_conns > 0 {
        notes.push(format!(
            "{} other connection(s) had frames in this slice; they are not drawn.",
            l.other_conns
        ));
    }
    if l.capped() {
        notes.push(format!(
            "Capped: the slice holds {} arrows and ticks; the first {} are drawn (up to {:.4} s of a slice that ends at {:.4} s). Use a shorter --span to see the rest.",
            l.items_in_slice,
            l.arrows.len() + l.ticks.len(),
            l.secs(l.end),
            l.secs(l.slice_end)
        ));
    }
    if l.not_kept > 0 {
        notes.push(format!(
            "{} events of the slice were not read into memory (limit {}); some arrows may lack an end.",
            l.not_kept,
            ladder::MAX_KEPT
        ));
    }
    // An example inside the run: the middle of its upload (a queue may
    // drain long after the last DATA frame, with nothing on the wire), else
    // of its events; to the millisecond, on the origin's axis (the events
    // may begin seconds after it). Not the slice on show.
    if let Some((first, last)) = upload.or(events) {
        let at = ((first + last) / 2.0 * 1e3).round() / 1e3;
        if !(l.secs(l.start)..=l.secs(l.slice_end)).contains(&at) || l.slice_end <= l.start {
            notes.push(format!(
                "Another slice: <code>h2probe report {} --at {at:.3}s --span 20ms</code> (time since the trace origin).",
                esc(dir_arg),
            ));
        }
    }
    let _ = write!(
        o,
        r#"<p class="note">{}</p>"#,
        notes
            .iter()
            .map(|n| if n.contains("<code>") {
                n.clone()
            } else {
                esc(n)
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    o.push_str(&legend());
    // Said only where the window is narrower than the drawing (its
    // queue strip and the server's labels are then off to the right).
    o.push_str(r#"<p class="note ladder-narrow">The drawing is wider than this window: scroll it sideways for the server's labels and the queue strip.</p>"#);
    let _ = write!(o, r#"<div class="ladder-wrap">{}</div>"#, l.svg());
    o
}

/// Everything a run page is made of.
pub struct RunPage {
    pub title: String,
    /// The run directory as the user would type it (for commands shown).
    pub dir_arg: String,
    pub summary: Summary,
    pub headline: String,
    pub meta: Result<Meta, String>,
    pub ladder: Result<Ladder, String>,
    pub plots: Vec<(String, String)>,
    pub skipped_plots: Vec<String>,
    /// The run's files the page's footer names (see [`beside_in`]).
    pub beside: Vec<String>,
}

/// The files a run page names beside it ([`crate::RUN_FILES`] but the page
/// itself), those in `dir` or in `also` (products committed with the
/// page): the reference runs keep a gzipped trace and no CSV, and the
/// footer named trace.jsonl, timeline.csv and windows.csv all the same.
pub fn beside_in(dir: &Path, also: &[&str]) -> Vec<String> {
    crate::RUN_FILES
        .iter()
        .filter(|&&f| f != "report.html")
        .filter(|f| also.contains(f) || dir.join(f).is_file())
        .map(|f| f.to_string())
        .collect()
}

impl RunPage {
    /// Reads what the page needs from `dir` (meta.json, the plots, the
    /// trace's slice for the ladder).
    pub fn read(dir: &Path, summary: &Summary, opts: &LadderOpts) -> RunPage {
        RunPage::read_with_plots(dir, dir, summary, opts)
    }

    /// [`RunPage::read`] with the plots taken from `plots` (written aside,
    /// not yet in `dir`).
    pub fn read_with_plots(
        dir: &Path,
        plots: &Path,
        summary: &Summary,
        opts: &LadderOpts,
    ) -> RunPage {
        let meta = Meta::read(dir).map_err(|e| e.to_string());
        let opts = LadderOpts {
            queue_grows: summary.queue_grows_on_credit(),
            sort_whole: summary.late_written_events > 0,
            ..*opts
        };
        let ladder = match crate::reader::trace_path(dir) {
            Some(p) => ladder::build(&p, &opts).map_err(|e| e.to_string()),
            None => Err("the run directory has no trace".into()),
        };
        let (plots, skipped_plots) = run_svgs(plots);
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        RunPage {
            title: name,
            dir_arg: dir.display().to_string(),
            summary: summary.clone(),
            headline: crate::report::headline(summary),
            meta,
            ladder,
            plots,
            skipped_plots,
            beside: beside_in(dir, &[]),
        }
    }

    pub fn html(&self) -> String {
        let s = &self.summary;
        let mut b = String::new();
        let label = self
            .meta
            .as_ref()
            .ok()
            .and_then(|m| m.config_label())
            .unwrap_or_default();
        let status = match s.run_status.as_str() {
            "" | "complete" => String::new(),
            other => format!(r#" <span class="badge b-bad">{}</span>"#, esc(other)),
        };
        let when = self
            .meta
            .as_ref()
            .ok()
            .filter(|m| m.started_unix_ns > 0)
            .map(|m| utc(m.started_unix_ns))
            .unwrap_or_default();
        // Only the parts a run has, joined (a client or relay run has no
        // release point: the line began with a stray " · ").
        let sub: Vec<String> = [
            label,
            when,
            self.dir_arg.clone(),
            format!("trace {:.2} s", s.span_s),
        ]
        .into_iter()
        .filter(|x| !x.is_empty())
        .collect();
        let _ = write!(
            b,
            r##"<header><h1>h2probe run <span class="mono">{}</span>{status}</h1><div class="sub">{}</div><nav><a href="#headline">Headline</a><a href="#checks">Checks</a><a href="#ladder">Frame ladder</a><a href="#plots">Plots</a><a href="#config">Configuration</a></nav></header>"##,
            esc(&self.title),
            esc(&sub.join(" · ")),
        );
        let _ = write!(b, r#"<section id="headline"><h2>Headline</h2>"#);
        if !s.warnings.is_empty() {
            let _ = write!(
                b,
                r#"<div class="warn"><b>The analysis warned</b><ul>{}</ul></div>"#,
                s.warnings
                    .iter()
                    .map(|w| format!("<li>{}</li>", esc(w)))
                    .collect::<String>()
            );
        }
        b.push_str(&cards(s));
        let _ = write!(
            b,
            r#"<details open><summary>as printed by h2probe</summary><pre class="headline">{}</pre></details></section>"#,
            esc(&self.headline)
        );
        let _ = write!(
            b,
            r#"<section id="checks"><h2>Checks</h2>{}</section>"#,
            checks_table(s, &self.dir_arg)
        );
        if s.relay.is_some() && !s.has_client && !s.has_server {
            b.push_str(r#"<section id="ladder"><h2>Frame ladder</h2><p class="note">A relay run: the frame ladder draws the probe's own client and server, and this trace has neither. The relay's two legs are summarised above and in withheld.svg; merge the relay's trace with a probe client's and server's (<code>h2probe merge</code>) to draw their ladder.</p></section>"#);
        } else {
            let _ = write!(
                b,
                r#"<section id="ladder"><h2>Frame ladder</h2>{}</section>"#,
                ladder_section(
                    &self.ladder,
                    &self.dir_arg,
                    s.first_event_s.map(|first| (first, first + s.span_s)),
                    s.upload_data_s,
                )
            );
        }
        b.push_str(r#"<section id="plots"><h2>Plots</h2>"#);
        if self.plots.is_empty() {
            let _ = write!(
                b,
                r#"<p class="note">This run directory has no plots: <code>h2probe analyze {}</code> draws them.</p>"#,
                esc(&self.dir_arg)
            );
        }
        b.push_str(r#"<div class="plots">"#);
        for (name, svg) in &self.plots {
            let _ = write!(
                b,
                r#"<figure{}>{svg}<figcaption><b>{}</b> — {}</figcaption></figure>"#,
                if name == "credit.svg" {
                    r#" class="wide""#
                } else {
                    ""
                },
                esc(name),
                esc(caption(name))
            );
        }
        b.push_str("</div>");
        if !self.skipped_plots.is_empty() {
            let _ = write!(
                b,
                r#"<p class="warn">Not shown (not an SVG): {}</p>"#,
                esc(&self.skipped_plots.join(", "))
            );
        }
        b.push_str("</section>");
        let _ = write!(
            b,
            r#"<section id="config"><h2>Configuration</h2>{}</section>"#,
            config_section(&self.meta)
        );
        let _ = write!(
            b,
            r#"<p class="note" style="margin-top:40px">Written by {} from <code>{}</code>.{}</p>"#,
            esc(&format!("h2probe-analysis {}", env!("CARGO_PKG_VERSION"))),
            esc(&self.dir_arg),
            match self.beside.is_empty() {
                true => String::new(),
                false => format!(
                    " Beside it in the run directory: {}.",
                    self.beside
                        .iter()
                        .map(|f| match f.starts_with("trace.jsonl") {
                            true => format!(
                                "{} (every event; its format is in docs/trace-format.md)",
                                esc(f)
                            ),
                            false => esc(f),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        );
        page(&format!("h2probe · {}", self.title), &b)
    }
}

/// One run of a comparison.
pub struct CompareRun {
    pub dir: PathBuf,
    pub config: String,
    pub summary: Summary,
    /// Link to the run's own report.html, relative to the comparison page.
    pub link: String,
}

/// The comparison page of several runs: the table, the runs with links to
/// their own pages, and their plots side by side; Part 3's tables too when
/// every run is an `Exchange` run (without the article's figures: whether
/// the runs are its setting is `compare`'s to say).
pub fn compare_html(runs: &[CompareRun]) -> String {
    let refs = run_refs(runs);
    let part3 = (!refs.is_empty() && refs.iter().all(|r| r.summary.overload.is_some()))
        .then(|| crate::part3::markdown("", &refs, false));
    compare_html_with(runs, None, part3.as_deref())
}

fn run_refs(runs: &[CompareRun]) -> Vec<crate::compare::RunRef> {
    runs.iter()
        .map(|r| crate::compare::RunRef {
            config: r.config.clone(),
            dir: r.dir.clone(),
            summary: r.summary.clone(),
        })
        .collect()
}

/// The Markdown [`crate::part3::markdown`] writes (headings, pipe tables,
/// paragraphs) as HTML; its `#` title is the page's own.
fn markdown_html(md: &str) -> String {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut o = String::new();
    let mut lines = md.lines().map(str::trim).peekable();
    while let Some(l) = lines.next() {
        if l.is_empty() || l.starts_with("# ") {
            continue;
        }
        if let Some(h) = l.strip_prefix("## ") {
            let _ = write!(o, "<h3>{}</h3>", esc(h));
        } else if l.starts_with('|') {
            o.push_str(r#"<div class="tw"><table class="cmpt"><tr>"#);
            for (i, h) in cells(l).iter().enumerate() {
                let num = if i > 0 { r#" class="num""# } else { "" };
                let _ = write!(o, "<th{num}>{}</th>", esc(h));
            }
            o.push_str("</tr>");
            while let Some(row) = lines.next_if(|l| l.starts_with('|')) {
                if row.starts_with("|---") {
                    continue;
                }
                o.push_str("<tr>");
                for (i, c) in cells(row).iter().enumerate() {
                    let num = if i > 0 { r#" class="num""# } else { "" };
                    let _ = write!(o, "<td{num}>{}</td>", esc(c));
                }
                o.push_str("</tr>");
            }
            o.push_str("</table></div>");
        } else {
            let _ = write!(o, r#"<p class="note">{}</p>"#, esc(l));
        }
    }
    o
}

/// [`compare_html`], plus the plots `compare` drew across configurations
/// in `dir` (sweep.svg, compare-*.svg, part3-*.svg) when given, and the
/// Part 3 tables `part3` (Markdown) when the runs are `Exchange` runs.
pub fn compare_html_with(runs: &[CompareRun], dir: Option<&Path>, part3: Option<&str>) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        r##"<header><h1>h2probe comparison · {} runs</h1><div class="sub">{}</div><nav>{}<a href="#table">{}</a><a href="#runs">Runs</a>{}<a href="#plots">Plots side by side</a></nav></header>"##,
        runs.len(),
        if part3.is_some() {
            "Part 3 (overload policies): means over runs, (min–max) where they differ. \
             Part 1's figures below them: median over repeats, every attempt counted as a message."
        } else {
            "Median over repeats of one configuration, (min–max) where they differ. Rates in messages/s."
        },
        if part3.is_some() {
            r##"<a href="#part3">Part 3</a>"##
        } else {
            ""
        },
        if part3.is_some() {
            "Part 1 table"
        } else {
            "Table"
        },
        if dir.is_some() {
            r##"<a href="#across">Across configurations</a>"##
        } else {
            ""
        }
    );
    let across = dir.map(|d| run_svgs(d).0).unwrap_or_default();
    let figure = |b: &mut String, name: &str, svg: &str, what: &str| {
        let _ = write!(
            b,
            r#"<figure class="wide">{svg}<figcaption><b>{}</b> — {}</figcaption></figure>"#,
            esc(name),
            esc(what)
        );
    };
    if let Some(md) = part3 {
        // Part 3's plots with its tables, above Part 1's.
        let _ = write!(
            b,
            r#"<section id="part3"><h2>Overload policies (Part 3)</h2>{}<div class="plots">"#,
            markdown_html(md)
        );
        for (name, svg) in across.iter().filter(|(n, _)| n.starts_with("part3-")) {
            figure(&mut b, name, svg, caption(name));
        }
        b.push_str("</div></section>");
    }
    let refs = run_refs(runs);
    let rows = crate::compare::rows(&refs);
    let _ = write!(
        b,
        r#"<section id="table"><h2>{}</h2><div class="tw"><table class="cmpt"><tr>"#,
        if part3.is_some() {
            "Part 1's figures (median over repeats; every attempt a message)"
        } else {
            "Comparison"
        }
    );
    for (i, h) in crate::compare::HEADLINE.iter().enumerate() {
        let _ = write!(
            b,
            r#"<th{}>{}</th>"#,
            if i > 0 { r#" class="num""# } else { "" },
            esc(h)
        );
    }
    b.push_str("<th>checks</th></tr>");
    for r in &rows {
        b.push_str("<tr>");
        for (i, c) in crate::compare::headline_cells(r).iter().enumerate() {
            let _ = write!(
                b,
                r#"<td{}>{}</td>"#,
                if i > 0 { r#" class="num""# } else { "" },
                esc(c)
            );
        }
        let _ = write!(b, "<td>{}</td></tr>", {
            // Every run counted: failed, cannot be judged (both said),
            // and "hold" only when all of them hold.
            let mut badges = vec![];
            if r.failed_checks > 0 {
                badges.push(format!(
                    r#"<span class="badge b-bad">{} of {} run(s) failed</span>"#,
                    r.failed_checks, r.runs
                ));
            }
            if r.unjudged > 0 {
                badges.push(format!(
                    r#"<span class="badge b-na">{} of {} run(s) cannot be judged</span>"#,
                    r.unjudged, r.runs
                ));
            }
            if badges.is_empty() {
                badges.push(r#"<span class="badge b-ok">hold</span>"#.into());
            }
            badges.join(" ")
        });
    }
    b.push_str("</table></div>");
    b.push_str(r#"<h3>WINDOW_UPDATEs and outcomes</h3><div class="tw"><table class="cmpt"><tr><th>configuration</th><th class="num">WINDOW_UPDATE out</th><th class="num">mean stream increment B</th><th class="num">release→update p50 ms</th><th class="num">p90 ms</th><th class="num">scheduled</th><th class="num">completed</th><th class="num">discarded</th><th class="num">never sent</th><th>RPC status</th></tr>"#);
    for r in &rows {
        let cells = crate::compare::outcome_cells(r);
        let (status, numbers) = cells.split_last().expect("nine cells");
        let _ = write!(b, "<tr><td>{}</td>", esc(&r.config));
        for c in numbers {
            let _ = write!(b, r#"<td class="num">{}</td>"#, esc(c));
        }
        let _ = write!(b, "<td>{}</td></tr>", esc(status));
    }
    b.push_str("</table></div></section>");

    b.push_str(r#"<section id="runs"><h2>Runs</h2><div class="tw"><table class="runs"><tr><th>#</th><th>configuration</th><th>run directory</th><th>report</th><th class="num">queue growth/s</th><th class="num">peak queue</th><th>checks</th></tr>"#);
    for (i, r) in runs.iter().enumerate() {
        let s = &r.summary;
        let failed = s.checks.values().filter(|c| c.ok == Some(false)).count();
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td>{}</td><td class="mono">{}</td><td><a href="{}">report.html</a></td><td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>"#,
            i + 1,
            esc(&r.config),
            esc(&r.dir.display().to_string()),
            esc(&r.link),
            // Under Part 3's admission bound the queue cannot outgrow its
            // slots: the table above says n/a, and so does this one.
            if s.overload.is_some() {
                "n/a".to_string()
            } else {
                signed(s.queue_growth_rate, 1)
            },
            s.max_queue_depth,
            if failed > 0 {
                format!(r#"<span class="badge b-bad">{failed} FAILED</span>"#)
            } else if crate::compare::unjudged(s) {
                r#"<span class="badge b-na">cannot be judged</span>"#.into()
            } else {
                r#"<span class="badge b-ok">hold</span>"#.into()
            }
        );
    }
    b.push_str("</table></div></section>");

    if dir.is_some() {
        b.push_str(r#"<section id="across"><h2>Across configurations</h2><div class="plots">"#);
        for (name, svg) in across.iter().filter(|(n, _)| {
            n == "sweep.svg"
                || n.starts_with("compare-")
                || (n.starts_with("part3-") && part3.is_none())
        }) {
            let what = if name == "sweep.svg" {
                "the headline figures against the swept parameter (median, min–max whiskers over repeats)"
            } else if name.starts_with("part3-") {
                caption(name)
            } else if name == "compare-credit.svg" {
                "one panel per configuration (its first repeat), on one scale"
            } else {
                "one line per configuration (its first repeat)"
            };
            figure(&mut b, name, svg, what);
        }
        b.push_str("</div></section>");
    }

    // Plots side by side: one row per plot, one column per run.
    b.push_str(r#"<section id="plots"><h2>Plots side by side</h2>"#);
    let svgs: Vec<Vec<(String, String)>> = runs.iter().map(|r| run_svgs(&r.dir).0).collect();
    let mut names: Vec<String> = vec![];
    for set in &svgs {
        for (n, _) in set {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let cols = runs.len().clamp(1, 4);
    for name in &names {
        let _ = write!(
            b,
            r#"<h3>{} <span class="note">— {}</span></h3><div class="cmp" style="grid-template-columns:repeat({cols},minmax(0,1fr))">"#,
            esc(name),
            esc(caption(name))
        );
        for (r, set) in runs.iter().zip(&svgs) {
            let svg = set.iter().find(|(n, _)| n == name).map(|(_, s)| s.as_str());
            // The plot beside the run's report.html, at full size (a
            // thumbnail of four across cannot be read).
            let full = svg.map_or(String::new(), |_| {
                let at = match r.link.rsplit_once('/') {
                    Some((d, _)) => format!("{d}/{}", url_text(name)),
                    None => url_text(name),
                };
                format!(r#" · <a href="{}">full size</a>"#, esc(&at))
            });
            let _ = write!(
                b,
                r#"<figure>{}<figcaption><b>{}</b> · {} · <a href="{}">report</a>{full}</figcaption></figure>"#,
                svg.unwrap_or(r#"<p class="note">(none)</p>"#),
                esc(&r.config),
                esc(&r.dir.file_name().map_or_else(
                    || r.dir.display().to_string(),
                    |n| n.to_string_lossy().into_owned()
                )),
                esc(&r.link)
            );
        }
        b.push_str("</div>");
    }
    b.push_str("</section>");
    page("h2probe comparison", &b)
}

/// `to` as a link from a page in directory `from` (relative when both
/// resolve, else a `file://` URL), percent-encoding what a URL cannot hold.
pub fn link(from: &Path, to: &Path) -> String {
    let abs = |p: &Path| {
        p.canonicalize().unwrap_or_else(|_| {
            std::env::current_dir()
                .map(|c| c.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        })
    };
    let (from, to) = (abs(from), abs(to));
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let rel = if common > 0 {
        let mut parts: Vec<String> = vec!["..".into(); f.len() - common];
        parts.extend(
            t[common..]
                .iter()
                .map(|c| c.as_os_str().to_string_lossy().into_owned()),
        );
        parts.join("/")
    } else {
        format!("file://{}", to.display())
    };
    url_text(&rel)
}

/// `s` percent-encoded where a URL cannot hold it as written.
fn url_text(s: &str) -> String {
    let mut o = String::new();
    for ch in s.chars() {
        match ch {
            ' ' => o.push_str("%20"),
            '#' => o.push_str("%23"),
            '?' => o.push_str("%3F"),
            '%' => o.push_str("%25"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard plots first in reading order, then the rest by name;
    /// a file that is not an SVG is named, not shown.
    #[test]
    fn a_runs_plots_come_in_reading_order_and_a_non_svg_is_named() {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in [
            ("zeta.svg", "<svg></svg>"),
            ("alpha.svg", "<svg></svg>"),
            ("queue.svg", "<svg></svg>"),
            ("credit.svg", "<svg></svg>"),
            ("broken.svg", "not an image"),
            ("notes.txt", "<svg></svg>"),
        ] {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        let (shown, skipped) = run_svgs(dir.path());
        let names: Vec<&str> = shown.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["credit.svg", "queue.svg", "alpha.svg", "zeta.svg"]);
        assert_eq!(skipped, ["broken.svg"]);
        assert!(shown[0]
            .1
            .starts_with(r#"<img class="plot" alt="credit.svg" src="data:"#));
    }

    /// Signs, a Markdown table as HTML, and a link from one page to another.
    #[test]
    fn signs_tables_and_links_read_as_written() {
        assert_eq!(signed(1.25, 1), "+1.2");
        assert_eq!(signed(-0.3, 1), "-0.3");
        assert_eq!(signed(-0.04, 1), "0.0");
        assert_eq!(signed(0.0, 2), "0.00");
        assert_eq!(signed(10.0, 0), "+10");
        let html = markdown_html(
            "# Title\n\n## Where <it> went\n\n| config | N |\n|---|---|\n| a&b | 3 |\n\nA note.\n",
        );
        assert_eq!(
            html,
            "<h3>Where &lt;it&gt; went</h3>\
             <div class=\"tw\"><table class=\"cmpt\"><tr><th>config</th><th class=\"num\">N</th></tr>\
             <tr><td>a&amp;b</td><td class=\"num\">3</td></tr></table></div>\
             <p class=\"note\">A note.</p>"
        );
        let root = tempfile::tempdir().unwrap();
        let (from, to) = (
            root.path().join("cmp"),
            root.path().join("run #1?/report.html"),
        );
        std::fs::create_dir_all(&from).unwrap();
        assert_eq!(link(&from, &to), "../run%20%231%3F/report.html");
        assert_eq!(link(root.path(), &root.path().join("a%b")), "a%25b");
    }

    /// The checks card: failures lead, a trace in doubt turns "cannot be
    /// judged" into an alert and says why, else what holds; and the table
    /// lists failures, then the unjudged, then what holds, a failure with
    /// where to look.
    #[test]
    fn the_checks_card_and_table_put_failures_first() {
        let check = |ok: Option<bool>, t: Option<f64>, line: Option<u64>| Check {
            ok,
            detail: format!("<{ok:?}>"),
            first_t_s: t,
            first_line: line,
        };
        let with = |checks: &[(&str, Check)], corrupt: u64| Summary {
            checks: checks
                .iter()
                .map(|(n, c)| (n.to_string(), c.clone()))
                .collect(),
            corrupt_lines: corrupt,
            ..Summary::default()
        };
        let (held, unknown) = (check(Some(true), None, None), check(None, None, None));
        let card_of = |s: &Summary| checks_card(s);
        assert!(card_of(&with(&[("a", held.clone())], 0))
            .starts_with(r#"<div class="card good"><div class="k">invariant checks</div><div class="v">all hold</div><div class="n">1 hold · 0 failed · 0 cannot be judged (of 1)</div>"#));
        assert!(card_of(&with(&[("a", held.clone()), ("b", unknown.clone())], 0))
            .starts_with(r#"<div class="card "><div class="k">invariant checks</div><div class="v">1 hold</div>"#));
        let doubt = card_of(&with(&[("a", held.clone()), ("b", unknown.clone())], 2));
        assert!(
            doubt.starts_with(r#"<div class="card alert"><div class="k">invariant checks</div><div class="v">1 cannot be judged</div><div class="n">2 corrupt lines were skipped"#),
            "{doubt}"
        );
        // A trace in doubt whose checks all held: the doubt leads the note.
        let held_in_doubt = card_of(&with(&[("a", held.clone())], 1));
        assert!(
            held_in_doubt.starts_with(r#"<div class="card good"><div class="k">invariant checks</div><div class="v">all hold</div><div class="n">1 corrupt line was skipped"#),
            "{held_in_doubt}"
        );
        let failed = check(Some(false), Some(0.004), Some(12));
        let s = with(
            &[("a", held.clone()), ("b", unknown.clone()), ("z", failed)],
            0,
        );
        assert!(card_of(&s).starts_with(r#"<div class="card alert"><div class="k">invariant checks</div><div class="v">1 FAILED</div><div class="n">1 hold · 1 failed · 1 cannot be judged (of 3)</div>"#));
        let table = checks_table(&s, "runs/a b");
        let (z, b, a) = (
            table.find("<code>z</code>").unwrap(),
            table.find("<code>b</code>").unwrap(),
            table.find("<code>a</code>").unwrap(),
        );
        assert!(z < b && b < a, "{table}");
        assert!(
            table.contains(r#"<tr class="failed"><td><code>z</code></td>"#),
            "{table}"
        );
        assert!(table.contains("<td>&lt;Some(false)&gt;</td>"), "{table}");
        assert!(
            table.contains(r#"<td>at 0.004000 s, trace line 12<br><span class="note">see it: <code>h2probe report runs/a b --at 0.000s --span 20ms</code></span></td>"#),
            "{table}"
        );
        let later = with(&[("z", check(Some(false), Some(2.5), None))], 0);
        assert!(checks_table(&later, "r").contains(
            "<td>at 2.500000 s<br><span class=\"note\">see it: <code>h2probe report r --at 2.490s"
        ));
        assert!(checks_table(&Summary::default(), "r").contains("No checks"));
        // The event column when a check names an event, and only then.
        assert!(table.contains("<th>first offending event</th>"));
        assert_eq!(table.matches("<td>").count(), 3 * 4, "{table}");
        let none_named = checks_table(&with(&[("a", held), ("b", unknown)], 0), "r");
        assert!(
            !none_named.contains("first offending event"),
            "{none_named}"
        );
        assert_eq!(none_named.matches("<td>").count(), 2 * 3, "{none_named}");
    }

    /// The headline cards: a relay alone gets the relay's; credit waits
    /// are an alert; growth needs both sides; figures without a sample
    /// are said so, not zeros.
    #[test]
    fn the_cards_alert_on_credit_waits_and_name_what_has_no_sample() {
        let both = Summary {
            has_client: true,
            has_server: true,
            ..Summary::default()
        };
        let card_with = |s: &Summary, key: &str| -> String {
            let html = cards(s);
            let at = html
                .find(&format!(r#"<div class="k">{key}</div>"#))
                .unwrap_or_else(|| panic!("no {key} card in {html}"));
            let start = html[..at].rfind("<div class=\"card").unwrap();
            html[start..]
                .split("</div></div>")
                .next()
                .unwrap()
                .to_string()
        };
        let calm = card_with(&both, "client blocked on credit");
        assert!(calm.starts_with(r#"<div class="card ">"#), "{calm}");
        assert!(
            calm.ends_with("h2 buffer 0.00 s · socket 0.000 s"),
            "{calm}"
        );
        let mut waited = both.clone();
        waited.client_window_blocked_s = 0.5;
        waited.not_open_blocked_ms.count = 2;
        waited.client_not_open_blocked_s = 0.25;
        let waited = card_with(&waited, "client blocked on credit");
        assert!(
            waited.starts_with(r#"<div class="card alert">"#),
            "{waited}"
        );
        assert!(waited.ends_with(" · stream not open 0.25 s"), "{waited}");
        let updates = card_with(&both, "WINDOW_UPDATEs out");
        assert!(
            updates.ends_with("none at stream level · release→update p50 n/a"),
            "{updates}"
        );
        let mut sampled = both.clone();
        sampled.window_update_increment.count = 3;
        sampled.window_update_increment.mean = 16384.0;
        sampled.release_to_update_ms.count = 3;
        sampled.release_to_update_ms.p50 = 0.125;
        let sampled = card_with(&sampled, "WINDOW_UPDATEs out");
        assert!(
            sampled.ends_with("stream mean +16384 B · release→update p50 0.12 ms"),
            "{sampled}"
        );
        // Growth is a two-sided figure: a client alone has none to alert on.
        let mut grows = both.clone();
        grows.queue_growth_in_window = 5.0;
        grows.queue_growth_rate = 50.0;
        assert!(card_with(&grows, "queue growth").starts_with(r#"<div class="card alert">"#));
        let client_alone = Summary {
            has_server: false,
            ..grows
        };
        let growth = card_with(&client_alone, "queue growth");
        assert!(
            growth.starts_with(
                r#"<div class="card "><div class="k">queue growth</div><div class="v">n/a</div>"#
            ),
            "{growth}"
        );
        // A relay alone: its own cards; with an endpoint's trace, the run's.
        let relay = Summary {
            relay: Some(Default::default()),
            ..Summary::default()
        };
        assert!(cards(&relay).contains(r#"<div class="k">client waiting on credit</div>"#));
        assert!(!cards(&relay).contains("sent (steady)"));
        for (c, sv) in [(true, false), (false, true)] {
            let merged = Summary {
                has_client: c,
                has_server: sv,
                ..relay.clone()
            };
            assert!(cards(&merged).contains("sent (steady)"), "{c} {sv}");
        }
        // Messages never sent are on the sending card.
        let held_back = Summary {
            has_client: true,
            offered_rate: 300.0,
            never_sent: 316,
            ..Summary::default()
        };
        assert!(
            cards(&held_back).contains(r#"<div class="n">offered 300.0/s · 316 never sent</div>"#)
        );
        assert!(cards(&Summary {
            never_sent: 0,
            ..held_back
        })
        .contains(r#"<div class="n">offered 300.0/s</div>"#));
        // A Part 3 run's peak owned is told apart from the admitted peak.
        let part3 = Summary {
            has_server: true,
            max_owned_bytes: 1 << 20,
            overload: Some(Default::default()),
            ..Summary::default()
        };
        assert!(cards(&part3).contains(
            "1.00 MiB owned by the application (decoded, not yet done: admitted or not)"
        ));
        let part1 = Summary {
            overload: None,
            ..part3
        };
        assert!(cards(&part1).contains("1.00 MiB owned by the application</div>"));
    }

    /// A configuration value as a cell (null as a dash), in an escaped table.
    #[test]
    fn configuration_tables_give_each_value_as_written() {
        assert_eq!(json_cell(&serde_json::Value::Null), "–");
        assert_eq!(json_cell(&serde_json::json!("frame")), "frame");
        assert_eq!(json_cell(&serde_json::json!(65535)), "65535");
        assert_eq!(json_cell(&serde_json::json!([1, "a"])), r#"[1,"a"]"#);
        assert_eq!(
            kv_table(
                "server <1>",
                &[("queue".into(), "bounded:32 & more".into())]
            ),
            r#"<div><h3>server &lt;1&gt;</h3><div class="tw"><table><tr><td>queue</td><td class="mono">bounded:32 &amp; more</td></tr></table></div></div>"#
        );
    }

    #[test]
    fn utc_dates_count_leap_days() {
        let at = |s: u64| utc(s * 1_000_000_000 + 999_999_999);
        assert_eq!(at(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(at(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(at(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(at(1_709_251_199), "2024-02-29 23:59:59 UTC");
        assert_eq!(at(1_709_251_200), "2024-03-01 00:00:00 UTC");
        assert_eq!(at(4_107_542_400), "2100-03-01 00:00:00 UTC");
    }

    /// Part 3's cards: on time short of every original is an alert; a
    /// side the trace lacks leaves its figures n/a.
    #[test]
    fn part3_cards_alert_on_late_originals_and_leave_a_missing_side_na() {
        let ov = crate::analyze::overload::Overload {
            originals: 10,
            on_time: 9,
            useful_fraction: 0.9,
            owned_mib_s: 0.25,
            phases: vec![crate::analyze::overload::PhaseLatency {
                phase: "before".into(),
                p95_s: Some(0.5),
                ..Default::default()
            }],
            ..Default::default()
        };
        let cards = |ov: &crate::analyze::overload::Overload, c: bool, s: bool| {
            let mut o = String::new();
            part3_cards(&mut o, ov, c, s);
            o
        };
        let both = cards(&ov, true, true);
        assert!(both.starts_with(r#"<div class="card alert"><div class="k">useful (on time)</div><div class="v">90.0 %</div><div class="n">9 of 10 originals · late 0"#), "{both}");
        assert!(
            both.contains(
                r#"<div class="v">0.500 s</div><div class="n">before (completed originals)</div>"#
            ),
            "{both}"
        );
        assert!(
            both.contains(r#"<div class="v">0.250 MiB·s</div>"#),
            "{both}"
        );
        // On time short of every original, but the client's figure unknown.
        assert!(cards(&ov, false, true).starts_with(r#"<div class="card "><div class="k">useful"#));
        let all = crate::analyze::overload::Overload {
            on_time: 10,
            ..ov.clone()
        };
        assert!(cards(&all, true, true)
            .starts_with(r#"<div class="card "><div class="k">useful (on time)"#));
        let server_only = cards(&ov, false, true);
        assert!(server_only.starts_with(r#"<div class="card "><div class="k">useful (on time)</div><div class="v">n/a</div><div class="n">the originals are the client&#39;s"#), "{server_only}");
        assert!(
            server_only.contains(
                r#"<div class="v">n/a</div><div class="n">retries are the client&#39;s</div>"#
            ),
            "{server_only}"
        );
        assert!(
            server_only
                .contains(r#"<div class="k">latency p95 by phase</div><div class="v">n/a</div>"#),
            "{server_only}"
        );
        let none = crate::analyze::overload::Overload {
            originals: 0,
            on_time: 0,
            ..ov.clone()
        };
        assert!(cards(&none, true, true)
            .starts_with(r#"<div class="card "><div class="k">useful (on time)</div><div class="v">n/a</div><div class="n">0 of 0 originals"#));
        let client_only = cards(&ov, true, false);
        assert!(client_only.contains(r#"<div class="k">server-owned</div><div class="v">n/a</div><div class="n">admitted peak n/a · client pending ≤ 0"#), "{client_only}");
        let no_phase = crate::analyze::overload::Overload {
            phases: vec![],
            ..ov
        };
        assert!(cards(&no_phase, true, true)
            .contains(r#"<div class="k">latency p95 by phase</div><div class="v">n/a</div>"#));
    }

    /// A plot file is shown as an image of itself, whatever it holds: its
    /// scripts, handlers, styles, meta refreshes and early `</svg>` never
    /// reach the page; and the page's policy forbids scripts outright.
    #[test]
    fn a_plot_file_is_shown_as_an_image_that_cannot_act_on_the_page() {
        let hostile = "<?xml version=\"1.0\"?>\n<svg width=\"10\"onload=\"alert(1)\">\
            <style>.warn{display:none}</style><meta http-equiv=\"refresh\" content=\"0;url=x\">\
            <!-- </svg><h1>forged</h1>\n";
        let img = svg_image("a\"b.svg", hostile.as_bytes()).unwrap();
        let b64 = img
            .strip_prefix(r#"<img class="plot" alt="a&quot;b.svg" src="data:image/svg+xml;base64,"#)
            .and_then(|r| r.strip_suffix(r#"">"#))
            .unwrap_or_else(|| panic!("{img}"));
        assert_eq!(
            base64_simd::STANDARD.decode_to_vec(b64).unwrap(),
            hostile.as_bytes()
        );
        for raw in ["<svg", "onload", "<style", "<meta", "<h1", "<!--"] {
            assert!(!img.contains(raw), "{raw} in {img}");
        }
        assert_eq!(svg_image("x.svg", b"<html>no svg</html>"), None);
        assert_eq!(svg_image("x.svg", b"\xff<svg></svg>"), None);
        let html = page("t", "");
        assert!(
            html.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"),
            "{html}"
        );
    }

    /// The comparison page never calls a run "hold" that failed or cannot
    /// be judged, and counts each kind in a group.
    #[test]
    fn the_comparison_page_counts_runs_that_cannot_be_judged() {
        let check = |ok: Option<bool>| crate::analyze::Check {
            ok,
            ..Default::default()
        };
        let run = |name: &str, credit: Option<bool>, corrupt: u64| CompareRun {
            dir: PathBuf::from(format!("/runs/{name}")),
            config: "release=frame queue=direct".into(),
            summary: Summary {
                checks: [
                    ("credit".to_string(), check(credit)),
                    ("no_dropped_events".to_string(), check(Some(true))),
                ]
                .into_iter()
                .collect(),
                corrupt_lines: corrupt,
                ..Summary::default()
            },
            link: format!("{name}/report.html"),
        };
        let html = compare_html(&[
            run("sound", Some(true), 0),
            run("damaged", None, 1),
            run("failed", Some(false), 0),
        ]);
        assert!(html.contains("1 of 3 run(s) failed"), "{html}");
        assert!(html.contains("1 of 3 run(s) cannot be judged"), "{html}");
        // Per run: one each.
        assert_eq!(
            html.matches(r#"<span class="badge b-ok">hold</span>"#)
                .count(),
            1
        );
        assert_eq!(
            html.matches(r#"<span class="badge b-na">cannot be judged</span>"#)
                .count(),
            1
        );
    }

    /// The plots across configurations go where they belong, each with
    /// its caption: the sweep and compare-* ones under "Across
    /// configurations", Part 3's with its tables (or there, without them);
    /// side by side, a row per plot any run has, "(none)" where a run
    /// lacks it, and the nav names the sections the page has.
    #[test]
    fn a_comparisons_plots_are_placed_and_captioned() {
        let root = tempfile::tempdir().unwrap();
        let svg = |dir: &Path, name: &str| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join(name), format!("<svg><text>{name}</text></svg>")).unwrap();
        };
        let cmp = root.path().join("cmp");
        for n in [
            "sweep.svg",
            "compare-credit.svg",
            "compare-queue.svg",
            "part3-owned.svg",
            "notes.svg",
        ] {
            svg(&cmp, n);
        }
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        svg(&a, "credit.svg");
        svg(&a, "queue.svg");
        svg(&b, "queue.svg");
        let runs: Vec<CompareRun> = [("A", &a), ("B", &b)]
            .into_iter()
            .map(|(c, d)| CompareRun {
                dir: d.clone(),
                config: c.into(),
                summary: Summary::default(),
                link: format!("../{}/report.html", c.to_lowercase()),
            })
            .collect();
        let caption_of = |html: &str, name: &str| -> Option<String> {
            let at = html.find(&format!("<b>{name}</b> — "))?;
            let rest = &html[at + name.len() + 12..];
            Some(rest[..rest.find("</figcaption>").unwrap()].to_string())
        };
        let section = |html: &str, id: &str| -> String {
            let at = html.find(&format!(r#"<section id="{id}">"#)).unwrap();
            let rest = &html[at..];
            rest[..rest.find("</section>").unwrap()].to_string()
        };
        // Without Part 3's tables: its plot is across configurations.
        let html = compare_html_with(&runs, Some(&cmp), None);
        let across = section(&html, "across");
        assert_eq!(
            caption_of(&across, "sweep.svg").as_deref(),
            Some("the headline figures against the swept parameter (median, min–max whiskers over repeats)")
        );
        assert_eq!(
            caption_of(&across, "compare-credit.svg").as_deref(),
            Some("one panel per configuration (its first repeat), on one scale")
        );
        assert_eq!(
            caption_of(&across, "compare-queue.svg").as_deref(),
            Some("one line per configuration (its first repeat)")
        );
        assert_eq!(
            caption_of(&across, "part3-owned.svg").as_deref(),
            Some(esc(caption("part3-owned.svg")).as_str())
        );
        assert!(!across.contains("notes.svg"), "{across}");
        assert!(html.contains(r##"<a href="#across">Across configurations</a>"##));
        assert!(!html.contains(r##"<a href="#part3">"##));
        // With them: Part 3's plot beside its tables, once.
        let html = compare_html_with(
            &runs,
            Some(&cmp),
            Some("## T\n| a | b |\n|---|---|\n| 1 | 2 |"),
        );
        assert!(section(&html, "part3").contains("<b>part3-owned.svg</b>"));
        assert!(!section(&html, "across").contains("part3-owned.svg"));
        assert_eq!(html.matches("<b>part3-owned.svg</b>").count(), 1);
        assert!(html.contains(r##"<a href="#part3">Part 3</a>"##));
        // Side by side: credit.svg (a's only) and queue.svg (both).
        let plots = section(&html, "plots");
        assert_eq!(plots.matches("<h3>").count(), 2, "{plots}");
        assert!(plots.find("<h3>credit.svg").unwrap() < plots.find("<h3>queue.svg").unwrap());
        let rows: Vec<&str> = plots.split("<h3>").skip(1).collect();
        let none = r#"<p class="note">(none)</p>"#;
        assert_eq!(rows[0].matches(none).count(), 1, "b has no credit.svg");
        assert_eq!(rows[1].matches(none).count(), 0, "both have queue.svg");
        assert_eq!(plots.matches(">full size</a>").count(), 3);
        assert!(plots.contains(r#"<a href="../a/credit.svg">full size</a>"#));
        // No directory: no section across, and no link to one.
        let html = compare_html_with(&runs, None, None);
        assert!(!html.contains(r#"id="across""#) && !html.contains("#across"));
    }

    /// Part 3's tables head the page when every run is an Exchange run,
    /// and only then (Part 1's runs have no overload figures).
    #[test]
    fn the_comparison_page_has_part_3_only_for_exchange_runs() {
        let run = |name: &str, exchange: bool| CompareRun {
            dir: PathBuf::from(format!("/runs/{name}-r1")),
            config: name.to_uppercase(),
            summary: Summary {
                overload: exchange.then(Default::default),
                ..Summary::default()
            },
            link: format!("{name}/report.html"),
        };
        let part3 = "<h2>Overload policies (Part 3)</h2>";
        assert!(compare_html(&[run("wait", true), run("reject", true)]).contains(part3));
        for runs in [
            vec![run("frame", false), run("complete", false)],
            vec![run("wait", true), run("frame", false)],
            vec![],
        ] {
            let html = compare_html(&runs);
            assert!(!html.contains(part3), "{html}");
            assert!(html.contains("<h2>Comparison</h2>"), "{html}");
        }
    }

    /// A unary run's page gives its calls' latency as the headline does,
    /// and a run of streams has no such card.
    #[test]
    fn a_unary_runs_page_gives_its_calls_latency() {
        let dist = |count: u64, p50: f64, p99: f64| crate::stats::Distribution {
            count,
            p50,
            p99,
            ..Default::default()
        };
        let mut s = Summary {
            has_client: true,
            has_server: true,
            unary: true,
            call_ms: dist(488, 43.3, 55.4),
            response_ms: dist(488, 733.2, 847.7),
            ..Summary::default()
        };
        let html = cards(&s);
        assert!(
            html.contains(r#"<div class="k">unary call p50</div><div class="v">43.3ms</div>"#),
            "{html}"
        );
        assert!(
            html.contains("p99 55.4ms over 488 calls that ended OK · response (from the scheduled time, the backlog&#39;s wait included) p50 733.2ms · p99 847.7ms"),
            "{html}"
        );
        // No stream-level WINDOW_UPDATE and no release timed: not zeros.
        assert!(
            html.contains("none at stream level · release→update p50 n/a"),
            "{html}"
        );
        s.call_ms = dist(0, 0.0, 0.0);
        let html = cards(&s);
        let card = &html[html.find("unary call p50").unwrap()..];
        let card = &card[..card.find("</div></div>").unwrap_or(card.len())];
        assert!(
            card.ends_with(r#"<div class="v">n/a</div><div class="n">n/a"#),
            "none ended OK: n/a, {card}"
        );
        s.unary = false;
        assert!(!cards(&s).contains("unary call"));
    }

    /// The growth finding and the alert cards come together, and only for
    /// a queue that grew on a rising slope: one message more at the
    /// window's last bucket on a flat slope raised the red finding beside
    /// a "+0.0 msg/s" card.
    #[test]
    fn the_growth_finding_and_alerts_need_a_queue_that_grew() {
        let page = |rate: f64, grown: f64| {
            cards(&Summary {
                has_client: true,
                has_server: true,
                queue_growth_rate: rate,
                queue_growth_in_window: grown,
                ..Summary::default()
            })
        };
        let flat = page(0.0, 1.0);
        assert!(!flat.contains(r#"class="finding""#), "{flat}");
        assert!(!flat.contains("card alert"), "{flat}");
        let grew = page(209.7, 753.0);
        assert!(grew.contains(r#"class="finding""#), "{grew}");
        assert!(
            grew.contains("the queue grew by <b>753 messages</b>"),
            "{grew}"
        );
        assert_eq!(grew.matches("card alert").count(), 2, "{grew}");
        // A rising slope that ended where it began: no finding, no alert.
        let back = page(5.0, 0.0);
        assert!(
            !back.contains(r#"class="finding""#) && !back.contains("card alert"),
            "{back}"
        );
    }

    /// The page's suggested `--at` lies among the events, on the origin's
    /// axis: a serve-only trace's events began 5.27 s after its origin, and
    /// the span's middle alone (0.1 s) drew an empty slice.
    #[test]
    fn another_slice_is_suggested_where_the_frames_are() {
        let empty = Ok(Ladder::default());
        let html = ladder_section(&empty, "run", Some((5.27, 5.53)), None);
        assert!(html.contains("--at 5.400s --span 20ms"), "{html}");
        assert!(
            html.contains("events run from 5.270 s to 5.530 s)."),
            "{html}"
        );
        // Events of 40 ms: the middle, not rounded past them.
        let html = ladder_section(&empty, "run", Some((5.2, 5.24)), None);
        assert!(html.contains("--at 5.220s"), "{html}");
        // A default run: DATA frames until 2 s, its queue draining until
        // 6.7 s with nothing on the wire. The middle of the events (3.35 s)
        // would draw nothing; the middle of the DATA frames does.
        let html = ladder_section(&empty, "run", Some((0.001, 6.7)), Some((0.002, 2.0)));
        assert!(html.contains("--at 1.001s"), "{html}");
        assert!(
            html.contains("upload&#39;s DATA frames run from 0.002 s to 2.000 s"),
            "{html}"
        );
        // Not the slice already on show (`report --at` the suggestion).
        let shown = Ok(Ladder {
            start: 991_000_000,
            slice_end: 1_011_000_000,
            ..Ladder::default()
        });
        let html = ladder_section(&shown, "run", Some((0.001, 6.7)), Some((0.002, 2.0)));
        assert!(!html.contains("Another slice"), "{html}");
        // A summary that does not say (an older h2probe's, or no events):
        // no times made up.
        let html = ladder_section(&empty, "run", None, None);
        assert!(
            html.contains("Nothing to draw in this slice: the trace has no events."),
            "{html}"
        );
        assert!(!html.contains("Another slice"), "{html}");
    }

    /// The configuration section gives every part meta.json has, the run's
    /// facts only when known, and says when meta.json could not be read.
    #[test]
    fn the_configuration_section_gives_what_meta_json_holds() {
        let meta: Meta = serde_json::from_value(serde_json::json!({
            "schema": 1, "tool": "h2probe 9.9", "command": "merge",
            "argv": ["h2probe", "merge", "a", "b"],
            "config": {
                "server": {"release": "frame"},
                "client": {"rate": 300},
                "more_clients": [{"rate": 600}, {"rate": 900}],
                "relay": {"hold": "10ms"},
                "output": {"pcap": true},
                "listen": "127.0.0.1:1",
                "connect": "127.0.0.1:2"
            },
            "host": {"hostname": "lab", "os": "linux", "arch": "x86_64", "kernel": "6.1", "cpus": 2},
            "started_unix_ns": 1_700_000_000_000_000_000u64,
            "finished_unix_ns": 1_700_000_002_500_000_000u64,
            "status": "complete",
            "recorder": {"accepted": 10, "written": 7, "dropped": {"full": 2, "io": 1},
                "payload_dropped_frames": 4, "payload_dropped_bytes": 65536},
            "merged_from": ["a", "b"],
            "versions": {"h2": "0.4.20"}
        }))
        .unwrap();
        let html = config_section(&Ok(meta.clone()));
        let titles: Vec<&str> = html
            .split("<h3>")
            .skip(1)
            .map(|t| t.split('<').next().unwrap())
            .collect();
        assert_eq!(
            titles,
            [
                "server",
                "client",
                "client 2",
                "client 3",
                "relay",
                "output",
                "run",
                "host",
                "crate versions"
            ]
        );
        let row = |k: &str, v: &str| format!(r#"<tr><td>{k}</td><td class="mono">{v}</td></tr>"#);
        for (k, v) in [
            ("rate", "600"),
            ("rate", "900"),
            ("hold", "10ms"),
            ("command", "merge"),
            ("status", "complete"),
            ("tool", "h2probe 9.9"),
            ("argv", "h2probe merge a b"),
            ("started", "2023-11-14 22:13:20 UTC"),
            ("lasted", "2.5 s"),
            ("listen", "127.0.0.1:1"),
            ("connect", "127.0.0.1:2"),
            (
                "recorder",
                "10 events accepted, 7 written, 3 dropped; 4 frames kept without their payload \
                 (65536 B: --trace-payload-buffer, or past --trace-limit)",
            ),
            ("merged from", "a, b"),
            ("os / arch", "linux / x86_64"),
            ("cpus", "2"),
            ("h2", "0.4.20"),
        ] {
            assert!(html.contains(&row(k, v)), "{k} = {v}: {html}");
        }
        // What is not known is left out, not shown as zero.
        let mut bare = meta.clone();
        bare.argv.clear();
        bare.started_unix_ns = 0;
        bare.finished_unix_ns = 5;
        bare.config = Default::default();
        bare.recorder.payload_dropped_frames = 0;
        bare.merged_from.clear();
        bare.versions.clear();
        let html = config_section(&Ok(bare.clone()));
        for k in [
            "argv",
            "started",
            "lasted",
            "listen",
            "connect",
            "merged from",
        ] {
            assert!(!html.contains(&format!("<td>{k}</td>")), "{k}: {html}");
        }
        assert!(!html.contains("crate versions") && !html.contains("without their payload"));
        assert!(html.contains(&row("recorder", "10 events accepted, 7 written, 3 dropped")));
        // A run that ended before it began (clock step): no duration.
        bare.started_unix_ns = 2_000_000_000;
        bare.finished_unix_ns = 2_000_000_000;
        assert!(!config_section(&Ok(bare.clone())).contains("<td>lasted</td>"));
        // The listening address the run recorded, else its configuration's.
        bare.config.listen = Some("127.0.0.1:3".into());
        assert!(config_section(&Ok(bare.clone())).contains(&row("listen", "127.0.0.1:3")));
        bare.listen = Some("127.0.0.1:4".into());
        assert!(config_section(&Ok(bare)).contains(&row("listen", "127.0.0.1:4")));
        assert_eq!(
            config_section(&Err("meta.json: <gone>".into())),
            r#"<p class="warn">meta.json: meta.json: &lt;gone&gt;</p>"#
        );
    }

    /// What the slice shows, in figures; the connection drawn, and what
    /// the page could not draw.
    #[test]
    fn the_ladder_section_sums_its_slice_and_names_what_it_left_out() {
        use crate::ladder::{Arrow, Flow, Side, Tick};
        use crate::schema::{Endpoint, FrameType};
        let arrow = |frame, stream, len, increment| Arrow {
            flow: Flow::C2s,
            frame,
            stream,
            offset: 0,
            len,
            flags: 0,
            increment,
            send: Some(1_001_000_000),
            recv: None,
        };
        let tick = |kind, text: &str| Tick {
            ep: Endpoint::Server,
            t: 1_002_000_000,
            kind,
            text: text.into(),
        };
        let side = |conn, local: &str, peer: &str| Side {
            conn,
            local: local.into(),
            peer: peer.into(),
        };
        let mut l = Ladder {
            origin: 1_000_000_000,
            start: 1_001_000_000,
            end: 1_005_000_000,
            slice_end: 1_009_000_000,
            how: "the slice asked for".into(),
            client: Some(side(1, "a:1", "b:2")),
            server: Some(side(5, "b:2", "a:1")),
            other_conns: 2,
            arrows: vec![
                arrow(FrameType::DATA, 1, 100, None),
                arrow(FrameType::DATA, 1, 50, None),
                arrow(FrameType::WINDOW_UPDATE, 1, 4, Some(300)),
                arrow(FrameType::WINDOW_UPDATE, 0, 4, Some(500)),
                arrow(FrameType::WINDOW_UPDATE, 3, 4, None),
                arrow(FrameType::SETTINGS, 0, 6, None),
            ],
            ticks: vec![
                tick("release", "release 100 (#0)"),
                tick("release", "release 9"),
                tick("chunk", "chunk 77"),
            ],
            queue_before: Some(1),
            queue: vec![(1_002_000_000, 2), (1_003_000_000, 0)],
            items_in_slice: 12,
            not_kept: 3,
            ..Ladder::default()
        };
        let html = ladder_section(&Ok(l.clone()), "run", Some((0.5, 9.0)), Some((0.5, 1.0)));
        assert!(
            html.starts_with("<p><b>0.0010 → 0.0050 s</b>: the slice asked for. Times are"),
            "{html}"
        );
        assert!(
            html.contains(
                "in this slice</span> 2 DATA frames (150 B) to the server · 3 WINDOW_UPDATEs back \
                 (+300 B stream, +500 B connection credit) · 109 B released · queue depth 1 → 0</p>"
            ),
            "{html}"
        );
        for note in [
            "Connection: client conn 1 (a:1) ↔ server conn 5 (b:2).",
            "2 other connection(s) had frames in this slice; they are not drawn.",
            "Capped: the slice holds 12 arrows and ticks; the first 9 are drawn (up to 0.0050 s of \
             a slice that ends at 0.0090 s). Use a shorter --span to see the rest.",
            "3 events of the slice were not read into memory (limit 100000); some arrows may lack an end.",
            "Another slice: <code>h2probe report run --at 0.750s --span 20ms</code>",
        ] {
            assert!(html.contains(&esc(note).replace("&lt;code&gt;", "<code>").replace("&lt;/code&gt;", "</code>")), "{note}: {html}");
        }
        assert!(!html.contains("Nothing to draw"));
        // The sideways hint, shown by the page's style on narrow windows.
        assert!(
            html.contains(r#"<p class="note ladder-narrow">The drawing is wider than this window"#)
        );
        assert!(
            html.contains(r#"<div class="legend">"#)
                && html.contains(r#"<div class="ladder-wrap"><svg class="ladder""#)
        );

        // Without a queue before: the first step's depth; one view only.
        l.queue_before = None;
        l.server = None;
        l.other_conns = 0;
        l.items_in_slice = 9;
        l.not_kept = 0;
        let html = ladder_section(&Ok(l.clone()), "run", None, None);
        assert!(
            html.contains("released n/a (no server view) · queue depth 2 → 0</p>"),
            "{html}"
        );
        assert!(html.contains(
            "Connection: client conn 1 (a:1 → b:2); the trace has no server view of it."
        ));
        for gone in [
            "other connection",
            "Capped",
            "not read into memory",
            "Another slice",
        ] {
            assert!(!html.contains(gone), "{gone}: {html}");
        }
        l.client = None;
        l.server = Some(side(5, "b:2", "a:1"));
        l.queue.clear();
        let html = ladder_section(&Ok(l.clone()), "run", None, None);
        assert!(html.contains(
            "Connection: server conn 5 (b:2 ← a:1); the trace has no client view of it."
        ));
        assert!(
            html.contains("109 B released</p>"),
            "no queue, no depth: {html}"
        );
        l.server = None;
        assert!(ladder_section(&Ok(l.clone()), "run", None, None)
            .contains("Connection: no connection has frames in this slice."));
        // Ticks without arrows (or arrows without ticks) are something to draw.
        l.arrows.clear();
        assert!(!ladder_section(&Ok(l.clone()), "run", None, None).contains("Nothing to draw"));
        l.ticks.clear();
        assert!(ladder_section(&Ok(l), "run", None, None).contains("Nothing to draw"));
        assert_eq!(
            ladder_section(&Err("trace.jsonl: <cut>".into()), "run", None, None),
            r#"<p class="warn">No ladder: trace.jsonl: &lt;cut&gt;</p>"#
        );
    }

    /// The footer names the files there, and those committed with the
    /// page, in one order.
    #[test]
    fn the_footer_names_the_files_beside_the_page() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["summary.json", "trace.jsonl.gz", "notes.txt", "server.pcap"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join("meta.json")).unwrap();
        assert_eq!(
            beside_in(dir.path(), &["timeline.csv"]),
            [
                "trace.jsonl.gz",
                "summary.json",
                "timeline.csv",
                "server.pcap"
            ]
        );
    }

    /// A run page as the sections of one summary: the status badge, the
    /// line under the title without empty parts, the analysis' warnings,
    /// a relay alone without a ladder, and plots missing or not shown.
    #[test]
    fn a_run_page_has_the_sections_its_run_has() {
        let page = |summary: Summary,
                    meta: Result<Meta, String>,
                    plots: Vec<(String, String)>,
                    skipped: Vec<String>| {
            RunPage {
                title: "r1".into(),
                dir_arg: "runs/r1".into(),
                summary,
                headline: "HEADLINE <1>".into(),
                meta,
                ladder: Ok(Ladder::default()),
                plots,
                skipped_plots: skipped,
                beside: vec!["trace.jsonl.gz".into(), "meta.json".into()],
            }
            .html()
        };
        let base = Summary {
            run_status: "complete".into(),
            span_s: 1.5,
            has_client: true,
            has_server: true,
            ..Summary::default()
        };
        let html = page(base.clone(), Err("gone".into()), vec![], vec![]);
        assert!(html.contains("Beside it in the run directory: trace.jsonl.gz (every event; its format is in docs/trace-format.md), meta.json.</p>"), "{html}");
        assert!(html.contains(r#"<h1>h2probe run <span class="mono">r1</span></h1><div class="sub">runs/r1 · trace 1.50 s</div>"#), "{html}");
        assert!(html.contains(r#"<pre class="headline">HEADLINE &lt;1&gt;</pre>"#));
        assert!(!html.contains("The analysis warned"));
        assert!(html.contains(r#"<section id="ladder"><h2>Frame ladder</h2><p><b>"#));
        assert!(html.contains(
            "This run directory has no plots: <code>h2probe analyze runs/r1</code> draws them."
        ));
        assert!(!html.contains("Not shown"));
        assert!(html.contains(r#"<p class="warn">meta.json: gone</p>"#));
        assert!(html.contains("<title>h2probe · r1</title>"));

        let mut s = base.clone();
        s.run_status = "interrupted".into();
        s.warnings = vec!["cut <short>".into()];
        let meta = |started: u64| -> Meta {
            serde_json::from_value(serde_json::json!({
                "schema": 1, "tool": "h2probe", "command": "run", "started_unix_ns": started
            }))
            .unwrap()
        };
        let plots = vec![
            ("credit.svg".to_string(), "<img credit>".to_string()),
            ("queue.svg".to_string(), "<img queue>".to_string()),
        ];
        let html = page(
            s.clone(),
            Ok(meta(1_700_000_000_000_000_000)),
            plots.clone(),
            vec!["x.png".into()],
        );
        assert!(
            html.contains(
                r#"<span class="mono">r1</span> <span class="badge b-bad">interrupted</span></h1>"#
            ),
            "{html}"
        );
        assert!(
            html.contains(
                r#"<div class="sub">2023-11-14 22:13:20 UTC · runs/r1 · trace 1.50 s</div>"#
            ),
            "{html}"
        );
        assert!(html.contains("<b>The analysis warned</b><ul><li>cut &lt;short&gt;</li></ul>"));
        assert!(html.contains(r#"<figure class="wide"><img credit><figcaption><b>credit.svg</b>"#));
        assert!(html.contains(r#"<figure><img queue><figcaption><b>queue.svg</b>"#));
        assert!(!html.contains("has no plots"));
        assert!(html.contains(r#"<p class="warn">Not shown (not an SVG): x.png</p>"#));
        // A start time of 0 is unknown, not 1970.
        let html = page(s, Ok(meta(0)), plots, vec![]);
        assert!(
            html.contains(r#"<div class="sub">runs/r1 · trace 1.50 s</div>"#),
            "{html}"
        );

        // A relay's trace alone: its legs, no ladder of a probe client and
        // server; with either of them, the ladder.
        let mut relay = base.clone();
        relay.relay = Some(Default::default());
        relay.has_client = false;
        relay.has_server = false;
        let html = page(relay.clone(), Err("gone".into()), vec![], vec![]);
        assert!(html.contains(
            r#"<section id="ladder"><h2>Frame ladder</h2><p class="note">A relay run: the frame ladder draws the probe's own client and server"#
        ));
        for (client, server) in [(true, false), (false, true)] {
            relay.has_client = client;
            relay.has_server = server;
            let html = page(relay.clone(), Err("gone".into()), vec![], vec![]);
            assert!(
                !html.contains("A relay run:") && html.contains(r#"<h2>Frame ladder</h2><p><b>"#),
                "{client} {server}"
            );
        }
    }
}
