"""``timesync-sidecar offsets reset``: move the group's committed offsets while no sidecar runs.

:mod:`sidecar.offsets.plan` decides where each partition goes (pure), :mod:`sidecar.offsets.kafka`
reads the facts and writes the offsets, :mod:`sidecar.offsets.cli` is the command.
"""
