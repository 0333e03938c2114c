//! Many streams, one connection window: bytes and messages per stream, how
//! fairly the streams shared the transport (Jain's index), which stream was
//! starved, and any stall the run recorded.

use super::summary::StreamFigures;
use super::wire_view::Flow;
use super::Analyzer;
use crate::schema::{self, Endpoint};
use std::collections::BTreeMap;

/// A stream that got less than this share of its fair share (total ÷
/// streams) while the others progressed is named as starved.
pub const STARVED_BELOW: f64 = 0.10;

impl Analyzer {
    /// Per-stream figures of the streams not retired yet, from the server's
    /// tap (client→server DATA) and the server's decode events, and the
    /// streams a client offered bytes on that carried none to its server,
    /// sorted by (connection, stream); `fair_share` is the tally's (see
    /// `retire`).
    pub(super) fn stream_figures(&self) -> Vec<StreamFigures> {
        // The client connection of each server connection (same addresses).
        let client_of: BTreeMap<u32, u32> = self.pairs().into_iter().map(|(c, s)| (s, c)).collect();
        let mut out: Vec<StreamFigures> = self
            .conns
            .iter()
            .filter(|((ep, _), _)| *ep == Endpoint::Server)
            .flat_map(|((_, conn), c)| {
                let client = client_of.get(conn).copied();
                c.data_c2s
                    .iter()
                    .map(move |(&stream, &bytes)| self.stream_figure(*conn, client, stream, bytes))
            })
            .collect();
        // Streams offered bytes that carried none: one pass over the
        // client's demand, each looked up on its server connection.
        let server_of: BTreeMap<u32, u32> = client_of.iter().map(|(&s, &c)| (c, s)).collect();
        for (&(client, stream), &offered) in &self.offered {
            let Some(&server) = server_of.get(&client) else {
                continue;
            };
            let Some(c) = self.conns.get(&(Endpoint::Server, server)) else {
                continue;
            };
            if offered > 0 && !c.data_c2s.contains_key(&stream) && !c.retired.contains(stream) {
                out.push(self.stream_figure(server, Some(client), stream, 0));
            }
        }
        out.sort_by_key(|f| (f.conn, f.stream));
        out
    }

    /// One stream's figures: `bytes` the server's tap read on it, its
    /// messages, the client's demand when its side is in the trace, and
    /// both up to the first stall when one came while it was open.
    pub(super) fn stream_figure(
        &self,
        server: u32,
        client: Option<u32>,
        stream: u32,
        bytes: u64,
    ) -> StreamFigures {
        let offered = client.and_then(|c| self.offered.get(&(c, stream)).copied());
        let stalled = self.first_stall.is_some();
        let after = |m: &std::collections::HashMap<(u32, u32), u64>, conn| {
            m.get(&(conn, stream)).copied().unwrap_or(0)
        };
        let rpc = self.rpcs.get(&(server, stream));
        let sent = client.and_then(|c| self.client_messages.get(&(c, stream)).copied());
        StreamFigures {
            conn: server,
            stream,
            bytes,
            messages: rpc.map_or(0, |r| r.decoded),
            scheduled: sent.map(|m| m.scheduled),
            sent: sent.map(|m| m.sent),
            never_sent: sent.map(|m| m.never_sent),
            completed: rpc.map_or(0, |r| r.completed),
            discarded: rpc.map_or(0, |r| r.discarded),
            offered_bytes: offered,
            bytes_before_stall: stalled.then(|| bytes - after(&self.after_stall.bytes, server)),
            offered_before_stall: stalled
                .then(|| Some(offered? - after(&self.after_stall.offered, client?)))
                .flatten(),
            fair_share: 0.0,
        }
    }

