//! The clock-backed `Date` line.

use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// The `Date: <IMF-fixdate>\r\n` line, rendered at most once a second.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use unflat::head::{DateLine, Head, Status, RequestMethod};
/// let mut date = DateLine::at(UNIX_EPOCH + Duration::from_secs(784_111_777));
/// assert_eq!(date.as_bytes(), b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
/// // Refreshed by the clock; a head borrows it.
/// assert!(!date.refresh(UNIX_EPOCH + Duration::from_millis(784_111_777_500)));
/// assert!(date.refresh(UNIX_EPOCH + Duration::from_secs(784_111_778)));
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.date(&date);
/// assert!(head.to_vec().unwrap().ends_with(b"08:49:38 GMT\r\n\r\n"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DateLine {
    second: u64,
    line: [u8; DateLine::LEN],
}

impl DateLine {
    /// `Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n` is always 37 bytes.
    pub const LEN: usize = 37;

    /// The line for `now`.
    pub fn at(now: SystemTime) -> DateLine {
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut line = [0u8; DateLine::LEN];
        let mut w = &mut line[..];
        // An IMF-fixdate is exactly 29 bytes, so this cannot fail.
        write!(w, "Date: {}\r\n", httpdate::HttpDate::from(now))
            .expect("an IMF-fixdate line is 37 bytes");
        DateLine { second, line }
    }

    /// The second since the Unix epoch the line shows.
    pub fn second(&self) -> u64 {
        self.second
    }

    /// Re-renders the line if `now` is in a later second; true if it did.
    pub fn refresh(&mut self, now: SystemTime) -> bool {
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second == self.second {
            return false;
        }
        *self = DateLine::at(now);
        true
    }

    /// The line, CRLF included.
    pub fn as_bytes(&self) -> &[u8; DateLine::LEN] {
        &self.line
    }
}
