//! `h2probe relay` between real peers: the frames of both legs agree frame
//! for frame (and with the server's own record of them), the withheld
//! credit read from the wire agrees with what the server's own trace says
//! it had not released, a broken peer closes its pair only, and the command
//! finishes its run directory on Ctrl-C. External peers (h2load + nghttpd,
//! Python grpcio) skip loudly locally and fail under CI=true.

mod support;

use h2probe::relay::{LinkSide, RelayConfig, RelayCtx};
use h2probe::server::ServerOpts;
use h2probe::trace::schema::{Dir, Endpoint, Kind};
use h2probe_analysis::analyze::Summary;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::{require_tool, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A relay running in this process with its own trace.
struct TestRelay {
    addr: std::net::SocketAddr,
    dir: PathBuf,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    writer: h2probe::trace::TraceWriter,
    rec: h2probe::trace::Recorder,
}

fn relay_config(upstream: &str) -> RelayConfig {
    RelayConfig {
        upstream: upstream.to_string(),
        shape: Default::default(),
        link_side: LinkSide::Client,
        capture: h2probe::config::CapturePayload::Headers,
        connect_timeout: std::time::Duration::from_secs(5),
        idle_timeout: std::time::Duration::from_secs(60),
        max_connections: 16,
    }
}

impl TestRelay {
    async fn start(name: &str, cfg: RelayConfig) -> TestRelay {
        let dir = support::temp_dir(name);
        let (writer, rec) =
            h2probe::trace::TraceWriter::create(&dir.join("trace.jsonl"), 1 << 18).unwrap();
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let ctx = Arc::new(RelayCtx {
            cfg,
            rec: rec.clone(),
            pairs_done: Default::default(),
            shutdown: rx,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(h2probe::relay::serve(listener, ctx));
        TestRelay {
            addr,
            dir,
            shutdown,
            task,
            writer,
            rec,
        }
    }

    /// Stops the relay (open pairs are closed), finishes the trace and
    /// analyses it.
    async fn stop(self) -> (Summary, PathBuf) {
        let _ = self.shutdown.send(true);
        self.task.await.unwrap().unwrap();
        drop(self.rec);
        let writer = self.writer;
        tokio::task::spawn_blocking(move || writer.finish())
            .await
            .unwrap()
            .unwrap();
        let dir = self.dir.clone();
        let a = tokio::task::spawn_blocking(move || {
            h2probe_analysis::analyze::analyze_trace(&dir.join("trace.jsonl")).unwrap()
        })
        .await
        .unwrap();
        for w in &a.warnings {
            eprintln!("relay trace: {w}");
        }
        (a.summary, self.dir)
    }
}

/// (type, flags, stream, len) of every frame one tap saw going `dir`.
type FrameList = Vec<(String, u8, u32, u32)>;

fn frames(dir: &Path, ep: Endpoint, d: Dir) -> FrameList {
    support::tap_frames(dir, ep)
        .into_iter()
        .filter(|f| f.0 == d)
        .map(|f| (f.1, f.2, f.3, f.4))
        .collect()
}

/// The relay's two legs carried the same frames, frame for frame, both ways.
fn assert_legs_equal(relay: &Path) -> (FrameList, FrameList) {
    let c2s = frames(relay, Endpoint::ClientLeg, Dir::In);
    assert_eq!(c2s, frames(relay, Endpoint::ServerLeg, Dir::Out), "c2s");
    let s2c = frames(relay, Endpoint::ServerLeg, Dir::In);
    assert_eq!(s2c, frames(relay, Endpoint::ClientLeg, Dir::Out), "s2c");
    assert!(!c2s.is_empty() && !s2c.is_empty());
    (c2s, s2c)
}

/// Sorted events of a trace.
fn events(dir: &Path) -> Vec<h2probe::trace::schema::Event> {
    let mut v: Vec<_> = h2probe_analysis::reader::TraceReader::open(&dir.join("trace.jsonl"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    v.sort_by_key(|e| e.t);
    v
}

/// One side's view of the c2s DATA and the stream WINDOW_UPDATEs of the
/// relayed connection: DATA (offset, stream, len, t) and updates (offset,
/// stream, increment, t), offsets being those of each frame in its
/// direction's byte stream (the same on the relay's server leg and on the
/// server's own tap: the bytes are the same).
struct Credit {
    data: Vec<(u64, u32, u32, u64)>,
    updates: Vec<(u64, u32, u32, u64)>,
    /// Server only: (stream, bytes, t) of each release.
    releases: Vec<(u32, u32, u64)>,
}

fn credit_view(dir: &Path, ep: Endpoint, data_dir: Dir) -> Credit {
    let mut c = Credit {
        data: vec![],
        updates: vec![],
        releases: vec![],
    };
    for e in events(dir) {
        if e.ep != ep || e.stream == 0 {
            continue;
        }
        match &e.kind {
            Kind::Frame(f) if f.frame.to_string() == "DATA" && f.dir == data_dir => {
                c.data.push((f.offset, e.stream, f.len, e.t))
            }
            Kind::Frame(f) if f.frame.to_string() == "WINDOW_UPDATE" && f.dir != data_dir => c
                .updates
                .push((f.offset, e.stream, f.increment.unwrap(), e.t)),
            Kind::Release(r) => c.releases.push((e.stream, r.bytes, e.t)),
            _ => {}
        }
    }
    c
}

/// At each stream-level WINDOW_UPDATE of the server: the withheld credit
/// the relay's server leg shows when the update reaches it (DATA written to
/// the server on the stream minus credit returned), and the server's own
/// unreleased bytes when it wrote the update (DATA its tap read minus the
/// bytes its application released, from its trace). They differ only by
/// DATA in flight: written by the relay before the update arrived, read by
/// the server after it sent it; that is found by byte offset in both
/// traces. Returns (relay's withheld, in flight, server's unreleased,
/// raced) per update, in order.
///
/// Raced: bytes whose release was stamped before the update's write but
/// came too late for it. h2's connection task encodes an update's increment
/// (all the stream's released, unannounced credit), then writes it; a worker
/// on the other thread can release between the two (its release is stamped
/// before `release_capacity` takes h2's lock). That credit goes out in the
/// next update, so the server's unreleased bytes at the write are short of
/// the withheld credit by exactly those releases, the latest before the
/// write, whole. Anything else is left unexplained (0) and fails the
/// equality.
type Withheld = (i64, i64, i64, i64);

fn withheld_vs_unreleased(relay: &Path, server: &Path) -> Vec<Withheld> {
    let r = credit_view(relay, Endpoint::ServerLeg, Dir::Out);
    let s = credit_view(server, Endpoint::Server, Dir::In);
    let server_read: HashMap<u64, u64> = s.data.iter().map(|d| (d.0, d.3)).collect();
    let server_wrote: HashMap<u64, u64> = s.updates.iter().map(|u| (u.0, u.3)).collect();
    assert_eq!(r.updates.len(), s.updates.len(), "the same updates");
    let mut out = vec![];
    for (i, (off, stream, _, t_relay)) in r.updates.iter().enumerate() {
        let t_server = server_wrote[off];
        let sum = |it: &mut dyn Iterator<Item = i64>| it.sum::<i64>();
        // Credit returned up to this update, in wire order: two updates
        // read in one call share a timestamp.
        let returned = sum(&mut r.updates[..=i]
            .iter()
            .filter(|u| u.1 == *stream)
            .map(|u| i64::from(u.2)));
        let relay_data = r.data.iter().filter(|d| d.1 == *stream && d.3 < *t_relay);
        let (mut written, mut in_flight) = (0, 0);
        for d in relay_data {
            written += i64::from(d.2);
            if server_read[&d.0] > t_server {
                in_flight += i64::from(d.2);
            }
        }
        let read = sum(&mut s
            .data
            .iter()
            .filter(|d| d.1 == *stream && d.3 < t_server)
            .map(|d| i64::from(d.2)));
        let before: Vec<i64> = s
            .releases
            .iter()
            .filter(|x| x.0 == *stream && x.2 < t_server)
            .map(|x| i64::from(x.1))
            .collect();
        let released: i64 = before.iter().sum();
        let mut raced = 0;
        if released > returned {
            let mut latest = before.iter().rev().scan(0, |acc, b| {
                *acc += b;
                Some(*acc)
            });
            if latest.any(|suffix| suffix == released - returned) {
                raced = released - returned;
            }
        }
        out.push((written - returned, in_flight, read - released, raced));
    }
    out
}

/// The relay's withheld credit equals the server's unreleased bytes at
/// every stream WINDOW_UPDATE, once DATA in flight is counted; most updates
/// have none in flight; and the summary's distribution is the relay's view.
fn assert_withheld_is_servers_unreleased(relay: &Path, server: &Path, s: &Summary) {
    let v = withheld_vs_unreleased(relay, server);
    assert!(v.len() >= 4, "{v:?}");
    for (i, (withheld, in_flight, unreleased, raced)) in v.iter().enumerate() {
        assert_eq!(
            withheld - in_flight,
            unreleased + raced,
            "update {i}: relay withheld {withheld}, in flight {in_flight}, server unreleased {unreleased}, released as the update was written {raced}"
        );
    }
    let flying = v.iter().filter(|x| x.1 > 0).count();
    let raced = v.iter().filter(|x| x.3 > 0).count();
    eprintln!(
        "{} stream updates: withheld = server's unreleased at {}, with DATA in flight at {flying}, with a release racing the write at {raced}",
        v.len(),
        v.len() - flying - raced
    );
    // The race's window is the span between h2's encoding an update and
    // its write: one such update in a run of CI runs so far; often, and the
    // explanation would be wrong.
    assert!(
        raced * 20 <= v.len(),
        "a release raced the write at {raced} of {} updates",
        v.len()
    );
    // Usually nothing is in flight (1–2 updates in 200 on a quiet
    // machine, more under load): then the relay's figure is the server's
    // unreleased bytes as it stands.
    assert!(
        flying * 2 <= v.len(),
        "in flight at {flying} of {} updates",
        v.len()
    );
    let d = &s.relay.as_ref().unwrap().c2s.withheld_after_update;
    assert_eq!(d.count, v.len() as u64);
    let max = v.iter().map(|x| x.0).max().unwrap() as f64;
    assert!((d.max - max).abs() <= max * 1e-3, "{d:?} vs {max}");
}

/// The probe's own client and server on either side of the relay: the
/// legs agree with each other and with the server's tap; the withheld
/// credit is the server's unreleased bytes; the waits the relay infers are
/// the ones the client measured itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_client_through_the_relay_to_a_probe_server_releasing_on_complete() {
    let opts = ServerOpts {
        release: "complete".parse().unwrap(),
        service_time: "5ms".parse().unwrap(),
        ..Default::default()
    };
    let server = TestServer::start("relay-srv", opts).await;
    let relay = TestRelay::start("relay-relay", relay_config(&server.addr.to_string())).await;
    let cdir = support::temp_dir("relay-cli");
    let (writer, rec) =
        h2probe::trace::TraceWriter::create(&cdir.join("trace.jsonl"), 1 << 16).unwrap();
    let copts = h2probe::client::ClientOpts {
        rate: 300.0,
        duration: "700ms".parse().unwrap(),
        ..Default::default()
    };
    let outcomes = h2probe::client::run(support::client_ctx(copts, relay.addr, rec.clone()))
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, 0, "{:?}", outcomes[0]);
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    let (rs, rdir) = relay.stop().await;
    let (_, sdir) = server.stop().await;

    let (c2s, s2c) = assert_legs_equal(&rdir);
    // The server leg is what the server's own tap saw.
    assert_eq!(frames(&sdir, Endpoint::Server, Dir::In), c2s);
    assert_eq!(frames(&sdir, Endpoint::Server, Dir::Out), s2c);
    let r = rs.relay.as_ref().unwrap();
    assert_eq!(r.connections, 1);
    assert_eq!(r.frames_forwarded as usize, c2s.len() + s2c.len());
    assert_eq!(rs.checks["relay_forwarded_unchanged"].ok, Some(true));
    assert_eq!(rs.checks["relay_no_data_beyond_credit"].ok, Some(true));
    assert_eq!(r.c2s.relay_latency_ms.count as usize, c2s.len());
    assert_eq!(r.c2s.credit_release, "after_receipt", "{:?}", r.c2s);

    assert_withheld_is_servers_unreleased(&rdir, &sdir, &rs);

    // Inferred waits vs the client's own record of its credit waits.
    let cs = h2probe_analysis::analyze::analyze_trace(&cdir.join("trace.jsonl"))
        .unwrap()
        .summary;
    let measured = cs.window_blocked_ms.count;
    let inferred = r.c2s.inferred_blocked_intervals;
    assert!(
        measured >= 10,
        "the client should wait on credit: {measured}"
    );
    assert!(
        inferred.abs_diff(measured) <= 1,
        "inferred {inferred} waits, the client measured {measured}"
    );
    let (a, b) = (r.c2s.inferred_blocked_s, cs.client_window_blocked_s);
    assert!((a - b).abs() <= 0.1 * b, "inferred {a}s, measured {b}s");
}

/// A minimal tonic service (tonic 0.14 on hyper): reads the client-streaming
/// body message by message, as a default tonic service does, and answers.
#[derive(Clone, Default)]
struct TonicIngest;

impl tonic::server::NamedService for TonicIngest {
    const NAME: &'static str = "h2probe.v1.Probe";
}

struct IngestCall;

impl tonic::server::ClientStreamingService<h2probe::grpc::pb::Item> for IngestCall {
    type Response = h2probe::grpc::pb::IngestReply;
    type Future = tonic::codegen::BoxFuture<tonic::Response<Self::Response>, tonic::Status>;
    fn call(
        &mut self,
        req: tonic::Request<tonic::Streaming<h2probe::grpc::pb::Item>>,
    ) -> Self::Future {
        Box::pin(async move {
            let mut stream = req.into_inner();
            let mut n = 0u64;
            while stream.message().await?.is_some() {
                n += 1;
            }
            Ok(tonic::Response::new(h2probe::grpc::pb::IngestReply {
                received: n,
                completed: n,
                ..Default::default()
            }))
        })
    }
}

impl<B> tonic::codegen::Service<tonic::codegen::http::Request<B>> for TonicIngest
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: tonic::codegen::http::Request<B>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.client_streaming(IngestCall, req).await)
        })
    }
}

