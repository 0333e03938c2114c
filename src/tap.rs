//! The socket tap: an `AsyncRead + AsyncWrite` wrapper that parses both
//! directions and records every frame, timestamped at the read/write call.
//! It joins the layers below it: the sans-IO parser (`wire`) and the
//! recorder (`trace`).
//!
//! It also records every interval in which `poll_write` returned Pending:
//! the socket, not the flow-control window, held the writer back.
//!
//! Under TLS the tap sits above TLS (it must see plaintext frames), where a
//! Pending write means rustls's outgoing buffer was full; the socket itself
//! is watched below TLS by a [`SocketWatch`], so `socket_blocked` keeps one
//! meaning: the TCP socket (or the user-space link in front of it) refused
//! bytes. Frames are timestamped when h2 hands them to TLS.

use crate::config::CapturePayload;
use crate::trace::clock::now_ns;
use crate::trace::frame_event;
use crate::trace::schema::{
    self, ConnCloseEv, ConnOpenEv, Dir, Endpoint, IntervalEv, Kind, KindId, WireErrorEv,
};
use crate::trace::Recorder;
use crate::wire::{Body, Error, Parsed, Parser};
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Which end of the connection this tap sits on.
#[derive(Clone, Copy, Debug)]
pub struct TapConfig {
    pub endpoint: Endpoint,
    pub conn: u32,
    pub capture: CapturePayload,
}

/// A tap's connection ids: `first`, `first + step`, … `run` gives its
/// client the odd ids and its server the even ones (unique in the process,
/// as docs/trace-format.md says): from one shared counter each tap's ids
/// alternated with the other's, and the analysis, which keeps a tap's
/// retired connections as ranges of ids, kept one range per connection.
#[derive(Debug)]
pub struct ConnIds {
    next: std::sync::atomic::AtomicU32,
    step: u32,
}

impl ConnIds {
    pub fn new(first: u32, step: u32) -> ConnIds {
        ConnIds {
            next: first.into(),
            step,
        }
    }

    /// The next connection's id.
    pub fn next_id(&self) -> u32 {
        self.next
            .fetch_add(self.step, std::sync::atomic::Ordering::Relaxed)
    }
}

/// 1, 2, 3, …: one tap in the process.
impl Default for ConnIds {
    fn default() -> ConnIds {
        ConnIds::new(1, 1)
    }
}

struct Side {
    parser: Parser,
    dir: Dir,
    bytes: u64,
}

/// Why the owner closed a tapped connection, set before the tap is dropped
/// (the tap itself only sees the bytes stop); written into `conn_close`.
#[derive(Clone, Default, Debug)]
pub struct CloseReason(Arc<std::sync::Mutex<Option<(String, Source)>>>);

/// Where a close reason came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The owner's cause, or what the peer's bytes show.
    Cause,
    /// The socket failing, which may be the consequence of a cause found
    /// just after it.
    Socket,
}

impl CloseReason {
    /// Sets the reason unless one is already set (the first cause wins).
    pub fn set(&self, why: String) {
        self.set_from(why, Source::Cause, false);
    }
    /// The socket failed: the reason unless one is already set.
    fn set_socket(&self, why: String) {
        self.set_from(why, Source::Socket, false);
    }
    /// What the peer's bytes prove (it does not speak HTTP/2): it replaces a
    /// socket error set before it (a TLS server's alert, then its reset).
    fn set_over_socket(&self, why: String) {
        self.set_from(why, Source::Cause, true);
    }
    fn set_from(&self, why: String, source: Source, over_socket: bool) {
        let mut r = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*r {
            None => *r = Some((why, source)),
            Some((_, Source::Socket)) if over_socket => *r = Some((why, source)),
            Some(_) => {}
        }
    }
    /// The reason so far, if any, left in place.
    pub fn peek(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(why, _)| why.clone())
    }
}

pub struct Tap<S> {
    inner: S,
    close_reason: CloseReason,
    /// CLOCK_MONOTONIC of the last bytes through the tap, either way.
    activity: Arc<AtomicU64>,
    cfg: TapConfig,
    rec: Recorder,
    rd: Side,
    wr: Side,
    blocked: BlockWatch,
    /// Set once either direction's parser lost the framing (a `wire_error`
    /// that [`Error::loses_framing`]): a relay stops forwarding a
    /// connection it can no longer frame.
    wire_failed: Arc<AtomicBool>,
    /// Whether frames are parsed at all: for the recorder, or for
    /// [`Tap::wire_failed`]. Without either (`--no-trace`), bytes are only
    /// counted: the tool's own overhead baseline does no framing work.
    parse: bool,
}

