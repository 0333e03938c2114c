//! A gRPC service that is not h2probe's, on tonic: `sensors.v3.Telemetry`
//! of `tests/proto/sensors.proto`, its prost structs written by hand
//! (independently of the client's run-time compilation of the .proto).
//! Shared by `tests/any_method.rs` and `examples/telemetry_server.rs`.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::codegen::{http, BoxFuture, BoxStream, Service, StdError};

#[derive(Clone, PartialEq, prost::Message)]
pub struct Reading {
    #[prost(string, tag = "1")]
    pub device: String,
    #[prost(uint64, tag = "2")]
    pub n: u64,
    #[prost(int64, tag = "3")]
    pub sent_at: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub blob: Vec<u8>,
    #[prost(string, repeated, tag = "5")]
    pub tags: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UploadSummary {
    #[prost(uint64, tag = "1")]
    pub accepted: u64,
    #[prost(string, tag = "2")]
    pub tenant: String,
    #[prost(uint64, tag = "3")]
    pub blob_bytes: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Ack {
    #[prost(uint64, tag = "1")]
    pub n: u64,
    #[prost(bytes = "vec", tag = "2")]
    pub pad: Vec<u8>,
}

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    pub readings: AtomicU64,
    /// Deepest the application queue got (messages decoded, not yet served).
    pub peak_queue: AtomicU64,
    /// Every reading, its blob replaced by the blob's length.
    pub log: Mutex<Vec<(Reading, usize)>>,
    pub tenants: Mutex<Vec<String>>,
    /// The `:authority` of every request.
    pub authorities: Mutex<Vec<String>>,
    /// The `x-tenant` of every reflection request (none: "").
    pub reflection_tenants: Mutex<Vec<String>>,
}

/// `sensors.v3.Telemetry` on tonic: the Part 1 replica's shape (tonic
/// releases credit as each frame is polled; decoded readings go to an
/// unbounded queue served by one 10 ms worker; the reply once it drained).
#[derive(Clone)]
pub struct Telemetry {
    seen: Arc<Seen>,
    service_time: Duration,
}

impl tonic::server::NamedService for Telemetry {
    const NAME: &'static str = "sensors.v3.Telemetry";
}

struct Upload(Telemetry);

impl tonic::server::ClientStreamingService<Reading> for Upload {
    type Response = UploadSummary;
    type Future = BoxFuture<tonic::Response<UploadSummary>, tonic::Status>;
    fn call(&mut self, req: tonic::Request<tonic::Streaming<Reading>>) -> Self::Future {
        let svc = self.0.clone();
        Box::pin(async move {
            let tenant = req
                .metadata()
                .get_all("x-tenant")
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>();
            svc.seen.tenants.lock().unwrap().extend(tenant.clone());
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Reading>();
            let depth = Arc::new(AtomicU64::new(0));
            let (seen, d, pause) = (svc.seen.clone(), depth.clone(), svc.service_time);
            let worker = tokio::spawn(async move {
                let (mut n, mut bytes) = (0, 0);
                while let Some(mut r) = rx.recv().await {
                    tokio::time::sleep(pause).await;
                    d.fetch_sub(1, Ordering::Relaxed);
                    n += 1;
                    let blob = std::mem::take(&mut r.blob).len();
                    bytes += blob as u64;
                    seen.log.lock().unwrap().push((r, blob));
                }
                (n, bytes)
            });
            let mut stream = req.into_inner();
            while let Some(r) = stream.message().await? {
                svc.seen.readings.fetch_add(1, Ordering::Relaxed);
                let now = depth.fetch_add(1, Ordering::Relaxed) + 1;
                svc.seen.peak_queue.fetch_max(now, Ordering::Relaxed);
                tx.send(r).unwrap();
            }
            drop(tx);
            let (accepted, blob_bytes) = worker.await.unwrap();
            Ok(tonic::Response::new(UploadSummary {
                accepted,
                tenant: tenant.join(","),
                blob_bytes,
            }))
        })
    }
}

struct Mirror(Telemetry);

impl tonic::server::StreamingService<Reading> for Mirror {
    type Response = Ack;
    type ResponseStream = BoxStream<Ack>;
    type Future = BoxFuture<tonic::Response<BoxStream<Ack>>, tonic::Status>;
    fn call(&mut self, req: tonic::Request<tonic::Streaming<Reading>>) -> Self::Future {
        let seen = self.0.seen.clone();
        Box::pin(async move {
            let mut stream = req.into_inner();
            // A small outbound buffer: a client that did not read replies
            // while sending would stop this loop, and so its own upload.
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tokio::spawn(async move {
                while let Ok(Some(r)) = stream.message().await {
                    seen.readings.fetch_add(1, Ordering::Relaxed);
                    let ack = Ack {
                        n: r.n,
                        pad: vec![7; 4096],
                    };
                    if tx.send(Ok(ack)).await.is_err() {
                        break;
                    }
                }
            });
            let out: BoxStream<Ack> = Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx));
            Ok(tonic::Response::new(out))
        })
    }
}

