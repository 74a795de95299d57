"""The capacity page: an Airflow 3 plugin that shows every capacity decision across DAG runs.

Registered through the ``airflow.plugins`` entry point, so it is listed by ``airflow plugins`` and the
api-server mounts its FastAPI app (:mod:`.api`) under ``/sm-prefs``. It adds a "SageMaker capacity"
item to the Browse menu and a "Capacity" tab on each DAG and task, both showing the page filtered to
that DAG or task (Airflow 3.1 and later; on Airflow 3.0 the page is reached by URL and by each task's
"Capacity history" extra link). The app is imported on its first request, not when Airflow loads plugins, so
schedulers and task processes that load plugins for other reasons do not pay for it.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_sm_prefs.compat import EXTERNAL_VIEWS
from airflow_provider_sm_prefs.links import CAPACITY_PAGE_PREFIX, capacity_page_path

__all__ = ["URL_PREFIX", "SageMakerCapacityPlugin", "capacity_page_path"]

#: Where the api-server mounts the app.
URL_PREFIX = CAPACITY_PAGE_PREFIX


class _App:
    """An ASGI app that imports :data:`.api.app` on its first request."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from airflow_provider_sm_prefs.plugin.api import app

        await app(scope, receive, send)


class _PageLogout:
    """An ASGI middleware: Airflow's logout also ends the page's own login (compat.page decides how).

    The compat module is imported on the first request, as :class:`_App` imports the page.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._inner: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._inner is None:
            from airflow_provider_sm_prefs.compat.page import logout_middleware

            self._inner = logout_middleware(self.app, URL_PREFIX)
        await self._inner(scope, receive, send)


class SageMakerCapacityPlugin(AirflowPlugin):
    """The capacity page, its JSON API, and the links to it from the Airflow UI."""

    name = "sm_prefs_capacity"
    fastapi_apps = [{"app": _App(), "url_prefix": URL_PREFIX, "name": "SageMaker capacity"}]
    fastapi_root_middlewares = [{"middleware": _PageLogout, "name": "SageMaker capacity logout"}]
    if EXTERNAL_VIEWS:
        external_views = [
            {
                "name": "SageMaker capacity",
                "href": capacity_page_path(),
                "url_route": "sm-prefs-capacity",
                "category": "browse",
                "destination": "nav",
            },
            {
                "name": "Capacity",
                "href": capacity_page_path() + "?dag_id={DAG_ID}",
                "url_route": "sm-prefs-capacity-dag",
                "destination": "dag",
            },
            {
                "name": "Capacity",
                "href": capacity_page_path() + "?dag_id={DAG_ID}&task_id={TASK_ID}",
                "url_route": "sm-prefs-capacity-task",
                "destination": "task",
            },
        ]
    # Airflow 3.0 has no external views, and its menu items (appbuilder_menu_items) are Flask plugins
    # that stop its api-server unless the FAB provider is installed: there the page is reached by URL and
    # by each task's "Capacity history" extra link.
