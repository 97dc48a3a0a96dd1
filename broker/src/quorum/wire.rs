//! The byte format of one connection between two voters of the controller quorum: a hello,
//! then length-prefixed frames, all from the connecting voter to the accepting one (each
//! direction has its own connection).
//!
//! Hello, [`HELLO_BYTES`] bytes (big-endian):
//!
//! | bytes | field                                  |
//! |-------|----------------------------------------|
//! | 0..4  | magic `SLQC` ([`HELLO_MAGIC`])         |
//! | 4     | version, [`HELLO_VERSION`]             |
//! | 5..9  | the connecting voter's `node.id` (i32) |
//!
//! Frame: a u32 length in bytes, 1..=[`FRAME_BYTES_MAX`], then that many bytes (a voter
//! message as `replication::raft::codec` encodes it: its header and a payload of at most
//! [`MESSAGE_BYTES_MAX`]; this module does not look inside).
//!
//! Bytes from the network never panic here: every defect is a [`WireError`], after which the
//! connection is closed.

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncReadExt};
use replication::raft::codec::{FRAME_HEADER_BYTES, MESSAGE_BYTES_MAX};
use replication::runtime::NodeId;

/// The magic a connection opens with ("Sluice Quorum Connection").
pub const HELLO_MAGIC: [u8; 4] = *b"SLQC";
/// The hello version this module writes and reads.
pub const HELLO_VERSION: u8 = 1;
/// Bytes of a hello.
pub const HELLO_BYTES: usize = 9;
/// Bytes of a frame's length prefix.
pub const FRAME_LENGTH_BYTES: usize = 4;

/// Largest frame, in bytes: the codec's header and its largest payload.
pub const FRAME_BYTES_MAX: usize = FRAME_HEADER_BYTES + MESSAGE_BYTES_MAX;

const _: () = assert!(FRAME_BYTES_MAX <= u32::MAX as usize);

/// Why a connection's bytes were refused (the connection is then closed).
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The hello does not start with [`HELLO_MAGIC`]: not a voter of this quorum.
    #[error("the hello's magic is {magic:?}, not {HELLO_MAGIC:?}")]
    BadMagic {
        /// The magic read.
        magic: [u8; 4],
    },
    /// The hello's version is not [`HELLO_VERSION`].
    #[error("hello version {version}, this node speaks {HELLO_VERSION}")]
    BadVersion {
        /// The version read.
        version: u8,
    },
    /// A frame length outside 1..=[`FRAME_BYTES_MAX`].
    #[error("a frame of {frame_bytes} bytes, outside 1..={FRAME_BYTES_MAX}")]
    FrameLength {
        /// The length read.
        frame_bytes: u64,
    },
    /// The connection ended or failed mid-hello or mid-frame.
    #[error("reading the connection failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The hello naming `node`.
pub fn encode_hello(node: NodeId) -> [u8; HELLO_BYTES] {
    let mut out = [0; HELLO_BYTES];
    out[0..4].copy_from_slice(&HELLO_MAGIC);
    out[4] = HELLO_VERSION;
    out[5..9].copy_from_slice(&node.0.to_be_bytes());
    out
}

/// The node a hello names. Errors: [`WireError::BadMagic`], [`WireError::BadVersion`].
pub fn decode_hello(hello: &[u8; HELLO_BYTES]) -> Result<NodeId, WireError> {
    let magic = [hello[0], hello[1], hello[2], hello[3]];
    if magic != HELLO_MAGIC {
        return Err(WireError::BadMagic { magic });
    }
    if hello[4] != HELLO_VERSION {
        return Err(WireError::BadVersion { version: hello[4] });
    }
    Ok(NodeId(i32::from_be_bytes([
        hello[5], hello[6], hello[7], hello[8],
    ])))
}

/// The length prefix of a frame of `frame_bytes` bytes. Errors: [`WireError::FrameLength`]
/// outside 1..=[`FRAME_BYTES_MAX`].
pub fn encode_frame_length(frame_bytes: usize) -> Result<[u8; FRAME_LENGTH_BYTES], WireError> {
    let invalid = || WireError::FrameLength {
        frame_bytes: frame_bytes as u64,
    };
    if frame_bytes == 0 || frame_bytes > FRAME_BYTES_MAX {
        return Err(invalid());
    }
    let length = u32::try_from(frame_bytes).map_err(|_| invalid())?;
    Ok(length.to_be_bytes())
}

