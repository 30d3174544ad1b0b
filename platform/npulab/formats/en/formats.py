"""Dates as engineers read them in logs: 2026-11-30 14:33:57 UTC, not "Nov. 30, 2026, 2:33 p.m."."""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
