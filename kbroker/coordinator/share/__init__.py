"""The share coordinator (KIP-932): the durable state of share partitions in
``__share_group_state``, and the persister through which share partitions and the group
coordinator read and write it."""
