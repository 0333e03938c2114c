//! The server-wide admission boundary of `Exchange` (Part 3): K slots over
//! all RPCs (queued + in service), one FIFO of admitted attempts, and the
//! workers that serve it with the service time `--service-schedule` says.
//!
//! A slot is a semaphore permit carried by the job: it is given back only
//! after the job's terminal event is recorded, so counting `admission
//! admitted` minus terminal events in the trace can never exceed K.

use super::ExRpc;
use crate::trace::clock::now_ns;
use crate::trace::schema::{Endpoint, Kind, KindId, ServiceChangeEv};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// One admitted attempt.
pub(super) struct Job {
    pub rpc: Arc<ExRpc>,
    pub seq: u64,
    pub id: u64,
    pub attempt: u32,
    /// Absolute deadline (CLOCK_MONOTONIC ns), 0 = none.
    pub deadline: u64,
    pub framed: u32,
    pub decoded_at: u64,
    /// The decoded attempt: the memory the server really owns while admitted.
    #[allow(dead_code, reason = "held for the memory it occupies")]
    pub body: bytes::Bytes,
    /// The admission slot, returned when the job ends.
    pub permit: OwnedSemaphorePermit,
}

/// Shared by every RPC of one server.
#[derive(Default)]
pub struct Admission {
    slots: OnceLock<Arc<Semaphore>>,
    queue: Mutex<VecDeque<Job>>,
    notify: Notify,
    /// The service schedule's origin: the server's first RPC (any method).
    anchor: OnceLock<u64>,
    workers: OnceLock<()>,
}

impl Admission {
    pub(super) fn slots(&self, k: u32) -> Arc<Semaphore> {
        self.slots
            .get_or_init(|| Arc::new(Semaphore::new(k as usize)))
            .clone()
    }

    /// Slots taken right now.
    pub(super) fn in_use(&self, k: u32) -> u32 {
        k - self.slots(k).available_permits() as u32
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Job>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an admitted job; returns (depth, queued framed bytes) after it.
    pub(super) fn push(&self, job: Job) -> (u32, u64) {
        let mut q = self.lock();
        q.push_back(job);
        let levels = (q.len() as u32, q.iter().map(|j| j.framed as u64).sum());
        drop(q);
        self.notify.notify_one();
        levels
    }

    /// Removes the queued jobs of one RPC (it ended): the caller discards them.
    pub(super) fn take_rpc(&self, rpc: &Arc<ExRpc>) -> Vec<Job> {
        let mut q = self.lock();
        let (mine, rest): (VecDeque<Job>, VecDeque<Job>) =
            q.drain(..).partition(|j| Arc::ptr_eq(&j.rpc, rpc));
        *q = rest;
        mine.into_iter().collect()
    }

    async fn pop(&self) -> (Job, u32) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut q = self.lock();
                if let Some(j) = q.pop_front() {
                    if !q.is_empty() {
                        self.notify.notify_one();
                    }
                    return (j, q.len() as u32);
                }
            }
            notified.await;
        }
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The server's first RPC starts the service schedule: its steps are
    /// recorded as `service_change` events when they take effect.
    ///
    /// The steps in force at once are recorded here, by the RPC (which the
    /// server's shutdown waits for), not by the task that waits for the
    /// later ones: a run interrupted as it starts could close the trace
    /// before that task first ran, and the step would count as dropped.
    pub(crate) fn anchor(&self, ctx: &Arc<super::super::ServerCtx>) -> u64 {
        let mut first = false;
        let t0 = *self.anchor.get_or_init(|| {
            first = true;
            now_ns()
        });
        if first {
            let steps: Vec<(u32, u64, u64)> = (ctx.cfg.service_schedule.0.iter().enumerate())
                .map(|(step, (from, d))| {
                    (
                        step as u32,
                        t0 + from.as_nanos() as u64,
                        d.as_nanos() as u64,
                    )
                })
                .collect();
            let (now, later): (Vec<_>, Vec<_>) = steps.into_iter().partition(|s| s.1 == t0);
            for step in now {
                record_step(ctx, step);
            }
            if !later.is_empty() {
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let mut shutdown = ctx.shutdown.clone();
                    for step in later {
                        tokio::select! {
                            // A step due as the server stops is not recorded:
                            // the trace may be closing.
                            biased;
                            _ = crate::live::flag_set(&mut shutdown) => return,
                            _ = tokio::time::sleep_until(crate::trace::clock::to_instant(step.1)) => {}
                        }
                        record_step(&ctx, step);
                    }
                });
            }
        }
        t0
    }

    /// The worker's service time at `now` (the first step before any RPC).
    pub(crate) fn service_time(
        &self,
        schedule: &crate::overload::ServiceSchedule,
        now: u64,
    ) -> std::time::Duration {
        let since = self.anchor.get().map_or(0, |t0| now.saturating_sub(*t0));
        schedule.at(std::time::Duration::from_nanos(since))
    }

    /// Starts the server-wide workers once.
    pub(super) fn ensure_workers(&self, ctx: &Arc<super::super::ServerCtx>) {
        self.workers.get_or_init(|| {
            for w in 0..ctx.cfg.workers {
                tokio::spawn(worker_loop(ctx.clone(), w));
            }
        });
    }
}

