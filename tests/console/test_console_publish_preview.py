"""The console's *Preview changes* step before a publish: the editor shows what publishing
would add and remove (and writes nothing), and the publish form asks for the reason a public
event's occurrences need — over the real app and database (both dialects), time injected."""

from __future__ import annotations

from html import unescape

from tests.console.test_console import csrf_of, sign_in
from tests.schedules.test_publish_preview import (
    FRIDAY_20,
    MONDAY,
    SATURDAY_19,
    edit_schedule,
    rows_of_every_table,
    weekly_event,
)
from tests.scheduling import runs_of, spec_with


async def test_preview_changes_shows_the_diff_and_the_publish_asks_for_the_reason(
    client, tokens, db, clock
):
    clock.set(MONDAY)
    event_id = await weekly_event(client, tokens, FRIDAY_20, visibility="public")
    fri_29, fri_5 = await runs_of(db, event_id)
    await edit_schedule(client, tokens, event_id, spec=spec_with(SATURDAY_19))
    await sign_in(client, tokens["admin"])
    page = await (await client.get(f"/events/{event_id}")).text()
    assert ">Preview changes</button>" in page
    untouched = await rows_of_every_table(db)

    answer = await client.post(
        f"/events/{event_id}/publish-preview", data={"csrf_token": csrf_of(page)}
    )
    html = unescape(await answer.text())

    assert answer.status == 200, html
    assert "If you publish now (v2)" in html
    assert "2 added, 2 removed, 0 moved, 0 blacked out" in html
    assert "give a reason to publish" in html
    for local in ("2027-10-29T20:00:00+02:00", "2027-11-05T20:00:00+01:00"):
        assert f"{local} <strong>(public)</strong>" in html
    for local in ("2027-10-30T19:00:00+02:00", "2027-11-06T19:00:00+01:00"):
        assert local in html
    assert 'name="reason" maxlength="500" required' in html
    assert await rows_of_every_table(db) == untouched

    csrf = csrf_of(html)
    refused = await client.post(f"/events/{event_id}/publish", data={"csrf_token": csrf})
    text = unescape(await refused.text())
    assert refused.status == 409, text
    assert f"run {fri_29.id} (2027-10-29T20:00:00+02:00): the publish would remove it" in text
    assert await rows_of_every_table(db) == untouched

    published = await client.post(
        f"/events/{event_id}/publish",
        data={"csrf_token": csrf, "reason": "Saturdays from now on"},
        allow_redirects=False,
    )
    assert published.status == 303, await published.text()
    statuses = {r.id: r.status for r in await runs_of(db, event_id)}
    assert (statuses[fri_29.id], statuses[fri_5.id]) == ("cancelled", "cancelled")


async def test_an_editor_may_not_preview_a_publish(client, tokens, db, clock):
    clock.set(MONDAY)
    event_id = await weekly_event(client, tokens, FRIDAY_20)
    await sign_in(client, tokens["editor"])
    page = await (await client.get(f"/events/{event_id}")).text()
    assert ">Preview changes</button>" not in page
    answer = await client.post(
        f"/events/{event_id}/publish-preview", data={"csrf_token": csrf_of(page)}
    )
    assert answer.status == 403
