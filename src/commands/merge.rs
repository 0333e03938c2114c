//! `h2probe merge`: join traces written by separate processes on one host
//! (e.g. `serve` and `client`) into one run directory, on their shared
//! CLOCK_MONOTONIC axis, so the two-sided analysis applies.

use crate::trace::schema::{Event, Footer, Header, Kind, SCHEMA_VERSION};
use anyhow::Context as _;
use h2probe_analysis::meta::{ClockAnchor, Meta, RecorderStats, RunConfig, META_VERSION};
use h2probe_analysis::reader::{Ending, TraceReader, NAMED_SKIPS};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct MergeOpts {
    /// Run directories to merge (their traces must come from one host).
    #[arg(required = true, num_args = 2.., value_name = "RUN_DIR")]
    pub dirs: Vec<PathBuf>,

    /// The merged run directory to write (refused if not empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Replace the run in a non-empty --out (its trace, meta, summary,
    /// CSV, plots and pcaps are removed first; other files are left).
    #[arg(long)]
    pub force: bool,
}

pub use h2probe_analysis::schema::CONN_OFFSET;

/// Where each input's connection ids start, past those of the inputs
/// before it: one [`CONN_OFFSET`] step for a run, a merged input's
/// `conn_steps` for it (a merge given first, then a client, gave the
/// client the ids of the merge's own client, and four checks failed);
/// and the steps taken in all.
fn conn_offsets(metas: &[Option<Meta>]) -> anyhow::Result<(Vec<u32>, u32)> {
    let mut steps = 0u32;
    let mut offsets = vec![];
    for m in metas {
        let own = m.as_ref().map_or(1, |m| {
            m.conn_steps
                .unwrap_or(m.merged_from.len().max(1) as u32)
                .max(1)
        });
        let offset = u64::from(steps) * u64::from(CONN_OFFSET);
        steps = steps.saturating_add(own);
        anyhow::ensure!(
            u64::from(steps) * u64::from(CONN_OFFSET) <= 1 << 32,
            "too many runs to merge: connection ids would not fit in 32 bits"
        );
        offsets.push(offset as u32);
    }
    Ok((offsets, steps))
}

/// Moves `e`'s connection ids by `offset`: its own, and those its fields
/// name (a `handed` event's `from`, a `stall`'s streams), which would
/// otherwise name another input's connections.
fn renumber(e: &mut Event, offset: u32) {
    e.conn += offset;
    match &mut e.kind {
        Kind::Handed(h) => h.from += offset,
        Kind::Stall(st) => {
            for s in &mut st.streams {
                s.conn += offset;
            }
        }
        _ => {}
    }
}