/// A tonic server seen through the relay releases credit on receipt: once
/// it has returned credit it holds less than one frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_server_seen_through_the_relay_releases_on_receipt() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TonicIngest)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let relay = TestRelay::start("relay-tonic", relay_config(&upstream.to_string())).await;
    let (writer, rec) = h2probe::trace::TraceWriter::create(
        &support::temp_dir("relay-tonic-cli").join("trace.jsonl"),
        1 << 16,
    )
    .unwrap();
    let copts = h2probe::client::ClientOpts {
        rate: 300.0,
        duration: "700ms".parse().unwrap(),
        ..Default::default()
    };
    let outcomes = h2probe::client::run(support::client_ctx(copts, relay.addr, rec.clone()))
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, 0, "{:?}", outcomes[0]);
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    let (s, rdir) = relay.stop().await;
    server.abort();
    assert_legs_equal(&rdir);
    let c = &s.relay.as_ref().unwrap().c2s;
    eprintln!("tonic through the relay: {c:?}");
    assert!(c.window_updates_stream >= 5, "{c:?}");
    // The median update leaves less than half a frame withheld (the
    // verdict's rule). A single one can count frames still in flight to
    // the server (written by the relay after tonic sent its update): the
    // probe-server test above proves that accounting exactly with the
    // server's own trace.
    assert_eq!(c.credit_release, "on_receipt", "{c:?}");
    assert!(
        c.withheld_after_update.p50 < c.max_data_frame as f64,
        "{:?}",
        c.withheld_after_update
    );
    assert_eq!(s.checks["relay_forwarded_unchanged"].ok, Some(true));
}

