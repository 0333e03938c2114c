//! RFC 9113's rules that one frame can break on its own: the frame's
//! stream (DATA on stream 0, PING on stream 3), a WINDOW_UPDATE of 0, a
//! SETTINGS value out of range (and RFC 9218's one setting), a header block interrupted, and the few
//! that are one side's once the parser knows who writes (a client cannot
//! push).
//!
//! A frame that breaks one is still a frame: the parser reports the rule
//! ([`super::Error::RuleBroken`]) and hands the frame on, as it does for a
//! first frame that is not SETTINGS. Rules that need a connection's state
//! (an idle stream, a window overrun, HPACK) are the receiver's to judge;
//! the trace shows its answer.

use super::{Body, Flags, FrameType, Head};

/// One rule, as its RFC words it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Rule {
    /// What the frame did: "DATA frame on stream 0".
    pub what: &'static str,
    /// The RFC (9113, or 9218 for its one setting) and its section that
    /// forbid it.
    pub rfc: u16,
    pub section: &'static str,
    /// The error the receiver must treat it as.
    pub error: &'static str,
    /// A connection error (else a stream error).
    pub connection: bool,
}

const fn conn(what: &'static str, section: &'static str, error: &'static str) -> Rule {
    Rule {
        what,
        rfc: 9113,
        section,
        error,
        connection: true,
    }
}

const PROTOCOL: &str = "PROTOCOL_ERROR";

/// Who wrote a frame: a few rules are one side's (a client cannot push).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Writer {
    Client,
    Server,
}

/// The first rule a frame breaks by its stream, its increment or its
/// settings alone (and, when `writer` is known, by who sent it), if any.
pub fn broken(head: &Head, body: &Body<'_>, writer: Option<Writer>) -> Option<Rule> {
    let on_zero = head.stream() == 0;
    let rule = match (head.ty(), writer) {
        // RFC 9113 §5.1.1: a client opens odd streams; §8.4: it cannot push.
        (FrameType::HEADERS, Some(Writer::Client)) if !on_zero && head.stream() % 2 == 0 => conn(
            "HEADERS frame from a client on an even stream",
            "5.1.1",
            PROTOCOL,
        ),
        (FrameType::PUSH_PROMISE, Some(Writer::Client)) => {
            conn("PUSH_PROMISE frame from a client", "8.4", PROTOCOL)
        }
        _ => return either_sides(head, body, writer),
    };
    Some(rule)
}

/// What a frame's stream, increment or settings break, whoever sent it.
fn either_sides(head: &Head, body: &Body<'_>, writer: Option<Writer>) -> Option<Rule> {
    let on_zero = head.stream() == 0;
    let rule = match head.ty() {
        FrameType::DATA if on_zero => conn("DATA frame on stream 0", "6.1", PROTOCOL),
        FrameType::HEADERS if on_zero => conn("HEADERS frame on stream 0", "6.2", PROTOCOL),
        FrameType::PRIORITY if on_zero => conn("PRIORITY frame on stream 0", "6.3", PROTOCOL),
        FrameType::RST_STREAM if on_zero => conn("RST_STREAM frame on stream 0", "6.4", PROTOCOL),
        FrameType::PUSH_PROMISE if on_zero => {
            conn("PUSH_PROMISE frame on stream 0", "6.6", PROTOCOL)
        }
        FrameType::CONTINUATION if on_zero => {
            conn("CONTINUATION frame on stream 0", "6.10", PROTOCOL)
        }
        FrameType::SETTINGS if !on_zero => {
            conn("SETTINGS frame on a stream other than 0", "6.5", PROTOCOL)
        }
        FrameType::PING if !on_zero => conn("PING frame on a stream other than 0", "6.7", PROTOCOL),
        FrameType::GOAWAY if !on_zero => {
            conn("GOAWAY frame on a stream other than 0", "6.8", PROTOCOL)
        }
        FrameType::WINDOW_UPDATE => match *body {
            Body::WindowUpdate { increment: 0, .. } if on_zero => {
                conn("WINDOW_UPDATE of 0 on the connection", "6.9", PROTOCOL)
            }
            Body::WindowUpdate { increment: 0, .. } => Rule {
                connection: false,
                ..conn("WINDOW_UPDATE of 0 on a stream", "6.9", PROTOCOL)
            },
            _ => return None,
        },
        FrameType::SETTINGS => {
            return body
                .settings()
                .find_map(|v| setting_out_of_range(v, writer))
        }
        _ => return None,
    };
    Some(rule)
}

