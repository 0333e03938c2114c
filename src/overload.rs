//! Part 3's knobs as value types: which method the client calls, what the
//! server does at a full admission boundary, how the worker's service time
//! varies over a run, how a refused attempt is retried, and the small
//! seeded generator behind retry jitter (reproducible from meta.json).

use crate::config::Dur;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which method the client calls (`--rpc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RpcKind {
    /// Client-streaming `Ingest`: one answer per RPC (Parts 1 and 2).
    #[default]
    Ingest,
    /// Bidirectional `Exchange`: one outcome per attempt, originals with
    /// immutable deadlines, retries (Part 3).
    Exchange,
    /// Unary calls: one message per RPC, each on a stream of its own (any
    /// unary method, or a client-streaming one such as `Ingest`); --streams
    /// calls per connection at once take its messages in turn. A connection
    /// that ends before its schedule (a GOAWAY, a close) is replaced once the
    /// server has answered a call of it, the schedule going on.
    Unary,
}

impl RpcKind {
    /// As `--rpc` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RpcKind::Ingest => "ingest",
            RpcKind::Exchange => "exchange",
            RpcKind::Unary => "unary",
        }
    }
}

/// What the server does with an attempt that arrives when all `--admission`
/// slots are taken (`--when-full`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Hold it for a slot, at most until its deadline (then `expired`);
    /// reading the stream pauses meanwhile, so the wait reaches the client
    /// as flow control.
    #[default]
    Wait,
    /// Answer `rejected` at once.
    Reject,
    /// Discard it on purpose and answer `dropped` at once.
    Drop,
}

impl WhenFull {
    pub fn as_str(self) -> &'static str {
        match self {
            WhenFull::Wait => "wait",
            WhenFull::Reject => "reject",
            WhenFull::Drop => "drop",
        }
    }
}

/// The worker's service time over a run (`--service-schedule`):
/// `10ms,12s:40ms,24s:10ms` = 10 ms from the start, 40 ms from 12 s, 10 ms
/// again from 24 s. Offsets are from the server's first RPC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSchedule(pub Vec<(Duration, Duration)>);

impl ServiceSchedule {
    /// A constant service time.
    pub fn constant(d: Duration) -> ServiceSchedule {
        ServiceSchedule(vec![(Duration::ZERO, d)])
    }

    /// The service time in force `since` after the anchor.
    pub fn at(&self, since: Duration) -> Duration {
        self.0
            .iter()
            .rev()
            .find(|(from, _)| *from <= since)
            .map_or(self.0[0].1, |(_, d)| *d)
    }
}

impl FromStr for ServiceSchedule {
    type Err = String;
    fn from_str(s: &str) -> Result<ServiceSchedule, String> {
        let mut steps: Vec<(Duration, Duration)> = vec![];
        for (i, part) in s.split(',').enumerate() {
            let (from, d) = match part.split_once(':') {
                Some((from, d)) => (from.parse::<Dur>()?.0, d.parse::<Dur>()?.0),
                None if i == 0 => (Duration::ZERO, part.parse::<Dur>()?.0),
                None => {
                    return Err(format!(
                        "{s:?}: every step after the first needs FROM:DURATION, e.g. 10ms,12s:40ms,24s:10ms"
                    ))
                }
            };
            if let Some(&(prev, _)) = steps.last() {
                if from <= prev {
                    return Err(format!("{s:?}: step offsets must increase"));
                }
            } else if !from.is_zero() {
                return Err(format!(
                    "{s:?}: the first step starts at 0 (write it without FROM:)"
                ));
            }
            if d > crate::config::MAX_DURATION {
                return Err(format!("{s:?}: a service time is limited to a day"));
            }
            steps.push((from, d));
        }
        Ok(ServiceSchedule(steps))
    }
}

impl fmt::Display for ServiceSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (from, d)) in self.0.iter().enumerate() {
            // One token a step: the schedule is given back as a flag's
            // value ("1s 333ms" split it in two on a command line).
            if i > 0 {
                write!(f, ",{}:", Dur(*from).compact())?;
            }
            write!(f, "{}", Dur(*d).compact())?;
        }
        Ok(())
    }
}

impl serde::Serialize for ServiceSchedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How the client retries a `rejected` attempt (`--retry`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum RetryPolicy {
    /// A rejection is the original's end.
    #[default]
    None,
    /// Retry after these delays (the n-th retry waits the n-th delay; the
    /// last one repeats).
    Fixed(Vec<Duration>),
    /// Retry after a delay drawn uniformly from [0, MAX] (seeded per client).
    Jitter(Duration),
}

impl FromStr for RetryPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<RetryPolicy, String> {
        let ms = |v: &str| -> Result<Duration, String> {
            v.trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{s:?}: {v:?} is not a whole number of milliseconds"))
        };
        if s == "none" {
            return Ok(RetryPolicy::None);
        }
        if let Some(list) = s.strip_prefix("fixed:") {
            let delays = list.split(',').map(ms).collect::<Result<Vec<_>, _>>()?;
            return Ok(RetryPolicy::Fixed(delays));
        }
        if let Some(max) = s.strip_prefix("jitter:") {
            let max = ms(max)?;
            if max.is_zero() {
                return Err(format!("{s:?}: the jitter bound must be positive"));
            }
            return Ok(RetryPolicy::Jitter(max));
        }
        Err(format!(
            "{s:?}: expected none, fixed:MS[,MS...] or jitter:MAX_MS (e.g. fixed:100,200 or jitter:200)"
        ))
    }
}

impl fmt::Display for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryPolicy::None => f.write_str("none"),
            RetryPolicy::Fixed(v) => {
                let ms: Vec<String> = v.iter().map(|d| d.as_millis().to_string()).collect();
                write!(f, "fixed:{}", ms.join(","))
            }
            RetryPolicy::Jitter(max) => write!(f, "jitter:{}", max.as_millis()),
        }
    }
}

impl serde::Serialize for RetryPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl RetryPolicy {
    /// The delay before retry number `n` (1 = the first retry).
    pub fn delay(&self, n: u32, rng: &mut SplitMix) -> Option<Duration> {
        match self {
            RetryPolicy::None => None,
            RetryPolicy::Fixed(v) => v.get((n as usize).saturating_sub(1)).or(v.last()).copied(),
            RetryPolicy::Jitter(max) => {
                Some(Duration::from_nanos(rng.below(max.as_nanos() as u64 + 1)))
            }
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator. Each
/// client's stream is seeded from the run's `--seed` and the client index
/// through the same mixer, so clients never share a sequence.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// The generator of client `index` for run seed `seed`.
    pub fn for_client(seed: u64, index: u32) -> SplitMix {
        let mut root = SplitMix(seed ^ 0x6832_7072_6f62_6533); // "h2probe3"
        let mut s = root.next_u64();
        for _ in 0..=index {
            s = SplitMix(s ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64();
        }
        SplitMix(s)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n) (n > 0), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_article_schedule_parses_and_answers_by_time() {
        let s: ServiceSchedule = "10ms,12s:40ms,24s:10ms".parse().unwrap();
        let ms = Duration::from_millis;
        assert_eq!(s.at(Duration::ZERO), ms(10));
        assert_eq!(s.at(Duration::from_secs(12)), ms(40));
        assert_eq!(s.at(Duration::from_millis(23_999)), ms(40));
        assert_eq!(s.at(Duration::from_secs(30)), ms(10));
        assert_eq!(s.to_string(), "10ms,12s:40ms,24s:10ms");
        assert!("10ms,40ms".parse::<ServiceSchedule>().is_err());
        assert!("10ms,12s:40ms,5s:10ms".parse::<ServiceSchedule>().is_err());
        assert!("1s:10ms".parse::<ServiceSchedule>().is_err());
        let e = "10ms,40ms".parse::<ServiceSchedule>().unwrap_err();
        assert!(e.contains("needs FROM:DURATION"), "{e}");
        // A service time of a day is the limit.
        assert!("24h".parse::<ServiceSchedule>().is_ok());
        assert!("10ms,1s:24h".parse::<ServiceSchedule>().is_ok());
        let e = "24h 1ns".parse::<ServiceSchedule>().unwrap_err();
        assert!(e.contains("limited to a day"), "{e}");
    }

    /// `as_str` (meta.json, the run's command line) says what clap takes.
    #[test]
    fn names_are_the_ones_the_options_take() {
        use clap::ValueEnum;
        for v in RpcKind::value_variants() {
            assert_eq!(v.to_possible_value().unwrap().get_name(), v.as_str());
        }
        for v in WhenFull::value_variants() {
            assert_eq!(v.to_possible_value().unwrap().get_name(), v.as_str());
        }
        for p in ["none", "fixed:100,200", "jitter:200"] {
            assert_eq!(p.parse::<RetryPolicy>().unwrap().to_string(), p);
        }
    }

    #[test]
    fn retry_policies_parse_and_delay() {
        let mut rng = SplitMix::for_client(1, 0);
        let f: RetryPolicy = "fixed:100,200".parse().unwrap();
        assert_eq!(f.delay(1, &mut rng), Some(Duration::from_millis(100)));
        assert_eq!(f.delay(2, &mut rng), Some(Duration::from_millis(200)));
        assert_eq!(f.delay(5, &mut rng), Some(Duration::from_millis(200)));
        let j: RetryPolicy = "jitter:200".parse().unwrap();
        for _ in 0..1000 {
            let d = j.delay(1, &mut rng).unwrap();
            assert!(d <= Duration::from_millis(200));
        }
        assert_eq!(
            "none".parse::<RetryPolicy>().unwrap().delay(1, &mut rng),
            None
        );
        // The bound itself can be drawn.
        let j = RetryPolicy::Jitter(Duration::from_nanos(1));
        let draws: std::collections::HashSet<_> =
            (0..64).map(|_| j.delay(1, &mut rng).unwrap()).collect();
        assert_eq!(draws.len(), 2, "{draws:?}");
        assert!("fixed:".parse::<RetryPolicy>().is_err());
        assert!("jitter:0".parse::<RetryPolicy>().is_err());
        assert!("sometimes".parse::<RetryPolicy>().is_err());
    }

    #[test]
    fn client_generators_differ_and_repeat() {
        let a: Vec<u64> = (0..4)
            .map(|_| SplitMix::for_client(7, 0).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "same seed, same stream");
        let firsts: std::collections::HashSet<u64> = (0..64)
            .map(|i| SplitMix::for_client(7, i).next_u64())
            .collect();
        assert_eq!(firsts.len(), 64, "every client has its own stream");
        let seeds: std::collections::HashSet<u64> = (0..64)
            .map(|seed| SplitMix::for_client(seed, 0).next_u64())
            .collect();
        assert_eq!(seeds.len(), 64, "every seed has its own stream");
    }

    /// SplitMix64 as published (the reference's first outputs for state
    /// 1234567), and a run's seed gives the clients the streams it gave
    /// before: a seeded run repeats across versions.
    #[test]
    fn the_generator_is_splitmix64_and_seeds_repeat() {
        let mut g = SplitMix(1_234_567);
        assert_eq!(
            [g.next_u64(), g.next_u64()],
            [6_457_827_717_110_365_317, 3_203_168_211_198_807_973]
        );
        let firsts = [0, 1, 3].map(|i| SplitMix::for_client(7, i).next_u64());
        assert_eq!(
            firsts,
            [
                16_396_426_259_473_148_041,
                8_430_960_294_889_320_807,
                15_589_048_499_534_301_470
            ]
        );
        let mut g = SplitMix::for_client(7, 0);
        let mut seen = [0u32; 10];
        for _ in 0..1000 {
            seen[g.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (50..150).contains(&n)), "{seen:?}");
    }
}