/// Garbage from a client, a silent client and an upstream that is not
/// there each close their own pair with a reason; the relay goes on
/// relaying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_peer_closes_its_pair_with_a_reason_and_the_relay_goes_on() {
    let server = TestServer::start("relay-hostile-srv", ServerOpts::default()).await;
    let mut cfg = relay_config(&server.addr.to_string());
    cfg.idle_timeout = std::time::Duration::from_millis(300);
    let relay = TestRelay::start("relay-hostile", cfg).await;

    // Not HTTP/2: an HTTP/1.1 request.
    let mut s = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The server's own SETTINGS may come back first (the upstream speaks as
    // soon as it is connected); then the relay closes the pair.
    let mut back = vec![];
    tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut back))
        .await
        .expect("the relay closes the pair")
        .unwrap_or(0);
    assert!(!back.starts_with(b"HTTP/1.1"), "{back:?}");
    let mut buf = [0u8; 64];
    // Silent: opens and sends nothing, until the relay closes it as idle
    // (its end, not a sleep: the idle check's tick may come late on a
    // loaded machine, and a close of ours first would be an EOF, not idle).
    let mut silent = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    let mut ignored = vec![];
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        silent.read_to_end(&mut ignored),
    )
    .await
    .expect("the relay closes an idle pair")
    .unwrap_or(0);
    drop(silent);
    // Then a well-behaved client is relayed as usual.
    let (writer, rec) = h2probe::trace::TraceWriter::create(
        &support::temp_dir("relay-hostile-cli").join("trace.jsonl"),
        1 << 16,
    )
    .unwrap();
    let copts = h2probe::client::ClientOpts {
        rate: 100.0,
        duration: "200ms".parse().unwrap(),
        ..Default::default()
    };
    let outcomes = h2probe::client::run(support::client_ctx(copts, relay.addr, rec.clone()))
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, 0, "{:?}", outcomes[0]);
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    let (s, _) = relay.stop().await;
    server.stop().await;
    let r = s.relay.as_ref().unwrap();
    assert_eq!(r.connections, 3);
    assert_eq!(
        r.close_reasons.get("client_leg: malformed HTTP/2"),
        Some(&1),
        "{r:?}"
    );
    assert_eq!(r.close_reasons.get("client_leg: idle"), Some(&1), "{r:?}");
    assert!(r.wire_errors >= 1);
    assert_eq!(s.checks["relay_forwarded_unchanged"].ok, Some(true));

    // An upstream that answers with something that is not HTTP/2: the
    // server leg's tap cannot frame it, the pair is closed, and the reason
    // says what the upstream is.
    let bogus = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bogus_addr = bogus.local_addr().unwrap();
    let bogus_task = tokio::spawn(async move {
        let (mut s, _) = bogus.accept().await.unwrap();
        let _ = s
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        let mut sink = vec![];
        let _ = s.read_to_end(&mut sink).await;
    });
    let relay = TestRelay::start("relay-bogus", relay_config(&bogus_addr.to_string())).await;
    let mut c = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    let mut back = vec![];
    tokio::time::timeout(std::time::Duration::from_secs(5), c.read_to_end(&mut back))
        .await
        .expect("the relay closes the pair")
        .unwrap_or(0);
    assert!(back.is_empty(), "nothing unframed forwarded: {back:?}");
    let (s, _) = relay.stop().await;
    bogus_task.abort();
    let r = s.relay.as_ref().unwrap();
    assert_eq!(
        r.close_reasons
            .get("server_leg: the peer is not an HTTP/2 server"),
        Some(&1),
        "{r:?}"
    );

    // An upstream that is not there: the client's connection is closed
    // with that reason.
    // Bound and not listening, and held for the test: a connect is refused,
    // and no other socket can take the port meanwhile.
    let nobody = tokio::net::TcpSocket::new_v4().unwrap();
    nobody.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = nobody.local_addr().unwrap().port();
    let relay = TestRelay::start("relay-noup", relay_config(&format!("127.0.0.1:{port}"))).await;
    let mut s = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let (s, _) = relay.stop().await;
    let r = s.relay.as_ref().unwrap();
    assert_eq!(
        r.close_reasons.get("client_leg: upstream connect failed"),
        Some(&1),
        "{r:?}"
    );
    // Folded in at the client leg's close: no event of it came after.
    assert_eq!(s.events_after_conn_retirement, 0);
    drop(nobody);
}