/// A SETTINGS value RFC 9113 §6.5.2 (or RFC 9218 §2.1) does not allow
/// (from `writer`).
fn setting_out_of_range(s: super::Setting, writer: Option<Writer>) -> Option<Rule> {
    match (s.id, s.value) {
        // "A server MUST NOT send a value of 1."
        (0x2, 1) if writer == Some(Writer::Server) => Some(conn(
            "SETTINGS_ENABLE_PUSH of 1 from a server",
            "6.5.2",
            PROTOCOL,
        )),
        (0x2, 2..) => Some(conn(
            "SETTINGS_ENABLE_PUSH other than 0 or 1",
            "6.5.2",
            PROTOCOL,
        )),
        (0x4, 0x8000_0000..) => Some(conn(
            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
            "6.5.2",
            "FLOW_CONTROL_ERROR",
        )),
        (0x5, v) if !(super::DEFAULT_MAX_FRAME_SIZE..=super::MAX_MAX_FRAME_SIZE).contains(&v) => {
            Some(conn(
                "SETTINGS_MAX_FRAME_SIZE outside 16384 to 16777215",
                "6.5.2",
                PROTOCOL,
            ))
        }
        // RFC 9218's one setting: "any value other than 0 or 1 MUST be
        // treated as a connection error ... of type PROTOCOL_ERROR" (h2
        // ignores it, as an id it does not know).
        (0x9, 2..) => Some(Rule {
            rfc: 9218,
            ..conn(
                "SETTINGS_NO_RFC7540_PRIORITIES other than 0 or 1",
                "2.1",
                PROTOCOL,
            )
        }),
        _ => None,
    }
}

/// A header block's continuity (RFC 9113 §4.3, §6.10): after a HEADERS or
/// PUSH_PROMISE without END_HEADERS only CONTINUATION frames of its stream
/// may follow until one ends it, and a CONTINUATION comes only so. Each
/// block is said to be interrupted once: it stays open (its CONTINUATIONs
/// still belong to it) until END_HEADERS or a new block.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct HeaderBlock {
    /// The stream whose header block is open, and whether its interruption
    /// was said.
    open: Option<(u32, bool)>,
}

impl HeaderBlock {
    /// Takes the next frame in; the rule it breaks, if any.
    pub fn next(&mut self, head: &Head) -> Option<Rule> {
        let (ty, stream) = (head.ty(), head.stream());
        let ends = head.flags().contains(Flags::END_HEADERS);
        let continues =
            ty == FrameType::CONTINUATION && self.open.is_some_and(|(open, _)| open == stream);
        let broken = match self.open {
            Some(_) if continues => None,
            Some((open, false)) => {
                self.open = Some((open, true));
                Some(conn(
                    "header block interrupted by another frame",
                    "4.3",
                    PROTOCOL,
                ))
            }
            Some((_, true)) => None,
            None if ty == FrameType::CONTINUATION => Some(conn(
                "CONTINUATION frame outside a header block",
                "6.10",
                PROTOCOL,
            )),
            None => None,
        };
        match ty {
            FrameType::HEADERS | FrameType::PUSH_PROMISE => {
                self.open = (!ends).then_some((stream, false))
            }
            FrameType::CONTINUATION if continues && ends => self.open = None,
            // A stray CONTINUATION that goes on: its own continuations are
            // not said again.
            FrameType::CONTINUATION if self.open.is_none() && !ends => {
                self.open = Some((stream, true))
            }
            _ => {}
        }
        broken
    }
}

#[cfg(test)]
mod tests {
    use super::super::{encode, Parsed, Parser};
    use super::*;

