"""CreateAcls, DescribeAcls and DeleteAcls (what ``kafka-acls.sh`` sends), with Kafka's errors.

Without an authorizer each answers SECURITY_DISABLED. Describing needs DESCRIBE on the cluster,
creating and deleting ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). A creation
Kafka's controller would refuse (an unknown or ANY resource type, operation or permission, a
MATCH/ANY pattern, an empty name, a principal without a type) gets INVALID_REQUEST with Kafka's
reason, as does a filter with unknown parts. Every creation has its own result, as Kafka's
(AclCreationResult): the valid ones go to the controller together, and one the store cannot
write (in a cluster: a resource name ZooKeeper cannot hold, a resource znode it cannot update)
fails alone while the others are stored. DeleteAcls likewise reports a failure on each matching
ACL that was not removed (DeleteAclsMatchingAcl's own error), the others are gone.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import (Acl, Op, PatternType, Permission, ResourceType, allowed,
                                         authorizer_of, matches_filter, validate, validate_filter)

log = logging.getLogger("kbroker.acls")
_NO_AUTHORIZER = "No Authorizer is configured."


def _refusal(ctx, op: int) -> tuple[Errors, str] | None:
    if authorizer_of(ctx.config) is None:
        return Errors.SECURITY_DISABLED, _NO_AUTHORIZER
    if not allowed(ctx, op, ResourceType.CLUSTER):
        return Errors.CLUSTER_AUTHORIZATION_FAILED, \
            f"Principal {ctx.principal} may not {Op(op).name} the cluster's ACLs."
    return None


def _filter(f) -> Acl:
    return Acl(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
               f.principal_filter, f.host_filter, f.operation, f.permission_type)


@handles("CreateAcls")
async def handle_create_acls(ctx, request):
    from kbroker.protocol.messages.create_acls import CreateAclsResponse as R

    refusal = _refusal(ctx, Op.ALTER)
    results, valid, creations = [], [], []
    for c in request.creations:
        acl = Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                  c.operation, c.permission_type)
        creations.append(acl)
        problem = refusal or ((Errors.INVALID_REQUEST, why) if (why := validate(acl)) else None)
        if problem:
            log.info("CreateAcls from %s refused: %s", ctx.principal, problem[1])
            results.append(R.AclCreationResult(error_code=problem[0].code,
                                               error_message=problem[1]))
        else:
            valid.append(acl)
            results.append(R.AclCreationResult(error_code=0, error_message=None))
    failures = await _store(ctx.controller.create_acls, valid) if valid else {}
    for acl, result in zip(creations, results):
        if result.error_code == 0 and (error := failures.get(tuple(acl))):
            result.error_code, result.error_message = error.code, error.message
    _report(f"CreateAcls from {ctx.principal}", "not stored", failures)
    return R(throttle_time_ms=0, results=results)


async def _store(write, acls) -> dict:
    """ACL tuple -> KafkaError for each of ``acls`` the controller did not store: those it
    names, or all of them when the whole change failed."""
    try:
        return await write(acls)
    except KafkaError as exc:
        return {tuple(acl): exc for acl in acls}


def _report(request: str, outcome: str, failures: dict) -> None:
    """One warning per distinct cause (a batch that failed as a whole is one line)."""
    by_cause: dict[str, list] = {}
    for acl, error in failures.items():
        by_cause.setdefault(error.message, []).append(Acl(*acl))
    for cause, acls in by_cause.items():
        more = f" and {len(acls) - 1} more" if len(acls) > 1 else ""
        log.warning("%s: %s%s %s: %s", request, _show(acls[0]), more, outcome, cause)


def _show(acl: Acl) -> str:
    """An ACL as Kafka's tools print a binding (only stored ones get here: their codes are
    valid)."""
    return (f"(pattern={PatternType(acl.pattern_type).name} {ResourceType(acl.resource_type).name}"
            f" {acl.name!r}, principal={acl.principal}, host={acl.host}, "
            f"operation={Op(acl.operation).name}, "
            f"permissionType={Permission(acl.permission).name})")


@handles("DescribeAcls")
def handle_describe_acls(ctx, request):
    from kbroker.protocol.messages.describe_acls import DescribeAclsResponse as R

    refusal = _refusal(ctx, Op.DESCRIBE)
    if refusal:
        return R(throttle_time_ms=0, error_code=refusal[0].code, error_message=refusal[1],
                 resources=[])
    f = _filter(request)
    if why := validate_filter(f):
        return R(throttle_time_ms=0, error_code=Errors.INVALID_REQUEST.code, error_message=why,
                 resources=[])
    by_resource: dict[tuple, list] = {}
    for acl in ctx.metadata.acls:
        acl = Acl(*acl)
        if matches_filter(acl, f):
            by_resource.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(
                R.AclDescription(principal=acl.principal, host=acl.host,
                                 operation=acl.operation, permission_type=acl.permission))
    resources = [R.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p,
                                        acls=acls)
                 for (t, n, p), acls in by_resource.items()]
    return R(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


@handles("DeleteAcls")
async def handle_delete_acls(ctx, request):
    from kbroker.protocol.messages.delete_acls import DeleteAclsResponse as R

    refusal = _refusal(ctx, Op.ALTER)
    results, gone = [], set()
    for raw in request.filters:
        if refusal:
            results.append(R.DeleteAclsFilterResult(error_code=refusal[0].code,
                                                    error_message=refusal[1], matching_acls=[]))
            continue
        f = _filter(raw)
        if why := validate_filter(f):
            results.append(R.DeleteAclsFilterResult(error_code=Errors.INVALID_REQUEST.code,
                                                    error_message=why, matching_acls=[]))
            continue
        matching = [Acl(*a) for a in ctx.metadata.acls if matches_filter(Acl(*a), f)]
        gone.update(matching)
        results.append(R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            R.DeleteAclsMatchingAcl(error_code=0, error_message=None, resource_type=a.resource_type,
                                    resource_name=a.name, pattern_type=a.pattern_type,
                                    principal=a.principal, host=a.host, operation=a.operation,
                                    permission_type=a.permission) for a in matching]))
    failures = {}
    if gone:
        try:
            failures = await ctx.controller.delete_acls(gone)
        except KafkaError as exc:  # nothing was deleted: say so for every filter
            log.warning("DeleteAcls from %s not stored: %s", ctx.principal, exc.message)
            for result in results:
                result.error_code, result.error_message = exc.code, exc.message
                result.matching_acls = []
    # These resources failed, the others' ACLs are gone.
    _report(f"DeleteAcls from {ctx.principal}", "not removed", failures)
    for result in results:
        for matching in result.matching_acls:
            error = failures.get((matching.resource_type, matching.resource_name,
                                  matching.pattern_type, matching.principal, matching.host,
                                  matching.operation, matching.permission_type))
            if error:
                matching.error_code, matching.error_message = error.code, error.message
    return R(throttle_time_ms=0, filter_results=results)
