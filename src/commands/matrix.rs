//! `h2probe compare`: run a matrix of configurations (or take existing run
//! directories) and print the table a paper would print.

use super::run::{self, RunOpts};
use crate::config::CapturePayload;
use crate::config::{Dur, QueuePolicy, ReleasePoint, Size};
use anyhow::Context as _;
use h2probe_analysis::analyze::analyze_trace;
use h2probe_analysis::compare::{self, RunRef};
use std::path::{Path, PathBuf};

pub use super::sweep::Sweep;
use super::sweep::{sweep_matrix, sweep_plot, RunFlags, SweepPoint, NOT_SWEPT};

/// Named experiments.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// The article's Part 1: direct, unbounded and bounded:32 handlers, credit
    /// released on frame receipt (what tonic does), 16 KiB at 300/s, 10 ms
    /// worker, 65,535-byte windows. Add `--release frame,decode,complete` to
    /// see what the article could not.
    Part1,
    /// Many streams, one connection window: 4 streams, stream 3 never
    /// released (--stall-stream 3), with a 65,535-byte and a 1 MiB connection
    /// window. With 64 KiB the stalled stream drains the shared window and
    /// everything stops (a stall); with 1 MiB only stream 3 starves.
    SharedWindow,
    /// 4 streams, stream 3's body dropped mid-message without a release
    /// (--drop-stream 3), 65,535-byte connection window: does the h2 version in
    /// use return the dropped stream's credit to the connection?
    DropWithoutRelease,
    /// Late release, 4 streams, one connection window: 32 KiB work units
    /// (--framing raw:32KiB, so a unit spans two 16 KiB messages) released
    /// on decode, with a 65,535-byte connection window (each stream ends up
    /// holding part of a unit: a deadlock, detected by the stall watcher and
    /// named) and a 128 KiB one (4 × 32,767 + 1 fits: no deadlock).
    Deadlock,
    /// Throughput against the bandwidth-delay product: the default 64 KiB
    /// window at --link-delay 0, 10, 25 and 50 ms (W / RTT caps the rate).
    Bdp,
    /// The article's Part 3: WAIT, REJECT, REJECT+RETRY (fixed:100,200, 3
    /// attempts) and DROP at a 32-slot admission boundary, and RETRY-HOLD
    /// (the same retry, the original keeping its client credit through the
    /// backoff), `run --preset
    /// part3` (80/s for 36 s, 16 KiB, 2 s deadlines, a worker slowed from
    /// 10 to 40 ms during [12, 24) s), repeats paired by seed; the table
    /// puts the article's figures beside ours.
    Part3,
    /// Part 3's eight-client retry study: 8 clients × 10/s (staggered),
    /// REJECT with fixed (100, 200 ms) against jitter (uniform [0, 200] ms)
    /// backoff; the retry collision fraction in [12, 24) s, paired by seed.
    Part3Clients,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Part1 => "part1",
            Scenario::SharedWindow => "shared-window",
            Scenario::DropWithoutRelease => "drop-without-release",
            Scenario::Deadlock => "deadlock",
            Scenario::Bdp => "bdp",
            Scenario::Part3 => "part3",
            Scenario::Part3Clients => "part3-clients",
        }
    }

    fn is_part3(self) -> bool {
        matches!(self, Scenario::Part3 | Scenario::Part3Clients)
    }
}

/// One configuration of a matrix: its label and what it changes in the
/// run options built from `compare`'s flags.
pub(super) struct Config {
    pub(super) label: String,
    pub(super) slug: String,
    pub(super) apply: Box<dyn Fn(&mut RunOpts) + Send + Sync>,
    /// `run` flags (`--PARAM=VALUE`) parsed after compare's own: a sweep's.
    pub(super) args: Vec<String>,
    /// A sweep's (parameter, value) pairs, in `--sweep` order.
    pub(super) point: Vec<(String, String)>,
}

impl Config {
    pub(super) fn new(
        label: String,
        slug: String,
        apply: impl Fn(&mut RunOpts) + Send + Sync + 'static,
    ) -> Config {
        Config {
            label,
            slug,
            apply: Box::new(apply),
            args: vec![],
            point: vec![],
        }
    }
}

