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
