"""The channel between the harness and a method's process: each message is one tree of numbers, strings, lists,
dicts, arrays and tensors encoded by :func:`~largefedbench.rounds.state_file.state_bytes` (safetensors and JSON),
preceded by its length. Nothing read from the channel is unpickled; a client function crosses as opaque bytes that
only a client worker unpickles (:class:`SealedFunction`)."""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

from largefedbench.errors import MethodError
from largefedbench.rounds.state_file import state_bytes, state_from_bytes

__all__ = ["Channel", "ChannelClosed", "MAX_MESSAGE", "SealedFunction"]

MAX_MESSAGE = 8 << 30  # bytes: a message above this is refused before it is read (the cpu generator's LoRA is ~0.5 GB)
_HEADER = struct.Struct("<Q")


class ChannelClosed(MethodError):
    """The other process closed the channel (it exited or died)."""


class Channel:
    """One end of the pipe pair: :meth:`send` a tree, :meth:`recv` the next one."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader, self._writer = reader, writer

    def send(self, message: Any) -> None:
        body = state_bytes(message, what="a sandbox message")
        self._writer.write(_HEADER.pack(len(body)))
        self._writer.write(body)
        self._writer.flush()

    def recv(self) -> Any:
        head = self._read(_HEADER.size)
        (size,) = _HEADER.unpack(head)
        if size > MAX_MESSAGE:
            raise MethodError(f"a sandbox message of {size} bytes is over the {MAX_MESSAGE} byte limit")
        try:
            return state_from_bytes(self._read(size))
        except ValueError as err:
            raise MethodError(f"a sandbox message was not tensors and JSON: {err}") from None

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self._reader.read(left)
            if not chunk:
                raise ChannelClosed("the method's process closed the channel")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


class SealedFunction:
    """A client function as the method's process pickled it: the harness forwards the bytes to its client workers,
    which unpickle them; calling it in the harness is refused (that would run the method's code beside the data)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = bytes(payload)

    def __reduce__(self):
        import cloudpickle

        return cloudpickle.loads, (self.payload,)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise MethodError("a sandboxed method's client function runs in client worker processes only: use the "
                          "process or ray executor (--executor process)")
