//! Controller requests between brokers: a broker that is not the active controller sends its
//! metadata changes, producer-id block requests and heartbeats to the one that is (Kafka
//! forwards admin requests in an Envelope since KIP-590 and sends BrokerRegistration,
//! BrokerHeartbeat and AllocateProducerIds to the controller, KIP-631; Sluice carries its own
//! typed requests instead, on the same Kafka listener).
//!
//! Wire form, inside a Kafka-style size-prefixed frame: request `api_key i16 =
//! FORWARD_API_KEY | correlation_id i32 | JSON ControllerRequest`; response `correlation_id
//! i32 | JSON Result<ControllerReply, ControllerError>`. The key lies outside Kafka's range,
//! so a client never sends it by accident and it is not advertised in ApiVersions. A frame
//! that does not decode closes its connection, as any malformed request does.
//!
//! The connection goes to the active controller's inter-broker listener, secured as that
//! listener asks (`crate::peer`: TLS, SASL). One connection per request (heartbeats come every `broker.heartbeat.interval.ms`, changes
//! are rare), bounded by [`FORWARD_TIMEOUT`].

use crate::peer::PeerSecurity;
use bytes::{BufMut, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use replication::metadata::{ControllerError, ControllerReply, ControllerRequest};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::Duration;

/// The API key of a forwarded controller request (outside Kafka's key range).
pub const FORWARD_API_KEY: i16 = 32_000;
/// Largest forwarded request, bytes (a CreateTopics of many topics fits).
pub const FORWARD_BYTES_MAX: usize = 16 << 20;
/// Largest reply, bytes: an observer's fetch may carry a whole metadata image (at most a
/// snapshot's size) or one entry of up to `crate::quorum::METADATA_ENTRY_BYTES_MAX`.
pub const REPLY_BYTES_MAX: usize = replication::raft::codec::SNAPSHOT_BYTES_MAX + (1 << 20);

const _: () = assert!(REPLY_BYTES_MAX > crate::quorum::METADATA_ENTRY_BYTES_MAX + (1 << 20));
/// How long a forwarded request may take, connection included.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(15);

type Wire = Result<ControllerReply, ControllerError>;

/// Whether `frame` (without its size prefix) is a forwarded controller request.
pub fn is_forwarded(frame: &[u8]) -> bool {
    frame.get(..2) == Some(&FORWARD_API_KEY.to_be_bytes()[..])
}

/// The correlation id and request of a forwarded `frame`; `None` when it does not decode.
pub(super) fn decode_request(frame: &[u8]) -> Option<(i32, ControllerRequest)> {
    let correlation_id = i32::from_be_bytes(frame.get(2..6)?.try_into().ok()?);
    let request = serde_json::from_slice(frame.get(6..)?).ok()?;
    Some((correlation_id, request))
}

/// `size | [api_key] | correlation_id | JSON body`, or `None` past [`FORWARD_BYTES_MAX`] (a
/// request, with its `api_key`) or [`REPLY_BYTES_MAX`] (a reply).
pub(super) fn encode<T: Serialize>(
    correlation_id: i32,
    api_key: Option<i16>,
    body: &T,
) -> Option<Bytes> {
    let json = serde_json::to_vec(body).ok()?;
    let header = 4 + if api_key.is_some() { 2 } else { 0 };
    let size = header + json.len();
    let max = if api_key.is_some() {
        FORWARD_BYTES_MAX
    } else {
        REPLY_BYTES_MAX
    };
    if size > max {
        return None;
    }
    let mut out = BytesMut::with_capacity(4 + size);
    out.put_u32(u32::try_from(size).ok()?);
    if let Some(key) = api_key {
        out.put_i16(key);
    }
    out.put_i32(correlation_id);
    out.put_slice(&json);
    Some(out.freeze())
}

/// Sends `request` to the active controller at `addr` (registered as `host`), over a
/// connection secured by `security` (the inter-broker listener's TLS and SASL), and returns
/// its reply. Errors: [`ControllerError::Unavailable`] when it cannot be reached, refuses
/// the connection's security or answers nonsense in time; the controller's own error
/// otherwise.
pub async fn send(
    security: &PeerSecurity,
    host: &str,
    addr: SocketAddr,
    request: &ControllerRequest,
) -> Wire {
    let frame = encode(1, Some(FORWARD_API_KEY), request).ok_or(ControllerError::Unavailable)?;
    let exchange = async {
        let stream = crate::rt::TcpStream::connect(addr).await.ok()?;
        let _ = stream.set_nodelay(true);
        let mut stream = match security.secure(host, stream).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(%addr, error = %e, "forwarding to the active controller: the connection could not be secured");
                return None;
            }
        };
        stream.write_all(&frame).await.ok()?;
        stream.flush().await.ok()?;
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).await.ok()?;
        let size = usize::try_from(u32::from_be_bytes(size)).ok()?;
        if !(4..=REPLY_BYTES_MAX).contains(&size) {
            return None;
        }
        let mut body = vec![0u8; size];
        stream.read_exact(&mut body).await.ok()?;
        serde_json::from_slice::<Wire>(&body[4..]).ok()
    };
    let timeout = async {
        crate::rt::sleep(FORWARD_TIMEOUT).await;
        None
    };
    futures_lite::future::or(exchange, timeout)
        .await
        .unwrap_or(Err(ControllerError::Unavailable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::metadata::ControllerOp;

    #[test]
    fn requests_round_trip_and_garbage_is_refused() {
        let request = ControllerRequest::Op {
            from: 2,
            op: ControllerOp::FenceBroker { broker_id: 3 },
        };
        let frame = encode(7, Some(FORWARD_API_KEY), &request).unwrap();
        // Without the size prefix, as the connection hands frames over.
        let body = &frame[4..];
        assert!(is_forwarded(body));
        let (correlation_id, decoded) = decode_request(body).unwrap();
        assert_eq!(correlation_id, 7);
        assert!(matches!(
            decoded,
            ControllerRequest::Op {
                from: 2,
                op: ControllerOp::FenceBroker { broker_id: 3 }
            }
        ));
        let mut seed = 0x5eed_u64;
        for len in 0..400 {
            let mut garbage = FORWARD_API_KEY.to_be_bytes().to_vec();
            for _ in 0..len {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                garbage.push((seed >> 33) as u8);
            }
            assert!(decode_request(&garbage).is_none(), "{garbage:?}");
        }
        for cut in 0..body.len() {
            assert!(decode_request(&body[..cut]).is_none(), "cut at {cut}");
        }
    }
}