/// Whether bytes going `dir` through `endpoint`'s tap travel client→server.
fn is_upload(endpoint: Endpoint, dir: Dir) -> bool {
    endpoint.is_client_end() == (dir == Dir::Out)
}

impl<S> Tap<S> {
    pub fn new(inner: S, cfg: TapConfig, rec: Recorder) -> Tap<S> {
        let (rd, wr) = if cfg.endpoint.is_client_end() {
            (Parser::from_server(), Parser::client_to_server())
        } else {
            (Parser::client_to_server(), Parser::from_server())
        };
        let side = |mut parser: Parser, dir| {
            let keep = match cfg.capture {
                CapturePayload::None => false,
                CapturePayload::Headers => !is_upload(cfg.endpoint, dir),
                CapturePayload::Full => true,
            };
            parser.keep_data_payloads(keep);
            Side {
                parser,
                dir,
                bytes: 0,
            }
        };
        Tap {
            inner,
            close_reason: CloseReason::default(),
            activity: Arc::new(AtomicU64::new(now_ns())),
            cfg,
            rd: side(rd, Dir::In),
            wr: side(wr, Dir::Out),
            blocked: BlockWatch::new(cfg, true),
            wire_failed: Arc::new(AtomicBool::new(false)),
            parse: rec.is_enabled(),
            rec,
        }
    }

