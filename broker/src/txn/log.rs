//! `__transaction_state` records, in Kafka's format (`TransactionLogKey`,
//! `TransactionLogValue`; `TransactionLog.keyToBytes` / `valueToBytes`), so the log is
//! Kafka's:
//!
//! - key: `version:int16 = 0 | transactional_id:string` (int16 length);
//! - value v1 (flexible, written at transaction version 1): `version:int16 = 1 |
//!   producer_id:int64 | producer_epoch:int16 | timeout_ms:int32 | status:int8 |
//!   partitions: compact nullable array of {topic: compact string, partition_ids: compact
//!   array of int32, tagged fields} | last_update_ms:int64 | start_ms:int64 | tagged fields`
//!   (tag 0 previous producer id: int64, 1 next producer id: int64 — KIP-890 part 2's
//!   rotation when the epochs run out —, 2 client transaction version: int16; each written,
//!   in tag order, only when not its default -1, -1, 0, as Kafka's generated code does);
//! - value v0 (read only): the same fields, non-flexible (int32 array counts, int16 string
//!   lengths, no tagged fields).
//!
//! The partitions are null in Empty (as Kafka writes them). A null value is a tombstone: the
//! id expired (Dead).

use super::state::{TxnState, TxnTransit, NO_PRODUCER_ID};
use bytes::{Buf, BufMut};
use std::collections::BTreeSet;
use storage::TopicPartition;

const KEY_VERSION: i16 = 0;
/// The value version written: transaction version 1 writes flexible records.
const VALUE_VERSION: i16 = 1;

/// The record key of `transactional_id`.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.put_i16(KEY_VERSION);
    let bytes = &transactional_id.as_bytes()[..transactional_id.len().min(i16::MAX as usize)];
    out.put_i16(i16::try_from(bytes.len()).unwrap_or(i16::MAX));
    out.put_slice(bytes);
    out
}

/// The record value of `t` (`None` for Dead: a tombstone).
pub fn encode_value(t: &TxnTransit) -> Option<Vec<u8>> {
    if t.state == TxnState::Dead {
        return None;
    }
    let mut out = Vec::with_capacity(64);
    out.put_i16(VALUE_VERSION);
    out.put_i64(t.producer_id);
    out.put_i16(t.producer_epoch);
    out.put_i32(t.timeout_ms);
    out.put_i8(t.state.id());
    if t.state == TxnState::Empty {
        put_uvarint(&mut out, 0); // null
    } else {
        let by_topic = group_by_topic(&t.partitions);
        put_uvarint(&mut out, by_topic.len() as u64 + 1);
        for (topic, partitions) in by_topic {
            put_uvarint(&mut out, topic.len() as u64 + 1);
            out.put_slice(topic.as_bytes());
            put_uvarint(&mut out, partitions.len() as u64 + 1);
            for p in partitions {
                out.put_i32(p);
            }
            put_uvarint(&mut out, 0); // no tagged fields
        }
    }
    out.put_i64(t.last_update_ms);
    out.put_i64(t.start_ms);
    put_tagged_fields(&mut out, t);
    Some(out)
}

/// The value's tagged fields: those of `t` that are not their defaults, in tag order.
fn put_tagged_fields(out: &mut Vec<u8>, t: &TxnTransit) {
    let mut fields: Vec<(u64, Vec<u8>)> = Vec::with_capacity(3);
    if t.previous_producer_id != NO_PRODUCER_ID {
        fields.push((0, t.previous_producer_id.to_be_bytes().to_vec()));
    }
    if t.next_producer_id != NO_PRODUCER_ID {
        fields.push((1, t.next_producer_id.to_be_bytes().to_vec()));
    }
    if t.client_transaction_version != 0 {
        fields.push((2, t.client_transaction_version.to_be_bytes().to_vec()));
    }
    put_uvarint(out, fields.len() as u64);
    for (tag, data) in fields {
        put_uvarint(out, tag);
        put_uvarint(out, data.len() as u64);
        out.put_slice(&data);
    }
}

