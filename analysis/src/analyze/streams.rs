//! Many streams, one connection window: bytes and messages per stream, how
//! fairly the streams shared the transport (Jain's index), which stream was
//! starved, and any stall the run recorded.

use super::summary::StreamFigures;
use super::wire_view::Flow;
use super::Analyzer;
use crate::schema::{self, Endpoint, ReleasePoint};
use std::collections::BTreeMap;

/// A stream that got less than this share of its fair share (total ÷
/// streams) while the others progressed is named as starved.
pub const STARVED_BELOW: f64 = 0.10;

impl Analyzer {
    /// The client tap's connections not retired, by id (the text that
    /// lists them reads the same on every analysis of one trace; the map's
    /// order is not).
    fn client_conns(&self) -> Vec<(u32, &super::wire_view::Conn)> {
        let mut v: Vec<(u32, &super::wire_view::Conn)> = self
            .conns
            .iter()
            .filter(|((ep, _), _)| *ep == Endpoint::Client)
            .map(|((_, id), c)| (*id, c))
            .collect();
        v.sort_unstable_by_key(|(id, _)| *id);
        v
    }

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
            // A unary call's message was scheduled on its connection.
            scheduled: sent.and_then(|m| {
                (m.scheduled > 0 || m.sent.saturating_add(m.never_sent) == 0).then_some(m.scheduled)
            }),
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
    /// and its description, from each open stream's state at `t` as the
    /// trace gives it: its release point (`rpc_start`), the bytes its
    /// application read (`chunk`) and did not release (`release`), the part
    /// of them in a message not decoded yet (`decode`), the bytes h2
    /// received (the server's tap), the client's credit on the stream (its
    /// reconstructed window) and a dropped body (`body_drop`). h2's own
    /// figures in the event (`unreleased`, `available`) are shown, not
    /// judged on: they leave out what h2 buffered, and `available` counts
    /// credit h2 has not announced yet.
    pub(super) fn describe_stall(&self, t: u64, st: &schema::StallEv) -> (StallCause, String) {
        let states: Vec<StalledStream> =
            st.streams.iter().map(|x| self.stalled_stream(x)).collect();
        let mut per_conn: BTreeMap<u32, u64> = BTreeMap::new();
        for s in &states {
            *per_conn.entry(s.conn).or_default() += s.held;
        }
        // The server writes its window; without it (a client's stall, an
        // older trace) no share of it can be judged a deadlock.
        let window = st.conn_window.unwrap_or(u64::MAX);
        let window_text = st
            .conn_window
            .map_or("an unrecorded window".to_string(), |w| format!("{w} B"));
        let cause = stall_cause(window, states.iter().copied());
        // The connection credit the client still had on the wire at `t`:
        // the server tap's reconstructed receive window (None when the tap
        // recorded nothing of the connection: its entry then comes from
        // application events, and its window is only the default).
        let credit = |c: u32| {
            self.conns
                .get(&(Endpoint::Server, c))
                .filter(|x| x.tapped)
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
            .zip(&states)
            .map(|(x, s)| {
                let mut text = format!(
                    "{}/{}: {} B unreleased ({} B of an undecoded message), {} of stream credit on the wire",
                    x.conn,
                    x.stream,
                    s.held,
                    s.partial.min(s.held),
                    s.credit.map_or("no record".to_string(), |v| format!("{v} B")),
                );
                if let Some(p) = s.release {
                    text.push_str(&format!(", release at {}", p.as_str()));
                }
                if s.awaiting > 0 {
                    text.push_str(&format!(
                        ", {} B of decoded messages awaiting their release point",
                        s.awaiting
                    ));
                }
                if s.unread > 0 {
                    text.push_str(&format!(", {} B received the application never read", s.unread));
                }
                if s.body_dropped {
                    text.push_str(", body dropped by the application");
                }
                text.push_str(&format!(
                    " (the server's own count: {} B unreleased; h2's available_capacity {} B)",
                    x.unreleased, x.available
                ));
                text
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
            .client_conns()
            .into_iter()
            .filter_map(|(c, x)| {
                x.not_open_text()
                    .map(|t| format!("client connection {c}: {t}"))
            })
            .collect();
        let nothing_held = states.iter().all(|s| s.held == 0 && !s.body_dropped);
        let cause = match cause {
            StallCause::Other if !held.is_empty() && nothing_held => StallCause::NotOpen,
            c => c,
        };
        let own_window_spent = states
            .iter()
            .any(|s| s.withholds() && s.credit.is_some_and(|c| c <= 0));
        let explain = match cause {
            StallCause::Starvation if !filled && own_window_spent => {
                "starvation (a stream holds bytes its release point should have released: its own stream window is spent, while the connection window still has credit)"
            }
            StallCause::Starvation if !filled => {
                "starvation (a stream holds bytes its release point should have released; its stream and the connection still had credit on the wire)"
            }
            c => c.explain(),
        };
        // No connection open reads without an empty part ("pending; ; no
        // open stream").
        let mut parts = conns;
        if streams.is_empty() {
            parts.push("no open stream".to_string());
        } else {
            parts.extend(streams);
        }
        let text = format!(
            "{}: at {:.3}s nothing reached the application for {:.1}s with {} messages pending; {}",
            explain,
            self.secs(t),
            st.timeout_ns as f64 / 1e9,
            st.pending,
            parts.join("; "),
        );
        let text = if held.is_empty() {
            text
        } else {
            format!("{text}; {}", held.join("; "))
        };
        (cause, text)
    }
}

impl Analyzer {
    /// One open stream of a stall, from the trace (see `describe_stall`).
    fn stalled_stream(&self, x: &schema::StallStream) -> StalledStream {
        let rpc = self.rpcs.get(&(x.conn, x.stream));
        let conn = self.conns.get(&(Endpoint::Server, x.conn));
        let read = rpc.map_or(0, |r| r.chunks);
        let received = conn.and_then(|c| c.data_c2s.get(&x.stream).copied());
        let release = rpc.and_then(|r| r.release);
        // Decoded messages whose release point has not come: not started
        // under `start`, not completed under `complete`.
        let awaiting = rpc.map_or(0, |r| {
            r.msgs
                .values()
                .filter(|(_, state)| match release {
                    Some(ReleasePoint::Start) => *state != super::messages::MsgState::InService,
                    Some(ReleasePoint::Complete) => true,
                    _ => false,
                })
                .map(|(framed, _)| *framed as u64)
                .sum()
        });
        StalledStream {
            conn: x.conn,
            held: rpc.map_or(0, |r| r.unreleased.max(0) as u64),
            partial: rpc.map_or(0, |r| r.chunks.saturating_sub(r.decoded_bytes)),
            awaiting,
            release,
            unread: received.map_or(0, |b| b.saturating_sub(read)),
            credit: conn.and_then(|c| c.flows[Flow::C2s as usize].tracked(x.stream)),
            body_dropped: rpc.is_some_and(|r| r.body_dropped),
        }
    }
}

impl StalledStream {
    /// Holds bytes its release point should have released (see
    /// [`stall_cause`]); a dropped body is the application's.
    pub fn withholds(&self) -> bool {
        let may_hold = match self.release {
            Some(ReleasePoint::Frame) => 0,
            _ => self.partial + self.awaiting,
        };
        !self.body_dropped && self.held > may_hold
    }
}

/// An open stream at a stall, as the trace has it up to the stall's `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StalledStream {
    pub conn: u32,
    /// Bytes the application read (`chunk`) and did not release.
    pub held: u64,
    /// Bytes read that belong to a message not decoded yet.
    pub partial: u64,
    /// Framed bytes of decoded messages whose release point has not come
    /// (not started under `start`, not completed under `complete`).
    pub awaiting: u64,
    /// The stream's release point (None: an older trace, which did not say).
    pub release: Option<ReleasePoint>,
    /// Bytes the server's tap saw arrive that the application never read
    /// (h2 buffered them, or discarded them after a dropped body).
    pub unread: u64,
    /// The client's send credit on the stream, reconstructed from the
    /// server's tap (None without its frames).
    pub credit: Option<i64>,
    /// The application dropped the body: what it holds is its bug's.
    pub body_dropped: bool,
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
        for (conn, c) in self.client_conns() {
            let w = &c.flows[Flow::C2s as usize];
            let streams = w.streams();
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
    /// Some stream holds bytes its release point should have released (a
    /// stalled stream draining the shared window).
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
                "starvation (a stream holds bytes its release point should have released, draining the shared connection window)"
            }
            StallCause::NoCredit => {
                "no credit (the client's send window stayed exhausted: the server withheld credit; its trace would say why)"
            }
            StallCause::NotOpen => {
                "not open (a stream with messages to send never got its HEADERS out: h2 holds a new stream until the server allows one more concurrent stream, and the client opens none before the server's first SETTINGS)"
            }
            StallCause::Other => {
                "other (neither starvation nor deadlock: no stream holds bytes its release point should have released, none is out of credit holding only part of a message, and the partial messages held do not fill the connection window; a stream whose body the application dropped is left out of these)"
            }
        }
    }
}

