//! Trace → pcap: synthetic IPv4/IPv6 + TCP around the exact frame bytes.
//!
//! Each tap becomes one file (`server.pcap`, `client.pcap`). TCP sequence
//! numbers come from the frames' byte offsets, so they are exact and a gap
//! (dropped events) shows as a missing segment rather than shifting
//! everything after it. Payload bytes the trace did not keep are zeros;
//! every frame header and typed field is rebuilt, so tshark decodes every frame.

use crate::trace::schema::{Dir, Endpoint, Event, FrameEv, FrameType, Kind};
use crate::wire::{encode, Head, PREFACE};
use anyhow::Context as _;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// Largest TCP payload per synthetic segment (IPv4's total length and
/// IPv6's payload length are 16 bits).
const MSS: usize = 65_000;
/// Initial sequence numbers of the client's and the server's bytes, the
/// same in every tap's pcap: a segment has one `tcp.seq` in the client's
/// pcap and in the server's, so the two files match packet for packet.
const ISN_CLIENT: u32 = 1_000;
const ISN_SERVER: u32 = 500_000;

/// The bytes of one frame as it crossed the wire, rebuilt from its event.
pub fn frame_bytes(f: &FrameEv, stream: u32) -> Vec<u8> {
    let high = |bit: bool| if bit { 0x8000_0000u32 } else { 0 };
    let stream_field = stream | high(f.reserved);
    let mut out = Vec::with_capacity(9 + f.len as usize);
    Head::new(f.len, f.frame, f.flags, stream_field).encode(&mut out);
    let len = f.len as usize;
    if let Some(p) = &f.payload {
        if p.0.len() == len {
            out.extend_from_slice(&p.0);
            return out;
        }
    }
    // Rebuild what the typed fields say; zeros for what was not kept.
    let body: Vec<u8> = match f.frame {
        FrameType::WINDOW_UPDATE => (f.increment.unwrap_or(0) | high(f.field_reserved))
            .to_be_bytes()
            .to_vec(),
        FrameType::SETTINGS => {
            encode::settings(false, f.settings.as_deref().unwrap_or(&[]))[9..].to_vec()
        }
        FrameType::RST_STREAM => f.error_code.unwrap_or(0).to_be_bytes().to_vec(),
        FrameType::PING => f.opaque.unwrap_or(0).to_be_bytes().to_vec(),
        FrameType::GOAWAY => {
            let mut b = (f.last_stream.unwrap_or(0) | high(f.field_reserved))
                .to_be_bytes()
                .to_vec();
            b.extend_from_slice(&f.error_code.unwrap_or(0).to_be_bytes());
            b
        }
        FrameType::PRIORITY => f
            .priority
            .map(|p| encode::priority(0, p)[9..].to_vec())
            .unwrap_or_default(),
        FrameType::DATA | FrameType::HEADERS | FrameType::PUSH_PROMISE
            if f.has_flag(crate::trace::schema::flags::PADDED) =>
        {
            let mut b = vec![f.pad];
            if f.frame == FrameType::HEADERS {
                if let Some(p) = f.priority {
                    b.extend_from_slice(&encode::priority(0, p)[9..]);
                }
            }
            if let Some(p) = f.promised {
                b.extend_from_slice(&(p | high(f.field_reserved)).to_be_bytes());
            }
            b
        }
        FrameType::HEADERS => f
            .priority
            .map(|p| encode::priority(0, p)[9..].to_vec())
            .unwrap_or_default(),
        FrameType::PUSH_PROMISE => (f.promised.unwrap_or(0) | high(f.field_reserved))
            .to_be_bytes()
            .to_vec(),
        _ => vec![],
    };
    out.extend_from_slice(&body[..body.len().min(len)]);
    out.resize(9 + len, 0);
    out
}

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    let mut odd: Option<u8> = None;
    for c in chunks {
        for &b in c.iter() {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// Made-up addresses of the documentation range (RFC 5737) for connection
/// `conn` of a tap: 192.0.2.1, its port from the id, → 192.0.2.2:50051.
fn made_up_by_id(conn: u32) -> (SocketAddr, SocketAddr) {
    let client = ([192, 0, 2, 1], 10_000 + (conn % 50_000) as u16).into();
    (client, ([192, 0, 2, 2], 50051).into())
}

/// Made-up addresses for a Unix connection whose client end has an
/// abstract name (`unix:@NAME`, as h2probe's client binds), from what both
/// ends record, so that the client's pcap and the server's write it alike:
/// the client at `[2001:db8:0:1:H]:P`, H and P from a hash of its name, the
/// server at `[2001:db8:0:2:H']:50051`, H' from the socket's path (the
/// IPv6 documentation range, RFC 3849: 64 bits of hash keep two
/// connections of a file apart). `None` for an end with no name.
fn made_up_for_unix(client: &str, server: &str) -> Option<(SocketAddr, SocketAddr)> {
    let name = client.strip_prefix(h2probe_analysis::schema::UNIX_ABSTRACT)?;
    let at = |net: u16, h: u64| -> std::net::Ipv6Addr {
        let h = h.to_be_bytes();
        let word = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, net, word(0), word(2), word(4), word(6))
    };
    let c = fnv1a(name.as_bytes());
    let client = SocketAddr::new(at(1, c).into(), 10_000 + (c % 50_000) as u16);
    let server = SocketAddr::new(at(2, fnv1a(server.as_bytes())).into(), 50051);
    Some((client, server))
}

/// FNV-1a, 64 bits: a hash both ends' exports compute alike, whatever
/// build or platform wrote them (std's hashers are seeded or unspecified).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One IP packet carrying one TCP segment.
fn packet(
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut tcp = Vec::with_capacity(20 + payload.len());
    tcp.extend_from_slice(&src.port().to_be_bytes());
    tcp.extend_from_slice(&dst.port().to_be_bytes());
    tcp.extend_from_slice(&seq.to_be_bytes());
    tcp.extend_from_slice(&(if flags & ACK != 0 { ack } else { 0 }).to_be_bytes());
    tcp.push(5 << 4); // data offset: 5 words, no options
    tcp.push(flags);
    tcp.extend_from_slice(&65_535u16.to_be_bytes()); // window (the TCP one, not HTTP/2's)
    tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    tcp.extend_from_slice(payload);
    let tcp_len = tcp.len() as u32;
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let pseudo = [
                &s.octets()[..],
                &d.octets()[..],
                &[0, 6],
                &(tcp_len as u16).to_be_bytes(),
            ]
            .concat();
            let c = checksum(&[&pseudo, &tcp]);
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]); // id, DF, TTL, TCP, checksum
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let c = checksum(&[&ip]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            ip.extend_from_slice(&tcp);
            ip
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            };
            let (s, d) = (v6(s), v6(d));
            let pseudo = [
                &s.octets()[..],
                &d.octets()[..],
                &tcp_len.to_be_bytes(),
                &[0, 0, 0, 6],
            ]
            .concat();
            let c = checksum(&[&pseudo, &tcp]);
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&(tcp_len as u16).to_be_bytes());
            ip.extend_from_slice(&[6, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            ip.extend_from_slice(&tcp);
            ip
        }
    }
}

