//! Client quotas as KRaft keeps them (KIP-546, `ClientQuotaControlManager`): a quota entity
//! (user, client id, both, or an IP; a `None` name is the entity type's default), its quota
//! keys and values, set by [`super::ControllerOp::AlterClientQuotas`] through
//! `ClientQuotaRecord`s; and the resolution of a client's quota as Kafka's
//! `ClientQuotaManager` resolves it (most specific entity first).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Kafka's entity type of a user principal's name.
pub const ENTITY_USER: &str = "user";
/// Kafka's entity type of a client id.
pub const ENTITY_CLIENT_ID: &str = "client-id";
/// Kafka's entity type of a client address.
pub const ENTITY_IP: &str = "ip";

/// Bytes per second a (user, client id) may produce (a whole number).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Bytes per second a (user, client id) may fetch (a whole number).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Percentage of a request-handling thread's time (KIP-124).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Partition mutations per second (KIP-599).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// New connections per second from an IP (KIP-612; a whole number).
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// A quota entity: entity type → name (`None`: the default of that type), at most one of
/// each type, sorted by type.
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// A quota value (Kafka's double). Compared by bits, so that images stay `Eq`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for QuotaValue {}

/// One entity's quota values, by key.
pub type QuotaValues = BTreeMap<String, QuotaValue>;

/// Quota values by entity, as the image keeps them (no entity without a value).
pub type ClientQuotas = BTreeMap<QuotaEntity, QuotaValues>;

/// One entity's changes in an AlterClientQuotas: per key, `Some(value)` sets it, `None`
/// removes it.
pub type QuotaChanges = (QuotaEntity, Vec<(String, Option<QuotaValue>)>);

/// Checks an entity as Kafka's `validateEntity` and `configKeysForEntityType`: known types, no
/// type twice, no empty name, IP alone. Returns the entity sorted by type, or Kafka's
/// INVALID_REQUEST message.
pub fn validate_entity(entity: &[(String, Option<String>)]) -> Result<QuotaEntity, String> {
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".to_string());
    }
    let mut sorted: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (kind, name) in entity {
        if sorted.contains_key(kind) {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            ));
        }
        if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&kind.as_str()) {
            return Err(format!("Unhandled client quota entity type: {kind}"));
        }
        if name.as_deref() == Some("") {
            return Err(format!("Empty {kind} not supported"));
        }
        sorted.insert(kind.clone(), name.clone());
    }
    if sorted.contains_key(ENTITY_IP) && sorted.len() > 1 {
        return Err(
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                .to_string(),
        );
    }
    if let Some(Some(ip)) = sorted.get(ENTITY_IP) {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(format!("{ip} is not a valid IP or resolvable host."));
        }
    }
    Ok(sorted.into_iter().collect())
}

