//! `unflat-server`: the demo site (`demo/`) on the core, an application
//! like any other on the library's public API; see `--help`.

mod demo;

use clap::FromArgMatches as _;
use tracing::warn;
use unflat_server::{cli, events, Config};

use demo::Options;

/// jemalloc: after a burst of connections, resident memory comes back near
/// idle, where glibc's malloc keeps what it grew to (docs/robustness.md).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Serves the demo from the command line until Ctrl-C or SIGTERM. A
/// configuration that cannot work exits with status 2 before anything
/// starts.
fn main() -> std::io::Result<()> {
    let cmd = Config::command_with(
        |cmd| <Options as clap::Args>::augment_args(cmd),
        &Options::RANGES,
    );
    let matches = cli::parsed(Config::matches(cmd, std::env::args_os()));
    let config = cli::parsed(Config::from_arg_matches(&matches));
    let options = cli::parsed(Options::from_arg_matches(&matches));
    events::install(&config);
    if let Some(note) = options.cache_clamped(&config) {
        warn!("{note}");
    }
    let server = cli::bound(demo::bind(config, options));
    let banner = server.stack().service().help().to_string();
    cli::run(server, banner)
}
