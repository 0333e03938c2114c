//! TLS end to end: `serve --tls-cert/--tls-key` with a certificate issued by
//! a CA made here (rcgen), `client --tls --ca` by hostname. The taps sit
//! above TLS (every frame still recorded, both traces merge with every check
//! holding), SSLKEYLOGFILE is honoured, socket-blocked time is measured on
//! the socket below TLS, and verification failures are explained.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A CA named `name`: its issuer and its certificate's PEM.
fn ca(name: &str) -> (rcgen::Issuer<'static, rcgen::KeyPair>, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let pem = params.self_signed(&key).unwrap().pem();
    (rcgen::Issuer::new(params, key), pem)
}

/// A leaf certificate for `names` signed by `issuer`, written to
/// `dir/{stem}.pem` and its key to `dir/{stem}-key.pem`.
fn leaf(
    dir: &Path,
    stem: &str,
    issuer: &rcgen::Issuer<'static, rcgen::KeyPair>,
    names: &[&str],
) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&key, issuer)
            .unwrap();
    let paths = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}-key.pem")),
    );
    std::fs::write(&paths.0, cert.pem()).unwrap();
    std::fs::write(&paths.1, key.serialize_pem()).unwrap();
    paths
}

/// A CA and a leaf certificate for localhost / 127.0.0.1 signed by it:
/// (ca.pem, cert.pem, key.pem).
fn pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (issuer, pem) = ca("h2probe test CA");
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, pem).unwrap();
    let (cert, key) = leaf(dir, "cert", &issuer, &["localhost", "127.0.0.1"]);
    (ca_path, cert, key)
}

/// `h2probe serve --tls-cert --tls-key` on an ephemeral port; returns the
/// child and its port (read from the "listening on" line).
fn serve_tls(dir: &Path, cert: &Path, key: &Path, extra: &[&str]) -> (support::Reaped, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-pcap",
            "-q",
            "--out",
        ])
        .arg(dir)
        .arg("--tls-cert")
        .arg(cert)
        .arg("--tls-key")
        .arg(key)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut child);
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    (support::Reaped(child), port)
}

