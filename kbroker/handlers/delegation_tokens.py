"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
DescribeDelegationToken (KIP-48; KIP-373 for tokens owned by another user), with Kafka's errors.

What ``kafka-delegation-tokens.sh`` and the admin clients send. The rules of the tokens are in
:mod:`kbroker.metadata.delegation_tokens`; the checks that need the request are here, in
Kafka's order (KafkaApis):

- a request over a PLAINTEXT listener, over SSL without a client certificate (the anonymous
  principal), or over a connection that authenticated with a delegation token is refused with
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: a token must come from a real credential;
- without ``delegation.token.secret.key`` the feature is off: DELEGATION_TOKEN_AUTH_DISABLED;
- creating a token for another owner needs CREATE_TOKENS on that ``User`` resource
  (DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be ``User`` principals
  (INVALID_PRINCIPAL_TYPE);
- describing lists the tokens of the owners asked for (null: every owner; an empty list: none)
  that the requester owns, renews or asked for, and the others it may DESCRIBE (a
  DELEGATION_TOKEN ACL on the token id) or DESCRIBE_TOKENS (a USER ACL on the owner).
"""

from __future__ import annotations

import logging
import time

from kbroker.handlers import handles
from kbroker.metadata import delegation_tokens as tokens
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed
from kbroker.security.principal import ANONYMOUS

log = logging.getLogger("kbroker.tokens")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _secret(ctx) -> str | None:
    secret = ctx.config.get("delegation.token.secret.key")  # a config Password: its text
    return str.__str__(secret) if secret else None


def _refusal(ctx) -> Errors | None:
    """Kafka's allowTokenRequests: no token requests from a token, PLAINTEXT, or one-way TLS."""
    if getattr(ctx.connection, "token_authenticated", False):
        return Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    protocol = ctx.config.listener_security_protocols.get((ctx.listener or "").upper(),
                                                          "PLAINTEXT")
    if protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS):
        return Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return None


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _refused(ctx, what: str, error: Errors, detail: str | None = None) -> None:
    log.info("%s from %s (%s) refused: %s%s", what, ctx.principal, ctx.client_host, error.name,
             f" ({detail})" if detail else "")


@handles("CreateDelegationToken")
async def create_delegation_token(ctx, request):
    from kbroker.protocol.messages.create_delegation_token import \
        CreateDelegationTokenResponse as R

    requester = ctx.principal
    owner = requester
    if request.owner_principal_name:
        owner = f"{request.owner_principal_type}:{request.owner_principal_name}"
    renewers = [(r.principal_type, r.principal_name) for r in request.renewers]

    def answer(error: Errors, info=None, mac: bytes = b""):
        kind, name = _split(owner)
        rkind, rname = _split(requester) if ctx.api_version >= 3 else ("", "")  # v3: KIP-373
        return R(error_code=error.code, principal_type=kind, principal_name=name,
                 token_requester_principal_type=rkind, token_requester_principal_name=rname,
                 issue_timestamp_ms=info.issue_ms if info else -1,
                 expiry_timestamp_ms=info.expiry_ms if info else -1,
                 max_timestamp_ms=info.max_ms if info else -1,
                 token_id=info.token_id if info else "", hmac=mac, throttle_time_ms=0)

    error = _refusal(ctx)
    detail = None
    if error is None and owner != requester and not allowed(ctx, Op.CREATE_TOKENS,
                                                            ResourceType.USER, owner):
        error, detail = Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED, \
            f"no CREATE_TOKENS on {owner}"
    if error is None and any(kind != "User" for kind, _ in renewers):
        error, detail = Errors.INVALID_PRINCIPAL_TYPE, "renewers must be User principals"
    secret = _secret(ctx)
    if error is None and secret is None:
        error, detail = Errors.DELEGATION_TOKEN_AUTH_DISABLED, "delegation.token.secret.key " \
                                                               "is not set"
    if error is not None:
        _refused(ctx, "CreateDelegationToken", error, detail)
        return answer(error)
    info = tokens.create(_now_ms(), owner, requester, [f"{k}:{n}" for k, n in renewers],
                         request.max_lifetime_ms,
                         ctx.config.get("delegation.token.max.lifetime.ms"),
                         ctx.config.get("delegation.token.expiry.time.ms"))
    try:
        await ctx.controller.change_delegation_tokens(
            lambda image: ({info.token_id: info}, None), f"creating delegation token "
                                                         f"{info.token_id}")
    except KafkaError as exc:
        _refused(ctx, "CreateDelegationToken", exc.error, exc.message)
        return answer(exc.error)
    log.info("created delegation token %s for owner %s (requested by %s)", info.token_id, owner,
             requester)
    return answer(Errors.NONE, info, tokens.hmac_of(info.token_id, secret))


