"""SaslHandshake (v0-1) and SaslAuthenticate (v0-2) once a connection no longer authenticates.

Authentication itself runs before requests reach handlers (``server/authenticator.py``). A request
that gets here came on a listener without SASL, or after the connection authenticated; Kafka's
``KafkaApis`` answers both with ILLEGAL_SASL_STATE. (A SaslHandshake that starts a KIP-368
re-authentication never gets here: the connection's authenticator takes it first.)
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors


@handles("SaslHandshake")
def sasl_handshake(ctx, request):
    from kbroker.protocol.messages.sasl_handshake import SaslHandshakeResponse

    return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE.code, mechanisms=[])


@handles("SaslAuthenticate")
def sasl_authenticate(ctx, request):
    from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateResponse

    return SaslAuthenticateResponse(
        error_code=Errors.ILLEGAL_SASL_STATE.code,
        error_message="SaslAuthenticate request received after successful authentication"
        if ctx.principal != "User:ANONYMOUS" else "SASL is not enabled on this listener")
