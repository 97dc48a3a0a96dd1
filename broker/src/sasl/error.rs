//! [`SaslConfigError`]: why a SASL listener's (or the inter-broker client's) settings cannot
//! be used.

/// The server callback handlers that select Kafka's unsecured-JWS validator.
pub(super) const UNSECURED_HANDLER_CLASS: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// Why a SASL listener's settings cannot be used (the broker does not start).
#[derive(Debug, thiserror::Error)]
pub enum SaslConfigError {
    /// `PLAIN` or `OAUTHBEARER` is enabled but no `sasl.jaas.config` names its login module.
    #[error(
        "listener {listener}: {mechanism} is enabled but neither {key} nor sasl.jaas.config is set"
    )]
    NoJaasConfig {
        listener: String,
        mechanism: String,
        key: String,
    },
    /// The JAAS entry does not parse or names another login module.
    #[error("{key}: {why}")]
    BadJaasConfig { key: String, why: String },
    /// `sasl.server.callback.handler.class` names a handler Sluice does not have.
    #[error(
        "{key}={class}: Sluice serves {UNSECURED_HANDLER_CLASS} and {}",
        super::oauthbearer::JWKS_HANDLER_CLASS
    )]
    UnknownCallbackHandler { key: String, class: String },
    /// The JWKS validator cannot be set up.
    #[error(transparent)]
    Jwks(#[from] super::oauthbearer::JwksConfigError),
    /// None of `sasl.enabled.mechanisms` is served by Sluice.
    #[error("listener {listener}: sasl.enabled.mechanisms={enabled}: Sluice serves only {served}")]
    NoServedMechanism {
        listener: String,
        enabled: String,
        served: String,
    },
}
