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

/// Shows progress: a bar updated every second on a terminal, a plain line
/// every 5 s otherwise, nothing with `--quiet`. The bar fits 80 columns
/// (indicatif trims `wide_msg` to the terminal) and names its phase:
/// offering while the schedule runs, then draining.
pub(crate) fn spawn_progress(live: Arc<Live>, planned: u64, quiet: bool) -> Progress {
    use std::io::IsTerminal;
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        if quiet {
            return;
        }
        let tty = std::io::stderr().is_terminal();
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(planned.max(1));
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:20}] {prefix} {wide_msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
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
            let g = Live::get;
            let scheduled = g(&live.scheduled);
            let phase = if planned == 0 {
                "serving"
            } else if scheduled < planned {
                "offering"
            } else {
                "draining"
            };
            // Short words: with the bar and clock, a line fits 80 columns.
            let msg = format!(
                "sent {} done {} queued {} discarded {} unsent {}",
                g(&live.sent),
                g(&live.completed),
                live.depth.load(std::sync::atomic::Ordering::Relaxed),
                g(&live.discarded),
                g(&live.never_sent)
            );
            match &bar {
                Some(b) => {
                    b.set_position(scheduled);
                    b.set_prefix(phase);
                    b.set_message(msg);
                }
                // Not an error line: no `h2probe:` prefix.
                None => eprintln!(
                    "progress {:>5.0}s {phase}: {msg}",
                    started.elapsed().as_secs_f64()
                ),
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
