//! The codec between quorum members: one Raft message per frame, framed, versioned and
//! CRC-32C checked.
//!
//! Frame layout (big-endian), [`FRAME_HEADER_BYTES`] of header then the payload:
//!
//! | bytes | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 0..4  | magic `SLRQ`                                                 |
//! | 4     | version, [`FRAME_VERSION`]                                   |
//! | 5..9  | payload length in bytes (u32), at most [`MESSAGE_BYTES_MAX`] |
//! | 9..13 | CRC-32C of bytes 4..9 followed by the payload                |
//! | 13..  | payload: a raft-rs `eraftpb::Message` in protobuf 2 encoding |
//!
//! Why the checks run in this order: raft-rs 0.7 pulls in protobuf 2 (RUSTSEC-2024-0437, see
//! DESIGN.md §9), so a payload reaches the protobuf parser only from a node the transport
//! admitted (its listener's security: TLS with client authentication where untrusted hosts can
//! reach it) and only when the frame's length and CRC hold. The sender need not be a voter
//! this node knows: voter changes (KIP-853) add members that a lagging node learns of only
//! from the log those members help replicate. After parsing, the message must
//! name that sender as `from` and this node as `to`, and be of a type voters exchange (never a
//! local type such as `MsgHup`, never a forwarded proposal: proposals are taken on the leader
//! only). Every error is a [`FrameError`] value; no input panics the decoder.

use crate::runtime::NodeId;
use bytes::{BufMut, Bytes, BytesMut};
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};

/// The magic at the start of every frame ("Sluice Raft Quorum").
pub const FRAME_MAGIC: [u8; 4] = *b"SLRQ";
/// The frame version this codec writes and reads.
pub const FRAME_VERSION: u8 = 1;
/// Bytes before the payload: magic, version, length and CRC.
pub const FRAME_HEADER_BYTES: usize = 13;
/// Largest state-machine snapshot the quorum sends (bytes); a larger one stops the node with
/// [`crate::raft::StopReason::SnapshotTooLarge`].
pub const SNAPSHOT_BYTES_MAX: usize = 64 << 20;
/// Largest payload of one frame (bytes): a snapshot message plus room for its metadata.
pub const MESSAGE_BYTES_MAX: usize = SNAPSHOT_BYTES_MAX + (1 << 20);

const _: () = assert!(MESSAGE_BYTES_MAX > SNAPSHOT_BYTES_MAX);
const _: () = assert!(MESSAGE_BYTES_MAX <= u32::MAX as usize);

/// Why a frame was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The transport's sender is this node itself, or has no raft id (a negative node id):
    /// its bytes are not parsed.
    #[error("a frame from node {sender:?}, which cannot be a peer")]
    NotAPeer { sender: NodeId },
    /// Fewer bytes than a header, or the length field disagrees with the frame's size.
    #[error("a frame of {frame_bytes} bytes is truncated or has trailing bytes (payload length {payload_bytes})")]
    BadLength {
        frame_bytes: usize,
        payload_bytes: u64,
    },
    /// The frame does not start with [`FRAME_MAGIC`].
    #[error("a frame with bad magic {magic:?}")]
    BadMagic { magic: [u8; 4] },
    /// A version this codec does not read.
    #[error("a frame of version {version}, this node reads version {FRAME_VERSION}")]
    UnsupportedVersion { version: u8 },
    /// The payload is larger than [`MESSAGE_BYTES_MAX`].
    #[error("a payload of {payload_bytes} bytes, more than {MESSAGE_BYTES_MAX}")]
    TooLarge { payload_bytes: u64 },
    /// The CRC-32C does not match the frame.
    #[error("a frame whose CRC-32C is {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    /// The payload is not a protobuf Raft message.
    #[error("a payload that is not a Raft message: {reason}")]
    Malformed { reason: String },
    /// The message's `from` is not the transport's sender.
    #[error("a message from raft id {from} arrived from node {sender:?}")]
    WrongSender { sender: NodeId, from: u64 },
    /// The message's `to` is not this node.
    #[error("a message to raft id {to} arrived at raft id {this}")]
    WrongRecipient { to: u64, this: u64 },
    /// A message type voters never send each other.
    #[error("a message of type {msg_type:?}, which voters do not exchange")]
    RefusedType { msg_type: MessageType },
    /// Encoding failed (a message larger than [`MESSAGE_BYTES_MAX`], or protobuf's error).
    #[error("a message could not be encoded: {reason}")]
    Encode { reason: String },
}

/// The raft id of a Kafka node id: `node.id + 1`, since raft-rs reserves 0 and Kafka allows
/// `node.id=0`. `None` for a negative node id.
pub fn raft_id(node: NodeId) -> Option<u64> {
    u64::try_from(node.0).ok().map(|id| id + 1)
}

/// The Kafka node id of a raft id (the inverse of [`raft_id`]); `None` for 0 or an id beyond
/// `i32`.
pub fn node_id(raft_id: u64) -> Option<NodeId> {
    raft_id
        .checked_sub(1)
        .and_then(|id| i32::try_from(id).ok())
        .map(NodeId)
}