/// The configurations `compare` runs: a named scenario's, or release ×
/// queue from the flags.
fn matrix(opts: &CompareOpts) -> Vec<Config> {
    let size = |s: &str| s.parse::<Size>().expect("a static size");
    if !opts.sweep.is_empty() {
        return sweep_matrix(opts);
    }
    match opts.scenario {
        Some(Scenario::SharedWindow) | Some(Scenario::DropWithoutRelease) => {
            let drop = opts.scenario == Some(Scenario::DropWithoutRelease);
            // 65,535: the protocol's default (a 64 KiB window of 65,536 would
            // leave one byte of connection credit beside a stalled stream,
            // and h2 then trickles 1-byte DATA frames instead of stopping).
            let windows: &[&str] = if drop { &["65535"] } else { &["65535", "1MiB"] };
            windows
                .iter()
                .map(|w| {
                    let window = size(w);
                    let what = if drop {
                        "drop-stream=3"
                    } else {
                        "stall-stream=3"
                    };
                    Config::new(
                        format!("streams=4 {what} conn-window={}", window.0),
                        format!("{}-{}", what.replace('=', ""), window.0),
                        move |r| {
                            r.client.streams = 4;
                            r.server.conn_window = window;
                            r.client.stall_timeout = "2s".parse().expect("static");
                            if drop {
                                r.server.drop_stream = Some(3);
                            } else {
                                r.server.stall_stream = Some(crate::server::StallSpec {
                                    stream: 3,
                                    after: 0,
                                });
                            }
                        },
                    )
                })
                .collect()
        }
        Some(Scenario::Deadlock) => ["65535", "128KiB"]
            .iter()
            .map(|w| {
                let window = size(w);
                Config::new(
                    format!(
                        "streams=4 raw:32KiB release=decode conn-window={}",
                        window.0
                    ),
                    format!("deadlock-{}", window.0),
                    move |r| {
                        r.client.streams = 4;
                        r.client.stall_timeout = "2s".parse().expect("static");
                        r.server.conn_window = window;
                        r.server.framing = crate::config::Framing::Raw(32 * 1024);
                        r.server.release =
                            crate::config::ReleaseSpec::uniform(ReleasePoint::Decode);
                        r.server.allow_deadlock = true;
                    },
                )
            })
            .collect(),
        Some(Scenario::Part3) | Some(Scenario::Part3Clients) => {
            use crate::overload::WhenFull;
            // (label, policy, retry, whether a retry-waiting original holds its credit)
            let policies: Vec<(&str, WhenFull, &str, bool)> =
                if opts.scenario == Some(Scenario::Part3) {
                    vec![
                        ("WAIT", WhenFull::Wait, "none", false),
                        ("REJECT", WhenFull::Reject, "none", false),
                        ("RETRY", WhenFull::Reject, "fixed:100,200", false),
                        ("DROP", WhenFull::Drop, "none", false),
                        ("RETRY-HOLD", WhenFull::Reject, "fixed:100,200", true),
                    ]
                } else {
                    vec![
                        ("fixed 100,200 ms", WhenFull::Reject, "fixed:100,200", false),
                        ("jitter 0-200 ms", WhenFull::Reject, "jitter:200", false),
                    ]
                };
            let clients = if opts.scenario == Some(Scenario::Part3Clients) {
                8
            } else {
                1
            };
            policies
                .into_iter()
                .map(|(label, when_full, retry, hold)| {
                    let slug = label.split(' ').next().unwrap_or(label).to_lowercase();
                    let retry: crate::overload::RetryPolicy = retry.parse().expect("static");
                    let o = opts.clone();
                    // compare's --rate and --payload, when given, are kept
                    // (the preset replaced them: 80/s, 16 KiB whatever was asked).
                    let given = matrix_flags_given(&o);
                    Config::new(label.to_string(), slug, move |r| {
                        r.preset = Some(super::run::Preset::Part3);
                        r.apply_preset(|id| given.contains(&format!("--{id}").as_str()));
                        r.server.when_full = when_full;
                        r.client.retry = retry.clone();
                        r.client.retry_holds_credit = hold;
                        r.client.max_attempts = 3;
                        r.client.connections = clients;
                        if let Some(d) = o.duration {
                            r.client.duration = d;
                        }
                        if let Some(ms) = o.deadline_ms {
                            r.client.original_deadline = Dur(std::time::Duration::from_millis(ms));
                        }
                        if let Some(s) = &o.service_schedule {
                            r.server.service_schedule = Some(s.clone());
                        }
                    })
                })
                .collect()
        }
        Some(Scenario::Bdp) => ["0ms", "10ms", "25ms", "50ms"]
            .iter()
            .map(|d| {
                let delay: Dur = d.parse().expect("static");
                Config::new(format!("link-delay={d}"), format!("delay{d}"), move |r| {
                    r.client.link_delay = delay;
                    r.server.service_time = "1ms".parse().expect("static");
                })
            })
            .collect(),
        _ => {
            let releases = opts.release.clone().unwrap_or_else(|| match opts.scenario {
                Some(Scenario::Part1) => vec![ReleasePoint::Frame],
                _ => vec![ReleasePoint::Frame, ReleasePoint::Complete],
            });
            let queues = opts.queue.clone().unwrap_or_else(|| {
                vec![
                    QueuePolicy::Direct,
                    QueuePolicy::Unbounded,
                    QueuePolicy::Bounded(32),
                ]
            });
            releases
                .iter()
                .flat_map(|r| queues.iter().map(move |q| (*r, *q)))
                .map(|(r, q)| {
                    Config::new(
                        label(r, q),
                        format!("{}-{}", r.as_str(), q.to_string().replace(':', "")),
                        move |o| {
                            o.server.release = crate::config::ReleaseSpec::uniform(r);
                            o.server.queue = q;
                        },
                    )
                })
                .collect()
        }
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct CompareOpts {
    /// Existing run directories to compare (grouped by their configuration);
    /// without them, a matrix is run.
    #[arg(value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,

    /// A named scenario that sets the matrix (flags below still apply).
    #[arg(long, value_enum)]
    pub scenario: Option<Scenario>,

    /// Release points to run, comma-separated [default: frame,complete; part1: frame].
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = crate::config::release_point_parser())]
    pub release: Option<Vec<ReleasePoint>>,

    /// Queue policies to run, comma-separated [default: direct,unbounded,bounded:32].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub queue: Option<Vec<QueuePolicy>>,

    /// Sweep a `run` flag over values: PARAM=V1,V2,… with run's flag names
    /// and value syntax (link-delay=0ms,10ms,25ms; stream-window=64KiB,1MiB;
    /// streams=1,2,4). Repeat for a grid. The matrix is then the sweep
    /// (crossed with --release/--queue only when those are given), and
    /// sweep.svg plots the headline figures against the first parameter.
    #[arg(long, value_name = "PARAM=V1,V2,…")]
    pub sweep: Vec<Sweep>,

    /// Repeats of each configuration (the table shows median and min–max;
    /// Part 3's tables, mean and min–max).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,

    /// Offered-load period of each run [default: 5s; part3: 36s]. 5 s is
    /// the shortest that still shows a steady queue slope after the 10%
    /// warm-up; the drain comes on top.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<Dur>,

    /// part3 scenarios: each original's deadline in ms [default: 2000]
    /// (the article's secondary studies used 500 and 5000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub deadline_ms: Option<u64>,

    /// part3 scenarios: the worker's service schedule [default:
    /// 10ms,12s:40ms,24s:10ms] (e.g. a shortened run's own slowdown).
    #[arg(long, value_name = "SCHEDULE")]
    pub service_schedule: Option<crate::overload::ServiceSchedule>,

    /// Messages offered per second.
    #[arg(long, default_value_t = 300.0)]
    pub rate: f64,

    /// Payload bytes per message.
    #[arg(long, default_value = "16KiB", value_name = "SIZE")]
    pub payload: Size,

    /// Simulated work per message.
    #[arg(long, default_value = "10ms", value_name = "DURATION")]
    pub service_time: Dur,

    /// The server's stream and connection receive windows.
    #[arg(long, default_value = "65535", value_name = "SIZE")]
    pub window: Size,

    /// Output directory (default: captures/<utc-time>-compare[-SCENARIO]/);
    /// each run gets a subdirectory. Refused if not empty.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Write into a non-empty --out anyway: the comparison's files and its
    /// runs' directories of the same names are replaced, nothing else is
    /// removed.
    #[arg(long)]
    pub force: bool,

    /// Payload bytes kept in frame events of the runs.
    #[arg(long, value_enum, default_value = "headers", value_name = "MODE")]
    pub capture_payload: CapturePayload,

    /// Also write server.pcap and client.pcap for every run (large: every
    /// DATA frame, payload zeroed unless kept).
    #[arg(long)]
    pub pcap: bool,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

fn label(release: ReleasePoint, queue: QueuePolicy) -> String {
    format!("release={} queue={queue}", release.as_str())
}

/// What `compare` produced.
pub struct Comparison {
    pub dir: PathBuf,
    pub rows: Vec<compare::Row>,
    pub table: String,
    /// The exit code (README's table): the worst of its runs' (a failed
    /// check, an RPC not OK), 130 when Ctrl-C stopped the matrix.
    pub exit_code: i32,
}

pub async fn compare(opts: CompareOpts) -> anyhow::Result<Comparison> {
    let mut runs: Vec<RunRef> = vec![];
    let mut interrupted = false;
    let mut sweep_points: Vec<SweepPoint> = vec![];
    // Settings every saved run shares (taken out of their labels).
    let mut shared = String::new();
    let name = match opts.scenario {
        Some(s) => format!("compare-{}", s.name()),
        None => "compare".to_string(),
    };
    let out = match &opts.out {
        Some(d) => d.clone(),
        None => super::default_run_dir(&name),
    };
    // Created once every refusal is past (a refused command leaves nothing):
    // below, before the first run, or before the comparison is written.
    super::refuse_a_file_as_out(&out)?;
    if let Some(first) = std::fs::read_dir(&out).ok().and_then(|mut d| d.next()) {
        crate::refuse_unless!(
            opts.force,
            "--out {} is not empty (e.g. {}); use --force to write into it, or another --out",
            out.display(),
            first.map_or_else(
                |_| "?".into(),
                |e| e.file_name().to_string_lossy().into_owned()
            )
        );
    }

    if !opts.runs.is_empty() {
        crate::refuse_unless!(
            opts.scenario.is_none()
                && opts.release.is_none()
                && opts.queue.is_none()
                && opts.sweep.is_empty(),
            "--scenario, --sweep, --release and --queue choose a matrix to run; they do not apply to existing run directories"
        );
        let how = matrix_flags_given(&opts);
        crate::refuse_unless!(
            how.is_empty(),
            "{} say{} how to run a matrix; existing run directories are compared as they ran (leave {} out)",
            how.join(", "),
            if how.len() == 1 { "s" } else { "" },
            if how.len() == 1 { "it" } else { "them" }
        );
        // One run given twice (another spelling, a copy) would count as two
        // repeats: refused, by path and by the trace's clock anchor.
        let mut seen: Vec<(PathBuf, Option<(u64, u64)>)> = vec![];
        for dir in &opts.runs {
            let canon = dir
                .canonicalize()
                .with_context(|| format!("reading {}", dir.display()))?;
            let anchor = h2probe_analysis::meta::Meta::read(dir)
                .ok()
                .and_then(|m| m.clock)
                .map(|c| (c.origin_mono_ns, c.origin_unix_ns));
            if let Some((first, _)) = seen
                .iter()
                .find(|(p, a)| *p == canon || (anchor.is_some() && *a == anchor))
            {
                anyhow::bail!(
                    "{} and {} are one run (the same directory, or a copy: one recording); \
                     it would count as two repeats",
                    first.display(),
                    dir.display()
                );
            }
            seen.push((canon, anchor));
        }
        for dir in &opts.runs {
            let (summary, warnings) = super::analyze_dir(dir)?;
            for w in warnings {
                crate::say!("warning: {w}");
            }
            let config = part3_label(dir).unwrap_or_else(|| super::config_of(dir));
            runs.push(RunRef {
                config,
                dir: dir.clone(),
                summary,
            });
        }
        split_part3_names(&mut runs);
        shared = strip_shared(&mut runs);
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    } else {
        crate::refuse_unless!(
            opts.scenario.is_none()
                || opts.scenario == Some(Scenario::Part1)
                || (opts.release.is_none() && opts.queue.is_none()),
            "--release and --queue do not apply to --scenario {}",
            opts.scenario.map_or("", |s| s.name())
        );
        crate::refuse_unless!(
            opts.scenario.is_none() || opts.sweep.is_empty(),
            "--sweep does not combine with --scenario {} (a scenario is a fixed matrix)",
            opts.scenario.map_or("", |s| s.name())
        );
        // A value listed twice ran its first configuration, then stopped
        // at the second's directory ("is not empty"), with no comparison.
        let again =
            "is listed twice; each value is one configuration (use --repeats to run one again)";
        let release = twice(opts.release.as_deref().unwrap_or_default());
        crate::refuse_unless!(
            release.is_none(),
            "--release: {} {again}",
            release.map_or("", |r| r.as_str())
        );
        let queue = twice(opts.queue.as_deref().unwrap_or_default());
        crate::refuse_unless!(
            queue.is_none(),
            "--queue: {} {again}",
            queue.map(|q| q.to_string()).unwrap_or_default()
        );
        for sw in &opts.sweep {
            crate::refuse_unless!(
                !NOT_SWEPT.contains(&sw.param.as_str()),
                "--sweep {}: that flag says where and how to write, not what to run; sweep a flag of `h2probe run` such as link-delay, stream-window, streams",
                sw.param
            );
            crate::refuse_unless!(
                opts.sweep.iter().filter(|o| o.param == sw.param).count() == 1,
                "--sweep {} is given twice; list all its values in one --sweep",
                sw.param
            );
            // --release and --queue are applied after the sweep's flags:
            // both given, the sweep's values were labelled and never run;
            // compare's --rate, --payload, … were silently replaced by them.
            let own = matrix_flags_given(&opts)
                .iter()
                .any(|f| f.trim_start_matches("--") == sw.param);
            for (flag, given) in [
                ("release", opts.release.is_some()),
                ("queue", opts.queue.is_some()),
                (sw.param.as_str(), own),
            ] {
                crate::refuse_unless!(
                    !(given && sw.param == flag),
                    "--sweep {flag}=… and --{flag} both choose the {flag}; give its values in one of them"
                );
            }
        }
        crate::refuse_unless!(
            opts.scenario.is_some_and(|s| s.is_part3())
                || (opts.deadline_ms.is_none() && opts.service_schedule.is_none()),
            "--deadline-ms and --service-schedule apply to --scenario part3 and part3-clients only"
        );
        crate::refuse_unless!(
            opts.window.0 >= 65_535,
            "--window {} sets both windows, and the connection window cannot go below 65535 (h2 can only raise it); \
             for a smaller stream window, give --sweep stream-window={}",
            opts.window,
            opts.window
        );
        crate::refuse_unless!(
            !(opts.scenario.is_some_and(|s| s.is_part3())
                && matrix_flags_given(&opts).contains(&"--service-time")),
            "--service-time does not apply to --scenario part3 and part3-clients: their worker follows --service-schedule"
        );
        let matrix = matrix(&opts);
        // Check every configuration before spending minutes on the first.
        let mut points = vec![];
        let mut warned = false;
        for c in &matrix {
            let o = make_opts(&opts, c, &out, 0)?;
            o.client.validate()?;
            o.output.validate()?;
            if let Some(w) = super::run::schedule_warning(&o).filter(|_| !warned) {
                crate::say!("warning: {w}");
                warned = true;
            }
            o.server.validate(
                opts.capture_payload,
                Some(o.client.framed_upper_bound()),
                Some(o.client.streams),
            )?;
            super::run::check_together(&o)?;
            points.push(SweepPoint {
                label: c.label.clone(),
                point: c.point.clone(),
                window: o.server.stream_window.0.min(o.server.conn_window.0),
                framed: o.client.framed_upper_bound(),
            });
        }
        sweep_points = points;
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let total = matrix.len() as u64 * opts.repeats as u64;
        let bar = progress_bar(total, opts.quiet);
        let mut done = 0;
        let started = std::time::Instant::now();
        'matrix: for rep in 1..=opts.repeats {
            for c in &matrix {
                let cfg = c.label.clone();
                let head = format!(
                    "run {} of {total}{}{}",
                    done + 1,
                    if opts.repeats > 1 {
                        format!(" (repeat {rep}/{})", opts.repeats)
                    } else {
                        String::new()
                    },
                    eta(started.elapsed(), done, total)
                );
                match &bar {
                    Some(b) => {
                        b.set_prefix(head);
                        b.set_message(cfg.clone());
                    }
                    // Not an error line: no `h2probe:` prefix.
                    None if !opts.quiet => eprintln!("{}", plain_progress(&head, &cfg)),
                    None => {}
                }
                let result = run::run(make_opts(&opts, c, &out, rep)?).await?;
                for w in &result.warnings {
                    crate::say!("warning: {w}");
                }
                runs.push(RunRef {
                    config: cfg,
                    dir: result.dir.clone(),
                    summary: result.summary.clone(),
                });
                done += 1;
                if let Some(b) = &bar {
                    b.set_position(done);
                }
                if result.interrupted {
                    // Ctrl-C stops the matrix; what ran so far is still compared.
                    crate::say!("interrupted after {done} of {total} runs; comparing those");
                    interrupted = true;
                    break 'matrix;
                }
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
    }

    let rows = compare::rows(&runs);
    let mut title = match opts.scenario {
        Some(s) => format!("h2probe comparison: {} scenario", s.name()),
        None => "h2probe comparison".to_string(),
    };
    if !shared.is_empty() {
        title.push_str(&format!(" (every run: {shared})"));
    }
    let part3 = opts.scenario.is_some_and(|s| s.is_part3())
        || (opts.scenario.is_none()
            && runs.iter().all(|r| r.summary.overload.is_some())
            && !runs.is_empty());
    let md = if part3 {
        // The article's figures sit beside ours only for its own setting.
        let article = match &opts.scenario {
            Some(_) => opts.deadline_ms.is_none_or(|ms| ms == 2000),
            None => runs
                .iter()
                .all(|r| original_deadline_of(&r.dir).as_deref() == Some("2s")),
        };
        h2probe_analysis::part3::markdown(&title, &runs, article)
    } else {
        compare::markdown(&title, &rows)
    };
    let out2 = out.clone();
    let rows2 = rows.clone();
    let runs2 = runs.clone();
    let md2 = md.clone();
    tokio::task::spawn_blocking(move || write_outputs(&out2, &md2, &rows2, &runs2, part3))
        .await??;
    if !opts.sweep.is_empty() {
        sweep_plot(&out, &opts.sweep, &sweep_points, &rows)?;
    }
    // report.html: the table, the plots across configurations, each run's
    // plots side by side and a link to its own page.
    let page_runs: Vec<h2probe_analysis::page::CompareRun> = runs
        .iter()
        .map(|r| h2probe_analysis::page::CompareRun {
            dir: r.dir.clone(),
            config: r.config.clone(),
            summary: r.summary.clone(),
            link: h2probe_analysis::page::link(&out, &r.dir.join("report.html")),
        })
        .collect();
    let page = out.join("report.html");
    std::fs::write(
        &page,
        h2probe_analysis::page::compare_html_with(&page_runs, Some(&out), part3.then_some(&md)),
    )
    .with_context(|| format!("writing {}", page.display()))?;
    let mut table = if part3 {
        compare::markdown_for_terminal(&md, super::TERMINAL_WIDTH)
    } else {
        compare::terminal_table(&rows, super::TERMINAL_WIDTH)
    };
    if !shared.is_empty() {
        let every = compare::wrap_words(&format!("every run: {shared}"), super::TERMINAL_WIDTH);
        table.insert_str(0, &format!("{}\n\n", every.join("\n")));
    }
    let exit_code = runs
        .iter()
        .map(|r| h2probe_analysis::report::exit_code(&r.summary, false))
        .chain(interrupted.then_some(130))
        .fold(0, h2probe_analysis::report::worst_exit);
    Ok(Comparison {
        table,
        dir: out,
        rows,
        exit_code,
    })
}

/// The first value of `list` that an earlier one repeats.
fn twice<T: PartialEq>(list: &[T]) -> Option<&T> {
    list.iter()
        .enumerate()
        .find_map(|(i, v)| list[..i].contains(v).then_some(v))
}

/// Takes the settings every run shares out of the runs' labels, so the
/// table shows what differs between the groups; returns them (empty when
/// nothing is shared, or when the runs are all one configuration). Every
/// label keeps its full configuration minus the same words, so runs are
/// grouped exactly as before.
fn strip_shared(runs: &mut [RunRef]) -> String {
    let words = |c: &str| c.split(' ').map(str::to_string).collect::<Vec<_>>();
    let Some(first) = runs.first().map(|r| words(&r.config)) else {
        return String::new();
    };
    if runs.iter().all(|r| r.config == runs[0].config) {
        return String::new();
    }
    // Only settings (`key=value`) are taken out: a name's own words ("ms"
    // of "fixed 100,200 ms") are no setting the runs share.
    let shared: Vec<String> = first
        .into_iter()
        .filter(|w| w.contains('=') && runs.iter().all(|r| words(&r.config).contains(w)))
        .collect();
    for r in runs.iter_mut() {
        let rest: Vec<String> = words(&r.config)
            .into_iter()
            .filter(|w| !shared.contains(w))
            .collect();
        // Labels name what differs from run's defaults: none left means
        // this run has the defaults where the others do not.
        r.config = if rest.is_empty() {
            "(defaults)".into()
        } else {
            rest.join(" ")
        };
    }
    shared.join(" ")
}

/// The Part 3 configuration name of an Exchange run directory (the names
/// `--scenario part3` and `part3-clients` give), so repeats group and pair
/// when existing runs are compared again.
fn part3_label(dir: &Path) -> Option<String> {
    let meta = h2probe_analysis::meta::Meta::read(dir).ok()?;
    let client = meta.config.client.as_ref()?;
    let server = meta.config.server.as_ref()?;
    if client.get("rpc")?.as_str()? != "exchange" {
        return None;
    }
    let retry = client.get("retry")?.as_str()?.to_string();
    let clients = client.get("connections")?.as_u64()?;
    let when_full = server.get("when_full")?.as_str()?;
    Some(if clients > 1 {
        match retry.split_once(':') {
            Some(("fixed", d)) => format!("fixed {d} ms"),
            Some(("jitter", d)) => format!("jitter 0-{d} ms"),
            _ => format!("{} {clients} clients", when_full.to_uppercase()),
        }
    } else if retry != "none" {
        let hold = client.get("retry_holds_credit").and_then(|v| v.as_bool()) == Some(true);
        if hold { "RETRY-HOLD" } else { "RETRY" }.to_string()
    } else {
        when_full.to_uppercase()
    })
}

/// Part 3 runs named alike (`RETRY`) whose configurations differ in more
/// than their seed (`--retry fixed:100,200` and `jitter:300`, a 36 s and a
/// 6 s run) get the settings that tell them apart after the name, so they
/// are never pooled; runs of one scenario keep their plain names (and
/// pair by repeat).
fn split_part3_names(runs: &mut [RunRef]) {
    // Each run's full configuration (seed aside), read once; None for a
    // run that is not Part 3's.
    let full: Vec<Option<Vec<String>>> = runs
        .iter()
        .map(|r| {
            part3_label(&r.dir).map(|_| {
                super::config_of(&r.dir)
                    .split(' ')
                    .filter(|w| !w.starts_with("seed="))
                    .map(str::to_string)
                    .collect()
            })
        })
        .collect();
    let mut names: Vec<String> = (0..runs.len())
        .filter(|&i| full[i].is_some())
        .map(|i| runs[i].config.clone())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let members: Vec<(usize, &Vec<String>)> = (0..runs.len())
            .filter(|&i| runs[i].config == name)
            .filter_map(|i| full[i].as_ref().map(|f| (i, f)))
            .collect();
        if members
            .iter()
            .all(|(_, c)| Some(c) == members.first().map(|m| &m.1))
        {
            continue;
        }
        let labels: Vec<(usize, String)> = members
            .iter()
            .map(|&(i, words)| {
                let own: Vec<&str> = words
                    .iter()
                    .filter(|w| !members.iter().all(|(_, c)| c.contains(w)))
                    .map(String::as_str)
                    .collect();
                (i, format!("{name} {}", own.join(" ")))
            })
            .collect();
        for (i, label) in labels {
            runs[i].config = label;
        }
    }
}

/// The flags of `opts` that only shape a matrix to run and differ from
/// their defaults (given with run directories, they were ignored).
fn matrix_flags_given(opts: &CompareOpts) -> Vec<&'static str> {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct W {
        #[command(flatten)]
        o: CompareOpts,
    }
    let d = W::parse_from(["compare"]).o;
    let differs =
        |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
    [
        ("--repeats", differs(&opts.repeats, &d.repeats)),
        ("--duration", differs(&opts.duration, &d.duration)),
        ("--deadline-ms", differs(&opts.deadline_ms, &d.deadline_ms)),
        (
            "--service-schedule",
            differs(&opts.service_schedule, &d.service_schedule),
        ),
        ("--rate", differs(&opts.rate, &d.rate)),
        ("--payload", differs(&opts.payload, &d.payload)),
        (
            "--service-time",
            differs(&opts.service_time, &d.service_time),
        ),
        ("--window", differs(&opts.window, &d.window)),
        (
            "--capture-payload",
            differs(&opts.capture_payload, &d.capture_payload),
        ),
        ("--pcap", opts.pcap),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

/// The `--original-deadline` a run directory's meta.json records.
fn original_deadline_of(dir: &Path) -> Option<String> {
    let meta = h2probe_analysis::meta::Meta::read(dir).ok()?;
    let d = meta.config.client.as_ref()?.get("original_deadline")?;
    d.as_str().map(String::from)
}

/// A run's options: compare's own flags, then the configuration's `run`
/// flags (a sweep's values, through run's parsers; a later flag wins), then
/// its changes, then where to write.
fn make_opts(o: &CompareOpts, c: &Config, out: &Path, rep: u32) -> anyhow::Result<RunOpts> {
    use clap::{Parser as _, ValueEnum as _};
    let mode = o
        .capture_payload
        .to_possible_value()
        .expect("no skipped variants");
    let mut argv: Vec<String> = vec![
        format!(
            "--duration={}",
            o.duration.unwrap_or(Dur(std::time::Duration::from_secs(5)))
        ),
        format!("--rate={}", o.rate),
        format!("--payload={}", o.payload),
        format!("--service-time={}", o.service_time),
        format!("--stream-window={}", o.window),
        format!("--conn-window={}", o.window),
        format!("--capture-payload={}", mode.get_name()),
    ];
    argv.extend(c.args.iter().cloned());
    let mut r = RunFlags::try_parse_from(&argv)
        .map_err(|e| {
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or_default();
            // An unknown flag is a sweep parameter `run` does not have.
            if e.kind() == clap::error::ErrorKind::UnknownArgument {
                let name = first
                    .split('\'')
                    .nth(1)
                    .unwrap_or_default()
                    .trim_start_matches("--");
                return crate::config::UsageError(format!(
                    "--sweep {name}=…: `{name}` is not a flag of `h2probe run` (see `h2probe run --help` for the names)"
                ));
            }
            crate::config::UsageError(format!("--sweep: {}", first.trim_start_matches("error: ")))
        })?
        .run;
    (c.apply)(&mut r);
    // A swept --queue-limit crossed with --queue caps the unbounded
    // configurations; in the others it would do nothing, which a single
    // run refuses (and that refused the whole matrix).
    if o.queue.is_some() && r.server.queue != QueuePolicy::Unbounded {
        r.server.queue_limit = crate::server::DEFAULT_QUEUE_LIMIT;
    }
    // Repeats are paired by seed: repeat N of every configuration uses seed N.
    r.client.seed = rep.max(1) as u64;
    r.output.no_pcap = !o.pcap;
    r.output.quiet = true;
    r.output.out = Some(out.join(format!("{}-r{rep}", c.slug)));
    // Under compare --force a run directory of the same name is replaced.
    r.output.force = o.force;
    Ok(r)
}

/// `, ≈42s left` from the measured time of the runs done so far (their mean
/// × the runs still to do, this one included); nothing before the first
/// run has finished.
fn eta(elapsed: std::time::Duration, done: u64, total: u64) -> String {
    if done == 0 {
        return String::new();
    }
    let left = elapsed.as_secs_f64() / done as f64 * (total - done) as f64;
    format!(", ≈{left:.0}s left")
}

/// The progress line without a terminal: `progress run k of n…: LABEL`,
/// the label folded under it past 80 columns.
fn plain_progress(head: &str, label: &str) -> String {
    let one = format!("progress {head}: {label}");
    if one.chars().count() <= 80 {
        return one;
    }
    let indent = " ".repeat("progress ".len());
    let mut out = format!("progress {head}:");
    for l in h2probe_analysis::compare::wrap_words(label, 80 - indent.len()) {
        out.push('\n');
        out.push_str(&indent);
        out.push_str(&l);
    }
    out
}

/// The bar: how many runs finished and which run is in progress (`run k
/// of n`, the repeat, the time left) on one line, its configuration on
/// the next; indicatif trims `wide_msg`, so that line fits the terminal
/// (80 columns too) and the time left is never the part cut.
fn progress_bar(total: u64, quiet: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new(total);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:16}] {prefix}\n{wide_msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    b.enable_steady_tick(std::time::Duration::from_millis(500));
    Some(b)
}

