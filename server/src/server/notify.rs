//! Readiness for systemd (`Type=notify`): `READY=1` once a server on its
//! own runtime listens with its signal handlers in place, `STOPPING=1` as
//! its shutdown begins — sent only when systemd asks for them
//! (`$NOTIFY_SOCKET`), as `sd_notify(3)` does.

/// Sends `state` to the socket systemd names, if any; a failure is logged
/// and changes nothing else (systemd then goes by its own timeouts).
pub(super) fn state(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&path, state) {
        tracing::warn!(error = %e, state, "cannot tell systemd (NOTIFY_SOCKET)");
    }
}

#[cfg(target_os = "linux")]
fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    // `@name`: an abstract socket, as systemd may give it.
    let addr = match path.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(path)?,
    };
    UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn send(_: &std::ffi::OsStr, _: &str) -> std::io::Result<()> {
    Err(std::io::Error::other("NOTIFY_SOCKET is read on Linux only"))
}
