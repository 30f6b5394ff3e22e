"""The console in a real browser (Debian's headless Chromium driven through chromium-driver),
against a node with Kafka and native traffic: what a person sees is a Kafka record's decoded
value and headers in the message browser, a Kafka and a native group with the right lag, a
dead letter that reappears in its group after Resend. Screenshots of each page are kept in
``test-artifacts/console/`` (git-ignored), replaced on every run."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from gateway_native.client import Admin, ConsumeStatus, Message, PushConsumer
from gateway_native.client import Producer as NativeProducer
from tests.gateway_native.helpers import FAST, consume_until, wait_until

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert shutil.which(CHROMIUM) and shutil.which(DRIVER), "make test-deps installs chromium and chromium-driver"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)  # no driver download
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots():
    folder = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="module")
def cnode(tmp_path_factory):
    from tests.support.node import RunningNode

    node = RunningNode(tmp_path_factory.mktemp("console") / "data",
                       settings={"messageDelayLevel": " ".join(["1s"] * 18), "console_sample_interval_ms": 500})
    node.start()
    yield node
    node.stop()


def page(browser, node, path: str, shots, name: str):
    browser.get(node.admin_url + path)
    browser.save_screenshot(str(shots / f"{name}.png"))
    return browser


def text_of(browser, css: str) -> str:
    from selenium.webdriver.common.by import By

    return " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, css))


def test_message_browser_shows_a_kafka_record_decoded(cnode, browser, shots):
    from selenium.webdriver.common.by import By

    topic = f"orders_{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap, "compression.type": "lz4"})
    p.produce(topic, key=b"order-42", value=b'{"amount": 42}', headers=[("region", b"eu"), ("rmq.tags", b"paid")])
    assert p.flush(30) == 0
    page(browser, cnode, "/messages", shots, "messages-empty")
    form = browser.find_element(By.ID, "search")
    form.find_element(By.NAME, "topic").send_keys(topic)
    form.find_element(By.NAME, "key").send_keys("order-42")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    row = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#messages tr.msg.kafka"), timeout=20,
                     what="the record in the results")[0]
    browser.save_screenshot(str(shots / "messages-kafka-record.png"))
    assert row.find_element(By.CSS_SELECTOR, "td.value").text == '{"amount": 42}'  # decompressed, decoded
    assert row.find_element(By.CSS_SELECTOR, "td.key").text == "order-42"
    headers = row.find_element(By.CSS_SELECTOR, "td.headers").text
    assert "region: eu" in headers and "rmq.tags: paid" in headers
    assert row.find_element(By.CSS_SELECTOR, "td.tags").text == "paid"


def test_groups_of_both_protocols_with_their_lag(cnode, browser, shots):
    from selenium.webdriver.common.by import By

    ktopic, ntopic = f"k_{uuid.uuid4().hex[:6]}", f"N_{uuid.uuid4().hex[:6]}"
    kgroup, ngroup = f"kg_{uuid.uuid4().hex[:6]}", f"ng_{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap})
    for i in range(9):
        p.produce(ktopic, value=b"%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cnode.kafka_bootstrap, "group.id": kgroup, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(ktopic, 0, 4)], asynchronous=False)  # 5 behind
    c.close()
    with Admin(cnode.namesrv_addr) as admin:
        admin.create_topic(ntopic, 1)
    with NativeProducer(f"p_{ngroup}", cnode.namesrv_addr, poll_name_server_interval=1000) as np:
        for i in range(3):
            np.send(Message(ntopic, b"first %d" % i))
        consume_until(cnode.namesrv_addr, ngroup, ntopic, 3, what="3 native messages")  # commits 3
        for i in range(2):
            np.send(Message(ntopic, b"later %d" % i))  # 2 behind

    def lag_cell(group: str) -> str:
        page(browser, cnode, "/groups", shots, "groups")
        cells = browser.find_elements(By.CSS_SELECTOR, f'tr[data-group="{group}"] td.lag')
        return cells[0].text if cells else ""

    wait_until(lambda: lag_cell(kgroup) == "5", timeout=20, what="Kafka group lag 5")
    wait_until(lambda: lag_cell(ngroup) == "2", timeout=20, what="native group lag 2")
    page(browser, cnode, f"/groups/{kgroup}", shots, "group-kafka")
    assert text_of(browser, f'#lag tr[data-topic="{ktopic}"] td.lag') == "5"
    page(browser, cnode, f"/groups/{ngroup}", shots, "group-native")
    assert text_of(browser, f'#lag tr[data-topic="{ntopic}"] td.lag') == "2"


def test_live_kafka_member_is_listed_with_its_partition(cnode, browser, shots):
    topic, group = f"live_{uuid.uuid4().hex[:6]}", f"lg_{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap})
    p.produce(topic, value=b"x")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cnode.kafka_bootstrap, "group.id": group, "client.id": "console-reader",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        wait_until(lambda: c.poll(0.2) is not None and c.assignment(), timeout=30, what="an assignment")

        def members() -> str:
            page(browser, cnode, f"/groups/{group}", shots, "group-live-member")
            return text_of(browser, "#members tbody")
        shown = wait_until(lambda: "console-reader" in members() and f"{topic}-0" in members() and members(),
                           timeout=20, what="the member with its partition")
        assert "kafka" in shown
    finally:
        c.close()


def test_dead_letter_resend_makes_the_message_reappear(cnode, browser, shots):
    from selenium.webdriver.common.by import By

    topic, group = f"D_{uuid.uuid4().hex[:6]}", f"dg_{uuid.uuid4().hex[:6]}"
    with Admin(cnode.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
        admin.update_subscription_group(group, retryMaxTimes=0)
    with NativeProducer(f"p_{group}", cnode.namesrv_addr, poll_name_server_interval=1000) as np:
        sent = np.send(Message(topic, b"poison pill"))
    c = PushConsumer(group, cnode.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(lambda msgs, ctx: ConsumeStatus.RECONSUME_LATER)
    c.start()
    try:
        def dead_rows():
            page(browser, cnode, f"/dlq/{group}", shots, "dlq")
            return browser.find_elements(By.CSS_SELECTOR, f'#dead-letters tr[data-msg-id="{sent.msg_id}"]')
        rows = wait_until(dead_rows, timeout=40, what="the dead letter in the console")
    finally:
        c.shutdown()
    assert "poison pill" in rows[0].text
    rows[0].find_element(By.CSS_SELECTOR, "button.resend").click()
    notice = wait_until(lambda: text_of(browser, "p.notice"), timeout=20, what="the resend notice")
    browser.save_screenshot(str(shots / "dlq-resent.png"))
    assert sent.msg_id in notice and "%RETRY%" + group in notice
    col = consume_until(cnode.namesrv_addr, group, topic, 1, what="the resent message")
    assert col.messages[0].body == b"poison pill" and col.messages[0].topic == topic


def test_overview_charts_draw_the_last_hour(cnode, browser, shots):
    from selenium.webdriver.common.by import By

    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap})

    def produced_line():  # keep producing until two samples saw traffic and the line is drawn
        p.produce("chart-topic", value=b"x")
        p.flush(30)
        return page(browser, cnode, "/", shots, "overview").find_elements(
            By.CSS_SELECTOR, 'svg.chart polyline[data-series="produced"]')
    wait_until(produced_line, timeout=30, interval=0.2, what="a throughput line")
    assert "Broker" in browser.page_source and "broker-a" in text_of(browser, "#broker")


def test_offset_reset_from_the_group_page(cnode, browser, shots):
    """A Kafka group without members is moved to the end from its page: after confirming,
    the page shows the reset and its lag is 0; the committed offset is what a Kafka client reads."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    topic, group = f"r_{uuid.uuid4().hex[:6]}", f"rg_{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap})
    for i in range(6):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cnode.kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    page(browser, cnode, f"/groups/{group}", shots, "group-before-reset")
    assert text_of(browser, f'#lag tr[data-topic="{topic}"] td.lag') == "5"
    form = browser.find_element(By.ID, "reset")
    form.find_element(By.CSS_SELECTOR, 'input[value="latest"]').click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 5).until(lambda b: _accept_confirm(b))  # htmx asks before it posts
    wait_until(lambda: text_of(browser, "p.notice"), timeout=20, what="the reset notice")
    browser.save_screenshot(str(shots / "group-after-reset.png"))
    assert text_of(browser, f'#lag tr[data-topic="{topic}"] td.lag') == "0"
    assert c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == 6
    c.close()


