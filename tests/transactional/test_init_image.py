"""REPL_PUB_INIT_IMAGE writes a publication's tables as an image in parts; REPL_INIT_COPY loads it on a
subscriber instead of copying from the publisher, and the sync goes on from the image's level."""

from __future__ import annotations

import pytest

from replication_admin.core.audit import Actor
from replication_admin.core.connections import list_tables
from replication_admin.models import ReplSubscriber
from replication_admin.statements import execute
from tests.fidelity.typed_rows import LOW, ROWS, create_typed, differences, expected, insert_typed, stored
from tests.transactional.test_trx_replication import run, value

pytestmark = [pytest.mark.live_db]


@pytest.fixture
def published(make_server, jobs_sync, settings, tmp_path):
    settings.IMAGE_DIR = tmp_path / "images"
    pub = make_server("postgresql", "ipub")
    create_typed(pub)
    insert_typed(pub, ROWS)
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'typed', 2, 0, null)")
    return pub


@pytest.mark.parametrize("dialect", ["mysql", "sqlite"])
def test_a_subscriber_is_initialised_from_an_image_in_parts_and_syncs_on_from_its_level(
    published, make_server, settings, dialect
):
    pub = published
    written = run(pub, "REPL_PUB_INIT_IMAGE ('tbl', 'typed.img', 4096)")[0].details
    assert written["rows"] == 3 and len(written["files"]) >= 2 and written["files"][0] == "typed.img"
    assert all((settings.IMAGE_DIR / f).stat().st_size <= 4096 or f == written["files"][-1] for f in written["files"])
    insert_typed(pub, [(12, *LOW[1:])])  # after the image: the sync brings it

    sub = make_server(dialect, "isub")
    run(
        sub, "REPL_SERVER ('ipub', 'ipub'); REPL_SUBSCRIBE ('ipub', 'tbl'); REPL_INIT_COPY ('ipub', 'tbl', 'typed.img')"
    )
    assert differences(expected(ROWS), stored(sub)) == []
    subscription = ReplSubscriber.objects.get(subscriber="isub")
    assert (subscription.init_state, subscription.level) == ("done", written["level"])
    run(sub, "REPL_SYNC ('ipub', 'tbl')")
    assert differences(expected([*ROWS, (12, *LOW[1:])]), stored(sub)) == []
    assert value(sub, "SELECT COUNT(*) FROM typed") == 4


def test_a_cut_image_or_another_publications_image_is_refused_and_changes_nothing(published, make_server, settings):
    pub = published
    run(pub, "REPL_PUBLISH ('other', 'other.log')")
    run(pub, "REPL_PUB_INIT_IMAGE ('other', 'other.img')")
    written = run(pub, "REPL_PUB_INIT_IMAGE ('tbl', 'typed.img', 2048)")[0].details
    sub = make_server("mysql", "isub")
    run(sub, "REPL_SERVER ('ipub', 'ipub'); REPL_SUBSCRIBE ('ipub', 'tbl')")

    def refused(text: str) -> str:
        outcome = execute(Actor.command(), text, context=sub)[-1]
        assert not outcome.ok
        return outcome.message

    assert "image 'other.img' is of ipub/other, not ipub/tbl" in refused("REPL_INIT_COPY ('ipub', 'tbl', 'other.img')")
    assert "use letters, digits" in refused("REPL_INIT_COPY ('ipub', 'tbl', '../typed.img')")
    (settings.IMAGE_DIR / written["files"][1]).unlink()
    assert "incomplete" in refused("REPL_INIT_COPY ('ipub', 'tbl', 'typed.img')")
    assert "no image 'nothing.img'" in refused("REPL_INIT_COPY ('ipub', 'tbl', 'nothing.img')")
    assert ReplSubscriber.objects.get(subscriber="isub").level == 0
    assert "typed" not in [t.lower() for t in list_tables(sub)]  # the image was checked before anything was made
