//! `h2probe merge`: join traces written by separate processes on one host
//! (e.g. `serve` and `client`) into one run directory, on their shared
//! CLOCK_MONOTONIC axis, so the two-sided analysis applies.

use crate::trace::schema::{Event, Footer, Header, SCHEMA_VERSION};
use anyhow::Context as _;
use h2probe_analysis::reader::{Ending, TraceReader};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct MergeOpts {
    /// Run directories to merge (their traces must come from one host).
    #[arg(required = true, num_args = 2.., value_name = "RUN_DIR")]
    pub dirs: Vec<PathBuf>,

    /// The merged run directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Connection ids of the k-th input are offset by k × this, so ids of
/// different processes never collide.
pub const CONN_OFFSET: u32 = 1 << 20;

pub fn merge(opts: &MergeOpts) -> anyhow::Result<(u64, Vec<String>)> {
    let mut readers = vec![];
    for d in &opts.dirs {
        readers.push(h2probe_analysis::reader::open_run(d)?);
    }
    let hosts: Vec<String> = opts
        .dirs
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("meta.json")).ok())
        .filter_map(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .filter_map(|m| m["host"]["hostname"].as_str().map(str::to_string))
        .collect();
    if hosts.windows(2).any(|w| w[0] != w[1]) {
        anyhow::bail!("the traces come from different hosts ({hosts:?}); CLOCK_MONOTONIC is only shared within one host");
    }
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let out_path = opts.out.join("trace.jsonl");
    let file = std::fs::File::create(&out_path)
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
    let next = |i: usize,
                readers: &mut Vec<(PathBuf, TraceReader<_>)>,
                warnings: &mut Vec<String>| loop {
        match readers[i].1.next_event() {
            Some(Ok(mut e)) => {
                e.conn += i as u32 * CONN_OFFSET;
                return Some(e);
            }
            Some(Err(err)) => warnings.push(format!("{}: skipped {err}", readers[i].0.display())),
            None => return None,
        }
    };
    for (i, h) in heads.iter_mut().enumerate() {
        *h = next(i, &mut readers, &mut warnings);
    }
    let mut events = 0u64;
    while let Some(i) = (0..heads.len())
        .filter(|i| heads[*i].is_some())
        .min_by_key(|i| heads[*i].as_ref().map(|e| e.t))
    {
        let e = heads[i].take().expect("chosen because present");
        serde_json::to_writer(&mut w, &e)?;
        w.write_all(b"\n").map_err(write_err)?;
        events += 1;
        heads[i] = next(i, &mut readers, &mut warnings);
    }
    let mut footer = Footer {
        events,
        ..Footer::default()
    };
    for (path, r) in &readers {
        match r.ending() {
            Ending::Clean(f) => {
                for (k, v) in &f.dropped {
                    *footer.dropped.entry(k.clone()).or_default() += v;
                }
            }
            other => warnings.push(format!(
                "{}: input ended without its footer ({other:?}); drop counts unknown",
                path.display()
            )),
        }
    }
    writeln!(w, "{}", footer.to_line()).map_err(write_err)?;
    w.flush().map_err(write_err)?;
    let meta = serde_json::json!({
        "schema": SCHEMA_VERSION,
        "tool": format!("h2probe {}", env!("CARGO_PKG_VERSION")),
        "command": "merge",
        "merged_from": opts.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>(),
        "conn_offset": CONN_OFFSET,
        "events": events,
        "dropped_events": footer.dropped.values().sum::<u64>(),
    });
    crate::experiment::write_json(&opts.out.join("meta.json"), &meta)?;
    Ok((events, warnings))
}
