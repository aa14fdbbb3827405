//! What a connection's task holds while it waits: the future that serves a
//! cleartext connection, which every idle keep-alive connection keeps in
//! its task (its buffers are put away while it waits; `net/idle.rs`). A
//! TLS connection's larger state is boxed apart, so it does not enlarge
//! this one. The bound is the size the future was made to (1352 bytes in
//! a debug build, the site's per-connection tally of its metrics
//! included) with a little room for the compiler's layout, below
//! jemalloc's 1536-byte class for the task.

use unflat_server::Config;

#[test]
fn a_cleartext_connection_future_stays_small() {
    let stack = crate::common::demo_stack(Config::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (_trigger, shutdown) = unflat_server::net::shutdown::channel();
        let task = unflat_server::net::handle(stream, addr, None, stack.connections(), &shutdown);
        let bytes = std::mem::size_of_val(&task);
        assert!(bytes <= 1376, "a connection's future is {bytes} bytes");
    });
}
