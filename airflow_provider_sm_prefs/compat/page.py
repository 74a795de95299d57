"""The capacity page's login on each supported Airflow minor (loaded by the api-server only).

Airflow 3.1 and later: the api-server's own ``get_user`` (the UI's ``_token`` cookie or a ``Bearer``
header) and a redirect to the login page. Airflow 3.0 reads only a ``Bearer`` header, and its UI moves
the token from the cookie into the browser's local storage, out of reach of a page load: there the page
also accepts the token from :data:`PAGE_TOKEN_COOKIE`. A small sign-in page (no data, no inline script)
sends the token from local storage to ``POST <page>/session``, which checks it and sets the cookie
itself: ``HttpOnly`` (no script reads it back), ``SameSite=Strict``, ``Secure`` when the request came
over https, scoped to the page's path and never outliving the token. Airflow 3.0's logout (its UI drops
the token from local storage and opens ``/api/v2/auth/logout``) expires the cookie too: the plugin adds
a root middleware (:func:`logout_middleware`) that adds the expiry to that route's answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

import jwt
from airflow.api_fastapi.app import get_auth_manager
from airflow.configuration import conf
from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from airflow_provider_sm_prefs.compat import AIRFLOW_V_3_1_PLUS

__all__ = [
    "PAGE_TOKEN_COOKIE",
    "SIGN_IN_SCRIPT",
    "is_https",
    "login_response",
    "logout_middleware",
    "optional_user",
    "required_user",
    "router",
]

#: The capacity page's own copy of the UI's token (Airflow 3.0), scoped to the page's path.
PAGE_TOKEN_COOKIE = "sm_prefs_token"
#: The route of Airflow's logout, under the api-server's root path.
LOGOUT_PATH = "/api/v2/auth/logout"

_SIGN_IN = """<!doctype html><html><head><meta charset="utf-8"><title>SageMaker capacity</title></head>
<body><script src="%(script)s" data-session="%(session)s" data-login="%(login)s"></script>
<noscript>Sign in to Airflow first: <a href="%(login)s">log in</a>.</noscript></body></html>
"""

#: The sign-in page's script (Airflow 3.0), a file of its own so that the page's Content-Security-Policy
#: allows no inline script. The session route answers 403 for an expired token: then to the login page.
SIGN_IN_SCRIPT = """(function () {
  "use strict";
  var script = document.currentScript;
  var login = script.getAttribute("data-login");
  var token = window.localStorage.getItem("token");
  if (!token) {
    window.location.replace(login);
    return;
  }
  fetch(script.getAttribute("data-session"), {
    method: "POST",
    credentials: "same-origin",
    cache: "no-store",
    headers: { Authorization: "Bearer " + token },
  }).then(
    function (answer) {
      if (answer.ok) window.location.reload();
      else window.location.replace(login);
    },
    function () { window.location.replace(login); }
  );
})();
"""


def _html_attribute(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _bearer(request: Request) -> str:
    """The token of the request's ``Authorization: Bearer`` header ("" without one)."""
    header = request.headers.get("Authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


def _token(request: Request) -> str:
    return _bearer(request) or request.cookies.get("_token") or request.cookies.get(PAGE_TOKEN_COOKIE) or ""


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
    """Airflow 3.0: a page whose script sends the UI's token to the session route and reloads."""
    root = _page_root(request)
    page = {
        "script": _html_attribute(f"{root}/sign-in.js"),
        "session": _html_attribute(f"{root}/session"),
        "login": _html_attribute(_returning_to(login, here)),
    }
    return HTMLResponse(_SIGN_IN % page, headers={"Cache-Control": "no-store"})


def _page_root(request: Request) -> str:
    """The page's path (its app's root path), where its cookie lives."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def is_https(scheme: str) -> bool:
    """Whether a request with URL scheme ``scheme`` came over https, as Airflow's own login cookie decides.

    ``X-Forwarded-Proto`` counts only when the deployment trusts its proxy: ``airflow api-server
    --proxy-headers`` makes uvicorn rewrite the scheme from that header for the addresses in
    ``FORWARDED_ALLOW_IPS``, and for no one else. An api-server that serves TLS itself
    (``[api] ssl_cert``) is https whatever the scheme reads.
    """
    return scheme == "https" or bool(conf.get("api", "ssl_cert", fallback=""))


def _seconds_left(token: str) -> int | None:
    """Seconds until ``token`` (already verified) expires; None when it carries no expiry."""
    expiry = jwt.decode(token, options={"verify_signature": False}).get("exp")
    return max(0, int(expiry - time.time())) if isinstance(expiry, int | float) else None


async def _start_session(request: Request) -> Response:
    """Airflow 3.0: keep the ``Bearer`` token of the request in :data:`PAGE_TOKEN_COOKIE` (204).

    Only a header counts, never a cookie: another site can make a browser send cookies, not headers.
    """
    token = _bearer(request)
    if not token:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "Not authenticated: send the UI's token as Bearer")
    try:
        await get_auth_manager().get_user_from_token(token)
    except Exception as err:  # expired, revoked or forged
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Invalid JWT token") from err
    response = Response(status_code=status.HTTP_204_NO_CONTENT, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        PAGE_TOKEN_COOKIE,
        token,
        max_age=_seconds_left(token),
        path=_page_root(request) or "/",
        secure=is_https(request.url.scheme),
        httponly=True,
        samesite="strict",
    )
    return response


def _sign_in_script() -> Response:
    return Response(SIGN_IN_SCRIPT, media_type="text/javascript", headers={"Cache-Control": "no-cache"})


class _ExpirePageCookieOnLogout:
    """Airflow 3.0: Airflow's logout answer also expires :data:`PAGE_TOKEN_COOKIE`.

    A root middleware of the api-server: it sees Airflow's own ``/api/v2/auth/logout``, the route 3.0's UI
    opens after it drops its token, and adds the expiry of the page's cookie (under the page's path).
    """

    def __init__(self, app: ASGIApp, page_prefix: str) -> None:
        self.app = app
        self.page_prefix = page_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).endswith(LOGOUT_PATH):
            await self.app(scope, receive, send)
            return
        expiry = Response()
        expiry.delete_cookie(
            PAGE_TOKEN_COOKIE,
            path=str(scope.get("root_path", "")).rstrip("/") + self.page_prefix,
            secure=is_https(str(scope.get("scheme", "http"))),
            httponly=True,
            samesite="strict",
        )
        cookie = expiry.headers["set-cookie"]

        async def send_expiring(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_expiring)


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
    #: The page's own login routes: none, Airflow's login cookie is read as it is.
    router = APIRouter()

    def logout_middleware(app: ASGIApp, page_prefix: str) -> ASGIApp:
        """The api-server's ``app`` as it is: Airflow's logout ends the only login the page reads."""
        return app
else:
    required_user = _required_token_user
    optional_user = _token_user
    login_response = _sign_in
    router = APIRouter()
    router.add_api_route("/sign-in.js", _sign_in_script, methods=["GET"], include_in_schema=False)
    router.add_api_route("/session", _start_session, methods=["POST"], include_in_schema=False)

    def logout_middleware(app: ASGIApp, page_prefix: str) -> ASGIApp:
        """The api-server's ``app``, whose logout also expires the page's cookie (the page is mounted at
        ``page_prefix``)."""
        return _ExpirePageCookieOnLogout(app, page_prefix)
