"""API tokens: knox's, checked with one query a request, and kept a few seconds.

A LangGraph client sends its token with every request (a run's start is two requests,
its stream a third); checked afresh each time that was three statements a request: the
token with its user, then the user's permissions and their groups' (Django's
``ModelBackend``, asked by ``policy.is_team``). Here a check that passed is kept in the
process for ``PLANWATCH_AUTH_CACHE_SECONDS`` (:class:`KeptChecks`): the token's user and
all their permissions, read in two statements the first time, none while it is kept.

**When a change takes effect.** A change made through Django (a token deleted, as the
admin and knox's logout do; a user saved, as an operator's deactivation is; a permission
granted or withdrawn, to the user or a group of theirs) forgets every kept check of this
process at once (the model signals below), and the check after it reads the database
again. A change this process does not see (one made in another web process, or by a
bulk ``UPDATE`` that sends no signal) takes effect within ``PLANWATCH_AUTH_CACHE_SECONDS``
(5 by default; 0 keeps nothing and checks every request afresh, as before). A token's
expiry is checked on every request, kept or not.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.signals import setting_changed
from django.db.models import Value
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox import auth
from knox.crypto import hash_token
from knox.models import AuthToken, get_token_model
from knox.signals import token_expired

from dashboard.runs.conf import planwatch_setting


class TokenAuthentication(auth.TokenAuthentication):  # type: ignore[misc]  # knox is untyped
    """knox's token check, without its purge of the user's *other* expired tokens on every
    request: that was a second query each time (every token of the user, read to delete
    those that authenticate nobody anyway). The token presented is still refused, and
    deleted, once it has expired; the others go when the user is given a new one
    (:func:`create_token`). A check that passed is kept a few seconds with the user's
    permissions (:data:`KEPT`; the module's docstring says when a change takes effect)."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, Any]:
        """The token's user and the token (``AuthenticationFailed`` if it authenticates
        nobody), the user's permissions loaded with them."""
        seconds = float(planwatch_setting("AUTH_CACHE_SECONDS"))
        if seconds <= 0:
            user, auth_token = super().authenticate_credentials(token)
            permissions_load(user)
            return user, auth_token
        try:
            digest = hash_token(token.decode())
        except (UnicodeDecodeError, TypeError, ValueError):
            digest = ""
        kept = KEPT.get(digest, seconds) if digest else None
        if kept is not None:
            return kept.restored()
        generation = KEPT.generation
        user, auth_token = super().authenticate_credentials(token)
        permissions_load(user)
        if digest:
            KEPT.keep(digest, Check.of(user, auth_token), generation)
        return user, auth_token

    def _cleanup_token(self, auth_token: Any) -> bool:
        """True (the token deleted) if the presented token has expired."""
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


def permissions_load(user: Any) -> None:
    """Read the permissions of an active ``user`` and of their groups in one statement, into
    the caches Django's ``ModelBackend`` fills on its first ``has_perm`` (two statements
    there), so that no ``has_perm`` of the request asks the database again. A superuser
    holds every permission, as ``ModelBackend`` reads them."""
    if not user.is_active or user.is_anonymous:
        return
    if user.is_superuser:
        every = {f"{app}.{name}" for app, name in Permission.objects.values_list(
            "content_type__app_label", "codename").order_by()}
        own, via_groups = every, set(every)
    else:
        model = get_user_model()
        mine = model._meta.get_field("user_permissions").related_query_name()
        in_group = model._meta.get_field("groups").related_query_name()
        fields = ("content_type__app_label", "codename", "source")
        rows = (Permission.objects.filter(**{mine: user}).annotate(source=Value(0))
                .values_list(*fields).order_by()
                .union(Permission.objects.filter(**{f"group__{in_group}": user})
                       .annotate(source=Value(1)).values_list(*fields).order_by(), all=True)
                .order_by())
        own, via_groups = set(), set()
        for app, name, source in rows:
            (via_groups if source else own).add(f"{app}.{name}")
    user._user_perm_cache = own
    user._group_perm_cache = via_groups
    user._perm_cache = own | via_groups


@dataclass(frozen=True)
class Check:
    """A token check that passed: its user (with their permissions) and the token, as
    read, handed out as copies (a request may change its own)."""

    user: Any
    token: Any
    at: float

    @classmethod
    def of(cls, user: Any, token: Any) -> Check:
        """The check of ``user`` and ``token``, as they stand now."""
        kept_user = copy.copy(user)
        for name in ("_user_perm_cache", "_group_perm_cache", "_perm_cache"):
            if hasattr(user, name):
                setattr(kept_user, name, frozenset(getattr(user, name)))
        kept_token = copy.copy(token)
        kept_token.user = kept_user
        return cls(kept_user, kept_token, time.monotonic())

    def restored(self) -> tuple[Any, Any]:
        """A copy of the user (their permissions loaded) and of the token, for a request."""
        user = copy.copy(self.user)
        for name in ("_user_perm_cache", "_group_perm_cache", "_perm_cache"):
            if hasattr(self.user, name):
                setattr(user, name, set(getattr(self.user, name)))
        token = copy.copy(self.token)
        token.user = user
        return user, token


class KeptChecks:
    """The token checks that passed in this process, by the token's digest, each kept for
    ``seconds`` while no change to tokens, users, groups or permissions was seen."""

    MAX = 1024
    """Checks kept at most (the oldest go first)."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()
        self.generation = 0
        """Counts :meth:`forget_all`: a check read before one is not kept."""

    def get(self, digest: str, seconds: float) -> Check | None:
        """The kept check of the token with ``digest``, if young enough and not expired."""
        check = self._checks.get(digest)
        if check is None:
            return None
        expiry = check.token.expiry
        if time.monotonic() - check.at >= seconds or (
                expiry is not None and expiry < timezone.now()):
            self._checks.pop(digest, None)
            return None  # checked afresh (an expired token is deleted and refused there)
        return check

    def keep(self, digest: str, check: Check, generation: int) -> None:
        """Keep ``check``, unless a change was seen since ``generation`` (it was read)."""
        with self._lock:
            if generation != self.generation:
                return
            self._checks[digest] = check
            while len(self._checks) > self.MAX:
                self._checks.pop(next(iter(self._checks)))

    def forget_all(self, **_: Any) -> None:
        """Forget every kept check (a token, user, group or permission changed)."""
        with self._lock:
            self.generation += 1
            self._checks.clear()


KEPT = KeptChecks()
"""This process's kept token checks."""


def _connect_forgetting() -> None:
    user_model = get_user_model()
    models: list[Any] = [get_token_model(), user_model, Group, Permission]
    for model in models:
        post_save.connect(KEPT.forget_all, sender=model, weak=False,
                          dispatch_uid=f"planwatch-kept-checks-save-{model._meta.label}")
        post_delete.connect(KEPT.forget_all, sender=model, weak=False,
                            dispatch_uid=f"planwatch-kept-checks-delete-{model._meta.label}")
    throughs: list[Any] = [user_model._meta.get_field("groups").remote_field.through,
                           user_model._meta.get_field("user_permissions").remote_field.through,
                           Group.permissions.through]
    for through in throughs:
        m2m_changed.connect(KEPT.forget_all, sender=through, weak=False,
                            dispatch_uid=f"planwatch-kept-checks-m2m-{through._meta.label}")
    setting_changed.connect(KEPT.forget_all, weak=False,
                            dispatch_uid="planwatch-kept-checks-settings")


_connect_forgetting()


def create_token(user: Any, *, hours: float | None = None) -> str:
    """A new token for ``user`` (its key, shown once), the user's expired ones deleted."""
    AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()
    if hours is None:  # knox's TOKEN_TTL (expiry=None would be a token that never expires)
        _, key = AuthToken.objects.create(user=user)
    else:
        _, key = AuthToken.objects.create(user=user, expiry=timedelta(hours=hours))
    return str(key)


class TokenScheme(KnoxTokenScheme):  # type: ignore[misc]  # drf-spectacular's, untyped
    """The OpenAPI schema names these tokens as it names knox's (``knoxApiToken``)."""

    target_class = "dashboard.api.auth.TokenAuthentication"
