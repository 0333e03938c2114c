//! `h2probe client`: the probe client alone, against any gRPC server (h2c or
//! TLS), calling any client-streaming or bidirectional method.

use super::{config_part, Finished, Interrupts, OutputOpts, Session, Status};
use crate::client::{self, Call, ClientCtx, ClientOpts, MessageOpts, RpcOutcome};
use crate::client::{Target, TargetOpts};
use h2probe_analysis::meta::RunConfig;
use std::sync::Arc;
use tokio::sync::watch;

/// `h2probe client`.
#[derive(clap::Args, Clone, Debug)]
pub struct ClientCmdOpts {
    #[command(flatten, next_help_heading = "Server to call")]
    pub target: TargetOpts,
    #[command(flatten, next_help_heading = "Client")]
    pub client: ClientOpts,
    #[command(flatten, next_help_heading = "Message (any method, from a .proto)")]
    pub message: MessageOpts,
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
    /// The argument ids the command line gave (as `RunOpts::given`).
    #[arg(skip)]
    pub given: Vec<String>,
}

pub async fn client_cmd(opts: ClientCmdOpts) -> anyhow::Result<(Finished, Vec<RpcOutcome>)> {
    let mut interrupts = Interrupts::listen();
    opts.client.validate()?;
    opts.output.validate()?;
    super::refuse_exchange_only(&opts.client.exchange_flags_given(&opts.given))?;
    let metadata = client::target::parse_metadata(&opts.target.headers)?;
    crate::refuse_unless!(
        opts.client.rpc != crate::overload::RpcKind::Exchange
            || (opts.message.proto.is_none() && !opts.message.reflect),
        "--rpc exchange calls h2probe's own Exchange method (its attempts carry ids and deadlines); \
         --proto and --reflect describe a method of yours: use one or the other"
    );
    // A described message carries --payload's bytes only in the field
    // --payload-field names: without it the flag did nothing, silently.
    crate::refuse_unless!(
        (opts.message.proto.is_none() && !opts.message.reflect)
            || opts.message.payload_field.is_some()
            || !opts.given.iter().any(|g| g == "payload"),
        "--payload has nowhere to go: with --proto or --reflect each message is the \
         --message-json template, and --payload-field NAME (a bytes field) is what carries \
         --payload's {} bytes; give it, or leave --payload out",
        opts.client.payload
    );
    let method = opts.client.call_path();
    // With --reflect the schema comes from the server, once it is reached.
    let from_proto = if opts.message.reflect {
        crate::refuse_unless!(
            opts.client.path.is_some(),
            "--reflect describes the --method you call: give --method /package.Service/Method \
             (h2probe's own Ingest needs no description)"
        );
        crate::refuse_unless!(
            client::message::split_method(method).is_some(),
            "--method {method:?} is not a gRPC method path: it must be /package.Service/Method"
        );
        None
    } else {
        Some(opts.message.codec(method)?)
    };
    if opts.target.insecure {
        crate::say!(
            "WARNING: --insecure: the server's TLS certificate is NOT verified \
             (anyone on the path could impersonate {}); recorded in meta.json",
            opts.target.connect
        );
    }
    let target = Target::resolve(&opts.target).await?;
    let (codec, streaming, reflected) = match from_proto {
        Some((codec, streaming)) => (codec, streaming, None),
        None => {
            let (service, _) = client::message::split_method(method).expect("checked above");
            // Before the session: an interrupt has nothing to finish yet.
            let described = tokio::select! {
                r = client::reflect::describe(&target, service, &metadata) => r?,
                _ = interrupts.next() => {
                    crate::say!("interrupted while asking the server's reflection service");
                    std::process::exit(130)
                }
            };
            let (codec, streaming) = opts.message.codec_of(
                &described.pool,
                method,
                ("the server's reflection", "the server's reflection"),
            )?;
            (codec, streaming, Some(described))
        }
    };
    crate::refuse_unless!(
        !streaming.one_request || opts.client.rpc == crate::overload::RpcKind::Unary,
        "--method {method} is {}: it takes one message per call, and --rpc {} sends a stream of them \
         on one; give --rpc unary (one call per message, --streams calls at once)",
        streaming.one_request_kind(),
        opts.client.rpc.as_str()
    );
    let label = opts.output.label.clone().unwrap_or_else(|| "client".into());
    let plan = super::progress::Plan {
        messages: (opts.client.total_rate() * opts.client.duration.0.as_secs_f64()) as u64,
        offer_for: opts.client.duration.0,
    };
    let mut session = Session::open("client", interrupts, &opts.output, &label, plan)?;
    let (interrupt_tx, interrupt_rx) = watch::channel(false);
    let cctx = Arc::new(ClientCtx {
        graceful: None,
        opts: opts.client.clone(),
        target,
        call: Call {
            codec,
            streaming,
            metadata,
        },
        capture: opts.output.capture_payload,
        rec: session.rec.clone(),
        live: session.live.clone(),
        conn_ids: Default::default(),
        interrupt: interrupt_rx,
        stopped_for: Default::default(),
        stream_limit_said: Default::default(),
        replaced: Default::default(),
    });
    let run = client::run(cctx.clone());
    tokio::pin!(run);
    // Exchange against a server that WAITs for a slot: it stops reading a
    // stream for up to an original's deadline; that is its policy, not a
    // stall (the server's own --service-time is not known here).
    let stall_timeout = opts.client.with_link_allowance(
        if opts.client.rpc == crate::overload::RpcKind::Exchange {
            opts.client
                .stall_timeout
                .0
                .max(opts.client.original_deadline.0 + std::time::Duration::from_secs(1))
        } else {
            opts.client.stall_timeout.0
        },
        16_384,
    );
    let mut stall = Box::pin(super::run::watch_for_stall(
        session.live.clone(),
        session.rec.clone(),
        stall_timeout,
        None,
        if opts.client.rpc == crate::overload::RpcKind::Unary {
            super::run::Progress::Calls
        } else {
            super::run::Progress::Client
        },
    ));
    let mut status = Status::Complete;
    let outcomes = tokio::select! {
        r = &mut run => r,
        _ = stall.as_mut() => {
            crate::say!("stalled: the client could send nothing for {} with messages pending; ending the run (the stall event and the analysis say what it waited on)",
                crate::config::Dur(stall_timeout)
            );
            let _ = interrupt_tx.send(true);
            // Still listening: Ctrl-C while the run ends abandons it.
            tokio::select! {
                r = &mut run => r,
                _ = session.interrupts.next() => {
                    status = Status::Interrupted;
                    crate::say!("interrupted while the stalled run ended; abandoning open RPCs");
                    Ok(vec![])
                }
            }
        }
        _ = session.interrupts.next() => {
            status = Status::Interrupted;
            session.interrupts.announce("stopping the client, then finishing the trace");
            if let Some(f) = session.interrupts.writer_failure() {
                let _ = cctx.stopped_for.set(f.cause);
            }
            let _ = interrupt_tx.send(true);
            tokio::select! {
                r = &mut run => r,
                _ = session.interrupts.next() => {
                    crate::say!("second interrupt; abandoning open RPCs");
                    Ok(vec![])
                }
            }
        }
    };
    drop(stall);
    let mut client = client_config(&opts.client, &opts.target, &opts.message);
    if opts.target.tls {
        let verification = match (&opts.target.ca, opts.target.insecure) {
            (_, true) => "NONE (--insecure): the server's certificate was not verified".to_string(),
            (Some(ca), false) => format!("against --ca {}", ca.display()),
            (None, false) => "against the system's roots".to_string(),
        };
        client.insert("tls_verification".into(), verification.into());
    }
    if let Some(d) = &reflected {
        client.insert(
            "reflection".into(),
            serde_json::json!({ "service": d.service, "files": d.files }),
        );
    }
    let config = RunConfig {
        client: Some(client),
        output: config_part(&opts.output),
        connect: Some(opts.target.connect.clone()),
        ..RunConfig::default()
    };
    // A client that could not connect (or stopped on another error) says so
    // in meta.json, not `complete`.
    if let Err(e) = &outcomes {
        status = Status::Failed(format!("{e:#}"));
    }
    let dir = session.dir.clone();
    let finished = session
        .finish(config, status, None, opts.output.pcaps())
        .await;
    let outcomes = outcomes.map_err(|e| {
        anyhow::anyhow!(
            "{e:#}; the run directory {} records the failure (give --force to reuse it)",
            dir.display()
        )
    })?;
    Ok((finished?, outcomes))
}

/// meta.json's `client` part of a `client` run: its options, with the
/// target and message groups nested.
pub(crate) fn client_config(
    client: &ClientOpts,
    target: &TargetOpts,
    message: &MessageOpts,
) -> serde_json::Map<String, serde_json::Value> {
    let mut part = client.config_part().unwrap_or_default();
    for (k, group) in [
        ("target", config_part(target)),
        ("message", config_part(message)),
    ] {
        part.insert(k.into(), group.map_or(serde_json::Value::Null, Into::into));
    }
    part
}

/// [`client_config`] of the command's defaults (what `client` alone means).
pub(crate) fn default_client_config() -> serde_json::Map<String, serde_json::Value> {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct W {
        #[command(flatten)]
        target: TargetOpts,
        #[command(flatten)]
        message: MessageOpts,
    }
    let w = W::parse_from(["x"]);
    client_config(&ClientOpts::default(), &w.target, &w.message)
}
