//! The invariant checks: each says true, false (a violation, with the first
//! offender) or null (the trace cannot tell, and why).

use super::retire::ByteTally;
use super::summary::{Check, Summary, Unpaired};
use super::wire_view::Flow;
use super::Analyzer;
use crate::schema::Endpoint;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

impl Analyzer {
    /// Pairs each client connection with the server connection on the same
    /// socket (addresses swapped), or at the other end of a relay's pair:
    /// (client conn id, server conn id).
    pub(super) fn pairs(&self) -> Vec<(u32, u32)> {
        self.retirement.pairs()
    }

    /// Whether the server ended this RPC with OK. A stream cut short (reset,
    /// deadline, shutdown) may legitimately lose the bytes in flight.
    fn ended_ok(&self, server_conn: u32, stream: u32) -> bool {
        self.server_status.get(&(server_conn, stream)) == Some(&0)
    }

    /// DATA payload bytes a tap saw on a stream, c2s.
    fn tap_c2s(&self, ep: Endpoint, conn: u32, id: u32) -> u64 {
        self.conns
            .get(&(ep, conn))
            .and_then(|c| c.data_c2s.get(&id).copied())
            .unwrap_or(0)
    }

    /// Bytes h2 handed to the server's application on a stream (`chunk`).
    fn app_bytes(&self, sid: u32, id: u32) -> u64 {
        self.rpcs.get(&(sid, id)).map_or(0, |r| r.chunks)
    }

    /// Whether a stream has a share in `bytes`: its DATA crossed a tap
    /// (`ep`'s, or `also`'s), or bytes reached the server's application,
    /// or (one-sided client) the client sent a message on it. A stream
    /// whose tap saw nothing while its application got bytes is the worst
    /// disagreement there is, not one to leave out.
    pub(super) fn carried(&self, ep: Endpoint, conn: u32, id: u32) -> bool {
        let tap = self
            .conns
            .get(&(ep, conn))
            .is_some_and(|c| c.data_c2s.contains_key(&id));
        tap || match ep {
            Endpoint::Server => self.app_bytes(conn, id) > 0,
            _ => self
                .client_messages
                .get(&(conn, id))
                .is_some_and(|m| m.sent_bytes > 0),
        }
    }

    /// One paired stream's share of the `bytes` check: whether it was cut
    /// short (not ended OK) and, if its counts disagree, how.
    pub(super) fn byte_verdict(&self, cid: u32, sid: u32, id: u32) -> (bool, Option<String>) {
        let out = self.tap_c2s(Endpoint::Client, cid, id);
        let inn = self.tap_c2s(Endpoint::Server, sid, id);
        let app = self.app_bytes(sid, id);
        let (cut, holds) = if self.ended_ok(sid, id) {
            (false, out == inn && inn == app)
        } else {
            // Cut short: bytes may be lost in flight or in h2's buffers,
            // never created.
            (true, out >= inn && inn >= app)
        };
        let bad =
            (!holds).then(|| {
                format!(
                    "client connection {cid}, server connection {sid}, stream {id}: client tap out {out}, server tap in {inn}, app {app}"
                )
            });
        (cut, bad)
    }

    /// Whether a paired stream has a share in `bytes`: DATA on either tap,
    /// or bytes at the server's application.
    pub(super) fn pair_carried(&self, cid: u32, sid: u32, id: u32) -> bool {
        let client_tap = self
            .conns
            .get(&(Endpoint::Client, cid))
            .is_some_and(|c| c.data_c2s.contains_key(&id));
        client_tap || self.carried(Endpoint::Server, sid, id)
    }

    /// A server stream's share of the one-sided `bytes` check (a stream no
    /// client tap paired with): its tap's DATA in against the bytes handed
    /// to the application, equal if it ended OK, else never fewer in.
    pub(super) fn own_server_bytes(&self, sid: u32, id: u32) -> (bool, Option<String>) {
        let inn = self.tap_c2s(Endpoint::Server, sid, id);
        let app = self.app_bytes(sid, id);
        let (cut, holds) = if self.ended_ok(sid, id) {
            (false, inn == app)
        } else {
            (true, inn >= app)
        };
        let bad = (!holds)
            .then(|| format!("connection {sid} stream {id}: server tap in {inn}, app {app}"));
        (cut, bad)
    }

