//! The release policy: when `release_capacity` is called for a message's
//! bytes (`--release`), and the release/discard bookkeeping it implies.

use super::*;

impl Rpc {
    pub(super) fn release(
        &self,
        flow: &mut FlowControl,
        bytes: u32,
        at: ReleasePoint,
        seq: Option<u64>,
    ) {
        if bytes == 0 {
            return;
        }
        // --stall-stream: this stream's bytes are never released (but the
        // end-of-RPC release still returns them).
        if let Some(stall) = self.ctx.cfg.stall_stream {
            if at != ReleasePoint::End
                && stall.stream == self.stream
                && self.received_bytes.load(Relaxed) >= stall.after
            {
                return;
            }
        }
        let t = self.ctx.rec.now();
        match flow.release_capacity(bytes as usize) {
            Ok(()) => {
                self.unreleased.fetch_sub(bytes as u64, Relaxed);
                Live::add(&self.ctx.live.released, bytes as u64);
                self.emit(t, KindId::Release, || {
                    Kind::Release(ReleaseEv { bytes, at, seq })
                });
            }
            // The stream is gone (reset, or the RPC already answered): the
            // connection window was returned by h2 itself.
            Err(e) => tracing::debug!("release_capacity({bytes}) on stream {}: {e}", self.stream),
        }
    }

    pub(super) fn discard(&self, seqs: &[u64], reason: DiscardReason) {
        let t = self.ctx.rec.now();
        for &seq in seqs {
            self.emit(t, KindId::Discard, || {
                Kind::Discard(DiscardEv { seq, reason })
            });
        }
        self.discarded.fetch_add(seqs.len() as u64, Relaxed);
        Live::add(&self.ctx.live.discarded, seqs.len() as u64);
    }

    /// This stream's `--release` point.
    pub(super) fn release_point(&self) -> ReleasePoint {
        self.release_at
    }
}
