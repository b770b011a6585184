"""Histories without their wall-clock fields: what two runs of the same seed must agree on."""


def without_timing(history):
    """``history`` with every record's ``server_seconds`` (the rounds loop's timing) left out."""
    return [{k: v for k, v in row.items() if k != "server_seconds"} if isinstance(row, dict) else row for row in history]
