"""Judge validation: the human-labels file, the join with verdicts, and the agreement scores."""

from __future__ import annotations

import pytest

from fdeval.errors import FdevalError
from fdeval.benchmarks.instructfd.metrics.validation import (
    ModelVerdict,
    binary_scores,
    load_labels,
    validate_judge,
)
from fdeval.benchmarks.instructfd.records import Verdict


@pytest.mark.parametrize(
    "cells, expected",
    [
        # the paper's Table 22 (overall) and two rows of Table 23, as TP/FN/FP/TN -> acc, F1, P, R
        ((51, 13, 7, 109), (0.889, 0.876, 0.886, 0.868)),
        ((13, 1, 0, 16), (0.967, 0.966, None, None)),
        ((1, 2, 1, 26), (0.900, 0.673, None, None)),
    ],
)
def test_scores_reproduce_the_paper(cells, expected):
    s = binary_scores(*cells)
    got = (s["accuracy"], s["macro_f1"], s["macro_precision"], s["macro_recall"])
    for g, e in zip(got, expected):
        if e is not None:
            assert g == pytest.approx(e, abs=5e-4)


def test_scores_with_one_class():
    # only 'adhere' occurs (as truth and prediction): the macro average is over that class
    assert binary_scores(4, 0, 0, 0) == {
        "accuracy": 1.0,
        "macro_f1": 1.0,
        "macro_precision": 1.0,
        "macro_recall": 1.0,
    }
    # truth all adhere, judge says not_adhere once: class not_adhere occurs only as a prediction
    s = binary_scores(3, 1, 0, 0)
    assert s["accuracy"] == 0.75
    assert s["macro_precision"] == pytest.approx((1.0 + 0.0) / 2)
    assert s["macro_recall"] == pytest.approx((0.75 + 0.0) / 2)
    assert s["macro_f1"] == pytest.approx((6 / 7 + 0.0) / 2)
    assert binary_scores(0, 0, 0, 0)["accuracy"] is None


def V(case_id, policy, label):
    return Verdict(case_id, policy, label, "", "rules", "1", "h")


def MV(case_id, policy, label, model):
    return ModelVerdict(V(case_id, policy, label), f"{model}:abc", model)


VERDICTS = [
    MV("c1__listen", "listen", "adhere", "alpha"),
    MV("c1__listen", "listen", "not_adhere", "beta"),
    MV("c2__listen", "listen", "not_adhere", "alpha"),
    MV("c2__listen", "listen", "not_adhere", "beta"),
    MV("c3__continue", "continue", "adhere", "alpha"),
    MV("c3__continue", "continue", "error", "beta"),
    MV("c3__none", "continue", "adhere", "alpha"),
]
LABELS = """case_id,policy,label,model,annotator,notes
c1__listen,listen,adhere,alpha,ann1,
c1__listen,listen,adhere,beta,ann1,judge missed the pause
c2__listen,listen,not_adhere,alpha:abc,ann1,
c2__listen,listen,adhere,beta,ann1,
c3__continue,continue,adhere,alpha,ann1,
c3__continue,continue,not_adhere,beta,ann1,
c3__none,continue,not_adhere,,ann2,
c9__listen,listen,adhere,alpha,ann1,
"""


def test_validation_overall_by_instruction_and_model(tmp_path):
    f = tmp_path / "labels.csv"
    f.write_text(LABELS)
    v = validate_judge(load_labels(f), VERDICTS, {"judge": "rules"})
    assert (v.n_labels, v.n_unmatched) == (8, 1)  # c9 has no verdict
    rows = {(r["group"], r["key"]): r for r in v.rows}
    assert list(rows) == [
        ("overall", "all"),
        ("instruction", "listen"),
        ("instruction", "continue"),
        ("model", "alpha"),
        ("model", "beta"),
    ]
    o = rows[("overall", "all")]
    # judged pairs: c1a TP, c1b FN, c2a TN, c2b FN, c3a TP, c3-none FP; c3b is a judge error
    assert (o["n_labels"], o["n_judge_error"], o["n_compared"]) == (7, 1, 6)
    assert (o["tp"], o["fn"], o["fp"], o["tn"]) == (2, 2, 1, 1)
    assert o["accuracy"] == pytest.approx(3 / 6)
    assert o["judge"] == "rules" and o["metric_version"]
    beta = rows[("model", "beta")]
    assert (beta["tp"], beta["fn"], beta["fp"], beta["tn"], beta["n_judge_error"]) == (
        0,
        2,
        0,
        0,
        1,
    )
    assert rows[("instruction", "continue")]["n_compared"] == 2


def test_a_label_matching_two_models_must_name_one(tmp_path):
    f = tmp_path / "labels.csv"
    f.write_text("case_id,policy,label\nc1__listen,listen,adhere\n")
    with pytest.raises(FdevalError, match=r"labels.csv: line 2: field 'model': .*several runs"):
        validate_judge(load_labels(f), VERDICTS)


@pytest.mark.parametrize(
    "text, where",
    [
        ("case_id,policy\nc1,listen\n", "line 1: field 'label': missing column"),
        (
            "case_id,policy,label,modle\nc1,listen,adhere,x\n",
            "line 1: field 'modle': unknown column",
        ),
        (
            "case_id,policy,label\nc1,listen,adhere\nc2,listen,yes\n",
            "line 3: field 'label': invalid value 'yes'",
        ),
        ("case_id,policy,label\n,listen,adhere\n", "line 2: field 'case_id': empty cell"),
        (
            "case_id,policy,label\nc1,lisen,adhere\n",
            "line 2: field 'policy': unknown instruction 'lisen'",
        ),
        (
            "case_id,policy,label\nc1,listen,adhere\n\nc1,listen,not_adhere\n",
            "line 4: field 'case_id': repeats line 2",
        ),
        (
            "case_id,policy,label\nc1,listen,adhere,extra\n",
            "line 2: field '<row>': 4 cells for 3 columns",
        ),
        ("", "line 1: field '<header>': empty file"),
    ],
)
def test_bad_label_files_are_one_line_errors(tmp_path, text, where):
    f = tmp_path / "labels.csv"
    f.write_text(text)
    with pytest.raises(FdevalError) as e:
        load_labels(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: {where}") and "\n" not in msg


def test_labels_accept_bom_case_and_annotators(tmp_path):
    f = tmp_path / "labels.csv"
    f.write_bytes(
        "\ufeffcase_id,policy,label,annotator\nc1,listen, Adhere ,a\nc1,listen,not_adhere,b\n".encode()
    )
    labels = load_labels(f)
    assert [(h.label, h.annotator, h.line) for h in labels] == [
        ("adhere", "a", 2),
        ("not_adhere", "b", 3),
    ]
    assert labels[0].model is None