    /// The first stall's cause (see [`super::summary::Summary::stall_cause`])
    /// and its description, from the stream states at `t`: each stream's
    /// unreleased bytes and how many of them belong to a message it has not
    /// decoded yet (bytes received − framed bytes decoded, from the trace).
    pub(super) fn describe_stall(&self, t: u64, st: &schema::StallEv) -> (StallCause, String) {
        let partial = |conn: u32, stream: u32| {
            self.rpcs
                .get(&(conn, stream))
                .map_or(0, |r| r.chunks.saturating_sub(r.decoded_bytes))
        };
        let mut per_conn: BTreeMap<u32, u64> = BTreeMap::new();
        for x in &st.streams {
            *per_conn.entry(x.conn).or_default() += x.unreleased;
        }
        // The server writes its window; without it (a client's stall, an
        // older trace) no share of it can be judged a deadlock.
        let window = st.conn_window.unwrap_or(u64::MAX);
        let window_text = st
            .conn_window
            .map_or("an unrecorded window".to_string(), |w| format!("{w} B"));
        let cause = stall_cause(
            window,
            st.streams
                .iter()
                .map(|x| (x.conn, x.unreleased, partial(x.conn, x.stream), x.available)),
        );
        // The connection credit the client still had on the wire at `t`:
        // the server tap's reconstructed receive window (None without it).
        let credit = |c: u32| {
            self.conns
                .get(&(Endpoint::Server, c))
                .map(|x| x.flows[Flow::C2s as usize].conn())
        };
        let conns: Vec<String> = per_conn
            .iter()
            .map(|(c, u)| {
                format!(
                    "connection {c}: {u} of {window_text} held unreleased, {} of connection credit on the wire",
                    credit(*c).map_or("no record".to_string(), |v| format!("{v} B"))
                )
            })
            .collect();
        let streams: Vec<String> = st
            .streams
            .iter()
            .map(|x| {
                format!(
                    "{}/{}: {} B unreleased ({} B of an undecoded message), h2 available_capacity {} B",
                    x.conn,
                    x.stream,
                    x.unreleased,
                    partial(x.conn, x.stream).min(x.unreleased),
                    x.available
                )
            })
            .collect();
        // Starvation drains the shared connection window when a
        // connection's credit on the wire is spent (or, without the server's
        // tap, when the held bytes fill the window); with credit left, the
        // starving stream spent its own window and the others go on.
        let filled = per_conn
            .iter()
            .any(|(c, &held)| credit(*c).map_or(held >= window, |v| v <= 0));
        // Nothing held on the server's side, while the client's tap (in a
        // `run`) shows streams h2 held pending open: they are what waits
        // (more --streams than the server allows, the first ones idle).
        let held: Vec<String> = self
            .conns
            .iter()
            .filter(|((ep, _), _)| *ep == Endpoint::Client)
            .filter_map(|((_, c), x)| {
                x.not_open_text()
                    .map(|t| format!("client connection {c}: {t}"))
            })
            .collect();
        let cause = match cause {
            StallCause::Other if !held.is_empty() => StallCause::NotOpen,
            c => c,
        };
        let explain = match cause {
            StallCause::Starvation if !filled => {
                "starvation (a stream holds decoded bytes it never released: its own stream window is spent, while the connection window still has credit)"
            }
            c => c.explain(),
        };
        let text = format!(
            "{}: at {:.3}s nothing reached the application for {:.1}s with {} messages pending; {}; {}",
            explain,
            self.secs(t),
            st.timeout_ns as f64 / 1e9,
            st.pending,
            conns.join("; "),
            if streams.is_empty() {
                "no open stream".to_string()
            } else {
                streams.join("; ")
            }
        );
        let text = if held.is_empty() {
            text
        } else {
            format!("{text}; {}", held.join("; "))
        };
        (cause, text)
    }
}

impl super::wire_view::Conn {
    /// The client's streams h2 held pending open on this connection, and
    /// what held them: `streams 3, 5 not open (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS is 1)`; the first 10 ids named.
    pub(super) fn not_open_text(&self) -> Option<String> {
        if self.not_open.is_empty() {
            return None;
        }
        const NAMED: usize = 10;
        let mut ids: Vec<String> = self
            .not_open
            .iter()
            .take(NAMED)
            .map(u32::to_string)
            .collect();
        if self.not_open.len() > NAMED {
            ids.push(format!("… ({} in all)", self.not_open.len()));
        }
        let limit = match self.peer_max_streams {
            Some(n) => format!("the server's SETTINGS_MAX_CONCURRENT_STREAMS is {n}"),
            None if !self.peer_settings_seen => {
                "the server sent no SETTINGS: no stream opens before them".into()
            }
            None => "the server sent no SETTINGS_MAX_CONCURRENT_STREAMS".into(),
        };
        Some(format!(
            "{} {} not open ({limit})",
            if self.not_open.len() == 1 {
                "stream"
            } else {
                "streams"
            },
            ids.join(", ")
        ))
    }
}

impl Analyzer {
    /// A stall the client recorded (`h2probe client`: the server is not in
    /// the trace): described with the send windows reconstructed from the
    /// client's tap at `t`. `no_credit` when a window it needed was ≤ 0.
    pub(super) fn describe_client_stall(
        &self,
        t: u64,
        st: &schema::StallEv,
    ) -> (StallCause, String) {
        let mut parts = vec![];
        let mut exhausted = false;
        let mut not_open = false;
        for ((_, conn), c) in self
            .conns
            .iter()
            .filter(|((ep, _), _)| *ep == Endpoint::Client)
        {
            let w = &c.flows[Flow::C2s as usize];
            let mut streams: Vec<(u32, i64)> = w.streams().collect();
            streams.sort_unstable();
            exhausted |= w.conn() <= 0 || streams.iter().any(|&(_, v)| v <= 0);
            let mut list: Vec<String> = streams
                .iter()
                .map(|(id, v)| format!("stream {id} window {v} B"))
                .collect();
            if let Some(held) = c.not_open_text() {
                not_open = true;
                list.push(held);
            }
            parts.push(format!(
                "connection {conn}: send window {} B; {}",
                w.conn(),
                list.join(", ")
            ));
        }
        let cause = if exhausted {
            StallCause::NoCredit
        } else if not_open {
            StallCause::NotOpen
        } else {
            StallCause::Other
        };
        let text = format!(
            "{}: at {:.3}s the client could send nothing for {:.1}s with {} messages pending; {}",
            cause.explain(),
            self.secs(t),
            st.timeout_ns as f64 / 1e9,
            st.pending,
            if parts.is_empty() {
                "no connection in the trace".to_string()
            } else {
                parts.join("; ")
            }
        );
        (cause, text)
    }
}

