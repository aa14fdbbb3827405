//! The command lines: the demo binary's (every option), and an
//! application's (the core's options beside its own, none of the demo's),
//! each option's variable in the environment, and the errors that name it.

use clap::{Args as _, FromArgMatches as _};

use super::{declare, Config, RANGED};

/// The demo site's own options — its routes' limits, its cache and
/// builds — which the demo binary takes and an application's command line
/// neither lists nor takes ([`Config::app_command`]).
pub const DEMO_OPTIONS: [&str; 4] = ["max_len", "max_large", "max_builds", "cache_bytes"];

impl Default for Config {
    /// What an empty command line gives, whatever the environment says:
    /// every default is stated once, in its option's declaration.
    fn default() -> Self {
        let cmd = Config::command().mut_args(|a| a.env(None::<&str>));
        let matches = cmd
            .try_get_matches_from(["unflat-server"])
            .expect("the defaults parse");
        Config::from_arg_matches(&matches).expect("the defaults make a Config")
    }
}

impl Config {
    /// The command line: each option with its flag, its environment
    /// variable and, for a ranged one, its range added to its help.
    pub fn command() -> clap::Command {
        let cmd = clap::Command::new("unflat-server").version(env!("CARGO_PKG_VERSION"));
        // `-h` shows each option's first sentence; `--help` all of it, with
        // its range.
        Config::augment_args(cmd)
            .mut_args(|a| {
                let id = a.get_id().to_string();
                let a = a.env(declare::env(&id));
                let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                let long = match RANGED.iter().find(|r| r.id == id) {
                    Some(r) => format!(
                        "{}. Accepts {}.",
                        help.trim_end_matches('.'),
                        r.range.describe()
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
    /// with the core's options, as [`Config::command`] has them, and none
    /// of the demo site's ([`DEMO_OPTIONS`]): those are neither listed nor
    /// read from the environment, and [`Config::from_app_matches`] refuses
    /// them.
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
        let args = core.get_arguments().map(|a| {
            if DEMO_OPTIONS.contains(&a.get_id().as_str()) {
                a.clone().hide(true).env(None::<&str>)
            } else {
                a.clone()
            }
        });
        cmd.args(args.collect::<Vec<_>>())
    }

    /// The configuration an application's command line gave
    /// ([`Config::app_command`]): a demo option given is refused, naming it.
    pub fn from_app_matches(matches: &clap::ArgMatches) -> Result<Config, clap::Error> {
        for id in DEMO_OPTIONS {
            if matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                return Err(clap::Error::raw(
                    clap::error::ErrorKind::UnknownArgument,
                    format!(
                        "unexpected argument '{}': an option of unflat-server's demo site, not of this application\n",
                        declare::flag(id)
                    ),
                ));
            }
        }
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
        let matches = Config::app_command(clap::Command::new(name))
            .try_get_matches_from(&args)
            .map_err(|e| declare::name_the_variable(e, &args))?;
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
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let matches = Config::command()
            .try_get_matches_from(&args)
            .map_err(|e| declare::name_the_variable(e, &args))?;
        Config::from_arg_matches(&matches)
    }
}
