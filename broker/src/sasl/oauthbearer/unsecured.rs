//! Kafka's unsecured-JWS validator (`OAuthBearerUnsecuredJws` with
//! `OAuthBearerUnsecuredValidatorCallbackHandler`): a token is `<header>.<claims>.` — base64
//! JSON, `alg` `none`, no signature — whose claims carry the principal (option
//! `unsecuredValidatorPrincipalClaimName`, default `sub`), an expiry `exp` (seconds), perhaps
//! an issue time `iat` and a scope (option `unsecuredValidatorScopeClaimName`, default
//! `scope`). Meant for tests: it trusts whatever the client says.

use std::collections::BTreeMap;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

use super::token::{Refusal, ValidToken};

/// The validator's options, from the listener's `OAuthBearerLoginModule` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredOptions {
    /// `unsecuredValidatorPrincipalClaimName` (default `sub`).
    pub principal_claim: String,
    /// `unsecuredValidatorScopeClaimName` (default `scope`).
    pub scope_claim: String,
    /// `unsecuredValidatorRequiredScope`: space-separated scopes every token must have.
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs` (default 0).
    pub clock_skew_ms: i64,
}

impl UnsecuredOptions {
    /// The options of a JAAS entry's `options`.
    ///
    /// # Errors
    /// Kafka's message for a clock skew that is not a non-negative integer.
    pub fn from_jaas(options: &BTreeMap<String, String>) -> Result<UnsecuredOptions, String> {
        let named = |key: &str, default: &str| {
            options
                .get(key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .unwrap_or(default)
                .to_owned()
        };
        let skew = named("unsecuredValidatorAllowableClockSkewMs", "0");
        let clock_skew_ms = skew
            .parse::<i32>()
            .ok()
            .filter(|s| *s >= 0)
            .ok_or_else(|| format!("Allowable clock skew millis must not be negative: {skew}"))?;
        Ok(UnsecuredOptions {
            principal_claim: named("unsecuredValidatorPrincipalClaimName", "sub"),
            scope_claim: named("unsecuredValidatorScopeClaimName", "scope"),
            required_scope: named("unsecuredValidatorRequiredScope", "")
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            clock_skew_ms: i64::from(clock_skew_ms),
        })
    }
}

/// A claim's value as Kafka's validator sees it: numbers, lists (of their elements' text) and
/// anything else as text.
#[derive(Debug)]
enum Claim {
    Number(f64),
    List(Vec<String>),
    Text(String),
}

impl Claim {
    fn of(value: &serde_json::Value) -> Claim {
        match value {
            serde_json::Value::Number(n) => Claim::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::Array(items) => Claim::List(items.iter().map(text).collect()),
            other => Claim::Text(text(other)),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Claim::Number(_) => "Number",
            Claim::List(_) => "List",
            Claim::Text(_) => "String",
        }
    }
}

/// Jackson's `asText` of a value.
fn text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Null => "null".to_owned(),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => String::new(),
    }
}

/// Base64 with or without padding, in the URL-safe or the standard alphabet (Kafka's
/// login module writes the URL-safe one; other clients differ).
fn decode_base64(part: &str) -> Option<Vec<u8>> {
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    GeneralPurpose::new(&base64::alphabet::URL_SAFE, config)
        .decode(part)
        .or_else(|_| GeneralPurpose::new(&base64::alphabet::STANDARD, config).decode(part))
        .ok()
}

/// A JWS part's JSON object, its members as [`Claim`]s.
fn json_part(part: &str) -> Result<BTreeMap<String, Claim>, Refusal> {
    let bytes = decode_base64(part)
        .ok_or_else(|| Refusal::invalid("malformed Base64 URL encoded value"))?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| Refusal::invalid("malformed JSON"))?;
    let serde_json::Value::Object(members) = value else {
        return Err(Refusal::invalid("malformed JSON"));
    };
    Ok(members
        .iter()
        .map(|(k, v)| (k.clone(), Claim::of(v)))
        .collect())
}

/// Claim `name` as a number (seconds), if present.
fn number_claim(claims: &BTreeMap<String, Claim>, name: &str) -> Result<Option<f64>, Refusal> {
    match claims.get(name) {
        None => Ok(None),
        Some(Claim::Number(n)) => Ok(Some(*n)),
        Some(other) => Err(Refusal::invalid(format!(
            "The '{name}' claim was not of type Number: {}",
            other.type_name()
        ))),
    }
}

/// The token's scope (a string claim is one scope; a list, several).
fn scope(claims: &BTreeMap<String, Claim>, name: &str) -> Result<Vec<String>, Refusal> {
    match claims.get(name) {
        None => Ok(Vec::new()),
        Some(Claim::Text(s)) if s.trim().is_empty() => Ok(Vec::new()),
        Some(Claim::Text(s)) => Ok(vec![s.trim().to_owned()]),
        Some(Claim::List(items)) => Ok(items
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()),
        Some(Claim::Number(_)) => Err(Refusal::invalid(format!(
            "The '{name}' claim was not of type List: Number"
        ))),
    }
}

/// Seconds of a claim as ms (Kafka rounds).
fn seconds_to_ms(seconds: f64) -> i64 {
    // A float's cast saturates: absurd values become i64::MIN/MAX, not UB.
    (seconds * 1000.0).round() as i64
}

/// Checks `token` at `now_unix_ms`, in the order Kafka checks.
///
/// # Errors
/// A [`Refusal`] with Kafka's reason.
pub fn validate(
    token: &str,
    options: &UnsecuredOptions,
    now_unix_ms: i64,
) -> Result<ValidToken, Refusal> {
    if token.contains("..") {
        return Err(Refusal::invalid(
            "Malformed compact serialization contains '..'",
        ));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(Refusal::invalid(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
        ));
    };
    let header = json_part(header)?;
    let claims = json_part(claims)?;
    match header.get("alg") {
        Some(Claim::Text(alg)) if alg == "none" => {}
        None => return Err(Refusal::invalid("JWS header must have an Algorithm value")),
        Some(_) => {
            return Err(Refusal::invalid(
                "Unsecured JWS must have 'none' for an algorithm",
            ))
        }
    }
    if !signature.is_empty() {
        return Err(Refusal::invalid(
            "Unsecured JWS must not contain a digital signature",
        ));
    }
    let scope = scope(&claims, &options.scope_claim)?;
    let exp = number_claim(&claims, "exp")?
        .ok_or_else(|| Refusal::invalid("No expiration time in JWT"))?;
    let principal = match claims.get(&options.principal_claim) {
        Some(Claim::Text(p)) if !p.trim().is_empty() => p.clone(),
        Some(Claim::Text(_)) | None => {
            return Err(Refusal::invalid(format!(
                "No principal name in JWT claim: {}",
                options.principal_claim
            )))
        }
        Some(other) => {
            return Err(Refusal::invalid(format!(
                "The '{}' claim was not of type String: {}",
                options.principal_claim,
                other.type_name()
            )))
        }
    };
    let iat = number_claim(&claims, "iat")?;
    let skew = options.clock_skew_ms;
    if let Some(iat) = iat {
        if seconds_to_ms(iat) > now_unix_ms.saturating_add(skew) {
            return Err(Refusal::invalid(format!(
                "The Issued At value ({iat} seconds) was after the indicated time ({now_unix_ms} ms) \
                 plus allowable clock skew ({skew} ms)"
            )));
        }
    }
    if now_unix_ms.saturating_sub(skew) >= seconds_to_ms(exp) {
        return Err(Refusal::invalid(format!(
            "The indicated time ({now_unix_ms} ms) minus allowable clock skew ({skew} ms) was on or \
             after the Expiration Time value ({exp} seconds)"
        )));
    }
    if let Some(iat) = iat {
        if exp <= iat {
            return Err(Refusal::invalid(format!(
                "The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} seconds)"
            )));
        }
    }
    if let Some(missing) = options.required_scope.iter().find(|s| !scope.contains(s)) {
        return Err(Refusal {
            why: format!("The provided scope ({scope:?}) was missing a required scope ({missing})"),
            scope: Some(format!("[{}]", options.required_scope.join(", "))),
        });
    }
    Ok(ValidToken {
        principal,
        expiry_unix_ms: seconds_to_ms(exp),
    })
}
