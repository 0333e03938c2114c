//! Argument value types shared by the commands: sizes, durations, policies.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use h2probe_analysis::schema::ReleasePoint;

/// How much payload the tap keeps in `frame` events.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CapturePayload {
    /// No payload bytes: frames are rebuilt from their typed fields (HEADERS
    /// blocks and DATA become zeros).
    None,
    /// Payloads of every frame except the upload's DATA (client→server; in
    /// `decode`, except every DATA frame): HEADERS blocks, SETTINGS, and the
    /// server's small replies, so a run's pcap decodes every reply and
    /// trailer.
    #[default]
    Headers,
    /// Every payload byte, DATA included (large traces).
    Full,
}

/// Which HTTP/2 server stack serves the RPCs (`--stack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    /// The probe's own server on `h2`: every release point and queue policy.
    #[default]
    H2,
    /// The stock stack tonic runs on, as a reference: a server on hyper 1.x
    /// like a default tonic service. hyper releases credit as each body frame
    /// is polled, so only `--release frame --queue unbounded`.
    Hyper,
}

/// A configuration that cannot run, refused before anything starts: the
/// CLI prints it and exits 2 (bad usage), like a flag clap itself refuses.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Refuses a configuration with a one-line reason (exit code 2).
#[macro_export]
macro_rules! refuse_unless {
    ($cond:expr, $($fmt:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err(anyhow::Error::new($crate::config::UsageError(format!($($fmt)+))));
        }
    };
}

/// Of `keys` (argument ids), the flags (`--max-attempts`) a command line
/// gave (`on_command_line`, clap's value source) or that `part` (a config
/// part, as meta.json records it) sets away from `default`'s.
pub(crate) fn flags_given(
    part: Option<serde_json::Map<String, serde_json::Value>>,
    default: Option<serde_json::Map<String, serde_json::Value>>,
    keys: &[&str],
    on_command_line: &[String],
) -> Vec<String> {
    let (part, default) = (part.unwrap_or_default(), default.unwrap_or_default());
    keys.iter()
        .filter(|k| part.get(**k) != default.get(**k) || on_command_line.iter().any(|g| g == *k))
        .map(|k| format!("--{}", k.replace('_', "-")))
        .collect()
}

/// The longest duration any flag accepts (a day): beyond it, nanosecond
/// arithmetic on the clock would overflow long before it mattered.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// [`MAX_DURATION`] as refusals say it (its `Dur` reads "1day", a form
/// the parser takes but the help never shows).
pub const MAX_DURATION_SAID: &str = "24h";

/// The `--release` values: the CLI spelling of [`ReleasePoint`] (one type
/// per concept; the trace writes the same names).
pub fn release_point_parser() -> impl clap::builder::TypedValueParser<Value = ReleasePoint> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(ReleasePoint::ALL.map(ReleasePoint::as_str))
        .map(|s| s.parse().expect("one of the possible values"))
}

/// `--release`: one release point for every stream (`complete`), or a mix
/// per HTTP/2 stream id (`complete,1=frame`: stream 1 releases on frame
/// receipt, every other stream on completion). Streams not listed use the
/// bare point, `frame` when none is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseSpec {
    /// The point for streams not listed.
    pub default: ReleasePoint,
    /// `(stream id, point)`, sorted by id, each id once.
    pub streams: Vec<(u32, ReleasePoint)>,
}

impl ReleaseSpec {
    /// The same point for every stream.
    pub fn uniform(point: ReleasePoint) -> ReleaseSpec {
        ReleaseSpec {
            default: point,
            streams: Vec::new(),
        }
    }

    /// The point in force on `stream`.
    pub fn for_stream(&self, stream: u32) -> ReleasePoint {
        self.streams
            .iter()
            .find(|(id, _)| *id == stream)
            .map_or(self.default, |(_, p)| *p)
    }

    /// Every stream releases at `point`.
    pub fn is_uniform(&self, point: ReleasePoint) -> bool {
        self.default == point && self.streams.iter().all(|(_, p)| *p == point)
    }

    /// Releases somewhere after frame receipt (a stream whose partial
    /// message holds unreleased credit).
    pub fn is_late(point: ReleasePoint) -> bool {
        point != ReleasePoint::Frame
    }

    /// A spelling for directory names: `complete`, `complete-1frame`.
    pub fn slug(&self) -> String {
        self.to_string().replace('=', "").replace(',', "-")
    }
}

