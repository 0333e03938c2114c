//! Real peers nobody here wrote: a tonic client drives our server, and our
//! client drives a tonic server (tonic 0.14 / hyper / h2).

mod support;

use h2probe::grpc::pb::{IngestReply, Item};
use h2probe::server::ServerOpts;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codegen::{http, BoxFuture, Service, StdError};

/// A hand-written tonic service for `h2probe.v1.Probe` (what tonic-build
/// would generate), counting what it receives.
#[derive(Clone, Default)]
struct TonicProbe {
    received: Arc<AtomicU64>,
}

impl tonic::server::NamedService for TonicProbe {
    const NAME: &'static str = "h2probe.v1.Probe";
}

struct Ingest(Arc<AtomicU64>);

impl tonic::server::ClientStreamingService<Item> for Ingest {
    type Response = IngestReply;
    type Future = BoxFuture<tonic::Response<IngestReply>, tonic::Status>;
    fn call(&mut self, req: tonic::Request<tonic::Streaming<Item>>) -> Self::Future {
        let counter = self.0.clone();
        Box::pin(async move {
            let mut stream = req.into_inner();
            let (mut n, mut bytes) = (0u64, 0u64);
            while let Some(item) = stream.message().await? {
                n += 1;
                bytes += item.payload.len() as u64;
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Ok(tonic::Response::new(IngestReply {
                received: n,
                completed: n,
                discarded: 0,
                received_bytes: bytes,
            }))
        })
    }
}

impl<B> Service<http::Request<B>> for TonicProbe
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let counter = self.received.clone();
        Box::pin(async move {
            if req.uri().path() != "/h2probe.v1.Probe/Ingest" {
                return Ok(tonic::Status::unimplemented("no such method").into_http());
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.client_streaming(Ingest(counter), req).await)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_client_drives_our_server() {
    let opts = ServerOpts {
        service_time: "1ms".parse().unwrap(),
        release: h2probe::config::ReleaseSpec::uniform(h2probe::config::ReleasePoint::Complete),
        queue: "bounded:4".parse().unwrap(),
        ..Default::default()
    };
    let server = support::TestServer::start("tonic-our-server", opts).await;
    let addr = server.addr;

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let n = 200u64;
    for _rpc in 0..2 {
        grpc.ready().await.unwrap();
        let items: Vec<Item> = (0..n)
            .map(|seq| Item {
                seq,
                scheduled_ns: 0,
                payload: vec![7u8; 16 * 1024].into(),
            })
            .collect();
        let framed: u64 = items
            .iter()
            .map(|i| h2probe::grpc::encode(i).len() as u64)
            .sum();
        let path = http::uri::PathAndQuery::from_static("/h2probe.v1.Probe/Ingest");
        let reply: IngestReply = grpc
            .client_streaming(
                tonic::Request::new(tokio_stream::iter(items)),
                path,
                tonic_prost::ProstCodec::default(),
            )
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (reply.received, reply.completed, reply.discarded),
            (n, n, 0)
        );
        assert_eq!(
            reply.received_bytes, framed,
            "every framed byte, prefixes included"
        );
    }
    // An unknown method is UNIMPLEMENTED for a stock client too.
    grpc.ready().await.unwrap();
    let err = grpc
        .client_streaming::<_, Item, IngestReply, _>(
            tonic::Request::new(tokio_stream::iter(vec![Item::default()])),
            http::uri::PathAndQuery::from_static("/h2probe.v1.Probe/Other"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    drop(grpc);
    let (s, _) = server.stop().await;
    assert_eq!(s.completed, 2 * n);
    assert_eq!(s.checks["credit"].ok, Some(true));
    support::assert_released_as_told_by_a_sound_peer(&s);
    // Release on complete: the application never owned more than the window.
    assert!(s.max_owned_bytes <= 65_535, "{}", s.max_owned_bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_a_tonic_server() {
    let svc = TonicProbe::default();
    let received = svc.received.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming),
    );
    let dir = support::temp_dir("tonic-client");
    let path = dir.join("trace.jsonl");
    let (writer, rec) = h2probe::trace::TraceWriter::create(&path, 1 << 16).unwrap();
    let opts = h2probe::client::ClientOpts {
        rate: 500.0,
        duration: "600ms".parse().unwrap(),
        streams: 2,
        ..Default::default()
    };
    let ctx = support::client_ctx(opts, addr, rec.clone());
    let outcomes = h2probe::client::run(ctx).await.unwrap();
    assert_eq!(outcomes.len(), 2);
    let mut total = 0;
    for o in &outcomes {
        assert_eq!(o.status, 0, "{o:?}");
        total += o.reply.as_ref().unwrap().received;
    }
    assert!(total >= 250, "{total}");
    assert_eq!(received.load(Ordering::Relaxed), total);
    server.abort();
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    // The client-only trace analyses on its own: every sent message is in it,
    // and the windows reconstructed from the client's tap never went negative.
    let a = h2probe_analysis::analyze::analyze_trace(&path).unwrap();
    assert_eq!(a.summary.sent, total);
    assert_eq!(a.summary.scheduled, a.summary.sent + a.summary.never_sent);
    assert_eq!(a.summary.checks["no_data_beyond_credit"].ok, Some(true));
    assert!(
        a.summary.rules_broken.is_empty(),
        "{:?}",
        a.summary.rules_broken
    );
    assert_eq!(a.summary.rpc_status.get("OK"), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_client_calls_exchange_and_gets_one_outcome_per_attempt() {
    use h2probe::grpc::pb::{outcome, Attempt, Outcome};
    let opts = ServerOpts {
        service_time: "5ms".parse().unwrap(),
        admission: 4,
        when_full: h2probe::overload::WhenFull::Reject,
        ..Default::default()
    };
    let server = support::TestServer::start("tonic-exchange", opts).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let n = 60u64;
    // Sent all at once: more than 4 slots' worth, so some are rejected.
    let attempts: Vec<Attempt> = (0..n)
        .map(|id| Attempt {
            id,
            attempt: 1,
            scheduled_ns: 0,
            deadline_ns: 0,
            payload: vec![3u8; 1024].into(),
        })
        .collect();
    let path = http::uri::PathAndQuery::from_static("/h2probe.v1.Probe/Exchange");
    let mut outcomes = grpc
        .streaming::<_, Attempt, Outcome, _>(
            tonic::Request::new(tokio_stream::iter(attempts)),
            path,
            tonic_prost::ProstCodec::default(),
        )
        .await
        .unwrap()
        .into_inner();
    let mut seen = std::collections::HashMap::new();
    while let Some(o) = outcomes.message().await.unwrap() {
        assert!(
            seen.insert(o.id, o.result).is_none(),
            "one outcome per attempt"
        );
    }
    assert_eq!(seen.len() as u64, n);
    let count = |r: outcome::Result| seen.values().filter(|v| **v == r as i32).count();
    let (done, rejected) = (
        count(outcome::Result::Completed),
        count(outcome::Result::Rejected),
    );
    assert_eq!(done + rejected, n as usize, "{seen:?}");
    assert!(
        done >= 4 && rejected > 0,
        "completed {done}, rejected {rejected}"
    );
    drop(grpc);
    let (s, _) = server.stop().await;
    let ov = s.overload.as_ref().unwrap();
    assert_eq!(ov.decoded, n);
    assert_eq!(s.completed as usize, done);
    assert!(ov.max_in_use <= 4, "{ov:?}");
    assert_eq!(
        s.checks["admission"].ok,
        Some(true),
        "{}",
        s.checks["admission"].detail
    );
}