fn frame_crc(version_and_length: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(version_and_length), payload)
}

/// Encodes `message` as one frame. Errors: [`FrameError::Encode`].
pub fn encode(message: &Message) -> Result<Bytes, FrameError> {
    let payload = message.write_to_bytes().map_err(|e| FrameError::Encode {
        reason: e.to_string(),
    })?;
    let length = u32::try_from(payload.len())
        .ok()
        .filter(|_| payload.len() <= MESSAGE_BYTES_MAX)
        .ok_or_else(|| FrameError::Encode {
            reason: format!("{} bytes, more than {MESSAGE_BYTES_MAX}", payload.len()),
        })?;
    let mut frame = BytesMut::with_capacity(FRAME_HEADER_BYTES + payload.len());
    frame.put_slice(&FRAME_MAGIC);
    frame.put_u8(FRAME_VERSION);
    frame.put_u32(length);
    let crc = frame_crc(&frame[4..9], &payload);
    frame.put_u32(crc);
    frame.put_slice(&payload);
    Ok(frame.freeze())
}

/// Decodes the frame `sender` sent to `this` (a raft id). Errors: [`FrameError`]; no input
/// panics.
pub fn decode(this: u64, sender: NodeId, frame: &Bytes) -> Result<Message, FrameError> {
    if raft_id(sender).is_none_or(|id| id == this) {
        return Err(FrameError::NotAPeer { sender });
    }
    let payload = checked_payload(frame)?;
    let message =
        Message::parse_from_carllerche_bytes(&payload).map_err(|e| FrameError::Malformed {
            reason: e.to_string(),
        })?;
    if raft_id(sender) != Some(message.from) {
        return Err(FrameError::WrongSender {
            sender,
            from: message.from,
        });
    }
    if message.to != this {
        return Err(FrameError::WrongRecipient {
            to: message.to,
            this,
        });
    }
    refuse_local_types(message)
}

/// The payload of `frame` once its header checks out: magic, version, length within
/// [`MESSAGE_BYTES_MAX`] and equal to the frame's, CRC.
fn checked_payload(frame: &Bytes) -> Result<Bytes, FrameError> {
    let bad_length = |payload_bytes: u64| FrameError::BadLength {
        frame_bytes: frame.len(),
        payload_bytes,
    };
    let header = frame.get(..FRAME_HEADER_BYTES).ok_or(bad_length(0))?;
    let field = |range: std::ops::Range<usize>| -> [u8; 4] {
        let mut out = [0u8; 4];
        out.copy_from_slice(&header[range]);
        out
    };
    let magic = field(0..4);
    if magic != FRAME_MAGIC {
        return Err(FrameError::BadMagic { magic });
    }
    let version = header[4];
    if version != FRAME_VERSION {
        return Err(FrameError::UnsupportedVersion { version });
    }
    let payload_bytes = u64::from(u32::from_be_bytes(field(5..9)));
    if payload_bytes > MESSAGE_BYTES_MAX as u64 {
        return Err(FrameError::TooLarge { payload_bytes });
    }
    if frame.len() as u64 != FRAME_HEADER_BYTES as u64 + payload_bytes {
        return Err(bad_length(payload_bytes));
    }
    let payload = frame.slice(FRAME_HEADER_BYTES..);
    let stored = u32::from_be_bytes(field(9..13));
    let computed = frame_crc(&header[4..9], &payload);
    if stored != computed {
        return Err(FrameError::BadCrc { stored, computed });
    }
    Ok(payload)
}

