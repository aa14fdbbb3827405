//! `unflat-server`: see `--help`.

fn main() -> std::io::Result<()> {
    unflat_server::cli::main()
}
