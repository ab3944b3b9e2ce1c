"""Model text to transcript words, per `text_stream` rule, on recorded piece streams in real HDF5 logs.

The Moshi stream (`moshi_tiny_pieces.json`) is what `moshi.server` sends for a few answers: the
answers encoded with the SentencePiece tokenizer that `fdeval.models.moshi_tiny` trains (128
pieces), each token as `id_to_piece(token)` with "▁" made a space, ids 0 and 3 not sent. Record it
again with `python tests/transcript/test_model_words.py` (needs `sentencepiece`). The other streams
are hand-written in the shapes the adapters' upstream code sends (marked where they are).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from fdeval.errors import FileFieldError
from fdeval.models.base import DuplexModel, InProcessSession, ModelEvent
from fdeval.models.freezeomni import FreezeOmni
from fdeval.models.funaudiochat import FunAudioChat
from fdeval.models.gemini import GeminiLive
from fdeval.models.minicpmo import MiniCPMO
from fdeval.models.moshi import Moshi
from fdeval.models.moshi_lockstep import MoshiLockstep
from fdeval.models.personaplex_lockstep import PersonaPlexLockstep
from fdeval.models.personaplex import PersonaPlex
from fdeval.models.reference import ReferenceAgent
from fdeval.orchestrator.clock import LockstepClock
from fdeval.orchestrator.recorder import SessionLog, write_session
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.transcript.build import MAX_WORD_S, build_transcript
from fdeval.types import TestCase, Turn, WordTiming

FIXTURE = Path(__file__).with_name("moshi_tiny_pieces.json")
SR = 16000
FRAME_S = 0.08  # Moshi: one text token per 80 ms frame
CID = "pieces_case"
NAN = float("nan")


def load_answers() -> list[dict]:
    return json.loads(FIXTURE.read_text())["answers"]


def _case(turns=()) -> TestCase:
    return TestCase(CID, CID, "instructfd", "test", None, tuple(turns))


def write_log(
    tmp_path: Path,
    text_rows,
    duration_s: float,
    chunks=(),
    flushes=(),
    text_stream: str | None = None,
    name: str = "s",
) -> Path:
    """A session log as the recorder writes it: `text_rows` are [arrival, play, duration, text, dropped]."""
    log = SessionLog(CID, SR, FRAME_S, "lockstep")
    log.model_text = [list(r) for r in text_rows]
    log.model_chunks = list(chunks)
    log.flushes = list(flushes)
    log.duration_s = duration_s
    if text_stream is not None:
        log.attrs["text_stream"] = text_stream
    n = int(duration_s * SR)
    h5 = tmp_path / f"{name}.h5"
    write_session(
        log, np.zeros(n, np.float32), np.zeros(n, np.float32), tmp_path / f"{name}.wav", h5
    )
    return h5


def model_words(h5: Path) -> list[tuple[str, float, float]]:
    tr = build_transcript(_case(), h5)
    return [
        (w.text, round(w.start_s, 6), round(w.end_s, 6)) for w in tr.words if w.speaker == "model"
    ]


def flat(pairs) -> list[float]:
    return [x for pair in pairs for x in pair]


def continuous_chunks(duration_s: float, start_s: float = 0.0) -> list[tuple[float, float, int]]:
    """One 80 ms audio chunk per frame, back to back (Moshi streams audio, silent or not, all along)."""
    n = int(round(FRAME_S * SR))
    return [(t, t, n) for t in np.arange(start_s, duration_s - 1e-9, FRAME_S)]


def moshi_layout(answers: list[dict], gap_frames: int = 25, pad_frames: int = 2):
    """Place recorded pieces as Moshi emits them: one piece per frame, `pad_frames` of text padding
    before each new word, `gap_frames` between answers. Returns the text rows, the session length
    and, per answer, the (first, last) frame of each word's visible pieces."""
    rows, spans, frame = [], [], 5
    for ans in answers:
        words: list[list] = []
        for i, piece in enumerate(ans["pieces"]):
            if i == 0 or piece[:1].isspace():  # "▁" starts a word
                frame += pad_frames if i else 0
                words.append([None, None])
            if piece.strip():
                words[-1][0] = frame if words[-1][0] is None else words[-1][0]
                words[-1][1] = frame
            rows.append([frame * FRAME_S, frame * FRAME_S, NAN, piece, False])
            frame += 1
        spans.append([tuple(w) for w in words if w[0] is not None])
        frame += gap_frames
    return rows, (frame + 5) * FRAME_S, spans


