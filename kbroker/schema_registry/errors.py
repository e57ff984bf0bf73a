"""Confluent Schema Registry's errors: an HTTP status, an ``error_code`` and its message.

Every answer that is not a success is ``{"error_code": N, "message": "..."}``, as Confluent's
rest-utils writes it; clients read ``error_code`` (confluent-kafka's ``SchemaRegistryError``,
franz-go's ``sr.ResponseError``). The codes and wording are Confluent's ``Errors`` and its
``Rest*Exception`` classes.
"""

from __future__ import annotations


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id=None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, 40403, "Schema not found")
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true "
                                     "to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                     "permanently deleted")


def version_soft_deleted(subject: str, version) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted."
                                     "Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted "
                                     "first before being permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                     "compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode "
                                     "configured")


def incompatible(subject: str, details: list[str]) -> RegistryError:
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier "
                                   f"schema for subject \"{subject}\", details: "
                                   f"[{', '.join(details)}]")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version "
                                     "id. Allowed values are between [1, 2^31-1] and the string "
                                     "\"latest\"")


def invalid_compatibility(level=None) -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, "
                                     "backward, forward, full, backward_transitive, "
                                     "forward_transitive, and full_transitive")


def invalid_mode(mode=None) -> RegistryError:
    return RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, "
                                     "IMPORT and FORWARD.")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(schema_key: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {schema_key}.")


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, 50003, message)


def unknown_leader(message: str = "Leader not known.") -> RegistryError:
    return RegistryError(500, 50004, message)


def unauthorized(message: str = "Unauthorized") -> RegistryError:
    return RegistryError(401, 40101, message)


def forbidden(message: str) -> RegistryError:
    return RegistryError(403, 40301, message)


def not_found_path() -> RegistryError:
    return RegistryError(404, 404, "HTTP 404 Not Found")


def method_not_allowed() -> RegistryError:
    return RegistryError(405, 405, "HTTP 405 Method Not Allowed")


def unsupported_media_type() -> RegistryError:
    return RegistryError(415, 415, "HTTP 415 Unsupported Media Type")


def too_large(limit: int) -> RegistryError:
    return RegistryError(413, 413, f"Request body larger than {limit} bytes")


def bad_json(detail: str) -> RegistryError:
    # rest-utils' JsonParseExceptionMapper / JsonMappingExceptionMapper: 400 with code 400
    return RegistryError(400, 400, f"Unrecognized JSON: {detail}")


def bad_request(message: str) -> RegistryError:
    return RegistryError(400, 400, message)
