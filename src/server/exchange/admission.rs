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
    pub(crate) fn anchor(&self, ctx: &Arc<super::super::ServerCtx>) -> u64 {
        let mut first = false;
        let t0 = *self.anchor.get_or_init(|| {
            first = true;
            now_ns()
        });
        if first {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let mut shutdown = ctx.shutdown.clone();
                for (step, (from, d)) in ctx.cfg.service_schedule.0.iter().enumerate() {
                    let at = t0 + from.as_nanos() as u64;
                    tokio::select! {
                        _ = tokio::time::sleep_until(crate::trace::clock::to_instant(at)) => {}
                        _ = crate::live::flag_set(&mut shutdown) => return,
                    }
                    let service_ns = d.as_nanos() as u64;
                    ctx.rec
                        .emit(Endpoint::Server, 0, 0, at, KindId::ServiceChange, || {
                            Kind::ServiceChange(ServiceChangeEv {
                                service_ns,
                                step: step as u32,
                            })
                        });
                }
            });
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
