//! Rack-aware replica placement (KIP-36), after KRaft's `StripedReplicaPlacer`: the active
//! brokers are grouped by `broker.rack` (brokers without a rack form one group, as Kafka's
//! placer keys its racks by an optional name, so a cluster where only some brokers have a
//! rack is placed, not refused), the groups sorted by name (the rackless one first) and the
//! brokers of each by id. Partition `j`'s replicas are taken rack by rack from rack
//! `j mod R` on (R racks), each rack giving its brokers in turn from `j div R`; a rack whose
//! brokers are all taken is skipped. So a partition's replicas span `min(RF, R)` racks, and
//! leaders (first replicas) go round the racks and, within a rack, round its brokers.
//!
//! Differs from Kafka in one way: Kafka's placer starts its rack and broker lists at random
//! offsets and shuffles them once every broker has led; here the only randomness is the
//! caller's start `j` (the proposer's placement seed), so a placement can be checked
//! exactly. With no racks at all it is the plain round-robin `brokers[(j + i) mod n]`.

use std::collections::BTreeMap;

/// The brokers grouped by rack: groups sorted by rack name (`None` first), brokers by id.
/// `brokers` are (id, rack) pairs; an empty input gives no group.
pub(super) fn group_by_rack<'a>(
    brokers: impl IntoIterator<Item = (i32, Option<&'a str>)>,
) -> Vec<Vec<i32>> {
    let mut racks: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        racks.entry(rack).or_default().push(id);
    }
    racks
        .into_values()
        .map(|mut ids| {
            ids.sort_unstable();
            ids
        })
        .collect()
}

/// Partition `j`'s `count` replicas over `racks` (from [`group_by_rack`]; none empty), as the
/// module docs describe. The caller checks `1 ≤ count ≤` the number of brokers; with fewer
/// brokers, the list is as long as there are brokers.
pub(super) fn striped(racks: &[Vec<i32>], j: usize, count: usize) -> Vec<i32> {
    let rack_count = racks.len();
    if rack_count == 0 {
        return Vec::new();
    }
    let first_rack = j % rack_count;
    let turn = j / rack_count;
    let mut taken = vec![0usize; rack_count];
    let mut replicas = Vec::with_capacity(count);
    let mut rack = first_rack;
    let mut idle = 0;
    while replicas.len() < count && idle < rack_count {
        let brokers = &racks[rack];
        if taken[rack] < brokers.len() {
            replicas.push(brokers[(turn + taken[rack]) % brokers.len()]);
            taken[rack] += 1;
            idle = 0;
        } else {
            idle += 1;
        }
        rack = (rack + 1) % rack_count;
    }
    replicas
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn racks_sort_by_name_with_the_rackless_group_first() {
        let racks = group_by_rack([(5, Some("b")), (1, None), (3, Some("a")), (2, Some("b"))]);
        assert_eq!(racks, vec![vec![1], vec![3], vec![2, 5]]);
    }

    #[test]
    fn without_racks_it_is_round_robin() {
        let racks = group_by_rack([(1, None), (2, None), (3, None)]);
        assert_eq!(striped(&racks, 0, 2), vec![1, 2]);
        assert_eq!(striped(&racks, 1, 2), vec![2, 3]);
        assert_eq!(striped(&racks, 2, 3), vec![3, 1, 2]);
    }

    #[test]
    fn three_racks_of_two_stripe_as_kafka_describes() {
        // Racks a {1, 2}, b {3, 4}, c {5, 6}.
        let racks = group_by_rack([1, 2, 3, 4, 5, 6].map(|id| {
            let rack = ["a", "b", "c"][(id as usize - 1) / 2];
            (id, Some(rack))
        }));
        assert_eq!(striped(&racks, 0, 3), vec![1, 3, 5]);
        assert_eq!(striped(&racks, 1, 3), vec![3, 5, 1]);
        assert_eq!(striped(&racks, 2, 3), vec![5, 1, 3]);
        assert_eq!(striped(&racks, 3, 3), vec![2, 4, 6]);
        // Past the rack count a rack gives its next broker.
        assert_eq!(striped(&racks, 0, 6), vec![1, 3, 5, 2, 4, 6]);
    }

    #[test]
    fn an_exhausted_rack_is_skipped() {
        // Rack a {1}, rack b {2, 3, 4}: four replicas need b three times.
        let racks = group_by_rack([
            (1, Some("a")),
            (2, Some("b")),
            (3, Some("b")),
            (4, Some("b")),
        ]);
        assert_eq!(striped(&racks, 0, 4), vec![1, 2, 3, 4]);
        assert_eq!(striped(&racks, 1, 4), vec![2, 1, 3, 4]);
    }

    /// Up to 12 brokers, each in one of up to 5 racks or none.
    fn brokers() -> impl Strategy<Value = Vec<(i32, Option<String>)>> {
        proptest::collection::btree_map(0i32..100, proptest::option::of(0u8..5), 1..12).prop_map(
            |m| {
                m.into_iter()
                    .map(|(id, rack)| (id, rack.map(|r| format!("r{r}"))))
                    .collect()
            },
        )
    }

    proptest! {
        #[test]
        fn replicas_are_distinct_and_span_as_many_racks_as_they_can(
            brokers in brokers(),
            j in 0usize..1000,
            count in 1usize..12,
        ) {
            let count = count.min(brokers.len());
            let racks = group_by_rack(brokers.iter().map(|(id, r)| (*id, r.as_deref())));
            let replicas = striped(&racks, j, count);
            prop_assert_eq!(replicas.len(), count);
            let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
            prop_assert_eq!(distinct.len(), count, "no broker twice: {:?}", replicas);
            let rack_of = |id: i32| brokers.iter().find(|(b, _)| *b == id).map(|(_, r)| r.clone());
            let spanned: BTreeSet<Option<String>> =
                replicas.iter().map(|&id| rack_of(id).flatten()).collect();
            prop_assert_eq!(spanned.len(), count.min(racks.len()), "racks of {:?}", replicas);
        }

        #[test]
        fn leaders_go_round_the_racks_and_their_brokers(
            brokers in brokers(),
            start in 0usize..1000,
        ) {
            // Over one round (racks × the largest rack) every rack leads as often, and the
            // brokers of a rack lead as often as each other, give or take one.
            let racks = group_by_rack(brokers.iter().map(|(id, r)| (*id, r.as_deref())));
            let largest = racks.iter().map(Vec::len).max().unwrap_or(1);
            let round = racks.len() * largest;
            let mut led_by_rack = vec![0usize; racks.len()];
            let mut led: BTreeMap<i32, usize> = BTreeMap::new();
            for j in start..start + round {
                let leader = striped(&racks, j, 1)[0];
                let rack = racks.iter().position(|r| r.contains(&leader)).unwrap();
                led_by_rack[rack] += 1;
                *led.entry(leader).or_default() += 1;
            }
            for rack in &racks {
                let counts: Vec<usize> =
                    rack.iter().map(|b| led.get(b).copied().unwrap_or(0)).collect();
                let (min, max) = (counts.iter().min(), counts.iter().max());
                prop_assert!(max.zip(min).is_some_and(|(max, min)| max - min <= 1), "{:?}", counts);
            }
            prop_assert!(led_by_rack.iter().all(|&n| n == largest), "{:?}", led_by_rack);
        }
    }
}
