//! `unflat-server`: see `--help`.

/// jemalloc, with background threads that return freed memory to the
/// system within seconds: after a burst of connections has closed, the
/// server's resident memory comes back near idle, where glibc's malloc
/// keeps what it grew to (measured in docs/robustness.md, "Memory").
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::io::Result<()> {
    unflat_server::cli::main()
}
