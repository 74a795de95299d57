"""``python -m airflow_provider_sm_prefs.reconcile`` (``sm-prefs-reconcile``): one reconciler pass from a shell.

Task states come from Airflow's REST API v2 (``--api-url``, ``--api-token``; environment
``SM_PREFS_AIRFLOW_API_URL`` and ``SM_PREFS_AIRFLOW_API_TOKEN``). SageMaker is reached with boto3's own
credentials and region (or an Airflow connection with ``--aws-conn-id``). Dry run unless ``--stop``.
Exit status: 0 when the pass ran without errors, 1 when a stop failed, 2 when nothing could be judged
(a wrong URL or token, a missing deployment id).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from airflow_provider_sm_prefs.domain.identity import default_deployment_id
from airflow_provider_sm_prefs.domain.kinds import JobKind

if TYPE_CHECKING:
    from airflow_provider_sm_prefs.reconcile import ReconcileReport

__all__ = ["main"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sm-prefs-reconcile",
        description="Stop the provider's running SageMaker jobs whose Airflow task is gone (dry run by default).",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run", dest="dry_run", action="store_true", default=True, help="report only (default)"
    )
    mode.add_argument("--stop", dest="dry_run", action="store_false", help="stop the jobs decided STOP")
    parser.add_argument(
        "--deployment-id",
        default=os.environ.get("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", ""),
        help="the deployment whose jobs to judge (default: $AIRFLOW__SM_PREFS__DEPLOYMENT_ID, else the id "
        "generated for the deployment, read from its Airflow Variable sm_prefs_deployment_id over the REST API)",
    )
    parser.add_argument(
        "--adopt-legacy-ids",
        action="store_true",
        help="also judge jobs tagged with the id earlier releases derived from --api-url (shared by every "
        "deployment with that URL; reported only without this flag)",
    )
    parser.add_argument("--api-url", default=os.environ.get("SM_PREFS_AIRFLOW_API_URL", ""))
    parser.add_argument("--api-token", default=os.environ.get("SM_PREFS_AIRFLOW_API_TOKEN", ""))
    parser.add_argument(
        "--aws-conn-id", default=None, help="an Airflow aws connection (default: boto3's chain)"
    )
    parser.add_argument("--region", default=None)
    parser.add_argument(
        "--kind", dest="kinds", action="append", choices=[k.value for k in JobKind], help="repeatable"
    )
    parser.add_argument(
        "--no-hyperpod-groups",
        dest="hyperpod_groups",
        action="store_false",
        help="judge jobs only, not the HyperPod groups whose last scale-up outlived its task",
    )
    parser.add_argument("--max-calls-per-second", type=float, default=5.0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON, not as a table")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # --json promises a standard output a program can parse: the report alone.
    with _stdout_to_stderr() if args.json else contextlib.nullcontext():
        report = _pass(args)
    if isinstance(report, int):
        return report
    summary = report.as_dict()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(report.table())
        print(
            f"\n{'dry run: ' if report.dry_run else ''}{summary['seen']} running, {summary['stopped']} stopped, "
            f"{summary['would_stop']} would stop, {summary['scaled_back']} groups scaled back, "
            f"{summary['would_scale_back']} would scale back, {summary['kept']} kept, "
            f"{summary['unattributed']} not judged, "
            f"{summary['errors']} errors"
        )
    return 1 if summary["errors"] else 0


def _pass(args: argparse.Namespace) -> ReconcileReport | int:
    """One pass as ``args`` say: its report, or the exit status when nothing could be judged."""
    from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
    from airflow_provider_sm_prefs.operators.identity import DEPLOYMENT_VARIABLE
    from airflow_provider_sm_prefs.reconcile import Reconciler, RestApiTaskStates, StateUnavailable

    if not args.api_url:
        print("error: --api-url (or SM_PREFS_AIRFLOW_API_URL) is required", file=sys.stderr)
        return 2
    source = RestApiTaskStates(args.api_url, args.api_token or None)
    try:
        source.check()
        deployment = args.deployment_id or source.variable(DEPLOYMENT_VARIABLE)
    except StateUnavailable as err:
        print(f"error: Airflow's REST API cannot be read: {err}", file=sys.stderr)
        return 2
    if not deployment:
        print(
            "error: no deployment id: pass --deployment-id (or AIRFLOW__SM_PREFS__DEPLOYMENT_ID); the deployment "
            f"has no Variable {DEPLOYMENT_VARIABLE} yet (its first task generates it)",
            file=sys.stderr,
        )
        return 2
    print(f"deployment id: {deployment}", file=sys.stderr)
    reconciler = Reconciler(
        SageMakerPreferenceHook(aws_conn_id=args.aws_conn_id, region_name=args.region),
        source,
        deployment,
        dry_run=args.dry_run,
        kinds=args.kinds or [k.value for k in JobKind],
        max_calls_per_second=args.max_calls_per_second,
        legacy_ids=[default_deployment_id(args.api_url)],
        adopt_legacy_ids=args.adopt_legacy_ids,
        hyperpod_groups=args.hyperpod_groups,
    )
    return reconciler.run()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Everything written to standard output meanwhile goes to standard error, at the descriptor: Airflow's
    logging (provider discovery, the connection lookup, HTTP requests, the pass's own table) writes to
    stdout through streams it set up itself, which no ``sys.stdout`` swap reaches."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


if __name__ == "__main__":
    sys.exit(main())
