//! The harnesses' command lines: every option parsed by clap before any
//! work starts, and a bad one answered as a usage error — one line on
//! stderr naming the option, exit status 2 — never as a panic halfway
//! through a run.

use std::ops::RangeBounds;

use clap::builder::RangedU64ValueParser;
use clap::Parser;

/// The exit status of a usage error (clap's, and the server's).
pub const USAGE: i32 = 2;

/// Parses this process's arguments into `T`. `--help` and `--version`
/// print and exit 0; anything clap refuses exits with [`usage_error`].
/// A value that looks like a negative number is taken as the option's
/// value, so that `--runs -1` is refused as a value of `--runs` rather
/// than as an unknown flag `-1`.
pub fn parse<T: Parser>() -> T {
    let mut cmd = T::command().mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    });
    let parsed = cmd
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|m| T::from_arg_matches(&m).map_err(|e| e.format(&mut cmd)));
    match parsed {
        Ok(opts) => opts,
        Err(e) if e.use_stderr() => {
            let line = unflat_server::cli::error_line(&e);
            usage_error(line.strip_prefix("error: ").unwrap_or(&line))
        }
        Err(e) => e.exit(),
    }
}

/// Prints `error: {message}` and exits with status 2: for combinations of
/// options that clap cannot check on its own.
pub fn usage_error(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(USAGE)
}

/// A count within `range`, for `value_parser =`: clap refuses anything
/// else with the range in its message.
pub fn count(range: impl RangeBounds<u64>) -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(range)
}

/// A `value_parser` for a number above 0 and at most `max`, which
/// `f64`'s own parser does not check: it takes `nan`, `inf` and negative
/// numbers.
pub fn positive(max: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s: &str| {
        let v: f64 = s.parse().map_err(|_| "not a number".to_string())?;
        if v.is_finite() && v > 0.0 && v <= max {
            Ok(v)
        } else {
            Err(format!("{v} is not above 0 and at most {max}"))
        }
    }
}
