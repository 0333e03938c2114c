//! `h2probe relay`: a transparent tap between a real client and a real
//! server (see [`crate::relay`]), written as a normal run directory.

use super::{config_part, Finished, Interrupts, OutputOpts, Session, Status};
use crate::config::{Dur, Size};
use crate::link::Shape;
use crate::relay::{self, LinkSide, RelayConfig, RelayCtx};
use crate::server::listen::ListenAddr;
use anyhow::Context as _;
use h2probe_analysis::meta::RunConfig;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// `h2probe relay`.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct RelayOpts {
    /// Address to accept h2c (prior-knowledge) connections on: IP:PORT, or
    /// a Unix domain socket, unix:PATH (as `serve --listen`).
    #[arg(long, default_value = "127.0.0.1:50052", value_name = "ADDR|unix:PATH", value_parser = crate::server::listen::parse_listen)]
    pub listen: ListenAddr,

    /// The server every accepted connection is relayed to, HOST:PORT (a
    /// name is resolved for each new connection; h2c, no TLS), or a Unix
    /// domain socket, unix:PATH.
    #[arg(long, value_name = "HOST:PORT|unix:PATH")]
    pub upstream: String,

    /// One-way delay added each way on the leg(s) chosen by --link-side
    /// (user space). The taps sit at the relay's end of each leg, so the
    /// delay is outside both: relay-added latency excludes it.
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub link_delay: Dur,

    /// Bandwidth of the shaped leg(s) in bytes per second, each way (e.g.
    /// 1MiB); the line holds at most one bandwidth-delay product (≥ 64 KiB).
    /// Unlimited when not given.
    #[arg(long, value_name = "SIZE")]
    pub link_rate: Option<Size>,

    /// Which leg --link-delay/--link-rate shape: client (real client ↔
    /// relay), server (relay ↔ real server) or both.
    #[arg(long, value_enum, default_value = "client", value_name = "SIDE")]
    pub link_side: LinkSide,

    /// How long to wait for the upstream to accept a connection; past it,
    /// the client's connection is closed with that reason.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: Dur,

    /// A pair with no byte either way for this long is closed (reason
    /// `idle`): a peer that opens a connection and goes silent does not
    /// hold the relay's resources for ever.
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub idle_timeout: Dur,

    /// Pairs open at once; beyond it a new connection is closed at once
    /// (`conn_refused` event).
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_connections: u32,

    /// Stop (as on Ctrl-C) once this many connection pairs have ended.
    #[arg(long, value_name = "N", value_parser = super::parse_count)]
    pub exit_after: Option<u64>,

    /// Stop (as on Ctrl-C) after this long.
    #[arg(long = "for", value_name = "DURATION", value_parser = super::parse_for)]
    pub run_for: Option<Dur>,

    #[command(flatten, next_help_heading = "Output")]
    #[serde(skip)]
    pub output: OutputOpts,
}

impl RelayOpts {
    /// Refuses what cannot run (exit 2), before anything starts.
    fn validate(&self) -> anyhow::Result<RelayConfig> {
        let unix = match crate::server::listen::parse_listen(&self.upstream) {
            Ok(ListenAddr::Unix(_)) => true,
            Err(e) if self.upstream.starts_with("unix:") => {
                return Err(crate::config::UsageError(format!("--upstream {e}")).into())
            }
            _ => false,
        };
        let port = self
            .upstream
            .rsplit_once(':')
            .and_then(|(h, p)| (!h.is_empty()).then_some(p))
            .and_then(|p| p.parse::<u16>().ok());
        crate::refuse_unless!(
            unix || port.is_some_and(|p| p > 0),
            "--upstream must be HOST:PORT or unix:PATH (e.g. 127.0.0.1:50051 or localhost:50051), got {:?}",
            self.upstream
        );
        crate::refuse_unless!(
            self.link_delay.0 <= Duration::from_secs(60),
            "--link-delay is limited to 60s"
        );
        if let Some(r) = self.link_rate {
            crate::refuse_unless!(
                r.0 >= 1024,
                "--link-rate must be at least 1KiB (bytes per second)"
            );
        }
        crate::refuse_unless!(
            self.link_side == LinkSide::Client
                || !self.link_delay.0.is_zero()
                || self.link_rate.is_some(),
            "--link-side {} chooses the leg --link-delay and --link-rate shape; give one of them",
            clap::ValueEnum::to_possible_value(&self.link_side)
                .map_or(String::new(), |v| v.get_name().to_owned())
        );
        crate::refuse_unless!(
            !self.idle_timeout.0.is_zero(),
            "--idle-timeout must be positive"
        );
        crate::refuse_unless!(
            !self.connect_timeout.0.is_zero(),
            "--connect-timeout must be positive"
        );
        crate::refuse_unless!(
            self.max_connections > 0,
            "--max-connections must be at least 1"
        );
        Ok(RelayConfig {
            upstream: self.upstream.clone(),
            shape: Shape {
                delay: self.link_delay.0,
                rate: self.link_rate.map(|r| r.0),
            },
            link_side: self.link_side,
            capture: self.output.capture_payload,
            connect_timeout: self.connect_timeout.0,
            idle_timeout: self.idle_timeout.0,
            max_connections: self.max_connections,
        })
    }
}

