//! A user-space delay line: tc netem does not exist on these kernels, so
//! latency is added here. Bytes written to the returned stream reach the
//! socket `delay` later, and bytes from the socket reach the reader `delay`
//! later, in order. Memory is bounded: a full line stops reading, which
//! pushes back on the sender like a full socket would.

use bytes::Bytes;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Bytes read per chunk, and chunks in flight per direction: at most
/// 16 MiB on the line, enough for 20 MB/s at a 400 ms round trip.
const CHUNK: usize = 16 * 1024;
const IN_FLIGHT: usize = 1024;

/// Wraps `sock` in a delay line of `delay` each way; returns the stream the
/// endpoint should use instead of the socket.
pub fn delay_line(sock: TcpStream, delay: Duration) -> DuplexStream {
    let (near, far) = tokio::io::duplex(4 * CHUNK);
    let (far_r, far_w) = tokio::io::split(far);
    let (sock_r, sock_w) = sock.into_split();
    tokio::spawn(pump(far_r, sock_w, delay));
    tokio::spawn(pump(sock_r, far_w, delay));
    near
}

/// Moves bytes from `src` to `dst`, each chunk held until `delay` after it was read.
async fn pump<R, W>(mut src: R, mut dst: W, delay: Duration)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Option<Bytes>)>(IN_FLIGHT);
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match src.read(&mut buf).await {
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            };
            let due = Instant::now() + delay;
            let chunk = (n > 0).then(|| Bytes::copy_from_slice(&buf[..n]));
            let end = chunk.is_none();
            // A full line waits here: that is the backpressure.
            if tx.send((due, chunk)).await.is_err() || end {
                return;
            }
        }
    });
    while let Some((due, chunk)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        match chunk {
            Some(b) => {
                if dst.write_all(&b).await.is_err() {
                    break;
                }
            }
            None => {
                let _ = dst.shutdown().await;
                break;
            }
        }
    }
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_arrive_in_order_after_the_delay_both_ways() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let echo = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 100_000];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let sock = TcpStream::connect(addr).await.unwrap();
        let mut line = delay_line(sock, Duration::from_millis(40));
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let t0 = Instant::now();
        let (mut r, mut w) = tokio::io::split(&mut line);
        let send = async { w.write_all(&data).await.unwrap() };
        let recv = async {
            let mut back = vec![0u8; data.len()];
            r.read_exact(&mut back).await.unwrap();
            back
        };
        let ((), back) = tokio::join!(send, recv);
        let rtt = t0.elapsed();
        assert_eq!(back, data, "order and content kept");
        assert!(
            rtt >= Duration::from_millis(80),
            "round trip {rtt:?} includes both delays"
        );
        echo.await.unwrap();
    }
}
