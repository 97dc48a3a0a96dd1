//! One client connection of the floor, shaped as Sluice's: the read side splits frames off
//! the socket and starts a task per request; the write side takes those tasks in request
//! order and writes each answer. At most [`IN_FLIGHT_REQUESTS_MAX`] requests are pending.

use crate::api;
use crate::state::Floor;
use bytes::{Buf, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use glommio::task::JoinHandle;
use std::rc::Rc;

/// Requests decoded but not yet answered, per connection.
const IN_FLIGHT_REQUESTS_MAX: usize = 16;
/// Bytes asked of the socket per read call.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Largest request frame accepted (Kafka's `socket.request.max.bytes` default), in bytes.
const FRAME_MAX_BYTES: usize = 104_857_600;

type Pending = JoinHandle<Result<Option<Bytes>, api::ApiError>>;

/// Serves `stream` until the client closes it or sends something the floor does not serve.
pub async fn serve(floor: Rc<Floor>, stream: TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        eprintln!("sluice-floor: TCP_NODELAY: {e}");
    }
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (sender, receiver) = local_channel::new_bounded::<Pending>(IN_FLIGHT_REQUESTS_MAX);
    let write_side = glommio::spawn_local(async move {
        while let Some(pending) = receiver.recv().await {
            let answer = match pending.await {
                Some(Ok(answer)) => answer,
                Some(Err(e)) => {
                    eprintln!("sluice-floor: closing a connection: {e}");
                    return;
                }
                None => return,
            };
            if let Some(bytes) = answer {
                if writer.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        }
    });
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    'read: loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(frame) = next_frame(&mut buf) {
            let Ok(frame) = frame else {
                break 'read;
            };
            let floor = floor.clone();
            let task =
                glommio::spawn_local(async move { api::answer(&floor, frame).await }).detach();
            if sender.send(task).await.is_err() {
                break 'read;
            }
        }
    }
    drop(sender);
    write_side.await;
}

/// Splits one frame (size prefix removed) off `buf`; `None` until one is complete, an error
/// for a size Kafka rejects (the stream cannot be resynchronised).
fn next_frame(buf: &mut BytesMut) -> Option<Result<Bytes, ()>> {
    let prefix = buf.first_chunk::<4>()?;
    let size = i32::from_be_bytes(*prefix);
    let Some(size) = usize::try_from(size)
        .ok()
        .filter(|&s| s > 0 && s <= FRAME_MAX_BYTES)
    else {
        return Some(Err(()));
    };
    if buf.len() < 4 + size {
        return None;
    }
    buf.advance(4);
    Some(Ok(buf.split_to(size).freeze()))
}
