//! Each client connection's message books, judged on their own: what it
//! scheduled and took over (`handed`) equals what it sent and never sent
//! (`handed_over` included), and every run a replacement took over is one
//! the connection it names handed over. The run's sums hold the same
//! equation, but a message counted on the wrong connection (a merge that
//! left a `handed` event's `from` naming another run's connection) leaves
//! the sums whole: only the books of each connection show it.
//!
//! A connection's books close when it leaves the analysis (retired, or
//! open at the end). Events of its stream 0 may come after (a message
//! handed to a replacement that never opened is recorded unsent on the
//! connection that scheduled it, seconds later): they open books of the
//! same connection again, which settle against what the first ones left.
//! Only unsettled books are kept, at most [`MAX_KEPT`] of each kind.

use std::collections::{HashMap, HashSet};

/// Unsettled books, and unmatched handed runs, kept at most: a trace whose
/// books leave more unsettled fails without naming them all.
const MAX_KEPT: usize = 4096;

#[derive(Default)]
pub(super) struct Books {
    /// Client connections whose books did not balance when they left the
    /// analysis: scheduled + handed in − sent − never sent.
    open: HashMap<u32, i64>,
    /// Those of them that left unpaired (their late events count there
    /// too): at most as many as `open` holds.
    unpaired: HashSet<u32>,
    /// Handed runs by (the connection that handed them, first `seq`):
    /// messages handed over there less those a replacement took in.
    handed: HashMap<(u32, u64), i64>,
    /// Books or runs not kept (past [`MAX_KEPT`]).
    unkept: u64,
}

impl Books {
    /// Client connection `conn` leaves the analysis with `messages`
    /// (scheduled and handed in, sent, never sent and handed over), not
    /// paired across the taps if `unpaired`.
    pub(super) fn close(&mut self, conn: u32, messages: [u64; 3], unpaired: bool) {
        let [scheduled, sent, never] = messages.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let balance = scheduled.saturating_sub(sent).saturating_sub(never);
        let was_open = self.open.contains_key(&conn);
        settle(&mut self.open, conn, balance, &mut self.unkept);
        // Books first opened unpaired stay so until they settle.
        if !self.open.contains_key(&conn) {
            self.unpaired.remove(&conn);
        } else if !was_open && unpaired {
            self.unpaired.insert(conn);
        }
    }

    /// `conn` left the analysis unpaired with its books open: what comes
    /// of it later is unpaired too.
    pub(super) fn left_unpaired(&self, conn: u32) -> bool {
        self.unpaired.contains(&conn)
    }

    /// `conn` handed over `count` messages from `seq` on.
    pub(super) fn handed_over(&mut self, conn: u32, seq: u64, count: u64) {
        let n = i64::try_from(count).unwrap_or(i64::MAX);
        settle(&mut self.handed, (conn, seq), n, &mut self.unkept);
    }

    /// A replacement took in `count` messages from `seq` on from `from`.
    pub(super) fn handed_in(&mut self, from: u32, seq: u64, count: u64) {
        let n = i64::try_from(count).unwrap_or(i64::MAX);
        settle(&mut self.handed, (from, seq), -n, &mut self.unkept);
    }