impl Default for ReleaseSpec {
    fn default() -> Self {
        ReleaseSpec::uniform(ReleasePoint::Frame)
    }
}

impl FromStr for ReleaseSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<ReleaseSpec, String> {
        let names = ReleasePoint::ALL.map(ReleasePoint::as_str).join(", ");
        let point = |p: &str| -> Result<ReleasePoint, String> {
            p.parse::<ReleasePoint>()
                .ok()
                .filter(|p| *p != ReleasePoint::End)
                .ok_or_else(|| format!("{p:?} is not a release point (one of {names})"))
        };
        let mut default = None;
        let mut streams: Vec<(u32, ReleasePoint)> = Vec::new();
        for item in s.split(',').map(str::trim) {
            match item.split_once('=') {
                None => {
                    if default.replace(point(item)?).is_some() {
                        return Err(format!("{s:?}: more than one point without a stream id"));
                    }
                }
                Some((id, p)) => {
                    let id = id
                        .parse::<u32>()
                        .ok()
                        .filter(|id| id % 2 == 1)
                        .ok_or_else(|| {
                            format!("{id:?}: a stream id is an odd number (client streams are 1, 3, 5, …)")
                        })?;
                    if streams.iter().any(|(i, _)| *i == id) {
                        return Err(format!("{s:?}: stream {id} is given twice"));
                    }
                    streams.push((id, point(p)?));
                }
            }
        }
        streams.sort_by_key(|(id, _)| *id);
        Ok(ReleaseSpec {
            default: default.unwrap_or(ReleasePoint::Frame),
            streams,
        })
    }
}

impl fmt::Display for ReleaseSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.default.as_str())?;
        for (id, p) in &self.streams {
            write!(f, ",{id}={}", p.as_str())?;
        }
        Ok(())
    }
}

impl serde::Serialize for ReleaseSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A byte count written as `65535`, `16KiB`, `1.5MiB` (binary, 1024-based)
/// or `16kB`, `2MB` (SI, 1000-based). `16K`, `16KB`, `16M` are refused: for
/// HTTP/2 windows the difference between 16,000 and 16,384 matters, and
/// those spellings are used for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// The size syntax, said once in `--help`.
pub const SIZE_SYNTAX: &str = "Sizes: 65535, 16KiB, 1.5MiB, 2GiB (1024-based) or 16kB, 2MB, 1GB \
(1000-based); 16K, 16KB and 16M are refused as ambiguous. Durations: 10ms, 1.5s, 2m, 1h.";

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(t.len());
        let (num, unit) = (t[..split].replace('_', ""), t[split..].trim());
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{s:?} is not a size (try 65535, 16KiB, 1MiB, 16kB)"))?;
        let scale: u64 = match unit {
            "" | "B" | "b" => 1,
            u if u.eq_ignore_ascii_case("KiB") => 1 << 10,
            u if u.eq_ignore_ascii_case("MiB") => 1 << 20,
            u if u.eq_ignore_ascii_case("GiB") => 1 << 30,
            "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "K" | "KB" | "k" | "kb" | "Kb" | "M" | "m" | "mb" | "Mb" | "G" | "g" | "gb" | "Gb" => {
                let base = match unit.chars().next() {
                    Some('K' | 'k') => ("Ki", "k", 1u64 << 10, 1_000u64),
                    Some('M' | 'm') => ("Mi", "M", 1 << 20, 1_000_000),
                    _ => ("Gi", "G", 1 << 30, 1_000_000_000),
                };
                let (bin, si, b, d) = base;
                return Err(format!(
                    "{s:?} is ambiguous: write {num}{bin}B ({}) or {num}{si}B ({})",
                    group((value * b as f64) as u64),
                    group((value * d as f64) as u64)
                ));
            }
            _ => {
                return Err(format!(
                    "{s:?}: unknown unit {unit:?} (use B, KiB, MiB, GiB, kB, MB, GB)"
                ))
            }
        };
        let too_large = || format!("{s:?} is too large (at most {} bytes)", group(u64::MAX));
        // Whole numbers are computed exactly: through f64 a value past 2^53
        // would silently become a neighbouring one.
        if !num.contains('.') {
            let whole: u128 = num.parse().map_err(|_| too_large())?;
            return whole
                .checked_mul(u128::from(scale))
                .and_then(|b| u64::try_from(b).ok())
                .map(Size)
                .ok_or_else(too_large);
        }
        let bytes = value * scale as f64;
        if bytes.is_finite() && bytes >= u64::MAX as f64 {
            return Err(too_large());
        }
        if !(bytes.is_finite() && bytes >= 0.0) || bytes.fract() != 0.0 {
            return Err(format!("{s:?} is not a whole number of bytes"));
        }
        Ok(Size(bytes as u64))
    }
}

