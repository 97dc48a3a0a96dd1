//! The authenticator's steps, fed encoded frames as a client sends them.

use super::*;
use bytes::BytesMut;
use net::kafka_protocol::messages::{RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest};
use net::kafka_protocol::protocol::Decodable;

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

fn listener(pairs: &[(&str, &str)]) -> Result<SaslListener, SaslConfigError> {
    let mut c = BrokerConfig::default();
    c.set_all(pairs.iter().copied()).expect("valid keys");
    SaslListener::new(&c, "SASL")
}

fn server() -> SaslServer {
    let l = listener(&[
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"),
        ("listener.name.sasl.plain.sasl.jaas.config", JAAS),
    ])
    .expect("valid");
    SaslServer::new(Arc::new(l), RFC_SERVER_NONCE.to_owned())
}

fn versions() -> ApiVersionTable {
    let mut t = ApiVersionTable::new();
    t.insert(ApiKey::ApiVersions, 0, 3).expect("table");
    t.insert(ApiKey::SaslHandshake, 0, 1).expect("table");
    t.insert(ApiKey::SaslAuthenticate, 0, 2).expect("table");
    t.insert(ApiKey::Metadata, 0, 12).expect("table");
    t
}

/// A request frame without its size prefix (what `decode_frame` hands on).
fn frame<R: Encodable>(key: ApiKey, version: i16, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .encode(&mut buf, key.request_header_version(version))
        .expect("header");
    body.encode(&mut buf, version).expect("body");
    buf.freeze()
}

fn handshake(mechanism: &'static str, version: i16) -> Bytes {
    let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    frame(ApiKey::SaslHandshake, version, &req)
}

/// RFC 7677 §3's example exchange (user "user", password "pencil").
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_CLIENT_FIRST: &[u8] = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_CLIENT_FINAL: &[u8] = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &[u8] = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

/// The RFC example's credential, as AlterUserScramCredentials stores it.
fn rfc_credentials() -> ScramCredentials {
    use base64::Engine;
    use replication::metadata::scram::ScramCredential;
    let salt = base64::engine::general_purpose::STANDARD
        .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
        .expect("base64");
    let mut salted = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(b"pencil", &salt, 4096, &mut salted);
    let m = ScramMechanism::Sha256;
    let mut c = ScramCredentials::new();
    c.entry("user".into()).or_default().insert(
        m,
        ScramCredential {
            salt,
            stored_key: m.stored_key(&salted),
            server_key: m.server_key(&salted),
            iterations: 4096,
        },
    );
    c
}

/// A fixed wall clock (ms since the epoch) with the monotonic clock of the test.
const NOW_UNIX_MS: i64 = 1_700_000_000_000;

fn now() -> Now {
    Now {
        instant: Instant::now(),
        unix_ms: NOW_UNIX_MS,
    }
}

fn authenticate(token: &'static [u8]) -> Bytes {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token));
    frame(ApiKey::SaslAuthenticate, 2, &req)
}

/// The body of a response frame (size prefix and header skipped).
fn body<R: Decodable>(answer: &Bytes, header_bytes: usize, version: i16) -> R {
    let mut b = answer.slice(4 + header_bytes..);
    R::decode(&mut b, version).expect("response decodes")
}

