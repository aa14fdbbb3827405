//! The flags every example takes, parsed in one place (included by each
//! example with `#[path = "support/args.rs"] mod args;`).

/// The address to listen on, from the flags every example takes:
/// `--addr HOST:PORT` (or `--addr=HOST:PORT`; port 0 picks a free port)
/// and `--port PORT`, short for `--addr 127.0.0.1:PORT`; `default` without
/// them. Any other argument goes to `other`, with the rest of the command
/// line to take a value from; it refuses what the example does not take.
pub fn addr_from_args(
    default: &str,
    mut other: impl FnMut(&str, &mut dyn Iterator<Item = String>) -> Result<(), String>,
) -> Result<String, String> {
    let mut addr = default.to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        if flag != "--addr" && flag != "--port" {
            other(&arg, &mut args)?;
            continue;
        }
        let value = match value {
            Some(value) => value,
            None => args.next().ok_or(format!("{flag} needs a value"))?,
        };
        addr = if flag == "--port" {
            let port: u16 = (value.parse())
                .map_err(|e| format!("--port {value:?}: {e} (a number 0..=65535)"))?;
            format!("127.0.0.1:{port}")
        } else {
            std::net::ToSocketAddrs::to_socket_addrs(value.as_str())
                .map_err(|e| format!("--addr {value:?}: {e} (HOST:PORT)"))?;
            value
        };
    }
    Ok(addr)
}