/// 16384 → "16,384".
fn group(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl serde::Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl Size {
    /// As a u32 window/frame value, refusing values that do not fit.
    pub fn to_u32(self, what: &str) -> Result<u32, String> {
        u32::try_from(self.0).map_err(|_| format!("{what} {} does not fit in 32 bits", self.0))
    }
}

/// A duration written as `10ms`, `1.5s`, `2m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Dur, String> {
        let t = s.trim();
        // humantime's own hint for a bare number drops its fraction
        // ("0.25": "for example 0sec or 0ms").
        // (0 needs none: `--service-time 0` is as clear as 0s.)
        if t.parse::<f64>().is_ok_and(|x| x.is_finite() && x != 0.0) {
            return Err(format!(
                "{s:?} needs a time unit, e.g. {t}s (or 10ms, 1.5s, 2m)"
            ));
        }
        humantime::parse_duration(t)
            .map(Dur)
            .map_err(|e| format!("{s:?} is not a duration (try 10ms, 1.5s, 2m): {e}"))
    }
}

impl Dur {
    /// One token, no spaces, in the largest unit that holds it whole
    /// (`1333ms`, where the display says `1s 333ms`): a value to paste
    /// into a flag.
    pub fn compact(&self) -> String {
        let ns = self.0.as_nanos();
        match ns {
            // 0 too: "0s".
            _ if ns % 1_000_000_000 == 0 => format!("{}s", ns / 1_000_000_000),
            _ if ns % 1_000_000 == 0 => format!("{}ms", ns / 1_000_000),
            _ if ns % 1_000 == 0 => format!("{}us", ns / 1_000),
            _ => format!("{ns}ns"),
        }
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl serde::Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// How decoded messages reach the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueuePolicy {
    /// The handler processes each message itself before reading the next.
    Direct,
    /// The handler enqueues every decoded message at once (a safety limit
    /// still applies, see `--queue-limit`).
    Unbounded,
    /// The handler reserves one of K slots *before* reading the next message.
    Bounded(u32),
}

impl FromStr for QueuePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<QueuePolicy, String> {
        match s {
            "direct" => Ok(QueuePolicy::Direct),
            "unbounded" => Ok(QueuePolicy::Unbounded),
            _ => {
                let k = s
                    .strip_prefix("bounded:")
                    .ok_or_else(|| format!("{s:?}: expected direct, unbounded or bounded:K"))?;
                match k.parse::<u32>() {
                    Ok(k) if k > 0 => Ok(QueuePolicy::Bounded(k)),
                    _ => Err(format!("{s:?}: K must be a whole number of at least 1")),
                }
            }
        }
    }
}

impl fmt::Display for QueuePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueuePolicy::Direct => f.write_str("direct"),
            QueuePolicy::Unbounded => f.write_str("unbounded"),
            QueuePolicy::Bounded(k) => write!(f, "bounded:{k}"),
        }
    }
}

impl serde::Serialize for QueuePolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How the server cuts a request body into work units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// gRPC length-prefixed protobuf messages (`/h2probe.v1.Probe/Ingest`).
    Grpc,
    /// Any POST/PUT body, as consecutive SIZE-byte units (the last may be short).
    Raw(u32),
}

impl FromStr for Framing {
    type Err = String;
    fn from_str(s: &str) -> Result<Framing, String> {
        if s == "grpc" {
            return Ok(Framing::Grpc);
        }
        let size = s
            .strip_prefix("raw:")
            .ok_or_else(|| format!("{s:?}: expected grpc or raw:SIZE"))?;
        let n: Size = size.parse()?;
        match u32::try_from(n.0) {
            Ok(n) if n > 0 => Ok(Framing::Raw(n)),
            _ => Err(format!("{s:?}: SIZE must be between 1 and 4 GiB")),
        }
    }
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Framing::Grpc => f.write_str("grpc"),
            Framing::Raw(n) => write!(f, "raw:{n}"),
        }
    }
}

impl serde::Serialize for Framing {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_duration_is_one_token_that_parses_back() {
        for (given, compact) in [
            ("1s 333ms", "1333ms"),
            ("2m", "120s"),
            ("0s", "0s"),
            ("1.5ms", "1500us"),
            ("7ns", "7ns"),
            ("24h", "86400s"),
        ] {
            let d: Dur = given.parse().unwrap();
            assert_eq!(d.compact(), compact);
            assert_eq!(compact.parse::<Dur>().unwrap(), d);
        }
    }

