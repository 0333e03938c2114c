//! `client --reflect`: the method's messages described by the server's own
//! reflection service (`grpc.reflection.v1`, or `v1alpha` on older
//! servers) instead of a .proto file. Asked before the run on a connection
//! of its own, which the trace does not hold (it records the experiment).

use super::target::{Target, Transport};
use crate::grpc::{self, Deframer};
use anyhow::Context as _;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use tokio::io::{AsyncRead, AsyncWrite};

/// The reflection services, newest first.
const SERVICES: [&str; 2] = [
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// Files asked for at most: a schema and its imports are a few dozen; a
/// server naming new imports forever is stopped here.
const MAX_FILES: usize = 1000;

/// gRPC's NOT_FOUND, the reflection service's word for an unknown symbol.
const NOT_FOUND: u32 = 5;

/// A reflection reply's size at most (descriptors are kilobytes).
const MAX_MESSAGE: u32 = 16 << 20;

/// The descriptors' bytes kept at most, over all files.
const MAX_SCHEMA_BYTES: usize = 64 << 20;

/// How long the reflection service has to describe the method, connection
/// included (a server that accepts and says nothing would hold the client
/// forever).
pub const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// `ServerReflectionRequest`, the three questions asked.
#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(string, optional, tag = "3")]
    file_by_filename: Option<String>,
    #[prost(string, optional, tag = "4")]
    file_containing_symbol: Option<String>,
    #[prost(string, optional, tag = "7")]
    list_services: Option<String>,
}

/// `ServerReflectionResponse`, the three answers read.
#[derive(Clone, PartialEq, prost::Message)]
struct Response {
    #[prost(message, optional, tag = "4")]
    file_descriptor_response: Option<FileDescriptorResponse>,
    #[prost(message, optional, tag = "6")]
    list_services_response: Option<ListServiceResponse>,
    #[prost(message, optional, tag = "7")]
    error_response: Option<ErrorResponse>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ListServiceResponse {
    #[prost(message, repeated, tag = "1")]
    service: Vec<ServiceResponse>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServiceResponse {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct FileDescriptorResponse {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    file_descriptor_proto: Vec<Bytes>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ErrorResponse {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// What of a `FileDescriptorProto` the walk needs: its name and imports.
#[derive(Clone, PartialEq, prost::Message)]
struct FileHead {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, repeated, tag = "3")]
    dependency: Vec<String>,
}

/// A `FileDescriptorSet` of the files as received.
#[derive(Clone, PartialEq, prost::Message)]
struct FileSet {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    file: Vec<Bytes>,
}

/// The method's schema as the server described it.
pub struct Described {
    pub pool: prost_reflect::DescriptorPool,
    /// The reflection service that answered.
    pub service: &'static str,
    /// The files received, by name.
    pub files: Vec<String>,
}

/// Why a reflection service could not describe `symbol`.
enum Failure {
    /// This version of the service is not there: try the next.
    Unimplemented,
    /// Something asked for is not found: the method's service, when it
    /// was the first question.
    NotFound,
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Other(e.into())
    }
}

/// Asks the server for the file defining `symbol` (the method's service)
/// and every file it imports.
pub async fn describe(
    target: &Target,
    symbol: &str,
    metadata: &http::HeaderMap,
) -> anyhow::Result<Described> {
    let asked = async {
        let connected = target.connect().await?;
        match connected.io {
            Transport::Tcp(s) => secured(s, target, symbol, metadata).await,
            Transport::Unix(s) => secured(s, target, symbol, metadata).await,
        }
    };
    // A --connect-timeout longer than the answer's time is honoured.
    let limit = ANSWER_WITHIN.max(target.connect_timeout);
    match tokio::time::timeout(limit, asked).await {
        Ok(r) => r,
        Err(_) => Err(anyhow::anyhow!(
            "no description of {symbol} within {}",
            crate::config::Dur(limit)
        )),
    }
    .context("--reflect: asking the server's reflection service")
}

async fn secured<T>(
    io: T,
    target: &Target,
    symbol: &str,
    metadata: &http::HeaderMap,
) -> anyhow::Result<Described>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match &target.tls {
        None => over(io, target, symbol, metadata).await,
        Some(tls) => {
            let s = target.handshake(tls, io, &target.authority).await?;
            over(s, target, symbol, metadata).await
        }
    }
}

async fn over<T>(
    io: T,
    target: &Target,
    symbol: &str,
    metadata: &http::HeaderMap,
) -> anyhow::Result<Described>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io)
        .await
        .context("HTTP/2 handshake")?;
    // The connection ends with this function, however it ends (an error,
    // the time limit dropping it).
    let _driver = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let mut answered = None;
    for service in SERVICES {
        match ask(send.clone(), target, service, symbol, metadata).await {
            Ok(files) => {
                answered = Some((service, files));
                break;
            }
            Err(Failure::Unimplemented) => continue,
            Err(Failure::NotFound) => {
                let served = list_services(send.clone(), target, service, metadata)
                    .await
                    .unwrap_or_default();
                return Err(anyhow::Error::new(crate::config::UsageError(format!(
                    "--method: the server does not serve {symbol}, by its reflection service (it serves: {})",
                    if served.is_empty() {
                        "none it names".to_string()
                    } else {
                        served.join(", ")
                    }
                ))));
            }
            Err(Failure::Other(e)) => {
                return Err(e.context(format!("{service}/ServerReflectionInfo")));
            }
        }
    }
    let Some((service, files)) = answered else {
        anyhow::bail!(
            "{} has no reflection service ({} and {} answered UNIMPLEMENTED): describe the method \
             with --proto FILE instead",
            target.authority,
            SERVICES[0],
            SERVICES[1]
        );
    };
    let names: Vec<String> = files.keys().cloned().collect();
    let set = FileSet {
        file: files.into_values().collect(),
    };
    let pool =
        prost_reflect::DescriptorPool::decode(prost::Message::encode_to_vec(&set).as_slice())
            .map_err(|e| {
                anyhow::anyhow!("the descriptors {service} sent do not form a schema: {e}")
            })?;
    Ok(Described {
        pool,
        service,
        files: names,
    })
}

