//! `--tls-self-signed`: a certificate for localhost made at start-up, its
//! PEM written to a private directory (mode 0700, the file created anew
//! with mode 0600) and removed when the server stops.

use std::io::Write as _;
use std::path::PathBuf;

use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A self-signed certificate's PEM in a private directory, removed on drop.
pub(super) struct SelfSigned {
    _dir: tempfile::TempDir,
    pub(super) pem: PathBuf,
}

/// A new certificate for `localhost` (and 127.0.0.1, ::1), its PEM written
/// to `localhost.pem` in a new private directory.
pub(super) fn self_signed() -> Result<
    (
        Vec<CertificateDer<'static>>,
        PrivateKeyDer<'static>,
        SelfSigned,
    ),
    String,
> {
    let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
    let written = write_private(made.cert.pem().as_bytes())?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| format!("the self-signed certificate's key: {e}"))?;
    Ok((vec![made.cert.der().clone()], key, written))
}

/// Writes `pem` to a new file (`O_EXCL`, 0600) in a new directory only
/// this user can enter (0700, an unpredictable name made exclusively).
fn write_private(pem: &[u8]) -> Result<SelfSigned, String> {
    let failed = |e: &dyn std::fmt::Display| format!("--tls-self-signed: {e}");
    let mut builder = tempfile::Builder::new();
    builder.prefix("unflat-tls-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let dir = builder
        .tempdir()
        .map_err(|e| failed(&format!("cannot make a private directory: {e}")))?;
    let path = dir.path().join("localhost.pem");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&path)
        .map_err(|e| failed(&format!("cannot create {}: {e}", path.display())))?;
    file.write_all(pem)
        .map_err(|e| failed(&format!("cannot write {}: {e}", path.display())))?;
    Ok(SelfSigned {
        _dir: dir,
        pem: path,
    })
}
