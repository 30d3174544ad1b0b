"""Metrics in the lines a script prints: the common shapes of training logs, or the spec's own.

The default recogniser takes, from one line:

- ``key: value``, ``key=value`` and ``key value`` segments separated by ``|``, ``,`` or
  runs of spaces (``| epoch 1 | 200/2983 batches | lr 20.00 | loss 6.98 | ppl 1077.8 |``);
  in a ``|``-separated line a key of many words and its unit (Megatron's ``elapsed time
  per iteration (ms): 1234.5``); numbers with thousands separators (``tps: 1,287``); no
  clock (``eta: 0:15:38``);
- a Python or JSON dict, as Hugging Face's Trainer prints (``{'loss': 0.52, 'epoch': 0.3}``),
  numbers given as strings too (fairseq's JSON log);
- a tqdm bar's postfix (``50/1000 [00:01<00:20, 45.2it/s, loss=0.523]``);
- ``Epoch [1/10], Step [100/600], Loss: 0.5234``, ``Step 10/1000: loss=2.3``, MindSpore's
  ``epoch: 1 step: 10, loss is 2.3012`` and MindFormers'
  ``{ Epoch:[  1/  2], step:[    5/  100], loss:[9.876/10.012], ...``;
- PyTorch's ImageNet example's meters (``Epoch: [0][  10/5005]\tLoss 6.9073e+00
  (6.9091e+00)``), torchvision's MetricLogger, timm's and Swin Transformer's training
  lines (``Train: 0 [  50/1251 (  4%)]``, ``Train: [1/300][10/1251]``), MMEngine's
  (``Epoch(train)  [1][ 50/313]``, ``Iter(train) [  50/1000]``); a line that opens with a
  phase and its counter (``Test: [ 10/196]``, ``Epoch(val)``) gives that phase's metrics
  (``test_loss``).

The step is the line's ``step``/``iter``/``batch`` field or its ``N/M`` counter (counted
across epochs when the line also names one, ``(epoch - 1) * M + N``), else the number of
such lines so far. ``epoch`` stays a metric of its own. Nothing is taken from inside a
traceback. ``metric_patterns`` (regexes with named groups, ``step`` giving the step)
replace all of this for a log it does not fit.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any, Pattern

from workers.capture.sink import Point
from workers.contract.events import RANK_PREFIX

# A line longer than this is no log line of metrics (a tensor printed whole).
MAX_LINE_CHARS = 4096
# A number may group its thousands with commas, as Python's "{:,}" prints it (torchtitan's
# "tps: 1,287"): read whole, not as 1.
_NUMBER = (
    r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+\.?\d*(?:[eE][-+]?\d+)?"
    r"|\.\d+(?:[eE][-+]?\d+)?|nan|inf|infinity)"
)
# What may not follow a value: more of a word or a number, or the rest of a clock or a
# duration ("eta: 0:15:38", "eta: 1 day, 2:03:04"), which is no number.
_VALUE_END = r"(?![\w.]|:\d|\s*days?\b)"
# One or two words, and a unit in parentheses (DeepSpeed's "iter time (s): 0.451").
_KEY = r"[A-Za-z][\w./\-]*(?: [A-Za-z][\w./\-]*)?(?: \([^()\s]{1,12}\))?"
# A unit written onto the value, of time or memory (MindFormers' "per_step_time: 1523ms"
# and "train_throughput_per_npu: 12.345T", torchtitan's "memory: 35.53GiB"), becomes the
# name's last word.
_UNIT = r"(ms|us|µs|ns|s|[KMGT]iB|[KMGT]B|T)?"
# key: value, key=value, "key is value" (MindSpore); the value may open a list or a tuple,
# whose first number it is (MindFormers' "loss:[2.302/2.400]", the current loss and the
# mean, and its "global_norm: [2.87]").
_PAIR = re.compile(
    r"(?<![\w./-])("
    + _KEY
    + r")\s*(?:[:=]|\bis\b)\s*[\[(]?\s*("
    + _NUMBER
    + r")"
    + _UNIT
    + _VALUE_END,
    re.IGNORECASE,
)
# key [N/M] (Epoch [1/10]), key:[N/M] (MindFormers' "{ Epoch:[  1/  2], step:[    5/  100]").
_BRACKETED = re.compile(r"(?<![\w./-])([A-Za-z][\w]*)\s*(?:[:=]\s*)?\[\s*(\d+)\s*/\s*(\d+)\s*\]")
# A step's or an epoch's word and its N/M without brackets ("Step 10/1000:", Megatron's
# "iteration       10/     500", PyTorch-GAN's "[Epoch 0/200] [Batch 10/938]").
_WORD_COUNTER = re.compile(
    r"(?<![\w./-])(epoch|step|steps|iter|iteration|batch)\s*(?:[:=]\s*)?(\d+)\s*/\s*(\d+)(?![\w./])",
    re.IGNORECASE,
)
# A step's word and number that lead the line's pairs ("Iteration 100: loss = 0.5"): a
# "key value" of their own, which a line with "key = value" pairs is not read for.
_STEP_LEAD = re.compile(
    r"(?<![\w./-])(?:step|iter|iteration|batch)\s+(\d+)\s*:(?![\d/])", re.IGNORECASE
)
# A MindSpore tensor as print() shows it in a tuple or a custom callback's line: its value.
# No two parts may take the same characters: a line of 4,000 spaces after "value=" took
# 36 s to fail with "value=\s*([^()]*?)\s*\)".
_MS_TENSOR = re.compile(r"\bTensor\(shape=\[[\d, ]*\], dtype=\w+, value=([^()]*)\)")
# A bare N/M counter (200/2983 batches, tqdm's 50/1000).
_COUNTER = re.compile(r"(?<![\w./\[])(\d+)\s*/\s*(\d+)(?![\w./])")
_SPACED = re.compile(r"^\s*(" + _KEY + r")\s+(" + _NUMBER + r")\s*$", re.IGNORECASE)
# "key value" inside a segment: one word, after a phase's if there is one (nanoGPT's "train
# loss 4.2874"), its number (a percentage's too: "mfu 12.34%") ending the segment or
# followed by ':'.
_SPACED_PAIR = re.compile(
    r"(?<![\w./-])((?:(?:train|training|val|valid|validation|eval|test)\s+)?[A-Za-z][\w./-]*)"
    r"\s+(" + _NUMBER + r")%?(?=\s*(?::\s|:$|$))",
    re.IGNORECASE,
)
# A segment of a "|"-separated line that is one "key: value", the key of as many words as it
# has and its unit (Megatron's "elapsed time per iteration (ms): 1234.5").
_SEGMENT_PAIR = re.compile(
    r"^\s*([A-Za-z][\w./-]*(?: [A-Za-z][\w./-]*| \([^()]{1,40}\))+)\s*:\s*(" + _NUMBER + r")\s*$"
)
# PyTorch's ImageNet example and the scripts built on it (its ProgressMeter): "Epoch:
# [0][  10/5005]" (the epoch from 0, then the batch of the epoch), then tab-separated
# meters "Loss 6.9073e+00 (6.9091e+00)", each its value and (its average so far); timm's
# "Loss:  0.4214 (0.4214)" too.
_EPOCH_BATCH = re.compile(
    r"(?<![\w./-])epoch\s*(?::\s*)?\[\s*(\d+)\s*\]\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]", re.IGNORECASE
)
# PyTorch's MNIST example and the many scripts made from it: "Train Epoch: 1 [640/60000
# (1%)]\tLoss: 1.359780", the epoch from 1, then the samples of it seen so far. As in
# every pattern here, no two parts may take the same spaces: with "epoch\s*:?\s*", a line
# of 4,000 spaces after "epoch" took 0.4 s.
_EPOCH_PROGRESS = re.compile(
    r"(?<![\w./-])epoch\s*(?::\s*)?(\d+)\s*\[\s*(\d+)\s*/\s*(\d+)(?:\s*\(\s*[\d.]+\s*%\s*\))?\s*\]",
    re.IGNORECASE,
)
# The word before such an epoch that makes its line a validation's ("Val Epoch: 1 [...]").
_VALIDATION = frozenset(("test", "val", "valid", "validation", "eval", "evaluation"))
_METER = re.compile(
    r"^\s*([A-Za-z][\w./@-]*):?\s+(" + _NUMBER + r")\s*\(\s*" + _NUMBER + r"\s*\)\s*$",
    re.IGNORECASE,
)
# A line that starts with its phase and counter ("Test: [ 10/196]", the ProgressMeter's
# validation): its metrics are that phase's ("test_loss"), not the training's.
_PHASE = re.compile(r"^\s*([A-Za-z]\w*)\s*(?::\s*)?\[\s*\d+\s*/\s*\d+\s*\]")
# timm's "Train: 0 [  50/1251 (  4%)]" and Swin Transformer's "Train: [1/300][10/1251]":
# the training's epoch, then the update of that epoch, both from 0.
_TRAIN_EPOCH = re.compile(
    r"(?<![\w./-])train(?:ing)?\s*(?::\s*)?(?:(\d+)\s*|\[\s*(\d+)\s*/\s*\d+\s*\]\s*)"
    r"\[\s*(\d+)\s*/\s*(\d+)(?:\s*\(\s*[\d.]+\s*%\s*\))?\s*\]",
    re.IGNORECASE,
)
# MMEngine's LogProcessor (MMDetection, MMPretrain, ...): "Epoch(train)  [1][ 50/313]" or
# "Iter(train) [  50/1000]", epochs and iterations from 1; "Epoch(val)" is a validation's.
_MM_PHASE = re.compile(
    r"(?<![\w./-])(epoch|iter)\((\w+)\)\s*(?:\[\s*(\d+)\s*\]\s*)?\[\s*(\d+)\s*/\s*(\d+)\s*\]",
    re.IGNORECASE,
)
# A comma between a line's segments; not one that groups a number's thousands.
_LIST_COMMA = re.compile(r",(?!\d{3}(?!\d))")
_PLAIN_NUMBER = re.compile(r"^\s*[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf)\s*$")
_UNIT_PARENS = re.compile(r"[()]")
_TEXT_COUNTER = re.compile(r"\s*(\d+)\s*/\s*\d+\s*$")
_BARE_NONFINITE = re.compile(r"(?<![\w'\"])(-?(?:nan|inf))(?![\w'\"])")
_TQDM_POSTFIX = re.compile(r"\[[^\]]*?(?:it/s|s/it)\s*,\s*([^\]]*)\]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_DIGIT = re.compile(r"\d|nan|inf", re.IGNORECASE)
_TRACEBACK = "Traceback (most recent call last):"
# torchrun's report of failed workers (a rule of "=", "<script> FAILED", then "rank : 1
# (local_rank: 1)", "exitcode : -6 (pid: 24231)" ...) up to its closing rule: ranks and
# pids, not metrics. A script's own "... FAILED" line, without the rule, is no report.
_ELASTIC_REPORT = re.compile(r"^\S+ FAILED\s*$")
_RULE = re.compile(r"^={10,}\s*$")
_REPORT_MAX_LINES = 200
# A line that reports a failure or a warning carries codes and counts, not metrics
# ("aclrtMemcpy failed, error code 507899", "[ERROR] ... EZ9999"): the default shapes skip
# it. A script's own metric_patterns decide for themselves.
_DIAGNOSTIC = re.compile(
    r"\b(?:failed|failure|exception|warning)\b|\berror(?:\s+code|\s*:)|\[(?:error|exception|warning)\]",
    re.IGNORECASE,
)
# CANN's and torch_npu's codes, and Python's exception names (RuntimeError: ...).
_ERROR_CODE = re.compile(
    r"\b(?:E[A-Z][0-9]{4}|E[0-9]{5}|ERR[0-9]{5}|[A-Z]\w*(?:Error|Exception))\b"
)
# npulab's own lines (the launcher's "npulab: rank 0 of 1, ..."): no metrics of the script.
_OWN = "npulab: "
# A framework's own log line (MindSpore's "[WARNING] ME(1234,7f3b...,python):2026-12-05-...
# [mindspore/context.py:1343] ..."): its numbers are pids, dates and source lines.
_FRAMEWORK_LOG = re.compile(r"^\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|EXCEPTION)\] \w+\(\d+,")
# msrun's own ("Start worker process with rank id:1, log file: ..."): a rank is no metric.
_MSRUN_LINE = re.compile(r"^Start (?:scheduler|worker) process\b")
# "file.cc:1025" (a C++ call stack's frame) names a source line, not a metric.
_SOURCE_FILE = re.compile(r"\.(?:c|cc|cpp|cxx|h|hpp|py)$")
# Fields that give the step rather than a metric.
# fairseq's "num_updates" is its global step.
STEP_KEYS = frozenset(
    ("step", "steps", "global_step", "iter", "iteration", "batch", "it", "num_updates")
)
EPOCH = "epoch"
# Words around a pair that are not the metric's name; Lightning's progress bar shows its
# logger's version ("v_num=3"), and a time left ("eta: 12s") is no measurement either.
_NOISE = frozenset(("avg", "the", "a", "an", "v_num", "eta"))
# Who printed a line, not what it measured (DeepSpeed's "rank=0 time (ms) | ...").
_IDENTITY = frozenset(("rank", "local_rank", "global_rank", "node_rank", "world_size"))


class Recogniser:
    """Finds (key, step, value) points in lines; keeps its state per stream."""

    def __init__(self, patterns: list[str] | None = None) -> None:
        self.patterns: list[Pattern[str]] = [re.compile(p) for p in patterns or []]
        self.lines_with_metrics = 0
        self.last_step = -1
        self._offset = 0
        self._epoch: float | None = None
        self._stepped = False
        self._in_traceback: dict[str, bool] = {}
        self._report_lines: dict[str, int] = {}  # lines into torchrun's report; 0: none
        self._after_rule: dict[str, bool] = {}

    def feed(self, line: str, stream: str = "stdout") -> list[Point]:
        """The points of one printed line (a line with carriage returns: of each part).

        Of a multi-process run's prefixed lines only rank 0's count: every rank of a data
        parallel job prints its own loss (MindSpore's LossMonitor does), the run's is rank 0's.
        """
        prefix = RANK_PREFIX.match(line)
        if prefix is not None:
            if prefix.group(1) != "0":
                return []
            line = line[prefix.end() :]
        if _TRACEBACK in line:
            self._in_traceback[stream] = True
            return []
        if self._in_traceback.get(stream):
            # Frames and source lines are indented; the exception's own line ends it.
            if not line.strip() or line[:1] in (" ", "\t"):
                return []
            self._in_traceback[stream] = False
            return []
        after_rule = self._after_rule.get(stream, False)
        self._after_rule[stream] = _RULE.match(line) is not None
        lines = self._report_lines.get(stream, 0)
        if lines:
            ended = self._after_rule[stream] or lines >= _REPORT_MAX_LINES
            self._report_lines[stream] = 0 if ended else lines + 1
            return []
        if after_rule and _ELASTIC_REPORT.match(line):
            self._report_lines[stream] = 1
            return []
        if line.startswith(_OWN) or _FRAMEWORK_LOG.match(line) or _MSRUN_LINE.match(line):
            return []
        points: list[Point] = []
        for part in line.split("\r"):
            if part and len(part) <= MAX_LINE_CHARS and _DIGIT.search(part):
                points += self._part(_ANSI.sub("", part))
        return points

    def _part(self, text: str) -> list[Point]:
        found = self._by_patterns(text) if self.patterns else _default(text)
        if found is None:
            return []
        values, step = found
        if not values:
            return []
        self.lines_with_metrics += 1
        if step is None:
            # A line without a step in a log whose lines have them (a validation line at the
            # end of an epoch) belongs to the last step; in one without, steps are lines.
            step = self.last_step if self._stepped else self.lines_with_metrics
        else:
            self._stepped = True
            # A counter that starts again (a new epoch without one on the line), or that
            # does not move on in a new epoch (MindSpore's LossMonitor printing once an
            # epoch: "epoch: 2 step: 1875"): keep going.
            epoch = values.get(EPOCH)
            new_epoch = epoch is not None and self._epoch is not None and epoch > self._epoch
            if step + self._offset < self.last_step or (
                new_epoch and step + self._offset <= self.last_step
            ):
                self._offset = self.last_step
            step += self._offset
        if EPOCH in values:
            self._epoch = values[EPOCH]
        self.last_step = max(self.last_step, step)
        return [(key, step, value, None) for key, value in values.items()]

    def _by_patterns(self, text: str) -> tuple[dict[str, float], int | None] | None:
        values: dict[str, float] = {}
        step = None
        for pattern in self.patterns:
            match = pattern.search(text)
            if match is None:
                continue
            for name, raw in match.groupdict().items():
                number = _number(raw) if raw is not None else None
                if number is None:
                    continue
                if name == "step":
                    step = int(number) if math.isfinite(number) else None
                else:
                    values[name] = number
        return values, step


def _default(text: str) -> tuple[dict[str, float], int | None] | None:
    """The metrics and step of one line by the default shapes; None when it has none."""
    if _DIAGNOSTIC.search(text) or _ERROR_CODE.search(text):
        return None
    if "Tensor(" in text:
        text = _MS_TENSOR.sub(lambda tensor: tensor.group(1).strip(), text)
    postfix = _TQDM_POSTFIX.search(text)
    if postfix is not None:
        values: dict[str, float] = {}
        for key, raw in _pairs(postfix.group(1)):
            _put(values, key, raw)
        # The bar's own counter is the last before it: a description may hold one too
        # ("Epoch 1/10:  10%|█         | 10/100 [...]").
        counters = _COUNTER.findall(text[: postfix.start()])
        return values, int(counters[-1][0]) if counters else None
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        parsed = _dict(text[start : end + 1])
        if parsed is not None:
            return _with_step(parsed, None)
    values = {}
    counter: tuple[int, int] | None = None
    step, prefix = None, ""
    # Looked for only where they can be: most lines have no "[".
    if "[" in text:
        text, step, prefix = _lead(text, values)
        phase = _PHASE.match(text)
        if phase is not None and phase.group(1).lower() not in (*STEP_KEYS, EPOCH):
            prefix = phase.group(1).lower() + "_"
            text = text[phase.end() :]
    bracketed: list[tuple[str, ...]] = []
    if "[" in text:
        # Read and taken out in one pass: "step:[5/100]" would otherwise give its pair too,
        # a step without its epoch.
        text = _BRACKETED.sub(lambda found: bracketed.append(found.groups()) or " ", text)
    if "/" in text:
        text = _WORD_COUNTER.sub(lambda found: bracketed.append(found.groups()) or " ", text)
    lead = _STEP_LEAD.search(text) if ":" in text else None
    if lead is not None:
        step = int(lead.group(1)) if step is None else step
        text = text[: lead.start()] + " " + text[lead.end() :]
    for name, index, total in bracketed:
        if name.lower() in STEP_KEYS:
            counter = (int(index), int(total))
        else:
            values[_name(name)] = float(index)
    segmented = "|" in text
    if segmented:
        segments = text.split("|")
    elif "\t" in text:
        segments = text.split("\t")
    elif "," in text:
        segments = _LIST_COMMA.split(text)
    else:
        # Not after a colon: timm pads its values ("Loss:  0.4214 (0.4214)").
        segments = re.split(r"(?<!:)\s{2,}", text)
    for segment in segments:
        meter = _METER.match(segment) if "(" in segment else None
        if meter is not None:
            _put(values, meter.group(1), meter.group(2))
            continue
        spaced = (_SEGMENT_PAIR.match(segment) or _SPACED.match(segment)) if segmented else None
        if spaced is not None:
            _put(values, spaced.group(1), spaced.group(2))
            continue
        pairs = _pairs(segment) or _SPACED_PAIR.findall(segment)
        for key, raw in pairs:
            _put(values, key, raw)
        if counter is None and not pairs:
            bare = _COUNTER.search(segment)
            if bare is not None and segmented:
                counter = (int(bare.group(1)), int(bare.group(2)))
    for key in STEP_KEYS:
        if key in values:
            step = int(values.pop(key))
    if counter is not None and step is None:
        index, total = counter
        epoch = values.get(EPOCH)
        if epoch is not None and math.isfinite(epoch) and epoch >= 1 and total > 0:
            step = (int(epoch) - 1) * total + index
        else:
            step = index
    if step is None and list(values) == [EPOCH]:
        # A header ("Epoch 1/10", as Keras prints before each epoch's line) is no metric.
        return {}, None
    if prefix:
        values = {prefix + key: value for key, value in values.items()}
    return values, step


def _lead(text: str, values: dict[str, float]) -> tuple[str, int | None, str]:
    """A line's epoch and progress in one of the shapes that lead a line: the text left to
    read, the step, and the phase's prefix of a validation's metrics. The epoch goes into
    ``values``."""
    found = _MM_PHASE.search(text) if "(" in text else None
    if found is not None:
        unit, phase, epoch, index, total = found.groups()
        rest = text[found.end() :]
        if phase.lower() != "train":
            return rest, None, phase.lower() + "_"
        if unit.lower() == "iter":
            return rest, int(index), ""
        values[EPOCH] = float(epoch)
        return rest, (int(epoch) - 1) * int(total) + int(index), ""
    found = _EPOCH_BATCH.search(text)
    if found is not None:
        epoch, index, total = (int(group) for group in found.groups())
        values[EPOCH] = float(epoch)
        return text[: found.start()] + " " + text[found.end() :], epoch * total + index, ""
    found = _EPOCH_PROGRESS.search(text)
    if found is not None:
        epoch, index, total = (int(group) for group in found.groups())
        before = text[: found.start()].split()
        # The phase word and what leads the line (a time, a logger's name) go with it.
        rest = text[found.end() :]
        if before and before[-1].lower() in _VALIDATION:
            # A validation's progress is no training step: its metrics keep the last one.
            return rest, None, before[-1].lower() + "_"
        values[EPOCH] = float(epoch)
        return rest, (epoch - 1) * total + index if epoch >= 1 else index, ""
    found = _TRAIN_EPOCH.search(text)
    if found is not None:
        counted, bracketed, index, total = found.groups()
        epoch = int(counted if counted is not None else bracketed)
        values[EPOCH] = float(epoch)
        return text[found.end() :], epoch * int(total) + int(index), ""
    return text, None, ""


def _with_step(values: dict[str, float], step: int | None) -> tuple[dict[str, float], Any]:
    for key in STEP_KEYS:
        if key in values:
            number = values.pop(key)
            if math.isfinite(number):
                step = int(number)
    return values, step


def _dict(text: str) -> dict[str, float] | None:
    """A one-line dict's numeric items (Python's repr or JSON); None when it is not one."""
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            # Literals only: nothing in a printed line is ever run.
            parsed = ast.literal_eval(_BARE_NONFINITE.sub(r"'\1'", text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    if not isinstance(parsed, dict):
        return None
    values: dict[str, float] = {}
    for key, value in parsed.items():
        if isinstance(key, str) and isinstance(value, str) and "/" in key:
            # ms-swift's "'global_step/max_steps': '5/94'": the step and its total.
            counter = _TEXT_COUNTER.match(value)
            step_key = key.split("/", 1)[0].strip().lower()
            if counter is not None and step_key in STEP_KEYS:
                values[step_key] = float(counter.group(1))
                continue
        if isinstance(value, str) and _PLAIN_NUMBER.match(value):
            # Transformers' progress bar and fairseq's JSON log give their numbers as
            # strings ({'loss': '2.303'}, "loss": "13.774").
            value = float(value)
        if isinstance(key, str) and isinstance(value, (int, float)) and not isinstance(value, bool):
            name = _name(key)
            if name not in _IDENTITY:
                values[name] = float(value)
    return values


def _pairs(text: str) -> list[tuple[str, str]]:
    """``_PAIR``'s (key, number) pairs in ``text``, a unit written onto the number as the
    key's last word."""
    return [(f"{key} {unit}", raw) for key, raw, unit in _PAIR.findall(text)]


def _put(values: dict[str, float], key: str, raw: str) -> None:
    number = _number(raw)
    name = _name(key)
    if (
        number is not None
        and name
        and name not in _NOISE
        and name not in _IDENTITY
        and not _SOURCE_FILE.search(name)
    ):
        values[name] = number


def _name(key: str) -> str:
    # A unit in parentheses is a word of the name: "elapsed time per iteration (ms)".
    words = [word for word in _UNIT_PARENS.sub(" ", key).lower().split() if word not in _NOISE]
    return "_".join(words)


def _number(raw: str) -> float | None:
    try:
        return float(raw.replace(",", ""))
    except (TypeError, ValueError):
        return None
