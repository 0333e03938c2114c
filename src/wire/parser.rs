//! The sans-IO frame parser.
//!
//! Call order: create one [`Parser`] per direction, call [`Parser::feed`] with
//! every slice of bytes as it arrives (any split, including one byte at a
//! time), and [`Parser::finish`] when the connection ends. Frames come out of
//! `feed`'s callback in wire order, each as soon as its last byte arrived.
//! The parser holds at most one frame header and, for non-DATA frames, one
//! payload (bounded by the max frame size) in a buffer it reuses: DATA
//! payloads are skipped, never copied, and nothing is allocated per frame.
//! Asked to keep DATA payloads ([`Parser::keep_data_payloads`]), it gathers
//! each in a buffer the consumer may take ([`FrameRef::take_payload`]): one
//! copy of the bytes from the socket's buffer, and a new buffer only when
//! the last one was taken.

use super::frame::PayloadRef;
use super::rules::{self, HeaderBlock, Writer};
use super::{Body, Error, FrameRef, Head, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the parser recognised.
#[derive(PartialEq, Eq, Debug)]
pub enum Parsed<'a> {
    /// The 24-byte client preface, complete.
    Preface {
        offset: u64,
    },
    Frame(FrameRef<'a>),
}

/// Which peer's first frame must be a SETTINGS (RFC 9113 §3.4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FirstFrame {
    /// No rule (bytes from the middle of a connection).
    Any,
    /// A server's: anything else that is not even an HTTP/2 frame means
    /// the peer is not an HTTP/2 server ([`Error::NotHttp2Server`]).
    Server,
    /// A client's after its preface, or the first of a stream without one
    /// ([`Parser::auto`]: a server's): another frame is said, and parsed on.
    Said(&'static str),
}

/// How many bytes of the preface decide that a stream begins with one
/// ([`Parser::auto`]): read as a frame header, `PRI ` is a frame of
/// 5,263,945 bytes of the unknown type 0x20.
const PREFACE_SIGN: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Undecided: a preface if the first bytes are `PRI `, frames
    /// otherwise (gathered in the header buffer until it is decided).
    Auto,
    Preface,
    Header,
    Payload,
    /// Skipping the payload of a frame already reported as an error.
    Skip,
    /// After a fatal error: bytes are counted, nothing is parsed.
    Dead,
}

/// Parses one direction of an HTTP/2 connection.
#[derive(Debug)]
pub struct Parser {
    state: State,
    /// Bytes consumed so far in this direction.
    offset: u64,
    /// Bytes of the preface or header gathered so far.
    got: usize,
    hdr: [u8; HEADER_LEN],
    head: Head,
    frame_offset: u64,
    remaining: u32,
    need: usize,
    buf: Vec<u8>,
    max_frame_size: u32,
    keep_data: bool,
    /// Whose first frame, still to come, must be a SETTINGS.
    first_frame: FirstFrame,
    /// A header block still open, for the rule that nothing interrupts it.
    block: HeaderBlock,
    /// Who writes these bytes, once known: some rules are one side's.
    writer: Option<Writer>,
}

impl Parser {
    fn with_state(state: State) -> Parser {
        Parser {
            state,
            offset: 0,
            got: 0,
            hdr: [0; HEADER_LEN],
            head: Head::new(0, super::FrameType::DATA, 0, 0),
            frame_offset: 0,
            remaining: 0,
            need: 0,
            buf: Vec::new(),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            keep_data: false,
            first_frame: FirstFrame::Any,
            block: HeaderBlock::default(),
            writer: None,
        }
    }

    /// Client → server bytes: the preface must come first.
    pub fn client_to_server() -> Parser {
        Parser {
            writer: Some(Writer::Client),
            ..Parser::with_state(State::Preface)
        }
    }

    /// Server → client bytes: frames from the first byte.
    pub fn server_to_client() -> Parser {
        Parser {
            writer: Some(Writer::Server),
            ..Parser::with_state(State::Header)
        }
    }