/// One reflection stream: the file containing `symbol`, then, one request
/// each, the imports no answer has brought yet.
async fn ask(
    send: h2::client::SendRequest<Bytes>,
    target: &Target,
    service: &str,
    symbol: &str,
    metadata: &http::HeaderMap,
) -> Result<BTreeMap<String, Bytes>, Failure> {
    let mut send = send.ready().await?;
    let request = super::grpc_request_to(
        target,
        &format!("/{service}/ServerReflectionInfo"),
        ANSWER_WITHIN,
        metadata,
    );
    let (response, mut stream) = send.send_request(request, false)?;
    let question = |file: Option<String>| Request {
        file_containing_symbol: file.is_none().then(|| symbol.to_string()),
        file_by_filename: file,
        ..Default::default()
    };
    stream.send_data(grpc::encode(&question(None)), false)?;
    let response = response.await?;
    if response.status() != http::StatusCode::OK {
        return Err(Failure::Other(anyhow::anyhow!(
            "HTTP status {}",
            response.status()
        )));
    }
    // A trailers-only answer: the service is not there, or refused.
    if let Some(code) = grpc_status(response.headers()) {
        return Err(refusal(code, response.headers()));
    }
    let mut body = response.into_body();
    let mut deframer = Deframer::new(MAX_MESSAGE);
    let mut files: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut asked: BTreeSet<String> = BTreeSet::new();
    let mut outstanding = 1usize;
    let mut first = true;
    let mut kept = 0usize;
    while outstanding > 0 {
        // The service itself unknown (the first answer is to the first
        // question, as an error reply or as the stream's status): which
        // ones the server does know says what to fix.
        let reply = match read_reply(&mut body, &mut deframer, outstanding).await {
            Err(Failure::NotFound) if !first => {
                return Err(Failure::Other(anyhow::anyhow!(
                    "the server could not describe an import of {symbol}: NOT_FOUND"
                )))
            }
            r => r?,
        };
        outstanding -= 1;
        if let Some(e) = reply.error_response {
            if first && e.error_code == NOT_FOUND as i32 {
                return Err(Failure::NotFound);
            }
            return Err(Failure::Other(anyhow::anyhow!(
                "the server could not describe {symbol} (or one of its imports): {} (code {})",
                e.error_message,
                e.error_code
            )));
        }
        first = false;
        let received = reply
            .file_descriptor_response
            .map(|r| r.file_descriptor_proto)
            .unwrap_or_default();
        let mut imports = vec![];
        kept += received.iter().map(Bytes::len).sum::<usize>();
        if kept > MAX_SCHEMA_BYTES {
            return Err(Failure::Other(anyhow::anyhow!(
                "more than {} MiB of descriptors: stopped asking",
                MAX_SCHEMA_BYTES >> 20
            )));
        }
        for bytes in received {
            let head: FileHead = prost::Message::decode(bytes.clone())
                .map_err(|e| anyhow::anyhow!("a file descriptor does not decode: {e}"))?;
            imports.extend(head.dependency.iter().cloned());
            files.entry(head.name).or_insert(bytes);
        }
        for import in imports {
            if files.contains_key(&import) || !asked.insert(import.clone()) {
                continue;
            }
            if files.len() + asked.len() > MAX_FILES {
                return Err(Failure::Other(anyhow::anyhow!(
                    "more than {MAX_FILES} files: stopped asking"
                )));
            }
            stream.send_data(grpc::encode(&question(Some(import))), false)?;
            outstanding += 1;
        }
    }
    // Done: end the request stream (the server then ends its own).
    let _ = stream.send_data(Bytes::new(), true);
    Ok(files)
}

