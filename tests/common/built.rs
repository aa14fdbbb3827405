//! Executables built on request with the cargo that runs the tests: the
//! server binary, a target of the `unflat-server` package (cargo builds the
//! binaries of a test's own package only), and the benchmark harnesses.
//! Built in the dev profile; a build that is up to date costs cargo's check.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Runs `cargo build --quiet --message-format=json ARGS` at the repository's
/// root and returns the executable of every target of kind `kind` (`bin`,
/// `bench`) it built or found up to date, by target name. Panics, with
/// cargo's errors, when the build fails.
pub fn cargo_build(args: &[&str], kind: &str) -> HashMap<String, PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--quiet", "--message-format=json"])
        .args(args)
        .stderr(Stdio::piped())
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut built = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let of_kind = msg["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == kind));
        if let (true, Some(name), Some(exe)) = (
            msg["reason"] == "compiler-artifact" && of_kind,
            msg["target"]["name"].as_str(),
            msg["executable"].as_str(),
        ) {
            built.insert(name.to_string(), PathBuf::from(exe));
        }
    }
    built
}