/// A peer that breaks a rule but still sends frames (a server whose first
/// frame is not SETTINGS, a client whose first after its preface is not, a
/// malformed WINDOW_UPDATE) is relayed unchanged, each rule said once as a
/// `wire_error`: the relay closed such a pair as "bytes that are not
/// frames", and the client got nothing of the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_that_break_a_rule_are_still_relayed_and_said() {
    use h2probe::wire::encode;
    let mut from_server = encode::window_update(0, 1_000);
    from_server.extend(encode::settings(false, &[]));
    // An answer with an error code: the relay's summary says who sent it.
    from_server.extend(encode::rst_stream(1, 0x1));
    let mut from_client = encode::preface();
    from_client.extend(encode::ping(false, [1; 8]));
    // A WINDOW_UPDATE of 5 bytes (RFC 9113 §6.9: 4), then a good one.
    from_client.extend([0, 0, 5, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    from_client.extend(encode::settings(false, &[]));
    // DATA on stream 0 (RFC 9113 §6.1): framed, relayed, the rule named.
    from_client.extend(encode::data(0, 0, None, b"x"));
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = upstream.local_addr().unwrap();
    let (want_at_server, to_send) = (from_client.clone(), from_server.clone());
    let upstream_task = tokio::spawn(async move {
        let (mut s, _) = upstream.accept().await.unwrap();
        s.write_all(&to_send).await.unwrap();
        let mut got = vec![0; want_at_server.len()];
        s.read_exact(&mut got).await.unwrap();
        got
    });
    let relay = TestRelay::start("relay-rules", relay_config(&up_addr.to_string())).await;
    let mut c = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    c.write_all(&from_client).await.unwrap();
    let mut back = vec![0; from_server.len()];
    tokio::time::timeout(std::time::Duration::from_secs(5), c.read_exact(&mut back))
        .await
        .expect("the server's frames are relayed")
        .unwrap();
    assert_eq!(back, from_server);
    let at_server = tokio::time::timeout(std::time::Duration::from_secs(5), upstream_task)
        .await
        .expect("the client's frames are relayed")
        .unwrap();
    assert_eq!(at_server, from_client);
    drop(c);
    let (s, dir) = relay.stop().await;
    let mut said: Vec<(Endpoint, String)> = events(&dir)
        .into_iter()
        .filter_map(|e| match e.kind {
            Kind::WireError(w) => Some((e.ep, w.error)),
            _ => None,
        })
        .collect();
    said.sort();
    // Each rule once on each leg's tap, in the same words.
    let want = [
        "byte 0: the server's first frame is WINDOW_UPDATE, not SETTINGS (RFC 9113 §3.4)",
        "byte 24: the client's first frame is PING, not SETTINGS (RFC 9113 §3.4)",
        "byte 41: malformed WINDOW_UPDATE frame: length is not 4",
        "byte 64: rule broken: DATA frame on stream 0 (RFC 9113 §6.1: a connection error of type PROTOCOL_ERROR)",
    ];
    let expected: Vec<(Endpoint, String)> = [Endpoint::ClientLeg, Endpoint::ServerLeg]
        .into_iter()
        .flat_map(|ep| want.iter().map(move |w| (ep, w.to_string())))
        .collect();
    assert_eq!(said, expected);
    let r = s.relay.as_ref().unwrap();
    assert!(
        !r.close_reasons
            .keys()
            .any(|k| k.contains("malformed HTTP/2")),
        "{r:?}"
    );
    // The rule broken is not among the legs' errors (the pair stays open),
    // but counted once (as the client leg read it) and named.
    assert_eq!(r.wire_errors, 6, "{r:?}");
    assert_eq!(
        r.rules_broken.iter().collect::<Vec<_>>(),
        [(&"client: DATA frame on stream 0".to_string(), &1)]
    );
    assert_eq!(
        r.answers.iter().collect::<Vec<_>>(),
        [(&"server: RST_STREAM PROTOCOL_ERROR".to_string(), &1)]
    );
    let head = h2probe_analysis::report::headline(&s);
    assert!(
        head.contains(
            "\nerrors    server sent RST_STREAM PROTOCOL_ERROR×1\n          \
             client broke: DATA frame on stream 0×1\n"
        ),
        "{head}"
    );
}

/// A SETTINGS frame its receiver must refuse changes no frame size: after a
/// client's legal raise to 1 MiB, its SETTINGS on stream 1 (lowering to
/// 16,384) left the server's legal 40,000-byte DATA read as oversized: the
/// relay blamed the server and closed the pair unforwarded (helper-67).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_settings_frame_bounds_no_frame_size() {
    use h2probe::wire::encode;
    let mut from_client = encode::preface();
    from_client.extend(encode::settings(false, &[(5, 1 << 20)]));
    from_client.extend(encode::raw(4, 0, 1, &[0, 5, 0, 0, 0x40, 0]));
    let mut from_server = encode::settings(false, &[]);
    from_server.extend(encode::settings(true, &[]));
    from_server.extend(encode::data(1, 0, None, &vec![7; 40_000]));
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = upstream.local_addr().unwrap();
    let (want_at_server, to_send) = (from_client.clone(), from_server.clone());
    let upstream_task = tokio::spawn(async move {
        let (mut s, _) = upstream.accept().await.unwrap();
        let mut got = vec![0; want_at_server.len()];
        s.read_exact(&mut got).await.unwrap();
        s.write_all(&to_send).await.unwrap();
        let mut rest = vec![];
        let _ = s.read_to_end(&mut rest).await;
        got
    });
    let relay =
        TestRelay::start("relay-refused-settings", relay_config(&up_addr.to_string())).await;
    let mut c = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    c.write_all(&from_client).await.unwrap();
    let mut back = vec![0; from_server.len()];
    tokio::time::timeout(std::time::Duration::from_secs(5), c.read_exact(&mut back))
        .await
        .expect("the server's frames are relayed, its DATA too")
        .unwrap();
    assert_eq!(back, from_server);
    drop(c);
    let at_server = tokio::time::timeout(std::time::Duration::from_secs(5), upstream_task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(at_server, from_client);
    let (s, dir) = relay.stop().await;
    let said: Vec<String> = events(&dir)
        .into_iter()
        .filter_map(|e| match e.kind {
            Kind::WireError(w) => Some(w.error),
            _ => None,
        })
        .collect();
    assert!(
        said.iter()
            .all(|w| w.contains("rule broken: SETTINGS frame on a stream other than 0")),
        "{said:?}"
    );
    let r = s.relay.as_ref().unwrap();
    assert_eq!(r.wire_errors, 0, "{r:?}");
    assert!(
        !r.close_reasons.keys().any(|k| k.contains("malformed")),
        "{r:?}"
    );
}

/// The command: writes a run directory (trace, meta, summary, one pcap per
/// leg) and finishes it on Ctrl-C with exit 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_command_finishes_its_run_directory_on_ctrl_c() {
    let server = TestServer::start("relay-cmd-srv", ServerOpts::default()).await;
    let out = support::temp_dir("relay-cmd").join("run");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["relay", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(server.addr.to_string())
        .arg("--out")
        .arg(&out)
        .arg("-q")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut line)
        .await
        .unwrap();
    // "h2probe: relaying ADDR -> UPSTREAM", then the run directory.
    assert!(line.trim_end().chars().count() <= 80, "{line:?}");
    let addr: std::net::SocketAddr = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let (writer, rec) = h2probe::trace::TraceWriter::create(
        &support::temp_dir("relay-cmd-cli").join("trace.jsonl"),
        1 << 16,
    )
    .unwrap();
    let copts = h2probe::client::ClientOpts {
        rate: 100.0,
        duration: "200ms".parse().unwrap(),
        ..Default::default()
    };
    let outcomes = h2probe::client::run(support::client_ctx(copts, addr, rec.clone()))
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, 0);
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) };
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .expect("the relay ends on SIGINT")
        .unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("relay     1 connection pair ("), "{rest}");
    server.stop().await;
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["status"], "interrupted");
    assert_eq!(meta["command"], "relay");
    assert_eq!(meta["config"]["relay"]["upstream"], server_addr_of(&meta));
    for f in [
        "trace.jsonl",
        "summary.json",
        "client_leg.pcap",
        "server_leg.pcap",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let s = support::read_summary(&out);
    assert_eq!(s.trace_ending, "clean");
    assert_eq!(s.relay.as_ref().unwrap().connections, 1);
    assert_eq!(s.checks["relay_forwarded_unchanged"].ok, Some(true));
    assert!(out.join("withheld.svg").is_file());
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    for shown in [
        "held after each update",
        "relay_forwarded_unchanged",
        "withheld.svg",
    ] {
        assert!(page.contains(shown), "report.html lacks {shown}");
    }
    // windows.csv and the plotted stream's timeline rows name their
    // connection (they were empty for a relay: the join docs/outputs.md
    // describes was impossible).
    let windows = std::fs::read_to_string(out.join("windows.csv")).unwrap();
    let rows: Vec<Vec<&str>> = windows
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r[3].contains('-')), "{windows}");
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let stream_rows: Vec<Vec<&str>> = timeline
        .lines()
        .filter(|l| l.starts_with("relay_withheld_stream_c2s,"))
        .map(|l| l.split(',').collect())
        .collect();
    assert!(!stream_rows.is_empty());
    assert!(
        stream_rows
            .iter()
            .all(|r| r[4].contains('-') && r[5] == "1"),
        "{:?}",
        stream_rows[0]
    );
    // Every export knows the legs.
    support::h2probe_ok([
        "export".as_ref(),
        out.as_os_str(),
        "--format".as_ref(),
        "pcap,csv,qlog".as_ref(),
    ]);
    for f in ["client_leg.sqlog", "server_leg.sqlog", "client_leg.pcap"] {
        assert!(out.join(f).is_file(), "{f} missing after export");
    }
}

