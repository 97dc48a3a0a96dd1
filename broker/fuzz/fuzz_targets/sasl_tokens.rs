//! The SASL authenticator (`SaslServer::on_frame`) fed arbitrary client tokens: a handshake for
//! the mechanism byte 0 picks (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with the
//! unsecured-JWS validator; v0 with bare tokens or v1 with SaslAuthenticate), then each token
//! of the input in turn (tokens are separated by 0xFF bytes, never valid in PLAIN, SCRAM or
//! OAUTHBEARER text). Sessions last `connections.max.reauth.ms`, so an authenticated client
//! re-authenticates (KIP-368: a new handshake two seconds later) and the tokens after go to
//! that exchange. A SCRAM user `user` exists (RFC 7677's credential), so that most inputs get
//! past the user lookup. Each step must answer, never panic. Seed with `broker/fuzz/seeds.py`.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use net::kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use net::kafka_protocol::protocol::{Encodable, StrBytes};
use net::ApiVersionTable;
use replication::metadata::scram::{ScramCredential, ScramCredentials, ScramMechanism};
use sluice_broker::{SaslListener, SaslNow, SaslServer, SaslStep};
use std::sync::{Arc, OnceLock};
use tuning::config::BrokerConfig;

const MECHANISMS: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// The wall clock the target runs at, ms since the epoch (the seeds' tokens expire after it).
const NOW_UNIX_MS: i64 = 1_700_000_000_000;

struct Fixture {
    listener: Arc<SaslListener>,
    versions: ApiVersionTable,
    credentials: ScramCredentials,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut config = BrokerConfig::default();
        config
            .set_all([
                (
                    "sasl.enabled.mechanisms",
                    "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
                ),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \
                     user_alice=\"alice-secret\";",
                ),
                (
                    "listener.name.sasl.oauthbearer.sasl.jaas.config",
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                     required unsecuredValidatorRequiredScope=\"read\";",
                ),
                ("connections.max.reauth.ms", "1000"),
            ])
            .expect("valid keys");
        let listener = Arc::new(SaslListener::new(&config, "SASL").expect("valid listener"));
        let mut versions = ApiVersionTable::new();
        versions.insert(ApiKey::ApiVersions, 0, 3).expect("table");
        versions.insert(ApiKey::SaslHandshake, 0, 1).expect("table");
        versions.insert(ApiKey::SaslAuthenticate, 0, 2).expect("table");
        // RFC 7677's salt; any keys do for reaching the proof check.
        let mut credentials = ScramCredentials::new();
        for m in ScramMechanism::ALL {
            credentials.entry("user".into()).or_default().insert(
                m,
                ScramCredential {
                    salt: b"[m\x99h\x9d\x125\x8e\xec\xa0K\x14\x126\xfa\x81".to_vec(),
                    stored_key: m.stored_key(b"salted"),
                    server_key: m.server_key(b"salted"),
                    iterations: 4096,
                },
            );
        }
        Fixture {
            listener,
            versions,
            credentials,
        }
    })
}

fn frame<R: Encodable>(key: ApiKey, version: i16, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .encode(&mut buf, key.request_header_version(version))
        .expect("header encodes");
    body.encode(&mut buf, version).expect("body encodes");
    buf.freeze()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let mechanism = MECHANISMS[usize::from(pick % 4)];
    let version = i16::from(pick & 0x80 == 0);
    let mut server = SaslServer::new(f.listener.clone(), "SeRvErNoNcE".to_owned());
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_static_str(mechanism));
    let handshake = frame(ApiKey::SaslHandshake, version, &handshake);
    let mut now = SaslNow {
        instant: std::time::Instant::now(),
        unix_ms: NOW_UNIX_MS,
    };
    let step = server.on_frame(handshake.clone(), &f.versions, &f.credentials, now);
    assert!(matches!(step, SaslStep::Answer(_)), "an enabled mechanism is accepted");
    for token in rest.split(|&b| b == 0xff) {
        let token = Bytes::copy_from_slice(token);
        let input = if version == 0 {
            token
        } else {
            let req = SaslAuthenticateRequest::default().with_auth_bytes(token);
            frame(ApiKey::SaslAuthenticate, 2, &req)
        };
        match server.on_frame(input, &f.versions, &f.credentials, now) {
            SaslStep::Answer(_) => {}
            SaslStep::Authenticated { principal, .. } => {
                assert!(principal.starts_with("User:"));
                assert!(server.is_authenticated());
                // Re-authenticate two seconds later, with the same mechanism.
                now.instant += std::time::Duration::from_secs(2);
                now.unix_ms += 2000;
                let _ = server.on_authenticated_frame(&handshake, now.instant, || {
                    Some("SeRvErNoNcE2".to_owned())
                });
                if server.is_authenticated() {
                    return;
                }
                let step = server.on_frame(handshake.clone(), &f.versions, &f.credentials, now);
                assert!(matches!(step, SaslStep::Answer(_)), "the same mechanism is accepted");
            }
            SaslStep::AnswerThenClose { .. } | SaslStep::Close | SaslStep::Serve => return,
        }
    }
});
