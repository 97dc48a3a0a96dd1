//! Kafka's JWKS validator (KIP-768, `OAuthBearerValidatorCallbackHandler` with
//! `ValidatorAccessTokenValidator`): a token is a signed JWT (`alg` never `none`) whose
//! signature verifies with the key its `kid` names in the JWKS of
//! `sasl.oauthbearer.jwks.endpoint.url`; it must carry `exp` and `iat`; `exp` and `nbf` are
//! checked with `sasl.oauthbearer.clock.skew.seconds` of slack (default 30); its `aud` must
//! name one of `sasl.oauthbearer.expected.audience` when that is set (and a token with an
//! `aud` is refused when it is not, as jose4j refuses it), its `iss` must equal
//! `sasl.oauthbearer.expected.issuer` when that is set. The principal is the
//! `sasl.oauthbearer.sub.claim.name` claim (default `sub`).
//!
//! The keys are shared by every shard (read under a lock, written only by the refresher
//! thread of `jwks_fetch`); signatures are checked by the `jsonwebtoken` crate.

use std::sync::mpsc::SyncSender;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use tuning::config::BrokerConfig;

use super::jwks_fetch::{self, FetchError};
use super::token::{Refusal, ValidToken};

/// Kafka's default `sasl.oauthbearer.jwks.endpoint.refresh.ms` (one hour).
const DEFAULT_REFRESH_MS: u64 = 3_600_000;

/// Kafka's default `sasl.oauthbearer.clock.skew.seconds`.
const DEFAULT_CLOCK_SKEW_SECONDS: u64 = 30;

/// Why the JWKS validator cannot be set up (the broker does not start).
#[derive(Debug, thiserror::Error)]
pub enum JwksConfigError {
    /// `sasl.oauthbearer.jwks.endpoint.url` is not set.
    #[error("listener {listener}: {handler} needs sasl.oauthbearer.jwks.endpoint.url")]
    NoUrl { listener: String, handler: String },
    /// A `file:` key set cannot be read (Kafka reads it once, at start).
    #[error("sasl.oauthbearer.jwks.endpoint.url: {0}")]
    Fetch(#[from] FetchError),
    /// The refresher thread did not start.
    #[error("the JWKS refresher thread did not start: {0}")]
    Thread(#[from] std::io::Error),
}

/// The validator's settings and its current key set.
#[derive(Debug)]
pub struct JwksValidator {
    /// The key set, replaced by the refresher.
    keys: Arc<RwLock<JwkSet>>,
    /// Nudges the refresher (none for a `file:` set, read once).
    refresh_now: Option<SyncSender<()>>,
    /// `sasl.oauthbearer.expected.audience` (empty: not checked).
    audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name`.
    sub_claim: String,
    /// `sasl.oauthbearer.scope.claim.name`.
    scope_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    clock_skew_seconds: u64,
}

impl JwksValidator {
    /// The validator of `listener`, its keys fetched once now (blocking: at start, off the
    /// shards); an `http(s)://` set is then refreshed by a thread of its own.
    ///
    /// # Errors
    /// [`JwksConfigError`]: no URL, or a `file:` set that cannot be read.
    pub fn new(config: &BrokerConfig, listener: &str) -> Result<JwksValidator, JwksConfigError> {
        let get = |key: &str| {
            config
                .listener_property(listener, key)
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let url =
            get("sasl.oauthbearer.jwks.endpoint.url").ok_or_else(|| JwksConfigError::NoUrl {
                listener: listener.to_owned(),
                handler: super::token::JWKS_HANDLER_CLASS.to_owned(),
            })?;
        let number = |key: &str, default: u64| {
            get(key)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(default)
        };
        let (keys, refresh_now) = if url.starts_with("file:") {
            (Arc::new(RwLock::new(jwks_fetch::fetch(url)?)), None)
        } else {
            let initial = jwks_fetch::fetch(url).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "JWKS fetch failed at start; tokens are refused until a refresh succeeds");
                JwkSet { keys: Vec::new() }
            });
            let keys = Arc::new(RwLock::new(initial));
            let refresh = Duration::from_millis(number(
                "sasl.oauthbearer.jwks.endpoint.refresh.ms",
                DEFAULT_REFRESH_MS,
            ));
            let nudge = jwks_fetch::spawn_refresher(url.to_owned(), refresh, keys.clone())?;
            (keys, Some(nudge))
        };
        Ok(JwksValidator {
            keys,
            refresh_now,
            audience: get("sasl.oauthbearer.expected.audience")
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|a| !a.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            issuer: get("sasl.oauthbearer.expected.issuer").map(str::to_owned),
            sub_claim: get("sasl.oauthbearer.sub.claim.name")
                .unwrap_or("sub")
                .to_owned(),
            scope_claim: get("sasl.oauthbearer.scope.claim.name")
                .unwrap_or("scope")
                .to_owned(),
            clock_skew_seconds: number(
                "sasl.oauthbearer.clock.skew.seconds",
                DEFAULT_CLOCK_SKEW_SECONDS,
            ),
        })
    }