    /// The tap sits above TLS: a [`SocketWatch`] on the socket below records
    /// `socket_blocked` instead (a Pending here is rustls's buffer).
    pub fn above_tls(mut self) -> Self {
        self.blocked.enabled = false;
        self
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Records `reason`'s text in this connection's `conn_close`.
    pub fn with_close_reason(mut self, reason: CloseReason) -> Self {
        self.close_reason = reason;
        self
    }

    /// Becomes true when the parser of either direction failed: the bytes
    /// are no longer HTTP/2 frames this tap can delimit (asking for it
    /// makes the tap parse frames even when nothing is recorded).
    pub fn wire_failed(&mut self) -> Arc<AtomicBool> {
        self.parse = true;
        self.wire_failed.clone()
    }

    /// When bytes last crossed the tap (CLOCK_MONOTONIC ns): for idle timeouts.
    pub fn activity(&self) -> Arc<AtomicU64> {
        self.activity.clone()
    }

    /// When bytes cross: the trace's clock when frames are recorded; without
    /// a recorder only the idle timer reads the stamp, and the coarse clock
    /// (no hardware counter read per socket call) is enough for it.
    fn stamp(&self) -> u64 {
        if self.parse {
            now_ns()
        } else {
            crate::trace::clock::coarse_now_ns()
        }
    }

    /// Feeds bytes that crossed the socket at `t` to one direction's parser.
    fn observe(&mut self, dir: Dir, bytes: &[u8], t: u64) {
        let (side, other) = match dir {
            Dir::In => (&mut self.rd, &mut self.wr),
            Dir::Out => (&mut self.wr, &mut self.rd),
        };
        side.bytes += bytes.len() as u64;
        self.activity.store(t, std::sync::atomic::Ordering::Relaxed);
        if !self.parse {
            return;
        }
        let (cfg, rec) = (self.cfg, &self.rec);
        let mut new_max = None;
        // The frame a rule broken was said of (it comes next).
        let mut broken_at = None;
        let failed = &self.wire_failed;
        let close = &self.close_reason;
        side.parser.feed(bytes, |r| match r {
            Ok(Parsed::Frame(mut f)) => {
                // A SETTINGS frame that breaks a rule (a value out of range,
                // its stream, a header block it interrupts) is refused by
                // its receiver: it bounds nothing.
                if let (Body::Settings { ack: false, .. }, false) =
                    (f.body, broken_at == Some(f.offset))
                {
                    for s in f.body.settings() {
                        if s.id == schema::settings::MAX_FRAME_SIZE {
                            new_max = Some(s.value);
                        }
                    }
                }
                rec.emit(
                    cfg.endpoint,
                    cfg.conn,
                    f.head.stream(),
                    t,
                    KindId::Frame,
                    || {
                        Kind::Frame(frame_event(
                            &mut f,
                            dir,
                            cfg.capture,
                            is_upload(cfg.endpoint, dir),
                        ))
                    },
                );
            }
            Ok(Parsed::Preface { .. }) => {}
            Err(e) => {
                if let Error::RuleBroken { offset, .. } = e {
                    broken_at = Some(offset);
                }
                // A malformed frame, or a first frame that is not SETTINGS,
                // is still framed: a relay forwards it and lets the peer
                // answer it.
                if e.loses_framing() {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                not_http2(close, &e);
                record_error(rec, cfg, dir, t, &e)
            }
        });
        // A SETTINGS_MAX_FRAME_SIZE sent in one direction bounds the other.
        if let Some(m) = new_max {
            other.parser.set_max_frame_size(m);
        }
    }
}

impl<S> Tap<S> {
    /// Taps a transport that carries the TCP connection `local`–`peer`
    /// (e.g. a delay line in front of the socket), recording its `conn_open`.
    pub fn with_addrs(
        io: S,
        local: impl std::fmt::Display,
        peer: impl std::fmt::Display,
        cfg: TapConfig,
        rec: Recorder,
    ) -> Self {
        rec.emit(
            cfg.endpoint,
            cfg.conn,
            0,
            now_ns(),
            KindId::ConnOpen,
            || {
                Kind::ConnOpen(ConnOpenEv {
                    local: local.to_string(),
                    peer: peer.to_string(),
                })
            },
        );
        Tap::new(io, cfg, rec)
    }
}

/// A peer that is not an HTTP/2 server is why its connection ended (h2's
/// GOAWAY answers it, and the socket never fails).
fn not_http2(close: &CloseReason, e: &Error) {
    if matches!(e, Error::NotHttp2Server { .. }) {
        // What its bytes look like (TLS, HTTP/1) is what the user acts on.
        close.set_over_socket(format!(
            "the peer is not an HTTP/2 server: its first frame is not SETTINGS{}",
            e.peer_looks_like()
        ));
    }
}

fn record_error(rec: &Recorder, cfg: TapConfig, dir: Dir, t: u64, e: &Error) {
    rec.emit(cfg.endpoint, cfg.conn, 0, t, KindId::WireError, || {
        Kind::WireError(WireErrorEv {
            dir,
            offset: e.offset(),
            error: e.to_string(),
        })
    });
}

impl<S> Tap<S> {
    /// The socket failed (a peer's TCP reset, say): `conn_close.error` says
    /// so (`read error: …`, the relay's own words), unless a cause was
    /// given first (a refusal, a shutdown).
    fn io_failed(&self, op: &str, e: &std::io::Error) {
        self.close_reason.set_socket(format!("{op} error: {e}"));
    }
}

impl<S> Drop for Tap<S> {
    fn drop(&mut self) {
        let t = now_ns();
        for side in [&self.rd, &self.wr] {
            if let Err(e) = side.parser.finish() {
                not_http2(&self.close_reason, &e);
                record_error(&self.rec, self.cfg, side.dir, t, &e);
            }
        }
        // A write still refused when the connection goes (a peer that
        // stopped reading): the interval ends here, marked open.
        self.blocked.close(&self.rec, t);
        let (bytes_in, bytes_out) = (self.rd.bytes, self.wr.bytes);
        // Left in place: the owner may still say it (a failed RPC's message).
        let error = self.close_reason.peek().unwrap_or_default();
        self.rec.emit(
            self.cfg.endpoint,
            self.cfg.conn,
            0,
            t,
            KindId::ConnClose,
            || {
                Kind::ConnClose(ConnCloseEv {
                    error,
                    bytes_in,
                    bytes_out,
                })
            },
        );
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &r {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                if !new.is_empty() {
                    let t = self.stamp();
                    self.observe(Dir::In, new, t);
                    // Said now, before the connection fails on it.
                    if let Some(e) = self.rd.parser.not_http2_so_far() {
                        not_http2(&self.close_reason, &e);
                    }
                }
            }
            Poll::Ready(Err(e)) => self.io_failed("read", e),
            Poll::Pending => {}
        }
        r
    }
}

/// The `socket_blocked` intervals of one transport: every stretch in which
/// its `poll_write` returned Pending.
struct BlockWatch {
    cfg: TapConfig,
    enabled: bool,
    since: Option<u64>,
}

impl BlockWatch {
    fn new(cfg: TapConfig, enabled: bool) -> BlockWatch {
        BlockWatch {
            cfg,
            enabled,
            since: None,
        }
    }

