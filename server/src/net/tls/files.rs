//! The certificate and key files of `--tls-cert` and `--tls-key`: read
//! from regular files only, of at most [`MAX_PEM_BYTES`], opened without
//! blocking (a FIFO or a device is refused, never read).

use std::io::{self, Read as _};
use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The largest PEM file read for `--tls-cert` or `--tls-key`: a chain of a
/// dozen certificates of large RSA keys fits in a few tens of kilobytes.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// The bytes of the PEM file at `path` (`flag` names it in errors): a
/// regular file (a symbolic link to one is followed) of at most
/// [`MAX_PEM_BYTES`]. It is opened without blocking and checked once open,
/// so that a FIFO or a device is refused without a read, and a file
/// replaced between a check and the open cannot slip through.
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
