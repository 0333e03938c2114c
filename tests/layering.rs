//! The module graph points one way: wire (no clap, tokio or recorder) →
//! trace → tap → endpoints → commands → cli, and the analysis crate reads
//! files only. `scripts/module-graph` prints the graph and fails on an edge
//! that points up a layer.

#[test]
fn module_dependencies_point_down_the_layers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("python3")
        .arg(root.join("scripts/module-graph"))
        .output()
        .expect("python3 runs scripts/module-graph");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("wire      -> (nothing in the crate)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tap       -> wire, config, trace"),
        "{stdout}"
    );
}