    /// A client stream's share of the one-sided `bytes` check: its tap's
    /// DATA out against the framed bytes of the messages it sent. Judged
    /// only once the tap wrote the stream's END_STREAM, which leaves after
    /// every byte handed to h2 before it; else (`None`) h2 may have dropped
    /// sent bytes it still held at a reset. A message given up midway (by a
    /// deadline, an error, an interrupt or a stall) may have left part of
    /// itself with no `send`: sent ≤ out ≤ sent + the stream's largest
    /// message there.
    pub(super) fn own_client_bytes(&self, cid: u32, id: u32) -> Option<(bool, Option<String>)> {
        let conn = self.conns.get(&(Endpoint::Client, cid))?;
        if !conn.ended_c2s.contains(&id) {
            return None;
        }
        let out = self.tap_c2s(Endpoint::Client, cid, id);
        let m = self
            .client_messages
            .get(&(cid, id))
            .copied()
            .unwrap_or_default();
        let holds = if m.stopped_midway {
            // A unary call's message is its connection's: no bound known.
            let most = match m.max_framed {
                0 => u64::MAX,
                n => m.sent_bytes.saturating_add(n),
            };
            (m.sent_bytes..=most).contains(&out)
        } else {
            out == m.sent_bytes
        };
        let bad = (!holds).then(|| {
            format!(
                "connection {cid} stream {id}: client tap out {out}, framed bytes sent {}",
                m.sent_bytes
            )
        });
        Some((m.stopped_midway, bad))
    }

    /// One side's own share of `bytes` (its tap against its application)
    /// over the streams no other tap paired with: those retired during the
    /// pass, and those left on connections `paired` does not hold.
    fn own_tally(&self, client: bool, paired: &HashSet<u32>) -> ByteTally {
        let ep = if client {
            Endpoint::Client
        } else {
            Endpoint::Server
        };
        let mut t = self.own_bytes[usize::from(client)].clone();
        for (conn, id) in self.streams_left(ep) {
            if paired.contains(&conn) {
                continue;
            }
            t.add_own(if client {
                self.own_client_bytes(conn, id)
            } else {
                Some(self.own_server_bytes(conn, id))
            });
        }
        t
    }

    /// A side's streams not yet retired that have a share in `bytes` (see
    /// [`Analyzer::carried`]), in order.
    fn streams_left(&self, ep: Endpoint) -> BTreeSet<(u32, u32)> {
        let tapped = self
            .conns
            .iter()
            .filter(|((e, _), _)| *e == ep)
            .flat_map(|((_, conn), c)| c.data_c2s.keys().map(move |id| (*conn, *id)));
        let at_app: Vec<(u32, u32)> = match ep {
            Endpoint::Server => self.rpcs.keys().copied().collect(),
            _ => self.client_messages.keys().copied().collect(),
        };
        tapped
            .chain(at_app)
            .filter(|&(conn, id)| id != 0 && self.carried(ep, conn, id))
            .collect()
    }

    /// The `bytes` check of a trace with one side's events: that side's own
    /// share. A disagreement fails (no event of the other side could mend
    /// it); agreement leaves the check unjudged, since what crossed the
    /// wire needs both taps.
    fn own_byte_check(&self, client: bool) -> Check {
        let t = self.own_tally(client, &HashSet::new());
        let side = if client { "client" } else { "server" };
        if t.bad_count > 0 {
            return Check::new(
                false,
                format!(
                    "{side} only, whose tap and application disagree: {}",
                    with_more(t.bad, t.bad_count)
                ),
            );
        }
        Check::na(format!(
            "needs client and server events in one trace ({side} only: {}); merge a serve and a client run",
            own_text(&t, client)
        ))
    }

