//! The command line: definitions and dispatch. `main.rs` only calls [`main`].

use crate::commands::client::ClientCmdOpts;
use crate::commands::run::RunOpts;
use crate::commands::serve::ServeOpts;
use crate::commands::{self};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;

/// h2probe: a laboratory instrument for HTTP/2 flow control.
///
/// A gRPC client-streaming server and client built directly on h2, with a
/// socket tap on both that records every frame (above all DATA and
/// WINDOW_UPDATE) beside every application step on one clock, and an offline
/// analysis that reconstructs the windows and compares release strategies.
///
/// With no command, `h2probe` runs the default experiment (`h2probe run`,
/// whose flags it takes: `h2probe --duration 1s` is `h2probe run --duration
/// 1s`): 16 KiB messages offered at 300/s for 10 s to a 10 ms worker behind
/// an unbounded queue, credit released on frame receipt, 65,535-byte windows.
///
/// Sizes: 65535, 16KiB, 1.5MiB, 2GiB (1024-based) or 16kB, 2MB, 1GB
/// (1000-based); 16K, 16KB and 16M are refused as ambiguous. Durations:
/// 10ms, 1.5s, 2m, 1h.
#[derive(Parser, Debug)]
#[command(
    name = "h2probe",
    version,
    max_term_width = 100,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true,
    help_template = TOP_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// `h2probe run`'s flags, for `h2probe` without a command.
    #[command(flatten)]
    pub run: Box<RunOpts>,
}

/// The overview: commands, not `run`'s ≈ 60 flags (which `h2probe` takes,
/// and `h2probe run --help` lists; listed here too, they made `h2probe
/// --help` 470 lines).
const TOP_HELP: &str = "\
{before-help}{about-with-newline}
{usage-heading} {usage}

Commands:
{subcommands}

Options:
  [RUN OPTIONS]  Every option of `h2probe run` (listed by `h2probe run --help`)
  -h, --help     Print help (more with '--help')
  -V, --version  Print version{after-help}";

const EXIT_CODES: &str = "Exit codes (run, serve, client, relay, analyze, merge, compare): \
0 every check holds (or cannot be judged) and every RPC ended OK; 1 error (message on stderr); \
2 bad usage; 3 an invariant check failed (see summary.json); 4 the run completed but an RPC \
ended with a status other than OK; 130 interrupted (Ctrl-C; the run directory is still complete).";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run server and client in one process on 127.0.0.1 and write one run directory.
    #[command(after_long_help = EXIT_CODES)]
    Run(Box<RunOpts>),
    /// Run the probe server alone (h2c on 127.0.0.1:50051 by default) until Ctrl-C.
    #[command(after_long_help = EXIT_CODES)]
    Serve(Box<ServeOpts>),
    /// Run the probe client alone against any gRPC server, any client-streaming or bidi method.
    #[command(after_long_help = EXIT_CODES)]
    Client(Box<ClientCmdOpts>),
    /// Relay h2c connections to a real server unchanged, tapping both legs (a real client and server, observed).
    #[command(after_long_help = EXIT_CODES)]
    Relay(Box<crate::commands::relay::RelayOpts>),
    /// Analyse run directories: summary.json, timeline.csv, SVG plots, headline table.
    #[command(
        long_about = "Analyse run directories: read each trace.jsonl and write its products beside it, \
                      replacing the previous ones: summary.json, timeline.csv, windows.csv, the SVG \
                      plots and report.html (its default slice; `h2probe report --at` writes others). \
                      Then print each run's headline. The trace itself is never changed.",
        after_long_help = EXIT_CODES
    )]
    Analyze(AnalyzeOpts),
    /// Write report.html: one run's page (headline, checks, frame ladder, plots, configuration), or a comparison of several.
    #[command(long_about = crate::commands::report::LONG_ABOUT)]
    Report(crate::commands::report::ReportOpts),
    /// Compare release strategies: run a matrix with repeats, or compare run directories.
    #[command(after_long_help = EXIT_CODES)]
    Compare(Box<crate::commands::matrix::CompareOpts>),
    /// Merge traces of separate processes on one host (serve + client) into one run.
    #[command(after_long_help = EXIT_CODES)]
    Merge(crate::commands::merge::MergeOpts),
    /// Export run traces as pcap (Wireshark/tshark), tidy CSV or qlog.
    Export(crate::export::ExportOpts),
    /// Decode raw HTTP/2 bytes (one direction) into frame events, JSON Lines on stdout.
    Decode(crate::decode::DecodeOpts),
}

