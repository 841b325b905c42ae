"""Notices: telling people of a question where they are (e-mail, a chat webhook).

A question's notices are durable work. Whoever decides one (the loop that finds a question
just asked, a deadline's reminder or escalation) writes a :class:`~dashboard.models.Notice`
row per e-mail recipient and one for the webhook, in the same transaction as its claim;
a web process's loop (:func:`notices_send_due`, beside the cron poll) claims each due row
with a conditional ``UPDATE``, sends it, and records what came of it: sent, or retried with
back-off until its attempts run out (failed). Nothing here runs inside a run's execution:
a slow mail server or a dead webhook never delays or fails a run.

E-mails are digests: one person's due notices go as one e-mail, and a person gets at most
one e-mail every ``NOTICE_DIGEST_SECONDS`` (a burst of sixty questions is one or two
e-mails, not sixty); a question alone is named in the subject.

Recipients: the members of the question's groups (or, with none, everyone who may answer
it) who may answer questions, may read its run (:mod:`dashboard.policy`), are active and
have an e-mail address. E-mail is sent only when ``EMAIL_HOST`` (or ``EMAIL_BACKEND``) is
set in the environment, the webhook only when ``PLANWATCH_WEBHOOK_URL`` is.

An e-mail carries a signed link (:mod:`django.core.signing`) to the question, for its
recipient, usable once; following it still needs a login as that recipient.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from dashboard import policy, selectors
from dashboard.models import Interrupt, Notice, Run, RunEvent
from dashboard.runs import budgets
from dashboard.runs.conf import planwatch_setting

logger = logging.getLogger("planwatch.notices")

LINK_SALT = "planwatch.notice-link"
SIGNATURE_HEADER = "X-Planwatch-Signature"
TIMESTAMP_HEADER = "X-Planwatch-Timestamp"
CLAIM_SECONDS = 60.0
"""How long a claimed notice is one process's to send; past it another may (its sender
died mid-send)."""
BACKOFF_MAX_SECONDS = 300.0


def email_enabled() -> bool:
    """Whether e-mail is configured (``PLANWATCH["NOTIFY_EMAIL"]``, from the environment)."""
    return bool(planwatch_setting("NOTIFY_EMAIL"))


def webhook_url() -> str:
    """The webhook's URL ("": no webhook)."""
    return str(planwatch_setting("WEBHOOK_URL") or "")


def recipients(interrupt: Interrupt, groups: list[str] | None = None) -> list[User]:
    """Who is told of ``interrupt``: those who may answer it
    (:func:`dashboard.selectors.interrupt_answerer_users`, of ``groups`` if given) and
    have an e-mail address."""
    return [u for u in selectors.interrupt_answerer_users(interrupt=interrupt, groups=groups)
            if u.email]


def notices_queue(*, interrupt: Interrupt, kind: str, groups: list[str] | None = None,
                  now: datetime | None = None) -> list[Notice]:
    """Queue the notices of ``kind`` for ``interrupt`` (an e-mail per recipient, one
    webhook call), each at most once: a second call adds none."""
    now = now or timezone.now()
    rows = []
    if email_enabled():
        rows += [Notice(interrupt=interrupt, kind=kind, channel=Notice.Channel.EMAIL,
                        recipient=user, address=user.email, next_attempt_at=now)
                 for user in recipients(interrupt, groups)]
    if url := webhook_url():
        rows.append(Notice(interrupt=interrupt, kind=kind, channel=Notice.Channel.WEBHOOK,
                           address=url[:500], next_attempt_at=now))
    return Notice.objects.bulk_create(rows, ignore_conflicts=True)


def notices_queue_asked(*, now: datetime | None = None, limit: int = 100) -> int:
    """Queue the notices of questions asked since the last look, each question claimed
    once (``notified_at``) whatever the number of processes looking; how many."""
    now = now or timezone.now()
    told = 0
    for asked in (Interrupt.objects.filter(status=Interrupt.Status.PENDING,
                                           notified_at__isnull=True)
                  .select_related("run").order_by("created_at")[:limit]):
        with transaction.atomic():
            if Interrupt.objects.filter(pk=asked.pk, notified_at__isnull=True).update(
                    notified_at=now):
                notices_queue(interrupt=asked, kind=Notice.Kind.ASKED, now=now)
                told += 1
    return told


