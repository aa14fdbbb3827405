//! The core's log of events, for every server on it — the binary and any
//! application: a `tracing` subscriber writing through the log's bounded
//! sink ([`crate::log`]) at the level and in the format the flags ask
//! (`--log-level`, `RUST_LOG`, `--log-format`), unless the application
//! installed its own; and the panic hook (`service/guard.rs`), which keeps
//! a request's panic off stderr's blocking path.

use std::ffi::OsString;
use std::io::IsTerminal as _;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

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
        let events = tracing_subscriber::fmt::layer().with_writer(log::Events);
        let filter = filter(
            config,
            std::env::var("RUST_LOG")
                .ok()
                .filter(|v| !v.trim().is_empty()),
        );
        let json = config.log_format == EventFormat::Json;
        let ours = if json {
            let events = events.json().flatten_event(true);
            let subscriber = tracing_subscriber::registry().with(events);
            subscriber.with(filter).try_init().is_ok()
        } else {
            let colour = colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            );
            let subscriber = tracing_subscriber::registry().with(events.with_ansi(colour));
            subscriber.with(filter).try_init().is_ok()
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
/// place of `--log-level`. Neither filters the access log. A directive is
/// a level (`warn`), a target's level (`unflat_server=debug`) or a target
/// alone (all of its levels): what tracing-subscriber's `Targets` reads,
/// without `EnvFilter`'s span and field filters, whose regex crates an
/// application would build.
fn filter(config: &Config, rust_log: Option<String>) -> Targets {
    let directives = rust_log.unwrap_or_else(|| config.log_level.directive().to_string());
    let mut targets = Targets::new();
    // `LevelFilter` reads an empty string as `error`: an empty directive or
    // level is a wrong one here.
    let level = |s: &str| s.parse::<LevelFilter>().ok().filter(|_| !s.is_empty());
    for directive in directives.split(',').map(str::trim) {
        targets = match directive.rsplit_once('=') {
            Some((target, l)) => match level(l) {
                Some(l) if !target.is_empty() => targets.with_target(target, l),
                _ => targets,
            },
            None if directive.is_empty() => targets,
            None => match level(directive) {
                Some(l) => targets.with_default(l),
                None => targets.with_target(directive, LevelFilter::TRACE),
            },
        };
    }
    targets
}

#[cfg(test)]
mod tests {
    use tracing::Level;

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
        let warn = Config {
            log_level: crate::config::LogLevel::Warn,
            ..Config::default()
        };
        let enabled = |rust_log: Option<&str>, target: &str, level: Level| {
            filter(&warn, rust_log.map(str::to_string)).would_enable(target, &level)
        };
        assert!(enabled(None, "unflat_server", Level::WARN));
        assert!(!enabled(None, "unflat_server", Level::INFO));
        assert!(enabled(Some("debug"), "rustls", Level::DEBUG));
        let both = Some("info,unflat_server=trace,wrong=,=debug,,");
        assert!(enabled(both, "unflat_server::net", Level::TRACE));
        assert!(enabled(both, "rustls", Level::INFO));
        assert!(!enabled(both, "rustls", Level::DEBUG));
        // A target alone: every level of it, nothing else.
        assert!(enabled(Some("rustls"), "rustls", Level::TRACE));
        assert!(!enabled(Some("rustls"), "unflat_server", Level::ERROR));
    }
}