struct ConnState {
    local: SocketAddr,
    peer: SocketAddr,
    /// Bytes sent by the local side so far (stream offset), and by the peer.
    out_off: u64,
    in_off: u64,
    closed: bool,
    /// The tap is the connection's client end (it sent the SYN).
    client_end: bool,
}

impl ConnState {
    fn seq(&self, dir: Dir, off: u64) -> u32 {
        let isn = if (dir == Dir::Out) == self.client_end {
            ISN_CLIENT
        } else {
            ISN_SERVER
        };
        isn.wrapping_add(1).wrapping_add(off as u32)
    }
}

/// Writes one pcap file from the events of one endpoint's tap.
struct TapPcap<W: std::io::Write> {
    w: PcapWriter<W>,
    conns: HashMap<u32, ConnState>,
    to_wall: i128,
    packets: u64,
    /// Frames of a connection whose `conn_open` had not come (missing, or
    /// with addresses that do not parse): written on made-up addresses
    /// (see [`TapPcap::made_up`]), counted here.
    skipped: u64,
    /// Connections written on made-up addresses.
    made_up_conns: u64,
    /// Connections over a Unix domain socket (written on made-up addresses).
    unix_conns: u64,
    /// Frames (and the close) of connections whose `conn_open` has not come
    /// yet, held for it (the file is not in time order), at most
    /// [`MAX_HELD_FRAMES`] and [`MAX_HELD_PAYLOAD`] over all connections.
    held: HashMap<u32, Vec<Event>>,
    held_frames: usize,
    held_payload: usize,
    /// Bytes the tap read or wrote that no frame covers (after a wire
    /// error it could not frame them): left as a gap before the FIN.
    unframed: u64,
    /// Packets whose time a pcap cannot hold (past 2106, its 32-bit
    /// seconds: a damaged `t`), left out (one such `t` failed the whole
    /// export).
    out_of_range: u64,
}

/// Frames a tap's pcap holds for connections whose `conn_open` is still to
/// come, and their captured payload bytes; past either the connection is
/// written on made-up addresses.
const MAX_HELD_FRAMES: usize = 65_536;
const MAX_HELD_PAYLOAD: usize = 64 << 20;

impl<W: std::io::Write> TapPcap<W> {
    /// A tap's pcap into `w`; `to_wall` turns a trace `t` into Unix ns.
    fn new(w: PcapWriter<W>, to_wall: i128) -> Self {
        TapPcap {
            w,
            conns: HashMap::new(),
            held: HashMap::new(),
            held_frames: 0,
            held_payload: 0,
            to_wall,
            packets: 0,
            skipped: 0,
            made_up_conns: 0,
            unix_conns: 0,
            unframed: 0,
            out_of_range: 0,
        }
    }

    fn write(&mut self, t: u64, data: &[u8]) -> anyhow::Result<()> {
        let wall = (t as i128 + self.to_wall).max(0) as u128;
        if wall / 1_000_000_000 > u32::MAX as u128 {
            self.out_of_range += 1;
            return Ok(());
        }
        let ts =
            std::time::Duration::new((wall / 1_000_000_000) as u64, (wall % 1_000_000_000) as u32);
        self.w
            .write_packet(&PcapPacket::new(ts, data.len() as u32, data))
            .map_err(|e| match e {
                // pcap-file calls every I/O error "Error reading bytes".
                pcap_file::PcapError::IoError(io) => anyhow::Error::new(io),
                other => anyhow::Error::new(other),
            })?;
        self.packets += 1;
        Ok(())
    }

    fn segment(
        &mut self,
        t: u64,
        conn: u32,
        dir: Dir,
        off: u64,
        bytes: &[u8],
        flags: u8,
    ) -> anyhow::Result<()> {
        let Some(c) = self.conns.get(&conn) else {
            return Ok(());
        };
        let (src, dst) = if dir == Dir::Out {
            (c.local, c.peer)
        } else {
            (c.peer, c.local)
        };
        let other = if dir == Dir::Out { Dir::In } else { Dir::Out };
        let other_off = if dir == Dir::Out { c.in_off } else { c.out_off };
        let mut pkts = vec![];
        for (i, chunk) in bytes.chunks(MSS).enumerate() {
            let seq = c.seq(dir, off + (i * MSS) as u64);
            pkts.push(packet(src, dst, seq, c.seq(other, other_off), flags, chunk));
        }
        for p in pkts {
            self.write(t, &p)?;
        }
        let c = self.conns.get_mut(&conn).expect("present above");
        let end = off + bytes.len() as u64;
        match dir {
            Dir::Out => c.out_off = c.out_off.max(end),
            Dir::In => c.in_off = c.in_off.max(end),
        }
        Ok(())
    }

    /// A connection whose `conn_open` is missing or damaged (a corrupt
    /// line) gets addresses of the documentation range (RFC 5737), the
    /// client's port from its id: its frames are kept, not lost (one bad
    /// line cost a tap's whole pcap).
    fn made_up(&mut self, e: &Event) -> anyhow::Result<()> {
        self.made_up_conns += 1;
        self.on_made_up_addresses(e, made_up_by_id(e.conn))
    }

    /// Opens `e`'s connection on made-up `(client, server)` addresses and
    /// writes what was held for it.
    fn on_made_up_addresses(
        &mut self,
        e: &Event,
        (client, server): (SocketAddr, SocketAddr),
    ) -> anyhow::Result<()> {
        let (local, peer) = if e.ep.is_client_end() {
            (client, server)
        } else {
            (server, client)
        };
        self.open(e, local, peer)?;
        self.replay(e.conn)
    }

    /// Writes what was held for connection `conn`, now open.
    fn replay(&mut self, conn: u32) -> anyhow::Result<()> {
        if let Some(held) = self.held.remove(&conn) {
            self.held_frames -= held.len();
            self.held_payload -= held.iter().map(payload_len).sum::<usize>();
            for e in held {
                self.event(&e)?;
            }
        }
        Ok(())
    }

    /// Every connection still waiting for its `conn_open` (the trace has
    /// ended), on made-up addresses.
    fn finish(&mut self) -> anyhow::Result<()> {
        let mut waiting: Vec<(u64, u32)> = self
            .held
            .iter()
            .map(|(conn, evs)| (evs[0].t, *conn))
            .collect();
        waiting.sort();
        for (_, conn) in waiting {
            self.stop_waiting(conn)?;
        }
        Ok(())
    }

