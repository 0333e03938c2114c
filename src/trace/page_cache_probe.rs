//! For the tests of what stays in the page cache: util-linux's `fincore`
//! reads it (an observer outside the code under test).

/// A fresh directory on the build's own file system (the system's temporary
/// directory may be a tmpfs, whose pages advice cannot drop and which
/// refuses `O_DIRECT`): under CARGO_TARGET_DIR when it is set, else the
/// project's `target/`.
pub(crate) fn scratch_dir(name: &str) -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join(format!("h2probe-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Says loudly why a test could not judge (a skip is not a pass).
pub(crate) fn skip(why: &str) {
    eprintln!("\n!!!!! SKIPPED: {why} !!!!!\n");
}

/// Whether `fincore` runs here; without it a test skips loudly, and under
/// `CI=true` fails instead.
pub(crate) fn fincore_or_skip() -> bool {
    match std::process::Command::new("fincore")
        .arg("--version")
        .output()
    {
        Ok(_) => true,
        Err(e) => {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "CI=true but fincore (util-linux) is missing: {e}"
            );
            skip(&format!("fincore (util-linux) is missing: {e}"));
            false
        }
    }
}

/// Bytes of `path` in the page cache.
pub(crate) fn cached_bytes(path: &std::path::Path) -> u64 {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "fincore failed: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}
