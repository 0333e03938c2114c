//! The plots of one run: credit against work, the queue, cumulative
//! messages, blocked intervals and bytes per stream.

use super::*;
use crate::analyze::{Blocked, Timeline};
use crate::schema::Endpoint;

/// Client blocked intervals as bars, one row per cause: window credit, h2's
/// send buffer, the socket, and a stream not open yet when there was one.
pub fn intervals_chart(path: &Path, tl: &Timeline) -> Result<(), PlotError> {
    let err = plot_err(path);
    let x_max = tl
        .intervals
        .iter()
        .map(|i| i.1)
        .fold(1.0f64, f64::max)
        .max(tl.end_s);
    let root = SVGBackend::new(path, (W, 320)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let total = |w: Blocked| -> (f64, usize) {
        let v: Vec<f64> = tl
            .intervals
            .iter()
            .filter(|i| i.2 == w)
            .map(|i| i.1 - i.0)
            .collect();
        (v.iter().fold(0.0, |a, b| a + b), v.len())
    };
    let ((ws, wn), (hs, hn), (ss, sn), (ns, nn)) = (
        total(Blocked::Window),
        total(Blocked::H2Buffer),
        total(Blocked::Socket),
        total(Blocked::NotOpen),
    );
    // A fourth row only for a run where h2 held a stream pending open.
    let rows = if nn > 0 { 4.0 } else { 3.0 };
    let mut title = if tl.has_client {
        let not_open = if nn > 0 {
            format!(", stream not open {ns:.2} s ({nn})")
        } else {
            String::new()
        };
        format!(
            "Client blocked: window {ws:.2} s ({wn}), h2 buffer {hs:.2} s ({hn}), socket {ss:.3} s ({sn}){not_open}"
        )
    } else {
        "Client blocked: no client tap in this trace, so no client waits were recorded".into()
    };
    if tl.intervals_dropped > 0 {
        title.push_str(&format!(" (first {} intervals drawn)", tl.intervals.len()));
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(190)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..rows)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("time since trace start (s)")
        .x_labels(12)
        .y_labels(if nn > 0 { 9 } else { 7 })
        .x_label_formatter(&|x: &f64| tick(*x))
        .y_label_formatter(&|y: &f64| {
            if (*y - 0.5).abs() < 0.01 {
                "socket (poll_write Pending)".into()
            } else if (*y - 1.5).abs() < 0.01 {
                "h2 send buffer full".into()
            } else if (*y - 2.5).abs() < 0.01 {
                "window credit".into()
            } else if (*y - 3.5).abs() < 0.01 {
                "stream not open".into()
            } else {
                String::new()
            }
        })
        .disable_y_mesh()
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (row, kind, color) in [
        (2.0, Blocked::Window, COLORS[1]),
        (1.0, Blocked::H2Buffer, COLORS[2]),
        (0.0, Blocked::Socket, COLORS[0]),
        (3.0, Blocked::NotOpen, COLORS[3]),
    ] {
        chart
            .draw_series(
                tl.intervals
                    .iter()
                    .filter(|i| i.2 == kind)
                    .map(|&(a, b, _)| {
                        // Zero-length intervals still get a visible sliver.
                        let b = if b - a < x_max / 2000.0 {
                            a + x_max / 2000.0
                        } else {
                            b
                        };
                        Rectangle::new([(a, row + 0.15), (b, row + 0.85)], color.filled())
                    }),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The client tap's id of `ep`'s connection `conn`, through the shared
/// `conn_key` (its own id when the client tap has no such connection).
fn client_conn(tl: &Timeline, ep: Endpoint, conn: u32) -> u32 {
    if ep == Endpoint::Client {
        return conn;
    }
    tl.conn_keys
        .get(&(ep, conn))
        .and_then(|key| {
            tl.conn_keys
                .iter()
                .find(|(k, v)| k.0 == Endpoint::Client && *v == key)
        })
        .map_or(conn, |(k, _)| k.1)
}

/// The streams with the most client→server bytes (server tap when the trace
/// has it), as (client-tap connection, stream, bytes), most first. The
/// client tap's connection ids come through the shared `conn_key`.
pub fn top_streams(tl: &Timeline) -> Vec<(u32, u32, f64)> {
    let tap = if tl.stream_bytes.keys().any(|k| k.0 == Endpoint::Server) {
        Endpoint::Server
    } else {
        Endpoint::Client
    };
    let mut v: Vec<(u32, u32, f64)> = tl
        .stream_bytes
        .iter()
        .filter(|(k, _)| k.0 == tap)
        .map(|(k, s)| {
            let bytes = s.points().last().map_or(0.0, |p| p.1);
            (client_conn(tl, k.0, k.1), k.2, bytes)
        })
        .collect();
    v.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    v
}

/// The standard plots of one run, written into `dir`. Returns the file names.
pub fn run_plots(dir: &Path, tl: &Timeline) -> Result<Vec<String>, PlotError> {
    let x = "time since trace start (s)";
    let mut written = vec![];
    if let Some(r) = &tl.relay {
        written.push(relay_plot(dir, tl, r)?);
        let probe = [
            &tl.sent,
            &tl.unreleased,
            &tl.credit_conn_client,
            &tl.credit_conn_server,
        ];
        if probe.iter().all(|s| s.points().is_empty()) {
            // A relay alone: the probe endpoints' plots would be empty.
            return Ok(written);
        }
    }
    let no_client = "no client tap in this trace: the client's credit was not recorded";
    let no_server = "no server tap in this trace: what the server held was not recorded";
    let offer_end = tl.offer_end_s.map(|t| {
        Mark::V(
            t,
            "end of the offered period (last scheduled message)".into(),
        )
    });

    // Top panel: credit per stream (top N by bytes), the connection's, and
    // what the server had not released.
    let streams = top_streams(tl);
    let many = tl.stream_credit.len() > 1;
    let mut labels: Vec<String> = vec![];
    let mut credit_series = vec![];
    if many {
        for (conn, stream, _) in streams.iter().take(TOP_STREAMS) {
            if let Some(s) = tl.stream_credit.get(&(*conn, *stream)) {
                let conns = tl
                    .stream_credit
                    .keys()
                    .map(|k| k.0)
                    .collect::<std::collections::BTreeSet<_>>();
                labels.push(if conns.len() > 1 {
                    format!("stream {stream} of conn {conn}: credit (client tap)")
                } else {
                    format!("stream {stream} credit (client tap)")
                });
                credit_series.push(s);
            }
        }
    } else if !tl.credit_stream_client.is_empty() {
        labels.push("stream credit (client tap)".into());
        credit_series.push(&tl.credit_stream_client);
    }
    let credit_peak = credit_series
        .iter()
        .copied()
        .chain([&tl.credit_conn_client, &tl.unreleased])
        .map(|s| peak(s, tl.end_s))
        .fold(tl.advertised_stream_window.unwrap_or(0) as f64, f64::max);
    let (credit_unit, k) = byte_unit(credit_peak);
    let mut top_lines: Vec<Line<'_>> = credit_series
        .iter()
        .zip(&labels)
        .map(|(s, l)| Line {
            label: l.as_str(),
            points: scaled(s.filled_until(tl.end_s), k),
            band: scaled_band(s.envelope(tl.end_s), k),
        })
        .collect();
    top_lines.push(Line {
        label: "connection credit (client tap)",
        points: scaled(tl.credit_conn_client.filled_until(tl.end_s), k),
        band: scaled_band(tl.credit_conn_client.envelope(tl.end_s), k),
    });
    top_lines.push(Line {
        label: "received, not yet released (server)",
        points: scaled(tl.unreleased.filled_until(tl.end_s), k),
        band: scaled_band(tl.unreleased.envelope(tl.end_s), k),
    });
    let mut top_notes = vec![];
    if many && tl.stream_credit.len() > TOP_STREAMS {
        top_notes.push(format!(
            "{} streams have credit series; the {TOP_STREAMS} with the most bytes are drawn (ties: lowest id first)",
            tl.stream_credit.len()
        ));
    }
    if tl.streams_untracked > 0 {
        top_notes.push(format!(
            "{} later streams were not tracked (first {} only)",
            tl.streams_untracked,
            crate::analyze::summary::MAX_STREAM_SERIES
        ));
    }
    if !tl.has_client {
        top_notes.push(no_client.into());
    }
    if !tl.has_server {
        top_notes.push(no_server.into());
    }
    let mut top_marks = vec![];
    if let Some(w) = tl.advertised_stream_window {
        top_marks.push(Mark::H(
            w as f64 / k,
            format!("advertised stream window ({w} B, SETTINGS)"),
        ));
    }
    top_marks.extend(offer_end.clone());
    let server_reason = |what: &str| format!("no server tap in this trace: {what} not recorded");
    let mut server_notes = vec![];
    if !tl.has_server {
        server_notes.push(no_server.to_string());
    }
    let (owned_unit, ko) = byte_unit(peak(&tl.owned_bytes, tl.end_s));
    // The queue's panel stands in credit.svg and alone in queue.svg.
    let queue_panel = |y_label: &str| Panel {
        title: "Application queue depth".into(),
        y_label: y_label.into(),
        lines: vec![Line {
            label: "queue depth (all RPCs)",
            points: tl.queue_depth.filled_until(tl.end_s),
            band: tl.queue_depth.envelope(tl.end_s),
        }],
        marks: offer_end.clone().into_iter().collect(),
        integer_y: true,
        notes: server_notes.clone(),
        empty_reason: server_reason("the queue"),
        ..Panel::default()
    };
    let panels = [
        Panel {
            title: "Transport: credit the client saw, bytes the server had not released".into(),
            y_label: credit_unit.into(),
            shed_first: if many { credit_series.len() } else { 0 },
            lines: top_lines,
            marks: top_marks,
            notes: top_notes,
            empty_reason: "no tap recorded credit in this trace".into(),
            ..Panel::default()
        },
        Panel {
            title: "Application: bytes owned (decoded, not yet completed)".into(),
            y_label: owned_unit.into(),
            lines: vec![Line {
                label: "owned by the application",
                points: scaled(tl.owned_bytes.filled_until(tl.end_s), ko),
                band: scaled_band(tl.owned_bytes.envelope(tl.end_s), ko),
            }],
            marks: offer_end.clone().into_iter().collect(),
            notes: server_notes.clone(),
            empty_reason: server_reason("owned bytes"),
            ..Panel::default()
        },
        queue_panel("messages"),
    ];
    stacked_chart(&dir.join("credit.svg"), x, &panels)?;
    line_chart(&dir.join("queue.svg"), x, &queue_panel("messages queued"))?;
    let mut cum_notes = vec![];
    if !tl.has_client {
        cum_notes.push("no client tap in this trace: scheduled and sent were not recorded".into());
    }
    if !tl.has_server {
        cum_notes
            .push("no server tap in this trace: completed and discarded were not recorded".into());
    }
    line_chart(
        &dir.join("cumulative.svg"),
        x,
        &Panel {
            title: "Messages over time: scheduled, sent, completed, discarded".into(),
            y_label: "messages (cumulative)".into(),
            lines: vec![
                Line::new("scheduled (client)", tl.scheduled.filled_until(tl.end_s)),
                Line::new(
                    "sent: handed to h2 (client)",
                    tl.sent.filled_until(tl.end_s),
                ),
                Line::new(
                    "completed (server worker)",
                    tl.completed.filled_until(tl.end_s),
                ),
                Line::new("discarded (server)", tl.discarded.filled_until(tl.end_s)),
            ],
            marks: offer_end.clone().into_iter().collect(),
            integer_y: true,
            notes: cum_notes,
            empty_reason: "no messages in this trace".into(),
            ..Panel::default()
        },
    )?;
    intervals_chart(&dir.join("blocked.svg"), tl)?;
    let mut files = vec![
        "credit.svg".to_string(),
        "queue.svg".into(),
        "cumulative.svg".into(),
        "blocked.svg".into(),
    ];
    if streams.len() > 1 {
        stream_bytes_chart(&dir.join("streams.svg"), tl, &streams)?;
        files.push("streams.svg".into());
    } else {
        let _ = std::fs::remove_file(dir.join("streams.svg"));
    }
    written.extend(files);
    Ok(written)
}

/// A relay run's `withheld.svg`: the credit each receiver held (DATA it
/// was sent minus credit it returned), from the relay's legs.
fn relay_plot(
    dir: &Path,
    tl: &Timeline,
    r: &crate::analyze::relay::RelaySeries,
) -> Result<String, PlotError> {
    let (stream_label, stream_low) = match r.plotted_stream {
        Some((c, s)) => (
            format!("server, stream {s} of connection {c} (highest per ms)"),
            format!("server, stream {s} of connection {c} (lowest per ms: after returning credit)"),
        ),
        None => (
            "server, one stream".to_string(),
            "server, one stream (lowest)".to_string(),
        ),
    };
    let kib = 1024.0;
    line_chart(
        &dir.join("withheld.svg"),
        "time since trace start (s)",
        &Panel {
            title: "Withheld credit: DATA a receiver was sent minus credit it returned (relay legs)".into(),
            y_label: "KiB".into(),
            lines: vec![
                Line::new(&stream_label, scaled(r.stream_withheld_c2s.filled_until(tl.end_s), kib)),
                Line::new(&stream_low, scaled(r.stream_withheld_min_c2s.filled_until(tl.end_s), kib)),
                Line::new(
                    "server, all connections (from the lowest point: credit granted ahead of data set aside)",
                    scaled(r.conn_withheld_c2s.filled_until(tl.end_s), kib),
                ),
                Line::new(
                    "client, all connections (likewise)",
                    scaled(r.conn_withheld_s2c.filled_until(tl.end_s), kib),
                ),
            ],
            empty_reason: "no relay legs carried DATA".into(),
            ..Panel::default()
        },
    )?;
    Ok("withheld.svg".into())
}

/// streams.svg's layers over time, bottom first: the [`TOP_STREAMS`] of
/// `streams` one each, then every other stream of `tap` (those with no
/// series of their own too) as one; with the grid's times (s) and how many
/// streams the last layer holds.
fn stacked_layers(
    tl: &Timeline,
    tap: Endpoint,
    streams: &[(u32, u32, f64)],
) -> (Vec<f64>, Vec<Vec<f64>>, u64) {
    let series: Vec<(&(Endpoint, u32, u32), &crate::series::Series)> =
        tl.stream_bytes.iter().filter(|(k, _)| k.0 == tap).collect();
    // The streams with no series of their own, in the "other" layer.
    let untracked = tl.stream_bytes_untracked.get(&tap);
    let width = series
        .iter()
        .map(|s| s.1.grid_width(tl.end_s))
        .chain(untracked.map(|u| u.series.grid_width(tl.end_s)))
        .max()
        .unwrap_or(1);
    // Layer order: most bytes first (bottom); the rest as one layer. A
    // stream is its connection's, named as `top_streams` names it (the
    // server tap's stream S of every connection was drawn in one layer).
    let rank = |k: &(Endpoint, u32, u32)| -> usize {
        let conn = client_conn(tl, k.0, k.1);
        streams
            .iter()
            .position(|s| (s.0, s.1) == (conn, k.2))
            .unwrap_or(usize::MAX)
    };
    let others =
        streams.len().saturating_sub(TOP_STREAMS) as u64 + untracked.map_or(0, |u| u.streams);
    let n_layers = streams.len().min(TOP_STREAMS) + usize::from(others > 0);
    let grid = |s: &crate::series::Series| -> Vec<(f64, f64)> {
        s.coarsened(width)
            .grid(tl.end_s)
            .into_iter()
            .map(|(t, b)| (t, b.map_or(0.0, |b| b.value)))
            .collect()
    };
    let grids: Vec<(usize, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(k, s)| (rank(k).min(TOP_STREAMS), grid(s)))
        .chain(untracked.map(|u| (usize::MAX, grid(&u.series))))
        .collect();
    let len = grids.iter().map(|g| g.1.len()).max().unwrap_or(0);
    let mut layers = vec![vec![0.0f64; len]; n_layers];
    for (layer, g) in &grids {
        let layer = (*layer).min(n_layers - 1);
        for (i, (_, v)) in g.iter().enumerate() {
            layers[layer][i] += v;
        }
    }
    let ts: Vec<f64> = (0..len).map(|i| (i as u64 * width) as f64 / 1e9).collect();
    (ts, layers, others)
}

/// streams.svg: a stacked area of client→server bytes per stream over time
/// (the top streams by bytes, the rest summed), from the server's tap when
/// the trace has it.
fn stream_bytes_chart(
    path: &Path,
    tl: &Timeline,
    streams: &[(u32, u32, f64)],
) -> Result<(), PlotError> {
    let err = plot_err(path);
    let tap = if tl.stream_bytes.keys().any(|k| k.0 == Endpoint::Server) {
        Endpoint::Server
    } else {
        Endpoint::Client
    };
    let (ts, layers, others) = stacked_layers(tl, tap, streams);
    let mib = 1048576.0;
    // Running sums: the top edge of each layer.
    let mut tops = layers.clone();
    for l in 1..tops.len() {
        let (below, rest) = tops.split_at_mut(l);
        for (v, b) in rest[0].iter_mut().zip(&below[l - 1]) {
            *v += b;
        }
    }
    let y_max = tops
        .last()
        .map_or(1.0, |t| t.iter().copied().fold(0.0, f64::max))
        / mib;
    let x_max = ts.last().copied().unwrap_or(1.0).max(1e-3);
    let root = SVGBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (data, legend) = root.split_horizontally(W - LEGEND_W);
    let mut chart = ChartBuilder::on(&data)
        .caption(
            format!(
                "Bytes per stream, client→server, stacked ({} tap)",
                tap.as_str()
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..(y_max * 1.06).max(1e-6))
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("time since trace start (s)")
        .y_desc("MiB (cumulative)")
        .x_labels(12)
        .y_labels(8)
        .x_label_formatter(&|x: &f64| tick(*x))
        .y_label_formatter(&|y: &f64| tick(*y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    // Top layer first, so each lower area paints over the one above it.
    for l in (0..tops.len()).rev() {
        let color = COLORS[l % COLORS.len()];
        chart
            .draw_series(AreaSeries::new(
                ts.iter().copied().zip(tops[l].iter().map(|v| v / mib)),
                0.0,
                color.mix(0.85).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
    }
    let font: TextStyle = ("sans-serif", 13).into();
    let mut y = 40;
    for l in (0..layers.len()).rev() {
        let label = match streams.get(l) {
            Some((conn, stream, bytes)) if l < TOP_STREAMS => {
                format!("stream {stream} (conn {conn}): {:.2} MiB", bytes / mib)
            }
            _ => format!("{others} other streams"),
        };
        legend
            .draw(&Rectangle::new(
                [(4, y), (26, y + 12)],
                COLORS[l % COLORS.len()].mix(0.85).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
        legend
            .draw(&Text::new(label, (32, y), font.clone()))
            .map_err(|e| err(e.to_string()))?;
        y += 22;
    }
    root.present().map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::{Merge, Series};

    /// The server tap's stream 1 of two connections: two layers, each its
    /// connection's bytes, named by the client's connection ids (the
    /// stream's number alone put both in the first layer: 400 B under a
    /// label of 300).
    #[test]
    fn a_layer_is_one_connections_stream() {
        let mut tl = Timeline::new(0);
        tl.end_s = 0.002;
        for (server, client, key, bytes) in [(2, 1, "a", 100.0), (4, 3, "b", 300.0)] {
            tl.conn_keys.insert((Endpoint::Server, server), key.into());
            tl.conn_keys.insert((Endpoint::Client, client), key.into());
            let mut s = Series::new(0, 1_000_000, 2048, Merge::Last);
            s.push(1_000_000, bytes);
            tl.stream_bytes.insert((Endpoint::Server, server, 1), s);
        }
        let streams = top_streams(&tl);
        assert_eq!(streams, vec![(3, 1, 300.0), (1, 1, 100.0)]);
        let (_, layers, others) = stacked_layers(&tl, Endpoint::Server, &streams);
        assert_eq!(others, 0);
        let last: Vec<f64> = layers.iter().map(|l| *l.last().unwrap()).collect();
        assert_eq!(last, vec![300.0, 100.0]);
    }
}
