//! Sizes as users write them, on the command line (`--max-body 64KiB`)
//! and in a URL (`/large/64MiB`): one grammar for both.

/// The units a size may end with, and the bytes each stands for: decimal
/// (`kB`, `MB`, …: powers of 1000) and binary (`KiB`, `MiB`, …: powers of
/// 1024), matched without regard to case. `K`, `M` and the like are not
/// sizes: whether they mean 1000 or 1024 is a guess.
const UNITS: [(&str, u64); 9] = [
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
];

/// A size as a user writes it: digits (`65536`), or digits and a unit
/// (`64KiB`, `1MB`), a fraction allowed before a unit when it makes whole
/// bytes (`1.5KiB` is 1536), one space allowed before the unit (`1 GiB`).
/// No sign, no exponent, nothing around it.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("{s:?} is not a whole number of bytes, nor a size with a unit (64KiB, 1MiB, 2GiB)")
    };
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    // One space may part the number from its unit, as people write it.
    let unit = unit
        .strip_prefix(' ')
        .filter(|u| !u.is_empty())
        .unwrap_or(unit);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if number.contains('.') && (fraction.is_empty() || unit.is_empty()) {
        return Err(bad());
    }
    let scale = match unit {
        "" => 1,
        _ => {
            UNITS
                .iter()
                .find(|(name, _)| unit.eq_ignore_ascii_case(name))
                .ok_or_else(bad)?
                .1
        }
    };
    let too_large = || format!("{s:?} is more bytes than can be counted");
    let whole: u128 = whole.parse().map_err(|_| too_large())?;
    let mut bytes = whole * u128::from(scale);
    if !fraction.is_empty() {
        let digits = u32::try_from(fraction.len()).map_err(|_| bad())?;
        let denominator = 10u128.checked_pow(digits).ok_or_else(bad)?;
        let numerator: u128 = fraction.parse().map_err(|_| bad())?;
        let part = numerator * u128::from(scale);
        if !part.is_multiple_of(denominator) {
            return Err(format!("{s:?} is not a whole number of bytes"));
        }
        bytes += part / denominator;
    }
    u64::try_from(bytes).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_digits_and_the_documented_units_only() {
        for (s, n) in [
            ("0", 0),
            ("65536", 65536),
            ("64KiB", 65536),
            ("64kib", 65536),
            ("1kB", 1000),
            ("1MB", 1_000_000),
            ("2GiB", 2 << 30),
            ("1.5KiB", 1536),
            ("0.5MB", 500_000),
            ("1 GiB", 1 << 30),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse_size(s), Ok(n), "{s}");
        }
        for s in [
            "",
            "+1",
            "-1",
            "1K",
            "1k",
            "1M",
            " 1",
            "1 ",
            "1  KiB",
            "1.5",
            "1.",
            ".5KiB",
            "1.1B",
            "1e3",
            "1.5.5MiB",
            "0x10",
            "18446744073709551616",
            "1KiBB",
            "KiB",
        ] {
            assert!(parse_size(s).is_err(), "{s:?} accepted");
        }
    }
}
