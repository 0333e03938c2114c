//! The message each RPC sends: the built-in `h2probe.v1.Item` (the default,
//! byte for byte what the probe always sent), or any message type described
//! by a `.proto` file compiled at start (`--proto`, protox: no protoc),
//! built from a JSON template with the payload, sequence number and
//! scheduled time filled into the fields the user names.

use crate::grpc::{self, pb};
use bytes::Bytes;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value,
};
use std::path::PathBuf;
use std::sync::Arc;

/// `client --proto …`: which message the client sends.
#[derive(clap::Args, Clone, Debug, Default, serde::Serialize)]
#[command(group(clap::ArgGroup::new("described").args(["proto", "reflect"])))]
pub struct MessageOpts {
    /// A .proto file describing the request message (and, if it defines the
    /// --method's service, the method), compiled at start; no protoc needed.
    /// Without it (or --reflect) the client sends the built-in
    /// h2probe.v1.Item.
    #[arg(long, value_name = "FILE")]
    pub proto: Option<PathBuf>,

    /// Describe the --method and its messages by asking the server's
    /// reflection service (grpc.reflection.v1, or v1alpha), instead of
    /// --proto. Asked before the run on a connection of its own, which the
    /// trace does not hold; meta.json names the files received.
    #[arg(long, conflicts_with_all = ["proto", "import_path", "message"])]
    pub reflect: bool,

    /// A directory searched for the --proto file and its imports
    /// (repeatable). [default: the --proto file's own directory]
    #[arg(long, value_name = "DIR", requires = "proto")]
    pub import_path: Vec<PathBuf>,

    /// The request message type, fully qualified (pkg.Type). [default: the
    /// input type of --method, when --proto defines its service]
    #[arg(long, value_name = "TYPE", requires = "proto")]
    pub message: Option<String>,

    /// The request as protobuf JSON: every message sent is this template
    /// with --payload-field, --seq-field and --time-field filled in.
    #[arg(long, value_name = "JSON", requires = "described")]
    pub message_json: Option<String>,

    /// A `bytes` field of the message, set to --payload bytes in every
    /// message (without it, --payload is not used: messages are the template).
    #[arg(long, value_name = "NAME", requires = "described")]
    pub payload_field: Option<String>,

    /// An integer field set to each message's sequence number (0, 1, 2, …
    /// per RPC; a 32-bit field wraps).
    #[arg(long, value_name = "NAME", requires = "described")]
    pub seq_field: Option<String>,

    /// A 64-bit integer field set to each message's scheduled send time
    /// (CLOCK_MONOTONIC nanoseconds, the trace's clock).
    #[arg(long, value_name = "NAME", requires = "described")]
    pub time_field: Option<String>,
}

/// How messages are encoded and replies read.
#[derive(Clone, Debug, Default)]
pub enum Codec {
    /// `h2probe.v1.Item` / `IngestReply`, generated at build time.
    #[default]
    Ingest,
    /// A message type known only at run time.
    Dynamic(Arc<Template>),
}

/// A dynamic message: the template and the fields filled per message.
#[derive(Debug)]
pub struct Template {
    base: DynamicMessage,
    payload: Option<FieldDescriptor>,
    seq: Option<FieldDescriptor>,
    time: Option<FieldDescriptor>,
    /// The method's reply type, when the .proto defines the method.
    reply: Option<MessageDescriptor>,
}

/// What the method streams, when the .proto says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Streaming {
    /// The server streams replies (bidi): they are read while sending, so a
    /// server that answers each message never waits on the client's window.
    pub replies: bool,
    /// The method takes one request message (unary or server-streaming):
    /// only `--rpc unary` calls it.
    pub one_request: bool,
}

impl Streaming {
    /// What kind of method takes one request, as an error names it.
    pub fn one_request_kind(self) -> &'static str {
        if self.replies {
            "server-streaming"
        } else {
            "unary"
        }
    }
}

