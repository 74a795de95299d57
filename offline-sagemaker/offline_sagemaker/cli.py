"""``offline-sagemaker`` (also installed as ``sm-prefs-emulator``, and ``python -m offline_sagemaker``): run
the offline SageMaker until SIGTERM/SIGINT.

    offline-sagemaker --port 5005 --scenario first-choice-scarce --scenario-dir ./scenarios

The first line printed is the endpoint URL, so scripts can read it (``--port 0`` picks a free port).
Over HTTP (``POST /_emulator/scenario``) the server loads a builtin, the ``--scenario`` file, or a
``.yaml``/``.yml``/``.json`` file under a ``--scenario-dir``: no other file of this machine.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from offline_sagemaker.scenario import BUILTIN_SCENARIOS, ScenarioError
from offline_sagemaker.server import OfflineSageMaker

#: The names the command is installed under; any other invocation (``python -m``) is called the first.
COMMANDS = ("offline-sagemaker", "sm-prefs-emulator")


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name in COMMANDS else COMMANDS[0]


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Offline SageMaker: SageMaker's JSON API with simulated capacity, plus moto for S3 etc.",
    )
    parser.add_argument("--port", type=int, default=5005, help="TCP port (0 = pick a free one; default 5005)")
    parser.add_argument(
        "--scenario",
        default="default",
        help=f"builtin scenario ({', '.join(BUILTIN_SCENARIOS)}) or a YAML/JSON file (default: default)",
    )
    parser.add_argument(
        "--scenario-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory whose .yaml/.yml/.json scenario files POST /_emulator/scenario may load "
        "(repeatable; without it, only the builtins and the --scenario file)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default 127.0.0.1; anything else exposes fake AWS to the network)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the process exit code."""
    prog = _prog()
    args = _parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(message)s")
    try:
        emulator = OfflineSageMaker(
            scenario=args.scenario, port=args.port, host=args.host, scenario_dirs=args.scenario_dir
        )
        emulator.start()
    except ScenarioError as exc:
        print(f"{prog}: invalid scenario: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{prog}: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except SystemExit:
        # werkzeug's make_server exits on bind errors after printing the reason.
        return 1

    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    print(emulator.endpoint_url, flush=True)
    print(
        f"{prog}: scenario {emulator.scenario.name!r}, region {emulator.region}, "
        f"time scale x{emulator.scenario.time_scale:g}; admin at {emulator.endpoint_url}/_emulator/stats",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
