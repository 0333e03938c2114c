//! A user-space link: tc netem does not exist on these kernels, so latency
//! and a bandwidth limit are added here. Bytes written to the returned
//! stream reach the socket `delay` later (and no faster than `rate`), and
//! bytes from the socket reach the reader the same way. Memory is bounded:
//! a full line stops reading, which pushes back on the sender exactly like a
//! full socket buffer, so the sender's tap records `socket_blocked`.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

/// Bytes read per chunk.
const CHUNK: usize = 16 * 1024;
/// What a chunk on the line costs beyond its bytes (about its allocation,
/// permit and place in the channel), counted against the line's capacity,
/// so that the line's memory stays about its capacity: counted in bytes
/// alone, a peer writing 1-byte segments through a 5 s delay held 43 MB
/// for 0.95 MB of data.
const CHUNK_COST: usize = 128;

/// How the link behaves in each direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// One-way delay.
    pub delay: Duration,
    /// Bytes per second, `None` for unlimited.
    pub rate: Option<u64>,
}

impl Shape {
    pub fn is_transparent(&self) -> bool {
        self.delay.is_zero() && self.rate.is_none()
    }

    /// Bytes the line may hold per direction: the bandwidth-delay product
    /// (at least 64 KiB) when rate-limited, 16 MiB otherwise.
    fn capacity(&self) -> usize {
        match self.rate {
            Some(r) => ((r as f64 * self.delay.as_secs_f64()) as usize).max(64 * 1024),
            None => 16 << 20,
        }
    }
}

/// Wraps `sock` in a link shaped by `shape` in both directions; returns the
/// stream the endpoint should use instead of the socket.
pub fn shaped(sock: TcpStream, shape: Shape) -> DuplexStream {
    let (sock_r, sock_w) = sock.into_split();
    line(sock_r, sock_w, shape)
}

/// [`shaped`] for a Unix domain socket (`client --connect unix:PATH`).
pub fn shaped_unix(sock: tokio::net::UnixStream, shape: Shape) -> DuplexStream {
    let (sock_r, sock_w) = sock.into_split();
    line(sock_r, sock_w, shape)
}

fn line<R, W>(sock_r: R, sock_w: W, shape: Shape) -> DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (near, far) = tokio::io::duplex(CHUNK);
    let (far_r, far_w) = tokio::io::split(far);
    tokio::spawn(pump(far_r, sock_w, shape));
    tokio::spawn(pump(sock_r, far_w, shape));
    near
}

/// Moves bytes from `src` to `dst`: each chunk is held until `delay` after
/// it was read, and chunks leave no faster than `rate`.
async fn pump<R, W>(mut src: R, mut dst: W, shape: Shape)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let cap = shape.capacity();
    let room = Arc::new(Semaphore::new(cap + CHUNK_COST));
    let (tx, mut rx) =
        mpsc::unbounded_channel::<(Instant, Option<(Bytes, tokio::sync::OwnedSemaphorePermit)>)>();
    // The channel itself is unbounded, but every chunk in it holds permits
    // for its bytes and its own cost: at most `cap` bytes are ever on the
    // line, in at most `cap` / CHUNK_COST chunks however small the reads.
    let reader_room = room.clone();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK.min(cap)];
        loop {
            // A full line waits here before reading: that is the backpressure.
            let Ok(permit) = reader_room
                .clone()
                .acquire_many_owned((buf.len() + CHUNK_COST) as u32)
                .await
            else {
                return;
            };
            let n = match src.read(&mut buf).await {
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            };
            let due = Instant::now() + shape.delay;
            if n == 0 {
                let _ = tx.send((due, None));
                return;
            }
            let mut permit = permit;
            let spare = permit.split(buf.len() - n);
            drop(spare);
            if tx
                .send((due, Some((Bytes::copy_from_slice(&buf[..n]), permit))))
                .is_err()
            {
                return;
            }
        }
    });
    let mut next_free = Instant::now();
    let mut waker = Waker::default();
    while let Some((due, chunk)) = rx.recv().await {
        waker.sleep_until(due.max(next_free)).await;
        match chunk {
            Some((b, permit)) => {
                if dst.write_all(&b).await.is_err() {
                    break;
                }
                if let Some(rate) = shape.rate {
                    // Serialisation time of this chunk at the link rate.
                    let busy = Duration::from_secs_f64(b.len() as f64 / rate as f64);
                    next_free = Instant::now().max(next_free) + busy;
                }
                drop(permit);
            }
            None => {
                let _ = dst.shutdown().await;
                break;
            }
        }
    }
    reader.abort();
}

/// Wakes a pump at a chunk's due time, precisely. tokio's timer has a 1 ms
/// tick and rounds up, which made every delayed chunk 1.1–1.4 ms late. The
/// coarse part of the wait uses the timer (it wakes at most ~1 ms late,
/// still early enough); the last stretch is a thread sleep on the blocking
/// pool (no runtime worker is held), aimed early by the lateness measured
/// on previous chunks (a moving average of wake-up overshoot, bounded).
#[derive(Default)]
struct Waker {
    /// Average overshoot of the last stretch, ns.
    overshoot_ns: f64,
}