BUDGET_NOTICES = {RunEvent.Kind.BUDGET_WARNING: Notice.Kind.BUDGET_WARNING,
                  RunEvent.Kind.BUDGET_REACHED: Notice.Kind.BUDGET_REACHED}
BUDGET_WINDOW = timedelta(hours=1)
"""How far back the loop looks for budget events to tell of (a process down longer
leaves older ones untold)."""


def notices_queue_budgets(*, now: datetime | None = None, limit: int = 100) -> int:
    """Queue the notices of budget events (a warning, a budget reached) not told yet: an
    e-mail to the run's creator, a webhook call; each once (``notice_once_budget``)
    whatever the number of processes looking. How many events were told."""
    if not (email_enabled() or webhook_url()):
        return 0
    now = now or timezone.now()
    told = Notice.objects.filter(run=OuterRef("run"), event_seq=OuterRef("seq"))
    events = (RunEvent.objects.filter(kind__in=list(BUDGET_NOTICES), at__gte=now - BUDGET_WINDOW)
              .exclude(Exists(told)).select_related("run__created_by").order_by("at")[:limit])
    count = 0
    for event in events:
        run = event.run
        rows = []
        kind = BUDGET_NOTICES[RunEvent.Kind(event.kind)]
        creator = run.created_by
        if email_enabled() and creator is not None and creator.email and creator.is_active:
            rows.append(Notice(run=run, event_seq=event.seq, kind=kind,
                               channel=Notice.Channel.EMAIL, recipient=creator,
                               address=creator.email, next_attempt_at=now))
        if url := webhook_url():
            rows.append(Notice(run=run, event_seq=event.seq, kind=kind,
                               channel=Notice.Channel.WEBHOOK, address=url[:500],
                               next_attempt_at=now))
        if rows:
            Notice.objects.bulk_create(rows, ignore_conflicts=True)
            count += 1
    return count


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed ones: the setting's
    ``NOTICE_RETRY_SECONDS``, doubled each time, at most five minutes."""
    base = float(planwatch_setting("NOTICE_RETRY_SECONDS"))
    return float(min(BACKOFF_MAX_SECONDS, base * 2.0 ** max(0, attempts - 1)))


def _claim(notice_id: int, now: datetime) -> bool:
    """Take one due notice to send (a conditional UPDATE: one process wins)."""
    return bool(Notice.objects.filter(
        Q(status=Notice.Status.PENDING, next_attempt_at__lte=now)
        | Q(status=Notice.Status.SENDING, claimed_until__lt=now),
        pk=notice_id,
    ).update(status=Notice.Status.SENDING, claimed_until=now + timedelta(seconds=CLAIM_SECONDS)))


def notices_send_due(*, now: datetime | None = None, limit: int = 50) -> list[Notice]:
    """Send the notices that are due (new ones, and retries whose time came), each claimed
    first; record each outcome. The notices this call handled."""
    now = now or timezone.now()
    due = (Notice.objects.filter(Q(status=Notice.Status.PENDING, next_attempt_at__lte=now)
                                 | Q(status=Notice.Status.SENDING, claimed_until__lt=now))
           .order_by("next_attempt_at", "id").values_list("pk", flat=True)[:limit])
    handled = []
    mails: dict[str, list[Notice]] = {}
    for pk in list(due):
        if not _claim(pk, now):
            continue  # another process took it
        notice = Notice.objects.select_related("interrupt__run", "run", "recipient").get(pk=pk)
        if notice.channel == Notice.Channel.EMAIL and notice.interrupt_id is not None:
            mails.setdefault(notice.address.lower(), []).append(notice)
        else:  # a webhook's, or a budget's e-mail (one a run's event: none to gather)
            handled.append(notice_send(notice=notice, now=now))
    for address, batch in mails.items():
        handled.extend(notices_send_digest(address=address, notices=batch, now=now))
    return handled


def digest_seconds() -> float:
    """The least time between two e-mails to one person (``NOTICE_DIGEST_SECONDS``)."""
    return float(planwatch_setting("NOTICE_DIGEST_SECONDS"))


def notices_send_digest(*, address: str, notices: list[Notice], now: datetime
                        ) -> list[Notice]:
    """Send one person's claimed e-mail notices as one e-mail, at most one per
    :func:`digest_seconds`: within it of their last e-mail, they are put back to go with
    the next one when it is over (not counted as a try). The notices sent or failed."""
    last = (Notice.objects.filter(channel=Notice.Channel.EMAIL, address__iexact=address,
                                  status=Notice.Status.SENT)
            .exclude(sent_at__isnull=True).order_by("-sent_at")
            .values_list("sent_at", flat=True).first())
    if last is not None and now < last + timedelta(seconds=digest_seconds()):
        Notice.objects.filter(pk__in=[n.pk for n in notices]).update(
            status=Notice.Status.PENDING, claimed_until=None,
            next_attempt_at=last + timedelta(seconds=digest_seconds()))
        return []
    return _record(notices, now=now, send=lambda: _send_email(notices))


def notice_send(*, notice: Notice, now: datetime) -> Notice:
    """Send one notice claimed at ``now`` and record it: sent, or its error and the next
    try, counted from ``now`` (failed once its attempts run out)."""
    send = (lambda: _send_email([notice])) if notice.channel == Notice.Channel.EMAIL \
        else (lambda: _send_webhook(notice))
    return _record([notice], now=now, send=send)[0]


def _record(notices: list[Notice], *, now: datetime, send: Any) -> list[Notice]:
    """Call ``send`` (what carries ``notices``) and record its outcome on each of them."""
    try:
        send()
    except Exception as exc:  # any fault of the far end is recorded, never raised
        error = f"{type(exc).__name__}: {exc}"[:2000]
        failed = True
    else:
        failed, error = False, ""
    for notice in notices:
        attempts = notice.attempts + 1
        if failed:
            gave_up = attempts >= int(planwatch_setting("NOTICE_ATTEMPTS"))
            logger.warning("notice %s (%s by %s to %s) failed, attempt %s%s: %s", notice.pk,
                           notice.kind, notice.channel, notice.address, attempts,
                           " (giving up)" if gave_up else "", error)
            fields: dict[str, Any] = {
                "status": Notice.Status.FAILED if gave_up else Notice.Status.PENDING,
                "attempts": attempts, "last_error": error, "claimed_until": None,
                "next_attempt_at": now + timedelta(seconds=backoff(attempts))}
        else:
            # the pass's moment at the least: the next digest is counted from it
            fields = {"status": Notice.Status.SENT, "attempts": attempts,
                      "sent_at": max(now, timezone.now()), "claimed_until": None}
        Notice.objects.filter(pk=notice.pk).update(**fields)
        for name, value in fields.items():
            setattr(notice, name, value)
    return notices


# -- what a notice says ---------------------------------------------------------------------

HEADLINES = {Notice.Kind.ASKED: "A question waits for you",
             Notice.Kind.REMINDER: "Reminder: a question waits for you",
             Notice.Kind.ESCALATION: "Escalated: a question passed its deadline",
             Notice.Kind.BUDGET_WARNING: "A run nears its budget",
             Notice.Kind.BUDGET_REACHED: "A run reached its budget"}


def question_text(payload: Any) -> str:
    """What a question asks, in one line."""
    if isinstance(payload, dict):
        for name in ("prompt", "label", "question", "field"):
            if payload.get(name):
                return str(payload[name])[:300]
    return (payload if isinstance(payload, str) else json.dumps(payload, default=str))[:300]


def absolute(path: str) -> str:
    """``path`` on the site's address (``PLANWATCH_BASE_URL``)."""
    return str(planwatch_setting("BASE_URL")).rstrip("/") + path