fn server_addr_of(meta: &serde_json::Value) -> serde_json::Value {
    meta["config"]["connect"].clone()
}

/// A bad --upstream is refused before anything starts (exit 2).
#[test]
fn a_bad_upstream_is_refused_with_exit_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["relay", "--upstream", "nohostport", "--out"])
        .arg(support::temp_dir("relay-bad").join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--upstream must be HOST:PORT"), "{err}");
}

/// h2load uploads through the relay to nghttpd, which echoes: both legs
/// carry the same frames, and nghttpd's own frame log (`-v`) lists exactly
/// the frames the relay's server leg wrote to it and read from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2load_through_the_relay_to_nghttpd_agrees_with_nghttpds_own_log() {
    let (Some(nghttpd), Some(h2load)) = (require_tool("nghttpd"), require_tool("h2load")) else {
        return;
    };
    let port = support::peer_port();
    let work = support::temp_dir("relay-nghttpd");
    let docroot = work.join("root");
    std::fs::create_dir_all(&docroot).unwrap();
    let body = work.join("body.bin");
    std::fs::write(
        &body,
        (0..200_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let log = std::fs::File::create(work.join("nghttpd.log")).unwrap();
    let mut child = tokio::process::Command::new(&nghttpd)
        .args(["--no-tls", "--echo-upload", "-v", "-a", "127.0.0.1", "-d"])
        .arg(&docroot)
        .arg(port.to_string())
        .stdout(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let upstream: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(upstream).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "nghttpd did not start");
    // The probe connection above is a pair of nghttpd's own, not the relay's.
    let relay = TestRelay::start("relay-h2load", relay_config(&upstream.to_string())).await;
    let out = tokio::process::Command::new(&h2load)
        .args(["-n", "8", "-c", "1", "-m", "2", "-d"])
        .arg(&body)
        .arg(format!("http://{}/upload", relay.addr))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("8 succeeded"), "{text}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (s, rdir) = relay.stop().await;
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let _ = child.wait().await;

    let (c2s, s2c) = assert_legs_equal(&rdir);
    assert_eq!(s.checks["relay_forwarded_unchanged"].ok, Some(true));
    assert_eq!(s.checks["relay_no_data_beyond_credit"].ok, Some(true));
    let r = s.relay.as_ref().unwrap();
    assert_eq!(r.c2s.data_bytes, 8 * 200_000);
    assert_eq!(r.s2c.data_bytes, 8 * 200_000);

    // nghttpd's log: "[id=N] [ t] recv DATA frame <length=16384, flags=0x00, stream_id=1>".
    // The relay's connection is the last one nghttpd saw (the readiness
    // probes came first).
    let log = std::fs::read_to_string(work.join("nghttpd.log")).unwrap();
    let mut by_conn: HashMap<String, (FrameList, FrameList)> = HashMap::new();
    let mut last_id = String::new();
    for l in log.lines() {
        let Some(rest) = l.strip_prefix("[id=") else {
            continue;
        };
        let id = rest.split(']').next().unwrap().to_string();
        let Some(pos) = l.find(" frame <length=") else {
            continue;
        };
        let head = &l[..pos];
        let (way, ty) = {
            let mut w = head.rsplit(' ');
            let ty = w.next().unwrap().to_string();
            (w.next().unwrap().to_string(), ty)
        };
        let fields = &l[pos + " frame <".len()..l.len() - 1];
        let mut len = 0;
        let mut flags = 0;
        let mut stream = 0;
        for kv in fields.split(", ") {
            let (k, v) = kv.split_once('=').unwrap();
            match k {
                "length" => len = v.parse().unwrap(),
                "flags" => flags = u8::from_str_radix(v.trim_start_matches("0x"), 16).unwrap(),
                "stream_id" => stream = v.parse().unwrap(),
                _ => {}
            }
        }
        let e = by_conn.entry(id.clone()).or_default();
        let list = if way == "recv" { &mut e.0 } else { &mut e.1 };
        list.push((ty, flags, stream, len));
        last_id = id;
    }
    let (recv, sent) = &by_conn[&last_id];
    assert_eq!(
        recv, &c2s,
        "what nghttpd received = what the relay wrote to it"
    );
    assert_eq!(
        sent, &s2c,
        "what nghttpd sent = what the relay read from it"
    );
}

/// An upstream that is the relay's own listening address (it would relay to
/// itself until --max-connections) is refused before anything starts.
#[test]
fn an_upstream_that_is_the_relay_itself_is_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let run = support::temp_dir("relay-self").join("run");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["relay", "--listen", &addr, "--upstream", &addr, "--out"])
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("it would relay to itself"), "{err}");
    assert!(!run.exists(), "a refused relay left {}", run.display());
}

