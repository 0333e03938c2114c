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
