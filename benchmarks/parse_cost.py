"""DAG parse cost: 100 preference-list tasks vs the same DAG with the stock SageMakerTrainingOperator.

    python -m benchmarks.parse_cost [--processes 12] [--repeat 5]

Each measurement is a fresh interpreter (as the DAG processor's parsing process is) that

1. refuses and records every socket connect and name lookup, before importing anything;
2. imports Airflow's DagBag (the same in both cases; not compared);
3. imports the operator module the DAG file uses, timed: the one-time "warm-up" a process pays;
4. parses the DAG file ``repeat`` times with ``DagBag.process_file`` (the DAG processor's per-file
   work, with the modules already imported), timing each parse.

Processes alternate between the two files so that drift on a shared machine hits both alike; the
figures are medians over processes of each process's median warm parse. Compiled bytecode is cached
(one throw-away process per file first), so both files are compared as a deployment sees them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DAGS = Path(__file__).resolve().parent / "dags"
FILES: dict[str, tuple[Path, str]] = {
    "preferences": (DAGS / "bench_parse_preferences_100.py", "airflow_provider_sm_prefs.operators.sagemaker"),
    "stock": (DAGS / "bench_parse_stock_100.py", "airflow.providers.amazon.aws.operators.sagemaker"),
}


def _guard_network() -> list[str]:
    """Make every outbound connection and name lookup fail, recording what was attempted."""
    import socket

    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[1:] if args and isinstance(args[0], socket.socket) else args)[:200])
        raise OSError("network access refused by the parse-cost benchmark")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    socket.gethostbyname = refuse  # type: ignore[assignment]
    return attempts


def child(dag_file: Path, operator_module: str, repeat: int) -> dict[str, Any]:
    """One measurement in this (fresh) process; see the module docstring."""
    attempts = _guard_network()
    import importlib

    t0 = time.perf_counter()
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow before 3.3
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]

    t1 = time.perf_counter()
    importlib.import_module(operator_module)
    t2 = time.perf_counter()
    network_before_parse = len(attempts)
    bag = DagBag(dag_folder=str(dag_file.parent), collect_dags=False)
    parses: list[float] = []
    tasks = 0
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        dags = bag.process_file(str(dag_file), only_if_updated=False)
        parses.append(time.perf_counter() - start)
        tasks = sum(len(dag.tasks) for dag in dags)
    return {
        "airflow_import_seconds": t1 - t0,
        "operator_import_seconds": t2 - t1,
        "parse_seconds": parses,
        "tasks": tasks,
        "import_errors": {str(k): str(v)[:500] for k, v in bag.import_errors.items()},
        "network_attempts": attempts,
        "network_attempts_before_parse": network_before_parse,
    }


def _run_child(key: str, repeat: int, env: dict[str, str], timeout: float) -> dict[str, Any]:
    dag_file, module = FILES[key]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.parse_cost", "--child", key, "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    raise RuntimeError(f"parse child for {key} failed (exit {out.returncode}): {out.stderr[-2000:]}")


def measure(
    processes: int, repeat: int, env: dict[str, str], timeout: float = 180.0, warm_cache: bool = True
) -> dict[str, Any]:
    """Run the parse-cost benchmark; returns JSON-ready figures.

    :param processes: fresh processes per DAG file.
    :param repeat: parses per process (the first one is reported apart).
    :param env: environment of the children (isolated AIRFLOW_HOME, bytecode cache).
    :param timeout: seconds per child process.
    :param warm_cache: run one unmeasured process per file first, so compiled bytecode is cached.
    """
    with tempfile.TemporaryDirectory(prefix="sm-prefs-parse-") as home:
        env = {
            **env,
            "AIRFLOW_HOME": home,
            # A database that cannot exist: any database access at parse time fails the parse.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/missing/dir/airflow.db",
        }
        env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW_CONN_")}
        for key in FILES if warm_cache else ():  # fill the bytecode cache; not measured
            _run_child(key, 1, env, timeout)
        raw: dict[str, list[dict[str, Any]]] = {key: [] for key in FILES}
        order = list(FILES)
        for index in range(max(1, processes)):
            for key in order if index % 2 == 0 else reversed(order):
                raw[key].append(_run_child(key, repeat, env, timeout))
    files: dict[str, Any] = {}
    for key, items in raw.items():
        warm = [statistics.median(i["parse_seconds"][1:] or i["parse_seconds"]) for i in items]
        first = [i["parse_seconds"][0] for i in items]
        imports = [i["operator_import_seconds"] for i in items]
        attempts = [a for i in items for a in i["network_attempts"]]
        files[key] = {
            "dag_file": str(FILES[key][0].relative_to(Path(__file__).resolve().parent.parent)),
            "operator_module": FILES[key][1],
            "processes": len(items),
            "parses_per_process": repeat,
            "tasks": items[0]["tasks"] if items else None,
            "import_seconds_median": statistics.median(imports),
            "first_parse_seconds_median": statistics.median(first),
            "parse_seconds_median": statistics.median(warm),
            "parse_seconds_min": min(warm),
            "parse_seconds_stdev": statistics.stdev(warm) if len(warm) > 1 else 0.0,
            "airflow_import_seconds_median": statistics.median(i["airflow_import_seconds"] for i in items),
            "network_attempts": len(attempts),
            "network_attempt_examples": attempts[:5],
            "import_errors": sorted({e for i in items for e in i["import_errors"].values()}),
        }
    prefs, stock = files["preferences"], files["stock"]
    return {
        "files": files,
        "warm_parse_ratio": prefs["parse_seconds_median"] / stock["parse_seconds_median"],
        "first_parse_ratio": prefs["first_parse_seconds_median"] / stock["first_parse_seconds_median"],
        "import_ratio": prefs["import_seconds_median"] / stock["import_seconds_median"],
        "network_attempts_total": prefs["network_attempts"] + stock["network_attempts"],
        "goal_ratio": 1.1,
        "met": prefs["parse_seconds_median"] / stock["parse_seconds_median"] <= 1.1
        and prefs["network_attempts"] + stock["network_attempts"] == 0
        and not prefs["import_errors"]
        and not stock["import_errors"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``--child KEY`` measures in this process; otherwise run the whole comparison and print it."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.parse_cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--child", choices=sorted(FILES), help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=12, help="fresh processes per DAG file (default 12)")
    parser.add_argument("--repeat", type=int, default=5, help="parses per process (default 5)")
    args = parser.parse_args(argv)
    if args.child:
        dag_file, module = FILES[args.child]
        print("RESULT " + json.dumps(child(dag_file, module, args.repeat)), flush=True)
        return 0
    from benchmarks.processes import bytecode_env, child_env

    results = Path(__file__).resolve().parent / "results"
    env = child_env(bytecode_env(results / ".pycache"))
    print(json.dumps(measure(args.processes, args.repeat, env), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
