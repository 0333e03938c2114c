//! `h2probe serve`: the probe server alone.

use super::run::label_of;
use super::{config_part, Finished, Interrupts, OutputOpts, Session, Status};
use crate::config::Dur;
use crate::live::Live;
use crate::server::{self, ServerCtx, ServerOpts};
use h2probe_analysis::meta::RunConfig;
use std::sync::Arc;
use tokio::sync::watch;

/// `h2probe serve`.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeOpts {
    /// Address to listen on, IP:PORT (loopback by default; [::1]:50051 for
    /// IPv6; a host name is not accepted: it could name several addresses),
    /// or a Unix domain socket, unix:PATH or unix:///ABSOLUTE/PATH (a stale
    /// socket file there is replaced; the file is removed at exit)
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "ADDR|unix:PATH", value_parser = crate::server::listen::parse_listen)]
    pub listen: crate::server::listen::ListenAddr,

    /// Stop after this many RPCs have ended (count every stream of every
    /// client); RPCs still open then end as with --for.
    #[arg(long, value_name = "N", value_parser = super::parse_count)]
    pub exit_after: Option<u64>,

    /// Stop after this long. RPCs still open end as on Ctrl-C (UNAVAILABLE,
    /// or drained with --shutdown-drain), but the run is `complete`, not
    /// `interrupted`: its exit code is never 130 (4 when an RPC ended with
    /// a status other than OK).
    #[arg(long = "for", value_name = "DURATION", value_parser = super::parse_for)]
    pub run_for: Option<Dur>,

    #[command(flatten, next_help_heading = "Server")]
    pub server: ServerOpts,

    /// With --tls-cert: require a client certificate issued by a CA of
    /// this PEM file (mutual TLS). A client that shows none, or another, is
    /// refused in its handshake (recorded as `conn_refused`, with the
    /// reason).
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_cert",
        help_heading = "Server"
    )]
    pub client_ca: Option<std::path::PathBuf>,

    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
}

pub async fn serve(mut opts: ServeOpts) -> anyhow::Result<Finished> {
    let interrupts = Interrupts::listen();
    opts.server.client_ca = opts.client_ca.clone();
    opts.output.validate()?;
    let cfg = opts
        .server
        .validate(opts.output.capture_payload, None, None)?;
    let label = opts
        .output
        .label
        .clone()
        .unwrap_or_else(|| format!("serve-{}", label_of(&opts.server)));
    let listener = super::bind_server(&opts.listen).await?;
    let addr = listener.local()?;
    let mut session = Session::open(
        "serve",
        interrupts,
        &opts.output,
        &label,
        Default::default(),
    )?;
    let live = session.live.clone();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (abandon_tx, abandon_rx) = watch::channel(false);
    let sctx = Arc::new(
        ServerCtx::new(
            cfg,
            session.rec.clone(),
            live.clone(),
            Default::default(),
            shutdown_rx,
        )
        .with_abandon(abandon_rx),
    );
    // The address line is machine-readable: scripts wait for it. The run
    // directory on a line of its own keeps the first within 80 columns.
    println!("h2probe: listening on {addr}");
    println!("h2probe: run directory {}", session.dir.display());
    let server_task = tokio::spawn(server::serve(listener, sctx.clone()));
    let status = super::wait_for_stop(
        &mut session.interrupts,
        opts.exit_after,
        || Live::get(&live.rpcs_done),
        opts.run_for.map(|d| d.0),
    )
    .await;
    if status == Status::Interrupted {
        session.interrupts.announce(&format!(
            "finishing RPCs (--shutdown-drain={}) and the trace",
            opts.server.shutdown_drain
        ));
    }
    let _ = shutdown_tx.send(true);
    if let Some(failure) = session.interrupts.failure() {
        // The trace's limit or a full disk: no drain (a flooding peer would
        // go on filling the trace for --drain-timeout); what is open ends
        // now, answered UNAVAILABLE, its ends recorded.
        let _ = sctx.failure.set(failure);
        let _ = abandon_tx.send(true);
    }
    let served = super::finish_or_abandon(server_task, &mut session.interrupts, &abandon_tx).await;
    served?;
    let config = RunConfig {
        server: config_part(&opts.server),
        output: config_part(&opts.output),
        listen: Some(addr.to_string()),
        ..RunConfig::default()
    };
    session
        .finish(config, status, Some(addr.to_string()), opts.output.pcaps())
        .await
}