#[test]
fn plain_success_names_the_principal() {
    let mut s = server();
    let Step::Answer(a) = s.on_frame(
        handshake("PLAIN", 1),
        &versions(),
        &ScramCredentials::new(),
        now(),
    ) else {
        panic!("handshake answered");
    };
    let r: SaslHandshakeResponse = body(&a, 4, 1);
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.mechanisms,
        vec![
            StrBytes::from_static_str("PLAIN"),
            StrBytes::from_static_str("SCRAM-SHA-256")
        ]
    );
    match s.on_frame(
        authenticate(b"\0alice\0alice-secret"),
        &versions(),
        &ScramCredentials::new(),
        now(),
    ) {
        Step::Authenticated { answer, principal } => {
            assert_eq!(principal, "User:alice");
            // SaslAuthenticate v2 has a flexible response header (one tagged-field byte).
            let r: SaslAuthenticateResponse = body(&answer, 5, 2);
            assert_eq!(r.error_code, 0);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn failures_answer_as_kafka() {
    for token in [
        &b"\0alice\0wrong"[..],
        b"\0nobody\0alice-secret",
        b"\0alice\0",
        b"bob\0alice\0alice-secret",
        b"alice-secret",
    ] {
        let mut s = server();
        assert!(matches!(
            s.on_frame(
                handshake("PLAIN", 1),
                &versions(),
                &ScramCredentials::new(),
                now()
            ),
            Step::Answer(_)
        ));
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
        match s.on_frame(
            frame(ApiKey::SaslAuthenticate, 2, &req),
            &versions(),
            &ScramCredentials::new(),
            now(),
        ) {
            Step::AnswerThenClose { answer, delayed } => {
                assert!(delayed);
                let r: SaslAuthenticateResponse = body(&answer, 5, 2);
                assert_eq!(r.error_code, 58, "{token:?}");
                assert!(r.error_message.is_some());
            }
            other => panic!("{token:?}: {other:?}"),
        }
    }
}

#[test]
fn unsupported_mechanism_and_out_of_order_requests() {
    let mut s = server();
    match s.on_frame(
        handshake("SCRAM-SHA-512", 1),
        &versions(),
        &ScramCredentials::new(),
        now(),
    ) {
        Step::AnswerThenClose { answer, delayed } => {
            assert!(!delayed);
            let r: SaslHandshakeResponse = body(&answer, 4, 1);
            assert_eq!(r.error_code, 33);
        }
        other => panic!("{other:?}"),
    }
    // ApiVersions is served before the handshake; Metadata is not.
    let api_versions = frame(
        ApiKey::ApiVersions,
        0,
        &net::kafka_protocol::messages::ApiVersionsRequest::default(),
    );
    assert!(matches!(
        server().on_frame(api_versions, &versions(), &ScramCredentials::new(), now()),
        Step::Serve
    ));
    let metadata = frame(
        ApiKey::Metadata,
        12,
        &net::kafka_protocol::messages::MetadataRequest::default(),
    );
    assert!(matches!(
        server().on_frame(
            metadata.clone(),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Close
    ));
    // SaslAuthenticate before the handshake, Metadata between the two, garbage: closed.
    assert!(matches!(
        server().on_frame(
            authenticate(b"\0a\0b"),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Close
    ));
    let mut s = server();
    assert!(matches!(
        s.on_frame(
            handshake("PLAIN", 1),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Answer(_)
    ));
    assert!(matches!(
        s.on_frame(metadata, &versions(), &ScramCredentials::new(), now()),
        Step::Close
    ));
    assert!(matches!(
        server().on_frame(
            Bytes::from_static(b"\xff"),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Close
    ));
}

#[test]
fn v0_handshake_takes_a_bare_token() {
    let mut s = server();
    assert!(matches!(
        s.on_frame(
            handshake("PLAIN", 0),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Answer(_)
    ));
    match s.on_frame(
        Bytes::from_static(b"\0admin\0admin-secret"),
        &versions(),
        &ScramCredentials::new(),
        now(),
    ) {
        Step::Authenticated { answer, principal } => {
            assert_eq!(principal, "User:admin");
            assert_eq!(&answer[..], &[0, 0, 0, 0]);
        }
        other => panic!("{other:?}"),
    }
    let mut s = server();
    assert!(matches!(
        s.on_frame(
            handshake("PLAIN", 0),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Answer(_)
    ));
    assert!(matches!(
        s.on_frame(
            Bytes::from_static(b"\0admin\0no"),
            &versions(),
            &ScramCredentials::new(),
            now()
        ),
        Step::Close
    ));
}

#[test]
fn listener_settings_as_kafka_reads_them() {
    let err = listener(&[("listener.name.sasl.plain.sasl.jaas.config", JAAS)])
        .expect_err("GSSAPI by default");
    assert!(
        err.to_string().contains("Sluice serves only PLAIN"),
        "{err}"
    );
    let err = listener(&[("sasl.enabled.mechanisms", "PLAIN")]).expect_err("no users");
    assert!(err.to_string().contains("plain.sasl.jaas.config"), "{err}");
    let err = listener(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("sasl.jaas.config", "com.example.Other required;"),
    ])
    .expect_err("another module");
    assert!(err.to_string().contains("PlainLoginModule"), "{err}");
    listener(&[
        ("sasl.enabled.mechanisms", "plain"),
        ("sasl.jaas.config", JAAS),
    ])
    .expect("broker-wide sasl.jaas.config");
}

#[test]
fn scram_over_sasl_authenticate() {
    let creds = rfc_credentials();
    let mut s = server();
    assert!(matches!(
        s.on_frame(handshake("SCRAM-SHA-256", 1), &versions(), &creds, now()),
        Step::Answer(_)
    ));
    let Step::Answer(a) = s.on_frame(authenticate(RFC_CLIENT_FIRST), &versions(), &creds, now())
    else {
        panic!("server-first answered");
    };
    let r: SaslAuthenticateResponse = body(&a, 5, 2);
    assert_eq!(r.error_code, 0);
    assert!(r
        .auth_bytes
        .starts_with(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s="));
    match s.on_frame(authenticate(RFC_CLIENT_FINAL), &versions(), &creds, now()) {
        Step::Authenticated { answer, principal } => {
            assert_eq!(principal, "User:user");
            let r: SaslAuthenticateResponse = body(&answer, 5, 2);
            assert_eq!(&r.auth_bytes[..], RFC_SERVER_FINAL);
        }
        other => panic!("{other:?}"),
    }
    // Without the credential (deleted): Kafka's generic message, delayed, then closed.
    let mut s = server();
    s.on_frame(handshake("SCRAM-SHA-256", 1), &versions(), &creds, now());
    match s.on_frame(
        authenticate(RFC_CLIENT_FIRST),
        &versions(),
        &ScramCredentials::new(),
        now(),
    ) {
        Step::AnswerThenClose { answer, delayed } => {
            assert!(delayed);
            let r: SaslAuthenticateResponse = body(&answer, 5, 2);
            assert_eq!(r.error_code, 58);
            assert_eq!(
                r.error_message.as_deref(),
                Some("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn scram_after_a_v0_handshake_takes_bare_tokens() {
    let creds = rfc_credentials();
    let mut s = server();
    s.on_frame(handshake("SCRAM-SHA-256", 0), &versions(), &creds, now());
    let Step::Answer(a) = s.on_frame(
        Bytes::from_static(RFC_CLIENT_FIRST),
        &versions(),
        &creds,
        now(),
    ) else {
        panic!("server-first answered");
    };
    let len = u32::from_be_bytes(a[..4].try_into().expect("prefix"));
    assert_eq!(usize::try_from(len).expect("fits"), a.len() - 4);
    assert!(a[4..].starts_with(b"r=rOprNGfwEbeRWgbNEkqO"));
    match s.on_frame(
        Bytes::from_static(RFC_CLIENT_FINAL),
        &versions(),
        &creds,
        now(),
    ) {
        Step::Authenticated { answer, .. } => assert_eq!(&answer[4..], RFC_SERVER_FINAL),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_scram_only_listener_needs_no_jaas_entry() {
    let l = listener(&[("sasl.enabled.mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256")])
        .expect("SCRAM needs no PlainLoginModule users");
    assert_eq!(l.mechanisms, vec!["SCRAM-SHA-512", "SCRAM-SHA-256"]);
    assert!(server_nonce()
        .expect("random")
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b','));
}

#[test]
fn session_lifetimes_as_kip_368() {
    assert_eq!(session_lifetime_ms(None, 0, 1000), None);
    assert_eq!(session_lifetime_ms(None, 3000, 1000), Some(3000));
    assert_eq!(session_lifetime_ms(Some(5000), 0, 1000), Some(4000));
    assert_eq!(session_lifetime_ms(Some(5000), 3000, 1000), Some(3000));
    assert_eq!(session_lifetime_ms(Some(2000), 3000, 1000), Some(1000));
    assert_eq!(session_lifetime_ms(Some(500), 3000, 1000), Some(0));
}

fn reauth_server(extra: &[(&str, &str)]) -> SaslServer {
    let mut pairs = vec![
        ("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER"),
        ("listener.name.sasl.plain.sasl.jaas.config", JAAS),
        (
            "listener.name.sasl.oauthbearer.sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        ),
    ];
    pairs.extend_from_slice(extra);
    SaslServer::new(Arc::new(listener(&pairs).expect("valid")), "n".to_owned())
}

/// Authenticates `s` with PLAIN as `user`; the response's session lifetime.
fn plain_login(s: &mut SaslServer, token: &'static [u8], at: Now) -> Result<i64, Step> {
    let creds = ScramCredentials::new();
    match s.on_frame(handshake("PLAIN", 1), &versions(), &creds, at) {
        Step::Answer(_) => {}
        other => return Err(other),
    }
    match s.on_frame(authenticate(token), &versions(), &creds, at) {
        Step::Authenticated { answer, .. } => {
            let r: SaslAuthenticateResponse = body(&answer, 5, 2);
            Ok(r.session_lifetime_ms)
        }
        other => Err(other),
    }
}

#[test]
fn reauthentication_within_the_session() {
    let mut s = reauth_server(&[("listener.name.sasl.plain.connections.max.reauth.ms", "3000")]);
    let t0 = now();
    assert_eq!(
        plain_login(&mut s, b"\0alice\0alice-secret", t0).expect("ok"),
        3000
    );
    let metadata = frame(
        ApiKey::Metadata,
        12,
        &net::kafka_protocol::messages::MetadataRequest::default(),
    );
    assert_eq!(
        s.on_authenticated_frame(&metadata, t0.instant, || None),
        SessionStep::Serve
    );
    // A handshake within a second of the last re-authentication is just a request.
    let hs = handshake("PLAIN", 1);
    let later = |ms: u64| Now {
        instant: t0.instant + Duration::from_millis(ms),
        unix_ms: t0.unix_ms + i64::try_from(ms).expect("ms"),
    };
    assert_eq!(
        s.on_authenticated_frame(&hs, later(2000).instant, || Some("n2".into())),
        SessionStep::Reauthenticate
    );
    assert!(!s.is_authenticated());
    assert_eq!(
        plain_login(&mut s, b"\0alice\0alice-secret", later(2000)).expect("ok"),
        3000
    );
    assert_eq!(
        s.on_authenticated_frame(&hs, later(2500).instant, || Some("n3".into())),
        SessionStep::Serve,
        "a second re-authentication within a second is refused"
    );
    // The session now ends at 5000 ms.
    assert_eq!(
        s.on_authenticated_frame(&metadata, later(4900).instant, || None),
        SessionStep::Serve
    );
    assert_eq!(
        s.on_authenticated_frame(&metadata, later(5001).instant, || None),
        SessionStep::Expired
    );
    // Re-authenticating as someone else fails as Kafka fails it.
    assert_eq!(
        s.on_authenticated_frame(&hs, later(4000).instant, || Some("n4".into())),
        SessionStep::Reauthenticate
    );
    match plain_login(&mut s, b"\0admin\0admin-secret", later(4000)) {
        Err(Step::AnswerThenClose {
            answer,
            delayed: true,
        }) => {
            let r: SaslAuthenticateResponse = body(&answer, 5, 2);
            assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
            assert_eq!(
                r.error_message.as_deref(),
                Some(
                    "Cannot change principals during re-authentication from User.alice: User.admin"
                )
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn reauthentication_keeps_the_mechanism_and_needs_a_lifetime() {
    // No lifetime: a handshake after authentication is served as a request (ILLEGAL_SASL_STATE).
    let mut s = reauth_server(&[]);
    assert_eq!(
        plain_login(&mut s, b"\0alice\0alice-secret", now()).expect("ok"),
        0
    );
    let hs = handshake("OAUTHBEARER", 1);
    assert_eq!(
        s.on_authenticated_frame(&hs, now().instant, || Some("n".into())),
        SessionStep::Serve
    );
    // Another mechanism on re-authentication: the handshake is answered, the next frame closes.
    let mut s = reauth_server(&[("connections.max.reauth.ms", "60000")]);
    plain_login(&mut s, b"\0alice\0alice-secret", now()).expect("ok");
    assert_eq!(
        s.on_authenticated_frame(&hs, now().instant, || Some("n".into())),
        SessionStep::Reauthenticate
    );
    let creds = ScramCredentials::new();
    assert!(matches!(
        s.on_frame(hs, &versions(), &creds, now()),
        Step::Answer(_)
    ));
    assert!(matches!(
        s.on_frame(
            authenticate(b"\0alice\0alice-secret"),
            &versions(),
            &creds,
            now()
        ),
        Step::Close
    ));
}

#[test]
fn oauthbearer_session_lasts_until_the_token_expires() {
    use base64::Engine;
    let b64 = |t: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t);
    let exp_s = NOW_UNIX_MS / 1000 + 10;
    let token = format!(
        "{}.{}.",
        b64(r#"{"alg":"none"}"#),
        b64(&format!(r#"{{"sub":"dave","exp":{exp_s}}}"#))
    );
    let message = format!("n,,\x01auth=Bearer {token}\x01\x01");
    let message: &'static [u8] = Box::leak(message.into_bytes().into_boxed_slice());
    let creds = ScramCredentials::new();
    for (max_reauth, lifetime) in [("0", 10_000), ("4000", 4000), ("60000", 10_000)] {
        let mut s = reauth_server(&[("connections.max.reauth.ms", max_reauth)]);
        assert!(matches!(
            s.on_frame(handshake("OAUTHBEARER", 1), &versions(), &creds, now()),
            Step::Answer(_)
        ));
        match s.on_frame(authenticate(message), &versions(), &creds, now()) {
            Step::Authenticated { answer, principal } => {
                assert_eq!(principal, "User:dave");
                let r: SaslAuthenticateResponse = body(&answer, 5, 2);
                assert_eq!(r.session_lifetime_ms, lifetime, "max {max_reauth}");
            }
            other => panic!("{other:?}"),
        }
    }
    // A refused token: the error challenge, then the failure once the client sends 0x01.
    let mut s = reauth_server(&[]);
    s.on_frame(handshake("OAUTHBEARER", 1), &versions(), &creds, now());
    let late = Now {
        instant: Instant::now(),
        unix_ms: NOW_UNIX_MS + 20_000,
    };
    let Step::Answer(a) = s.on_frame(authenticate(message), &versions(), &creds, late) else {
        panic!("challenge");
    };
    let r: SaslAuthenticateResponse = body(&a, 5, 2);
    assert_eq!(
        (r.error_code, &r.auth_bytes[..]),
        (0, &br#"{"status":"invalid_token"}"#[..])
    );
    match s.on_frame(authenticate(b"\x01"), &versions(), &creds, late) {
        Step::AnswerThenClose {
            answer,
            delayed: true,
        } => {
            let r: SaslAuthenticateResponse = body(&answer, 5, 2);
            assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
            assert_eq!(
                r.error_message.as_deref(),
                Some(r#"{"status":"invalid_token"}"#)
            );
        }
        other => panic!("{other:?}"),
    }
}
