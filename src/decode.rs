//! `h2probe decode`: raw HTTP/2 bytes from any tool → frame events (JSON Lines).

use crate::config::CapturePayload;
use crate::trace::frame_event;
use crate::trace::schema::{Dir, Endpoint, Event, Kind, WireErrorEv};
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
    #[arg(long, default_value_t = MAX_MAX_FRAME_SIZE, value_name = "BYTES")]
    pub max_frame_size: u32,

    /// Payload bytes to include: none, headers (all but DATA) or full.
    #[arg(long, value_enum, default_value = "none", value_name = "MODE")]
    pub payload: CapturePayload,
}

/// Counts of a decode.
pub struct Decoded {
    pub frames: u64,
    pub errors: u64,
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
    let mut parser = Parser::auto();
    parser.set_max_frame_size(opts.max_frame_size);
    parser.keep_data_payloads(opts.payload == CapturePayload::Full);
    let mut buf = vec![0u8; 1 << 16];
    let mut ep: Option<Endpoint> = None;
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
            serde_json::to_writer(&mut *out, &ev)?;
            out.write_all(b"\n")
        };
    // A parse error: on stderr for the user, as a wire_error event in the output.
    let report = |e: &crate::wire::Error, ep: Option<Endpoint>, out: &mut dyn Write| {
        eprintln!("h2probe: {}: {e}", opts.file.display());
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
            Err(e) => return Err(e).with_context(|| format!("reading {}", opts.file.display())),
        };
        parser.feed(&buf[..n], |r| {
            if io_err.is_some() {
                return;
            }
            let res = match r {
                Ok(Parsed::Preface { .. }) => {
                    ep = Some(Endpoint::Client);
                    Ok(())
                }
                Ok(Parsed::Frame(f)) => {
                    frames += 1;
                    let who = *ep.get_or_insert(Endpoint::Server);
                    emit(
                        who,
                        f.head.stream(),
                        Kind::Frame(frame_event(&f, Dir::Out, opts.payload)),
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
