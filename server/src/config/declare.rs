//! How an option is declared: once, as a field of [`Config`] — help, flag,
//! environment variable, default and [`Bounds`] (`#[range(…)]`). The
//! `options!` macro turns it into the clap argument, whose parser checks the
//! range, and an entry of [`RANGED`], through which [`Config::validate`]
//! checks a `Config` built in code and `--help` states each range.
//!
//! [`Config`]: super::Config
//! [`Config::validate`]: super::Config::validate
//! [`RANGED`]: super::RANGED

use super::range::Bounds;
use super::Config;

/// A ranged option: its field's name, its range, and its value in a
/// [`Config`] (`None`: not set).
#[derive(Clone, Copy)]
pub(super) struct Ranged {
    /// The field's name (`max_body`).
    pub id: &'static str,
    /// The values it accepts.
    pub range: Bounds,
    /// Its value in a configuration.
    pub value: fn(&Config) -> Option<u64>,
}

impl Ranged {
    /// The flag, as a user writes it (`--max-body`).
    pub fn flag(&self) -> String {
        flag(self.id)
    }

    /// `v` in the range's unit (`64 KiB`, `30s`).
    pub fn show(&self, v: u64) -> String {
        self.range.show(v)
    }
}

/// The flag of the field `id` (`--max-body` for `max_body`).
pub(super) fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// The environment variable of the field `id` (`UNFLAT_MAX_BODY`).
#[cfg(feature = "cli")]
pub(super) fn env(id: &str) -> String {
    format!("UNFLAT_{}", id.to_uppercase())
}

/// The first sentence of an option's help, for `-h`: up to the first
/// period followed by a space and a capital letter (not `e.g. 4`), without
/// the period.
#[cfg(feature = "cli")]
pub(super) fn first_sentence(help: &str) -> String {
    let help = help.trim();
    let end = help
        .match_indices(". ")
        .map(|(i, _)| i)
        .find(|&i| help[i + 2..].starts_with(|c: char| c.is_uppercase()))
        .unwrap_or(help.len());
    help[..end].trim_end_matches('.').to_string()
}

/// A value that does not parse, when it came from the environment rather
/// than from `args`, named by its variable as well as its flag: where the
/// user must look to fix it.
#[cfg(feature = "cli")]
pub(super) fn name_the_variable(e: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let flag = arg.split([' ', '=']).next().unwrap_or(arg).to_string();
    let given = args.iter().filter_map(|a| a.to_str()).any(|a| {
        a == flag
            || a.strip_prefix(flag.as_str())
                .is_some_and(|rest| rest.starts_with('='))
    });
    let var = env(&flag.trim_start_matches('-').replace('-', "_"));
    let (false, Some(value)) = (given, std::env::var_os(&var)) else {
        return e;
    };
    let text = e.to_string();
    let reason = text.lines().next().unwrap_or_default();
    let reason = reason.strip_prefix("error: ").unwrap_or(reason);
    clap::Error::raw(
        e.kind(),
        format!("{var}={}: {reason}\n", value.to_string_lossy()),
    )
}

/// Declares the configuration: a struct whose fields are the options, each
/// `#[arg(…)]` completed with `long` and, under `#[range(R)]`, the parser
/// of `R` (for clap, with the `cli` feature); its `Default`, each field's
/// `default_value` or `default_value_t` (or the type's default: `None`,
/// `false`), so that a configuration built in code and an empty command
/// line agree; and `RANGED`, the list of the ranged options.
macro_rules! options {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[arg($($arg:tt)*)])?
                $(#[range($range:expr)])?
                pub $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[doc = $doc])*
                #[cfg_attr(feature = "cli", arg(
                    long
                    $(, value_parser = $range.parser::<<$ty as $crate::config::Field>::Value>())?
                    $(, $($arg)*)?
                ))]
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            /// What an empty command line gives, whatever the environment
            /// says: every default is stated once, in its option's
            /// declaration.
            fn default() -> Self {
                $name {
                    $($field: default_of!($ty; $($($arg)*)?),)*
                }
            }
        }

        /// Every option with a range: the one list `--help` (each range)
        /// and [`Config::validate`] go through.
        const RANGED: &[$crate::config::declare::Ranged] = &[
            $($(
                $crate::config::declare::Ranged {
                    id: stringify!($field),
                    range: $range,
                    value: |c: &$name| $crate::config::Field::value(&c.$field),
                },
            )?)*
        ];
    };
}

/// A field's default from its `#[arg(…)]`: `default_value` parsed as the
/// command line would ([`DefaultValue`](super::range::DefaultValue)),
/// `default_value_t` as it is, or the type's own default.
macro_rules! default_of {
    ($ty:ty; default_value = $v:literal $(, $($rest:tt)*)?) => {
        <$ty as $crate::config::range::DefaultValue>::parse_default($v)
    };
    ($ty:ty; default_value_t = $v:expr $(, $($rest:tt)*)?) => {
        $v
    };
    ($ty:ty; $key:ident $(= $value:expr)? $(, $($rest:tt)*)?) => {
        default_of!($ty; $($($rest)*)?)
    };
    ($ty:ty;) => {
        <$ty as ::core::default::Default>::default()
    };
}
