//! `client --connect-timeout`: a server that drops the client's SYN (here a
//! listener whose accept queue is full, on loopback) fails the run in the
//! time given, saying so, instead of holding it for the kernel's retries
//! (about two minutes).

mod support;

use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A loopback listener with a backlog of 0 that never accepts: once its
/// queue holds a connection, the kernel drops further SYNs.
fn full_listener() -> (OwnedFd, SocketAddr, Vec<TcpStream>) {
    // SAFETY: plain socket calls on a descriptor owned here.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0);
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    unsafe {
        assert_eq!(
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                len
            ),
            0
        );
        assert_eq!(libc::listen(fd.as_raw_fd(), 0), 0);
        let mut bound = len;
        assert_eq!(
            libc::getsockname(
                fd.as_raw_fd(),
                &mut addr as *mut _ as *mut libc::sockaddr,
                &mut bound
            ),
            0
        );
    }
    let port = u16::from_be(addr.sin_port);
    let at: SocketAddr = ([127, 0, 0, 1], port).into();
    // Fill the queue: connect until one does not complete.
    let mut held = vec![];
    for _ in 0..16 {
        match TcpStream::connect_timeout(&at, Duration::from_millis(300)) {
            Ok(s) => held.push(s),
            Err(_) => return (fd, at, held),
        }
    }
    panic!("the accept queue of {at} never filled");
}

#[test]
fn a_server_that_drops_the_syn_fails_the_run_in_the_time_given() {
    let (_listener, at, _held) = full_listener();
    let dir = support::temp_dir("connect-timeout");
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["client", "--connect", &at.to_string()])
        .args(["--connect-timeout", "700ms", "--duration", "1s", "-q"])
        .arg("--out")
        .arg(dir.join("run"))
        .output()
        .unwrap();
    let took = started.elapsed();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("connecting to {at}"))
            && said.contains("no answer within 700ms (--connect-timeout)"),
        "{said}"
    );
    // The kernel's first SYN retry alone comes after 1 s, its retries
    // after about two minutes: the timeout, not the kernel, ended it.
    assert!(took < Duration::from_secs(30), "{took:?}");
}