# -- the recorded Moshi stream ------------------------------------------------------------------
def test_recorded_moshi_stream_gives_the_spoken_words_at_their_pieces_times(tmp_path):
    answers = load_answers()
    rows, duration, spans = moshi_layout(answers)
    h5 = write_log(tmp_path, rows, duration, continuous_chunks(duration), text_stream="pieces")
    got = model_words(h5)
    expected_text = [w for a in answers for w in a["text"].split()]
    assert [w for w, _, _ in got] == expected_text  # "Sure,", "Let", "kilometres", "Mm-hmm,", ...
    expected_times = []
    for ans_spans in spans:
        for j, (first, last) in enumerate(ans_spans):
            # a word ends where the next one starts, the answer's last word MAX_WORD_S after its last piece
            end = (
                ans_spans[j + 1][0] * FRAME_S
                if j + 1 < len(ans_spans)
                else last * FRAME_S + MAX_WORD_S
            )
            expected_times.append((first * FRAME_S, end))
    assert flat((s, e) for _, s, e in got) == pytest.approx(flat(expected_times), abs=1e-9)
    multi = [(w, f, l) for w, (f, l) in zip(expected_text, (s for a in spans for s in a)) if l > f]
    assert len(multi) > len(expected_text) / 2  # most words here are several pieces


def test_words_rule_on_the_moshi_stream_is_todays_one_word_per_piece(tmp_path):
    rows, duration, _ = moshi_layout(load_answers())
    visible = [r for r in rows if r[3].strip()]
    expected = []
    for i, r in enumerate(
        visible
    ):  # today: each piece's token, until the next piece (at most MAX_WORD_S)
        nxt = visible[i + 1][1] if i + 1 < len(visible) else duration
        expected.append((r[3].strip(), r[1], min(nxt, r[1] + MAX_WORD_S)))
    for stream in ("words", None):  # logs recorded before text_stream existed read as "words"
        got = model_words(
            write_log(tmp_path, rows, duration, continuous_chunks(duration), text_stream=stream)
        )
        assert [w for w, _, _ in got] == [w for w, _, _ in expected]
        assert flat((s, e) for _, s, e in got) == pytest.approx(
            flat((s, e) for _, s, e in expected), abs=1e-9
        )


def test_words_rule_is_unchanged_for_word_streams(tmp_path):
    """Hand-written, reference-agent shaped: whole words per piece, some with durations."""
    rows = [
        [0.9, 1.0, 0.3, "Sure,", False],
        [1.2, 1.3, 0.1, "I", False],
        [1.4, 1.5, NAN, "can help", False],  # two words, one piece: both timed as the piece
        [1.6, 1.7, NAN, " ", False],  # whitespace: no word
        [2.9, 3.0, NAN, "gone", True],  # flushed: left out
        [3.0, 3.0, NAN, "you", False],  # the last: until the session ends
        [3.5, 3.5, NAN, "late", False],  # after the session's end
    ]
    expected = [
        ("Sure,", 1.0, 1.3),
        ("I", 1.3, 1.4),
        ("can", 1.5, 2.1),
        ("help", 1.5, 2.1),
        ("you", 3.0, 3.4),
    ]
    for stream in ("words", None):
        assert model_words(write_log(tmp_path, rows, 3.4, text_stream=stream)) == expected


