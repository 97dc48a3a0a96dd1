"""Test certificates made at run time with `cryptography`: a CA, a server certificate for
127.0.0.1 / localhost, and client certificates, as PEM files (Kafka's `ssl.keystore.type=PEM`:
one file with the PKCS#8 key and the certificate chain).

    paths = make_certs(directory)
    paths["ca"]             CA certificate (the trust store of clients and of the broker)
    paths["server"]         server key + certificate (ssl.keystore.location)
    paths["server_cert"], paths["server_key"]   the same, apart
    paths["server_encrypted"]  server key encrypted with KEY_PASSWORD + certificate
    paths["server2"]        another key + certificate with the same subject and names (rotation)
    paths["client_cert"], paths["client_key"]   client "CN=alice,OU=clients,O=Sluice Test"
    paths["stranger_cert"], paths["stranger_key"]  a client certificate from another CA
"""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "key-secret"
CLIENT_SUBJECT = "CN=alice,OU=clients,O=Sluice Test"


def _name(cn, ou=None, o="Sluice Test"):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _ca(cn):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key, ca_cert, subject, server):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _pem_key(key, password=None):
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)


def _pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def make_certs(directory):
    """Writes the files listed in the module doc under `directory`; returns their paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca("Sluice Test CA")
    other_key, other_ca = _ca("Another CA")
    server_key, server = _leaf(ca_key, ca, _name("localhost", "brokers"), server=True)
    server2_key, server2 = _leaf(ca_key, ca, _name("localhost", "brokers"), server=True)
    client_key, client = _leaf(ca_key, ca, _name("alice", "clients"), server=False)
    stranger_key, stranger = _leaf(other_key, other_ca, _name("mallory", "clients"), server=False)
    files = {
        "ca": _pem_cert(ca),
        "server": _pem_key(server_key) + _pem_cert(server) + _pem_cert(ca),
        "server_cert": _pem_cert(server) + _pem_cert(ca),
        "server2": _pem_key(server2_key) + _pem_cert(server2) + _pem_cert(ca),
        "server_key": _pem_key(server_key),
        "server_encrypted": _pem_key(server_key, KEY_PASSWORD) + _pem_cert(server) + _pem_cert(ca),
        "client_cert": _pem_cert(client),
        "client_key": _pem_key(client_key),
        "stranger_cert": _pem_cert(stranger),
        "stranger_key": _pem_key(stranger_key),
    }
    paths = {}
    for name, data in files.items():
        path = d / f"{name}.pem"
        path.write_bytes(data)
        paths[name] = str(path)
    return paths