impl std::fmt::Display for StallCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Classifies a stall from its open streams (see [`StalledStream`]):
///
/// - *starvation*: a stream holds bytes its release point should have
///   released: more than its partial message and the decoded messages
///   its point has not come for (under `frame`, any byte read; under
///   `decode`, any decoded byte; under `start` and `complete`, bytes of
///   messages started, or completed);
/// - *deadlock*: a stream under a late point holds only part of a message
///   and the client has no credit left on it (a message larger than its
///   stream window: it waits on itself), or the streams of a connection
///   holding only partial messages hold the whole connection window;
/// - *other*: neither (a dropped body is the application's, not the
///   window's).
pub fn stall_cause(conn_window: u64, streams: impl Iterator<Item = StalledStream>) -> StallCause {
    // Per connection: bytes held by streams that hold only part of a
    // message, and whether a stream holds decoded messages its worker will
    // still release (then the connection is not locked).
    let mut partials: BTreeMap<u32, (u64, bool)> = BTreeMap::new();
    let mut self_locked = false;
    for s in streams.filter(|s| !s.body_dropped) {
        if s.withholds() {
            return StallCause::Starvation;
        }
        self_locked |=
            s.held > 0 && s.held <= s.partial && s.unread == 0 && s.credit.is_some_and(|c| c <= 0);
        let c = partials.entry(s.conn).or_default();
        if s.held <= s.partial {
            c.0 += s.held;
        } else {
            c.1 = true;
        }
    }
    let filled = |&(p, releasing): &(u64, bool)| !releasing && p > 0 && p >= conn_window;
    if self_locked || partials.values().any(filled) {
        StallCause::Deadlock
    } else {
        StallCause::Other
    }
}