    /// Connection `conn` waits for its `conn_open` no longer: what it holds
    /// is written on made-up addresses, its frames counted.
    fn stop_waiting(&mut self, conn: u32) -> anyhow::Result<()> {
        let held = &self.held[&conn];
        let first = held[0].clone();
        self.skipped += held
            .iter()
            .filter(|e| matches!(e.kind, Kind::Frame(_)))
            .count() as u64;
        self.made_up(&first)
    }

    /// A connection's state and its synthetic handshake, initiated by
    /// whichever side is the client.
    fn open(&mut self, e: &Event, local: SocketAddr, peer: SocketAddr) -> anyhow::Result<()> {
        self.conns.insert(
            e.conn,
            ConnState {
                local,
                peer,
                out_off: 0,
                in_off: 0,
                closed: false,
                client_end: e.ep.is_client_end(),
            },
        );
        let (client, server) = if e.ep.is_client_end() {
            (local, peer)
        } else {
            (peer, local)
        };
        let (c, sv) = (ISN_CLIENT, ISN_SERVER);
        self.write(e.t, &packet(client, server, c, 0, SYN, &[]))?;
        self.write(
            e.t,
            &packet(server, client, sv, c.wrapping_add(1), SYN | ACK, &[]),
        )?;
        self.write(
            e.t,
            &packet(
                client,
                server,
                c.wrapping_add(1),
                sv.wrapping_add(1),
                ACK,
                &[],
            ),
        )
    }

