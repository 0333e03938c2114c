//! The send loop: hands queued messages to h2, waiting for capacity and
//! recording every wait on window credit as a `window_blocked` interval.

use super::*;
use std::task::Poll;

pub(super) fn payload_bytes(n: usize) -> Bytes {
    (0..n)
        .map(|i| (i.wrapping_mul(31) + 7) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Sends queued messages until the schedule ends, then half-closes. With
/// `one` (a unary call) the only message's last DATA frame carries
/// END_STREAM, as a unary client's does.
#[allow(clippy::too_many_arguments)]
pub(super) async fn send_all(
    ctx: &ClientCtx,
    conn: u32,
    stream: u32,
    rx: &mut mpsc::Receiver<Pending>,
    send: &mut SendStream<Bytes>,
    in_progress: &AtomicI64,
    payload: &Bytes,
    one: bool,
) -> Result<(), h2::Error> {
    while let Some(p) = rx.recv().await {
        in_progress.store(p.seq as i64, Relaxed);
        let begin = now_ns();
        let data = ctx.call.codec.framed(p.seq, p.scheduled, payload);
        let bytes = data.len() as u32;
        send_message(ctx, conn, stream, send, p.seq, data, one).await?;
        in_progress.store(-1, Relaxed);
        record_sent(
            ctx,
            conn,
            stream,
            SendEv {
                seq: p.seq,
                scheduled: p.scheduled,
                begin,
                bytes,
            },
        );
        if one {
            return Ok(());
        }
    }
    send.send_data(Bytes::new(), true)
}

/// Records a message wholly handed to h2 (`send`, S) and counts it: stamped
/// now, after the last of its bytes went to h2.
pub(super) fn record_sent(ctx: &ClientCtx, conn: u32, stream: u32, ev: SendEv) {
    ctx.rec.emit(
        Endpoint::Client,
        conn,
        stream,
        now_ns(),
        KindId::Send,
        || Kind::Send(ev),
    );
    Live::add(&ctx.live.sent, 1);
}

/// Hands one framed message to h2, waiting for capacity as needed and
/// recording each wait as a `window_blocked` interval; `end`: its last
/// bytes end the stream.
pub(super) async fn send_message(
    ctx: &ClientCtx,
    conn: u32,
    stream: u32,
    send: &mut SendStream<Bytes>,
    seq: u64,
    mut data: Bytes,
    end: bool,
) -> Result<(), h2::Error> {
    let _sending = InSend::new(&ctx.live);
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let mut cap = send.capacity();
        let mut start = 0;
        if cap == 0 {
            start = now_ns();
            // A stream the server already reset or closed fails at once:
            // nothing waited, so no wait is recorded.
            match std::future::poll_fn(|cx| Poll::Ready(send.poll_capacity(cx))).await {
                Poll::Ready(Some(Ok(n))) => cap = n,
                Poll::Ready(Some(Err(e))) => return Err(e),
                Poll::Ready(None) => return Err(h2::Error::from(h2::Reason::STREAM_CLOSED)),
                Poll::Pending => {}
            }
        }
        if cap == 0 {
            // Recorded however the wait ends: here, or (cut short by a
            // deadline, an interrupt or a reset) when the guard drops.
            let mut wait = OpenWait {
                ctx,
                conn,
                stream,
                seq,
                start,
                open: true,
            };
            while cap == 0 {
                match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                    Some(Ok(n)) => cap = n,
                    Some(Err(e)) => return Err(e),
                    // The stream closed: see `send_error_text`.
                    None => return Err(h2::Error::from(h2::Reason::STREAM_CLOSED)),
                }
            }
            wait.open = false;
        }
        let n = cap.min(data.len());
        let chunk = data.split_to(n);
        send.send_data(chunk, end && data.is_empty())?;
        Live::add(&ctx.live.client_bytes, n as u64);
    }
    Ok(())
}

/// A message being handed to h2, counted in `Live::in_send` while it is
/// (however the send ends).
struct InSend<'a>(&'a Live);

impl<'a> InSend<'a> {
    fn new(live: &'a Live) -> Self {
        live.in_send.fetch_add(1, Relaxed);
        InSend(live)
    }
}

impl Drop for InSend<'_> {
    fn drop(&mut self) {
        self.0.in_send.fetch_sub(1, Relaxed);
    }
}

/// A wait for capacity in progress; its `window_blocked` event is written
/// when it ends, with `open: true` if it never did (the future was dropped
/// or the stream failed while waiting).
struct OpenWait<'a> {
    ctx: &'a ClientCtx,
    conn: u32,
    stream: u32,
    seq: u64,
    start: u64,
    open: bool,
}

impl Drop for OpenWait<'_> {
    fn drop(&mut self) {
        let (seq, start, open) = (self.seq, self.start, self.open);
        self.ctx.rec.emit(
            Endpoint::Client,
            self.conn,
            self.stream,
            now_ns(),
            KindId::WindowBlocked,
            || Kind::WindowBlocked(WindowBlockedEv { seq, start, open }),
        );
    }
}

/// What a failed send says: h2's error, but for the stream that closed
/// under the sender (no capacity will come: the server answered or reset
/// it), which h2 does not name and which read "protocol error: received
/// frame when stream half-closed", a frame nobody sent.
pub(super) fn send_error_text(e: &h2::Error) -> String {
    let closed = e.reason() == Some(h2::Reason::STREAM_CLOSED)
        && !(e.is_reset() || e.is_go_away() || e.is_io());
    if closed {
        "sending: the stream closed before the upload ended".into()
    } else {
        format!("sending: {e}")
    }
}
