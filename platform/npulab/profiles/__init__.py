"""Profiling timelines: traces of runs, their summaries, the timeline view and diffs."""
