//! The progress line a command shows while it runs.

use crate::live::Live;
use std::sync::Arc;

/// A progress line that lives while a command runs.
pub(crate) struct Progress {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Stops the updates and clears the bar, so results print on a clean line.
    pub(crate) async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// The bar on a terminal, two lines that each fit 80 columns: the clock,
/// the schedule's progress (when there is a schedule: `serve` and `relay`
/// have none) and the phase, then the counts. (One line held both and cut
/// the counts at 80 columns once they had four digits: `discarded`, the
/// count worth watching, was the first to go.)
fn bar_style(scheduled: bool) -> indicatif::ProgressStyle {
    let template = if scheduled {
        "{elapsed_precise} [{bar:40}] {prefix} {pos}/{len}\n{wide_msg}"
    } else {
        "{elapsed_precise} {prefix}\n{wide_msg}"
    };
    indicatif::ProgressStyle::with_template(template)
        .expect("static template")
        .progress_chars("=> ")
}

/// The counts a progress line shows: those `command`'s process can know
/// (a `client` alone knows what it sent, a `serve` alone what its
/// application did; their others read 0, which said nothing).
fn counts(live: &Live, command: &str) -> String {
    let g = Live::get;
    let sent = format!("sent {}", g(&live.sent));
    let unsent = format!("unsent {}", g(&live.never_sent));
    let app = format!(
        "done {} queued {} discarded {}",
        g(&live.completed),
        live.depth.load(std::sync::atomic::Ordering::Relaxed),
        g(&live.discarded)
    );
    match command {
        "client" => format!("{sent} {unsent}"),
        "serve" => app,
        _ => format!("{sent} {app} {unsent}"),
    }
}

/// What a run plans to offer: `messages` (originals with `--rpc exchange`)
/// over `offer_for`; none for `serve` and `relay`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Plan {
    pub messages: u64,
    pub offer_for: std::time::Duration,
}

/// Shows progress: a bar updated every second on a terminal, a plain line
/// every 5 s otherwise, nothing with `--quiet`. The bar names its phase:
/// offering while the schedule runs, then draining.
pub(crate) fn spawn_progress(
    live: Arc<Live>,
    plan: Plan,
    command: &'static str,
    quiet: bool,
) -> Progress {
    let planned = plan.messages;
    use std::io::IsTerminal;
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        if quiet {
            return;
        }
        let tty = std::io::stderr().is_terminal();
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(planned.max(1));
            b.set_style(bar_style(planned > 0));
            b
        });
        let period = std::time::Duration::from_secs(if tty { 1 } else { 5 });
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = &mut stopped => break,
            }
            let offered = Live::get(&live.offered);
            // A second's grace: the schedule starts once connected, and its
            // last messages are offered just after the duration.
            let over = started.elapsed() > plan.offer_for + std::time::Duration::from_secs(1);
            let phase = phase(planned, offered, over);
            let msg = counts(&live, command);
            match &bar {
                Some(b) => {
                    b.set_position(offered);
                    b.set_prefix(phase);
                    b.set_message(msg);
                }
                // Not an error line: no `h2probe:` prefix.
                None => eprintln!("{}", plain_line(started.elapsed(), phase, &msg)),
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
    });
    Progress {
        stop: Some(stop),
        task,
    }
}

/// The phase a progress line names: `offered` is what the schedule has
/// offered (originals with `--rpc exchange`, whose retries would otherwise
/// pass `planned` while the schedule still runs). Past the offer's time the
/// run is draining, however little was offered (a client held by its server
/// never offers all it planned: it said "offering" at 40 s of a 20 s run).
fn phase(planned: u64, offered: u64, offer_over: bool) -> &'static str {
    if planned == 0 {
        "serving"
    } else if offered < planned && !offer_over {
        "offering"
    } else {
        "draining"
    }
}