    /// A `socket_blocked` interval from `start` to `t` (`open`: it never
    /// resumed).
    fn record(&self, rec: &Recorder, start: u64, t: u64, open: bool) {
        let (endpoint, conn) = (self.cfg.endpoint, self.cfg.conn);
        rec.emit(endpoint, conn, 0, t, KindId::SocketBlocked, || {
            Kind::SocketBlocked(IntervalEv {
                dir: Dir::Out,
                start,
                open,
            })
        });
    }

    /// Bookkeeping after a write attempt: closes a blocked interval or opens one.
    fn after_write(&mut self, rec: &Recorder, pending: bool) {
        if !self.enabled {
            return;
        }
        // The clock is read only when an interval opens or closes: the
        // common write (ready, not blocked before) costs nothing here.
        if pending {
            if self.since.is_none() {
                self.since = Some(now_ns());
            }
        } else if let Some(start) = self.since.take() {
            self.record(rec, start, now_ns(), false);
        }
    }

    /// The transport goes: an interval still open ends at `t`, marked open.
    fn close(&mut self, rec: &Recorder, t: u64) {
        if let Some(start) = self.since.take() {
            self.record(rec, start, t, true);
        }
    }
}

impl<S> Tap<S> {
    fn after_write(&mut self, pending: bool) {
        self.blocked.after_write(&self.rec, pending);
    }
}

/// Watches the socket below TLS for refused writes (`socket_blocked`, on
/// the connection `cfg` names); records no frames (they are encrypted here).
pub struct SocketWatch<S> {
    inner: S,
    rec: Recorder,
    blocked: BlockWatch,
}

impl<S> SocketWatch<S> {
    pub fn new(inner: S, cfg: TapConfig, rec: Recorder) -> SocketWatch<S> {
        SocketWatch {
            inner,
            rec,
            blocked: BlockWatch::new(cfg, true),
        }
    }
}

impl<S> Drop for SocketWatch<S> {
    fn drop(&mut self) {
        self.blocked.close(&self.rec, now_ns());
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SocketWatch<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SocketWatch<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        let this = &mut *self;
        this.blocked.after_write(&this.rec, r.is_pending());
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        let this = &mut *self;
        this.blocked.after_write(&this.rec, r.is_pending());
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let t = self.stamp();
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.after_write(r.is_pending());
        match &r {
            Poll::Ready(Ok(n)) => self.observe(Dir::Out, &buf[..*n], t),
            Poll::Ready(Err(e)) => self.io_failed("write", e),
            Poll::Pending => {}
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let t = self.stamp();
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(r.is_pending());
        if let Poll::Ready(Err(e)) = &r {
            self.io_failed("write", e);
        }
        if let Poll::Ready(Ok(mut n)) = r {
            for b in bufs {
                if n == 0 {
                    break;
                }
                let k = n.min(b.len());
                self.observe(Dir::Out, &b[..k], t);
                n -= k;
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if let Poll::Ready(Err(e)) = &r {
            self.io_failed("flush", e);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        if let Poll::Ready(Err(e)) = &r {
            self.io_failed("shutdown", e);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceWriter;
    use h2probe_analysis::reader::TraceReader;
    use std::io::IoSlice;
    use tokio::io::AsyncWriteExt;

    /// A socket that refuses every other write (Pending, then Ready) and
    /// reports vectored-write support as configured.
    struct Flaky {
        pending_next: bool,
        vectored: bool,
        written: Vec<u8>,
    }

    impl AsyncWrite for Flaky {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            if std::mem::replace(&mut self.pending_next, false) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.pending_next = true;
            // Short writes: at most 7 bytes at a time.
            let n = buf.len().min(7);
            self.written.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            if std::mem::replace(&mut self.pending_next, false) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.pending_next = true;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(11 - n);
                self.written.extend_from_slice(&b[..take]);
                n += take;
                if n == 11 {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            self.vectored
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncRead for Flaky {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// `--no-trace`: the tap counts bytes and parses nothing, unless asked
    /// whether the wire failed (the relay asks).
    #[tokio::test]
    async fn without_a_recorder_frames_are_parsed_only_for_wire_failed() {
        // A frame header announcing 2^24-1 bytes: past the 16 KiB default.
        let garbage = [0xff_u8; 64];
        for asked in [false, true] {
            let cfg = TapConfig {
                endpoint: Endpoint::Client,
                conn: 1,
                capture: CapturePayload::None,
            };
            let sock = Flaky {
                pending_next: false,
                vectored: false,
                written: vec![],
            };
            let mut tap = Tap::new(sock, cfg, Recorder::disabled());
            let failed = if asked {
                tap.wire_failed()
            } else {
                tap.wire_failed.clone()
            };
            let mut preface = crate::wire::PREFACE.to_vec();
            preface.extend(garbage);
            tap.write_all(&preface).await.unwrap();
            assert_eq!(tap.wr.bytes, preface.len() as u64, "bytes are counted");
            assert_eq!(failed.load(std::sync::atomic::Ordering::Relaxed), asked);
        }
    }

    #[tokio::test]
    async fn pending_writes_become_socket_blocked_intervals_and_vectored_writes_are_parsed() {
        let dir = std::env::temp_dir().join(format!("h2probe-tapunit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        let mut bytes = crate::wire::encode::settings(false, &[(4, 65_535)]);
        bytes.extend(crate::wire::encode::window_update(0, 1_000));
        bytes.extend(crate::wire::encode::data(1, 1, None, &[5; 40]));
        for vectored in [false, true] {
            let cfg = TapConfig {
                endpoint: Endpoint::Server,
                conn: u32::from(vectored),
                capture: CapturePayload::None,
            };
            let sock = Flaky {
                pending_next: true,
                vectored,
                written: vec![],
            };
            let mut tap = Tap::new(sock, cfg, rec.clone());
            assert_eq!(tap.is_write_vectored(), vectored, "forwarded, not assumed");
            if vectored {
                let (a, b) = bytes.split_at(20);
                let mut slices = [IoSlice::new(a), IoSlice::new(b)];
                let mut bufs = &mut slices[..];
                while !bufs.is_empty() {
                    let n = tap.write_vectored(bufs).await.unwrap();
                    IoSlice::advance_slices(&mut bufs, n);
                }
            } else {
                tap.write_all(&bytes).await.unwrap();
            }
            assert_eq!(tap.get_ref().written, bytes);
            drop(tap);
        }
        drop(rec);
        writer.finish().unwrap();
        for conn in [0u32, 1] {
            let mut frames = vec![];
            let mut blocked = 0;
            for e in TraceReader::open(&path).unwrap() {
                let e = e.unwrap();
                if e.conn != conn {
                    continue;
                }
                match e.kind {
                    Kind::Frame(f) => frames.push((f.frame.to_string(), f.len)),
                    Kind::SocketBlocked(b) => {
                        assert!(b.start <= e.t);
                        blocked += 1;
                    }
                    _ => {}
                }
            }
            assert_eq!(
                frames,
                vec![
                    ("SETTINGS".into(), 6),
                    ("WINDOW_UPDATE".into(), 4),
                    ("DATA".into(), 40)
                ],
                "conn {conn}"
            );
            // Every write was refused once before it went through.
            assert!(
                blocked >= 3,
                "conn {conn}: {blocked} socket_blocked intervals"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Under TLS the tap sits above rustls and records no socket_blocked;
    /// the watch on the socket below records each refused write.
    #[tokio::test]
    async fn below_tls_the_socket_watch_records_refused_writes_and_the_tap_none() {
        let dir = std::env::temp_dir().join(format!("h2probe-tapwatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        let cfg = TapConfig {
            endpoint: Endpoint::Server,
            conn: 7,
            capture: CapturePayload::None,
        };
        let sock = Flaky {
            pending_next: true,
            vectored: false,
            written: vec![],
        };
        let watched = SocketWatch::new(sock, cfg, rec.clone());
        // (No TLS in between here: the watch's Pending reaches the tap, as a
        // full rustls buffer would.)
        let mut tap = Tap::new(watched, cfg, rec.clone()).above_tls();
        // A server's first frame: its SETTINGS.
        let bytes = crate::wire::encode::settings(false, &[(4, 1_000)]);
        tap.write_all(&bytes).await.unwrap();
        assert_eq!(tap.get_ref().inner.written, bytes);
        drop(tap);
        drop(rec);
        writer.finish().unwrap();
        let (mut blocked, mut frames) = (0, 0);
        for e in TraceReader::open(&path).unwrap() {
            match e.unwrap().kind {
                Kind::SocketBlocked(_) => blocked += 1,
                Kind::Frame(_) => frames += 1,
                _ => {}
            }
        }
        // 15 bytes, 7 per write, each write refused once first: 3 intervals,
        // recorded once (by the watch), not twice.
        assert_eq!((blocked, frames), (3, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
