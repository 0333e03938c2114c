//! The transparent relay: accepts h2c (prior-knowledge) connections (on
//! TCP or a Unix domain socket), opens one to the upstream for each (the
//! same), and copies bytes both ways unchanged. A tap
//! on each leg (`client_leg`, `server_leg`; the same `conn` id for one
//! pair) records every frame with the same parser and recorder as the
//! probe's own endpoints, so a real client and a real server can be
//! observed without changing either.
//!
//! Memory per pair is fixed: one 16 KiB buffer per direction (a slow reader
//! stops the relay reading from the other side, which pushes back on the
//! sender through TCP), plus the bounded link lines when shaping is on.
//! A broken or hostile peer ends its own pair, never the relay: bytes the
//! tap cannot frame, an I/O error, an upstream that refuses, or a pair with
//! no byte either way for `idle_timeout`. Each leg's `conn_close` says why.

use crate::config::CapturePayload;
use crate::link::Shape;
use crate::server::listen::{Accepted, Listener, Socket};
use crate::tap::{CloseReason, Tap, TapConfig};
use crate::trace::clock::now_ns;
use crate::trace::schema::{AcceptErrorEv, ConnRefusedEv, Endpoint, Kind, KindId};
use crate::trace::Recorder;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Bytes read per call, per direction: the relay's whole buffer.
const BUF: usize = 16 * 1024;

/// Which legs the link shaping applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkSide {
    /// Between the real client and the relay.
    Client,
    /// Between the relay and the real server.
    Server,
    /// Both legs (the round trip grows by four times the delay).
    Both,
}

/// What a relay needs, fixed for its lifetime.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// `host:port` of the server, resolved for each new pair, or
    /// `unix:PATH`.
    pub upstream: String,
    pub shape: Shape,
    pub link_side: LinkSide,
    pub capture: CapturePayload,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: u32,
}

/// Everything the accept loop shares with its pairs.
pub struct RelayCtx {
    pub cfg: RelayConfig,
    pub rec: Recorder,
    /// Pairs that have ended (for `--exit-after`).
    pub pairs_done: Arc<AtomicU64>,
    /// Flips to true when the relay stops: open pairs are closed.
    pub shutdown: watch::Receiver<bool>,
}