fn group_by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in partitions {
        match out.last_mut() {
            Some((topic, ps)) if *topic == tp.topic => ps.push(tp.partition),
            _ => out.push((&tp.topic, vec![tp.partition])),
        }
    }
    out
}

/// A decoded `__transaction_state` record: the id and its state (`None`: a tombstone).
#[derive(Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub value: Option<TxnTransit>,
}

/// Decodes one record. `Ok(None)` for a key version this broker does not know (skipped on
/// replay, as Kafka's `UnknownKey`).
///
/// # Errors
/// A description of what did not parse.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<TxnRecord>, String> {
    let mut k = key;
    if get_i16(&mut k)? != KEY_VERSION {
        return Ok(None);
    }
    let len = usize::try_from(get_i16(&mut k)?).map_err(|_| "null transactional id")?;
    let transactional_id = get_utf8(&mut k, len)?;
    let value = value.map(decode_value).transpose()?;
    Ok(Some(TxnRecord {
        transactional_id,
        value,
    }))
}

fn decode_value(mut v: &[u8]) -> Result<TxnTransit, String> {
    let version = get_i16(&mut v)?;
    if !(0..=1).contains(&version) {
        return Err(format!("transaction log value version {version}"));
    }
    let flexible = version >= 1;
    let producer_id = get_i64(&mut v)?;
    let producer_epoch = get_i16(&mut v)?;
    let timeout_ms = get_i32(&mut v)?;
    let status = get_i8(&mut v)?;
    let state = TxnState::from_id(status).ok_or_else(|| format!("transaction status {status}"))?;
    // Only Kafka's coordinator states are stored, always with a producer id and epoch: anything
    // else could not be transitioned from, so it is refused here rather than trusted.
    if producer_id < 0 || producer_epoch < 0 {
        return Err(format!("producer id {producer_id}, epoch {producer_epoch}"));
    }
    if matches!(state, TxnState::Dead | TxnState::PrepareEpochFence) {
        return Err(format!("stored state {}", state.name()));
    }
    let mut partitions = BTreeSet::new();
    let topics = get_count(&mut v, flexible)?;
    for _ in 0..topics.unwrap_or(0) {
        let len = if flexible {
            get_count(&mut v, true)?.ok_or("null topic")?
        } else {
            usize::try_from(get_i16(&mut v)?).map_err(|_| "null topic")?
        };
        let topic = get_utf8(&mut v, len)?;
        let count = get_count(&mut v, flexible)?.unwrap_or(0);
        for _ in 0..count {
            partitions.insert(TopicPartition {
                topic: topic.clone(),
                partition: get_i32(&mut v)?,
            });
        }
        if flexible {
            skip_tagged(&mut v, |_, _| Ok(()))?;
        }
    }
    let last_update_ms = get_i64(&mut v)?;
    let start_ms = get_i64(&mut v)?;
    let mut previous_producer_id = NO_PRODUCER_ID;
    let mut next_producer_id = NO_PRODUCER_ID;
    let mut client_transaction_version = 0;
    if flexible {
        skip_tagged(&mut v, |tag, mut data| {
            match tag {
                0 => previous_producer_id = get_i64(&mut data)?,
                1 => next_producer_id = get_i64(&mut data)?,
                2 => client_transaction_version = get_i16(&mut data)?,
                _ => {}
            }
            Ok(())
        })?;
    }
    if state == TxnState::Empty {
        partitions.clear();
    }
    Ok(TxnTransit {
        producer_id,
        previous_producer_id,
        next_producer_id,
        client_transaction_version,
        producer_epoch,
        last_producer_epoch: super::state::NO_PRODUCER_EPOCH,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
    })
}

fn put_uvarint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn get_uvarint(buf: &mut &[u8]) -> Result<u64, String> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let b = get_u8(buf)?;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err("varint too long".into())
}