#[cfg(test)]
mod tests {
    use super::{stall_cause, StallCause, StalledStream};
    use crate::schema::ReleasePoint;

    /// A stream under `release` holding `held` bytes read and unreleased,
    /// `partial` of them in an undecoded message, with `credit` left.
    fn st(release: ReleasePoint, held: u64, partial: u64, credit: i64) -> StalledStream {
        StalledStream {
            conn: 2,
            held,
            partial,
            awaiting: 0,
            release: Some(release),
            unread: 0,
            credit: Some(credit),
            body_dropped: false,
        }
    }

    #[test]
    fn a_stall_is_a_deadlock_only_when_partials_alone_fill_a_window() {
        use ReleasePoint::{Complete, Decode, Frame};
        // Four streams, each holding part of a 32 KiB unit: 65,535 B together.
        let dl = [
            st(Decode, 16332, 16332, 49_203),
            st(Decode, 16401, 16401, 49_134),
            st(Decode, 16401, 16401, 49_134),
            st(Decode, 16401, 16401, 49_134),
        ];
        assert_eq!(stall_cause(65_535, dl.into_iter()), StallCause::Deadlock);
        // The same, but the partials leave credit: not a deadlock.
        assert_eq!(stall_cause(1 << 20, dl.into_iter()), StallCause::Other);
        // One stream holds decoded bytes it never released.
        let starving = [
            st(Decode, 0, 0, 1),
            st(Decode, 65_535, 400, 0),
            st(Decode, 0, 0, 1),
        ];
        assert_eq!(
            stall_cause(65_535, starving.into_iter()),
            StallCause::Starvation
        );
        // Under --release frame every byte read should have been released
        // (--stall-stream): starvation, though all of it is a partial message.
        assert_eq!(
            stall_cause(65_535, [st(Frame, 8_175, 8_187, 0)].into_iter()),
            StallCause::Starvation
        );
        // A partial message larger than its stream window, the window spent
        // on the wire: the stream waits on itself (--release complete
        // --stream-window 8KiB --allow-deadlock), the connection far from full.
        assert_eq!(
            stall_cause(65_535, [st(Complete, 8_192, 8_192, 0)].into_iter()),
            StallCause::Deadlock
        );
        // The same with credit left on the wire (h2's available_capacity may
        // read 0 while it has not announced released bytes, and the reverse).
        assert_eq!(
            stall_cause(65_535, [st(Complete, 1_000, 1_000, 7_192)].into_iter()),
            StallCause::Other
        );
        // Bytes h2 received that the application never read: it is not
        // waiting on the window.
        let unread = StalledStream {
            unread: 12_272,
            ..st(Complete, 4_112, 4_112, 0)
        };
        assert_eq!(stall_cause(65_535, [unread].into_iter()), StallCause::Other);
        // A body the application dropped (--drop-stream) is its bug, whatever
        // its window: neither starvation nor deadlock.
        for (held, credit) in [(16_384, 0), (4_112, 0), (16_384, 49_151)] {
            let dropped = StalledStream {
                body_dropped: true,
                ..st(Frame, held, held, credit)
            };
            assert_eq!(
                stall_cause(65_535, [dropped].into_iter()),
                StallCause::Other
            );
        }
        // Decoded messages waiting for their point are rightly held: under
        // complete, two messages queued and in service beside nothing
        // partial (the client finished sending); under start, the ones not
        // started. Read as starvation, as if released at decode.
        let queued = StalledStream {
            awaiting: 32_808,
            ..st(Complete, 32_808, 0, 16_323)
        };
        assert_eq!(stall_cause(65_535, [queued].into_iter()), StallCause::Other);
        let not_started = StalledStream {
            awaiting: 32_808,
            ..st(ReleasePoint::Start, 32_808, 0, 16_323)
        };
        assert_eq!(
            stall_cause(65_535, [not_started].into_iter()),
            StallCause::Other
        );
        // Under decode the same bytes should have gone.
        let decoded = StalledStream {
            awaiting: 0,
            ..st(Decode, 32_808, 0, 16_323)
        };
        assert_eq!(
            stall_cause(65_535, [decoded].into_iter()),
            StallCause::Starvation
        );
        // A stream whose worker will still release is not locked, though
        // the held bytes fill the connection window with the partials.
        let busy = [
            StalledStream {
                awaiting: 16_401,
                ..st(Complete, 32_802, 16_401, 0)
            },
            st(Complete, 32_733, 32_733, 16_000),
        ];
        assert_eq!(stall_cause(65_535, busy.into_iter()), StallCause::Other);
        // An older trace (no release point, no tap): as before, the partials
        // against the connection window.
        let old = StalledStream {
            release: None,
            credit: None,
            ..st(Decode, 65_535, 65_535, 0)
        };
        assert_eq!(stall_cause(65_535, [old].into_iter()), StallCause::Deadlock);
        assert_eq!(stall_cause(65_535, std::iter::empty()), StallCause::Other);
    }
}
