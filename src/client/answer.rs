//! The answer: response headers, the reply message and the trailers.

use super::*;

pub(super) type Answer = Result<(u32, String, Option<Reply>), (u32, String)>;

/// Reads response headers, the reply message and the trailers.
pub(super) async fn read_answer(resp: h2::client::ResponseFuture) -> Answer {
    let resp = resp
        .await
        .map_err(|e| (status::UNAVAILABLE, format!("no response: {e}")))?;
    let grpc_status = |h: &http::HeaderMap| -> Option<(u32, String)> {
        let code = h.get("grpc-status")?.to_str().ok()?.parse().ok()?;
        let msg = h
            .get("grpc-message")
            .and_then(|v| v.to_str().ok())
            .map(grpc::decode_message)
            .unwrap_or_default();
        Some((code, msg))
    };
    if resp.status() != http::StatusCode::OK {
        return Ok((
            status::UNKNOWN,
            format!("HTTP status {}", resp.status()),
            None,
        ));
    }
    if let Some((code, msg)) = grpc_status(resp.headers()) {
        return Ok((code, msg, None)); // trailers-only
    }
    let mut body = resp.into_body();
    let mut deframer = grpc::Deframer::new(1 << 20);
    let mut reply = None;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| (status::UNAVAILABLE, format!("reading the reply: {e}")))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        deframer.push(&chunk);
        while let Ok(Some(m)) = deframer.next_message() {
            if let Ok(r) = <pb::IngestReply as prost::Message>::decode(m.data()) {
                reply = Some(Reply {
                    received: r.received,
                    completed: r.completed,
                    discarded: r.discarded,
                });
            }
        }
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| (status::UNAVAILABLE, format!("reading trailers: {e}")))?;
    match trailers.as_ref().and_then(grpc_status) {
        Some((code, msg)) => Ok((code, msg, reply)),
        None => Ok((
            status::INTERNAL,
            "response ended without grpc-status".into(),
            reply,
        )),
    }
}
