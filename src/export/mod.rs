//! Exports of a run's trace for tools nobody here wrote: pcap (Wireshark,
//! tshark), tidy CSV (pandas, polars, DuckDB) and qlog.

pub mod csv;
pub mod pcap;
pub mod qlog;

use crate::trace::schema::{Event, Header};
use h2probe_analysis::reader::NAMED_SKIPS;
use std::path::{Path, PathBuf};

/// The header and events of a run's trace, streaming; a corrupt line is
/// skipped with a warning that names it (exports keep everything readable).
pub(crate) fn run_events(dir: &Path) -> anyhow::Result<(Header, impl Iterator<Item = Event>)> {
    let (trace, mut r) = h2probe_analysis::reader::open_run(dir)?;
    let header = r.header().clone();
    if let Some(said) = &r.damaged_header {
        warn_once(format!("warning: {}: {said}", trace.display()));
    }
    let mut ended = false;
    // Lines of events read (corrupt ones too): against the footer's count.
    let mut lines = 0u64;
    // Corrupt lines: the first few named, then a count (one warning a line,
    // and again for each format, filled stderr for a trace all damaged).
    let mut skipped = 0u64;
    let events = std::iter::from_fn(move || loop {
        match r.next() {
            Some(Ok(e)) => {
                lines += 1;
                return Some(e);
            }
            Some(Err(err)) => {
                lines += u64::from(err.is_one_line());
                skipped += u64::from(err.is_one_line());
                if !err.is_one_line() || skipped <= NAMED_SKIPS {
                    warn_once(format!("warning: {}: skipped {err}", trace.display()))
                }
            }
            None => {
                if !std::mem::replace(&mut ended, true) {
                    if skipped > NAMED_SKIPS {
                        warn_once(format!(
                            "warning: {}: {skipped} corrupt lines skipped in all (the first {NAMED_SKIPS} named above)",
                            trace.display()
                        ));
                    }
                    if let Some(w) = r.bad_payload_warning() {
                        warn_once(format!(
                            "warning: {}: {w} (zeros in a pcap)",
                            trace.display()
                        ));
                    }
                    use h2probe_analysis::reader::Ending;
                    let cut = match r.ending() {
                        Ending::Truncated { line } => Some(format!("truncated at line {line}")),
                        Ending::NoFooter => Some(match r.damaged_footer {
                            Some(line) => format!("with a damaged footer (line {line})"),
                            None => "without its footer (the writer did not finish)".into(),
                        }),
                        Ending::Clean(_) | Ending::Open => None,
                    };
                    if let Some(cut) = cut {
                        warn_once(format!(
                            "warning: {}: the trace ends {cut}: the export holds its events up to the last complete line",
                            trace.display()
                        ));
                    }
                    // Lines lost or added after the run (a duplicated one
                    // went into every export without a word).
                    if let (Ending::Clean(f), None) = (r.ending(), r.after_footer) {
                        let present = lines + r.unknown;
                        if f.events != present {
                            warn_once(format!(
                                "warning: {}: its footer counts {} events written, the file holds {present} lines of events: lines were lost or added after the run; the export holds the lines present",
                                trace.display(),
                                f.events
                            ));
                        }
                    }
                    if let Some(e) = &r.read_error {
                        warn_once(format!(
                            "warning: {}: the file failed as it was read ({e}): a compressed trace's bytes may be wrong anywhere before that, and so may the export's",
                            trace.display()
                        ));
                    }
                    if let Some(line) = r.after_footer {
                        warn_once(format!(
                            "warning: {}: the file goes on after its footer (line {line}); the export holds the events before it",
                            trace.display()
                        ));
                    }
                }
                return None;
            }
        }
    });
    Ok((header, events))
}

/// Says a warning about a trace once per process: each export format (and
/// each qlog tap) reads the trace again, and said it again.
fn warn_once(text: String) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.contains(&text) {
        crate::say!("{text}");
        // Bounded memory: past this many, warnings are said without
        // being remembered (a trace with thousands of corrupt lines).
        if said.len() < 1_000 {
            said.push(text);
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// server.pcap and client.pcap (synthetic IP/TCP around the exact frame bytes).
    Pcap,
    /// csv/<event-type>.csv, one tidy file per event type.
    Csv,
    /// server.sqlog and client.sqlog (qlog JSON-SEQ).
    Qlog,
}

#[derive(clap::Args, Clone, Debug)]
pub struct ExportOpts {
    /// Run directories (each holding a trace.jsonl).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub dirs: Vec<PathBuf>,

    /// Formats to write, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "pcap,csv,qlog"
    )]
    pub format: Vec<Format>,

    /// Write the pcaps gzip-compressed (server.pcap.gz, …), which Wireshark
    /// and tshark read as they are: the zeros standing for payload the
    /// trace did not keep then cost almost nothing.
    #[arg(long)]
    pub pcap_gzip: bool,
}

/// Writes the requested formats into `dir`; returns what was written.
pub fn export(dir: &Path, formats: &[Format], pcap_gzip: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = vec![];
    for f in formats {
        match f {
            Format::Pcap => {
                if pcap::export_pcaps(dir, pcap_gzip)?.packets() == 0 {
                    crate::say!("{}: {}", dir.display(), pcap::NO_CONNECTION);
                }
                out.extend(
                    ["server", "client", "client_leg", "server_leg"]
                        .iter()
                        .map(|t| dir.join(pcap::pcap_name(t, pcap_gzip)))
                        .filter(|p| p.is_file()),
                );
            }
            Format::Csv => out.extend(csv::export_csv(dir)?),
            Format::Qlog => {
                let written = qlog::export_qlog(dir)?;
                if written.is_empty() {
                    crate::say!(
                        "{}: no qlog written: the trace holds no connection",
                        dir.display()
                    );
                }
                out.extend(written);
            }
        }
    }
    Ok(out)
}