fn write_outputs(
    out: &Path,
    md: &str,
    rows: &[compare::Row],
    runs: &[RunRef],
    part3: bool,
) -> anyhow::Result<()> {
    super::write_json(&out.join("comparison.json"), &rows)?;
    let path = out.join("comparison.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    if part3 {
        super::write_json(
            &out.join("part3.json"),
            &h2probe_analysis::part3::rows(runs),
        )?;
        h2probe_analysis::part3::plots(out, runs)?;
    }
    // Side-by-side plots from the first run of each configuration.
    let mut timelines = vec![];
    for row in rows {
        let Some(run) = runs.iter().find(|r| r.config == row.config) else {
            continue;
        };
        let Some(trace) = h2probe_analysis::reader::trace_path(&run.dir) else {
            continue;
        };
        let a = analyze_trace(&trace)?;
        timelines.push((row.config.clone(), a.timeline));
    }
    let refs: Vec<(String, &h2probe_analysis::analyze::Timeline)> =
        timelines.iter().map(|(l, t)| (l.clone(), t)).collect();
    h2probe_analysis::plots::compare_plots(out, &refs)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a terminal, a long configuration label folds under the
    /// progress line's head; every line within 80 columns, no word lost.
    #[test]
    fn the_plain_progress_line_folds_a_long_label_at_80_columns() {
        let label = "release=complete,1=frame queue=bounded:32 worker=2 framing=raw:32KiB stream-window=1MiB conn-window=4MiB";
        let head = "run 12 of 105 (repeat 3/5), ≈1234s left";
        let text = plain_progress(head, label);
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        assert!(text.starts_with(&format!("progress {head}:\n")), "{text}");
        let words: Vec<&str> = text.split_whitespace().collect();
        assert!(
            label.split_whitespace().all(|w| words.contains(&w)),
            "{text}"
        );
        assert_eq!(
            plain_progress("run 1 of 2", "stack=h2"),
            "progress run 1 of 2: stack=h2"
        );
    }

    #[test]
    fn labels_keep_what_differs_between_groups() {
        let run = |c: &str| RunRef {
            config: c.into(),
            dir: PathBuf::from("x"),
            summary: Default::default(),
        };
        let mut runs = vec![
            run("release=frame queue=unbounded link-delay=25ms"),
            run("release=frame queue=unbounded link-delay=25ms streams=2"),
            run("release=frame queue=unbounded link-delay=25ms"),
        ];
        assert_eq!(
            strip_shared(&mut runs),
            "release=frame queue=unbounded link-delay=25ms"
        );
        let labels: Vec<&str> = runs.iter().map(|r| r.config.as_str()).collect();
        assert_eq!(labels, ["(defaults)", "streams=2", "(defaults)"]);
        // One configuration: nothing to take out.
        let mut same = vec![
            run("release=frame queue=direct"),
            run("release=frame queue=direct"),
        ];
        assert_eq!(strip_shared(&mut same), "");
        assert_eq!(same[0].config, "release=frame queue=direct");
        // A name's words are not settings: the eight-client study's
        // labels kept "ms" apart from their names.
        let mut named = vec![
            run("fixed 100,200 ms original-deadline=500ms"),
            run("jitter 0-200 ms original-deadline=500ms"),
        ];
        assert_eq!(strip_shared(&mut named), "original-deadline=500ms");
        let labels: Vec<&str> = named.iter().map(|r| r.config.as_str()).collect();
        assert_eq!(labels, ["fixed 100,200 ms", "jitter 0-200 ms"]);
    }

    #[test]
    fn the_time_left_comes_from_measured_runs() {
        let d = std::time::Duration::from_secs;
        assert_eq!(eta(d(5), 0, 4), "");
        // Two runs took 20 s: two more take about 20 s.
        assert_eq!(eta(d(20), 2, 4), ", ≈20s left");
        assert_eq!(eta(d(30), 3, 3), ", ≈0s left");
    }

    #[test]
    fn a_sweep_is_a_grid_of_run_flags() {
        let sweep: Vec<Sweep> = ["streams=1,2", "--link-delay=0ms,25ms"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(sweep[1].param, "link-delay");
        let opts = CompareOpts {
            runs: vec![],
            scenario: None,
            release: Some(vec![ReleasePoint::Complete]),
            queue: None,
            sweep,
            repeats: 1,
            duration: Some("1s".parse().unwrap()),
            deadline_ms: None,
            service_schedule: None,
            rate: 300.0,
            payload: "16KiB".parse().unwrap(),
            service_time: "10ms".parse().unwrap(),
            window: "65535".parse().unwrap(),
            out: None,
            force: false,
            capture_payload: CapturePayload::Headers,
            pcap: false,
            quiet: true,
        };
        let m = matrix(&opts);
        let labels: Vec<&str> = m.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "streams=1 link-delay=0ms release=complete",
                "streams=1 link-delay=25ms release=complete",
                "streams=2 link-delay=0ms release=complete",
                "streams=2 link-delay=25ms release=complete",
            ]
        );
        let r = make_opts(&opts, &m[3], Path::new("/tmp"), 1).unwrap();
        assert_eq!(r.client.streams, 2);
        assert_eq!(r.client.link_delay.0, std::time::Duration::from_millis(25));
        assert_eq!(
            r.server.release,
            crate::config::ReleaseSpec::uniform(ReleasePoint::Complete)
        );
        // compare's own flags still apply underneath.
        assert_eq!(r.client.duration.0, std::time::Duration::from_secs(1));
        assert!("streams".parse::<Sweep>().is_err());
        assert!("streams=".parse::<Sweep>().is_err());
    }
}
