//! What a connection's task holds while it waits: the future that serves a
//! cleartext connection, which every idle keep-alive connection keeps in
//! its task (its buffers are put away while it waits; `net/idle.rs`). A
//! TLS connection's larger state is boxed apart, so it does not enlarge
//! this one. The bound is the size the future was made to (1256 bytes in
//! a debug build; `handle` is no `async fn`, whose parameters would each
//! be copied besides, and the shutdown reaches a connection through its
//! slot, with no future of its own) with a little room for the compiler's
//! layout: in a release build the task (tokio's cell, 128-byte aligned)
//! is then 1 536 bytes, one jemalloc class below the 1 664 it was
//! (docs/results/instructions-and-profiles.md, "Memory per idle
//! connection").

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
        assert!(bytes <= 1280, "a connection's future is {bytes} bytes");
    });
}
