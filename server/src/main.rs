//! `unflat-server`: see `--help`.

/// jemalloc: after a burst of connections, resident memory comes back near
/// idle, where glibc's malloc keeps what it grew to (docs/robustness.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::io::Result<()> {
    unflat_server::cli::main()
}