/// An array length (or a flexible string's): compact (uvarint, 0 = null) when `flexible`,
/// else int32 (-1 = null).
fn get_count(buf: &mut &[u8], flexible: bool) -> Result<Option<usize>, String> {
    if flexible {
        let n = get_uvarint(buf)?;
        return Ok(n.checked_sub(1).map(|n| n as usize));
    }
    let n = get_i32(buf)?;
    Ok(usize::try_from(n).ok())
}

/// Skips a tagged-field section, handing each field to `field`.
fn skip_tagged(
    buf: &mut &[u8],
    mut field: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let count = get_uvarint(buf)?;
    for _ in 0..count {
        let tag = get_uvarint(buf)?;
        let size = usize::try_from(get_uvarint(buf)?).map_err(|_| "tagged field size")?;
        need(buf, size)?;
        field(tag, &buf[..size])?;
        buf.advance(size);
    }
    Ok(())
}

fn need(buf: &[u8], n: usize) -> Result<(), String> {
    if buf.len() < n {
        return Err(format!("truncated: need {n} bytes, have {}", buf.len()));
    }
    Ok(())
}

fn get_u8(buf: &mut &[u8]) -> Result<u8, String> {
    need(buf, 1)?;
    Ok(buf.get_u8())
}

fn get_i8(buf: &mut &[u8]) -> Result<i8, String> {
    need(buf, 1)?;
    Ok(buf.get_i8())
}

fn get_i16(buf: &mut &[u8]) -> Result<i16, String> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut &[u8]) -> Result<i32, String> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut &[u8]) -> Result<i64, String> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

