"""Sockets follow the session: the groups a signed-in socket joins, and the signals that
close them. Signing out, deactivation, a new password or changed rights close that user's
open websockets (their pages reconnect only with a valid session)."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import m2m_changed, post_save, pre_save
from django.dispatch import receiver

from dashboard.runs import doorbells

User = get_user_model()


def session_groups(scope: dict[str, Any]) -> list[str]:
    """The groups a signed-in user's socket joins: their account's and their session's."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return []
    groups = [f"user.{user.pk}"]
    session = scope.get("session")
    key = getattr(session, "session_key", None)
    if key:
        groups.append(f"session.{key}")
    return groups


async def arevoke(*, user_id: Any = None, session_key: str = "") -> None:
    """Close the sockets of a user (every session) or of one session."""
    if user_id is not None:
        await doorbells.asend(f"user.{user_id}", {"type": "session.revoke"})
    if session_key:
        await doorbells.asend(f"session.{session_key}", {"type": "session.revoke"})


def _revoke(**where: Any) -> None:
    try:
        async_to_sync(arevoke)(**where)
    except RuntimeError:  # called on an event loop's own thread: ring from that loop
        asyncio.get_running_loop().create_task(arevoke(**where))


@receiver(user_logged_out)
def revoke_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Signing out closes the sockets of that session."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        _revoke(session_key=key)


@receiver(pre_save, sender=User)
def remember_credentials(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Note the stored password and active flag, to see after saving whether they changed."""
    if instance.pk is None:
        return
    before = sender.objects.filter(pk=instance.pk).values("password", "is_active").first()
    instance._pw_before = before


@receiver(post_save, sender=User)
def revoke_on_credentials(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """Deactivation or a new password closes every socket of the user."""
    before = getattr(instance, "_pw_before", None)
    if created or before is None:
        return
    if not instance.is_active or before["password"] != instance.password:
        _revoke(user_id=instance.pk)


@receiver(m2m_changed, sender=User.user_permissions.through)
@receiver(m2m_changed, sender=User.groups.through)
def revoke_on_rights(sender: Any, instance: Any, action: str, reverse: bool,
                     pk_set: Any, **kwargs: Any) -> None:
    """Losing a permission or a group closes the user's sockets (they reconnect re-checked)."""
    if action not in ("post_remove", "post_clear"):
        return
    if not reverse:
        _revoke(user_id=instance.pk)
    else:  # a permission or group lost members
        for user_id in pk_set or ():
            _revoke(user_id=user_id)
