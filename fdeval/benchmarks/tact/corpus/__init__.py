"""TACT on real conversations: read a two-speaker corpus, mine its decision points by the
paper's rules, and import the ones annotators labelled as episodes (docs/tact-corpora.md).

* `records`: the common records (`Conversation`, `Word`, `Turn`, `Speaker`, ...) and the one error,
  `CorpusFileError` (one line: file, line, field);
* `audio`: two-channel audio from a stereo file or a mono pair, resampled to 16 kHz;
* `transcripts`: TextGrid, CTM, RTTM and fdeval JSON word readers;
* `finder`: the decision-point finder (`find_decision_points`, `FinderSettings`);
* `labels`: the annotators' labels file;
* `pipeline`: `prepare` (points and the importer's inputs) and `import_labelled` (rows, episodes);
* `recipes`: one module per corpus layout, found by module name (`all_recipes`, `get_recipe`).

`python -m fdeval.benchmarks.tact.corpus <recipe> <corpus_dir> <out_dir> [--labels FILE]` runs it all.
"""

from .finder import DecisionPoint, FinderSettings, find_decision_points
from .records import ChannelSource, Conversation, CorpusFileError, Speaker, Transcript, Turn, Word
from .transcripts import read_ctm, read_json_words, read_rttm, read_textgrid, read_transcript

__all__ = [
    "ChannelSource",
    "Conversation",
    "CorpusFileError",
    "DecisionPoint",
    "FinderSettings",
    "Speaker",
    "Transcript",
    "Turn",
    "Word",
    "find_decision_points",
    "read_ctm",
    "read_json_words",
    "read_rttm",
    "read_textgrid",
    "read_transcript",
]