/// The services the server names, on a reflection stream of their own.
async fn list_services(
    send: h2::client::SendRequest<Bytes>,
    target: &Target,
    service: &str,
    metadata: &http::HeaderMap,
) -> Result<Vec<String>, Failure> {
    let mut send = send.ready().await?;
    let request = super::grpc_request_to(
        target,
        &format!("/{service}/ServerReflectionInfo"),
        ANSWER_WITHIN,
        metadata,
    );
    let (response, mut stream) = send.send_request(request, false)?;
    let list = Request {
        list_services: Some(String::new()),
        ..Default::default()
    };
    stream.send_data(grpc::encode(&list), true)?;
    let mut body = response.await?.into_body();
    let reply = read_reply(&mut body, &mut Deframer::new(MAX_MESSAGE), 1).await?;
    Ok(reply
        .list_services_response
        .map(|l| l.service.into_iter().map(|s| s.name).collect())
        .unwrap_or_default())
}

/// The next reply on the reflection stream (`outstanding` questions wait
/// for one).
async fn read_reply(
    body: &mut h2::RecvStream,
    deframer: &mut Deframer,
    outstanding: usize,
) -> Result<Response, Failure> {
    let framed = loop {
        if let Some(m) = deframer
            .next_message()
            .map_err(|e| anyhow::anyhow!("a reply: {e}"))?
        {
            break m;
        }
        match body.data().await {
            Some(chunk) => {
                let chunk = chunk?;
                let _ = body.flow_control().release_capacity(chunk.len());
                deframer.push_bytes(chunk);
            }
            None => {
                let trailers = body.trailers().await?.unwrap_or_default();
                return Err(match grpc_status(&trailers) {
                    Some(code) if code != 0 => refusal(code, &trailers),
                    _ => Failure::Other(anyhow::anyhow!(
                        "the stream ended with {outstanding} question(s) unanswered"
                    )),
                });
            }
        }
    };
    prost::Message::decode(framed.data()).map_err(|e| {
        Failure::Other(anyhow::anyhow!(
            "a reply is not a ServerReflectionResponse: {e}"
        ))
    })
}

fn grpc_status(headers: &http::HeaderMap) -> Option<u32> {
    headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}

/// A gRPC status other than OK: UNIMPLEMENTED means this service is not
/// there.
fn refusal(code: u32, headers: &http::HeaderMap) -> Failure {
    match code {
        grpc::status::UNIMPLEMENTED => return Failure::Unimplemented,
        NOT_FOUND => return Failure::NotFound,
        _ => {}
    }
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(grpc::decode_message)
        .unwrap_or_default();
    Failure::Other(anyhow::anyhow!(
        "grpc-status {code} ({}): {message}",
        h2probe_analysis::schema::status_name(code)
    ))
}