    #[test]
    fn a_bare_number_is_refused_with_its_own_value_and_a_unit() {
        for (given, hint) in [
            ("0.25", "e.g. 0.25s"),
            (" 2.5 ", "e.g. 2.5s"),
            ("3", "e.g. 3s"),
        ] {
            let e = given.parse::<Dur>().unwrap_err();
            assert!(e.contains("needs a time unit") && e.contains(hint), "{e}");
        }
        assert_eq!("0.25s".parse::<Dur>().unwrap().0.as_millis(), 250);
        assert_eq!("0".parse::<Dur>().unwrap().0, std::time::Duration::ZERO);
        let e = "1.5 parsecs".parse::<Dur>().unwrap_err();
        assert!(e.contains("is not a duration"), "{e}");
    }

    #[test]
    fn release_specs_name_a_point_per_stream() {
        let r: ReleaseSpec = "complete,1=frame".parse().unwrap();
        assert_eq!(r.for_stream(1), ReleasePoint::Frame);
        assert_eq!(r.for_stream(3), ReleasePoint::Complete);
        assert_eq!(r.to_string(), "complete,1=frame");
        let r: ReleaseSpec = "3=complete,1=decode".parse().unwrap();
        assert_eq!(r.to_string(), "frame,1=decode,3=complete");
        assert_eq!(r.for_stream(5), ReleasePoint::Frame);
        assert!(ReleaseSpec::uniform(ReleasePoint::Start).is_uniform(ReleasePoint::Start));
        assert!(!r.is_uniform(ReleasePoint::Frame));
        for bad in [
            "2=frame",
            "1=frame,1=start",
            "frame,start",
            "1=end",
            "later",
            "x=frame",
        ] {
            assert!(bad.parse::<ReleaseSpec>().is_err(), "{bad} was accepted");
        }
        assert_eq!(
            "frame".parse::<ReleaseSpec>().unwrap(),
            ReleaseSpec::default()
        );
    }

    /// A spec's directory spelling, and which points hold credit past a
    /// frame's receipt.
    #[test]
    fn release_specs_spell_a_slug_and_say_which_points_are_late() {
        let r: ReleaseSpec = "complete,3=frame,1=decode".parse().unwrap();
        assert_eq!(r.slug(), "complete-1decode-3frame");
        assert_eq!(ReleaseSpec::default().slug(), "frame");
        assert!(!ReleaseSpec::is_late(ReleasePoint::Frame));
        for p in [
            ReleasePoint::Decode,
            ReleasePoint::Start,
            ReleasePoint::Complete,
        ] {
            assert!(ReleaseSpec::is_late(p), "{p:?}");
        }
    }

    /// The flags a command line gave, or a config part sets away from the
    /// default, named as flags; one left at its default is not.
    #[test]
    fn flags_given_are_those_set_or_changed() {
        let map = |v: serde_json::Value| v.as_object().cloned();
        let keys = ["max_attempts", "retry", "seed"];
        let default = map(serde_json::json!({"max_attempts": 1, "retry": "none", "seed": 7}));
        let part = map(serde_json::json!({"max_attempts": 3, "retry": "none", "seed": 7}));
        assert_eq!(
            flags_given(part.clone(), default.clone(), &keys, &[]),
            ["--max-attempts"]
        );
        assert_eq!(
            flags_given(part, default.clone(), &keys, &["seed".to_string()]),
            ["--max-attempts", "--seed"]
        );
        assert!(flags_given(default.clone(), default, &keys, &[]).is_empty());
        // No config part at all: only what the command line gave.
        assert_eq!(
            flags_given(None, None, &keys, &["retry".to_string()]),
            ["--retry"]
        );
    }

