//! Writing responses to a client socket: every chunk of every response that is ready goes out
//! in one vectored `sendmsg` (header and record batches side by side in the iovec, no copy of
//! record bytes), instead of one `send` per chunk as the runtime's `AsyncWrite` does (DESIGN.md §8:
//! the runtime has no vectored write). Only when the socket's send buffer is full does the rest go
//! through the runtime's writer, which waits for the socket to drain.

use bytes::Bytes;
use futures_lite::{AsyncWrite, AsyncWriteExt};
use std::io;
use std::os::fd::RawFd;

/// Most chunks one `sendmsg` carries (an iovec array on the stack; Linux allows 1024).
const IOVECS_PER_SEND_MAX: usize = 64;

/// Writes `chunks` in order to the socket `fd`, `writer` being that same socket's write half
/// (used only while the send buffer is full). The caller is the socket's only writer and has
/// no write of `writer` in flight. Errors: the socket's (the connection is then closed).
pub async fn send_chunks<W: AsyncWrite + Unpin>(
    fd: RawFd,
    writer: &mut W,
    chunks: &[Bytes],
) -> io::Result<()> {
    let (mut index, mut offset) = (0, 0);
    while index < chunks.len() {
        let window = &chunks[index..chunks.len().min(index + IOVECS_PER_SEND_MAX)];
        let asked: usize = window.iter().map(Bytes::len).sum::<usize>() - offset;
        let mut sent = sendmsg_now(fd, window, offset)?;
        let complete = sent == asked;
        // Skip what went out: whole chunks, then a part of the next.
        while index < chunks.len() && sent >= chunks[index].len() - offset {
            sent -= chunks[index].len() - offset;
            index += 1;
            offset = 0;
        }
        offset += sent;
        if !complete && index < chunks.len() {
            // The send buffer is full: the runtime waits until the socket can take this chunk.
            writer.write_all(&chunks[index][offset..]).await?;
            index += 1;
            offset = 0;
        }
    }
    Ok(())
}

/// One non-blocking `sendmsg` of the first [`IOVECS_PER_SEND_MAX`] of `chunks` (the first from
/// byte `offset`): the bytes it took, 0 when the send buffer is full.
fn sendmsg_now(fd: RawFd, chunks: &[Bytes], offset: usize) -> io::Result<usize> {
    let mut iovecs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; IOVECS_PER_SEND_MAX];
    let count = chunks.len().min(IOVECS_PER_SEND_MAX);
    for (i, (iovec, chunk)) in iovecs.iter_mut().zip(chunks).enumerate() {
        let part = if i == 0 { &chunk[offset..] } else { &chunk[..] };
        iovec.iov_base = part.as_ptr() as *mut libc::c_void;
        iovec.iov_len = part.len();
    }
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iovecs.as_mut_ptr();
    message.msg_iovlen = count;
    loop {
        // SAFETY: every iovec points into a `Bytes` of `chunks`, alive and unchanged for the
        // call; the kernel only reads them. MSG_NOSIGNAL: a closed peer is an error, not a
        // SIGPIPE.
        let sent = unsafe { libc::sendmsg(fd, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(usize::try_from(sent).unwrap_or(0));
        }
        let error = io::Error::last_os_error();
        match error.kind() {
            io::ErrorKind::WouldBlock => return Ok(0),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    /// More chunks than one `sendmsg` carries, more bytes than the socket buffers hold, a
    /// reader that lags behind (so the send buffer fills and the runtime's writer takes over), and
    /// empty chunks: the peer must read exactly the chunks' bytes, in order.
    #[test]
    fn chunks_arrive_whole_and_in_order_through_a_full_send_buffer() {
        let chunks: Vec<Bytes> = (0..300u32)
            .map(|i| {
                let len = if i % 7 == 0 {
                    0
                } else {
                    (i as usize * 997) % 20_000
                };
                Bytes::from((0..len).map(|b| (b as u32 ^ i) as u8).collect::<Vec<u8>>())
            })
            .collect();
        let expected: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let total = expected.len();
        let reader = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("accept");
            let mut got = Vec::with_capacity(total);
            let mut buf = [0u8; 4096];
            while got.len() < total {
                std::thread::sleep(std::time::Duration::from_micros(50));
                let n = socket.read(&mut buf).expect("read");
                assert!(n > 0, "connection closed early");
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        crate::rt::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let stream = crate::rt::TcpStream::connect(addr).await.expect("connect");
                let fd = stream.as_raw_fd();
                let small: libc::c_int = 4096;
                // SAFETY: setsockopt reads one c_int from a live local.
                let set = unsafe {
                    libc::setsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        libc::SO_SNDBUF,
                        (&small as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                assert_eq!(set, 0, "SO_SNDBUF");
                let (_, mut writer) = futures_lite::io::split(stream);
                send_chunks(fd, &mut writer, &chunks).await.expect("send");
            })
            .expect("executor")
            .join()
            .expect("join");
        assert!(reader.join().expect("reader") == expected);
    }
}