/// A Python grpcio client through the relay to `h2probe serve --release
/// complete`: the credit the server withholds, read from the wire by the
/// relay, equals the server's own unreleased bytes at every WINDOW_UPDATE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_through_the_relay_withheld_credit_is_the_servers_unreleased_bytes() {
    let Some(python) = require_tool("python3") else {
        return;
    };
    let has_grpc = tokio::process::Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .await
        .is_ok_and(|s| s.success());
    if !has_grpc {
        support::missing("the Python packages grpcio and grpcio-tools");
        return;
    }
    let stubs = support::temp_dir("relay-grpcio-stubs");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let gen = tokio::process::Command::new(&python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(root.join("proto"))
        .arg(format!("--python_out={}", stubs.display()))
        .arg(format!("--grpc_python_out={}", stubs.display()))
        .arg(root.join("proto/h2probe.proto"))
        .output()
        .await
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let opts = ServerOpts {
        release: "complete".parse().unwrap(),
        service_time: "2ms".parse().unwrap(),
        ..Default::default()
    };
    let server = TestServer::start("relay-grpcio-srv", opts).await;
    let relay = TestRelay::start("relay-grpcio", relay_config(&server.addr.to_string())).await;
    let out = tokio::process::Command::new(&python)
        .arg(root.join("tests/python/ingest_client.py"))
        .arg(&stubs)
        .arg(relay.addr.to_string())
        .arg("200")
        .arg((16 * 1024).to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("\"completed\": 200"), "{text}");
    let (rs, rdir) = relay.stop().await;
    let (_, sdir) = server.stop().await;
    assert_legs_equal(&rdir);
    assert_eq!(rs.checks["relay_forwarded_unchanged"].ok, Some(true));
    assert_withheld_is_servers_unreleased(&rdir, &sdir, &rs);
    assert_eq!(
        rs.relay.as_ref().unwrap().c2s.credit_release,
        "after_receipt"
    );
}

