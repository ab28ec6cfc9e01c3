"""Kafka's listener failing the tool in the middle of a run, on real Kafka 2.8.2 (3 brokers, two
log dirs each, after the incident; the move-keep-zk-id repair, whose every step asks Kafka's
admin API). As on production clusters, the tool has a listener of its own: ADMIN,
SASL_PLAINTEXT with PLAIN and one user, advertised at a proxy per broker (tests/faults/
kafka_proxy.py) that can hold requests; the brokers replicate and the sandbox's clients
produce on PLAINTEXT, which nothing here touches.

- The password is not the one the brokers know: the first step that asks Kafka halts the
  run before anything changed, naming what was refused; with the right password, `resume`
  goes on.
- A request that never gets its answer (the proxy holds a broker's DescribeLogDirs): the run
  halts within cluster.yaml's `kafka.request_timeout_s`, saying the copy throttle is still
  set; once the listener answers again, `resume` finishes, nothing acknowledged lost.

The two rows share one incident: the second resumes the run the first halted.

Slow: real Kafka's incident (about 20 s) after a restart of every broker with its second
listener, a plan, a run halted twice and resumed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from remediate.formats.properties import dump_properties, load_properties
from remediate.ports import MOVE_THROTTLE
from remediate.sandbox import admin, cluster
from remediate.sandbox.plumbing import zkserver
from tests.acceptance.repair_lab import TOPIC, Reproduced, lost, reproduce_and_plan, unconverged
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import ApplyLab
from tests.faults.kafka_proxy import API_VERSIONS, DESCRIBE_LOG_DIRS, KafkaProxy

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("2.8.2")]

MOVE_KEEP = "move-keep-zk-id"
THROTTLE = 32 << 20
LISTENER = "ADMIN"
USER = "remediate"
PASSWORD = "admin-listener-secret"
WRONG = "not-the-password"
# How long the tool waits for one answer of Kafka's before it gives up.
REQUEST_TIMEOUT_S = 5


@dataclass
class ListenerLab:
    lab: Reproduced
    proxies: dict[int, KafkaProxy]
    password_file: Path
    halted_run: list[str] = field(default_factory=list)

    @property
    def ops(self) -> ApplyLab:
        lab = self.lab
        return ApplyLab(lab.directory, lab.state, lab.zk, playbook=lab.directory / "unused.yaml")


def give_the_tool_its_listener(
    proxies: dict[int, KafkaProxy], password_file: Path
) -> Callable[[Path, cluster.SandboxState], None]:
    """The lab's `prepare`: every broker restarted with a second listener, ADMIN
    (SASL_PLAINTEXT, PLAIN, one user), advertised at its proxy; cluster.yaml's kafka section
    reaches the brokers there, with the password in a file only the operator reads."""

    def prepare(directory: Path, state: cluster.SandboxState) -> None:
        cluster.down(directory)
        for broker in state.brokers:
            port = zkserver.free_port(broker.host)
            proxies[broker.broker_id].upstream = (broker.host, port)
            path = cluster.broker_dir(directory, broker.broker_id) / "server.properties"
            values = load_properties(path.read_bytes(), source=str(path))
            plain = f"PLAINTEXT://{broker.host}:{broker.port}"
            values |= {
                "listeners": f"{plain},{LISTENER}://{broker.host}:{port}",
                "advertised.listeners": f"{plain},{LISTENER}://{proxies[broker.broker_id].address}",
                "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{LISTENER}:SASL_PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                f"listener.name.{LISTENER.lower()}.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required"
                    f' user_{USER}="{PASSWORD}";'
                ),
            }
            path.write_bytes(dump_properties(values))
        cluster.up(directory)
        password_file.write_text(PASSWORD)
        password_file.chmod(0o600)
        config = directory / "cluster.yaml"
        settings = yaml.safe_load(config.read_text())
        settings["kafka"] = {
            "listener": LISTENER,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl": {"mechanism": "PLAIN", "username": USER, "password_file": str(password_file)},
            "request_timeout_s": REQUEST_TIMEOUT_S,
        }
        config.write_text(yaml.safe_dump(settings, sort_keys=False))

    return prepare


@pytest.fixture(scope="module")
def listener_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ListenerLab]:
    directory = tmp_path_factory.mktemp("kafka-listener") / "sandbox"
    proxies = {b: KafkaProxy(cluster.broker_host(b)) for b in (1, 2, 3)}
    password_file = directory.parent / "kafka-password"
    prepare = give_the_tool_its_listener(proxies, password_file)
    try:
        lab = reproduce_and_plan(
            directory,
            kafka="real-2.8.2",
            session_timeout_s=4,
            candidate=MOVE_KEEP,
            move_throttle=THROTTLE,
            prepare=prepare,
        )
    except BaseException:
        for proxy in proxies.values():
            proxy.close()
        raise
    yield ListenerLab(lab, proxies, password_file)
    lab.close()
    for proxy in proxies.values():
        proxy.close()


def test_the_plan_went_through_the_tools_own_listener(listener_lab: ListenerLab) -> None:
    assert listener_lab.lab.plan["kafka"]["unknown"] == {}
    # Every broker's release was read through its proxy, and its log dirs described there.
    for proxy in listener_lab.proxies.values():
        assert proxy.requests[API_VERSIONS] and proxy.requests[DESCRIBE_LOG_DIRS], proxy.requests


@pytest.mark.fault(
    "Faults during apply",
    "Kafka's listener refuses the tool's credentials (real Kafka 2.8.2, SASL PLAIN on the"
    " tool's own listener; the password is not the brokers' any more)",
    "The first step that asks Kafka's admin API halts the run before it changes anything"
    " (exit 5), naming the request and what Kafka said (authentication failed); the password"
    " appears nowhere; with the right password `resume` goes on",
)
def test_refused_credentials_halt_the_run_before_anything_changes(
    listener_lab: ListenerLab,
) -> None:
    lab, ops = listener_lab.lab, listener_lab.ops
    listener_lab.password_file.write_text(WRONG)
    run = ops.finish(ops.start_apply((lab.plan_path, lab.plan)))
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    # What the broker said, or where kafka-python read the broker's close before its answer
    # (a race inside the client), what that most often means.
    assert any(
        said in halted["error"] for said in ("Invalid username or password", "credentials")
    ), halted["error"]
    assert "Traceback" not in run.stderr
    journal = (ops.journal_dir / run.run_id / "journal.jsonl").read_text()
    for secret in (WRONG, PASSWORD):
        assert secret not in run.stdout + run.stderr + journal
    # Nothing changed: no throttle set, no replica moved.
    assert not run.events("step-finished") or all(
        "throttle" not in str(r["step"]) for r in run.events("step-finished")
    )
    for broker in lab.state.brokers:
        assert MOVE_THROTTLE not in admin.broker_settings(lab.zk, broker.broker_id)
    assert ops.status(run.run_id)["status"] == "halted"
    listener_lab.password_file.write_text(PASSWORD)
    listener_lab.halted_run.append(run.run_id)


@pytest.mark.fault(
    "Faults during apply",
    "An admin request never gets its answer (real Kafka 2.8.2: a proxy on the tool's listener"
    " holds a moving broker's DescribeLogDirs, the connection open)",
    "The run halts within cluster.yaml's kafka.request_timeout_s (exit 5), naming the request,"
    " the broker's timeout and the copy throttle still set; once the listener answers again,"
    " `resume` finishes the moves, puts the throttle back and the cluster converges with every"
    " acknowledged record readable",
)
def test_a_request_that_never_gets_its_answer_halts_the_run(listener_lab: ListenerLab) -> None:
    lab, ops = listener_lab.lab, listener_lab.ops
    (run_id,) = listener_lab.halted_run  # the run the refused credentials halted
    (step,) = [s for s in lab.plan["steps"] if s["kind"] == "move"]
    victim = sorted({m["broker"] for m in step["moves"]})[0]
    pause = ops.pause("moves-submitted")
    operator = ops.start_resume(run_id, failpoints=f"wait moved:started={pause.action}")
    pause.wait(operator)
    listener_lab.proxies[victim].hold(DESCRIBE_LOG_DIRS)
    pause.release()
    run = ops.finish(operator)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    assert listener_lab.proxies[victim].held[DESCRIBE_LOG_DIRS] >= 1
    failed = run.events("step-failed")
    assert str(failed[-1]["step"]).endswith(":wait moved")
    halted = run.events("run-halted")[-1]
    assert "DescribeLogDirs" in halted["error"], halted["error"]
    assert f"{MOVE_THROTTLE}={THROTTLE}) is still set on broker(s)" in halted["error"]
    assert "Traceback" not in run.stderr

    listener_lab.proxies[victim].release()
    resumed = ops.resume(run_id)
    assert resumed.exit_code == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.events("run-completed")
    for broker in lab.state.brokers:
        assert MOVE_THROTTLE not in admin.broker_settings(lab.zk, broker.broker_id)
    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    assert lost(lab, TOPIC, lab.acked) == []
