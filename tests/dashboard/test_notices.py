"""Told where they are: a question's group is e-mailed (a real SMTP server on loopback
receives it, its one-time link opens the question after login) and a webhook receiver on
loopback gets a signed payload, retried with back-off after failures; sent once, recorded."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.utils import timezone

from dashboard import notices
from dashboard.models import InterruptGroup, Notice
from tests.dashboard.inbox_support import REGION, waiting

pytestmark = [pytest.mark.django_db]  # claims are conditional UPDATEs: the same on both


@pytest.fixture
def finance(django_user_model):
    group = Group.objects.create(name="finance")
    fay = django_user_model.objects.create_user(username="fay", password="pw-fay-1234",
                                                email="fay@example.test")
    fay.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "view_all_threads"]))
    fay.groups.add(group)
    return fay


def for_finance(owner):
    (asked,) = waiting(1, REGION, asked_ago=timedelta(seconds=1), user=owner)
    InterruptGroup.objects.create(interrupt=asked, name="finance")
    return asked


def test_the_group_is_emailed_once_and_the_link_opens_the_question_after_login(
        smtp, client, operator, finance):
    operator.email = "olga@example.test"  # may answer, but not in finance: not told
    operator.save()
    asked = for_finance(operator)
    assert notices.notices_queue_asked() == 1
    assert notices.notices_queue_asked() == 0  # claimed once
    sent = notices.notices_send_due()
    assert [(n.status, n.attempts, n.address) for n in sent] == [
        (Notice.Status.SENT, 1, "fay@example.test")]
    assert smtp.envelopes == [["fay@example.test"]]
    message = smtp.messages[0]
    # alone, the question is in the subject
    assert message["Subject"] == \
        "[Planwatch] A question waits for you: Which region is the market in?"
    body = message.get_content()
    assert "acquisition asks “Which region is the market in?”" in body and "for finance" in body
    link = re.search(r"http://planwatch\.test(/inbox/notice/\S+/)", body).group(1)

    response = client.get(link)  # not logged in: the login page first
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(operator)  # someone else's link
    assert client.get(link).status_code == 403
    client.force_login(finance)
    response = client.get(link)
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{asked.run_id}/#interrupt-{asked.pk}"
    assert f'id="interrupt-{asked.pk}"' in client.get(response["Location"]).content.decode()
    again = client.get(link)  # one time only
    assert again.status_code == 410 and "used already" in again.content.decode()
    assert notices.notices_send_due() == []  # nothing sent twice


def test_a_question_for_no_group_tells_everyone_who_may_answer_and_read_its_run(
        smtp, django_user_model, operator, finance, viewer):
    viewer.email = "vic@example.test"  # may read, may not answer
    viewer.save()
    outsider = django_user_model.objects.create_user(username="otto", email="o@example.test")
    outsider.user_permissions.set(Permission.objects.filter(codename="answer_interrupt"))
    operator.email = "olga@example.test"
    operator.save()
    waiting(1, REGION, user=operator)  # olga's run: otto may not read it
    notices.notices_queue_asked()
    assert sorted(Notice.objects.values_list("address", flat=True)) == [
        "fay@example.test", "olga@example.test"]


def test_nothing_is_queued_unless_configured(settings, operator, finance):
    settings.PLANWATCH = {**settings.PLANWATCH, "NOTIFY_EMAIL": False, "WEBHOOK_URL": ""}
    for_finance(operator)
    assert notices.notices_queue_asked() == 1  # claimed, and nothing to send
    assert Notice.objects.count() == 0


def test_the_webhook_is_signed_and_retried_with_back_off_after_two_failures(
        receiver, operator, finance):
    asked = for_finance(operator)
    notices.notices_queue_asked()
    start = timezone.now()
    (first,) = notices.notices_send_due(now=start)
    assert (first.status, first.attempts) == (Notice.Status.PENDING, 1)
    assert "500" in first.last_error
    assert notices.notices_send_due(now=start) == []  # not yet: it waits its back-off
    second_try = first.next_attempt_at
    assert 0.9 <= (second_try - start).total_seconds() <= 1.5  # 1 s after the first
    (second,) = notices.notices_send_due(now=second_try)
    assert (second.status, second.attempts) == (Notice.Status.PENDING, 2)
    assert 1.9 <= (second.next_attempt_at - second_try).total_seconds() <= 2.5  # doubled
    (third,) = notices.notices_send_due(now=second.next_attempt_at)
    assert (third.status, third.attempts) == (Notice.Status.SENT, 3)
    assert third.sent_at is not None
    assert [c["valid"] for c in receiver.calls] == [True, True, True]
    payload = receiver.calls[-1]["body"]
    assert payload["event"] == "question.asked"
    assert payload["text"].startswith("A question waits for you: acquisition asks")
    assert payload["text"].endswith(f"http://planwatch.test/runs/{asked.run_id}/"
                                    f"#interrupt-{asked.pk}")
    assert payload["question"]["groups"] == ["finance"]
    assert notices.notices_send_due(now=third.next_attempt_at + timedelta(hours=1)) == []


def test_a_notice_whose_attempts_run_out_is_failed_with_its_error(receiver, operator, finance):
    receiver.fail = 100
    for_finance(operator)
    notices.notices_queue_asked()
    now = timezone.now()
    for _ in range(4):
        (notice,) = notices.notices_send_due(now=now)
        now = notice.next_attempt_at
    assert (notice.status, notice.attempts) == (Notice.Status.FAILED, 4)
    assert "the webhook answered 500" in notice.last_error
    assert notices.notices_send_due(now=now + timedelta(hours=1)) == []


def test_a_bad_link_is_refused_naming_the_way_out(client, finance):
    client.force_login(finance)
    response = client.get("/inbox/notice/not-a-token/")
    assert response.status_code == 404
    assert "open the question from the inbox" in response.content.decode()


def test_the_webhooks_slack_text_escapes_what_slack_reads_as_markup(operator, finance):
    """A question's ``<!channel>`` pings nobody and its ``<url|label>`` links nowhere:
    ``&``, ``<`` and ``>`` reach Slack as entities; the facts keep the question as asked."""
    asks = "Region? <!channel> see <https://evil.test|the docs> & reply"
    (asked,) = waiting(1, {**REGION, "prompt": asks}, user=operator)
    InterruptGroup.objects.create(interrupt=asked, name="<!here>")
    notice = Notice.objects.create(interrupt=asked, kind=Notice.Kind.ASKED,
                                   channel=Notice.Channel.WEBHOOK, address="http://x.test",
                                   next_attempt_at=timezone.now())
    payload = json.loads(notices.webhook_body(notice))
    text = payload["text"]
    assert "<!channel>" not in text and "<!here>" not in text and "<https://" not in text
    assert ("Region? &lt;!channel&gt; see &lt;https://evil.test|the docs&gt; &amp; reply"
            in text)
    assert "for &lt;!here&gt;" in text
    assert payload["question"]["asks"] == asks


def test_sixty_questions_are_one_digest_per_person_per_interval(
        smtp, django_user_model, operator):
    group = Group.objects.create(name="finance")
    people = []
    for name in ("fay", "finn", "fred", "flo"):
        user = django_user_model.objects.create_user(username=name,
                                                     email=f"{name}@example.test")
        user.user_permissions.set(Permission.objects.filter(
            codename__in=["answer_interrupt", "view_all_threads"]))
        user.groups.add(group)
        people.append(user)
    asked = waiting(60, REGION, asked_ago=timedelta(seconds=1), user=operator)
    InterruptGroup.objects.bulk_create([InterruptGroup(interrupt=i, name="finance")
                                        for i in asked])
    assert notices.notices_queue_asked() == 60
    assert Notice.objects.count() == 240

    def send_all(at):
        while notices.notices_send_due(now=at):
            pass
        while notices.notices_send_due(now=at):  # those put back are not due again yet
            pass

    now = timezone.now()
    send_all(now)
    assert sorted(e[0] for e in smtp.envelopes) == sorted(u.email for u in people)
    for message in smtp.messages:  # a digest: each question with its own link
        n = int(re.match(r"\[Planwatch\] (\d+) questions wait for you$",
                         message["Subject"]).group(1))
        assert message.get_content().count("/inbox/notice/") == n > 1
    first = len(smtp.messages)
    # the rest wait for the next interval, one e-mail each again
    send_all(now + timedelta(seconds=notices.digest_seconds() - 1))
    assert len(smtp.messages) == first
    later = now + timedelta(seconds=notices.digest_seconds() + 1)
    send_all(later)
    assert sorted(e[0] for e in smtp.envelopes[first:]) == sorted(u.email for u in people)
    sent = Notice.objects.filter(status=Notice.Status.SENT).count()
    told = sum(m.get_content().count("/inbox/notice/") for m in smtp.messages)
    assert told == sent and not Notice.objects.filter(status=Notice.Status.FAILED).exists()
