//! The core's log of events, for every server on it — the demo and any
//! application: a `tracing` subscriber writing through the log's bounded
//! sink ([`crate::log`]) at the level and in the format the flags ask
//! (`--log-level`, `RUST_LOG`, `--log-format`), unless the application
//! installed its own; and the panic hook (`service/guard.rs`), which keeps
//! a request's panic off stderr's blocking path.

use std::ffi::OsString;
use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

use crate::config::{Config, EventFormat};
use crate::log;
use crate::service::guard;

/// Installs the core's subscriber and panic hook, once per process (the
/// first server's flags decide). An application that set a global
/// subscriber of its own keeps it, and gets the hook only for the panics
/// of its requests, which it then logs through its subscriber.
pub fn install(config: &Config) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let events = tracing_subscriber::fmt()
            .with_writer(log::Events)
            .with_env_filter(filter(
                config,
                std::env::var("RUST_LOG")
                    .ok()
                    .filter(|v| !v.trim().is_empty()),
            ));
        let json = config.log_format == EventFormat::Json;
        let ours = if json {
            events.json().flatten_event(true).try_init().is_ok()
        } else {
            events
                .with_ansi(colour(
                    std::io::stderr().is_terminal(),
                    std::env::var_os("NO_COLOR"),
                ))
                .try_init()
                .is_ok()
        };
        // Under `--log-format json` every line on stderr is JSON: a panic
        // outside a request too. Otherwise such a panic (a bug of the
        // core's, or of code around it) keeps the standard hook's text.
        guard::install_hook(ours && json);
    });
}

/// Whether logs are coloured: only on a terminal, and never when `NO_COLOR`
/// is set to anything but the empty string (<https://no-color.org>).
fn colour(terminal: bool, no_color: Option<OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// What is logged: RUST_LOG's directives when set (wrong ones skipped), in
/// place of `--log-level`. Neither filters the access log.
fn filter(config: &Config, rust_log: Option<String>) -> EnvFilter {
    let directives = match rust_log {
        Some(directives) => directives,
        None => config.log_level.directive().to_string(),
    };
    EnvFilter::builder().parse_lossy(directives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }

    #[test]
    fn rust_log_replaces_the_level() {
        let config = |args: &[&str]| {
            let mut argv = vec!["unflat-server"];
            argv.extend_from_slice(args);
            Config::from_args(argv).unwrap()
        };
        let shown = |c: &Config, rust_log: Option<&str>| {
            filter(c, rust_log.map(str::to_string)).to_string()
        };
        let warn = config(&["--log-level", "warn"]);
        assert_eq!(shown(&warn, None), "warn");
        assert_eq!(shown(&warn, Some("debug")), "debug");
        let both = shown(&warn, Some("info,unflat_server=trace"));
        assert!(
            both.contains("unflat_server=trace") && !both.contains("warn"),
            "{both}"
        );
    }
}