/// A reply as the client understood it.
pub enum ReplyView {
    /// `IngestReply`'s counts.
    Ingest(super::Reply),
    /// A dynamic reply, as protobuf JSON.
    Json(String),
    /// Not decodable with what the client knows.
    Opaque,
}

/// One message, built.
enum Built {
    Ingest(pb::Item),
    Dynamic(DynamicMessage),
}

impl Codec {
    fn message(&self, seq: u64, scheduled: u64, payload: &Bytes) -> Built {
        match self {
            Codec::Ingest => Built::Ingest(pb::Item {
                seq,
                scheduled_ns: scheduled,
                payload: payload.clone(),
            }),
            Codec::Dynamic(t) => Built::Dynamic(t.fill(seq, scheduled, payload)),
        }
    }

    /// The encoded size of message `seq` (without the gRPC prefix).
    pub fn message_len(&self, seq: u64, scheduled: u64, payload: &Bytes) -> usize {
        match self.message(seq, scheduled, payload) {
            Built::Ingest(m) => prost::Message::encoded_len(&m),
            Built::Dynamic(m) => prost::Message::encoded_len(&m),
        }
    }

    /// Message `seq`, framed for the wire.
    pub fn framed(&self, seq: u64, scheduled: u64, payload: &Bytes) -> Bytes {
        match self.message(seq, scheduled, payload) {
            Built::Ingest(m) => grpc::encode(&m),
            Built::Dynamic(m) => grpc::encode(&m),
        }
    }

    /// Reads one reply message.
    pub fn reply(&self, data: Bytes) -> ReplyView {
        match self {
            Codec::Ingest => match <pb::IngestReply as prost::Message>::decode(data) {
                Ok(r) => ReplyView::Ingest(super::Reply {
                    received: r.received,
                    completed: r.completed,
                    discarded: r.discarded,
                }),
                Err(_) => ReplyView::Opaque,
            },
            Codec::Dynamic(t) => {
                let Some(desc) = &t.reply else {
                    return ReplyView::Opaque;
                };
                match DynamicMessage::decode(desc.clone(), data) {
                    Ok(m) => serde_json::to_string(&m).map_or(ReplyView::Opaque, ReplyView::Json),
                    Err(_) => ReplyView::Opaque,
                }
            }
        }
    }
}

impl Template {
    fn fill(&self, seq: u64, scheduled: u64, payload: &Bytes) -> DynamicMessage {
        let mut m = self.base.clone();
        if let Some(f) = &self.payload {
            m.set_field(f, Value::Bytes(payload.clone()));
        }
        if let Some(f) = &self.seq {
            m.set_field(f, int_value(f.kind(), seq));
        }
        if let Some(f) = &self.time {
            m.set_field(f, int_value(f.kind(), scheduled));
        }
        m
    }
}

