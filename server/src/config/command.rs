//! The command lines (the `cli` feature): the core's options, beside an
//! application's own ([`Config::command_with`], [`Config::app_command`]),
//! each option's variable in the environment, and the errors that name it.

use clap::{Args as _, FromArgMatches as _};

use super::range::Bounds;
use super::{declare, Config, RANGED};

impl Config {
    /// The command line: each option with its flag, its environment
    /// variable and, for a ranged one, its range added to its help.
    pub fn command() -> clap::Command {
        Config::command_with(|cmd| cmd, &[])
    }

    /// The command line with a program's own options beside the core's:
    /// `own` adds them (a derive's `augment_args`), and each is then
    /// described as the core's are — read from its variable in the
    /// environment (`UNFLAT_` and its name), `-h` showing the first
    /// sentence of its help, `--help` all of it and the range `ranges`
    /// gives it (by the argument's id).
    ///
    /// ```
    /// use unflat_server::config::{Bounds, Config};
    /// let cmd = Config::command_with(
    ///     |cmd| cmd.arg(clap::Arg::new("greetings").long("greetings").help("Greetings kept. Each costs a line.")),
    ///     &[("greetings", Bounds::count(1, 10))],
    /// );
    /// let help = cmd.clone().render_long_help().to_string();
    /// assert!(help.contains("Greetings kept. Each costs a line. Accepts 1 to 10."));
    /// assert!(help.contains("UNFLAT_GREETINGS") && help.contains("--max-body"));
    /// ```
    pub fn command_with(
        own: impl FnOnce(clap::Command) -> clap::Command,
        ranges: &[(&str, Bounds)],
    ) -> clap::Command {
        let cmd = clap::Command::new("unflat-server").version(env!("CARGO_PKG_VERSION"));
        let ranged = RANGED
            .iter()
            .map(|r| (r.id, r.range))
            .chain(ranges.iter().copied());
        let ranged: Vec<(&str, Bounds)> = ranged.collect();
        // `-h` shows each option's first sentence; `--help` all of it, with
        // its range. Built without HTTPS, the TLS options are not shown
        // (given, they are refused when the server binds).
        own(Config::augment_args(cmd))
            .mut_args(|a| {
                #[cfg(not(feature = "tls"))]
                let a = match a.get_help_heading() {
                    Some("TLS") => a.hide(true),
                    _ => a,
                };
                let id = a.get_id().to_string();
                let a = a.env(declare::env(&id));
                let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                let long = match ranged.iter().find(|(r, _)| *r == id) {
                    Some((_, range)) => format!(
                        "{}. Accepts {}.",
                        help.trim_end_matches('.'),
                        range.describe()
                    ),
                    None => help.clone(),
                };
                a.help(declare::first_sentence(&help)).long_help(long)
            })
            // After the arguments, whose derive sets the struct's own doc.
            .about(
                "unflat-server: an HTTP/1.1 server that writes rope-built \
             responses without flattening them",
            )
    }

    /// An application's command line: `cmd` (its name, its own options)
    /// with the core's options, as [`Config::command`] has them.
    ///
    /// ```
    /// use unflat_server::Config;
    /// let cmd = Config::app_command(clap::Command::new("hello"));
    /// let help = cmd.clone().render_long_help().to_string();
    /// assert!(help.contains("--max-body") && help.contains("--shutdown-delay"));
    /// assert!(help.contains("--access-log") && !help.contains("--max-len"));
    /// let refused = Config::from_app_args(["hello", "--cache-bytes", "1MiB"]).unwrap_err();
    /// assert!(refused.to_string().contains("--cache-bytes"));
    /// ```
    pub fn app_command(cmd: clap::Command) -> clap::Command {
        let core = Config::command();
        cmd.args(core.get_arguments().cloned().collect::<Vec<_>>())
    }

    /// The configuration an application's command line gave
    /// ([`Config::app_command`]).
    pub fn from_app_matches(matches: &clap::ArgMatches) -> Result<Config, clap::Error> {
        Config::from_arg_matches(matches)
    }

    /// The configuration `args` (the first is the program's name) and the
    /// environment give an application with no options of its own: the
    /// core's ([`Config::app_command`]).
    pub fn from_app_args<I, T>(args: I) -> Result<Config, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let name = args
            .first()
            .and_then(|a| std::path::Path::new(a).file_name())
            .map_or_else(|| "app".to_string(), |n| n.to_string_lossy().into_owned());
        let matches = Config::matches(Config::app_command(clap::Command::new(name)), args)?;
        Config::from_app_matches(&matches)
    }

    /// The configuration the process's arguments and environment give.
    pub fn from_command_line() -> Result<Config, clap::Error> {
        Config::from_args(std::env::args_os())
    }

    /// The configuration `args` give (the first is the program's name),
    /// with the environment.
    pub fn from_args<I, T>(args: I) -> Result<Config, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Config::from_arg_matches(&Config::matches(Config::command(), args)?)
    }

    /// What `args` (the first is the program's name) and the environment
    /// give `cmd`, a command of [`Config::command_with`]: a value that does
    /// not parse is named by its variable when it came from the
    /// environment, where the user must look to fix it.
    pub fn matches<I, T>(cmd: clap::Command, args: I) -> Result<clap::ArgMatches, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        cmd.try_get_matches_from(&args)
            .map_err(|e| declare::name_the_variable(e, &args))
    }
}