    /// The streams retired during the pass (see `retire`) and those left:
    /// paired ones across the taps, and each side's streams no other tap
    /// paired with (a foreign peer's, a relay's not merged) on their own.
    pub(super) fn byte_check(&self, has_client: bool, has_server: bool) -> Check {
        match (has_client, has_server) {
            (true, true) => {}
            (false, false) => return Check::na("needs client and server events in one trace"),
            (client, _) => return self.own_byte_check(client),
        }
        let t = &self.bytes_tally;
        let (mut streams, mut cut) = (t.streams, t.cut);
        let (mut bad, mut bad_count) = (t.bad.clone(), t.bad_count);
        let pairs = self.pairs();
        // Each paired stream once, from either tap's side.
        let by_client: HashMap<u32, u32> = pairs.iter().copied().collect();
        let by_server: HashMap<u32, u32> = pairs.iter().map(|&(c, s)| (s, c)).collect();
        let from_client = self
            .streams_left(Endpoint::Client)
            .into_iter()
            .filter_map(|(cid, id)| Some((cid, *by_client.get(&cid)?, id)));
        let from_server = self
            .streams_left(Endpoint::Server)
            .into_iter()
            .filter_map(|(sid, id)| Some((*by_server.get(&sid)?, sid, id)));
        let paired_streams: BTreeSet<(u32, u32, u32)> = from_client
            .chain(from_server)
            .filter(|&(cid, sid, id)| self.pair_carried(cid, sid, id))
            .collect();
        for (cid, sid, id) in paired_streams {
            streams += 1;
            let (c, b) = self.byte_verdict(cid, sid, id);
            cut += u64::from(c);
            if let Some(b) = b {
                bad_count += 1;
                if bad.len() < super::retire::MAX_DETAILS {
                    bad.push(b);
                }
            }
        }
        let own = [false, true].map(|client| {
            let paired = pairs
                .iter()
                .map(|&(cid, sid)| if client { cid } else { sid })
                .collect();
            self.own_tally(client, &paired)
        });
        for o in &own {
            bad_count += o.bad_count;
            for b in &o.bad {
                if bad.len() < super::retire::MAX_DETAILS {
                    bad.push(format!("unpaired {b}"));
                }
            }
        }
        // What the streams of connections no other tap paired with say.
        let unpaired: Vec<String> = own
            .iter()
            .zip(["server", "client"])
            .filter(|(o, _)| o.streams + o.unjudged > 0)
            .map(|(o, side)| format!("{side}: {}", own_text(o, side == "client")))
            .collect();
        let unpaired = (!unpaired.is_empty()).then(|| {
            format!(
                "; on connections without the other endpoint's tap (a foreign peer's), each side's tap against its application: {}",
                unpaired.join("; ")
            )
        });
        if bad_count > 0 {
            return Check::new(false, with_more(bad, bad_count));
        }
        if streams == 0 {
            return Check::na(format!(
                "no paired streams carried DATA{}",
                unpaired.unwrap_or_default()
            ));
        }
        let mut d = format!(
            "{}: client tap out = server tap in = bytes handed to the app",
            crate::report::counted(streams, "stream")
        );
        if cut > 0 {
            d.push_str(&format!(
                " ({cut} cut short by a reset, deadline or shutdown: out ≥ in ≥ app there)"
            ));
        }
        d.push_str(&unpaired.unwrap_or_default());
        Check::new(true, d)
    }

    /// One connection pair's share of `windows_agree`: `None` when it was
    /// cut short (an RPC on it ended other than OK on either side: frames
    /// in flight were seen by one tap only), else the final windows the
    /// two taps disagree on (named, at most [`super::retire::MAX_DETAILS`],
    /// and counted), its retired streams' included.
    pub(super) fn pair_agreement(&self, cid: u32, sid: u32) -> Option<(Vec<String>, u64)> {
        let all_ok = !self.agree_tally.not_ok.contains(&sid)
            && !self.client_not_ok.contains(&cid)
            && self
                .server_status
                .iter()
                .filter(|((c, _), _)| *c == sid)
                .all(|(_, st)| *st == 0);
        if !all_ok {
            return None;
        }
        let (mut bad, mut bad_count) = self.agree_tally.bad.get(&sid).cloned().unwrap_or_default();
        // Both are folded in together (`conn_retire`): one without the
        // other cannot be compared.
        let (Some(c), Some(s)) = (
            self.conns.get(&(Endpoint::Client, cid)),
            self.conns.get(&(Endpoint::Server, sid)),
        ) else {
            return None;
        };
        for f in [Flow::C2s, Flow::S2c] {
            let (a, b) = (&c.flows[f as usize], &s.flows[f as usize]);
            if a.conn() != b.conn() {
                bad_count += 1;
                bad.push(format!(
                    "{f:?} connection window: client {} vs server {}",
                    a.conn(),
                    b.conn()
                ));
            }
            for (id, w) in a.streams() {
                if b.stream(id) != w {
                    bad_count += 1;
                    bad.push(format!(
                        "{f:?} stream {id}: client {w} vs server {}",
                        b.stream(id)
                    ));
                }
            }
        }
        Some((bad, bad_count))
    }