    /// Server → client bytes of a whole connection: the first frame must be
    /// a SETTINGS without ACK (the server's preface, RFC 9113 §3.4); if it
    /// is not, the peer is not an HTTP/2 server ([`Error::NotHttp2Server`])
    /// and nothing after it is parsed (an HTTP/1.x answer would otherwise
    /// read as a frame of megabytes).
    pub fn from_server() -> Parser {
        Parser {
            first_frame: FirstFrame::Server,
            writer: Some(Writer::Server),
            ..Parser::with_state(State::Header)
        }
    }

    /// Either direction: a leading preface is recognised if present (its
    /// first four bytes, `PRI `, decide: a frame header starts so only for
    /// a 5 MB frame of an unknown type). Either way the first frame must be
    /// a SETTINGS: the client's after its preface, the server's first.
    pub fn auto() -> Parser {
        Parser::with_state(State::Auto)
    }

    /// Who writes these bytes, for the rules that are one side's: for
    /// [`Parser::auto`], whose guess (a preface: the client; none: the
    /// server) a file cut from a connection's middle would get wrong.
    pub fn set_writer(&mut self, writer: Writer) {
        self.writer = Some(writer);
    }

    /// The largest payload accepted before [`Error::FrameTooLarge`]: the
    /// receiver's SETTINGS_MAX_FRAME_SIZE (16,384 until it says otherwise).
    pub fn set_max_frame_size(&mut self, max: u32) {
        self.max_frame_size = max;
    }

    pub fn max_frame_size(&self) -> u32 {
        self.max_frame_size
    }

    /// A server's first frame header not yet whole, whose bytes so far
    /// already show the peer is not an HTTP/2 server: a length no frame
    /// may have (a TLS record's and HTTP/1 text's first three bytes read
    /// as megabytes). Changes nothing: the error itself comes as ever, with
    /// the whole header or at [`Parser::finish`]; this lets the owner say
    /// why before the connection fails (a TLS server's 7-byte alert is
    /// followed by a reset, which otherwise named the cause).
    pub fn not_http2_so_far(&self) -> Option<Error> {
        let h = &self.hdr;
        (self.state == State::Header
            && self.first_frame == FirstFrame::Server
            && self.got >= 3
            && u32::from_be_bytes([0, h[0], h[1], h[2]]) > self.max_frame_size)
            .then(|| Error::NotHttp2Server {
                first: h[..self.got].to_vec(),
            })
    }