def _accept_confirm(browser) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        browser.switch_to.alert.accept()
        return True
    except NoAlertPresentException:
        return False


def test_message_browser_finds_a_message_by_its_client_id(cnode, browser, shots):
    """The id a native producer prints (UNIQ_KEY, ``7F00...``), the offset id, and the id a
    native consumer sees for a Kafka record each find their message, in the console and in
    ``/api/messages/{id}``."""
    import json
    import urllib.request

    from selenium.webdriver.common.by import By

    topic = f"ids_{uuid.uuid4().hex[:6]}"
    with Admin(cnode.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    with NativeProducer("ids-producer", cnode.namesrv_addr) as producer:
        sent = producer.send(Message(topic, b"native body", tags="TagN", keys=["nk-1"]))
    assert sent.msg_id != sent.offset_msg_id and sent.msg_id.startswith("7F")
    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap})
    p.produce(topic, key=b"kk-1", value=b"kafka body")
    assert p.flush(30) == 0
    with Admin(cnode.namesrv_addr) as admin:
        (kafka_msg,) = wait_until(lambda: admin.query_message_by_key(topic, "kk-1"), what="the Kafka record indexed")
    kafka_id = kafka_msg.properties["UNIQ_KEY"]

    def api(msg_id: str) -> dict:
        with urllib.request.urlopen(f"{cnode.admin_url}/api/messages/{msg_id}", timeout=10) as r:
            return json.loads(r.read())

    assert api(sent.msg_id)["uniq_key"] == sent.msg_id
    assert api(sent.offset_msg_id)["uniq_key"] == sent.msg_id
    assert api(kafka_id)["uniq_key"] == kafka_id

    for msg_id, css, body in ((sent.msg_id, "#messages tr.msg.native", "native body"),
                              (kafka_id, "#messages tr.msg.kafka", "kafka body")):
        page(browser, cnode, "/messages", shots, "messages-by-id-form")
        form = browser.find_element(By.ID, "search")
        form.find_element(By.NAME, "msg_id").send_keys(msg_id)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        rows = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, css), timeout=20, what=f"{msg_id} found")
        browser.save_screenshot(str(shots / f"messages-by-client-id-{css.rsplit('.', 1)[-1]}.png"))
        assert len(rows) == 1 and body in rows[0].text


