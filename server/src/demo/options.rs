//! The demo's own options, beside the core's on the binary's command line
//! (`Config::command_with`): its routes' limits, its cache and its builds.
//! Each is read from the environment as the core's are (`UNFLAT_MAX_LEN`),
//! its range checked by the parser and stated in `--help`.

use clap::{Args, FromArgMatches as _};
use unflat_server::config::{within_memory_limit, Bounds, Config};
use unflat_server::net::tls::Tls;
use unflat_server::server::Making;

use super::{RouteLimits, Settings};

/// A gibibyte.
const GIB: u64 = 1 << 30;

/// `--max-len`'s values.
const MAX_LEN: Bounds = Bounds::count(0, GIB);
/// `--max-large`'s values.
const MAX_LARGE: Bounds = Bounds::bytes(0, 64 * GIB);
/// `--max-builds`'s values.
const MAX_BUILDS: Bounds = Bounds::count(1, 1024);
/// `--cache-bytes`'s values.
const CACHE_BYTES: Bounds = Bounds::bytes(0, 1 << 40);

/// The demo's options: one field per flag.
#[derive(Clone, Debug, Args)]
pub struct Options {
    /// Largest `len` accepted by /end-string/{len}, in characters.
    #[arg(long, default_value_t = 16 * 1024 * 1024, help_heading = "Limits", value_parser = MAX_LEN.parser::<usize>())]
    pub max_len: usize,

    /// Largest size accepted by /large/{bytes} (default: a quarter of
    /// --memory-limit; at most all of it).
    #[arg(long, help_heading = "Limits", value_parser = MAX_LARGE.parser::<usize>())]
    pub max_large: Option<usize>,

    /// Bodies built at once, on the blocking pool (default: half the
    /// cores, at least 1). More wait their turn; a connection builds one at
    /// a time, and identical builds in flight are shared.
    #[arg(long, help_heading = "Limits", value_parser = MAX_BUILDS.parser::<u16>())]
    pub max_builds: Option<u16>,

    /// Bodies (/end-string and /large) kept in the cache for reuse, in
    /// bytes, within --memory-limit (default: a quarter of it); a larger
    /// body is served and not kept.
    #[arg(long, help_heading = "Bodies", value_parser = CACHE_BYTES.parser::<usize>())]
    pub cache_bytes: Option<usize>,

    /// Ask URL (`http://host:port/path`) and exit: 0 when it answers 2xx,
    /// 1 otherwise, with the reason on stderr. A container's health check
    /// with no tool but this binary; serves nothing.
    #[arg(long, value_name = "URL", help_heading = "Operations")]
    pub probe: Option<String>,
}

impl Default for Options {
    /// What an empty command line gives, whatever the environment says:
    /// every default is stated once, in its option's declaration.
    fn default() -> Self {
        let cmd = Options::augment_args(clap::Command::new("unflat-server"));
        let matches = cmd
            .try_get_matches_from(["unflat-server"])
            .expect("the defaults parse");
        Options::from_arg_matches(&matches).expect("the defaults make Options")
    }
}

impl Options {
    /// Each ranged option's id and values, for `--help`
    /// (`Config::command_with`) and [`Options::validate`].
    pub const RANGES: [(&'static str, Bounds); 4] = [
        ("max_len", MAX_LEN),
        ("max_large", MAX_LARGE),
        ("max_builds", MAX_BUILDS),
        ("cache_bytes", CACHE_BYTES),
    ];

    /// The values of [`Options::RANGES`]' options, in their order.
    fn values(&self) -> [Option<u64>; 4] {
        [
            Some(self.max_len as u64),
            self.max_large.map(|v| v as u64),
            self.max_builds.map(u64::from),
            self.cache_bytes.map(|v| v as u64),
        ]
    }

    /// Checks the options, for ones built in code as for the command
    /// line's, beside `config`: each within its range, and the parts of
    /// `--memory-limit` within it.
    pub fn validate(&self, config: &Config) -> Result<(), String> {
        for ((id, range), v) in Options::RANGES.iter().zip(self.values()) {
            if let Some(v) = v {
                let flag = format!("--{}", id.replace('_', "-"));
                range
                    .check(v)
                    .map_err(|rule| format!("{flag} {}: {rule}", range.show(v)))?;
            }
        }
        within_memory_limit(config, "--max-large", self.max_large)?;
        within_memory_limit(config, "--cache-bytes", self.cache_bytes)
    }

    /// The largest `/large` payload: `--max-large`, or a quarter of
    /// `--memory-limit`.
    pub fn max_large(&self, config: &Config) -> usize {
        self.max_large.unwrap_or(config.memory_limit / 4)
    }

    /// What the cache keeps: `--cache-bytes`, or a quarter of
    /// `--memory-limit`; never more than the limit holds beside what
    /// connections may take (`--connection-memory`).
    pub fn cache_bytes(&self, config: &Config) -> usize {
        let room = config.memory_limit - config.connection_memory().min(config.memory_limit);
        self.cache_bytes
            .unwrap_or(config.memory_limit / 4)
            .min(room)
    }

    /// Why `--cache-bytes` was lowered, when it was: a line for the log at
    /// start-up.
    pub fn cache_clamped(&self, config: &Config) -> Option<String> {
        let asked = self.cache_bytes?;
        let kept = self.cache_bytes(config);
        (kept < asked).then(|| {
            format!(
                "--cache-bytes {asked} lowered to {kept}: --memory-limit {} holds it beside --connection-memory {}",
                config.memory_limit,
                config.connection_memory()
            )
        })
    }

    /// Builds run at once: `--max-builds`, or half the cores (at least 1),
    /// so that the async workers keep a core to answer on.
    pub fn build_threads(&self) -> usize {
        self.max_builds.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
            usize::from,
        )
    }

