//! `client --connect unix:PATH`: a gRPC server behind a Unix domain socket
//! (a sidecar, a node agent) is called like any other. Here the socket is
//! a forwarder in front of `h2probe serve`, so both ends' traces can be
//! compared: every message and DATA byte the client sent over the Unix
//! socket reached the server.

mod support;

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};

fn h2probe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A child's first stdout line (where `serve` and `relay` say where they
/// listen: a Unix path may pass 80 columns, which `support` asserts).
fn first_line(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    line
}

/// Accepts one connection on `sock` and copies it both ways to `tcp`.
fn forward_once(sock: &Path, tcp: String) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(sock).unwrap();
    std::thread::spawn(move || {
        let (unix, _) = listener.accept().unwrap();
        let tcp = std::net::TcpStream::connect(tcp).unwrap();
        let pipe = |mut from: Box<dyn std::io::Read + Send>,
                    mut to: Box<dyn std::io::Write + Send>,
                    close: Box<dyn FnOnce() + Send>| {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                close();
            })
        };
        let (u2, t2) = (unix.try_clone().unwrap(), tcp.try_clone().unwrap());
        let (u3, t3) = (unix.try_clone().unwrap(), tcp.try_clone().unwrap());
        let up = pipe(
            Box::new(unix),
            Box::new(tcp),
            Box::new(move || {
                let _ = t3.shutdown(std::net::Shutdown::Write);
            }),
        );
        let down = pipe(
            Box::new(t2),
            Box::new(u2),
            Box::new(move || {
                let _ = u3.shutdown(std::net::Shutdown::Write);
            }),
        );
        up.join().unwrap();
        down.join().unwrap();
    })
}