/// The frame length a prefix announces. Errors: [`WireError::FrameLength`].
pub fn decode_frame_length(prefix: [u8; FRAME_LENGTH_BYTES]) -> Result<usize, WireError> {
    let length = u32::from_be_bytes(prefix);
    let invalid = WireError::FrameLength {
        frame_bytes: u64::from(length),
    };
    match usize::try_from(length) {
        Ok(n) if n > 0 && n <= FRAME_BYTES_MAX => Ok(n),
        _ => Err(invalid),
    }
}

/// Reads one frame. `Ok(None)`: the connection ended cleanly between frames. Errors:
/// [`WireError::FrameLength`], or [`WireError::Io`] (including an end mid-frame).
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Option<Bytes>, WireError> {
    let mut prefix = [0; FRAME_LENGTH_BYTES];
    // The first byte alone, to tell a clean end (no byte) from a torn prefix.
    if reader.read(&mut prefix[..1]).await? == 0 {
        return Ok(None);
    }
    reader.read_exact(&mut prefix[1..]).await?;
    let length = decode_frame_length(prefix)?;
    let mut frame = vec![0; length];
    reader.read_exact(&mut frame).await?;
    Ok(Some(Bytes::from(frame)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;
    use futures_lite::io::Cursor;

    #[test]
    fn hello_round_trips_and_refuses_strangers() {
        for node in [NodeId(0), NodeId(7), NodeId(i32::MAX), NodeId(-1)] {
            assert_eq!(decode_hello(&encode_hello(node)).expect("own hello"), node);
        }
        let mut bad = encode_hello(NodeId(1));
        bad[0] = b'G'; // e.g. "GET / HTTP/1.1"
        assert!(matches!(
            decode_hello(&bad),
            Err(WireError::BadMagic { .. })
        ));
        let mut bad = encode_hello(NodeId(1));
        bad[4] = HELLO_VERSION + 1;
        assert!(matches!(
            decode_hello(&bad),
            Err(WireError::BadVersion { .. })
        ));
        // A Kafka request (size, api key, ...) is no hello.
        let kafka = [0, 0, 0, 20, 0, 18, 0, 3, 0];
        assert!(decode_hello(&kafka).is_err());
    }

    #[test]
    fn frames_round_trip() {
        let mut stream = Vec::new();
        for payload in [&b"a"[..], &[7; 1000][..]] {
            stream.extend_from_slice(&encode_frame_length(payload.len()).expect("in bounds"));
            stream.extend_from_slice(payload);
        }
        let mut reader = Cursor::new(stream);
        let first = block_on(read_frame(&mut reader)).expect("valid");
        assert_eq!(first.as_deref(), Some(&b"a"[..]));
        let second = block_on(read_frame(&mut reader)).expect("valid");
        assert_eq!(second.map(|f| f.len()), Some(1000));
        assert!(block_on(read_frame(&mut reader))
            .expect("clean end")
            .is_none());
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert!(encode_frame_length(0).is_err());
        assert!(encode_frame_length(FRAME_BYTES_MAX + 1).is_err());
        assert_eq!(
            decode_frame_length(encode_frame_length(FRAME_BYTES_MAX).expect("max")).ok(),
            Some(FRAME_BYTES_MAX)
        );
        let too_long = u32::try_from(FRAME_BYTES_MAX + 1).expect("fits u32");
        for (what, bytes) in [
            ("zero length", vec![0, 0, 0, 0]),
            ("over the bound", too_long.to_be_bytes().to_vec()),
            ("u32::MAX", vec![0xff; 4]),
            ("torn prefix", vec![0, 0]),
            ("torn payload", vec![0, 0, 0, 5, 1, 2]),
        ] {
            let mut reader = Cursor::new(bytes);
            assert!(block_on(read_frame(&mut reader)).is_err(), "{what}");
        }
        // Seeded random garbage: an error or a frame, never a panic (nor a huge allocation:
        // the length is checked before the buffer is made).
        let mut state: u64 = 14;
        let mut next = move || {
            // xorshift64: enough to vary the garbage, reproducible.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..1000 {
            let n = next() % 64;
            let garbage: Vec<u8> = (0..n).map(|_| next().to_le_bytes()[0]).collect();
            if let Ok(hello) =
                <[u8; HELLO_BYTES]>::try_from(garbage.get(..HELLO_BYTES).unwrap_or(&[]))
            {
                let _ = decode_hello(&hello);
            }
            let mut reader = Cursor::new(garbage.clone());
            while let Ok(Some(_)) = block_on(read_frame(&mut reader)) {}
        }
    }
}
