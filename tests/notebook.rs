//! A notebook's view of a run: tests/python/notebook.py loads every output
//! of a real two-stream run with pandas and the documented dtypes
//! (docs/outputs.md) and checks what it gets.

mod support;

/// A Python 3 that imports pandas: the one on PATH, or Debian's (where
/// `.ci/run` installs python3-pandas when the PATH's Python lacks it).
fn python_with_pandas() -> Option<std::ffi::OsString> {
    for py in ["python3", "/usr/bin/python3"] {
        let ok = std::process::Command::new(py)
            .args(["-c", "import pandas"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py.into());
        }
    }
    support::missing("a python3 with pandas (Debian: python3-pandas)");
    None
}

#[test]
fn pandas_loads_every_output_with_the_documented_dtypes() {
    let Some(py) = python_with_pandas() else {
        return;
    };
    let dir = support::temp_dir("notebook");
    let mut o = support::short_run_opts(&dir, "frame", "unbounded", "500ms");
    o.client.streams = 2;
    o.output.no_pcap = true;
    support::run(o);
    support::h2probe_ok([
        std::ffi::OsStr::new("export"),
        "--format".as_ref(),
        "csv".as_ref(),
        dir.as_os_str(),
    ]);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/notebook.py");
    let out = std::process::Command::new(py)
        .arg(script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "notebook.py failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // What pandas saw, against what the run did.
    let s = support::read_summary(&dir);
    assert_eq!(found["completed"], s.completed);
    assert_eq!(found["credit_streams"], serde_json::json!([1, 3]));
    assert_eq!(found["conn_keys"].as_array().unwrap().len(), 1);
    // Event types this run never had still load (empty, typed).
    let empty = found["empty_files"].as_array().unwrap();
    assert!(empty.contains(&serde_json::json!("stall")), "{empty:?}");
}