/// Why a run stopped progressing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallCause {
    /// The streams holding a connection's credit hold only bytes of a
    /// message they cannot decode yet, and together those bytes fill the
    /// connection window: each waits for credit another (or itself) holds.
    Deadlock,
    /// Some stream holds decoded bytes it never released (a stalled or
    /// dropped stream draining the shared window).
    Starvation,
    /// Seen from the client alone: a send window it needed stayed ≤ 0
    /// (the server withheld credit; why needs the server's side).
    NoCredit,
    /// A stream with messages to send never got its HEADERS out (h2 held it
    /// pending open: the server allowed no more concurrent streams, or sent
    /// no SETTINGS yet), and nothing else was held: seen from the client
    /// alone, or from the client's tap beside the server's stall in a run.
    NotOpen,
    /// Neither (nothing held: the sender itself stopped, or the bytes are
    /// held somewhere the trace does not show).
    Other,
}

impl StallCause {
    pub fn as_str(self) -> &'static str {
        match self {
            StallCause::Deadlock => "deadlock",
            StallCause::Starvation => "starvation",
            StallCause::NoCredit => "no_credit",
            StallCause::NotOpen => "not_open",
            StallCause::Other => "other",
        }
    }

    fn explain(self) -> &'static str {
        match self {
            StallCause::Deadlock => {
                "deadlock (every stream holding credit holds only part of a message it cannot decode, and together they fill the connection window, or one fills its own stream window)"
            }
            StallCause::Starvation => {
                "starvation (a stream holds decoded bytes it never released, draining the shared connection window)"
            }
            StallCause::NoCredit => {
                "no credit (the client's send window stayed exhausted: the server withheld credit; its trace would say why)"
            }
            StallCause::NotOpen => {
                "not open (a stream with messages to send never got its HEADERS out: h2 holds a new stream until the server allows one more concurrent stream, and the client opens none before the server's first SETTINGS)"
            }
            StallCause::Other => {
                "other (neither starvation nor deadlock: no stream holds decoded bytes it never released, and the partial messages held do not fill the connection window)"
            }
        }
    }
}

impl std::fmt::Display for StallCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Classifies a stall from `(connection, unreleased bytes, bytes of an
/// undecoded partial message, h2's available capacity)` per open stream.
pub fn stall_cause(
    conn_window: u64,
    streams: impl Iterator<Item = (u32, u64, u64, i64)>,
) -> StallCause {
    // Bytes held per connection, by streams that hold only part of a message.
    let mut partials: BTreeMap<u32, u64> = BTreeMap::new();
    // A stream holding only part of a message with no credit left waits on
    // itself: its stream window is full of a message it cannot release
    // (a message larger than the window, released late).
    let mut self_locked = false;
    for (conn, unreleased, partial, available) in streams {
        if unreleased > partial {
            return StallCause::Starvation;
        }
        self_locked |= unreleased > 0 && available <= 0;
        *partials.entry(conn).or_default() += unreleased;
    }
    if self_locked || partials.values().any(|&p| p > 0 && p >= conn_window) {
        StallCause::Deadlock
    } else {
        StallCause::Other
    }
}

#[cfg(test)]
mod tests {
    use super::{stall_cause, StallCause};

    #[test]
    fn a_stall_is_a_deadlock_only_when_partials_alone_fill_the_window() {
        // Four streams, each holding part of a 32 KiB unit: 65,535 B together.
        let dl = [
            (2, 16332, 16332, 16),
            (2, 16401, 16401, 32),
            (2, 16401, 16401, 64),
            (2, 16401, 16401, 1),
        ];
        assert_eq!(stall_cause(65_535, dl.into_iter()), StallCause::Deadlock);
        // The same, but the partials leave credit: not a deadlock.
        assert_eq!(stall_cause(1 << 20, dl.into_iter()), StallCause::Other);
        // One stream holds decoded bytes it never released.
        let st = [(2, 0, 0, 1), (2, 65_535, 400, 0), (2, 0, 0, 1)];
        assert_eq!(stall_cause(65_535, st.into_iter()), StallCause::Starvation);
        // A single stream whose partial message fills the window waits on itself.
        assert_eq!(
            stall_cause(65_535, [(2, 65_535, 65_535, 0)].into_iter()),
            StallCause::Deadlock
        );
        assert_eq!(
            stall_cause(65_535, [(2, 1_000, 1_000, 7_192)].into_iter()),
            StallCause::Other
        );
        // Part of a message larger than its stream window, the window
        // exhausted: the stream waits on itself, the connection far from full
        // (--release complete --stream-window 8KiB --allow-deadlock).
        assert_eq!(
            stall_cause(65_535, [(2, 8_192, 8_192, 0)].into_iter()),
            StallCause::Deadlock
        );
        assert_eq!(stall_cause(65_535, std::iter::empty()), StallCause::Other);
    }
}
