//! SCRAM credentials as KRaft keeps them (KIP-554, `ScramControlManager` and `ScramImage`):
//! per user and mechanism, the salt, `StoredKey`, `ServerKey` and iteration count of RFC 5802
//! (never the password), set by [`super::ControllerOp::AlterUserScramCredentials`] through
//! `UserScramCredentialRecord`s and removed by `RemoveUserScramCredentialRecord`s. The broker's
//! SCRAM authenticator checks a client's proof against them.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use std::collections::BTreeMap;

/// Fewest iterations a credential may have (Kafka's `ScramMechanism.minIterations`, both
/// mechanisms).
pub const ITERATIONS_MIN: i32 = 4096;
/// Most iterations a credential may have (Kafka's `ScramControlManager.MAX_ITERATIONS`).
pub const ITERATIONS_MAX: i32 = 16384;

/// A SCRAM mechanism, with Kafka's wire type (`org.apache.kafka.clients.admin.ScramMechanism`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (RFC 7677), type 1.
    Sha256,
    /// `SCRAM-SHA-512`, type 2.
    Sha512,
}

impl ScramMechanism {
    /// Both mechanisms, in type order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The mechanism of wire type `t` (1 or 2); `None` for Kafka's UNKNOWN (0) and the rest.
    pub fn from_type(t: i8) -> Option<ScramMechanism> {
        match t {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The mechanism's wire type.
    pub fn wire_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The SASL mechanism name (`SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exact, upper case).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// `H(data)`: the mechanism's hash.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `HMAC(key, data)` with the mechanism's hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
        match self {
            ScramMechanism::Sha256 => {
                let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
                    .expect("HMAC accepts keys of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut mac = <Hmac<Sha512> as Mac>::new_from_slice(key)
                    .expect("HMAC accepts keys of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// RFC 5802's `StoredKey := H(HMAC(SaltedPassword, "Client Key"))`.
    pub fn stored_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hash(&self.hmac(salted_password, b"Client Key"))
    }

    /// RFC 5802's `ServerKey := HMAC(SaltedPassword, "Server Key")`.
    pub fn server_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Server Key")
    }
}

/// One user's credential for one mechanism (Kafka's `ScramCredential`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Keys stay out of logs.
impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Credentials by user name, then mechanism (no user without one).
pub type ScramCredentials = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// One upsertion of an AlterUserScramCredentials: the client computed the salted password
/// (`Hi(password, salt, iterations)`); the controller keeps only the keys derived from it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub name: String,
    /// Wire type (see [`ScramMechanism::from_type`]).
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

/// The salted password stays out of logs.
impl std::fmt::Debug for ScramUpsertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramUpsertion")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Why one user's alteration was refused (`ScramControlManager`), with Kafka's messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ScramAlterError {
    /// DUPLICATE_RESOURCE: the user appears twice in the request.
    #[error("A user credential cannot be altered twice in the same request")]
    Duplicate,
    /// RESOURCE_NOT_FOUND: deleting a credential that does not exist.
    #[error("Attempt to delete a user credential that does not exist")]
    NotFound,
    /// UNACCEPTABLE_CREDENTIAL: an empty user name or an iteration count out of bounds.
    #[error("{0}")]
    Unacceptable(String),
    /// UNSUPPORTED_SASL_MECHANISM: a mechanism type other than 1 and 2.
    #[error("Unknown SCRAM mechanism")]
    UnknownMechanism,
}

/// Why DescribeUserScramCredentials refused a named user (`ScramImage.describe`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramDescribeError {
    /// DUPLICATE_RESOURCE: the user is named twice.
    #[error("Cannot describe SCRAM credentials for the same user twice in a single request: {0}")]
    Duplicate(String),
    /// RESOURCE_NOT_FOUND: the user has no credential.
    #[error("Attempt to describe a user credential that does not exist: {0}")]
    NotFound(String),
}

/// One user's answer to DescribeUserScramCredentials: its mechanisms and iteration counts, or
/// why not.
pub type ScramDescription = (
    String,
    Result<Vec<(ScramMechanism, i32)>, ScramDescribeError>,
);

/// One user's result of an AlterUserScramCredentials.
pub type ScramAlterResult = (String, Result<(), ScramAlterError>);

/// What DescribeUserScramCredentials answers, as Kafka's `ScramImage.describe`: `users`
/// `None` or empty: every user with a credential; else each named user (in request order) with
/// its mechanisms and iteration counts, or why not.
pub fn describe(credentials: &ScramCredentials, users: Option<&[String]>) -> Vec<ScramDescription> {
    let infos = |m: &BTreeMap<ScramMechanism, ScramCredential>| {
        m.iter()
            .map(|(mechanism, c)| (*mechanism, c.iterations))
            .collect::<Vec<_>>()
    };
    match users {
        None | Some([]) => credentials
            .iter()
            .map(|(user, m)| (user.clone(), Ok(infos(m))))
            .collect(),
        Some(users) => users
            .iter()
            .enumerate()
            .map(|(i, user)| {
                let result = if users[..i].contains(user) || users[i + 1..].contains(user) {
                    Err(ScramDescribeError::Duplicate(user.clone()))
                } else {
                    credentials
                        .get(user)
                        .map(infos)
                        .ok_or_else(|| ScramDescribeError::NotFound(user.clone()))
                };
                (user.clone(), result)
            })
            .collect(),
    }
}

/// Checks a name and mechanism type as Kafka's `validateScramUsernameAndMechanism`.
pub fn validate_name_and_mechanism(
    name: &str,
    mechanism: i8,
) -> Result<ScramMechanism, ScramAlterError> {
    if name.is_empty() {
        return Err(ScramAlterError::Unacceptable(
            "Username must not be empty".to_string(),
        ));
    }
    ScramMechanism::from_type(mechanism).ok_or(ScramAlterError::UnknownMechanism)
}

/// Checks an upsertion as Kafka's `validateUpsertion`: name, mechanism, then the iteration
/// count within [`ITERATIONS_MIN`]..=[`ITERATIONS_MAX`].
pub fn validate_upsertion(u: &ScramUpsertion) -> Result<ScramMechanism, ScramAlterError> {
    let mechanism = validate_name_and_mechanism(&u.name, u.mechanism)?;
    if u.iterations < ITERATIONS_MIN {
        return Err(ScramAlterError::Unacceptable(
            "Too few iterations".to_string(),
        ));
    }
    if u.iterations > ITERATIONS_MAX {
        return Err(ScramAlterError::Unacceptable(
            "Too many iterations".to_string(),
        ));
    }
    Ok(mechanism)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(iterations: i32) -> ScramCredential {
        ScramCredential {
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations,
        }
    }

    #[test]
    fn describe_all_named_unknown_and_duplicate() {
        let mut c = ScramCredentials::new();
        c.entry("alice".into())
            .or_default()
            .insert(ScramMechanism::Sha512, cred(8192));
        c.entry("alice".into())
            .or_default()
            .insert(ScramMechanism::Sha256, cred(4096));
        let all = describe(&c, None);
        assert_eq!(
            all,
            vec![(
                "alice".to_string(),
                Ok(vec![
                    (ScramMechanism::Sha256, 4096),
                    (ScramMechanism::Sha512, 8192)
                ])
            )]
        );
        assert_eq!(describe(&c, Some(&[])), all);
        let named = describe(
            &c,
            Some(&["bob".to_string(), "alice".into(), "alice".into()]),
        );
        assert_eq!(
            named[0].1,
            Err(ScramDescribeError::NotFound("bob".to_string()))
        );
        assert_eq!(
            named[1].1,
            Err(ScramDescribeError::Duplicate("alice".to_string()))
        );
    }

    #[test]
    fn upsertion_bounds_as_kafka() {
        let u = |name: &str, mechanism, iterations| ScramUpsertion {
            name: name.into(),
            mechanism,
            iterations,
            salt: vec![],
            salted_password: vec![],
        };
        assert_eq!(
            validate_upsertion(&u("a", 1, 4096)),
            Ok(ScramMechanism::Sha256)
        );
        assert_eq!(
            validate_upsertion(&u("a", 2, 16384)),
            Ok(ScramMechanism::Sha512)
        );
        assert_eq!(
            validate_upsertion(&u("a", 1, 4095)),
            Err(ScramAlterError::Unacceptable("Too few iterations".into()))
        );
        assert_eq!(
            validate_upsertion(&u("a", 1, 16385)),
            Err(ScramAlterError::Unacceptable("Too many iterations".into()))
        );
        assert_eq!(
            validate_upsertion(&u("a", 0, 8192)),
            Err(ScramAlterError::UnknownMechanism)
        );
        assert!(matches!(
            validate_upsertion(&u("", 1, 8192)),
            Err(ScramAlterError::Unacceptable(_))
        ));
    }
}