    /// What the site is made with, on the server `m` describes.
    pub fn settings<'a>(&self, m: &Making<'a>) -> Settings<'a> {
        let config = m.config;
        Settings {
            strategy: config.strategy,
            limits: RouteLimits {
                max_len: self.max_len,
                max_large: self.max_large(config),
                admin_apart: config.admin_addr.is_some(),
            },
            cache_bytes: self.cache_bytes(config),
            builders: self.build_threads(),
            address: m.address,
            tls: m.tls.map(|t| t.provider.name()),
            trust: m.tls.and_then(Tls::self_signed_pem),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's options as the binary reads them from `args`, beside the
    /// core's, and checked as it checks them.
    fn parse(args: &[&str]) -> Result<(Config, Options), String> {
        let cmd = Config::command_with(Options::augment_args, &Options::RANGES);
        let argv = std::iter::once("unflat-server").chain(args.iter().copied());
        let matches = Config::matches(cmd, argv).map_err(|e| e.to_string())?;
        let config = Config::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        let options = Options::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        options.validate(&config)?;
        Ok((config, options))
    }

    #[test]
    fn values_that_cannot_work_are_refused_with_the_option_named() {
        for (args, names) in [
            (&["--max-large", "68719476737"][..], "max-large"),
            (
                &["--max-large", "3000000000", "--memory-limit", "2GiB"],
                "--max-large",
            ),
            (&["--cache-bytes", "2GiB"], "--cache-bytes"),
            (&["--max-builds", "0"], "max-builds"),
        ] {
            let err = parse(args).expect_err(&format!("{args:?} accepted"));
            assert!(err.contains(names), "{args:?}: {err}");
        }
        let bad = Options {
            max_builds: Some(0),
            ..Options::default()
        };
        assert_eq!(
            bad.validate(&Config::default()).unwrap_err(),
            "--max-builds 0: must be 1 to 1024"
        );
    }

    #[test]
    fn each_option_states_its_range_and_its_variable() {
        let cmd = Config::command_with(Options::augment_args, &Options::RANGES);
        for (id, range) in Options::RANGES {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
            let help = arg.get_long_help().unwrap().to_string();
            assert!(
                help.ends_with(&format!("Accepts {}.", range.describe())),
                "{help}"
            );
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            assert_eq!(env, Some(format!("UNFLAT_{}", id.to_uppercase())));
        }
    }

    #[test]
    fn the_defaults_are_those_documented() {
        let (config, options) = parse(&[]).unwrap();
        assert_eq!(options.max_len, 16 << 20);
        assert_eq!(options.cache_bytes(&config), 256 << 20);
        assert_eq!(options.max_large(&config), 256 << 20);
        options.validate(&config).unwrap();
    }

    #[test]
    fn the_cache_is_lowered_to_what_the_limit_holds_beside_connections() {
        let c = Config {
            memory_limit: 256 << 20,
            ..Config::default()
        };
        let o = Options {
            cache_bytes: Some(256 << 20),
            ..Options::default()
        };
        assert_eq!(o.cache_bytes(&c), 128 << 20);
        let note = o.cache_clamped(&c).unwrap();
        assert!(
            note.starts_with("--cache-bytes 268435456 lowered to 134217728"),
            "{note}"
        );
        let fits = Options {
            cache_bytes: Some(64 << 20),
            ..o
        };
        assert_eq!(
            (fits.cache_bytes(&c), fits.cache_clamped(&c)),
            (64 << 20, None)
        );
    }
}
