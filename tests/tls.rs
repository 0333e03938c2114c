//! TLS end to end: `serve --tls-cert/--tls-key` with a certificate issued by
//! a CA made here (rcgen), `client --tls --ca` by hostname. The taps sit
//! above TLS (every frame still recorded, both traces merge with every check
//! holding), SSLKEYLOGFILE is honoured, socket-blocked time is measured on
//! the socket below TLS, and verification failures are explained.

mod support;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A CA and a leaf certificate for localhost / 127.0.0.1 signed by it:
/// (ca.pem, cert.pem, key.pem).
fn pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "h2probe test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).unwrap();
    std::fs::write(&paths.1, leaf.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// `h2probe serve --tls-cert --tls-key` on an ephemeral port; returns the
/// child and its port (read from the "listening on" line).
fn serve_tls(dir: &Path, cert: &Path, key: &Path, extra: &[&str]) -> (Child, u16) {
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
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .strip_prefix("h2probe: listening on ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line:?}"));
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    (child, port)
}

fn client(args: &[&str], envs: &[(&str, &Path)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_h2probe"));
    c.arg("client").args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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
            !said.contains("Broken pipe") && !said.contains("reset by peer"),
            "try {i}: {said}"
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}
