"""DescribeUserScramCredentials (v0) and AlterUserScramCredentials (v0), KIP-554.

What ``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'``
sends: the client salts and hashes the password (``salted_password``); the broker derives and
stores Kafka's credential (salt, stored key, server key, iterations) through the controller, and
never sees or keeps the password. Per user, with Kafka's errors: an unknown mechanism gets
UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 or an empty user name
UNACCEPTABLE_CREDENTIAL, the same user and mechanism twice DUPLICATE_RESOURCE, deleting or
describing a credential that does not exist RESOURCE_NOT_FOUND. A user with any error changes
nothing; the others are applied in one persisted change.

With an authorizer: describing needs DESCRIBE on the cluster, altering ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed
from kbroker.security.sasl.scram import (MAX_ITERATIONS, MECHANISM_BY_TYPE, MIN_ITERATIONS,
                                         TYPE_BY_MECHANISM, ScramCredential)

log = logging.getLogger("kbroker.scram")


@handles("DescribeUserScramCredentials")
def describe_user_scram_credentials(ctx, request):
    from kbroker.protocol.messages.describe_user_scram_credentials import \
        DescribeUserScramCredentialsResponse as R

    stored = ctx.metadata.scram_credentials
    response = R(throttle_time_ms=0, error_code=Errors.NONE.code, error_message=None, results=[])
    if not allowed(ctx, Op.DESCRIBE, ResourceType.CLUSTER):
        # As Kafka's getErrorResponse: the top-level error, and one result per requested user
        # carrying it.
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        response.error_code, response.error_message = denied.code, "Cluster authorization failed."
        response.results = [R.DescribeUserScramCredentialsResult(
            user="", error_code=denied.code, error_message=response.error_message,
            credential_infos=[]) for _ in request.users or ()]
        return response
    if not request.users:  # null or empty: every user with a credential
        names = sorted(stored)
    else:
        names = [u.name for u in request.users]
    seen = set()
    for name in names:
        result = R.DescribeUserScramCredentialsResult(user=name, error_code=Errors.NONE.code,
                                                      error_message=None, credential_infos=[])
        if names.count(name) > 1:
            if name in seen:
                continue
            result.error_code = Errors.DUPLICATE_RESOURCE.code
            result.error_message = f"Cannot describe SCRAM credentials for the same user twice " \
                                   f"in a single request: {name}"
        elif name not in stored:
            result.error_code = Errors.RESOURCE_NOT_FOUND.code
            result.error_message = f"Attempt to describe a user credential that does not " \
                                   f"exist: {name}"
        else:
            for mechanism, text in sorted(stored[name].items()):
                result.credential_infos.append(R.CredentialInfo(
                    mechanism=TYPE_BY_MECHANISM[mechanism],
                    iterations=ScramCredential.from_string(text).iterations))
        seen.add(name)
        response.results.append(result)
    return response


@handles("AlterUserScramCredentials")
async def alter_user_scram_credentials(ctx, request):
    from kbroker.protocol.messages.alter_user_scram_credentials import \
        AlterUserScramCredentialsResponse as R

    stored = ctx.metadata.scram_credentials
    errors: dict[str, tuple[Errors, str]] = {}
    users: list[str] = []
    pairs: dict[tuple[str, int], int] = {}
    for change in [*request.deletions, *request.upsertions]:
        if change.name not in users:
            users.append(change.name)
        pairs[(change.name, change.mechanism)] = pairs.get((change.name, change.mechanism), 0) + 1

    def refuse(user, error, message):
        errors.setdefault(user, (error, message))

    if not allowed(ctx, Op.ALTER, ResourceType.CLUSTER):
        for user in users:
            refuse(user, Errors.CLUSTER_AUTHORIZATION_FAILED, None)

    for (user, mechanism), count in pairs.items():
        if not user:
            refuse(user, Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism not in MECHANISM_BY_TYPE:
            refuse(user, Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif count > 1:
            refuse(user, Errors.DUPLICATE_RESOURCE,
                   "A user credential cannot be altered twice in the same request")
    for deletion in request.deletions:
        mechanism = MECHANISM_BY_TYPE.get(deletion.mechanism)
        if mechanism and mechanism not in stored.get(deletion.name, {}):
            refuse(deletion.name, Errors.RESOURCE_NOT_FOUND,
                   "Attempt to delete a user credential that does not exist")
    for upsertion in request.upsertions:
        if upsertion.iterations < MIN_ITERATIONS:
            refuse(upsertion.name, Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            refuse(upsertion.name, Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not upsertion.salt or not upsertion.salted_password:
            refuse(upsertion.name, Errors.UNACCEPTABLE_CREDENTIAL,
                   "Salt and salted password must not be empty")
    upserts = {}
    for u in request.upsertions:
        if u.name not in errors:
            mechanism = MECHANISM_BY_TYPE[u.mechanism]
            upserts[(u.name, mechanism)] = ScramCredential.from_salted_password(
                mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations).to_string()
    deletions = {(d.name, MECHANISM_BY_TYPE[d.mechanism]) for d in request.deletions
                 if d.name not in errors}
    if upserts or deletions:
        try:
            await ctx.controller.alter_scram_credentials(upserts, deletions)
        except KafkaError as exc:  # not stored (a cluster's ZooKeeper write lost): say so
            log.warning("AlterUserScramCredentials from %s not stored: %s", ctx.principal,
                        exc.message)
            for user in {user for user, _ in [*upserts, *deletions]}:
                refuse(user, exc.error, exc.message)
    results = []
    for user in users:
        error, message = errors.get(user, (Errors.NONE, None))
        results.append(R.AlterUserScramCredentialsResult(user=user, error_code=error.code,
                                                         error_message=message))
    return R(throttle_time_ms=0, results=results)
