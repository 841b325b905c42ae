"""API tokens: knox's, checked with one query a request."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox import auth
from knox.models import AuthToken
from knox.signals import token_expired


class TokenAuthentication(auth.TokenAuthentication):  # type: ignore[misc]  # knox is untyped
    """knox's token check, without its purge of the user's *other* expired tokens on every
    request: that was a second query each time (every token of the user, read to delete
    those that authenticate nobody anyway). The token presented is still refused, and
    deleted, once it has expired; the others go when the user is given a new one
    (:func:`create_token`)."""

    def _cleanup_token(self, auth_token: Any) -> bool:
        """True (the token deleted) if the presented token has expired."""
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


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