fn client(args: &[&str], envs: &[(&str, &Path)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_h2probe"));
    c.arg("client").args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// What a command said, stdout then stderr, with lines folded at 80
/// columns joined back (an RPC's line continues indented).
fn text(out: &std::process::Output) -> String {
    support::unfolded(&format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

#[test]
fn a_tls_run_records_every_frame_on_both_sides_and_writes_the_key_log() {
    let dir = support::temp_dir("tls");
    let (ca, cert, key) = pki(&dir);
    let (mut server, port) = serve_tls(&dir.join("srv"), &cert, &key, &["--exit-after", "1"]);
    let keylog = dir.join("keys.txt");
    let cli = dir.join("cli");
    let out = client(
        &[
            "--connect",
            &format!("localhost:{port}"),
            "--tls",
            "--ca",
            ca.to_str().unwrap(),
            "--rate",
            "200",
            "--duration",
            "1s",
            "--no-pcap",
            "-q",
            "--out",
            cli.to_str().unwrap(),
        ],
        &[("SSLKEYLOGFILE", &keylog)],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(server.wait().unwrap().success());

    // The key log (NSS format) has the TLS 1.3 secrets Wireshark needs.
    let keys = std::fs::read_to_string(&keylog).unwrap();
    for label in [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET ",
        "CLIENT_TRAFFIC_SECRET_0 ",
        "SERVER_TRAFFIC_SECRET_0 ",
    ] {
        assert!(
            keys.lines().any(|l| l.starts_with(label)),
            "{label}: {keys}"
        );
    }
    // The request went out as https with the hostname as authority.
    let meta = std::fs::read_to_string(cli.join("meta.json")).unwrap();
    assert!(meta.contains("against --ca"), "{meta}");

    // Both traces merge into one run in which every two-sided check holds:
    // the taps saw the same plaintext frames on both sides of TLS.
    let both = dir.join("both");
    let merged = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("merge")
        .arg(dir.join("srv"))
        .arg(&cli)
        .arg("--out")
        .arg(&both)
        .output()
        .unwrap();
    assert!(merged.status.success(), "{}", text(&merged));
    let s = support::read_summary(&both);
    assert!(s.scheduled >= 195, "{}", s.scheduled);
    assert_eq!(
        (s.sent, s.decoded, s.completed),
        (s.scheduled, s.sent, s.sent)
    );
    assert_eq!(s.data_bytes_out, s.data_bytes_in);
    assert!(s.data_bytes_out > s.sent * 16 * 1024);
    assert_eq!(s.window_updates_in, s.window_updates_out);
    for (name, c) in &s.checks {
        if name == "no_stall" {
            continue; // detected by `run` only
        }
        assert_eq!(c.ok, Some(true), "{name}: {}", c.detail);
    }
}

#[test]
fn socket_blocked_is_measured_below_tls() {
    let dir = support::temp_dir("tls-slow");
    let (ca, cert, key) = pki(&dir);
    let (mut server, port) = serve_tls(
        &dir.join("srv"),
        &cert,
        &key,
        &[
            "--exit-after",
            "1",
            "--stream-window",
            "1MiB",
            "--conn-window",
            "1MiB",
            "--service-time",
            "0s",
        ],
    );
    let cli = dir.join("cli");
    let out = client(
        &[
            "--connect",
            &format!("127.0.0.1:{port}"),
            "--authority",
            &format!("localhost:{port}"),
            "--tls",
            "--ca",
            ca.to_str().unwrap(),
            "--link-rate",
            "256KiB",
            "--duration",
            "1500ms",
            "--max-pending",
            "20",
            "--no-pcap",
            "-q",
            "--out",
            cli.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(server.wait().unwrap().success());
    // A 256 KiB/s link under a 1 MiB window: the socket (below TLS) is the
    // bottleneck, not the window.
    let s = support::read_summary(&cli);
    assert!(s.client_socket_blocked_s > 0.3, "{}", text(&out));
    assert!(s.client_window_blocked_s < 0.15, "{}", text(&out));
}

#[test]
fn verification_failures_are_explained_and_insecure_is_loud() {
    let dir = support::temp_dir("tls-verify");
    let (ca, cert, key) = pki(&dir);
    let (mut server, port) = serve_tls(&dir.join("srv"), &cert, &key, &["--exit-after", "1"]);
    let connect = format!("localhost:{port}");
    let common = ["--duration", "300ms", "--rate", "20", "--no-pcap", "-q"];
    let run = |extra: &[&str], name: &str| {
        let out_dir = dir.join(name);
        let mut a = vec![
            "--connect",
            connect.as_str(),
            "--tls",
            "--out",
            out_dir.to_str().unwrap(),
        ];
        a.extend(common);
        a.extend(extra);
        (client(&a, &[]), out_dir)
    };
    // The system's roots do not know the test CA (a machine without a
    // system store is refused before connecting, with exit 2).
    let (out, _) = run(&[], "roots");
    let explained = match out.status.code() {
        Some(1) => text(&out).contains("not among the trusted roots: give the CA with --ca"),
        Some(2) => text(&out).contains("no usable root certificate in the system's store"),
        _ => false,
    };
    assert!(explained, "{}", text(&out));
    let refused_expected = if out.status.code() == Some(1) { 2 } else { 1 };
    // A name the certificate does not carry.
    let other = format!("elsewhere.test:{port}");
    let (out, _) = run(
        &["--ca", ca.to_str().unwrap(), "--authority", &other],
        "name",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("does not carry the name"),
        "{}",
        text(&out)
    );
    // --insecure connects, and says so on stderr and in meta.json.
    let (out, cli) = run(&["--insecure"], "insecure");
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("WARNING: --insecure"));
    let meta = std::fs::read_to_string(cli.join("meta.json")).unwrap();
    assert!(meta.contains("NONE (--insecure)"), "{meta}");
    assert!(server.wait().unwrap().success());
    // The server recorded the failed handshakes as refused connections.
    let srv = support::read_summary(&dir.join("srv"));
    assert_eq!(srv.conns_refused, refused_expected);
}

#[test]
fn run_with_a_given_certificate_speaks_tls_to_its_own_server() {
    let dir = support::temp_dir("tls-run");
    let (_, cert, key) = pki(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["run", "--duration", "500ms", "--no-pcap", "-q", "--out"])
        .arg(dir.join("run"))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let s = support::read_summary(&dir.join("run"));
    assert!(s.scheduled >= 145, "{}", s.scheduled);
    assert_eq!((s.sent, s.completed), (s.scheduled, s.scheduled));
    assert!(
        s.checks.values().all(|c| c.ok != Some(false)),
        "{}",
        text(&out)
    );
    assert_eq!(s.checks["windows_agree"].ok, Some(true));
    let meta = std::fs::read_to_string(dir.join("run/meta.json")).unwrap();
    assert!(meta.contains("speaks TLS to run's own server"), "{meta}");
    // A TLS handshake happened: a plaintext client would have been refused.
    assert_eq!(s.conns_refused, 0);
}

/// `--tls` against a server that does not speak TLS (a cleartext h2c
/// server, one that closes at once): the error says what to do, not only
/// rustls' "received corrupt message of type InvalidContentType".
#[test]
fn tls_to_a_server_that_does_not_speak_it_is_explained() {
    use std::io::{Read, Write};
    let dir = support::temp_dir("tls-to-cleartext");
    for (name, answer, says) in [
        (
            "h2c",
            Some(&[0u8, 0, 0, 4, 0, 0, 0, 0, 0][..]),
            "a cleartext h2c server is called without --tls",
        ),
        (
            "closes",
            None,
            "closed or reset the connection during the TLS handshake",
        ),
    ] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            if let Some(bytes) = answer {
                let _ = s.write_all(bytes);
                let mut sink = [0u8; 1024];
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let _ = s.read(&mut sink);
            }
        });
        let out_dir = dir.join(name);
        let out = client(
            &[
                "--connect",
                &addr,
                "--tls",
                "--insecure",
                "--duration",
                "200ms",
                "--no-pcap",
                "-q",
                "--out",
                out_dir.to_str().unwrap(),
            ],
            // A key log that cannot be written is said (rustls drops it
            // silently).
            &[("SSLKEYLOGFILE", &dir.join("no-such-dir").join("keys.log"))],
        );
        peer.join().unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(text(&out).contains(says), "{name}: {}", text(&out));
        assert!(
            text(&out).contains("no TLS keys are logged"),
            "{name}: {}",
            text(&out)
        );
    }
}

/// A cleartext client against a TLS server is told so on the terminal every
/// time: the server's 7-byte alert (shorter than a frame header) is judged
/// as it arrives, and replaces the socket error that follows it. The
/// terminal said "broken pipe" or "connection reset" in 8 of 12 tries.
#[test]
fn a_cleartext_client_against_tls_is_told_so_every_time() {
    let dir = support::temp_dir("cleartext-to-tls");
    let (_, cert, key) = pki(&dir);
    let (mut server, port) = serve_tls(&dir.join("srv"), &cert, &key, &[]);
    let connect = format!("127.0.0.1:{port}");
    for i in 0..8 {
        let out_dir = dir.join(format!("c{i}"));
        let out = client(
            &[
                "--connect",
                &connect,
                "--duration",
                "200ms",
                "--no-pcap",
                "-q",
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &[],
        );
        let said = text(&out);
        assert_ne!(out.status.code(), Some(0), "try {i}: {said}");
        assert!(
            said.contains("(a TLS record: the server expects TLS)"),
            "try {i}: {said}"
        );
        assert!(
            said.contains("; add --tls (with --ca FILE"),
            "try {i}: {said}"
        );
        assert!(
            !said.contains("Broken pipe") && !said.contains("reset by peer"),
            "try {i}: {said}"
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// `serve --client-ca` (mutual TLS) admits a client that shows a
/// certificate of that CA, and refuses, in the handshake, one that shows
/// none or another CA's; the client is told which, and the server records
/// both refusals with rustls' reason.
#[test]
fn mutual_tls_admits_only_a_client_certificate_of_the_clients_ca() {
    let dir = support::temp_dir("tls-mutual");
    let (ca_path, cert, key) = pki(&dir);
    let (clients, clients_pem) = ca("h2probe test clients' CA");
    let client_ca = dir.join("client-ca.pem");
    std::fs::write(&client_ca, clients_pem).unwrap();
    let (good, good_key) = leaf(&dir, "client", &clients, &["client.test"]);
    let (stranger, _) = ca("another CA");
    let (bad, bad_key) = leaf(&dir, "stranger", &stranger, &["client.test"]);
    let (mut server, port) = serve_tls(
        &dir.join("srv"),
        &cert,
        &key,
        &[
            "--exit-after",
            "1",
            "--client-ca",
            client_ca.to_str().unwrap(),
        ],
    );
    let connect = format!("localhost:{port}");
    let run = |extra: &[&Path], name: &str| {
        let out_dir = dir.join(name);
        let mut a: Vec<String> = [
            "--connect",
            &connect,
            "--tls",
            "--ca",
            ca_path.to_str().unwrap(),
            "--duration",
            "300ms",
            "--rate",
            "20",
            "--no-pcap",
            "-q",
            "--out",
            out_dir.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        for (flag, path) in ["--cert", "--key"].iter().zip(extra) {
            a.push(flag.to_string());
            a.push(path.to_str().unwrap().to_string());
        }
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        (client(&a, &[]), out_dir)
    };
    // Under TLS 1.3 the server judges the client's certificate after the
    // client's handshake is done: its alert ends the connection's first
    // RPC (UNAVAILABLE, exit 4); under TLS 1.2 it would end the handshake
    // (exit 1). Either way the client is told what to do.
    let failed = |out: &std::process::Output| matches!(out.status.code(), Some(1 | 4));
    let (out, _) = run(&[], "none");
    assert!(failed(&out), "{}", text(&out));
    assert!(
        text(&out).contains(
            "the server asks for a client certificate (mutual TLS): give --cert and --key"
        ),
        "{}",
        text(&out)
    );
    let (out, _) = run(&[&bad, &bad_key], "stranger");
    assert!(failed(&out), "{}", text(&out));
    assert!(
        text(&out).contains("the server refused the client certificate of --cert"),
        "{}",
        text(&out)
    );
    let (out, cli) = run(&[&good, &good_key], "good");
    assert!(out.status.success(), "{}", text(&out));
    let s = support::read_summary(&cli);
    assert!(s.sent >= 5, "{}", text(&out));
    assert_eq!(s.sent, s.scheduled);
    assert!(server.wait().unwrap().success());
    let srv = support::read_summary(&dir.join("srv"));
    assert_eq!(srv.conns_refused, 2);
    assert_eq!(srv.completed, s.sent);
    let meta = std::fs::read_to_string(dir.join("srv/meta.json")).unwrap();
    assert!(meta.contains("client-ca.pem"), "{meta}");
    // The headline says the server refused them.
    let analyzed = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("analyze")
        .arg(dir.join("srv"))
        .output()
        .unwrap();
    assert!(
        text(&analyzed).contains("server refused connections×2"),
        "{}",
        text(&analyzed)
    );
    let trace = std::fs::read_to_string(dir.join("srv/trace.jsonl")).unwrap();
    let reasons: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("\"conn_refused\""))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons.iter().any(|l| l.contains("no certificates")),
        "{reasons:?}"
    );
}

/// The mutual-TLS flags are refused, with the flag named and exit 2, before
/// anything starts: one without its pair or without TLS, a file that holds
/// no certificate, a key that is not the certificate's.
#[test]
fn mutual_tls_mistakes_are_refused_before_anything_starts() {
    let dir = support::temp_dir("tls-mutual-usage");
    let (ca_path, cert, key) = pki(&dir);
    let (_, other_key) = leaf(&dir, "other", &ca("another CA").0, &["localhost"]);
    let h2probe = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(args)
            .arg("--out")
            .arg(dir.join("never"))
            .output()
            .unwrap()
    };
    let (ca_s, cert_s, key_s, other_s) = (
        ca_path.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        other_key.to_str().unwrap(),
    );
    for (args, says) in [
        (vec!["serve", "--client-ca", ca_s], "--tls-cert"),
        (vec!["client", "--tls", "--cert", cert_s], "--key"),
        (vec!["client", "--cert", cert_s, "--key", key_s], "--tls"),
        (
            vec!["client", "--tls", "--cert", key_s, "--key", key_s],
            "--cert",
        ),
        (
            vec!["client", "--tls", "--cert", cert_s, "--key", other_s],
            "--cert/--key: the key is not the certificate's",
        ),
        (
            vec![
                "serve",
                "--tls-cert",
                cert_s,
                "--tls-key",
                key_s,
                "--client-ca",
                key_s,
            ],
            "--client-ca",
        ),
    ] {
        let out = h2probe(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
    assert!(!dir.join("never").exists());
}

/// A TLS handshake still under way when the server's shutdown closes it
/// (after --drain-timeout) is recorded as a refused connection, with why:
/// it left no event at all.
#[test]
fn a_handshake_cut_short_by_shutdown_is_a_refused_connection() {
    let dir = support::temp_dir("tls-cut-short");
    let (_, cert, key) = pki(&dir);
    let (mut server, port) = serve_tls(
        &dir.join("srv"),
        &cert,
        &key,
        &["--for", "500ms", "--drain-timeout", "200ms"],
    );
    // Connects and says nothing: no ClientHello.
    let silent = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert!(server.wait().unwrap().success());
    drop(silent);
    let trace = std::fs::read_to_string(dir.join("srv/trace.jsonl")).unwrap();
    let refused: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("\"conn_refused\""))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("TLS handshake not finished: closed by the server")
            && refused[0].contains("--drain-timeout"),
        "{refused:?}"
    );
    assert_eq!(support::read_summary(&dir.join("srv")).conns_refused, 1);
}