#[derive(clap::Args, Debug)]
pub struct AnalyzeOpts {
    /// Run directories (each holding a trace.jsonl).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub dirs: Vec<PathBuf>,
}

/// The `rpc` lines a unary client prints at most (one per connection
/// would grow with --connections).
const MAX_UNARY_LINES: usize = 8;

/// Unary outcomes with alike ones (same status and message) folded into
/// the first, in the order given (by connection), with the calls each
/// stands for: how many, and whether all were counted (`alike` 0: a call
/// whose kind was not, past a connection's first few kinds of failure).
/// OK calls fold into the last, the latest OK call as the header says (the
/// first named connection 1 though the calls went over six connections
/// that replaced one another).
fn fold_alike(
    outcomes: &[crate::client::RpcOutcome],
) -> Vec<(&crate::client::RpcOutcome, u64, bool)> {
    let mut out: Vec<(&crate::client::RpcOutcome, u64, bool)> = vec![];
    for o in outcomes {
        let (n, counted) = (o.alike.max(1), o.alike > 0);
        match out
            .iter_mut()
            .find(|(f, ..)| f.status == o.status && f.message == o.message)
        {
            Some((first, m, all)) => {
                if o.status == crate::grpc::status::OK {
                    *first = o;
                }
                *m += n;
                *all &= counted;
            }
            None => out.push((o, n, counted)),
        }
    }
    out
}

/// What an outcome line says of the calls it stands for (see
/// [`fold_alike`]).
fn alike_text(n: u64, counted: bool) -> String {
    match (n, counted) {
        (1, true) => String::new(),
        (n, true) => format!(" (and {} like it)", n - 1),
        (1, false) => format!(
            " (a kind past the first {} of its connection: not counted)",
            crate::client::UNARY_KEPT_FAILED
        ),
        (n, false) => format!(" (and at least {} like it)", n - 1),
    }
}

