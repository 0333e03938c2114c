//! `meta.json`: what a run directory says about itself (configuration,
//! versions, clock anchor, host, recorder counts, status). Defined once
//! here, beside the trace schema: every writer (`run`, `serve`, `client`,
//! `merge`) and every reader (`compare`, `merge`, the report) uses [`Meta`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Bumped when a field is renamed or retyped; added fields do not bump it.
/// (Version 1 is what h2probe 0.1 wrote before `Meta` had a type: it reads
/// unchanged.)
pub const META_VERSION: u32 = 1;

/// The contents of `meta.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Meta {
    /// [`META_VERSION`] of the writer.
    pub schema: u32,
    /// `h2probe <version>`.
    pub tool: String,
    /// `run`, `serve`, `client` or `merge`.
    pub command: String,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub config: RunConfig,
    /// Crate versions the binary was built with.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// The trace's clock anchor (absent when the trace could not be opened).
    #[serde(default)]
    pub clock: Option<ClockAnchor>,
    #[serde(default)]
    pub host: Host,
    #[serde(default)]
    pub started_unix_ns: u64,
    #[serde(default)]
    pub finished_unix_ns: u64,
    /// `complete`, `interrupted` or `error: …`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub recorder: RecorderStats,
    /// Events the recorder dropped. For a merge, the sum over the inputs
    /// that had a footer: see [`Meta::drops_unknown_in`].
    #[serde(default)]
    pub dropped_events: u64,
    /// `merge`: inputs cut short (no footer), whose dropped events nobody
    /// counted, so `dropped_events` and `recorder.dropped` are a lower
    /// bound. Empty when every count is known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drops_unknown_in: Vec<String>,
    /// The server's listening address (`run`, `serve`).
    #[serde(default)]
    pub listen: Option<String>,
    /// `merge`: the source run directories, in input order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    /// `merge`: each source's connection ids are moved past the sources'
    /// before it, in steps of this: one step for a run, `conn_steps` for
    /// a merged one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_offset: Option<u32>,
    /// `merge`: the steps of `conn_offset` its connection ids take (one
    /// per run merged into it, at any depth), so that a merge of it moves
    /// the next source past them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_steps: Option<u32>,
}

/// The configuration a run was made with, as each part serialised it.
/// The parts are kept as JSON objects: the probe owns their fields, this
/// crate reads the few it names ([`RunConfig::release`], [`RunConfig::queue`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RunConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Map<String, serde_json::Value>>,
    /// `serve`: the address it listened on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// `client`: the address it connected to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
    /// `relay`: its options (upstream, link shaping, limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<serde_json::Map<String, serde_json::Value>>,
    /// `merge` of several clients: the configurations of the clients after
    /// the first (whose is `client`), in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_clients: Vec<serde_json::Map<String, serde_json::Value>>,
}

impl RunConfig {
    fn server_str(&self, key: &str) -> Option<&str> {
        self.server.as_ref()?.get(key)?.as_str()
    }
    /// The server's `--release`.
    pub fn release(&self) -> Option<&str> {
        self.server_str("release")
    }
    /// The server's `--queue`.
    pub fn queue(&self) -> Option<&str> {
        self.server_str("queue")
    }
    /// The server's `--stack` (`h2` for runs written before it existed).
    pub fn stack(&self) -> &str {
        self.server_str("stack").unwrap_or("h2")
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ClockAnchor {
    /// Always `CLOCK_MONOTONIC`.
    pub clock: String,
    pub origin_mono_ns: u64,
    pub origin_unix_ns: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Host {
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub cpus: usize,
    /// `/proc/sys/kernel/random/boot_id`: CLOCK_MONOTONIC is shared only
    /// within one boot of one host. Empty in runs written before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
}

/// Counts of a finished (or running) recording.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RecorderStats {
    /// Events accepted into the buffer.
    pub accepted: u64,
    /// Events written to the file.
    pub written: u64,
    /// Events dropped (buffer full, or writer gone), by kind.
    pub dropped: BTreeMap<String, u64>,
    /// Frames recorded without the payload the capture mode keeps, because
    /// the payload bound was full (each says `payload_dropped` in the trace).
    #[serde(default)]
    pub payload_dropped_frames: u64,
    /// The payload bytes those frames carried.
    #[serde(default)]
    pub payload_dropped_bytes: u64,
    /// The most events one sweep of the writer took: how far it fell
    /// behind the transport (a slow disk, a starved thread). At most the
    /// recorder's capacity; events past it are dropped. Absent (0) in runs
    /// recorded before it was kept.
    #[serde(default)]
    pub largest_sweep: u64,
    /// How the trace file was written: `direct` (`O_DIRECT`, around the
    /// page cache) or `page_cache` (a file system that refused it);
    /// absent for a trace written elsewhere (tests) or before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_io: Option<String>,
}

impl RecorderStats {
    pub fn dropped_total(&self) -> u64 {
        crate::schema::saturating_sum(self.dropped.values())
    }
}

/// `meta.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("{path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    /// The file ends inside the JSON value (the writer was interrupted).
    #[error("{path}: truncated at byte {len} (the writer was interrupted?)")]
    Truncated { path: String, len: usize },
    #[error("{path}: not a meta.json: {cause}")]
    Corrupt {
        path: String,
        cause: serde_json::Error,
    },
    /// Larger than any meta.json is (a few KB): not read at all.
    #[error("{path}: not a meta.json: {bytes} bytes, where one is a few KB ({} MiB at most)", MAX_META >> 20)]
    TooLarge { path: String, bytes: u64 },
}

/// The largest meta.json read (h2probe's are a few KB, a merge's a little
/// more): a file of gigabytes was read whole before it was refused.
pub const MAX_META: u64 = 16 << 20;

impl Meta {
    /// Reads `dir/meta.json`.
    pub fn read(dir: &Path) -> Result<Meta, MetaError> {
        let path = dir.join("meta.json");
        let p = || path.display().to_string();
        let file =
            std::fs::File::open(&path).map_err(|cause| MetaError::Io { path: p(), cause })?;
        let mut text = String::new();
        use std::io::Read;
        let read = file
            .take(MAX_META + 1)
            .read_to_string(&mut text)
            .map_err(|cause| MetaError::Io { path: p(), cause })?;
        if read as u64 > MAX_META {
            let bytes = std::fs::metadata(&path).map_or(read as u64, |m| m.len());
            return Err(MetaError::TooLarge { path: p(), bytes });
        }
        serde_json::from_str(&text).map_err(|cause| {
            if cause.is_eof() {
                MetaError::Truncated {
                    path: p(),
                    len: text.len(),
                }
            } else {
                MetaError::Corrupt { path: p(), cause }
            }
        })
    }

