"""The capacity page's login on each supported Airflow minor (loaded by the api-server only).

Airflow 3.1 and later: the api-server's own ``get_user`` (the UI's ``_token`` cookie or a ``Bearer``
header) and a redirect to the login page. Airflow 3.0 reads only a ``Bearer`` header, and its UI moves
the token from the cookie into the browser's local storage, out of reach of a page load: there the page
also accepts the token from :data:`PAGE_TOKEN_COOKIE`, which a small sign-in page copies from local
storage (or sends the visitor to the login page when there is none). The sign-in page holds no data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

from airflow.api_fastapi.app import get_auth_manager
from fastapi import Depends, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from airflow_provider_sm_prefs.compat import AIRFLOW_V_3_1_PLUS

__all__ = ["PAGE_TOKEN_COOKIE", "login_response", "optional_user", "required_user"]

#: The capacity page's own copy of the UI's token (Airflow 3.0), scoped to the page's path.
PAGE_TOKEN_COOKIE = "sm_prefs_token"

_SIGN_IN = """<!doctype html><html><head><meta charset="utf-8"><title>SageMaker capacity</title></head>
<body><script>
(function () {
  var token = window.localStorage.getItem("token");
  if (token) {
    document.cookie = "%(cookie)s=" + encodeURIComponent(token) + "; path=%(path)s; SameSite=Strict";
    window.location.reload();
  } else {
    window.location.replace(%(login)s);
  }
})();
</script><noscript>Sign in to Airflow first: <a href="%(login_html)s">log in</a>.</noscript></body></html>
"""


def _token(request: Request) -> str:
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else ""
    return token or request.cookies.get("_token") or request.cookies.get(PAGE_TOKEN_COOKIE) or ""


async def _token_user(request: Request) -> Any:
    """Airflow 3.0: the user of the request's token (header, UI cookie or page cookie); None without."""
    try:
        return await _required_token_user(request)
    except HTTPException:
        return None


async def _required_token_user(request: Request) -> Any:
    """Airflow 3.0: as the api-server's ``get_user``: 401 without a token, 403 for a token that is not valid."""
    token = _token(request)
    if not token:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "Not authenticated")
    try:
        return await get_auth_manager().get_user_from_token(token)
    except Exception as err:  # expired, revoked or forged
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Invalid JWT token") from err


def _sign_in(request: Request, here: str, login: str) -> Response:
    """Airflow 3.0: a page that copies the UI's token into :data:`PAGE_TOKEN_COOKIE` and reloads."""
    root = request.scope.get("root_path", "").rstrip("/") or "/"
    login = _returning_to(login, here)
    page = {
        "cookie": PAGE_TOKEN_COOKIE,
        "path": root,
        "login": json.dumps(login).replace("<", "\\u003c"),
        "login_html": login.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;"),
    }
    return HTMLResponse(_SIGN_IN % page, headers={"Cache-Control": "no-store"})


def _returning_to(login: str, here: str) -> str:
    """The login URL with ``next=here``: the simple auth manager's leaves it out, and its login page reads it.

    A URL that already carries a query is the auth manager's own choice and stays as it is, as does the
    all-admins route (``/token/login``), which signs in without a page and ignores ``next``.
    """
    if "?" in login or login.endswith("/token/login"):
        return login
    return f"{login}?{urlencode({'next': here})}"


def _redirect(request: Request, here: str, login: str) -> Response:
    return RedirectResponse(_returning_to(login, here), status_code=status.HTTP_307_TEMPORARY_REDIRECT)


if AIRFLOW_V_3_1_PLUS:
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    async def _optional_api_user(
        request: Request,
        bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    ) -> Any:
        try:
            return await get_user(request, None, bearer)
        except HTTPException:
            return None

    #: A FastAPI dependency: the logged-in user; 401/403 without a valid login.
    required_user: Any = get_user
    #: A FastAPI dependency: the logged-in user, or None.
    optional_user: Any = _optional_api_user
    #: ``login_response(request, here, login_url)``: what a visitor without a login gets.
    login_response: Callable[[Request, str, str], Response] = _redirect
else:
    required_user = _required_token_user
    optional_user = _token_user
    login_response = _sign_in