def question_path(interrupt: Interrupt) -> str:
    """Where the question is answered: its form on its run's page."""
    return reverse("dashboard:run_detail", args=[interrupt.run_id]) + f"#interrupt-{interrupt.pk}"


def _budget_event(notice: Notice) -> tuple[Run, dict[str, Any]]:
    """A budget notice's run and its event's payload."""
    run = notice.run
    assert run is not None
    payload = run.events.filter(seq=notice.event_seq or 0).values_list(
        "payload", flat=True).first()
    return run, payload if isinstance(payload, dict) else {}


def _budget_summary(notice: Notice) -> str:
    run, payload = _budget_event(notice)
    figure = payload.get("budget") or {}
    key = str(figure.get("kind"))
    what = budgets.extend_text(figure) if figure else "a budget"
    if notice.kind == Notice.Kind.BUDGET_WARNING and key in budgets.LABELS:
        what = (f"{budgets.LABELS[key][0].lower()} at {budgets.shown(key, figure['used'])} "
                f"of {budgets.shown(key, figure['limit'])}")
    elif payload.get("on_limit") == "pause":
        what += "; it waits for you to extend it or stop it"
    elif payload.get("on_limit") == "stop":
        what += "; it was stopped"
    return f"{HEADLINES[Notice.Kind(notice.kind)]}: {run.graph} run {str(run.id)[:8]}, {what}"