    /// `release=R queue=Q` when the run had a server (with ` stack=hyper`
    /// for the reference stack), else `None`. A Part 3 run (its client's
    /// `--rpc exchange`) is named by its overload policy instead of the
    /// queue, which only `Ingest` uses: `release=R when-full=W retry=P`.
    pub fn config_label(&self) -> Option<String> {
        let c = &self.config;
        let stack = match c.stack() {
            "h2" => String::new(),
            other => format!(" stack={other}"),
        };
        let client = |k: &str| c.client.as_ref()?.get(k)?.as_str();
        if client("rpc") == Some("exchange") {
            return Some(format!(
                "release={} when-full={} retry={}{stack}",
                c.release()?,
                c.server_str("when_full").unwrap_or("?"),
                client("retry").unwrap_or("?")
            ));
        }
        Some(format!(
            "release={} queue={}{stack}",
            c.release()?,
            c.queue().unwrap_or("?")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("h2probe-meta-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_the_committed_reference_meta() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures/reference/frame-direct");
        let m = Meta::read(&dir).unwrap();
        assert_eq!(m.command, "run");
        assert_eq!(m.config_label().unwrap(), "release=frame queue=direct");
        assert_eq!(m.recorder.written, m.recorder.accepted);
        assert!(m.clock.is_some());
    }

    /// A meta.json of gigabytes is refused from its size, not read whole.
    #[test]
    fn a_meta_json_larger_than_any_is_refused_unread() {
        let dir = temp("large");
        let f = std::fs::File::create(dir.join("meta.json")).unwrap();
        f.set_len(1 << 30).unwrap();
        let e = Meta::read(&dir).unwrap_err();
        assert!(
            matches!(e, MetaError::TooLarge { bytes, .. } if bytes == 1 << 30),
            "{e}"
        );
        assert!(
            e.to_string().ends_with(
                "not a meta.json: 1073741824 bytes, where one is a few KB (16 MiB at most)"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_hyper_stack_is_its_own_configuration() {
        let mut m = Meta::default();
        let server =
            serde_json::json!({"release": "frame", "queue": "unbounded", "stack": "hyper"});
        m.config.server = server.as_object().cloned();
        assert_eq!(
            m.config_label().unwrap(),
            "release=frame queue=unbounded stack=hyper"
        );
        m.config.server.as_mut().unwrap()["stack"] = "h2".into();
        assert_eq!(m.config_label().unwrap(), "release=frame queue=unbounded");
    }

    #[test]
    fn a_part3_run_is_named_by_its_policy_not_the_queue() {
        let mut m = Meta::default();
        let server =
            serde_json::json!({"release": "frame", "queue": "unbounded", "when_full": "reject"});
        let client = serde_json::json!({"rpc": "exchange", "retry": "fixed:100,200"});
        m.config.server = server.as_object().cloned();
        m.config.client = client.as_object().cloned();
        assert_eq!(
            m.config_label().unwrap(),
            "release=frame when-full=reject retry=fixed:100,200"
        );
        m.config.client.as_mut().unwrap()["rpc"] = "ingest".into();
        assert_eq!(m.config_label().unwrap(), "release=frame queue=unbounded");
    }

    #[test]
    fn tells_a_truncated_file_from_a_corrupt_one() {
        let d = temp("cut");
        let full = serde_json::to_string_pretty(&Meta {
            command: "run".into(),
            ..Meta::default()
        })
        .unwrap();
        std::fs::write(d.join("meta.json"), &full[..full.len() / 2]).unwrap();
        assert!(matches!(Meta::read(&d), Err(MetaError::Truncated { .. })));
        std::fs::write(d.join("meta.json"), "{\"schema\": \"one\"}").unwrap();
        assert!(matches!(Meta::read(&d), Err(MetaError::Corrupt { .. })));
        std::fs::remove_file(d.join("meta.json")).unwrap();
        assert!(matches!(Meta::read(&d), Err(MetaError::Io { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
