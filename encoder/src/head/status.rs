//! The status line: any code 100..=999 with any reason phrase or none, the
//! codes registered with IANA as constants whose line is one `'static`
//! string.

use super::grammar::first_invalid_value_byte;
use super::write::{Out, Overrun};
use super::{HeadError, CRLF};

/// A status code 100..=999 and its reason phrase, or none. The IANA codes
/// have constants ([`Status::OK`], …) whose line is one `'static` piece;
/// any other is a few `'static` pieces.
///
/// ```
/// use unflat::head::{Head, Status, RequestMethod};
/// assert_eq!(Status::from_code(404).unwrap(), Status::NOT_FOUND);
/// assert_eq!(Status::from_code(299).unwrap().reason(), None);
/// let teapot = Status::new(418, Some("I'm a teapot")).unwrap();
/// assert!(Head::new(teapot, RequestMethod::Other).to_vec().unwrap().starts_with(b"HTTP/1.1 418 I'm a teapot\r\n"));
/// assert!(Status::new(1000, None).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status {
    /// The whole line `HTTP/1.1 <code> <reason>\r\n` when `registered`,
    /// else the reason phrase alone (empty when there is none): one
    /// string either way, so that a status is three words to copy.
    text: &'static str,
    code: u16,
    /// Whether the reason is the code's registered phrase: then `text` is
    /// a function of the code and the phrase, so equality stays that of
    /// code and phrase.
    registered: bool,
}

/// Where the reason phrase begins in a registered status's line.
const PHRASE_AT: usize = STATUS_PREFIX.len() + 3 + 1;

/// The three digits of every code 100..=999, one after the other, so that a
/// status line without a static string of its own still borrows only
/// `'static` text.
static DIGITS: [u8; 2700] = {
    let mut t = [0u8; 2700];
    let mut code = 100;
    while code < 1000 {
        let at = (code - 100) * 3;
        t[at] = b'0' + (code / 100) as u8;
        t[at + 1] = b'0' + (code / 10 % 10) as u8;
        t[at + 2] = b'0' + (code % 10) as u8;
        code += 1;
    }
    t
};

/// Whether the registered status line `line` carries `reason` (`const`
/// string equality of its phrase).
const fn has_phrase(line: &str, reason: &str) -> bool {
    let (line, reason) = (line.as_bytes(), reason.as_bytes());
    if line.len() != PHRASE_AT + reason.len() + CRLF.len() {
        return false;
    }
    let mut i = 0;
    while i < reason.len() {
        if line[PHRASE_AT + i] != reason[i] {
            return false;
        }
        i += 1;
    }
    true
}

macro_rules! statuses {
    ($($name:ident $code:literal $reason:literal;)*) => {
        impl Status {
            $(
                #[doc = concat!("`", $code, " ", $reason, "`")]
                pub const $name: Status = Status {
                    text: concat!("HTTP/1.1 ", $code, " ", $reason, "\r\n"),
                    code: $code,
                    registered: true,
                };
            )*

            /// The status with the phrase registered for `code`, if IANA
            /// registered one.
            pub const fn registered(code: u16) -> Option<Status> {
                match code {
                    $($code => Some(Status::$name),)*
                    _ => None,
                }
            }
        }
    };
}