    fn event(&mut self, e: &Event) -> anyhow::Result<()> {
        match &e.kind {
            Kind::ConnOpen(o) => {
                let (Ok(local), Ok(peer)) =
                    (o.local.parse::<SocketAddr>(), o.peer.parse::<SocketAddr>())
                else {
                    // A Unix domain socket has no IP address: its frames go
                    // on made-up ones at once (said as such, not as damage).
                    let unix = o.peer.starts_with(h2probe_analysis::schema::UNIX_PREFIX);
                    if unix && !self.conns.contains_key(&e.conn) {
                        self.unix_conns += 1;
                        let (client, server) = if e.ep.is_client_end() {
                            (&o.local, &o.peer)
                        } else {
                            (&o.peer, &o.local)
                        };
                        let addrs = made_up_for_unix(client, server)
                            .unwrap_or_else(|| made_up_by_id(e.conn));
                        self.on_made_up_addresses(e, addrs)?;
                    }
                    return Ok(());
                };
                if self.conns.contains_key(&e.conn) {
                    // Its frames came long before (written on made-up
                    // addresses).
                    return Ok(());
                }
                self.open(e, local, peer)?;
                self.replay(e.conn)?;
            }
            Kind::Frame(_) | Kind::ConnClose(_) if !self.conns.contains_key(&e.conn) => {
                // Held until its conn_open comes; past the bound, written
                // on made-up addresses.
                self.held.entry(e.conn).or_default().push(e.clone());
                self.held_frames += 1;
                self.held_payload += payload_len(e);
                if self.held_frames > MAX_HELD_FRAMES || self.held_payload > MAX_HELD_PAYLOAD {
                    self.stop_waiting(e.conn)?;
                }
            }
            Kind::Frame(f) => {
                // The client preface precedes the first frame of the client's stream.
                let client_stream = e.ep.is_client_end() == (f.dir == Dir::Out);
                let sent = if f.dir == Dir::Out {
                    self.conns[&e.conn].out_off
                } else {
                    self.conns[&e.conn].in_off
                };
                if client_stream && sent == 0 && f.offset == PREFACE.len() as u64 {
                    self.segment(e.t, e.conn, f.dir, 0, PREFACE, PSH | ACK)?;
                }
                let bytes = frame_bytes(f, e.stream);
                self.segment(e.t, e.conn, f.dir, f.offset, &bytes, PSH | ACK)?;
            }
            Kind::ConnClose(close) => {
                if let Some(c) = self.conns.get_mut(&e.conn) {
                    if !c.closed {
                        // Bytes the tap saw that no frame covers (it could
                        // not frame them after a wire error): the FIN comes
                        // after them, so the gap shows ("previous segment
                        // not captured") instead of vanishing.
                        for (seen, off) in [
                            (close.bytes_out, &mut c.out_off),
                            (close.bytes_in, &mut c.in_off),
                        ] {
                            if seen > *off {
                                self.unframed += seen - *off;
                                *off = seen;
                            }
                        }
                        let (seq, ack) = (c.seq(Dir::Out, c.out_off), c.seq(Dir::In, c.in_off));
                        let (local, peer) = (c.local, c.peer);
                        self.write(e.t, &packet(local, peer, seq, ack, FIN | ACK, &[]))?;
                        self.write(
                            e.t,
                            &packet(peer, local, ack, seq.wrapping_add(1), FIN | ACK, &[]),
                        )?;
                        if let Some(c) = self.conns.get_mut(&e.conn) {
                            c.closed = true;
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The captured payload bytes an event holds.
fn payload_len(e: &Event) -> usize {
    match &e.kind {
        Kind::Frame(f) => f.payload.as_ref().map_or(0, |p| p.0.len()),
        _ => 0,
    }
}

/// Counts of one pcap export.
#[derive(Debug, Default, Clone, Copy)]
pub struct PcapCounts {
    pub server_packets: u64,
    pub client_packets: u64,
    /// A relay's two legs (`client_leg.pcap`, `server_leg.pcap`).
    pub client_leg_packets: u64,
    pub server_leg_packets: u64,
    /// Frames written on made-up addresses (see [`TapPcap::skipped`]),
    /// over all taps; each tap's are said on stderr.
    pub skipped_frames: u64,
}

impl PcapCounts {
    /// Packets written over every tap: 0 when the trace holds no
    /// connection, and no pcap file was written.
    pub fn packets(&self) -> u64 {
        self.server_packets
            + self.client_packets
            + self.client_leg_packets
            + self.server_leg_packets
    }
}

/// What is said when a trace gives no pcap (a tap that recorded nothing
/// leaves no empty file, and a missing file must not go unexplained).
pub const NO_CONNECTION: &str = "no pcap written: the trace holds no connection";

/// A pcap file being written: plain, or gzip-compressed (`.pcap.gz`, which
/// Wireshark and tshark read as it is). DATA payload the trace did not keep
/// is written as zeros so that every frame still dissects; compressed, those
/// zeros cost almost nothing, and the file is about the size of the headers
/// and payload the trace holds.
enum PcapOut {
    Plain(std::io::BufWriter<crate::trace::DropBehind>),
    Gzip(flate2::write::GzEncoder<std::io::BufWriter<crate::trace::DropBehind>>),
}

impl std::io::Write for PcapOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            PcapOut::Plain(w) => w.write(buf),
            PcapOut::Gzip(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            PcapOut::Plain(w) => w.flush(),
            PcapOut::Gzip(w) => w.flush(),
        }
    }
}

impl PcapOut {
    /// Flushes everything, the gzip trailer included.
    fn finish(self) -> std::io::Result<()> {
        match self {
            PcapOut::Plain(mut w) => std::io::Write::flush(&mut w),
            PcapOut::Gzip(w) => std::io::Write::flush(&mut w.finish()?),
        }
    }
}

/// The file name a tap's pcap gets: `NAME.pcap`, or `NAME.pcap.gz`.
pub fn pcap_name(tap: &str, gzip: bool) -> String {
    if gzip {
        format!("{tap}.pcap.gz")
    } else {
        format!("{tap}.pcap")
    }
}

/// Raw IP packets, nanosecond times.
fn pcap_header() -> PcapHeader {
    PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen: 262_144,
        datalink: DataLink::RAW,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::native(),
    }
}

/// Writes `server.pcap` and `client.pcap` into `dir` from its trace (one
/// streaming pass), and for a relay run `client_leg.pcap` and
/// `server_leg.pcap`; with `gzip`, `.pcap.gz` files instead. A file whose
/// tap recorded nothing is not written.
pub fn export_pcaps(dir: &Path, gzip: bool) -> anyhow::Result<PcapCounts> {
    let (header, events) = super::run_events(dir)?;
    let to_wall = header.origin_unix_ns as i128 - header.origin_mono_ns as i128;
    let header = pcap_header();
    // Each pcap is written aside (`.NAME.partial`, see
    // h2probe_analysis::aside) and renamed once whole: a failed or
    // interrupted export (a full disk, Ctrl-C) leaves no pcap cut
    // mid-packet, and a tap that recorded nothing leaves no empty file.
    write_pcaps(dir, gzip, header, to_wall, events)
}

/// [`export_pcaps`]'s work, into the partial files `partial` names.
fn write_pcaps(
    dir: &Path,
    gzip: bool,
    header: PcapHeader,
    to_wall: i128,
    events: impl Iterator<Item = Event>,
) -> anyhow::Result<PcapCounts> {
    let mut asides = HashMap::new();
    let mut open = |tap: &'static str| -> anyhow::Result<TapPcap<PcapOut>> {
        let path = dir.join(pcap_name(tap, gzip));
        let (aside, f) = h2probe_analysis::aside::Aside::file(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        asides.insert(tap, aside);
        // A pcap as large as the upload must not pile up dirty in the
        // page cache either.
        let f = std::io::BufWriter::new(crate::trace::DropBehind::new(f));
        let out = match gzip {
            // Fast: the bulk is runs of zeros, which any level squeezes.
            true => PcapOut::Gzip(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::fast(),
            )),
            false => PcapOut::Plain(f),
        };
        let w = PcapWriter::with_header(out, header)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(TapPcap::new(w, to_wall))
    };
    let mut server = open("server")?;
    let mut client = open("client")?;
    let mut client_leg = open("client_leg")?;
    let mut server_leg = open("server_leg")?;
    let writing = |tap: &str| format!("writing {}", pcap_name(tap, gzip));
    for e in events {
        match e.ep {
            Endpoint::Server => server.event(&e).with_context(|| writing("server"))?,
            Endpoint::Client => client.event(&e).with_context(|| writing("client"))?,
            Endpoint::ClientLeg => client_leg
                .event(&e)
                .with_context(|| writing("client_leg"))?,
            Endpoint::ServerLeg => server_leg
                .event(&e)
                .with_context(|| writing("server_leg"))?,
        }
    }
    for (tap, p) in [
        ("server", &mut server),
        ("client", &mut client),
        ("client_leg", &mut client_leg),
        ("server_leg", &mut server_leg),
    ] {
        p.finish().with_context(|| writing(tap))?;
    }
    let counts = PcapCounts {
        server_packets: server.packets,
        client_packets: client.packets,
        client_leg_packets: client_leg.packets,
        server_leg_packets: server_leg.packets,
        skipped_frames: server.skipped + client.skipped + client_leg.skipped + server_leg.skipped,
    };
    let mut written = vec![];
    for (tap, p) in [
        ("server", server),
        ("client", client),
        ("client_leg", client_leg),
        ("server_leg", server_leg),
    ] {
        let n = p.packets;
        let name = pcap_name(tap, gzip);
        if p.made_up_conns > 0 {
            crate::say!(
                "warning: {name}: {} connection{} without a readable conn_open before {} frames (a damaged or missing line): \
                 written on made-up addresses 192.0.2.1:(10000 + id mod 50000) → 192.0.2.2:50051",
                p.made_up_conns,
                if p.made_up_conns == 1 { "" } else { "s" },
                if p.made_up_conns == 1 { "its" } else { "their" },
            );
        }
        if p.unix_conns > 0 {
            crate::say!(
                "note: {name}: {} connection{} over a Unix domain socket, which has no IP address: \
                 written on made-up addresses [2001:db8:0:1:H]:P → [2001:db8:0:2:H']:50051 (from the client end's \
                 name and the socket's path, as the other end's pcap writes them), or, for a client end with no \
                 name, 192.0.2.1:(10000 + id mod 50000) → 192.0.2.2:50051",
                p.unix_conns,
                if p.unix_conns == 1 { "" } else { "s" },
            );
        }
        if p.out_of_range > 0 {
            crate::say!(
                "warning: {name}: {} packet{} left out: {} time is past what a pcap holds (2106: a damaged `t` in the trace, or the header's origin_unix_ns)",
                p.out_of_range,
                if p.out_of_range == 1 { "" } else { "s" },
                if p.out_of_range == 1 { "its" } else { "their" },
            );
        }
        if p.unframed > 0 {
            crate::say!(
                "warning: {name}: {} bytes the tap read or wrote and could not frame (after a wire error) are not in it: \
                 a gap before the connection's FIN (\"previous segment not captured\") marks where they were",
                p.unframed
            );
        }
        p.w.into_writer()
            .finish()
            .with_context(|| format!("writing {name}"))?;
        let aside = asides.remove(tap).expect("each tap's pcap was opened");
        if n == 0 {
            drop(aside);
            // A pcap of an earlier trace would not be this one's.
            if std::fs::remove_file(dir.join(&name)).is_ok() {
                crate::say!(
                    "{}: removed {name}: this trace holds no connection of that tap",
                    dir.display()
                );
            }
        } else {
            written.push(aside);
        }
    }
    h2probe_analysis::aside::commit_together(written)
        .with_context(|| format!("writing the pcaps into {}", dir.display()))?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Parsed, Parser};

    fn ev_of(bytes: &[u8]) -> (FrameEv, u32) {
        let mut p = Parser::server_to_client();
        p.keep_data_payloads(false);
        let mut out = None;
        p.feed(bytes, |r| {
            if let Ok(Parsed::Frame(mut f)) = r {
                out = Some((
                    crate::trace::frame_event(
                        &mut f,
                        Dir::Out,
                        crate::config::CapturePayload::None,
                        true,
                    ),
                    f.head.stream(),
                ));
            }
        });
        out.unwrap()
    }

    #[test]
    fn typed_frames_rebuild_byte_exact_without_payload() {
        for bytes in [
            encode::window_update(3, 65_535),
            encode::settings(false, &[(4, 1 << 20), (5, 16_384)]),
            encode::rst_stream(1, 8),
            encode::ping(true, *b"abcdefgh"),
            encode::goaway(7, 11, b""),
            encode::priority(
                5,
                crate::wire::Priority {
                    dependency: 3,
                    exclusive: true,
                    weight: 16,
                },
            ),
        ] {
            let (ev, stream) = ev_of(&bytes);
            assert_eq!(frame_bytes(&ev, stream), bytes, "{ev:?}");
        }
        // DATA without payload: header exact, payload zeros, padding kept.
        let bytes = encode::data(1, 1, Some(4), b"xyz");
        let (ev, stream) = ev_of(&bytes);
        let rebuilt = frame_bytes(&ev, stream);
        assert_eq!(rebuilt.len(), bytes.len());
        assert_eq!(rebuilt[..10], bytes[..10]);
    }

    #[test]
    fn header_blocks_reserved_bits_and_unknown_types_rebuild_byte_exact() {
        // Header blocks and padding are not kept without a capture, so they
        // are zeros here: every byte the rebuild must get right is typed.
        let prio = crate::wire::Priority {
            dependency: 7,
            exclusive: true,
            weight: 200,
        };
        let end_headers = crate::wire::Flags::END_HEADERS;
        for bytes in [
            encode::headers(3, end_headers, None, Some(prio), &[0; 4]),
            encode::headers(3, end_headers, Some(3), Some(prio), &[0; 2]),
            encode::headers(3, end_headers, Some(0), None, &[0; 2]),
            encode::push_promise(1, end_headers, None, 4, &[0; 3]),
            encode::push_promise(1, end_headers, Some(2), 6, &[0; 1]),
            encode::raw(0x0, 0, 1 | 0x8000_0000, &[0; 5]),
            encode::raw(0x3, 0, 5 | 0x8000_0000, &8u32.to_be_bytes()),
            encode::raw(0x8, 0, 3, &(0x8000_0000u32 | 100).to_be_bytes()),
            // The stream id's reserved bit and the field's, apart and both.
            encode::raw(0x8, 0, 3 | 0x8000_0000, &100u32.to_be_bytes()),
            encode::raw(0x8, 0, 0x8000_0000, &(0x8000_0000u32 | 1).to_be_bytes()),
            encode::raw(0x7, 0, 0, &[0x80, 0, 0, 9, 0, 0, 0, 2]),
            encode::raw(0x5, 0x4, 1, &[0x80, 0, 0, 2, 0]),
            encode::raw(0x5, 0x4 | 0x8, 1, &[1, 0x80, 0, 0, 4, 0, 0]),
            encode::raw(0xfa, 0x3, 5, &[0; 4]),
            encode::continuation(3, end_headers, &[0; 2]),
        ] {
            let (ev, stream) = ev_of(&bytes);
            assert_eq!(frame_bytes(&ev, stream), bytes, "{ev:?}");
        }
    }

    #[test]
    fn a_kept_payload_is_used_only_when_it_is_the_frames_length() {
        let bytes = encode::data(1, 0, None, b"abc");
        let (mut ev, stream) = ev_of(&bytes);
        ev.payload = Some(crate::trace::schema::Payload(b"abc".to_vec()));
        assert_eq!(frame_bytes(&ev, stream), bytes);
        // A payload of another length (a damaged line) is not trusted: the
        // rebuild from the typed fields keeps the header and the length.
        let bytes = encode::window_update(3, 65_535);
        let (mut ev, stream) = ev_of(&bytes);
        ev.payload = Some(crate::trace::schema::Payload(vec![0xff; 3]));
        assert_eq!(frame_bytes(&ev, stream), bytes);
        ev.payload = Some(crate::trace::schema::Payload(vec![0xff; 5]));
        assert_eq!(frame_bytes(&ev, stream), bytes);
    }

    /// RFC 1071's sum against worked values, not against itself.
    #[test]
    fn the_internet_checksum_of_known_bytes() {
        // The IPv4 header of Wikipedia's worked example, checksum zeroed.
        let ip = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&[&ip]), 0xb861);
        // An odd byte is the high half of a last word, even across chunks.
        assert_eq!(checksum(&[&[0x01]]), 0xfeff);
        assert_eq!(checksum(&[&[0x12], &[0x34, 0x56]]), 0x97cb);
        assert_eq!(checksum(&[&[0x12, 0x34, 0x56]]), 0x97cb);
        // The carry folds back in: 0xffff + 0x0002 = 0x1_0001 → 0x0002.
        assert_eq!(checksum(&[&[0xff, 0xff, 0x00, 0x02]]), 0xfffd);
        assert_eq!(checksum(&[]), 0xffff);
    }

