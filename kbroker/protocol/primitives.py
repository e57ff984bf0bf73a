"""Wire primitives shared by the generated codecs (being written; see tools/gen_messages.py)."""


class DecodeError(ValueError):
    """Raised for any malformed, truncated or hostile input. The only exception decoding raises."""
