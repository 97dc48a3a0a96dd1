//! `<data dir>/meta.properties`, as Kafka's `kafka-storage.sh format` writes it
//! (`MetaProperties`, version 1): `cluster.id`, `node.id` and the directory's `directory.id`
//! (KIP-858), so that Kafka's tools that read it work on a Sluice data directory
//! (`kafka-metadata-quorum.sh add-controller` sends the new controller's directory id).
//!
//! Sluice has no format step: the file is written at the first start that knows the cluster id
//! — from the recovered metadata log, once a new log names the cluster, or (a controller
//! joining a running quorum) from the controller of `controller.quorum.bootstrap.servers` it
//! asked — keeping the directory id once drawn. Each write is a temporary file, fsynced, renamed
//! over, the directory fsynced (blocking `std::fs`: at start-up, or on the blocking pool). A
//! stored `node.id` or `cluster.id` other than this node's is refused with Kafka's messages.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "meta.properties";

/// Ensures `data_dir`'s `meta.properties` names `node_id`, and `cluster_id` when given (the
/// file is written when it is missing or lacks the cluster id; its directory id is kept, or
/// drawn once). Errors: I/O, or a stored node id or cluster id that differs.
pub fn ensure(data_dir: &Path, node_id: i32, cluster_id: Option<&str>) -> anyhow::Result<()> {
    let path = data_dir.join(FILE_NAME);
    let stored = match fs::read_to_string(&path) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => anyhow::bail!("reading {}: {e}", path.display()),
    };
    if let Some(stored) = stored.get("node.id").and_then(|v| v.parse::<i32>().ok()) {
        anyhow::ensure!(
            stored == node_id,
            "{}: Stored node id {stored} doesn't match previous node id {node_id}. If you moved \
             your data, make sure your configured node id matches. If you intend to create a new \
             node, you should remove all data in your data directories.",
            path.display()
        );
    }
    let stored_cluster = stored.get("cluster.id").map(String::as_str);
    if let (Some(stored), Some(expected)) = (stored_cluster, cluster_id) {
        anyhow::ensure!(
            stored == expected,
            "Invalid cluster.id in: {}. Expected {expected}, but read {stored}",
            path.display()
        );
    }
    let cluster = cluster_id.or(stored_cluster);
    if !stored.is_empty() && (stored_cluster.is_some() || cluster.is_none()) {
        return Ok(());
    }
    let directory_id = stored
        .get("directory.id")
        .cloned()
        .unwrap_or_else(directory_id);
    let mut text = String::from("#\n#Written by Sluice\n");
    if let Some(cluster) = cluster {
        text.push_str(&format!("cluster.id={cluster}\n"));
    }
    text.push_str(&format!(
        "node.id={node_id}\ndirectory.id={directory_id}\nversion=1\n"
    ));
    write(data_dir, &text)
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// A directory id as Kafka writes a `Uuid`: URL-safe base64 of its 16 bytes, unpadded.
fn directory_id() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

fn write(data_dir: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
    let mut file = fs::File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    fs::rename(&tmp, data_dir.join(FILE_NAME))?;
    fs::File::open(data_dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dir: &Path) -> BTreeMap<String, String> {
        parse(&fs::read_to_string(dir.join(FILE_NAME)).expect("readable"))
    }

    #[test]
    fn written_with_the_cluster_id_and_checked_after() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        ensure(dir.path(), 4, None).expect("the cluster id not known yet");
        let first = read(dir.path());
        assert_eq!(first.get("node.id").map(String::as_str), Some("4"));
        assert_eq!(first.get("version").map(String::as_str), Some("1"));
        assert_eq!(first.get("cluster.id"), None);
        let id = first.get("directory.id").expect("a directory id").clone();
        assert_eq!(id.len(), 22, "Kafka's unpadded base64 of 16 bytes: {id}");
        ensure(dir.path(), 4, Some("c1")).expect("the cluster id learned");
        let second = read(dir.path());
        assert_eq!(second.get("cluster.id").map(String::as_str), Some("c1"));
        assert_eq!(
            second.get("directory.id"),
            Some(&id),
            "the directory id is kept"
        );
        ensure(dir.path(), 4, Some("c1")).expect("the same again");
        ensure(dir.path(), 4, None).expect("a start that does not know it yet");
        assert_eq!(read(dir.path()), second);
        let err = ensure(dir.path(), 5, None).expect_err("another node id");
        assert!(
            err.to_string().contains("Stored node id 4 doesn't match"),
            "{err}"
        );
        let err = ensure(dir.path(), 4, Some("c2")).expect_err("another cluster");
        assert!(
            err.to_string().contains("Expected c2, but read c1"),
            "{err}"
        );
    }
}