/// --link-delay on the client leg: the client's credit arrives a delay late
/// and its next DATA a delay later, so it resumes one round trip (2 × the
/// delay) after the relay wrote the credit; the delay is outside both taps,
/// so the relay-added latency does not include it. The relay sees the
/// client's window one round trip late: a DATA frame reaches it a delay
/// after it was sent, and a WINDOW_UPDATE it writes reaches the client a
/// delay later. So it sees each of the client's credit waits shortened by
/// a round trip (most, here, not at all): the client's own record of its
/// waits is the reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_on_the_client_leg_shows_as_the_clients_round_trip_not_as_relay_latency() {
    let opts = ServerOpts {
        release: "complete".parse().unwrap(),
        service_time: "20ms".parse().unwrap(),
        ..Default::default()
    };
    let server = TestServer::start("relay-delay-srv", opts).await;
    let delay = std::time::Duration::from_millis(15);
    let mut cfg = relay_config(&server.addr.to_string());
    cfg.shape.delay = delay;
    cfg.link_side = LinkSide::Client;
    let relay = TestRelay::start("relay-delay", cfg).await;
    let client_trace = support::temp_dir("relay-delay-cli").join("trace.jsonl");
    let (writer, rec) = h2probe::trace::TraceWriter::create(&client_trace, 1 << 16).unwrap();
    let copts = h2probe::client::ClientOpts {
        rate: 200.0,
        duration: "500ms".parse().unwrap(),
        ..Default::default()
    };
    let outcomes = h2probe::client::run(support::client_ctx(copts, relay.addr, rec.clone()))
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, 0, "{:?}", outcomes[0]);
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    let (s, rdir) = relay.stop().await;
    server.stop().await;
    assert_legs_equal(&rdir);
    let c = &s.relay.as_ref().unwrap().c2s;
    let cs = h2probe_analysis::analyze::analyze_trace(&client_trace)
        .unwrap()
        .summary;
    assert!(
        cs.window_blocked_ms.count >= 10,
        "the client waited: {:?}",
        cs.window_blocked_ms
    );
    assert!(
        c.inferred_blocked_s + 2.0 * delay.as_secs_f64() * c.inferred_blocked_intervals as f64
            <= cs.client_window_blocked_s,
        "relay saw {} s in {} waits, the client measured {} s",
        c.inferred_blocked_s,
        c.inferred_blocked_intervals,
        cs.client_window_blocked_s
    );
    assert_eq!(c.credit_release, "after_receipt", "{c:?}");
    let rtt_ms = 2.0 * delay.as_secs_f64() * 1e3;
    // Every wait the relay did see ended with a resume one round trip later
    // (less up to 0.5 ms each way: the line aims its last stretch early,
    // src/link.rs).
    assert!(
        c.resume_after_credit_ms.count == 0 || c.resume_after_credit_ms.min >= rtt_ms - 1.0,
        "resumed {:?} after the credit, round trip {rtt_ms} ms",
        c.resume_after_credit_ms
    );
    assert!(
        c.relay_latency_ms.p50 < delay.as_secs_f64() * 1e3,
        "{:?}",
        c.relay_latency_ms
    );
}

/// --link-side server delays the relay ↔ server leg only: every DATA frame
/// reaches the server's tap at least the delay after the relay wrote it,
/// while the client leg is not delayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_side_server_delays_only_the_leg_to_the_server() {
    let server = TestServer::start("relay-sside-srv", ServerOpts::default()).await;
    let delay = std::time::Duration::from_millis(10);
    let mut cfg = relay_config(&server.addr.to_string());
    cfg.shape.delay = delay;
    cfg.link_side = LinkSide::Server;
    let relay = TestRelay::start("relay-sside", cfg).await;
    let cdir = support::temp_dir("relay-sside-cli");
    let (writer, rec) =
        h2probe::trace::TraceWriter::create(&cdir.join("trace.jsonl"), 1 << 16).unwrap();
    let copts = h2probe::client::ClientOpts {
        rate: 100.0,
        duration: "300ms".parse().unwrap(),
        ..Default::default()
    };
    let outcomes = h2probe::client::run(support::client_ctx(copts, relay.addr, rec.clone()))
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, 0, "{:?}", outcomes[0]);
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    let (_, rdir) = relay.stop().await;
    let (_, sdir) = server.stop().await;
    let times =
        |dir: &Path, ep: Endpoint, d: Dir| -> HashMap<u64, u64> { credit_view_all(dir, ep, d) };
    let client_wrote = times(&cdir, Endpoint::Client, Dir::Out);
    let relay_read = times(&rdir, Endpoint::ClientLeg, Dir::In);
    let relay_wrote = times(&rdir, Endpoint::ServerLeg, Dir::Out);
    let server_read = times(&sdir, Endpoint::Server, Dir::In);
    assert!(relay_wrote.len() >= 20, "{}", relay_wrote.len());
    let d = delay.as_nanos() as u64;
    // The line aims its last stretch up to 0.5 ms early (src/link.rs), so a
    // chunk may land that much before its due time.
    for (off, t) in &relay_wrote {
        let trip = server_read[off] - t;
        assert!(trip + 500_000 >= d, "offset {off}: {trip} ns");
    }
    let mut client_hop: Vec<u64> = client_wrote
        .iter()
        .filter_map(|(off, t)| relay_read.get(off).map(|r| r - t))
        .collect();
    client_hop.sort_unstable();
    assert!(client_hop[client_hop.len() / 2] < d, "client leg undelayed");
}