    /// Every header field where RFC 791, 8200 and 9293 put it (a reader
    /// that skips 20 + 20 bytes would not notice a wrong data offset).
    #[test]
    fn a_packet_is_laid_out_field_by_field() {
        let src: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        let dst: SocketAddr = "10.4.5.6:6000".parse().unwrap();
        let syn = packet(src, dst, 0x0102_0304, 0x0a0b_0c0d, SYN, b"");
        assert_eq!(syn.len(), 40);
        assert_eq!(syn[..2], [0x45, 0], "IPv4, 5 words, no TOS");
        assert_eq!(u16::from_be_bytes([syn[2], syn[3]]), 40, "total length");
        assert_eq!(syn[6..10], [0x40, 0, 64, 6], "DF, TTL 64, TCP");
        assert_eq!(syn[12..20], [10, 1, 2, 3, 10, 4, 5, 6]);
        let tcp = &syn[20..];
        assert_eq!(tcp[..4], [0x13, 0x88, 0x17, 0x70], "ports 5000 → 6000");
        assert_eq!(tcp[4..8], [1, 2, 3, 4], "seq");
        assert_eq!(tcp[8..12], [0, 0, 0, 0], "no ACK flag, no ack number");
        assert_eq!(tcp[12], 5 << 4, "data offset: 5 words");
        assert_eq!(tcp[13], SYN);
        assert_eq!(tcp[14..16], [0xff, 0xff], "window");
        assert_eq!(tcp[18..20], [0, 0], "urgent pointer");
        let ack = packet(src, dst, 1, 0x0a0b_0c0d, PSH | ACK, b"xyz");
        assert_eq!(ack.len(), 43);
        assert_eq!(u16::from_be_bytes([ack[2], ack[3]]), 43);
        assert_eq!(ack[28..32], [0x0a, 0x0b, 0x0c, 0x0d], "ack number");
        assert_eq!(ack[32], 5 << 4);
        assert_eq!(ack[33], PSH | ACK);
        assert_eq!(&ack[40..], b"xyz");
        // IPv6: version, payload length, next header TCP, hop limit 64.
        let v6 = packet(
            "[2001:db8::1]:5000".parse().unwrap(),
            "[2001:db8::2]:6000".parse().unwrap(),
            1,
            2,
            ACK,
            b"hi",
        );
        assert_eq!(v6.len(), 40 + 20 + 2);
        assert_eq!(v6[..4], [0x60, 0, 0, 0]);
        assert_eq!(u16::from_be_bytes([v6[4], v6[5]]), 22);
        assert_eq!(v6[6..8], [6, 64]);
        assert_eq!(v6[8..10], [0x20, 0x01]);
        assert_eq!(v6[39], 2, "destination's last byte");
        assert_eq!(v6[40 + 12], 5 << 4);
        // An IPv4 end with an IPv6 one: both written mapped, as IPv6.
        let mixed = packet(src, "[::1]:6000".parse().unwrap(), 1, 2, ACK, b"");
        assert_eq!(mixed[0] >> 4, 6);
        assert_eq!(
            mixed[8..24],
            "::ffff:10.1.2.3"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
    }

    #[test]
    fn checksums_verify() {
        let p = packet(
            "127.0.0.1:5000".parse().unwrap(),
            "127.0.0.1:6000".parse().unwrap(),
            1,
            2,
            PSH | ACK,
            b"hello",
        );
        assert_eq!(checksum(&[&p[..20]]), 0, "IPv4 header checksum");
        let pseudo = [
            &p[12..20],
            &[0, 6],
            &((p.len() - 20) as u16).to_be_bytes()[..],
        ]
        .concat();
        assert_eq!(checksum(&[&pseudo, &p[20..]]), 0, "TCP checksum");
        let p6 = packet(
            "[::1]:5000".parse().unwrap(),
            "[::1]:6000".parse().unwrap(),
            1,
            2,
            ACK,
            b"hi!",
        );
        assert_eq!(p6[0] >> 4, 6);
        assert_eq!(
            u16::from_be_bytes([p6[4], p6[5]]) as usize,
            p6.len() - 40,
            "payload length"
        );
        let tcp_len = (p6.len() - 40) as u32;
        let pseudo6 = [&p6[8..40], &tcp_len.to_be_bytes()[..], &[0, 0, 0, 6]].concat();
        assert_eq!(
            checksum(&[&pseudo6, &p6[40..]]),
            0,
            "TCP over IPv6 checksum"
        );
    }

    use crate::trace::schema::{ConnCloseEv, ConnOpenEv};

    fn tap() -> TapPcap<Vec<u8>> {
        TapPcap::new(PcapWriter::with_header(vec![], pcap_header()).unwrap(), 0)
    }

    fn event(t: u64, ep: Endpoint, conn: u32, stream: u32, kind: Kind) -> Event {
        Event {
            t,
            ep,
            conn,
            stream,
            kind,
        }
    }

    fn open(t: u64, ep: Endpoint, conn: u32, local: &str, peer: &str) -> Event {
        let kind = Kind::ConnOpen(ConnOpenEv {
            local: local.into(),
            peer: peer.into(),
        });
        event(t, ep, conn, 0, kind)
    }

    fn frame(
        t: u64,
        ep: Endpoint,
        conn: u32,
        dir: Dir,
        offset: u64,
        ty: FrameType,
        len: u32,
    ) -> Event {
        let stream = u32::from(ty == FrameType::DATA);
        let kind = Kind::Frame(FrameEv {
            dir,
            offset,
            frame: ty,
            len,
            ..FrameEv::default()
        });
        event(t, ep, conn, stream, kind)
    }

    fn close(t: u64, ep: Endpoint, conn: u32, bytes_in: u64, bytes_out: u64) -> Event {
        let kind = Kind::ConnClose(ConnCloseEv {
            error: String::new(),
            bytes_in,
            bytes_out,
        });
        event(t, ep, conn, 0, kind)
    }

    /// One TCP segment as a reader of the pcap sees it.
    #[derive(Debug, PartialEq)]
    struct Seg {
        t: u64,
        src: SocketAddr,
        dst: SocketAddr,
        seq: u32,
        ack: u32,
        flags: u8,
        len: usize,
    }

    fn seg(t: u64, src: &str, dst: &str, seq: u32, ack: u32, flags: u8, len: usize) -> Seg {
        let (src, dst) = (src.parse().unwrap(), dst.parse().unwrap());
        Seg {
            t,
            src,
            dst,
            seq,
            ack,
            flags,
            len,
        }
    }

    /// The segments of a tap's pcap, read back with pcap-file.
    fn segments(tap: TapPcap<Vec<u8>>) -> Vec<Seg> {
        let bytes = tap.w.into_writer();
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        let mut out = vec![];
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            let d = &p.data[..];
            let (src, dst, tcp): (IpAddr, IpAddr, &[u8]) = match d[0] >> 4 {
                4 => {
                    let a = |i: usize| IpAddr::from(<[u8; 4]>::try_from(&d[i..i + 4]).unwrap());
                    (a(12), a(16), &d[20..])
                }
                _ => {
                    let a = |i: usize| IpAddr::from(<[u8; 16]>::try_from(&d[i..i + 16]).unwrap());
                    (a(8), a(24), &d[40..])
                }
            };
            let u16_at = |i: usize| u16::from_be_bytes([tcp[i], tcp[i + 1]]);
            let u32_at = |i: usize| u32::from_be_bytes(tcp[i..i + 4].try_into().unwrap());
            out.push(Seg {
                t: p.timestamp.as_nanos() as u64,
                src: SocketAddr::new(src, u16_at(0)),
                dst: SocketAddr::new(dst, u16_at(2)),
                seq: u32_at(4),
                ack: u32_at(8),
                flags: tcp[13],
                len: tcp.len() - 20,
            });
        }
        out
    }

