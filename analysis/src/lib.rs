//! h2probe's trace schema, streaming reader and offline analysis.
//!
//! This crate reads files only: it does not depend on tokio or h2, so a trace
//! can be studied anywhere. The probe depends on it to *write* the schema.

pub mod analyze;
pub mod aside;
pub mod compare;
pub mod jsonl;
pub mod ladder;
pub mod meta;
pub mod page;
pub mod part3;
pub mod plots;
pub mod reader;
pub mod report;
pub mod schema;
pub mod series;
pub mod stats;
pub mod windows;

/// The files of a run directory, in the order a reader meets them: what
/// `--force` clears (with the `csv/` folder) and what a run's page names
/// beside it.
pub const RUN_FILES: &[&str] = &[
    "trace.jsonl",
    "trace.jsonl.gz",
    "meta.json",
    "summary.json",
    "timeline.csv",
    "windows.csv",
    "report.html",
    "client.pcap",
    "client.pcap.gz",
    "server.pcap",
    "server.pcap.gz",
    "client_leg.pcap",
    "client_leg.pcap.gz",
    "server_leg.pcap",
    "server_leg.pcap.gz",
    "client.sqlog",
    "server.sqlog",
    "client_leg.sqlog",
    "server_leg.sqlog",
];
