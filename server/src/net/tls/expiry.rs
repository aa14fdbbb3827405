//! When a certificate expires: its `notAfter`, read from its DER, for the
//! metric an operator alerts on before a client sees an expired one.

use rustls_pki_types::CertificateDer;

/// The `notAfter` of `cert`, in seconds since the Unix epoch; `None` when
/// its DER cannot be read as far (rustls, which took it, judges the rest).
///
/// `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
/// OPTIONAL, serialNumber, signature, issuer, validity SEQUENCE {
/// notBefore Time, notAfter Time }, … }, … }` (RFC 5280 §4.1), a `Time`
/// being a UTCTime or a GeneralizedTime.
pub(super) fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    yasna::parse_der(cert, |r| {
        r.read_sequence(|r| {
            let at = r.next().read_sequence(|r| {
                r.read_optional(|r| r.read_tagged(yasna::Tag::context(0), |r| r.read_der()))?;
                for _ in 0..3 {
                    // serialNumber, signature, issuer
                    r.next().read_der()?;
                }
                let at = r.next().read_sequence(|r| {
                    read_time(r.next())?;
                    read_time(r.next())
                })?;
                // subject, subjectPublicKeyInfo, the extensions
                while r.read_optional(|r| r.read_der())?.is_some() {}
                Ok(at)
            })?;
            // signatureAlgorithm, signatureValue
            r.next().read_der()?;
            r.next().read_der()?;
            Ok(at)
        })
    })
    .ok()
}

/// A `Time`, in seconds since the Unix epoch.
fn read_time(r: yasna::BERReader<'_, '_>) -> yasna::ASN1Result<i64> {
    if r.lookahead_tag()? == yasna::tags::TAG_UTCTIME {
        Ok(r.read_utctime()?.datetime().unix_timestamp())
    } else {
        Ok(r.read_generalized_time()?.datetime().unix_timestamp())
    }
}

#[cfg(all(test, feature = "self-signed"))]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_says_when_it_expires() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        // 2031-01-02T03:04:05Z, and a GeneralizedTime past 2049.
        for (year, unix) in [(2031, 1_925_089_445), (2051, 2_556_241_445)] {
            params.not_after = rcgen::date_time_ymd(year, 1, 2) + time_of_day();
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            assert_eq!(not_after(cert.der()), Some(unix), "{year}");
        }
        assert_eq!(not_after(&CertificateDer::from(vec![0x30, 0x00])), None);
    }

    fn time_of_day() -> std::time::Duration {
        std::time::Duration::from_secs(3 * 3600 + 4 * 60 + 5)
    }
}
