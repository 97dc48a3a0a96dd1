//! Request framing: every Kafka request is a 4-byte big-endian signed size followed by that many
//! bytes (Kafka protocol guide, "Common Request and Response Structure").
//!
//! [`decode_frame`] splits one complete frame off the front of a connection's read buffer
//! without copying it. Sizes that Kafka's `NetworkReceive` rejects (negative, above
//! `socket.request.max.bytes`) and size 0 (no room for a request header) are errors after which
//! the connection must be closed: the stream cannot be resynchronised.

use bytes::{Bytes, BytesMut};

use crate::NetError;

/// Length of the frame size prefix, in bytes.
pub const FRAME_SIZE_PREFIX_BYTES: usize = 4;

/// Kafka's default `socket.request.max.bytes` (100 MiB), in bytes.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: usize = 104_857_600;

/// Outcome of [`decode_frame`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameStatus {
    /// One complete request: the bytes after the size prefix (header and body), sharing the read
    /// buffer's allocation.
    Frame(Bytes),
    /// The buffer holds no complete frame yet. `needed_bytes` is how many more bytes must be read
    /// before the next call can return a frame (at least 1). Once the prefix has been read and
    /// validated this is exact, so the caller may reserve it; it never exceeds
    /// `socket_request_max_bytes + 4`.
    NeedBytes(usize),
}

/// Splits one complete request frame off the front of `buf`.
///
/// On [`FrameStatus::Frame`] the prefix and the frame are removed from `buf`; otherwise `buf` is
/// unchanged. `socket_request_max_bytes` is Kafka's `socket.request.max.bytes` (default
/// [`SOCKET_REQUEST_MAX_BYTES_DEFAULT`]): the largest frame accepted, in bytes, not counting the
/// 4-byte prefix.
///
/// # Errors
/// [`NetError::FrameSizeNegative`], [`NetError::FrameSizeZero`] or [`NetError::FrameTooLarge`]
/// as soon as the 4-byte prefix is readable; the connection must then be closed.
pub fn decode_frame(
    buf: &mut BytesMut,
    socket_request_max_bytes: usize,
) -> Result<FrameStatus, NetError> {
    let Some(prefix) = buf.first_chunk::<FRAME_SIZE_PREFIX_BYTES>() else {
        return Ok(FrameStatus::NeedBytes(FRAME_SIZE_PREFIX_BYTES - buf.len()));
    };
    let size = i32::from_be_bytes(*prefix);
    let frame_bytes = usize::try_from(size).map_err(|_| NetError::FrameSizeNegative { size })?;
    if frame_bytes == 0 {
        return Err(NetError::FrameSizeZero);
    }
    if frame_bytes > socket_request_max_bytes {
        return Err(NetError::FrameTooLarge {
            size: frame_bytes,
            socket_request_max_bytes,
        });
    }
    // Cannot overflow: frame_bytes <= i32::MAX.
    let total_bytes = FRAME_SIZE_PREFIX_BYTES + frame_bytes;
    if buf.len() < total_bytes {
        return Ok(FrameStatus::NeedBytes(total_bytes - buf.len()));
    }
    let mut frame = buf.split_to(total_bytes);
    let _prefix = frame.split_to(FRAME_SIZE_PREFIX_BYTES);
    assert_eq!(frame.len(), frame_bytes, "frame split at the wrong length");
    Ok(FrameStatus::Frame(frame.freeze()))
}
