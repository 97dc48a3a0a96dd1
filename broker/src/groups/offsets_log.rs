//! The records of the internal `__consumer_offsets` topic, in Kafka's own formats so Kafka
//! tools can read them (Kafka `OffsetCommitKey`/`OffsetCommitValue` and
//! `GroupMetadataKey`/`GroupMetadataValue`, `group-coordinator/src/main/resources/common/
//! message/*.json`). All integers big-endian; strings are `int16` length + UTF-8 (`-1` = null);
//! bytes are `int32` length + bytes; arrays are `int32` count + items.
//!
//! - offset commit: key v1 `group, topic, partition:int32`; value v3 `offset:int64,
//!   leader_epoch:int32, metadata, commit_timestamp:int64`.
//! - group metadata: key v2 `group`; value v3 `protocol_type, generation:int32,
//!   protocol?, leader?, current_state_timestamp:int64, members[member_id,
//!   group_instance_id?, client_id, client_host, rebalance_timeout:int32,
//!   session_timeout:int32, subscription:bytes, assignment:bytes]`.
//!
//! A null value is a tombstone: the offset or the group is deleted.

use bytes::{Buf, BufMut, Bytes};

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

/// A committed offset as stored (OffsetCommitValue v3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// -1 when the client did not say.
    pub leader_epoch: i32,
    pub metadata: String,
    /// When the coordinator accepted the commit, ms since the epoch.
    pub commit_timestamp_ms: i64,
    /// Offset of the record that stored it in `__consumer_offsets` (not part of the value:
    /// where it was read or appended; -1 until known). A transaction's commit materialises
    /// its offset only over an older record (`super::txn_offsets`).
    pub record_offset: i64,
}

/// One member as stored in the group's metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the chosen protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A group's membership as stored (GroupMetadataValue v3), written when a generation's
/// assignment is settled and when the group empties.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredGroup {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<StoredMember>,
}

/// A decoded `__consumer_offsets` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetsRecord {
    /// `None`: the offset was deleted.
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    /// `None`: the group was deleted.
    Group {
        group: String,
        value: Option<StoredGroup>,
    },
}

impl OffsetsRecord {
    /// The record's key and value bytes (`None` value = tombstone).
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value,
            } => {
                let mut key = Vec::new();
                key.put_i16(OFFSET_KEY_VERSION);
                put_str(&mut key, group);
                put_str(&mut key, topic);
                key.put_i32(*partition);
                let value = value.as_ref().map(|v| {
                    let mut out = Vec::new();
                    out.put_i16(OFFSET_VALUE_VERSION);
                    out.put_i64(v.offset);
                    out.put_i32(v.leader_epoch);
                    put_str(&mut out, &v.metadata);
                    out.put_i64(v.commit_timestamp_ms);
                    out
                });
                (key, value)
            }
            OffsetsRecord::Group { group, value } => {
                let mut key = Vec::new();
                key.put_i16(GROUP_KEY_VERSION);
                put_str(&mut key, group);
                let value = value.as_ref().map(|g| {
                    let mut out = Vec::new();
                    out.put_i16(GROUP_VALUE_VERSION);
                    put_str(&mut out, &g.protocol_type);
                    out.put_i32(g.generation);
                    put_opt_str(&mut out, g.protocol.as_deref());
                    put_opt_str(&mut out, g.leader.as_deref());
                    out.put_i64(g.current_state_timestamp_ms);
                    out.put_i32(i32::try_from(g.members.len()).unwrap_or(i32::MAX));
                    for m in &g.members {
                        put_str(&mut out, &m.member_id);
                        put_opt_str(&mut out, m.group_instance_id.as_deref());
                        put_str(&mut out, &m.client_id);
                        put_str(&mut out, &m.client_host);
                        out.put_i32(m.rebalance_timeout_ms);
                        out.put_i32(m.session_timeout_ms);
                        put_bytes(&mut out, &m.subscription);
                        put_bytes(&mut out, &m.assignment);
                    }
                    out
                });
                (key, value)
            }
        }
    }

    /// Decodes one record. `None` for keys of versions this broker does not know (Kafka's
    /// transaction or share-group records), which replay skips; malformed known records are
    /// an error.
    ///
    /// # Errors
    /// A description of what did not parse.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<OffsetsRecord>, String> {
        let mut k = key;
        let version = get_i16(&mut k)?;
        match version {
            0 | 1 => {
                let group = get_str(&mut k)?;
                let topic = get_str(&mut k)?;
                let partition = get_i32(&mut k)?;
                let value = value.map(decode_offset_value).transpose()?;
                Ok(Some(OffsetsRecord::Offset {
                    group,
                    topic,
                    partition,
                    value,
                }))
            }
            2 => {
                let group = get_str(&mut k)?;
                let value = value.map(decode_group_value).transpose()?;
                Ok(Some(OffsetsRecord::Group { group, value }))
            }
            _ => Ok(None),
        }
    }
}