    pub(super) fn agreement_check(&self, both: bool) -> Check {
        if !both {
            return Check::na("needs both taps in one trace");
        }
        let done = &self.conn_tally.agree;
        let (mut bad, mut bad_count) = (done.bad.clone(), done.bad_count);
        let (mut compared, mut cut) = (done.compared, done.cut);
        for (cid, sid) in self.pairs() {
            match self.pair_agreement(cid, sid) {
                None => cut += 1,
                Some((list, n)) => {
                    compared += 1;
                    bad_count += n;
                    bad.add(cid, list);
                }
            }
        }
        if compared == 0 {
            return Check::na(if cut > 0 {
                format!("{} cut short (reset, deadline or shutdown): frames in flight seen by one tap only", crate::report::counted(cut, "connection"))
            } else {
                "no connection seen by both taps".to_string()
            });
        }
        Check::new(
            bad.is_empty(),
            if bad.is_empty() {
                let mut d = format!(
                    "{}: final windows equal from both taps",
                    crate::report::counted(compared, "connection")
                );
                if cut > 0 {
                    d.push_str(&format!(" ({cut} cut short, not compared)"));
                }
                d
            } else {
                with_more(bad.into_vec(), bad_count)
            },
        )
    }
}

/// How one side's own share of `bytes` reads when it holds (see
/// `Analyzer::own_tally`).
fn own_text(t: &ByteTally, client: bool) -> String {
    let counted = |n| crate::report::counted(n, "stream");
    if t.streams == 0 && t.unjudged == 0 {
        return "no stream of it carried DATA".into();
    }
    if t.streams == 0 {
        return format!(
            "{} carried DATA, none ended by the client's END_STREAM (a reset came first, from either side), \
             so none is judged: h2 may drop sent bytes it holds at a reset",
            counted(t.unjudged)
        );
    }
    let mut text = if client {
        format!(
            "on {}, DATA out of its tap = framed bytes of the messages sent",
            counted(t.streams)
        )
    } else {
        format!(
            "on {}, DATA into its tap = bytes handed to the application",
            counted(t.streams)
        )
    };
    if t.cut > 0 {
        text.push_str(&if client {
            format!(
                " ({} that gave up a message midway, part of which may have left: sent ≤ out ≤ sent + one message there)",
                t.cut
            )
        } else {
            format!(" ({} ended other than OK: in ≥ app there)", t.cut)
        });
    }
    if t.unjudged > 0 {
        text.push_str(&format!(
            "; {} without the client's END_STREAM (a reset came first, from either side) not judged: \
             h2 may drop sent bytes it holds at a reset",
            counted(t.unjudged)
        ));
    }
    text
}

/// Failures named in a check's detail, and how many more there were.
fn with_more(named: Vec<String>, count: u64) -> String {
    let more = count.saturating_sub(named.len() as u64);
    let mut d = named.join("; ");
    if more > 0 {
        d.push_str(&format!("; … and {more} more"));
    }
    d
}

/// What the checks of a finished pass are judged on.
pub(super) struct Evidence<'a> {
    pub s: &'a Summary,
    pub has_client: bool,
    pub has_server: bool,
    /// Drop count from the footer; `None` when there is no footer.
    pub dropped: Option<u64>,
    /// Why the trace is incomplete (cut mid-write, no footer), if it is.
    pub cut: Option<String>,
    /// `t` of the last event, and the trace origin.
    pub end_t: u64,
    pub origin: u64,
    /// Credit violations: count, first description, first (t, line).
    pub credit: (u64, &'a str, Option<(u64, u64)>),
    /// DATA beyond credit and window overflows: count, first description,
    /// first (t, line).
    pub windows: (u64, String, Option<(u64, u64)>),
    pub bytes: Check,
    pub agree: Check,
    /// The first `stall` event: (t, line).
    pub stall: Option<(u64, u64)>,
    /// Releases against their stream's release point, settled.
    pub release: &'a super::release_audit::ReleaseAudit,
    /// The run ended stuck (see [`Stuck`]), if it did.
    pub stuck: Option<Stuck>,
    /// Client RPCs that may excuse messages lost in flight (see
    /// `Analyzer::excusing_not_ok`).
    pub excusing_not_ok: u64,
    /// Why each client connection's books do not balance on their own, if
    /// they do not (see `books`).
    pub books: Option<String>,
}