    /// The rules broken by the frames of `bytes` (server to client), in order.
    fn rules(bytes: &[u8]) -> Vec<&'static str> {
        let mut out = vec![];
        Parser::server_to_client().feed(bytes, |r| {
            if let Err(super::super::Error::RuleBroken { rule, .. }) = r {
                out.push(rule.what);
            }
        });
        out
    }

    fn frame(ty: FrameType, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        encode::raw(ty.0, flags, stream, payload)
    }

    #[test]
    fn well_formed_frames_break_nothing() {
        let mut b = encode::settings(false, &[(0x2, 0), (0x4, 0x7fff_ffff), (0x5, 16_777_215)]);
        b.extend(encode::settings(true, &[]));
        b.extend(encode::window_update(0, 1));
        b.extend(encode::window_update(1, 0x7fff_ffff));
        b.extend(frame(FrameType::HEADERS, 0, 1, &[0x82]));
        b.extend(frame(FrameType::CONTINUATION, 0, 1, &[0x82]));
        b.extend(frame(FrameType::CONTINUATION, Flags::END_HEADERS, 1, &[]));
        b.extend(encode::data(1, Flags::END_STREAM, None, &[1, 2, 3]));
        b.extend(frame(FrameType::PING, 0, 0, &[0; 8]));
        b.extend(frame(FrameType::PRIORITY, 0, 3, &[0, 0, 0, 1, 7]));
        b.extend(frame(FrameType::RST_STREAM, 0, 3, &[0, 0, 0, 8]));
        b.extend(frame(FrameType::GOAWAY, 0, 0, &[0; 8]));
        b.extend(frame(FrameType(0xfa), 0, 0, &[1]));
        assert_eq!(rules(&b), Vec::<&str>::new());
    }

    #[test]
    fn each_stream_rule_is_named() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (encode::data(0, 0, None, &[1]), "DATA frame on stream 0"),
            (
                frame(FrameType::HEADERS, 4, 0, &[0x82]),
                "HEADERS frame on stream 0",
            ),
            (
                frame(FrameType::PRIORITY, 0, 0, &[0, 0, 0, 1, 7]),
                "PRIORITY frame on stream 0",
            ),
            (
                frame(FrameType::RST_STREAM, 0, 0, &[0, 0, 0, 8]),
                "RST_STREAM frame on stream 0",
            ),
            (
                frame(FrameType::PUSH_PROMISE, 4, 0, &[0, 0, 0, 2]),
                "PUSH_PROMISE frame on stream 0",
            ),
            (
                frame(FrameType::SETTINGS, 0, 1, &[]),
                "SETTINGS frame on a stream other than 0",
            ),
            (
                frame(FrameType::PING, 0, 3, &[0; 8]),
                "PING frame on a stream other than 0",
            ),
            (
                frame(FrameType::GOAWAY, 0, 5, &[0; 8]),
                "GOAWAY frame on a stream other than 0",
            ),
            (
                encode::window_update(0, 0),
                "WINDOW_UPDATE of 0 on the connection",
            ),
            (
                encode::window_update(7, 0),
                "WINDOW_UPDATE of 0 on a stream",
            ),
            (
                encode::settings(false, &[(0x2, 2)]),
                "SETTINGS_ENABLE_PUSH other than 0 or 1",
            ),
            (
                encode::settings(false, &[(0x4, 0x8000_0000)]),
                "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
            ),
            (
                encode::settings(false, &[(0x5, 16_383)]),
                "SETTINGS_MAX_FRAME_SIZE outside 16384 to 16777215",
            ),
            (
                encode::settings(false, &[(0x5, 16_777_216)]),
                "SETTINGS_MAX_FRAME_SIZE outside 16384 to 16777215",
            ),
            (
                encode::settings(false, &[(0x9, 1), (0x9, 2)]),
                "SETTINGS_NO_RFC7540_PRIORITIES other than 0 or 1",
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(rules(&bytes), vec![want], "{want}");
        }
        // A CONTINUATION on stream 0 of a block opened there: the block
        // goes on, the stream is wrong.
        let mut b = frame(FrameType::HEADERS, 0, 0, &[0x82]);
        b.extend(frame(FrameType::CONTINUATION, Flags::END_HEADERS, 0, &[]));
        assert_eq!(
            rules(&b),
            [
                "HEADERS frame on stream 0",
                "CONTINUATION frame on stream 0"
            ]
        );
        // A WINDOW_UPDATE of 0 is a stream error on a stream, a connection
        // error on the connection; RFC 9218's setting is its own RFC's.
        let broken = |bytes: Vec<u8>| {
            let mut out = vec![];
            Parser::server_to_client().feed(&bytes, |r| {
                if let Err(super::super::Error::RuleBroken { rule, .. }) = r {
                    out.push((rule.connection, rule.rfc, rule.section));
                }
            });
            out
        };
        assert_eq!(broken(encode::window_update(7, 0)), [(false, 9113, "6.9")]);
        assert_eq!(broken(encode::window_update(0, 0)), [(true, 9113, "6.9")]);
        let priorities = encode::settings(false, &[(0x9, 2)]);
        assert_eq!(broken(priorities), [(true, 9218, "2.1")]);
    }

    #[test]
    fn some_rules_are_one_sides() {
        // The client's bytes (after its preface): an even stream, a push.
        let client = |frames: Vec<u8>| {
            let mut b = encode::preface();
            b.extend(encode::settings(false, &[]));
            b.extend(frames);
            let mut out = vec![];
            Parser::client_to_server().feed(&b, |r| {
                if let Err(super::super::Error::RuleBroken { rule, .. }) = r {
                    out.push(rule.what);
                }
            });
            out
        };
        let headers = |stream| frame(FrameType::HEADERS, Flags::END_HEADERS, stream, &[0x82]);
        assert_eq!(client(headers(1)), Vec::<&str>::new());
        assert_eq!(
            client(headers(2)),
            ["HEADERS frame from a client on an even stream"]
        );
        let push = frame(
            FrameType::PUSH_PROMISE,
            Flags::END_HEADERS,
            1,
            &[0, 0, 0, 2],
        );
        assert_eq!(client(push.clone()), ["PUSH_PROMISE frame from a client"]);
        // The server's: a push is its own, an even stream's HEADERS too
        // (a pushed response); ENABLE_PUSH 1 is not.
        assert_eq!(rules(&push), Vec::<&str>::new());
        assert_eq!(rules(&headers(2)), Vec::<&str>::new());
        assert_eq!(
            rules(&encode::settings(false, &[(0x2, 1)])),
            ["SETTINGS_ENABLE_PUSH of 1 from a server"]
        );
        assert_eq!(
            client(encode::settings(false, &[(0x2, 1)])),
            Vec::<&str>::new()
        );
        // Undecided (`auto` before its first byte) judges neither side's.
        assert_eq!(
            broken(
                &Head::new(0, FrameType::PUSH_PROMISE, 4, 1),
                &Body::PushPromise {
                    pad: None,
                    promised: 2,
                    reserved: false
                },
                None
            ),
            None
        );
    }

    #[test]
    fn a_frame_is_said_to_break_its_first_rule_only() {
        // A CONTINUATION on stream 0 outside a block; three bad SETTINGS.
        assert_eq!(
            rules(&frame(FrameType::CONTINUATION, 0, 0, &[])),
            ["CONTINUATION frame outside a header block"]
        );
        assert_eq!(
            rules(&encode::settings(false, &[(0x4, 1 << 31), (0x5, 1)])),
            ["SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"]
        );
    }

    #[test]
    fn a_header_block_must_be_contiguous() {
        const IN: &str = "header block interrupted by another frame";
        const OUT: &str = "CONTINUATION frame outside a header block";
        let cont = |stream, flags| frame(FrameType::CONTINUATION, flags, stream, &[]);
        let ping = frame(FrameType::PING, 0, 0, &[0; 8]);
        // A PING and a PING again inside stream 1's block (said once), then
        // the block's end (still its own), then a CONTINUATION after it.
        let mut b = frame(FrameType::HEADERS, 0, 1, &[0x82]);
        b.extend(&ping);
        b.extend(&ping);
        b.extend(cont(1, Flags::END_HEADERS));
        b.extend(cont(1, Flags::END_HEADERS));
        assert_eq!(rules(&b), vec![IN, OUT]);
        // Another stream's CONTINUATION interrupts it too.
        let mut b = frame(FrameType::HEADERS, 0, 1, &[0x82]);
        b.extend(cont(3, 0));
        assert_eq!(rules(&b), vec![IN]);
        // A stray CONTINUATION that goes on is said once; a new block
        // after it is judged afresh.
        let mut b = cont(5, 0);
        b.extend(cont(5, 0));
        b.extend(cont(5, Flags::END_HEADERS));
        b.extend(frame(FrameType::HEADERS, 0, 7, &[0x82]));
        b.extend(&ping);
        assert_eq!(rules(&b), vec![OUT, IN]);
        // A HEADERS that ends its block leaves nothing open.
        let mut b = frame(FrameType::HEADERS, Flags::END_HEADERS, 1, &[0x82]);
        b.extend(&ping);
        b.extend(cont(1, Flags::END_HEADERS));
        assert_eq!(rules(&b), vec![OUT]);
        // A stray CONTINUATION that ends its block opens none: the next
        // stray one is said too.
        let mut b = cont(1, Flags::END_HEADERS);
        b.extend(cont(1, Flags::END_HEADERS));
        assert_eq!(rules(&b), vec![OUT, OUT]);
    }

    #[test]
    fn the_frame_that_breaks_a_rule_is_still_parsed() {
        let mut b = encode::window_update(0, 0);
        b.extend(encode::data(0, 0, None, &[1, 2]));
        b.extend(encode::window_update(0, 5));
        let mut seen = vec![];
        Parser::server_to_client().feed(&b, |r| match r {
            Ok(Parsed::Frame(f)) => seen.push(format!("{} {}", f.head.ty(), f.offset)),
            Ok(Parsed::Preface { .. }) => {}
            Err(e) => {
                assert!(!e.loses_framing());
                seen.push(e.to_string())
            }
        });
        assert_eq!(
            seen,
            [
                "byte 0: rule broken: WINDOW_UPDATE of 0 on the connection \
                 (RFC 9113 §6.9: a connection error of type PROTOCOL_ERROR)",
                "WINDOW_UPDATE 0",
                "byte 13: rule broken: DATA frame on stream 0 \
                 (RFC 9113 §6.1: a connection error of type PROTOCOL_ERROR)",
                "DATA 13",
                "WINDOW_UPDATE 24",
            ]
        );
    }
}
