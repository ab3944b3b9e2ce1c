"""Kind-byte framing and the Ogg/Opus codec of the Moshi family of WebSocket servers.

Moshi, PersonaPlex and Fun-Audio-Chat speak binary WebSocket messages whose first byte says what
the rest is: 0x00 handshake (server -> client, sent once the server is ready for this session),
0x01 audio (the rest is a piece of an Ogg/Opus byte stream, 24 kHz mono, both ways), 0x02 text
(a UTF-8 piece of the model's text stream, server -> client). Fun-Audio-Chat adds 0x03 control and
0x04 metadata. Checked against kyutai-labs/moshi `moshi/server.py` (0.2.13).

`OpusCodec` holds one outgoing Ogg/Opus stream (the first bytes it returns carry the Ogg headers,
so one codec per connection) and one incoming stream, through `sphn` (`pip install
'fdeval[moshi-client]'`).
"""

from __future__ import annotations

import numpy as np

from fdeval.models.base import optional_import, pip_extra

HANDSHAKE = 0x00
AUDIO = 0x01
TEXT = 0x02
CONTROL = 0x03
METADATA = 0x04

SAMPLE_RATE = 24000


class FramingError(ValueError):
    """A message that is not a kind-byte frame."""


def encode(kind: int, payload: bytes = b"") -> bytes:
    """One message: the kind byte, then the payload."""
    if not 0 <= kind <= 255:
        raise FramingError(f"kind must be one byte, got {kind}")
    return bytes((kind,)) + bytes(payload)


def decode(msg: bytes | bytearray | memoryview) -> tuple[int, bytes]:
    """(kind, payload) of one message; an empty message is a FramingError."""
    msg = bytes(msg)
    if not msg:
        raise FramingError("empty message")
    return msg[0], msg[1:]


class OpusCodec:
    """An outgoing and an incoming Ogg/Opus stream at `sample_rate` (24 kHz), float32 mono PCM."""

    def __init__(self, sample_rate: int = SAMPLE_RATE):
        sphn = optional_import("sphn", pip_extra("moshi-client"), "the Ogg/Opus codec")
        self.sample_rate = sample_rate
        self._writer = sphn.OpusStreamWriter(sample_rate)
        self._reader = sphn.OpusStreamReader(sample_rate)

    def encode(self, pcm: np.ndarray) -> bytes:
        """Append PCM to the outgoing stream; returns the stream bytes ready so far (may be b"")."""
        pcm = np.ascontiguousarray(pcm, dtype=np.float32).reshape(-1)
        out = self._writer.append_pcm(pcm)
        if out is None:  # sphn < 0.2: append, then read
            out = self._writer.read_bytes()
        return bytes(out)

    def decode(self, data: bytes) -> np.ndarray:
        """Append stream bytes to the incoming stream; returns the PCM decoded so far (may be empty)."""
        out = self._reader.append_bytes(bytes(data))
        if out is None:  # sphn < 0.2
            out = self._reader.read_pcm()
        return np.asarray(out, dtype=np.float32).reshape(-1)