// The IANA HTTP Status Code Registry (RFC 9110 §15 and the RFCs it lists),
// without the unused 306 and 418 and the temporary 104.
statuses! {
    CONTINUE 100 "Continue";
    SWITCHING_PROTOCOLS 101 "Switching Protocols";
    PROCESSING 102 "Processing";
    EARLY_HINTS 103 "Early Hints";
    OK 200 "OK";
    CREATED 201 "Created";
    ACCEPTED 202 "Accepted";
    NON_AUTHORITATIVE_INFORMATION 203 "Non-Authoritative Information";
    NO_CONTENT 204 "No Content";
    RESET_CONTENT 205 "Reset Content";
    PARTIAL_CONTENT 206 "Partial Content";
    MULTI_STATUS 207 "Multi-Status";
    ALREADY_REPORTED 208 "Already Reported";
    IM_USED 226 "IM Used";
    MULTIPLE_CHOICES 300 "Multiple Choices";
    MOVED_PERMANENTLY 301 "Moved Permanently";
    FOUND 302 "Found";
    SEE_OTHER 303 "See Other";
    NOT_MODIFIED 304 "Not Modified";
    USE_PROXY 305 "Use Proxy";
    TEMPORARY_REDIRECT 307 "Temporary Redirect";
    PERMANENT_REDIRECT 308 "Permanent Redirect";
    BAD_REQUEST 400 "Bad Request";
    UNAUTHORIZED 401 "Unauthorized";
    PAYMENT_REQUIRED 402 "Payment Required";
    FORBIDDEN 403 "Forbidden";
    NOT_FOUND 404 "Not Found";
    METHOD_NOT_ALLOWED 405 "Method Not Allowed";
    NOT_ACCEPTABLE 406 "Not Acceptable";
    PROXY_AUTHENTICATION_REQUIRED 407 "Proxy Authentication Required";
    REQUEST_TIMEOUT 408 "Request Timeout";
    CONFLICT 409 "Conflict";
    GONE 410 "Gone";
    LENGTH_REQUIRED 411 "Length Required";
    PRECONDITION_FAILED 412 "Precondition Failed";
    PAYLOAD_TOO_LARGE 413 "Content Too Large";
    URI_TOO_LONG 414 "URI Too Long";
    UNSUPPORTED_MEDIA_TYPE 415 "Unsupported Media Type";
    RANGE_NOT_SATISFIABLE 416 "Range Not Satisfiable";
    EXPECTATION_FAILED 417 "Expectation Failed";
    MISDIRECTED_REQUEST 421 "Misdirected Request";
    UNPROCESSABLE_CONTENT 422 "Unprocessable Content";
    LOCKED 423 "Locked";
    FAILED_DEPENDENCY 424 "Failed Dependency";
    TOO_EARLY 425 "Too Early";
    UPGRADE_REQUIRED 426 "Upgrade Required";
    PRECONDITION_REQUIRED 428 "Precondition Required";
    TOO_MANY_REQUESTS 429 "Too Many Requests";
    HEADER_FIELDS_TOO_LARGE 431 "Request Header Fields Too Large";
    UNAVAILABLE_FOR_LEGAL_REASONS 451 "Unavailable For Legal Reasons";
    INTERNAL_SERVER_ERROR 500 "Internal Server Error";
    NOT_IMPLEMENTED 501 "Not Implemented";
    BAD_GATEWAY 502 "Bad Gateway";
    SERVICE_UNAVAILABLE 503 "Service Unavailable";
    GATEWAY_TIMEOUT 504 "Gateway Timeout";
    VERSION_NOT_SUPPORTED 505 "HTTP Version Not Supported";
    VARIANT_ALSO_NEGOTIATES 506 "Variant Also Negotiates";
    INSUFFICIENT_STORAGE 507 "Insufficient Storage";
    LOOP_DETECTED 508 "Loop Detected";
    NOT_EXTENDED 510 "Not Extended";
    NETWORK_AUTHENTICATION_REQUIRED 511 "Network Authentication Required";
}

const STATUS_PREFIX: &str = "HTTP/1.1 ";

