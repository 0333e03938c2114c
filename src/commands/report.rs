//! `h2probe report`: a run's page (report.html), with a chosen frame-ladder
//! slice, or a comparison page of several runs. The pages themselves are
//! built by `h2probe_analysis::page`.

use crate::config::Dur;
use anyhow::Context as _;
use h2probe_analysis::analyze::Summary;
use h2probe_analysis::ladder::LadderOpts;
use std::path::{Path, PathBuf};

/// `report --help` (the `Report` arm of the CLI carries it: clap takes a
/// subcommand's description from there).
pub const LONG_ABOUT: &str = "Write report.html for run directories: one self-contained page per run \
(headline, checks, frame ladder, every plot, configuration; no network, open it from disk), or, for \
several runs, a comparison page linking to each run's own page. run, serve, client, merge and \
analyze already write RUN_DIR/report.html with the default slice; this command picks another \
slice, or compares.

The frame ladder is a sequence diagram of a time slice: DATA and WINDOW_UPDATE arrows between a \
client and a server column, to scale in time (an arrow leaves the sender's column when its tap \
wrote the frame and reaches the receiver's column when its tap read it), beside the server's \
application events (chunk, release, decode, enqueue, start, complete) and the queue depth. By \
default the slice is where the queue first grows while credit flows: it starts a quarter span \
before the first enqueue at queue depth >= 2 that follows the server's first WINDOW_UPDATE, \
but no earlier than a twentieth of the span before the first DATA frame.";

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  h2probe report captures/20261202T…-unbounded-frame\n  \
h2probe report /tmp/run --at 2.5s --span 20ms --out /tmp/slice.html\n  \
h2probe report runs/a runs/b runs/c --out cmp.html"
)]
pub struct ReportOpts {
    /// Run directories (each holding a trace.jsonl). Without summary.json
    /// (or with one older than the trace), the run is analysed first.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub dirs: Vec<PathBuf>,

    /// Where to write the page (a name ending in .html). One run: default RUN_DIR/report.html. Several
    /// runs: the comparison page (default compare.html in the current
    /// directory); each run's own RUN_DIR/report.html is (re)written too.
    /// Missing directories on its path are created (and said).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Start of the frame ladder's slice, as time since the trace origin
    /// (the time axis of the plots): 2.5s, 2500ms. Default: where the queue
    /// first grows while credit flows (see --help).
    #[arg(long, value_name = "TIME")]
    pub at: Option<Dur>,

    /// Length of the frame ladder's slice (at most 300 arrows and ticks
    /// are drawn; the page says when the slice was cut short).
    #[arg(long, value_name = "DURATION", default_value = "50ms")]
    pub span: Dur,
}

/// What `report` wrote.
pub struct Written {
    /// Each run's page.
    pub pages: Vec<PathBuf>,
    /// The comparison page (several runs).
    pub comparison: Option<PathBuf>,
}

/// The run's summary: summary.json when it is at least as new as the
/// trace, else a fresh analysis (which writes every product).
fn summary_of(dir: &Path) -> anyhow::Result<Summary> {
    let trace = h2probe_analysis::reader::trace_path(dir)
        .ok_or_else(|| h2probe_analysis::reader::OpenError::no_trace_in(dir))?;
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let sj = dir.join("summary.json");
    let fresh = matches!((mtime(&sj), mtime(&trace)), (Some(s), Some(t)) if s >= t);
    if fresh {
        if let Ok(s) = std::fs::read_to_string(&sj)
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok(serde_json::from_str::<Summary>(&t)?))
        {
            // A plot the analysis drew is gone: drawn again (the page left
            // it out without a word).
            let missing: Vec<&str> = s
                .plots
                .iter()
                .filter(|p| !dir.join(p).is_file())
                .map(String::as_str)
                .collect();
            if missing.is_empty() {
                return Ok(s);
            }
            crate::say!(
                "warning: {} missing from {}: analysing the run again to draw {}",
                missing.join(", "),
                dir.display(),
                if missing.len() == 1 { "it" } else { "them" }
            );
        }
    }
    let (s, warnings) = super::analyse_showing_progress(dir)?;
    for w in warnings {
        crate::say!("warning: {w}");
    }
    Ok(s)
}

pub fn report(opts: &ReportOpts) -> anyhow::Result<Written> {
    let span = opts.span.0.as_nanos() as u64;
    crate::refuse_unless!(span > 0, "--span must be longer than 0");
    let ladder = LadderOpts {
        at_ns: opts.at.map(|d| d.0.as_nanos() as u64),
        span_ns: span,
        found: None,
        // Set from each run's summary by the page.
        queue_grows: false,
        sort_whole: false,
    };
    let single = opts.dirs.len() == 1;
    // A page written over a run's trace or meta.json loses the run (it did,
    // exit 0): --out names an HTML file.
    if let Some(out) = &opts.out {
        let html = out
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
        crate::refuse_unless!(
            html,
            "--out {}: the page is HTML; give a file name ending in .html (nothing else is written over)",
            out.display()
        );
    }
    // Where --out goes exists before any page is written (it failed only
    // after every run's report.html had been rewritten).
    if let Some(parent) = opts.out.as_deref().and_then(Path::parent) {
        if !parent.as_os_str().is_empty() && !parent.is_dir() {
            crate::refuse_unless!(
                !parent.exists(),
                "--out's directory {} is a file, not a directory",
                parent.display()
            );
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            // A typo in a path makes a directory: said, not silent.
            crate::say!("created the directory {} for --out", parent.display());
        }
    }
    // Every summary first: an --at past a trace's end is refused before
    // any page is written (it only warned, and replaced the run's
    // report.html with an empty ladder).
    let mut summaries = vec![];
    for dir in &opts.dirs {
        // Its errors name the directory or the file.
        let summary = summary_of(dir)?;
        if let (Some(at), Some(first)) = (opts.at, summary.first_event_s) {
            let end = first + summary.span_s;
            crate::refuse_unless!(
                at.0.as_secs_f64() <= end,
                "--at {at} is past the end of {}'s trace ({end:.3}s): the slice would be empty",
                dir.display()
            );
        }
        summaries.push(summary);
    }
    let mut pages = vec![];
    let mut runs = vec![];
    for (dir, summary) in opts.dirs.iter().zip(summaries) {
        let out = if single { opts.out.as_deref() } else { None };
        let page = h2probe_analysis::report::write_html(dir, &summary, &ladder, out)?;
        pages.push(page.clone());
        runs.push((dir.clone(), summary, page));
    }
    if single {
        return Ok(Written {
            pages,
            comparison: None,
        });
    }
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("compare.html"));
    let from = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let runs: Vec<h2probe_analysis::page::CompareRun> = runs
        .into_iter()
        .map(|(dir, summary, page)| h2probe_analysis::page::CompareRun {
            config: super::config_of(&dir),
            link: h2probe_analysis::page::link(&from, &page),
            dir,
            summary,
        })
        .collect();
    h2probe_analysis::aside::write_whole(
        &out,
        h2probe_analysis::page::compare_html(&runs).as_bytes(),
    )
    .with_context(|| format!("writing {}", out.display()))?;
    Ok(Written {
        pages,
        comparison: Some(out),
    })
}