# -- flushes, punctuation, pauses, durations (hand-written streams) --------------------------------
def test_dropped_pieces_are_left_out_and_a_flush_ends_the_word_it_cuts(tmp_path):
    """Moshi-shaped pieces; a flush at 1.2 s drops 'fu' and ' and' (queued, never played)."""
    rows = [
        [1.00, 1.00, NAN, " we", False],
        [1.08, 1.08, NAN, " s", False],
        [1.16, 1.16, NAN, "h", False],
        [1.18, 1.24, NAN, "fu", True],
        [1.18, 1.32, NAN, " and", True],
        [2.00, 2.00, NAN, " ok", False],
        [2.08, 2.08, NAN, "ay", False],
        [2.16, 2.16, NAN, ".", False],
    ]
    chunks = [(1.0, t, 1280) for t in np.arange(1.0, 1.4, FRAME_S)] + continuous_chunks(3.0, 2.0)
    flushes = [(1.2, 3200)]
    got = model_words(write_log(tmp_path, rows, 3.0, chunks, flushes, text_stream="pieces"))
    # 'sh' was cut mid-word: what was played, ending at the flush; after it a new word starts
    assert got == [("we", 1.0, 1.08), ("sh", 1.08, 1.2), ("okay.", 2.0, 2.76)]
    today = model_words(write_log(tmp_path, rows, 3.0, chunks, flushes, text_stream="words"))
    assert [w for w, _, _ in today] == ["we", "s", "h", "ok", "ay", "."]


def test_a_word_whose_pieces_straddle_a_flush_is_split_there(tmp_path):
    """' s' played before the flush, 'h' arrived after it (nothing of the word was dropped): the
    listener heard 's', the cut, then 'h': two words, the first ending at the flush."""
    rows = [
        [1.08, 1.08, NAN, " s", False],
        [1.20, 1.20, NAN, "h", False],
        [1.28, 1.28, NAN, " up", False],
    ]
    chunks = [(1.0, t, 1280) for t in np.arange(1.0, 1.4, FRAME_S)] + continuous_chunks(2.5, 1.2)
    got = model_words(write_log(tmp_path, rows, 2.5, chunks, [(1.12, 2000)], text_stream="pieces"))
    assert got == [("s", 1.08, 1.12), ("h", 1.2, 1.28), ("up", 1.28, 1.88)]


def test_punctuation_pieces_join_their_word(tmp_path):
    """SentencePiece splits punctuation off without "▁" (as in the recorded stream: ' that', '.')."""
    pieces = [" that", ".", " ", "L", "et", ",", " me", "?"]
    rows = [[1 + i * FRAME_S, 1 + i * FRAME_S, NAN, p, False] for i, p in enumerate(pieces)]
    got = model_words(write_log(tmp_path, rows, 3.0, continuous_chunks(3.0), text_stream="pieces"))
    assert [w for w, _, _ in got] == ["that.", "Let,", "me?"]
    assert [s for _, s, _ in got] == pytest.approx([1.0, 1 + 3 * FRAME_S, 1 + 6 * FRAME_S])


def test_a_pause_in_the_model_audio_ends_a_word(tmp_path):
    """Hand-written BPE deltas in the shapes Gemini Live / MiniCPM-o send. An answer's first delta
    has no leading space ("Sure"); the 2 s of model silence before it keeps it off the previous
    answer's last word. MiniCPM-o's 1 s chunks play back to back, so a word cut between two
    chunks ("kilo" + "metres") stays one word."""
    rows = [
        [0.5, 1.0, NAN, "Met", False],
        [0.6, 1.4, NAN, "amo", False],
        [0.7, 1.8, NAN, "rph", False],
        [0.8, 2.2, NAN, "osi", False],
        [0.9, 2.6, NAN, "s.", False],
        [4.5, 5.0, NAN, "Sure", False],
        [4.6, 5.5, NAN, " thing", False],
        [9.5, 10.0, NAN, " kilo", False],
        [10.4, 11.0, NAN, "metres away.", False],
    ]
    chunks = [(0.5, 1.0, 2 * SR), (4.5, 5.0, SR), (9.5, 10.0, SR), (10.4, 11.0, SR)]
    got = model_words(write_log(tmp_path, rows, 13.0, chunks, text_stream="pieces"))
    assert got == [
        ("Metamorphosis.", 1.0, 3.2),
        ("Sure", 5.0, 5.5),
        ("thing", 5.5, 6.1),
        ("kilometres", 10.0, 11.6),
        ("away.", 11.0, 11.6),
    ]


