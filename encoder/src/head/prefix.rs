//! A head's fixed part, rendered once: the status line and the field lines
//! every response of one kind begins with.

use super::field::owned_name;
use super::write::Out;
use super::{HeadError, Line, Status};

/// The status line and field lines every response of one kind starts with,
/// rendered once: a head made from it ([`Head::prefixed`]) copies it as one
/// piece, the same bytes for less work per response. Framing lines are
/// refused, as [`Head::line`] refuses them.
///
/// ```
/// use unflat::head::{Head, Line, Prefix, RequestMethod, Status};
/// let text = Line::parse("Content-Type", "text/plain").unwrap();
/// let ok_text = Prefix::new(Status::OK, &[&text]).unwrap(); // once
/// let mut head = Head::prefixed(&ok_text, RequestMethod::Other); // per response
/// head.content_length(2).unwrap();
/// let mut same = Head::new(Status::OK, RequestMethod::Other);
/// same.line(&text).unwrap().content_length(2).unwrap();
/// assert_eq!(head.to_vec(), same.to_vec());
/// assert!(head.to_vec().is_ok());
/// assert_eq!(ok_text.as_bytes(), b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n");
///
/// let length = Line::parse("Content-Length", "2").unwrap();
/// assert!(Prefix::new(Status::OK, &[&length]).is_err());
/// ```
///
/// [`Head::prefixed`]: super::Head::prefixed
/// [`Head::line`]: super::Head::line
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefix {
    status: Status,
    bytes: Vec<u8>,
}

impl Prefix {
    /// The status line of `status`, then `lines` in order. Fails with
    /// [`HeadError::FramingField`] for a `Content-Length` or
    /// `Transfer-Encoding` line.
    pub fn new(status: Status, lines: &[&Line]) -> Result<Prefix, HeadError> {
        let mut bytes = Vec::with_capacity(
            status.line_len() + lines.iter().map(|l| l.as_bytes().len()).sum::<usize>(),
        );
        bytes.resize(status.line_len(), 0);
        status
            .write(&mut Out::new(&mut bytes))
            .expect("room for the status line");
        for line in lines {
            owned_name(&line.as_bytes()[..line.name_len])?;
            bytes.extend_from_slice(line.as_bytes());
        }
        Ok(Prefix { status, bytes })
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The rendered status line and field lines, each with its CRLF.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}