#[test]
fn a_server_behind_a_unix_domain_socket_receives_every_message() {
    let dir = support::temp_dir("unix-socket");
    let mut server = support::Reaped(
        Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--exit-after",
                "1",
                "--service-time",
                "1ms",
                "--no-pcap",
                "-q",
                "--out",
            ])
            .arg(dir.join("srv"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let addr = support::listening_addr(&mut server.0);
    let sock = dir.join("app.sock");
    let forwarder = forward_once(&sock, addr);
    let connect = format!("unix:{}", sock.display());
    let cli = dir.join("cli");
    let out = h2probe(&[
        "client",
        "--connect",
        &connect,
        "--rate",
        "100",
        "--duration",
        "1s",
        // Through the user-space link too (its pumps on the Unix socket).
        "--link-delay",
        "1ms",
        "-q",
        "--out",
        cli.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    // The pcap's made-up addresses are not said to mend damage.
    assert!(!text(&out).contains("damaged"), "{}", text(&out));
    assert!(server.wait().unwrap().success());
    forwarder.join().unwrap();

    let c = support::read_summary(&cli);
    let s = support::read_summary(&dir.join("srv"));
    assert!(c.sent >= 95, "{}", text(&out));
    assert_eq!(c.sent, c.scheduled);
    assert_eq!((s.decoded, s.completed), (c.sent, c.sent));
    assert_eq!(c.data_bytes_out, s.data_bytes_in);
    assert!(c.data_bytes_out > c.sent * 16 * 1024);
    // The tap names the socket: its path, and a client end with no name.
    let trace = std::fs::read_to_string(cli.join("trace.jsonl")).unwrap();
    let open = trace.lines().find(|l| l.contains("\"conn_open\"")).unwrap();
    assert!(
        open.contains(&format!("\"peer\":\"{connect}\"")) && open.contains("\"local\":\"unix:"),
        "{open}"
    );
    // The pcap export still writes every frame (in synthetic TCP: a Unix
    // socket has no address to put in an IP header).
    let pcap = std::fs::metadata(cli.join("client.pcap")).unwrap();
    assert!(pcap.len() > 1000, "{}", pcap.len());
}

#[test]
fn unix_socket_mistakes_are_explained() {
    let dir = support::temp_dir("unix-socket-mistakes");
    let out_dir = dir.join("never");
    let out = h2probe(&[
        "client",
        "--connect",
        "unix://run/app.sock",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("unix:// takes an absolute path"),
        "{}",
        text(&out)
    );
    assert!(!out_dir.exists());
    let missing = dir.join("nobody.sock");
    let out = h2probe(&[
        "client",
        "--connect",
        &format!("unix:{}", missing.display()),
        "--duration",
        "200ms",
        "-q",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("connecting to unix:{}", missing.display())),
        "{}",
        text(&out)
    );
}

/// `serve --listen unix:PATH`, called by `client --connect unix:PATH` over
/// three connections. The client names its ends (`unix:@h2probe-…`, Linux's
/// abstract namespace) so that merging the two traces pairs each client
/// connection with the very server connection that accepted it, whatever
/// the order of the accepts: every check is judged, and holds. The socket
/// file goes when the server ends.
#[test]
fn serve_listens_on_a_unix_domain_socket_and_both_traces_pair() {
    let dir = support::temp_dir("unix-serve");
    let sock = dir.join("probe.sock");
    let listen = format!("unix:{}", sock.display());
    let mut server = support::Reaped(
        Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(["serve", "--listen", &listen, "--exit-after", "6"])
            .args(["--service-time", "1ms", "--no-pcap", "-q", "--out"])
            .arg(dir.join("srv"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let line = first_line(&mut server.0);
    assert_eq!(line.trim_end(), format!("h2probe: listening on {listen}"));
    let cli = dir.join("cli");
    let out = h2probe(&[
        "client",
        "--connect",
        &listen,
        "--connections",
        "3",
        "--streams",
        "2",
        "--rate",
        "300",
        "--duration",
        "1s",
        "-q",
        "--no-pcap",
        "--out",
        cli.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(server.wait().unwrap().success());
    assert!(!sock.exists(), "the socket file is removed at exit");

    // Each server connection's peer is one client connection's own end.
    let opens = |d: &Path| -> Vec<(String, String)> {
        std::fs::read_to_string(d.join("trace.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| l.contains("\"conn_open\""))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["local"].to_string(), v["peer"].to_string())
            })
            .collect()
    };
    let (c, s) = (opens(&cli), opens(&dir.join("srv")));
    assert_eq!((c.len(), s.len()), (3, 3), "{c:?} {s:?}");
    for (local, peer) in &c {
        assert!(local.starts_with("\"unix:@h2probe-"), "{local}");
        assert_eq!(peer, &format!("{listen:?}"));
        assert_eq!(s.iter().filter(|(l, p)| (p, l) == (local, peer)).count(), 1);
    }
    let merged = dir.join("merged");
    support::h2probe_ok([
        "merge",
        cli.to_str().unwrap(),
        dir.join("srv").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    let m = support::read_summary(&merged);
    for (name, check) in &m.checks {
        assert_eq!(check.ok, Some(true), "{name}: {check:?}");
    }
    let agree = &m.checks["windows_agree"].detail;
    assert!(agree.starts_with("3 connections"), "{agree}");
    let bytes = &m.checks["bytes"].detail;
    assert!(bytes.starts_with("6 streams"), "{bytes}");

    // Both pcaps write a connection on the same made-up addresses and
    // sequence numbers (from the client end's name and the socket's path,
    // which both traces hold): each direction of each connection covers the
    // same bytes in both, three connections apart. Each tap numbered its
    // own, and ports differed. (Segments are compared as the bytes they
    // cover: a client's write and the server's reads of it need not cut
    // the stream alike, and under load they did not.)
    for d in [&cli, &dir.join("srv")] {
        let out = h2probe(&["export", "--format", "pcap", d.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("2001:db8:0:1:H"), "{}", text(&out));
    }
    let Some(tshark) = support::require_tool("tshark") else {
        return;
    };
    type Flows = std::collections::BTreeMap<String, Vec<(u64, u64)>>;
    let covered = |pcap: std::path::PathBuf| -> Flows {
        let out = Command::new(&tshark)
            .arg("-r")
            .arg(&pcap)
            .args(["-Y", "tcp.len > 0"])
            .args(["-T", "fields", "-e", "ipv6.src", "-e", "tcp.srcport"])
            .args(["-e", "ipv6.dst", "-e", "tcp.dstport", "-e", "tcp.seq_raw"])
            .args(["-e", "tcp.len"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let mut flows = Flows::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let (seq, len): (u64, u64) = (f[4].parse().unwrap(), f[5].parse().unwrap());
            flows
                .entry(f[..4].join(" "))
                .or_default()
                .push((seq, seq + len));
        }
        // Each flow's segments merged into the ranges they cover.
        for ranges in flows.values_mut() {
            ranges.sort_unstable();
            let mut merged: Vec<(u64, u64)> = vec![];
            for &(a, b) in ranges.iter() {
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            *ranges = merged;
        }
        flows
    };
    let (c, s) = (
        covered(cli.join("client.pcap")),
        covered(dir.join("srv").join("server.pcap")),
    );
    // The same bytes both ways, but for a tail the receiving side never
    // read: a closing connection's last frames (a GOAWAY written as the
    // client closed, under load, 17 bytes the client never read).
    assert_eq!(
        c.keys().collect::<Vec<_>>(),
        s.keys().collect::<Vec<_>>(),
        "the two pcaps hold other flows"
    );
    let mut unread_tails = 0;
    for (flow, cr) in &c {
        let sr = &s[flow];
        // "src sport dst dport": the server's port sends to the client.
        let to_client = flow.split(' ').nth(1) == Some("50051");
        let (sent, read) = if to_client { (sr, cr) } else { (cr, sr) };
        let (body, last) = (sent.len() - 1, sent[sent.len() - 1]);
        let read_last = read[read.len() - 1];
        assert!(
            read.len() == sent.len()
                && read[..body] == sent[..body]
                && read_last.0 == last.0
                && read_last.1 <= last.1
                && last.1 - read_last.1 < 100,
            "{flow}: written {sent:?}, read {read:?}"
        );
        unread_tails += usize::from(read_last.1 < last.1);
    }
    // And tshark reads the same HTTP/2 frames in both.
    let frames = |pcap: std::path::PathBuf| -> usize {
        let out = Command::new(&tshark)
            .arg("-r")
            .arg(&pcap)
            .args(["-d", "tcp.port==50051,http2", "-Y", "http2"])
            .args(["-T", "fields", "-e", "http2.type"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .split([',', '\n'])
            .filter(|t| !t.is_empty())
            .count()
    };
    let (fc, fs) = (
        frames(cli.join("client.pcap")),
        frames(dir.join("srv").join("server.pcap")),
    );
    // A tail never read holds a frame or two (a GOAWAY, its PING).
    assert!(
        fc > 100 && fc.abs_diff(fs) <= 2 * unread_tails,
        "HTTP/2 frames: {fc} and {fs}, {unread_tails} tails unread"
    );
    // Three connections, each both ways, each a stream of bytes from its
    // role's ISN (1,000 for a client's, 500,000 for a server's).
    assert_eq!(c.len(), 6, "{c:?}");
    for (flow, ranges) in &c {
        let from_client = flow.starts_with("2001:db8:0:1:");
        assert_eq!(ranges.len(), 1, "{flow}: a gap: {ranges:?}");
        let isn = if from_client { 1_001 } else { 500_001 };
        assert_eq!(ranges[0].0, isn, "{flow}");
        assert!(ranges[0].1 > isn + 1_000, "{flow}: {ranges:?}");
    }
}

/// What `serve --listen unix:PATH` finds at PATH: a stale socket (its
/// server gone) is replaced; a live one (its backlog full too), or a file
/// or directory that is not a socket, is refused, named and left as it
/// is; a path too long for a socket is refused.
#[test]
fn serve_replaces_only_a_stale_socket() {
    let dir = support::temp_dir("unix-serve-path");
    let serve = |path: &Path, out: &str| {
        Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(["serve", "--listen", &format!("unix:{}", path.display())])
            .args(["--for", "200ms", "--no-pcap", "-q", "--out"])
            .arg(dir.join(out))
            .output()
            .unwrap()
    };
    // Stale: bound, then its listener gone (the file stays).
    let stale = dir.join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let out = serve(&stale, "a");
    assert!(out.status.success(), "{}", text(&out));
    assert!(!stale.exists());
    // Live: someone accepts there.
    let live = dir.join("live.sock");
    let _held = UnixListener::bind(&live).unwrap();
    let out = serve(&live, "b");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("another process listens there"),
        "{}",
        text(&out)
    );
    assert!(live.exists() && !dir.join("b").exists());
    // Not a socket: never removed.
    let file = dir.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let out = serve(&file, "c");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the path exists and is a file, not a socket"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    // A directory is named as one.
    let out = serve(&dir, "e");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is a directory, not a socket"),
        "{}",
        text(&out)
    );
    // Live with its backlog full: still live, said so (not "Resource
    // temporarily unavailable"), and left as it is.
    let full = dir.join("full.sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _held = rt.block_on(async {
        // A backlog of one (std listens with the kernel's somaxconn, 4096
        // here: more descriptors than a default ulimit allows).
        let socket = tokio::net::UnixSocket::new_stream().unwrap();
        socket.bind(&full).unwrap();
        let listener = socket.listen(1).unwrap();
        let mut queued = vec![];
        for _ in 0..64 {
            match tokio::net::UnixStream::connect(&full).await {
                Ok(s) => queued.push(s),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return (listener, queued);
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("a backlog of one never filled");
    });
    let out = serve(&full, "f");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("its backlog is full: it accepts none for now"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("another process listens there"),
        "{}",
        text(&out)
    );
    assert!(full.exists() && !dir.join("f").exists());
    // Too long for sun_path: said in bytes, not as "SUN_LEN".
    let long = dir.join("s".repeat(120));
    let out = serve(&long, "d");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("holds at most 107"), "{}", text(&out));
}

/// `relay` between a client and a server that both speak over Unix domain
/// sockets (a sidecar's setup): `serve --listen unix:`, `relay --listen
/// unix: --upstream unix:`, `client --connect unix:`, each spelling the
/// paths its own way (relative, absolute, `unix:///`). The merge of the
/// three traces pairs every connection through the relay and every check
/// holds; a relay to its own socket, or to `unix:` alone, is refused.
#[test]
fn relay_between_unix_domain_sockets_pairs_every_leg() {
    let dir = support::temp_dir("unix-relay");
    let spawn = |args: &[&str]| {
        support::Reaped(
            Command::new(env!("CARGO_BIN_EXE_h2probe"))
                .current_dir(&dir)
                .args(args)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let mut server = spawn(&[
        "serve",
        "--listen",
        "unix:srv.sock",
        "--exit-after",
        "4",
        "-q",
        "--no-pcap",
        "--out",
        "srv",
    ]);
    first_line(&mut server.0);
    let upstream = format!("unix://{}", dir.join("srv.sock").display());
    let relay_sock = format!("unix:{}", dir.join("relay.sock").display());
    let mut relay = spawn(&[
        "relay",
        "--listen",
        &relay_sock,
        "--upstream",
        &upstream,
        "--exit-after",
        "2",
        "--no-pcap",
        "--out",
        "rel",
    ]);
    assert!(first_line(&mut relay.0).contains("relaying unix:"));
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .current_dir(&dir)
        .args([
            "client",
            "--connect",
            "unix:relay.sock",
            "--connections",
            "2",
        ])
        .args([
            "--streams",
            "2",
            "--duration",
            "1s",
            "-q",
            "--no-pcap",
            "--out",
            "cli",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(server.wait().unwrap().success());
    assert!(relay.wait().unwrap().success());
    let merged = dir.join("merged");
    support::h2probe_ok([
        "merge",
        dir.join("cli").to_str().unwrap(),
        dir.join("rel").to_str().unwrap(),
        dir.join("srv").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    let m = support::read_summary(&merged);
    for (name, check) in &m.checks {
        assert_eq!(check.ok, Some(true), "{name}: {check:?}");
    }
    assert!(m.checks.contains_key("relay_forwarded_unchanged"));
    let agree = &m.checks["windows_agree"].detail;
    assert!(agree.starts_with("2 connections"), "{agree}");
    assert_eq!(m.decoded, m.sent);

    let refused = |upstream: &str, said: &str| {
        let out = h2probe(&["relay", "--listen", &relay_sock, "--upstream", upstream]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(said), "{}", text(&out));
    };
    refused(&relay_sock, "it would relay to itself");
    // The same socket spelled another way (relative): refused once bound,
    // and the socket file it made is gone.
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .current_dir(&dir)
        .args([
            "relay",
            "--listen",
            &relay_sock,
            "--upstream",
            "unix:relay.sock",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("it would relay to itself"),
        "{}",
        text(&out)
    );
    assert!(!dir.join("relay.sock").exists());
    refused("unix:", "no path after unix:");
}
