//! The answer: response headers, the reply messages and the trailers.

use super::message::ReplyView;
use super::*;

/// A response that ended with a gRPC status.
pub(super) struct Answered {
    pub code: u32,
    pub message: String,
    /// `IngestReply`'s counts (the built-in method).
    pub reply: Option<Reply>,
    /// The last reply as protobuf JSON (a method described by `--proto`).
    pub reply_json: Option<String>,
}

pub(super) type Answer = Result<Answered, (u32, String)>;

/// The gRPC status in `h` (headers of a trailers-only response, or
/// trailers), with its message; `None` without a `grpc-status`. One that is
/// not a number is INTERNAL, and says what it was (it read "ended without
/// grpc-status").
pub(super) fn grpc_status(h: &http::HeaderMap) -> Option<(u32, String)> {
    let raw = h.get("grpc-status")?;
    let Some(code) = raw.to_str().ok().and_then(|v| v.parse().ok()) else {
        return Some((
            status::INTERNAL,
            format!(
                "grpc-status {:?} is not a status code",
                String::from_utf8_lossy(raw.as_bytes())
            ),
        ));
    };
    let msg = h
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(grpc::decode_message)
        .unwrap_or_default();
    Some((code, msg))
}

/// Reads response headers, the reply messages and the trailers.
/// `one_reply`: the call's response is a single message (client-streaming),
/// so an OK status with none or several, like a reply cut short or flagged
/// compressed with no `grpc-encoding`, is a malformed answer: INTERNAL, as
/// gRPC's own clients say (these read OK).
pub(super) async fn read_answer(
    resp: h2::client::ResponseFuture,
    codec: Codec,
    one_reply: bool,
) -> Answer {
    let resp = resp.await.map_err(|e| {
        (
            status::of_h2_error(&e),
            format!("no response: {}", super::h2_error_text(&e)),
        )
    })?;
    let encoded = resp.headers().contains_key("grpc-encoding");
    let done = |(code, message): (u32, String), reply, reply_json| Answered {
        code,
        message,
        reply,
        reply_json,
    };
    if resp.status() != http::StatusCode::OK {
        return Ok(done(
            (
                status::of_http(resp.status()),
                format!("HTTP status {}", resp.status()),
            ),
            None,
            None,
        ));
    }
    if let Some(s) = grpc_status(resp.headers()) {
        // Trailers-only: no reply.
        return Ok(done(over_malformed(s, miscount(one_reply, 0)), None, None));
    }
    let mut body = resp.into_body();
    let mut deframer = grpc::Deframer::new(1 << 20);
    let (mut reply, mut reply_json) = (None, None);
    // A reply over the deframer's limit ends decoding (the rest of the body
    // is still read and released, never buffered).
    let mut decoding = true;
    let mut replies = 0u64;
    let mut malformed: Option<String> = None;
    while let Some(chunk) = body.data().await {
        let chunk =
            chunk.map_err(|e| (status::of_h2_error(&e), format!("reading the reply: {e}")))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if !decoding {
            continue;
        }
        deframer.push_bytes(chunk);
        loop {
            match deframer.next_message() {
                Ok(Some(m)) => {
                    replies += 1;
                    if m.compressed && !encoded {
                        malformed.get_or_insert_with(|| {
                            format!("reply {replies} is flagged compressed, with no grpc-encoding")
                        });
                    }
                    match codec.reply(m.data()) {
                        ReplyView::Ingest(r) => reply = Some(r),
                        ReplyView::Json(j) => reply_json = Some(j),
                        ReplyView::Opaque => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    if let grpc::DeframeError::BadFlag { .. } = e {
                        malformed.get_or_insert_with(|| format!("after reply {replies}: {e}"));
                    }
                    decoding = false;
                    deframer = grpc::Deframer::new(0);
                    break;
                }
            }
        }
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| (status::of_h2_error(&e), format!("reading trailers: {e}")))?;
    let s = trailers.as_ref().and_then(grpc_status).unwrap_or((
        status::INTERNAL,
        "response ended without grpc-status".into(),
    ));
    if decoding && deframer.pending() > 0 {
        malformed.get_or_insert_with(|| {
            format!(
                "the reply body ended inside a message ({} bytes of it)",
                deframer.pending()
            )
        });
    }
    if decoding {
        malformed = malformed.or_else(|| miscount(one_reply, replies));
    }
    Ok(done(over_malformed(s, malformed), reply, reply_json))
}

/// A call answered with one message that got `replies`: what is wrong, if so.
fn miscount(one_reply: bool, replies: u64) -> Option<String> {
    (one_reply && replies != 1)
        .then(|| format!("{replies} replies to a call that answers with one"))
}

/// An OK status over a malformed answer is INTERNAL, saying why.
fn over_malformed(s: (u32, String), malformed: Option<String>) -> (u32, String) {
    match (s.0, malformed) {
        (status::OK, Some(why)) => (status::INTERNAL, format!("status OK, but {why}")),
        _ => s,
    }
}