/// A run that ended while the client's sends waited for capacity and
/// nothing had progressed (what the stall watcher counts: bytes reaching
/// the server's application, or the client's DATA when the trace has the
/// client alone) for longer than any quiet spell the run recovered from:
/// stopped before its stall timeout could tell a stall from a pause.
pub(super) struct Stuck {
    /// The last progress (`None`: none at all) and the end of the waits.
    pub progress: Option<u64>,
    pub given_up: u64,
}

impl Evidence<'_> {
    /// Why nothing can be judged from this trace's events as a whole (cut
    /// short, or events dropped), if so.
    fn incomplete(&self) -> Option<String> {
        if let Some(cut) = &self.cut {
            return Some(format!(
                "{cut}: events in flight at the cut are missing, so this cannot be judged"
            ));
        }
        match self.dropped {
            Some(n) if n > 0 => Some(format!(
                "the recorder dropped {n} events: this cannot be judged"
            )),
            _ => None,
        }
    }

    fn secs(&self, t: u64) -> f64 {
        t.saturating_sub(self.origin) as f64 / 1e9
    }

    /// A violation count judged on a possibly incomplete trace: in a trace
    /// cut short, a violation more than the reorder window before the end
    /// is real whatever is missing after it; without one, an incomplete
    /// trace cannot tell. Dropped events cannot be placed in time (the
    /// footer counts them), so with any, a violation may be one they
    /// explain (a server's flood of 1-byte WINDOW_UPDATEs, half of them
    /// dropped, read as DATA beyond credit): it cannot be judged either.
    fn violations(&self, count: u64, first: &str, at: Option<(u64, u64)>, holds: String) -> Check {
        self.violations_of(count, " (one per window passed)", first, at, holds)
    }

    /// As [`Evidence::violations`], `counted` saying what one is.
    fn violations_of(
        &self,
        count: u64,
        counted: &str,
        first: &str,
        at: Option<(u64, u64)>,
        holds: String,
    ) -> Check {
        if count > 0 {
            let (t, line) = at.unwrap_or((self.end_t, 0));
            let settled = self.dropped.unwrap_or(0) == 0
                && t.saturating_add(super::reorder::WINDOW_NS) < self.end_t;
            if self.incomplete().is_none() || settled {
                return Check::failed_at(
                    format!(
                        "{count} violation{}{counted}; first: {first}",
                        if count == 1 { "" } else { "s" }
                    ),
                    self.secs(t),
                    line,
                );
            }
        }
        match self.incomplete() {
            Some(why) => Check::na(why),
            None => Check::new(true, holds),
        }
    }
}

/// Every check of a finished pass, by name: `true` holds, `false` a
/// violation with its first offender, `null` cannot be judged and why.
/// How an equation of the `accounting` check reads: holding or not.
fn equals(holds: bool) -> &'static str {
    if holds {
        "="
    } else {
        "≠"
    }
}

/// The client's own equation, whether it holds and as the accounting
/// check says it: `scheduled = sent + never_sent`, with a unary run's
/// messages handed from a connection to its replacement on both sides
/// (taken in where they are sent, handed over where they were scheduled),
/// and each connection's books balancing on their own (`unsettled`: why
/// they do not).
fn client_books(s: &Summary, unsettled: Option<&str>) -> (bool, String) {
    let sums = s.scheduled.saturating_add(s.handed_in)
        == s.sent
            .saturating_add(s.never_sent)
            .saturating_add(s.handed_over);
    let holds = sums && unsettled.is_none();
    let mut text = if s.handed_in > 0 || s.handed_over > 0 {
        format!(
            "scheduled {} + handed in {} {} sent {} + never_sent {} + handed over {}",
            s.scheduled,
            s.handed_in,
            equals(sums),
            s.sent,
            s.never_sent,
            s.handed_over
        )
    } else {
        format!(
            "scheduled {} {} sent {} + never_sent {}",
            s.scheduled,
            equals(sums),
            s.sent,
            s.never_sent
        )
    };
    if let Some(why) = unsettled {
        // "but" only where the sums hold and a connection's books do not.
        let joint = if sums { ", but not" } else { "; nor" };
        text.push_str(&format!("{joint} each connection's books: {why}"));
    }
    (holds, text)
}