fn get_utf8(buf: &mut &[u8], len: usize) -> Result<String, String> {
    need(buf, len)?;
    let s = String::from_utf8(buf[..len].to_vec()).map_err(|_| "string is not UTF-8")?;
    buf.advance(len);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transit(state: TxnState, partitions: &[(&str, i32)]) -> TxnTransit {
        TxnTransit {
            producer_id: 1234,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: 0,
            producer_epoch: 3,
            last_producer_epoch: super::super::state::NO_PRODUCER_EPOCH,
            timeout_ms: 60_000,
            state,
            partitions: partitions
                .iter()
                .map(|(t, p)| TopicPartition {
                    topic: t.to_string(),
                    partition: *p,
                })
                .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn records_roundtrip_and_dead_is_a_tombstone() {
        for t in [
            transit(TxnState::Ongoing, &[("a", 0), ("a", 2), ("b", 1)]),
            transit(TxnState::PrepareCommit, &[("a", 0)]),
            transit(TxnState::Empty, &[]),
            transit(TxnState::CompleteAbort, &[]),
        ] {
            let key = encode_key("my-id");
            let value = encode_value(&t).expect("not a tombstone");
            let back = decode(&key, Some(&value))
                .expect("decodes")
                .expect("known key");
            assert_eq!(back.transactional_id, "my-id");
            assert_eq!(back.value, Some(t));
        }
        assert_eq!(encode_value(&transit(TxnState::Dead, &[])), None);
        let back = decode(&encode_key("x"), None)
            .expect("decodes")
            .expect("known");
        assert_eq!(back.value, None);
    }

    /// Bytes as Kafka's generated `TransactionLogValue` writes them, version 1, for producer
    /// 1, epoch 2, timeout 3, Ongoing, partitions [t: 0], last update 4, start 5.
    #[test]
    fn value_bytes_are_kafkas() {
        let t = TxnTransit {
            producer_id: 1,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: 0,
            producer_epoch: 2,
            last_producer_epoch: -1,
            timeout_ms: 3,
            state: TxnState::Ongoing,
            partitions: [TopicPartition {
                topic: "t".into(),
                partition: 0,
            }]
            .into(),
            start_ms: 5,
            last_update_ms: 4,
        };
        let expected: Vec<u8> = [
            &[0, 1][..],                     // version 1
            &1i64.to_be_bytes(),             // producer id
            &2i16.to_be_bytes(),             // epoch
            &3i32.to_be_bytes(),             // timeout
            &[1],                            // Ongoing
            &[2, 2, b't', 2, 0, 0, 0, 0, 0], // [ {"t", [0]} ]
            &4i64.to_be_bytes(),
            &5i64.to_be_bytes(),
            &[0],
        ]
        .concat();
        assert_eq!(encode_value(&t), Some(expected));
        assert_eq!(encode_key("ab"), vec![0, 0, 0, 2, b'a', b'b']);
    }

    /// Transaction version 2's fields as Kafka's generated code writes them: tags 0, 1, 2
    /// in order, each only when not its default.
    #[test]
    fn tagged_fields_of_transaction_version_2_roundtrip() {
        let mut t = transit(TxnState::PrepareCommit, &[("a", 0)]);
        t.previous_producer_id = 1234;
        t.next_producer_id = 5678;
        t.client_transaction_version = 2;
        let value = encode_value(&t).expect("value");
        let tail: Vec<u8> = [
            &[3u8, 0, 8][..],
            &1234i64.to_be_bytes(),
            &[1, 8],
            &5678i64.to_be_bytes(),
            &[2, 2],
            &2i16.to_be_bytes(),
        ]
        .concat();
        assert!(value.ends_with(&tail), "{value:?}");
        let back = decode(&encode_key("id"), Some(&value))
            .expect("ok")
            .expect("known");
        assert_eq!(back.value, Some(t.clone()));
        // Only the fields that are not their defaults.
        t.next_producer_id = NO_PRODUCER_ID;
        let value = encode_value(&t).expect("value");
        assert!(
            value.ends_with(&[&[2u8, 0, 8][..], &1234i64.to_be_bytes(), &[2, 2, 0, 2]].concat())
        );
        let back = decode(&encode_key("id"), Some(&value))
            .expect("ok")
            .expect("known");
        assert_eq!(back.value, Some(t));
    }

    #[test]
    fn version_0_values_are_read() {
        let mut v = Vec::new();
        v.put_i16(0);
        v.put_i64(9);
        v.put_i16(1);
        v.put_i32(100);
        v.put_i8(1);
        v.put_i32(1); // one topic
        v.put_i16(1);
        v.put_slice(b"t");
        v.put_i32(2);
        v.put_i32(0);
        v.put_i32(4);
        v.put_i64(10);
        v.put_i64(11);
        let r = decode(&encode_key("id"), Some(&v))
            .expect("ok")
            .expect("known");
        let t = r.value.expect("value");
        assert_eq!((t.producer_id, t.producer_epoch, t.timeout_ms), (9, 1, 100));
        assert_eq!(t.partitions.len(), 2);
        assert_eq!((t.last_update_ms, t.start_ms), (10, 11));
    }

    #[test]
    fn unknown_keys_are_skipped_and_garbage_is_an_error() {
        assert_eq!(decode(&[0, 5, 1], None), Ok(None));
        assert!(decode(&[0, 0, 0, 9, b'a'], None).is_err());
        assert!(decode(&encode_key("a"), Some(&[0, 1, 0])).is_err());
        assert!(decode(&encode_key("a"), Some(&[0, 7])).is_err());
        // A negative producer id, or a state Kafka never stores.
        let mut bad = transit(TxnState::Ongoing, &[("a", 0)]);
        bad.producer_id = -1;
        let value = encode_value(&bad).expect("value");
        assert!(decode(&encode_key("a"), Some(&value)).is_err());
        let mut fence = encode_value(&transit(TxnState::Ongoing, &[("a", 0)])).expect("value");
        fence[2 + 8 + 2 + 4] = TxnState::PrepareEpochFence.id() as u8;
        assert!(decode(&encode_key("a"), Some(&fence)).is_err());
    }
}