/// `n` as a value of an integer field of kind `k` (32-bit kinds wrap).
fn int_value(k: Kind, n: u64) -> Value {
    match k {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(n as i32),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(n as u32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(n as i64),
        _ => Value::U64(n),
    }
}

fn usage(msg: String) -> anyhow::Error {
    anyhow::Error::new(crate::config::UsageError(msg))
}

/// At most this many names are listed in an error.
const LISTED: usize = 12;

fn listing<I: Iterator<Item = String>>(names: I) -> String {
    let names: Vec<String> = names.collect();
    if names.is_empty() {
        return "none".into();
    }
    let more = names.len().saturating_sub(LISTED);
    let mut s = names
        .into_iter()
        .take(LISTED)
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

/// `/pkg.Service/Method` → (`pkg.Service`, `Method`).
pub fn split_method(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

impl MessageOpts {
    /// Compiles the .proto (if any) and builds the codec for `method`.
    /// Every mistake is a usage error (exit 2) naming the flag.
    pub fn codec(&self, method: &str) -> anyhow::Result<(Codec, Streaming)> {
        let Some(proto) = &self.proto else {
            return Ok((Codec::Ingest, Streaming::default()));
        };
        let pool = compile(proto, &self.import_path)?;
        let file = proto.display().to_string();
        self.codec_of(&pool, method, (&file, &format!("--proto {file}")))
    }

    /// The codec for `method` from a schema already in hand: `source` names
    /// it in errors, as a place ("svc.proto") and as a subject ("--proto
    /// svc.proto", "the server's reflection").
    pub fn codec_of(
        &self,
        pool: &DescriptorPool,
        method: &str,
        source: (&str, &str),
    ) -> anyhow::Result<(Codec, Streaming)> {
        let (within, subject) = source;
        let mut reply = None;
        let mut streaming = Streaming::default();
        let mut message = self.message.clone();
        let (service, name) = split_method(method).ok_or_else(|| {
            usage(format!(
                "--method {method:?} is not a gRPC method path: it must be /package.Service/Method"
            ))
        })?;
        if let Some(svc) = pool.get_service_by_name(service) {
            let m = svc.methods().find(|m| m.name() == name).ok_or_else(|| {
                usage(format!(
                    "--method {method}: service {service} in {within} has no method {name} (its methods: {})",
                    listing(svc.methods().map(|m| m.name().to_string()))
                ))
            })?;
            streaming.replies = m.is_server_streaming();
            streaming.one_request = !m.is_client_streaming();
            let input = m.input().full_name().to_string();
            if let Some(given) = &message {
                crate::refuse_unless!(
                    *given == input,
                    "--message {given} is not what {method} takes ({input}); leave --message out"
                );
            }
            message = Some(input);
            reply = Some(m.output());
        }
        let message = message.ok_or_else(|| {
            // --message cannot stand in for a reflection's missing service.
            let instead = if self.reflect {
                "describe the method with --proto FILE"
            } else if method == crate::grpc::INGEST_PATH {
                // No --method: the default is h2probe's own.
                "give the method to call with --method /package.Service/Method, \
                 or the request type with --message"
            } else {
                "give the request type with --message"
            };
            let default = if method == crate::grpc::INGEST_PATH {
                " (the default --method's)"
            } else {
                ""
            };
            usage(format!(
                "{subject} does not define service {service}{default}: {instead} (services it defines: {})",
                listing(pool.services().map(|s| s.full_name().to_string()))
            ))
        })?;
        let desc = pool.get_message_by_name(&message).ok_or_else(|| {
            usage(format!(
                "--message {message}: no such message in {within} (messages: {})",
                listing(pool.all_messages().map(|m| m.full_name().to_string()))
            ))
        })?;
        let base = match &self.message_json {
            None => DynamicMessage::new(desc.clone()),
            Some(json) => {
                let mut de = serde_json::Deserializer::from_str(json);
                let m = DynamicMessage::deserialize(desc.clone(), &mut de)
                    .and_then(|m| de.end().map(|()| m))
                    .map_err(|e| usage(format!("--message-json is not a valid {message}: {e}")))?;
                m
            }
        };
        let field = |flag: &str, name: &Option<String>, ok: &dyn Fn(Kind) -> bool, want: &str| {
            let Some(name) = name else {
                return Ok(None);
            };
            let f = desc.get_field_by_name(name).ok_or_else(|| {
                usage(format!(
                    "{flag} {name}: {message} has no such field (its fields: {})",
                    listing(desc.fields().map(|f| f.name().to_string()))
                ))
            })?;
            crate::refuse_unless!(
                !f.is_list() && !f.is_map() && ok(f.kind()),
                "{flag} {name}: the field is {}{:?}, it must be {want}",
                if f.is_list() { "repeated " } else { "" },
                f.kind()
            );
            Ok::<_, anyhow::Error>(Some(f))
        };
        let payload = field(
            "--payload-field",
            &self.payload_field,
            &|k| matches!(k, Kind::Bytes),
            "bytes",
        )?;
        let is_int = |k: Kind| {
            matches!(
                k,
                Kind::Int32
                    | Kind::Sint32
                    | Kind::Sfixed32
                    | Kind::Uint32
                    | Kind::Fixed32
                    | Kind::Int64
                    | Kind::Sint64
                    | Kind::Sfixed64
                    | Kind::Uint64
                    | Kind::Fixed64
            )
        };
        let seq = field("--seq-field", &self.seq_field, &is_int, "an integer")?;
        let time = field(
            "--time-field",
            &self.time_field,
            &|k| {
                matches!(
                    k,
                    Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64
                )
            },
            "a 64-bit integer (nanoseconds)",
        )?;
        let named: Vec<u32> = [&payload, &seq, &time]
            .into_iter()
            .flatten()
            .map(|f| f.number())
            .collect();
        for (i, n) in named.iter().enumerate() {
            crate::refuse_unless!(
                !named[..i].contains(n),
                "--payload-field, --seq-field and --time-field must name different fields"
            );
        }
        Ok((
            Codec::Dynamic(Arc::new(Template {
                base,
                payload,
                seq,
                time,
                reply,
            })),
            streaming,
        ))
    }
}

/// Compiles `proto` (and its imports) in process.
fn compile(proto: &std::path::Path, import_path: &[PathBuf]) -> anyhow::Result<DescriptorPool> {
    crate::refuse_unless!(proto.is_file(), "--proto {}: no such file", proto.display());
    let dirs: Vec<PathBuf> = if import_path.is_empty() {
        vec![proto
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from)]
    } else {
        import_path.to_vec()
    };
    let compiled = protox::Compiler::new(&dirs)
        .and_then(|mut c| {
            c.include_imports(true);
            c.open_file(proto)?;
            Ok(c)
        })
        .map_err(|e| usage(format!("--proto {}: {e}", proto.display())))?;
    Ok(compiled.descriptor_pool())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_proto(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("h2probe-msg-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("svc.proto");
        std::fs::write(&p, text).unwrap();
        p
    }

    const PROTO: &str = r#"
        syntax = "proto3";
        package demo.v2;
        message Chunk { string tag = 1; bytes blob = 2; uint32 n = 3; int64 at = 4; repeated bytes many = 5; }
        message Ack { uint64 count = 1; }
        service Sink {
          rpc Push(stream Chunk) returns (Ack);
          rpc Echo(stream Chunk) returns (stream Ack);
          rpc One(Chunk) returns (Ack);
        }
    "#;

    fn opts(p: &std::path::Path) -> MessageOpts {
        MessageOpts {
            proto: Some(p.to_path_buf()),
            message_json: Some(r#"{"tag":"x"}"#.into()),
            payload_field: Some("blob".into()),
            seq_field: Some("n".into()),
            time_field: Some("at".into()),
            ..Default::default()
        }
    }

    /// A reflection that does not describe the method's service: the
    /// advice is --proto, not --message (which --reflect refuses).
    #[test]
    fn a_reflection_lacking_the_service_advises_proto() {
        let pool = compile(&write_proto("reflect", PROTO), &[]).unwrap();
        let opts = MessageOpts {
            reflect: true,
            ..Default::default()
        };
        let reflection = ("the server's reflection", "the server's reflection");
        let e = opts
            .codec_of(&pool, "/demo.v2.Missing/Put", reflection)
            .unwrap_err()
            .to_string();
        assert!(e.contains("describe the method with --proto FILE"), "{e}");
        assert!(!e.contains("--message"), "{e}");
    }

    #[test]
    fn a_dynamic_message_matches_an_independent_encoding() {
        let p = write_proto("ok", PROTO);
        let (codec, streaming) = opts(&p).codec("/demo.v2.Sink/Push").unwrap();
        assert!(!streaming.replies);
        let payload = Bytes::from_static(&[9; 40]);
        let framed = codec.framed(7, 1234, &payload);
        // Hand-encoded: tag=1 "x", blob=2 (40 bytes), n=3 varint 7, at=4 varint 1234.
        let mut body = vec![0x0a, 1, b'x', 0x12, 40];
        body.extend([9u8; 40]);
        body.extend([0x18, 7, 0x20, 0xd2, 0x09]);
        let mut want = vec![0, 0, 0, 0, body.len() as u8];
        want.extend(&body);
        assert_eq!(&framed[..], &want[..]);
        assert_eq!(codec.message_len(7, 1234, &payload), body.len());
        assert!(!streaming.one_request);
        let (_, bidi) = opts(&p).codec("/demo.v2.Sink/Echo").unwrap();
        assert!(bidi.replies && !bidi.one_request);
        let (_, unary) = opts(&p).codec("/demo.v2.Sink/One").unwrap();
        assert!(unary.one_request && !unary.replies);
        assert_eq!(unary.one_request_kind(), "unary");
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_builtin_message_is_unchanged() {
        let payload = Bytes::from_static(&[1, 2, 3]);
        let item = pb::Item {
            seq: 5,
            scheduled_ns: 99,
            payload: payload.clone(),
        };
        assert_eq!(Codec::Ingest.framed(5, 99, &payload), grpc::encode(&item));
    }

    #[test]
    fn mistakes_are_usage_errors_that_name_the_flag() {
        let p = write_proto("bad", PROTO);
        let cases: Vec<(MessageOpts, &str, &str)> = vec![
            (opts(&p), "/demo.v2.Sink/Nope", "has no method Nope"),
            (opts(&p), "not-a-path", "not a gRPC method path"),
            (
                MessageOpts { payload_field: Some("tag".into()), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "--payload-field tag: the field is string, it must be bytes",
            ),
            (
                MessageOpts { payload_field: Some("many".into()), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "repeated",
            ),
            (
                MessageOpts { seq_field: Some("nope".into()), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "--seq-field nope: demo.v2.Chunk has no such field (its fields: tag, blob, n, at, many)",
            ),
            (
                MessageOpts { time_field: Some("n".into()), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "--time-field n: the field is uint32, it must be a 64-bit integer",
            ),
            (
                MessageOpts { message: Some("demo.v2.Ack".into()), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "is not what",
            ),
            (opts(&p), "/other.Svc/M", "give the request type with --message"),
            (
                MessageOpts { message: Some("demo.v2.Nope".into()), ..opts(&p) },
                "/other.Svc/M",
                "--message demo.v2.Nope: no such message",
            ),
            (
                MessageOpts { message_json: Some(r#"{"tag": 5}"#.into()), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "--message-json is not a valid demo.v2.Chunk",
            ),
            (
                MessageOpts { seq_field: Some("blob".into()), payload_field: None, time_field: None, ..opts(&p) },
                "/demo.v2.Sink/Push",
                "--seq-field blob",
            ),
            (
                MessageOpts { proto: Some(p.with_file_name("missing.proto")), ..opts(&p) },
                "/demo.v2.Sink/Push",
                "no such file",
            ),
        ];
        for (o, method, want) in cases {
            let e = o.codec(method).unwrap_err();
            assert!(
                e.downcast_ref::<crate::config::UsageError>().is_some(),
                "{e}"
            );
            assert!(
                e.to_string().contains(want),
                "{method}: {e} (wanted {want:?})"
            );
        }
        let broken = write_proto("syntax", "syntax = \"proto3\"; message {");
        let e = opts(&broken).codec("/a.B/C").unwrap_err();
        assert!(e.to_string().starts_with("--proto "), "{e}");
        // A foreign service: the message is named explicitly.
        let ok = MessageOpts {
            message: Some("demo.v2.Chunk".into()),
            ..opts(&p)
        };
        assert!(ok.codec("/other.Svc/M").is_ok());
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
        std::fs::remove_dir_all(broken.parent().unwrap()).unwrap();
    }
}
