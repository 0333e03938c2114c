//! `h2probe client`: the probe client alone, against any h2c gRPC server.

use super::{config_part, Finished, Interrupts, OutputOpts, Session, Status};
use crate::client::{self, ClientCtx, ClientOpts, RpcOutcome};
use h2probe_analysis::meta::RunConfig;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use tokio::sync::watch;

/// `h2probe client`.
#[derive(clap::Args, Clone, Debug)]
pub struct ClientCmdOpts {
    /// Server to connect to (h2c, prior knowledge).
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "ADDR")]
    pub connect: std::net::SocketAddr,
    #[command(flatten, next_help_heading = "Client")]
    pub client: ClientOpts,
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
}

pub async fn client_cmd(opts: ClientCmdOpts) -> anyhow::Result<(Finished, Vec<RpcOutcome>)> {
    let interrupts = Interrupts::listen();
    opts.client.validate()?;
    opts.output.validate()?;
    let label = opts.output.label.clone().unwrap_or_else(|| "client".into());
    let planned = (opts.client.total_rate() * opts.client.duration.0.as_secs_f64()) as u64;
    let mut session = Session::open("client", interrupts, &opts.output, &label, planned)?;
    let (interrupt_tx, interrupt_rx) = watch::channel(false);
    let cctx = Arc::new(ClientCtx {
        opts: opts.client.clone(),
        target: opts.connect,
        capture: opts.output.capture_payload,
        rec: session.rec.clone(),
        live: session.live.clone(),
        conn_ids: Arc::new(AtomicU32::new(0)),
        interrupt: interrupt_rx,
    });
    let run = client::run(cctx);
    tokio::pin!(run);
    let mut stall = Box::pin(super::run::watch_for_stall(
        session.live.clone(),
        session.rec.clone(),
        opts.client.stall_timeout.0,
        0,
        super::run::Progress::Client,
    ));
    let mut status = Status::Complete;
    let outcomes = tokio::select! {
        r = &mut run => r,
        _ = stall.as_mut() => {
            eprintln!(
                "h2probe: stalled: the client could send nothing for {} with messages pending (no credit from the server); ending the run (see the stall event)",
                opts.client.stall_timeout
            );
            let _ = interrupt_tx.send(true);
            run.await
        }
        _ = session.interrupts.next() => {
            status = Status::Interrupted;
            session.interrupts.announce("stopping the client, then finishing the trace");
            let _ = interrupt_tx.send(true);
            tokio::select! {
                r = &mut run => r,
                _ = session.interrupts.next() => {
                    eprintln!("h2probe: second interrupt; abandoning open RPCs");
                    Ok(vec![])
                }
            }
        }
    };
    drop(stall);
    let config = RunConfig {
        client: config_part(&opts.client),
        output: config_part(&opts.output),
        connect: Some(opts.connect.to_string()),
        ..RunConfig::default()
    };
    let finished = session
        .finish(config, status, None, !opts.output.no_pcap)
        .await;
    let outcomes = outcomes?;
    Ok((finished?, outcomes))
}