fn decode_offset_value(mut v: &[u8]) -> Result<CommittedOffset, String> {
    let version = get_i16(&mut v)?;
    let offset = get_i64(&mut v)?;
    // v3 added the leader epoch; v1 carried an expire timestamp after the commit time.
    let leader_epoch = if version >= 3 { get_i32(&mut v)? } else { -1 };
    let metadata = get_str(&mut v)?;
    let commit_timestamp_ms = get_i64(&mut v)?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
        record_offset: -1,
    })
}

fn decode_group_value(mut v: &[u8]) -> Result<StoredGroup, String> {
    let version = get_i16(&mut v)?;
    if !(0..=GROUP_VALUE_VERSION).contains(&version) {
        return Err(format!("group metadata value version {version}"));
    }
    let protocol_type = get_str(&mut v)?;
    let generation = get_i32(&mut v)?;
    let protocol = get_opt_str(&mut v)?;
    let leader = get_opt_str(&mut v)?;
    let current_state_timestamp_ms = if version >= 2 { get_i64(&mut v)? } else { -1 };
    let count = get_i32(&mut v)?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        let member_id = get_str(&mut v)?;
        let group_instance_id = if version >= 3 {
            get_opt_str(&mut v)?
        } else {
            None
        };
        let client_id = get_str(&mut v)?;
        let client_host = get_str(&mut v)?;
        let rebalance_timeout_ms = if version >= 1 { get_i32(&mut v)? } else { -1 };
        let session_timeout_ms = get_i32(&mut v)?;
        let subscription = Bytes::copy_from_slice(get_bytes(&mut v)?);
        let assignment = Bytes::copy_from_slice(get_bytes(&mut v)?);
        members.push(StoredMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(StoredGroup {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_opt_str(out, Some(s));
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            // Kafka strings are at most i16::MAX bytes; group and topic names are far shorter
            // (the handlers refuse longer metadata with OFFSET_METADATA_TOO_LARGE).
            let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
            out.put_i16(i16::try_from(bytes.len()).unwrap_or(i16::MAX));
            out.put_slice(bytes);
        }
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
    out.put_slice(b);
}

fn need(buf: &[u8], n: usize) -> Result<(), String> {
    if buf.len() < n {
        return Err(format!("truncated: need {n} bytes, have {}", buf.len()));
    }
    Ok(())
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

fn get_opt_str(buf: &mut &[u8]) -> Result<Option<String>, String> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    need(buf, len)?;
    let s = String::from_utf8(buf[..len].to_vec()).map_err(|_| "string is not UTF-8")?;
    buf.advance(len);
    Ok(Some(s))
}

fn get_str(buf: &mut &[u8]) -> Result<String, String> {
    get_opt_str(buf)?.ok_or_else(|| "null where a string is required".to_string())
}

fn get_bytes<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = get_i32(buf)?;
    let len = usize::try_from(len).unwrap_or(0);
    need(buf, len)?;
    let (head, rest) = buf.split_at(len);
    *buf = rest;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(record: OffsetsRecord) {
        let (key, value) = record.encode();
        let back = OffsetsRecord::decode(&key, value.as_deref()).expect("decodes");
        assert_eq!(back, Some(record));
    }

    #[test]
    fn offsets_and_groups_roundtrip_including_tombstones() {
        roundtrip(OffsetsRecord::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: Some(CommittedOffset {
                offset: 42,
                leader_epoch: -1,
                metadata: "meta".into(),
                commit_timestamp_ms: 1_700_000_000_000,
                record_offset: -1,
            }),
        });
        roundtrip(OffsetsRecord::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: None,
        });
        roundtrip(OffsetsRecord::Group {
            group: "g".into(),
            value: Some(StoredGroup {
                protocol_type: "consumer".into(),
                generation: 7,
                protocol: Some("range".into()),
                leader: Some("m-1".into()),
                current_state_timestamp_ms: 5,
                members: vec![StoredMember {
                    member_id: "m-1".into(),
                    group_instance_id: Some("i-1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 10_000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"asg"),
                }],
            }),
        });
        roundtrip(OffsetsRecord::Group {
            group: "g".into(),
            value: None,
        });
    }

    #[test]
    fn unknown_key_versions_are_skipped_and_garbage_is_an_error() {
        assert_eq!(OffsetsRecord::decode(&[0, 9, 1, 2], None), Ok(None));
        assert!(OffsetsRecord::decode(&[0, 1, 0, 5, b'a'], None).is_err());
        assert!(OffsetsRecord::decode(&[], None).is_err());
        let (key, _) = OffsetsRecord::Group {
            group: "g".into(),
            value: None,
        }
        .encode();
        assert!(OffsetsRecord::decode(&key, Some(&[0, 3, 0xff])).is_err());
    }
}
