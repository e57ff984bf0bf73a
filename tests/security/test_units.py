"""Sans-I/O pieces: SCRAM against RFC 7677's test vector, PLAIN, JAAS parsing, certificate
subject names and ssl.principal.mapping.rules, TLS cipher names."""

from __future__ import annotations

import base64

import pytest

from kbroker.security import principal, tls
from kbroker.security.sasl import AuthenticationFailed, jaas
from kbroker.security.sasl.plain import PlainServer
from kbroker.security.sasl.scram import ScramCredential, ScramServer


def test_scram_sha_256_rfc7677_vector(monkeypatch):
    import kbroker.security.sasl.scram as scram

    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", salt, 4096)
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = ScramServer("SCRAM-SHA-256", lambda user, mech: credential if user == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"
    assert ScramCredential.from_string(credential.to_string()) == credential


def test_scram_refuses_channel_binding_tokens_and_bad_names():
    credential = ScramCredential.from_password("SCRAM-SHA-512", "pw", b"salt", 4096)
    for message in (b"p=tls-unique,,n=u,r=x", b"n,,n=u,r=x,tokenauth=true", b"n,,n=u=ZZ,r=x",
                    b"n,,r=x,n=u", b"n,,n=u"):
        server = ScramServer("SCRAM-SHA-512", lambda user, mech: credential)
        with pytest.raises(AuthenticationFailed):
            server.evaluate(message)


def test_scram_with_a_delegation_token():
    """``tokenauth=true`` names a token id as the user: its credential is the token's, the
    authorization id its owner's; without the extension the id is a user name like any other,
    and other extensions are ignored."""
    import hashlib
    import hmac

    from kbroker.security.sasl.scram import token_credential

    password = base64.b64encode(b"h" * 64).decode()
    credential = token_credential("SCRAM-SHA-512", password)
    tokens = {"tok1": (credential, "alice", 1234)}
    server = ScramServer("SCRAM-SHA-512", lambda user, mech: None,
                         lambda token_id, mech: tokens.get(token_id))
    bare = "n=tok1,r=abc,tokenauth=true"
    first = server.evaluate(f"n,,{bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", hashlib.sha512)
    without_proof = f"c=biws,r={fields['r']}"
    signature = hmac.digest(hashlib.sha512(client_key).digest(),
                            f"{bare},{first},{without_proof}".encode(), hashlib.sha512)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server.evaluate(f"{without_proof},p={proof}".encode())
    assert server.complete and server.authorization_id == "alice"
    assert server.token_authenticated and server.credential_expiry_ms == 1234
    for message in (b"n,,n=tok1,r=abc", b"n,,n=tok2,r=abc,tokenauth=true",
                    b"n,,n=tok1,r=abc,tokenauth=false"):
        with pytest.raises(AuthenticationFailed):
            ScramServer("SCRAM-SHA-512", lambda user, mech: None,
                        lambda token_id, mech: tokens.get(token_id)).evaluate(message)
    plain_user = ScramServer("SCRAM-SHA-512", lambda user, mech: credential)
    plain_user.evaluate(b"n,,n=bob,r=abc,other=1")
    assert not plain_user.token_authenticated


def test_plain():
    server = PlainServer({"alice": "secret"})
    assert server.evaluate(b"\0alice\0secret") == b"" and server.authorization_id == "alice"
    with pytest.raises(AuthenticationFailed):
        server.evaluate(b"\0alice\0secret")  # once only
    with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
        PlainServer({"alice": "secret"}).evaluate(b"\0alice\0secreT")


def test_jaas():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" password="a\\"b" user_admin="a\\"b" user_alice="alice-secret";')
    assert jaas.plain_users(text) == {"admin": 'a"b', "alice": "alice-secret"}
    module, options = jaas.parse("org.apache.kafka.common.security.scram.ScramLoginModule "
                                 "required;")
    assert module == jaas.SCRAM_MODULE and options == {}
    for bad in ("PlainLoginModule required user_a=\"b\"", "x y;", "x required a=;",
                "x required a=\"b\"; y required;"):
        with pytest.raises(ValueError):
            jaas.parse(bad)


def test_subject_names_and_mapping_rules():
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
                        (("organizationalUnitName", "dev"),), (("commonName", "alice"),))}
    name = principal.subject_name(cert)
    assert name == "CN=alice,OU=dev,O=Acme\\, Inc,C=US"
    assert principal.PrincipalMapper("DEFAULT").name(name) == name
    rules = "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U, DEFAULT"
    assert principal.PrincipalMapper(rules).name(name) == "ALICE@DEV"
    assert principal.PrincipalMapper(rules).name("CN=bob") == "CN=bob"
    with pytest.raises(principal.MappingError):
        principal.PrincipalMapper("RULE:^CN=x$/y/").name(name)
    with pytest.raises(ValueError):
        principal.PrincipalMapper("RULE:broken")


def test_cipher_names():
    assert tls.openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == \
        "ECDHE-RSA-AES256-GCM-SHA384"
    assert tls.openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == \
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert tls.openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