/// Checks a quota key and value for `entity` (already validated) as Kafka's
/// `validateQuotaKeyValue`. Errors: Kafka's INVALID_REQUEST message.
pub fn validate_value(entity: &QuotaEntity, key: &str, value: f64) -> Result<(), String> {
    let ip = entity.iter().any(|(k, _)| k == ENTITY_IP);
    // (key, integral, largest value)
    let known: &[(&str, bool, f64)] = if ip {
        &[(CONNECTION_CREATION_RATE, true, i32::MAX as f64)]
    } else {
        &[
            (PRODUCER_BYTE_RATE, true, i64::MAX as f64),
            (CONSUMER_BYTE_RATE, true, i64::MAX as f64),
            (REQUEST_PERCENTAGE, false, f64::MAX),
            (CONTROLLER_MUTATION_RATE, false, f64::MAX),
        ]
    };
    let Some(&(_, integral, max)) = known.iter().find(|(k, ..)| *k == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if value <= 0.0 || value.is_nan() {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    if value > max {
        return Err(format!("Proposed value for {key} is too large for a LONG."));
    }
    if integral && (value % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

/// The quota `key` of the client `(user, client_id)`, resolved as Kafka's
/// `ClientQuotaManager` (the default quota callback): the most specific of user + client id,
/// user + default client id, user, default user + client id, default user + default client
/// id, default user, client id, default client id. `None`: no quota.
pub fn resolve(quotas: &ClientQuotas, user: &str, client_id: &str, key: &str) -> Option<f64> {
    resolve_matched(quotas, user, client_id, key).map(|m| m.value)
}

/// A quota as it was resolved: its value and which of the client's names the matched entity
/// holds, user or default user, client id or default client id (Kafka's
/// `DefaultQuotaCallback.quotaMetricTags`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatchedQuota {
    /// The quota's value, in the key's unit.
    pub value: f64,
    /// The matched entity names a user (or the default user).
    pub by_user: bool,
    /// The matched entity names a client id (or the default client id).
    pub by_client_id: bool,
}

impl MatchedQuota {
    /// Which client the quota is metered for, as Kafka's metric tags (KIP-55): the user if the
    /// matched entity names one, the client id if it names one. So a quota of a user alone
    /// (or of the default user) meters all of that user's client ids together, and a quota of
    /// a client id alone all users of that client id.
    pub fn metered_as<'a>(
        &self,
        user: &'a str,
        client_id: &'a str,
    ) -> (Option<&'a str>, Option<&'a str>) {
        (
            self.by_user.then_some(user),
            self.by_client_id.then_some(client_id),
        )
    }
}

/// [`resolve`], saying which entity matched.
pub fn resolve_matched(
    quotas: &ClientQuotas,
    user: &str,
    client_id: &str,
    key: &str,
) -> Option<MatchedQuota> {
    let u = |n: Option<&str>| (ENTITY_USER.to_string(), n.map(str::to_string));
    let c = |n: Option<&str>| (ENTITY_CLIENT_ID.to_string(), n.map(str::to_string));
    let candidates: [(QuotaEntity, bool, bool); 8] = [
        (vec![c(Some(client_id)), u(Some(user))], true, true),
        (vec![c(None), u(Some(user))], true, true),
        (vec![u(Some(user))], true, false),
        (vec![c(Some(client_id)), u(None)], true, true),
        (vec![c(None), u(None)], true, true),
        (vec![u(None)], true, false),
        (vec![c(Some(client_id))], false, true),
        (vec![c(None)], false, true),
    ];
    candidates
        .iter()
        .find_map(|(entity, by_user, by_client_id)| {
            let value = quotas.get(entity)?.get(key)?.0;
            Some(MatchedQuota {
                value,
                by_user: *by_user,
                by_client_id: *by_client_id,
            })
        })
}

/// DescribeClientQuotas' match types (KIP-546).
pub const MATCH_TYPE_EXACT: i8 = 0;
/// The entity type's default.
pub const MATCH_TYPE_DEFAULT: i8 = 1;
/// Any entity of the type.
pub const MATCH_TYPE_SPECIFIED: i8 = 2;

/// Why a DescribeClientQuotas filter is refused (Kafka's `ClientQuotasImage.describe`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterError {
    /// INVALID_REQUEST with this message.
    Invalid(String),
    /// UNSUPPORTED_VERSION: an entity type Kafka does not know.
    UnsupportedEntityType(String),
}

/// The entities a DescribeClientQuotas filter selects, as Kafka's `ClientQuotasImage.describe`:
/// `components` are (entity type, match type, match); with `strict`, an entity must have
/// exactly the filter's types. Errors: [`FilterError`] for a malformed filter.
pub fn describe<'a>(
    quotas: &'a ClientQuotas,
    components: &[(String, i8, Option<String>)],
    strict: bool,
) -> Result<Vec<(&'a QuotaEntity, &'a QuotaValues)>, FilterError> {
    let invalid = |m: String| Err(FilterError::Invalid(m));
    let mut exact: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut typed: Vec<&str> = Vec::new();
    for (kind, match_type, name) in components {
        if kind.is_empty() {
            return invalid("Invalid empty entity type.".to_string());
        }
        if exact.contains_key(kind.as_str()) || typed.contains(&kind.as_str()) {
            return invalid(format!(
                "Entity type {kind} cannot appear more than once in the filter."
            ));
        }
        if ![ENTITY_IP, ENTITY_USER, ENTITY_CLIENT_ID].contains(&kind.as_str()) {
            return Err(FilterError::UnsupportedEntityType(format!(
                "Unsupported entity type {kind}"
            )));
        }
        match (*match_type, name) {
            (MATCH_TYPE_EXACT, None) => {
                return invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                )
            }
            (MATCH_TYPE_EXACT, Some(n)) => {
                exact.insert(kind, Some(n));
            }
            (MATCH_TYPE_DEFAULT, None) => {
                exact.insert(kind, None);
            }
            (MATCH_TYPE_SPECIFIED, None) => typed.push(kind),
            (MATCH_TYPE_DEFAULT | MATCH_TYPE_SPECIFIED, Some(_)) => {
                let which = if *match_type == MATCH_TYPE_DEFAULT {
                    "MATCH_TYPE_DEFAULT"
                } else {
                    "MATCH_TYPE_SPECIFIED"
                };
                return invalid(format!(
                    "Request specified {which}, but also specified a match string."
                ));
            }
            (other, _) => return invalid(format!("Unknown match type {other}")),
        }
    }
    let has = |k: &str| exact.contains_key(k) || typed.contains(&k);
    if has(ENTITY_IP) && (has(ENTITY_USER) || has(ENTITY_CLIENT_ID)) {
        return invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component."
                .to_string(),
        );
    }
    Ok(quotas
        .iter()
        .filter(|(entity, _)| {
            let get = |k: &str| {
                entity
                    .iter()
                    .find(|(t, _)| t == k)
                    .map(|(_, n)| n.as_deref())
            };
            (!strict || entity.len() == exact.len() + typed.len())
                && exact.iter().all(|(k, n)| get(k) == Some(*n))
                && typed.iter().all(|k| get(k).is_some())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        validate_entity(
            &pairs
                .iter()
                .map(|(k, n)| (k.to_string(), n.map(str::to_string)))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn entities_and_values_are_checked_as_kafka() {
        let e = |pairs: &[(&str, Option<&str>)]| {
            validate_entity(
                &pairs
                    .iter()
                    .map(|(k, n)| (k.to_string(), n.map(str::to_string)))
                    .collect::<Vec<_>>(),
            )
        };
        assert!(e(&[]).is_err());
        assert!(e(&[("user", Some(""))]).is_err());
        assert!(e(&[("group", Some("g"))]).is_err());
        assert!(e(&[("ip", Some("1.2.3.4")), ("user", None)]).is_err());
        assert!(e(&[("ip", Some("not an ip"))]).is_err());
        let both = e(&[("user", Some("alice")), ("client-id", None)]).unwrap();
        assert_eq!(both[0].0, "client-id", "sorted by type");
        assert!(validate_value(&both, PRODUCER_BYTE_RATE, 1024.0).is_ok());
        assert!(validate_value(&both, PRODUCER_BYTE_RATE, 10.5).is_err());
        assert!(validate_value(&both, PRODUCER_BYTE_RATE, 0.0).is_err());
        assert!(validate_value(&both, REQUEST_PERCENTAGE, 12.5).is_ok());
        assert!(validate_value(&both, CONNECTION_CREATION_RATE, 1.0).is_err());
        let ip = entity(&[("ip", None)]);
        assert!(validate_value(&ip, CONNECTION_CREATION_RATE, 5.0).is_ok());
    }

    /// Sets `producer_byte_rate` = `v` for the entity `pairs`.
    fn set_produce_rate(quotas: &mut ClientQuotas, pairs: &[(&str, Option<&str>)], v: f64) {
        quotas
            .entry(entity(pairs))
            .or_default()
            .insert(PRODUCER_BYTE_RATE.to_string(), QuotaValue(v));
    }

    #[test]
    fn the_most_specific_quota_wins() {
        let mut quotas = ClientQuotas::new();
        let mut set =
            |pairs: &[(&str, Option<&str>)], v: f64| set_produce_rate(&mut quotas, pairs, v);
        set(&[("client-id", None)], 1.0);
        set(&[("user", None)], 2.0);
        set(&[("user", Some("alice"))], 3.0);
        set(&[("user", Some("alice")), ("client-id", Some("app"))], 4.0);
        let r = |user, client| resolve(&quotas, user, client, PRODUCER_BYTE_RATE);
        assert_eq!(r("alice", "app"), Some(4.0));
        assert_eq!(r("alice", "other"), Some(3.0));
        assert_eq!(r("bob", "app"), Some(2.0));
        quotas.retain(|e, _| e.iter().all(|(k, _)| k != "user"));
        assert_eq!(
            resolve(&quotas, "bob", "app", PRODUCER_BYTE_RATE),
            Some(1.0)
        );
        assert_eq!(resolve(&quotas, "bob", "app", CONSUMER_BYTE_RATE), None);
    }

    #[test]
    fn a_quota_is_metered_for_the_names_its_entity_holds() {
        let mut quotas = ClientQuotas::new();
        let mut set =
            |pairs: &[(&str, Option<&str>)], v: f64| set_produce_rate(&mut quotas, pairs, v);
        set(&[("user", Some("alice"))], 3.0);
        set(&[("user", Some("bob")), ("client-id", None)], 5.0);
        set(&[("client-id", Some("app"))], 7.0);
        let m = |user, client| {
            let q = resolve_matched(&quotas, user, client, PRODUCER_BYTE_RATE).unwrap();
            (q.value, q.metered_as(user, client))
        };
        // A user's quota: all of alice's client ids together.
        assert_eq!(m("alice", "a1"), (3.0, (Some("alice"), None)));
        assert_eq!(m("alice", "a2"), (3.0, (Some("alice"), None)));
        // User + default client id: each of bob's client ids apart.
        assert_eq!(m("bob", "b1"), (5.0, (Some("bob"), Some("b1"))));
        // A client id's quota: all users of it together.
        assert_eq!(m("carol", "app"), (7.0, (None, Some("app"))));
        assert_eq!(
            resolve_matched(&quotas, "carol", "other", PRODUCER_BYTE_RATE),
            None
        );
    }

    #[test]
    fn describe_filters_as_kafka() {
        let mut quotas = ClientQuotas::new();
        for pairs in [
            &[("user", Some("alice"))][..],
            &[("user", None)][..],
            &[("user", Some("alice")), ("client-id", Some("app"))][..],
            &[("client-id", Some("app"))][..],
        ] {
            quotas
                .entry(entity(pairs))
                .or_default()
                .insert(PRODUCER_BYTE_RATE.to_string(), QuotaValue(1.0));
        }
        let c = |k: &str, t: i8, n: Option<&str>| (k.to_string(), t, n.map(str::to_string));
        let count = |components: &[(String, i8, Option<String>)], strict| {
            describe(&quotas, components, strict).map(|v| v.len())
        };
        assert_eq!(count(&[], false), Ok(4));
        assert_eq!(
            count(&[c("user", MATCH_TYPE_EXACT, Some("alice"))], false),
            Ok(2)
        );
        assert_eq!(
            count(&[c("user", MATCH_TYPE_EXACT, Some("alice"))], true),
            Ok(1)
        );
        assert_eq!(count(&[c("user", MATCH_TYPE_DEFAULT, None)], false), Ok(1));
        assert_eq!(
            count(&[c("user", MATCH_TYPE_SPECIFIED, None)], false),
            Ok(3)
        );
        assert!(count(&[c("user", MATCH_TYPE_EXACT, None)], false).is_err());
        assert!(count(&[c("user", 0, Some("a")), c("user", 1, None)], false).is_err());
        assert!(matches!(
            count(&[c("group", MATCH_TYPE_SPECIFIED, None)], false),
            Err(FilterError::UnsupportedEntityType(_))
        ));
    }
}
