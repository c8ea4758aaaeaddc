//! Free loopback ports for the servers tests start.

// A test that cannot get a port cannot run: failing it loudly is the point.
#![allow(clippy::panic)]

use std::net::TcpListener;
use std::sync::Mutex;

/// A loopback port nobody listens on right now, and never handed out before
/// in this process: the kernel may offer a port again once its listener is
/// closed, and two servers of one test run must never be given the same one.
///
/// Another process may still take the port before the server binds it, so a
/// launcher must notice a server that fails to bind and try a fresh port.
///
/// # Panics
///
/// When no loopback port can be bound at all (the test cannot run).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"));
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_never_handed_out_twice() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
    }
}
