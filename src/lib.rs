//! h2probe as a library: the sans-IO frame parser ([`wire`]), the trace
//! writer ([`trace`]), the socket tap ([`tap`]), the commands that write run
//! directories ([`commands`]) and the CLI ([`cli`]). Layers depend only
//! downwards: wire → trace → tap → endpoints → commands → cli (see
//! `scripts/module-graph`). The analysis lives in `h2probe_analysis`, which
//! reads files only.

pub mod cli;
pub mod commands;
pub mod config;
pub mod decode;
pub mod export;
pub mod grpc;
pub mod overload;
pub mod say;
pub mod tap;
pub mod tls;
pub mod trace;
pub(crate) mod unix_socket;
pub mod wire;

// The endpoints' internals: public so that the integration tests can drive
// them directly, not part of the library's surface.
#[doc(hidden)]
pub mod client;
#[doc(hidden)]
pub mod link;
#[doc(hidden)]
pub mod live;
#[doc(hidden)]
pub mod relay;
#[doc(hidden)]
pub mod server;
