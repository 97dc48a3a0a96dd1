//! The floor's state on its one executor: the topics (each a list of partition logs), where
//! their files go, the address it advertises, and the signal parked fetches wait on.

use crate::event::Event;
use crate::log::PartitionLog;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

/// The floor's node id, the only broker of its cluster.
pub const NODE_ID: i32 = 0;

/// Everything the connections share.
pub struct Floor {
    pub data_dir: PathBuf,
    /// Host and port given to clients in Metadata and FindCoordinator answers.
    pub host: String,
    pub port: i32,
    topics: RefCell<BTreeMap<String, Rc<Vec<PartitionLog>>>>,
    /// Notified after every completed write: parked fetches look again.
    pub written: Event,
}

impl Floor {
    pub fn new(data_dir: PathBuf, host: String, port: i32) -> Floor {
        Floor {
            data_dir,
            host,
            port,
            topics: RefCell::new(BTreeMap::new()),
            written: Event::default(),
        }
    }

    /// The partitions of `topic`, if it exists.
    pub fn topic(&self, topic: &str) -> Option<Rc<Vec<PartitionLog>>> {
        self.topics.borrow().get(topic).cloned()
    }

    /// Every topic's name and partition count.
    pub fn topic_names(&self) -> Vec<(String, usize)> {
        self.topics
            .borrow()
            .iter()
            .map(|(name, partitions)| (name.clone(), partitions.len()))
            .collect()
    }

    /// Creates `topic` with `partitions` preallocated partition files; false when it exists.
    ///
    /// # Errors
    /// Creating a partition file failed.
    pub async fn create_topic(&self, topic: &str, partitions: usize) -> std::io::Result<bool> {
        if self.topics.borrow().contains_key(topic) {
            return Ok(false);
        }
        let mut logs = Vec::with_capacity(partitions);
        for partition in 0..partitions {
            let path = self.data_dir.join(format!("{topic}-{partition}.log"));
            logs.push(PartitionLog::create(&path).await?);
        }
        // Another request may have created it while the files were made: keep the first.
        let mut topics = self.topics.borrow_mut();
        if topics.contains_key(topic) {
            return Ok(false);
        }
        topics.insert(topic.to_string(), Rc::new(logs));
        Ok(true)
    }
}