impl Status {
    /// `code` with `reason` (`None`: empty), the registered constant when it
    /// is the code's phrase. [`HeadError::InvalidStatus`] outside 100..=999,
    /// [`HeadError::InvalidReason`] for a phrase with a control byte or a
    /// character above U+007F: a phrase is ASCII text (a `&'static str`
    /// could not go out as Latin-1 without a copy, and its UTF-8 bytes
    /// would not be the characters it holds).
    ///
    /// ```
    /// use unflat::head::{HeadError, Status};
    /// assert!(Status::new(299, Some("Fine")).is_ok());
    /// assert_eq!(Status::new(299, Some("na\u{ef}ve")), Err(HeadError::InvalidReason { at: 2, byte: 0xC3 }));
    /// ```
    pub const fn new(code: u16, reason: Option<&'static str>) -> Result<Status, HeadError> {
        if code < 100 || code > 999 {
            return Err(HeadError::InvalidStatus(code));
        }
        let reason = match reason {
            Some(r) => r,
            None => "",
        };
        if let Some((at, byte)) = first_invalid_value_byte(reason.as_bytes()) {
            return Err(HeadError::InvalidReason { at, byte });
        }
        let bytes = reason.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !bytes[i].is_ascii() {
                return Err(HeadError::InvalidReason {
                    at: i,
                    byte: bytes[i],
                });
            }
            i += 1;
        }
        Ok(Status::checked(code, reason))
    }

    /// `code` (in 100..=999) with `reason` (valid, possibly empty): the
    /// registered status, whose line is prebuilt, when the reason is its
    /// own; otherwise a status whose line is built from its parts.
    pub(super) const fn checked(code: u16, reason: &'static str) -> Status {
        if let Some(known) = Status::registered(code) {
            if has_phrase(known.text, reason) {
                return known;
            }
        }
        Status {
            text: reason,
            code,
            registered: false,
        }
    }

    /// `code` with its registered reason phrase, or with none when IANA
    /// registered none (`HTTP/1.1 299 \r\n`).
    pub const fn from_code(code: u16) -> Result<Status, HeadError> {
        match Status::registered(code) {
            Some(status) => Ok(status),
            None => Status::new(code, None),
        }
    }

    /// The numeric code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The reason phrase, if not empty.
    pub fn reason(&self) -> Option<&'static str> {
        let reason = self.phrase();
        (!reason.is_empty()).then_some(reason)
    }

    /// The reason phrase, possibly empty.
    fn phrase(&self) -> &'static str {
        if self.registered {
            &self.text[PHRASE_AT..self.text.len() - CRLF.len()]
        } else {
            self.text
        }
    }

    /// `HTTP/1.1 <code> <reason>\r\n` when it is one `'static` string: for
    /// the registered phrases. Other statuses are written in a few pieces.
    pub fn line(&self) -> Option<&'static str> {
        self.registered.then_some(self.text)
    }

    /// 1xx, 204 and 304 responses never carry a body (RFC 9110 §6.4.1).
    pub fn has_no_body(&self) -> bool {
        self.code < 200 || self.code == 204 || self.code == 304
    }

    /// The code's three digits.
    fn digits(&self) -> &'static [u8] {
        let at = usize::from(self.code - 100) * 3;
        &DIGITS[at..at + 3]
    }

    /// Bytes of the status line.
    pub(super) fn line_len(&self) -> usize {
        if self.registered {
            self.text.len()
        } else {
            PHRASE_AT + self.text.len() + CRLF.len()
        }
    }

    /// Writes the status line.
    pub(super) fn write(&self, out: &mut Out<'_>) -> Result<(), Overrun> {
        if self.registered {
            return out.put(self.text.as_bytes());
        }
        out.put(STATUS_PREFIX.as_bytes())?;
        out.put(self.digits())?;
        out.put(b" ")?;
        out.put(self.text.as_bytes())?;
        out.put(CRLF.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three words: a status is copied into every response's record.
    /// Equality is that of code and phrase, however the status was made.
    #[test]
    fn a_status_is_small_and_equal_by_code_and_phrase() {
        assert_eq!(std::mem::size_of::<Status>(), 24);
        assert_eq!(Status::new(200, Some("OK")), Ok(Status::OK));
        assert_eq!(Status::OK.reason(), Some("OK"));
        assert_eq!(Status::OK.line(), Some("HTTP/1.1 200 OK\r\n"));
        let custom = Status::new(200, Some("Fine")).unwrap();
        assert_ne!(custom, Status::OK);
        assert_eq!((custom.reason(), custom.line()), (Some("Fine"), None));
        assert_eq!(custom.line_len(), "HTTP/1.1 200 Fine\r\n".len());
        let bare = Status::new(299, None).unwrap();
        assert_eq!(
            (bare.reason(), bare.line_len()),
            (None, "HTTP/1.1 299 \r\n".len())
        );
    }
}