def _summary(notice: Notice) -> str:
    if notice.interrupt_id is None:
        return _budget_summary(notice)
    interrupt = notice.interrupt
    assert interrupt is not None
    text = (f"{HEADLINES[Notice.Kind(notice.kind)]}: {interrupt.run.graph} asks "
            f"“{question_text(interrupt.payload)}” (run {str(interrupt.run_id)[:8]})")
    if interrupt.group_names:
        text += f", for {', '.join(interrupt.group_names)}"
    if interrupt.deadline_at:
        text += f"; deadline {interrupt.deadline_at:%Y-%m-%d %H:%M:%S} UTC"
    return text


def digest_subject(notices: list[Notice]) -> str:
    """An e-mail's subject: a question alone is named in it; several are counted."""
    if len(notices) == 1:
        (notice,) = notices
        assert notice.interrupt is not None  # a digest gathers questions' notices only
        asks = question_text(notice.interrupt.payload)
        asks = asks if len(asks) <= 90 else asks[:89] + "…"
        return f"[Planwatch] {HEADLINES[Notice.Kind(notice.kind)]}: {asks}"
    return f"[Planwatch] {len(notices)} questions wait for you"


def _send_email(notices: list[Notice]) -> None:
    """One e-mail to the one recipient of ``notices``: each question with its own link (a
    budget's notice, alone: its run's page)."""
    if notices[0].interrupt_id is None:  # a budget's: the run's page
        (notice,) = notices
        body = (f"{_summary(notice)}.\n\nOpen the run (you will be asked to log in):\n"
                f"{absolute(reverse('dashboard:run_detail', args=[notice.run_id]))}\n")
        EmailMessage(subject=f"[Planwatch] {HEADLINES[Notice.Kind(notice.kind)]}", body=body,
                     from_email=settings.DEFAULT_FROM_EMAIL, to=[notice.address]).send()
        return
    parts = []
    for notice in notices:
        link = absolute(reverse("dashboard:notice_link", args=[notice_token(notice)]))
        parts.append(f"{_summary(notice)}.\nOpen it (you will be asked to log in; the link "
                     f"works once, for you):\n{link}\n")
    body = "\n".join(parts) + (f"\nOr find them in the inbox: "
                               f"{absolute(reverse('dashboard:inbox'))}\n")
    EmailMessage(subject=digest_subject(notices), body=body,
                 from_email=settings.DEFAULT_FROM_EMAIL, to=[notices[0].address]).send()