def test_piece_durations_set_word_ends_and_the_session_end_cuts(tmp_path):
    rows = [
        [1.0, 1.0, 0.1, " he", False],
        [1.1, 1.1, 0.25, "llo", False],  # "hello" ends with its last piece
        [1.5, 1.5, 0.3, " there", False],  # runs past the session's end: cut there
        [1.75, 1.75, 0.2, " late", False],  # starts after the end: left out
    ]
    got = model_words(write_log(tmp_path, rows, 1.7, continuous_chunks(1.7), text_stream="pieces"))
    assert got == [("hello", 1.0, 1.35), ("there", 1.5, 1.7)]


def test_an_unknown_text_stream_is_one_line_naming_file_case_and_field(tmp_path):
    h5 = write_log(tmp_path, [[1.0, 1.0, NAN, " hi", False]], 2.0, text_stream="bytes")
    with pytest.raises(FileFieldError) as e:
        build_transcript(_case(), h5)
    msg = str(e.value)
    assert (
        "\n" not in msg
        and str(h5) in msg
        and repr(CID) in msg
        and "attrs.text_stream" in msg
        and "'bytes'" in msg
    )


def test_each_adapter_declares_the_rule_its_upstream_stream_needs():
    rules = {
        c.__name__: c.text_stream
        for c in (
            ReferenceAgent,
            FreezeOmni,
            Moshi,
            PersonaPlex,
            MoshiLockstep,
            PersonaPlexLockstep,
            MiniCPMO,
            FunAudioChat,
            GeminiLive,
        )
    }
    assert rules == {
        "ReferenceAgent": "words",
        "FreezeOmni": "words",
        "Moshi": "pieces",
        "PersonaPlex": "pieces",
        "MoshiLockstep": "pieces",
        "PersonaPlexLockstep": "pieces",
        "MiniCPMO": "pieces",
        "FunAudioChat": "pieces",
        "GeminiLive": "pieces",
    }
    assert DuplexModel.text_stream == "words"


# -- end to end: a Moshi-style model through the orchestrator ------------------------------------
class MoshiStyleReplay(DuplexModel):
    """In-process stand-in for Moshi's stream (not the model): after the user's turn it says an
    answer (espeak-ng audio) while emitting the answer's recorded pieces one per 80 ms frame, text
    before its frame's audio; audio (silence too) goes out every frame, as Moshi's does."""

    name = "moshi-style-replay"
    sample_rate = SR
    frame_s = FRAME_S
    clock = "lockstep"
    turn_silence_s = 1.0
    text_stream = "pieces"

    def __init__(self, pieces: list[str], speech):
        self.audio = speech.samples
        self.schedule: dict[int, str] = {}  # answer frame -> piece
        self.first_visible: list[int] = []  # answer frame of each word's first visible piece
        groups: list[list[str]] = []
        for i, p in enumerate(pieces):
            if i == 0 or p[:1].isspace():
                groups.append([])
            groups[-1].append(p)
        assert len(groups) == len(speech.words)
        free = 0
        for group, timing in zip(groups, speech.words):
            f = max(free, int(round(timing.start_s / FRAME_S)))
            for k, p in enumerate(group):
                self.schedule[f + k] = p
            self.first_visible.append(f + next(k for k, p in enumerate(group) if p.strip()))
            free = f + len(group)
        self.sessions: list[_ReplaySession] = []

    def session(self, instruction, seed):
        s = _ReplaySession(self)
        self.sessions.append(s)
        return s