    /// A validator over a fixed key set.
    #[cfg(test)]
    pub fn with_keys(keys: JwkSet, audience: Vec<String>, issuer: Option<String>) -> JwksValidator {
        JwksValidator {
            keys: Arc::new(RwLock::new(keys)),
            refresh_now: None,
            audience,
            issuer,
            sub_claim: "sub".to_owned(),
            scope_claim: "scope".to_owned(),
            clock_skew_seconds: DEFAULT_CLOCK_SKEW_SECONDS,
        }
    }

    /// The key `header` names; an unknown key id nudges the refresher (the token is refused
    /// all the same, as Kafka refuses it).
    fn key(&self, header: &jsonwebtoken::Header) -> Result<DecodingKey, Refusal> {
        let keys = self
            .keys
            .read()
            .map_err(|_| Refusal::invalid("the JWKS lock is poisoned"))?;
        let jwk = match &header.kid {
            Some(kid) => keys.find(kid),
            // No kid: the one key of the set, if there is just one.
            None => match keys.keys.as_slice() {
                [only] => Some(only),
                _ => None,
            },
        };
        let Some(jwk) = jwk else {
            if let Some(nudge) = &self.refresh_now {
                // Full: a refresh is already asked for.
                let _ = nudge.try_send(());
            }
            return Err(Refusal::invalid(format!(
                "Unable to find a verification key for key id {:?}",
                header.kid
            )));
        };
        if let Some(alg) = &jwk.common.key_algorithm {
            if format!("{alg:?}") != format!("{:?}", header.alg) {
                return Err(Refusal::invalid(format!(
                    "the key is for {alg:?}, the token is signed with {:?}",
                    header.alg
                )));
            }
        }
        DecodingKey::from_jwk(jwk).map_err(|e| Refusal::invalid(format!("unusable JWK: {e}")))
    }

    /// Checks `token` at `now_unix_ms`.
    ///
    /// # Errors
    /// A [`Refusal`] saying why.
    pub fn validate(&self, token: &str, now_unix_ms: i64) -> Result<ValidToken, Refusal> {
        let refuse = |e: jsonwebtoken::errors::Error| {
            Refusal::invalid(format!("Could not validate the access token: {e}"))
        };
        let header = jsonwebtoken::decode_header(token).map_err(refuse)?;
        let key = self.key(&header)?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.clock_skew_seconds;
        validation.validate_nbf = true;
        if self.audience.is_empty() {
            validation.set_required_spec_claims(&["exp"]);
        } else {
            // jose4j requires the claim once an audience is expected.
            validation.set_required_spec_claims(&["exp", "aud"]);
            validation.set_audience(&self.audience);
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
        }
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token,
            &key,
            &validation,
        )
        .map_err(refuse)?;
        let claims = data.claims;
        // `decode` judged `exp` against the system clock; `now_unix_ms` is the caller's.
        let seconds = |name: &str| claims.get(name).and_then(serde_json::Value::as_f64);
        let exp = seconds("exp").ok_or_else(|| Refusal::invalid("exp is not a number"))?;
        if seconds("iat").is_none() {
            return Err(Refusal::invalid(
                "The 'iat' claim is missing or not a number",
            ));
        }
        let skew_ms =
            i64::try_from(self.clock_skew_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
        // A float's cast saturates: absurd values become i64::MIN/MAX, not UB.
        let expiry_unix_ms = (exp * 1000.0).round() as i64;
        if now_unix_ms.saturating_sub(skew_ms) >= expiry_unix_ms {
            return Err(Refusal::invalid("The token has expired"));
        }
        match claims.get(&self.scope_claim) {
            None | Some(serde_json::Value::String(_) | serde_json::Value::Array(_)) => {}
            Some(_) => {
                return Err(Refusal::invalid(format!(
                    "The '{}' claim is neither a string nor a list",
                    self.scope_claim
                )))
            }
        }
        let principal = match claims.get(&self.sub_claim) {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            _ => {
                return Err(Refusal::invalid(format!(
                    "The '{}' claim is missing, blank or not a string",
                    self.sub_claim
                )))
            }
        };
        Ok(ValidToken {
            principal,
            expiry_unix_ms,
        })
    }
}
