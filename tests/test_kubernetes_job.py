"""`grader k8s-job`: the Indexed Job's YAML, read back into the Kubernetes client's own model
types (V1Job). The deserializer drops every key its model does not know and fails on a
required one missing or of the wrong kind, so the manifest serialized again from the models
must be the manifest written: a misspelt or misplaced field would be missing from it."""
import json
import subprocess
import sys

import pytest
import yaml

from grader.course import COURSE
from grader.delivery.kubernetes import UID_CAPABILITIES
from grader.isolation.sandbox import Limits

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is not installed (pip install -e '.[test]')")
from kubernetes.client import ApiClient, V1Job  # noqa: E402


def k8s_job(*args) -> dict:
    result = subprocess.run([sys.executable, "-m", "grader.cli", "k8s-job", *map(str, args)], cwd=COURSE.root,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return yaml.safe_load(result.stdout)


def as_job(manifest: dict) -> V1Job:
    client = ApiClient()
    job = client.deserialize(json.dumps(manifest), "V1Job", "application/json")     # as an API server's answer
    assert client.sanitize_for_serialization(job) == manifest, "a field the Job's models do not know"
    return job


def test_a_sandboxed_batch_is_an_indexed_job_of_unprivileged_pods():
    manifest = k8s_job("--image", "registry.example/course:2026", "--shards", 8, "--parallelism", 3,
                       "--claim", "class-of-1000", "--jobs", 2, "--tasks", "01", "04")
    job = as_job(manifest)
    spec = job.spec
    assert (spec.completion_mode, spec.completions, spec.parallelism) == ("Indexed", 8, 3)
    assert spec.backoff_limit_per_index >= 1                  # an evicted pod is started again, and resumes
    pod = spec.template.spec
    assert pod.restart_policy == "Never" and pod.host_users is False
    (container,) = pod.containers
    assert container.image == "registry.example/course:2026"
    script = container.command[-1]
    for part in ("grader grade /submissions/*", "--shard 8", "--out-dir /grading", "--resume",
                 "--isolation required", "--jobs 2", "--tasks 01_einsum_attention 04_memory_accounting"):
        assert part in script, (part, script)
    # each pod asks for two gradings' worth: a core each (the sandbox's CPU share), memory above the measured peak
    assert container.resources.requests == container.resources.limits
    assert container.resources.requests["cpu"] == str(int(2 * Limits().cpus))
    memory_mb = int(container.resources.requests["memory"].removesuffix("Mi"))
    assert memory_mb >= 2 * 1076                              # README: a full grading's peak, 1076 MB
    # the sandbox: no root, no capability, user namespaces and a /proc of its own allowed
    assert pod.security_context.run_as_non_root and pod.security_context.run_as_user != 0
    security = container.security_context
    assert security.capabilities.drop == ["ALL"] and not security.capabilities.add
    assert security.allow_privilege_escalation is False
    assert (security.proc_mount, security.seccomp_profile.type) == ("Unmasked", "Unconfined")
    mounts = {m.mount_path: m for m in container.volume_mounts}
    assert mounts["/submissions"].read_only and not mounts["/grading"].read_only
    assert {m.sub_path for m in mounts.values()} == {"submissions", "grading"}
    (volume,) = pod.volumes
    assert volume.persistent_volume_claim.claim_name == "class-of-1000"


def test_the_uid_level_runs_as_root_with_only_the_capabilities_it_uses():
    job = as_job(k8s_job("--image", "course:1", "--shards", 2, "--claim", "batch", "--level", "uid",
                         "--gpus", 1, "--course-secret", "course-secret"))
    pod = job.spec.template.spec
    (container,) = pod.containers
    assert pod.security_context.run_as_user == 0 and pod.host_users is None
    assert pod.security_context.seccomp_profile.type == "RuntimeDefault"       # no namespaces to allow
    assert container.security_context.capabilities.drop == ["ALL"]
    assert sorted(container.security_context.capabilities.add) == sorted(UID_CAPABILITIES)
    assert "SYS_ADMIN" not in UID_CAPABILITIES and container.security_context.proc_mount is None
    assert container.resources.limits["nvidia.com/gpu"] == "1"
    mounts = {m.mount_path: m for m in container.volume_mounts}
    assert not mounts["/submissions"].read_only            # the uid level seals them before grading
    assert mounts["/course/.grader-secret"].sub_path == "grader-secret"
    assert {v.name: v for v in pod.volumes}["course-secret"].secret.secret_name == "course-secret"


def test_a_retry_is_kept_for_what_a_retry_can_mend():
    rules = as_job(k8s_job("--image", "course:1", "--shards", 3, "--claim", "batch")).spec.pod_failure_policy.rules
    by_code = {code: rule.action for rule in rules if rule.on_exit_codes for code in rule.on_exit_codes.values}
    assert by_code == {2: "FailJob", 3: "FailIndex"}          # grader.cli: usage, incomplete grading
    assert any(rule.action == "Ignore" and rule.on_pod_conditions[0].type == "DisruptionTarget" for rule in rules)


def test_the_validation_sees_a_misplaced_field():
    """The check above can fail: a field where the models have none is caught."""
    manifest = k8s_job("--image", "course:1", "--shards", 1, "--claim", "batch")
    manifest["spec"]["template"]["spec"]["containers"][0]["resource"] = {"limits": {"cpu": "1"}}
    with pytest.raises(AssertionError, match="do not know"):
        as_job(manifest)
    del manifest["spec"]["template"]["spec"]["containers"][0]["resource"]
    del manifest["spec"]["template"]["spec"]["containers"][0]["name"]       # required
    with pytest.raises(ValueError, match="name"):
        as_job(manifest)
