"""AMI-IHM: the AMI meeting corpus's individual headsets, mined as dyadic exchanges.

A meeting has four (sometimes five) participants, each on their own headset microphone
(`amicorpus/<meeting>/audio/<meeting>.Headset-<k>.wav`, 16 kHz mono). The manual annotations
(`ami_public_manual_1.6.2`) give each participant's words in NXT XML,
`words/<meeting>.<agent>.words.xml` (`<w starttime=".." endtime="..">word</w>`, punctuation as
`<w punc="true">` attached to the word before), and `corpusResources/meetings.xml` says which
headset channel and which global speaker id (`FEE005`: F/M is their sex) each agent letter has.

The paper mines AMI "as dyadic exchanges" without saying how. We make every pair of participants
a two-channel conversation `<meeting>.<agent><agent>` (their headsets as channel 0 and 1) and hand
the finder everyone else's word times as third-party speech: a point is kept only when nobody
outside the pair speaks from the start of the focal turn to the horizon. Headsets pick up the
other participants a little; that crosstalk stays in the audio.
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

from ..audio import mono_channel
from ..records import Conversation, CorpusFileError, Speaker, Transcript, Word
from ._common import Recipe, gender, none_found, require_dir

LAYOUT = """\
<root>/amicorpus/<meeting>/audio/<meeting>.Headset-<k>.wav     one headset per participant (16 kHz)
<root>/corpusResources/meetings.xml                            agent letter -> headset channel, global id
<root>/words/<meeting>.<agent>.words.xml                       NXT word times per agent
(the annotation folders may also sit in <root>/ami_public_manual_1.6.2/)
"""


@dataclass(frozen=True)
class Participant:
    meeting: str
    agent: str
    channel: int
    global_name: str


def _run(p: "xml.parsers.expat.XMLParserType", path: Path) -> None:
    """Feed `path` to the expat parser `p` (its handlers set); a read or XML error names the file."""
    try:
        with path.open("rb") as f:
            p.ParseFile(f)
    except OSError as e:
        raise CorpusFileError(path, None, f"cannot read: {e.strerror or e}") from None
    except xml.parsers.expat.ExpatError as e:
        raise CorpusFileError(
            path, e.lineno, f"invalid XML: {xml.parsers.expat.ErrorString(e.code)}"
        ) from None


def _parse(path: Path, start) -> None:
    """Run expat over `path` with a start-element handler that gets (name, attrs, line)."""
    p = xml.parsers.expat.ParserCreate()
    p.StartElementHandler = lambda name, attrs: start(name, attrs, p.CurrentLineNumber)
    _run(p, path)


def read_meetings(path: Path) -> dict[str, list[Participant]]:
    """meeting -> its participants, from corpusResources/meetings.xml."""
    out: dict[str, list[Participant]] = {}
    current: list[str] = []

    def start(name: str, attrs: dict[str, str], line: int) -> None:
        if name == "meeting":
            current[:] = [attrs.get("observation", "")]
        elif name == "speaker" and current and current[0]:
            agent, channel, gid = (
                attrs.get("nxt_agent"),
                attrs.get("channel"),
                attrs.get("global_name"),
            )
            if not agent or channel is None or not channel.isdigit() or not gid:
                raise CorpusFileError(
                    path,
                    line,
                    "a <speaker> needs nxt_agent, a numeric channel and global_name",
                    "speaker",
                )
            out.setdefault(current[0], []).append(Participant(current[0], agent, int(channel), gid))

    _parse(path, start)
    return out


def read_words(path: Path, conversation_id: str, speaker: str) -> list[Word]:
    """One agent's timed words (punctuation joined to the word before; untimed words skipped)."""
    words: list[Word] = []
    open_w: list[tuple[dict[str, str], int]] = []
    text: list[str] = []
    p = xml.parsers.expat.ParserCreate()

    def start(name, attrs):
        if name == "w":
            open_w[:] = [(attrs, p.CurrentLineNumber)]
            text.clear()

    def chars(data):
        if open_w:
            text.append(data)

    def end(name):
        if name != "w" or not open_w:
            return
        attrs, line = open_w.pop()
        token = "".join(text).strip()
        if attrs.get("punc") == "true":
            if words and token:
                words[-1] = replace(words[-1], text=words[-1].text + token)
            return
        if "starttime" not in attrs or "endtime" not in attrs or not token:
            return
        times = []
        for key in ("starttime", "endtime"):
            try:
                times.append(float(attrs[key]))
            except ValueError:
                raise CorpusFileError(
                    path, line, f"expected a time in seconds, got {attrs[key]!r}", key
                ) from None
        if times[1] < times[0]:
            raise CorpusFileError(
                path, line, f"{times[1]:g} is before starttime {times[0]:g}", "endtime"
            )
        words.append(Word(conversation_id, speaker, token, times[0], times[1]))

    p.StartElementHandler, p.CharacterDataHandler, p.EndElementHandler = start, chars, end
    _run(p, path)
    return sorted(words, key=lambda w: w.start_s)


def _annotation_root(root: Path) -> Path:
    for cand in (root, *sorted(root.glob("ami_public_manual*"))):
        if (cand / "corpusResources" / "meetings.xml").is_file():
            return cand
    raise CorpusFileError(
        root / "corpusResources" / "meetings.xml",
        None,
        "not found (nor under ami_public_manual*/): the AMI manual annotations are needed",
    )


def conversations(root: Path) -> Iterator[Conversation]:
    require_dir(root, "ami")
    ann = _annotation_root(root)
    meetings = read_meetings(ann / "corpusResources" / "meetings.xml")
    found = False
    for meeting, people in sorted(meetings.items()):
        audio_dir = root / "amicorpus" / meeting / "audio"
        present = [
            pt
            for pt in sorted(people, key=lambda pt: pt.channel)
            if (audio_dir / f"{meeting}.Headset-{pt.channel}.wav").is_file()
            and (ann / "words" / f"{meeting}.{pt.agent}.words.xml").is_file()
        ]
        if len(present) < 2:
            continue
        words = {
            pt.agent: read_words(
                ann / "words" / f"{meeting}.{pt.agent}.words.xml", meeting, pt.global_name
            )
            for pt in present
        }
        for x, y in combinations(present, 2):
            found = True
            conv = f"{meeting}.{x.agent}{y.agent}"
            chans = tuple(
                mono_channel(conv, audio_dir / f"{meeting}.Headset-{pt.channel}.wav")
                for pt in (x, y)
            )
            speakers = tuple(
                Speaker(conv, pt.global_name, gender(pt.global_name[:1])) for pt in (x, y)
            )
            pair = sorted(
                (replace(w, conversation_id=conv) for pt in (x, y) for w in words[pt.agent]),
                key=lambda w: w.start_s,
            )
            others = tuple(
                (w.start_s, w.end_s) for pt in present if pt not in (x, y) for w in words[pt.agent]
            )
            transcript = Transcript(
                conv, str(ann / "words"), (x.global_name, y.global_name), tuple(pair)
            )
            yield Conversation(conv, chans, speakers, transcript, others_s=others)  # type: ignore[arg-type]
    if not found:
        raise none_found(root, "ami", LAYOUT)


RECIPE = Recipe(
    "ami",
    "AMI meeting corpus, individual headsets (AMI-IHM)",
    LAYOUT,
    "the AMI download's amicorpus/ tree and the NXT manual annotations 1.6.2 (meetings.xml, words/)",
    conversations,
)