/// Accepts connections until shutdown, then closes the pairs still open
/// (reason `relay stopped`) and waits for their taps to finish. The
/// listener never dies: an accept error is recorded and retried after a
/// pause growing from 5 ms to 1 s.
pub async fn serve(listener: impl Into<Listener>, ctx: Arc<RelayCtx>) -> anyhow::Result<()> {
    let listener = listener.into();
    let mut shutdown = ctx.shutdown.clone();
    let mut pairs = tokio::task::JoinSet::new();
    let ids = AtomicU32::new(0);
    let mut pause = Duration::ZERO;
    let mut resume: Option<tokio::time::Instant> = None;
    let event = |kind: KindId, build: Box<dyn FnOnce() -> Kind>| {
        ctx.rec
            .emit(Endpoint::ClientLeg, 0, 0, now_ns(), kind, build)
    };
    loop {
        tokio::select! {
            r = listener.accept(), if resume.is_none() => match r {
                Ok(sock) => {
                    pause = Duration::ZERO;
                    if pairs.len() >= ctx.cfg.max_connections as usize {
                        let max = ctx.cfg.max_connections;
                        let peer = sock.peer;
                        event(KindId::ConnRefused, Box::new(move || Kind::ConnRefused(ConnRefusedEv {
                            peer,
                            reason: format!("--max-connections {max} reached"),
                        })));
                        continue;
                    }
                    let id = ids.fetch_add(1, Relaxed) + 1;
                    let ctx = ctx.clone();
                    pairs.spawn(async move {
                        relay_pair(sock, id, &ctx).await;
                        ctx.pairs_done.fetch_add(1, Relaxed);
                    });
                }
                Err(e) => {
                    let error = e.to_string();
                    event(KindId::AcceptError, Box::new(move || Kind::AcceptError(AcceptErrorEv { error })));
                    pause = (pause * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                    resume = Some(tokio::time::Instant::now() + pause);
                }
            },
            _ = async { tokio::time::sleep_until(resume.expect("guarded")).await }, if resume.is_some() => {
                resume = None;
            }
            _ = crate::live::flag_set(&mut shutdown) => break,
            Some(_) = pairs.join_next(), if !pairs.is_empty() => {}
        }
    }
    drop(listener);
    // Every pair watches the same flag and ends at once; its taps record
    // their conn_close on the way out.
    while pairs.join_next().await.is_some() {}
    Ok(())
}

/// A transport a tap can sit on: the socket, or a shaped line in front of it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Taps `sock` as `endpoint`, behind a shaped line when `shape` applies.
fn tap_leg(
    sock: Accepted,
    endpoint: Endpoint,
    conn: u32,
    shape: Option<Shape>,
    ctx: &RelayCtx,
) -> std::io::Result<Tap<Box<dyn Io>>> {
    let Accepted { io, local, peer } = sock;
    let shape = shape.filter(|s| !s.is_transparent());
    let io: Box<dyn Io> = match (io, shape) {
        (Socket::Tcp(s), Some(shape)) => Box::new(crate::link::shaped(s, shape)),
        (Socket::Tcp(s), None) => Box::new(s),
        (Socket::Unix(s), Some(shape)) => Box::new(crate::link::shaped_unix(s, shape)),
        (Socket::Unix(s), None) => Box::new(s),
    };
    let cfg = TapConfig {
        endpoint,
        conn,
        capture: ctx.cfg.capture,
    };
    Ok(Tap::with_addrs(io, local, peer, cfg, ctx.rec.clone()))
}

/// One relayed connection pair, from accept to both legs closed.
async fn relay_pair(down: Accepted, id: u32, ctx: &RelayCtx) {
    let shape_for = |side: LinkSide| {
        (ctx.cfg.link_side == side || ctx.cfg.link_side == LinkSide::Both).then_some(ctx.cfg.shape)
    };
    let client_reason = CloseReason::default();
    let mut client = match tap_leg(
        down,
        Endpoint::ClientLeg,
        id,
        shape_for(LinkSide::Client),
        ctx,
    ) {
        Ok(t) => t.with_close_reason(client_reason.clone()),
        Err(e) => {
            tracing::debug!("relay pair {id}: {e}");
            return;
        }
    };
    let up =
        tokio::time::timeout(ctx.cfg.connect_timeout, connect_upstream(&ctx.cfg.upstream)).await;
    let up = match up {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let why = format!("upstream connect failed: {} ({e})", ctx.cfg.upstream);
            say_upstream_failed(&why);
            client_reason.set(why);
            return;
        }
        Err(_) => {
            let why = format!(
                "upstream connect failed: {} did not answer within {:?}",
                ctx.cfg.upstream, ctx.cfg.connect_timeout
            );
            say_upstream_failed(&why);
            client_reason.set(why);
            return;
        }
    };
    let server_reason = CloseReason::default();
    let mut server = match tap_leg(
        up,
        Endpoint::ServerLeg,
        id,
        shape_for(LinkSide::Server),
        ctx,
    ) {
        Ok(t) => t.with_close_reason(server_reason.clone()),
        Err(e) => {
            client_reason.set(format!("upstream connect failed: {e}"));
            return;
        }
    };
    let legs = Legs {
        client_failed: client.wire_failed(),
        server_failed: server.wire_failed(),
        activity: [client.activity(), server.activity()],
    };
    pump(client, server, &legs, [client_reason, server_reason], ctx).await;
}

/// Connects to the upstream: `HOST:PORT` (resolved now), or `unix:PATH`
/// from an end named as the client's are (so a server's trace pairs
/// with this leg).
async fn connect_upstream(upstream: &str) -> std::io::Result<Accepted> {
    use crate::server::listen::ListenAddr;
    if let Ok(ListenAddr::Unix(path)) = crate::server::listen::parse_listen(upstream) {
        let (s, local, peer) = crate::unix_socket::connect(&path).await?;
        return Ok(Accepted {
            io: Socket::Unix(s),
            local,
            peer,
        });
    }
    let s = TcpStream::connect(upstream).await?;
    let _ = s.set_nodelay(true);
    Ok(Accepted {
        local: s.local_addr()?.to_string(),
        peer: s.peer_addr()?.to_string(),
        io: Socket::Tcp(s),
    })
}

