//! h2probe's binary: parse arguments, call the library, exit with its code.

/// mimalloc: every request allocates (h2's streams and frames, the RPC's
/// task, the recorder's events) on two threads that free each other's
/// blocks; glibc's malloc spent 7.6 % of the server's samples doing it.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(h2probe::cli::main());
}