def slack_escape(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` as entities, so a
    question's ``<!channel>`` or ``<url|label>`` pings nobody and links nowhere (Slack's
    "Escaping text" rules)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webhook_body(notice: Notice) -> bytes:
    """The webhook's JSON: Slack-compatible ``text``, and the question's facts (a budget
    notice: the run's and its budget's)."""
    if notice.interrupt_id is None:
        run, payload = _budget_event(notice)
        url = absolute(reverse("dashboard:run_detail", args=[run.id]))
        return json.dumps({
            "text": f"{slack_escape(_summary(notice))} — {url}", "event": f"run.{notice.kind}",
            "run": {"id": str(run.id), "graph": run.graph, "url": url,
                    "budget": payload.get("budget"), "on_limit": payload.get("on_limit")},
        }, ensure_ascii=False).encode()
    interrupt = notice.interrupt
    assert interrupt is not None
    url = absolute(question_path(interrupt))
    return json.dumps({
        "text": f"{slack_escape(_summary(notice))} — {url}", "event": f"question.{notice.kind}",
        "question": {"id": interrupt.pk, "run": str(interrupt.run_id),
                     "graph": interrupt.run.graph, "asks": question_text(interrupt.payload),
                     "groups": interrupt.group_names, "url": url,
                     "asked_at": interrupt.created_at.isoformat(),
                     "deadline_at": interrupt.deadline_at.isoformat()
                     if interrupt.deadline_at else None},
    }, ensure_ascii=False).encode()


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``<timestamp>.<body>`` with the shared secret
    (a receiver recomputes it, compares in constant time and refuses old timestamps)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def _send_webhook(notice: Notice) -> None:
    body = webhook_body(notice)
    headers = {"Content-Type": "application/json", "User-Agent": "Planwatch"}
    if secret := str(planwatch_setting("WEBHOOK_SECRET") or ""):
        stamp = str(int(time.time()))
        headers[TIMESTAMP_HEADER] = stamp
        headers[SIGNATURE_HEADER] = webhook_signature(secret, stamp, body)
    request = urllib.request.Request(notice.address, data=body, headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10.0) as response:
            response.read(1024)
    except urllib.error.HTTPError as exc:  # a 4xx or 5xx: its status and a little text
        raise RuntimeError(f"the webhook answered {exc.code}: "
                           f"{exc.read(200).decode(errors='replace')!r}") from None


# -- the e-mail's one-time link -------------------------------------------------------------


def notice_token(notice: Notice) -> str:
    """The signed token of an e-mail notice's link (its notice and recipient)."""
    return signing.dumps({"n": notice.pk, "u": notice.recipient_id}, salt=LINK_SALT,
                         compress=True)


class LinkRefused(Exception):
    """A notice link that does not open its question: the status and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def notice_link_open(*, token: str, user: Any) -> Interrupt:
    """The question an e-mail's link leads to, for ``user`` (logged in), once: the link
    is checked (signature, age), must be the user's own, and is spent by this call."""
    days = float(planwatch_setting("NOTICE_LINK_DAYS"))
    try:
        data = signing.loads(token[:500], salt=LINK_SALT, max_age=timedelta(days=days))
    except signing.SignatureExpired:
        raise LinkRefused(410, f"this link is older than {days:g} days; open the question "
                               "from the inbox") from None
    except signing.BadSignature:
        raise LinkRefused(404, "this link is not one Planwatch sent (cut short, or "
                               "changed); open the question from the inbox") from None
    notice = (Notice.objects.select_related("interrupt__run")
              .filter(pk=data["n"], channel=Notice.Channel.EMAIL).first()
              if isinstance(data, dict) and isinstance(data.get("n"), int) else None)
    if notice is None:
        raise LinkRefused(404, "this link's question is gone; open the inbox")
    if notice.recipient_id != user.pk:
        raise LinkRefused(403, "this link was sent to another operator; log in as them, or "
                               "open the question from the inbox")
    interrupt = notice.interrupt
    if interrupt is None or not policy.may_read_run(user, interrupt.run):
        raise LinkRefused(404, "this link's question is gone; open the inbox")
    if not Notice.objects.filter(pk=notice.pk, link_used_at__isnull=True).update(
            link_used_at=timezone.now()):
        raise LinkRefused(410, "this link was used already (it works once); open the "
                               "question from the inbox")
    return interrupt
