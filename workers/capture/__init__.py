"""Metrics from scripts that do not use workers.track, taken by the supervisor (workers.run).

Three sources, each writing ordinary events to the run's events.jsonl with their ``source``
(workers.contract.capture): lines the script prints (``stdout``), TensorBoard event files
(``tensorboard``) and the MLflow tracking API served on 127.0.0.1 (``mlflow``). Standard
library only, Python 3.8; TensorBoard's reader is an optional extra.
"""