    /// The client's tap: a handshake, the preface before its first frame,
    /// sequence numbers from the frames' offsets, acks from what the peer
    /// sent so far, and bytes no frame covers left as a gap before the FIN.
    #[test]
    fn a_tap_writes_one_tcp_stream_from_its_frames_offsets() {
        let (c, s) = ("127.0.0.1:40000", "127.0.0.1:50051");
        let ep = Endpoint::Client;
        let mut p = tap();
        for e in [
            open(1_000, ep, 1, c, s),
            frame(2_000, ep, 1, Dir::Out, 24, FrameType::SETTINGS, 6),
            frame(3_000, ep, 1, Dir::In, 0, FrameType::SETTINGS, 0),
            frame(4_000, ep, 1, Dir::Out, 39, FrameType::DATA, 10),
            // 5 bytes written that no frame covers.
            close(5_000, ep, 1, 9, 63),
        ] {
            p.event(&e).unwrap();
        }
        assert_eq!((p.packets, p.unframed, p.skipped), (9, 5, 0));
        assert_eq!(
            segments(p),
            [
                seg(1_000, c, s, 1_000, 0, SYN, 0),
                seg(1_000, s, c, 500_000, 1_001, SYN | ACK, 0),
                seg(1_000, c, s, 1_001, 500_001, ACK, 0),
                seg(2_000, c, s, 1_001, 500_001, PSH | ACK, 24),
                seg(2_000, c, s, 1_025, 500_001, PSH | ACK, 15),
                seg(3_000, s, c, 500_001, 1_040, PSH | ACK, 9),
                seg(4_000, c, s, 1_040, 500_010, PSH | ACK, 19),
                seg(5_000, c, s, 1_064, 500_010, FIN | ACK, 0),
                seg(5_000, s, c, 500_010, 1_065, FIN | ACK, 0),
            ]
        );
    }

