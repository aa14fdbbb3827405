//! The certificate and key files of `--tls-cert` and `--tls-key`: read
//! from regular files only, of at most [`MAX_PEM_BYTES`], opened without
//! blocking (a FIFO or a device is refused, never read); a chain is at most
//! what OpenSSL's clients take ([`MAX_CERT_LIST`]).

use std::io::{self, Read as _};
use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The largest PEM file read for `--tls-cert` or `--tls-key`: a chain of a
/// dozen certificates of large RSA keys fits in a few tens of kilobytes.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// The longest Certificate message a chain may make: OpenSSL's default
/// `max_cert_list`. Clients refuse a longer one, so every handshake would fail.
pub const MAX_CERT_LIST: usize = 100 * 1024;

/// Bytes of the body of the TLS 1.3 Certificate message that sends `chain`
/// (TLS 1.2's is smaller): 4 bytes before the list, per certificate its DER
/// and 5.
pub(super) fn certificate_message_len(chain: &[CertificateDer<'_>]) -> usize {
    1 + 3 + chain.iter().map(|c| 3 + c.len() + 2).sum::<usize>()
}

/// The bytes of the PEM file at `path` (`flag` names it in errors): a
/// regular file of at most [`MAX_PEM_BYTES`], opened without blocking and
/// checked once open, so that a FIFO is refused unread and a file replaced
/// after a check cannot slip through.
fn read_pem(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    let named = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
    let mut file = open_nonblocking(path).map_err(|e| named(&e))?;
    let meta = file.metadata().map_err(|e| named(&e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(named(&format!(
            "not a regular file ({}); give the path of a PEM file",
            file_kind(&kind)
        )));
    }
    if meta.len() > MAX_PEM_BYTES {
        return Err(named(&format!(
            "{} bytes; a PEM file of more than 1 MiB is refused",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // At most one byte past the cap, should the file grow meanwhile.
    (&mut file)
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| named(&e))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(named(&"grew past 1 MiB while it was read"));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// What a file that is not a regular one is, in words.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Every certificate in the PEM file at `path`, in order.
pub(super) fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem("--tls-cert", path)?;
    let named = |e: &dyn std::fmt::Display| format!("--tls-cert {}: {e}", path.display());
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(&e))?;
    if chain.is_empty() {
        return Err(named(&"no PEM certificate (BEGIN CERTIFICATE) in the file"));
    }
    let sent = certificate_message_len(&chain);
    if sent > MAX_CERT_LIST {
        return Err(named(&format!(
            "a chain of {} certificates makes a Certificate message of {sent} bytes, \
             over the {MAX_CERT_LIST} that OpenSSL clients take; send fewer certificates",
            chain.len()
        )));
    }
    Ok(chain)
}

/// The first private key in the PEM file at `path`.
pub(super) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_pem("--tls-key", path)?;
    let named = |e: &dyn std::fmt::Display| format!("--tls-key {}: {e}", path.display());
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            named(&"no PEM private key (PKCS#8, PKCS#1 or SEC1) in the file")
        }
        e => named(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_message_is_counted_as_tls_1_3_sends_it() {
        let der = |len: usize| CertificateDer::from(vec![0u8; len]);
        // 4 bytes before the list, 5 around each certificate.
        assert_eq!(certificate_message_len(&[der(408)]), 4 + 413);
        // A chain of 102 400 bytes exactly (OpenSSL takes it, measured), and
        // one byte more (refused).
        let mut chain = vec![der(408); 246];
        chain.push(der(793));
        assert_eq!(certificate_message_len(&chain), MAX_CERT_LIST);
        *chain.last_mut().unwrap() = der(794);
        assert_eq!(certificate_message_len(&chain), MAX_CERT_LIST + 1);
    }
}