/// Says on stderr that a client's connection was closed because the
/// upstream could not be reached (it was only in the trace: a relay in
/// front of a server that is down looked healthy); the first few only.
fn say_upstream_failed(why: &str) {
    static SAID: AtomicU64 = AtomicU64::new(0);
    match SAID.fetch_add(1, Relaxed) {
        0..=2 => crate::say!("warning: {why}; the client's connection was closed"),
        3 => crate::say!("warning: more upstream connects failed (each is in the trace)"),
        _ => {}
    }
}

/// What the pump watches on the taps.
struct Legs {
    client_failed: Arc<AtomicBool>,
    server_failed: Arc<AtomicBool>,
    activity: [Arc<AtomicU64>; 2],
}

/// How one direction ended.
enum End {
    /// The reader closed its side: the writer's side was shut down too.
    Eof,
    /// The pair must close, for this reason.
    Close(String),
}

/// Copies both directions until both have ended, one failed, the pair was
/// idle too long, or the relay stops; records why on both legs (nothing for
/// a clean close by the peers) before the taps are dropped.
async fn pump(
    client: Tap<Box<dyn Io>>,
    server: Tap<Box<dyn Io>>,
    legs: &Legs,
    reasons: [CloseReason; 2],
    ctx: &RelayCtx,
) {
    let (cr, cw) = tokio::io::split(client);
    let (sr, sw) = tokio::io::split(server);
    let c2s = copy(cr, sw, &legs.client_failed, "client");
    let s2c = copy(sr, cw, &legs.server_failed, "server");
    tokio::pin!(c2s, s2c);
    let (mut c2s_done, mut s2c_done) = (false, false);
    let mut shutdown = ctx.shutdown.clone();
    let idle_ns = ctx.cfg.idle_timeout.as_nanos() as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(250).min(ctx.cfg.idle_timeout));
    let why = loop {
        if c2s_done && s2c_done {
            break None;
        }
        tokio::select! {
            r = &mut c2s, if !c2s_done => match r {
                End::Eof => c2s_done = true,
                End::Close(why) => break Some(why),
            },
            r = &mut s2c, if !s2c_done => match r {
                End::Eof => s2c_done = true,
                End::Close(why) => break Some(why),
            },
            _ = tick.tick() => {
                let last = legs.activity.iter().map(|a| a.load(Relaxed)).max().unwrap_or(0);
                if now_ns().saturating_sub(last) > idle_ns {
                    break Some(format!(
                        "idle: no byte either way for {:?} (--idle-timeout)",
                        ctx.cfg.idle_timeout
                    ));
                }
            }
            _ = crate::live::flag_set(&mut shutdown) => {
                break Some("relay stopped: the relay was shut down with the pair open".into());
            }
        }
    };
    if let Some(why) = why {
        for r in &reasons {
            r.set(why.clone());
        }
    }
}

/// One direction: read what the peer sent (the reading tap records it),
/// write it unchanged to the other leg (whose tap records it again).
/// Bytes the reading tap could not frame are not forwarded: after a framing
/// error neither the relay nor the receiver can find the next frame. (A
/// malformed frame, or a first frame that is not SETTINGS, is still a frame:
/// forwarded, for the receiver to answer.)
async fn copy<R, W>(mut from: R, mut to: W, from_failed: &AtomicBool, who: &str) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; BUF];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return End::Eof;
            }
            Ok(n) => n,
            Err(e) => return End::Close(format!("read error: {who} leg: {e}")),
        };
        if from_failed.load(Relaxed) {
            return End::Close(format!(
                "malformed HTTP/2: the {who} sent bytes that are not frames (see its wire_error); not forwarded"
            ));
        }
        if let Err(e) = to.write_all(&buf[..n]).await {
            let other = if who == "client" { "server" } else { "client" };
            return End::Close(format!("write error: {other} leg: {e}"));
        }
    }
}