pub fn merge(opts: &MergeOpts) -> anyhow::Result<(u64, Vec<String>)> {
    let mut readers = vec![];
    for d in &opts.dirs {
        readers.push(h2probe_analysis::reader::open_run(d)?);
    }
    let metas = source_metas(&opts.dirs)?;
    let (offsets, steps) = conn_offsets(&metas)?;
    // Two traces anchored at the same nanosecond are one recording (a copy
    // of a run): merged, every figure of it counted twice.
    for (i, (pa, a)) in readers.iter().enumerate() {
        for (pb, b) in &readers[i + 1..] {
            let (ha, hb) = (a.header(), b.header());
            anyhow::ensure!(
                (ha.origin_mono_ns, ha.origin_unix_ns) != (hb.origin_mono_ns, hb.origin_unix_ns),
                "{} and {} hold the same recording (their traces start at the same nanosecond); \
                 a copy of a run cannot be merged with it",
                pa.display(),
                pb.display()
            );
        }
    }
    // Writing the merge over one of its inputs would remove what is read.
    let out = std::fs::canonicalize(&opts.out).ok();
    for d in &opts.dirs {
        crate::refuse_unless!(
            out.is_none() || std::fs::canonicalize(d).ok() != out,
            "--out {} is one of the runs to merge; choose another directory",
            opts.out.display()
        );
    }
    let out_existed = opts.out.exists();
    super::prepare_dir(&opts.out, opts.force)?;
    let out_path = opts.out.join("trace.jsonl");
    // The merged trace and its meta.json are written aside and put in
    // place together once whole (h2probe_analysis::aside): an interrupted
    // or failed merge leaves neither, never a trace without its footer.
    let (trace_aside, file) = h2probe_analysis::aside::Aside::file(&out_path)
        .with_context(|| format!("creating {}", out_path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let first = readers
        .iter()
        .map(|(_, r)| r.header().clone())
        .min_by_key(|h| h.origin_mono_ns)
        .expect("at least two inputs");
    let header = Header {
        schema: SCHEMA_VERSION,
        tool: format!("h2probe {} (merge)", env!("CARGO_PKG_VERSION")),
        ..first
    };
    let write_err = |e: std::io::Error| {
        anyhow::Error::new(e).context(format!("writing {}", out_path.display()))
    };
    writeln!(w, "{}", header.to_line()).map_err(write_err)?;

    // k-way merge by time; each input is (nearly) in time order already.
    let mut heads: Vec<Option<Event>> = vec![None; readers.len()];
    let mut warnings = vec![];
    // Without its meta.json a run's host, boot and times are unknown: the
    // refusals above could not judge it (they passed it without a word).
    for (d, m) in opts.dirs.iter().zip(&metas) {
        if m.is_none() {
            warnings.push(format!(
                "{}: no readable meta.json: whether it ran on this host and boot, and when, could not be checked",
                d.display()
            ));
        }
    }
    // The merged trace has a header of its own: an input's damage is said.
    for (path, r) in &readers {
        if let Some(said) = &r.damaged_header {
            warnings.push(format!("{}: {said}", path.display()));
        }
    }
    // Events read from each input, and its lines skipped as corrupt.
    let mut read = vec![(0u64, 0u64); readers.len()];
    let next = |i: usize,
                readers: &mut Vec<(PathBuf, TraceReader<_>)>,
                read: &mut Vec<(u64, u64)>,
                warnings: &mut Vec<String>| loop {
        match readers[i].1.next_event() {
            Some(Ok(mut e)) => {
                renumber(&mut e, offsets[i]);
                read[i].0 += 1;
                return Some(e);
            }
            Some(Err(err)) => {
                if err.is_one_line() {
                    read[i].1 += 1;
                }
                // The first few by line, then a count (below): one per
                // line filled stderr and memory for a trace all damaged.
                if !err.is_one_line() || read[i].1 <= NAMED_SKIPS {
                    warnings.push(format!("{}: skipped {err}", readers[i].0.display()))
                }
            }
            None => return None,
        }
    };
    for (i, h) in heads.iter_mut().enumerate() {
        *h = next(i, &mut readers, &mut read, &mut warnings);
    }
    let mut events = 0u64;
    let mut line = Vec::with_capacity(256);
    // Each side's connections by address (the side that connects, a
    // client or a relay's upstream leg: local→peer; the side that accepts,
    // a server or a relay's downstream leg: peer→local), to say which have
    // no counterpart.
    let mut sockets: [std::collections::BTreeMap<(String, String), usize>; 2] = Default::default();
    // Every connection's opening, by tap, addresses and time, with its
    // input: one opened in two inputs at one nanosecond is one recording
    // given twice (a merged run with one of its own inputs).
    let mut openings: std::collections::HashMap<(u8, String, String, u64), usize> =
        std::collections::HashMap::new();
    while let Some(i) = (0..heads.len())
        .filter(|i| heads[*i].is_some())
        .min_by_key(|i| heads[*i].as_ref().map(|e| e.t))
    {
        let e = heads[i].take().expect("chosen because present");
        if let crate::trace::schema::Kind::ConnOpen(o) = &e.kind {
            use crate::trace::schema::Endpoint;
            let key = (e.ep as u8, o.local.clone(), o.peer.clone(), e.t);
            if let Some(&other) = openings.get(&key).filter(|&&k| k != i) {
                drop(w);
                drop(trace_aside);
                // Nothing of the merge is left: a directory it created goes too.
                if !out_existed {
                    let _ = std::fs::remove_dir(&opts.out);
                }
                anyhow::bail!(
                    "{} and {} both hold the connection {} -> {} opened at the same nanosecond: one recording given twice \
                     (a merged run with one of its own inputs, or a copy); merge each run once",
                    readers[other].0.display(),
                    readers[i].0.display(),
                    o.local,
                    o.peer
                );
            }
            openings.insert(key, i);
            match e.ep {
                Endpoint::Client | Endpoint::ServerLeg => {
                    sockets[0].insert((o.local.clone(), o.peer.clone()), i);
                }
                Endpoint::Server | Endpoint::ClientLeg => {
                    sockets[1].insert((o.peer.clone(), o.local.clone()), i);
                }
            }
        }
        line.clear();
        h2probe_analysis::jsonl::write_event(&mut line, &e);
        w.write_all(&line).map_err(write_err)?;
        events += 1;
        heads[i] = next(i, &mut readers, &mut read, &mut warnings);
    }
    // The footer counts what the inputs' writers wrote, less the events of
    // unknown types a merge leaves out: a line an input lost, or skipped as
    // corrupt, is missing from the merged file as it was from the input, and
    // its analysis must say so (checks that cannot be judged) instead of
    // failing on the gap.
    let mut footer = Footer {
        events: 0,
        ..Footer::default()
    };
    // An input cut short (no footer: its process killed, its disk full)
    // leaves the merged trace without one too, so that its analysis says
    // what it says of the input: events may be missing, the checks cannot
    // judge. (Given a footer, a cut serve merged with its client read as a
    // whole run: `complete`, 0 dropped, `accounting` failed.)
    let mut cut: Vec<String> = vec![];
    for (i, (path, r)) in readers.iter().enumerate() {
        if let Some(w) = r.bad_payload_warning() {
            warnings.push(format!("{}: {w}", path.display()));
        }
        let (ok, corrupt) = read[i];
        if corrupt > NAMED_SKIPS {
            warnings.push(format!(
                "{}: {corrupt} corrupt lines skipped in all (the first {NAMED_SKIPS} named above)",
                path.display()
            ));
        }
        footer.events = footer.events.saturating_add(match r.ending() {
            Ending::Clean(f) => f.events.saturating_sub(r.unknown),
            _ => ok,
        });
        match r.ending() {
            Ending::Clean(f) => {
                let lines = ok + corrupt + r.unknown;
                if f.events != lines || corrupt > 0 {
                    warnings.push(format!(
                        "{}: its footer counts {} events, {lines} lines of events were read ({corrupt} corrupt): the merged trace is missing events, and its analysis will say its checks cannot be judged",
                        path.display(),
                        f.events
                    ));
                }
                for (k, v) in &f.dropped {
                    let d = footer.dropped.entry(k.clone()).or_default();
                    *d = d.saturating_add(*v);
                }
            }
            other => {
                let how = match other {
                    Ending::Truncated { line } => format!("its line {line} cut short"),
                    _ => "after a whole line".to_string(),
                };
                warnings.push(format!(
                    "{}: input ended without its footer ({how}); drop counts unknown, and the merged trace has no footer either",
                    path.display()
                ));
                cut.push(path.display().to_string());
            }
        }
    }
    if cut.is_empty() {
        writeln!(w, "{}", footer.to_line()).map_err(write_err)?;
    }
    w.flush().map_err(write_err)?;
    let names: Vec<String> = readers
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    warnings.extend(unlinked(&sockets, &names));
    let mut meta = merged_meta(opts, &metas, &header, events, &footer);
    meta.conn_steps = Some(steps);
    if !cut.is_empty() {
        meta.status = match &cut[..] {
            [one] => format!("error: {one} ended without its footer (its run was cut short)"),
            many => format!(
                "error: {} ended without their footers (their runs were cut short)",
                many.join(", ")
            ),
        };
        meta.drops_unknown_in = cut;
    }
    let meta_path = opts.out.join("meta.json");
    let (meta_aside, meta_file) = h2probe_analysis::aside::Aside::file(&meta_path)
        .with_context(|| format!("creating {}", meta_path.display()))?;
    std::io::Write::write_all(&mut &meta_file, super::json_text(&meta)?.as_bytes())
        .with_context(|| format!("writing {}", meta_path.display()))?;
    drop(meta_file);
    h2probe_analysis::aside::commit_together(vec![trace_aside, meta_aside])
        .with_context(|| format!("writing the merged run into {}", opts.out.display()))?;
    Ok((events, warnings))
}

/// Warnings for inputs that share no connection with any other input (no
/// connection of theirs is the other end of one in another input): runs of
/// different experiments, whose figures are then checked against nothing.
/// A client merged with a relay to a foreign server shares its connections
/// with the relay's downstream leg, and is not warned about.
fn unlinked(
    sockets: &[std::collections::BTreeMap<(String, String), usize>; 2],
    names: &[String],
) -> Vec<String> {
    let [connecting, accepting] = sockets;
    let mut linked = vec![false; names.len()];
    for (key, &a) in connecting {
        if let Some(&b) = accepting.get(key) {
            if a != b {
                linked[a] = true;
                linked[b] = true;
            }
        }
    }
    names
        .iter()
        .zip(&linked)
        .filter(|(_, l)| !**l)
        .map(|(name, _)| {
            format!(
                "{name} shares no connection with the other runs (none of its connections is the other end of one of theirs): \
                 runs of different experiments? Its figures are not checked against theirs"
            )
        })
        .collect()
}

/// The sources' meta.json, refusing what cannot be merged: the same
/// directory twice, and traces from different hosts or boots (CLOCK_MONOTONIC
/// is shared only within one boot of one host).
fn source_metas(dirs: &[PathBuf]) -> anyhow::Result<Vec<Option<Meta>>> {
    let mut seen = std::collections::HashSet::new();
    for d in dirs {
        let canon = d
            .canonicalize()
            .with_context(|| format!("reading {}", d.display()))?;
        crate::refuse_unless!(
            seen.insert(canon),
            "{} is given twice: a run cannot be merged with itself",
            d.display()
        );
    }
    let metas: Vec<Option<Meta>> = dirs.iter().map(|d| Meta::read(d).ok()).collect();
    let known: Vec<(&PathBuf, &Meta)> = dirs
        .iter()
        .zip(&metas)
        .filter_map(|(d, m)| Some((d, m.as_ref()?)))
        .collect();
    for &(d, m) in &known {
        anyhow::ensure!(
            m.command != "run",
            "{} is a `run`: it holds both endpoints already; merge joins runs of one endpoint each \
             (`serve`, `client`, `relay`)",
            d.display()
        );
    }
    // Runs that do not overlap in time are not one experiment; but two
    // clients of one server need not overlap each other, only join through
    // it: the runs' spans must chain into one, with no gap in which none ran.
    let mut by_start: Vec<(&PathBuf, &Meta)> = known
        .iter()
        .copied()
        .filter(|(_, m)| m.finished_unix_ns > 0)
        .collect();
    by_start.sort_by_key(|(_, m)| m.started_unix_ns);
    if let Some((&first, rest)) = by_start.split_first() {
        let mut latest = first; // the earlier run that finished last
        for &(db, b) in rest {
            let (da, a) = latest;
            anyhow::ensure!(
                b.started_unix_ns <= a.finished_unix_ns,
                "{} and {} ran at different times ({} and {}): no connection of one can be the other's",
                da.display(),
                db.display(),
                span_text(a),
                span_text(b)
            );
            if b.finished_unix_ns > a.finished_unix_ns {
                latest = (db, b);
            }
        }
    }
    for pair in known.windows(2) {
        let ((da, a), (db, b)) = (pair[0], pair[1]);
        let boots_differ = !a.host.boot_id.is_empty()
            && !b.host.boot_id.is_empty()
            && a.host.boot_id != b.host.boot_id;
        anyhow::ensure!(
            a.host.hostname == b.host.hostname && !boots_differ,
            "{} and {} were recorded on different hosts or boots ({} vs {}); \
             their CLOCK_MONOTONIC times do not share an axis",
            da.display(),
            db.display(),
            describe_host(a),
            describe_host(b)
        );
    }
    Ok(metas)
}

/// A run's wall-clock span, as `HH:MM:SS–HH:MM:SS` UTC.
fn span_text(m: &Meta) -> String {
    let at = |ns: u64| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
        humantime::format_rfc3339_seconds(t).to_string()
    };
    format!("{}–{}", at(m.started_unix_ns), at(m.finished_unix_ns))
}

fn describe_host(m: &Meta) -> String {
    if m.host.boot_id.is_empty() {
        m.host.hostname.clone()
    } else {
        format!("{} boot {}", m.host.hostname, m.host.boot_id)
    }
}

/// The merged run's meta.json: the sources' configuration parts (server from
/// the source that had one, client likewise), their host, and the merge's own
/// counts.
fn merged_meta(
    opts: &MergeOpts,
    metas: &[Option<Meta>],
    header: &Header,
    events: u64,
    footer: &Footer,
) -> Meta {
    let mut config = RunConfig::default();
    let mut status = "complete".to_string();
    for m in metas.iter().flatten() {
        let c = &m.config;
        config.server = config.server.take().or_else(|| c.server.clone());
        // Every client's: the first as `client`, the others after it (one
        // kept for all read as a run of one client, and `compare` grouped
        // it with one).
        match (&config.client, &c.client) {
            (Some(_), Some(more)) => config.more_clients.push(more.clone()),
            (None, Some(first)) => config.client = Some(first.clone()),
            _ => {}
        }
        config.more_clients.extend(c.more_clients.iter().cloned());
        config.listen = config.listen.take().or_else(|| c.listen.clone());
        config.connect = config.connect.take().or_else(|| c.connect.clone());
        if m.status != "complete" {
            status = m.status.clone();
        }
    }
    let first = metas.iter().flatten().next();
    Meta {
        schema: META_VERSION,
        tool: format!("h2probe {}", env!("CARGO_PKG_VERSION")),
        command: "merge".into(),
        argv: std::env::args().collect(),
        config,
        versions: first.map(|m| m.versions.clone()).unwrap_or_default(),
        clock: Some(ClockAnchor {
            clock: header.clock.clone(),
            origin_mono_ns: header.origin_mono_ns,
            origin_unix_ns: header.origin_unix_ns,
        }),
        host: first
            .map(|m| m.host.clone())
            .unwrap_or_else(super::host_info),
        started_unix_ns: metas
            .iter()
            .flatten()
            .map(|m| m.started_unix_ns)
            .min()
            .unwrap_or(0),
        finished_unix_ns: metas
            .iter()
            .flatten()
            .map(|m| m.finished_unix_ns)
            .max()
            .unwrap_or(0),
        status,
        recorder: RecorderStats {
            accepted: events,
            written: events,
            dropped: footer.dropped.clone(),
            payload_dropped_frames: metas
                .iter()
                .flatten()
                .map(|m| m.recorder.payload_dropped_frames)
                .sum(),
            payload_dropped_bytes: metas
                .iter()
                .flatten()
                .map(|m| m.recorder.payload_dropped_bytes)
                .sum(),
            // Each run's own writer: the furthest any fell behind.
            largest_sweep: metas
                .iter()
                .flatten()
                .map(|m| m.recorder.largest_sweep)
                .max()
                .unwrap_or(0),
            // The merged trace is written by merge, not by a recorder.
            file_io: None,
        },
        dropped_events: footer.dropped_total(),
        drops_unknown_in: vec![],
        listen: first.and_then(|m| m.listen.clone()),
        merged_from: opts.dirs.iter().map(|d| d.display().to_string()).collect(),
        conn_offset: Some(CONN_OFFSET),
        conn_steps: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(name: &str, hostname: &str, boot: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("h2probe-merge-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let mut m = Meta {
            command: "serve".into(),
            ..Meta::default()
        };
        m.host.hostname = hostname.into();
        m.host.boot_id = boot.into();
        super::super::write_json(&d.join("meta.json"), &m).unwrap();
        d
    }

    /// Every connection id an event names moves with the input's offset:
    /// a `handed` event's `from` and a stall's streams named the other
    /// input's connections (a merged `handed` pointed at a server's).
    #[test]
    fn every_connection_an_event_names_is_renumbered() {
        use crate::trace::schema::{Endpoint, HandedEv, StallEv, StallStream};
        let event = |kind| Event {
            t: 1,
            ep: Endpoint::Client,
            conn: 2,
            stream: 0,
            kind,
        };
        let mut handed = event(Kind::Handed(HandedEv {
            seq: 3,
            count: 1,
            from: 1,
        }));
        renumber(&mut handed, CONN_OFFSET);
        assert_eq!(handed.conn, CONN_OFFSET + 2);
        assert!(
            matches!(handed.kind, Kind::Handed(HandedEv { from, .. }) if from == CONN_OFFSET + 1)
        );
        let mut stall = event(Kind::Stall(StallEv {
            timeout_ns: 1,
            pending: 1,
            conn_window: None,
            streams: vec![StallStream {
                conn: 2,
                stream: 1,
                unreleased: 0,
                available: 0,
            }],
        }));
        renumber(&mut stall, 2 * CONN_OFFSET);
        let Kind::Stall(st) = &stall.kind else {
            unreachable!()
        };
        assert_eq!(st.streams[0].conn, 2 * CONN_OFFSET + 2);
    }

    /// A merged input takes one step of ids for each run it holds.
    #[test]
    fn a_merged_input_moves_the_next_inputs_past_its_own_ids() {
        let merged = Meta {
            merged_from: vec!["s".into(), "c1".into()],
            conn_steps: Some(2),
            ..Meta::default()
        };
        // A merge of a merge and a run: three steps, though it names two.
        let nested = Meta {
            merged_from: vec!["m".into(), "c2".into()],
            conn_steps: Some(3),
            ..Meta::default()
        };
        let plain = Meta::default();
        let metas = [
            Some(merged),
            Some(plain.clone()),
            None,
            Some(nested),
            Some(plain.clone()),
        ];
        let (o, steps) = conn_offsets(&metas).unwrap();
        let c = CONN_OFFSET;
        assert_eq!(o, [0, 2 * c, 3 * c, 4 * c, 7 * c]);
        assert_eq!(steps, 8);
        assert_eq!(conn_offsets(&vec![Some(plain); 4096]).unwrap().1, 4096);
        let many = vec![Some(Meta::default()); 4097];
        assert!(conn_offsets(&many).is_err());
    }

    #[test]
    fn refuses_a_run_merged_with_itself_and_traces_of_other_boots() {
        let a = run_dir("a", "vm", "boot-1");
        let b = run_dir("b", "vm", "boot-2");
        let c = run_dir("c", "vm", "boot-1");
        let same = source_metas(&[a.clone(), a.join("../").join(a.file_name().unwrap())]);
        assert!(
            same.unwrap_err().to_string().contains("merged with itself"),
            "the same directory under two spellings"
        );
        let boots = source_metas(&[a.clone(), b.clone()])
            .unwrap_err()
            .to_string();
        assert!(boots.contains("different hosts or boots"), "{boots}");
        assert_eq!(source_metas(&[a.clone(), c.clone()]).unwrap().len(), 2);
        for d in [a, b, c] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
