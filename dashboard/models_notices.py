"""Notices: a row per e-mail or webhook call telling people of a question, sent once."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Notice(models.Model):
    """One notification of a question (asked, reminded, escalated), or of a run's budget
    (warned, reached), by one channel to one address: queued in the transaction that
    decides it (or, a budget's, by the loop that finds its event), then claimed, sent and
    recorded by a web process's loop (:mod:`dashboard.notices`); retried with back-off
    until it is sent or its attempts run out."""

    class Kind(models.TextChoices):
        ASKED = "asked", "Asked"  # the question was asked
        REMINDER = "reminder", "Reminder"  # its deadline draws near
        ESCALATION = "escalation", "Escalation"  # its deadline came; given to more groups
        BUDGET_WARNING = "budget_warning", "Budget warning"  # a run's budget passed its share
        BUDGET_REACHED = "budget_reached", "Budget reached"  # a run paused or stopped at one

    class Channel(models.TextChoices):
        EMAIL = "email", "E-mail"  # Django's mail, one recipient, a one-time link
        WEBHOOK = "webhook", "Webhook"  # JSON to PLANWATCH_WEBHOOK_URL, HMAC-signed

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # to be sent, or retried at next_attempt_at
        SENDING = "sending", "Sending"  # a process claimed it until claimed_until
        SENT = "sent", "Sent"  # delivered (the mail server or the receiver took it)
        FAILED = "failed", "Failed"  # its attempts ran out; last_error says why

    interrupt = models.ForeignKey("dashboard.Interrupt", on_delete=models.CASCADE,
                                  related_name="notices", null=True, blank=True)
    run = models.ForeignKey("dashboard.Run", on_delete=models.CASCADE, null=True, blank=True,
                            related_name="notices",
                            help_text="A budget's notice: the run (a question's: none).")
    event_seq = models.PositiveIntegerField(
        null=True, blank=True, help_text="A budget's notice: the seq of its run's event.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    channel = models.CharField(max_length=16, choices=Channel.choices)
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="notices")
    address = models.CharField(max_length=500, help_text="The e-mail address or the URL.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    link_used_at = models.DateTimeField(
        null=True, blank=True, help_text="When its one-time link was followed (e-mail).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # sent once: one notice of a kind per question, channel and address
            models.UniqueConstraint(fields=["interrupt", "kind", "channel", "address"],
                                    name="notice_once"),
            # a budget's event told once per channel and address
            models.UniqueConstraint(fields=["run", "event_seq", "channel", "address"],
                                    condition=Q(interrupt__isnull=True),
                                    name="notice_once_budget"),
            # of a question, or of a run's budget event
            models.CheckConstraint(condition=Q(interrupt__isnull=False) | Q(
                run__isnull=False, event_seq__isnull=False), name="notice_of_something"),
            models.CheckConstraint(condition=~Q(status="sent") | Q(sent_at__isnull=False),
                                   name="notice_sent_has_time"),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notice_due")]

    def __str__(self) -> str:
        return f"{self.kind} by {self.channel} to {self.address} ({self.status})"