/// Serves admitted jobs in order until shutdown leaves the queue empty.
/// A job whose deadline has passed is answered `expired` and never started;
/// a job whose RPC ended is discarded with the RPC's reason.
async fn worker_loop(ctx: Arc<super::super::ServerCtx>, worker: u32) {
    let adm = &ctx.admission;
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let (job, depth) = tokio::select! {
            // A job ready is taken without joining the shutdown watch.
            biased;
            j = adm.pop() => j,
            _ = crate::live::flag_set(&mut shutdown) => {
                if adm.is_empty() {
                    return;
                }
                adm.pop().await
            }
        };
        ctx.live
            .depth
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let rpc = job.rpc.clone();
        if let Some(reason) = rpc.ended_reason() {
            rpc.discard_job(job, reason);
            continue;
        }
        let now = now_ns();
        if job.deadline != 0 && now >= job.deadline {
            rpc.expire(job, now);
            continue;
        }
        rpc.serve(job, worker, depth, now).await;
    }
}

/// One `service_change`: (step, when it takes effect, service time in ns).
fn record_step(ctx: &super::super::ServerCtx, (step, at, service_ns): (u32, u64, u64)) {
    ctx.rec
        .emit(Endpoint::Server, 0, 0, at, KindId::ServiceChange, || {
            Kind::ServiceChange(ServiceChangeEv { service_ns, step })
        });
}

#[cfg(test)]
mod tests {
    use crate::server::{ServerCtx, ServerOpts};
    use crate::trace::TraceWriter;
    use std::sync::Arc;

    /// A run interrupted as its first RPC arrives closes the trace before
    /// any task spawned then has run: the schedule's first step is in the
    /// trace all the same (not dropped), and a later step due after the
    /// stop is not recorded. Left running, the later step is recorded at
    /// its offset from the first.
    #[test]
    fn the_first_step_is_recorded_before_anything_else_runs() {
        // The service_change events (step, service_ns, t) and the anchor,
        // the server stopped before or after a 5 ms wait.
        let steps_of = |stop_first: bool| {
            let path = std::env::temp_dir().join(format!(
                "h2probe-anchor-{stop_first}-{}.jsonl",
                std::process::id()
            ));
            let opts = ServerOpts {
                service_schedule: Some("7ms,1ms:40ms".parse().unwrap()),
                ..ServerOpts::default()
            };
            let cfg = opts
                .validate(crate::config::CapturePayload::None, None, None)
                .unwrap();
            let (writer, rec) = TraceWriter::create(&path, 64).unwrap();
            let (stop, shutdown) = tokio::sync::watch::channel(false);
            let ctx = Arc::new(ServerCtx::new(
                cfg,
                rec,
                Default::default(),
                crate::tap::ConnIds::new(2, 2),
                shutdown,
            ));
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let t0 = rt.block_on(async { ctx.admission.anchor(&ctx) });
            if stop_first {
                stop.send(true).unwrap();
            }
            // The waiting task runs now, past its 1 ms step (the yields
            // let it run however late the sleep ended).
            rt.block_on(async {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
            });
            let _ = stop.send(true);
            drop(rt);
            drop(ctx);
            let stats = writer.finish().unwrap();
            let trace = std::fs::read_to_string(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            assert!(stats.dropped.is_empty(), "{stats:?}");
            let steps: Vec<(u64, u64, u64)> = trace
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|e| e["type"] == "service_change")
                .map(|e| {
                    let u = |k: &str| e[k].as_u64().unwrap();
                    (u("step"), u("service_ns"), u("t"))
                })
                .collect();
            (steps, t0)
        };
        let (steps, t0) = steps_of(true);
        assert_eq!(steps, [(0, 7_000_000, t0)]);
        let (steps, t0) = steps_of(false);
        assert_eq!(steps, [(0, 7_000_000, t0), (1, 40_000_000, t0 + 1_000_000)]);
    }
}
