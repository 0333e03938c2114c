//! h2probe's binary: parse arguments, call the library, exit with its code.
fn main() {
    std::process::exit(h2probe::cli::main());
}