/// offset → t of every DATA frame one tap saw going `d`.
fn credit_view_all(dir: &Path, ep: Endpoint, d: Dir) -> HashMap<u64, u64> {
    credit_view(dir, ep, d)
        .data
        .into_iter()
        .map(|(off, _, _, t)| (off, t))
        .collect()
}

/// A client that sends its body before it acknowledges the server's
/// SETTINGS lowering the initial window (as curl does with a whole upload
/// at once) is legal (RFC 9113 §6.9.2): the relay's
/// `relay_no_data_beyond_credit` and the server's `credit` failed it (exit
/// 3), while the server's own windows counted it as `data_past_lowered_window`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_sent_before_a_lowering_settings_was_acknowledged_is_legal() {
    use h2probe::wire::encode;
    const END_STREAM: u8 = 0x1;
    const END_HEADERS: u8 = 0x4;
    let opts = ServerOpts {
        stream_window: "1023".parse().unwrap(),
        ..Default::default()
    };
    let server = TestServer::start("lowered-srv", opts).await;
    let relay = TestRelay::start("lowered-relay", relay_config(&server.addr.to_string())).await;
    let mut c = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    let mut hello = encode::preface();
    hello.extend(encode::settings(false, &[]));
    c.write_all(&hello).await.unwrap();
    // The server's SETTINGS (initial window 1,023) arrive first…
    let mut head = [0u8; 9];
    c.read_exact(&mut head).await.unwrap();
    assert_eq!(head[3], 0x4, "the server's first frame is SETTINGS");
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0u8; len];
    c.read_exact(&mut payload).await.unwrap();
    // …then the whole request, 20,000 framed bytes in two DATA frames, and
    // only then the ACK.
    let block = support::ingest_request_block();
    let msg = h2probe::grpc::encode(&h2probe::grpc::pb::Item {
        seq: 0,
        scheduled_ns: 0,
        payload: vec![1u8; 19_991].into(),
    })
    .to_vec();
    assert_eq!(msg.len(), 20_000, "one message of 20,000 framed bytes");
    let mut req = encode::headers(1, END_HEADERS, None, None, &block);
    req.extend(encode::data(1, 0, None, &msg[..16_384]));
    req.extend(encode::data(1, END_STREAM, None, &msg[16_384..]));
    req.extend(encode::settings(true, &[]));
    c.write_all(&req).await.unwrap();
    // The answer ends the stream (trailers with END_STREAM); then close.
    let mut back = vec![];
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        while let Ok(n) = c.read(&mut buf).await {
            if n == 0 || back.len() > 64 {
                break;
            }
            back.extend_from_slice(&buf[..n]);
            if back.windows(12).any(|w| w.starts_with(b"grpc-status")) {
                break;
            }
        }
    })
    .await;
    drop(c);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (r, _) = relay.stop().await;
    let (s, _) = server.stop().await;
    assert!(
        s.data_past_lowered_window >= 1,
        "{}",
        s.data_past_lowered_window
    );
    assert_eq!(
        s.checks["credit"].ok,
        Some(true),
        "{}",
        s.checks["credit"].detail
    );
    assert_eq!(
        s.checks["no_data_beyond_credit"].ok,
        Some(true),
        "{}",
        s.checks["no_data_beyond_credit"].detail
    );
    let check = &r.checks["relay_no_data_beyond_credit"];
    assert_eq!(check.ok, Some(true), "{}", check.detail);
    // The stream ended both ways before the client closed.
    assert_eq!(r.relay.as_ref().unwrap().streams_cut, 0);
}

/// A client that dies mid-upload: its stream ended neither way, and the
/// relay says so (it read "all invariants hold" with nothing about it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_by_its_connections_close_is_said() {
    use h2probe::wire::encode;
    let server = TestServer::start("cut-srv", ServerOpts::default()).await;
    let relay = TestRelay::start("cut-relay", relay_config(&server.addr.to_string())).await;
    let mut c = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    let block = support::ingest_request_block();
    let mut req = encode::preface();
    req.extend(encode::settings(false, &[]));
    req.extend(encode::headers(1, 0x4, None, None, &block));
    // Half of a 100-byte message, then the client is gone.
    req.extend(encode::data(1, 0, None, &[0, 0, 0, 0, 95, 1, 2, 3]));
    c.write_all(&req).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    drop(c);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (s, _) = relay.stop().await;
    server.stop().await;
    let r = s.relay.as_ref().unwrap();
    assert_eq!(r.streams_cut, 1, "{r:?}");
    let cut = r.first_cut.as_ref().unwrap();
    assert_eq!((cut.conn, cut.stream), (1, 1), "{cut:?}");
    let headline = h2probe_analysis::report::headline(&s);
    assert!(
        headline.contains("cut       1 stream open when its connection closed"),
        "{headline}"
    );
}
