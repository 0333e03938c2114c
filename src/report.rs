//! The probe's side of reporting: thin glue over `h2probe_analysis::report`.

use std::path::Path;

pub use h2probe_analysis::report::headline;

/// Writes summary.json, timeline.csv and plots for a finished run directory.
pub fn write_products(
    dir: &Path,
) -> anyhow::Result<(h2probe_analysis::analyze::Summary, Vec<String>)> {
    Ok(h2probe_analysis::report::write_products(dir)?)
}