    /// Also keep DATA payloads (for full-payload capture). Off by default.
    pub fn keep_data_payloads(&mut self, keep: bool) {
        self.keep_data = keep;
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Feeds the next bytes of this direction. Each recognised preface or
    /// frame, and each error, is passed to `on` in order. Errors other than
    /// [`Error::BadPreface`] skip the bad frame and parsing continues; a
    /// rule broken ([`Error::RuleBroken`]) comes just before its frame,
    /// which is passed on as ever.
    pub fn feed(&mut self, mut input: &[u8], mut on: impl FnMut(Result<Parsed<'_>, Error>)) {
        while !input.is_empty() {
            match self.state {
                State::Auto => {
                    // Gathered in the header buffer: frames' first bytes
                    // if they part from the preface's.
                    let b = input[0];
                    if b != PREFACE[self.got] {
                        self.state = State::Header;
                        // A client's bytes without their preface were cut
                        // from a connection's middle: no first frame then.
                        self.first_frame = match self.writer {
                            Some(Writer::Client) => FirstFrame::Any,
                            _ => FirstFrame::Said("server"),
                        };
                        self.writer.get_or_insert(Writer::Server);
                        continue;
                    }
                    self.hdr[self.got] = b;
                    self.got += 1;
                    self.offset += 1;
                    input = &input[1..];
                    if self.got == PREFACE_SIGN {
                        self.state = State::Preface;
                    }
                }
                State::Preface => {
                    let take = (PREFACE.len() - self.got).min(input.len());
                    let expect = &PREFACE[self.got..self.got + take];
                    if let Some(i) = input[..take].iter().zip(expect).position(|(a, b)| a != b) {
                        let offset = self.offset + i as u64;
                        self.offset += input.len() as u64;
                        self.state = State::Dead;
                        on(Err(Error::BadPreface { offset }));
                        return;
                    }
                    self.got += take;
                    self.offset += take as u64;
                    input = &input[take..];
                    if self.got == PREFACE.len() {
                        self.got = 0;
                        self.state = State::Header;
                        self.first_frame = FirstFrame::Said("client");
                        self.writer.get_or_insert(Writer::Client);
                        on(Ok(Parsed::Preface { offset: 0 }));
                    }
                }
                State::Header => {
                    let take = (HEADER_LEN - self.got).min(input.len());
                    self.hdr[self.got..self.got + take].copy_from_slice(&input[..take]);
                    self.got += take;
                    self.offset += take as u64;
                    input = &input[take..];
                    if self.got < HEADER_LEN {
                        continue;
                    }
                    self.got = 0;
                    self.head = Head::parse(&self.hdr);
                    let first = std::mem::replace(&mut self.first_frame, FirstFrame::Any);
                    if first != FirstFrame::Any {
                        let (ty, ack) = (
                            self.head.ty(),
                            self.head.flags().contains(super::Flags::ACK),
                        );
                        // A frame HTTP/2 could carry (a known type within the
                        // frame size) is a server breaking the preface rule;
                        // anything else (HTTP/1.x text, TLS) is not HTTP/2,
                        // and nothing after it can be framed.
                        if first == FirstFrame::Server
                            && (ty.name().is_none() || self.head.len() > self.max_frame_size)
                        {
                            self.offset += input.len() as u64;
                            self.state = State::Dead;
                            on(Err(Error::NotHttp2Server {
                                first: self.hdr.to_vec(),
                            }));
                            return;
                        }
                        if ty != super::FrameType::SETTINGS || ack {
                            on(Err(Error::FirstFrameNotSettings {
                                offset: self.offset - HEADER_LEN as u64,
                                who: match first {
                                    FirstFrame::Said(who) => who,
                                    _ => "server",
                                },
                                first: if ack {
                                    format!("{ty} ACK")
                                } else {
                                    ty.to_string()
                                },
                            }));
                        }
                    }
                    self.frame_offset = self.offset - HEADER_LEN as u64;
                    self.remaining = self.head.len();
                    if self.head.len() > self.max_frame_size {
                        self.state = State::Skip;
                        on(Err(Error::FrameTooLarge {
                            offset: self.frame_offset,
                            ty: self.head.ty(),
                            len: self.head.len(),
                            max: self.max_frame_size,
                        }));
                        continue;
                    }
                    self.need = if self.keep_data {
                        self.head.len() as usize
                    } else {
                        Body::prefix_needed(&self.head)
                    };
                    self.buf.clear();
                    // A kept DATA payload's buffer may have been taken:
                    // room for the whole frame at once, not grown by
                    // doubling (each step a copy).
                    self.buf.reserve_exact(self.need);
                    self.state = State::Payload;
                    if self.remaining == 0 {
                        self.emit(&mut on);
                    }
                }
                State::Payload => {
                    let take = (self.remaining as usize).min(input.len());
                    let keep = (self.need - self.buf.len()).min(take);
                    self.buf.extend_from_slice(&input[..keep]);
                    self.remaining -= take as u32;
                    self.offset += take as u64;
                    input = &input[take..];
                    if self.remaining == 0 {
                        self.emit(&mut on);
                    }
                }
                State::Skip => {
                    let take = (self.remaining as usize).min(input.len());
                    self.remaining -= take as u32;
                    self.offset += take as u64;
                    input = &input[take..];
                    if self.remaining == 0 {
                        self.state = State::Header;
                    }
                }
                State::Dead => {
                    self.offset += input.len() as u64;
                    return;
                }
            }
        }
    }

    fn emit(&mut self, on: &mut impl FnMut(Result<Parsed<'_>, Error>)) {
        self.state = State::Header;
        let is_data = self.head.ty() == super::FrameType::DATA;
        // A rule broken comes before its frame, as a first frame that is
        // not SETTINGS does: the first one it breaks.
        let (offset, stream, writer) = (self.frame_offset, self.head.stream(), self.writer);
        let block = self.block.next(&self.head);
        let mut say = |body: &Body<'_>| {
            if let Some(rule) = block.or_else(|| rules::broken(&self.head, body, writer)) {
                on(Err(Error::RuleBroken {
                    offset,
                    stream,
                    rule,
                }))
            }
        };
        if !is_data || !self.keep_data {
            match Body::load(&self.head, self.frame_offset, &self.buf) {
                Ok(body) => {
                    say(&body);
                    on(Ok(Parsed::Frame(FrameRef {
                        offset: self.frame_offset,
                        head: self.head,
                        body,
                        payload: if is_data {
                            PayloadRef::Skipped
                        } else {
                            PayloadRef::Borrowed(&self.buf[..])
                        },
                    })))
                }
                Err(e) => on(Err(e)),
            }
            return;
        }
        // A kept DATA payload: handed out as its own buffer, which the
        // consumer may take; if it does not, it is reused.
        let mut data = std::mem::take(&mut self.buf);
        match Body::load(&self.head, self.frame_offset, &data) {
            Ok(Body::Data { pad }) => {
                say(&Body::Data { pad });
                on(Ok(Parsed::Frame(FrameRef {
                    offset: self.frame_offset,
                    head: self.head,
                    body: Body::Data { pad },
                    payload: PayloadRef::Owned(&mut data),
                })))
            }
            Ok(_) => unreachable!("a DATA header loads as DATA"),
            Err(e) => on(Err(e)),
        }
        self.buf = data;
    }

    /// Call at end of stream: an error if it ended inside the preface or a frame.
    pub fn finish(&self) -> Result<(), Error> {
        match self.state {
            State::Preface if self.got > 0 => Err(Error::Truncated {
                offset: 0,
                got: self.got as u64,
                want: PREFACE.len() as u64,
            }),
            // Fewer bytes than a frame header, then the end: not a server's
            // SETTINGS either (a TLS alert is 7 bytes).
            State::Header if self.got > 0 && self.first_frame == FirstFrame::Server => {
                Err(Error::NotHttp2Server {
                    first: self.hdr[..self.got].to_vec(),
                })
            }
            // Undecided (up to 3 bytes of `PRI `): too short for either.
            State::Header | State::Auto if self.got > 0 => Err(Error::Truncated {
                offset: self.offset - self.got as u64,
                got: self.got as u64,
                want: HEADER_LEN as u64,
            }),
            State::Payload => Err(Error::Truncated {
                offset: self.frame_offset,
                got: (HEADER_LEN as u32 + self.head.len() - self.remaining) as u64,
                want: (HEADER_LEN as u32 + self.head.len()) as u64,
            }),
            // Inside an oversized frame, reported already (FrameTooLarge at
            // its offset): a peer sending one is closed before it ends, and
            // the same frame read as a second error.
            State::Skip => Ok(()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{encode, FrameType};
    use super::*;

    /// A frame as (offset, type, len, stream) for compact comparisons.
    type Brief = (u64, FrameType, u32, u32);

    fn frames(p: &mut Parser, chunks: &[&[u8]]) -> (Vec<Brief>, Vec<Error>) {
        let (mut ok, mut errs) = (vec![], vec![]);
        for c in chunks {
            p.feed(c, |r| match r {
                Ok(Parsed::Frame(f)) => {
                    ok.push((f.offset, f.head.ty(), f.head.len(), f.head.stream()))
                }
                Ok(Parsed::Preface { .. }) => {}
                Err(e) => errs.push(e),
            });
        }
        (ok, errs)
    }

    #[test]
    fn byte_at_a_time_equals_all_at_once() {
        let mut bytes = encode::preface();
        bytes.extend(encode::settings(false, &[(4, 65535)]));
        bytes.extend(encode::data(1, 1, None, &[7; 100]));
        bytes.extend(encode::window_update(0, 100));
        let whole = frames(&mut Parser::client_to_server(), &[&bytes]);
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        let split = frames(&mut Parser::client_to_server(), &singles);
        assert_eq!(whole, split);
        assert_eq!(whole.0.len(), 3);
        assert_eq!(whole.0[1], (24 + 15, FrameType::DATA, 100, 1));
    }

    #[test]
    fn bad_preface_names_the_first_wrong_byte_and_stops() {
        let mut p = Parser::client_to_server();
        let (ok, errs) = frames(
            &mut p,
            &[b"PRI * HTTP/1.1\r\n", &encode::ping(false, [0; 8])],
        );
        assert!(ok.is_empty());
        assert_eq!(errs, vec![Error::BadPreface { offset: 11 }]);
        // Every byte fed counts as consumed, the bad ones too.
        assert_eq!(p.offset(), 16 + 17);
    }

    #[test]
    fn oversize_frame_is_reported_and_skipped() {
        let mut bytes = encode::data(1, 0, None, &vec![0; 20_000]);
        bytes.extend(encode::ping(false, [1; 8]));
        let (ok, errs) = frames(&mut Parser::server_to_client(), &[&bytes]);
        assert_eq!(
            errs,
            vec![Error::FrameTooLarge {
                offset: 0,
                ty: FrameType::DATA,
                len: 20_000,
                max: 16_384
            }]
        );
        assert_eq!(ok, vec![(20_009, FrameType::PING, 8, 0)]);
        // Cut inside it (its sender closed for it): the one error stands.
        let mut p = Parser::server_to_client();
        let (_, errs) = frames(&mut p, &[&bytes[..8_000]]);
        assert_eq!(errs.len(), 1);
        assert_eq!(p.finish(), Ok(()));
    }

    #[test]
    fn truncation_is_reported_with_offset() {
        let bytes = encode::data(1, 0, None, &[0; 50]);
        let mut p = Parser::server_to_client();
        frames(&mut p, &[&bytes[..30]]);
        assert_eq!(
            p.finish(),
            Err(Error::Truncated {
                offset: 0,
                got: 30,
                want: 59
            })
        );
        let mut p = Parser::server_to_client();
        frames(&mut p, &[&bytes[..4]]);
        assert!(matches!(p.finish(), Err(Error::Truncated { want: 9, .. })));
        let mut p = Parser::server_to_client();
        frames(&mut p, &[&bytes]);
        assert_eq!(p.finish(), Ok(()));
    }

    /// A stream cut inside the client's preface is truncated there; one
    /// that ended before its first byte has nothing to say, either side's.
    #[test]
    fn a_stream_cut_in_the_preface_or_before_any_byte() {
        let mut p = Parser::client_to_server();
        frames(&mut p, &[&encode::preface()[..10]]);
        assert_eq!(
            p.finish(),
            Err(Error::Truncated {
                offset: 0,
                got: 10,
                want: 24
            })
        );
        assert_eq!(Parser::client_to_server().finish(), Ok(()));
        assert_eq!(Parser::from_server().finish(), Ok(()));
    }

    #[test]
    fn a_server_must_begin_with_settings() {
        let mut ok = encode::settings(false, &[(3, 100)]);
        ok.extend(encode::ping(false, [0; 8]));
        let (frames_ok, errs) = frames(&mut Parser::from_server(), &[&ok]);
        assert_eq!(frames_ok.len(), 2);
        assert!(errs.is_empty());
        // An HTTP/1.x answer, HTML, a TLS alert cut short.
        let cases: [(&[u8], &str); 3] = [
            (
                b"HTTP/1.1 400 Bad Request\r\n\r\n",
                "byte 0: not an HTTP/2 server: its first frame is not SETTINGS (RFC 9113 §3.4); \
                 its first bytes read \"HTTP/1.1 \" (an HTTP/1.x response: the server does not \
                 speak HTTP/2 in cleartext)",
            ),
            (b"<!DOCTYPE html>", "its first bytes read \"<!DOCTYPE\" (text: not HTTP/2 framing)"),
            (
                b"\x15\x03\x03\x00\x02\x02\x46",
                "its first bytes read \"\\x15\\x03\\x03\\x00\\x02\\x02F\" (a TLS record: the server expects TLS)",
            ),
        ];
        for (bytes, want) in cases {
            // Said from the first three bytes, before the header is whole.
            let mut early = Parser::from_server();
            let _ = frames(&mut early, &[&bytes[..3]]);
            let said = early.not_http2_so_far().map(|e| e.to_string());
            assert!(
                said.as_deref()
                    .is_some_and(|e| e.contains("not an HTTP/2 server")),
                "{bytes:?}: {said:?}"
            );
            // A server's real SETTINGS, cut as short, is not judged.
            let mut real = Parser::from_server();
            let _ = frames(&mut real, &[&ok[..bytes.len().min(8)]]);
            assert!(real.not_http2_so_far().is_none());
            // Nor a first frame of the largest length allowed (one more
            // byte is more than any frame may have).
            for (len, judged) in [(16_384u32, false), (16_385, true)] {
                let mut edge = Parser::from_server();
                let _ = frames(&mut edge, &[&len.to_be_bytes()[1..]]);
                assert_eq!(edge.not_http2_so_far().is_some(), judged, "{len}");
            }
            let mut p = Parser::from_server();
            // A cut header ends the connection; a whole one is followed by
            // a real SETTINGS, which must not be parsed either.
            let chunks: Vec<&[u8]> = if bytes.len() >= 9 {
                vec![bytes, &ok]
            } else {
                vec![bytes]
            };
            let (got, mut errs) = frames(&mut p, &chunks);
            assert!(got.is_empty(), "nothing after it is parsed: {got:?}");
            errs.extend(p.finish().err());
            assert_eq!(errs.len(), 1, "{errs:?}");
            let msg = errs[0].to_string();
            assert!(msg.contains(want), "{msg}");
        }
        // Another HTTP/2 frame first (h2 reads on): said, and every frame,
        // it included, parsed (its credit counts: windows stay right).
        for (first, name) in [
            (encode::window_update(0, 1_000), "WINDOW_UPDATE"),
            (encode::settings(true, &[]), "SETTINGS ACK"),
        ] {
            let mut p = Parser::from_server();
            let (got, errs) = frames(&mut p, &[&first, &ok]);
            assert_eq!(got.len(), 3, "{got:?}");
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert_eq!(
                errs[0].to_string(),
                format!("byte 0: the server's first frame is {name}, not SETTINGS (RFC 9113 §3.4)")
            );
        }
    }

    #[test]
    fn auto_recognises_a_preface_or_plain_frames() {
        let mut bytes = encode::preface();
        bytes.extend(encode::settings(false, &[]));
        let (ok, errs) = frames(&mut Parser::auto(), &[&bytes]);
        assert!(errs.is_empty());
        assert_eq!(ok, vec![(24, FrameType::SETTINGS, 0, 0)]);
        let (ok, _) = frames(&mut Parser::auto(), &[&bytes[24..]]);
        assert_eq!(ok, vec![(0, FrameType::SETTINGS, 0, 0)]);
        // `P` alone decides nothing: a frame of 0x50_0000 bytes begins with
        // it (read as a preface, its 5 MB and every frame after were lost
        // to "bad client connection preface"). Whole, and a byte at a time.
        let mut big = encode::data(1, 0, None, &vec![7; 0x50_0000]);
        big.extend(encode::settings(false, &[]));
        for chunks in [vec![&big[..]], big.chunks(1).collect()] {
            let mut p = Parser::auto();
            p.set_max_frame_size(16_777_215);
            let (ok, errs) = frames(&mut p, &chunks);
            // Without a preface, a server's bytes: their first frame
            // should have been its SETTINGS (said, and parsed on).
            assert_eq!(
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
                ["byte 0: the server's first frame is DATA, not SETTINGS (RFC 9113 §3.4)"]
            );
            assert_eq!(
                ok,
                vec![
                    (0, FrameType::DATA, 0x50_0000, 1),
                    (9 + 0x50_0000, FrameType::SETTINGS, 0, 0)
                ]
            );
            assert_eq!(p.finish(), Ok(()));
        }
        // A stream that ends undecided, or parts from the preface later.
        for (cut, want) in [(1, 9), (3, 9)] {
            let mut p = Parser::auto();
            frames(&mut p, &[&bytes[..cut]]);
            assert_eq!(
                p.finish(),
                Err(Error::Truncated {
                    offset: 0,
                    got: cut as u64,
                    want
                })
            );
        }
        let (ok, errs) = frames(&mut Parser::auto(), &[b"PRI * HTTP/1.1\r\n"]);
        assert!(ok.is_empty());
        assert_eq!(errs, vec![Error::BadPreface { offset: 11 }]);
    }

    /// The rules that are one side's apply to the side that writes: a
    /// server's SETTINGS_ENABLE_PUSH of 1 is a rule broken (not a
    /// client's), and so is a client's PUSH_PROMISE; [`Parser::auto`] told
    /// its bytes are a client's cut from a connection's middle expects no
    /// first SETTINGS and judges them as the client's.
    #[test]
    fn the_rules_of_one_side_follow_who_writes() {
        let push_on = encode::settings(false, &[(0x2, 1)]);
        let rules = |p: &mut Parser, bytes: &[u8]| -> Vec<String> {
            let (_, errs) = frames(p, &[bytes]);
            errs.iter().map(|e| e.to_string()).collect()
        };
        let from_server = rules(&mut Parser::from_server(), &push_on);
        assert_eq!(from_server.len(), 1, "{from_server:?}");
        assert!(
            from_server[0].contains("SETTINGS_ENABLE_PUSH of 1 from a server"),
            "{from_server:?}"
        );
        let mut client = encode::preface();
        client.extend(&push_on);
        assert_eq!(
            rules(&mut Parser::client_to_server(), &client),
            [] as [String; 0]
        );
        // A client's PUSH_PROMISE, its bytes cut from the middle.
        let mut promise = encode::settings(false, &[]);
        let head = [0, 0, 4, 0x5, 0x4, 0, 0, 0, 1];
        promise.extend(head);
        promise.extend([0, 0, 0, 2]);
        let mut p = Parser::auto();
        p.set_writer(Writer::Client);
        let said = rules(&mut p, &promise[9..]);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("PUSH_PROMISE frame from a client"),
            "{said:?}"
        );
        // The same bytes as a server's: its first frame should have been
        // its SETTINGS, and a server may push.
        let said = rules(&mut Parser::auto(), &promise[9..]);
        assert_eq!(
            said,
            ["byte 0: the server's first frame is PUSH_PROMISE, not SETTINGS (RFC 9113 §3.4)"]
        );
    }

    /// A server's first frame that HTTP/2 could carry (a known type within
    /// the frame size) breaks the preface rule and is parsed on; one of an
    /// unknown type, or longer than any frame, is no HTTP/2 at all.
    #[test]
    fn a_servers_first_frame_is_http2_only_if_a_frame_could_be_it() {
        let first = |ty: u8, len: u32| {
            let mut bytes = len.to_be_bytes()[1..].to_vec();
            bytes.extend([ty, 0, 0, 0, 0, 1]);
            bytes.extend(vec![0; len as usize]);
            let mut p = Parser::from_server();
            p.set_max_frame_size(16_384);
            let (ok, errs) = frames(&mut p, &[&bytes]);
            let kinds: Vec<&str> = errs
                .iter()
                .map(|e| match e {
                    Error::NotHttp2Server { .. } => "not http2",
                    Error::FirstFrameNotSettings { .. } => "not settings",
                    _ => "other",
                })
                .collect();
            // Every byte counts as consumed, parsed or not.
            assert_eq!(p.offset(), bytes.len() as u64);
            (ok.len(), kinds)
        };
        assert_eq!(first(0x0, 16_384), (1, vec!["not settings"]));
        assert_eq!(first(0x0, 16_385), (0, vec!["not http2"]));
        assert_eq!(first(0x20, 4), (0, vec!["not http2"]));
    }

    #[test]
    fn the_largest_frame_accepted_is_the_receivers_setting() {
        let mut p = Parser::server_to_client();
        assert_eq!(p.max_frame_size(), 16_384);
        p.set_max_frame_size(1 << 20);
        assert_eq!(p.max_frame_size(), 1 << 20);
    }

    /// RFC 9113 §3.4: the client's preface is the magic and a SETTINGS.
    /// Another frame first is said, and parsed on like a server's.
    #[test]
    fn a_client_must_begin_with_settings_after_its_preface() {
        let mut bytes = encode::preface();
        bytes.extend(encode::window_update(0, 1_000));
        bytes.extend(encode::settings(false, &[]));
        for mut p in [Parser::client_to_server(), Parser::auto()] {
            let (ok, errs) = frames(&mut p, &[&bytes]);
            assert_eq!(ok.len(), 2, "{ok:?}");
            assert_eq!(
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
                ["byte 24: the client's first frame is WINDOW_UPDATE, not SETTINGS (RFC 9113 §3.4)"]
            );
            assert!(!errs[0].loses_framing());
        }
    }

    #[test]
    fn data_payload_is_not_buffered_unless_asked() {
        let bytes = encode::data(1, 0, None, b"abcdef");
        let mut p = Parser::server_to_client();
        let mut seen = None;
        p.feed(&bytes, |r| {
            if let Ok(Parsed::Frame(f)) = r {
                seen = Some(f.payload().map(|p| p.to_vec()));
            }
        });
        assert_eq!(seen, Some(None));
        let mut p = Parser::server_to_client();
        p.keep_data_payloads(true);
        p.feed(&bytes, |r| {
            if let Ok(Parsed::Frame(f)) = r {
                seen = Some(f.payload().map(|p| p.to_vec()));
            }
        });
        assert_eq!(seen, Some(Some(b"abcdef".to_vec())));
    }

    #[test]
    fn a_kept_data_payload_is_taken_without_a_copy() {
        let mut bytes = encode::data(1, 0, None, &[7; 3000]);
        bytes.extend(encode::data(1, 0, None, b"second"));
        bytes.extend(encode::data(1, 0, None, b"third"));
        let mut p = Parser::server_to_client();
        p.keep_data_payloads(true);
        let mut taken = Vec::new();
        // Split mid-payload: the bytes are gathered across feeds.
        for part in [&bytes[..1000], &bytes[1000..]] {
            p.feed(part, |r| {
                let Ok(Parsed::Frame(mut f)) = r else {
                    panic!("{r:?}")
                };
                let seen = f.payload().unwrap().as_ptr();
                // The second frame is left in place: its buffer is reused.
                if f.payload() != Some(b"second") {
                    let v = f.take_payload().unwrap();
                    assert_eq!(v.as_ptr(), seen, "the payload was copied");
                    taken.push(v);
                }
            });
        }
        assert_eq!(taken, vec![vec![7; 3000], b"third".to_vec()]);
    }
}