/// How far a blocking job (the analysis, report and pcaps after a run;
/// `analyze`) has read its trace: nothing for the first second (short jobs
/// stay silent), then a bar on a terminal, a plain line every 5 s otherwise
/// and a last one when it ends (`done` after [`Reading::done`], else
/// `stopped`). Progress is bytes read over the trace's size: the analysis
/// reads the trace once, the report's ladder up to once more, the pcaps
/// once more. Stops (and clears the bar) when dropped.
pub(crate) struct Reading {
    stop: Arc<std::sync::atomic::AtomicBool>,
    ok: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reading {
    /// The job succeeded: the last line says `done`.
    pub(crate) fn done(self) {
        // Release: seen by the thread that reads `stop` (Acquire) after it.
        self.ok.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Starts the display for `what`, which reads `trace` at most `passes`
/// times (the file may still grow while its writer finishes: its size is
/// re-read).
pub(crate) fn reading_progress(
    what: String,
    trace: std::path::PathBuf,
    passes: u64,
    quiet: bool,
) -> Reading {
    use std::io::IsTerminal;
    use std::sync::atomic::Ordering;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ok = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A test knob (see the README's tests section), not a user option: when
    // the display starts.
    let after = std::env::var("H2PROBE_TEST_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_millis,
        );
    let thread = (!quiet).then(|| {
        let stop = stop.clone();
        let ok = ok.clone();
        let counter = &h2probe_analysis::reader::BYTES_READ;
        let base = counter.load(Ordering::Relaxed);
        std::thread::Builder::new()
            .name("h2probe-progress".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                let tty = std::io::stderr().is_terminal();
                let period = std::time::Duration::from_secs(if tty { 1 } else { 5 });
                let mut next = after;
                let mut bar: Option<indicatif::ProgressBar> = None;
                let mut shown = false;
                let state = || {
                    let size = std::fs::metadata(&trace).map_or(0, |m| m.len());
                    (counter.load(Ordering::Relaxed) - base, size)
                };
                loop {
                    while !stop.load(Ordering::Acquire) && started.elapsed() < next {
                        std::thread::park_timeout(next.saturating_sub(started.elapsed()));
                    }
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    next += period;
                    let (read, size) = state();
                    shown = true;
                    if !tty {
                        // Not an error line: no `h2probe:` prefix.
                        eprintln!(
                            "{}",
                            reading_line(&what, started.elapsed(), read, size, None)
                        );
                        continue;
                    }
                    let b = bar.get_or_insert_with(|| {
                        let b = indicatif::ProgressBar::new(1);
                        b.set_style(
                            indicatif::ProgressStyle::with_template(
                                "{elapsed_precise} [{bar:20}] {bytes}/{total_bytes} {wide_msg}",
                            )
                            .expect("static template")
                            .progress_chars("=> "),
                        );
                        b.set_message(what.clone());
                        b
                    });
                    let total = (size * passes).max(1);
                    b.set_length(total);
                    b.set_position(read.min(total));
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                } else if shown {
                    let (read, size) = state();
                    let end = if ok.load(Ordering::Acquire) {
                        "done"
                    } else {
                        "stopped"
                    };
                    eprintln!(
                        "{}",
                        reading_line(&what, started.elapsed(), read, size, Some(end))
                    );
                }
            })
            .expect("spawning the progress thread")
    });
    Reading { stop, ok, thread }
}

/// `write_products` of a run directory (`analyze`, `merge`, `report` on a
/// stale summary), with the reading display: the analysis reads the trace
/// once, the report's ladder up to once more.
pub(crate) fn analyse_showing_progress(
    dir: &std::path::Path,
) -> Result<(h2probe_analysis::analyze::Summary, Vec<String>), h2probe_analysis::report::ReportError>
{
    let reading = reading_progress(
        format!("analysing {}", dir.display()),
        h2probe_analysis::reader::trace_path(dir).unwrap_or_default(),
        2,
        false,
    );
    let products = h2probe_analysis::report::write_products(dir)?;
    reading.done();
    Ok(products)
}

/// The plain line: `progress    6s finishing: read 1.4× the 2.70 GiB trace`
/// (`done, read …` or `stopped, read …` at the end).
/// The progress line without a terminal (a log, or `2>&1 | tee`, which a
/// person may still read at 80 columns): one line while it fits, else the
/// counts on lines of their own under it.
fn plain_line(elapsed: std::time::Duration, phase: &str, counts: &str) -> String {
    let head = format!("progress {:>5.0}s {phase}:", elapsed.as_secs_f64());
    let one = format!("{head} {counts}");
    if one.chars().count() <= 80 {
        return one;
    }
    let indent = " ".repeat("progress ".len());
    let mut out = head;
    for l in h2probe_analysis::compare::wrap_words(counts, 80 - indent.len()) {
        out.push('\n');
        out.push_str(&indent);
        out.push_str(&l);
    }
    out
}

fn reading_line(
    what: &str,
    elapsed: std::time::Duration,
    read: u64,
    size: u64,
    end: Option<&str>,
) -> String {
    format!(
        "progress {:>5.0}s {what}: {}read {:.1}× the {} trace",
        elapsed.as_secs_f64(),
        end.map_or(String::new(), |e| format!("{e}, ")),
        read as f64 / size.max(1) as f64,
        indicatif::HumanBytes(size),
    )
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An 80-column terminal that keeps what is drawn on it (a clone shares
    /// the record).
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<std::sync::Mutex<Vec<String>>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push(s.to_string());
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.write_line(s)
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// `s` without ANSI escape sequences (ESC, then up to a letter).
    fn plain(s: &str) -> String {
        let mut out = String::new();
        let mut esc = false;
        for c in s.chars() {
            match (esc, c) {
                (false, '\x1b') => esc = true,
                (false, c) => out.push(c),
                (true, c) if c.is_ascii_alphabetic() => esc = false,
                (true, _) => {}
            }
        }
        out
    }

    /// A Part 3 run whose retries outnumber its originals' shortfall still
    /// offers until its originals are all scheduled.
    #[test]
    fn the_phase_follows_the_schedule_not_the_attempts() {
        let live = Live::default();
        Live::add(&live.offered, 2_000);
        Live::add(&live.scheduled, 2_900);
        assert_eq!(phase(2_880, Live::get(&live.offered), false), "offering");
        Live::add(&live.offered, 880);
        assert_eq!(phase(2_880, Live::get(&live.offered), false), "draining");
        assert_eq!(phase(0, 5, false), "serving");
        // A schedule held back past its time: draining, not offering.
        assert_eq!(phase(2_880, 100, true), "draining");
    }

    /// Counts of a long Part 1 run (120 s deadlines, thousands discarded)
    /// are drawn whole on an 80-column terminal, `discarded` included.
    #[test]
    fn the_progress_bar_shows_every_count_within_80_columns() {
        let live = Live::default();
        Live::add(&live.scheduled, 36_000);
        Live::add(&live.sent, 35_999);
        Live::add(&live.completed, 10_800);
        live.depth
            .store(18_099, std::sync::atomic::Ordering::Relaxed);
        Live::add(&live.discarded, 7_100);
        Live::add(&live.never_sent, 1);
        let screen = Screen::default();
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(36_000),
            indicatif::ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        bar.set_style(bar_style(true));
        bar.set_position(36_000);
        bar.set_prefix("draining");
        bar.set_message(counts(&live, "run"));
        bar.finish();
        let lines: Vec<String> = screen.0.lock().unwrap().iter().map(|l| plain(l)).collect();
        let text = lines.join("\n");
        assert!(
            text.contains("sent 35999 done 10800 queued 18099 discarded 7100 unsent 1"),
            "{text}"
        );
        assert!(text.contains("] draining 36000/36000"), "{text}");
        for l in text.lines() {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l:?}",
                l.chars().count()
            );
        }
    }

    /// Without a schedule (`serve`, `relay`) there is no bar to fill and no
    /// "0/1" of a schedule that does not exist: the clock, the phase, the
    /// counts.
    #[test]
    fn a_progress_line_without_a_schedule_shows_no_bar() {
        let screen = Screen::default();
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(1),
            indicatif::ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        bar.set_style(bar_style(false));
        bar.set_prefix("serving");
        bar.set_message(counts(&Live::default(), "serve"));
        bar.finish();
        let text: Vec<String> = screen.0.lock().unwrap().iter().map(|l| plain(l)).collect();
        let text = text.join("\n");
        assert!(text.contains("00:00:00 serving\n"), "{text}");
        assert!(!text.contains('[') && !text.contains("0/1"), "{text}");
        assert!(text.contains("done 0 queued 0 discarded 0"), "{text}");
        // What a server alone cannot know is left out, not shown as 0.
        assert!(!text.contains("sent"), "{text}");
    }

    #[test]
    fn a_client_alone_shows_what_it_sent() {
        let live = Live::default();
        Live::add(&live.sent, 1253);
        Live::add(&live.never_sent, 833);
        assert_eq!(counts(&live, "client"), "sent 1253 unsent 833");
        assert_eq!(
            counts(&live, "run"),
            "sent 1253 done 0 queued 0 discarded 0 unsent 833"
        );
    }

    #[test]
    fn the_plain_progress_line_fits_80_columns() {
        let t = std::time::Duration::from_secs(5);
        assert_eq!(
            plain_line(t, "offering", "sent 1495 done 447 queued 1046"),
            "progress     5s offering: sent 1495 done 447 queued 1046"
        );
        // A long run's counts go under the phase rather than past column 80.
        let counts = "sent 35999 done 10800 queued 18099 discarded 7100 unsent 1";
        let l = plain_line(std::time::Duration::from_secs(120), "draining", counts);
        assert_eq!(l, format!("progress   120s draining:\n         {counts}"));
        let long = "sent 1 ".repeat(20);
        for l in plain_line(t, "offering", long.trim()).lines() {
            assert!(l.chars().count() <= 80, "{l:?}");
        }
    }

    #[test]
    fn the_reading_line_names_the_phase_and_the_bytes() {
        let l = reading_line(
            "finishing",
            std::time::Duration::from_secs(6),
            4_058_744_095,
            2_899_102_925,
            None,
        );
        assert_eq!(l, "progress     6s finishing: read 1.4× the 2.70 GiB trace");
        assert!(l.chars().count() <= 80);
        let l = reading_line(
            "analysing captures/x",
            std::time::Duration::from_secs(19),
            3,
            2,
            Some("done"),
        );
        assert_eq!(
            l,
            "progress    19s analysing captures/x: done, read 1.5× the 2 B trace"
        );
    }
}
