"""The ranks of a process group, forked beside the learner's code by a probe (`grader.worker.ranks`):
they form a real gloo group on CPU in every backend, each with torchrun's environment; a rank that
raises is named, and a rank left waiting in a collective is stopped at the probe's limit, not the
test's; ranks die with their worker; where no socket may be opened, that is said before any rank
starts."""
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from grader.session.submission import CallTimeout, Submission
from grader.worker.loading import load_module, sibling_module
from grader.worker.ranks import RankOutcome, describe_failures, run_ranks

backends = sibling_module(__file__, "test_backends")

LEARNER = """
import os, time
from datetime import timedelta

import torch
import torch.distributed as dist

TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def summed(rank):
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    world_size = dist.get_world_size()
    dist.destroy_process_group()
    return {"value": value.item(), "world_size": world_size, "env": {k: os.environ[k] for k in TORCHRUN}}


def one_fails(rank):
    if rank == 1:
        raise ValueError("rank 1 read a file that is not there")
    dist.init_process_group("gloo", timeout=timedelta(seconds=600))     # waits for rank 1, which never comes
    return "never"


def waits_forever(rank, pid_folder):
    with open(os.path.join(pid_folder, f"rank{rank}.pid"), "w") as out:
        out.write(str(os.getpid()))
    while True:
        time.sleep(0.1)
"""

PROBES = """
from grader.worker.ranks import run_ranks


def ranks_of(module, name, world_size, limit_s, *args):
    return [outcome.as_data() for outcome in run_ranks(world_size, getattr(module, name), *args, limit_s=limit_s)]
"""


@pytest.fixture(params=backends.KINDS)
def submission_with_ranks(request, tmp_path):
    """A submission in a backend of each kind, and the probe that runs ranks beside it."""
    probe_file = tmp_path / "probes.py"
    probe_file.write_text(PROBES)
    backend = backends.make_backend(request.param, backends.write_module(tmp_path, LEARNER), tmp_path,
                                    probe_files=[probe_file])
    yield (lambda within=60.0: Submission(backend, time.monotonic() + within)), load_module(probe_file)
    backend.close()


def outcomes(data: list[dict]) -> list[RankOutcome]:
    return [RankOutcome(**entry) for entry in data]


@pytest.mark.parametrize("world_size", [2, 4])
def test_the_ranks_form_one_group_with_torchruns_environment(submission_with_ranks, world_size):
    submission, probes = submission_with_ranks
    ranks = outcomes(submission().probe(probes.ranks_of, "summed", world_size, 60))
    assert describe_failures(ranks) == ""
    assert [r.value["value"] for r in ranks] == [world_size * (world_size + 1) / 2] * world_size
    assert [r.value["world_size"] for r in ranks] == [world_size] * world_size
    environments = [r.value["env"] for r in ranks]
    assert [(e["RANK"], e["LOCAL_RANK"]) for e in environments] == [(str(i), str(i)) for i in range(world_size)]
    assert {(e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["MASTER_ADDR"], e["MASTER_PORT"]) for e in environments} \
        == {(str(world_size), str(world_size), "127.0.0.1", environments[0]["MASTER_PORT"])}


def machine_of(rank):
    return {name: os.environ[name] for name in ("RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE")}


def test_four_ranks_on_two_machines_count_their_local_ranks_per_machine():
    ranks = run_ranks(4, machine_of, limit_s=30, per_node=2)
    assert [tuple(r.value.values()) for r in ranks] == [
        ("0", "0", "0", "2", "4"), ("1", "1", "0", "2", "4"), ("2", "0", "1", "2", "4"), ("3", "1", "1", "2", "4")]
    with pytest.raises(ValueError, match="multiple of per_node"):
        run_ranks(3, machine_of, limit_s=30, per_node=2)


def store_listening(rank):
    import socket
    with socket.create_connection(("127.0.0.1", int(os.environ["MASTER_PORT"])), timeout=5):
        return os.environ["TORCHELASTIC_USE_AGENT_STORE"]


def test_the_store_listens_before_any_rank_starts_so_no_one_can_take_its_port():
    """As torchrun's agent does, the caller hosts the rendezvous store: its port is held from the
    moment it is chosen, and every rank (rank 0 too) connects to it as a client."""
    ranks = run_ranks(2, store_listening, limit_s=30)
    assert [r.value for r in ranks] == ["True", "True"], describe_failures(ranks)


