"""The console's run history (``/runs``) and the *Now* page's count of runs that ended
badly, over the real app and database (both dialects)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from pageant.console import history
from pageant.runs.create import start_now
from tests.console.test_console import sign_in
from tests.factories import publish_event, set_run


def _rows(html: str) -> list[tuple[int, str]]:
    return [
        (int(run), status)
        for run, status in re.findall(r'<tr data-run="(\d+)" data-status="([a-z]+)">', html)
    ]


async def _runs(host: Any, count: int, *, title: str = "Champion muster") -> list[int]:
    event = await publish_event(host.db, host.clock.now(), title=title)
    return [
        (await start_now(host, event.id, scope=f"s{i}", actor="admin:ada"))[0] for i in range(count)
    ]


async def test_the_history_lists_every_event_s_runs_newest_first_with_who_made_them(
    client, tokens, host
):
    first = await _runs(host, 2, title="Wisp night")
    second = await _runs(host, 1, title="Storm over Yew")
    now = host.clock.now()
    await set_run(
        host.db, first[0], status="failed", started_at=now, ended_at=now + timedelta(seconds=95)
    )
    await sign_in(client, tokens["moderator"])
    answer = await client.get("/runs")
    html = await answer.text()
    assert answer.status == 200, html
    assert [run for run, _ in _rows(html)] == [second[0], first[1], first[0]]
    assert "Wisp night" in html and "Storm over Yew" in html
    failed = html.split(f'data-run="{first[0]}"')[1].split("</tr>")[0]
    assert "1 min 35 s" in failed and "admin:ada" in failed
    assert 'title="2027-03-01 12:00:00 UTC"' in failed  # UTC on hover
    assert '<a href="/runs" aria-current="page">Runs</a>' in html


async def test_the_history_filters_by_status_event_and_time(client, tokens, host):
    runs = await _runs(host, 3)
    other = await _runs(host, 1, title="Other")
    now = host.clock.now()
    await set_run(host.db, runs[1], status="failed", ended_at=now)
    await sign_in(client, tokens["admin"])
    html = await (await client.get("/runs?status=failed")).text()
    assert _rows(html) == [(runs[1], "failed")]
    assert '<option value="failed" selected>' in html

    html = await (await client.get("/runs")).text()
    assert len(_rows(html)) == 4
    event_id = int(re.search(rf'data-run="{other[0]}".*?href="/events/(\d+)"', html, re.S)[1])
    html = await (await client.get(f"/runs?definition={event_id}")).text()
    assert [r for r, _ in _rows(html)] == [other[0]]
    later = (now + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    earlier = (now - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    assert len(_rows(await (await client.get(f"/runs?from={earlier}")).text())) == 4
    assert _rows(await (await client.get(f"/runs?from={later}")).text()) == []


async def test_a_bad_filter_is_named_and_lists_nothing(client, tokens, host):
    await _runs(host, 1)
    await sign_in(client, tokens["admin"])
    answer = await client.get("/runs?status=lost&from=soon")
    html = await answer.text()
    assert answer.status == 400
    assert "Status: &#39;lost&#39; is not one of" in html
    assert "Scheduled from: &#39;soon&#39; is not an instant" in html
    assert _rows(html) == []


async def test_the_history_pages_by_fifty_older_runs_behind_a_link(client, tokens, host):
    runs = await _runs(host, history.PAGE + 1)
    await sign_in(client, tokens["admin"])
    html = await (await client.get("/runs")).text()
    shown = [r for r, _ in _rows(html)]
    assert shown == sorted(runs, reverse=True)[: history.PAGE]
    older = re.search(r'href="(/runs\?before=\d+)" rel="next"', html)[1]
    html = await (await client.get(older)).text()
    assert [r for r, _ in _rows(html)] == [min(runs)]
    assert 'rel="next"' not in html and "Newest runs" in html


async def test_now_counts_the_runs_that_failed_in_the_last_day_and_not_before(client, tokens, host):
    runs = await _runs(host, 3)
    now = host.clock.now()
    await set_run(host.db, runs[0], status="failed", ended_at=now - timedelta(hours=23))
    await set_run(host.db, runs[1], status="failed", ended_at=now - timedelta(hours=25))
    await set_run(
        host.db,
        runs[2],
        status="cancelled",
        cleanup_status="incomplete",
        ended_at=now - timedelta(hours=1),
    )
    await sign_in(client, tokens["editor"])
    html = await (await client.get("/now")).text()
    line = re.search(r'<p class="summary warn" id="now-trouble">(.*?)</p>', html, re.S)[1]
    assert "<strong>1</strong> run failed" in line
    assert "<strong>1</strong> ended with cleanup incomplete" in line
    assert 'href="/runs?status=failed&amp;from=2027-02-28T12:00"' in line


async def test_an_empty_now_says_what_to_do_first(client, tokens, host):
    await sign_in(client, tokens["admin"])
    html = await (await client.get("/now")).text()
    assert "The first thing to do is make an event" in html
    assert 'href="/events/new"' in html
    await publish_event(host.db, host.clock.now())
    html = await (await client.get("/now")).text()
    assert "The first thing to do" not in html and "Start a run now" in html


async def test_every_page_names_the_favicon_and_the_old_address_finds_it(client, tokens):
    await sign_in(client, tokens["admin"])
    html = await (await client.get("/now")).text()
    link = re.search(r'<link rel="icon" href="(/static/favicon\.svg[^"]*)" type="image/svg', html)
    icon = await client.get(link[1])
    assert icon.status == 200 and (await icon.text()).startswith("<svg")
    moved = await client.get("/favicon.ico", allow_redirects=False)
    assert moved.status == 301 and moved.headers["Location"] == "/static/favicon.svg"


async def test_the_plugins_page_lists_every_kind_of_declaration(client, tokens, host):
    await sign_in(client, tokens["moderator"])
    html = await (await client.get("/plugins")).text()
    catalog = host.registry.catalog()
    for kind, table, key in (
        ("actions", "actions", "id"),
        ("triggers", "triggers", "id"),
        ("budgets", "budgets", "dimension"),
        ("leases", "leases", "id"),
        ("option_sources", "option-sources", "id"),
        ("legs", "legs", "id"),
        ("readings", "readings", "id"),
    ):
        assert catalog[kind], kind  # the installed plugins declare one of each
        section = html.split(f'id="{table}"')[1].split("</table>")[0]
        for item in catalog[kind]:
            assert f"<code>{item[key]}</code>" in section, (kind, item[key])


async def test_a_bad_page_or_an_unknown_event_is_refused_in_words(client, tokens, host):
    await _runs(host, 1)
    await sign_in(client, tokens["admin"])
    answer = await client.get("/runs?before=soon")
    assert answer.status == 400
    assert "before: expected a run id; got &#39;soon&#39;" in await answer.text()
    answer = await client.get("/runs?definition=999")
    assert answer.status == 404 and "no such event: 999" in await answer.text()
    answer = await client.get("/runs?from=2027-03-02T00:00&to=2027-03-01T00:00")
    assert answer.status == 400
    assert "Scheduled before: must be later than Scheduled from" in await answer.text()
