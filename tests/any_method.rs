//! `h2probe client` against a server that is not h2probe's: a tonic server
//! for `tests/proto/sensors.proto` (another package, service, method and
//! message; its structs written by hand here, independently of the client's
//! run-time compilation of the .proto), reached by hostname, with metadata.
//! Also: a bidirectional method, and the mistakes the client refuses (exit 2).

mod support;
#[path = "support/telemetry.rs"]
mod telemetry;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;
use telemetry::{Reading, TonicServer};

fn proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proto/sensors.proto")
}

/// Runs the h2probe binary (off the runtime, so the server in this process
/// keeps serving); returns (exit code, stdout, stderr).
async fn h2probe(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(&args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// The tests of this file run one at a time: the server lives in the test
/// process, and a neighbour's 14 client processes would starve it of CPU
/// (this machine has 2 cores), which shows up as late WINDOW_UPDATEs.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_client_streaming_method_by_hostname_shows_part1_physics() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = TonicServer::start(0, Duration::from_millis(10)).await;
    let dir = support::temp_dir("any-method");
    let out = dir.join("run");
    let rate = 200.0;
    let (code, stdout, stderr) = h2probe(args(&[
        "client",
        "--connect",
        &format!("localhost:{}", server.port),
        "--method",
        "/sensors.v3.Telemetry/Upload",
        "--proto",
        proto().to_str().unwrap(),
        "--message-json",
        r#"{"device": "probe-7", "tags": ["a", "b"]}"#,
        "--payload-field",
        "blob",
        "--seq-field",
        "n",
        "--time-field",
        "sent_at",
        "-H",
        "X-Tenant: blue",
        "-H",
        "x-tenant: green",
        "-H",
        "authorization: Bearer sekrit",
        "--rate",
        "200",
        "--duration",
        "1500ms",
        "--no-pcap",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");

    // The server got every message the client sent, with the template's
    // fields, the payload, consecutive sequence numbers and the scheduled times.
    let s = support::read_summary(&out);
    let log = server.seen.log.lock().unwrap().clone();
    // (A schedule that falls behind on a loaded machine ends at --duration
    // on the clock, so a message or two may not be scheduled at all.)
    assert!(s.scheduled >= 295, "{stdout}");
    assert_eq!(s.sent, s.scheduled, "{stdout}");
    assert_eq!(log.len() as u64, s.sent);
    for (i, (r, blob)) in log.iter().enumerate() {
        assert_eq!(r.n, i as u64);
        assert_eq!(r.device, "probe-7");
        assert_eq!(r.tags, ["a", "b"]);
        assert_eq!(*blob, 16 * 1024);
        assert!(r.sent_at > 0);
        if i > 0 {
            let gap = r.sent_at - log[i - 1].0.sent_at;
            assert!((gap - 5_000_000).abs() < 10_000, "schedule gap {gap} ns");
        }
    }
    // Metadata as sent (names lowercased, both values, in order).
    assert_eq!(*server.seen.tenants.lock().unwrap(), ["blue", "green"]);
    // A credential is sent, but meta.json keeps only its name and length.
    let meta = std::fs::read_to_string(out.join("meta.json")).unwrap();
    assert!(!meta.contains("sekrit"), "{meta}");
    assert!(
        meta.contains("authorization: <redacted, 13 bytes>"),
        "{meta}"
    );
    // The reply, decoded with the .proto's UploadSummary.
    let reply = format!(
        r#"OK reply {{"accepted":"{}","tenant":"blue,green","blobBytes":"{}"}}"#,
        s.sent,
        s.sent * 16 * 1024
    );
    let rpcs = support::rpc_lines(&stdout);
    assert!(rpcs.iter().any(|l| l.contains(&reply)), "{stdout}");

    // Part 1's physics from the client's side alone: credit kept flowing
    // (never window-blocked, sent ≈ offered) while the server's queue grew.
    // On a quiet machine: 0.00 s window-blocked and 200.0/s. The bounds
    // leave room for a loaded 2-core machine (measured once in 20 runs:
    // 0.40 s of late WINDOW_UPDATEs, 187.6/s; about twice that allowed) and
    // still tell this apart from a server that ties credit to its 10 ms
    // worker: that client would send ≈ 90/s (55 % below the offer) and wait
    // on the window for most of the 1.5 s.
    assert!(s.client_window_blocked_s < 0.8, "{stdout}");
    assert!(
        (s.send_rate_steady - rate).abs() / rate < 0.12,
        "steady send rate {} vs offered {rate}",
        s.send_rate_steady
    );
    let peak = server.seen.peak_queue.load(Ordering::Relaxed);
    assert!(peak >= 100, "the queue should have grown (peak {peak})");
    // The client-side wire figures are all there; the server's are not.
    assert!(s.has_client && !s.has_server);
    // DATA bytes out of the client's tap = the messages as an independent
    // encoder (prost, from the hand-written struct) frames them.
    assert_eq!(s.data_bytes_out, framed_bytes(&log));
    assert!(
        s.window_updates_in_stream > 50,
        "{}",
        s.window_updates_in_stream
    );
    assert!(s.min_send_window.unwrap() >= 0, "{:?}", s.min_send_window);
    assert!(stdout.contains("needs     the server's trace:"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "wire      DATA out {} ({} B)",
            s.data_frames_out, s.data_bytes_out
        )),
        "{stdout}"
    );
    assert_eq!(s.rpc_status.get("OK"), Some(&1));
}

/// The framed bytes of every reading, encoded by the hand-written struct.
fn framed_bytes(log: &[(Reading, usize)]) -> u64 {
    use prost::Message;
    log.iter()
        .map(|(r, blob)| {
            let m = Reading {
                blob: vec![0; *blob],
                ..r.clone()
            };
            m.encoded_len() as u64 + 5
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipv6_literal_with_another_authority() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = TonicServer::start_at("[::1]:0", Duration::ZERO).await;
    let dir = support::temp_dir("any-ipv6");
    let out = dir.join("run");
    let (code, stdout, stderr) = h2probe(args(&[
        "client",
        "--connect",
        &format!("[::1]:{}", server.port),
        "--authority",
        "telemetry.example:443",
        "--method",
        "/sensors.v3.Telemetry/Upload",
        "--proto",
        proto().to_str().unwrap(),
        "--payload",
        "1KiB",
        "--payload-field",
        "blob",
        "--rate",
        "50",
        "--duration",
        "300ms",
        "--no-pcap",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        *server.seen.authorities.lock().unwrap(),
        ["telemetry.example:443"]
    );
    // The tap names the real IPv6 socket (it pairs connections in a merge).
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let peer = format!(r#""peer":"[::1]:{}""#, server.port);
    assert!(trace.contains(&peer), "no conn_open with {peer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidirectional_method_is_read_while_sending() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = TonicServer::start(0, Duration::ZERO).await;
    let dir = support::temp_dir("any-bidi");
    let out = dir.join("run");
    let (code, stdout, stderr) = h2probe(args(&[
        "client",
        "--connect",
        &format!("127.0.0.1:{}", server.port),
        "--method",
        "/sensors.v3.Telemetry/Mirror",
        "--proto",
        proto().to_str().unwrap(),
        "--payload-field",
        "blob",
        "--seq-field",
        "n",
        "--payload",
        "1KiB",
        "--rate",
        "300",
        "--duration",
        "1s",
        "--no-pcap",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let s = support::read_summary(&out);
    assert!(s.scheduled >= 295 && s.sent == s.scheduled, "{stdout}");
    assert_eq!(server.seen.readings.load(Ordering::Relaxed), s.sent);
    // 300 Acks of 4 KiB (1.2 MB) passed the client's 64 KiB receive window:
    // read while sending, and the upload never waited for credit.
    let last = format!(r#"reply {{"n":"{}""#, s.sent - 1);
    let rpcs = support::rpc_lines(&stdout);
    assert!(rpcs.iter().any(|l| l.contains(&last)), "{stdout}");
    // Of the 1 s run; room for a loaded 2-core machine's late updates.
    assert!(s.client_window_blocked_s < 0.5, "{stdout}");
}

/// A unary method, called once per message (`--rpc unary`, 3 calls at
/// once): every message the schedule offered reaches the server as a call
/// of its own, with its fields and sequence number, each call's one DATA
/// frame carries END_STREAM (as a unary client's), every call ended OK,
/// and the client prints the last call's reply. (A unary method was
/// refused: the client could only send a stream.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_method_is_called_once_per_message() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = TonicServer::start(0, Duration::from_millis(5)).await;
    let dir = support::temp_dir("any-method-unary");
    let out = dir.join("run");
    let (code, stdout, stderr) = h2probe(args(&[
        "client",
        "--connect",
        &format!("localhost:{}", server.port),
        "--rpc",
        "unary",
        "--streams",
        "3",
        "--method",
        "/sensors.v3.Telemetry/Latest",
        "--proto",
        proto().to_str().unwrap(),
        "--message-json",
        r#"{"device": "probe-9"}"#,
        "--payload-field",
        "blob",
        "--payload",
        "1KiB",
        "--seq-field",
        "n",
        "--rate",
        "200",
        "--duration",
        "1s",
        "--no-pcap",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let s = support::read_summary(&out);
    assert!(s.unary, "{s:?}");
    assert!(s.scheduled >= 195, "{stdout}");
    assert_eq!((s.sent, s.never_sent), (s.scheduled, 0), "{stdout}");
    assert_eq!(s.rpc_status.get("OK"), Some(&s.sent), "{stdout}");
    let mut seqs: Vec<u64> = {
        let log = server.seen.log.lock().unwrap();
        assert!(log
            .iter()
            .all(|(r, blob)| r.device == "probe-9" && *blob == 1024));
        log.iter().map(|(r, _)| r.n).collect()
    };
    seqs.sort_unstable();
    assert_eq!(seqs, (0..s.sent).collect::<Vec<_>>());
    // One call per message: each stream's DATA is the message, the last
    // frame carrying END_STREAM, and no empty frame after it.
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let data: Vec<serde_json::Value> = trace
        .lines()
        .filter(|l| l.contains(r#""dir":"out""#) && l.contains(r#""frame":"DATA""#))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ends = data
        .iter()
        .filter(|f| f["flags"].as_u64().unwrap() & 1 == 1);
    assert_eq!(ends.count() as u64, s.sent);
    assert!(data.iter().all(|f| f["len"].as_u64().unwrap() > 0));
    let c = &s.checks["accounting"];
    assert_eq!(c.ok, None, "one side only: {}", c.detail);
    assert!(
        stdout
            .contains("(unary: the latest OK call and each connection's first 4 kinds of failure,"),
        "{stdout}"
    );
    // The last call's reply, decoded with the .proto's Ack.
    assert!(
        support::rpc_lines(&stdout)
            .iter()
            .any(|l| l.starts_with("rpc conn 1 stream ") && l.contains(r#": OK reply {"n":""#)),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_are_refused_with_exit_2_before_connecting() {
    let _one = ONE_AT_A_TIME.lock().await;
    let p = proto();
    let p = p.to_str().unwrap();
    let dir = support::temp_dir("any-mistakes");
    let cases: &[(&[&str], &str)] = &[
        (&["--connect", "localhost"], "has no port"),
        (&["--connect", "::1:50051"], "not a valid authority"),
        (&["-H", ":path: /x"], "expected 'name: value'"),
        (&["-H", "grpc-timeout: 1S"], "use --deadline"),
        (
            &["-H", "content-type: text/plain"],
            "content-type cannot be set",
        ),
        (
            &["--proto", "/nonexistent.proto", "--message", "a.B"],
            "no such file",
        ),
        (
            &[
                "--proto",
                p,
                "--method",
                "/sensors.v3.Telemetry/Upload",
                "--payload-field",
                "device",
            ],
            "--payload-field device: the field is string, it must be bytes",
        ),
        (
            &[
                "--proto",
                p,
                "--method",
                "/sensors.v3.Telemetry/Upload",
                "--seq-field",
                "serial",
            ],
            "--seq-field serial: sensors.v3.Reading has no such field",
        ),
        (
            &[
                "--proto",
                p,
                "--method",
                "/other.Svc/Put",
                "--message",
                "sensors.v3.Nope",
            ],
            "--message sensors.v3.Nope: no such message",
        ),
        (
            &["--proto", p, "--method", "/sensors.v3.Telemetry/Latest"],
            "is unary: it takes one message per call, and --rpc ingest sends a stream of them on one; give --rpc unary",
        ),
        (
            &[
                "--proto",
                p,
                "--method",
                "/sensors.v3.Telemetry/Upload",
                "--message-json",
                "{\"n\": \"x\"}",
            ],
            "--message-json is not a valid sensors.v3.Reading",
        ),
        (&["--payload-field", "blob"], "--proto"),
        // --payload without the field to carry it did nothing, silently.
        (
            &[
                "--proto",
                p,
                "--method",
                "/sensors.v3.Telemetry/Upload",
                "--payload",
                "32KiB",
            ],
            "--payload has nowhere to go",
        ),
        // No --method: the default (h2probe's own Ingest) is not in the
        // .proto, and --method is what to give.
        (
            &["--proto", p],
            "does not define service h2probe.v1.Probe (the default --method's): give the method \
             to call with --method /package.Service/Method",
        ),
        (&["--ca", "ca.pem"], "--tls"),
        (
            &["--tls", "--ca", "/nonexistent.pem"],
            "--ca /nonexistent.pem",
        ),
    ];
    for (i, (extra, want)) in cases.iter().enumerate() {
        let out = dir.join(format!("case{i}"));
        let mut a = args(&[
            "client",
            "--duration",
            "1s",
            "-q",
            "--out",
            out.to_str().unwrap(),
        ]);
        a.extend(args(extra));
        let (code, stdout, stderr) = h2probe(a).await;
        assert_eq!(code, 2, "{extra:?}: {stdout}{stderr}");
        assert!(
            stderr.contains(want),
            "{extra:?}: {stderr} (wanted {want:?})"
        );
        assert!(
            !out.join("trace.jsonl").exists(),
            "{extra:?}: nothing starts"
        );
    }
}

/// `--reflect`: the method and its messages described by the server's own
/// reflection service, not a .proto file. The schema served imports a
/// well-known type, so the client asks for that file too; every message
/// arrives with its fields. A server without the service is explained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflect_describes_the_method_from_the_servers_reflection_service() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = support::temp_dir("reflect");
    let text = std::fs::read_to_string(proto())
        .unwrap()
        .replacen(
            "package sensors.v3;",
            "package sensors.v3;\n\nimport \"google/protobuf/timestamp.proto\";",
            1,
        )
        .replacen(
            "  repeated string tags = 5;\n",
            "  repeated string tags = 5;\n  google.protobuf.Timestamp taken = 6;\n",
            1,
        );
    assert!(text.contains("Timestamp taken"));
    std::fs::write(dir.join("sensors.proto"), text).unwrap();
    let mut compiler = protox::Compiler::new([&dir]).unwrap();
    compiler.include_imports(true);
    compiler.open_file("sensors.proto").unwrap();
    let descriptors = prost::Message::encode_to_vec(&compiler.file_descriptor_set());
    let server = TonicServer::start_reflecting(Duration::from_millis(1), &descriptors).await;
    let out = dir.join("run");
    let connect = format!("localhost:{}", server.port);
    let (code, stdout, stderr) = h2probe(args(&[
        "client",
        "--connect",
        &connect,
        "--method",
        "/sensors.v3.Telemetry/Upload",
        "--reflect",
        "-H",
        "x-tenant: blue",
        "--message-json",
        r#"{"device": "probe-8", "taken": "2026-12-04T12:00:00Z"}"#,
        "--payload-field",
        "blob",
        "--seq-field",
        "n",
        "--rate",
        "100",
        "--duration",
        "1s",
        "--no-pcap",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let s = support::read_summary(&out);
    let log = server.seen.log.lock().unwrap().clone();
    assert!(s.sent >= 95, "{stdout}");
    assert_eq!(log.len() as u64, s.sent);
    for (i, (r, blob)) in log.iter().enumerate() {
        assert_eq!(
            (r.n, r.device.as_str(), *blob),
            (i as u64, "probe-8", 16 * 1024)
        );
    }
    // meta.json names the service that answered and the files it sent.
    let meta = std::fs::read_to_string(out.join("meta.json")).unwrap();
    for said in [
        "grpc.reflection.v1.ServerReflection",
        "google/protobuf/timestamp.proto",
        "sensors.proto",
    ] {
        assert!(meta.contains(said), "{said}: {meta}");
    }
    // The reflection request carried the metadata too (a server may put
    // reflection behind the same credentials).
    assert_eq!(*server.seen.reflection_tenants.lock().unwrap(), ["blue"]);
    // The reflection connection is not in the trace: one connection.
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    assert_eq!(trace.matches("\"conn_open\"").count(), 1);

    // A server with no reflection service: said, with what to do instead.
    let plain = TonicServer::start(0, Duration::from_millis(1)).await;
    let (code, stdout, stderr) = h2probe(args(&[
        "client",
        "--connect",
        &format!("localhost:{}", plain.port),
        "--method",
        "/sensors.v3.Telemetry/Upload",
        "--reflect",
        "--duration",
        "300ms",
        "--no-pcap",
        "-q",
        "--out",
        dir.join("plain").to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("has no reflection service") && stderr.contains("--proto FILE"),
        "{stderr}"
    );
    // A service the server does not have, named with those it serves; a
    // method the served schema does not have, with those it has.
    for (method, says) in [
        (
            "/sensors.v4.Telemetry/Upload",
            [
                "does not serve sensors.v4.Telemetry",
                "sensors.v3.Telemetry",
            ],
        ),
        (
            "/sensors.v3.Telemetry/Download",
            ["has no method Download", "Upload"],
        ),
    ] {
        let (code, _, stderr) = h2probe(args(&[
            "client",
            "--connect",
            &connect,
            "--method",
            method,
            "--reflect",
            "--out",
            dir.join("refused").to_str().unwrap(),
        ]))
        .await;
        assert_eq!(code, 2, "{method}: {stderr}");
        assert!(
            says.iter().all(|w| stderr.contains(w)),
            "{method}: {stderr}"
        );
    }
}
