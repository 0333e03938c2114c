//! `h2probe decode`: raw HTTP/2 bytes from any tool → frame events (JSON Lines).

use crate::config::CapturePayload;
use crate::trace::frame_event;
use crate::trace::schema::{Dir, Endpoint, Event, Kind, WireErrorEv};
use crate::wire::sniff::{self, Foreign, SNIFF_LEN};
use crate::wire::{Parsed, Parser, MAX_MAX_FRAME_SIZE};
use anyhow::Context as _;
use std::io::{Read, Write};
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct DecodeOpts {
    /// File of raw bytes: one direction of one HTTP/2 connection. A leading
    /// client preface is recognised. `-` reads standard input.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Largest frame accepted (the receiver's SETTINGS_MAX_FRAME_SIZE, which
    /// is not in this file); larger frames are reported as errors.
    #[arg(long, default_value = "16777215", value_name = "SIZE")]
    pub max_frame_size: crate::config::Size,

    /// Payload bytes to include: none, headers (all but DATA) or full.
    #[arg(long, value_enum, default_value = "none", value_name = "MODE")]
    pub payload: CapturePayload,

    /// Who wrote the bytes: the client (its preface may be missing, in a
    /// file cut from a connection's middle) or the server. By default a
    /// leading preface says the client, its absence the server. Decides
    /// `ep` and the rules that are one side's (a client's PUSH_PROMISE, a
    /// server's SETTINGS_ENABLE_PUSH 1).
    #[arg(long, value_enum, value_name = "WHO")]
    pub from: Option<Writer>,
}

/// Who wrote the bytes (`--from`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    Client,
    Server,
}

/// Counts of a decode.
pub struct Decoded {
    pub frames: u64,
    pub errors: u64,
}

/// What a file that is clearly not HTTP/2 looks like, from its first bytes,
/// with what to do instead; `None` when it may be HTTP/2 (see
/// [`sniff::foreign`]: neither direction can start so, the client begins
/// with the preface, the server with SETTINGS; mere text may be a preface).
pub fn not_http2(head: &[u8]) -> Option<String> {
    let capture = |what: &str| {
        format!(
            "a {what} capture file; decode reads the raw bytes of one direction of one connection: \
             save them with Wireshark (Follow TCP Stream, Show data as Raw, Save as), or let tshark \
             decode the capture (tshark -r FILE -d tcp.port==PORT,http2 -V)"
        )
    };
    let what = match sniff::foreign(head)? {
        Foreign::Http1 => "HTTP/1.x text (a request or status line); decode reads HTTP/2 frames (for an h2c upgrade, \
         cut everything before the client preface)"
            .to_string(),
        Foreign::Pcap => capture("pcap"),
        Foreign::Pcapng => capture("pcapng"),
        Foreign::Tls => "TLS records (encrypted HTTP/2?); decode needs the plaintext: capture h2c, or decrypt \
         in Wireshark with an SSLKEYLOGFILE"
            .to_string(),
        Foreign::Elf => "an ELF executable, not bytes captured from a connection".to_string(),
        Foreign::Text => return None,
    };
    Some(format!("this looks like {what}"))
}

/// Decodes `opts.file` onto `out`. Events carry `t = 0` (a file has no
/// timestamps); `ep`/`dir` say who wrote the bytes: the client (`out`) when
/// the file starts with the preface, the server otherwise.
pub fn decode(opts: &DecodeOpts, out: &mut dyn Write) -> anyhow::Result<Decoded> {
    let mut input: Box<dyn Read> = if opts.file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(&opts.file)
                .with_context(|| format!("opening {}", opts.file.display()))?,
        )
    };
    // Something else entirely (HTTP/1.x, a capture file, TLS, a binary):
    // one line saying what, before any frame is emitted.
    let mut head = Vec::with_capacity(SNIFF_LEN);
    let read_err = |e| Err(e).with_context(|| format!("reading {}", opts.file.display()));
    if let Err(e) = input.by_ref().take(SNIFF_LEN as u64).read_to_end(&mut head) {
        return read_err(e);
    }
    if let Some(what) = not_http2(&head) {
        anyhow::bail!("{}: not HTTP/2 (byte 0): {what}", opts.file.display());
    }
    let mut input = std::io::Cursor::new(head).chain(input);
    let mut parser = Parser::auto();
    let max = u32::try_from(opts.max_frame_size.0)
        .ok()
        .filter(|m| (16_384..=MAX_MAX_FRAME_SIZE).contains(m))
        .ok_or_else(|| {
            anyhow::Error::new(crate::config::UsageError(format!(
                "--max-frame-size must be between 16384 and {MAX_MAX_FRAME_SIZE} (RFC 9113 §6.5.2), got {}",
                opts.max_frame_size.0
            )))
        })?;
    parser.set_max_frame_size(max);
    parser.keep_data_payloads(opts.payload == CapturePayload::Full);
    let mut buf = vec![0u8; 1 << 16];
    let mut ep: Option<Endpoint> = None;
    if let Some(from) = opts.from {
        let (writer, endpoint) = match from {
            Writer::Client => (crate::wire::Writer::Client, Endpoint::Client),
            Writer::Server => (crate::wire::Writer::Server, Endpoint::Server),
        };
        parser.set_writer(writer);
        ep = Some(endpoint);
    }
    let (mut frames, mut errors) = (0u64, 0u64);
    let mut io_err: Option<std::io::Error> = None;
    let emit =
        |ep: Endpoint, stream: u32, kind: Kind, out: &mut dyn Write| -> std::io::Result<()> {
            let ev = Event {
                t: 0,
                ep,
                conn: 1,
                stream,
                kind,
            };
            let mut line = Vec::with_capacity(128);
            h2probe_analysis::jsonl::write_event(&mut line, &ev);
            out.write_all(&line)
        };
    // A parse error: on stderr for the user, as a wire_error event in the output.
    let report = |e: &crate::wire::Error, ep: Option<Endpoint>, out: &mut dyn Write| {
        crate::say!("{}: {e}", opts.file.display());
        let kind = Kind::WireError(WireErrorEv {
            dir: Dir::Out,
            offset: e.offset(),
            error: e.to_string(),
        });
        emit(ep.unwrap_or(Endpoint::Server), 0, kind, out)
    };
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return read_err(e),
        };
        parser.feed(&buf[..n], |r| {
            if io_err.is_some() {
                return;
            }
            let res = match r {
                Ok(Parsed::Preface { .. }) => {
                    ep.get_or_insert(Endpoint::Client);
                    Ok(())
                }
                Ok(Parsed::Frame(mut f)) => {
                    frames += 1;
                    let who = *ep.get_or_insert(Endpoint::Server);
                    emit(
                        who,
                        f.head.stream(),
                        Kind::Frame(frame_event(&mut f, Dir::Out, opts.payload, true)),
                        out,
                    )
                }
                Err(e) => {
                    errors += 1;
                    report(&e, ep, out)
                }
            };
            if let Err(e) = res {
                io_err = Some(e);
            }
        });
        if let Some(e) = io_err.take() {
            return Err(e.into());
        }
    }
    if let Err(e) = parser.finish() {
        errors += 1;
        report(&e, ep, out)?;
    }
    out.flush()?;
    Ok(Decoded { frames, errors })
}