class _ReplaySession(InProcessSession):
    def __init__(self, model: MoshiStyleReplay):
        super().__init__()
        self.m, self.i, self.heard, self.quiet, self.start = model, 0, False, 0, None

    def step(self, frame: np.ndarray) -> list[ModelEvent]:
        i, n = self.i, int(round(FRAME_S * SR))
        self.i += 1
        if self.start is None:
            loud = float(np.sqrt(np.mean(frame**2))) > 0.003
            self.heard, self.quiet = self.heard or loud, 0 if loud else self.quiet + 1
            if self.heard and self.quiet >= 8:
                self.start = i
        audio, events = np.zeros(n, np.float32), []
        if self.start is not None:
            k = i - self.start
            if k in self.m.schedule:
                events.append(ModelEvent("text", text=self.m.schedule[k]))
            seg = self.m.audio[k * n : (k + 1) * n]
            audio[: len(seg)] = seg
        return events + [ModelEvent.audio_chunk(audio)]


def test_moshi_style_session_gets_its_words_not_its_pieces(tts, vad, tmp_path):
    answer = load_answers()[0]
    q = tts.synthesize("Can you tell me how to start running when I have never done it before?")
    case = _case(
        [
            Turn(
                CID,
                0,
                "turn0",
                "take-turn",
                f"{CID}/turn0.wav",
                q.text,
                q.words,
                q.duration_s,
                20.0,
            )
        ]
    )
    model = MoshiStyleReplay(answer["pieces"], tts.synthesize(answer["text"]))
    # the run stage records model.text_stream in the log's attrs; given here too, so that this
    # test checks the transcript side whichever way the attribute gets there
    res = asyncio.run(
        run_session(
            case,
            [q.samples],
            model,
            OrchestratorConfig(),
            LockstepClock(),
            vad,
            seed=0,
            attrs={"text_stream": model.text_stream},
        )
    )
    write_session(res.log, res.user, res.model, tmp_path / "new.wav", tmp_path / "new.h5")
    with h5py.File(tmp_path / "new.h5", "r") as f:
        assert f.attrs["text_stream"] == "pieces"
    del res.log.attrs["text_stream"]  # a log as recorded before the rule existed
    write_session(res.log, res.user, res.model, tmp_path / "old.wav", tmp_path / "old.h5")
    new = [w for w in build_transcript(case, tmp_path / "new.h5").words if w.speaker == "model"]
    old = [w for w in build_transcript(case, tmp_path / "old.h5").words if w.speaker == "model"]
    assert [w.text for w in new] == answer["text"].split()
    assert len(old) == sum(1 for p in answer["pieces"] if p.strip())  # one "word" per piece before
    assert len(old) >= 2 * len(new)
    # each word starts where the frame of its first piece starts playing (one chunk per frame)
    start = model.sessions[0].start
    chunk_play = [c[1] for c in res.log.model_chunks]
    assert len(chunk_play) == model.sessions[0].i
    assert [w.start_s for w in new] == pytest.approx(
        [chunk_play[start + f] for f in model.first_visible], abs=1e-9
    )
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in zip(new, new[1:])) and all(
        w.end_s > w.start_s for w in new
    )


@pytest.mark.skipif(
    importlib.util.find_spec("sentencepiece") is None,
    reason="sentencepiece is not installed (the recorded stream above runs without it)",
)
def test_a_fresh_tiny_moshi_tokenizer_stream_gives_the_words(tmp_path):
    answers = record_answers()
    rows, duration, _ = moshi_layout(answers)
    got = model_words(
        write_log(tmp_path, rows, duration, continuous_chunks(duration), text_stream="pieces")
    )
    assert [w for w, _, _ in got] == [w for a in answers for w in a["text"].split()]


# -- recording the fixture ------------------------------------------------------------------------
ANSWER_TEXTS = (
    "Sure, I can help with that. Let me walk you through it one step at a time, starting with the part "
    "that matters most, and then we can look at the details together.",
    "Mm-hmm, yeah, right, I see.",
    "Okay, thanks for stopping me. Let me change course and focus on that instead.",
    "How many kilometres is it from the station to the museum, and is there a bus at night?",
    "Honestly, the weather looks fine for a long walk this weekend.",
)