    /// Every unit at its own scale, the ambiguous ones answered with both
    /// readings grouped in thousands, and the other spellings' round trips.
    #[test]
    fn every_unit_and_spelling() {
        for (text, bytes) in [
            ("3b", 3),
            ("3 B", 3),
            ("2GiB", 2 << 30),
            ("2gib", 2 << 30),
            ("3MiB", 3 << 20),
            ("2GB", 2_000_000_000),
            ("0.5kB", 500),
        ] {
            assert_eq!(text.parse::<Size>().unwrap(), Size(bytes), "{text}");
        }
        assert_eq!(
            "1.5M".parse::<Size>().unwrap_err(),
            "\"1.5M\" is ambiguous: write 1.5MiB (1,572,864) or 1.5MB (1,500,000)"
        );
        assert_eq!(
            "2g".parse::<Size>().unwrap_err(),
            "\"2g\" is ambiguous: write 2GiB (2,147,483,648) or 2GB (2,000,000,000)"
        );
        let e = "3 parsecs".parse::<Size>().unwrap_err();
        assert!(e.contains("unknown unit \"parsecs\""), "{e}");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(123_456_789), "123,456,789");
        assert_eq!(Size(65535).to_string(), "65535");
        assert_eq!(Size(1 << 31).to_u32("--conn-window").unwrap(), 1 << 31);
        assert_eq!(
            Size(1 << 32).to_u32("--conn-window").unwrap_err(),
            "--conn-window 4294967296 does not fit in 32 bits"
        );
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1s 500ms");
        assert!("soon"
            .parse::<Dur>()
            .unwrap_err()
            .contains("not a duration"));
        for q in ["direct", "unbounded", "bounded:7"] {
            assert_eq!(q.parse::<QueuePolicy>().unwrap().to_string(), q);
        }
        assert_eq!("grpc".parse::<Framing>().unwrap(), Framing::Grpc);
        assert_eq!(Framing::Grpc.to_string(), "grpc");
        assert_eq!(Framing::Raw(4096).to_string(), "raw:4096");
        for bad in ["raw:0", "raw:4GiB", "json", "raw:lots"] {
            assert!(bad.parse::<Framing>().is_err(), "{bad}");
        }
        assert_eq!(
            "raw:4294967295".parse::<Framing>().unwrap(),
            Framing::Raw(u32::MAX)
        );
    }

    #[test]
    fn parse_values() {
        assert_eq!("16KiB".parse::<Size>().unwrap(), Size(16384));
        assert_eq!("16kib".parse::<Size>().unwrap(), Size(16384));
        assert_eq!("1.5MiB".parse::<Size>().unwrap(), Size(1_572_864));
        assert_eq!("16kB".parse::<Size>().unwrap(), Size(16_000));
        assert_eq!("2MB".parse::<Size>().unwrap(), Size(2_000_000));
        assert_eq!("65535".parse::<Size>().unwrap(), Size(65535));
        assert_eq!("65_535 B".parse::<Size>().unwrap(), Size(65535));
        assert!("lots".parse::<Size>().is_err());
        assert!("1.5B".parse::<Size>().is_err());
        // Exact past f64's 2^53, the largest u64 accepted, one more refused
        // as too large (it read "not a whole number of bytes").
        assert_eq!(
            "9007199254740993".parse::<Size>().unwrap(),
            Size(9_007_199_254_740_993)
        );
        assert_eq!(
            "18446744073709551615".parse::<Size>().unwrap(),
            Size(u64::MAX)
        );
        for huge in [
            "18446744073709551616",
            "17179869184GiB",
            "99999999999999999999999999999999999999999",
            // Past u128 once scaled (it overflowed the multiplication).
            "99999999999999999999999999999999999999GiB",
        ] {
            let e = huge.parse::<Size>().unwrap_err();
            assert!(e.contains("too large"), "{huge}: {e}");
        }
        assert!("17179869184.5GiB"
            .parse::<Size>()
            .unwrap_err()
            .contains("too large"));
        for ambiguous in ["16K", "16KB", "16k", "1M", "1G"] {
            let e = ambiguous.parse::<Size>().unwrap_err();
            assert!(e.contains("ambiguous"), "{e}");
        }
        assert_eq!(
            "16K".parse::<Size>().unwrap_err(),
            "\"16K\" is ambiguous: write 16KiB (16,384) or 16kB (16,000)"
        );
        assert_eq!(
            "10ms".parse::<Dur>().unwrap(),
            Dur(Duration::from_millis(10))
        );
        assert_eq!(
            "bounded:32".parse::<QueuePolicy>().unwrap(),
            QueuePolicy::Bounded(32)
        );
        assert!("bounded:0".parse::<QueuePolicy>().is_err());
        assert!("bounded".parse::<QueuePolicy>().is_err());
        assert_eq!("raw:16KiB".parse::<Framing>().unwrap(), Framing::Raw(16384));
        assert_eq!(QueuePolicy::Bounded(4).to_string(), "bounded:4");
    }
}