/// The accounting of a trace with one side's events: that side's own
/// equation is judged (a violation fails, since the other side's events
/// could not mend it), but books that balance leave the check unjudged,
/// since what crossed the wire needs both sides.
fn own_books(s: &Summary, side: &str, unsettled: Option<&str>) -> Check {
    let (holds, text) = if side == "client" {
        client_books(s, unsettled)
    } else {
        let holds = s.decoded == s.completed.saturating_add(s.discarded);
        (
            holds,
            format!(
                "decoded {}{} {} completed {} + discarded {}",
                if s.raw_units { "units " } else { "" },
                s.decoded,
                equals(holds),
                s.completed,
                s.discarded
            ),
        )
    };
    if holds {
        Check::na(format!(
            "needs client and server events in one trace ({side} only: its own books balance, {text}); \
             merge a serve and a client run"
        ))
    } else {
        Check::new(
            false,
            format!("{side} only, whose own books do not balance: {text}"),
        )
    }
}

/// The unpaired connections and their messages, as the accounting check's
/// detail names them.
fn unpaired_text(u: &Unpaired) -> String {
    let sides = [
        (
            u.server_connections,
            ["server", "client"],
            [
                ("decoded", u.decoded),
                ("completed", u.completed),
                ("discarded", u.discarded),
            ],
        ),
        (
            u.client_connections,
            ["client", "server"],
            [
                ("scheduled", u.scheduled),
                ("sent", u.sent),
                ("never_sent", u.never_sent),
            ],
        ),
    ];
    let parts: Vec<String> = sides
        .iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, [side, other], counts)| {
            let counts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            format!(
                "{} no {other} connection of this trace pairs with: {}",
                crate::report::counted(*n, &format!("{side} connection")),
                counts.join(", ")
            )
        })
        .collect();
    format!(
        "{}; the first: {} (its other end not traced or not merged, a relay between them not merged, \
         or an unnamed Unix socket end, which cannot pair)",
        parts.join("; "),
        u.first
    )
}

/// Why the accounting across sides cannot be judged when no connection that
/// carried messages pairs with one of the other side (a relay between them
/// whose trace was not merged, or two runs that never met), if so.
fn nothing_pairs(s: &Summary, u: &Unpaired) -> Option<String> {
    // A message crossed a connection in the equation.
    let client_paired = s.sent.saturating_sub(u.sent) > 0;
    let server_paired = s.decoded.saturating_sub(u.decoded) > 0;
    (!client_paired && !server_paired).then(|| {
        format!(
            "no connection a message crossed pairs with one on the other side's tap, so no message can be matched across sides: {}",
            unpaired_text(u)
        )
    })
}

