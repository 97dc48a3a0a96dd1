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
    SaslServer::new(Arc::new(l))
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
    let Step::Answer(a) = s.on_frame(handshake("PLAIN", 1), &versions()) else {
        panic!("handshake answered");
    };
    let r: SaslHandshakeResponse = body(&a, 4, 1);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.mechanisms, vec![StrBytes::from_static_str("PLAIN")]);
    match s.on_frame(authenticate(b"\0alice\0alice-secret"), &versions()) {
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
            s.on_frame(handshake("PLAIN", 1), &versions()),
            Step::Answer(_)
        ));
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
        match s.on_frame(frame(ApiKey::SaslAuthenticate, 2, &req), &versions()) {
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
    match s.on_frame(handshake("SCRAM-SHA-256", 1), &versions()) {
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
        server().on_frame(api_versions, &versions()),
        Step::Serve
    ));
    let metadata = frame(
        ApiKey::Metadata,
        12,
        &net::kafka_protocol::messages::MetadataRequest::default(),
    );
    assert!(matches!(
        server().on_frame(metadata.clone(), &versions()),
        Step::Close
    ));
    // SaslAuthenticate before the handshake, Metadata between the two, garbage: closed.
    assert!(matches!(
        server().on_frame(authenticate(b"\0a\0b"), &versions()),
        Step::Close
    ));
    let mut s = server();
    assert!(matches!(
        s.on_frame(handshake("PLAIN", 1), &versions()),
        Step::Answer(_)
    ));
    assert!(matches!(s.on_frame(metadata, &versions()), Step::Close));
    assert!(matches!(
        server().on_frame(Bytes::from_static(b"\xff"), &versions()),
        Step::Close
    ));
}

#[test]
fn v0_handshake_takes_a_bare_token() {
    let mut s = server();
    assert!(matches!(
        s.on_frame(handshake("PLAIN", 0), &versions()),
        Step::Answer(_)
    ));
    match s.on_frame(Bytes::from_static(b"\0admin\0admin-secret"), &versions()) {
        Step::Authenticated { answer, principal } => {
            assert_eq!(principal, "User:admin");
            assert_eq!(&answer[..], &[0, 0, 0, 0]);
        }
        other => panic!("{other:?}"),
    }
    let mut s = server();
    assert!(matches!(
        s.on_frame(handshake("PLAIN", 0), &versions()),
        Step::Answer(_)
    ));
    assert!(matches!(
        s.on_frame(Bytes::from_static(b"\0admin\0no"), &versions()),
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