/// `message` if its type is one voters send each other; raft-rs's local messages (a node's
/// own ticks, proposals, reports) are refused.
fn refuse_local_types(message: Message) -> Result<Message, FrameError> {
    match message.get_msg_type() {
        MessageType::MsgAppend
        | MessageType::MsgAppendResponse
        | MessageType::MsgRequestVote
        | MessageType::MsgRequestVoteResponse
        | MessageType::MsgRequestPreVote
        | MessageType::MsgRequestPreVoteResponse
        | MessageType::MsgSnapshot
        | MessageType::MsgHeartbeat
        | MessageType::MsgHeartbeatResponse
        | MessageType::MsgTimeoutNow => Ok(message),
        msg_type @ (MessageType::MsgHup
        | MessageType::MsgBeat
        | MessageType::MsgPropose
        | MessageType::MsgUnreachable
        | MessageType::MsgSnapStatus
        | MessageType::MsgCheckQuorum
        | MessageType::MsgTransferLeader
        | MessageType::MsgReadIndex
        | MessageType::MsgReadIndexResp) => Err(FrameError::RefusedType { msg_type }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use raft::eraftpb::Entry;

    fn at(this: NodeId) -> u64 {
        raft_id(this).expect("a valid node id")
    }

    fn append(from: NodeId, to: NodeId) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = raft_id(from).expect("a valid node id");
        m.to = raft_id(to).expect("a valid node id");
        m.term = 7;
        m.index = 41;
        m.log_term = 6;
        m.commit = 40;
        m.entries.push(Entry {
            index: 42,
            term: 7,
            data: Bytes::from_static(b"an entry"),
            ..Entry::default()
        });
        m
    }

    #[test]
    fn node_ids_map_to_nonzero_raft_ids_and_back() {
        assert_eq!(raft_id(NodeId(0)), Some(1));
        assert_eq!(raft_id(NodeId(-1)), None);
        assert_eq!(node_id(1), Some(NodeId(0)));
        assert_eq!(node_id(0), None);
        assert_eq!(node_id(u64::from(u32::MAX) + 2), None);
        assert_eq!(
            node_id(raft_id(NodeId(i32::MAX)).expect("valid")),
            Some(NodeId(i32::MAX))
        );
    }

    #[test]
    fn a_message_round_trips() {
        let m = append(NodeId(0), NodeId(2));
        let frame = encode(&m).expect("encodes");
        assert_eq!(decode(at(NodeId(2)), NodeId(0), &frame), Ok(m));
    }

    #[test]
    fn every_header_field_is_checked() {
        let frame = encode(&append(NodeId(0), NodeId(1))).expect("encodes");
        let v = at(NodeId(1));
        let with = |i: usize, b: u8| {
            let mut f = frame.to_vec();
            f[i] ^= b;
            Bytes::from(f)
        };
        assert!(matches!(
            decode(v, NodeId(0), &with(0, 1)),
            Err(FrameError::BadMagic { .. })
        ));
        assert_eq!(
            decode(v, NodeId(0), &with(4, 3)),
            Err(FrameError::UnsupportedVersion { version: 2 })
        );
        assert!(matches!(
            decode(v, NodeId(0), &with(8, 1)),
            Err(FrameError::BadLength { .. })
        ));
        assert!(matches!(
            decode(v, NodeId(0), &with(5, 0x80)),
            Err(FrameError::TooLarge { .. })
        ));
        assert!(matches!(
            decode(v, NodeId(0), &with(frame.len() - 1, 1)),
            Err(FrameError::BadCrc { .. })
        ));
        assert!(matches!(
            decode(v, NodeId(0), &frame.slice(..frame.len() - 1)),
            Err(FrameError::BadLength { .. })
        ));
        assert!(matches!(
            decode(v, NodeId(0), &frame.slice(..5)),
            Err(FrameError::BadLength { .. })
        ));
    }

    #[test]
    fn only_peers_naming_themselves_reach_this_node() {
        let v = at(NodeId(1));
        let frame = encode(&append(NodeId(0), NodeId(1))).expect("encodes");
        assert_eq!(
            decode(v, NodeId(1), &frame),
            Err(FrameError::NotAPeer { sender: NodeId(1) })
        );
        assert_eq!(
            decode(v, NodeId(-1), &frame),
            Err(FrameError::NotAPeer { sender: NodeId(-1) })
        );
        assert_eq!(
            decode(v, NodeId(2), &frame),
            Err(FrameError::WrongSender {
                sender: NodeId(2),
                from: 1
            })
        );
        let elsewhere = encode(&append(NodeId(0), NodeId(2))).expect("encodes");
        assert_eq!(
            decode(v, NodeId(0), &elsewhere),
            Err(FrameError::WrongRecipient { to: 3, this: 2 })
        );
        let mut propose = append(NodeId(0), NodeId(1));
        propose.set_msg_type(MessageType::MsgPropose);
        let frame = encode(&propose).expect("encodes");
        assert_eq!(
            decode(v, NodeId(0), &frame),
            Err(FrameError::RefusedType {
                msg_type: MessageType::MsgPropose
            })
        );
    }

    /// Frames `payload` with a valid header and CRC, so the protobuf parser sees it.
    fn framed(payload: &[u8]) -> Bytes {
        let mut frame = BytesMut::new();
        frame.put_slice(&FRAME_MAGIC);
        frame.put_u8(FRAME_VERSION);
        frame.put_u32(u32::try_from(payload.len()).expect("a small payload"));
        let crc = frame_crc(&frame[4..9], payload);
        frame.put_u32(crc);
        frame.put_slice(payload);
        frame.freeze()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Random bytes as a frame: an error or a message, never a panic.
        #[test]
        fn random_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(at(NodeId(1)), NodeId(0), &Bytes::from(bytes));
        }

        /// Random payloads behind a valid header and CRC reach the protobuf parser: an error
        /// or a message, never a panic.
        #[test]
        fn random_payloads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(at(NodeId(1)), NodeId(0), &framed(&bytes));
        }

        /// A valid frame with one byte flipped is refused.
        #[test]
        fn a_flipped_byte_is_refused(i in 0usize..64, bit in 0u8..8) {
            let frame = encode(&append(NodeId(0), NodeId(1))).expect("encodes");
            let i = i % frame.len();
            let mut f = frame.to_vec();
            f[i] ^= 1 << bit;
            prop_assert!(decode(at(NodeId(1)), NodeId(0), &Bytes::from(f)).is_err());
        }
    }
}
