//! `--tls-provider`: the rustls crypto provider HTTPS is built on, aws-lc-rs
//! (the default, faster in the `tls-providers` bench) or *ring* (with the
//! `tls-ring` feature), so that both can be measured under load.

#[cfg(feature = "tls")]
use rustls::crypto::CryptoProvider;

/// A rustls crypto provider (`--tls-provider`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Provider {
    /// AWS-LC, the default.
    #[default]
    #[cfg_attr(feature = "cli", value(name = "aws-lc-rs"))]
    AwsLcRs,
    /// Takes no P-521 key, nor an RSA key of more than 4096 bits.
    #[cfg(feature = "tls-ring")]
    Ring,
}

impl Provider {
    /// Its name, as `--tls-provider` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::AwsLcRs => "aws-lc-rs",
            #[cfg(feature = "tls-ring")]
            Provider::Ring => "ring",
        }
    }

    /// A fresh provider with its default cipher suites, key exchange groups
    /// and key loader.
    #[cfg(feature = "tls")]
    pub fn crypto(self) -> CryptoProvider {
        match self {
            Provider::AwsLcRs => rustls::crypto::aws_lc_rs::default_provider(),
            #[cfg(feature = "tls-ring")]
            Provider::Ring => rustls::crypto::ring::default_provider(),
        }
    }

    /// The private keys its key loader takes, in words, from
    /// [`Provider::rsa_bits`] and [`Provider::curves`] so the two agree.
    #[cfg(feature = "tls")]
    pub(super) fn keys_taken(self) -> String {
        let bits = self.rsa_bits();
        let curves = match self.curves() {
            [] => String::from("no curve"),
            [one] => one.to_string(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
        };
        format!(
            "rustls with {} takes RSA keys of {} to {} bits, ECDSA keys on {curves}, and Ed25519 keys",
            self.name(),
            bits.start(),
            bits.end()
        )
    }

    /// The RSA key sizes, in bits, its key loader takes.
    #[cfg(feature = "tls")]
    pub(super) fn rsa_bits(self) -> std::ops::RangeInclusive<usize> {
        match self {
            Provider::AwsLcRs => 2048..=8192,
            // ring's `PRIVATE_KEY_PUBLIC_MODULUS_MAX_BITS`.
            #[cfg(feature = "tls-ring")]
            Provider::Ring => 2048..=4096,
        }
    }

    /// The ECDSA curves its key loader takes.
    #[cfg(feature = "tls")]
    pub(super) fn curves(self) -> &'static [&'static str] {
        match self {
            Provider::AwsLcRs => &["P-256", "P-384", "P-521"],
            #[cfg(feature = "tls-ring")]
            Provider::Ring => &["P-256", "P-384"],
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// Both providers, named as the command line takes them.
#[cfg(all(test, feature = "tls-ring", feature = "cli"))]
mod tests {
    use clap::ValueEnum as _;

    use super::Provider;

    #[test]
    fn the_keys_taken_are_said_from_the_bounds_checked() {
        assert_eq!(
            Provider::AwsLcRs.keys_taken(),
            "rustls with aws-lc-rs takes RSA keys of 2048 to 8192 bits, ECDSA keys on P-256, P-384 or P-521, and Ed25519 keys"
        );
        assert_eq!(
            Provider::Ring.keys_taken(),
            "rustls with ring takes RSA keys of 2048 to 4096 bits, ECDSA keys on P-256 or P-384, and Ed25519 keys"
        );
    }

    #[test]
    fn each_provider_is_named_as_the_flag_takes_it() {
        for p in Provider::value_variants() {
            let value = p.to_possible_value().unwrap();
            assert_eq!(value.get_name(), p.name());
            assert_eq!(Provider::from_str(p.name(), false), Ok(*p));
            // Both are built in: each gives a provider with suites.
            assert!(!p.crypto().cipher_suites.is_empty(), "{p}");
        }
    }
}
