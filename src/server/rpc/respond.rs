//! What the server answers on the wire: request checks, gRPC headers,
//! trailers and replies, HTTP errors.

use super::*;

/// Reads and releases up to `limit` body bytes, for at most `wait`.
pub(super) async fn drain_body(mut body: RecvStream, limit: usize, wait: std::time::Duration) {
    let mut seen = 0;
    let _ = tokio::time::timeout(wait, async {
        while seen < limit {
            match body.data().await {
                Some(Ok(chunk)) => {
                    seen += chunk.len();
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                _ => break,
            }
        }
    })
    .await;
}

/// Refuses what the probe does not serve: (HTTP status, gRPC status if the
/// request is gRPC, message).
pub(in crate::server) fn check_request<B>(
    req: &Request<B>,
    framing: Framing,
    paths: &[&str],
) -> Result<(), (StatusCode, Option<u32>, String)> {
    let m = req.method();
    let ct = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is_grpc = ct.starts_with("application/grpc");
    match framing {
        Framing::Raw(_) => {
            if m != http::Method::POST && m != http::Method::PUT {
                return Err((
                    StatusCode::METHOD_NOT_ALLOWED,
                    None,
                    format!("{m} not allowed: send a POST or PUT body"),
                ));
            }
            Ok(())
        }
        Framing::Grpc => {
            if !is_grpc {
                return Err((
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    None,
                    format!("this server speaks gRPC (content-type application/grpc), got {ct:?}; start it with --framing raw:SIZE for plain HTTP/2 bodies"),
                ));
            }
            if m != http::Method::POST {
                return Err((
                    StatusCode::METHOD_NOT_ALLOWED,
                    None,
                    "gRPC requires POST".into(),
                ));
            }
            if !paths.contains(&req.uri().path()) {
                return Err((
                    StatusCode::OK,
                    Some(status::UNIMPLEMENTED),
                    format!(
                        "unknown method {}; this server implements {}",
                        req.uri().path(),
                        paths.join(" and ")
                    ),
                ));
            }
            if let Some(enc) = req
                .headers()
                .get("grpc-encoding")
                .and_then(|v| v.to_str().ok())
            {
                if enc != "identity" {
                    return Err((
                        StatusCode::OK,
                        Some(status::UNIMPLEMENTED),
                        format!("grpc-encoding {enc} is not supported (identity only)"),
                    ));
                }
            }
            Ok(())
        }
    }
}

pub(in crate::server) fn grpc_headers() -> Response<()> {
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header("grpc-accept-encoding", "identity")
        .body(())
        .expect("static response")
}

pub(in crate::server) fn status_trailers(code: u32, msg: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("grpc-status", HeaderValue::from(code));
    if !msg.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&grpc::encode_message(msg)) {
            h.insert("grpc-message", v);
        }
    }
    h
}

/// A trailers-only gRPC response carrying `code`.
pub(super) fn send_status(respond: &mut SendResponse<Bytes>, code: u32, msg: &str) {
    let mut resp = grpc_headers();
    resp.headers_mut().extend(status_trailers(code, msg));
    if let Err(e) = respond.send_response(resp, true) {
        tracing::debug!("sending status {code}: {e}");
    }
}

pub(super) fn send_http_error(respond: &mut SendResponse<Bytes>, code: StatusCode, msg: &str) {
    let resp = Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(())
        .expect("static response");
    match respond.send_response(resp, false) {
        Ok(mut s) => {
            let _ = s.send_data(Bytes::from(format!("{msg}\n")), true);
        }
        Err(e) => tracing::debug!("sending HTTP {code}: {e}"),
    }
}

/// Whether the request speaks gRPC (then it is answered in gRPC, also
/// when `--framing raw` cuts its body into units that are not its messages).
pub(super) fn is_grpc<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// Answers a finished Ingest RPC; an error means the client never gets the
/// reply (it reset the stream, or the connection is gone).
pub(super) fn send_reply(
    respond: &mut SendResponse<Bytes>,
    reply: &pb::IngestReply,
    grpc: bool,
) -> Result<(), h2::Error> {
    let (resp, body) = match grpc {
        true => (grpc_headers(), grpc::encode(reply)),
        false => (
            Response::builder()
                .status(StatusCode::OK)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(())
                .expect("static response"),
            Bytes::from(format!(
                "{{\"received\":{},\"completed\":{},\"discarded\":{},\"received_bytes\":{}}}\n",
                reply.received, reply.completed, reply.discarded, reply.received_bytes
            )),
        ),
    };
    respond.send_response(resp, false).and_then(|mut s| {
        s.send_data(body, !grpc)?;
        if grpc {
            s.send_trailers(status_trailers(status::OK, ""))?;
        }
        Ok(())
    })
}
