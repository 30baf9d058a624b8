"""Request signatures: upstream's form byte for byte, the strong form bound to its code."""

from __future__ import annotations

import pytest
from support.acl_signing import independent_sign, independent_strong_sign

from protocol import signing
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand

JAVA_ORDER_FIELDS = {
    "topic": "TopicA",
    "AccessKey": "ak",
    "\uff21key": "bmp",
    "\U0001f600key": "astral",
    "Signature": "ignored",
}
"""Java's TreeMap puts the astral key (a surrogate pair, 0xD83D...) before U+FF21; code-point
order would not. ``Vec.java`` (HmacSHA1 over the TreeMap's values and the body) gave:"""
JAVA_CONTENT = "akTopicAastralbmp"
JAVA_SIGNATURE = "Zf8j4eLu/Trd7UPzAeQnkErNBeQ="


def test_upstream_signature_is_javas_for_the_same_fields_and_body():
    content = signing.upstream_content(JAVA_ORDER_FIELDS, b"body-bytes")
    assert content == JAVA_CONTENT.encode() + b"body-bytes"
    assert signing.upstream_signature(JAVA_ORDER_FIELDS, b"body-bytes", "sk") == JAVA_SIGNATURE


def test_sign_upstream_agrees_with_the_independent_signer():
    cmd = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k"}, b"v")
    fields = signing.sign_upstream(cmd.ext_fields, cmd.body, "ak", "sk")
    assert fields == independent_sign(cmd, "ak", "sk").ext_fields


def test_the_strong_signature_agrees_with_the_documented_rule_and_covers_the_code():
    cmd = RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}, b"x")
    key = signing.strong_key("sk")
    nonce = "n" * 16
    fields = signing.sign_strong(cmd.code, cmd.ext_fields, cmd.body, "ak", key, 1234, nonce, "ns-1")
    expected = independent_strong_sign(cmd, "ak", "sk", 1234, nonce, "ns-1").ext_fields
    assert fields == expected
    sig = fields[signing.SIGNATURE]
    assert signing.strong_signature(cmd.code, fields, b"x", key) == sig
    assert signing.strong_signature(RequestCode.ADD_WRITE_PERM_OF_BROKER, fields, b"x", key) != sig
    assert signing.strong_signature(cmd.code, fields, b"y", key) != sig
    # Values cannot move between fields: the keys are in the content, delimited.
    shifted = {**fields, "brokerName": "", "brokerNameb": ""}
    assert signing.strong_signature(cmd.code, shifted, b"x", key) != sig
    # The destination is covered: the fields naming another server do not verify.
    elsewhere = {**fields, signing.SIGN_SERVER: "ns-2"}
    assert signing.strong_signature(cmd.code, elsewhere, b"x", key) != sig


def test_the_two_forms_never_verify_as_each_other():
    ext = {"topic": "T"}
    strong = signing.sign_strong(15, ext, b"", "ak", signing.strong_key("sk"), 1, "a" * 16, "ns")
    stripped = {k: v for k, v in strong.items() if not k.startswith("Sign") or k == "Signature"}
    assert signing.upstream_signature(stripped, b"", "sk") != strong["Signature"]
    upstream = signing.sign_upstream(ext, b"", "ak", "sk")
    assert (
        signing.strong_signature(15, upstream, b"", signing.strong_key("sk"))
        != upstream["Signature"]
    )


V2 = {
    "SignatureForm": "strong-v2",
    "SignServer": "ns-1",
    "SignTimestamp": "1",
    "SignNonce": "a" * 16,
}


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({**V2, "SignatureForm": "strong-v3"}, "must be 'strong-v2'"),
        ({**V2, "SignatureForm": "strong-v1"}, "names no destination name server"),
        ({**V2, "SignTimestamp": "-1"}, "millis"),
        ({**V2, "SignNonce": "a" * 65}, "64"),
        ({**V2, "SignNonce": "a b" * 8}, "16 to"),
        ({k: v for k, v in V2.items() if k != "SignServer"}, "SignServer must name"),
        ({**V2, "SignServer": "ns 1"}, "SignServer must name"),
        ({**V2, "SignServer": "n" * 129}, "SignServer must name"),
        ({"SignNonce": "a" * 16}, "SignatureForm"),
        ({"SignServer": "ns-1"}, "SignatureForm"),
    ],
)
def test_malformed_strong_fields_name_what_is_wrong(fields, error):
    assert signing.is_strong(fields)
    assert error in signing.StrongFields(fields).error


def test_a_signer_writes_its_form_with_a_fresh_nonce_per_request():
    nonces = iter(["n0" * 8, "n1" * 8])
    signer = signing.RequestSigner(
        signing.Credentials("ak", "sk", server_identity="ns-1"), lambda: 42, lambda: next(nonces)
    )
    one = signer.sign(15, {"topic": "T"}, b"")
    two = signer.sign(15, {"topic": "T"}, b"")
    assert one["SignTimestamp"] == "42" and one["SignNonce"] != two["SignNonce"]
    assert one["SignServer"] == "ns-1" and one["SignatureForm"] == "strong-v2"
    upstream = signing.RequestSigner(
        signing.Credentials("ak", "sk", form=signing.SignatureForm.UPSTREAM), lambda: 0, str
    )
    assert upstream.sign(15, {"topic": "T"}, b"") == signing.sign_upstream(
        {"topic": "T"}, b"", "ak", "sk"
    )
    with pytest.raises(ValueError, match="one form"):
        signing.RequestSigner(
            signing.Credentials("ak", "sk", form=signing.SignatureForm.EITHER), lambda: 0, str
        )
    with pytest.raises(ValueError, match="names the name server it is for"):
        signing.RequestSigner(signing.Credentials("ak", "sk"), lambda: 0, str)
    with pytest.raises(ValueError, match="name-server identity"):
        signing.RequestSigner(
            signing.Credentials("ak", "sk", server_identity="a b"), lambda: 0, str
        )