def record_answers() -> list[dict]:
    """The answers as moshi.server would stream them with the tiny builder's tokenizer."""
    import sentencepiece as spm

    from fdeval.models.moshi_tiny import train_tokenizer

    with tempfile.TemporaryDirectory() as d:
        sp = spm.SentencePieceProcessor(model_file=str(train_tokenizer(Path(d))))
        out = []
        for text in ANSWER_TEXTS:
            ids = [i for i in sp.encode(text) if i not in (0, 3)]  # the server sends neither
            pieces = [sp.id_to_piece(i).replace("\u2581", " ") for i in ids]
            assert "".join(pieces).split() == text.split(), (text, pieces)
            out.append({"text": text, "pieces": pieces})
    return out


if __name__ == "__main__":
    import sentencepiece

    head = {
        "what": "text pieces as moshi.server sends them: id_to_piece(token) with '\u2581' made a space, ids 0 "
        "and 3 not sent; tokenizer: fdeval.models.moshi_tiny.train_tokenizer (128-piece unigram)",
        "sentencepiece": sentencepiece.__version__,
    }
    lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
    answers = [f"  {json.dumps(a, ensure_ascii=False)}" for a in record_answers()]
    FIXTURE.write_text(
        "{\n" + "\n".join(lines) + '\n "answers": [\n' + ",\n".join(answers) + "\n ]\n}\n"
    )
    print("wrote", FIXTURE)


# -- marks a benchmark passes in (Instruct-FD's triggers) ----------------------------------------
def test_turn_marks_move_onto_the_session_clock_and_stop_where_the_turn_did(tmp_path):
    """`build_transcript(..., triggers=)`: each turn's (kind, offset in its audio) points land at
    the turn's start plus the offset; a point past where a yield turn stopped is dropped; a turn
    without an entry has none."""
    words = tuple(
        WordTiming(t, 0.3 * i, 0.3 * i + 0.25) for i, t in enumerate("one two three four".split())
    )
    turns = [
        Turn(CID, 0, "turn0", "take-turn", "a.wav", "one two three four", words, 1.2, 20.0),
        Turn(
            CID,
            1,
            "turn1",
            "barge-in",
            "b.wav",
            "one two three four",
            words,
            1.2,
            20.0,
            barge_in_after_s=1.0,
            barge_in_handling="yield",
            subtype="interrupt",
        ),
        Turn(CID, 2, "turn2", "take-turn", "c.wav", "one two three four", words, 1.2, 20.0),
    ]
    log = SessionLog(CID, SR, FRAME_S, "lockstep")
    log.duration_s = 8.0

    def row(i, kind, start, end, cut):
        return {
            "index": i,
            "label": f"turn{i}",
            "turn_type": kind,
            "subtype": "interrupt" if kind == "barge-in" else "",
            "scheduled_s": start,
            "start_s": start,
            "actual_s": start,
            "error_s": 0.0,
            "end_s": end,
            "cut_short": cut,
            "onset_s": NAN,
            "delay_s": NAN,
            "wait_reason": "",
            "n_samples_played": 0,
        }

    log.turns = [
        row(0, "take-turn", 1.0, 2.2, False),
        row(1, "barge-in", 4.0, 4.5, True),
        row(2, "take-turn", 6.0, 7.2, False),
    ]
    h5 = tmp_path / "s.h5"
    write_session(
        log, np.zeros(8 * SR, np.float32), np.zeros(8 * SR, np.float32), tmp_path / "s.wav", h5
    )
    tr = build_transcript(
        _case(turns),
        h5,
        triggers=[[("backchannel", 0.55)], [("interrupt", 0.2), ("interrupt", 0.9)]],
    )
    assert [p.triggers_s for p in tr.user_turns] == [
        (("backchannel", 1.55),),
        (("interrupt", 4.2),),
        (),
    ]
    assert all(p.triggers_s == () for p in build_transcript(_case(turns), h5).user_turns)
