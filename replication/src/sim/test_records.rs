//! The simulations' record values: each record's value is a `u64`, big-endian, 8 bytes.

use storage::RecordBatch;

/// The value of one record. Errors: a value that is not 8 bytes.
pub(super) fn value_of(bytes: &[u8]) -> Result<u64, String> {
    let arr: [u8; 8] = bytes
        .try_into()
        .map_err(|_| "a value of 8 bytes".to_string())?;
    Ok(u64::from_be_bytes(arr))
}

/// Every record of `batches`: (offset, value, batch epoch). Errors: an unreadable batch, a
/// value that is not 8 bytes.
pub(super) fn records(batches: &[RecordBatch]) -> Result<Vec<(i64, u64, i32)>, String> {
    let mut out = Vec::new();
    for batch in batches {
        let epoch = batch.header().partition_leader_epoch.0;
        let bytes = batch.to_vec();
        for r in storage::records_of(&bytes).map_err(|e| e.to_string())? {
            out.push((r.offset.0, value_of(r.value.unwrap_or_default())?, epoch));
        }
    }
    Ok(out)
}