def test_a_rank_that_raises_is_named_and_its_waiting_peer_is_stopped_at_the_limit(submission_with_ranks):
    submission, probes = submission_with_ranks
    started = time.monotonic()
    ranks = outcomes(submission().probe(probes.ranks_of, "one_fails", 2, 4))
    took = time.monotonic() - started
    assert [r.state for r in ranks] == ["stopped", "raised"], ranks
    message = describe_failures(ranks)
    assert "rank 1 raised ValueError: rank 1 read a file that is not there" in message
    assert "rank 0 was still running after the limit of 4 s" in message
    assert 4 <= took < 30, f"the probe took {took:.1f} s for a limit of 4 s"
    assert submission().probe(probes.ranks_of, "summed", 2, 60)[0]["state"] == "returned", \
        "the worker serves the next call"


def test_ranks_die_with_the_worker_the_test_gave_up_on(tmp_path):
    """A call past its test's deadline kills the worker; the ranks it forked go with it, whatever
    limit the probe gave them (at the levels without a pid namespace that would end them)."""
    pid_folder = tmp_path / "pids"
    pid_folder.mkdir()
    probe_file = tmp_path / "probes.py"
    probe_file.write_text(PROBES)
    backend = backends.make_backend("worker", backends.write_module(tmp_path, LEARNER), tmp_path, probe_files=[probe_file])
    try:
        with pytest.raises(CallTimeout):
            Submission(backend, time.monotonic() + 5).probe(load_module(probe_file).ranks_of, "waits_forever", 2, 600,
                                                           str(pid_folder))
    finally:
        backend.close()
    pids = [int(path.read_text()) for path in sorted(pid_folder.glob("*.pid"))]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(backends._alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if backends._alive(pid)], "a rank outlived its worker"


def test_where_no_socket_may_be_opened_that_is_said_before_any_rank_starts():
    """The uid level's filter (`refuse_sockets`): no process group could ever form, so no rank is forked."""
    code = textwrap.dedent("""
        import os
        from grader.worker.zygote import refuse_sockets
        from grader.worker.ranks import NoSockets, run_ranks
        refuse_sockets()
        try:
            run_ranks(2, lambda rank: os.getpid(), limit_s=5)
        except NoSockets as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "gives learner code no sockets" in done.stdout and "cannot run here" in done.stdout, done.stdout


def exits_on_rank_1(rank):
    if rank == 1:
        os._exit(3)
    return rank


def too_much_on_rank_0(rank):
    return b"x" * (17 << 20) if rank == 0 else rank


def no_data_on_rank_0(rank):
    return (lambda: None) if rank == 0 else rank


@pytest.mark.parametrize(("work", "failed_rank", "said"), [
    (exits_on_rank_1, 1, r"rank 1 died \(exit status 3\) without a result$"),
    (too_much_on_rank_0, 0, r"rank 0 died \(killed: its result passed 16 MiB\) without a result$"),
    (no_data_on_rank_0, 0, r"rank 0 raised \w+: its result could not be handed back \(Can't pickle"),
])
def test_a_rank_that_exits_or_hands_back_too_much_or_no_data_is_said_so(work, failed_rank, said):
    ranks = run_ranks(2, work, limit_s=30)
    assert [r.state == "returned" for r in ranks] == [rank != failed_rank for rank in range(2)], ranks
    assert ranks[1 - failed_rank].value == 1 - failed_rank
    assert re.match(said, describe_failures(ranks)), describe_failures(ranks)


def leaves_a_child_holding_the_pipe(rank):
    if os.fork() == 0:                      # as a DataLoader's worker would: it inherits every open pipe
        time.sleep(20)
        os._exit(0)
    return rank


def test_a_rank_has_answered_once_its_whole_result_is_read_though_its_child_holds_the_pipe_open():
    ranks = run_ranks(2, leaves_a_child_holding_the_pipe, limit_s=10)
    assert [(r.state, r.value) for r in ranks] == [("returned", 0), ("returned", 1)], describe_failures(ranks)


def test_the_sandbox_answers_localhost_and_its_own_name_with_its_loopback(tmp_path):
    """`torchrun --standalone` reaches its rendezvous at localhost, and gloo looks up the host's
    own name: in the jail both are its loopback, which no other grading shares."""
    source = ("import socket\n\ndef names():\n"
              "    return [socket.gethostbyname('localhost'), socket.gethostbyname(socket.gethostname())]\n")
    backend = backends.make_backend("sandbox", backends.write_module(tmp_path, source), tmp_path)
    try:
        assert Submission(backend, time.monotonic() + 60).names() == ["127.0.0.1", "127.0.0.1"]
    finally:
        backend.close()
