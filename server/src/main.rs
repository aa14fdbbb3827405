//! `unflat-server`: the demo site (`demo/`) on the core, an application
//! like any other on the library's public API; see `--help`.

mod demo;

/// jemalloc: after a burst of connections, resident memory comes back near
/// idle, where glibc's malloc keeps what it grew to (docs/robustness.md).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::io::Result<()> {
    demo::main()
}
