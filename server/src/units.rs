//! Sizes as users write them, on the command line (`--max-body 64KiB`)
//! and in a URL (`/large/64MiB`): one grammar for both.

/// A size as a user writes it: bytes (`65536`) or a number with a unit
/// (`64KiB`, `1MiB`; `1MB` is 10^6 bytes), read by `bytesize`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    // bytesize alone would also take a sign or an exponent.
    let number = s
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .trim_end();
    let number_ok = number.starts_with(|c: char| c.is_ascii_digit())
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.matches('.').count() <= 1;
    match s.parse::<bytesize::ByteSize>() {
        Ok(size) if number_ok => Ok(size.as_u64()),
        _ => Err(format!(
            "{s:?} is not a whole number of bytes, nor a size with a unit (64KiB, 1MiB, 2GiB)"
        )),
    }
}