pub(super) fn invariant_checks(ev: Evidence<'_>) -> BTreeMap<String, Check> {
    let s = ev.s;
    let both = ev.has_client && ev.has_server;
    let mut checks = BTreeMap::new();
    let one_side = |what: Option<&str>| {
        match what {
        Some(what) => Check::na(format!(
            "needs client and server events in one trace ({what} only); merge a serve and a client run"
        )),
        None => Check::na("needs client and server events in one trace; this one has neither"),
    }
    };
    let side = if ev.has_client {
        Some("client")
    } else if ev.has_server {
        Some("server")
    } else {
        None
    };
    checks.insert(
        "accounting".into(),
        if !both {
            match (side, ev.incomplete()) {
                (Some(side), None) => own_books(s, side, ev.books.as_deref()),
                _ => one_side(side),
            }
        } else if let Some(why) = ev.incomplete() {
            Check::na(why)
        } else if s.raw_units {
            let (client, client_text) = client_books(s, ev.books.as_deref());
            let server = s.decoded == s.completed + s.discarded;
            Check::new(
                client && server,
                format!(
                    "the server's work units are not the client's messages (raw framing), so each side is checked on its own: \
                     client: {client_text}; server: decoded units {} {} completed {} + discarded {}",
                    s.decoded,
                    equals(server),
                    s.completed,
                    s.discarded
                ),
            )
        } else if let Some(why) = s.unpaired.as_ref().and_then(|u| nothing_pairs(s, u)) {
            Check::na(why)
        } else {
            let (client, client_text) = client_books(s, ev.books.as_deref());
            let server = s.decoded == s.completed + s.discarded;
            // Only an RPC cut short on a connection in the equation that
            // sent messages loses any (a foreign client's failure, or a
            // refused connection's, excuses nothing here).
            // Both sides are in the trace: both figures are.
            let lost = s.lost_in_flight.expect("both sides: a figure");
            let lost_explained = lost >= 0 && (lost == 0 || ev.excusing_not_ok > 0);
            let whole = s.unaccounted.expect("both sides: a figure") == lost;
            // Across sides only what pairs (`unaccounted` and
            // `lost_in_flight` are): each side's own equation on all it did.
            let u = s.unpaired.clone().unwrap_or_default();
            // A connection's books hold what it handed over or took in
            // (the unpaired figures are per connection): the sums here are
            // of every connection's, as the handed terms say.
            let handed = s.handed_in > 0 || s.handed_over > 0;
            let (scheduled, never_sent) = if handed {
                ("scheduled and handed in", "never_sent and handed over")
            } else {
                ("scheduled", "never_sent")
            };
            let mut detail = format!(
                "{scheduled} {} {} completed {} + discarded {} + {never_sent} {} + lost in flight {}{}; \
                 client: {client_text}; server: decoded {} {} completed {} + discarded {}",
                s.scheduled
                    .saturating_add(s.handed_in)
                    .saturating_sub(u.scheduled),
                equals(whole),
                s.completed.saturating_sub(u.completed),
                s.discarded.saturating_sub(u.discarded),
                s.never_sent
                    .saturating_add(s.handed_over)
                    .saturating_sub(u.never_sent),
                lost,
                if s.unpaired.is_some() {
                    " over the connections paired across the taps"
                } else {
                    ""
                },
                s.decoded,
                equals(server),
                s.completed,
                s.discarded,
            );
            if !lost_explained {
                detail.push_str(if lost < 0 {
                    "; more messages decoded than sent"
                } else {
                    "; lost in flight ≠ 0 though every RPC that sent them ended OK: only a reset loses messages in flight"
                });
            } else if lost > 0 {
                detail.push_str(" (lost at a reset: an RPC ended other than OK)");
            }
            if let Some(u) = &s.unpaired {
                detail.push_str(&format!("; left out across sides: {}", unpaired_text(u)));
            }
            Check::new(client && server && lost_explained && whole, detail)
        },
    );
    checks.insert(
        "bytes".into(),
        match ev.incomplete() {
            Some(why) if both => Check::na(why),
            // One side's own bytes are judged on a whole trace only.
            Some(why) => Check::na(match side {
                Some(side) => format!("{why} (and the trace has the {side}'s events only)"),
                None => why,
            }),
            None => ev.bytes.clone(),
        },
    );
    let (n, first, at) = ev.credit;
    checks.insert(
        "credit".into(),
        if ev.has_server {
            ev.violations(
                n,
                first,
                at,
                if s.max_unreleased_bytes > s.max_stream_unreleased_bytes {
                    format!(
                        "a stream's unreleased bytes peaked at {}, within the advertised window ({} over all streams at once)",
                        s.max_stream_unreleased_bytes, s.max_unreleased_bytes
                    )
                } else {
                    format!(
                        "unreleased bytes peaked at {}, within the advertised window",
                        s.max_stream_unreleased_bytes
                    )
                },
            )
        } else {
            Check::na("no server events")
        },
    );
    let r = ev.release;
    checks.insert(
        "release_point".into(),
        if !ev.has_server {
            Check::na("no server events")
        } else if r.judged == 0 && r.violations == 0 {
            // A damaged trace says why first: the lines lost may be these.
            Check::na(ev.incomplete().unwrap_or_else(|| {
                if r.unjudged > 0 {
                    "no rpc_start names its stream's release point (a trace from before it did)"
                } else {
                    "the server released no bytes at a release point, and no RPC that ended OK had received any it owed"
                }
                .into()
            }))
        } else {
            let mut holds = format!(
                "{} release{} at their stream's release point, none early (a message's once, whole, after its trigger; at frame, within the bytes received)",
                r.judged,
                if r.judged == 1 { "" } else { "s" }
            );
            if r.owed > 0 {
                holds.push_str(&format!(
                    "; {} RPC{} that ended OK released all {} received",
                    r.owed,
                    if r.owed == 1 { "" } else { "s" },
                    if r.owed == 1 { "it" } else { "they" }
                ));
            }
            if r.exempt > 0 {
                holds.push_str(&format!(
                    "; {} that ended OK not asked to (releases withheld by --stall-stream, or a body dropped)",
                    r.exempt
                ));
            }
            if r.unjudged > 0 {
                holds.push_str(&format!(
                    "; {} not judged (their stream's rpc_start names no release point)",
                    r.unjudged
                ));
            }
            ev.violations_of(r.violations, "", &r.first, r.first_at, holds)
        },
    );
    let (n, first, at) = &ev.windows;
    let mut holds = match s.min_window {
        Some(w) => format!("no DATA beyond credit; lowest reconstructed window {w}"),
        None => "no DATA beyond credit; no window reconstructed (no connection)".into(),
    };
    if s.data_past_lowered_window > 0 {
        holds.push_str(&format!(
            " ({} DATA frames passed a window lowered by a SETTINGS the sender had not yet acknowledged: legal, RFC 9113 §6.9.2)",
            s.data_past_lowered_window
        ));
    }
    checks.insert(
        "no_data_beyond_credit".into(),
        if ev.has_client || ev.has_server {
            ev.violations(*n, first, *at, holds)
        } else {
            Check::na("no events")
        },
    );
    checks.insert(
        "windows_agree".into(),
        match ev.incomplete() {
            Some(why) if both => Check::na(why),
            _ => ev.agree.clone(),
        },
    );
    checks.insert(
        "no_stall".into(),
        match ev.stall {
            Some((t, line)) => Check::failed_at(
                format!(
                    "{} stall(s): {}",
                    s.stalls,
                    s.stall.as_deref().unwrap_or("")
                ),
                ev.secs(t),
                line,
            ),
            // A stall after the cut would not be in the trace.
            None if ev.cut.is_some() && (both || ev.has_client) => Check::na(format!(
                "{}: a stall after its last event would not be in it, so this cannot be judged",
                ev.cut.as_deref().unwrap_or_default()
            )),
            None if (both || ev.has_client) && ev.stuck.is_some() => {
                let stuck = ev.stuck.as_ref().expect("matched");
                let what = if ev.has_server {
                    "nothing reached the server's application"
                } else {
                    "the client sent no DATA"
                };
                let since = match stuck.progress {
                    Some(p) => format!(
                        "{what} in its last {:.3} s (from {:.3} s)",
                        stuck.given_up.saturating_sub(p) as f64 / 1e9,
                        ev.secs(p)
                    ),
                    None => format!("{what} at all"),
                };
                Check::na(format!(
                    "no stall was recorded, but the run ended stuck: {since}, with the client's sends waiting \
                     for capacity until they were given up at {:.3} s; whether it would have been a stall \
                     (--stall-timeout) cannot be judged",
                    ev.secs(stuck.given_up)
                ))
            }
            None if both => Check::new(true, "the run never stopped progressing"),
            None if ev.has_client => Check::new(
                true,
                "the client never stopped sending for --stall-timeout with messages pending (its side only)",
            ),
            None if ev.has_server => Check::na("stall detection runs with the client (`run` or `client`); this trace has the server only"),
            None => Check::na("stall detection runs with the client (`run` or `client`); this trace has no client events"),
        },
    );
    checks.insert(
        "no_dropped_events".into(),
        match ev.dropped {
            Some(d) => Check::new(d == 0, format!("{d} events dropped by the recorder")),
            None => Check::na(
                "the trace has no footer (the writer did not finish): drop counts unknown",
            ),
        },
    );
    checks
}