struct Latest(Telemetry);

/// Unary: one reading per call, answered after the service time.
impl tonic::server::UnaryService<Reading> for Latest {
    type Response = Ack;
    type Future = BoxFuture<tonic::Response<Ack>, tonic::Status>;
    fn call(&mut self, req: tonic::Request<Reading>) -> Self::Future {
        let svc = self.0.clone();
        Box::pin(async move {
            let mut r = req.into_inner();
            svc.seen.readings.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(svc.service_time).await;
            let n = r.n;
            let blob = std::mem::take(&mut r.blob).len();
            svc.seen.log.lock().unwrap().push((r, blob));
            Ok(tonic::Response::new(Ack { n, pad: vec![] }))
        })
    }
}

impl<B> Service<http::Request<B>> for Telemetry
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
        let svc = self.clone();
        if let Some(a) = req.uri().authority() {
            svc.seen.authorities.lock().unwrap().push(a.to_string());
        }
        Box::pin(async move {
            Ok(match req.uri().path() {
                "/sensors.v3.Telemetry/Upload" => {
                    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                    grpc.client_streaming(Upload(svc), req).await
                }
                "/sensors.v3.Telemetry/Mirror" => {
                    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                    grpc.streaming(Mirror(svc), req).await
                }
                "/sensors.v3.Telemetry/Latest" => {
                    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                    grpc.unary(Latest(svc), req).await
                }
                _ => tonic::Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// Serves `Telemetry` on 127.0.0.1 (an ephemeral port) until dropped.
pub struct TonicServer {
    pub port: u16,
    pub seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl TonicServer {
    /// Serves on 127.0.0.1:`port` (0: an ephemeral one), each reading of
    /// `Upload` taking `service_time` in the worker.
    pub async fn start(port: u16, service_time: Duration) -> TonicServer {
        Self::start_at(("127.0.0.1", port), service_time).await
    }

    /// Serves on `addr` (a loopback address).
    pub async fn start_at(
        addr: impl tokio::net::ToSocketAddrs,
        service_time: Duration,
    ) -> TonicServer {
        Self::start_with(addr, service_time, None, false).await
    }

    /// Serves on 127.0.0.1 (an ephemeral port), with gRPC's reflection
    /// service (v1 and v1alpha) describing the files of `descriptors` (an
    /// encoded FileDescriptorSet).
    pub async fn start_reflecting(service_time: Duration, descriptors: &[u8]) -> TonicServer {
        Self::start_with(("127.0.0.1", 0), service_time, Some(descriptors), false).await
    }

    /// Serves on `addr`, with the reflection service when `descriptors`
    /// (an encoded FileDescriptorSet) are given. Its sockets keep Nagle's
    /// algorithm on, as tonic leaves a listener it is handed
    /// (`serve_with_incoming`), unless `nodelay`.
    pub async fn start_with(
        addr: impl tokio::net::ToSocketAddrs,
        service_time: Duration,
        descriptors: Option<&[u8]>,
        nodelay: bool,
    ) -> TonicServer {
        let seen = Arc::new(Seen::default());
        let svc = Telemetry {
            seen: seen.clone(),
            service_time,
        };
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let incoming = tokio_stream::StreamExt::map(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            move |s| s.inspect(|s| s.set_nodelay(nodelay).unwrap_or(())),
        );
        let reflection = descriptors.map(|d| {
            let builder = || {
                tonic_reflection::server::Builder::configure()
                    .register_encoded_file_descriptor_set(d)
            };
            (
                builder().build_v1().unwrap(),
                builder().build_v1alpha().unwrap(),
            )
        });
        let noted = seen.clone();
        let task = tokio::spawn(async move {
            // Part 1's windows: 65,535 bytes (tonic's default is 1 MiB).
            let mut router = tonic::transport::Server::builder()
                .initial_stream_window_size(65_535)
                .initial_connection_window_size(65_535)
                .add_service(svc);
            if let Some((v1, v1alpha)) = reflection {
                // Each reflection request's metadata is noted.
                let note = move |req: tonic::Request<()>| {
                    let tenant = req
                        .metadata()
                        .get("x-tenant")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    noted.reflection_tenants.lock().unwrap().push(tenant);
                    Ok(req)
                };
                router = router
                    .add_service(tonic::service::interceptor::InterceptedService::new(
                        v1,
                        note.clone(),
                    ))
                    .add_service(tonic::service::interceptor::InterceptedService::new(
                        v1alpha, note,
                    ));
            }
            let _ = router.serve_with_incoming(incoming).await;
        });
        TonicServer { port, seen, task }
    }
}

impl Drop for TonicServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