    /// Why the books do not hold, once every connection has left; `None`
    /// when each balances and every handed run was taken in as handed over.
    pub(super) fn unsettled(&self) -> Option<String> {
        let mut said = vec![];
        if let Some((conn, off)) = self.open.iter().min_by_key(|(conn, _)| **conn) {
            said.push(format!(
                "{} whose scheduled and handed in ≠ sent and never sent (handed over included): \
                 the first, connection {conn}, off by {off:+}",
                crate::report::counted(self.open.len() as u64, "client connection")
            ));
        }
        if let Some(((from, seq), n)) = self.handed.iter().min_by_key(|(k, _)| **k) {
            let side = if *n > 0 {
                "handed over and not taken in by the connection that replaced it"
            } else {
                "taken in, naming a connection that did not hand it over"
            };
            said.push(format!(
                "{} of handed messages not matched: the first, connection {from}'s from seq {seq}, {side}",
                crate::report::counted(self.handed.len() as u64, "run")
            ));
        }
        if self.unkept > 0 {
            said.push(format!(
                "{} more unsettled than the analysis keeps",
                crate::report::counted(self.unkept, "book")
            ));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }
}

/// Adds `n` to `key`'s balance, dropping it once it is 0; a new key past
/// [`MAX_KEPT`] is counted in `unkept` instead.
fn settle<K: std::hash::Hash + Eq>(map: &mut HashMap<K, i64>, key: K, n: i64, unkept: &mut u64) {
    if n == 0 {
        return;
    }
    let full = map.len() >= MAX_KEPT;
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            *e.get_mut() = e.get().saturating_add(n);
            if *e.get() == 0 {
                e.remove();
            }
        }
        std::collections::hash_map::Entry::Vacant(e) if !full => {
            e.insert(n);
        }
        std::collections::hash_map::Entry::Vacant(_) => *unkept += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Books reopened by a late event settle against those left: a
    /// connection that left owing 2 and whose 2 never-sent came later is
    /// whole; one left owing that nothing settles is named.
    #[test]
    fn books_reopened_after_a_connection_left_settle_against_it() {
        let mut b = Books::default();
        b.close(1, [10, 8, 0], true);
        b.close(2, [5, 5, 0], false);
        assert!(b.unsettled().is_some());
        assert!(b.left_unpaired(1) && !b.left_unpaired(2));
        b.close(1, [0, 0, 2], true);
        assert_eq!(b.unsettled(), None);
        assert!(!b.left_unpaired(1));
        b.close(3, [4, 3, 0], false);
        let why = b.unsettled().unwrap();
        assert!(why.contains("connection 3, off by +1"), "{why}");
        // Books first opened paired stay so, whatever leaves later.
        b.close(3, [1, 0, 0], true);
        assert!(b.unsettled().unwrap().contains("connection 3, off by +2"));
        assert!(!b.left_unpaired(3));
    }

    /// Past [`MAX_KEPT`] unsettled books (or handed runs) the rest are
    /// counted, not kept, and said; a kept one still settles.
    #[test]
    fn books_past_the_cap_are_counted_and_said() {
        let mut b = Books::default();
        let kept = MAX_KEPT as u32;
        for conn in 0..kept + 2 {
            b.close(conn, [2, 1, 0], false);
        }
        let why = b.unsettled().unwrap();
        assert!(
            why.contains("4096 client connections whose")
                && why.ends_with("2 books more unsettled than the analysis keeps"),
            "{why}"
        );
        for conn in 0..kept {
            b.close(conn, [0, 0, 1], false);
        }
        let why = b.unsettled().unwrap();
        assert_eq!(why, "2 books more unsettled than the analysis keeps");

        let mut b = Books::default();
        for seq in 0..u64::from(kept) + 1 {
            b.handed_over(1, seq, 3);
        }
        for seq in 0..u64::from(kept) {
            b.handed_in(1, seq, 3);
        }
        assert_eq!(
            b.unsettled().unwrap(),
            "1 book more unsettled than the analysis keeps"
        );
    }

    /// A handed run matches its handed over run by the connection named
    /// and its first seq; one named wrong is unmatched both ways.
    #[test]
    fn a_handed_run_matches_the_run_its_connection_handed_over() {
        let mut b = Books::default();
        b.handed_over(1, 9, 6);
        b.handed_in(1, 9, 6);
        assert_eq!(b.unsettled(), None);
        b.handed_over(2, 20, 3);
        b.handed_in(7, 20, 3);
        let why = b.unsettled().unwrap();
        assert!(
            why.contains("2 runs of handed messages not matched")
                && why.contains("connection 2's from seq 20, handed over and not taken in"),
            "{why}"
        );
    }
}
