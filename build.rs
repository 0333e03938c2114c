//! Compiles `proto/` with prost-build, parsed by protox: no `protoc` is needed.
//! Also records the resolved versions of the crates the probe is built on,
//! for each run's meta.json.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-changed=Cargo.lock");
    let fds = protox::compile(["proto/h2probe.proto"], ["proto"])?;
    prost_build::Config::new().bytes(["."]).compile_fds(fds)?;

    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut versions = vec![];
    for krate in ["h2", "tokio", "prost", "bytes", "pcap-file"] {
        let needle = format!("name = \"{krate}\"\nversion = \"");
        let v = lock
            .find(&needle)
            .map(|i| &lock[i + needle.len()..])
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("unknown");
        versions.push(format!("{krate}={v}"));
    }
    println!(
        "cargo:rustc-env=H2PROBE_DEP_VERSIONS={}",
        versions.join(",")
    );
    Ok(())
}