/// An RPC's outcome line within 80 columns, as the headline below it:
/// continued on lines indented 4 (a server's message, h2's, a reply). A
/// control character in it (a server's message may hold a newline or a
/// tab) is shown escaped, so that it neither breaks nor widens the line.
fn rpc_line(line: &str) -> String {
    let shown: String = line
        .chars()
        .map(|c| match c {
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect();
    format!("{}\n", crate::say::folded(&shown, 4))
}

/// `s` cut to at most `max` characters, marked when cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn print_warnings(w: &[String]) {
    for w in w {
        crate::say!("warning: {w}");
    }
}

use h2probe_analysis::report::exit_code;

/// A run that could not be recorded completely: its error, after the
/// headline of what the trace holds, and exit code 1.
fn recorded(error: &Option<String>) -> Option<i32> {
    let e = error.as_ref()?;
    crate::say!("{e}");
    Some(1)
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    use clap::{CommandFactory, FromArgMatches};
    use std::io::IsTerminal;
    let mut cmd = Cli::command();
    // Help piped to a pager or a file has no terminal to measure, and clap
    // would wrap it at `max_term_width` (100): 80 unless COLUMNS says.
    if !std::io::stdout().is_terminal() && std::env::var_os("COLUMNS").is_none() {
        cmd = cmd.term_width(80);
    }
    let matches = cmd.get_matches();
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // --preset fills in what the command line did not say.
    let given = |m: &clap::ArgMatches, id: &str| {
        m.try_contains_id(id).unwrap_or(false)
            && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
    };
    let all_given = |m: &clap::ArgMatches| -> Vec<String> {
        m.ids()
            .map(|id| id.as_str())
            .filter(|id| given(m, id))
            .map(str::to_string)
            .collect()
    };
    match &mut cli.command {
        Some(Command::Run(o)) => {
            let m = matches.subcommand_matches("run").expect("run was parsed");
            o.apply_preset(|id| given(m, id));
            o.given = all_given(m);
        }
        Some(Command::Client(o)) => {
            let m = matches
                .subcommand_matches("client")
                .expect("client was parsed");
            o.given = all_given(m);
        }
        None => {
            cli.run.apply_preset(|id| given(&matches, id));
            cli.run.given = all_given(&matches);
        }
        _ => {}
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("H2PROBE_LOG"))
        .with_writer(std::io::stderr)
        .init();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            if e.downcast_ref::<crate::config::UsageError>().is_some() {
                crate::say!("{e:#}");
                return 2;
            }
            // A reader that stopped reading (`h2probe analyze … | head -1`):
            // Rust ignores SIGPIPE, so the write fails with EPIPE instead of
            // killing the process (which would be exit 141); the commands
            // write through `writeln!` and pass that error up, never
            // `println!` (which panics on it). End quietly with 0, like a
            // tool killed by SIGPIPE ends silently: what stdout would have
            // said is not wanted, and files written so far stay written.
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return 0;
                }
            }
            crate::say!("{e:#}");
            1
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let command = cli.command.unwrap_or(Command::Run(cli.run));
    match command {
        Command::Run(opts) => {
            // Said whatever --quiet (which silences progress, not warnings);
            // compare says it once for all its runs.
            if let Some(w) = commands::run::schedule_warning(&opts) {
                crate::say!("warning: {w}");
            }
            let r = runtime()?.block_on(commands::run::run(*opts))?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "run directory: {}", r.dir.display())?;
            write!(out, "{}", h2probe_analysis::report::headline(&r.summary))?;
            print_warnings(&r.warnings);
            Ok(recorded(&r.error).unwrap_or_else(|| exit_code(&r.summary, true)))
        }
        Command::Serve(opts) => {
            let f = runtime()?.block_on(commands::serve::serve(*opts))?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "run directory: {}", f.dir.display())?;
            write!(out, "{}", h2probe_analysis::report::headline(&f.summary))?;
            print_warnings(&f.warnings);
            Ok(recorded(&f.error).unwrap_or_else(|| exit_code(&f.summary, true)))
        }
        Command::Relay(opts) => {
            let f = runtime()?.block_on(commands::relay::relay(*opts))?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "run directory: {}", f.dir.display())?;
            write!(out, "{}", h2probe_analysis::report::headline(&f.summary))?;
            print_warnings(&f.warnings);
            Ok(recorded(&f.error).unwrap_or_else(|| exit_code(&f.summary, true)))
        }
        Command::Client(opts) => {
            let unary = opts.client.rpc == crate::overload::RpcKind::Unary;
            let (f, outcomes) = runtime()?.block_on(commands::client::client_cmd(*opts))?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "run directory: {}", f.dir.display())?;
            if unary && !outcomes.is_empty() {
                writeln!(
                    out,
                    "(unary: the latest OK call and each connection's first {} kinds of failure,",
                    crate::client::UNARY_KEPT_FAILED
                )?;
                writeln!(
                    out,
                    "each with how many calls ended so; the rpcs line below counts every call)"
                )?;
            }
            let shown = if unary {
                fold_alike(&outcomes)
            } else {
                outcomes.iter().map(|o| (o, 1, true)).collect()
            };
            for &(o, n, counted) in shown.iter().take(MAX_UNARY_LINES) {
                let reply = o
                    .reply_json
                    .as_ref()
                    .map_or(String::new(), |j| format!(" reply {}", shorten(j, 200)));
                let message = if o.message.is_empty() {
                    String::new()
                } else {
                    format!(" {}", o.message)
                };
                let alike = alike_text(n, counted);
                let line = format!(
                    "rpc conn {} stream {}: {}{message}{reply}{alike}",
                    o.conn,
                    o.stream,
                    h2probe_analysis::schema::status_name(o.status),
                );
                write!(out, "{}", rpc_line(&line))?;
            }
            if shown.len() > MAX_UNARY_LINES {
                writeln!(
                    out,
                    "… and {} more kinds of outcome",
                    shown.len() - MAX_UNARY_LINES
                )?;
            }
            write!(out, "{}", h2probe_analysis::report::headline(&f.summary))?;
            print_warnings(&f.warnings);
            Ok(recorded(&f.error).unwrap_or_else(|| exit_code(&f.summary, true)))
        }
        Command::Analyze(opts) => {
            crate::commands::leave_whole_on_interrupt();
            let mut out = std::io::stdout().lock();
            let mut code = 0;
            let mut runs = vec![];
            // Of several directories, one that cannot be analysed is said
            // and the others still are (the first such stopped them all); a
            // comparison among them (`captures/2*/` matches `compare`'s
            // output) is skipped with a note.
            let (mut failed, mut skipped) = (0, 0);
            for dir in &opts.dirs {
                let (s, w) = match crate::commands::analyse_showing_progress(dir) {
                    Ok(done) => done,
                    Err(e) if opts.dirs.len() > 1 => {
                        use h2probe_analysis::{reader::OpenError, report::ReportError};
                        match e {
                            ReportError::Open(OpenError::Comparison { .. }) => {
                                crate::say!("note: {e}: skipped");
                                skipped += 1;
                            }
                            _ => {
                                crate::say!("error: {e}");
                                failed += 1;
                            }
                        }
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                writeln!(out, "== {}", dir.display())?;
                write!(out, "{}", h2probe_analysis::report::headline(&s))?;
                print_warnings(&w);
                code = h2probe_analysis::report::worst_exit(code, exit_code(&s, false));
                runs.push(h2probe_analysis::compare::RunRef {
                    config: dir.display().to_string(),
                    dir: dir.clone(),
                    summary: s,
                });
            }
            if runs.len() > 1 {
                // Several runs: their headline figures side by side.
                writeln!(out)?;
                write!(
                    out,
                    "{}",
                    h2probe_analysis::compare::terminal_table(
                        &h2probe_analysis::compare::rows(&runs),
                        crate::commands::TERMINAL_WIDTH
                    )
                )?;
            }
            anyhow::ensure!(
                failed == 0,
                "{failed} of {} run directories could not be analysed (said above)",
                opts.dirs.len() - skipped
            );
            Ok(code)
        }
        Command::Report(opts) => {
            crate::commands::leave_whole_on_interrupt();
            let w = crate::commands::report::report(&opts)?;
            for p in w.pages.iter().chain(&w.comparison) {
                println!("{}", p.display());
            }
            Ok(0)
        }
        Command::Compare(opts) => {
            let c = runtime()?.block_on(crate::commands::matrix::compare(*opts))?;
            let mut out = std::io::stdout().lock();
            write!(out, "{}", c.table)?;
            writeln!(
                out,
                // Two lines: a default directory's name alone is 60
                // columns, and the line must fit 80.
                "comparison written to {}/\n  report.html, comparison.md, comparison.json, plots",
                c.dir.display()
            )?;
            Ok(c.exit_code)
        }
        Command::Merge(opts) => {
            crate::commands::leave_whole_on_interrupt();
            let (events, warnings) = crate::commands::merge::merge(&opts)?;
            print_warnings(&warnings);
            let (s, w) = crate::commands::analyse_showing_progress(&opts.out)?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "merged {events} events into {}", opts.out.display())?;
            write!(out, "{}", h2probe_analysis::report::headline(&s))?;
            print_warnings(&w);
            Ok(exit_code(&s, false))
        }
        Command::Export(opts) => {
            crate::commands::leave_whole_on_interrupt();
            crate::refuse_unless!(
                !opts.pcap_gzip || opts.format.contains(&crate::export::Format::Pcap),
                "--pcap-gzip compresses the pcaps, but --format {} writes none: add pcap to --format",
                opts.format
                    .iter()
                    .map(|f| clap::ValueEnum::to_possible_value(f).map_or(String::new(), |v| v.get_name().to_owned()))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let mut out = std::io::stdout().lock();
            // A directory that cannot be exported is said and the others
            // are still exported (the first one's error skipped the rest
            // without a word).
            let mut failed = 0;
            for dir in &opts.dirs {
                match crate::export::export(dir, &opts.format, opts.pcap_gzip) {
                    Ok(paths) => {
                        for path in paths {
                            writeln!(out, "{}", path.display())?;
                        }
                    }
                    Err(e) if opts.dirs.len() > 1 => {
                        let text = format!("{e:#}");
                        let here = dir.display().to_string();
                        match text.contains(&here) {
                            true => crate::say!("error: {text}"),
                            false => crate::say!("error: {here}: {text}"),
                        }
                        failed += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
            anyhow::ensure!(
                failed == 0,
                "{failed} of {} run directories not exported (said above)",
                opts.dirs.len()
            );
            Ok(0)
        }
        Command::Decode(opts) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let d = crate::decode::decode(&opts, &mut out)?;
            out.flush()?;
            use h2probe_analysis::report::counted;
            crate::say!(
                "{}, {}",
                counted(d.frames, "frame"),
                counted(d.errors, "error")
            );
            Ok(if d.errors > 0 { 1 } else { 0 })
        }
    }
}

#[cfg(test)]
mod tests {
    /// An RPC's line folds within 80 columns under a 4-column indent, and
    /// a server's newline or tab is shown escaped (it began a line at
    /// column 0, and a tab widened one past 80).
    #[test]
    fn an_rpc_line_fits_80_columns_whatever_the_server_said() {
        let said = "rpc conn 1 stream 1: INTERNAL first line of the failure\nsecond line:\tindented for sure, and a good deal more text than fits on one line";
        let shown = super::rpc_line(said);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines.len() > 1, "{shown}");
        for (i, l) in lines.iter().enumerate() {
            assert!(h2probe_analysis::compare::columns(l) <= 80, "{l}");
            assert_eq!(l.starts_with("    "), i > 0, "{shown}");
            assert!(!l.contains('\t'), "{shown}");
        }
        assert!(shown.contains(r"failure\nsecond"), "{shown}");
        assert!(shown.contains(r"line:\tindented"), "{shown}");
        assert_eq!(
            super::rpc_line("rpc conn 1 stream 1: OK"),
            "rpc conn 1 stream 1: OK\n"
        );
    }

    /// Outcomes alike across connections are one line counting all their
    /// calls; a count that left some calls out says "at least".
    #[test]
    fn alike_outcomes_count_every_call_they_stand_for() {
        let call = |conn, status, message: &str, alike| crate::client::RpcOutcome {
            conn,
            stream: 1,
            status,
            message: message.into(),
            reply: None,
            reply_json: None,
            alike,
            answered: true,
            held_to_deadline: false,
        };
        let outcomes = [
            call(1, 0, "", 300),
            call(1, 13, "kind 5", 0),
            call(2, 0, "", 300),
            call(2, 13, "kind 5", 4),
            call(3, 13, "kind 6", 0),
        ];
        let shown: Vec<(u32, u64, bool)> = super::fold_alike(&outcomes)
            .iter()
            .map(|&(o, n, counted)| (o.conn, n, counted))
            .collect();
        // The latest OK call (connection 2's), the first of each failure.
        assert_eq!(shown, [(2, 600, true), (1, 5, false), (3, 1, false)]);
        assert_eq!(super::alike_text(600, true), " (and 599 like it)");
        assert_eq!(super::alike_text(5, false), " (and at least 4 like it)");
        assert_eq!(super::alike_text(1, true), "");
        assert!(super::alike_text(1, false).contains("not counted"));
    }

    #[test]
    fn a_servers_wide_characters_fold_by_their_columns() {
        // 40 CJK characters are 80 columns, not 40: the line folds, and no
        // line is wider than the terminal.
        let said = format!("rpc conn 1 stream 1: UNAVAILABLE {}", "服务".repeat(20));
        let shown = super::rpc_line(&said);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines.len() > 1, "{shown}");
        for l in &lines {
            let cols = h2probe_analysis::compare::columns(l);
            assert!(cols <= 80, "{cols} columns: {l}");
        }
        assert_eq!(shown.matches('服').count(), 20, "{shown}");
    }
}