    /// The server's tap of the same connection writes the same segments
    /// (its `In` is the client's `Out`); a frame before its connection's
    /// `conn_open` waits for it.
    #[test]
    fn the_server_tap_matches_and_frames_wait_for_their_conn_open() {
        let (c, s) = ("127.0.0.1:40000", "127.0.0.1:50051");
        let ep = Endpoint::Server;
        let mut p = tap();
        for e in [
            frame(900, ep, 3, Dir::In, 24, FrameType::SETTINGS, 6),
            open(1_000, ep, 3, s, c),
            frame(3_000, ep, 3, Dir::Out, 0, FrameType::SETTINGS, 0),
            close(5_000, ep, 3, 39, 9),
            // Closed once.
            close(6_000, ep, 3, 39, 9),
        ] {
            p.event(&e).unwrap();
        }
        assert_eq!((p.held_frames, p.skipped, p.unframed), (0, 0, 0));
        assert_eq!(
            segments(p),
            [
                seg(1_000, c, s, 1_000, 0, SYN, 0),
                seg(1_000, s, c, 500_000, 1_001, SYN | ACK, 0),
                seg(1_000, c, s, 1_001, 500_001, ACK, 0),
                seg(900, c, s, 1_001, 500_001, PSH | ACK, 24),
                seg(900, c, s, 1_025, 500_001, PSH | ACK, 15),
                seg(3_000, s, c, 500_001, 1_040, PSH | ACK, 9),
                seg(5_000, s, c, 500_010, 1_040, FIN | ACK, 0),
                seg(5_000, c, s, 1_040, 500_011, FIN | ACK, 0),
            ]
        );
        // A client that sent no preface (its first frame at offset 0):
        // none is made up for it.
        let mut p = tap();
        p.event(&open(1_000, ep, 4, s, c)).unwrap();
        p.event(&frame(2_000, ep, 4, Dir::In, 0, FrameType::SETTINGS, 0))
            .unwrap();
        let segs = segments(p);
        assert_eq!(segs.len(), 4);
        assert_eq!(segs[3], seg(2_000, c, s, 1_001, 500_001, PSH | ACK, 9));
    }

    /// Connections whose `conn_open` never comes are written at the end on
    /// made-up addresses, in the order their first frames came, and their
    /// frames counted; past MAX_HELD_FRAMES a connection stops waiting.
    #[test]
    fn connections_without_a_conn_open_go_on_made_up_addresses() {
        let ep = Endpoint::Client;
        let mut p = tap();
        p.event(&frame(60, ep, 8, Dir::Out, 24, FrameType::SETTINGS, 0))
            .unwrap();
        p.event(&frame(50, ep, 9, Dir::Out, 24, FrameType::SETTINGS, 0))
            .unwrap();
        p.event(&frame(70, ep, 8, Dir::In, 0, FrameType::SETTINGS, 0))
            .unwrap();
        assert_eq!((p.packets, p.held_frames), (0, 3));
        p.finish().unwrap();
        assert_eq!((p.skipped, p.made_up_conns, p.held_frames), (3, 2, 0));
        let syns: Vec<_> = segments(p)
            .into_iter()
            .filter(|s| s.flags == SYN)
            .map(|s| (s.src, s.dst))
            .collect();
        let addr = |a: &str| a.parse::<SocketAddr>().unwrap();
        assert_eq!(
            syns,
            [
                (addr("192.0.2.1:10009"), addr("192.0.2.2:50051")),
                (addr("192.0.2.1:10008"), addr("192.0.2.2:50051")),
            ]
        );
        assert_eq!(made_up_by_id(50_003).0, addr("192.0.2.1:10003"));

        let mut p = tap();
        for k in 0..=MAX_HELD_FRAMES as u64 {
            p.event(&frame(
                k,
                ep,
                4,
                Dir::Out,
                24 + 9 * k,
                FrameType::SETTINGS,
                0,
            ))
            .unwrap();
        }
        assert_eq!(
            (p.held_frames, p.skipped, p.made_up_conns),
            (0, MAX_HELD_FRAMES as u64 + 1, 1)
        );
        // Its conn_open, come at last, changes nothing.
        let packets = p.packets;
        p.event(&open(1 << 20, ep, 4, "127.0.0.1:1", "127.0.0.1:2"))
            .unwrap();
        assert_eq!(p.packets, packets);
        assert!(p.conns[&4].local.ip().to_string().starts_with("192.0.2."));
    }

