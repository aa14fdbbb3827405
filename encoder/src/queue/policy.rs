//! The copy-or-share [`Policy`]: when the queue copies bytes it is asked to
//! share, and in what frames it streams large text.

// Named by the documentation only.
#[cfg(doc)]
use super::WriteQueue;
#[cfg(doc)]
use crate::resume::Encoder;
#[cfg(doc)]
use bytes::Bytes;

/// When the queue copies bytes it is asked to share, and how it streams
/// large text.
///
/// ```
/// use bytes::{Buf, Bytes};
/// use unflat::queue::{Policy, WriteQueue};
///
/// let body = Bytes::from(vec![b'x'; 4096]);
/// let mut copying = WriteQueue::with_policy(Policy::DEFAULT); // 4 KiB < 8 KiB: copied
/// copying.share(&body);
/// assert_eq!(copying.copied_len(), 4096);
/// let mut sharing = WriteQueue::with_policy(Policy { copy_below: 1024, ..Policy::DEFAULT });
/// sharing.share(&body);
/// assert_eq!(sharing.copied_len(), 0);
/// assert_eq!(sharing.remaining(), 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// A contiguous piece (a [`Bytes`], a rope's chunk) shorter than this is
    /// copied; a longer one is sent as an iovec at its own memory.
    pub copy_below: usize,
    /// Text longer than this once encoded is encoded a frame of this size
    /// at a time ([`WriteQueue::stream`]); at least [`Encoder::MIN_DST`].
    pub frame: usize,
}

impl Policy {
    /// Copy below 8 KiB (ropey's chunks always), frames of 64 KiB: the A/B
    /// of `--copy-below` (docs/measurements.md, "Copy or share").
    pub const DEFAULT: Policy = Policy {
        copy_below: 8 * 1024,
        frame: 64 * 1024,
    };

    /// Never copy: every buffer and chunk is shared (for tests and
    /// measurements).
    pub const SHARE_ALL: Policy = Policy {
        copy_below: 0,
        ..Policy::DEFAULT
    };

    /// Always copy (for tests and measurements).
    pub const COPY_ALL: Policy = Policy {
        copy_below: usize::MAX,
        ..Policy::DEFAULT
    };
}

impl Default for Policy {
    fn default() -> Self {
        Policy::DEFAULT
    }
}
