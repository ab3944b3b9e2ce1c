"""One espeak-ng synthesis in a fresh process; run by `fdeval.audio.tts`, never imported by it.

Why a process per synthesis: libespeak-ng keeps waveform-generator state in C statics that no
API call resets (the pitch-flutter phase, resonator and harmonic-table state among them), so
a second synthesis in the same process differs from the first by a few samples of length and
in its waveform. A fresh process starts from the same state every time, so the same request
gives bit-identical audio; it costs ~15 ms on top of ~2 ms/s of audio for the synthesis.

Runs with `python -I -S`: standard library only. Protocol: a JSON request on stdin
({library, data, voice, rate_wpm, pitch, text}); on success, one JSON line on stdout
({"sample_rate": int, "words": [[text_position, sample], ...]}) followed by the raw native-endian
int16 samples. On failure the exit status says what failed (see the EXIT_* constants) and
stderr says why.
"""

from __future__ import annotations

import ctypes
import json
import sys
from array import array

EXIT_LIBRARY = 2  # the shared library or its data could not be loaded
EXIT_VOICE = 3  # espeak_SetVoiceByName refused the voice
EXIT_SYNTH = 4  # espeak_Synth or a parameter call failed

# Constants from espeak-ng's speak_lib.h.
AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_DONT_EXIT = 0x8000  # report errors instead of calling exit()
EVENT_LIST_TERMINATED = 0
EVENT_WORD = 1
PARAM_RATE = 1
PARAM_PITCH = 3
POS_CHARACTER = 1
CHARS_UTF8 = 1  # flags: UTF-8 text, no SSML, no phoneme input, no end-of-text pause


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):  # espeak_EVENT
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # 1-based, in characters (code points) of the input
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # ms, rounded: we use `sample` instead
        ("sample", ctypes.c_int),  # sample index from the start of this synthesis
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_Callback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


def main() -> int:
    req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    try:
        lib = ctypes.CDLL(req["library"])
    except OSError as e:
        print(f"cannot load {req['library']}: {e}", file=sys.stderr)
        return EXIT_LIBRARY
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    sample_rate = lib.espeak_Initialize(
        AUDIO_OUTPUT_SYNCHRONOUS, 0, req["data"].encode(), INITIALIZE_DONT_EXIT
    )
    if sample_rate <= 0:
        print(f"espeak_Initialize failed with data path {req['data']}", file=sys.stderr)
        return EXIT_LIBRARY

    # espeak-ng seeds its random generator (pitch flutter, voice variants) from the clock at
    # initialisation, so output changed with the second it was made: pin the seed.
    if hasattr(lib, "espeak_ng_SetRandSeed"):
        lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        lib.espeak_ng_SetRandSeed(0)

    audio = array("h")
    words: list[list[int]] = []

    def collect(wav, n, events):  # called synchronously from inside espeak_Synth
        if wav and n > 0:
            audio.frombytes(ctypes.string_at(wav, 2 * n))
        i = 0
        while events and events[i].type != EVENT_LIST_TERMINATED:
            if events[i].type == EVENT_WORD:
                words.append([events[i].text_position, events[i].sample])
            i += 1
        return 0  # 0 = continue

    callback = _Callback(collect)  # kept referenced until espeak_Synth returns
    lib.espeak_SetSynthCallback(callback)
    if lib.espeak_SetVoiceByName(req["voice"].encode()) != 0:
        print(f"unknown espeak-ng voice {req['voice']!r}", file=sys.stderr)
        return EXIT_VOICE
    params = [(PARAM_RATE, req["rate_wpm"])] + (
        [(PARAM_PITCH, req["pitch"])] if req["pitch"] is not None else []
    )
    for param, value in params:
        if lib.espeak_SetParameter(param, value, 0) != 0:
            print(f"espeak_SetParameter({param}, {value}) failed", file=sys.stderr)
            return EXIT_SYNTH
    text = req["text"].encode("utf-8") + b"\0"
    status = lib.espeak_Synth(text, len(text), 0, POS_CHARACTER, 0, CHARS_UTF8, None, None)
    if status != 0:
        print(f"espeak_Synth failed with status {status}", file=sys.stderr)
        return EXIT_SYNTH
    out = sys.stdout.buffer
    out.write(json.dumps({"sample_rate": sample_rate, "words": words}).encode() + b"\n")
    out.write(audio.tobytes())
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