pub async fn relay(opts: RelayOpts) -> anyhow::Result<Finished> {
    let interrupts = Interrupts::listen();
    opts.output.validate()?;
    let cfg = opts.validate()?;
    let label = opts.output.label.clone().unwrap_or_else(|| "relay".into());
    let listener = super::bind_server(&opts.listen).await?;
    let addr = listener.local()?;
    // The same socket, however spelled (relative, `unix:///`, through a
    // symbolic link): its path as the taps write it is the same.
    if let (ListenAddr::Unix(ours), Ok(ListenAddr::Unix(up))) =
        (&addr, crate::server::listen::parse_listen(&opts.upstream))
    {
        use crate::unix_socket::path_name;
        crate::refuse_unless!(
            path_name(ours) != path_name(&up),
            "--upstream {} is this relay's own --listen socket: it would relay to itself",
            opts.upstream
        );
    }
    // An upstream that is this relay would relay to itself until
    // --max-connections: refused before anything starts.
    let tcp = match &addr {
        ListenAddr::Tcp(a) => Some(*a),
        ListenAddr::Unix(_) => None,
    };
    let upstream = match tcp {
        Some(_) => tokio::net::lookup_host(&opts.upstream).await.ok(),
        None => None,
    };
    if let (Some(addr), Some(upstream)) = (tcp, upstream) {
        for u in upstream {
            let same_host =
                u.ip() == addr.ip() || (addr.ip().is_unspecified() && u.ip().is_loopback());
            crate::refuse_unless!(
                !(same_host && u.port() == addr.port()),
                "--upstream {} is this relay's own --listen address {addr}: it would relay to itself",
                opts.upstream
            );
        }
    }
    // The progress line counts the probe's messages: a relay has none.
    let output = OutputOpts {
        quiet: true,
        ..opts.output.clone()
    };
    let mut session = Session::open("relay", interrupts, &output, &label, Default::default())?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let pairs_done = Arc::new(AtomicU64::new(0));
    let ctx = Arc::new(RelayCtx {
        cfg,
        rec: session.rec.clone(),
        pairs_done: pairs_done.clone(),
        shutdown: shutdown_rx,
    });
    // The address line is machine-readable: scripts wait for it. The run
    // directory on a line of its own keeps the first within 80 columns.
    println!("h2probe: relaying {addr} -> {}", opts.upstream);
    println!("h2probe: run directory {}", session.dir.display());
    let task = tokio::spawn(relay::serve(listener, ctx));
    let status = super::wait_for_stop(
        &mut session.interrupts,
        opts.exit_after,
        || pairs_done.load(Relaxed),
        opts.run_for.map(|d| d.0),
    )
    .await;
    if status == Status::Interrupted {
        session
            .interrupts
            .announce("closing the open connection pairs and finishing the trace");
    }
    let _ = shutdown_tx.send(true);
    tokio::select! {
        r = task => r.context("relay task")??,
        _ = session.interrupts.next() => crate::say!("second interrupt; abandoning open pairs"),
    }
    let config = RunConfig {
        relay: config_part(&opts),
        output: config_part(&opts.output),
        listen: Some(addr.to_string()),
        connect: Some(opts.upstream.clone()),
        ..RunConfig::default()
    };
    session
        .finish(config, status, Some(addr.to_string()), opts.output.pcaps())
        .await
}
