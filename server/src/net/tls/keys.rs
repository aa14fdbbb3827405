//! What a private key is — its type, RSA size or EC curve — read from its
//! DER, so that a key rustls refuses is named with what is wrong with it.

use rustls_pki_types::PrivateKeyDer;

use super::Provider;

/// Why rustls with `provider` refused `key` (`error`), naming its type and
/// size when they are what the provider does not take.
pub(super) fn unusable_key(
    key: &PrivateKeyDer<'_>,
    error: &rustls::Error,
    provider: Provider,
) -> String {
    let taken = provider.keys_taken();
    match key_kind(key) {
        Some(KeyKind::Rsa { bits }) if !provider.rsa_bits().contains(&bits) => {
            format!("an RSA key of {bits} bits, a size not supported: {taken}")
        }
        Some(KeyKind::Other(name)) => {
            format!("a key of type {name}, not supported: {taken}")
        }
        Some(KeyKind::Ec { curve }) if !provider.curves().contains(&curve) => {
            format!("an ECDSA key on {curve}, a curve not supported: {taken}")
        }
        // A type and size the provider takes: the key itself is at fault.
        _ => format!("the private key cannot be used ({error})"),
    }
}

/// What a private key is, as far as its encoding says.
#[derive(Debug, PartialEq, Eq)]
enum KeyKind {
    Rsa { bits: usize },
    Ec { curve: &'static str },
    Ed25519,
    Other(String),
}

/// The type (and RSA size, EC curve) of `key`, read from its DER; `None`
/// when it cannot be read.
fn key_kind(key: &PrivateKeyDer<'_>) -> Option<KeyKind> {
    match key {
        PrivateKeyDer::Pkcs1(k) => rsa_bits(k.secret_pkcs1_der()).map(|bits| KeyKind::Rsa { bits }),
        PrivateKeyDer::Sec1(k) => sec1_curve(k.secret_sec1_der()),
        PrivateKeyDer::Pkcs8(k) => pkcs8_kind(k.secret_pkcs8_der()),
        _ => None,
    }
}

/// `RSAPrivateKey ::= SEQUENCE { version, modulus INTEGER, … }`: the
/// modulus's size in bits.
fn rsa_bits(der: &[u8]) -> Option<usize> {
    let modulus = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            let (modulus, _) = r.next().read_bigint_bytes()?;
            // The rest (exponents, primes) is not needed.
            while r.read_optional(|r| r.read_der())?.is_some() {}
            Ok(modulus)
        })
    })
    .ok()?;
    let first = modulus.iter().position(|&b| b != 0)?;
    Some((modulus.len() - first) * 8 - modulus[first].leading_zeros() as usize)
}

/// `ECPrivateKey ::= SEQUENCE { version, privateKey, [0] parameters, … }`:
/// the curve named in its parameters.
fn sec1_curve(der: &[u8]) -> Option<KeyKind> {
    let oid = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            r.next().read_bytes()?;
            let oid =
                r.read_optional(|r| r.read_tagged(yasna::Tag::context(0), |r| r.read_oid()))?;
            while r.read_optional(|r| r.read_der())?.is_some() {}
            Ok(oid)
        })
    })
    .ok()??;
    Some(KeyKind::Ec {
        curve: curve_name(&oid.to_string()),
    })
}

/// `PrivateKeyInfo ::= SEQUENCE { version, AlgorithmIdentifier, privateKey
/// OCTET STRING, … }`.
fn pkcs8_kind(der: &[u8]) -> Option<KeyKind> {
    let (algorithm, parameter, inner) = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            let (algorithm, parameter) = r.next().read_sequence(|r| {
                let algorithm = r.next().read_oid()?;
                let parameter = r.read_optional(|r| r.read_oid()).unwrap_or(None);
                while r.read_optional(|r| r.read_der())?.is_some() {}
                Ok((algorithm, parameter))
            })?;
            let inner = r.next().read_bytes()?;
            while r.read_optional(|r| r.read_der())?.is_some() {}
            Ok((algorithm, parameter, inner))
        })
    })
    .ok()?;
    Some(match algorithm.to_string().as_str() {
        "1.2.840.113549.1.1.1" => KeyKind::Rsa {
            bits: rsa_bits(&inner)?,
        },
        "1.2.840.10045.2.1" => KeyKind::Ec {
            curve: parameter.map_or("an unnamed curve", |oid| curve_name(&oid.to_string())),
        },
        "1.3.101.112" => KeyKind::Ed25519,
        oid => KeyKind::Other(algorithm_name(oid)),
    })
}

/// A named curve by its OID.
fn curve_name(oid: &str) -> &'static str {
    match oid {
        "1.2.840.10045.3.1.7" => "P-256",
        "1.3.132.0.34" => "P-384",
        "1.3.132.0.35" => "P-521",
        "1.3.132.0.10" => "secp256k1",
        "1.2.840.10045.3.1.1" => "P-192",
        "1.3.132.0.33" => "P-224",
        "1.3.36.3.3.2.8.1.1.7" => "brainpoolP256r1",
        _ => "a curve not named here",
    }
}

/// A key algorithm by its OID, for the ones a key file is likely to hold.
fn algorithm_name(oid: &str) -> String {
    match oid {
        "1.2.840.113549.1.1.10" => "RSASSA-PSS".into(),
        "1.2.840.10040.4.1" => "DSA".into(),
        "1.3.101.113" => "Ed448".into(),
        "1.3.101.110" => "X25519".into(),
        "1.3.101.111" => "X448".into(),
        "1.2.840.113549.1.3.1" => "DH".into(),
        oid => format!("OID {oid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_kinds_are_read_from_their_der() {
        let kind =
            |key: rcgen::KeyPair| key_kind(&PrivateKeyDer::try_from(key.serialize_der()).unwrap());
        let rsa =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_3072);
        assert_eq!(kind(rsa.unwrap()), Some(KeyKind::Rsa { bits: 3072 }));
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        assert_eq!(kind(ec), Some(KeyKind::Ec { curve: "P-384" }));
        let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        assert_eq!(kind(ed), Some(KeyKind::Ed25519));
    }

    #[test]
    #[cfg(feature = "tls-ring")]
    fn a_curve_ring_does_not_take_is_named_with_ring() {
        let p521 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap();
        let der = PrivateKeyDer::try_from(p521.serialize_der()).unwrap();
        let load = |p: Provider| p.crypto().key_provider.load_private_key(der.clone_key());
        assert!(load(Provider::AwsLcRs).is_ok());
        let refused = load(Provider::Ring).unwrap_err();
        let why = unusable_key(&der, &refused, Provider::Ring);
        assert!(
            why.starts_with("an ECDSA key on P-521, a curve not supported: rustls with ring takes"),
            "{why}"
        );
    }
}