async def _renew_or_expire(ctx, request, what: str, period_ms: int, response_cls):
    error = _refusal(ctx)
    secret = _secret(ctx)
    if error is None and secret is None:
        error = Errors.DELEGATION_TOKEN_AUTH_DISABLED
    if error is not None:
        _refused(ctx, what, error)
        return response_cls(error_code=error.code, expiry_timestamp_ms=-1, throttle_time_ms=0)
    now = _now_ms()
    principal, mac = ctx.principal, bytes(request.hmac)
    if what == "RenewDelegationToken":
        renew_time = ctx.config.get("delegation.token.expiry.time.ms")
        decide = lambda image: tokens.renew(image, now, principal, mac, period_ms,  # noqa: E731
                                            secret, renew_time)
    else:
        decide = lambda image: tokens.expire(image, now, principal, mac, period_ms,  # noqa: E731
                                             secret)
    try:
        expiry = await ctx.controller.change_delegation_tokens(decide, what)
    except KafkaError as exc:
        _refused(ctx, what, exc.error, exc.message)
        return response_cls(error_code=exc.error.code, expiry_timestamp_ms=-1,
                            throttle_time_ms=0)
    log.info("%s by %s: expiry now %d", what, principal, expiry)
    return response_cls(error_code=Errors.NONE.code, expiry_timestamp_ms=expiry,
                        throttle_time_ms=0)


@handles("RenewDelegationToken")
async def renew_delegation_token(ctx, request):
    from kbroker.protocol.messages.renew_delegation_token import RenewDelegationTokenResponse

    return await _renew_or_expire(ctx, request, "RenewDelegationToken", request.renew_period_ms,
                                  RenewDelegationTokenResponse)


@handles("ExpireDelegationToken")
async def expire_delegation_token(ctx, request):
    from kbroker.protocol.messages.expire_delegation_token import ExpireDelegationTokenResponse

    return await _renew_or_expire(ctx, request, "ExpireDelegationToken",
                                  request.expiry_time_period_ms, ExpireDelegationTokenResponse)


@handles("DescribeDelegationToken")
def describe_delegation_token(ctx, request):
    from kbroker.protocol.messages.describe_delegation_token import \
        DescribeDelegationTokenResponse as R

    error = _refusal(ctx)
    secret = _secret(ctx)
    if error is None and secret is None:
        error = Errors.DELEGATION_TOKEN_AUTH_DISABLED
    if error is not None:
        _refused(ctx, "DescribeDelegationToken", error)
        return R(error_code=error.code, tokens=[], throttle_time_ms=0)
    if request.owners is not None and not request.owners:
        return R(error_code=Errors.NONE.code, tokens=[], throttle_time_ms=0)
    owners = None if request.owners is None else \
        [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    requester = ctx.principal
    described = []
    for info in sorted(ctx.metadata.delegation_tokens.values(), key=lambda t: t.issue_ms):
        if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
            continue
        if not (info.owner_or_renewer(requester)
                or allowed(ctx, Op.DESCRIBE, ResourceType.DELEGATION_TOKEN, info.token_id)
                or allowed(ctx, Op.DESCRIBE_TOKENS, ResourceType.USER, info.owner)):
            continue
        kind, name = _split(info.owner)
        rkind, rname = _split(info.requester) if ctx.api_version >= 3 else ("", "")
        described.append(R.DescribedDelegationToken(
            principal_type=kind, principal_name=name, token_requester_principal_type=rkind,
            token_requester_principal_name=rname, issue_timestamp=info.issue_ms,
            expiry_timestamp=info.expiry_ms, max_timestamp=info.max_ms, token_id=info.token_id,
            hmac=tokens.hmac_of(info.token_id, secret),
            renewers=[R.DescribedDelegationTokenRenewer(principal_type=k, principal_name=n)
                      for k, n in map(_split, info.renewers)]))
    return R(error_code=Errors.NONE.code, tokens=described, throttle_time_ms=0)
