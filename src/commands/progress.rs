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
/// every 5 s otherwise, nothing with `--quiet`.
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
                    "{elapsed_precise} [{bar:30}] {pos}/{len} scheduled  {msg}",
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
            let msg = format!(
                "sent {}  decoded {}  completed {}  queued {}  discarded {}  never-sent {}",
                g(&live.sent),
                g(&live.decoded),
                g(&live.completed),
                live.depth.load(std::sync::atomic::Ordering::Relaxed),
                g(&live.discarded),
                g(&live.never_sent)
            );
            match &bar {
                Some(b) => {
                    b.set_position(g(&live.scheduled));
                    b.set_message(msg);
                }
                None => eprintln!("h2probe: {:>5.0}s  {msg}", started.elapsed().as_secs_f64()),
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
