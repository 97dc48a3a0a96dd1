//! Where each controller of the quorum is reached ([`VoterBook`]): the voters of
//! `controller.quorum.voters`; the controllers a voter change added (KIP-853's AddRaftVoter),
//! whose endpoints the metadata image records (`MetadataImage::voter_endpoints`, from
//! `VoterEndpointRecord`s, so every voter, observer and restarted node finds them); and, on a
//! controller joining a running quorum, what a controller of
//! `controller.quorum.bootstrap.servers` answered (`super::joining`): it must answer the
//! leader before it has received any of the log. Endpoints are `ip:port` (as
//! `controller.quorum.voters` takes them); one that does not parse is not reachable.

use crate::quorum::transport::PeerResolver;
use replication::metadata::{ControllerReply, MetadataImage, MetadataView};
use replication::runtime::NodeId;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use tuning::config::QuorumVoter;

/// The controllers' addresses this node knows (see the module documentation).
pub struct VoterBook {
    configured: Vec<QuorumVoter>,
    view: Rc<RefCell<MetadataView>>,
    /// From a bootstrap server, on a joining controller. Bounded by the quorum's nodes.
    learned: RefCell<BTreeMap<i32, SocketAddr>>,
}

/// The address of controller `node` that a voter change recorded in `image`, if any.
fn added_voter_address(image: &MetadataImage, node: i32) -> Option<SocketAddr> {
    image.voter_endpoints.get(&node)?.parse().ok()
}

impl VoterBook {
    /// The book of a node configured with `configured` voters whose metadata is `view`.
    pub fn new(configured: Vec<QuorumVoter>, view: Rc<RefCell<MetadataView>>) -> Rc<VoterBook> {
        Rc::new(VoterBook {
            configured,
            view,
            learned: RefCell::new(BTreeMap::new()),
        })
    }

    /// Where controller `node` is reached: its configured address, else the image's, else a
    /// learned one.
    pub fn address(&self, node: i32) -> Option<SocketAddr> {
        self.configured
            .iter()
            .find(|v| v.id == node)
            .map(|v| v.addr)
            .or_else(|| added_voter_address(&self.view.borrow().image(), node))
            .or_else(|| self.learned.borrow().get(&node).copied())
    }

    /// Every controller address known, by node id.
    pub fn known(&self) -> BTreeMap<i32, SocketAddr> {
        let mut all = self.learned.borrow().clone();
        let image = self.view.borrow().image();
        all.extend(
            image
                .voter_endpoints
                .keys()
                .filter_map(|&id| Some((id, added_voter_address(&image, id)?))),
        );
        all.extend(self.configured.iter().map(|v| (v.id, v.addr)));
        all
    }

    /// The quorum transport's resolver of peers beyond the configured voters.
    pub fn resolver(self: &Rc<Self>) -> PeerResolver {
        let book = self.clone();
        Rc::new(move |node: NodeId| book.address(node.0))
    }

    /// Records the addresses a bootstrap server answered (`ip:port`; others are skipped).
    pub(super) fn learn(&self, voters: &[(i32, String)]) {
        let mut learned = self.learned.borrow_mut();
        for (id, endpoint) in voters {
            if let Ok(addr) = endpoint.parse() {
                learned.insert(*id, addr);
            }
        }
    }
}

/// The answer to [`ControllerRequest::DescribeVoters`]: every controller address this node
/// knows (any controller answers, not only the active one).
pub(super) fn describe(book: &VoterBook) -> ControllerReply {
    ControllerReply::Voters {
        cluster_id: book.view.borrow().image().cluster_id.clone(),
        voters: book
            .known()
            .into_iter()
            .map(|(id, addr)| (id, addr.to_string()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::metadata::MetadataStateMachine;

    #[test]
    fn configured_then_recorded_then_learned_addresses() {
        let mut image = MetadataImage::new("c".into());
        image.voter_endpoints.insert(4, "127.0.0.1:9094".into());
        image.voter_endpoints.insert(5, "not an address".into());
        let (_machine, view) = MetadataStateMachine::new(image);
        let configured = vec![QuorumVoter {
            id: 1,
            addr: "127.0.0.1:9091".parse().expect("an address"),
        }];
        let book = VoterBook::new(configured, view);
        let addr = |s: &str| s.parse::<SocketAddr>().expect("an address");
        assert_eq!(book.address(1), Some(addr("127.0.0.1:9091")));
        assert_eq!(book.address(4), Some(addr("127.0.0.1:9094")));
        assert_eq!(book.address(5), None);
        book.learn(&[(5, "127.0.0.1:9095".into()), (6, "nonsense".into())]);
        assert_eq!(book.address(5), Some(addr("127.0.0.1:9095")));
        assert_eq!(book.address(6), None);
        assert_eq!(
            book.known().keys().copied().collect::<Vec<_>>(),
            vec![1, 4, 5]
        );
        assert_eq!((book.resolver())(NodeId(4)), Some(addr("127.0.0.1:9094")));
    }
}