impl Waker {
    const COARSE_SLACK: Duration = Duration::from_micros(1500);
    const MAX_AIM_EARLY: Duration = Duration::from_micros(500);

    async fn sleep_until(&mut self, due: Instant) {
        let now = Instant::now();
        if due <= now {
            return;
        }
        if due - now > Self::COARSE_SLACK {
            tokio::time::sleep_until(due - Self::COARSE_SLACK).await;
        }
        let early = Duration::from_nanos(self.overshoot_ns as u64).min(Self::MAX_AIM_EARLY);
        let aim = due.checked_sub(early).unwrap_or(due);
        let rest = aim.saturating_duration_since(Instant::now());
        if rest.is_zero() {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)).await;
        let late = Instant::now().saturating_duration_since(aim).as_nanos() as f64;
        self.overshoot_ns = 0.9 * self.overshoot_ns + 0.1 * late;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link is transparent (no line in the way) only with neither a delay
    /// nor a rate; a line holds the bandwidth-delay product, at least
    /// 64 KiB, or 16 MiB without a rate.
    #[test]
    fn a_shape_says_if_it_is_a_line_and_how_much_it_holds() {
        let shape = |ms: u64, rate: Option<u64>| Shape {
            delay: Duration::from_millis(ms),
            rate,
        };
        assert!(shape(0, None).is_transparent());
        assert!(!shape(5, None).is_transparent());
        assert!(!shape(0, Some(1_000)).is_transparent());
        assert!(!shape(5, Some(1_000)).is_transparent());
        assert_eq!(shape(5, None).capacity(), 16 << 20);
        // 10 MB/s for 100 ms: 1 MB on the line.
        assert_eq!(shape(100, Some(10_000_000)).capacity(), 1_000_000);
        assert_eq!(shape(10, Some(1_000_000)).capacity(), 64 * 1024);
    }

    async fn echo_once(len: usize) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; len];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        (addr, task)
    }

    async fn round_trip(shape: Shape, len: usize) -> Duration {
        let (addr, echo) = echo_once(len).await;
        let sock = TcpStream::connect(addr).await.unwrap();
        let mut line = shaped(sock, shape);
        let data: Vec<u8> = (0..len as u32).map(|i| (i % 251) as u8).collect();
        let t0 = Instant::now();
        let (mut r, mut w) = tokio::io::split(&mut line);
        let send = async { w.write_all(&data).await.unwrap() };
        let recv = async {
            let mut back = vec![0u8; data.len()];
            r.read_exact(&mut back).await.unwrap();
            back
        };
        let ((), back) = tokio::join!(send, recv);
        assert_eq!(back, data, "order and content kept");
        echo.await.unwrap();
        t0.elapsed()
    }

    #[tokio::test]
    async fn bytes_arrive_in_order_after_the_delay_both_ways() {
        let shape = Shape {
            delay: Duration::from_millis(40),
            rate: None,
        };
        let rtt = round_trip(shape, 100_000).await;
        assert!(
            rtt >= Duration::from_millis(80),
            "round trip {rtt:?} includes both delays"
        );
    }

    #[tokio::test]
    async fn a_rate_limit_paces_the_bytes() {
        // 200 KB each way at 1 MB/s: at least 0.2 s per direction.
        let shape = Shape {
            delay: Duration::ZERO,
            rate: Some(1_000_000),
        };
        let took = round_trip(shape, 200_000).await;
        assert!(took >= Duration::from_millis(350), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    /// A source that yields `.1` bytes per read, counting its reads.
    struct Dribble(Arc<std::sync::atomic::AtomicUsize>, usize);

    impl AsyncRead for Dribble {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            buf.put_slice(&vec![7; self.1.min(buf.remaining())]);
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// One-byte reads fill the line by their number, not only their bytes:
    /// a 64 KiB line (1 s at 64 KB/s) takes a few hundred of them, where
    /// counted in bytes alone it took about 49,000 (each an allocation and
    /// a channel entry: 43 MB for 0.95 MB of data through a 5 s delay).
    #[tokio::test]
    async fn tiny_reads_fill_the_line_by_their_number() {
        let shape = Shape {
            delay: Duration::from_secs(1),
            rate: Some(64_000),
        };
        assert_eq!(shape.capacity(), 64 * 1024);
        let reads_of = |size: usize| {
            let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let pump = tokio::spawn(pump(Dribble(reads.clone(), size), tokio::io::sink(), shape));
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                pump.abort();
                reads.load(std::sync::atomic::Ordering::Relaxed)
            }
        };
        // (64 KiB + 128) / 129 ≈ 508 at most, fewer while a read's 16 KiB
        // is reserved.
        let n = reads_of(1).await;
        assert!(n < 1_000, "{n} one-byte chunks on a 64 KiB line");
        assert!(n > 100, "{n}");
        // 1,000-byte reads: each chunk gives back the permits of the buffer
        // it did not fill. A read starts while a whole buffer's permits
        // (16,512) are free: (65,664 − 16,512) / 1,128 ≈ 44 chunks (holding
        // a whole buffer's each, 3 did).
        let n = reads_of(1_000).await;
        assert!(
            (40..=50).contains(&n),
            "{n} 1,000-byte chunks on a 64 KiB line"
        );
    }
}
