"""Kind-byte framing and the Ogg/Opus codec shared by the Moshi-family adapters."""

import numpy as np
import pytest

from fdeval.models import kindbyte


def test_encode_decode_roundtrip():
    for kind, payload in [(0, b""), (1, b"\x4fOggS..."), (2, " hello".encode()), (4, b'{"a": 1}')]:
        msg = kindbyte.encode(kind, payload)
        assert msg[0] == kind
        assert kindbyte.decode(msg) == (kind, payload)
    assert kindbyte.decode(bytearray(b"\x02hi")) == (2, b"hi")


def test_bad_frames():
    with pytest.raises(kindbyte.FramingError):
        kindbyte.decode(b"")
    with pytest.raises(kindbyte.FramingError):
        kindbyte.encode(256, b"")


def test_opus_roundtrip_keeps_a_tone():
    pytest.importorskip("sphn")
    tx, rx = kindbyte.OpusCodec(), kindbyte.OpusCodec()
    sr = kindbyte.SAMPLE_RATE
    t = np.arange(sr) / sr
    x = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    out = []
    for i in range(0, sr, 1920):  # 80 ms frames, as the Moshi client sends them
        data = tx.encode(x[i : i + 1920])
        assert isinstance(data, bytes)
        if data:
            out.append(rx.decode(data))
    y = np.concatenate(out)
    assert y.dtype == np.float32 and len(y) >= sr - 2 * 1920
    # a 440 Hz tone comes back as a 440 Hz tone of about the same level
    seg = y[len(y) // 2 : len(y) // 2 + 4800]
    spec = np.abs(np.fft.rfft(seg))
    assert abs(np.argmax(spec) * sr / len(seg) - 440) < 10
    assert 0.15 < np.sqrt(np.mean(seg**2)) < 0.3