    /// A Unix domain socket's connection gets the same made-up IPv6
    /// addresses in both taps' pcaps (from the client end's name and the
    /// socket's path); a client end without a name, the id's.
    #[test]
    fn both_taps_of_a_unix_socket_write_the_same_made_up_addresses() {
        let mut client = tap();
        client
            .event(&open(
                10,
                Endpoint::Client,
                1,
                "unix:@h2probe-7",
                "unix:/run/s.sock",
            ))
            .unwrap();
        let mut server = tap();
        server
            .event(&open(
                10,
                Endpoint::Server,
                5,
                "unix:/run/s.sock",
                "unix:@h2probe-7",
            ))
            .unwrap();
        assert_eq!((client.unix_conns, server.unix_conns), (1, 1));
        assert_eq!(client.made_up_conns + server.made_up_conns, 0);
        let (c, s) = (segments(client), segments(server));
        assert_eq!(c, s);
        let (src, dst) = (c[0].src, c[0].dst);
        assert!(src.to_string().starts_with("[2001:db8:0:1:"), "{src}");
        assert!(
            dst.to_string().starts_with("[2001:db8:0:2:") && dst.port() == 50051,
            "{dst}"
        );
        let h = fnv1a(b"h2probe-7");
        assert_eq!(src.port(), 10_000 + (h % 50_000) as u16);
        // FNV-1a's published test values.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        // The address is the hash word by word, the port from it too: the
        // client named "a" (FNV-1a 0xaf63dc4c8601ec8c), the server at ""
        // (the offset basis).
        assert_eq!(
            made_up_for_unix("unix:@a", ""),
            Some((
                "[2001:db8:0:1:af63:dc4c:8601:ec8c]:51996".parse().unwrap(),
                "[2001:db8:0:2:cbf2:9ce4:8422:2325]:50051".parse().unwrap()
            ))
        );
        // Another name, another address; no name: the id's.
        assert_ne!(
            made_up_for_unix("unix:@h2probe-8", "unix:/run/s.sock")
                .unwrap()
                .0,
            src
        );
        assert_eq!(
            made_up_for_unix(h2probe_analysis::schema::UNIX_UNNAMED, "unix:/run/s.sock"),
            None
        );
        let mut unnamed = tap();
        unnamed
            .event(&open(
                10,
                Endpoint::Server,
                6,
                "unix:/run/s.sock",
                h2probe_analysis::schema::UNIX_UNNAMED,
            ))
            .unwrap();
        assert_eq!(segments(unnamed)[0].src, "192.0.2.1:10006".parse().unwrap());
    }

    /// A time past what a pcap's 32-bit seconds hold is left out and
    /// counted, not a failed export.
    #[test]
    fn a_time_past_2106_is_left_out_and_counted() {
        let mut p = tap();
        p.to_wall = (u32::MAX as i128 + 1) * 1_000_000_000;
        p.event(&open(0, Endpoint::Client, 1, "127.0.0.1:1", "127.0.0.1:2"))
            .unwrap();
        assert_eq!((p.packets, p.out_of_range), (0, 3));
        p.to_wall = u32::MAX as i128 * 1_000_000_000;
        p.event(&close(999_999_999, Endpoint::Client, 1, 0, 0))
            .unwrap();
        assert_eq!((p.packets, p.out_of_range), (2, 3));
    }

    /// A frame larger than a segment holds is split at MSS bytes, each
    /// part at its own sequence number.
    #[test]
    fn a_frame_past_the_mss_is_split_into_segments_at_their_offsets() {
        let (c, s) = ("127.0.0.1:40000", "127.0.0.1:50051");
        let ep = Endpoint::Client;
        let mut p = tap();
        p.event(&open(1_000, ep, 1, c, s)).unwrap();
        p.event(&frame(2_000, ep, 1, Dir::Out, 24, FrameType::DATA, 140_000))
            .unwrap();
        let segs = segments(p);
        let data: Vec<(u32, usize)> = segs[4..].iter().map(|g| (g.seq, g.len)).collect();
        assert_eq!(
            data,
            [
                (1_025, MSS),
                (1_025 + MSS as u32, MSS),
                (1_025 + 2 * MSS as u32, 140_009 - 2 * MSS)
            ]
        );
    }

    /// Captured payload held for a connection is counted while held and
    /// given back when it is written; past MAX_HELD_PAYLOAD the connection
    /// stops waiting.
    #[test]
    fn held_payload_is_bounded_and_given_back() {
        let ep = Endpoint::Server;
        let with_payload = |t, conn, offset, n: usize| {
            let mut e = frame(t, ep, conn, Dir::In, offset, FrameType::DATA, n as u32);
            if let Kind::Frame(f) = &mut e.kind {
                f.payload = Some(crate::trace::schema::Payload(vec![7; n]));
            }
            e
        };
        let mut p = tap();
        p.event(&with_payload(10, 1, 24, 1_000)).unwrap();
        p.event(&with_payload(11, 2, 24, 500)).unwrap();
        assert_eq!((p.held_frames, p.held_payload), (2, 1_500));
        p.event(&open(20, ep, 1, "127.0.0.1:50051", "127.0.0.1:40000"))
            .unwrap();
        assert_eq!((p.held_frames, p.held_payload), (1, 500));
        let half = MAX_HELD_PAYLOAD / 2;
        p.event(&with_payload(30, 3, 24, half)).unwrap();
        assert_eq!((p.made_up_conns, p.held_payload), (0, half + 500));
        p.event(&with_payload(31, 3, 24 + 9 + half as u64, half))
            .unwrap();
        assert_eq!((p.made_up_conns, p.skipped), (1, 2));
        assert_eq!((p.held_frames, p.held_payload), (1, 500));
    }

    /// A conn_open whose addresses do not parse (a damaged line) is not a
    /// Unix socket: its frames wait, then go on made-up addresses as
    /// damage; a Unix socket's second conn_open changes nothing.
    #[test]
    fn a_damaged_conn_open_is_damage_not_a_unix_socket() {
        let ep = Endpoint::Client;
        let mut p = tap();
        p.event(&open(10, ep, 1, "127.0.0.1:x", "127.0.0.1:y"))
            .unwrap();
        p.event(&frame(20, ep, 1, Dir::Out, 24, FrameType::SETTINGS, 0))
            .unwrap();
        assert_eq!((p.unix_conns, p.packets, p.held_frames), (0, 0, 1));
        p.finish().unwrap();
        assert_eq!((p.made_up_conns, p.skipped, p.unix_conns), (1, 1, 0));

        let mut p = tap();
        let unix = open(10, ep, 2, "unix:@h2probe-1", "unix:/run/s.sock");
        p.event(&unix).unwrap();
        p.event(&unix).unwrap();
        assert_eq!((p.unix_conns, p.packets), (1, 3));

        // A first frame written twice (a duplicated line): one preface.
        let mut p = tap();
        p.event(&open(10, ep, 3, "127.0.0.1:1", "127.0.0.1:2"))
            .unwrap();
        let first = frame(20, ep, 3, Dir::Out, 24, FrameType::SETTINGS, 0);
        p.event(&first).unwrap();
        p.event(&first).unwrap();
        let lens: Vec<usize> = segments(p).iter().map(|g| g.len).collect();
        assert_eq!(lens, [0, 0, 0, 24, 9, 9]);
    }
}