def test_first_screen_health_topic_rates_and_lag_and_read_only_acls(cnode, browser, shots):
    """The overview says the node is healthy; the topics page shows a topic's produce rate and
    its consumers' lag; the ACL page lists a SCRAM user and an ACL made over Kafka, with no form
    to change them."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                       ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)
    from selenium.webdriver.common.by import By

    page(browser, cnode, "/", shots, "overview-health")
    assert browser.find_element(By.ID, "health").text.startswith("Healthy")

    topic, group = f"rate_{uuid.uuid4().hex[:6]}", f"rg_{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": cnode.kafka_bootstrap, "linger.ms": 0})
    p.produce(topic, value=b"first")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cnode.kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()

    def row_after_producing():
        for i in range(50):  # keep producing while the page samples (every 500 ms here)
            p.produce(topic, value=b"%d" % i)
        p.flush(30)
        page(browser, cnode, "/topics", shots, "topics-rates")
        rows = [r for r in browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr")
                if r.find_elements(By.LINK_TEXT, topic)]
        if rows and float(rows[0].find_element(By.CSS_SELECTOR, "td.rate-in").text) > 0:
            return rows[0]
        return None

    row = wait_until(row_after_producing, timeout=30, interval=0.3, what="a produce rate on the topics page")
    assert int(row.find_element(By.CSS_SELECTOR, "td.lag").text) >= 51  # the group committed offset 0

    admin = AdminClient({"bootstrap.servers": cnode.kafka_bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")])["alice"].result(30)
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(30)
    page(browser, cnode, "/acls", shots, "acls")
    assert "alice" in text_of(browser, "#users td")
    acl_row = text_of(browser, "#acls tbody tr")
    assert "User:alice" in acl_row and f"topic:{topic}" in acl_row and "write" in acl_row and "allow" in acl_row
    assert browser.find_elements(By.CSS_SELECTOR, "main form") == []  # read-only: nothing to submit
