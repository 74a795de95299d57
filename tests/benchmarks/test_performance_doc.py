"""docs/performance.md's tables are the report code's rendering of the committed results in docs/data/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import publish


def test_the_page_equals_its_rendering_from_docs_data() -> None:
    page = publish.PAGE.read_text(encoding="utf-8")
    assert publish.render_page(page) == page, (
        "docs/performance.md differs from the tables rendered from docs/data/: "
        "run `.venv/bin/python -m benchmarks.publish --render`"
    )


def test_rendering_twice_changes_nothing() -> None:
    once = publish.render_page(publish.PAGE.read_text(encoding="utf-8"))
    assert publish.render_page(once) == once


def test_a_page_without_a_generated_section_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks the generated sections"):
        publish.render_page("# Performance\n<!-- generated: latency -->\n<!-- end generated -->\n")


def test_published_results_keep_figures_and_drop_raw_samples() -> None:
    result = {"runs": [{"figures": {"calls": {"total": 3}}, "latencies": list(range(publish.MAX_LIST + 1))}]}
    assert publish.slim(result) == {"runs": [{"figures": {"calls": {"total": 3}}}]}


def latency_result(**fields: Any) -> dict[str, Any]:
    """A ``make latency`` result of one mode whose every part is 1.5 / 2.5 / 3.5 s, with ``fields``."""
    from harness.latency import PARTS

    summary = {"p50": 1.5, "p95": 2.5, "max": 3.5}
    return {
        "recorded_at": "2026-12-04T00:00:00+00:00",
        "airflow_version": "3.3.2",
        "cpus": 2,
        "tasks": 20,
        "modes": {"poll": {part: summary for part in PARTS}},
        **fields,
    }


def test_a_published_latency_result_is_rendered_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "latency.json"
    path.write_text(json.dumps(latency_result()), encoding="utf-8")
    monkeypatch.setattr(publish, "LATENCY", path)
    text = publish.render_latency()
    assert "| poll | 20 | 1.5 / 2.5 / 3.5 |" in text
    assert "No result is published" not in text


def test_a_latency_result_says_whether_its_triggerers_were_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "latency.json"
    monkeypatch.setattr(publish, "LATENCY", path)
    cadence = {"poll_interval": 5.0, "max_poll_interval": 5.0}
    path.write_text(
        json.dumps(latency_result(**cadence, warm=True, cold_start=[12.8, 13.0])), encoding="utf-8"
    )
    assert "poll cadence 5 s fixed; triggerers warm, their first reads took 12.8 s, 13 s before;" in (
        publish.render_latency()
    )
    path.write_text(json.dumps(latency_result(**cadence, warm=False, cold_start=[])), encoding="utf-8")
    assert "triggerers cold;" in publish.render_latency()
